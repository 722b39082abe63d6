//! Traces: each handled message is a span carrying the actor's path, incarnation and the
//! message's kind, and a message sent while handling another continues its trace, across
//! actors, asks (request, reply and timeout) and timers. The spans are exported over OTLP/HTTP,
//! as `mote run --otlp` does, to a collector of the test's own on loopback.
//!
//! The subscriber is process-wide, so this binary holds the trace tests only; they share one
//! exporter and one collector, and tell their spans apart by actor path.

use std::sync::OnceLock;
use std::time::Duration;

use mote_example_protocol::{Asking, Counter, Timer};
use mote_guest::Message;
use mote_tests::collector::{Collector, ExportedSpan};
use mote_tests::{report_labelled, system_with, tell};
use tracing_subscriber::prelude::*;

/// The exporter and the collector every test of this binary shares.
struct Exporting {
    collector: Collector,
    /// Runs the collector and the exporter's requests; kept for the life of the process.
    _runtime: tokio::runtime::Runtime,
    _exporter: mote_otlp::Exporter,
}

/// Installs, once, a subscriber whose OpenTelemetry layer exports message spans (and this
/// test's own) in small batches to the loopback collector; propagation is on from then.
fn exporting() -> &'static Exporting {
    static EXPORTING: OnceLock<Exporting> = OnceLock::new();
    EXPORTING.get_or_init(|| {
        // A runtime of its own, built outside the test's: the collector outlives each test.
        let (runtime, collector) = std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("the collector's runtime");
            let collector = runtime.block_on(Collector::start());
            (runtime, collector)
        })
        .join()
        .expect("start the collector");
        let (exporter, layer) = mote_otlp::Otlp::new(&collector.endpoint())
            .batch_delay(Duration::from_millis(20))
            .start(runtime.handle())
            .expect("an OTLP/HTTP exporter");
        let spans = mote_otlp::message_spans().with_target(module_path!(), tracing::Level::INFO);
        tracing_subscriber::registry()
            .with(layer.with_filter(spans))
            .init();
        Exporting {
            collector,
            _runtime: runtime,
            _exporter: exporter,
        }
    })
}

/// The spans handled by `actor`, in the order they started (span ids are random, so by
/// parentage: the collector's order is the order the batches arrived in).
fn handled_by<'a>(spans: &'a [ExportedSpan], actor: &str) -> Vec<&'a ExportedSpan> {
    spans.iter().filter(|s| s.actor() == actor).collect()
}

