//! What the cluster tests of `mote run` processes share: a node process (killed when dropped),
//! its start, and the test's own cluster configuration (the test joins as node `t`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mote_host::{ClusterConfig, RemoteActor};
use mote_tests::DEADLINE;
use mote_tests::nats::NatsServer;

pub const TOKEN: &str = "s3cret-cluster-token";

/// One cluster of `mote run` processes at a time, for the tests of `cluster.rs` and
/// `durability.rs` in this binary: each runs three node processes on two cores.
pub static ONE_CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mote-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn example(name: &str) -> PathBuf {
    mote_test_programs::path(name).expect("example actors are built")
}

/// A `mote run` process, killed when dropped.
pub struct Node {
    pub child: Child,
    pub socket: PathBuf,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `mote run` of node `node`, with its database and control socket named `file`.
pub fn mote_run(dir: &Path, nats: &NatsServer, node: &str, file: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mote"));
    command
        .current_dir(dir)
        .args(["run", "app.toml", "--cluster", &nats.url, "--node", node])
        .args([
            "--db",
            &format!("{file}.redb"),
            "--control",
            &format!("{file}.sock"),
        ])
        .env("MOTE_CLUSTER_TOKEN", TOKEN)
        .env(
            "RUST_LOG",
            "info,mote_host::cluster=debug,mote_host::caps::persistence=debug",
        )
        .stdout(Stdio::null())
        .stderr(
            // Appended to: a restarted node's log follows the log of the run before.
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(format!("{file}.log")))
                .expect("a log file"),
        );
    command
}

/// Starts node `node` and waits until its control socket answers.
pub fn start(dir: &Path, nats: &NatsServer, node: &str) -> Node {
    start_with(dir, nats, node, &[])
}

/// [`start`] with `env` set for the node's process.
pub fn start_with(dir: &Path, nats: &NatsServer, node: &str, env: &[(&str, &Path)]) -> Node {
    let mut command = mote_run(dir, nats, node, node);
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("start mote run");
    let socket = dir.join(format!("{node}.sock"));
    let deadline = Instant::now() + DEADLINE;
    loop {
        let answered = Command::new(env!("CARGO_BIN_EXE_mote"))
            .args(["tree", "--control"])
            .arg(&socket)
            .output()
            .is_ok_and(|o| o.status.success());
        if answered {
            return Node { child, socket };
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join(format!("{node}.log"))).unwrap_or_default();
            panic!("node {node} exited ({status}): {log}");
        }
        assert!(Instant::now() < deadline, "node {node} did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn config(nats: &NatsServer, node: &str) -> ClusterConfig {
    let mut config = ClusterConfig::new(nats.url.clone(), node);
    config.token = Some(TOKEN.to_owned());
    config.heartbeat = Duration::from_millis(200);
    config.failure_timeout = Duration::from_millis(1000);
    config
}

/// Every live node's actors, as `mote tree --cluster` reads them.
pub async fn cluster_tree(nats: &NatsServer) -> Vec<(String, Vec<RemoteActor>)> {
    mote_host::cluster_tree(&config(nats, "t"))
        .await
        .expect("the cluster's tree")
}

/// The node and incarnation of the actor at `path`.
pub async fn find(nats: &NatsServer, path: &str) -> (String, u64) {
    for (node, actors) in cluster_tree(nats).await {
        if let Some(a) = actors.iter().find(|a| a.path == path) {
            return (node, a.incarnation);
        }
    }
    panic!("{path} lives on no node");
}
