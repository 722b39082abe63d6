//! mote-otlp: exports the span of every message a Mote host handles to an OpenTelemetry
//! collector over OTLP/HTTP (protobuf), in batches. The CLI's `--otlp`, `mote-bench --otlp`
//! and the trace tests install it; the host itself depends only on the `tracing` bridge.
//!
//! ```no_run
//! # fn demo(runtime: &tokio::runtime::Runtime) -> Result<(), mote_otlp::OtlpError> {
//! use tracing_subscriber::prelude::*;
//! let (exporter, layer) = mote_otlp::Otlp::new("http://127.0.0.1:4318").start(runtime.handle())?;
//! tracing_subscriber::registry()
//!     .with(layer.with_filter(mote_otlp::message_spans()))
//!     .init();
//! // ... run the host ...
//! exporter.shutdown()?;
//! # Ok(()) }
//! ```
//!
//! Invariants:
//! - Spans are queued and exported by a thread of the SDK's own; each request runs on the
//!   tokio runtime given (hyper's client needs one). A slow or absent collector costs dropped
//!   spans, never a blocked actor: the queue is bounded (2048 spans) and drops when full.
//! - Starting an exporter turns on the host's trace propagation (process-wide, for good): the
//!   returned layer must be installed, or every message's trace is a trace of its own.

use std::fmt;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::filter::Targets;

/// The path collectors serve OTLP/HTTP traces on, added to an endpoint given without a path.
pub const TRACES_PATH: &str = "/v1/traces";

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The exporter could not be built (a malformed endpoint, say).
    #[error("cannot export traces to {endpoint}")]
    Build {
        /// The endpoint, as it would have been used.
        endpoint: String,
        /// Why.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// The spans still queued at shutdown could not all be sent.
    #[error("the last traces were not exported")]
    Shutdown(#[source] opentelemetry_sdk::error::OTelSdkError),
}

/// How to export: where to, and how often a batch leaves.
#[derive(Clone, Debug)]
pub struct Otlp {
    endpoint: String,
    batch_delay: Option<Duration>,
    timeout: Duration,
}

impl Otlp {
    /// Exports to `endpoint`, e.g. `http://127.0.0.1:4318/v1/traces` ([`TRACES_PATH`] is added
    /// to an endpoint that names no path).
    pub fn new(endpoint: &str) -> Self {
        Otlp {
            endpoint: traces_endpoint(endpoint),
            batch_delay: None,
            timeout: Duration::from_secs(10),
        }
    }

    /// How long spans wait to leave as a batch. Default: the SDK's 5 s (`OTEL_BSP_SCHEDULE_DELAY`).
    pub fn batch_delay(mut self, delay: Duration) -> Self {
        self.batch_delay = Some(delay);
        self
    }

    /// How long one export request may take. Default: 10 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Starts the exporter, whose requests run on `runtime`, and gives the `tracing` layer
    /// that feeds it (filter it with [`message_spans`]); turns on trace propagation.
    pub fn start<S>(
        self,
        runtime: &tokio::runtime::Handle,
    ) -> Result<(Exporter, OpenTelemetryLayer<S, SdkTracer>), OtlpError>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        let client = OnRuntime {
            client: opentelemetry_http::hyper::HyperClient::with_default_connector(
                self.timeout,
                None,
            ),
            runtime: runtime.clone(),
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(self.endpoint.as_str())
            .with_timeout(self.timeout)
            .with_http_client(client)
            .build()
            .map_err(|source| OtlpError::Build {
                endpoint: self.endpoint.clone(),
                source,
            })?;
        let mut batches = BatchConfigBuilder::default();
        if let Some(delay) = self.batch_delay {
            batches = batches.with_scheduled_delay(delay);
        }
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batches.build())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(Resource::builder().with_service_name("mote").build())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("mote"));
        mote_host::enable_trace_propagation();
        Ok((Exporter { provider }, layer))
    }
}

/// The filter that lets the host's message spans (and nothing else) through to the exporter.
pub fn message_spans() -> Targets {
    Targets::new().with_target(mote_host::MESSAGE_TARGET, tracing::Level::DEBUG)
}

/// A running exporter; [`Exporter::shutdown`] sends what is still queued.
pub struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    /// Sends the spans that ended so far, now; waits for the collector's answer.
    pub fn flush(&self) -> Result<(), OtlpError> {
        self.provider.force_flush().map_err(OtlpError::Shutdown)
    }

    /// Sends the spans still queued and stops. Call it while the runtime given to
    /// [`Otlp::start`] still runs, from outside it (its requests run there).
    pub fn shutdown(self) -> Result<(), OtlpError> {
        self.provider.shutdown().map_err(OtlpError::Shutdown)
    }
}

/// `endpoint` as given, or with [`TRACES_PATH`] if it names no path (`http://host:4318`).
fn traces_endpoint(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    let after_scheme = trimmed.split_once("://").map_or(trimmed, |(_, rest)| rest);
    if after_scheme.contains('/') {
        endpoint.to_owned()
    } else {
        format!("{trimmed}{TRACES_PATH}")
    }
}

/// Hyper's client, driven by a tokio runtime from the batch exporter's own thread.
struct OnRuntime {
    client: opentelemetry_http::hyper::HyperClient,
    runtime: tokio::runtime::Handle,
}

impl fmt::Debug for OnRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnRuntime")
    }
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime
            .spawn(async move { client.send_bytes(request).await })
            .await?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_without_a_path_gets_the_traces_path() {
        for (given, used) in [
            ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
            ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
            (
                "http://collector:4318/v1/traces",
                "http://collector:4318/v1/traces",
            ),
            ("http://proxy/otel/traces", "http://proxy/otel/traces"),
        ] {
            assert_eq!(traces_endpoint(given), used, "{given}");
        }
    }

    #[test]
    fn a_malformed_endpoint_is_an_error_that_names_it() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let started = Otlp::new("http://bad host:4318")
            .start::<tracing_subscriber::Registry>(runtime.handle());
        let Err(error) = started else {
            panic!("a space in the host is not a URI");
        };
        assert!(
            error.to_string().contains("http://bad host:4318"),
            "{error}"
        );
        assert!(std::error::Error::source(&error).is_some());
    }
}
