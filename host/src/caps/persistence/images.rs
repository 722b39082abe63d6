//! Where the images of actors passivated as images wait for their next message: the host's
//! persistence store (the redb file's table `images`, or the JetStream store's object store
//! `mote-<ns>-passivated`, which every node of a cluster reaches), or memory on a host without
//! one.
//!
//! Invariants:
//! - An image is stored before its actor gives up its path, and taken (read and removed) when
//!   the path is activated again: at most one activation gets it (on redb in one transaction;
//!   on JetStream under the entity's lease, one activation in the cluster).
//! - Images are bytes to this store: they are checked when decoded, never here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use redb::TableDefinition;

use super::backend::{Backend, StorageError};
use crate::storage::database::{Database, DatabaseError, failed};

const IMAGES: TableDefinition<&str, &[u8]> = TableDefinition::new("images");

/// The stored images, by path.
#[derive(Default)]
pub(crate) struct Images {
    store: Option<Arc<dyn Backend>>,
    memory: Mutex<HashMap<String, Vec<u8>>>,
}

impl Images {
    /// Images kept in `store`, or in memory without one.
    pub(crate) fn new(store: Option<Arc<dyn Backend>>) -> Self {
        Images {
            store,
            memory: Mutex::default(),
        }
    }

    /// Stores the image of the actor at `path`, durably if the host has a store.
    pub(crate) fn put(&self, path: &str, image: &[u8]) -> Result<(), StorageError> {
        match &self.store {
            Some(store) => store.put_image(path, image),
            None => {
                self.lock().insert(path.to_owned(), image.to_vec());
                Ok(())
            }
        }
    }

    /// Takes the image stored for `path`, if any.
    pub(crate) fn take(&self, path: &str) -> Result<Option<Vec<u8>>, StorageError> {
        match &self.store {
            Some(store) => store.take_image(path),
            None => Ok(self.lock().remove(path)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<u8>>> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Stores an image in the redb file.
pub(crate) fn put_redb(db: &Database, path: &str, image: &[u8]) -> Result<(), DatabaseError> {
    db.write_with(|txn| {
        let mut table = txn.open_table(IMAGES).map_err(failed)?;
        table.insert(path, image).map_err(failed)?;
        Ok(())
    })
}

/// Takes an image from the redb file, in one transaction (a read first: an activation with
/// none costs no write).
pub(crate) fn take_redb(db: &Database, path: &str) -> Result<Option<Vec<u8>>, DatabaseError> {
    if !stored(db, path)? {
        return Ok(None);
    }
    let mut taken = None;
    db.write_with(|txn| {
        let mut table = txn.open_table(IMAGES).map_err(failed)?;
        taken = table
            .remove(path)
            .map_err(failed)?
            .map(|v| v.value().to_vec());
        Ok(())
    })?;
    Ok(taken)
}

/// Whether `db` holds an image for `path`.
fn stored(db: &Database, path: &str) -> Result<bool, DatabaseError> {
    let txn = db.read()?;
    match txn.open_table(IMAGES) {
        Ok(table) => Ok(table.get(path).map_err(failed)?.is_some()),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(false),
        Err(e) => Err(failed(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Scratch;

    #[test]
    fn an_image_is_taken_once_and_survives_reopening_the_database() {
        let scratch = Scratch::new("images");
        let db = scratch.database("m.redb");
        put_redb(&db, "/user/c/1", b"one").unwrap();
        put_redb(&db, "/user/c/2", b"two").unwrap();
        drop(db);
        let db = scratch.database("m.redb");
        assert_eq!(
            take_redb(&db, "/user/c/1").unwrap().as_deref(),
            Some(&b"one"[..])
        );
        assert_eq!(take_redb(&db, "/user/c/1").unwrap(), None);
        assert_eq!(
            take_redb(&db, "/user/c/2").unwrap().as_deref(),
            Some(&b"two"[..])
        );

        let memory = Images::default();
        assert_eq!(memory.take("/user/x").unwrap(), None);
        memory.put("/user/x", b"x").unwrap();
        assert_eq!(memory.take("/user/x").unwrap().as_deref(), Some(&b"x"[..]));
        assert_eq!(memory.take("/user/x").unwrap(), None);
    }
}
