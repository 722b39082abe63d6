//! Crash recovery of durable actors: a host process running a durable chain
//! (source -> relay -> sink, the `ledger` example) is killed with SIGKILL at random points, several
//! times, and restarted on the same database. In the end every count must agree exactly: nothing
//! lost, nothing duplicated, the sink saw 1, 2, ..., N in order. The same must hold for a sink
//! that takes its counts through the stash, 50 at a time: a stashed durable message stays
//! unacknowledged until it is handled.

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
fn chain(name: &str, sink: &str, n: u64, kills: usize) {
    let flush = sink != "sink";
    let dir = scratch(name);
    let ledger = mote_test_programs::path("ledger").expect("example actors are built");
    std::fs::write(
        dir.join("ledger.toml"),
        format!(
            "[[module]]\nname = \"ledger\"\npath = {ledger:?}\n\n\
             [[actor]]\npath = \"/user/sink\"\nmodule = \"ledger\"\ninit = {sink:?}\n\n\
             [[actor]]\npath = \"/user/relay\"\nmodule = \"ledger\"\ninit = \"relay /user/sink\"\n\n\
             [[actor]]\npath = \"/user/source\"\nmodule = \"ledger\"\ninit = \"source {n} /user/relay\"\n"
        ),
    )
    .unwrap();
    let socket = dir.join("mote.sock");
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    eprintln!("{name} crash test seed {seed}");
    let mut reached = 0;
    for round in 0..kills {
        let mut host = start(&dir);
        // A random point in the next stretch of the stream.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let stretch = n / (kills as u64 + 1);
        let target = reached + 1 + seed % stretch;
        let state = wait_for(&socket, false, |s| s.count >= target);
        host.0.kill().expect("SIGKILL");
        host.0.wait().expect("reap");
        eprintln!("round {round}: killed at sink count >= {}", state.count);
        assert_eq!((state.dups, state.gaps), (0, 0), "before kill {round}");
        reached = state.count;
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
