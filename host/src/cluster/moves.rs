//! Live moves (the state of them; the protocol is in `moving`): a top-level actor of this node continues on another node with its memory, its
//! mailbox and its incarnation, and senders need not know (`mote move /user/x --to b`).
//!
//! ```text
//! source a                                   target b                       any node x
//! Depart: capture, hold the mailbox
//! image -> object store (images bucket)
//! Adopt{path, incarnation, image} ---------> arrival: hold what comes for path
//!                                            fetch + check the image
//!        <--------------------------------- Adopted (or refused: a serves on)
//! claim name: a -> b (compare-and-set)
//! hand over: forward the mailbox, then
//! free the path; later arrivals go on to b   sees the claim: Fence -> a       sees the claim:
//!   Fence from x -> Fenced{x} -------------> x's direct sends are released    Fence -> a, then
//!                                            once every node's Fenced came:   sends to b
//!                                            restore at path#incarnation,
//!                                            held messages first
//! ```
//!
//! Invariants:
//! - Per sender, order is kept across a move. What a node sent to the source before it saw
//!   the new claim goes through the source, in order, followed by that node's `Fenced`
//!   marker; what it sends the target directly is held there until that marker arrives. The
//!   source's own traffic always goes through one link, in order. The restored actor takes
//!   everything held before it is registered, so nothing sent later overtakes it.
//! - The actor is on one node at a time: the source serves nothing between its capture and
//!   the verdict, and the target restores it only after the claim names the target (every
//!   node's fence follows the claim's change). A move refused or timed out before the claim
//!   changed leaves the actor serving on at the source, its mailbox untouched.
//! - A node that does not fence in time (or goes down) does not hold an arrival forever: after
//!   [`FENCE_WAIT`] the arrival completes without it.
//!
//! A kill -9 in the middle of a move. From the moment its image is stored, a move is a
//! [`MoveRecord`] in key-value (bucket `mote-<cluster>-moves`, by the image's key) naming the
//! node that is to run the actor from the image, its *holder*: the target, until another node
//! takes the move over. The record outlives both nodes, and whoever runs the actor from it
//! holds it:
//! - The target restores the actor, then deletes the record (compare-and-set on the revision it
//!   read), the image, and tells the source (`MoveSettled`), which drops what it kept.
//! - If the source dies first, the target finishes on its own: it takes the claim (the record
//!   says the source gave the actor up), stops waiting for fences (what the dead source had
//!   queued died with it, as any node's queue does), and restores. A target that had not been
//!   asked yet learns of the move from the record, when it hears the source is down.
//! - If the target dies before it settled, the source takes the move over: it moves the
//!   record's holder to itself (compare-and-set), takes the claim back and restores the actor
//!   from the image, with every message it had forwarded and everything that came since, in
//!   order. What other nodes had sent straight to the target died with the target.
//! - A node that restarts (or hears of a death later) does the same from the records: a record
//!   it holds, it restores; one whose holder is dead and that names it, it takes over.
//! - One node runs the actor: a node restores from a record only while it is the record's
//!   holder, and a node that restored and then finds its record taken over (its delete fails:
//!   a node took it for dead meanwhile) stops its copy.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use serde::{Deserialize, Serialize};

use super::config::ClusterError;
use super::wire;
use crate::actor::image::ActorImage;
use crate::address::Address;
use crate::message::Envelope;
use crate::sandbox::image::ImageError;

/// How long an arrival waits for the other nodes' fences.
pub(crate) const FENCE_WAIT: Duration = Duration::from_secs(10);

/// Why an actor could not be moved.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// This host has not joined a cluster.
    #[error("this host is not in a cluster: a move needs one")]
    NotClustered,
    /// No live actor at the path on this node.
    #[error("no live actor at {0} on this node")]
    NoActor(String),
    /// Only a top-level actor (`/user/<name>`) moves: a child lives on its parent's node.
    #[error("{0} is not a top-level actor (/user/<name>): a child lives on its parent's node")]
    NotTopLevel(String),
    /// The target is this node, or no live node of that name.
    #[error("no other live node named {0:?}")]
    UnknownNode(String),
    /// The actor cannot be captured now (see [`ImageError`]): it serves on here.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// A move of this top-level name is under way already (its record is in key-value).
    #[error("a move of {0} is under way already")]
    Underway(String),
    /// The actor stopped before it was captured.
    #[error("the actor at {0} stopped before it was captured")]
    Stopped(String),
    /// The target refused to take the actor: it serves on here.
    #[error("node {node} refused the actor: {reason}")]
    Refused {
        /// The target.
        node: String,
        /// Its reason.
        reason: String,
    },
    /// The target did not answer in time: the actor serves on here.
    #[error("node {0} did not answer in time: the actor serves on here")]
    Timeout(String),
    /// The cluster's stores failed (the image could not be shipped, or the claim not moved):
    /// the actor serves on here.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

