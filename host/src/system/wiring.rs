//! How a host's layers below the kernel are wired together at start, for a host and for a
//! replay's sandbox alike.

use std::path::Path;
use std::sync::Arc;

use wasmtime::Engine;
use wasmtime::component::Linker;

use crate::caps::Caps;
use crate::caps::capability::Env;
use crate::caps::persistence::history::History;
use crate::config::HostConfig;
use crate::deploy::modules::{Backend, Modules};
use crate::error::HostError;
use crate::guestlog::GuestLog;
use crate::progress::Reports;
use crate::sandbox::arena::Stacks;
use crate::sandbox::engine::{EpochTicker, MemoryStrategy, build_engine};
use crate::sandbox::parking::Sweeper;
use crate::storage::Database;

/// The layers of a host below the kernel, wired together: the engines and their epoch ticker,
/// the capabilities, and the module registry (linked against those capabilities).
pub(super) struct Wiring {
    pub(super) caps: Arc<Caps>,
    pub(super) modules: Arc<Modules>,
    pub(super) guest_log: Arc<GuestLog>,
    pub(super) ticker: Option<EpochTicker>,
    /// The fiber stacks of both engines.
    pub(super) stacks: Arc<Stacks>,
    /// Gives parked stacks' pages back, if the host releases idle stacks.
    pub(super) sweeper: Option<Sweeper>,
    /// Where long work is reported.
    pub(super) reports: Arc<Reports>,
}

impl Wiring {
    /// Wires a host on `database` (its module versions are restored from it), or a replay's
    /// sandbox on `replay`, which has no database.
    pub(super) fn new(
        config: &HostConfig,
        database: Option<&Arc<Database>>,
        replay: Option<&Arc<History>>,
    ) -> Result<Wiring, HostError> {
        let stacks = Arc::new(Stacks::new(config.max_wasm_stack + config.async_stack));
        let mut engines = Vec::new();
        for memory in [MemoryStrategy::Arena, MemoryStrategy::Image] {
            engines.push(build_engine(config, memory, &stacks)?);
        }
        let sweeper = match config.stack_release {
            Some(period) if !config.pooling => Some(Sweeper::start(stacks.clone(), period)?),
            _ => None,
        };
        let ticker = match config.epoch_interruption {
            true => Some(EpochTicker::start(
                &engines.iter().collect::<Vec<_>>(),
                config,
            )?),
            false => None,
        };
        let guest_log = GuestLog::start(config.guest_log_queue);
        let caps = Arc::new(Caps::new(&Env {
            config,
            database,
            guest_log: &guest_log,
            replay,
        })?);
        // Compiled modules are cached beside the database file, the host's or the replay's.
        let file = (config.storage.as_deref()).or(replay.map(|h| h.database().path()));
        let cache = config
            .module_cache
            .clone()
            .or_else(|| file.map(|db| db.parent().unwrap_or(Path::new(".")).join("mote-cache")));
        let backend = |engine: Engine| -> Result<Backend, HostError> {
            let mut linker = Linker::new(&engine);
            Caps::link(&mut linker).map_err(|e| HostError::Engine(e.into()))?;
            crate::actor::inbox::link(&mut linker).map_err(|e| HostError::Engine(e.into()))?;
            Ok(Backend::new(engine, linker, cache.clone()))
        };
        let reports = Arc::new(Reports::default());
        let modules = Arc::new(Modules::new(
            engines
                .into_iter()
                .map(backend)
                .collect::<Result<Vec<_>, _>>()?,
            config.image_threshold,
            database.cloned(),
            reports.clone(),
        )?);
        Ok(Wiring {
            caps,
            modules,
            guest_log,
            ticker,
            stacks,
            sweeper,
            reports,
        })
    }
}
