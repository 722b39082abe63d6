//! Linear memories and fiber stacks carved from a few large shared mappings.
//!
//! Linux caps a process at `vm.max_map_count` (65,530) memory mappings. With wasmtime's
//! on-demand allocator every live actor holds about three (its linear memory, and its cached
//! fiber stack plus guard page), which stops a host at ~22k actors. Here every memory and every
//! stack is a fixed-size slot of a big `MAP_NORESERVE` mapping that grows by chunks, so a
//! hundred thousand actors take a few hundred mappings, and only touched pages use RAM.
//!
//! Invariants:
//! - A slot handed out is zero-filled: fresh pages are, and returned slots are `MADV_DONTNEED`ed
//!   (which also gives their RAM back) in batches, always before reuse.
//! - Memories never move and never grow past their slot: the engine is configured with no
//!   reservation and no guard (`memory_reservation(0)`, `memory_guard_size(0)`), so compiled code
//!   bounds-checks every access explicitly and needs no guard region.
//! - Stacks have no guard page (a guard would split the mapping). Wasm cannot overflow them:
//!   wasmtime checks `max_wasm_stack` in every wasm prologue, and the slot leaves
//!   `async_stack` bytes (1 MiB) beyond that for host frames, which are shallow.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use wasmtime::{LinearMemory, MemoryCreator, MemoryType, StackCreator, StackMemory};

const PAGE: usize = 4096;
/// Slots per mapping: one `mmap` per this many actors.
const CHUNK_SLOTS: usize = 256;
/// Returned slots are zeroed in batches of this many: each `madvise` costs every core a TLB
/// flush, and neighbouring slots merge into one call.
const FLUSH_AT: usize = 64;

/// A pool of equal, page-aligned slots.
struct Slots {
    slot: usize,
    /// Zeroed slots, ready to hand out.
    free: Vec<usize>,
    /// Returned slots not zeroed yet.
    dirty: Vec<usize>,
    /// The next never-used slot in the newest chunk, and the end of that chunk.
    next: usize,
    end: usize,
    /// Every mapping made, unmapped when the last memory or stack of this arena is gone.
    chunks: Vec<(usize, usize)>,
    what: &'static str,
}

impl Slots {
    fn take(&mut self) -> Result<usize, String> {
        if self.free.is_empty() && !self.dirty.is_empty() {
            self.flush();
        }
        if let Some(addr) = self.free.pop() {
            return Ok(addr);
        }
        if self.next == self.end {
            let len = self.slot * CHUNK_SLOTS;
            // SAFETY: a fresh anonymous private mapping; nothing else refers to it.
            let addr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if addr == libc::MAP_FAILED {
                return Err(format!(
                    "cannot map {len} bytes for {}: {}",
                    self.what,
                    std::io::Error::last_os_error()
                ));
            }
            self.next = addr as usize;
            self.end = self.next + len;
            self.chunks.push((self.next, len));
        }
        let addr = self.next;
        self.next += self.slot;
        Ok(addr)
    }

