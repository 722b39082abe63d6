//! The protocol of live moves (see `moves` for the diagram and the invariants): the source's
//! departure, hand-over and forwarding, the target's adoption, fences and restore.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::jetstream::{kv, object_store};
use futures_util::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;

use super::config::ClusterError;
use super::moves::{Arrival, Ending, FENCE_WAIT, MoveError, MoveRecord, Recovery, Unsettled, lock};
use super::node::Cluster;
use super::routes;
use super::wire::{self, Frame, Signal};
use crate::actor::departure::{Departure, Handover};
use crate::actor::image::ActorImage;
use crate::actor::mailbox::{SystemMsg, UserMsg};
use crate::address::{ActorPath, Address};
use crate::kernel::Kernel;
use crate::kernel::deadletters::DeadLetterReason;
use crate::kernel::spawn::{Limits, Restore, SpawnRequest};
use crate::message::{Envelope, StopReason};
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
        self.faults.reached("move-captured").await;
        let key = image_key(&name);
        // From the record on, the move outlives this node (see `moves`). The record is
        // created first: only one move of a name holds its key (and the image's) at a time.
        let record = MoveRecord {
            path: path.to_owned(),
            from: self.me.clone(),
            to: to.to_owned(),
            holder: to.to_owned(),
            incarnation: address.incarnation,
            limits: wire::Limits::of(&limits),
        };
        let revision = match self
            .moves_kv
            .create(key.as_str(), wire::encode(&record).into())
            .await
        {
            Ok(revision) => revision,
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                return Err(MoveError::Underway(path.to_owned()));
            }
            Err(e) => return Err(ClusterError::jetstream("recording a move", e).into()),
        };
        let mut reader: &[u8] = &bytes;
        if let Err(e) = self.images.put(key.as_str(), &mut reader).await {
            let _ = self
                .moves_kv
                .delete_expect_revision(key.as_str(), Some(revision))
                .await;
            return Err(ClusterError::jetstream("storing a moving actor's image", e).into());
        }
        // This node's move from here on: a look through the records leaves it alone, and the
        // target's death is told through `ending`.
        let (told, mut ending) = oneshot::channel();
        lock(&self.moves.unsettled).insert(
            path.to_owned(),
            Unsettled {
                to: to.to_owned(),
                actor: address.clone(),
                told: Some(told),
            },
        );
        if !self.members.is_live(to) {
            self.target_down(to);
        }
        self.faults.reached("move-stored").await;
        let outcome = tokio::select! {
            outcome = self.ask_adopt(to, &address, &key, wire::Limits::of(&limits)) => outcome,
            _ = &mut ending => Err(MoveError::UnknownNode(to.to_owned())),
        };
        let refused = match outcome {
            Ok(()) => self.hand_claim(&name, to).await.err().map(MoveError::from),
            Err(e) => Some(e),
        };
        if let Some(error) = refused {
            lock(&self.moves.unsettled).remove(path);
            self.send(
                to,
                Frame::MoveAborted {
                    path: path.to_owned(),
                },
            );
            let _ = self
                .moves_kv
                .delete_expect_revision(key.as_str(), Some(revision))
                .await;
            let _ = self.images.delete(key.as_str()).await;
            return Err(error);
        }
        lock(&self.moves.departed).insert(path.to_owned(), to.to_owned());
        let (handover, handed) = oneshot::channel();
        let _ = verdict.send(Some(handover));
        match handed.await {
            Ok(handover) => {
                let this = self.clone();
                let moved = Moved {
                    to: to.to_owned(),
                    key,
                    image: bytes,
                };
                kernel
                    .runtime
                    .spawn(async move { this.forward_departed(moved, handover, ending).await });
            }
            Err(_) => {
                lock(&self.moves.unsettled).remove(path);
                tracing::error!(path, "the moved actor's cell ended before its hand-over");
            }
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
    /// is free, to the target; then frees the path (later sends route there by the claim).
    /// Keeps a copy of each plain message it forwarded until the target settles; if the
    /// target goes down first, takes the actor back.
    async fn forward_departed(
        self: Arc<Self>,
        moved: Moved,
        handover: Handover,
        ending: oneshot::Receiver<Ending>,
    ) {
        let Handover {
            me,
            mut mailbox,
            watchers,
            parent,
        } = handover;
        let Some(kernel) = self.kernel() else { return };
        let to = moved.to.as_str();
        let mut kept = Vec::new();
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
                    UserMsg::Message(envelope) => {
                        if envelope.receipt.is_none() {
                            // A durable one is its sender's to send again.
                            kept.push(envelope.clone());
                        }
                        self.user_frame(&actor, UserMsg::Message(envelope))
                    }
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
        let path = actor.path.to_string();
        match ending.await {
            Ok(Ending::TargetDown(watchers)) => {
                self.take_back(&kernel, &actor, moved, kept, watchers).await;
            }
            Ok(Ending::Settled) | Err(_) => {}
        }
        lock(&self.moves.unsettled).remove(&path);
    }

    /// The target of a move out went down before it settled: the actor comes back here from
    /// its image, with what was forwarded and what came since, if the record is still the
    /// target's (else the target had settled, and the actor died with it).
    async fn take_back(
        self: &Arc<Self>,
        kernel: &Arc<Kernel>,
        actor: &Address,
        moved: Moved,
        kept: Vec<Envelope>,
        watchers: Vec<Address>,
    ) {
        let path = actor.path.as_str();
        let record = match self.moves_kv.entry(moved.key.as_str()).await {
            Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                match wire::decode::<MoveRecord>(&entry.value) {
                    Ok(record) if record.holder == moved.to => Some((record, entry.revision)),
                    _ => None,
                }
            }
            Ok(_) => None,
            Err(e) => {
                tracing::error!(path, error = %e, "the record of a move whose target went down cannot be read");
                None
            }
        };
        let image = ActorImage::decode(&moved.image).ok().map(Box::new);
        let Some((record, revision)) = record.filter(|_| image.is_some()) else {
            tracing::warn!(path, to = %moved.to, "the target of a move went down after it had taken the actor over: the actor ended with it");
            for watcher in &watchers {
                kernel.notify_terminated(watcher, actor);
            }
            return;
        };
        tracing::warn!(path, to = %moved.to, "the target of a move went down before it settled: taking the actor back");
        self.restore_from_record(moved.key, revision, record, kept, image, watchers)
            .await;
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
                    record: None,
                    watchers: Vec::new(),
                    paused: false,
                },
            );
            self.moves.arriving.fetch_add(1, Ordering::AcqRel);
        }
        let Some(this) = self.this.upgrade() else {
            return;
        };
        let from = from.to_owned();
        kernel.runtime.spawn(async move {
            let refused = match this.read_record(&key).await {
                Ok((record, revision))
                    if record.path == path
                        && record.holder == this.me
                        && record.incarnation == incarnation =>
                {
                    match this.fetch_image(&key, &path, incarnation).await {
                        Ok(image) => {
                            if let Some(arrival) = lock(&this.moves.arrivals).get_mut(&path) {
                                arrival.image = Some(image);
                                arrival.record = Some((key.clone(), revision));
                            }
                            None
                        }
                        Err(unfetched) => Some(unfetched.to_string()),
                    }
                }
                Ok(_) => Some("the move's record is of another move".to_owned()),
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

    /// Reads the record of a move, and the revision it is at.
    async fn read_record(&self, key: &str) -> Result<(MoveRecord, u64), String> {
        match self.moves_kv.entry(key).await {
            Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                let record = wire::decode::<MoveRecord>(&entry.value)
                    .map_err(|e| format!("the move's record is malformed: {e}"))?;
                Ok((record, entry.revision))
            }
            Ok(_) => Err("the move has no record".to_owned()),
            Err(e) => Err(format!("the move's record could not be read: {e}")),
        }
    }

    /// Reads the image under `key` and checks it is of the actor at `path` as `incarnation`,
    /// of a module version deployed here as it was (it stays in the store until the move
    /// settles).
    async fn fetch_image(
        &self,
        key: &str,
        path: &str,
        incarnation: u64,
    ) -> Result<Box<ActorImage>, Unfetched> {
        let limit = self
            .kernel()
            .map_or(0, |k| k.config.memory_limit as u64)
            .saturating_mul(2)
            .saturating_add(16 << 20);
        let mut object = self.images.get(key).await.map_err(|e| match e.kind() {
            object_store::GetErrorKind::NotFound => Unfetched::Void("it has no image".into()),
            _ => Unfetched::Later(format!("its image could not be fetched: {e}")),
        })?;
        let mut bytes = Vec::new();
        (&mut object)
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| Unfetched::Later(format!("its image could not be read: {e}")))?;
        if bytes.len() as u64 > limit {
            return Err(Unfetched::Void(format!("its image is over {limit} bytes")));
        }
        let image = ActorImage::decode(&bytes).map_err(|e| Unfetched::Void(e.to_string()))?;
        if image.path != path || image.incarnation != incarnation {
            return Err(Unfetched::Void("the image is of another actor".to_owned()));
        }
        match self.kernel() {
            Some(kernel) if kernel.restorable(&image) => Ok(Box::new(image)),
            _ => Err(Unfetched::Later(format!(
                "module {} version {} is not deployed here as the image was taken",
                image.module, image.version
            ))),
        }
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

    /// The target of a move out settled (inbound `MoveSettled`): what was kept can go.
    pub(super) fn move_settled(&self, path: &str) {
        if let Some(told) = lock(&self.moves.unsettled)
            .get_mut(path)
            .and_then(|u| u.told.take())
        {
            let _ = told.send(Ending::Settled);
        }
    }

    /// The target of this node's unsettled moves to `node` went down: their actors come back
    /// (see `take_back`), with the watchers this node had pointed there, which are not told
    /// that the actor ended.
    pub(super) fn target_down(&self, node: &str) {
        let mut unsettled = lock(&self.moves.unsettled);
        for u in unsettled.values_mut().filter(|u| u.to == node) {
            if let Some(told) = u.told.take() {
                let watchers = self.watches.take(node, &u.actor);
                let _ = told.send(Ending::TargetDown(watchers));
            }
        }
    }

    /// Settles a move restored here: deletes its record (as the revision this node holds it
    /// at), then its image, and tells its source. If the record was taken over meanwhile (a
    /// node took this one for down), the copy here stops: the other runs the actor.
    async fn settle(&self, path: &str, record: (String, u64), from: &str) {
        let (key, revision) = record;
        let mut tries = 0;
        let ours = loop {
            match self
                .moves_kv
                .delete_expect_revision(key.as_str(), Some(revision))
                .await
            {
                Ok(()) => break true,
                Err(e) => match self.moves_kv.entry(key.as_str()).await {
                    Ok(Some(entry))
                        if entry.revision == revision && entry.operation == kv::Operation::Put =>
                    {
                        tries += 1;
                        if tries >= 50 {
                            tracing::error!(path, error = %e, "the record of a move restored here cannot be deleted; it stays");
                            return;
                        }
                    }
                    Ok(_) => break false,
                    Err(_) => {}
                },
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        if !ours {
            tracing::warn!(
                path,
                "another node took this move over: the copy here stops"
            );
            if let Some(kernel) = self.kernel() {
                kernel.stop(path, StopReason::Normal);
            }
            return;
        }
        let _ = self.images.delete(key.as_str()).await;
        // Whoever ran a move last names the path: a claim a loser took meanwhile is undone.
        if let Err(e) = self.claim_over(path, &[]).await {
            tracing::warn!(path, error = %e, "a moved actor's name could not be claimed here");
        }
        if from != self.me {
            self.send(
                from,
                Frame::MoveSettled {
                    path: path.to_owned(),
                },
            );
        }
    }

    /// Runs the actor of a move's record here (this node finishes the move or takes it over,
    /// see `moves`): holds the record (moving its holder here if it was another's), takes the
    /// claim, and restores the actor from the image with `backlog` as its first messages,
    /// followed by anything that came for it meanwhile. `image` is the image if this node has
    /// it already.
    async fn restore_from_record(
        self: &Arc<Self>,
        key: String,
        mut revision: u64,
        record: MoveRecord,
        backlog: Vec<Envelope>,
        image: Option<Box<ActorImage>>,
        watchers: Vec<Address>,
    ) {
        let Some(kernel) = self.kernel() else { return };
        let path = record.path.clone();
        if record.holder != self.me {
            let mut mine = record.clone();
            mine.holder = self.me.clone();
            match self
                .moves_kv
                .update(key.as_str(), wire::encode(&mine).into(), revision)
                .await
            {
                Ok(r) => revision = r,
                Err(e) => {
                    tracing::info!(path, error = %e, "another node took this move over first");
                    for envelope in backlog {
                        kernel.tell_address(&path, None, envelope);
                    }
                    return;
                }
            }
        }
        // From here, what comes for the path waits for the actor (behind the backlog); the
        // guard (this node in `waiting`) keeps it from completing before the image is here.
        {
            let mut arrivals = lock(&self.moves.arrivals);
            match arrivals.get_mut(&path) {
                Some(arrival) => {
                    // The target was being moved to already: its source is gone, so no fence
                    // will come; what it held goes first, the backlog after.
                    let mut ready = std::mem::take(&mut arrival.ready);
                    for (_, held) in arrival.held.drain() {
                        ready.extend(held);
                    }
                    ready.extend(backlog);
                    arrival.ready = ready;
                    arrival.waiting = [self.me.clone()].into();
                    arrival.record = Some((key.clone(), revision));
                    arrival.watchers.extend(watchers);
                    if image.is_some() {
                        arrival.image = image;
                    }
                }
                None => {
                    arrivals.insert(
                        path.clone(),
                        Arrival {
                            from: self.me.clone(),
                            incarnation: record.incarnation,
                            limits: record.limits.clone(),
                            image,
                            waiting: [self.me.clone()].into(),
                            ready: backlog,
                            held: HashMap::new(),
                            record: Some((key.clone(), revision)),
                            watchers,
                            paused: false,
                        },
                    );
                    self.moves.arriving.fetch_add(1, Ordering::AcqRel);
                }
            }
            lock(&self.moves.departed).remove(&path);
        }
        if let Err(e) = self
            .claim_over(&path, &[record.from.as_str(), record.to.as_str()])
            .await
        {
            tracing::warn!(path, error = %e, "a moving actor's name could not be claimed here");
        }
        let missing = lock(&self.moves.arrivals)
            .get(&path)
            .is_some_and(|a| a.image.is_none());
        if missing {
            match self.fetch_image(&key, &path, record.incarnation).await {
                Ok(image) => {
                    if let Some(arrival) = lock(&self.moves.arrivals).get_mut(&path) {
                        arrival.image = Some(image);
                    }
                }
                Err(unfetched) => {
                    tracing::error!(path, reason = %unfetched, "a moving actor's image cannot be restored here");
                    if let Unfetched::Void(_) = unfetched {
                        // Nothing will ever restore it: the move is void (its source died
                        // before the image was stored, or the image is damaged).
                        let _ = self
                            .moves_kv
                            .delete_expect_revision(key.as_str(), Some(revision))
                            .await;
                    }
                    for envelope in self.moves.forget(&path) {
                        kernel.dead_letter(envelope, path.clone(), DeadLetterReason::NoActor);
                    }
                    return;
                }
            }
        }
        if let Some(arrival) = lock(&self.moves.arrivals).get_mut(&path) {
            arrival.waiting.clear();
        }
        self.complete(&path);
    }

    /// Looks through the records of moves under way for those this node is to finish or take
    /// over (see [`MoveRecord::recovery`]): at its join (the node restarted), and when `down`
    /// went down. An arrival in progress here is forced to complete only if its source is
    /// the node that went down (or not live): else its fences are still to come.
    pub(super) async fn recover_moves(self: &Arc<Self>, down: Option<&str>) {
        let keys: Vec<String> = match self.moves_kv.keys().await {
            Ok(keys) => keys.filter_map(|k| async move { k.ok() }).collect().await,
            Err(e) => {
                tracing::warn!(error = %e, "the records of moves under way cannot be listed");
                return;
            }
        };
        for key in keys {
            let Ok((record, revision)) = self.read_record(&key).await else {
                continue;
            };
            let recovery = record.recovery(&self.me, |n| self.members.is_live(n));
            if recovery == Recovery::Leave || lock(&self.moves.unsettled).contains_key(&record.path)
            {
                continue;
            }
            let source_gone =
                down == Some(record.from.as_str()) || !self.members.is_live(&record.from);
            let arriving = lock(&self.moves.arrivals).contains_key(&record.path);
            let running = self
                .kernel()
                .is_some_and(|k| k.registry.with(&record.path, |a| a.is_some()));
            if (arriving && !source_gone) || (running && !arriving) {
                continue;
            }
            tracing::warn!(path = %record.path, from = %record.from, to = %record.to, ?recovery, "finishing a move that was cut off");
            self.restore_from_record(key, revision, record, Vec::new(), None, Vec::new())
                .await;
        }
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
        let Some(arrival) = arrivals.get_mut(path).filter(|a| a.complete()) else {
            return;
        };
        if self.faults.armed("move-restoring") && !arrival.paused {
            arrival.paused = true;
            if let Some(this) = self.this.upgrade() {
                let path = path.to_owned();
                kernel.runtime.spawn(async move {
                    this.faults.reached("move-restoring").await;
                    this.complete(&path);
                });
            }
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
        let record = arrival.record.take();
        let watchers = std::mem::take(&mut arrival.watchers);
        match spawned {
            Ok(actor) => {
                let path = path.to_owned();
                let this = self.this.upgrade();
                let from = arrival.from;
                kernel.runtime.spawn(async move {
                    match restored.await {
                        Ok(Ok(())) => {
                            tracing::info!(actor = %actor.address, "moved here");
                            if let Some(kernel) = this.as_ref().and_then(|t| t.kernel()) {
                                for watcher in &watchers {
                                    if !kernel.watch_local(watcher, &actor.address) {
                                        kernel.notify_terminated(watcher, &actor.address);
                                    }
                                }
                            }
                            if let (Some(this), Some(record)) = (this, record) {
                                this.settle(&path, record, &from).await;
                            }
                        }
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

/// Why a moving actor's image could not be had.
#[derive(Debug, thiserror::Error)]
enum Unfetched {
    /// It never will be: none was stored, or it is damaged or of another actor.
    #[error("{0}")]
    Void(String),
    /// Not now: the store failed, or the module is not deployed here as it was.
    #[error("{0}")]
    Later(String),
}

/// A move out whose actor has left: what its source keeps until the move settles.
struct Moved {
    /// The target.
    to: String,
    /// The record's and the image's key.
    key: String,
    /// The image's bytes.
    image: Vec<u8>,
}

/// The image store's (and the move record's) key of a moving actor: one per top-level name,
/// so one move of a name is under way at a time, and what deleted records leave behind is
/// bounded by the names ever moved.
fn image_key(name: &str) -> String {
    format!("move.{}", routes::key(name))
}
