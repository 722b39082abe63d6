//! Helpers shared by the black-box tests: a system with the example actors deployed, typed sends,
//! and waiting for reports with a deadline (never a sleep).

pub mod collector;
pub mod scenarios;
/// The nats-server the cluster tests run (its own crate, so the host's unit tests can use it).
pub use mote_nats_server as nats;

use std::time::Duration;

use mote_example_protocol::{Clock, ClockReading, Report};
use mote_guest::Message;
use mote_host::{ActorSystem, Envelope, HostConfig, Probe};
use mote_test_programs as examples;

/// How long any single expected event may take before a test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A system with the named example modules deployed.
pub fn system_with(modules: &[&str]) -> ActorSystem {
    system_configured(HostConfig::new(), modules)
}

/// A system with the given configuration and the named example modules deployed.
///
/// Compiled modules are cached for all tests in the target directory, and the deploys of one
/// module are serialized within a test binary, so each module is compiled once (an 18 MB Python
/// component takes tens of seconds to compile, then ~1 ms to load) while other modules compile
/// beside it.
pub fn system_configured(mut config: HostConfig, modules: &[&str]) -> ActorSystem {
    config.module_cache(module_cache());
    let system = ActorSystem::new(config).expect("system");
    for name in modules {
        let path =
            examples::path(name).expect("example actors are built by test-programs/build.rs");
        let _compiled_once = deploying(name);
        system.deploy_file(name, &path).expect("deploy example");
    }
    system
}

/// Holds off other deploys of the module `name` in this test binary until dropped: one test
/// compiles it, the others then load it from the cache.
fn deploying(name: &str) -> std::sync::MutexGuard<'static, ()> {
    use std::sync::Mutex;
    static MODULES: Mutex<std::collections::BTreeMap<String, &'static Mutex<()>>> =
        Mutex::new(std::collections::BTreeMap::new());
    let lock: &'static Mutex<()> = MODULES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(name.to_owned())
        .or_insert_with(|| Box::leak(Box::default()));
    lock.lock().unwrap_or_else(|p| p.into_inner())
}

/// Deploys example `example` as module `name` at `version`, with snapshots on (the `snapshot`
/// grant).
pub fn deploy_with_snapshots(system: &ActorSystem, name: &str, version: &str, example: &str) {
    let path = examples::path(example).expect("example actors are built by test-programs/build.rs");
    let bytes = std::fs::read(path).expect("the example is built");
    system
        .deploy_granted(name, version, &bytes, &["snapshot".to_owned()])
        .expect("deploy with snapshots on");
}

/// The figures of the live actor `address`, from the system's tree.
pub fn stats_of(system: &ActorSystem, address: &mote_host::Address) -> mote_host::StatsSnapshot {
    let tree = system.tree();
    let info = tree.iter().find(|a| a.address == *address);
    info.unwrap_or_else(|| panic!("{address} lives")).stats
}

/// A system with the named pattern components deployed from the bytes `mote` embeds
/// (`mote-patterns`), and the named example modules.
pub fn system_with_patterns(patterns: &[&str], examples: &[&str]) -> ActorSystem {
    let system = system_configured(HostConfig::new(), examples);
    for name in patterns {
        let bytes = mote_patterns::component(name)
            .unwrap_or_else(|| panic!("mote-patterns embeds no {name}"));
        let _compiled_once = deploying(&format!("pattern {name}"));
        system.deploy(name, bytes).expect("deploy pattern");
    }
    system
}

/// The compiled-module cache the tests share: `target/<profile>/mote-module-cache`.
pub fn module_cache() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    // target/<profile>/deps/<test binary>
    exe.parent()
        .and_then(|deps| deps.parent())
        .unwrap_or_else(|| std::path::Path::new("."))
        .join("mote-module-cache")
}

/// Sends a typed message from outside.
pub fn tell<M: Message>(system: &ActorSystem, to: &str, msg: &M) {
    let body = mote_guest::encode(msg).expect("encode");
    system.tell(to, M::KIND, body).expect("tell");
}

/// Sends a typed message from a probe, so the receiver can reply to it.
pub fn tell_from<M: Message>(probe: &Probe, to: &str, msg: &M) {
    let body = mote_guest::encode(msg).expect("encode");
    probe.tell(to, M::KIND, body).expect("tell");
}

/// The next message at the probe, or a panic after [`DEADLINE`].
pub async fn next(probe: &mut Probe) -> Envelope {
    probe
        .recv_timeout(DEADLINE)
        .await
        .unwrap_or_else(|| panic!("no message at {} within {DEADLINE:?}", probe.address()))
}

