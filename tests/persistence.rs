//! Persistence: snapshots and event journals survive host restarts and supervision restarts,
//! replay keeps order, reminders outlive the host, entities passivate and come back with their
//! state, and a damaged database is a clear error.

use std::time::Duration;

use mote_example_protocol::{Entity, EntityValue, Journal, JournalState, Remind};
use mote_host::{ActorSystem, EntityOptions, HostError};
use mote_tests::*;

async fn journal_state(system: &ActorSystem, path: &str) -> JournalState {
    ask_as::<Journal, JournalState>(system, path, &Journal::Query).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_and_events_recover_the_exact_state_after_a_host_restart() {
    scenarios::journal_recovers_after_a_host_restart("journal", Speech::Postcard).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_returns_events_in_the_order_they_were_persisted_across_pages() {
    let dir = TempDir::new("replay");
    let db = dir.join("mote.redb");
    // More than one replay page (1,024 events), values out of numeric order.
    let values: Vec<u64> = (0..1500u64).map(|i| (i * 48_271) % 9_973).collect();
    {
        let system = system_configured(durable_config(&db), &["journal"]);
        system.spawn("j", "journal", b"0").unwrap();
        for v in &values {
            tell(&system, "/user/j", &Journal::Append(*v));
        }
        assert_eq!(journal_state(&system, "/user/j").await.values, values);
        system.shutdown().await.unwrap();
    }
    let system = system_configured(durable_config(&db), &["journal"]);
    system.spawn("j", "journal", b"0").unwrap();
    let state = journal_state(&system, "/user/j").await;
    assert!(!state.recovered_from_snapshot);
    assert_eq!(state.replayed, values.len() as u64);
    assert_eq!(state.values, values);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_persistent_actor_recovers_its_committed_state() {
    scenarios::a_restarted_journal_recovers_its_committed_state("journal", Speech::Postcard).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_state_is_gone_for_the_next_incarnation() {
    let dir = TempDir::new("forget");
    let system = system_configured(durable_config(&dir.join("mote.redb")), &["journal"]);
    let first = system.spawn("j", "journal", b"2").unwrap();
    for v in [9, 8, 7] {
        tell(&system, "/user/j", &Journal::Append(v));
    }
    assert_eq!(
        journal_state(&system, "/user/j").await.values,
        vec![9, 8, 7]
    );
    tell(&system, "/user/j", &Journal::Forget);
    terminated(&system, &first).await;
    system.spawn("j", "journal", b"2").unwrap();
    let state = journal_state(&system, "/user/j").await;
    assert!(state.values.is_empty());
    assert!(!state.recovered_from_snapshot);
    system.shutdown().await.unwrap();
}

/// A host on `db` with the reminder actor at /user/r reporting to the probe /system/p.
fn reminder_host(db: &std::path::Path) -> (ActorSystem, mote_host::Probe) {
    let system = system_configured(durable_config(db), &["reminder"]);
    let probe = system.probe("p").unwrap();
    system.spawn("r", "reminder", b"/system/p").unwrap();
    (system, probe)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_timer_fires_after_a_host_restart() {
    let dir = TempDir::new("reminder");
    let db = dir.join("mote.redb");
    {
        let (system, mut probe) = reminder_host(&db);
        // Long enough that this host is gone before it is due.
        tell(
            &system,
            "/user/r",
            &Remind::Arm {
                tag: 7,
                delay_ms: 1500,
            },
        );
        report_labelled(&mut probe, "armed").await;
        system.shutdown().await.unwrap();
    }
    {
        let (system, mut probe) = reminder_host(&db);
        let fired = report_labelled(&mut probe, "fired").await;
        assert_eq!(fired.value, 7);
        system.shutdown().await.unwrap();
    }
    // Fired and acknowledged: a third host does not fire it again. A fresh short reminder is the
    // fence: had tag 7 been left, it would have been due at once, before tag 8.
    let (system, mut probe) = reminder_host(&db);
    tell(
        &system,
        "/user/r",
        &Remind::Arm {
            tag: 8,
            delay_ms: 50,
        },
    );
    assert_eq!(report_labelled(&mut probe, "fired").await.value, 8);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passivated_entity_reactivates_with_its_state() {
    scenarios::a_passivated_entity_reactivates_with_its_state("entity", Speech::Postcard).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entity_state_survives_a_host_restart_and_retire_deletes_it() {
    scenarios::entity_state_survives_a_host_restart_and_retire_deletes_it(
        "entity",
        Speech::Postcard,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_database_recover_is_refused_clearly() {
    let system = system_with(&["journal"]);
    let mut decisions = system.subscribe_supervision();
    system.spawn("j", "journal", b"0").unwrap();
    let decision = next_decision(&mut decisions).await;
    assert!(
        decision.error.contains("without a database"),
        "{}",
        decision.error
    );
    system.shutdown().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_or_foreign_database_is_a_clear_error() {
    let dir = TempDir::new("corrupt");
    let garbage = dir.join("garbage.redb");
    std::fs::write(&garbage, b"this is not a database at all, just text").unwrap();
    let err = ActorSystem::new(durable_config(&garbage))
        .err()
        .expect("refused");
    assert!(matches!(err, HostError::Store(_)));
    let text = err.to_string();
    assert!(
        text.contains("garbage.redb") && text.contains("Not a redb database"),
        "{text}"
    );

    // A real Mote database, cut short.
    let good = dir.join("good.redb");
    {
        let system = system_configured(durable_config(&good), &["journal"]);
        system.spawn("j", "journal", b"0").unwrap();
        tell(&system, "/user/j", &Journal::Append(1));
        assert_eq!(journal_state(&system, "/user/j").await.values, vec![1]);
        system.shutdown().await.unwrap();
    }
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.join("cut.redb");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let text = ActorSystem::new(durable_config(&cut))
        .err()
        .expect("refused")
        .to_string();
    assert!(
        text.contains("cut.redb") && text.contains("corrupt"),
        "{text}"
    );
    // The intact file still opens.
    let system = system_configured(durable_config(&good), &["journal"]);
    system.spawn("j", "journal", b"0").unwrap();
    assert_eq!(journal_state(&system, "/user/j").await.values, vec![1]);
    system.shutdown().await.unwrap();

    // A redb file some other program wrote.
    let foreign = dir.join("foreign.redb");
    {
        let db = redb::Database::create(&foreign).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn
                .open_table(redb::TableDefinition::<&str, u64>::new("theirs"))
                .unwrap();
            t.insert("k", 1).unwrap();
        }
        txn.commit().unwrap();
    }
    let text = ActorSystem::new(durable_config(&foreign))
        .err()
        .expect("refused")
        .to_string();
    assert!(text.contains("not a Mote store"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_entities_addressed_once_each_with_bounded_live_instances() {
    const ENTITIES: u64 = 100_000;
    const BATCH: u64 = 1_000;
    const LIVE_BOUND: usize = 20_000;
    let dir = TempDir::new("entities");
    let system = system_configured(durable_config(&dir.join("mote.redb")), &["entity"]);
    let options = EntityOptions {
        passivate_after: Some(Duration::from_millis(100)),
        ..EntityOptions::default()
    };
    system.register_entity("e", "entity", options).unwrap();
    let baseline = system.live_actors();
    let mut most_live = 0;
    for batch in 0..ENTITIES / BATCH {
        for i in batch * BATCH..(batch + 1) * BATCH {
            tell(&system, &format!("/user/e/{i}"), &Entity::Add(i));
        }
        // The batch's last entity answers once it has handled its Add: the batch is under way.
        let last = (batch + 1) * BATCH - 1;
        let value: EntityValue = ask_as(&system, &format!("/user/e/{last}"), &Entity::Get).await;
        assert_eq!(value.total, last);
        most_live = most_live.max(system.live_actors() - baseline);
    }
    assert!(
        most_live <= LIVE_BOUND,
        "{most_live} entities were live at once (bound {LIVE_BOUND})"
    );
    wait_until(|| system.live_actors() == baseline).await;
    // Every entity kept its state through passivation; a sample comes back with it.
    for i in (0..ENTITIES).step_by(9_973) {
        let value: EntityValue = ask_as(&system, &format!("/user/e/{i}"), &Entity::Get).await;
        assert_eq!((value.total, value.activations), (i, 2), "entity {i}");
    }
    eprintln!("100k entities: at most {most_live} live at once");
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_save_is_an_error_the_actor_sees_and_nothing_is_half_written() {
    let dir = TempDir::new("too-large");
    let mut config = durable_config(&dir.join("mote.redb"));
    // Room for a snapshot of two values, not three.
    config.max_state_bytes(3);
    let system = system_configured(config, &["journal"]);
    let mut decisions = system.subscribe_supervision();
    system.spawn("j", "journal", b"1").unwrap();
    tell(&system, "/user/j", &Journal::Append(1));
    tell(&system, "/user/j", &Journal::Append(2));
    assert_eq!(journal_state(&system, "/user/j").await.values, vec![1, 2]);
    // The third snapshot is refused: `save_snapshot` returns the error, the journal's receive
    // fails with it, and the step (its event too) is not committed.
    tell(&system, "/user/j", &Journal::Append(300));
    let decision = next_decision(&mut decisions).await;
    assert!(decision.error.contains("too large"), "{}", decision.error);
    let state = journal_state(&system, "/user/j").await;
    assert_eq!(
        state.values,
        vec![1, 2],
        "the failed step left nothing behind"
    );
    system.shutdown().await.unwrap();
}
