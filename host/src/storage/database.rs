//! The database: one redb file that every durable part of the host writes to.
//!
//! This module owns the file, its `meta` table and the schema version; the tables themselves
//! belong to their users, who create them when they start: the persistence capability's
//! snapshots, events, sequences, outbox and reminders, and the module registry's `modules`.
//!
//! | table  | key  | value                                                         |
//! |--------|------|---------------------------------------------------------------|
//! | `meta` | name | `magic` (`mote-store`), `schema` (u32 LE), and its users' counters |
//!
//! Invariants:
//! - A file is used only if it is new, empty, or carries Mote's magic and a schema version this
//!   build knows (1 to [`SCHEMA_VERSION`]; an older one is migrated by the tables' users);
//!   anything else is refused, and nothing of Mote's is written into it.
//! - Reads run in their own read transactions and see the last commit; they never block the
//!   writer. There is one write transaction at a time (redb's rule): the committer's, or a
//!   short one of the module registry.
//! - After [`Database::close`] every call fails with [`DatabaseError::Closed`].
//! - A [`ReadOnlyDatabase`] (a replay's) checks a file the same way and cannot write it: it
//!   neither adopts an empty file nor migrates an old one.

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU32, Ordering};

use redb::{ReadTransaction, ReadableDatabase, TableDefinition, TableHandle, WriteTransaction};

pub(crate) use crate::error::DatabaseError;

/// The version of the table layout this Mote writes. Version 2 scopes persistence ids by
/// owner; a version-1 file is migrated when it is opened (see the persistence journal).
pub const SCHEMA_VERSION: u32 = 2;
/// The oldest version this build opens (and migrates).
const OLDEST_SCHEMA: u32 = 1;
const MAGIC: &[u8] = b"mote-store";

/// The table of names and small values: the magic, the schema version, users' counters.
pub(crate) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// Wraps any of redb's errors.
pub(crate) fn failed(e: impl Into<redb::Error>) -> DatabaseError {
    DatabaseError::Storage(e.into())
}

/// Decodes a postcard record of `table`.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    table: &'static str,
    bytes: &[u8],
) -> Result<T, DatabaseError> {
    postcard::from_bytes(bytes).map_err(|source| DatabaseError::Damaged { table, source })
}

/// Encodes a postcard record.
pub(crate) fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Mote's records are plain structs of strings, bytes and integers: encoding cannot fail.
    postcard::to_allocvec(value).unwrap_or_default()
}

/// An open database file.
pub struct Database {
    /// `None` once closed.
    db: RwLock<Option<redb::Database>>,
    path: PathBuf,
    /// The schema version of the file as it is now (older ones until their users migrate).
    schema: AtomicU32,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("path", &self.path)
            .finish()
    }
}

