//! Modules across a cluster: a version deployed on one node is deployed on every node. Its
//! bytes are stored once, by content hash, in a JetStream object store; a key-value bucket
//! says which hash (and grants) each name and version is, and which version of a name new
//! actors get.
//!
//! ```text
//! objects mote-<cluster>-modules    <sha-256 hex>          -> the component's bytes
//! KV      mote-<cluster>-versions   m.<name>.<version>     -> Record {name, version, hash, grants}
//!                                   c.<name>               -> the current version
//! ```
//!
//! A deploy here stores the bytes, then the record (last deploy wins, as in one registry). A
//! node that joins stores what only it had (a record the cluster has wins over its own), then
//! fetches every version it lacks; a node that is up follows the bucket with a watch.
//!
//! Invariants:
//! - A record is written only after its bytes are stored, so a node that reads a record can
//!   fetch them.
//! - A node deploys what it fetches through its own registry, with the same checks, compiled
//!   cache and database records as a deploy by hand, and only bytes whose SHA-256 is the
//!   record's hash. A version it cannot fetch or refuses (checks, size, hash, other bytes under
//!   a version its actors run) is logged, counted and announced on [`MODULES_TOPIC`], and the
//!   node goes on without it: nothing here panics or stops a task.
//! - Nothing echoes: a version deployed from the cluster goes to the registry directly and is
//!   not shared again, and a record of bytes a node already has changes nothing there.
//! - The bucket's current version of a name is the first version shared, then the one a
//!   cluster-wide upgrade moved every node to (see [`upgrades`](super::upgrades)).
//! - Its tasks (the watch, and the upgrade requests) end when the host is shut down or gone.
//! - The module traffic has a NATS connection of its own: megabytes of a module never queue in
//!   front of the frames between actors.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_nats::jetstream::{kv, object_store};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use super::config::{ClusterConfig, ClusterError, Names, bucket, check_name, connect};
use super::node::{Cluster, ClusterStats};
use super::{routes, wire};
use crate::deploy::checks::content_hash;
use crate::deploy::modules::Modules;
use crate::deploy::upgrade::{Upgrades, running};
use crate::error::{BoxError, ModuleError};

/// The topic on which a node's actors hear of module versions other nodes deployed.
pub const MODULES_TOPIC: &str = "/system/modules";
/// The kind of the message to [`MODULES_TOPIC`] when a version from the cluster is deployed
/// here; its body is `name@version`.
pub const MODULE_DEPLOYED_KIND: &str = "mote.module-deployed";
/// The kind of the message to [`MODULES_TOPIC`] when a version from the cluster could not be
/// deployed here; its body is `name@version: why`.
pub const MODULE_REFUSED_KIND: &str = "mote.module-refused";

/// Why a module version could not go from the cluster to this node, or from it to the cluster.
#[derive(Debug, thiserror::Error)]
pub enum ModuleSyncError {
    /// The cluster has no record of this version.
    #[error("the cluster has no record of {name}@{version}")]
    Unknown {
        /// The module.
        name: String,
        /// The version.
        version: String,
    },
    /// The record names bytes the object store does not have.
    #[error("{name}@{version}: the cluster's store has no object {hash}")]
    Missing {
        /// The module.
        name: String,
        /// The version.
        version: String,
        /// The content hash.
        hash: String,
    },
    /// The bytes are more than this host takes (`HostConfig::max_module_bytes`).
    #[error("{name}@{version} is {size} bytes, over this host's limit of {limit}")]
    TooLarge {
        /// The module.
        name: String,
        /// The version.
        version: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The bytes fetched are not those the record names.
    #[error("{name}@{version}: the bytes fetched hash to {got}, not {hash}")]
    Corrupt {
        /// The module.
        name: String,
        /// The version.
        version: String,
        /// The record's hash.
        hash: String,
        /// The hash of what was read.
        got: String,
    },
    /// The cluster has other bytes under this name and version than this node.
    #[error(
        "{name}@{version} is {hash} in the cluster but {here} on this node: deploy it under another version"
    )]
    Conflict {
        /// The module.
        name: String,
        /// The version.
        version: String,
        /// The cluster's hash.
        hash: String,
        /// This node's hash.
        here: String,
    },
    /// This node's registry refused the version (its checks, or its actors run other bytes
    /// under that version).
    #[error("{name}@{version} was refused on this node")]
    Refused {
        /// The module.
        name: String,
        /// The version.
        version: String,
        /// Why.
        #[source]
        source: ModuleError,
    },
    /// A JetStream operation failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