/// A move under way, as key-value keeps it (see the module's doc).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(super) struct MoveRecord {
    /// The actor's path.
    pub(super) path: String,
    /// The node it leaves.
    pub(super) from: String,
    /// The node it goes to.
    pub(super) to: String,
    /// The node that is to run it from the image.
    pub(super) holder: String,
    pub(super) incarnation: u64,
    /// Its limits, which it keeps.
    pub(super) limits: wire::Limits,
}

/// What a node does with a move's record it finds.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Recovery {
    /// It holds the record: it restores the actor.
    Finish,
    /// The record's holder is dead and the move is this node's (its source or target): it
    /// takes the record over and restores the actor.
    TakeOver,
    /// Not this node's to do.
    Leave,
}

impl MoveRecord {
    /// What node `me` does with this record, knowing which nodes are live.
    pub(super) fn recovery(&self, me: &str, live: impl Fn(&str) -> bool) -> Recovery {
        if self.holder == me {
            Recovery::Finish
        } else if !live(&self.holder) && (self.from == me || self.to == me) {
            Recovery::TakeOver
        } else {
            Recovery::Leave
        }
    }
}

/// An actor on its way to this node.
pub(super) struct Arrival {
    /// The node it comes from.
    pub(super) from: String,
    pub(super) incarnation: u64,
    /// Its limits there, which it keeps here.
    pub(super) limits: wire::Limits,
    /// Its image, once fetched and checked.
    pub(super) image: Option<Box<ActorImage>>,
    /// Nodes whose fence is awaited.
    pub(super) waiting: HashSet<String>,
    /// What it gets first, in order: the source's forwards and fenced nodes' sends.
    pub(super) ready: Vec<Envelope>,
    /// Direct sends of nodes not fenced yet, by node.
    pub(super) held: HashMap<String, Vec<Envelope>>,
    /// Its record's key and the revision this node holds it at.
    pub(super) record: Option<(String, u64)>,
    /// Watchers to attach here once it is restored (of an actor taken back).
    pub(super) watchers: Vec<Address>,
    /// Stopped at the `move-restoring` fault point once already.
    pub(super) paused: bool,
}

impl Arrival {
    pub(super) fn complete(&self) -> bool {
        self.image.is_some() && self.waiting.is_empty()
    }

    pub(super) fn release(&mut self, node: &str) {
        self.waiting.remove(node);
        if let Some(held) = self.held.remove(node) {
            self.ready.extend(held);
        }
    }
}

/// This node's moves, out and in.
#[derive(Default)]
pub(crate) struct Moves {
    /// Moves out waiting for their target's answer, by path.
    pub(super) asked: Mutex<HashMap<String, oneshot::Sender<Option<String>>>>,
    /// Where actors that left this node went, by path: a message that still reaches this node
    /// for one goes on there.
    pub(super) departed: Mutex<HashMap<String, String>>,
    /// Actors on their way here, by path.
    pub(super) arrivals: Mutex<HashMap<String, Arrival>>,
    /// How many arrivals there are (the delivery path's check without the lock).
    pub(super) arriving: AtomicUsize,
    /// The messages of a completing arrival, taken as its actor's backlog.
    pub(super) ready: Mutex<HashMap<String, Vec<Envelope>>>,
    /// Moves out of this node from their record on, until their source's part is done, by
    /// path.
    pub(super) unsettled: Mutex<HashMap<String, Unsettled>>,
}

/// A move out whose target has not settled yet.
pub(super) struct Unsettled {
    /// The target.
    pub(super) to: String,
    /// The actor.
    pub(super) actor: Address,
    /// Told how the move ended (once; the entry stays until the move's task is done).
    pub(super) told: Option<oneshot::Sender<Ending>>,
}

/// How a move out ended, as its source hears.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ending {
    /// The target restored the actor.
    Settled,
    /// The target went down first; the watchers the source had pointed there.
    TargetDown(Vec<Address>),
}

impl Moves {
    /// Holds a message for an actor on its way here, sent by `origin`; gives it back if none
    /// is on its way to `path`.
    pub(crate) fn hold(
        &self,
        path: &str,
        origin: &str,
        envelope: Envelope,
    ) -> Result<(), Envelope> {
        if self.arriving.load(Ordering::Acquire) == 0 {
            return Err(envelope);
        }
        let mut arrivals = lock(&self.arrivals);
        let Some(arrival) = arrivals.get_mut(path) else {
            return Err(envelope);
        };
        let held = arrival.ready.len() + arrival.held.values().map(Vec::len).sum::<usize>();
        if held as u64 >= arrival.limits.mailbox_capacity {
            // As its mailbox would: past its capacity, a dead letter.
            return Err(envelope);
        }
        if origin == arrival.from || !arrival.waiting.contains(origin) {
            arrival.ready.push(envelope);
        } else {
            arrival
                .held
                .entry(origin.to_owned())
                .or_default()
                .push(envelope);
        }
        Ok(())
    }

