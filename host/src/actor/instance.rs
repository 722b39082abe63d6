//! One live wasm instance of an actor: its `Store` (whose data is the actor's core and its
//! capabilities' states), the exports it calls, and the limits every call runs under.
//!
//! Invariants:
//! - Every call starts with a fresh CPU budget and is charged to the actor's meter at each
//!   epoch tick (its CPU time, see `sandbox::meter`); past the deadline the call traps.
//! - A call that trapped poisons the instance: it is never entered again.
//! - The store's data ([`ActorState`]) takes at most [`STORE_DATA_BUDGET`] bytes (checked as
//!   it compiles), so that the store, wasmtime's part and ours, is one allocation of mimalloc's
//!   2 KiB size class. The next class is 2,560 bytes: 32 bytes more data cost every actor 512.

use std::sync::Arc;

use wasmtime::component::Instance;
use wasmtime::{Store, UpdateDeadline};

use crate::actor::core::body_size;
use crate::actor::pull::Pull;
use crate::actor::supervisor::{Directive, FailureKind};
use crate::address::Address;
use crate::caps::ActorState;
use crate::deploy::exports::Exports;
use crate::deploy::modules::Module;
use crate::message::{Envelope, StopReason};
use crate::sandbox::bindings::{
    WitMessage, from_wit_directive, to_wit_address, to_wit_address_of, to_wit_failure_kind,
    to_wit_stop_reason,
};
use crate::sandbox::image::{self, CoreImage, ImageError};
use crate::sandbox::meter::{CpuDeadlineExceeded, Metered};
use crate::sandbox::packed::pack;
use crate::stats::ActorStats;

/// The most bytes of store data ([`ActorState`]) an actor's store keeps within 2 KiB.
/// wasmtime 48's own part of a `Store` takes 1,152 bytes (heaptrack, glibc's allocator: 2,080
/// a store with 928 bytes of data), and 2,048 is one of mimalloc's size classes.
const STORE_DATA_BUDGET: usize = 2048 - 1152;

const _: () = assert!(
    std::mem::size_of::<ActorState>() <= STORE_DATA_BUDGET,
    "an actor's store data grew past STORE_DATA_BUDGET: box the new large state (each actor \
     would pay 512 bytes for it)"
);

/// The longest failure text kept, in bytes.
const MAX_FAILURE_TEXT: usize = 4096;

/// A failure of a guest call.
#[derive(Debug)]
pub(crate) struct Failure {
    /// How: a trap (or a limit) leaves the instance unusable, an error does not.
    pub(crate) kind: FailureKind,
    pub(crate) message: String,
}

impl Failure {
    /// A failure of `kind`; a guest's text past [`MAX_FAILURE_TEXT`] bytes is cut (it goes
    /// to the log, the parent, subscribers and the next instance's `restart-cause`).
    pub(crate) fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.len() > MAX_FAILURE_TEXT {
            let end = message.floor_char_boundary(MAX_FAILURE_TEXT);
            let size = message.len();
            message.truncate(end);
            message.push_str(&format!(" [cut: {size} bytes]"));
        }
        Failure { kind, message }
    }

    /// A hook's error: the instance is still usable.
    pub(crate) fn error(message: impl Into<String>) -> Self {
        Failure::new(FailureKind::Error, message)
    }

    /// A trap, classified by its cause: the memory limit, the CPU deadline, the stack, or
    /// another trap.
    fn of_trap(trap: &wasmtime::Error, memory_hit: Option<usize>, during: &str) -> Self {
        let root = trap.root_cause();
        let (kind, message) = if let Some(limit) = memory_hit {
            let text = format!("memory limit of {limit} bytes exceeded ({root})");
            (FailureKind::MemoryLimit, text)
        } else if trap.chain().any(|e| e.is::<CpuDeadlineExceeded>()) {
            (FailureKind::CpuDeadline, root.to_string())
        } else if trap.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::StackOverflow) {
            (FailureKind::StackOverflow, root.to_string())
        } else {
            (FailureKind::Trap, root.to_string())
        };
        Failure::new(kind, format!("{during}{message}"))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.kind.is_trap() {
            write!(f, "trap: {}", self.message)
        } else {
            write!(f, "error: {}", self.message)
        }
    }
}

/// What became of a message `receive` returned from.
pub(crate) enum Received {
    /// It was handled.
    Handled,
    /// The guest rejected it (`host.reject`), for this reason: it becomes a dead letter.
    Rejected(Envelope, String),
    /// The guest set it aside (`stash`): a capability keeps it.
    Kept(Envelope),
}

