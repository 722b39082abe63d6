//! Sends from outside the system (the API, the CLI, probes): the path is checked, the size
//! limit applies, and a full mailbox is the sender's error instead of a dead letter. A message
//! from outside continues the caller's current span, when traces are carried on.

use std::sync::Arc;

use crate::address::{ActorPath, Address};
use crate::error::SendError;
use crate::kernel::Kernel;
use crate::kernel::deadletters::DeadLetterReason;
use crate::message::Envelope;
use crate::trace::TraceParent;

/// A message from outside the system, sent from the caller's current span.
#[inline]
pub(super) fn from_outside(sender: Option<Address>, kind: &str, body: Vec<u8>) -> Envelope {
    Envelope::new(sender, kind, body).traced(TraceParent::current())
}

/// Checks a send from outside: an absolute path and a body within the size limit. The path
/// is checked in place, not copied into an `ActorPath`.
pub(super) fn check_outside(kernel: &Kernel, to: &str, body: &[u8]) -> Result<(), SendError> {
    ActorPath::check(to)?;
    let limit = kernel.config.max_message_bytes;
    if body.len() > limit {
        return Err(SendError::TooLarge {
            size: body.len(),
            limit,
        });
    }
    Ok(())
}

/// A send from outside the system: the path is checked and the size limit applies.
pub(super) fn tell_outside(
    kernel: &Arc<Kernel>,
    sender: Option<Address>,
    to: &str,
    kind: &str,
    body: Vec<u8>,
) -> Result<(), SendError> {
    check_outside(kernel, to, &body)?;
    deliver_outside(kernel, to, from_outside(sender, kind, body))
}

/// Queues a message from outside at `path`: a full mailbox or link is the caller's error, as
/// on one host (nothing was queued); any other undeliverable message is a dead letter.
pub(super) fn deliver_outside(
    kernel: &Arc<Kernel>,
    path: &str,
    envelope: Envelope,
) -> Result<(), SendError> {
    match kernel.deliver(path, None, envelope) {
        Some(undelivered) if undelivered.reason == DeadLetterReason::MailboxFull => {
            Err(SendError::MailboxFull {
                path: undelivered.target,
            })
        }
        Some(undelivered) if undelivered.reason == DeadLetterReason::Unreachable => {
            Err(SendError::Unreachable {
                path: undelivered.target,
            })
        }
        Some(undelivered) => {
            kernel.dead_letter(undelivered.envelope, undelivered.target, undelivered.reason);
            Ok(())
        }
        None => Ok(()),
    }
}
