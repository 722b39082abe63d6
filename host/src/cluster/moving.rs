//! The protocol of live moves (see `moves` for the diagram and the invariants): the source's
//! departure, hand-over and forwarding, the target's adoption, fences and restore.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::jetstream::kv;
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;

use super::config::ClusterError;
use super::moves::{Arrival, FENCE_WAIT, MoveError, lock};
use super::node::Cluster;
use super::routes;
use super::wire::{self, Frame, Signal};
use crate::actor::departure::{Departure, Handover};
use crate::actor::image::ActorImage;
use crate::actor::mailbox::{SystemMsg, UserMsg};
use crate::address::{ActorPath, Address};
use crate::kernel::Kernel;
use crate::kernel::spawn::{Limits, Restore, SpawnRequest};
use crate::message::Envelope;
use crate::sandbox::image::ImageError;

/// The kind of the marker a source puts in a departed actor's mailbox when a node fences:
/// its body is the node's name. Never reaches a guest.
const FENCE_KIND: &str = "mote.move-fence";
/// How long a move waits for its target's answer.
const ADOPT_WAIT: Duration = Duration::from_secs(15);

impl Cluster {
    /// Moves the top-level actor at `path` to `to`; returns its address, the same there.
    pub(crate) async fn move_out(
        self: &Arc<Self>,
        kernel: &Arc<Kernel>,
        path: &str,
        to: &str,
    ) -> Result<Address, MoveError> {
        let name = match routes::top_level(path) {
            Some(name) if path.len() == "/user/".len() + name.len() => name.to_owned(),
            _ => return Err(MoveError::NotTopLevel(path.to_owned())),
        };
        if to == self.me || !self.members.is_live(to) {
            return Err(MoveError::UnknownNode(to.to_owned()));
        }
        let actor = kernel
            .registry
            .get(path)
            .filter(|a| a.module.is_some() && a.address.path.as_str() == path)
            .ok_or_else(|| MoveError::NoActor(path.to_owned()))?;
        let address = actor.address.clone();
        let (image, captured) = oneshot::channel();
        let (verdict, decided) = oneshot::channel();
        if !actor.signal(SystemMsg::Depart(Departure {
            image,
            verdict: decided,
        })) {
            return Err(MoveError::Stopped(path.to_owned()));
        }
        let (bytes, limits) = captured
            .await
            .map_err(|_| MoveError::Stopped(path.to_owned()))??;
        // From here until the verdict, the actor serves nothing; dropping `verdict` on any
        // error below lets it serve on here.
        let key = image_key(&name, address.incarnation);
        let mut reader: &[u8] = &bytes;
        self.images
            .put(key.as_str(), &mut reader)
            .await
            .map_err(|e| ClusterError::jetstream("storing a moving actor's image", e))?;
        let outcome = self
            .ask_adopt(to, &address, &key, wire::Limits::of(&limits))
            .await;
        let refused = match outcome {
            Ok(()) => self.hand_claim(&name, to).await.err().map(MoveError::from),
            Err(e) => Some(e),
        };
        if let Some(error) = refused {
            self.send(
                to,
                Frame::MoveAborted {
                    path: path.to_owned(),
                },
            );
            let _ = self.images.delete(key.as_str()).await;
            return Err(error);
        }
        lock(&self.moves.departed).insert(path.to_owned(), to.to_owned());
        let (handover, handed) = oneshot::channel();
        let _ = verdict.send(Some(handover));
        match handed.await {
            Ok(handover) => {
                let this = self.clone();
                let to = to.to_owned();
                kernel
                    .runtime
                    .spawn(async move { this.forward_departed(&to, handover).await });
            }
            Err(_) => tracing::error!(path, "the moved actor's cell ended before its hand-over"),
        }
        tracing::info!(path, to, "moved");
        Ok(address)
    }

