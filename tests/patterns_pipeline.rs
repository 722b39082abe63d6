//! The `pipeline` and `pipeline-builder` pattern components, driven through their JSON
//! protocol: stages are the `stage` example actor (JSON `{"value": n}` in, `f(n)` out) and the
//! crasher, spawned from the pipeline's JSON `init`.

use mote_example_protocol::Crash;
use mote_guest::patterns::pipeline::{self, Failed, GetStatus, Stage, Status};
use mote_guest::patterns::{init, pipeline_builder as builder};
use mote_guest::serde::{Deserialize, Serialize};
use mote_host::{ActorSystem, DeadLetterReason, Directive, Envelope};
use mote_tests::*;
use serde_json::json;

/// What the `stage` actors transform: `{"value": n}`, any kind (here `n`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(crate = "mote_guest::serde")]
struct Value {
    value: i64,
}
mote_guest::json_message!(Value = "n");

/// A `stage` actor spawned with this JSON init.
fn stage(init: serde_json::Value) -> Stage {
    Stage::json("stage", init)
}

/// Spawns the pipeline `/user/<name>` of `config`.
fn spawn_pipeline(system: &ActorSystem, name: &str, config: &pipeline::Config) {
    system.spawn(name, "pipeline", &init(config)).unwrap();
}

/// `envelope` read as an output `Value`, or a panic naming what came instead.
fn value_of(envelope: &Envelope) -> i64 {
    let value: Value = mote_guest::decode(&envelope.kind, &envelope.body)
        .unwrap_or_else(|e| panic!("not an output {envelope:?}: {e}"));
    value.value
}

/// `envelope` read as a `pipeline.failed`.
fn failure_of(envelope: &Envelope) -> Failed {
    mote_guest::decode(&envelope.kind, &envelope.body)
        .unwrap_or_else(|e| panic!("not a pipeline.failed {envelope:?}: {e}"))
}

