//! Membership: which nodes are live, as their heartbeats say, and what they have (topics and
//! groups with members there). A node is down once it leaves cleanly or stays silent for the
//! failure timeout.
//!
//! Invariants:
//! - Each node is up at most once between two downs: `heard` reports a node new exactly when
//!   it was not live, and `expire`/`leave` report it down exactly once.
//! - A heartbeat of an older session of a node is ignored once a newer one is heard (a
//!   restarted node replaces its old self).
//! - Placement by rendezvous hashing depends only on the set of live names, so every node with
//!   the same view places an entity on the same node.

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::config::ClusterError;
use super::wire::Heartbeat;

/// What a node told in its last heartbeat.
struct Member {
    session: u64,
    last: Instant,
    topics: HashMap<String, u32>,
    groups: HashMap<String, (u32, u64)>,
    entities: HashSet<String>,
}

/// The live nodes other than this one.
#[derive(Default)]
pub(crate) struct Members {
    live: RwLock<HashMap<String, Member>>,
}

/// What changed with a heartbeat.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing to tell.
    None,
    /// A node that was not live is up.
    Up,
    /// A node left (cleanly).
    Down,
    /// A node restarted: its old session is down, the new one up.
    Restarted,
}

impl Members {
    /// Takes a heartbeat in, at `now`.
    pub(crate) fn heard(&self, beat: Heartbeat, now: Instant) -> Change {
        let mut live = self.live.write().unwrap_or_else(|p| p.into_inner());
        if beat.leaving {
            return match live.get(&beat.node) {
                Some(m) if m.session == beat.session => {
                    live.remove(&beat.node);
                    Change::Down
                }
                _ => Change::None,
            };
        }
        let session = beat.session;
        if live
            .get(&beat.node)
            .is_some_and(|old| old.session > session)
        {
            // A late beat of an older run: the newer session stands.
            return Change::None;
        }
        let member = Member {
            session,
            last: now,
            topics: beat.topics.into_iter().collect(),
            groups: beat
                .groups
                .into_iter()
                .map(|(name, count, shortest)| (name, (count, shortest)))
                .collect(),
            entities: beat.entities.into_iter().collect(),
        };
        match live.insert(beat.node, member) {
            None => Change::Up,
            Some(old) if old.session == session => Change::None,
            Some(_) => Change::Restarted,
        }
    }

    /// Hears heartbeats on `beats` for one beat and a half (every live node beats in that
    /// time). A live node named `name` (the one joining) refuses the join.
    pub(crate) async fn listen(
        &self,
        beats: &mut async_nats::Subscriber,
        heartbeat: Duration,
        name: Option<&str>,
    ) -> Result<(), ClusterError> {
        let until = tokio::time::Instant::now() + heartbeat + heartbeat / 2;
        while let Ok(Some(message)) = tokio::time::timeout_at(until, beats.next()).await {
            let Ok(beat) = super::wire::decode::<Heartbeat>(&message.payload) else {
                continue;
            };
            if let Some(name) = name
                && beat.node == name
                && !beat.leaving
            {
                return Err(ClusterError::NameTaken(name.to_owned()));
            }
            self.heard(beat, Instant::now());
        }
        Ok(())
    }

    /// Nodes silent for `timeout` by `now`: they are down, and no longer members.
    pub(crate) fn expire(&self, timeout: Duration, now: Instant) -> Vec<String> {
        let mut live = self.live.write().unwrap_or_else(|p| p.into_inner());
        let dead: Vec<String> = live
            .iter()
            .filter(|(_, m)| now.saturating_duration_since(m.last) >= timeout)
            .map(|(name, _)| name.clone())
            .collect();
        for name in &dead {
            live.remove(name);
        }
        dead
    }

    /// Whether `node` is live.
    pub(crate) fn is_live(&self, node: &str) -> bool {
        self.read().contains_key(node)
    }

