//! Replay: a durable actor's history is recovered up to any event in a sandbox of its own,
//! which answers questions with the state of that moment, releases nothing and never writes
//! the database.

use mote_example_protocol::{Entity, EntityValue, Journal, JournalState, Ledger, LedgerState};
use mote_guest::Message;
use mote_host::{EntityOptions, Replay, ReplayError, ReplayOptions};
use mote_tests::*;

/// The values the journal actor is given, one event each.
const VALUES: [u64; 7] = [10, 20, 30, 40, 50, 60, 70];

/// Replay options up to `until`, with the tests' shared compiled-module cache.
fn until(until: Option<u64>) -> ReplayOptions {
    let mut options = ReplayOptions {
        until,
        ..ReplayOptions::default()
    };
    options.config.module_cache(module_cache());
    options
}

/// Asks the replayed actor with a typed request and decodes its typed reply.
async fn ask<M: Message, R: Message>(replay: &mut Replay, msg: &M) -> R {
    let body = mote_guest::encode(msg).expect("encode");
    let reply = replay
        .ask(M::KIND, body)
        .await
        .expect("the replayed actor answers")
        .expect("it replies");
    mote_guest::decode(&reply.kind, &reply.body).expect("a reply of the expected type")
}

async fn open(db: &std::path::Path, pid: &str, options: ReplayOptions) -> Replay {
    Replay::open(db, pid, options)
        .await
        .unwrap_or_else(|e| panic!("replay of {pid}: {e}"))
}

