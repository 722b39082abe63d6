//! `mote:actor/priority`: urgent messages (Actor4j's priority queues), sent on the receiver's
//! urgent lane and served before its ordinary messages.
//!
//! Invariants:
//! - An urgent send is a send: the same size, kind and path bounds, the same mailbox bounds at
//!   the receiver, and held like any send of a persistent actor's step.
//! - Only the lane differs: urgent messages of one sender keep their order among themselves.

use wasmtime::component::Linker;

use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::error::HostError;
use crate::message::Envelope;
use crate::sandbox::bindings::mote::actor::priority;
use crate::sandbox::bindings::{WitAddress, WitSendError};

/// The capability behind the `priority` interface; it keeps no state.
pub(crate) struct Priority;

impl Capability for Priority {
    type State = ();
    const IMPORTS: &'static [&'static str] = &["mote:actor/priority@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Priority)
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        priority::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, _origin: Origin<'_, ()>) {}
}

impl Call<'_, Priority> {
    /// An urgent message from this actor, checked like any send.
    fn urgent(&self, kind: String, body: Vec<u8>) -> Result<Envelope, WitSendError> {
        let mut envelope = self.actor.envelope(kind, body)?;
        envelope.urgent = true;
        Ok(envelope)
    }
}

impl priority::Host for Call<'_, Priority> {
    fn tell_urgent(
        &mut self,
        to: WitAddress,
        kind: String,
        body: Vec<u8>,
    ) -> Result<(), WitSendError> {
        self.actor.check_path(&to.path)?;
        let envelope = self.urgent(kind, body)?;
        self.actor.send(&to.path, Some(to.incarnation), envelope);
        Ok(())
    }

    fn tell_path_urgent(
        &mut self,
        to: String,
        kind: String,
        body: Vec<u8>,
    ) -> Result<(), WitSendError> {
        self.actor.check_path(&to)?;
        let envelope = self.urgent(kind, body)?;
        Ok(self.actor.send_path(&to, envelope)?)
    }
}
