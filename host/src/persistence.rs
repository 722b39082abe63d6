//! Persistent actors: the `persistence` import, the step a persistent actor builds during one
//! call, and commit before effects.
//!
//! ```text
//! guest call (receive/start/stopping) ──> Step { ops, effects, acks }
//!                                            │ the cell awaits the group commit
//!                                            v
//!              one redb transaction: snapshot/events, outbox rows, acks of consumed messages
//!                                            │ only then
//!                                            v
//!                  effects released: sends (carrying their outbox receipt), spawns, stops,
//!                  timers, reminders
//! ```
//!
//! Exactly once between persistent actors: a sent message is an outbox row until the receiver's
//! commit deletes it in the same transaction that records the receiver's new state. After a
//! crash the rows still present are exactly the messages whose effect was not committed; they are
//! parked by target path and handed to the first incarnation spawned (or entity activated) at that
//! path, before anything else. A receiver that keeps no durable state acknowledges lazily (at
//! least once across crashes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::address::{ActorPath, Address};
use crate::bindings::mote::actor::persistence::{
    Event as WitEvent, Host, PersistError, Snapshot as WitSnapshot,
};
use crate::cell::CellSpec;
use crate::committer::{CommitStats, Committer, Op, StepWrite};
use crate::instance::ActorState;
use crate::mailbox::{ActorRef, SystemMsg};
use crate::message::{Envelope, Receipt, StopReason};
use crate::store::{OutboxRow, Store, StoreError, unix_ms};
use crate::system::Shared;
use crate::timers::TimerTarget;

/// The longest persistence id accepted.
const MAX_PID_BYTES: usize = 1024;
/// The most events one `replay` call returns.
const MAX_REPLAY_PAGE: usize = 4096;

/// A message or reminder from before this host started, waiting for its target to live.
pub(crate) enum Parked {
    Message(Envelope),
    Reminder {
        id: u64,
        owner: String,
        envelope: Envelope,
        due_ms: u64,
        period: Option<Duration>,
    },
}

/// The host's persistence: the store, its committer, and the backlog waiting for targets.
pub(crate) struct Persistence {
    pub(crate) store: Arc<Store>,
    pub(crate) committer: Committer,
    parked: Mutex<HashMap<String, Vec<Parked>>>,
    /// Persistence ids in use, by the incarnation that recovered them.
    claims: Mutex<HashMap<String, Address>>,
}

impl Persistence {
    /// Starts the committer on `store` and parks its backlog by target path.
    pub(crate) fn open(store: Store, max_batch: usize) -> Result<Persistence, StoreError> {
        let store = Arc::new(store);
        let backlog = store.backlog()?;
        let committer = Committer::start(store.clone(), max_batch);
        let mut parked: HashMap<String, Vec<Parked>> = HashMap::new();
        let (mut messages, mut reminders) = (0, 0);
        for (id, row) in backlog.outbox {
            // Ask endpoints do not outlive a host; other unparsable targets cannot be reached.
            if row.target.starts_with("/system/") || ActorPath::parse(&row.target).is_err() {
                committer.ack(Receipt::Outbox(id));
                continue;
            }
            let sender = row.sender.as_deref().and_then(|p| ActorPath::parse(p).ok());
            let mut envelope = Envelope::new(
                sender.map(|path| Address {
                    path,
                    incarnation: 0,
                }),
                row.kind,
                row.body,
            );
            envelope.receipt = Some(Receipt::Outbox(id));
            parked
                .entry(row.target)
                .or_default()
                .push(Parked::Message(envelope));
            messages += 1;
        }
        for (id, row) in backlog.reminders {
            let sender = ActorPath::parse(&row.target).ok().map(|path| Address {
                path,
                incarnation: 0,
            });
            let mut envelope = Envelope::new(sender, row.kind, row.body);
            envelope.receipt = Some(Receipt::Reminder(id));
            parked
                .entry(row.target)
                .or_default()
                .push(Parked::Reminder {
                    id,
                    owner: row.owner,
                    envelope,
                    due_ms: row.due_ms,
                    period: row.period_ms.map(Duration::from_millis),
                });
            reminders += 1;
        }
        tracing::info!(path = %store.path().display(), messages, reminders, "store opened");
        Ok(Persistence {
            store,
            committer,
            parked: Mutex::new(parked),
            claims: Mutex::default(),
        })
    }

