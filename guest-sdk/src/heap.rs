//! The lean build's heap: the global allocator of a `wasm32-unknown-unknown` actor, laid right
//! after the module's data instead of on fresh pages.
//!
//! std's allocator on that target (dlmalloc) takes its memory with `memory.grow` only: its heap
//! starts at the first 64 KiB page past the module's initial memory, and its first 64 KiB
//! segment writes a header at its start and a footer at its end. An idle actor then touches two
//! 4 KiB pages for a few hundred bytes of heap, beside the pages of its stack top and its data.
//! This allocator is the same dlmalloc, fed by a bump [`System`] that hands out the memory from
//! `__heap_base` (the end of the data) on, in small steps, each ending at a 4 KiB boundary, and
//! grows the memory only past its current end. A small heap then shares the data's last page.
//!
//! In front of dlmalloc, freed blocks of up to 128 bytes are kept per size class and handed
//! out again (`small_blocks`): a message's buffer, sender path and kind cost a few instructions
//! each instead of a trip through dlmalloc's bins.
//!
//! Off with the SDK's default feature `heap` (`default-features = false`), for an actor that
//! brings its own `#[global_allocator]`. A `wasm32-wasip2` build never uses it: wasi-libc's
//! malloc already starts at `__heap_base`.
//!
//! Invariants:
//! - Every byte [`System`] hands out lies at or past `__heap_base`, inside the memory, and is
//!   handed out once (the bump only moves up): never the data, the stack or another segment.
//! - Consecutive segments are contiguous, so dlmalloc merges them into one top chunk.
//! - Memory it hands out was never written (the end of the data, or grown pages): zeroes.

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32;
use core::cell::UnsafeCell;
use core::ptr;

use dlmalloc::{Allocator, Dlmalloc};

use crate::small_blocks::{Backing, Cached};

/// Bytes of a wasm page, the unit of `memory.grow`.
const WASM_PAGE: usize = 64 * 1024;

/// Bytes of a host page: a segment ends on one, so the next starts where a page does.
const PAGE: usize = 4096;

/// dlmalloc's unit of asking [`System`] for memory: small, so that a small heap stays small.
const GRANULARITY: usize = 256;

unsafe extern "C" {
    /// The first byte past the module's data and stack, set by the linker.
    static __heap_base: u8;
}

/// The source dlmalloc draws its segments from: a bump pointer over the memory past
/// `__heap_base`.
pub struct System {
    /// The first byte not yet handed out; 0 until the first segment.
    next: UnsafeCell<usize>,
}

// SAFETY: a lean actor's instance has one thread; `Heap` serialises every use anyway.
unsafe impl Send for System {}

impl System {
    /// Hands out `[next, end)`, where `end` is the first page boundary at least `size` past
    /// `next`, growing the memory to reach it.
    fn bump(&self, size: usize) -> Option<(usize, usize)> {
        // SAFETY: only dlmalloc calls this, under `Heap`'s exclusive borrow.
        let next = unsafe { &mut *self.next.get() };
        if *next == 0 {
            *next = ptr::addr_of!(__heap_base) as usize;
        }
        let start = *next;
        let end = start.checked_add(size)?.checked_next_multiple_of(PAGE)?;
        let have = wasm32::memory_size(0).checked_mul(WASM_PAGE)?;
        if end > have {
            let pages = (end - have).div_ceil(WASM_PAGE);
            if wasm32::memory_grow(0, pages) == usize::MAX {
                return None;
            }
        }
        *next = end;
        Some((start, end - start))
    }
}

// SAFETY: `alloc` hands out each byte once and only bytes inside the memory past the data
// (the module's invariants); nothing is ever taken back, which the other methods say.
unsafe impl Allocator for System {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        match self.bump(size) {
            Some((start, len)) => (start as *mut u8, len, 0),
            None => (ptr::null_mut(), 0, 0),
        }
    }

    fn remap(&self, _ptr: *mut u8, _old: usize, _new: usize, _can_move: bool) -> *mut u8 {
        ptr::null_mut()
    }

    fn free_part(&self, _ptr: *mut u8, _old: usize, _new: usize) -> bool {
        false
    }

    fn free(&self, _ptr: *mut u8, _size: usize) -> bool {
        false
    }

    fn can_release_part(&self, _flags: u32) -> bool {
        false
    }

    fn allocates_zeros(&self) -> bool {
        true
    }

    fn page_size(&self) -> usize {
        PAGE
    }
}

// SAFETY: dlmalloc's own contract, which `Backing`'s restates.
impl Backing for Dlmalloc<System> {
    unsafe fn malloc(&mut self, size: usize, align: usize) -> *mut u8 {
        unsafe { Dlmalloc::malloc(self, size, align) }
    }

    unsafe fn calloc(&mut self, size: usize, align: usize) -> *mut u8 {
        unsafe { Dlmalloc::calloc(self, size, align) }
    }

    unsafe fn free(&mut self, ptr: *mut u8, size: usize, align: usize) {
        unsafe { Dlmalloc::free(self, ptr, size, align) }
    }

    unsafe fn realloc(
        &mut self,
        ptr: *mut u8,
        size: usize,
        align: usize,
        new_size: usize,
    ) -> *mut u8 {
        unsafe { Dlmalloc::realloc(self, ptr, size, align, new_size) }
    }
}

/// The global allocator: small-block free lists in front of dlmalloc over [`System`].
pub struct Heap(UnsafeCell<Cached<Dlmalloc<System>>>);

// SAFETY: a lean actor's instance runs one thread, and no allocation re-enters another.
unsafe impl Sync for Heap {}

impl Heap {
    /// An empty heap; its first allocation takes the first segment.
    const fn new() -> Heap {
        let mut dl = Dlmalloc::new_with_allocator(System {
            next: UnsafeCell::new(0),
        });
        // Accepted: a power of two above the malloc alignment.
        dl.set_granularity(GRANULARITY);
        Heap(UnsafeCell::new(Cached::new(dl)))
    }

    /// The allocator, borrowed for one call.
    #[allow(clippy::mut_from_ref)]
    fn dl(&self) -> &mut Cached<Dlmalloc<System>> {
        // SAFETY: one thread, and dlmalloc never calls back into the global allocator.
        unsafe { &mut *self.0.get() }
    }
}

// SAFETY: forwards to the cached dlmalloc, which keeps `GlobalAlloc`'s contract as std's
// allocator does (see `small_blocks` for the cache's part).
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { self.dl().alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe { self.dl().alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { self.dl().dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { self.dl().realloc(ptr, layout, new_size) }
    }
}

/// The lean build's global allocator.
#[global_allocator]
static HEAP: Heap = Heap::new();
