//! The JetStream store: persistent actors' state in streams and buckets that every node of a
//! cluster reaches, so a durable actor or entity recovers on any node with its state.
//!
//! ```text
//! stream MOTE_<ns>_STEPS_<k>      one per shard; subject mote.<ns>.steps.<k>.<pid>: one record
//!                                  per committed step (events, snapshot, reminders, numbered
//!                                  sends, what it consumed, its sends acknowledged)
//! subject ...<pid>.acks            acknowledgements of <pid>'s sends from other nodes
//! KV mote-<ns>-checkpoints         per pid: the state folded up to a record with a snapshot
//! KV mote-<ns>-writers             per pid: the single writer's lease (its revision: the fence)
//! KV mote-<ns>-alive               per node, with a TTL: the node's liveness, renewed
//! ```
//!
//! **Why one step is one unit.** A step is one [`Record`], published as one JetStream message:
//! JetStream stores a message whole or not at all, so the step's events, snapshot, reminders,
//! numbered sends and consumed messages are durable together. The writer answers the step only
//! after the server's acknowledgement, which comes once the message is stored (on a
//! replicated stream, once a quorum of replicas has it). A publish whose acknowledgement is lost
//! is retried with the same `Nats-Msg-Id`, which the stream's duplicate window turns into the
//! original.
//!
//! **Single writer.** A writer must hold the id's lease (`writers` bucket: taken by create, or
//! from a holder whose node's liveness key has expired by compare-and-set), and every record it
//! appends carries `Nats-Expected-Last-Subject-Sequence`: the sequence of the last record it
//! knows. On taking an id over, a writer first appends a fence record, so the tail moves; a
//! zombie (a paused node that lost its lease and does not know yet) then appends against a tail
//! that is gone, and JetStream refuses it: its step fails, and the zombie's effects never leave.
//! If the zombie's append won the race instead, the new writer's fence append fails, it reads
//! the zombie's step and tries again: either way each step is on one line of history.
//!
//! **Exactly once between persistent actors** (see `channel`): sends are numbered in the
//! sender's records; the receiver records what it consumed (sender, number) in the record of the
//! step that consumed it, and drops what it has already consumed; the sender learns of
//! acknowledgements (in memory from writers on this node, through its `acks` subject from other
//! nodes) and sends what is still pending again whenever it recovers.
//!
//! Invariants:
//! - A commit is answered `Ok` only after JetStream stored its record, and only for the writer
//!   that holds the id: after a conflict the writer is fenced and every later commit is refused.
//! - Recovery folds the latest checkpoint and every record after it, so every node rebuilds
//!   the same state.
//! - Reads and the lease block the calling worker for at most [`BLOCK_FOR`].
//! - Every future that reaches the log runs as a task of the runtime, never polled by an
//!   actor's cell: a cell awaits only the task's outcome. The log's lock hands itself to its
//!   first waiter, polled or not. A waiter polled by the actors' scheduler, whose workers may
//!   all be blocked (for up to [`BLOCK_FOR`]) in reads queued behind that same lock, would
//!   stall every other user of the log (a commit awaited by its cell did: `mote-bench durable`
//!   hung one run in two).

mod record;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::registry::Registry;

use self::record::{Folded, Record};
use super::backend::{Backend, Flushed, Recovered, Resend, StorageError};
use super::channel::Numbered;
use super::journal::{Backlog, Op, StepWrite, unix_ms};
use crate::actor::step::Commit;
use crate::address::Address;
use crate::message::Receipt;
use crate::storage::CommitStats;
use crate::storage::jetstream::{AppendError, JetStreamError, Log, StoreConfig, TakeError};

/// The longest a call blocks its worker on JetStream.
pub(crate) const BLOCK_FOR: Duration = Duration::from_secs(60);
/// How often a lease or a node name held by a run that just died is tried again.
const RETRY_EVERY: Duration = Duration::from_millis(200);
/// How soon an id released with messages still pending is woken to send them again.
const RESEND_WAKE: Duration = Duration::from_secs(2);
/// How often acknowledgements of this node's writers' sends are written.
const SETTLE_EVERY: Duration = Duration::from_millis(200);

/// The store.
pub(crate) struct JetStream {
    shared: Arc<Shared>,
}

struct Shared {
    config: StoreConfig,
    /// The log once open; opened again after this node's liveness was lost (a pause past the
    /// lease), with a new epoch, so that its actors can recover again.
    log: tokio::sync::Mutex<Option<Arc<Log>>>,
    runtime: tokio::runtime::Handle,
    /// The writers on this node, by persistence id.
    writers: Mutex<HashMap<String, Arc<Writer>>>,
    /// Receipts of numbered messages on this node: what each acknowledges.
    receipts: Mutex<HashMap<u64, Numbered>>,
    /// Reminders of this node's writers: their owner.
    reminders: Mutex<HashMap<u64, String>>,
    /// Handles for receipts (node-local) and reminder ids (store-wide: see `open`).
    next_handle: AtomicU64,
    steps: AtomicU64,
    conflicts: AtomicU64,
    settler: std::sync::Once,
    /// This, for the tasks it starts.
    me: std::sync::Weak<Shared>,
}

