//! One actor's wasm instance: its `Store`, the data the host imports see, and the calls into the
//! guest's exports, under the actor's memory limit and CPU deadline.
//!
//! The store data (`ActorState`) is the actor's whole view of the world: its address, its parent,
//! its children, whom it watches and a handle to the system. Host imports (`imports.rs`) run with
//! `&mut ActorState` only, so an actor reaches other actors through messages and nothing else.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker, ResourceTable, TypedFunc};
use wasmtime::{ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::address::Address;
use crate::bindings::{ActorWorld, WitAddress, WitDirective, WitMessage, WitStopReason};
use crate::guest_output::GuestOutput;
use crate::mailbox::ActorRef;
use crate::message::{Envelope, StopReason};
use crate::module::Module;
use crate::persistence::Durable;
use crate::supervisor::{Directive, Supervisor};
use crate::system::Shared;

/// The resource limits of one actor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) mailbox_capacity: usize,
    pub(crate) memory: usize,
    pub(crate) cpu_deadline: Duration,
}

/// The store data of one actor.
pub(crate) struct ActorState {
    pub(crate) shared: Arc<Shared>,
    pub(crate) me: Address,
    pub(crate) parent: Option<Address>,
    /// Live children by name; the cell removes them as they terminate.
    pub(crate) children: BTreeMap<String, ActorRef>,
    /// How this actor supervises its children.
    pub(crate) supervisor: Supervisor,
    /// Incarnations this actor watches and has not yet been told about.
    pub(crate) watching: HashSet<Address>,
    /// Set by the `stop` import on itself: stop after the current message.
    pub(crate) stop_requested: bool,
    /// Set while `stopping` runs and after: no new children.
    pub(crate) stopping: bool,
    /// Why this instance replaced a failed one, for `restart-cause`.
    pub(crate) restart_cause: Option<String>,
    /// A persistence id chosen before `recover`.
    pub(crate) pid: Option<String>,
    /// Set once the actor called `recover`: it is persistent, its steps are committed.
    pub(crate) durable: Option<Durable>,
    limits: Limits,
    /// Time slices the current call has used, against `limits.cpu_deadline`.
    slices_used: u64,
    slice: Duration,
    memory_hit: bool,
    wasi: WasiCtx,
    /// Used only by modules granted `wasi:http`.
    http: wasmtime_wasi_http::WasiHttpCtx,
    table: ResourceTable,
}

impl ActorState {
    pub(crate) fn new(
        shared: Arc<Shared>,
        me: Address,
        parent: Option<Address>,
        limits: Limits,
        watching: HashSet<Address>,
        restart_cause: Option<String>,
    ) -> Self {
        let log = |stream| GuestOutput {
            path: me.path.clone(),
            stream,
        };
        // Clocks and random only; stdout/stderr go to the host log; no files, no network.
        let wasi = WasiCtxBuilder::new()
            .stdout(log("stdout"))
            .stderr(log("stderr"))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let config = &shared.config;
        let slice = config.epoch_tick * config.time_slice_ticks as u32;
        ActorState {
            supervisor: Supervisor::new(Default::default()),
            shared,
            me,
            parent,
            children: BTreeMap::new(),
            watching,
            stop_requested: false,
            stopping: false,
            restart_cause,
            pid: None,
            durable: None,
            limits,
            slices_used: 0,
            slice,
            memory_hit: false,
            wasi,
            http: wasmtime_wasi_http::WasiHttpCtx::new(),
            table: ResourceTable::new(),
        }
    }
}

impl ActorState {
    /// The store data for a new version of this actor: the same address, parent, limits,
    /// children, supervision bookkeeping, watches and persistence id; a fresh sandbox.
    pub(crate) fn successor(&self) -> ActorState {
        let mut next = ActorState::new(
            self.shared.clone(),
            self.me.clone(),
            self.parent.clone(),
            self.limits,
            self.watching.clone(),
            None,
        );
        next.children = self.children.clone();
        next.supervisor = self.supervisor.clone();
        next.pid = self.pid.clone();
        next.durable = self.durable.as_ref().map(Durable::successor);
        next
    }
}

