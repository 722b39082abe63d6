//! The JavaScript guest SDK (`example-actors/js/mote`): its unit tests, in Node.js against a
//! fake of the componentize-js bindings, and the JavaScript ports of the Rust example actors
//! run through the same scenarios as the Rust ones.

use std::process::Command;

use mote_tests::*;

/// `node --test` over `example-actors/js/tests`: encoding, dispatch, behaviours and the stash,
/// recovery, asks, supervision, upgrades and the u64/BigInt rules.
#[test]
fn the_js_sdk_unit_tests_pass() {
    let (text, _) = run_checked(
        Command::new("node").current_dir(sdk_dir("js")).args([
            "--import",
            "./tests/fake/register.js",
            "--test",
            "tests/",
        ]),
        "the JavaScript SDK's unit tests",
        "install Node.js 20+ (Debian: apt-get install nodejs)",
    );
    assert!(text.contains("# fail 0"), "{text}");
    assert!(!text.contains("# pass 0\n"), "no test ran: {text}");
}

/// The SDK's TypeScript declarations (`mote/index.d.ts`) type-check `tests/types.ts`, an actor
/// written the way the examples are, under `tsc --strict` (the toolchain's TypeScript).
#[test]
fn the_js_sdk_types_check_under_strict_typescript() {
    let js = sdk_dir("js");
    let tsc = js.join("../.toolchains/js/node_modules/.bin/tsc");
    run_checked(
        Command::new(&tsc)
            .current_dir(&js)
            .args(["--noEmit", "--strict", "--target", "es2022"])
            .args(["--module", "nodenext", "--moduleResolution", "nodenext"])
            .arg("tests/types.ts"),
        "tsc over the SDK's declarations",
        "building mote-test-programs installs the JavaScript toolchain \
         (npm install in example-actors/.toolchains/js)",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_js_journal_recovers_after_a_host_restart() {
    scenarios::journal_recovers_after_a_host_restart("js_journal", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_js_journal_recovers_its_committed_state() {
    scenarios::a_restarted_journal_recovers_its_committed_state("js_journal", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_timers_fire_on_time_and_stop_when_cancelled() {
    scenarios::timers_fire_on_time_and_stop_when_cancelled("js_ticker", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_js_supervise_hook_decides_by_the_error() {
    scenarios::supervise_decides_by_error("js_supervisor", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_js_actor_is_upgraded_with_its_state_refused_by_a_bad_version_and_rolled_back() {
    scenarios::upgrade_keeps_state_refuses_a_bad_version_and_rolls_back(
        "js_versioned_v",
        Speech::Json,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passivated_js_entity_reactivates_with_its_state() {
    scenarios::a_passivated_entity_reactivates_with_its_state("js_entity", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_entity_state_survives_a_host_restart_and_retire_deletes_it() {
    scenarios::entity_state_survives_a_host_restart_and_retire_deletes_it(
        "js_entity",
        Speech::Json,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_messaging_stash_behaviours_reminders_and_lanes_work_through_mote() {
    scenarios::features_work_through_mote("js_features").await;
}
