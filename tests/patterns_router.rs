//! The `router` pattern component, driven through its JSON protocol as a user would: deployed
//! from the bytes `mote` embeds, spawned with a JSON `init`.

use std::collections::{BTreeMap, BTreeSet};

use mote_example_protocol::{Counter, Crash, Lane, Report};
use mote_guest::patterns::init;
use mote_guest::patterns::router::{self, Pool, Strategy};
use mote_host::{ActorSystem, DeadLetterReason, Envelope, Probe};
use mote_tests::*;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Sends an application message of kind `order` with a JSON body, as any language would.
fn order(system: &ActorSystem, to: &str, body: &Value) {
    system
        .tell(to, "order", serde_json::to_vec(body).unwrap())
        .unwrap();
}

/// The JSON body of an `order`.
fn order_body(envelope: &Envelope) -> Value {
    assert_eq!(envelope.kind, "order");
    serde_json::from_slice(&envelope.body).expect("a JSON order")
}

/// The router's routees now (its reply also proves it handled everything sent before).
async fn routees(system: &ActorSystem, router: &str) -> router::Routees {
    ask_as(system, router, &router::GetRoutees::default()).await
}

/// The next dead letter, or a panic after [`DEADLINE`].
async fn dead_letter(
    letters: &mut tokio::sync::broadcast::Receiver<mote_host::DeadLetter>,
) -> mote_host::DeadLetter {
    tokio::time::timeout(DEADLINE, letters.recv())
        .await
        .expect("a dead letter in time")
        .expect("the dead-letter stream")
}

