//! The trace parent a message carries inside the host, and the switch that turns carrying it
//! on. A module of its own so that the vocabulary (`message`) can name it without depending on
//! how spans are made.
//!
//! Invariants:
//! - A parent is only ever made from a valid span context, and keeps its sampling decision.
//! - Off (the default), [`TraceParent::current`] costs one relaxed load and builds nothing.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Set once a process exports traces; read before any context is captured.
static PROPAGATE: AtomicBool = AtomicBool::new(false);

/// Carries the trace of a handled message on to the messages it sends, process-wide. Call it
/// after installing a `tracing-opentelemetry` layer that lets [`MESSAGE_TARGET`] spans through;
/// without it every handled message starts a trace of its own. It cannot be switched off.
pub fn enable_trace_propagation() {
    PROPAGATE.store(true, Ordering::Relaxed);
}

/// Whether traces are carried on (one relaxed load: the whole cost of tracing when it is off).
#[inline]
pub(crate) fn propagating() -> bool {
    PROPAGATE.load(Ordering::Relaxed)
}

/// The span a message was sent from: an OpenTelemetry span context, as plain bytes.
///
/// Bytes, not integers: 25 bytes, aligned to 1, whose flag's spare values make `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TraceParent {
    /// The trace id, big-endian as OpenTelemetry has it.
    trace_id: [u8; 16],
    /// The span id, big-endian; never zero.
    span_id: [u8; 8],
    /// Whether the trace is sampled (exported).
    sampled: bool,
}

impl TraceParent {
    /// The parent for a valid span context; `None` otherwise.
    pub(super) fn of(context: &SpanContext) -> Option<Self> {
        context.is_valid().then(|| TraceParent {
            trace_id: context.trace_id().to_bytes(),
            span_id: context.span_id().to_bytes(),
            sampled: context.is_sampled(),
        })
    }

    /// Its 25 bytes, as it crosses to another node.
    pub(crate) fn to_bytes(self) -> [u8; 25] {
        let mut out = [0; 25];
        out[..16].copy_from_slice(&self.trace_id);
        out[16..24].copy_from_slice(&self.span_id);
        out[24] = u8::from(self.sampled);
        out
    }

    /// The parent [`TraceParent::to_bytes`] wrote; `None` for bytes no valid parent has.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; 25] = bytes.try_into().ok()?;
        let parent = TraceParent {
            trace_id: bytes[..16].try_into().ok()?,
            span_id: bytes[16..24].try_into().ok()?,
            sampled: bytes[24] == 1,
        };
        (parent.trace_id != [0; 16] && parent.span_id != [0; 8] && bytes[24] <= 1).then_some(parent)
    }

    /// The OpenTelemetry context whose (remote) span is this parent.
    pub(super) fn context(self) -> opentelemetry::Context {
        let span = SpanContext::new(
            TraceId::from_bytes(self.trace_id),
            SpanId::from_bytes(self.span_id),
            TraceFlags::default().with_sampled(self.sampled),
            true,
            TraceState::NONE,
        );
        opentelemetry::Context::new().with_remote_span_context(span)
    }

    /// The span current on this thread, for a message sent from outside the system (an
    /// embedder's request handler, say); `None` unless traces are carried on.
    #[inline]
    pub(crate) fn current() -> Option<Self> {
        if !propagating() {
            return None;
        }
        Self::current_span()
    }

    #[inline(never)]
    fn current_span() -> Option<Self> {
        Self::of(tracing::Span::current().context().span().span_context())
    }
}
