//! The foundation: ping-pong, ordering, isolation of a trapping actor, dead letters, cascading
//! stop, poison pill, graceful shutdown, naming rules.

use mote_example_protocol::{Counter, Crash, PingPong, Report, Seq};
use mote_host::{DeadLetterReason, Directive, HostConfig, SendError, SpawnError, Strategy};
use mote_tests::*;

/// A host whose guardian stops a failed top-level actor instead of restarting it.
fn stop_on_failure() -> HostConfig {
    let mut config = HostConfig::new();
    config.root_strategy(Strategy {
        directive: Directive::Stop,
        ..Strategy::default()
    });
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_pong_ten_thousand_round_trips_counted_on_both_sides() {
    let system = system_with(&["pingpong"]);
    let mut probe = system.probe("report").unwrap();
    system
        .spawn("pong", "pingpong", b"pong /system/report")
        .unwrap();
    // The peer is given relative to /user/ping: `../pong` selects the sibling.
    let ping = system
        .spawn("ping", "pingpong", b"ping ../pong 10000 /system/report")
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let r = next_report(&mut probe).await;
        seen.push((r.from, r.label, r.value));
    }
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("/user/ping".to_owned(), "pongs".to_owned(), 10_000),
            ("/user/pong".to_owned(), "pings".to_owned(), 10_000),
        ]
    );
    terminated(&system, &ping).await;
    system.user_actors_stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_from_one_sender_arrive_in_order_while_another_interleaves() {
    let system = system_with(&["sequence"]);
    let mut probe = system.probe("order").unwrap();
    system
        .spawn("check", "sequence", b"check /system/order 2 1000")
        .unwrap();
    system
        .spawn("a", "sequence", b"send /user/check 0 1000")
        .unwrap();
    system
        .spawn("b", "sequence", b"send /user/check 1 1000")
        .unwrap();
    // A sender outside the system keeps its order too.
    system
        .spawn("check2", "sequence", b"check /system/order 1 1000")
        .unwrap();
    for n in 0..1000 {
        tell(&system, "/user/check2", &Seq { stream: 0, n });
    }
    let mut results = Vec::new();
    for _ in 0..4 {
        let r = next_report(&mut probe).await;
        results.push((r.from, r.label, r.value));
    }
    results.sort();
    assert_eq!(
        results,
        vec![
            ("/user/check".to_owned(), "in_order".to_owned(), 2000),
            ("/user/check".to_owned(), "out_of_order".to_owned(), 0),
            ("/user/check2".to_owned(), "in_order".to_owned(), 1000),
            ("/user/check2".to_owned(), "out_of_order".to_owned(), 0),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_actor_stops_alone_and_the_host_keeps_running() {
    let system = system_configured(stop_on_failure(), &["crasher", "counter"]);
    let mut probe = system.probe("p").unwrap();
    let sibling = system.spawn("sibling", "counter", b"").unwrap();
    for (name, crash) in [
        ("panics", Crash::Panic),
        ("unreachable", Crash::Unreachable),
    ] {
        let victim = system.spawn(name, "crasher", b"").unwrap();
        // Proof of life first, then the crash.
        tell_from(&probe, &victim.path.to_string(), &Crash::Echo(7));
        assert_eq!(next_as::<Crash>(&mut probe).await, Crash::Echo(7));
        tell(&system, victim.path.as_str(), &crash);
        terminated(&system, &victim).await;
        assert_eq!(system.lookup(victim.path.as_str()), None);
    }
    // The sibling is untouched and still answers.
    tell(&system, "/user/sibling", &Counter::Add(5));
    tell_from(&probe, "/user/sibling", &Counter::Get);
    assert_eq!(next_as::<Counter>(&mut probe).await, Counter::Value(5));
    assert_eq!(system.lookup("/user/sibling"), Some(sibling));
    // And the host still spawns new actors of the failed module.
    let again = system.spawn("again", "crasher", b"").unwrap();
    tell_from(&probe, again.path.as_str(), &Crash::Echo(1));
    assert_eq!(next_as::<Crash>(&mut probe).await, Crash::Echo(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_from_receive_or_start_stops_the_actor() {
    let system = system_configured(stop_on_failure(), &["crasher"]);
    let mut probe = system.probe("p").unwrap();
    let failing = system.spawn("failing", "crasher", b"/system/p").unwrap();
    tell(&system, "/user/failing", &Crash::Fail("bad input".into()));
    terminated(&system, &failing).await;
    // An error (not a trap) leaves the instance usable, so `stopping` still runs and reports.
    let r = next_report(&mut probe).await;
    assert_eq!(
        (r.from.as_str(), r.label.as_str()),
        ("/user/failing", "stopped")
    );
    let refused = system.spawn("refused", "crasher", b"fail-start").unwrap();
    terminated(&system, &refused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_to_missing_or_stopped_actors_become_dead_letters_with_sender_and_target() {
    let system = system_with(&["pingpong", "counter"]);
    let mut letters = system.subscribe_dead_letters();
    let before = system.dead_letter_count();

    // From outside to a path that never existed.
    tell(&system, "/user/nobody", &Counter::Add(1));
    let dl = letters.recv().await.unwrap();
    assert_eq!(dl.target, "/user/nobody");
    assert_eq!(dl.envelope.sender, None);
    assert_eq!(dl.envelope.kind, "Counter");
    assert_eq!(dl.reason, DeadLetterReason::NoActor);

    // From an actor: a ping whose peer was never spawned sends Ping(1) into the void.
    let ping = system
        .spawn("lonely", "pingpong", b"ping /user/ghost 3")
        .unwrap();
    let dl = letters.recv().await.unwrap();
    assert_eq!(dl.target, "/user/ghost");
    assert_eq!(dl.envelope.sender, Some(ping.clone()));
    assert_eq!(
        mote_guest::decode::<PingPong>(&dl.envelope.kind, &dl.envelope.body).unwrap(),
        PingPong::Ping(1)
    );

    // To a stopped actor.
    let counter = system.spawn("counter", "counter", b"").unwrap();
    assert!(system.stop("/user/counter"));
    terminated(&system, &counter).await;
    tell(&system, "/user/counter", &Counter::Add(1));
    let dl = letters.recv().await.unwrap();
    assert_eq!(dl.target, "/user/counter");
    assert_eq!(system.dead_letter_count(), before + 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_parent_stops_its_subtree_children_first() {
    let system = system_with(&["tree"]);
    let mut probe = system.probe("t").unwrap();
    let root = system.spawn("tree", "tree", b"2 2 /system/t").unwrap();
    // Wait until the whole tree answers, level by level: a node's reply means its `start` has
    // run, so its children are registered and can be pinged next.
    let levels: [&[&str]; 3] = [
        &["/user/tree"],
        &["/user/tree/n0", "/user/tree/n1"],
        &[
            "/user/tree/n0/n0",
            "/user/tree/n0/n1",
            "/user/tree/n1/n0",
            "/user/tree/n1/n1",
        ],
    ];
    let nodes: Vec<&str> = levels.concat();
    for level in levels {
        for node in level {
            let ping = Report {
                from: String::new(),
                label: "ping".into(),
                value: 0,
            };
            tell_from(&probe, node, &ping);
        }
        let mut alive: Vec<String> = Vec::new();
        for _ in level {
            alive.push(next_report(&mut probe).await.from);
        }
        alive.sort();
        assert_eq!(alive, level.to_vec());
    }

    assert!(system.stop("/user/tree"));
    let mut order = Vec::new();
    for _ in &nodes {
        let r = next_report(&mut probe).await;
        assert_eq!(r.label, "stopped");
        order.push(r.from);
    }
    // Every node's `stopping` ran after those of all its descendants.
    for (i, path) in order.iter().enumerate() {
        for later in &order[i + 1..] {
            assert!(
                !later.starts_with(&format!("{path}/")),
                "{later} stopped after its ancestor {path}: {order:?}"
            );
        }
    }
    assert_eq!(order.last().map(String::as_str), Some("/user/tree"));
    terminated(&system, &root).await;
    assert!(
        system
            .tree()
            .iter()
            .all(|i| !i.address.path.as_str().starts_with("/user/tree"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_pill_is_handled_after_the_messages_queued_before_it() {
    let system = system_with(&["counter"]);
    let mut probe = system.probe("p").unwrap();
    let counter = system.spawn("c", "counter", b"").unwrap();
    for _ in 0..500 {
        tell(&system, "/user/c", &Counter::Add(2));
    }
    tell_from(&probe, "/user/c", &Counter::Get);
    assert!(system.poison_pill("/user/c"));
    assert_eq!(next_as::<Counter>(&mut probe).await, Counter::Value(1000));
    terminated(&system, &counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_runs_every_stopping_hook() {
    let system = system_with(&["tree", "crasher"]);
    let mut probe = system.probe("s").unwrap();
    system.spawn("tree", "tree", b"1 3 /system/s").unwrap();
    system.spawn("crasher", "crasher", b"/system/s").unwrap();
    // Shutdown refuses new spawns, so let the tree finish growing first.
    for node in [
        "/user/tree",
        "/user/tree/n0",
        "/user/tree/n1",
        "/user/tree/n2",
    ] {
        let ping = Report {
            from: String::new(),
            label: "ping".into(),
            value: 0,
        };
        tell_from(&probe, node, &ping);
        assert_eq!(next_report(&mut probe).await.label, "pong");
    }
    system.shutdown().await.expect("shutdown completes");
    let mut stopped = Vec::new();
    while let Some(envelope) = probe
        .recv_timeout(std::time::Duration::from_millis(0))
        .await
    {
        let r: Report = mote_guest::decode(&envelope.kind, &envelope.body).unwrap();
        stopped.push(r.from);
    }
    stopped.sort();
    assert_eq!(
        stopped,
        vec![
            "/user/crasher",
            "/user/tree",
            "/user/tree/n0",
            "/user/tree/n1",
            "/user/tree/n2"
        ]
    );
    assert!(matches!(
        system.spawn("late", "tree", b"0 0 /system/s"),
        Err(SpawnError::ShuttingDown)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_paths_modules_and_sizes_are_refused() {
    let system = system_with(&["counter"]);
    assert!(matches!(
        system.spawn("a/b", "counter", b""),
        Err(SpawnError::Address(_))
    ));
    assert!(matches!(
        system.spawn("", "counter", b""),
        Err(SpawnError::Address(_))
    ));
    assert!(matches!(
        system.spawn("/system/x", "counter", b""),
        Err(SpawnError::Address(_))
    ));
    assert!(matches!(
        system.spawn("x", "nope", b""),
        Err(SpawnError::UnknownModule(_))
    ));
    system.spawn("x", "counter", b"").unwrap();
    assert!(matches!(
        system.spawn("x", "counter", b""),
        Err(SpawnError::NameTaken(_))
    ));
    assert!(matches!(
        system.tell("user/x", "Counter", vec![]),
        Err(SendError::Address(_))
    ));
    assert!(matches!(
        system.tell("/user/x", "Counter", vec![0; 2 << 20]),
        Err(SendError::TooLarge { .. })
    ));
}
