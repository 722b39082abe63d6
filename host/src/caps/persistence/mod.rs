//! `mote:actor/persistence`: persistent actors. Their snapshots and event journals, commit
//! before effects, exactly-once messages between them, durable timers (reminders), and virtual
//! actors (entities) that are activated by a message and passivated when idle.
//!
//! ```text
//! guest call (receive/start/stopping) ──> journal ops + held effects (see actor::step)
//!                                            │ seal: one StepWrite, sends stamped as outbox rows
//!                                            v
//!      one unit of the store (a redb transaction; one JetStream record, see `backend`):
//!              snapshot/events, outbox rows, acks of consumed messages
//!                                            │ only then
//!                                            v
//!                  effects released: sends (carrying their outbox receipt), spawns, stops,
//!                  timers, reminders
//! ```
//!
//! Exactly once between persistent actors, with the local store: a sent message is an outbox row
//! until the receiver's commit deletes it in the same transaction that records the receiver's
//! new state. After a crash the rows still present are exactly the messages whose effect was not
//! committed; they are parked by target path and handed to the first incarnation spawned (or
//! entity activated) at that path, before anything else. With the JetStream store, sends are
//! numbered and receivers drop what they consumed before (`channel`): a duplicate never reaches
//! the guest (`fresh`), and what is pending is sent again (`resend`) until it is consumed. A receiver that keeps no durable state acknowledges lazily (at
//! least once across crashes), or, if it asked for at-most-once (the `delivery` capability),
//! durably before it sees the message (`acknowledge`).
//!
//! Invariants:
//! - An actor is persistent from its `recover` on: from then, its steps hold their effects and
//!   are sealed here.
//! - Two live actors never share a persistence id: `recover` refuses an id another live
//!   incarnation holds, and the claim ends with the incarnation.
//! - A failed call gives its event numbers back and arms none of its reminders.
//! - An actor reaches only the durable state of its own scope: a persistence id is
//!   `<scope>:<name>`, the scope being the actor's module name or `@<kind>` for an entity.
//! - A replay's persistence (see `history`) reads one id's history up to an event and writes
//!   nothing: it has no database writer at all, and what its actor would write is counted and
//!   dropped when the step is sealed.

pub(crate) mod backend;
mod backlog;
pub(crate) mod channel;
pub(crate) mod entities;
pub(crate) mod history;
pub(crate) mod images;
mod jetstream;
pub(crate) mod journal;
mod local;
pub(crate) mod owners;
mod reminders;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::registry::Registry;

use wasmtime::component::Linker;

use self::backend::{Backend, StorageError};
use self::backlog::{Parked, Parking};
use self::entities::{Entities, EntityOptions};
use self::history::History;
use self::journal::{Op, OutboxRow, ReminderRow, StepWrite, unix_ms};
use self::local::Local;
use self::owners::Owner;
use self::reminders::{Reminder, Reminders};
use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::actor::step::{Commit, Deferred, Step};
use crate::address::Address;
use crate::caps::timers::wheel::Wheel;
use crate::error::{HostError, SpawnError};
use crate::kernel::{Kernel, Undelivered};
use crate::message::{Envelope, Receipt};
use crate::progress::{Task, Tracker};
use crate::quota::Quota;
use crate::sandbox::bindings::mote::actor::persistence::{
    self as wit, Event as WitEvent, PersistError, Snapshot as WitSnapshot,
};
use crate::storage::committer::CommitStats;

/// The longest persistence id accepted.
const MAX_PID_BYTES: usize = 1024;
/// The most events one `replay` call returns.
const MAX_REPLAY_PAGE: usize = 4096;
/// From how many events to replay a recovery is reported as progress.
const REPORTED_REPLAY: u64 = 10_000;

/// Where persistent actors' state lives.
enum Store {
    /// Nowhere: the host runs without a database (`recover` answers `unavailable`).
    Volatile,
    /// In a store: the host's database, or one every node reaches.
    Durable(Arc<dyn Backend>),
    /// In a history read for a replay, which writes nothing.
    Replay(Arc<History>),
}

/// The capability behind the `persistence` interface.
pub(crate) struct Persistence {
    store: Store,
    parking: Arc<Parking>,
    pub(crate) entities: Arc<Entities>,
    reminders: Reminders,
    /// Persistence ids in use, by the incarnation that recovered them.
    claims: Mutex<HashMap<String, Address>>,
    max_state_bytes: usize,
    max_event_bytes: usize,
    /// Modules that may adopt any legacy (schema-1) id they name.
    legacy_owners: Vec<String>,
}

