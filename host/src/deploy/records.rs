//! The module registry's table in the database, so a restarted host has its modules again.
//!
//! | table     | key                    | value                               |
//! |-----------|------------------------|-------------------------------------|
//! | `modules` | `v/<name>/<version>`   | a [`ModuleRow`] (postcard)          |
//! | `modules` | `c/<name>`             | the current version (UTF-8)         |

use std::collections::HashMap;

use redb::{ReadTransaction, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::storage::database::{Database, DatabaseError, decode, encode, failed, readable};

const MODULES: TableDefinition<&str, &[u8]> = TableDefinition::new("modules");

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

fn version_key(name: &str, version: &str) -> String {
    format!("v/{name}/{version}")
}

fn current_key(name: &str) -> String {
    format!("c/{name}")
}

/// Creates the table if it is missing.
pub(crate) fn open(db: &Database) -> Result<(), DatabaseError> {
    db.write_with(|txn| {
        txn.open_table(MODULES).map_err(failed)?;
        Ok(())
    })
}

/// Records a deployed module version.
pub(crate) fn put(db: &Database, row: &ModuleRow) -> Result<(), DatabaseError> {
    db.write_with(|txn| {
        let mut table = txn.open_table(MODULES).map_err(failed)?;
        table
            .insert(
                version_key(&row.name, &row.version).as_str(),
                encode(row).as_slice(),
            )
            .map_err(failed)?;
        Ok(())
    })
}

/// Records which version of `name` new actors get.
pub(crate) fn set_current(db: &Database, name: &str, version: &str) -> Result<(), DatabaseError> {
    db.write_with(|txn| {
        let mut table = txn.open_table(MODULES).map_err(failed)?;
        table
            .insert(current_key(name).as_str(), version.as_bytes())
            .map_err(failed)?;
        Ok(())
    })
}

/// Forgets a module version, or all versions of `name`; records the new current version.
pub(crate) fn remove(
    db: &Database,
    name: &str,
    version: Option<&str>,
    current: Option<&str>,
) -> Result<(), DatabaseError> {
    db.write_with(|txn| {
        let mut table = txn.open_table(MODULES).map_err(failed)?;
        match version {
            Some(v) => {
                table
                    .remove(version_key(name, v).as_str())
                    .map_err(failed)?;
            }
            None => {
                let prefix = format!("v/{name}/");
                table
                    .retain(|k, _| !k.starts_with(&prefix))
                    .map_err(failed)?;
            }
        }
        match current {
            Some(current) => {
                table
                    .insert(current_key(name).as_str(), current.as_bytes())
                    .map_err(failed)?;
            }
            None => {
                table.remove(current_key(name).as_str()).map_err(failed)?;
            }
        }
        Ok(())
    })
}

/// The recorded version `version` of `name`, as `read` sees it.
pub(crate) fn read_row(
    read: &ReadTransaction,
    name: &str,
    version: &str,
) -> Result<Option<ModuleRow>, DatabaseError> {
    let Some(table) = readable(read, MODULES)? else {
        return Ok(None);
    };
    match table
        .get(version_key(name, version).as_str())
        .map_err(failed)?
    {
        Some(value) => Ok(Some(decode("modules", value.value())?)),
        None => Ok(None),
    }
}

/// The recorded current version of `name`, as `read` sees it.
pub(crate) fn read_current(
    read: &ReadTransaction,
    name: &str,
) -> Result<Option<String>, DatabaseError> {
    let Some(table) = readable(read, MODULES)? else {
        return Ok(None);
    };
    Ok(table
        .get(current_key(name).as_str())
        .map_err(failed)?
        .map(|v| String::from_utf8_lossy(v.value()).into_owned()))
}

/// Every recorded module version, and the current version of each name.
pub(crate) fn load(
    db: &Database,
) -> Result<(Vec<ModuleRow>, HashMap<String, String>), DatabaseError> {
    let read = db.read()?;
    let table = read.open_table(MODULES).map_err(failed)?;
    let mut rows = Vec::new();
    let mut current = HashMap::new();
    for entry in table.iter().map_err(failed)? {
        let (key, value) = entry.map_err(failed)?;
        let key = key.value();
        if let Some(name) = key.strip_prefix("c/") {
            current.insert(
                name.to_owned(),
                String::from_utf8_lossy(value.value()).into_owned(),
            );
        } else if key.starts_with("v/") {
            rows.push(decode("modules", value.value())?);
        }
    }
    Ok((rows, current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_current_ones_survive_a_reopen_and_removal_forgets_them() {
        let scratch = crate::storage::Scratch::new("records");
        let path = scratch.0.join("m.redb");
        let row = |version: &str| ModuleRow {
            name: "m".to_owned(),
            version: version.to_owned(),
            hash: format!("h{version}"),
            grants: Vec::new(),
            bytes: vec![1, 2, 3],
        };
        {
            let db = Database::open(&path).unwrap();
            open(&db).unwrap();
            put(&db, &row("1")).unwrap();
            put(&db, &row("2")).unwrap();
            set_current(&db, "m", "2").unwrap();
        }
        let db = Database::open(&path).unwrap();
        open(&db).unwrap();
        let (rows, current) = load(&db).unwrap();
        assert_eq!(rows, [row("1"), row("2")]);
        assert_eq!(current.get("m").map(String::as_str), Some("2"));
        remove(&db, "m", Some("2"), Some("1")).unwrap();
        let (rows, current) = load(&db).unwrap();
        assert_eq!(rows, [row("1")]);
        assert_eq!(current.get("m").map(String::as_str), Some("1"));
        remove(&db, "m", None, None).unwrap();
        let (rows, current) = load(&db).unwrap();
        assert!(rows.is_empty() && current.is_empty());
    }
}
