//! `service-manager`: Dust's ServiceManagerActor and its one-shot service workers. Every
//! request is handled by a fresh worker spawned for it from [`Config::module`]; the worker's
//! reply goes to the requester from the manager itself ("as though the Service Manager
//! processed the message"), and the worker is stopped. At most [`Config::max_workers`] run at
//! once; more requests wait in a bounded queue, and past [`Config::queue`] a request is a dead
//! letter (`rejected`). A worker that fails or takes longer than
//! [`Config::worker_timeout_ms`] costs its requester a [`Failed`] reply.
//!
//! Init: [`Config`] as JSON. Control kinds: [`GetStatus`] (replied with [`Status`]). Every
//! other kind is a request, handed to a worker untouched.

use serde::{Deserialize, Serialize};

/// The module name of the component (`builtin = "service-manager"`).
pub const MODULE: &str = "service-manager";

/// The manager's configuration, its spawn `init` (JSON).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The deployed module each worker is spawned from.
    pub module: String,
    /// Every worker's init, as text (default empty).
    #[serde(default)]
    pub init: String,
    /// Workers running at most at once (default 16).
    #[serde(default = "sixteen")]
    pub max_workers: u32,
    /// Requests waiting at most for a worker; past it a request is a dead letter (default
    /// 1000, at most the host's stash quota).
    #[serde(default = "thousand")]
    pub queue: u32,
    /// How long a worker may take to reply, in milliseconds, restarts included; then its
    /// requester gets [`Failed`] and it is stopped (default 30000; 0: no limit).
    #[serde(default = "thirty_seconds")]
    pub worker_timeout_ms: u64,
    /// What a worker's failure (a trap, an error) leads to (default `stop`).
    #[serde(default)]
    pub strategy: WorkerStrategy,
    /// With `restart`: how many times one request is handed to its restarted worker again
    /// before it fails (default 3).
    #[serde(default = "three")]
    pub max_restarts: u32,
}

impl Config {
    /// Workers from `module`, with every default.
    pub fn new(module: impl Into<String>) -> Self {
        Config {
            module: module.into(),
            init: String::new(),
            max_workers: sixteen(),
            queue: thousand(),
            worker_timeout_ms: thirty_seconds(),
            strategy: WorkerStrategy::default(),
            max_restarts: three(),
        }
    }
}

fn sixteen() -> u32 {
    16
}

fn thousand() -> u32 {
    1000
}

fn thirty_seconds() -> u64 {
    30_000
}

fn three() -> u32 {
    3
}

/// How the manager supervises its workers (JSON: `"stop"`, `"restart"`, `"escalate"`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum WorkerStrategy {
    /// The failed worker is stopped and its requester gets [`Failed`] at once.
    #[default]
    Stop,
    /// The worker is restarted (a fresh instance) and handed its request again, up to
    /// `max_restarts` times; then as `stop`.
    Restart,
    /// The requester gets [`Failed`], and the manager fails with the worker's failure for its
    /// own supervisor to decide (its queue, kept by the host, survives a restart; the other
    /// requests in progress get no reply).
    Escalate,
}

/// A request that got no reply from its worker (kind `service-manager.failed`), sent to its
/// requester.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// What went wrong: `trap`, `error` (or another failure kind of the host), `timeout`,
    /// `spawn` (no worker could be started) or `stopped` (it stopped without replying).
    pub failure: String,
    /// In words.
    pub reason: String,
}

/// Asks for a [`Status`] (kind `service-manager.get-status`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct GetStatus {}

/// How the manager is doing (kind `service-manager.status`), the reply to [`GetStatus`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Status {
    /// Workers alive now (spawned and not yet terminated).
    pub running: u32,
    /// Requests waiting for a worker.
    pub queued: u32,
    /// Requests answered with their worker's reply so far.
    pub served: u64,
    /// Requests answered with [`Failed`] so far.
    pub failed: u64,
    /// Requests refused (queue full) so far: each became a dead letter.
    pub refused: u64,
    /// The most workers alive at once so far.
    pub peak: u32,
}

/// The manager's own timer for a worker's deadline (kind `service-manager.timeout`); from
/// anyone else it is ignored.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Timeout {
    /// The worker's name.
    pub worker: String,
}

crate::json_message!(
    Config = "service-manager.config",
    Failed = "service-manager.failed",
    GetStatus = "service-manager.get-status",
    Status = "service-manager.status",
    Timeout = "service-manager.timeout",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_names_its_module_and_defaults_the_rest() {
        let config: Config = serde_json::from_str(r#"{"module": "w"}"#).unwrap();
        assert_eq!(config, Config::new("w"));
        let config: Config = serde_json::from_str(
            r#"{"module": "w", "init": "7", "strategy": "restart", "max_restarts": 1}"#,
        )
        .unwrap();
        assert_eq!(config.strategy, WorkerStrategy::Restart);
        assert_eq!((config.init.as_str(), config.max_restarts), ("7", 1));
        assert!(serde_json::from_str::<Config>(r#"{"module": "w", "strategy": "x"}"#).is_err());
    }
}