/// One actor instance's persistence: the id it chose and, once it recovered, its journal.
pub(crate) struct Persistent {
    /// The scope of its persistence ids: its module's name (shared, not copied), or `@<kind>`
    /// for an entity.
    scope: Arc<str>,
    /// A persistence id chosen before `recover` (scoped).
    pid: Option<String>,
    /// Set by `recover`: the actor is persistent. Boxed, as is `recovery`: most actors never
    /// persist, and each live actor holds this state for its whole life.
    journal: Option<Box<Journaled>>,
    /// A long replay under way, reported as progress: its tracker and the seq it starts after.
    recovery: Option<Box<(Tracker, u64)>>,
}

/// The durable side of a persistent actor instance.
struct Journaled {
    pid: String,
    /// The latest event seq.
    seq: u64,
    /// This call's changes, in order.
    ops: Vec<Op>,
    seq_changed: bool,
    /// Reminders this call scheduled, armed when it commits.
    arm: Vec<Arm>,
    /// The instance as the writer of `pid`, until a commit has recorded it.
    owner: Option<Box<Owner>>,
}

impl Journaled {
    /// The journal of `actor`'s instance, which recovered `pid` at event `seq`.
    fn new(pid: String, seq: u64, actor: &ActorCore) -> Self {
        Journaled {
            pid,
            seq,
            ops: Vec::new(),
            seq_changed: false,
            arm: Vec::new(),
            owner: Some(Box::new(owner_of(actor, seq))),
        }
    }
}

/// `actor` as the writer of the events after `seq`.
fn owner_of(actor: &ActorCore, seq: u64) -> Owner {
    Owner {
        module: actor.module.to_string(),
        version: actor.version.to_string(),
        path: actor.me.path.to_string(),
        init: actor.init.to_vec(),
        since: seq.saturating_add(1),
    }
}

/// A reminder to arm once its step has committed.
struct Arm {
    id: u64,
    envelope: Envelope,
    delay: Duration,
    period: Option<Duration>,
}

impl Persistence {
    /// Registers an entity kind and activates the entities whose recovered work waits; returns
    /// how many it activated.
    pub(crate) fn register_entity(
        &self,
        kernel: &Arc<Kernel>,
        kind: &str,
        module: &str,
        options: EntityOptions,
    ) -> Result<usize, SpawnError> {
        self.entities.register(kernel, kind, module, options)?;
        let mut woken = 0;
        for path in self.parking.paths_under(&format!("/user/{kind}/")) {
            if self.entities.activate(kernel, &path).is_ok() {
                woken += 1;
            }
        }
        Ok(woken)
    }

    /// Waits until the store can be used.
    pub(crate) async fn ready(&self) -> Result<(), HostError> {
        match self.durable() {
            Some(store) => store
                .ready()
                .await
                .map_err(|e| HostError::Storage(Box::new(e))),
            None => Ok(()),
        }
    }

    /// The store's commit counters, if the host has a store.
    pub(crate) fn stats(&self) -> Option<CommitStats> {
        self.durable().map(|d| d.stats())
    }

    /// The host's store, if it has one.
    fn durable(&self) -> Option<&Arc<dyn Backend>> {
        match &self.store {
            Store::Durable(durable) => Some(durable),
            Store::Volatile | Store::Replay(_) => None,
        }
    }

    fn release_claim(&self, pid: &str, holder: &Address) {
        let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        if claims.get(pid) == Some(holder) {
            claims.remove(pid);
        }
    }
}

