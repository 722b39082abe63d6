//! `mote:actor/host` (and the shared `types`): the interface every actor has. Its own address
//! and its parent's, sending to an address or a path, spawning a child, stopping itself or a
//! descendant, and writing to the host's log.

use std::sync::Arc;

use tracing::Level;
use wasmtime::component::Linker;

use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::{ActorCore, ChildRefused, Unsendable};
use crate::error::{AddressError, HostError, SpawnError};
use crate::guestlog::GuestLog;
use crate::kernel::spawn::SpawnOptions;
use crate::sandbox::bindings::mote::actor::{host, types};
use crate::sandbox::bindings::{LogLevel, WitAddress, WitSendError, WitSpawnError, to_wit_address};

/// The capability behind the `host` interface. It keeps no state: everything it needs is the
/// actor's core, and the host's guest log.
pub(crate) struct Host {
    /// Where `log` lines go, without waiting for the writer.
    log: Arc<GuestLog>,
}

impl Capability for Host {
    type State = ();
    const IMPORTS: &'static [&'static str] = &["mote:actor/types@", "mote:actor/host@"];

    fn new(env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Host {
            log: env.guest_log.clone(),
        })
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        types::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())?;
        host::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, _origin: Origin<'_, ()>) {}
}

impl From<Unsendable> for WitSendError {
    fn from(refused: Unsendable) -> Self {
        match refused {
            Unsendable::TooLarge(size) => WitSendError::TooLarge(size as u64),
            Unsendable::ReservedKind(kind) => WitSendError::ReservedKind(kind),
            Unsendable::Quota(quota) => WitSendError::Quota(quota.into()),
        }
    }
}

impl From<AddressError> for WitSendError {
    fn from(e: AddressError) -> Self {
        WitSendError::InvalidPath(e.to_string())
    }
}

impl From<ChildRefused> for WitSpawnError {
    fn from(refused: ChildRefused) -> Self {
        match refused {
            ChildRefused::Stopping => WitSpawnError::Stopping,
            ChildRefused::InvalidName(e) => WitSpawnError::InvalidName(e.to_string()),
            ChildRefused::NameTaken(path) | ChildRefused::Spawn(SpawnError::NameTaken(path)) => {
                WitSpawnError::NameTaken(path)
            }
            ChildRefused::Spawn(SpawnError::UnknownModule(m)) => WitSpawnError::UnknownModule(m),
            ChildRefused::Spawn(SpawnError::Address(a)) => {
                WitSpawnError::InvalidName(a.to_string())
            }
            ChildRefused::Spawn(other) => WitSpawnError::Instantiation(other.to_string()),
            ChildRefused::Quota(quota) => WitSpawnError::Quota(quota.into()),
        }
    }
}

impl types::Host for Call<'_, Host> {}

impl host::Host for Call<'_, Host> {
    fn self_address(&mut self) -> WitAddress {
        to_wit_address(self.actor.me.clone())
    }

    fn parent(&mut self) -> Option<WitAddress> {
        self.actor.parent.clone().map(to_wit_address)
    }

    fn tell(&mut self, to: WitAddress, kind: String, body: Vec<u8>) -> Result<(), WitSendError> {
        Ok(self.actor.tell(&to.path, to.incarnation, kind, body)?)
    }

    fn tell_path(&mut self, to: String, kind: String, body: Vec<u8>) -> Result<(), WitSendError> {
        self.actor.check_path(&to)?;
        let envelope = self.actor.envelope(kind, body)?;
        Ok(self.actor.send_path(&to, envelope)?)
    }

    fn spawn(
        &mut self,
        name: String,
        module: String,
        init: Vec<u8>,
    ) -> Result<WitAddress, WitSpawnError> {
        let limits = self.actor.limits.child(&SpawnOptions::default());
        Ok(to_wit_address(
            self.actor.spawn_child(&name, module, init, limits)?,
        ))
    }

    fn stop(&mut self, target: WitAddress) {
        if !self.actor.stop(&target.path, target.incarnation) {
            tracing::warn!(target = %target.path, "stop ignored: an actor may stop only itself and its descendants");
        }
    }

    fn log(&mut self, level: LogLevel, message: String) {
        let actor = &self.actor;
        if !actor
            .stats
            .refusals
            .admit_log(actor.quotas(), &actor.me.path)
        {
            return;
        }
        let message = actor.quotas().log_line(&message);
        let level = match level {
            LogLevel::Trace => Level::TRACE,
            LogLevel::Debug => Level::DEBUG,
            LogLevel::Info => Level::INFO,
            LogLevel::Warn => Level::WARN,
            LogLevel::Error => Level::ERROR,
        };
        // Queued for the log thread: a slow log writer never holds this actor's thread.
        self.cap.log.offer(level, &actor.me.path, "log", &message);
    }

    fn reject(&mut self, reason: String) {
        let mut reason = reason;
        reason.truncate(reason.floor_char_boundary(self.actor.quotas().max_name_bytes));
        self.actor.rejected = Some(reason);
    }
}
