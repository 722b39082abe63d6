//! The rest of a cluster, as the kernel sees it: where a message goes that no actor of this node
//! holds, and how death watch, topics and groups reach other nodes. The kernel knows no
//! transport; a cluster plugs in behind [`Remote`] once it has joined.
//!
//! Invariants:
//! - Without a remote, delivery is exactly the single-host delivery: nothing here is consulted.
//! - The remote is consulted only for paths no local actor holds (`NoActor`); a path that lives
//!   here is never sent away.
//! - A message that came from another node is delivered here or dead-lettered here: it is never
//!   routed onwards (no loops between nodes that disagree for a moment).

use std::sync::Arc;

use super::spawn::SpawnRequest;
use super::{Kernel, Undelivered};
use crate::actor::mailbox::{ActorRef, SystemMsg};
use crate::address::Address;
use crate::error::SpawnError;
use crate::message::Envelope;

/// What a cluster does for the kernel. Every method is called on a sender's thread: it queues
/// and returns, never blocks on the network.
pub(crate) trait Remote: Send + Sync + 'static {
    /// This node's name.
    fn node(&self) -> &str;

    /// A message for `path`, which no actor of this node holds. `Err` gives it back when this
    /// node owns the path; otherwise it is on its way (`Ok(None)`) or undeliverable, with why.
    fn route(
        &self,
        kernel: &Arc<Kernel>,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) -> Result<Option<Undelivered>, Envelope>;

    /// `watcher` (of this node) watches `target`, whose path is another node's; false if the
    /// path is this node's.
    fn watch(&self, watcher: &Address, target: &Address) -> bool;

    /// `watcher` no longer watches `target` of another node.
    fn unwatch(&self, watcher: &Address, target: &Address);

    /// An actor of this node has left its path (stopped, or passivated).
    fn released(&self, actor: &Address);

    /// Messages that wait for a new actor at `path` (an entity whose lease was just taken):
    /// queued before the path is registered, so nothing sent later overtakes them.
    fn backlog(&self, path: &str) -> Vec<Envelope>;

    /// Sends to the subscribers of `topic` on other nodes; how many there are.
    fn publish(&self, topic: &str, envelope: &Envelope) -> u32;

    /// How many subscribers of `topic` (or members of `group`) other nodes have, as they last
    /// said: what a held publish (or group broadcast) will reach there when it is released.
    fn reach(&self, topic: Option<&str>, group: Option<&str>) -> u32;

    /// Sends to the members of `group` on other nodes; how many there are.
    fn broadcast_group(&self, group: &str, envelope: &Envelope) -> u32;

    /// Puts `msg` on the system lane of `to`, an actor of another node (a parent hears of its
    /// child here); false if no live node owns its path.
    fn signal(&self, to: &Address, msg: SystemMsg) -> bool;

    /// Spawns the child `request` describes on `node`, and gives back its stand-in here:
    /// registered at the child's path, it forwards what it gets to the child.
    fn spawn_on(
        &self,
        kernel: &Arc<Kernel>,
        node: &str,
        request: SpawnRequest,
    ) -> Result<ActorRef, SpawnError>;

    /// Sends to the least loaded member of `group` on another node if one has a shorter
    /// mailbox than `local` (this node's best, if it has a member); `Err` gives it back.
    fn tell_group(
        &self,
        group: &str,
        local: Option<usize>,
        envelope: Envelope,
    ) -> Result<(), Envelope>;
}

impl Kernel {
    /// The cluster this node has joined, if any.
    pub(crate) fn remote(&self) -> Option<&Arc<dyn Remote>> {
        self.remote.get()
    }

    /// Plugs in the cluster; once.
    pub(crate) fn join(&self, remote: Arc<dyn Remote>) -> bool {
        self.remote.set(remote).is_ok()
    }

    /// Offers a message no local actor holds to the cluster; `Err` gives it back.
    pub(super) fn route_remote(
        self: &Arc<Self>,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) -> Result<Option<Undelivered>, Envelope> {
        match self.remote() {
            Some(remote) => remote.route(self, path, incarnation, envelope),
            None => Err(envelope),
        }
    }

    /// `watcher` watches `target`: the target's cell (here) or its node (elsewhere) will tell
    /// it once. False if no such incarnation lives: the caller tells the watcher at once.
    pub(crate) fn watch(&self, watcher: &Address, target: &Address) -> bool {
        self.watch_here(watcher, target).unwrap_or_else(|| {
            self.remote()
                .is_some_and(|remote| remote.watch(watcher, target))
        })
    }

    /// A watch from another node: only an actor of this node can take it.
    pub(crate) fn watch_local(&self, watcher: &Address, target: &Address) -> bool {
        self.watch_here(watcher, target).unwrap_or(false)
    }

    /// Registers the watch with the actor at `target`'s path here; `None` if no actor lives
    /// at that path here.
    fn watch_here(&self, watcher: &Address, target: &Address) -> Option<bool> {
        self.registry.with(target.path.as_str(), |actor| {
            actor.map(|a| {
                a.address.incarnation == target.incarnation
                    && a.signal(SystemMsg::Watch(watcher.clone()))
            })
        })
    }

    /// `watcher` no longer watches `target`, here or on another node.
    pub(crate) fn unwatch(&self, watcher: &Address, target: &Address) {
        let local = self.registry.with(target.path.as_str(), |actor| {
            actor.map(|a| {
                if a.address.incarnation == target.incarnation {
                    a.signal(SystemMsg::Unwatch(watcher.clone()));
                }
            })
        });
        if local.is_none()
            && let Some(remote) = self.remote()
        {
            remote.unwatch(watcher, target);
        }
    }

    /// An actor has left its path: a cluster releases what it held for it.
    pub(crate) fn released(&self, actor: &Address) {
        if let Some(remote) = self.remote() {
            remote.released(actor);
        }
    }

    /// Delivers a message that came from another node: here, or to dead letters here.
    pub(crate) fn deliver_inbound(
        self: &Arc<Self>,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) {
        if let Some(undelivered) = self.deliver_here(path, incarnation, envelope) {
            self.dead_letter(undelivered.envelope, undelivered.target, undelivered.reason);
        }
    }
}