impl Capability for Persistence {
    type State = Persistent;
    const IMPORTS: &'static [&'static str] = &["mote:actor/persistence@"];

    fn new(env: &Env<'_>) -> Result<Self, HostError> {
        let parking = Arc::new(Parking::default());
        let store = match (env.replay, env.database) {
            (Some(history), _) => Store::Replay(history.clone()),
            (None, _) if let Some(config) = env.config.jetstream.clone() => {
                let runtime =
                    tokio::runtime::Handle::try_current().map_err(|_| HostError::NoRuntime)?;
                tracing::info!(store = "jetstream", url = %config.url, "store opened (it connects on first use)");
                Store::Durable(Arc::new(jetstream::JetStream::new(config, runtime)))
            }
            (None, Some(db)) => {
                let store: Arc<dyn Backend> = Arc::new(Local::open(db, env.config.group_commit)?);
                let backlog = store.backlog().map_err(storage_failed)?;
                for receipt in parking.fill(backlog) {
                    store.settle(receipt);
                }
                let (messages, reminders) = parking.len();
                tracing::info!(store = store.name(), path = %db.path().display(), messages, reminders, "store opened");
                Store::Durable(store)
            }
            (None, None) => Store::Volatile,
        };
        // Passivated images go where the state goes.
        let images = images::Images::new(match &store {
            Store::Durable(store) => Some(store.clone()),
            _ => None,
        });
        Ok(Persistence {
            store,
            parking,
            entities: Arc::new(Entities::new(images)),
            reminders: Reminders::default(),
            claims: Mutex::default(),
            max_state_bytes: env.config.max_state_bytes,
            max_event_bytes: env.config.max_message_bytes,
            legacy_owners: env.config.legacy_owners.clone(),
        })
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        wit::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn capture(&self, _actor: &ActorCore, state: &Persistent) -> Result<Vec<u8>, String> {
        match &state.journal {
            Some(_) => Err(
                "it is persistent: it recovers from its journal, which an image would bypass"
                    .into(),
            ),
            None => Ok(Vec::new()),
        }
    }

    fn state(&self, actor: &ActorCore, origin: Origin<'_, Persistent>) -> Persistent {
        let path = actor.me.path.as_str();
        let scope = match self.entities.kind_of(path) {
            Some(kind) => format!("@{kind}").into(),
            None => actor.module.clone(),
        };
        match origin {
            Origin::Spawned => Persistent {
                scope,
                pid: None,
                journal: None,
                recovery: None,
            },
            // A fresh instance recovers for itself.
            Origin::Restarted { .. } => Persistent {
                scope,
                pid: None,
                journal: None,
                recovery: None,
            },
            // The new version goes on with the same id and sequence.
            Origin::Upgraded { old } => Persistent {
                scope,
                pid: old.pid.clone(),
                journal: old
                    .journal
                    .as_ref()
                    .map(|j| Box::new(Journaled::new(j.pid.clone(), j.seq, actor))),
                recovery: None,
            },
        }
    }

    fn metrics(&self, registry: &mut Registry) {
        if let Some(store) = self.durable() {
            store.metrics(registry);
        }
    }

    fn started(&self, kernel: &Arc<Kernel>) {
        self.reminders
            .drive(kernel, self.parking.clone(), self.entities.clone());
        if let Some(store) = self.durable() {
            kernel
                .runtime
                .spawn(resend(Arc::downgrade(kernel), store.clone()));
            kernel.runtime.spawn(wake(
                Arc::downgrade(kernel),
                store.clone(),
                self.entities.clone(),
            ));
        }
    }

    async fn shutdown(&self) {
        if let Some(store) = self.durable() {
            store.flush().await;
            store.close();
        }
    }

    fn closed(&self) {
        self.reminders.wake();
    }

    fn stopped(&self, _kernel: &Arc<Kernel>, actor: &Address, state: Option<&mut Persistent>) {
        if let Some(journal) = state.and_then(|s| s.journal.as_ref()) {
            self.release_claim(&journal.pid, actor);
            if let Some(store) = self.durable() {
                store.released(&journal.pid, actor);
            }
        }
    }

    fn seal(
        &self,
        state: &mut Persistent,
        step: &mut Step,
        consumed: &mut Vec<Receipt>,
    ) -> Option<Commit> {
        let journal = state.journal.as_mut()?;
        if let Some((tracker, _)) = state.recovery.take().map(|r| *r) {
            // The call that recovered has returned: recovery is over.
            tracker.finish(Ok(()));
        }
        let durable = match &self.store {
            Store::Durable(durable) => durable,
            Store::Replay(history) => {
                drop_writes(history, journal);
                return None;
            }
            Store::Volatile => return None,
        };
        let ops = std::mem::take(&mut journal.ops);
        let seq_changed = std::mem::replace(&mut journal.seq_changed, false);
        let arm = std::mem::take(&mut journal.arm);
        if !arm.is_empty() {
            step.later(ArmReminders {
                wheel: self.reminders.handle(),
                owner: journal.pid.clone(),
                reminders: arm,
            });
        }
        // A step that changed no durable state and consumed no durable message commits
        // nothing: its input leaves no trace a crash could contradict, so its messages are
        // released at once, exactly as durable as that input was (a query's reply costs no
        // fsync).
        if ops.is_empty() && consumed.is_empty() {
            return None;
        }
        let sends = step.held_sends() as u64;
        let mut outbox = Vec::with_capacity(sends as usize);
        if sends > 0 {
            let first = durable.allocate_outbox(sends);
            for (id, (path, envelope)) in (first..).zip(step.sends_mut()) {
                envelope.receipt = Some(Receipt::Outbox(id));
                outbox.push((
                    id,
                    OutboxRow {
                        target: path.to_owned(),
                        sender: envelope.sender.as_ref().map(|s| s.path.to_string()),
                        kind: envelope.kind.clone(),
                        body: envelope.body.clone(),
                    },
                ));
            }
        }
        let write = StepWrite {
            pid: journal.pid.clone(),
            ops,
            last_seq: seq_changed.then_some(journal.seq),
            outbox,
            acks: std::mem::take(consumed),
            owner: journal.owner.take().map(|owner| *owner),
        };
        Some(durable.commit(write))
    }

    fn acknowledge(&self, receipt: Receipt) -> Option<Commit> {
        Some(self.durable()?.acknowledge(receipt))
    }

    fn abandon(&self, state: &mut Persistent) {
        let Some(journal) = state.journal.as_mut() else {
            return;
        };
        let ops = std::mem::take(&mut journal.ops);
        if std::mem::replace(&mut journal.seq_changed, false) {
            // The events of the failed call were never written: their numbers are free again.
            let events = ops
                .iter()
                .filter(|op| matches!(op, Op::Event { .. }))
                .count() as u64;
            journal.seq = journal.seq.saturating_sub(events);
        }
        journal.arm.clear();
    }

    fn admit(&self, _state: &mut Persistent, envelope: &Envelope) -> bool {
        // A wake-up has done its work by activating the entity.
        envelope.kind != WAKE_KIND
    }

    fn fresh(&self, state: &mut Persistent, receipt: Receipt) -> bool {
        match (state.journal.as_ref(), self.durable()) {
            (Some(journal), Some(store)) => store.admit(&journal.pid, receipt),
            _ => true,
        }
    }

    fn backlog(&self, kernel: &Arc<Kernel>, path: &str, into: &mut Vec<Envelope>) {
        let now = unix_ms();
        for item in self.parking.take(path) {
            match item {
                Parked::Message(envelope) => into.push(envelope),
                Parked::Reminder {
                    id,
                    owner,
                    envelope,
                    due_ms,
                    period,
                } => {
                    let delay = Duration::from_millis(due_ms.saturating_sub(now));
                    // Armed from a task of its own: this may run inside the reminder driver
                    // (a firing that activates an entity), which holds the wheel's lock.
                    let wheel = self.reminders.handle();
                    let path = path.to_owned();
                    kernel.runtime.spawn(async move {
                        reminders::arm_on(&wheel, id, owner, &path, envelope, delay, period);
                    });
                }
            }
        }
    }

    fn return_backlog(&self, path: &str, messages: &mut Vec<Envelope>) {
        let items = messages.drain(..).map(Parked::Message).collect();
        self.parking.park(path, items);
    }

    fn unclaimed(
        &self,
        kernel: &Arc<Kernel>,
        path: &str,
        envelope: Envelope,
    ) -> Result<Option<Undelivered>, Envelope> {
        if !self.entities.is_entity(path) {
            return Err(envelope);
        }
        // A virtual actor's identity is its path: any incarnation, live or not, will do.
        Ok(self.entities.deliver(kernel, path, envelope))
    }

    fn settle(&self, receipt: Receipt) {
        if let Some(store) = self.durable() {
            store.settle(receipt);
        }
    }

    fn undeliverable(&self, receipt: Receipt) {
        if let Some(store) = self.durable() {
            store.undeliverable(receipt);
        }
    }

    fn export_receipt(&self, receipt: Receipt) -> Option<Vec<u8>> {
        self.durable()?.export(receipt)
    }

    fn import_receipt(&self, token: &[u8]) -> Option<Receipt> {
        self.durable()?.import(token)
    }
}

