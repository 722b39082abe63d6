//! A cluster of hosts on a real nats-server: nodes in this process, each a whole `ActorSystem`
//! joined to the cluster. Remote tell and ask (a guest's too, with its deadline), per-pair
//! order, death watch across nodes (and when a node leaves), topics and groups across nodes,
//! children spawned on another node (by Rust, Python, JavaScript and C parents), entities
//! placed by rendezvous hashing under a lease, and a taken node name refused. The kill -9 of a
//! node process is in `cli/tests/cluster.rs`.

use std::time::{Duration, Instant};

use mote_example_protocol::{
    Asking, Counter, Crash, Entity, EntityValue, Relay, Report, Seq, Watch,
};
use mote_host::{
    ActorSystem, CLUSTER_TOPIC, ClusterConfig, ClusterError, DeadLetterReason, EntityOptions,
    NODE_DOWN_KIND, NODE_UP_KIND, SpawnOptions,
};
use mote_tests::nats::NatsServer;
use mote_tests::{
    DEADLINE, Speech, TempDir, ask_as, durable_config, next, next_report, report_labelled, routed,
    scenarios, system_configured, system_with, tell, wait_until,
};

/// Fast beats, so that a node that goes is noticed within a second.
fn config(nats: &NatsServer, node: &str) -> ClusterConfig {
    let mut config = ClusterConfig::new(nats.url.clone(), node);
    config.heartbeat = Duration::from_millis(200);
    config.failure_timeout = Duration::from_millis(800);
    config
}

async fn node(nats: &NatsServer, name: &str, modules: &[&str]) -> ActorSystem {
    let system = system_with(modules);
    system
        .join_cluster(config(nats, name))
        .await
        .unwrap_or_else(|e| panic!("node {name} joins: {}", mote_host::chain(&e)));
    system
}

/// The path by which actors of other nodes reach the probe `name` of node `node`.
fn probe_path(node: &str, name: &str) -> String {
    format!("/system/nodes/{node}/system/{name}")
}

/// Nodes `a` and `b`, each with its database in one of `dirs`, hosting the entity kind `carts`.
async fn carts_nodes(nats: &NatsServer, dirs: &[TempDir; 2]) -> Vec<ActorSystem> {
    let mut systems = Vec::new();
    for (dir, name) in dirs.iter().zip(["a", "b"]) {
        let system = system_configured(durable_config(&dir.join("mote.redb")), &["entity"]);
        system
            .register_entity("carts", "entity", EntityOptions::default())
            .expect("entity kind");
        system.join_cluster(config(nats, name)).await.expect("join");
        systems.push(system);
    }
    systems
}

