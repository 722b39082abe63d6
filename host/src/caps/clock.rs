//! `mote:actor/clock`: time as one actor sees it. How long ago it was spawned, and how much
//! time its own calls have run so far (see `sandbox::meter`).
//!
//! Invariants:
//! - Both readings are monotonic for one incarnation: a restart or an upgrade keeps counting.
//! - CPU time counts only the time the actor's calls were being run, never the time they
//!   waited for the scheduler: at any moment it is at most the time since the spawn.

use wasmtime::component::Linker;

use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::error::HostError;
use crate::sandbox::bindings::mote::actor::clock;
use crate::stats::nanos;

/// The capability behind the `clock` interface. It keeps no state: the readings come from the
/// actor's meter.
pub(crate) struct Clock;

impl Capability for Clock {
    type State = ();
    const IMPORTS: &'static [&'static str] = &["mote:actor/clock@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Clock)
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        clock::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, _origin: Origin<'_, ()>) {}
}

impl clock::Host for Call<'_, Clock> {
    fn since_start(&mut self) -> u64 {
        nanos(self.actor.stats.usage.age())
    }

    fn cpu_time(&mut self) -> u64 {
        nanos(self.actor.stats.usage.cpu())
    }
}
