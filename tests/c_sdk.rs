//! The C SDK (`example-actors/c/mote.h`): C actors built on the bindings wit-bindgen's C
//! generator writes recover durable state after a host restart, tick, supervise and carry
//! their state across upgrades like their Rust twins; `c_features` passes the features
//! scenario, and `c_extras` covers the rest of the contract (spawning with limits, pausing a
//! child, peeking into the stash, HTTP call-outs).

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

/// `c_features` on the C SDK's helpers: asks, topics, groups, behaviours and the stash,
/// reminders, forwarding, the urgent lane, naming, delivery modes, lookup and the clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_features_work_through_mote() {
    scenarios::features_work_through_mote("c_features").await;
}

/// `c_extras` granted `wasi:http`, the same bytes as `plain` (not granted), and `c_counter`.
fn extras_system() -> ActorSystem {
    let system = system_with(&["c_counter"]);
    let bytes = std::fs::read(mote_test_programs::path("c_extras").unwrap()).unwrap();
    system
        .deploy_granted("c_extras", "0", &bytes, &["wasi:http".to_owned()])
        .unwrap();
    system.deploy("plain", &bytes).unwrap();
    system
}

/// Messages queued at `path` now.
fn depth(system: &ActorSystem, path: &str) -> Option<usize> {
    system
        .tree()
        .into_iter()
        .find(|a| a.address.path.as_str() == path)
        .map(|a| a.mailbox_depth)
}

/// Tells `kind` with a text body from outside.
fn tell_text(system: &ActorSystem, path: &str, kind: &str, body: &str) {
    system.tell(path, kind, body.as_bytes().to_vec()).unwrap();
}

/// `mote_spawn_with` gives the child its own mailbox bound; `mote_deactivate` pauses it (its
/// messages queue, up to that bound) and `mote_activate` lets it handle them. The parent sees
/// its child (`mote_children`), no parent of its own (`mote_parent`), its persistence id as
/// set; `mote_spawn_on` names a node this host does not know and is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_parent_spawns_with_limits_pauses_its_child_and_resumes_it() {
    let system = extras_system();
    let mut probe = system.probe("p").unwrap();
    system.spawn("x", "c_extras", b"/system/p").unwrap();
    tell_text(&system, "/user/x", "spawn", "2");
    assert_eq!(
        next_text(&mut probe).await,
        ("spawned".into(), "/user/x/w".into())
    );
    tell_text(&system, "/user/x", "pause", "");
    assert_eq!(next_text(&mut probe).await, ("paused".into(), "1".into()));
    tell_text(&system, "/user/x/w", "add", "5");
    tell_text(&system, "/user/x/w", "add", "6");
    // Paused before the adds were sent: both wait, and the mailbox of 2 refuses a third.
    assert_eq!(depth(&system, "/user/x/w"), Some(2));
    assert!(
        matches!(
            system.tell("/user/x/w", "add", b"7".to_vec()),
            Err(mote_host::SendError::MailboxFull { .. })
        ),
        "the child's own mailbox capacity"
    );
    tell_text(&system, "/user/x", "resume", "");
    assert_eq!(next_text(&mut probe).await, ("resumed".into(), "1".into()));
    // An ask now could find the mailbox still full (a dead letter): wait until it drains.
    wait_until(|| depth(&system, "/user/x/w") == Some(0)).await;
    assert_eq!(ask_text(&system, "/user/x/w", "get").await, "11");

    // A root under /user has no parent; the persistence id is scoped to the host's owner.
    tell_text(&system, "/user/x", "inspect", "");
    let (kind, text) = next_text(&mut probe).await;
    assert_eq!(kind, "inspected");
    let fields: Vec<&str> = text.split(' ').collect();
    assert_eq!(fields.len(), 4, "{text}");
    assert_eq!((fields[0], fields[1], fields[3]), ("-", "1", "1"), "{text}");
    let (scope, pid) = fields[2].split_once(':').expect("<scope>:<id>");
    assert_eq!(pid, "/user/x");
    tell_text(&system, "/user/x", "inspect", "mine");
    assert_eq!(
        next_text(&mut probe).await,
        ("inspected".into(), format!("- 1 {scope}:mine 1"))
    );

    tell_text(&system, "/user/x", "spawn-on", "elsewhere");
    let (kind, why) = next_text(&mut probe).await;
    assert_eq!(kind, "spawned-on");
    assert!(why.starts_with("instantiation failed"), "{why}");
    system.shutdown().await.unwrap();
}

