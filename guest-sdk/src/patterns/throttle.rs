//! `throttle`: Dust's ThrottlingRelayActor (with ProxyMsg), Akka's `Throttler`. A relay that
//! passes every message on to its target at a configured rate, in arrival order and with
//! its original sender (so a reply goes straight back to the requester), holding the
//! surplus in a bounded queue: past [`Config::queue`], a message is a dead letter
//! (`rejected`).
//!
//! Init: [`Config`] as JSON. Control kinds: [`SetRate`], [`GetStatus`] (replied with
//! [`Status`]). Every other kind is passed on.

use serde::{Deserialize, Serialize};

/// The module name of the component (`builtin = "throttle"`).
pub const MODULE: &str = "throttle";

/// The throttle's configuration, its spawn `init` (JSON).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Where messages go: an absolute or relative path.
    pub target: String,
    /// Messages passed on per `per_ms` milliseconds (at least 1).
    pub rate: u32,
    /// The rate's period in milliseconds (default 1000).
    #[serde(default = "second")]
    pub per_ms: u64,
    /// Messages that may go at once after a quiet spell (default: `rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// Messages held at most while they wait; past it a message is a dead letter (default
    /// 1000, at most the host's stash quota).
    #[serde(default = "queue")]
    pub queue: u32,
}

impl Config {
    /// `rate` messages per second to `target`, with the default burst and queue.
    pub fn per_second(target: impl Into<String>, rate: u32) -> Self {
        Config {
            target: target.into(),
            rate,
            per_ms: second(),
            burst: None,
            queue: queue(),
        }
    }
}

fn second() -> u64 {
    1000
}

fn queue() -> u32 {
    1000
}

/// Changes the rate from now on (kind `throttle.set-rate`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SetRate {
    /// Messages per `per_ms` (at least 1).
    pub rate: u32,
    /// The period in milliseconds.
    #[serde(default = "second")]
    pub per_ms: u64,
}

/// Asks for a [`Status`] (kind `throttle.get-status`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct GetStatus {}

/// How the throttle is doing (kind `throttle.status`), the reply to [`GetStatus`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Status {
    /// Messages waiting now.
    pub queued: u32,
    /// Messages passed on so far.
    pub forwarded: u64,
    /// Messages refused (queue full) so far: each became a dead letter.
    pub refused: u64,
    /// The current rate, per `per_ms`.
    pub rate: u32,
    /// The rate's period in milliseconds.
    pub per_ms: u64,
}

/// The throttle's own timer (kind `throttle.tick`); from anyone else it only refills early
/// what time has already earned.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Tick {}

crate::json_message!(
    Config = "throttle.config",
    SetRate = "throttle.set-rate",
    GetStatus = "throttle.get-status",
    Status = "throttle.status",
    Tick = "throttle.tick",
);
