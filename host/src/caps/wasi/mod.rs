//! WASI for actors: clocks and random; stdout and stderr into the host log (through its
//! non-blocking queue), line by line,
//! tagged with the actor's path; no preopened directories, no sockets, no name lookup, no
//! environment, no arguments. `wasi:http` (outgoing requests through the host's client) only
//! for modules granted it.
//!
//! Invariants:
//! - A module imports `wasi:http` only if granted: deploy refuses it otherwise, so the one
//!   linker that holds it serves every module without giving it to any that was not granted.
//! - An actor that never calls WASI costs no WASI context: it is built at the first call.
//! - In a replay's sandbox every outgoing `wasi:http` request is denied before it is sent
//!   (`HTTP request denied`): a replay releases nothing.

mod output;

use std::sync::Arc;

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use self::output::GuestOutput;
use super::capability::{ActorState, Capability, Env, Grant, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::error::HostError;
use crate::guestlog::GuestLog;

/// The capability behind the WASI interfaces.
pub(crate) struct Wasi {
    /// Where guest stdout and stderr go.
    log: Arc<GuestLog>,
    /// Set in a replay's sandbox: no request leaves it.
    sealed: bool,
}

/// One actor instance's WASI: its context and resources. The context takes the actor's path
/// and log budget from its core when it is built.
pub(crate) struct Sandboxed {
    /// Where its output goes.
    log: Arc<GuestLog>,
    /// Built at the first WASI call; boxed, as most actors never make one (an inline context
    /// made every actor's store half a kilobyte larger).
    ctx: Option<Box<WasiCtx>>,
    /// Built at the first `wasi:http` call.
    http: Option<Box<WasiHttpCtx>>,
    table: ResourceTable,
    /// Set in a replay's sandbox: requests are denied, by these hooks (no size).
    sealed: bool,
    denied: Denied,
}

/// The WASI context of `actor`: its output goes to `sink`, charged to its log budget.
fn context(actor: &ActorCore, sink: &Arc<GuestLog>) -> WasiCtx {
    let log = |stream| GuestOutput {
        path: actor.me.path.clone(),
        stream,
        budget: (actor.stats.clone(), *actor.quotas()),
        log: sink.clone(),
    };
    WasiCtxBuilder::new()
        .stdout(log("stdout"))
        .stderr(log("stderr"))
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build()
}

impl Capability for Wasi {
    type State = Sandboxed;
    const IMPORTS: &'static [&'static str] = &[
        "wasi:io/",
        "wasi:clocks/",
        "wasi:random/",
        "wasi:cli/",
        "wasi:filesystem/",
        "wasi:sockets/",
    ];
    const GRANTS: &'static [Grant] = &[Grant {
        name: "wasi:http",
        imports: "wasi:http/",
    }];

    fn new(env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Wasi {
            log: env.guest_log.clone(),
            sealed: env.replay.is_some(),
        })
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        wasmtime_wasi::p2::add_to_linker_async(linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
    }

    fn capture(&self, actor: &ActorCore, state: &Sandboxed) -> Result<Vec<u8>, String> {
        self.hibernate(actor, state).map(|()| Vec::new())
    }

    fn hibernate(&self, _actor: &ActorCore, state: &Sandboxed) -> Result<(), String> {
        // Handles to WASI resources live in the instance's handle table, which a fresh
        // instance does not have: an actor holding one (an open stream, a request) is refused.
        match state.table.is_empty() {
            true => Ok(()),
            false => Err("it holds WASI resources (open streams or requests)".into()),
        }
    }

    fn state(&self, _actor: &ActorCore, _origin: Origin<'_, Sandboxed>) -> Sandboxed {
        Sandboxed {
            log: self.log.clone(),
            ctx: None,
            http: None,
            table: ResourceTable::new(),
            sealed: self.sealed,
            denied: Denied,
        }
    }
}

impl<K: Provides<Wasi>> WasiView for ActorState<K> {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let Sandboxed {
            log, ctx, table, ..
        } = K::state(&mut self.caps);
        let actor = &self.core;
        WasiCtxView {
            ctx: ctx.get_or_insert_with(|| Box::new(context(actor, log))),
            table,
        }
    }
}

impl<K: Provides<Wasi>> WasiHttpView for ActorState<K> {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        let Sandboxed {
            http,
            table,
            sealed,
            denied,
            ..
        } = K::state(&mut self.caps);
        let hooks: &mut dyn WasiHttpHooks = match sealed {
            true => denied,
            false => wasmtime_wasi_http::default_hooks(),
        };
        WasiHttpCtxView {
            hooks,
            ctx: http.get_or_insert_with(|| Box::new(WasiHttpCtx::new())),
            table,
        }
    }
}

/// The hooks of a replay's sandbox: every outgoing request is denied.
struct Denied;

impl WasiHttpHooks for Denied {
    fn send_request(
        &mut self,
        _request: http::Request<wasmtime_wasi_http::WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<wasmtime_wasi_http::WasiBody>,
                        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) })
    }
}
