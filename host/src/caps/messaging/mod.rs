//! `mote:actor/messaging`: delivery beyond one-to-one. Publish to a topic, send to the least
//! loaded member of a group or to all of it, ask with a deadline, and dead letters as a topic
//! (`/system/deadletters`).
//!
//! Invariants:
//! - A publish reaches each subscriber through its own mailbox in call order, so one subscriber
//!   sees a publisher's messages in publish order.
//! - Members that stopped leave their topics and groups: eagerly when their cell terminates,
//!   lazily when a delivery finds them gone. Subscriptions and memberships survive a restart.
//! - A persistent actor's publish and group sends are resolved to members at the call and held
//!   like any send of its step.

pub(crate) mod ask;
pub(crate) mod directory;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use wasmtime::component::Linker;

use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use self::ask::{ASK_PREFIX, Answer, Pending};
use self::directory::Directory;
use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::actor::step::Deferred;
use crate::address::{ActorPath, Address};
use crate::error::HostError;
use crate::kernel::Kernel;
use crate::kernel::deadletters::{DEAD_LETTERS_PATH, DeadLetterReason};
use crate::message::Envelope;
use crate::quota::Quota;
use crate::sandbox::bindings::mote::actor::messaging;
use crate::sandbox::bindings::{WitAddress, WitSendError};

/// The kind of a dead letter handed to a subscriber of `/system/deadletters`.
pub const DEAD_LETTER_KIND: &str = "mote.deadletter";

/// The capability behind the `messaging` interface.
#[derive(Default)]
pub(crate) struct Messaging {
    pub(crate) topics: Directory,
    pub(crate) groups: Directory,
    /// Replies that reached an ask after it was resolved.
    late_replies: AtomicU64,
    /// Asks (from actors and from outside) awaiting their reply or deadline.
    pub(crate) open_asks: Arc<AtomicUsize>,
}

/// The topics and groups with members on this node.
#[derive(Default)]
pub(crate) struct Interest {
    /// Each topic and how many subscribers it has here.
    pub(crate) topics: Vec<(String, u32)>,
    /// Each group, how many members it has here, and the shortest mailbox among them.
    pub(crate) groups: Vec<(String, u32, u64)>,
}

/// The topics and groups an image of an actor takes up again.
#[derive(serde::Serialize, serde::Deserialize)]
struct Memberships {
    topics: Vec<String>,
    groups: Vec<String>,
}

/// One actor's asks awaiting their outcome, counted across restarts and upgrades.
#[derive(Default, Clone)]
pub(crate) struct Asking(Arc<AtomicUsize>);

