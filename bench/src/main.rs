//! `mote-bench`: the three standard workloads, each printing one machine-readable `RESULT` line.
//!
//! - `w1`: ping-pong, two actors exchange 1,000,000 messages (500,000 round trips); also runs the
//!   same exchange between two native tokio tasks in this process and prints the ratio.
//! - `w2`: spawn 100,000 actors that each wait for one message, message each, wait until all
//!   processed; spawns/s and resident bytes per idle actor.
//! - `w3`: fan-out, one producer sends 1,000 messages to each of 1,000 actors; end-to-end msgs/s.
//!
//! - `ring`, `chain`, `forkjoin`, `big`: Savina-style workloads (see `savina.rs`); `savina` runs
//!   the four.
//! - `erlang`: the same seven workloads (w1-w3 and Savina's) in Erlang/OTP, from
//!   `bench/peers/peers.erl`; `all` runs them after Mote's and prints each ratio.
//!
//! - `epoch`: w1 with and without epoch interruption compiled in; the ratio is its overhead.
//! - `restart`: how long a supervised restart of a trapped actor takes, net of a round trip.
//! - `timers`: 100,000 one-shot timers over one second: scheduling rate, median/p99 lateness.
//! - `pubsub`: 1,000 subscriber actors, 1,000 publishes: deliveries/s (each also reported back).
//! - `ask`: round-trip time of asks from outside to an actor.
//! - `commit`: committed persistent steps/s of 1,000 journal actors with group commit, against
//!   one transaction (fsync) per step in the same run.
//! - `recovery`: time to recover a journal of 100,000 events (start + replay + first answer).
//! - `activation`: ask latency of a passivated entity (activation + recovery) against a live one.
//! - `persist`: commit, recovery and activation.
//! - `languages`: per guest language (Rust, Python, JavaScript, C) through Mote itself: component
//!   size, compile time, instantiate (spawn to first answer, net of one call), call round trip
//!   and resident memory per live instance.
//! - `upgrade`: cold start of a module with and without the compiled cache; a rolling upgrade of
//!   1,000 actors with their state: actors/s and the pause per actor.
//!
//! - `cluster`: two nodes of a cluster on a nats-server of their own (see `cluster.rs`):
//!   ping-pong, ask round trips and fan-out across the nodes, each against the same on one node.
//!
//! - `durable`: the JetStream store on a nats-server of its own (see `durability.rs`): committed
//!   steps/s against the redb file's group commit, and the recovery of a 100,000-event journal
//!   from each.
//!
//! - `images`: sandbox images (see `images.rs`): image size, capture and restore times of a
//!   Rust counter, a Rust actor holding 10 MiB and a Python counter; a restore against the
//!   replay of a 10,000-event journal; the snapshot engine's cost per message.
//!
//! - `compile`: Python and JavaScript modules compiled with and without the function cache
//!   shared across modules (see `compile.rs`).
//!
//! Figures are only meaningful as ratios against a baseline measured in the same run.

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use clap::Parser;
use mote_example_protocol::{
    Counter, Crash, Entity, Journal, JournalState, Report, Seq, Versioned, VersionedState,
};
use mote_guest::Message;
use mote_host::{ActorSystem, HostConfig, Probe};
use mote_test_programs as examples;
use tracing_subscriber::prelude::*;

/// Run Mote's standard benchmark workloads.
#[derive(Parser)]
struct Args {
    /// w1, w2, w3, idle (w2's actors asleep), ring, chain, forkjoin, big, savina (the four),
    /// epoch, restart, timers,
    /// pubsub, ask, commit, recovery, activation, persist, upgrade, languages, cluster, durable,
    /// patterns, images, compile, erlang
    /// (the peers alone) or all (every workload, then the ratios against Erlang).
    workload: String,
    /// Scheduler worker threads (tokio's runtime gets as many, for I/O and timers).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Actors for w2 and idle.
    #[arg(long, default_value_t = 100_000)]
    actors: usize,
    /// Milliseconds idle after which `idle`'s actors hibernate.
    #[arg(long, default_value_t = 10)]
    hibernate_after_ms: u64,
    /// Messages for w1.
    #[arg(long, default_value_t = 1_000_000)]
    messages: u32,
    /// Messages of `cluster`'s ping-pong across two nodes (the game on one node plays
    /// `--messages`).
    #[arg(long, default_value_t = 20_000)]
    cluster_messages: u32,
    /// Hops of the ring's token.
    #[arg(long, default_value_t = 1_000_000)]
    hops: u64,
    /// Use wasmtime's pooling allocator with room for this many instances.
    #[arg(long)]
    pooling: Option<u32>,
    /// Bytes of initial data from which a module gets copy-on-write memory images (the host
    /// default is 1 MiB; a huge value keeps every module on the arena, for comparison).
    #[arg(long)]
    image_threshold: Option<u64>,
    /// List compiled guest code in /tmp/perf-<pid>.map for `perf report`.
    #[arg(long)]
    perf_map: bool,
    /// Measure every actor's CPU time, as a host serving its metrics (`mote run --http`) does.
    #[arg(long)]
    metrics: bool,
    /// Call the actor once per message: no pulled receive (`HostConfig::pulled_receive`), to
    /// measure what pulling gains in the same run.
    #[arg(long)]
    no_pull: bool,
    /// A pulling call with nothing queued returns at once instead of waiting on its worker
    /// (`HostConfig::linger`), to measure what lingering gains in the same run.
    #[arg(long)]
    no_linger: bool,
    /// Keep idle actors' fiber stacks (`HostConfig::release_idle_stacks(None)`), to measure
    /// what giving them back saves and costs in the same run.
    #[arg(long)]
    keep_stacks: bool,
    /// Epoch tick in microseconds (the host default is 10000).
    #[arg(long)]
    epoch_tick_us: Option<u64>,
    /// Where the persistence workloads put their databases (default: the system temp dir).
    #[arg(long)]
    db_dir: Option<std::path::PathBuf>,
    /// Export a span per handled message to this OTLP/HTTP collector, to measure the cost of
    /// traces on (`http://127.0.0.1:4318/v1/traces`).
    #[arg(long, value_name = "ENDPOINT")]
    otlp: Option<String>,
    /// `languages` also measures this component: `LABEL=PATH:KIND`, where KIND is the kind of
    /// a query it answers (with an empty body). Repeatable.
    #[arg(long = "with", value_name = "LABEL=PATH:KIND")]
    with: Vec<String>,
    /// Deploy this component in place of an example actor: `NAME=PATH`, to measure another
    /// build of it (say a lean one against a WASI one) in the same run. Repeatable.
    #[arg(long = "guest", value_name = "NAME=PATH")]
    guests: Vec<String>,
}