    /// Gives up `holder`'s claim on a persistence id (its incarnation has ended).
    pub(crate) fn release_claim(&self, pid: &str, holder: &Address) {
        let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        if claims.get(pid) == Some(holder) {
            claims.remove(pid);
        }
    }

    /// Takes what waits for `path`.
    pub(crate) fn take_parked(&self, path: &str) -> Vec<Parked> {
        let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        if parked.is_empty() {
            return Vec::new();
        }
        parked.remove(path).unwrap_or_default()
    }

    /// Parks items for `path` again, ahead of anything parked since.
    pub(crate) fn park(&self, path: &str, items: Vec<Parked>) {
        if items.is_empty() {
            return;
        }
        let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        let slot = parked.entry(path.to_owned()).or_default();
        let later = std::mem::replace(slot, items);
        slot.extend(later);
    }

    /// The paths with parked items under `prefix`.
    pub(crate) fn parked_under(&self, prefix: &str) -> Vec<String> {
        self.parked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Writes what is queued, stops the committer and closes the file.
    pub(crate) async fn close(&self) {
        self.committer.flush().await;
        self.committer.close();
        self.store.close();
    }

    /// The committer's counters.
    pub(crate) fn stats(&self) -> CommitStats {
        self.committer.stats()
    }
}

impl Shared {
    /// Hands what is parked for a new incarnation at `handle`'s path to its mailbox (messages,
    /// first) and to the timers (reminders).
    pub(crate) fn unpark(&self, handle: &ActorRef, items: Vec<Parked>) {
        let now = unix_ms();
        for item in items {
            match item {
                Parked::Message(envelope) => {
                    if let Err(refused) = handle.tell_host(envelope) {
                        tracing::warn!(?refused, "a recovered message found its target closed");
                    }
                }
                Parked::Reminder {
                    id,
                    owner,
                    envelope,
                    due_ms,
                    period,
                } => {
                    let delay = Duration::from_millis(due_ms.saturating_sub(now));
                    // Armed from a task of its own: this may run inside the timer driver (a
                    // timer that activates an entity), which holds the wheel's lock.
                    let timers = self.timers.clone();
                    let path = handle.address.path.to_string();
                    self.runtime.spawn(async move {
                        timers.remind(id, &owner, &path, envelope, delay, period);
                    });
                }
            }
        }
    }

    /// Delivers a reminder's firing; false (and parked) if no actor lives at `path`.
    pub(crate) fn deliver_reminder(
        &self,
        path: &str,
        envelope: Envelope,
        (id, owner): (u64, &str),
        period: Option<Duration>,
    ) -> bool {
        match self.deliver(path, None, envelope) {
            None => true,
            Some((envelope, _, _)) => match &self.persistence {
                Some(p) => {
                    let item = Parked::Reminder {
                        id,
                        owner: owner.to_owned(),
                        envelope,
                        due_ms: 0,
                        period,
                    };
                    p.park(path, vec![item]);
                    // An entity comes back to life for its reminder.
                    self.activate_parked(path);
                    false
                }
                None => false,
            },
        }
    }

