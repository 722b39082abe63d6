//! Replay: a durable actor's module started again in a throwaway sandbox, recovering its
//! history up to a chosen event, to answer questions about the state it had then.
//!
//! ```text
//! database, read-only ──> History: the snapshot and events up to `until`, who wrote them
//!                              │
//! module bytes (the database's registry, or a file) ──> sandbox: engines, kernel and
//!                              │                        capabilities of its own, no database
//!                              v
//!           instance: start (it recovers) ──> asks ──> replies; every other effect dropped
//! ```
//!
//! Invariants:
//! - The database is never written. It is opened through redb's read-only handle, which has
//!   no write transaction at all, and the sandbox has no database: the persistence capability
//!   reads the history and drops (and counts) every write the actor makes.
//! - No effect leaves the sandbox. The instance's step holds its effects from its first call,
//!   and after every call they are dropped (and counted), except the replies to the replay's
//!   own ask. The sandbox's kernel launches nothing (a spawned child never runs), its timer and
//!   reminder drivers never start, and outgoing HTTP is denied.
//! - The actor lives in no cell: nothing hands it a message but [`Replay::ask`], so even the
//!   messages it sends itself are never handled.

use std::path::Path;
use std::sync::Arc;

use super::wiring::Wiring;
use crate::actor::core::{ActorCore, Program};
use crate::actor::instance::{ActorInstance, Received, Stillborn};
use crate::actor::mailbox::{ActorRef, Capacity, Mailbox};
use crate::actor::step::{self, Effect, Step};
use crate::address::{ActorPath, Address};
use crate::caps::capability::Origin;
use crate::caps::persistence::entities::EntityOptions;
use crate::caps::persistence::history::{History, Start};
use crate::caps::persistence::journal::LEGACY_SCOPE;
use crate::caps::{ActorState, Caps};
use crate::config::HostConfig;
use crate::deploy::checks::content_hash;
use crate::deploy::modules::Module;
use crate::deploy::records;
use crate::error::{DatabaseError, HostError, ReplayError, SpawnError};
use crate::guestlog::GuestLog;
use crate::kernel::spawn::{Limits, Lineage, SpawnOptions, SpawnRequest};
use crate::kernel::{Extensions, Kernel, Pending, Spawned, Undelivered};
use crate::message::{Envelope, Receipt};
use crate::sandbox::engine::EpochTicker;
use crate::storage::database::ReadOnlyDatabase;

/// The version label of a module given as a file rather than found in the database.
const FILE_VERSION: &str = "file";

/// How to replay: up to which event, and what to start instead of what the database records.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    /// Recover up to this event (default: the latest).
    pub until: Option<u64>,
    /// The component to run instead of the module version the database records (needed when
    /// it records none, or no longer has it).
    pub module: Option<Vec<u8>>,
    /// The init to start the actor with instead of the one the database records.
    pub init: Option<Vec<u8>>,
    /// The sandbox's limits and compiled-module cache (default: `mote-cache/` beside the
    /// database, as a host has it); its storage is ignored.
    pub config: HostConfig,
}

/// What a replay recovered, and from what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// The persistence id.
    pub persistence_id: String,
    /// The actor's path in the sandbox (the one it had).
    pub path: String,
    /// The module it runs.
    pub module: String,
    /// The version of that module (`file` for one given as a file).
    pub version: String,
    /// SHA-256 of the module's bytes, hex.
    pub hash: String,
    /// Whether the database recorded the writer (module, version, path, init); if not, they
    /// were derived from the id, the registry's current version and the options.
    pub recorded: bool,
    /// The event recovery went up to.
    pub until: u64,
    /// The latest event of the id.
    pub last: u64,
    /// The snapshot recovery started from (its event), if any.
    pub snapshot: Option<u64>,
    /// The latest snapshot of the id (its event), whether recovery used it or not.
    pub latest_snapshot: Option<u64>,
    /// Whether the actor called `recover` when it started.
    pub recovered: bool,
    /// Events it read after the snapshot (all of them up to `until`, for an actor that folds
    /// its whole history).
    pub events_read: u64,
}

