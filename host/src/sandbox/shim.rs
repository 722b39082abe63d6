//! The snapshot shim: the core module [`super::instrument`] adds to a component deployed with
//! snapshots on, and the host's side of it. The shim imports every linear memory, table and
//! mutable number global the component's core instances define, has a small memory of its own
//! with a bump `realloc`, and its functions, lifted as component exports named
//! `mote-snapshot-*`, are how the host reads and writes an instance's core state between two
//! guest calls (see [`super::image`]).
//!
//! Invariants:
//! - A shim function touches only the item its index names, in the range it is given, and the
//!   shim's own memory: the guest's state changes only by `write`, `zero`, `grow` and
//!   `global-set`.
//! - The shim's own memory holds one call's data and nothing between calls: `read` copies to
//!   [`DATA`], and `realloc` hands out [`DATA`] for `write`'s argument; it grows as a call needs
//!   and never shrinks.
//! - An index or range out of bounds traps (`unreachable`, or `memory.copy`'s bounds check), and
//!   a trap leaves the instance unusable: the host checks both before calling.

use wasm_encoder::{
    BlockType, CodeSection, EntityType, ExportKind, ExportSection, Function, FunctionSection,
    GlobalType, ImportSection, Instruction, MemArg, MemorySection, MemoryType, Module, RefType,
    TableType, TypeSection, ValType,
};
use wasmtime::Store;
use wasmtime::component::{Component, ComponentExportIndex, Instance, TypedFunc, WasmList};

/// Where the return area of `read` is in the shim's memory.
const RETURN_AREA: i32 = 0;
/// Where a call's data is in the shim's memory: what `read` copies and `write` is given.
pub(crate) const DATA: u32 = 16;
/// The prefix of the component exports of the shim's functions.
const EXPORT_PREFIX: &str = "mote-snapshot-";
/// The prefix of the core exports a stateful module gains.
pub(crate) const CORE_EXPORT_PREFIX: &str = "mote-snap:";

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
    pub(crate) tables: Vec<(u32, u32, RefType)>,
    pub(crate) globals: Vec<(u32, u32, Num)>,
}

/// A component value type of a lifted shim function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    U32,
    S32,
    U64,
    /// `list<u8>`
    Bytes,
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
    Lifted {
        name: "write",
        params: &[
            ("memory", Ty::U32),
            ("offset", Ty::U32),
            ("data", Ty::Bytes),
        ],
        result: None,
        memory: true,
        realloc: true,
    },
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
    Lifted {
        name: "size",
        params: &[("memory", Ty::U32)],
        result: Some(Ty::U32),
        memory: false,
        realloc: false,
    },
    Lifted {
        name: "grow",
        params: &[("memory", Ty::U32), ("pages", Ty::U32)],
        result: Some(Ty::S32),
        memory: false,
        realloc: false,
    },
    Lifted {
        name: "global-get",
        params: &[("global", Ty::U32)],
        result: Some(Ty::U64),
        memory: false,
        realloc: false,
    },
    Lifted {
        name: "global-set",
        params: &[("global", Ty::U32), ("bits", Ty::U64)],
        result: None,
        memory: false,
        realloc: false,
    },
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

/// The core export names of the shim's memory and `realloc`.
pub(crate) const MEMORY_EXPORT: &str = "memory";
pub(crate) const REALLOC_EXPORT: &str = "realloc";

// The shim's core functions, by index (it imports none).
const REALLOC: u32 = 0;
const ENSURE: u32 = 1 + LIFTED.len() as u32;

