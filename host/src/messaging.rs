//! Delivery beyond one-to-one: publish to a topic, send to a group member or to all of a group,
//! and dead letters published to the subscribers of `/system/deadletters`.

use crate::address::Address;
use crate::deadletters::{DEAD_LETTERS_PATH, DeadLetterReason};
use crate::message::Envelope;
use crate::system::Shared;

/// The kind of a dead letter handed to a subscriber of `/system/deadletters`.
pub const DEAD_LETTER_KIND: &str = "mote.deadletter";

impl Shared {
    /// Sends to every subscriber of `topic`; returns how many it reached.
    pub(crate) fn publish(&self, topic: &str, envelope: Envelope) -> u32 {
        self.fan_out(&self.topics, topic, &envelope)
    }

    /// Sends to every member of `group`; returns how many it reached.
    pub(crate) fn broadcast_group(&self, group: &str, envelope: Envelope) -> u32 {
        self.fan_out(&self.groups, group, &envelope)
    }

    fn fan_out(
        &self,
        directory: &crate::pubsub::Directory,
        name: &str,
        envelope: &Envelope,
    ) -> u32 {
        let mut reached = 0;
        for member in directory.members(name) {
            if self.deliver_to_member(directory, name, &member, envelope.clone()) {
                reached += 1;
            }
        }
        reached
    }

    /// Delivers to one member; a member that has stopped leaves the set.
    fn deliver_to_member(
        &self,
        directory: &crate::pubsub::Directory,
        name: &str,
        member: &Address,
        envelope: Envelope,
    ) -> bool {
        match self.deliver(member.path.as_str(), Some(member.incarnation), envelope) {
            None => true,
            Some((envelope, target, DeadLetterReason::MailboxFull)) => {
                self.dead_letter(envelope, target, DeadLetterReason::MailboxFull);
                false
            }
            Some(_) => {
                directory.leave(name, member);
                false
            }
        }
    }

    /// Sends to the member of `group` with the shortest mailbox; false if none is alive.
    pub(crate) fn tell_group(&self, group: &str, envelope: Envelope) -> bool {
        match self.least_loaded(group) {
            Some(member) => self.deliver_to_member(&self.groups, group, &member, envelope),
            None => false,
        }
    }

    /// The live member of `group` with the shortest mailbox.
    pub(crate) fn least_loaded(&self, group: &str) -> Option<Address> {
        let members = self.groups.members(group);
        members
            .iter()
            .filter_map(|m| {
                self.registry.with(m.path.as_str(), |a| {
                    a.filter(|a| a.address.incarnation == m.incarnation)
                        .map(|a| (a.depth.load(std::sync::atomic::Ordering::Relaxed), m))
                })
            })
            .min_by_key(|(depth, _)| *depth)
            .map(|(_, m)| m.clone())
    }

    /// Records a dead letter and hands it to the subscribers of `/system/deadletters`.
    pub(crate) fn dead_letter(
        &self,
        mut envelope: Envelope,
        target: String,
        reason: DeadLetterReason,
    ) {
        // A durable message that cannot be delivered is settled: it will not come back. During
        // a shutdown it stays in the store instead, for the next start.
        let receipt = envelope.receipt.take();
        if !self.is_shutting_down() {
            self.ack_lazily(receipt);
        }
        if target.starts_with(crate::ask::ASK_PREFIX) {
            self.late_replies
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if !self.topics.is_empty(DEAD_LETTERS_PATH) {
            let letter = Envelope::new(
                envelope.sender.clone(),
                DEAD_LETTER_KIND.to_owned(),
                encode_dead_letter(&target, &envelope.kind, &envelope.body),
            );
            // A dead letter that cannot reach a subscriber is dropped, never dead-lettered again.
            for member in self.topics.members(DEAD_LETTERS_PATH) {
                if member.path.as_str() == target {
                    continue;
                }
                let _ = self.deliver(
                    member.path.as_str(),
                    Some(member.incarnation),
                    letter.clone(),
                );
            }
        }
        self.dead_letters.post(envelope, target, reason);
    }
}

/// The body of a `mote.deadletter`: target, kind and body, each a LEB128 length plus bytes.
pub fn encode_dead_letter(target: &str, kind: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(target.len() + kind.len() + body.len() + 12);
    for field in [target.as_bytes(), kind.as_bytes(), body] {
        let mut len = field.len();
        loop {
            let byte = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
        out.extend_from_slice(field);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_letter_bodies_are_length_prefixed_fields() {
        let body = encode_dead_letter("/user/a", "K", &[0u8; 200]);
        assert_eq!(&body[..8], b"\x07/user/a");
        assert_eq!(&body[8..10], b"\x01K");
        assert_eq!(&body[10..12], &[0xc8, 0x01]);
        assert_eq!(body.len(), 12 + 200);
    }
}