    /// Asks `to` to take the actor over; `Ok` once it is ready.
    async fn ask_adopt(
        &self,
        to: &str,
        address: &Address,
        key: &str,
        limits: wire::Limits,
    ) -> Result<(), MoveError> {
        let path = address.path.to_string();
        let (answer, answered) = oneshot::channel();
        lock(&self.moves.asked).insert(path.clone(), answer);
        let frame = Frame::Adopt {
            path: path.clone(),
            incarnation: address.incarnation,
            image: key.to_owned(),
            limits,
        };
        if !self.send(to, frame) {
            lock(&self.moves.asked).remove(&path);
            return Err(MoveError::UnknownNode(to.to_owned()));
        }
        let outcome = tokio::time::timeout(ADOPT_WAIT, answered).await;
        lock(&self.moves.asked).remove(&path);
        match outcome {
            Ok(Ok(None)) => Ok(()),
            Ok(Ok(Some(reason))) => Err(MoveError::Refused {
                node: to.to_owned(),
                reason,
            }),
            _ => Err(MoveError::Timeout(to.to_owned())),
        }
    }

    /// Hands this node's claim on `name` to `to` by compare-and-set; this node's routes
    /// follow at once.
    async fn hand_claim(&self, name: &str, to: &str) -> Result<(), ClusterError> {
        let key = routes::key(name);
        let entry = self
            .paths
            .entry(key.clone())
            .await
            .map_err(|e| ClusterError::jetstream("reading a claim", e))?;
        let Some(entry) = entry.filter(|e| e.operation == kv::Operation::Put) else {
            return Err(ClusterError::jetstream(
                "moving a claim",
                "the name is not claimed",
            ));
        };
        if entry.value.as_ref() != self.me.as_bytes() {
            return Err(ClusterError::Claimed {
                path: format!("/user/{name}"),
                node: String::from_utf8_lossy(&entry.value).into_owned(),
            });
        }
        self.paths
            .update(&key, to.to_owned().into(), entry.revision)
            .await
            .map_err(|e| ClusterError::jetstream("moving a claim", e))?;
        self.routes.set(name.to_owned(), Some(to.to_owned()));
        Ok(())
    }

    /// Forwards what the departed actor's mailbox holds, and what reaches it until its path
    /// is free, to `to`; then frees the path (later sends route to `to` by the claim).
    async fn forward_departed(&self, to: &str, handover: Handover) {
        let Handover {
            me,
            mut mailbox,
            watchers,
            parent,
        } = handover;
        let Some(kernel) = self.kernel() else { return };
        let actor = me.address.clone();
        for watcher in &watchers {
            self.watch_through(to, watcher, &actor);
        }
        loop {
            while let Ok(msg) = mailbox.system.try_recv() {
                match msg {
                    SystemMsg::Watch(w) => self.watch_through(to, &w, &actor),
                    SystemMsg::Unwatch(w) => self.unwatch_through(to, &w, &actor),
                    SystemMsg::Stop(reason) => {
                        self.send(
                            to,
                            Frame::Signal {
                                to: wire::address(&actor, &self.me),
                                signal: Signal::Stop(reason),
                            },
                        );
                    }
                    SystemMsg::Snapshot(answer) => {
                        let _ = answer.send(Err(ImageError::Uncapturable(format!(
                            "{actor} moved to node {to}"
                        ))));
                    }
                    SystemMsg::Depart(departure) => {
                        let _ = departure.image.send(Err(ImageError::Uncapturable(format!(
                            "{actor} moved to node {to}"
                        ))));
                    }
                    _ => {}
                }
            }
            while let Ok(msg) = mailbox.try_next() {
                let frame = match msg {
                    UserMsg::Message(envelope) if envelope.kind == FENCE_KIND => Frame::Fenced {
                        path: actor.path.to_string(),
                        node: String::from_utf8_lossy(&envelope.body).into_owned(),
                    },
                    msg => self.user_frame(&actor, msg),
                };
                // Waits while the link is full: nothing the actor was sent is dropped here.
                self.send_waiting(to, frame).await;
            }
            if kernel.tally.retire(&me, || kernel.registry.passivate(&me)) {
                break;
            }
            // Something came in between the drain and the release: take it next round.
            tokio::task::yield_now().await;
        }
        mailbox.close_user();
        mailbox.system.close();
        me.lifeline.mark_terminated();
        kernel.child_terminated(parent.as_ref(), &actor);
    }

