//! Mailboxes: two unbounded lanes per actor and the handle (`ActorRef`) that senders hold.
//!
//! Invariants:
//! - The system lane (stop, child terminated) is always served before the user lane.
//! - Per sender->receiver pair, user messages arrive in send order (one FIFO channel per actor).
//! - A message is never dropped silently: once the owning cell stops it closes the user lane and
//!   hands everything still queued to dead letters; a send that finds the lane closed becomes a
//!   dead letter too.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Notify, mpsc};

use crate::address::Address;
use crate::message::{Envelope, StopReason};

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

/// A handle to a live actor's mailbox, held by the registry, its parent and anyone who sends.
#[derive(Clone, Debug)]
pub(crate) struct ActorRef {
    pub(crate) address: Address,
    pub(crate) module: Option<Arc<str>>,
    pub(crate) user: mpsc::UnboundedSender<UserMsg>,
    pub(crate) system: Option<mpsc::UnboundedSender<SystemMsg>>,
    pub(crate) lifeline: Arc<Lifeline>,
}

/// The receiving side, owned by the actor's cell.
pub(crate) struct Mailbox {
    pub(crate) user: mpsc::UnboundedReceiver<UserMsg>,
    pub(crate) system: mpsc::UnboundedReceiver<SystemMsg>,
}

/// Creates a mailbox and the handle that feeds it.
pub(crate) fn mailbox(address: Address, module: Arc<str>) -> (ActorRef, Mailbox) {
    let (user_tx, user_rx) = mpsc::unbounded_channel();
    let (system_tx, system_rx) = mpsc::unbounded_channel();
    let handle = ActorRef {
        address,
        module: Some(module),
        user: user_tx,
        system: Some(system_tx),
        lifeline: Arc::default(),
    };
    (
        handle,
        Mailbox {
            user: user_rx,
            system: system_rx,
        },
    )
}

impl ActorRef {
    /// Queues a user message; gives it back if the actor has stopped.
    pub(crate) fn tell(&self, envelope: Envelope) -> Result<(), Envelope> {
        match self.user.send(UserMsg::Message(envelope)) {
            Err(mpsc::error::SendError(UserMsg::Message(envelope))) => Err(envelope),
            _ => Ok(()),
        }
    }

    /// Queues a system message; false if the actor has stopped (or is not a cell).
    pub(crate) fn signal(&self, msg: SystemMsg) -> bool {
        self.system.as_ref().is_some_and(|tx| tx.send(msg).is_ok())
    }
}
