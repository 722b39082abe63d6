//! Three `mote run --cluster` processes and a real nats-server (token auth) on loopback: one
//! address space across the processes, order under load, topics and groups, death watch and
//! entities across nodes, a node killed with SIGKILL, a node rejoining under its name, a
//! duplicate name refused and a clean leave. The test itself joins as a fourth node, `t`, with probes that the
//! processes' actors report to (`/system/nodes/t/system/<probe>`).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{
    ONE_CLUSTER, TOKEN, cluster_tree, config, example, find, mote_run, scratch, start,
};

use mote_example_protocol::{Counter, Entity, EntityValue, Seq, Watch};
use mote_host::{
    ActorSystem, CLUSTER_TOPIC, DeadLetterReason, HostConfig, NODE_DOWN_KIND, NODE_UP_KIND, Probe,
};
use mote_tests::nats::NatsServer;
use mote_tests::{DEADLINE, ask_as, next, next_report, report_labelled, tell};

/// Tells the publisher at `path`, on another node, `Seq { n }` for n = 0, 1, ... until it
/// reports (at `reports`) that one reached `members`: subscriptions and group members reach
/// other nodes with heartbeats. Returns that n.
async fn send_until_reached(t: &ActorSystem, reports: &mut Probe, path: &str, members: u64) -> u32 {
    let deadline = Instant::now() + DEADLINE;
    for n in 0.. {
        tell(t, path, &Seq { stream: 0, n });
        let reached = report_labelled(reports, "reached").await.value;
        if reached == members {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "{path} reached {reached} of {members}"
        );
    }
    unreachable!("u32 ran out")
}

/// The senders and receivers of the next `count` reports at `probe` of the value `n`, sorted;
/// reports of other values (earlier rounds) are skipped.
async fn reports_of(probe: &mut Probe, n: u32, count: usize) -> Vec<(String, String)> {
    let mut got = Vec::new();
    while got.len() < count {
        let report = next_report(probe).await;
        if report.value == u64::from(n) {
            got.push((report.label, report.from));
        }
    }
    got.sort();
    got
}

