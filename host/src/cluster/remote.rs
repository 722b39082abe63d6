//! What a node does for its kernel: the `Remote` side of delivery. A message, a watch, a
//! signal or a spawn for a path no local actor holds goes to the node that owns the path; a
//! publish or a group send also goes to the nodes whose last beat named the topic or group.
//!
//! Invariants: those of the cluster's module (`super`): a path that lives here is never sent
//! away, nothing here blocks a sender, and an unknown or dead node is a typed refusal.

use std::sync::Arc;

use super::node::{Cluster, Whose};
use super::proxy::{self, End};
use super::routes;
use super::wire::{self, Frame, Signal};
use crate::actor::mailbox::{self, ActorRef, Capacity, SystemMsg};
use crate::address::Address;
use crate::error::SpawnError;
use crate::kernel::remote::Remote;
use crate::kernel::spawn::SpawnRequest;
use crate::kernel::{Kernel, Undelivered};
use crate::message::Envelope;

impl Remote for Cluster {
    fn node(&self) -> &str {
        Cluster::node(self)
    }

    fn signal(&self, to: &Address, msg: SystemMsg) -> bool {
        let Some(node) = self.owner(to.path.as_str()) else {
            return false;
        };
        if !self.members.is_live(&node) {
            return false;
        }
        let me = self.me.as_str();
        let signal = match msg {
            SystemMsg::Failed { child, kind, error } => Signal::Failed {
                child: wire::address(&child, me),
                kind,
                error,
            },
            SystemMsg::ChildTerminated(child) => Signal::ChildTerminated(wire::address(&child, me)),
            SystemMsg::Stop(reason) => Signal::Stop(reason),
            other => {
                tracing::debug!(?other, "a signal that does not cross nodes");
                return false;
            }
        };
        self.send(
            &node,
            Frame::Signal {
                to: wire::address(to, me),
                signal,
            },
        )
    }

    fn spawn_on(
        &self,
        kernel: &Arc<Kernel>,
        node: &str,
        request: SpawnRequest,
    ) -> Result<ActorRef, SpawnError> {
        if !self.members.is_live(node) {
            return Err(SpawnError::UnknownNode(node.to_owned()));
        }
        let Some(parent) = request.parent.clone() else {
            return Err(SpawnError::UnknownNode(node.to_owned()));
        };
        let child = Address {
            path: request.path.clone(),
            incarnation: kernel.next_incarnation(),
        };
        let (stand_in, mailbox) = mailbox::mailbox(
            child.clone(),
            None,
            Capacity {
                messages: request.limits.mailbox_capacity,
                bytes: request.limits.mailbox_bytes,
            },
        );
        if let Err(taken) = kernel.registry.insert(stand_in.clone()) {
            return Err(SpawnError::NameTaken(taken.address.path.to_string()));
        }
        let limits = &request.limits;
        let frame = Frame::Spawn(wire::Spawn {
            parent: wire::address(&parent, &self.me),
            path: child.path.to_string(),
            incarnation: child.incarnation,
            module: request.module,
            init: request.init,
            limits: wire::Limits::of(limits),
        });
        let ended = self.proxies.add(node, &child);
        if !self.send(node, frame) {
            kernel.registry.remove(&child);
            self.proxies.end(&child, End::Terminated);
            return Err(SpawnError::UnknownNode(node.to_owned()));
        }
        let Some(this) = self.this.upgrade() else {
            return Err(SpawnError::ShuttingDown);
        };
        kernel.runtime.spawn(proxy::stand_in(
            this,
            node.to_owned(),
            parent,
            child,
            mailbox,
            ended,
            request.reservation,
        ));
        Ok(stand_in)
    }

    fn route(
        &self,
        kernel: &Arc<Kernel>,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) -> Result<Option<Undelivered>, Envelope> {
        // An actor on its way here takes it once it arrives; if it arrived meanwhile, it
        // takes it now.
        let envelope = match self.moves.hold(path, &self.me, envelope) {
            Ok(()) => return Ok(None),
            Err(envelope) => envelope,
        };
        if kernel.registry.with(path, |a| a.is_some()) {
            return Ok(kernel.deliver_here(path, incarnation, envelope));
        }
        let node = match self.whose(path) {
            Whose::Qualified { node, local } if node == self.me => {
                return Ok(kernel.deliver_here(local, incarnation, envelope));
            }
            Whose::Qualified { node, .. } => node.to_owned(),
            Whose::Entity(node) if node == self.me => {
                return self.entity(kernel, path, incarnation, envelope);
            }
            Whose::Node(_) if self.proxies.node_of(path).is_none() => {
                // By the claim: queued under the routes' lock, so a fence this node sends when
                // the claim changes (a move) follows it.
                return self.routes.with_owner(path, |owner| match owner {
                    Some(node) if node != self.me => {
                        Ok(self.forward(kernel, node, path, incarnation, envelope))
                    }
                    _ => Err(envelope),
                });
            }
            Whose::Entity(node) | Whose::Node(node) if node != self.me => node,
            _ => return Err(envelope),
        };
        Ok(self.forward(kernel, &node, path, incarnation, envelope))
    }

