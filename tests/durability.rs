//! Persistent state in JetStream (`[storage] backend = "jetstream"`) on a real nats-server:
//! a durable actor's state follows it to another host, one persistence id has one live writer,
//! a durable chain across two nodes counts every message exactly once, and an entity
//! passivated as an image wakes with its in-memory state on another host. The kill -9 and
//! SIGSTOP tests of node processes are in `cli/tests/durability.rs`.

use std::time::Duration;

use mote_example_protocol::{
    Journal, JournalState, Ledger, LedgerState, Remind, Versioned, VersionedState,
};
use mote_host::{ActorSystem, ClusterConfig, EntityOptions, HostConfig, StoreConfig};
use mote_tests::nats::NatsServer;
use mote_tests::{
    TempDir, ask_as, report_labelled, routed, system_configured, tell, wait_until, wait_until_async,
};

/// A host whose persistent actors keep their state in JetStream, as node `node`.
fn host(nats: &NatsServer, dir: &TempDir, node: &str, modules: &[&str]) -> ActorSystem {
    let mut config = HostConfig::new();
    config.storage(dir.join(&format!("{node}.redb")));
    let mut store = StoreConfig::new(nats.url.clone(), node);
    store.lease = Duration::from_secs(2);
    config.jetstream_storage(store);
    system_configured(config, modules)
}

/// Fast beats, so that a node that goes is noticed within a second.
fn cluster(nats: &NatsServer, node: &str) -> ClusterConfig {
    let mut config = ClusterConfig::new(nats.url.clone(), node);
    config.heartbeat = Duration::from_millis(200);
    config.failure_timeout = Duration::from_millis(800);
    config
}

