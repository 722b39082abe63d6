//! `mote:actor/lookup`: an actor's live children, and the address living at a path.
//!
//! Invariants:
//! - `children` lists exactly the children the actor's core holds: spawned and not yet
//!   terminated (bounded by its descendants quota).
//! - `resolve` reads the registry: the incarnation living at the path now, or none; a path
//!   past the length bound is refused like any path (and counted). `mailbox-depth` reads the
//!   same entry's queued count, and is bounded the same way.

use wasmtime::component::Linker;

use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::error::HostError;
use crate::sandbox::bindings::mote::actor::lookup;
use crate::sandbox::bindings::{WitAddress, to_wit_address};

/// The capability behind the `lookup` interface. It keeps no state: children are the actor
/// core's, paths the kernel's registry.
pub(crate) struct Lookup;

impl Capability for Lookup {
    type State = ();
    const IMPORTS: &'static [&'static str] = &["mote:actor/lookup@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Lookup)
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        lookup::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, _origin: Origin<'_, ()>) {}
}

impl lookup::Host for Call<'_, Lookup> {
    fn children(&mut self) -> Vec<WitAddress> {
        self.actor
            .children
            .values()
            .map(|child| to_wit_address(child.address.clone()))
            .collect()
    }

    fn resolve(&mut self, path: String) -> Option<WitAddress> {
        self.actor.check_path(&path).ok()?;
        let path = self.actor.me.path.select(&path).ok()?;
        let actor = self.actor.kernel.registry.get(path.as_str())?;
        Some(to_wit_address(actor.address))
    }

    fn mailbox_depth(&mut self, path: String) -> Option<u32> {
        self.actor.check_path(&path).ok()?;
        let path = self.actor.me.path.select(&path).ok()?;
        let actor = self.actor.kernel.registry.get(path.as_str())?;
        Some(u32::try_from(actor.depth.messages()).unwrap_or(u32::MAX))
    }
}
