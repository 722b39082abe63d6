//! `ActorSystem`: the public face of a host, and how the outside world (the CLI, an embedding
//! program, a test) deploys, spawns, sends, stops and shuts down. It wires the layers together
//! at start (engine, capabilities, module registry, kernel) and otherwise only delegates.

mod images;
mod metrics;
mod outside;
mod probe;
mod replay;
mod wiring;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

pub use self::images::{ImageInfo, SnapshotError};
pub use self::metrics::MetricsQuery;
use self::outside::{check_outside, deliver_outside, from_outside, tell_outside};
pub use self::probe::Probe;
pub use self::replay::{Dropped, Recovered, Replay, ReplayOptions};
use self::wiring::Wiring;
use crate::actor::launch::Launcher;
use crate::actor::mailbox::{SystemMsg, UserMsg};
use crate::actor::supervisor::Strategy;
use crate::address::{ActorPath, Address};
use crate::caps::Caps;
use crate::caps::messaging::ask::{self, Answer, AskError};
use crate::caps::persistence::entities::EntityOptions;
use crate::cluster::modules::{ModuleStores, SharedModules};
use crate::cluster::upgrades::UpgradeRequests;
use crate::cluster::{self, Cluster, ClusterConfig, ClusterError, ClusterStats};
use crate::config::HostConfig;
use crate::deploy::cache::ModuleStats;
use crate::deploy::modules::{DEFAULT_VERSION, ModuleInfo, Modules};
use crate::deploy::upgrade::{
    self, SetCurrent, UpgradeError, UpgradeOptions, UpgradeProgress, UpgradeReport, Upgrader,
    Upgrades,
};
use crate::error::{AddressError, HostError, ModuleError, SendError, ShutdownTimedOut, SpawnError};
use crate::guestlog::GuestLog;
use crate::kernel::Kernel;
use crate::kernel::deadletters::{DEAD_LETTERS_PATH, DeadLetter};
use crate::kernel::guardian::SupervisionEvent;
use crate::kernel::spawn::{Limits, SpawnOptions, SpawnRequest};
use crate::message::{Envelope, StopReason};
use crate::progress::Progress;
use crate::quota::Quota;
use crate::sandbox::arena::{StackStats, Stacks};
use crate::sandbox::parking::Sweeper;
use crate::sched::Scheduler;
use crate::stats::StatsSnapshot;
use crate::storage::{CommitStats, Database};

/// How long a graceful shutdown waits for queued guest log lines to be written.
const GUEST_LOG_FLUSH: Duration = Duration::from_secs(1);

/// Information about one live actor, as shown by `tree`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorInfo {
    /// Its address.
    pub address: Address,
    /// The module it runs, `None` for host endpoints such as probes.
    pub module: Option<String>,
    /// The version of that module it runs.
    pub version: Option<String>,
    /// Messages waiting in its mailbox.
    pub mailbox_depth: usize,
    /// Bytes of their bodies.
    pub mailbox_bytes: usize,
    /// What it was refused so far (quotas, reserved kinds, dropped log lines), by kind; only
    /// the kinds it was refused at least once.
    pub refusals: Vec<(Quota, u64)>,
    /// What it has done and used: messages, failures, restarts, memory, CPU time.
    pub stats: StatsSnapshot,
}

/// A host of wasm actors. Create one inside a tokio runtime with [`ActorSystem::new`].
pub struct ActorSystem {
    kernel: Arc<Kernel>,
    caps: Arc<Caps>,
    modules: Arc<Modules>,
    database: Option<Arc<Database>>,
    /// Where guest log lines go.
    guest_log: Arc<GuestLog>,
    /// The threads that run the actors.
    scheduler: Scheduler,
    /// Upgrades done so far, for the metrics.
    upgrades: Arc<Upgrades>,
    /// The actors' fiber stacks.
    stacks: Arc<Stacks>,
    /// Gives idle actors' stack pages back, if on.
    _sweeper: Option<Sweeper>,
    /// The cluster, once this host has joined one.
    cluster: std::sync::OnceLock<Arc<Cluster>>,
    /// This node's side of the cluster's modules, once it has joined.
    shared_modules: std::sync::OnceLock<Arc<SharedModules>>,
}

