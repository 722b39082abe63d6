//! One core module of a component, read for what it defines that an image holds, and
//! re-encoded with exports of those items for the shim: every section but the export section
//! copied byte for byte, the export section keeping its entries and gaining the shim's (in its
//! place, or where it belongs if the module had none: before start, element, data count, code
//! and data).

use std::ops::Range;

use wasm_encoder::{Encode, RawSection};
use wasmparser::{Parser, Payload, TypeRef};

use super::error::{InstrumentError, unsupported};
use crate::sandbox::shim::{self, Item, Num};

/// The id of a core module's export section.
const EXPORT_SECTION: u8 = 7;

/// What one core module defines that an image holds, by index in the module.
#[derive(Default)]
pub(super) struct State {
    pub(super) memories: Vec<u32>,
    pub(super) tables: Vec<(u32, wasm_encoder::RefType)>,
    pub(super) globals: Vec<(u32, Num)>,
    pub(super) uncapturable: Vec<(u32, String)>,
}

impl State {
    pub(super) fn is_empty(&self) -> bool {
        self.memories.is_empty()
            && self.tables.is_empty()
            && self.globals.is_empty()
            && self.uncapturable.is_empty()
    }
}

/// One core module read: its state, its sections (id and content) and where its export
/// section is among them.
pub(super) struct ModuleScan {
    pub(super) state: State,
    sections: Vec<(u8, Range<usize>)>,
    exports: Option<usize>,
}

/// Reads a core module: what it defines, checked against what the shim can import.
pub(super) fn scan_module(bytes: &[u8]) -> Result<ModuleScan, InstrumentError> {
    let mut scan = ModuleScan {
        state: State::default(),
        sections: Vec::new(),
        exports: None,
    };
    let (mut memories, mut tables, mut globals) = (0u32, 0u32, 0u32);
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload?;
        match &payload {
            Payload::ImportSection(reader) => {
                for import in reader.clone().into_imports() {
                    match import?.ty {
                        TypeRef::Memory(_) => memories += 1,
                        TypeRef::Table(_) => tables += 1,
                        TypeRef::Global(_) => globals += 1,
                        _ => {}
                    }
                }
            }
            Payload::MemorySection(reader) => {
                for memory in reader.clone() {
                    let memory = memory?;
                    if memory.memory64 || memory.shared {
                        return unsupported(
                            "a core module defines a 64-bit or shared memory, which images do \
                             not hold",
                        );
                    }
                    if memory.page_size_log2.is_some_and(|log2| log2 != 16) {
                        return unsupported(
                            "a core module defines a memory of custom page size, which images \
                             do not hold",
                        );
                    }
                    scan.state.memories.push(memories);
                    memories += 1;
                }
            }
            Payload::TableSection(reader) => {
                for table in reader.clone() {
                    let ty = table?.ty;
                    let element = match ty.element_type {
                        t if t == wasmparser::RefType::FUNCREF => wasm_encoder::RefType::FUNCREF,
                        t if t == wasmparser::RefType::EXTERNREF => {
                            wasm_encoder::RefType::EXTERNREF
                        }
                        other => {
                            return unsupported(format!(
                                "a core module defines a table of {other}, which images do not \
                                 hold (only funcref and externref)"
                            ));
                        }
                    };
                    if ty.table64 || ty.shared {
                        return unsupported(
                            "a core module defines a 64-bit or shared table, which images do \
                             not hold",
                        );
                    }
                    scan.state.tables.push((tables, element));
                    tables += 1;
                }
            }
            Payload::GlobalSection(reader) => {
                for global in reader.clone() {
                    let ty = global?.ty;
                    let index = globals;
                    globals += 1;
                    if !ty.mutable {
                        continue;
                    }
                    if ty.shared {
                        return unsupported("a core module defines a shared global");
                    }
                    let num = match ty.content_type {
                        wasmparser::ValType::I32 => Num::I32,
                        wasmparser::ValType::I64 => Num::I64,
                        wasmparser::ValType::F32 => Num::F32,
                        wasmparser::ValType::F64 => Num::F64,
                        other => {
                            scan.state.uncapturable.push((index, other.to_string()));
                            continue;
                        }
                    };
                    scan.state.globals.push((index, num));
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader.clone() {
                    if export?.name.starts_with(shim::CORE_EXPORT_PREFIX) {
                        return unsupported(format!(
                            "a core module already exports a name starting with `{}`",
                            shim::CORE_EXPORT_PREFIX
                        ));
                    }
                }
                scan.exports = Some(scan.sections.len());
            }
            _ => {}
        }
        if let Some((id, range)) = payload.as_section() {
            debug_assert!(id != EXPORT_SECTION || scan.exports == Some(scan.sections.len()));
            scan.sections.push((id, range));
        }
    }
    Ok(scan)
}

/// The module with the export section of `scan` extended by the exports of its state.
pub(super) fn add_exports(bytes: &[u8], scan: &ModuleScan) -> Result<Vec<u8>, InstrumentError> {
    // Start, element, data count, code and data sections come after the export section.
    let after_exports = |id: u8| matches!(id, 8..=12);
    let mut ours: Vec<(String, u8, u32)> = Vec::new();
    for &index in &scan.state.memories {
        ours.push((shim::core_export(Item::Memory, index), 2, index));
    }
    for &(index, _) in &scan.state.tables {
        ours.push((shim::core_export(Item::Table, index), 1, index));
    }
    for &(index, _) in &scan.state.globals {
        ours.push((shim::core_export(Item::Global, index), 3, index));
    }
    // The section's content: the count, the module's own entries as they were, then ours.
    let (count, entries) = match scan.exports {
        Some(at) => {
            let range = scan.sections[at].1.clone();
            let mut reader = wasmparser::BinaryReader::new(&bytes[range.clone()], range.start);
            let count = reader.read_var_u32()?;
            (
                count,
                &bytes[range.start + reader.current_position()..range.end],
            )
        }
        None => (0, &[][..]),
    };
    let mut content = Vec::with_capacity(entries.len() + ours.len() * 24 + 5);
    (count + ours.len() as u32).encode(&mut content);
    content.extend_from_slice(entries);
    for (name, kind, index) in &ours {
        name.as_str().encode(&mut content);
        content.push(*kind);
        index.encode(&mut content);
    }
    let exports = RawSection {
        id: EXPORT_SECTION,
        data: &content,
    };

    let mut module = wasm_encoder::Module::new();
    let mut placed = false;
    for (at, (id, range)) in scan.sections.iter().enumerate() {
        if scan.exports == Some(at) {
            module.section(&exports);
            placed = true;
            continue;
        }
        if !placed && after_exports(*id) {
            module.section(&exports);
            placed = true;
        }
        module.section(&RawSection {
            id: *id,
            data: &bytes[range.clone()],
        });
    }
    if !placed {
        module.section(&exports);
    }
    Ok(module.finish())
}
