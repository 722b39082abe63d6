//! Mote guest SDK: write a Mote actor as a plain Rust struct and compile it to a WebAssembly
//! component (`wasm32-wasip2`, or a lean `wasm32-unknown-unknown` build wrapped by
//! wit-component: the SDK uses nothing of WASI) that implements the `mote:actor` WIT contract.
//!
//! An actor is a type implementing [`Actor`]: `start` builds its state from the init bytes,
//! `receive` handles each message of its [`Message`] type, `unhandled` sees every other kind
//! and `stopping` runs once at the end; `supervise` has a say over a failed child and
//! `terminated` hears of watched actors' ends, `dead_letter` of undeliverable messages and
//! `answered` and `ask_timeout` of asks; `save_state` and `migrate` carry the state across a hot
//! swap. Every hook gets a [`Context`] to reply, send, spawn
//! and watch children, stop actors, schedule timers, publish and subscribe, join groups, ask,
//! switch behaviour, stash messages, persist state and events, set durable reminders and log.
//! [`export_actor!`] turns the type into the component's exports (world
//! `sdk-actor-world`).
//!
//! Modules:
//! - [`message`](mod@message): the [`Message`] trait, [`message!`] and [`json_message!`], the
//!   body codecs ([`Encoding`]), [`Envelope`] and the host's message kinds;
//! - [`context`]: [`Context`], the actor's view of the host;
//! - [`clock`]: the actor's age and the CPU time it used;
//! - [`forwarding`]: passing a message on with its original sender;
//! - [`lookup`]: an actor's live children, and the address at a path;
//! - [`naming`]: aliases, second names resolved like paths;
//! - [`priority`]: urgent messages, ahead of the receiver's ordinary ones;
//! - [`lifecycle`]: a parent deactivates and activates its children;
//! - [`delivery`]: at-least-once (the default) or at-most-once for durable messages;
//! - [`supervision`]: [`Strategy`] and [`SpawnOptions`] helpers, strategies, death watch;
//! - [`timers`]: one-shot and periodic timers;
//! - [`messaging`]: topics, groups and asking;
//! - [`persistence`]: snapshots, the event journal, [`Recovery`] and durable reminders;
//! - [`dead_letter`]: [`DeadLetter`] and its codec;
//! - [`behavior`]: [`Behavior`], `become_`/`unbecome`;
//! - [`stash`]: the stash the host keeps, `stash`/`unstash_all`, `peek`/`take`;
//! - [`upgrade`]: hot swap, [`state`] and [`from_state`];
//! - [`actor`]: the [`Actor`] trait and [`export_actor!`];
//! - [`error`]: [`Error`] and [`Result`];
//! - [`bindings`]: the raw `wit-bindgen` bindings.
//!
//! A lean (`wasm32-unknown-unknown`) build also gets the SDK's global allocator, which lays the
//! heap right after the module's data so that a small heap shares the data's pages (the default
//! feature `heap`; turn it off to bring your own `#[global_allocator]`).
//!
//! # Body encodings: postcard for Rust-to-Rust, JSON to talk to other languages
//!
//! A message's kind names its type and its body is that type's serde encoding. [`message!`]
//! declares types whose bodies are postcard, compact and what Rust actors send each other.
//! [`json_message!`] declares types whose bodies are UTF-8 JSON text (serde_json), which
//! actors written in Python or JavaScript read with `json.loads`/`JSON.parse` and write with
//! `json.dumps`/`JSON.stringify`. Both name the kind after the type unless given one:
//! `json_message!(Order = "order")` matches a Python actor sending kind `"order"`. The choice
//! is per type ([`Message::ENCODING`]); everything that sends or decodes a [`Message`] (`tell`,
//! `reply`, `ask`, `publish`, timers, `receive`, [`encode`], [`decode`], [`Envelope`]) follows
//! it. A JSON struct is an object; serde's attributes shape the rest (an enum is externally
//! tagged by default: `{"Add":5}`, `"Get"`; `#[serde(tag = "type")]` is usually friendlier to
//! other languages). Kinds starting `mote.` are the host's.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//!
//! /// What a Python actor sends as `tell(to, "order", json.dumps({"id": 7, "item": "tea"}))`.
//! #[derive(Serialize, Deserialize)]
//! pub struct Order {
//!     id: u64,
//!     item: String,
//! }
//! mote_guest::json_message!(Order = "order");
//!
//! let order: Order = mote_guest::decode("order", br#"{"id": 7, "item": "tea"}"#)?;
//! assert_eq!(mote_guest::encode(&order)?, br#"{"id":7,"item":"tea"}"#);
//! # Ok::<(), mote_guest::Error>(())
//! ```
//!
//! # Behaviours and the stash
//!
//! [`Context::become_`] pushes a [`Behavior`], a plain function of the actor type that handles
//! its messages instead of [`Actor::receive`]; [`Context::unbecome`] pops it (popping the last
//! one returns to `receive`, popping none does nothing). [`Context::stash`] sets the message
//! being handled aside, with its sender; [`Context::unstash_all`] has every stashed message
//! handled again, in stash order and each with its original sender, one per call from the
//! host, before any message still in the mailbox. These requests take effect when the hook
//! returns `Ok` (a failed hook changes neither behaviour nor stash), so for the next message;
//! `start` may pick the first behaviour. The host keeps the stash: a restart or an upgrade of
//! the actor keeps it, a durable stashed message is acknowledged only once handled (a crash
//! loses none), and a stop turns it into dead letters. [`Context::peek`] and [`Context::take`]
//! look into it at once, for selective receive.
//!
//! # Supervision
//!
//! A parent chooses how its children's failures are handled with [`Context::set_strategy`]
//! (e.g. `Strategy::one_for_one(Directive::Restart).restarts(5, 1_000)`), and may decide case by
//! case in [`Actor::supervise`]. [`Context::watch`] asks for one message of kind
//! [`message::TERMINATED`] when an incarnation stops; it reaches [`Actor::terminated`].
//! A restarted instance learns why from [`Context::restart_cause`] in `start`.
//!
//! # Timers
//!
//! [`Context::schedule`] sends a message to an address after a delay, and then every period if
//! one is given; [`Context::schedule_self`] sends it to the actor itself (the usual way to get
//! a tick). Both return a timer id for [`Context::cancel_timer`]. The scheduling actor is the
//! sender, and its timers die with it. Durations have millisecond resolution.
//!
//! # Topics, groups and dead letters
//!
//! [`Context::subscribe`] to a topic to receive every message [`Context::publish`]ed to it
//! afterwards, with the publisher as sender; `publish` returns how many subscribers it
//! reached. Actors [`Context::join`] named groups: [`Context::tell_group`] reaches the member
//! with the shortest mailbox, [`Context::broadcast_group`] all of them. A message that reaches
//! no actor is a dead letter: subscribers of [`DEAD_LETTERS_TOPIC`] receive each as kind
//! [`DEAD_LETTER`], which the runtime decodes into a [`DeadLetter`] (original sender, target,
//! kind and body) for [`Actor::dead_letter`]. A malformed one is logged and ignored.
//!
//! # Persistence
//!
//! An actor becomes persistent by calling [`Context::recover`] in `start`: it returns a
//! [`Recovery`], the latest snapshot and the events journaled after it, which
//! [`Recovery::fold`] turns back into the state ([`Context::recover_snapshot`] when the actor
//! keeps only snapshots). Then [`Context::persist`] appends an event and
//! [`Context::save_snapshot`] replaces the snapshot (snapshots and events are serde types,
//! postcard-encoded); [`Context::delete_events`] drops the events a snapshot covers and
//! [`Context::delete_state`] everything. The host commits all a hook did, messages sent
//! included, when it returns, and releases the messages only then; a failed commit fails the
//! actor, which its supervisor restarts from the last commit. The state is keyed by the
//! actor's path unless [`Context::set_persistence_id`] chose another id before `recover`.
//! [`Context::remind`] schedules a message to the actor itself that survives host restarts;
//! [`Context::in_shutdown`] tells `stopping` the host is going down. A refused call is an
//! [`Error`] whose [`Error::persist_error`] is the host's [`PersistError`].
//!
//! # Asking
//!
//! [`Context::ask`] sends a request with a deadline and returns an ask id. Exactly one answer
//! comes back: the reply, from the address `/system/ask/<id>` (path prefix [`ASK_PREFIX`],
//! incarnation the id), which goes to [`Actor::answered`], or a message of kind
//! [`ASK_TIMEOUT`] from that same address, which goes to [`Actor::ask_timeout`]. The default
//! `answered` handles the reply like any other message (by the behaviour or `receive` if its
//! kind is the actor's `Msg`, else `unhandled`), so a simple actor just sees replies in
//! `receive`, with `ctx.sender().incarnation` as the ask id; override it to match replies to
//! asks. The asked actor needs nothing special: it replies to its sender as usual.
//!
//! # Hot swap
//!
//! The host may upgrade a running actor to a new version of its module between two messages;
//! the actor keeps its address, mailbox, children, timers and subscriptions. By default the new
//! version starts afresh (`start` with the original init). To carry the state, the old version
//! returns it from [`Actor::save_state`] (e.g. `mote_guest::state(&self.count)`) and the new
//! version rebuilds itself from it in [`Actor::migrate`] (e.g. `mote_guest::from_state(state)`),
//! which runs instead of `start`; if `migrate` fails, the old instance keeps running. An error
//! in `save_state` traps. Behaviours and the stash do not carry over. See [`upgrade`] for the
//! details and an example.
//!
//! # Example
//!
//! A counter that adds numbers and tells its total to whoever asks. The crate is a `cdylib`
//! depending on `mote-guest` and `serde`, built with `cargo build --target wasm32-wasip2` (or
//! for `wasm32-unknown-unknown`, then `wasm-tools component new`: no WASI imports, faster
//! spawns; the README's "Lean Rust actors" says what it gives up).
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
//!
//! A poller that asks its parent, a counter, for its value every second, ten times, with
//! [`Context::schedule_self`] and [`Context::ask`]:
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use mote_guest::{Actor, Context, Envelope, Result};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! pub enum Poll {
//!     Tick,
//! }
//!
//! #[derive(Serialize, Deserialize)]
//! pub enum Counter {
//!     Add(u64),
//!     Get,
//!     Value(u64),
//! }
//! mote_guest::message!(Poll, Counter);
//!
//! struct Poller {
//!     timer: u64,
//!     ticks: u32,
//! }
//!
//! impl Actor for Poller {
//!     type Msg = Poll;
//!
//!     fn start(ctx: &mut Context, _init: &[u8]) -> Result<Self> {
//!         let second = Duration::from_secs(1);
//!         let timer = ctx.schedule_self(&Poll::Tick, second, Some(second))?;
//!         Ok(Self { timer, ticks: 0 })
//!     }
//!
//!     fn receive(&mut self, ctx: &mut Context, Poll::Tick: Poll) -> Result<()> {
//!         self.ticks += 1;
//!         if self.ticks == 10 {
//!             ctx.cancel_timer(self.timer);
//!         }
//!         if let Some(parent) = ctx.parent() {
//!             ctx.ask(&parent, &Counter::Get, Duration::from_millis(200))?;
//!         }
//!         Ok(())
//!     }
//!
//!     fn answered(&mut self, ctx: &mut Context, id: u64, reply: Envelope) -> Result<()> {
//!         if let Ok(Counter::Value(value)) = reply.decode::<Counter>() {
//!             ctx.info(&format!("ask {id}: the count is {value}"));
//!         }
//!         Ok(())
//!     }
//!
//!     fn ask_timeout(&mut self, ctx: &mut Context, id: u64) -> Result<()> {
//!         ctx.warn(&format!("ask {id}: no answer in time"));
//!         Ok(())
//!     }
//! }
//!
//! mote_guest::export_actor!(Poller);
//! # fn main() {}
//! ```

#![warn(missing_docs)]

pub mod actor;
pub mod behavior;
#[allow(missing_docs)]
pub mod bindings;
pub mod callouts;
pub mod clock;
pub mod context;
pub mod dead_letter;
pub mod delivery;
pub mod error;
pub mod forwarding;
#[cfg(all(target_arch = "wasm32", target_os = "unknown", feature = "heap"))]
mod heap;
mod instance;
pub mod lifecycle;
pub mod lookup;
pub mod message;
pub mod messaging;
pub mod naming;
mod outbox;
pub mod patterns;
pub mod persistence;
pub mod priority;
mod routing;
mod runtime;
#[cfg_attr(
    not(all(target_arch = "wasm32", target_os = "unknown", feature = "heap")),
    allow(dead_code)
)]
mod small_blocks;
mod spare;
pub mod stash;
pub mod supervision;
pub mod timers;
pub mod upgrade;

pub use actor::Actor;
pub use behavior::Behavior;
pub use bindings::mote::actor::persistence::PersistError;
pub use bindings::mote::actor::types::{
    Address, Directive, FailureKind, LogLevel, Scope, SendError, SpawnError, SpawnOptions,
    StopReason, Strategy,
};
pub use callouts::{CalloutError, HttpRequest, HttpResponse};
pub use context::Context;
pub use dead_letter::DeadLetter;
pub use delivery::Delivery;
pub use error::{Error, Result};
pub use message::{
    ASK_PREFIX, ASK_TIMEOUT, DEAD_LETTER, Encoding, Envelope, HTTP_RESPONSE, Message, TERMINATED,
    decode, encode,
};
pub use messaging::DEAD_LETTERS_TOPIC;
pub use persistence::{Events, Recovery};
/// The serde version message types must derive against.
pub use serde;
pub use supervision::Failure;
pub use upgrade::{from_state, state};

/// Items used by the macros' expansions; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::instance::Instance;
    pub use crate::runtime::{
        State, migrate, receive, receive_packed, save_state, start, stopping, supervise,
    };
}
