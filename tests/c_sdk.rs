//! The C SDK (`example-actors/c/mote.h`): C actors built on the bindings wit-bindgen's C
//! generator writes recover durable state after a host restart, tick, supervise and carry
//! their state across upgrades like their Rust twins.

use mote_host::{ActorSystem, Directive};
use mote_tests::*;

/// The text body of the reply to `kind` asked of `path`.
async fn ask_text(system: &ActorSystem, path: &str, kind: &str) -> String {
    let reply = system.ask(path, kind, Vec::new(), DEADLINE).await.unwrap();
    String::from_utf8(reply.body).unwrap()
}

fn journal_json(values: &[u64], from_snapshot: bool, replayed: u64) -> String {
    let values: Vec<String> = values.iter().map(u64::to_string).collect();
    format!(
        r#"{{"values":[{}],"recovered_from_snapshot":{from_snapshot},"replayed":{replayed}}}"#,
        values.join(",")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_journal_recovers_snapshot_and_events_after_a_host_restart() {
    let dir = TempDir::new("c-journal");
    let db = dir.join("mote.redb");
    let values: Vec<u64> = (0..40).map(|i| (i * 7919) % 101).collect();
    {
        let system = system_configured(durable_config(&db), &["c_journal"]);
        // A snapshot every 16 events: recovery = snapshot at 32 + replay of 33..=40.
        system.spawn("j", "c_journal", b"16").unwrap();
        for v in &values {
            system
                .tell("/user/j", "append", v.to_string().into_bytes())
                .unwrap();
        }
        assert_eq!(
            ask_text(&system, "/user/j", "query").await,
            journal_json(&values, false, 0)
        );
        system.shutdown().await.unwrap();
    }
    let system = system_configured(durable_config(&db), &["c_journal"]);
    system.spawn("j", "c_journal", b"16").unwrap();
    assert_eq!(
        ask_text(&system, "/user/j", "query").await,
        journal_json(&values, true, 8),
        "snapshot + the 8 events after it give the same values in order"
    );
    // A trap is a failure: the supervisor restarts it, and it recovers from the store again.
    let mut decisions = system.subscribe_supervision();
    system.tell("/user/j", "crash", Vec::new()).unwrap();
    let decision = next_decision(&mut decisions).await;
    assert_eq!(decision.directive, Directive::Restart);
    system.tell("/user/j", "append", b"5".to_vec()).unwrap();
    let mut more = values.clone();
    more.push(5);
    assert_eq!(
        ask_text(&system, "/user/j", "query").await,
        journal_json(&more, true, 8)
    );
    system.shutdown().await.unwrap();
}

/// The next message the probe receives, as (kind, text body).
async fn next_text(probe: &mut mote_host::Probe) -> (String, String) {
    let envelope = next(probe).await;
    (envelope.kind, String::from_utf8(envelope.body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_timers_fire_once_and_periodically_and_stop_when_cancelled() {
    let system = system_with(&["c_ticker"]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("t", "c_ticker", b"/system/p").unwrap();
    let text = |s: &str| s.as_bytes().to_vec();

    let sent = std::time::Instant::now();
    system
        .tell("/user/t", "once", text(r#"{"delay_ms": 100, "tag": 1}"#))
        .unwrap();
    assert_eq!(next_text(&mut probe).await, ("fired".into(), "1".into()));
    let late = sent.elapsed();
    assert!(
        late >= std::time::Duration::from_millis(100),
        "fired early: {late:?}"
    );

    let sent = std::time::Instant::now();
    system
        .tell("/user/t", "every", text(r#"{"period_ms": 50, "tag": 2}"#))
        .unwrap();
    for _ in 0..5 {
        assert_eq!(next_text(&mut probe).await, ("fired".into(), "2".into()));
    }
    assert!(sent.elapsed() >= std::time::Duration::from_millis(250));
    system
        .tell("/user/t", "cancel", text(r#"{"tag": 2}"#))
        .unwrap();
    // At most one firing was already queued behind the cancel.
    let mut reply = next_text(&mut probe).await;
    if reply.0 == "fired" {
        reply = next_text(&mut probe).await;
    }
    assert_eq!(reply, ("cancelled".into(), "1".into()));

    system
        .tell("/user/t", "once", text(r#"{"delay_ms": 60000, "tag": 3}"#))
        .unwrap();
    system
        .tell("/user/t", "cancel", text(r#"{"tag": 3}"#))
        .unwrap();
    assert_eq!(
        next_text(&mut probe).await,
        ("cancelled".into(), "1".into())
    );
    wait_until(|| system.pending_timers() == 0).await;
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_supervisor_picks_directives_by_error_and_watches_its_children() {
    let system = system_with(&["c_supervisor", "c_counter"]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("s", "c_supervisor", b"/system/p").unwrap();
    // Its start spawns the children: wait for them before telling them anything.
    let live = |path: &str| {
        system
            .tree()
            .iter()
            .any(|info| info.address.path.as_str() == path)
    };
    wait_until(|| live("/user/s/c0") && live("/user/s/c1")).await;
    let total = |path: &'static str| {
        let system = &system;
        async move { ask_text(system, path, "get").await }
    };
    system.tell("/user/s/c0", "add", b"5".to_vec()).unwrap();
    assert_eq!(total("/user/s/c0").await, "5");

    // "resume": the child keeps its state.
    system
        .tell("/user/s/c0", "fail", b"please resume".to_vec())
        .unwrap();
    assert_eq!(
        next_text(&mut probe).await,
        ("supervised".into(), "/user/s/c0 resume".into())
    );
    assert_eq!(total("/user/s/c0").await, "5");

    // "restart": a fresh instance.
    system
        .tell("/user/s/c0", "fail", b"restart it".to_vec())
        .unwrap();
    assert_eq!(
        next_text(&mut probe).await,
        ("supervised".into(), "/user/s/c0 restart".into())
    );
    assert_eq!(total("/user/s/c0").await, "0");

    // No directive named: the strategy's (restart).
    let mut decisions = system.subscribe_supervision();
    system.tell("/user/s/c1", "add", b"3".to_vec()).unwrap();
    system.tell("/user/s/c1", "fail", Vec::new()).unwrap();
    assert_eq!(
        next_text(&mut probe).await,
        ("supervised".into(), "/user/s/c1 defer".into())
    );
    assert_eq!(
        next_decision(&mut decisions).await.directive,
        Directive::Restart
    );
    assert_eq!(total("/user/s/c1").await, "0");

    // "stop": the child ends and its watcher hears of it.
    system
        .tell("/user/s/c0", "fail", b"stop now".to_vec())
        .unwrap();
    assert_eq!(
        next_text(&mut probe).await,
        ("supervised".into(), "/user/s/c0 stop".into())
    );
    assert_eq!(
        next_text(&mut probe).await,
        ("terminated".into(), "/user/s/c0".into())
    );
    system.shutdown().await.unwrap();
}

/// Sends `add` n for n in `from..to` to `path`, waiting when the mailbox is full.
async fn feed(system: &ActorSystem, path: &str, from: u64, to: u64) {
    for n in from..to {
        loop {
            match system.tell(path, "add", n.to_string().into_bytes()) {
                Ok(()) => break,
                Err(mote_host::SendError::MailboxFull { .. }) => tokio::task::yield_now().await,
                Err(e) => panic!("tell: {e}"),
            }
        }
    }
}

fn versioned_json(version: u32, count: u64, last: u64, migrated_from: &str) -> String {
    let sum = count * (count - 1) / 2;
    format!(
        r#"{{"version":{version},"count":{count},"sum":{sum},"last":{last},"out_of_order":0,"migrated_from":"{migrated_from}"}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_actor_carries_its_state_across_upgrades_and_a_bad_migrate_is_refused() {
    let system = std::sync::Arc::new(ActorSystem::new(mote_host::HostConfig::new()).unwrap());
    for v in ["1", "2", "3"] {
        let path = mote_test_programs::path(&format!("c_versioned_v{v}")).unwrap();
        system.deploy_file_version("cv", v, &path).unwrap();
    }
    system.spawn("c", "cv", b"").unwrap();
    // An upgrade under a stream of messages: none lost, none reordered.
    const N: u64 = 3_000;
    let (halfway, reached) = tokio::sync::oneshot::channel();
    let feeder = {
        let system = system.clone();
        tokio::spawn(async move {
            feed(&system, "/user/c", 0, N / 3).await;
            let _ = halfway.send(());
            feed(&system, "/user/c", N / 3, N).await;
        })
    };
    reached.await.unwrap();
    let up = system.upgrade("/user/c", "2").await.unwrap();
    assert_eq!(up.upgraded.len(), 1, "{up:?}");
    assert!(up.upgraded[0].migrated);
    feeder.await.unwrap();
    assert_eq!(
        ask_text(&system, "/user/c", "get").await,
        versioned_json(2, N, N - 1, "1")
    );
    // v3 traps in migrate: the upgrade fails and v2 keeps its state and keeps serving.
    let bad = system.upgrade("/user/c", "3").await.unwrap();
    assert!(bad.upgraded.is_empty());
    assert!(
        bad.failed.len() == 1 && bad.failed[0].1.contains("refused the state"),
        "{:?}",
        bad.failed
    );
    feed(&system, "/user/c", N, N + 10).await;
    assert_eq!(
        ask_text(&system, "/user/c", "get").await,
        versioned_json(2, N + 10, N + 9, "1")
    );
    // Roll back to v1: the state comes along.
    let back = system.upgrade("/user/c", "1").await.unwrap();
    assert_eq!(back.upgraded.len(), 1);
    feed(&system, "/user/c", N + 10, N + 20).await;
    assert_eq!(
        ask_text(&system, "/user/c", "get").await,
        versioned_json(1, N + 20, N + 19, "2")
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_entity_passivates_reactivates_with_its_state_and_survives_a_host_restart() {
    let dir = TempDir::new("c-entity");
    let db = dir.join("mote.redb");
    {
        let system = system_configured(durable_config(&db), &["c_entity"]);
        let options = mote_host::EntityOptions {
            passivate_after: Some(std::time::Duration::from_millis(100)),
            ..mote_host::EntityOptions::default()
        };
        system
            .register_entity("carts", "c_entity", options)
            .unwrap();
        system
            .tell("/user/carts/ann", "add", b"5".to_vec())
            .unwrap();
        system
            .tell("/user/carts/ann", "add", b"6".to_vec())
            .unwrap();
        system
            .tell("/user/carts/bob", "add", b"2".to_vec())
            .unwrap();
        assert_eq!(
            ask_text(&system, "/user/carts/ann", "get").await,
            r#"{"id":"ann","total":11,"activations":1}"#
        );
        let first = system
            .lookup("/user/carts/ann")
            .expect("live after a message");
        wait_until(|| system.lookup("/user/carts/ann").is_none()).await;
        terminated(&system, &first).await;
        // A message to its path activates it again, with its state.
        system
            .tell("/user/carts/ann", "add", b"1".to_vec())
            .unwrap();
        assert_eq!(
            ask_text(&system, "/user/carts/ann", "get").await,
            r#"{"id":"ann","total":12,"activations":2}"#
        );
        // bob may have passivated meanwhile too: its activations are 1 or 2.
        let bob = ask_text(&system, "/user/carts/bob", "get").await;
        assert!(bob.starts_with(r#"{"id":"bob","total":2,"#), "{bob}");
        system
            .tell("/user/carts/bob", "retire", Vec::new())
            .unwrap();
        wait_until(|| system.lookup("/user/carts/bob").is_none()).await;
        system.shutdown().await.unwrap();
    }
    let system = system_configured(durable_config(&db), &["c_entity"]);
    system
        .register_entity("carts", "c_entity", mote_host::EntityOptions::default())
        .unwrap();
    assert_eq!(
        ask_text(&system, "/user/carts/ann", "get").await,
        r#"{"id":"ann","total":12,"activations":3}"#,
        "the state survives the host restart"
    );
    assert_eq!(
        ask_text(&system, "/user/carts/bob", "get").await,
        r#"{"id":"bob","total":0,"activations":1}"#,
        "a retired entity starts afresh"
    );
    system.shutdown().await.unwrap();
}
