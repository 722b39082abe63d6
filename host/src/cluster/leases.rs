//! Entity leases: at most one live activation of an entity in the cluster. Before a node
//! activates an entity it takes the entity's lease in JetStream key-value (create, or a
//! compare-and-set over a holder that is down); it releases it when the entity passivates or
//! stops. This table is the node's side of that: what it holds, what it is taking, and where a
//! lease it does not hold lives.
//!
//! Invariants:
//! - Messages for an entity whose lease is being taken wait here in arrival order, and leave in
//!   that order: to the new activation, or to the node that holds the lease.
//! - A lease is taken at most once at a time per path on this node (one taker; later messages
//!   park behind it).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::message::Envelope;

/// A message waiting for its entity's lease.
pub(crate) type Parked = (Option<u64>, Envelope);

enum Lease {
    /// Held by this node, at this revision of its key.
    Held(u64),
    /// Being taken; these wait.
    Taking(Vec<Parked>),
    /// Taken at this revision, the activation under way: these wait to be its first messages.
    Acquired(u64, Vec<Parked>),
    /// Held by that node.
    Elsewhere(String),
}

/// What to do with a message for an entity.
pub(crate) enum Admit {
    /// This node holds the lease: activate or deliver here.
    Here(Envelope),
    /// Parked; `true` if the caller must start taking the lease.
    Parked(bool),
    /// The lease is that node's.
    Forward(String, Envelope),
}

/// This node's leases, by entity path.
#[derive(Default)]
pub(crate) struct Leases {
    by_path: Mutex<HashMap<String, Lease>>,
}

impl Leases {
    /// Where a message for the entity at `path` goes.
    pub(crate) fn admit(&self, path: &str, incarnation: Option<u64>, envelope: Envelope) -> Admit {
        let mut leases = self.lock();
        match leases.get_mut(path) {
            Some(Lease::Held(_)) => Admit::Here(envelope),
            Some(Lease::Taking(parked) | Lease::Acquired(_, parked)) => {
                parked.push((incarnation, envelope));
                Admit::Parked(false)
            }
            Some(Lease::Elsewhere(node)) => Admit::Forward(node.clone(), envelope),
            None => {
                leases.insert(
                    path.to_owned(),
                    Lease::Taking(vec![(incarnation, envelope)]),
                );
                Admit::Parked(true)
            }
        }
    }

    /// The lease of `path` is this node's at `revision`; the entity is about to be activated,
    /// and what waits keeps waiting for its activation ([`Leases::backlog`]).
    pub(crate) fn taken(&self, path: &str, revision: u64) {
        let mut leases = self.lock();
        if let Some(Lease::Taking(parked)) = leases.remove(path) {
            leases.insert(path.to_owned(), Lease::Acquired(revision, parked));
        }
    }

