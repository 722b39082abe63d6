//! Typed messages for the pattern components that ship inside `mote` (the `mote-patterns`
//! crate; sources in `example-actors/patterns/`). Each pattern speaks JSON, so an actor in any
//! language can use it; these types are its schema for Rust actors (and for the components
//! themselves). A pattern's configuration is its spawn `init`: encode it with [`init`].
//!
//! Kinds are `<pattern>.<verb>`; every other kind is a message the pattern passes on
//! untouched, with its original sender (but for the service manager, which answers a request
//! as itself, as Dust's does).

pub mod circuit_breaker;
pub mod pipeline;
pub mod pipeline_builder;
pub mod pod_manager;
pub mod reaper;
pub mod router;
pub mod service_manager;
pub mod supervision;
pub mod throttle;

/// The JSON `init` bytes of a pattern's configuration, for `spawn`.
pub fn init<C: serde::Serialize>(config: &C) -> Vec<u8> {
    serde_json::to_vec(config).unwrap_or_default()
}

/// A pattern's control message (kind `<pattern>.<verb>`) decoded from its JSON body; a body
/// that does not decode is the sender's problem: a malformed-message error, which makes the
/// message a dead letter (`rejected`) while the pattern goes on.
pub fn control<M: crate::Message>(env: &crate::Envelope) -> crate::Result<M> {
    crate::decode(&env.kind, &env.body).map_err(crate::Error::into_malformed)
}

/// A refusal of the message being handled, saying `why`: it becomes a dead letter
/// (`rejected`), and the pattern goes on.
pub fn malformed(why: impl core::fmt::Display) -> crate::Error {
    crate::Error::msg(why).into_malformed()
}

/// A pattern's configuration from its `init` bytes, or a message naming what is wrong.
pub fn config<C: serde::de::DeserializeOwned>(pattern: &str, init: &[u8]) -> crate::Result<C> {
    serde_json::from_slice(init)
        .map_err(|e| crate::Error::msg(format!("{pattern}: bad configuration: {e}")))
}
