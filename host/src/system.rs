//! `ActorSystem`: the public face of a host. It owns the engine, the deployed modules, the
//! registry of live actors and the dead-letter office, and it is how the outside world (the CLI,
//! an embedding program, a test) deploys, spawns, sends, stops and shuts down.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use wasmtime::Engine;
use wasmtime::component::Linker;

use crate::address::{ActorPath, Address};
use crate::ask::{Answer, AskError};
use crate::cell::{self, CellSpec};
use crate::committer::CommitStats;
use crate::config::HostConfig;
use crate::deadletters::{DEAD_LETTERS_PATH, DeadLetter, DeadLetterReason, DeadLetters};
use crate::engine::{EpochTicker, build_engine};
use crate::entities::{Entities, EntityOptions};
use crate::error::{AddressError, HostError, ModuleError, SendError, SpawnError};
use crate::instance::{self, Limits};
use crate::mailbox::{self, ActorRef, Refused, SystemMsg, UserMsg};
use crate::message::{Envelope, StopReason};
use crate::module::{DEFAULT_VERSION, ModuleInfo, ModuleStats, Modules};
use crate::persistence::{Parked, Persistence};
use crate::pubsub::Directory;
use crate::registry::Registry;
use crate::store::{ModuleRow, Store};
use crate::supervisor::{Directive, Strategy, Supervisor};
use crate::timers::{TimerTarget, Timers};
use crate::upgrade::{UpgradeError, UpgradeOptions, UpgradeProgress, UpgradeReport};

/// The kind of the message a watcher receives when a watched incarnation has terminated.
pub const TERMINATED_KIND: &str = "mote.terminated";

/// A supervision decision, published for observers (operators, tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupervisionEvent {
    /// The actor that failed.
    pub child: Address,
    /// Why it failed, as its supervisor saw it.
    pub error: String,
    /// What its supervisor (or the `/user` guardian) decided.
    pub directive: Directive,
}

/// Per-spawn limits; `None` takes the host's default from [`HostConfig`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpawnOptions {
    /// Messages the mailbox holds before sends are refused.
    pub mailbox_capacity: Option<usize>,
    /// Bytes of linear memory the actor may grow to (at most the host's `memory_limit`).
    pub memory_limit: Option<usize>,
    /// CPU time one message may take.
    pub cpu_deadline: Option<Duration>,
}

/// State shared by the system handle, every cell and every host import.
pub(crate) struct Shared {
    pub(crate) config: HostConfig,
    pub(crate) modules: Modules,
    pub(crate) registry: Registry,
    pub(crate) dead_letters: DeadLetters,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) next_incarnation: AtomicU64,
    pub(crate) timers: Arc<Timers>,
    pub(crate) topics: Directory,
    pub(crate) groups: Directory,
    /// Replies that reached an ask after it was resolved.
    pub(crate) late_replies: AtomicU64,
    shutting_down: AtomicBool,
    /// The children of the `/user` guardian.
    pub(crate) top_level: Mutex<HashMap<ActorPath, ActorRef>>,
    pub(crate) top_level_count: watch::Sender<usize>,
    /// The `/user` guardian's restart bookkeeping for top-level actors.
    guardian: Mutex<Supervisor>,
    /// Top-level actors with a strategy of their own (manifest `[actor.supervision]`), by path.
    strategies: Mutex<HashMap<String, Supervisor>>,
    supervision: broadcast::Sender<SupervisionEvent>,
    /// The store and committer, when the host has a database.
    pub(crate) persistence: Option<Persistence>,
    /// Registered entity kinds (virtual actors).
    pub(crate) entities: Entities,
    /// This very `Shared`, for code that holds only `&self` and must spawn (activation).
    pub(crate) me: Weak<Shared>,
    _ticker: Option<EpochTicker>,
}

