//! Builds the example actors in `example-actors/` to wasm32-wasip2 components, the way
//! wasmtime's `test-programs/artifacts` does, and tells the crate where they are.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest_dir
        .parent()
        .expect("host/ has a parent")
        .to_path_buf();
    let examples = root.join("example-actors");
    println!("cargo:rerun-if-env-changed=MOTE_SKIP_GUESTS");
    if !examples.join("Cargo.toml").exists() || std::env::var_os("MOTE_SKIP_GUESTS").is_some() {
        return;
    }
    for dir in ["example-actors", "guest-sdk", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    ensure_target();
    let target_dir = examples.join("target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&examples)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(&target_dir);
    // Settings meant for the host build must not leak into the guest build.
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
    let status = cmd
        .status()
        .expect("failed to run cargo for the example actors");
    assert!(
        status.success(),
        "building example-actors for wasm32-wasip2 failed"
    );
    let out = target_dir.join("wasm32-wasip2").join("release");
    println!("cargo:rustc-env=MOTE_EXAMPLES_DIR={}", out.display());
}

/// Installs the wasm32-wasip2 target through rustup if the toolchain lacks it.
fn ensure_target() {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = sysroot.is_some_and(|s| s.join("lib/rustlib/wasm32-wasip2").exists());
    if !installed {
        println!("cargo:warning=installing the wasm32-wasip2 target with rustup");
        let _ = Command::new("rustup")
            .args(["target", "add", "wasm32-wasip2"])
            .status();
    }
}
