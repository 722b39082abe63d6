//! The kernel: what every actor and every capability needs, and nothing more. The registry of
//! live actors, delivery and dead letters, spawn and stop, and the `/user` guardian.
//!
//! The kernel knows no capability and no module. The layers above plug into it through
//! [`Extensions`]: how an actor's task starts (the actor layer), and what capabilities add to
//! delivery (entities activated by a message, recovered messages waiting for a path, durable
//! receipts, dead-letter subscribers), and a cluster through [`remote::Remote`].
//!
//! Invariants:
//! - A path belongs to at most one live incarnation (the registry claims it atomically); an
//!   incarnation id is never handed out twice in one host run, and never 0.
//! - Messages recovered for a path are queued before anything else can reach the new mailbox:
//!   they go in before the path is registered.
//! - Once a shutdown has begun, no spawn succeeds.

pub(crate) mod deadletters;
mod delivery;
pub(crate) mod guardian;
pub(crate) mod registry;
pub(crate) mod remote;
pub(crate) mod spawn;
pub(crate) mod tally;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use self::deadletters::DeadLetterReason;
use self::deadletters::DeadLetters;
use self::guardian::Guardian;
use self::registry::Registry;
use self::spawn::SpawnRequest;
use self::tally::Tally;
use crate::actor::mailbox::{self, ActorRef, Capacity, Labels, Mailbox, SystemMsg, UserMsg};
use crate::actor::supervisor::FailureKind;
use crate::address::{ActorPath, Address};
use crate::config::HostConfig;
use crate::error::{AddressError, SpawnError};
use crate::message::{Envelope, Receipt, StopReason};
use crate::progress::Reports;

/// The kind of the message a watcher receives when a watched incarnation has terminated.
pub const TERMINATED_KIND: &str = "mote.terminated";

/// A message that could not be queued, with the dead-letter target and reason.
#[derive(Debug)]
pub(crate) struct Undelivered {
    pub(crate) envelope: Envelope,
    /// The path, or the path and incarnation it was sent to.
    pub(crate) target: String,
    pub(crate) reason: DeadLetterReason,
}

/// What the layers above plug into the kernel. The kernel calls these without knowing who
/// answers.
pub(crate) trait Extensions: Send + Sync + 'static {
    /// Prepares the task of a new actor: resolves its module, has the kernel
    /// [claim](Kernel::claim) its path and mailbox, and returns it not yet started.
    fn launch(&self, kernel: &Arc<Kernel>, request: SpawnRequest) -> Result<Spawned, SpawnError>;

    /// Messages that wait for a new actor at `path` (recovered after a restart of the host).
    fn backlog(&self, kernel: &Arc<Kernel>, path: &str) -> Vec<Envelope>;

    /// Whether the module version `image` was taken from is deployed here as it was.
    fn restorable(&self, _image: &crate::actor::image::ActorImage) -> bool {
        false
    }

    /// Takes back what [`Extensions::backlog`] handed out for a spawn that lost its path.
    fn return_backlog(&self, path: &str, messages: Vec<Envelope>);

    /// A message found no live actor, or not the incarnation it named, at `path`: an extension
    /// may take it (activating an entity). `Err` gives it back.
    fn unclaimed(
        &self,
        kernel: &Arc<Kernel>,
        path: &str,
        envelope: Envelope,
    ) -> Result<Option<Undelivered>, Envelope>;

    /// A durable message was consumed or dropped without a durable step: settle its receipt.
    fn settle(&self, receipt: Receipt);

    /// A durable message became a dead letter for good (no actor, a full mailbox): the store
    /// drops it, or keeps it to send again.
    fn undeliverable(&self, receipt: Receipt);

    /// The durable write that acknowledges `receipt` now (`None` without a database).
    fn acknowledge(&self, receipt: Receipt) -> Option<crate::actor::step::Commit>;

    /// A durable message is leaving for another node: its receipt as a token that node can
    /// take over (`None`: this host cannot hand it on, and it is settled at hand-off).
    fn export_receipt(&self, receipt: Receipt) -> Option<Vec<u8>>;

    /// A durable message came from another node with `token`: its receipt here.
    fn import_receipt(&self, token: &[u8]) -> Option<Receipt>;

    /// A message has become a dead letter.
    fn dead_letter(&self, kernel: &Arc<Kernel>, envelope: &Envelope, target: &str);

    /// The kernel is gone: background work that serves it should end.
    fn closed(&self);
}

