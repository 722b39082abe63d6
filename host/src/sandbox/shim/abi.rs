//! The shim's interface, which its generated module and the host's calls share: the
//! functions it exports and their signatures, the names it imports and exports under, and the
//! layout of its memory.

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
pub(crate) const LIFTED: [Lifted; 9] = [
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
    // The numbers of the [`PAGE`]s holding a byte other than zero, in order, among those of
    // `length` bytes of a memory from `offset` (both multiples of [`PAGE`]).
    Lifted {
        name: "nonzero-pages",
        params: &[
            ("memory", Ty::U32),
            ("offset", Ty::U32),
            ("length", Ty::U32),
        ],
        result: Some(Ty::Numbers),
        memory: true,
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
