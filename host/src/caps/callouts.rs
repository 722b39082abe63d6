//! `mote:actor/callouts`: HTTP call-outs (OSGi "Int 3", Akka `pipeTo`). An actor starts an
//! outgoing HTTP request and goes on handling messages; when the exchange ends, a host message
//! `mote.http.response` (no sender, body = the id, u64 little-endian) tells it, and
//! `http-response(id)` hands over the typed outcome, once.
//!
//! Invariants:
//! - Only a module granted `wasi:http` starts a call-out: the interface is linked for every
//!   module (the Rust SDK's routing imports it in every actor), so the grant is checked at the
//!   call, which is refused with `not-granted` otherwise.
//! - Bulkhead: requests run on the service's own thread and runtime, started at the first
//!   call-out, never on the kernel's runtime that runs actor cells; a slow or hostile server
//!   ties up nothing message delivery needs.
//! - An actor holds at most `quotas.callouts` call-outs, each from `http-request` until its
//!   outcome is taken; a response body is read up to `quotas.max_callout_response_bytes` and no
//!   further (past it the outcome is `too-large`); no exchange outlives
//!   `quotas.max_callout_timeout`. Refusals are counted.
//! - Call-outs die with their instance: a restart or a stop aborts those in flight and drops
//!   the outcomes not taken; no message is sent for them afterwards, and one already queued is
//!   dropped before the guest sees it ([`Capability::admit`]). An upgrade hands them to the
//!   new version (the same incarnation).
//! - A persistent actor's call-out starts only once the step that started it has committed
//!   (commit before effects); its id is valid from the start.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use wasmtime::component::Linker;

use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::actor::step::Deferred;
use crate::address::Address;
use crate::error::HostError;
use crate::kernel::Kernel;
use crate::message::Envelope;
use crate::quota::Quota;
use crate::sandbox::bindings::mote::actor::callouts::{
    self, CalloutError, Request as WitRequest, Response as WitResponse,
};
use crate::stats::ActorStats;
use crate::trace::TraceParent;

/// The kind of the host message that says a call-out ended; its body is the id (u64 LE).
pub const HTTP_RESPONSE_KIND: &str = "mote.http.response";

/// The grant a module needs to start call-outs: the same as for `wasi:http`.
const GRANT: &str = "wasi:http";

/// The outcome of one call-out, as the guest takes it.
type Outcome = Result<WitResponse, CalloutError>;

/// The capability behind the `callouts` interface: call-out ids and the bulkhead.
pub(crate) struct Callouts {
    next_id: AtomicU64,
    bulkhead: Mutex<Bulkhead>,
}

/// The thread that runs the requests, started at the first call-out.
enum Bulkhead {
    /// No call-out yet.
    Idle,
    /// Running: spawn requests on `handle`; dropping `stop` ends the thread.
    Running {
        handle: tokio::runtime::Handle,
        _stop: oneshot::Sender<()>,
    },
    /// The host is closed: no more call-outs.
    Closed,
}

impl Callouts {
    fn lock(&self) -> MutexGuard<'_, Bulkhead> {
        self.bulkhead.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bulkhead's runtime, started if need be.
    fn runtime(&self) -> Result<tokio::runtime::Handle, String> {
        let mut bulkhead = self.lock();
        match &*bulkhead {
            Bulkhead::Running { handle, .. } => return Ok(handle.clone()),
            Bulkhead::Closed => return Err("the host is shutting down".into()),
            Bulkhead::Idle => {}
        }
        let (stop, stopped) = oneshot::channel::<()>();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("mote-callouts".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = tx.send(Ok(runtime.handle().clone()));
                // Runs the requests until the service is dropped or closed; the runtime is
                // dropped here, on its own thread, which aborts whatever is still in flight.
                let _ = runtime.block_on(stopped);
            })
            .map_err(|e| e.to_string())?;
        let handle = rx.recv().map_err(|e| e.to_string())??;
        *bulkhead = Bulkhead::Running {
            handle: handle.clone(),
            _stop: stop,
        };
        Ok(handle)
    }
}