/// Fences every writer of this node once its liveness is lost (it was silent past its lease,
/// a paused process say): another node may have taken their ids, so none of them commits
/// again.
async fn fence_on_loss(
    shared: std::sync::Weak<Shared>,
    mut lost: tokio::sync::watch::Receiver<bool>,
) {
    if lost.wait_for(|lost| *lost).await.is_err() {
        return;
    }
    let Some(shared) = shared.upgrade() else {
        return;
    };
    let writers = shared.all_writers();
    tracing::warn!(
        writers = writers.len(),
        "storage liveness lost: this node's persistent actors can no longer commit"
    );
    for (_, writer) in writers {
        writer.lock().fenced = true;
    }
}

/// Hands the acknowledgements other nodes publish to this node's writers, while the store
/// lives.
async fn hear(
    shared: std::sync::Weak<Shared>,
    heard: impl futures_util::Stream<Item = (String, u64)> + Send,
) {
    use futures_util::StreamExt as _;
    let mut heard = std::pin::pin!(heard);
    while let Some((pid, n)) = heard.next().await {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.heard(&pid, n);
    }
}

/// This node's writer of one persistence id.
struct Writer {
    /// Held across an append, so its records go out one at a time on the tail it knows.
    pen: tokio::sync::Mutex<()>,
    /// Never held across an await.
    inner: Mutex<Inner>,
}

/// A pending send of a writer on this node.
struct Sent {
    /// Its receipt's handle, kept while it is pending.
    handle: u64,
    /// When it was last sent.
    at: Instant,
    /// How many times it was sent again: each doubles the wait before the next, to at most
    /// [`MAX_RESEND_BACKOFF`] times the first.
    again: u32,
}

/// How many times the wait before a resend doubles at most.
const MAX_RESEND_BACKOFF: u32 = 5;

/// A writer's state.
struct Inner {
    /// The incarnation that recovered it.
    holder: Address,
    fence: u64,
    /// The stream sequence of its last record.
    tail: u64,
    /// Refused by a newer writer: no commit goes through any more.
    fenced: bool,
    state: Folded,
    /// Its sends acknowledged since its last record.
    settled: Vec<u64>,
    /// Its reminders' firings acknowledged since its last record.
    fired: Vec<(u64, u64)>,
    /// Its pending sends on this node, by number.
    sends: BTreeMap<u64, Sent>,
    /// `state.events` holds every event after the snapshot: true from recovery to the first
    /// step committed after it.
    replayable: bool,
}

/// The next reminder of a state: when it is due and where it fires.
fn next_reminder(state: &Folded) -> Option<(u64, String)> {
    state
        .reminders
        .values()
        .min_by_key(|r| r.due_ms)
        .map(|r| (r.due_ms, r.target.clone()))
}

/// The message id of the record a writer appends on `tail`: a retry of it is written once.
fn msg_id(pid: &str, fence: u64, tail: u64) -> String {
    format!("{pid}#{fence}#{tail}")
}

fn remote(what: &'static str) -> impl FnOnce(crate::error::BoxError) -> StorageError {
    move |source| StorageError::Remote {
        store: "jetstream",
        what,
        source,
    }
}

impl JetStream {
    /// The store at `config`; it connects on first use (and again after a failure).
    pub(crate) fn new(config: StoreConfig, runtime: tokio::runtime::Handle) -> JetStream {
        JetStream {
            shared: Arc::new_cyclic(|me| Shared {
                me: me.clone(),
                config,
                log: tokio::sync::Mutex::new(None),
                runtime,
                writers: Mutex::default(),
                receipts: Mutex::default(),
                reminders: Mutex::default(),
                next_handle: AtomicU64::new(1),
                steps: AtomicU64::new(0),
                conflicts: AtomicU64::new(0),
                settler: std::sync::Once::new(),
            }),
        }
    }

    /// Runs `fut` on the runtime and waits for it on this thread, at most [`BLOCK_FOR`].
    fn block<T: Send + 'static>(
        &self,
        what: &'static str,
        fut: impl Future<Output = Result<T, StorageError>> + Send + 'static,
    ) -> Result<T, StorageError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.shared.runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv_timeout(BLOCK_FOR)
            .map_err(|e| remote(what)(Box::new(e)))?
    }

    /// Runs `fut` as a task of the runtime at once; the future returned waits for its outcome
    /// (see the module's invariants: what its caller polls never waits on the log itself).
    fn on_runtime<T: Send + 'static>(
        &self,
        what: &'static str,
        fut: impl Future<Output = Result<T, StorageError>> + Send + 'static,
    ) -> impl Future<Output = Result<T, StorageError>> + Send + 'static {
        let task = self.shared.runtime.spawn(fut);
        async move { task.await.map_err(|e| remote(what)(Box::new(e)))? }
    }
}

impl Writer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Inner {
    /// Whether acknowledgements wait to be written.
    fn waiting(&self) -> bool {
        !self.fenced && (!self.settled.is_empty() || !self.fired.is_empty())
    }
}

