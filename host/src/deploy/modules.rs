//! The module registry: deployed `.wasm` components by name and version, content-addressed by
//! the SHA-256 of their bytes, checked against the `mote:actor` contract (see [`checks`]),
//! compiled once (through the [`cache`]) and kept as an `InstancePre` from which every actor of
//! the module is instantiated.
//!
//! Invariants:
//! - Deploying the same bytes and grants under the same name and version again is a no-op;
//!   other bytes under a taken name and version are refused while an actor runs that version,
//!   and replace it otherwise (a rebuilt module during development).
//! - Each name has a *current* version, the one new actors get: the first deployed, then
//!   whatever an upgrade of all its actors moved to (see `deploy::upgrade`).
//! - With a database, every deployed version and every current version is recorded there, and
//!   a restarted host has them again as they were.
//! - A module is compiled for the engine of the memory strategy its bytes call for
//!   (`sandbox::engine::strategy_for`), and all its actors run on that engine.
//! - A module deployed with snapshots on is compiled from its instrumented bytes
//!   (`sandbox::instrument`), cached under their own hash: the same bytes deployed with and
//!   without snapshots never share a compiled artifact.
//! - Each version keeps its bytes (once, beside the compiled code), so that a host that joins
//!   a cluster can store them there whether or not it has a database.
//!
//! [`checks`]: super::checks
//! [`cache`]: super::cache

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use wasmtime::Engine;
use wasmtime::component::{Component, InstancePre, Linker};

use super::cache::{CompiledCache, ModuleStats};
use super::checks::{self, CLOCK_IMPORT};
use super::exports::ExportIndices;
use super::records::{self, ModuleRow};
use crate::actor::pull;
use crate::caps::ActorState;
use crate::error::{HostError, ModuleError};
use crate::progress::{Reports, Task};
use crate::sandbox::engine::{MemoryStrategy, strategy_for};
use crate::sandbox::image::Snapshots;
use crate::sandbox::instrument::{InstrumentError, instrument};
use crate::sandbox::shim::ShimExports;
use crate::storage::Database;

/// The version a module gets when none is given.
pub const DEFAULT_VERSION: &str = "0";

/// A compiled, checked module version ready to instantiate.
pub(crate) struct Module {
    pub(crate) name: Arc<str>,
    pub(crate) version: Arc<str>,
    /// SHA-256 of the component's bytes, hex.
    pub(crate) hash: Arc<str>,
    /// The component's bytes, kept so that a cluster can be given them (see `cluster::modules`).
    pub(crate) bytes: Arc<[u8]>,
    /// What it was granted beyond the defaults.
    pub(crate) grants: Vec<String>,
    /// The component linked against the host's capabilities, ready to instantiate.
    pub(crate) pre: InstancePre<ActorState>,
    /// Where the functions the host calls are, type-checked here rather than at every spawn.
    pub(crate) exports: ExportIndices,
    /// Whether it pulls bursts (`actor::pull`): it exports `packed-receive` and imports
    /// `inbox`, so its guest reads the packed flag that tells it to.
    pub(crate) pulls: bool,
    /// Whether its actors' CPU time is measured: only if it imports the `clock` interface,
    /// the one way to read it (two clock reads a guest call cost the others nothing).
    pub(crate) metered: bool,
    /// Where its instances' linear memory comes from.
    pub(crate) memory: MemoryStrategy,
    /// Set if it was deployed with snapshots on: its instances can be captured as images,
    /// through the shim its instrumented component carries.
    pub(crate) images: Option<Snapshots>,
}

/// One deployed module version, as listed by [`crate::ActorSystem::module_list`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleInfo {
    /// The module's name.
    pub name: String,
    /// The version.
    pub version: String,
    /// SHA-256 of its bytes, hex.
    pub hash: String,
    /// Whether new actors of this name get this version.
    pub current: bool,
    /// Whether it exports the `upgrade` state hooks.
    pub upgradable: bool,
    /// Whether its actors' CPU time is measured (it imports `clock`, the way to read it).
    pub metered: bool,
    /// Where its instances' linear memory comes from (see [`crate::HostConfig::image_threshold`]).
    pub memory: MemoryStrategy,
    /// What it was granted beyond the defaults (`snapshot` among them, if its actors can be
    /// captured as images).
    pub grants: Vec<String>,
}

/// All versions of one name.
struct Entry {
    versions: BTreeMap<String, Arc<Module>>,
    current: String,
    /// How long its actors idle before they hibernate, unless spawned with their own
    /// setting (see [`Modules::set_hibernation`]).
    hibernate_after: Option<Duration>,
}

