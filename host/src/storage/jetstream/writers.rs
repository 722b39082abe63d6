//! Writer leases (one node writes an id) and the node liveness they rest on.
//!
//! A node's liveness is a key in a bucket whose keys expire `lease` after their last write:
//! the node creates it at open with a fresh epoch and renews it every third of the lease by
//! compare-and-set. Only the node writes its epoch, and only over its own last revision, so
//! while the key carries the epoch the node has renewed it without a gap. A lease names the
//! node and the epoch it was taken in; a taker may take it over only when that key is gone or
//! carries another epoch.

use std::sync::Mutex;
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::{JetStreamError, Log, StoreConfig, TakeError};

/// How many times a take retries when the lease changes between its read and its write.
const TAKE_ATTEMPTS: usize = 8;

/// A lease's value: the node that holds it and the epoch it took it in.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Holder {
    /// The node's name.
    node: String,
    /// The node's epoch when it took the lease.
    epoch: u64,
}

impl Log {
    /// Takes pid's writer lease for this node and returns its revision (the fence token).
    /// If the lease is absent, it is created. If this node's current epoch holds it, it is
    /// ours already. If it is held by a node whose liveness key is gone or carries another
    /// epoch, it is taken over by compare-and-set (of two takers, one wins). Otherwise it is
    /// `Held`.
    pub(crate) async fn take(&self, pid: &str) -> Result<u64, TakeError> {
        let (key, _) = self.locate(pid)?;
        let me = Holder {
            node: self.inner.node.clone(),
            epoch: self.inner.epoch,
        };
        let value =
            bytes::Bytes::from(
                serde_json::to_vec(&me).map_err(|e| JetStreamError::Corrupt {
                    what: "writer lease",
                    key: key.clone(),
                    source: e.into(),
                })?,
            );
        let writers = &self.inner.writers;
        for _ in 0..TAKE_ATTEMPTS {
            if *self.inner.liveness.lost.borrow() {
                return Err(TakeError::Lost);
            }
            match writers.create(&key, value.clone()).await {
                Ok(revision) => return Ok(revision),
                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
                Err(e) => return Err(JetStreamError::failed("creating a writer lease", e).into()),
            }
            let entry = writers
                .entry(key.clone())
                .await
                .map_err(|e| JetStreamError::failed("reading a writer lease", e))?;
            let Some(entry) = entry.filter(|e| e.operation == kv::Operation::Put) else {
                continue; // released meanwhile: create it again
            };
            let holder = decode_holder(&key, &entry.value)?;
            if holder == me {
                return Ok(entry.revision);
            }
            if self.is_alive(&holder).await? {
                return Err(TakeError::Held { node: holder.node });
            }
            match writers.update(&key, value.clone(), entry.revision).await {
                Ok(revision) => {
                    tracing::info!(
                        pid,
                        from = %holder.node,
                        from_epoch = holder.epoch,
                        revision,
                        "writer lease taken over from a dead holder"
                    );
                    return Ok(revision);
                }
                // Another taker won: look again (it is likely live, so `Held`).
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {}
                Err(e) => return Err(JetStreamError::failed("taking a writer lease", e).into()),
            }
        }
        Err(
            JetStreamError::failed("taking a writer lease", "it kept changing under this node")
                .into(),
        )
    }

    /// Gives pid's writer lease up if this node (in this epoch) holds it.
    pub(crate) async fn release(&self, pid: &str) -> Result<(), JetStreamError> {
        let (key, _) = self.locate(pid)?;
        let writers = &self.inner.writers;
        let entry = writers
            .entry(key.clone())
            .await
            .map_err(|e| JetStreamError::failed("reading a writer lease", e))?;
        let Some(entry) = entry.filter(|e| e.operation == kv::Operation::Put) else {
            return Ok(());
        };
        let holder = decode_holder(&key, &entry.value)?;
        if holder.node != self.inner.node || holder.epoch != self.inner.epoch {
            return Ok(());
        }
        match writers
            .delete_expect_revision(&key, Some(entry.revision))
            .await
        {
            Ok(()) => Ok(()),
            // Taken over since it was read: not ours to release any more.
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(()),
            Err(e) => Err(JetStreamError::failed("releasing a writer lease", e)),
        }
    }

    /// Becomes `true` when this node's liveness is lost (its key expired or changed, as its
    /// renewal found) or given up by [`Log::stop`]. From then on every lease it held may be
    /// taken by another node, and it takes none. A fresh [`Log::open`] starts a new epoch.
    pub(crate) fn lost(&self) -> watch::Receiver<bool> {
        self.inner.liveness.lost.clone()
    }

    /// Stops renewing this node's liveness and deletes its key, so that other nodes may take
    /// its leases at once instead of after the lease. Reads and appends still work.
    pub(crate) async fn stop(&self) {
        self.inner.liveness.stop().await;
    }

    /// True if `holder`'s node is live in the epoch it holds the lease in.
    pub(super) async fn is_alive(&self, holder: &Holder) -> Result<bool, JetStreamError> {
        if !crate::cluster::is_name(&holder.node) {
            return Ok(false); // no node of this namespace can have that name
        }
        let entry = self
            .inner
            .alive
            .entry(holder.node.clone())
            .await
            .map_err(|e| JetStreamError::failed("reading a node's liveness", e))?;
        Ok(entry.is_some_and(|e| {
            e.operation == kv::Operation::Put && e.value == holder.epoch.to_string().as_bytes()
        }))
    }
}

