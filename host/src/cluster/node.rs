//! This node of a cluster: its membership, its routes and leases, the stand-ins of its
//! children elsewhere, and what it does for the kernel (the `Remote` side of delivery).
//!
//! Invariants: see the cluster's module (`super`); each holds here.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use async_nats::jetstream::{kv, object_store};
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};

use super::config::{ClusterConfig, ClusterError};
use super::config::{Names, bucket, check_name, connect};
use super::faults::Faults;
use super::leases::{Admit, Leases};
use super::members::{self, Members};
use super::moves::Moves;
use super::outside::RemoteActor;
use super::proxy::{self, Proxies};
use super::routes::{self, Routes};
use super::watches::Watches;
use super::wire::{self, Signal};
use super::wire::{Frame, Heartbeat};
use crate::actor::mailbox::UserMsg;
use crate::address::Address;
use crate::caps::Caps;
use crate::caps::persistence::entities;
use crate::kernel::deadletters::DeadLetterReason;
use crate::kernel::{Kernel, Undelivered};
use crate::message::Envelope;

/// The topic on which a node's actors hear of other nodes coming and going.
pub const CLUSTER_TOPIC: &str = "/system/cluster";
/// The kind of the message to [`CLUSTER_TOPIC`] when a node is up; its body is the node name.
pub const NODE_UP_KIND: &str = "mote.node-up";
/// The kind of the message to [`CLUSTER_TOPIC`] when a node is down; its body is the node name.
pub const NODE_DOWN_KIND: &str = "mote.node-down";

/// Figures of this node's part in the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterStats {
    /// Other live nodes.
    pub nodes: usize,
    /// Frames sent to other nodes.
    pub frames_sent: u64,
    /// Frames received from other nodes.
    pub frames_received: u64,
    /// Batches from other nodes that did not decode.
    pub malformed: u64,
    /// Watches of actors on other nodes.
    pub remote_watches: usize,
    /// Entity leases this node holds.
    pub leases: usize,
    /// Module versions this node stored in the cluster.
    pub modules_shared: u64,
    /// Module versions this node deployed from the cluster.
    pub modules_fetched: u64,
    /// Module versions that failed to go from the cluster to this node or back (logged).
    pub modules_refused: u64,
}

/// Which node a path belongs to (see [`Cluster::whose`]).
pub(super) enum Whose<'p> {
    /// Written for `node`, where it is `local`.
    Qualified { node: &'p str, local: &'p str },
    /// An entity placed on this node.
    Entity(String),
    /// A path of this node (a claim, or a stand-in's child).
    Node(String),
    /// No node's in particular: this node's own, if anyone's.
    Nobody,
}

/// What the link publishes, in queue order.
pub(super) enum Outgoing {
    /// A frame for a node.
    Frame(String, Frame),
    /// Answered once everything queued before it is published.
    Flushed(oneshot::Sender<()>),
}

/// The subscriptions and queue of a node whose tasks are about to start.
pub(super) struct Opened {
    pub(super) outbox: mpsc::Receiver<Outgoing>,
    pub(super) beats: async_nats::Subscriber,
    pub(super) inbox: async_nats::Subscriber,
    pub(super) control: async_nats::Subscriber,
    pub(super) claims: kv::Watch,
}

/// This node's membership of a cluster.
pub(crate) struct Cluster {
    pub(super) me: String,
    pub(super) session: u64,
    pub(super) config: ClusterConfig,
    pub(super) names: Names,
    pub(super) client: async_nats::Client,
    pub(super) paths: kv::Store,
    /// Node names taken in the cluster.
    pub(super) nodes: kv::Store,
    pub(super) leases_kv: kv::Store,
    pub(super) members: Members,
    pub(super) routes: Routes,
    pub(super) watches: Watches,
    pub(super) leases: Leases,
    /// Stand-ins of children spawned on other nodes.
    pub(super) proxies: Proxies,
    /// Actors moving out of and into this node.
    pub(super) moves: Moves,
    /// Images of actors on their way to another node.
    pub(super) images: object_store::ObjectStore,
    /// The records of moves under way (see `moves`).
    pub(super) moves_kv: kv::Store,
    /// Fault points armed for crash tests (`MOTE_FAULT`).
    pub(super) faults: Faults,
    pub(super) out: mpsc::Sender<Outgoing>,
    pub(super) kernel: Weak<Kernel>,
    /// This cluster itself, for the tasks it starts.
    pub(super) this: Weak<Cluster>,
    pub(super) caps: Arc<Caps>,
    pub(super) tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    pub(super) left: AtomicBool,
    pub(super) sent: AtomicU64,
    pub(super) received: AtomicU64,
    pub(super) malformed: AtomicU64,
}