/// The shim's core module for `imports`.
pub(crate) fn module(imports: &Imports) -> Module {
    let own = imports.memories.len() as u32;
    let mut section = ImportSection::new();
    for &(instance, index) in &imports.memories {
        let ty = MemoryType {
            minimum: 0,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        };
        let (module, name) = (instance_import(instance), core_export(Item::Memory, index));
        section.import(&module, &name, EntityType::Memory(ty));
    }
    for &(instance, index, element_type) in &imports.tables {
        let ty = TableType {
            element_type,
            table64: false,
            minimum: 0,
            maximum: None,
            shared: false,
        };
        let (module, name) = (instance_import(instance), core_export(Item::Table, index));
        section.import(&module, &name, EntityType::Table(ty));
    }
    for &(instance, index, num) in &imports.globals {
        let ty = GlobalType {
            val_type: val_type(num),
            mutable: true,
            shared: false,
        };
        let (module, name) = (instance_import(instance), core_export(Item::Global, index));
        section.import(&module, &name, EntityType::Global(ty));
    }

    let i32_ = ValType::I32;
    let i64_ = ValType::I64;
    // One type per function, in function order.
    let signatures: [(&[ValType], &[ValType]); 10] = [
        (&[i32_, i32_, i32_, i32_], &[i32_]), // realloc
        (&[i32_, i32_, i32_], &[i32_]),       // read
        (&[i32_, i32_, i32_, i32_], &[]),     // write
        (&[i32_, i32_, i32_], &[]),           // zero
        (&[i32_], &[i32_]),                   // size
        (&[i32_, i32_], &[i32_]),             // grow
        (&[i32_], &[i64_]),                   // global-get
        (&[i32_, i64_], &[]),                 // global-set
        (&[i32_], &[i32_]),                   // table-size
        (&[i32_], &[]),                       // ensure
    ];
    let mut types = TypeSection::new();
    let mut functions = FunctionSection::new();
    for (index, (params, results)) in signatures.iter().enumerate() {
        types
            .ty()
            .function(params.iter().copied(), results.iter().copied());
        functions.function(index as u32);
    }
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: 0,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    let mut exports = ExportSection::new();
    exports.export(MEMORY_EXPORT, ExportKind::Memory, own);
    exports.export(REALLOC_EXPORT, ExportKind::Func, REALLOC);
    for (index, lifted) in LIFTED.iter().enumerate() {
        exports.export(lifted.name, ExportKind::Func, 1 + index as u32);
    }

    let mut code = CodeSection::new();
    code.function(&realloc());
    code.function(&read(imports, own));
    code.function(&write(imports, own));
    code.function(&zero(imports));
    code.function(&size(imports));
    code.function(&grow(imports));
    code.function(&global_get(imports));
    code.function(&global_set(imports));
    code.function(&table_size(imports));
    code.function(&ensure(own));

    let mut module = Module::new();
    module
        .section(&types)
        .section(&section)
        .section(&functions)
        .section(&memories)
        .section(&exports)
        .section(&code);
    module
}

fn val_type(num: Num) -> ValType {
    match num {
        Num::I32 => ValType::I32,
        Num::I64 => ValType::I64,
        Num::F32 => ValType::F32,
        Num::F64 => ValType::F64,
    }
}