/// One actor's call-outs (shared by the instances of one incarnation during an upgrade, once
/// the first call-out made them: an instance that never made one hands on none).
pub(crate) struct Outbox(Option<Arc<Mutex<Slots>>>);

/// The call-outs of one actor by id.
#[derive(Default)]
struct Slots {
    calls: HashMap<u64, Slot>,
    /// Set when the instance restarts or stops: nothing new gets in.
    closed: bool,
}

/// Where one call-out is.
enum Slot {
    /// Waiting for its step to commit.
    Starting,
    /// In flight on the bulkhead.
    Running(AbortHandle),
    /// Ended; the outcome waits to be taken.
    Done(Outcome),
}

impl Slots {
    /// Aborts every call-out and drops every outcome; nothing new gets in.
    fn close(&mut self) {
        self.closed = true;
        for (_, slot) in self.calls.drain() {
            if let Slot::Running(task) = slot {
                task.abort();
            }
        }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        self.close();
    }
}

impl Outbox {
    /// No slots yet: they are made at the first call-out, as most actors never make one.
    fn new() -> Outbox {
        Outbox(None)
    }

    /// Its slots, made now if this is its first call-out.
    fn slots(&mut self) -> &Arc<Mutex<Slots>> {
        self.0.get_or_insert_default()
    }

    /// Its slots, locked, if it ever made a call-out.
    fn lock(&self) -> Option<MutexGuard<'_, Slots>> {
        self.0.as_deref().map(lock)
    }
}

fn lock(slots: &Mutex<Slots>) -> MutexGuard<'_, Slots> {
    slots.lock().unwrap_or_else(|p| p.into_inner())
}

impl Capability for Callouts {
    type State = Outbox;
    const IMPORTS: &'static [&'static str] = &["mote:actor/callouts@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        Ok(Callouts {
            next_id: AtomicU64::new(1),
            bulkhead: Mutex::new(Bulkhead::Idle),
        })
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        callouts::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, origin: Origin<'_, Outbox>) -> Outbox {
        match origin {
            // A restarted instance knows nothing of its predecessor's call-outs.
            Origin::Spawned | Origin::Restarted { .. } => Outbox::new(),
            Origin::Upgraded { old } => Outbox(old.0.clone()),
        }
    }

    fn closed(&self) {
        *self.lock() = Bulkhead::Closed;
    }

    fn capture(&self, _actor: &ActorCore, state: &Outbox) -> Result<Vec<u8>, String> {
        match state.lock().map_or(0, |slots| slots.calls.len()) {
            0 => Ok(Vec::new()),
            n => Err(format!("{n} HTTP call-out(s) in flight")),
        }
    }

    fn restarting(&self, _actor: &Address, state: &mut Outbox) {
        if let Some(mut slots) = state.lock() {
            slots.close();
        }
    }

    fn stopped(&self, _kernel: &Arc<Kernel>, _actor: &Address, state: Option<&mut Outbox>) {
        if let Some(mut slots) = state.and_then(|state| state.lock()) {
            slots.close();
        }
    }

    fn admit(&self, state: &mut Outbox, envelope: &Envelope) -> bool {
        if envelope.kind != HTTP_RESPONSE_KIND {
            return true;
        }
        // Only the news of an outcome this instance can still take.
        let id = decode_id(&envelope.body);
        envelope.sender.is_none()
            && id.is_some_and(|id| {
                state
                    .lock()
                    .is_some_and(|slots| matches!(slots.calls.get(&id), Some(Slot::Done(_))))
            })
    }
}

/// The id in a `mote.http.response` body.
fn decode_id(body: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(body.try_into().ok()?))
}

/// A request checked and ready to send.
struct Prepared {
    request: http::Request<Full<Bytes>>,
    timeout: Duration,
    max_body: usize,
}

