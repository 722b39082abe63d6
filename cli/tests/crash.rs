//! Crash recovery of durable actors: a host process running a durable chain
//! (source -> relay -> sink, the `ledger` example) is killed with SIGKILL at random points, several
//! times, and restarted on the same database. In the end every count must agree exactly: nothing
//! lost, nothing duplicated, the sink saw 1, 2, ..., N in order. The same must hold for a sink
//! that takes its counts through the stash, 50 at a time: a stashed durable message stays
//! unacknowledged until it is handled.
//!
//! Delivery modes: the relay's durable counts go to a witness that keeps no durable state and
//! passes each count on to the sink, which records it durably and counts any it sees twice. In
//! at-most-once mode no count reaches the witness twice, however often the host is killed; in
//! at-least-once mode a count whose handling a kill interrupts arrives again (and none is lost).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Mirror of the example protocol's `Ledger` (postcard is positional).
#[derive(Serialize)]
#[allow(dead_code)]
enum Ledger {
    Next,
    Inc,
    Count(u64),
    Query,
    Flush,
}

/// Mirror of the example protocol's `LedgerState`.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
struct LedgerState {
    count: u64,
    sum: u64,
    dups: u64,
    gaps: u64,
}

const DEADLINE: Duration = Duration::from_secs(120);

