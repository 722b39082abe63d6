//! HTTP call-outs (Akka `pipeTo`): the [`Context`] method wrapping the `callouts` imports of
//! the WIT contract. [`Context::http_request`] starts a request and returns its id at once; the
//! actor goes on handling messages, and when the exchange ends the outcome reaches
//! [`Actor::http_response`](crate::Actor::http_response) with that id. Only modules granted
//! `wasi:http` may start call-outs.

use std::time::Duration;

use crate::bindings::mote::actor::callouts;
pub use crate::bindings::mote::actor::callouts::{
    CalloutError, Request as HttpRequest, Response as HttpResponse,
};
use crate::context::Context;

impl HttpRequest {
    /// A request with `method` for `url`, no headers, an empty body and the host's maximum
    /// timeout.
    pub fn new(method: &str, url: &str) -> Self {
        HttpRequest {
            method: method.to_string(),
            url: url.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout_ms: 0,
        }
    }

    /// A `GET` of `url`.
    pub fn get(url: &str) -> Self {
        Self::new("GET", url)
    }

    /// A `POST` of `body` to `url`.
    pub fn post(url: &str, body: impl Into<Vec<u8>>) -> Self {
        Self::new("POST", url).body(body)
    }

    /// This request with one more header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// This request with `body`.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// This request with a timeout for the whole exchange (the host refuses one past its
    /// maximum).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout_ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        self
    }
}

impl HttpResponse {
    /// The value of the first header named `name` (case-insensitive), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl Context {
    /// Starts an HTTP call-out and returns its id at once; the response (or error) arrives
    /// later at [`Actor::http_response`](crate::Actor::http_response) with this id, while this
    /// actor goes on handling messages. Refused, with the host's typed [`CalloutError`]
    /// (which `?` turns into an [`Error`](crate::Error)), if the module is not granted
    /// `wasi:http`, for a URL that is not `http://` or `https://`, or past this actor's quota
    /// of pending call-outs.
    pub fn http_request(&self, request: &HttpRequest) -> core::result::Result<u64, CalloutError> {
        crate::outbox::flush();
        callouts::http_request(request)
    }
}

/// Takes the outcome of call-out `id` from the host (once).
pub(crate) fn take(id: u64) -> Option<core::result::Result<HttpResponse, CalloutError>> {
    crate::outbox::flush();
    callouts::http_response(id)
}
