//! The durable store: one redb file holding every persistent actor's snapshot and event journal,
//! the outbox of messages between persistent actors, durable timers (reminders) and the module
//! registry.
//!
//! Tables (schema version [`SCHEMA_VERSION`], recorded in `meta` so a later Mote can migrate):
//!
//! | table       | key                       | value                                        |
//! |-------------|---------------------------|----------------------------------------------|
//! | `meta`      | name                      | `magic`, `schema`, next outbox/reminder ids  |
//! | `snapshots` | persistence id            | seq (u64 LE) then the state bytes            |
//! | `sequences` | persistence id            | the latest event seq                         |
//! | `events`    | (persistence id, seq)     | the event bytes                              |
//! | `outbox`    | outbox id                 | an [`OutboxRow`] (postcard)                  |
//! | `reminders` | reminder id               | a [`ReminderRow`] (postcard)                 |
//! | `modules`   | module name               | reserved for the module registry             |
//!
//! Reads (recovery) run in their own read transactions, beside the committer's writes: redb
//! readers see the last commit and never block the writer. Writes happen only in
//! [`crate::committer`], one transaction per group of steps.

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::{
    Database, ReadTransaction, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    TableDefinition, TableHandle, WriteTransaction,
};
use serde::{Deserialize, Serialize};

/// The version of the table layout this Mote writes.
pub const SCHEMA_VERSION: u32 = 1;
const MAGIC: &[u8] = b"mote-store";

pub(crate) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
pub(crate) const SNAPSHOTS: TableDefinition<&str, &[u8]> = TableDefinition::new("snapshots");
pub(crate) const SEQUENCES: TableDefinition<&str, u64> = TableDefinition::new("sequences");
pub(crate) const EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("events");
pub(crate) const OUTBOX: TableDefinition<u64, &[u8]> = TableDefinition::new("outbox");
pub(crate) const REMINDERS: TableDefinition<u64, &[u8]> = TableDefinition::new("reminders");
pub(crate) const MODULES: TableDefinition<&str, &[u8]> = TableDefinition::new("modules");

pub(crate) const NEXT_OUTBOX: &str = "next-outbox";
pub(crate) const NEXT_REMINDER: &str = "next-reminder";

