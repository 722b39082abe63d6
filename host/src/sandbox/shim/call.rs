//! The host's side of the shim: its functions found in a compiled component, and called on
//! one instance.

use wasmtime::Store;
use wasmtime::component::{Component, ComponentExportIndex, Instance, TypedFunc, WasmList};

use super::abi::{LIFTED, Lifted, WASM_PAGE, export_name};

/// Where the shim's lifted functions are in a compiled component, found once at deploy.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ShimExports {
    read: ComponentExportIndex,
    write_pages: ComponentExportIndex,
    zero: ComponentExportIndex,
    size: ComponentExportIndex,
    grow: ComponentExportIndex,
    globals: ComponentExportIndex,
    set_globals: ComponentExportIndex,
    table_size: ComponentExportIndex,
    nonzero_pages: ComponentExportIndex,
}

impl ShimExports {
    /// The shim's exports of an instrumented component; `None` if one is missing.
    pub(crate) fn find(component: &Component) -> Option<Self> {
        let find = |lifted: &Lifted| component.get_export_index(None, export_name(lifted));
        let [
            read,
            write_pages,
            zero,
            size,
            grow,
            globals,
            set_globals,
            table_size,
            nonzero_pages,
        ] = &LIFTED;
        Some(ShimExports {
            read: find(read)?,
            write_pages: find(write_pages)?,
            zero: find(zero)?,
            size: find(size)?,
            grow: find(grow)?,
            globals: find(globals)?,
            set_globals: find(set_globals)?,
            table_size: find(table_size)?,
            nonzero_pages: find(nonzero_pages)?,
        })
    }
}

/// The shim of one instance, its functions type-checked, ready to call between two guest
/// calls. Indices are the shim's (see [`Imports`](super::abi::Imports)).
pub(crate) struct Shim {
    instance: Instance,
    write_pages: ComponentExportIndex,
    set_globals: ComponentExportIndex,
    read: TypedFunc<(u32, u32, u32), (WasmList<u8>,)>,
    zero: TypedFunc<(u32, u32, u32), ()>,
    size: TypedFunc<(u32,), (u32,)>,
    grow: TypedFunc<(u32, u32), (i32,)>,
    globals: TypedFunc<(), (WasmList<u64>,)>,
    table_size: TypedFunc<(u32,), (u32,)>,
    nonzero_pages: TypedFunc<(u32, u32, u32), (WasmList<u32>,)>,
}

impl Shim {
    /// The shim of `instance`, whose component has these exports.
    pub(crate) fn new<T: 'static>(
        store: &mut Store<T>,
        instance: Instance,
        exports: ShimExports,
    ) -> wasmtime::Result<Self> {
        // `write-pages` and `set-globals` borrow their arguments: they are typed at each call.
        instance.get_typed_func::<(u32, &[u32], &[u8]), ()>(&mut *store, exports.write_pages)?;
        instance.get_typed_func::<(&[u64],), ()>(&mut *store, exports.set_globals)?;
        Ok(Shim {
            instance,
            write_pages: exports.write_pages,
            set_globals: exports.set_globals,
            read: instance.get_typed_func(&mut *store, exports.read)?,
            zero: instance.get_typed_func(&mut *store, exports.zero)?,
            size: instance.get_typed_func(&mut *store, exports.size)?,
            grow: instance.get_typed_func(&mut *store, exports.grow)?,
            globals: instance.get_typed_func(&mut *store, exports.globals)?,
            table_size: instance.get_typed_func(&mut *store, exports.table_size)?,
            nonzero_pages: instance.get_typed_func(&mut *store, exports.nonzero_pages)?,
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

    /// Writes the `i`th [`PAGE`](super::abi::PAGE) of `data` to page `pages[i]` of memory
    /// `memory`.
    pub(crate) async fn write_pages<T: Send + 'static>(
        &self,
        store: &mut Store<T>,
        memory: u32,
        pages: &[u32],
        data: &[u8],
    ) -> wasmtime::Result<()> {
        let write = self
            .instance
            .get_typed_func::<(u32, &[u32], &[u8]), ()>(&mut *store, self.write_pages)?;
        write.call_async(store, (memory, pages, data)).await
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

    /// The numbers of the pages of `length` bytes of memory `memory` from `offset` (both
    /// multiples of a page) that hold a byte other than zero, in order, as the shim's memory
    /// holds them until the next call.
    pub(crate) async fn nonzero_pages<'s, T: Send + 'static>(
        &self,
        store: &'s mut Store<T>,
        memory: u32,
        offset: u32,
        length: u32,
    ) -> wasmtime::Result<&'s [u32]> {
        let (list,) = self
            .nonzero_pages
            .call_async(&mut *store, (memory, offset, length))
            .await?;
        let store: &'s Store<T> = store;
        Ok(list.as_le_slice(store))
    }

    /// Every global's bits, in the shim's order.
    pub(crate) async fn globals<T: Send + 'static>(
        &self,
        store: &mut Store<T>,
    ) -> wasmtime::Result<Vec<u64>> {
        let (list,) = self.globals.call_async(&mut *store, ()).await?;
        let words = list.as_le_slice(&*store);
        Ok(words.iter().map(|&w| u64::from_le(w)).collect())
    }

    /// Sets every global from its bits, in the shim's order (`bits` has one per global).
    pub(crate) async fn set_globals<T: Send + 'static>(
        &self,
        store: &mut Store<T>,
        bits: &[u64],
    ) -> wasmtime::Result<()> {
        let set = self
            .instance
            .get_typed_func::<(&[u64],), ()>(&mut *store, self.set_globals)?;
        set.call_async(store, (bits,)).await
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