/// Checks a guest's request and builds it.
fn prepare(
    request: WitRequest,
    max_timeout: Duration,
    max_body: usize,
    max_request_bytes: usize,
) -> Result<Prepared, CalloutError> {
    let uri: http::Uri = request
        .url
        .parse()
        .map_err(|e: http::uri::InvalidUri| CalloutError::InvalidUrl(e.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => {
            return Err(CalloutError::InvalidUrl(format!(
                "scheme `{other}` is not http or https"
            )));
        }
        None => return Err(CalloutError::InvalidUrl("not an absolute URL".into())),
    }
    let Some(authority) = uri.authority().map(|a| a.as_str().to_owned()) else {
        return Err(CalloutError::InvalidUrl("no host".into()));
    };
    let method = http::Method::from_bytes(request.method.as_bytes())
        .map_err(|_| CalloutError::InvalidRequest(format!("method `{}`", request.method)))?;
    if request.body.len() > max_request_bytes {
        return Err(CalloutError::InvalidRequest(format!(
            "a body of {} bytes is past the host's message limit of {max_request_bytes}",
            request.body.len()
        )));
    }
    let timeout = match Duration::from_millis(request.timeout_ms) {
        t if t.is_zero() => max_timeout,
        t if t > max_timeout => {
            return Err(CalloutError::InvalidRequest(format!(
                "a timeout of {} ms is past the maximum of {} ms",
                request.timeout_ms,
                max_timeout.as_millis()
            )));
        }
        t => t,
    };
    let mut builder = http::Request::builder().method(method).uri(uri);
    let mut has_host = false;
    for (name, value) in &request.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| CalloutError::InvalidRequest(format!("header name `{name}`")))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| CalloutError::InvalidRequest(format!("value of header `{name}`")))?;
        has_host |= name == http::header::HOST;
        builder = builder.header(name, value);
    }
    if !has_host {
        builder = builder.header(http::header::HOST, authority);
    }
    let request = builder
        .body(Full::new(Bytes::from(request.body)))
        .map_err(|e| CalloutError::InvalidRequest(e.to_string()))?;
    Ok(Prepared {
        request,
        timeout,
        max_body,
    })
}

/// Sends `prepared` and reads its response whole, within its timeout.
async fn exchange(prepared: Prepared) -> Outcome {
    let Prepared {
        request,
        timeout,
        max_body,
    } = prepared;
    let send = async move {
        let options = wasmtime_wasi_http::RequestOptions {
            connect_timeout: Some(timeout),
            first_byte_timeout: Some(timeout),
            between_bytes_timeout: Some(timeout),
        };
        let request = request.map(|body| body.map_err(|never| match never {}));
        let (response, connection) =
            wasmtime_wasi_http::default_send_request(request, Some(options))
                .await
                .map_err(failed)?;
        let read = read_response(response, max_body);
        let mut read = std::pin::pin!(read);
        let mut connection = std::pin::pin!(connection);
        let mut driving = true;
        // The body arrives only while the connection is driven.
        loop {
            tokio::select! {
                outcome = &mut read => return outcome,
                done = &mut connection, if driving => {
                    driving = false;
                    done.map_err(failed)?;
                }
            }
        }
    };
    tokio::time::timeout(timeout, send)
        .await
        .unwrap_or(Err(CalloutError::Timeout))
}

/// Reads a response's headers and body, up to `max_body` bytes.
async fn read_response<B>(response: http::Response<B>, max_body: usize) -> Outcome
where
    B: http_body::Body<Data = Bytes, Error = wasmtime_wasi_http::Error>,
{
    let (parts, body) = response.into_parts();
    let too_large = || CalloutError::TooLarge(max_body as u64);
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body as u64) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    let mut body = std::pin::pin!(body);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(failed)?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > max_body {
                return Err(too_large());
            }
            bytes.extend_from_slice(&data);
        }
    }
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    Ok(WitResponse {
        status: parts.status.as_u16(),
        headers,
        body: bytes,
    })
}

