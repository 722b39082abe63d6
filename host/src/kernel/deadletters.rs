//! `/system/deadletters`: where messages go that found no live receiver.
//!
//! Invariants:
//! - Every dead letter is counted and published to subscribers with its sender, its intended
//!   target and the reason.
//! - The log gets the first few at info, then debug, so a flood cannot drown it.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::broadcast;

use crate::address::Address;
use crate::message::Envelope;

/// The path of the dead-letter office.
pub const DEAD_LETTERS_PATH: &str = "/system/deadletters";

const LOUD_LIMIT: u64 = 20;

/// A message that could not be delivered.
#[derive(Clone, Debug)]
pub struct DeadLetter {
    /// The message, with its sender.
    pub envelope: Envelope,
    /// Where it was sent: a path, or a path and incarnation.
    pub target: String,
    /// Why it could not be delivered.
    pub reason: DeadLetterReason,
}

/// Why a message became a dead letter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadLetterReason {
    /// No actor lives at the target path.
    NoActor,
    /// An actor lives at the path, but not the incarnation it was sent to.
    StaleIncarnation,
    /// The actor stopped with the message still queued.
    Stopped,
    /// The actor's mailbox was at capacity.
    MailboxFull,
    /// The actor rejected it (`host.reject`: its body did not decode, say); the log has its
    /// reason.
    Rejected,
    /// The node that owns the target path is down (or left the cluster).
    NodeDown,
    /// The link to the node that owns the target path is backed up or closed.
    Unreachable,
}

impl DeadLetterReason {
    /// Every reason, in the order of their counts.
    pub const ALL: [DeadLetterReason; 7] = [
        DeadLetterReason::NoActor,
        DeadLetterReason::StaleIncarnation,
        DeadLetterReason::Stopped,
        DeadLetterReason::MailboxFull,
        DeadLetterReason::Rejected,
        DeadLetterReason::NodeDown,
        DeadLetterReason::Unreachable,
    ];

    /// Its short name, as metrics label it (`no-actor`).
    pub fn name(self) -> &'static str {
        match self {
            DeadLetterReason::NoActor => "no-actor",
            DeadLetterReason::StaleIncarnation => "stale-incarnation",
            DeadLetterReason::Stopped => "stopped",
            DeadLetterReason::MailboxFull => "mailbox-full",
            DeadLetterReason::Rejected => "rejected",
            DeadLetterReason::NodeDown => "node-down",
            DeadLetterReason::Unreachable => "unreachable",
        }
    }
}

impl std::fmt::Display for DeadLetterReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeadLetterReason::NoActor => "no actor at that path",
            DeadLetterReason::StaleIncarnation => "that incarnation has stopped",
            DeadLetterReason::Stopped => "the actor stopped before handling it",
            DeadLetterReason::MailboxFull => "the actor's mailbox is full",
            DeadLetterReason::Rejected => "the actor rejected it",
            DeadLetterReason::NodeDown => "the node that owns the path is down",
            DeadLetterReason::Unreachable => "the link to the node that owns the path is backed up",
        })
    }
}

/// The dead-letter office of one system.
pub(crate) struct DeadLetters {
    count: AtomicU64,
    /// Of them, by reason (in the order of [`DeadLetterReason::ALL`]).
    by_reason: [AtomicU64; DeadLetterReason::ALL.len()],
    tx: broadcast::Sender<DeadLetter>,
}

impl DeadLetters {
    pub(crate) fn new() -> Self {
        DeadLetters {
            count: AtomicU64::new(0),
            by_reason: Default::default(),
            tx: broadcast::channel(4096).0,
        }
    }

    /// Records one dead letter.
    pub(crate) fn post(&self, envelope: Envelope, target: String, reason: DeadLetterReason) {
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        self.by_reason[reason as usize].fetch_add(1, Ordering::Relaxed);
        let sender = envelope
            .sender
            .as_ref()
            .map_or_else(|| "outside".to_owned(), Address::to_string);
        if n <= LOUD_LIMIT {
            tracing::info!(target: "mote::deadletters", %sender, %target, kind = %envelope.kind, %reason, "dead letter #{n}");
        } else {
            tracing::debug!(target: "mote::deadletters", %sender, %target, kind = %envelope.kind, %reason, "dead letter #{n}");
        }
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(DeadLetter {
                envelope,
                target,
                reason,
            });
        }
    }

    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Dead letters so far, by reason.
    pub(crate) fn by_reason(&self) -> impl Iterator<Item = (DeadLetterReason, u64)> + '_ {
        DeadLetterReason::ALL
            .into_iter()
            .zip(&self.by_reason)
            .map(|(r, n)| (r, n.load(Ordering::Relaxed)))
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<DeadLetter> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dead_letter_is_counted_and_published_with_its_reason() {
        let office = DeadLetters::new();
        let mut letters = office.subscribe();
        office.post(
            Envelope::new(None, "k", vec![1]),
            "/user/gone".to_owned(),
            DeadLetterReason::NoActor,
        );
        office.post(
            Envelope::new(None, "j", Vec::new()),
            "/user/full#3".to_owned(),
            DeadLetterReason::MailboxFull,
        );
        assert_eq!(office.count(), 2);
        let first = letters.try_recv().unwrap();
        assert_eq!(
            (
                first.target.as_str(),
                first.reason,
                first.envelope.kind.as_str()
            ),
            ("/user/gone", DeadLetterReason::NoActor, "k")
        );
        assert_eq!(
            letters.try_recv().unwrap().reason,
            DeadLetterReason::MailboxFull
        );
    }
}
