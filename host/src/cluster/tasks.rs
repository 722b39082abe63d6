//! The tasks of a node in its cluster: the link that publishes frames, the receiver of frames,
//! the heart that beats and the ear that hears the others, the answerer of requests, the
//! follower of claims, and the taking of an entity's lease.
//!
//! Invariants:
//! - One task publishes every frame and one task handles every received batch, each in queue
//!   order: that is the per-pair FIFO of the cluster.
//! - A task ends when the kernel it serves is gone.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use async_nats::jetstream::kv;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::members::Change;
use super::node::{CLUSTER_TOPIC, Cluster, NODE_UP_KIND, Outgoing};
use super::routes;
use super::wire::{self, Frame, Heartbeat};
use crate::message::StopReason;

/// Publishes queued frames, batched per node, in queue order.
pub(super) async fn link(cluster: Arc<Cluster>, mut outbox: mpsc::Receiver<Outgoing>) {
    const BATCH: usize = 512;
    let mut queued = Vec::with_capacity(BATCH);
    let mut batches: Vec<(String, Vec<Frame>)> = Vec::new();
    while outbox.recv_many(&mut queued, BATCH).await > 0 {
        for outgoing in queued.drain(..) {
            match outgoing {
                Outgoing::Frame(node, frame) => {
                    match batches.iter_mut().find(|(n, _)| *n == node) {
                        Some((_, frames)) => frames.push(frame),
                        None => batches.push((node, vec![frame])),
                    }
                }
                Outgoing::Flushed(answer) => {
                    publish(&cluster, &mut batches).await;
                    let _ = answer.send(());
                }
            }
        }
        publish(&cluster, &mut batches).await;
    }
}

/// Publishes each node's batch, one NATS message per node.
async fn publish(cluster: &Cluster, batches: &mut Vec<(String, Vec<Frame>)>) {
    for (node, frames) in batches.drain(..) {
        let count = frames.len() as u64;
        let payload = wire::encode(&frames);
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(wire::FROM_HEADER, cluster.me.as_str());
        match cluster
            .client
            .publish_with_headers(cluster.names.to(&node), headers, payload.into())
            .await
        {
            Ok(()) => {
                cluster.sent.fetch_add(count, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(node, frames = count, error = %e, "frames for a node were not sent")
            }
        }
    }
}

/// Handles the batches other nodes send this one, in arrival order.
pub(super) async fn receive(cluster: Arc<Cluster>, mut inbox: async_nats::Subscriber) {
    while let Some(message) = inbox.next().await {
        let Some(kernel) = cluster.kernel.upgrade() else {
            return;
        };
        // The node that sent the batch (one link per pair: what it sent, in order).
        let from = message
            .headers
            .as_ref()
            .and_then(|h| h.get(wire::FROM_HEADER))
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default();
        match wire::decode::<Vec<Frame>>(&message.payload) {
            Ok(frames) => {
                cluster
                    .received
                    .fetch_add(frames.len() as u64, Ordering::Relaxed);
                for frame in frames {
                    cluster.inbound(&kernel, &from, frame);
                }
            }
            Err(e) => {
                cluster.malformed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "a batch from another node was dropped");
            }
        }
    }
}

/// Hears the other nodes' heartbeats.
pub(super) async fn hear(cluster: Arc<Cluster>, mut beats: async_nats::Subscriber) {
    while let Some(message) = beats.next().await {
        let Some(kernel) = cluster.kernel.upgrade() else {
            return;
        };
        let Ok(beat) = wire::decode::<Heartbeat>(&message.payload) else {
            cluster.malformed.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        if beat.node == cluster.me {
            if beat.session != cluster.session && !beat.leaving {
                tracing::error!(node = %cluster.me, "another live node has this node's name");
            }
            continue;
        }
        let node = beat.node.clone();
        match cluster.members.heard(beat, Instant::now()) {
            Change::None => {}
            Change::Up => {
                tracing::info!(node, "a node joined the cluster");
                cluster.announce(&kernel, CLUSTER_TOPIC, NODE_UP_KIND, &node);
            }
            Change::Down => cluster.node_down(&node, &kernel),
            Change::Restarted => {
                cluster.node_down(&node, &kernel);
                cluster.announce(&kernel, CLUSTER_TOPIC, NODE_UP_KIND, &node);
            }
        }
    }
}

/// Beats this node's heart, and finds nodes that went silent.
pub(super) async fn beat(cluster: Arc<Cluster>) {
    let mut tick = tokio::time::interval(cluster.config.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(kernel) = cluster.kernel.upgrade() else {
            return;
        };
        cluster.send_beat(false).await;
        for node in cluster
            .members
            .expire(cluster.config.failure_timeout, Instant::now())
        {
            cluster.node_down(&node, &kernel);
        }
    }
}

/// Checks, once per failure timeout, that the leases this node holds are still its own: a
/// node that was taken for down (a pause, a partition) and whose entity moved meanwhile stops
/// its activation instead of running beside the new one.
pub(super) async fn check_leases(cluster: Arc<Cluster>) {
    let mut tick = tokio::time::interval(cluster.config.failure_timeout);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(kernel) = cluster.kernel.upgrade() else {
            return;
        };
        for (path, revision) in cluster.leases.held() {
            let entry = match cluster.leases_kv.entry(routes::key(&path)).await {
                Ok(entry) => entry,
                // The store cannot say: keep what is held, ask again next time.
                Err(_) => continue,
            };
            let ours = entry.is_some_and(|e| {
                e.revision == revision
                    && e.operation == kv::Operation::Put
                    && e.value.as_ref() == cluster.me.as_bytes()
            });
            if !ours && cluster.leases.lost(&path, revision) {
                tracing::warn!(
                    path,
                    "an entity lease moved to another node; its activation here stops"
                );
                kernel.stop(&path, StopReason::Normal);
            }
        }
    }
}

/// Answers requests to this node: its tree.
pub(super) async fn answer(cluster: Arc<Cluster>, mut requests: async_nats::Subscriber) {
    while let Some(request) = requests.next().await {
        let Some(kernel) = cluster.kernel.upgrade() else {
            return;
        };
        let Some(reply) = request.reply else { continue };
        let tree = wire::encode(&cluster.tree(&kernel));
        let _ = cluster.client.publish(reply, tree.into()).await;
    }
}

/// Follows changes of the claims.
pub(super) async fn follow_claims(cluster: Arc<Cluster>, mut claims: kv::Watch) {
    while let Some(Ok(entry)) = claims.next().await {
        let Some(name) = routes::name(&entry.key) else {
            continue;
        };
        let node = (entry.operation == kv::Operation::Put)
            .then(|| String::from_utf8_lossy(&entry.value).into_owned());
        // A name that changed hands between live nodes (a move): the old owner gets this
        // node's fence after everything this node routed to it.
        let path = format!("/user/{name}");
        let new = node.clone();
        cluster.routes.change(name, node, |old| {
            if let (Some(old), Some(new)) = (old, new.as_deref())
                && old != new
                && old != cluster.me
                && cluster.members.is_live(old)
            {
                cluster.send(old, Frame::Fence { path });
            }
        });
    }
}
