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
//! - A memory never grows past its slot: the engine is configured with no reservation and no
//!   guard (`memory_reservation(0)`, `memory_guard_size(0)`), so compiled code bounds-checks
//!   every access explicitly against the memory's current size and needs no guard region.
//! - A memory starts in a *first slot* the size of its initial memory (rounded up to a wasm
//!   page; under 2 MiB), packed with others of that size, so that the hot pages of several
//!   actors share the page-table page that maps 2 MiB. Growing past it moves the memory to a
//!   *full slot* of the host's limit, once: the pages that hold data are copied, the first slot
//!   is given back, and wasmtime reloads the base (`LinearMemory::byte_capacity` is how far it
//!   grows without moving; memories may move, wasmtime's default). A shared memory, which may
//!   never move, takes a full slot at once.
//! - No slot is backed by transparent huge pages: every mapping is `MADV_NOHUGEPAGE`, so a
//!   touched page of a memory or stack costs 4 KiB of RAM even where the kernel's THP mode is
//!   `always` (there, a slot's first touch would otherwise take 2 MiB).
//! - Stacks have no guard page (a guard would split the mapping). Wasm cannot overflow them:
//!   wasmtime checks `max_wasm_stack` in every wasm prologue, and the slot leaves
//!   `async_stack` bytes (1 MiB) beyond that for host frames, which are shallow.
//! - A store keeps its last fiber stack for its whole life, and wasmtime has no call to give it
//!   back. Between two calls the stack holds nothing live (a call writes its first frame afresh
//!   at the top), so [`Stacks::sweep`] gives the pages of a *parked* stack back to the kernel.
//!   A stack is parked only by its owner ([`StackState::park`], see `sandbox::parking`), which
//!   unparks it before its store runs again; the sweeper releases it only after it stayed parked
//!   through a whole sweep period, and the owner waits while a release is under way. A stack
//!   being dropped waits likewise, so a slot is never handed out while it is being released.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use wasmtime::{LinearMemory, MemoryCreator, MemoryType, StackCreator, StackMemory};

const PAGE: usize = 4096;
/// Slots per mapping: one `mmap` per this many actors.
const CHUNK_SLOTS: usize = 256;
/// Returned slots are zeroed in batches of this many: each `madvise` costs every core a TLB
/// flush, and neighbouring slots merge into one call.
const FLUSH_AT: usize = 64;
/// The size of a wasm page.
pub(super) const WASM_PAGE: usize = 64 << 10;
/// A memory whose initial size is under this starts in a first slot of that size: a
/// page-table page maps 2 MiB, so the hot pages of neighbouring small memories share one.
const FIRST_SLOT_MAX: usize = 2 << 20;

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
            // SAFETY: the range is the mapping just made. A kernel without THP refuses the
            // advice (EINVAL), and then there are no huge pages to avoid: ignored.
            unsafe { libc::madvise(addr, len, libc::MADV_NOHUGEPAGE) };
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

/// Creates linear memories from the memory arenas: each first in a slot the size of its
/// initial memory, packed with others of that size, and in a slot of the host's limit once it
/// grows past that.
pub(crate) struct Memories {
    /// Slots of the host's memory limit.
    full: Arc<Arena>,
    /// The host's memory limit, the size of a full slot.
    limit: usize,
    /// Arenas of first slots, by slot size in wasm pages, each made at its first use.
    first: [OnceLock<Arc<Arena>>; FIRST_SLOT_MAX / WASM_PAGE],
}

impl Memories {
    pub(crate) fn new(limit: usize) -> Self {
        let full = Arena::new(limit, "linear memories");
        let limit = full.slots().slot;
        Memories {
            full,
            limit,
            first: [const { OnceLock::new() }; FIRST_SLOT_MAX / WASM_PAGE],
        }
    }

