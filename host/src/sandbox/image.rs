//! Core images: the state of one actor's wasm instance, read between two guest calls and
//! written into a fresh instance of the same module version.
//!
//! A module deployed with snapshots on is instrumented ([`super::instrument`]): its
//! component carries a snapshot shim ([`super::shim`]) that reaches every linear memory, table
//! and mutable global its core instances define, and the [`Layout`] says which is which. An
//! image holds, by [`Slot`] (core instance in creation order, index in it): the mutable
//! globals, the linear memories and the sizes of the tables. Memory is kept as the 4 KiB pages
//! that differ from a fresh instance of the module (its [`Baselines`]), zstd-compressed; until
//! the baseline is confirmed, or if it was not, as every non-zero page, against zeroes. A
//! restore writes only the pages the image holds, so an instance on copy-on-write memory keeps
//! sharing the rest with the module's image.
//!
//! What an image cannot hold is refused when capturing, never silently dropped: a mutable
//! global of a vector or reference type, a table grown since instantiation (its contents are
//! rebuilt by instantiation, not kept). Shared and 64-bit memories are refused at deploy.
//!
//! Invariants:
//! - Capturing reads the instance and changes nothing in it.
//! - An image is untrusted input on restore: every index, size, page number and length is
//!   checked against the layout, the fresh instance and the decompressed data before any
//!   byte is written, and a bad one is an [`ImageError`], never a panic, a trap or a write
//!   out of bounds.
//! - A restored instance's memories and globals equal the captured ones, byte for byte.

use serde::{Deserialize, Serialize};
use wasmtime::Store;
use wasmtime::component::Instance;

use super::baseline::{Baseline, Baselines, CHUNK, PAGE, is_zero, nonzero_pages, table_sizes};
use super::instrument::{Layout, Slot};
use super::shim::{Num, Shim, ShimExports, WASM_PAGE};

/// The zstd level images are compressed at: fast, and zero-heavy pages still shrink well.
const LEVEL: i32 = 1;

/// Why an instance's state cannot be read or written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ImageError {
    /// The module was not deployed for snapshots: its instances' core state is out of reach.
    #[error("module {0:?} was not deployed with snapshots on (manifest `snapshot = true`)")]
    NotEnabled(String),
    /// The instance holds what an image cannot keep.
    #[error("the instance cannot be captured: {0}")]
    Uncapturable(String),
    /// The image does not fit the module's fresh instance, or its data is damaged.
    #[error("the image is corrupt or does not fit the module: {0}")]
    Corrupt(String),
    /// Restoring it would take more memory than the actor may have.
    #[error("the image needs {needed} bytes of memory, over the limit of {limit}")]
    TooBig {
        /// Bytes the image's memories take.
        needed: u64,
        /// The actor's memory limit.
        limit: u64,
    },
    /// A call of the instance's snapshot shim failed (the instance is unusable after it).
    #[error("the instance's core state could not be read or written: {0}")]
    Access(String),
}

/// A failed call of the shim.
fn access(error: wasmtime::Error) -> ImageError {
    ImageError::Access(format!("{error:#}"))
}

/// A global's value, by type.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum Value {
    I32(i32),
    I64(i64),
    /// The bits of an f32.
    F32(u32),
    /// The bits of an f64.
    F64(u64),
}

impl Value {
    /// The value of a global of type `num` whose bits the shim read.
    fn of(num: Num, bits: u64) -> Value {
        match num {
            Num::I32 => Value::I32(bits as u32 as i32),
            Num::I64 => Value::I64(bits as i64),
            Num::F32 => Value::F32(bits as u32),
            Num::F64 => Value::F64(bits),
        }
    }

    fn num(self) -> Num {
        match self {
            Value::I32(_) => Num::I32,
            Value::I64(_) => Num::I64,
            Value::F32(_) => Num::F32,
            Value::F64(_) => Num::F64,
        }
    }

    /// Its bits, as the shim sets them.
    fn bits(self) -> u64 {
        match self {
            Value::I32(v) => u64::from(v as u32),
            Value::I64(v) => v as u64,
            Value::F32(bits) => u64::from(bits),
            Value::F64(bits) => bits,
        }
    }
}

