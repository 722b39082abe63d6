//! Modules across a cluster, on a real nats-server with nodes in this process: a version
//! deployed on one node is deployed on every node (and on one that joins later, or refused
//! there with a reason), and an upgrade of a module rolls across the nodes with one report,
//! its canary stage first.

use std::sync::Arc;
use std::time::Duration;

use mote_example_protocol::{Counter, Versioned, VersionedState};
use mote_host::{
    ActorSystem, Canary, CanaryOutcome, ClusterConfig, Directive, HostConfig, MODULE_DEPLOYED_KIND,
    MODULE_REFUSED_KIND, MODULES_TOPIC, NodeUpgradeError, RollbackReason, Strategy, UpgradeOptions,
};
use mote_tests::nats::NatsServer;
use mote_tests::{ask_as, module_cache, next, system_configured, tell, wait_until};

/// Fast beats, so that nodes see each other within a second.
fn config(nats: &NatsServer, node: &str) -> ClusterConfig {
    let mut config = ClusterConfig::new(nats.url.clone(), node);
    config.heartbeat = Duration::from_millis(200);
    config.failure_timeout = Duration::from_millis(800);
    config
}

/// A host whose guardian resumes a failed top-level actor (the message is dropped, the state
/// kept), with `versions` of `versioned` deployed (the first is current).
fn versioned_host(versions: &[&str]) -> ActorSystem {
    let mut config = HostConfig::new();
    config.root_strategy(Strategy {
        directive: Directive::Resume,
        ..Strategy::default()
    });
    config.module_cache(module_cache());
    let system = ActorSystem::new(config).expect("system");
    for v in versions {
        let path = mote_test_programs::path(&format!("versioned_v{v}")).expect("built");
        (system.deploy_file_version("versioned", v, &path)).expect("deploy");
    }
    system
}

async fn join(system: &ActorSystem, nats: &NatsServer, name: &str) {
    system
        .join_cluster(config(nats, name))
        .await
        .unwrap_or_else(|e| panic!("node {name} joins: {}", mote_host::chain(&e)));
}

/// Spawns `versioned` actors at `names` on `system`, each with 5 `Add`s counted.
async fn spawn_counted(system: &ActorSystem, names: &[&str]) {
    for name in names {
        let path = format!("/user/{name}");
        system.claim(&path).await.expect("claim");
        system.spawn(name, "versioned", b"").expect("spawn");
        add(system, name, 0..5);
        assert_eq!(state(system, name).await.count, 5);
    }
}

/// `Add`s to `/user/<name>` on a stream of its own.
fn add(system: &ActorSystem, name: &str, ns: std::ops::Range<u32>) {
    let stream = name.bytes().map(u32::from).sum();
    for n in ns {
        tell(
            system,
            &format!("/user/{name}"),
            &Versioned::Add { stream, n },
        );
    }
}

async fn state(system: &ActorSystem, name: &str) -> VersionedState {
    ask_as::<Versioned, VersionedState>(system, &format!("/user/{name}"), &Versioned::Get).await
}

