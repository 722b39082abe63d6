//! Mote: a host that runs actors compiled as WebAssembly components against the `mote:actor`
//! WIT world (`wit/actor.wit`). Every actor lives in its own wasmtime `Store` and instance, so a
//! trap, a memory bomb or an endless loop in one actor cannot harm another or the host.
//!
//! Data flows one way, and back only through messages:
//!
//! ```text
//! CLI / embedding API -> ActorSystem -> cell (mailbox + lifecycle) -> wasm instance (Store)
//!                            ^                                              |
//!                            +-------- host imports (tell, spawn, ...) <----+
//! ```
//!
//! Module map:
//! - [`system`]: `ActorSystem`, the public API (deploy, spawn, tell, stop, probe, shutdown).
//! - `cell`: the task that owns one actor and runs its lifecycle.
//! - `mailbox`: the two lanes (system first, then user) and the `ActorRef` handle.
//! - `instance`: the `Store`, limits (memory, CPU deadline), calls into the exports.
//! - `imports`: the host imports an actor sees (`host`, `supervision`).
//! - [`supervisor`]: strategies, directives, restart intensity and backoff.
//! - `guest_output`: guest stdout/stderr into the host log.
//! - [`module`]: the module registry: versions, content hashes, the compiled cache, contract checks.
//! - `registry`: live actors by path; sibling names unique.
//! - [`address`]: paths, names, relative selection.
//! - [`deadletters`]: undeliverable messages, counted, logged and published.
//! - `timers`: one driver task firing scheduled messages; cancelled with their actor.
//! - `pubsub`: named sets of actors, used for topics and for groups.
//! - [`messaging`]: publish, group sends, dead letters to `/system/deadletters` subscribers.
//! - [`ask`]: requests with a deadline, answered exactly once.
//! - `engine`: the shared wasmtime engine and the epoch ticker that preempts guests.
//! - `arena`: linear memories and fiber stacks carved from a few large mappings.
//! - [`config`]: `HostConfig`, one knob per method.
//! - [`manifest`]: the TOML deployment manifest read by `mote run`.
//! - [`store`]: the redb file: snapshots, event journals, outbox, reminders, schema version.
//! - `committer`: group commit, one thread folding concurrent steps into one transaction.
//! - `persistence`: the `persistence` import, steps and commit before effects.
//! - [`entities`]: virtual actors activated by message and passivated when idle.
//! - [`upgrade`]: hot swap of running actors to another module version, rolling.
//! - [`examples`]: paths of the example actors built with this crate (demo, tests, bench).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use mote_host::{ActorSystem, HostConfig};
//! let system = ActorSystem::new(HostConfig::new())?;
//! system.deploy_file("counter", "counter.wasm")?;
//! system.spawn("counter", "counter", b"")?;
//! system.tell("/user/counter", "Counter", vec![0, 5])?; // postcard of Counter::Add(5)
//! system.shutdown().await.ok();
//! # Ok(()) }
//! ```

pub mod address;
mod arena;
pub mod ask;
mod bindings;
mod cell;
mod committer;
pub mod config;
pub mod deadletters;
mod engine;
pub mod entities;
pub mod error;
pub mod examples;
mod guest_output;
mod imports;
mod instance;
mod mailbox;
pub mod manifest;
mod message;
pub mod messaging;
pub mod module;
mod persistence;
mod pubsub;
mod registry;
pub mod store;
pub mod supervisor;
pub mod system;
mod timers;
pub mod upgrade;

/// Tunes glibc's allocator for a host process: no heap trimming and no per-allocation `mmap`
/// for large blocks. Both return memory to the kernel eagerly, and each time every core must
/// flush its TLB (an inter-processor interrupt); with many actors starting and stopping that
/// halved spawn throughput in `mote-bench w2`. Binaries call this once at start; a library
/// embedder may or may not want it.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before threads allocate much.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
    }
}

pub use address::{ActorPath, Address};
pub use ask::{ASK_TIMEOUT_KIND, AskError};
pub use committer::CommitStats;
pub use config::HostConfig;
pub use deadletters::{DeadLetter, DeadLetterReason};
pub use entities::EntityOptions;
pub use error::{AddressError, HostError, ManifestError, ModuleError, SendError, SpawnError};
pub use message::{Envelope, StopReason};
pub use messaging::DEAD_LETTER_KIND;
pub use module::{CONTRACT_VERSION, DEFAULT_VERSION, ModuleInfo, ModuleStats};
pub use store::{SCHEMA_VERSION, StoreError};
pub use supervisor::{Directive, Scope, Strategy};
pub use system::{ActorInfo, ActorSystem, Probe, SpawnOptions, SupervisionEvent, TERMINATED_KIND};
pub use upgrade::{UpgradeError, UpgradeOptions, UpgradeProgress, UpgradeReport, Upgraded};
