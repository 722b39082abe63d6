//! The persistence capability's tables in the database, the reads of recovery, and the writes
//! one step of a persistent actor makes.
//!
//! | table       | key                   | value                                 |
//! |-------------|-----------------------|---------------------------------------|
//! | `snapshots` | persistence id        | seq (u64 LE) then the state bytes     |
//! | `sequences` | persistence id        | the latest event seq                  |
//! | `events`    | (persistence id, seq) | the event bytes                       |
//! | `outbox`    | outbox id             | an [`OutboxRow`] (postcard)           |
//! | `reminders` | reminder id           | a [`ReminderRow`] (postcard)          |
//! | `owners`    | persistence id        | who writes it (see `owners`)          |
//! | `meta`      | `next-outbox`, `next-reminder` | the next ids to hand out (u64 LE) |
//!
//! Invariants:
//! - One step is one [`StepWrite`], applied inside one transaction: its changes, its outbox
//!   rows and the acknowledgements of what it consumed are durable together or not at all.
//! - Outbox and reminder ids are never reused: each transaction records the next ids, and a
//!   restarted host starts from there.
//! - An acknowledged outbox row is gone; an acknowledged periodic reminder moves to its next
//!   due time, a one-shot one is gone.
//! - Every persistence id is scoped, `<owner>:<name>` (schema 2). A schema-1 file is migrated
//!   when it is opened: each id `X` becomes `?:X`, a scope no actor has; the first actor that
//!   recovers `<owner>:X` while it has no state of its own adopts it (see [`Journal::adopt`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use redb::{ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::owners::{self, Owner};
use crate::message::Receipt;
use crate::storage::committer::Write;
use crate::storage::database::{self, Database, DatabaseError, decode, encode, failed, readable};

pub(crate) const SNAPSHOTS: TableDefinition<&str, &[u8]> = TableDefinition::new("snapshots");
pub(crate) const SEQUENCES: TableDefinition<&str, u64> = TableDefinition::new("sequences");
pub(crate) const EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("events");
pub(crate) const OUTBOX: TableDefinition<u64, &[u8]> = TableDefinition::new("outbox");
pub(crate) const REMINDERS: TableDefinition<u64, &[u8]> = TableDefinition::new("reminders");

/// The scope of the persistence ids a schema-1 file had, until an actor adopts them.
pub(crate) const LEGACY_SCOPE: &str = "?";

const NEXT_OUTBOX: &str = "next-outbox";
const NEXT_REMINDER: &str = "next-reminder";

/// A message from a persistent actor, kept until its receiver's commit acknowledges it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct OutboxRow {
    /// The receiver's path (durable messages are addressed by path).
    pub(crate) target: String,
    /// The sender's path.
    pub(crate) sender: Option<String>,
    pub(crate) kind: String,
    pub(crate) body: Vec<u8>,
}

/// A durable timer to a persistent actor.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReminderRow {
    /// The persistence id that scheduled it (`delete-state` removes it).
    pub(crate) owner: String,
    /// The actor path it fires to.
    pub(crate) target: String,
    pub(crate) kind: String,
    pub(crate) body: Vec<u8>,
    /// When it is due, in milliseconds since the Unix epoch.
    pub(crate) due_ms: u64,
    pub(crate) period_ms: Option<u64>,
}

/// A snapshot as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoredSnapshot {
    /// The latest event it covers.
    pub(crate) seq: u64,
    /// The actor's state bytes.
    pub(crate) state: Vec<u8>,
}

/// Everything not yet acknowledged when the database was opened.
#[derive(Default, Debug)]
pub(crate) struct Backlog {
    pub(crate) outbox: Vec<(u64, OutboxRow)>,
    pub(crate) reminders: Vec<(u64, ReminderRow)>,
}

/// One change to a persistence id's durable state, in the order the actor made it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum Op {
    Snapshot { seq: u64, state: Vec<u8> },
    Event { seq: u64, data: Vec<u8> },
    DeleteEvents { through: u64 },
    DeleteState,
    Remind { id: u64, row: ReminderRow },
    CancelReminder { id: u64 },
}

