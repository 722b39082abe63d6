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
//! Invariants (tested in `tests/pull.rs` with real guests, and below):
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

use wasmtime::component::{HasSelf, Linker};

use super::cell::{Sealed, seal};
use super::core::ActorCore;
use super::mailbox::Lent;
use crate::caps::{ActorState, Caps, States};
use crate::message::Envelope;
use crate::sandbox::bindings::pulled::mote::actor::inbox;
use crate::sandbox::packed::pack;
use crate::trace;

/// The prefix of the import a guest pulls through.
pub(crate) const IMPORT: &str = "mote:actor/inbox@";

/// Adds `inbox` to the host's linker.
pub(crate) fn link(linker: &mut Linker<ActorState>) -> wasmtime::Result<()> {
    inbox::add_to_linker::<_, HasSelf<ActorState>>(linker, |state| state)
}

/// A call's lent lane and what it has pulled through it, kept in the actor's core during the
/// call.
pub(crate) struct Pull {
    lent: Lent,
    /// Messages it may still hand over.
    budget: u32,
    /// The kind and body of the message being handled, if it was pulled: what a rejection or
    /// a set-aside gives back.
    current: Option<(String, Vec<u8>)>,
    /// That message's span.
    span: tracing::Span,
    /// A step sealed at a pull that has a write to wait for: the cell finishes it.
    sealed: Option<Sealed>,
}

impl Pull {
    /// A pull through `lent` of at most `budget` messages.
    pub(crate) fn new(lent: Lent, budget: u32) -> Box<Pull> {
        Box::new(Pull {
            lent,
            budget,
            current: None,
            span: tracing::Span::none(),
            sealed: None,
        })
    }

    /// The kind and body of the message handled last, if it was pulled.
    pub(crate) fn take_current(&mut self) -> Option<(String, Vec<u8>)> {
        self.current.take()
    }

    /// What the call leaves the cell: the lane, the messages pulled, the span of the last one
    /// (if it was pulled) and a sealed step to finish.
    pub(crate) fn end(self) -> (Lent, Option<tracing::Span>, Option<Sealed>) {
        let span = (self.lent.taken() > 0).then_some(self.span);
        (self.lent, span, self.sealed)
    }

    /// Closes the message being handled and takes the next one, packed (see the invariants).
    fn next(&mut self, core: &mut ActorCore, states: &mut States, caps: &Caps) -> Option<Vec<u8>> {
        if self.budget == 0
            || core.rejected.is_some()
            || core.kept
            || core.stop_requested
            || core.step.holds()
            || caps.holds(states)
        {
            return None;
        }
        if let Some(sealed) = seal(caps, core, states, None) {
            // Not expected (only a journal writes, and a journaled step holds): the cell waits
            // for the write after the call.
            self.sealed = Some(sealed);
            self.budget = 0;
            return None;
        }
        let mut envelope = self
            .lent
            .next_if(|e| e.receipt.is_none() && !e.kind.starts_with("mote."))?;
        self.budget -= 1;
        core.stats.received.bump();
        core.stats.pulled.bump();
        core.meter.begin_call();
        self.span = trace::handling(&core.me, &core.module, &mut envelope);
        core.trace = envelope.trace();
        let Envelope {
            sender, kind, body, ..
        } = envelope;
        let mut packed = Vec::new();
        pack(sender.as_ref(), &kind, &body, &mut packed);
        core.current_sender = sender;
        core.current_bytes = Some(body.len());
        self.current = Some((kind, body));
        Some(packed)
    }
}

impl inbox::Host for ActorState {
    fn next(&mut self) -> Option<Vec<u8>> {
        let ActorState { core, caps, set } = self;
        let mut pull = core.pull.take()?;
        let next = pull.next(core, caps, set);
        core.pull = Some(pull);
        next
    }
}
