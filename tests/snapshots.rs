//! Sandbox snapshots: actors captured between two messages as images of their memory, globals
//! and bookkeeping, restored elsewhere or after a host restart with no persistence code, and
//! damaged images refused. The same scenario runs for a Rust, a Python, a JavaScript and a C actor.

use mote_host::{ActorSystem, HostConfig, ImageError, SnapshotError, SpawnError, SpawnOptions};
use mote_tests::scenarios::{
    an_image_keeps_in_memory_state_across_restore_and_a_host_restart, snapshot_system,
};
use mote_tests::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_actor_keeps_its_in_memory_state_through_images() {
    an_image_keeps_in_memory_state_across_restore_and_a_host_restart(
        "versioned_v",
        Speech::Postcard,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_actor_keeps_its_in_memory_state_through_images() {
    an_image_keeps_in_memory_state_across_restore_and_a_host_restart(
        "py_versioned_v",
        Speech::Json,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_actor_keeps_its_in_memory_state_through_images() {
    an_image_keeps_in_memory_state_across_restore_and_a_host_restart("c_versioned_v", Speech::Json)
        .await;
}

/// A module deployed with snapshots on is compiled from its instrumented bytes, cached under
/// their own hash: the same bytes deployed without snapshots compile apart, and after a
/// restart each loads its own artifact, the snapshot one still capturable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_bytes_with_and_without_snapshots_never_share_a_compiled_artifact() {
    use mote_example_protocol::Counter;
    let dir = TempDir::new("snapshot-compiled-cache");
    let bytes = std::fs::read(mote_test_programs::path("counter").unwrap()).unwrap();
    for restarted in [false, true] {
        let mut config = HostConfig::new();
        config.module_cache(dir.0.join("modules"));
        let system = ActorSystem::new(config).unwrap();
        system.deploy("plain", &bytes).unwrap();
        system
            .deploy_granted("snap", "0", &bytes, &["snapshot".to_owned()])
            .unwrap();
        let stats = system.module_stats();
        let expected = if restarted { (0, 2) } else { (2, 0) };
        assert_eq!(
            (stats.compiled, stats.cache_hits),
            expected,
            "restarted: {restarted}"
        );
        system.spawn("p", "plain", b"").unwrap();
        system.spawn("s", "snap", b"").unwrap();
        tell(&system, "/user/s", &Counter::Add(3));
        let counted: Counter = ask_as(&system, "/user/s", &Counter::Get).await;
        assert_eq!(counted, Counter::Value(3));
        let refused = system.snapshot("/user/p").await;
        assert!(
            matches!(
                refused,
                Err(SnapshotError::Image(ImageError::NotEnabled(_)))
            ),
            "{refused:?}"
        );
        let image = system.snapshot("/user/s").await.unwrap();
        system
            .restore(&image, Some("/user/t"), SpawnOptions::default())
            .await
            .unwrap();
        let value: Counter = ask_as(&system, "/user/t", &Counter::Get).await;
        assert_eq!(value, Counter::Value(3));
        system.shutdown().await.ok();
    }
}

/// What cannot be imaged is refused with its reason, and the actor runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_actor_that_cannot_be_captured_is_refused_with_the_reason() {
    let system = system_with(&["counter", "ticker"]);
    system.spawn("plain", "counter", b"").unwrap();
    let refused = system.snapshot("/user/plain").await;
    assert!(
        matches!(refused, Err(SnapshotError::Image(ImageError::NotEnabled(ref m))) if m == "counter"),
        "a module deployed without snapshots: {refused:?}"
    );
    let sleepy = SpawnOptions {
        hibernate_after: Some(std::time::Duration::from_millis(10)),
        ..SpawnOptions::default()
    };
    let refused = system.spawn_with("sleepy", "counter", b"", sleepy);
    assert!(
        matches!(refused, Err(SpawnError::NoSnapshots(ref m)) if m == "counter"),
        "only a module with snapshots on hibernates: {refused:?}"
    );
    assert!(system.lookup("/user/sleepy").is_none());
    let missing = system.snapshot("/user/nobody").await;
    assert!(
        matches!(missing, Err(SnapshotError::NoActor(_))),
        "{missing:?}"
    );
    assert!(matches!(
        system
            .restore(b"not an image", None, SpawnOptions::default())
            .await,
        Err(SnapshotError::Image(ImageError::Corrupt(_)))
    ));
}

/// An image of one version is not restored into another: the version it names must be
/// deployed with the same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_is_restored_only_into_the_version_it_was_taken_from() {
    let dir = TempDir::new("image-version");
    let system: ActorSystem = snapshot_system(&dir.join("mote.redb"), "versioned_v");
    system.spawn("c", "versioned", b"").unwrap();
    let image = system.snapshot("/user/c").await.unwrap();
    let info = ActorSystem::image_info(&image).unwrap();
    assert!(info.pages_compressed <= info.pages_raw);
    assert!(
        info.bytes < 1 << 20,
        "a small counter's image is small: {info:?}"
    );
    system.shutdown().await.unwrap();

    let other = system_configured(HostConfig::new(), &[]);
    deploy_with_snapshots(&other, "versioned", "1", "versioned_v2");
    let refused = other.restore(&image, None, SpawnOptions::default()).await;
    assert!(
        matches!(
            refused,
            Err(SnapshotError::Spawn(mote_host::SpawnError::UnknownModule(
                _
            )))
        ),
        "other bytes under the same name and version: {refused:?}"
    );
}

/// Timers are part of an image: a periodic timer of a stopped actor fires again for its
/// restored image, under the id the guest keeps, which still cancels it; restored where it was
/// taken, the actor is the same incarnation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_periodic_timer_lives_on_in_the_image_and_its_id_still_cancels_it() {
    use mote_example_protocol::Timer;
    use mote_tests::scenarios::report_in;
    let system = system_configured(HostConfig::new(), &[]);
    deploy_with_snapshots(&system, "ticker", "0", "ticker");
    let mut probe = system.probe("p").unwrap();
    let first = system.spawn("t", "ticker", b"/system/p").unwrap();
    let every = Timer::Every {
        period_ms: 50,
        tag: 2,
    };
    Speech::Postcard.tell(&system, "/user/t", &every);
    assert_eq!(
        report_in(Speech::Postcard, &mut probe, "fired").await.value,
        2
    );
    let image = system.snapshot("/user/t").await.unwrap();
    assert!(system.stop("/user/t"));
    terminated(&system, &first).await;
    wait_until(|| system.pending_timers() == 0).await;

    let again = system
        .restore(&image, None, SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(again, first, "the same path and incarnation");
    assert_eq!(system.pending_timers(), 1, "its timer is armed again");
    for _ in 0..3 {
        assert_eq!(
            report_in(Speech::Postcard, &mut probe, "fired").await.value,
            2
        );
    }
    Speech::Postcard.tell(&system, "/user/t", &Timer::Cancel { tag: 2 });
    assert_eq!(
        report_in(Speech::Postcard, &mut probe, "cancelled")
            .await
            .value,
        1,
        "the id the guest kept cancels the restored timer"
    );
    assert_eq!(system.pending_timers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_actor_keeps_its_in_memory_state_through_images() {
    an_image_keeps_in_memory_state_across_restore_and_a_host_restart(
        "js_versioned_v",
        Speech::Json,
    )
    .await;
}

/// A hibernating actor keeps its timers: each tick wakes it, it handles the tick with the
/// memory it had, and sleeps again; the timer id it keeps in memory still cancels the timer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hibernating_actor_is_woken_by_its_timers_and_still_cancels_them() {
    use mote_example_protocol::Timer;
    let system = system_configured(HostConfig::new(), &[]);
    deploy_with_snapshots(&system, "ticker", "1", "ticker");
    let mut probe = system.probe("ticks").unwrap();
    let options = SpawnOptions {
        hibernate_after: Some(std::time::Duration::from_millis(20)),
        ..SpawnOptions::default()
    };
    let ticker = system
        .spawn_with("t", "ticker", b"/system/ticks", options)
        .unwrap();
    let naps = || stats_of(&system, &ticker).hibernations;
    tell(
        &system,
        "/user/t",
        &Timer::Every {
            period_ms: 300,
            tag: 1,
        },
    );
    for _ in 0..4 {
        assert_eq!(report_labelled(&mut probe, "fired").await.value, 1);
    }
    assert!(naps() >= 3, "it slept between ticks: {} naps", naps());
    tell(&system, "/user/t", &Timer::Cancel { tag: 1 });
    assert_eq!(
        report_labelled(&mut probe, "cancelled").await.value,
        1,
        "the id it kept through its naps cancels the host's timer"
    );
    system.shutdown().await.unwrap();
}

/// An image keeps the stash, in order, and the aliases: the gate's stashed items come out of
/// its restored copy when it opens; an alias is taken again where it is free, and stays with
/// the actor that holds it where it is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_keeps_the_stash_and_the_aliases() {
    use mote_example_protocol::{Find, Found, Gate};
    let system = system_configured(HostConfig::new(), &[]);
    for name in ["gate", "finder"] {
        deploy_with_snapshots(&system, name, "1", name);
    }
    let mut probe = system.probe("gate").unwrap();
    system.spawn("g", "gate", b"/system/gate").unwrap();
    for n in [1, 2, 3] {
        tell(&system, "/user/g", &Gate::Item(n));
    }
    tell(&system, "/user/g", &Gate::Stashed);
    assert_eq!(report_labelled(&mut probe, "stashed").await.value, 3);
    let image = system
        .snapshot("/user/g")
        .await
        .expect("a stash is captured");
    system
        .restore(&image, Some("/user/g2"), SpawnOptions::default())
        .await
        .unwrap();
    tell(&system, "/user/g2", &Gate::Open);
    for n in [1, 2, 3] {
        assert_eq!(report_labelled(&mut probe, "item").await.value, n);
    }

    system.spawn("f", "finder", b"0").unwrap();
    let alias: Found = ask_as(&system, "/user/f", &Find::Alias("fa".into())).await;
    let alias_path = alias.0[0].0.clone();
    let image = system
        .snapshot("/user/f")
        .await
        .expect("aliases are captured");
    let copy = system
        .restore(&image, Some("/user/f2"), SpawnOptions::default())
        .await
        .unwrap();
    let holder = system.lookup(&alias_path).expect("the alias lives");
    assert_eq!(holder.path.as_str(), "/user/f", "the original keeps it");
    let original = system.lookup("/user/f").unwrap();
    assert!(system.stop("/user/f"));
    terminated(&system, &original).await;
    assert!(
        system.lookup(&alias_path).is_none(),
        "released with /user/f"
    );
    system.stop(copy.path.as_str());
    terminated(&system, &copy).await;
    let again = system
        .restore(&image, Some("/user/f3"), SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(
        system.lookup(&alias_path),
        Some(again),
        "free again, the alias is taken back by the restored actor"
    );
    system.shutdown().await.unwrap();
}

/// A persistent actor hibernates too (nothing of its journal moves): it wakes with the state it
/// had, goes on journaling, and a host restart recovers every value from its journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_actor_hibernates_and_its_journal_carries_on() {
    use mote_example_protocol::{Journal, JournalState};
    let dir = TempDir::new("hibernating-journal");
    let db = dir.join("mote.redb");
    let start = |db: &std::path::Path| {
        let mut config = durable_config(db);
        config.module_cache(module_cache());
        let system = ActorSystem::new(config).unwrap();
        deploy_with_snapshots(&system, "journal", "1", "journal");
        system
    };
    let system = start(&db);
    let options = SpawnOptions {
        hibernate_after: Some(std::time::Duration::from_millis(50)),
        ..SpawnOptions::default()
    };
    let journal = system.spawn_with("j", "journal", b"", options).unwrap();
    let naps = |system: &ActorSystem| stats_of(system, &journal).hibernations;
    for round in 0..2u64 {
        tell(&system, "/user/j", &Journal::Append(round));
        wait_until(|| naps(&system) > round).await;
        let state: JournalState = ask_as(&system, "/user/j", &Journal::Query).await;
        assert_eq!(
            state.values,
            (0..=round).collect::<Vec<_>>(),
            "round {round}"
        );
    }
    system.shutdown().await.unwrap();
    let system = start(&db);
    system.spawn("j", "journal", b"").unwrap();
    let state: JournalState = ask_as(&system, "/user/j", &Journal::Query).await;
    assert_eq!(state.values, [0, 1], "recovered from its journal");
    system.shutdown().await.unwrap();
}

/// A module set to hibernate puts every actor of it to sleep once idle, the children other
/// actors spawn included (a guest's spawn has no say in it), and each wakes with its state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_set_to_hibernate_puts_its_actors_to_sleep_children_included() {
    use mote_example_protocol::Counter;
    use mote_host::ModuleError;
    let system = system_with(&["finder"]);
    deploy_with_snapshots(&system, "counter", "1", "counter");
    let nap = Some(std::time::Duration::from_millis(20));
    let refused = system.hibernate_module("finder", nap);
    assert!(
        matches!(&refused, Err(ModuleError::NoSnapshots { name }) if name == "finder"),
        "{refused:?}"
    );
    let unknown = system.hibernate_module("nobody", nap);
    assert!(
        matches!(unknown, Err(ModuleError::Unknown { .. })),
        "{unknown:?}"
    );
    system.hibernate_module("counter", nap).unwrap();
    system.spawn("top", "counter", b"").unwrap();
    // The finder spawns three counters as its children.
    system.spawn("finder", "finder", b"3").unwrap();
    let paths = [
        "/user/top",
        "/user/finder/c0",
        "/user/finder/c1",
        "/user/finder/c2",
    ];
    wait_until(|| paths.iter().all(|p| system.lookup(p).is_some())).await;
    for (k, path) in paths.iter().enumerate() {
        tell(&system, path, &Counter::Add(k as u64 + 1));
    }
    // Idle, each one sleeps; asked, each one wakes with its count.
    let naps = |path: &str| stats_of(&system, &system.lookup(path).unwrap()).hibernations;
    wait_until(|| paths.iter().all(|p| naps(p) >= 1)).await;
    for (k, path) in paths.iter().enumerate() {
        let value: Counter = ask_as(&system, path, &Counter::Get).await;
        assert_eq!(value, Counter::Value(k as u64 + 1), "{path}");
    }
    // Turned off, it applies to no actor spawned after; an actor's own setting still does.
    system.hibernate_module("counter", None).unwrap();
    system.spawn("late", "counter", b"").unwrap();
    tell(&system, "/user/late", &Counter::Add(7));
    let own = SpawnOptions {
        hibernate_after: nap,
        ..SpawnOptions::default()
    };
    system.spawn_with("own", "counter", b"", own).unwrap();
    tell(&system, "/user/own", &Counter::Add(7));
    wait_until(|| {
        system
            .lookup("/user/own")
            .is_some_and(|_| naps("/user/own") >= 1)
    })
    .await;
    // Woken and asleep again: `late` has idled longer than two naps by now.
    let _: Counter = ask_as(&system, "/user/own", &Counter::Get).await;
    wait_until(|| naps("/user/own") >= 2).await;
    assert_eq!(
        naps("/user/late"),
        0,
        "the module's setting was off when it was spawned"
    );
    system.shutdown().await.unwrap();
}
