//! What a spawn asks for: where, of which module, with which init and limits; and the count
//! of live descendants that bounds a spawn bomb.
//!
//! Invariants:
//! - A child's limits never exceed its parent's ([`Limits::child`]).
//! - Every actor's count of live descendants stays within its `descendants` quota: a place is
//!   reserved under every ancestor before the child is spawned, and given back when the
//!   child's cell ends (or its spawn is dropped).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::address::{ActorPath, Address};
use crate::config::HostConfig;
use crate::quota::Quotas;

/// Per-spawn limits; `None` takes the host's default from [`HostConfig`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpawnOptions {
    /// Messages the mailbox holds before sends are refused.
    pub mailbox_capacity: Option<usize>,
    /// Bytes of linear memory the actor may grow to (at most the host's `memory_limit`).
    pub memory_limit: Option<usize>,
    /// CPU time one message may take.
    pub cpu_deadline: Option<Duration>,
    /// Bytes of message bodies the mailbox holds before sends are refused.
    pub mailbox_bytes: Option<usize>,
    /// The actor's quotas (for a child, capped by its parent's).
    pub quotas: Option<Quotas>,
    /// For a module deployed with snapshots on: after this long without a message, the actor
    /// hibernates, giving up its instance for a compressed image of it; the next message
    /// restores the instance (see `actor::cell`'s hibernation).
    pub hibernate_after: Option<Duration>,
}

/// The resource limits of one actor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) mailbox_capacity: usize,
    pub(crate) mailbox_bytes: usize,
    pub(crate) memory: usize,
    pub(crate) cpu_deadline: Duration,
    pub(crate) quotas: Quotas,
}

impl Limits {
    /// The limits of an actor spawned with `options`: the host's defaults where they say
    /// nothing, and never more memory than the host's limit.
    pub(crate) fn of(config: &HostConfig, options: &SpawnOptions) -> Limits {
        Limits {
            mailbox_capacity: options
                .mailbox_capacity
                .map_or(config.mailbox_capacity, |n| n.max(1)),
            mailbox_bytes: options
                .mailbox_bytes
                .map_or(config.mailbox_bytes, |n| n.max(1)),
            memory: options
                .memory_limit
                .map_or(config.memory_limit, |m| m.min(config.memory_limit)),
            cpu_deadline: options.cpu_deadline.unwrap_or(config.cpu_deadline),
            quotas: options.quotas.unwrap_or(config.quotas),
        }
    }

    /// The limits of a child of an actor with these limits, spawned with `options`: what the
    /// options ask for, capped at the parent's own; the parent's where they say nothing.
    pub(crate) fn child(&self, options: &SpawnOptions) -> Limits {
        let capped = |asked: Option<usize>, own: usize| asked.map_or(own, |n| n.clamp(1, own));
        Limits {
            mailbox_capacity: capped(options.mailbox_capacity, self.mailbox_capacity),
            mailbox_bytes: capped(options.mailbox_bytes, self.mailbox_bytes),
            memory: capped(options.memory_limit, self.memory),
            cpu_deadline: options
                .cpu_deadline
                .map_or(self.cpu_deadline, |d| d.min(self.cpu_deadline)),
            quotas: options
                .quotas
                .map_or(self.quotas, |q| q.capped_at(&self.quotas)),
        }
    }
}

/// One actor's node in the tree of live-descendant counts.
#[derive(Debug)]
pub(crate) struct Lineage {
    /// Live descendants now (reserved places).
    live: AtomicUsize,
    /// The most it may have.
    limit: usize,
    parent: Option<Arc<Lineage>>,
}

impl Lineage {
    /// The node of an actor with no counted ancestor (a top-level actor, an entity).
    pub(crate) fn root(limit: usize) -> Arc<Lineage> {
        Arc::new(Lineage {
            live: AtomicUsize::new(0),
            limit,
            parent: None,
        })
    }

    /// Reserves a place for a new child under this actor and every ancestor, each within its
    /// limit; `None` (nothing reserved) if one is at its limit. The child may have `limit`
    /// descendants of its own.
    pub(crate) fn reserve(self: &Arc<Self>, limit: usize) -> Option<Reservation> {
        let mut node = Some(self);
        let mut taken: Vec<&Arc<Lineage>> = Vec::new();
        while let Some(n) = node {
            let ok = n
                .live
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |live| {
                    (live < n.limit).then_some(live + 1)
                })
                .is_ok();
            if !ok {
                for t in taken {
                    t.live.fetch_sub(1, Ordering::AcqRel);
                }
                return None;
            }
            taken.push(n);
            node = n.parent.as_ref();
        }
        Some(Reservation(Arc::new(Lineage {
            live: AtomicUsize::new(0),
            limit,
            parent: Some(self.clone()),
        })))
    }

    /// Live descendants now.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

/// A child's place among its ancestors' descendants: given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation(Arc<Lineage>);

