//! Builds the example actors in `example-actors/` to WebAssembly components, the way
//! wasmtime's `test-programs/artifacts` does, and tells the crate where they are. This is the
//! only build script of the workspace that runs pip or npm (`mote-patterns` runs cargo for its
//! components too, through the same `rust_guests.rs`): an embedder who depends on
//! `mote-host` alone runs none of them.

#[path = "rust_guests.rs"]
mod rust_guests;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest_dir
        .parent()
        .expect("test-programs/ has a parent")
        .to_path_buf();
    let examples = root.join("example-actors");
    println!("cargo:rerun-if-env-changed=MOTE_SKIP_GUESTS");
    // The C bindings are generated even without the guests: `mote new --lang c` copies them.
    if root.join("wit").join("actor.wit").exists() {
        println!("cargo:rerun-if-changed={}", root.join("wit").display());
        let bindings = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
            .join("c-bindings");
        c::generate(&root, &bindings);
        println!("cargo:rustc-env=MOTE_C_BINDINGS_DIR={}", bindings.display());
    }
    if !examples.join("Cargo.toml").exists() || std::env::var_os("MOTE_SKIP_GUESTS").is_some() {
        return;
    }
    for dir in ["guest-sdk", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    // Everything in example-actors/ but the build output and the installed toolchains.
    for entry in std::fs::read_dir(&examples).expect("example-actors/ is readable") {
        let path = entry.expect("example-actors/ is readable").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !matches!(name, "target" | ".toolchains") {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    // One job list, run side by side: the Rust guests (one cargo run, which first waits while
    // mote-patterns' build script holds example-actors/target), and each language's toolchain
    // install, which queues that language's actors, one job each, when it is done. Nothing
    // of one language needs another's.
    let out = rust_guests::out_dir(&examples);
    std::fs::create_dir_all(&out).expect("example-actors/target can be created");
    let queue = jobs::Queue::default();
    {
        let examples = examples.clone();
        queue.push("the Rust guests", move |_| {
            rust_guests::build(&examples, &[]);
            Ok(())
        });
    }
    python::queue(&queue, &root, &examples, &out);
    js::queue(&queue, &root, &examples, &out);
    c::queue(&queue, &root, &examples, &out);
    if let Err(failures) = queue.run(jobs::workers()) {
        panic!(
            "{} example build(s) failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
    // componentize-py leaves bytecode beside the sources; it is not an input.
    let _ = std::fs::remove_dir_all(examples.join("python").join("__pycache__"));
    println!("cargo:rustc-env=MOTE_EXAMPLES_DIR={}", out.display());
}

/// A job list whose jobs run side by side on a few threads. A job may queue more jobs (a
/// toolchain install queues the actors it builds); every job runs even if another failed, and
/// the failures are reported together, each with what failed.
mod jobs {
    use std::collections::VecDeque;
    use std::sync::{Condvar, Mutex};
    use std::time::Instant;

    /// One build step; it may queue further steps.
    type Job = Box<dyn FnOnce(&Queue) -> Result<(), String> + Send>;

    /// The jobs waiting, how many run, and what failed.
    #[derive(Default)]
    struct State {
        waiting: VecDeque<(String, Job)>,
        running: usize,
        failures: Vec<String>,
    }

    /// The job list.
    #[derive(Default)]
    pub(super) struct Queue {
        state: Mutex<State>,
        changed: Condvar,
    }

    /// How many jobs run at once: cargo's `-j` for this build (`NUM_JOBS`), else the cores.
    pub(super) fn workers() -> usize {
        std::env::var("NUM_JOBS")
            .ok()
            .and_then(|n| n.parse().ok())
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
            .unwrap_or(1)
            .max(1)
    }

    impl Queue {
        /// Queues `job`, described by `what` in the log and in a failure.
        pub(super) fn push(
            &self,
            what: impl Into<String>,
            job: impl FnOnce(&Queue) -> Result<(), String> + Send + 'static,
        ) {
            self.lock().waiting.push_back((what.into(), Box::new(job)));
            self.changed.notify_one();
        }

        /// Runs every job, queued now or by a job, on `workers` threads; the failures, if any.
        pub(super) fn run(self, workers: usize) -> Result<(), Vec<String>> {
            std::thread::scope(|scope| {
                for _ in 0..workers {
                    scope.spawn(|| self.work());
                }
            });
            let failures = std::mem::take(&mut self.lock().failures);
            if failures.is_empty() {
                Ok(())
            } else {
                Err(failures)
            }
        }

        /// One worker: takes the oldest waiting job until none waits and none runs (a running
        /// job may still queue more).
        fn work(&self) {
            loop {
                let (what, job) = {
                    let mut state = self.lock();
                    loop {
                        if let Some(next) = state.waiting.pop_front() {
                            state.running += 1;
                            break next;
                        }
                        if state.running == 0 {
                            return;
                        }
                        state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
                    }
                };
                let started = Instant::now();
                // A panicking job (an `expect` in a helper) fails like one that returns Err.
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(self)))
                    .unwrap_or_else(|panic| {
                        Err(panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_else(|| "panicked".to_owned()))
                    });
                eprintln!("{what}: {:.1} s", started.elapsed().as_secs_f64());
                let mut state = self.lock();
                state.running -= 1;
                if let Err(e) = outcome {
                    state.failures.push(format!("{what}: {e}"));
                }
                drop(state);
                self.changed.notify_all();
            }
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, State> {
            self.state.lock().unwrap_or_else(|p| p.into_inner())
        }
    }
}

/// The module an actor's source file builds: its file name without the extension.
fn module_name(actor: &Path) -> String {
    actor
        .file_stem()
        .and_then(|s| s.to_str())
        .expect("actor file names are UTF-8")
        .to_owned()
}

/// Runs `command`; Err says what ran and how it ended.
fn run(mut command: std::process::Command) -> Result<(), String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let status = command
        .status()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{program} exited with {status}"))
    }
}

/// The Python example actors: a project-local venv with componentize-py, then one component
/// per `example-actors/python/py_*.py`, rebuilt when a Python file or the WIT changes.
mod python {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use super::jobs::Queue;
    use super::{run, stale_sources};

    /// The componentize-py release the Python actors are built with.
    const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

    /// Queues the install of componentize-py, which queues one job per stale actor.
    pub(super) fn queue(queue: &Queue, root: &Path, examples: &Path, out: &Path) {
        let sources = examples.join("python");
        let stale = stale_sources(root, &sources, "py", "py_", out);
        if stale.is_empty() {
            return;
        }
        let (root, examples, out) = (root.to_owned(), examples.to_owned(), out.to_owned());
        queue.push("componentize-py", move |queue| {
            let componentize = toolchain(&examples);
            for actor in stale {
                let module = super::module_name(&actor);
                let mut command = Command::new(&componentize);
                command
                    .current_dir(&sources)
                    .env("PYTHONDONTWRITEBYTECODE", "1")
                    .args(["-d"])
                    .arg(root.join("wit"))
                    .args([
                        "-w",
                        "upgradable-actor-world",
                        "componentize",
                        &module,
                        "-p",
                    ])
                    .arg(&sources)
                    .arg("-o")
                    .arg(out.join(format!("{module}.wasm")));
                queue.push(format!("componentize-py {}", actor.display()), move |_| {
                    run(command)
                });
            }
            Ok(())
        });
    }

    /// The venv's componentize-py, installing both if needed.
    pub(super) fn toolchain(examples: &Path) -> PathBuf {
        let venv = examples.join(".toolchains").join("python");
        let bin = venv.join("bin");
        let componentize = bin.join("componentize-py");
        if componentize.exists() {
            return componentize;
        }
        let how = "the Python example actors need python3 with venv and pip \
                   (Debian: apt-get install python3 python3-venv)";
        if !bin.join("pip").exists() {
            println!("cargo:warning=creating a Python venv in {}", venv.display());
            let status = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .unwrap_or_else(|e| panic!("cannot run python3 ({e}): {how}"));
            assert!(status.success(), "python3 -m venv failed: {how}");
        }
        println!(
            "cargo:warning=installing {COMPONENTIZE_PY} from PyPI into {}",
            venv.display()
        );
        let status = Command::new(bin.join("pip"))
            .args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                COMPONENTIZE_PY,
            ])
            .status()
            .unwrap_or_else(|e| panic!("cannot run pip ({e}): {how}"));
        assert!(
            status.success(),
            "pip install {COMPONENTIZE_PY} failed (it needs PyPI): {how}"
        );
        componentize
    }
}

