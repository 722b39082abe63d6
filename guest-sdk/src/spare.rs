//! The strings of the message last handled, kept for the next one: unpacking a message copies
//! its sender's path and its kind into them instead of allocating two new strings, so an actor
//! that keeps handling messages allocates no string a message (w1: two `malloc`s and two
//! `free`s fewer a message, with the copies they carried).
//!
//! Invariants (tested below):
//! - A string handed out is empty; it keeps the capacity it was kept with.
//! - A string whose capacity passed [`KEEP`] bytes is dropped, not kept, so one long path or
//!   kind does not stay in an idle actor's heap.
//! - Keeping is only ever an optimisation: a string that was never kept (or taken twice) comes
//!   back empty and new.

use std::cell::Cell;

use crate::bindings::mote::actor::types::Address;

/// Capacity past which a string is not kept (a path's longest is 1,024 bytes by default).
const KEEP: usize = 256;

thread_local! {
    static PATH: Cell<String> = const { Cell::new(String::new()) };
    static KIND: Cell<String> = const { Cell::new(String::new()) };
}

/// An empty string for the next message's sender path.
pub(crate) fn path() -> String {
    PATH.with(Cell::take)
}

/// An empty string for the next message's kind.
pub(crate) fn kind() -> String {
    KIND.with(Cell::take)
}

/// Keeps a handled message's sender path and kind for the next message.
pub(crate) fn keep(sender: Option<Address>, kind: String) {
    if let Some(sender) = sender {
        put(&PATH, sender.path);
    }
    put(&KIND, kind);
}

fn put(slot: &'static std::thread::LocalKey<Cell<String>>, mut text: String) {
    if text.capacity() <= KEEP {
        text.clear();
        slot.with(|slot| slot.set(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_string_comes_back_empty_with_its_allocation() {
        let mut kind = String::with_capacity(32);
        kind.push_str("PingPong");
        let at = kind.as_ptr();
        let sender = Address {
            path: "/user/pong".to_string(),
            incarnation: 7,
        };
        let path_at = sender.path.as_ptr();
        keep(Some(sender), kind);
        let (again, path_again) = (self::kind(), path());
        assert_eq!((again.as_str(), again.as_ptr()), ("", at));
        assert!(again.capacity() >= 32);
        assert_eq!((path_again.as_str(), path_again.as_ptr()), ("", path_at));
        assert_eq!(self::kind().capacity(), 0, "taken twice: a new string");
    }

    #[test]
    fn a_long_string_is_not_kept() {
        keep(None, "k".repeat(KEEP + 1));
        assert_eq!(kind().capacity(), 0);
        keep(None, "k".repeat(KEEP));
        assert_eq!(kind().capacity(), KEEP);
        assert_eq!(
            path().capacity(),
            0,
            "a message without a sender keeps no path"
        );
    }
}
