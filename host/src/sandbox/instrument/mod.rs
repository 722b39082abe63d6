//! Instrumenting a component for images, at deploy of a module with snapshots on. Every core
//! module of the component that defines linear memory, tables or mutable globals gets extra
//! exports of them (`mote-snap:memory0`...). The snapshot shim ([`super::shim`]) is appended
//! to the component and instantiated last with the core instances of those modules, and its
//! functions are lifted and exported as `mote-snapshot-*`, which the host calls to read and
//! write the instance's core state ([`super::image`]). No wasmtime debug mode is involved: the
//! instrumented component compiles and runs on the ordinary engines.
//!
//! Invariants:
//! - Nothing the guest can observe changes. A core module keeps every section byte for byte
//!   but its export section, which keeps its entries and gains `mote-snap:` ones. The
//!   component keeps every section and gains only sections after them, so every index it
//!   defines stays what it was.
//! - The [`Layout`] lists exactly what the shim imports, in the shim's index order, each with
//!   the core instance (in creation order) and the index it came from; that order is the
//!   order of the slots, so a slot is found by binary search.
//! - A shape the rewrite does not handle is refused with an [`InstrumentError`], never passed
//!   on half-instrumented: a nested component with stateful core modules, a core module the
//!   component imports and instantiates, 64-bit or shared memories, custom page sizes, tables
//!   of 64 bits or of other references than `funcref` and `externref`, shared globals, names
//!   the instrumentation would take.
//! - The rewrite is a function of the bytes alone: two hosts instrument a module alike, so an
//!   image's slots mean the same on both.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use wasm_encoder::{
    Alias, CanonicalFunctionSection, CanonicalOption, Component, ComponentAliasSection,
    ComponentExportKind, ComponentExportSection, ComponentTypeSection, ComponentValType,
    ExportKind, InstanceSection, ModuleArg, ModuleSection, PrimitiveValType, RawSection,
};
use wasmparser::{
    ComponentAlias, ComponentExternalKind, ComponentOuterAliasKind, ComponentTypeRef, Encoding,
    Parser, Payload, ValidPayload, Validator, WasmFeatures,
};

use super::shim::{self, Imports, LIFTED, Lifted, Num, Ty};
use core_module::{ModuleScan, add_exports, scan_module};
pub use error::InstrumentError;
use error::unsupported;

mod core_module;
mod error;

/// Where a memory, table or global is: its core instance's place in creation order, and its
/// index in that instance's index space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct Slot {
    pub(crate) instance: u32,
    pub(crate) index: u32,
}

/// What an instrumented component's core state is made of, each list in the shim's index
/// order, which is the order of the slots (by core instance, then index).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Layout {
    /// How many core instances the component makes (the shim's not counted).
    pub(crate) instances: u32,
    /// Every linear memory a core instance defines.
    pub(crate) memories: Vec<Slot>,
    /// Every table a core instance defines.
    pub(crate) tables: Vec<Slot>,
    /// Every mutable global of a number type a core instance defines.
    pub(crate) globals: Vec<(Slot, Num)>,
    /// The mutable globals the shim cannot carry (vectors, references), with their type:
    /// an instance with any cannot be captured.
    pub(crate) uncapturable: Vec<(Slot, String)>,
}

/// A component instrumented for images.
pub(crate) struct Instrumented {
    pub(crate) bytes: Vec<u8>,
    pub(crate) layout: Layout,
}

/// A section of the top-level component, to be written again.
enum Section {
    /// Copied as it is.
    Raw(u8, Range<usize>),
    /// The core module of this ordinal among the component's module sections.
    Module(usize),
}

/// What the walk over the top level of a component found.
#[derive(Default)]
struct TopLevel {
    sections: Vec<Section>,
    /// Each module section's bytes.
    modules: Vec<Range<usize>>,
    /// The core module index space: the module section each index is, if it is one.
    module_index: Vec<Option<usize>>,
    /// The core instance index space: the module index each instantiates, if it does.
    instances: Vec<Option<u32>>,
    /// Sizes of the index spaces the appended sections extend.
    counts: Counts,
}

/// The sizes of the top-level index spaces, read from the validator.
#[derive(Default, Clone, Copy)]
struct Counts {
    modules: u32,
    core_instances: u32,
    core_funcs: u32,
    core_memories: u32,
    types: u32,
    funcs: u32,
}

