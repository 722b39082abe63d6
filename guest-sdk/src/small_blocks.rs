//! Small freed blocks kept per size class in front of the lean build's heap, and handed out
//! again without reaching dlmalloc.
//!
//! An actor allocates the same few small blocks for every message: the message's buffer, which
//! the host allocates through `cabi_realloc`, and its sender's path and kind: three `malloc`s
//! and three `free`s a w1 message. dlmalloc spends about 100 instructions on each `malloc` and
//! 125 on each `free` (binning, splitting and coalescing; measured with callgrind on `w1`). A
//! freed small block here goes on the free list of its size class instead, and the next request
//! of that class takes it back in a few dozen.
//!
//! Invariants (tested below):
//! - A request of at most [`SMALL`] bytes aligned to at most [`ALIGN`] is served by a block of
//!   its class's full size ([`class_size`]), taken from the backing allocator with that size,
//!   so any block of a class serves any request of that class, and the backing allocator frees
//!   a block with the size and alignment it was allocated with.
//! - Other requests go to the backing allocator untouched.
//! - A class keeps at most [`KEEP`] freed blocks; more go back to the backing allocator. The
//!   blocks kept are at most `SMALL * KEEP` bytes a class, memory the heap had touched already.
//! - A reallocation within a class keeps its block; across classes (or to or from a size that
//!   is not cached) the bytes move to a block of the new size.

use core::alloc::Layout;
use core::ptr;

/// Bytes between two size classes.
const STEP: usize = 8;
/// The largest request the classes serve.
pub(crate) const SMALL: usize = 128;
/// The largest alignment they serve: that of every block the backing allocator hands out.
pub(crate) const ALIGN: usize = 8;
/// Freed blocks a class keeps at most.
pub(crate) const KEEP: u8 = 16;
const CLASSES: usize = SMALL / STEP;

/// The allocator behind the classes: dlmalloc in a lean guest, the system's in the tests.
pub(crate) trait Backing {
    /// Allocates `size` bytes aligned to `align` (null if it cannot).
    ///
    /// # Safety
    /// `size` is non-zero and `align` a power of two.
    unsafe fn malloc(&mut self, size: usize, align: usize) -> *mut u8;
    /// [`Backing::malloc`], zero-filled.
    ///
    /// # Safety
    /// As for [`Backing::malloc`].
    unsafe fn calloc(&mut self, size: usize, align: usize) -> *mut u8;
    /// Frees a block of `size` bytes aligned to `align`.
    ///
    /// # Safety
    /// `ptr` came from this allocator with that size and alignment, and is freed once.
    unsafe fn free(&mut self, ptr: *mut u8, size: usize, align: usize);
    /// Resizes a block of `size` bytes aligned to `align` to `new_size` bytes.
    ///
    /// # Safety
    /// As for [`Backing::free`]; `new_size` is non-zero.
    unsafe fn realloc(
        &mut self,
        ptr: *mut u8,
        size: usize,
        align: usize,
        new_size: usize,
    ) -> *mut u8;
}

/// The size class of `layout`, if the classes serve it.
fn class(layout: Layout) -> Option<usize> {
    match layout.size() {
        size @ 1..=SMALL if layout.align() <= ALIGN => Some((size - 1) / STEP),
        _ => None,
    }
}

/// The bytes of every block of class `class`.
fn class_size(class: usize) -> usize {
    (class + 1) * STEP
}

/// A backing allocator with free lists of small blocks in front of it.
pub(crate) struct Cached<B> {
    backing: B,
    /// Each class's first freed block; a freed block's first word points to the next.
    heads: [*mut u8; CLASSES],
    counts: [u8; CLASSES],
}

impl<B: Backing> Cached<B> {
    /// No block kept yet, in front of `backing`.
    pub(crate) const fn new(backing: B) -> Self {
        Cached {
            backing,
            heads: [ptr::null_mut(); CLASSES],
            counts: [0; CLASSES],
        }
    }

    /// A kept block of class `class`, if one is free.
    fn take(&mut self, class: usize) -> Option<*mut u8> {
        let head = self.heads[class];
        if head.is_null() {
            return None;
        }
        // SAFETY: a kept block holds the next one's address in its first word (`keep`); blocks
        // are at least `STEP` bytes and `ALIGN`-aligned, room and alignment for a pointer.
        self.heads[class] = unsafe { head.cast::<*mut u8>().read() };
        self.counts[class] -= 1;
        Some(head)
    }

