//! The snapshot shim: the core module [`super::instrument`] adds to a component deployed with
//! snapshots on ([`module`] generates it), and the host's side of it ([`call`]). The shim
//! imports every linear memory, table and mutable number global the component's core
//! instances define, has a small memory of its own with a bump `realloc`, and its functions,
//! lifted as component exports named `mote-snapshot-*`, are how the host reads and writes an
//! instance's core state between two guest calls (see [`super::image`]).
//!
//! Invariants:
//! - A shim function touches only the item its index names, in the range it is given, and the
//!   shim's own memory: the guest's state changes only by `write-pages`, `zero`, `grow` and
//!   `set-globals`.
//! - The shim's own memory holds one call's data and nothing between calls: `read` and
//!   `globals` copy to [`DATA`], and `realloc` hands out room from [`DATA`] on for a call's
//!   list arguments, from [`DATA`] again at the next call; it grows as a call needs and never
//!   shrinks.
//! - Few calls: globals go in one call each way, as a list in the layout's order (an
//!   interpreter's component has hundreds: componentize-py's, 493), and pages are written
//!   scattered, many a call. A call costs about a microsecond.
//! - An index or range out of bounds traps (`unreachable`, or `memory.copy`'s bounds check),
//!   and a trap leaves the instance unusable: the host checks both before calling.

pub(crate) mod call;
mod module;

pub(crate) use call::{Shim, ShimExports};
pub(crate) use module::module;

/// Where a call's data is in the shim's memory: what `read` and `globals` copy, and the
/// first room `realloc` hands out. Below it, the return area of `read` and `globals`.
pub(crate) const DATA: u32 = 16;
/// The pages `write-pages` writes, in bytes (the granularity of an image's page diff).
pub(crate) const PAGE: usize = 4096;
/// The size of a wasm page (the instrumentation refuses custom page sizes).
pub(crate) const WASM_PAGE: u64 = 1 << 16;
/// The prefix of the component exports of the shim's functions.
const EXPORT_PREFIX: &str = "mote-snapshot-";
/// The prefix of the core exports a stateful module gains.
pub(crate) const CORE_EXPORT_PREFIX: &str = "mote-snap:";
/// The core export names of the shim's memory and `realloc`.
pub(crate) const MEMORY_EXPORT: &str = "memory";
pub(crate) const REALLOC_EXPORT: &str = "realloc";

/// The type of a global the shim carries, as the bits of a `u64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Num {
    I32,
    I64,
    F32,
    F64,
}

/// The kinds of item the shim imports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Item {
    Memory,
    Table,
    Global,
}

/// The core export name under which a module exports its `kind` item `index` for the shim.
pub(crate) fn core_export(kind: Item, index: u32) -> String {
    let kind = match kind {
        Item::Memory => "memory",
        Item::Table => "table",
        Item::Global => "global",
    };
    format!("{CORE_EXPORT_PREFIX}{kind}{index}")
}

/// The import module name under which the shim imports core instance `instance`.
pub(crate) fn instance_import(instance: u32) -> String {
    format!("i{instance}")
}

/// What the shim reaches, in its index order: the core instance (its index in the component)
/// and the item's index in that instance.
#[derive(Clone, Debug, Default)]
pub(crate) struct Imports {
    pub(crate) memories: Vec<(u32, u32)>,
    /// Each with its element type (`funcref` or `externref`).
    pub(crate) tables: Vec<(u32, u32, wasm_encoder::RefType)>,
    pub(crate) globals: Vec<(u32, u32, Num)>,
}

/// A component value type of a lifted shim function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    U32,
    S32,
    /// `list<u8>`
    Bytes,
    /// `list<u32>`
    Numbers,
    /// `list<u64>`
    Words,
}

/// One function of the shim, as the component lifts and exports it.
pub(crate) struct Lifted {
    /// Its core export name, and its component export name after [`EXPORT_PREFIX`].
    pub(crate) name: &'static str,
    pub(crate) params: &'static [(&'static str, Ty)],
    pub(crate) result: Option<Ty>,
    /// Whether its lift names the shim's memory, and its `realloc`.
    pub(crate) memory: bool,
    pub(crate) realloc: bool,
}

/// The shim's lifted functions, in the order the component lifts them.
pub(crate) const LIFTED: [Lifted; 8] = [
    // `length` bytes of a memory from `offset`.
    Lifted {
        name: "read",
        params: &[
            ("memory", Ty::U32),
            ("offset", Ty::U32),
            ("length", Ty::U32),
        ],
        result: Some(Ty::Bytes),
        memory: true,
        realloc: false,
    },
    // [`PAGE`] bytes of `data` at each page number in `pages`, in order.
    Lifted {
        name: "write-pages",
        params: &[
            ("memory", Ty::U32),
            ("pages", Ty::Numbers),
            ("data", Ty::Bytes),
        ],
        result: None,
        memory: true,
        realloc: true,
    },
    // Zeroes over `length` bytes from `offset`.
    Lifted {
        name: "zero",
        params: &[
            ("memory", Ty::U32),
            ("offset", Ty::U32),
            ("length", Ty::U32),
        ],
        result: None,
        memory: false,
        realloc: false,
    },
    // A memory's size, in wasm pages.
    Lifted {
        name: "size",
        params: &[("memory", Ty::U32)],
        result: Some(Ty::U32),
        memory: false,
        realloc: false,
    },
    // `memory.grow`: the old size in wasm pages, -1 if it could not.
    Lifted {
        name: "grow",
        params: &[("memory", Ty::U32), ("pages", Ty::U32)],
        result: Some(Ty::S32),
        memory: false,
        realloc: false,
    },
    // Every global's bits.
    Lifted {
        name: "globals",
        params: &[],
        result: Some(Ty::Words),
        memory: true,
        realloc: false,
    },
    // Sets every global from its bits (a list of another length traps).
    Lifted {
        name: "set-globals",
        params: &[("bits", Ty::Words)],
        result: None,
        memory: true,
        realloc: true,
    },
    // A table's size, in elements.
    Lifted {
        name: "table-size",
        params: &[("table", Ty::U32)],
        result: Some(Ty::U32),
        memory: false,
        realloc: false,
    },
];

/// The component export name of a lifted shim function.
pub(crate) fn export_name(lifted: &Lifted) -> String {
    format!("{EXPORT_PREFIX}{}", lifted.name)
}

/// Whether a component export name is one the shim's exports take.
pub(crate) fn is_reserved_export(name: &str) -> bool {
    name.starts_with(EXPORT_PREFIX)
}