/// What the replayed actor did that a replay never releases, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Messages sent (tell, publish, groups, asks, forwards), replies to the replay's asks
    /// excepted.
    pub sends: u64,
    /// Children spawned (they never ran).
    pub spawns: u64,
    /// Descendants stopped.
    pub stops: u64,
    /// Other effects: timers, HTTP call-outs.
    pub other: u64,
    /// Events persisted.
    pub events: u64,
    /// Snapshots saved.
    pub snapshots: u64,
    /// Deletions of events or of the whole state.
    pub deletions: u64,
    /// Reminders scheduled or cancelled.
    pub reminders: u64,
}

impl Dropped {
    /// Whether nothing was dropped.
    pub fn is_empty(&self) -> bool {
        *self == Dropped::default()
    }
}

/// A durable actor replayed up to an event in a sandbox of its own: ask it questions.
///
/// Create one inside a tokio runtime with [`Replay::open`].
///
/// ```no_run
/// # async fn demo() -> Result<(), mote_host::ReplayError> {
/// use mote_host::{Replay, ReplayOptions};
/// let options = ReplayOptions { until: Some(4), ..ReplayOptions::default() };
/// let mut replay = Replay::open("mote.redb", "counter:/user/c", options).await?;
/// println!("recovered to event {}", replay.recovered().until);
/// if let Some(reply) = replay.ask("Counter", vec![1]).await? {
///     println!("{} {:?}", reply.kind, reply.body);
/// }
/// # Ok(()) }
/// ```
pub struct Replay {
    instance: ActorInstance,
    caps: Arc<Caps>,
    kernel: Arc<Kernel>,
    history: Arc<History>,
    recovered: Recovered,
    /// The step effects dropped so far (the history counts the writes).
    dropped: Dropped,
    /// The sender of the replay's asks.
    asker: Address,
    /// The actor's place in the sandbox's registry, and its mailbox, which nothing reads.
    _actor: (ActorRef, Mailbox),
    _module: Arc<Module>,
    _guest_log: Arc<GuestLog>,
    _ticker: Option<EpochTicker>,
}

