//! Named sets of actors: used once for topics (publish/subscribe) and once for groups
//! (µJavaActors categories).
//!
//! Invariants:
//! - A member is in a set at most once; members are listed in join order.
//! - The two indexes agree: `member` is in set `name` exactly when `name` is among the sets of
//!   `member`. Empty sets and members of no set are not kept (no growth from churn).

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

use crate::address::Address;

/// Named sets of actors: used once for topics and once for groups.
#[derive(Default)]
pub(crate) struct Directory {
    by_name: RwLock<HashMap<String, Vec<Address>>>,
    by_member: RwLock<HashMap<Address, HashSet<String>>>,
}

impl Directory {
    /// Adds `member` to `name` (no duplicates).
    pub(crate) fn join(&self, name: &str, member: &Address) {
        let mut names = self.by_name.write().unwrap_or_else(|p| p.into_inner());
        let members = names.entry(name.to_owned()).or_default();
        if !members.contains(member) {
            members.push(member.clone());
        }
        self.by_member
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(member.clone())
            .or_default()
            .insert(name.to_owned());
    }

    /// Adds `member` to `name` unless it is in `max` sets already; true if it is a member now.
    pub(crate) fn join_within(&self, name: &str, member: &Address, max: usize) -> bool {
        let mut names = self.by_name.write().unwrap_or_else(|p| p.into_inner());
        let mut by_member = self.by_member.write().unwrap_or_else(|p| p.into_inner());
        let joined = by_member.entry(member.clone()).or_default();
        if !joined.contains(name) {
            if joined.len() >= max {
                if joined.is_empty() {
                    by_member.remove(member);
                }
                return false;
            }
            joined.insert(name.to_owned());
            names
                .entry(name.to_owned())
                .or_default()
                .push(member.clone());
        }
        true
    }

    /// How many sets `member` is in.
    #[cfg(test)]
    pub(crate) fn joined(&self, member: &Address) -> usize {
        self.by_member
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(member)
            .map_or(0, HashSet::len)
    }

    /// The sets `member` is in, sorted.
    pub(crate) fn sets_of(&self, member: &Address) -> Vec<String> {
        let mut sets: Vec<String> = self
            .by_member
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(member)
            .map(|names| names.iter().cloned().collect())
            .unwrap_or_default();
        sets.sort();
        sets
    }

    /// Removes `member` from `name`.
    pub(crate) fn leave(&self, name: &str, member: &Address) {
        let mut names = self.by_name.write().unwrap_or_else(|p| p.into_inner());
        if let Some(members) = names.get_mut(name) {
            members.retain(|m| m != member);
            if members.is_empty() {
                names.remove(name);
            }
        }
        let mut by_member = self.by_member.write().unwrap_or_else(|p| p.into_inner());
        if let Some(joined) = by_member.get_mut(member) {
            joined.remove(name);
            if joined.is_empty() {
                by_member.remove(member);
            }
        }
    }

    /// Removes `member` from every set it joined.
    pub(crate) fn remove_member(&self, member: &Address) {
        let joined = self
            .by_member
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(member);
        if let Some(joined) = joined {
            let mut names = self.by_name.write().unwrap_or_else(|p| p.into_inner());
            for name in joined {
                if let Some(members) = names.get_mut(&name) {
                    members.retain(|m| m != member);
                    if members.is_empty() {
                        names.remove(&name);
                    }
                }
            }
        }
    }

    /// The current members of `name`, in join order.
    pub(crate) fn members(&self, name: &str) -> Vec<Address> {
        self.by_name
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    /// Every set with a member, and how many members it has.
    pub(crate) fn names(&self) -> Vec<(String, u32)> {
        self.by_name
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(name, members)| {
                (
                    name.clone(),
                    u32::try_from(members.len()).unwrap_or(u32::MAX),
                )
            })
            .collect()
    }

    /// Whether `name` has any member (cheap check before encoding a message).
    pub(crate) fn is_empty(&self, name: &str) -> bool {
        !self
            .by_name
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::ActorPath;

    fn member(path: &str) -> Address {
        Address {
            path: ActorPath::parse(path).unwrap(),
            incarnation: 1,
        }
    }

    #[test]
    fn members_are_listed_once_in_join_order() {
        let d = Directory::default();
        let (a, b) = (member("/user/a"), member("/user/b"));
        d.join("t", &b);
        d.join("t", &a);
        d.join("t", &b);
        assert_eq!(d.members("t"), [b.clone(), a.clone()]);
        d.leave("t", &b);
        assert_eq!(d.members("t"), [a]);
    }

    #[test]
    fn a_member_joins_at_most_max_sets_and_rejoining_is_free() {
        let directory = Directory::default();
        let a = member("/user/a");
        assert!(directory.join_within("t1", &a, 2));
        assert!(directory.join_within("t2", &a, 2));
        assert!(directory.join_within("t1", &a, 2), "already a member");
        assert!(
            !directory.join_within("t3", &a, 2),
            "a third set is refused"
        );
        assert!(directory.members("t3").is_empty());
        assert_eq!(directory.joined(&a), 2);
        directory.leave("t1", &a);
        assert!(directory.join_within("t3", &a, 2), "leaving frees a place");
        assert_eq!(directory.members("t1"), Vec::<Address>::new());
        assert!(!directory.join_within("x", &member("/user/b"), 0));
        assert_eq!(
            directory.joined(&member("/user/b")),
            0,
            "a refused member is not kept"
        );
    }

    #[test]
    fn removing_a_member_leaves_every_set_and_empty_sets_vanish() {
        let d = Directory::default();
        let a = member("/user/a");
        d.join("t1", &a);
        d.join("t2", &a);
        assert!(!d.is_empty("t1"));
        d.remove_member(&a);
        assert!(d.is_empty("t1") && d.is_empty("t2"));
        assert!(d.by_member.read().unwrap().is_empty());
        assert!(d.by_name.read().unwrap().is_empty());
    }
}
