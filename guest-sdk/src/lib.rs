//! Mote guest SDK: write a Mote actor as a plain Rust struct and compile it to a WebAssembly
//! component (`wasm32-wasip2`) that implements the `mote:actor` WIT contract.
//!
//! An actor is a type implementing [`Actor`]: `start` builds its state from the init bytes,
//! `receive` handles each message of its [`Message`] type, `unhandled` sees every other kind
//! and `stopping` runs once at the end; `supervise` has a say over a failed child and
//! `terminated` hears of watched actors' ends. Every hook gets a [`Context`] to reply, send,
//! spawn and watch children, stop actors, switch behaviour, stash messages and log.
//! [`export_actor!`] turns the type into the component's exports (world
//! `supervising-actor-world`).
//!
//! Modules:
//! - [`message`](mod@message): the [`Message`] trait, [`message!`], the postcard body codec and [`Envelope`];
//! - [`context`]: [`Context`], the actor's view of the host;
//! - [`supervision`]: [`Strategy`] and [`SpawnOptions`] helpers, strategies, death watch;
//! - [`behavior`]: [`Behavior`], `become_`/`unbecome` and the stash;
//! - [`actor`]: the [`Actor`] trait and [`export_actor!`];
//! - [`error`]: [`Error`] and [`Result`];
//! - [`bindings`]: the raw `wit-bindgen` bindings.
//!
//! # Behaviours and the stash
//!
//! [`Context::become_`] pushes a [`Behavior`], a plain function of the actor type that handles
//! its messages instead of [`Actor::receive`]; [`Context::unbecome`] pops it (popping the last
//! one returns to `receive`, popping none does nothing). [`Context::stash`] keeps the message
//! being handled, with its sender; [`Context::unstash_all`] has every stashed message handled,
//! in stash order and each with its original sender, right after the current hook returns,
//! before any new message and within the same call from the host. These requests take effect
//! when the hook returns `Ok` (a failed hook changes neither behaviour nor stash), so for the
//! next message; `start` may pick the first behaviour. If an unstashed message fails, the host
//! gets its error and the messages still due are handled first on the next delivery. The stash
//! lives in the instance: a restart or a stop drops it.
//!
//! # Supervision
//!
//! A parent chooses how its children's failures are handled with [`Context::set_strategy`]
//! (e.g. `Strategy::one_for_one(Directive::Restart).restarts(5, 1_000)`), and may decide case by
//! case in [`Actor::supervise`]. [`Context::watch`] asks for one message of kind
//! [`message::TERMINATED`] when an incarnation stops; it reaches [`Actor::terminated`].
//! A restarted instance learns why from [`Context::restart_cause`] in `start`.
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
//!
//! A worker that keeps jobs until it is ready for them, with [`Context::stash`] and
//! [`Context::become_`]:
//!
//! ```no_run
//! use mote_guest::{Actor, Context, Result};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! pub enum Job {
//!     Ready,
//!     Work(u32),
//!     Done(u32),
//! }
//! mote_guest::message!(Job);
//!
//! struct Worker;
//!
//! impl Worker {
//!     /// Once ready: does the work, answering each sender (stashed ones included).
//!     fn ready(&mut self, ctx: &mut Context, job: Job) -> Result<()> {
//!         match job {
//!             Job::Work(n) => ctx.reply(&Job::Done(n * 2)),
//!             Job::Ready | Job::Done(_) => Ok(()),
//!         }
//!     }
//! }
//!
//! impl Actor for Worker {
//!     type Msg = Job;
//!
//!     fn start(_ctx: &mut Context, _init: &[u8]) -> Result<Self> {
//!         Ok(Worker)
//!     }
//!
//!     /// Not ready yet: keeps the work for later.
//!     fn receive(&mut self, ctx: &mut Context, job: Job) -> Result<()> {
//!         match job {
//!             Job::Work(_) => ctx.stash(),
//!             Job::Ready => {
//!                 ctx.unstash_all();
//!                 ctx.become_(Self::ready);
//!             }
//!             Job::Done(_) => {}
//!         }
//!         Ok(())
//!     }
//! }
//!
//! mote_guest::export_actor!(Worker);
//! # fn main() {}
//! ```

#![warn(missing_docs)]

pub mod actor;
pub mod behavior;
#[allow(missing_docs)]
pub mod bindings;
pub mod context;
pub mod error;
mod instance;
pub mod message;
mod runtime;
pub mod supervision;

pub use actor::Actor;
pub use behavior::Behavior;
pub use bindings::mote::actor::types::{
    Address, Directive, LogLevel, Scope, SendError, SpawnError, SpawnOptions, StopReason, Strategy,
};
pub use context::Context;
pub use error::{Error, Result};
pub use message::{Envelope, Message, decode, encode};
/// The serde version message types must derive against.
pub use serde;

/// Items used by the macros' expansions; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::instance::Instance;
    pub use crate::runtime::{State, receive, start, stopping, supervise};
}
