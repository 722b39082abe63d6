//! Builds the pattern components (`example-actors/patterns/*`, Rust guests) and embeds their
//! bytes: the `mote` binary ships them, whatever else it was built with. With
//! `MOTE_SKIP_GUESTS` set (or outside the repository) the crate holds none.

#[path = "../test-programs/rust_guests.rs"]
mod rust_guests;

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest_dir.parent().expect("patterns/ has a parent");
    let examples = root.join("example-actors");
    let sources = examples.join("patterns");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-env-changed=MOTE_SKIP_GUESTS");
    let mut table = String::from("&[\n");
    if sources.is_dir() && std::env::var_os("MOTE_SKIP_GUESTS").is_none() {
        for input in [
            root.join("guest-sdk"),
            root.join("wit"),
            sources.clone(),
            examples.join("Cargo.toml"),
        ] {
            println!("cargo:rerun-if-changed={}", input.display());
        }
        let mut names: Vec<String> = std::fs::read_dir(&sources)
            .expect("example-actors/patterns/ is readable")
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.join("Cargo.toml").exists())
            .filter_map(|path| path.file_name()?.to_str().map(str::to_owned))
            .collect();
        names.sort();
        let packages: Vec<&str> = names.iter().map(String::as_str).collect();
        let out = rust_guests::build(&examples, &packages);
        for name in &names {
            let wasm = out.join(format!("{}.wasm", name.replace('-', "_")));
            writeln!(
                table,
                "    ({name:?}, include_bytes!({:?})),",
                wasm.display()
            )
            .expect("writing to a String");
        }
    }
    table.push(']');
    std::fs::write(out_dir.join("components.rs"), table).expect("OUT_DIR is writable");
}
