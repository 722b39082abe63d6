//! Mote: a host that runs actors compiled as WebAssembly components against the `mote:actor`
//! WIT world (`wit/actor.wit`). Every actor lives in its own wasmtime `Store` and instance, so a
//! trap, a memory bomb or an endless loop in one actor cannot harm another or the host.
//!
//! Data flows one way, and back only through messages:
//!
//! ```text
//! CLI / embedding API -> ActorSystem -> cell (mailbox + lifecycle) -> wasm instance (Store)
//!                            ^                                              |
//!                            +----- capabilities (tell, spawn, timers...) <-+
//! ```
//!
//! # Layers
//!
//! Each module imports only from the layers below it. The ways back up are the kernel's
//! [`Extensions`](kernel::Extensions) trait, which the actor layer implements to start actors
//! and to let the capabilities see deliveries, and its `remote::Remote`, which a cluster
//! implements to take what no local actor holds.
//!
//! ```text
//!  system      ActorSystem, Probe, Replay: the public API; wires the layers at start
//!    │         (wiring) · metrics (the OpenMetrics scrape)
//!  cluster     a cluster on NATS: node (what it does for the kernel's `remote::Remote`) ·
//!    │         tasks · wire · members · routes · leases · watches · proxy · modules · upgrades
//!  deploy      upgrade (rolling hot swap) · canary (a few first, watched, then the rest or
//!    │         back) · modules (registry, checks, compiled cache, records) · manifest
//!  actor       launch (the kernel's Extensions) · cell (lifecycle, supervision of children)
//!    │         · instance (Store, exports, limits per call)
//!  caps        the registration list, and one unit per capability: host · supervision ·
//!    │         timers · messaging · persistence (backend: the store trait, local (redb),
//!    │         jetstream; channel (numbered sends, dedup); journal, owners, history,
//!    │         entities, reminders) · clock · forwarding · lookup · naming · stashing · priority ·
//!    │         lifecycle · delivery · callouts · wasi · capability (the Capability trait,
//!    │         Call, ActorState)
//!  actor       core (what a capability sees of its caller) · step (hold, commit, release)
//!    │
//!  kernel      registry · delivery · dead letters · spawn/stop · guardian (root supervision)
//!    │         · tally (counts kept across actors' lives, for the metrics)
//!  actor       mailbox (three lanes, ActorRef) · supervisor (strategies, decisions)
//!  sandbox     engine + epoch ticker · arenas · meter (memory, CPU) · WIT bindings ·
//!              images (instrument adds the snapshot shim at deploy · baseline · image)
//!  sched       the actor scheduler: worker threads polling cells (tokio keeps I/O, time)
//!  storage     database (the redb file) · committer (group commit) · jetstream (records,
//!              checkpoints and writer leases in NATS JetStream)
//!  guestlog    guest log lines through a bounded queue and a thread of their own
//!  vocabulary  address · message · quota · config · error · stats (each actor's figures)
//!              · progress (long work reported as it goes) · trace (the span of a message)
//! ```
//!
//! Adding a capability is its unit under `caps/`, its interface in `wit/actor.wit`, and one
//! line in `caps/mod.rs`; see `caps::capability` for what a unit owns.
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

mod actor;
mod address;
mod caps;
mod cluster;
mod config;
mod deploy;
mod error;
mod guestlog;
mod kernel;
mod message;
mod progress;
mod quota;
mod sandbox;
mod sched;
mod stats;
mod storage;
mod system;
mod trace;

/// Tunes glibc's allocator for a host process: no heap trimming and no per-allocation `mmap`
/// for large blocks. Both return memory to the kernel eagerly, and each time every core must
/// flush its TLB (an inter-processor interrupt); with many actors starting and stopping that
/// halved spawn throughput in `mote-bench w2`. The heap also grows 16 MiB at a time instead of
/// by what one allocation needs (untouched pages cost no RSS): +10% w2 spawns, same-run median
/// of 7 pairs. For an embedder that keeps glibc's allocator, called once at start; Mote's own
/// binaries use mimalloc instead (faster still; see the README's Measured).
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before threads allocate much.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TOP_PAD, 16 << 20);
    }
}

pub use actor::supervisor::{Directive, FailureKind, Scope, Strategy};
pub use address::{ActorPath, Address, SYSTEM_ROOT, USER_ROOT, validate_name};
pub use caps::callouts::HTTP_RESPONSE_KIND;
pub use caps::messaging::ask::{ASK_PREFIX, ASK_TIMEOUT_KIND, AskError};
pub use caps::messaging::{DEAD_LETTER_KIND, encode_dead_letter};
pub use caps::persistence::entities::EntityOptions;
pub use cluster::modules::{
    MODULE_DEPLOYED_KIND, MODULE_REFUSED_KIND, MODULES_TOPIC, ModuleSyncError,
};
pub use cluster::{
    CLUSTER_TOPIC, ClusterConfig, ClusterError, ClusterStats, MoveError, NODE_DOWN_KIND,
    NODE_UP_KIND, RemoteActor, cluster_tree,
};
pub use config::HostConfig;
pub use deploy::cache::ModuleStats;
pub use deploy::canary::{Canary, CanaryFigures, CanaryOutcome, CanaryVerdict, RollbackReason};
pub use deploy::checks::CONTRACT_VERSION;
pub use deploy::manifest::{
    ActorSpec, Backend as StorageBackend, ClusterSpec, EntitySpec, Manifest, ModuleSource,
    ModuleSpec, decode_hex,
};
pub use deploy::modules::{DEFAULT_VERSION, ModuleInfo};
pub use deploy::upgrade::{
    NodeUpgrade, NodeUpgradeError, UpgradeError, UpgradeOptions, UpgradeProgress, UpgradeReport,
    Upgraded,
};
pub use error::{
    AddressError, BoxError, DatabaseError, HostError, ManifestError, ModuleError, ReplayError,
    SendError, ShutdownTimedOut, SpawnError, chain,
};
pub use kernel::TERMINATED_KIND;
pub use kernel::deadletters::{DEAD_LETTERS_PATH, DeadLetter, DeadLetterReason};
pub use kernel::guardian::SupervisionEvent;
pub use kernel::spawn::SpawnOptions;
pub use message::{Envelope, StopReason};
pub use progress::{Progress, Task};
pub use quota::{Quota, Quotas, RESERVED_KIND_PREFIX};
pub use sandbox::arena::StackStats;
pub use sandbox::compile_cache::{FunctionCache, FunctionCacheStats};
pub use sandbox::engine::MemoryStrategy;
pub use sandbox::image::ImageError;
pub use sandbox::instrument::InstrumentError;
pub use stats::StatsSnapshot;
pub use storage::jetstream::StoreConfig;
pub use storage::{CommitStats, SCHEMA_VERSION};
pub use system::{
    ActorInfo, ActorSystem, Dropped, ImageInfo, MetricsQuery, Probe, Recovered, Replay,
    ReplayOptions, SnapshotError,
};
pub use trace::{MESSAGE_TARGET, enable_trace_propagation};
