//! The compiled cache: components compiled once, kept on disk as wasmtime precompiled files
//! named by the content hash and the engine's compatibility hash, so a restarted host
//! deserializes (~50 µs) instead of compiling (tens of ms).
//!
//! Invariants:
//! - The cache holds only files this host wrote, each written whole (a temporary file, then a
//!   rename), so a reader never sees half a file.
//! - A file that does not load (damaged, or from another engine) is compiled again and
//!   rewritten; the cache never makes a deploy fail.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::error::ModuleError;
use crate::progress::Tracker;

/// How module loading went: compilations against loads from the compiled cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModuleStats {
    /// Components compiled from their bytes.
    pub compiled: u64,
    /// Components loaded from the compiled cache instead.
    pub cache_hits: u64,
}

/// Compiles components, through a directory of precompiled ones if there is one.
pub(crate) struct CompiledCache {
    dir: Option<PathBuf>,
    engine_hash: u64,
    compiled: AtomicU64,
    hits: AtomicU64,
}

impl CompiledCache {
    /// A cache in `dir` (none: compile every time) for components of `engine`.
    pub(crate) fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        CompiledCache {
            dir,
            engine_hash: h.finish(),
            compiled: AtomicU64::new(0),
            hits: AtomicU64::new(0),
        }
    }

    /// The component for `bytes` (whose SHA-256 is `hash`, the bytes compiled: an instrumented
    /// module's are not its deployed bytes): from the cache if it holds a usable copy,
    /// otherwise compiled (and then cached).
    pub(crate) fn component(
        &self,
        engine: &Engine,
        name: &str,
        hash: &str,
        bytes: &[u8],
        compiling: impl FnOnce() -> Tracker,
    ) -> Result<Component, ModuleError> {
        let cached = self
            .dir
            .as_ref()
            .map(|dir| dir.join(format!("{hash}-{:016x}.cwasm", self.engine_hash)));
        if let Some(file) = cached.as_ref().filter(|f| f.exists()) {
            // SAFETY: the cache directory holds only files this host serialized from components
            // it compiled, named by the content hash and the engine's compatibility hash;
            // wasmtime still checks the header and the engine configuration and refuses a
            // mismatch.
            match unsafe { Component::deserialize_file(engine, file) } {
                Ok(component) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(module = name, "loaded from the compiled cache");
                    return Ok(component);
                }
                Err(e) => {
                    tracing::warn!(module = name, error = %e, "compiled cache entry unusable; recompiling");
                }
            }
        }
        let tracker = compiling();
        let compiled = Component::new(engine, bytes);
        tracker.finish(compiled.as_ref().map(drop).map_err(|e| e.to_string()));
        let component = compiled.map_err(|e| ModuleError::Compile {
            name: name.to_owned(),
            source: e.into(),
        })?;
        self.compiled.fetch_add(1, Ordering::Relaxed);
        if let Some(file) = cached
            && let Err(e) = write(&file, &component)
        {
            tracing::warn!(module = name, error = %e, "could not write the compiled cache");
        }
        Ok(component)
    }

    /// Compilations and cache loads so far.
    pub(crate) fn stats(&self) -> ModuleStats {
        ModuleStats {
            compiled: self.compiled.load(Ordering::Relaxed),
            cache_hits: self.hits.load(Ordering::Relaxed),
        }
    }
}

/// Writes a compiled component to the cache atomically (temp file, then rename). The temporary
/// file is this write's own: two systems of one process compiling the same module at once must
/// not write into one file, or one could rename it while the other still writes.
fn write(file: &Path, component: &Component) -> std::io::Result<()> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let bytes = component.serialize().map_err(std::io::Error::other)?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let write = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = file.with_extension(format!("tmp{}-{write}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, file)
}
