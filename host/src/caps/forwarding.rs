//! `mote:actor/forwarding`: passing on the message being handled with its original sender
//! (Dust §2.4, Akka `forward`), so the end of a chain answers the original requester.
//!
//! Invariants:
//! - A forwarded message carries the sender of the message the current call handles (or of
//!   the last one it took from its stash), never one the guest names: forwarding cannot forge
//!   a sender.
//! - A forward is a send: the same size, kind and path bounds, and held like any send of a
//!   persistent actor's step.

use wasmtime::component::Linker;

use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::address::ActorPath;
use crate::error::HostError;
use crate::message::Envelope;
use crate::sandbox::bindings::mote::actor::forwarding;
use crate::sandbox::bindings::{WitAddress, WitSendError};

/// The capability behind the `forwarding` interface. It keeps no state: the sender to pass on
/// is the actor core's current one.
pub(crate) struct Forwarding;

impl Capability for Forwarding {
    type State = ();
    const IMPORTS: &'static [&'static str] = &["mote:actor/forwarding@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Forwarding)
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        forwarding::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, _origin: Origin<'_, ()>) {}
}

impl Call<'_, Forwarding> {
    /// The message to pass on: checked like any send, with the current sender.
    fn passed_on(&self, kind: String, body: Vec<u8>) -> Result<Envelope, WitSendError> {
        let mut envelope = self.actor.envelope(kind, body)?;
        envelope.sender = self.actor.current_sender.clone();
        Ok(envelope)
    }
}

impl forwarding::Host for Call<'_, Forwarding> {
    fn forward(&mut self, to: WitAddress, kind: String, body: Vec<u8>) -> Result<(), WitSendError> {
        self.actor.check_path(&to.path)?;
        ActorPath::check(&to.path)?;
        let envelope = self.passed_on(kind, body)?;
        self.actor.send(&to.path, Some(to.incarnation), envelope);
        Ok(())
    }

    fn forward_path(
        &mut self,
        to: String,
        kind: String,
        body: Vec<u8>,
    ) -> Result<(), WitSendError> {
        self.actor.check_path(&to)?;
        let envelope = self.passed_on(kind, body)?;
        Ok(self.actor.send_path(&to, envelope)?)
    }
}