/// Walks and validates (all but function bodies, which the compiler validates) a component.
fn walk(bytes: &[u8]) -> Result<TopLevel, InstrumentError> {
    let mut validator = Validator::new_with_features(WasmFeatures::all());
    let mut top = TopLevel::default();
    // How deep in nested modules and components the walk is.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload?;
        if let ValidPayload::End(types) = validator.payload(&payload)?
            && depth == 0
        {
            let types = types.as_ref();
            top.counts = Counts {
                modules: types.module_count(),
                core_instances: types.core_instance_count(),
                core_funcs: types.function_count(),
                core_memories: types.memory_count(),
                types: types.component_type_count(),
                funcs: types.component_function_count(),
            };
        }
        if depth > 0 {
            match &payload {
                Payload::ModuleSection {
                    unchecked_range, ..
                } => {
                    // Modules hold no modules: this one is in a nested component.
                    if !scan_module(&bytes[unchecked_range.clone()])?
                        .state
                        .is_empty()
                    {
                        return unsupported(
                            "a nested component holds a core module with state (memory, \
                             tables or mutable globals): images reach only the top-level \
                             component's core instances",
                        );
                    }
                    depth += 1;
                }
                Payload::ComponentSection { .. } => depth += 1,
                Payload::End(_) => depth -= 1,
                _ => {}
            }
            continue;
        }
        match &payload {
            Payload::Version { encoding, .. } => {
                if *encoding != Encoding::Component {
                    return unsupported("it is a core module, not a component");
                }
                continue;
            }
            Payload::ModuleSection {
                unchecked_range, ..
            } => {
                top.module_index.push(Some(top.modules.len()));
                top.sections.push(Section::Module(top.modules.len()));
                top.modules.push(unchecked_range.clone());
                depth += 1;
                continue;
            }
            Payload::ComponentSection { .. } => depth += 1,
            Payload::InstanceSection(reader) => {
                for instance in reader.clone() {
                    top.instances.push(match instance? {
                        wasmparser::Instance::Instantiate { module_index, .. } => {
                            Some(module_index)
                        }
                        wasmparser::Instance::FromExports(_) => None,
                    });
                }
            }
            Payload::ComponentImportSection(reader) => {
                for import in reader.clone() {
                    if let ComponentTypeRef::Module(_) = import?.ty {
                        top.module_index.push(None);
                    }
                }
            }
            Payload::ComponentExportSection(reader) => {
                for export in reader.clone() {
                    let export = export?;
                    if shim::is_reserved_export(export.name.name) {
                        return unsupported(format!(
                            "it exports `{}`, a name the snapshot shim takes",
                            export.name.name
                        ));
                    }
                    if export.kind == ComponentExternalKind::Module {
                        let exported = top.module_index.get(export.index as usize).copied();
                        top.module_index.push(exported.flatten());
                    }
                }
            }
            Payload::ComponentAliasSection(reader) => {
                for alias in reader.clone() {
                    match alias? {
                        ComponentAlias::InstanceExport {
                            kind: ComponentExternalKind::Module,
                            ..
                        }
                        | ComponentAlias::Outer {
                            kind: ComponentOuterAliasKind::CoreModule,
                            ..
                        } => top.module_index.push(None),
                        _ => {}
                    }
                }
            }
            Payload::End(_) => continue,
            _ => {}
        }
        if let Some((id, range)) = payload.as_section() {
            top.sections.push(Section::Raw(id, range));
        }
    }
    if top.module_index.len() != top.counts.modules as usize
        || top.instances.len() != top.counts.core_instances as usize
    {
        return unsupported(format!(
            "its core modules or instances could not be told apart ({} modules and {} \
             instances seen, {} and {} declared)",
            top.module_index.len(),
            top.instances.len(),
            top.counts.modules,
            top.counts.core_instances
        ));
    }
    Ok(top)
}

