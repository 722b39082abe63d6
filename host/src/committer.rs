//! Group commit: one thread owns every write to the store and folds the steps of all persistent
//! actors that are waiting into one redb write transaction (and so one fsync).
//!
//! A persistent actor's cell sends its step (state changes, outbox messages, acknowledgements)
//! and waits for the answer before it releases the step's effects: commit before effects. While
//! one transaction is being written, further steps queue up and become the next transaction, so
//! the more actors commit at once the more steps share an fsync. `max_batch = 1` gives one
//! transaction per step (the baseline the benchmark compares against).
//!
//! Acknowledgements from receivers that are not persistent (and dead letters) need no durability
//! of their own: they ride along with the next transaction, or go alone without an fsync.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use redb::{Durability, ReadableTable, WriteTransaction};
use tokio::sync::oneshot;

use crate::message::Receipt;
use crate::store::{
    EVENTS, META, NEXT_OUTBOX, NEXT_REMINDER, OUTBOX, OutboxRow, REMINDERS, ReminderRow, SEQUENCES,
    SNAPSHOTS, Store, StoreError, unix_ms,
};

/// One change to a persistence id's durable state, in the order the actor made it.
#[derive(Debug)]
pub(crate) enum Op {
    Snapshot { seq: u64, state: Vec<u8> },
    Event { seq: u64, data: Vec<u8> },
    DeleteEvents { through: u64 },
    DeleteState,
    Remind { id: u64, row: ReminderRow },
    CancelReminder { id: u64 },
}

/// What one step of one persistent actor writes.
#[derive(Debug, Default)]
pub(crate) struct StepWrite {
    pub(crate) pid: String,
    pub(crate) ops: Vec<Op>,
    /// The latest event seq after this step, when it changed.
    pub(crate) last_seq: Option<u64>,
    /// Messages sent in this step, by outbox id.
    pub(crate) outbox: Vec<(u64, OutboxRow)>,
    /// Durable messages this step consumed.
    pub(crate) acks: Vec<Receipt>,
}

impl StepWrite {
    /// True if committing this step would change nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.outbox.is_empty() && self.acks.is_empty()
    }
}

enum Job {
    Step(StepWrite, oneshot::Sender<Result<(), StoreError>>),
    Ack(Receipt),
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
    steps: Arc<AtomicU64>,
    transactions: Arc<AtomicU64>,
}

impl Committer {
    /// Starts the committer thread for `store`; at most `max_batch` steps share a transaction.
    pub(crate) fn start(store: Arc<Store>, max_batch: usize) -> Committer {
        let (tx, rx) = mpsc::channel();
        let steps = Arc::new(AtomicU64::new(0));
        let transactions = Arc::new(AtomicU64::new(0));
        let counters = (steps.clone(), transactions.clone());
        let thread = std::thread::Builder::new()
            .name("mote-committer".into())
            .spawn(move || run(&store, &rx, max_batch.max(1), &counters))
            .ok();
        if thread.is_none() {
            tracing::error!("could not start the committer thread; persistent steps will fail");
        }
        Committer {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(thread),
            steps,
            transactions,
        }
    }

    fn send(&self, job: Job) -> bool {
        self.tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|tx| tx.send(job).is_ok())
    }

    /// Commits a step; resolves once it is durable (or failed).
    pub(crate) async fn commit(&self, step: StepWrite) -> Result<(), StoreError> {
        let (reply, done) = oneshot::channel();
        if !self.send(Job::Step(step, reply)) {
            return Err(StoreError::Closed);
        }
        done.await.unwrap_or(Err(StoreError::Closed))
    }

    /// Acknowledges a durable message whose receiver keeps no durable state.
    pub(crate) fn ack(&self, receipt: Receipt) {
        self.send(Job::Ack(receipt));
    }

    /// Waits until everything sent before has been written.
    pub(crate) async fn flush(&self) {
        let (reply, done) = oneshot::channel();
        if self.send(Job::Flush(reply)) {
            let _ = done.await;
        }
    }

    /// The work done so far.
    pub(crate) fn stats(&self) -> CommitStats {
        CommitStats {
            steps: self.steps.load(Ordering::Relaxed),
            transactions: self.transactions.load(Ordering::Relaxed),
        }
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
    store: &Store,
    rx: &mpsc::Receiver<Job>,
    max_batch: usize,
    (steps_done, transactions): &(Arc<AtomicU64>, Arc<AtomicU64>),
) {
    while let Ok(first) = rx.recv() {
        let mut steps = Vec::new();
        let mut acks = Vec::new();
        let mut flushes = Vec::new();
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Step(step, reply) => steps.push((step, reply)),
                Job::Ack(receipt) => acks.push(receipt),
                Job::Flush(reply) => flushes.push(reply),
            }
            if steps.len() < max_batch {
                next = rx.try_recv().ok();
            }
        }
        let result = write(store, &steps, &acks, !flushes.is_empty());
        if let Err(e) = &result {
            tracing::error!(error = %e, steps = steps.len(), "commit failed");
        } else if !steps.is_empty() {
            steps_done.fetch_add(steps.len() as u64, Ordering::Relaxed);
            transactions.fetch_add(1, Ordering::Relaxed);
        }
        for (_, reply) in steps {
            let _ = reply.send(result.as_ref().map(|_| ()).map_err(|e| match e {
                StoreError::Storage(s) => StoreError::Storage(s.clone()),
                other => StoreError::Storage(other.to_string()),
            }));
        }
        for reply in flushes {
            let _ = reply.send(());
        }
    }
}