/// A lease's value, decoded.
pub(super) fn decode_holder(key: &str, value: &[u8]) -> Result<Holder, JetStreamError> {
    serde_json::from_slice(value).map_err(|e| JetStreamError::Corrupt {
        what: "writer lease",
        key: key.to_owned(),
        source: e.into(),
    })
}

/// Creates (or opens) the liveness bucket, whose keys expire `lease` after their last write.
pub(super) async fn open_alive(
    js: &jetstream::Context,
    name: String,
    config: &StoreConfig,
) -> Result<kv::Store, JetStreamError> {
    let created = js
        .create_key_value(kv::Config {
            bucket: name.clone(),
            history: 1,
            max_age: config.lease,
            num_replicas: config.replicas,
            ..Default::default()
        })
        .await;
    let error = match created {
        Ok(store) => return Ok(store),
        Err(e) => e,
    };
    // It exists with another configuration: fine if it expires keys after this lease.
    let existing = js.get_key_value(name.clone()).await;
    let status = match &existing {
        Ok(store) => store.status().await.ok(),
        Err(_) => None,
    };
    match (existing, status) {
        (Ok(store), Some(status)) if status.info.config.max_age == config.lease => Ok(store),
        (Ok(_), Some(status)) => Err(JetStreamError::LeaseMismatch {
            bucket: name,
            found: status.info.config.max_age,
            configured: config.lease,
        }),
        _ => Err(JetStreamError::failed("opening the liveness bucket", error)),
    }
}

/// This node's liveness key and the task that renews it.
pub(super) struct Liveness {
    /// `true` once liveness is lost or given up.
    lost: watch::Receiver<bool>,
    /// Asks the renewal task to give liveness up; taken by the first stop.
    stop: Mutex<Option<oneshot::Sender<()>>>,
    /// The renewal task: awaited by a stop, aborted on drop.
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Liveness {
    /// Creates the node's key with `epoch` (refused while a live node has the name) and starts
    /// renewing it.
    pub(super) async fn start(
        alive: kv::Store,
        config: &StoreConfig,
        epoch: u64,
    ) -> Result<Liveness, JetStreamError> {
        let node = config.node.clone();
        let revision = match alive.create(&node, epoch.to_string().into()).await {
            Ok(revision) => revision,
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                return Err(JetStreamError::NameTaken(node));
            }
            Err(e) => return Err(JetStreamError::failed("taking the node's liveness key", e)),
        };
        let (lost_tx, lost) = watch::channel(false);
        let (stop_tx, stop) = oneshot::channel();
        let renewal = Renewal {
            alive,
            node,
            epoch,
            revision,
            period: config.lease / 3,
            lost: lost_tx,
        };
        Ok(Liveness {
            lost,
            stop: Mutex::new(Some(stop_tx)),
            task: Mutex::new(Some(tokio::spawn(renewal.run(stop)))),
        })
    }

    /// Stops the renewal, which deletes the key; waits for it.
    async fn stop(&self) {
        if let Some(stop) = lock(&self.stop).take() {
            let _ = stop.send(());
        }
        let task = lock(&self.task).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
    }
}

/// Locks `mutex`, through poisoning (what it guards is a handle, never half-written).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The renewal task's state.
struct Renewal {
    /// The liveness bucket.
    alive: kv::Store,
    /// This node's name: its key.
    node: String,
    /// This node's epoch: its key's value.
    epoch: u64,
    /// The key's revision as last written.
    revision: u64,
    /// A third of the lease.
    period: Duration,
    /// Set when liveness is lost or given up.
    lost: watch::Sender<bool>,
}

impl Renewal {
    /// Renews the key every period until it is found gone or changed, or `stop` fires.
    async fn run(mut self, mut stop: oneshot::Receiver<()>) {
        let value = bytes::Bytes::from(self.epoch.to_string());
        let mut ticks = tokio::time::interval(self.period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await; // the first tick is now: the key was just written
        loop {
            tokio::select! {
                _ = &mut stop => {
                    self.give_up().await;
                    return;
                }
                _ = ticks.tick() => {}
            }
            match self
                .alive
                .update(&self.node, value.clone(), self.revision)
                .await
            {
                Ok(revision) => self.revision = revision,
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                    if !self.still_ours().await {
                        tracing::warn!(
                            node = %self.node,
                            epoch = self.epoch,
                            "storage liveness lost: the node's key expired or changed"
                        );
                        self.lost.send_replace(true);
                        return;
                    }
                }
                // The key expires if this goes on; the next update will find out.
                Err(e) => tracing::warn!(node = %self.node, error = %e, "liveness renewal failed"),
            }
        }
    }

    /// After a refused renewal: true if the key still carries this epoch (a renewal whose
    /// answer was lost had written it), and then its revision is adopted.
    async fn still_ours(&mut self) -> bool {
        match self.alive.entry(self.node.clone()).await {
            Ok(Some(entry))
                if entry.operation == kv::Operation::Put
                    && entry.value == self.epoch.to_string().as_bytes() =>
            {
                self.revision = entry.revision;
                true
            }
            _ => false,
        }
    }

    /// Deletes the key (if it is still as last written) and reports liveness given up.
    async fn give_up(&self) {
        self.lost.send_replace(true);
        if let Err(e) = self
            .alive
            .delete_expect_revision(&self.node, Some(self.revision))
            .await
        {
            tracing::debug!(node = %self.node, error = %e, "liveness key left to expire");
        }
        tracing::info!(node = %self.node, epoch = self.epoch, "storage liveness given up");
    }
}