/// The reminders of a committed step, to arm.
struct ArmReminders {
    wheel: Arc<Wheel<String, Reminder>>,
    owner: String,
    reminders: Vec<Arm>,
}

impl Deferred for ArmReminders {
    fn release(self, _kernel: &Arc<Kernel>) {
        for arm in self.reminders {
            let Some(path) = arm.envelope.sender.as_ref().map(|s| s.path.to_string()) else {
                continue;
            };
            reminders::arm_on(
                &self.wheel,
                arm.id,
                self.owner.clone(),
                &path,
                arm.envelope,
                arm.delay,
                arm.period,
            );
        }
    }
}

/// How long a numbered send waits for its acknowledgement before it is sent again.
const RESEND_AFTER: Duration = Duration::from_secs(2);

/// Sends again, while the kernel lives, what this host's writers sent and no receiver has
/// acknowledged (a message lost with a node, or refused by a full mailbox): receivers drop
/// what they already consumed, so this only ever fills gaps.
async fn resend(kernel: std::sync::Weak<Kernel>, store: Arc<dyn Backend>) {
    let mut tick = tokio::time::interval(RESEND_AFTER / 2);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(kernel) = kernel.upgrade() else {
            return;
        };
        if kernel.is_shutting_down() {
            return;
        }
        for again in store.overdue(RESEND_AFTER) {
            let target = again.row.target.clone();
            let mut envelope = Envelope::new(Some(again.sender), again.row.kind, again.row.body);
            envelope.receipt = Some(again.receipt);
            // Not delivered: it stays pending, and goes again next time (an entity is
            // activated by the delivery itself).
            let _ = kernel.deliver(&target, None, envelope);
        }
    }
}

