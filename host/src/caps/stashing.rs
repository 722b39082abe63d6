//! `mote:actor/stash`: the stash, kept by the host (Akka `stash`, µJavaActors `peek`/`remove`,
//! Erlang's selective receive). An actor sets aside the message it handles and later has them
//! all handled again, in order, ahead of its mailbox; meanwhile it may look at them and take
//! one out of order.
//!
//! ```text
//! receive(m) ──stash()──> held: [.., m]        (once the call returned Ok)
//! unstash-all() ────────> ready: held, in order (handled next, one per call, before the mailbox);
//!                          m too if this call stashed it
//! take(kind) ───────────> this call handles it too: acknowledged with its step
//! ```
//!
//! Invariants:
//! - A stashed message keeps its sender and its receipt: a durable one is acknowledged only
//!   by the step of a call that handles it (unstashed, or taken), so a crash loses none.
//! - The stash outlives the instance: a restart keeps it as it was, an upgrade hands it to the
//!   new version; when the incarnation ends, what it still holds becomes dead letters.
//! - An actor holds at most its quota of messages and of bytes in its stash; past it `stash`
//!   is refused (`full`) and nothing changes.
//! - Unstashed messages keep their order, ahead of anything in the mailbox.
//! - An image keeps the stash, held and ready, in order (not a durable message: its
//!   acknowledgement belongs to the host that received it), within the quotas on restore.

use std::collections::VecDeque;
use std::sync::Arc;

use wasmtime::component::Linker;

use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::address::{ActorPath, Address};
use crate::error::HostError;
use crate::kernel::Kernel;
use crate::kernel::deadletters::DeadLetterReason;
use crate::message::Envelope;
use crate::quota::Quota;
use crate::sandbox::bindings::mote::actor::stash::{self as wit, StashError};
use crate::sandbox::bindings::{WitMessage, to_wit_address};

/// The capability behind the `stash` interface.
pub(crate) struct Stashing;

/// One incarnation's stash: what it set aside, and what it released to be handled next.
///
/// Boxed at the first message kept, as most actors never stash: inline, the queues made every
/// actor's store 72 bytes larger, past the allocator's 2 KiB class (see `actor::instance`).
#[derive(Default, Clone)]
pub(crate) struct Stash(Option<Box<Queues>>);

/// The stash's queues.
#[derive(Default, Clone)]
struct Queues {
    /// Stashed messages, oldest first.
    held: VecDeque<Envelope>,
    /// Unstashed messages not handled yet, to go before the mailbox, in order.
    ready: VecDeque<Envelope>,
    /// Bytes of the bodies in `held` and `ready`.
    bytes: usize,
    /// Set by an `unstash-all` after `stash` in one call: the message the call keeps is
    /// released with the others.
    release_kept: bool,
}

impl Stash {
    /// Its queues, if it ever kept a message.
    fn queues(&self) -> Option<&Queues> {
        self.0.as_deref()
    }

    /// Its queues, made at the first use.
    fn queues_mut(&mut self) -> &mut Queues {
        self.0.get_or_insert_default()
    }

    /// Messages held or ready.
    fn len(&self) -> usize {
        self.queues().map_or(0, Queues::len)
    }

    /// Whether `size` more bytes in one more message fit the actor's quotas.
    fn fits(&self, actor: &ActorCore, size: usize) -> bool {
        let quotas = actor.quotas();
        let bytes = self.queues().map_or(0, |q| q.bytes);
        self.len() < quotas.stash && bytes.saturating_add(size) <= quotas.stash_bytes
    }

    /// The oldest held message of `kind` (any for `None`), and its position.
    fn find(&mut self, kind: Option<&str>) -> Option<(&mut Queues, usize)> {
        let queues = self.0.as_deref_mut()?;
        let at = queues.find(kind)?;
        Some((queues, at))
    }
}

impl Queues {
    /// Messages held or ready.
    fn len(&self) -> usize {
        self.held.len() + self.ready.len()
    }

