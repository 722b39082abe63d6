//! The actor cell: the task that owns one actor's instance and mailbox and runs its lifecycle.
//!
//! ```text
//! boot (instantiate + start) -> serve (one message at a time) -> terminate
//!        ^                          | failure
//!        |                          v
//!        +---- restart <---- await the parent's directive ----> resume: serve again
//!                                   | stop
//!                                   v
//!                               terminate
//! ```
//!
//! A failed actor handles no user messages until its parent (or, at the top, the `/user`
//! guardian) decides. Restart keeps the path, the incarnation and the mailbox, drops the message
//! that failed, stops the children and boots a fresh instance of the same module whose
//! `restart-cause` says why. Terminating stops every child first and waits for each, then runs
//! `stopping` (skipped after a trap: the instance cannot be entered), releases the path, hands
//! queued messages to dead letters, tells the watchers and the parent.
//!
//! This module holds the lifecycle; `failure` holds how a cell handles failures, its own and its
//! children's, and `swap` the hot swap of one actor.
//!
//! Invariant (tested below): every live actor holds its task's future for its whole life, and
//! a future is as big as its largest state, so the rare states (boot, restore, failure,
//! restart, hibernation, system messages, termination) are boxed where awaited, and the task
//! holds the cell once. A message's envelope is kept once on the way into the guest call (no
//! `async fn` layer that takes it by value, see `Cell::handle_user`). The task of an actor,
//! with the wrappers it is spawned in, fits in 2,048 bytes: one size class of the allocator
//! (mimalloc's next is 2,560), for the actor's whole life.

mod depart;
mod failure;
mod hibernate;
mod swap;

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::core::{ActorCore, Program};
use super::image::ActorImage;
use super::instance::{ActorInstance, Failure, Received, Stillborn};
use super::lane::TryRecvError;
use super::mailbox::{ActorRef, Mailbox, SystemMsg, UserMsg};
use super::pull::{self, Pull};
use super::step::{self, Sealed};
use super::supervisor::{Directive, FailureKind};
use crate::address::Address;
use crate::caps::capability::Origin;
use crate::caps::persistence::backend::StorageError;
use crate::caps::persistence::images::Images;
use crate::caps::{ActorState, Caps, States};
use crate::deploy::modules::{Module, Modules};
use crate::kernel::deadletters::DeadLetterReason;
use crate::kernel::spawn::{Limits, Lineage, Reservation};
use crate::kernel::{Kernel, Pending, TERMINATED_KIND};
use crate::message::{Envelope, Receipt, StopReason};
use crate::sandbox::image::ImageError;
use crate::sandbox::parking::{self, Parking};
use crate::sched::{self, Scheduler};
use crate::trace;

/// Everything a new cell needs to run: an actor whose path and mailbox are claimed.
pub(crate) struct CellSpec {
    pub(crate) kernel: Arc<Kernel>,
    pub(crate) scheduler: Scheduler,
    pub(crate) caps: Arc<Caps>,
    pub(crate) modules: Arc<Modules>,
    pub(crate) me: ActorRef,
    pub(crate) parent: Option<Address>,
    pub(crate) module: Arc<Module>,
    pub(crate) init: Vec<u8>,
    pub(crate) mailbox: Mailbox,
    pub(crate) limits: Limits,
    /// An entity passivates after this long without a message.
    pub(crate) passivate_after: Option<Duration>,
    /// It hibernates after this long without a message.
    pub(crate) hibernate_after: Option<Duration>,
    /// Its place among its ancestors' descendants, given back when the cell ends.
    pub(crate) reservation: Option<Reservation>,
    /// The image its first instance is restored from, instead of `start`.
    pub(crate) restoring: Option<Restoring>,
}

/// An image a new cell's first instance is restored from.
pub(crate) struct Restoring {
    pub(crate) image: Box<ActorImage>,
    /// Who waits for the outcome: then a failed restore stops the actor; without, the actor
    /// starts afresh (a passivated entity whose image does not fit any more).
    pub(crate) answer: Option<tokio::sync::oneshot::Sender<Result<(), ImageError>>>,
}

impl Pending for CellSpec {
    fn start(self: Box<Self>) {
        // At info level: an enabled span is entered and left at every poll (some 400
        // instructions a message under a warn filter, measured with callgrind), so the cell's own
        // warnings and errors name their actor themselves. Its own root: the path already names
        // the lineage.
        let span = tracing::info_span!(parent: None, "actor", path = %self.me.address.path);
        let scheduler = self.scheduler.clone();
        scheduler.spawn(Parking::new(run(*self).instrument(span)));
    }

    fn abandon(self: Box<Self>) {
        let CellSpec {
            kernel,
            me,
            parent,
            mailbox,
            ..
        } = *self;
        kernel.abandon(&me, parent.as_ref(), mailbox);
    }
}