impl Cluster {
    /// Connects as `config.node`: refuses a name a live node has, hears the others for one
    /// heartbeat (so that its first sends know the members) and reads the claims. The tasks
    /// that serve the node are not started yet: see [`super::join`].
    pub(super) async fn open(
        kernel: &Arc<Kernel>,
        caps: Arc<Caps>,
        config: ClusterConfig,
    ) -> Result<(Arc<Cluster>, Opened), ClusterError> {
        check_name("node", &config.node)?;
        check_name("cluster", &config.name)?;
        if kernel.remote().is_some() {
            return Err(ClusterError::AlreadyJoined);
        }
        let names = Names::new(&config.name);
        let client = connect(&config, format!("mote-{}", config.node)).await?;
        let js = async_nats::jetstream::new(client.clone());
        let paths = bucket(&js, names.bucket("paths")).await?;
        let leases_kv = bucket(&js, names.bucket("leases")).await?;
        let images_name = names.bucket("images");
        let images = match js.get_object_store(&images_name).await {
            Ok(store) => store,
            Err(_) => js
                .create_object_store(object_store::Config {
                    bucket: images_name,
                    description: Some("Mote: images of actors moving between nodes".to_owned()),
                    ..Default::default()
                })
                .await
                .map_err(|e| ClusterError::jetstream("opening the image store", e))?,
        };
        let moves_kv = bucket(&js, names.bucket("moves")).await?;
        let session = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let mut beats = client
            .subscribe(names.heartbeats())
            .await
            .map_err(|e| ClusterError::jetstream("subscribing to heartbeats", e))?;
        // Hear the cluster for a little more than one beat: a live node with our name would
        // have spoken, and every live node is known before the first send.
        let members = Members::default();
        members
            .listen(&mut beats, config.heartbeat, Some(&config.node))
            .await?;
        // The name is taken in key-value by create, so two nodes starting under one name at
        // once cannot both pass. A key left by a node that died is taken over once a second
        // listen hears nobody beat under the name.
        let nodes = bucket(&js, names.bucket("nodes")).await?;
        let me = config.node.as_str();
        match nodes.create(me, session.to_string().into()).await {
            Ok(_) => {}
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                let revision = nodes
                    .entry(me)
                    .await
                    .map_err(|e| ClusterError::jetstream("reading a node name", e))?
                    .map_or(0, |e| e.revision);
                members
                    .listen(&mut beats, config.heartbeat, Some(&config.node))
                    .await?;
                if nodes
                    .update(me, session.to_string().into(), revision)
                    .await
                    .is_err()
                {
                    return Err(ClusterError::NameTaken(config.node.clone()));
                }
            }
            Err(e) => return Err(ClusterError::jetstream("taking the node name", e)),
        }
        let (out, outbox) = mpsc::channel(config.link_capacity.max(1));
        let cluster = Arc::new_cyclic(|this| Cluster {
            this: this.clone(),
            me: config.node.clone(),
            session,
            names,
            client,
            paths,
            nodes,
            leases_kv,
            members,
            routes: Routes::default(),
            watches: Watches::default(),
            leases: Leases::default(),
            proxies: Proxies::default(),
            moves: Moves::default(),
            images,
            moves_kv,
            faults: Faults::from_env(),
            out,
            kernel: Arc::downgrade(kernel),
            caps,
            tasks: Mutex::new(Vec::new()),
            left: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            config,
        });
        cluster.load_claims().await?;
        let inbox = cluster
            .client
            .subscribe(cluster.names.to(&cluster.me))
            .await
            .map_err(|e| ClusterError::jetstream("subscribing to this node's subject", e))?;
        let control = cluster
            .client
            .subscribe(cluster.names.control(&cluster.me))
            .await
            .map_err(|e| ClusterError::jetstream("subscribing to requests", e))?;
        let claims = cluster
            .paths
            .watch_all()
            .await
            .map_err(|e| ClusterError::jetstream("watching claims", e))?;
        Ok((
            cluster,
            Opened {
                outbox,
                beats,
                inbox,
                control,
                claims,
            },
        ))
    }

    /// Finishes joining once the tasks run: a range of incarnations, a first beat, and the
    /// kernel's delivery through this cluster.
    pub(super) async fn started(
        self: &Arc<Self>,
        kernel: &Arc<Kernel>,
        tasks: Vec<tokio::task::AbortHandle>,
    ) -> Result<(), ClusterError> {
        let cluster = self;
        *cluster.tasks.lock().unwrap_or_else(|p| p.into_inner()) = tasks;
        // Incarnations from a range of this node's own (random, 2^40 wide): an incarnation
        // chosen here for a child spawned elsewhere names one actor on every node.
        let base = (members::score(&cluster.me, &cluster.session.to_string()) >> 24) << 40;
        kernel.reseed_incarnations(base.max(1));
        cluster.send_beat(false).await;
        if !kernel.join(cluster.clone()) {
            cluster.stop_tasks();
            return Err(ClusterError::AlreadyJoined);
        }
        // Moves cut off by this node's last run (or by nodes that died meanwhile) finish
        // before anything is spawned here.
        cluster.recover_moves(None).await;
        tracing::info!(node = %cluster.me, cluster = %cluster.config.name, members = ?cluster.members.names(), "joined the cluster");
        Ok(())
    }

    /// The kernel this node serves, while it lives.
    pub(super) fn kernel(&self) -> Option<Arc<Kernel>> {
        self.kernel.upgrade()
    }

    /// A local watcher watches `child`, which runs on `node` behind a stand-in here.
    pub(super) fn watch_through(&self, node: &str, watcher: &Address, child: &Address) {
        self.watches.add(node, watcher, child);
        let frame = Frame::Watch {
            watcher: wire::address(watcher, &self.me),
            target: wire::address(child, &self.me),
        };
        if !self.send(node, frame) {
            self.watches.remove(watcher, child);
            if let Some(kernel) = self.kernel() {
                kernel.notify_terminated(watcher, child);
            }
        }
    }

    /// A local watcher no longer watches `child` on `node`.
    pub(super) fn unwatch_through(&self, node: &str, watcher: &Address, child: &Address) {
        if self.watches.remove(watcher, child) {
            let frame = Frame::Unwatch {
                watcher: wire::address(watcher, &self.me),
                target: wire::address(child, &self.me),
            };
            self.send(node, frame);
        }
    }

    /// Forwards what a stand-in got to its child on `node`.
    pub(super) fn forward_user(&self, node: &str, child: &Address, msg: UserMsg) {
        let frame = self.user_frame(child, msg);
        self.send(node, frame);
    }

    /// Queues `frame` for `node`, waiting while the link is full; false if it is closed.
    pub(super) async fn send_waiting(&self, node: &str, frame: Frame) -> bool {
        self.out
            .send(Outgoing::Frame(node.to_owned(), frame))
            .await
            .is_ok()
    }

    /// The frame that takes a user message (or poison pill) to `child` on another node.
    pub(super) fn user_frame(&self, child: &Address, msg: UserMsg) -> Frame {
        match msg {
            UserMsg::Message(mut envelope) => match self.kernel() {
                Some(kernel) => {
                    let path = child.path.to_string();
                    let frame = deliver_frame(
                        &kernel,
                        path,
                        Some(child.incarnation),
                        &mut envelope,
                        &self.me,
                    );
                    kernel.settle(envelope.receipt.take());
                    frame
                }
                None => Frame::Deliver {
                    path: child.path.to_string(),
                    incarnation: Some(child.incarnation),
                    msg: wire::msg(&envelope, &self.me),
                },
            },
            UserMsg::PoisonPill => Frame::Signal {
                to: wire::address(child, &self.me),
                signal: Signal::PoisonPill,
            },
        }
    }

    /// This node's name.
    pub(crate) fn node(&self) -> &str {
        &self.me
    }

    /// The live nodes, this one included, by name.
    pub(crate) fn nodes(&self) -> Vec<String> {
        let mut nodes = self.members.names();
        nodes.push(self.me.clone());
        nodes.sort();
        nodes
    }

    /// This node's figures.
    pub(crate) fn stats(&self) -> ClusterStats {
        ClusterStats {
            nodes: self.members.names().len(),
            frames_sent: self.sent.load(Ordering::Relaxed),
            frames_received: self.received.load(Ordering::Relaxed),
            malformed: self.malformed.load(Ordering::Relaxed),
            remote_watches: self.watches.len(),
            leases: self.leases.held().len(),
            ..ClusterStats::default()
        }
    }

    /// Registers this node's cluster series (under `mote_cluster_`).
    pub(crate) fn metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        let stats = self.stats();
        let gauge = |n: usize| ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX));
        registry.register(
            "nodes",
            "Other live nodes of the cluster",
            gauge(stats.nodes),
        );
        registry.register(
            "frames_sent",
            "Frames (messages, watches, signals) sent to other nodes",
            ConstCounter::new(stats.frames_sent),
        );
        registry.register(
            "frames_received",
            "Frames received from other nodes",
            ConstCounter::new(stats.frames_received),
        );
        registry.register(
            "malformed",
            "Batches and frames from other nodes that did not decode",
            ConstCounter::new(stats.malformed),
        );
        registry.register(
            "remote_watches",
            "Watches of actors on other nodes",
            gauge(stats.remote_watches),
        );
        registry.register(
            "leases",
            "Entity leases this node holds",
            gauge(stats.leases),
        );
        registry.register(
            "link_queued",
            "Frames queued for other nodes, not yet published",
            gauge(self.out.max_capacity() - self.out.capacity()),
        );
    }

    /// Claims the top-level name of `path` for this node: refused if a live node has it.
    pub(crate) async fn claim(&self, path: &str) -> Result<(), ClusterError> {
        self.claim_over(path, &[]).await
    }

    /// Claims the top-level name of `path` for this node, over a live holder too if it is one
    /// of `yielding` (the two sides of a move whose record says who runs the actor).
    pub(super) async fn claim_over(
        &self,
        path: &str,
        yielding: &[&str],
    ) -> Result<(), ClusterError> {
        let Some(name) = routes::top_level(path) else {
            return Ok(());
        };
        let key = routes::key(name);
        for _ in 0..4 {
            match self.paths.create(&key, self.me.clone().into()).await {
                Ok(_) => {
                    self.routes.set(name.to_owned(), Some(self.me.clone()));
                    return Ok(());
                }
                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
                Err(e) => return Err(ClusterError::jetstream("claiming a name", e)),
            }
            let entry = self
                .paths
                .entry(key.clone())
                .await
                .map_err(|e| ClusterError::jetstream("reading a claim", e))?;
            let Some(entry) = entry else { continue };
            let holder = String::from_utf8_lossy(&entry.value).into_owned();
            let free = entry.operation != kv::Operation::Put
                || holder == self.me
                || yielding.contains(&holder.as_str())
                || !self.members.is_live(&holder);
            if !free {
                return Err(ClusterError::Claimed {
                    path: path.to_owned(),
                    node: holder,
                });
            }
            if self
                .paths
                .update(&key, self.me.clone().into(), entry.revision)
                .await
                .is_ok()
            {
                self.routes.set(name.to_owned(), Some(self.me.clone()));
                return Ok(());
            }
        }
        Err(ClusterError::jetstream(
            "claiming a name",
            "the claim kept changing under this node",
        ))
    }

    /// Claims the top-level name of an actor spawned here without [`Cluster::claim`]: other
    /// nodes learn where it lives; a conflict (another node spawned it meanwhile) is logged.
    pub(crate) fn claim_in_background(&self, kernel: &Kernel, path: &str) {
        if routes::top_level(path).is_none() || self.routes.owner(path).as_deref() == Some(&self.me)
        {
            return;
        }
        let Some(this) = self.this.upgrade() else {
            return;
        };
        let path = path.to_owned();
        kernel.runtime.spawn(async move {
            if let Err(e) = this.claim(&path).await {
                tracing::error!(path, error = %crate::error::chain(&e), "a top-level actor runs here but its name is not this node's");
            }
        });
    }

    /// Whether a live node other than this one owns the top-level name of `path`.
    pub(crate) fn owned_elsewhere(&self, path: &str) -> Option<String> {
        self.routes
            .owner(path)
            .filter(|node| *node != self.me && self.members.is_live(node))
    }

    /// Leaves cleanly: tells the others, gives up leases, stops the tasks. Idempotent.
    pub(crate) async fn leave(&self) {
        if self.left.swap(true, Ordering::AcqRel) {
            return;
        }
        for (path, revision) in self.leases.held() {
            let _ = self
                .leases_kv
                .delete_expect_revision(routes::key(&path), Some(revision))
                .await;
        }
        // The name is free at once for a node that starts under it next.
        let _ = self.nodes.delete(&self.me).await;
        // Frames queued before the leave go first (bounded: a link that cannot drain in 2 s
        // is left behind).
        let (flushed, published) = oneshot::channel();
        if self.out.send(Outgoing::Flushed(flushed)).await.is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(2), published).await;
        }
        self.send_beat(true).await;
        let _ = self.client.flush().await;
        self.stop_tasks();
        tracing::info!(node = %self.me, "left the cluster");
    }

    pub(super) fn stop_tasks(&self) {
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }

    /// Reads every claim into the routes.
    pub(super) async fn load_claims(&self) -> Result<(), ClusterError> {
        let keys = match self.paths.keys().await {
            Ok(keys) => keys,
            Err(e) => return Err(ClusterError::jetstream("listing claims", e)),
        };
        let keys: Vec<String> = keys.filter_map(|k| async move { k.ok() }).collect().await;
        for key in keys {
            if let (Some(name), Ok(Some(value))) = (routes::name(&key), self.paths.get(&key).await)
            {
                self.routes
                    .set(name, Some(String::from_utf8_lossy(&value).into_owned()));
            }
        }
        Ok(())
    }

    /// Publishes this node's heartbeat (or its leave).
    pub(super) async fn send_beat(&self, leaving: bool) {
        let interest = match self.kernel.upgrade() {
            Some(kernel) => self.caps.messaging.interest(&kernel),
            None => Default::default(),
        };
        let beat = Heartbeat {
            node: self.me.clone(),
            session: self.session,
            leaving,
            topics: interest.topics,
            groups: interest.groups,
            entities: self.caps.persistence.entities.kinds(),
        };
        if let Err(e) = self
            .client
            .publish(self.names.heartbeats(), wire::encode(&beat).into())
            .await
        {
            tracing::warn!(error = %e, "a heartbeat was not sent");
        }
    }

    /// Queues `frame` for `node`; false if the link is full or closed.
    pub(super) fn send(&self, node: &str, frame: Frame) -> bool {
        self.out
            .try_send(Outgoing::Frame(node.to_owned(), frame))
            .is_ok()
    }

    /// Sends a message for `path` to `node`, or says why it cannot go.
    pub(super) fn forward(
        &self,
        kernel: &Kernel,
        node: &str,
        path: &str,
        incarnation: Option<u64>,
        mut envelope: Envelope,
    ) -> Option<Undelivered> {
        let undelivered = |envelope, reason| {
            Some(Undelivered {
                envelope,
                target: path.to_owned(),
                reason,
            })
        };
        if !self.members.is_live(node) {
            return undelivered(envelope, DeadLetterReason::NodeDown);
        }
        let frame = deliver_frame(
            kernel,
            path.to_owned(),
            incarnation,
            &mut envelope,
            &self.me,
        );
        if !self.send(node, frame) {
            // A receipt handed on stays unacknowledged: its sender sends it again.
            return undelivered(envelope, DeadLetterReason::Unreachable);
        }
        // Handed to NATS: at most once from here, unless its receipt went with it.
        kernel.settle(envelope.receipt.take());
        None
    }

    /// Which node `path` belongs to: by qualification (`/system/nodes/<node>/...`), by
    /// placement for an entity, by a stand-in for a child spawned elsewhere (and its
    /// descendants), or by the claim on its top-level name.
    pub(super) fn whose<'p>(&self, path: &'p str) -> Whose<'p> {
        if let Some((node, local)) = wire::split_qualified(path) {
            return Whose::Qualified { node, local };
        }
        if !path.starts_with("/user/") {
            return Whose::Nobody;
        }
        if let Some(node) = self.placement(path) {
            return Whose::Entity(node);
        }
        if let Some(node) = self.proxies.node_of(path) {
            return Whose::Node(node);
        }
        self.routes.owner(path).map_or(Whose::Nobody, Whose::Node)
    }

    /// The node a send to `path` goes to as this node knows it now, itself included; `None`
    /// if no node's (a send to it would be a dead letter here).
    pub(crate) fn node_of(&self, path: &str) -> Option<String> {
        match self.whose(path) {
            Whose::Qualified { node, .. } => Some(node.to_owned()),
            Whose::Entity(node) | Whose::Node(node) => Some(node),
            Whose::Nobody => None,
        }
    }

    /// The node that owns `path` if it is not this one.
    pub(super) fn owner(&self, path: &str) -> Option<String> {
        self.node_of(path).filter(|node| *node != self.me)
    }

    /// The node where the entity at `path` lives by rendezvous hashing over the live nodes
    /// that host its kind; `None` if `path` names no entity of a kind hosted anywhere.
    pub(super) fn placement(&self, path: &str) -> Option<String> {
        let (kind, _) = entities::split(path)?;
        let here = self.caps.persistence.entities.kind_of(path).is_some();
        if !here && !self.members.hosts(kind) {
            return None;
        }
        self.members.place(path, kind, &self.me, here)
    }

    /// A message for an entity whose activation this node is to hold (placed here, or sent
    /// here by another node): here once the lease is this node's, else to the lease's node.
    pub(super) fn entity(
        &self,
        kernel: &Arc<Kernel>,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) -> Result<Option<Undelivered>, Envelope> {
        match self.leases.admit(path, incarnation, envelope) {
            Admit::Here(envelope) => Err(envelope),
            Admit::Parked(start) => {
                if start && let Some(this) = self.this.upgrade() {
                    kernel.runtime.spawn(take_lease(this, path.to_owned()));
                }
                Ok(None)
            }
            Admit::Forward(node, envelope) => {
                Ok(self.forward(kernel, &node, path, incarnation, envelope))
            }
        }
    }

    /// A node is down: its watched actors terminated, its leases are free, actors hear of it.
    pub(super) fn node_down(&self, node: &str, kernel: &Arc<Kernel>) {
        tracing::warn!(node, "a node of the cluster is down");
        // Before the watches: an actor this node moved there comes back, its watchers untold.
        self.target_down(node);
        for (watcher, target) in self.watches.node_down(node) {
            kernel.notify_terminated(&watcher, &target);
        }
        self.leases.node_down(node);
        self.proxies.node_down(node);
        self.moves_node_down(node);
        if let Some(this) = self.this.upgrade() {
            let node = node.to_owned();
            kernel
                .runtime
                .spawn(async move { this.recover_moves(Some(&node)).await });
        }
        self.announce(kernel, CLUSTER_TOPIC, NODE_DOWN_KIND, node);
    }

    /// Tells this node's subscribers of `topic` (a host topic: [`CLUSTER_TOPIC`], the
    /// modules' topic) what happened, as a message of `kind` with `body` and no sender.
    pub(super) fn announce(&self, kernel: &Arc<Kernel>, topic: &str, kind: &str, body: &str) {
        let envelope = Envelope::new(None, kind, body.as_bytes().to_vec());
        self.caps.messaging.publish_here(kernel, topic, &envelope);
    }

    /// This node's actors, for a tree of the cluster.
    pub(super) fn tree(&self, kernel: &Kernel) -> Vec<RemoteActor> {
        let mut actors = Vec::new();
        kernel.registry.for_each(|a| {
            if a.module.is_some() {
                actors.push(RemoteActor {
                    path: a.address.path.to_string(),
                    incarnation: a.address.incarnation,
                    module: a.module.as_deref().map(str::to_owned),
                    mailbox_depth: a.depth.messages(),
                });
            }
        });
        actors.sort_by(|a, b| a.path.cmp(&b.path));
        actors
    }
}

