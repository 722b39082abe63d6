//! The example actors of this repository, built to `.wasm` components by this crate's build
//! script (the pattern of wasmtime's `crates/test-programs`).
//!
//! Used by `mote demo`, the integration tests and `mote-bench`. Empty when the crate was built
//! without the repository's `example-actors/` (for instance from a published package).

use std::path::PathBuf;

/// The directory holding the built example components, if they were built.
pub fn dir() -> Option<PathBuf> {
    option_env!("MOTE_EXAMPLES_DIR").map(PathBuf::from)
}

/// The path of one example component, e.g. `path("pingpong")`.
pub fn path(name: &str) -> Option<PathBuf> {
    dir().map(|d| d.join(format!("{name}.wasm")))
}

/// The directory holding the C bindings of the actor world (`mote_world.h`, `mote_world.c`,
/// `mote_world_component_type.o`) that wit-bindgen's C generator wrote for the C SDK, if this
/// crate was built inside the repository.
pub fn c_bindings_dir() -> Option<PathBuf> {
    option_env!("MOTE_C_BINDINGS_DIR").map(PathBuf::from)
}

/// The names of all example actors built into this crate.
pub const NAMES: &[&str] = &[
    "pingpong",
    "counter",
    "sequence",
    "relay",
    "tree",
    "crasher",
    "supervisor",
    "watcher",
    "gate",
    "ticker",
    "subscriber",
    "publisher",
    "deadwatch",
    "asker",
    "ledger",
    "journal",
    "entity",
    "reminder",
    "versioned_v1",
    "versioned_v2",
    "versioned_v3",
    "versioned_v4",
    "order_desk",
    "stage",
    "py_orders",
    "py_journal",
    "py_ticker",
    "py_supervisor",
    "py_versioned_v1",
    "py_versioned_v2",
    "py_versioned_v3",
    "py_entity",
    "py_raw",
    "py_features",
    "py_stage",
    "py_patterns",
    "js_events",
    "js_journal",
    "js_ticker",
    "js_supervisor",
    "js_versioned_v1",
    "js_versioned_v2",
    "js_versioned_v3",
    "js_entity",
    "js_features",
    "js_stage",
    "js_patterns",
    "js_raw",
    "c_counter",
    "c_journal",
    "c_ticker",
    "c_supervisor",
    "c_versioned_v1",
    "c_versioned_v2",
    "c_versioned_v3",
    "c_entity",
    "c_raw",
    "c_features",
    "c_extras",
    "clock",
    "attacker",
    "forwarder",
    "finder",
    "js_http_fetch",
    "fetcher",
    "lanes",
    "savina",
    "echo_worker",
];