impl Shared {
    /// The log, connecting first if need be, or again if this node's liveness was lost (its
    /// writers are fenced then; the new epoch lets its actors take their ids back).
    async fn log(&self) -> Result<Arc<Log>, StorageError> {
        let mut slot = self.log.lock().await;
        if let Some(log) = slot.as_ref()
            && !*log.lost().borrow()
        {
            return Ok(log.clone());
        }
        let log = self.open().await?;
        // Reminder ids are store-wide: each opening of the store takes a prefix.
        let prefix = log
            .next_prefix()
            .await
            .map_err(|e| remote("allocate ids")(Box::new(e)))?;
        self.next_handle.store(prefix << 40 | 1, Ordering::Relaxed);
        let heard = log
            .acknowledgements_heard()
            .await
            .map_err(|e| remote("subscribe to acknowledgements")(Box::new(e)))?;
        self.runtime.spawn(hear(self.me.clone(), heard));
        self.runtime
            .spawn(fence_on_loss(self.me.clone(), log.lost()));
        let log = Arc::new(log);
        *slot = Some(log.clone());
        Ok(log)
    }

    /// The log if it is open, without waiting.
    fn opened(&self) -> Option<Arc<Log>> {
        self.log.try_lock().ok().and_then(|slot| slot.clone())
    }

    /// Opens the log. A node restarted after a crash finds its previous run's liveness key:
    /// it waits for the key to expire (at most a lease), as other nodes do before they take
    /// that run's ids.
    async fn open(&self) -> Result<Log, StorageError> {
        let deadline = Instant::now() + self.config.lease * 2 + Duration::from_secs(1);
        let mut said = false;
        loop {
            match Log::open(self.config.clone()).await {
                Ok(log) => return Ok(log),
                Err(JetStreamError::NameTaken(node)) if Instant::now() < deadline => {
                    if !std::mem::replace(&mut said, true) {
                        tracing::info!(%node, "waiting for this node's previous liveness to expire");
                    }
                    tokio::time::sleep(RETRY_EVERY).await;
                }
                Err(e) => return Err(remote("connect")(Box::new(e))),
            }
        }
    }

    /// Takes `pid`'s lease. A holder on a node that just died keeps it until that node's
    /// liveness expires: it is tried again until a lease has passed.
    async fn take(&self, log: &Log, pid: &str) -> Result<u64, StorageError> {
        let deadline = Instant::now() + self.config.lease + Duration::from_secs(1);
        loop {
            match log.take(pid).await {
                Ok(fence) => return Ok(fence),
                Err(TakeError::Held { .. }) if Instant::now() < deadline => {
                    tokio::time::sleep(RETRY_EVERY).await;
                }
                Err(TakeError::Held { node }) => {
                    return Err(StorageError::Held {
                        pid: pid.to_owned(),
                        node,
                    });
                }
                Err(TakeError::Lost) => {
                    return Err(StorageError::Fenced {
                        pid: pid.to_owned(),
                    });
                }
                Err(other) => return Err(remote("take the lease")(Box::new(other))),
            }
        }
    }