/// An instance that could not be created, and the store data it was to run with.
pub(crate) struct Stillborn {
    pub(crate) failure: Failure,
    pub(crate) state: Box<ActorState>,
}

/// A packing buffer grown past this is dropped after the call, so that one big message does
/// not stay with an idle actor.
const KEEP_PACKED: usize = 4096;

/// A live wasm instance of one actor.
pub(crate) struct ActorInstance {
    store: Store<ActorState>,
    /// The component instance, for its snapshot shim.
    instance: Instance,
    /// The functions the host calls, type-checked when its module was deployed.
    exports: Exports,
    /// Whether its guest pulls bursts (see `actor::pull`).
    pulls: bool,
    /// The buffer messages are packed into for it.
    packing: Vec<u8>,
    /// Where its calls' time is charged, if it is measured: its module can read it, or the host
    /// meters every actor.
    usage: Option<Arc<ActorStats>>,
    slice_ticks: u64,
    epochs: bool,
    /// Set once a call trapped: the instance can no longer be entered.
    pub(crate) poisoned: bool,
}

impl ActorInstance {
    /// Instantiates `module` in a fresh store; on failure the store data comes back.
    pub(crate) async fn new(module: &Module, mut state: ActorState) -> Result<Self, Stillborn> {
        let engine = module.pre.engine().clone();
        let config = &state.core.kernel.config;
        let (slice_ticks, epochs) = (config.time_slice_ticks, config.epoch_interruption);
        // Only an actor that can read its CPU time pays for measuring it, unless the host
        // meters every actor (for its metrics).
        let usage = (module.metered || config.meter_cpu).then(|| state.core.stats.clone());
        state.core.meter.new_store();
        let mut store = Store::new(&engine, state);
        store.limiter(|state| &mut state.core.meter);
        if epochs {
            // Every time slice the guest yields to the scheduler; past its CPU deadline it fails.
            store.epoch_deadline_callback(move |mut ctx| {
                let meter = &mut ctx.data_mut().core.meter;
                meter.charge_tick()?;
                Ok(UpdateDeadline::YieldCustom(
                    slice_ticks,
                    meter.yield_marked(),
                ))
            });
            store.set_epoch_deadline(slice_ticks);
        }
        let failed = |store: Store<ActorState>, what: &str, e: wasmtime::Error| Stillborn {
            failure: Failure::new(FailureKind::Instantiation, format!("{what}: {e:#}")),
            state: Box::new(store.into_data()),
        };
        let instance = match module.pre.instantiate_async(&mut store).await {
            Ok(instance) => instance,
            Err(e) => return Err(failed(store, "instantiation failed", e)),
        };
        if let Some(snapshots) = &module.images {
            // The first fresh instances of a module say what its images diff against.
            snapshots.record(&mut store, instance).await;
        }
        let Some(exports) = module.exports.load(&mut store, &instance) else {
            let missing = wasmtime::Error::msg("an export checked at deploy is not there");
            return Err(failed(store, "instantiation failed", missing));
        };
        Ok(ActorInstance {
            store,
            instance,
            exports,
            // A module that pulls exports `packed-receive`.
            pulls: module.pulls,
            packing: Vec::new(),
            usage,
            slice_ticks,
            epochs,
            poisoned: false,
        })
    }

    /// Reads the instance's core state between two calls (its module deployed with
    /// snapshots on), through the snapshot shim.
    pub(crate) async fn capture(&mut self, module: &Module) -> Result<CoreImage, ImageError> {
        let Some(snapshots) = &module.images else {
            return Err(ImageError::NotEnabled(module.name.to_string()));
        };
        if self.poisoned {
            return Err(ImageError::Uncapturable(
                "its instance trapped and cannot be entered".into(),
            ));
        }
        // The shim's calls run under a call's budget, as the guest's do.
        self.begin_call();
        let captured = image::capture(&mut self.store, self.instance, snapshots).await;
        self.poison_on_access(captured)
    }

    /// Writes `image` into this fresh instance of `module`, within `limit` bytes of memory.
    pub(crate) async fn restore(
        &mut self,
        module: &Module,
        image: &CoreImage,
        limit: u64,
    ) -> Result<(), ImageError> {
        let Some(snapshots) = &module.images else {
            return Err(ImageError::NotEnabled(module.name.to_string()));
        };
        self.begin_call();
        let restored =
            image::restore(&mut self.store, self.instance, snapshots, image, limit).await;
        self.poison_on_access(restored)
    }

