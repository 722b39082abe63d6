//! The JetStream log under durable storage. Per persistence id: an append-only log of records
//! in one of `shards` streams, a checkpoint in key-value, and a writer lease that keeps one node
//! writing the id. The persistence backend builds on these operations; nothing here knows what
//! a record or a checkpoint holds.
//!
//! ```text
//! stream MOTE_<n>_STEPS_<k>    subjects mote.<n>.steps.<k>.>, for k in 0..shards
//! mote.<n>.steps.<k>.<token>   one id's records: token = base64url(id), k = fnv1a64(id) % shards
//! KV mote-<n>-checkpoints      token -> covered sequence (8 bytes, big-endian) + checkpoint
//! KV mote-<n>-writers          token -> {"node": .., "epoch": ..}: the id's writer lease
//! KV mote-<n>-alive            node -> epoch, gone `lease` after its last renewal
//! KV mote-<n>-reminders        token -> the id's next reminder: due (ms, big-endian) + path
//! objects mote-<n>-passivated  path -> the image of an actor passivated as an image ([`images`])
//! ```
//!
//! Invariants:
//! - An id's records are one subject of one stream, in append order. Its shard is a stable
//!   function of the id and the shard count (FNV-1a 64, the same in every build), and a
//!   namespace will not open with a shard count other than the one it was created with.
//! - Every id (1-1024 bytes, dots, wildcards and spaces included) is one valid subject token
//!   and key, and no two ids share one (base64url is injective).
//! - Of two appends to an id that carry the same `expected_last`, at most one is written. A
//!   stale one is [`AppendError::Conflict`] and writes nothing. This fences a zombie writer,
//!   not the lease.
//! - An append retried with the same message id within the duplicate window (two minutes) is
//!   written once. The retry returns the first one's sequence.
//! - A read ends: at the id's last record, or, if the rest is purged while it reads, once
//!   nothing has come for two seconds and the id has nothing later.
//! - A purge below a sequence keeps the records from it on. A purge of all leaves `last` at 0.
//! - A checkpoint never moves back: a put that covers no more than the stored one is ignored.
//! - One (node, epoch) holds a lease at a time. Another node takes it only by compare-and-set
//!   on the revision it read, and only when the holder's liveness key is gone or carries another
//!   epoch. Each taking raises the revision (the fence token).
//! - Two live `Log`s cannot share a node name: an open is refused while the name's liveness key
//!   lives.
//! - When a node finds its liveness key gone or changed, `lost()` reports it and the node stops
//!   renewing. After that it takes no lease.
//! - The `Log` owns its renewal task. The task stops when the last clone is dropped, or on
//!   [`Log::stop`].

mod acks;
mod images;
pub(crate) mod records;
mod reminders;
mod writers;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::jetstream::{self, kv, stream};
use base64::Engine as _;

use crate::error::BoxError;

/// The longest persistence id, in bytes.
pub(crate) const MAX_PID: usize = 1024;

/// How long a stream remembers message ids to drop a retried append.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// The stream metadata key that records a namespace's shard count.
const SHARDS_KEY: &str = "mote.shards";

/// Where and how to reach JetStream for storage.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// The NATS server(s), such as `nats://127.0.0.1:4222`.
    pub url: String,
    /// The namespace: every stream, subject and bucket is under it (default `mote`).
    pub name: String,
    /// A NATS token, if the server wants one.
    pub token: Option<String>,
    /// A NATS credentials file (JWT and nkey seed), if the server wants one.
    pub credentials: Option<PathBuf>,
    /// Streams the ids are spread over (default 4). Fixed for the life of a namespace.
    pub shards: u32,
    /// This host's name, unique among the live nodes of the namespace (`A-Z a-z 0-9 _ -`).
    pub node: String,
    /// How long a node's liveness outlasts its last renewal (default 10 s). It is renewed every
    /// third of that. Every node of a namespace must use the same value.
    pub lease: Duration,
    /// Copies JetStream keeps of each stream and bucket (default 1; 3 on a NATS cluster).
    pub replicas: usize,
}

impl StoreConfig {
    /// Node `node`'s storage in namespace `mote` at `url`, with 4 shards and a 10 s lease.
    pub fn new(url: impl Into<String>, node: impl Into<String>) -> Self {
        StoreConfig {
            url: url.into(),
            name: "mote".to_owned(),
            token: None,
            credentials: None,
            shards: 4,
            node: node.into(),
            lease: Duration::from_secs(10),
            replicas: 1,
        }
    }
}