/// How a stretch of serving ended.
enum Exit {
    /// Stop with this reason.
    Stop(StopReason),
    /// This actor failed: its parent decides.
    Failed(Failure),
    /// Its parent restarts it (all-for-one): no question asked.
    Restart { cause: String, delay: Duration },
    /// It leaves this node (a move): handed over through this, not terminated.
    Departed(tokio::sync::oneshot::Sender<super::departure::Handover>),
}

/// The parent's answer to a failure.
enum Verdict {
    Resume,
    Restart(Duration),
    Stop(StopReason),
}

struct Cell {
    kernel: Arc<Kernel>,
    caps: Arc<Caps>,
    modules: Arc<Modules>,
    me: ActorRef,
    parent: Option<Address>,
    module: Arc<Module>,
    init: Arc<[u8]>,
    limits: Arc<Limits>,
    mailbox: Mailbox,
    instance: Option<ActorInstance>,
    /// Who watches this actor; kept across restarts.
    watchers: HashSet<Address>,
    /// The capabilities' states of the last instance, carried into its replacement (boxed:
    /// some 900 bytes an idle actor would otherwise hold for nothing).
    carried: Option<Box<States>>,
    /// Children's failures that arrived while this actor itself waited for a directive.
    deferred: VecDeque<SystemMsg>,
    /// Children whose failure this actor escalated: they wait for its own outcome.
    escalated: Vec<ActorRef>,
    passivate_after: Option<Duration>,
    hibernate_after: Option<Duration>,
    /// Its instance's image and store data while it hibernates (see `hibernate`).
    dormant: Option<Box<hibernate::Dormant>>,
    /// Set when this (entity) incarnation ends by passivation: no `stopping` hook runs.
    passivated: bool,
    /// Cleared while its parent has it deactivated: it handles no user message.
    active: bool,
    /// Whether its calls may linger for their next message now.
    lingering: pull::Lingering,
    /// Its count of live descendants (and its ancestors').
    lineage: Arc<Lineage>,
    /// Its place among its ancestors' descendants, held until the cell ends.
    _reservation: Option<Reservation>,
    /// The image to restore the first instance from.
    restoring: Option<Restoring>,
    /// Set when it leaves this node: handed over there instead of terminated.
    departing: Option<tokio::sync::oneshot::Sender<super::departure::Handover>>,
}

/// The cell's task. The cell is built before the future, so that the future holds it once
/// (an `async fn` taking the spec keeps the spec as well as the cell built from it: 1 KiB an
/// actor, for its whole life).
fn run(spec: CellSpec) -> impl std::future::Future<Output = ()> + Send {
    let mut cell = Cell::new(spec);
    async move {
        let reason = cell.live().await;
        if let Some(to) = cell.departing.take() {
            Box::pin(cell.hand_over(to)).await;
            return;
        }
        Box::pin(cell.terminate(reason)).await;
    }
}

impl Cell {
    /// The cell of an actor whose path and mailbox are claimed.
    fn new(spec: CellSpec) -> Self {
        let lineage = match &spec.reservation {
            Some(reservation) => reservation.lineage().clone(),
            None => Lineage::root(spec.limits.quotas.descendants),
        };
        Cell {
            lineage,
            _reservation: spec.reservation,
            kernel: spec.kernel,
            caps: spec.caps,
            modules: spec.modules,
            me: spec.me,
            parent: spec.parent,
            module: spec.module,
            init: spec.init.into(),
            limits: Arc::new(spec.limits),
            mailbox: spec.mailbox,
            instance: None,
            watchers: HashSet::new(),
            carried: None,
            deferred: VecDeque::new(),
            escalated: Vec::new(),
            passivate_after: spec.passivate_after,
            hibernate_after: spec.hibernate_after,
            dormant: None,
            passivated: false,
            active: true,
            lingering: pull::Lingering::default(),
            restoring: spec.restoring,
            departing: None,
        }
    }