mod cluster;
mod compile;
mod durability;
mod idle;
mod images;
mod patterns;
mod savina;
mod versus;

/// The allocator `mote` uses too, so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

unsafe extern "C" {
    /// mimalloc's C library (linked as the allocator above): frees now what it would give back
    /// to the kernel later.
    fn mi_collect(force: bool);
}

/// Gives the kernel back now the freed memory of this thread's heap, which mimalloc would give
/// back later (it keeps it for a while, until the thread allocates again), so that a resident
/// size read next does not shrink under a measurement when that return comes. Other threads'
/// heaps keep theirs.
fn settle_allocator() {
    // SAFETY: a plain call into the allocator the process runs on; it takes no pointers.
    unsafe { mi_collect(true) };
}

const WAIT: Duration = Duration::from_secs(600);
/// How long w2 waits for the next answer before it gives up on the guest.
const STALL: Duration = Duration::from_secs(60);

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()?;
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into());
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let exporter = match &args.otlp {
        // Without an exporter, the one global filter of the measurements before traces.
        None => {
            tracing_subscriber::registry()
                .with(logs)
                .with(tracing_subscriber::EnvFilter::new(filter))
                .init();
            None
        }
        Some(endpoint) => {
            let (exporter, layer) = mote_otlp::Otlp::new(endpoint).start(runtime.handle())?;
            tracing_subscriber::registry()
                .with(logs.with_filter(tracing_subscriber::EnvFilter::new(filter)))
                .with(layer.with_filter(mote_otlp::message_spans()))
                .init();
            Some(exporter)
        }
    };
    let result = run(args, &runtime);
    if let Some(exporter) = exporter {
        exporter.shutdown()?;
    }
    result
}

/// Runs the workload `args` names.
fn run(args: Args, runtime: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    runtime.block_on(async {
        match args.workload.as_str() {
            "w1" => w1(&args).await.map(drop),
            "w2" => w2(&args).await.map(drop),
            "w3" => w3(&args).await.map(drop),
            "idle" => idle::idle(&args).await,
            "ring" => savina::ring(&args).await.map(drop),
            "chain" => savina::chain(&args).await.map(drop),
            "forkjoin" => savina::fork_join(&args).await.map(drop),
            "big" => savina::big(&args).await.map(drop),
            "savina" => {
                savina::ring(&args).await?;
                savina::chain(&args).await?;
                savina::fork_join(&args).await?;
                savina::big(&args).await.map(drop)
            }
            "erlang" => versus::erlang(&args, &[]),
            "epoch" => epoch(&args).await,
            "restart" => restart(&args).await,
            "timers" => timers(&args).await,
            "pubsub" => pubsub(&args).await,
            "ask" => ask(&args).await,
            "commit" => commit(&args).await,
            "recovery" => recovery(&args).await,
            "activation" => activation(&args).await,
            "upgrade" => upgrade(&args).await,
            "languages" => languages(&args).await,
            "cluster" => cluster::cluster(&args).await,
            "durable" => durability::durable(&args).await,
            "patterns" => patterns::patterns(&args).await,
            "images" => images::images(&args).await,
            "compile" => compile::compile(&args).await,
            "persist" => {
                commit(&args).await?;
                recovery(&args).await?;
                activation(&args).await
            }
            "all" => {
                let headline = [
                    ("w1", w1(&args).await?),
                    ("w2", w2(&args).await?),
                    ("w3", w3(&args).await?),
                    ("ring", savina::ring(&args).await?),
                    ("chain", savina::chain(&args).await?),
                    ("forkjoin", savina::fork_join(&args).await?),
                    ("big", savina::big(&args).await?),
                ];
                idle::idle(&args).await?;
                epoch(&args).await?;
                restart(&args).await?;
                timers(&args).await?;
                pubsub(&args).await?;
                ask(&args).await?;
                commit(&args).await?;
                recovery(&args).await?;
                activation(&args).await?;
                upgrade(&args).await?;
                languages(&args).await?;
                cluster::cluster(&args).await?;
                durability::durable(&args).await?;
                patterns::patterns(&args).await?;
                versus::erlang(&args, &headline)
            }
            other => bail!(
                "unknown workload {other:?}: use w1, w2, w3, idle, ring, chain, forkjoin, big, savina, \
                 epoch, restart, timers, pubsub, ask, commit, recovery, activation, persist, \
                 upgrade, languages, cluster, durable, patterns, images, compile, erlang or all"
            ),
        }
    })
}

fn system(args: &Args, modules: &[&str]) -> anyhow::Result<ActorSystem> {
    system_with(args, HostConfig::new(), modules)
}

/// The component `--guest` puts in place of the example actor `name`, if any.
fn guest_override(args: &Args, name: &str) -> anyhow::Result<Option<std::path::PathBuf>> {
    for guest in &args.guests {
        let (label, path) = guest
            .split_once('=')
            .ok_or_else(|| anyhow!("--guest {guest}: expected NAME=PATH"))?;
        if label == name {
            return Ok(Some(path.into()));
        }
    }
    Ok(None)
}