impl Replay {
    /// Replays the actor whose persistence id is `pid`, from the database file `db`, up to
    /// `options.until`: opens the file read-only, starts the module version that wrote the
    /// history in a sandbox, and lets it recover. Fails if a running host has the file open.
    pub async fn open(
        db: impl AsRef<Path>,
        pid: &str,
        options: ReplayOptions,
    ) -> Result<Replay, ReplayError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| HostError::NoRuntime)?;
        let db = db.as_ref();
        let database = ReadOnlyDatabase::open(db).map_err(|e| match e {
            DatabaseError::Open {
                path,
                source: redb::DatabaseError::DatabaseAlreadyOpen,
            } => ReplayError::InUse { path },
            DatabaseError::Open {
                path,
                source: redb::DatabaseError::RepairAborted,
            } => ReplayError::Unclean { path },
            other => ReplayError::Database(other),
        })?;
        let history = Arc::new(History::load(database, pid, options.until)?);
        let writer = writer_of(&history, &options)?;
        let mut config = options.config;
        config.storage = None;
        let Wiring {
            caps,
            modules,
            guest_log,
            ticker,
            reports,
            ..
        } = Wiring::new(&config, None, Some(&history))?;
        // The sandbox denies every grantable import's use, so it may grant them all.
        let grants: Vec<String> = Caps::grantable().into_iter().map(String::from).collect();
        modules.deploy(
            &writer.module,
            &writer.version,
            &writer.bytes,
            &grants,
            true,
        )?;
        let module = modules
            .get_version(&writer.module, &writer.version)
            .ok_or_else(|| SpawnError::UnknownModule(writer.module.clone()))
            .map_err(|e| ReplayError::Failed {
                during: "start",
                failure: e.to_string(),
            })?;
        let kernel = Arc::new(Kernel::new(config, runtime, reports));
        kernel.plug(Arc::new(Sealed));
        if let Some(kind) = writer.kind.as_deref() {
            let options = EntityOptions::default();
            caps.persistence
                .entities
                .register(&kernel, kind, &writer.module, options)
                .map_err(|e| ReplayError::Failed {
                    during: "start",
                    failure: e.to_string(),
                })?;
        }
        let limits = Limits::of(&kernel.config, &SpawnOptions::default());
        let capacity = Capacity {
            messages: limits.mailbox_capacity,
            bytes: limits.mailbox_bytes,
        };
        let labels = (module.name.clone(), module.version.clone());
        let (actor, mailbox) = kernel
            .claim(writer.path.clone(), Some(labels), capacity, None)
            .map_err(|e| ReplayError::Failed {
                during: "start",
                failure: e.to_string(),
            })?;
        let program = Program {
            module: module.name.clone(),
            version: module.version.clone(),
            init: writer.init.as_slice().into(),
        };
        let account = (
            actor.stats.clone().unwrap_or_default(),
            Lineage::root(limits.quotas.descendants),
        );
        let mut core = ActorCore::new(
            kernel.clone(),
            actor.address.clone(),
            None,
            program,
            Arc::new(limits),
            account,
        );
        core.grants = module.grants.as_slice().into();
        // Held from the first call: nothing the actor does takes effect during it.
        core.step = Step::held(true);
        let states = caps.states(&core, Origin::Spawned);
        let state = ActorState {
            core,
            caps: states,
            set: caps.clone(),
        };
        let instance = match ActorInstance::new(&module, state).await {
            Ok(instance) => instance,
            Err(Stillborn { failure, .. }) => {
                return Err(ReplayError::Failed {
                    during: "start",
                    failure: failure.to_string(),
                });
            }
        };
        let asker = Address {
            path: ActorPath::system_root().child("replay")?,
            incarnation: kernel.next_incarnation(),
        };
        let recovered = Recovered {
            persistence_id: pid.to_owned(),
            path: writer.path.to_string(),
            module: writer.module,
            version: writer.version,
            hash: module.hash.to_string(),
            recorded: writer.recorded,
            until: history.until(),
            last: history.last(),
            snapshot: match history.start() {
                Start::Snapshot(seq) => Some(seq),
                Start::Beginning => None,
            },
            latest_snapshot: history.latest_snapshot(),
            recovered: false,
            events_read: 0,
        };
        let mut replay = Replay {
            instance,
            caps,
            kernel,
            history,
            recovered,
            dropped: Dropped::default(),
            asker,
            _actor: (actor, mailbox),
            _module: module,
            _guest_log: guest_log,
            _ticker: ticker,
        };
        let started = replay.instance.start(&writer.init).await;
        if let Err(failure) = started {
            replay.abandon();
            return Err(ReplayError::Failed {
                during: "start",
                failure: failure.to_string(),
            });
        }
        let replies = replay.settle();
        replay.dropped.sends += replies.len() as u64;
        let tally = replay.history.tallied();
        replay.recovered.recovered = tally.recovered;
        replay.recovered.events_read = tally.events_read;
        Ok(replay)
    }

    /// What was recovered, and from what.
    pub fn recovered(&self) -> &Recovered {
        &self.recovered
    }

    /// What the actor did so far that the replay dropped.
    pub fn dropped(&self) -> Dropped {
        let tally = self.history.tallied();
        Dropped {
            events: tally.events,
            snapshots: tally.snapshots,
            deletions: tally.deletions,
            reminders: tally.reminders,
            ..self.dropped
        }
    }

    /// Hands the actor a message from the replay and returns its first reply, if it sent one
    /// (`None` if it sent none). What else the call did is dropped (see [`Replay::dropped`]);
    /// its changes to the actor's memory stay for the next ask. Messages it unstashes are
    /// handed back to it at once, as its cell would.
    pub async fn ask(
        &mut self,
        kind: &str,
        body: Vec<u8>,
    ) -> Result<Option<Envelope>, ReplayError> {
        if self.instance.poisoned {
            return Err(ReplayError::Poisoned);
        }
        let mut next = Some(Envelope::new(Some(self.asker.clone()), kind, body));
        let mut first = None;
        while let Some(envelope) = next.take() {
            let rejected = match self.instance.receive(envelope, None).await {
                Ok(Received::Handled) => None,
                Ok(Received::Kept(kept)) => {
                    // Set aside (stashed): the capability that keeps it takes it.
                    let _ = self.caps.keep(&mut self.instance.state().caps, kept);
                    None
                }
                Ok(Received::Rejected(_, reason)) => Some(reason),
                Err(failure) => {
                    self.abandon();
                    return Err(ReplayError::Failed {
                        during: "receive",
                        failure: failure.to_string(),
                    });
                }
            };
            let mut replies = self.settle().into_iter();
            if first.is_none() {
                first = replies.next();
            }
            self.dropped.sends += replies.len() as u64;
            if let Some(reason) = rejected {
                return Err(ReplayError::Rejected { reason });
            }
            next = self.caps.next(&mut self.instance.state().caps);
        }
        Ok(first)
    }

    /// After a call that returned: the capabilities seal its step (the persistence capability
    /// drops its writes), then its effects are dropped, except the replies to the replay's
    /// asks, which are returned.
    fn settle(&mut self) -> Vec<Envelope> {
        let state = self.instance.state();
        let mut consumed = state.core.step.take_consumed();
        // The sandbox has no database: nothing to commit, and nothing awaited.
        drop(
            self.caps
                .seal(&mut state.caps, &mut state.core.step, &mut consumed),
        );
        let mut replies = Vec::new();
        let mut dropped = Vec::new();
        for effect in state.core.step.take() {
            match effect {
                Effect::Send {
                    path,
                    incarnation,
                    envelope,
                } if path == self.asker.path.as_str()
                    && incarnation.is_none_or(|i| i == self.asker.incarnation) =>
                {
                    replies.push(envelope);
                }
                effect => {
                    match &effect {
                        Effect::Send { .. } => self.dropped.sends += 1,
                        Effect::Start(_) => self.dropped.spawns += 1,
                        Effect::Stop(_) => self.dropped.stops += 1,
                        Effect::Later(_) => self.dropped.other += 1,
                    }
                    dropped.push(effect);
                }
            }
        }
        step::discard(dropped);
        replies
    }

    /// After a call that failed: what it prepared is dropped.
    fn abandon(&mut self) {
        let state = self.instance.state();
        self.caps.abandon(&mut state.caps);
        step::discard(state.core.step.take());
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        // Nothing may be spawned in the sandbox from now on.
        self.kernel.begin_shutdown();
    }
}

