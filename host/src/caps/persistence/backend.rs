//! Where persistent actors' state is kept, as the persistence capability sees it: one trait,
//! [`Backend`], with an implementation per store (`local`: the host's redb file; `jetstream`:
//! streams and buckets that every node of a cluster reaches).
//!
//! The capability decides what a step writes ([`StepWrite`]) and when its effects may leave;
//! a backend decides how that write becomes durable as one unit, and who may write an id.
//!
//! Invariants every backend keeps (each implementation tests them):
//! - **One step, one unit.** A [`StepWrite`] is durable whole or not at all: its events,
//!   snapshot, reminders, outbox rows and the acknowledgements of what it consumed.
//! - **Commit before effects.** [`Backend::commit`] resolves `Ok` only once the write is
//!   durable; an `Err` means it may not be (the step's effects are then dropped).
//! - **Single writer.** After [`Backend::recover`] returned for an incarnation, a commit of an
//!   earlier writer of that id (on this host or any other) is refused.
//! - **Ids are never reused**: outbox and reminder ids handed out are unique for the store.

use std::future::Future;
use std::pin::Pin;

use prometheus_client::registry::Registry;

use super::journal::{Backlog, StepWrite, StoredSnapshot};
use crate::actor::step::Commit;
use crate::address::Address;
use crate::error::DatabaseError;
use crate::message::Receipt;
use crate::storage::CommitStats;

/// Why a store could not do what the capability asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StorageError {
    /// The host's database failed.
    #[error(transparent)]
    Database(#[from] DatabaseError),
    /// A live writer on another node holds the persistence id.
    #[error("persistence id {pid:?} is held by a live writer on node {node:?}")]
    Held {
        /// The id.
        pid: String,
        /// The node whose writer holds it.
        node: String,
    },
    /// A newer writer took the persistence id over: this one may no longer commit.
    #[error("persistence id {pid:?} has a newer writer: this commit is refused")]
    Fenced {
        /// The id.
        pid: String,
    },
    /// The remote store failed or could not be reached.
    #[error("the {store} store failed: {what}")]
    Remote {
        /// Which store.
        store: &'static str,
        /// What was being done.
        what: &'static str,
        /// Why.
        #[source]
        source: crate::error::BoxError,
    },
}

/// The durable state of one persistence id, as `recover` reads it.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    /// The latest snapshot.
    pub(crate) snapshot: Option<StoredSnapshot>,
    /// The latest event seq (0 if it never persisted one).
    pub(crate) seq: u64,
    /// Messages the id sent that no receiver has acknowledged, to send again now (a store whose
    /// outbox follows its writer; the local store parks its outbox at open instead).
    pub(crate) unsent: Vec<(u64, super::journal::OutboxRow)>,
    /// Reminders the id scheduled, to arm now (likewise).
    pub(crate) reminders: Vec<(u64, super::journal::ReminderRow)>,
}

/// Registers the steps a store committed, the one metric every store has.
pub(crate) fn register_steps(registry: &mut Registry, steps: u64) {
    registry.register(
        "commit_steps",
        "Durable steps committed (state, events and the messages they send)",
        prometheus_client::metrics::counter::ConstCounter::new(steps),
    );
}

/// A message to send again: its sender's incarnation, its receipt and its row.
#[derive(Debug)]
pub(crate) struct Resend {
    /// The writer that sent it.
    pub(crate) sender: Address,
    /// Its fresh receipt.
    pub(crate) receipt: Receipt,
    /// The message.
    pub(crate) row: super::journal::OutboxRow,
}

/// A future that resolves once everything handed over before it is durable.
pub(crate) type Flushed<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A store of persistent actors' state.
pub(crate) trait Backend: Send + Sync + 'static {
    /// A short name for logs and metrics (`redb`, `jetstream`).
    fn name(&self) -> &'static str;

    /// Resolves once the store can be used (connected), or with why it cannot.
    fn ready(&self) -> Pin<Box<dyn Future<Output = Result<(), StorageError>> + Send + '_>> {
        Box::pin(async { Ok(()) })
    }

    /// What waited unacknowledged when the store opened, for the capability to park by
    /// target path; taken once.
    fn backlog(&self) -> Result<Backlog, StorageError>;

    /// Makes `writer` the single writer of `pid` and reads its durable state.
    fn recover(&self, pid: &str, writer: &Address) -> Result<Recovered, StorageError>;

    /// Up to `max` events of `pid` after `after`, in order.
    fn events(
        &self,
        pid: &str,
        after: u64,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, StorageError>;

    /// Moves legacy state to `pid` if the store has any for it (see the local store); true if
    /// it moved something.
    fn adopt(&self, _pid: &str) -> Result<bool, StorageError> {
        Ok(false)
    }

    /// Whether `pid`'s writer on this host has not consumed the message of `receipt` yet.
    fn admit(&self, _pid: &str, _receipt: Receipt) -> bool {
        true
    }

    /// Allocates `n` consecutive outbox ids; returns the first.
    fn allocate_outbox(&self, n: u64) -> u64;

    /// Allocates a reminder id.
    fn allocate_reminder(&self) -> u64;

    /// Makes one step durable.
    fn commit(&self, write: StepWrite) -> Commit;

    /// Acknowledges a durable message before its receiver sees it (at-most-once receivers).
    fn acknowledge(&self, receipt: Receipt) -> Commit;

    /// Acknowledges a durable message that no persistent step consumed; needs no fsync of its
    /// own (at least once across a crash).
    fn settle(&self, receipt: Receipt);

    /// A durable message became a dead letter for good: dropped (settled) by default; a store
    /// that sends pending messages again keeps it.
    fn undeliverable(&self, receipt: Receipt) {
        self.settle(receipt);
    }

    /// A durable message leaves for another node: its receipt as a token that node's store
    /// takes over (`None`: the store cannot; the message is settled at hand-off).
    fn export(&self, _receipt: Receipt) -> Option<Vec<u8>> {
        None
    }

    /// The receipt here of a message whose receipt another node's store exported.
    fn import(&self, _token: &[u8]) -> Option<Receipt> {
        None
    }

    /// Messages of this host's writers sent longer than `after` ago and still not acknowledged,
    /// each with a fresh receipt, to send again: `(sender, target, message)` (a store whose
    /// outbox follows its writer; the local store acknowledges in the receiver's transaction
    /// and never needs to).
    fn overdue(&self, _after: std::time::Duration) -> Vec<Resend> {
        Vec::new()
    }

    /// Paths whose reminders are due while no writer of their id is alive anywhere, to wake (a
    /// store shared by nodes; a local store's reminders die and come back with its host).
    fn dormant(&self) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
        Box::pin(async { Vec::new() })
    }

    /// `writer`'s incarnation, the writer of `pid`, has ended.
    fn released(&self, _pid: &str, _writer: &Address) {}

    /// Stores the image of the actor at `path` (passivated as an image) until it is taken,
    /// replacing any before it.
    fn put_image(&self, path: &str, image: &[u8]) -> Result<(), StorageError>;

    /// Takes (reads and removes) the image stored for `path`, if any.
    fn take_image(&self, path: &str) -> Result<Option<Vec<u8>>, StorageError>;

    /// Resolves once everything handed over is durable.
    fn flush(&self) -> Flushed<'_>;

    /// Writes what is queued and closes the store.
    fn close(&self);

    /// The commit counters.
    fn stats(&self) -> CommitStats;

    /// Registers the store's metrics.
    fn metrics(&self, registry: &mut Registry);
}