async fn status(system: &ActorSystem, path: &str) -> Status {
    ask_as(system, path, &GetStatus {}).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_stage_pipeline_transforms_an_input_through_every_stage_in_order_and_answers_the_asker()
 {
    let system = system_with_patterns(&["pipeline"], &["stage"]);
    let config = pipeline::Config::of([
        stage(json!({"add": 1})),
        stage(json!({"mul": 10})),
        stage(json!({"add": 3})),
    ]);
    spawn_pipeline(&system, "p", &config);
    // (4 + 1) * 10 + 3: each stage once, in order.
    let out: Value = ask_as(&system, "/user/p", &Value { value: 4 }).await;
    assert_eq!(out, Value { value: 53 });
    // A sender that tells gets the output told back, from the pipeline.
    let mut source = system.probe("source").unwrap();
    tell_from(&source, "/user/p", &Value { value: 0 });
    let envelope = next(&mut source).await;
    assert_eq!(value_of(&envelope), 13);
    assert_eq!(
        envelope.sender.as_ref().map(|s| s.path.as_str()),
        Some("/user/p")
    );
    let status = status(&system, "/user/p").await;
    assert_eq!(
        (status.stages, status.completed, status.in_flight),
        (3, 2, 0)
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_leave_in_input_order_even_when_stages_answer_out_of_order() {
    let system = system_with_patterns(&["pipeline"], &["stage"]);
    // Stage 0 answers input 3 after input 4, stage 2 answers 7 (15 by then) after 8 (17).
    let config = pipeline::Config::of([
        stage(json!({"defer_on": 3})),
        stage(json!({"mul": 2})),
        stage(json!({"add": 1, "defer_on": 14})),
    ]);
    spawn_pipeline(&system, "p", &config);
    let mut source = system.probe("source").unwrap();
    for n in 0..200 {
        tell_from(&source, "/user/p", &Value { value: n });
    }
    for n in 0..200 {
        assert_eq!(
            value_of(&next(&mut source).await),
            2 * n + 1,
            "output {n} in order"
        );
    }
    let status = status(&system, "/user/p").await;
    assert_eq!((status.completed, status.in_flight), (200, 0));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_that_traps_fails_that_input_with_pipeline_failed_and_is_restarted_for_the_next() {
    let system = system_with_patterns(&["pipeline"], &["stage"]);
    let mut decisions = system.subscribe_supervision();
    // Stage 1 traps on 6, that is on the input 5.
    let config = pipeline::Config::of([
        stage(json!({"add": 1})),
        stage(json!({"mul": 2, "trap_on": 6})),
        stage(json!({})),
    ]);
    spawn_pipeline(&system, "p", &config);
    let mut source = system.probe("source").unwrap();
    for n in [4, 5, 6, 7] {
        tell_from(&source, "/user/p", &Value { value: n });
    }
    assert_eq!(value_of(&next(&mut source).await), 10);
    let failed = failure_of(&next(&mut source).await);
    assert_eq!((failed.input, failed.stage), (2, 1));
    assert!(
        failed.reason.starts_with("stage 1 failed (trap)"),
        "{failed:?}"
    );
    assert_eq!(
        value_of(&next(&mut source).await),
        14,
        "the stage was restarted"
    );
    assert_eq!(value_of(&next(&mut source).await), 16);
    let decision = next_decision(&mut decisions).await;
    assert_eq!(decision.child.path.as_str(), "/user/p/stage-1");
    assert_eq!(decision.directive, Directive::Restart);
    let status = status(&system, "/user/p").await;
    assert_eq!(
        (status.completed, status.failed, status.in_flight),
        (3, 1, 0)
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crasher_stages_pass_echoes_on_and_a_panic_fails_only_its_own_input() {
    let system = system_with_patterns(&["pipeline"], &["crasher"]);
    // Any actor that replies is a stage: the crasher answers `Echo(n)` with `Echo(n)`.
    let config = pipeline::Config::of([Stage::new("crasher", ""), Stage::new("crasher", "")]);
    spawn_pipeline(&system, "p", &config);
    let mut source = system.probe("source").unwrap();
    tell_from(&source, "/user/p", &Crash::Echo(1));
    tell_from(&source, "/user/p", &Crash::Panic);
    tell_from(&source, "/user/p", &Crash::Echo(2));
    assert_eq!(next_as::<Crash>(&mut source).await, Crash::Echo(1));
    let failed = failure_of(&next(&mut source).await);
    assert_eq!((failed.input, failed.stage), (2, 0));
    assert!(
        failed.reason.starts_with("stage 0 failed (trap)"),
        "{failed:?}"
    );
    assert_eq!(next_as::<Crash>(&mut source).await, Crash::Echo(2));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_that_does_not_answer_by_its_deadline_fails_that_input_and_later_inputs_pass() {
    let system = system_with_patterns(&["pipeline"], &["stage"]);
    let config = pipeline::Config {
        stage_timeout_ms: 200,
        ..pipeline::Config::of([stage(json!({"add": 1})), stage(json!({"silent_on": 6}))])
    };
    spawn_pipeline(&system, "p", &config);
    let mut source = system.probe("source").unwrap();
    for n in [5, 6] {
        tell_from(&source, "/user/p", &Value { value: n });
    }
    // The second input finishes first and waits for the first's outcome.
    let failed = failure_of(&next(&mut source).await);
    assert_eq!((failed.input, failed.stage), (1, 1));
    assert_eq!(failed.reason, "stage 1 did not answer within 200 ms");
    assert_eq!(value_of(&next(&mut source).await), 7);
    // The stage lives on: the next input passes too.
    let out: Value = ask_as(&system, "/user/p", &Value { value: 1 }).await;
    assert_eq!(out.value, 2);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_past_max_in_flight_are_refused_as_dead_letters() {
    let system = system_with_patterns(&["pipeline"], &["stage"]);
    let mut letters = system.subscribe_dead_letters();
    let config = pipeline::Config {
        max_in_flight: 2,
        stage_timeout_ms: 60_000,
        ..pipeline::Config::of([stage(json!({"silent_on": 1}))])
    };
    spawn_pipeline(&system, "p", &config);
    for _ in 0..3 {
        tell(&system, "/user/p", &Value { value: 1 });
    }
    let letter = tokio::time::timeout(DEADLINE, letters.recv())
        .await
        .expect("a dead letter in time")
        .expect("the dead-letter stream");
    assert_eq!(letter.reason, DeadLetterReason::Rejected);
    assert!(letter.target.starts_with("/user/p#"), "{}", letter.target);
    assert_eq!(letter.envelope.kind, "n");
    let status = status(&system, "/user/p").await;
    assert_eq!((status.in_flight, status.refused), (2, 1));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_with_a_sink_sends_outputs_there_and_a_dropped_input_nowhere() {
    let system = system_with_patterns(&["pipeline"], &["stage"]);
    let mut sink = system.probe("sink").unwrap();
    let config = pipeline::Config {
        sink: Some("/system/sink".into()),
        ..pipeline::Config::of([stage(json!({"drop_on": 2})), stage(json!({"add": 100}))])
    };
    spawn_pipeline(&system, "p", &config);
    for n in 1..=3 {
        tell(&system, "/user/p", &Value { value: n });
    }
    assert_eq!(value_of(&next(&mut sink).await), 101);
    assert_eq!(value_of(&next(&mut sink).await), 103);
    let status = status(&system, "/user/p").await;
    assert_eq!((status.completed, status.dropped), (2, 1));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_can_be_a_stage_and_its_failure_fails_the_outer_input() {
    let system = system_with_patterns(&["pipeline"], &["stage"]);
    let inner = pipeline::Config::of([stage(json!({"mul": 3, "trap_on": 2}))]);
    let inner_init = serde_json::to_value(&inner).unwrap();
    let outer = pipeline::Config::of([
        stage(json!({"add": 1})),
        Stage::json("pipeline", inner_init),
    ]);
    spawn_pipeline(&system, "p", &outer);
    let out: Value = ask_as(&system, "/user/p", &Value { value: 2 }).await;
    assert_eq!(out.value, 9);
    let failed: Failed = ask_as(&system, "/user/p", &Value { value: 1 }).await;
    assert_eq!((failed.input, failed.stage), (2, 1));
    assert!(failed.reason.starts_with("stage 0 failed"), "{failed:?}");
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_with_a_bad_configuration_fails_to_start_with_the_reason() {
    let system = system_with_patterns(&["pipeline"], &[]);
    let mut events = system.subscribe_supervision();
    system.spawn("p", "pipeline", br#"{"stages": []}"#).unwrap();
    let event = next_decision(&mut events).await;
    assert!(format!("{event:?}").contains("1 to 64 stages"), "{event:?}");
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builder_builds_a_pipeline_from_a_message_and_tears_it_down() {
    let system = system_with_patterns(&["pipeline", "pipeline-builder"], &["stage"]);
    system.spawn("b", "pipeline-builder", b"").unwrap();
    let build = builder::Build {
        name: "double".into(),
        pipeline: pipeline::Config::of([stage(json!({"mul": 2})), stage(json!({"add": 1}))]),
    };
    let built: builder::Built = ask_as(&system, "/user/b", &build).await;
    assert_eq!(built.path, "/user/b/double");
    let out: Value = ask_as(&system, &built.path, &Value { value: 20 }).await;
    assert_eq!(out.value, 41);
    let list: builder::Pipelines = ask_as(&system, "/user/b", &builder::List {}).await;
    assert_eq!(list.pipelines, ["double"]);
    // The same name again is refused while it lives.
    let again: builder::Refused = ask_as(&system, "/user/b", &build).await;
    assert!(again.reason.contains("exists"), "{again:?}");
    let address = system.lookup(&built.path).expect("the pipeline lives");
    let torn: builder::TornDown = ask_as(
        &system,
        "/user/b",
        &builder::TearDown {
            name: "double".into(),
        },
    )
    .await;
    assert!(torn.existed);
    terminated(&system, &address).await;
    assert!(
        system.lookup("/user/b/double/stage-0").is_none(),
        "its stages stopped with it"
    );
    let list: builder::Pipelines = ask_as(&system, "/user/b", &builder::List {}).await;
    assert!(list.pipelines.is_empty());
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_is_refused_with_the_reason_for_a_missing_stage_module_or_past_max_pipelines() {
    let system = system_with_patterns(&["pipeline", "pipeline-builder"], &["stage"]);
    let config = builder::Config {
        max_pipelines: 1,
        ..builder::Config::default()
    };
    system
        .spawn("b", "pipeline-builder", &init(&config))
        .unwrap();
    let broken = builder::Build {
        name: "broken".into(),
        pipeline: pipeline::Config::of([stage(json!({})), Stage::new("no-such-module", "")]),
    };
    let refused: builder::Refused = ask_as(&system, "/user/b", &broken).await;
    assert_eq!(refused.name, "broken");
    assert!(refused.reason.contains("no-such-module"), "{refused:?}");
    // The failed build holds nothing: one pipeline still fits, a second does not.
    let good = builder::Build {
        name: "good".into(),
        pipeline: pipeline::Config::of([stage(json!({}))]),
    };
    let _: builder::Built = ask_as(&system, "/user/b", &good).await;
    let third = builder::Build {
        name: "third".into(),
        ..good
    };
    let refused: builder::Refused = ask_as(&system, "/user/b", &third).await;
    assert!(refused.reason.contains("holds 1 pipelines"), "{refused:?}");
    system.shutdown().await.unwrap();
}
