//! Group commit: one thread owns every write its users hand it and folds all the writes that are
//! waiting into one redb write transaction, and so into one fsync.
//!
//! A user (the persistence capability) hands over a durable write and waits for the answer before
//! it lets anything depend on it: commit before effects. While one transaction is being written,
//! further writes queue up and become the next transaction, so the more actors commit at once
//! the more of them share an fsync. `max_batch = 1` gives one transaction per write (the baseline
//! the benchmark compares against).
//!
//! Invariants:
//! - A durable write is answered `Ok` only after the transaction holding it is committed with
//!   full durability; if that transaction fails, every write in it is answered with the error.
//! - Writes are applied in the order they were handed over: lazy writes of a batch first, then
//!   its durable writes, then the `finish` step of the user.
//! - Lazy writes need no fsync of their own: alone they commit without one, and the next durable
//!   commit makes them durable too (losing them in a crash only means doing them again).
//! - A flush is answered after everything handed over before it is durable.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use prometheus_client::metrics::histogram::Histogram;
use redb::{Durability, WriteTransaction};
use tokio::sync::oneshot;

use super::database::{Database, DatabaseError, failed};

/// A change to the database that the committer applies inside its transaction.
pub(crate) trait Write: Send + 'static {
    /// Applies this change.
    fn apply(&self, txn: &WriteTransaction) -> Result<(), DatabaseError>;
}

/// What runs once at the end of every transaction (a user records its id counters, say).
pub(crate) type Finish = Box<dyn Fn(&WriteTransaction) -> Result<(), DatabaseError> + Send>;

/// The outcome of a durable write.
pub(crate) type Committed = Result<(), Arc<DatabaseError>>;

enum Job {
    /// A write, when it was handed over, and who waits for it.
    Durable(Box<dyn Write>, Instant, oneshot::Sender<Committed>),
    Lazy(Box<dyn Write>),
    Flush(oneshot::Sender<()>),
}

/// Counters of the committer's work.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CommitStats {
    /// Steps committed.
    pub steps: u64,
    /// Write transactions with at least one step (each one fsync).
    pub transactions: u64,
}

/// The handle to the committer thread.
pub(crate) struct Committer {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    counters: Arc<Counters>,
}

struct Counters {
    writes: AtomicU64,
    transactions: AtomicU64,
    /// Seconds from handing a durable write over to its answer.
    latency: Histogram,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            writes: AtomicU64::default(),
            transactions: AtomicU64::default(),
            latency: Histogram::new(LATENCY_BUCKETS),
        }
    }
}

/// The upper bounds of the commit latency histogram's buckets, in seconds: 100 µs to 2.5 s.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

impl Committer {
    /// Starts the committer thread for `db`; at most `max_batch` durable writes share a
    /// transaction, and `finish` ends each transaction.
    pub(crate) fn start(db: Arc<Database>, max_batch: usize, finish: Finish) -> Committer {
        let (tx, rx) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        let counted = counters.clone();
        let thread = std::thread::Builder::new()
            .name("mote-committer".into())
            .spawn(move || run(&db, &rx, max_batch.max(1), &finish, &counted))
            .ok();
        if thread.is_none() {
            tracing::error!("could not start the committer thread; durable writes will fail");
        }
        Committer {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(thread),
            counters,
        }
    }

    fn send(&self, job: Job) -> bool {
        self.tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|tx| tx.send(job).is_ok())
    }

    /// Commits a durable write; resolves once it is durable (or failed).
    pub(crate) async fn commit(&self, write: Box<dyn Write>) -> Committed {
        let (reply, done) = oneshot::channel();
        if !self.send(Job::Durable(write, Instant::now(), reply)) {
            return Err(Arc::new(DatabaseError::Closed));
        }
        done.await
            .unwrap_or_else(|_| Err(Arc::new(DatabaseError::Closed)))
    }

    /// Hands over a write that needs no fsync of its own.
    pub(crate) fn lazy(&self, write: Box<dyn Write>) {
        self.send(Job::Lazy(write));
    }

    /// Waits until everything handed over before is durable.
    pub(crate) async fn flush(&self) {
        let (reply, done) = oneshot::channel();
        if self.send(Job::Flush(reply)) {
            let _ = done.await;
        }
    }

    /// The work done so far.
    pub(crate) fn stats(&self) -> CommitStats {
        CommitStats {
            steps: self.counters.writes.load(Ordering::Relaxed),
            transactions: self.counters.transactions.load(Ordering::Relaxed),
        }
    }

    /// How long durable writes waited for their answer, in seconds (a handle on the live
    /// histogram).
    pub(crate) fn latency(&self) -> Histogram {
        self.counters.latency.clone()
    }

    /// Writes what is queued and stops the thread.
    pub(crate) fn close(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take()
            && thread.join().is_err()
        {
            tracing::error!("the committer thread panicked");
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.close();
    }
}