/// The kind of the message that wakes an entity whose reminder is due while no node runs it;
/// its guest never sees it.
const WAKE_KIND: &str = "mote.wake";

/// How often the store is asked for reminders due where no writer lives.
const WAKE_EVERY: Duration = Duration::from_secs(1);

/// Wakes, while the kernel lives, the entities whose reminders are due while no node runs
/// them (their node died): activated here or on their node, they recover their reminders and
/// fire them.
async fn wake(kernel: std::sync::Weak<Kernel>, store: Arc<dyn Backend>, entities: Arc<Entities>) {
    let mut tick = tokio::time::interval(WAKE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let paths = store.dormant().await;
        let Some(kernel) = kernel.upgrade() else {
            return;
        };
        if kernel.is_shutting_down() {
            return;
        }
        for path in paths.into_iter().filter(|p| entities.is_entity(p)) {
            tracing::debug!(%path, "waking an entity for its reminder");
            let _ = kernel.deliver(&path, None, Envelope::new(None, WAKE_KIND, Vec::new()));
        }
    }
}

/// The persistence id `id` names in `scope`: a bare name is put in it, a scoped one must be
/// in it.
fn scoped(scope: &str, id: String) -> Result<String, PersistError> {
    match id.split_once(':') {
        None if id.is_empty() => Err(PersistError::InvalidId("an empty persistence id".into())),
        None => Ok(format!("{scope}:{id}")),
        Some((theirs, _)) if theirs == scope => Ok(id),
        Some(_) => Err(PersistError::NotOwned(id)),
    }
}

/// The legacy id (schema 1) that `pid` would adopt.
fn legacy_of(pid: &str) -> String {
    let name = pid.split_once(':').map_or(pid, |(_, name)| name);
    format!("{}:{name}", journal::LEGACY_SCOPE)
}

fn storage(e: StorageError) -> PersistError {
    PersistError::Storage(crate::error::chain(&e))
}

/// A store that failed as the host started.
fn storage_failed(e: StorageError) -> HostError {
    match e {
        StorageError::Database(e) => HostError::from(e),
        other => HostError::Storage(Box::new(other)),
    }
}

impl Call<'_, Persistence> {
    fn journal(&mut self) -> Result<&mut Journaled, PersistError> {
        if let Store::Volatile = self.cap.store {
            return Err(PersistError::Unavailable);
        }
        self.state
            .journal
            .as_deref_mut()
            .ok_or(PersistError::NotRecovered)
    }

    fn check_size(len: usize, limit: usize) -> Result<(), PersistError> {
        if len > limit {
            return Err(PersistError::TooLarge(len as u64));
        }
        Ok(())
    }
}

