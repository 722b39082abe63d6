//! The Python guest SDK (`example-actors/python/mote`): its unit tests, in CPython against a
//! fake of the componentize-py bindings, and the Python ports of the Rust example actors run
//! through the same scenarios as the Rust ones.

use std::process::Command;

use mote_tests::*;

/// `python3 -m unittest discover` over `example-actors/python/tests`: encoding, dispatch,
/// behaviours and the stash, recovery, asks, supervision and upgrades.
#[test]
fn the_python_sdk_unit_tests_pass() {
    let (_, text) = run_checked(
        Command::new("python3")
            .current_dir(sdk_dir("python"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .args(["-m", "unittest", "discover", "-s", "tests", "-v"]),
        "the Python SDK's unit tests",
        "install python3 (Debian: apt-get install python3)",
    );
    assert!(text.contains("\nOK"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_journal_recovers_after_a_host_restart() {
    scenarios::journal_recovers_after_a_host_restart("py_journal", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_py_journal_recovers_its_committed_state() {
    scenarios::a_restarted_journal_recovers_its_committed_state("py_journal", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_timers_fire_on_time_and_stop_when_cancelled() {
    scenarios::timers_fire_on_time_and_stop_when_cancelled("py_ticker", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_supervise_hook_decides_by_the_error() {
    scenarios::supervise_decides_by_error("py_supervisor", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_actor_is_upgraded_with_its_state_refused_by_a_bad_version_and_rolled_back() {
    scenarios::upgrade_keeps_state_refuses_a_bad_version_and_rolls_back(
        "py_versioned_v",
        Speech::Json,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passivated_python_entity_reactivates_with_its_state() {
    scenarios::a_passivated_entity_reactivates_with_its_state("py_entity", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_entity_state_survives_a_host_restart_and_retire_deletes_it() {
    scenarios::entity_state_survives_a_host_restart_and_retire_deletes_it(
        "py_entity",
        Speech::Json,
    )
    .await;
}

/// `py_features` on the Python SDK: asks through `answered`/`ask_timeout`, topics, groups,
/// behaviours and the stash, reminders, forwarding, the urgent lane, lookup and the clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_features_work_through_mote() {
    scenarios::features_work_through_mote("py_features").await;
}