/// The host under test; killed if the test ends early.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(dir: &Path) -> Host {
    let child = Command::new(env!("CARGO_BIN_EXE_mote"))
        .current_dir(dir)
        .args(["run", "ledger.toml", "--db", "ledger.redb", "--control"])
        .arg(dir.join("mote.sock"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start mote run");
    Host(child)
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Sends one order to an actor of the running host; false while the host is not up (yet).
fn send(socket: &Path, path: &str, order: &Ledger) -> bool {
    let (Ok(mut stream), Ok(body)) = (UnixStream::connect(socket), postcard::to_allocvec(order))
    else {
        return false;
    };
    let request = serde_json::json!({
        "op": "send", "to": path, "kind": "Ledger", "body": to_hex(&body),
    });
    let mut line = String::new();
    writeln!(stream, "{request}").is_ok()
        && BufReader::new(stream).read_line(&mut line).is_ok()
        && line.contains("\"ok\":true")
}

/// Asks one actor of the running host for its state; `None` while the host is not up (yet).
fn query(socket: &Path, path: &str) -> Option<LedgerState> {
    let mut stream = UnixStream::connect(socket).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let body = to_hex(&postcard::to_allocvec(&Ledger::Query).ok()?);
    let request = serde_json::json!({
        "op": "ask", "to": path, "kind": "Ledger", "body": body, "timeout_ms": 5000u64,
    });
    writeln!(stream, "{request}").ok()?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).ok()?;
    let response: serde_json::Value = serde_json::from_str(&line).ok()?;
    let body = response.get("reply")?.get("body")?.as_str()?;
    postcard::from_bytes(&from_hex(body)).ok()
}

/// Polls the sink until `done` holds, or panics after [`DEADLINE`]; with `flush`, it first
/// tells the sink to take what it stashed, each time.
fn wait_for(socket: &Path, flush: bool, done: impl Fn(LedgerState) -> bool) -> LedgerState {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if flush {
            send(socket, "/user/sink", &Ledger::Flush);
        }
        if let Some(state) = query(socket, "/user/sink")
            && done(state)
        {
            return state;
        }
        assert!(Instant::now() < deadline, "the sink made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Writes `ledger.toml` into `dir`: the ledger module and one actor of it per (path, init).
fn manifest(dir: &Path, actors: &[(&str, String)]) {
    let ledger = mote_test_programs::path("ledger").expect("example actors are built");
    let mut toml = format!("[[module]]\nname = \"ledger\"\npath = {ledger:?}\n");
    for (path, init) in actors {
        toml.push_str(&format!(
            "\n[[actor]]\npath = {path:?}\nmodule = \"ledger\"\ninit = {init:?}\n"
        ));
    }
    std::fs::write(dir.join("ledger.toml"), toml).unwrap();
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mote-crash-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn kill_9_at_random_points_loses_and_duplicates_nothing() {
    chain("plain", "sink", 3000, 4);
}

#[test]
fn kill_9_loses_no_stashed_durable_message() {
    chain("stash", "stasher 50", 20_000, 20);
}

/// Runs source -> relay -> sink (`sink` is its init) for `n` counts, killing the host `kills`
/// times at random points, then checks every count.
fn chain(name: &str, sink: &str, n: u64, kills: u64) {
    let flush = sink != "sink";
    let dir = scratch(name);
    manifest(
        &dir,
        &[
            ("/user/sink", sink.to_owned()),
            ("/user/relay", "relay /user/sink".to_owned()),
            ("/user/source", format!("source {n} /user/relay")),
        ],
    );
    let socket = dir.join("mote.sock");
    for (round, target) in random_points(n, kills).into_iter().enumerate() {
        let mut host = start(&dir);
        let state = wait_for(&socket, false, |s| s.count >= target);
        host.0.kill().expect("SIGKILL");
        host.0.wait().expect("reap");
        eprintln!(
            "{name} round {round}: killed at sink count >= {}",
            state.count
        );
        assert_eq!((state.dups, state.gaps), (0, 0), "before kill {round}");
    }
    let host = start(&dir);
    let sink = wait_for(&socket, flush, |s| s.count >= n);
    let relay = query(&socket, "/user/relay").expect("relay");
    let source = query(&socket, "/user/source").expect("source");
    let total = n * (n + 1) / 2;
    assert_eq!(source.count, n, "source sent exactly n");
    assert_eq!(
        (relay.count, relay.sum),
        (n, total),
        "relay counted each once"
    );
    assert_eq!(
        sink,
        LedgerState {
            count: n,
            sum: total,
            dups: 0,
            gaps: 0
        },
        "the sink saw 1..=n exactly once each, in order"
    );
    // A graceful stop at the end: SIGTERM, and the host exits cleanly.
    let pid = host.0.id();
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut host = host;
    let exit = host.0.wait().unwrap();
    assert!(exit.success(), "host exit after SIGTERM: {exit}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs source -> relay -> witness (in `delivery` mode, lingering `linger_ms` over each count)
/// -> sink for `n` counts, killing the host once the sink has recorded each of `kill_at` in
/// turn; returns the sink's state once it has recorded count `n`, and checks that the source
/// and relay sent each count once.
fn witnessed(name: &str, delivery: &str, linger_ms: u64, n: u64, kill_at: &[u64]) -> LedgerState {
    let dir = scratch(name);
    manifest(
        &dir,
        &[
            ("/user/sink", "sink".to_owned()),
            (
                "/user/witness",
                format!("witness /user/sink {delivery} {linger_ms}"),
            ),
            ("/user/relay", "relay /user/witness".to_owned()),
            ("/user/source", format!("source {n} /user/relay")),
        ],
    );
    let socket = dir.join("mote.sock");
    for (round, target) in kill_at.iter().enumerate() {
        let mut host = start(&dir);
        let state = wait_for(&socket, false, |s| s.count >= *target);
        host.0.kill().expect("SIGKILL");
        host.0.wait().expect("reap");
        eprintln!("{name} round {round}: killed at sink {state:?}");
        if delivery == "at-most-once" {
            assert_eq!(
                state.dups, 0,
                "a count reached the witness twice, before kill {round}"
            );
        }
    }
    let host = start(&dir);
    let sink = wait_for(&socket, false, |s| s.count >= n);
    let relay = query(&socket, "/user/relay").expect("relay");
    let source = query(&socket, "/user/source").expect("source");
    assert_eq!(source.count, n, "source sent exactly n");
    assert_eq!(
        (relay.count, relay.sum),
        (n, n * (n + 1) / 2),
        "relay counted each once"
    );
    eprintln!("{name}: the sink recorded {sink:?}");
    drop(host);
    let _ = std::fs::remove_dir_all(&dir);
    sink
}

/// Kill points: one at a random place in each of `kills` stretches of `n`.
fn random_points(n: u64, kills: u64) -> Vec<u64> {
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    eprintln!("kill points seed {seed}");
    let stretch = n / (kills + 1);
    (0..kills)
        .map(|k| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            k * stretch + 1 + seed % stretch
        })
        .collect()
}

#[test]
fn kill_9_never_hands_an_at_most_once_receiver_a_count_twice() {
    let n = 2000;
    let sink = witnessed("at-most-once", "at-most-once", 0, n, &random_points(n, 4));
    assert_eq!(sink.dups, 0, "no count reached the witness twice: {sink:?}");
}

/// Each kill lands while the witness is busy with a count the sink already recorded (it
/// lingers 500 ms over each): at least once, that count arrives again after the restart; at
/// most once, it never does.
#[test]
fn a_kill_during_handling_redelivers_at_least_once_and_never_at_most_once() {
    let kills = [2, 4, 6];
    let least = witnessed("least-slow", "at-least-once", 500, 8, &kills);
    assert!(
        least.dups >= 1,
        "an interrupted handling is redelivered at least once: {least:?}"
    );
    assert_eq!(least.gaps, 0, "at least once loses nothing: {least:?}");
    let most = witnessed("most-slow", "at-most-once", 500, 8, &kills);
    assert_eq!(most.dups, 0, "at most once never redelivers: {most:?}");
}