fn system_with(
    args: &Args,
    mut config: HostConfig,
    modules: &[&str],
) -> anyhow::Result<ActorSystem> {
    config.pooling(args.pooling);
    config.workers(args.threads);
    config.perf_map(args.perf_map);
    config.meter_cpu(args.metrics);
    config.pulled_receive(!args.no_pull);
    config.linger(!args.no_linger);
    if args.keep_stacks {
        config.release_idle_stacks(None);
    }
    if let Some(bytes) = args.image_threshold {
        config.image_threshold(bytes);
    }
    if let Some(us) = args.epoch_tick_us {
        config.epoch_tick(Duration::from_micros(us));
    }
    let system = ActorSystem::new(config)?;
    for name in modules {
        let path = match guest_override(args, name)? {
            Some(path) => path,
            None => examples::path(name).ok_or_else(|| anyhow!("no example actors built"))?,
        };
        system.deploy_file(name, &path)?;
    }
    Ok(system)
}

async fn recv_as<M: Message>(probe: &mut Probe) -> anyhow::Result<M> {
    let envelope = probe
        .recv_timeout(WAIT)
        .await
        .ok_or_else(|| anyhow!("timed out waiting at {}", probe.address()))?;
    mote_guest::decode(&envelope.kind, &envelope.body).map_err(|e| anyhow!("{e}"))
}

fn encode<M: Message>(msg: &M) -> anyhow::Result<Vec<u8>> {
    mote_guest::encode(msg).map_err(|e| anyhow!("{e}"))
}