    /// The arena of first slots of `size` bytes (a multiple of a wasm page, under
    /// [`FIRST_SLOT_MAX`]), made at its first use.
    fn first_arena(&self, size: usize) -> Arc<Arena> {
        self.first[size / WASM_PAGE]
            .get_or_init(|| Arena::new(size, "linear memories' first slots"))
            .clone()
    }
}

// SAFETY: memories are zero-filled, move only as `LinearMemory` allows (past their capacity),
// and stay valid until dropped (see module docs).
unsafe impl MemoryCreator for Memories {
    fn new_memory(
        &self,
        ty: MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        // The slot is the whole reservation; compiled code relies on no guard region.
        if guard_size_in_bytes > 0 || reserved_size_in_bytes.is_some_and(|r| r > self.limit) {
            return Err(format!(
                "arena memories take no guard and reserve at most {} bytes \
                 (asked: {reserved_size_in_bytes:?} + {guard_size_in_bytes})",
                self.limit
            ));
        }
        let limit = maximum.map_or(self.limit, |m| m.min(self.limit));
        if minimum > limit {
            return Err(format!(
                "the module needs {minimum} bytes of memory, more than the limit of {limit}"
            ));
        }
        // A shared memory may never move, so it takes its full slot at once.
        let first = minimum.max(1).next_multiple_of(WASM_PAGE);
        let (arena, capacity) = match first < FIRST_SLOT_MAX && first < limit && !ty.is_shared() {
            true => (self.first_arena(first), first),
            false => (self.full.clone(), limit),
        };
        let base = arena.slots().take()?;
        Ok(Box::new(Memory {
            arena,
            full: self.full.clone(),
            base,
            size: minimum,
            capacity,
            limit,
        }))
    }
}

struct Memory {
    /// The arena of the slot at `base`.
    arena: Arc<Arena>,
    /// The arena of full slots, which a memory moves to when it outgrows its first slot.
    full: Arc<Arena>,
    base: usize,
    size: usize,
    /// The bytes it can grow to without moving: its slot's size, or `limit` in a full slot.
    capacity: usize,
    /// The most it can ever grow to.
    limit: usize,
}

impl Memory {
    /// Moves the memory to a full slot: its pages that hold data are copied, and its first
    /// slot is given back.
    fn move_to_full_slot(&mut self) -> wasmtime::Result<()> {
        let base = self.full.slots().take().map_err(wasmtime::Error::msg)?;
        // SAFETY: the old slot is this memory's, `size` bytes long and not in use during a
        // grow; the new one is a zeroed full slot just taken, at least `limit` long.
        unsafe { copy_held_pages(self.base, base, self.size) };
        let old = std::mem::replace(&mut self.arena, self.full.clone());
        old.slots().give(self.base);
        self.base = base;
        self.capacity = self.limit;
        Ok(())
    }
}

// SAFETY: `base..base + capacity` is mapped read-write and owned by this memory until dropped
// or moved; growth up to `capacity` never moves it.
unsafe impl LinearMemory for Memory {
    fn byte_size(&self) -> usize {
        self.size
    }

