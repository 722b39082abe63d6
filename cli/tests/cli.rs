//! The `mote` binary: `run` with a manifest, and one-line errors for bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `mote` in a directory of its own, so the default `./mote.redb` of concurrent runs
/// never collide.
fn mote(args: &[&str]) -> Output {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Command::new(env!("CARGO_BIN_EXE_mote"))
        .current_dir(scratch(&format!("cwd-{run}")))
        .args(args)
        .env("RUST_LOG", "info")
        .output()
        .expect("run mote")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mote-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn example(name: &str) -> PathBuf {
    mote_test_programs::path(name).expect("example actors are built")
}

fn write(dir: &Path, file: &str, text: &str) -> PathBuf {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn run_deploys_a_manifest_and_exits_when_the_actors_stop() {
    let dir = scratch("run");
    let manifest = write(
        &dir,
        "pingpong.toml",
        &format!(
            "[[module]]\nname = \"pingpong\"\npath = {:?}\n\n\
             [[actor]]\npath = \"/user/pong\"\nmodule = \"pingpong\"\ninit = \"pong\"\n\n\
             [[actor]]\npath = \"/user/ping\"\nmodule = \"pingpong\"\ninit = \"ping /user/pong 20\"\n",
            example("pingpong")
        ),
    );
    let out = mote(&["run", manifest.to_str().unwrap()]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("ping: 20 round trips done"), "{log}");
    assert!(log.contains("pong: received 20 pings"), "{log}");
    assert!(log.contains("all top-level actors stopped"), "{log}");
}

fn one_line_error(out: &Output) -> String {
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("mote: error:"))
        .unwrap_or_else(|| panic!("no error line in {err}"));
    line.to_owned()
}

#[test]
fn bad_input_gives_one_clear_line() {
    let dir = scratch("errors");
    let syntax = write(&dir, "syntax.toml", "[[module]]\nname = \"a\"\npath = \n");
    let line = one_line_error(&mote(&["run", syntax.to_str().unwrap()]));
    assert!(line.contains("syntax.toml:3:"), "{line}");

    let missing = write(
        &dir,
        "missing.toml",
        "[[module]]\nname = \"a\"\npath = \"nope.wasm\"\n",
    );
    let line = one_line_error(&mote(&["run", missing.to_str().unwrap()]));
    assert!(
        line.contains("cannot read module file") && line.contains("nope.wasm"),
        "{line}"
    );

    write(&dir, "junk.wasm", "junk");
    let junk = write(
        &dir,
        "junk.toml",
        "[[module]]\nname = \"a\"\npath = \"junk.wasm\"\n",
    );
    let line = one_line_error(&mote(&["run", junk.to_str().unwrap()]));
    assert!(line.contains("not a WebAssembly file"), "{line}");

    let bad_path = write(
        &dir,
        "badpath.toml",
        &format!(
            "[[module]]\nname = \"c\"\npath = {:?}\n[[actor]]\npath = \"/user/a/../b\"\nmodule = \"c\"\n",
            example("counter")
        ),
    );
    let line = one_line_error(&mote(&["run", bad_path.to_str().unwrap()]));
    assert!(line.contains("invalid actor path"), "{line}");

    let line = one_line_error(&mote(&["run", "/nonexistent/manifest.toml"]));
    assert!(line.contains("cannot read manifest"), "{line}");
}

#[test]
fn demo_runs_ping_pong_a_tree_entities_a_hot_swap_and_a_throttle() {
    let out = mote(&["demo"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("report from /user/ping: pongs = 5"),
        "{stdout}"
    );
    assert!(
        stdout.contains("report from /user/relay: sum = 30"),
        "{stdout}"
    );
    assert!(
        stdout.contains("report from /user/tree: stopped"),
        "{stdout}"
    );
    assert!(
        stdout.contains("report from /user/sup/c0: restarted"),
        "{stdout}"
    );
    // The SDK's panic hook logs the crasher's panic, message and place, as one line.
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.lines()
            .any(|l| l.contains("panicked at crasher/src/lib.rs:")
                && l.contains("crasher asked to panic")
                && l.contains("actor=/user/sup/c0")),
        "{log}"
    );
    assert!(
        stdout.contains("alice: total 12 after 1 activation(s)")
            && stdout.contains("reactivated by the next message: total 12, activation 2"),
        "{stdout}"
    );
    assert!(
        stdout.contains("rolled back to version 1 with its state: 1100 messages, 0 out of order"),
        "{stdout}"
    );
    assert!(
        stdout.contains("/user/total answered the ask itself: total 55"),
        "{stdout}"
    );
}

/// Kills the host when the test ends, however it ends.
struct Host(std::process::Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `mote run <manifest>` in `dir` and waits (up to `patience_s`) until its control
/// socket answers; the socket does not exist before.
fn run_host(dir: &Path, manifest: &Path, socket: &str, patience_s: u64) -> Host {
    run_host_with(dir, manifest, socket, patience_s, &[])
}

/// `run_host` with more arguments for `mote run`.
fn run_host_with(
    dir: &Path,
    manifest: &Path,
    socket: &str,
    patience_s: u64,
    more: &[&str],
) -> Host {
    let host = Host(
        Command::new(env!("CARGO_BIN_EXE_mote"))
            .current_dir(dir)
            .args(["run", manifest.to_str().unwrap(), "--control", socket])
            .args(more)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start mote run"),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(patience_s);
    while !mote(&["tree", "--control", socket]).status.success() {
        assert!(std::time::Instant::now() < deadline, "host did not come up");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    host
}

#[test]
fn send_ask_and_tree_talk_to_a_running_host() {
    let dir = scratch("control");
    let socket = dir.join("mote.sock");
    let manifest = write(
        &dir,
        "counter.toml",
        &format!(
            "[[module]]\nname = \"counter\"\npath = {:?}\n\n[[actor]]\npath = \"/user/c\"\nmodule = \"counter\"\ninit = \"10\"\n",
            example("counter")
        ),
    );
    let socket_arg = socket.to_str().unwrap();
    let _host = run_host(&dir, &manifest, socket_arg, 30);
    let tree = mote_ok(&["tree", "--control", socket_arg]);
    assert!(
        tree.contains("/user/c #") && tree.contains("counter@0 mailbox="),
        "{tree}"
    );

    // Counter::Add(5) is postcard [0, 5]; Counter::Get is [1]; the reply Value(15) is [2, 15].
    let out = mote(&[
        "send",
        "/user/c",
        "Counter",
        "--hex",
        "0005",
        "--control",
        socket_arg,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = mote(&[
        "ask",
        "/user/c",
        "Counter",
        "--hex",
        "01",
        "--control",
        socket_arg,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("reply from /user/c#") && stdout.contains("kind=Counter body=020f"),
        "{stdout}"
    );

    // Errors are one line: an unknown path times out, a bad path is refused.
    let line = one_line_error(&mote(&[
        "ask",
        "/user/none",
        "X",
        "--timeout-ms",
        "100",
        "--control",
        socket_arg,
    ]));
    assert!(line.contains("no reply within"), "{line}");
    let line = one_line_error(&mote(&["send", "user/c", "X", "--control", socket_arg]));
    assert!(line.contains("not absolute"), "{line}");
    let line = one_line_error(&mote(&[
        "tree",
        "--control",
        dir.join("none.sock").to_str().unwrap(),
    ]));
    assert!(line.contains("no host listening"), "{line}");
}

/// Runs `mote` with `args` and returns its stdout, failing the test if it failed.
fn mote_ok(args: &[&str]) -> String {
    let out = mote(args);
    assert!(
        out.status.success(),
        "mote {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn deploy_upgrade_and_roll_back_a_running_host() {
    let dir = scratch("upgrade");
    let socket = dir.join("mote.sock");
    let manifest = write(
        &dir,
        "versioned.toml",
        &format!(
            "[[module]]\nname = \"versioned\"\nversion = \"1\"\npath = {:?}\n\n[[actor]]\npath = \"/user/c\"\nmodule = \"versioned\"\n",
            example("versioned_v1")
        ),
    );
    let socket_arg = socket.to_str().unwrap();
    let _host = run_host(&dir, &manifest, socket_arg, 30);
    for v in ["2", "3"] {
        let file = example(&format!("versioned_v{v}"));
        let out = mote_ok(&[
            "deploy",
            file.to_str().unwrap(),
            "--name",
            "versioned",
            "--version",
            v,
            "--control",
            socket_arg,
        ]);
        assert!(out.contains(&format!("deployed versioned@{v}")), "{out}");
    }
    let modules = mote_ok(&["modules", "--control", socket_arg]);
    assert!(
        modules.contains("versioned@1 sha256:") && modules.contains("current"),
        "{modules}"
    );
    assert_eq!(modules.lines().count(), 3, "{modules}");

    let out = mote_ok(&["upgrade", "versioned", "--to", "2", "--control", socket_arg]);
    assert!(out.contains("1 upgraded (1 with their state)"), "{out}");
    assert!(out.contains("now current"), "{out}");
    assert!(mote_ok(&["tree", "--control", socket_arg]).contains("versioned@2"));

    // v3 refuses the state: the command fails, v2 keeps running.
    let out = mote(&["upgrade", "/user/c", "--to", "3", "--control", socket_arg]);
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("the old version keeps running"), "{stdout}");
    assert!(mote_ok(&["tree", "--control", socket_arg]).contains("versioned@2"));

    // Roll back to v1, then remove the bad version.
    let out = mote_ok(&["upgrade", "versioned", "--to", "1", "--control", socket_arg]);
    assert!(out.contains("1 upgraded"), "{out}");
    assert!(mote_ok(&["tree", "--control", socket_arg]).contains("versioned@1"));
    mote_ok(&[
        "undeploy",
        "versioned",
        "--version",
        "3",
        "--control",
        socket_arg,
    ]);
    let line = one_line_error(&mote(&[
        "undeploy",
        "versioned",
        "--version",
        "1",
        "--control",
        socket_arg,
    ]));
    assert!(line.contains("still runs 1 actor"), "{line}");
}

#[test]
fn a_canary_upgrade_rolls_back_a_version_that_fails_and_lets_a_good_one_through() {
    let dir = scratch("canary");
    let socket = dir.join("mote.sock");
    let actors = ["/user/a", "/user/b", "/user/c"];
    let mut manifest = format!(
        "[[module]]\nname = \"versioned\"\nversion = \"1\"\npath = {:?}\n",
        example("versioned_v1")
    );
    for path in actors {
        manifest += &format!("\n[[actor]]\npath = {path:?}\nmodule = \"versioned\"\n");
    }
    let manifest = write(&dir, "versioned.toml", &manifest);
    let socket_arg = socket.to_str().unwrap();
    let _host = run_host(&dir, &manifest, socket_arg, 30);
    for v in ["2", "4"] {
        let file = example(&format!("versioned_v{v}"));
        let args = ["deploy", file.to_str().unwrap(), "--name", "versioned"];
        mote_ok(&[&args[..], &["--version", v, "--control", socket_arg]].concat());
    }
    let on_version = |path: &str, v: &str| {
        let tree = mote_ok(&["tree", "--control", socket_arg]);
        tree.lines()
            .map(str::trim_start)
            .any(|l| l.starts_with(&format!("{path} ")) && l.contains(&format!("versioned@{v}")))
    };

    // v4 fails every `Add`. The canary (/user/a, the first by path) runs it for 3 s while every
    // actor gets the same two `Add`s: it fails twice (and is restarted twice), the others never.
    let upgrade = Command::new(env!("CARGO_BIN_EXE_mote"))
        .current_dir(&dir)
        .args(["upgrade", "versioned", "--to", "4", "--canary", "1"])
        .args(["--canary-watch", "3", "--control", socket_arg])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start mote upgrade");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !on_version("/user/a", "4") {
        assert!(
            std::time::Instant::now() < deadline,
            "the canary never ran v4"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for path in actors {
        for add in ["000000", "000001"] {
            // Versioned::Add { stream: 0, n } in postcard.
            mote_ok(&[
                "send",
                path,
                "Versioned",
                "--hex",
                add,
                "--control",
                socket_arg,
            ]);
        }
        // Versioned::Get: answered once both `Add`s were handled.
        mote_ok(&[
            "ask",
            path,
            "Versioned",
            "--hex",
            "01",
            "--control",
            socket_arg,
        ]);
    }
    let out = upgrade.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("versioned@4: 0 upgraded")
            && stdout.contains("; canary rolled back: 1 actor had 2 failures in 3."),
        "{stdout}"
    );
    assert!(
        stdout.contains("against 0 failures of 2 actors on the old version"),
        "{stdout}"
    );
    let line = one_line_error(&out);
    assert!(
        line.contains(
            "the canary was rolled back: 1 actor(s) back on their old version, 2 not tried"
        ),
        "{line}"
    );
    for path in actors {
        assert!(on_version(path, "1"), "{path} runs v1 again");
    }

    // v2 does no worse: the canaries pass and every actor moves.
    let out = mote_ok(&[
        "upgrade",
        "versioned",
        "--to",
        "2",
        "--canary",
        "2",
        "--canary-watch",
        "1",
        "--control",
        socket_arg,
    ]);
    assert!(out.contains("3 upgraded (3 with their state)"), "{out}");
    assert!(
        out.contains("now current; canary passed: 2 actors watched for 1."),
        "{out}"
    );
    for path in actors {
        assert!(on_version(path, "2"), "{path} runs v2");
    }

    // A canary compares actors of a module: one path is refused.
    let line = one_line_error(&mote(&[
        "upgrade",
        "/user/a",
        "--to",
        "1",
        "--canary",
        "1",
        "--control",
        socket_arg,
    ]));
    assert!(line.contains("a canary needs a module name"), "{line}");
}

#[test]
fn new_scaffolds_rust_python_and_js_actors_that_build_and_run() {
    let dir = scratch("new");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let run_in = |cwd: &Path, program: &Path, args: &[&str]| {
        let out = Command::new(program)
            .current_dir(cwd)
            .args(args)
            .env_remove("CARGO_TARGET_DIR")
            .env("CARGO_TARGET_DIR", repo.join("example-actors/target"))
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
        assert!(
            out.status.success(),
            "{} {args:?} failed: {}",
            program.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let _ = std::fs::remove_dir_all(dir.join("tmpl-rs"));
    let _ = std::fs::remove_dir_all(dir.join("tmpl-py"));
    let _ = std::fs::remove_dir_all(dir.join("tmpl-js"));
    let mote_bin = Path::new(env!("CARGO_BIN_EXE_mote"));
    run_in(&dir, mote_bin, &["new", "tmpl-rs", "--lang", "rust"]);
    run_in(&dir, mote_bin, &["new", "tmpl-py", "--lang", "python"]);
    run_in(&dir, mote_bin, &["new", "tmpl-js", "--lang", "js"]);
    let line = one_line_error(&mote(&["new", "Bad Name"]));
    assert!(line.contains("invalid project name"), "{line}");
    // The SDKs' pattern helpers come with them: a use of them builds (componentize-py and
    // componentize-js run the module's top level when they build).
    let add_to = |file: &str, text: &str| {
        let path = dir.join(file);
        let app = std::fs::read_to_string(&path).expect("the scaffolded app");
        std::fs::write(&path, format!("{app}\n{text}")).expect("the app");
    };
    add_to(
        "tmpl-py/app.py",
        "from mote.patterns import init, throttle\n\n\
         SLOW = init(throttle.Config(target=\"/user/p\", rate=10))\n",
    );
    add_to(
        "tmpl-js/app.js",
        "import { init, throttle } from './mote/patterns.js';\n\n\
         const slow = init(new throttle.Config({ target: '/user/j', rate: 10 }));\n\
         if (slow.length === 0) throw new Error('an empty throttle config');\n",
    );

    // The Rust template builds as it is (sharing the example actors' compiled dependencies).
    let cargo = std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from);
    run_in(&dir.join("tmpl-rs"), &cargo, &["build", "--release"]);
    let rust_wasm = repo.join("example-actors/target/wasm32-wasip2/release/tmpl_rs.wasm");
    // The Python and JS templates build with their build.sh, given the toolchains that
    // test-programs/build.rs installed (so the test does not download them again).
    let toolchains = repo.join("example-actors/.toolchains");
    for (project, var, tool) in [
        (
            "tmpl-py",
            "MOTE_COMPONENTIZE_PY",
            "python/bin/componentize-py",
        ),
        (
            "tmpl-js",
            "MOTE_COMPONENTIZE_JS",
            "js/node_modules/.bin/componentize-js",
        ),
    ] {
        let tool = toolchains.join(tool);
        assert!(
            tool.exists(),
            "{} is missing: build the host (cargo build -p mote-host) to install it",
            tool.display()
        );
        let out = Command::new(dir.join(project).join("build.sh"))
            .env(var, &tool)
            .output()
            .expect("run build.sh");
        assert!(
            out.status.success(),
            "{project}/build.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let python_wasm = dir.join("tmpl-py/tmpl-py.wasm");
    let js_wasm = dir.join("tmpl-js/tmpl-js.wasm");

    let manifest = write(
        &dir,
        "templates.toml",
        &format!(
            "[[module]]\nname = \"rs\"\npath = {rust_wasm:?}\n[[module]]\nname = \"py\"\npath = {python_wasm:?}\n\
             [[module]]\nname = \"js\"\npath = {js_wasm:?}\n\
             [[actor]]\npath = \"/user/r\"\nmodule = \"rs\"\n[[actor]]\npath = \"/user/p\"\nmodule = \"py\"\n\
             [[actor]]\npath = \"/user/j\"\nmodule = \"js\"\n"
        ),
    );
    let socket = dir.join("new.sock");
    let socket_arg = socket.to_str().unwrap();
    // Compiling the Python and JS components takes a while on a cold cache.
    let host = run_host(&dir, &manifest, socket_arg, 180);
    // Rust template: Msg::Add(5) is postcard [0, 5], Msg::Get [1], the reply Msg::Total(5) [2, 5].
    mote_ok(&[
        "send",
        "/user/r",
        "Msg",
        "--hex",
        "0005",
        "--control",
        socket_arg,
    ]);
    let reply = mote_ok(&[
        "ask",
        "/user/r",
        "Msg",
        "--hex",
        "01",
        "--control",
        socket_arg,
    ]);
    assert!(reply.contains("kind=Msg body=0205"), "{reply}");
    // Python and JS templates: JSON bodies.
    for actor in ["/user/p", "/user/j"] {
        mote_ok(&[
            "send",
            actor,
            "add",
            "--text",
            r#"{"n": 5}"#,
            "--control",
            socket_arg,
        ]);
        let reply = mote_ok(&["ask", actor, "get", "--control", socket_arg]);
        assert!(
            reply.contains(r#"text="{\"total\":5}""#),
            "{actor}: {reply}"
        );
    }
    // The three built projects take 170 MB; a failed run keeps them to look at.
    drop(host);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn new_scaffolds_a_c_actor_that_builds_and_runs() {
    let dir = scratch("new-c");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let _ = std::fs::remove_dir_all(dir.join("tmpl-c"));
    mote_ok_in(&dir, &["new", "tmpl-c", "--lang", "c"]);
    for file in ["app.c", "sdk/mote.h", "sdk/mote_world.h", "build.sh"] {
        assert!(
            dir.join("tmpl-c").join(file).exists(),
            "{file} is scaffolded"
        );
    }
    // zig cc from the venv test-programs/build.rs made; build.sh installs wasm-tools itself.
    let zig = repo.join("example-actors/.toolchains/python/bin/python-zig");
    assert!(
        zig.exists(),
        "{} is missing: build the example actors (cargo build -p mote-test-programs) to install it",
        zig.display()
    );
    let out = Command::new(dir.join("tmpl-c/build.sh"))
        .env("MOTE_ZIG", &zig)
        .output()
        .expect("run build.sh");
    assert!(
        out.status.success(),
        "tmpl-c/build.sh failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let wasm = dir.join("tmpl-c/tmpl-c.wasm");
    let manifest = write(
        &dir,
        "c.toml",
        &format!(
            "[[module]]\nname = \"c\"\npath = {wasm:?}\n[[actor]]\npath = \"/user/c\"\nmodule = \"c\"\n"
        ),
    );
    let socket = dir.join("new-c.sock");
    let socket_arg = socket.to_str().unwrap();
    let host = run_host(&dir, &manifest, socket_arg, 60);
    for n in ["5", "37"] {
        let body = format!(r#"{{"n": {n}}}"#);
        mote_ok(&[
            "send",
            "/user/c",
            "add",
            "--text",
            &body,
            "--control",
            socket_arg,
        ]);
    }
    let reply = mote_ok(&["ask", "/user/c", "get", "--control", socket_arg]);
    assert!(reply.contains(r#"text="{\"total\":42}""#), "{reply}");
    drop(host);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mote` run in `dir`, which must succeed.
fn mote_ok_in(dir: &Path, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_mote"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run mote");
    assert!(
        out.status.success(),
        "mote {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One request line on a fresh control connection; the response line.
fn control(socket: &Path, line: &[u8]) -> String {
    use std::io::{BufRead, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(socket).expect("connect");
    // A host that refuses the connection answers and closes without reading: the write may
    // then find the socket closed, and the answer is still there to read.
    if let Err(e) = stream.write_all(line) {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "writing a request: {e}"
        );
    }
    let mut reader = std::io::BufReader::new(stream);
    let mut response = String::new();
    reader.read_line(&mut response).unwrap();
    response
}

#[test]
fn the_control_socket_bounds_what_it_reads_and_answers_bad_input_with_errors() {
    use std::io::{BufRead, Read, Write};
    let dir = scratch("bounds");
    let socket = dir.join("mote.sock");
    let manifest = write(
        &dir,
        "counter.toml",
        &format!(
            "[[module]]\nname = \"counter\"\npath = {:?}\n\n[[actor]]\npath = \"/user/c\"\nmodule = \"counter\"\n",
            example("counter")
        ),
    );
    let _host = run_host(&dir, &manifest, socket.to_str().unwrap(), 30);

    // Module paths that are not a regular file, or too large, are refused before reading.
    let deploy = |path: &Path| {
        let request = format!(
            "{{\"op\":\"deploy\",\"path\":{:?},\"name\":\"m\",\"version\":\"1\"}}\n",
            path.to_str().unwrap()
        );
        control(&socket, request.as_bytes())
    };
    let answer = deploy(Path::new("/dev/zero"));
    assert!(answer.contains("not a regular file"), "{answer}");
    let sparse = dir.join("huge.wasm");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    let answer = deploy(&sparse);
    assert!(answer.contains("more than the limit"), "{answer}");

    // A body past the message limit is refused; so is a line past the line limit, and that
    // connection is closed.
    let body = "00".repeat((1 << 20) + 1);
    let answer = control(
        &socket,
        format!("{{\"op\":\"send\",\"to\":\"/user/c\",\"kind\":\"K\",\"body\":\"{body}\"}}\n")
            .as_bytes(),
    );
    assert!(answer.contains("exceeds the limit"), "{answer}");
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let endless = vec![b'x'; 5 << 20];
    let _ = stream.write_all(&endless);
    let mut answer = String::new();
    std::io::BufReader::new(&stream)
        .read_line(&mut answer)
        .unwrap();
    assert!(answer.contains("longer than"), "{answer}");
    let mut rest = Vec::new();
    let _ = (&stream).read_to_end(&mut rest);
    drop(stream);

    // 800 lines of random bytes and broken JSON on one connection: one error line each.
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in 0..800 {
        let mut line: Vec<u8> = (0..(i % 97 + 1))
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed as u8).max(1)
            })
            .filter(|b| *b != b'\n')
            .collect();
        if i % 2 == 0 {
            line = format!("{{\"op\":\"send\",\"to\":{i}").into_bytes();
        }
        line.push(b'\n');
        stream.write_all(&line).unwrap();
        let mut answer = String::new();
        reader.read_line(&mut answer).unwrap();
        assert!(answer.contains("\"ok\":false"), "line {i}: {answer}");
    }
    drop((stream, reader));

    // Connections past the limit are refused with a line; closing one frees a place.
    let held: Vec<_> = (0..64)
        .map(|_| {
            let stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            (&stream).write_all(b"{\"op\":\"tree\"}\n").unwrap();
            let mut answer = String::new();
            reader.read_line(&mut answer).unwrap();
            assert!(answer.contains("\"ok\":true"), "{answer}");
            stream
        })
        .collect();
    let answer = control(&socket, b"{\"op\":\"tree\"}\n");
    assert!(answer.contains("too many control connections"), "{answer}");
    drop(held);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let answer = control(&socket, b"{\"op\":\"tree\"}\n");
        if answer.contains("/user/c") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{answer}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn the_control_socket_and_a_sibling_answer_promptly_while_an_actor_attacks() {
    let dir = scratch("responsive");
    let socket = dir.join("mote.sock");
    let manifest = write(
        &dir,
        "attack.toml",
        &format!(
            "[[module]]\nname = \"counter\"\npath = {:?}\n\n[[module]]\nname = \"attacker\"\npath = {:?}\n\n\
             [[actor]]\npath = \"/user/c\"\nmodule = \"counter\"\ninit = \"3\"\n\n\
             [[actor]]\npath = \"/user/attacker\"\nmodule = \"attacker\"\ninit = \"log /user/c 20000000\"\n",
            example("counter"),
            example("attacker")
        ),
    );
    // One scheduler worker: the attacker and the sibling share it, so only preemption at the
    // attacker's time slice lets the sibling answer.
    let _host = run_host_with(
        &dir,
        &manifest,
        socket.to_str().unwrap(),
        30,
        &["--workers", "1"],
    );
    // Counter::Get is postcard [1]; the reply Value(3) is [2, 3].
    let ask = b"{\"op\":\"ask\",\"to\":\"/user/c\",\"kind\":\"Counter\",\"body\":\"01\",\"timeout_ms\":5000}\n";
    let mut latencies = Vec::new();
    for _ in 0..100 {
        let asked = std::time::Instant::now();
        let answer = control(&socket, ask);
        latencies.push(asked.elapsed());
        assert!(answer.contains("\"body\":\"0203\""), "{answer}");
    }
    let tree = control(&socket, b"{\"op\":\"tree\"}\n");
    assert!(
        tree.contains("/user/attacker") && tree.contains("\"log\""),
        "the attack is still running and its lines are being dropped: {tree}"
    );
    latencies.sort();
    let p99 = latencies[98];
    assert!(
        p99 < std::time::Duration::from_millis(100),
        "control + sibling ask p99 {p99:?}"
    );
}

#[test]
fn top_lists_the_busiest_actor_first() {
    let dir = scratch("top");
    let socket = dir.join("mote.sock");
    let manifest = write(
        &dir,
        "top.toml",
        &format!(
            "[[module]]\nname = \"counter\"\npath = {:?}\n\n[[module]]\nname = \"ticker\"\npath = {:?}\n\n\
             [[actor]]\npath = \"/user/quiet\"\nmodule = \"counter\"\n\n\
             [[actor]]\npath = \"/user/ticker\"\nmodule = \"ticker\"\ninit = \"/user/sink\"\n",
            example("counter"),
            example("ticker")
        ),
    );
    let socket_arg = socket.to_str().unwrap();
    let _host = run_host(&dir, &manifest, socket_arg, 30);
    // Timer::Every { period_ms: 10, tag: 1 }, in postcard.
    mote_ok(&[
        "send",
        "/user/ticker",
        "Timer",
        "--hex",
        "010a01",
        "--control",
        socket_arg,
    ]);
    let frame = mote_ok(&[
        "top",
        "--frames",
        "1",
        "--interval",
        "0.5",
        "--rows",
        "5",
        "--control",
        socket_arg,
    ]);
    let lines: Vec<&str> = frame.lines().collect();
    assert!(lines[0].starts_with("2 actors, "), "{frame}");
    assert!(
        lines[1].starts_with("ACTOR") && lines[1].contains("MSG/S"),
        "{frame}"
    );
    let busiest: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(busiest[0], "/user/ticker", "{frame}");
    let rate: f64 = busiest[1].parse().unwrap();
    assert!(rate > 10.0, "a 10 ms timer is the busiest: {frame}");
    assert!(lines[3].starts_with("/user/quiet"), "{frame}");
}

/// Every line the host answers one request with, up to and including the answer.
fn control_lines(socket: &Path, request: &str) -> Vec<serde_json::Value> {
    use std::io::{BufRead, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(socket).expect("connect");
    stream.write_all(format!("{request}\n").as_bytes()).unwrap();
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(stream).lines() {
        let value: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let answer = value.get("progress").is_none();
        lines.push(value);
        if answer {
            break;
        }
    }
    lines
}

#[test]
fn deploy_and_upgrade_stream_their_progress_before_the_answer() {
    let dir = scratch("progress");
    let socket = dir.join("mote.sock");
    let manifest = write(
        &dir,
        "versioned.toml",
        &format!(
            "[[module]]\nname = \"versioned\"\nversion = \"1\"\npath = {:?}\n\n\
             [[actor]]\npath = \"/user/a\"\nmodule = \"versioned\"\n\n\
             [[actor]]\npath = \"/user/b\"\nmodule = \"versioned\"\n\n\
             [[actor]]\npath = \"/user/c\"\nmodule = \"versioned\"\n",
            example("versioned_v1")
        ),
    );
    let _host = run_host(&dir, &manifest, socket.to_str().unwrap(), 30);
    // This host's compiled cache is new: version 2 is compiled, and that is reported.
    let deploy = serde_json::json!({
        "op": "deploy", "path": example("versioned_v2"), "name": "versioned", "version": "2"
    });
    let lines = control_lines(&socket, &deploy.to_string());
    let (answer, updates) = lines.split_last().unwrap();
    assert_eq!(answer["ok"], true, "{answer}");
    assert!(!updates.is_empty(), "a compile is reported: {lines:?}");
    let first = &updates[0]["progress"];
    assert_eq!(
        first["label"].as_str().unwrap().split(" (").next(),
        Some("compiling versioned@2")
    );
    assert_eq!(updates.last().unwrap()["progress"]["outcome"], "ok");

    let upgrade = r#"{"op":"upgrade","target":"versioned","version":"2","concurrency":1}"#;
    let lines = control_lines(&socket, upgrade);
    let (answer, updates) = lines.split_last().unwrap();
    assert_eq!(answer["upgrade"]["upgraded"], 3, "{answer}");
    let done: Vec<u64> = updates
        .iter()
        .map(|u| u["progress"]["done"].as_u64().unwrap())
        .collect();
    assert_eq!(done.first(), Some(&0), "{lines:?}");
    assert_eq!(done.last(), Some(&3), "{lines:?}");
    assert!(
        updates.iter().all(|u| u["progress"]["total"] == 3),
        "{lines:?}"
    );
    assert_eq!(updates.last().unwrap()["progress"]["outcome"], "ok");
}

#[test]
fn builtin_patterns_deploy_from_a_manifest_and_to_a_running_host() {
    let dir = scratch("builtin");
    let socket = dir.join("mote.sock");
    let manifest = write(
        &dir,
        "throttled.toml",
        &format!(
            "[[module]]\nbuiltin = \"throttle\"\n\n[[module]]\nname = \"counter\"\npath = {:?}\n\n\
             [[actor]]\npath = \"/user/c\"\nmodule = \"counter\"\n\n\
             [[actor]]\npath = \"/user/t\"\nmodule = \"throttle\"\ninit = '{{\"target\": \"/user/c\", \"rate\": 100}}'\n",
            example("counter")
        ),
    );
    let socket_arg = socket.to_str().unwrap();
    let _host = run_host(&dir, &manifest, socket_arg, 30);
    // Counter::Add(5) through the throttle, then an ask through it: the counter answers the
    // asker itself ([2, 5] is Value(5)).
    mote_ok(&[
        "send",
        "/user/t",
        "Counter",
        "--hex",
        "0005",
        "--control",
        socket_arg,
    ]);
    let out = mote_ok(&[
        "ask",
        "/user/t",
        "Counter",
        "--hex",
        "01",
        "--control",
        socket_arg,
    ]);
    assert!(
        out.contains("reply from /user/c#") && out.contains("kind=Counter body=0205"),
        "{out}"
    );

    // A pattern's control messages are JSON: the CLI speaks them as text.
    let out = mote_ok(&[
        "ask",
        "/user/t",
        "throttle.get-status",
        "--text",
        "{}",
        "--control",
        socket_arg,
    ]);
    assert!(
        out.contains("reply from /user/t#")
            && out.contains("kind=throttle.status")
            && out.contains("forwarded\\\":2"),
        "{out}"
    );

    let out = mote_ok(&["deploy", "--builtin", "patterns", "--control", socket_arg]);
    assert!(
        out.contains("throttle@0 was already deployed with these bytes"),
        "{out}"
    );
    let modules = mote_ok(&["modules", "--control", socket_arg]);
    for name in mote_patterns::names() {
        assert!(modules.contains(&format!("{name}@0 sha256:")), "{modules}");
    }
    let out = mote_ok(&[
        "deploy",
        "--builtin",
        "throttle",
        "--name",
        "slow",
        "--control",
        socket_arg,
    ]);
    assert!(out.contains("deployed slow@0"), "{out}");
    let line = one_line_error(&mote(&[
        "deploy",
        "--builtin",
        "nope",
        "--control",
        socket_arg,
    ]));
    assert!(line.contains("no built-in module \"nope\""), "{line}");

    // A manifest naming a built-in that does not exist stops with one line naming it.
    let bad = write(&dir, "bad.toml", "[[module]]\nbuiltin = \"nope\"\n");
    let line = one_line_error(&mote(&["run", bad.to_str().unwrap()]));
    assert!(line.contains("no built-in module \"nope\""), "{line}");
}

/// The body of a `mote ask` reply line: what follows `body=`, up to the next space.
fn reply_body(line: &str) -> String {
    line.split("body=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no body in {line:?}"))
        .to_owned()
}

#[test]
fn snapshot_and_restore_move_an_actors_memory_through_an_image_file() {
    let dir = scratch("snapshot");
    let socket = dir.join("mote.sock");
    let manifest = write(
        &dir,
        "versioned.toml",
        &format!(
            "[[module]]\nname = \"versioned\"\nversion = \"1\"\npath = {:?}\nsnapshot = true\n\n[[actor]]\npath = \"/user/c\"\nmodule = \"versioned\"\n",
            example("versioned_v1")
        ),
    );
    let s = socket.to_str().unwrap();
    let _host = run_host(&dir, &manifest, s, 60);
    // Versioned::Add { stream: 0, n } is postcard [0, 0, n]; Versioned::Get is [1].
    let add = |n: u8| {
        mote_ok(&[
            "send",
            "/user/c",
            "Versioned",
            "--hex",
            &format!("0000{n:02x}"),
            "--control",
            s,
        ])
    };
    let get = |at: &str| {
        reply_body(&mote_ok(&[
            "ask",
            at,
            "Versioned",
            "--hex",
            "01",
            "--control",
            s,
        ]))
    };
    (0..3).for_each(|n| drop(add(n)));
    let captured = get("/user/c");
    let image = dir.join("c.img");
    let out = mote_ok(&[
        "snapshot",
        "/user/c",
        "--out",
        image.to_str().unwrap(),
        "--control",
        s,
    ]);
    assert!(out.contains("/user/c captured into"), "{out}");
    add(3);
    assert_ne!(get("/user/c"), captured, "the original runs on");

    let out = mote_ok(&[
        "restore",
        image.to_str().unwrap(),
        "--at",
        "/user/d",
        "--control",
        s,
    ]);
    assert!(out.contains("as /user/d#"), "{out}");
    assert_eq!(
        get("/user/d"),
        captured,
        "the restored actor has the captured state"
    );

    let line = one_line_error(&mote(&["restore", image.to_str().unwrap(), "--control", s]));
    assert!(line.contains("already lives at /user/c"), "{line}");
    let mut bytes = std::fs::read(&image).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    let damaged = write(&dir, "damaged.img", "");
    std::fs::write(&damaged, bytes).unwrap();
    let line = one_line_error(&mote(&[
        "restore",
        damaged.to_str().unwrap(),
        "--at",
        "/user/e",
        "--control",
        s,
    ]));
    assert!(line.contains("corrupt"), "{line}");
    let line = one_line_error(&mote(&["snapshot", "/user/nobody", "--control", s]));
    assert!(line.contains("no live actor at /user/nobody"), "{line}");
}

/// `line` split as a shell would, for the plain quoting README commands use: words, '...' and
/// "..." (with \" inside), up to a `#` comment; a trailing `&` is dropped.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '#' if word.is_none() => break,
            ' ' | '\t' => words.extend(word.take()),
            '\'' => word
                .get_or_insert_default()
                .extend(chars.by_ref().take_while(|&c| c != '\'')),
            '"' => {
                let word = word.get_or_insert_default();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        c => word.push(c),
                    }
                }
            }
            c => word.get_or_insert_default().push(c),
        }
    }
    words.extend(word);
    if words.last().is_some_and(|w| w == "&") {
        words.pop();
    }
    words
}

/// Every `mote` command in the README's code blocks parses: each runs with `--help` added,
/// which clap answers only once every argument before it is one the command takes. A line with
/// `...` is an ellipsis, not a command.
#[test]
fn the_readme_command_lines_parse() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(readme).expect("the README");
    let mut in_block = false;
    let mut checked = 0;
    for (n, line) in readme.lines().enumerate() {
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        let command = line.trim_start().trim_start_matches("$ ");
        if !in_block || !command.starts_with("mote ") || command.contains("...") {
            continue;
        }
        let words = shell_words(command);
        let out = Command::new(env!("CARGO_BIN_EXE_mote"))
            .args(&words[1..])
            .arg("--help")
            .output()
            .expect("run mote");
        assert!(
            out.status.success(),
            "README.md:{}: {command}\n{}",
            n + 1,
            String::from_utf8_lossy(&out.stderr)
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} commands found");
}
