//! Durable storage: the redb file and the group committer that writes to it, and the JetStream
//! log (records, checkpoints and writer leases per persistence id) a cluster stores in instead.
//!
//! Nothing here knows what is stored: the persistence capability and the module registry own
//! their tables and hand the committer their writes.

pub(crate) mod committer;
pub(crate) mod database;
pub(crate) mod jetstream;

pub use committer::CommitStats;
pub use database::{Database, SCHEMA_VERSION};

/// A fresh directory for one unit test's database files, removed when dropped.
#[cfg(test)]
pub(crate) struct Scratch(pub(crate) std::path::PathBuf);

#[cfg(test)]
impl Scratch {
    /// Creates `<tmp>/mote-<label>-<pid>-<nanos>`.
    pub(crate) fn new(label: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("mote-{label}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }

    /// A database opened in it.
    pub(crate) fn database(&self, name: &str) -> std::sync::Arc<Database> {
        std::sync::Arc::new(Database::open(self.0.join(name)).expect("a fresh database"))
    }
}

#[cfg(test)]
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
