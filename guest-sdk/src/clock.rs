//! The clock: the [`Context`] methods wrapping the `clock` imports of the WIT contract.
//!
//! Both readings belong to the actor: how long ago it was spawned, and how much time its own
//! calls have run. A restart or an upgrade keeps counting. For the host's wall clock and
//! monotonic clock, use `std::time` (WASI's clocks).

use core::time::Duration;

use crate::bindings::mote::actor::clock;
use crate::context::Context;

impl Context {
    /// How long ago this actor was spawned.
    pub fn since_start(&self) -> Duration {
        crate::outbox::flush();
        Duration::from_nanos(clock::since_start())
    }

    /// How much time this actor's calls have run so far, this one included: the time its code
    /// (and the host calls it made) occupied a thread, without the time it waited for the
    /// scheduler. At any moment it is at most [`Context::since_start`].
    pub fn cpu_time(&self) -> Duration {
        crate::outbox::flush();
        Duration::from_nanos(clock::cpu_time())
    }
}