/// The outbox and reminder ids handed out, and the database they are recorded in.
pub(crate) struct Journal {
    db: std::sync::Arc<Database>,
    next_outbox: AtomicU64,
    next_reminder: AtomicU64,
    /// Whether ids of the legacy scope may still wait for adoption.
    legacy: AtomicBool,
}

impl Journal {
    /// Creates the tables if they are missing and reads where the ids left off.
    pub(crate) fn open(db: std::sync::Arc<Database>) -> Result<Journal, DatabaseError> {
        let old_schema = db.schema() < database::SCHEMA_VERSION;
        let mut migrated = 0;
        db.write_with(|txn| {
            txn.open_table(SNAPSHOTS).map_err(failed)?;
            txn.open_table(SEQUENCES).map_err(failed)?;
            txn.open_table(EVENTS).map_err(failed)?;
            txn.open_table(OUTBOX).map_err(failed)?;
            txn.open_table(REMINDERS).map_err(failed)?;
            txn.open_table(owners::OWNERS).map_err(failed)?;
            if old_schema {
                migrated = scope_legacy_ids(txn)?;
                Database::set_schema(txn)?;
            }
            Ok(())
        })?;
        if old_schema {
            db.migrated();
            tracing::info!(path = %db.path().display(), ids = migrated, "database migrated to schema {}: its persistence ids wait for adoption by their owners", database::SCHEMA_VERSION);
        }
        let legacy = {
            let read = db.read()?;
            let (from, to) = (format!("{LEGACY_SCOPE}:"), format!("{LEGACY_SCOPE};"));
            let snapshots = read.open_table(SNAPSHOTS).map_err(failed)?;
            let sequences = read.open_table(SEQUENCES).map_err(failed)?;
            let range = from.as_str()..to.as_str();
            snapshots
                .range(range.clone())
                .map_err(failed)?
                .next()
                .is_some()
                || sequences.range(range).map_err(failed)?.next().is_some()
        };
        Ok(Journal {
            next_outbox: AtomicU64::new(db.counter(NEXT_OUTBOX)?.max(1)),
            next_reminder: AtomicU64::new(db.counter(NEXT_REMINDER)?.max(1)),
            legacy: AtomicBool::new(legacy),
            db,
        })
    }

    /// Moves the state of the legacy id `?:<name>` to `pid` (`<owner>:<name>`), if `pid` has
    /// no state of its own and the legacy id has some: snapshot, sequence, events and the
    /// reminders it scheduled, in one transaction. True if it moved anything.
    pub(crate) fn adopt(&self, pid: &str) -> Result<bool, DatabaseError> {
        if !self.legacy.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let Some((_, name)) = pid.split_once(':') else {
            return Ok(false);
        };
        let legacy = format!("{LEGACY_SCOPE}:{name}");
        // Most recoveries find no legacy state of their name: a read says so without a write
        // transaction (and its fsync) beside the committer's.
        {
            let read = self.db.read()?;
            let snapshots = read.open_table(SNAPSHOTS).map_err(failed)?;
            let sequences = read.open_table(SEQUENCES).map_err(failed)?;
            if snapshots.get(legacy.as_str()).map_err(failed)?.is_none()
                && sequences.get(legacy.as_str()).map_err(failed)?.is_none()
            {
                return Ok(false);
            }
        }
        let mut moved = false;
        self.db.write_with(|txn| {
            let mut snapshots = txn.open_table(SNAPSHOTS).map_err(failed)?;
            let mut sequences = txn.open_table(SEQUENCES).map_err(failed)?;
            if snapshots.get(pid).map_err(failed)?.is_some()
                || sequences.get(pid).map_err(failed)?.is_some()
            {
                return Ok(());
            }
            let snapshot = snapshots
                .remove(legacy.as_str())
                .map_err(failed)?
                .map(|s| s.value().to_vec());
            if let Some(bytes) = snapshot {
                snapshots.insert(pid, bytes.as_slice()).map_err(failed)?;
                moved = true;
            }
            let seq = sequences
                .remove(legacy.as_str())
                .map_err(failed)?
                .map(|s| s.value());
            if let Some(seq) = seq {
                sequences.insert(pid, seq).map_err(failed)?;
                moved = true;
            }
            let mut events = txn.open_table(EVENTS).map_err(failed)?;
            let old: Vec<(u64, Vec<u8>)> = events
                .extract_from_if(
                    (legacy.as_str(), 0)..=(legacy.as_str(), u64::MAX),
                    |_, _| true,
                )
                .map_err(failed)?
                .map(|e| e.map(|(k, v)| (k.value().1, v.value().to_vec())))
                .collect::<Result<_, _>>()
                .map_err(failed)?;
            for (seq, data) in old {
                events.insert((pid, seq), data.as_slice()).map_err(failed)?;
                moved = true;
            }
            moved |= rename_reminders(txn, &legacy, pid)?;
            Ok(())
        })?;
        Ok(moved)
    }