    /// Runs incarnation instances until the actor stops; returns why.
    ///
    /// The rare paths (boot, failures, restarts, upgrades, termination) are boxed where they
    /// are awaited: a future is as big as its largest state, and an idle actor's cell should
    /// hold the state of waiting for a message, not of instantiating a module.
    async fn live(&mut self) -> StopReason {
        let mut restart_cause: Option<String> = None;
        let mut boot = true;
        if let Some(Restoring { image, answer }) = self.restoring.take() {
            let restored = Box::pin(self.restore(*image)).await;
            let failed = restored.as_ref().err().map(ToString::to_string);
            // With someone waiting, a failed restore stops the actor (whether or not the
            // answer still reaches them).
            let waited = answer.is_some();
            if let Some(answer) = answer {
                let _ = answer.send(restored);
            }
            match failed {
                None => boot = false,
                Some(error) if waited => {
                    tracing::warn!(%error, "the image could not be restored");
                    return StopReason::Failure(error);
                }
                Some(error) => {
                    tracing::error!(%error, "the image could not be restored: the actor starts afresh");
                }
            }
        }
        loop {
            let mut booting = false;
            let exit = if boot {
                boot = false;
                match Box::pin(self.boot(restart_cause.take())).await {
                    Err(failure) => {
                        booting = true;
                        Exit::Failed(failure)
                    }
                    Ok(()) if self.state().is_some_and(|s| s.core.stop_requested) => {
                        Exit::Stop(StopReason::Normal)
                    }
                    Ok(()) => self.serve().await,
                }
            } else {
                self.serve().await
            };
            let (cause, delay) = match exit {
                Exit::Stop(reason) => return reason,
                Exit::Departed(to) => {
                    self.departing = Some(to);
                    return StopReason::Normal;
                }
                Exit::Restart { cause, delay } => (cause, delay),
                Exit::Failed(failure) => {
                    let error = failure.to_string();
                    let kind = failure.kind;
                    if let Some(stats) = &self.me.stats {
                        stats.failures.bump();
                    }
                    tracing::error!(actor = %self.me.address.path, %error, %kind, "actor failed; waiting for its supervisor");
                    match Box::pin(self.await_directive(kind, error.clone())).await {
                        Verdict::Stop(reason) => return reason,
                        Verdict::Resume if !booting && !self.poisoned() => {
                            tracing::info!("resumed by its supervisor");
                            for child in self.escalated.drain(..) {
                                child.signal(SystemMsg::Directive {
                                    directive: Directive::Resume,
                                    delay: Duration::ZERO,
                                    cause: error.clone(),
                                });
                            }
                            continue;
                        }
                        // A trapped instance or a failed start cannot resume: restart it.
                        Verdict::Resume => (error, Duration::ZERO),
                        Verdict::Restart(delay) => (error, delay),
                    }
                }
            };
            if let Some(reason) = Box::pin(self.prepare_restart(&cause, delay)).await {
                return reason;
            }
            tracing::info!(%cause, ?delay, "restarting");
            if let Some(stats) = &self.me.stats {
                stats.restarts.bump();
            }
            restart_cause = Some(cause);
            boot = true;
        }
    }

    fn state(&mut self) -> Option<&mut ActorState> {
        self.instance.as_mut().map(ActorInstance::state)
    }

    fn poisoned(&self) -> bool {
        self.instance.as_ref().is_none_or(|i| i.poisoned)
    }

    /// The core of a new instance of this actor's module, started with `self.init`.
    fn new_core(&self) -> ActorCore {
        let program = Program {
            module: self.module.name.clone(),
            version: self.module.version.clone(),
            init: self.init.clone(),
        };
        let mut core = ActorCore::new(
            self.kernel.clone(),
            self.me.address.clone(),
            self.parent.clone(),
            program,
            self.limits.clone(),
            (
                self.me.stats.clone().unwrap_or_default(),
                self.lineage.clone(),
            ),
        );
        core.grants = self.module.grants.as_slice().into();
        core
    }

    /// Instantiates the module and calls `start`.
    async fn boot(&mut self, restart_cause: Option<String>) -> Result<(), Failure> {
        let core = self.new_core();
        let origin = match (self.carried.take(), restart_cause.as_deref()) {
            (Some(old), Some(cause)) => Origin::Restarted { old: *old, cause },
            _ => Origin::Spawned,
        };
        let caps = self.caps.states(&core, origin);
        let state = ActorState {
            core,
            caps,
            set: self.caps.clone(),
        };
        let mut instance = match ActorInstance::new(&self.module, state).await {
            Ok(instance) => instance,
            Err(Stillborn { failure, state }) => {
                self.carried = Some(Box::new(state.caps));
                return Err(failure);
            }
        };
        let started = instance.start(&self.init).await;
        self.instance = Some(instance);
        match started {
            Ok(()) => self.settle(None).await,
            Err(failure) => {
                self.abandon_step(None);
                Err(failure)
            }
        }
    }

    /// Makes the first instance from `image` instead of booting: each capability's state from
    /// what it kept, a fresh instance of the image's module version with the image's core
    /// state written in, and no `start`.
    async fn restore(&mut self, image: ActorImage) -> Result<(), ImageError> {
        self.init = image.init.as_slice().into();
        let mut core = self.new_core();
        core.supervisor = super::supervisor::Supervisor::new(image.strategy.clone());
        let caps = self
            .caps
            .restore(&core, &image)
            .map_err(ImageError::Corrupt)?;
        let state = ActorState {
            core,
            caps,
            set: self.caps.clone(),
        };
        let mut instance = ActorInstance::new(&self.module, state)
            .await
            .map_err(|stillborn| ImageError::Corrupt(stillborn.failure.to_string()))?;
        let limit = self.limits.memory as u64;
        match instance.restore(&self.module, &image.core, limit).await {
            Ok(()) => {
                self.instance = Some(instance);
                Ok(())
            }
            Err(e) => {
                // Undo what the capabilities took up again (topics) with the instance.
                let mut state = instance.into_state();
                self.caps
                    .stopped(&self.kernel, &self.me.address, Some(&mut state.caps));
                Err(e)
            }
        }
    }