/// An error of the exchange as the guest sees it.
fn failed(error: wasmtime_wasi_http::Error) -> CalloutError {
    use wasmtime_wasi_http::Error as E;
    match error {
        E::ConnectionTimeout | E::ConnectionReadTimeout | E::HttpResponseTimeout => {
            CalloutError::Timeout
        }
        other => CalloutError::Failed(other.to_string()),
    }
}

/// A call-out to start when its step is released; if it never is, its slot is given back.
struct Start {
    slots: Weak<Mutex<Slots>>,
    id: u64,
    /// Taken by `release`.
    prepared: Option<Prepared>,
    runtime: tokio::runtime::Handle,
    kernel: Weak<Kernel>,
    me: Address,
    stats: Arc<ActorStats>,
    /// The span that made the call-out: the news of its outcome continues that trace.
    trace: Option<TraceParent>,
}

impl Deferred for Start {
    fn release(mut self, _kernel: &Arc<Kernel>) {
        let Some(prepared) = self.prepared.take() else {
            return;
        };
        let Some(slots) = self.slots.upgrade() else {
            return;
        };
        let mut guard = lock(&slots);
        // Gone if the instance restarted or stopped meanwhile.
        let Some(slot) = guard.calls.get_mut(&self.id) else {
            return;
        };
        let run = run(
            prepared,
            self.slots.clone(),
            self.id,
            self.kernel.clone(),
            self.me.clone(),
            self.stats.clone(),
            self.trace,
        );
        *slot = Slot::Running(self.runtime.spawn(run).abort_handle());
    }
}

impl Drop for Start {
    fn drop(&mut self) {
        // Never released (its step failed): the slot is free again.
        if self.prepared.is_some()
            && let Some(slots) = self.slots.upgrade()
        {
            lock(&slots).calls.remove(&self.id);
        }
    }
}

/// Runs one call-out on the bulkhead, then files its outcome and tells the actor.
async fn run(
    prepared: Prepared,
    slots: Weak<Mutex<Slots>>,
    id: u64,
    kernel: Weak<Kernel>,
    me: Address,
    stats: Arc<ActorStats>,
    trace: Option<TraceParent>,
) {
    let outcome = exchange(prepared).await;
    if matches!(outcome, Err(CalloutError::TooLarge(_))) {
        stats.refusals.count(Quota::CalloutBody);
    }
    if let Err(error) = &outcome {
        tracing::debug!(actor = %me, id, ?error, "call-out failed");
    }
    {
        let Some(slots) = slots.upgrade() else {
            return;
        };
        let mut slots = lock(&slots);
        match slots.calls.get_mut(&id) {
            Some(slot @ Slot::Running(_)) => *slot = Slot::Done(outcome),
            // Dropped with its instance: nobody is told.
            _ => return,
        }
    }
    if let Some(kernel) = kernel.upgrade() {
        let news = Envelope::new(None, HTTP_RESPONSE_KIND, id.to_le_bytes().to_vec()).traced(trace);
        kernel.tell_host(&me, news);
    }
}

