//! `mote:actor/naming`: aliases (Actor4j), second names for an actor under
//! `/system/alias/<name>`, reached and resolved like any path while the actor lives.
//!
//! Invariants:
//! - An alias names one incarnation; it is released when that incarnation ends (or by
//!   `unalias`), never by anyone else, and it never outlives it.
//! - An actor holds at most its quota of aliases; a name is first come, first served.
//! - An image keeps the aliases; restored, the actor takes again those that are free (one
//!   another actor took meanwhile stays that actor's, said in the log).

use std::sync::Arc;

use wasmtime::component::Linker;

use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::address::{ActorPath, Address};
use crate::error::HostError;
use crate::kernel::Kernel;
use crate::quota::Quota;
use crate::sandbox::bindings::WitSendError;
use crate::sandbox::bindings::mote::actor::naming;

/// The capability behind the `naming` interface.
pub(crate) struct Naming;

/// The aliases one incarnation holds (kept across restarts and upgrades: they name it).
#[derive(Default)]
pub(crate) struct Aliases(Vec<ActorPath>);

/// The path under which aliases live, `/system/alias`.
fn alias_root() -> Result<ActorPath, crate::error::AddressError> {
    ActorPath::system_root().child("alias")
}

/// The path of alias `name`.
fn alias_path(name: &str) -> Result<ActorPath, crate::error::AddressError> {
    alias_root()?.child(name)
}

impl Capability for Naming {
    type State = Aliases;
    const IMPORTS: &'static [&'static str] = &["mote:actor/naming@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Naming)
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        naming::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, origin: Origin<'_, Aliases>) -> Aliases {
        match origin {
            Origin::Spawned => Aliases::default(),
            Origin::Restarted { old, .. } => old,
            Origin::Upgraded { old } => Aliases(old.0.clone()),
        }
    }

    fn capture(&self, _actor: &ActorCore, state: &Aliases) -> Result<Vec<u8>, String> {
        if state.0.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<String> = state.0.iter().map(ToString::to_string).collect();
        Ok(crate::storage::database::encode(&names))
    }

    fn restore(&self, actor: &ActorCore, image: &[u8]) -> Result<Aliases, String> {
        if image.is_empty() {
            return Ok(Aliases::default());
        }
        let names: Vec<String> = postcard::from_bytes(image).map_err(|e| e.to_string())?;
        if names.len() > actor.quotas().aliases {
            return Err("more aliases than the actor's quota allows".into());
        }
        let alias_root = alias_root().map_err(|e| e.to_string())?;
        let me = actor.kernel.registry.get(actor.me.path.as_str());
        let mut held = Vec::with_capacity(names.len());
        for name in names {
            let path = ActorPath::parse(&name).map_err(|e| e.to_string())?;
            if path.parent().as_ref() != Some(&alias_root) {
                return Err(format!("{name} is not an alias"));
            }
            // Only what this host lets it take again: an alias someone else holds by now
            // stays theirs.
            let taken = match &me {
                Some(me) => actor
                    .kernel
                    .registry
                    .alias(path.clone(), me.clone())
                    .is_ok(),
                None => false,
            };
            match taken {
                true => held.push(path),
                false => {
                    tracing::warn!(alias = %path, "an alias the image held is taken: not restored")
                }
            }
        }
        Ok(Aliases(held))
    }

    fn stopped(&self, kernel: &Arc<Kernel>, actor: &Address, state: Option<&mut Aliases>) {
        for path in state.map(|s| std::mem::take(&mut s.0)).unwrap_or_default() {
            kernel.registry.unalias(path.as_str(), actor);
        }
    }
}

impl naming::Host for Call<'_, Naming> {
    fn alias(&mut self, name: String) -> Result<String, WitSendError> {
        self.actor.check_name(&name)?;
        let path = alias_path(&name)?;
        if self.state.0.contains(&path) {
            return Ok(path.to_string());
        }
        if self.state.0.len() >= self.actor.quotas().aliases {
            return Err(self.actor.refuse(Quota::Aliases).into());
        }
        let Some(me) = self.actor.kernel.registry.get(self.actor.me.path.as_str()) else {
            return Err(WitSendError::InvalidPath(
                "this actor is not registered".into(),
            ));
        };
        if self.actor.kernel.registry.alias(path.clone(), me).is_err() {
            return Err(WitSendError::InvalidPath(format!("{path} is taken")));
        }
        self.state.0.push(path.clone());
        Ok(path.to_string())
    }

    fn unalias(&mut self, name: String) -> bool {
        let Ok(path) = alias_path(&name) else {
            return false;
        };
        let Some(i) = self.state.0.iter().position(|p| *p == path) else {
            return false;
        };
        self.state.0.remove(i);
        self.actor
            .kernel
            .registry
            .unalias(path.as_str(), &self.actor.me)
    }
}
