//! Delivery: a message to a path (and maybe an incarnation) is queued in a live actor's mailbox
//! or becomes a dead letter. Nothing is dropped silently.
//!
//! Invariants:
//! - The registry's lock is held only for the channel push (the send hot path).
//! - Incarnation 0 stands for whoever lives at the path (messages recovered after a restart
//!   carry such senders); any other incarnation must match the live one.
//! - A message no live actor takes is offered to the extensions (an entity may activate) before
//!   it becomes a dead letter.

use std::sync::Arc;

use super::deadletters::DeadLetterReason;
use super::{Kernel, Undelivered};
use crate::actor::mailbox::Refused;
use crate::address::Address;
use crate::message::Envelope;

/// How a dead letter names its target: the path, and the incarnation if one was addressed.
fn target(path: &str, incarnation: Option<u64>) -> String {
    match incarnation {
        Some(i) => format!("{path}#{i}"),
        None => path.to_owned(),
    }
}

impl Kernel {
    /// Delivers to the actor at `path` (to that incarnation only, if one is given), or to dead
    /// letters.
    pub(crate) fn tell_address(
        self: &Arc<Self>,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) {
        if let Some(undelivered) = self.deliver(path, incarnation, envelope) {
            self.dead_letter(undelivered.envelope, undelivered.target, undelivered.reason);
        }
    }

    /// Delivers a host message to one incarnation, bypassing its mailbox capacity; an
    /// incarnation of no local path may live on another node (a watcher, an asker).
    pub(crate) fn tell_host(self: &Arc<Self>, to: &Address, envelope: Envelope) {
        let refused = self.registry.with(to.path.as_str(), |actor| match actor {
            Some(a) if a.address.incarnation == to.incarnation => {
                a.tell_host(envelope).err().map(|r| (r, true))
            }
            Some(_) => Some((Refused::Closed(envelope), true)),
            None => Some((Refused::Closed(envelope), false)),
        });
        let Some((Refused::Closed(envelope) | Refused::Full(envelope), here)) = refused else {
            return;
        };
        let undelivered = if here {
            Err(envelope)
        } else {
            self.route_remote(to.path.as_str(), Some(to.incarnation), envelope)
        };
        match undelivered {
            Ok(None) => {}
            Ok(Some(u)) => self.dead_letter(u.envelope, u.target, u.reason),
            Err(envelope) => self.dead_letter(envelope, to.to_string(), DeadLetterReason::Stopped),
        }
    }

    /// Queues `envelope` here or on the node that owns `path`, or gives it back with the
    /// dead-letter target and reason.
    pub(crate) fn deliver(
        self: &Arc<Self>,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) -> Option<Undelivered> {
        self.deliver_to(path, incarnation, envelope, true)
    }

    /// [`Kernel::deliver`] without the cluster: queued here (maybe activating an entity), or
    /// given back.
    pub(crate) fn deliver_here(
        self: &Arc<Self>,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) -> Option<Undelivered> {
        self.deliver_to(path, incarnation, envelope, false)
    }

    /// A live actor, else (with `remote`) the node that owns the path, else the extensions.
    fn deliver_to(
        self: &Arc<Self>,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
        remote: bool,
    ) -> Option<Undelivered> {
        let Undelivered {
            envelope,
            target,
            reason,
        } = match self.deliver_live(path, incarnation, envelope) {
            Some(u)
                if matches!(
                    u.reason,
                    DeadLetterReason::NoActor | DeadLetterReason::StaleIncarnation
                ) =>
            {
                u
            }
            other => return other,
        };
        // Only a path no local actor holds may be another node's.
        let envelope = if remote && reason == DeadLetterReason::NoActor {
            match self.route_remote(path, incarnation, envelope) {
                Ok(outcome) => return outcome,
                Err(envelope) => envelope,
            }
        } else {
            envelope
        };
        self.unclaimed(path, envelope, target, reason)
    }

    /// Offers a message no live actor took to the extensions (an entity may activate).
    fn unclaimed(
        self: &Arc<Self>,
        path: &str,
        envelope: Envelope,
        target: String,
        reason: DeadLetterReason,
    ) -> Option<Undelivered> {
        let Some(ext) = self.extensions.get() else {
            return Some(Undelivered {
                envelope,
                target,
                reason,
            });
        };
        match ext.unclaimed(self, path, envelope) {
            Ok(outcome) => outcome,
            Err(envelope) => Some(Undelivered {
                envelope,
                target,
                reason,
            }),
        }
    }