impl callouts::Host for Call<'_, Callouts> {
    fn http_request(&mut self, request: WitRequest) -> Result<u64, CalloutError> {
        if !self.actor.grants.iter().any(|g| g == GRANT) {
            return Err(CalloutError::NotGranted);
        }
        let quotas = *self.actor.quotas();
        if request.timeout_ms > 0
            && Duration::from_millis(request.timeout_ms) > quotas.max_callout_timeout
        {
            self.actor.refuse(Quota::CalloutTimeout);
        }
        let prepared = prepare(
            request,
            quotas.max_callout_timeout,
            quotas.max_callout_response_bytes,
            self.actor.kernel.config.max_message_bytes,
        )?;
        {
            let slots = lock(self.state.slots());
            if slots.closed {
                return Err(CalloutError::Failed("this actor is stopping".into()));
            }
            if slots.calls.len() >= quotas.callouts {
                self.actor.refuse(Quota::Callouts);
                return Err(CalloutError::TooMany(
                    u32::try_from(quotas.callouts).unwrap_or(u32::MAX),
                ));
            }
        }
        let runtime = self.cap.runtime().map_err(|e| {
            tracing::error!(error = %e, "the call-out thread could not start");
            CalloutError::Failed(format!("the host cannot make call-outs: {e}"))
        })?;
        let id = self.cap.next_id.fetch_add(1, Ordering::Relaxed);
        let slots = self.state.slots();
        lock(slots).calls.insert(id, Slot::Starting);
        let start = Start {
            slots: Arc::downgrade(slots),
            id,
            prepared: Some(prepared),
            runtime,
            kernel: Arc::downgrade(&self.actor.kernel),
            me: self.actor.me.clone(),
            stats: self.actor.stats.clone(),
            trace: self.actor.trace,
        };
        self.actor.step.defer(&self.actor.kernel, start);
        Ok(id)
    }

    fn http_response(&mut self, id: u64) -> Option<Outcome> {
        let mut slots = self.state.lock()?;
        if !matches!(slots.calls.get(&id), Some(Slot::Done(_))) {
            return None;
        }
        match slots.calls.remove(&id) {
            Some(Slot::Done(outcome)) => Some(outcome),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(url: &str) -> WitRequest {
        WitRequest {
            method: "GET".into(),
            url: url.into(),
            headers: vec![("accept".into(), "text/plain".into())],
            body: Vec::new(),
            timeout_ms: 0,
        }
    }

    fn check(request: WitRequest) -> Result<Prepared, CalloutError> {
        prepare(request, Duration::from_secs(60), 1 << 20, 1 << 20)
    }

    #[test]
    fn only_absolute_http_urls_are_accepted() {
        let ok = check(request("http://127.0.0.1:8080/a?b=c")).unwrap();
        assert_eq!(ok.timeout, Duration::from_secs(60), "0 is the maximum");
        assert_eq!(ok.request.headers()["host"], "127.0.0.1:8080");
        assert!(check(request("https://example.com/")).is_ok());
        for bad in [
            "ftp://example.com/",
            "file:///etc/passwd",
            "/relative",
            "::",
        ] {
            assert!(
                matches!(check(request(bad)), Err(CalloutError::InvalidUrl(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn bad_methods_headers_bodies_and_timeouts_are_refused() {
        let mut r = request("http://h/");
        r.method = "GE T".into();
        assert!(matches!(check(r), Err(CalloutError::InvalidRequest(_))));
        let mut r = request("http://h/");
        r.headers.push(("bad name".into(), "v".into()));
        assert!(matches!(check(r), Err(CalloutError::InvalidRequest(_))));
        let mut r = request("http://h/");
        r.headers.push(("x".into(), "line\nbreak".into()));
        assert!(matches!(check(r), Err(CalloutError::InvalidRequest(_))));
        let mut r = request("http://h/");
        r.body = vec![0; (1 << 20) + 1];
        assert!(matches!(check(r), Err(CalloutError::InvalidRequest(_))));
        let mut r = request("http://h/");
        r.timeout_ms = 60_001;
        assert!(matches!(check(r), Err(CalloutError::InvalidRequest(_))));
        let mut r = request("http://h/");
        r.timeout_ms = 250;
        assert_eq!(check(r).unwrap().timeout, Duration::from_millis(250));
    }

    #[test]
    fn the_news_carries_the_id() {
        assert_eq!(decode_id(&7u64.to_le_bytes()), Some(7));
        assert_eq!(decode_id(&[1, 2, 3]), None);
    }

    #[test]
    fn closing_drops_every_call_out() {
        let mut outbox = Outbox::new();
        assert!(
            outbox.lock().is_none(),
            "no slots before the first call-out"
        );
        let mut slots = lock(outbox.slots());
        slots
            .calls
            .insert(1, Slot::Done(Err(CalloutError::Timeout)));
        slots.calls.insert(2, Slot::Starting);
        slots.close();
        drop(slots);
        let slots = outbox.lock().expect("made by the first call-out");
        assert!(slots.calls.is_empty());
        assert!(slots.closed);
    }
}
