//! The sandbox every actor runs in: the shared wasmtime engine and its epoch ticker, the arenas
//! that hold linear memories and fiber stacks, the bindings of the `mote:actor` world, and the
//! meter of one actor's memory and CPU.

pub(crate) mod arena;
pub(crate) mod bindings;
pub(crate) mod compile_cache;
pub(crate) mod engine;
pub(crate) mod image;
pub(crate) mod meter;
pub(crate) mod packed;