/// An actor that has its path and mailbox but whose task has not started.
pub(crate) trait Pending: Send {
    /// Starts the actor's task.
    fn start(self: Box<Self>);
    /// Gives the path back without running anything: its queued messages become dead letters.
    fn abandon(self: Box<Self>);
}

/// A spawned actor: its handle, and its task, started or not.
pub(crate) struct Spawned {
    pub(crate) actor: ActorRef,
    pub(crate) task: Box<dyn Pending>,
}

/// The kernel of one host.
pub(crate) struct Kernel {
    pub(crate) config: HostConfig,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) registry: Registry,
    pub(crate) dead_letters: DeadLetters,
    pub(crate) guardian: Guardian,
    /// Counts kept for the metrics across the lives of actors.
    pub(crate) tally: Tally,
    /// Long work under way (compiles, upgrades, recoveries).
    pub(crate) reports: Arc<Reports>,
    next_incarnation: AtomicU64,
    shutting_down: AtomicBool,
    extensions: OnceLock<Arc<dyn Extensions>>,
    /// The cluster, once this node has joined one.
    remote: OnceLock<Arc<dyn remote::Remote>>,
}

impl Kernel {
    /// A kernel with nothing plugged in yet (see [`Kernel::plug`]).
    pub(crate) fn new(
        config: HostConfig,
        runtime: tokio::runtime::Handle,
        reports: Arc<Reports>,
    ) -> Self {
        Kernel {
            guardian: Guardian::new(config.root_strategy.clone()),
            config,
            runtime,
            registry: Registry::default(),
            dead_letters: DeadLetters::new(),
            tally: Tally::default(),
            reports,
            next_incarnation: AtomicU64::new(1),
            shutting_down: AtomicBool::new(false),
            extensions: OnceLock::new(),
            remote: OnceLock::new(),
        }
    }

    /// Plugs in the layers above; once, before the first spawn.
    pub(crate) fn plug(&self, extensions: Arc<dyn Extensions>) {
        if self.extensions.set(extensions).is_err() {
            tracing::error!("the kernel's extensions were plugged in twice; kept the first");
        }
    }

    /// Whether the module version of `image` is deployed here as it was taken.
    pub(crate) fn restorable(&self, image: &crate::actor::image::ActorImage) -> bool {
        self.ext().is_some_and(|ext| ext.restorable(image))
    }

    fn ext(&self) -> Option<&Arc<dyn Extensions>> {
        self.extensions.get()
    }

    /// A fresh incarnation id (also used for ask ids and probe names).
    pub(crate) fn next_incarnation(&self) -> u64 {
        self.next_incarnation.fetch_add(1, Ordering::Relaxed)
    }

    /// Moves the incarnation ids on to at least `base`: a node of a cluster takes a range of
    /// its own, so that an incarnation chosen on one node names one actor on every node.
    pub(crate) fn reseed_incarnations(&self, base: u64) {
        self.next_incarnation.fetch_max(base, Ordering::Relaxed);
    }

    /// The id the next call of [`Kernel::next_incarnation`] may return (names, not identity).
    pub(crate) fn peek_incarnation(&self) -> u64 {
        self.next_incarnation.load(Ordering::Relaxed)
    }

    /// True once a shutdown has begun.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Refuses spawns from now on.
    pub(crate) fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    /// Spawns an actor: claims its path and mailbox and prepares its task, which the caller
    /// starts (at once, or when the spawning step has committed).
    pub(crate) fn spawn(self: &Arc<Self>, request: SpawnRequest) -> Result<Spawned, SpawnError> {
        if self.is_shutting_down() {
            return Err(SpawnError::ShuttingDown);
        }
        if request.path.is_root() {
            return Err(AddressError::IsRoot(request.path.to_string()).into());
        }
        let ext = self.ext().ok_or(SpawnError::ShuttingDown)?;
        ext.launch(self, request)
    }

