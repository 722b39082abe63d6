//! Who owns a top-level path: a mirror of the cluster's claims (JetStream key-value), kept by
//! a watch. Children live on their parent's node, so the first name under `/user` decides.
//!
//! Invariants:
//! - A claim names one node; the key-value store's compare-and-set makes a name taken by a
//!   live node unclaimable by another.
//! - Keys are the top-level names, escaped into the key alphabet (`=XX` for each byte outside
//!   `[A-Za-z0-9_-]`), so every valid name has exactly one key.

use std::collections::HashMap;
use std::sync::RwLock;

/// The top-level names claimed in the cluster, and by which node.
#[derive(Default)]
pub(crate) struct Routes {
    owners: RwLock<HashMap<String, String>>,
}

impl Routes {
    /// The node that claimed the top-level name of `path`, if any.
    pub(crate) fn owner(&self, path: &str) -> Option<String> {
        let top = top_level(path)?;
        self.owners
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(top)
            .cloned()
    }

    /// Runs `f` with the owner of `path`'s top-level name under the read lock: what `f`
    /// queues goes before anything [`Routes::change`] queues for a change of that owner.
    pub(crate) fn with_owner<R>(&self, path: &str, f: impl FnOnce(Option<&str>) -> R) -> R {
        let owners = self.owners.read().unwrap_or_else(|p| p.into_inner());
        f(top_level(path)
            .and_then(|top| owners.get(top))
            .map(String::as_str))
    }

    /// Records a claim (or its removal, with `None`) seen in the store.
    pub(crate) fn set(&self, name: String, node: Option<String>) {
        self.change(name, node, |_| {});
    }

    /// Records a claim's change, running `before` with the previous owner under the write
    /// lock, before the change is seen: what it queues goes after anything queued under
    /// [`Routes::with_owner`] for the old owner.
    pub(crate) fn change(
        &self,
        name: String,
        node: Option<String>,
        before: impl FnOnce(Option<&str>),
    ) {
        let mut owners = self.owners.write().unwrap_or_else(|p| p.into_inner());
        before(owners.get(&name).map(String::as_str));
        match node {
            Some(node) => owners.insert(name, node),
            None => owners.remove(&name),
        };
    }
}

/// The first name under `/user` in `path`.
pub(crate) fn top_level(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/user/")?;
    Some(rest.split('/').next().unwrap_or(rest)).filter(|n| !n.is_empty())
}

/// A name (or path) as a key of the store.
pub(crate) fn key(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("={b:02X}"));
        }
    }
    out
}

/// The name of a key [`key`] made; `None` for a key it cannot have made.
pub(crate) fn name(key: &str) -> Option<String> {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'=' {
            let hex = key.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_name_under_user_decides() {
        let routes = Routes::default();
        routes.set("shop".into(), Some("b".into()));
        assert_eq!(routes.owner("/user/shop/cart/1").as_deref(), Some("b"));
        assert_eq!(routes.owner("/user/shop").as_deref(), Some("b"));
        assert_eq!(routes.owner("/user/shopping"), None);
        assert_eq!(routes.owner("/system/shop"), None);
        routes.set("shop".into(), None);
        assert_eq!(routes.owner("/user/shop"), None);
    }

    #[test]
    fn every_name_has_one_key_and_back() {
        for given in ["plain", "a.b", "x~y:z@w+v=u", "-_-", "/user/carts/42"] {
            let k = key(given);
            assert!(
                k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-=".contains(&b)),
                "{k} is in the key alphabet"
            );
            assert_eq!(name(&k).as_deref(), Some(given));
        }
        assert_eq!(name("=Z1"), None);
        assert_eq!(name("=4"), None);
    }
}
