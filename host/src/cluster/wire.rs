//! What crosses between nodes: frames in batches (one NATS message holds the frames queued for
//! one node), heartbeats, and how addresses are written so that they mean the same on both
//! sides.
//!
//! Invariants:
//! - A `/user` path means the same actor on every node; a `/system` path is its node's own, so
//!   it crosses qualified: `/system/ask/7` of node `a` is `/system/nodes/a/system/ask/7`
//!   everywhere else, and unqualified again when it comes home.
//! - Decoding never panics: a malformed batch is an error, and the frames of it are dropped
//!   (counted and logged by the receiver).

use serde::{Deserialize, Serialize};

use crate::actor::supervisor::{Directive, FailureKind};
use crate::address::{ActorPath, Address};
use crate::message::{Envelope, StopReason};
use crate::trace::parent::TraceParent;

/// The NATS header naming the node that published a batch of frames.
pub(crate) const FROM_HEADER: &str = "Mote-From";

/// Where other nodes' `/system` paths are written: `/system/nodes/<node>/<its path>`.
pub(crate) const NODES_PREFIX: &str = "/system/nodes/";

/// A message as it crosses: the host never decodes its body here either.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(crate) struct Msg {
    pub(crate) sender: Option<(String, u64)>,
    pub(crate) kind: String,
    pub(crate) body: Vec<u8>,
    pub(crate) urgent: bool,
    pub(crate) trace: Option<Vec<u8>>,
}

/// One thing a node asks of another.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    /// Deliver to the actor at `path` (that incarnation, if given).
    Deliver {
        path: String,
        incarnation: Option<u64>,
        msg: Msg,
    },
    /// `watcher` watches `target` (of the receiving node).
    Watch {
        watcher: (String, u64),
        target: (String, u64),
    },
    /// `watcher` no longer watches `target`.
    Unwatch {
        watcher: (String, u64),
        target: (String, u64),
    },
    /// Deliver to every subscriber of `topic` on the receiving node.
    Publish { topic: String, msg: Msg },
    /// Deliver to the least loaded member of `group` on the receiving node.
    TellGroup { group: String, msg: Msg },
    /// Deliver to every member of `group` on the receiving node.
    BroadcastGroup { group: String, msg: Msg },
    /// Spawn a child of an actor of the sending node.
    Spawn(Spawn),
    /// Put a signal on the system lane of `to` (a child and its parent on two nodes).
    Signal { to: (String, u64), signal: Signal },
    /// [`Frame::Deliver`] of a durable message whose receipt the receiving node takes over
    /// (its store's token): it is acknowledged there, once consumed. Added last, so the frames
    /// before it keep their encoding.
    DeliverDurable {
        path: String,
        incarnation: Option<u64>,
        msg: Msg,
        receipt: Vec<u8>,
    },
    /// Take over the actor at `path` from the sending node (a move); its image is in the
    /// cluster's image store under `image`. Answered with [`Frame::Adopted`].
    Adopt {
        path: String,
        incarnation: u64,
        image: String,
        limits: Limits,
    },
    /// Ready to take over the actor at `path`, or why not.
    Adopted {
        path: String,
        refused: Option<String>,
    },
    /// The move of the actor at `path` to the receiving node did not happen.
    MoveAborted { path: String },
    /// The sending node routes `path` to its new owner from now on (sent to the old owner,
    /// after everything the sender sent it for `path`).
    Fence { path: String },
    /// Everything `node` sent the sending node for `path` has been forwarded before this.
    Fenced { path: String, node: String },
    /// The actor at `path` that the receiving node moved to the sending node runs there now:
    /// what the receiving node kept for the move can go. Added last, so the frames before it
    /// keep their encoding.
    MoveSettled { path: String },
}

/// A child of `parent` (an actor of the sending node) to spawn at `path`, as `incarnation`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spawn {
    pub(crate) parent: (String, u64),
    pub(crate) path: String,
    pub(crate) incarnation: u64,
    pub(crate) module: String,
    pub(crate) init: Vec<u8>,
    pub(crate) limits: Limits,
}

