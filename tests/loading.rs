//! Loading modules: files that are not wasm, core modules and components of another world are
//! refused with a clear error, and the host keeps running. The Rust examples are lean builds
//! (`mote:actor` imports only) unless their manifest asks for WASI, a lean build's heap
//! starts in its initial memory, a memory that moves to a bigger slot as it grows keeps its
//! data, and a lean counter's stack top, data and heap fit two pages.

use mote_example_protocol::{Counter, Crash, GetValue, WorkerValue};
use mote_host::ModuleError;
use mote_tests::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_modules_are_refused_clearly_and_the_host_keeps_running() {
    let system = system_with(&["counter"]);
    let mut probe = system.probe("p").unwrap();

    let err = system
        .deploy("text", b"this is not wasm at all")
        .unwrap_err();
    assert!(matches!(err, ModuleError::NotWasm { .. }), "{err}");
    assert!(err.to_string().contains("not a WebAssembly file"), "{err}");

    let core = wat::parse_str("(module (func (export \"f\")))").unwrap();
    let err = system.deploy("core", &core).unwrap_err();
    assert!(matches!(err, ModuleError::CoreModule { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("core WebAssembly module, not a component"),
        "{err}"
    );

    let other_world = wat::parse_str(
        r#"(component
            (core module $m (func (export "run")))
            (core instance $i (instantiate $m))
            (func $run (canon lift (core func $i "run")))
            (export "other:world/run" (func $run)))"#,
    )
    .unwrap();
    let err = system.deploy("other", &other_world).unwrap_err();
    assert!(matches!(err, ModuleError::WrongWorld { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("missing export `mote:actor/actor@0.2.0`"),
        "{text}"
    );
    assert!(text.contains("other:world/run"), "{text}");

    let importer = wat::parse_str(
        r#"(component
            (import "evil:net/socket@1.0.0" (instance (export "open" (func))))
        )"#,
    )
    .unwrap();
    let err = system.deploy("importer", &importer).unwrap_err();
    assert!(matches!(err, ModuleError::NotGranted { .. }), "{err}");
    assert!(err.to_string().contains("evil:net/socket@1.0.0"), "{err}");

    let mut truncated = std::fs::read(mote_test_programs::path("counter").unwrap()).unwrap();
    truncated.truncate(truncated.len() / 2);
    let err = system.deploy("truncated", &truncated).unwrap_err();
    assert!(matches!(err, ModuleError::Compile { .. }), "{err}");

    let err = system
        .deploy_file("missing", "/nonexistent/x.wasm")
        .unwrap_err();
    assert!(matches!(err, ModuleError::Read { .. }), "{err}");

    // None of that harmed the host: the good module still runs.
    assert_eq!(system.modules(), vec!["counter".to_owned()]);
    system.spawn("c", "counter", b"41").unwrap();
    tell(&system, "/user/c", &Counter::Add(1));
    tell_from(&probe, "/user/c", &Counter::Get);
    assert_eq!(next_as::<Counter>(&mut probe).await, Counter::Value(42));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploying_the_same_bytes_twice_is_a_no_op_but_other_bytes_under_a_running_version_are_refused()
 {
    let system = system_with(&["counter"]);
    let counter = std::fs::read(mote_test_programs::path("counter").unwrap()).unwrap();
    system.deploy("counter", &counter).unwrap();
    system.spawn("c", "counter", b"").unwrap();
    let relay = std::fs::read(mote_test_programs::path("relay").unwrap()).unwrap();
    assert!(matches!(
        system.deploy("counter", &relay),
        Err(ModuleError::VersionTaken { .. })
    ));
    // With no actor on it, a rebuilt module replaces the version.
    assert!(system.stop("/user/c"));
    wait_until(|| system.lookup("/user/c").is_none()).await;
    system.deploy("counter", &relay).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lean_rust_actors_heap_starts_in_its_initial_memory_and_grows_past_it() {
    // The SDK's allocator (guest-sdk/src/heap.rs) lays the heap right after the data. std's
    // own allocator on wasm32-unknown-unknown grows the memory by a 64 KiB page for its first
    // allocation (and touches two fresh pages of it): a counter that started and handled
    // messages would hold 65,536 bytes more.
    let system = system_with(&["counter", "crasher"]);
    let counter = system.spawn("c", "counter", b"1").unwrap();
    for _ in 0..100 {
        tell(&system, "/user/c", &Counter::Add(1));
    }
    let count: Counter = ask_as(&system, "/user/c", &Counter::Get).await;
    assert_eq!(count, Counter::Value(101));
    assert_eq!(
        stats_of(&system, &counter).memory_bytes,
        initial_memory("counter")
    );

    // A heap past the initial memory grows it, and the actor keeps working on it.
    let crasher = system.spawn("x", "crasher", b"").unwrap();
    tell(&system, "/user/x", &Crash::Alloc(2));
    let echo: Crash = ask_as(&system, "/user/x", &Crash::Echo(7)).await;
    assert_eq!(echo, Crash::Echo(7));
    let grown = stats_of(&system, &crasher).memory_bytes;
    assert!(
        grown >= initial_memory("crasher") + (2 << 20),
        "{grown} bytes after holding 2 MiB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_that_moves_while_a_message_is_lowered_into_it_keeps_its_data() {
    // A memory starts in a slot the size of its initial memory and moves to a bigger slot
    // when it grows past it (host/src/sandbox/arena.rs). A body twice the echo worker's whole
    // initial memory grows it while the host lowers the message into it: the memory moves in
    // the middle of a host call, and the worker's heap and state must move with it.
    let system = system_with(&["echo_worker"]);
    let mut probe = system.probe("p").unwrap();
    let worker = system.spawn("e", "echo_worker", b"7").unwrap();
    tell_from(&probe, "/user/e", &GetValue {});
    assert_eq!(next_as::<WorkerValue>(&mut probe).await.value, 7);
    let initial = initial_memory("echo_worker");
    assert_eq!(stats_of(&system, &worker).memory_bytes, initial);
    let body: Vec<u8> = (0..2 * initial as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    probe.tell("/user/e", "echo", body.clone()).unwrap();
    let echoed = next(&mut probe).await;
    assert_eq!(echoed.kind, "echoed");
    assert!(echoed.body == body, "the echoed body is not the one sent");
    let grown = stats_of(&system, &worker).memory_bytes;
    assert!(
        grown > 2 * initial,
        "{grown} bytes after a body of {}",
        2 * initial
    );
    // Its state, in the heap that moved, is intact.
    tell_from(&probe, "/user/e", &GetValue {});
    assert_eq!(next_as::<WorkerValue>(&mut probe).await.value, 7);
}

#[test]
fn a_lean_counters_stack_top_data_and_heap_fit_in_two_pages() {
    // An idle counter's memory is what it touched: the top of its shadow stack, its data and
    // its heap. `example-actors/.cargo/config.toml` sizes the stack so that they lie in two
    // 4 KiB pages: the stack's end falls far enough past a page boundary for the frames of a
    // message (the counter's take 664 bytes), and the data ends early enough in the next page
    // for an idle heap. Data that outgrew that budget once cost every counter a third page
    // (4 KB more RSS each, and 1.9 more page faults a spawn).
    const STACK_TOP: u32 = 1024;
    const IDLE_HEAP: u32 = 512;
    const PAGE: u32 = 4096;
    let (stack_end, heap_base) = lean_layout("counter");
    let first_page = stack_end / PAGE * PAGE;
    assert!(
        stack_end - first_page >= STACK_TOP,
        "the stack ends {} bytes into its page: raise -zstack-size to leave its top more room",
        stack_end - first_page
    );
    let room = (first_page + 2 * PAGE).saturating_sub(heap_base);
    assert!(
        room >= IDLE_HEAP,
        "the data leaves {room} bytes of the second page to the heap (stack end {stack_end:#x}, \
         heap base {heap_base:#x}): lower -zstack-size (down to the stack top's room) or shrink the data"
    );
}

/// Where a lean built example's shadow stack ends (its stack pointer's first value) and its
/// heap begins (`__heap_base`).
fn lean_layout(name: &str) -> (u32, u32) {
    let (mut globals, mut layout) = (Vec::new(), None);
    for payload in wasmparser::Parser::new(0).parse_all(&component(name)) {
        match payload.unwrap_or_else(|e| panic!("{name} does not parse: {e}")) {
            wasmparser::Payload::GlobalSection(section) => {
                globals.clear();
                for global in section {
                    let global = global.expect("a global parses");
                    let value = match global.init_expr.get_operators_reader().read() {
                        Ok(wasmparser::Operator::I32Const { value }) => value as u32,
                        _ => 0,
                    };
                    globals.push((global.ty.mutable, value));
                }
            }
            wasmparser::Payload::ExportSection(section) => {
                for export in section {
                    let export = export.expect("an export parses");
                    if export.name == "__heap_base" {
                        let heap_base = globals[export.index as usize].1;
                        // The linker's first global is the stack pointer, the only mutable one.
                        let stack = globals.iter().find(|(mutable, _)| *mutable);
                        layout = stack.map(|&(_, end)| (end, heap_base));
                    }
                }
            }
            _ => {}
        }
    }
    layout.unwrap_or_else(|| panic!("{name} has no lean core module exporting __heap_base"))
}

/// The bytes of a built example component.
fn component(name: &str) -> Vec<u8> {
    let path = mote_test_programs::path(name).expect("the examples are built");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The bytes of linear memory a fresh instance of a built example starts with.
fn initial_memory(name: &str) -> u64 {
    let mut pages = 0;
    for payload in wasmparser::Parser::new(0).parse_all(&component(name)) {
        if let wasmparser::Payload::MemorySection(section) =
            payload.unwrap_or_else(|e| panic!("{name} does not parse: {e}"))
        {
            for memory in section {
                pages += memory.expect("a memory parses").initial;
            }
        }
    }
    pages * 65536
}

/// The interfaces a built example component imports.
fn imports(name: &str) -> Vec<String> {
    let (mut imports, mut depth) = (Vec::new(), 0usize);
    for payload in wasmparser::Parser::new(0).parse_all(&component(name)) {
        match payload.unwrap_or_else(|e| panic!("{name} does not parse: {e}")) {
            wasmparser::Payload::ModuleSection { .. }
            | wasmparser::Payload::ComponentSection { .. } => depth += 1,
            wasmparser::Payload::End(_) => depth = depth.saturating_sub(1),
            // The outer component's own imports (nested ones are wit-component's plumbing).
            wasmparser::Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    imports.push(import.expect("an import parses").name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    imports
}

#[test]
fn rust_examples_are_lean_unless_their_manifest_asks_for_wasi() {
    // Lean: built for wasm32-unknown-unknown and wrapped, so the component imports nothing of
    // WASI, and the host has only the mote:actor functions it uses to lower per actor.
    for name in ["counter", "pingpong", "fetcher", "supervisor", "throttle"] {
        let imports = imports(name);
        assert!(!imports.is_empty(), "{name} imports nothing");
        assert!(
            imports.iter().all(|i| i.starts_with("mote:actor/")),
            "{name} imports {imports:?}"
        );
    }
    // The attacker says `wasi = true` (it prints through std): a wasip2 build, WASI and all.
    let imports = imports("attacker");
    assert!(
        imports.iter().any(|i| i.starts_with("wasi:cli/")),
        "attacker imports {imports:?}"
    );
}
