//! Deployed modules: `.wasm` components checked against the `mote:actor` world, compiled once and
//! kept as an `InstancePre` from which every actor of the module is instantiated.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, RwLock};

use wasmtime::Engine;
use wasmtime::component::{Component, ComponentExportIndex, Linker};

use crate::bindings::ActorWorldPre;
use crate::error::ModuleError;
use crate::instance::ActorState;

/// The export every actor must provide.
pub(crate) const ACTOR_EXPORT: &str = "mote:actor/actor@0.1.0";
/// The optional export through which a parent decides about failed children.
pub(crate) const SUPERVISOR_EXPORT: &str = "mote:actor/supervisor@0.1.0";

/// A compiled, checked module ready to instantiate.
pub(crate) struct Module {
    pub(crate) name: Arc<str>,
    pub(crate) pre: ActorWorldPre<ActorState>,
    /// The `supervise` function, if the component exports `supervisor`.
    pub(crate) supervise: Option<ComponentExportIndex>,
    digest: u64,
}

/// The modules deployed on one system, by name.
pub(crate) struct Modules {
    engine: Engine,
    linker: Linker<ActorState>,
    by_name: RwLock<HashMap<String, Arc<Module>>>,
}

fn validate_module_name(name: &str) -> Result<(), ModuleError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(ModuleError::InvalidName(name.to_owned()))
    }
}

fn digest(bytes: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
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

impl Modules {
    pub(crate) fn new(engine: Engine, linker: Linker<ActorState>) -> Self {
        Modules {
            engine,
            linker,
            by_name: RwLock::default(),
        }
    }

    /// Reads, compiles and deploys a module from a file.
    pub(crate) fn deploy_file(&self, name: &str, path: &Path) -> Result<Arc<Module>, ModuleError> {
        let bytes = std::fs::read(path).map_err(|source| ModuleError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.deploy(name, &bytes)
    }

    /// Compiles and deploys a module. The same bytes under the same name again are a no-op.
    pub(crate) fn deploy(&self, name: &str, bytes: &[u8]) -> Result<Arc<Module>, ModuleError> {
        validate_module_name(name)?;
        let digest = digest(bytes);
        if let Some(existing) = self.get(name) {
            return if existing.digest == digest {
                Ok(existing)
            } else {
                Err(ModuleError::NameTaken(name.to_owned()))
            };
        }
        check_header(name, bytes)?;
        let component = Component::new(&self.engine, bytes).map_err(|e| ModuleError::Compile {
            name: name.to_owned(),
            reason: format!("{e:#}"),
        })?;
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
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| wrong_world(format!("{e:#}")))?;
        let pre = ActorWorldPre::new(pre).map_err(|e| wrong_world(format!("{e:#}")))?;
        let supervise = component
            .get_export_index(None, SUPERVISOR_EXPORT)
            .and_then(|iface| component.get_export_index(Some(&iface), "supervise"));
        let module = Arc::new(Module {
            name: Arc::from(name),
            pre,
            supervise,
            digest,
        });
        let mut map = self.by_name.write().unwrap_or_else(|p| p.into_inner());
        match map.get(name) {
            Some(raced) if raced.digest != digest => Err(ModuleError::NameTaken(name.to_owned())),
            Some(raced) => Ok(raced.clone()),
            None => {
                map.insert(name.to_owned(), module.clone());
                tracing::info!(module = name, "module deployed");
                Ok(module)
            }
        }
    }

    /// A deployed module by name.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Module>> {
        self.by_name
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// The names of all deployed modules, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .by_name
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }
}

fn list_or_nothing(items: &[&str]) -> String {
    if items.is_empty() {
        "nothing".to_owned()
    } else {
        items.join(", ")
    }
}
