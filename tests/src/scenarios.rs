//! Scenarios shared by the tests of the Rust example actors and their ports to other languages:
//! each takes the module name and the [`Speech`] it speaks, so the same assertions hold for
//! every SDK.

use std::time::{Duration, Instant};

use mote_example_protocol::{
    Crash, Entity, EntityValue, Journal, JournalState, Report, Timer, Versioned, VersionedState,
};
use mote_guest::Message;
use mote_host::{
    Directive, EntityOptions, ImageError, Probe, SendError, SnapshotError, SpawnError, SpawnOptions,
};

use crate::*;

/// A journal actor (init: snapshot every 16 events) appends 40 values, the host restarts on
/// the same database, and the actor recovers them in order: the snapshot at 32 plus a replay
/// of the 8 events after it.
pub async fn journal_recovers_after_a_host_restart(module: &str, speech: Speech) {
    let dir = TempDir::new("restart");
    let db = dir.join("mote.redb");
    let values: Vec<u64> = (0..40).map(|i| (i * 7919) % 101).collect();
    {
        let system = system_configured(durable_config(&db), &[module]);
        system.spawn("j", module, b"16").unwrap();
        for v in &values {
            speech.tell(&system, "/user/j", &Journal::Append(*v));
        }
        let state: JournalState = speech.ask(&system, "/user/j", &Journal::Query).await;
        assert_eq!(state.values, values);
        system.shutdown().await.unwrap();
    }
    let system = system_configured(durable_config(&db), &[module]);
    system.spawn("j", module, b"16").unwrap();
    let state: JournalState = speech.ask(&system, "/user/j", &Journal::Query).await;
    assert_eq!(
        state.values, values,
        "snapshot + replay give the same values in order"
    );
    assert!(state.recovered_from_snapshot);
    assert_eq!(
        state.replayed, 8,
        "only the events after the snapshot are replayed"
    );
    system.shutdown().await.unwrap();
}

/// A journal actor (init: a snapshot every 2 events) that traps after 5 appends is restarted by
/// its supervisor and recovers what it committed: the snapshot at 4 plus a replay of the 5th.
pub async fn a_restarted_journal_recovers_its_committed_state(module: &str, speech: Speech) {
    let dir = TempDir::new("supervised");
    let system = system_configured(durable_config(&dir.join("mote.redb")), &[module]);
    let mut decisions = system.subscribe_supervision();
    system.spawn("j", module, b"2").unwrap();
    for v in [3, 1, 4, 1, 5] {
        speech.tell(&system, "/user/j", &Journal::Append(v));
    }
    speech.tell(&system, "/user/j", &Journal::Crash);
    let decision = next_decision(&mut decisions).await;
    assert_eq!(decision.child.path.as_str(), "/user/j");
    let state: JournalState = speech.ask(&system, "/user/j", &Journal::Query).await;
    assert_eq!(state.values, vec![3, 1, 4, 1, 5]);
    assert!(state.recovered_from_snapshot);
    assert_eq!(state.replayed, 1);
    system.shutdown().await.unwrap();
}

/// The next [`Report`] at the probe in `speech` with `label`, skipping anything else (reports
/// of actors that speak another way too).
pub async fn report_in(speech: Speech, probe: &mut Probe, label: &str) -> Report {
    loop {
        let envelope = next(probe).await;
        if envelope.kind != Report::KIND {
            continue;
        }
        let decoded = match speech {
            Speech::Postcard => mote_guest::decode::<Report>(&envelope.kind, &envelope.body).ok(),
            Speech::Json => serde_json::from_slice::<Report>(&envelope.body).ok(),
        };
        if let Some(report) = decoded.filter(|r| r.label == label) {
            return report;
        }
    }
}

/// The reports in `speech` that arrive at the probe within `quiet`.
async fn drain_in(speech: Speech, probe: &mut Probe, quiet: Duration) -> Vec<Report> {
    let mut got = Vec::new();
    while let Some(envelope) = probe.recv_timeout(quiet).await {
        if envelope.kind == Report::KIND {
            got.push(speech.decode::<Report>(&envelope));
        }
    }
    got
}

