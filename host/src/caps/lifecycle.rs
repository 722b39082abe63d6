//! `mote:actor/lifecycle`: a parent deactivates and activates its children (Actor4j LC1,
//! µJavaActors). A deactivated actor keeps its mailbox and handles nothing but host signals
//! until activated (see the cell's serve loop).
//!
//! Invariants:
//! - Only the parent reaches a child's activation: any other target is refused (`false`).
//! - Deactivation loses and reorders nothing: messages queue as they arrive and are handled in
//!   order once the child is activated.

use wasmtime::component::Linker;

use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::actor::mailbox::SystemMsg;
use crate::error::HostError;
use crate::sandbox::bindings::WitAddress;
use crate::sandbox::bindings::mote::actor::lifecycle;

/// The capability behind the `lifecycle` interface; it keeps no state.
pub(crate) struct Lifecycle;

impl Capability for Lifecycle {
    type State = ();
    const IMPORTS: &'static [&'static str] = &["mote:actor/lifecycle@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Lifecycle)
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        lifecycle::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, _origin: Origin<'_, ()>) {}
}

impl Call<'_, Lifecycle> {
    /// Signals `child` if it is a live child of the caller (this incarnation of it).
    fn signal_child(&self, child: &WitAddress, signal: SystemMsg) -> bool {
        let name = child.path.rsplit('/').next().unwrap_or_default();
        self.actor.children.get(name).is_some_and(|c| {
            c.address.path.as_str() == child.path
                && c.address.incarnation == child.incarnation
                && c.signal(signal)
        })
    }
}

impl lifecycle::Host for Call<'_, Lifecycle> {
    fn deactivate(&mut self, child: WitAddress) -> bool {
        self.signal_child(&child, SystemMsg::Deactivate)
    }

    fn activate(&mut self, child: WitAddress) -> bool {
        self.signal_child(&child, SystemMsg::Activate)
    }
}