async fn journal_state(system: &ActorSystem, path: &str) -> JournalState {
    ask_as::<Journal, JournalState>(system, path, &Journal::Query).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_actors_state_follows_it_to_another_host() {
    let nats = NatsServer::start(&[]);
    let dir = TempDir::new("follows");
    let values: Vec<u64> = (0..40).map(|i| (i * 7919) % 101).collect();
    {
        let a = host(&nats, &dir, "a", &["journal"]);
        // A snapshot every 16 events: recovery = the snapshot at 32 + a replay of 33..=40.
        a.spawn("j", "journal", b"16").unwrap();
        for v in &values {
            tell(&a, "/user/j", &Journal::Append(*v));
        }
        assert_eq!(journal_state(&a, "/user/j").await.values, values);
        a.shutdown().await.unwrap();
    }
    // Another host, with a database file of its own: the state is in JetStream.
    let b = host(&nats, &dir, "b", &["journal"]);
    b.spawn("j", "journal", b"16").unwrap();
    let state = journal_state(&b, "/user/j").await;
    assert_eq!(state.values, values, "the same values, in order");
    assert!(state.recovered_from_snapshot);
    assert_eq!(state.replayed, 8, "only the events after the snapshot");
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistence_id_held_by_a_live_writer_is_refused_elsewhere() {
    let nats = NatsServer::start(&[]);
    let dir = TempDir::new("held");
    let a = host(&nats, &dir, "a", &["journal"]);
    let b = host(&nats, &dir, "b", &["journal"]);
    a.spawn("j", "journal", b"0").unwrap();
    tell(&a, "/user/j", &Journal::Append(7));
    assert_eq!(journal_state(&a, "/user/j").await.values, [7]);

    let mut decisions = b.subscribe_supervision();
    b.spawn("j", "journal", b"0").unwrap();
    let decision = mote_tests::next_decision(&mut decisions).await;
    assert!(
        decision
            .error
            .contains("held by a live writer on node \"a\""),
        "{}",
        decision.error
    );
    // The first writer goes on.
    tell(&a, "/user/j", &Journal::Append(8));
    assert_eq!(journal_state(&a, "/user/j").await.values, [7, 8]);
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_chain_across_nodes_counts_every_message_exactly_once() {
    const N: u64 = 300;
    let nats = NatsServer::start(&[]);
    let dir = TempDir::new("chain");
    let a = host(&nats, &dir, "a", &["ledger"]);
    let b = host(&nats, &dir, "b", &["ledger"]);
    a.join_cluster(cluster(&nats, "a")).await.expect("a joins");
    b.join_cluster(cluster(&nats, "b")).await.expect("b joins");
    for (system, path) in [
        (&a, "/user/sink"),
        (&b, "/user/relay"),
        (&a, "/user/source"),
    ] {
        system.claim(path).await.expect("claim");
    }
    routed(&[&b], "/user/sink", "a").await;
    routed(&[&a], "/user/relay", "b").await;
    a.spawn("sink", "ledger", b"tally").unwrap();
    b.spawn("relay", "ledger", b"relay /user/sink").unwrap();
    a.spawn(
        "source",
        "ledger",
        format!("source {N} /user/relay").as_bytes(),
    )
    .unwrap();
    let sink = wait_until_async(Duration::from_secs(60), || async {
        let state: LedgerState = ask_as(&a, "/user/sink", &Ledger::Query).await;
        (state.count == N).then_some(state)
    })
    .await;
    assert_eq!(sink.dups, 0, "no count reached the sink's guest twice");
    assert_eq!(sink.sum, N * (N + 1) / 2, "every count exactly once");
    let relay: LedgerState = ask_as(&a, "/user/relay", &Ledger::Query).await;
    assert_eq!(relay.count, N, "every increment crossed to b once");
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_due_while_its_node_is_gone_fires_on_another_node() {
    let nats = NatsServer::start(&[]);
    let dir = TempDir::new("reminder");
    // The test is node t, with the probe the entity reports to; it hosts no entity kind.
    let t = ActorSystem::new(HostConfig::new()).unwrap();
    t.join_cluster(cluster(&nats, "t")).await.expect("t joins");
    let mut fired = t.probe("fired").unwrap();
    let mut nodes = Vec::new();
    for name in ["a", "b"] {
        let node = host(&nats, &dir, name, &["reminder"]);
        node.register_entity("alarms", "reminder", EntityOptions::default())
            .unwrap();
        node.join_cluster(cluster(&nats, name)).await.expect("join");
        nodes.push(node);
    }
    wait_until(|| t.cluster_nodes() == ["a", "b", "t"]).await;

    // The entity reports to the probe: `~` stands for `/` in its id.
    let alarm = "/user/alarms/~system~nodes~t~system~fired";
    tell(
        &t,
        alarm,
        &Remind::Arm {
            tag: 7,
            delay_ms: 2500,
        },
    );
    report_labelled(&mut fired, "armed").await;
    let home = ["a", "b"]
        .into_iter()
        .position(|n| {
            nodes[if n == "a" { 0 } else { 1 }]
                .tree()
                .iter()
                .any(|a| a.address.path.as_str() == alarm)
        })
        .expect("the entity lives on a or b");
    // Its node goes before the reminder is due.
    let gone = nodes.remove(home);
    gone.shutdown().await.unwrap();
    let report = report_labelled(&mut fired, "fired").await;
    assert_eq!(report.value, 7, "fired by the other node");
    assert!(
        fired
            .recv_timeout(Duration::from_millis(1500))
            .await
            .is_none(),
        "exactly once"
    );
    let survivor = &nodes[0];
    assert!(
        survivor
            .tree()
            .iter()
            .any(|a| a.address.path.as_str() == alarm)
    );
    survivor.shutdown().await.unwrap();
    t.shutdown().await.ok();
}

/// The image of an entity passivated as an image goes to the JetStream store, not a host's
/// file: another host, with a database file of its own, wakes the entity with its in-memory
/// state (no persistence code) and takes the image, so a third wakes it afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entity_passivated_as_an_image_wakes_with_its_state_on_another_host() {
    let nats = NatsServer::start(&[]);
    let dir = TempDir::new("images");
    let options = |after| EntityOptions {
        passivate_after: Some(after),
        ..EntityOptions::default()
    };
    let versioned = |system: &ActorSystem| {
        mote_tests::deploy_with_snapshots(system, "versioned", "1", "versioned_v1");
    };
    let state = async |system: &ActorSystem| -> VersionedState {
        ask_as(system, "/user/counters/7", &Versioned::Get).await
    };
    {
        let a = host(&nats, &dir, "a", &[]);
        versioned(&a);
        a.register_entity("counters", "versioned", options(Duration::from_millis(100)))
            .unwrap();
        for n in 0..30 {
            tell(&a, "/user/counters/7", &Versioned::Add { stream: 0, n });
        }
        assert_eq!(state(&a).await.count, 30);
        let first = a.lookup("/user/counters/7").expect("live");
        wait_until(|| a.lookup("/user/counters/7").is_none()).await;
        mote_tests::terminated(&a, &first).await;
        a.shutdown().await.unwrap();
    }
    let b = host(&nats, &dir, "b", &[]);
    versioned(&b);
    b.register_entity("counters", "versioned", options(Duration::from_secs(60)))
        .unwrap();
    let back = state(&b).await;
    assert_eq!(
        (back.count, back.sum, back.out_of_order),
        (30, 29 * 30 / 2, 0),
        "woken on b from the image a stored"
    );
    b.shutdown().await.unwrap();
    let c = host(&nats, &dir, "c", &[]);
    versioned(&c);
    c.register_entity("counters", "versioned", options(Duration::from_secs(60)))
        .unwrap();
    assert_eq!(
        state(&c).await.count,
        0,
        "b took the image: c wakes the entity afresh"
    );
    c.shutdown().await.unwrap();
}