/// The actor sources in `dir` (`<prefix>*.<ext>`) whose component in `out` is older than its
/// inputs: the source itself, the WIT, and everything else in `dir` but the other actors and
/// the SDK's unit tests (the SDK, shared modules). One new actor rebuilds only itself.
fn stale_sources(root: &Path, dir: &Path, ext: &str, prefix: &str, out: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let is_actor = |p: &Path| {
        p.extension().is_some_and(|e| e == ext)
            && p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
    };
    let entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    let mut shared: Vec<&Path> = entries
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| !is_actor(p) && !p.ends_with("tests"))
        .collect();
    let wit = root.join("wit");
    shared.push(&wit);
    let shared = newest(&shared);
    entries
        .iter()
        .filter(|p| is_actor(p))
        .filter(|p| {
            let wasm = out.join(p.with_extension("wasm").file_name().unwrap_or_default());
            let input = shared.max(modified(p).unwrap_or(SystemTime::UNIX_EPOCH));
            modified(&wasm).is_none_or(|built| built < input)
        })
        .cloned()
        .collect()
}

/// When `path` was last modified, if it exists.
fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The newest modification time of the files under `dirs`.
fn newest(dirs: &[&Path]) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut stack: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            if path.ends_with("__pycache__") {
                continue;
            }
            if let Ok(dir) = std::fs::read_dir(&path) {
                stack.extend(dir.filter_map(|e| e.ok().map(|e| e.path())));
            }
        } else if let Some(t) = modified(&path) {
            newest = newest.max(t);
        }
    }
    newest
}