/// The next message at the probe, decoded as `M`.
pub async fn next_as<M: Message>(probe: &mut Probe) -> M {
    let envelope = next(probe).await;
    mote_guest::decode(&envelope.kind, &envelope.body)
        .unwrap_or_else(|e| panic!("unexpected message {:?}: {e}", envelope.kind))
}

/// The next [`Report`] at the probe.
pub async fn next_report(probe: &mut Probe) -> Report {
    next_as::<Report>(probe).await
}

/// The next report at the probe that has this label, skipping others.
pub async fn report_labelled(probe: &mut Probe, label: &str) -> Report {
    loop {
        let report = next_report(probe).await;
        if report.label == label {
            return report;
        }
    }
}

/// The next supervision decision, or a panic after [`DEADLINE`].
pub async fn next_decision(
    events: &mut tokio::sync::broadcast::Receiver<mote_host::SupervisionEvent>,
) -> mote_host::SupervisionEvent {
    tokio::time::timeout(DEADLINE, events.recv())
        .await
        .unwrap_or_else(|_| panic!("no supervision decision within {DEADLINE:?}"))
        .expect("supervision events")
}

/// Waits (up to [`DEADLINE`] each) for the next supervision decision about the actor at `path`,
/// skipping decisions about others (an earlier actor the guardian restarted may fail again).
pub async fn decision_for(
    events: &mut tokio::sync::broadcast::Receiver<mote_host::SupervisionEvent>,
    path: &str,
) -> mote_host::SupervisionEvent {
    loop {
        let event = next_decision(events).await;
        if event.child.path.as_str() == path {
            return event;
        }
    }
}