/// The one span handled by `actor` whose message has kind `kind`.
fn one<'a>(spans: &'a [ExportedSpan], actor: &str, kind: &str) -> &'a ExportedSpan {
    let found: Vec<_> = handled_by(spans, actor)
        .into_iter()
        .filter(|s| s.attribute("message.kind") == Some(kind))
        .collect();
    assert_eq!(found.len(), 1, "one {kind} span at {actor} in {spans:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_follows_a_request_across_three_actors_and_an_ask() {
    let exporting = exporting();
    let system = system_with(&["asker", "forwarder"]);
    let mut probe = system.probe("chain-report").unwrap();
    let asker = system
        .spawn("chain-a", "asker", b"/system/chain-report")
        .unwrap();
    let last = system.spawn("chain-c", "forwarder", b"2").unwrap();
    let first = system
        .spawn("chain-b", "forwarder", b"1 /user/chain-c")
        .unwrap();
    let ask = Asking::Ask {
        path: first.path.to_string(),
        incarnation: first.incarnation,
        timeout_ms: 30_000,
        get: true,
    };
    // The request comes from an embedder's span: the trace starts there.
    let request = tracing::info_span!("request");
    request.in_scope(|| tell(&system, "/user/chain-a", &ask));
    drop(request);
    // A asks B, B forwards the ask to C, C replies to the ask, the reply reaches A.
    assert_eq!(report_labelled(&mut probe, "answer").await.value, 2);

    let (a, b, c) = (asker.path.as_str(), first.path.as_str(), last.path.as_str());
    exporting
        .collector
        .wait_for("the request's span and four message spans", |spans| {
            spans.iter().any(|s| s.name == "request")
                && handled_by(spans, a).len() == 2
                && handled_by(spans, b).len() == 1
                && handled_by(spans, c).len() == 1
        })
        .await;
    let spans = exporting.collector.spans();
    let root = spans.iter().find(|s| s.name == "request").unwrap();
    let at_a = one(&spans, a, Asking::KIND);
    let at_b = one(&spans, b, Counter::KIND);
    let at_c = one(&spans, c, Counter::KIND);
    let reply = handled_by(&spans, a)
        .into_iter()
        .find(|s| s.span_id != at_a.span_id)
        .unwrap();
    for span in [at_a, at_b, at_c, reply] {
        assert_eq!(span.trace_id, root.trace_id, "one trace: {span:#?}");
    }
    assert_eq!(
        at_a.parent,
        Some(root.span_id),
        "A continues the caller's span"
    );
    assert_eq!(at_b.parent, Some(at_a.span_id), "B's ask came from A");
    assert_eq!(
        at_c.parent,
        Some(at_b.span_id),
        "C's message was forwarded by B"
    );
    assert_eq!(reply.parent, Some(at_c.span_id), "the reply came from C");

    // What a span carries: the actor, its incarnation, the message's kind as its name.
    assert_eq!(at_b.name, Counter::KIND);
    assert_eq!(
        at_b.attribute("actor.incarnation"),
        Some(first.incarnation.to_string().as_str())
    );
    assert_eq!(at_b.attribute("actor.module"), Some("forwarder"));
    assert_eq!(at_a.attribute("actor.path"), Some(a));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_fires_in_the_trace_of_the_message_that_scheduled_it() {
    let exporting = exporting();
    let system = system_with(&["ticker"]);
    let mut probe = system.probe("timer-report").unwrap();
    let ticker = system
        .spawn("timer-t", "ticker", b"/system/timer-report")
        .unwrap();
    tell(
        &system,
        "/user/timer-t",
        &Timer::Once {
            delay_ms: 5,
            tag: 9,
        },
    );
    assert_eq!(report_labelled(&mut probe, "fired").await.value, 9);

    let t = ticker.path.as_str();
    exporting
        .collector
        .wait_for("the order's span and the firing's", |spans| {
            handled_by(spans, t).len() == 2
        })
        .await;
    let spans = exporting.collector.spans();
    let handled = handled_by(&spans, t);
    let order = handled.iter().find(|s| s.parent.is_none());
    let fired = handled.iter().find(|s| s.parent.is_some());
    let (Some(order), Some(fired)) = (order, fired) else {
        panic!("an order (a root) and a firing (its child) at {t}: {handled:#?}");
    };
    assert_eq!(fired.trace_id, order.trace_id);
    assert_eq!(fired.parent, Some(order.span_id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_that_times_out_continues_the_askers_trace() {
    let exporting = exporting();
    let system = system_with(&["asker", "ticker"]);
    let mut probe = system.probe("timeout-report").unwrap();
    let asker = system
        .spawn("timeout-a", "asker", b"/system/timeout-report")
        .unwrap();
    let ticker = system
        .spawn("timeout-t", "ticker", b"/system/timeout-report")
        .unwrap();
    // The ticker answers after three times the deadline: the asker hears of the timeout.
    let ask = Asking::Ask {
        path: ticker.path.to_string(),
        incarnation: ticker.incarnation,
        timeout_ms: 50,
        get: false,
    };
    tell(&system, "/user/timeout-a", &ask);
    report_labelled(&mut probe, "timeout").await;

    let a = asker.path.as_str();
    exporting
        .collector
        .wait_for("the ask's span and the timeout's", |spans| {
            handled_by(spans, a).len() == 2
        })
        .await;
    let spans = exporting.collector.spans();
    let asked = one(&spans, a, Asking::KIND);
    let timeout = one(&spans, a, mote_host::ASK_TIMEOUT_KIND);
    assert_eq!(timeout.trace_id, asked.trace_id);
    assert_eq!(timeout.parent, Some(asked.span_id));
}