/// A function that runs `prologue`, then `arm(k)` for the item whose index (its first
/// parameter) is `k`, and returns what that leaves; an index of no item traps.
fn dispatch(
    prologue: &[Instruction<'static>],
    count: usize,
    arm: impl Fn(u32) -> Vec<Instruction<'static>>,
) -> Function {
    use Instruction::*;
    let mut f = Function::new([]);
    for instruction in prologue {
        f.instruction(instruction);
    }
    for k in 0..count as u32 {
        let test = [LocalGet(0), I32Const(k as i32), I32Eq, If(BlockType::Empty)];
        for instruction in test.into_iter().chain(arm(k)).chain([Return, End]) {
            f.instruction(&instruction);
        }
    }
    f.instruction(&Unreachable).instruction(&End);
    f
}

/// `realloc(old, old-size, align, size)`: makes room for `size` bytes at [`DATA`] and hands
/// out [`DATA`]: a call has at most one list argument.
fn realloc() -> Function {
    use Instruction::*;
    let mut f = Function::new([]);
    for instruction in [LocalGet(3), Call(ENSURE), I32Const(DATA as i32), End] {
        f.instruction(&instruction);
    }
    f
}

/// `ensure(length)`: grows the shim's memory to hold `length` bytes at [`DATA`]; traps if it
/// cannot.
fn ensure(own: u32) -> Function {
    use Instruction::*;
    let mut f = Function::new([(1, ValType::I64)]);
    // The pages needed, (DATA + length + 65535) >> 16, in 64 bits so that it cannot wrap.
    let needed = [
        LocalGet(0),
        I64ExtendI32U,
        I64Const(i64::from(DATA) + 0xffff),
        I64Add,
        I64Const(16),
        I64ShrU,
        LocalSet(1),
    ];
    let grow = [
        LocalGet(1),
        MemorySize(own),
        I64ExtendI32U,
        I64GtU,
        If(BlockType::Empty),
        LocalGet(1),
        MemorySize(own),
        I64ExtendI32U,
        I64Sub,
        I32WrapI64,
        MemoryGrow(own),
        I32Const(-1),
        I32Eq,
        If(BlockType::Empty),
        Unreachable,
        End,
        End,
        End,
    ];
    for instruction in needed.into_iter().chain(grow) {
        f.instruction(&instruction);
    }
    f
}

/// `read(memory, offset, length) -> list<u8>`: copies the range into the shim's memory.
fn read(imports: &Imports, own: u32) -> Function {
    use Instruction::*;
    let store = |offset| {
        I32Store(MemArg {
            offset,
            align: 2,
            memory_index: own,
        })
    };
    dispatch(&[LocalGet(2), Call(ENSURE)], imports.memories.len(), |k| {
        vec![
            I32Const(DATA as i32),
            LocalGet(1),
            LocalGet(2),
            MemoryCopy {
                src_mem: k,
                dst_mem: own,
            },
            I32Const(RETURN_AREA),
            I32Const(DATA as i32),
            store(0),
            I32Const(RETURN_AREA),
            LocalGet(2),
            store(4),
            I32Const(RETURN_AREA),
        ]
    })
}

/// `write(memory, offset, data)`: copies `data` (at [`DATA`], put there through `realloc`) into
/// the memory.
fn write(imports: &Imports, own: u32) -> Function {
    use Instruction::*;
    dispatch(&[], imports.memories.len(), |k| {
        vec![
            LocalGet(1),
            LocalGet(2),
            LocalGet(3),
            MemoryCopy {
                src_mem: own,
                dst_mem: k,
            },
        ]
    })
}

/// `zero(memory, offset, length)`: fills the range with zeroes.
fn zero(imports: &Imports) -> Function {
    use Instruction::*;
    dispatch(&[], imports.memories.len(), |k| {
        vec![LocalGet(1), I32Const(0), LocalGet(2), MemoryFill(k)]
    })
}

/// `size(memory) -> u32`: its size in wasm pages.
fn size(imports: &Imports) -> Function {
    dispatch(&[], imports.memories.len(), |k| {
        vec![Instruction::MemorySize(k)]
    })
}

/// `grow(memory, pages) -> s32`: `memory.grow`, -1 if it could not.
fn grow(imports: &Imports) -> Function {
    use Instruction::*;
    dispatch(&[], imports.memories.len(), |k| {
        vec![LocalGet(1), MemoryGrow(k)]
    })
}

/// `global-get(global) -> u64`: the global's bits.
fn global_get(imports: &Imports) -> Function {
    use Instruction::*;
    dispatch(&[], imports.globals.len(), |g| {
        let widen = match imports.globals[g as usize].2 {
            Num::I32 => vec![I64ExtendI32U],
            Num::I64 => vec![],
            Num::F32 => vec![I32ReinterpretF32, I64ExtendI32U],
            Num::F64 => vec![I64ReinterpretF64],
        };
        std::iter::once(GlobalGet(g)).chain(widen).collect()
    })
}

/// `global-set(global, bits)`: sets the global from its bits.
fn global_set(imports: &Imports) -> Function {
    use Instruction::*;
    dispatch(&[], imports.globals.len(), |g| {
        let narrow = match imports.globals[g as usize].2 {
            Num::I32 => vec![I32WrapI64],
            Num::I64 => vec![],
            Num::F32 => vec![I32WrapI64, F32ReinterpretI32],
            Num::F64 => vec![F64ReinterpretI64],
        };
        std::iter::once(LocalGet(1))
            .chain(narrow)
            .chain([GlobalSet(g)])
            .collect()
    })
}

/// `table-size(table) -> u32`.
fn table_size(imports: &Imports) -> Function {
    dispatch(&[], imports.tables.len(), |t| {
        vec![Instruction::TableSize(t)]
    })
}

/// Where the shim's lifted functions are in a compiled component, found once at deploy.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ShimExports {
    read: ComponentExportIndex,
    write: ComponentExportIndex,
    zero: ComponentExportIndex,
    size: ComponentExportIndex,
    grow: ComponentExportIndex,
    global_get: ComponentExportIndex,
    global_set: ComponentExportIndex,
    table_size: ComponentExportIndex,
}

impl ShimExports {
    /// The shim's exports of an instrumented component; `None` if one is missing.
    pub(crate) fn find(component: &Component) -> Option<Self> {
        let find = |lifted: &Lifted| component.get_export_index(None, export_name(lifted));
        let [
            read,
            write,
            zero,
            size,
            grow,
            global_get,
            global_set,
            table_size,
        ] = &LIFTED;
        Some(ShimExports {
            read: find(read)?,
            write: find(write)?,
            zero: find(zero)?,
            size: find(size)?,
            grow: find(grow)?,
            global_get: find(global_get)?,
            global_set: find(global_set)?,
            table_size: find(table_size)?,
        })
    }
}

