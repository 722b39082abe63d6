//! Durable state in JetStream across `mote run` processes (`[storage] backend = "jetstream"`)
//! and a real nats-server: a durable chain spread over three nodes counts every message exactly
//! once while random nodes are killed with SIGKILL and restarted, an entity's state follows it
//! to another node within seconds, and a paused node (SIGSTOP) whose entity moved meanwhile has
//! its late commit refused when it resumes. The test itself joins as node `t`.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Node, ONE_CLUSTER, TOKEN, config, example, find, scratch, start};
use mote_example_protocol::{Entity, EntityValue, Ledger, LedgerState};
use mote_guest::Message;
use mote_host::{ActorSystem, CLUSTER_TOPIC, HostConfig, NODE_DOWN_KIND, NODE_UP_KIND, Probe};
use mote_tests::nats::NatsServer;
use mote_tests::{next, tell, wait_until_async};

/// The manifest's common part: fast failure detection, JetStream storage, and the entity kind
/// `counters`.
fn manifest(actors: &str) -> String {
    format!(
        r#"[cluster]
heartbeat_ms = 200
failure_timeout_ms = 1000

[storage]
backend = "jetstream"

[[module]]
name = "ledger"
path = {ledger:?}

[[module]]
name = "entity"
path = {entity:?}

[[entity]]
kind = "counters"
module = "entity"
{actors}"#,
        ledger = example("ledger"),
        entity = example("entity"),
    )
}

/// Node `t`: the test, joined to the cluster, hosting nothing.
async fn test_node(nats: &NatsServer) -> ActorSystem {
    let mut t_config = HostConfig::new();
    t_config.module_cache(mote_tests::module_cache());
    let t = ActorSystem::new(t_config).unwrap();
    t.join_cluster(config(nats, "t")).await.expect("t joins");
    t
}

/// `msg` asked of `to`, or `None` if it could not be answered now (its node is down, say).
async fn try_ask<M: Message, R: Message>(t: &ActorSystem, to: &str, msg: &M) -> Option<R> {
    let body = mote_guest::encode(msg).ok()?;
    let reply = t
        .ask(to, M::KIND, body, Duration::from_millis(1500))
        .await
        .ok()?;
    mote_guest::decode(&reply.kind, &reply.body).ok()
}

async fn next_kind(events: &mut Probe, kind: &str) -> String {
    loop {
        let event = next(events).await;
        if event.kind == kind {
            return String::from_utf8(event.body).unwrap();
        }
    }
}