impl Capability for Messaging {
    type State = Asking;
    const IMPORTS: &'static [&'static str] = &["mote:actor/messaging@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Messaging::default())
    }

    fn metrics(&self, registry: &mut Registry) {
        let open = self.open_asks.load(Ordering::Relaxed);
        registry.register(
            "asks_pending",
            "Asks (by actors and from outside) waiting for their reply or deadline",
            ConstGauge::new(i64::try_from(open).unwrap_or(i64::MAX)),
        );
        registry.register(
            "ask_late_replies",
            "Replies that reached an ask after it had been answered or had timed out",
            ConstCounter::new(self.late_replies()),
        );
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        messaging::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, origin: Origin<'_, Asking>) -> Asking {
        match origin {
            Origin::Spawned => Asking::default(),
            // Asks in flight still resolve to the actor's address.
            Origin::Restarted { old, .. } => old,
            Origin::Upgraded { old } => old.clone(),
        }
    }

    fn capture(&self, actor: &ActorCore, state: &Asking) -> Result<Vec<u8>, String> {
        let open = state.0.load(Ordering::Relaxed);
        if open > 0 {
            return Err(format!("{open} ask(s) await their reply"));
        }
        let kept = Memberships {
            topics: self.topics.sets_of(&actor.me),
            groups: self.groups.sets_of(&actor.me),
        };
        if kept.topics.is_empty() && kept.groups.is_empty() {
            return Ok(Vec::new());
        }
        Ok(crate::storage::database::encode(&kept))
    }

    fn restore(&self, actor: &ActorCore, image: &[u8]) -> Result<Asking, String> {
        if image.is_empty() {
            return Ok(Asking::default());
        }
        let kept: Memberships = postcard::from_bytes(image).map_err(|e| e.to_string())?;
        let quotas = actor.quotas();
        if kept.topics.len() > quotas.subscriptions || kept.groups.len() > quotas.groups {
            return Err("more topics or groups than the actor's quotas allow".into());
        }
        for name in kept.topics.iter().chain(&kept.groups) {
            actor.check_name(name).map_err(|e| format!("{e:?}"))?;
        }
        for topic in &kept.topics {
            self.topics.join(topic, &actor.me);
        }
        for group in &kept.groups {
            self.groups.join(group, &actor.me);
        }
        Ok(Asking::default())
    }

    fn stopped(&self, _kernel: &Arc<Kernel>, actor: &Address, _state: Option<&mut Asking>) {
        self.topics.remove_member(actor);
        self.groups.remove_member(actor);
    }

    fn dead_letter(&self, kernel: &Arc<Kernel>, envelope: &Envelope, target: &str) {
        if target.starts_with(ASK_PREFIX) {
            self.late_replies.fetch_add(1, Ordering::Relaxed);
        }
        if self.topics.is_empty(DEAD_LETTERS_PATH) {
            return;
        }
        let letter = Envelope::new(
            envelope.sender.clone(),
            DEAD_LETTER_KIND,
            encode_dead_letter(target, &envelope.kind, &envelope.body),
        );
        // A dead letter that cannot reach a subscriber is dropped, never dead-lettered again.
        for member in self.topics.members(DEAD_LETTERS_PATH) {
            if member.path.as_str() == target {
                continue;
            }
            let _ = kernel.deliver(
                member.path.as_str(),
                Some(member.incarnation),
                letter.clone(),
            );
        }
    }
}

impl Messaging {
    /// Sends to every subscriber of `topic`, here and on other nodes; returns how many it
    /// reached (on other nodes: how many they count).
    pub(crate) fn publish(&self, kernel: &Arc<Kernel>, topic: &str, envelope: Envelope) -> u32 {
        let remote = kernel.remote().map_or(0, |r| r.publish(topic, &envelope));
        fan_out(kernel, &self.topics, topic, &envelope) + remote
    }

    /// Sends to every member of `group`, here and on other nodes; returns how many it reached.
    pub(crate) fn broadcast_group(
        &self,
        kernel: &Arc<Kernel>,
        group: &str,
        envelope: Envelope,
    ) -> u32 {
        let remote = kernel
            .remote()
            .map_or(0, |r| r.broadcast_group(group, &envelope));
        fan_out(kernel, &self.groups, group, &envelope) + remote
    }

    /// Sends to the member of `group` with the shortest mailbox, here or on another node;
    /// false if none is alive.
    pub(crate) fn tell_group(&self, kernel: &Arc<Kernel>, group: &str, envelope: Envelope) -> bool {
        let local = self.least_loaded_depth(kernel, group);
        let envelope = match kernel.remote() {
            Some(remote) => match remote.tell_group(group, local.as_ref().map(|l| l.0), envelope) {
                Ok(()) => return true,
                Err(envelope) => envelope,
            },
            None => envelope,
        };
        match local {
            Some((_, member)) => deliver_to_member(kernel, &self.groups, group, &member, envelope),
            None => false,
        }
    }

    /// Sends to the member of `group` with the shortest mailbox on this node only; false if
    /// none is alive here.
    pub(crate) fn tell_group_here(
        &self,
        kernel: &Arc<Kernel>,
        group: &str,
        envelope: Envelope,
    ) -> bool {
        match self.least_loaded(kernel, group) {
            Some(member) => deliver_to_member(kernel, &self.groups, group, &member, envelope),
            None => false,
        }
    }

    /// Sends to every subscriber of `topic` on this node only.
    pub(crate) fn publish_here(&self, kernel: &Arc<Kernel>, topic: &str, envelope: &Envelope) {
        fan_out(kernel, &self.topics, topic, envelope);
    }