fn run(
    db: &Database,
    rx: &mpsc::Receiver<Job>,
    max_batch: usize,
    finish: &Finish,
    counters: &Counters,
) {
    while let Ok(first) = rx.recv() {
        let mut durable = Vec::new();
        let mut lazy = Vec::new();
        let mut flushes = Vec::new();
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Durable(write, at, reply) => durable.push((write, at, reply)),
                Job::Lazy(write) => lazy.push(write),
                Job::Flush(reply) => flushes.push(reply),
            }
            if durable.len() < max_batch {
                next = rx.try_recv().ok();
            }
        }
        let result = write(db, &durable, &lazy, !flushes.is_empty(), finish).map_err(Arc::new);
        match &result {
            Err(e) => {
                tracing::error!(error = %crate::error::chain(e.as_ref()), writes = durable.len(), "commit failed")
            }
            Ok(()) if !durable.is_empty() => {
                counters
                    .writes
                    .fetch_add(durable.len() as u64, Ordering::Relaxed);
                counters.transactions.fetch_add(1, Ordering::Relaxed);
            }
            Ok(()) => {}
        }
        for (_, at, reply) in durable {
            counters.latency.observe(at.elapsed().as_secs_f64());
            let _ = reply.send(result.clone());
        }
        for reply in flushes {
            let _ = reply.send(());
        }
    }
}

/// Writes one transaction. It is durable (fsync) if it holds a durable write or a flush asked
/// for it.
fn write(
    db: &Database,
    durable: &[(Box<dyn Write>, Instant, oneshot::Sender<Committed>)],
    lazy: &[Box<dyn Write>],
    flush: bool,
    finish: &Finish,
) -> Result<(), DatabaseError> {
    if durable.is_empty() && lazy.is_empty() && !flush {
        return Ok(());
    }
    let mut txn = db.write()?;
    if durable.is_empty() && !flush {
        txn.set_durability(Durability::None).map_err(failed)?;
    }
    for write in lazy {
        write.apply(&txn)?;
    }
    for (write, _, _) in durable {
        write.apply(&txn)?;
    }
    finish(&txn)?;
    txn.commit().map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Scratch;
    use redb::TableDefinition;

    const LOG: TableDefinition<u64, u64> = TableDefinition::new("log");

    /// Appends `(key, value)` to the test table.
    struct Put(u64, u64);

    impl Write for Put {
        fn apply(&self, txn: &WriteTransaction) -> Result<(), DatabaseError> {
            let mut t = txn.open_table(LOG).map_err(failed)?;
            t.insert(self.0, self.1).map_err(failed)?;
            Ok(())
        }
    }

    /// A write that fails.
    struct Broken;

    impl Write for Broken {
        fn apply(&self, _txn: &WriteTransaction) -> Result<(), DatabaseError> {
            Err(DatabaseError::Closed)
        }
    }

    fn database() -> (Arc<Database>, Scratch) {
        let scratch = Scratch::new("committer");
        (scratch.database("c.redb"), scratch)
    }

    fn read(db: &Database, key: u64) -> Option<u64> {
        let txn = db.read().unwrap();
        let table = txn.open_table(LOG).ok()?;
        table.get(key).unwrap().map(|v| v.value())
    }

    fn no_finish() -> Finish {
        Box::new(|_| Ok(()))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_durable_write_is_readable_once_it_is_answered() {
        let (db, _scratch) = database();
        let committer = Committer::start(db.clone(), 16, no_finish());
        committer.commit(Box::new(Put(1, 10))).await.unwrap();
        assert_eq!(read(&db, 1), Some(10));
        assert_eq!(committer.stats().steps, 1);
        committer.close();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_share_transactions_and_every_one_is_answered() {
        let (db, _scratch) = database();
        let committer = Arc::new(Committer::start(db.clone(), 1024, no_finish()));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..200u64 {
            let committer = committer.clone();
            tasks.spawn(async move { committer.commit(Box::new(Put(i, i * 2))).await });
        }
        while let Some(done) = tasks.join_next().await {
            done.unwrap().unwrap();
        }
        for i in 0..200u64 {
            assert_eq!(read(&db, i), Some(i * 2));
        }
        let stats = committer.stats();
        assert_eq!(stats.steps, 200);
        assert!(stats.transactions >= 1 && stats.transactions <= 200);
        committer.close();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_transaction_fails_every_write_in_it_and_keeps_none() {
        let (db, _scratch) = database();
        // One write per transaction, so the broken one fails alone.
        let committer = Committer::start(db.clone(), 1, no_finish());
        assert!(committer.commit(Box::new(Broken)).await.is_err());
        committer.commit(Box::new(Put(2, 20))).await.unwrap();
        assert_eq!(read(&db, 2), Some(20));
        committer.close();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lazy_writes_land_by_the_next_flush_and_finish_runs_per_transaction() {
        let (db, _scratch) = database();
        let runs = Arc::new(AtomicU64::new(0));
        let counted = runs.clone();
        let finish: Finish = Box::new(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
            Ok(())
        });
        let committer = Committer::start(db.clone(), 16, finish);
        committer.lazy(Box::new(Put(3, 30)));
        committer.flush().await;
        assert_eq!(read(&db, 3), Some(30));
        assert!(runs.load(Ordering::Relaxed) >= 1);
        assert_eq!(committer.stats().steps, 0, "a lazy write is not a step");
        committer.close();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_committer_refuses_writes() {
        let (db, _scratch) = database();
        let committer = Committer::start(db, 16, no_finish());
        committer.close();
        let refused = committer.commit(Box::new(Put(4, 40))).await;
        assert!(matches!(refused, Err(e) if matches!(*e, DatabaseError::Closed)));
    }
}
