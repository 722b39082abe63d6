//! The pulled receive: inside one call of `packed-receive.receive`, the guest takes its next
//! queued messages through the `inbox.next` import instead of returning to the host for each.
//! A burst then costs one component call (a fiber, the entry, the export's lookups) instead of
//! one a message, while each message stays its own step.
//!
//! ```text
//! cell: takes m1, lends the ordinary lane ──> packed-receive(m1)
//!   guest: handles m1 ── inbox.next ──> host: seals m1's step, takes m2 ──> guest: handles m2
//!   guest: ── inbox.next ──> host: none (nothing queued) ──> guest returns
//! cell: takes the lane back and closes the last message's step, as after any call
//! ```
//!
//! This module is what a call carries in the actor's core while it may pull; `actor::inbox`
//! is the import that hands messages over, and the cell lends and takes back.
//!
//! Invariants (tested in `tests/pull.rs` with real guests, and in `actor::lane`):
//! - A pulled message is handled as if the cell had taken it at that moment: in lane order,
//!   only while no system or urgent message waits (those go first), with its own step (the
//!   previous one is sealed before it is handed over), its own CPU budget, stats, sender and
//!   trace span.
//! - The host hands a message over only where the cell would take it without waiting for
//!   anything: the previous step had nothing to hold (an actor that journals never pulls),
//!   was not rejected, set aside or asked to stop, no capability holds messages for the actor
//!   (its stash serves first), and the message needs none of the host's own path (no receipt,
//!   no `mote.` kind, no poison pill). Otherwise `next` is `none` and the cell goes on as usual.
//! - A burst is charged to the cell's share of its worker like the messages it takes itself.
//! - Outside a call that lent the lane, `next` is `none`.
//! - With nothing queued, a call may **linger** (`sched::linger`): `next` waits on the worker
//!   for the next message instead of answering `none`, only in a call for a likely reply (its
//!   message came from where the actor sent last), and only as long as its worker has other
//!   work, a bounded number of polls; a system or urgent message, or one for the host's own
//!   path, ends the wait with `none` at once. The previous step is sealed before the wait.
//!   After a linger that waited for nothing, the cell skips the next ones ([`Lingering`]).

use std::future::{Future, poll_fn};
use std::task::Poll;

use super::mailbox::Lent;
use super::step::Sealed;
use crate::message::Envelope;
use crate::sched::{Linger, Wait};

/// The prefix of the import a guest pulls through (`actor::inbox`).
pub(crate) const IMPORT: &str = "mote:actor/inbox@";

