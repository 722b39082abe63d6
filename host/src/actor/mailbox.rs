//! Mailboxes: three lanes per actor and the handle (`ActorRef`) that senders hold.
//!
//! Invariants:
//! - The system lane (stop, failures, directives, watch) is always served before the user
//!   lanes, and the urgent lane (user messages a sender marked urgent) before the ordinary one.
//! - Per sender->receiver pair and lane, user messages arrive in send order (one FIFO lane
//!   per lane; see `lane.rs`); an urgent message may overtake ordinary ones sent before it.
//! - The urgent lane cannot starve the ordinary one: it holds at most a quarter of the
//!   mailbox's messages, and after [`URGENT_RUN`] urgent messages in a row a waiting ordinary
//!   message goes next.
//! - The user lane holds at most its capacity of messages and of bytes of bodies; a send
//!   beyond either is refused, and the sender learns it (a dead letter from an actor, an error from the API). Host messages
//!   (`mote.terminated`) are exempt so a full mailbox cannot swallow them.
//! - A lane lent to a pulled receive (`lend`, see `actor::pull`) takes ordinary messages in
//!   their order, and none while a system or urgent message waits: those are the cell's, first.
//! - A message is never dropped silently: once the owning cell stops it closes the user lane and
//!   hands everything still queued to dead letters; a send that finds the lane closed becomes a
//!   dead letter too.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::task::Waker;
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use super::lane::{LanePeer, LaneReceiver, LaneSender, TryRecvError, lane};
use super::supervisor::{Directive, FailureKind};
use crate::address::Address;
use crate::message::{Envelope, StopReason};
use crate::stats::ActorStats;

/// Urgent messages taken in a row before a waiting ordinary one gets its turn.
pub(crate) const URGENT_RUN: u32 = 16;

/// What travels on the user lane.
#[derive(Debug)]
pub(crate) enum UserMsg {
    /// An ordinary message for `receive`.
    Message(Envelope),
    /// Stop once everything queued before it has been handled.
    PoisonPill,
}

/// What travels on the system lane.
#[derive(Debug)]
pub(crate) enum SystemMsg {
    /// Stop after the current message.
    Stop(StopReason),
    /// A child finished stopping.
    ChildTerminated(Address),
    /// A child failed and waits for its parent's directive.
    Failed {
        child: Address,
        kind: FailureKind,
        error: String,
    },
    /// The parent's decision about this actor (resume, restart after `delay`, or stop).
    Directive {
        directive: Directive,
        delay: Duration,
        cause: String,
    },
    /// Another actor watches this one.
    Watch(Address),
    /// Another actor no longer watches this one.
    Unwatch(Address),
    /// Swap to another version of the module, after the current message.
    Upgrade(UpgradeRequest),
    /// Handle no user message until `Activate` (the parent's call).
    Deactivate,
    /// Handle user messages again.
    Activate,
    /// An urgent message was queued: wakes an idle actor (whose wait polls only the system
    /// and ordinary lanes, so the urgent lane costs the common path nothing).
    Urgent,
    /// Capture the actor as an image between two messages, and answer with its bytes.
    Snapshot(tokio::sync::oneshot::Sender<Result<Vec<u8>, crate::sandbox::image::ImageError>>),
    /// Capture the actor between two messages for a move to another node, then stay or go
    /// as the mover decides (see `actor::departure`).
    Depart(super::departure::Departure),
}

/// A request to run another version of the actor's module (see `deploy::upgrade`).
pub(crate) struct UpgradeRequest {
    /// The module's name.
    pub(crate) name: Arc<str>,
    /// The version to run.
    pub(crate) version: Arc<str>,
    /// The content hash of that version when the request was made: a version replaced since
    /// is not run.
    pub(crate) hash: Arc<str>,
    pub(crate) reply: oneshot::Sender<UpgradeOutcome>,
}

impl std::fmt::Debug for UpgradeRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpgradeRequest")
            .field("module", &self.name)
            .field("version", &self.version)
            .finish()
    }
}