    /// Every writer on this node, with its id.
    fn all_writers(&self) -> Vec<(String, Arc<Writer>)> {
        self.writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn writer(&self, pid: &str) -> Option<Arc<Writer>> {
        self.writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(pid)
            .cloned()
    }

    /// Takes the lease of `pid`, folds its state and fences earlier writers.
    async fn recover(
        self: &Arc<Self>,
        pid: String,
        holder: Address,
    ) -> Result<Recovered, StorageError> {
        let log = self.log().await?;
        let fence = self.take(&log, &pid).await?;
        let mut attempts = 0;
        let (state, tail) = loop {
            attempts += 1;
            let (mut state, covered) = match log
                .checkpoint(&pid)
                .await
                .map_err(|e| remote("read the checkpoint")(Box::new(e)))?
            {
                Some((covered, bytes)) => {
                    let folded = postcard::from_bytes::<Folded>(&bytes)
                        .map_err(|e| remote("decode the checkpoint")(Box::new(e)))?;
                    (folded, covered)
                }
                None => (Folded::default(), 0),
            };
            let mut tail = covered;
            for (seq, bytes) in log
                .read(&pid, covered, usize::MAX)
                .await
                .map_err(|e| remote("read the records")(Box::new(e)))?
            {
                let record = postcard::from_bytes::<Record>(&bytes)
                    .map_err(|e| remote("decode a record")(Box::new(e)))?;
                state.apply(&record);
                tail = seq;
            }
            // A checkpoint written meanwhile may have purged records this read skipped.
            let moved = log
                .checkpoint(&pid)
                .await
                .map_err(|e| remote("read the checkpoint")(Box::new(e)))?
                .is_some_and(|(now, _)| now > covered);
            if moved && attempts < 5 {
                continue;
            }
            let (acks, heard) = log
                .acknowledgements(&pid)
                .await
                .map_err(|e| remote("read the acknowledgements")(Box::new(e)))?;
            let settled: Vec<u64> = acks
                .into_iter()
                .filter(|n| state.outbox.pending.contains_key(n))
                .collect();
            // The fence: a record of this writer on the tail it read, which also records the
            // acknowledgements read (so their messages can go).
            let fence_record = Record {
                node: self.config.node.clone(),
                fence,
                settled,
                ..Record::default()
            };
            let bytes = postcard::to_allocvec(&fence_record).unwrap_or_default();
            match log
                .append(&pid, tail, &msg_id(&pid, fence, tail), bytes)
                .await
            {
                Ok(seq) => {
                    state.apply(&fence_record);
                    // Only those read go: one stored since is for the next writer.
                    let log = log.clone();
                    let pid = pid.clone();
                    self.runtime.spawn(async move {
                        if let Err(e) = log.purge_acknowledgements(&pid, heard + 1).await {
                            tracing::debug!(%pid, error = %crate::error::chain(&e), "acknowledgements not purged");
                        }
                    });
                    break (state, seq);
                }
                Err(AppendError::Conflict { .. }) if attempts < 5 => continue,
                Err(e) => return Err(remote("append the fence")(Box::new(e))),
            }
        };
        let recovered = Recovered {
            snapshot: state.stored_snapshot(),
            seq: state.seq.max(state.snapshot.as_ref().map_or(0, |s| s.0)),
            unsent: state
                .outbox
                .pending
                .iter()
                .map(|(n, row)| (*n, row.clone()))
                .collect(),
            reminders: state
                .reminders
                .iter()
                .map(|(id, row)| (*id, row.clone()))
                .collect(),
        };
        {
            let mut reminders = self.reminders.lock().unwrap_or_else(|p| p.into_inner());
            for id in state.reminders.keys() {
                reminders.insert(*id, pid.clone());
            }
        }
        // The index follows the records (a stale entry is corrected here).
        self.index(&log, &pid, next_reminder(&state));
        // A writer of an earlier incarnation here (a restart) hands over the acknowledgements
        // it had not written yet.
        let (settled, fired) = match self.writer(&pid) {
            Some(old) => {
                let mut old = old.lock();
                old.fenced = true;
                (
                    std::mem::take(&mut old.settled),
                    std::mem::take(&mut old.fired),
                )
            }
            None => (Vec::new(), Vec::new()),
        };
        let writer = Writer {
            pen: tokio::sync::Mutex::new(()),
            inner: Mutex::new(Inner {
                holder,
                fence,
                tail,
                fenced: false,
                state,
                settled,
                fired,
                sends: BTreeMap::new(),
                replayable: true,
            }),
        };
        self.writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(pid, Arc::new(writer));
        self.start_settler();
        Ok(recovered)
    }

    /// Numbers the unsent messages of a recovered writer again: their receipts.
    fn receipts_for(&self, pid: &str, unsent: &mut [(u64, super::journal::OutboxRow)]) {
        let Some(writer) = self.writer(pid) else {
            return;
        };
        let mut writer = writer.lock();
        let now = Instant::now();
        for (n, _) in unsent.iter_mut() {
            *n = self.receipt(pid, &mut writer, *n, now);
        }
    }

    /// The receipt on this node of `pid`'s pending send `n` (its handle, reused while it is
    /// pending), registered with the floor of its target as of now.
    fn receipt(&self, pid: &str, w: &mut Inner, n: u64, now: Instant) -> u64 {
        let handle = match w.sends.get(&n) {
            Some(sent) => sent.handle,
            None => {
                let handle = self.next_handle.fetch_add(1, Ordering::Relaxed);
                let sent = Sent {
                    handle,
                    at: now,
                    again: 0,
                };
                w.sends.insert(n, sent);
                handle
            }
        };
        let floor = w
            .state
            .outbox
            .pending
            .get(&n)
            .map_or(0, |row| w.state.outbox.floor(&row.target, |r| &r.target));
        self.receipts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                handle,
                Numbered {
                    sender: pid.to_owned(),
                    n,
                    floor,
                },
            );
        handle
    }

    /// The pending sends of this node's writers last sent longer than `after` ago (doubled for
    /// each time a send was already sent again, up to [`MAX_RESEND_BACKOFF`] doublings).
    fn overdue(&self, after: Duration) -> Vec<Resend> {
        let writers = self.all_writers();
        let now = Instant::now();
        let mut out = Vec::new();
        for (pid, writer) in writers {
            let mut w = writer.lock();
            if w.fenced {
                continue;
            }
            let due: Vec<u64> = w
                .state
                .outbox
                .pending
                .keys()
                .copied()
                .filter(|n| !w.settled.contains(n))
                .filter(|n| {
                    w.sends.get(n).is_none_or(|sent| {
                        let wait = after * 2u32.pow(sent.again.min(MAX_RESEND_BACKOFF));
                        now.duration_since(sent.at) >= wait
                    })
                })
                .collect();
            for n in due {
                let handle = self.receipt(&pid, &mut w, n, now);
                if let Some(sent) = w.sends.get_mut(&n) {
                    sent.at = now;
                    sent.again += 1;
                }
                if let Some(row) = w.state.outbox.pending.get(&n) {
                    out.push(Resend {
                        sender: w.holder.clone(),
                        receipt: Receipt::Outbox(handle),
                        row: row.clone(),
                    });
                }
            }
        }
        out
    }

