//! One committed step of one persistence id in the JetStream store ([`Record`]), and the state a
//! writer folds from its records ([`Folded`]).
//!
//! Invariants (tested below):
//! - Folding is deterministic: the same records from the same base give the same state, on any
//!   node.
//! - A record with a `base` replaces everything folded before it (a `delete-state`, whose
//!   outbox and dedup memory survive it, or a compaction).
//! - Events at or below `deleted_through` are never returned, and `delete-state` numbers
//!   events from 1 again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::super::channel::{Numbered, Outbox, Seen};
use super::super::journal::{Op, OutboxRow, ReminderRow, StoredSnapshot};

/// One step of one persistence id: everything it changed, as one JetStream message.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Record {
    /// The node whose writer appended it.
    pub(crate) node: String,
    /// That writer's fence token (the revision of its lease).
    pub(crate) fence: u64,
    /// The step's changes, in order.
    pub(crate) ops: Vec<Op>,
    /// The latest event seq after the step, when it changed.
    pub(crate) last_seq: Option<u64>,
    /// Messages the step sent, numbered.
    pub(crate) sent: Vec<(u64, OutboxRow)>,
    /// Messages of others the step consumed.
    pub(crate) consumed: Vec<Numbered>,
    /// This id's own sends that their receivers acknowledged.
    pub(crate) settled: Vec<u64>,
    /// This id's reminders whose firing was acknowledged, and when (ms since the epoch).
    pub(crate) fired: Vec<(u64, u64)>,
    /// When set, the whole state from here on (folding restarts from it).
    pub(crate) base: Option<Box<Folded>>,
}

/// A persistence id's durable state as its records fold to it (also a checkpoint's body).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Folded {
    /// The latest event seq.
    pub(crate) seq: u64,
    /// The latest snapshot.
    pub(crate) snapshot: Option<(u64, Vec<u8>)>,
    /// Events after the snapshot (or all, without one), not deleted.
    pub(crate) events: Vec<(u64, Vec<u8>)>,
    /// Events at or below are deleted.
    pub(crate) deleted_through: u64,
    /// Sends not yet acknowledged.
    pub(crate) outbox: Outbox<OutboxRow>,
    /// What this id consumed of others.
    pub(crate) seen: Seen,
    /// Reminders scheduled, by id.
    pub(crate) reminders: BTreeMap<u64, ReminderRow>,
}

impl Folded {
    /// Applies one record.
    pub(crate) fn apply(&mut self, record: &Record) {
        if let Some(base) = &record.base {
            *self = (**base).clone();
        }
        for op in &record.ops {
            match op {
                Op::Snapshot { seq, state } => {
                    self.snapshot = Some((*seq, state.clone()));
                    self.events.retain(|(s, _)| s > seq);
                }
                Op::Event { seq, data } => {
                    self.events.push((*seq, data.clone()));
                    self.seq = self.seq.max(*seq);
                }
                Op::DeleteEvents { through } => {
                    self.deleted_through = self.deleted_through.max(*through);
                    self.events.retain(|(s, _)| s > through);
                }
                Op::DeleteState => {
                    self.seq = 0;
                    self.snapshot = None;
                    self.events.clear();
                    self.deleted_through = 0;
                    self.reminders.clear();
                }
                Op::Remind { id, row } => {
                    self.reminders.insert(*id, row.clone());
                }
                Op::CancelReminder { id } => {
                    self.reminders.remove(id);
                }
            }
        }
        if let Some(seq) = record.last_seq {
            self.seq = seq;
        }
        for (n, row) in &record.sent {
            self.outbox.sent(*n, &row.target, row.clone());
        }
        for msg in &record.consumed {
            self.seen.consumed(msg);
        }
        for n in &record.settled {
            self.outbox.acknowledged(*n);
        }
        for (id, at) in &record.fired {
            self.fire(*id, *at);
        }
    }

    /// A firing of reminder `id` was acknowledged: a periodic one moves to its next due time,
    /// a one-shot one is gone.
    pub(crate) fn fire(&mut self, id: u64, now: u64) {
        let periodic = match self.reminders.get_mut(&id) {
            Some(row) => match row.period_ms {
                Some(period) => {
                    row.due_ms = now.saturating_add(period);
                    true
                }
                None => false,
            },
            None => return,
        };
        if !periodic {
            self.reminders.remove(&id);
        }
    }

    /// The snapshot as the capability reads it.
    pub(crate) fn stored_snapshot(&self) -> Option<StoredSnapshot> {
        self.snapshot.as_ref().map(|(seq, state)| StoredSnapshot {
            seq: *seq,
            state: state.clone(),
        })
    }

