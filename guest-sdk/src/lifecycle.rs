//! Pausing children: the [`Context`] methods wrapping the `lifecycle` imports of the WIT
//! contract. A deactivated child keeps its mailbox, in order, and handles nothing until its
//! parent activates it; it can still be stopped, restarted and upgraded meanwhile.

use crate::bindings::mote::actor::lifecycle;
use crate::bindings::mote::actor::types::Address;
use crate::context::Context;

impl Context {
    /// Deactivates `child`; false if it is not a live child of this actor.
    pub fn deactivate(&self, child: &Address) -> bool {
        crate::outbox::flush();
        lifecycle::deactivate(child)
    }

    /// Activates `child` again; false if it is not a live child of this actor.
    pub fn activate(&self, child: &Address) -> bool {
        crate::outbox::flush();
        lifecycle::activate(child)
    }
}