/// A short key of an actor path (FNV-1a; never 0): what a cell compares a message's sender
/// with, to tell a likely reply (from where it sent last) from other messages.
pub(crate) fn path_key(path: &str) -> u64 {
    let mut key: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in path.bytes() {
        key = (key ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    key.max(1)
}

/// When a cell's calls may linger (see `sched::linger`): a linger that only waited for its
/// end (nothing came) costs a wake and a poll, so after one the next lingers are skipped, twice
/// as many after each such linger in a row, up to [`MAX_SKIP`]; a linger a message came to
/// lets the next one linger again.
#[derive(Debug, Default)]
pub(crate) struct Lingering {
    skip: u8,
    wasted: u8,
}

/// The most lingers skipped after wasted ones.
pub(crate) const MAX_SKIP: u8 = 64;

impl Lingering {
    /// Whether this call may linger; counts a skipped one.
    pub(crate) fn may(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// Takes in how a call's lingers went (see [`Pull::lingered`]).
    pub(crate) fn went(&mut self, lingered: Option<bool>) {
        match lingered {
            Some(true) => *self = Lingering::default(),
            Some(false) => {
                self.wasted = self.wasted.saturating_add(1);
                self.skip = 1u8
                    .checked_shl(u32::from(self.wasted - 1))
                    .unwrap_or(MAX_SKIP)
                    .min(MAX_SKIP);
            }
            None => {}
        }
    }
}

/// Messages that must be queued behind the one a call handles for the call to pull: lending
/// costs a few atomic operations on lines the senders write, and a burst must repay them.
pub(crate) const BURST: usize = 4;

/// A call's lent lane and what it has pulled through it, kept in the actor's core during the
/// call.
pub(crate) struct Pull {
    lent: Lent,
    /// Messages it may still hand over.
    budget: u32,
    /// The kind and body of the message being handled, if it was pulled: what a rejection or
    /// a set-aside gives back.
    current: Option<(String, Vec<u8>)>,
    /// The span of the message being handled, the first one's (the cell's) until a pull.
    span: tracing::Span,
    /// A step sealed at a pull that has a write to wait for: the cell finishes it.
    sealed: Option<Sealed>,
    /// Its linger on a worker while it waits for the next message, if it may wait.
    linger: Option<Linger>,
    /// Whether it waits now, and whether a message came while it waited.
    waiting: bool,
    paid: bool,
}

impl Pull {
    /// A pull through `lent` of at most `budget` messages, after the message handled in
    /// `span`; it waits for its next message on its worker if it may `linger`.
    pub(crate) fn new(lent: Lent, budget: u32, span: tracing::Span, linger: bool) -> Box<Pull> {
        Box::new(Pull {
            lent,
            budget,
            current: None,
            span,
            sealed: None,
            linger: linger.then(Linger::new),
            waiting: false,
            paid: false,
        })
    }

    /// Whether it may hand over another message.
    pub(crate) fn open(&self) -> bool {
        self.budget > 0
    }

    /// Ends the pull with a sealed step the cell must finish: nothing more is handed over.
    pub(crate) fn close_with(&mut self, sealed: Sealed) {
        self.sealed = Some(sealed);
        self.budget = 0;
    }

    /// Takes the next message the host may hand over without its own path, if one is queued.
    pub(crate) fn take(&mut self) -> Option<Envelope> {
        let envelope = self
            .lent
            .next_if(|e| e.receipt.is_none() && !e.kind.starts_with("mote."))?;
        self.budget -= 1;
        Some(envelope)
    }

    /// The next message the host may hand over, waiting for it while the worker has other work
    /// (see `sched::linger`): `None` once the linger ends, off the workers, or when what comes
    /// next is the cell's to take (a system or urgent message, or one for the host's own path).
    pub(crate) fn linger(&mut self) -> impl Future<Output = Option<Envelope>> + Send + '_ {
        poll_fn(move |cx| {
            let mut looked_again = false;
            loop {
                if let Some(envelope) = self.take() {
                    if let Some(linger) = &self.linger {
                        linger.resumed();
                    }
                    self.paid |= std::mem::take(&mut self.waiting);
                    return Poll::Ready(Some(envelope));
                }
                let Some(linger) = &mut self.linger else {
                    return Poll::Ready(None);
                };
                if looked_again || linger.wait(cx.waker()) == Wait::Over {
                    // Ended, off the workers, or something is queued that this call may not
                    // take: the cell goes on.
                    return Poll::Ready(None);
                }
                if self.lent.wait(cx.waker()) {
                    self.waiting = true;
                    return Poll::Pending;
                }
                // A message came in meanwhile, or one waits that is not this call's.
                looked_again = true;
            }
        })
    }

    /// How its lingers went: `None` if it never waited, else whether a message came while it
    /// waited (true) or it only waited for its linger to end (false).
    pub(crate) fn lingered(&self) -> Option<bool> {
        let linger = self.linger.as_ref()?;
        match (self.paid, linger.ended()) {
            (true, _) => Some(true),
            (false, true) => Some(false),
            (false, false) => None,
        }
    }

    /// The message handed over now, in `span`: the previous message's span ends.
    pub(crate) fn handling(&mut self, span: tracing::Span, kind: String, body: Vec<u8>) {
        self.span = span;
        self.current = Some((kind, body));
    }

    /// The kind and body of the message handled last, if it was pulled.
    pub(crate) fn take_current(&mut self) -> Option<(String, Vec<u8>)> {
        self.current.take()
    }

    /// What the call leaves the cell: the lane (which counts the messages pulled), the span of
    /// the message handled last and a sealed step to finish.
    pub(crate) fn end(self) -> (Lent, tracing::Span, Option<Sealed>) {
        (self.lent, self.span, self.sealed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::{Lingering, MAX_SKIP, Pull};
    use crate::actor::mailbox::{ActorRef, SystemMsg, test_mailbox};
    use crate::message::{Envelope, StopReason};
    use crate::sched::tests::scheduler;

    const DEADLINE: Duration = Duration::from_secs(20);

    /// What a pull's wait for its next message gave: the kind taken, and how it lingered.
    type Outcome = (Option<String>, Option<bool>);

    /// On one worker, lingers for the next message of a fresh mailbox while a second task
    /// does `meanwhile` to that mailbox's handle (woken just before the wait, as a reply's
    /// receiver is, so the worker is busy with it); returns what the wait gave.
    fn linger_while(meanwhile: impl FnOnce(&ActorRef) + Send + 'static) -> Outcome {
        let (_runtime, scheduler) = scheduler(1);
        let (handle, mailbox) = test_mailbox("/user/a", 1, 16);
        let (go, wait_for_go) = tokio::sync::oneshot::channel::<()>();
        scheduler.spawn(async move {
            if wait_for_go.await.is_ok() {
                meanwhile(&handle);
            }
        });
        let (tx, rx) = mpsc::channel();
        scheduler.spawn(async move {
            let mut pull = Pull::new(mailbox.lend(), 8, tracing::Span::none(), true);
            let _ = go.send(());
            let taken = pull.linger().await.map(|e| e.kind);
            let _ = tx.send((taken, pull.lingered()));
            drop(mailbox);
        });
        rx.recv_timeout(DEADLINE).expect("the wait ended")
    }

    #[test]
    fn a_lingering_pull_takes_the_message_sent_while_it_waits() {
        let outcome = linger_while(|handle| {
            handle
                .tell(Envelope::new(None, "reply", Vec::new()))
                .expect("queued");
        });
        assert_eq!(outcome, (Some("reply".into()), Some(true)));
    }

    #[test]
    fn a_system_message_ends_the_wait_and_is_left_to_the_cell() {
        let outcome = linger_while(|handle| {
            assert!(handle.signal(SystemMsg::Stop(StopReason::Normal)));
        });
        assert_eq!(outcome, (None, None), "not taken, and not the linger's end");
    }

    #[test]
    fn a_message_for_the_hosts_own_path_ends_the_wait_and_is_left_to_the_cell() {
        let outcome = linger_while(|handle| {
            handle
                .tell(Envelope::new(None, "mote.terminated", Vec::new()))
                .expect("queued");
        });
        assert_eq!(outcome, (None, None));
    }

    #[test]
    fn with_nothing_coming_the_wait_ends_when_the_worker_runs_dry() {
        let outcome = linger_while(|_| {});
        assert_eq!(outcome, (None, Some(false)), "ended by its worker");
    }

    #[test]
    fn off_the_workers_a_pull_does_not_wait() {
        let (_handle, mailbox) = test_mailbox("/user/a", 1, 16);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let mut pull = Pull::new(mailbox.lend(), 8, tracing::Span::none(), true);
        let taken = runtime.block_on(pull.linger());
        assert!(taken.is_none());
        assert_eq!(pull.lingered(), None);
    }

    #[test]
    fn wasted_lingers_are_skipped_twice_as_long_each_time_until_one_pays() {
        let mut lingering = Lingering::default();
        let skipped = |lingering: &mut Lingering| {
            let mut n = 0;
            while !lingering.may() {
                n += 1;
            }
            n
        };
        assert_eq!(skipped(&mut lingering), 0);
        let mut runs = Vec::new();
        for _ in 0..9 {
            lingering.went(Some(false));
            runs.push(skipped(&mut lingering));
        }
        assert_eq!(runs, [1, 2, 4, 8, 16, 32, 64, 64, 64]);
        assert_eq!(u32::from(MAX_SKIP), 64);
        // A call that never waited says nothing; one that waited and got a message resets.
        lingering.went(Some(false));
        lingering.went(None);
        lingering.went(Some(true));
        assert_eq!(skipped(&mut lingering), 0);
        lingering.went(Some(false));
        assert_eq!(skipped(&mut lingering), 1);
    }
}
