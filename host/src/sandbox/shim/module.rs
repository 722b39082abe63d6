//! The shim's core module, generated for what one component's core instances define.

use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, EntityType, ExportKind, ExportSection, Function,
    FunctionSection, GlobalSection, GlobalType, ImportSection, Instruction, MemArg, MemorySection,
    MemoryType, Module, TableType, TypeSection, ValType,
};

use super::abi::{
    DATA, Imports, Item, LIFTED, MEMORY_EXPORT, Num, PAGE, REALLOC_EXPORT, core_export,
    instance_import,
};

/// Where the return area of `read` and `globals` is in the shim's memory.
const RETURN_AREA: i32 = 0;
/// log2 of [`PAGE`].
const PAGE_SHIFT: i32 = PAGE.trailing_zeros() as i32;

// The shim's core functions, by index (it imports none): `realloc`, the lifted ones in the
// order of `LIFTED`, then `ensure`.
const REALLOC: u32 = 0;
const ENSURE: u32 = 1 + LIFTED.len() as u32;

/// The shim's core module for `imports`.
pub(crate) fn module(imports: &Imports) -> Module {
    // The shim's own memory and bump pointer come after the imported ones.
    let own = imports.memories.len() as u32;
    let bump = imports.globals.len() as u32;
    let memory = |minimum| MemoryType {
        minimum,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    };
    let mut section = ImportSection::new();
    for &(instance, index) in &imports.memories {
        let name = core_export(Item::Memory, index);
        section.import(
            &instance_import(instance),
            &name,
            EntityType::Memory(memory(0)),
        );
    }
    for &(instance, index, element_type) in &imports.tables {
        let ty = TableType {
            element_type,
            table64: false,
            minimum: 0,
            maximum: None,
            shared: false,
        };
        let name = core_export(Item::Table, index);
        section.import(&instance_import(instance), &name, EntityType::Table(ty));
    }
    for &(instance, index, num) in &imports.globals {
        let ty = GlobalType {
            val_type: val_type(num),
            mutable: true,
            shared: false,
        };
        let name = core_export(Item::Global, index);
        section.import(&instance_import(instance), &name, EntityType::Global(ty));
    }

    let (i32_, i64_) = (ValType::I32, ValType::I64);
    // One type per function, in function order.
    let signatures: [(&[ValType], &[ValType]); 11] = [
        (&[i32_, i32_, i32_, i32_], &[i32_]),   // realloc
        (&[i32_, i32_, i32_], &[i32_]),         // read
        (&[i32_, i32_, i32_, i32_, i32_], &[]), // write-pages
        (&[i32_, i32_, i32_], &[]),             // zero
        (&[i32_], &[i32_]),                     // size
        (&[i32_, i32_], &[i32_]),               // grow
        (&[], &[i32_]),                         // globals
        (&[i32_, i32_], &[]),                   // set-globals
        (&[i32_], &[i32_]),                     // table-size
        (&[i32_, i32_, i32_], &[i32_]),         // nonzero-pages
        (&[i64_], &[]),                         // ensure
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
    memories.memory(memory(0));
    let mut globals = GlobalSection::new();
    let bump_type = GlobalType {
        val_type: i32_,
        mutable: true,
        shared: false,
    };
    globals.global(bump_type, &ConstExpr::i32_const(DATA as i32));
    let mut exports = ExportSection::new();
    exports.export(MEMORY_EXPORT, ExportKind::Memory, own);
    exports.export(REALLOC_EXPORT, ExportKind::Func, REALLOC);
    for (index, lifted) in LIFTED.iter().enumerate() {
        exports.export(lifted.name, ExportKind::Func, 1 + index as u32);
    }

    let shim = Shim { imports, own, bump };
    let mut code = CodeSection::new();
    for f in [
        shim.realloc(),
        shim.read(),
        shim.write_pages(),
        shim.zero(),
        shim.size(),
        shim.grow(),
        shim.globals(),
        shim.set_globals(),
        shim.table_size(),
        shim.nonzero_pages(),
        shim.ensure(),
    ] {
        code.function(&f);
    }

    let mut module = Module::new();
    module
        .section(&types)
        .section(&section)
        .section(&functions)
        .section(&memories)
        .section(&globals)
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

/// A function of `code`, with `locals` after its parameters.
fn function(locals: &[ValType], code: &[Instruction<'_>]) -> Function {
    let mut f = Function::new(locals.iter().map(|&t| (1, t)));
    for instruction in code {
        f.instruction(instruction);
    }
    f
}

/// What the generated functions need to know.
struct Shim<'a> {
    imports: &'a Imports,
    /// The index of the shim's own memory.
    own: u32,
    /// The index of its bump pointer.
    bump: u32,
}

impl Shim<'_> {
    /// An access to the shim's own memory, `offset` bytes past the address, aligned to
    /// `2^align`.
    fn at(&self, offset: u64, align: u32) -> MemArg {
        MemArg {
            offset,
            align,
            memory_index: self.own,
        }
    }

    /// A function that runs `prologue`, then `arm(k)` for the item whose index (its first
    /// parameter) is `k`, and returns what that leaves; an index of no item traps.
    fn dispatch(
        &self,
        locals: &[ValType],
        prologue: &[Instruction<'static>],
        count: usize,
        arm: impl Fn(u32) -> Vec<Instruction<'static>>,
    ) -> Function {
        use Instruction::*;
        let mut code = prologue.to_vec();
        for k in 0..count as u32 {
            code.extend([LocalGet(0), I32Const(k as i32), I32Eq, If(BlockType::Empty)]);
            code.extend(arm(k));
            code.extend([Return, End]);
        }
        code.extend([Unreachable, End]);
        function(locals, &code)
    }

    /// The instructions that make the next call's `realloc` start from [`DATA`] again.
    fn reset(&self) -> [Instruction<'static>; 2] {
        [
            Instruction::I32Const(DATA as i32),
            Instruction::GlobalSet(self.bump),
        ]
    }

    /// The instructions that store a list's pointer ([`DATA`]) and `length` in the return
    /// area and leave its address.
    fn returned(&self, length: Instruction<'static>) -> Vec<Instruction<'static>> {
        use Instruction::*;
        vec![
            I32Const(RETURN_AREA),
            I32Const(DATA as i32),
            I32Store(self.at(0, 2)),
            I32Const(RETURN_AREA),
            length,
            I32Store(self.at(4, 2)),
            I32Const(RETURN_AREA),
        ]
    }

    /// `realloc(old, old-size, align, size)`: hands out `size` bytes at the bump pointer,
    /// aligned, and moves it past them.
    fn realloc(&self) -> Function {
        use Instruction::*;
        const PTR: u32 = 4;
        let code = [
            // ptr = (bump + align - 1) & -align
            GlobalGet(self.bump),
            LocalGet(2),
            I32Add,
            I32Const(1),
            I32Sub,
            I32Const(0),
            LocalGet(2),
            I32Sub,
            I32And,
            LocalSet(PTR),
            LocalGet(PTR),
            I64ExtendI32U,
            LocalGet(3),
            I64ExtendI32U,
            I64Add,
            Call(ENSURE),
            LocalGet(PTR),
            LocalGet(3),
            I32Add,
            GlobalSet(self.bump),
            LocalGet(PTR),
            End,
        ];
        function(&[ValType::I32], &code)
    }

    /// `ensure(end: i64)`: grows the shim's memory to hold `end` bytes; traps if it cannot.
    fn ensure(&self) -> Function {
        use Instruction::*;
        const PAGES: u32 = 1;
        let code = [
            // The wasm pages needed, (end + 65535) >> 16.
            LocalGet(0),
            I64Const(0xffff),
            I64Add,
            I64Const(16),
            I64ShrU,
            LocalSet(PAGES),
            LocalGet(PAGES),
            MemorySize(self.own),
            I64ExtendI32U,
            I64GtU,
            If(BlockType::Empty),
            LocalGet(PAGES),
            MemorySize(self.own),
            I64ExtendI32U,
            I64Sub,
            I32WrapI64,
            MemoryGrow(self.own),
            I32Const(-1),
            I32Eq,
            If(BlockType::Empty),
            Unreachable,
            End,
            End,
            End,
        ];
        function(&[ValType::I64], &code)
    }

    /// `read(memory, offset, length) -> list<u8>`: copies the range into the shim's memory.
    fn read(&self) -> Function {
        use Instruction::*;
        let room = [
            I64Const(i64::from(DATA)),
            LocalGet(2),
            I64ExtendI32U,
            I64Add,
            Call(ENSURE),
        ];
        self.dispatch(&[], &room, self.imports.memories.len(), |k| {
            let copy = [
                I32Const(DATA as i32),
                LocalGet(1),
                LocalGet(2),
                MemoryCopy {
                    src_mem: k,
                    dst_mem: self.own,
                },
            ];
            copy.into_iter().chain(self.returned(LocalGet(2))).collect()
        })
    }

    /// `write-pages(memory, pages: list<u32>, data: list<u8>)`: copies the `i`th [`PAGE`] of
    /// `data` to page `pages[i]`; `data` of another length than the pages' traps.
    fn write_pages(&self) -> Function {
        use Instruction::*;
        // Parameters: memory, pages (pointer, count), data (pointer, length); then i.
        const PAGES: u32 = 1;
        const COUNT: u32 = 2;
        const DATA_AT: u32 = 3;
        const LENGTH: u32 = 4;
        const I: u32 = 5;
        let check = [
            LocalGet(COUNT),
            I64ExtendI32U,
            I64Const(i64::from(PAGE_SHIFT)),
            I64Shl,
            LocalGet(LENGTH),
            I64ExtendI32U,
            I64Ne,
            If(BlockType::Empty),
            Unreachable,
            End,
        ];
        self.dispatch(&[ValType::I32], &check, self.imports.memories.len(), |k| {
            let mut arm = vec![
                I32Const(0),
                LocalSet(I),
                Block(BlockType::Empty),
                Loop(BlockType::Empty),
                LocalGet(I),
                LocalGet(COUNT),
                I32GeU,
                BrIf(1),
                // To: pages[i] << PAGE_SHIFT.
                LocalGet(PAGES),
                LocalGet(I),
                I32Const(2),
                I32Shl,
                I32Add,
                I32Load(self.at(0, 2)),
                I32Const(PAGE_SHIFT),
                I32Shl,
                // From: data + (i << PAGE_SHIFT).
                LocalGet(DATA_AT),
                LocalGet(I),
                I32Const(PAGE_SHIFT),
                I32Shl,
                I32Add,
                I32Const(PAGE as i32),
                MemoryCopy {
                    src_mem: self.own,
                    dst_mem: k,
                },
                LocalGet(I),
                I32Const(1),
                I32Add,
                LocalSet(I),
                Br(0),
                End,
                End,
            ];
            arm.extend(self.reset());
            arm
        })
    }

    /// `zero(memory, offset, length)`: fills the range with zeroes.
    fn zero(&self) -> Function {
        use Instruction::*;
        self.dispatch(&[], &[], self.imports.memories.len(), |k| {
            vec![LocalGet(1), I32Const(0), LocalGet(2), MemoryFill(k)]
        })
    }

    /// `size(memory) -> u32`: its size in wasm pages.
    fn size(&self) -> Function {
        self.dispatch(&[], &[], self.imports.memories.len(), |k| {
            vec![Instruction::MemorySize(k)]
        })
    }

    /// `grow(memory, pages) -> s32`: `memory.grow`, -1 if it could not.
    fn grow(&self) -> Function {
        use Instruction::*;
        self.dispatch(&[], &[], self.imports.memories.len(), |k| {
            vec![LocalGet(1), MemoryGrow(k)]
        })
    }

    /// `globals() -> list<u64>`: every global's bits, in order.
    fn globals(&self) -> Function {
        use Instruction::*;
        let count = self.imports.globals.len();
        let mut code = vec![I64Const(i64::from(DATA) + 8 * count as i64), Call(ENSURE)];
        for (g, &(_, _, num)) in self.imports.globals.iter().enumerate() {
            code.extend([I32Const(0), GlobalGet(g as u32)]);
            code.extend(match num {
                Num::I32 => vec![I64ExtendI32U],
                Num::I64 => vec![],
                Num::F32 => vec![I32ReinterpretF32, I64ExtendI32U],
                Num::F64 => vec![I64ReinterpretF64],
            });
            code.push(I64Store(self.at(u64::from(DATA) + 8 * g as u64, 3)));
        }
        code.extend(self.returned(I32Const(count as i32)));
        code.push(End);
        function(&[], &code)
    }

    /// `set-globals(bits: list<u64>)`: sets every global from its bits; a list of another
    /// length traps.
    fn set_globals(&self) -> Function {
        use Instruction::*;
        let count = self.imports.globals.len();
        let mut code = vec![
            LocalGet(1),
            I32Const(count as i32),
            I32Ne,
            If(BlockType::Empty),
            Unreachable,
            End,
        ];
        for (g, &(_, _, num)) in self.imports.globals.iter().enumerate() {
            code.extend([LocalGet(0), I64Load(self.at(8 * g as u64, 3))]);
            code.extend(match num {
                Num::I32 => vec![I32WrapI64],
                Num::I64 => vec![],
                Num::F32 => vec![I32WrapI64, F32ReinterpretI32],
                Num::F64 => vec![F64ReinterpretI64],
            });
            code.push(GlobalSet(g as u32));
        }
        code.extend(self.reset());
        code.push(End);
        function(&[], &code)
    }

    /// `nonzero-pages(memory, offset, length) -> list<u32>`: the numbers of the [`PAGE`]s in
    /// the range that hold a byte other than zero, scanned in place 64 bytes at a time (so a
    /// page nobody wrote is read, never copied).
    fn nonzero_pages(&self) -> Function {
        use Instruction::*;
        // Parameters: memory, offset, length; then the locals.
        const OFFSET: u32 = 1;
        const LENGTH: u32 = 2;
        const LEFT: u32 = 3;
        const AT: u32 = 4;
        const WORD: u32 = 5;
        const COUNT: u32 = 6;
        // Room for a number per page of the range.
        let room = [
            I64Const(i64::from(DATA)),
            LocalGet(LENGTH),
            I32Const(PAGE_SHIFT),
            I32ShrU,
            I64ExtendI32U,
            I64Const(2),
            I64Shl,
            I64Add,
            Call(ENSURE),
        ];
        let locals = [ValType::I32; 4];
        self.dispatch(&locals, &room, self.imports.memories.len(), |k| {
            let load = |offset| {
                V128Load(MemArg {
                    offset,
                    align: 4,
                    memory_index: k,
                })
            };
            let mut arm = vec![
                I32Const(0),
                LocalSet(COUNT),
                LocalGet(OFFSET),
                LocalSet(AT),
                LocalGet(LENGTH),
                I32Const(PAGE_SHIFT),
                I32ShrU,
                LocalSet(LEFT),
                Block(BlockType::Empty),
                Loop(BlockType::Empty),
                LocalGet(LEFT),
                I32Eqz,
                BrIf(1),
                LocalGet(AT),
                LocalSet(WORD),
                // Left when the page is all zeroes, or once it is counted.
                Block(BlockType::Empty),
                // Left at the first 64 bytes that are not all zeroes.
                Block(BlockType::Empty),
                Loop(BlockType::Empty),
                LocalGet(WORD),
                load(0),
                LocalGet(WORD),
                load(16),
                V128Or,
                LocalGet(WORD),
                load(32),
                V128Or,
                LocalGet(WORD),
                load(48),
                V128Or,
                V128AnyTrue,
                BrIf(1),
                LocalGet(WORD),
                I32Const(64),
                I32Add,
                LocalTee(WORD),
                LocalGet(AT),
                I32Sub,
                I32Const(PAGE as i32),
                I32LtU,
                BrIf(0),
                End,
                // All zeroes: not counted.
                Br(1),
                End,
                // numbers[count] = at >> PAGE_SHIFT
                I32Const(DATA as i32),
                LocalGet(COUNT),
                I32Const(2),
                I32Shl,
                I32Add,
                LocalGet(AT),
                I32Const(PAGE_SHIFT),
                I32ShrU,
                I32Store(self.at(0, 2)),
                LocalGet(COUNT),
                I32Const(1),
                I32Add,
                LocalSet(COUNT),
                End,
                // On to the next page.
                LocalGet(AT),
                I32Const(PAGE as i32),
                I32Add,
                LocalSet(AT),
                LocalGet(LEFT),
                I32Const(1),
                I32Sub,
                LocalSet(LEFT),
                Br(0),
                End,
                End,
            ];
            arm.extend(self.returned(LocalGet(COUNT)));
            arm
        })
    }

    /// `table-size(table) -> u32`.
    fn table_size(&self) -> Function {
        self.dispatch(&[], &[], self.imports.tables.len(), |t| {
            vec![Instruction::TableSize(t)]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(imports: &Imports) {
        let bytes = module(imports).finish();
        wasmparser::Validator::new()
            .validate_all(&bytes)
            .expect("the shim is a valid core module");
    }

    #[test]
    fn the_shim_is_valid_for_any_mix_of_items_and_for_none() {
        valid(&Imports::default());
        valid(&Imports {
            memories: vec![(0, 0), (0, 1), (3, 0)],
            tables: vec![
                (0, 0, wasm_encoder::RefType::FUNCREF),
                (3, 2, wasm_encoder::RefType::EXTERNREF),
            ],
            globals: vec![
                (0, 0, Num::I32),
                (0, 1, Num::I64),
                (3, 0, Num::F32),
                (3, 1, Num::F64),
            ],
        });
    }
}