    /// A shim call that failed may have trapped: the instance is not entered again.
    fn poison_on_access<T>(&mut self, result: Result<T, ImageError>) -> Result<T, ImageError> {
        if let Err(ImageError::Access(_)) = &result {
            self.poisoned = true;
        }
        result
    }

    /// The store data.
    pub(crate) fn state(&mut self) -> &mut ActorState {
        self.store.data_mut()
    }

    /// Ends the instance, keeping its store data.
    pub(crate) fn into_state(self) -> ActorState {
        self.store.into_data()
    }

    fn begin_call(&mut self) {
        let core = &mut self.store.data_mut().core;
        core.meter.begin_call();
        core.rejected = None;
        core.current_sender = None;
        core.current_bytes = None;
        core.trace = None;
        core.kept = false;
        // Only the call that lends a lane pulls through it.
        core.pull = None;
        if self.epochs {
            self.store.set_epoch_deadline(self.slice_ticks);
        }
    }

    pub(crate) async fn start(&mut self, init: &[u8]) -> Result<(), Failure> {
        self.begin_call();
        let start = self.exports.start();
        let call = start.call_async(&mut self.store, (init,));
        let result = Metered::new(call, self.usage.as_deref()).await;
        let result = result.map(|(r,)| r);
        self.flatten(result)
    }

