//! `router`: Akka's routers (group and pool), µJavaActors' load-balanced categories. It
//! passes every message on to one of its routees, chosen by a [`Strategy`], with the
//! message's original sender (so a routee's reply goes straight back to the requester, an
//! ask included).
//!
//! Routees are paths given in [`Config::routees`] (a group: the router does not own them) or
//! a [`Pool`] of children the router spawns (`routee-0`, `routee-1`, ...), supervises and
//! watches: a pool routee that stops for good leaves the set. With no routee left, a message
//! is a dead letter (`rejected`).
//!
//! Init: [`Config`] as JSON. Control kinds: [`AddRoutee`], [`RemoveRoutee`], [`GetRoutees`]
//! (replied with [`Routees`]) and [`Broadcast`] (its message goes to every routee). Every other
//! kind is routed; kinds starting `router.` are reserved (an unknown one is rejected).

use serde::{Deserialize, Serialize};

/// The module name of the component (`builtin = "router"`).
pub const MODULE: &str = "router";

/// How the router picks a routee for each message.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Each routee in turn.
    RoundRobin,
    /// A routee picked at random, uniformly.
    Random,
    /// By the value of a top-level field of the JSON body ([`Config::hash_key`]): the same
    /// value always reaches the same routee while the set is unchanged (rendezvous hashing, so
    /// adding or removing a routee moves only that routee's share of the values).
    ConsistentHash,
    /// The routee whose mailbox holds the fewest messages (ties in turn); a routee whose
    /// mailbox cannot be read (not on this node, not alive) comes last.
    SmallestMailbox,
}

/// How the router handles a pool routee's failure (Akka's supervisor strategy for a pool).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Directive {
    /// A fresh instance at the same path and mailbox (the default).
    #[default]
    Restart,
    /// Drop the failed message and go on (a trapped instance is restarted anyway).
    Resume,
    /// Stop it: it leaves the routees.
    Stop,
    /// Fail the router itself, for its own supervisor to decide.
    Escalate,
}

/// Routees the router spawns as its children and supervises.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    /// The deployed module each routee runs.
    pub module: String,
    /// How many routees (at least 1, at most [`Config::max_routees`]).
    pub size: u32,
    /// Each routee's init, as text (default empty).
    #[serde(default)]
    pub init: String,
    /// What a routee's failure leads to (default `restart`).
    #[serde(default)]
    pub directive: Directive,
    /// Restarts of one routee allowed within `within_ms`; one more escalates to the router
    /// (default 3).
    #[serde(default = "max_restarts")]
    pub max_restarts: u32,
    /// The window of `max_restarts`, in milliseconds (default 10000).
    #[serde(default = "within_ms")]
    pub within_ms: u64,
}

impl Pool {
    /// `size` routees of `module`, each started with `init`, restarted when they fail.
    pub fn of(module: impl Into<String>, size: u32, init: impl Into<String>) -> Self {
        Pool {
            module: module.into(),
            size,
            init: init.into(),
            directive: Directive::Restart,
            max_restarts: max_restarts(),
            within_ms: within_ms(),
        }
    }
}

/// The router's configuration, its spawn `init` (JSON).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// How to pick a routee.
    pub strategy: Strategy,
    /// The top-level body field whose value picks the routee (`consistent-hash` only, and
    /// required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_key: Option<String>,
    /// Routees by path, absolute or relative to the router (default none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routees: Vec<String>,
    /// Routees the router spawns, after the paths (default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<Pool>,
    /// Routees at most, of both kinds; an `add-routee` past it is rejected (default 1000).
    #[serde(default = "max_routees")]
    pub max_routees: u32,
}

impl Config {
    /// A router with this strategy over the routees at `paths`.
    pub fn group<S: Into<String>>(strategy: Strategy, paths: impl IntoIterator<Item = S>) -> Self {
        Config {
            strategy,
            hash_key: None,
            routees: paths.into_iter().map(Into::into).collect(),
            pool: None,
            max_routees: max_routees(),
        }
    }

    /// A router with this strategy over a pool of children.
    pub fn pool(strategy: Strategy, pool: Pool) -> Self {
        Config {
            pool: Some(pool),
            ..Config::group(strategy, Vec::<String>::new())
        }
    }

    /// A consistent-hash router over the routees at `paths`, keyed by the body field `key`.
    pub fn consistent_hash<S: Into<String>>(
        key: impl Into<String>,
        paths: impl IntoIterator<Item = S>,
    ) -> Self {
        Config {
            hash_key: Some(key.into()),
            ..Config::group(Strategy::ConsistentHash, paths)
        }
    }
}

