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

use super::mailbox::Lent;
use super::step::Sealed;
use crate::message::Envelope;

/// The prefix of the import a guest pulls through (`actor::inbox`).
pub(crate) const IMPORT: &str = "mote:actor/inbox@";

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
}

impl Pull {
    /// A pull through `lent` of at most `budget` messages, after the message handled in
    /// `span`.
    pub(crate) fn new(lent: Lent, budget: u32, span: tracing::Span) -> Box<Pull> {
        Box::new(Pull {
            lent,
            budget,
            current: None,
            span,
            sealed: None,
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