/// A version as the bucket records it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
struct Record {
    name: String,
    version: String,
    hash: String,
    grants: Vec<String>,
}

/// The key of a version's record.
fn version_key(name: &str, version: &str) -> String {
    format!("m.{}.{}", routes::key(name), routes::key(version))
}

/// The key of a name's current version.
fn current_key(name: &str) -> String {
    format!("c.{}", routes::key(name))
}

/// Figures of what went between this node and the cluster's store.
#[derive(Default)]
struct Counts {
    shared: AtomicU64,
    fetched: AtomicU64,
    refused: AtomicU64,
}

/// The connection and buckets of the cluster's modules, opened before the node joins so that
/// a cluster without JetStream is refused before anything else happens.
pub(crate) struct ModuleStores {
    pub(super) client: async_nats::Client,
    objects: object_store::ObjectStore,
    versions: kv::Store,
    watch: kv::Watch,
}

impl ModuleStores {
    /// Connects (a connection of its own) and opens the buckets; starts to watch the records,
    /// so nothing written from now on is missed.
    pub(crate) async fn open(config: &ClusterConfig) -> Result<ModuleStores, ClusterError> {
        check_name("node", &config.node)?;
        check_name("cluster", &config.name)?;
        let names = Names::new(&config.name);
        let client = connect(config, format!("mote-{}-modules", config.node)).await?;
        let js = async_nats::jetstream::new(client.clone());
        let objects_name = names.bucket("modules");
        let objects = match js.get_object_store(&objects_name).await {
            Ok(store) => store,
            Err(_) => js
                .create_object_store(object_store::Config {
                    bucket: objects_name,
                    description: Some("Mote module versions by content hash".to_owned()),
                    ..Default::default()
                })
                .await
                .map_err(|e| ClusterError::jetstream("opening the module store", e))?,
        };
        let versions = bucket(&js, names.bucket("versions")).await?;
        let watch = versions
            .watch_all()
            .await
            .map_err(|e| ClusterError::jetstream("watching module versions", e))?;
        Ok(ModuleStores {
            client,
            objects,
            versions,
            watch,
        })
    }
}