/// Why a JetStream storage operation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JetStreamError {
    /// A node or namespace name outside `A-Z a-z 0-9 _ -` (or empty, or over 64 bytes).
    #[error("invalid {what} name {name:?}: use 1-64 of A-Z a-z 0-9 _ -")]
    InvalidName {
        /// `node` or `namespace`.
        what: &'static str,
        /// The name given.
        name: String,
    },
    /// A persistence id that is empty or longer than [`MAX_PID`] bytes.
    #[error("invalid persistence id of {len} bytes: use 1-{MAX_PID}")]
    InvalidPid {
        /// Its length.
        len: usize,
    },
    /// A configuration value that cannot work.
    #[error("invalid storage configuration: {0}")]
    InvalidConfig(&'static str),
    /// The NATS server could not be reached or refused the credentials.
    #[error("cannot connect to NATS at {url}")]
    Connect {
        /// The server.
        url: String,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// A live node of the namespace has this node name.
    #[error("the node name `{0}` is taken by a live node of this storage namespace")]
    NameTaken(String),
    /// The namespace was created with another shard count: ids would land in other streams.
    #[error("stream {stream} was created for {found} shards, not {configured}")]
    ShardsChanged {
        /// The stream.
        stream: String,
        /// The shard count it records.
        found: String,
        /// The shard count configured.
        configured: u32,
    },
    /// The liveness bucket expires keys after another lease than this node's.
    #[error("bucket {bucket} has a lease of {found:?}, this node {configured:?}")]
    LeaseMismatch {
        /// The bucket.
        bucket: String,
        /// Its key lifetime.
        found: Duration,
        /// This node's lease.
        configured: Duration,
    },
    /// A value in a bucket is not what this module writes.
    #[error("unreadable {what} under key {key}")]
    Corrupt {
        /// What it should be.
        what: &'static str,
        /// Its key.
        key: String,
        /// Why it does not decode.
        #[source]
        source: BoxError,
    },
    /// A JetStream operation failed (is the server running with `-js`?).
    #[error("JetStream failed {what}")]
    Failed {
        /// What was being done.
        what: &'static str,
        /// Why.
        #[source]
        source: BoxError,
    },
}

impl JetStreamError {
    fn failed(what: &'static str, source: impl Into<BoxError>) -> Self {
        JetStreamError::Failed {
            what,
            source: source.into(),
        }
    }
}

/// Why an append was not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AppendError {
    /// The id's last record is not at `expected`: another writer appended (this one is a
    /// zombie, or read a stale tail). Nothing was written.
    #[error("persistence id {pid:?}: its last record is not at sequence {expected}")]
    Conflict {
        /// The id.
        pid: String,
        /// The sequence the writer expected last.
        expected: u64,
    },
    /// Any other failure: the record may or may not have been written (retry with the same
    /// message id to find out).
    #[error(transparent)]
    Failed(#[from] JetStreamError),
}

/// Why a writer lease was not taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TakeError {
    /// A live node holds it.
    #[error("the writer lease is held by live node {node}")]
    Held {
        /// That node.
        node: String,
    },
    /// This node's liveness is lost (or it stopped): it takes no lease.
    #[error("this node's liveness is lost: it takes no lease")]
    Lost,
    /// JetStream failed.
    #[error(transparent)]
    Failed(#[from] JetStreamError),
}

/// What a `Log` has done since it opened, for the metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LogStats {
    /// Records written.
    pub(crate) appends: u64,
    /// Bytes of the records written.
    pub(crate) bytes: u64,
    /// Appends refused as [`AppendError::Conflict`].
    pub(crate) conflicts: u64,
    /// Retried appends that found their record written already.
    pub(crate) duplicates: u64,
    /// Records read.
    pub(crate) read: u64,
}

/// The counters behind [`LogStats`].
#[derive(Default)]
struct Counters {
    appends: AtomicU64,
    bytes: AtomicU64,
    conflicts: AtomicU64,
    duplicates: AtomicU64,
    read: AtomicU64,
    prefixes: AtomicU64,
}

/// Streams, subjects and buckets of one namespace.
struct Names {
    /// The namespace.
    name: String,
}