    /// Acknowledges a durable message that no persistent step consumes (dropped, dead letter,
    /// handled by an actor without durable state, taken by a probe).
    pub(crate) fn ack_lazily(&self, receipt: Option<Receipt>) {
        if let (Some(receipt), Some(p)) = (receipt, &self.persistence) {
            p.committer.ack(receipt);
        }
    }
}

/// What a persistent actor does during one call, held back until it is committed.
#[derive(Default)]
pub(crate) struct Step {
    ops: Vec<Op>,
    seq_changed: bool,
    effects: Vec<Effect>,
}

/// An effect held back until its step is committed.
pub(crate) enum Effect {
    /// A message; it gets an outbox row.
    Send {
        path: String,
        incarnation: Option<u64>,
        envelope: Envelope,
    },
    /// A child spawned in this step: its cell starts at release.
    Start(Box<CellSpec>),
    /// A descendant to stop.
    Stop(ActorRef),
    /// A plain timer, under an id the actor already holds.
    Timer {
        id: u64,
        owner: Address,
        target: TimerTarget,
        envelope: Envelope,
        delay: Duration,
        period: Option<Duration>,
    },
    /// A reminder to arm.
    Reminder {
        id: u64,
        owner: String,
        envelope: Envelope,
        delay: Duration,
        period: Option<Duration>,
    },
}

/// The durable side of a persistent actor's store data.
pub(crate) struct Durable {
    pub(crate) pid: String,
    /// The latest event seq.
    seq: u64,
    pub(crate) step: Step,
}

impl ActorState {
    /// Sends now, or holds the message back until the step commits if this actor is persistent.
    pub(crate) fn send(&mut self, path: &str, incarnation: Option<u64>, envelope: Envelope) {
        match &mut self.durable {
            Some(d) => d.step.effects.push(Effect::Send {
                path: path.to_owned(),
                incarnation,
                envelope,
            }),
            None => self.shared.tell_address(path, incarnation, envelope),
        }
    }

    /// Holds an effect back if this actor is persistent; gives it back to run now otherwise.
    pub(crate) fn hold(&mut self, effect: Effect) -> Option<Effect> {
        match &mut self.durable {
            Some(d) => {
                d.step.effects.push(effect);
                None
            }
            None => Some(effect),
        }
    }

    fn durable(&mut self) -> Result<&mut Durable, PersistError> {
        if self.shared.persistence.is_none() {
            return Err(PersistError::Unavailable);
        }
        self.durable.as_mut().ok_or(PersistError::NotRecovered)
    }

    fn check_size(&self, len: usize, limit: usize) -> Result<(), PersistError> {
        if len > limit {
            return Err(PersistError::TooLarge(len as u64));
        }
        Ok(())
    }
}

fn storage(e: StoreError) -> PersistError {
    PersistError::Storage(e.to_string())
}

impl Host for ActorState {
    fn persistence_id(&mut self) -> String {
        match (&self.durable, &self.pid) {
            (Some(d), _) => d.pid.clone(),
            (None, Some(pid)) => pid.clone(),
            (None, None) => self.me.path.to_string(),
        }
    }

    fn set_persistence_id(&mut self, id: String) -> Result<(), PersistError> {
        if self.durable.is_some() {
            return Err(PersistError::InvalidId(format!(
                "{id:?}: the persistence id is fixed once recover has been called"
            )));
        }
        if id.is_empty() || id.len() > MAX_PID_BYTES {
            return Err(PersistError::InvalidId(format!(
                "{id:?}: a persistence id has 1 to {MAX_PID_BYTES} bytes"
            )));
        }
        self.pid = Some(id);
        Ok(())
    }

    fn recover(&mut self) -> Result<Option<WitSnapshot>, PersistError> {
        let pid = self.persistence_id();
        let shared = self.shared.clone();
        let Some(persistence) = shared.persistence.as_ref() else {
            return Err(PersistError::Unavailable);
        };
        {
            let mut claims = persistence.claims.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(holder) = claims.get(&pid)
                && holder.path != self.me.path
                && self.shared.registry.with(holder.path.as_str(), |a| {
                    a.is_some_and(|a| a.address.incarnation == holder.incarnation)
                })
            {
                return Err(PersistError::InvalidId(format!(
                    "{pid:?} is in use by the live actor {holder}"
                )));
            }
            claims.insert(pid.clone(), self.me.clone());
        }
        let snapshot = persistence.store.snapshot(&pid).map_err(storage)?;
        let seq = persistence.store.last_seq(&pid).map_err(storage)?;
        let seq = seq.max(snapshot.as_ref().map_or(0, |s| s.seq));
        match &mut self.durable {
            Some(d) => d.seq = d.seq.max(seq),
            None => {
                self.durable = Some(Durable {
                    pid,
                    seq,
                    step: Step::default(),
                })
            }
        }
        Ok(snapshot.map(|s| WitSnapshot {
            seq: s.seq,
            state: s.state,
        }))
    }

