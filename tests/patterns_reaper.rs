//! The `reaper` pattern component (scatter-gather, Dust's ReaperActor and
//! ReapTransformServiceActor), driven through its JSON protocol.

use std::time::{Duration, Instant};

use mote_example_protocol::{Counter, Crash, GetValue, WorkerValue};
use mote_guest::patterns::reaper::{self, Gather, Gathered, Reduce, Reduced, Refused};
use mote_guest::patterns::{init, service_manager};
use mote_host::{ActorSystem, DeadLetterReason};
use mote_tests::*;
use serde_json::json;

/// A reaper at `/user/r` with this configuration.
fn reaper(system: &ActorSystem, config: &reaper::Config) {
    system.spawn("r", "reaper", &init(config)).unwrap();
}

/// Counters `/user/c0`.. holding 0, 10, 20...
fn counters(system: &ActorSystem, n: u64) -> Vec<String> {
    (0..n)
        .map(|i| {
            let init = (i * 10).to_string();
            system
                .spawn(&format!("c{i}"), "counter", init.as_bytes())
                .unwrap();
            format!("/user/c{i}")
        })
        .collect()
}

/// A closed gate at `/user/g`: it keeps every request and never answers.
fn silent_gate(system: &ActorSystem) -> String {
    system.spawn("g", "gate", b"/system/nobody").unwrap();
    "/user/g".to_string()
}

