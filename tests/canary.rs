//! Canary upgrades: a few actors of a module move first and are watched; a version that fails
//! more than the old one under the same traffic is rolled back by itself (the old version keeps
//! serving, with its state), one that does no worse goes on to every actor.

use std::sync::Arc;
use std::time::Duration;

use mote_example_protocol::{Versioned, VersionedState};
use mote_host::{
    ActorSystem, Canary, CanaryFigures, CanaryOutcome, Directive, HostConfig, Progress,
    RollbackReason, Strategy, UpgradeError, UpgradeOptions, UpgradeReport,
};
use mote_tests::*;
use tokio::sync::broadcast;

/// A host whose guardian resumes a top-level actor after an error (the failed message is
/// dropped, the state kept), with `versioned` 1 (current), 2, 3 (traps in `migrate`) and 4
/// (fails every `Add`) deployed, and `actors` actors `/user/a0`.. on version 1.
async fn versioned_host(actors: u32) -> Arc<ActorSystem> {
    let mut config = HostConfig::new();
    config.root_strategy(Strategy {
        directive: Directive::Resume,
        ..Strategy::default()
    });
    config.module_cache(module_cache());
    let system = ActorSystem::new(config).expect("system");
    for v in ["1", "2", "3", "4"] {
        let path = mote_test_programs::path(&format!("versioned_v{v}")).expect("built");
        (system.deploy_file_version("versioned", v, &path)).expect("deploy");
    }
    for i in 0..actors {
        system.spawn(&format!("a{i}"), "versioned", b"").unwrap();
    }
    // Some state to keep: 5 `Add`s on each actor's own stream, counted before anything else
    // (an upgrade request would overtake queued messages).
    for i in 0..actors {
        add(&system, i, 0..5);
        assert_eq!(state(&system, i).await.count, 5);
    }
    Arc::new(system)
}

/// `Add { stream: i, n }` to `/user/a{i}` for each n.
fn add(system: &ActorSystem, i: u32, ns: std::ops::Range<u32>) {
    for n in ns {
        tell(
            system,
            &format!("/user/a{i}"),
            &Versioned::Add { stream: i, n },
        );
    }
}

async fn state(system: &ActorSystem, i: u32) -> VersionedState {
    ask_as::<Versioned, VersionedState>(system, &format!("/user/a{i}"), &Versioned::Get).await
}

/// Starts a canary upgrade of `versioned` to `version` on its own task.
fn start_upgrade(
    system: &Arc<ActorSystem>,
    version: &'static str,
    canary: Canary,
) -> tokio::task::JoinHandle<Result<UpgradeReport, UpgradeError>> {
    let system = system.clone();
    tokio::spawn(async move {
        let options = UpgradeOptions {
            canary: Some(canary),
            ..UpgradeOptions::default()
        };
        system
            .upgrade_with("versioned", version, options, None)
            .await
    })
}