    /// An acknowledgement of `pid`'s send `n` heard from another node.
    fn heard(&self, pid: &str, n: u64) {
        if let Some(writer) = self.writer(pid) {
            let mut w = writer.lock();
            if w.state.outbox.pending.contains_key(&n) && !w.settled.contains(&n) {
                w.settled.push(n);
            }
        }
    }

    /// Commits one step of a writer on this node.
    async fn commit(self: Arc<Self>, write: StepWrite) -> Result<(), StorageError> {
        let log = self.log().await?;
        let pid = write.pid.clone();
        let Some(writer) = self.writer(&pid) else {
            return Err(StorageError::Fenced { pid });
        };
        let pen = writer.pen.lock().await;
        let (record, sent, others_fired, tail, msg_id) = {
            let mut w = writer.lock();
            if w.fenced {
                tracing::warn!(%pid, "commit refused: this node's writer of the id was fenced");
                return Err(StorageError::Fenced { pid });
            }
            self.prepare(&mut w, write)
        };
        let bytes = postcard::to_allocvec(&record).unwrap_or_default();
        let appended = log.append(&pid, tail, &msg_id, bytes).await;
        let checkpoint = {
            let mut w = writer.lock();
            match appended {
                Ok(seq) => {
                    w.tail = seq;
                    // Events are held for the replay that follows recovery only: from the first
                    // step on, the state keeps those of the latest record after its snapshot
                    // (what a checkpoint needs), so a long journal costs no host memory.
                    w.state.events.clear();
                    w.replayable = false;
                    w.state.apply(&record);
                    let now = Instant::now();
                    for (handle, n) in &sent {
                        let fresh = Sent {
                            handle: *handle,
                            at: now,
                            again: 0,
                        };
                        w.sends.insert(*n, fresh);
                        self.receipt(&pid, &mut w, *n, now);
                    }
                    for n in &record.settled {
                        w.sends.remove(n);
                    }
                    let snapshot = record
                        .ops
                        .iter()
                        .any(|op| matches!(op, Op::Snapshot { .. } | Op::DeleteState));
                    snapshot.then(|| (seq, w.state.clone()))
                }
                Err(AppendError::Conflict { .. }) => {
                    w.fenced = true;
                    self.conflicts.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%pid, "a newer writer holds this persistence id: commit refused");
                    return Err(StorageError::Fenced { pid });
                }
                Err(e) => {
                    // Not written: what it would have acknowledged waits for the next record.
                    w.settled.extend(&record.settled);
                    w.fired.extend(&record.fired);
                    return Err(remote("append a step")(Box::new(e)));
                }
            }
        };
        let reindex = record.base.is_some()
            || !record.fired.is_empty()
            || record.ops.iter().any(|op| {
                matches!(
                    op,
                    Op::Remind { .. } | Op::CancelReminder { .. } | Op::DeleteState
                )
            });
        if reindex {
            let next = next_reminder(&writer.lock().state);
            self.index(&log, &pid, next);
        }
        drop(pen);
        self.steps.fetch_add(1, Ordering::Relaxed);
        {
            let mut reminders = self.reminders.lock().unwrap_or_else(|p| p.into_inner());
            for op in &record.ops {
                if let Op::Remind { id, .. } = op {
                    reminders.insert(*id, pid.clone());
                }
            }
        }
        for msg in record.consumed.iter().filter(|m| m.sender != pid) {
            Box::pin(self.acknowledge_sender(msg.clone(), false)).await;
        }
        for (owner, id) in others_fired {
            if let Some(writer) = self.writer(&owner) {
                writer.lock().fired.push((id, unix_ms()));
            }
        }
        if let Some((covered, state)) = checkpoint {
            let bytes = postcard::to_allocvec(&state).unwrap_or_default();
            // The records it covers go once every event before its snapshot is deleted: the
            // checkpoint then holds all there is.
            let compact = state.deleted_through >= state.snapshot.as_ref().map_or(0, |s| s.0);
            tokio::spawn(async move {
                match log.put_checkpoint(&pid, covered, bytes).await {
                    Ok(written) => {
                        if written
                            && compact
                            && let Err(e) = log.purge(&pid, covered).await
                        {
                            tracing::debug!(%pid, error = %crate::error::chain(&e), "records not purged");
                        }
                        // Acknowledgements stored before the checkpointed record are in the
                        // writer's records (or, lost, will come again: a resend is dropped and
                        // acknowledged anew). Later ones stay for whoever writes next.
                        if let Err(e) = log.purge_acknowledgements(&pid, covered).await {
                            tracing::debug!(%pid, error = %crate::error::chain(&e), "acknowledgements not purged");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(%pid, error = %crate::error::chain(&e), "checkpoint not written (recovery reads more records)");
                    }
                }
            });
        }
        Ok(())
    }

