//! The sandbox every actor runs in: the shared wasmtime engine and its epoch ticker, the arenas
//! that hold linear memories and fiber stacks, the bindings of the `mote:actor` world, the
//! meter of one actor's memory and CPU, and images of an instance's core state (the
//! instrumentation that reaches it, the shim it adds, the baseline images diff against).

pub(crate) mod arena;
pub(crate) mod baseline;
pub(crate) mod bindings;
pub(crate) mod compile_cache;
pub(crate) mod engine;
pub(crate) mod image;
pub(crate) mod instrument;
pub(crate) mod meter;
pub(crate) mod packed;
pub(crate) mod parking;
pub(crate) mod periodic;
pub(crate) mod shim;