/// One engine, the host's capabilities linked for it, and the cache of what it compiled.
pub(crate) struct Backend {
    engine: Engine,
    linker: Linker<ActorState>,
    cache: CompiledCache,
}

impl Backend {
    /// A backend compiling for `engine`, cached in `cache` (none: compile every time).
    pub(crate) fn new(engine: Engine, linker: Linker<ActorState>, cache: Option<PathBuf>) -> Self {
        Backend {
            cache: CompiledCache::new(&engine, cache),
            engine,
            linker,
        }
    }
}

/// The modules deployed on one host.
pub(crate) struct Modules {
    /// One backend per engine: arena memory, then copy-on-write images (see
    /// [`Modules::backend`]).
    backends: Vec<Backend>,
    /// From how many bytes of initial data a module goes on images.
    image_threshold: u64,
    by_name: RwLock<HashMap<String, Entry>>,
    /// Where deployed versions are recorded, if the host has a database.
    database: Option<Arc<Database>>,
    /// Where a compile is reported while it runs.
    reports: Arc<Reports>,
}

impl Modules {
    /// The registry of a host whose actors are linked by `linker`; with a database, the
    /// versions recorded there are deployed again, as they were.
    pub(crate) fn new(
        backends: Vec<Backend>,
        image_threshold: u64,
        database: Option<Arc<Database>>,
        reports: Arc<Reports>,
    ) -> Result<Self, HostError> {
        let modules = Modules {
            backends,
            image_threshold,
            by_name: RwLock::default(),
            database,
            reports,
        };
        if let Some(db) = &modules.database {
            records::open(db)?;
            modules.restore(db)?;
        }
        Ok(modules)
    }