fn max_restarts() -> u32 {
    3
}

fn within_ms() -> u64 {
    10_000
}

fn max_routees() -> u32 {
    1000
}

/// Adds the routee at `path` (kind `router.add-routee`); one already there is left as it is.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct AddRoutee {
    /// Its path, absolute or relative to the router.
    pub path: String,
}

/// Removes the routee at `path` (kind `router.remove-routee`), spelled as [`Routees`] lists
/// it; a pool routee is stopped. Rejected if there is none.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RemoveRoutee {
    /// Its path, as [`Routees`] lists it.
    pub path: String,
}

/// Asks for the [`Routees`] (kind `router.get-routees`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct GetRoutees {}

/// The routees now, in routing order (kind `router.routees`), the reply to [`GetRoutees`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Routees {
    /// Their paths: as given for the configured and added ones, absolute for the pool's.
    pub routees: Vec<String>,
    /// Messages routed so far (broadcasts count once).
    pub routed: u64,
}

/// Sends one message to every routee, with the broadcaster as its sender (kind
/// `router.broadcast`). Its body is `body` (any JSON, sent as its text) or `bytes` (a binary
/// body, as an array of byte values), exactly one of them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Broadcast {
    /// The kind of the message to send.
    pub kind: String,
    /// A JSON body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
    /// A binary body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Vec<u8>>,
}

impl Broadcast {
    /// A broadcast of a typed message, in its own encoding.
    pub fn of<M: crate::Message>(msg: &M) -> crate::Result<Self> {
        let encoded = crate::encode(msg)?;
        Ok(match M::ENCODING {
            crate::Encoding::Json => Broadcast {
                kind: M::KIND.to_string(),
                body: Some(serde_json::from_slice(&encoded)?),
                bytes: None,
            },
            _ => Broadcast {
                kind: M::KIND.to_string(),
                body: None,
                bytes: Some(encoded),
            },
        })
    }

    /// The kind and encoded body of the message to send, or why there is none.
    pub fn message(&self) -> crate::Result<(&str, Vec<u8>)> {
        match (&self.body, &self.bytes) {
            (Some(body), None) => Ok((&self.kind, serde_json::to_vec(body)?)),
            (None, Some(bytes)) => Ok((&self.kind, bytes.clone())),
            _ => Err(crate::Error::msg(
                "router.broadcast: give exactly one of `body` and `bytes`",
            )),
        }
    }
}

crate::json_message!(
    Config = "router.config",
    AddRoutee = "router.add-routee",
    RemoveRoutee = "router.remove-routee",
    GetRoutees = "router.get-routees",
    Routees = "router.routees",
    Broadcast = "router.broadcast",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_reads_its_json_with_defaults() {
        let config: Config = serde_json::from_str(
            r#"{"strategy": "consistent-hash", "hash_key": "user", "routees": ["/user/a"]}"#,
        )
        .unwrap();
        assert_eq!(config, Config::consistent_hash("user", ["/user/a"]));
        let config: Config = serde_json::from_str(
            r#"{"strategy": "smallest-mailbox", "pool": {"module": "counter", "size": 4}}"#,
        )
        .unwrap();
        assert_eq!(
            config,
            Config::pool(Strategy::SmallestMailbox, Pool::of("counter", 4, ""))
        );
        assert!(serde_json::from_str::<Config>(r#"{"strategy": "fastest"}"#).is_err());
    }

    #[test]
    fn a_broadcast_carries_a_json_or_a_binary_body() {
        #[derive(Serialize, Deserialize)]
        struct Ping {
            n: u32,
        }
        crate::json_message!(Ping = "ping");
        #[derive(Serialize, Deserialize)]
        struct Bin(u32);
        crate::message!(Bin);

        let json = Broadcast::of(&Ping { n: 3 }).unwrap();
        assert_eq!(json.body, Some(serde_json::json!({"n": 3})));
        assert_eq!(json.message().unwrap(), ("ping", br#"{"n":3}"#.to_vec()));
        let bin = Broadcast::of(&Bin(7)).unwrap();
        assert_eq!(bin.message().unwrap(), ("Bin", vec![7]));
        let neither = Broadcast {
            kind: "x".into(),
            body: None,
            bytes: None,
        };
        assert!(neither.message().is_err());
    }
}
