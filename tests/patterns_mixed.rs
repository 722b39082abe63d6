//! The patterns together across languages, as the issue's user story has it: a pipeline of
//! three stages written in Rust, Python and JavaScript, its output throttled to 10 messages a
//! second, and results gathered with a deadline by the reaper, from that pipeline and from a
//! pool of one-shot service workers.

use std::time::{Duration, Instant};

use mote_example_protocol::Square;
use mote_guest::patterns::pipeline::{self, Stage};
use mote_guest::patterns::reaper::{self, Gather, Gathered, Reduce, Reduced};
use mote_guest::patterns::{init, service_manager, throttle};
use mote_host::ActorSystem;
use mote_tests::*;
use serde_json::{Value, json};

/// The mixed pipeline: Rust adds 1, Python doubles, JavaScript adds 3.
fn mixed_stages() -> [Stage; 3] {
    [
        Stage::json("stage", json!({"add": 1})),
        Stage::json("py_stage", json!({"mul": 2})),
        Stage::json("js_stage", json!({"add": 3})),
    ]
}

fn body(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("JSON")
}

fn system() -> ActorSystem {
    system_with_patterns(
        &["pipeline", "throttle", "reaper", "service-manager"],
        &["stage", "py_stage", "js_stage", "echo_worker", "gate"],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_of_rust_python_and_js_stages_feeds_a_throttle_in_order_at_its_rate() {
    let system = system();
    let mut sink = system.probe("sink").unwrap();
    let slow = throttle::Config {
        burst: Some(1),
        ..throttle::Config::per_second("/system/sink", 10)
    };
    system
        .spawn("slow", throttle::MODULE, &init(&slow))
        .unwrap();
    let config = pipeline::Config {
        sink: Some("/user/slow".into()),
        ..pipeline::Config::of(mixed_stages())
    };
    system.spawn("p", pipeline::MODULE, &init(&config)).unwrap();
    let began = Instant::now();
    for n in 0..5 {
        system
            .tell("/user/p", "number", body(&json!({"value": n, "tag": n})))
            .unwrap();
    }
    for n in 0..5 {
        let envelope = next(&mut sink).await;
        assert_eq!(envelope.kind, "number", "the kind passes every stage");
        let out: Value = serde_json::from_slice(&envelope.body).unwrap();
        assert_eq!(
            out,
            json!({"value": (n + 1) * 2 + 3, "tag": n}),
            "each stage once, in order, other fields untouched"
        );
    }
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(400),
        "five outputs at 10/s with a burst of 1 passed in {took:?}"
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reaper_gathers_from_the_mixed_pipeline_and_from_service_workers_by_its_deadline() {
    let system = system();
    system
        .spawn(
            "q",
            pipeline::MODULE,
            &init(&pipeline::Config::of(mixed_stages())),
        )
        .unwrap();
    // A closed gate keeps every request and never answers.
    system.spawn("never", "gate", b"/system/nobody").unwrap();
    let manager = service_manager::Config::new("echo_worker");
    system
        .spawn("sm", service_manager::MODULE, &init(&manager))
        .unwrap();
    system
        .spawn("r", reaper::MODULE, &init(&reaper::Config::default()))
        .unwrap();

    // The pipeline asked three times and the gate once, with a 1.5 s deadline: the three
    // answers come back, the gate times out, and the answer waits for the deadline.
    let number = reaper::Payload {
        body: Some(json!({"value": 10})),
        ..reaper::Payload::default()
    };
    let gather = Gather {
        targets: vec![
            "/user/q".into(),
            "/user/q".into(),
            "/user/q".into(),
            "/user/never".into(),
        ],
        kind: "number".into(),
        payload: number,
        deadline_ms: Some(1500),
        want: None,
        reduce: None,
    };
    let began = Instant::now();
    let gathered: Gathered = ask_as(&system, "/user/r", &gather).await;
    assert!(began.elapsed() >= Duration::from_millis(1500));
    assert_eq!(gathered.replies.len(), 3, "{gathered:?}");
    for reply in &gathered.replies {
        assert_eq!(reply.from.split('#').next(), Some("/user/q"));
        assert_eq!(reply.payload.json(), Some(&json!({"value": 25})));
    }
    assert_eq!(gathered.timed_out, vec!["/user/never".to_string()]);
    assert!(!gathered.complete);

    // The service manager's pool: three one-shot workers, their squares summed.
    let squares = Gather::new(["/user/sm"; 3], &Square { n: 4 }, 20_000)
        .unwrap()
        .reduce(Reduce::sum("n"));
    let reduced: Reduced = ask_as(&system, "/user/r", &squares).await;
    assert_eq!((reduced.value, reduced.from), (json!(48), 3));
    assert!(reduced.complete);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_javascript_actors_build_and_use_the_patterns_through_their_sdks() {
    let system = system_with_patterns(
        &["pipeline", "throttle", "reaper", "service-manager"],
        &[
            "stage",
            "py_stage",
            "js_stage",
            "echo_worker",
            "py_patterns",
            "js_patterns",
        ],
    );
    let mut probe = system.probe("p").unwrap();
    let report = body(&json!({"report": "/system/p"}));
    // Python: a throttle and a three-language pipeline into it, configured with mote.patterns.
    system.spawn("py", "py_patterns", &report).unwrap();
    system
        .tell("/user/py", "run", body(&json!({"n": 3})))
        .unwrap();
    for n in 0..3 {
        let envelope = next(&mut probe).await;
        assert_eq!(envelope.kind, "number");
        let out: Value = serde_json::from_slice(&envelope.body).unwrap();
        assert_eq!(out, json!({"value": (n + 1) * 2 + 3}));
    }
    // JavaScript: a reaper over a service manager's workers, spoken with mote/patterns.js.
    system.spawn("js", "js_patterns", &report).unwrap();
    system
        .tell("/user/js", "gather", body(&json!({"n": 5})))
        .unwrap();
    let mut reports = Vec::new();
    while reports.len() < 2 {
        let envelope = next(&mut probe).await;
        let report: Value = serde_json::from_slice(&envelope.body).unwrap();
        reports.push((report["label"].clone(), report["value"].clone()));
    }
    assert_eq!(
        reports,
        vec![(json!("answered"), json!(3)), (json!("squares"), json!(75))]
    );
    system.shutdown().await.unwrap();
}
