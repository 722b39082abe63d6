//! Guest log lines never block a scheduler thread: with a log writer that blocks (a gate the
//! test holds shut, as a full stderr pipe would), two actors flood the log through `host.log`
//! and stdout while a sibling keeps answering asks promptly; the lines past the guest log's
//! queue are dropped and counted. Once the gate opens, the queued lines are written.
//!
//! Its own test binary: it installs the process-wide `tracing` subscriber.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use mote_example_protocol::Counter;
use mote_host::{HostConfig, Quotas};
use mote_tests::*;

/// Whether the log writer may write; it waits while this is false.
static GATE: Mutex<bool> = Mutex::new(true);
static OPENED: Condvar = Condvar::new();
/// Flood lines written so far.
static FLOOD_LINES: AtomicU64 = AtomicU64::new(0);

/// How long the sibling may take to answer an ask at the 99th percentile.
const RESPONSIVE: Duration = Duration::from_millis(100);

/// No single ask may take this long (a stall, not a slow scheduler).
const STALL: Duration = Duration::from_secs(2);

/// After this long with the gate shut, a watchdog opens it, so that a host whose actors are
/// stuck in the writer fails the latency assertion instead of hanging the test.
const WATCHDOG: Duration = Duration::from_secs(10);

fn set_gate(open: bool) {
    *GATE.lock().unwrap_or_else(|p| p.into_inner()) = open;
    OPENED.notify_all();
}

/// A log writer that blocks while the gate is shut.
struct Gated;

impl std::io::Write for Gated {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut open = GATE.lock().unwrap_or_else(|p| p.into_inner());
        while !*open {
            open = OPENED.wait(open).unwrap_or_else(|p| p.into_inner());
        }
        drop(open);
        if buf.windows(10).any(|w| w == b"flood line") {
            FLOOD_LINES.fetch_add(1, Ordering::Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_log_writer_stalls_no_actor_and_drops_are_counted() {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(|| Gated)
        .init();
    let mut config = HostConfig::new();
    config.quotas(Quotas {
        log_lines_per_second: u32::MAX,
        log_burst: u32::MAX,
        ..Quotas::default()
    });
    config.guest_log_queue(1024);
    let system = Arc::new(system_configured(config, &["attacker", "counter"]));
    system.spawn("victim", "counter", b"5").unwrap();
    let mut probe = system.probe("reports").unwrap();
    let value: Counter = ask_as(&system, "/user/victim", &Counter::Get).await;
    assert_eq!(value, Counter::Value(5));

    // From here on the writer blocks, as a full stderr pipe would.
    set_gate(false);
    let watchdog_done = Arc::new(AtomicBool::new(false));
    let watchdog = std::thread::spawn({
        let done = watchdog_done.clone();
        move || {
            let until = Instant::now() + WATCHDOG;
            while !done.load(Ordering::Acquire) && Instant::now() < until {
                std::thread::park_timeout(Duration::from_millis(50));
            }
            set_gate(true);
        }
    });
    let done = Arc::new(AtomicBool::new(false));
    let asker = keep_asking(system.clone(), "/user/victim", 5, done.clone());
    // One flood per worker thread: were a line written on the actor's thread, both would block.
    let lines = 20_000;
    for (name, stream) in [("by-log", "log"), ("by-stdout", "stdout")] {
        let init = format!("{stream} /system/reports {lines}");
        system.spawn(name, "attacker", init.as_bytes()).unwrap();
    }
    let mut finished = 0;
    while finished < 2 {
        let report = next_report(&mut probe).await;
        match report.label.as_str() {
            "accepted" => assert_eq!(report.value, lines),
            "done" => finished += 1,
            _ => {}
        }
    }
    done.store(true, Ordering::Release);
    let mut latencies = asker.await.expect("the asks of the sibling");
    let dropped = system.log_dropped();
    let gate_was_shut = !*GATE.lock().unwrap_or_else(|p| p.into_inner());
    let p99 = p99(&mut latencies);
    eprintln!(
        "sibling p99 {p99:?} over {} asks; {dropped} guest lines dropped; {} flood lines written \
         while the gate was shut",
        latencies.len(),
        FLOOD_LINES.load(Ordering::Relaxed)
    );
    assert!(
        gate_was_shut,
        "the watchdog had to open the gate: actors were stuck behind the log writer"
    );
    assert!(
        p99 < RESPONSIVE,
        "the sibling answered in {p99:?} at p99 ({} asks) with the log writer blocked",
        latencies.len()
    );
    let slowest = latencies.last().copied().unwrap_or_default();
    assert!(
        slowest < STALL,
        "the slowest ask took {slowest:?}: the sibling stalled"
    );
    assert!(dropped > 0, "lines past the queue are dropped and counted");
    assert!(
        dropped <= 2 * lines,
        "{dropped} dropped of {} lines",
        2 * lines
    );
    assert_eq!(FLOOD_LINES.load(Ordering::Relaxed), 0, "the gate was shut");

    // Open the gate: the queued lines are written.
    set_gate(true);
    watchdog_done.store(true, Ordering::Release);
    watchdog.thread().unpark();
    wait_until(|| FLOOD_LINES.load(Ordering::Relaxed) >= 1000).await;
    watchdog.join().expect("the watchdog");
}
