//! Delivery guarantees: the [`Context`] methods wrapping the `delivery` imports of the WIT
//! contract. They choose what a host crash may do to the durable messages (those a persistent
//! actor sent) that reach an actor keeping no durable state of its own.

use crate::bindings::mote::actor::delivery;
use crate::context::Context;

/// How durable messages reach an actor that is not persistent.
///
/// A persistent actor (one that called `recover`) acknowledges each durable message in the
/// same commit as its new state: exactly once, whatever its mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Delivery {
    /// Acknowledged after the actor handled it: after a host crash it may arrive again, never
    /// lost. The default: no fsync per message.
    #[default]
    AtLeastOnce,
    /// Acknowledged durably (fsync) before the actor sees it: after a host crash it never
    /// arrives again, but one in flight may be lost. For handling that must not be repeated.
    AtMostOnce,
}

impl Context {
    /// Sets how the durable messages this actor receives from now on are acknowledged
    /// (typically in `start`); the mode holds across restarts until changed.
    pub fn set_delivery(&self, mode: Delivery) {
        crate::outbox::flush();
        delivery::set_delivery(match mode {
            Delivery::AtLeastOnce => delivery::DeliveryMode::AtLeastOnce,
            Delivery::AtMostOnce => delivery::DeliveryMode::AtMostOnce,
        });
    }

    /// This actor's delivery mode.
    pub fn delivery(&self) -> Delivery {
        crate::outbox::flush();
        match delivery::delivery() {
            delivery::DeliveryMode::AtLeastOnce => Delivery::AtLeastOnce,
            delivery::DeliveryMode::AtMostOnce => Delivery::AtMostOnce,
        }
    }
}
