//! What the database held unacknowledged when the host started, parked by target path until
//! an actor lives there: messages from persistent actors and reminders.
//!
//! Invariants:
//! - Parked messages of one path keep their send order, and what is parked again (a spawn
//!   that lost its path) goes back in front of anything parked since.
//! - Parking takes nothing from the database: every item keeps its receipt, and is
//!   acknowledged only by whoever consumes it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::journal::Backlog;
use crate::address::{ActorPath, Address};
use crate::message::{Envelope, Receipt};

/// A message or reminder from before this host started, waiting for its target to live.
pub(crate) enum Parked {
    Message(Envelope),
    Reminder {
        id: u64,
        owner: String,
        envelope: Envelope,
        due_ms: u64,
        period: Option<Duration>,
    },
}

/// The parked items, by target path.
#[derive(Default)]
pub(crate) struct Parking {
    by_path: Mutex<HashMap<String, Vec<Parked>>>,
}

impl Parking {
    /// Parks a backlog; returns the receipts of rows no actor can ever take (ask endpoints
    /// and unparsable targets), to acknowledge.
    pub(crate) fn fill(&self, backlog: Backlog) -> Vec<Receipt> {
        let mut unreachable = Vec::new();
        let mut by_path = self.lock();
        for (id, row) in backlog.outbox {
            // Ask endpoints do not outlive a host; other unparsable targets cannot be reached.
            if row.target.starts_with("/system/") || ActorPath::parse(&row.target).is_err() {
                unreachable.push(Receipt::Outbox(id));
                continue;
            }
            let sender = row.sender.as_deref().and_then(|p| ActorPath::parse(p).ok());
            let mut envelope = Envelope::new(
                sender.map(|path| Address {
                    path,
                    incarnation: 0,
                }),
                row.kind,
                row.body,
            );
            envelope.receipt = Some(Receipt::Outbox(id));
            by_path
                .entry(row.target)
                .or_default()
                .push(Parked::Message(envelope));
        }
        for (id, row) in backlog.reminders {
            let sender = ActorPath::parse(&row.target).ok().map(|path| Address {
                path,
                incarnation: 0,
            });
            let mut envelope = Envelope::new(sender, row.kind, row.body);
            envelope.receipt = Some(Receipt::Reminder(id));
            by_path
                .entry(row.target)
                .or_default()
                .push(Parked::Reminder {
                    id,
                    owner: row.owner,
                    envelope,
                    due_ms: row.due_ms,
                    period: row.period_ms.map(Duration::from_millis),
                });
        }
        unreachable
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Parked>>> {
        self.by_path.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes what waits for `path`.
    pub(crate) fn take(&self, path: &str) -> Vec<Parked> {
        let mut by_path = self.lock();
        if by_path.is_empty() {
            return Vec::new();
        }
        by_path.remove(path).unwrap_or_default()
    }

    /// Parks items for `path` again, ahead of anything parked since.
    pub(crate) fn park(&self, path: &str, items: Vec<Parked>) {
        if items.is_empty() {
            return;
        }
        let mut by_path = self.lock();
        let slot = by_path.entry(path.to_owned()).or_default();
        let later = std::mem::replace(slot, items);
        slot.extend(later);
    }

    /// The paths with parked items under `prefix`.
    pub(crate) fn paths_under(&self, prefix: &str) -> Vec<String> {
        self.lock()
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// How many items are parked in all.
    pub(crate) fn len(&self) -> (usize, usize) {
        let by_path = self.lock();
        let messages = by_path
            .values()
            .flatten()
            .filter(|p| matches!(p, Parked::Message(_)))
            .count();
        let total: usize = by_path.values().map(Vec::len).sum();
        (messages, total - messages)
    }
}

#[cfg(test)]
mod tests {
    use super::super::journal::{OutboxRow, ReminderRow};
    use super::*;

    fn row(target: &str, kind: &str) -> OutboxRow {
        OutboxRow {
            target: target.to_owned(),
            sender: Some("/user/s".to_owned()),
            kind: kind.to_owned(),
            body: Vec::new(),
        }
    }

    fn kinds(items: &[Parked]) -> Vec<&str> {
        items
            .iter()
            .map(|p| match p {
                Parked::Message(e) | Parked::Reminder { envelope: e, .. } => e.kind.as_str(),
            })
            .collect()
    }

    #[test]
    fn messages_wait_in_send_order_with_their_receipts_and_senders_of_any_incarnation() {
        let parking = Parking::default();
        let unreachable = parking.fill(Backlog {
            outbox: vec![
                (1, row("/user/a", "1")),
                (2, row("/system/ask/9", "x")),
                (3, row("/user/a", "2")),
                (4, row("not a path", "y")),
            ],
            reminders: vec![(
                7,
                ReminderRow {
                    owner: "p".to_owned(),
                    target: "/user/a".to_owned(),
                    kind: "r".to_owned(),
                    body: Vec::new(),
                    due_ms: 0,
                    period_ms: None,
                },
            )],
        });
        assert_eq!(unreachable, [Receipt::Outbox(2), Receipt::Outbox(4)]);
        assert_eq!(parking.len(), (2, 1));
        let items = parking.take("/user/a");
        assert_eq!(kinds(&items), ["1", "2", "r"]);
        match &items[0] {
            Parked::Message(e) => {
                assert_eq!(e.receipt, Some(Receipt::Outbox(1)));
                assert_eq!(e.sender.as_ref().unwrap().incarnation, 0);
            }
            Parked::Reminder { .. } => panic!("a message first"),
        }
        assert!(parking.take("/user/a").is_empty(), "taken once");
    }

    #[test]
    fn what_is_parked_again_goes_in_front() {
        let parking = Parking::default();
        parking.fill(Backlog {
            outbox: vec![(1, row("/user/a", "later"))],
            reminders: Vec::new(),
        });
        let first = vec![Parked::Message(Envelope::new(None, "first", Vec::new()))];
        parking.park("/user/a", first);
        assert_eq!(kinds(&parking.take("/user/a")), ["first", "later"]);
        assert_eq!(parking.paths_under("/user/"), Vec::<String>::new());
    }
}