/// `mote_peek` and `mote_take` find the oldest stashed message of a kind (or of any kind);
/// a peek leaves it in the stash, a take removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_actor_peeks_into_and_takes_from_its_stash_by_kind() {
    let system = extras_system();
    let mut probe = system.probe("p").unwrap();
    system.spawn("x", "c_extras", b"/system/p").unwrap();
    tell_text(&system, "/user/x", "hold", "a");
    tell_text(&system, "/user/x", "keep", "b");
    tell_text(&system, "/user/x", "hold", "c");
    let steps = [
        ("peek", "keep", "peeked", "keep b 3"),
        ("peek", "", "peeked", "hold a 3"),
        ("take", "hold", "took", "hold a 2"),
        ("take", "hold", "took", "hold c 1"),
        ("take", "hold", "took", "none 1"),
        ("peek", "", "peeked", "keep b 1"),
        ("take", "", "took", "keep b 0"),
        ("peek", "", "peeked", "none 0"),
    ];
    for (kind, body, label, expected) in steps {
        tell_text(&system, "/user/x", kind, body);
        assert_eq!(
            next_text(&mut probe).await,
            (label.into(), expected.into()),
            "{kind} {body:?}"
        );
    }
    system.shutdown().await.unwrap();
}

/// `mote_http_request` starts a GET; `mote_is_http_response` recognises its outcome message,
/// `mote_http_response` takes the response once; a module without the grant is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_actor_makes_an_http_call_out_and_takes_its_response_once() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hi", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the request ended early");
            head.extend_from_slice(&buf[..n]);
        }
        let response = "HTTP/1.1 200 OK\r\nx-test: yes\r\ncontent-length: 8\r\n\
                        connection: close\r\n\r\nhello, c";
        stream.write_all(response.as_bytes()).await.unwrap();
        stream.shutdown().await.unwrap();
        String::from_utf8_lossy(&head).into_owned()
    });
    let system = extras_system();
    let mut probe = system.probe("p").unwrap();
    system.spawn("x", "c_extras", b"/system/p").unwrap();
    tell_text(&system, "/user/x", "fetch", &url);
    let (kind, id) = next_text(&mut probe).await;
    assert_eq!(kind, "fetching", "{id}");
    assert_eq!(
        next_text(&mut probe).await,
        ("fetched".into(), format!("{id} 200 yes hello, c"))
    );
    assert_eq!(next_text(&mut probe).await, ("again".into(), "none".into()));
    let head = server.await.unwrap();
    assert!(head.starts_with("GET /hi HTTP/1.1\r\n"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("x-from: c\r\n"),
        "{head}"
    );

    system.spawn("y", "plain", b"/system/p").unwrap();
    tell_text(&system, "/user/y", "fetch", &url);
    assert_eq!(
        next_text(&mut probe).await,
        ("refused".into(), "not granted wasi:http".into())
    );
    system.shutdown().await.unwrap();
}

/// A C actor captured as an image keeps its in-memory count through a restore elsewhere,
/// while the original runs on (the C versioned counter speaks text: `add N`, `get`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_actor_keeps_its_in_memory_state_through_an_image() {
    let system = ActorSystem::new(mote_host::HostConfig::new()).unwrap();
    deploy_with_snapshots(&system, "cv", "1", "c_versioned_v1");
    system.spawn("c", "cv", b"").unwrap();
    feed(&system, "/user/c", 0, 300).await;
    let captured = ask_text(&system, "/user/c", "get").await;
    assert_eq!(captured, versioned_json(1, 300, 299, ""));
    let image = system.snapshot("/user/c").await.unwrap();
    feed(&system, "/user/c", 300, 310).await;
    assert_eq!(
        ask_text(&system, "/user/c", "get").await,
        versioned_json(1, 310, 309, "")
    );
    system
        .restore(&image, Some("/user/d"), mote_host::SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(ask_text(&system, "/user/d", "get").await, captured);
    feed(&system, "/user/d", 300, 305).await;
    assert_eq!(
        ask_text(&system, "/user/d", "get").await,
        versioned_json(1, 305, 304, "")
    );
}