/// A journal at /user/j that snapshots every 3 events, given [`VALUES`]: its snapshot is at
/// event 6 (the one at 3 was replaced) and it keeps every event.
async fn journal(db: &std::path::Path) {
    let system = system_configured(durable_config(db), &["journal"]);
    system.spawn("j", "journal", b"3").unwrap();
    for v in VALUES {
        tell(&system, "/user/j", &Journal::Append(v));
    }
    let state = ask_as::<Journal, JournalState>(&system, "/user/j", &Journal::Query).await;
    assert_eq!(state.values, VALUES);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_s_state_is_replayed_and_the_database_stays_byte_identical() {
    let dir = TempDir::new("replay-journal");
    let db = dir.join("mote.redb");
    journal(&db).await;
    let before = std::fs::read(&db).unwrap();
    for seq in 0..=7u64 {
        let mut replay = open(&db, "journal:/user/j", until(Some(seq))).await;
        let recovered = replay.recovered().clone();
        assert_eq!(
            (recovered.module.as_str(), recovered.version.as_str()),
            ("journal", "0")
        );
        assert_eq!(recovered.path, "/user/j");
        assert!(recovered.recorded, "the database recorded the writer");
        assert_eq!((recovered.until, recovered.last), (seq, 7));
        assert_eq!(recovered.latest_snapshot, Some(6));
        // The snapshot at 6 serves 6 and 7; before it, recovery starts from the first event.
        let from = if seq >= 6 { Some(6) } else { None };
        assert_eq!(recovered.snapshot, from, "at {seq}");
        assert_eq!(recovered.events_read, seq - from.unwrap_or(0), "at {seq}");
        let state: JournalState = ask(&mut replay, &Journal::Query).await;
        assert_eq!(
            state.values,
            VALUES[..seq as usize],
            "the state at event {seq}"
        );
        assert_eq!(state.recovered_from_snapshot, from.is_some());
        assert_eq!(state.replayed, seq - from.unwrap_or(0));
        assert!(replay.dropped().is_empty(), "a query drops nothing");
    }
    let mut latest = open(&db, "journal:/user/j", until(None)).await;
    assert_eq!(
        latest.recovered().until,
        7,
        "without --until: the latest event"
    );
    // A write in the sandbox changes the actor's memory and is dropped.
    let appended = latest
        .ask(
            Journal::KIND,
            mote_guest::encode(&Journal::Append(80)).unwrap(),
        )
        .await
        .unwrap();
    assert!(appended.is_none(), "Append sends no reply");
    let dropped = latest.dropped();
    assert_eq!((dropped.events, dropped.sends), (1, 0));
    let state: JournalState = ask(&mut latest, &Journal::Query).await;
    assert_eq!(state.values.last(), Some(&80));
    drop(latest);
    assert!(
        std::fs::read(&db).unwrap() == before,
        "the database file is byte-identical after the replays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_past_the_end_an_unknown_id_and_a_held_file_are_typed_errors() {
    let dir = TempDir::new("replay-errors");
    let db = dir.join("mote.redb");
    journal(&db).await;
    match Replay::open(&db, "journal:/user/j", until(Some(8))).await {
        Err(ReplayError::BeyondJournal { until, last, .. }) => assert_eq!((until, last), (8, 7)),
        Err(e) => panic!("expected BeyondJournal, got {e}"),
        Ok(_) => panic!("expected BeyondJournal, got a replay"),
    }
    match Replay::open(&db, "journal:/user/nobody", until(None)).await {
        Err(ReplayError::UnknownId { pid, known }) => {
            assert_eq!(pid, "journal:/user/nobody");
            assert_eq!(
                known,
                ["journal:/user/j"],
                "the error names the ids there are"
            );
        }
        Err(e) => panic!("expected UnknownId, got {e}"),
        Ok(_) => panic!("expected UnknownId, got a replay"),
    }
    // Not a database, or no file at all: the database's own one-line errors.
    let junk = dir.join("junk.redb");
    std::fs::write(&junk, b"not a database").unwrap();
    for file in [junk.clone(), dir.join("missing.redb")] {
        match Replay::open(&file, "journal:/user/j", until(None)).await {
            Err(e @ ReplayError::Database(_)) => {
                assert!(e.to_string().contains("cannot open database"), "{e}");
            }
            Err(e) => panic!("expected a database error, got {e}"),
            Ok(_) => panic!("expected a database error, got a replay"),
        }
    }
    assert_eq!(std::fs::read(&junk).unwrap(), b"not a database");
    // A host that has the file open holds redb's lock: the replay names the fix.
    let system = system_configured(durable_config(&db), &["journal"]);
    match Replay::open(&db, "journal:/user/j", until(None)).await {
        Err(e @ ReplayError::InUse { .. }) => {
            assert!(e.to_string().contains("stop the host"), "{e}");
        }
        Err(e) => panic!("expected InUse, got {e}"),
        Ok(_) => panic!("expected InUse, got a replay"),
    }
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_deleted_behind_a_snapshot_is_replayable_only_from_the_snapshot_on() {
    let dir = TempDir::new("replay-sink");
    let db = dir.join("mote.redb");
    {
        // The sink snapshots every 64 events and deletes the events the snapshot covers.
        let system = system_configured(durable_config(&db), &["ledger"]);
        system.spawn("sink", "ledger", b"sink").unwrap();
        for n in 1..=70 {
            tell(&system, "/user/sink", &Ledger::Count(n));
        }
        let state = ask_as::<Ledger, LedgerState>(&system, "/user/sink", &Ledger::Query).await;
        assert_eq!(state.count, 70);
        system.shutdown().await.unwrap();
    }
    match Replay::open(&db, "ledger:/user/sink", until(Some(10))).await {
        Err(e @ ReplayError::HistoryGone { .. }) => {
            let ReplayError::HistoryGone { earliest, .. } = &e else {
                unreachable!()
            };
            assert_eq!(*earliest, Some(64), "{e}");
        }
        Err(e) => panic!("expected HistoryGone, got {e}"),
        Ok(_) => panic!("expected HistoryGone, got a replay"),
    }
    for (seq, sum) in [(64, (1..=64).sum::<u64>()), (67, (1..=67).sum())] {
        let mut replay = open(&db, "ledger:/user/sink", until(Some(seq))).await;
        assert_eq!(replay.recovered().snapshot, Some(64));
        let state: LedgerState = ask(&mut replay, &Ledger::Query).await;
        assert_eq!(
            (state.count, state.sum),
            (seq, sum),
            "the sink at event {seq}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_actor_s_sends_and_writes_reach_nobody() {
    let dir = TempDir::new("replay-source");
    let db = dir.join("mote.redb");
    {
        // A source that sent its 3 increments (to a path nobody lives at).
        let system = system_configured(durable_config(&db), &["ledger"]);
        system
            .spawn("source", "ledger", b"source 3 /user/nobody")
            .unwrap();
        let deadline = std::time::Instant::now() + DEADLINE;
        while ask_as::<Ledger, LedgerState>(&system, "/user/source", &Ledger::Query)
            .await
            .count
            < 3
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the source never sent 3"
            );
        }
        system.shutdown().await.unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    // Started as a source of 5, it sends itself `Next` at once, and each `Next` sends an
    // increment, saves a snapshot and sends `Next` again.
    let mut options = until(None);
    options.init = Some(b"source 5 /user/nobody".to_vec());
    let mut replay = open(&db, "ledger:/user/source", options).await;
    assert_eq!(replay.dropped().sends, 1, "its Next to itself, from start");
    let state: LedgerState = ask(&mut replay, &Ledger::Query).await;
    assert_eq!(
        state.count, 3,
        "its Next never reached it: nothing was delivered"
    );
    let reply = replay
        .ask(Ledger::KIND, mote_guest::encode(&Ledger::Next).unwrap())
        .await
        .unwrap();
    assert!(reply.is_none());
    let dropped = replay.dropped();
    assert_eq!((dropped.sends, dropped.snapshots), (3, 1), "{dropped:?}");
    let state: LedgerState = ask(&mut replay, &Ledger::Query).await;
    assert_eq!(state.count, 4, "the sandbox's memory took the step");
    drop(replay);
    assert!(std::fs::read(&db).unwrap() == before, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entity_is_replayed_under_its_kind_and_a_removed_module_can_be_given_as_a_file() {
    let dir = TempDir::new("replay-entity");
    let db = dir.join("mote.redb");
    {
        let system = system_configured(durable_config(&db), &["entity", "journal"]);
        system
            .register_entity("counters", "entity", EntityOptions::default())
            .unwrap();
        for k in [5, 6, 7] {
            tell(&system, "/user/counters/alice", &Entity::Add(k));
        }
        let value =
            ask_as::<Entity, EntityValue>(&system, "/user/counters/alice", &Entity::Get).await;
        assert_eq!(value.total, 18);
        // The journal's module version leaves the registry after its actor wrote.
        let j = system.spawn("j", "journal", b"0").unwrap();
        tell(&system, "/user/j", &Journal::Append(1));
        ask_as::<Journal, JournalState>(&system, "/user/j", &Journal::Query).await;
        assert!(system.stop("/user/j"));
        terminated(&system, &j).await;
        system.remove_module("journal", None).unwrap();
        system.shutdown().await.unwrap();
    }
    let mut replay = open(&db, "@counters:/user/counters/alice", until(None)).await;
    assert_eq!(replay.recovered().path, "/user/counters/alice");
    assert_eq!(replay.recovered().module, "entity");
    let value: EntityValue = ask(&mut replay, &Entity::Get).await;
    assert_eq!((value.id.as_str(), value.total), ("alice", 18));
    assert_eq!(
        replay.dropped().snapshots,
        1,
        "its start saves one, dropped"
    );

    match Replay::open(&db, "journal:/user/j", until(None)).await {
        Err(e @ ReplayError::ModuleMissing { .. }) => {
            assert!(e.to_string().contains("--module FILE"), "{e}");
        }
        Err(e) => panic!("expected ModuleMissing, got {e}"),
        Ok(_) => panic!("expected ModuleMissing, got a replay"),
    }
    let mut options = until(None);
    let path = mote_test_programs::path("journal").unwrap();
    options.module = Some(std::fs::read(path).unwrap());
    let mut replay = open(&db, "journal:/user/j", options).await;
    assert_eq!(replay.recovered().version, "file");
    let state: JournalState = ask(&mut replay, &Journal::Query).await;
    assert_eq!(state.values, [1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_module_version_that_wrote_an_event_is_the_one_replayed_for_it() {
    let dir = TempDir::new("replay-versions");
    let db = dir.join("mote.redb");
    {
        let system = system_configured(durable_config(&db), &[]);
        let bytes = std::fs::read(mote_test_programs::path("journal").unwrap()).unwrap();
        system.deploy_version("journal", "1", &bytes).unwrap();
        system.deploy_version("journal", "2", &bytes).unwrap();
        system.spawn("j", "journal", b"0").unwrap();
        for v in [1, 2, 3] {
            tell(&system, "/user/j", &Journal::Append(v));
        }
        ask_as::<Journal, JournalState>(&system, "/user/j", &Journal::Query).await;
        let report = system.upgrade("/user/j", "2").await.unwrap();
        assert_eq!(report.upgraded.len(), 1);
        for v in [4, 5] {
            tell(&system, "/user/j", &Journal::Append(v));
        }
        let state = ask_as::<Journal, JournalState>(&system, "/user/j", &Journal::Query).await;
        assert_eq!(state.values, [1, 2, 3, 4, 5]);
        system.shutdown().await.unwrap();
    }
    for (seq, version) in [(0, "1"), (3, "1"), (4, "2"), (5, "2")] {
        let mut replay = open(&db, "journal:/user/j", until(Some(seq))).await;
        assert_eq!(replay.recovered().version, version, "at event {seq}");
        let state: JournalState = ask(&mut replay, &Journal::Query).await;
        assert_eq!(state.values.len() as u64, seq);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_the_replayed_actor_stashes_come_back_to_it_when_it_unstashes_them() {
    let dir = TempDir::new("replay-stasher");
    let db = dir.join("mote.redb");
    {
        // A stasher takes counts in batches of 3: it stashes two, then unstashes all three.
        let system = system_configured(durable_config(&db), &["ledger"]);
        system.spawn("s", "ledger", b"stasher 3").unwrap();
        for n in 1..=3 {
            tell(&system, "/user/s", &Ledger::Count(n));
        }
        let state = ask_as::<Ledger, LedgerState>(&system, "/user/s", &Ledger::Query).await;
        assert_eq!(state.count, 3);
        system.shutdown().await.unwrap();
    }
    let mut replay = open(&db, "ledger:/user/s", until(None)).await;
    for n in 4..=6 {
        let body = mote_guest::encode(&Ledger::Count(n)).unwrap();
        assert!(replay.ask(Ledger::KIND, body).await.unwrap().is_none());
    }
    let state: LedgerState = ask(&mut replay, &Ledger::Query).await;
    assert_eq!(
        state.count, 6,
        "the batch was stashed, unstashed and taken, in order"
    );
    assert_eq!(state.gaps, 0);
    assert_eq!(replay.dropped().events, 3);
}
