//! Exactly once between persistent actors when the sender's and the receiver's state cannot be
//! written in one transaction (a store every node reaches, where each persistence id is its own
//! log): numbered sends, and a receiver that remembers what it consumed, within a bound.
//!
//! A sender `P` numbers every durable message it sends, `n = 1, 2, 3, ...` over all its
//! targets, in its own committed log. Each message carries `(P, n)` and the sender's **floor**
//! for the target path: every message of `P` to that path numbered at or below it has been
//! acknowledged (consumed, or dropped, by its receiver). A receiver `Q` keeps, per sender, the
//! highest floor it has heard and the numbers above it that it consumed ([`Seen`]); a message
//! at or below the floor, or already in the set, is a duplicate: `Q` acknowledges it again and
//! its guest never sees it. `Q` records what it consumed in the same log record as the state
//! change it caused, so "consumed" and "reflected in the state" are one fact.
//!
//! Why nothing is lost or doubled across a kill -9 of either side:
//! - `P`'s message is in `P`'s log before anything leaves (commit before effects); until `P`
//!   learns it was acknowledged it stays pending and is sent again whenever `P` recovers.
//! - `Q` hands a message to its guest only if it is not in `Q`'s committed `Seen`, and the
//!   step that consumed it commits the number with the step's changes; a crash before that
//!   commit leaves it unconsumed and still pending at `P`.
//! - A floor only rises past numbers `P` knows are acknowledged, so no pending message is ever
//!   at or below a floor `Q` heard.
//!
//! The bound: `Q` keeps, per sender, one floor and the numbers it consumed above it. A number
//! leaves the set as soon as a later message of that sender carries a floor past it. So the set
//! holds only what `Q` consumed from `P` since the oldest message from `P` to `Q` that `P` has not
//! yet seen acknowledged, and the whole structure is one entry per sender that has such a
//! message, at most [`MAX_SENDERS`] per receiver (past it, the oldest sender with an empty set
//! is forgotten; a sender with numbers in its set is never forgotten).
//!
//! Invariants (tested below):
//! - `admit` is true at most once per `(sender, n)` for a given `Seen`, whatever the order and
//!   repetition of arrivals.
//! - A floor never goes down, and numbers at or below the floor leave the set.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The most senders a receiver keeps a floor for when their sets are empty.
pub(crate) const MAX_SENDERS: usize = 10_000;

/// What a numbered durable message carries for its receiver.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Numbered {
    /// The sender's persistence id.
    pub(crate) sender: String,
    /// Its number in the sender's sends.
    pub(crate) n: u64,
    /// Every message of the sender to this target numbered at or below is acknowledged.
    pub(crate) floor: u64,
}

/// One sender's floor and what the receiver consumed above it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
struct Sender {
    floor: u64,
    above: BTreeSet<u64>,
}

/// What one receiver has consumed, per sender.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    senders: BTreeMap<String, Sender>,
}

impl Seen {
    /// Whether `msg` is new to this receiver (true) or a duplicate (false). Raises the
    /// sender's floor to the one `msg` carries either way; records nothing as consumed.
    pub(crate) fn admit(&mut self, msg: &Numbered) -> bool {
        let sender = self.senders.entry(msg.sender.clone()).or_default();
        if msg.floor > sender.floor {
            sender.floor = msg.floor;
            sender.above = sender.above.split_off(&(msg.floor + 1));
        }
        msg.n > sender.floor && !sender.above.contains(&msg.n)
    }

    /// Records `msg` as consumed (its step committed).
    pub(crate) fn consumed(&mut self, msg: &Numbered) {
        let sender = self.senders.entry(msg.sender.clone()).or_default();
        if msg.floor > sender.floor {
            sender.floor = msg.floor;
            sender.above = sender.above.split_off(&(msg.floor + 1));
        }
        if msg.n > sender.floor {
            sender.above.insert(msg.n);
        }
        self.trim();
    }

    /// Forgets the oldest-named senders with nothing above their floor while there are more
    /// than [`MAX_SENDERS`].
    fn trim(&mut self) {
        if self.senders.len() <= MAX_SENDERS {
            return;
        }
        let idle: Vec<String> = self
            .senders
            .iter()
            .filter(|(_, s)| s.above.is_empty())
            .map(|(k, _)| k.clone())
            .take(self.senders.len() - MAX_SENDERS)
            .collect();
        for key in idle {
            self.senders.remove(&key);
        }
    }

    /// How many numbers are remembered in all (the bound's measure).
    #[cfg(test)]
    pub(crate) fn remembered(&self) -> usize {
        self.senders.values().map(|s| s.above.len()).sum()
    }
}

/// The sending side of one persistence id: its next number and what is not yet acknowledged.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Outbox<R> {
    /// The last number handed out.
    pub(crate) last: u64,
    /// Sent and not yet acknowledged, by number: the target path and the message.
    pub(crate) pending: BTreeMap<u64, R>,
    /// The highest number sent to each target path, the floor when nothing to it is pending.
    pub(crate) highest: BTreeMap<String, u64>,
}

impl<R> Default for Outbox<R> {
    fn default() -> Self {
        Outbox {
            last: 0,
            pending: BTreeMap::new(),
            highest: BTreeMap::new(),
        }
    }
}

