//! What every capability sees of the actor that calls it: its address and parent, its children
//! and how it supervises them, the step its current call builds, and its sandbox meter.
//!
//! The verbs every actor has (send, spawn a child, stop a descendant) live here, once, for all
//! the interfaces that offer them.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::mailbox::ActorRef;
use super::pull::{self, Pull};
use super::route::Route;
use super::step::Step;
use super::supervisor::Supervisor;
use crate::address::Address;
use crate::error::{AddressError, SpawnError};
use crate::kernel::Kernel;
use crate::kernel::spawn::{Limits, Lineage, SpawnRequest};
use crate::message::Envelope;
use crate::quota::{Quota, Quotas};
use crate::sandbox::meter::Meter;
use crate::stats::ActorStats;
use crate::trace::TraceParent;

/// The core of one actor instance's store data.
pub(crate) struct ActorCore {
    pub(crate) kernel: Arc<Kernel>,
    pub(crate) me: Address,
    pub(crate) parent: Option<Address>,
    /// The name of the module it runs (the owner of its durable state).
    pub(crate) module: Arc<str>,
    /// The version of that module this instance runs.
    pub(crate) version: Arc<str>,
    /// The init its incarnation was spawned with.
    pub(crate) init: Arc<[u8]>,
    /// What its module was granted beyond the defaults (`wasi:http`).
    pub(crate) grants: Arc<[String]>,
    /// Its limits, shared with its cell (and every instance the cell boots).
    pub(crate) limits: Arc<Limits>,
    /// What the actor has done and used so far, its refusals among them.
    pub(crate) stats: Arc<ActorStats>,
    /// Its count of live descendants, and its ancestors'.
    pub(crate) lineage: Arc<Lineage>,
    /// Set by `reject` inside `receive`: the message becomes a dead letter with this reason.
    pub(crate) rejected: Option<String>,
    /// The sender of the message the current call handles (`None` outside `receive`).
    pub(crate) current_sender: Option<Address>,
    /// The body size of the message the current call handles (`None` outside `receive`);
    /// bodies are far below 4 GiB (see [`body_size`]).
    pub(crate) current_bytes: Option<u32>,
    /// The span of the message the current call handles, when traces are carried on: the
    /// parent of every message the call sends.
    pub(crate) trace: Option<TraceParent>,
    /// Set by `stash` inside `receive`: the message is kept, not consumed.
    pub(crate) kept: bool,
    /// Live children by name; the cell removes them as they terminate.
    pub(crate) children: BTreeMap<String, ActorRef>,
    /// How this actor supervises its children.
    pub(crate) supervisor: Supervisor,
    /// Set when the actor asked to stop itself: it stops after the current call.
    pub(crate) stop_requested: bool,
    /// Set while `stopping` runs and after: no new children.
    pub(crate) stopping: bool,
    /// The effects of the current call.
    pub(crate) step: Step,
    pub(crate) meter: Meter,
    /// The lane lent to the current call for a pulled receive, if it was (see `actor::pull`).
    pub(crate) pull: Option<Box<Pull>>,
    /// The key of the path it sent to last ([`pull::path_key`]): a message from there is
    /// likely a reply, which its call may linger for.
    pub(crate) sent_to: u64,
    /// The receiver it sends to again and again, resolved once (see `actor::route`).
    route: Route,
}

/// Why a message from an actor was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unsendable {
    /// The body is past the host's size limit (its size).
    TooLarge(usize),
    /// The kind is the host's own (it).
    ReservedKind(String),
    /// A bound was passed.
    Quota(Quota),
}

/// Why a child was not spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChildRefused {
    /// The parent is stopping.
    Stopping,
    /// The name is not a valid actor name.
    InvalidName(AddressError),
    /// A live child has that name.
    NameTaken(String),
    /// The kernel refused the spawn.
    Spawn(SpawnError),
    /// A bound was passed.
    Quota(Quota),
}

/// What an instance runs: its module's name and version, and its incarnation's init.
#[derive(Clone)]
pub(crate) struct Program {
    pub(crate) module: Arc<str>,
    pub(crate) version: Arc<str>,
    pub(crate) init: Arc<[u8]>,
}