    /// The live nodes, by name.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.read().keys().cloned().collect();
        names.sort();
        names
    }

    /// The live nodes with subscribers of `topic`, and how many each has.
    pub(crate) fn subscribed(&self, topic: &str) -> Vec<(String, u32)> {
        self.read()
            .iter()
            .filter_map(|(node, m)| m.topics.get(topic).map(|n| (node.clone(), *n)))
            .collect()
    }

    /// The live nodes with members of `group`: how many, and their shortest mailbox.
    pub(crate) fn in_group(&self, group: &str) -> Vec<(String, u32, u64)> {
        self.read()
            .iter()
            .filter_map(|(node, m)| {
                m.groups
                    .get(group)
                    .map(|(count, shortest)| (node.clone(), *count, *shortest))
            })
            .collect()
    }

    /// Counts one more message queued for `group` on `node` until its next beat says better.
    pub(crate) fn queued(&self, node: &str, group: &str) {
        let mut live = self.live.write().unwrap_or_else(|p| p.into_inner());
        if let Some((_, shortest)) = live.get_mut(node).and_then(|m| m.groups.get_mut(group)) {
            *shortest = shortest.saturating_add(1);
        }
    }

    /// Whether a live node hosts the entity kind `kind`.
    pub(crate) fn hosts(&self, kind: &str) -> bool {
        self.read().values().any(|m| m.entities.contains(kind))
    }

    /// The node where the entity `path` of `kind` lives: the highest rendezvous score among
    /// the live nodes that host the kind, and `me` if it does (`me_hosts`).
    pub(crate) fn place(&self, path: &str, kind: &str, me: &str, me_hosts: bool) -> Option<String> {
        let live = self.read();
        let hosts = live
            .iter()
            .filter(|(_, m)| m.entities.contains(kind))
            .map(|(node, _)| node.as_str())
            .chain(me_hosts.then_some(me));
        hosts
            .map(|node| (score(node, path), node))
            .max()
            .map(|(_, node)| node.to_owned())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Member>> {
        self.live.read().unwrap_or_else(|p| p.into_inner())
    }
}

/// The rendezvous score of `node` for `key`: FNV-1a over both, then a 64-bit finalizer, so that
/// every node computes the same placement whatever its build.
pub(crate) fn score(node: &str, key: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes().chain([0xff]).chain(key.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(node: &str, session: u64, leaving: bool) -> Heartbeat {
        Heartbeat {
            node: node.to_owned(),
            session,
            leaving,
            topics: vec![("news".to_owned(), 2)],
            groups: vec![("workers".to_owned(), 3, 7)],
            entities: vec!["carts".to_owned()],
        }
    }

    #[test]
    fn a_node_is_up_once_and_down_once() {
        let members = Members::default();
        let t0 = Instant::now();
        assert_eq!(members.heard(beat("b", 1, false), t0), Change::Up);
        assert_eq!(members.heard(beat("b", 1, false), t0), Change::None);
        assert_eq!(members.heard(beat("b", 2, false), t0), Change::Restarted);
        assert_eq!(
            members.heard(beat("b", 1, false), t0),
            Change::None,
            "an older run's late beat"
        );
        assert_eq!(
            members.heard(beat("b", 1, true), t0),
            Change::None,
            "an older run's leave"
        );
        assert_eq!(members.heard(beat("b", 2, true), t0), Change::Down);
        assert!(!members.is_live("b"));
        assert_eq!(members.heard(beat("c", 5, false), t0), Change::Up);
        let later = t0 + Duration::from_secs(3);
        assert!(members.expire(Duration::from_secs(5), later).is_empty());
        assert_eq!(members.expire(Duration::from_secs(3), later), ["c"]);
        assert!(
            members.expire(Duration::from_secs(3), later).is_empty(),
            "down once"
        );
    }

    #[test]
    fn what_a_beat_says_is_what_routing_sees() {
        let members = Members::default();
        members.heard(beat("b", 1, false), Instant::now());
        assert_eq!(members.subscribed("news"), [("b".to_owned(), 2)]);
        assert_eq!(members.in_group("workers"), [("b".to_owned(), 3, 7)]);
        members.queued("b", "workers");
        assert_eq!(members.in_group("workers"), [("b".to_owned(), 3, 8)]);
        assert!(members.hosts("carts") && !members.hosts("other"));
    }

    #[test]
    fn placement_is_the_same_on_every_node_and_only_among_hosts() {
        let (a, b) = (Members::default(), Members::default());
        a.heard(beat("b", 1, false), Instant::now());
        b.heard(beat("a", 1, false), Instant::now());
        for i in 0..100 {
            let path = format!("/user/carts/{i}");
            assert_eq!(
                a.place(&path, "carts", "a", true),
                b.place(&path, "carts", "b", true),
                "{path}"
            );
        }
        // A node that does not host the kind never gets it.
        assert_eq!(
            a.place("/user/carts/1", "carts", "a", false).as_deref(),
            Some("b")
        );
        assert_eq!(a.place("/user/other/1", "other", "a", false), None);
        // Both nodes get some of 100 ids.
        let on_a = (0..100)
            .filter(|i| {
                a.place(&format!("/user/carts/{i}"), "carts", "a", true)
                    .as_deref()
                    == Some("a")
            })
            .count();
        assert!((20..=80).contains(&on_a), "{on_a} of 100 on a");
    }
}
