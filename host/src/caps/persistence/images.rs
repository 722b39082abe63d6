//! Where the images of actors passivated as images wait for their next message: the host's
//! redb file (table `images`, path to image bytes), or memory on a host without a database.
//!
//! Invariants:
//! - An image is stored before its actor gives up its path, and taken (read and removed in one
//!   transaction) when the path is activated again: at most one activation gets it.
//! - Images are bytes to this store: they are checked when decoded, never here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use redb::TableDefinition;

use crate::storage::database::{Database, DatabaseError, failed};

const IMAGES: TableDefinition<&str, &[u8]> = TableDefinition::new("images");

/// The stored images, by path.
#[derive(Default)]
pub(crate) struct Images {
    database: Option<Arc<Database>>,
    memory: Mutex<HashMap<String, Vec<u8>>>,
}

impl Images {
    /// Images kept in `database`, or in memory without one.
    pub(crate) fn new(database: Option<Arc<Database>>) -> Self {
        Images {
            database,
            memory: Mutex::default(),
        }
    }

    /// Stores the image of the actor at `path`, durably if the host has a database.
    pub(crate) fn put(&self, path: &str, image: &[u8]) -> Result<(), DatabaseError> {
        match &self.database {
            Some(db) => db.write_with(|txn| {
                let mut table = txn.open_table(IMAGES).map_err(failed)?;
                table.insert(path, image).map_err(failed)?;
                Ok(())
            }),
            None => {
                self.lock().insert(path.to_owned(), image.to_vec());
                Ok(())
            }
        }
    }

    /// Takes the image stored for `path`, if any (a read first: an activation with none
    /// costs no write).
    pub(crate) fn take(&self, path: &str) -> Result<Option<Vec<u8>>, DatabaseError> {
        match &self.database {
            Some(db) => {
                if !Self::stored(db, path)? {
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
            None => Ok(self.lock().remove(path)),
        }
    }

    /// The paths with a stored image, sorted.
    #[cfg(test)]
    pub(crate) fn paths(&self) -> Result<Vec<String>, DatabaseError> {
        let mut paths: Vec<String> = match &self.database {
            Some(db) => {
                use redb::ReadableTable;
                let txn = db.read()?;
                match txn.open_table(IMAGES) {
                    Ok(table) => table
                        .iter()
                        .map_err(failed)?
                        .map(|row| row.map(|(k, _)| k.value().to_owned()).map_err(failed))
                        .collect::<Result<_, _>>()?,
                    Err(redb::TableError::TableDoesNotExist(_)) => Vec::new(),
                    Err(e) => return Err(failed(e)),
                }
            }
            None => self.lock().keys().cloned().collect(),
        };
        paths.sort();
        Ok(paths)
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<u8>>> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Scratch;

    #[test]
    fn an_image_is_taken_once_and_survives_reopening_the_database() {
        let scratch = Scratch::new("images");
        let images = Images::new(Some(scratch.database("m.redb")));
        images.put("/user/c/1", b"one").unwrap();
        images.put("/user/c/2", b"two").unwrap();
        assert_eq!(images.paths().unwrap(), ["/user/c/1", "/user/c/2"]);
        drop(images);
        let images = Images::new(Some(scratch.database("m.redb")));
        assert_eq!(
            images.take("/user/c/1").unwrap().as_deref(),
            Some(&b"one"[..])
        );
        assert_eq!(images.take("/user/c/1").unwrap(), None);
        assert_eq!(images.paths().unwrap(), ["/user/c/2"]);

        let memory = Images::default();
        assert_eq!(memory.paths().unwrap(), Vec::<String>::new());
        memory.put("/user/x", b"x").unwrap();
        assert_eq!(memory.take("/user/x").unwrap().as_deref(), Some(&b"x"[..]));
        assert_eq!(memory.take("/user/x").unwrap(), None);
    }
}
