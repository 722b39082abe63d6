//! Virtual actors (Dust §6 entities, Orleans grains): an entity kind maps the paths
//! `/user/<kind>/<id>` to a module. A message to such a path with no live actor activates one
//! (its `start` gets the id as init and recovers its state from the database); an entity idle
//! for the kind's `passivate_after` is passivated: dropped from the registry and its instance
//! freed, with nothing lost, because every step it made is already committed.
//!
//! Invariants:
//! - At most one incarnation of an entity is live: activation claims the path in the registry
//!   like any spawn, and a concurrent activation that loses the race delivers to the winner.
//! - Passivation happens under the registry's write lock, only while the mailbox is empty, so a
//!   send either lands before it (and the entity stays) or finds the path free and activates a
//!   successor. The successor recovers from the database; the old instance runs no more guest
//!   code.
//! - An entity's identity is its path: messages addressed to an older incarnation reach the live
//!   one (or activate one).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::address::ActorPath;
use crate::error::{AddressError, SpawnError};
use crate::kernel::deadletters::DeadLetterReason;
use crate::kernel::spawn::{Limits, Restore, SpawnOptions, SpawnRequest};
use crate::kernel::{Kernel, Undelivered};
use crate::message::Envelope;

use super::images::Images;

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

/// The registered entity kinds, and the images of entities passivated as images.
#[derive(Default)]
pub(crate) struct Entities {
    kinds: RwLock<HashMap<String, Kind>>,
    any: AtomicBool,
    pub(crate) images: Images,
}

/// The kind and id of an entity path `/user/<kind>/<id>`.
pub(crate) fn split(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/user/")?;
    let (kind, id) = rest.split_once('/')?;
    (!id.is_empty() && !id.contains('/')).then_some((kind, id))
}

impl Entities {
    /// No kinds yet; passivated images kept in `images`.
    pub(crate) fn new(images: Images) -> Self {
        Entities {
            images,
            ..Entities::default()
        }
    }

    /// Registers (or re-registers) an entity kind of `module` (the caller checked it is
    /// deployed).
    pub(crate) fn register(
        &self,
        kernel: &Kernel,
        kind: &str,
        module: &str,
        options: EntityOptions,
    ) -> Result<(), SpawnError> {
        ActorPath::user_root().child(kind)?;
        let entry = Kind {
            module: module.to_owned(),
            passivate_after: options.passivate_after,
            limits: Limits::of(&kernel.config, &options.spawn),
        };
        self.kinds
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(kind.to_owned(), entry);
        self.any.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether `path` names an entity of a registered kind.
    pub(crate) fn is_entity(&self, path: &str) -> bool {
        self.kind_of(path).is_some()
    }

    /// The registered kinds.
    pub(crate) fn kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = self
            .kinds
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        kinds.sort();
        kinds
    }

    /// The registered kind of the entity at `path`, if it names one.
    pub(crate) fn kind_of<'p>(&self, path: &'p str) -> Option<&'p str> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let (kind, _) = split(path)?;
        self.kinds
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(kind)
            .then_some(kind)
    }

    fn get(&self, kind: &str) -> Option<Kind> {
        self.kinds
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(kind)
            .cloned()
    }

    /// Activates the entity at `path` if it belongs to a kind; parked work flows in at spawn.
    pub(crate) fn activate_parked(&self, kernel: &Arc<Kernel>, path: &str) {
        if self.is_entity(path)
            && let Err(e) = self.activate(kernel, path)
        {
            tracing::debug!(path, error = %e, "entity not activated for parked work");
        }
    }

    /// Spawns the entity at `path` (a top-level actor with its id as init).
    pub(crate) fn activate(&self, kernel: &Arc<Kernel>, path: &str) -> Result<(), SpawnError> {
        let (kind, id) = split(path)
            .ok_or_else(|| AddressError::InvalidPath(path.to_owned(), "not an entity".into()))?;
        let kind = self
            .get(kind)
            .ok_or_else(|| AddressError::InvalidPath(path.to_owned(), "no such kind".into()))?;
        let actor = kernel.spawn_top_level(SpawnRequest {
            path: ActorPath::parse(path)?,
            module: kind.module,
            init: id.as_bytes().to_vec(),
            parent: None,
            limits: kind.limits,
            passivate_after: kind.passivate_after,
            hibernate_after: None,
            reservation: None,
            incarnation: None,
            // An entity passivated as an image continues from it (taken once the path is ours).
            restore: Restore::Stored,
        })?;
        tracing::debug!(entity = %actor.address, "activated");
        Ok(())
    }

    /// Delivers to the entity at `path`, activating it if it is not live.
    pub(crate) fn deliver(
        &self,
        kernel: &Arc<Kernel>,
        path: &str,
        mut envelope: Envelope,
    ) -> Option<Undelivered> {
        // Two rounds: an activation that loses a race delivers to the winner instead.
        for _ in 0..2 {
            match self.activate(kernel, path) {
                Ok(()) | Err(SpawnError::NameTaken(_)) => {}
                Err(e) => {
                    tracing::warn!(path, error = %e, "entity activation failed");
                    return Some(no_actor(path, envelope));
                }
            }
            match kernel.deliver_live(path, None, envelope) {
                None => return None,
                Some(u) if u.reason == DeadLetterReason::NoActor => envelope = u.envelope,
                other => return other,
            }
        }
        Some(no_actor(path, envelope))
    }
}

fn no_actor(path: &str, envelope: Envelope) -> Undelivered {
    Undelivered {
        envelope,
        target: path.to_owned(),
        reason: DeadLetterReason::NoActor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::testing::kernel;

    #[test]
    fn entity_paths_are_kind_then_one_id() {
        assert_eq!(split("/user/cart/42"), Some(("cart", "42")));
        assert_eq!(split("/user/cart"), None);
        assert_eq!(split("/user/cart/42/item"), None);
        assert_eq!(split("/system/cart/42"), None);
    }

    #[test]
    fn only_paths_of_registered_kinds_are_entities() {
        let (_runtime, kernel) = kernel();
        let entities = Entities::default();
        assert!(!entities.is_entity("/user/cart/1"));
        entities
            .register(&kernel, "cart", "m", EntityOptions::default())
            .unwrap();
        assert!(entities.is_entity("/user/cart/1"));
        assert!(!entities.is_entity("/user/cart"));
        assert!(!entities.is_entity("/user/other/1"));
        assert!(
            entities
                .register(&kernel, "bad kind", "m", EntityOptions::default())
                .is_err()
        );
    }
}