    /// Captures the actor between two messages: its module deployed with snapshots on, one
    /// live instance, no children, and nothing a capability cannot keep.
    async fn capture(&mut self) -> Result<ActorImage, ImageError> {
        if self.module.images.is_none() {
            return Err(ImageError::NotEnabled(self.module.name.to_string()));
        }
        let Some(instance) = self.instance.as_mut() else {
            return Err(ImageError::Uncapturable("it has no live instance".into()));
        };
        let state = instance.state();
        if !state.core.children.is_empty() {
            return Err(ImageError::Uncapturable(format!(
                "it has {} child actor(s): an image holds one actor",
                state.core.children.len()
            )));
        }
        let caps = self
            .caps
            .capture(&state.core, &state.caps)
            .map_err(ImageError::Uncapturable)?;
        let strategy = state.core.supervisor.strategy.clone();
        let core = instance.capture(&self.module).await?;
        Ok(ActorImage {
            module: self.module.name.to_string(),
            version: self.module.version.to_string(),
            hash: self.module.hash.to_string(),
            path: self.me.address.path.to_string(),
            incarnation: self.me.address.incarnation,
            init: self.init.to_vec(),
            strategy,
            caps,
            core,
        })
    }

    /// Passivates an idle entity of a module with snapshots on as an image: captured, stored,
    /// then its path given up; if a message got in first, the stored image is taken back and
    /// the actor serves on. False if it was not passivated (the image could not be taken or
    /// stored: its state would be lost). The database's writes run on tokio's blocking pool,
    /// not on the scheduler's worker, which serves other actors meanwhile.
    async fn passivate_as_image(&mut self) -> bool {
        let image = match self.capture().await {
            Ok(image) => image,
            Err(error) => {
                tracing::debug!(%error, "not passivated: the actor cannot be captured now");
                return false;
            }
        };
        let path = self.me.address.path.to_string();
        let (bytes, at) = (image.encode(), path.clone());
        if let Err(error) = self.on_images(move |images| images.put(&at, &bytes)).await {
            tracing::error!(%error, "not passivated: its image could not be stored");
            return false;
        }
        if self
            .kernel
            .tally
            .retire(&self.me, || self.kernel.registry.passivate(&self.me))
        {
            return true;
        }
        if let Err(error) = self.on_images(move |images| images.take(&path)).await {
            tracing::error!(%error, "a passivation that did not happen left its image stored");
        }
        false
    }

    /// Runs `job` on the store of passivated entities' images on tokio's blocking pool (a redb
    /// write waits for its fsync); the error says what failed, with its causes. The future
    /// holds nothing of the cell.
    fn on_images<T, F>(&self, job: F) -> impl Future<Output = Result<T, String>> + use<T, F>
    where
        T: Send + 'static,
        F: FnOnce(&Images) -> Result<T, StorageError> + Send + 'static,
    {
        let caps = self.caps.clone();
        let running = self
            .kernel
            .runtime
            .spawn_blocking(move || job(&caps.persistence.entities.images));
        async move {
            match running.await {
                Ok(done) => done.map_err(|e| crate::error::chain(&e)),
                Err(e) => Err(format!("the blocking task did not finish: {e}")),
            }
        }
    }

    /// After a successful guest call: the step is sealed by the capabilities, what they must
    /// write is committed, then its effects are released (the cell handles nothing else
    /// meanwhile); `consumed` is acknowledged with it. A failed commit fails the actor, and its
    /// instance cannot resume: its memory holds state that was never committed.
    async fn settle(&mut self, consumed: Option<Receipt>) -> Result<(), Failure> {
        let Some(instance) = self.instance.as_mut() else {
            self.kernel.settle(consumed);
            return Ok(());
        };
        commit_step(&self.kernel, &self.caps, instance, consumed).await
    }

    /// After a failed guest call: the step's held-back effects are dropped; the message that
    /// failed is acknowledged (a failing message is dropped, not redelivered), and so are those
    /// it took from the stash.
    fn abandon_step(&mut self, consumed: Option<Receipt>) {
        if let Some(instance) = self.instance.as_mut() {
            let taken = abandon_step(&self.caps, instance);
            self.kernel.settle(taken);
        }
        self.kernel.settle(consumed);
    }

    /// A message the guest rejected becomes a dead letter; the reason goes to the log, within
    /// the actor's log budget.
    fn reject(&mut self, envelope: Envelope, reason: &str) {
        if let Some(stats) = &self.me.stats
            && stats
                .refusals
                .admit_log(&self.limits.quotas, &self.me.address.path)
        {
            tracing::info!(kind = %envelope.kind, %reason, "message rejected");
        }
        let target = self.me.address.to_string();
        self.kernel
            .dead_letter(envelope, target, DeadLetterReason::Rejected);
    }