/// Waits (up to [`DEADLINE`]) for the host to report that it watches canaries.
pub async fn canary_watch_begins(
    progress: &mut tokio::sync::broadcast::Receiver<mote_host::Progress>,
) {
    let begun = async {
        loop {
            match progress.recv().await {
                Ok(p)
                    if matches!(p.task, mote_host::Task::Canary { .. }) && p.outcome.is_none() =>
                {
                    return;
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(e) => panic!("progress: {e}"),
            }
        }
    };
    tokio::time::timeout(DEADLINE, begun)
        .await
        .expect("the canary watch began");
}

/// Waits until `condition` holds, checking every millisecond, or panics after [`DEADLINE`].
/// For state the host exposes but does not announce (such as a mailbox's depth).
pub async fn wait_until(mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until each of `nodes` routes sends to `path` to the node `owner`: another node's
/// claim reaches a node's mirror of the claims through a key-value watch, a little after
/// `claim` returned, and a send before that is a dead letter on the sending node.
pub async fn routed(nodes: &[&ActorSystem], path: &str, owner: &str) {
    wait_until(|| {
        nodes
            .iter()
            .all(|n| n.node_of(path).as_deref() == Some(owner))
    })
    .await;
}

/// Polls `probe` (every 20 ms) until it gives a value, or panics after `patience`. For state
/// only an ask can read (an actor's count across nodes).
pub async fn wait_until_async<T, F: std::future::Future<Output = Option<T>>>(
    patience: Duration,
    mut probe: impl FnMut() -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within {patience:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits for `address` to terminate, or panics after [`DEADLINE`].
pub async fn terminated(system: &ActorSystem, address: &mote_host::Address) {
    tokio::time::timeout(DEADLINE, system.terminated(address))
        .await
        .unwrap_or_else(|_| panic!("{address} did not terminate within {DEADLINE:?}"));
}

/// Asks `to` with a typed request and decodes the typed reply, or panics after [`DEADLINE`].
/// A full mailbox refuses the request at once: it is sent again until there is room.
pub async fn ask_as<M: Message, R: Message>(system: &ActorSystem, to: &str, msg: &M) -> R {
    let body = mote_guest::encode(msg).expect("encode");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let reply = loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match system.ask(to, M::KIND, body.clone(), left).await {
            Err(mote_host::AskError::Send(mote_host::SendError::MailboxFull { .. }))
                if !left.is_zero() =>
            {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            other => break other.unwrap_or_else(|e| panic!("ask {to}: {e}")),
        }
    };
    mote_guest::decode(&reply.kind, &reply.body)
        .unwrap_or_else(|e| panic!("unexpected reply {:?} from {to}: {e}", reply.kind))
}

/// Rounds of `Clock::Burn` that take about `cpu` of the clock actor at `to`, as one trial burn
/// of 2,000,000 rounds measures it (the CPU time its calls used, read before and after).
pub async fn burn_rounds(system: &ActorSystem, to: &str, cpu: Duration) -> u64 {
    let rounds = 2_000_000;
    let before: ClockReading = ask_as(system, to, &Clock::Read).await;
    let trial: ClockReading = ask_as(system, to, &Clock::Burn(rounds)).await;
    let per_round = (trial.cpu_ns - before.cpu_ns).max(1) as f64 / rounds as f64;
    (cpu.as_nanos() as f64 / per_round) as u64
}

/// A fresh, empty directory for one test's files (a database), removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// Creates `<tmp>/mote-<label>-<pid>-<nanos>`.
    pub fn new(label: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("mote-{label}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    /// A path inside the directory.
    pub fn join(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A guest SDK's directory: `example-actors/<lang>` (`python`, `js`, `c`).
pub fn sdk_dir(lang: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("example-actors")
        .join(lang)
}

/// Runs `command` to its end and returns its stdout and stderr, or panics naming `what` with
/// both if it fails, or with `install` (how to get the program) if it cannot start.
pub fn run_checked(
    command: &mut std::process::Command,
    what: &str,
    install: &str,
) -> (String, String) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what} ({e}): {install}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{what} failed:\n{stdout}{stderr}");
    (stdout, stderr)
}

/// A host configuration with its database at `db`.
pub fn durable_config(db: &std::path::Path) -> HostConfig {
    let mut config = HostConfig::new();
    config.storage(db);
    config
}

/// Asks the counter at `path` for its value over and over, expecting `value`, until `done`
/// is set and at least 100 asks were answered; gives the latency of each ask.
pub fn keep_asking(
    system: std::sync::Arc<ActorSystem>,
    path: &'static str,
    value: u64,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<Vec<Duration>> {
    use mote_example_protocol::Counter;
    tokio::spawn(async move {
        let mut latencies = Vec::new();
        while !done.load(std::sync::atomic::Ordering::Acquire) || latencies.len() < 100 {
            let asked = std::time::Instant::now();
            let answer: Counter = ask_as(&system, path, &Counter::Get).await;
            latencies.push(asked.elapsed());
            assert_eq!(answer, Counter::Value(value));
        }
        latencies
    })
}

/// The 99th percentile of `latencies` (sorted here).
pub fn p99(latencies: &mut [Duration]) -> Duration {
    latencies.sort();
    latencies[(latencies.len() * 99).div_ceil(100) - 1]
}

/// How a test speaks to an example actor: the same protocol types (same kinds), in the Rust
/// SDK's postcard or in JSON, as the actors of other languages read them (serde's JSON: a
/// struct is an object, an enum variant `{"Append":5}` or `"Query"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speech {
    /// postcard, as Rust actors speak the example protocol.
    Postcard,
    /// UTF-8 JSON, as the Python actors speak it.
    Json,
}

impl Speech {
    /// The body of `msg` in this speech.
    pub fn encode<M: Message>(self, msg: &M) -> Vec<u8> {
        match self {
            Speech::Postcard => mote_guest::encode(msg).expect("encode"),
            Speech::Json => serde_json::to_vec(msg).expect("encode as JSON"),
        }
    }

    /// `envelope` read as `M` in this speech, or a panic naming what came instead.
    pub fn decode<M: Message>(self, envelope: &Envelope) -> M {
        assert_eq!(envelope.kind, M::KIND, "unexpected message {envelope:?}");
        match self {
            Speech::Postcard => mote_guest::decode(&envelope.kind, &envelope.body)
                .unwrap_or_else(|e| panic!("unexpected message {:?}: {e}", envelope.kind)),
            Speech::Json => serde_json::from_slice(&envelope.body).unwrap_or_else(|e| {
                panic!(
                    "unexpected {} body {:?}: {e}",
                    envelope.kind,
                    String::from_utf8_lossy(&envelope.body)
                )
            }),
        }
    }

    /// Sends `msg` from outside.
    pub fn tell<M: Message>(self, system: &ActorSystem, to: &str, msg: &M) {
        system.tell(to, M::KIND, self.encode(msg)).expect("tell");
    }

    /// Sends `msg` from a probe, so the receiver can reply to it.
    pub fn tell_from<M: Message>(self, probe: &Probe, to: &str, msg: &M) {
        probe.tell(to, M::KIND, self.encode(msg)).expect("tell");
    }

    /// Asks `to` and decodes the reply, or panics after [`DEADLINE`].
    pub async fn ask<M: Message, R: Message>(self, system: &ActorSystem, to: &str, msg: &M) -> R {
        let reply = system
            .ask(to, M::KIND, self.encode(msg), DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("ask {to}: {e}"));
        self.decode(&reply)
    }

    /// The next message at the probe, decoded as `M`.
    pub async fn next<M: Message>(self, probe: &mut Probe) -> M {
        let envelope = next(probe).await;
        self.decode(&envelope)
    }
}