/// The shim of one instance, its functions type-checked, ready to call between two guest
/// calls. Indices are the shim's (see [`Imports`]).
pub(crate) struct Shim {
    instance: Instance,
    write: ComponentExportIndex,
    read: TypedFunc<(u32, u32, u32), (WasmList<u8>,)>,
    zero: TypedFunc<(u32, u32, u32), ()>,
    size: TypedFunc<(u32,), (u32,)>,
    grow: TypedFunc<(u32, u32), (i32,)>,
    global_get: TypedFunc<(u32,), (u64,)>,
    global_set: TypedFunc<(u32, u64), ()>,
    table_size: TypedFunc<(u32,), (u32,)>,
}

impl Shim {
    /// The shim of `instance`, whose component has these exports.
    pub(crate) fn new<T: 'static>(
        store: &mut Store<T>,
        instance: Instance,
        exports: ShimExports,
    ) -> wasmtime::Result<Self> {
        // `write` borrows its argument: it is typed at each call.
        instance.get_typed_func::<(u32, u32, &[u8]), ()>(&mut *store, exports.write)?;
        Ok(Shim {
            instance,
            write: exports.write,
            read: instance.get_typed_func(&mut *store, exports.read)?,
            zero: instance.get_typed_func(&mut *store, exports.zero)?,
            size: instance.get_typed_func(&mut *store, exports.size)?,
            grow: instance.get_typed_func(&mut *store, exports.grow)?,
            global_get: instance.get_typed_func(&mut *store, exports.global_get)?,
            global_set: instance.get_typed_func(&mut *store, exports.global_set)?,
            table_size: instance.get_typed_func(&mut *store, exports.table_size)?,
        })
    }

    /// Memory `memory`'s size in bytes.
    pub(crate) async fn memory_size<T: Send + 'static>(
        &self,
        store: &mut Store<T>,
        memory: u32,
    ) -> wasmtime::Result<u64> {
        let (pages,) = self.size.call_async(store, (memory,)).await?;
        Ok(u64::from(pages) * WASM_PAGE)
    }

    /// `length` bytes of memory `memory` from `offset`, as the shim's memory holds them until
    /// the next call.
    pub(crate) async fn read<'s, T: Send + 'static>(
        &self,
        store: &'s mut Store<T>,
        memory: u32,
        offset: u32,
        length: u32,
    ) -> wasmtime::Result<&'s [u8]> {
        let (list,) = self
            .read
            .call_async(&mut *store, (memory, offset, length))
            .await?;
        let store: &'s Store<T> = store;
        Ok(list.as_le_slice(store))
    }

    /// Writes `data` into memory `memory` at `offset`.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        store: &mut Store<T>,
        memory: u32,
        offset: u32,
        data: &[u8],
    ) -> wasmtime::Result<()> {
        let write = self
            .instance
            .get_typed_func::<(u32, u32, &[u8]), ()>(&mut *store, self.write)?;
        write.call_async(store, (memory, offset, data)).await
    }

    /// Fills `length` bytes of memory `memory` from `offset` with zeroes.
    pub(crate) async fn zero<T: Send + 'static>(
        &self,
        store: &mut Store<T>,
        memory: u32,
        offset: u32,
        length: u32,
    ) -> wasmtime::Result<()> {
        self.zero.call_async(store, (memory, offset, length)).await
    }

    /// Grows memory `memory` by `pages` wasm pages; false if it could not.
    pub(crate) async fn grow<T: Send + 'static>(
        &self,
        store: &mut Store<T>,
        memory: u32,
        pages: u32,
    ) -> wasmtime::Result<bool> {
        let (old,) = self.grow.call_async(store, (memory, pages)).await?;
        Ok(old != -1)
    }

    /// Global `global`'s bits.
    pub(crate) async fn global_get<T: Send + 'static>(
        &self,
        store: &mut Store<T>,
        global: u32,
    ) -> wasmtime::Result<u64> {
        Ok(self.global_get.call_async(store, (global,)).await?.0)
    }

    /// Sets global `global` from its bits.
    pub(crate) async fn global_set<T: Send + 'static>(
        &self,
        store: &mut Store<T>,
        global: u32,
        bits: u64,
    ) -> wasmtime::Result<()> {
        self.global_set.call_async(store, (global, bits)).await
    }

    /// Table `table`'s size in elements.
    pub(crate) async fn table_size<T: Send + 'static>(
        &self,
        store: &mut Store<T>,
        table: u32,
    ) -> wasmtime::Result<u64> {
        Ok(u64::from(
            self.table_size.call_async(store, (table,)).await?.0,
        ))
    }
}

/// The size of a wasm page (the shim refuses custom page sizes).
pub(crate) const WASM_PAGE: u64 = 1 << 16;