/// The JavaScript example actors: componentize-js from the npm registry in a project-local
/// `node_modules`, then one component per `example-actors/js/js_*.js`, for the world
/// `upgradable-actor-world`. An actor imports the SDK (`example-actors/js/mote/`) by a relative
/// path; componentize-js takes the modules it imports along. Built without `wasi:http`
/// (`-d http fetch-event`), which the host grants only on request, except the `js_http_*`
/// actors, which make HTTP requests.
mod js {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use super::jobs::Queue;
    use super::{run, stale_sources};

    /// Queues the install of componentize-js, which queues one job per stale actor.
    pub(super) fn queue(queue: &Queue, root: &Path, examples: &Path, out: &Path) {
        let sources = examples.join("js");
        let stale = stale_sources(root, &sources, "js", "js_", out);
        if stale.is_empty() {
            return;
        }
        let (root, examples, out) = (root.to_owned(), examples.to_owned(), out.to_owned());
        queue.push("componentize-js", move |queue| {
            let componentize = toolchain(&examples, &sources);
            for actor in stale {
                let module = super::module_name(&actor);
                // js_http_* actors make HTTP requests: they keep wasi:http (and need a grant).
                let disabled: &[&str] = if module.starts_with("js_http_") {
                    &["fetch-event"]
                } else {
                    &["http", "fetch-event"]
                };
                let mut command = Command::new(&componentize);
                command
                    .arg(&actor)
                    .arg("--wit")
                    .arg(root.join("wit"))
                    .args(["-n", "upgradable-actor-world", "-d"])
                    .args(disabled)
                    .arg("-o")
                    .arg(out.join(format!("{module}.wasm")));
                queue.push(format!("componentize-js {}", actor.display()), move |_| {
                    run(command)
                });
            }
            Ok(())
        });
    }

    /// componentize-js in the project-local node_modules, installing it if needed.
    fn toolchain(examples: &Path, sources: &Path) -> PathBuf {
        let dir = examples.join(".toolchains").join("js");
        let componentize = dir
            .join("node_modules")
            .join(".bin")
            .join("componentize-js");
        if componentize.exists() {
            return componentize;
        }
        let how = "the JavaScript example actors need Node.js 18+ and npm \
                   (Debian: apt-get install nodejs npm)";
        std::fs::create_dir_all(&dir).expect("example-actors/.toolchains/js can be created");
        std::fs::copy(sources.join("package.json"), dir.join("package.json"))
            .expect("example-actors/js/package.json is readable");
        println!(
            "cargo:warning=installing componentize-js from npm into {}",
            dir.display()
        );
        let status = Command::new("npm")
            .current_dir(&dir)
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
            .status()
            .unwrap_or_else(|e| panic!("cannot run npm ({e}): {how}"));
        assert!(
            status.success(),
            "npm install of componentize-js failed (it needs the npm registry): {how}"
        );
        componentize
    }
}

/// The C example actors: wit-bindgen's C generator writes the bindings of
/// `upgradable-actor-world` (`mote_world.h`/`.c` and the component-type object) to `OUT_DIR`,
/// `zig cc` (the `ziglang` package from PyPI, in the Python venv) compiles each
/// `example-actors/c/c_*.c` with them and the SDK's `mote.c` against wasi-libc (malloc and
/// string functions only: the module imports nothing from WASI), and wit-component wraps the
/// module, whose world the object embeds, into a component.
mod c {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use super::jobs::Queue;
    use super::{run, stale_sources};

