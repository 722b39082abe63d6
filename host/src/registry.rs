//! The registry: every live actor (and external probe) by path.
//!
//! Uniqueness of names among siblings is enforced here, atomically: a path is claimed under the
//! write lock and released only when that incarnation has terminated.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::address::{ActorPath, Address};
use crate::mailbox::ActorRef;

/// Live actors by path.
#[derive(Default)]
pub(crate) struct Registry {
    by_path: RwLock<HashMap<ActorPath, ActorRef>>,
}

impl std::borrow::Borrow<str> for ActorPath {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl Registry {
    /// The live actor at `path`.
    pub(crate) fn get(&self, path: &str) -> Option<ActorRef> {
        self.by_path
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(path)
            .cloned()
    }

    /// Runs `f` on the live actor at `path` without cloning its handle (the send hot path).
    pub(crate) fn with<R>(&self, path: &str, f: impl FnOnce(Option<&ActorRef>) -> R) -> R {
        f(self
            .by_path
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(path))
    }

    /// Claims the actor's path; gives the handle back if the path is taken.
    pub(crate) fn insert(&self, actor: ActorRef) -> Result<(), ActorRef> {
        let mut map = self.by_path.write().unwrap_or_else(|p| p.into_inner());
        if map.contains_key(&actor.address.path) {
            return Err(actor);
        }
        map.insert(actor.address.path.clone(), actor);
        Ok(())
    }

    /// Releases a path, only if it still belongs to that incarnation.
    pub(crate) fn remove(&self, address: &Address) {
        let mut map = self.by_path.write().unwrap_or_else(|p| p.into_inner());
        if map
            .get(&address.path)
            .is_some_and(|a| a.address.incarnation == address.incarnation)
        {
            map.remove(&address.path);
        }
    }

    /// Passivates an idle actor: releases its path if its mailbox is empty. Senders push under
    /// the read lock, so with the write lock held no message can slip in between the check
    /// and the release.
    pub(crate) fn passivate(&self, actor: &ActorRef) -> bool {
        let mut map = self.by_path.write().unwrap_or_else(|p| p.into_inner());
        let idle = map.get(&actor.address.path).is_some_and(|a| {
            a.address.incarnation == actor.address.incarnation
                && a.depth.load(std::sync::atomic::Ordering::Acquire) == 0
        });
        if idle {
            map.remove(&actor.address.path);
        }
        idle
    }

    /// How many actors and probes are live.
    pub(crate) fn len(&self) -> usize {
        self.by_path.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// All live entries, sorted by path.
    pub(crate) fn snapshot(&self) -> Vec<ActorRef> {
        let mut all: Vec<ActorRef> = self
            .by_path
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        all.sort_by(|a, b| a.address.path.cmp(&b.address.path));
        all
    }
}