/// One memory's pages that differ from the base.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct MemoryImage {
    pub(crate) at: Slot,
    /// Its size in bytes.
    pub(crate) size: u64,
    /// The page numbers held, strictly increasing.
    pub(crate) pages: Vec<u32>,
    /// Those pages, in order, zstd-compressed as one frame.
    #[serde(with = "byte_string")]
    pub(crate) data: Vec<u8>,
}

/// A byte buffer as one serde byte string: postcard copies it whole instead of a byte at a
/// time, and writes the same bytes a sequence of `u8` has (a varint length, then the bytes).
mod byte_string {
    use std::fmt;

    use serde::de::{SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};

    /// Writes `bytes` as a byte string.
    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    /// Reads a byte string (or a sequence of `u8`, for formats without byte strings).
    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(Bytes)
    }

    /// The visitor of [`deserialize`].
    struct Bytes;

    impl<'de> Visitor<'de> for Bytes {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a byte string")
        }

        fn visit_bytes<E>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
            Ok(bytes.to_vec())
        }

        fn visit_byte_buf<E>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(bytes)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            // Bounded by what the format says is left, never by a length the input claims.
            let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(byte) = seq.next_element()? {
                bytes.push(byte);
            }
            Ok(bytes)
        }
    }
}

/// What an image's pages differ from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Base {
    /// A fresh instance of the module (which instantiates alike every time).
    Fresh,
    /// Zeroes: every non-zero page is held.
    Zero,
}

/// The core state of one instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CoreImage {
    pub(crate) base: Base,
    /// How many core instances the component made.
    pub(crate) instances: u32,
    pub(crate) globals: Vec<(Slot, Value)>,
    pub(crate) memories: Vec<MemoryImage>,
    /// Every table's size, checked on restore (their contents come from instantiation).
    pub(crate) tables: Vec<(Slot, u64)>,
}

impl CoreImage {
    /// The bytes of memory it holds, uncompressed, and compressed.
    pub(crate) fn page_bytes(&self) -> (u64, u64) {
        self.memories.iter().fold((0, 0), |(raw, packed), m| {
            (
                raw + (m.pages.len() * PAGE) as u64,
                packed + m.data.len() as u64,
            )
        })
    }
}

/// What a module deployed with snapshots on keeps for its images: the layout of its
/// instrumented component, where the shim's functions are, and its baseline.
pub(crate) struct Snapshots {
    pub(crate) layout: Layout,
    pub(crate) exports: ShimExports,
    pub(crate) baselines: Baselines,
}

impl Snapshots {
    /// Snapshots of a module instrumented into `layout`, whose shim is at `exports`.
    pub(crate) fn new(layout: Layout, exports: ShimExports) -> Self {
        Snapshots {
            layout,
            exports,
            baselines: Baselines::default(),
        }
    }

    /// Reads a fresh instance of the module into its baselines, if they still want one.
    pub(crate) async fn record<T: Send + 'static>(&self, store: &mut Store<T>, instance: Instance) {
        if !self.baselines.wanted() {
            return;
        }
        let read = async {
            let shim = Shim::new(store, instance, self.exports)?;
            Baseline::read(store, &shim, &self.layout).await
        };
        match read.await {
            Ok(fresh) => self.baselines.record(fresh),
            Err(error) => {
                let error = format!("{error:#}");
                tracing::warn!(%error, "a fresh instance could not be read as a baseline");
            }
        }
    }
}