/// The outcome each task reported by the time the upgrade returned, by its label.
fn outcomes(progress: &mut broadcast::Receiver<Progress>) -> Vec<(String, Result<(), String>)> {
    let mut ended = Vec::new();
    while let Ok(p) = progress.try_recv() {
        if let Some(outcome) = p.outcome {
            ended.push((p.task.to_string(), outcome));
        }
    }
    ended
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_fails_more_than_the_old_version_is_rolled_back_and_the_old_one_serves() {
    let system = versioned_host(4).await;
    let mut progress = system.subscribe_progress();
    let upgrade = start_upgrade(&system, "4", Canary::new(1, Duration::from_secs(3)));
    mote_tests::canary_watch_begins(&mut progress).await;
    // The same traffic to every actor during the watch: v4 (on the canary, /user/a0) fails
    // each `Add`, v1 counts them. The answers to `Get` say the traffic was handled in time.
    for i in 0..4 {
        add(&system, i, 5..8);
    }
    let during: Vec<(u32, u64)> = versions_and_counts(&system, 4).await;
    assert_eq!(
        during,
        vec![(4, 5), (1, 8), (1, 8), (1, 8)],
        "(version, count)"
    );

    let report = upgrade.await.unwrap().unwrap();
    let verdict = report.canary.clone().expect("a canary verdict");
    assert_eq!(
        verdict.outcome,
        CanaryOutcome::RolledBack(RollbackReason::MoreFailures),
        "{verdict}"
    );
    assert_eq!(verdict.canaries, vec!["/user/a0"], "the first by path");
    let figures = |actors, failures| CanaryFigures {
        actors,
        failures,
        restarts: 0,
    };
    assert_eq!(
        (verdict.canary, verdict.old),
        (figures(1, 3), figures(3, 0))
    );
    assert!(verdict.watched >= Duration::from_secs(3), "{verdict}");
    assert_eq!(verdict.rolled_back, vec!["/user/a0"]);
    assert!(verdict.stuck.is_empty(), "{verdict:?}");
    assert_eq!(verdict.untouched, 3, "the others were never tried");
    assert!(
        report.upgraded.is_empty(),
        "nobody is left on 4: {report:?}"
    );
    assert!(report.failed.is_empty());
    assert!(!report.current);
    let line = verdict.to_string();
    assert!(
        line.starts_with("canary rolled back: 1 actor had 3 failures in 3.")
            && line.contains("against 0 failures of 3 actors on the old version"),
        "{line}"
    );
    // Both tasks ended with the reason: the watch, and the upgrade it stopped.
    let ended = outcomes(&mut progress);
    let failed_with_reason = |label: &str| {
        ended
            .iter()
            .any(|(l, o)| l.starts_with(label) && o.as_ref().is_err_and(|e| *e == line))
    };
    assert!(failed_with_reason("watching 1 canary"), "{ended:?}");
    assert!(failed_with_reason("upgrading versioned to 4"), "{ended:?}");

    // Version 1 serves everywhere. The canary is back with the state it had before the stage
    // (the `Add`s it failed were dropped), the others with every `Add`.
    let s = state(&system, 0).await;
    assert_eq!((s.version, s.count, s.migrated_from.as_str()), (1, 5, "4"));
    for i in 1..4 {
        let s = state(&system, i).await;
        assert_eq!((s.version, s.count, s.out_of_order), (1, 8, 0), "a{i}");
        assert_eq!(s.migrated_from, "", "a{i} never moved");
    }
    add(&system, 0, 8..10);
    assert_eq!(state(&system, 0).await.count, 7, "the canary counts again");
    let current = system
        .module_list()
        .into_iter()
        .find(|m| m.current)
        .unwrap();
    assert_eq!(
        current.version, "1",
        "the bad version did not become current"
    );
    Arc::into_inner(system).unwrap().shutdown().await.unwrap();
}

/// Each actor's (version, count), asked in order.
async fn versions_and_counts(system: &ActorSystem, actors: u32) -> Vec<(u32, u64)> {
    let mut seen = Vec::new();
    for i in 0..actors {
        let s = state(system, i).await;
        seen.push((s.version, s.count));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_does_no_worse_passes_and_every_actor_ends_on_the_new_version() {
    let system = versioned_host(4).await;
    let mut progress = system.subscribe_progress();
    let upgrade = start_upgrade(&system, "2", Canary::new(2, Duration::from_secs(1)));
    mote_tests::canary_watch_begins(&mut progress).await;
    for i in 0..4 {
        add(&system, i, 5..8);
    }
    let during = versions_and_counts(&system, 4).await;
    assert_eq!(
        during,
        vec![(2, 8), (2, 8), (1, 8), (1, 8)],
        "(version, count)"
    );

    let report = upgrade.await.unwrap().unwrap();
    let verdict = report.canary.clone().expect("a canary verdict");
    assert_eq!(verdict.outcome, CanaryOutcome::Passed, "{verdict}");
    assert_eq!(verdict.canaries, vec!["/user/a0", "/user/a1"]);
    assert_eq!((verdict.canary.failures, verdict.old.failures), (0, 0));
    assert!(verdict.rolled_back.is_empty() && verdict.untouched == 0);
    assert!(
        verdict
            .to_string()
            .starts_with("canary passed: 2 actors watched for 1.")
    );
    assert_eq!(report.upgraded.len(), 4, "{report:?}");
    assert!(report.upgraded.iter().all(|u| u.migrated));
    assert!(report.failed.is_empty());
    assert!(report.current, "every actor moved: 2 is current");
    for i in 0..4 {
        let s = state(&system, i).await;
        assert_eq!((s.version, s.count, s.out_of_order), (2, 8, 0), "a{i}");
    }
    let ended = outcomes(&mut progress);
    assert!(
        ended
            .iter()
            .any(|(l, o)| l.starts_with("watching 2") && o.is_ok())
            && ended
                .iter()
                .any(|(l, o)| l.starts_with("upgrading") && o.is_ok()),
        "{ended:?}"
    );
    Arc::into_inner(system).unwrap().shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_cannot_be_upgraded_stops_the_upgrade_without_a_watch() {
    let system = versioned_host(3).await;
    // v3 traps in `migrate`: the canary keeps v1, nobody else is tried, and the hour-long
    // watch never starts.
    let upgrade = start_upgrade(&system, "3", Canary::new(1, Duration::from_secs(3600)));
    let report = tokio::time::timeout(DEADLINE, upgrade)
        .await
        .expect("no watch")
        .unwrap()
        .unwrap();
    let verdict = report.canary.clone().unwrap();
    assert_eq!(
        verdict.outcome,
        CanaryOutcome::RolledBack(RollbackReason::UpgradeFailed { failed: 1 })
    );
    assert_eq!(verdict.watched, Duration::ZERO);
    assert_eq!(verdict.untouched, 2);
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].0, "/user/a0");
    assert!(report.upgraded.is_empty() && !report.current);
    for i in 0..3 {
        assert_eq!(state(&system, i).await.version, 1, "a{i}");
    }
    Arc::into_inner(system).unwrap().shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_needs_a_module_and_at_least_one_actor() {
    let system = versioned_host(2).await;
    let with = |canary| UpgradeOptions {
        canary: Some(canary),
        ..UpgradeOptions::default()
    };
    let one = Canary::new(1, Duration::from_secs(1));
    let err = system
        .upgrade_with("/user/a0", "2", with(one), None)
        .await
        .unwrap_err();
    assert!(matches!(err, UpgradeError::CanaryOfOneActor(ref p) if p == "/user/a0"));
    assert!(err.to_string().contains("needs a module name"), "{err}");
    let none = Canary::new(0, Duration::from_secs(1));
    let err = system
        .upgrade_with("versioned", "2", with(none), None)
        .await
        .unwrap_err();
    assert!(matches!(err, UpgradeError::EmptyCanary), "{err}");
    for i in 0..2 {
        assert_eq!(state(&system, i).await.version, 1, "a{i} untouched");
    }
    Arc::into_inner(system).unwrap().shutdown().await.unwrap();
}