impl proxy::Through for Cluster {
    fn node(&self) -> &str {
        Cluster::node(self)
    }
    fn kernel(&self) -> Option<Arc<Kernel>> {
        Cluster::kernel(self)
    }
    fn send(&self, node: &str, frame: Frame) -> bool {
        Cluster::send(self, node, frame)
    }
    fn watch_through(&self, node: &str, watcher: &Address, child: &Address) {
        Cluster::watch_through(self, node, watcher, child);
    }
    fn unwatch_through(&self, node: &str, watcher: &Address, child: &Address) {
        Cluster::unwatch_through(self, node, watcher, child);
    }
    fn forward_user(&self, node: &str, child: &Address, msg: UserMsg) {
        Cluster::forward_user(self, node, child, msg);
    }
}

/// Takes the lease of the entity at `path`, then lets what waited for it go.
async fn take_lease(cluster: Arc<Cluster>, path: String) {
    let Some(kernel) = cluster.kernel.upgrade() else {
        return;
    };
    let outcome = lease_outcome(&cluster, &path).await;
    match outcome {
        Ok(Ok(revision)) => {
            // What waited becomes the activation's first messages: the kernel takes them as
            // the path's backlog ([`Remote::backlog`]) before it registers the path.
            cluster.leases.taken(&path, revision);
            if let Err(e) = cluster.caps.persistence.entities.activate(&kernel, &path) {
                tracing::warn!(path, error = %e, "an entity whose lease this node took did not activate");
            }
            // Not taken by an activation (it failed, or another claimed the path first):
            // delivered as any message would be.
            for (incarnation, envelope) in cluster.leases.failed(&path) {
                if let Some(u) = kernel.deliver_here(&path, incarnation, envelope) {
                    kernel.dead_letter(u.envelope, u.target, u.reason);
                }
            }
        }
        Ok(Err(holder)) => loop {
            let parked = cluster.leases.elsewhere(&path, &holder);
            if parked.is_empty() {
                break;
            }
            for (incarnation, envelope) in parked {
                if let Some(u) = cluster.forward(&kernel, &holder, &path, incarnation, envelope) {
                    kernel.dead_letter(u.envelope, u.target, u.reason);
                }
            }
        },
        Err(e) => {
            tracing::warn!(path, error = %e, "an entity lease could not be taken");
            for (_, envelope) in cluster.leases.failed(&path) {
                kernel.dead_letter(envelope, path.clone(), DeadLetterReason::Unreachable);
            }
        }
    }
}