/// Reads the core state of `instance` between two guest calls.
pub(crate) async fn capture<T: Send + 'static>(
    store: &mut Store<T>,
    instance: Instance,
    snapshots: &Snapshots,
) -> Result<CoreImage, ImageError> {
    let Snapshots {
        layout,
        exports,
        baselines,
    } = snapshots;
    if let Some((at, ty)) = layout.uncapturable.first() {
        return Err(ImageError::Uncapturable(format!(
            "global {} of core instance {} is a mutable {ty}",
            at.index, at.instance
        )));
    }
    let shim = Shim::new(store, instance, *exports).map_err(access)?;
    let tables = table_sizes(store, &shim, layout).await.map_err(access)?;
    if let Some(fresh) = baselines.any()
        && let Some(((at, size), _)) = tables
            .iter()
            .zip(&fresh.tables)
            .find(|((_, size), (_, fresh))| size != fresh)
    {
        return Err(ImageError::Uncapturable(format!(
            "table {} of core instance {} was grown to {size} entries: tables are rebuilt by \
             instantiation, not kept",
            at.index, at.instance
        )));
    }
    let bits = shim.globals(store).await.map_err(access)?;
    if bits.len() != layout.globals.len() {
        return Err(ImageError::Access(format!(
            "the shim read {} globals of {}",
            bits.len(),
            layout.globals.len()
        )));
    }
    let globals = (layout.globals.iter().zip(bits))
        .map(|(&(at, num), bits)| (at, Value::of(num, bits)))
        .collect();
    let base = baselines.base();
    let mut memories = Vec::with_capacity(layout.memories.len());
    for (i, at) in layout.memories.iter().enumerate() {
        let size = shim.memory_size(store, i as u32).await.map_err(access)?;
        let fresh = base.and_then(|b| b.memories.iter().find(|m| m.at == *at));
        // Only a page that holds a non-zero byte now, or one the baseline holds, can differ
        // from the baseline: every other page is zero in both, and is not read.
        let mut listed = nonzero_pages(store, &shim, i as u32, size)
            .await
            .map_err(access)?;
        if let Some(fresh) = fresh {
            let end = size / PAGE as u64;
            listed.extend(fresh.pages.keys().filter(|&&n| u64::from(n) < end));
            listed.sort_unstable();
            listed.dedup();
        }
        let (mut pages, mut raw) = (Vec::new(), Vec::new());
        for (first, count) in runs(&listed) {
            let (offset, length) = (first * PAGE as u32, (count * PAGE) as u32);
            let data = shim
                .read(store, i as u32, offset, length)
                .await
                .map_err(access)?;
            for (n, page) in (first..).zip(data.chunks(PAGE)) {
                let held = match fresh.and_then(|f| f.pages.get(&n)) {
                    Some(was) => **was != *page,
                    None => !is_zero(page),
                };
                if held {
                    pages.push(n);
                    raw.extend_from_slice(page);
                }
            }
        }
        let mut data = zstd::bulk::compress(&raw, LEVEL)
            .map_err(|e| ImageError::Uncapturable(format!("compressing memory: {e}")))?;
        // zstd hands back room for the worst case (about the raw size): a hibernating actor
        // keeps its image, so it keeps only the compressed bytes.
        data.shrink_to_fit();
        pages.shrink_to_fit();
        memories.push(MemoryImage {
            at: *at,
            size,
            pages,
            data,
        });
    }
    Ok(CoreImage {
        base: if base.is_some() {
            Base::Fresh
        } else {
            Base::Zero
        },
        instances: layout.instances,
        globals,
        memories,
        tables,
    })
}

/// One memory's write, checked: the shim's index, the pages to grow by, the image's pages
/// and their bytes.
struct Write<'a> {
    memory: u32,
    now: u64,
    grow: u32,
    image: &'a MemoryImage,
    raw: Vec<u8>,
}

