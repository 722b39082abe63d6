//! `circuit-breaker`: Akka's `CircuitBreaker`, as an actor in front of one target actor. It
//! passes each request on to the target as an ask and relays the reply to the request's
//! sender; while the target keeps failing, it refuses requests at once instead of piling
//! them onto it.
//!
//! A failure is an ask that gets no reply within [`Config::call_timeout_ms`] (the sender gets
//! a [`Failed`]), or a reply whose kind is one of [`Config::failure_kinds`] (relayed as it
//! is). States, as [`State`] names them:
//! - `closed`: requests pass; [`Config::max_failures`] consecutive failures open it.
//! - `open`: every request is refused with an [`Open`] reply, until the reset timeout passes.
//! - `half-open`: the first request passes as a trial, the others are refused with [`Open`];
//!   the trial's success closes the breaker, its failure opens it again (for a reset timeout
//!   doubled each time, up to [`Config::max_reset_timeout_ms`], if that is set).
//!
//! Every request is an ask, so a message the target never answers (a plain tell) counts as
//! a failure: put the breaker in front of request/reply traffic. At most
//! [`Config::max_pending`] asks wait for their outcome; past it a request is refused
//! with a [`Busy`] reply. A refused request without a sender is a dead letter (`rejected`).
//!
//! Init: [`Config`] as JSON. Control kind: [`GetState`] (replied with [`Status`]). Every other
//! kind is a request; kinds starting `circuit-breaker.` are reserved.

use serde::{Deserialize, Serialize};

/// The module name of the component (`builtin = "circuit-breaker"`).
pub const MODULE: &str = "circuit-breaker";

/// The breaker's configuration, its spawn `init` (JSON).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The actor behind the breaker: an absolute or relative path.
    pub target: String,
    /// Consecutive failures that open the breaker (at least 1; default 5).
    #[serde(default = "max_failures")]
    pub max_failures: u32,
    /// How long a request may wait for the target's reply, in milliseconds (at least 1;
    /// default 1000).
    #[serde(default = "call_timeout_ms")]
    pub call_timeout_ms: u64,
    /// How long the breaker stays open before a trial, in milliseconds (at least 1; default
    /// 10000).
    #[serde(default = "reset_timeout_ms")]
    pub reset_timeout_ms: u64,
    /// If set, each failed trial doubles the reset timeout, up to this (at least
    /// `reset_timeout_ms`); a success brings it back to `reset_timeout_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_reset_timeout_ms: Option<u64>,
    /// Reply kinds that count as failures (default none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure_kinds: Vec<String>,
    /// Requests waiting for the target at most; past it a request is refused with [`Busy`]
    /// (default 1000).
    #[serde(default = "max_pending")]
    pub max_pending: u32,
}

impl Config {
    /// A breaker in front of `target` with the default thresholds and timeouts.
    pub fn new(target: impl Into<String>) -> Self {
        Config {
            target: target.into(),
            max_failures: max_failures(),
            call_timeout_ms: call_timeout_ms(),
            reset_timeout_ms: reset_timeout_ms(),
            max_reset_timeout_ms: None,
            failure_kinds: Vec::new(),
            max_pending: max_pending(),
        }
    }
}

fn max_failures() -> u32 {
    5
}

fn call_timeout_ms() -> u64 {
    1000
}

fn reset_timeout_ms() -> u64 {
    10_000
}

fn max_pending() -> u32 {
    1000
}

/// The breaker's state.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Requests pass.
    #[default]
    Closed,
    /// Requests are refused.
    Open,
    /// One trial request may pass.
    HalfOpen,
}

/// Asks for the breaker's [`Status`] (kind `circuit-breaker.get-state`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct GetState {}

/// How the breaker is doing (kind `circuit-breaker.state`), the reply to [`GetState`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Status {
    /// The state now.
    pub state: State,
    /// Consecutive failures counted while closed.
    pub failures: u32,
    /// Requests waiting for the target's reply.
    pub pending: u32,
    /// While open: milliseconds until a trial may pass (0 otherwise).
    pub retry_in_ms: u64,
    /// The reset timeout the breaker opens (or opened) for, in milliseconds.
    pub reset_timeout_ms: u64,
    /// Requests passed on to the target so far.
    pub passed: u64,
    /// Requests answered by the breaker itself so far (open, busy, or no target to ask).
    pub refused: u64,
    /// Times it opened so far.
    pub opened: u64,
}

/// The reply to a request the open breaker refused (kind `circuit-breaker.open`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Open {
    /// Milliseconds until a trial may pass (0 while half-open and a trial is under way).
    pub retry_in_ms: u64,
}

/// The reply to a request refused because [`Config::max_pending`] requests wait already
/// (kind `circuit-breaker.busy`); also, for `call_timeout_ms` after the breaker's own
/// restart, to a request from an ask (it cannot tell one from a late answer to an ask it
/// forgot).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Busy {
    /// Requests waiting for the target.
    pub pending: u32,
}

/// The reply to a request the target did not answer in time (kind `circuit-breaker.failed`):
/// a failure.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Failed {
    /// Why, in words.
    pub reason: String,
}

crate::json_message!(
    Config = "circuit-breaker.config",
    GetState = "circuit-breaker.get-state",
    Status = "circuit-breaker.state",
    Open = "circuit-breaker.open",
    Busy = "circuit-breaker.busy",
    Failed = "circuit-breaker.failed",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_reads_its_json_with_defaults() {
        let config: Config = serde_json::from_str(r#"{"target": "/user/db"}"#).unwrap();
        assert_eq!(config, Config::new("/user/db"));
        let status = Status {
            state: State::HalfOpen,
            ..Status::default()
        };
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["state"], "half-open");
    }
}