/// Every message the probes receive, tagged with the probe's index, in one stream.
fn merge(probes: Vec<Probe>) -> mpsc::UnboundedReceiver<(usize, Envelope)> {
    let (tx, rx) = mpsc::unbounded_channel();
    for (i, mut probe) in probes.into_iter().enumerate() {
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(envelope) = probe.recv().await {
                if tx.send((i, envelope)).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

/// The next `n` orders from the merged probes: the user of each, and the probe it reached.
async fn orders(
    stream: &mut mpsc::UnboundedReceiver<(usize, Envelope)>,
    n: usize,
) -> Vec<(String, usize)> {
    let mut got = Vec::new();
    for _ in 0..n {
        let (probe, envelope) = tokio::time::timeout(DEADLINE, stream.recv())
            .await
            .expect("an order in time")
            .expect("the probes");
        let user = order_body(&envelope)["user"].as_str().unwrap().to_string();
        got.push((user, probe));
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_robin_pool_spreads_messages_exactly_evenly_over_its_routees() {
    let system = system_with_patterns(&["router"], &["counter"]);
    let config = router::Config::pool(Strategy::RoundRobin, Pool::of("counter", 4, ""));
    system.spawn("r", "router", &init(&config)).unwrap();
    for _ in 0..40 {
        tell(&system, "/user/r", &Counter::Add(1));
    }
    let routees = routees(&system, "/user/r").await;
    assert_eq!(
        routees.routees,
        (0..4)
            .map(|n| format!("/user/r/routee-{n}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(routees.routed, 40);
    // Every add was forwarded before the router answered: each count is final.
    for n in 0..4 {
        let value: Counter = ask_as(&system, &format!("/user/r/routee-{n}"), &Counter::Get).await;
        assert_eq!(value, Counter::Value(10), "routee-{n}");
    }
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_through_a_router_is_answered_by_the_routee_straight_to_the_asker() {
    let system = system_with_patterns(&["router"], &["counter"]);
    system.spawn("a", "counter", b"10").unwrap();
    system.spawn("b", "counter", b"20").unwrap();
    let config = router::Config::group(Strategy::RoundRobin, ["/user/a", "/user/b"]);
    system.spawn("r", "router", &init(&config)).unwrap();
    for (expected, from) in [(10, "/user/a"), (20, "/user/b"), (10, "/user/a")] {
        let body = mote_guest::encode(&Counter::Get).unwrap();
        let reply = system
            .ask("/user/r", "Counter", body, DEADLINE)
            .await
            .expect("an answer");
        assert_eq!(
            reply.sender.as_ref().map(|s| s.path.to_string()).as_deref(),
            Some(from),
            "the routee answers itself"
        );
        let value: Counter = mote_guest::decode(&reply.kind, &reply.body).unwrap();
        assert_eq!(value, Counter::Value(expected));
    }
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_hash_router_keeps_each_key_on_one_routee_and_a_removal_moves_only_its_keys() {
    let system = system_with_patterns(&["router"], &[]);
    let probes: Vec<Probe> = (0..4)
        .map(|i| system.probe(&format!("p{i}")).unwrap())
        .collect();
    let paths: Vec<String> = (0..4).map(|i| format!("/system/p{i}")).collect();
    let mut stream = merge(probes);
    let config = router::Config::consistent_hash("user", paths.clone());
    system.spawn("r", "router", &init(&config)).unwrap();
    let users: Vec<String> = (0..40).map(|k| format!("user-{k}")).collect();
    for round in 0..3 {
        for user in &users {
            order(&system, "/user/r", &json!({"user": user, "n": round}));
        }
    }
    let mut home: BTreeMap<String, usize> = BTreeMap::new();
    for (user, probe) in orders(&mut stream, 3 * users.len()).await {
        let first = *home.entry(user.clone()).or_insert(probe);
        assert_eq!(first, probe, "every order of {user} reaches one routee");
    }
    let used: BTreeSet<usize> = home.values().copied().collect();
    assert_eq!(used.len(), 4, "forty keys spread over all four routees");

    // Without the last routee, its keys move and no other key does.
    let remove = router::RemoveRoutee {
        path: paths[3].clone(),
    };
    tell(&system, "/user/r", &remove);
    for user in &users {
        order(&system, "/user/r", &json!({"user": user, "n": 9}));
    }
    for (user, probe) in orders(&mut stream, users.len()).await {
        assert_ne!(probe, 3, "{user} reached the removed routee");
        if home[&user] != 3 {
            assert_eq!(home[&user], probe, "{user} moved though its routee stayed");
        }
    }
    assert_eq!(routees(&system, "/user/r").await.routees, paths[..3]);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_hash_router_rejects_a_message_without_its_key_and_goes_on() {
    let system = system_with_patterns(&["router"], &[]);
    let mut letters = system.subscribe_dead_letters();
    let mut sink = system.probe("sink").unwrap();
    let config = router::Config::consistent_hash("user", ["/system/sink"]);
    let r = system.spawn("r", "router", &init(&config)).unwrap();
    system
        .tell("/user/r", "order", br#"{"n": 1}"#.to_vec())
        .unwrap();
    system
        .tell("/user/r", "order", b"not json".to_vec())
        .unwrap();
    tell(&system, "/user/r", &Counter::Add(1));
    for body in [&br#"{"n": 1}"#[..], b"not json", &[0, 1][..]] {
        let letter = dead_letter(&mut letters).await;
        assert_eq!(letter.reason, DeadLetterReason::Rejected);
        assert_eq!(letter.target, r.to_string());
        assert_eq!(letter.envelope.body, body);
    }
    // Any JSON value is a key: a number's is its JSON text.
    order(&system, "/user/r", &json!({"user": 42, "n": 2}));
    assert_eq!(
        order_body(&next(&mut sink).await),
        json!({"user": 42, "n": 2})
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smallest_mailbox_router_avoids_a_routee_whose_mailbox_is_held_full() {
    let system = system_with_patterns(&["router"], &["lanes"]);
    let mut sink = system.probe("sink").unwrap();
    for boss in ["b0", "b1", "b2"] {
        system.spawn(boss, "lanes", b"boss /system/sink").unwrap();
    }
    // b0's worker is paused: what it is sent waits in its mailbox.
    tell(&system, "/user/b0", &Lane::Pause);
    let paused = report_labelled(&mut sink, "paused").await;
    assert_eq!(paused.value, 1);
    for n in 0..50 {
        tell(&system, "/user/b0/worker", &Lane::Work(1000 + n));
    }
    let workers = ["/user/b0/worker", "/user/b1/worker", "/user/b2/worker"];
    // Each boss spawns its worker as it starts: until a worker is up, its depth is unreadable
    // or grows, and the router rightly passes it over. One message each shows both are up.
    wait_until(|| workers.iter().all(|w| system.lookup(w).is_some())).await;
    for worker in &workers[1..] {
        tell(&system, worker, &Lane::Work(500));
    }
    let mut up = BTreeSet::new();
    for _ in 0..2 {
        up.insert(report_labelled(&mut sink, "work").await.from);
    }
    assert_eq!(up.len(), 2, "{up:?}");
    let config = router::Config::group(Strategy::SmallestMailbox, workers);
    system.spawn("r", "router", &init(&config)).unwrap();
    // Fewer than the 50 held: no working routee's mailbox can grow as deep.
    for n in 0..30 {
        tell(&system, "/user/r", &Lane::Work(n));
    }
    let mut by_worker: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..30 {
        let report: Report = report_labelled(&mut sink, "work").await;
        assert!(report.value < 1000, "a held message passed: {report:?}");
        *by_worker.entry(report.from).or_default() += 1;
    }
    assert!(!by_worker.contains_key(workers[0]), "{by_worker:?}");
    assert!(
        by_worker.contains_key(workers[1]) && by_worker.contains_key(workers[2]),
        "equal mailboxes take turns: {by_worker:?}"
    );
    // Resumed, the paused worker finds all it was held, and only that.
    tell(&system, "/user/b0", &Lane::Resume);
    let mut held = 0;
    while held < 50 {
        let report = next_report(&mut sink).await;
        match report.label.as_str() {
            "work" => {
                assert_eq!(report.from, workers[0]);
                assert_eq!(report.value, 1000 + held);
                held += 1;
            }
            "resumed" => assert_eq!(report.value, 1),
            other => panic!("unexpected report {other}"),
        }
    }
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_random_router_reaches_every_routee_over_many_messages() {
    let system = system_with_patterns(&["router"], &["counter"]);
    let paths: Vec<String> = (0..4).map(|i| format!("/user/c{i}")).collect();
    for path in &paths {
        system.spawn(&path[6..], "counter", b"").unwrap();
    }
    let config = router::Config::group(Strategy::Random, paths.clone());
    system.spawn("r", "router", &init(&config)).unwrap();
    for _ in 0..400 {
        tell(&system, "/user/r", &Counter::Add(1));
    }
    assert_eq!(routees(&system, "/user/r").await.routed, 400);
    let mut total = 0;
    for path in &paths {
        let Counter::Value(count) = ask_as(&system, path, &Counter::Get).await else {
            panic!("not a value");
        };
        // Each has a 1 in 4 chance per message: fewer than 40 of 400 is all but impossible.
        assert!(count >= 40, "{path} got {count} of 400");
        total += count;
    }
    assert_eq!(total, 400);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_routee_that_traps_is_restarted_and_the_router_keeps_routing_to_it() {
    let system = system_with_patterns(&["router"], &["crasher"]);
    let mut sink = system.probe("sink").unwrap();
    let config = router::Config::pool(Strategy::RoundRobin, Pool::of("crasher", 2, "/system/sink"));
    system.spawn("r", "router", &init(&config)).unwrap();
    // The first message goes to routee-0, which traps.
    tell(&system, "/user/r", &Crash::Panic);
    let restarted = report_labelled(&mut sink, "restarted").await;
    assert_eq!(restarted.from, "/user/r/routee-0");
    // Both are routed to in turn, the restarted one with a fresh count.
    let mut answers = Vec::new();
    for _ in 0..4 {
        let echo: Crash = ask_as(&system, "/user/r", &Crash::Bump).await;
        answers.push(echo);
    }
    assert_eq!(
        answers,
        [
            Crash::Echo(1),
            Crash::Echo(1),
            Crash::Echo(2),
            Crash::Echo(2)
        ]
    );
    assert_eq!(routees(&system, "/user/r").await.routees.len(), 2);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_routees_that_stop_for_good_leave_and_with_none_left_a_message_is_a_dead_letter() {
    let system = system_with_patterns(&["router"], &["crasher"]);
    let mut sink = system.probe("sink").unwrap();
    let mut letters = system.subscribe_dead_letters();
    let config = router::Config::pool(
        Strategy::RoundRobin,
        Pool {
            directive: router::Directive::Stop,
            ..Pool::of("crasher", 2, "/system/sink")
        },
    );
    let r = system.spawn("r", "router", &init(&config)).unwrap();
    // An error, not a trap: a stopped instance that did not trap runs its `stopping`.
    tell(&system, "/user/r", &Crash::Fail("enough".into()));
    tell(&system, "/user/r", &Crash::Fail("enough".into()));
    let mut stopped = BTreeSet::new();
    while stopped.len() < 2 {
        let report = report_labelled(&mut sink, "stopped").await;
        assert_eq!(report.value, 1, "stopped by a failure");
        stopped.insert(report.from);
    }
    // The router hears of each end (a message of its own) and lets the routee go.
    wait_until_async(DEADLINE, || async {
        routees(&system, "/user/r")
            .await
            .routees
            .is_empty()
            .then_some(())
    })
    .await;
    tell(&system, "/user/r", &Counter::Add(1));
    let letter = dead_letter(&mut letters).await;
    assert_eq!(letter.reason, DeadLetterReason::Rejected);
    assert_eq!(letter.target, r.to_string());
    assert_eq!(letter.envelope.kind, "Counter");
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routees_are_added_removed_listed_and_broadcast_to_by_control_messages() {
    let system = system_with_patterns(&["router"], &["counter"]);
    let mut letters = system.subscribe_dead_letters();
    let source = system.probe("source").unwrap();
    system.spawn("c0", "counter", b"").unwrap();
    system.spawn("c1", "counter", b"").unwrap();
    let config = router::Config::group(Strategy::RoundRobin, ["/user/c0"]);
    system.spawn("r", "router", &init(&config)).unwrap();
    let add = router::AddRoutee {
        path: "/user/c1".into(),
    };
    tell(&system, "/user/r", &add);
    tell(&system, "/user/r", &add);
    assert_eq!(
        routees(&system, "/user/r").await.routees,
        ["/user/c0", "/user/c1"],
        "added once"
    );
    let broadcast = router::Broadcast::of(&Counter::Add(5)).unwrap();
    tell(&system, "/user/r", &broadcast);
    // A broadcast keeps the broadcaster as sender: each routee answers it.
    let get = router::Broadcast::of(&Counter::Get).unwrap();
    tell_from(&source, "/user/r", &get);
    let remove = router::RemoveRoutee {
        path: "/user/c0".into(),
    };
    tell(&system, "/user/r", &remove);
    tell(&system, "/user/r", &Counter::Add(1));
    tell(&system, "/user/r", &Counter::Add(1));
    assert_eq!(routees(&system, "/user/r").await.routees, ["/user/c1"]);
    let mut source = source;
    for _ in 0..2 {
        assert_eq!(next_as::<Counter>(&mut source).await, Counter::Value(5));
    }
    let c0: Counter = ask_as(&system, "/user/c0", &Counter::Get).await;
    let c1: Counter = ask_as(&system, "/user/c1", &Counter::Get).await;
    assert_eq!((c0, c1), (Counter::Value(5), Counter::Value(7)));
    // Bad control messages are the sender's problem: dead letters, and the router goes on.
    tell(&system, "/user/r", &remove);
    system
        .tell("/user/r", "router.add-routees", b"{}".to_vec())
        .unwrap();
    system
        .tell("/user/r", "router.broadcast", br#"{"kind": "x"}"#.to_vec())
        .unwrap();
    for kind in [
        "router.remove-routee",
        "router.add-routees",
        "router.broadcast",
    ] {
        let letter = dead_letter(&mut letters).await;
        assert_eq!(letter.reason, DeadLetterReason::Rejected);
        assert_eq!(letter.envelope.kind, kind);
    }
    assert_eq!(routees(&system, "/user/r").await.routees, ["/user/c1"]);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgraded_router_keeps_its_routees_and_their_turn() {
    let system = system_with_patterns(&["router"], &["counter"]);
    system.spawn("c0", "counter", b"").unwrap();
    system.spawn("c1", "counter", b"").unwrap();
    let config = router::Config::group(Strategy::RoundRobin, ["/user/c0"]);
    system.spawn("r", "router", &init(&config)).unwrap();
    let add = router::AddRoutee {
        path: "/user/c1".into(),
    };
    tell(&system, "/user/r", &add);
    tell(&system, "/user/r", &Counter::Add(1));
    let bytes = mote_patterns::component("router").unwrap();
    system.deploy_version("router", "2", bytes).unwrap();
    let report = system.upgrade("/user/r", "2").await.unwrap();
    assert!(report.upgraded[0].migrated, "{report:?}");
    let now = routees(&system, "/user/r").await;
    assert_eq!(now.routees, ["/user/c0", "/user/c1"]);
    assert_eq!(now.routed, 1);
    // c0 took the first add; c1 is next.
    tell(&system, "/user/r", &Counter::Add(2));
    routees(&system, "/user/r").await;
    let c0: Counter = ask_as(&system, "/user/c0", &Counter::Get).await;
    let c1: Counter = ask_as(&system, "/user/c1", &Counter::Get).await;
    assert_eq!((c0, c1), (Counter::Value(1), Counter::Value(2)));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_with_a_bad_configuration_fails_to_start_with_the_reason() {
    let system = system_with_patterns(&["router"], &[]);
    let mut events = system.subscribe_supervision();
    let cases: [(&[u8], &str); 4] = [
        (
            br#"{"strategy": "fastest"}"#,
            "router: bad configuration: unknown variant `fastest`",
        ),
        (
            br#"{"strategy": "consistent-hash", "routees": ["/user/a"]}"#,
            "consistent-hash needs a `hash_key`",
        ),
        (
            br#"{"strategy": "random", "pool": {"module": "counter", "size": 0}}"#,
            "a pool needs a size from 1",
        ),
        (
            br#"{"strategy": "random", "pool": {"module": "nothing", "size": 2}}"#,
            "no module `nothing` is deployed",
        ),
    ];
    for (n, (config, reason)) in cases.iter().enumerate() {
        system.spawn(&format!("r{n}"), "router", config).unwrap();
        // An earlier case's actor, restarted by the guardian, may fail again meanwhile.
        let event = decision_for(&mut events, &format!("/user/r{n}")).await;
        assert!(format!("{event:?}").contains(reason), "{reason}: {event:?}");
    }
    system.shutdown().await.unwrap();
}