impl Shared {
    /// True once a shutdown has begun.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Claims `path`, creates the mailbox and starts the cell. The caller records the child.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        path: ActorPath,
        module: &str,
        init: Vec<u8>,
        parent: Option<Address>,
        limits: Limits,
    ) -> Result<ActorRef, SpawnError> {
        let (handle, spec) = self.prepare(path, module, init, parent, limits, None)?;
        cell::spawn(spec);
        Ok(handle)
    }

    /// Claims `path` and creates the mailbox (fed first with what was parked for the path);
    /// the cell starts when the spec is handed to [`cell::spawn`].
    pub(crate) fn prepare(
        self: &Arc<Self>,
        path: ActorPath,
        module: &str,
        init: Vec<u8>,
        parent: Option<Address>,
        limits: Limits,
        passivate_after: Option<Duration>,
    ) -> Result<(ActorRef, CellSpec), SpawnError> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(SpawnError::ShuttingDown);
        }
        if path.is_root() {
            return Err(AddressError::IsRoot(path.to_string()).into());
        }
        let module = self
            .modules
            .get(module)
            .ok_or_else(|| SpawnError::UnknownModule(module.to_owned()))?;
        let address = Address {
            path,
            incarnation: self.next_incarnation.fetch_add(1, Ordering::Relaxed),
        };
        let (handle, mut mailbox) =
            mailbox::mailbox(address, Some(&module), limits.mailbox_capacity);
        let parked = match &self.persistence {
            Some(p) => p.take_parked(handle.address.path.as_str()),
            None => Vec::new(),
        };
        if !parked.is_empty() {
            tracing::info!(actor = %handle.address, items = parked.len(), "recovered messages and reminders handed over");
        }
        // Parked messages go first: nobody else can reach the mailbox before it is registered.
        self.unpark(&handle, parked);
        if let Err(taken) = self.registry.insert(handle.clone()) {
            // Lost a race for the path: what was parked waits for the winner's successor.
            let mut back = Vec::new();
            while let Ok(UserMsg::Message(envelope)) = mailbox.try_next() {
                back.push(Parked::Message(envelope));
            }
            if let Some(p) = &self.persistence {
                p.park(taken.address.path.as_str(), back);
            }
            return Err(SpawnError::NameTaken(taken.address.path.to_string()));
        }
        tracing::debug!(actor = %handle.address, module = %module.name, "spawned");
        let spec = CellSpec {
            shared: self.clone(),
            me: handle.clone(),
            parent,
            module,
            init,
            mailbox,
            limits,
            passivate_after,
        };
        Ok((handle, spec))
    }

    /// Gives back the path of a child whose step was never committed: its cell never ran.
    pub(crate) fn abandon(&self, spec: CellSpec) {
        let CellSpec {
            me,
            parent,
            mut mailbox,
            ..
        } = spec;
        self.registry.remove(&me.address);
        mailbox.user.close();
        while let Ok(crate::mailbox::UserMsg::Message(envelope)) = mailbox.try_next() {
            self.dead_letter(envelope, me.address.to_string(), DeadLetterReason::Stopped);
        }
        me.lifeline.mark_terminated();
        self.child_terminated(parent.as_ref(), &me.address);
    }

    /// The limits of an actor spawned with `options`: the host's defaults where they say
    /// nothing, and never more memory than the host's limit.
    pub(crate) fn limits_for(&self, options: &SpawnOptions) -> Limits {
        let config = &self.config;
        Limits {
            mailbox_capacity: options
                .mailbox_capacity
                .map_or(config.mailbox_capacity, |n| n.max(1)),
            memory: options
                .memory_limit
                .map_or(config.memory_limit, |m| m.min(config.memory_limit)),
            cpu_deadline: options.cpu_deadline.unwrap_or(config.cpu_deadline),
        }
    }

    /// Tells `watcher` that `target` has terminated.
    pub(crate) fn notify_terminated(&self, watcher: &Address, target: &Address) {
        let envelope = Envelope::new(Some(target.clone()), TERMINATED_KIND.to_owned(), Vec::new());
        self.tell_host(watcher, envelope);
    }

    /// Delivers a host message to one incarnation, bypassing its mailbox capacity.
    pub(crate) fn tell_host(&self, to: &Address, envelope: Envelope) {
        let refused = self.registry.with(to.path.as_str(), |actor| match actor {
            Some(a) if a.address.incarnation == to.incarnation => a.tell_host(envelope).err(),
            _ => Some(Refused::Closed(envelope)),
        });
        if let Some(Refused::Closed(envelope) | Refused::Full(envelope)) = refused {
            self.dead_letter(envelope, to.to_string(), DeadLetterReason::Stopped);
        }
    }

    /// A failed actor asks for a directive: from its parent, or from the guardian at the top.
    pub(crate) fn report_failure(&self, me: &ActorRef, parent: Option<&Address>, error: String) {
        match parent {
            Some(parent) => {
                let delivered = self.registry.with(parent.path.as_str(), |p| {
                    p.is_some_and(|p| {
                        p.address.incarnation == parent.incarnation
                            && p.signal(SystemMsg::Failed {
                                child: me.address.clone(),
                                error: error.clone(),
                            })
                    })
                });
                if !delivered {
                    // The parent is gone; its stop reaches this actor too. Stop meanwhile.
                    me.signal(SystemMsg::Stop(StopReason::ParentFailure(error)));
                }
            }
            None => {
                let key = me.address.path.as_str();
                let now = std::time::Instant::now();
                let decision = match self
                    .strategies
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_mut(key)
                {
                    Some(own) => own.decide(key, None, now),
                    None => self
                        .guardian
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .decide(key, None, now),
                };
                let directive = match decision.directive {
                    Directive::Escalate => {
                        tracing::error!(actor = %me.address, %error, "top-level actor escalated or restarted too often; the guardian stops it");
                        Directive::Stop
                    }
                    other => other,
                };
                self.publish_supervision(&me.address, &error, directive);
                me.signal(SystemMsg::Directive {
                    directive,
                    delay: decision.delay,
                    cause: error,
                });
            }
        }
    }

    /// Publishes a supervision decision to subscribers.
    pub(crate) fn publish_supervision(&self, child: &Address, error: &str, directive: Directive) {
        if self.supervision.receiver_count() > 0 {
            let _ = self.supervision.send(SupervisionEvent {
                child: child.clone(),
                error: error.to_owned(),
                directive,
            });
        }
    }

    /// Delivers to the actor at `path` (to that incarnation only, if one is given), or to dead
    /// letters. The registry lock is held only for the channel push.
    pub(crate) fn tell_address(&self, path: &str, incarnation: Option<u64>, envelope: Envelope) {
        if let Some((envelope, target, reason)) = self.deliver(path, incarnation, envelope) {
            self.dead_letter(envelope, target, reason);
        }
    }

    /// Queues `envelope`, or gives it back with the dead-letter target and reason.
    pub(crate) fn deliver(
        &self,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) -> Option<(Envelope, String, DeadLetterReason)> {
        match self.deliver_live(path, incarnation, envelope) {
            // A virtual actor's identity is its path: any incarnation, live or not, will do.
            Some((envelope, _, DeadLetterReason::NoActor | DeadLetterReason::StaleIncarnation))
                if self.entities.kind_of(path).is_some() =>
            {
                self.deliver_to_entity(path, envelope)
            }
            other => other,
        }
    }

    /// Queues `envelope` for a live actor only.
    pub(crate) fn deliver_live(
        &self,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) -> Option<(Envelope, String, DeadLetterReason)> {
        self.registry.with(path, |actor| match actor {
            // Incarnation 0 stands for whoever lives at the path (recovered senders carry it).
            Some(a) if incarnation.is_none_or(|i| i == 0 || i == a.address.incarnation) => {
                a.tell(envelope).err().map(|refused| match refused {
                    Refused::Full(e) => (e, a.address.to_string(), DeadLetterReason::MailboxFull),
                    Refused::Closed(e) => (e, a.address.to_string(), DeadLetterReason::Stopped),
                })
            }
            Some(_) => Some((
                envelope,
                target(path, incarnation),
                DeadLetterReason::StaleIncarnation,
            )),
            None => Some((
                envelope,
                target(path, incarnation),
                DeadLetterReason::NoActor,
            )),
        })
    }

    /// Checks a send from outside: an absolute path and a body within the size limit.
    pub(crate) fn check_outside(&self, to: &str, body: &[u8]) -> Result<ActorPath, SendError> {
        let path = ActorPath::parse(to)?;
        let limit = self.config.max_message_bytes;
        if body.len() > limit {
            return Err(SendError::TooLarge {
                size: body.len(),
                limit,
            });
        }
        Ok(path)
    }

    /// A send from outside the system: the path is checked and the size limit applies.
    pub(crate) fn tell_outside(
        &self,
        sender: Option<Address>,
        to: &str,
        kind: &str,
        body: Vec<u8>,
    ) -> Result<(), SendError> {
        let path = self.check_outside(to, &body)?;
        let envelope = Envelope::new(sender, kind.to_owned(), body);
        match self.deliver(path.as_str(), None, envelope) {
            Some((_, target, DeadLetterReason::MailboxFull)) => {
                Err(SendError::MailboxFull { path: target })
            }
            Some((envelope, target, reason)) => {
                self.dead_letter(envelope, target, reason);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Called by a cell once it has fully terminated.
    pub(crate) fn child_terminated(&self, parent: Option<&Address>, child: &Address) {
        match parent {
            Some(parent) => {
                if let Some(p) = self.registry.get(parent.path.as_str())
                    && p.address.incarnation == parent.incarnation
                {
                    p.signal(SystemMsg::ChildTerminated(child.clone()));
                }
            }
            None => {
                let mut top = self.top_level.lock().unwrap_or_else(|p| p.into_inner());
                if top
                    .get(&child.path)
                    .is_some_and(|a| a.address.incarnation == child.incarnation)
                {
                    top.remove(&child.path);
                }
                self.top_level_count.send_replace(top.len());
            }
        }
    }
}

/// How a dead letter names its target: the path, and the incarnation if one was addressed.
fn target(path: &str, incarnation: Option<u64>) -> String {
    match incarnation {
        Some(i) => format!("{path}#{i}"),
        None => path.to_owned(),
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Lets the timer driver notice the system is gone and end.
        self.timers.wake();
    }
}

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
}

/// A host of wasm actors. Create one inside a tokio runtime with [`ActorSystem::new`].
pub struct ActorSystem {
    shared: Arc<Shared>,
}

impl ActorSystem {
    /// Creates a system on the current tokio runtime: multi-threaded, with the time driver
    /// enabled (`enable_all`), which timers, asks and backoff need.
    pub fn new(config: HostConfig) -> Result<Self, HostError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| HostError::NoRuntime)?;
        let engine: Engine = build_engine(&config)?;
        let mut linker = Linker::new(&engine);
        instance::add_to_linker(&mut linker).map_err(|e| HostError::Engine(format!("{e:#}")))?;
        let ticker = match config.epoch_interruption {
            true => Some(EpochTicker::start(&engine, &config)?),
            false => None,
        };
        let persistence = match &config.storage {
            Some(path) => Some(Persistence::open(Store::open(path)?, config.group_commit)?),
            None => None,
        };
        let cache = config.module_cache.clone().or_else(|| {
            config
                .storage
                .as_ref()
                .map(|db| db.parent().unwrap_or(Path::new(".")).join("mote-cache"))
        });
        let mut http_linker = linker.clone();
        instance::add_http_to_linker(&mut http_linker)
            .map_err(|e| HostError::Engine(format!("{e:#}")))?;
        let modules = Modules::new(engine, linker, http_linker, cache);
        if let Some(p) = &persistence {
            restore_modules(&modules, &p.store)?;
        }
        let shared = Arc::new_cyclic(|me| Shared {
            persistence,
            entities: Entities::default(),
            me: me.clone(),
            modules,
            registry: Registry::default(),
            dead_letters: DeadLetters::new(),
            runtime,
            next_incarnation: AtomicU64::new(1),
            timers: Arc::default(),
            topics: Directory::default(),
            groups: Directory::default(),
            late_replies: AtomicU64::new(0),
            shutting_down: AtomicBool::new(false),
            top_level: Mutex::default(),
            top_level_count: watch::channel(0).0,
            guardian: Mutex::new(Supervisor::new(config.root_strategy.clone())),
            strategies: Mutex::default(),
            supervision: broadcast::channel(1024).0,
            _ticker: ticker,
            config,
        });
        shared
            .runtime
            .spawn(shared.timers.clone().drive(Arc::downgrade(&shared)));
        Ok(ActorSystem { shared })
    }

    /// Deploys a module from a `.wasm` component file under `name` (version
    /// [`DEFAULT_VERSION`](crate::module::DEFAULT_VERSION)).
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
        let bytes = Modules::read_file(path.as_ref())?;
        self.deploy_version(name, version, &bytes).map(drop)
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

    /// Deploys a version of a module granted more than the defaults (see
    /// [`GRANTABLE`](crate::module::GRANTABLE): `wasi:http` lets it make outgoing HTTP
    /// requests through the host). Without the grant such a component is refused.
    pub fn deploy_granted(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
        grants: &[String],
    ) -> Result<bool, ModuleError> {
        let in_use = self.running(name, version) > 0;
        let (module, new) = self
            .shared
            .modules
            .deploy(name, version, bytes, grants, !in_use)?;
        if new && let Some(p) = &self.shared.persistence {
            let row = ModuleRow {
                name: name.to_owned(),
                version: version.to_owned(),
                hash: module.hash.clone(),
                grants: grants.to_vec(),
                bytes: bytes.to_vec(),
            };
            p.store
                .put_module(&row)
                .map_err(|e| ModuleError::Store(e.to_string()))?;
        }
        Ok(new)
    }

    /// The names of the deployed modules.
    pub fn modules(&self) -> Vec<String> {
        self.shared.modules.names()
    }

    /// Every deployed module version, with its content hash and whether it is current.
    pub fn module_list(&self) -> Vec<ModuleInfo> {
        self.shared.modules.list()
    }

    /// How many modules were compiled and how many loaded from the compiled cache.
    pub fn module_stats(&self) -> ModuleStats {
        self.shared.modules.stats()
    }

    /// Upgrades the actor at `target` (a path), or every actor of the module `target` (a name),
    /// to `version` of its module; see [`crate::upgrade`].
    pub async fn upgrade(
        &self,
        target: &str,
        version: &str,
    ) -> Result<UpgradeReport, UpgradeError> {
        self.upgrade_with(target, version, UpgradeOptions::default(), None)
            .await
    }

    /// [`ActorSystem::upgrade`] with options and a channel that receives progress.
    pub async fn upgrade_with(
        &self,
        target: &str,
        version: &str,
        options: UpgradeOptions,
        progress: Option<tokio::sync::mpsc::UnboundedSender<UpgradeProgress>>,
    ) -> Result<UpgradeReport, UpgradeError> {
        let (name, actors, whole) = if target.starts_with('/') {
            let actor = self
                .shared
                .registry
                .get(target)
                .filter(|a| a.module.is_some() && a.system.is_some())
                .ok_or_else(|| UpgradeError::NoActor(target.to_owned()))?;
            let name = actor.module.as_deref().unwrap_or_default().to_owned();
            (name, vec![actor], false)
        } else {
            let actors: Vec<ActorRef> = self
                .shared
                .registry
                .snapshot()
                .into_iter()
                .filter(|a| a.module.as_deref() == Some(target) && a.system.is_some())
                .collect();
            (target.to_owned(), actors, true)
        };
        let module = self
            .shared
            .modules
            .get_version(&name, version)
            .ok_or_else(|| ModuleError::Unknown {
                name: name.clone(),
                version: Some(version.to_owned()),
            })?;
        tracing::info!(module = %name, version, actors = actors.len(), "upgrade started");
        let mut report = self
            .shared
            .upgrade_actors(module, actors, options, progress)
            .await;
        if whole && report.failed.is_empty() {
            self.shared.modules.set_current(&name, version);
            if let Some(p) = &self.shared.persistence {
                p.store
                    .set_current_module(&name, version)
                    .map_err(|e| ModuleError::Store(e.to_string()))?;
            }
            report.current = true;
        }
        tracing::info!(
            module = %name,
            version,
            upgraded = report.upgraded.len(),
            unchanged = report.unchanged,
            failed = report.failed.len(),
            "upgrade finished"
        );
        Ok(report)
    }

    /// How many live actors run this version of this module.
    fn running(&self, name: &str, version: &str) -> usize {
        self.shared
            .registry
            .snapshot()
            .iter()
            .filter(|a| {
                a.module.as_deref() == Some(name) && a.running_version().as_deref() == Some(version)
            })
            .count()
    }

    /// Removes one version of a module (or all of them): refused while a live actor runs it.
    pub fn remove_module(&self, name: &str, version: Option<&str>) -> Result<(), ModuleError> {
        let listed = self.shared.modules.list();
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
        self.shared.modules.remove(name, version);
        if let Some(p) = &self.shared.persistence {
            p.store
                .remove_module(name, version)
                .map_err(|e| ModuleError::Store(e.to_string()))?;
            if let Some(current) = self.shared.modules.current_version(name) {
                p.store
                    .set_current_module(name, &current)
                    .map_err(|e| ModuleError::Store(e.to_string()))?;
            }
        }
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

    /// Spawns a top-level actor with its own limits.
    pub fn spawn_with(
        &self,
        name_or_path: &str,
        module: &str,
        init: &[u8],
        options: SpawnOptions,
    ) -> Result<Address, SpawnError> {
        let limits = self.shared.limits_for(&options);
        let path = match name_or_path.strip_prefix("/user/") {
            Some(name) => ActorPath::user_root().child(name),
            None if name_or_path.starts_with('/') => Err(AddressError::InvalidPath(
                name_or_path.to_owned(),
                "actors spawned from outside live directly under /user".to_owned(),
            )),
            None => ActorPath::user_root().child(name_or_path),
        }?;
        let mut top = self
            .shared
            .top_level
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let actor = self
            .shared
            .spawn(path, module, init.to_vec(), None, limits)?;
        top.insert(actor.address.path.clone(), actor.clone());
        self.shared.top_level_count.send_replace(top.len());
        Ok(actor.address)
    }

    /// Gives the top-level actor at `path` a restart strategy of its own instead of the
    /// guardian's (`root_strategy`); set it before spawning. Its scope is always one-for-one.
    pub fn set_top_level_strategy(&self, path: &str, strategy: Strategy) {
        self.shared
            .strategies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.to_owned(), Supervisor::new(strategy));
    }

    /// Sends a message from outside (no sender) to an absolute path.
    pub fn tell(&self, to: &str, kind: &str, body: Vec<u8>) -> Result<(), SendError> {
        self.shared.tell_outside(None, to, kind, body)
    }

    /// Stops the actor at `path` after its current message; false if none lives there.
    pub fn stop(&self, path: &str) -> bool {
        self.shared
            .registry
            .get(path)
            .is_some_and(|a| a.signal(SystemMsg::Stop(StopReason::Normal)))
    }

    /// Queues a poison pill: the actor stops once it has handled what was queued before it.
    pub fn poison_pill(&self, path: &str) -> bool {
        self.shared
            .registry
            .get(path)
            .is_some_and(|a| a.system.is_some() && a.user.send(UserMsg::PoisonPill).is_ok())
    }

    /// The current address of the actor at `path`, if one lives there.
    pub fn lookup(&self, path: &str) -> Option<Address> {
        self.shared.registry.get(path).map(|a| a.address)
    }

    /// Resolves once the given incarnation has terminated (at once if it already has).
    pub async fn terminated(&self, address: &Address) {
        let lifeline = match self.shared.registry.get(address.path.as_str()) {
            Some(a) if a.address.incarnation == address.incarnation => a.lifeline,
            _ => return,
        };
        lifeline.terminated().await;
    }

    /// Resolves once no actor is left under `/user` (top-level actors all stopped).
    pub async fn user_actors_stopped(&self) {
        let mut rx = self.shared.top_level_count.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// All live actors and probes, sorted by path.
    pub fn tree(&self) -> Vec<ActorInfo> {
        self.shared
            .registry
            .snapshot()
            .into_iter()
            .map(|a| ActorInfo {
                mailbox_depth: a.depth.load(std::sync::atomic::Ordering::Relaxed),
                version: a.running_version().map(|v| v.to_string()),
                address: a.address,
                module: a.module.map(|m| m.to_string()),
            })
            .collect()
    }

    /// How many dead letters this system has seen.
    pub fn dead_letter_count(&self) -> u64 {
        self.shared.dead_letters.count()
    }

    /// A stream of the dead letters from now on.
    pub fn subscribe_dead_letters(&self) -> broadcast::Receiver<DeadLetter> {
        self.shared.dead_letters.subscribe()
    }

    /// Asks from outside: sends the request with a fresh `/system/ask/<id>` sender and waits for
    /// the first reply, at most `timeout`.
    pub async fn ask(
        &self,
        to: &str,
        kind: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Envelope, AskError> {
        let path = self.shared.check_outside(to, &body)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.shared.ask(
            path.as_str(),
            None,
            kind.to_owned(),
            body,
            timeout,
            Answer::Outside(tx),
        );
        rx.await.unwrap_or(Err(AskError::Timeout(timeout)))
    }

    /// Replies that arrived after their ask had been answered or had timed out (dropped).
    pub fn late_replies(&self) -> u64 {
        self.shared.late_replies.load(Ordering::Relaxed)
    }

    /// Publishes from outside (no sender) to every subscriber of `topic`; returns how many.
    pub fn publish(&self, topic: &str, kind: &str, body: Vec<u8>) -> u32 {
        self.shared
            .publish(topic, Envelope::new(None, kind.to_owned(), body))
    }

    /// Subscribes a fresh probe (`/system/sub-<n>`) to `topic`: its `recv` yields the topic's
    /// messages in publish order. Dropping it unsubscribes.
    pub fn subscribe(&self, topic: &str) -> Result<Probe, SpawnError> {
        let n = self.shared.next_incarnation.load(Ordering::Relaxed);
        let probe = self.probe(&format!("sub-{n}"))?;
        self.shared.topics.join(topic, probe.address());
        Ok(probe)
    }

    /// Sends from outside to the member of `group` with the shortest mailbox; false if the group
    /// has no live member.
    pub fn tell_group(&self, group: &str, kind: &str, body: Vec<u8>) -> bool {
        self.shared
            .tell_group(group, Envelope::new(None, kind.to_owned(), body))
    }

    /// Sends from outside to every member of `group`; returns how many it reached.
    pub fn broadcast_group(&self, group: &str, kind: &str, body: Vec<u8>) -> u32 {
        self.shared
            .broadcast_group(group, Envelope::new(None, kind.to_owned(), body))
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
        let envelope = Envelope::new(None, kind.to_owned(), body);
        let target = TimerTarget {
            path: to.to_owned(),
            incarnation: None,
        };
        Ok(self
            .shared
            .timers
            .schedule(None, target, envelope, delay, period))
    }

    /// Cancels a timer scheduled with [`ActorSystem::schedule`]; false if it is gone.
    pub fn cancel_timer(&self, id: u64) -> bool {
        self.shared.timers.cancel(None, id)
    }

    /// Timers pending in the system.
    pub fn pending_timers(&self) -> usize {
        self.shared.timers.pending()
    }

    /// A stream of supervision decisions from now on: which actor failed, why, and what was done.
    pub fn subscribe_supervision(&self) -> broadcast::Receiver<SupervisionEvent> {
        self.shared.supervision.subscribe()
    }

    /// Registers an external endpoint at `/system/<name>` that receives messages, for tests and
    /// embedding programs. It is removed when dropped.
    pub fn probe(&self, name: &str) -> Result<Probe, SpawnError> {
        let path = ActorPath::system_root().child(name)?;
        if path.as_str() == DEAD_LETTERS_PATH {
            return Err(SpawnError::NameTaken(path.to_string()));
        }
        let address = Address {
            path,
            incarnation: self.shared.next_incarnation.fetch_add(1, Ordering::Relaxed),
        };
        let (handle, mailbox) = mailbox::endpoint(address.clone());
        self.shared
            .registry
            .insert(handle)
            .map_err(|taken| SpawnError::NameTaken(taken.address.path.to_string()))?;
        Ok(Probe {
            shared: self.shared.clone(),
            address,
            mailbox,
        })
    }

    /// Stops every actor (children first, `stopping` with reason shutdown) and waits for them, up
    /// to the configured shutdown timeout. Returns the paths still alive at the deadline.
    pub async fn shutdown(&self) -> Result<(), Vec<String>> {
        self.shared.shutting_down.store(true, Ordering::Release);
        self.signal_top_level(StopReason::Shutdown);
        let wait = self.user_actors_stopped();
        if tokio::time::timeout(self.shared.config.shutdown_timeout, wait)
            .await
            .is_err()
        {
            let alive: Vec<String> = self
                .tree()
                .into_iter()
                .filter(|i| i.module.is_some())
                .map(|i| i.address.path.to_string())
                .collect();
            tracing::warn!(?alive, "shutdown timed out");
            return Err(alive);
        }
        if let Some(persistence) = &self.shared.persistence {
            persistence.close().await;
        }
        tracing::info!("actor system shut down");
        Ok(())
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
        self.shared.register_entity(kind, module, options)
    }

    /// How many actors (and probes and ask endpoints) are live now.
    pub fn live_actors(&self) -> usize {
        self.shared.registry.len()
    }

    /// The committer's counters, if the host has a database.
    pub fn commit_stats(&self) -> Option<CommitStats> {
        self.shared.persistence.as_ref().map(Persistence::stats)
    }

    /// The database file, if the host has one.
    pub fn store_path(&self) -> Option<&Path> {
        self.shared.persistence.as_ref().map(|p| p.store.path())
    }

    fn signal_top_level(&self, reason: StopReason) {
        let top = self
            .shared
            .top_level
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for actor in top.values() {
            actor.signal(SystemMsg::Stop(reason.clone()));
        }
    }
}

impl Drop for ActorSystem {
    fn drop(&mut self) {
        // Without a graceful shutdown the actors would outlive their handle: stop them.
        self.shared.shutting_down.store(true, Ordering::Release);
        self.signal_top_level(StopReason::Shutdown);
    }
}

/// An external endpoint with an address, so actors can send (and reply) to code outside the
/// system. Created by [`ActorSystem::probe`].
pub struct Probe {
    shared: Arc<Shared>,
    address: Address,
    mailbox: mailbox::Mailbox,
}

impl Probe {
    /// The probe's address (`/system/<name>`).
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Waits for the next message.
    pub async fn recv(&mut self) -> Option<Envelope> {
        loop {
            match self.mailbox.next().await? {
                UserMsg::Message(mut envelope) => {
                    self.shared.ack_lazily(envelope.receipt.take());
                    return Some(envelope);
                }
                UserMsg::PoisonPill => continue,
            }
        }
    }

    /// Waits for the next message at most `timeout`.
    pub async fn recv_timeout(&mut self, timeout: Duration) -> Option<Envelope> {
        tokio::time::timeout(timeout, self.recv())
            .await
            .ok()
            .flatten()
    }

    /// Sends a message with this probe as the sender, so the receiver can reply.
    pub fn tell(&self, to: &str, kind: &str, body: Vec<u8>) -> Result<(), SendError> {
        self.shared
            .tell_outside(Some(self.address.clone()), to, kind, body)
    }
}

impl Probe {
    /// Sends to the least-loaded member of `group`, with this probe as the sender.
    pub fn tell_group(&self, group: &str, kind: &str, body: Vec<u8>) -> bool {
        self.shared.tell_group(
            group,
            Envelope::new(Some(self.address.clone()), kind.to_owned(), body),
        )
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.shared.registry.remove(&self.address);
    }
}

/// Deploys the module versions recorded in the store, as they were (current versions too).
fn restore_modules(modules: &Modules, store: &Store) -> Result<(), HostError> {
    let (rows, current) = store.modules()?;
    for row in rows {
        match modules.deploy(&row.name, &row.version, &row.bytes, &row.grants, true) {
            Ok(_) => {}
            Err(e) => {
                tracing::error!(module = %row.name, version = %row.version, error = %e, "a recorded module could not be restored")
            }
        }
    }
    for (name, version) in current {
        modules.set_current(&name, &version);
    }
    Ok(())
}