impl UpgradeRequest {
    /// Answers the requester (who may have given up waiting).
    pub(crate) fn answer(self, outcome: UpgradeOutcome) {
        let _ = self.reply.send(outcome);
    }
}

/// One actor's answer to an upgrade request.
#[derive(Debug)]
pub(crate) enum UpgradeOutcome {
    /// It runs the new version; `migrated` if its state was carried.
    Upgraded { migrated: bool, pause: Duration },
    /// It already ran that version.
    Unchanged,
    /// It keeps its old version, for this reason.
    Failed(String),
}

/// Fires once when an actor incarnation has fully terminated.
#[derive(Debug, Default)]
pub(crate) struct Lifeline {
    done: AtomicBool,
    notify: Notify,
}

impl Lifeline {
    pub(crate) fn mark_terminated(&self) {
        self.done.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    pub(crate) fn is_terminated(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    pub(crate) async fn terminated(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_terminated() {
                return;
            }
            notified.await;
        }
    }
}

/// Why a user message was not queued; the message comes back.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The mailbox is at capacity.
    Full(Envelope),
    /// The actor has stopped.
    Closed(Envelope),
}

/// How much a mailbox holds now: messages and bytes of bodies on its user lanes.
#[derive(Debug, Default)]
pub(crate) struct Depth {
    messages: AtomicUsize,
    bytes: AtomicUsize,
    /// Of the messages, those on the urgent lane (so an empty urgent lane costs one load).
    urgent: AtomicUsize,
}

/// Added to a passivated mailbox's message count ([`Depth::seal`]): above any capacity, so
/// every later send is refused, and far from overflowing with what host messages still add.
const SEALED: usize = 1 << (usize::BITS - 2);

impl Depth {
    /// Messages queued now.
    pub(crate) fn messages(&self) -> usize {
        self.messages.load(Ordering::Relaxed) & !SEALED
    }

