//! Builds Rust guest crates of `example-actors/` to wasm32-wasip2 components. Shared, through
//! `#[path]`, by the build scripts of `mote-test-programs` (every example) and `mote-patterns`
//! (the pattern components it embeds); both use one target directory, so whichever runs
//! second finds the components built (cargo's lock on that directory orders them).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `packages` of the `examples` workspace (all of its members when empty) for
/// wasm32-wasip2 in release mode; returns the directory holding the components.
pub fn build(examples: &Path, packages: &[&str]) -> PathBuf {
    ensure_target();
    let target_dir = examples.join("target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(examples)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(&target_dir);
    for package in packages {
        cmd.args(["-p", package]);
    }
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
    out_dir(examples)
}

/// Where [`build`] puts the components of the `examples` workspace.
pub fn out_dir(examples: &Path) -> PathBuf {
    examples
        .join("target")
        .join("wasm32-wasip2")
        .join("release")
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