/// The version of `name` new actors get on `system`.
fn current(system: &ActorSystem, name: &str) -> Option<String> {
    (system.module_list().into_iter())
        .find(|m| m.name == name && m.current)
        .map(|m| m.version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_deployed_on_one_node_is_deployed_on_every_node_and_one_that_joins_later() {
    let nats = NatsServer::start(&[]);
    // a deployed `counter` before it joined: joining stores it in the cluster.
    let a = system_configured(HostConfig::new(), &["counter"]);
    join(&a, &nats, "a").await;
    let b = system_configured(HostConfig::new(), &[]);
    let mut b_hears = b.subscribe(MODULES_TOPIC).expect("modules topic");
    join(&b, &nats, "b").await;
    let hash = |s: &ActorSystem, name: &str| {
        (s.module_list().into_iter())
            .find(|m| m.name == name)
            .map(|m| m.hash)
    };
    assert!(hash(&a, "counter").is_some());
    assert_eq!(
        hash(&b, "counter"),
        hash(&a, "counter"),
        "fetched as it joined"
    );
    b.claim("/user/count").await.expect("claim");
    b.spawn("count", "counter", b"")
        .expect("counter spawns on b");
    tell(&b, "/user/count", &Counter::Add(3));
    let value: Counter = ask_as(&b, "/user/count", &Counter::Get).await;
    assert_eq!(value, Counter::Value(3));
    let deployed = next(&mut b_hears).await;
    assert_eq!(
        (deployed.kind.as_str(), deployed.body.as_slice()),
        (MODULE_DEPLOYED_KIND, b"counter@0".as_slice())
    );

    // Deployed on a while both are up: b hears of it and has it.
    let path = mote_test_programs::path("versioned_v1").expect("built");
    a.deploy_file_version("versioned", "1", &path)
        .expect("deploy on a");
    let deployed = next(&mut b_hears).await;
    assert_eq!(
        (deployed.kind.as_str(), deployed.body.as_slice()),
        (MODULE_DEPLOYED_KIND, b"versioned@1".as_slice())
    );
    spawn_counted(&b, &["v"]).await;
    assert_eq!(state(&b, "v").await.version, 1);

    // A node that takes no module over 1 KiB refuses both, says why, and still joins.
    let mut small = HostConfig::new();
    small.max_module_bytes(1024);
    let r = system_configured(small, &[]);
    let mut r_hears = r.subscribe(MODULES_TOPIC).expect("modules topic");
    join(&r, &nats, "r").await;
    let refused = next(&mut r_hears).await;
    let why = String::from_utf8_lossy(&refused.body).into_owned();
    assert_eq!(refused.kind, MODULE_REFUSED_KIND, "{why}");
    assert!(why.contains("over this host's limit of 1024"), "{why}");
    assert!(r.modules().is_empty());
    assert_eq!(r.cluster_stats().map(|s| s.modules_refused), Some(2));

    // A node that joins later has both when its join returns.
    let c = system_configured(HostConfig::new(), &[]);
    join(&c, &nats, "c").await;
    assert_eq!(c.modules(), ["counter", "versioned"]);
    spawn_counted(&c, &["w"]).await;

    // Stored once, by a; nobody stored what it fetched again.
    let figures = |s: &ActorSystem| {
        let stats = s.cluster_stats().expect("a node");
        (stats.modules_shared, stats.modules_fetched)
    };
    assert_eq!(figures(&a), (2, 0));
    assert_eq!(figures(&b), (0, 2));
    assert_eq!(figures(&c), (0, 2));
    for system in [c, r, b, a] {
        system.shutdown().await.ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_rolls_across_the_nodes_with_one_report_and_the_actors_keep_their_state() {
    let nats = NatsServer::start(&[]);
    let a = versioned_host(&["1", "2"]);
    join(&a, &nats, "a").await;
    let b = versioned_host(&[]);
    join(&b, &nats, "b").await;
    wait_until(|| a.cluster_nodes().len() == 2 && b.cluster_nodes().len() == 2).await;
    assert_eq!(current(&b, "versioned").as_deref(), Some("1"), "as on a");
    spawn_counted(&a, &["a0", "a1"]).await;
    spawn_counted(&b, &["b0", "b1"]).await;

    let (tx, mut steps) = tokio::sync::mpsc::unbounded_channel();
    let report = a
        .upgrade_with("versioned", "2", UpgradeOptions::default(), Some(tx))
        .await
        .expect("upgrade");
    let paths: Vec<&str> = report.upgraded.iter().map(|u| u.path.as_str()).collect();
    assert_eq!(paths, ["/user/a0", "/user/a1", "/user/b0", "/user/b1"]);
    assert!(report.upgraded.iter().all(|u| u.migrated), "{report:?}");
    assert!(report.failed.is_empty() && report.current, "{report:?}");
    let nodes: Vec<(&str, Vec<&str>, bool)> = (report.nodes.iter())
        .map(|n| {
            let actors = n.actors.iter().map(String::as_str).collect();
            (n.node.as_str(), actors, n.error.is_none())
        })
        .collect();
    assert_eq!(
        nodes,
        [
            ("a", vec!["/user/a0", "/user/a1"], true),
            ("b", vec!["/user/b0", "/user/b1"], true)
        ]
    );
    let mut last = None;
    while let Ok(step) = steps.try_recv() {
        last = Some(step);
    }
    let last = last.expect("progress");
    assert_eq!((last.done, last.total, last.failed), (4, 4, 0), "summed");

    for (system, name) in [(&a, "a0"), (&a, "a1"), (&b, "b0"), (&b, "b1")] {
        let s = state(system, name).await;
        assert_eq!((s.version, s.count, s.out_of_order), (2, 5, 0), "{name}");
        assert_eq!(s.migrated_from, "1", "{name}");
    }
    // 2 is current on every node: new actors get it.
    assert_eq!(current(&a, "versioned").as_deref(), Some("2"));
    wait_until(|| current(&b, "versioned").as_deref() == Some("2")).await;
    spawn_counted(&b, &["b2"]).await;
    assert_eq!(state(&b, "b2").await.version, 2);

    // One actor on another node: upgraded there, back to 1.
    let report = a.upgrade("/user/b0", "1").await.expect("one actor");
    assert_eq!(report.module, "versioned");
    assert_eq!(report.upgraded.len(), 1, "{report:?}");
    assert_eq!(report.nodes[0].node, "b");
    assert_eq!(state(&b, "b0").await.version, 1);
    for system in [b, a] {
        system.shutdown().await.ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_fails_rolls_back_on_its_node_and_no_other_node_is_asked() {
    let nats = NatsServer::start(&[]);
    // v4 migrates but fails every `Add`.
    let a = Arc::new(versioned_host(&["1", "4"]));
    join(&a, &nats, "a").await;
    let b = versioned_host(&[]);
    join(&b, &nats, "b").await;
    wait_until(|| a.cluster_nodes().len() == 2 && b.cluster_nodes().len() == 2).await;
    spawn_counted(&a, &["a0", "a1"]).await;
    spawn_counted(&b, &["b0", "b1"]).await;

    let mut progress = a.subscribe_progress();
    let upgrade = {
        let a = a.clone();
        tokio::spawn(async move {
            let options = UpgradeOptions {
                canary: Some(Canary::new(1, Duration::from_secs(2))),
                ..UpgradeOptions::default()
            };
            a.upgrade_with("versioned", "4", options, None).await
        })
    };
    mote_tests::canary_watch_begins(&mut progress).await;
    for name in ["a0", "a1"] {
        add(&a, name, 5..8);
    }
    let report = upgrade.await.unwrap().expect("upgrade");
    let verdict = report.canary.clone().expect("a canary verdict");
    assert_eq!(
        verdict.outcome,
        CanaryOutcome::RolledBack(RollbackReason::MoreFailures),
        "{verdict}"
    );
    assert_eq!(
        verdict.canaries,
        ["/user/a0"],
        "on the node that got the command"
    );
    assert_eq!(verdict.rolled_back, ["/user/a0"]);
    assert_eq!(verdict.untouched, 1, "a1 stayed on 1");
    assert!(report.upgraded.is_empty() && !report.current, "{report:?}");
    assert_eq!(report.nodes.len(), 2);
    assert_eq!(
        (report.nodes[0].node.as_str(), &report.nodes[0].actors),
        ("a", &vec!["/user/a0".to_owned()])
    );
    assert_eq!(
        report.nodes[1].error,
        Some(NodeUpgradeError::NotAsked {
            node: "b".into(),
            canary_node: "a".into()
        })
    );
    // b's actors never moved and kept counting; the canary is back on 1.
    for name in ["b0", "b1"] {
        let s = state(&b, name).await;
        assert_eq!((s.version, s.migrated_from.as_str()), (1, ""), "{name}");
    }
    assert_eq!(state(&a, "a0").await.version, 1);
    assert_eq!(state(&a, "a1").await.count, 8);
    assert_eq!(current(&b, "versioned").as_deref(), Some("1"));
    b.shutdown().await.ok();
    Arc::into_inner(a).unwrap().shutdown().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_cannot_take_the_version_is_a_failure_in_the_report_and_it_is_not_current() {
    let nats = NatsServer::start(&[]);
    let a = versioned_host(&["1", "2"]);
    join(&a, &nats, "a").await;
    // b has other bytes under versioned@2 (v4's), and an actor runs them.
    let b = versioned_host(&["1"]);
    let other = mote_test_programs::path("versioned_v4").expect("built");
    (b.deploy_file_version("versioned", "2", &other)).expect("deploy on b");
    spawn_counted(&b, &["b0"]).await;
    b.upgrade("/user/b0", "2").await.expect("b0 runs b's 2");
    join(&b, &nats, "b").await;
    // The cluster's 2 is a's: b neither overwrote it nor could take it.
    assert_eq!(b.cluster_stats().map(|s| s.modules_refused), Some(2));
    wait_until(|| a.cluster_nodes().len() == 2).await;
    spawn_counted(&a, &["a0"]).await;

    let report = a.upgrade("versioned", "2").await.expect("upgrade");
    let paths: Vec<&str> = report.upgraded.iter().map(|u| u.path.as_str()).collect();
    assert_eq!(paths, ["/user/a0"], "a did its part");
    match &report.nodes[1].error {
        Some(NodeUpgradeError::Refused { node, reason }) => {
            assert_eq!(node, "b");
            assert!(
                reason.contains("versioned@2 was refused on this node"),
                "{reason}"
            );
        }
        other => panic!("b's part: {other:?}"),
    }
    assert!(!report.current, "not every node moved");
    assert_eq!(current(&a, "versioned").as_deref(), Some("1"));
    for system in [b, a] {
        system.shutdown().await.ok();
    }
}
