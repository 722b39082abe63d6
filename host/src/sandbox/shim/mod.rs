//! The snapshot shim: the core module [`super::instrument`] adds to a component deployed with
//! snapshots on ([`module`] generates it), and the host's side of it ([`call`]). The shim
//! imports every linear memory, table and mutable number global the component's core
//! instances define, has a small memory of its own with a bump `realloc`, and its functions,
//! lifted as component exports named `mote-snapshot-*`, are how the host reads and writes an
//! instance's core state between two guest calls (see [`super::image`]).
//!
//! Invariants:
//! - A shim function touches only the item its index names, in the range it is given, and the
//!   shim's own memory: the guest's state changes only by `write-pages`, `zero`, `grow` and
//!   `set-globals`.
//! - The shim's own memory holds one call's data and nothing between calls: `read`,
//!   `globals` and `nonzero-pages` (the pages worth reading, found by scanning a memory in
//!   place) put their answer at [`DATA`](abi::DATA), and `realloc` hands out room from there
//!   on for a call's list arguments, from there again at the next call; it grows as a call
//!   needs and never shrinks.
//! - Few calls: globals go in one call each way, as a list in the layout's order (an
//!   interpreter's component has hundreds: componentize-py's, 493), and pages are written
//!   scattered, many a call. A call costs about a microsecond.
//! - An index or range out of bounds traps (`unreachable`, or `memory.copy`'s bounds check),
//!   and a trap leaves the instance unusable: the host checks both before calling.

mod abi;
mod call;
mod module;

pub(crate) use abi::{
    CORE_EXPORT_PREFIX, Imports, Item, LIFTED, Lifted, MEMORY_EXPORT, Num, PAGE, REALLOC_EXPORT,
    Ty, WASM_PAGE, core_export, export_name, instance_import, is_reserved_export,
};
pub(crate) use call::{Shim, ShimExports};
pub(crate) use module::module;