    fn restore(&self, db: &Database) -> Result<(), HostError> {
        let (rows, current) = records::load(db)?;
        for row in rows {
            if let Err(e) = self.install(&row.name, &row.version, &row.bytes, &row.grants, true) {
                tracing::error!(module = %row.name, version = %row.version, error = %crate::error::chain(&e), "a recorded module could not be restored");
            }
        }
        for (name, version) in current {
            self.set_current_in_memory(&name, &version);
        }
        Ok(())
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<String, Entry>> {
        self.by_name.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<String, Entry>> {
        self.by_name.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads a module file: a regular file of at most `limit` bytes, both checked before
    /// anything is read (and the read stops past `limit`, should the file grow meanwhile).
    pub(crate) fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, ModuleError> {
        use std::io::Read;
        let failed = |source| ModuleError::Read {
            path: path.to_owned(),
            source,
        };
        // Non-blocking, so that a FIFO is refused below instead of waiting for a writer.
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(failed)?
        };
        let meta = file.metadata().map_err(failed)?;
        if !meta.is_file() {
            return Err(ModuleError::NotAFile {
                path: path.to_owned(),
            });
        }
        let too_large = |size| ModuleError::FileTooLarge {
            path: path.to_owned(),
            size,
            limit,
        };
        if meta.len() > limit {
            return Err(too_large(meta.len()));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(failed)?;
        if bytes.len() as u64 > limit {
            return Err(too_large(bytes.len() as u64));
        }
        Ok(bytes)
    }

    /// Deploys a module version (and records it). Returns whether it is new (false: the same
    /// bytes were already deployed under this version). Other bytes under a deployed name and
    /// version replace it only if `replace` (the caller checked that no actor runs it).
    pub(crate) fn deploy(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
        grants: &[String],
        replace: bool,
    ) -> Result<bool, ModuleError> {
        let (module, new) = self.install(name, version, bytes, grants, replace)?;
        if new && let Some(db) = &self.database {
            let row = ModuleRow {
                name: name.to_owned(),
                version: version.to_owned(),
                hash: module.hash.to_string(),
                grants: grants.to_vec(),
                bytes: bytes.to_vec(),
            };
            records::put(db, &row).map_err(ModuleError::Database)?;
        }
        Ok(new)
    }

    /// Compiles (or loads from the cache), checks and installs a module version.
    fn install(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
        grants: &[String],
        replace: bool,
    ) -> Result<(Arc<Module>, bool), ModuleError> {
        checks::validate_grants(grants)?;
        checks::validate_name("module", name)?;
        checks::validate_name("version", version)?;
        let hash = checks::content_hash(bytes);
        if let Some(existing) = self.get_version(name, version) {
            if *existing.hash == *hash && existing.grants == grants {
                return Ok((existing, false));
            }
            if !replace {
                return Err(ModuleError::VersionTaken {
                    name: name.to_owned(),
                    version: version.to_owned(),
                });
            }
        }
        checks::check_header(name, bytes)?;
        let memory = strategy_for(bytes, self.image_threshold);
        let backend = self.backend(memory);
        let snapshots = grants.iter().any(|g| g == checks::SNAPSHOT_GRANT);
        let instrumented = match snapshots {
            true => Some(instrument(bytes).map_err(|source| ModuleError::Snapshots {
                name: name.to_owned(),
                source,
            })?),
            false => None,
        };
        // What is compiled, and the key it is cached under: the hash of those bytes.
        let (compiled, key) = match &instrumented {
            Some(instrumented) => (
                &instrumented.bytes[..],
                checks::content_hash(&instrumented.bytes),
            ),
            None => (bytes, hash.clone()),
        };
        let component = backend
            .cache
            .component(&backend.engine, name, &key, compiled, || {
                let task = Task::Compile {
                    module: name.to_owned(),
                    version: version.to_owned(),
                    bytes: u64::try_from(bytes.len()).unwrap_or(u64::MAX),
                };
                self.reports.begin(task, None)
            })?;
        checks::check_contract(name, &component, &backend.engine)?;
        checks::check_imports(name, &component, &backend.engine, grants)?;
        checks::check_exports(name, &component, &backend.engine)?;
        let source = Source {
            name,
            version,
            hash,
            grants,
            bytes,
        };
        let mut module = prepare(backend, memory, source, &component)?;
        if let Some(instrumented) = instrumented {
            let exports = ShimExports::find(&component).ok_or_else(|| ModuleError::Snapshots {
                name: name.to_owned(),
                source: InstrumentError::Unsupported(
                    "the compiled component lacks the snapshot shim's exports".to_owned(),
                ),
            })?;
            module.images = Some(Snapshots::new(instrumented.layout, exports));
        }
        let module = Arc::new(module);
        let mut map = self.write();
        let entry = map.entry(name.to_owned()).or_insert_with(|| Entry {
            versions: BTreeMap::new(),
            current: version.to_owned(),
            hibernate_after: None,
        });
        match entry.versions.get(version) {
            Some(raced) if raced.hash == module.hash && raced.grants == module.grants => {
                Ok((raced.clone(), false))
            }
            Some(_) if !replace => Err(ModuleError::VersionTaken {
                name: name.to_owned(),
                version: version.to_owned(),
            }),
            _ => {
                entry.versions.insert(version.to_owned(), module.clone());
                tracing::info!(module = name, version, hash = %&module.hash[..12], "module deployed");
                Ok((module, true))
            }
        }
    }

    /// The current version of a module.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Module>> {
        let map = self.read();
        let entry = map.get(name)?;
        entry.versions.get(&entry.current).cloned()
    }

    /// Makes every actor of module `name` (whichever version, its actors' children included)
    /// hibernate after `after` idle, unless it was spawned with its own setting; `None` turns
    /// it off. Refused for a module whose current version has snapshots off.
    pub(crate) fn set_hibernation(
        &self,
        name: &str,
        after: Option<Duration>,
    ) -> Result<(), ModuleError> {
        let mut map = self.write();
        let entry = map.get_mut(name).ok_or_else(|| ModuleError::Unknown {
            name: name.to_owned(),
            version: None,
        })?;
        let current = entry.versions.get(&entry.current);
        if after.is_some() && current.is_none_or(|m| m.images.is_none()) {
            return Err(ModuleError::NoSnapshots {
                name: name.to_owned(),
            });
        }
        entry.hibernate_after = after;
        Ok(())
    }

    /// How long actors of module `name` idle before they hibernate, if set.
    pub(crate) fn hibernation(&self, name: &str) -> Option<Duration> {
        self.read().get(name)?.hibernate_after
    }

    /// One version of a module.
    pub(crate) fn get_version(&self, name: &str, version: &str) -> Option<Arc<Module>> {
        self.read().get(name)?.versions.get(version).cloned()
    }

    fn set_current_in_memory(&self, name: &str, version: &str) -> bool {
        match self.write().get_mut(name) {
            Some(entry) if entry.versions.contains_key(version) => {
                entry.current = version.to_owned();
                true
            }
            _ => false,
        }
    }

    /// Makes `version` the one new actors of `name` get (and records it).
    pub(crate) fn set_current(&self, name: &str, version: &str) -> Result<bool, ModuleError> {
        if !self.set_current_in_memory(name, version) {
            return Ok(false);
        }
        if let Some(db) = &self.database {
            records::set_current(db, name, version).map_err(ModuleError::Database)?;
        }
        Ok(true)
    }

    /// Removes a version (or every version), in memory and in the records: the caller checked
    /// that no actor runs it.
    pub(crate) fn remove(&self, name: &str, version: Option<&str>) -> Result<(), ModuleError> {
        let current = {
            let mut map = self.write();
            let Some(entry) = map.get_mut(name) else {
                return Ok(());
            };
            match version {
                Some(v) => {
                    entry.versions.remove(v);
                }
                None => entry.versions.clear(),
            }
            if entry.versions.is_empty() {
                map.remove(name);
                None
            } else {
                if !entry.versions.contains_key(&entry.current) {
                    // The newest remaining version becomes current.
                    if let Some(last) = entry.versions.keys().next_back().cloned() {
                        entry.current = last;
                    }
                }
                Some(entry.current.clone())
            }
        };
        if let Some(db) = &self.database {
            records::remove(db, name, version, current.as_deref())
                .map_err(ModuleError::Database)?;
        }
        Ok(())
    }

    /// The names of all deployed modules, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.read().keys().cloned().collect();
        names.sort();
        names
    }

    /// Every deployed version, sorted by name and version.
    pub(crate) fn list(&self) -> Vec<ModuleInfo> {
        let map = self.read();
        let mut out: Vec<ModuleInfo> = map
            .iter()
            .flat_map(|(name, entry)| {
                entry.versions.values().map(move |m| ModuleInfo {
                    name: name.clone(),
                    version: m.version.to_string(),
                    hash: m.hash.to_string(),
                    current: *m.version == *entry.current,
                    upgradable: m.exports.upgradable(),
                    metered: m.metered,
                    memory: m.memory,
                    grants: m.grants.clone(),
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
        out
    }

    /// Compilations and cache loads so far.
    pub(crate) fn stats(&self) -> ModuleStats {
        self.backends
            .iter()
            .map(|b| b.cache.stats())
            .fold(ModuleStats::default(), |a, b| ModuleStats {
                compiled: a.compiled + b.compiled,
                cache_hits: a.cache_hits + b.cache_hits,
            })
    }

    /// The backend of a memory strategy: engines are listed arena then image (see
    /// `system::wiring`).
    fn backend(&self, memory: MemoryStrategy) -> &Backend {
        &self.backends[usize::from(memory == MemoryStrategy::Image)]
    }
}

/// What a module version was deployed from.
struct Source<'a> {
    name: &'a str,
    version: &'a str,
    hash: String,
    grants: &'a [String],
    bytes: &'a [u8],
}

/// Links a checked component: its `InstancePre` and its optional exports.
fn prepare(
    backend: &Backend,
    memory: MemoryStrategy,
    source: Source<'_>,
    component: &Component,
) -> Result<Module, ModuleError> {
    let Source {
        name,
        version,
        hash,
        grants,
        bytes,
    } = source;
    let mismatch = |e: wasmtime::Error| ModuleError::WrongWorld {
        name: name.to_owned(),
        reason: "its imports do not match what the host provides".to_owned(),
        source: Some(e.into()),
    };
    let pre = backend
        .linker
        .instantiate_pre(component)
        .map_err(mismatch)?;
    let exports = ExportIndices::new(name, &pre)?;
    let imports = |prefix: &str| {
        (component.component_type().imports(&backend.engine)).any(|(i, _)| i.starts_with(prefix))
    };
    Ok(Module {
        name: Arc::from(name),
        version: Arc::from(version),
        hash: Arc::from(hash),
        bytes: Arc::from(bytes),
        grants: grants.to_vec(),
        pre,
        pulls: exports.packed_receive() && imports(pull::IMPORT),
        exports,
        metered: imports(CLOCK_IMPORT),
        memory,
        images: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Scratch;

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let scratch = Scratch::new("modules");
        let small = scratch.0.join("small.wasm");
        std::fs::write(&small, b"\0asm-ish").unwrap();
        assert_eq!(Modules::read_file(&small, 100).unwrap(), b"\0asm-ish");
        assert!(matches!(
            Modules::read_file(&small, 4),
            Err(ModuleError::FileTooLarge {
                size: 8,
                limit: 4,
                ..
            })
        ));
        // A sparse file of 1 TiB: refused by its size, nothing read.
        let huge = scratch.0.join("huge.wasm");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        assert!(matches!(
            Modules::read_file(&huge, 64 << 20),
            Err(ModuleError::FileTooLarge { .. })
        ));
        let fifo = scratch.0.join("fifo.wasm");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        for not_a_file in [Path::new("/dev/zero"), scratch.0.as_path(), fifo.as_path()] {
            assert!(
                matches!(
                    Modules::read_file(not_a_file, 64 << 20),
                    Err(ModuleError::NotAFile { .. })
                ),
                "{}",
                not_a_file.display()
            );
        }
        assert!(matches!(
            Modules::read_file(&scratch.0.join("missing.wasm"), 100),
            Err(ModuleError::Read { .. })
        ));
    }
}