impl WasiView for ActorState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl ResourceLimiter for ActorState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limits.memory {
            self.memory_hit = true;
            wasmtime::bail!(
                "memory limit exceeded: the actor asked for {desired} bytes, its limit is {} bytes",
                self.limits.memory
            );
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// Adds the `mote:actor` host imports and the permitted WASI interfaces to a linker.
pub(crate) fn add_to_linker(linker: &mut Linker<ActorState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    ActorWorld::add_to_linker::<_, HasSelf<_>>(linker, |state| state)
}

/// Adds `wasi:http` (outgoing requests through the host's HTTP client) to a linker: only the
/// linker of modules a manifest grants it.
pub(crate) fn add_http_to_linker(linker: &mut Linker<ActorState>) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
}

impl wasmtime_wasi_http::WasiHttpView for ActorState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            hooks: wasmtime_wasi_http::default_hooks(),
            table: &mut self.table,
            ctx: &mut self.http,
        }
    }
}

/// A failure of a guest call.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The guest trapped (or hit a limit); its instance can no longer be entered.
    Trap(String),
    /// The guest returned an error; the instance is still usable.
    Error(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Trap(e) => write!(f, "trap: {e}"),
            Failure::Error(e) => write!(f, "error: {e}"),
        }
    }
}

type SuperviseFunc = TypedFunc<(WitAddress, String), (Option<WitDirective>,)>;
type SaveStateFunc = TypedFunc<(), (Option<Vec<u8>>,)>;
type MigrateFunc = TypedFunc<(String, Vec<u8>), (Result<(), String>,)>;

/// A live wasm instance of one actor.
pub(crate) struct ActorInstance {
    pub(crate) store: Store<ActorState>,
    bindings: ActorWorld,
    supervise: Option<SuperviseFunc>,
    upgrade: Option<(SaveStateFunc, MigrateFunc)>,
    slice_ticks: u64,
    /// Set once a call trapped: the instance can no longer be entered.
    pub(crate) poisoned: bool,
}

impl ActorInstance {
    /// Instantiates `module` in a fresh store.
    pub(crate) async fn new(module: &Module, state: ActorState) -> Result<Self, Failure> {
        let engine = module.pre.engine().clone();
        let slice_ticks = state.shared.config.time_slice_ticks;
        let mut store = Store::new(&engine, state);
        store.limiter(|state| state);
        if state_epochs(&store) {
            // Every time slice the guest yields to the scheduler; past its CPU deadline it fails.
            store.epoch_deadline_callback(move |mut ctx| {
                let state = ctx.data_mut();
                state.slices_used += 1;
                if state.slice * state.slices_used as u32 > state.limits.cpu_deadline {
                    wasmtime::bail!(
                        "cpu deadline exceeded: one call ran longer than {:?}",
                        state.limits.cpu_deadline
                    );
                }
                Ok(UpdateDeadline::Yield(slice_ticks))
            });
            store.set_epoch_deadline(slice_ticks);
        }
        let instance = module
            .pre
            .instance_pre()
            .instantiate_async(&mut store)
            .await
            .map_err(|e| Failure::Trap(format!("instantiation failed: {e:#}")))?;
        let bindings = ActorWorld::new(&mut store, &instance)
            .map_err(|e| Failure::Trap(format!("instantiation failed: {e:#}")))?;
        let supervise = match &module.supervise {
            Some(index) => Some(
                instance
                    .get_typed_func::<(WitAddress, String), (Option<WitDirective>,)>(
                        &mut store, index,
                    )
                    .map_err(|e| Failure::Trap(format!("bad supervise export: {e:#}")))?,
            ),
            None => None,
        };
        let upgrade = match module.upgrade {
            Some(exports) => {
                let save = instance
                    .get_typed_func::<(), (Option<Vec<u8>>,)>(&mut store, exports.save_state)
                    .map_err(|e| Failure::Trap(format!("bad save-state export: {e:#}")))?;
                let migrate = instance
                    .get_typed_func::<(String, Vec<u8>), (Result<(), String>,)>(
                        &mut store,
                        exports.migrate,
                    )
                    .map_err(|e| Failure::Trap(format!("bad migrate export: {e:#}")))?;
                Some((save, migrate))
            }
            None => None,
        };
        Ok(ActorInstance {
            store,
            bindings,
            supervise,
            upgrade,
            slice_ticks,
            poisoned: false,
        })
    }

    pub(crate) fn state(&mut self) -> &mut ActorState {
        self.store.data_mut()
    }

    fn begin_call(&mut self) {
        self.store.data_mut().slices_used = 0;
        if state_epochs(&self.store) {
            self.store.set_epoch_deadline(self.slice_ticks);
        }
    }