impl wit::Host for Call<'_, Persistence> {
    fn persistence_id(&mut self) -> String {
        match (&self.state.journal, &self.state.pid) {
            (Some(j), _) => j.pid.clone(),
            (None, Some(pid)) => pid.clone(),
            (None, None) => format!("{}:{}", self.state.scope, self.actor.me.path),
        }
    }

    fn set_persistence_id(&mut self, id: String) -> Result<(), PersistError> {
        if self.state.journal.is_some() {
            return Err(PersistError::InvalidId(format!(
                "{id:?}: the persistence id is fixed once recover has been called"
            )));
        }
        let pid = scoped(&self.state.scope, id).inspect_err(|_| {
            self.actor.refuse(Quota::NotOwned);
        })?;
        if pid.len() > MAX_PID_BYTES || pid.ends_with(':') {
            return Err(PersistError::InvalidId(format!(
                "{pid:?}: a persistence id has a name and at most {MAX_PID_BYTES} bytes"
            )));
        }
        self.state.pid = Some(pid);
        Ok(())
    }

    fn recover(&mut self) -> Result<Option<WitSnapshot>, PersistError> {
        let pid = self.persistence_id();
        let durable = match &self.cap.store {
            Store::Durable(durable) => durable,
            Store::Replay(history) => return self.recover_replayed(pid, &history.clone()),
            Store::Volatile => return Err(PersistError::Unavailable),
        };
        {
            let mut claims = self.cap.claims.lock().unwrap_or_else(|p| p.into_inner());
            let me = &self.actor.me;
            if let Some(holder) = claims.get(&pid)
                && holder.path != me.path
                && self.actor.kernel.registry.with(holder.path.as_str(), |a| {
                    a.is_some_and(|a| a.address.incarnation == holder.incarnation)
                })
            {
                return Err(PersistError::InvalidId(format!(
                    "{pid:?} is in use by the live actor {holder}"
                )));
            }
            claims.insert(pid.clone(), me.clone());
        }
        // Legacy state (schema 1) is adopted by the actor at its path, or by a trusted module.
        let scope = &self.state.scope;
        let own_path = pid == format!("{scope}:{}", self.actor.me.path);
        let trusted = self.cap.legacy_owners.iter().any(|m| **m == **scope);
        if (own_path || trusted) && durable.adopt(&pid).map_err(storage)? {
            self.cap.reminders.transfer(&legacy_of(&pid), &pid);
            tracing::info!(%pid, "adopted the state its id had before persistence ids were scoped");
        }
        let recovered = durable.recover(&pid, &self.actor.me).map_err(storage)?;
        let (snapshot, seq) = (recovered.snapshot, recovered.seq);
        self.resume(&pid, recovered.unsent, recovered.reminders);
        let from = snapshot.as_ref().map_or(0, |s| s.seq);
        if seq - from >= REPORTED_REPLAY {
            let task = Task::Recovery {
                persistence_id: pid.clone(),
                actor: self.actor.me.path.to_string(),
            };
            let tracker = self.actor.kernel.reports.begin(task, Some(seq - from));
            self.state.recovery = Some(Box::new((tracker, from)));
        }
        match &mut self.state.journal {
            Some(j) => j.seq = j.seq.max(seq),
            None => self.state.journal = Some(Box::new(Journaled::new(pid, seq, self.actor))),
        }
        // From now on this actor's steps are committed before their effects.
        self.actor.step.hold();
        Ok(snapshot.map(|s| WitSnapshot {
            seq: s.seq,
            state: s.state,
        }))
    }

    fn replay(&mut self, after: u64, max: u32) -> Result<Vec<WitEvent>, PersistError> {
        let pid = self.journal()?.pid.clone();
        let max = (max as usize).min(MAX_REPLAY_PAGE);
        let events = match &self.cap.store {
            Store::Durable(durable) => durable.events(&pid, after, max),
            Store::Replay(history) => history.events(after, max).map_err(StorageError::from),
            Store::Volatile => return Err(PersistError::Unavailable),
        }
        .map_err(storage)?;
        if let Some((tracker, from)) = self.state.recovery.as_deref_mut()
            && let Some((last, _)) = events.last()
        {
            tracker.advance(last.saturating_sub(*from));
        }
        Ok(events
            .into_iter()
            .map(|(seq, data)| WitEvent { seq, data })
            .collect())
    }

    fn save_snapshot(&mut self, state: Vec<u8>) -> Result<u64, PersistError> {
        Self::check_size(state.len(), self.cap.max_state_bytes)?;
        let j = self.journal()?;
        let seq = j.seq;
        j.ops.push(Op::Snapshot { seq, state });
        Ok(seq)
    }

    fn persist(&mut self, data: Vec<u8>) -> Result<u64, PersistError> {
        Self::check_size(data.len(), self.cap.max_event_bytes)?;
        let j = self.journal()?;
        j.seq += 1;
        j.seq_changed = true;
        let seq = j.seq;
        j.ops.push(Op::Event { seq, data });
        Ok(seq)
    }

    fn delete_events(&mut self, through: u64) -> Result<(), PersistError> {
        self.journal()?.ops.push(Op::DeleteEvents { through });
        Ok(())
    }

    fn delete_state(&mut self) -> Result<(), PersistError> {
        let owner = owner_of(self.actor, 0);
        let j = self.journal()?;
        j.seq = 0;
        j.seq_changed = false;
        j.ops.push(Op::DeleteState);
        j.arm.clear();
        // The row goes with the state; the events numbered from 1 again are this instance's.
        j.owner = Some(Box::new(owner));
        let pid = j.pid.clone();
        self.cap.reminders.cancel_all(&pid);
        Ok(())
    }

    fn in_shutdown(&mut self) -> bool {
        self.actor.kernel.is_shutting_down()
    }

    fn remind(
        &mut self,
        kind: String,
        body: Vec<u8>,
        delay_ms: u64,
        period_ms: Option<u64>,
    ) -> Result<u64, PersistError> {
        Self::check_size(body.len(), self.cap.max_event_bytes)?;
        match self.actor.check_kind(&kind) {
            Ok(()) => {}
            Err(Quota::ReservedKind) => return Err(PersistError::ReservedKind(kind)),
            Err(quota) => return Err(PersistError::Quota(quota.into())),
        }
        let quotas = *self.actor.quotas();
        let period = period_ms.filter(|p| *p > 0).map(Duration::from_millis);
        quotas
            .check_period(period)
            .map_err(|q| PersistError::Quota(self.actor.refuse(q).into()))?;
        let me = self.actor.me.clone();
        let trace = self.actor.trace;
        let cap = self.cap;
        let reminders = &cap.reminders;
        let j = self.journal()?;
        if reminders.owned(&j.pid) + j.arm.len() >= quotas.reminders {
            let quota = self.actor.refuse(Quota::Reminders);
            return Err(PersistError::Quota(quota.into()));
        }
        let id = match &cap.store {
            Store::Durable(durable) => durable.allocate_reminder(),
            Store::Replay(history) => history.allocate_reminder(),
            Store::Volatile => return Err(PersistError::Unavailable),
        };
        let period_ms = period.map(|p| p.as_millis() as u64);
        let row = ReminderRow {
            owner: j.pid.clone(),
            target: me.path.to_string(),
            kind: kind.clone(),
            body: body.clone(),
            due_ms: unix_ms().saturating_add(delay_ms),
            period_ms,
        };
        j.ops.push(Op::Remind { id, row });
        j.arm.push(Arm {
            id,
            envelope: Envelope::new(Some(me), kind, body).traced(trace),
            delay: Duration::from_millis(delay_ms),
            period,
        });
        Ok(id)
    }

    fn cancel_reminder(&mut self, id: u64) -> bool {
        let reminders = &self.cap.reminders;
        let Ok(j) = self.journal() else {
            return false;
        };
        // Not yet armed: it was scheduled in this very step.
        let cancelled = match j.arm.iter().position(|a| a.id == id) {
            Some(i) => {
                j.arm.remove(i);
                true
            }
            None => reminders.cancel(&j.pid, id),
        };
        if cancelled {
            j.ops.push(Op::CancelReminder { id });
        }
        cancelled
    }
}