/// This node's side of the cluster's modules: shares its versions and takes the others'; it
/// also serves and rolls upgrades (see [`upgrades`](super::upgrades)).
pub(crate) struct SharedModules {
    pub(super) cluster: Arc<Cluster>,
    pub(super) modules: Arc<Modules>,
    pub(super) upgrades: Arc<Upgrades>,
    pub(super) client: async_nats::Client,
    objects: object_store::ObjectStore,
    versions: kv::Store,
    counts: Counts,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl SharedModules {
    /// Starts sharing once the node has joined: stores what only this node has, deploys what
    /// it lacks, then follows the records and serves upgrade requests. Failures are per
    /// version (logged, counted, announced): the node goes on with what it has.
    pub(crate) async fn start(
        stores: ModuleStores,
        cluster: Arc<Cluster>,
        modules: Arc<Modules>,
        upgrades: Arc<Upgrades>,
    ) -> Arc<SharedModules> {
        let ModuleStores {
            client,
            objects,
            versions,
            watch,
        } = stores;
        let shared = Arc::new(SharedModules {
            cluster,
            modules,
            upgrades,
            client,
            objects,
            versions,
            counts: Counts::default(),
            tasks: Mutex::new(Vec::new()),
        });
        for info in shared.modules.list() {
            if let Err(e) = shared
                .share(&info.name, &info.version, Write::IfAbsent)
                .await
            {
                shared.counts.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(module = %info.name, version = %info.version, error = %crate::error::chain(&e), "a module version of this node was not shared with the cluster");
            }
        }
        shared.catch_up().await;
        shared.keep(follow(shared.clone(), watch));
        shared
    }

    /// Runs `task` until [`SharedModules::stop`] (or the host is gone).
    pub(super) fn keep(&self, task: impl Future<Output = ()> + Send + 'static) {
        let Some(kernel) = self.cluster.kernel.upgrade() else {
            return;
        };
        let handle = kernel.runtime.spawn(task).abort_handle();
        (self.tasks.lock().unwrap_or_else(|p| p.into_inner())).push(handle);
    }

    /// Stops following the cluster and serving its requests. Idempotent.
    pub(crate) fn stop(&self) {
        for task in (self.tasks.lock().unwrap_or_else(|p| p.into_inner())).drain(..) {
            task.abort();
        }
    }

    /// Adds this node's figures to the cluster's.
    pub(crate) fn fill(&self, stats: &mut ClusterStats) {
        stats.modules_shared = self.counts.shared.load(Ordering::Relaxed);
        stats.modules_fetched = self.counts.fetched.load(Ordering::Relaxed);
        stats.modules_refused = self.counts.refused.load(Ordering::Relaxed);
    }

    /// Shares a version just deployed here, in the background (a deploy does not wait for
    /// NATS); a failure is logged and counted.
    pub(crate) fn share_in_background(self: &Arc<Self>, name: &str, version: &str) {
        let Some(kernel) = self.cluster.kernel.upgrade() else {
            return;
        };
        let (this, name, version) = (self.clone(), name.to_owned(), version.to_owned());
        kernel.runtime.spawn(async move {
            if let Err(e) = this.share(&name, &version, Write::Always).await {
                this.counts.refused.fetch_add(1, Ordering::Relaxed);
                tracing::error!(module = %name, version = %version, error = %crate::error::chain(&e), "a module version deployed here was not shared with the cluster");
            }
        });
    }

    /// Stores a version of this node's registry in the cluster: its bytes (unless stored),
    /// then its record, and its name's current version if the bucket has none.
    pub(super) async fn share(
        &self,
        name: &str,
        version: &str,
        write: Write,
    ) -> Result<(), ModuleSyncError> {
        let unknown = || ModuleSyncError::Unknown {
            name: name.to_owned(),
            version: version.to_owned(),
        };
        let module = self
            .modules
            .get_version(name, version)
            .ok_or_else(unknown)?;
        let record = Record {
            name: name.to_owned(),
            version: version.to_owned(),
            hash: module.hash.to_string(),
            grants: module.grants.clone(),
        };
        let key = version_key(name, version);
        if write == Write::IfAbsent
            && let Some(theirs) = self.record(&key).await?
        {
            if theirs.hash != record.hash {
                return Err(ModuleSyncError::Conflict {
                    name: name.to_owned(),
                    version: version.to_owned(),
                    hash: theirs.hash,
                    here: record.hash,
                });
            }
            if theirs == record {
                return Ok(());
            }
        }
        let stored = matches!(self.objects.info(&record.hash).await, Ok(info) if !info.deleted);
        if !stored {
            let mut bytes: &[u8] = &module.bytes;
            self.objects
                .put(record.hash.as_str(), &mut bytes)
                .await
                .map_err(|e| ClusterError::jetstream("storing a module", e))?;
        }
        self.versions
            .put(&key, wire::encode(&record).into())
            .await
            .map_err(|e| ClusterError::jetstream("recording a module version", e))?;
        if let Some(current) = self.modules.get(name) {
            match (self.versions)
                .create(
                    current_key(name),
                    current.version.as_bytes().to_vec().into(),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(ClusterError::jetstream("recording a current version", e).into());
                }
            }
        }
        self.counts.shared.fetch_add(1, Ordering::Relaxed);
        tracing::info!(module = name, version, hash = %&record.hash[..12], "module version shared with the cluster");
        Ok(())
    }

    /// The record at `key`, if the bucket has one that decodes.
    async fn record(&self, key: &str) -> Result<Option<Record>, ModuleSyncError> {
        let value = (self.versions.get(key).await)
            .map_err(|e| ClusterError::jetstream("reading a module version", e))?;
        Ok(value.and_then(|v| wire::decode(&v).ok()))
    }