/// Writes `image` into the fresh `instance`, whose memories may take at most `limit` bytes
/// in all. Everything is checked before anything is written.
pub(crate) async fn restore<T: Send + 'static>(
    store: &mut Store<T>,
    instance: Instance,
    snapshots: &Snapshots,
    image: &CoreImage,
    limit: u64,
) -> Result<(), ImageError> {
    let layout = &snapshots.layout;
    let corrupt = |what: String| Err(ImageError::Corrupt(what));
    if image.instances != layout.instances {
        return corrupt(format!(
            "it has {} core instances, the module {}",
            image.instances, layout.instances
        ));
    }
    let shim = Shim::new(store, instance, snapshots.exports).map_err(access)?;
    if image.tables != table_sizes(store, &shim, layout).await.map_err(access)? {
        return corrupt("its table sizes differ from the module's".into());
    }
    // Globals: each a mutable global of the layout (sorted by slot), of the same type.
    let mut globals = Vec::with_capacity(image.globals.len());
    for (at, value) in &image.globals {
        let Ok(i) = layout.globals.binary_search_by_key(at, |&(slot, _)| slot) else {
            return corrupt(format!(
                "no mutable global {} in core instance {}",
                at.index, at.instance
            ));
        };
        if layout.globals[i].1 != value.num() {
            return corrupt(format!(
                "global {} of core instance {} is not a mutable global of that type",
                at.index, at.instance
            ));
        }
        globals.push((i, *value));
    }
    // Memories: each once, growing only, within the limit, its pages in range and whole.
    let needed = image
        .memories
        .iter()
        .fold(0u64, |sum, m| sum.saturating_add(m.size));
    if needed > limit {
        return Err(ImageError::TooBig { needed, limit });
    }
    let mut writes = Vec::with_capacity(image.memories.len());
    for (n, m) in image.memories.iter().enumerate() {
        if image.memories[..n].iter().any(|other| other.at == m.at) {
            return corrupt("a memory is listed twice".into());
        }
        let Ok(i) = layout.memories.binary_search(&m.at) else {
            return corrupt(format!(
                "no memory {} in core instance {}",
                m.at.index, m.at.instance
            ));
        };
        let now = shim.memory_size(store, i as u32).await.map_err(access)?;
        if m.size < now || m.size % WASM_PAGE != 0 || m.size > 1 << 32 {
            return corrupt(format!(
                "memory size {} is below the fresh instance's {now}, not whole wasm pages or \
                 past 4 GiB",
                m.size
            ));
        }
        let count = m.size / PAGE as u64;
        if !m.pages.windows(2).all(|w| w[0] < w[1])
            || m.pages.last().is_some_and(|&last| u64::from(last) >= count)
        {
            return corrupt("its page numbers are out of order or out of range".into());
        }
        let expected = m.pages.len() * PAGE;
        let raw = zstd::bulk::decompress(&m.data, expected)
            .map_err(|e| ImageError::Corrupt(format!("memory data: {e}")))?;
        if raw.len() != expected {
            return corrupt(format!(
                "memory data is {} bytes, {expected} expected",
                raw.len()
            ));
        }
        writes.push(Write {
            memory: i as u32,
            now,
            grow: ((m.size - now) / WASM_PAGE) as u32,
            image: m,
            raw,
        });
    }
    // Everything checked: write.
    for write in writes {
        let Write {
            memory,
            now,
            grow,
            image: m,
            raw,
        } = write;
        if grow > 0 && !shim.grow(store, memory, grow).await.map_err(access)? {
            return Err(ImageError::TooBig {
                needed: m.size,
                limit,
            });
        }
        if image.base == Base::Zero {
            // Pages the image does not hold are zero in it (the grown ones are already).
            let mut held = m.pages.iter().copied().peekable();
            let nonzero = nonzero_pages(store, &shim, memory, now)
                .await
                .map_err(access)?;
            let stale: Vec<u32> = (nonzero.into_iter())
                .filter(|&n| {
                    while held.next_if(|&p| p < n).is_some() {}
                    held.peek() != Some(&n)
                })
                .collect();
            for (first, count) in runs(&stale) {
                let (offset, length) = (first as usize * PAGE, count * PAGE);
                shim.zero(store, memory, offset as u32, length as u32)
                    .await
                    .map_err(access)?;
            }
        }
        // The held pages, scattered, a chunk's worth a call.
        let per_call = CHUNK as usize / PAGE;
        for (pages, bytes) in m.pages.chunks(per_call).zip(raw.chunks(CHUNK as usize)) {
            shim.write_pages(store, memory, pages, bytes)
                .await
                .map_err(access)?;
        }
    }
    if !globals.is_empty() {
        // Those the image does not list keep the fresh instance's values.
        let mut bits = shim.globals(store).await.map_err(access)?;
        for (i, value) in globals {
            let Some(word) = bits.get_mut(i) else {
                return Err(ImageError::Access("the shim read too few globals".into()));
            };
            *word = value.bits();
        }
        shim.set_globals(store, &bits).await.map_err(access)?;
    }
    Ok(())
}

