//! Hot swap of one actor, between two messages (see `deploy::upgrade` for the rolling
//! upgrade of a module).
//!
//! Invariants:
//! - The old instance keeps serving until the new one has taken the state (or started); if
//!   anything fails, the new one is dropped, with the effects it prepared and the children it
//!   spawned, and the old one serves on.
//! - No message is lost: the request travels on the system lane, and the messages queued
//!   meanwhile are handled by whichever instance serves next, in order.

use std::collections::HashSet;
use std::time::Instant;

use super::{Cell, Exit, abandon_step};
use crate::actor::instance::{ActorInstance, Stillborn};
use crate::actor::mailbox::{SystemMsg, UpgradeOutcome as Outcome, UpgradeRequest};
use crate::caps::ActorState;
use crate::caps::capability::Origin;
use crate::message::StopReason;

impl Cell {
    /// Swaps this actor to another version of its module (see `deploy::upgrade`). The old
    /// instance stays in place until the new one has taken the state (or started); if anything
    /// fails, the new one is dropped and the old one serves on.
    pub(super) async fn upgrade(&mut self, request: UpgradeRequest) -> Option<Exit> {
        let began = Instant::now();
        let Some(module) = self
            .modules
            .get_version(&request.name, &request.version)
            .filter(|m| m.hash == request.hash)
        else {
            request.answer(Outcome::Failed(
                "that version is no longer deployed as it was".into(),
            ));
            return None;
        };
        if module.hash == self.module.hash && module.version == self.module.version {
            request.answer(Outcome::Unchanged);
            return None;
        }
        let Some(old) = self.instance.as_mut().filter(|i| !i.poisoned) else {
            request.answer(Outcome::Failed("the actor has no live instance".into()));
            return None;
        };
        // 1. The state, if both versions speak the upgrade hooks.
        let carried = if old.upgradable() && module.exports.upgradable() {
            match old.save_state().await {
                Ok(state) => state,
                Err(failure) => {
                    request.answer(Outcome::Failed(format!(
                        "the old version failed: {failure}"
                    )));
                    self.abandon_step(None);
                    return Some(Exit::Failed(failure));
                }
            }
        } else {
            None
        };
        if let Err(failure) = self.settle(None).await {
            request.answer(Outcome::Failed(format!(
                "the old version failed: {failure}"
            )));
            return Some(Exit::Failed(failure));
        }
        // 2. The new version, in a fresh sandbox with this actor's bookkeeping.
        let successor = match self.instance.as_mut() {
            Some(old) => {
                let old = old.state();
                let mut core = old.core.successor(module.version.clone());
                core.grants = module.grants.as_slice().into();
                let caps = self.caps.states(&core, Origin::Upgraded { old: &old.caps });
                ActorState {
                    core,
                    caps,
                    set: self.caps.clone(),
                }
            }
            None => {
                request.answer(Outcome::Failed("the actor has no live instance".into()));
                return None;
            }
        };
        let migrated = carried.is_some();
        let mut new = match ActorInstance::new(&module, successor).await {
            Ok(new) => new,
            Err(Stillborn { failure, .. }) => {
                request.answer(Outcome::Failed(format!(
                    "the new version failed to instantiate: {failure}"
                )));
                return None;
            }
        };
        let taken = match carried {
            Some(state) => new.migrate(&self.module.version, state).await,
            None => new.start(&self.init).await,
        };
        if let Err(failure) = taken {
            let what = if migrated {
                "refused the state"
            } else {
                "failed to start"
            };
            self.drop_successor(new);
            request.answer(Outcome::Failed(format!(
                "the new version {what}: {failure}"
            )));
            return None;
        }
        // 3. Swap, then commit what the new version did while taking over.
        let old = self.instance.replace(new);
        self.module = module.clone();
        self.me.set_version(module.version.clone());
        drop(old);
        let settled = self.settle(None).await;
        tracing::info!(version = %module.version, migrated, pause_us = began.elapsed().as_micros() as u64, "upgraded");
        request.answer(Outcome::Upgraded {
            migrated,
            pause: began.elapsed(),
        });
        settled.err().map(Exit::Failed)
    }

    /// Drops a new instance that did not take over: what it held back is discarded, and
    /// children it spawned (the old instance does not know them) are stopped.
    pub(super) fn drop_successor(&mut self, mut new: ActorInstance) {
        // What it took from its copy of the stash is still in the old instance's: not settled.
        let _taken = abandon_step(&self.caps, &mut new);
        let known: HashSet<String> = self
            .instance
            .as_mut()
            .map(|old| old.state().core.children.keys().cloned().collect())
            .unwrap_or_default();
        for (name, child) in &new.state().core.children {
            if !known.contains(name) {
                child.signal(SystemMsg::Stop(StopReason::Normal));
            }
        }
    }
}