/// A small xorshift generator: the kill schedule, reproducible from the seed it prints.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_chain_over_three_nodes_counts_exactly_once_through_random_kill_9s() {
    const N: u64 = 20_000;
    /// Kills that must land while the chain runs; at most twice as many rounds.
    const KILLS: usize = 10;
    let _one = ONE_CLUSTER.lock().await;
    let nats = NatsServer::start(&["--auth", TOKEN]);
    let dir = scratch("durable-chain");
    let actors = format!(
        r#"
[[actor]]
path = "/user/sink"
module = "ledger"
init = "tally"
node = "c"

[[actor]]
path = "/user/relay"
module = "ledger"
init = "relay /user/sink"
node = "b"

[[actor]]
path = "/user/source"
module = "ledger"
init = "source {N} /user/relay"
node = "a"
"#
    );
    std::fs::write(dir.join("app.toml"), manifest(&actors)).unwrap();
    let t = test_node(&nats).await;
    let names = ["a", "b", "c"];
    let mut nodes: Vec<Node> = names.iter().map(|n| start(&dir, &nats, n)).collect();
    mote_tests::wait_until(|| t.cluster_nodes() == ["a", "b", "c", "t"]).await;

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("kill schedule seed: {seed}");
    let mut rng = Rng(seed);
    let (mut mid_chain, mut total, mut longest) = (0, 0u64, Duration::ZERO);
    for round in 0..KILLS * 2 {
        if mid_chain >= KILLS {
            break;
        }
        // An entity somewhere: one more Add, seen committed by a Get that says so.
        let entity = "/user/counters/k";
        tell(&t, entity, &Entity::Add(1));
        total += 1;
        let value: EntityValue = wait_until_async(Duration::from_secs(30), || async {
            try_ask::<_, EntityValue>(&t, entity, &Entity::Get)
                .await
                .filter(|v| v.total >= total)
        })
        .await;
        assert_eq!(value.total, total, "the entity's adds, exactly once");
        let (entity_node, _) = find(&nats, entity).await;

        // A random point of the chain: a random pause, then a random node.
        tokio::time::sleep(Duration::from_millis(100 + rng.below(700))).await;
        let sink: Option<LedgerState> = try_ask(&t, "/user/sink", &Ledger::Query).await;
        if sink.as_ref().is_none_or(|s| s.count < N) {
            mid_chain += 1;
        }
        let victim = rng.below(3) as usize;
        let killed = Instant::now();
        nodes[victim].child.kill().unwrap();
        nodes[victim].child.wait().unwrap();
        println!(
            "round {round}: killed {} (sink at {:?})",
            names[victim],
            sink.map(|s| s.count)
        );
        if entity_node == names[victim] {
            // Node death to the entity answering elsewhere, with its state.
            let moved: EntityValue = wait_until_async(Duration::from_secs(30), || async {
                try_ask::<_, EntityValue>(&t, entity, &Entity::Get).await
            })
            .await;
            let took = killed.elapsed();
            assert_eq!(moved.total, total, "the entity's state came with it");
            println!("round {round}: the entity answered elsewhere after {took:?}");
            longest = longest.max(took);
        }
        nodes[victim] = start(&dir, &nats, names[victim]);
    }
    // The rest of the chain runs after the kills: on 2 busy cores a debug build commits a
    // few hundred steps a second, so 16,000 left take about a minute.
    let after_kills = Instant::now();
    let deadline = after_kills + Duration::from_secs(240);
    let sink = loop {
        let sink: Option<LedgerState> = try_ask(&t, "/user/sink", &Ledger::Query).await;
        if let Some(done) = sink.as_ref().filter(|s| s.count >= N) {
            break done.clone();
        }
        if Instant::now() > deadline {
            let relay: Option<LedgerState> = try_ask(&t, "/user/relay", &Ledger::Query).await;
            let source: Option<LedgerState> = try_ask(&t, "/user/source", &Ledger::Query).await;
            panic!("the chain stalled: source {source:?}, relay {relay:?}, sink {sink:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "longest entity failover: {longest:?}; kills while the chain ran: {mid_chain}; \
         the chain ended {:?} after the last restart",
        after_kills.elapsed()
    );
    assert!(
        mid_chain >= KILLS,
        "only {mid_chain} kills landed while the chain ran"
    );
    assert_eq!(sink.count, N, "every count reached the sink");
    assert_eq!(sink.dups, 0, "no count reached the sink's guest twice");
    assert_eq!(sink.sum, N * (N + 1) / 2, "each count exactly once");
    let relay: LedgerState = wait_until_async(Duration::from_secs(30), || async {
        try_ask::<_, LedgerState>(&t, "/user/relay", &Ledger::Query).await
    })
    .await;
    assert_eq!(relay.count, N, "every increment reached the relay once");
    let source: LedgerState = wait_until_async(Duration::from_secs(30), || async {
        try_ask::<_, LedgerState>(&t, "/user/source", &Ledger::Query).await
    })
    .await;
    assert_eq!(source.count, N, "the source sent each increment once");
    drop(nodes);
    t.shutdown().await.ok();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_nodes_late_commit_is_refused_after_its_entity_moved() {
    let _one = ONE_CLUSTER.lock().await;
    let nats = NatsServer::start(&["--auth", TOKEN]);
    let dir = scratch("zombie");
    std::fs::write(dir.join("app.toml"), manifest("")).unwrap();
    let t = test_node(&nats).await;
    let mut events = t.subscribe(CLUSTER_TOPIC).unwrap();
    let nodes = [start(&dir, &nats, "a"), start(&dir, &nats, "b")];
    mote_tests::wait_until(|| t.cluster_nodes() == ["a", "b", "t"]).await;

    let entity = "/user/counters/z";
    tell(&t, entity, &Entity::Add(5));
    let value: EntityValue = wait_until_async(Duration::from_secs(30), || async {
        try_ask::<_, EntityValue>(&t, entity, &Entity::Get)
            .await
            .filter(|v| v.total == 5)
    })
    .await;
    assert_eq!(value.activations, 1);
    let (zombie, _) = find(&nats, entity).await;
    let paused = &nodes[if zombie == "a" { 0 } else { 1 }];

    let log = dir.join(format!("{zombie}.log"));
    let logged = |line: &'static str| {
        let log = log.clone();
        async move {
            wait_until_async(Duration::from_secs(30), || async {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                text.lines().find(|l| l.contains(line)).map(str::to_owned)
            })
            .await
        }
    };

    // Pause the entity's node in the middle of a step: a slow Add, busy for 3 s.
    tell(&t, entity, &Entity::SlowAdd { k: 100, ms: 3000 });
    logged("slow add of 100 begins").await;
    let pid = paused.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let paused_at = Instant::now();

    // Taken for down, its entity moves: it answers elsewhere with the state it had.
    assert_eq!(next_kind(&mut events, NODE_DOWN_KIND).await, zombie);
    let moved: EntityValue = wait_until_async(Duration::from_secs(30), || async {
        try_ask::<_, EntityValue>(&t, entity, &Entity::Get).await
    })
    .await;
    println!(
        "the paused node's entity answered elsewhere after {:?}",
        paused_at.elapsed()
    );
    assert_eq!(moved.total, 5, "the state it had");
    tell(&t, entity, &Entity::Add(1));
    let added: EntityValue = wait_until_async(Duration::from_secs(30), || async {
        try_ask::<_, EntityValue>(&t, entity, &Entity::Get)
            .await
            .filter(|v| v.total >= 6)
    })
    .await;
    assert_eq!(added.total, 6, "5, then 1 on the new node");
    let (now_on, _) = find(&nats, entity).await;
    assert_ne!(now_on, zombie);

    // Resumed, the zombie ends its step and tries to commit it: refused.
    assert!(
        Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );
    println!("the zombie: {}", logged("commit refused").await);
    assert_eq!(next_kind(&mut events, NODE_UP_KIND).await, zombie);

    // Its 100 never landed; the new writer goes on.
    tell(&t, entity, &Entity::Add(1));
    let after: EntityValue = wait_until_async(Duration::from_secs(30), || async {
        try_ask::<_, EntityValue>(&t, entity, &Entity::Get)
            .await
            .filter(|v| v.total >= 7)
    })
    .await;
    assert_eq!(after.total, 7, "the zombie's commit was refused");
    drop(nodes);
    t.shutdown().await.ok();
    let _ = std::fs::remove_dir_all(&dir);
}