/// The lease's new revision if this node took it, or the live node that holds it.
async fn lease_outcome(cluster: &Cluster, path: &str) -> Result<Result<u64, String>, ClusterError> {
    let key = routes::key(path);
    let kv = &cluster.leases_kv;
    for _ in 0..4 {
        match kv.create(&key, cluster.me.clone().into()).await {
            Ok(revision) => return Ok(Ok(revision)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
            Err(e) => return Err(ClusterError::jetstream("taking a lease", e)),
        }
        let Some(entry) = kv
            .entry(key.clone())
            .await
            .map_err(|e| ClusterError::jetstream("reading a lease", e))?
        else {
            continue;
        };
        let holder = String::from_utf8_lossy(&entry.value).into_owned();
        if entry.operation == kv::Operation::Put
            && holder != cluster.me
            && cluster.members.is_live(&holder)
        {
            return Ok(Err(holder));
        }
        // Free, ours from an earlier run, or held by a node that is down: take it over.
        if let Ok(revision) = kv
            .update(&key, cluster.me.clone().into(), entry.revision)
            .await
        {
            return Ok(Ok(revision));
        }
    }
    Err(ClusterError::jetstream(
        "taking a lease",
        "the lease kept changing under this node",
    ))
}

/// The frame that delivers `envelope` to `path` on another node. A durable message whose
/// receipt the store can hand on goes as [`Frame::DeliverDurable`] and loses its receipt here:
/// the receiving node acknowledges it once consumed (exactly once, with a store every node
/// reaches). Any other keeps its receipt, for the caller to settle at hand-off.
fn deliver_frame(
    kernel: &Kernel,
    path: String,
    incarnation: Option<u64>,
    envelope: &mut Envelope,
    me: &str,
) -> Frame {
    let msg = wire::msg(envelope, me);
    match envelope.receipt.and_then(|r| kernel.export_receipt(r)) {
        Some(token) => {
            envelope.receipt = None;
            Frame::DeliverDurable {
                path,
                incarnation,
                msg,
                receipt: token,
            }
        }
        None => Frame::Deliver {
            path,
            incarnation,
            msg,
        },
    }
}
