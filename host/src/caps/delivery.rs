//! `mote:actor/delivery`: what a host crash may do to the durable messages of an actor that keeps
//! no durable state. A durable message (sent by a persistent actor) is an outbox row until its
//! receiver acknowledges it:
//!
//! ```text
//! receiver                      acknowledged                       after a crash
//! persistent (any mode)         in the commit of its new state     exactly once
//! other, at-least-once (deflt)  lazily, after it handled it        may arrive again
//! other, at-most-once           durably (fsync), before it sees it never again; may be lost
//! ```
//!
//! At-least-once is the default because losing a message is usually worse than seeing it twice,
//! and it costs no fsync per message; an actor whose handling must not be repeated (it charges,
//! it launches) asks for at-most-once.
//!
//! Invariants:
//! - An actor in at-most-once mode that is not persistent never sees a durable message whose
//!   acknowledgement is not durable: the cell awaits the acknowledgement before the call, and a
//!   failed acknowledgement fails the actor (kind `commit`) without delivering the message; its
//!   row stays, for a later host run.
//! - The mode never weakens exactly-once: a persistent actor's messages are acknowledged by its
//!   own commit, whatever its mode.
//! - The mode belongs to the actor's incarnation: it holds across restarts and upgrades until the
//!   actor changes it.
//!
//! The unit keeps the mode; the durable write is the kernel's (`Kernel::acknowledge`, served by
//! the capability that keeps durable messages).

use std::sync::Arc;

use wasmtime::component::Linker;

use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::actor::step::Commit;
use crate::error::HostError;
use crate::kernel::Kernel;
use crate::message::Receipt;
use crate::sandbox::bindings::mote::actor::delivery::{self as wit, DeliveryMode};

/// The capability behind the `delivery` interface.
pub(crate) struct Delivery;

/// How an actor's durable messages are acknowledged if it is not persistent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Mode {
    /// After it handled them, lazily.
    #[default]
    AtLeastOnce,
    /// Durably, before it sees them.
    AtMostOnce,
}

impl Mode {
    /// Whether a durable message for an actor in this mode, `persistent` or not, is
    /// acknowledged before the actor sees it.
    fn acknowledges_first(self, persistent: bool) -> bool {
        self == Mode::AtMostOnce && !persistent
    }
}

impl Capability for Delivery {
    type State = Mode;
    const IMPORTS: &'static [&'static str] = &["mote:actor/delivery@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Delivery)
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        wit::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, origin: Origin<'_, Mode>) -> Mode {
        match origin {
            Origin::Spawned => Mode::default(),
            Origin::Restarted { old, .. } => old,
            Origin::Upgraded { old } => *old,
        }
    }

    fn capture(&self, _actor: &ActorCore, mode: &Mode) -> Result<Vec<u8>, String> {
        Ok(match mode {
            Mode::AtLeastOnce => Vec::new(),
            Mode::AtMostOnce => vec![1],
        })
    }

    fn restore(&self, _actor: &ActorCore, image: &[u8]) -> Result<Mode, String> {
        match image {
            [] => Ok(Mode::AtLeastOnce),
            [1] => Ok(Mode::AtMostOnce),
            _ => Err("an unknown delivery mode".into()),
        }
    }

    fn deliver(
        &self,
        mode: &mut Mode,
        actor: &ActorCore,
        receipt: &mut Option<Receipt>,
    ) -> Option<Commit> {
        // A persistent actor's steps hold their effects: its own commit acknowledges.
        if !mode.acknowledges_first(actor.step.holds()) {
            return None;
        }
        acknowledge_first(&actor.kernel, receipt)
    }
}

/// Takes `receipt` and the kernel's durable write that acknowledges it; `None` (the receipt
/// left in place) without a database.
fn acknowledge_first(kernel: &Arc<Kernel>, receipt: &mut Option<Receipt>) -> Option<Commit> {
    let ack = kernel.acknowledge((*receipt)?)?;
    *receipt = None;
    Some(ack)
}

impl wit::Host for Call<'_, Delivery> {
    fn set_delivery(&mut self, mode: DeliveryMode) {
        *self.state = match mode {
            DeliveryMode::AtLeastOnce => Mode::AtLeastOnce,
            DeliveryMode::AtMostOnce => Mode::AtMostOnce,
        };
    }

    fn delivery(&mut self) -> DeliveryMode {
        match self.state {
            Mode::AtLeastOnce => DeliveryMode::AtLeastOnce,
            Mode::AtMostOnce => DeliveryMode::AtMostOnce,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_receiver_at_most_once_that_is_not_persistent_acknowledges_first() {
        assert!(Mode::AtMostOnce.acknowledges_first(false));
        // A persistent receiver's own commit acknowledges it: exactly once, in any mode.
        assert!(!Mode::AtMostOnce.acknowledges_first(true));
        assert!(!Mode::AtLeastOnce.acknowledges_first(false));
        assert!(!Mode::AtLeastOnce.acknowledges_first(true));
        assert_eq!(Mode::default(), Mode::AtLeastOnce);
    }
}