    /// Sends to every member of `group` on this node only.
    pub(crate) fn broadcast_group_here(
        &self,
        kernel: &Arc<Kernel>,
        group: &str,
        envelope: &Envelope,
    ) {
        fan_out(kernel, &self.groups, group, envelope);
    }

    /// The live member of `group` with the shortest mailbox.
    pub(crate) fn least_loaded(&self, kernel: &Kernel, group: &str) -> Option<Address> {
        self.least_loaded_depth(kernel, group).map(|(_, m)| m)
    }

    /// The live member of `group` with the shortest mailbox, and how long it is.
    fn least_loaded_depth(&self, kernel: &Kernel, group: &str) -> Option<(usize, Address)> {
        self.groups
            .members(group)
            .into_iter()
            .filter_map(|m| {
                kernel
                    .registry
                    .with(m.path.as_str(), |a| {
                        a.filter(|a| a.address.incarnation == m.incarnation)
                            .map(|a| a.depth.messages())
                    })
                    .map(|depth| (depth, m))
            })
            .min_by_key(|(depth, _)| *depth)
    }

    /// Each topic and group with a member here (what other nodes route by).
    pub(crate) fn interest(&self, kernel: &Kernel) -> Interest {
        let topics = self.topics.names();
        let groups = self
            .groups
            .names()
            .into_iter()
            .map(|(name, members)| {
                let shortest = self
                    .least_loaded_depth(kernel, &name)
                    .map_or(u64::MAX, |(depth, _)| depth as u64);
                (name, members, shortest)
            })
            .collect();
        Interest { topics, groups }
    }

    /// Replies that arrived after their ask had been answered or had timed out.
    pub(crate) fn late_replies(&self) -> u64 {
        self.late_replies.load(Ordering::Relaxed)
    }
}

fn fan_out(kernel: &Arc<Kernel>, directory: &Directory, name: &str, envelope: &Envelope) -> u32 {
    let mut reached = 0;
    for member in directory.members(name) {
        if deliver_to_member(kernel, directory, name, &member, envelope.clone()) {
            reached += 1;
        }
    }
    reached
}

/// Delivers to one member; a member that has stopped leaves the set.
fn deliver_to_member(
    kernel: &Arc<Kernel>,
    directory: &Directory,
    name: &str,
    member: &Address,
    envelope: Envelope,
) -> bool {
    match kernel.deliver(member.path.as_str(), Some(member.incarnation), envelope) {
        None => true,
        Some(undelivered) if undelivered.reason == DeadLetterReason::MailboxFull => {
            kernel.dead_letter(undelivered.envelope, undelivered.target, undelivered.reason);
            false
        }
        Some(_) => {
            directory.leave(name, member);
            false
        }
    }
}

/// A publish or group broadcast of a held step to other nodes' members, released with the
/// step like its local sends (and, like them, dropped if the step is not committed).
enum Fanout {
    Topic(String),
    Group(String),
}

/// The remote part of a held fan-out, deferred to the step's release.
struct RemoteFanout {
    to: Fanout,
    envelope: Envelope,
}

impl Deferred for RemoteFanout {
    fn release(self, kernel: &Arc<Kernel>) {
        if let Some(remote) = kernel.remote() {
            match &self.to {
                Fanout::Topic(topic) => remote.publish(topic, &self.envelope),
                Fanout::Group(group) => remote.broadcast_group(group, &self.envelope),
            };
        }
    }
}

