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

pub(crate) mod parent;

use opentelemetry::trace::TraceContextExt;
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub(crate) use self::parent::TraceParent;
pub use self::parent::enable_trace_propagation;
use self::parent::propagating;
use crate::address::Address;
use crate::message::Envelope;

/// The `tracing` target of the span of each handled message: what an exporting layer's filter
/// lets through (`mote::message=debug`).
pub const MESSAGE_TARGET: &str = "mote::message";

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
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

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