    /// Spawns and starts an actor directly under the `/user` guardian.
    pub(crate) fn spawn_top_level(
        self: &Arc<Self>,
        request: SpawnRequest,
    ) -> Result<ActorRef, SpawnError> {
        let mut task = None;
        let actor = self.guardian.adopt(|| {
            let spawned = self.spawn(request)?;
            task = Some(spawned.task);
            Ok::<_, SpawnError>(spawned.actor)
        })?;
        if let Some(task) = task {
            task.start();
        }
        Ok(actor)
    }

    /// Claims `path` for a new incarnation (`incarnation`, if the spawning node chose it) and
    /// opens its mailbox, fed first with what waits for the path. Called back by
    /// [`Extensions::launch`].
    pub(crate) fn claim(
        self: &Arc<Self>,
        path: ActorPath,
        labels: Option<Labels>,
        capacity: Capacity,
        incarnation: Option<u64>,
    ) -> Result<(ActorRef, Mailbox), SpawnError> {
        let address = Address {
            path,
            incarnation: incarnation.unwrap_or_else(|| self.next_incarnation()),
        };
        let (handle, mut mailbox) = mailbox::mailbox(address, labels, capacity);
        let mut waiting = match self.ext() {
            Some(ext) => ext.backlog(self, handle.address.path.as_str()),
            None => Vec::new(),
        };
        if !waiting.is_empty() {
            tracing::info!(actor = %handle.address, messages = waiting.len(), "recovered messages handed over");
        }
        if let Some(remote) = self.remote() {
            waiting.extend(remote.backlog(handle.address.path.as_str()));
        }
        // Nobody else can reach the mailbox before it is registered: these go first.
        for envelope in waiting {
            if let Err(refused) = handle.tell_host(envelope) {
                tracing::warn!(?refused, "a recovered message found its target closed");
            }
        }
        if let Err(taken) = self.registry.insert(handle.clone()) {
            // Lost a race for the path: what waited goes back for the winner's successor.
            let mut back = Vec::new();
            while let Ok(UserMsg::Message(envelope)) = mailbox.try_next() {
                back.push(envelope);
            }
            if let Some(ext) = self.ext() {
                ext.return_backlog(taken.address.path.as_str(), back);
            }
            return Err(SpawnError::NameTaken(taken.address.path.to_string()));
        }
        self.tally.spawned();
        Ok((handle, mailbox))
    }

    /// Gives back the path of an actor whose task never ran; its queued messages become dead
    /// letters, and its parent hears that it terminated.
    pub(crate) fn abandon(
        self: &Arc<Self>,
        me: &ActorRef,
        parent: Option<&Address>,
        mut mailbox: Mailbox,
    ) {
        self.registry.remove(&me.address);
        mailbox.close_user();
        while let Ok(UserMsg::Message(envelope)) = mailbox.try_next() {
            self.dead_letter(envelope, me.address.to_string(), DeadLetterReason::Stopped);
        }
        me.lifeline.mark_terminated();
        self.child_terminated(parent, &me.address);
    }

    /// Stops the actor at `path` after its current message; false if none lives there.
    pub(crate) fn stop(&self, path: &str, reason: StopReason) -> bool {
        self.registry
            .get(path)
            .is_some_and(|a| a.signal(SystemMsg::Stop(reason)))
    }

    /// Tells `watcher` that `target` has terminated.
    pub(crate) fn notify_terminated(self: &Arc<Self>, watcher: &Address, target: &Address) {
        let envelope = Envelope::new(Some(target.clone()), TERMINATED_KIND, Vec::new());
        self.tell_host(watcher, envelope);
    }