    /// The record of one step of writer `w`: its sends numbered after the last number handed
    /// out, its consumed receipts resolved, and the acknowledgements waiting. Also returns the
    /// sends' `(handle, number)`, the reminder firings it acknowledges for other ids, the tail
    /// it appends on and its message id.
    #[allow(clippy::type_complexity)]
    fn prepare(
        &self,
        w: &mut Inner,
        write: StepWrite,
    ) -> (Record, Vec<(u64, u64)>, Vec<(String, u64)>, u64, String) {
        let first = w.state.outbox.last + 1;
        let mut sent = Vec::with_capacity(write.outbox.len());
        let mut rows = Vec::with_capacity(write.outbox.len());
        for ((handle, row), n) in write.outbox.into_iter().zip(first..) {
            sent.push((handle, n));
            rows.push((n, row));
        }
        let mut consumed = Vec::new();
        let mut settled = std::mem::take(&mut w.settled);
        let mut fired = std::mem::take(&mut w.fired);
        let mut others_fired = Vec::new();
        {
            let mut receipts = self.receipts.lock().unwrap_or_else(|p| p.into_inner());
            let reminders = self.reminders.lock().unwrap_or_else(|p| p.into_inner());
            for receipt in &write.acks {
                match receipt {
                    Receipt::Outbox(handle) => {
                        if let Some(msg) = receipts.remove(handle) {
                            if msg.sender == write.pid {
                                settled.push(msg.n);
                            }
                            consumed.push(msg);
                        }
                    }
                    Receipt::Reminder(id) => match reminders.get(id) {
                        Some(owner) if *owner != write.pid => {
                            others_fired.push((owner.clone(), *id));
                        }
                        _ => fired.push((*id, unix_ms())),
                    },
                }
            }
        }
        let record = Record {
            node: self.config.node.clone(),
            fence: w.fence,
            ops: write.ops,
            last_seq: write.last_seq,
            sent: rows,
            consumed,
            settled,
            fired,
            base: None,
        };
        let id = msg_id(&write.pid, w.fence, w.tail);
        (record, sent, others_fired, w.tail, id)
    }

    /// Records `pid`'s next reminder in the failover index, in the background (the records
    /// stay the truth: a lost update costs a wake-up, or a reminder fired on its own node only).
    fn index(&self, log: &Arc<Log>, pid: &str, next: Option<(u64, String)>) {
        let (log, pid) = (log.clone(), pid.to_owned());
        self.runtime.spawn(async move {
            let indexed = match next {
                Some((due, path)) => log.put_due(&pid, due, &path).await,
                None => log.clear_due(&pid).await,
            };
            if let Err(e) = indexed {
                tracing::debug!(%pid, error = %crate::error::chain(&e), "reminder index not updated");
            }
        });
    }

    /// The paths of entities whose reminder is due and whose writer is not alive anywhere (its
    /// node died, or it was passivated on a node that died since).
    async fn dormant(&self) -> Vec<String> {
        let Ok(log) = self.log().await else {
            return Vec::new();
        };
        let Ok(due) = log.due().await else {
            return Vec::new();
        };
        let soon = unix_ms() + 500;
        let mut out = Vec::new();
        for entry in due.into_iter().filter(|d| d.due_ms <= soon) {
            if self.writer(&entry.pid).is_none()
                && matches!(log.writer_alive(&entry.pid).await, Ok(false))
            {
                out.push(entry.path);
            }
        }
        out
    }

    /// Whether a firing of reminder `id` reaching `pid` is one its owner's committed state
    /// expects: the reminder is there and due (a firing armed on two nodes while the id moved
    /// is dropped the second time). True if the owner has no writer here to say.
    fn reminder_due(&self, pid: &str, id: u64) -> bool {
        let owner = self
            .reminders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
            .unwrap_or_else(|| pid.to_owned());
        let Some(writer) = self.writer(&owner) else {
            return true;
        };
        let w = writer.lock();
        if w.fired.iter().any(|(fired, _)| *fired == id) {
            return false; // fired, and the record that says so is on its way
        }
        w.state.reminders.get(&id).is_some_and(|row| {
            let slack = row.period_ms.map_or(0, |p| p / 2).max(1000);
            row.due_ms <= unix_ms() + slack
        })
    }

    /// Tells `msg`'s sender that it was acknowledged: in memory if its writer is on this node
    /// (written with its next record, or at once if `durably`), else on its acknowledgement
    /// subject.
    async fn acknowledge_sender(self: &Arc<Self>, msg: Numbered, durably: bool) {
        if let Some(writer) = self.writer(&msg.sender) {
            writer.lock().settled.push(msg.n);
            if durably {
                let write = StepWrite {
                    pid: msg.sender,
                    ..StepWrite::default()
                };
                if let Err(e) = self.clone().commit(write).await {
                    tracing::debug!(error = %crate::error::chain(&e), "acknowledgement not written");
                }
            }
            return;
        }
        let Ok(log) = self.log().await else {
            return;
        };
        if let Err(e) = log.acknowledge(&msg.sender, msg.n).await {
            // The sender sends it again when it recovers; its receiver drops the duplicate.
            tracing::debug!(sender = %msg.sender, n = msg.n, error = %crate::error::chain(&e), "acknowledgement not written");
        }
    }