/// A body's size as the core keeps it: bodies are bounded by the host's message size limit,
/// far below 4 GiB, so this never saturates in practice (and a saturated size only counts
/// more against a quota, never less).
pub(crate) fn body_size(bytes: usize) -> u32 {
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

impl ActorCore {
    /// The core of a fresh instance of the actor at `me`.
    pub(crate) fn new(
        kernel: Arc<Kernel>,
        me: Address,
        parent: Option<Address>,
        program: Program,
        limits: Arc<Limits>,
        account: (Arc<ActorStats>, Arc<Lineage>),
    ) -> Self {
        let (stats, lineage) = account;
        let Program {
            module,
            version,
            init,
        } = program;
        let config = &kernel.config;
        let slice = config
            .epoch_tick
            .saturating_mul(u32::try_from(config.time_slice_ticks).unwrap_or(u32::MAX));
        let meter = Meter::new(limits.memory, limits.cpu_deadline, slice, stats.clone());
        ActorCore {
            kernel,
            me,
            parent,
            module,
            version,
            init,
            grants: Arc::new([]),
            limits,
            stats,
            lineage,
            rejected: None,
            current_sender: None,
            current_bytes: None,
            trace: None,
            kept: false,
            children: BTreeMap::new(),
            supervisor: Supervisor::default(),
            stop_requested: false,
            stopping: false,
            step: Step::default(),
            meter,
            pull: None,
            sent_to: 0,
            route: Route::default(),
        }
    }

    /// The core for `version` of this actor (an upgrade): the same address, parent, limits,
    /// children and supervision, an empty step that holds if this one does, a fresh meter.
    pub(crate) fn successor(&self, version: Arc<str>) -> ActorCore {
        let mut next = ActorCore::new(
            self.kernel.clone(),
            self.me.clone(),
            self.parent.clone(),
            Program {
                module: self.module.clone(),
                version,
                init: self.init.clone(),
            },
            self.limits.clone(),
            (self.stats.clone(), self.lineage.clone()),
        );
        next.grants = self.grants.clone();
        next.children = self.children.clone();
        next.supervisor = self.supervisor.clone();
        next.step = Step::held(self.step.holds());
        next
    }

    /// This actor's quotas.
    pub(crate) fn quotas(&self) -> &Quotas {
        &self.limits.quotas
    }

    /// Counts a refusal of `quota` and gives it back.
    pub(crate) fn refuse(&self, quota: Quota) -> Quota {
        self.stats.refusals.count(quota)
    }

    /// Checks a topic, group or other name against the length bound, counting a refusal.
    pub(crate) fn check_name(&self, name: &str) -> Result<(), Quota> {
        self.quotas().check_name(name).map_err(|q| self.refuse(q))
    }

    /// Checks a path the guest names against the length bound, counting a refusal.
    pub(crate) fn check_path(&self, path: &str) -> Result<(), Quota> {
        self.quotas().check_path(path).map_err(|q| self.refuse(q))
    }

    /// A message from this actor: within the host's size limit, of a kind that is not the
    /// host's own and not too long. A refusal is counted.
    pub(crate) fn envelope(&self, kind: String, body: Vec<u8>) -> Result<Envelope, Unsendable> {
        if body.len() > self.kernel.config.max_message_bytes {
            return Err(Unsendable::TooLarge(body.len()));
        }
        match self.check_kind(&kind) {
            Ok(()) => Ok(Envelope::new(Some(self.me.clone()), kind, body).traced(self.trace)),
            Err(Quota::ReservedKind) => Err(Unsendable::ReservedKind(kind)),
            Err(quota) => Err(Unsendable::Quota(quota)),
        }
    }

    /// Checks a message kind the guest chose (too long, or the host's own `mote.*`), counting
    /// a refusal.
    pub(crate) fn check_kind(&self, kind: &str) -> Result<(), Quota> {
        self.quotas().check_kind(kind).map_err(|q| self.refuse(q))
    }

    /// A guest's `tell` of `kind` and `body` to the incarnation of `path`: checked as every send
    /// of this actor is (a refusal is counted), then sent.
    pub(crate) fn tell(
        &mut self,
        path: &str,
        incarnation: u64,
        kind: String,
        body: Vec<u8>,
    ) -> Result<(), Unsendable> {
        self.check_path(path).map_err(Unsendable::Quota)?;
        let envelope = self.envelope(kind, body)?;
        self.send(path, Some(incarnation), envelope);
        Ok(())
    }

    /// Sends `envelope` now, or when the step commits.
    pub(crate) fn send(&mut self, path: &str, incarnation: Option<u64>, envelope: Envelope) {
        self.stats.sent.bump();
        self.sent_to = pull::path_key(path);
        // A held step sends at its commit, the registry's way.
        let envelope = match incarnation {
            Some(incarnation) if !self.step.holds() => {
                match self
                    .route
                    .send(&self.kernel.registry, path, incarnation, envelope)
                {
                    Ok(()) => return,
                    Err(envelope) => envelope,
                }
            }
            _ => envelope,
        };
        self.step.send(&self.kernel, path, incarnation, envelope);
    }

    /// Sends `envelope` to a path a guest named: absolute (checked without allocating, the send
    /// hot path) or relative to this actor.
    pub(crate) fn send_path(&mut self, to: &str, envelope: Envelope) -> Result<(), AddressError> {
        if to.starts_with('/') {
            crate::address::ActorPath::check(to)?;
            self.send(to, None, envelope);
        } else {
            let path = self.me.path.select(to)?;
            self.send(path.as_str(), None, envelope);
        }
        Ok(())
    }

    /// Sends a copy of `envelope` to each member; returns how many.
    pub(crate) fn send_all(&mut self, members: Vec<Address>, envelope: &Envelope) -> u32 {
        let count = u32::try_from(members.len()).unwrap_or(u32::MAX);
        for member in members {
            self.send(
                member.path.as_str(),
                Some(member.incarnation),
                envelope.clone(),
            );
        }
        count
    }

    /// Spawns a child named `name`; its task starts now, or when the step commits.
    pub(crate) fn spawn_child(
        &mut self,
        name: &str,
        module: String,
        init: Vec<u8>,
        limits: Limits,
    ) -> Result<Address, ChildRefused> {
        self.spawn_child_on(None, name, module, init, limits)
    }

    /// Spawns a child on the cluster's node `node` (`None`, or this node's name: here). A
    /// child elsewhere has a stand-in here at its path, and is supervised by this actor
    /// across the network.
    pub(crate) fn spawn_child_on(
        &mut self,
        node: Option<&str>,
        name: &str,
        module: String,
        init: Vec<u8>,
        limits: Limits,
    ) -> Result<Address, ChildRefused> {
        let remote = match node {
            None => None,
            Some(node) => match self.kernel.remote() {
                Some(remote) if remote.node() == node => None,
                Some(remote) => Some((remote.clone(), node)),
                None => {
                    return Err(ChildRefused::Spawn(SpawnError::UnknownNode(
                        node.to_owned(),
                    )));
                }
            },
        };
        if self.stopping {
            return Err(ChildRefused::Stopping);
        }
        let path = self
            .me
            .path
            .child(name)
            .map_err(ChildRefused::InvalidName)?;
        if self.children.contains_key(name) {
            return Err(ChildRefused::NameTaken(path.to_string()));
        }
        if let Err(quota) = self
            .check_name(name)
            .and_then(|()| self.check_name(&module))
        {
            return Err(ChildRefused::Quota(quota));
        }
        if let Err(quota) = self.check_path(path.as_str()) {
            return Err(ChildRefused::Quota(quota));
        }
        if init.len() > self.kernel.config.max_message_bytes {
            return Err(ChildRefused::Quota(self.refuse(Quota::InitSize)));
        }
        let Some(reservation) = self.lineage.reserve(limits.quotas.descendants) else {
            return Err(ChildRefused::Quota(self.refuse(Quota::Descendants)));
        };
        let request = SpawnRequest {
            path,
            module,
            init,
            parent: Some(self.me.clone()),
            limits,
            passivate_after: None,
            hibernate_after: None,
            reservation: Some(reservation),
            incarnation: None,
            restore: crate::kernel::spawn::Restore::No,
        };
        if let Some((remote, node)) = remote {
            let stand_in = remote
                .spawn_on(&self.kernel, node, request)
                .map_err(ChildRefused::Spawn)?;
            let address = stand_in.address.clone();
            self.children.insert(name.to_owned(), stand_in);
            return Ok(address);
        }
        let spawned = self.kernel.spawn(request).map_err(ChildRefused::Spawn)?;
        let address = spawned.actor.address.clone();
        self.children.insert(name.to_owned(), spawned.actor);
        self.step.start(spawned.task);
        Ok(address)
    }

    /// Stops this actor (after the current call) or one of its descendants; anything else is
    /// refused (false).
    pub(crate) fn stop(&mut self, path: &str, incarnation: u64) -> bool {
        if path == self.me.path.as_str() && incarnation == self.me.incarnation {
            self.stop_requested = true;
            return true;
        }
        let descendant = crate::address::ActorPath::parse(path)
            .map(|p| p.is_descendant_of(&self.me.path))
            .unwrap_or(false);
        if !descendant {
            return false;
        }
        if let Some(actor) = self.kernel.registry.get(path)
            && actor.address.incarnation == incarnation
        {
            self.step.stop(actor);
        }
        true
    }
}