    fn replay(&mut self, after: u64, max: u32) -> Result<Vec<WitEvent>, PersistError> {
        let pid = self.durable()?.pid.clone();
        let Some(persistence) = self.shared.persistence.as_ref() else {
            return Err(PersistError::Unavailable);
        };
        let max = (max as usize).min(MAX_REPLAY_PAGE);
        let events = persistence
            .store
            .events(&pid, after, max)
            .map_err(storage)?;
        Ok(events
            .into_iter()
            .map(|(seq, data)| WitEvent { seq, data })
            .collect())
    }

    fn save_snapshot(&mut self, state: Vec<u8>) -> Result<u64, PersistError> {
        self.check_size(state.len(), self.shared.config.max_state_bytes)?;
        let d = self.durable()?;
        let seq = d.seq;
        d.step.ops.push(Op::Snapshot { seq, state });
        Ok(seq)
    }

    fn persist(&mut self, data: Vec<u8>) -> Result<u64, PersistError> {
        self.check_size(data.len(), self.shared.config.max_message_bytes)?;
        let d = self.durable()?;
        d.seq += 1;
        d.step.seq_changed = true;
        let seq = d.seq;
        d.step.ops.push(Op::Event { seq, data });
        Ok(seq)
    }

    fn delete_events(&mut self, through: u64) -> Result<(), PersistError> {
        let d = self.durable()?;
        d.step.ops.push(Op::DeleteEvents { through });
        Ok(())
    }

    fn delete_state(&mut self) -> Result<(), PersistError> {
        let d = self.durable()?;
        d.seq = 0;
        d.step.seq_changed = false;
        d.step.ops.push(Op::DeleteState);
        let pid = d.pid.clone();
        self.shared.timers.cancel_reminders_of(&pid);
        Ok(())
    }

    fn in_shutdown(&mut self) -> bool {
        self.shared.is_shutting_down()
    }

    fn remind(
        &mut self,
        kind: String,
        body: Vec<u8>,
        delay_ms: u64,
        period_ms: Option<u64>,
    ) -> Result<u64, PersistError> {
        self.check_size(body.len(), self.shared.config.max_message_bytes)?;
        let me = self.me.clone();
        let Some(store) = self.shared.persistence.as_ref().map(|p| p.store.clone()) else {
            return Err(PersistError::Unavailable);
        };
        let d = self.durable()?;
        let id = store.allocate_reminder();
        let period_ms = period_ms.filter(|p| *p > 0);
        let row = crate::store::ReminderRow {
            owner: d.pid.clone(),
            target: me.path.to_string(),
            kind: kind.clone(),
            body: body.clone(),
            due_ms: unix_ms().saturating_add(delay_ms),
            period_ms,
        };
        d.step.ops.push(Op::Remind { id, row });
        d.step.effects.push(Effect::Reminder {
            id,
            owner: d.pid.clone(),
            envelope: Envelope::new(Some(me), kind, body),
            delay: Duration::from_millis(delay_ms),
            period: period_ms.map(Duration::from_millis),
        });
        Ok(id)
    }

    fn cancel_reminder(&mut self, id: u64) -> bool {
        let Ok(d) = self.durable() else {
            return false;
        };
        let pid = d.pid.clone();
        // Not yet armed: it was scheduled in this very step.
        let pending = d
            .step
            .effects
            .iter()
            .position(|e| matches!(e, Effect::Reminder { id: r, .. } if *r == id));
        let cancelled = match pending {
            Some(i) => {
                d.step.effects.remove(i);
                true
            }
            None => self.shared.timers.cancel_reminder_of(&pid, id),
        };
        if cancelled && let Some(d) = self.durable.as_mut() {
            d.step.ops.push(Op::CancelReminder { id });
        }
        cancelled
    }
}

/// A step taken out of an actor's store data, ready to commit.
pub(crate) struct Pending {
    write: StepWrite,
    effects: Vec<Effect>,
}

impl Durable {
    /// The same persistence id and sequence for a new version of the actor, with an empty step.
    pub(crate) fn successor(&self) -> Durable {
        Durable {
            pid: self.pid.clone(),
            seq: self.seq,
            step: Step::default(),
        }
    }