    /// A node asks this one to take over the actor at `path` (inbound `Adopt`): holds what
    /// comes for it from now on, then fetches and checks the image and answers.
    pub(super) fn adopt(
        &self,
        kernel: &Arc<Kernel>,
        from: &str,
        path: String,
        incarnation: u64,
        key: String,
        limits: wire::Limits,
    ) {
        let mut waiting: HashSet<String> = self.members.names().into_iter().collect();
        waiting.remove(from);
        waiting.insert(self.me.clone());
        {
            let mut arrivals = lock(&self.moves.arrivals);
            if arrivals.contains_key(&path) || kernel.registry.with(&path, |a| a.is_some()) {
                drop(arrivals);
                self.send(
                    from,
                    Frame::Adopted {
                        path: path.clone(),
                        refused: Some(format!("{path} is taken on node {}", self.me)),
                    },
                );
                return;
            }
            arrivals.insert(
                path.clone(),
                Arrival {
                    from: from.to_owned(),
                    incarnation,
                    limits,
                    image: None,
                    waiting,
                    ready: Vec::new(),
                    held: HashMap::new(),
                },
            );
            self.moves.arriving.fetch_add(1, Ordering::AcqRel);
        }
        let Some(this) = self.this.upgrade() else {
            return;
        };
        let from = from.to_owned();
        kernel.runtime.spawn(async move {
            let refused = match this.fetch_image(&key).await {
                Ok(image) if image.path != path || image.incarnation != incarnation => {
                    Some("the image is of another actor".to_owned())
                }
                Ok(image) => match this.kernel() {
                    Some(kernel) if kernel.restorable(&image) => {
                        if let Some(arrival) = lock(&this.moves.arrivals).get_mut(&path) {
                            arrival.image = Some(image);
                        }
                        None
                    }
                    _ => Some(format!(
                        "module {} version {} is not deployed here as the image was taken",
                        image.module, image.version
                    )),
                },
                Err(reason) => Some(reason),
            };
            let ok = refused.is_none();
            if !ok {
                this.moves.forget(&path);
            }
            this.send(
                &from,
                Frame::Adopted {
                    path: path.clone(),
                    refused,
                },
            );
            if ok {
                // A node that never fences (or a lost fence) holds nothing forever.
                tokio::time::sleep(FENCE_WAIT).await;
                let late: Vec<String> = lock(&this.moves.arrivals)
                    .get(&path)
                    .map(|a| a.waiting.iter().cloned().collect())
                    .unwrap_or_default();
                if !late.is_empty() {
                    tracing::warn!(path, nodes = ?late, "an arriving actor stopped waiting for these nodes' fences");
                    for node in late {
                        this.fenced(&path, &node);
                    }
                }
            }
        });
    }

