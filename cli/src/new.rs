//! `mote new <name> --lang rust|python|js|c`: scaffolds an actor project that builds to a component
//! as it is. The templates live in `cli/templates/` and are compiled into the binary.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The languages `mote new` knows.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lang {
    Rust,
    Python,
    Js,
    C,
}

/// One file of a template: its path in the project and its text.
type File = (&'static str, &'static str);

const RUST: &[File] = &[
    (
        "Cargo.toml",
        include_str!("../templates/rust/Cargo.toml.tmpl"),
    ),
    (
        "rust-toolchain.toml",
        include_str!("../templates/rust/rust-toolchain.toml.tmpl"),
    ),
    (
        ".cargo/config.toml",
        include_str!("../templates/rust/config.toml.tmpl"),
    ),
    (
        "src/lib.rs",
        include_str!("../templates/rust/src/lib.rs.tmpl"),
    ),
    (
        "manifest.toml",
        include_str!("../templates/rust/manifest.toml.tmpl"),
    ),
    (
        "README.md",
        include_str!("../templates/rust/README.md.tmpl"),
    ),
];

const PYTHON: &[File] = &[
    ("app.py", include_str!("../templates/python/app.py.tmpl")),
    (
        "mote/__init__.py",
        include_str!("../../example-actors/python/mote/__init__.py"),
    ),
    (
        "mote/_wit.py",
        include_str!("../../example-actors/python/mote/_wit.py"),
    ),
    (
        "mote/actor.py",
        include_str!("../../example-actors/python/mote/actor.py"),
    ),
    (
        "mote/codec.py",
        include_str!("../../example-actors/python/mote/codec.py"),
    ),
    (
        "mote/context.py",
        include_str!("../../example-actors/python/mote/context.py"),
    ),
    (
        "mote/patterns/__init__.py",
        include_str!("../../example-actors/python/mote/patterns/__init__.py"),
    ),
    (
        "mote/patterns/_wire.py",
        include_str!("../../example-actors/python/mote/patterns/_wire.py"),
    ),
    (
        "mote/patterns/circuit_breaker.py",
        include_str!("../../example-actors/python/mote/patterns/circuit_breaker.py"),
    ),
    (
        "mote/patterns/pipeline.py",
        include_str!("../../example-actors/python/mote/patterns/pipeline.py"),
    ),
    (
        "mote/patterns/pipeline_builder.py",
        include_str!("../../example-actors/python/mote/patterns/pipeline_builder.py"),
    ),
    (
        "mote/patterns/pod_manager.py",
        include_str!("../../example-actors/python/mote/patterns/pod_manager.py"),
    ),
    (
        "mote/patterns/reaper.py",
        include_str!("../../example-actors/python/mote/patterns/reaper.py"),
    ),
    (
        "mote/patterns/router.py",
        include_str!("../../example-actors/python/mote/patterns/router.py"),
    ),
    (
        "mote/patterns/service_manager.py",
        include_str!("../../example-actors/python/mote/patterns/service_manager.py"),
    ),
    (
        "mote/patterns/supervision.py",
        include_str!("../../example-actors/python/mote/patterns/supervision.py"),
    ),
    (
        "mote/patterns/throttle.py",
        include_str!("../../example-actors/python/mote/patterns/throttle.py"),
    ),
    ("wit/actor.wit", include_str!("../../wit/actor.wit")),
    (
        "build.sh",
        include_str!("../templates/python/build.sh.tmpl"),
    ),
    (
        "manifest.toml",
        include_str!("../templates/python/manifest.toml.tmpl"),
    ),
    (
        "README.md",
        include_str!("../templates/python/README.md.tmpl"),
    ),
];

const JS: &[File] = &[
    ("app.js", include_str!("../templates/js/app.js.tmpl")),
    (
        "mote/package.json",
        include_str!("../../example-actors/js/mote/package.json"),
    ),
    (
        "mote/index.js",
        include_str!("../../example-actors/js/mote/index.js"),
    ),
    (
        "mote/index.d.ts",
        include_str!("../../example-actors/js/mote/index.d.ts"),
    ),
    (
        "mote/actor.js",
        include_str!("../../example-actors/js/mote/actor.js"),
    ),
    (
        "mote/codec.js",
        include_str!("../../example-actors/js/mote/codec.js"),
    ),
    (
        "mote/context.js",
        include_str!("../../example-actors/js/mote/context.js"),
    ),
    (
        "mote/wit.js",
        include_str!("../../example-actors/js/mote/wit.js"),
    ),
    (
        "mote/patterns.js",
        include_str!("../../example-actors/js/mote/patterns.js"),
    ),
    (
        "mote/patterns.d.ts",
        include_str!("../../example-actors/js/mote/patterns.d.ts"),
    ),
    ("wit/actor.wit", include_str!("../../wit/actor.wit")),
    (
        "package.json",
        include_str!("../templates/js/package.json.tmpl"),
    ),
    ("build.sh", include_str!("../templates/js/build.sh.tmpl")),
    (
        "manifest.toml",
        include_str!("../templates/js/manifest.toml.tmpl"),
    ),
    ("README.md", include_str!("../templates/js/README.md.tmpl")),
];