    /// Queues `envelope` for a live actor only.
    pub(crate) fn deliver_live(
        &self,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) -> Option<Undelivered> {
        self.registry.with(path, |actor| match actor {
            Some(a) if incarnation.is_none_or(|i| i == 0 || i == a.address.incarnation) => {
                a.tell(envelope).err().map(|refused| match refused {
                    Refused::Full(envelope) => Undelivered {
                        envelope,
                        target: a.address.to_string(),
                        reason: DeadLetterReason::MailboxFull,
                    },
                    Refused::Closed(envelope) => Undelivered {
                        envelope,
                        target: a.address.to_string(),
                        reason: DeadLetterReason::Stopped,
                    },
                })
            }
            Some(_) => Some(Undelivered {
                envelope,
                target: target(path, incarnation),
                reason: DeadLetterReason::StaleIncarnation,
            }),
            None => Some(Undelivered {
                envelope,
                target: target(path, incarnation),
                reason: DeadLetterReason::NoActor,
            }),
        })
    }

    /// Records a dead letter, tells the extensions and posts it to the office. A durable
    /// message's receipt is handed to the store as undeliverable (the local store drops it,
    /// a store that sends again keeps it pending), except when the reason passes (its node is
    /// down or out of reach) or the host shuts down: then it stays pending as it is.
    pub(crate) fn dead_letter(
        self: &Arc<Self>,
        mut envelope: Envelope,
        target: String,
        reason: DeadLetterReason,
    ) {
        let receipt = envelope.receipt.take();
        let passing = matches!(
            reason,
            DeadLetterReason::NodeDown | DeadLetterReason::Unreachable
        );
        if let Some(receipt) = receipt
            && !passing
            && !self.is_shutting_down()
            && let Some(ext) = self.extensions.get()
        {
            ext.undeliverable(receipt);
        }
        if let Some(ext) = self.extensions.get() {
            ext.dead_letter(self, &envelope, &target);
        }
        self.dead_letters.post(envelope, target, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actor::mailbox::UserMsg;
    use crate::kernel::testing::{kernel, register};

    #[test]
    fn a_message_reaches_the_live_incarnation_or_incarnation_zero() {
        let (_rt, kernel) = kernel();
        let (address, mut mailbox) = register(&kernel, "/user/a", 10);
        let env = || Envelope::new(None, "k", vec![1]);
        assert!(
            kernel
                .deliver("/user/a", Some(address.incarnation), env())
                .is_none()
        );
        assert!(kernel.deliver("/user/a", Some(0), env()).is_none());
        assert!(kernel.deliver("/user/a", None, env()).is_none());
        for _ in 0..3 {
            assert!(matches!(mailbox.try_next(), Ok(UserMsg::Message(_))));
        }
    }

    #[test]
    fn undeliverable_messages_say_why() {
        let (_rt, kernel) = kernel();
        let (address, _mailbox) = register(&kernel, "/user/a", 1);
        let env = || Envelope::new(None, "k", Vec::new());
        let stale = kernel
            .deliver("/user/a", Some(address.incarnation + 1), env())
            .unwrap();
        assert_eq!(stale.reason, DeadLetterReason::StaleIncarnation);
        let nobody = kernel.deliver("/user/b", None, env()).unwrap();
        assert_eq!(nobody.reason, DeadLetterReason::NoActor);
        assert_eq!(nobody.target, "/user/b");
        assert!(kernel.deliver("/user/a", None, env()).is_none());
        let full = kernel.deliver("/user/a", None, env()).unwrap();
        assert_eq!(full.reason, DeadLetterReason::MailboxFull);
    }

    #[test]
    fn host_messages_pass_a_full_mailbox_and_dead_letters_are_counted() {
        let (_rt, kernel) = kernel();
        let (address, mut mailbox) = register(&kernel, "/user/a", 1);
        kernel.tell_address("/user/a", None, Envelope::new(None, "k", Vec::new()));
        kernel.tell_host(&address, Envelope::new(None, TERMINATED, Vec::new()));
        assert_eq!(kernel.dead_letters.count(), 0);
        kernel.tell_address("/user/a", None, Envelope::new(None, "k", Vec::new()));
        assert_eq!(
            kernel.dead_letters.count(),
            1,
            "the second user message was refused"
        );
        assert!(matches!(mailbox.try_next(), Ok(UserMsg::Message(_))));
        assert!(matches!(mailbox.try_next(), Ok(UserMsg::Message(e)) if e.kind == TERMINATED));
    }

    const TERMINATED: &str = super::super::TERMINATED_KIND;
}
