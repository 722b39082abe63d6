//! The `service-manager` pattern component (Dust's ServiceManagerActor and its one-shot
//! service workers), driven through its JSON protocol.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mote_example_protocol::{Crash, Square, Squared};
use mote_guest::patterns::init;
use mote_guest::patterns::service_manager::{self, Config, Failed, Status, WorkerStrategy};
use mote_host::{ActorSystem, DeadLetterReason, Envelope};
use mote_tests::*;

/// A service manager at `/user/sm` with this configuration.
fn manager(system: &ActorSystem, config: &Config) -> mote_host::Address {
    system
        .spawn("sm", "service-manager", &init(config))
        .unwrap()
}

async fn get_status(system: &ActorSystem) -> Status {
    ask_as(system, "/user/sm", &service_manager::GetStatus::default()).await
}

/// The live workers of the manager at `/user/sm`, by the host's own count.
fn workers_alive(system: &ActorSystem) -> usize {
    system
        .tree()
        .iter()
        .filter(|a| a.address.path.as_str().starts_with("/user/sm/"))
        .count()
}

/// `envelope` decoded as the manager's `failed` reply.
fn failed(envelope: &Envelope) -> Failed {
    mote_guest::decode(&envelope.kind, &envelope.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_answered_by_the_manager_itself_with_at_most_max_workers_alive() {
    let system = system_with_patterns(&["service-manager"], &["echo_worker"]);
    let config = Config {
        max_workers: 3,
        ..Config::new("echo_worker")
    };
    let sm = manager(&system, &config);
    let mut client = system.probe("client").unwrap();
    for n in 0..30 {
        tell_from(&client, "/user/sm", &Square { n });
    }
    let mut squares = BTreeSet::new();
    for _ in 0..30 {
        let reply = next(&mut client).await;
        assert_eq!(
            reply.sender.as_ref(),
            Some(&sm),
            "the manager replies as itself"
        );
        let squared: Squared = mote_guest::decode(&reply.kind, &reply.body).unwrap();
        squares.insert(squared.n);
    }
    assert_eq!(squares, (0..30).map(|n| n * n).collect());
    let status = get_status(&system).await;
    assert_eq!((status.served, status.failed, status.refused), (30, 0, 0));
    assert!(status.peak <= 3, "{} workers alive at once", status.peak);
    // One-shot: every worker is stopped once it has answered.
    wait_until(|| workers_alive(&system) == 0).await;
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_the_workers_wait_in_a_bounded_queue_and_past_it_are_dead_letters() {
    let system = system_with_patterns(&["service-manager"], &["echo_worker"]);
    let mut letters = system.subscribe_dead_letters();
    let config = Config {
        max_workers: 2,
        queue: 3,
        ..Config::new("echo_worker")
    };
    let sm = manager(&system, &config);
    let mut client = system.probe("client").unwrap();
    // Two workers that answer only when released hold both slots.
    client
        .tell("/user/sm", "hold", b"\"first\"".to_vec())
        .unwrap();
    client
        .tell("/user/sm", "hold", b"\"second\"".to_vec())
        .unwrap();
    for n in 1..=4 {
        tell_from(&client, "/user/sm", &Square { n });
    }
    // The fourth square finds the queue full.
    let letter = tokio::time::timeout(DEADLINE, letters.recv())
        .await
        .expect("a dead letter in time")
        .expect("the dead-letter stream");
    assert_eq!(letter.reason, DeadLetterReason::Rejected);
    assert_eq!(letter.target, sm.to_string());
    let refused: Square = mote_guest::decode(&letter.envelope.kind, &letter.envelope.body).unwrap();
    assert_eq!(refused, Square { n: 4 });
    let status = get_status(&system).await;
    assert_eq!(
        (status.running, status.queued, status.refused),
        (2, 3, 1),
        "{status:?}"
    );
    assert_eq!(workers_alive(&system), 2);
    // Releasing the first worker answers its requester and opens its slot to the queue.
    system.tell("/user/sm/w1", "release", Vec::new()).unwrap();
    let released = next(&mut client).await;
    assert_eq!(
        (released.kind.as_str(), released.body.as_slice()),
        ("released", &b"\"first\""[..])
    );
    assert_eq!(released.sender.as_ref(), Some(&sm));
    // Squares 1..3 are served in turn by the one free slot.
    let mut squares = BTreeSet::new();
    for _ in 0..3 {
        squares.insert(next_as::<Squared>(&mut client).await.n);
    }
    assert_eq!(squares, BTreeSet::from([1, 4, 9]));
    assert!(workers_alive(&system) <= 2);
    system.tell("/user/sm/w2", "release", Vec::new()).unwrap();
    assert_eq!(next(&mut client).await.body, b"\"second\"");
    let status = get_status(&system).await;
    assert_eq!((status.served, status.queued, status.peak), (5, 0, 2));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_traps_or_fails_costs_its_requester_a_failed_reply_and_the_others_are_served()
{
    let system = system_with_patterns(&["service-manager"], &["crasher"]);
    // The crasher speaks postcard: the manager hands requests and replies on untouched.
    manager(&system, &Config::new("crasher"));
    let mut client = system.probe("client").unwrap();
    tell_from(&client, "/user/sm", &Crash::Echo(1));
    tell_from(&client, "/user/sm", &Crash::Panic);
    tell_from(&client, "/user/sm", &Crash::Echo(2));
    tell_from(&client, "/user/sm", &Crash::Fail("no thanks".into()));
    let mut echoes = BTreeSet::new();
    let mut failures = BTreeSet::new();
    for _ in 0..4 {
        let reply = next(&mut client).await;
        if reply.kind == "service-manager.failed" {
            let failed = failed(&reply);
            if failed.failure == "error" {
                assert!(failed.reason.contains("no thanks"), "{failed:?}");
            }
            failures.insert(failed.failure);
        } else {
            let echo: Crash = mote_guest::decode(&reply.kind, &reply.body).unwrap();
            echoes.insert(format!("{echo:?}"));
        }
    }
    assert_eq!(
        echoes,
        BTreeSet::from(["Echo(1)".to_string(), "Echo(2)".to_string()])
    );
    assert_eq!(
        failures,
        BTreeSet::from(["error".to_string(), "trap".to_string()])
    );
    let status = get_status(&system).await;
    assert_eq!((status.served, status.failed), (2, 2));
    wait_until(|| workers_alive(&system) == 0).await;
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_does_not_reply_in_time_fails_with_timeout_and_frees_its_slot() {
    let system = system_with_patterns(&["service-manager"], &["echo_worker"]);
    let config = Config {
        max_workers: 1,
        worker_timeout_ms: 300,
        ..Config::new("echo_worker")
    };
    manager(&system, &config);
    let mut client = system.probe("client").unwrap();
    let began = Instant::now();
    // A request the worker never answers, then one waiting behind it for the only slot.
    client.tell("/user/sm", "ignore", b"{}".to_vec()).unwrap();
    tell_from(&client, "/user/sm", &Square { n: 5 });
    let reply = next(&mut client).await;
    let took = began.elapsed();
    let failed = failed(&reply);
    assert_eq!(failed.failure, "timeout", "{failed:?}");
    assert!(took >= Duration::from_millis(300), "failed after {took:?}");
    assert_eq!(next_as::<Squared>(&mut client).await, Squared { n: 25 });
    let status = get_status(&system).await;
    assert_eq!((status.served, status.failed, status.peak), (1, 1, 1));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarting_strategy_hands_the_request_to_the_restarted_worker_up_to_max_restarts() {
    let system = system_with_patterns(&["service-manager"], &["echo_worker"]);
    let config = Config {
        strategy: WorkerStrategy::Restart,
        max_restarts: 2,
        ..Config::new("echo_worker")
    };
    let sm = manager(&system, &config);
    let mut client = system.probe("client").unwrap();
    // Fails once, then its restarted instance answers.
    client.tell("/user/sm", "flaky", b"[1]".to_vec()).unwrap();
    let reply = next(&mut client).await;
    assert_eq!(
        (reply.kind.as_str(), reply.body.as_slice()),
        ("recovered", &b"[1]"[..])
    );
    assert_eq!(reply.sender.as_ref(), Some(&sm));
    // Fails every time: after two restarts, the request fails.
    client.tell("/user/sm", "trap", Vec::new()).unwrap();
    let failed = failed(&next(&mut client).await);
    assert_eq!(failed.failure, "trap", "{failed:?}");
    let status = get_status(&system).await;
    assert_eq!((status.served, status.failed), (1, 1));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escalating_strategy_answers_the_requester_then_fails_the_manager_whose_queue_survives()
{
    let system = system_with_patterns(&["service-manager"], &["echo_worker"]);
    let mut events = system.subscribe_supervision();
    let config = Config {
        strategy: WorkerStrategy::Escalate,
        max_workers: 1,
        ..Config::new("echo_worker")
    };
    let sm = manager(&system, &config);
    let mut client = system.probe("client").unwrap();
    client.tell("/user/sm", "trap", Vec::new()).unwrap();
    tell_from(&client, "/user/sm", &Square { n: 6 });
    let failed = failed(&next(&mut client).await);
    assert_eq!(failed.failure, "trap");
    // The manager failed too (and was restarted by its supervisor)...
    loop {
        let event = next_decision(&mut events).await;
        if event.child == sm {
            assert_eq!(event.kind, mote_host::FailureKind::Escalated, "{event:?}");
            break;
        }
    }
    // ...and the request waiting in its queue is served by the new instance.
    assert_eq!(next_as::<Squared>(&mut client).await, Squared { n: 36 });
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_configuration_fails_the_start_with_the_reason() {
    let system = system_with_patterns(&["service-manager"], &[]);
    let mut events = system.subscribe_supervision();
    system
        .spawn("sm", "service-manager", br#"{"max_workers": 2}"#)
        .unwrap();
    let event = next_decision(&mut events).await;
    assert!(
        format!("{event:?}").contains("missing field `module`"),
        "{event:?}"
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_a_module_that_is_not_deployed_fails_with_spawn() {
    let system = system_with_patterns(&["service-manager"], &[]);
    manager(&system, &Config::new("no_such_module"));
    let reply = system
        .ask("/user/sm", "square", b"{\"n\": 2}".to_vec(), DEADLINE)
        .await
        .unwrap();
    let failed = failed(&reply);
    assert_eq!(failed.failure, "spawn");
    assert!(failed.reason.contains("no_such_module"), "{failed:?}");
    system.shutdown().await.unwrap();
}
