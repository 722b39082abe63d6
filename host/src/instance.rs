//! One actor's wasm instance: its `Store`, the data the host imports see, and the calls into the
//! guest's exports.
//!
//! The store data (`ActorState`) is the actor's whole view of the world: its address, its parent,
//! its children and a handle to the system. Host imports run with `&mut ActorState` only, so an
//! actor can reach other actors through messages and nothing else.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use wasmtime::Store;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::address::{ActorPath, Address};
use crate::bindings::{self, ActorWorld, LogLevel, WitAddress, WitMessage, WitStopReason};
use crate::mailbox::{ActorRef, SystemMsg};
use crate::message::{Envelope, StopReason};
use crate::module::Module;
use crate::system::Shared;

/// The store data of one actor.
pub(crate) struct ActorState {
    pub(crate) shared: Arc<Shared>,
    pub(crate) me: Address,
    pub(crate) parent: Option<Address>,
    /// Live children by name; the cell removes them as they terminate.
    pub(crate) children: BTreeMap<String, ActorRef>,
    /// Set by the `stop` import on itself: stop after the current message.
    pub(crate) stop_requested: bool,
    /// Set while `stopping` runs and after: no new children.
    pub(crate) stopping: bool,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl ActorState {
    pub(crate) fn new(shared: Arc<Shared>, me: Address, parent: Option<Address>) -> Self {
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
        ActorState {
            shared,
            me,
            parent,
            children: BTreeMap::new(),
            stop_requested: false,
            stopping: false,
            wasi,
            table: ResourceTable::new(),
        }
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

/// Adds the `mote:actor` host imports and the permitted WASI interfaces to a linker.
pub(crate) fn add_to_linker(linker: &mut Linker<ActorState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    ActorWorld::add_to_linker::<_, HasSelf<_>>(linker, |state| state)
}

/// A failure of a guest call.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The guest trapped; its instance can no longer be entered.
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

/// A live wasm instance of one actor.
pub(crate) struct ActorInstance {
    pub(crate) store: Store<ActorState>,
    bindings: ActorWorld,
    slice: u64,
    /// Set once a call trapped: the instance can no longer be entered.
    pub(crate) poisoned: bool,
}

impl ActorInstance {
    /// Instantiates `module` in a fresh store.
    pub(crate) async fn new(module: &Module, state: ActorState) -> Result<Self, Failure> {
        let engine = module.pre.engine().clone();
        let slice = state.shared.config.time_slice_ticks;
        let mut store = Store::new(&engine, state);
        store.epoch_deadline_async_yield_and_update(slice);
        store.set_epoch_deadline(slice);
        let bindings = module
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| Failure::Trap(format!("instantiation failed: {e:#}")))?;
        Ok(ActorInstance {
            store,
            bindings,
            slice,
            poisoned: false,
        })
    }

    pub(crate) fn state(&mut self) -> &mut ActorState {
        self.store.data_mut()
    }

    pub(crate) async fn start(&mut self, init: &[u8]) -> Result<(), Failure> {
        self.store.set_epoch_deadline(self.slice);
        let result = self
            .bindings
            .mote_actor_actor()
            .call_start(&mut self.store, init)
            .await;
        self.flatten(result)
    }

    pub(crate) async fn receive(&mut self, envelope: Envelope) -> Result<(), Failure> {
        self.store.set_epoch_deadline(self.slice);
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
        self.store.set_epoch_deadline(self.slice);
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

    fn flatten(&mut self, result: wasmtime::Result<Result<(), String>>) -> Result<(), Failure> {
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Failure::Error(e)),
            Err(trap) => {
                self.poisoned = true;
                Err(Failure::Trap(format!("{trap:#}")))
            }
        }
    }
}

pub(crate) fn to_wit_address(address: Address) -> WitAddress {
    WitAddress {
        path: address.path.as_str().to_owned(),
        incarnation: address.incarnation,
    }
}

impl bindings::mote::actor::types::Host for ActorState {}

impl bindings::mote::actor::host::Host for ActorState {
    fn self_address(&mut self) -> WitAddress {
        to_wit_address(self.me.clone())
    }

    fn parent(&mut self) -> Option<WitAddress> {
        self.parent.clone().map(to_wit_address)
    }