const C: &[File] = &[
    ("app.c", include_str!("../templates/c/app.c.tmpl")),
    ("sdk/mote.h", include_str!("../../example-actors/c/mote.h")),
    ("sdk/mote.c", include_str!("../../example-actors/c/mote.c")),
    ("wit/actor.wit", include_str!("../../wit/actor.wit")),
    ("build.sh", include_str!("../templates/c/build.sh.tmpl")),
    (
        "manifest.toml",
        include_str!("../templates/c/manifest.toml.tmpl"),
    ),
    ("README.md", include_str!("../templates/c/README.md.tmpl")),
];

/// The bindings wit-bindgen's C generator wrote for the C SDK when mote was built (by
/// `mote-test-programs`), copied into a C project's `sdk/`.
const C_BINDINGS: &[&str] = &[
    "mote_world.h",
    "mote_world.c",
    "mote_world_component_type.o",
];

/// Where the Rust SDK lives, for the new project's path dependency.
fn sdk_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new(env!("CARGO_MANIFEST_DIR")))
        .join("guest-sdk")
}

/// Creates the project `name` in the current directory.
pub(crate) fn new(name: &str, lang: Lang) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !ok {
        bail!(
            "invalid project name {name:?}: use lower-case letters, digits, _ and -, starting with a letter"
        );
    }
    let dir = PathBuf::from(name);
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    let sdk = sdk_path();
    if lang == Lang::Rust && !sdk.join("Cargo.toml").exists() {
        bail!(
            "the Rust SDK is not at {} (this mote was built outside its repository)",
            sdk.display()
        );
    }
    let bindings = mote_test_programs::c_bindings_dir();
    if lang == Lang::C && bindings.is_none() {
        bail!("the C bindings were not generated (this mote was built outside its repository)");
    }
    let files = match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
        Lang::C => C,
    };
    let file_stem = name.replace('-', "_");
    for (path, text) in files {
        let text = text
            .replace("{{name}}", name)
            .replace("{{file}}", &file_stem)
            .replace("{{sdk}}", &sdk.display().to_string());
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&target, text)
            .with_context(|| format!("cannot write {}", target.display()))?;
    }
    if let (Lang::C, Some(bindings)) = (lang, bindings) {
        for file in C_BINDINGS {
            let from = bindings.join(file);
            std::fs::copy(&from, dir.join("sdk").join(file))
                .with_context(|| format!("cannot copy {}", from.display()))?;
        }
    }
    if lang != Lang::Rust {
        make_executable(&dir.join("build.sh"))?;
    }
    let build = match lang {
        Lang::Rust => "cargo build --release",
        Lang::Python | Lang::Js | Lang::C => "./build.sh",
    };
    println!("created {name}/ ({lang:?}); build it with: cd {name} && {build}");
    Ok(())
}

fn make_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = std::fs::metadata(path)?.permissions();
    permissions.set_mode(0o755);
    std::fs::set_permissions(path, permissions)
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SDK files under `example-actors/<lang>/mote`, relative to it, sorted.
    fn sdk_files(lang: &str) -> Vec<String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../example-actors");
        let sdk = root.join(lang).join("mote");
        let mut files = Vec::new();
        let mut dirs = vec![sdk.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("the SDK directory") {
                let path = entry.expect("an SDK file").path();
                if path.is_dir() {
                    if !path.ends_with("__pycache__") {
                        dirs.push(path);
                    }
                } else {
                    let relative = path.strip_prefix(&sdk).expect("under the SDK");
                    files.push(format!("mote/{}", relative.display()));
                }
            }
        }
        files.sort();
        files
    }

    /// The `mote/` files a template writes, sorted.
    fn template_files(template: &[File]) -> Vec<String> {
        let mut files: Vec<String> = template
            .iter()
            .filter(|(path, _)| path.starts_with("mote/"))
            .map(|(path, _)| path.to_string())
            .collect();
        files.sort();
        files
    }

    #[test]
    fn the_python_and_js_templates_carry_every_file_of_their_sdk_patterns_included() {
        assert_eq!(template_files(PYTHON), sdk_files("python"));
        assert_eq!(template_files(JS), sdk_files("js"));
    }
}