impl Database {
    /// Opens the database at `path`, creating the file if it does not exist.
    pub fn open(path: impl AsRef<Path>) -> Result<Database, DatabaseError> {
        let path = path.as_ref().to_path_buf();
        let fresh = !path.exists();
        let db = if fresh {
            redb::Database::create(&path)
        } else {
            redb::Database::open(&path)
        }
        .map_err(|source| DatabaseError::Open {
            path: path.clone(),
            source,
        })?;
        let database = Database {
            db: RwLock::new(Some(db)),
            path,
            schema: AtomicU32::new(SCHEMA_VERSION),
        };
        database.check_or_init()?;
        Ok(database)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Begins a read transaction on the last commit.
    pub(crate) fn read(&self) -> Result<ReadTransaction, DatabaseError> {
        let db = self.db.read().unwrap_or_else(|p| p.into_inner());
        db.as_ref()
            .ok_or(DatabaseError::Closed)?
            .begin_read()
            .map_err(failed)
    }

    /// Begins the (only) write transaction.
    pub(crate) fn write(&self) -> Result<WriteTransaction, DatabaseError> {
        let db = self.db.read().unwrap_or_else(|p| p.into_inner());
        db.as_ref()
            .ok_or(DatabaseError::Closed)?
            .begin_write()
            .map_err(failed)
    }

    /// Runs `f` in a write transaction of its own and commits it.
    pub(crate) fn write_with(
        &self,
        f: impl FnOnce(&WriteTransaction) -> Result<(), DatabaseError>,
    ) -> Result<(), DatabaseError> {
        let txn = self.write()?;
        f(&txn)?;
        txn.commit().map_err(failed)
    }

    /// Closes the file; later calls fail with [`DatabaseError::Closed`].
    pub(crate) fn close(&self) {
        self.db.write().unwrap_or_else(|p| p.into_inner()).take();
    }

    fn check_or_init(&self) -> Result<(), DatabaseError> {
        let schema = check_meta(&self.read()?, &self.path)?;
        match schema {
            Some(schema) => self.schema.store(schema, Ordering::Release),
            // New, or created and never written: adopt it.
            None => self.write_with(|txn| {
                let mut meta = txn.open_table(META).map_err(failed)?;
                meta.insert("magic", MAGIC).map_err(failed)?;
                meta.insert("schema", &SCHEMA_VERSION.to_le_bytes()[..])
                    .map_err(failed)?;
                Ok(())
            })?,
        }
        Ok(())
    }

    /// The schema version of the file: older than [`SCHEMA_VERSION`] until it is migrated.
    pub(crate) fn schema(&self) -> u32 {
        self.schema.load(Ordering::Acquire)
    }

    /// Records inside `txn` that the file is now at [`SCHEMA_VERSION`]; [`Database::schema`]
    /// says so once `txn` has committed and [`Database::migrated`] is called.
    pub(crate) fn set_schema(txn: &WriteTransaction) -> Result<(), DatabaseError> {
        let mut meta = txn.open_table(META).map_err(failed)?;
        meta.insert("schema", &SCHEMA_VERSION.to_le_bytes()[..])
            .map_err(failed)?;
        Ok(())
    }

    /// The migration to [`SCHEMA_VERSION`] has committed.
    pub(crate) fn migrated(&self) {
        self.schema.store(SCHEMA_VERSION, Ordering::Release);
    }

    /// A little-endian u64 kept in `meta` under `key` (0 if absent).
    pub(crate) fn counter(&self, key: &str) -> Result<u64, DatabaseError> {
        let read = self.read()?;
        let meta = read.open_table(META).map_err(failed)?;
        Ok(meta
            .get(key)
            .map_err(failed)?
            .and_then(|v| <[u8; 8]>::try_from(v.value()).ok())
            .map_or(0, u64::from_le_bytes))
    }
}

/// The schema version of the file `read` sees: `None` if it has no tables at all (new, or
/// created and never written); an error if it is not Mote's or not a version this build reads.
fn check_meta(read: &ReadTransaction, path: &Path) -> Result<Option<u32>, DatabaseError> {
    let mut tables = read.list_tables().map_err(failed)?.peekable();
    if tables.peek().is_none() {
        return Ok(None);
    }
    if !tables.any(|t| t.name() == META.name()) {
        return Err(DatabaseError::Foreign {
            path: path.to_owned(),
        });
    }
    let meta = read.open_table(META).map_err(failed)?;
    let magic = meta.get("magic").map_err(failed)?;
    if magic.as_ref().map(|m| m.value()) != Some(MAGIC) {
        return Err(DatabaseError::Foreign {
            path: path.to_owned(),
        });
    }
    let schema = meta
        .get("schema")
        .map_err(failed)?
        .and_then(|v| <[u8; 4]>::try_from(v.value()).ok())
        .map(u32::from_le_bytes)
        .unwrap_or(0);
    if !(OLDEST_SCHEMA..=SCHEMA_VERSION).contains(&schema) {
        return Err(DatabaseError::Schema {
            path: path.to_owned(),
            found: schema,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(Some(schema))
}

/// A database file opened read-only: redb's read-only handle, which has no way to write, over
/// a file checked like [`Database::open`] checks it (without adopting an empty one).
///
/// redb lets read-only handles share a file with each other but not with a writer: a file a
/// running host has open is refused ([`redb::DatabaseError::DatabaseAlreadyOpen`]), and so is
/// one a crash left unclean ([`redb::DatabaseError::RepairAborted`]; repairing is a write).
pub(crate) struct ReadOnlyDatabase {
    db: redb::ReadOnlyDatabase,
    path: PathBuf,
    schema: u32,
}

impl ReadOnlyDatabase {
    /// Opens the existing file at `path` for reading.
    pub(crate) fn open(path: impl AsRef<Path>) -> Result<Self, DatabaseError> {
        let path = path.as_ref().to_path_buf();
        let db = redb::ReadOnlyDatabase::open(&path).map_err(|source| DatabaseError::Open {
            path: path.clone(),
            source,
        })?;
        let schema = {
            let read = db.begin_read().map_err(failed)?;
            check_meta(&read, &path)?.unwrap_or(SCHEMA_VERSION)
        };
        Ok(ReadOnlyDatabase { db, path, schema })
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the file (that of this build if it has no tables yet).
    pub(crate) fn schema(&self) -> u32 {
        self.schema
    }

    /// Begins a read transaction.
    pub(crate) fn read(&self) -> Result<ReadTransaction, DatabaseError> {
        self.db.begin_read().map_err(failed)
    }
}

/// `table` as `read` sees it, or `None` if the file does not have it (a read-only handle
/// cannot create it).
pub(crate) fn readable<K: redb::Key + 'static, V: redb::Value + 'static>(
    read: &ReadTransaction,
    table: TableDefinition<K, V>,
) -> Result<Option<redb::ReadOnlyTable<K, V>>, DatabaseError> {
    match read.open_table(table) {
        Ok(table) => Ok(Some(table)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(failed(e)),
    }
}

/// Records a little-endian u64 in `meta` under `key`, inside `txn`.
pub(crate) fn set_counter(
    txn: &WriteTransaction,
    key: &str,
    value: u64,
) -> Result<(), DatabaseError> {
    let mut meta = txn.open_table(META).map_err(failed)?;
    meta.insert(key, &value.to_le_bytes()[..]).map_err(failed)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Scratch;

    #[test]
    fn a_new_file_gets_the_magic_and_schema_and_opens_again() {
        let scratch = Scratch::new("db");
        let path = scratch.0.join("new.redb");
        {
            let db = Database::open(&path).unwrap();
            db.write_with(|txn| set_counter(txn, "n", 7)).unwrap();
        }
        let db = Database::open(&path).unwrap();
        assert_eq!(db.counter("n").unwrap(), 7);
        assert_eq!(db.counter("absent").unwrap(), 0);
    }

    /// A redb file of another program, `theirs.redb` in `dir`.
    fn foreign(dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("theirs.redb");
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(TableDefinition::<&str, u64>::new("theirs"))
            .unwrap()
            .insert("k", 1)
            .unwrap();
        txn.commit().unwrap();
        path
    }

    #[test]
    fn a_file_of_another_program_is_refused_untouched() {
        let scratch = Scratch::new("db");
        let path = foreign(&scratch.0);
        assert!(matches!(
            Database::open(&path),
            Err(DatabaseError::Foreign { .. })
        ));
        let db = redb::Database::open(&path).unwrap();
        let read = db.begin_read().unwrap();
        let tables: Vec<String> = read
            .list_tables()
            .unwrap()
            .map(|t| t.name().to_owned())
            .collect();
        assert_eq!(tables, ["theirs"], "no table of Mote's was added");
        let theirs = read
            .open_table(TableDefinition::<&str, u64>::new("theirs"))
            .unwrap();
        assert_eq!(theirs.get("k").unwrap().map(|v| v.value()), Some(1));
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let scratch = Scratch::new("db");
        let path = scratch.0.join("newer.redb");
        {
            let db = Database::open(&path).unwrap();
            db.write_with(|txn| {
                let mut meta = txn.open_table(META).map_err(failed)?;
                meta.insert("schema", &(SCHEMA_VERSION + 1).to_le_bytes()[..])
                    .map_err(failed)?;
                Ok(())
            })
            .unwrap();
        }
        match Database::open(&path) {
            Err(DatabaseError::Schema { found, .. }) => assert_eq!(found, SCHEMA_VERSION + 1),
            other => panic!("expected a schema error, got {other:?}"),
        }
    }

    #[test]
    fn a_read_only_open_checks_the_file_and_never_adopts_or_writes_it() {
        let scratch = Scratch::new("db");
        let empty = scratch.0.join("empty.redb");
        drop(redb::Database::create(&empty).unwrap());
        let before = std::fs::read(&empty).unwrap();
        let db = ReadOnlyDatabase::open(&empty).unwrap();
        assert_eq!(db.schema(), SCHEMA_VERSION);
        assert_eq!(
            readable(&db.read().unwrap(), META).unwrap().map(|_| ()),
            None
        );
        drop(db);
        assert!(std::fs::read(&empty).unwrap() == before, "not adopted");

        let theirs = foreign(&scratch.0);
        assert!(matches!(
            ReadOnlyDatabase::open(&theirs),
            Err(DatabaseError::Foreign { .. })
        ));
        assert!(matches!(
            ReadOnlyDatabase::open(scratch.0.join("missing.redb")),
            Err(DatabaseError::Open { .. })
        ));
    }

    #[test]
    fn a_closed_database_refuses_every_call() {
        let scratch = Scratch::new("db");
        let path = scratch.0.join("closed.redb");
        let db = Database::open(&path).unwrap();
        db.close();
        assert!(matches!(db.read(), Err(DatabaseError::Closed)));
        assert!(matches!(db.write(), Err(DatabaseError::Closed)));
    }
}
