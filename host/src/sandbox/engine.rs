//! The shared wasmtime `Engine` and the epoch ticker that preempts running guests.
//!
//! One engine serves every actor: compiled code and type information are shared, each actor gets
//! only a `Store`. With epoch interruption (on unless `HostConfig::epoch_interruption(false)`
//! turns it off to measure its cost), a background thread bumps the epoch every tick, and a guest
//! that has run for a whole time slice yields to the scheduler.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::arena::{Memories, Stacks};
use crate::config::HostConfig;
use crate::error::HostError;

/// Builds the engine every actor of one system shares.
pub(crate) fn build_engine(config: &HostConfig) -> Result<Engine, HostError> {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(config.epoch_interruption)
        // Concurrency support slows every call 2.5-4x (DESIGN §12) and no feature needs it yet.
        .concurrency_support(false)
        .max_wasm_stack(config.max_wasm_stack)
        .async_stack_size(config.max_wasm_stack + config.async_stack)
        // Small reservations keep per-actor address space and mappings low (100k actors target).
        .memory_reservation(0)
        .memory_guard_size(0)
        .memory_reservation_for_growth(0)
        .memory_init_cow(false);
    if !config.pooling {
        // Memories and stacks from shared arenas: a few mappings for any number of actors.
        wasm.with_host_memory(Arc::new(Memories::new(config.memory_limit)))
            .with_host_stack(Arc::new(Stacks::new(
                config.max_wasm_stack + config.async_stack,
            )));
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

/// A thread that increments the engine's epoch every tick until dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Starts ticking `engine` every `config.epoch_tick`.
    pub(crate) fn start(engine: &Engine, config: &HostConfig) -> Result<Self, HostError> {
        let stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let tick = config.epoch_tick;
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("mote-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(EpochTicker {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