    /// Hands `envelope` to `receive` (packed, if the module exports `packed-receive`), handled
    /// in the span its `trace` names (the cell's, no longer the sender's); a call that returns
    /// gives the message back with what the guest made of it (a trap or an error keeps it: it
    /// is dropped).
    #[allow(
        clippy::manual_async_fn,
        reason = "an `async fn` keeps its arguments twice"
    )]
    pub(crate) fn receive(
        &mut self,
        mut envelope: Envelope,
        pull: Option<Box<Pull>>,
    ) -> impl Future<Output = Result<Received, Failure>> + Send + '_ {
        // An `async` block, using the envelope where it lies: an actor's task holds this
        // future's largest state for its whole life, and an `async fn` (or a destructured
        // envelope) would keep a second copy of it (see `Cell::handle_user`).
        async move {
            self.begin_call();
            self.store.data_mut().core.trace = envelope.trace();
            let (result, kind, body) = match self.exports.packed() {
                Some(typed) => {
                    pack(
                        envelope.sender.as_ref(),
                        &envelope.kind,
                        &envelope.body,
                        pull.is_some(),
                        &mut self.packing,
                    );
                    self.enter(envelope.sender.take(), envelope.body.len());
                    // Only `packed-receive` pulls: its guest's SDK handles what `next` hands
                    // over.
                    self.store.data_mut().core.pull = pull;
                    let call = typed.call_async(&mut self.store, (&self.packing[..],));
                    let result = Metered::new(call, self.usage.as_deref()).await;
                    if self.packing.capacity() > KEEP_PACKED {
                        self.packing = Vec::new();
                    }
                    // A pulled message handled last is the one a rejection or set-aside gives
                    // back.
                    let pulled =
                        (self.store.data_mut().core.pull.as_mut()).and_then(|p| p.take_current());
                    let (kind, body) = pulled.unwrap_or((envelope.kind, envelope.body));
                    (result.map(|(r,)| r), kind, body)
                }
                None => {
                    let msg = WitMessage {
                        sender: envelope.sender.as_ref().map(to_wit_address_of),
                        kind: envelope.kind,
                        body: envelope.body,
                    };
                    self.enter(envelope.sender, msg.body.len());
                    let receive = self.exports.receive();
                    let call = receive.call_async(&mut self.store, (&msg,));
                    let result = Metered::new(call, self.usage.as_deref()).await;
                    let result = result.map(|(r,)| r);
                    // `actor.receive` does not pull: the lane goes back untouched.
                    self.store.data_mut().core.pull = pull;
                    (result, msg.kind, msg.body)
                }
            };
            self.received(result, kind, body)
        }
    }

    /// Whether its guest pulls bursts (it exports `packed-receive` and imports `inbox`).
    pub(crate) fn pulls(&self) -> bool {
        self.pulls
    }

    /// What the last `receive` pulled, if it lent a lane (see `actor::pull`).
    pub(crate) fn take_pull(&mut self) -> Option<Box<Pull>> {
        self.store.data_mut().core.pull.take()
    }

    /// Makes `sender` and the body's size the current message's, for the imports it calls.
    fn enter(&mut self, sender: Option<Address>, bytes: usize) {
        let core = &mut self.store.data_mut().core;
        // The sender moves into the core (no reference count to touch).
        core.current_sender = sender;
        core.current_bytes = Some(body_size(bytes));
    }

    /// What became of a message `receive` returned from, given back as `kind` and `body`.
    fn received(
        &mut self,
        result: wasmtime::Result<Result<(), String>>,
        kind: String,
        body: Vec<u8>,
    ) -> Result<Received, Failure> {
        let core = &mut self.store.data_mut().core;
        let rejected = core.rejected.take();
        let kept = std::mem::take(&mut core.kept);
        let sender = core.current_sender.take();
        core.current_bytes = None;
        // A message set aside is handled later as a child of the span that set it aside.
        let trace = core.trace.take();
        let back = || Envelope::new(sender, kind, body).traced(trace);
        match (rejected, result) {
            (Some(reason), Ok(_)) => Ok(Received::Rejected(back(), reason)),
            (None, Ok(Ok(()))) if kept => Ok(Received::Kept(back())),
            (_, result) => self.flatten(result).map(|()| Received::Handled),
        }
    }

    pub(crate) async fn stopping(&mut self, reason: &StopReason) -> Result<(), Failure> {
        self.begin_call();
        let reason = to_wit_stop_reason(reason);
        let stopping = self.exports.stopping();
        let call = stopping.call_async(&mut self.store, (&reason,));
        let result = Metered::new(call, self.usage.as_deref()).await;
        self.flatten(result.map(|()| Ok(())))
    }

    /// Asks the optional `supervise` export; `Ok(None)` if it is absent or defers.
    pub(crate) async fn supervise(
        &mut self,
        child: &Address,
        kind: FailureKind,
        error: &str,
    ) -> Result<Option<Directive>, Failure> {
        let Some(func) = self.exports.supervise() else {
            return Ok(None);
        };
        self.begin_call();
        let args = (
            to_wit_address(child.clone()),
            to_wit_failure_kind(kind),
            error.to_owned(),
        );
        match Metered::new(
            func.call_async(&mut self.store, args),
            self.usage.as_deref(),
        )
        .await
        {
            Ok((directive,)) => Ok(directive.map(from_wit_directive)),
            Err(trap) => Err(self.trapped(&trap, "supervise: ")),
        }
    }

    /// Whether this instance exports the `upgrade` state hooks.
    pub(crate) fn upgradable(&self) -> bool {
        self.exports.upgrade().is_some()
    }

    /// Asks the instance for the state to carry into a new version (`None` without the hooks).
    pub(crate) async fn save_state(&mut self) -> Result<Option<Vec<u8>>, Failure> {
        let Some((save, _)) = self.exports.upgrade() else {
            return Ok(None);
        };
        self.begin_call();
        match Metered::new(save.call_async(&mut self.store, ()), self.usage.as_deref()).await {
            Ok((state,)) => Ok(state),
            Err(trap) => Err(self.trapped(&trap, "save-state: ")),
        }
    }

    /// Hands the state of an old version to this (new) instance, instead of `start`.
    pub(crate) async fn migrate(&mut self, from: &str, state: Vec<u8>) -> Result<(), Failure> {
        let Some((_, migrate)) = self.exports.upgrade() else {
            return Err(Failure::error("the new version has no migrate hook"));
        };
        self.begin_call();
        let call = migrate.call_async(&mut self.store, (from.to_owned(), state));
        let result = Metered::new(call, self.usage.as_deref())
            .await
            .map(|(r,)| r);
        self.flatten(result)
    }

    /// A call of this instance trapped (`during` names the hook, if not the usual ones): it
    /// can no longer be entered, and the failure says why, from the meter and the trap.
    fn trapped(&mut self, trap: &wasmtime::Error, during: &str) -> Failure {
        self.poisoned = true;
        // The root cause names the trap; the wasm backtrace above it goes to the debug log.
        tracing::debug!("guest trap: {trap:?}");
        let memory = self.store.data().core.meter.memory_hit();
        Failure::of_trap(trap, memory, during)
    }

    fn flatten(&mut self, result: wasmtime::Result<Result<(), String>>) -> Result<(), Failure> {
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Failure::error(e)),
            Err(trap) => Err(self.trapped(&trap, "")),
        }
    }
}
