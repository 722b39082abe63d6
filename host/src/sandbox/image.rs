//! Core images: the state of one actor's wasm instance, read between two guest calls and
//! written into a fresh instance of the same module version.
//!
//! A component instance is a set of core instances, created in the same order by every
//! instantiation of the same component. An image holds, for each of them by its place in that
//! order: its mutable globals, its linear memories and the sizes of its tables. Memory is kept
//! as the 4 KiB pages that differ from a fresh instance of the module (the module's
//! [`Baseline`], taken from the first instance and checked against the second), zstd-compressed;
//! until that check has passed, or if it failed, as every non-zero page, against zeroes. A
//! restore writes only the pages the image holds, so an instance on copy-on-write memory keeps
//! sharing the rest with the module's image.
//!
//! Reading core state needs wasmtime's guest-debug access ([`crate::sandbox::engine`] builds
//! such engines for modules deployed with `snapshot`): an instance of another engine has no
//! image, and says so.
//!
//! What an image cannot hold is refused when capturing, never silently dropped: a shared
//! memory, a mutable reference-typed global, a table grown since instantiation (its contents
//! are rebuilt by instantiation, not kept).
//!
//! Invariants:
//! - Capturing reads the instance and changes nothing in it.
//! - An image is untrusted input on restore: every index, size, page number and length is
//!   checked against the fresh instance and the decompressed data before any byte is written,
//!   and a bad one is an [`ImageError`], never a panic or a write out of bounds.
//! - A restored instance's memories and globals equal the captured ones, byte for byte.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use wasmtime::{AsContextMut, Instance, Mutability, Val};

/// The granularity of the page diff, in bytes.
pub(crate) const PAGE: usize = 4096;
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
}

/// Where a global, memory or table is: the core instance's place in creation order, and its
/// index in that instance's index space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Slot {
    pub(crate) instance: u32,
    pub(crate) index: u32,
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
    V128(u128),
}

impl Value {
    fn of(val: &Val) -> Option<Value> {
        Some(match *val {
            Val::I32(v) => Value::I32(v),
            Val::I64(v) => Value::I64(v),
            Val::F32(v) => Value::F32(v),
            Val::F64(v) => Value::F64(v),
            Val::V128(v) => Value::V128(v.as_u128()),
            _ => return None,
        })
    }

    fn val(self) -> Val {
        match self {
            Value::I32(v) => Val::I32(v),
            Value::I64(v) => Val::I64(v),
            Value::F32(v) => Val::F32(v),
            Value::F64(v) => Val::F64(v),
            Value::V128(v) => Val::V128(v.into()),
        }
    }