impl<R> Outbox<R> {
    /// The floor for `target`: the number just below its oldest pending message, or the
    /// highest number sent to it when none is pending.
    pub(crate) fn floor(&self, target: &str, target_of: impl Fn(&R) -> &str) -> u64 {
        let oldest = self
            .pending
            .iter()
            .find(|(_, r)| target_of(r) == target)
            .map(|(n, _)| *n);
        match oldest {
            Some(n) => n - 1,
            None => self.highest.get(target).copied().unwrap_or(0),
        }
    }

    /// Records a sent message and returns its number.
    #[cfg(test)]
    pub(crate) fn send(&mut self, target: &str, row: R) -> u64 {
        self.last += 1;
        self.pending.insert(self.last, row);
        self.highest.insert(target.to_owned(), self.last);
        self.last
    }

    /// Records a sent message under a number it already has (when folding a log).
    pub(crate) fn sent(&mut self, n: u64, target: &str, row: R) {
        self.last = self.last.max(n);
        self.pending.insert(n, row);
        let highest = self.highest.entry(target.to_owned()).or_default();
        *highest = (*highest).max(n);
    }

    /// Records that message `n` was acknowledged.
    pub(crate) fn acknowledged(&mut self, n: u64) {
        self.pending.remove(&n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn msg(sender: &str, n: u64, floor: u64) -> Numbered {
        Numbered {
            sender: sender.to_owned(),
            n,
            floor,
        }
    }

    #[test]
    fn a_message_is_admitted_once_and_a_duplicate_never() {
        let mut seen = Seen::default();
        let m = msg("p", 1, 0);
        assert!(seen.admit(&m));
        seen.consumed(&m);
        assert!(!seen.admit(&m), "consumed once");
        assert!(seen.admit(&msg("p", 2, 0)), "the next one is new");
        assert!(seen.admit(&msg("q", 1, 0)), "another sender's 1 is new");
    }

    #[test]
    fn a_floor_forgets_what_it_covers_and_refuses_below_it() {
        let mut seen = Seen::default();
        for n in 1..=5 {
            seen.consumed(&msg("p", n, 0));
        }
        assert_eq!(seen.remembered(), 5);
        // P learnt 1..=4 were acknowledged: its next message says so.
        assert!(seen.admit(&msg("p", 6, 4)));
        assert_eq!(seen.remembered(), 1, "only 5 is left above the floor");
        assert!(
            !seen.admit(&msg("p", 3, 0)),
            "below the floor, even with an old floor"
        );
        assert!(!seen.admit(&msg("p", 5, 0)), "still remembered above it");
    }

    #[test]
    fn a_floor_never_goes_down() {
        let mut seen = Seen::default();
        seen.consumed(&msg("p", 10, 9));
        assert!(
            !seen.admit(&msg("p", 7, 2)),
            "7 is under the floor 9 heard before"
        );
    }

    #[test]
    fn idle_senders_are_forgotten_past_the_bound_and_busy_ones_are_kept() {
        let mut seen = Seen::default();
        seen.consumed(&msg("busy", 5, 0));
        for i in 0..MAX_SENDERS + 10 {
            let m = msg(&format!("s{i:06}"), 1, 1);
            seen.consumed(&m);
        }
        assert!(seen.senders.len() <= MAX_SENDERS);
        assert!(
            !seen.admit(&msg("busy", 5, 0)),
            "a sender with numbers is kept"
        );
    }

    #[test]
    fn floors_follow_the_oldest_pending_message_per_target() {
        let mut out: Outbox<String> = Outbox::default();
        let a1 = out.send("/a", "/a".into());
        let b1 = out.send("/b", "/b".into());
        let a2 = out.send("/a", "/a".into());
        assert_eq!(out.floor("/a", |r| r.as_str()), a1 - 1);
        out.acknowledged(a1);
        assert_eq!(out.floor("/a", |r| r.as_str()), a2 - 1);
        out.acknowledged(a2);
        assert_eq!(
            out.floor("/a", |r| r.as_str()),
            a2,
            "nothing pending: all sent"
        );
        assert_eq!(out.floor("/b", |r| r.as_str()), b1 - 1);
    }

    proptest! {
        /// Whatever order and repetition arrivals take, and whenever the sender's floor rises
        /// (only past acknowledged numbers), a number is admitted exactly when it was never
        /// consumed: never twice, and never refused while it was not.
        #[test]
        fn every_message_is_consumed_exactly_once(
            arrivals in proptest::collection::vec((1u64..40, any::<bool>()), 1..400),
        ) {
            let mut seen = Seen::default();
            let mut consumed = BTreeSet::new();
            let mut acknowledged = BTreeSet::new();
            for (n, ack) in arrivals {
                // The floor the sender may claim: the longest acknowledged prefix.
                let floor = (1..).take_while(|k| acknowledged.contains(k)).last().unwrap_or(0);
                let m = msg("p", n, floor);
                let new = seen.admit(&m);
                prop_assert_eq!(new, !consumed.contains(&n), "{} is new iff never consumed", n);
                if new {
                    consumed.insert(n);
                    seen.consumed(&m);
                }
                if ack && consumed.contains(&n) {
                    acknowledged.insert(n);
                }
            }
        }
    }
}
