//! The `circuit-breaker` pattern component, driven through its JSON protocol as a user would:
//! deployed from the bytes `mote` embeds, spawned with a JSON `init`. Most tests put a probe
//! behind the breaker, so the test decides when (and whether, and how) the target answers.

use std::time::{Duration, Instant};

use mote_example_protocol::{Counter, Crash};
use mote_guest::patterns::circuit_breaker::{self as cb, State};
use mote_guest::patterns::init;
use mote_host::{ActorSystem, DeadLetterReason, Envelope, Probe};
use mote_tests::*;

/// The breaker's status (its reply also proves it handled everything sent before).
async fn status(system: &ActorSystem) -> cb::Status {
    ask_as(system, "/user/cb", &cb::GetState::default()).await
}

/// Waits until the breaker reports `state`.
async fn state_becomes(system: &ActorSystem, state: State) -> cb::Status {
    wait_until_async(DEADLINE, || async {
        let now = status(system).await;
        (now.state == state).then_some(now)
    })
    .await
}

/// The target probe answers the request it received (it came from the breaker's ask).
fn answer(target: &Probe, request: &Envelope, kind: &str, body: &[u8]) {
    let asker = request.sender.as_ref().expect("an ask has a sender");
    target
        .tell(&asker.path.to_string(), kind, body.to_vec())
        .expect("answer the ask");
}

/// A breaker at `/user/cb` in front of the probe `/system/target`.
fn breaker(system: &ActorSystem, config: cb::Config) -> mote_host::Address {
    system
        .spawn("cb", "circuit-breaker", &init(&config))
        .unwrap()
}

