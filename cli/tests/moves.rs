//! A live move cut off by `kill -9`: three `mote run --cluster` processes, a real nats-server,
//! and fault points (`MOTE_FAULT`) that stop a node at a known step of the move, so the kill
//! lands there. The test joins as node `t`.
//!
//! - The target killed after the claim moved, with the source's mailbox forwarded to it: the
//!   source takes the actor back, with its state and every message it had forwarded.
//! - The source killed after the image and the move's record were stored, before it asked
//!   the target: the target finishes the move from the record.
//!
//! Either way the actor ends on exactly one node, as the same incarnation, with its state, and
//! a restarted node does not start a second copy.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Node, ONE_CLUSTER, TOKEN, cluster_tree, config, example, scratch, start_with};

use mote_example_protocol::Counter;
use mote_host::{ActorSystem, HostConfig};
use mote_tests::DEADLINE;
use mote_tests::nats::NatsServer;

/// Starts node `node` with `faults` armed (released through files in `<dir>/release-<node>`).
fn start(dir: &Path, nats: &NatsServer, node: &str, faults: &str) -> Node {
    let release = dir.join(format!("release-{node}"));
    std::fs::create_dir_all(&release).unwrap();
    start_with(
        dir,
        nats,
        node,
        &[
            ("MOTE_FAULT", Path::new(faults)),
            ("MOTE_FAULT_RELEASE", &release),
        ],
    )
}

fn log(dir: &Path, node: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{node}.log"))).unwrap_or_default()
}

/// Waits until `node`'s log has said `n` times that it stopped at `point`.
async fn stopped_at(dir: &Path, node: &str, point: &str, n: usize) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let log = log(dir, node);
        let times = log
            .lines()
            .filter(|l| l.contains("fault point reached") && l.contains(point))
            .count();
        if times >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node {node} never stopped at {point}:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Lets node `node` go on from `point`.
fn release(dir: &Path, node: &str, point: &str) {
    std::fs::write(dir.join(format!("release-{node}")).join(point), b"").unwrap();
}

/// Where `path` is listed, every node that lists it, with its incarnation and mailbox depth.
async fn listed(nats: &NatsServer, path: &str) -> Vec<(String, u64, usize)> {
    let mut found = Vec::new();
    for (node, actors) in cluster_tree(nats).await {
        for a in actors.iter().filter(|a| a.path == path) {
            found.push((node.clone(), a.incarnation, a.mailbox_depth));
        }
    }
    found
}

