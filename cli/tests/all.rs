//! The integration tests of `mote`, one binary: the host and wasmtime are linked once, and
//! `cargo test` runs the tests of all files side by side instead of one file after another.
//! Each file is a module, as it was a crate of its own.

mod common;

mod cli;
mod cluster;
mod crash;
mod dashboard;
mod durability;
mod moves;
mod replay;
mod traces;