/// The default configuration with these thresholds, in front of `/system/target`.
fn config(max_failures: u32, call_timeout_ms: u64, reset_timeout_ms: u64) -> cb::Config {
    cb::Config {
        max_failures,
        call_timeout_ms,
        reset_timeout_ms,
        ..cb::Config::new("/system/target")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_breaker_passes_requests_on_and_relays_the_replies_to_their_senders() {
    let system = system_with_patterns(&["circuit-breaker"], &["counter"]);
    let mut source = system.probe("source").unwrap();
    system.spawn("c", "counter", b"7").unwrap();
    let cb = breaker(&system, cb::Config::new("/user/c"));
    // An ask through the breaker, and a tell from an actor that waits for the reply.
    let value: Counter = ask_as(&system, "/user/cb", &Counter::Get).await;
    assert_eq!(value, Counter::Value(7));
    tell_from(&source, "/user/cb", &Counter::Get);
    let reply = next(&mut source).await;
    assert_eq!(reply.sender.as_ref(), Some(&cb), "relayed by the breaker");
    let value: Counter = mote_guest::decode(&reply.kind, &reply.body).unwrap();
    assert_eq!(value, Counter::Value(7));
    let now = status(&system).await;
    assert_eq!(
        (
            now.state,
            now.failures,
            now.pending,
            now.passed,
            now.refused
        ),
        (State::Closed, 0, 0, 2, 0)
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_open_the_breaker_and_then_requests_are_refused_at_once() {
    let system = system_with_patterns(&["circuit-breaker"], &[]);
    let mut letters = system.subscribe_dead_letters();
    let mut source = system.probe("source").unwrap();
    // A target that never answers.
    let mut target = system.probe("target").unwrap();
    let cb = breaker(&system, config(3, 50, 60_000));
    for n in 0..3 {
        tell_from(&source, "/user/cb", &Counter::Add(n));
        let request = next(&mut target).await;
        assert_eq!(request.kind, "Counter");
        let failed: cb::Failed = next_as(&mut source).await;
        assert!(failed.reason.contains("within 50 ms"), "{failed:?}");
    }
    let now = status(&system).await;
    assert_eq!((now.state, now.opened, now.passed), (State::Open, 1, 3));
    assert!(now.retry_in_ms > 0 && now.retry_in_ms <= 60_000);
    // Refused without asking the target.
    tell_from(&source, "/user/cb", &Counter::Get);
    let open: cb::Open = next_as(&mut source).await;
    assert!(
        open.retry_in_ms > 0 && open.retry_in_ms <= 60_000,
        "{open:?}"
    );
    // Without a sender to tell, a refusal is a dead letter.
    tell(&system, "/user/cb", &Counter::Get);
    let letter = tokio::time::timeout(DEADLINE, letters.recv())
        .await
        .expect("a dead letter in time")
        .expect("the dead-letter stream");
    assert_eq!(letter.reason, DeadLetterReason::Rejected);
    assert_eq!(letter.target, cb.to_string());
    let now = status(&system).await;
    assert_eq!((now.state, now.passed, now.refused), (State::Open, 3, 2));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_reset_timeout_one_trial_passes_and_its_success_closes_the_breaker() {
    let system = system_with_patterns(&["circuit-breaker"], &[]);
    let mut source = system.probe("source").unwrap();
    let mut target = system.probe("target").unwrap();
    breaker(&system, config(1, 50, 300));
    let began = Instant::now();
    tell_from(&source, "/user/cb", &Counter::Add(1));
    next(&mut target).await;
    let _: cb::Failed = next_as(&mut source).await;
    let half_open = state_becomes(&system, State::HalfOpen).await;
    assert!(
        began.elapsed() >= Duration::from_millis(300),
        "half-open after {:?}",
        began.elapsed()
    );
    assert_eq!(half_open.opened, 1);
    // The trial passes; while it is under way, others are refused.
    tell_from(&source, "/user/cb", &Counter::Get);
    let trial = next(&mut target).await;
    tell_from(&source, "/user/cb", &Counter::Add(2));
    assert_eq!(
        next_as::<cb::Open>(&mut source).await,
        cb::Open { retry_in_ms: 0 }
    );
    answer(
        &target,
        &trial,
        "Counter",
        &mote_guest::encode(&Counter::Value(5)).unwrap(),
    );
    assert_eq!(next_as::<Counter>(&mut source).await, Counter::Value(5));
    let closed = status(&system).await;
    assert_eq!((closed.state, closed.failures), (State::Closed, 0));
    // Closed again: requests pass.
    tell_from(&source, "/user/cb", &Counter::Get);
    let request = next(&mut target).await;
    answer(
        &target,
        &request,
        "Counter",
        &mote_guest::encode(&Counter::Value(6)).unwrap(),
    );
    assert_eq!(next_as::<Counter>(&mut source).await, Counter::Value(6));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_trial_opens_the_breaker_again_for_a_longer_reset_timeout() {
    let system = system_with_patterns(&["circuit-breaker"], &[]);
    let mut source = system.probe("source").unwrap();
    let mut target = system.probe("target").unwrap();
    // Failures are replies of kind `error` (relayed all the same); no call times out.
    let config = cb::Config {
        failure_kinds: vec!["error".into()],
        max_reset_timeout_ms: Some(800),
        ..config(2, 60_000, 200)
    };
    breaker(&system, config);
    for _ in 0..2 {
        tell_from(&source, "/user/cb", &Counter::Get);
        let request = next(&mut target).await;
        answer(&target, &request, "error", br#"{"why": "down"}"#);
        let relayed = next(&mut source).await;
        assert_eq!(relayed.kind, "error");
        assert_eq!(relayed.body, br#"{"why": "down"}"#);
    }
    let open = status(&system).await;
    assert_eq!((open.state, open.reset_timeout_ms), (State::Open, 200));
    // A failed trial: open again, for twice as long.
    state_becomes(&system, State::HalfOpen).await;
    tell_from(&source, "/user/cb", &Counter::Get);
    let trial = next(&mut target).await;
    answer(&target, &trial, "error", b"{}");
    assert_eq!(next(&mut source).await.kind, "error");
    let reopened = status(&system).await;
    assert_eq!(
        (reopened.state, reopened.reset_timeout_ms, reopened.opened),
        (State::Open, 400, 2)
    );
    // A successful trial closes it, and the reset timeout is back to its start.
    state_becomes(&system, State::HalfOpen).await;
    tell_from(&source, "/user/cb", &Counter::Get);
    let trial = next(&mut target).await;
    answer(
        &target,
        &trial,
        "Counter",
        &mote_guest::encode(&Counter::Value(1)).unwrap(),
    );
    assert_eq!(next_as::<Counter>(&mut source).await, Counter::Value(1));
    let closed = status(&system).await;
    assert_eq!(
        (closed.state, closed.reset_timeout_ms, closed.opened),
        (State::Closed, 200, 2)
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_traps_counts_as_a_failure_through_the_call_timeout() {
    let system = system_with_patterns(&["circuit-breaker"], &["crasher"]);
    system.spawn("x", "crasher", b"").unwrap();
    breaker(
        &system,
        cb::Config {
            target: "/user/x".into(),
            ..config(2, 1000, 60_000)
        },
    );
    assert_eq!(
        ask_as::<_, Crash>(&system, "/user/cb", &Crash::Echo(1)).await,
        Crash::Echo(1)
    );
    // Each panic traps the target, which is restarted; the ask gets no reply.
    for _ in 0..2 {
        let failed: cb::Failed = ask_as(&system, "/user/cb", &Crash::Panic).await;
        assert!(failed.reason.contains("/user/x"), "{failed:?}");
    }
    let open: cb::Open = ask_as(&system, "/user/cb", &Crash::Echo(2)).await;
    assert!(open.retry_in_ms > 0);
    // The target itself is back.
    assert_eq!(
        ask_as::<_, Crash>(&system, "/user/x", &Crash::Echo(3)).await,
        Crash::Echo(3)
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_pending_requests_a_breaker_answers_busy() {
    let system = system_with_patterns(&["circuit-breaker"], &[]);
    let mut source = system.probe("source").unwrap();
    let mut target = system.probe("target").unwrap();
    breaker(
        &system,
        cb::Config {
            max_pending: 2,
            ..config(100, 60_000, 60_000)
        },
    );
    tell_from(&source, "/user/cb", &Counter::Add(1));
    tell_from(&source, "/user/cb", &Counter::Add(2));
    tell_from(&source, "/user/cb", &Counter::Add(3));
    assert_eq!(
        next_as::<cb::Busy>(&mut source).await,
        cb::Busy { pending: 2 }
    );
    let first = next(&mut target).await;
    let second = next(&mut target).await;
    answer(&target, &first, "ok", b"1");
    answer(&target, &second, "ok", b"2");
    // Each answer comes back through its own ask, so in either order.
    let mut replies = Vec::new();
    for _ in 0..2 {
        let reply = next(&mut source).await;
        replies.push((reply.kind, reply.body));
    }
    replies.sort();
    assert_eq!(
        replies,
        [
            ("ok".to_string(), b"1".to_vec()),
            ("ok".to_string(), b"2".to_vec())
        ]
    );
    // Room again.
    tell_from(&source, "/user/cb", &Counter::Add(4));
    assert_eq!(
        next(&mut target).await.body,
        mote_guest::encode(&Counter::Add(4)).unwrap()
    );
    let now = status(&system).await;
    assert_eq!((now.state, now.pending, now.refused), (State::Closed, 1, 1));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_circuit_breaker_with_a_bad_configuration_fails_to_start_with_the_reason() {
    let system = system_with_patterns(&["circuit-breaker"], &[]);
    let mut events = system.subscribe_supervision();
    let cases: [(&[u8], &str); 3] = [
        (br#"{"max_failures": 2}"#, "missing field `target`"),
        (
            br#"{"target": "/user/x", "max_failures": 0}"#,
            "circuit-breaker: bad configuration: max_failures must be at least 1",
        ),
        (
            br#"{"target": "/user/x", "reset_timeout_ms": 500, "max_reset_timeout_ms": 100}"#,
            "max_reset_timeout_ms must be at least reset_timeout_ms",
        ),
    ];
    for (n, (config, reason)) in cases.iter().enumerate() {
        system
            .spawn(&format!("cb{n}"), "circuit-breaker", config)
            .unwrap();
        // An earlier case's actor, restarted by the guardian, may fail again meanwhile.
        let event = decision_for(&mut events, &format!("/user/cb{n}")).await;
        assert!(format!("{event:?}").contains(reason), "{reason}: {event:?}");
    }
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgraded_breaker_keeps_its_state_and_still_relays_the_answer_to_an_earlier_ask() {
    let system = system_with_patterns(&["circuit-breaker"], &[]);
    let mut source = system.probe("source").unwrap();
    let mut target = system.probe("target").unwrap();
    let config = cb::Config {
        failure_kinds: vec!["error".into()],
        ..config(3, 60_000, 60_000)
    };
    breaker(&system, config);
    tell_from(&source, "/user/cb", &Counter::Get);
    let first = next(&mut target).await;
    answer(&target, &first, "error", b"{}");
    assert_eq!(next(&mut source).await.kind, "error");
    tell_from(&source, "/user/cb", &Counter::Get);
    let pending = next(&mut target).await;
    let bytes = mote_patterns::component("circuit-breaker").unwrap();
    system
        .deploy_version("circuit-breaker", "2", bytes)
        .unwrap();
    let report = system.upgrade("/user/cb", "2").await.unwrap();
    assert!(report.upgraded[0].migrated, "{report:?}");
    let now = status(&system).await;
    assert_eq!((now.failures, now.pending, now.passed), (1, 1, 2));
    // The answer to the ask made before the upgrade is relayed, not taken for a request.
    answer(
        &target,
        &pending,
        "Counter",
        &mote_guest::encode(&Counter::Value(3)).unwrap(),
    );
    assert_eq!(next_as::<Counter>(&mut source).await, Counter::Value(3));
    let now = status(&system).await;
    assert_eq!((now.failures, now.pending, now.passed), (0, 0, 2));
    system.shutdown().await.unwrap();
}