/// The writer of a history: what to start, where, with what.
struct Writer {
    module: String,
    version: String,
    bytes: Vec<u8>,
    path: ActorPath,
    init: Vec<u8>,
    /// The entity kind, for an id of an entity (`@<kind>:...`).
    kind: Option<String>,
    recorded: bool,
}

/// The module, version, path and init that wrote `history`: as the database records them, or
/// derived from the id (`<module>:<path>` or `@<kind>:<path>`) and the registry's current
/// version; the options override the bytes and the init.
fn writer_of(history: &History, options: &ReplayOptions) -> Result<Writer, ReplayError> {
    let pid = history.pid();
    let (scope, name) = pid.split_once(':').unwrap_or(("", pid));
    let kind = scope.strip_prefix('@').map(str::to_owned);
    let owner = history.owner();
    let module = match (owner, &kind) {
        (Some(owner), _) => owner.module.clone(),
        (None, None) if !scope.is_empty() && scope != LEGACY_SCOPE => scope.to_owned(),
        // An entity's module is registered when a host runs, not recorded with the kind.
        (None, _) if options.module.is_some() => kind.clone().unwrap_or_else(|| "replay".into()),
        (None, _) => {
            return Err(ReplayError::NoModule {
                pid: pid.to_owned(),
            });
        }
    };
    let path = match owner {
        Some(owner) => owner.path.clone(),
        None if name.starts_with('/') => name.to_owned(),
        None => "/user/replay".to_owned(),
    };
    let path = ActorPath::parse(&path)?;
    let init = match (&options.init, owner, &kind) {
        (Some(init), _, _) => init.clone(),
        (None, Some(owner), _) => owner.init.clone(),
        // An entity's init is its id, the last segment of its path.
        (None, None, Some(_)) => path.name().as_bytes().to_vec(),
        (None, None, None) => Vec::new(),
    };
    let (version, bytes) = match &options.module {
        Some(bytes) => (FILE_VERSION.to_owned(), bytes.clone()),
        None => {
            let read = history.database().read()?;
            let version = match owner.and_then(|o| o.version_at(history.until())) {
                Some(version) => Some(version.to_owned()),
                None => records::read_current(&read, &module)?,
            };
            let row = match &version {
                Some(version) => records::read_row(&read, &module, version)?,
                None => None,
            };
            match row {
                Some(row) => (row.version, row.bytes),
                None => {
                    return Err(ReplayError::ModuleMissing {
                        pid: pid.to_owned(),
                        module,
                        version: version.unwrap_or_else(|| "current".to_owned()),
                    });
                }
            }
        }
    };
    tracing::debug!(%pid, %module, %version, hash = %&content_hash(&bytes)[..12], "replaying");
    Ok(Writer {
        module,
        version,
        bytes,
        path,
        init,
        kind,
        recorded: owner.is_some(),
    })
}