    fn tell(
        &mut self,
        to: WitAddress,
        kind: String,
        body: Vec<u8>,
    ) -> Result<(), bindings::WitSendError> {
        let envelope = self.envelope(kind, body)?;
        self.shared
            .tell_address(&to.path, Some(to.incarnation), envelope);
        Ok(())
    }

    fn tell_path(
        &mut self,
        to: String,
        kind: String,
        body: Vec<u8>,
    ) -> Result<(), bindings::WitSendError> {
        let invalid = |e: crate::AddressError| bindings::WitSendError::InvalidPath(e.to_string());
        let envelope = self.envelope(kind, body)?;
        if to.starts_with('/') {
            ActorPath::check(&to).map_err(invalid)?;
            self.shared.tell_address(&to, None, envelope);
        } else {
            let path = self.me.path.select(&to).map_err(invalid)?;
            self.shared.tell_path(&path, envelope);
        }
        Ok(())
    }

    fn spawn(
        &mut self,
        name: String,
        module: String,
        init: Vec<u8>,
    ) -> Result<WitAddress, bindings::WitSpawnError> {
        use bindings::WitSpawnError as E;
        if self.stopping {
            return Err(E::Stopping);
        }
        let path = self
            .me
            .path
            .child(&name)
            .map_err(|e| E::InvalidName(e.to_string()))?;
        if self.children.contains_key(&name) {
            return Err(E::NameTaken(path.to_string()));
        }
        let child = self
            .shared
            .spawn(path, &module, init, Some(self.me.clone()))
            .map_err(|e| match e {
                crate::SpawnError::UnknownModule(m) => E::UnknownModule(m),
                crate::SpawnError::NameTaken(p) => E::NameTaken(p),
                crate::SpawnError::Address(a) => E::InvalidName(a.to_string()),
                other => E::Instantiation(other.to_string()),
            })?;
        let address = child.address.clone();
        self.children.insert(name, child);
        Ok(to_wit_address(address))
    }

    fn stop(&mut self, target: WitAddress) {
        if target.path == self.me.path.as_str() && target.incarnation == self.me.incarnation {
            self.stop_requested = true;
            return;
        }
        let descendant = ActorPath::parse(&target.path)
            .map(|p| p.is_descendant_of(&self.me.path))
            .unwrap_or(false);
        if !descendant {
            tracing::warn!(target = %target.path, "stop ignored: an actor may stop only itself and its descendants");
            return;
        }
        if let Some(actor) = self.shared.registry.get(&target.path)
            && actor.address.incarnation == target.incarnation
        {
            actor.signal(SystemMsg::Stop(StopReason::Normal));
        }
    }

    fn log(&mut self, level: LogLevel, message: String) {
        match level {
            LogLevel::Trace => tracing::trace!(target: "mote::guest", "{message}"),
            LogLevel::Debug => tracing::debug!(target: "mote::guest", "{message}"),
            LogLevel::Info => tracing::info!(target: "mote::guest", "{message}"),
            LogLevel::Warn => tracing::warn!(target: "mote::guest", "{message}"),
            LogLevel::Error => tracing::error!(target: "mote::guest", "{message}"),
        }
    }
}

impl ActorState {
    fn envelope(&self, kind: String, body: Vec<u8>) -> Result<Envelope, bindings::WitSendError> {
        let limit = self.shared.config.max_message_bytes;
        if body.len() > limit {
            return Err(bindings::WitSendError::TooLarge(body.len() as u64));
        }
        Ok(Envelope {
            sender: Some(self.me.clone()),
            kind,
            body,
        })
    }
}

/// Guest stdout/stderr, written line by line to the host log.
struct GuestOutput {
    path: ActorPath,
    stream: &'static str,
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LineLogger {
            path: self.path.clone(),
            stream: self.stream,
            line: Vec::new(),
        })
    }
}

struct LineLogger {
    path: ActorPath,
    stream: &'static str,
    line: Vec<u8>,
}

impl LineLogger {
    fn emit(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        tracing::info!(target: "mote::guest", actor = %self.path, stream = self.stream, "{}", text.trim_end());
        self.line.clear();
    }
}

impl tokio::io::AsyncWrite for LineLogger {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        for &b in buf {
            if b == b'\n' {
                self.emit();
            } else if self.line.len() < 64 << 10 {
                self.line.push(b);
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Lines are logged whole; a partial line waits for its newline or for the drop.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineLogger {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.emit();
        }
    }
}