    /// Keeps a freed block of class `class`, unless the class holds [`KEEP`] already.
    fn keep(&mut self, class: usize, block: *mut u8) -> bool {
        if self.counts[class] >= KEEP {
            return false;
        }
        // SAFETY: the block is free and ours, big and aligned enough for a pointer (`take`).
        unsafe { block.cast::<*mut u8>().write(self.heads[class]) };
        self.heads[class] = block;
        self.counts[class] += 1;
        true
    }

    /// Allocates a block for `layout`.
    ///
    /// # Safety
    /// `layout` has a non-zero size.
    pub(crate) unsafe fn alloc(&mut self, layout: Layout) -> *mut u8 {
        match class(layout) {
            Some(class) => match self.take(class) {
                Some(block) => block,
                // SAFETY: a non-zero size and a power-of-two alignment.
                None => unsafe { self.backing.malloc(class_size(class), ALIGN) },
            },
            // SAFETY: forwarded as the caller made it.
            None => unsafe { self.backing.malloc(layout.size(), layout.align()) },
        }
    }

    /// Allocates a zero-filled block for `layout`.
    ///
    /// # Safety
    /// As for [`Cached::alloc`].
    pub(crate) unsafe fn alloc_zeroed(&mut self, layout: Layout) -> *mut u8 {
        match class(layout) {
            Some(class) => match self.take(class) {
                Some(block) => {
                    // SAFETY: the block holds `class_size(class) >= layout.size()` bytes.
                    unsafe { block.write_bytes(0, layout.size()) };
                    block
                }
                // SAFETY: as in `alloc`.
                None => unsafe { self.backing.calloc(class_size(class), ALIGN) },
            },
            // SAFETY: forwarded as the caller made it.
            None => unsafe { self.backing.calloc(layout.size(), layout.align()) },
        }
    }

    /// Frees a block allocated for `layout`.
    ///
    /// # Safety
    /// `block` came from this allocator for `layout` and is freed once.
    pub(crate) unsafe fn dealloc(&mut self, block: *mut u8, layout: Layout) {
        match class(layout) {
            Some(class) => {
                if !self.keep(class, block) {
                    // SAFETY: allocated with its class's size and `ALIGN` (see `alloc`).
                    unsafe { self.backing.free(block, class_size(class), ALIGN) }
                }
            }
            // SAFETY: allocated by the backing allocator with this layout.
            None => unsafe { self.backing.free(block, layout.size(), layout.align()) },
        }
    }