    fn give(&mut self, addr: usize) {
        self.dirty.push(addr);
        if self.dirty.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Zeroes every returned slot (and gives its RAM back), merging neighbours into one call.
    fn flush(&mut self) {
        self.dirty.sort_unstable();
        let mut i = 0;
        while i < self.dirty.len() {
            let start = self.dirty[i];
            let mut end = start + self.slot;
            i += 1;
            while i < self.dirty.len() && self.dirty[i] == end {
                end += self.slot;
                i += 1;
            }
            // SAFETY: the range covers slots whose owners have given them up.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        }
        self.free.append(&mut self.dirty);
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        for &(addr, len) in &self.chunks {
            // SAFETY: every memory and stack holds the arena alive, so none uses a slot now.
            unsafe { libc::munmap(addr as *mut libc::c_void, len) };
        }
    }
}

/// A shared pool of slots.
struct Arena(Mutex<Slots>);

impl Arena {
    fn new(slot: usize, what: &'static str) -> Arc<Self> {
        Arc::new(Arena(Mutex::new(Slots {
            slot: slot.max(PAGE).next_multiple_of(PAGE),
            free: Vec::new(),
            dirty: Vec::new(),
            next: 0,
            end: 0,
            chunks: Vec::new(),
            what,
        })))
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Creates linear memories of at most `slot` bytes from the memory arena.
pub(crate) struct Memories(Arc<Arena>);

impl Memories {
    pub(crate) fn new(slot: usize) -> Self {
        Memories(Arena::new(slot, "linear memories"))
    }
}

// SAFETY: memories are zero-filled, never move, and stay valid until dropped (see module docs).
unsafe impl MemoryCreator for Memories {
    fn new_memory(
        &self,
        _ty: MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        let mut slots = self.0.slots();
        // The slot is the whole reservation; compiled code relies on no guard region.
        if guard_size_in_bytes > 0 || reserved_size_in_bytes.is_some_and(|r| r > slots.slot) {
            return Err(format!(
                "arena memories take no guard and reserve at most {} bytes \
                 (asked: {reserved_size_in_bytes:?} + {guard_size_in_bytes})",
                slots.slot
            ));
        }
        let capacity = maximum.map_or(slots.slot, |m| m.min(slots.slot));
        if minimum > capacity {
            return Err(format!(
                "the module needs {minimum} bytes of memory, more than the limit of {capacity}"
            ));
        }
        let base = slots.take()?;
        Ok(Box::new(Memory {
            arena: self.0.clone(),
            base,
            size: minimum,
            capacity,
        }))
    }
}

struct Memory {
    arena: Arc<Arena>,
    base: usize,
    size: usize,
    capacity: usize,
}

// SAFETY: `base..base + capacity` is mapped read-write and owned by this memory until dropped.
unsafe impl LinearMemory for Memory {
    fn byte_size(&self) -> usize {
        self.size
    }

    fn byte_capacity(&self) -> usize {
        self.capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        if new_size > self.capacity {
            wasmtime::bail!(
                "memory cannot grow to {new_size} bytes: the host's limit is {}",
                self.capacity
            );
        }
        self.size = new_size;
        Ok(())
    }

    fn as_ptr(&self) -> *mut u8 {
        self.base as *mut u8
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        self.arena.slots().give(self.base);
    }
}

/// Creates fiber stacks from the stack arena.
pub(crate) struct Stacks(Arc<Arena>);

impl Stacks {
    pub(crate) fn new(size: usize) -> Self {
        Stacks(Arena::new(size, "fiber stacks"))
    }
}

// SAFETY: stacks are zero-filled, page-aligned and owned by their fiber until dropped.
unsafe impl StackCreator for Stacks {
    fn new_stack(&self, size: usize, _zeroed: bool) -> wasmtime::Result<Box<dyn StackMemory>> {
        let mut slots = self.0.slots();
        if size > slots.slot {
            wasmtime::bail!(
                "a fiber stack of {size} bytes does not fit a {} byte slot",
                slots.slot
            );
        }
        let base = slots.take().map_err(wasmtime::Error::msg)?;
        let len = slots.slot;
        Ok(Box::new(Stack {
            arena: self.0.clone(),
            base,
            len,
        }))
    }
}

struct Stack {
    arena: Arc<Arena>,
    base: usize,
    len: usize,
}

// SAFETY: `base..base + len` is mapped read-write and owned by this stack until dropped.
unsafe impl StackMemory for Stack {
    fn top(&self) -> *mut u8 {
        (self.base + self.len) as *mut u8
    }

    fn range(&self) -> Range<usize> {
        self.base..self.base + self.len
    }

    fn guard_range(&self) -> Range<*mut u8> {
        std::ptr::null_mut()..std::ptr::null_mut()
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.arena.slots().give(self.base);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_zeroed() {
        let arena = Arena::new(2 * PAGE, "test");
        let a = arena.slots().take().unwrap();
        let b = arena.slots().take().unwrap();
        assert_eq!(b - a, 2 * PAGE);
        // SAFETY: `a` is a slot of this test's arena, two pages long.
        unsafe { *(a as *mut u8).add(PAGE + 7) = 42 };
        arena.slots().give(a);
        // Only a zeroed slot is handed out: the dirty one is flushed first.
        let again = arena.slots().take().unwrap();
        assert_eq!(again, a);
        // SAFETY: as above.
        assert_eq!(unsafe { *(again as *const u8).add(PAGE + 7) }, 0);
    }

    #[test]
    fn neighbouring_dirty_slots_are_zeroed_together() {
        let arena = Arena::new(PAGE, "test");
        let slots: Vec<usize> = (0..3).map(|_| arena.slots().take().unwrap()).collect();
        for &slot in &slots {
            // SAFETY: each is a one-page slot of this test's arena.
            unsafe { *(slot as *mut u8) = 9 };
            arena.slots().give(slot);
        }
        for _ in 0..3 {
            let slot = arena.slots().take().unwrap();
            assert!(slots.contains(&slot));
            // SAFETY: as above.
            assert_eq!(unsafe { *(slot as *const u8) }, 0);
        }
    }

    #[test]
    fn memories_grow_within_their_slot_only() {
        let memories = Memories::new(4 * PAGE);
        let ty = MemoryType::new(1, None);
        let mut m = memories
            .new_memory(ty.clone(), PAGE, None, None, 0)
            .expect("memory");
        assert_eq!(m.byte_capacity(), 4 * PAGE);
        m.grow_to(3 * PAGE).unwrap();
        assert_eq!(m.byte_size(), 3 * PAGE);
        assert!(m.grow_to(5 * PAGE).is_err());
        assert!(
            memories
                .new_memory(ty.clone(), 8 * PAGE, None, None, 0)
                .is_err()
        );
        assert!(
            memories
                .new_memory(ty.clone(), PAGE, None, Some(8 * PAGE), 0)
                .is_err()
        );
        assert!(
            memories
                .new_memory(ty.clone(), PAGE, None, Some(0), PAGE)
                .is_err()
        );
        assert!(
            memories
                .new_memory(ty.clone(), PAGE, None, Some(0), 0)
                .is_ok()
        );
    }
}
