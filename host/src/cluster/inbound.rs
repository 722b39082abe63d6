//! What a node does with what other nodes send it: deliveries (an entity's under its lease),
//! watches, publishes and group sends, signals between a parent and a child on two nodes, and
//! spawns of children asked for by their parent's node.
//!
//! Invariants: a frame is delivered here or dead-lettered here, never routed onwards (but for
//! an entity whose lease another node holds, or an actor that moved away from here: one hop,
//! to that node); an address that does not parse is counted as malformed and dropped.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::node::Cluster;
use super::proxy::End;
use super::wire::{self, Frame, Signal};
use crate::actor::mailbox::{SystemMsg, UserMsg};
use crate::address::{ActorPath, Address};
use crate::kernel::deadletters::DeadLetterReason;
use crate::kernel::spawn::{Limits, SpawnRequest};
use crate::kernel::{Kernel, TERMINATED_KIND};

impl Cluster {
    /// Handles one frame from the node `from`.
    pub(super) fn inbound(&self, kernel: &Arc<Kernel>, from: &str, frame: Frame) {
        let me = self.me.as_str();
        match frame {
            Frame::Deliver {
                path,
                incarnation,
                msg,
            } => self.deliver(kernel, from, &path, incarnation, msg, None),
            Frame::DeliverDurable {
                path,
                incarnation,
                msg,
                receipt,
            } => self.deliver(kernel, from, &path, incarnation, msg, Some(&receipt)),
            Frame::Adopt {
                path,
                incarnation,
                image,
                limits,
            } => self.adopt(kernel, from, path, incarnation, image, limits),
            Frame::Adopted { path, refused } => self.adopted(&path, refused),
            Frame::MoveAborted { path } => self.move_aborted(kernel, &path),
            Frame::Fence { path } => self.fence(kernel, from, &path),
            Frame::Fenced { path, node } => self.fenced(&path, &node),
            Frame::MoveSettled { path } => self.move_settled(&path),
            Frame::Watch { watcher, target } => {
                let (Some(watcher), Some(target)) = (
                    wire::parse_address(&watcher, me),
                    wire::parse_address(&target, me),
                ) else {
                    self.malformed.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                if !kernel.watch_local(&watcher, &target) {
                    kernel.notify_terminated(&watcher, &target);
                }
            }
            Frame::Unwatch { watcher, target } => {
                if let (Some(watcher), Some(target)) = (
                    wire::parse_address(&watcher, me),
                    wire::parse_address(&target, me),
                ) {
                    kernel.unwatch(&watcher, &target);
                }
            }
            Frame::Publish { topic, msg } => {
                if let Some(envelope) = wire::envelope(msg, me) {
                    self.caps.messaging.publish_here(kernel, &topic, &envelope);
                }
            }
            Frame::BroadcastGroup { group, msg } => {
                if let Some(envelope) = wire::envelope(msg, me) {
                    self.caps
                        .messaging
                        .broadcast_group_here(kernel, &group, &envelope);
                }
            }
            Frame::Spawn(spawn) => self.spawn_for(kernel, spawn),
            Frame::Signal { to, signal } => self.signalled(kernel, to, signal),
            Frame::TellGroup { group, msg } => {
                if let Some(envelope) = wire::envelope(msg, me)
                    && !self
                        .caps
                        .messaging
                        .tell_group_here(kernel, &group, envelope.clone())
                {
                    kernel.dead_letter(
                        envelope,
                        format!("group {group}"),
                        DeadLetterReason::NoActor,
                    );
                }
            }
        }
    }

    /// Delivers a message from another node; `receipt`: a durable message's token, which this
    /// node's store takes over.
    fn deliver(
        &self,
        kernel: &Arc<Kernel>,
        from: &str,
        path: &str,
        incarnation: Option<u64>,
        msg: wire::Msg,
        receipt: Option<&[u8]>,
    ) {
        let me = self.me.as_str();
        let Some(mut envelope) = wire::envelope(msg, me) else {
            self.malformed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        envelope.receipt = receipt.and_then(|token| kernel.import_receipt(token));
        let path = wire::localize(path, me);
        if envelope.kind == TERMINATED_KIND
            && let (Some(target), Ok(watcher)) =
                (&envelope.sender, crate::address::ActorPath::parse(path))
        {
            let watcher = Address {
                path: watcher,
                incarnation: incarnation.unwrap_or(0),
            };
            self.watches.remove(&watcher, target);
        }
        // An actor on its way here takes it once it arrives; one that left goes on (one hop).
        let envelope = match self.moves.hold(path, from, envelope) {
            Ok(()) => return,
            Err(envelope) => envelope,
        };
        if let Some(to) = self.moves.departed(path)
            && !kernel.registry.with(path, |a| a.is_some())
        {
            if let Some(u) = self.forward(kernel, &to, path, incarnation, envelope) {
                kernel.dead_letter(u.envelope, u.target, u.reason);
            }
            return;
        }
        // An entity with no live activation here waits for its lease; anything else is
        // delivered (the kind check first: it spares the registry's lock).
        if self.caps.persistence.entities.is_entity(path)
            && !kernel.registry.with(path, |a| a.is_some())
        {
            match self.entity(kernel, path, incarnation, envelope) {
                Ok(None) => {}
                Ok(Some(u)) => kernel.dead_letter(u.envelope, u.target, u.reason),
                Err(envelope) => kernel.deliver_inbound(path, incarnation, envelope),
            }
            return;
        }
        kernel.deliver_inbound(path, incarnation, envelope);
    }

    /// A signal from another node for `to`, an actor here (a parent, or a child).
    pub(super) fn signalled(&self, kernel: &Arc<Kernel>, to: (String, u64), signal: Signal) {
        let me = self.me.as_str();
        let Some(to) = wire::parse_address(&to, me) else {
            self.malformed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let msg = match signal {
            Signal::Stop(reason) => SystemMsg::Stop(reason),
            Signal::PoisonPill => {
                kernel.registry.with(to.path.as_str(), |a| {
                    if let Some(a) = a.filter(|a| a.address.incarnation == to.incarnation) {
                        let _ = a.user.send(UserMsg::PoisonPill);
                    }
                });
                return;
            }
            Signal::Directive {
                directive,
                delay_ms,
                cause,
            } => SystemMsg::Directive {
                directive,
                delay: Duration::from_millis(delay_ms),
                cause,
            },
            Signal::Failed { child, kind, error } => match wire::parse_address(&child, me) {
                Some(child) => SystemMsg::Failed { child, kind, error },
                None => return,
            },
            Signal::ChildTerminated(child) => match wire::parse_address(&child, me) {
                Some(child) => {
                    if self.proxies.end(&child, End::Terminated) {
                        // Its stand-in's task ends in its own time; the path is free now,
                        // before the parent hears.
                        kernel.registry.remove(&child);
                    }
                    SystemMsg::ChildTerminated(child)
                }
                None => return,
            },
        };
        kernel.registry.with(to.path.as_str(), |a| {
            if let Some(a) = a.filter(|a| a.address.incarnation == to.incarnation) {
                a.signal(msg);
            }
        });
    }

    /// Spawns here the child an actor of `from` asked for.
    fn spawn_for(&self, kernel: &Arc<Kernel>, frame: wire::Spawn) {
        let wire::Spawn {
            parent,
            path,
            incarnation,
            module,
            init,
            limits,
        } = frame;
        let (Some(parent), Ok(path)) = (
            wire::parse_address(&parent, &self.me),
            ActorPath::parse(&path),
        ) else {
            self.malformed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let child = Address {
            path: path.clone(),
            incarnation,
        };
        let options = limits.options(&kernel.config);
        let request = SpawnRequest {
            path,
            module,
            init,
            parent: Some(parent.clone()),
            limits: Limits::of(&kernel.config, &options),
            passivate_after: None,
            hibernate_after: None,
            reservation: None,
            incarnation: Some(incarnation),
            restore: crate::kernel::spawn::Restore::No,
        };
        match kernel.spawn(request) {
            Ok(spawned) => spawned.task.start(),
            Err(e) => {
                tracing::warn!(child = %child, parent = %parent, error = %e, "a child asked for by another node could not start");
                kernel.child_terminated(Some(&parent), &child);
            }
        }
    }
}
