//! Module registry and hot swap: versions and content hashes, the compiled cache across host
//! restarts, contract version checks, live upgrades that keep state and every queued message,
//! refused upgrades that keep the old version serving, rollback, and rolling upgrades.

use mote_example_protocol::{Counter, Versioned, VersionedState};
use mote_host::{ActorSystem, HostConfig, ModuleError, UpgradeOptions};
use mote_tests::*;

/// A system with `versioned` v1, v2 and the bad v3 deployed (v1 current).
fn versioned_system(config: HostConfig) -> ActorSystem {
    scenarios::versioned_system(config, "versioned_v")
}

async fn state(system: &ActorSystem, path: &str) -> VersionedState {
    ask_as::<Versioned, VersionedState>(system, path, &Versioned::Get).await
}

/// Sends `Add { stream, n }` for n in `from..to`, waiting (not dropping) when the mailbox is full.
async fn feed(system: &ActorSystem, path: &str, stream: u32, from: u32, to: u32) {
    scenarios::feed(Speech::Postcard, system, path, stream, from, to).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_under_a_stream_of_messages_keeps_state_and_order() {
    const N: u32 = 20_000;
    let system = std::sync::Arc::new(versioned_system(HostConfig::new()));
    system.spawn("c", "versioned", b"").unwrap();
    assert_eq!(state(&system, "/user/c").await.version, 1);
    let (halfway, reached) = tokio::sync::oneshot::channel();
    let feeder = {
        let system = system.clone();
        tokio::spawn(async move {
            feed(&system, "/user/c", 0, 0, N / 3).await;
            let _ = halfway.send(());
            feed(&system, "/user/c", 0, N / 3, N).await;
        })
    };
    reached.await.unwrap();
    let report = system.upgrade("/user/c", "2").await.unwrap();
    assert_eq!(report.upgraded.len(), 1, "{report:?}");
    assert!(report.upgraded[0].migrated);
    assert!(report.failed.is_empty());
    assert!(
        !report.current,
        "upgrading one actor leaves the module's current version"
    );
    feeder.await.unwrap();
    let s = state(&system, "/user/c").await;
    assert_eq!(s.version, 2, "the new behaviour answers");
    assert_eq!(s.migrated_from, "1");
    assert_eq!(s.count, u64::from(N), "no message lost");
    assert_eq!(s.sum, u64::from(N) * u64::from(N - 1) / 2);
    assert_eq!(s.out_of_order, 0, "no message reordered or repeated");
    assert_eq!(s.last, vec![(0, N - 1)]);
    let info = system
        .tree()
        .into_iter()
        .find(|i| i.address.path.as_str() == "/user/c")
        .unwrap();
    assert_eq!(info.version.as_deref(), Some("2"));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_that_traps_in_migrate_is_refused_and_the_old_one_keeps_serving_then_rolls_back()
{
    scenarios::upgrade_keeps_state_refuses_a_bad_version_and_rolls_back(
        "versioned_v",
        Speech::Postcard,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrading_a_thousand_actors_of_a_module_is_rolling_and_carries_every_state() {
    const ACTORS: u32 = 1_000;
    let system = versioned_system(HostConfig::new());
    for i in 0..ACTORS {
        system.spawn(&format!("a{i}"), "versioned", b"").unwrap();
    }
    for i in 0..ACTORS {
        feed(&system, &format!("/user/a{i}"), i, 0, 1 + i % 5).await;
    }
    let (progress, mut updates) = tokio::sync::mpsc::unbounded_channel();
    let options = UpgradeOptions {
        concurrency: 32,
        ..UpgradeOptions::default()
    };
    let report = system
        .upgrade_with("versioned", "2", options, Some(progress))
        .await
        .unwrap();
    assert_eq!(report.upgraded.len(), ACTORS as usize);
    assert!(report.failed.is_empty());
    assert!(report.upgraded.iter().all(|u| u.migrated));
    assert!(report.current, "the whole module moved: v2 is current");
    let mut last = None;
    let mut seen = 0;
    while let Ok(p) = updates.try_recv() {
        seen += 1;
        last = Some(p);
    }
    assert_eq!(seen, ACTORS as usize, "one progress report per actor");
    assert_eq!(
        last.map(|p| (p.done, p.total)),
        Some((ACTORS as usize, ACTORS as usize))
    );
    for i in 0..ACTORS {
        let s = state(&system, &format!("/user/a{i}")).await;
        assert_eq!(
            (s.version, s.count),
            (2, u64::from(1 + i % 5)),
            "actor a{i}"
        );
        assert_eq!(s.last, vec![(i, i % 5)]);
    }
    // New actors of the module get the current version.
    system.spawn("fresh", "versioned", b"").unwrap();
    assert_eq!(state(&system, "/user/fresh").await.version, 2);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_actor_without_state_hooks_is_upgraded_by_restart_and_loses_its_memory_state() {
    let system = system_with(&["counter"]);
    let counter = std::fs::read(mote_test_programs::path("counter").unwrap()).unwrap();
    system.deploy_version("counter", "b", &counter).unwrap();
    system.spawn("c", "counter", b"10").unwrap();
    tell(&system, "/user/c", &Counter::Add(5));
    assert_eq!(
        ask_as::<Counter, Counter>(&system, "/user/c", &Counter::Get).await,
        Counter::Value(15)
    );
    let report = system.upgrade("/user/c", "b").await.unwrap();
    assert_eq!(report.upgraded.len(), 1);
    assert!(
        !report.upgraded[0].migrated,
        "no state hooks: restarted with its init"
    );
    assert_eq!(
        ask_as::<Counter, Counter>(&system, "/user/c", &Counter::Get).await,
        Counter::Value(10)
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_is_content_addressed_persistent_and_cached_across_restarts() {
    let dir = TempDir::new("registry");
    let db = dir.join("mote.redb");
    let v1 = std::fs::read(mote_test_programs::path("versioned_v1").unwrap()).unwrap();
    let v2 = std::fs::read(mote_test_programs::path("versioned_v2").unwrap()).unwrap();
    {
        let system = ActorSystem::new(durable_config(&db)).unwrap();
        assert!(system.deploy_version("versioned", "1", &v1).unwrap());
        assert!(
            !system.deploy_version("versioned", "1", &v1).unwrap(),
            "same bytes: a no-op"
        );
        system.spawn("c", "versioned", b"").unwrap();
        assert!(
            matches!(
                system.deploy_version("versioned", "1", &v2),
                Err(ModuleError::VersionTaken { .. })
            ),
            "other bytes under a version an actor runs are refused"
        );
        system.deploy_version("versioned", "2", &v2).unwrap();
        assert_eq!(system.module_stats().compiled, 2);
        assert_eq!(system.module_stats().cache_hits, 0);
        let list = system.module_list();
        assert_eq!(list.len(), 2);
        assert!(list[0].current && !list[1].current);
        assert_eq!(list[0].hash.len(), 64);
        assert_ne!(list[0].hash, list[1].hash);
        system.upgrade("versioned", "2").await.unwrap();
        system.shutdown().await.unwrap();
    }
    // A restarted host has both versions again, v2 current, without compiling anything.
    let system = ActorSystem::new(durable_config(&db)).unwrap();
    assert_eq!(
        system.module_stats().compiled,
        0,
        "{:?}",
        system.module_stats()
    );
    assert_eq!(system.module_stats().cache_hits, 2);
    let list = system.module_list();
    let current: Vec<&str> = list
        .iter()
        .filter(|m| m.current)
        .map(|m| m.version.as_str())
        .collect();
    assert_eq!(current, vec!["2"]);
    system.spawn("c", "versioned", b"").unwrap();
    assert_eq!(state(&system, "/user/c").await.version, 2);
    // Removing a version an actor runs is refused; once it stopped, it goes.
    assert!(matches!(
        system.remove_module("versioned", Some("2")),
        Err(ModuleError::InUse { actors: 1, .. })
    ));
    system.remove_module("versioned", Some("1")).unwrap();
    assert_eq!(system.module_list().len(), 1);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_of_another_contract_version_is_refused_naming_both_versions() {
    let system = ActorSystem::new(HostConfig::new()).unwrap();
    let component = wat::parse_str(
        r#"(component
            (import "mote:actor/host@0.3.0" (instance))
        )"#,
    )
    .unwrap();
    let err = system.deploy("future", &component).unwrap_err();
    assert!(
        matches!(err, ModuleError::ContractVersion { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("mote:actor@0.3.0") && text.contains("mote:actor@0.2.0"),
        "{text}"
    );
    // A patch release of the same contract is accepted as far as versions go (it then fails for
    // lack of the actor export, which is a different error).
    let patch =
        wat::parse_str(r#"(component (import "mote:actor/host@0.2.9" (instance)))"#).unwrap();
    let err = system.deploy("patch", &patch).unwrap_err();
    assert!(matches!(err, ModuleError::WrongWorld { .. }), "{err:?}");
}
