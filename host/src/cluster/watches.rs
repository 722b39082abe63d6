//! Watches that cross nodes, kept by the watcher's node: when the target's node goes down,
//! each of its watchers here is told once, as if the target had stopped.
//!
//! Invariants:
//! - An entry leaves the table exactly once: by the target's own notice, by an unwatch, or by
//!   its node going down. Only the last of these tells the watcher (the first removes it).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::address::Address;

/// Watcher and target, by the target's node.
#[derive(Default)]
pub(crate) struct Watches {
    by_node: Mutex<HashMap<String, HashSet<(Address, Address)>>>,
}

impl Watches {
    /// `watcher` watches `target` on `node`.
    pub(crate) fn add(&self, node: &str, watcher: &Address, target: &Address) {
        self.lock()
            .entry(node.to_owned())
            .or_default()
            .insert((watcher.clone(), target.clone()));
    }

    /// Drops the watch of `watcher` on `target`, wherever it is; true if it was kept.
    pub(crate) fn remove(&self, watcher: &Address, target: &Address) -> bool {
        let mut by_node = self.lock();
        let key = (watcher.clone(), target.clone());
        let mut found = None;
        for (node, set) in by_node.iter_mut() {
            if set.remove(&key) {
                found = Some((node.clone(), set.is_empty()));
                break;
            }
        }
        if let Some((node, true)) = &found {
            by_node.remove(node);
        }
        found.is_some()
    }

    /// The watches of targets on `node`, which is down: each to be told once.
    pub(crate) fn node_down(&self, node: &str) -> Vec<(Address, Address)> {
        self.lock()
            .remove(node)
            .map(|set| set.into_iter().collect())
            .unwrap_or_default()
    }

    /// Takes the watches of `target` on `node` out of the table, untold: the watchers, for
    /// whoever now holds the target (a move taken back from a target that went down).
    pub(crate) fn take(&self, node: &str, target: &Address) -> Vec<Address> {
        let mut by_node = self.lock();
        let Some(set) = by_node.get_mut(node) else {
            return Vec::new();
        };
        let taken: Vec<(Address, Address)> =
            set.iter().filter(|(_, t)| t == target).cloned().collect();
        for key in &taken {
            set.remove(key);
        }
        if set.is_empty() {
            by_node.remove(node);
        }
        taken.into_iter().map(|(watcher, _)| watcher).collect()
    }

    /// How many watches cross to other nodes.
    pub(crate) fn len(&self) -> usize {
        self.lock().values().map(HashSet::len).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<(Address, Address)>>> {
        self.by_node.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::at;

    #[test]
    fn a_watch_ends_once_by_notice_or_by_node_down() {
        let watches = Watches::default();
        let (w, t1, t2) = (at("/user/w", 1), at("/user/t1", 2), at("/user/t2", 3));
        watches.add("b", &w, &t1);
        watches.add("b", &w, &t2);
        assert!(watches.remove(&w, &t1), "the target's notice ends it");
        assert!(!watches.remove(&w, &t1), "only once");
        assert_eq!(watches.node_down("b"), vec![(w.clone(), t2.clone())]);
        assert!(watches.node_down("b").is_empty(), "a node goes down once");
        assert!(!watches.remove(&w, &t2));
        assert_eq!(watches.len(), 0);
    }

    #[test]
    fn taken_watches_are_not_told_when_their_node_goes_down() {
        let watches = Watches::default();
        let (w1, w2, moved, other) = (
            at("/user/w1", 1),
            at("/user/w2", 2),
            at("/user/m", 3),
            at("/user/o", 4),
        );
        watches.add("b", &w1, &moved);
        watches.add("b", &w2, &moved);
        watches.add("b", &w1, &other);
        let mut taken = watches.take("b", &moved);
        taken.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
        assert_eq!(taken, vec![w1.clone(), w2]);
        assert_eq!(watches.node_down("b"), vec![(w1, other)]);
    }
}