/// The runs of consecutive page numbers in `pages` (strictly increasing), each at most
/// [`CHUNK`] bytes: its first page and its length in pages.
fn runs(pages: &[u32]) -> Vec<(u32, usize)> {
    let most = CHUNK as usize / PAGE;
    let mut out: Vec<(u32, usize)> = Vec::new();
    for &page in pages {
        match out.last_mut() {
            Some((first, count)) if *first as usize + *count == page as usize && *count < most => {
                *count += 1;
            }
            _ => out.push((page, 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use wasmtime::component::{Component, ComponentNamedList, Lift, Linker, Lower};

    use super::*;
    use crate::config::HostConfig;
    use crate::sandbox::baseline::each_page;
    use crate::sandbox::engine::{MemoryStrategy, build_engine};
    use crate::sandbox::instrument::instrument;

    /// A component whose core module has a memory (one initial data page), an immutable
    /// global and mutable ones of each number type, a table, and functions that write `v` at
    /// `addr` (changing every mutable global: a count of calls, ...) and grow the memory or
    /// the table.
    const WAT: &str = r#"(component
        (core module $m
            (memory (export "m") 2)
            (data (i32.const 16) "initial")
            (global $calls (mut i64) (i64.const 0))
            (global $fixed i32 (i32.const 7))
            (global $ratio (mut f32) (f32.const 0.5))
            (global $down (mut i32) (i32.const 0))
            (global $scale (mut f64) (f64.const -1.25))
            (table 3 funcref)
            (func (export "poke") (param $addr i32) (param $v i32)
                (i32.store (local.get $addr) (local.get $v))
                (global.set $ratio (f32.mul (global.get $ratio) (f32.const 3)))
                (global.set $down (i32.sub (global.get $down) (i32.const 1)))
                (global.set $scale (f64.mul (global.get $scale) (f64.const 2)))
                (global.set $calls (i64.add (global.get $calls) (i64.const 1))))
            (func (export "peek") (param $addr i32) (result i32) (i32.load (local.get $addr)))
            (func (export "calls") (result i64) (global.get $calls))
            (func (export "grow") (param $pages i32) (result i32) (memory.grow (local.get $pages)))
            (func (export "fill") (param $at i32) (param $length i32) (param $v i32)
                (memory.fill (local.get $at) (local.get $v) (local.get $length)))
            (func (export "grow-table") (result i32) (table.grow (ref.null func) (i32.const 1))))
        (core instance $i (instantiate $m))
        (func (export "poke") (param "addr" u32) (param "v" u32) (canon lift (core func $i "poke")))
        (func (export "peek") (param "addr" u32) (result u32) (canon lift (core func $i "peek")))
        (func (export "calls") (result u64) (canon lift (core func $i "calls")))
        (func (export "grow") (param "pages" u32) (result s32) (canon lift (core func $i "grow")))
        (func (export "fill") (param "at" u32) (param "length" u32) (param "v" u32)
            (canon lift (core func $i "fill")))
        (func (export "grow-table") (result s32) (canon lift (core func $i "grow-table"))))"#;

    #[test]
    fn page_data_is_a_byte_string_with_the_bytes_a_sequence_has() {
        /// [`MemoryImage`] as format 2 was first written: its data a plain sequence of `u8`.
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct AsSequence {
            at: Slot,
            size: u64,
            pages: Vec<u32>,
            data: Vec<u8>,
        }
        let at = Slot {
            instance: 1,
            index: 0,
        };
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let image = MemoryImage {
            at,
            size: 65536,
            pages: vec![0, 3],
            data: data.clone(),
        };
        let old = AsSequence {
            at,
            size: 65536,
            pages: vec![0, 3],
            data,
        };
        let bytes = postcard::to_allocvec(&image).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&old).unwrap());
        assert_eq!(postcard::from_bytes::<MemoryImage>(&bytes).unwrap(), image);
        // A length past the input is refused, not allocated.
        let mut cut = bytes.clone();
        cut.truncate(bytes.len() - 1);
        assert!(postcard::from_bytes::<MemoryImage>(&cut).is_err());
    }

    struct Fixture {
        engine: wasmtime::Engine,
        component: Component,
        snapshots: Snapshots,
    }

    impl Fixture {
        fn new(wat: &str) -> Self {
            let mut config = HostConfig::new();
            config.epoch_interruption(false);
            let stacks = std::sync::Arc::new(crate::sandbox::arena::Stacks::new(
                config.max_wasm_stack + config.async_stack,
            ));
            let engine = build_engine(&config, MemoryStrategy::Arena, &stacks).unwrap();
            let instrumented = instrument(&wat::parse_str(wat).unwrap()).unwrap();
            let component = Component::new(&engine, &instrumented.bytes).unwrap();
            let exports = ShimExports::find(&component).unwrap();
            Fixture {
                engine,
                component,
                snapshots: Snapshots::new(instrumented.layout, exports),
            }
        }

        async fn instance(&self) -> (Store<()>, Instance) {
            let mut store = Store::new(&self.engine, ());
            let instance = Linker::new(&self.engine)
                .instantiate_async(&mut store, &self.component)
                .await
                .unwrap();
            (store, instance)
        }

        /// A fixture of [`WAT`] whose baseline two fresh instances confirmed.
        async fn confirmed() -> Self {
            let fixture = Fixture::new(WAT);
            for _ in 0..2 {
                let (mut store, instance) = fixture.instance().await;
                fixture.snapshots.record(&mut store, instance).await;
            }
            assert!(!fixture.snapshots.baselines.wanted());
            fixture
        }

        /// Every memory's bytes and every global's bits, read through the shim.
        async fn state(
            &self,
            store: &mut Store<()>,
            instance: Instance,
        ) -> (Vec<Vec<u8>>, Vec<u64>) {
            let shim = Shim::new(store, instance, self.snapshots.exports).unwrap();
            let mut memories = Vec::new();
            for i in 0..self.snapshots.layout.memories.len() as u32 {
                let size = shim.memory_size(store, i).await.unwrap();
                let mut bytes = Vec::new();
                each_page(store, &shim, i, size, |_, page| {
                    bytes.extend_from_slice(page)
                })
                .await
                .unwrap();
                memories.push(bytes);
            }
            (memories, shim.globals(store).await.unwrap())
        }

        /// A fresh instance with `image` restored into it, checked to equal the captured
        /// `instance` in every memory byte and global.
        async fn restored(
            &self,
            image: &CoreImage,
            store: &mut Store<()>,
            instance: Instance,
        ) -> (Store<()>, Instance) {
            let (mut fresh, again) = self.instance().await;
            restore(&mut fresh, again, &self.snapshots, image, 1 << 30)
                .await
                .unwrap();
            assert_eq!(
                self.state(&mut fresh, again).await,
                self.state(store, instance).await
            );
            (fresh, again)
        }
    }

    async fn call<P, R>(store: &mut Store<()>, instance: Instance, name: &str, params: P) -> R
    where
        P: ComponentNamedList + Lower + Send + Sync,
        R: ComponentNamedList + Lift + Send + Sync + 'static,
    {
        let f = instance.get_typed_func::<P, R>(&mut *store, name).unwrap();
        f.call_async(store, params).await.unwrap()
    }

    #[tokio::test]
    async fn a_restored_instance_equals_the_captured_one_byte_for_byte() {
        let fixture = Fixture::confirmed().await;
        let (mut store, instance) = fixture.instance().await;
        let (grown,): (i32,) = call(&mut store, instance, "grow", (10u32,)).await;
        assert_eq!(grown, 2);
        call::<_, ()>(&mut store, instance, "poke", (100_000u32, 42u32)).await;
        // Pages 32 to 178, more than one call of the shim reads or writes.
        call::<_, ()>(
            &mut store,
            instance,
            "fill",
            (2u32 << 16, 600_000u32, 0x5au32),
        )
        .await;
        call::<_, ()>(&mut store, instance, "poke", (150_000u32, 7u32)).await;
        let image = capture(&mut store, instance, &fixture.snapshots)
            .await
            .unwrap();
        assert_eq!(image.base, Base::Fresh);
        // An image holds no spare room: a sleeping actor keeps it.
        let held = &image.memories[0];
        assert_eq!(held.data.capacity(), held.data.len());
        assert_eq!(held.pages.capacity(), held.pages.len());
        // The page poked at 100,000 and the filled ones; the initial data page is unchanged,
        // so it is not held.
        assert_eq!(image.memories[0].pages.len(), 1 + 147);
        assert!(image.memories[0].pages.len() * PAGE > CHUNK as usize);
        assert_eq!(image.memories[0].size, 12 << 16);
        let values: Vec<Value> = image.globals.iter().map(|&(_, v)| v).collect();
        let expected = [
            Value::I64(2),
            Value::F32(4.5f32.to_bits()),
            Value::I32(-2),
            Value::F64((-5.0f64).to_bits()),
        ];
        assert_eq!(values, expected);

        let (mut fresh, again) = fixture.restored(&image, &mut store, instance).await;
        let (a,): (u32,) = call(&mut fresh, again, "peek", (100_000u32,)).await;
        let (calls,): (u64,) = call(&mut fresh, again, "calls", ()).await;
        assert_eq!((a, calls), (42, 2));
        // The same state captured again gives the same image.
        let again = capture(&mut fresh, again, &fixture.snapshots)
            .await
            .unwrap();
        assert_eq!(again, image);
    }

    #[tokio::test]
    async fn the_shim_lists_exactly_the_pages_holding_a_byte_other_than_zero() {
        let fixture = Fixture::new(WAT);
        let (mut store, instance) = fixture.instance().await;
        // Past 64 MiB, so that the scan takes two calls.
        let (grown,): (i32,) = call(&mut store, instance, "grow", (1024u32,)).await;
        assert_eq!(grown, 2);
        let end = 1026u32 << 16;
        let pokes = [
            // The last word of page 5, the first of page 9.
            (5 * 4096 + 4092, 1u32),
            (9 * 4096, 1),
            // Page 20 written, then zero again.
            (20 * 4096 + 64, 3),
            (20 * 4096 + 64, 0),
            // Beyond the first call's 64 MiB, and the memory's last word.
            ((64 << 20) + 8, 1),
            (end - 4, 1 << 31),
        ];
        for (addr, v) in pokes {
            call::<_, ()>(&mut store, instance, "poke", (addr, v)).await;
        }
        let shim = Shim::new(&mut store, instance, fixture.snapshots.exports).unwrap();
        let size = shim.memory_size(&mut store, 0).await.unwrap();
        let mut read = Vec::new();
        each_page(&mut store, &shim, 0, size, |n, page| {
            if !is_zero(page) {
                read.push(n);
            }
        })
        .await
        .unwrap();
        let listed = nonzero_pages(&mut store, &shim, 0, size).await.unwrap();
        assert_eq!(listed, read);
        // The data page, then the pokes' pages.
        assert_eq!(listed, [0, 5, 9, 16384, end / 4096 - 1]);
    }

    #[tokio::test]
    async fn a_baseline_page_written_back_to_zero_is_held_and_restored_as_zero() {
        let fixture = Fixture::confirmed().await;
        let (mut store, instance) = fixture.instance().await;
        // The initial data, "initial" at 16, overwritten with zeroes.
        call::<_, ()>(&mut store, instance, "fill", (16u32, 7u32, 0u32)).await;
        let image = capture(&mut store, instance, &fixture.snapshots)
            .await
            .unwrap();
        assert_eq!(image.base, Base::Fresh);
        assert_eq!(image.memories[0].pages, vec![0]);
        let (mut fresh, again) = fixture.restored(&image, &mut store, instance).await;
        let (word,): (u32,) = call(&mut fresh, again, "peek", (16u32,)).await;
        assert_eq!(word, 0);
    }

    #[tokio::test]
    async fn before_the_baseline_is_confirmed_images_hold_every_non_zero_page() {
        let fixture = Fixture::new(WAT);
        let (mut store, instance) = fixture.instance().await;
        fixture.snapshots.record(&mut store, instance).await;
        assert!(fixture.snapshots.baselines.wanted());
        call::<_, ()>(&mut store, instance, "poke", (16u32, 0u32)).await;
        call::<_, ()>(&mut store, instance, "poke", (20u32, 0u32)).await;
        call::<_, ()>(&mut store, instance, "poke", (70_000u32, 9u32)).await;
        let image = capture(&mut store, instance, &fixture.snapshots)
            .await
            .unwrap();
        assert_eq!(image.base, Base::Zero);
        // The data page is all zero now: only the page written at 70,000 is held.
        assert_eq!(image.memories[0].pages, vec![(70_000 / PAGE) as u32]);
        fixture.restored(&image, &mut store, instance).await;
    }

    /// Each damage is refused with a typed error, and leaves the fresh instance as it was.
    #[tokio::test]
    async fn a_damaged_image_is_refused_before_anything_is_written() {
        let fixture = Fixture::confirmed().await;
        let (mut store, instance) = fixture.instance().await;
        call::<_, ()>(&mut store, instance, "poke", (5000u32, 5u32)).await;
        let good = capture(&mut store, instance, &fixture.snapshots)
            .await
            .unwrap();
        type Damage = Box<dyn Fn(&mut CoreImage)>;
        let damages: Vec<(&str, Damage)> = vec![
            ("instances", Box::new(|i| i.instances += 1)),
            ("tables", Box::new(|i| i.tables[0].1 = 9)),
            ("global slot", Box::new(|i| i.globals[0].0.index = 99)),
            ("global type", Box::new(|i| i.globals[0].1 = Value::I32(1))),
            ("memory slot", Box::new(|i| i.memories[0].at.instance = 3)),
            ("shrunk", Box::new(|i| i.memories[0].size = 0)),
            ("odd size", Box::new(|i| i.memories[0].size += 1)),
            ("past 4 GiB", Box::new(|i| i.memories[0].size = 1 << 33)),
            ("page range", Box::new(|i| i.memories[0].pages[0] = 1 << 30)),
            ("page order", Box::new(|i| i.memories[0].pages.push(0))),
            ("data", Box::new(|i| i.memories[0].data.truncate(3))),
            (
                "data length",
                Box::new(|i| i.memories[0].data = zstd::bulk::compress(&[1; 100], 1).unwrap()),
            ),
            (
                "twice",
                Box::new(|i| i.memories.push(i.memories[0].clone())),
            ),
        ];
        let (mut pristine, first) = fixture.instance().await;
        let untouched = fixture.state(&mut pristine, first).await;
        for (what, damage) in damages {
            let mut bad = good.clone();
            damage(&mut bad);
            let (mut fresh, again) = fixture.instance().await;
            let refused = restore(&mut fresh, again, &fixture.snapshots, &bad, 1 << 40).await;
            assert!(
                matches!(refused, Err(ImageError::Corrupt(_))),
                "{what}: {refused:?}"
            );
            assert_eq!(
                fixture.state(&mut fresh, again).await,
                untouched,
                "{what}: the instance was written"
            );
        }
        let (mut fresh, again) = fixture.instance().await;
        let big = restore(&mut fresh, again, &fixture.snapshots, &good, 1000).await;
        assert!(matches!(big, Err(ImageError::TooBig { .. })), "{big:?}");
    }

    #[tokio::test]
    async fn a_grown_table_or_a_vector_global_is_refused_at_capture() {
        let fixture = Fixture::confirmed().await;
        let (mut store, instance) = fixture.instance().await;
        let (old,): (i32,) = call(&mut store, instance, "grow-table", ()).await;
        assert_eq!(old, 3);
        let refused = capture(&mut store, instance, &fixture.snapshots).await;
        assert!(
            matches!(&refused, Err(ImageError::Uncapturable(why)) if why.contains("table 0")),
            "{refused:?}"
        );

        let vector = r#"(component
            (core module $m (global (mut v128) (v128.const i64x2 0 0)))
            (core instance (instantiate $m)))"#;
        let fixture = Fixture::new(vector);
        let (mut store, instance) = fixture.instance().await;
        let refused = capture(&mut store, instance, &fixture.snapshots).await;
        assert!(
            matches!(&refused, Err(ImageError::Uncapturable(why)) if why.contains("v128")),
            "{refused:?}"
        );
    }

    #[test]
    fn runs_join_consecutive_pages_up_to_a_chunk() {
        assert_eq!(runs(&[]), vec![]);
        assert_eq!(runs(&[1, 2, 3, 7, 9, 10]), vec![(1, 3), (7, 1), (9, 2)]);
        let most = CHUNK as usize / PAGE;
        let long: Vec<u32> = (0..most as u32 + 1).collect();
        assert_eq!(runs(&long), vec![(0, most), (most as u32, 1)]);
    }
}