async fn next_kind(events: &mut Probe, kind: &str) -> String {
    loop {
        let event = next(events).await;
        if event.kind == kind {
            return String::from_utf8(event.body).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_share_one_address_space_and_survive_a_killed_node() {
    let _one = ONE_CLUSTER.lock().await;
    let nats = NatsServer::start(&["--auth", TOKEN]);
    let dir = scratch("cluster");
    let manifest = format!(
        r#"[cluster]
heartbeat_ms = 200
failure_timeout_ms = 1000

[[module]]
name = "counter"
path = {counter:?}

[[module]]
name = "watcher"
path = {watcher:?}

[[module]]
name = "entity"
path = {entity:?}

[[module]]
name = "sequence"
path = {sequence:?}

[[module]]
name = "mover"
path = {counter:?}
snapshot = true

[[module]]
name = "subscriber"
path = {subscriber:?}

[[module]]
name = "publisher"
path = {publisher:?}

[[entity]]
kind = "carts"
module = "entity"

[[actor]]
path = "/user/count"
module = "counter"
node = "b"

[[actor]]
path = "/user/victim"
module = "counter"
node = "b"

[[actor]]
path = "/user/mover"
module = "mover"
node = "a"

[[actor]]
path = "/user/watcher"
module = "watcher"
init = "/system/nodes/t/system/watch"
node = "a"

[[actor]]
path = "/user/check"
module = "sequence"
init = "check /system/nodes/t/system/order 1 50000"
node = "c"
mailbox_capacity = 100000

[[actor]]
path = "/user/send"
module = "sequence"
init = "send /user/check 0 50000"
node = "a"

[[actor]]
path = "/user/news-b"
module = "subscriber"
init = "news /system/nodes/t/system/news"
node = "b"

[[actor]]
path = "/user/news-c"
module = "subscriber"
init = "news /system/nodes/t/system/news"
node = "c"

[[actor]]
path = "/user/worker"
module = "subscriber"
init = "group:workers /system/nodes/t/system/news"
node = "c"

[[actor]]
path = "/user/announce"
module = "publisher"
init = "news 0 /system/nodes/t/system/published stay"
node = "a"

[[actor]]
path = "/user/dispatch"
module = "publisher"
init = "group:workers 0 /system/nodes/t/system/published stay"
node = "a"
"#,
        counter = example("counter"),
        watcher = example("watcher"),
        entity = example("entity"),
        sequence = example("sequence"),
        subscriber = example("subscriber"),
        publisher = example("publisher"),
    );
    std::fs::write(dir.join("app.toml"), manifest).unwrap();

    // Without the token the server refuses: cluster traffic is authenticated.
    let mut anonymous = config(&nats, "t");
    anonymous.token = None;
    let refused = ActorSystem::new(HostConfig::new())
        .unwrap()
        .join_cluster(anonymous)
        .await;
    assert!(
        matches!(refused, Err(mote_host::ClusterError::Connect { .. })),
        "{refused:?}"
    );

    // The test is node t, with probes the processes' actors report to.
    let mut t_config = HostConfig::new();
    t_config.module_cache(mote_tests::module_cache());
    // t hosts no entity kind: carts are placed on a, b and c only.
    let t = ActorSystem::new(t_config).unwrap();
    t.join_cluster(config(&nats, "t")).await.expect("t joins");
    let mut watch = t.probe("watch").unwrap();
    let mut order = t.probe("order").unwrap();
    let mut news = t.probe("news").unwrap();
    let mut published = t.probe("published").unwrap();
    let mut events = t.subscribe(CLUSTER_TOPIC).unwrap();
    let mut letters = t.subscribe_dead_letters();

    let c = start(&dir, &nats, "c");
    let mut b = start(&dir, &nats, "b");
    let a = start(&dir, &nats, "a");
    mote_tests::wait_until(|| t.cluster_nodes() == ["a", "b", "c", "t"]).await;

    // 50,000 messages from a to c, in order.
    assert_eq!(report_labelled(&mut order, "in_order").await.value, 50000);
    assert_eq!(report_labelled(&mut order, "out_of_order").await.value, 0);

    // mote tree --cluster lists every node's actors with the node's name.
    let out = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(["tree", "--cluster", &nats.url, "--cluster-token", TOKEN])
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in ["/user/count", "/user/victim"] {
        assert!(
            tree.lines()
                .any(|l| l.contains(line) && l.ends_with("node=b")),
            "{tree}"
        );
    }
    assert!(
        tree.lines()
            .any(|l| l.contains("/user/watcher") && l.ends_with("node=a")),
        "{tree}"
    );

    // Tell and ask across processes: from node a's control socket to the counter on b.
    tell(&t, "/user/count", &Counter::Add(3));
    let value: Counter = ask_as(&t, "/user/count", &Counter::Get).await;
    assert_eq!(value, Counter::Value(3));
    let asked = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(["ask", "/user/count", <Counter as mote_guest::Message>::KIND])
        .args(["--hex", "01", "--control"])
        .arg(&a.socket)
        .output()
        .unwrap();
    let reply = String::from_utf8_lossy(&asked.stdout);
    assert!(
        asked.status.success() && reply.contains("kind=Counter body=0203"),
        "Counter::Value(3) in postcard: {reply}{}",
        String::from_utf8_lossy(&asked.stderr)
    );

    // Pub/sub and groups across processes: a publish on a reaches the subscribers on b and c,
    // and a tell-group on a reaches the member on c.
    let n = send_until_reached(&t, &mut published, "/user/announce", 2).await;
    assert_eq!(
        reports_of(&mut news, n, 2).await,
        [
            ("/user/announce".to_owned(), "/user/news-b".to_owned()),
            ("/user/announce".to_owned(), "/user/news-c".to_owned())
        ]
    );
    let n = send_until_reached(&t, &mut published, "/user/dispatch", 1).await;
    assert_eq!(
        reports_of(&mut news, n, 1).await,
        [("/user/dispatch".to_owned(), "/user/worker".to_owned())]
    );

    // mote move: a counter of a continues on c with its count and address.
    tell(&t, "/user/mover", &Counter::Add(4));
    let value: Counter = ask_as(&t, "/user/mover", &Counter::Get).await;
    assert_eq!(value, Counter::Value(4));
    let (_, before) = find(&nats, "/user/mover").await;
    let moved = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(["move", "/user/mover", "--to", "c", "--control"])
        .arg(&a.socket)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&moved.stdout);
    assert!(
        moved.status.success() && said.contains("moved to node c"),
        "{said}{}",
        String::from_utf8_lossy(&moved.stderr)
    );
    tell(&t, "/user/mover", &Counter::Add(1));
    let value: Counter = ask_as(&t, "/user/mover", &Counter::Get).await;
    assert_eq!(value, Counter::Value(5), "its count went with it");
    // The source frees the path once it has forwarded what it held: then only c lists it.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (node, incarnation) = find(&nats, "/user/mover").await;
        if node == "c" {
            assert_eq!(incarnation, before, "the same incarnation");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/user/mover is still listed on {node}"
        );
    }

    // The watcher on a watches two actors of b; entities spread over a, b and c.
    let mut watched = Vec::new();
    for path in ["/user/victim", "/user/count"] {
        let (node, incarnation) = find(&nats, path).await;
        assert_eq!(node, "b");
        tell(
            &t,
            "/user/watcher",
            &Watch::Watch {
                path: path.into(),
                incarnation,
            },
        );
        watched.push(incarnation);
    }
    watched.sort();
    let carts: Vec<String> = (0..16).map(|i| format!("/user/carts/{i}")).collect();
    for cart in &carts {
        tell(&t, cart, &Entity::Add(1));
        let value: EntityValue = ask_as(&t, cart, &Entity::Get).await;
        assert_eq!((value.total, value.activations), (1, 1), "{cart}");
    }
    let mut on_b = Vec::new();
    for (node, actors) in cluster_tree(&nats).await {
        for actor in actors.iter().filter(|a| a.path.starts_with("/user/carts/")) {
            if node == "b" {
                on_b.push(actor.path.clone());
            }
        }
    }
    assert!(!on_b.is_empty(), "some carts live on b");

    // kill -9 b: the watcher hears once of each, the others hear b down, b's carts re-home.
    let killed = Instant::now();
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    assert_eq!(next_kind(&mut events, NODE_DOWN_KIND).await, "b");
    let mut told = Vec::new();
    for _ in &watched {
        told.push(report_labelled(&mut watch, "terminated").await.value);
    }
    told.sort();
    assert_eq!(told, watched, "one terminated for each watched actor of b");
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "detected within seconds"
    );
    for cart in &on_b {
        let value: EntityValue = ask_as(&t, cart, &Entity::Get).await;
        assert_eq!(
            value.activations, 1,
            "{cart} activated again on a live node"
        );
        let (node, _) = find(&nats, cart).await;
        assert!(node == "a" || node == "c", "{cart} on {node}");
    }
    // A send to b's path is a dead letter that says why.
    t.tell("/user/count", "k", Vec::new()).unwrap();
    let letter = loop {
        let letter = tokio::time::timeout(DEADLINE, letters.recv())
            .await
            .unwrap()
            .unwrap();
        if letter.target == "/user/count" {
            break letter;
        }
    };
    assert_eq!(letter.reason, DeadLetterReason::NodeDown);
    assert!(
        watch
            .recv_timeout(Duration::from_millis(1500))
            .await
            .is_none(),
        "exactly one terminated each"
    );

    // b rejoins under its name and takes its actors back.
    let _b = start(&dir, &nats, "b");
    assert_eq!(next_kind(&mut events, NODE_UP_KIND).await, "b");
    let value: Counter = ask_as(&t, "/user/count", &Counter::Get).await;
    assert_eq!(
        value,
        Counter::Value(0),
        "a fresh counter on the rejoined b"
    );

    // A second node named c is refused while c lives.
    let duplicate = mote_run(&dir, &nats, "c", "c2").status().unwrap();
    assert!(!duplicate.success());
    let err = std::fs::read_to_string(dir.join("c2.log")).unwrap();
    assert!(err.contains("the node name `c` is taken"), "{err}");

    // c leaves cleanly on SIGTERM: the others hear it at once, not after the timeout.
    let mut c = c;
    let left = Instant::now();
    Command::new("kill")
        .args(["-TERM", &c.child.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(next_kind(&mut events, NODE_DOWN_KIND).await, "c");
    assert!(left.elapsed() < Duration::from_secs(5));
    assert!(c.child.wait().unwrap().success(), "c exits cleanly");
    drop(a);
    t.shutdown().await.ok();
    let _ = std::fs::remove_dir_all(&dir);
}
