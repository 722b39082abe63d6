//! The wasmtime engines actors run on and the epoch ticker that preempts running guests.
//!
//! A system has two engines, which differ only in where linear memory comes from
//! ([`MemoryStrategy`]); compiled code and type information are shared by all actors of a module,
//! each actor gets only a `Store`. A module is compiled for one of them, chosen at deploy by
//! [`strategy_for`]: small modules (Rust, C) take memories from the shared arenas, so a host holds
//! a hundred thousand of their actors in a few mappings; modules with a big initial heap (Python
//! and JavaScript interpreters) get wasmtime's copy-on-write images, so an instance maps its
//! interpreter's heap instead of copying it.
//!
//! With epoch interruption (on unless `HostConfig::epoch_interruption(false)` turns it off to
//! measure its cost), a background thread bumps every engine's epoch each tick, and a guest that
//! has run for a whole time slice yields to the scheduler.
//!
//! Invariants:
//! - Both engines compile the same checks (epoch interruption, stack limit, bounds checks);
//!   only memory placement differs, so a module behaves the same on either.
//! - An image memory never moves: its reservation covers the host's memory limit, which the
//!   store's limiter enforces, so growth never discards the image (wasmtime drops the image of a
//!   memory that moves, and the instance would then hold a full private copy).

use std::sync::Arc;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::arena::{Memories, Stacks, WASM_PAGE};
use super::periodic::Periodic;
use crate::config::HostConfig;
use crate::error::HostError;

/// Where an engine's instances get their linear memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryStrategy {
    /// Zero-filled slots of the shared arenas: cheap to create, a few mappings for any number of
    /// actors; the initial data is copied in at instantiation.
    Arena,
    /// wasmtime's copy-on-write image of the module's initial memory: pages are shared with the
    /// image until written. Costs a few mappings per instance.
    Image,
}

/// Which strategy a component gets: [`MemoryStrategy::Image`] when the data segments of its core
/// modules add up to at least `threshold` bytes. Bytes that do not parse get the arena; compiling
/// them reports what is wrong.
pub(crate) fn strategy_for(bytes: &[u8], threshold: u64) -> MemoryStrategy {
    match initial_data_bytes(bytes) {
        Some(data) if data >= threshold => MemoryStrategy::Image,
        _ => MemoryStrategy::Arena,
    }
}

/// The total length of the data segments of every core module in a component or module.
fn initial_data_bytes(bytes: &[u8]) -> Option<u64> {
    let mut total = 0u64;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        if let wasmparser::Payload::DataSection(reader) = payload.ok()? {
            for data in reader {
                total = total.saturating_add(data.ok()?.data.len() as u64);
            }
        }
    }
    Some(total)
}