impl Names {
    /// Shard `k`'s stream.
    fn stream(&self, k: u32) -> String {
        format!("MOTE_{}_STEPS_{k}", self.name)
    }
    /// The subjects of shard `k`'s stream.
    fn subjects(&self, k: u32) -> String {
        format!("mote.{}.steps.{k}.>", self.name)
    }
    /// The subject of the id whose token is `token`, in shard `k`.
    fn subject(&self, k: u32, token: &str) -> String {
        format!("mote.{}.steps.{k}.{token}", self.name)
    }
    /// The bucket `what`.
    fn bucket(&self, what: &str) -> String {
        format!("mote-{}-{what}", self.name)
    }
}

/// The JetStream operations durable storage needs: records, checkpoints and writer leases.
/// Clones share one connection and one liveness.
#[derive(Clone)]
pub(crate) struct Log {
    inner: Arc<Inner>,
}

/// What the clones of a `Log` share.
struct Inner {
    /// The namespace's streams, subjects and buckets.
    names: Names,
    /// This node's name.
    node: String,
    /// This opening of the node: distinguishes it from earlier ones of the same name.
    epoch: u64,
    /// The connection, to publish appends.
    js: jetstream::Context,
    /// The record streams, one per shard.
    streams: Vec<stream::Stream>,
    /// KV `mote-<n>-checkpoints`.
    checkpoints: kv::Store,
    /// KV `mote-<n>-reminders`: each id's next reminder.
    reminders: kv::Store,
    /// KV `mote-<n>-writers`: the writer leases.
    writers: kv::Store,
    /// KV `mote-<n>-alive`: every node's liveness key.
    alive: kv::Store,
    /// Objects `mote-<n>-passivated`: images of passivated actors.
    images: async_nats::jetstream::object_store::ObjectStore,
    /// This node's liveness key and its renewal task.
    liveness: writers::Liveness,
    /// Counts the read consumers, to name them.
    reads: AtomicU64,
    /// Behind [`Log::stats`].
    counters: Counters,
}

impl Log {
    /// Connects, creates (or opens, idempotently) the streams and buckets, takes this node's
    /// liveness key and starts renewing it.
    pub(crate) async fn open(config: StoreConfig) -> Result<Log, JetStreamError> {
        for (what, name) in [("namespace", &config.name), ("node", &config.node)] {
            if !crate::cluster::is_name(name) {
                return Err(JetStreamError::InvalidName {
                    what,
                    name: name.clone(),
                });
            }
        }
        if config.shards == 0 {
            return Err(JetStreamError::InvalidConfig("shards must be at least 1"));
        }
        if config.lease < Duration::from_millis(300) {
            return Err(JetStreamError::InvalidConfig(
                "the lease must be at least 300 ms",
            ));
        }
        let names = Names {
            name: config.name.clone(),
        };
        let client = crate::cluster::connect_nats(
            &config.url,
            config.token.as_deref(),
            config.credentials.as_deref(),
            format!("mote-{}-storage", config.node),
        )
        .await
        .map_err(|source| JetStreamError::Connect {
            url: config.url.clone(),
            source,
        })?;
        let js = jetstream::new(client);
        let mut streams = Vec::with_capacity(config.shards as usize);
        for k in 0..config.shards {
            streams.push(open_stream(&js, &names, k, &config).await?);
        }
        let checkpoints = open_bucket(&js, names.bucket("checkpoints"), &config).await?;
        let reminders = open_bucket(&js, names.bucket("reminders"), &config).await?;
        let writers = open_bucket(&js, names.bucket("writers"), &config).await?;
        let alive = writers::open_alive(&js, names.bucket("alive"), &config).await?;
        let images = images::open(&js, names.bucket("passivated"), config.replicas).await?;
        let epoch = epoch();
        let liveness = writers::Liveness::start(alive.clone(), &config, epoch).await?;
        tracing::info!(
            namespace = %config.name,
            node = %config.node,
            epoch,
            shards = config.shards,
            "JetStream storage open"
        );
        Ok(Log {
            inner: Arc::new(Inner {
                names,
                node: config.node,
                epoch,
                js,
                streams,
                checkpoints,
                reminders,
                writers,
                alive,
                images,
                liveness,
                reads: AtomicU64::new(0),
                counters: Counters::default(),
            }),
        })
    }

    /// The shard of a persistence id: FNV-1a 64 of its bytes, modulo the shard count.
    pub(crate) fn shard(&self, pid: &str) -> u32 {
        shard_of(pid, self.inner.streams.len() as u32)
    }

