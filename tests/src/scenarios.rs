//! Scenarios shared by the tests of the Rust example actors and their ports to other languages:
//! each takes the module name and the [`Speech`] it speaks, so the same assertions hold for
//! every SDK.

use std::time::{Duration, Instant};

use mote_example_protocol::{
    Crash, Entity, EntityValue, Journal, JournalState, Report, Timer, Versioned, VersionedState,
};
use mote_guest::Message;
use mote_host::{Directive, EntityOptions, Probe, SendError};

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
