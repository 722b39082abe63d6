//! Asking with a deadline: a request whose reply, or else a timeout, comes back exactly once.
//!
//! Each ask registers a short-lived endpoint `/system/ask/<id>` (incarnation = id) as the
//! request's sender, so the receiver simply replies. A task waits for the first reply or the
//! deadline, whichever comes first, then removes the endpoint: anything that arrives later is a
//! dead letter, counted as a late reply, and never reaches the asker.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::actor::mailbox::{self, UserMsg};
use crate::address::{ActorPath, Address};
use crate::error::SendError;
use crate::kernel::Kernel;
use crate::kernel::deadletters::DeadLetterReason;
use crate::message::Envelope;
use crate::trace::TraceParent;

/// Paths of ask endpoints start with this.
pub const ASK_PREFIX: &str = "/system/ask/";
/// The kind of the message an asking actor receives when its deadline passed first.
pub const ASK_TIMEOUT_KIND: &str = "mote.ask-timeout";

/// An ask from outside that did not get its reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// No reply within the deadline.
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// The request could not be sent.
    #[error(transparent)]
    Send(#[from] SendError),
}

/// One ask counted against its actor's quota until its outcome is sent.
pub(crate) struct Pending(Arc<AtomicUsize>);

impl Pending {
    /// Counts one more ask in `count`, unless `max` are pending already.
    pub(crate) fn within(count: &Arc<AtomicUsize>, max: usize) -> Option<Pending> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        Some(Pending(count.clone()))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where the outcome of an ask goes.
pub(crate) enum Answer {
    /// To an asking actor, as a message; the ask counts against its quota until then. A reply
    /// continues the replier's trace, a timeout the asker's (`trace`: the span that asked).
    Actor {
        asker: Address,
        pending: Pending,
        trace: Option<TraceParent>,
    },
    /// To a caller outside the system.
    Outside(oneshot::Sender<Result<Envelope, AskError>>),
}

/// Opens the endpoint of an ask (the request's sender) and the task that resolves `answer` by
/// the first reply or the deadline; the ask counts in `open` until then.
pub(crate) fn endpoint(
    kernel: &Arc<Kernel>,
    timeout: Duration,
    answer: Answer,
    open: &Arc<AtomicUsize>,
) -> Option<Address> {
    let id = kernel.next_incarnation();
    let path = ActorPath::system_root()
        .child("ask")
        .and_then(|p| p.child(&id.to_string()));
    let Ok(path) = path else {
        unreachable_path(id);
        return None;
    };
    let address = Address {
        path,
        incarnation: id,
    };
    let (handle, mut mailbox) = mailbox::endpoint(address.clone());
    if kernel.registry.insert(handle).is_err() {
        unreachable_path(id);
        return None;
    }
    let endpoint = address.clone();
    let kernel = kernel.clone();
    let runtime = kernel.runtime.clone();
    let counted = Pending::within(open, usize::MAX);
    runtime.spawn(async move {
        let outcome = tokio::time::timeout(timeout, mailbox.next()).await;
        kernel.registry.remove(&address);
        mailbox.close_user();
        while let Ok(UserMsg::Message(late)) = mailbox.try_next() {
            kernel.dead_letter(late, address.to_string(), DeadLetterReason::Stopped);
        }
        let reply = match outcome {
            Ok(Some(UserMsg::Message(mut reply))) => {
                // The ask's endpoint is the reply's receiver, and it keeps no durable state.
                kernel.settle(reply.receipt.take());
                Some(reply)
            }
            _ => None,
        };
        // No longer open once answered: whoever hears the answer sees the count without it.
        drop(counted);
        match answer {
            Answer::Outside(tx) => {
                let _ = tx.send(reply.ok_or(AskError::Timeout(timeout)));
            }
            Answer::Actor {
                asker,
                pending: _pending,
                trace,
            } => {
                let envelope = match reply {
                    Some(reply) => {
                        let trace = reply.trace();
                        Envelope::new(Some(address), reply.kind, reply.body).traced(trace)
                    }
                    None => {
                        Envelope::new(Some(address), ASK_TIMEOUT_KIND, Vec::new()).traced(trace)
                    }
                };
                kernel.tell_host(&asker, envelope);
            }
        }
    });
    Some(endpoint)
}

/// Ends an endpoint whose request was never sent: it stops waiting and leaves the registry now,
/// not at its deadline.
pub(crate) fn withdraw(kernel: &Kernel, endpoint: &Address) {
    if let Some(handle) = kernel.registry.get(endpoint.path.as_str())
        && handle.address.incarnation == endpoint.incarnation
    {
        let _ = handle.user.send(UserMsg::PoisonPill);
    }
}

fn unreachable_path(id: u64) {
    tracing::error!(id, "could not register an ask endpoint");
}