    /// Drops the current step: nothing is written, held-back effects are discarded.
    pub(crate) fn abandon_step(&mut self, shared: &Arc<Shared>) {
        let step = std::mem::take(&mut self.step);
        if step.seq_changed {
            // The events of the failed call were never written: their numbers are free again.
            let events = step
                .ops
                .iter()
                .filter(|op| matches!(op, Op::Event { .. }))
                .count() as u64;
            self.seq = self.seq.saturating_sub(events);
        }
        discard(shared, step.effects);
    }

    /// Takes the current step; `consumed` is the durable message the call handled, if any.
    ///
    /// A step that changed no durable state and consumed no durable message commits nothing:
    /// its input leaves no trace a crash could contradict, so its messages are released at
    /// once, exactly as durable as that input was (a query's reply costs no fsync).
    pub(crate) fn take_step(&mut self, store: &Store, consumed: Option<Receipt>) -> Pending {
        let step = std::mem::take(&mut self.step);
        if step.ops.is_empty() && consumed.is_none() {
            return Pending {
                write: StepWrite::default(),
                effects: step.effects,
            };
        }
        let sends = step
            .effects
            .iter()
            .filter(|e| matches!(e, Effect::Send { .. }))
            .count() as u64;
        let mut effects = step.effects;
        let mut outbox = Vec::with_capacity(sends as usize);
        if sends > 0 {
            let mut id = store.allocate_outbox(sends);
            for effect in &mut effects {
                if let Effect::Send { path, envelope, .. } = effect {
                    envelope.receipt = Some(Receipt::Outbox(id));
                    outbox.push((
                        id,
                        OutboxRow {
                            target: path.clone(),
                            sender: envelope.sender.as_ref().map(|s| s.path.to_string()),
                            kind: envelope.kind.clone(),
                            body: envelope.body.clone(),
                        },
                    ));
                    id += 1;
                }
            }
        }
        Pending {
            write: StepWrite {
                pid: self.pid.clone(),
                ops: step.ops,
                last_seq: step.seq_changed.then_some(self.seq),
                outbox,
                acks: consumed.into_iter().collect(),
            },
            effects,
        }
    }
}

impl Pending {
    /// Commits the step, then releases its effects; on failure discards them and says why.
    pub(crate) async fn commit(self, shared: &Arc<Shared>) -> Result<(), String> {
        let Pending { write, effects } = self;
        if !write.is_empty() {
            let Some(persistence) = &shared.persistence else {
                discard(shared, effects);
                return Err("the host has no database".to_owned());
            };
            if let Err(e) = persistence.committer.commit(write).await {
                discard(shared, effects);
                return Err(format!("persistence commit failed: {e}"));
            }
        }
        release(shared, effects);
        Ok(())
    }
}

/// Runs effects now (after their commit, or at once for an actor without durable state).
pub(crate) fn release(shared: &Arc<Shared>, effects: Vec<Effect>) {
    for effect in effects {
        run(shared, effect);
    }
}

/// Runs one effect.
pub(crate) fn run(shared: &Arc<Shared>, effect: Effect) {
    match effect {
        Effect::Send {
            path,
            incarnation,
            envelope,
        } => shared.tell_address(&path, incarnation, envelope),
        Effect::Start(spec) => crate::cell::spawn(*spec),
        Effect::Stop(actor) => {
            actor.signal(SystemMsg::Stop(StopReason::Normal));
        }
        Effect::Timer {
            id,
            owner,
            target,
            envelope,
            delay,
            period,
        } => shared
            .timers
            .schedule_as(id, Some(owner), target, envelope, delay, period, None),
        Effect::Reminder {
            id,
            owner,
            envelope,
            delay,
            period,
        } => {
            if let Some(path) = envelope.sender.as_ref().map(|s| s.path.to_string()) {
                shared
                    .timers
                    .remind(id, &owner, &path, envelope, delay, period);
            }
        }
    }
}

/// Drops held-back effects; a child that was never started gives its path back.
fn discard(shared: &Arc<Shared>, effects: Vec<Effect>) {
    for effect in effects {
        if let Effect::Start(spec) = effect {
            shared.abandon(*spec);
        }
    }
}