/// Instruments a component for images (see the module doc).
pub(crate) fn instrument(bytes: &[u8]) -> Result<Instrumented, InstrumentError> {
    let top = walk(bytes)?;
    // Each module section's scan, for those instantiated.
    let mut scans: Vec<Option<ModuleScan>> = (0..top.modules.len()).map(|_| None).collect();
    let mut layout = Layout {
        instances: top.instances.len() as u32,
        ..Layout::default()
    };
    let mut imports = Imports::default();
    let mut stateful = Vec::new();
    for (instance, module) in top.instances.iter().enumerate() {
        let instance = instance as u32;
        let Some(module) = *module else {
            continue;
        };
        let Some(Some(ordinal)) = top.module_index.get(module as usize).copied() else {
            return unsupported(format!(
                "core instance {instance} instantiates a core module the component does not \
                 define (imported or aliased): its state is out of reach"
            ));
        };
        if scans[ordinal].is_none() {
            scans[ordinal] = Some(scan_module(&bytes[top.modules[ordinal].clone()])?);
        }
        let Some(scan) = &scans[ordinal] else {
            continue;
        };
        let state = &scan.state;
        if state.is_empty() {
            continue;
        }
        let slot = |index| Slot { instance, index };
        for &index in &state.memories {
            layout.memories.push(slot(index));
            imports.memories.push((instance, index));
        }
        for &(index, element) in &state.tables {
            layout.tables.push(slot(index));
            imports.tables.push((instance, index, element));
        }
        for &(index, num) in &state.globals {
            layout.globals.push((slot(index), num));
            imports.globals.push((instance, index, num));
        }
        for (index, ty) in &state.uncapturable {
            layout.uncapturable.push((slot(*index), ty.clone()));
        }
        stateful.push(instance);
    }

    let mut component = Component::new();
    for section in &top.sections {
        match section {
            Section::Raw(id, range) => {
                component.section(&RawSection {
                    id: *id,
                    data: &bytes[range.clone()],
                });
            }
            Section::Module(ordinal) => {
                let original = &bytes[top.modules[*ordinal].clone()];
                let rewritten = match &scans[*ordinal] {
                    Some(scan) if !scan.state.is_empty() => Some(add_exports(original, scan)?),
                    _ => None,
                };
                component.section(&RawSection {
                    id: wasm_encoder::ComponentSectionId::CoreModule as u8,
                    data: rewritten.as_deref().unwrap_or(original),
                });
            }
        }
    }
    append_shim(&mut component, top.counts, &imports, &stateful);
    Ok(Instrumented {
        bytes: component.finish(),
        layout,
    })
}

/// Appends the shim: its module, its instance (given the `stateful` core instances), the
/// aliases of its memory and functions, their types, their lifts and their exports.
fn append_shim(component: &mut Component, counts: Counts, imports: &Imports, stateful: &[u32]) {
    component.section(&ModuleSection(&shim::module(imports)));

    let mut instances = InstanceSection::new();
    instances.instantiate(
        counts.modules,
        stateful
            .iter()
            .map(|&i| (shim::instance_import(i), ModuleArg::Instance(i))),
    );
    component.section(&instances);
    let shim_instance = counts.core_instances;

    let mut aliases = ComponentAliasSection::new();
    let core = |kind, name| Alias::CoreInstanceExport {
        instance: shim_instance,
        kind,
        name,
    };
    aliases.alias(core(ExportKind::Memory, shim::MEMORY_EXPORT));
    aliases.alias(core(ExportKind::Func, shim::REALLOC_EXPORT));
    for lifted in &LIFTED {
        aliases.alias(core(ExportKind::Func, lifted.name));
    }
    component.section(&aliases);
    let memory = counts.core_memories;
    let realloc = counts.core_funcs;
    let first_func = counts.core_funcs + 1;

    // `list<u8>`, `list<u32>` and `list<u64>`, then one function type per lifted function.
    let (bytes_type, numbers_type, words_type) = (counts.types, counts.types + 1, counts.types + 2);
    let mut types = ComponentTypeSection::new();
    for element in [
        PrimitiveValType::U8,
        PrimitiveValType::U32,
        PrimitiveValType::U64,
    ] {
        types
            .defined_type()
            .list(ComponentValType::Primitive(element));
    }
    let value = |ty: Ty| match ty {
        Ty::U32 => ComponentValType::Primitive(PrimitiveValType::U32),
        Ty::S32 => ComponentValType::Primitive(PrimitiveValType::S32),
        Ty::Bytes => ComponentValType::Type(bytes_type),
        Ty::Numbers => ComponentValType::Type(numbers_type),
        Ty::Words => ComponentValType::Type(words_type),
    };
    for lifted in &LIFTED {
        types
            .function()
            .params(lifted.params.iter().map(|&(name, ty)| (name, value(ty))))
            .result(lifted.result.map(value));
    }
    component.section(&types);

    let mut lifts = CanonicalFunctionSection::new();
    for (k, lifted) in LIFTED.iter().enumerate() {
        let k = k as u32;
        lifts.lift(
            first_func + k,
            words_type + 1 + k,
            options(lifted, memory, realloc),
        );
    }
    component.section(&lifts);

    let mut exports = ComponentExportSection::new();
    for (k, lifted) in LIFTED.iter().enumerate() {
        let name = shim::export_name(lifted);
        exports.export(
            &name,
            ComponentExportKind::Func,
            counts.funcs + k as u32,
            None,
        );
    }
    component.section(&exports);
}

