//! The pattern components `mote` ships (`mote-patterns`), each driven through its JSON
//! protocol as a user would: deployed from the embedded bytes, spawned with a JSON `init`.

use std::time::{Duration, Instant};

use mote_example_protocol::Counter;
use mote_guest::patterns::{init, throttle};
use mote_host::{ActorSystem, DeadLetterReason};
use mote_tests::*;

/// A typed JSON control message from outside.
fn control<M: mote_guest::Message>(system: &ActorSystem, to: &str, msg: &M) {
    tell(system, to, msg);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_passes_messages_on_in_order_with_their_sender_no_faster_than_its_rate() {
    let system = system_with_patterns(&["throttle"], &[]);
    let mut sink = system.probe("sink").unwrap();
    let source = system.probe("source").unwrap();
    // 20 a second, one at a time: ten messages take at least 9/20 s.
    let config = throttle::Config {
        burst: Some(1),
        ..throttle::Config::per_second("/system/sink", 20)
    };
    system.spawn("t", "throttle", &init(&config)).unwrap();
    let began = Instant::now();
    for n in 0..10u64 {
        tell_from(&source, "/user/t", &Counter::Add(n));
    }
    for n in 0..10u64 {
        let envelope = next(&mut sink).await;
        assert_eq!(
            envelope.sender.as_ref(),
            Some(source.address()),
            "the original sender"
        );
        let got: Counter = mote_guest::decode(&envelope.kind, &envelope.body).unwrap();
        assert_eq!(got, Counter::Add(n), "in arrival order");
    }
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(450),
        "ten messages at 20/s with a burst of 1 passed in {took:?}"
    );
    let status: throttle::Status =
        ask_as(&system, "/user/t", &throttle::GetStatus::default()).await;
    assert_eq!(
        (status.forwarded, status.queued, status.refused),
        (10, 0, 0)
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_through_a_throttle_is_answered_by_the_target_straight_to_the_asker() {
    let system = system_with_patterns(&["throttle"], &["counter"]);
    system.spawn("c", "counter", b"").unwrap();
    let config = throttle::Config {
        burst: Some(1),
        ..throttle::Config::per_second("/user/c", 50)
    };
    system.spawn("t", "throttle", &init(&config)).unwrap();
    for _ in 0..5 {
        tell(&system, "/user/t", &Counter::Add(2));
    }
    // Queued behind the adds (taken from the stash on a tick), and still answered to the ask.
    let value: Counter = ask_as(&system, "/user/t", &Counter::Get).await;
    assert_eq!(value, Counter::Value(10));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_throttle_queue_turns_the_surplus_into_dead_letters_and_a_new_rate_drains_it() {
    let system = system_with_patterns(&["throttle"], &[]);
    let mut letters = system.subscribe_dead_letters();
    let mut sink = system.probe("sink").unwrap();
    // One a minute: the first goes at once, five wait, three are refused.
    let config = throttle::Config {
        target: "/system/sink".into(),
        rate: 1,
        per_ms: 60_000,
        burst: Some(1),
        queue: 5,
    };
    let t = system.spawn("t", "throttle", &init(&config)).unwrap();
    for n in 0..9u64 {
        tell(&system, "/user/t", &Counter::Add(n));
    }
    assert_eq!(next_as::<Counter>(&mut sink).await, Counter::Add(0));
    for n in 6..9u64 {
        let letter = tokio::time::timeout(DEADLINE, letters.recv())
            .await
            .expect("a dead letter in time")
            .expect("the dead-letter stream");
        assert_eq!(letter.reason, DeadLetterReason::Rejected);
        assert_eq!(letter.target, t.to_string());
        let refused: Counter =
            mote_guest::decode(&letter.envelope.kind, &letter.envelope.body).unwrap();
        assert_eq!(refused, Counter::Add(n), "the newest are refused");
    }
    let status: throttle::Status =
        ask_as(&system, "/user/t", &throttle::GetStatus::default()).await;
    assert_eq!((status.forwarded, status.queued, status.refused), (1, 5, 3));
    // Faster now: the five that wait go, in order.
    control(
        &system,
        "/user/t",
        &throttle::SetRate {
            rate: 100,
            per_ms: 1000,
        },
    );
    for n in 1..6u64 {
        assert_eq!(next_as::<Counter>(&mut sink).await, Counter::Add(n));
    }
    // A bad rate is the sender's error: a dead letter, and the throttle goes on.
    control(
        &system,
        "/user/t",
        &throttle::SetRate { rate: 0, per_ms: 1 },
    );
    let letter = tokio::time::timeout(DEADLINE, letters.recv())
        .await
        .expect("a dead letter in time")
        .expect("the dead-letter stream");
    assert_eq!(letter.reason, DeadLetterReason::Rejected);
    tell(&system, "/user/t", &Counter::Add(99));
    assert_eq!(next_as::<Counter>(&mut sink).await, Counter::Add(99));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_with_a_bad_configuration_fails_to_start_with_the_reason() {
    let system = system_with_patterns(&["throttle"], &[]);
    let mut events = system.subscribe_supervision();
    system.spawn("t", "throttle", b"{\"rate\": 5}").unwrap();
    let event = next_decision(&mut events).await;
    assert!(
        format!("{event:?}").contains("missing field `target`"),
        "{event:?}"
    );
    system.shutdown().await.unwrap();
}