impl Reservation {
    /// The child's own node, for its children.
    pub(crate) fn lineage(&self) -> &Arc<Lineage> {
        &self.0
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut node = self.0.parent.as_ref();
        while let Some(n) = node {
            n.live.fetch_sub(1, Ordering::AcqRel);
            node = n.parent.as_ref();
        }
    }
}

/// One spawn, as the kernel hands it to the layer that starts actors.
#[derive(Debug)]
pub(crate) struct SpawnRequest {
    /// Where the actor lives.
    pub(crate) path: ActorPath,
    /// The deployed module it runs (its current version).
    pub(crate) module: String,
    /// What its `start` gets.
    pub(crate) init: Vec<u8>,
    /// Its parent; `None` under the `/user` guardian.
    pub(crate) parent: Option<Address>,
    pub(crate) limits: Limits,
    /// An entity passivates after this long without a message.
    pub(crate) passivate_after: Option<Duration>,
    /// It hibernates after this long without a message (its module has snapshots on).
    pub(crate) hibernate_after: Option<Duration>,
    /// Its place among its ancestors' descendants (`None` for a top-level actor or entity).
    pub(crate) reservation: Option<Reservation>,
    /// The incarnation it gets, if its parent's node chose it (a child spawned on another
    /// node of the cluster); else a fresh one.
    pub(crate) incarnation: Option<u64>,
    /// Whether it starts from an image instead of `start`.
    pub(crate) restore: Restore,
}

/// Where a spawned actor's first instance comes from.
#[derive(Debug)]
pub(crate) enum Restore {
    /// A fresh instance, started with its init.
    No,
    /// The image stored for its path when it was passivated, if there is one (taken once the
    /// path is claimed, so only one activation gets it); else as `No`.
    Stored,
    /// This image; the outcome of restoring it is told to `answer`, and a failed restore
    /// stops the actor instead of starting it afresh.
    Image {
        image: Box<crate::actor::image::ActorImage>,
        answer: tokio::sync::oneshot::Sender<Result<(), crate::sandbox::image::ImageError>>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawn_gets_the_defaults_and_never_more_memory_than_the_host_allows() {
        let mut config = HostConfig::new();
        config.memory_limit(1 << 20).mailbox_capacity(50);
        let defaults = Limits::of(&config, &SpawnOptions::default());
        assert_eq!(defaults.memory, 1 << 20);
        assert_eq!(defaults.mailbox_capacity, 50);
        let asked = SpawnOptions {
            mailbox_capacity: Some(0),
            memory_limit: Some(1 << 30),
            cpu_deadline: Some(Duration::from_millis(7)),
            ..SpawnOptions::default()
        };
        let limits = Limits::of(&config, &asked);
        assert_eq!(limits.memory, 1 << 20, "capped at the host's limit");
        assert_eq!(
            limits.mailbox_capacity, 1,
            "a mailbox holds at least one message"
        );
        assert_eq!(limits.cpu_deadline, Duration::from_millis(7));
    }

    #[test]
    fn a_child_never_gets_more_than_its_parent() {
        let mut config = HostConfig::new();
        config.memory_limit(1 << 20).mailbox_capacity(50);
        let parent = Limits::of(&config, &SpawnOptions::default());
        let greedy = SpawnOptions {
            mailbox_capacity: Some(usize::MAX),
            mailbox_bytes: Some(usize::MAX),
            memory_limit: Some(1 << 30),
            cpu_deadline: Some(Duration::from_secs(3600)),
            quotas: Some(Quotas {
                timers: usize::MAX,
                descendants: usize::MAX,
                ..Quotas::default()
            }),
            hibernate_after: None,
        };
        let child = parent.child(&greedy);
        assert_eq!(child.mailbox_capacity, 50);
        assert_eq!(child.mailbox_bytes, parent.mailbox_bytes);
        assert_eq!(child.memory, 1 << 20);
        assert_eq!(child.cpu_deadline, parent.cpu_deadline);
        assert_eq!(child.quotas, parent.quotas);
        let modest = SpawnOptions {
            mailbox_capacity: Some(3),
            ..SpawnOptions::default()
        };
        assert_eq!(parent.child(&modest).mailbox_capacity, 3);
        assert_eq!(parent.child(&SpawnOptions::default()), parent);
    }

    #[test]
    fn descendants_are_counted_at_every_ancestor_and_given_back() {
        let root = Lineage::root(3);
        let a = root.reserve(10).expect("a place under the root");
        let b = a
            .lineage()
            .reserve(1)
            .expect("a place under a and the root");
        assert_eq!((root.live(), a.lineage().live()), (2, 1));
        let c = b.lineage().reserve(5).expect("the root's third place");
        assert!(
            b.lineage().reserve(5).is_none(),
            "b may have one descendant"
        );
        assert!(a.lineage().reserve(5).is_none(), "the root is full");
        assert_eq!(root.live(), 3, "a refusal reserves nothing");
        drop(c);
        assert_eq!(
            (root.live(), a.lineage().live(), b.lineage().live()),
            (2, 1, 0)
        );
        drop(b);
        drop(a);
        assert_eq!(root.live(), 0);
    }
}
