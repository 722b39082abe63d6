//! The module registry: deployed `.wasm` components by name and version, content-addressed by
//! the SHA-256 of their bytes, checked against the `mote:actor` contract, compiled once and kept
//! as an `InstancePre` from which every actor of the module is instantiated.
//!
//! - Deploying the same bytes under the same name and version again is a no-op; other bytes under
//!   a taken name and version are refused while an actor runs that version, and replace it
//!   otherwise (a rebuilt module during development).
//! - Each name has a *current* version, the one new actors get: the first deployed, then whatever
//!   an upgrade of all its actors moved to (see [`crate::upgrade`]).
//! - Compiled code is cached on disk as wasmtime precompiled components, keyed by the content
//!   hash and the engine's compatibility hash, so a restarted host deserializes (~50 µs) instead
//!   of compiling (tens of ms). The cache holds only files this host wrote; a damaged or stale
//!   file is recompiled and rewritten.
//! - A component built against another `mote:actor` contract version is refused at deploy with a
//!   message naming both versions.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, ComponentExportIndex, Linker};

use crate::bindings::ActorWorldPre;
use crate::error::ModuleError;
use crate::instance::ActorState;

/// The `mote:actor` contract version this host provides.
pub const CONTRACT_VERSION: &str = "0.1.0";
/// The export every actor must provide.
pub(crate) const ACTOR_EXPORT: &str = "mote:actor/actor@0.1.0";
/// The optional export through which a parent decides about failed children.
pub(crate) const SUPERVISOR_EXPORT: &str = "mote:actor/supervisor@0.1.0";
/// The optional export through which an actor carries its state across an upgrade.
pub(crate) const UPGRADE_EXPORT: &str = "mote:actor/upgrade@0.1.0";
/// The version a module gets when none is given.
pub const DEFAULT_VERSION: &str = "0";

/// The functions of the optional `upgrade` export.
#[derive(Clone, Copy)]
pub(crate) struct UpgradeExports {
    pub(crate) save_state: ComponentExportIndex,
    pub(crate) migrate: ComponentExportIndex,
}

/// A compiled, checked module ready to instantiate.
pub(crate) struct Module {
    pub(crate) name: Arc<str>,
    pub(crate) version: Arc<str>,
    /// SHA-256 of the component's bytes, hex.
    pub(crate) hash: String,
    /// What it was granted beyond the defaults.
    pub(crate) grants: Vec<String>,
    pub(crate) pre: ActorWorldPre<ActorState>,
    /// The `supervise` function, if the component exports `supervisor`.
    pub(crate) supervise: Option<ComponentExportIndex>,
    /// The state hooks, if the component exports `upgrade`.
    pub(crate) upgrade: Option<UpgradeExports>,
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
    /// What it was granted beyond the defaults.
    pub grants: Vec<String>,
}

/// How module loading went: compilations against loads from the compiled cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModuleStats {
    /// Components compiled from their bytes.
    pub compiled: u64,
    /// Components loaded from the compiled cache instead.
    pub cache_hits: u64,
}

/// All versions of one name.
struct Entry {
    versions: BTreeMap<String, Arc<Module>>,
    current: String,
}

/// The modules deployed on one system.
pub(crate) struct Modules {
    engine: Engine,
    linker: Linker<ActorState>,
    /// The linker plus `wasi:http`, for modules granted it.
    http_linker: Linker<ActorState>,
    by_name: RwLock<HashMap<String, Entry>>,
    cache: Option<PathBuf>,
    engine_hash: u64,
    compiled: AtomicU64,
    cache_hits: AtomicU64,
}

fn validate_name(what: &str, name: &str) -> Result<(), ModuleError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(ModuleError::InvalidName(format!("{what} {name}")))
    }
}