    /// This node's name.
    #[cfg(test)]
    pub(crate) fn node(&self) -> &str {
        &self.inner.node
    }

    /// What this `Log` has done since it opened.
    pub(crate) fn stats(&self) -> LogStats {
        let c = &self.inner.counters;
        LogStats {
            appends: c.appends.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            conflicts: c.conflicts.load(Ordering::Relaxed),
            duplicates: c.duplicates.load(Ordering::Relaxed),
            read: c.read.load(Ordering::Relaxed),
        }
    }

    /// The id's subject token and shard.
    fn locate(&self, pid: &str) -> Result<(String, u32), JetStreamError> {
        Ok((token(pid)?, self.shard(pid)))
    }

    /// The id's subject and the stream that holds it.
    fn subject(&self, pid: &str) -> Result<(String, &stream::Stream), JetStreamError> {
        let (token, k) = self.locate(pid)?;
        Ok((
            self.inner.names.subject(k, &token),
            &self.inner.streams[k as usize],
        ))
    }
}

/// FNV-1a, 64 bits: stable across builds and platforms, unlike std's hasher.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The shard of `pid` among `shards`.
fn shard_of(pid: &str, shards: u32) -> u32 {
    (fnv1a64(pid.as_bytes()) % u64::from(shards.max(1))) as u32
}

/// The subject token and key of a persistence id: base64url without padding, which holds no
/// `.`, `*`, `>` or space.
fn token(pid: &str) -> Result<String, JetStreamError> {
    if pid.is_empty() || pid.len() > MAX_PID {
        return Err(JetStreamError::InvalidPid { len: pid.len() });
    }
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pid))
}

/// A new epoch: the time in nanoseconds, so a reopened node never reuses one.
fn epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Creates shard `k`'s stream, or opens it if it exists with this shard count.
async fn open_stream(
    js: &jetstream::Context,
    names: &Names,
    k: u32,
    config: &StoreConfig,
) -> Result<stream::Stream, JetStreamError> {
    let wanted = stream::Config {
        name: names.stream(k),
        subjects: vec![names.subjects(k)],
        storage: stream::StorageType::File,
        num_replicas: config.replicas,
        allow_direct: true,
        allow_rollup: true,
        duplicate_window: DUPLICATE_WINDOW,
        metadata: [(SHARDS_KEY.to_owned(), config.shards.to_string())].into(),
        ..Default::default()
    };
    // Identical config: the server answers with the stream, created or not.
    match js.create_stream(wanted.clone()).await {
        Ok(stream) => return Ok(stream),
        Err(e) if name_in_use(&e) => {}
        Err(e) => return Err(JetStreamError::failed("creating a stream", e)),
    }
    let mut stream = js
        .get_stream(&wanted.name)
        .await
        .map_err(|e| JetStreamError::failed("opening a stream", e))?;
    let info = stream
        .info()
        .await
        .map_err(|e| JetStreamError::failed("reading a stream's configuration", e))?;
    let found = info.config.metadata.get(SHARDS_KEY).cloned();
    if found.as_deref() != Some(config.shards.to_string().as_str()) {
        return Err(JetStreamError::ShardsChanged {
            stream: wanted.name,
            found: found.unwrap_or_else(|| "an unknown number of".to_owned()),
            configured: config.shards,
        });
    }
    tracing::info!(stream = %wanted.name, "updating a stream's configuration");
    js.update_stream(&wanted)
        .await
        .map_err(|e| JetStreamError::failed("updating a stream's configuration", e))?;
    Ok(stream)
}

/// True if a stream of that name exists with another configuration.
fn name_in_use(error: &async_nats::jetstream::context::CreateStreamError) -> bool {
    matches!(
        error.kind(),
        async_nats::jetstream::context::CreateStreamErrorKind::JetStream(e)
            if e.error_code() == jetstream::ErrorCode::STREAM_NAME_EXIST
    )
}

/// Creates (or opens) a key-value bucket that keeps one value per key.
async fn open_bucket(
    js: &jetstream::Context,
    name: String,
    config: &StoreConfig,
) -> Result<kv::Store, JetStreamError> {
    js.create_or_update_key_value(kv::Config {
        bucket: name,
        history: 1,
        num_replicas: config.replicas,
        ..Default::default()
    })
    .await
    .map_err(|e| JetStreamError::failed("opening a key-value bucket", e))
}