/// What a child spawned on another node may take, as its parent's node chose.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) mailbox_capacity: u64,
    pub(crate) mailbox_bytes: u64,
    pub(crate) memory: u64,
    pub(crate) cpu_deadline_ms: u64,
    pub(crate) descendants: u64,
}

impl Limits {
    /// An actor's limits as they cross.
    pub(crate) fn of(limits: &crate::kernel::spawn::Limits) -> Limits {
        Limits {
            mailbox_capacity: limits.mailbox_capacity as u64,
            mailbox_bytes: limits.mailbox_bytes as u64,
            memory: limits.memory as u64,
            cpu_deadline_ms: u64::try_from(limits.cpu_deadline.as_millis()).unwrap_or(u64::MAX),
            descendants: limits.quotas.descendants as u64,
        }
    }

    /// The spawn options that give an actor these limits here (within this host's).
    pub(crate) fn options(
        &self,
        config: &crate::config::HostConfig,
    ) -> crate::kernel::spawn::SpawnOptions {
        crate::kernel::spawn::SpawnOptions {
            mailbox_capacity: usize::try_from(self.mailbox_capacity).ok(),
            mailbox_bytes: usize::try_from(self.mailbox_bytes).ok(),
            memory_limit: usize::try_from(self.memory).ok(),
            cpu_deadline: Some(std::time::Duration::from_millis(self.cpu_deadline_ms)),
            quotas: Some(crate::quota::Quotas {
                descendants: usize::try_from(self.descendants).unwrap_or(usize::MAX),
                ..config.quotas
            }),
            hibernate_after: None,
        }
    }
}

/// What crosses between a parent and its child on two nodes.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Stop (from the parent), with why.
    Stop(StopReason),
    /// Stop after the messages queued before it (a poison pill through the stand-in).
    PoisonPill,
    /// The parent's decision about its failed child.
    Directive {
        directive: Directive,
        delay_ms: u64,
        cause: String,
    },
    /// The child failed and waits for a directive.
    Failed {
        child: (String, u64),
        kind: FailureKind,
        error: String,
    },
    /// The child terminated.
    ChildTerminated((String, u64)),
}

/// What a node says of itself on every beat.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(crate) struct Heartbeat {
    pub(crate) node: String,
    /// Unique per run of a node: a restarted node is a new session.
    pub(crate) session: u64,
    /// A clean leave: the node is gone from now on.
    pub(crate) leaving: bool,
    /// Topics with subscribers on the node, and how many.
    pub(crate) topics: Vec<(String, u32)>,
    /// Groups with members on the node: how many, and the shortest mailbox among them.
    pub(crate) groups: Vec<(String, u32, u64)>,
    /// The entity kinds the node hosts.
    pub(crate) entities: Vec<String>,
}

/// Why bytes from another node were not understood.
#[derive(Debug, thiserror::Error)]
#[error("a malformed cluster message: {0}")]
pub(crate) struct Malformed(#[from] postcard::Error);

/// Encodes a batch of frames as one payload.
pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing plain data into a Vec cannot fail.
    postcard::to_allocvec(value).unwrap_or_default()
}

/// Decodes a payload of another node.
pub(crate) fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, Malformed> {
    Ok(postcard::from_bytes(bytes)?)
}

/// `path` as other nodes write it, sent from node `me`.
pub(crate) fn qualify(path: &str, me: &str) -> String {
    match path.strip_prefix(crate::address::SYSTEM_ROOT) {
        Some(rest)
            if !path.starts_with(NODES_PREFIX) && (rest.is_empty() || rest.starts_with('/')) =>
        {
            format!("{NODES_PREFIX}{me}{path}")
        }
        _ => path.to_owned(),
    }
}

/// The node a qualified path belongs to, and the path on that node.
pub(crate) fn split_qualified(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix(NODES_PREFIX)?;
    let slash = rest.find('/')?;
    Some((&rest[..slash], &rest[slash..]))
}