    /// Handles messages until something ends this stretch.
    async fn serve(&mut self) -> Exit {
        let throughput = self.kernel.config.throughput;
        // Messages handled since the last wait, which the next batch counts as its own.
        let mut carried = 0;
        loop {
            if !self.active {
                // Deactivated by its parent: only the system lane is served meanwhile.
                if let Some(exit) = self.drain_system().await {
                    return exit;
                }
                if self.active {
                    continue;
                }
                let exit = match self.mailbox.system.recv().await {
                    Some(sys) => Box::pin(self.handle_system(sys)).await,
                    None => Some(Exit::Stop(StopReason::Normal)),
                };
                if let Some(exit) = exit {
                    return exit;
                }
                continue;
            }
            let mut handled = std::mem::take(&mut carried);
            while handled < throughput {
                if let Some(exit) = self.drain_system().await {
                    return exit;
                }
                if !self.active {
                    break;
                }
                // Only the envelope reaches the await, moved whole into `handle_user`: a local
                // it was taken out of would stay in the task (see `handle_user`).
                let envelope = match self.released() {
                    Some(envelope) => envelope,
                    None => match self.mailbox.try_next() {
                        Ok(UserMsg::Message(envelope)) => envelope,
                        Ok(UserMsg::PoisonPill) => return Exit::Stop(StopReason::Normal),
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => return Exit::Stop(StopReason::Normal),
                    },
                };
                // What the call may pull after this message, within the batch's share.
                let budget = self.pull_budget(throughput - handled);
                let mut pulled = 0;
                if let Some(exit) = self.handle_user(envelope, budget, &mut pulled).await {
                    return exit;
                }
                handled += 1 + pulled as usize;
            }
            if handled == throughput {
                // Fairness: let other actors run before draining the next batch.
                tokio::task::yield_now().await;
                continue;
            }
            if !self.active {
                continue;
            }
            // A hibernating actor waits for its next message without a deadline.
            let idle = match self.dormant() {
                true => None,
                false => self.passivate_after.or(self.hibernate_after),
            };
            // The actor sleeps here: its fiber stack may be given back meanwhile.
            let next = parking::parked(async {
                tokio::select! {
                    biased;
                    Some(sys) = self.mailbox.system.recv() => Next::System(sys),
                    msg = self.mailbox.user.recv() => Next::User(msg),
                    () = idle_for(idle) => Next::Idle,
                }
            })
            .await;
            // `next` ends with this statement, before the message is handled (see above).
            let envelope = match next {
                Next::System(sys) => match Box::pin(self.handle_system(sys)).await {
                    Some(exit) => return exit,
                    None => continue,
                },
                Next::User(None) => return Exit::Stop(StopReason::Normal),
                Next::User(Some(msg)) => {
                    self.mailbox.took(&msg);
                    match msg {
                        UserMsg::Message(envelope) => envelope,
                        UserMsg::PoisonPill => return Exit::Stop(StopReason::Normal),
                    }
                }
                Next::Idle => {
                    if self.passivate_after.is_none() {
                        // Asleep or not, it serves on: a failed hibernation is retried at
                        // the next idle stretch.
                        Box::pin(self.hibernate()).await;
                        continue;
                    }
                    let passivated = !self.holds()
                        && if self.module.images.is_some() {
                            Box::pin(self.passivate_as_image()).await
                        } else {
                            self.kernel
                                .tally
                                .retire(&self.me, || self.kernel.registry.passivate(&self.me))
                        };
                    if passivated {
                        tracing::debug!("passivated");
                        self.passivated = true;
                        return Exit::Stop(StopReason::Normal);
                    }
                    continue;
                }
            };
            // Taken at the wait: it and what its call pulls count in the batch that follows.
            let budget = self.pull_budget(throughput);
            let mut pulled = 0;
            if let Some(exit) = self.handle_user(envelope, budget, &mut pulled).await {
                return exit;
            }
            carried = 1 + pulled as usize;
        }
    }

    /// What a call may pull after its message when `left` of the batch's share is left, that
    /// message included: nothing if pulled receive is off.
    fn pull_budget(&self, left: usize) -> u32 {
        match self.kernel.config.pulled_receive {
            true => u32::try_from(left.saturating_sub(1)).unwrap_or(u32::MAX),
            false => 0,
        }
    }

    /// The next message a capability released ahead of the mailbox (unstashed ones).
    fn released(&mut self) -> Option<Envelope> {
        let instance = self.instance.as_mut()?;
        self.caps.next(&mut instance.state().caps)
    }

    /// Whether a capability holds messages for this actor (a stash): then it is not idle.
    fn holds(&mut self) -> bool {
        self.instance
            .as_mut()
            .is_some_and(|instance| self.caps.holds(&instance.state().caps))
    }

