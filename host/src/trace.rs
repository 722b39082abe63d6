//! Traces that follow a message: one `tracing` span per handled message, and the trace carried
//! on from a message to those sent while handling it.
//!
//! ```text
//! outside tell/ask ──> cell: span "receive" (parent: the envelope's trace, else none: a root)
//!                         │ the guest's sends, asks, forwards and timers are stamped with
//!                         v this span as their parent (ActorCore::trace)
//!                      envelope.trace ──> the next cell's span, a child of this one
//! ```
//!
//! The spans are plain `tracing` spans (target [`MESSAGE_TARGET`], level DEBUG); an embedder or
//! the CLI exports them by installing a `tracing-opentelemetry` layer and calling
//! [`enable_trace_propagation`]. The parent travels inside the host as a [`TraceParent`], a
//! value of our own, so that the vocabulary carries no OpenTelemetry type.
//!
//! Invariants:
//! - Propagation off (the default): a handled message costs one relaxed load; no span is made,
//!   no envelope is stamped and no OpenTelemetry context is built.
//! - A message's span has exactly the parent its envelope names (never the cell's own span or
//!   whatever span happens to be current), so a long-lived actor is not the root of every trace.
//! - A valid context is carried on with its sampling decision, so that a collector's
//!   parent-based sampler (`OTEL_TRACES_SAMPLER=parentbased_traceidratio`) keeps or drops a
//!   whole trace, never a fragment of one.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::address::Address;
use crate::message::Envelope;

/// The `tracing` target of the span of each handled message: what an exporting layer's filter
/// lets through (`mote::message=debug`).
pub const MESSAGE_TARGET: &str = "mote::message";

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
fn propagating() -> bool {
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
    fn of(context: &SpanContext) -> Option<Self> {
        context.is_valid().then(|| TraceParent {
            trace_id: context.trace_id().to_bytes(),
            span_id: context.span_id().to_bytes(),
            sampled: context.is_sampled(),
        })
    }

    /// The OpenTelemetry context whose (remote) span is this parent.
    fn context(self) -> opentelemetry::Context {
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

/// The span of `actor` handling `envelope`, a child of the span the envelope was sent from;
/// from then on the envelope names this span, the parent of what the handling sends. Traces
/// off, it is `Span::none()` and the envelope is left alone: a span never entered and seen by no
/// OpenTelemetry layer would show nowhere.
#[inline]
pub(crate) fn handling(actor: &Address, module: &str, envelope: &mut Envelope) -> tracing::Span {
    if !propagating() {
        return tracing::Span::none();
    }
    traced_handling(actor, module, envelope)
}

/// [`handling`] with traces on. A span the exporting layer's filter leaves out names no parent:
/// the envelope keeps its own, and the trace goes on past this actor.
#[inline(never)]
fn traced_handling(actor: &Address, module: &str, envelope: &mut Envelope) -> tracing::Span {
    let span = tracing::debug_span!(
        target: MESSAGE_TARGET,
        parent: None,
        "receive",
        otel.name = %envelope.kind,
        otel.kind = "consumer",
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
        actor.path = %actor.path,
        actor.incarnation = actor.incarnation,
        actor.module = module,
        message.kind = %envelope.kind,
        message.bytes = envelope.body.len(),
    );
    if span.is_disabled() {
        return span;
    }
    if let Some(parent) = envelope.trace() {
        // Fails only without an OpenTelemetry layer: then there is no trace to continue.
        let _ = span.set_parent(parent.context());
    }
    envelope.set_trace(TraceParent::of(span.context().span().span_context()));
    span
}

/// Marks a message's span as failed, with the failure's text.
pub(crate) fn failed(span: &tracing::Span, failure: &dyn std::fmt::Display) {
    if !span.is_disabled() {
        span.record("otel.status_code", "error");
        span.record("otel.status_description", tracing::field::display(failure));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parent_keeps_its_ids_through_an_opentelemetry_context() {
        let trace = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210_u128;
        let context = SpanContext::new(
            TraceId::from(trace),
            SpanId::from(42),
            TraceFlags::SAMPLED,
            false,
            TraceState::NONE,
        );
        let parent = TraceParent::of(&context).expect("a valid sampled context");
        let back = parent.context();
        let back = back.span();
        assert_eq!(back.span_context().trace_id(), TraceId::from(trace));
        assert_eq!(back.span_context().span_id(), SpanId::from(42));
        assert!(back.span_context().is_sampled());
    }

    #[test]
    fn an_unsampled_parent_stays_unsampled_and_an_invalid_one_is_none() {
        let unsampled = SpanContext::new(
            TraceId::from(7),
            SpanId::from(9),
            TraceFlags::NOT_SAMPLED,
            false,
            TraceState::NONE,
        );
        let parent = TraceParent::of(&unsampled).expect("a valid context");
        assert!(!parent.context().span().span_context().is_sampled());
        assert_eq!(TraceParent::of(&SpanContext::empty_context()), None);
    }

    #[test]
    fn an_envelope_with_traces_off_grows_by_one_pointer() {
        assert_eq!(std::mem::size_of::<Option<TraceParent>>(), 25);
        // 96 bytes before traces.
        assert_eq!(std::mem::size_of::<Envelope>(), 104);
    }

    #[test]
    fn an_envelopes_trace_is_set_replaced_and_cleared() {
        let context = |span: u64| {
            let context = SpanContext::new(
                TraceId::from(1),
                SpanId::from(span),
                TraceFlags::SAMPLED,
                false,
                TraceState::NONE,
            );
            TraceParent::of(&context)
        };
        let mut envelope = Envelope::new(None, "k", Vec::new()).traced(context(2));
        assert_eq!(envelope.trace(), context(2));
        envelope.set_trace(context(3));
        assert_eq!(envelope.trace(), context(3));
        envelope.set_trace(None);
        assert_eq!(envelope.trace(), None);
    }
}