/// Builds the engine for one memory strategy. Modules deployed with snapshots on run on it
/// too: their components are instrumented instead (see [`super::instrument`]). Fiber stacks
/// come from `stacks`, shared by a host's engines, unless the host pools its instances.
pub(crate) fn build_engine(
    config: &HostConfig,
    memory: MemoryStrategy,
    stacks: &Arc<Stacks>,
) -> Result<Engine, HostError> {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(config.epoch_interruption)
        // Concurrency support slows every call 2.5-4x (DESIGN §12) and no feature needs it yet.
        .concurrency_support(false)
        .max_wasm_stack(config.max_wasm_stack)
        .async_stack_size(config.max_wasm_stack + config.async_stack)
        .memory_guard_size(0)
        .memory_reservation_for_growth(0);
    if config.perf_map {
        wasm.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    if config.function_cache {
        wasm.enable_incremental_compilation(super::compile_cache::FunctionCache::process())
            .map_err(|e| HostError::Engine(e.into()))?;
    }
    if !config.pooling {
        wasm.with_host_stack(stacks.clone());
    }
    if memory == MemoryStrategy::Image {
        let limit = config.memory_limit.next_multiple_of(WASM_PAGE) as u64;
        wasm.memory_reservation(limit).memory_init_cow(true);
        return Engine::new(&wasm).map_err(|e| HostError::Engine(e.into()));
    }
    // Small reservations keep per-actor address space and mappings low (100k actors target).
    wasm.memory_reservation(0).memory_init_cow(false);
    if !config.pooling {
        // Memories from a shared arena: a few mappings for any number of actors.
        wasm.with_host_memory(Arc::new(Memories::new(config.memory_limit)));
    }
    if config.pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(config.pool_size)
            .total_core_instances(config.pool_size * 2)
            .total_memories(config.pool_size)
            .total_tables(config.pool_size * 2)
            .total_stacks(config.pool_size);
        wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    Engine::new(&wasm).map_err(|e| HostError::Engine(e.into()))
}

/// A thread that increments the engines' epochs every tick until dropped.
pub(crate) struct EpochTicker {
    /// Held for its drop, which ends the thread.
    _thread: Periodic,
}

impl EpochTicker {
    /// Starts ticking `engines` every `config.epoch_tick`.
    pub(crate) fn start(engines: &[&Engine], config: &HostConfig) -> Result<Self, HostError> {
        let weak: Vec<_> = engines.iter().map(|e| e.weak()).collect();
        let ticker = Periodic::start("mote-epoch", config.epoch_tick, move || {
            let mut any = false;
            for engine in weak.iter().filter_map(|w| w.upgrade()) {
                engine.increment_epoch();
                any = true;
            }
            // Every engine gone: nothing left to preempt.
            any
        })?;
        Ok(EpochTicker { _thread: ticker })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LEB128 of `n`.
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    /// A core module with one passive data segment of `len` bytes.
    fn module_with_data(len: usize) -> Vec<u8> {
        let mut segment = vec![1, 1]; // one segment, passive
        leb(len, &mut segment);
        segment.resize(segment.len() + len, 0xab);
        let mut bytes = b"\0asm\x01\0\0\0".to_vec();
        bytes.push(11); // the data section
        leb(segment.len(), &mut bytes);
        bytes.extend(segment);
        bytes
    }

    #[test]
    fn a_module_with_a_big_initial_heap_gets_images_and_a_small_one_the_arena() {
        let big = module_with_data(2 << 20);
        let small = module_with_data(4 << 10);
        assert_eq!(initial_data_bytes(&big), Some(2 << 20));
        assert_eq!(strategy_for(&big, 1 << 20), MemoryStrategy::Image);
        assert_eq!(strategy_for(&small, 1 << 20), MemoryStrategy::Arena);
        assert_eq!(strategy_for(&small, 0), MemoryStrategy::Image);
        assert_eq!(strategy_for(&big, u64::MAX), MemoryStrategy::Arena);
    }

    #[test]
    fn an_image_memory_grows_in_place_up_to_the_memory_limit() {
        let mut config = HostConfig::new();
        config.memory_limit(4 << 20);
        let engine = build_engine(
            &config,
            MemoryStrategy::Image,
            &Arc::new(Stacks::new(config.max_wasm_stack + config.async_stack)),
        )
        .unwrap();
        let wat = r#"(module (memory (export "m") 1) (data (i32.const 0) "image"))"#;
        let module = wasmtime::Module::new(&engine, wat).unwrap();
        let mut store = wasmtime::Store::new(&engine, ());
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
        let memory = instance.get_memory(&mut store, "m").unwrap();
        let base = memory.data_ptr(&store);
        // Up to the limit (64 pages of 64 KiB) the memory stays where its image is mapped.
        memory.grow(&mut store, 63).unwrap();
        assert_eq!(memory.data_ptr(&store), base);
        assert_eq!(&memory.data(&store)[..5], b"image");
    }

    #[test]
    fn with_a_perf_map_compiled_guest_code_is_listed_for_perf() {
        let mut config = HostConfig::new();
        config.perf_map(true);
        let engine = build_engine(
            &config,
            MemoryStrategy::Arena,
            &Arc::new(Stacks::new(config.max_wasm_stack + config.async_stack)),
        )
        .unwrap();
        let wat = r#"(component (core module (func (export "guest_function_for_perf"))))"#;
        let _component = wasmtime::component::Component::new(&engine, wat).unwrap();
        let map = format!("/tmp/perf-{}.map", std::process::id());
        let listed = std::fs::read_to_string(&map).unwrap_or_default();
        let _ = std::fs::remove_file(&map);
        assert!(listed.contains("wasm["), "{map}: {listed:?}");
    }

    #[test]
    fn bytes_that_do_not_parse_get_the_arena() {
        assert_eq!(strategy_for(b"not wasm at all", 0), MemoryStrategy::Arena);
        let mut cut = module_with_data(2 << 20);
        cut.truncate(1 << 20);
        assert_eq!(strategy_for(&cut, 0), MemoryStrategy::Arena);
    }
}