/// A ticker (init: the report path /system/p) fires a one-shot timer no earlier than its
/// delay, a periodic one five times until cancelled, and a one-shot cancelled before it fires
/// never; no timer is left pending.
pub async fn timers_fire_on_time_and_stop_when_cancelled(module: &str, speech: Speech) {
    let system = system_with(&[module]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("t", module, b"/system/p").unwrap();

    let sent = Instant::now();
    let once = Timer::Once {
        delay_ms: 100,
        tag: 1,
    };
    speech.tell(&system, "/user/t", &once);
    let r = report_in(speech, &mut probe, "fired").await;
    let late = sent.elapsed();
    assert_eq!(r.value, 1);
    assert!(late >= Duration::from_millis(100), "fired early: {late:?}");
    assert!(
        late < Duration::from_millis(2100),
        "fired too late: {late:?}"
    );

    let sent = Instant::now();
    let every = Timer::Every {
        period_ms: 50,
        tag: 2,
    };
    speech.tell(&system, "/user/t", &every);
    for _ in 0..5 {
        assert_eq!(report_in(speech, &mut probe, "fired").await.value, 2);
    }
    assert!(
        sent.elapsed() >= Duration::from_millis(250),
        "5 periods took {:?}",
        sent.elapsed()
    );
    speech.tell(&system, "/user/t", &Timer::Cancel { tag: 2 });
    assert_eq!(report_in(speech, &mut probe, "cancelled").await.value, 1);
    // At most one firing was already queued behind the cancel; then silence.
    let after = drain_in(speech, &mut probe, Duration::from_millis(300)).await;
    assert!(
        after.iter().filter(|r| r.label == "fired").count() <= 1,
        "{after:?}"
    );

    let later = Timer::Once {
        delay_ms: 300,
        tag: 3,
    };
    speech.tell(&system, "/user/t", &later);
    speech.tell(&system, "/user/t", &Timer::Cancel { tag: 3 });
    assert_eq!(report_in(speech, &mut probe, "cancelled").await.value, 1);
    let after = drain_in(speech, &mut probe, Duration::from_millis(600)).await;
    assert!(after.is_empty(), "a cancelled one-shot fired: {after:?}");
    assert_eq!(system.pending_timers(), 0);
}

/// Bumps the (Rust) crasher at `path` and returns its count, which survives only a resume.
async fn bump(probe: &mut Probe, path: &str) -> u32 {
    tell_from(probe, path, &Crash::Bump);
    loop {
        let envelope = next(probe).await;
        if envelope.kind == Crash::KIND {
            match mote_guest::decode::<Crash>(&envelope.kind, &envelope.body).unwrap() {
                Crash::Echo(n) => return n,
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

/// A supervisor in `by-error` mode over two (Rust) crashers: each failure reaches its
/// `supervise` hook (a `kind:error` report), whose directive follows the error text: `resume`
/// keeps the child's state, `restart` resets it, `stop` ends the child (a `terminated` report
/// through its watch), and an error naming none defers to the strategy (restart).
pub async fn supervise_decides_by_error(module: &str, speech: Speech) {
    let system = system_with(&[module, "crasher"]);
    let mut probe = system.probe("p").unwrap();
    let mut decisions = system.subscribe_supervision();
    let init = "one by-error 3 60000 2 crasher /system/p";
    system.spawn("sup", module, init.as_bytes()).unwrap();
    let (c0, c1) = ("/user/sup/c0", "/user/sup/c1");
    wait_until(|| system.lookup(c0).is_some() && system.lookup(c1).is_some()).await;
    assert_eq!(bump(&mut probe, c0).await, 1);

    let mut fail = async |path: &str, why: &str| {
        tell(&system, path, &Crash::Fail(why.into()));
        let decision = next_decision(&mut decisions).await;
        assert_eq!(decision.child.path.as_str(), path);
        assert!(decision.error.contains(why), "{}", decision.error);
        decision.directive
    };
    assert_eq!(fail(c0, "please resume").await, Directive::Resume);
    let seen = report_in(speech, &mut probe, "kind:error").await;
    assert_eq!(seen.from, c0, "the failure reaches the supervise hook");
    assert_eq!(bump(&mut probe, c0).await, 2, "resumed with its state");

    assert_eq!(fail(c0, "do restart").await, Directive::Restart);
    assert_eq!(bump(&mut probe, c0).await, 1, "restarted afresh");
    assert_eq!(
        fail(c0, "no idea").await,
        Directive::Restart,
        "the strategy's"
    );
    assert_eq!(bump(&mut probe, c0).await, 1);

    let before = system.lookup(c1).unwrap();
    assert_eq!(fail(c1, "stop it").await, Directive::Stop);
    let gone = report_in(speech, &mut probe, "terminated").await;
    assert_eq!((gone.from.as_str(), gone.value), (c1, before.incarnation));
    assert!(system.lookup("/user/sup").is_some());
    system.shutdown().await.unwrap();
}

/// A system with the versioned counter's versions 1, 2 and the bad 3 deployed as module
/// `versioned` (v1 current), from the example components `<prefix>1..3`.
pub fn versioned_system(config: HostConfig, prefix: &str) -> ActorSystem {
    let mut config = config;
    config.module_cache(module_cache());
    let system = ActorSystem::new(config).expect("system");
    for v in ["1", "2", "3"] {
        let path = mote_test_programs::path(&format!("{prefix}{v}")).expect("built");
        system
            .deploy_file_version("versioned", v, &path)
            .expect("deploy");
    }
    system
}

/// Sends `Add { stream, n }` for n in `from..to`, waiting (not dropping) when the mailbox is
/// full.
pub async fn feed(
    speech: Speech,
    system: &ActorSystem,
    path: &str,
    stream: u32,
    from: u32,
    to: u32,
) {
    for n in from..to {
        let body = speech.encode(&Versioned::Add { stream, n });
        loop {
            match system.tell(path, Versioned::KIND, body.clone()) {
                Ok(()) => break,
                Err(SendError::MailboxFull { .. }) => tokio::task::yield_now().await,
                Err(e) => panic!("tell: {e}"),
            }
        }
        if n % 256 == 0 {
            tokio::task::yield_now().await;
        }
    }
}

/// The versioned counter (components `<prefix>1..3`) is upgraded from v1 to v2 with its state,
/// refuses v3 (which fails in `migrate`) while v2 keeps its state and serving, and rolls back
/// to v1 with the state.
pub async fn upgrade_keeps_state_refuses_a_bad_version_and_rolls_back(
    prefix: &str,
    speech: Speech,
) {
    let system = versioned_system(HostConfig::new(), prefix);
    let state = async |system: &ActorSystem| -> VersionedState {
        speech.ask(system, "/user/c", &Versioned::Get).await
    };
    system.spawn("c", "versioned", b"").unwrap();
    feed(speech, &system, "/user/c", 1, 0, 10).await;
    let up = system.upgrade("/user/c", "2").await.unwrap();
    assert_eq!(up.upgraded.len(), 1, "{up:?}");
    assert!(up.upgraded[0].migrated);
    feed(speech, &system, "/user/c", 1, 10, 20).await;
    let s = state(&system).await;
    assert_eq!((s.version, s.count, s.migrated_from.as_str()), (2, 20, "1"));
    // v3 fails in migrate: the upgrade fails, v2 keeps its state and keeps serving.
    let bad = system.upgrade("/user/c", "3").await.unwrap();
    assert!(bad.upgraded.is_empty());
    assert_eq!(bad.failed.len(), 1);
    assert!(
        bad.failed[0].1.contains("refused the state"),
        "{:?}",
        bad.failed
    );
    feed(speech, &system, "/user/c", 1, 20, 30).await;
    let s = state(&system).await;
    assert_eq!((s.version, s.count, s.out_of_order), (2, 30, 0));
    // Roll back to v1: the state comes along.
    let back = system.upgrade("/user/c", "1").await.unwrap();
    assert_eq!(back.upgraded.len(), 1);
    feed(speech, &system, "/user/c", 1, 30, 40).await;
    let s = state(&system).await;
    assert_eq!((s.version, s.count, s.out_of_order), (1, 40, 0));
    assert_eq!(s.last, vec![(1, 39)]);
    assert_eq!(s.sum, (0..40).sum::<u64>());
    system.shutdown().await.unwrap();
}

/// An entity module (init: its id) registered under /user/carts with passivation after 100 ms:
/// its total survives passivation, and the next message (to its path, from an old
/// incarnation's point of view) activates a new incarnation with it.
pub async fn a_passivated_entity_reactivates_with_its_state(module: &str, speech: Speech) {
    let dir = TempDir::new("entity");
    let system = system_configured(durable_config(&dir.join("mote.redb")), &[module]);
    let options = EntityOptions {
        passivate_after: Some(Duration::from_millis(100)),
        ..EntityOptions::default()
    };
    system.register_entity("carts", module, options).unwrap();
    speech.tell(&system, "/user/carts/ann", &Entity::Add(5));
    speech.tell(&system, "/user/carts/ann", &Entity::Add(6));
    let value: EntityValue = speech.ask(&system, "/user/carts/ann", &Entity::Get).await;
    assert_eq!(
        (value.id.as_str(), value.total, value.activations),
        ("ann", 11, 1)
    );
    let first = system
        .lookup("/user/carts/ann")
        .expect("live after a message");
    wait_until(|| system.lookup("/user/carts/ann").is_none()).await;
    terminated(&system, &first).await;
    // Addressed by its path: an entity's identity is its path, not an incarnation.
    let probe = system.probe("p").unwrap();
    speech.tell_from(&probe, "/user/carts/ann", &Entity::Add(1));
    let value: EntityValue = speech.ask(&system, "/user/carts/ann", &Entity::Get).await;
    assert_eq!((value.total, value.activations), (12, 2));
    let second = system.lookup("/user/carts/ann").unwrap();
    assert_ne!(second.incarnation, first.incarnation);
    system.shutdown().await.unwrap();
}

/// Entities of `module` under /user/acct: a total survives a host restart (as a second
/// activation), and a retired entity starts afresh.
pub async fn entity_state_survives_a_host_restart_and_retire_deletes_it(
    module: &str,
    speech: Speech,
) {
    let dir = TempDir::new("entity-restart");
    let db = dir.join("mote.redb");
    let get = async |system: &ActorSystem, path: &str| -> EntityValue {
        speech.ask(system, path, &Entity::Get).await
    };
    {
        let system = system_configured(durable_config(&db), &[module]);
        system
            .register_entity("acct", module, EntityOptions::default())
            .unwrap();
        speech.tell(&system, "/user/acct/a", &Entity::Add(40));
        speech.tell(&system, "/user/acct/b", &Entity::Add(2));
        assert_eq!(get(&system, "/user/acct/b").await.total, 2);
        assert_eq!(get(&system, "/user/acct/a").await.total, 40);
        speech.tell(&system, "/user/acct/b", &Entity::Retire);
        wait_until(|| system.lookup("/user/acct/b").is_none()).await;
        system.shutdown().await.unwrap();
    }
    let system = system_configured(durable_config(&db), &[module]);
    system
        .register_entity("acct", module, EntityOptions::default())
        .unwrap();
    let a = get(&system, "/user/acct/a").await;
    assert_eq!((a.total, a.activations), (40, 2));
    let b = get(&system, "/user/acct/b").await;
    assert_eq!(
        (b.total, b.activations),
        (0, 1),
        "a retired entity starts afresh"
    );
    system.shutdown().await.unwrap();
}

/// Sends `kind` with the JSON `body` from outside.
fn tell_json(system: &ActorSystem, to: &str, kind: &str, body: serde_json::Value) {
    system
        .tell(to, kind, serde_json::to_vec(&body).expect("JSON"))
        .unwrap_or_else(|e| panic!("tell {to} {kind}: {e}"));
}

/// The next JSON [`Report`] at the probe with one of `labels`, with the envelope it came in.
async fn report_of(probe: &mut Probe, labels: &[&str]) -> (Report, Envelope) {
    loop {
        let envelope = next(probe).await;
        if envelope.kind != Report::KIND {
            continue;
        }
        let report: Report = Speech::Json.decode(&envelope);
        if labels.contains(&report.label.as_str()) {
            return (report, envelope);
        }
    }
}

/// The `(from, value)` of the next `n` JSON reports labelled `label`, sorted.
async fn reports(probe: &mut Probe, label: &str, n: usize) -> Vec<(String, u64)> {
    let mut got = Vec::new();
    for _ in 0..n {
        let (report, _) = report_of(probe, &[label]).await;
        got.push((report.from, report.value));
    }
    got.sort();
    got
}

/// The features actor of every guest SDK (`py_features`, `c_features`, `js_features`): the
/// contract's messaging, stash, behaviours, reminders, forwarding, priorities, lookup and clock,
/// spoken in JSON. Init: the report path. In `start` it recovers (so it can set reminders),
/// subscribes to topic `features` and joins group `workers`. Every report is the protocol's
/// [`Report`] in JSON (`{"from": <its path>, "label", "value"}`) to the report path.
///
/// | kind, body | what it does | reports |
/// |---|---|---|
/// | `ask-self` `{"n"}` | asks itself `echo` `{"n"}` (deadline 2 s) | `answered` n + 1 (the reply's), from its `answered` hook |
/// | `echo` `{"n"}` | replies `echoed` `{"n": n + 1}` | |
/// | `ask-silent` `{}` | asks itself `silent` (deadline 100 ms), which it ignores | `ask-timeout` 1, from its `ask_timeout` hook |
/// | `publish` `{"n"}` | publishes `news` `{"n"}` to topic `features` | `published` (subscribers reached) |
/// | `news` `{"n"}` | | `news` n |
/// | `broadcast` `{"n"}` | broadcasts `work` `{"n"}` to group `workers` | `broadcast` (members reached) |
/// | `group` `{"n"}` | tells `work` `{"n"}` to one member of `workers` | `grouped` 1 if a member got it |
/// | `work` `{"n"}` | | `work` n |
/// | `close` `{}` | becomes `closed`: there, `add` is stashed and `open` unbecomes and unstashes all | |
/// | `add` `{"n"}` | total += n (when open) | `total` (the new total); when closed `stashed` n |
/// | `remind` `{"delay_ms"}` | a reminder `reminded` `{"n": 1}` to itself | `reminded` n when it arrives |
/// | `remind-cancel` `{"delay_ms"}` | a reminder as above, cancelled at once | `reminder-cancelled` 1 if the cancel found it |
/// | `forward` `{"n"}` | forwards a `Report` `forwarded` n to the report path (its sender stays the original) | |
/// | `urgent` `{"n"}` | tells a `Report` `urgent` n to the report path on the urgent lane | |
/// | `alias` `{}` | takes the alias `feat` | `aliased` 1 if it got `/system/alias/feat` |
/// | `unalias` `{}` | gives the alias `feat` up | `unaliased` 1 if it held it |
/// | `delivery` `{}` | sets at-most-once delivery, reads it back, sets at-least-once again | `delivery` 1 if it read at-most-once |
/// | `inspect` `{}` | | `resolved` 1 if resolving its own path gives its own incarnation; `clock` 1 if its clock has advanced since it started |
pub async fn features_work_through_mote(module: &str) {
    let dir = TempDir::new("features");
    let system = system_configured(durable_config(&dir.join("mote.redb")), &[module]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("a", module, b"/system/p").unwrap();
    system.spawn("b", module, b"/system/p").unwrap();
    let (a, b) = ("/user/a", "/user/b");
    let both = |value: u64| vec![(a.to_string(), value), (b.to_string(), value)];
    // Both have started (and subscribed, and joined) once each answers an inspect.
    for who in [a, b] {
        tell_json(&system, who, "inspect", serde_json::json!({}));
        let (resolved, _) = report_of(&mut probe, &["resolved"]).await;
        assert_eq!((resolved.from.as_str(), resolved.value), (who, 1));
        let (clock, _) = report_of(&mut probe, &["clock"]).await;
        assert_eq!(
            (clock.from.as_str(), clock.value),
            (who, 1),
            "the clock runs"
        );
        let (depth, _) = report_of(&mut probe, &["depth"]).await;
        assert_eq!(
            (depth.from.as_str(), depth.value),
            (who, 1),
            "lookup.mailbox-depth: its own mailbox has a depth, nobody's has none"
        );
    }

    // ask: the reply reaches the `answered` hook; an unanswered ask its `ask_timeout` hook.
    // Asked by itself, it gets the request from the ask's endpoint (`/system/ask/<id>`) too,
    // like the reply: only the reply's n + 1 shows that the request was answered.
    tell_json(&system, a, "ask-self", serde_json::json!({"n": 5}));
    assert_eq!(
        reports(&mut probe, "answered", 1).await,
        vec![(a.into(), 6)]
    );
    tell_json(&system, a, "ask-silent", serde_json::json!({}));
    assert_eq!(
        reports(&mut probe, "ask-timeout", 1).await,
        vec![(a.into(), 1)]
    );

    // pub/sub: both subscribers, the publisher too, get the news.
    tell_json(&system, a, "publish", serde_json::json!({"n": 7}));
    assert_eq!(
        reports(&mut probe, "published", 1).await,
        vec![(a.into(), 2)]
    );
    assert_eq!(reports(&mut probe, "news", 2).await, both(7));

    // groups: a broadcast reaches both members, a group tell exactly one.
    tell_json(&system, a, "broadcast", serde_json::json!({"n": 8}));
    assert_eq!(
        reports(&mut probe, "broadcast", 1).await,
        vec![(a.into(), 2)]
    );
    assert_eq!(reports(&mut probe, "work", 2).await, both(8));
    tell_json(&system, a, "group", serde_json::json!({"n": 9}));
    assert_eq!(reports(&mut probe, "grouped", 1).await, vec![(a.into(), 1)]);
    let one = reports(&mut probe, "work", 1).await;
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].1, 9);

    // behaviours and the stash: closed, adds are stashed; opened, they are handled in order.
    tell_json(&system, a, "close", serde_json::json!({}));
    tell_json(&system, a, "add", serde_json::json!({"n": 1}));
    tell_json(&system, a, "add", serde_json::json!({"n": 2}));
    tell_json(&system, a, "open", serde_json::json!({}));
    tell_json(&system, a, "add", serde_json::json!({"n": 4}));
    let mut seen = Vec::new();
    for _ in 0..5 {
        let (r, _) = report_of(&mut probe, &["stashed", "total"]).await;
        seen.push((r.label, r.value));
    }
    let expected = [
        ("stashed", 1),
        ("stashed", 2),
        ("total", 1),
        ("total", 3),
        ("total", 7),
    ];
    let expected: Vec<(String, u64)> = expected.iter().map(|(l, v)| (l.to_string(), *v)).collect();
    assert_eq!(
        seen, expected,
        "stashed while closed, then replayed in order"
    );

    // reminders: one fires no earlier than its delay; a cancelled one never.
    let sent = Instant::now();
    tell_json(&system, a, "remind", serde_json::json!({"delay_ms": 100}));
    assert_eq!(
        reports(&mut probe, "reminded", 1).await,
        vec![(a.into(), 1)]
    );
    assert!(
        sent.elapsed() >= Duration::from_millis(100),
        "{:?}",
        sent.elapsed()
    );
    tell_json(
        &system,
        a,
        "remind-cancel",
        serde_json::json!({"delay_ms": 200}),
    );
    assert_eq!(
        reports(&mut probe, "reminder-cancelled", 1).await,
        vec![(a.into(), 1)]
    );
    let after = drain_in(Speech::Json, &mut probe, Duration::from_millis(600)).await;
    assert!(
        after.iter().all(|r| r.label != "reminded"),
        "a cancelled reminder fired: {after:?}"
    );

    // forwarding keeps the original sender; the urgent lane delivers.
    let q = system.probe("q").unwrap();
    q.tell(a, "forward", br#"{"n":3}"#.to_vec()).unwrap();
    let (forwarded, envelope) = report_of(&mut probe, &["forwarded"]).await;
    assert_eq!((forwarded.from.as_str(), forwarded.value), (a, 3));
    assert_eq!(
        envelope.sender.as_ref().map(|s| s.path.as_str()),
        Some(q.address().path.as_str()),
        "a forward keeps the original sender"
    );
    tell_json(&system, a, "urgent", serde_json::json!({"n": 4}));
    assert_eq!(reports(&mut probe, "urgent", 1).await, vec![(a.into(), 4)]);

    // naming: an alias reaches the actor until it gives it up; delivery modes.
    tell_json(&system, a, "alias", serde_json::json!({}));
    assert_eq!(reports(&mut probe, "aliased", 1).await, vec![(a.into(), 1)]);
    tell_json(
        &system,
        "/system/alias/feat",
        "news",
        serde_json::json!({"n": 11}),
    );
    assert_eq!(reports(&mut probe, "news", 1).await, vec![(a.into(), 11)]);
    tell_json(&system, a, "unalias", serde_json::json!({}));
    assert_eq!(
        reports(&mut probe, "unaliased", 1).await,
        vec![(a.into(), 1)]
    );
    wait_until(|| system.lookup("/system/alias/feat").is_none()).await;
    tell_json(&system, a, "delivery", serde_json::json!({}));
    assert_eq!(
        reports(&mut probe, "delivery", 1).await,
        vec![(a.into(), 1)]
    );
    system.shutdown().await.unwrap();
}

/// A system (on `db`) with `<prefix>1` of the versioned counter deployed as `versioned`
/// version 1 with the `snapshot` grant.
pub fn snapshot_system(db: &std::path::Path, prefix: &str) -> ActorSystem {
    let mut config = durable_config(db);
    config.module_cache(module_cache());
    let system = ActorSystem::new(config).expect("system");
    deploy_with_snapshots(&system, "versioned", "1", &format!("{prefix}1"));
    system
}

/// The state of the versioned counter after `Add { stream: 0, n }` for n in `0..count`.
fn counted(count: u32) -> (u64, u64) {
    (
        u64::from(count),
        u64::from(count) * u64::from(count.saturating_sub(1)) / 2,
    )
}

/// The versioned counter (`<prefix>1`, deployed with snapshots on), which keeps its count in
/// memory only: a snapshot restored elsewhere has the state of when it was taken while the
/// original runs on; a damaged image is refused and spawns nothing; an actor that hibernates
/// when idle wakes with its state at each next message; an entity passivated as an image
/// comes back with its state after a host restart, with no persistence code.
pub async fn an_image_keeps_in_memory_state_across_restore_and_a_host_restart(
    prefix: &str,
    speech: Speech,
) {
    let dir = TempDir::new("images");
    let db = dir.join("mote.redb");
    let state = async |system: &ActorSystem, path: &str| -> VersionedState {
        speech.ask(system, path, &Versioned::Get).await
    };
    {
        let system = snapshot_system(&db, prefix);
        system.spawn("c", "versioned", b"").unwrap();
        feed(speech, &system, "/user/c", 0, 0, 100).await;
        let before = state(&system, "/user/c").await;
        assert_eq!((before.count, before.sum), counted(100));
        let image = system.snapshot("/user/c").await.expect("a snapshot");
        feed(speech, &system, "/user/c", 0, 100, 150).await;
        assert_eq!(
            (state(&system, "/user/c").await.count),
            150,
            "the original runs on"
        );

        let at = system
            .restore(&image, Some("/user/d"), SpawnOptions::default())
            .await
            .expect("a restore");
        assert_eq!(at.path.as_str(), "/user/d");
        let restored = state(&system, "/user/d").await;
        assert_eq!(
            restored, before,
            "the image's state, not the original's now"
        );
        feed(speech, &system, "/user/d", 0, 100, 110).await;
        let on = state(&system, "/user/d").await;
        assert_eq!(
            (on.count, on.sum, on.out_of_order),
            (110, counted(110).1, 0)
        );

        let mut damaged = image.clone();
        let middle = damaged.len() / 2;
        damaged[middle] ^= 0x10;
        let refused = system
            .restore(&damaged, Some("/user/e"), SpawnOptions::default())
            .await;
        assert!(
            matches!(refused, Err(SnapshotError::Image(ImageError::Corrupt(_)))),
            "{refused:?}"
        );
        assert!(system.lookup("/user/e").is_none(), "nothing was spawned");
        let taken = system.restore(&image, None, SpawnOptions::default()).await;
        assert!(
            matches!(taken, Err(SnapshotError::Spawn(SpawnError::NameTaken(_)))),
            "where it was taken, /user/c still lives: {taken:?}"
        );

        // Idle for 100 ms, /user/h gives up its instance for an image (it holds no memory
        // then), and the next message wakes it with its state, each time it sleeps.
        let asleep = SpawnOptions {
            hibernate_after: Some(Duration::from_millis(100)),
            ..SpawnOptions::default()
        };
        let h = system.spawn_with("h", "versioned", b"", asleep).unwrap();
        for round in 0..3u32 {
            let (from, to) = (round * 20, round * 20 + 20);
            feed(speech, &system, "/user/h", 0, from, to).await;
            wait_until(|| stats_of(&system, &h).hibernations > u64::from(round)).await;
            assert_eq!(
                stats_of(&system, &h).memory_bytes,
                0,
                "asleep, it holds no instance"
            );
            let woke = state(&system, "/user/h").await;
            assert_eq!(
                (woke.count, woke.sum, woke.out_of_order),
                (u64::from(to), counted(to).1, 0),
                "round {round}: woken with its state"
            );
        }
        assert_eq!(
            system.lookup("/user/h"),
            Some(h),
            "one incarnation throughout"
        );

        let options = EntityOptions {
            passivate_after: Some(Duration::from_millis(100)),
            ..EntityOptions::default()
        };
        system
            .register_entity("counters", "versioned", options)
            .unwrap();
        feed(speech, &system, "/user/counters/7", 0, 0, 40).await;
        assert_eq!(state(&system, "/user/counters/7").await.count, 40);
        let first = system.lookup("/user/counters/7").expect("live");
        wait_until(|| system.lookup("/user/counters/7").is_none()).await;
        terminated(&system, &first).await;
        system.shutdown().await.unwrap();
    }
    let system = snapshot_system(&db, prefix);
    let options = EntityOptions {
        passivate_after: Some(Duration::from_secs(60)),
        ..EntityOptions::default()
    };
    system
        .register_entity("counters", "versioned", options)
        .unwrap();
    let back = state(&system, "/user/counters/7").await;
    assert_eq!(
        (back.count, back.sum, back.out_of_order),
        (40, counted(40).1, 0),
        "passivated as an image, restored after a host restart"
    );
    feed(speech, &system, "/user/counters/7", 0, 40, 45).await;
    assert_eq!(state(&system, "/user/counters/7").await.count, 45);
    system.shutdown().await.unwrap();
}
