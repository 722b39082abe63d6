//! The local store: the host's redb file (see `journal` for its tables) and the group
//! committer that writes it.
//!
//! Why one step is one unit here: a [`StepWrite`] is applied inside one redb write
//! transaction, which the committer commits with full durability before it answers; redb's
//! commit is atomic (a crash leaves the last committed state), so the step's changes, its
//! outbox rows and the deletion of the rows it consumed appear together or not at all.
//!
//! Invariants:
//! - Everything [`Backend`] promises; the single writer is the host itself (the capability
//!   refuses an id another live incarnation holds), since the file has one host.
//! - The backlog is read once, when the store opens.

use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::registry::{Registry, Unit};

use super::backend::{Backend, Flushed, Recovered, StorageError};
use super::journal::{Ack, Backlog, Journal, StepWrite};
use crate::actor::step::Commit;
use crate::address::Address;
use crate::error::DatabaseError;
use crate::message::Receipt;
use crate::storage::committer::{CommitStats, Committer};
use crate::storage::database::Database;

/// The host's redb file as a store.
pub(crate) struct Local {
    /// The file, for the images of passivated actors (table `images`).
    db: Arc<Database>,
    journal: Arc<Journal>,
    committer: Arc<Committer>,
    /// What the file held unacknowledged at open, until taken.
    backlog: Mutex<Option<Backlog>>,
}

/// A commit of a step that failed.
#[derive(Debug, thiserror::Error)]
#[error("persistence commit failed")]
struct CommitFailed(#[source] Arc<DatabaseError>);

impl Local {
    /// Opens the store in `db`; at most `group_commit` steps share a transaction.
    pub(crate) fn open(db: &Arc<Database>, group_commit: usize) -> Result<Local, DatabaseError> {
        let journal = Arc::new(Journal::open(db.clone())?);
        let backlog = journal.backlog()?;
        let finish = {
            let journal = journal.clone();
            Box::new(move |txn: &redb::WriteTransaction| journal.record_ids(txn))
        };
        let committer = Arc::new(Committer::start(db.clone(), group_commit, finish));
        Ok(Local {
            db: db.clone(),
            journal,
            committer,
            backlog: Mutex::new(Some(backlog)),
        })
    }

    fn committed(&self, write: Box<dyn crate::storage::committer::Write>) -> Commit {
        let committer = self.committer.clone();
        Box::pin(async move {
            committer
                .commit(write)
                .await
                .map_err(|e| Box::new(CommitFailed(e)) as crate::error::BoxError)
        })
    }
}

impl Backend for Local {
    fn name(&self) -> &'static str {
        "redb"
    }

    fn put_image(&self, path: &str, image: &[u8]) -> Result<(), StorageError> {
        Ok(super::images::put_redb(&self.db, path, image)?)
    }

    fn take_image(&self, path: &str) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(super::images::take_redb(&self.db, path)?)
    }

    fn backlog(&self) -> Result<Backlog, StorageError> {
        Ok(self
            .backlog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_default())
    }

    fn recover(&self, pid: &str, _writer: &Address) -> Result<Recovered, StorageError> {
        let snapshot = self.journal.snapshot(pid)?;
        let seq = self.journal.last_seq(pid)?;
        Ok(Recovered {
            seq: seq.max(snapshot.as_ref().map_or(0, |s| s.seq)),
            snapshot,
            ..Recovered::default()
        })
    }

    fn events(
        &self,
        pid: &str,
        after: u64,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, StorageError> {
        Ok(self.journal.events(pid, after, max)?)
    }

    fn adopt(&self, pid: &str) -> Result<bool, StorageError> {
        Ok(self.journal.adopt(pid)?)
    }

    fn allocate_outbox(&self, n: u64) -> u64 {
        self.journal.allocate_outbox(n)
    }

    fn allocate_reminder(&self) -> u64 {
        self.journal.allocate_reminder()
    }

    fn commit(&self, write: StepWrite) -> Commit {
        self.committed(Box::new(write))
    }

    fn acknowledge(&self, receipt: Receipt) -> Commit {
        self.committed(Box::new(Ack(receipt)))
    }

    fn settle(&self, receipt: Receipt) {
        self.committer.lazy(Box::new(Ack(receipt)));
    }

    fn flush(&self) -> Flushed<'_> {
        Box::pin(self.committer.flush())
    }

    fn close(&self) {
        self.committer.close();
    }

    fn stats(&self) -> CommitStats {
        self.committer.stats()
    }

    fn metrics(&self, registry: &mut Registry) {
        let stats = self.committer.stats();
        super::backend::register_steps(registry, stats.steps);
        registry.register(
            "fsyncs",
            "Write transactions made durable, one fsync each (group commit folds steps into one)",
            ConstCounter::new(stats.transactions),
        );
        registry.register_with_unit(
            "commit_latency",
            "Time from a step handing its write over to its write being durable",
            Unit::Seconds,
            self.committer.latency(),
        );
    }
}
