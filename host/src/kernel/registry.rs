//! The registry: every live actor (and external probe) by path.
//!
//! Invariants:
//! - A path is held by at most one incarnation: it is claimed under the write lock (which makes
//!   names unique among siblings) and released only by that incarnation.
//! - Senders push under the read lock, so passivation (under the write lock, only with an empty
//!   mailbox) never loses a message. Passivation also seals the mailbox, so a sender that kept
//!   the actor's handle (`actor::route`) is refused and comes back here, to find the path free.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::actor::mailbox::ActorRef;
use crate::address::{ActorPath, Address};

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

    /// Gives the actor a second path (an alias); gives the handle back if the path is taken.
    pub(crate) fn alias(&self, path: ActorPath, actor: ActorRef) -> Result<(), ActorRef> {
        let mut map = self.by_path.write().unwrap_or_else(|p| p.into_inner());
        if map.contains_key(&path) {
            return Err(actor);
        }
        map.insert(path, actor);
        Ok(())
    }

    /// Releases an alias, only if it is one of that incarnation's; true if it was.
    pub(crate) fn unalias(&self, path: &str, owner: &Address) -> bool {
        let mut map = self.by_path.write().unwrap_or_else(|p| p.into_inner());
        let owned = map
            .get(path)
            .is_some_and(|a| a.address == *owner && a.address.path.as_str() != path);
        if owned {
            map.remove(path);
        }
        owned
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

    /// Passivates an idle actor: releases its path if its mailbox is empty, and seals the
    /// mailbox. Senders by path push under the read lock, so with the write lock held none
    /// slips a message in between the check and the release; a sender that kept the handle
    /// (`actor::route`) finds the mailbox sealed and comes back here, to find the path free.
    pub(crate) fn passivate(&self, actor: &ActorRef) -> bool {
        let mut map = self.by_path.write().unwrap_or_else(|p| p.into_inner());
        let idle = map
            .get(&actor.address.path)
            .is_some_and(|a| a.address.incarnation == actor.address.incarnation && a.depth.seal());
        if idle {
            map.remove(&actor.address.path);
        }
        idle
    }

    /// How many actors and probes are live (aliases are not counted).
    pub(crate) fn len(&self) -> usize {
        let map = self.by_path.read().unwrap_or_else(|p| p.into_inner());
        map.iter()
            .filter(|(path, a)| **path == a.address.path)
            .count()
    }

    /// Runs `f` on every live entry (each once: aliases are left out), in no order, under the
    /// read lock: senders go on, spawns and stops wait until it returns.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&ActorRef)) {
        let map = self.by_path.read().unwrap_or_else(|p| p.into_inner());
        map.iter()
            .filter(|(path, a)| **path == a.address.path)
            .for_each(|(_, a)| f(a));
    }

    /// All live entries, sorted by path (each once: aliases are left out).
    pub(crate) fn snapshot(&self) -> Vec<ActorRef> {
        let mut all: Vec<ActorRef> = self
            .by_path
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(path, a)| **path == a.address.path)
            .map(|(_, a)| a.clone())
            .collect();
        all.sort_by(|a, b| a.address.path.cmp(&b.address.path));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actor::mailbox::{Mailbox, Refused, test_mailbox};
    use crate::message::Envelope;

    fn actor(path: &str, incarnation: u64) -> (ActorRef, Mailbox) {
        test_mailbox(path, incarnation, 10)
    }

    #[test]
    fn a_path_is_claimed_once_until_its_incarnation_releases_it() {
        let registry = Registry::default();
        let (first, _m1) = actor("/user/a", 1);
        let (second, _m2) = actor("/user/a", 2);
        assert!(registry.insert(first.clone()).is_ok());
        assert!(registry.insert(second.clone()).is_err(), "taken");
        registry.remove(&second.address);
        assert_eq!(
            registry.get("/user/a").map(|a| a.address.incarnation),
            Some(1),
            "another incarnation does not release it"
        );
        registry.remove(&first.address);
        assert!(registry.get("/user/a").is_none());
        assert!(registry.insert(second).is_ok());
    }

    #[test]
    fn only_an_idle_actor_is_passivated() {
        let registry = Registry::default();
        let (a, mut mailbox) = actor("/user/a", 1);
        registry.insert(a.clone()).unwrap();
        a.tell(Envelope::new(None, "k", Vec::new())).unwrap();
        assert!(!registry.passivate(&a), "a queued message keeps it");
        mailbox.try_next().unwrap();
        let (stale, _m) = actor("/user/a", 7);
        assert!(!registry.passivate(&stale), "only the live incarnation");
        assert!(registry.passivate(&a));
        assert!(registry.get("/user/a").is_none());
        assert!(
            matches!(
                a.tell(Envelope::new(None, "k", Vec::new())),
                Err(Refused::Closed(_))
            ),
            "a sender that kept the handle is refused: its message goes by the path again"
        );
        assert_eq!(a.depth.messages(), 0, "the seal is no queued message");
        assert!(mailbox.try_next().is_err(), "nothing slipped in");
    }

    #[test]
    fn a_send_racing_a_passivation_is_queued_before_it_or_refused() {
        for _ in 0..200 {
            let registry = Registry::default();
            let (a, mut mailbox) = actor("/user/a", 1);
            registry.insert(a.clone()).unwrap();
            let sender = {
                let a = a.clone();
                std::thread::spawn(move || {
                    (0..20)
                        .filter(|_| a.tell(Envelope::new(None, "k", Vec::new())).is_ok())
                        .count()
                })
            };
            let passivated = registry.passivate(&a);
            let accepted = sender.join().unwrap();
            let mut queued = 0;
            while mailbox.try_next().is_ok() {
                queued += 1;
            }
            assert_eq!(queued, accepted, "every message taken is there");
            if passivated {
                assert_eq!(accepted, 0, "nothing is taken after the passivation");
            }
        }
    }

    #[test]
    fn snapshots_are_sorted_by_path() {
        let registry = Registry::default();
        let mut keep = Vec::new();
        for (path, i) in [("/user/c", 1), ("/user/a", 2), ("/system/x", 3)] {
            let (handle, mailbox) = actor(path, i);
            registry.insert(handle).unwrap();
            keep.push(mailbox);
        }
        let paths: Vec<String> = registry
            .snapshot()
            .into_iter()
            .map(|a| a.address.path.to_string())
            .collect();
        assert_eq!(paths, ["/system/x", "/user/a", "/user/c"]);
        assert_eq!(registry.len(), 3);
    }
}