    /// Handles the deferred and queued system messages, before the next user message.
    ///
    /// Handling a system message is boxed here and wherever `serve` waits for one: it is the
    /// cell's biggest state, and rare, so the future an idle actor holds stays small, and a
    /// message with nothing on the system lane costs no allocation.
    async fn drain_system(&mut self) -> Option<Exit> {
        while let Some(sys) = self.deferred.pop_front() {
            if let Some(exit) = Box::pin(self.handle_system(sys)).await {
                return Some(exit);
            }
        }
        while let Ok(sys) = self.mailbox.system.try_recv() {
            if let Some(exit) = Box::pin(self.handle_system(sys)).await {
                return Some(exit);
            }
        }
        None
    }

    async fn handle_system(&mut self, msg: SystemMsg) -> Option<Exit> {
        let msg = self.track(msg)?;
        if self.dormant()
            && let Err(failure) = Box::pin(self.wake()).await
        {
            return Some(Exit::Failed(failure));
        }
        match msg {
            SystemMsg::Stop(reason) => Some(Exit::Stop(reason)),
            SystemMsg::ChildTerminated(child) => {
                self.child_gone(&child);
                None
            }
            SystemMsg::Failed { child, kind, error } => {
                Box::pin(self.supervise_child(child, kind, error)).await
            }
            SystemMsg::Directive {
                directive,
                cause,
                delay,
            } => match directive {
                Directive::Restart => Some(Exit::Restart { cause, delay }),
                Directive::Stop | Directive::Escalate => {
                    Some(Exit::Stop(StopReason::Failure(cause)))
                }
                Directive::Resume => None,
            },
            SystemMsg::Upgrade(request) => Box::pin(self.upgrade(request)).await,
            SystemMsg::Snapshot(answer) => {
                let _ = answer.send(self.capture().await.map(|image| image.encode()));
                None
            }
            SystemMsg::Depart(departure) => Box::pin(self.depart(departure)).await,
            // Kept by `track`.
            SystemMsg::Watch(_)
            | SystemMsg::Unwatch(_)
            | SystemMsg::Deactivate
            | SystemMsg::Activate
            | SystemMsg::Urgent => None,
        }
    }

    /// Applies a watch or unwatch to this actor's watchers, and a deactivation or activation
    /// by its parent, whatever the cell is doing; gives back any other message.
    fn track(&mut self, msg: SystemMsg) -> Option<SystemMsg> {
        match msg {
            SystemMsg::Watch(watcher) => {
                self.watchers.insert(watcher);
                None
            }
            SystemMsg::Unwatch(watcher) => {
                self.watchers.remove(&watcher);
                None
            }
            SystemMsg::Deactivate => {
                tracing::debug!("deactivated by its parent");
                self.active = false;
                None
            }
            SystemMsg::Activate => {
                self.active = true;
                None
            }
            // The next look at the lanes finds it.
            SystemMsg::Urgent => None,
            other => Some(other),
        }
    }