/// The canonical options a lifted shim function needs.
fn options(lifted: &Lifted, memory: u32, realloc: u32) -> Vec<CanonicalOption> {
    let mut options = Vec::new();
    if lifted.memory {
        options.push(CanonicalOption::Memory(memory));
    }
    if lifted.realloc {
        options.push(CanonicalOption::Realloc(realloc));
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component with a stateful module that exports functions (`$a`: a memory with passive
    /// data, mutable i32 and f64 globals, an immutable one, a table), a stateful module with
    /// no export section and a data count section (`$c`), and a stateless one (`$b`).
    const WAT: &str = r#"(component
        (core module $a
            (memory 1)
            (data "passive")
            (global $sp (mut i32) (i32.const 1024))
            (global $k i32 (i32.const 7))
            (global $x (mut f64) (f64.const 1.5))
            (table 2 funcref)
            (func (export "init") (memory.init 0 (i32.const 0) (i32.const 0) (i32.const 7)))
            (func (export "sp") (result i32) (global.get $sp)))
        (core module $b (func (export "nothing")))
        (core module $c
            (memory 1)
            (data "more")
            (func $f (memory.init 0 (i32.const 0) (i32.const 0) (i32.const 4)) (data.drop 0))
            (start $f))
        (core instance $ia (instantiate $a))
        (core instance $ib (instantiate $b))
        (core instance $ic (instantiate $c))
        (func (export "sp") (result u32) (canon lift (core func $ia "sp"))))"#;

    /// The top-level core modules of a component, in order.
    fn modules(bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut depth = 0;
        for payload in Parser::new(0).parse_all(bytes) {
            match payload.unwrap() {
                Payload::ModuleSection {
                    unchecked_range, ..
                } => {
                    if depth == 0 {
                        out.push(bytes[unchecked_range].to_vec());
                    }
                    depth += 1;
                }
                Payload::ComponentSection { .. } => depth += 1,
                Payload::End(_) => depth -= 1,
                _ => {}
            }
        }
        out
    }

    /// A core module's sections, id and content, its export section left out.
    fn sections_but_exports(module: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        for payload in Parser::new(0).parse_all(module) {
            if let Some((id, range)) = payload.unwrap().as_section()
                && id != 7
            {
                out.push((id, module[range].to_vec()));
            }
        }
        out
    }

    /// A core module's export names.
    fn export_names(module: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for payload in Parser::new(0).parse_all(module) {
            if let Payload::ExportSection(reader) = payload.unwrap() {
                out.extend(reader.into_iter().map(|e| e.unwrap().name.to_owned()));
            }
        }
        out
    }

    fn slot(instance: u32, index: u32) -> Slot {
        Slot { instance, index }
    }

    fn refusal(wat: &str) -> String {
        match instrument(&wat::parse_str(wat).unwrap()) {
            Err(InstrumentError::Unsupported(why)) => why,
            Err(other) => panic!("refused for another reason: {other}"),
            Ok(_) => panic!("not refused"),
        }
    }

    #[test]
    fn stateful_modules_gain_exports_and_keep_every_other_section_byte_for_byte() {
        let original = wat::parse_str(WAT).unwrap();
        let instrumented = instrument(&original).unwrap();
        Validator::new_with_features(WasmFeatures::all())
            .validate_all(&instrumented.bytes)
            .expect("the instrumented component is valid, function bodies included");
        assert_eq!(
            instrumented.layout,
            Layout {
                instances: 3,
                memories: vec![slot(0, 0), slot(2, 0)],
                tables: vec![slot(0, 0)],
                globals: vec![(slot(0, 0), Num::I32), (slot(0, 2), Num::F64)],
                uncapturable: Vec::new(),
            }
        );
        let layout = &instrumented.layout;
        assert!(layout.memories.is_sorted() && layout.tables.is_sorted());
        assert!(layout.globals.is_sorted_by_key(|&(slot, _)| slot));
        let (before, after) = (modules(&original), modules(&instrumented.bytes));
        assert_eq!(after.len(), before.len() + 1, "the shim is appended");
        for (old, new) in before.iter().zip(&after) {
            assert_eq!(sections_but_exports(old), sections_but_exports(new));
        }
        assert_eq!(after[1], before[1], "the stateless module is untouched");
        assert_eq!(
            export_names(&after[0]),
            [
                "init",
                "sp",
                "mote-snap:memory0",
                "mote-snap:table0",
                "mote-snap:global0",
                "mote-snap:global2"
            ]
        );
        // The module without exports gets its export section before its data count section.
        assert_eq!(export_names(&after[2]), ["mote-snap:memory0"]);
        let engine = wasmtime::Engine::default();
        let component = wasmtime::component::Component::new(&engine, &instrumented.bytes)
            .expect("wasmtime compiles it");
        assert!(shim::ShimExports::find(&component).is_some());
    }

    #[test]
    fn a_component_without_state_keeps_its_modules_and_still_gets_the_shim() {
        let original = wat::parse_str(
            r#"(component
                (core module $b (func (export "nothing")))
                (core instance (instantiate $b)))"#,
        )
        .unwrap();
        let instrumented = instrument(&original).unwrap();
        assert_eq!(
            instrumented.layout,
            Layout {
                instances: 1,
                ..Layout::default()
            }
        );
        assert_eq!(modules(&instrumented.bytes)[0], modules(&original)[0]);
        let engine = wasmtime::Engine::default();
        let component = wasmtime::component::Component::new(&engine, &instrumented.bytes).unwrap();
        assert!(shim::ShimExports::find(&component).is_some());
    }

    #[test]
    fn shapes_images_cannot_reach_are_refused_with_the_reason() {
        let memory64 = refusal(
            r#"(component (core module $m (memory i64 1)) (core instance (instantiate $m)))"#,
        );
        assert!(memory64.contains("64-bit or shared memory"), "{memory64}");
        let shared = refusal(
            r#"(component (core module $m (memory 1 1 shared)) (core instance (instantiate $m)))"#,
        );
        assert!(shared.contains("64-bit or shared memory"), "{shared}");
        let nested = refusal(
            r#"(component
                (component $inner
                    (core module $m (global (mut i32) (i32.const 0)))
                    (core instance (instantiate $m))))"#,
        );
        assert!(nested.contains("nested component"), "{nested}");
        let imported = refusal(
            r#"(component
                (import "m" (core module $m))
                (core instance (instantiate $m)))"#,
        );
        assert!(imported.contains("does not define"), "{imported}");
        let taken = refusal(
            r#"(component
                (core module $m (func (export "f")))
                (core instance $i (instantiate $m))
                (func (export "mote-snapshot-read") (canon lift (core func $i "f"))))"#,
        );
        assert!(taken.contains("mote-snapshot-read"), "{taken}");
        let core = instrument(&wat::parse_str("(module)").unwrap());
        assert!(
            matches!(&core, Err(InstrumentError::Unsupported(why)) if why.contains("core module")),
            "{:?}",
            core.err()
        );
        assert!(matches!(
            instrument(b"\0asm\x0d\0\x01\0garbage"),
            Err(InstrumentError::Invalid(_))
        ));
    }

    #[test]
    fn a_stateless_nested_component_is_kept() {
        let original = wat::parse_str(
            r#"(component
                (component $inner (core module $m (func (export "f"))))
                (core module $a (memory 1))
                (core instance (instantiate $a)))"#,
        )
        .unwrap();
        let instrumented = instrument(&original).unwrap();
        assert_eq!(instrumented.layout.memories, vec![slot(0, 0)]);
        Validator::new_with_features(WasmFeatures::all())
            .validate_all(&instrumented.bytes)
            .unwrap();
    }
}
