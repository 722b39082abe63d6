//! Builds Rust guest crates of `example-actors/` to WebAssembly components. Shared, through
//! `#[path]`, by the build scripts of `mote-test-programs` (every example) and `mote-patterns`
//! (the pattern components it embeds); both use one target directory, so whichever runs
//! second finds the crates built (cargo's lock on that directory orders them).
//!
//! Two flavours, chosen by each crate's manifest:
//! - **lean** (the default): built for `wasm32-unknown-unknown` and made a component by
//!   wit-component. The SDK needs nothing of WASI, so the component imports only `mote:actor`
//!   (the counter: 14 functions to lower and link per actor), where a wasip2 build brings
//!   wasi-libc's stdio, environment and exit along (the counter: 40).
//!   `example-actors/.cargo/config.toml` also ends the shadow stack half a page below a page
//!   boundary, so that its hot top and the start of the data share one page.
//! - **wasi**: a crate whose manifest says `[package.metadata.mote] wasi = true` (it prints,
//!   reads clocks through std or makes HTTP requests) is built for `wasm32-wasip2`.
//!
//! Invariant: every component lands in [`out_dir`] under its crate's library name, written
//! only when its bytes changed (through a temporary file and a rename, so the two build
//! scripts never see half a file).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target of crates that use WASI.
const WASI_TARGET: &str = "wasm32-wasip2";

/// The target of lean crates, which wit-component then wraps.
const LEAN_TARGET: &str = "wasm32-unknown-unknown";

/// One guest crate of the examples workspace.
struct Guest {
    /// The package name, for `cargo build -p`.
    package: String,
    /// The cdylib's name: the stem of the `.wasm` file cargo writes and of the component.
    artifact: String,
    /// Whether the manifest asks for WASI (`[package.metadata.mote] wasi = true`).
    wasi: bool,
}

impl Guest {
    /// The target it is built for.
    fn target(&self) -> &'static str {
        if self.wasi { WASI_TARGET } else { LEAN_TARGET }
    }
}

/// Builds `packages` of the `examples` workspace (all of its guest crates when empty) in
/// release mode; returns the directory holding the components.
pub fn build(examples: &Path, packages: &[&str]) -> PathBuf {
    ensure_targets();
    let guests: Vec<Guest> = guests(examples)
        .into_iter()
        .filter(|g| packages.is_empty() || packages.contains(&g.package.as_str()))
        .collect();
    for package in packages {
        assert!(
            guests.iter().any(|g| g.package == *package),
            "{package} is no guest crate (cdylib) of example-actors"
        );
    }
    let target_dir = examples.join("target");
    for target in [WASI_TARGET, LEAN_TARGET] {
        let chosen: Vec<&str> = guests
            .iter()
            .filter(|g| g.target() == target)
            .map(|g| g.package.as_str())
            .collect();
        if !chosen.is_empty() {
            cargo_build(examples, &target_dir, target, &chosen);
        }
    }
    let out = out_dir(examples);
    std::fs::create_dir_all(&out).expect("the components directory can be created");
    for guest in &guests {
        let built = target_dir
            .join(guest.target())
            .join("release")
            .join(format!("{}.wasm", guest.artifact));
        let bytes = std::fs::read(&built)
            .unwrap_or_else(|e| panic!("cargo built no {}: {e}", built.display()));
        let component = if guest.wasi {
            bytes
        } else {
            wrap(&bytes)
                .unwrap_or_else(|e| panic!("{} is not a mote:actor module: {e}", guest.package))
        };
        write_if_changed(&out.join(format!("{}.wasm", guest.artifact)), &component);
    }
    out
}

/// Wraps a core module whose world is embedded (wit-bindgen's custom section) into a
/// component, validated; the error carries wit-component's causes.
pub fn wrap(module: &[u8]) -> Result<Vec<u8>, String> {
    wit_component::ComponentEncoder::default()
        .validate(true)
        .module(module)
        .and_then(|e| e.encode())
        .map_err(|e| format!("{e:#}"))
}

/// Where [`build`] puts the components of the `examples` workspace (the other languages'
/// builds put theirs there too).
pub fn out_dir(examples: &Path) -> PathBuf {
    examples.join("target").join("components")
}

/// Runs `cargo build --release --target <target>` for `packages` of the examples workspace.
fn cargo_build(examples: &Path, target_dir: &Path, target: &str, packages: &[&str]) {
    let mut cmd = cargo(examples);
    cmd.args(["build", "--release", "--target", target, "--target-dir"])
        .arg(target_dir);
    for package in packages {
        cmd.args(["-p", package]);
    }
    let status = cmd
        .status()
        .expect("failed to run cargo for the example actors");
    assert!(
        status.success(),
        "building example-actors for {target} failed"
    );
}

/// The guest crates (cdylibs) of the examples workspace, from `cargo metadata`.
fn guests(examples: &Path) -> Vec<Guest> {
    let output = cargo(examples)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .expect("failed to run cargo metadata for the example actors");
    assert!(
        output.status.success(),
        "cargo metadata failed for example-actors: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let mut guests = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let cdylib = package["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|k| k == "cdylib"))
            });
        let (Some(name), Some(cdylib)) = (package["name"].as_str(), cdylib) else {
            continue;
        };
        guests.push(Guest {
            package: name.to_owned(),
            artifact: cdylib["name"]
                .as_str()
                .expect("a target has a name")
                .replace('-', "_"),
            wasi: package["metadata"]["mote"]["wasi"].as_bool() == Some(true),
        });
    }
    guests
}

/// A cargo command in the examples workspace, free of the settings meant for the host build.
fn cargo(examples: &Path) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(examples);
    for var in [
        "CARGO_TARGET_DIR",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_MANIFEST_PATH",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Writes `bytes` to `path` unless it already holds them, through a temporary file and a
/// rename.
fn write_if_changed(path: &Path, bytes: &[u8]) {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return;
    }
    let tmp = path.with_extension(format!("wasm.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).unwrap_or_else(|e| panic!("{}: {e}", tmp.display()));
    std::fs::rename(&tmp, path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Installs the guest targets through rustup if the toolchain lacks them.
fn ensure_targets() {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    for target in [WASI_TARGET, LEAN_TARGET] {
        let installed = sysroot
            .as_ref()
            .is_some_and(|s| s.join("lib/rustlib").join(target).exists());
        if !installed {
            println!("cargo:warning=installing the {target} target with rustup");
            let _ = Command::new("rustup")
                .args(["target", "add", target])
                .status();
        }
    }
}