    fn same_type(self, other: &Val) -> bool {
        Value::of(other)
            .is_some_and(|o| std::mem::discriminant(&o) == std::mem::discriminant(&self))
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
    pub(crate) data: Vec<u8>,
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

/// One memory of a fresh instance: its size and its non-zero pages.
struct MemoryBase {
    at: Slot,
    size: usize,
    /// Page number to contents, for the pages that are not all zero.
    pages: std::collections::HashMap<u32, Box<[u8]>>,
}

/// What a fresh instance of a module holds: the base images diff against.
pub(crate) struct Baseline {
    instances: u32,
    memories: Vec<MemoryBase>,
    tables: Vec<(Slot, u64)>,
}

impl Baseline {
    /// Reads a fresh instance: every core instance's memories and table sizes.
    pub(crate) fn of(mut store: impl AsContextMut) -> Result<Self, ImageError> {
        let mut store = store.as_context_mut();
        let core = Core::read(&mut store)?;
        let mut memories = Vec::new();
        for (at, memory) in &core.memories {
            let data = memory.data(&store);
            let pages = data
                .chunks(PAGE)
                .enumerate()
                .filter(|(_, page)| !is_zero(page))
                .map(|(n, page)| (n as u32, Box::<[u8]>::from(page)))
                .collect();
            memories.push(MemoryBase {
                at: *at,
                size: data.len(),
                pages,
            });
        }
        Ok(Baseline {
            instances: core.instances.len() as u32,
            memories,
            tables: core.tables,
        })
    }

    /// Whether another fresh instance holds exactly what this one does.
    pub(crate) fn matches(&self, other: &Baseline) -> bool {
        self.instances == other.instances
            && self.tables == other.tables
            && self.memories.len() == other.memories.len()
            && self
                .memories
                .iter()
                .zip(&other.memories)
                .all(|(a, b)| a.at == b.at && a.size == b.size && a.pages == b.pages)
    }
}

/// A module's baseline and whether a second fresh instance confirmed it.
#[derive(Default)]
pub(crate) struct Baselines {
    first: std::sync::OnceLock<Arc<Baseline>>,
    /// Set once a second fresh instance was compared: `Some(true)` if it matched.
    confirmed: std::sync::OnceLock<bool>,
}

impl Baselines {
    /// Records a fresh instance of the module: the first becomes the baseline, the second
    /// confirms it or not. Later ones are not read.
    pub(crate) fn record(&self, store: impl AsContextMut) {
        if self.confirmed.get().is_some() {
            return;
        }
        let Ok(fresh) = Baseline::of(store) else {
            return;
        };
        match self.first.get() {
            None => {
                let _ = self.first.set(Arc::new(fresh));
            }
            Some(first) => {
                let same = first.matches(&fresh);
                if !same {
                    tracing::warn!(
                        "two fresh instances of a module differ: its images hold every \
                         non-zero page"
                    );
                }
                let _ = self.confirmed.set(same);
            }
        }
    }

    /// Whether every fresh instance is known to instantiate alike.
    pub(crate) fn wanted(&self) -> bool {
        self.confirmed.get().is_none()
    }

    /// The base an image taken now diffs against.
    fn base(&self) -> Option<&Baseline> {
        match self.confirmed.get() {
            Some(true) => self.first.get().map(Arc::as_ref),
            _ => None,
        }
    }

    /// The baseline, confirmed or not (for table sizes).
    fn any(&self) -> Option<&Baseline> {
        self.first.get().map(Arc::as_ref)
    }
}

/// The core state an instance exposes through guest-debug access.
struct Core {
    instances: Vec<Instance>,
    globals: Vec<(Slot, wasmtime::Global)>,
    memories: Vec<(Slot, wasmtime::Memory)>,
    tables: Vec<(Slot, u64)>,
}

impl Core {
    /// Every core instance's globals, memories (each memory once, at its first slot) and
    /// table sizes.
    fn read(store: &mut wasmtime::StoreContextMut<'_, impl Sized>) -> Result<Self, ImageError> {
        let instances = store.as_context_mut().debug_all_instances();
        let mut core = Core {
            instances: Vec::new(),
            globals: Vec::new(),
            memories: Vec::new(),
            tables: Vec::new(),
        };
        let mut seen = Vec::new();
        for (i, instance) in instances.iter().enumerate() {
            let i = i as u32;
            for index in 0.. {
                let Some(global) = instance.debug_global(&mut *store, index) else {
                    break;
                };
                core.globals.push((Slot { instance: i, index }, global));
            }
            for index in 0.. {
                let Some(memory) = instance.debug_memory(&mut *store, index) else {
                    if instance.debug_shared_memory(&mut *store, index).is_some() {
                        return Err(ImageError::Uncapturable(format!(
                            "core instance {i} has a shared memory"
                        )));
                    }
                    break;
                };
                let ptr = memory.data_ptr(&*store) as usize;
                if memory.data_size(&*store) > 0 && seen.contains(&ptr) {
                    continue; // an import of a memory already listed
                }
                seen.push(ptr);
                core.memories.push((Slot { instance: i, index }, memory));
            }
            for index in 0.. {
                let Some(table) = instance.debug_table(&mut *store, index) else {
                    break;
                };
                core.tables
                    .push((Slot { instance: i, index }, table.size(&*store)));
            }
        }
        core.instances = instances;
        Ok(core)
    }
}

/// Whether a page is all zeroes.
fn is_zero(page: &[u8]) -> bool {
    let mut words = page.chunks_exact(16);
    words
        .by_ref()
        .all(|w| w.iter().fold(0u8, |acc, &b| acc | b) == 0)
        && words.remainder().iter().all(|&b| b == 0)
}

/// Reads the core state of the instance in `store` between two guest calls. `baselines` are
/// its module's; `None` diffs against zeroes.
pub(crate) fn capture(
    mut store: impl AsContextMut,
    baselines: &Baselines,
) -> Result<CoreImage, ImageError> {
    let mut store = store.as_context_mut();
    if !store.engine().get_guest_debug() {
        return Err(ImageError::NotEnabled(String::new()));
    }
    let core = Core::read(&mut store)?;
    if let Some(fresh) = baselines.any() {
        if fresh.instances as usize != core.instances.len() {
            return Err(ImageError::Uncapturable(
                "the component has a different number of core instances than a fresh one".into(),
            ));
        }
        if let Some(((at, size), _)) = core
            .tables
            .iter()
            .zip(&fresh.tables)
            .find(|((_, size), (_, fresh))| size != fresh)
        {
            return Err(ImageError::Uncapturable(format!(
                "table {} of core instance {} was grown to {size} entries: tables are rebuilt \
                 by instantiation, not kept",
                at.index, at.instance
            )));
        }
    }
    let mut globals = Vec::new();
    for (at, global) in &core.globals {
        if global.ty(&store).mutability() != Mutability::Var {
            continue;
        }
        let value = global.get(&mut store);
        let Some(value) = Value::of(&value) else {
            return Err(ImageError::Uncapturable(format!(
                "global {} of core instance {} holds a reference",
                at.index, at.instance
            )));
        };
        globals.push((*at, value));
    }
    let base = baselines.base();
    let mut memories = Vec::new();
    for (at, memory) in &core.memories {
        let data = memory.data(&store);
        let fresh = base.and_then(|b| b.memories.iter().find(|m| m.at == *at));
        let mut pages = Vec::new();
        let mut raw = Vec::new();
        for (n, page) in data.chunks(PAGE).enumerate() {
            let n = n as u32;
            let held = match fresh.and_then(|f| f.pages.get(&n)) {
                Some(was) => **was != *page,
                None => !is_zero(page),
            };
            if held {
                pages.push(n);
                raw.extend_from_slice(page);
                raw.resize(pages.len() * PAGE, 0);
            }
        }
        let data = zstd::bulk::compress(&raw, LEVEL)
            .map_err(|e| ImageError::Uncapturable(format!("compressing memory: {e}")))?;
        memories.push(MemoryImage {
            at: *at,
            size: memory.data_size(&store) as u64,
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
        instances: core.instances.len() as u32,
        globals,
        memories,
        tables: core.tables,
    })
}

/// Writes `image` into the fresh instance in `store`, whose memories may take at most
/// `limit` bytes in all. Everything is checked before anything is written.
pub(crate) fn restore(
    mut store: impl AsContextMut,
    image: &CoreImage,
    limit: u64,
) -> Result<(), ImageError> {
    let mut store = store.as_context_mut();
    if !store.engine().get_guest_debug() {
        return Err(ImageError::NotEnabled(String::new()));
    }
    let core = Core::read(&mut store)?;
    let corrupt = |what: String| Err(ImageError::Corrupt(what));
    if image.instances as usize != core.instances.len() {
        return corrupt(format!(
            "it has {} core instances, the module {}",
            image.instances,
            core.instances.len()
        ));
    }
    if image.tables != core.tables {
        return corrupt("its table sizes differ from the module's".into());
    }
    // Globals: each a mutable global of the same type.
    let mut globals = Vec::with_capacity(image.globals.len());
    for (at, value) in &image.globals {
        let Some((_, global)) = core.globals.iter().find(|(slot, _)| slot == at) else {
            return corrupt(format!(
                "no global {} in core instance {}",
                at.index, at.instance
            ));
        };
        if global.ty(&store).mutability() != Mutability::Var
            || !value.same_type(&global.get(&mut store))
        {
            return corrupt(format!(
                "global {} of core instance {} is not a mutable global of that type",
                at.index, at.instance
            ));
        }
        globals.push((*global, *value));
    }
    // Memories: each once, growing only, within the limit, its pages in range and whole.
    let needed: u64 = image.memories.iter().map(|m| m.size).sum();
    if needed > limit {
        return Err(ImageError::TooBig { needed, limit });
    }
    let mut writes = Vec::with_capacity(image.memories.len());
    for (i, m) in image.memories.iter().enumerate() {
        if image.memories[..i].iter().any(|other| other.at == m.at) {
            return corrupt("a memory is listed twice".into());
        }
        let Some((_, memory)) = core.memories.iter().find(|(slot, _)| *slot == m.at) else {
            return corrupt(format!(
                "no memory {} in core instance {}",
                m.at.index, m.at.instance
            ));
        };
        let page_size = memory.page_size(&store);
        let now = memory.data_size(&store) as u64;
        if m.size < now || m.size % page_size != 0 {
            return corrupt(format!(
                "memory size {} is below the fresh instance's {now} or not whole wasm pages",
                m.size
            ));
        }
        let count = m.size.div_ceil(PAGE as u64);
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
        writes.push((*memory, m, raw, (m.size - now) / page_size));
    }
    // Everything checked: write.
    for (memory, m, raw, grow) in writes {
        if grow > 0 {
            memory
                .grow(&mut store, grow)
                .map_err(|_| ImageError::TooBig {
                    needed: m.size,
                    limit,
                })?;
        }
        let data = memory.data_mut(&mut store);
        if image.base == Base::Zero {
            // Pages the image does not hold are zero in it.
            let mut held = m.pages.iter().peekable();
            for (n, page) in data.chunks_mut(PAGE).enumerate() {
                if held.peek().is_some_and(|&&p| p as usize == n) {
                    held.next();
                } else if !is_zero(page) {
                    page.fill(0);
                }
            }
        }
        for (page, bytes) in m.pages.iter().zip(raw.chunks_exact(PAGE)) {
            let start = *page as usize * PAGE;
            let end = (start + PAGE).min(data.len());
            data[start..end].copy_from_slice(&bytes[..end - start]);
        }
    }
    for (global, value) in globals {
        global
            .set(&mut store, value.val())
            .map_err(|e| ImageError::Corrupt(format!("setting a global: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HostConfig;
    use crate::sandbox::engine::{MemoryStrategy, build_engine};

    /// A module with a memory (one initial data page), a mutable and an immutable global, a
    /// table, and a function that writes `v` at `addr` and counts its calls in the global.
    const WAT: &str = r#"(module
        (memory (export "m") 2)
        (data (i32.const 16) "initial")
        (global $calls (mut i64) (i64.const 0))
        (global $fixed i32 (i32.const 7))
        (table 3 funcref)
        (func (export "poke") (param $addr i32) (param $v i32)
            (i32.store (local.get $addr) (local.get $v))
            (global.set $calls (i64.add (global.get $calls) (i64.const 1))))
        (func (export "peek") (param $addr i32) (result i32) (i32.load (local.get $addr)))
        (func (export "calls") (result i64) (global.get $calls))
        (func (export "grow") (param $pages i32) (result i32) (memory.grow (local.get $pages))))"#;

    struct Fixture {
        engine: wasmtime::Engine,
        module: wasmtime::Module,
    }

    impl Fixture {
        fn new(images: bool) -> Self {
            let mut config = HostConfig::new();
            config.epoch_interruption(false);
            let engine = build_engine(&config, MemoryStrategy::Arena, images).unwrap();
            let module = wasmtime::Module::new(&engine, WAT).unwrap();
            Fixture { engine, module }
        }

        fn instance(&self) -> (wasmtime::Store<()>, wasmtime::Instance) {
            let mut store = wasmtime::Store::new(&self.engine, ());
            let instance = wasmtime::Instance::new(&mut store, &self.module, &[]).unwrap();
            (store, instance)
        }
    }

    fn call<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
        store: &mut wasmtime::Store<()>,
        instance: &wasmtime::Instance,
        name: &str,
        params: P,
    ) -> R {
        let f = instance.get_typed_func::<P, R>(&mut *store, name).unwrap();
        f.call(store, params).unwrap()
    }

    /// Baselines confirmed by two fresh instances of the fixture.
    fn confirmed(fixture: &Fixture) -> Baselines {
        let baselines = Baselines::default();
        for _ in 0..2 {
            let (mut store, _) = fixture.instance();
            baselines.record(&mut store);
        }
        assert!(!baselines.wanted());
        baselines
    }

    #[test]
    fn a_restored_instance_has_the_captured_memory_and_globals() {
        let fixture = Fixture::new(true);
        let baselines = confirmed(&fixture);
        let (mut store, instance) = fixture.instance();
        let grown: i32 = call(&mut store, &instance, "grow", 1);
        assert_eq!(grown, 2);
        call::<(i32, i32), ()>(&mut store, &instance, "poke", (100_000, 42));
        call::<(i32, i32), ()>(&mut store, &instance, "poke", (150_000, 7));
        let image = capture(&mut store, &baselines).unwrap();
        assert_eq!(image.base, Base::Fresh);
        // Two pages written; the initial data page is unchanged, so it is not held.
        assert_eq!(image.memories[0].pages.len(), 2);
        assert_eq!(image.memories[0].size, 3 << 16);

        let (mut fresh, again) = fixture.instance();
        restore(&mut fresh, &image, 1 << 30).unwrap();
        let a: i32 = call(&mut fresh, &again, "peek", 100_000);
        let b: i32 = call(&mut fresh, &again, "peek", 150_000);
        let calls: i64 = call(&mut fresh, &again, "calls", ());
        assert_eq!((a, b, calls), (42, 7, 2));
        let memory = again.get_memory(&mut fresh, "m").unwrap();
        assert_eq!(&memory.data(&fresh)[16..23], b"initial");
        assert_eq!(memory.data_size(&fresh), 3 << 16);
        // The same state captured again gives the same image.
        assert_eq!(capture(&mut fresh, &baselines).unwrap(), image);
    }

    #[test]
    fn before_the_baseline_is_confirmed_images_hold_every_non_zero_page() {
        let fixture = Fixture::new(true);
        let baselines = Baselines::default();
        let (mut store, instance) = fixture.instance();
        baselines.record(&mut store);
        assert!(baselines.wanted());
        call::<(i32, i32), ()>(&mut store, &instance, "poke", (16, 0));
        call::<(i32, i32), ()>(&mut store, &instance, "poke", (20, 0));
        call::<(i32, i32), ()>(&mut store, &instance, "poke", (70_000, 9));
        let image = capture(&mut store, &baselines).unwrap();
        assert_eq!(image.base, Base::Zero);
        // The data page is all zero now: only the page written at 70,000 is held.
        assert_eq!(image.memories[0].pages, vec![(70_000 / PAGE) as u32]);
        let (mut fresh, again) = fixture.instance();
        restore(&mut fresh, &image, 1 << 30).unwrap();
        let memory = again.get_memory(&mut fresh, "m").unwrap();
        assert!(memory.data(&fresh)[..PAGE].iter().all(|&b| b == 0));
        let v: i32 = call(&mut fresh, &again, "peek", 70_000);
        assert_eq!(v, 9);
    }

    #[test]
    fn an_engine_without_images_captures_nothing() {
        let fixture = Fixture::new(false);
        let (mut store, _) = fixture.instance();
        let refused = capture(&mut store, &Baselines::default());
        assert!(
            matches!(refused, Err(ImageError::NotEnabled(_))),
            "{refused:?}"
        );
    }

    /// Each damage is refused with a typed error, and leaves the fresh instance as it was.
    #[test]
    fn a_damaged_image_is_refused_before_anything_is_written() {
        let fixture = Fixture::new(true);
        let baselines = confirmed(&fixture);
        let (mut store, instance) = fixture.instance();
        call::<(i32, i32), ()>(&mut store, &instance, "poke", (5000, 5));
        let good = capture(&mut store, &baselines).unwrap();
        type Damage = Box<dyn Fn(&mut CoreImage)>;
        let damages: Vec<(&str, Damage)> = vec![
            ("instances", Box::new(|i| i.instances += 1)),
            ("tables", Box::new(|i| i.tables[0].1 = 9)),
            ("global slot", Box::new(|i| i.globals[0].0.index = 99)),
            ("global type", Box::new(|i| i.globals[0].1 = Value::I32(1))),
            ("memory slot", Box::new(|i| i.memories[0].at.instance = 3)),
            ("shrunk", Box::new(|i| i.memories[0].size = 0)),
            ("odd size", Box::new(|i| i.memories[0].size += 1)),
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
        for (what, damage) in damages {
            let mut bad = good.clone();
            damage(&mut bad);
            let (mut fresh, again) = fixture.instance();
            let refused = restore(&mut fresh, &bad, 1 << 30);
            assert!(
                matches!(refused, Err(ImageError::Corrupt(_))),
                "{what}: {refused:?}"
            );
            let v: i32 = call(&mut fresh, &again, "peek", 5000);
            let calls: i64 = call(&mut fresh, &again, "calls", ());
            assert_eq!((v, calls), (0, 0), "{what}: the instance was written");
        }
        let (mut fresh, _) = fixture.instance();
        let big = restore(&mut fresh, &good, 1000);
        assert!(matches!(big, Err(ImageError::TooBig { .. })), "{big:?}");
    }
}