impl Call<'_, Persistence> {
    /// Sends again what a store that keeps each id's outbox with it found unacknowledged, and
    /// arms its reminders (the local store parks both at open instead).
    fn resume(
        &mut self,
        pid: &str,
        unsent: Vec<(u64, OutboxRow)>,
        reminders: Vec<(u64, ReminderRow)>,
    ) {
        let kernel = self.actor.kernel.clone();
        for (handle, row) in unsent {
            let mut envelope = Envelope::new(Some(self.actor.me.clone()), row.kind, row.body);
            envelope.receipt = Some(Receipt::Outbox(handle));
            if let Some(undelivered) = kernel.deliver(&row.target, None, envelope) {
                self.cap
                    .parking
                    .park(&row.target, vec![Parked::Message(undelivered.envelope)]);
                self.cap.entities.activate_parked(&kernel, &row.target);
            }
        }
        let now = unix_ms();
        let wheel = self.cap.reminders.handle();
        for (id, row) in reminders {
            let envelope = Envelope::new(Some(self.actor.me.clone()), row.kind, row.body);
            let delay = Duration::from_millis(row.due_ms.saturating_sub(now));
            let period = row.period_ms.map(Duration::from_millis);
            reminders::arm_on(
                &wheel,
                id,
                pid.to_owned(),
                &row.target,
                envelope,
                delay,
                period,
            );
        }
    }

    /// `recover` in a replay: the history's snapshot and target event, for its own id only.
    fn recover_replayed(
        &mut self,
        pid: String,
        history: &History,
    ) -> Result<Option<WitSnapshot>, PersistError> {
        if pid != history.pid() {
            return Err(PersistError::Storage(format!(
                "this replay holds the history of {:?}, not of {pid:?}",
                history.pid()
            )));
        }
        let snapshot = history.recover();
        match &mut self.state.journal {
            Some(j) => j.seq = j.seq.max(history.until()),
            None => {
                self.state.journal =
                    Some(Box::new(Journaled::new(pid, history.until(), self.actor)))
            }
        }
        self.actor.step.hold();
        Ok(snapshot.map(|s| WitSnapshot {
            seq: s.seq,
            state: s.state,
        }))
    }
}

