//! `HostConfig`: one method per knob, each with its default and its cost.

use std::path::PathBuf;
use std::time::Duration;

use crate::actor::supervisor::Strategy;
use crate::quota::Quotas;

/// Configuration of an [`ActorSystem`](crate::ActorSystem). Build it with [`HostConfig::new`] and
/// the setters; every knob has a sane default.
#[derive(Clone, Debug)]
pub struct HostConfig {
    pub(crate) throughput: usize,
    pub(crate) pulled_receive: bool,
    pub(crate) linger: bool,
    pub(crate) workers: usize,
    pub(crate) epoch_interruption: bool,
    pub(crate) epoch_tick: Duration,
    pub(crate) time_slice_ticks: u64,
    pub(crate) max_message_bytes: usize,
    pub(crate) max_wasm_stack: usize,
    pub(crate) async_stack: usize,
    pub(crate) stack_release: Option<Duration>,
    pub(crate) pooling: bool,
    pub(crate) pool_size: u32,
    pub(crate) shutdown_timeout: Duration,
    pub(crate) mailbox_capacity: usize,
    pub(crate) mailbox_bytes: usize,
    pub(crate) memory_limit: usize,
    pub(crate) cpu_deadline: Duration,
    pub(crate) root_strategy: Strategy,
    pub(crate) storage: Option<PathBuf>,
    pub(crate) jetstream: Option<crate::storage::jetstream::StoreConfig>,
    pub(crate) group_commit: usize,
    pub(crate) max_state_bytes: usize,
    pub(crate) module_cache: Option<PathBuf>,
    pub(crate) quotas: Quotas,
    pub(crate) legacy_owners: Vec<String>,
    pub(crate) max_module_bytes: u64,
    pub(crate) image_threshold: u64,
    pub(crate) perf_map: bool,
    pub(crate) function_cache: bool,
    pub(crate) meter_cpu: bool,
    pub(crate) metrics_top: usize,
    pub(crate) guest_log_queue: usize,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            throughput: 256,
            pulled_receive: true,
            linger: true,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            epoch_interruption: true,
            epoch_tick: Duration::from_millis(10),
            time_slice_ticks: 1,
            max_message_bytes: 1 << 20,
            max_wasm_stack: 512 << 10,
            async_stack: 1 << 20,
            stack_release: Some(Duration::from_secs(1)),
            pooling: false,
            pool_size: 1000,
            shutdown_timeout: Duration::from_secs(10),
            mailbox_capacity: 10_000,
            mailbox_bytes: 32 << 20,
            memory_limit: 128 << 20,
            cpu_deadline: Duration::from_secs(5),
            root_strategy: Strategy::default(),
            storage: None,
            jetstream: None,
            group_commit: 1024,
            max_state_bytes: 16 << 20,
            module_cache: None,
            quotas: Quotas::default(),
            legacy_owners: Vec::new(),
            max_module_bytes: 64 << 20,
            image_threshold: 1 << 20,
            perf_map: false,
            function_cache: true,
            meter_cpu: false,
            metrics_top: 10,
            guest_log_queue: 8192,
        }
    }
}