    /// Handles one user message, and lets its call pull up to `budget` more (see
    /// `actor::pull`): what became of the actor; how many it pulled goes to `pulled`.
    ///
    /// The actor's task holds the largest state of this future for its whole life, idle or
    /// not, so the envelope is kept once: it is passed whole, not inside a `UserMsg` (a local
    /// it was taken out of would stay in the task), and this is an `async` block, not an
    /// `async fn` (which keeps each argument twice, as it came and moved into its body).
    #[allow(
        clippy::manual_async_fn,
        reason = "an `async fn` keeps its arguments twice"
    )]
    fn handle_user<'a>(
        &'a mut self,
        mut envelope: Envelope,
        budget: u32,
        pulled: &'a mut u32,
    ) -> impl Future<Output = Option<Exit>> + Send + 'a {
        async move {
            if self.dormant()
                && let Err(failure) = Box::pin(self.wake()).await
            {
                // Handled as a message whose call failed: acknowledged, not redelivered.
                self.kernel.settle(envelope.receipt.take());
                return Some(Exit::Failed(failure));
            }
            let instance = self.instance.as_mut()?;
            if envelope.kind.starts_with("mote.")
                && !self.caps.admit(&mut instance.state().caps, &envelope)
            {
                self.kernel.settle(envelope.receipt.take());
                return None;
            }
            if let Some(receipt) = envelope.receipt
                && !self.caps.fresh(&mut instance.state().caps, receipt)
            {
                // Consumed before (sent again after a crash): acknowledged again, not seen again.
                self.kernel.settle(envelope.receipt.take());
                return None;
            }
            let mut receipt = envelope.receipt.take();
            let state = instance.state();
            if let Some(ack) = self
                .caps
                .deliver(&mut state.caps, &state.core, &mut receipt)
                && let Err(error) = ack.await
            {
                // Not acknowledged, so not delivered: its record stays for a later host run.
                let error = crate::error::chain(error.as_ref());
                return Some(Exit::Failed(Failure::new(FailureKind::Commit, error)));
            }
            // Not entered: an instrumented call would be moved whole into its wrapper (a memcpy of
            // its largest state per message); the span times the handling and names its parent.
            let mut span = trace::handling(&self.me.address, &self.module.name, &mut envelope);
            state.core.stats.received.bump();
            let sent_to = state.core.sent_to;
            // The call may pull what is queued after this message, if nothing else is due first.
            // Its span goes with the lent lane: the first pull ends it, as a return would.
            let lend =
                receipt.is_none() && budget > 0 && instance.pulls() && self.deferred.is_empty();
            // It may wait for its next message on its worker (see `sched::linger`), only for a
            // likely reply (from where it sent last: a request/reply pair), whose answer is
            // likely the next message. The sender's key is computed only for a call that lends.
            let linger = lend
                && self.kernel.config.linger
                && envelope
                    .sender
                    .as_ref()
                    .is_some_and(|s| pull::path_key(s.path.as_str()) == sent_to)
                && sched::can_linger()
                && self.lingering.may();
            let lend = (lend && (linger || self.mailbox.queued() >= pull::BURST)).then(|| {
                Pull::new(
                    self.mailbox.lend(),
                    budget,
                    std::mem::replace(&mut span, tracing::Span::none()),
                    linger,
                )
            });
            let received = instance.receive(envelope, lend).await;
            if let Some(pull) = instance.take_pull() {
                self.lingering.went(pull.lingered());
                let (lent, last, sealed) = pull.end();
                *pulled = lent.taken();
                self.mailbox.give_back(lent);
                // What follows is about the message handled last.
                span = last;
                if let Some(sealed) = sealed
                    && let Err(failure) = finish_step(&self.kernel, instance, sealed).await
                {
                    trace::failed(&span, &failure);
                    return Some(Exit::Failed(failure));
                }
            }
            match received {
                Ok(Received::Handled) => {}
                Ok(Received::Rejected(rejected, reason)) => self.reject(rejected, &reason),
                Ok(Received::Kept(mut kept)) => {
                    // Set aside, it is not consumed: its receipt goes with it.
                    kept.receipt = receipt.take();
                    if let Err(unkept) = self.caps.keep(&mut instance.state().caps, kept) {
                        receipt = unkept.receipt;
                    }
                }
                Err(failure) => {
                    trace::failed(&span, &failure);
                    self.abandon_step(receipt);
                    return Some(Exit::Failed(failure));
                }
            }
            // Sealed here, so that the common step with nothing to wait for costs no future.
            let instance = self.instance.as_mut()?;
            if let Some(sealed) = seal_step(&self.caps, instance, receipt)
                && let Err(failure) = finish_step(&self.kernel, instance, sealed).await
            {
                trace::failed(&span, &failure);
                return Some(Exit::Failed(failure));
            }
            self.state()?
                .core
                .stop_requested
                .then_some(Exit::Stop(StopReason::Normal))
        }
    }

    /// Stops the children, runs `stopping`, releases the path, tells watchers and the parent.
    async fn terminate(&mut self, reason: StopReason) {
        // A hibernating actor wakes to run its `stopping` hook; if it cannot, its
        // capabilities' states are carried to `stopped` without it.
        if self.dormant()
            && let Err(failure) = Box::pin(self.wake()).await
        {
            tracing::warn!(%failure, "woke from hibernation too late: stopped without its hook");
        }
        let mut last = self.carried.take();
        if let Some(mut instance) = self.instance.take() {
            instance.state().core.stopping = true;
            self.stop_children(&mut instance, reason.for_children())
                .await;
            if !instance.poisoned && !self.passivated {
                let stopped = instance.stopping(&reason).await;
                self.settle_final(&mut instance, stopped, "stopping hook failed")
                    .await;
            }
            last = Some(Box::new(instance.into_state().caps));
        }
        let kernel = self.kernel.clone();
        let me = self.me.address.clone();
        self.caps.stopped(&kernel, &me, last.as_deref_mut());
        // A passivated actor has left already, and was counted then.
        let passivated = self.passivated;
        kernel.tally.retire(&self.me, || {
            kernel.registry.remove(&me);
            !passivated
        });
        self.mailbox.close_user();
        while let Ok(msg) = self.mailbox.try_next() {
            // A death notice for a watcher that is itself gone informs no one: drop it.
            if let UserMsg::Message(envelope) = msg
                && envelope.kind != TERMINATED_KIND
            {
                kernel.dead_letter(envelope, me.to_string(), DeadLetterReason::Stopped);
            }
        }
        // After closing, a new watch fails to queue and the watcher is told at once instead.
        self.mailbox.system.close();
        while let Ok(msg) = self.mailbox.system.try_recv() {
            self.track(msg);
        }
        for watcher in self.watchers.drain() {
            kernel.notify_terminated(&watcher, &me);
        }
        tracing::debug!(%reason, "actor terminated");
        self.me.lifeline.mark_terminated();
        kernel.released(&me);
        kernel.child_terminated(self.parent.as_ref(), &me);
    }
}