    /// Seals an empty mailbox: true if it held nothing, and then every later [`ActorRef::tell`]
    /// is refused as closed. A send counts its message before it queues it, and the count has
    /// one order of changes, so a send either comes first (the seal fails) or is refused: a
    /// sender that kept the handle (`actor::route`) cannot slip a message in after the check.
    pub(crate) fn seal(&self) -> bool {
        self.messages
            .compare_exchange(0, SEALED, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Bytes of bodies queued now.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    fn add(&self, bytes: usize) {
        self.messages.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn sub(&self, bytes: usize) {
        self.messages.fetch_sub(1, Ordering::Relaxed);
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// What a mailbox holds at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Capacity {
    /// Messages on the user lane.
    pub(crate) messages: usize,
    /// Bytes of their bodies.
    pub(crate) bytes: usize,
}

impl Capacity {
    /// How many of the messages may be urgent: a quarter (at least one).
    pub(crate) fn urgent(&self) -> usize {
        (self.messages / 4).max(1)
    }

    /// At most `n` messages, of any size.
    pub(crate) fn messages(n: usize) -> Capacity {
        Capacity {
            messages: n,
            bytes: usize::MAX,
        }
    }
}

/// What a mailbox's owner runs: a module's name and the version it runs now (an upgrade changes
/// the version).
pub(crate) type Labels = (Arc<str>, Arc<str>);

/// A handle to a live actor's mailbox, held by the registry, its parent and anyone who sends.
#[derive(Clone, Debug)]
pub(crate) struct ActorRef {
    pub(crate) address: Address,
    /// The module's name (`None` for probes and ask endpoints).
    pub(crate) module: Option<Arc<str>>,
    /// The module version the actor runs now; an upgrade changes it.
    pub(crate) version: Option<Arc<RwLock<Arc<str>>>>,
    pub(crate) user: LaneSender<UserMsg>,
    /// The urgent lane: user messages served before the ordinary ones. Its receiver never
    /// waits on it (it is rare): a `SystemMsg::Urgent` on the system lane wakes the owner, so
    /// an idle actor waits on two lanes, not three.
    pub(crate) urgent: LaneSender<UserMsg>,
    pub(crate) system: Option<LaneSender<SystemMsg>>,
    pub(crate) lifeline: Arc<Lifeline>,
    /// Messages (and bytes) queued on the user lane now.
    pub(crate) depth: Arc<Depth>,
    pub(crate) capacity: Capacity,
    /// What the actor has done and used, its refusals among them (`None` for host endpoints).
    pub(crate) stats: Option<Arc<ActorStats>>,
}

/// The receiving side, owned by the actor's cell.
pub(crate) struct Mailbox {
    pub(crate) user: LaneReceiver<UserMsg>,
    pub(crate) urgent: LaneReceiver<UserMsg>,
    pub(crate) system: LaneReceiver<SystemMsg>,
    pub(crate) depth: Arc<Depth>,
    /// Urgent messages taken in a row since the last ordinary one.
    urgent_run: u32,
}

/// Creates a mailbox holding up to `capacity` of user messages and the handle that feeds it.
pub(crate) fn mailbox(
    address: Address,
    labels: Option<Labels>,
    capacity: Capacity,
) -> (ActorRef, Mailbox) {
    let (user_tx, user_rx) = lane();
    let (urgent_tx, urgent_rx) = lane();
    let (system_tx, system_rx) = lane();
    let depth = Arc::new(Depth::default());
    let stats = labels.is_some().then(Arc::default);
    let handle = ActorRef {
        address,
        stats,
        module: labels.as_ref().map(|(name, _)| name.clone()),
        version: labels.map(|(_, version)| Arc::new(RwLock::new(version))),
        user: user_tx,
        urgent: urgent_tx,
        system: Some(system_tx),
        lifeline: Arc::default(),
        depth: depth.clone(),
        capacity,
    };
    (
        handle,
        Mailbox {
            user: user_rx,
            urgent: urgent_rx,
            system: system_rx,
            depth,
            urgent_run: 0,
        },
    )
}

/// An endpoint for host code (a probe, an ask): unbounded user lane, no system lane.
pub(crate) fn endpoint(address: Address) -> (ActorRef, Mailbox) {
    let (mut handle, mailbox) = mailbox(address, None, Capacity::messages(usize::MAX));
    handle.system = None;
    (handle, mailbox)
}

impl ActorRef {
    /// Records that this actor now runs `version` of its module.
    pub(crate) fn set_version(&self, version: Arc<str>) {
        if let Some(v) = &self.version {
            *v.write().unwrap_or_else(|p| p.into_inner()) = version;
        }
    }

    /// The module version this actor runs now.
    pub(crate) fn running_version(&self) -> Option<Arc<str>> {
        self.version
            .as_ref()
            .map(|v| v.read().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// Queues a user message within the mailbox's capacity.
    pub(crate) fn tell(&self, mut envelope: Envelope) -> Result<(), Refused> {
        let size = envelope.body.len();
        let depth = &self.depth;
        // An endpoint (no system lane to wake it) takes every message on its one lane.
        envelope.urgent &= self.system.is_some();
        // Urgent messages may fill a quarter of the mailbox, no more: a flood of them leaves
        // room for ordinary ones.
        if envelope.urgent && depth.urgent.fetch_add(1, Ordering::Relaxed) >= self.capacity.urgent()
        {
            depth.urgent.fetch_sub(1, Ordering::Relaxed);
            return Err(Refused::Full(envelope));
        }
        let unreserve = |envelope: &Envelope| {
            if envelope.urgent {
                depth.urgent.fetch_sub(1, Ordering::Relaxed);
            }
        };
        let before = depth.messages.fetch_add(1, Ordering::Relaxed);
        if before >= self.capacity.messages.min(SEALED) {
            depth.messages.fetch_sub(1, Ordering::Relaxed);
            unreserve(&envelope);
            return Err(match before & SEALED {
                0 => Refused::Full(envelope),
                _ => Refused::Closed(envelope),
            });
        }
        let before = depth.bytes.fetch_add(size, Ordering::Relaxed);
        if before.saturating_add(size) > self.capacity.bytes {
            depth.sub(size);
            unreserve(&envelope);
            return Err(Refused::Full(envelope));
        }
        self.push(envelope, size)
    }

    /// Queues a host message, which no capacity limit refuses (on the ordinary lane).
    pub(crate) fn tell_host(&self, mut envelope: Envelope) -> Result<(), Refused> {
        let size = envelope.body.len();
        envelope.urgent = false;
        self.depth.add(size);
        self.push(envelope, size)
    }

    /// Queues a message whose room is reserved (an urgent one's place on its lane too).
    fn push(&self, envelope: Envelope, size: usize) -> Result<(), Refused> {
        if envelope.urgent {
            if let Err(UserMsg::Message(envelope)) = self.urgent.send(UserMsg::Message(envelope)) {
                self.depth.sub(size);
                self.depth.urgent.fetch_sub(1, Ordering::Relaxed);
                return Err(Refused::Closed(envelope));
            }
            self.signal(SystemMsg::Urgent);
            return Ok(());
        }
        match self.user.send(UserMsg::Message(envelope)) {
            Err(UserMsg::Message(envelope)) => {
                self.depth.sub(size);
                Err(Refused::Closed(envelope))
            }
            _ => Ok(()),
        }
    }

    /// Queues a system message; false if the actor has stopped (or is not a cell).
    pub(crate) fn signal(&self, msg: SystemMsg) -> bool {
        self.system.as_ref().is_some_and(|tx| tx.send(msg).is_ok())
    }
}

impl Mailbox {
    /// Gives back the lanes' spare room (an actor going to sleep keeps no empty buffers).
    pub(crate) fn shrink(&mut self) {
        self.user.shrink();
        self.urgent.shrink();
        self.system.shrink();
    }

    /// Takes the next user message if one is queued: an urgent one first, unless
    /// [`URGENT_RUN`] urgent ones were taken in a row and an ordinary one waits.
    pub(crate) fn try_next(&mut self) -> Result<UserMsg, TryRecvError> {
        if self.depth.urgent.load(Ordering::Relaxed) > 0 {
            if self.urgent_run >= URGENT_RUN
                && let Ok(msg) = self.user.try_recv()
            {
                self.took(&msg);
                return Ok(msg);
            }
            if let Ok(msg) = self.urgent.try_recv() {
                self.took(&msg);
                return Ok(msg);
            }
        }
        let msg = self.user.try_recv()?;
        self.took(&msg);
        Ok(msg)
    }

    /// Waits for the next user message (an endpoint's: it has no urgent lane); `None` once
    /// every sender is gone.
    pub(crate) async fn next(&mut self) -> Option<UserMsg> {
        let msg = self.user.recv().await?;
        self.took(&msg);
        Some(msg)
    }

    /// Accounts for a user message taken off a lane.
    pub(crate) fn took(&mut self, msg: &UserMsg) {
        match msg {
            UserMsg::Message(envelope) if envelope.urgent => {
                self.depth.sub(envelope.body.len());
                self.depth.urgent.fetch_sub(1, Ordering::Relaxed);
                self.urgent_run += 1;
            }
            UserMsg::Message(envelope) => {
                self.depth.sub(envelope.body.len());
                self.urgent_run = 0;
            }
            UserMsg::PoisonPill => self.urgent_run = 0,
        }
    }

    /// Closes both user lanes: later sends are refused; what they hold can still be taken.
    pub(crate) fn close_user(&mut self) {
        self.user.close();
        self.urgent.close();
    }

    /// User messages queued now.
    pub(crate) fn queued(&self) -> usize {
        self.depth.messages()
    }

    /// The ordinary lane lent to a guest call that pulls its next messages (`actor::pull`).
    pub(crate) fn lend(&self) -> Lent {
        Lent {
            user: self.user.peer(),
            system: self.system.peer(),
            depth: self.depth.clone(),
            taken: 0,
        }
    }

    /// The lent lane is back: what it took counts as taken here.
    pub(crate) fn give_back(&mut self, lent: Lent) {
        if lent.taken > 0 {
            // Only ordinary messages are pulled: the run of urgent ones is broken.
            self.urgent_run = 0;
        }
    }
}

/// A mailbox's ordinary lane lent to a pulled receive. It takes an ordinary message only while
/// nothing the cell serves first waits: no system message and no urgent one (so the lanes'
/// order holds as if the cell took it).
pub(crate) struct Lent {
    user: LanePeer<UserMsg>,
    system: LanePeer<SystemMsg>,
    depth: Arc<Depth>,
    /// Messages taken through it.
    taken: u32,
}

impl Lent {
    /// The next ordinary message, if nothing is served before it and `pass` accepts it.
    pub(crate) fn next_if(&mut self, pass: impl FnOnce(&Envelope) -> bool) -> Option<Envelope> {
        if self.depth.urgent.load(Ordering::Relaxed) > 0 || !self.system.is_empty() {
            return None;
        }
        let taken = self.user.take_if(|msg| match msg {
            UserMsg::Message(envelope) => pass(envelope),
            UserMsg::PoisonPill => false,
        });
        let Some(UserMsg::Message(envelope)) = taken else {
            return None;
        };
        self.depth.sub(envelope.body.len());
        self.taken += 1;
        Some(envelope)
    }

    /// Messages taken through it.
    pub(crate) fn taken(&self) -> u32 {
        self.taken
    }

    /// Has `waker` woken by the next message on any lane, if none is queued now: true if it
    /// waits, false if something is queued already (then `next_if` or the cell takes it). The
    /// urgent lane takes no lock here: an urgent message is counted before it is queued, and
    /// its `SystemMsg::Urgent`, sent after it, wakes a waiter on the system lane.
    pub(crate) fn wait(&self, waker: &Waker) -> bool {
        self.system.wait(waker)
            && self.depth.urgent.load(Ordering::Acquire) == 0
            && self.user.wait(waker)
    }
}

/// A mailbox for a unit test: `path` (parsed) and `incarnation`, holding `capacity` messages.
#[cfg(test)]
pub(crate) fn test_mailbox(path: &str, incarnation: u64, capacity: usize) -> (ActorRef, Mailbox) {
    let address = Address {
        path: crate::address::ActorPath::parse(path).expect("a valid test path"),
        incarnation,
    };
    mailbox(address, None, Capacity::messages(capacity))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::ActorPath;
    use crate::sched::tests::Counting;
    use proptest::prelude::*;

    fn address() -> Address {
        Address {
            path: ActorPath::parse("/user/m").unwrap(),
            incarnation: 1,
        }
    }

    fn kind(msg: UserMsg) -> String {
        match msg {
            UserMsg::Message(e) => e.kind,
            UserMsg::PoisonPill => "pill".to_owned(),
        }
    }

    #[test]
    fn a_mailbox_refuses_what_would_pass_its_bytes_and_counts_what_it_holds() {
        let capacity = Capacity {
            messages: 100,
            bytes: 10,
        };
        let (handle, mut mailbox) = mailbox(address(), None, capacity);
        assert!(handle.tell(Envelope::new(None, "a", vec![0; 6])).is_ok());
        assert!(matches!(
            handle.tell(Envelope::new(None, "b", vec![0; 5])),
            Err(Refused::Full(_))
        ));
        assert!(handle.tell(Envelope::new(None, "c", vec![0; 4])).is_ok());
        assert_eq!((handle.depth.messages(), handle.depth.bytes()), (2, 10));
        assert!(
            handle
                .tell_host(Envelope::new(None, "h", vec![0; 3]))
                .is_ok()
        );
        assert_eq!(kind(mailbox.try_next().unwrap()), "a");
        assert_eq!((handle.depth.messages(), handle.depth.bytes()), (2, 7));
        assert!(handle.tell(Envelope::new(None, "d", vec![0; 3])).is_ok());
        assert_eq!(handle.depth.bytes(), 10);
    }

    #[test]
    fn a_full_mailbox_refuses_user_messages_but_not_host_messages() {
        let (handle, mut mailbox) = mailbox(address(), None, Capacity::messages(2));
        assert!(handle.tell(Envelope::new(None, "1", Vec::new())).is_ok());
        assert!(handle.tell(Envelope::new(None, "2", Vec::new())).is_ok());
        assert!(matches!(
            handle.tell(Envelope::new(None, "3", Vec::new())),
            Err(Refused::Full(e)) if e.kind == "3"
        ));
        assert!(
            handle
                .tell_host(Envelope::new(None, "host", Vec::new()))
                .is_ok()
        );
        assert_eq!(handle.depth.messages(), 3);
        let kinds: Vec<String> = (0..3).map(|_| kind(mailbox.try_next().unwrap())).collect();
        assert_eq!(kinds, ["1", "2", "host"]);
        assert_eq!(handle.depth.messages(), 0);
    }

    #[test]
    fn urgent_messages_go_first_but_cannot_starve_ordinary_ones() {
        let (handle, mut mailbox) = mailbox(address(), None, Capacity::messages(160));
        for n in 0..5 {
            handle
                .tell(Envelope::new(None, format!("o{n}"), Vec::new()))
                .unwrap();
        }
        for n in 0..40 {
            let mut urgent = Envelope::new(None, format!("u{n}"), Vec::new());
            urgent.urgent = true;
            handle.tell(urgent).unwrap();
        }
        // A quarter of the mailbox (40) is urgent now: one more urgent message is refused.
        let mut more = Envelope::new(None, "u", Vec::new());
        more.urgent = true;
        assert!(matches!(handle.tell(more), Err(Refused::Full(_))));
        assert!(
            handle
                .tell_host(Envelope::new(None, "h", Vec::new()))
                .is_ok()
        );
        let lanes: String = std::iter::from_fn(|| mailbox.try_next().ok())
            .map(|m| kind(m).remove(0))
            .collect();
        let run = "u".repeat(URGENT_RUN as usize);
        let expected = format!(
            "{run}o{run}o{}oooh",
            "u".repeat(40 - 2 * URGENT_RUN as usize)
        );
        assert_eq!(lanes, expected);
        assert_eq!(handle.depth.messages(), 0);
        assert_eq!(handle.depth.urgent.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_lent_lane_takes_ordinary_messages_only_while_nothing_goes_before_them() {
        let (handle, mut mailbox) = mailbox(address(), None, Capacity::messages(10));
        for kind in ["a", "b", "c"] {
            handle.tell(Envelope::new(None, kind, vec![0; 2])).unwrap();
        }
        let mut lent = mailbox.lend();
        assert_eq!(lent.next_if(|_| true).map(|e| e.kind), Some("a".into()));
        assert!(
            lent.next_if(|e| e.kind != "b").is_none(),
            "b fails the test"
        );
        assert_eq!(handle.depth.messages(), 2, "b stays queued");
        assert!(handle.signal(SystemMsg::Activate));
        assert!(
            lent.next_if(|_| true).is_none(),
            "a system message goes first"
        );
        assert!(mailbox.system.try_recv().is_ok());
        let mut urgent = Envelope::new(None, "u", Vec::new());
        urgent.urgent = true;
        handle.tell(urgent).unwrap();
        assert!(
            lent.next_if(|_| true).is_none(),
            "an urgent message goes first"
        );
        let Ok(UserMsg::Message(u)) = mailbox.try_next() else {
            panic!("the urgent message is the cell's to take");
        };
        assert_eq!(u.kind, "u");
        // Its wake-up on the system lane, which the cell drains first.
        assert!(matches!(mailbox.system.try_recv(), Ok(SystemMsg::Urgent)));
        assert_eq!(lent.next_if(|_| true).map(|e| e.kind), Some("b".into()));
        assert_eq!(lent.taken(), 2);
        assert_eq!((handle.depth.messages(), handle.depth.bytes()), (1, 2));
        handle.user.send(UserMsg::PoisonPill).unwrap();
        assert_eq!(lent.next_if(|_| true).map(|e| e.kind), Some("c".into()));
        assert!(
            lent.next_if(|_| true).is_none(),
            "a poison pill is the cell's"
        );
        mailbox.give_back(lent);
        assert!(matches!(mailbox.try_next(), Ok(UserMsg::PoisonPill)));
    }

    #[test]
    fn a_waiting_lent_lane_is_woken_by_any_lane_and_does_not_wait_past_an_urgent_message() {
        /// Queues one message of a kind on the mailbox behind `handle`.
        type Queue = fn(&ActorRef) -> bool;
        let sends: [(&str, Queue); 3] = [
            ("an urgent message (through the system lane)", |h| {
                let mut urgent = Envelope::new(None, "u", Vec::new());
                urgent.urgent = true;
                h.tell(urgent).is_ok()
            }),
            ("an ordinary message", |h| {
                h.tell(Envelope::new(None, "o", Vec::new())).is_ok()
            }),
            ("a system message", |h| h.signal(SystemMsg::Activate)),
        ];
        for (what, send) in sends {
            let (handle, held) = mailbox(address(), None, Capacity::messages(10));
            let lent = held.lend();
            let (counting, waker) = Counting::new(Waker::noop().clone());
            assert!(lent.wait(&waker), "all lanes empty: it waits");
            assert!(send(&handle));
            assert_eq!(counting.woken(), 1, "{what} wakes it");
            assert!(!lent.wait(&waker), "{what} is queued: no wait");
        }
    }

    #[test]
    fn a_closed_mailbox_gives_the_message_back() {
        let (handle, mut mailbox) = mailbox(address(), None, Capacity::messages(10));
        mailbox.user.close();
        assert!(matches!(
            handle.tell(Envelope::new(None, "late", Vec::new())),
            Err(Refused::Closed(e)) if e.kind == "late"
        ));
        assert_eq!(handle.depth.messages(), 0);
    }

    #[test]
    fn the_system_lane_is_separate_and_endpoints_have_none() {
        let (handle, mut mailbox) = mailbox(address(), None, Capacity::messages(10));
        assert!(handle.signal(SystemMsg::Stop(StopReason::Normal)));
        assert!(
            mailbox.try_next().is_err(),
            "a signal is not a user message"
        );
        assert!(matches!(mailbox.system.try_recv(), Ok(SystemMsg::Stop(_))));
        let (probe, _inbox) = endpoint(address());
        assert!(!probe.signal(SystemMsg::Stop(StopReason::Normal)));
    }

    #[test]
    fn labels_follow_an_upgrade() {
        let labels = (Arc::from("m"), Arc::from("1"));
        let (handle, _mailbox) = mailbox(address(), Some(labels), Capacity::messages(1));
        assert_eq!(handle.running_version().as_deref(), Some("1"));
        handle.set_version(Arc::from("2"));
        assert_eq!(handle.clone().running_version().as_deref(), Some("2"));
    }

    /// What a test sequence does to a mailbox.
    #[derive(Debug, Clone)]
    enum Op {
        Tell,
        TellHost,
        Take,
    }

    proptest! {
        /// Against a model queue: user messages are refused exactly when `capacity` are
        /// queued, host messages never are, everything comes out in the order it went in, and
        /// the depth senders read is always the number queued.
        #[test]
        fn order_capacity_and_depth_match_a_model(
            capacity in 1usize..8,
            ops in proptest::collection::vec(
                prop_oneof![Just(Op::Tell), Just(Op::TellHost), Just(Op::Take)],
                0..64,
            ),
        ) {
            let (handle, mut mailbox) = mailbox(address(), None, Capacity::messages(capacity));
            let mut model = std::collections::VecDeque::new();
            for (i, op) in ops.into_iter().enumerate() {
                let kind = i.to_string();
                match op {
                    Op::Tell => {
                        let accepted = handle.tell(Envelope::new(None, kind.clone(), Vec::new())).is_ok();
                        prop_assert_eq!(accepted, model.len() < capacity);
                        if accepted {
                            model.push_back(kind);
                        }
                    }
                    Op::TellHost => {
                        prop_assert!(handle.tell_host(Envelope::new(None, kind.clone(), Vec::new())).is_ok());
                        model.push_back(kind);
                    }
                    Op::Take => {
                        let taken = mailbox.try_next().ok().map(kind_of);
                        prop_assert_eq!(taken, model.pop_front());
                    }
                }
                prop_assert_eq!(handle.depth.messages(), model.len());
            }
        }
    }

    fn kind_of(msg: UserMsg) -> String {
        kind(msg)
    }
}