/// SHA-256 of `bytes`, hex.
pub(crate) fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Tells a component from a core module or something else by the header alone.
fn check_header(name: &str, bytes: &[u8]) -> Result<(), ModuleError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(ModuleError::NotWasm {
            name: name.to_owned(),
        });
    }
    // Bytes 4..8 are version + layer: layer 0 is a core module, layer 1 a component.
    if bytes[6..8] == [0, 0] {
        return Err(ModuleError::CoreModule {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Whether a contract version a component was built against works with this host's: the same
/// major version, and for 0.x the same minor version (semver).
fn compatible(found: &str) -> bool {
    let parts = |v: &str| -> Vec<u64> {
        v.split('.')
            .map(|p| p.parse().unwrap_or(u64::MAX))
            .collect()
    };
    let (found, ours) = (parts(found), parts(CONTRACT_VERSION));
    if found.len() != 3 {
        return false;
    }
    match ours[0] {
        0 => found[0] == 0 && found[1] == ours[1],
        major => found[0] == major,
    }
}

/// The interfaces an actor may import: the contract and the WASI p2 interfaces the host links
/// (clocks, random and stdio work; the filesystem has no directories and sockets refuse).
const GRANTED: &[&str] = &[
    "mote:actor/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:cli/",
    "wasi:filesystem/",
    "wasi:sockets/",
];

/// What a module may be granted beyond the defaults, by a manifest (`grant = ["wasi:http"]`).
pub const GRANTABLE: &[&str] = &["wasi:http"];

/// Refuses a component that imports an interface the host does not grant it (`wasi:http`
/// unless granted, say). Returns whether it imports `wasi:http`.
fn check_grants(
    name: &str,
    component: &Component,
    engine: &Engine,
    grants: &[String],
) -> Result<bool, ModuleError> {
    let ty = component.component_type();
    let mut http = false;
    for (import, _) in ty.imports(engine) {
        if import.starts_with("wasi:http/") && grants.iter().any(|g| g == "wasi:http") {
            http = true;
            continue;
        }
        if !GRANTED.iter().any(|prefix| import.starts_with(prefix)) {
            return Err(ModuleError::NotGranted {
                name: name.to_owned(),
                import: import.to_owned(),
            });
        }
    }
    Ok(http)
}

/// Refuses a component whose `mote:actor` imports or exports name another contract version.
fn check_contract(name: &str, component: &Component, engine: &Engine) -> Result<(), ModuleError> {
    let ty = component.component_type();
    let names = ty
        .imports(engine)
        .map(|(n, _)| n)
        .chain(ty.exports(engine).map(|(n, _)| n));
    for item in names {
        if let Some(rest) = item.strip_prefix("mote:actor/")
            && let Some((_, version)) = rest.split_once('@')
            && !compatible(version)
        {
            return Err(ModuleError::ContractVersion {
                name: name.to_owned(),
                found: version.to_owned(),
                host: CONTRACT_VERSION.to_owned(),
                item: item.to_owned(),
            });
        }
    }
    Ok(())
}

impl Modules {
    pub(crate) fn new(
        engine: Engine,
        linker: Linker<ActorState>,
        http_linker: Linker<ActorState>,
        cache: Option<PathBuf>,
    ) -> Self {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        Modules {
            engine_hash: h.finish(),
            engine,
            linker,
            http_linker,
            by_name: RwLock::default(),
            cache,
            compiled: AtomicU64::new(0),
            cache_hits: AtomicU64::new(0),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Entry>> {
        self.by_name.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Entry>> {
        self.by_name.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads a module file.
    pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, ModuleError> {
        std::fs::read(path).map_err(|source| ModuleError::Read {
            path: path.to_owned(),
            source,
        })
    }

    /// Compiles (or loads from the cache) and deploys a module version. Returns the module and
    /// whether it is new (false: the same bytes were already deployed under this version).
    /// Other bytes under a deployed name and version replace it only if `replace` (the caller
    /// checked that no actor runs it); otherwise they are refused.
    pub(crate) fn deploy(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
        grants: &[String],
        replace: bool,
    ) -> Result<(Arc<Module>, bool), ModuleError> {
        if let Some(unknown) = grants.iter().find(|g| !GRANTABLE.contains(&g.as_str())) {
            return Err(ModuleError::InvalidName(format!(
                "grant {unknown} (grantable: {})",
                GRANTABLE.join(", ")
            )));
        }
        validate_name("module", name)?;
        validate_name("version", version)?;
        let hash = content_hash(bytes);
        if let Some(existing) = self.get_version(name, version) {
            if existing.hash == hash && existing.grants == grants {
                return Ok((existing, false));
            }
            if !replace {
                return Err(ModuleError::VersionTaken {
                    name: name.to_owned(),
                    version: version.to_owned(),
                });
            }
        }
        check_header(name, bytes)?;
        let component = self.component(name, &hash, bytes)?;
        check_contract(name, &component, &self.engine)?;
        let http = check_grants(name, &component, &self.engine, grants)?;
        let wrong_world = |reason: String| ModuleError::WrongWorld {
            name: name.to_owned(),
            reason,
        };
        let ty = component.component_type();
        if ty.get_export(&self.engine, ACTOR_EXPORT).is_none() {
            let exports: Vec<&str> = ty.exports(&self.engine).map(|(n, _)| n).collect();
            return Err(wrong_world(format!(
                "missing export `{ACTOR_EXPORT}` (it exports: {})",
                list_or_nothing(&exports)
            )));
        }
        let linker = if http {
            &self.http_linker
        } else {
            &self.linker
        };
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| wrong_world(format!("{e:#}")))?;
        let pre = ActorWorldPre::new(pre).map_err(|e| wrong_world(format!("{e:#}")))?;
        let export = |iface: &str, func: &str| {
            component
                .get_export_index(None, iface)
                .and_then(|i| component.get_export_index(Some(&i), func))
        };
        let upgrade = match (
            export(UPGRADE_EXPORT, "save-state"),
            export(UPGRADE_EXPORT, "migrate"),
        ) {
            (Some(save_state), Some(migrate)) => Some(UpgradeExports {
                save_state,
                migrate,
            }),
            _ => None,
        };
        let module = Arc::new(Module {
            name: Arc::from(name),
            version: Arc::from(version),
            hash,
            grants: grants.to_vec(),
            pre,
            supervise: export(SUPERVISOR_EXPORT, "supervise"),
            upgrade,
        });
        let mut map = self.write();
        let entry = map.entry(name.to_owned()).or_insert_with(|| Entry {
            versions: BTreeMap::new(),
            current: version.to_owned(),
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

    /// The component for `bytes`: from the compiled cache if it holds a usable copy, otherwise
    /// compiled (and then cached).
    fn component(&self, name: &str, hash: &str, bytes: &[u8]) -> Result<Component, ModuleError> {
        let cached = self
            .cache
            .as_ref()
            .map(|dir| dir.join(format!("{hash}-{:016x}.cwasm", self.engine_hash)));
        if let Some(file) = cached.as_ref().filter(|f| f.exists()) {
            // SAFETY: the cache directory holds only files this host serialized from components it
            // compiled, named by the content hash and the engine's compatibility hash; wasmtime
            // still checks the header and the engine configuration and refuses a mismatch.
            match unsafe { Component::deserialize_file(&self.engine, file) } {
                Ok(component) => {
                    self.cache_hits.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(module = name, "loaded from the compiled cache");
                    return Ok(component);
                }
                Err(e) => {
                    tracing::warn!(module = name, error = %e, "compiled cache entry unusable; recompiling");
                }
            }
        }
        let component = Component::new(&self.engine, bytes).map_err(|e| ModuleError::Compile {
            name: name.to_owned(),
            reason: format!("{e:#}"),
        })?;
        self.compiled.fetch_add(1, Ordering::Relaxed);
        if let Some(file) = cached
            && let Err(e) = write_cache(&file, &component)
        {
            tracing::warn!(module = name, error = %e, "could not write the compiled cache");
        }
        Ok(component)
    }

    /// The current version of a module.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Module>> {
        let map = self.read();
        let entry = map.get(name)?;
        entry.versions.get(&entry.current).cloned()
    }

    /// One version of a module.
    pub(crate) fn get_version(&self, name: &str, version: &str) -> Option<Arc<Module>> {
        self.read().get(name)?.versions.get(version).cloned()
    }

    /// Makes `version` the one new actors of `name` get.
    pub(crate) fn set_current(&self, name: &str, version: &str) -> bool {
        let mut map = self.write();
        match map.get_mut(name) {
            Some(entry) if entry.versions.contains_key(version) => {
                entry.current = version.to_owned();
                true
            }
            _ => false,
        }
    }

    /// Removes a version (or every version): the caller checked no actor runs it.
    pub(crate) fn remove(&self, name: &str, version: Option<&str>) -> Vec<Arc<Module>> {
        let mut map = self.write();
        let Some(entry) = map.get_mut(name) else {
            return Vec::new();
        };
        let removed: Vec<Arc<Module>> = match version {
            Some(v) => entry.versions.remove(v).into_iter().collect(),
            None => std::mem::take(&mut entry.versions).into_values().collect(),
        };
        if entry.versions.is_empty() {
            map.remove(name);
        } else if !entry.versions.contains_key(&entry.current) {
            // The newest remaining version becomes current.
            if let Some(last) = entry.versions.keys().next_back().cloned() {
                entry.current = last;
            }
        }
        removed
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
                    hash: m.hash.clone(),
                    current: *m.version == *entry.current,
                    upgradable: m.upgrade.is_some(),
                    grants: m.grants.clone(),
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
        out
    }

    /// The current version of `name`, if deployed.
    pub(crate) fn current_version(&self, name: &str) -> Option<String> {
        self.read().get(name).map(|e| e.current.clone())
    }

    /// Compilations and cache loads so far.
    pub(crate) fn stats(&self) -> ModuleStats {
        ModuleStats {
            compiled: self.compiled.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
        }
    }
}

/// Writes a compiled component to the cache atomically (temp file, then rename).
fn write_cache(file: &Path, component: &Component) -> std::io::Result<()> {
    let bytes = component.serialize().map_err(std::io::Error::other)?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, file)
}

fn list_or_nothing(items: &[&str]) -> String {
    if items.is_empty() {
        "nothing".to_owned()
    } else {
        items.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_versions_follow_semver() {
        assert!(compatible("0.1.0"));
        assert!(compatible("0.1.7"));
        assert!(!compatible("0.2.0"));
        assert!(!compatible("1.1.0"));
        assert!(!compatible("0.1"));
    }

    #[test]
    fn content_hash_is_sha256() {
        assert_eq!(
            content_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