    /// The database.
    #[cfg(test)]
    pub(crate) fn database(&self) -> &std::sync::Arc<Database> {
        &self.db
    }

    /// Allocates `n` consecutive outbox ids; returns the first.
    pub(crate) fn allocate_outbox(&self, n: u64) -> u64 {
        self.next_outbox.fetch_add(n, Ordering::Relaxed)
    }

    /// Allocates a reminder id.
    pub(crate) fn allocate_reminder(&self) -> u64 {
        self.next_reminder.fetch_add(1, Ordering::Relaxed)
    }

    /// Records the next ids inside a transaction (the committer's finish step).
    pub(crate) fn record_ids(&self, txn: &WriteTransaction) -> Result<(), DatabaseError> {
        database::set_counter(txn, NEXT_OUTBOX, self.next_outbox.load(Ordering::Relaxed))?;
        database::set_counter(
            txn,
            NEXT_REMINDER,
            self.next_reminder.load(Ordering::Relaxed),
        )
    }

    /// The latest snapshot of `pid`.
    pub(crate) fn snapshot(&self, pid: &str) -> Result<Option<StoredSnapshot>, DatabaseError> {
        read_snapshot(&self.db.read()?, pid)
    }

    /// The latest event seq of `pid` (0 if it never persisted one).
    pub(crate) fn last_seq(&self, pid: &str) -> Result<u64, DatabaseError> {
        read_last_seq(&self.db.read()?, pid)
    }

