//! The black-box tests that share one process: one binary links wasmtime and the host once,
//! and `cargo test` runs these tests side by side instead of one file after another. Each file
//! is a module, as it was a crate of its own.
//!
//! `guestlog.rs`, `hostile.rs` and `traces.rs` stay binaries of their own: each installs the
//! process-wide `tracing` subscriber, and `hostile.rs` measures the process's memory and log.

mod c_sdk;
mod callouts;
mod canary;
mod clock;
mod cluster;
mod cluster_modules;
mod durability;
mod foundation;
mod images;
mod js_sdk;
mod lanes;
mod loading;
mod messaging;
mod metrics;
mod patterns;
mod patterns_circuit_breaker;
mod patterns_mixed;
mod patterns_pipeline;
mod patterns_pod_manager;
mod patterns_reaper;
mod patterns_router;
mod patterns_service_manager;
mod persistence;
mod polyglot;
mod progress;
mod pull;
mod python_sdk;
mod replay;
mod snapshots;
mod stacks;
mod stash;
mod supervision;
mod upgrade;