/// `path` as node `me` writes it: its own qualified paths unqualified.
pub(crate) fn localize<'p>(path: &'p str, me: &str) -> &'p str {
    match split_qualified(path) {
        Some((node, local)) if node == me => local,
        _ => path,
    }
}

/// The message of `envelope`, sent from node `me`.
pub(crate) fn msg(envelope: &Envelope, me: &str) -> Msg {
    Msg {
        sender: envelope
            .sender
            .as_ref()
            .map(|s| (qualify(s.path.as_str(), me), s.incarnation)),
        kind: envelope.kind.clone(),
        body: envelope.body.clone(),
        urgent: envelope.urgent,
        trace: envelope.trace().map(|t| t.to_bytes().to_vec()),
    }
}

/// The envelope of `msg`, received by node `me`; `None` if its sender is no path.
pub(crate) fn envelope(msg: Msg, me: &str) -> Option<Envelope> {
    let sender = match msg.sender {
        Some((path, incarnation)) => Some(Address {
            path: ActorPath::parse(localize(&path, me)).ok()?,
            incarnation,
        }),
        None => None,
    };
    let trace = msg.trace.as_deref().and_then(TraceParent::from_bytes);
    let mut envelope = Envelope::new(sender, msg.kind, msg.body).traced(trace);
    envelope.urgent = msg.urgent;
    Some(envelope)
}

/// An address as it crosses, from node `me`.
pub(crate) fn address(address: &Address, me: &str) -> (String, u64) {
    (qualify(address.path.as_str(), me), address.incarnation)
}

/// An address that crossed, as node `me` writes it; `None` if it is no path.
pub(crate) fn parse_address((path, incarnation): &(String, u64), me: &str) -> Option<Address> {
    Some(Address {
        path: ActorPath::parse(localize(path, me)).ok()?,
        incarnation: *incarnation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_paths_cross_qualified_and_come_home_unqualified() {
        assert_eq!(
            qualify("/system/ask/7", "a"),
            "/system/nodes/a/system/ask/7"
        );
        assert_eq!(qualify("/user/x", "a"), "/user/x");
        assert_eq!(
            qualify("/system/nodes/b/user/y", "a"),
            "/system/nodes/b/user/y"
        );
        assert_eq!(qualify("/systemic", "a"), "/systemic");
        let crossed = qualify("/system/ask/7", "a");
        assert!(
            ActorPath::parse(&crossed).is_ok(),
            "a qualified path is a path"
        );
        assert_eq!(localize(&crossed, "a"), "/system/ask/7");
        assert_eq!(localize(&crossed, "b"), crossed);
        assert_eq!(split_qualified(&crossed), Some(("a", "/system/ask/7")));
        assert_eq!(split_qualified("/user/x"), None);
    }

    #[test]
    fn an_envelope_crosses_whole() {
        let sender = Address {
            path: ActorPath::parse("/system/ask/3").unwrap(),
            incarnation: 3,
        };
        let mut sent = Envelope::new(Some(sender.clone()), "K", vec![1, 2, 3]);
        sent.urgent = true;
        let frame = Frame::Deliver {
            path: "/user/b".into(),
            incarnation: None,
            msg: msg(&sent, "a"),
        };
        let bytes = encode(&vec![frame]);
        let frames: Vec<Frame> = decode(&bytes).unwrap();
        let Frame::Deliver { msg, .. } = frames.into_iter().next().unwrap() else {
            panic!("a deliver frame")
        };
        // At b the sender is a's; back at a it is a's own endpoint again.
        let at_b = envelope(msg.clone(), "b").unwrap();
        assert_eq!(
            at_b.sender.unwrap().path.as_str(),
            "/system/nodes/a/system/ask/3"
        );
        let home = envelope(msg, "a").unwrap();
        assert_eq!(home.sender, Some(sender));
        assert_eq!(
            (home.kind.as_str(), home.body, home.urgent),
            ("K", vec![1, 2, 3], true)
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode::<Vec<Frame>>(&[0xff, 0xff, 0xff, 0x01, 9]).is_err());
        assert!(decode::<Heartbeat>(&[]).is_err());
    }
}