    /// Where the actor that was at `path` went, if it left this node.
    pub(crate) fn departed(&self, path: &str) -> Option<String> {
        lock(&self.departed).get(path).cloned()
    }

    /// The backlog of the actor arriving at `path`, for the kernel as it registers it.
    pub(crate) fn backlog(&self, path: &str) -> Vec<Envelope> {
        lock(&self.ready).remove(path).unwrap_or_default()
    }

    /// Forgets an arrival; gives back what it held.
    pub(super) fn forget(&self, path: &str) -> Vec<Envelope> {
        let mut arrivals = lock(&self.arrivals);
        let Some(mut arrival) = arrivals.remove(path) else {
            return Vec::new();
        };
        self.arriving.fetch_sub(1, Ordering::AcqRel);
        let mut all = std::mem::take(&mut arrival.ready);
        for (_, held) in arrival.held.drain() {
            all.extend(held);
        }
        all
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(waiting: &[&str]) -> Arrival {
        Arrival {
            from: "a".into(),
            incarnation: 7,
            limits: wire::Limits {
                mailbox_capacity: 100,
                mailbox_bytes: 1 << 20,
                memory: 1 << 20,
                cpu_deadline_ms: 1000,
                descendants: 10,
            },
            image: None,
            waiting: waiting.iter().map(|s| s.to_string()).collect(),
            ready: Vec::new(),
            held: HashMap::new(),
            record: None,
            watchers: Vec::new(),
            paused: false,
        }
    }

    fn record(from: &str, to: &str, holder: &str) -> MoveRecord {
        MoveRecord {
            path: "/user/x".into(),
            from: from.into(),
            to: to.into(),
            holder: holder.into(),
            incarnation: 7,
            limits: arrival(&[]).limits,
        }
    }

    #[test]
    fn the_holder_restores_and_a_dead_holder_s_move_goes_to_its_source_or_target() {
        let live = |dead: &'static [&'static str]| move |n: &str| !dead.contains(&n);
        // The target holds it: the target finishes; the source, while the target lives, leaves it.
        let moving = record("a", "b", "b");
        assert_eq!(moving.recovery("b", live(&["a"])), Recovery::Finish);
        assert_eq!(moving.recovery("a", live(&[])), Recovery::Leave);
        // The target died: its source takes the move over, and a third node never does.
        assert_eq!(moving.recovery("a", live(&["b"])), Recovery::TakeOver);
        assert_eq!(moving.recovery("c", live(&["b"])), Recovery::Leave);
        // Taken over by the source: the target, back again, leaves it; the source finishes.
        let taken = record("a", "b", "a");
        assert_eq!(taken.recovery("b", live(&[])), Recovery::Leave);
        assert_eq!(taken.recovery("a", live(&["b"])), Recovery::Finish);
        // Both sides dead, the first back takes it over.
        assert_eq!(taken.recovery("b", live(&["a"])), Recovery::TakeOver);
    }

    fn msg(body: &str) -> Envelope {
        Envelope::new(None, "t", body.as_bytes().to_vec())
    }

    fn bodies(list: &[Envelope]) -> Vec<String> {
        list.iter()
            .map(|e| String::from_utf8_lossy(&e.body).into_owned())
            .collect()
    }

    #[test]
    fn a_node_s_direct_sends_wait_for_its_fence_and_the_source_s_never_wait() {
        let moves = Moves::default();
        assert!(moves.hold("/user/x", "c", msg("no arrival")).is_err());
        lock(&moves.arrivals).insert("/user/x".into(), arrival(&["b", "c"]));
        moves.arriving.fetch_add(1, Ordering::AcqRel);
        moves.hold("/user/x", "c", msg("c2")).unwrap();
        moves.hold("/user/x", "a", msg("c1 via a")).unwrap();
        moves.hold("/user/x", "b", msg("b1")).unwrap();
        {
            let mut arrivals = lock(&moves.arrivals);
            let x = arrivals.get_mut("/user/x").unwrap();
            assert_eq!(bodies(&x.ready), ["c1 via a"]);
            x.release("c");
            assert_eq!(bodies(&x.ready), ["c1 via a", "c2"]);
            assert!(!x.complete(), "b has not fenced, and no image");
            x.release("b");
            assert!(!x.complete(), "no image yet");
        }
        moves.hold("/user/x", "c", msg("c3")).unwrap();
        assert_eq!(
            bodies(&moves.forget("/user/x")),
            ["c1 via a", "c2", "b1", "c3"]
        );
        assert!(moves.hold("/user/x", "c", msg("gone")).is_err());
    }
}