    /// The position in `held` of the oldest message of `kind` (any for `None`).
    fn find(&self, kind: Option<&str>) -> Option<usize> {
        match kind {
            None => (!self.held.is_empty()).then_some(0),
            Some(kind) => self.held.iter().position(|e| e.kind == kind),
        }
    }
}

/// A stashed message as an image keeps it: its sender (path and incarnation), kind and body.
#[derive(serde::Serialize, serde::Deserialize)]
struct KeptMessage {
    sender: Option<(String, u64)>,
    kind: String,
    body: Vec<u8>,
}

impl KeptMessage {
    fn of(envelope: &Envelope) -> Self {
        KeptMessage {
            sender: envelope
                .sender
                .as_ref()
                .map(|a| (a.path.to_string(), a.incarnation)),
            kind: envelope.kind.clone(),
            body: envelope.body.clone(),
        }
    }

    /// The message again; a sender that is no path is refused (the image is untrusted).
    fn into_envelope(self) -> Result<Envelope, String> {
        let sender = match self.sender {
            Some((path, incarnation)) => Some(Address {
                path: ActorPath::parse(&path).map_err(|e| e.to_string())?,
                incarnation,
            }),
            None => None,
        };
        Ok(Envelope::new(sender, self.kind, self.body))
    }
}

/// A stash as an image keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
struct KeptStash {
    held: Vec<KeptMessage>,
    ready: Vec<KeptMessage>,
}

impl Capability for Stashing {
    type State = Stash;
    const IMPORTS: &'static [&'static str] = &["mote:actor/stash@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Stashing)
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        wit::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, origin: Origin<'_, Stash>) -> Stash {
        match origin {
            Origin::Spawned => Stash::default(),
            Origin::Restarted { old, .. } => old,
            // The old instance keeps its stash until the new one takes over; only one of the
            // two lives on.
            Origin::Upgraded { old } => old.clone(),
        }
    }

    fn capture(&self, _actor: &ActorCore, state: &Stash) -> Result<Vec<u8>, String> {
        let Some(state) = state.queues().filter(|q| q.len() > 0) else {
            return Ok(Vec::new());
        };
        if state
            .held
            .iter()
            .chain(&state.ready)
            .any(|e| e.receipt.is_some())
        {
            return Err(
                "a durable message is stashed: its acknowledgement belongs to this host".into(),
            );
        }
        let keep = |queue: &VecDeque<Envelope>| queue.iter().map(KeptMessage::of).collect();
        Ok(crate::storage::database::encode(&KeptStash {
            held: keep(&state.held),
            ready: keep(&state.ready),
        }))
    }

    fn restore(&self, actor: &ActorCore, image: &[u8]) -> Result<Stash, String> {
        if image.is_empty() {
            return Ok(Stash::default());
        }
        let kept: KeptStash = postcard::from_bytes(image).map_err(|e| e.to_string())?;
        let mut stash = Queues::default();
        for message in kept.held {
            stash.held.push_back(message.into_envelope()?);
        }
        for message in kept.ready {
            stash.ready.push_back(message.into_envelope()?);
        }
        stash.bytes = stash
            .held
            .iter()
            .chain(&stash.ready)
            .map(|e| e.body.len())
            .sum();
        let quotas = actor.quotas();
        if stash.len() > quotas.stash || stash.bytes > quotas.stash_bytes {
            return Err("more stashed than the actor's quota allows".into());
        }
        Ok(Stash(Some(Box::new(stash))))
    }

    fn stopped(&self, kernel: &Arc<Kernel>, actor: &Address, state: Option<&mut Stash>) {
        let Some(stash) = state.and_then(|s| s.0.take()) else {
            return;
        };
        let target = actor.to_string();
        for envelope in stash.ready.into_iter().chain(stash.held) {
            kernel.dead_letter(envelope, target.clone(), DeadLetterReason::Stopped);
        }
    }

    fn next(&self, state: &mut Stash) -> Option<Envelope> {
        let state = state.0.as_deref_mut()?;
        let envelope = state.ready.pop_front()?;
        state.bytes -= envelope.body.len();
        Some(envelope)
    }

    fn keep(&self, state: &mut Stash, envelope: Envelope) -> Result<(), Envelope> {
        let state = state.queues_mut();
        state.bytes += envelope.body.len();
        if std::mem::take(&mut state.release_kept) {
            state.ready.push_back(envelope);
        } else {
            state.held.push_back(envelope);
        }
        Ok(())
    }

    fn abandon(&self, state: &mut Stash) {
        if let Some(state) = state.0.as_deref_mut() {
            state.release_kept = false;
        }
    }

    fn holds(&self, state: &Stash) -> bool {
        state.len() > 0
    }
}

