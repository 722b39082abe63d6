//! One persistence id's durable history as a replay sees it: the snapshot and the events up to
//! a chosen event, read from a database opened read-only; and what the persistence capability
//! does for a replayed actor (`recover` from it, writes counted and dropped).
//!
//! Invariants:
//! - Nothing here can write: the file is open through redb's read-only handle, which has no
//!   write transaction, and a running host (a writer) excludes it.
//! - Recovery up to `until` hands out the latest snapshot only if it was taken at or before
//!   `until`; otherwise it starts from the first event, which must still be stored. Events
//!   past `until` are never handed out.
//! - A plan is made only if the events it needs are all stored: events are numbered without
//!   gaps and deleted only from the front (`delete-events` through a seq), so the first and
//!   the last needed being there means every one between is.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::{ReadTransaction, ReadableTable};

use super::journal::{
    EVENTS, SEQUENCES, SNAPSHOTS, StoredSnapshot, read_events, read_last_seq, read_snapshot,
};
use super::owners::{self, OwnerRow};
use crate::error::ReplayError;
use crate::storage::database::{DatabaseError, ReadOnlyDatabase, SCHEMA_VERSION, failed, readable};

/// At most this many ids are named when an id is unknown.
const KNOWN_IDS: usize = 10;

/// Where recovery up to an event starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// From the snapshot taken at this event.
    Snapshot(u64),
    /// From the first event (no snapshot at or before the target).
    Beginning,
}

/// The history of one persistence id up to an event, and what the replayed actor did with it.
pub(crate) struct History {
    db: ReadOnlyDatabase,
    pid: String,
    until: u64,
    last: u64,
    start: Start,
    /// The latest snapshot, whether or not recovery uses it.
    latest: Option<StoredSnapshot>,
    owner: Option<OwnerRow>,
    tally: Mutex<Tally>,
    /// The last reminder id handed out (ids that are never stored).
    reminders: AtomicU64,
}

/// What the replayed actor read and what it tried to write (all dropped).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Whether it called `recover`.
    pub(crate) recovered: bool,
    /// Events it read through `replay`.
    pub(crate) events_read: u64,
    /// Events it persisted.
    pub(crate) events: u64,
    /// Snapshots it saved.
    pub(crate) snapshots: u64,
    /// Deletions of events or of its whole state.
    pub(crate) deletions: u64,
    /// Reminders it scheduled or cancelled.
    pub(crate) reminders: u64,
}

impl History {
    /// The history of `pid` in `db` up to event `until` (its latest event if `None`).
    pub(crate) fn load(
        db: ReadOnlyDatabase,
        pid: &str,
        until: Option<u64>,
    ) -> Result<History, ReplayError> {
        if db.schema() < SCHEMA_VERSION {
            return Err(ReplayError::OldSchema {
                path: db.path().to_owned(),
                found: db.schema(),
            });
        }
        let read = db.read()?;
        let latest = read_snapshot(&read, pid)?;
        let sequence = read_last_seq(&read, pid)?;
        let span = read_event_span(&read, pid)?;
        if latest.is_none() && sequence == 0 && span.is_none() {
            return Err(ReplayError::UnknownId {
                pid: pid.to_owned(),
                known: read_ids(&read, KNOWN_IDS)?,
            });
        }
        let last = sequence
            .max(latest.as_ref().map_or(0, |s| s.seq))
            .max(span.map_or(0, |(_, last)| last));
        let until = until.unwrap_or(last);
        let start = plan(pid, until, last, latest.as_ref().map(|s| s.seq), span)?;
        let owner = owners::read(&read, pid)?;
        drop(read);
        Ok(History {
            db,
            pid: pid.to_owned(),
            until,
            last,
            start,
            latest,
            owner,
            tally: Mutex::default(),
            reminders: AtomicU64::new(0),
        })
    }

    /// The database it is read from.
    pub(crate) fn database(&self) -> &ReadOnlyDatabase {
        &self.db
    }

    /// The persistence id.
    pub(crate) fn pid(&self) -> &str {
        &self.pid
    }

    /// The event recovery goes up to.
    pub(crate) fn until(&self) -> u64 {
        self.until
    }

    /// The latest event of the id.
    pub(crate) fn last(&self) -> u64 {
        self.last
    }

    /// Where recovery starts.
    pub(crate) fn start(&self) -> Start {
        self.start
    }

    /// The seq of the latest snapshot, used or not.
    pub(crate) fn latest_snapshot(&self) -> Option<u64> {
        self.latest.as_ref().map(|s| s.seq)
    }

    /// Who the database records as the id's writer, if it does.
    pub(crate) fn owner(&self) -> Option<&OwnerRow> {
        self.owner.as_ref()
    }

    /// The snapshot `recover` hands out; notes that the actor recovered.
    pub(crate) fn recover(&self) -> Option<StoredSnapshot> {
        self.tally(|t| t.recovered = true);
        match self.start {
            Start::Snapshot(_) => self.latest.clone(),
            Start::Beginning => None,
        }
    }