    /// Reads and checks the image under `key`, then deletes it from the store.
    async fn fetch_image(&self, key: &str) -> Result<Box<ActorImage>, String> {
        let limit = self
            .kernel()
            .map_or(0, |k| k.config.memory_limit as u64)
            .saturating_mul(2)
            .saturating_add(16 << 20);
        let mut object = self
            .images
            .get(key)
            .await
            .map_err(|e| format!("its image could not be fetched: {e}"))?;
        let mut bytes = Vec::new();
        (&mut object)
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| format!("its image could not be read: {e}"))?;
        if bytes.len() as u64 > limit {
            return Err(format!("its image is over {limit} bytes"));
        }
        let image = ActorImage::decode(&bytes).map_err(|e| e.to_string())?;
        let _ = self.images.delete(key).await;
        Ok(Box::new(image))
    }

    /// The target's answer to a move out (inbound `Adopted`).
    pub(super) fn adopted(&self, path: &str, refused: Option<String>) {
        if let Some(answer) = lock(&self.moves.asked).remove(path) {
            let _ = answer.send(refused);
        }
    }

    /// The source gave up a move here (inbound `MoveAborted`): what was held goes on as any
    /// message would.
    pub(super) fn move_aborted(&self, kernel: &Arc<Kernel>, path: &str) {
        for envelope in self.moves.forget(path) {
            kernel.tell_address(path, None, envelope);
        }
    }

    /// A node routes `path` elsewhere from now on (inbound `Fence` at the old owner): its
    /// marker follows what it sent here, through the departed actor's mailbox if it is still
    /// being forwarded.
    pub(super) fn fence(&self, kernel: &Arc<Kernel>, from: &str, path: &str) {
        let Some(to) = self.moves.departed(path) else {
            return;
        };
        let marker = Envelope::new(None, FENCE_KIND, from.as_bytes().to_vec());
        let queued = kernel
            .registry
            .with(path, |a| a.map(|a| a.tell_host(marker.clone()).is_ok()));
        if queued != Some(true) {
            self.send(
                &to,
                Frame::Fenced {
                    path: path.to_owned(),
                    node: from.to_owned(),
                },
            );
        }
    }

    /// Everything `node` sent the source for `path` is here (inbound `Fenced`).
    pub(super) fn fenced(&self, path: &str, node: &str) {
        {
            let mut arrivals = lock(&self.moves.arrivals);
            let Some(arrival) = arrivals.get_mut(path) else {
                return;
            };
            arrival.release(node);
        }
        self.complete(path);
    }

    /// Nodes that went down fence no more.
    pub(super) fn moves_node_down(&self, node: &str) {
        let paths: Vec<String> = lock(&self.moves.arrivals)
            .iter()
            .filter(|(_, a)| a.waiting.contains(node))
            .map(|(p, _)| p.clone())
            .collect();
        for path in paths {
            self.fenced(&path, node);
        }
    }

    /// Restores an arrival whose image is here and every fence came: at its path and
    /// incarnation, with everything held as its first messages. Under the arrivals' lock, so
    /// a message for the path waits until the actor is registered, behind what was held.
    fn complete(&self, path: &str) {
        let Some(kernel) = self.kernel() else { return };
        let mut arrivals = lock(&self.moves.arrivals);
        if !arrivals.get(path).is_some_and(Arrival::complete) {
            return;
        }
        let Some(mut arrival) = arrivals.remove(path) else {
            return;
        };
        self.moves.arriving.fetch_sub(1, Ordering::AcqRel);
        lock(&self.moves.departed).remove(path);
        let Some(image) = arrival.image.take() else {
            return;
        };
        lock(&self.moves.ready).insert(path.to_owned(), std::mem::take(&mut arrival.ready));
        let Ok(at) = ActorPath::parse(path) else {
            return;
        };
        let (answer, restored) = oneshot::channel();
        let spawned = kernel.spawn_top_level(SpawnRequest {
            path: at,
            module: image.module.clone(),
            init: Vec::new(),
            parent: None,
            limits: Limits::of(&kernel.config, &arrival.limits.options(&kernel.config)),
            passivate_after: None,
            hibernate_after: None,
            reservation: None,
            incarnation: Some(arrival.incarnation),
            restore: Restore::Image { image, answer },
        });
        let lost = lock(&self.moves.ready).remove(path);
        drop(arrivals);
        match spawned {
            Ok(actor) => {
                let path = path.to_owned();
                kernel.runtime.spawn(async move {
                    match restored.await {
                        Ok(Ok(())) => tracing::info!(actor = %actor.address, "moved here"),
                        Ok(Err(e)) => {
                            tracing::error!(path, error = %e, "a moved actor could not be restored")
                        }
                        Err(_) => {
                            tracing::error!(path, "a moved actor stopped before it was restored")
                        }
                    }
                });
            }
            Err(e) => {
                tracing::error!(path, error = %e, "a moved actor could not be spawned here");
                for envelope in lost.unwrap_or_default() {
                    kernel.dead_letter(
                        envelope,
                        path.to_owned(),
                        crate::kernel::deadletters::DeadLetterReason::NoActor,
                    );
                }
            }
        }
    }
}

/// The image store's key of a moving actor.
fn image_key(name: &str, incarnation: u64) -> String {
    format!("move.{}.{incarnation}", routes::key(name))
}