/// A stashed message as the guest sees it.
fn to_wit(envelope: Envelope) -> WitMessage {
    WitMessage {
        sender: envelope.sender.map(to_wit_address),
        kind: envelope.kind,
        body: envelope.body,
    }
}

impl wit::Host for Call<'_, Stashing> {
    fn stash(&mut self) -> Result<(), StashError> {
        let actor = &mut *self.actor;
        let Some(size) = actor.current_bytes.filter(|_| actor.rejected.is_none()) else {
            return Err(StashError::NoMessage);
        };
        if actor.kept {
            return Ok(());
        }
        if !self.state.fits(actor, size as usize) {
            actor.refuse(Quota::Stash);
            return Err(StashError::Full);
        }
        actor.kept = true;
        Ok(())
    }

    fn unstash_all(&mut self) -> u32 {
        if self.state.len() == 0 && !self.actor.kept {
            return 0;
        }
        let stash = self.state.queues_mut();
        let mut n = stash.held.len();
        // Behind what an earlier unstash released and is not handled yet: older first.
        stash.ready.extend(stash.held.drain(..));
        if self.actor.kept {
            // Stashed in this call: it follows the others once the call returns.
            stash.release_kept = true;
            n += 1;
        }
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    fn stashed(&mut self) -> u32 {
        u32::try_from(self.state.len()).unwrap_or(u32::MAX)
    }

    fn peek(&mut self, kind: Option<String>) -> Option<WitMessage> {
        let (stash, at) = self.state.find(kind.as_deref())?;
        stash.held.get(at).cloned().map(to_wit)
    }

    fn take(&mut self, kind: Option<String>) -> Option<WitMessage> {
        let (stash, at) = self.state.find(kind.as_deref())?;
        let mut envelope = stash.held.remove(at)?;
        stash.bytes -= envelope.body.len();
        if let Some(receipt) = envelope.receipt.take() {
            self.actor.step.consume(receipt);
        }
        // This call handles it now: a forward passes its sender on (a throttle's or a
        // queue's relay), still never a sender the guest names.
        self.actor.current_sender = envelope.sender.clone();
        Some(to_wit(envelope))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(kind: &str, size: usize) -> Envelope {
        Envelope::new(None, kind, vec![0; size])
    }

    #[test]
    fn kept_messages_come_back_in_order_and_the_bytes_add_up() {
        let (cap, mut stash) = (Stashing, Stash::default());
        for (kind, size) in [("a", 3), ("b", 4), ("a", 5)] {
            assert!(cap.keep(&mut stash, envelope(kind, size)).is_ok());
        }
        let bytes = |stash: &Stash| stash.queues().map_or(0, |q| q.bytes);
        assert_eq!((stash.len(), bytes(&stash)), (3, 12));
        assert!(cap.holds(&stash));
        assert_eq!(stash.find(Some("b")).map(|(_, at)| at), Some(1));
        assert_eq!(stash.find(None).map(|(_, at)| at), Some(0));
        assert_eq!(stash.find(Some("c")).map(|(_, at)| at), None);
        assert!(cap.next(&mut stash).is_none(), "nothing is released yet");
        let queues = stash.queues_mut();
        queues.ready.extend(queues.held.drain(..));
        let kinds: Vec<String> = std::iter::from_fn(|| cap.next(&mut stash))
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, ["a", "b", "a"]);
        assert_eq!((stash.len(), bytes(&stash)), (0, 0));
        assert!(!cap.holds(&stash));
    }
}