    pub(crate) async fn start(&mut self, init: &[u8]) -> Result<(), Failure> {
        self.begin_call();
        let result = self
            .bindings
            .mote_actor_actor()
            .call_start(&mut self.store, init)
            .await;
        self.flatten(result)
    }

    pub(crate) async fn receive(&mut self, envelope: Envelope) -> Result<(), Failure> {
        self.begin_call();
        let msg = WitMessage {
            sender: envelope.sender.map(to_wit_address),
            kind: envelope.kind,
            body: envelope.body,
        };
        let result = self
            .bindings
            .mote_actor_actor()
            .call_receive(&mut self.store, &msg)
            .await;
        self.flatten(result)
    }

    pub(crate) async fn stopping(&mut self, reason: &StopReason) -> Result<(), Failure> {
        self.begin_call();
        let reason = match reason {
            StopReason::Normal => WitStopReason::Normal,
            StopReason::Failure(e) => WitStopReason::Failure(e.clone()),
            StopReason::ParentFailure(e) => WitStopReason::ParentFailure(e.clone()),
            StopReason::Shutdown => WitStopReason::Shutdown,
        };
        let result = self
            .bindings
            .mote_actor_actor()
            .call_stopping(&mut self.store, &reason)
            .await;
        self.flatten(result.map(Ok))
    }

    /// Asks the optional `supervise` export; `Ok(None)` if it is absent or defers.
    pub(crate) async fn supervise(
        &mut self,
        child: &Address,
        error: &str,
    ) -> Result<Option<Directive>, Failure> {
        let Some(func) = self.supervise else {
            return Ok(None);
        };
        self.begin_call();
        let args = (to_wit_address(child.clone()), error.to_owned());
        match func.call_async(&mut self.store, args).await {
            Ok((directive,)) => Ok(directive.map(|d| match d {
                WitDirective::Resume => Directive::Resume,
                WitDirective::Restart => Directive::Restart,
                WitDirective::Stop => Directive::Stop,
                WitDirective::Escalate => Directive::Escalate,
            })),
            Err(trap) => {
                self.poisoned = true;
                Err(Failure::Trap(format!("supervise: {}", trap.root_cause())))
            }
        }
    }

    /// Whether this instance exports the `upgrade` state hooks.
    pub(crate) fn upgradable(&self) -> bool {
        self.upgrade.is_some()
    }

    /// Asks the instance for the state to carry into a new version (`None` without the hooks).
    pub(crate) async fn save_state(&mut self) -> Result<Option<Vec<u8>>, Failure> {
        let Some((save, _)) = self.upgrade else {
            return Ok(None);
        };
        self.begin_call();
        match save.call_async(&mut self.store, ()).await {
            Ok((state,)) => Ok(state),
            Err(trap) => {
                self.poisoned = true;
                Err(Failure::Trap(format!("save-state: {}", trap.root_cause())))
            }
        }
    }

    /// Hands the state of an old version to this (new) instance, instead of `start`.
    pub(crate) async fn migrate(&mut self, from: &str, state: Vec<u8>) -> Result<(), Failure> {
        let Some((_, migrate)) = self.upgrade else {
            return Err(Failure::Error("the new version has no migrate hook".into()));
        };
        self.begin_call();
        let result = migrate
            .call_async(&mut self.store, (from.to_owned(), state))
            .await
            .map(|(r,)| r);
        self.flatten(result)
    }

    fn flatten(&mut self, result: wasmtime::Result<Result<(), String>>) -> Result<(), Failure> {
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Failure::Error(e)),
            Err(trap) => {
                self.poisoned = true;
                // The root cause names the trap; the wasm backtrace above it goes to the debug log.
                tracing::debug!("guest trap: {trap:?}");
                let state = self.store.data();
                let text = if state.memory_hit {
                    format!(
                        "memory limit of {} bytes exceeded ({})",
                        state.limits.memory,
                        trap.root_cause()
                    )
                } else {
                    trap.root_cause().to_string()
                };
                Err(Failure::Trap(text))
            }
        }
    }
}

fn state_epochs(store: &Store<ActorState>) -> bool {
    store.data().shared.config.epoch_interruption
}

pub(crate) fn to_wit_address(address: Address) -> WitAddress {
    WitAddress {
        path: address.path.as_str().to_owned(),
        incarnation: address.incarnation,
    }
}