    /// The Zig release whose `zig cc` compiles the C actors.
    const ZIGLANG: &str = "ziglang==0.17.1";

    /// The world the C SDK implements: every optional export but `packed-receive`.
    const WORLD: &str = "upgradable-actor-world";

    /// Queues the install of `zig cc` (after componentize-py's venv), which queues one job per
    /// stale actor.
    pub(super) fn queue(queue: &Queue, root: &Path, examples: &Path, out: &Path) {
        let sources = examples.join("c");
        let stale = stale_sources(root, &sources, "c", "c_", out);
        if stale.is_empty() {
            return;
        }
        let (examples, out) = (examples.to_owned(), out.to_owned());
        queue.push("zig cc", move |queue| {
            let python = zig(&examples);
            let bindings = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
                .join("c-bindings");
            let cores = examples.join("target").join("c");
            std::fs::create_dir_all(&cores).map_err(|e| format!("{}: {e}", cores.display()))?;
            for actor in stale {
                let module = super::module_name(&actor);
                let core = cores.join(format!("{module}.core.wasm"));
                // c_raw* actors are written on the bindings alone: they define the exports
                // themselves, which the SDK's mote.c does for every other actor.
                let sdk: &[PathBuf] = if module.starts_with("c_raw") {
                    &[]
                } else {
                    &[sources.join("mote.c")]
                };
                let mut command = Command::new(&python);
                command
                    .args(["-m", "ziglang", "cc"])
                    .args(compile_args())
                    .arg("-I")
                    .arg(&bindings)
                    .arg("-I")
                    .arg(&sources)
                    .arg("-o")
                    .arg(&core)
                    .arg(&actor)
                    .args(sdk)
                    .arg(bindings.join("mote_world.c"))
                    .arg(bindings.join("mote_world_component_type.o"));
                let wasm = out.join(format!("{module}.wasm"));
                queue.push(format!("zig cc {}", actor.display()), move |_| {
                    run(command)?;
                    let bytes =
                        std::fs::read(&core).map_err(|e| format!("{}: {e}", core.display()))?;
                    let component = super::rust_guests::wrap(&bytes)
                        .map_err(|e| format!("not a valid {WORLD} module: {e}"))?;
                    std::fs::write(&wasm, component).map_err(|e| format!("{}: {e}", wasm.display()))
                });
            }
            Ok(())
        });
    }

    /// The `zig cc` arguments of a C actor: a WASI reactor (no `main`) that links only what
    /// it uses of wasi-libc, optimised for size.
    fn compile_args() -> [&'static str; 6] {
        [
            "-target",
            "wasm32-wasi",
            "-mexec-model=reactor",
            "-Os",
            "-Wall",
            "-Werror",
        ]
    }

    /// Writes the C bindings of the world to `dir`: `mote_world.h`, `mote_world.c` and
    /// `mote_world_component_type.o` (the world, for the linker to embed in the module).
    pub(super) fn generate(root: &Path, dir: &Path) {
        let mut resolve = wit_parser::Resolve::default();
        let (package, _) = resolve.push_dir(root.join("wit")).expect("wit/ parses");
        let world = resolve
            .select_world(&[package], Some(WORLD))
            .expect("wit/ has the world");
        let opts = wit_bindgen_c::Opts {
            rename_world: Some("mote_world".to_string()),
            ..Default::default()
        };
        let mut files = wit_bindgen_core::Files::default();
        opts.build()
            .generate(&mut resolve, world, &mut files)
            .expect("wit-bindgen generates C bindings");
        std::fs::create_dir_all(dir).expect("the bindings directory can be created");
        for (name, contents) in files.iter() {
            std::fs::write(dir.join(name), contents).expect("bindings written");
        }
    }

    /// The venv's Python with the `ziglang` package, installing it if needed.
    fn zig(examples: &Path) -> PathBuf {
        super::python::toolchain(examples);
        let python = examples
            .join(".toolchains")
            .join("python")
            .join("bin")
            .join("python");
        let marker = examples
            .join(".toolchains")
            .join("python")
            .join("ziglang.installed");
        if marker.exists() {
            return python;
        }
        println!("cargo:warning=installing {ZIGLANG} (zig cc) from PyPI into the Python venv");
        let status = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                ZIGLANG,
            ])
            .status()
            .unwrap_or_else(|e| panic!("cannot run {} ({e})", python.display()));
        assert!(
            status.success(),
            "pip install {ZIGLANG} failed (it needs PyPI)"
        );
        std::fs::write(&marker, ZIGLANG).expect("marker written");
        python
    }
}
