//! How a node joins: its configuration, the errors of joining and of cluster operations, and
//! the names of the cluster's subjects and buckets.
//!
//! Invariants:
//! - Node and cluster names are NATS subject tokens and bucket names (`A-Z a-z 0-9 _ -`), so
//!   no name can reach outside its cluster's prefix.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream::kv;

use crate::error::BoxError;

/// How a host joins a cluster.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// The NATS server(s), such as `nats://127.0.0.1:4222`.
    pub url: String,
    /// This node's name, unique in the cluster (`A-Z a-z 0-9 _ -`).
    pub node: String,
    /// The cluster's name: every subject and bucket is under it (default `mote`).
    pub name: String,
    /// A NATS token, if the server wants one.
    pub token: Option<String>,
    /// A NATS credentials file (JWT and nkey seed), if the server wants one.
    pub credentials: Option<PathBuf>,
    /// How often a node beats (default 1 s).
    pub heartbeat: Duration,
    /// Silence after which a node is down (default 3 s).
    pub failure_timeout: Duration,
    /// Frames queued for other nodes before further sends are refused (default 65,536).
    pub link_capacity: usize,
}

impl ClusterConfig {
    /// A node `node` of the cluster `mote` at `url`, with the default timings.
    pub fn new(url: impl Into<String>, node: impl Into<String>) -> Self {
        ClusterConfig {
            url: url.into(),
            node: node.into(),
            name: "mote".to_owned(),
            token: None,
            credentials: None,
            heartbeat: Duration::from_secs(1),
            failure_timeout: Duration::from_secs(3),
            link_capacity: 1 << 16,
        }
    }
}

/// Why a host could not join a cluster, or a cluster operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A node or cluster name outside `A-Z a-z 0-9 _ -` (or empty, or over 64 bytes).
    #[error("invalid {what} name {name:?}: use 1-64 of A-Z a-z 0-9 _ -")]
    InvalidName {
        /// `node` or `cluster`.
        what: &'static str,
        /// The name given.
        name: String,
    },
    /// The NATS server could not be reached or refused the credentials.
    #[error("cannot connect to NATS at {url}")]
    Connect {
        /// The server.
        url: String,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// Another live node of the cluster has this name.
    #[error("the node name `{0}` is taken by a live node of this cluster")]
    NameTaken(String),
    /// A JetStream operation failed (is the server running with `-js`?).
    #[error("JetStream {what} failed (is nats-server running with -js?)")]
    JetStream {
        /// What was being done.
        what: &'static str,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// A live node owns this top-level path.
    #[error("{path} belongs to node {node}")]
    Claimed {
        /// The path.
        path: String,
        /// Its node.
        node: String,
    },
    /// This host is a node of a cluster already.
    #[error("this host has joined a cluster already")]
    AlreadyJoined,
    /// A node did not answer a request in time.
    #[error("node {0} did not answer")]
    NoAnswer(String),
}

impl ClusterError {
    pub(super) fn jetstream(what: &'static str, source: impl Into<BoxError>) -> Self {
        ClusterError::JetStream {
            what,
            source: source.into(),
        }
    }
}

/// True if `name` can be a NATS subject token and a bucket name: 1-64 of `A-Z a-z 0-9 _ -`.
pub(crate) fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks a node or cluster name: a NATS subject token and a bucket name.
pub(super) fn check_name(what: &'static str, name: &str) -> Result<(), ClusterError> {
    if is_name(name) {
        Ok(())
    } else {
        Err(ClusterError::InvalidName {
            what,
            name: name.to_owned(),
        })
    }
}

/// Subjects and buckets of one cluster.
pub(super) struct Names {
    prefix: String,
}

impl Names {
    pub(super) fn new(cluster: &str) -> Self {
        Names {
            prefix: format!("mote.{cluster}"),
        }
    }
    pub(super) fn heartbeats(&self) -> String {
        format!("{}.hb", self.prefix)
    }
    pub(super) fn to(&self, node: &str) -> String {
        format!("{}.to.{node}", self.prefix)
    }
    pub(super) fn control(&self, node: &str) -> String {
        format!("{}.ctl.{node}", self.prefix)
    }
    pub(super) fn upgrades(&self, node: &str) -> String {
        format!("{}.upgrade.{node}", self.prefix)
    }
    pub(super) fn bucket(&self, what: &str) -> String {
        format!("{}-{what}", self.prefix.replace('.', "-"))
    }
}

/// Connects to NATS with the config's credentials.
pub(super) async fn connect(
    config: &ClusterConfig,
    name: String,
) -> Result<async_nats::Client, ClusterError> {
    connect_nats(
        &config.url,
        config.token.as_deref(),
        config.credentials.as_deref(),
        name,
    )
    .await
    .map_err(|source| ClusterError::Connect {
        url: config.url.clone(),
        source,
    })
}

/// Connects to NATS at `url` as `name`, with a token or a credentials file if given.
pub(crate) async fn connect_nats(
    url: &str,
    token: Option<&str>,
    credentials: Option<&Path>,
    name: String,
) -> Result<async_nats::Client, BoxError> {
    let mut options = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5));
    if let Some(token) = token {
        options = options.token(token.to_owned());
    }
    if let Some(path) = credentials {
        options = options.credentials_file(path).await?;
    }
    Ok(options.connect(url).await?)
}

/// Opens (or creates) a key-value bucket of the cluster.
pub(super) async fn bucket(
    js: &async_nats::jetstream::Context,
    name: String,
) -> Result<kv::Store, ClusterError> {
    js.create_or_update_key_value(kv::Config {
        bucket: name,
        history: 1,
        ..Default::default()
    })
    .await
    .map_err(|e| ClusterError::jetstream("opening a key-value bucket", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_inside_their_cluster() {
        for good in ["a", "node-1", "east_2", &"x".repeat(64)] {
            assert!(check_name("node", good).is_ok(), "{good}");
        }
        for bad in ["", "a.b", "a*", "a>", "a b", "ü", &"x".repeat(65)] {
            assert!(
                matches!(
                    check_name("node", bad),
                    Err(ClusterError::InvalidName { .. })
                ),
                "{bad:?}"
            );
        }
        let names = Names::new("shop");
        assert_eq!(names.heartbeats(), "mote.shop.hb");
        assert_eq!(names.to("b"), "mote.shop.to.b");
        assert_eq!(names.control("b"), "mote.shop.ctl.b");
        assert_eq!(names.bucket("leases"), "mote-shop-leases");
    }
}