/// Writes one transaction. It is durable (fsync) if it holds a step or a flush asked for it;
/// acknowledgements alone need no fsync (losing them only means a redelivery), and the next
/// durable commit makes them durable too.
fn write(
    store: &Store,
    steps: &[(StepWrite, oneshot::Sender<Result<(), StoreError>>)],
    acks: &[Receipt],
    flush: bool,
) -> Result<(), StoreError> {
    if steps.is_empty() && acks.is_empty() && !flush {
        return Ok(());
    }
    let mut txn = store.write()?;
    if steps.is_empty() && !flush {
        txn.set_durability(Durability::None)
            .map_err(StoreError::storage)?;
    }
    apply(&txn, store, steps.iter().map(|(s, _)| s), acks)?;
    txn.commit().map_err(StoreError::storage)
}

fn apply<'a>(
    txn: &WriteTransaction,
    store: &Store,
    steps: impl Iterator<Item = &'a StepWrite>,
    acks: &[Receipt],
) -> Result<(), StoreError> {
    let mut snapshots = txn.open_table(SNAPSHOTS).map_err(StoreError::storage)?;
    let mut sequences = txn.open_table(SEQUENCES).map_err(StoreError::storage)?;
    let mut events = txn.open_table(EVENTS).map_err(StoreError::storage)?;
    let mut outbox = txn.open_table(OUTBOX).map_err(StoreError::storage)?;
    let mut reminders = txn.open_table(REMINDERS).map_err(StoreError::storage)?;
    let mut meta = txn.open_table(META).map_err(StoreError::storage)?;
    let now = unix_ms();
    for receipt in acks {
        ack(&mut outbox, &mut reminders, receipt, now)?;
    }
    for step in steps {
        for receipt in &step.acks {
            ack(&mut outbox, &mut reminders, receipt, now)?;
        }
        let pid = step.pid.as_str();
        for op in &step.ops {
            match op {
                Op::Snapshot { seq, state } => {
                    let mut bytes = Vec::with_capacity(8 + state.len());
                    bytes.extend_from_slice(&seq.to_le_bytes());
                    bytes.extend_from_slice(state);
                    snapshots
                        .insert(pid, bytes.as_slice())
                        .map_err(StoreError::storage)?;
                }
                Op::Event { seq, data } => {
                    events
                        .insert((pid, *seq), data.as_slice())
                        .map_err(StoreError::storage)?;
                }
                Op::DeleteEvents { through } => {
                    events
                        .retain_in((pid, 0)..=(pid, *through), |_, _| false)
                        .map_err(StoreError::storage)?;
                }
                Op::DeleteState => {
                    snapshots.remove(pid).map_err(StoreError::storage)?;
                    sequences.remove(pid).map_err(StoreError::storage)?;
                    events
                        .retain_in((pid, 0)..=(pid, u64::MAX), |_, _| false)
                        .map_err(StoreError::storage)?;
                    reminders
                        .retain(|_, v| {
                            postcard::from_bytes::<ReminderRow>(v).is_ok_and(|r| r.owner != pid)
                        })
                        .map_err(StoreError::storage)?;
                }
                Op::Remind { id, row } => {
                    let bytes = postcard::to_allocvec(row).map_err(StoreError::storage)?;
                    reminders
                        .insert(*id, bytes.as_slice())
                        .map_err(StoreError::storage)?;
                }
                Op::CancelReminder { id } => {
                    reminders.remove(*id).map_err(StoreError::storage)?;
                }
            }
        }
        if let Some(seq) = step.last_seq {
            sequences.insert(pid, seq).map_err(StoreError::storage)?;
        }
        for (id, row) in &step.outbox {
            let bytes = postcard::to_allocvec(row).map_err(StoreError::storage)?;
            outbox
                .insert(*id, bytes.as_slice())
                .map_err(StoreError::storage)?;
        }
    }
    meta.insert(NEXT_OUTBOX, &store.outbox_mark().to_le_bytes()[..])
        .map_err(StoreError::storage)?;
    meta.insert(NEXT_REMINDER, &store.reminder_mark().to_le_bytes()[..])
        .map_err(StoreError::storage)?;
    Ok(())
}

/// Deletes an acknowledged outbox row; moves a periodic reminder to its next due time or
/// deletes a one-shot one.
fn ack(
    outbox: &mut redb::Table<u64, &[u8]>,
    reminders: &mut redb::Table<u64, &[u8]>,
    receipt: &Receipt,
    now: u64,
) -> Result<(), StoreError> {
    match *receipt {
        Receipt::Outbox(id) => {
            outbox.remove(id).map_err(StoreError::storage)?;
        }
        Receipt::Reminder(id) => {
            let row = reminders
                .get(id)
                .map_err(StoreError::storage)?
                .and_then(|v| postcard::from_bytes::<ReminderRow>(v.value()).ok());
            match row {
                Some(mut row) if row.period_ms.is_some() => {
                    row.due_ms = now.saturating_add(row.period_ms.unwrap_or(0));
                    let bytes = postcard::to_allocvec(&row).map_err(StoreError::storage)?;
                    reminders
                        .insert(id, bytes.as_slice())
                        .map_err(StoreError::storage)?;
                }
                Some(_) => {
                    reminders.remove(id).map_err(StoreError::storage)?;
                }
                None => {}
            }
        }
    }
    Ok(())
}
