//! Who writes a persistence id's durable state: the module, the versions of it that wrote its
//! events, the actor path and the init, so that `mote replay` can start the same code again.
//!
//! | table    | key            | value                      |
//! |----------|----------------|----------------------------|
//! | `owners` | persistence id | an [`OwnerRow`] (postcard) |
//!
//! Invariants:
//! - A row is written with a step of its actor, in that step's transaction, so it never names
//!   a writer of state that was not committed. An instance writes it once, with its first step
//!   that commits (and again after a `delete-state`): the common step pays nothing for it.
//! - `versions` is ordered by `since` and names a version only where it changed; it keeps the
//!   last [`MAX_VERSIONS`] changes.
//! - `delete-state` deletes the row with the rest of the id's state.
//! - The table is additive: a file without it (written before it existed) simply records no
//!   owners, and an older Mote ignores it; no schema version is needed for it.

use redb::{ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};

use crate::storage::database::{DatabaseError, decode, encode, failed, readable};

pub(crate) const OWNERS: TableDefinition<&str, &[u8]> = TableDefinition::new("owners");

/// The most version changes a row keeps.
const MAX_VERSIONS: usize = 32;

/// The recorded writer of one persistence id.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct OwnerRow {
    /// The module name.
    pub(crate) module: String,
    /// The actor's path.
    pub(crate) path: String,
    /// The init its incarnation was spawned with.
    pub(crate) init: Vec<u8>,
    /// `(since, version)`: from event `since` on, the events were written by `version`.
    pub(crate) versions: Vec<(u64, String)>,
}

impl OwnerRow {
    /// The version that wrote event `seq`: the last one whose span began at or before it (the
    /// first one for an event before every span).
    pub(crate) fn version_at(&self, seq: u64) -> Option<&str> {
        self.versions
            .iter()
            .rev()
            .find(|(since, _)| *since <= seq)
            .or(self.versions.first())
            .map(|(_, version)| version.as_str())
    }
}

/// What an instance records about itself with its first committed step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) module: String,
    pub(crate) version: String,
    pub(crate) path: String,
    pub(crate) init: Vec<u8>,
    /// The first event this instance writes (its recovered seq + 1).
    pub(crate) since: u64,
}

/// Records `owner` as the writer of `pid` inside `txn`: its module, path and init replace the
/// row's, and its version starts a span if it is not the last one recorded.
pub(crate) fn record(
    txn: &WriteTransaction,
    pid: &str,
    owner: &Owner,
) -> Result<(), DatabaseError> {
    let mut table = txn.open_table(OWNERS).map_err(failed)?;
    let old: Option<OwnerRow> = match table.get(pid).map_err(failed)? {
        Some(value) => Some(decode("owners", value.value())?),
        None => None,
    };
    let row = updated(old, owner);
    table.insert(pid, encode(&row).as_slice()).map_err(failed)?;
    Ok(())
}

/// The row that records `owner` after `old`.
fn updated(old: Option<OwnerRow>, owner: &Owner) -> OwnerRow {
    let mut versions = match old {
        // Another module took the id over (a trusted one adopting legacy state, say): its own
        // history starts here.
        Some(old) if old.module == owner.module => old.versions,
        _ => Vec::new(),
    };
    // A span that starts where a later one began replaces it: those events were never written
    // (a deleted state restarts at 1).
    versions.retain(|(since, _)| *since < owner.since);
    if versions.last().is_none_or(|(_, v)| *v != owner.version) {
        versions.push((owner.since, owner.version.clone()));
    }
    if versions.len() > MAX_VERSIONS {
        versions.drain(..versions.len() - MAX_VERSIONS);
    }
    OwnerRow {
        module: owner.module.clone(),
        path: owner.path.clone(),
        init: owner.init.clone(),
        versions,
    }
}

/// Deletes the row of `pid` inside `txn`.
pub(crate) fn remove(txn: &WriteTransaction, pid: &str) -> Result<(), DatabaseError> {
    txn.open_table(OWNERS)
        .map_err(failed)?
        .remove(pid)
        .map_err(failed)?;
    Ok(())
}

/// The row of `pid`, as `read` sees it.
pub(crate) fn read(read: &ReadTransaction, pid: &str) -> Result<Option<OwnerRow>, DatabaseError> {
    let Some(table) = readable(read, OWNERS)? else {
        return Ok(None);
    };
    match table.get(pid).map_err(failed)? {
        Some(value) => Ok(Some(decode("owners", value.value())?)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(version: &str, since: u64) -> Owner {
        Owner {
            module: "m".into(),
            version: version.into(),
            path: "/user/a".into(),
            init: b"init".to_vec(),
            since,
        }
    }

    #[test]
    fn a_version_starts_a_span_only_where_it_changes() {
        let row = updated(None, &owner("1", 1));
        let row = updated(Some(row), &owner("1", 8));
        let row = updated(Some(row), &owner("2", 11));
        let row = updated(Some(row), &owner("1", 21));
        assert_eq!(
            row.versions,
            [(1, "1".into()), (11, "2".into()), (21, "1".into())]
        );
        assert_eq!(row.version_at(0), Some("1"));
        assert_eq!(row.version_at(10), Some("1"));
        assert_eq!(row.version_at(11), Some("2"));
        assert_eq!(row.version_at(20), Some("2"));
        assert_eq!(row.version_at(500), Some("1"));
    }

    #[test]
    fn a_restarted_history_drops_the_spans_past_its_start() {
        let row = updated(None, &owner("1", 1));
        let row = updated(Some(row), &owner("2", 11));
        // delete-state: the next events are numbered from 1 again.
        let row = updated(Some(row), &owner("3", 1));
        assert_eq!(row.versions, [(1, "3".into())]);
    }

    #[test]
    fn another_module_starts_its_own_history_and_the_list_is_bounded() {
        let mut row = updated(None, &owner("0", 1));
        for n in 1..100u64 {
            row = updated(Some(row), &owner(&n.to_string(), n * 10));
        }
        assert_eq!(row.versions.len(), MAX_VERSIONS);
        assert_eq!(row.version_at(u64::MAX), Some("99"));
        let other = Owner {
            module: "n".into(),
            ..owner("7", 1000)
        };
        assert_eq!(updated(Some(row), &other).versions, [(1000, "7".into())]);
    }

    #[test]
    fn rows_are_written_read_and_removed_in_transactions() {
        let scratch = crate::storage::Scratch::new("owners");
        let db = scratch.database("o.redb");
        db.write_with(|txn| record(txn, "m:/user/a", &owner("1", 1)))
            .unwrap();
        let row = read(&db.read().unwrap(), "m:/user/a").unwrap().unwrap();
        assert_eq!(
            (row.path.as_str(), row.init.as_slice()),
            ("/user/a", &b"init"[..])
        );
        assert_eq!(read(&db.read().unwrap(), "m:/user/b").unwrap(), None);
        db.write_with(|txn| remove(txn, "m:/user/a")).unwrap();
        assert_eq!(read(&db.read().unwrap(), "m:/user/a").unwrap(), None);
    }
}
