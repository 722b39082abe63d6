//! `pod-manager`: Dust's PodManagerActor, with PodDeadLetterActor-style creation on first
//! message. A persistent parent of named children ("pods") of one module: a pod is created
//! by the first message for it and then lives at `<manager path>/<pod>`, supervised by the
//! manager (restarted by default). The manager journals the set of pod names, so after its own
//! restart or a host restart it spawns them all again under the same names (and a persistent
//! pod, keyed by its path, recovers its own state).
//!
//! A message reaches a pod, created if need be, with its original sender, in three ways:
//! - [`Deliver`] (`pod-manager.deliver`): `{"pod": p, "kind": k, "body": <JSON>}` (or
//!   `"bytes": [..]` for a binary body) is passed to pod `p` as kind `k`;
//! - any other kind whose body is a JSON object with a string field `"pod"` is passed to that
//!   pod untouched (kind and body);
//! - a message sent straight to `<manager path>/<pod>` while no such pod lives becomes a dead
//!   letter, which the manager (subscribed to `/system/deadletters`) picks up, creating the pod
//!   and passing the message on (Dust's PodDeadLetterActor; off with
//!   `"create_on_dead_letter": false`).
//!
//! Init: [`Config`] as JSON. Control kinds: [`Create`] (replied with [`Created`]), [`Deliver`],
//! [`List`] (replied with [`Pods`]), [`Remove`] (replied with [`Removed`]).

use serde::{Deserialize, Serialize};

pub use super::supervision::{OnFailure, Supervision};
use crate::message::{Encoding, Message, encode};

/// The module name of the component (`builtin = "pod-manager"`).
pub const MODULE: &str = "pod-manager";

/// The longest pod name, in bytes.
pub const MAX_POD_NAME: usize = super::supervision::MAX_CHILD_NAME;

/// The pod manager's configuration, its spawn `init` (JSON).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The deployed module every pod runs.
    pub module: String,
    /// Every pod's init: a JSON string is passed as its text, `null` as nothing, any other
    /// JSON value as its JSON text (default `null`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub init: serde_json::Value,
    /// Pods at once (default 1000); past it a message for a new pod is refused (a dead letter,
    /// `rejected`).
    #[serde(default = "max_pods")]
    pub max_pods: u32,
    /// How a failed pod is supervised (default `restart`, 3 restarts in 10 s: one more fails
    /// the manager, whose restart spawns every pod again). A pod that stops is forgotten.
    #[serde(default)]
    pub strategy: Supervision,
    /// Whether a message sent to a pod's path while it does not live creates it (default
    /// true).
    #[serde(default = "yes")]
    pub create_on_dead_letter: bool,
}

impl Config {
    /// Pods of `module`, spawned with no init, with the default bound and strategy.
    pub fn of(module: impl Into<String>) -> Self {
        Config {
            module: module.into(),
            init: serde_json::Value::Null,
            max_pods: max_pods(),
            strategy: Supervision::default(),
            create_on_dead_letter: true,
        }
    }

    /// The init bytes every pod is spawned with.
    pub fn init_bytes(&self) -> Vec<u8> {
        super::supervision::init_bytes(&self.init)
    }
}

fn max_pods() -> u32 {
    1000
}

fn yes() -> bool {
    true
}

/// Creates a pod if it does not live (kind `pod-manager.create`), Dust's `CreateChildMsg`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Create {
    /// The pod's name (1 to [`MAX_POD_NAME`] bytes, no `/` or `#`).
    pub pod: String,
}

/// The answer to [`Create`] (kind `pod-manager.created`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Created {
    /// The pod's name.
    pub pod: String,
    /// Its absolute path.
    pub path: String,
    /// False if it lived already.
    pub new: bool,
}

/// Passes a message to a pod, created if need be, with the sender of this message (kind
/// `pod-manager.deliver`): Dust's `CreateChildMsg` with a message.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Deliver {
    /// The pod's name.
    pub pod: String,
    /// The kind the pod receives.
    pub kind: String,
    /// The body as JSON: the pod receives its JSON text (absent: see `bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
    /// The body as bytes, for a binary body (used when `body` is absent; neither: empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Vec<u8>>,
}

impl Deliver {
    /// `msg` for pod `pod`: a JSON message as `body`, any other as `bytes`.
    pub fn of<M: Message>(pod: impl Into<String>, msg: &M) -> crate::Result<Self> {
        let encoded = encode(msg)?;
        let (body, bytes) =
            match M::ENCODING {
                Encoding::Json => (
                    Some(serde_json::from_slice(&encoded).map_err(|e| {
                        crate::Error::msg(format!("`{}` is not JSON: {e}", M::KIND))
                    })?),
                    None,
                ),
                _ => (None, Some(encoded)),
            };
        Ok(Deliver {
            pod: pod.into(),
            kind: M::KIND.to_string(),
            body,
            bytes,
        })
    }

    /// The body the pod receives.
    pub fn body_bytes(&self) -> Vec<u8> {
        match (&self.body, &self.bytes) {
            (Some(json), _) => serde_json::to_vec(json).unwrap_or_default(),
            (None, Some(bytes)) => bytes.clone(),
            (None, None) => Vec::new(),
        }
    }
}

/// Asks for the [`Pods`] (kind `pod-manager.list`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct List {}

/// The pods' names, sorted (kind `pod-manager.pods`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Pods {
    /// Their names.
    pub pods: Vec<String>,
}

/// Stops a pod and forgets it (kind `pod-manager.remove`); its own durable state, if any, is
/// kept for the next pod of that name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Remove {
    /// The pod's name.
    pub pod: String,
}

/// The answer to [`Remove`] (kind `pod-manager.removed`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Removed {
    /// The pod's name.
    pub pod: String,
    /// Whether such a pod lived.
    pub existed: bool,
}

/// The manager's own timer, to try again a creation that found the name still taken by a
/// stopping pod (kind `pod-manager.retry`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Retry {}

crate::json_message!(
    Config = "pod-manager.config",
    Create = "pod-manager.create",
    Created = "pod-manager.created",
    Deliver = "pod-manager.deliver",
    List = "pod-manager.list",
    Pods = "pod-manager.pods",
    Remove = "pod-manager.remove",
    Removed = "pod-manager.removed",
    Retry = "pod-manager.retry",
);

/// Whether `pod` is a name a pod may have: 1 to [`MAX_POD_NAME`] bytes, no `/`, `#` or
/// control characters, not `.` or `..`.
pub fn valid_pod_name(pod: &str) -> bool {
    super::supervision::valid_child_name(pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Note {
        text: String,
    }
    crate::json_message!(Note = "note");

    #[derive(Serialize, Deserialize)]
    struct Binary(u8);
    crate::message!(Binary);

    #[test]
    fn a_delivery_carries_json_as_json_and_anything_else_as_bytes() {
        let note = Deliver::of("a", &Note { text: "hi".into() }).unwrap();
        assert_eq!(
            serde_json::to_string(&note).unwrap(),
            r#"{"pod":"a","kind":"note","body":{"text":"hi"}}"#
        );
        assert_eq!(note.body_bytes(), br#"{"text":"hi"}"#);
        let binary = Deliver::of("b", &Binary(7)).unwrap();
        assert_eq!(binary.bytes.as_deref(), Some(&[7u8][..]));
        assert_eq!(binary.body_bytes(), [7]);
        let empty: Deliver = serde_json::from_str(r#"{"pod": "c", "kind": "k"}"#).unwrap();
        assert!(empty.body_bytes().is_empty());
    }
}