async fn status(system: &ActorSystem) -> reaper::Status {
    ask_as(system, "/user/r", &reaper::GetStatus::default()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gather_from_counters_returns_every_reply_with_the_target_it_came_from() {
    let system = system_with_patterns(&["reaper"], &["counter"]);
    reaper(&system, &reaper::Config::default());
    let targets = counters(&system, 5);
    let gather = Gather::new(&targets, &Counter::Get, 20_000).unwrap();
    let gathered: Gathered = ask_as(&system, "/user/r", &gather).await;
    assert!(gathered.complete, "{gathered:?}");
    assert!(gathered.timed_out.is_empty() && gathered.failed.is_empty());
    assert_eq!(gathered.replies.len(), 5);
    for reply in &gathered.replies {
        let i: u64 = reply.from.strip_prefix("/user/c").unwrap().parse().unwrap();
        // Postcard bodies travel as base64 and decode back to the typed reply.
        assert!(reply.payload.base64.is_some());
        assert_eq!(reply.decode::<Counter>().unwrap(), Counter::Value(i * 10));
    }
    let status = status(&system).await;
    assert_eq!(
        (status.gathering, status.asks_pending, status.gathered),
        (0, 0, 1)
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_never_answers_times_out_and_the_answer_waits_for_the_deadline() {
    let system = system_with_patterns(&["reaper"], &["counter", "gate"]);
    reaper(&system, &reaper::Config::default());
    let mut targets = counters(&system, 2);
    targets.push(silent_gate(&system));
    let deadline = Duration::from_millis(400);
    let gather = Gather::new(&targets, &Counter::Get, 400).unwrap();
    let began = Instant::now();
    let gathered: Gathered = ask_as(&system, "/user/r", &gather).await;
    let took = began.elapsed();
    assert!(
        took >= deadline,
        "answered after {took:?}, before the deadline"
    );
    assert_eq!(gathered.timed_out, ["/user/g"]);
    assert_eq!(gathered.replies.len(), 2);
    assert!(!gathered.complete);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_traps_or_does_not_exist_times_out_and_one_that_cannot_be_asked_fails_at_once()
 {
    let system = system_with_patterns(&["reaper"], &["crasher"]);
    reaper(&system, &reaper::Config::default());
    system.spawn("ok", "crasher", b"").unwrap();
    system.spawn("bad", "crasher", b"").unwrap();
    // A live crasher answers; nobody lives at /user/nobody; `nobody` (relative to the
    // reaper) cannot even be resolved.
    let targets = ["/user/ok", "/user/nobody", "nobody"];
    let gather = Gather::new(targets, &Crash::Echo(7), 300).unwrap();
    let gathered: Gathered = ask_as(&system, "/user/r", &gather).await;
    assert_eq!(gathered.replies.len(), 1);
    assert_eq!(gathered.replies[0].from, "/user/ok");
    assert_eq!(
        gathered.replies[0].decode::<Crash>().unwrap(),
        Crash::Echo(7)
    );
    assert_eq!(gathered.timed_out, ["/user/nobody"]);
    assert_eq!(gathered.failed.len(), 1);
    assert_eq!(gathered.failed[0].target, "nobody");
    // A target that traps on the request times out; the reaper is not hurt by it.
    let gather = Gather::new(["/user/bad", "/user/ok"], &Crash::Panic, 300).unwrap();
    let gathered: Gathered = ask_as(&system, "/user/r", &gather).await;
    assert!(gathered.replies.is_empty());
    assert_eq!(gathered.timed_out, ["/user/bad", "/user/ok"]);
    let status = status(&system).await;
    assert_eq!((status.gathering, status.gathered), (0, 2));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gather_that_wants_n_replies_answers_as_soon_as_n_came() {
    let system = system_with_patterns(&["reaper"], &["counter", "gate"]);
    reaper(&system, &reaper::Config::default());
    let mut targets = vec![silent_gate(&system)];
    targets.extend(counters(&system, 3));
    // A deadline far past the test's patience: only `want` can end this gather in time.
    let gather = Gather::new(&targets, &Counter::Get, 200_000)
        .unwrap()
        .want(2);
    let gathered: Gathered = ask_as(&system, "/user/r", &gather).await;
    assert!(gathered.complete);
    assert_eq!(gathered.replies.len(), 2);
    assert!(gathered.timed_out.is_empty());
    let status = status(&system).await;
    assert_eq!(status.gathering, 0);
    assert!(
        status.asks_pending >= 1,
        "the gate's ask runs on: {status:?}"
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gathers_past_a_bound_are_refused_with_a_reply_naming_the_bound() {
    let system = system_with_patterns(&["reaper"], &["gate"]);
    let mut letters = system.subscribe_dead_letters();
    let config = reaper::Config {
        max_gathers: 2,
        max_targets: 3,
        max_asks: 4,
        ..reaper::Config::default()
    };
    reaper(&system, &config);
    let g = silent_gate(&system);
    let asker = system.probe("asker").unwrap();
    let gather = |n: usize| Gather::new(vec![g.as_str(); n], &Counter::Get, 200_000).unwrap();
    // Three asks in progress.
    tell_from(&asker, "/user/r", &gather(3));
    let refused: Refused = ask_as(&system, "/user/r", &gather(2)).await;
    assert_eq!((refused.bound.as_str(), refused.limit), ("max_asks", 4));
    let refused: Refused = ask_as(&system, "/user/r", &gather(4)).await;
    assert_eq!((refused.bound.as_str(), refused.limit), ("max_targets", 3));
    // Four asks, two gathers in progress.
    tell_from(&asker, "/user/r", &gather(1));
    let refused: Refused = ask_as(&system, "/user/r", &gather(0)).await;
    assert_eq!((refused.bound.as_str(), refused.limit), ("max_gathers", 2));
    let status = status(&system).await;
    assert_eq!(
        (status.gathering, status.asks_pending, status.refused),
        (2, 4, 3)
    );
    // A gather without a sender to answer is malformed: a dead letter.
    tell(&system, "/user/r", &gather(1));
    let letter = tokio::time::timeout(DEADLINE, letters.recv())
        .await
        .expect("a dead letter in time")
        .expect("the dead-letter stream");
    assert_eq!(letter.reason, DeadLetterReason::Rejected);
    assert_eq!(letter.envelope.kind, "reaper.gather");
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reducing_gather_sums_a_field_of_the_replies_and_names_who_timed_out() {
    let system = system_with_patterns(&["reaper"], &["echo_worker", "gate"]);
    reaper(&system, &reaper::Config::default());
    let mut targets: Vec<String> = (1..=4)
        .map(|i| {
            system
                .spawn(&format!("e{i}"), "echo_worker", i.to_string().as_bytes())
                .unwrap();
            format!("/user/e{i}")
        })
        .collect();
    targets.push(silent_gate(&system));
    let gather = Gather::new(&targets, &GetValue::default(), 300)
        .unwrap()
        .reduce(Reduce::sum("value"));
    let reduced: Reduced = ask_as(&system, "/user/r", &gather).await;
    assert_eq!(reduced.value, json!(10));
    assert_eq!(reduced.from, 4);
    assert_eq!(reduced.timed_out, ["/user/g"]);
    assert!(!reduced.complete);
    // The same in plain JSON, as an actor in any language writes it: the max of the values.
    let body = json!({
        "targets": ["/user/e1", "/user/e3", "/user/e2"],
        "kind": "get-value",
        "body": {},
        "deadline_ms": 20000,
        "reduce": {"op": "max", "field": "/value"},
    });
    let reply = system
        .ask(
            "/user/r",
            "reaper.gather",
            body.to_string().into_bytes(),
            DEADLINE,
        )
        .await
        .unwrap();
    assert_eq!(reply.kind, "reaper.reduced");
    let reduced: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(
        reduced,
        json!({"value": 3, "from": 3, "timed_out": [], "complete": true})
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reaper_configured_with_a_reduction_transforms_every_gather() {
    let system = system_with_patterns(&["reaper", "service-manager"], &["echo_worker"]);
    // Dust's ReapTransformServiceActor: every gather is collected into one array.
    let config = reaper::Config {
        reduce: Some(Reduce::Collect { field: "n".into() }),
        ..reaper::Config::default()
    };
    reaper(&system, &config);
    // The targets: one service manager asked three times (three one-shot workers).
    let manager = service_manager::Config::new("echo_worker");
    system
        .spawn("sm", "service-manager", &init(&manager))
        .unwrap();
    let square = mote_example_protocol::Square { n: 4 };
    let gather = Gather::new(["/user/sm"; 3], &square, 20_000).unwrap();
    let reduced: Reduced = ask_as(&system, "/user/r", &gather).await;
    assert_eq!(reduced.value, json!([16, 16, 16]));
    assert!(reduced.complete);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gather_with_no_targets_is_answered_at_once_and_complete() {
    let system = system_with_patterns(&["reaper"], &[]);
    reaper(&system, &reaper::Config::default());
    let none: [&str; 0] = [];
    let gather = Gather::new(none, &GetValue::default(), 200_000).unwrap();
    let gathered: Gathered = ask_as(&system, "/user/r", &gather).await;
    assert_eq!(
        gathered,
        Gathered {
            complete: true,
            ..Gathered::default()
        }
    );
    let reduced: Reduced = ask_as(&system, "/user/r", &gather.reduce(Reduce::sum("value"))).await;
    assert_eq!((reduced.value, reduced.from), (json!(0), 0));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_gather_is_a_dead_letter_and_a_bad_configuration_fails_the_start() {
    let system = system_with_patterns(&["reaper"], &["echo_worker"]);
    let mut letters = system.subscribe_dead_letters();
    let mut events = system.subscribe_supervision();
    reaper(&system, &reaper::Config::default());
    system.spawn("e", "echo_worker", b"5").unwrap();
    for bad in [
        json!({"targets": ["/user/e"], "kind": "get-value", "body": {}, "base64": ""}),
        json!({"targets": ["/user/e"], "kind": "get-value", "deadline_ms": 0}),
        json!({"targets": ["/user/e"], "kind": "get-value", "want": 0}),
        json!({"targets": "/user/e", "kind": "get-value"}),
    ] {
        let probe_reply = system.ask(
            "/user/r",
            "reaper.gather",
            bad.to_string().into_bytes(),
            Duration::from_millis(1),
        );
        // Nothing comes back: the gather is a dead letter.
        let _ = probe_reply.await;
        let letter = tokio::time::timeout(DEADLINE, letters.recv())
            .await
            .expect("a dead letter in time")
            .expect("the dead-letter stream");
        assert_eq!(letter.reason, DeadLetterReason::Rejected, "{bad}");
    }
    // The reaper goes on.
    let gather = Gather::new(["/user/e"], &GetValue::default(), 20_000).unwrap();
    let gathered: Gathered = ask_as(&system, "/user/r", &gather).await;
    let value: WorkerValue = gathered.replies[0].decode().unwrap();
    assert_eq!(value.value, 5);
    system
        .spawn("bad", "reaper", br#"{"max_gathers": "many"}"#)
        .unwrap();
    let event = next_decision(&mut events).await;
    assert!(
        format!("{event:?}").contains("reaper: bad configuration"),
        "{event:?}"
    );
    system.shutdown().await.unwrap();
}
