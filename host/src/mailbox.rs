//! Mailboxes: two lanes per actor and the handle (`ActorRef`) that senders hold.
//!
//! Invariants:
//! - The system lane (stop, failures, directives, watch) is always served before the user lane.
//! - Per sender->receiver pair, user messages arrive in send order (one FIFO channel per actor).
//! - The user lane holds at most `capacity` messages; a send beyond that is refused, and the
//!   sender learns it (a dead letter from an actor, an error from the API). Host messages
//!   (`mote.terminated`) are exempt so a full mailbox cannot swallow them.
//! - A message is never dropped silently: once the owning cell stops it closes the user lane and
//!   hands everything still queued to dead letters; a send that finds the lane closed becomes a
//!   dead letter too.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use crate::address::Address;
use crate::message::{Envelope, StopReason};
use crate::module::Module;
use crate::supervisor::Directive;

/// What travels on the user lane.
#[derive(Debug)]
pub(crate) enum UserMsg {
    /// An ordinary message for `receive`.
    Message(Envelope),
    /// Stop once everything queued before it has been handled.
    PoisonPill,
}

/// What travels on the system lane.
#[derive(Debug)]
pub(crate) enum SystemMsg {
    /// Stop after the current message.
    Stop(StopReason),
    /// A child finished stopping.
    ChildTerminated(Address),
    /// A child failed and waits for its parent's directive.
    Failed { child: Address, error: String },
    /// The parent's decision about this actor (resume, restart after `delay`, or stop).
    Directive {
        directive: Directive,
        delay: Duration,
        cause: String,
    },
    /// Another actor watches this one.
    Watch(Address),
    /// Another actor no longer watches this one.
    Unwatch(Address),
    /// Swap to another version of the module, after the current message.
    Upgrade(crate::upgrade::Request),
}

/// Fires once when an actor incarnation has fully terminated.
#[derive(Debug, Default)]
pub(crate) struct Lifeline {
    done: AtomicBool,
    notify: Notify,
}

impl Lifeline {
    pub(crate) fn mark_terminated(&self) {
        self.done.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    pub(crate) fn is_terminated(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    pub(crate) async fn terminated(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_terminated() {
                return;
            }
            notified.await;
        }
    }
}

/// Why a user message was not queued; the message comes back.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The mailbox is at capacity.
    Full(Envelope),
    /// The actor has stopped.
    Closed(Envelope),
}

/// A handle to a live actor's mailbox, held by the registry, its parent and anyone who sends.
#[derive(Clone, Debug)]
pub(crate) struct ActorRef {
    pub(crate) address: Address,
    /// The module's name (`None` for probes and ask endpoints).
    pub(crate) module: Option<Arc<str>>,
    /// The module version the actor runs now; an upgrade changes it.
    pub(crate) version: Option<Arc<RwLock<Arc<str>>>>,
    pub(crate) user: mpsc::UnboundedSender<UserMsg>,
    pub(crate) system: Option<mpsc::UnboundedSender<SystemMsg>>,
    pub(crate) lifeline: Arc<Lifeline>,
    /// Messages queued on the user lane now.
    pub(crate) depth: Arc<AtomicUsize>,
    pub(crate) capacity: usize,
}

/// The receiving side, owned by the actor's cell.
pub(crate) struct Mailbox {
    pub(crate) user: mpsc::UnboundedReceiver<UserMsg>,
    pub(crate) system: mpsc::UnboundedReceiver<SystemMsg>,
    pub(crate) depth: Arc<AtomicUsize>,
}

/// Creates a mailbox holding up to `capacity` user messages and the handle that feeds it.
pub(crate) fn mailbox(
    address: Address,
    module: Option<&Module>,
    capacity: usize,
) -> (ActorRef, Mailbox) {
    let (user_tx, user_rx) = mpsc::unbounded_channel();
    let (system_tx, system_rx) = mpsc::unbounded_channel();
    let depth = Arc::new(AtomicUsize::new(0));
    let handle = ActorRef {
        address,
        module: module.map(|m| m.name.clone()),
        version: module.map(|m| Arc::new(RwLock::new(m.version.clone()))),
        user: user_tx,
        system: Some(system_tx),
        lifeline: Arc::default(),
        depth: depth.clone(),
        capacity,
    };
    (
        handle,
        Mailbox {
            user: user_rx,
            system: system_rx,
            depth,
        },
    )
}

/// An endpoint for host code (a probe, an ask): unbounded user lane, no system lane.
pub(crate) fn endpoint(address: Address) -> (ActorRef, Mailbox) {
    let (mut handle, mailbox) = mailbox(address, None, usize::MAX);
    handle.system = None;
    (handle, mailbox)
}

impl ActorRef {
    /// The module version this actor runs now.
    pub(crate) fn running_version(&self) -> Option<Arc<str>> {
        self.version
            .as_ref()
            .map(|v| v.read().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// Queues a user message within the mailbox's capacity.
    pub(crate) fn tell(&self, envelope: Envelope) -> Result<(), Refused> {
        if self.depth.fetch_add(1, Ordering::Relaxed) >= self.capacity {
            self.depth.fetch_sub(1, Ordering::Relaxed);
            return Err(Refused::Full(envelope));
        }
        self.push(envelope)
    }

    /// Queues a host message, which no capacity limit refuses.
    pub(crate) fn tell_host(&self, envelope: Envelope) -> Result<(), Refused> {
        self.depth.fetch_add(1, Ordering::Relaxed);
        self.push(envelope)
    }

    fn push(&self, envelope: Envelope) -> Result<(), Refused> {
        match self.user.send(UserMsg::Message(envelope)) {
            Err(mpsc::error::SendError(UserMsg::Message(envelope))) => {
                self.depth.fetch_sub(1, Ordering::Relaxed);
                Err(Refused::Closed(envelope))
            }
            _ => Ok(()),
        }
    }

    /// Queues a system message; false if the actor has stopped (or is not a cell).
    pub(crate) fn signal(&self, msg: SystemMsg) -> bool {
        self.system.as_ref().is_some_and(|tx| tx.send(msg).is_ok())
    }
}

impl Mailbox {
    /// Takes the next user message if one is queued.
    pub(crate) fn try_next(&mut self) -> Result<UserMsg, mpsc::error::TryRecvError> {
        let msg = self.user.try_recv()?;
        self.took(&msg);
        Ok(msg)
    }

    /// Waits for the next user message; `None` once every sender is gone.
    pub(crate) async fn next(&mut self) -> Option<UserMsg> {
        let msg = self.user.recv().await?;
        self.took(&msg);
        Some(msg)
    }

    pub(crate) fn took(&self, msg: &UserMsg) {
        if matches!(msg, UserMsg::Message(_)) {
            self.depth.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