    /// Makes sure this node has `name@version`, as the cluster has it (of `hash`, if given):
    /// fetched and deployed if not.
    pub(super) async fn ensure(
        &self,
        name: &str,
        version: &str,
        hash: Option<&str>,
    ) -> Result<(), ModuleSyncError> {
        let here = self.modules.get_version(name, version);
        if let Some(module) = &here
            && hash.is_none_or(|h| h == &*module.hash)
        {
            return Ok(());
        }
        let record = (self.record(&version_key(name, version)).await?).ok_or_else(|| {
            ModuleSyncError::Unknown {
                name: name.to_owned(),
                version: version.to_owned(),
            }
        })?;
        self.take(record).await.map(drop)
    }

    /// Deploys a version the cluster records, unless this node has those bytes already;
    /// true if it deployed it.
    async fn take(&self, record: Record) -> Result<bool, ModuleSyncError> {
        let Record {
            name,
            version,
            hash,
            grants,
        } = record;
        if let Some(module) = self.modules.get_version(&name, &version)
            && *module.hash == *hash
            && module.grants == grants
        {
            return Ok(false);
        }
        let Some(kernel) = self.cluster.kernel.upgrade() else {
            return Ok(false);
        };
        let limit = kernel.config.max_module_bytes;
        let mut object = self.objects.get(&hash).await.map_err(|e| {
            if e.kind() == object_store::GetErrorKind::NotFound {
                ModuleSyncError::Missing {
                    name: name.clone(),
                    version: version.clone(),
                    hash: hash.clone(),
                }
            } else {
                ClusterError::jetstream("fetching a module", e).into()
            }
        })?;
        let too_large = |size| ModuleSyncError::TooLarge {
            name: name.clone(),
            version: version.clone(),
            size,
            limit,
        };
        let size = u64::try_from(object.info().size).unwrap_or(u64::MAX);
        if size > limit {
            return Err(too_large(size));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        (&mut object)
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| ClusterError::jetstream("fetching a module", e))?;
        if bytes.len() as u64 > limit {
            return Err(too_large(bytes.len() as u64));
        }
        let got = content_hash(&bytes);
        if got != hash {
            return Err(ModuleSyncError::Corrupt {
                name,
                version,
                hash,
                got,
            });
        }
        // Other bytes under a version that actors run here are refused, as by hand.
        let replace = running(&kernel, &name, &version) == 0;
        let modules = self.modules.clone();
        let (n, v) = (name.clone(), version.clone());
        // A compile takes seconds for a big module: off the async threads.
        let deployed =
            tokio::task::spawn_blocking(move || modules.deploy(&n, &v, &bytes, &grants, replace))
                .await
                .map_err(|e| ClusterError::jetstream("deploying a fetched module", e))?;
        let refused = |source| ModuleSyncError::Refused {
            name: name.clone(),
            version: version.clone(),
            source,
        };
        let new = deployed.map_err(refused)?;
        if new {
            self.counts.fetched.fetch_add(1, Ordering::Relaxed);
            tracing::info!(module = %name, version = %version, hash = %&hash[..12.min(hash.len())], "module version deployed from the cluster");
            let body = format!("{name}@{version}");
            (self.cluster).announce(&kernel, MODULES_TOPIC, MODULE_DEPLOYED_KIND, &body);
        }
        Ok(new)
    }

    /// Takes a version the bucket records; a failure is logged, counted and announced.
    async fn take_or_report(&self, record: Record) {
        let label = format!("{}@{}", record.name, record.version);
        if let Err(e) = self.take(record).await {
            self.counts.refused.fetch_add(1, Ordering::Relaxed);
            let why = crate::error::chain(&e);
            tracing::error!(module = %label, error = %why, "a module version of the cluster could not be deployed on this node");
            if let Some(kernel) = self.cluster.kernel.upgrade() {
                let body = format!("{label}: {why}");
                (self.cluster).announce(&kernel, MODULES_TOPIC, MODULE_REFUSED_KIND, &body);
            }
        }
    }

