//! The pulled receive (`host/src/actor/pull.rs`): a Rust SDK actor takes the messages queued
//! behind the one it was called with inside the same call, through `inbox.next`. Each pulled
//! message must be handled exactly as if the host had called the actor for it: in order, with
//! its own CPU budget, its own failure, and its own rejection.

use std::time::Duration;

use mote_example_protocol::{Clock, ClockReading, Crash, Lane};
use mote_host::{DeadLetterReason, FailureKind, HostConfig};
use mote_tests::{
    DEADLINE, burn_rounds, next_as, next_decision, next_report, stats_of, system_configured,
    system_with, tell, tell_from, wait_until,
};

const WORKER: &str = "/user/boss/worker";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_burst_is_pulled_within_calls_and_handled_in_order() {
    let system = system_with(&["lanes"]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("boss", "lanes", b"boss /system/p").unwrap();
    wait_until(|| system.lookup(WORKER).is_some()).await;
    let worker = system.lookup(WORKER).unwrap();
    // The boss deactivates its worker, so the whole burst is queued before it runs.
    tell(&system, "/user/boss", &Lane::Pause);
    assert_eq!(next_report(&mut probe).await.label, "paused");
    for n in 0..200u32 {
        tell(&system, WORKER, &Lane::Work(n));
    }
    tell(&system, "/user/boss", &Lane::Resume);
    assert_eq!(next_report(&mut probe).await.label, "resumed");
    for n in 0..200u32 {
        let report = next_report(&mut probe).await;
        assert_eq!(
            (report.label.as_str(), report.value),
            ("work", u64::from(n))
        );
    }
    let stats = stats_of(&system, &worker);
    assert_eq!(stats.received, 200, "{stats:?}");
    // One call per batch of the worker's share (64 messages): the rest were pulled.
    assert!(stats.pulled >= 150, "{stats:?}");
    // The metrics count them too, per module.
    assert_eq!(module_pulled(&system, "lanes"), stats.pulled as f64);
    system.shutdown().await.unwrap();
}

/// The messages the actors of `module` pulled, from the metrics.
fn module_pulled(system: &mote_host::ActorSystem, module: &str) -> f64 {
    let metrics = system.metrics(&mote_host::MetricsQuery::default());
    let series = format!("mote_module_messages_pulled_total{{module=\"{module}\"}} ");
    let line = metrics.lines().find(|l| l.starts_with(&series));
    line.and_then(|l| l[series.len()..].parse().ok())
        .unwrap_or_else(|| panic!("{series} in {metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_reply_pair_plays_inside_its_calls_unless_lingering_is_off() {
    for linger in [true, false] {
        let mut config = HostConfig::new();
        config.linger(linger);
        let system = system_configured(config, &["pingpong"]);
        let mut probe = system.probe("p").unwrap();
        system.spawn("pong", "pingpong", b"pong /system/p").unwrap();
        system
            .spawn("ping", "pingpong", b"ping /user/pong 2000 /system/p")
            .unwrap();
        let mut counts = Vec::new();
        for _ in 0..2 {
            let report = next_report(&mut probe).await;
            counts.push((report.label, report.value));
        }
        counts.sort();
        assert_eq!(counts, [("pings".into(), 2000), ("pongs".into(), 2000)]);
        // No burst ever queues in ping-pong: only a call that waits for the reply pulls it.
        let pulled = module_pulled(&system, "pingpong");
        if linger {
            assert!(pulled >= 1000.0, "{pulled} of 4,001 messages pulled");
        } else {
            assert_eq!(pulled, 0.0, "without lingering every message is a call");
        }
        system.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pulled_message_gets_a_cpu_budget_of_its_own() {
    let deadline = Duration::from_secs(1);
    let mut config = HostConfig::new();
    config.cpu_deadline(deadline);
    let system = system_configured(config, &["clock"]);
    let clock = system.spawn("clock", "clock", b"").unwrap();
    // Rounds of busy work that take about 0.35 of the deadline, measured here.
    let rounds = burn_rounds(&system, "/user/clock", deadline.mul_f64(0.35)).await;
    let mut probe = system.probe("reader").unwrap();
    let mut decisions = system.subscribe_supervision();
    let pulled = stats_of(&system, &clock).pulled;
    // Six of them sent together: whatever the first call finds queued, a later call finds at
    // least four behind its message (`pull::BURST`) and pulls them, 1.4 deadlines or more in
    // one call, so one budget shared by the call would trap.
    for _ in 0..6 {
        tell_from(&probe, "/user/clock", &Clock::Burn(rounds));
    }
    for _ in 0..6 {
        let reading: ClockReading = next_as(&mut probe).await;
        assert!(!reading.restarted, "{reading:?}");
    }
    assert!(decisions.try_recv().is_err(), "no failure was reported");
    assert!(
        stats_of(&system, &clock).pulled >= pulled + 4,
        "the burst was pulled"
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_on_a_pulled_message_fails_that_message_and_the_rest_are_served() {
    let system = system_with(&["crasher"]);
    let mut decisions = system.subscribe_supervision();
    system.spawn("c", "crasher", b"").unwrap();
    let mut probe = system.probe("p").unwrap();
    let mut burst = vec![Crash::Bump; 5];
    burst.push(Crash::Panic);
    burst.extend(std::iter::repeat_n(Crash::Bump, 5));
    for msg in &burst {
        tell_from(&probe, "/user/c", msg);
    }
    // The count lives in the instance: the restarted one counts again from 1.
    for expected in [1, 2, 3, 4, 5, 1, 2, 3, 4, 5] {
        assert_eq!(next_as::<Crash>(&mut probe).await, Crash::Echo(expected));
    }
    let decision = next_decision(&mut decisions).await;
    assert_eq!(decision.kind, FailureKind::Trap, "{}", decision.error);
    assert!(decisions.try_recv().is_err(), "one failure");
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_pulled_message_is_the_dead_letter_not_its_neighbour() {
    let system = system_with(&["stage"]);
    let mut letters = system.subscribe_dead_letters();
    system.spawn("s", "stage", br#"{"add": 1}"#).unwrap();
    let mut sink = system.probe("sink").unwrap();
    for n in 0..50u32 {
        let good = format!(r#"{{"value": {n}}}"#).into_bytes();
        let bad = format!("not json {n}").into_bytes();
        sink.tell("/user/s", &format!("good{n}"), good).unwrap();
        sink.tell("/user/s", &format!("bad{n}"), bad).unwrap();
    }
    for n in 0..50u32 {
        let letter = tokio::time::timeout(DEADLINE, letters.recv())
            .await
            .expect("a dead letter per malformed body")
            .unwrap();
        assert_eq!(letter.reason, DeadLetterReason::Rejected);
        assert_eq!(letter.envelope.kind, format!("bad{n}"));
        assert_eq!(letter.envelope.body, format!("not json {n}").into_bytes());
    }
    for n in 0..50u32 {
        let reply = mote_tests::next(&mut sink).await;
        assert_eq!(reply.kind, format!("good{n}"));
        let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(body["value"], n + 1);
    }
    system.shutdown().await.unwrap();
}

/// Sends `Fill(4)` to the crasher, which keeps its first call busy for some milliseconds, then
/// `burst`: the burst queues behind it and is pulled.
fn burst_behind_a_fill(probe: &mote_host::Probe, burst: &[Crash]) {
    tell_from(probe, "/user/c", &Crash::Fill(4));
    for msg in burst {
        tell_from(probe, "/user/c", msg);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_in_a_burst_goes_out_with_the_next_pull_and_keeps_its_order() {
    let system = system_with(&["crasher"]);
    let crasher = system.spawn("c", "crasher", b"").unwrap();
    let mut probe = system.probe("p").unwrap();
    // Even n: a reply alone (held, sent with the call that takes the next message). Odd n: a
    // reply, then a plain tell to the same actor, which must send the held reply first.
    let burst: Vec<Crash> = (0..100u32)
        .map(|n| match n % 2 {
            0 => Crash::Echo(n * 10),
            _ => Crash::ReplyThenTell(n * 10),
        })
        .collect();
    burst_behind_a_fill(&probe, &burst);
    for n in 0..100u32 {
        assert_eq!(next_as::<Crash>(&mut probe).await, Crash::Echo(n * 10));
        if n % 2 == 1 {
            assert_eq!(next_as::<Crash>(&mut probe).await, Crash::Echo(n * 10 + 1));
        }
    }
    let stats = stats_of(&system, &crasher);
    assert!(stats.pulled >= 50, "the burst was pulled: {stats:?}");
    // The lone replies (50) went with the call that took the next message; a reply followed
    // by a tell went before the tell, as a tell of its own.
    assert!((25..=50).contains(&stats.replied_with_next), "{stats:?}");
    assert_eq!(stats.sent, 150, "{stats:?}");
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_made_before_a_panic_or_an_error_in_a_burst_is_still_sent() {
    let system = system_with(&["crasher"]);
    let mut decisions = system.subscribe_supervision();
    system.spawn("c", "crasher", b"").unwrap();
    let mut probe = system.probe("p").unwrap();
    let burst = [
        Crash::Echo(1),
        Crash::Echo(2),
        Crash::ReplyThenPanic(3),
        Crash::Echo(4),
        Crash::Echo(5),
        Crash::Echo(6),
        Crash::Echo(7),
        Crash::ReplyThenFail(8),
        Crash::Echo(9),
    ];
    burst_behind_a_fill(&probe, &burst);
    for n in 1..=9 {
        assert_eq!(next_as::<Crash>(&mut probe).await, Crash::Echo(n));
    }
    let trap = next_decision(&mut decisions).await;
    assert_eq!(trap.kind, FailureKind::Trap, "{}", trap.error);
    let error = next_decision(&mut decisions).await;
    assert_eq!(error.kind, FailureKind::Error, "{}", error.error);
    assert!(error.error.contains("after its reply"), "{}", error.error);
    system.shutdown().await.unwrap();
}
