//! A cluster of hosts on NATS: one address space over several nodes. A node joins with a unique
//! name, beats its heart on a subject every node hears, and sends what other nodes own over
//! NATS in per-node batches; JetStream key-value holds the claims on top-level names and the
//! entity leases.
//!
//! ```text
//! mote.<cluster>.hb            heartbeats (and clean leaves) of every node, with its topics and groups
//! mote.<cluster>.to.<node>     batches of frames for one node: one subject, one connection each way
//! mote.<cluster>.ctl.<node>    requests to a node (its tree), answered on the reply subject
//! mote.<cluster>.upgrade.<node> upgrade requests to a node, answered as it works ([`upgrades`])
//! KV mote-<cluster>-paths      top-level name -> node
//! KV mote-<cluster>-leases     entity path -> node holding its activation
//! KV mote-<cluster>-versions   module name and version -> content hash ([`modules`])
//! objects mote-<cluster>-modules  content hash -> a module's bytes
//! objects mote-<cluster>-images   the image of an actor on its way to another node ([`moves`])
//! KV mote-<cluster>-moves      image key -> the record of a move under way ([`moves`])
//! ```
//!
//! Invariants:
//! - Per sender and receiver, order is kept: a node publishes every frame for a node from one
//!   task, on one connection, to one subject, which the receiver reads from one task.
//! - Nothing here blocks a sender: a frame is queued (bounded) or refused as `Unreachable`.
//! - A watcher of an actor on another node hears exactly once that it terminated: from the
//!   actor's node, or, if that node goes down first, from its own node ([`watches`]).
//! - Every subject and bucket is under the cluster's name; a guest has no import that reaches
//!   NATS: only the host's own delivery does.
//! - Cross-node delivery of a durable message is exactly once when the persistence store
//!   hands receipts on (JetStream: its receipt crosses in a `DeliverDurable` frame and is
//!   acknowledged where it is consumed; a lost frame leaves it pending at its sender). With the
//!   local store it is at most once: its receipt is settled when it is handed to NATS.

mod config;
mod faults;
mod inbound;
mod leases;
mod members;
pub(crate) mod modules;
mod moves;
mod moving;
mod node;
mod outside;
mod proxy;
mod remote;
mod routes;
mod tasks;
pub(crate) mod upgrades;
mod watches;
pub(crate) mod wire;

use std::sync::Arc;

pub use self::config::{ClusterConfig, ClusterError};
pub(crate) use self::config::{connect_nats, is_name};
pub use self::moves::MoveError;
pub(crate) use self::node::Cluster;
use self::node::Opened;
pub use self::node::{CLUSTER_TOPIC, ClusterStats, NODE_DOWN_KIND, NODE_UP_KIND};
pub use self::outside::{RemoteActor, cluster_tree};
use self::tasks::{answer, beat, check_leases, follow_claims, hear, link, receive};
use crate::caps::Caps;
use crate::kernel::Kernel;

/// Joins the cluster as `config.node` and starts the tasks that serve this node in it.
pub(crate) async fn join(
    kernel: &Arc<Kernel>,
    caps: Arc<Caps>,
    config: ClusterConfig,
) -> Result<Arc<Cluster>, ClusterError> {
    let (cluster, opened) = Cluster::open(kernel, caps, config).await?;
    let Opened {
        outbox,
        beats,
        inbox,
        control,
        claims,
    } = opened;
    let runtime = &kernel.runtime;
    let tasks = vec![
        runtime.spawn(link(cluster.clone(), outbox)).abort_handle(),
        runtime
            .spawn(receive(cluster.clone(), inbox))
            .abort_handle(),
        runtime.spawn(hear(cluster.clone(), beats)).abort_handle(),
        runtime.spawn(beat(cluster.clone())).abort_handle(),
        runtime.spawn(check_leases(cluster.clone())).abort_handle(),
        runtime
            .spawn(answer(cluster.clone(), control))
            .abort_handle(),
        runtime
            .spawn(follow_claims(cluster.clone(), claims))
            .abort_handle(),
    ];
    cluster.started(kernel, tasks).await?;
    Ok(cluster)
}