    /// Up to `max` events after `after`, not deleted; `None` if events that old are no longer
    /// held here (they are before the snapshot: the log has them).
    pub(crate) fn events_after(&self, after: u64, max: usize) -> Option<Vec<(u64, Vec<u8>)>> {
        // Every event after this one that is not deleted is held here.
        let held_after = self.snapshot.as_ref().map_or(0, |(s, _)| *s);
        if after < held_after && self.deleted_through < held_after {
            return None;
        }
        Some(
            self.events
                .iter()
                .filter(|(s, _)| *s > after)
                .take(max)
                .cloned()
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::journal::unix_ms;
    use super::*;

    fn event(seq: u64) -> Op {
        Op::Event {
            seq,
            data: vec![seq as u8],
        }
    }

    fn row(target: &str) -> OutboxRow {
        OutboxRow {
            target: target.into(),
            sender: None,
            kind: "k".into(),
            body: vec![],
        }
    }

    #[test]
    fn records_fold_to_events_snapshot_and_outbox() {
        let records = [
            Record {
                ops: vec![event(1), event(2)],
                last_seq: Some(2),
                sent: vec![(1, row("/user/b")), (2, row("/user/c"))],
                ..Record::default()
            },
            Record {
                ops: vec![
                    Op::Snapshot {
                        seq: 2,
                        state: b"s2".to_vec(),
                    },
                    event(3),
                ],
                last_seq: Some(3),
                settled: vec![1],
                ..Record::default()
            },
        ];
        let mut a = Folded::default();
        let mut b = Folded::default();
        for r in &records {
            a.apply(r);
            b.apply(r);
        }
        assert_eq!(a, b, "deterministic");
        assert_eq!(a.seq, 3);
        assert_eq!(a.stored_snapshot().unwrap().state, b"s2");
        assert_eq!(a.events_after(2, 10).unwrap(), vec![(3, vec![3])]);
        assert_eq!(a.outbox.pending.keys().copied().collect::<Vec<_>>(), [2]);
        assert_eq!(a.outbox.floor("/user/b", |r| &r.target), 1);
        assert!(
            a.events_after(0, 10).is_none(),
            "events before the snapshot are in the log, not here"
        );
    }

    #[test]
    fn delete_state_keeps_the_outbox_and_numbers_events_from_one_again() {
        let mut f = Folded::default();
        f.apply(&Record {
            ops: vec![event(1)],
            last_seq: Some(1),
            sent: vec![(1, row("/user/b"))],
            ..Record::default()
        });
        f.apply(&Record {
            ops: vec![Op::DeleteState, event(1)],
            last_seq: Some(1),
            ..Record::default()
        });
        assert_eq!(f.seq, 1);
        assert_eq!(f.events_after(0, 10).unwrap(), vec![(1, vec![1])]);
        assert_eq!(f.outbox.pending.len(), 1, "the message still waits");
    }

    #[test]
    fn a_base_record_replaces_what_came_before() {
        let mut f = Folded::default();
        f.apply(&Record {
            ops: vec![event(1)],
            last_seq: Some(1),
            ..Record::default()
        });
        let base = Folded {
            seq: 7,
            ..Folded::default()
        };
        f.apply(&Record {
            base: Some(Box::new(base.clone())),
            ..Record::default()
        });
        assert_eq!(f, base);
    }

    #[test]
    fn deleted_events_are_never_returned() {
        let mut f = Folded::default();
        f.apply(&Record {
            ops: vec![
                event(1),
                event(2),
                event(3),
                Op::DeleteEvents { through: 2 },
            ],
            last_seq: Some(3),
            ..Record::default()
        });
        assert_eq!(f.events_after(0, 10).unwrap(), vec![(3, vec![3])]);
    }

    #[test]
    fn a_fired_periodic_reminder_moves_on_and_a_one_shot_goes() {
        let reminder = |period_ms| ReminderRow {
            owner: "p".into(),
            target: "/user/p".into(),
            kind: "r".into(),
            body: vec![],
            due_ms: 0,
            period_ms,
        };
        let mut f = Folded::default();
        f.apply(&Record {
            ops: vec![
                Op::Remind {
                    id: 1,
                    row: reminder(Some(60_000)),
                },
                Op::Remind {
                    id: 2,
                    row: reminder(None),
                },
            ],
            ..Record::default()
        });
        f.apply(&Record {
            fired: vec![(1, unix_ms()), (2, unix_ms())],
            ..Record::default()
        });
        assert_eq!(f.reminders.len(), 1);
        assert!(f.reminders[&1].due_ms >= unix_ms() + 50_000);
    }
}
