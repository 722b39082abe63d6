//! `mote:actor/supervision`: how an actor supervises its children (its strategy, limits per
//! child), death watch, and why it was restarted.
//!
//! Invariants:
//! - Exactly one `mote.terminated` per watched incarnation reaches the guest: a watch is kept
//!   until its notice is admitted, a second watch of the same incarnation adds nothing, and
//!   `unwatch` drops a notice that is already queued.
//! - Watches survive a restart and an upgrade of the watcher.

use std::collections::HashSet;
use std::time::Duration;

use wasmtime::component::Linker;

use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::actor::supervisor::{Scope, Strategy};
use crate::address::{ActorPath, Address};
use crate::error::HostError;
use crate::kernel::TERMINATED_KIND;
use crate::kernel::spawn::{Limits, SpawnOptions};
use crate::message::Envelope;
use crate::quota::{Quota, Quotas};
use crate::sandbox::bindings::mote::actor::supervision;
use crate::sandbox::bindings::{
    WitAddress, WitScope, WitSendError, WitSpawnError, WitSpawnOptions, WitStrategy,
    from_wit_directive, to_wit_address,
};

/// The capability behind the `supervision` interface.
pub(crate) struct Supervision;

/// What one actor instance watches, and why it was started.
#[derive(Default)]
pub(crate) struct Watching {
    /// Incarnations it watches and has not yet been told about.
    watching: HashSet<Address>,
    /// Why this instance replaced a failed one.
    restart_cause: Option<String>,
}

impl Capability for Supervision {
    type State = Watching;
    const IMPORTS: &'static [&'static str] = &["mote:actor/supervision@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Supervision)
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        supervision::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, origin: Origin<'_, Watching>) -> Watching {
        match origin {
            Origin::Spawned => Watching::default(),
            Origin::Restarted { old, cause } => Watching {
                watching: old.watching,
                restart_cause: Some(cause.to_owned()),
            },
            Origin::Upgraded { old } => Watching {
                watching: old.watching.clone(),
                restart_cause: None,
            },
        }
    }

    fn capture(&self, _actor: &ActorCore, state: &Watching) -> Result<Vec<u8>, String> {
        if state.watching.is_empty() && state.restart_cause.is_none() {
            return Ok(Vec::new());
        }
        let mut watching: Vec<(String, u64)> = state
            .watching
            .iter()
            .map(|a| (a.path.to_string(), a.incarnation))
            .collect();
        watching.sort();
        Ok(crate::storage::database::encode(&(
            watching,
            &state.restart_cause,
        )))
    }

    fn restore(&self, actor: &ActorCore, image: &[u8]) -> Result<Watching, String> {
        if image.is_empty() {
            return Ok(Watching::default());
        }
        let (watching, restart_cause): (Vec<(String, u64)>, Option<String>) =
            postcard::from_bytes(image).map_err(|e| e.to_string())?;
        if watching.len() > actor.quotas().watches {
            return Err("more watches than the actor's quota allows".into());
        }
        let watching = watching
            .into_iter()
            .map(|(path, incarnation)| {
                crate::address::ActorPath::parse(&path)
                    .map(|path| Address { path, incarnation })
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<_, _>>()?;
        Ok(Watching {
            watching,
            restart_cause,
        })
    }

    fn admit(&self, state: &mut Watching, envelope: &Envelope) -> bool {
        if envelope.kind != TERMINATED_KIND {
            return true;
        }
        // Exactly one per watched incarnation: drop it if unwatched or already told.
        envelope
            .sender
            .as_ref()
            .is_some_and(|s| state.watching.remove(s))
    }
}

/// Spawns a child of `parent` with `options`, on `node` if given.
fn spawn(
    parent: &mut ActorCore,
    node: Option<&str>,
    name: &str,
    module: String,
    init: Vec<u8>,
    options: WitSpawnOptions,
) -> Result<WitAddress, WitSpawnError> {
    let limits = child_limits(parent, options);
    let child = parent.spawn_child_on(node, name, module, init, limits)?;
    Ok(to_wit_address(child))
}

/// The limits of a child spawned with `options` by `parent`.
fn child_limits(parent: &ActorCore, options: WitSpawnOptions) -> Limits {
    let options = SpawnOptions {
        mailbox_capacity: options.mailbox_capacity.map(|n| n as usize),
        memory_limit: options
            .memory_limit
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        cpu_deadline: options.cpu_deadline_ms.map(Duration::from_millis),
        mailbox_bytes: options
            .mailbox_bytes
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        quotas: options.descendants.map(|n| Quotas {
            descendants: n as usize,
            ..parent.limits.quotas
        }),
        hibernate_after: None,
    };
    parent.limits.child(&options)
}

impl supervision::Host for Call<'_, Supervision> {
    fn set_strategy(&mut self, strategy: WitStrategy) {
        self.actor.supervisor.strategy = Strategy {
            scope: match strategy.scope {
                WitScope::OneForOne => Scope::OneForOne,
                WitScope::AllForOne => Scope::AllForOne,
            },
            directive: from_wit_directive(strategy.directive),
            max_restarts: strategy.max_restarts,
            within: Duration::from_millis(strategy.within_ms),
            backoff_min: Duration::from_millis(strategy.backoff_min_ms),
            backoff_max: Duration::from_millis(
                strategy.backoff_max_ms.max(strategy.backoff_min_ms),
            ),
        };
    }

    fn spawn_with(
        &mut self,
        name: String,
        module: String,
        init: Vec<u8>,
        options: WitSpawnOptions,
    ) -> Result<WitAddress, WitSpawnError> {
        spawn(self.actor, None, &name, module, init, options)
    }

    fn spawn_on(
        &mut self,
        node: String,
        name: String,
        module: String,
        init: Vec<u8>,
        options: WitSpawnOptions,
    ) -> Result<WitAddress, WitSpawnError> {
        spawn(self.actor, Some(&node), &name, module, init, options)
    }

    fn watch(&mut self, target: WitAddress) -> Result<(), WitSendError> {
        self.actor.check_path(&target.path)?;
        let path = ActorPath::parse(&target.path)?;
        let target = Address {
            path,
            incarnation: target.incarnation,
        };
        if self.state.watching.contains(&target) {
            return Ok(());
        }
        if self.state.watching.len() >= self.actor.quotas().watches {
            return Err(self.actor.refuse(Quota::Watches).into());
        }
        self.state.watching.insert(target.clone());
        let kernel = &self.actor.kernel;
        if !kernel.watch(&self.actor.me, &target) {
            // Already gone: the watcher hears of it at once.
            kernel.notify_terminated(&self.actor.me, &target);
        }
        Ok(())
    }

    fn unwatch(&mut self, target: WitAddress) {
        let Some(address) = self
            .state
            .watching
            .iter()
            .find(|a| a.path.as_str() == target.path && a.incarnation == target.incarnation)
            .cloned()
        else {
            return;
        };
        self.state.watching.remove(&address);
        self.actor.kernel.unwatch(&self.actor.me, &address);
    }

    fn restart_cause(&mut self) -> Option<String> {
        self.state.restart_cause.clone()
    }
}