    /// Makes the bucket's current version of `name` this node's, if it has that version.
    fn follow_current(&self, name: &str, version: &str) {
        match self.modules.set_current(name, version) {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!(module = name, version, "current version not deployed here")
            }
            Err(e) => {
                tracing::warn!(module = name, version, error = %crate::error::chain(&e), "the cluster's current version was not recorded here")
            }
        }
    }

    /// Records the version every node moved to as the current one, in the bucket and here.
    pub(super) async fn set_current(&self, name: &str, version: &str) -> Result<(), BoxError> {
        (self.versions)
            .put(current_key(name), version.as_bytes().to_vec().into())
            .await?;
        self.modules.set_current(name, version)?;
        Ok(())
    }

    /// Deploys every version the bucket records and this node lacks, then follows the
    /// bucket's current versions.
    async fn catch_up(&self) {
        let keys: Vec<String> = match self.versions.keys().await {
            Ok(keys) => keys.filter_map(|k| async move { k.ok() }).collect().await,
            Err(e) => {
                tracing::error!(error = %e, "the cluster's module versions could not be listed");
                return;
            }
        };
        let mut currents = Vec::new();
        for key in keys {
            if let Some(name) = key.strip_prefix("c.") {
                currents.push((name.to_owned(), key));
                continue;
            }
            match self.record(&key).await {
                Ok(Some(record)) => self.take_or_report(record).await,
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(key, error = %crate::error::chain(&e), "a module version could not be read")
                }
            }
        }
        for (name, key) in currents {
            if let (Some(name), Ok(Some(version))) =
                (routes::name(&name), self.versions.get(&key).await)
            {
                self.follow_current(&name, &String::from_utf8_lossy(&version));
            }
        }
    }

    /// Handles one change of the bucket.
    async fn changed(&self, entry: kv::Entry) {
        if entry.operation != kv::Operation::Put {
            return; // a removal here is this node's own business (see README)
        }
        if let Some(name) = entry.key.strip_prefix("c.").and_then(routes::name) {
            self.follow_current(&name, &String::from_utf8_lossy(&entry.value));
            return;
        }
        match wire::decode::<Record>(&entry.value) {
            Ok(record) => self.take_or_report(record).await,
            Err(e) => {
                tracing::warn!(key = %entry.key, error = %e, "a module record did not decode")
            }
        }
    }
}

/// How a version's record is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Write {
    /// Over whatever the bucket has: a deploy here, the newest word.
    Always,
    /// Only if the bucket has none: what a joining node had before.
    IfAbsent,
}

/// Follows the bucket: versions and current versions written by any node.
async fn follow(shared: Arc<SharedModules>, mut watch: kv::Watch) {
    while let Some(entry) = watch.next().await {
        if shared.cluster.kernel.strong_count() == 0 {
            return; // the host is gone
        }
        match entry {
            Ok(entry) => shared.changed(entry).await,
            Err(e) => tracing::warn!(error = %e, "the module versions' watch failed"),
        }
    }
    tracing::warn!(
        "the module versions' watch ended: versions deployed elsewhere are no longer followed"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_names_and_versions_apart() {
        assert_eq!(version_key("versioned", "2"), "m.versioned.2");
        assert_eq!(version_key("a.b", "1.0"), "m.a=2Eb.1=2E0");
        assert_ne!(version_key("a.b", "c"), version_key("a", "b.c"));
        assert_eq!(current_key("a.b"), "c.a=2Eb");
        assert_eq!(routes::name("a=2Eb").as_deref(), Some("a.b"));
    }

    #[test]
    fn a_record_crosses_whole_and_garbage_does_not_decode() {
        let record = Record {
            name: "m".into(),
            version: "1".into(),
            hash: "ab".repeat(32),
            grants: vec!["wasi:http".into()],
        };
        let bytes = wire::encode(&record);
        assert_eq!(wire::decode::<Record>(&bytes).unwrap(), record);
        assert!(wire::decode::<Record>(&[0xff, 0xff, 0xff]).is_err());
    }
}