    /// A durable message consumed or dropped without a step of its receiver; `durably` waits
    /// until the acknowledgement is stored.
    async fn settle(self: &Arc<Self>, receipt: Receipt, durably: bool) {
        match receipt {
            Receipt::Outbox(handle) => {
                let msg = self
                    .receipts
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&handle);
                if let Some(msg) = msg {
                    self.acknowledge_sender(msg, durably).await;
                }
            }
            Receipt::Reminder(id) => {
                let owner = self
                    .reminders
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&id)
                    .cloned();
                if let Some(writer) = owner.and_then(|pid| self.writer(&pid)) {
                    writer.lock().fired.push((id, unix_ms()));
                }
            }
        }
    }

    /// Starts the task that writes acknowledgements no step carried.
    fn start_settler(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        self.settler.call_once(|| {
            self.runtime.spawn(async move {
                let mut tick = tokio::time::interval(SETTLE_EVERY);
                loop {
                    tick.tick().await;
                    let Some(shared) = weak.upgrade() else {
                        return;
                    };
                    shared.write_settlements().await;
                }
            });
        });
    }

    /// Appends a record for every writer with acknowledgements waiting.
    async fn write_settlements(self: &Arc<Self>) {
        let writers = self.all_writers();
        for (pid, writer) in writers {
            let waiting = writer.lock().waiting();
            if waiting {
                let write = StepWrite {
                    pid,
                    ..StepWrite::default()
                };
                if let Err(e) = self.clone().commit(write).await {
                    tracing::debug!(error = %crate::error::chain(&e), "acknowledgements not written yet");
                }
            }
        }
    }

    /// Gives up the writer of `pid` if `holder` is it.
    async fn release(self: Arc<Self>, pid: String, holder: Address) {
        let Some(writer) = self.writer(&pid) else {
            return;
        };
        if writer.lock().holder != holder {
            return;
        }
        // Its acknowledgements first, then the lease.
        let waiting = writer.lock().waiting();
        if waiting {
            let write = StepWrite {
                pid: pid.clone(),
                ..StepWrite::default()
            };
            let _ = self.clone().commit(write).await;
        }
        self.writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&pid);
        let Ok(log) = self.log().await else {
            return;
        };
        // Messages still pending go again when it comes back: an entity is woken for them as
        // for a reminder, a resend's wait from now.
        let wake = {
            let w = writer.lock();
            let next = next_reminder(&w.state);
            match w.state.outbox.pending.is_empty() {
                true => next,
                false => {
                    let soon = unix_ms() + RESEND_WAKE.as_millis() as u64;
                    let path = holder.path.to_string();
                    Some(next.filter(|(due, _)| *due <= soon).unwrap_or((soon, path)))
                }
            }
        };
        self.index(&log, &pid, wake);
        if let Err(e) = log.release(&pid).await {
            tracing::debug!(%pid, error = %crate::error::chain(&e), "lease not released (it expires with the node)");
        }
    }
}