    fn byte_capacity(&self) -> usize {
        self.capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        if new_size > self.limit {
            wasmtime::bail!(
                "memory cannot grow to {new_size} bytes: the host's limit is {}",
                self.limit
            );
        }
        if new_size > self.capacity {
            self.move_to_full_slot()?;
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

/// Copies the pages of `from..from + len` that hold data to `to`: those resident or swapped
/// out, as `/proc/self/pagemap` tells. A page never touched is zero, as `to`'s is already.
///
/// # Safety
/// `from..from + len` and `to..to + len` are mapped, readable and writable, do not overlap,
/// and nothing else uses them meanwhile; `to` is zero-filled.
unsafe fn copy_held_pages(from: usize, to: usize, len: usize) {
    let held = held_pages(from, len.div_ceil(PAGE));
    // SAFETY: per the caller.
    unsafe { copy_pages(from, to, len, held.as_deref()) }
}

/// Copies the pages of `from..from + len` that `held` marks to `to`; without `held` (no
/// pagemap), the pages that are not all zero, so that `to` gains no page it does not need.
///
/// # Safety
/// As [`copy_held_pages`].
unsafe fn copy_pages(from: usize, to: usize, len: usize, held: Option<&[bool]>) {
    for page in 0..len.div_ceil(PAGE) {
        let at = page * PAGE;
        let n = PAGE.min(len - at);
        // SAFETY: within `from..from + len`, per the caller.
        let source = unsafe { std::slice::from_raw_parts((from + at) as *const u8, n) };
        let copy = match held {
            Some(held) => held[page],
            None => source.iter().any(|&b| b != 0),
        };
        if copy {
            // SAFETY: within `to..to + len`, which does not overlap the source.
            unsafe { std::ptr::copy_nonoverlapping(source.as_ptr(), (to + at) as *mut u8, n) };
        }
    }
}

/// For each of `pages` pages from `addr`, whether it is resident or swapped out; `None` if
/// `/proc/self/pagemap` cannot be read.
fn held_pages(addr: usize, pages: usize) -> Option<Vec<bool>> {
    use std::os::unix::fs::FileExt;
    static PAGEMAP: OnceLock<Option<std::fs::File>> = OnceLock::new();
    let pagemap = PAGEMAP
        .get_or_init(|| std::fs::File::open("/proc/self/pagemap").ok())
        .as_ref()?;
    let mut entries = vec![0u8; pages * 8];
    pagemap
        .read_exact_at(&mut entries, (addr / PAGE * 8) as u64)
        .ok()?;
    // Bit 63: present in RAM; bit 62: swapped out.
    Some(
        entries
            .chunks_exact(8)
            .map(|e| u64::from_ne_bytes(e.try_into().expect("8 bytes")) >> 62 != 0)
            .collect(),
    )
}

/// Creates fiber stacks from the stack arena, and gives the pages of parked ones back.
pub(crate) struct Stacks {
    arena: Arc<Arena>,
    /// Every live stack's state, by its base: the sweeper visits them in address order.
    live: Arc<Mutex<Live>>,
    /// Stacks whose pages a sweep gave back, in all.
    releases: AtomicU64,
}

impl Stacks {
    pub(crate) fn new(size: usize) -> Self {
        Stacks {
            arena: Arena::new(size, "fiber stacks"),
            live: Arc::default(),
            releases: AtomicU64::new(0),
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        lock_live(&self.live)
    }

    /// One sweep: a stack parked since the last sweep is marked seen, and a stack seen parked
    /// at the last sweep and parked still has its pages given back (neighbours in one
    /// `madvise`). Returns how many were given back.
    pub(crate) fn sweep(&self) -> usize {
        let mut releasing = Vec::new();
        for state in self.live().values() {
            match state.state.load(Ordering::Acquire) {
                PARKED => {
                    let _ = state.swap_from(PARKED, SEEN);
                }
                SEEN if state.swap_from(SEEN, SWEEPING) => releasing.push(state.clone()),
                _ => {}
            }
        }
        let mut i = 0;
        while i < releasing.len() {
            let start = releasing[i].base;
            let mut end = start + releasing[i].len;
            i += 1;
            while i < releasing.len() && releasing[i].base == end {
                end += releasing[i].len;
                i += 1;
            }
            // SAFETY: each stack in the range is SWEEPING: its owner is parked and waits for
            // the release to end before its store runs again or the stack is dropped, and a
            // parked stack holds nothing live (see the module docs).
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        }
        for state in &releasing {
            state.state.store(RELEASED, Ordering::Release);
        }
        self.releases
            .fetch_add(releasing.len() as u64, Ordering::Relaxed);
        releasing.len()
    }

    /// The live stacks, how many of them are given back now, and the releases so far.
    pub(crate) fn stats(&self) -> StackStats {
        let live = self.live();
        StackStats {
            live: live.len(),
            released: live
                .values()
                .filter(|s| s.state.load(Ordering::Acquire) == RELEASED)
                .count(),
            releases: self.releases.load(Ordering::Relaxed),
        }
    }
}

/// Every live stack's state, by its base.
type Live = BTreeMap<usize, Arc<StackState>>;

/// The live stacks, locked by [`Stacks`] and by a [`Stack`] leaving them alike.
fn lock_live(live: &Mutex<Live>) -> std::sync::MutexGuard<'_, Live> {
    live.lock().unwrap_or_else(|p| p.into_inner())
}

/// Fiber stacks of a host: how many are live, how many of those hold no pages now, and how
/// many times a sweep gave a parked one's pages back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackStats {
    /// Fiber stacks held by stores (one per actor that made a call, at most).
    pub live: usize,
    /// Live stacks whose pages are given back now (their owners idle since; counted by a
    /// visit of every live stack).
    pub released: usize,
    /// Parked stacks whose pages were given back, in all.
    pub releases: u64,
}

// SAFETY: stacks are zero-filled, page-aligned and owned by their fiber until dropped; a
// sweep zeroes only parked stacks (see the module docs).
unsafe impl StackCreator for Stacks {
    fn new_stack(&self, size: usize, _zeroed: bool) -> wasmtime::Result<Box<dyn StackMemory>> {
        let (base, len) = {
            let mut slots = self.arena.slots();
            if size > slots.slot {
                wasmtime::bail!(
                    "a fiber stack of {size} bytes does not fit a {} byte slot",
                    slots.slot
                );
            }
            (slots.take().map_err(wasmtime::Error::msg)?, slots.slot)
        };
        let state = Arc::new(StackState {
            state: AtomicU8::new(BUSY),
            base,
            len,
        });
        self.live().insert(base, state.clone());
        MADE.with(|made| {
            if let Some(sink) = made.get() {
                // SAFETY: `made_during` set this pointer to a vector it borrows mutably for
                // as long as the pointer is set, on this thread.
                unsafe { (*sink).push(state.clone()) };
            }
        });
        Ok(Box::new(Stack {
            arena: self.arena.clone(),
            live: self.live.clone(),
            state,
        }))
    }
}

/// A stack in use by its fiber (or cached by its store).
const BUSY: u8 = 0;
/// Parked by its owner since the last sweep.
const PARKED: u8 = 1;
/// Seen parked by a sweep: the next one releases it.
const SEEN: u8 = 2;
/// Its pages are being given back.
const SWEEPING: u8 = 3;
/// Parked, with its pages given back.
const RELEASED: u8 = 4;
/// Dropped: no longer the owner's.
const DEAD: u8 = 5;

/// Where one fiber stack is in its parking cycle, shared by its owner, the stack and sweeps.
pub(crate) struct StackState {
    state: AtomicU8,
    base: usize,
    len: usize,
}

impl StackState {
    /// The owner's store will not run until [`StackState::unpark`]: a sweep may release it.
    pub(crate) fn park(&self) {
        let _ = self.swap_from(BUSY, PARKED);
    }

    /// The owner's store may run again: waits out a release under way.
    pub(crate) fn unpark(&self) {
        self.claim(BUSY);
    }

    /// Whether its stack was dropped.
    pub(crate) fn is_dead(&self) -> bool {
        self.state.load(Ordering::Acquire) == DEAD
    }

    fn swap_from(&self, from: u8, to: u8) -> bool {
        self.state
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Moves to `to` from any state but `SWEEPING`, which it waits out (a few microseconds).
    fn claim(&self, to: u8) {
        loop {
            let now = self.state.load(Ordering::Acquire);
            if now == to || now == DEAD {
                return;
            }
            if now == SWEEPING {
                std::hint::spin_loop();
                std::thread::yield_now();
                continue;
            }
            if self.swap_from(now, to) {
                return;
            }
        }
    }
}

thread_local! {
    /// Where stacks made on this thread now are recorded (see [`made_during`]).
    static MADE: Cell<Option<*mut Vec<Arc<StackState>>>> = const { Cell::new(None) };
}

/// Runs `f`, recording into `sink` the state of every fiber stack made on this thread
/// meanwhile: a store makes its stack on its first fiber, inside the poll of the call.
pub(crate) fn made_during<R>(sink: &mut Vec<Arc<StackState>>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<*mut Vec<Arc<StackState>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            MADE.with(|made| made.set(self.0));
        }
    }
    let _restore = Restore(MADE.with(|made| made.replace(Some(sink as *mut _))));
    f()
}

struct Stack {
    arena: Arc<Arena>,
    live: Arc<Mutex<Live>>,
    state: Arc<StackState>,
}

// SAFETY: `base..base + len` is mapped read-write and owned by this stack until dropped.
unsafe impl StackMemory for Stack {
    fn top(&self) -> *mut u8 {
        (self.state.base + self.state.len) as *mut u8
    }