/// Asks the counter at `path` until it answers `want` from `node`, the one node listing it;
/// the answer it last gave otherwise.
async fn settles_on(t: &ActorSystem, nats: &NatsServer, path: &str, node: &str, want: u64) -> u64 {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let body = mote_guest::encode(&Counter::Get).unwrap();
        let answer = t
            .ask(
                path,
                <Counter as mote_guest::Message>::KIND,
                body,
                Duration::from_secs(2),
            )
            .await;
        let last = match &answer {
            Ok(reply) => {
                let value: Counter =
                    mote_guest::decode(&reply.kind, &reply.body).expect("a counter's answer");
                if value == Counter::Value(want) {
                    let where_ = listed(nats, path).await;
                    if where_.len() == 1 && where_[0].0 == node {
                        return where_[0].1;
                    }
                    format!("{value:?}, listed on {where_:?}")
                } else {
                    format!("{value:?}")
                }
            }
            Err(e) => e.to_string(),
        };
        assert!(
            Instant::now() < deadline,
            "{path} never answered {want} from {node} alone; last: {last}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn add(t: &ActorSystem, path: &str, n: u64) {
    let body = mote_guest::encode(&Counter::Add(n)).unwrap();
    t.tell(path, <Counter as mote_guest::Message>::KIND, body)
        .expect("tell");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_cut_off_by_kill_9_of_either_node_ends_on_one_node_with_its_state() {
    let _one = ONE_CLUSTER.lock().await;
    let nats = NatsServer::start(&["--auth", TOKEN]);
    let dir = scratch("moves");
    let manifest = format!(
        r#"[cluster]
heartbeat_ms = 200
failure_timeout_ms = 1000

[[module]]
name = "mover"
path = {counter:?}
snapshot = true

[[actor]]
path = "/user/mover"
module = "mover"
node = "a"
"#,
        counter = example("counter"),
    );
    std::fs::write(dir.join("app.toml"), manifest).unwrap();
    let mut t_config = HostConfig::new();
    t_config.module_cache(mote_tests::module_cache());
    let t = ActorSystem::new(t_config).unwrap();
    t.join_cluster(config(&nats, "t")).await.expect("t joins");

    let a = start(&dir, &nats, "a", "move-captured,move-stored");
    let _b = start(&dir, &nats, "b", "");
    let c = start(&dir, &nats, "c", "move-restoring");
    mote_tests::wait_until(|| t.cluster_nodes() == ["a", "b", "c", "t"]).await;
    add(&t, "/user/mover", 10);
    let incarnation = settles_on(&t, &nats, "/user/mover", "a", 10).await;

    // 1. The target dies with the actor's mailbox forwarded to it and the claim its own.
    let mut moving = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(["move", "/user/mover", "--to", "c", "--control"])
        .arg(dir.join("a.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    stopped_at(&dir, "a", "move-captured", 1).await;
    // Captured, serving nothing: these wait in its mailbox on a.
    for _ in 0..5 {
        add(&t, "/user/mover", 1);
    }
    let deadline = Instant::now() + DEADLINE;
    while listed(&nats, "/user/mover").await != [("a".to_owned(), incarnation, 5)] {
        assert!(Instant::now() < deadline, "the five adds never queued on a");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    release(&dir, "a", "move-captured");
    stopped_at(&dir, "a", "move-stored", 1).await;
    release(&dir, "a", "move-stored");
    stopped_at(&dir, "c", "move-restoring", 1).await;
    let said = moving.wait().unwrap();
    assert!(said.success(), "mote move reports the hand-over");
    drop(c); // kill -9
    let back = settles_on(&t, &nats, "/user/mover", "a", 15).await;
    assert_eq!(
        back, incarnation,
        "taken back as the same incarnation, with the five forwarded adds"
    );
    add(&t, "/user/mover", 1);
    settles_on(&t, &nats, "/user/mover", "a", 16).await;
    let c = start(&dir, &nats, "c", "");
    mote_tests::wait_until(|| t.cluster_nodes() == ["a", "b", "c", "t"]).await;

    // 2. The source dies with the image and the record stored, before it asked the target.
    let mut cut_off = Command::new(env!("CARGO_BIN_EXE_mote"))
        .args(["move", "/user/mover", "--to", "b", "--control"])
        .arg(dir.join("a.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    stopped_at(&dir, "a", "move-captured", 2).await;
    release(&dir, "a", "move-captured");
    stopped_at(&dir, "a", "move-stored", 2).await;
    drop(a); // kill -9
    let said = cut_off.wait().unwrap();
    assert!(!said.success(), "the source died under mote move");
    let finished = settles_on(&t, &nats, "/user/mover", "b", 16).await;
    assert_eq!(
        finished, incarnation,
        "finished on b as the same incarnation"
    );
    add(&t, "/user/mover", 1);
    settles_on(&t, &nats, "/user/mover", "b", 17).await;

    // a comes back with its manifest, which names it for /user/mover: b has it, so a leaves
    // it there.
    let _a = start(&dir, &nats, "a", "");
    mote_tests::wait_until(|| t.cluster_nodes() == ["a", "b", "c", "t"]).await;
    settles_on(&t, &nats, "/user/mover", "b", 17).await;
    assert!(
        log(&dir, "a").contains("runs on another node"),
        "the restarted source leaves /user/mover to b"
    );
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}