    /// Resizes a block allocated for `layout` to `new_size` bytes (same alignment).
    ///
    /// # Safety
    /// As for [`Cached::dealloc`]; `new_size` is non-zero and the new layout valid.
    pub(crate) unsafe fn realloc(
        &mut self,
        block: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        // SAFETY: the caller guarantees a valid layout of the new size.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class(layout), class(new)) {
            (Some(from), Some(to)) if from == to => block,
            (None, None) => {
                // SAFETY: allocated by the backing allocator with this layout.
                unsafe {
                    self.backing
                        .realloc(block, layout.size(), layout.align(), new_size)
                }
            }
            _ => {
                // SAFETY: a non-zero size; on success the old block is copied, then freed.
                unsafe {
                    let moved = self.alloc(new);
                    if !moved.is_null() {
                        ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                    moved
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The system's allocator, recording every live block's size and alignment.
    #[derive(Default)]
    struct Ledger {
        live: HashMap<usize, (usize, usize)>,
        mallocs: usize,
    }

    impl Backing for Ledger {
        unsafe fn malloc(&mut self, size: usize, align: usize) -> *mut u8 {
            self.mallocs += 1;
            let block = unsafe { std::alloc::alloc(Layout::from_size_align(size, align).unwrap()) };
            assert!(self.live.insert(block as usize, (size, align)).is_none());
            block
        }

        unsafe fn calloc(&mut self, size: usize, align: usize) -> *mut u8 {
            let block = unsafe { self.malloc(size, align) };
            unsafe { block.write_bytes(0, size) };
            block
        }

        unsafe fn free(&mut self, block: *mut u8, size: usize, align: usize) {
            let made = self.live.remove(&(block as usize));
            assert_eq!(
                made,
                Some((size, align)),
                "freed with another layout than its own"
            );
            unsafe { std::alloc::dealloc(block, Layout::from_size_align(size, align).unwrap()) }
        }

        unsafe fn realloc(
            &mut self,
            block: *mut u8,
            size: usize,
            align: usize,
            new: usize,
        ) -> *mut u8 {
            unsafe {
                let moved = self.malloc(new, align);
                ptr::copy_nonoverlapping(block, moved, size.min(new));
                self.free(block, size, align);
                moved
            }
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn a_freed_small_block_serves_the_next_request_of_its_class_without_the_backing() {
        let mut heap = Cached::new(Ledger::default());
        unsafe {
            let a = heap.alloc(layout(20, 4));
            assert_eq!(
                heap.backing.live[&(a as usize)],
                (24, ALIGN),
                "its class's full size"
            );
            heap.dealloc(a, layout(20, 4));
            let b = heap.alloc(layout(17, 8));
            assert_eq!(
                (b, heap.backing.mallocs),
                (a, 1),
                "same class: the kept block"
            );
            let c = heap.alloc(layout(25, 8));
            assert_ne!(c, a, "another class");
            let big = heap.alloc(layout(SMALL + 1, 8));
            let aligned = heap.alloc(layout(16, 16));
            assert_eq!(heap.backing.live[&(big as usize)], (SMALL + 1, 8));
            assert_eq!(
                heap.backing.live[&(aligned as usize)],
                (16, 16),
                "not cached: as asked"
            );
            assert_eq!(aligned as usize % 16, 0);
            heap.dealloc(aligned, layout(16, 16));
            assert!(
                !heap.backing.live.contains_key(&(aligned as usize)),
                "freed at once"
            );
            for (block, l) in [
                (b, layout(17, 8)),
                (c, layout(25, 8)),
                (big, layout(SMALL + 1, 8)),
            ] {
                heap.dealloc(block, l);
            }
        }
    }

    #[test]
    fn a_class_keeps_at_most_its_bound_and_gives_the_rest_back() {
        let mut heap = Cached::new(Ledger::default());
        let l = layout(8, 8);
        unsafe {
            let blocks: Vec<_> = (0..KEEP as usize + 5).map(|_| heap.alloc(l)).collect();
            for &block in &blocks {
                heap.dealloc(block, l);
            }
        }
        assert_eq!(heap.backing.live.len(), KEEP as usize, "the rest went back");
        assert_eq!(heap.counts[0], KEEP);
    }

    #[test]
    fn a_zeroed_request_is_zeroed_even_from_a_kept_block() {
        let mut heap = Cached::new(Ledger::default());
        let l = layout(40, 8);
        unsafe {
            let a = heap.alloc(l);
            a.write_bytes(0xAB, 40);
            heap.dealloc(a, l);
            let b = heap.alloc_zeroed(l);
            assert_eq!(b, a);
            assert!(std::slice::from_raw_parts(b, 40).iter().all(|&x| x == 0));
            heap.dealloc(b, l);
        }
    }

    #[test]
    fn reallocation_keeps_the_bytes_across_classes_and_sizes_and_frees_each_block_as_made() {
        let mut heap = Cached::new(Ledger::default());
        unsafe {
            let mut block = heap.alloc(layout(3, 1));
            block.copy_from_nonoverlapping(b"abc".as_ptr(), 3);
            let mut size = 3;
            // Within a class, across classes, past the classes, back into them.
            for new in [7, 60, 1000, 5000, 100, 2] {
                let moved = heap.realloc(block, layout(size, 1), new);
                if new == 7 {
                    assert_eq!(moved, block, "7 bytes fit the 8-byte class");
                }
                let kept = size.min(new).min(3);
                assert_eq!(std::slice::from_raw_parts(moved, kept), &b"abc"[..kept]);
                block = moved;
                size = new;
            }
            heap.dealloc(block, layout(size, 1));
        }
        // What is left in the backing allocator is the kept blocks, each of its class's size.
        let kept: usize = heap.counts.iter().map(|&n| n as usize).sum();
        assert_eq!(heap.backing.live.len(), kept);
        assert!(
            heap.backing
                .live
                .values()
                .all(|&(size, align)| size <= SMALL && align == ALIGN)
        );
    }
}