    fn range(&self) -> Range<usize> {
        self.state.base..self.state.base + self.state.len
    }

    fn guard_range(&self) -> Range<*mut u8> {
        std::ptr::null_mut()..std::ptr::null_mut()
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // A release under way ends before the slot can be handed out again.
        self.state.claim(DEAD);
        let base = self.state.base;
        lock_live(&self.live).remove(&base);
        self.arena.slots().give(base);
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

    /// The `VmFlags` of the mapping of `/proc/self/smaps` that holds `addr`.
    fn vm_flags(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((start, end)) = range.split_once('-')
                && let (Ok(start), Ok(end)) = (
                    usize::from_str_radix(start, 16),
                    usize::from_str_radix(end, 16),
                )
            {
                inside = (start..end).contains(&addr);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.trim().to_owned();
            }
        }
        panic!("no mapping of /proc/self/smaps holds {addr:#x}")
    }

    #[test]
    fn slots_never_get_transparent_huge_pages() {
        // Slots of 2 MiB, so that a huge page would fit one exactly.
        let arena = Arena::new(2 << 20, "test");
        let slot = arena.slots().take().unwrap();
        // SAFETY: `slot` is a slot of this test's arena, 2 MiB long.
        unsafe { *(slot as *mut u8).add(4096) = 1 };
        // `nh`: the kernel's flag for `MADV_NOHUGEPAGE`, whatever its THP mode.
        let flags = vm_flags(slot);
        assert!(flags.split(' ').any(|f| f == "nh"), "VmFlags: {flags}");
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

    #[test]
    fn a_small_memory_starts_packed_in_a_first_slot_and_moves_once_it_outgrows_it() {
        let memories = Memories::new(8 * WASM_PAGE);
        let ty = MemoryType::new(1, None);
        let new = || memories.new_memory(ty.clone(), WASM_PAGE, None, Some(0), 0);
        let mut a = new().unwrap();
        let b = new().unwrap();
        // Neighbours, one wasm page apart: their hot pages share page tables.
        assert_eq!(b.as_ptr() as usize - a.as_ptr() as usize, WASM_PAGE);
        assert_eq!(a.byte_capacity(), WASM_PAGE);
        let first = a.as_ptr() as usize;
        // SAFETY: within `a`'s first wasm page.
        unsafe {
            *a.as_ptr().add(5) = 1;
            *a.as_ptr().add(WASM_PAGE - 1) = 2;
        }
        a.grow_to(3 * WASM_PAGE).unwrap();
        let full = a.as_ptr() as usize;
        assert_ne!(full, first, "moved to a full slot");
        assert_eq!(
            (a.byte_size(), a.byte_capacity()),
            (3 * WASM_PAGE, 8 * WASM_PAGE)
        );
        // SAFETY: `a` is 3 wasm pages long now.
        let data = unsafe { std::slice::from_raw_parts(a.as_ptr(), 3 * WASM_PAGE) };
        assert_eq!(
            (data[5], data[WASM_PAGE - 1]),
            (1, 2),
            "its data moved with it"
        );
        assert_eq!(
            data.iter().map(|&b| b as usize).sum::<usize>(),
            3,
            "the rest is zero"
        );
        // Within its full slot it grows in place, up to the limit.
        a.grow_to(8 * WASM_PAGE).unwrap();
        assert_eq!(a.as_ptr() as usize, full);
        assert!(a.grow_to(9 * WASM_PAGE).is_err());
        // The first slot it left is handed out again, zeroed.
        let c = new().unwrap();
        assert_eq!(c.as_ptr() as usize, first);
        // SAFETY: `c` is one wasm page long.
        let reused = unsafe { std::slice::from_raw_parts(c.as_ptr(), WASM_PAGE) };
        assert!(reused.iter().all(|&b| b == 0));
        // A shared memory may never move: it takes a full slot (of its maximum) at once.
        let shared = memories
            .new_memory(
                MemoryType::shared(1, 4),
                WASM_PAGE,
                Some(4 * WASM_PAGE),
                Some(0),
                0,
            )
            .unwrap();
        assert_eq!(shared.byte_capacity(), 4 * WASM_PAGE);
        // So does a memory too big for a first slot.
        let big = Memories::new(FIRST_SLOT_MAX * 2)
            .new_memory(MemoryType::new(32, None), FIRST_SLOT_MAX, None, Some(0), 0)
            .unwrap();
        assert_eq!(big.byte_capacity(), FIRST_SLOT_MAX * 2);
    }

    #[test]
    fn a_moved_memory_copies_only_the_pages_that_hold_data() {
        let arena = Arena::new(4 * PAGE, "test");
        let from = arena.slots().take().unwrap();
        let to = arena.slots().take().unwrap();
        // SAFETY: `from` is a slot of this test's arena, four pages long.
        unsafe {
            *(from as *mut u8).add(9) = 3;
            *(from as *mut u8).add(2 * PAGE + 9) = 4;
        }
        // SAFETY: two distinct zeroed slots of four pages, used by nothing else.
        unsafe { copy_held_pages(from, to, 4 * PAGE) };
        let copied: Vec<bool> = (0..4).map(|p| resident(to + p * PAGE)).collect();
        assert_eq!(
            copied,
            [true, false, true, false],
            "untouched pages stay untouched"
        );
        // SAFETY: as above.
        assert_eq!(
            unsafe {
                (
                    *(to as *const u8).add(9),
                    *(to as *const u8).add(2 * PAGE + 9),
                )
            },
            (3, 4)
        );
        // Without pagemap, the pages that are all zero are not written either.
        let again = arena.slots().take().unwrap();
        // SAFETY: a third zeroed slot of four pages; `from` is unchanged.
        unsafe { copy_pages(from, again, 4 * PAGE, None) };
        let copied: Vec<bool> = (0..4).map(|p| resident(again + p * PAGE)).collect();
        assert_eq!(copied, [true, false, true, false]);
        // SAFETY: as above.
        assert_eq!(unsafe { *(again as *const u8).add(2 * PAGE + 9) }, 4);
    }

    /// Whether the page at `addr` is resident.
    fn resident(addr: usize) -> bool {
        let mut vec = 0u8;
        // SAFETY: `addr` is page-aligned and mapped (a slot of a test's arena).
        let r = unsafe { libc::mincore(addr as *mut libc::c_void, PAGE, &mut vec) };
        assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
        vec & 1 == 1
    }

    /// A stack made as a store makes it, with its state recorded as a parking task does.
    fn made(stacks: &Stacks) -> (Box<dyn StackMemory>, Arc<StackState>) {
        let mut states = Vec::new();
        let stack = made_during(&mut states, || stacks.new_stack(4 * PAGE, true)).unwrap();
        assert_eq!(states.len(), 1, "the stack made meanwhile is recorded");
        (stack, states.pop().unwrap())
    }

    /// Writes the stack's top page, as a call does.
    fn touch(stack: &dyn StackMemory) -> usize {
        let page = stack.top() as usize - PAGE;
        // SAFETY: the top page of a live stack of this test's arena.
        unsafe { *(page as *mut u8) = 7 };
        page
    }

    #[test]
    fn a_parked_stack_is_released_after_a_whole_sweep_period_only() {
        let stacks = Stacks::new(4 * PAGE);
        let (stack, state) = made(&stacks);
        let top = touch(&*stack);
        assert!(resident(top));
        // Busy: never released.
        assert_eq!(stacks.sweep(), 0);
        assert_eq!(stacks.sweep(), 0);
        state.park();
        // The first sweep only sees it parked (it may have parked just now).
        assert_eq!(stacks.sweep(), 0);
        assert!(resident(top));
        assert_eq!(stacks.sweep(), 1);
        assert!(!resident(top), "its page went back to the kernel");
        assert_eq!(
            stacks.stats(),
            StackStats {
                live: 1,
                released: 1,
                releases: 1
            }
        );
        // Released once: later sweeps leave it alone.
        assert_eq!(stacks.sweep(), 0);
        state.unpark();
        // In use again: no longer counted as given back, though its release still counts.
        assert_eq!(
            stacks.stats(),
            StackStats {
                live: 1,
                released: 0,
                releases: 1
            }
        );
        // SAFETY: as in `touch`: the stack reads zeros where the call left 7.
        assert_eq!(unsafe { *(top as *const u8) }, 0);
        touch(&*stack);
        // Unparked between two sweeps: the count starts again.
        state.park();
        assert_eq!(stacks.sweep(), 0);
        state.unpark();
        state.park();
        assert_eq!(stacks.sweep(), 0);
        assert!(resident(top));
        drop(stack);
        assert!(state.is_dead());
        assert_eq!(stacks.stats().live, 0);
        // A dead stack cannot be parked again.
        state.park();
        assert!(state.is_dead());
    }

    #[test]
    fn neighbouring_parked_stacks_are_released_together_and_busy_ones_kept() {
        let stacks = Stacks::new(4 * PAGE);
        let made: Vec<_> = (0..4).map(|_| made(&stacks)).collect();
        let tops: Vec<usize> = made.iter().map(|(stack, _)| touch(&**stack)).collect();
        for (i, (_, state)) in made.iter().enumerate() {
            if i != 2 {
                state.park();
            }
        }
        stacks.sweep();
        assert_eq!(stacks.sweep(), 3);
        for (i, &top) in tops.iter().enumerate() {
            assert_eq!(resident(top), i == 2, "stack {i}");
        }
    }

    #[test]
    fn an_owner_and_a_drop_wait_out_a_release_under_way() {
        let stacks = Stacks::new(4 * PAGE);
        let (stack, state) = made(&stacks);
        state.state.store(SWEEPING, Ordering::Release);
        let waiter = {
            let state = state.clone();
            std::thread::spawn(move || {
                state.unpark();
                state.state.load(Ordering::Acquire)
            })
        };
        // The owner cannot take its stack back while the release is under way.
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished());
        state.state.store(RELEASED, Ordering::Release);
        assert_eq!(waiter.join().unwrap(), BUSY);
        state.state.store(SWEEPING, Ordering::Release);
        let dropper = std::thread::spawn(move || drop(stack));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(
            !dropper.is_finished(),
            "the slot is not given back mid-release"
        );
        assert_eq!(stacks.stats().live, 1);
        state.state.store(RELEASED, Ordering::Release);
        dropper.join().unwrap();
        assert!(state.is_dead());
        assert_eq!(stacks.stats().live, 0);
    }

    #[test]
    fn stacks_made_outside_a_recording_are_not_recorded() {
        let stacks = Stacks::new(4 * PAGE);
        let mut states = Vec::new();
        let outside = stacks.new_stack(PAGE, true).unwrap();
        made_during(&mut states, || ());
        assert!(states.is_empty());
        drop(outside);
    }
}
