//! The baseline of a module's images: what a fresh instance of it holds, read through its
//! snapshot shim ([`super::shim`]), so that an image keeps only the memory pages that differ.
//!
//! Invariants:
//! - The baseline is the module's first fresh instance; images diff against it only once a
//!   second fresh instance was found to hold exactly the same (instantiation is deterministic
//!   for Rust, C, componentize-py and jco output). Until then, or if it did not, they diff
//!   against zeroes.
//! - Reading an instance changes nothing in it: the shim only copies from its memories into
//!   its own.

use std::collections::HashMap;
use std::sync::OnceLock;

use wasmtime::Store;

use super::instrument::{Layout, Slot};
pub(crate) use super::shim::PAGE;
use super::shim::Shim;

/// How many bytes of memory one call of the shim reads or writes: its own memory grows to
/// this once, and a 10 MiB memory takes 40 calls.
pub(crate) const CHUNK: u32 = 256 << 10;

/// Hands each [`PAGE`] of memory `memory` (`size` bytes) to `page` with its number, reading
/// [`CHUNK`] bytes a call.
pub(crate) async fn each_page<T: Send + 'static>(
    store: &mut Store<T>,
    shim: &Shim,
    memory: u32,
    size: u64,
    mut page: impl FnMut(u32, &[u8]),
) -> wasmtime::Result<()> {
    let mut offset = 0u64;
    while offset < size {
        let length = (size - offset).min(u64::from(CHUNK)) as u32;
        let data = shim.read(store, memory, offset as u32, length).await?;
        let first = (offset / PAGE as u64) as u32;
        for (n, bytes) in data.chunks(PAGE).enumerate() {
            page(first + n as u32, bytes);
        }
        offset += u64::from(length);
    }
    Ok(())
}

/// How many bytes of memory one `nonzero-pages` call of the shim scans: its answer, a number
/// a page, takes up to 64 KiB of the shim's memory.
const SCAN: u32 = 64 << 20;

/// The numbers of the pages of memory `memory` (`size` bytes) that hold a byte other than
/// zero, in order. The shim scans them in place: nothing is copied.
pub(crate) async fn nonzero_pages<T: Send + 'static>(
    store: &mut Store<T>,
    shim: &Shim,
    memory: u32,
    size: u64,
) -> wasmtime::Result<Vec<u32>> {
    let mut pages = Vec::new();
    let mut offset = 0u64;
    while offset < size {
        let length = (size - offset).min(u64::from(SCAN)) as u32;
        pages.extend_from_slice(
            shim.nonzero_pages(store, memory, offset as u32, length)
                .await?,
        );
        offset += u64::from(length);
    }
    Ok(pages)
}

/// Every table's size, in the layout's order.
pub(crate) async fn table_sizes<T: Send + 'static>(
    store: &mut Store<T>,
    shim: &Shim,
    layout: &Layout,
) -> wasmtime::Result<Vec<(Slot, u64)>> {
    let mut sizes = Vec::with_capacity(layout.tables.len());
    for (i, at) in layout.tables.iter().enumerate() {
        sizes.push((*at, shim.table_size(store, i as u32).await?));
    }
    Ok(sizes)
}

/// Whether a page is all zeroes.
pub(crate) fn is_zero(page: &[u8]) -> bool {
    let mut words = page.chunks_exact(16);
    words
        .by_ref()
        .all(|w| w.iter().fold(0u8, |acc, &b| acc | b) == 0)
        && words.remainder().iter().all(|&b| b == 0)
}

/// One memory of a fresh instance: its size and its non-zero pages.
pub(crate) struct MemoryBase {
    pub(crate) at: Slot,
    pub(crate) size: u64,
    /// Page number to contents, for the pages that are not all zero.
    pub(crate) pages: HashMap<u32, Box<[u8]>>,
}

/// What a fresh instance of a module holds: the base images diff against.
pub(crate) struct Baseline {
    pub(crate) memories: Vec<MemoryBase>,
    pub(crate) tables: Vec<(Slot, u64)>,
}

impl Baseline {
    /// Reads a fresh instance: its memories and table sizes.
    pub(crate) async fn read<T: Send + 'static>(
        store: &mut Store<T>,
        shim: &Shim,
        layout: &Layout,
    ) -> wasmtime::Result<Self> {
        let mut memories = Vec::with_capacity(layout.memories.len());
        for (i, at) in layout.memories.iter().enumerate() {
            let size = shim.memory_size(store, i as u32).await?;
            let mut pages = HashMap::new();
            each_page(store, shim, i as u32, size, |n, page| {
                if !is_zero(page) {
                    pages.insert(n, Box::from(page));
                }
            })
            .await?;
            memories.push(MemoryBase {
                at: *at,
                size,
                pages,
            });
        }
        Ok(Baseline {
            memories,
            tables: table_sizes(store, shim, layout).await?,
        })
    }

    /// Whether another fresh instance holds exactly what this one does.
    pub(crate) fn matches(&self, other: &Baseline) -> bool {
        self.tables == other.tables
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
    first: OnceLock<Baseline>,
    /// Set once a second fresh instance was compared: `Some(true)` if it matched.
    confirmed: OnceLock<bool>,
}

impl Baselines {
    /// Whether fresh instances are still wanted: until a second one was compared.
    pub(crate) fn wanted(&self) -> bool {
        self.confirmed.get().is_none()
    }

    /// Records a fresh instance of the module: the first becomes the baseline, the second
    /// confirms it or not. Later ones are dropped.
    pub(crate) fn record(&self, fresh: Baseline) {
        if !self.wanted() {
            return;
        }
        match self.first.get() {
            None => {
                let _ = self.first.set(fresh);
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

    /// The base an image taken now diffs against: the baseline, once confirmed.
    pub(crate) fn base(&self) -> Option<&Baseline> {
        match self.confirmed.get() {
            Some(true) => self.first.get(),
            _ => None,
        }
    }

    /// The baseline, confirmed or not (for table sizes).
    pub(crate) fn any(&self) -> Option<&Baseline> {
        self.first.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn baseline(page: u8) -> Baseline {
        let at = Slot {
            instance: 0,
            index: 0,
        };
        Baseline {
            memories: vec![MemoryBase {
                at,
                size: 1 << 16,
                pages: HashMap::from([(0, Box::from(&[page; PAGE][..]))]),
            }],
            tables: vec![(at, 3)],
        }
    }

    #[test]
    fn a_baseline_counts_once_a_second_fresh_instance_matches_it() {
        let baselines = Baselines::default();
        baselines.record(baseline(1));
        assert!(baselines.wanted() && baselines.base().is_none() && baselines.any().is_some());
        baselines.record(baseline(1));
        assert!(!baselines.wanted() && baselines.base().is_some());
    }

    #[test]
    fn two_fresh_instances_that_differ_leave_images_against_zeroes() {
        let baselines = Baselines::default();
        baselines.record(baseline(1));
        baselines.record(baseline(2));
        assert!(!baselines.wanted() && baselines.base().is_none());
        // A third instance that matches the first does not change the verdict.
        baselines.record(baseline(1));
        assert!(baselines.base().is_none());
    }

    #[test]
    fn a_page_is_zero_only_if_every_byte_is() {
        let mut page = [0u8; PAGE];
        assert!(is_zero(&page));
        page[PAGE - 1] = 1;
        assert!(!is_zero(&page));
        assert!(!is_zero(&[0, 0, 3]));
    }
}
