//! A loopback OpenTelemetry collector for the trace tests: it serves OTLP/HTTP (protobuf) on
//! `127.0.0.1:<free port>`, decodes each `ExportTraceServiceRequest` with the protocol's own
//! prost types, and keeps every span it received, for a test to wait on with a deadline.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;
use tokio::sync::watch;

use crate::DEADLINE;

/// One span as a collector received it.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportedSpan {
    /// The trace id.
    pub trace_id: u128,
    /// The span id.
    pub span_id: u64,
    /// The parent's span id, `None` for a root span.
    pub parent: Option<u64>,
    /// The span's name.
    pub name: String,
    /// Its attributes, each value as text.
    pub attributes: HashMap<String, String>,
    /// Whether its status is an error.
    pub error: bool,
}

impl ExportedSpan {
    /// An attribute's value as text, if it has it.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }

    /// The handling actor's path (`actor.path`), or "" for a span that is not a message's.
    pub fn actor(&self) -> &str {
        self.attribute("actor.path").unwrap_or("")
    }
}

/// A collector listening on loopback; it stops with the runtime it was started on.
pub struct Collector {
    address: SocketAddr,
    spans: watch::Receiver<Vec<ExportedSpan>>,
}

impl Collector {
    /// Binds a free loopback port and serves it on the current tokio runtime.
    pub async fn start() -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let address = listener.local_addr().expect("local address");
        let (sender, spans) = watch::channel(Vec::new());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let sender = sender.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let sender = sender.clone();
                        async move { Ok::<_, Infallible>(receive(&sender, request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Collector { address, spans }
    }

    /// The OTLP/HTTP traces endpoint: `http://127.0.0.1:<port>/v1/traces`.
    pub fn endpoint(&self) -> String {
        format!("http://{}/v1/traces", self.address)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ExportedSpan> {
        self.spans.borrow().clone()
    }

    /// Waits until the spans received satisfy `done`, or panics after [`DEADLINE`] with what
    /// arrived.
    pub async fn wait_for(&self, what: &str, done: impl FnMut(&Vec<ExportedSpan>) -> bool) {
        let mut spans = self.spans.clone();
        if tokio::time::timeout(DEADLINE, spans.wait_for(done))
            .await
            .is_err()
        {
            panic!(
                "the collector did not get {what} within {DEADLINE:?}; it has {:#?}",
                self.spans()
            );
        }
    }
}

/// Decodes one export request and keeps its spans; anything else gets a 4xx.
async fn receive(
    spans: &watch::Sender<Vec<ExportedSpan>>,
    request: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    if request.uri().path() != "/v1/traces" {
        return status(StatusCode::NOT_FOUND);
    }
    let Ok(body) = request.into_body().collect().await else {
        return status(StatusCode::BAD_REQUEST);
    };
    let Ok(export) = ExportTraceServiceRequest::decode(body.to_bytes()) else {
        return status(StatusCode::BAD_REQUEST);
    };
    let received: Vec<ExportedSpan> = export
        .resource_spans
        .into_iter()
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .map(|span| ExportedSpan {
            trace_id: u128::from_be_bytes(span.trace_id.try_into().unwrap_or_default()),
            span_id: u64::from_be_bytes(span.span_id.try_into().unwrap_or_default()),
            parent: span
                .parent_span_id
                .try_into()
                .ok()
                .map(u64::from_be_bytes)
                .filter(|id| *id != 0),
            name: span.name,
            attributes: span
                .attributes
                .into_iter()
                .map(|kv| (kv.key, text(kv.value.and_then(|v| v.value))))
                .collect(),
            // Status code 2 is STATUS_CODE_ERROR.
            error: span.status.is_some_and(|s| s.code == 2),
        })
        .collect();
    spans.send_modify(|all| all.extend(received));
    let reply = ExportTraceServiceResponse::default().encode_to_vec();
    let mut response = Response::new(Full::new(Bytes::from(reply)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/x-protobuf"),
    );
    response
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = code;
    response
}

/// An attribute value as text.
fn text(value: Option<Value>) -> String {
    match value {
        Some(Value::StringValue(s)) => s,
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
