//! Virtual actors (Dust §6 entities, Orleans grains): an entity kind maps the paths
//! `/user/<kind>/<id>` to a module. A message to such a path with no live actor activates one
//! (its `start` gets the id as init and recovers its state from the store); an entity idle for
//! the kind's `passivate_after` is passivated: dropped from the registry and its instance freed,
//! with nothing lost, because every step it made is already committed.
//!
//! Invariants:
//! - At most one incarnation of an entity is live: activation claims the path in the registry
//!   like any spawn, and a concurrent activation that loses the race delivers to the winner.
//! - Passivation happens under the registry's write lock, only while the mailbox is empty, so a
//!   send either lands before it (and the entity stays) or finds the path free and activates a
//!   successor. The successor recovers from the store; the old instance runs no more guest code.
//! - An entity's identity is its path: messages addressed to an older incarnation reach the live
//!   one (or activate one).

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::address::ActorPath;
use crate::cell;
use crate::deadletters::DeadLetterReason;
use crate::error::{AddressError, SpawnError};
use crate::instance::Limits;
use crate::message::Envelope;
use crate::system::{Shared, SpawnOptions};

/// How the entities of one kind live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntityOptions {
    /// Passivate an entity after this long without a message (`None`: never).
    pub passivate_after: Option<Duration>,
    /// Limits of each entity.
    pub spawn: SpawnOptions,
}

#[derive(Clone)]
struct Kind {
    module: String,
    passivate_after: Option<Duration>,
    limits: Limits,
}

/// The registered entity kinds.
#[derive(Default)]
pub(crate) struct Entities {
    kinds: RwLock<HashMap<String, Kind>>,
    any: AtomicBool,
}

/// The kind and id of an entity path `/user/<kind>/<id>`.
fn split(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/user/")?;
    let (kind, id) = rest.split_once('/')?;
    (!id.is_empty() && !id.contains('/')).then_some((kind, id))
}

impl Entities {
    /// The kind `path` belongs to, if it names an entity of a registered kind.
    pub(crate) fn kind_of(&self, path: &str) -> Option<String> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let (kind, _) = split(path)?;
        let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
        kinds.contains_key(kind).then(|| kind.to_owned())
    }

    fn get(&self, kind: &str) -> Option<Kind> {
        self.kinds
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(kind)
            .cloned()
    }
}

impl Shared {
    /// Registers (or re-registers) an entity kind; returns the paths with parked work that it
    /// activated at once.
    pub(crate) fn register_entity(
        &self,
        kind: &str,
        module: &str,
        options: EntityOptions,
    ) -> Result<usize, SpawnError> {
        ActorPath::user_root().child(kind)?;
        if self.modules.get(module).is_none() {
            return Err(SpawnError::UnknownModule(module.to_owned()));
        }
        let entry = Kind {
            module: module.to_owned(),
            passivate_after: options.passivate_after,
            limits: self.limits_for(&options.spawn),
        };
        self.entities
            .kinds
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(kind.to_owned(), entry);
        self.entities.any.store(true, Ordering::Release);
        // Messages and reminders recovered for entities of this kind wake them now.
        let prefix = format!("/user/{kind}/");
        let waiting = match &self.persistence {
            Some(p) => p.parked_under(&prefix),
            None => Vec::new(),
        };
        let mut woken = 0;
        for path in waiting {
            if self.activate(&path).is_ok() {
                woken += 1;
            }
        }
        Ok(woken)
    }

    /// Activates the entity at `path` if it belongs to a kind; parked work flows in at spawn.
    pub(crate) fn activate_parked(&self, path: &str) {
        if self.entities.kind_of(path).is_some()
            && let Err(e) = self.activate(path)
        {
            tracing::debug!(path, error = %e, "entity not activated for parked work");
        }
    }

    /// Spawns the entity at `path` (a top-level actor with its id as init).
    fn activate(&self, path: &str) -> Result<(), SpawnError> {
        let (kind, id) = split(path)
            .ok_or_else(|| AddressError::InvalidPath(path.to_owned(), "not an entity".into()))?;
        let kind = self
            .entities
            .get(kind)
            .ok_or_else(|| AddressError::InvalidPath(path.to_owned(), "no such kind".into()))?;
        let shared = self.me.upgrade().ok_or(SpawnError::ShuttingDown)?;
        let actor_path = ActorPath::parse(path)?;
        let mut top = self.top_level.lock().unwrap_or_else(|p| p.into_inner());
        let (handle, spec) = shared.prepare(
            actor_path,
            &kind.module,
            id.as_bytes().to_vec(),
            None,
            kind.limits,
            kind.passivate_after,
        )?;
        top.insert(handle.address.path.clone(), handle.clone());
        self.top_level_count.send_replace(top.len());
        drop(top);
        tracing::debug!(entity = %handle.address, "activated");
        cell::spawn(spec);
        Ok(())
    }

    /// Delivers to the entity at `path`, activating it if it is not live.
    pub(crate) fn deliver_to_entity(
        &self,
        path: &str,
        mut envelope: Envelope,
    ) -> Option<(Envelope, String, DeadLetterReason)> {
        // Two rounds: an activation that loses a race delivers to the winner instead.
        for _ in 0..2 {
            match self.activate(path) {
                Ok(()) | Err(SpawnError::NameTaken(_)) => {}
                Err(e) => {
                    tracing::warn!(path, error = %e, "entity activation failed");
                    return Some((envelope, path.to_owned(), DeadLetterReason::NoActor));
                }
            }
            match self.deliver_live(path, None, envelope) {
                None => return None,
                Some((e, _, DeadLetterReason::NoActor)) => envelope = e,
                other => return other,
            }
        }
        Some((envelope, path.to_owned(), DeadLetterReason::NoActor))
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn entity_paths_are_kind_then_one_id() {
        assert_eq!(split("/user/cart/42"), Some(("cart", "42")));
        assert_eq!(split("/user/cart"), None);
        assert_eq!(split("/user/cart/42/item"), None);
        assert_eq!(split("/system/cart/42"), None);
    }
}