/// Drops what a replayed actor's step would have written, counting it.
fn drop_writes(history: &History, journal: &mut Journaled) {
    let ops = std::mem::take(&mut journal.ops);
    journal.seq_changed = false;
    journal.arm.clear();
    journal.owner = None;
    history.tally(|t| {
        for op in &ops {
            match op {
                Op::Event { .. } => t.events += 1,
                Op::Snapshot { .. } => t.snapshots += 1,
                Op::DeleteEvents { .. } | Op::DeleteState => t.deletions += 1,
                Op::Remind { .. } | Op::CancelReminder { .. } => t.reminders += 1,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::journal::{OutboxRow, StepWrite};
    use super::*;
    use crate::caps::capability::{Capability, Env};
    use crate::config::HostConfig;
    use crate::guestlog::GuestLog;
    use crate::storage::Scratch;
    use crate::storage::committer::Write;

    /// A persistence service on a fresh database, with outbox rows 1..=`rows` waiting.
    fn persistence(rows: u64) -> (Persistence, Arc<crate::storage::Database>, Scratch) {
        let scratch = Scratch::new("acknowledge");
        let db = scratch.database("d.redb");
        let persistence = Persistence::new(&Env {
            config: &HostConfig::new(),
            database: Some(&db),
            guest_log: &GuestLog::start(1),
            replay: None,
        })
        .expect("a persistence service");
        let write = StepWrite {
            pid: "m:/user/source".into(),
            outbox: (1..=rows)
                .map(|id| {
                    let row = OutboxRow {
                        target: "/user/receiver".into(),
                        sender: None,
                        kind: "k".into(),
                        body: vec![id as u8],
                    };
                    (id, row)
                })
                .collect(),
            ..StepWrite::default()
        };
        db.write_with(|txn| write.apply(txn)).expect("the rows");
        (persistence, db, scratch)
    }

    fn outbox(db: &crate::storage::Database) -> u64 {
        use redb::ReadableTableMetadata;
        let read = db.read().expect("a read");
        let table = read.open_table(journal::OUTBOX).expect("the outbox");
        table.len().expect("its length")
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    #[test]
    fn acknowledging_first_removes_the_row_durably() {
        let (persistence, db, _scratch) = persistence(2);
        let ack = persistence
            .acknowledge(Receipt::Outbox(1))
            .expect("a write to await first");
        runtime()
            .block_on(ack)
            .expect("the acknowledgement commits");
        assert_eq!(outbox(&db), 1, "row 1 is gone, row 2 waits");
    }

    #[test]
    fn a_failed_acknowledgement_is_an_error_and_the_row_stays() {
        let (persistence, db, _scratch) = persistence(1);
        persistence.durable().unwrap().close();
        let ack = persistence.acknowledge(Receipt::Outbox(1)).unwrap();
        assert!(
            runtime().block_on(ack).is_err(),
            "the guest must not see it"
        );
        assert_eq!(outbox(&db), 1, "its row stays");
    }

    #[test]
    fn a_host_without_a_database_has_nothing_to_acknowledge() {
        let volatile = Persistence::new(&Env {
            config: &HostConfig::new(),
            database: None,
            guest_log: &GuestLog::start(1),
            replay: None,
        })
        .expect("a persistence service");
        assert!(volatile.acknowledge(Receipt::Outbox(1)).is_none());
    }
}
