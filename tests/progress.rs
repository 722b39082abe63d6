//! Progress of long work: a compile (not a cache load), a rolling upgrade and the recovery of a
//! large journal each begin, advance and end once, and are listed while they run.

use mote_example_protocol::{Journal, JournalState, Versioned};
use mote_host::{ActorSystem, HostConfig, Progress, Task};
use mote_test_programs as examples;
use mote_tests::{TempDir, ask_as, durable_config, system_configured, tell};
use tokio::sync::broadcast::Receiver;

/// Every update received so far.
fn drain(rx: &mut Receiver<Progress>) -> Vec<Progress> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

/// The updates of one task: it began with nothing done, `done` never went down, and it ended
/// once, last.
fn one_task(updates: &[Progress]) -> Vec<u64> {
    let first = updates.first().expect("the task was reported");
    assert!(updates.iter().all(|u| u.id == first.id), "{updates:#?}");
    assert_eq!(first.done, 0);
    let ends: Vec<_> = updates.iter().filter(|u| u.outcome.is_some()).collect();
    assert_eq!(ends.len(), 1, "ends once: {updates:#?}");
    assert!(updates.last().unwrap().outcome.is_some(), "the end is last");
    let done: Vec<u64> = updates.iter().map(|u| u.done).collect();
    assert!(done.windows(2).all(|w| w[0] <= w[1]), "{done:?}");
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_is_reported_and_a_cache_load_is_not() {
    let cache = TempDir::new("progress-cache");
    let mut config = HostConfig::new();
    config.module_cache(cache.join("modules"));
    let system = ActorSystem::new(config.clone()).unwrap();
    let mut rx = system.subscribe_progress();
    let counter = examples::path("counter").unwrap();
    system.deploy_file("counter", &counter).unwrap();
    let updates = drain(&mut rx);
    one_task(&updates);
    let size = std::fs::metadata(&counter).unwrap().len();
    assert_eq!(
        updates[0].task,
        Task::Compile {
            module: "counter".into(),
            version: "0".into(),
            bytes: size,
        }
    );
    assert_eq!(updates.last().unwrap().outcome, Some(Ok(())));
    assert!(system.progress().is_empty(), "nothing runs after it");
    system.shutdown().await.unwrap();

    // A second host loads it from the compiled cache: no compile to report.
    let again = ActorSystem::new(config).unwrap();
    let mut rx = again.subscribe_progress();
    again.deploy_file("counter", &counter).unwrap();
    assert!(drain(&mut rx).is_empty());
    again.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_upgrade_counts_its_actors() {
    let system = system_configured(HostConfig::new(), &[]);
    for v in ["1", "2"] {
        let path = examples::path(&format!("versioned_v{v}")).unwrap();
        system.deploy_file_version("versioned", v, &path).unwrap();
    }
    for i in 0..12 {
        system.spawn(&format!("v{i}"), "versioned", b"").unwrap();
    }
    for i in 0..12 {
        let _: mote_example_protocol::VersionedState =
            ask_as(&system, &format!("/user/v{i}"), &Versioned::Get).await;
    }
    let mut rx = system.subscribe_progress();
    let report = system.upgrade("versioned", "2").await.unwrap();
    assert_eq!(report.upgraded.len(), 12);
    let updates = drain(&mut rx);
    let done = one_task(&updates);
    assert_eq!(done.last(), Some(&12));
    assert!(done.len() >= 3, "it advanced as actors moved: {done:?}");
    assert!(updates.iter().all(|u| u.total == Some(12)));
    assert_eq!(
        updates[0].task,
        Task::Upgrade {
            module: "versioned".into(),
            version: "2".into()
        }
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovering_a_large_journal_is_reported_page_by_page() {
    let dir = TempDir::new("progress-recovery");
    let db = dir.join("j.redb");
    const EVENTS: u64 = 12_000;
    {
        let system = system_configured(durable_config(&db), &["journal"]);
        system.spawn("j", "journal", b"").unwrap();
        tell(
            &system,
            "/user/j",
            &Journal::AppendRange {
                from: 0,
                count: EVENTS,
            },
        );
        let state: JournalState = ask_as(&system, "/user/j", &Journal::Query).await;
        assert_eq!(state.values.len() as u64, EVENTS);
        system.shutdown().await.unwrap();
    }
    let system = system_configured(durable_config(&db), &["journal"]);
    let mut rx = system.subscribe_progress();
    system.spawn("j", "journal", b"").unwrap();
    let state: JournalState = ask_as(&system, "/user/j", &Journal::Query).await;
    assert_eq!(state.replayed, EVENTS);
    let updates = drain(&mut rx);
    let done = one_task(&updates);
    assert_eq!(
        updates[0].task,
        Task::Recovery {
            persistence_id: "journal:/user/j".into(),
            actor: "/user/j".into()
        }
    );
    assert_eq!(updates[0].total, Some(EVENTS));
    assert!(done.len() >= 4, "one update a page: {done:?}");
    assert_eq!(done.last(), Some(&EVENTS));
    assert_eq!(updates.last().unwrap().outcome, Some(Ok(())));

    // A small journal is not worth a progress bar.
    let mut rx = system.subscribe_progress();
    system.spawn("small", "journal", b"").unwrap();
    tell(&system, "/user/small", &Journal::Append(1));
    let _: JournalState = ask_as(&system, "/user/small", &Journal::Query).await;
    assert!(drain(&mut rx).is_empty());
    system.shutdown().await.unwrap();
}
