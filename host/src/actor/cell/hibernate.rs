//! Hibernation: an idle actor of a module with snapshots on (spawned with `hibernate_after`)
//! gives up its wasm instance and keeps a compressed image of its core state instead (memory
//! pages that differ from a fresh instance, globals). The next thing it must handle restores a
//! fresh instance from that image, and it carries on as if nothing happened. A Python actor's
//! 12 MiB instance becomes an image of a few hundred KiB; a Rust counter's, about 1 KiB.
//!
//! Unlike an entity's passivation (which leaves the registry and stores its image), the actor
//! never leaves: its path, incarnation, mailbox, watchers and every capability's state stay
//! with the cell, so its timers keep running, its subscriptions and watches hold, and a
//! message sent meanwhile simply waits in the mailbox. Nothing is refused for being in flight
//! (asks, call-outs, children), because nothing moves.
//!
//! Invariants:
//! - Nothing enters a dormant actor: every message, system message and its end restores the
//!   instance first (`Cell::wake`), so the guest never sees that it slept.
//! - An actor hibernates only between two messages, with nothing stashed and no WASI resource
//!   (a handle lives in the instance's table, which a fresh instance has not).
//! - A wake that fails is a failure of the actor like a failed instantiation: its parent
//!   decides, and a restart boots afresh with the capabilities' states carried.

use super::Cell;
use crate::actor::instance::{ActorInstance, Failure, Stillborn};
use crate::actor::supervisor::FailureKind;
use crate::caps::ActorState;
use crate::sandbox::image::CoreImage;

/// A hibernating actor: its instance's core state, and the store data it ran with.
pub(super) struct Dormant {
    core: CoreImage,
    state: ActorState,
}

impl Cell {
    /// Hibernates this idle actor; false (and it serves on as it is) if it cannot be now.
    pub(super) async fn hibernate(&mut self) -> bool {
        if self.holds() {
            return false;
        }
        let Some(instance) = self.instance.as_mut() else {
            return false;
        };
        let state = instance.state();
        if let Err(why) = self.caps.hibernate(&state.core, &state.caps) {
            tracing::debug!(%why, "not hibernated");
            return false;
        }
        let core = match instance.capture(&self.module).await {
            Ok(core) => core,
            Err(error) => {
                tracing::debug!(%error, "not hibernated");
                return false;
            }
        };
        let Some(instance) = self.instance.take() else {
            return false;
        };
        let state = instance.into_state();
        if let Some(stats) = &self.me.stats {
            stats.hibernations.bump();
            stats.usage.set_memory(0);
        }
        let (pages, packed) = core.page_bytes();
        tracing::debug!(pages, packed, "hibernated");
        self.dormant = Some(Box::new(Dormant { core, state }));
        self.mailbox.shrink();
        true
    }

    /// Whether the actor hibernates now.
    pub(super) fn dormant(&self) -> bool {
        self.dormant.is_some()
    }

    /// Restores the instance of a hibernating actor from its image; nothing if it is awake.
    pub(super) async fn wake(&mut self) -> Result<(), Failure> {
        let Some(dormant) = self.dormant.take() else {
            return Ok(());
        };
        let Dormant { core, state } = *dormant;
        let mut instance = match ActorInstance::new(&self.module, state).await {
            Ok(instance) => instance,
            Err(Stillborn { failure, state }) => {
                self.carried = Some(Box::new(state.caps));
                return Err(failure);
            }
        };
        let limit = self.limits.memory as u64;
        if let Err(error) = instance.restore(&self.module, &core, limit).await {
            self.carried = Some(Box::new(instance.into_state().caps));
            return Err(Failure::new(
                FailureKind::Instantiation,
                format!("its hibernation image could not be restored: {error}"),
            ));
        }
        tracing::debug!("woke from hibernation");
        self.instance = Some(instance);
        Ok(())
    }
}