impl Cell {
    /// Commits (or drops) the step of a `stopping` call on an instance already taken out of
    /// the cell.
    async fn settle_final(
        &mut self,
        instance: &mut ActorInstance,
        stopped: Result<(), Failure>,
        what: &'static str,
    ) {
        match stopped {
            Ok(()) => {
                if let Err(failure) = commit_step(&self.kernel, &self.caps, instance, None).await {
                    tracing::error!(actor = %self.me.address.path, %failure, "the final step could not be committed");
                }
            }
            Err(failure) => {
                tracing::warn!(actor = %self.me.address.path, %failure, "{what}");
                let taken = abandon_step(&self.caps, instance);
                self.kernel.settle(taken);
            }
        }
    }
}

/// Seals the step of `instance`'s last call, commits what the capabilities must write, then
/// releases its effects; on a failed commit the effects are discarded and the instance is
/// poisoned. What was `consumed` is acknowledged with the step, or else settled lazily.
async fn commit_step(
    kernel: &Arc<Kernel>,
    caps: &Caps,
    instance: &mut ActorInstance,
    handled: Option<Receipt>,
) -> Result<(), Failure> {
    match seal_step(caps, instance, handled) {
        None => Ok(()),
        Some(sealed) => finish_step(kernel, instance, sealed).await,
    }
}

/// Seals the step of `instance`'s last call (without waiting for anything): `None` if the call
/// wrote nothing and its effects already took place, the common case of an actor that is not
/// persistent.
fn seal_step(
    caps: &Caps,
    instance: &mut ActorInstance,
    handled: Option<Receipt>,
) -> Option<Sealed> {
    let state = instance.state();
    seal(caps, &mut state.core, &mut state.caps, handled)
}

/// [`seal_step`] on the store data's parts: the actor's core and its capabilities' states
/// (a pulled receive seals from inside the call, where it has nothing else).
pub(crate) fn seal(
    caps: &Caps,
    core: &mut ActorCore,
    states: &mut States,
    handled: Option<Receipt>,
) -> Option<Sealed> {
    let mut consumed = core.step.take_consumed();
    consumed.extend(handled);
    let commit = caps.seal(states, &mut core.step, &mut consumed);
    core.kernel.settle(consumed);
    if commit.is_none() && !core.step.holds() {
        // Nothing to write, and its effects took place during the call.
        return None;
    }
    Some(Sealed {
        commit,
        effects: core.step.take(),
    })
}

/// Awaits a sealed step's write, then releases its effects, or discards them and poisons the
/// instance if the write failed.
async fn finish_step(
    kernel: &Arc<Kernel>,
    instance: &mut ActorInstance,
    sealed: Sealed,
) -> Result<(), Failure> {
    let Sealed { commit, effects } = sealed;
    if let Some(commit) = commit {
        if let Err(error) = commit.await {
            step::discard(effects);
            instance.poisoned = true;
            return Err(Failure::new(
                FailureKind::Commit,
                crate::error::chain(error.as_ref()),
            ));
        }
        instance.state().core.stats.committed.bump();
    }
    step::release(kernel, effects);
    Ok(())
}

/// Drops what the last call of `instance` prepared: nothing is written, held-back effects
/// are discarded. Gives back the receipts of what it took from the stash, for the caller to
/// settle (or not, if the instance never took over).
fn abandon_step(caps: &Caps, instance: &mut ActorInstance) -> Vec<Receipt> {
    let state = instance.state();
    caps.abandon(&mut state.caps);
    step::discard(state.core.step.take());
    state.core.step.take_consumed()
}

/// What woke an idle actor.
enum Next {
    System(SystemMsg),
    User(Option<UserMsg>),
    Idle,
}

/// Resolves after `idle`, or never.
async fn idle_for(idle: Option<Duration>) {
    match idle {
        Some(idle) => tokio::time::sleep(idle).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use tracing::instrument::Instrumented;

    use super::{Cell, CellSpec, run};
    use crate::sandbox::parking::Parking;

    /// The size of the task a cell's future becomes (`CellSpec::start` wraps it so), without
    /// calling the function that makes it.
    fn task_size<F>(_: fn(CellSpec) -> F) -> usize {
        std::mem::size_of::<Parking<Instrumented<F>>>()
    }

    #[test]
    fn an_actors_task_holds_its_cell_once_and_fits_in_2_kib() {
        let task = task_size(run);
        assert!(
            task >= std::mem::size_of::<Cell>(),
            "the task holds the cell"
        );
        // 2,000 bytes with Rust 1.95 (2,712 when `handle_user` and `ActorInstance::receive`
        // were `async fn`s taking the message by value: three more copies of it). An
        // `async fn run(spec)` holds the spec beside the cell (some 700 bytes more).
        assert!(
            task <= 2048,
            "an actor's task takes {task} bytes for its whole life: box the new large state"
        );
    }
}