/// The sandbox's side of the kernel: a spawned child gets its path but never runs, and
/// nothing else is extended.
struct Sealed;

impl Extensions for Sealed {
    fn undeliverable(&self, _receipt: Receipt) {}

    fn export_receipt(&self, _receipt: Receipt) -> Option<Vec<u8>> {
        None
    }

    fn import_receipt(&self, _token: &[u8]) -> Option<Receipt> {
        None
    }

    fn launch(&self, kernel: &Arc<Kernel>, request: SpawnRequest) -> Result<Spawned, SpawnError> {
        let capacity = Capacity {
            messages: request.limits.mailbox_capacity,
            bytes: request.limits.mailbox_bytes,
        };
        let (actor, mailbox) = kernel.claim(request.path, None, capacity, request.incarnation)?;
        let task = Unborn {
            kernel: kernel.clone(),
            actor: actor.clone(),
            parent: request.parent,
            mailbox,
        };
        Ok(Spawned {
            actor,
            task: Box::new(task),
        })
    }

    fn backlog(&self, _kernel: &Arc<Kernel>, _path: &str) -> Vec<Envelope> {
        Vec::new()
    }

    fn return_backlog(&self, _path: &str, _messages: Vec<Envelope>) {}

    fn unclaimed(
        &self,
        _kernel: &Arc<Kernel>,
        _path: &str,
        envelope: Envelope,
    ) -> Result<Option<Undelivered>, Envelope> {
        Err(envelope)
    }

    fn settle(&self, _receipt: Receipt) {}

    fn acknowledge(&self, _receipt: Receipt) -> Option<step::Commit> {
        None
    }

    fn dead_letter(&self, _kernel: &Arc<Kernel>, _envelope: &Envelope, _target: &str) {}

    fn closed(&self) {}
}

/// A child spawned in a replay: it gives its path back whether it is started or abandoned.
struct Unborn {
    kernel: Arc<Kernel>,
    actor: ActorRef,
    parent: Option<Address>,
    mailbox: Mailbox,
}

impl Pending for Unborn {
    fn start(self: Box<Self>) {
        self.abandon();
    }

    fn abandon(self: Box<Self>) {
        let Unborn {
            kernel,
            actor,
            parent,
            mailbox,
        } = *self;
        kernel.abandon(&actor, parent.as_ref(), mailbox);
    }
}