    /// Up to `max` events of `pid` after `after`, in order.
    pub(crate) fn events(
        &self,
        pid: &str,
        after: u64,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, DatabaseError> {
        read_events(&self.db.read()?, pid, after, u64::MAX, max)
    }

    /// Every outbox message and reminder not yet acknowledged.
    pub(crate) fn backlog(&self) -> Result<Backlog, DatabaseError> {
        let read = self.db.read()?;
        let mut backlog = Backlog::default();
        let outbox = read.open_table(OUTBOX).map_err(failed)?;
        for entry in outbox.iter().map_err(failed)? {
            let (key, value) = entry.map_err(failed)?;
            backlog
                .outbox
                .push((key.value(), decode("outbox", value.value())?));
        }
        let reminders = read.open_table(REMINDERS).map_err(failed)?;
        for entry in reminders.iter().map_err(failed)? {
            let (key, value) = entry.map_err(failed)?;
            backlog
                .reminders
                .push((key.value(), decode("reminders", value.value())?));
        }
        Ok(backlog)
    }

    /// How many outbox messages wait for an acknowledgement.
    #[cfg(test)]
    pub(crate) fn outbox_len(&self) -> Result<u64, DatabaseError> {
        use redb::ReadableTableMetadata;
        let read = self.db.read()?;
        let table = read.open_table(OUTBOX).map_err(failed)?;
        table.len().map_err(failed)
    }
}

/// The latest snapshot of `pid`, as `read` sees it.
pub(crate) fn read_snapshot(
    read: &ReadTransaction,
    pid: &str,
) -> Result<Option<StoredSnapshot>, DatabaseError> {
    let Some(table) = readable(read, SNAPSHOTS)? else {
        return Ok(None);
    };
    let Some(value) = table.get(pid).map_err(failed)? else {
        return Ok(None);
    };
    let bytes = value.value();
    let Some((seq, state)) = bytes.split_first_chunk::<8>() else {
        // A snapshot record is at least its 8-byte seq.
        return Err(DatabaseError::Damaged {
            table: "snapshots",
            source: postcard::Error::DeserializeUnexpectedEnd,
        });
    };
    Ok(Some(StoredSnapshot {
        seq: u64::from_le_bytes(*seq),
        state: state.to_vec(),
    }))
}

/// The latest event seq of `pid` (0 if it never persisted one), as `read` sees it.
pub(crate) fn read_last_seq(read: &ReadTransaction, pid: &str) -> Result<u64, DatabaseError> {
    let Some(table) = readable(read, SEQUENCES)? else {
        return Ok(0);
    };
    Ok(table.get(pid).map_err(failed)?.map_or(0, |v| v.value()))
}

/// Up to `max` events of `pid` after `after` and at most `through`, in order, as `read` sees
/// them.
pub(crate) fn read_events(
    read: &ReadTransaction,
    pid: &str,
    after: u64,
    through: u64,
    max: usize,
) -> Result<Vec<(u64, Vec<u8>)>, DatabaseError> {
    let Some(from) = after.checked_add(1).filter(|from| *from <= through) else {
        return Ok(Vec::new());
    };
    let Some(table) = readable(read, EVENTS)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in table
        .range((pid, from)..=(pid, through))
        .map_err(failed)?
        .take(max)
    {
        let (key, value) = entry.map_err(failed)?;
        out.push((key.value().1, value.value().to_vec()));
    }
    Ok(out)
}

/// Schema 1 -> 2: every persistence id `X` becomes `?:X`. Returns how many ids it moved.
fn scope_legacy_ids(txn: &WriteTransaction) -> Result<usize, DatabaseError> {
    let mut ids = std::collections::BTreeSet::new();
    {
        let mut snapshots = txn.open_table(SNAPSHOTS).map_err(failed)?;
        let rows: Vec<(String, Vec<u8>)> = snapshots
            .extract_if(|_, _| true)
            .map_err(failed)?
            .map(|e| e.map(|(k, v)| (k.value().to_owned(), v.value().to_vec())))
            .collect::<Result<_, _>>()
            .map_err(failed)?;
        for (id, bytes) in rows {
            snapshots
                .insert(format!("{LEGACY_SCOPE}:{id}").as_str(), bytes.as_slice())
                .map_err(failed)?;
            ids.insert(id);
        }
    }
    {
        let mut sequences = txn.open_table(SEQUENCES).map_err(failed)?;
        let rows: Vec<(String, u64)> = sequences
            .extract_if(|_, _| true)
            .map_err(failed)?
            .map(|e| e.map(|(k, v)| (k.value().to_owned(), v.value())))
            .collect::<Result<_, _>>()
            .map_err(failed)?;
        for (id, seq) in rows {
            sequences
                .insert(format!("{LEGACY_SCOPE}:{id}").as_str(), seq)
                .map_err(failed)?;
            ids.insert(id);
        }
    }
    {
        let mut events = txn.open_table(EVENTS).map_err(failed)?;
        let rows: Vec<(String, u64, Vec<u8>)> = events
            .extract_if(|_, _| true)
            .map_err(failed)?
            .map(|e| e.map(|(k, v)| (k.value().0.to_owned(), k.value().1, v.value().to_vec())))
            .collect::<Result<_, _>>()
            .map_err(failed)?;
        for (id, seq, data) in rows {
            let key = format!("{LEGACY_SCOPE}:{id}");
            events
                .insert((key.as_str(), seq), data.as_slice())
                .map_err(failed)?;
            ids.insert(id);
        }
    }
    let mut reminders = txn.open_table(REMINDERS).map_err(failed)?;
    let rows: Vec<(u64, ReminderRow)> = reminders
        .iter()
        .map_err(failed)?
        .map(|e| {
            let (k, v) = e.map_err(failed)?;
            Ok((k.value(), decode::<ReminderRow>("reminders", v.value())?))
        })
        .collect::<Result<_, DatabaseError>>()?;
    for (id, mut row) in rows {
        ids.insert(row.owner.clone());
        row.owner = format!("{LEGACY_SCOPE}:{}", row.owner);
        reminders
            .insert(id, encode(&row).as_slice())
            .map_err(failed)?;
    }
    Ok(ids.len())
}

/// Moves the reminders of owner `from` to `to`; true if there were any.
fn rename_reminders(txn: &WriteTransaction, from: &str, to: &str) -> Result<bool, DatabaseError> {
    let mut reminders = txn.open_table(REMINDERS).map_err(failed)?;
    let mut moved = Vec::new();
    for entry in reminders.iter().map_err(failed)? {
        let (k, v) = entry.map_err(failed)?;
        let row: ReminderRow = decode("reminders", v.value())?;
        if row.owner == from {
            moved.push((k.value(), row));
        }
    }
    let any = !moved.is_empty();
    for (id, mut row) in moved {
        row.owner = to.to_owned();
        reminders
            .insert(id, encode(&row).as_slice())
            .map_err(failed)?;
    }
    Ok(any)
}

/// What one step of one persistent actor writes.
#[derive(Debug, Default)]
pub(crate) struct StepWrite {
    pub(crate) pid: String,
    pub(crate) ops: Vec<Op>,
    /// The latest event seq after this step, when it changed.
    pub(crate) last_seq: Option<u64>,
    /// Messages sent in this step, by outbox id.
    pub(crate) outbox: Vec<(u64, OutboxRow)>,
    /// Durable messages this step consumed.
    pub(crate) acks: Vec<Receipt>,
    /// The writer of `pid`, to record with this step (its instance's first commit).
    pub(crate) owner: Option<Owner>,
}

impl Write for StepWrite {
    fn apply(&self, txn: &WriteTransaction) -> Result<(), DatabaseError> {
        let now = unix_ms();
        for receipt in &self.acks {
            ack(txn, *receipt, now)?;
        }
        let pid = self.pid.as_str();
        for op in &self.ops {
            match op {
                Op::Snapshot { seq, state } => {
                    let mut bytes = Vec::with_capacity(8 + state.len());
                    bytes.extend_from_slice(&seq.to_le_bytes());
                    bytes.extend_from_slice(state);
                    let mut snapshots = txn.open_table(SNAPSHOTS).map_err(failed)?;
                    snapshots.insert(pid, bytes.as_slice()).map_err(failed)?;
                }
                Op::Event { seq, data } => {
                    let mut events = txn.open_table(EVENTS).map_err(failed)?;
                    events
                        .insert((pid, *seq), data.as_slice())
                        .map_err(failed)?;
                }
                Op::DeleteEvents { through } => {
                    let mut events = txn.open_table(EVENTS).map_err(failed)?;
                    events
                        .retain_in((pid, 0)..=(pid, *through), |_, _| false)
                        .map_err(failed)?;
                }
                Op::DeleteState => {
                    txn.open_table(SNAPSHOTS)
                        .map_err(failed)?
                        .remove(pid)
                        .map_err(failed)?;
                    txn.open_table(SEQUENCES)
                        .map_err(failed)?
                        .remove(pid)
                        .map_err(failed)?;
                    txn.open_table(EVENTS)
                        .map_err(failed)?
                        .retain_in((pid, 0)..=(pid, u64::MAX), |_, _| false)
                        .map_err(failed)?;
                    txn.open_table(REMINDERS)
                        .map_err(failed)?
                        .retain(|_, v| {
                            postcard::from_bytes::<ReminderRow>(v).is_ok_and(|r| r.owner != pid)
                        })
                        .map_err(failed)?;
                    owners::remove(txn, pid)?;
                }
                Op::Remind { id, row } => {
                    let mut reminders = txn.open_table(REMINDERS).map_err(failed)?;
                    reminders
                        .insert(*id, encode(row).as_slice())
                        .map_err(failed)?;
                }
                Op::CancelReminder { id } => {
                    let mut reminders = txn.open_table(REMINDERS).map_err(failed)?;
                    reminders.remove(*id).map_err(failed)?;
                }
            }
        }
        if let Some(seq) = self.last_seq {
            let mut sequences = txn.open_table(SEQUENCES).map_err(failed)?;
            sequences.insert(pid, seq).map_err(failed)?;
        }
        if let Some(owner) = &self.owner {
            owners::record(txn, pid, owner)?;
        }
        if !self.outbox.is_empty() {
            let mut outbox = txn.open_table(OUTBOX).map_err(failed)?;
            for (id, row) in &self.outbox {
                outbox.insert(*id, encode(row).as_slice()).map_err(failed)?;
            }
        }
        Ok(())
    }
}

/// The acknowledgement of a durable message no persistent step consumed: it needs no fsync.
pub(crate) struct Ack(pub(crate) Receipt);

impl Write for Ack {
    fn apply(&self, txn: &WriteTransaction) -> Result<(), DatabaseError> {
        ack(txn, self.0, unix_ms())
    }
}

/// Deletes an acknowledged outbox row; moves a periodic reminder to its next due time or
/// deletes a one-shot one.
fn ack(txn: &WriteTransaction, receipt: Receipt, now: u64) -> Result<(), DatabaseError> {
    match receipt {
        Receipt::Outbox(id) => {
            txn.open_table(OUTBOX)
                .map_err(failed)?
                .remove(id)
                .map_err(failed)?;
        }
        Receipt::Reminder(id) => {
            let mut reminders = txn.open_table(REMINDERS).map_err(failed)?;
            let row = reminders
                .get(id)
                .map_err(failed)?
                .and_then(|v| postcard::from_bytes::<ReminderRow>(v.value()).ok());
            match row {
                Some(mut row) if row.period_ms.is_some() => {
                    row.due_ms = now.saturating_add(row.period_ms.unwrap_or(0));
                    reminders
                        .insert(id, encode(&row).as_slice())
                        .map_err(failed)?;
                }
                Some(_) => {
                    reminders.remove(id).map_err(failed)?;
                }
                None => {}
            }
        }
    }
    Ok(())
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Scratch;

    fn journal() -> (Journal, Scratch) {
        let scratch = Scratch::new("journal");
        (Journal::open(scratch.database("j.redb")).unwrap(), scratch)
    }

    fn commit(journal: &Journal, write: &dyn Write) {
        journal
            .database()
            .write_with(|txn| {
                write.apply(txn)?;
                journal.record_ids(txn)
            })
            .unwrap();
    }

    fn row(target: &str) -> OutboxRow {
        OutboxRow {
            target: target.to_owned(),
            sender: None,
            kind: "k".to_owned(),
            body: vec![1],
        }
    }

    #[test]
    fn legacy_state_is_adopted_once_and_only_where_it_exists() {
        let (journal, scratch) = journal();
        let legacy = StepWrite {
            pid: format!("{LEGACY_SCOPE}:/user/a"),
            ops: vec![Op::Event {
                seq: 1,
                data: vec![7],
            }],
            last_seq: Some(1),
            ..StepWrite::default()
        };
        commit(&journal, &legacy);
        // Reopened: the legacy ids are seen at open.
        let journal = Journal::open(journal.database().clone()).unwrap();
        assert!(
            !journal.adopt("m:/user/b").unwrap(),
            "no legacy state of that name"
        );
        assert!(journal.adopt("m:/user/a").unwrap());
        assert_eq!(
            journal.events("m:/user/a", 0, 10).unwrap(),
            vec![(1, vec![7])]
        );
        assert_eq!(journal.last_seq("m:/user/a").unwrap(), 1);
        assert!(
            !journal.adopt("n:/user/a").unwrap(),
            "adopted once: nothing is left"
        );
        assert_eq!(journal.last_seq(&legacy.pid).unwrap(), 0);
        drop(scratch);
    }

    #[test]
    fn a_step_writes_events_snapshot_sequence_and_outbox_together() {
        let (journal, _scratch) = journal();
        let id = journal.allocate_outbox(1);
        let step = StepWrite {
            pid: "p".to_owned(),
            ops: vec![
                Op::Event {
                    seq: 1,
                    data: b"a".to_vec(),
                },
                Op::Event {
                    seq: 2,
                    data: b"b".to_vec(),
                },
                Op::Snapshot {
                    seq: 2,
                    state: b"ab".to_vec(),
                },
            ],
            last_seq: Some(2),
            outbox: vec![(id, row("/user/x"))],
            acks: Vec::new(),
            owner: None,
        };
        commit(&journal, &step);
        assert_eq!(journal.last_seq("p").unwrap(), 2);
        assert_eq!(
            journal.snapshot("p").unwrap(),
            Some(StoredSnapshot {
                seq: 2,
                state: b"ab".to_vec()
            })
        );
        assert_eq!(
            journal.events("p", 0, 10).unwrap(),
            [(1, b"a".to_vec()), (2, b"b".to_vec())]
        );
        assert_eq!(journal.events("p", 1, 10).unwrap().len(), 1, "after 1");
        assert_eq!(journal.backlog().unwrap().outbox, [(id, row("/user/x"))]);
        // The receiver's acknowledgement removes the row.
        commit(&journal, &Ack(Receipt::Outbox(id)));
        assert_eq!(journal.outbox_len().unwrap(), 0);
    }

    #[test]
    fn ids_are_never_reused_after_a_reopen() {
        let (journal, _scratch) = journal();
        let first = journal.allocate_outbox(3);
        let reminder = journal.allocate_reminder();
        commit(&journal, &StepWrite::default());
        let db = journal.database().clone();
        drop(journal);
        let again = Journal::open(db).unwrap();
        assert!(again.allocate_outbox(1) >= first + 3);
        assert!(again.allocate_reminder() > reminder);
    }

    #[test]
    fn deleting_state_removes_everything_of_that_id_only() {
        let (journal, _scratch) = journal();
        let reminder = |owner: &str| ReminderRow {
            owner: owner.to_owned(),
            target: "/user/a".to_owned(),
            kind: "r".to_owned(),
            body: Vec::new(),
            due_ms: 0,
            period_ms: None,
        };
        for pid in ["p", "q"] {
            commit(
                &journal,
                &StepWrite {
                    pid: pid.to_owned(),
                    ops: vec![
                        Op::Event {
                            seq: 1,
                            data: vec![1],
                        },
                        Op::Snapshot {
                            seq: 1,
                            state: vec![1],
                        },
                        Op::Remind {
                            id: journal.allocate_reminder(),
                            row: reminder(pid),
                        },
                    ],
                    last_seq: Some(1),
                    ..StepWrite::default()
                },
            );
        }
        commit(
            &journal,
            &StepWrite {
                pid: "p".to_owned(),
                ops: vec![Op::DeleteState],
                ..StepWrite::default()
            },
        );
        assert_eq!(journal.snapshot("p").unwrap(), None);
        assert_eq!(journal.last_seq("p").unwrap(), 0);
        assert!(journal.events("p", 0, 10).unwrap().is_empty());
        assert_eq!(journal.last_seq("q").unwrap(), 1);
        let owners: Vec<String> = journal
            .backlog()
            .unwrap()
            .reminders
            .into_iter()
            .map(|(_, r)| r.owner)
            .collect();
        assert_eq!(owners, ["q"]);
    }

    #[test]
    fn an_acknowledged_periodic_reminder_moves_on_and_a_one_shot_goes() {
        let (journal, _scratch) = journal();
        let (periodic, once) = (journal.allocate_reminder(), journal.allocate_reminder());
        let row = |period_ms| ReminderRow {
            owner: "p".to_owned(),
            target: "/user/a".to_owned(),
            kind: "r".to_owned(),
            body: Vec::new(),
            due_ms: 0,
            period_ms,
        };
        commit(
            &journal,
            &StepWrite {
                pid: "p".to_owned(),
                ops: vec![
                    Op::Remind {
                        id: periodic,
                        row: row(Some(60_000)),
                    },
                    Op::Remind {
                        id: once,
                        row: row(None),
                    },
                ],
                ..StepWrite::default()
            },
        );
        commit(&journal, &Ack(Receipt::Reminder(periodic)));
        commit(&journal, &Ack(Receipt::Reminder(once)));
        let left = journal.backlog().unwrap().reminders;
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].0, periodic);
        assert!(
            left[0].1.due_ms >= unix_ms() + 50_000,
            "due a period from now"
        );
    }

    #[test]
    fn a_damaged_record_is_a_typed_error() {
        let (journal, _scratch) = journal();
        journal
            .database()
            .write_with(|txn| {
                txn.open_table(OUTBOX)
                    .map_err(failed)?
                    .insert(1, &[0xff, 0xff, 0xff][..])
                    .map_err(failed)?;
                Ok(())
            })
            .unwrap();
        assert!(matches!(
            journal.backlog(),
            Err(DatabaseError::Damaged {
                table: "outbox",
                ..
            })
        ));
    }
}