impl Backend for JetStream {
    fn name(&self) -> &'static str {
        "jetstream"
    }

    fn ready(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), StorageError>> + Send + '_>> {
        let shared = self.shared.clone();
        Box::pin(self.on_runtime("connect", async move { shared.log().await.map(|_| ()) }))
    }

    fn backlog(&self) -> Result<Backlog, StorageError> {
        // Each id's outbox and reminders follow its writer: they come back with `recover`.
        Ok(Backlog::default())
    }

    fn recover(&self, pid: &str, writer: &Address) -> Result<Recovered, StorageError> {
        let shared = self.shared.clone();
        let (pid, holder) = (pid.to_owned(), writer.clone());
        let key = pid.clone();
        let mut recovered =
            self.block("recover", async move { shared.recover(pid, holder).await })?;
        self.shared.receipts_for(&key, &mut recovered.unsent);
        Ok(recovered)
    }

    fn events(
        &self,
        pid: &str,
        after: u64,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, StorageError> {
        if let Some(writer) = self.shared.writer(pid) {
            let w = writer.lock();
            if w.replayable
                && let Some(events) = w.state.events_after(after, max)
            {
                return Ok(events);
            }
        }
        // Older than the snapshot, or asked for after the recovery's first step: fold the
        // whole log again, keeping every event.
        let shared = self.shared.clone();
        let pid = pid.to_owned();
        self.block("read events", async move {
            let log = shared.log().await?;
            let mut events = Vec::new();
            let mut deleted = 0;
            for (_, bytes) in log
                .read(&pid, 0, usize::MAX)
                .await
                .map_err(|e| remote("read the records")(Box::new(e)))?
            {
                let record = postcard::from_bytes::<Record>(&bytes)
                    .map_err(|e| remote("decode a record")(Box::new(e)))?;
                if let Some(base) = &record.base {
                    events = base.events.clone();
                    deleted = base.deleted_through;
                }
                for op in &record.ops {
                    match op {
                        Op::Event { seq, data } => events.push((*seq, data.clone())),
                        Op::DeleteEvents { through } => deleted = deleted.max(*through),
                        Op::DeleteState => {
                            events.clear();
                            deleted = 0;
                        }
                        _ => {}
                    }
                }
            }
            Ok(events
                .into_iter()
                .filter(|(s, _)| *s > after && *s > deleted)
                .take(max)
                .collect())
        })
    }

    fn admit(&self, pid: &str, receipt: Receipt) -> bool {
        let handle = match receipt {
            Receipt::Outbox(handle) => handle,
            Receipt::Reminder(id) => return self.shared.reminder_due(pid, id),
        };
        let Some(msg) = self
            .shared
            .receipts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&handle)
            .cloned()
        else {
            return true;
        };
        self.shared
            .writer(pid)
            .is_none_or(|writer| writer.lock().state.seen.admit(&msg))
    }

    fn undeliverable(&self, _receipt: Receipt) {
        // Still pending at its sender, which sends it again until a receiver consumes it.
    }

    fn export(&self, receipt: Receipt) -> Option<Vec<u8>> {
        let Receipt::Outbox(handle) = receipt else {
            return None;
        };
        let msg = self
            .shared
            .receipts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&handle)?;
        Some(postcard::to_allocvec(&msg).unwrap_or_default())
    }

    fn import(&self, token: &[u8]) -> Option<Receipt> {
        let msg: Numbered = postcard::from_bytes(token).ok()?;
        let handle = self.shared.next_handle.fetch_add(1, Ordering::Relaxed);
        self.shared
            .receipts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(handle, msg);
        Some(Receipt::Outbox(handle))
    }

    fn overdue(&self, after: Duration) -> Vec<Resend> {
        self.shared.overdue(after)
    }

    fn dormant(&self) -> std::pin::Pin<Box<dyn Future<Output = Vec<String>> + Send + '_>> {
        let shared = self.shared.clone();
        let dormant = self.on_runtime("read the reminders due", async move {
            Ok(shared.dormant().await)
        });
        Box::pin(async move { dormant.await.unwrap_or_default() })
    }

    fn allocate_outbox(&self, n: u64) -> u64 {
        self.shared.next_handle.fetch_add(n, Ordering::Relaxed)
    }

    fn allocate_reminder(&self) -> u64 {
        self.shared.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    fn commit(&self, write: StepWrite) -> Commit {
        let committed = self.on_runtime("commit", self.shared.clone().commit(write));
        Box::pin(async move {
            committed
                .await
                .map_err(|e| Box::new(e) as crate::error::BoxError)
        })
    }

    fn acknowledge(&self, receipt: Receipt) -> Commit {
        let shared = self.shared.clone();
        let settled = self.on_runtime("acknowledge", async move {
            shared.settle(receipt, true).await;
            Ok(())
        });
        Box::pin(async move {
            settled
                .await
                .map_err(|e| Box::new(e) as crate::error::BoxError)
        })
    }

    fn settle(&self, receipt: Receipt) {
        let shared = self.shared.clone();
        self.shared.runtime.spawn(async move {
            shared.settle(receipt, false).await;
        });
    }

    fn released(&self, pid: &str, writer: &Address) {
        let shared = self.shared.clone();
        let (pid, holder) = (pid.to_owned(), writer.clone());
        self.shared.runtime.spawn(shared.release(pid, holder));
    }

    fn flush(&self) -> Flushed<'_> {
        let shared = self.shared.clone();
        let flushed = self.on_runtime("flush", async move {
            shared.write_settlements().await;
            Ok(())
        });
        Box::pin(async move {
            let _ = flushed.await;
        })
    }

    fn put_image(&self, path: &str, image: &[u8]) -> Result<(), StorageError> {
        let shared = self.shared.clone();
        let (path, image) = (path.to_owned(), image.to_vec());
        self.block("store an image", async move {
            let log = shared.log().await?;
            log.put_image(&path, &image)
                .await
                .map_err(|e| remote("store an image")(Box::new(e)))
        })
    }

    fn take_image(&self, path: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let shared = self.shared.clone();
        let path = path.to_owned();
        self.block("take an image", async move {
            let log = shared.log().await?;
            log.take_image(&path)
                .await
                .map_err(|e| remote("take an image")(Box::new(e)))
        })
    }

    fn close(&self) {
        // The node's liveness goes with it, so its leases can be taken at once.
        if let Some(log) = self.shared.opened() {
            self.shared.runtime.spawn(async move { log.stop().await });
        }
    }

    fn stats(&self) -> CommitStats {
        let steps = self.shared.steps.load(Ordering::Relaxed);
        CommitStats {
            steps,
            transactions: steps,
        }
    }

    fn metrics(&self, registry: &mut Registry) {
        super::backend::register_steps(registry, self.shared.steps.load(Ordering::Relaxed));
        registry.register(
            "commit_conflicts",
            "Commits refused because a newer writer holds the persistence id",
            ConstCounter::new(self.shared.conflicts.load(Ordering::Relaxed)),
        );
        if let Some(log) = self.shared.opened() {
            let stats = log.stats();
            registry.register(
                "jetstream_appends",
                "Records appended to JetStream (one per committed step)",
                ConstCounter::new(stats.appends),
            );
            registry.register(
                "jetstream_duplicates",
                "Appends JetStream recognised as retries of a written record",
                ConstCounter::new(stats.duplicates),
            );
            registry.register(
                "jetstream_records_read",
                "Records read back from JetStream by recoveries",
                ConstCounter::new(stats.read),
            );
        }
    }
}

#[cfg(test)]
mod tests;