/// Holds the remote part of a fan-out of `actor`'s step; how many it will reach, as other
/// nodes last said (0 without a cluster).
fn hold_remote(actor: &mut ActorCore, to: Fanout, envelope: Envelope) -> u32 {
    let Some(remote) = actor.kernel.remote() else {
        return 0;
    };
    let reach = match &to {
        Fanout::Topic(topic) => remote.reach(Some(topic), None),
        Fanout::Group(group) => remote.reach(None, Some(group)),
    };
    if reach > 0 {
        let kernel = actor.kernel.clone();
        actor.step.defer(&kernel, RemoteFanout { to, envelope });
    }
    reach
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

/// Makes `actor` a member of `name` in `directory`, if the name is not too long and the actor
/// is in fewer than `max` sets there (else a refusal of `quota`, counted).
fn join_within(
    actor: &ActorCore,
    directory: &Directory,
    name: &str,
    max: usize,
    quota: Quota,
) -> Result<(), WitSendError> {
    actor.check_name(name)?;
    if !directory.join_within(name, &actor.me, max) {
        return Err(actor.refuse(quota).into());
    }
    Ok(())
}

impl messaging::Host for Call<'_, Messaging> {
    fn subscribe(&mut self, topic: String) -> Result<(), WitSendError> {
        let max = self.actor.quotas().subscriptions;
        join_within(
            self.actor,
            &self.cap.topics,
            &topic,
            max,
            Quota::Subscriptions,
        )
    }

    fn unsubscribe(&mut self, topic: String) {
        self.cap.topics.leave(&topic, &self.actor.me);
    }

    fn publish(&mut self, topic: String, kind: String, body: Vec<u8>) -> Result<u32, WitSendError> {
        let envelope = self.actor.envelope(kind, body)?;
        if !self.actor.step.holds() {
            return Ok(self.cap.publish(&self.actor.kernel, &topic, envelope));
        }
        let members = self.cap.topics.members(&topic);
        let here = self.actor.send_all(members, &envelope);
        Ok(here + hold_remote(self.actor, Fanout::Topic(topic), envelope))
    }

    fn join(&mut self, group: String) -> Result<(), WitSendError> {
        let max = self.actor.quotas().groups;
        join_within(self.actor, &self.cap.groups, &group, max, Quota::Groups)
    }

    fn leave(&mut self, group: String) {
        self.cap.groups.leave(&group, &self.actor.me);
    }

    fn tell_group(
        &mut self,
        group: String,
        kind: String,
        body: Vec<u8>,
    ) -> Result<bool, WitSendError> {
        let envelope = self.actor.envelope(kind, body)?;
        if !self.actor.step.holds() {
            return Ok(self.cap.tell_group(&self.actor.kernel, &group, envelope));
        }
        let Some(member) = self.cap.least_loaded(&self.actor.kernel, &group) else {
            return Ok(false);
        };
        self.actor
            .send(member.path.as_str(), Some(member.incarnation), envelope);
        Ok(true)
    }

    fn broadcast_group(
        &mut self,
        group: String,
        kind: String,
        body: Vec<u8>,
    ) -> Result<u32, WitSendError> {
        let envelope = self.actor.envelope(kind, body)?;
        if !self.actor.step.holds() {
            return Ok(self
                .cap
                .broadcast_group(&self.actor.kernel, &group, envelope));
        }
        let members = self.cap.groups.members(&group);
        let here = self.actor.send_all(members, &envelope);
        Ok(here + hold_remote(self.actor, Fanout::Group(group), envelope))
    }

    fn ask(
        &mut self,
        to: WitAddress,
        kind: String,
        body: Vec<u8>,
        timeout_ms: u64,
    ) -> Result<u64, WitSendError> {
        self.actor.check_path(&to.path)?;
        ActorPath::check(&to.path)?;
        let envelope = self.actor.envelope(kind, body)?;
        let quotas = self.actor.quotas();
        let timeout = Duration::from_millis(timeout_ms);
        if timeout > quotas.max_ask_deadline {
            return Err(self.actor.refuse(Quota::AskDeadline).into());
        }
        let Some(pending) = Pending::within(&self.state.0, quotas.asks) else {
            return Err(self.actor.refuse(Quota::Asks).into());
        };
        let trace = envelope.trace();
        let answer = Answer::Actor {
            asker: self.actor.me.clone(),
            pending,
            trace,
        };
        let Some(endpoint) =
            ask::endpoint(&self.actor.kernel, timeout, answer, &self.cap.open_asks)
        else {
            return Err(WitSendError::InvalidPath("no ask endpoint".to_owned()));
        };
        let id = endpoint.incarnation;
        let request = Envelope::new(Some(endpoint), envelope.kind, envelope.body).traced(trace);
        self.actor.send(&to.path, Some(to.incarnation), request);
        Ok(id)
    }
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