    /// The activation of `path` is claiming its path: what waited for it, to be queued before
    /// the path is registered (so nothing sent later overtakes it); the lease is held from now.
    pub(crate) fn backlog(&self, path: &str) -> Vec<Parked> {
        let mut leases = self.lock();
        match leases.remove(path) {
            Some(Lease::Acquired(revision, parked)) => {
                leases.insert(path.to_owned(), Lease::Held(revision));
                parked
            }
            Some(other) => {
                leases.insert(path.to_owned(), other);
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// The lease of `path` is `node`'s: what waited, to forward there. Call until it gives
    /// nothing, as [`Leases::taken`].
    pub(crate) fn elsewhere(&self, path: &str, node: &str) -> Vec<Parked> {
        self.settle(path, Lease::Elsewhere(node.to_owned()))
    }

    /// Taking the lease of `path` (or activating its entity) failed: what waited, to
    /// dead-letter.
    pub(crate) fn failed(&self, path: &str) -> Vec<Parked> {
        let mut leases = self.lock();
        match leases.remove(path) {
            Some(Lease::Taking(parked) | Lease::Acquired(_, parked)) => parked,
            Some(other) => {
                leases.insert(path.to_owned(), other);
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// What still waits for the lease of `path`, or, if nothing does, the lease's new state.
    fn settle(&self, path: &str, next: Lease) -> Vec<Parked> {
        let mut leases = self.lock();
        match leases.get_mut(path) {
            Some(Lease::Taking(parked)) if !parked.is_empty() => std::mem::take(parked),
            _ => {
                leases.insert(path.to_owned(), next);
                Vec::new()
            }
        }
    }

    /// Gives up the held lease of `path`; its revision, to delete the key at.
    pub(crate) fn release(&self, path: &str) -> Option<u64> {
        let mut leases = self.lock();
        match leases.get(path) {
            Some(Lease::Held(revision)) => {
                let revision = *revision;
                leases.remove(path);
                Some(revision)
            }
            _ => None,
        }
    }

    /// The lease of `path` at `revision` is no longer this node's (another took it over);
    /// true if it was held here at that revision.
    pub(crate) fn lost(&self, path: &str, revision: u64) -> bool {
        let mut leases = self.lock();
        let held = matches!(leases.get(path), Some(Lease::Held(r)) if *r == revision);
        if held {
            leases.remove(path);
        }
        held
    }

    /// `node` is down: the leases it held are free to take again.
    pub(crate) fn node_down(&self, node: &str) {
        self.lock()
            .retain(|_, lease| !matches!(lease, Lease::Elsewhere(n) if n == node));
    }

    /// The paths whose lease this node holds, and the revisions.
    pub(crate) fn held(&self) -> Vec<(String, u64)> {
        self.lock()
            .iter()
            .filter_map(|(path, lease)| match lease {
                Lease::Held(revision) => Some((path.clone(), *revision)),
                _ => None,
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lease>> {
        self.by_path.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: u8) -> Envelope {
        Envelope::new(None, "k", vec![n])
    }

    #[test]
    fn messages_wait_for_the_lease_in_order_then_follow_it() {
        let leases = Leases::default();
        assert!(matches!(
            leases.admit("/user/c/1", None, msg(1)),
            Admit::Parked(true)
        ));
        assert!(matches!(
            leases.admit("/user/c/1", None, msg(2)),
            Admit::Parked(false)
        ));
        leases.taken("/user/c/1", 7);
        // Arriving while the entity is activated: it waits behind those, not ahead.
        assert!(matches!(
            leases.admit("/user/c/1", None, msg(3)),
            Admit::Parked(false)
        ));
        let parked = leases.backlog("/user/c/1");
        let bodies: Vec<u8> = parked.iter().map(|(_, e)| e.body[0]).collect();
        assert_eq!(
            bodies,
            [1, 2, 3],
            "the activation's first messages, in order"
        );
        assert!(leases.backlog("/user/c/1").is_empty(), "now it is held");
        assert!(matches!(
            leases.admit("/user/c/1", None, msg(4)),
            Admit::Here(_)
        ));
        assert_eq!(leases.held(), vec![("/user/c/1".to_owned(), 7)]);
        assert_eq!(leases.release("/user/c/1"), Some(7));
        assert_eq!(leases.release("/user/c/1"), None);
    }

    #[test]
    fn a_lease_elsewhere_forwards_until_its_node_is_down() {
        let leases = Leases::default();
        assert!(matches!(
            leases.admit("/user/c/2", None, msg(1)),
            Admit::Parked(true)
        ));
        assert_eq!(leases.elsewhere("/user/c/2", "b").len(), 1);
        assert!(leases.elsewhere("/user/c/2", "b").is_empty());
        assert!(leases.elsewhere("/user/c/2", "b").is_empty());
        assert!(
            matches!(leases.admit("/user/c/2", None, msg(2)), Admit::Forward(n, _) if n == "b")
        );
        leases.node_down("b");
        assert!(matches!(
            leases.admit("/user/c/2", None, msg(3)),
            Admit::Parked(true)
        ));
        assert_eq!(leases.failed("/user/c/2").len(), 1);
    }
}