    fn watch(&self, watcher: &Address, target: &Address) -> bool {
        let Some(node) = self.owner(target.path.as_str()) else {
            return false;
        };
        if !self.members.is_live(&node) {
            return false;
        }
        self.watches.add(&node, watcher, target);
        let frame = Frame::Watch {
            watcher: wire::address(watcher, &self.me),
            target: wire::address(target, &self.me),
        };
        if !self.send(&node, frame) {
            self.watches.remove(watcher, target);
            return false;
        }
        true
    }

    fn unwatch(&self, watcher: &Address, target: &Address) {
        if !self.watches.remove(watcher, target) {
            return;
        }
        if let Some(node) = self.owner(target.path.as_str()) {
            self.send(
                &node,
                Frame::Unwatch {
                    watcher: wire::address(watcher, &self.me),
                    target: wire::address(target, &self.me),
                },
            );
        }
    }

    fn released(&self, actor: &Address) {
        let path = actor.path.as_str();
        let Some(kernel) = self.kernel.upgrade() else {
            return;
        };
        // A new activation that took the path meanwhile keeps the lease.
        if kernel.registry.with(path, |a| a.is_some()) {
            return;
        }
        if let Some(revision) = self.leases.release(path) {
            let kv = self.leases_kv.clone();
            let key = routes::key(path);
            kernel.runtime.spawn(async move {
                if let Err(e) = kv.delete_expect_revision(key, Some(revision)).await {
                    tracing::debug!(error = %e, "an entity lease was not released");
                }
            });
        }
    }

    fn backlog(&self, path: &str) -> Vec<Envelope> {
        let mut waiting = self.moves.backlog(path);
        waiting.extend(
            self.leases
                .backlog(path)
                .into_iter()
                .map(|(_, envelope)| envelope),
        );
        waiting
    }

    fn publish(&self, topic: &str, envelope: &Envelope) -> u32 {
        let nodes = self.members.subscribed(topic);
        self.fan_out(nodes, envelope, |msg| Frame::Publish {
            topic: topic.to_owned(),
            msg,
        })
    }

    fn reach(&self, topic: Option<&str>, group: Option<&str>) -> u32 {
        let topics = topic.map_or(0, |t| {
            self.members.subscribed(t).iter().map(|(_, n)| n).sum()
        });
        let groups: u32 = group.map_or(0, |g| {
            self.members.in_group(g).iter().map(|(_, n, _)| n).sum()
        });
        topics + groups
    }

    fn broadcast_group(&self, group: &str, envelope: &Envelope) -> u32 {
        let nodes = (self.members.in_group(group).into_iter())
            .map(|(node, count, _)| (node, count))
            .collect();
        self.fan_out(nodes, envelope, |msg| Frame::BroadcastGroup {
            group: group.to_owned(),
            msg,
        })
    }

    fn tell_group(
        &self,
        group: &str,
        local: Option<usize>,
        envelope: Envelope,
    ) -> Result<(), Envelope> {
        let best = self
            .members
            .in_group(group)
            .into_iter()
            .min_by_key(|(_, _, shortest)| *shortest);
        let Some((node, _, shortest)) = best else {
            return Err(envelope);
        };
        if local.is_some_and(|l| l as u64 <= shortest) {
            return Err(envelope);
        }
        let msg = wire::msg(&envelope, &self.me);
        if !self.send(
            &node,
            Frame::TellGroup {
                group: group.to_owned(),
                msg,
            },
        ) {
            return Err(envelope);
        }
        // Until its next beat, count what this node sent there.
        self.members.queued(&node, group);
        Ok(())
    }
}

impl Cluster {
    /// Sends `envelope` to each of `nodes` in the frame `frame` makes; how many members the
    /// nodes it went to count.
    fn fan_out(
        &self,
        nodes: Vec<(String, u32)>,
        envelope: &Envelope,
        frame: impl Fn(wire::Msg) -> Frame,
    ) -> u32 {
        let mut reached = 0;
        for (node, count) in nodes {
            if self.send(&node, frame(wire::msg(envelope, &self.me))) {
                reached += count;
            }
        }
        reached
    }
}