impl HostConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many messages an actor handles before it yields its thread to other actors
    /// (default 256). Higher means better throughput, lower means fairer latency.
    pub fn throughput(&mut self, messages: usize) -> &mut Self {
        self.throughput = messages.max(1);
        self
    }

    /// Whether an actor whose guest can pull (the Rust SDK's) takes the messages queued behind
    /// the one it was called with inside the same call (default on; see `actor::pull`). Off,
    /// every message costs a call of its own, as with the other SDKs.
    pub fn pulled_receive(&mut self, on: bool) -> &mut Self {
        self.pulled_receive = on;
        self
    }

    /// Whether a pulling actor's call, with nothing queued, waits on its worker for its next
    /// message while the worker runs others (default on; see `sched::linger`): a request/reply
    /// pair then stays inside its calls. Off, the call returns at once.
    pub fn linger(&mut self, on: bool) -> &mut Self {
        self.linger = on;
        self
    }

    /// How long an actor waits idle before its fiber stack's pages go back to the kernel
    /// (default 1 s; `None` keeps them). A store keeps the stack of its calls for its whole
    /// life, about 8 KiB touched; a stack idle for one to two periods is released, and the
    /// actor's next call faults in fresh pages (a few microseconds). See `sandbox::parking`.
    pub fn release_idle_stacks(&mut self, after: Option<Duration>) -> &mut Self {
        self.stack_release = after.map(|d| d.max(Duration::from_millis(1)));
        self
    }

    /// How many scheduler threads run actors (default: one per core). Tokio's runtime keeps
    /// the I/O and timers; actors run on these.
    pub fn workers(&mut self, threads: usize) -> &mut Self {
        self.workers = threads.max(1);
        self
    }

    /// Whether guests are compiled with epoch checks (default on). Off removes preemption and
    /// CPU deadlines: an endless loop then holds its thread forever. Only for measuring what
    /// the checks cost.
    pub fn epoch_interruption(&mut self, enable: bool) -> &mut Self {
        self.epoch_interruption = enable;
        self
    }

    /// How often the epoch ticks (default 10 ms). Every tick is one atomic increment on a
    /// background thread; guests check it at loop headers and function entries. Faster ticks
    /// cost throughput: `mote-bench epoch` measured ping-pong at 0.65x with 1 ms ticks and
    /// 0.94x with 10 ms ticks, against no epoch checks at all.
    pub fn epoch_tick(&mut self, tick: Duration) -> &mut Self {
        self.epoch_tick = tick.max(Duration::from_micros(100));
        self
    }

    /// How many epoch ticks a guest may run before it is made to yield to the scheduler
    /// (default 1, i.e. at most ~10 ms). This is what stops an endless loop from starving others.
    pub fn time_slice_ticks(&mut self, ticks: u64) -> &mut Self {
        self.time_slice_ticks = ticks.max(1);
        self
    }

    /// The largest message body accepted, in bytes (default 1 MiB). Larger sends are refused with
    /// an error, never truncated.
    pub fn max_message_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_message_bytes = bytes;
        self
    }

    /// The most native stack a guest may use (default 512 KiB); deeper recursion traps.
    pub fn max_wasm_stack(&mut self, bytes: usize) -> &mut Self {
        self.max_wasm_stack = bytes;
        self
    }

    /// Use wasmtime's pooling allocator with room for `instances` live actors (default off:
    /// on-demand allocation, no fixed ceiling but slower instantiation). An actor of a module
    /// with snapshots on takes two of the pool's memories (its own and its snapshot shim's).
    pub fn pooling(&mut self, instances: Option<u32>) -> &mut Self {
        self.pooling = instances.is_some();
        if let Some(n) = instances {
            self.pool_size = n.max(1);
        }
        self
    }

    /// Default mailbox capacity of an actor (default 10,000 messages). A send to a full mailbox
    /// is refused: a dead letter from an actor, a `MailboxFull` error from the API.
    pub fn mailbox_capacity(&mut self, messages: usize) -> &mut Self {
        self.mailbox_capacity = messages.max(1);
        self
    }

    /// Default bytes of message bodies an actor's mailbox holds (default 32 MiB). A send that
    /// would pass it is refused like a send to a full mailbox.
    pub fn mailbox_bytes(&mut self, bytes: usize) -> &mut Self {
        self.mailbox_bytes = bytes.max(1);
        self
    }

    /// Limit of an actor's linear memory in bytes (default 128 MiB); a spawn may set a lower one.
    /// Growing past it is a failure of that actor, handled by its supervisor. Each actor's
    /// memory starts in a slot the size of its initial memory and, once it grows past that, moves
    /// to a slot of this size in a shared mapping: virtual space only, RAM as touched.
    pub fn memory_limit(&mut self, bytes: usize) -> &mut Self {
        self.memory_limit = bytes;
        self
    }

    /// Default CPU time one message (or `start`) may take (default 5 s): the worker thread's CPU
    /// time, read at every time slice, exact to about one slice. Exceeding it is a failure of
    /// that actor.
    pub fn cpu_deadline(&mut self, deadline: Duration) -> &mut Self {
        self.cpu_deadline = deadline;
        self
    }

    /// The `/user` guardian's strategy for top-level actors (default: one-for-one restart, at
    /// most 3 restarts in 10 s, backoff 10 ms to 1 s). Where it would escalate, the guardian stops
    /// the actor instead: the host itself never fails. Its scope is always one-for-one.
    pub fn root_strategy(&mut self, strategy: Strategy) -> &mut Self {
        self.root_strategy = strategy;
        self
    }

    /// The redb file that holds persistent actors' state, the outbox and reminders (default
    /// none: `recover` then fails with `unavailable`). Created if missing. The `mote` CLI uses
    /// `./mote.redb` unless told otherwise.
    pub fn storage(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.storage = Some(path.into());
        self
    }

    /// At most this many persistent steps share one write transaction and fsync (default
    /// 1,024). 1 gives one fsync per step: the baseline group commit is measured against.
    pub fn group_commit(&mut self, steps: usize) -> &mut Self {
        self.group_commit = steps.max(1);
        self
    }

    /// The largest snapshot accepted, in bytes (default 16 MiB); `save-snapshot` refuses more.
    pub fn max_state_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_state_bytes = bytes;
        self
    }

    /// Where compiled modules are cached (default: `mote-cache/` beside the database, none
    /// without one). A restarted host loads a module from here in ~50 µs instead of compiling it.
    pub fn module_cache(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.module_cache = Some(dir.into());
        self
    }

    /// The bounds every actor gets: pending timers, reminders, subscriptions, groups and asks,
    /// the shortest timer period, the longest ask deadline, names and paths, and the log
    /// budget (see [`Quotas`] for each default). A refusal is a typed error for the guest and
    /// a counter in [`ActorSystem::tree`](crate::ActorSystem::tree).
    pub fn quotas(&mut self, quotas: Quotas) -> &mut Self {
        self.quotas = quotas;
        self
    }

    /// Keeps persistent actors' state in JetStream instead of the database file, so that it
    /// follows them to any node of a cluster (see the persistence capability's JetStream store).
    pub fn jetstream_storage(
        &mut self,
        config: crate::storage::jetstream::StoreConfig,
    ) -> &mut Self {
        self.jetstream = Some(config);
        self
    }

    /// Modules trusted to adopt the persistence ids they name of a database written before
    /// ids were scoped (schema 1). Without this, an actor adopts only the state of its own
    /// path (the default id); an id chosen with `set-persistence-id` is adopted only by an
    /// actor of a module listed here.
    pub fn legacy_owner(&mut self, module: impl Into<String>) -> &mut Self {
        self.legacy_owners.push(module.into());
        self
    }

    /// The largest module file the host reads (default 64 MiB; the Python example is about
    /// 20 MB). A larger file, or a path that is not a regular file, is refused before it is
    /// read.
    pub fn max_module_bytes(&mut self, bytes: u64) -> &mut Self {
        self.max_module_bytes = bytes;
        self
    }

    /// From how many bytes of initial data (the data segments of its core modules) a module's
    /// instances get copy-on-write memory images instead of arena memory (default 1 MiB).
    /// Interpreters (Python, JavaScript) start with megabytes of heap: an image maps it, shared
    /// until written, where the arena would copy it into every instance. Small modules stay on
    /// the arena, which holds 100,000 actors in a few mappings; an image costs a few mappings
    /// per instance. `0` puts every module on images, `u64::MAX` none.
    pub fn image_threshold(&mut self, bytes: u64) -> &mut Self {
        self.image_threshold = bytes;
        self
    }

    /// Whether compiled guest code is listed in `/tmp/perf-<pid>.map` (default off), so that
    /// `perf report` names guest functions: a profiling aid. Guests keep their names only if
    /// built without stripping (`CARGO_PROFILE_RELEASE_STRIP=false`).
    pub fn perf_map(&mut self, enable: bool) -> &mut Self {
        self.perf_map = enable;
        self
    }

    /// Whether compiled functions are shared between the modules this process compiles (default
    /// on): a module whose functions another module had (every Python module embeds the same
    /// CPython) compiles in a fraction of the time. Bounded; see `sandbox::compile_cache`.
    pub fn function_cache(&mut self, enable: bool) -> &mut Self {
        self.function_cache = enable;
        self
    }

    /// Whether every actor's CPU time is measured (default off): the metrics and the dashboard
    /// show it. Off, only actors whose module imports `clock` (which can read it) are measured:
    /// two clock reads per guest call, about 3% of a ping-pong message.
    pub fn meter_cpu(&mut self, enable: bool) -> &mut Self {
        self.meter_cpu = enable;
        self
    }

    /// How many of the busiest actors (by messages received) the metrics show one by one, beside
    /// the per-module sums (default 10); more on request, by path.
    pub fn metrics_top(&mut self, actors: usize) -> &mut Self {
        self.metrics_top = actors;
        self
    }

    /// How many guest log lines (`host.log`, stdout, stderr) wait at most for the log writer
    /// (default 8,192). Actors only queue their lines; one thread of the host writes them. A
    /// line that finds the queue full is dropped and counted
    /// ([`ActorSystem::log_dropped`](crate::ActorSystem::log_dropped)), so a slow or blocked log
    /// writer never stalls an actor. Each queued line holds at most the log-line quota in bytes.
    pub fn guest_log_queue(&mut self, lines: usize) -> &mut Self {
        self.guest_log_queue = lines.max(1);
        self
    }

    /// How long a graceful shutdown waits for actors to finish their current message and their
    /// `stopping` hooks (default 10 s).
    pub fn shutdown_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.shutdown_timeout = timeout;
        self
    }
}