impl ActorSystem {
    /// Creates a system on the current tokio runtime: multi-threaded, with the time driver
    /// enabled (`enable_all`), which timers, asks and backoff need.
    pub fn new(config: HostConfig) -> Result<Self, HostError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| HostError::NoRuntime)?;
        let database = match &config.storage {
            Some(path) => Some(Arc::new(Database::open(path)?)),
            None => None,
        };
        let Wiring {
            caps,
            modules,
            guest_log,
            ticker,
            stacks,
            sweeper,
            reports,
        } = Wiring::new(&config, database.as_ref(), None)?;
        let scheduler = Scheduler::start(config.workers, runtime.clone())?;
        let kernel = Arc::new(Kernel::new(config, runtime, reports));
        kernel.plug(Arc::new(Launcher::new(
            caps.clone(),
            modules.clone(),
            scheduler.clone(),
            ticker,
        )));
        caps.started(&kernel);
        Ok(ActorSystem {
            kernel,
            caps,
            modules,
            database,
            guest_log,
            scheduler,
            upgrades: Arc::default(),
            stacks,
            _sweeper: sweeper,
            cluster: std::sync::OnceLock::new(),
            shared_modules: std::sync::OnceLock::new(),
        })
    }

    /// Deploys a module from a `.wasm` component file under `name` (version
    /// [`DEFAULT_VERSION`]).
    pub fn deploy_file(&self, name: &str, path: impl AsRef<Path>) -> Result<(), ModuleError> {
        self.deploy_file_version(name, DEFAULT_VERSION, path)
    }

    /// Deploys a module from the bytes of a `.wasm` component under `name`.
    pub fn deploy(&self, name: &str, bytes: &[u8]) -> Result<(), ModuleError> {
        self.deploy_version(name, DEFAULT_VERSION, bytes).map(drop)
    }

    /// Deploys a version of a module from a `.wasm` file.
    pub fn deploy_file_version(
        &self,
        name: &str,
        version: &str,
        path: impl AsRef<Path>,
    ) -> Result<(), ModuleError> {
        self.deploy_path(name, version, path.as_ref(), &[])
            .map(drop)
    }

    /// Deploys a version of a module from a `.wasm` file, with grants (see
    /// [`ActorSystem::deploy_granted`]). The path must be a regular file within
    /// [`HostConfig::max_module_bytes`], checked before it is read.
    pub fn deploy_path(
        &self,
        name: &str,
        version: &str,
        path: &Path,
        grants: &[String],
    ) -> Result<bool, ModuleError> {
        let bytes = Modules::read_file(path, self.kernel.config.max_module_bytes)?;
        self.deploy_granted(name, version, &bytes, grants)
    }

    /// Deploys a version of a module. The same bytes under the same name and version again
    /// are a no-op (returns false); other bytes replace that version if no actor runs it and
    /// are refused otherwise. With a database the version is recorded there, so a restarted
    /// host has it again.
    pub fn deploy_version(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
    ) -> Result<bool, ModuleError> {
        self.deploy_granted(name, version, bytes, &[])
    }

    /// Deploys a version of a module granted more than the defaults: `wasi:http` lets it make
    /// outgoing HTTP requests through the host. Without the grant such a component is refused,
    /// and a grant no capability gives is an error.
    pub fn deploy_granted(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
        grants: &[String],
    ) -> Result<bool, ModuleError> {
        let in_use = self.running(name, version) > 0;
        let new = self.modules.deploy(name, version, bytes, grants, !in_use)?;
        if new && let Some(shared) = self.shared_modules.get() {
            shared.share_in_background(name, version);
        }
        Ok(new)
    }

    /// The names of the deployed modules.
    pub fn modules(&self) -> Vec<String> {
        self.modules.names()
    }

    /// Every deployed module version, with its content hash and whether it is current.
    pub fn module_list(&self) -> Vec<ModuleInfo> {
        self.modules.list()
    }

    /// Makes every actor of module `name` spawned from now on hibernate once idle for `after`
    /// (README, "Snapshots and moves"): its top-level actors and the children its actors
    /// spawn, whichever version they run, unless spawned with their own
    /// `SpawnOptions::hibernate_after`; entities passivate instead. `None` turns it off. The module must have snapshots on. Not recorded in the
    /// database: a manifest's `hibernate_after_ms` sets it again at every start.
    pub fn hibernate_module(&self, name: &str, after: Option<Duration>) -> Result<(), ModuleError> {
        self.modules.set_hibernation(name, after)
    }

    /// The actors' fiber stacks: how many are live, how many of those are given back now, and
    /// how many times an idle one's pages were given back (see
    /// [`HostConfig::release_idle_stacks`]).
    pub fn stack_stats(&self) -> StackStats {
        self.stacks.stats()
    }

    /// How many modules were compiled and how many loaded from the compiled cache.
    pub fn module_stats(&self) -> ModuleStats {
        self.modules.stats()
    }

    /// Upgrades the actor at `target` (a path), or every actor of the module `target` (a name),
    /// to `version` of its module; see [`UpgradeReport`].
    pub async fn upgrade(
        &self,
        target: &str,
        version: &str,
    ) -> Result<UpgradeReport, UpgradeError> {
        self.upgrade_with(target, version, UpgradeOptions::default(), None)
            .await
    }

    /// [`ActorSystem::upgrade`] with options and a channel that receives progress. With
    /// `options.canary`, `target` must be a module name: a few of its actors go first and are
    /// watched, and the rest follow only if those did no worse ([`Canary`](crate::Canary)); the report's
    /// `canary` says what happened.
    ///
    /// In a cluster, a module is upgraded on every live node and the report covers them all,
    /// each node's part in its `nodes`; the canary stage runs on one node (this one if it has
    /// actors to move, else the first by name that has) before the others are asked. An actor
    /// path is upgraded on the node it lives on.
    pub async fn upgrade_with(
        &self,
        target: &str,
        version: &str,
        options: UpgradeOptions,
        progress: Option<tokio::sync::mpsc::UnboundedSender<UpgradeProgress>>,
    ) -> Result<UpgradeReport, UpgradeError> {
        if let Some(shared) = self.shared_modules.get() {
            return shared.upgrade(target, version, options, progress).await;
        }
        self.upgrader()
            .upgrade(target, version, options, progress, SetCurrent::Here)
            .await
    }

    fn upgrader(&self) -> Upgrader<'_> {
        Upgrader {
            kernel: &self.kernel,
            modules: &self.modules,
            counts: &self.upgrades,
        }
    }

    /// How many live actors run this version of this module.
    fn running(&self, name: &str, version: &str) -> usize {
        upgrade::running(&self.kernel, name, version)
    }

    /// Removes one version of a module (or all of them): refused while a live actor runs it.
    pub fn remove_module(&self, name: &str, version: Option<&str>) -> Result<(), ModuleError> {
        let listed = self.modules.list();
        let versions: Vec<&ModuleInfo> = listed
            .iter()
            .filter(|m| m.name == name && version.is_none_or(|v| v == m.version))
            .collect();
        if versions.is_empty() {
            return Err(ModuleError::Unknown {
                name: name.to_owned(),
                version: version.map(str::to_owned),
            });
        }
        for info in &versions {
            let actors = self.running(name, &info.version);
            if actors > 0 {
                return Err(ModuleError::InUse {
                    name: name.to_owned(),
                    version: info.version.clone(),
                    actors,
                });
            }
        }
        self.modules.remove(name, version)?;
        tracing::info!(
            module = name,
            version = version.unwrap_or("*"),
            "module removed"
        );
        Ok(())
    }

    /// Spawns a top-level actor at `/user/<name>` (give the name or the full path).
    pub fn spawn(
        &self,
        name_or_path: &str,
        module: &str,
        init: &[u8],
    ) -> Result<Address, SpawnError> {
        self.spawn_with(name_or_path, module, init, SpawnOptions::default())
    }

    /// Joins a cluster of hosts on NATS as the node `config.node`; see [`ClusterConfig`].
    /// Without a call of this, nothing connects and delivery is the single host's.
    /// The modules deployed here are stored in the cluster, and those of the cluster deployed
    /// here, before it returns; from then on a deploy on any node reaches every node.
    pub async fn join_cluster(&self, config: ClusterConfig) -> Result<(), ClusterError> {
        let stores = ModuleStores::open(&config).await?;
        let requests = UpgradeRequests::open(&stores, &config).await?;
        let cluster = cluster::join(&self.kernel, self.caps.clone(), config).await?;
        self.cluster
            .set(cluster.clone())
            .map_err(|_| ClusterError::AlreadyJoined)?;
        let (modules, upgrades) = (self.modules.clone(), self.upgrades.clone());
        let shared = SharedModules::start(stores, cluster, modules, upgrades).await;
        shared.serve(requests);
        self.shared_modules
            .set(shared)
            .map_err(|_| ClusterError::AlreadyJoined)
    }

    /// Claims the top-level name of `path` for this node before spawning it there; refused
    /// if a live node of the cluster has it. Without a cluster, every name is this host's.
    pub async fn claim(&self, path: &str) -> Result<(), ClusterError> {
        match self.cluster.get() {
            Some(cluster) => cluster.claim(path).await,
            None => Ok(()),
        }
    }

    /// Moves the top-level actor at `path` of this node to the node `to`, live: it continues
    /// there with its memory, mailbox and incarnation (its module deployed with snapshots),
    /// and messages sent meanwhile reach it there, in order. Returns its address (the same).
    /// A refused or failed move leaves it serving on here.
    pub async fn move_actor(&self, path: &str, to: &str) -> Result<Address, cluster::MoveError> {
        let cluster = self.cluster.get().ok_or(cluster::MoveError::NotClustered)?;
        cluster.move_out(&self.kernel, path, to).await
    }

    /// This node's name in its cluster, if it has joined one.
    pub fn node(&self) -> Option<&str> {
        self.cluster.get().map(|c| c.node())
    }

    /// The live nodes of the cluster, this one included (empty without a cluster).
    pub fn cluster_nodes(&self) -> Vec<String> {
        self.cluster.get().map(|c| c.nodes()).unwrap_or_default()
    }

    /// The node a send from here to `path` goes to, as this node's mirror of the cluster's
    /// claims knows it now (this node's own name for its own paths); `None` without a cluster
    /// or if no node holds it. Another node's fresh claim reaches the mirror through a
    /// key-value watch, milliseconds after its `claim` returned.
    pub fn node_of(&self, path: &str) -> Option<String> {
        self.cluster.get().and_then(|c| c.node_of(path))
    }

    /// Figures of this node's part in its cluster.
    pub fn cluster_stats(&self) -> Option<ClusterStats> {
        let mut stats = self.cluster.get()?.stats();
        if let Some(shared) = self.shared_modules.get() {
            shared.fill(&mut stats);
        }
        Some(stats)
    }

    /// Spawns a top-level actor with its own limits.
    pub fn spawn_with(
        &self,
        name_or_path: &str,
        module: &str,
        init: &[u8],
        options: SpawnOptions,
    ) -> Result<Address, SpawnError> {
        let limits = Limits::of(&self.kernel.config, &options);
        let path = match name_or_path.strip_prefix("/user/") {
            Some(name) => ActorPath::user_root().child(name),
            None if name_or_path.starts_with('/') => Err(AddressError::InvalidPath(
                name_or_path.to_owned(),
                "actors spawned from outside live directly under /user".to_owned(),
            )),
            None => ActorPath::user_root().child(name_or_path),
        }?;
        if let Some(node) = self
            .cluster
            .get()
            .and_then(|c| c.owned_elsewhere(path.as_str()))
        {
            return Err(SpawnError::NameTaken(format!("{path} (on node {node})")));
        }
        let cluster = self.cluster.get();
        let actor = self.kernel.spawn_top_level(SpawnRequest {
            path: path.clone(),
            module: module.to_owned(),
            init: init.to_vec(),
            parent: None,
            limits,
            passivate_after: None,
            hibernate_after: options.hibernate_after,
            reservation: None,
            incarnation: None,
            restore: crate::kernel::spawn::Restore::No,
        })?;
        if let Some(cluster) = cluster {
            cluster.claim_in_background(&self.kernel, path.as_str());
        }
        Ok(actor.address)
    }

    /// Gives the top-level actor at `path` a restart strategy of its own instead of the
    /// guardian's (`root_strategy`); set it before spawning. Its scope is always one-for-one.
    pub fn set_top_level_strategy(&self, path: &str, strategy: Strategy) {
        self.kernel.guardian.set_strategy(path, strategy);
    }

    /// Sends a message from outside (no sender) to an absolute path.
    pub fn tell(&self, to: &str, kind: &str, body: Vec<u8>) -> Result<(), SendError> {
        tell_outside(&self.kernel, None, to, kind, body)
    }

    /// Stops the actor at `path` after its current message; false if none lives there.
    pub fn stop(&self, path: &str) -> bool {
        self.kernel.stop(path, StopReason::Normal)
    }

    /// Queues a poison pill: the actor stops once it has handled what was queued before it.
    pub fn poison_pill(&self, path: &str) -> bool {
        self.kernel
            .registry
            .get(path)
            .is_some_and(|a| a.system.is_some() && a.user.send(UserMsg::PoisonPill).is_ok())
    }

    /// The current address of the actor at `path`, if one lives there.
    pub fn lookup(&self, path: &str) -> Option<Address> {
        self.kernel.registry.get(path).map(|a| a.address)
    }

    /// Resolves once the given incarnation has terminated (at once if it already has).
    pub async fn terminated(&self, address: &Address) {
        let lifeline = match self.kernel.registry.get(address.path.as_str()) {
            Some(a) if a.address.incarnation == address.incarnation => a.lifeline,
            _ => return,
        };
        lifeline.terminated().await;
    }

    /// Resolves once no actor is left under `/user` (top-level actors all stopped).
    pub async fn user_actors_stopped(&self) {
        self.kernel.guardian.emptied().await;
    }

    /// All live actors and probes, sorted by path.
    pub fn tree(&self) -> Vec<ActorInfo> {
        self.kernel
            .registry
            .snapshot()
            .into_iter()
            .map(|a| ActorInfo {
                mailbox_depth: a.depth.messages(),
                mailbox_bytes: a.depth.bytes(),
                refusals: a
                    .stats
                    .as_ref()
                    .map(|s| s.refusals.snapshot())
                    .unwrap_or_default(),
                stats: a.stats.as_ref().map(|s| s.snapshot()).unwrap_or_default(),
                version: a.running_version().map(|v| v.to_string()),
                address: a.address,
                module: a.module.map(|m| m.to_string()),
            })
            .collect()
    }

    /// How many dead letters this system has seen.
    pub fn dead_letter_count(&self) -> u64 {
        self.kernel.dead_letters.count()
    }

    /// A stream of the dead letters from now on.
    pub fn subscribe_dead_letters(&self) -> broadcast::Receiver<DeadLetter> {
        self.kernel.dead_letters.subscribe()
    }

    /// Asks from outside: sends the request with a fresh `/system/ask/<id>` sender and waits for
    /// the first reply, at most `timeout`; a request refused as a tell would be (a full mailbox)
    /// is that error at once.
    pub async fn ask(
        &self,
        to: &str,
        kind: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Envelope, AskError> {
        check_outside(&self.kernel, to, &body)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        if let Some(endpoint) = ask::endpoint(
            &self.kernel,
            timeout,
            Answer::Outside(tx),
            &self.caps.messaging.open_asks,
        ) {
            let request = from_outside(Some(endpoint.clone()), kind, body);
            // A request that was not queued (a full mailbox) fails now, not at the deadline.
            if let Err(refused) = deliver_outside(&self.kernel, to, request) {
                ask::withdraw(&self.kernel, &endpoint);
                return Err(refused.into());
            }
        }
        rx.await.unwrap_or(Err(AskError::Timeout(timeout)))
    }

    /// Replies that arrived after their ask had been answered or had timed out (dropped).
    pub fn late_replies(&self) -> u64 {
        self.caps.messaging.late_replies()
    }

    /// Publishes from outside (no sender) to every subscriber of `topic`; returns how many.
    pub fn publish(&self, topic: &str, kind: &str, body: Vec<u8>) -> u32 {
        self.caps
            .messaging
            .publish(&self.kernel, topic, from_outside(None, kind, body))
    }

    /// Subscribes a fresh probe (`/system/sub-<n>`) to `topic`: its `recv` yields the topic's
    /// messages in publish order. Dropping it unsubscribes.
    pub fn subscribe(&self, topic: &str) -> Result<Probe, SpawnError> {
        let n = self.kernel.peek_incarnation();
        let probe = self.probe(&format!("sub-{n}"))?;
        self.caps.messaging.topics.join(topic, probe.address());
        Ok(probe)
    }

    /// Sends from outside to the member of `group` with the shortest mailbox; false if the group
    /// has no live member.
    pub fn tell_group(&self, group: &str, kind: &str, body: Vec<u8>) -> bool {
        self.caps
            .messaging
            .tell_group(&self.kernel, group, from_outside(None, kind, body))
    }

    /// Sends from outside to every member of `group`; returns how many it reached.
    pub fn broadcast_group(&self, group: &str, kind: &str, body: Vec<u8>) -> u32 {
        self.caps
            .messaging
            .broadcast_group(&self.kernel, group, from_outside(None, kind, body))
    }

    /// Schedules a message from outside (no sender) to `to` after `delay`, then every `period`;
    /// returns the timer id for [`ActorSystem::cancel_timer`].
    pub fn schedule(
        &self,
        to: &str,
        kind: &str,
        body: Vec<u8>,
        delay: Duration,
        period: Option<Duration>,
    ) -> Result<u64, SendError> {
        ActorPath::check(to)?;
        let envelope = from_outside(None, kind, body);
        Ok(self
            .caps
            .timers
            .schedule(None, to, None, envelope, delay, period))
    }

    /// Cancels a timer scheduled with [`ActorSystem::schedule`]; false if it is gone.
    pub fn cancel_timer(&self, id: u64) -> bool {
        self.caps.timers.cancel(None, id)
    }

    /// Timers pending in the system.
    pub fn pending_timers(&self) -> usize {
        self.caps.timers.pending()
    }

    /// The host's metrics now, in the OpenMetrics text format (served at `/metrics`; Prometheus
    /// reads it). Names are listed in the README's Observability section.
    pub fn metrics(&self, query: &MetricsQuery) -> String {
        metrics::scrape(
            &metrics::Sources {
                kernel: &self.kernel,
                caps: &self.caps,
                upgrades: &self.upgrades,
                guest_log: &self.guest_log,
                stacks: self.stacks.stats(),
                cluster: self.cluster.get().map(|c| &**c),
            },
            query,
        )
    }

    /// Long work under way: compiles, rolling upgrades, recoveries of large journals.
    pub fn progress(&self) -> Vec<Progress> {
        self.kernel.reports.running()
    }

    /// Updates of long work from now on (see [`ActorSystem::progress`]); a slow reader loses
    /// updates, never the work.
    pub fn subscribe_progress(&self) -> broadcast::Receiver<Progress> {
        self.kernel.reports.subscribe()
    }

    /// A stream of supervision decisions from now on: which actor failed, why, and what was done.
    pub fn subscribe_supervision(&self) -> broadcast::Receiver<SupervisionEvent> {
        self.kernel.guardian.subscribe()
    }

    /// Registers an external endpoint at `/system/<name>` that receives messages, for tests and
    /// embedding programs. It is removed when dropped.
    pub fn probe(&self, name: &str) -> Result<Probe, SpawnError> {
        let path = ActorPath::system_root().child(name)?;
        if path.as_str() == DEAD_LETTERS_PATH {
            return Err(SpawnError::NameTaken(path.to_string()));
        }
        Probe::register(self.kernel.clone(), self.caps.clone(), path)
    }

    /// Stops every actor (children first, `stopping` with reason shutdown) and waits for them, up
    /// to the configured shutdown timeout. Names the paths still alive at the deadline.
    pub async fn shutdown(&self) -> Result<(), ShutdownTimedOut> {
        self.kernel.begin_shutdown();
        self.signal_top_level(StopReason::Shutdown);
        let wait = self.user_actors_stopped();
        if tokio::time::timeout(self.kernel.config.shutdown_timeout, wait)
            .await
            .is_err()
        {
            let alive: Vec<String> = self
                .tree()
                .into_iter()
                .filter(|i| i.module.is_some())
                .map(|i| i.address.path.to_string())
                .collect();
            let timed_out = ShutdownTimedOut { alive };
            tracing::warn!("{timed_out}");
            return Err(timed_out);
        }
        if let Some(shared) = self.shared_modules.get() {
            shared.stop();
        }
        if let Some(cluster) = self.cluster.get() {
            cluster.leave().await;
        }
        self.caps.shutdown().await;
        if let Some(db) = &self.database {
            db.close();
        }
        if !self.guest_log.flush(GUEST_LOG_FLUSH).await {
            tracing::warn!("guest log lines were still queued at shutdown: the log writer is slow");
        }
        tracing::info!("actor system shut down");
        Ok(())
    }

    /// Guest log lines (`host.log`, stdout, stderr) dropped so far because the log writer fell
    /// behind and the queue was full (see [`HostConfig::guest_log_queue`]).
    pub fn log_dropped(&self) -> u64 {
        self.guest_log.dropped()
    }

    /// Registers an entity kind: messages to `/user/<kind>/<id>` activate an actor of `module`
    /// (its init is the id) when none is live. Entities with recovered messages or reminders
    /// waiting are activated at once; returns how many.
    pub fn register_entity(
        &self,
        kind: &str,
        module: &str,
        options: EntityOptions,
    ) -> Result<usize, SpawnError> {
        if self.modules.get(module).is_none() {
            return Err(SpawnError::UnknownModule(module.to_owned()));
        }
        self.caps
            .persistence
            .register_entity(&self.kernel, kind, module, options)
    }

    /// How many actors (and probes and ask endpoints) are live now.
    pub fn live_actors(&self) -> usize {
        self.kernel.registry.len()
    }

    /// The committer's counters, if the host has a database.
    pub fn commit_stats(&self) -> Option<CommitStats> {
        self.caps.persistence.stats()
    }

    /// Waits until the persistence store can be used: a JetStream store connects (a node
    /// restarted after a crash waits out its previous run's liveness). Call it before spawning
    /// persistent actors, so their recoveries do not wait. The local store is always ready.
    pub async fn storage_ready(&self) -> Result<(), HostError> {
        self.caps.persistence.ready().await
    }

    /// The database file, if the host has one.
    pub fn store_path(&self) -> Option<&Path> {
        self.database.as_ref().map(|db| db.path())
    }

    fn signal_top_level(&self, reason: StopReason) {
        for actor in self.kernel.guardian.children() {
            actor.signal(SystemMsg::Stop(reason.clone()));
        }
    }
}

impl Drop for ActorSystem {
    fn drop(&mut self) {
        // Without a graceful shutdown the actors would outlive their handle: stop them.
        self.kernel.begin_shutdown();
        self.signal_top_level(StopReason::Shutdown);
        // The workers leave once the last actor has stopped.
        self.scheduler.close();
    }
}