    /// A failed actor asks for a directive: from its parent, or from the guardian at the top.
    pub(crate) fn report_failure(
        &self,
        me: &ActorRef,
        parent: Option<&Address>,
        kind: FailureKind,
        error: String,
    ) {
        if let Some(module) = &me.module {
            self.tally.failed(module, kind);
        }
        let Some(parent) = parent else {
            let (directive, delay) = self.guardian.decide(&me.address, kind, &error);
            me.signal(SystemMsg::Directive {
                directive,
                delay,
                cause: error,
            });
            return;
        };
        let failed = || SystemMsg::Failed {
            child: me.address.clone(),
            kind,
            error: error.clone(),
        };
        let here = self.registry.with(parent.path.as_str(), |p| {
            p.map(|p| p.address.incarnation == parent.incarnation && p.signal(failed()))
        });
        // A parent on another node of the cluster decides there.
        let delivered = here.unwrap_or_else(|| {
            self.remote()
                .is_some_and(|remote| remote.signal(parent, failed()))
        });
        if !delivered {
            // The parent is gone; its stop reaches this actor too. Stop meanwhile.
            me.signal(SystemMsg::Stop(StopReason::ParentFailure(error)));
        }
    }

    /// Called by a cell once it has fully terminated.
    pub(crate) fn child_terminated(&self, parent: Option<&Address>, child: &Address) {
        match parent {
            Some(parent) => match self.registry.get(parent.path.as_str()) {
                Some(p) => {
                    if p.address.incarnation == parent.incarnation {
                        p.signal(SystemMsg::ChildTerminated(child.clone()));
                    }
                }
                None => {
                    if let Some(remote) = self.remote() {
                        remote.signal(parent, SystemMsg::ChildTerminated(child.clone()));
                    }
                }
            },
            None => self.guardian.release(child),
        }
    }

    /// The durable write that acknowledges `receipt` now, for a capability that must have it
    /// acknowledged before its actor sees the message; `None` without a database.
    pub(crate) fn acknowledge(&self, receipt: Receipt) -> Option<crate::actor::step::Commit> {
        self.ext()?.acknowledge(receipt)
    }

    /// A durable message's receipt as a token another node can take over, if this host can
    /// hand it on.
    pub(crate) fn export_receipt(&self, receipt: Receipt) -> Option<Vec<u8>> {
        self.ext()?.export_receipt(receipt)
    }

    /// The receipt here of a durable message that came from another node with `token`.
    pub(crate) fn import_receipt(&self, token: &[u8]) -> Option<Receipt> {
        self.ext()?.import_receipt(token)
    }

    /// Settles durable messages' receipts: they were consumed without a durable step, or
    /// dropped.
    pub(crate) fn settle(&self, receipts: impl IntoIterator<Item = Receipt>) {
        if let Some(ext) = self.ext() {
            receipts.into_iter().for_each(|receipt| ext.settle(receipt));
        }
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        if let Some(ext) = self.extensions.get() {
            ext.closed();
        }
    }
}

/// A kernel for a unit test (nothing plugged in) on a runtime of its own, and a way to put
/// a mailbox at a path in its registry.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;

    use super::Kernel;
    use crate::actor::mailbox::{Mailbox, test_mailbox};
    use crate::address::Address;
    use crate::config::HostConfig;

    /// The kernel, and the runtime it runs on (keep it alive).
    pub(crate) fn kernel() -> (tokio::runtime::Runtime, Arc<Kernel>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a test runtime");
        let kernel = Arc::new(Kernel::new(
            HostConfig::new(),
            runtime.handle().clone(),
            Arc::default(),
        ));
        (runtime, kernel)
    }

    /// Registers a mailbox of `capacity` at `path` under a fresh incarnation.
    pub(crate) fn register(kernel: &Kernel, path: &str, capacity: usize) -> (Address, Mailbox) {
        let (handle, mailbox) = test_mailbox(path, kernel.next_incarnation(), capacity);
        let address = handle.address.clone();
        kernel.registry.insert(handle).expect("a free test path");
        (address, mailbox)
    }
}
