//! Mote guest SDK: write a Mote actor as a plain Rust struct and compile it to a WebAssembly
//! component (`wasm32-wasip2`) that implements the `mote:actor` WIT contract.
//!
//! An actor is a type implementing [`Actor`]: `start` builds its state from the init bytes,
//! `receive` handles each message of its [`Message`] type, `unhandled` sees every other kind
//! and `stopping` runs once at the end. Every hook gets a [`Context`] to reply, send, spawn
//! children, stop actors and log. [`export_actor!`] turns the type into the component's exports.
//!
//! Modules:
//! - [`message`](mod@message): the [`Message`] trait, [`message!`], the postcard body codec and [`Envelope`];
//! - [`context`]: [`Context`], the actor's view of the host;
//! - [`actor`]: the [`Actor`] trait and [`export_actor!`];
//! - [`error`]: [`Error`] and [`Result`];
//! - [`bindings`]: the raw `wit-bindgen` bindings.
//!
//! # Example
//!
//! A counter that adds numbers and tells its total to whoever asks. The crate is a `cdylib`
//! depending on `mote-guest` and `serde`, built with `cargo build --target wasm32-wasip2`.
//!
//! ```no_run
//! use mote_guest::{Actor, Context, Result, StopReason};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! pub enum Counter {
//!     Add(u64),
//!     Get,
//!     Value(u64),
//! }
//! mote_guest::message!(Counter);
//!
//! struct MyCounter {
//!     count: u64,
//! }
//!
//! impl Actor for MyCounter {
//!     type Msg = Counter;
//!
//!     fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
//!         let count = std::str::from_utf8(init)?.trim().parse().unwrap_or(0);
//!         ctx.info(&format!("counting from {count}"));
//!         Ok(Self { count })
//!     }
//!
//!     fn receive(&mut self, ctx: &mut Context, msg: Counter) -> Result<()> {
//!         match msg {
//!             Counter::Add(k) => self.count += k,
//!             Counter::Get => ctx.reply(&Counter::Value(self.count))?,
//!             Counter::Value(_) => ctx.warn("ignoring a stray Value"),
//!         }
//!         Ok(())
//!     }
//!
//!     fn stopping(&mut self, ctx: &mut Context, _reason: StopReason) {
//!         ctx.info(&format!("stopping at {}", self.count));
//!     }
//! }
//!
//! mote_guest::export_actor!(MyCounter);
//! # fn main() {}
//! ```

#![warn(missing_docs)]

pub mod actor;
#[allow(missing_docs)]
pub mod bindings;
pub mod context;
pub mod error;
pub mod message;
mod runtime;

pub use actor::Actor;
pub use bindings::mote::actor::types::{Address, LogLevel, SendError, SpawnError, StopReason};
pub use context::Context;
pub use error::{Error, Result};
pub use message::{Envelope, Message, decode, encode};
/// The serde version message types must derive against.
pub use serde;

/// Items used by the macros' expansions; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::runtime::{State, receive, start, stopping};
}