    /// Up to `max` events after `after`, none past the target.
    pub(crate) fn events(
        &self,
        after: u64,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, DatabaseError> {
        let events = read_events(&self.db.read()?, &self.pid, after, self.until, max)?;
        self.tally(|t| t.events_read += events.len() as u64);
        Ok(events)
    }

    /// A reminder id for the actor; the reminder is never stored.
    pub(crate) fn allocate_reminder(&self) -> u64 {
        self.reminders.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Counts what the actor did.
    pub(crate) fn tally(&self, f: impl FnOnce(&mut Tally)) {
        f(&mut self.tally.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// What the actor read and tried to write so far.
    pub(crate) fn tallied(&self) -> Tally {
        *self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Where recovery of `pid` up to `until` starts, given its latest event `last`, the seq of its
/// latest snapshot and the first and last of its stored events; or why it cannot.
pub(crate) fn plan(
    pid: &str,
    until: u64,
    last: u64,
    snapshot: Option<u64>,
    events: Option<(u64, u64)>,
) -> Result<Start, ReplayError> {
    if until > last {
        return Err(ReplayError::BeyondJournal {
            pid: pid.to_owned(),
            until,
            last,
        });
    }
    // The events `from..=until` are all stored (or there are none to need).
    let stored = |from: u64| from > until || events.is_some_and(|(f, l)| f <= from && l >= until);
    let start = match snapshot {
        Some(seq) if seq <= until => Start::Snapshot(seq),
        _ => Start::Beginning,
    };
    let needed = match start {
        Start::Snapshot(seq) => seq + 1,
        Start::Beginning => 1,
    };
    if stored(needed) {
        return Ok(start);
    }
    // The earliest event the state can be rebuilt at: the snapshot's, if the events after it
    // are there; else the first stored event, if the journal still starts at 1.
    let earliest = match (snapshot, events) {
        (Some(seq), Some((first, _))) if first <= seq + 1 => Some(seq),
        (Some(seq), None) if seq == last => Some(seq),
        (_, Some((1, _))) => Some(1),
        _ => None,
    };
    Err(ReplayError::HistoryGone {
        pid: pid.to_owned(),
        until,
        earliest,
    })
}

/// The first and the last event of `pid` still stored, as `read` sees them.
fn read_event_span(read: &ReadTransaction, pid: &str) -> Result<Option<(u64, u64)>, DatabaseError> {
    let Some(table) = readable(read, EVENTS)? else {
        return Ok(None);
    };
    let mut range = table.range((pid, 0)..=(pid, u64::MAX)).map_err(failed)?;
    let first = match range.next() {
        Some(entry) => entry.map_err(failed)?.0.value().1,
        None => return Ok(None),
    };
    let last = match range.next_back() {
        Some(entry) => entry.map_err(failed)?.0.value().1,
        None => first,
    };
    Ok(Some((first, last)))
}

/// Up to `max` persistence ids that have durable state, in order, as `read` sees them.
fn read_ids(read: &ReadTransaction, max: usize) -> Result<Vec<String>, DatabaseError> {
    let mut ids = std::collections::BTreeSet::new();
    if let Some(table) = readable(read, SEQUENCES)? {
        for entry in table.iter().map_err(failed)?.take(max) {
            ids.insert(entry.map_err(failed)?.0.value().to_owned());
        }
    }
    if let Some(table) = readable(read, SNAPSHOTS)? {
        for entry in table.iter().map_err(failed)?.take(max) {
            ids.insert(entry.map_err(failed)?.0.value().to_owned());
        }
    }
    Ok(ids.into_iter().take(max).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone(result: Result<Start, ReplayError>) -> Option<u64> {
        match result {
            Err(ReplayError::HistoryGone { earliest, .. }) => earliest,
            other => panic!("expected HistoryGone, got {other:?}"),
        }
    }

    #[test]
    fn a_snapshot_at_or_before_the_target_is_used_with_the_events_after_it() {
        // Snapshot at 6, events 1..=7 kept (the journal actor keeps them).
        let events = Some((1, 7));
        assert_eq!(
            plan("p", 7, 7, Some(6), events).unwrap(),
            Start::Snapshot(6)
        );
        assert_eq!(
            plan("p", 6, 7, Some(6), events).unwrap(),
            Start::Snapshot(6)
        );
        assert_eq!(plan("p", 4, 7, Some(6), events).unwrap(), Start::Beginning);
        assert_eq!(plan("p", 0, 7, Some(6), events).unwrap(), Start::Beginning);
        assert_eq!(
            plan("p", 3, 3, None, Some((1, 3))).unwrap(),
            Start::Beginning
        );
    }

    #[test]
    fn past_the_end_is_refused() {
        match plan("p", 8, 7, None, Some((1, 7))) {
            Err(ReplayError::BeyondJournal { until, last, .. }) => {
                assert_eq!((until, last), (8, 7))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn deleted_events_before_a_later_snapshot_make_earlier_states_unreachable() {
        // Snapshot at 64 and events 1..=64 deleted; 65..=70 kept.
        assert_eq!(
            plan("p", 70, 70, Some(64), Some((65, 70))).unwrap(),
            Start::Snapshot(64)
        );
        assert_eq!(
            plan("p", 64, 70, Some(64), Some((65, 70))).unwrap(),
            Start::Snapshot(64)
        );
        assert_eq!(gone(plan("p", 10, 70, Some(64), Some((65, 70)))), Some(64));
        // Everything up to the snapshot deleted, nothing after it.
        assert_eq!(
            plan("p", 64, 64, Some(64), None).unwrap(),
            Start::Snapshot(64)
        );
        assert_eq!(gone(plan("p", 63, 64, Some(64), None)), Some(64));
    }

    #[test]
    fn events_deleted_past_the_snapshot_leave_nothing_to_replay_to() {
        // A snapshot at 10, but events deleted through 15: 11..=15 are gone.
        assert_eq!(gone(plan("p", 20, 20, Some(10), Some((16, 20)))), None);
        // No snapshot and the front of the journal deleted.
        assert_eq!(gone(plan("p", 5, 9, None, Some((3, 9)))), None);
    }
}