/// Seconds for `messages` ping-pong messages between two wasm actors.
async fn mote_ping_pong(args: &Args, config: HostConfig, messages: u32) -> anyhow::Result<f64> {
    let system = system_with(args, config, &["pingpong"])?;
    let mut probe = system.probe("bench")?;
    system.spawn("pong", "pingpong", b"pong /system/bench")?;
    let init = format!("ping /user/pong {} /system/bench", messages / 2);
    let start = Instant::now();
    system.spawn("ping", "pingpong", init.as_bytes())?;
    // The ping reports after its last pong; the pong reports when told Done.
    let mut pongs = 0;
    for _ in 0..2 {
        let r: Report = recv_as(&mut probe).await?;
        if r.label == "pongs" {
            pongs = r.value;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    if pongs != u64::from(messages / 2) {
        bail!("ping counted {pongs} pongs, expected {}", messages / 2);
    }
    system.shutdown().await.ok();
    Ok(seconds)
}

async fn w1(args: &Args) -> anyhow::Result<f64> {
    let messages = args.messages;
    let mote = mote_ping_pong(args, HostConfig::new(), messages).await?;
    let native = native_ping_pong(messages).await;
    let mote_rate = f64::from(messages) / mote;
    let native_rate = f64::from(messages) / native;
    println!(
        "RESULT runtime=mote workload=w1 messages={messages} seconds={mote:.6} msgs_per_sec={mote_rate:.0}"
    );
    println!(
        "RESULT runtime=native workload=w1 messages={messages} seconds={native:.6} msgs_per_sec={native_rate:.0}"
    );
    println!(
        "RESULT workload=w1 ratio_mote_to_native={:.3}",
        mote_rate / native_rate
    );
    Ok(mote_rate)
}

async fn epoch(args: &Args) -> anyhow::Result<()> {
    let messages = args.messages;
    let with = mote_ping_pong(args, HostConfig::new(), messages).await?;
    let mut off = HostConfig::new();
    off.epoch_interruption(false);
    let without = mote_ping_pong(args, off, messages).await?;
    println!(
        "RESULT runtime=mote workload=epoch messages={messages} with_epoch_msgs_per_sec={:.0} \
         without_epoch_msgs_per_sec={:.0} ratio_with_to_without={:.3}",
        f64::from(messages) / with,
        f64::from(messages) / without,
        without / with
    );
    Ok(())
}

async fn restart(args: &Args) -> anyhow::Result<()> {
    let cycles = 2000u32;
    let mut config = HostConfig::new();
    config.root_strategy(mote_host::Strategy {
        max_restarts: u32::MAX,
        backoff_min: Duration::ZERO,
        backoff_max: Duration::ZERO,
        ..Default::default()
    });
    let system = system_with(args, config, &["crasher"])?;
    let mut probe = system.probe("bench")?;
    system.spawn("c", "crasher", b"")?;
    let echo = |probe: &Probe, n: u32| -> anyhow::Result<()> {
        Ok(probe.tell("/user/c", Crash::KIND, encode(&Crash::Echo(n))?)?)
    };
    // Baseline: a round trip to a live actor.
    let start = Instant::now();
    for n in 0..cycles {
        echo(&probe, n)?;
        recv_as::<Crash>(&mut probe).await?;
    }
    let round_trip = start.elapsed().as_secs_f64();
    // The same round trip behind a trap: the echo is handled by the restarted instance.
    let panic = encode(&Crash::Panic)?;
    let start = Instant::now();
    for n in 0..cycles {
        probe.tell("/user/c", Crash::KIND, panic.clone())?;
        echo(&probe, n)?;
        recv_as::<Crash>(&mut probe).await?;
    }
    let with_restart = start.elapsed().as_secs_f64();
    let restart_us = (with_restart - round_trip) / f64::from(cycles) * 1e6;
    println!(
        "RESULT runtime=mote workload=restart restarts={cycles} restart_us={restart_us:.1} \
         round_trip_us={:.1}",
        round_trip / f64::from(cycles) * 1e6
    );
    system.shutdown().await.ok();
    Ok(())
}

/// The same exchange between two tokio tasks over unbounded channels: the floor without wasm.
async fn native_ping_pong(messages: u32) -> f64 {
    let (to_pong, mut pong_rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
    let (to_ping, mut ping_rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
    let rounds = messages / 2;
    let pong = tokio::spawn(async move {
        while let Some(n) = pong_rx.recv().await {
            if to_ping.send(n).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    let ping = tokio::spawn(async move {
        let _ = to_pong.send(1);
        while let Some(n) = ping_rx.recv().await {
            if n >= rounds {
                break;
            }
            let _ = to_pong.send(n + 1);
        }
    });
    let _ = ping.await;
    let elapsed = start.elapsed().as_secs_f64();
    let _ = pong.await;
    elapsed
}

/// Resident memory of this process.
fn rss_bytes() -> u64 {
    proc_kb("status", "VmRSS")
}

/// A `kB` field of a `/proc/self` file (`smaps_rollup`, `status`), in bytes.
fn proc_kb(file: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/self/{file}"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Proportional set size: resident memory with each shared page divided among its mappings.
/// RSS counts a page of a copy-on-write image once per instance that maps it; PSS counts it once.
fn pss_bytes() -> u64 {
    proc_kb("smaps_rollup", "Pss")
}

/// The bytes of this process's page tables.
fn page_table_bytes() -> u64 {
    proc_kb("status", "VmPTE")
}

/// The CPU time of this process so far, in seconds: in user mode, and in the kernel (where a
/// fresh page's fault and zeroing go).
fn cpu_seconds() -> (f64, f64) {
    // SAFETY: `getrusage` writes the struct it is given, which is plain data.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (seconds(usage.ru_utime), seconds(usage.ru_stime))
}

/// The minor page faults of this process so far: each first touch of a fresh page is one.
fn minor_faults() -> u64 {
    // `minflt` is field 10 of `/proc/self/stat`: the eighth after the command in parentheses.
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(7)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Microseconds this machine takes to give the process one fresh 4 KiB page: the first touch
/// of each page of a new 64 MiB mapping (fault, zeroing and the page table), timed.
fn fresh_page_us() -> anyhow::Result<f64> {
    const LEN: usize = 64 << 20;
    // SAFETY: a fresh anonymous private mapping, written only within its length and unmapped
    // before returning; nothing else refers to it.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            bail!("cannot map 64 MiB: {}", std::io::Error::last_os_error());
        }
        // Pages of 4 KiB, as the arenas' slots get (no huge pages).
        libc::madvise(p, LEN, libc::MADV_NOHUGEPAGE);
        let start = Instant::now();
        for page in (0..LEN).step_by(4096) {
            std::ptr::write_volatile(p.cast::<u8>().add(page), 1);
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / (LEN / 4096) as f64;
        libc::munmap(p, LEN);
        Ok(us)
    }
}

/// The number of memory mappings of this process (Linux caps it at `vm.max_map_count`).
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count())
}

async fn w2(args: &Args) -> anyhow::Result<f64> {
    let n = args.actors;
    let system = system(args, &["counter"])?;
    let mut probe = system.probe("bench")?;
    let mut dead = system.subscribe_dead_letters();
    let (rss0, tables0, faults0) = (rss_bytes(), page_table_bytes(), minor_faults());
    let (user0, sys0) = cpu_seconds();
    let maps0 = mappings();
    let start = Instant::now();
    for i in 0..n {
        system
            .spawn(&format!("a{i}"), "counter", b"")
            .with_context(|| format!("spawn #{i}"))?;
    }
    let spawned = start.elapsed().as_secs_f64();
    let body = encode(&Counter::Get)?;
    for i in 0..n {
        probe.tell(&format!("/user/a{i}"), Counter::KIND, body.clone())?;
    }
    // Every actor answers, unless the host could not instantiate it (then the Get is a dead letter).
    // A guest that does not answer `Counter::Get` (`--guest` with another protocol) stalls the
    // run: it ends after `STALL` without an answer, saying so.
    let (mut answered, mut failed) = (0usize, 0usize);
    while answered + failed < n {
        let next = async {
            tokio::select! {
                r = recv_as::<Counter>(&mut probe) => { r?; answered += 1; }
                d = dead.recv() => { if d.is_ok() { failed += 1; } }
            }
            anyhow::Ok(())
        };
        tokio::time::timeout(STALL, next).await.map_err(|_| {
            anyhow!(
                "no answer for {} s after {answered} of {n}: does the counter guest answer \
                 `Counter::Get` with `Counter::Value`?",
                STALL.as_secs()
            )
        })??;
    }
    let total = start.elapsed().as_secs_f64();
    // CPU time a spawn and its answer took, in user mode (the instructions, steady from run to
    // run) and in the kernel (mostly fresh memory, which on a VM varies with the host).
    let (user, sys) = cpu_seconds();
    let per_actor_us = |t: f64| t * 1e6 / n as f64;
    let (user_us, sys_us) = (per_actor_us(user - user0), per_actor_us(sys - sys0));
    let rss = rss_bytes().saturating_sub(rss0);
    let live = answered.max(1);
    // Page-table bytes per live actor, now: read again once the actors idle.
    let tables_each = || page_table_bytes().saturating_sub(tables0) / live as u64;
    let tables = tables_each();
    let faults = minor_faults().saturating_sub(faults0) as f64 / live as f64;
    let maps = mappings().saturating_sub(maps0) as f64 / live as f64;
    // Idle, each actor gives its fiber stack back within two sweeps (unless --keep-stacks).
    // Waited for by the stacks given back now, not by the releases so far: an actor spawned
    // early may have given its stack back before its message came, and taken it up again.
    let (idle_rss, idle_tables) = match args.keep_stacks {
        true => (rss, tables),
        false => {
            let waiting = Instant::now();
            while system.stack_stats().released < answered {
                if waiting.elapsed() > Duration::from_secs(30) {
                    bail!("the idle actors' stacks were not given back within 30 s");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (rss_bytes().saturating_sub(rss0), tables_each())
        }
    };
    // One scrape of the metrics with every actor live (after RSS was read).
    let scraping = Instant::now();
    let scraped = system.metrics(&mote_host::MetricsQuery::default()).len();
    let scrape_ms = scraping.elapsed().as_secs_f64() * 1e3;
    // The floor under any spawn: the fresh memory an actor touches (its resident bytes right
    // after its answer, and its page tables), at this machine's cost of a fresh page.
    let page_us = fresh_page_us()?;
    let fresh_pages = (rss / live as u64 + tables) as f64 / 4096.0;
    let floor = args.threads as f64 * 1e6 / (fresh_pages * page_us);
    println!(
        "RESULT runtime=mote workload=w2 actors={n} live={answered} failed={failed} spawn_call_seconds={spawned:.6} \
         spawn_plus_msg_seconds={total:.6} spawns_per_sec={:.0} user_us_per_actor={user_us:.1} sys_us_per_actor={sys_us:.1} \
         rss_bytes_per_actor={} idle_rss_bytes_per_actor={} \
         page_table_bytes_per_actor={tables} idle_page_table_bytes_per_actor={idle_tables} minor_faults_per_actor={faults:.1} fresh_page_us={page_us:.2} \
         fresh_memory_floor_per_sec={floor:.0} mappings_per_actor={maps:.2} metrics_scrape_ms={scrape_ms:.1} \
         metrics_scrape_bytes={scraped}",
        answered as f64 / total,
        rss / live as u64,
        idle_rss / live as u64
    );
    if failed > 0 {
        eprintln!(
            "note: {failed} actors failed to instantiate; see the log (RUST_LOG=error) for the host limit hit"
        );
    }
    system.shutdown().await.ok();
    Ok(answered as f64 / total)
}

async fn w3(args: &Args) -> anyhow::Result<f64> {
    let (actors, per_actor) = (1000usize, 1000u64);
    let system = system(args, &["counter"])?;
    let mut probe = system.probe("bench")?;
    let paths: Vec<String> = (0..actors).map(|i| format!("/user/s{i}")).collect();
    for i in 0..actors {
        system.spawn(&format!("s{i}"), "counter", b"")?;
    }
    let add = encode(&Counter::Add(1))?;
    let get = encode(&Counter::Get)?;
    let start = Instant::now();
    for _ in 0..per_actor {
        for path in &paths {
            probe.tell(path, Counter::KIND, add.clone())?;
        }
    }
    for path in &paths {
        probe.tell(path, Counter::KIND, get.clone())?;
    }
    for _ in 0..actors {
        match recv_as::<Counter>(&mut probe).await? {
            Counter::Value(v) if v == per_actor => {}
            other => bail!("an actor counted {other:?}, expected Value({per_actor})"),
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let messages = actors as u64 * per_actor;
    println!(
        "RESULT runtime=mote workload=w3 actors={actors} messages={messages} seconds={secs:.6} msgs_per_sec={:.0}",
        messages as f64 / secs
    );
    system.shutdown().await.ok();
    Ok(messages as f64 / secs)
}

async fn timers(args: &Args) -> anyhow::Result<()> {
    let n = 100_000u64;
    let system = system(args, &[])?;
    let mut probe = system.probe("bench")?;
    // Arrivals are stamped by their own task, so scheduling does not delay the measurement.
    let consumer = tokio::spawn(async move {
        let mut arrivals = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let r: Report = recv_as(&mut probe).await?;
            arrivals.push((r.value, Instant::now()));
        }
        anyhow::Ok(arrivals)
    });
    let start = Instant::now();
    let mut due = Vec::with_capacity(n as usize);
    for i in 0..n {
        // Spread over one second, deterministically.
        let delay = Duration::from_micros((i * 7919) % 1_000_000);
        due.push(Instant::now() + delay);
        let body = encode(&Report {
            from: String::new(),
            label: String::new(),
            value: i,
        })?;
        system.schedule("/system/bench", Report::KIND, body, delay, None)?;
    }
    let scheduling = start.elapsed().as_secs_f64();
    let arrivals = consumer.await??;
    let lateness: Vec<f64> = arrivals
        .iter()
        .map(|(i, at)| at.saturating_duration_since(due[*i as usize]).as_secs_f64() * 1e3)
        .collect();
    let mut lateness = lateness;
    lateness.sort_by(f64::total_cmp);
    let pct = |p: f64| lateness[((lateness.len() - 1) as f64 * p) as usize];
    println!(
        "RESULT runtime=mote workload=timers timers={n} schedule_per_sec={:.0} \
         lateness_median_ms={:.3} lateness_p99_ms={:.3} lateness_max_ms={:.3}",
        n as f64 / scheduling,
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    Ok(())
}

async fn pubsub(args: &Args) -> anyhow::Result<()> {
    let (subscribers, publishes) = (1000usize, 1000u32);
    let mut config = HostConfig::new();
    config.mailbox_capacity(1 << 20);
    let system = system_with(args, config, &["subscriber"])?;
    let mut probe = system.probe("bench")?;
    for i in 0..subscribers {
        system.spawn(&format!("s{i}"), "subscriber", b"topic /system/bench")?;
        probe.tell(
            &format!("/user/s{i}"),
            Seq::KIND,
            encode(&Seq { stream: 0, n: 0 })?,
        )?;
    }
    for _ in 0..subscribers {
        recv_as::<Report>(&mut probe).await?;
    }
    let start = Instant::now();
    for n in 0..publishes {
        system.publish("topic", Seq::KIND, encode(&Seq { stream: 0, n })?);
    }
    let deliveries = subscribers as u64 * u64::from(publishes);
    for _ in 0..deliveries {
        recv_as::<Report>(&mut probe).await?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "RESULT runtime=mote workload=pubsub subscribers={subscribers} publishes={publishes} \
         deliveries={deliveries} seconds={secs:.6} deliveries_per_sec={:.0}",
        deliveries as f64 / secs
    );
    system.shutdown().await.ok();
    Ok(())
}

async fn ask(args: &Args) -> anyhow::Result<()> {
    let n = 10_000u32;
    let system = system(args, &["counter"])?;
    system.spawn("c", "counter", b"")?;
    let get = encode(&Counter::Get)?;
    let start = Instant::now();
    for _ in 0..n {
        system
            .ask(
                "/user/c",
                Counter::KIND,
                get.clone(),
                Duration::from_secs(5),
            )
            .await?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "RESULT runtime=mote workload=ask asks={n} round_trip_us={:.1}",
        secs / f64::from(n) * 1e6
    );
    system.shutdown().await.ok();
    Ok(())
}

/// A fresh database file for one measurement.
fn fresh_db(args: &Args, name: &str) -> anyhow::Result<std::path::PathBuf> {
    let dir = args
        .db_dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("mote-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.redb"));
    let _ = std::fs::remove_file(&path);
    Ok(path)
}

/// Steps/s of `actors` journal actors each persisting `per_actor` events, one step each, with
/// at most `group` steps per transaction; also the average steps per transaction.
async fn steps_per_sec(
    args: &Args,
    group: usize,
    actors: usize,
    per_actor: u64,
) -> anyhow::Result<(f64, f64)> {
    let db = fresh_db(args, &format!("commit-{group}"))?;
    let mut config = HostConfig::new();
    config.storage(&db).group_commit(group);
    let measured = steps_per_sec_with(args, config, actors, per_actor).await;
    let _ = std::fs::remove_file(&db);
    measured
}

/// [`steps_per_sec`] on a host configured as `config` (its store, say).
async fn steps_per_sec_with(
    args: &Args,
    config: HostConfig,
    actors: usize,
    per_actor: u64,
) -> anyhow::Result<(f64, f64)> {
    let system = system_with(args, config, &["journal"])?;
    system.storage_ready().await?;
    for i in 0..actors {
        system.spawn(&format!("j{i}"), "journal", b"0")?;
    }
    let stats = || system.commit_stats().unwrap_or_default();
    let before = stats();
    let target = actors as u64 * per_actor;
    let start = Instant::now();
    for round in 0..per_actor {
        let body = encode(&Journal::Append(round))?;
        for i in 0..actors {
            system.tell(&format!("/user/j{i}"), Journal::KIND, body.clone())?;
        }
    }
    while stats().steps - before.steps < target {
        if start.elapsed() > WAIT {
            bail!("commits stalled");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    let after = stats();
    let per_txn = (after.steps - before.steps) as f64
        / (after.transactions - before.transactions).max(1) as f64;
    system.shutdown().await.ok();
    Ok((target as f64 / secs, per_txn))
}

async fn commit(args: &Args) -> anyhow::Result<()> {
    let (grouped, per_txn) = steps_per_sec(args, 1024, 1000, 100).await?;
    let (single, _) = steps_per_sec(args, 1, 1000, 3).await?;
    println!(
        "RESULT runtime=mote workload=commit group_commit_steps_per_sec={grouped:.0} \
         steps_per_transaction={per_txn:.1} fsync_per_step_steps_per_sec={single:.0} ratio={:.1}",
        grouped / single
    );
    Ok(())
}

/// A journal of `events` events (no snapshot) written, then recovered by a restarted host:
/// the seconds of that recovery (spawn to first answer), of the same start with nothing to
/// recover (the baseline, in the same run), and how many events were replayed.
async fn journal_recovery(args: &Args, name: &str, events: u64) -> anyhow::Result<(f64, f64, u64)> {
    let db = fresh_db(args, name)?;
    let mut config = HostConfig::new();
    config.storage(&db);
    {
        let system = system_with(args, config.clone(), &["journal"])?;
        system.spawn("j", "journal", b"0")?;
        for chunk in 0..events.div_ceil(1000) {
            let range = Journal::AppendRange {
                from: chunk * 1000,
                count: 1000.min(events - chunk * 1000),
            };
            system.tell("/user/j", Journal::KIND, encode(&range)?)?;
        }
        let state = journal_state(&system).await?;
        if state.values.len() as u64 != events {
            bail!("journal holds {} events", state.values.len());
        }
        system.shutdown().await.ok();
    }
    let empty = fresh_db(args, &format!("{name}-empty"))?;
    let mut empty_config = HostConfig::new();
    empty_config.storage(&empty);
    let mut timed = Vec::new();
    for config in [empty_config, config] {
        let system = system_with(args, config, &["journal"])?;
        let start = Instant::now();
        system.spawn("j", "journal", b"0")?;
        let state = journal_state(&system).await?;
        timed.push((start.elapsed().as_secs_f64(), state.replayed));
        system.shutdown().await.ok();
    }
    let _ = std::fs::remove_file(&db);
    let _ = std::fs::remove_file(&empty);
    Ok((timed[1].0, timed[0].0, timed[1].1))
}

async fn recovery(args: &Args) -> anyhow::Result<()> {
    let (full, base, replayed) = journal_recovery(args, "recovery", 100_000).await?;
    println!(
        "RESULT runtime=mote workload=recovery events={replayed} recovery_ms={:.1} \
         empty_start_ms={:.2} events_per_sec={:.0}",
        full * 1e3,
        base * 1e3,
        replayed as f64 / (full - base).max(1e-9)
    );
    Ok(())
}

async fn activation(args: &Args) -> anyhow::Result<()> {
    let db = fresh_db(args, "activation")?;
    let mut config = HostConfig::new();
    config.storage(&db);
    let system = system_with(args, config, &["entity"])?;
    let options = mote_host::EntityOptions {
        passivate_after: Some(Duration::from_millis(20)),
        ..Default::default()
    };
    system.register_entity("e", "entity", options)?;
    let get = encode(&Entity::Get)?;
    let ask = |path: &'static str| system.ask(path, Entity::KIND, get.clone(), WAIT);
    // Live: many asks in a row keep the entity active.
    ask("/user/e/live").await?;
    let live_n = 2000;
    let start = Instant::now();
    for _ in 0..live_n {
        ask("/user/e/live").await?;
    }
    let live_us = start.elapsed().as_secs_f64() / f64::from(live_n) * 1e6;
    // Passivated: wait for it to go, then one ask activates and recovers it.
    let mut samples = Vec::new();
    ask("/user/e/idle").await?;
    for _ in 0..200 {
        let deadline = Instant::now() + WAIT;
        while system.lookup("/user/e/idle").is_some() {
            if Instant::now() > deadline {
                bail!("the entity never passivated");
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let start = Instant::now();
        ask("/user/e/idle").await?;
        samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    let p99 = samples[samples.len() * 99 / 100];
    println!(
        "RESULT runtime=mote workload=activation live_ask_us={live_us:.1} \
         passivated_ask_median_us={median:.0} p99_us={p99:.0} ratio={:.1}",
        median / live_us
    );
    system.shutdown().await.ok();
    let _ = std::fs::remove_file(&db);
    Ok(())
}

/// The state of the journal actor at /user/j.
async fn journal_state(system: &ActorSystem) -> anyhow::Result<JournalState> {
    let reply = system
        .ask("/user/j", Journal::KIND, encode(&Journal::Query)?, WAIT)
        .await?;
    mote_guest::decode::<JournalState>(&reply.kind, &reply.body)
        .map_err(|e| anyhow!("bad journal state: {e}"))
}

async fn upgrade(args: &Args) -> anyhow::Result<()> {
    // Cold start: deploy on an empty compiled cache, then on a host that finds it filled.
    let cache = fresh_db(args, "cache")?.with_extension("d");
    let _ = std::fs::remove_dir_all(&cache);
    let v1 = examples::path("versioned_v1").ok_or_else(|| anyhow!("no example actors built"))?;
    let v2 = examples::path("versioned_v2").ok_or_else(|| anyhow!("no example actors built"))?;
    let mut cold = Vec::new();
    for _ in 0..2 {
        let mut config = HostConfig::new();
        config.module_cache(&cache);
        let system = system_with(args, config, &[])?;
        let start = Instant::now();
        system.deploy_file_version("versioned", "1", &v1)?;
        cold.push((start.elapsed().as_secs_f64(), system.module_stats()));
        system.shutdown().await.ok();
    }
    let (compile, first) = cold[0];
    let (cached, second) = cold[1];
    if first.compiled != 1 || second.cache_hits != 1 {
        bail!("cache not used as expected: {first:?} then {second:?}");
    }
    println!(
        "RESULT runtime=mote workload=cold_start compile_ms={:.2} cached_ms={:.3} ratio={:.0}",
        compile * 1e3,
        cached * 1e3,
        compile / cached
    );
    let _ = std::fs::remove_dir_all(&cache);

    // Rolling upgrade of 1,000 actors, each holding some state.
    const ACTORS: u32 = 1_000;
    let system = system(args, &[])?;
    system.deploy_file_version("versioned", "1", &v1)?;
    system.deploy_file_version("versioned", "2", &v2)?;
    for i in 0..ACTORS {
        system.spawn(&format!("a{i}"), "versioned", b"")?;
        for n in 0..10 {
            let add = encode(&Versioned::Add { stream: i, n })?;
            system.tell(&format!("/user/a{i}"), Versioned::KIND, add)?;
        }
    }
    // Every actor has handled its messages before the clock starts.
    let get = encode(&Versioned::Get)?;
    for i in 0..ACTORS {
        system
            .ask(&format!("/user/a{i}"), Versioned::KIND, get.clone(), WAIT)
            .await?;
    }
    let start = Instant::now();
    let report = system.upgrade("versioned", "2").await?;
    let secs = start.elapsed().as_secs_f64();
    if report.upgraded.len() != ACTORS as usize || !report.failed.is_empty() {
        bail!(
            "upgrade incomplete: {} upgraded, {:?}",
            report.upgraded.len(),
            report.failed
        );
    }
    let reply = system
        .ask("/user/a7", Versioned::KIND, get.clone(), WAIT)
        .await?;
    let state: VersionedState =
        mote_guest::decode(&reply.kind, &reply.body).map_err(|e| anyhow!("bad state: {e}"))?;
    if (state.version, state.count) != (2, 10) {
        bail!(
            "state not carried: version {} count {}",
            state.version,
            state.count
        );
    }
    let mut pauses: Vec<f64> = report
        .upgraded
        .iter()
        .map(|u| u.pause.as_secs_f64() * 1e6)
        .collect();
    pauses.sort_by(f64::total_cmp);
    println!(
        "RESULT runtime=mote workload=upgrade actors={ACTORS} seconds={secs:.3} actors_per_sec={:.0} \
         pause_median_us={:.0} pause_p99_us={:.0}",
        f64::from(ACTORS) / secs,
        pauses[pauses.len() / 2],
        pauses[pauses.len() * 99 / 100]
    );
    system.shutdown().await.ok();
    Ok(())
}

/// One guest language's example actor and the query it answers.
struct Lang {
    name: String,
    module: String,
    /// The component, when it is not one of the example actors.
    file: Option<std::path::PathBuf>,
    init: &'static [u8],
    kind: String,
    query: Vec<u8>,
}

impl Lang {
    /// An example actor answering `kind` (with `query`).
    fn example(name: &str, module: &str, kind: &str, query: Vec<u8>) -> Lang {
        Lang {
            name: name.into(),
            module: module.into(),
            file: None,
            init: b"",
            kind: kind.into(),
            query,
        }
    }

    /// A component named on the command line: `LABEL=PATH:KIND`.
    fn with(spec: &str) -> anyhow::Result<Lang> {
        let (label, rest) = spec
            .split_once('=')
            .ok_or_else(|| anyhow!("--with {spec}: expected LABEL=PATH:KIND"))?;
        let (path, kind) = rest
            .rsplit_once(':')
            .ok_or_else(|| anyhow!("--with {spec}: expected LABEL=PATH:KIND"))?;
        Ok(Lang {
            name: label.into(),
            module: label.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
            file: Some(path.into()),
            init: b"",
            kind: kind.into(),
            query: Vec::new(),
        })
    }
}

/// What `languages` measured of one component.
struct Measured {
    call: f64,
    instantiate: f64,
    pss_kib: u64,
}

/// Each SDK against its raw bindings answering the same query: (SDK label, raw label).
const SDK_PAIRS: [(&str, &str); 3] = [("python", "python-raw"), ("js", "js-raw"), ("c", "c-raw")];

/// Spawns of each component measured for its instantiate time and memory.
const INSTANCES: usize = 40;

async fn languages(args: &Args) -> anyhow::Result<()> {
    let mut langs = vec![
        Lang::example("rust", "counter", Counter::KIND, encode(&Counter::Get)?),
        Lang::example("python", "py_orders", "totals", Vec::new()),
        Lang::example("python-raw", "py_raw", "totals", Vec::new()),
        Lang::example("js", "js_events", "stats", Vec::new()),
        Lang::example("js-raw", "js_raw", "stats", Vec::new()),
        Lang::example("c", "c_counter", "get", Vec::new()),
        Lang::example("c-raw", "c_raw", "get", Vec::new()),
    ];
    for spec in &args.with {
        langs.push(Lang::with(spec)?);
    }
    // The first instances on the image engine in a process also pay for what it maps once and
    // for the host heap they first grow (300-400 KiB PSS per Python instance here): a round
    // of py_raw, not reported, takes that on, so no row does (it fell on the SDK's, first).
    // Without the shared function cache, so that it compiles nothing for the rows.
    let mut uncached = HostConfig::new();
    uncached.function_cache(false);
    let warm_up = Lang::example("warm-up", "py_raw", "totals", Vec::new());
    measure(args, uncached, &warm_up).await?;
    let mut measured = std::collections::HashMap::new();
    for lang in &langs {
        let (m, line) = measure(args, HostConfig::new(), lang).await?;
        println!("{line}");
        measured.insert(lang.name.clone(), m);
    }
    // What each SDK adds over its raw bindings, as same-run differences and ratios.
    for (sdk, raw) in SDK_PAIRS {
        if let (Some(s), Some(r)) = (measured.get(sdk), measured.get(raw)) {
            println!(
                "RESULT runtime=mote workload=languages-sdk lang={sdk} call_overhead_us={:.1} \
                 call_ratio={:.2} instantiate_ratio={:.2} pss_overhead_kib={}",
                (s.call - r.call) * 1e6,
                s.call / r.call,
                s.instantiate / r.instantiate,
                s.pss_kib as i64 - r.pss_kib as i64,
            );
        }
    }
    Ok(())
}

/// Measures one component in a system of its own (`config`): what `languages` reports of it,
/// and its `RESULT` line.
async fn measure(
    args: &Args,
    config: HostConfig,
    lang: &Lang,
) -> anyhow::Result<(Measured, String)> {
    const CALLS: u32 = 2000;
    let file = match &lang.file {
        Some(file) => file.clone(),
        None => examples::path(&lang.module).ok_or_else(|| anyhow!("no example actors built"))?,
    };
    let size = std::fs::metadata(&file)
        .with_context(|| format!("{}: {}", lang.name, file.display()))?
        .len();
    let system = system_with(args, config, &[])?;
    let compile = Instant::now();
    system.deploy_file(&lang.module, &file)?;
    let compile = compile.elapsed().as_secs_f64();
    // Call: round trips to one live instance.
    system.spawn("warm", &lang.module, lang.init)?;
    query(&system, "/user/warm", lang).await?;
    let start = Instant::now();
    for _ in 0..CALLS {
        query(&system, "/user/warm", lang).await?;
    }
    let call = start.elapsed().as_secs_f64() / f64::from(CALLS);
    // Instantiate: spawn to first answer, net of one call; memory: resident growth per
    // instance once each has answered (after the compile's garbage has gone back: a 12 MB
    // module's compile frees hundreds of MB, and their return while the instances are made
    // read as a negative growth).
    settle_allocator();
    let rss_before = rss_bytes();
    let pss_before = pss_bytes();
    let anon_before = proc_kb("status", "RssAnon");
    let start = Instant::now();
    for i in 0..INSTANCES {
        let path = format!("/user/i{i}");
        system.spawn(&path, &lang.module, lang.init)?;
        query(&system, &path, lang).await?;
    }
    let instantiate = start.elapsed().as_secs_f64() / INSTANCES as f64 - call;
    let per = |after: u64, before: u64| after.saturating_sub(before) / INSTANCES as u64 / 1024;
    let rss = per(rss_bytes(), rss_before);
    let pss = per(pss_bytes(), pss_before);
    let private = per(proc_kb("status", "RssAnon"), anon_before);
    let line = format!(
        "RESULT runtime=mote workload=languages lang={} size_bytes={size} compile_ms={:.0} \
         instantiate_us={:.0} call_us={:.1} rss_per_instance_kib={rss} \
         pss_per_instance_kib={pss} private_per_instance_kib={private}",
        lang.name,
        compile * 1e3,
        instantiate * 1e6,
        call * 1e6,
    );
    system.shutdown().await.ok();
    let measured = Measured {
        call,
        instantiate,
        pss_kib: pss,
    };
    Ok((measured, line))
}

/// Asks `path` the language's query and waits for the answer.
async fn query(system: &ActorSystem, path: &str, lang: &Lang) -> anyhow::Result<()> {
    system
        .ask(path, &lang.kind, lang.query.clone(), WAIT)
        .await
        .map(drop)
        .with_context(|| format!("{} actor at {path}", lang.name))
}