/// Waits until every node sees all `n` nodes live.
async fn all_see(nodes: &[&ActorSystem], n: usize) {
    wait_until(|| nodes.iter().all(|s| s.cluster_nodes().len() == n)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tell_and_ask_reach_an_actor_on_another_node_in_order() {
    let nats = NatsServer::start(&[]);
    let a = node(&nats, "a", &["counter", "sequence"]).await;
    let b = node(&nats, "b", &["counter", "sequence"]).await;
    all_see(&[&a, &b], 2).await;

    b.claim("/user/count").await.expect("b claims count");
    b.spawn("count", "counter", b"").expect("spawn on b");
    routed(&[&a], "/user/count", "b").await;
    assert_eq!(b.node_of("/user/count").as_deref(), Some("b"), "its own");
    assert_eq!(a.node_of("/user/nobody"), None, "no node's");
    assert!(
        matches!(a.claim("/user/count").await, Err(ClusterError::Claimed { node, .. }) if node == "b"),
        "a live node's name is not claimable"
    );
    assert!(a.spawn("count", "counter", b"").is_err(), "nor spawnable");

    // From outside node a: the tell crosses, and the ask's reply finds a's endpoint.
    tell(&a, "/user/count", &Counter::Add(5));
    let value: Counter = ask_as(&a, "/user/count", &Counter::Get).await;
    assert_eq!(value, Counter::Value(5));

    // 20,000 messages from an actor on a to an actor on b keep their order. The sender tells
    // them all from its `start`, faster than a debug build drains them on b, so the checker's
    // mailbox holds the whole stream: past its bound, an arrival would be a dead letter (as on
    // one host), which is not what this checks.
    let mut probe = a.probe("order").expect("probe");
    let init = format!("check {} 1 20000", probe_path("a", "order"));
    b.claim("/user/check").await.expect("claim");
    let whole_stream = SpawnOptions {
        mailbox_capacity: Some(20_000),
        ..SpawnOptions::default()
    };
    b.spawn_with("check", "sequence", init.as_bytes(), whole_stream)
        .expect("checker");
    routed(&[&a], "/user/check", "b").await;
    a.claim("/user/send").await.expect("claim");
    a.spawn("send", "sequence", b"send /user/check 0 20000")
        .expect("sender");
    let in_order = report_labelled(&mut probe, "in_order").await;
    let out_of_order = report_labelled(&mut probe, "out_of_order").await;
    assert_eq!((in_order.value, out_of_order.value), (20000, 0));

    // A path nobody owns is a dead letter on the sender's node; one of a node that left says so.
    let mut letters = a.subscribe_dead_letters();
    a.tell("/user/nobody", "k", Vec::new()).expect("tell");
    let letter = tokio::time::timeout(DEADLINE, letters.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(letter.reason, DeadLetterReason::NoActor);
    b.shutdown().await.expect("b leaves");
    wait_until(|| a.cluster_nodes() == ["a"]).await;
    a.tell("/user/count", "k", Vec::new()).expect("tell");
    let letter = tokio::time::timeout(DEADLINE, letters.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (letter.reason, letter.target.as_str()),
        (DeadLetterReason::NodeDown, "/user/count")
    );
    a.shutdown().await.expect("a stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_ask_of_another_node_is_answered_or_times_out_at_its_deadline() {
    let nats = NatsServer::start(&[]);
    let a = node(&nats, "a", &["asker"]).await;
    let b = node(&nats, "b", &["counter", "ticker"]).await;
    all_see(&[&a, &b], 2).await;
    let mut probe = a.probe("asks").expect("probe");
    a.claim("/user/asker").await.expect("claim");
    a.spawn("asker", "asker", b"/system/asks").expect("asker");
    b.claim("/user/count").await.expect("claim");
    let count = b.spawn("count", "counter", b"42").expect("counter");
    b.claim("/user/late").await.expect("claim");
    let late = b
        .spawn("late", "ticker", b"/system/nobody")
        .expect("ticker");
    routed(&[&a], "/user/count", "b").await;
    routed(&[&a], "/user/late", "b").await;

    // The asker on a asks the counter on b: the answer crosses back to its `answered` hook.
    let ask = |to: &mote_host::Address, timeout_ms, get| Asking::Ask {
        path: to.path.to_string(),
        incarnation: to.incarnation,
        timeout_ms,
        get,
    };
    tell(&a, "/user/asker", &ask(&count, 5000, true));
    assert_eq!(report_labelled(&mut probe, "answer").await.value, 42);

    // The ticker on b answers after three times the deadline: the ask times out on a at its
    // deadline, and the reply that comes later is dropped there.
    let asked = Instant::now();
    tell(&a, "/user/asker", &ask(&late, 500, false));
    report_labelled(&mut probe, "timeout").await;
    let waited = asked.elapsed();
    assert!(
        waited >= Duration::from_millis(500),
        "not before its deadline: {waited:?}"
    );
    assert_eq!(
        a.late_replies(),
        0,
        "the timeout came before the reply (sent at three times the deadline)"
    );
    wait_until(|| a.late_replies() == 1).await;
    a.shutdown().await.ok();
    b.shutdown().await.ok();
}

/// The Python, JavaScript and C supervisors spawn their children on another node (`spawn_on`,
/// `spawnOn`, `mote_spawn_on`): a child lives on b under its parent's path, its failure there
/// reaches the parent's `supervise` hook on a, whose directive (stop) ends it, and the parent's
/// watch hears of that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_js_and_c_parents_spawn_and_supervise_a_child_on_another_node() {
    let parents = ["py_supervisor", "js_supervisor", "c_supervisor"];
    let nats = NatsServer::start(&[]);
    let a = node(&nats, "a", &parents).await;
    let b = node(&nats, "b", &["crasher"]).await;
    all_see(&[&a, &b], 2).await;
    let mut probe = a.probe("sdk").expect("probe");
    let init = format!(
        "one by-error 3 60000 1 crasher {} 0 0 b",
        probe_path("a", "sdk")
    );
    for parent in parents {
        a.claim(&format!("/user/{parent}")).await.expect("claim");
        a.spawn(parent, parent, init.as_bytes()).expect("parent");
        let child = format!("/user/{parent}/c0");
        wait_until(|| b.lookup(&child).is_some()).await;
        let on_b = b.lookup(&child).expect("the child on b");
        assert_eq!(
            a.lookup(&child),
            Some(on_b.clone()),
            "one address on both nodes"
        );

        tell(&a, &child, &Crash::Fail("please stop".into()));
        let failed = scenarios::report_in(Speech::Json, &mut probe, "kind:error").await;
        assert_eq!(failed.from, child, "{parent}");
        let ended = scenarios::report_in(Speech::Json, &mut probe, "terminated").await;
        assert_eq!((ended.from, ended.value), (child.clone(), on_b.incarnation));
        wait_until(|| b.lookup(&child).is_none()).await;
    }
    a.shutdown().await.ok();
    b.shutdown().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_hear_once_of_a_remote_stop_and_of_a_node_that_leaves() {
    let nats = NatsServer::start(&[]);
    let a = node(&nats, "a", &["watcher", "counter"]).await;
    let b = node(&nats, "b", &["counter"]).await;
    all_see(&[&a, &b], 2).await;
    let mut events = a.subscribe(CLUSTER_TOPIC).expect("cluster topic");

    let mut probe = a.probe("watch").expect("probe");
    a.spawn(
        "watcher",
        "watcher",
        probe.address().path.as_str().as_bytes(),
    )
    .expect("watcher");
    let mut targets = Vec::new();
    for name in ["t1", "t2", "t3"] {
        b.claim(&format!("/user/{name}")).await.expect("claim");
        targets.push(b.spawn(name, "counter", b"").expect("target"));
        routed(&[&a], &format!("/user/{name}"), "b").await;
    }
    for t in &targets {
        tell(
            &a,
            "/user/watcher",
            &Watch::Watch {
                path: t.path.to_string(),
                incarnation: t.incarnation,
            },
        );
    }
    // Unwatched before it stops: no notice for t3.
    tell(
        &a,
        "/user/watcher",
        &Watch::Unwatch {
            path: targets[2].path.to_string(),
            incarnation: targets[2].incarnation,
        },
    );
    wait_until(|| a.cluster_stats().is_some_and(|s| s.remote_watches == 2)).await;

    // t1 stops on b: its notice crosses.
    assert!(b.stop("/user/t1"));
    let told = report_labelled(&mut probe, "terminated").await;
    assert_eq!(told.value, targets[0].incarnation);

    // b leaves: t2's watcher hears once (from b's shutdown or from its leave, not both).
    b.shutdown().await.expect("b leaves");
    let told = report_labelled(&mut probe, "terminated").await;
    assert_eq!(told.value, targets[1].incarnation);
    let down = loop {
        let event = next(&mut events).await;
        if event.kind == NODE_DOWN_KIND {
            break event;
        }
    };
    assert_eq!(down.body, b"b");
    assert!(
        probe
            .recv_timeout(Duration::from_millis(1500))
            .await
            .is_none(),
        "no second notice, none for the unwatched t3"
    );
    assert_eq!(a.cluster_stats().map(|s| s.remote_watches), Some(0));

    // b comes back under its name: a hears it up.
    let b = node(&nats, "b", &["counter"]).await;
    let up = loop {
        let event = next(&mut events).await;
        if event.kind == NODE_UP_KIND {
            break event;
        }
    };
    assert_eq!(up.body, b"b");
    b.shutdown().await.ok();
    a.shutdown().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_and_groups_span_the_nodes() {
    let nats = NatsServer::start(&[]);
    let a = node(&nats, "a", &["subscriber", "crasher"]).await;
    let b = node(&nats, "b", &["subscriber", "crasher"]).await;
    let c = node(&nats, "c", &["subscriber", "crasher"]).await;
    all_see(&[&a, &b, &c], 3).await;

    let mut probe = a.probe("news").expect("probe");
    let report_to = probe_path("a", "news");
    for (system, name) in [(&b, "sb"), (&c, "sc")] {
        system.claim(&format!("/user/{name}")).await.expect("claim");
        system
            .spawn(name, "subscriber", format!("news {report_to}").as_bytes())
            .expect("subscriber");
    }
    // Subscriptions travel with heartbeats: publish until both remote subscribers count.
    let body = mote_guest::encode(&Seq { stream: 0, n: 1 }).expect("encode");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while a.publish("news", <Seq as mote_guest::Message>::KIND, body.clone()) < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "subscribers never counted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut from = Vec::new();
    while from.len() < 2 {
        let report: Report = next_report(&mut probe).await;
        if !from.contains(&report.from) {
            from.push(report.from);
        }
    }
    from.sort();
    assert_eq!(from, ["/user/sb", "/user/sc"]);

    // A persistent publisher's publishes are held until its step commits, then reach the
    // subscribers on other nodes too.
    let dir = TempDir::new("cluster-publisher");
    let durable = system_configured(durable_config(&dir.join("mote.redb")), &["publisher"]);
    durable
        .join_cluster(config(&nats, "d"))
        .await
        .expect("d joins");
    wait_until(|| durable.cluster_nodes().len() == 4).await;
    let init = format!("news 3 {report_to} durable");
    durable
        .spawn("durable-publisher", "publisher", init.as_bytes())
        .expect("publisher");
    // The publisher's own report goes to a in one hop, the subscribers' in two: they may come
    // in any order.
    let mut published = None;
    let mut seen = Vec::new();
    while seen.len() < 6 || published.is_none() {
        let report: Report = next_report(&mut probe).await;
        match report.label.as_str() {
            "published" => published = Some(report.value),
            "/user/durable-publisher" => seen.push((report.from, report.value)),
            _ => {}
        }
    }
    assert_eq!(
        published,
        Some(6),
        "3 publishes, 2 subscribers each, counted at the call"
    );
    seen.sort();
    assert_eq!(
        seen,
        [
            ("/user/sb".to_owned(), 0),
            ("/user/sb".to_owned(), 1),
            ("/user/sb".to_owned(), 2),
            ("/user/sc".to_owned(), 0),
            ("/user/sc".to_owned(), 1),
            ("/user/sc".to_owned(), 2)
        ]
    );
    durable.shutdown().await.ok();

    // Groups: members on b and c only; a's tell-group goes to one of them, least loaded.
    for (system, name) in [(&b, "wb"), (&c, "wc")] {
        system.claim(&format!("/user/{name}")).await.expect("claim");
        system
            .spawn(name, "crasher", b"group:workers")
            .expect("member");
    }
    let echo = |n| mote_guest::encode(&Crash::Echo(n)).expect("encode");
    let mut replies = a.probe("echo").expect("probe");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !replies.tell_group("workers", <Crash as mote_guest::Message>::KIND, echo(7)) {
        assert!(tokio::time::Instant::now() < deadline, "no member known");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reply = next(&mut replies).await;
    let sender = reply.sender.expect("a member replied").path.to_string();
    assert!(sender == "/user/wb" || sender == "/user/wc", "{sender}");
    wait_until(|| a.broadcast_group("workers", <Crash as mote_guest::Message>::KIND, echo(8)) == 2)
        .await;
    for system in [a, b, c] {
        system.shutdown().await.ok();
    }
    drop(probe);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entity_lives_on_one_node_and_moves_when_its_node_leaves() {
    let nats = NatsServer::start(&[]);
    let dirs = [TempDir::new("cluster-a"), TempDir::new("cluster-b")];
    let mut systems = carts_nodes(&nats, &dirs).await;
    all_see(&[&systems[0], &systems[1]], 2).await;

    // Many ids: each activates once in the cluster, wherever it is asked from.
    let ids: Vec<String> = (0..12).map(|i| format!("/user/carts/{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        tell(&systems[i % 2], id, &Entity::Add(1));
    }
    let mut placed = [0, 0];
    for id in &ids {
        for system in &systems {
            let value: EntityValue = ask_as(system, id, &Entity::Get).await;
            assert_eq!(
                (value.total, value.activations),
                (1, 1),
                "{id}: one activation"
            );
        }
        for (n, system) in systems.iter().enumerate() {
            if system.lookup(id).is_some() {
                placed[n] += 1;
            }
        }
    }
    assert_eq!(
        placed[0] + placed[1],
        ids.len(),
        "each entity lives on exactly one node"
    );
    assert!(
        placed[0] > 0 && placed[1] > 0,
        "rendezvous spreads them: {placed:?}"
    );

    // b leaves: its entities activate on a at their next message, from a's own state (none:
    // redb is node-local; the cluster-durability work makes state follow).
    let on_b: Vec<&String> = ids
        .iter()
        .filter(|id| systems[1].lookup(id).is_some())
        .collect();
    let b = systems.pop().expect("b");
    b.shutdown().await.expect("b leaves");
    let a = &systems[0];
    wait_until(|| a.cluster_nodes() == ["a"]).await;
    for id in on_b {
        let value: EntityValue = ask_as(a, id, &Entity::Get).await;
        assert_eq!(
            (value.total, value.activations),
            (0, 1),
            "{id} starts afresh on a"
        );
        assert!(a.lookup(id).is_some());
    }
    systems.pop().expect("a").shutdown().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_node_name_is_refused_and_a_bad_one_too() {
    let nats = NatsServer::start(&[]);
    let a = node(&nats, "a", &[]).await;
    let again = system_with(&[]);
    let refused = again.join_cluster(config(&nats, "a")).await;
    assert!(
        matches!(&refused, Err(ClusterError::NameTaken(n)) if n == "a"),
        "{refused:?}"
    );
    assert!(matches!(
        again.join_cluster(config(&nats, "a.b")).await,
        Err(ClusterError::InvalidName { .. })
    ));
    // Two nodes that start under one free name at the same moment: exactly one joins.
    let (x, y) = (system_with(&[]), system_with(&[]));
    let (first, second) = tokio::join!(
        x.join_cluster(config(&nats, "twin")),
        y.join_cluster(config(&nats, "twin"))
    );
    assert!(
        first.is_ok() != second.is_ok(),
        "one twin joins: {first:?} {second:?}"
    );
    x.shutdown().await.ok();
    y.shutdown().await.ok();

    // Another cluster on the same server is another name space: `a` is free there, and
    // neither sees the other's nodes.
    let mut other = config(&nats, "a");
    other.name = "other".to_owned();
    again
        .join_cluster(other)
        .await
        .expect("a in the other cluster");
    assert_eq!(again.cluster_nodes(), ["a"]);
    // The twin that joined has left: a hears that, and nothing of the other cluster.
    wait_until(|| a.cluster_nodes() == ["a"]).await;
    let elsewhere = system_with(&[]);
    let unreachable = ClusterConfig::new(
        format!("nats://127.0.0.1:{}", mote_tests::nats::free_port()),
        "z",
    );
    assert!(matches!(
        elsewhere.join_cluster(unreachable).await,
        Err(ClusterError::Connect { .. })
    ));
    a.shutdown().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_supervises_and_stops_children_it_spawned_on_another_node() {
    let nats = NatsServer::start(&[]);
    let a = node(&nats, "a", &["supervisor", "crasher"]).await;
    let b = node(&nats, "b", &["crasher"]).await;
    all_see(&[&a, &b], 2).await;
    let mut probe = a.probe("sup").expect("probe");
    let report_to = probe_path("a", "sup");

    // Two crasher children of a supervisor on a, spawned on b: restart on failure.
    let init = format!("one restart 5 10000 2 crasher {report_to} 0 0 b");
    a.spawn("sup", "supervisor", init.as_bytes())
        .expect("supervisor");
    wait_until(|| b.lookup("/user/sup/c0").is_some() && b.lookup("/user/sup/c1").is_some()).await;
    let on_b = b.lookup("/user/sup/c0").expect("c0 on b");
    let here = a.lookup("/user/sup/c0").expect("its stand-in on a");
    assert_eq!(on_b, here, "one address on both nodes");

    // Messages reach the children through the parent's node, and their replies come back.
    tell(&a, "/user/sup", &Relay::Broadcast(5));
    for _ in 0..2 {
        assert_eq!(report_labelled(&mut probe, "echo").await.value, 5);
    }

    // A child on b fails: the parent on a decides (restart), and the child restarts on b.
    tell(&a, "/user/sup/c0", &Crash::Panic);
    let failure = report_labelled(&mut probe, "kind:trap").await;
    assert_eq!(failure.from, "/user/sup/c0");
    let restarted = report_labelled(&mut probe, "restarted").await;
    assert_eq!(restarted.from, "/user/sup/c0");
    assert_eq!(
        b.lookup("/user/sup/c0"),
        Some(on_b.clone()),
        "same incarnation"
    );

    // The parent stops: its children on b stop first, and it hears each terminate.
    let sup = a.lookup("/user/sup").expect("sup");
    assert!(a.stop("/user/sup"));
    mote_tests::terminated(&a, &sup).await;
    wait_until(|| b.lookup("/user/sup/c0").is_none() && b.lookup("/user/sup/c1").is_none()).await;
    assert!(
        a.lookup("/user/sup/c0").is_none(),
        "the stand-ins are gone too"
    );

    // Children on a node that leaves count as terminated: the parent hears it once each.
    let init = format!("one restart 5 10000 2 crasher {report_to} 0 0 b");
    a.spawn("sup2", "supervisor", init.as_bytes())
        .expect("supervisor");
    wait_until(|| b.lookup("/user/sup2/c1").is_some()).await;
    while probe
        .recv_timeout(Duration::from_millis(100))
        .await
        .is_some()
    {}
    b.shutdown().await.expect("b leaves");
    let mut ended = Vec::new();
    while ended.len() < 2 {
        let report = report_labelled(&mut probe, "terminated").await;
        ended.push(report.from);
    }
    ended.sort();
    assert_eq!(ended, ["/user/sup2/c0", "/user/sup2/c1"]);
    wait_until(|| a.lookup("/user/sup2/c0").is_none()).await;
    a.shutdown().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_entity_lease_moved_stops_its_activation() {
    let nats = NatsServer::start(&[]);
    let dirs = [TempDir::new("lease-a"), TempDir::new("lease-b")];
    let systems = carts_nodes(&nats, &dirs).await;
    let (a, b) = (&systems[0], &systems[1]);
    all_see(&[a, b], 2).await;
    // An entity that lives on a.
    let mut id = None;
    for i in 0..100 {
        let cart = format!("/user/carts/{i}");
        let _: EntityValue = ask_as(a, &cart, &Entity::Get).await;
        if a.lookup(&cart).is_some() {
            id = Some(cart);
            break;
        }
    }
    let id = id.expect("some cart lives on a");

    // Behind a's back (a partition would do this), b's name is written into the lease.
    let client = async_nats::connect(nats.url.as_str()).await.expect("nats");
    let leases = async_nats::jetstream::new(client)
        .get_key_value("mote-mote-leases")
        .await
        .expect("the lease bucket");
    let key: String = id
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
                char::from(b).to_string()
            } else {
                format!("={b:02X}")
            }
        })
        .collect();
    leases.put(&key, "b".into()).await.expect("moved");

    // a notices within a failure timeout and stops its activation; the entity lives on b next.
    wait_until(|| a.lookup(&id).is_none()).await;
    let value: EntityValue = ask_as(a, &id, &Entity::Get).await;
    assert_eq!(
        value.activations, 1,
        "a fresh activation on b (node-local state)"
    );
    assert!(b.lookup(&id).is_some() && a.lookup(&id).is_none());
    for system in systems {
        system.shutdown().await.ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_link_refuses_a_send_from_outside() {
    let nats = NatsServer::start(&[]);
    let b = node(&nats, "b", &["counter"]).await;
    let a = system_with(&["counter"]);
    let mut small = config(&nats, "a");
    small.link_capacity = 1;
    a.join_cluster(small).await.expect("a joins");
    all_see(&[&a, &b], 2).await;
    b.claim("/user/count").await.expect("claim");
    b.spawn("count", "counter", b"").expect("count");
    routed(&[&a], "/user/count", "b").await;
    // Outside sends are faster than one frame's way to NATS: a one-frame link fills.
    let add = mote_guest::encode(&Counter::Add(1)).expect("encode");
    let kind = <Counter as mote_guest::Message>::KIND;
    let mut refused = None;
    for _ in 0..1_000_000 {
        if let Err(e) = a.tell("/user/count", kind, add.clone()) {
            refused = Some(e);
            break;
        }
    }
    assert!(
        matches!(&refused, Some(mote_host::SendError::Unreachable { path }) if path == "/user/count"),
        "{refused:?}"
    );
    a.shutdown().await.ok();
    b.shutdown().await.ok();
}

/// A node with the sequence checker deployed with snapshots on (so its actors can move).
async fn movable_node(nats: &NatsServer, name: &str) -> ActorSystem {
    let system = system_with(&["counter"]);
    mote_tests::deploy_with_snapshots(&system, "sequence", "1", "sequence");
    system
        .join_cluster(config(nats, name))
        .await
        .unwrap_or_else(|e| panic!("node {name} joins: {}", mote_host::chain(&e)));
    system
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_actor_moves_to_another_node_under_streams_keeping_order_count_and_state() {
    const PER_STREAM: u32 = 5_000;
    let nats = NatsServer::start(&[]);
    let a = movable_node(&nats, "a").await;
    let b = movable_node(&nats, "b").await;
    let c = movable_node(&nats, "c").await;
    all_see(&[&a, &b, &c], 3).await;

    // The checker lives on b; senders on a (neither end of the move), on b (the source) and
    // on c (the target) each stream to it while it moves from b to c.
    let mut probe = a.probe("moved").expect("probe");
    let init = format!("check {} 3 {PER_STREAM}", probe_path("a", "moved"));
    b.claim("/user/check").await.expect("claim");
    let whole_streams = SpawnOptions {
        mailbox_capacity: Some(3 * PER_STREAM as usize),
        ..SpawnOptions::default()
    };
    let checker = b
        .spawn_with("check", "sequence", init.as_bytes(), whole_streams)
        .expect("checker");
    routed(&[&a, &c], "/user/check", "b").await;
    for (stream, (node, system)) in [("a", &a), ("b", &b), ("c", &c)].into_iter().enumerate() {
        let name = format!("send-{node}");
        system.claim(&format!("/user/{name}")).await.expect("claim");
        let init = format!("send /user/check {stream} {PER_STREAM}");
        system
            .spawn(&name, "sequence", init.as_bytes())
            .expect("sender");
    }
    // Mid-stream: some arrived, not all.
    wait_until(|| mote_tests::stats_of(&b, &checker).received >= 500).await;
    let moved = b
        .move_actor("/user/check", "c")
        .await
        .unwrap_or_else(|e| panic!("the move: {}", mote_host::chain(&e)));
    assert_eq!(moved, checker, "the same address on the new node");

    // Its count went with its memory: every message of every stream, none out of order.
    let in_order = report_labelled(&mut probe, "in_order").await;
    let out_of_order = report_labelled(&mut probe, "out_of_order").await;
    assert_eq!(
        (in_order.value, out_of_order.value),
        (3 * u64::from(PER_STREAM), 0)
    );
    assert!(
        c.tree().iter().any(|info| info.address == checker),
        "it lives on c as the same incarnation"
    );
    assert!(
        !b.tree()
            .iter()
            .any(|info| info.address.path == checker.path),
        "and no longer on b"
    );
    for system in [a, b, c] {
        system.shutdown().await.expect("shutdown");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_that_cannot_happen_is_refused_and_the_actor_serves_on() {
    let nats = NatsServer::start(&[]);
    let a = movable_node(&nats, "a").await;
    let b = movable_node(&nats, "b").await;
    all_see(&[&a, &b], 2).await;
    a.claim("/user/count").await.expect("claim");
    a.spawn("count", "counter", b"").expect("counter");
    routed(&[&b], "/user/count", "a").await;
    tell(&a, "/user/count", &Counter::Add(2));

    let refused = a.move_actor("/user/count", "b").await;
    assert!(
        matches!(
            refused,
            Err(mote_host::MoveError::Image(
                mote_host::ImageError::NotEnabled(_)
            ))
        ),
        "a module without snapshots does not move: {refused:?}"
    );
    let refused = a.move_actor("/user/count", "nowhere").await;
    assert!(
        matches!(&refused, Err(mote_host::MoveError::UnknownNode(n)) if n == "nowhere"),
        "{refused:?}"
    );
    let refused = a.move_actor("/user/count", "a").await;
    assert!(
        matches!(refused, Err(mote_host::MoveError::UnknownNode(_))),
        "{refused:?}"
    );
    let refused = b.move_actor("/user/count", "a").await;
    assert!(
        matches!(refused, Err(mote_host::MoveError::NoActor(_))),
        "{refused:?}"
    );

    tell(&a, "/user/count", &Counter::Add(3));
    let value: Counter = ask_as(&b, "/user/count", &Counter::Get).await;
    assert_eq!(
        value,
        Counter::Value(5),
        "it served on, on a, with its state"
    );
    for system in [a, b] {
        system.shutdown().await.expect("shutdown");
    }
}