/// Why the store could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file could not be opened as a database (missing directory, corrupt, not redb, locked).
    #[error("cannot open database {path}: {reason}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why, as redb or the OS put it.
        reason: String,
    },
    /// The file is a redb database, but not one Mote wrote.
    #[error("database {path} is not a Mote store (it has no Mote metadata)")]
    Foreign {
        /// The file.
        path: PathBuf,
    },
    /// The file was written by a newer Mote with a layout this one does not know.
    #[error(
        "database {path} has schema version {found}; this Mote understands up to version \
         {supported}: upgrade Mote"
    )]
    Schema {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// A read or write failed.
    #[error("database error: {0}")]
    Storage(String),
    /// A stored record could not be decoded: the file is damaged.
    #[error("damaged record in table {table}: {reason}")]
    Damaged {
        /// The table.
        table: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The committer is gone (the host is shutting down).
    #[error("the store is closed")]
    Closed,
}

impl StoreError {
    pub(crate) fn storage(e: impl std::fmt::Display) -> Self {
        StoreError::Storage(e.to_string())
    }
}

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
pub struct StoredSnapshot {
    /// The latest event it covers.
    pub seq: u64,
    /// The actor's state bytes.
    pub state: Vec<u8>,
}

/// Everything not yet acknowledged when the store was opened.
#[derive(Default, Debug)]
pub(crate) struct Backlog {
    pub(crate) outbox: Vec<(u64, OutboxRow)>,
    pub(crate) reminders: Vec<(u64, ReminderRow)>,
}

/// An open store.
pub struct Store {
    /// `None` once closed.
    db: RwLock<Option<Database>>,
    path: PathBuf,
    next_outbox: AtomicU64,
    next_reminder: AtomicU64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

fn read_u64(meta: &impl ReadableTable<&'static str, &'static [u8]>, key: &str) -> u64 {
    meta.get(key)
        .ok()
        .flatten()
        .and_then(|v| <[u8; 8]>::try_from(v.value()).ok())
        .map_or(0, u64::from_le_bytes)
}

impl Store {
    /// Opens the store at `path`, creating it (and its tables) if the file does not exist.
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        let path = path.as_ref().to_path_buf();
        let open_error = |e: &dyn std::fmt::Display| StoreError::Open {
            path: path.clone(),
            reason: e.to_string(),
        };
        let fresh = !path.exists();
        let db = if fresh {
            Database::create(&path)
        } else {
            Database::open(&path)
        }
        .map_err(|e| open_error(&e))?;
        let store = Store {
            db: RwLock::new(Some(db)),
            path: path.clone(),
            next_outbox: AtomicU64::new(1),
            next_reminder: AtomicU64::new(1),
        };
        store.check_or_init(fresh)?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Begins a read transaction on the last commit.
    pub(crate) fn read(&self) -> Result<ReadTransaction, StoreError> {
        let db = self.db.read().unwrap_or_else(|p| p.into_inner());
        db.as_ref()
            .ok_or(StoreError::Closed)?
            .begin_read()
            .map_err(StoreError::storage)
    }

    /// Begins the (only) write transaction.
    pub(crate) fn write(&self) -> Result<WriteTransaction, StoreError> {
        let db = self.db.read().unwrap_or_else(|p| p.into_inner());
        db.as_ref()
            .ok_or(StoreError::Closed)?
            .begin_write()
            .map_err(StoreError::storage)
    }

    /// Closes the file; later calls fail with [`StoreError::Closed`].
    pub(crate) fn close(&self) {
        self.db.write().unwrap_or_else(|p| p.into_inner()).take();
    }

    fn check_or_init(&self, fresh: bool) -> Result<(), StoreError> {
        let has_meta = {
            let read = self.read()?;
            let tables: Vec<String> = read
                .list_tables()
                .map_err(StoreError::storage)?
                .map(|t| t.name().to_owned())
                .collect();
            if tables.is_empty() && !fresh {
                // An empty redb file (for instance created and never written): adopt it.
                false
            } else if !tables.iter().any(|t| t == META.name()) {
                if !tables.is_empty() {
                    return Err(StoreError::Foreign {
                        path: self.path.clone(),
                    });
                }
                false
            } else {
                true
            }
        };
        if !has_meta {
            let write = self.write()?;
            {
                let mut meta = write.open_table(META).map_err(StoreError::storage)?;
                meta.insert("magic", MAGIC).map_err(StoreError::storage)?;
                meta.insert("schema", &SCHEMA_VERSION.to_le_bytes()[..])
                    .map_err(StoreError::storage)?;
                write.open_table(SNAPSHOTS).map_err(StoreError::storage)?;
                write.open_table(SEQUENCES).map_err(StoreError::storage)?;
                write.open_table(EVENTS).map_err(StoreError::storage)?;
                write.open_table(OUTBOX).map_err(StoreError::storage)?;
                write.open_table(REMINDERS).map_err(StoreError::storage)?;
                write.open_table(MODULES).map_err(StoreError::storage)?;
            }
            write.commit().map_err(StoreError::storage)?;
            return Ok(());
        }
        let read = self.read()?;
        let meta = read.open_table(META).map_err(StoreError::storage)?;
        let magic = meta.get("magic").map_err(StoreError::storage)?;
        if magic.as_ref().map(|m| m.value()) != Some(MAGIC) {
            return Err(StoreError::Foreign {
                path: self.path.clone(),
            });
        }
        let schema = meta
            .get("schema")
            .map_err(StoreError::storage)?
            .and_then(|v| <[u8; 4]>::try_from(v.value()).ok())
            .map(u32::from_le_bytes)
            .unwrap_or(0);
        if schema != SCHEMA_VERSION {
            return Err(StoreError::Schema {
                path: self.path.clone(),
                found: schema,
                supported: SCHEMA_VERSION,
            });
        }
        self.next_outbox
            .store(read_u64(&meta, NEXT_OUTBOX).max(1), Ordering::Relaxed);
        self.next_reminder
            .store(read_u64(&meta, NEXT_REMINDER).max(1), Ordering::Relaxed);
        Ok(())
    }

    /// Allocates outbox ids; the committer records the high-water mark with each commit.
    pub(crate) fn allocate_outbox(&self, n: u64) -> u64 {
        self.next_outbox.fetch_add(n, Ordering::Relaxed)
    }

    /// The next outbox id that has not been handed out.
    pub(crate) fn outbox_mark(&self) -> u64 {
        self.next_outbox.load(Ordering::Relaxed)
    }

    /// Allocates a reminder id.
    pub(crate) fn allocate_reminder(&self) -> u64 {
        self.next_reminder.fetch_add(1, Ordering::Relaxed)
    }

    /// The next reminder id that has not been handed out.
    pub(crate) fn reminder_mark(&self) -> u64 {
        self.next_reminder.load(Ordering::Relaxed)
    }

    /// The latest snapshot of `pid`.
    pub fn snapshot(&self, pid: &str) -> Result<Option<StoredSnapshot>, StoreError> {
        let read = self.read()?;
        let table = read.open_table(SNAPSHOTS).map_err(StoreError::storage)?;
        let Some(value) = table.get(pid).map_err(StoreError::storage)? else {
            return Ok(None);
        };
        let bytes = value.value();
        let (seq, state) = bytes
            .split_first_chunk::<8>()
            .ok_or_else(|| StoreError::Damaged {
                table: "snapshots",
                reason: format!("record of {pid:?} is {} bytes long", bytes.len()),
            })?;
        Ok(Some(StoredSnapshot {
            seq: u64::from_le_bytes(*seq),
            state: state.to_vec(),
        }))
    }

    /// The latest event seq of `pid` (0 if it never persisted one).
    pub fn last_seq(&self, pid: &str) -> Result<u64, StoreError> {
        let read = self.read()?;
        let table = read.open_table(SEQUENCES).map_err(StoreError::storage)?;
        Ok(table
            .get(pid)
            .map_err(StoreError::storage)?
            .map_or(0, |v| v.value()))
    }

    /// Up to `max` events of `pid` after `after`, in order.
    pub fn events(
        &self,
        pid: &str,
        after: u64,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let Some(from) = after.checked_add(1) else {
            return Ok(Vec::new());
        };
        let read = self.read()?;
        let table = read.open_table(EVENTS).map_err(StoreError::storage)?;
        let mut out = Vec::new();
        for entry in table
            .range((pid, from)..=(pid, u64::MAX))
            .map_err(StoreError::storage)?
            .take(max)
        {
            let (key, value) = entry.map_err(StoreError::storage)?;
            out.push((key.value().1, value.value().to_vec()));
        }
        Ok(out)
    }

    /// Every outbox message and reminder not yet acknowledged.
    pub(crate) fn backlog(&self) -> Result<Backlog, StoreError> {
        let read = self.read()?;
        let mut backlog = Backlog::default();
        let outbox = read.open_table(OUTBOX).map_err(StoreError::storage)?;
        for entry in outbox.iter().map_err(StoreError::storage)? {
            let (key, value) = entry.map_err(StoreError::storage)?;
            let row: OutboxRow =
                postcard::from_bytes(value.value()).map_err(|e| StoreError::Damaged {
                    table: "outbox",
                    reason: e.to_string(),
                })?;
            backlog.outbox.push((key.value(), row));
        }
        let reminders = read.open_table(REMINDERS).map_err(StoreError::storage)?;
        for entry in reminders.iter().map_err(StoreError::storage)? {
            let (key, value) = entry.map_err(StoreError::storage)?;
            let row: ReminderRow =
                postcard::from_bytes(value.value()).map_err(|e| StoreError::Damaged {
                    table: "reminders",
                    reason: e.to_string(),
                })?;
            backlog.reminders.push((key.value(), row));
        }
        Ok(backlog)
    }

    /// How many outbox messages wait for an acknowledgement.
    pub fn outbox_len(&self) -> Result<u64, StoreError> {
        let read = self.read()?;
        let table = read.open_table(OUTBOX).map_err(StoreError::storage)?;
        table.len().map_err(StoreError::storage)
    }
}

/// A deployed module version, kept so a restarted host has it again.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct ModuleRow {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) hash: String,
    /// What it was granted beyond the defaults (`wasi:http`).
    pub(crate) grants: Vec<String>,
    pub(crate) bytes: Vec<u8>,
}

fn module_key(name: &str, version: &str) -> String {
    format!("v/{name}/{version}")
}

fn current_key(name: &str) -> String {
    format!("c/{name}")
}

impl Store {
    /// Records a deployed module version.
    pub(crate) fn put_module(&self, row: &ModuleRow) -> Result<(), StoreError> {
        let bytes = postcard::to_allocvec(row).map_err(StoreError::storage)?;
        let txn = self.write()?;
        {
            let mut table = txn.open_table(MODULES).map_err(StoreError::storage)?;
            table
                .insert(
                    module_key(&row.name, &row.version).as_str(),
                    bytes.as_slice(),
                )
                .map_err(StoreError::storage)?;
        }
        txn.commit().map_err(StoreError::storage)
    }

    /// Records which version of `name` new actors get.
    pub(crate) fn set_current_module(&self, name: &str, version: &str) -> Result<(), StoreError> {
        let txn = self.write()?;
        {
            let mut table = txn.open_table(MODULES).map_err(StoreError::storage)?;
            table
                .insert(current_key(name).as_str(), version.as_bytes())
                .map_err(StoreError::storage)?;
        }
        txn.commit().map_err(StoreError::storage)
    }

    /// Forgets a module version, or all versions of `name`.
    pub(crate) fn remove_module(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<(), StoreError> {
        let txn = self.write()?;
        {
            let mut table = txn.open_table(MODULES).map_err(StoreError::storage)?;
            match version {
                Some(v) => {
                    table
                        .remove(module_key(name, v).as_str())
                        .map_err(StoreError::storage)?;
                }
                None => {
                    let prefix = format!("v/{name}/");
                    table
                        .retain(|k, _| !k.starts_with(&prefix))
                        .map_err(StoreError::storage)?;
                    table
                        .remove(current_key(name).as_str())
                        .map_err(StoreError::storage)?;
                }
            }
        }
        txn.commit().map_err(StoreError::storage)
    }

    /// Every recorded module version, and the current version of each name.
    pub(crate) fn modules(
        &self,
    ) -> Result<(Vec<ModuleRow>, std::collections::HashMap<String, String>), StoreError> {
        let read = self.read()?;
        let table = read.open_table(MODULES).map_err(StoreError::storage)?;
        let mut rows = Vec::new();
        let mut current = std::collections::HashMap::new();
        for entry in table.iter().map_err(StoreError::storage)? {
            let (key, value) = entry.map_err(StoreError::storage)?;
            let key = key.value();
            if let Some(name) = key.strip_prefix("c/") {
                current.insert(
                    name.to_owned(),
                    String::from_utf8_lossy(value.value()).into_owned(),
                );
            } else if key.starts_with("v/") {
                let row: ModuleRow =
                    postcard::from_bytes(value.value()).map_err(|e| StoreError::Damaged {
                        table: "modules",
                        reason: e.to_string(),
                    })?;
                rows.push(row);
            }
        }
        Ok((rows, current))
    }
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
