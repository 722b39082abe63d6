//! Each invariant of the JetStream log, on a real nats-server.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use mote_nats_server::NatsServer;
use proptest::prelude::*;

use super::*;

/// How long a condition may take before a test fails.
const DEADLINE: Duration = Duration::from_secs(30);

/// A short lease, so that a dead node's leases free up within a test.
const SHORT_LEASE: Duration = Duration::from_secs(1);

async fn open(server: &NatsServer, node: &str) -> Log {
    open_with(server, node, |_| {}).await
}

async fn open_with(server: &NatsServer, node: &str, tune: impl FnOnce(&mut StoreConfig)) -> Log {
    let mut config = StoreConfig::new(&server.url, node);
    tune(&mut config);
    Log::open(config).await.expect("storage opens")
}

fn short_lease(config: &mut StoreConfig) {
    config.lease = SHORT_LEASE;
}

/// A client of the server's own, to act behind the logs' backs.
async fn raw(server: &NatsServer) -> jetstream::Context {
    jetstream::new(
        async_nats::connect(server.url.as_str())
            .await
            .expect("a raw client"),
    )
}

/// Another id in the same shard as `pid`.
fn neighbour(log: &Log, pid: &str) -> String {
    (0..)
        .map(|i| format!("{pid}-neighbour-{i}"))
        .find(|other| log.shard(other) == log.shard(pid))
        .expect("some id shares the shard")
}

/// Appends `bodies` to `pid` in order, each after the last; their sequences.
async fn append_all(log: &Log, pid: &str, bodies: &[&[u8]]) -> Vec<u64> {
    let mut last = log.last(pid).await.expect("last");
    let mut sequences = Vec::new();
    for body in bodies {
        let id = format!("{pid}:{last}");
        last = log
            .append(pid, last, &id, body.to_vec())
            .await
            .expect("append");
        sequences.push(last);
    }
    sequences
}

/// Polls `take` until it stops answering `Held`, or panics after [`DEADLINE`].
async fn take_when_free(log: &Log, pid: &str) -> u64 {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match log.take(pid).await {
            Ok(revision) => return revision,
            Err(TakeError::Held { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("take {pid}: {e}"),
        }
    }
}

/// Waits until `lost` reports `true`, or panics after [`DEADLINE`].
async fn until_lost(log: &Log) {
    let mut lost = log.lost();
    tokio::time::timeout(DEADLINE, lost.wait_for(|lost| *lost))
        .await
        .expect("liveness lost within the deadline")
        .expect("the liveness signal");
}

#[test]
fn shards_are_fnv1a_64_of_the_id_so_every_build_agrees() {
    // The published FNV-1a 64 test vectors.
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    assert_eq!(shard_of("a", 4), (0xaf63_dc4c_8601_ec8c_u64 % 4) as u32);
    assert_eq!(
        shard_of("foobar", 7),
        (0x8594_4171_f739_67e8_u64 % 7) as u32
    );
}

#[test]
fn an_id_outside_1_to_1024_bytes_is_refused() {
    assert!(matches!(
        token(""),
        Err(JetStreamError::InvalidPid { len: 0 })
    ));
    let long = "x".repeat(MAX_PID + 1);
    assert!(matches!(
        token(&long),
        Err(JetStreamError::InvalidPid { len: 1025 })
    ));
    assert!(token(&"x".repeat(MAX_PID)).is_ok());
}

proptest! {
    #[test]
    fn every_id_is_one_subject_token_that_gives_it_back(pid in "\\PC{1,256}") {
        prop_assume!(pid.len() <= MAX_PID);
        let token = token(&pid).expect("a token");
        prop_assert!(token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        let back = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&token).expect("base64url");
        prop_assert_eq!(back, pid.as_bytes());
    }
}

#[tokio::test]
async fn records_read_back_in_order_after_a_sequence_and_ids_sharing_a_shard_do_not_mix() {
    let server = NatsServer::start(&[]);
    let log = open(&server, "a").await;
    let pid = "/user/counter/1";
    let other = neighbour(&log, pid);
    assert_eq!(log.last(pid).await.expect("last"), 0, "no records yet");
    assert!(log.read(pid, 0, 100).await.expect("read").is_empty());

    let mut mine = Vec::new();
    for i in 0..5u8 {
        mine.extend(append_all(&log, pid, &[&[i]]).await);
        append_all(&log, &other, &[&[100 + i]]).await;
    }
    let read = log.read(pid, 0, 100).await.expect("read");
    assert_eq!(
        read,
        (0..5u8)
            .zip(&mine)
            .map(|(i, &s)| (s, vec![i]))
            .collect::<Vec<_>>(),
        "all of its records, in order, none of the neighbour's"
    );
    assert_eq!(log.last(pid).await.expect("last"), mine[4]);
    assert_eq!(
        log.read(pid, mine[1], 100).await.expect("read"),
        read[2..],
        "after a sequence: only later records"
    );
    assert_eq!(log.read(pid, mine[1], 2).await.expect("read"), read[2..4]);
    assert!(log.read(pid, mine[4], 100).await.expect("read").is_empty());

    let mut records = log.records(&other, 0).await.expect("records");
    let mut theirs = Vec::new();
    while let Some(record) = records.next().await {
        theirs.push(record.expect("a record").1[0]);
    }
    assert_eq!(theirs, [100, 101, 102, 103, 104]);
    assert_eq!(log.stats().appends, 10);
}

#[tokio::test]
async fn any_id_up_to_1024_bytes_has_records_a_checkpoint_and_a_lease() {
    let server = NatsServer::start(&[]);
    let log = open(&server, "a").await;
    let odd = "a.b *>\t é/".repeat(200);
    let pid = &odd[..odd.floor_char_boundary(MAX_PID)];
    let sequences = append_all(&log, pid, &[b"one", b"two"]).await;
    assert_eq!(log.last(pid).await.expect("last"), sequences[1]);
    assert_eq!(log.read(pid, 0, 10).await.expect("read").len(), 2);
    assert!(
        log.put_checkpoint(pid, sequences[1], b"state".to_vec())
            .await
            .expect("checkpoint")
    );
    assert_eq!(
        log.checkpoint(pid).await.expect("checkpoint"),
        Some((sequences[1], b"state".to_vec()))
    );
    log.take(pid).await.expect("take");
    log.purge(pid, 0).await.expect("purge");
    assert_eq!(log.last(pid).await.expect("last"), 0);
}

#[tokio::test]
async fn a_stale_expected_last_is_a_conflict_and_writes_nothing() {
    let server = NatsServer::start(&[]);
    let first = open(&server, "a").await;
    let zombie = open(&server, "b").await;
    let pid = "/user/ledger/7";
    append_all(&first, pid, &[b"genesis"]).await;
    // Both writers read the same tail.
    let tail = first.last(pid).await.expect("last");
    assert_eq!(zombie.last(pid).await.expect("last"), tail);

    let written = first
        .append(pid, tail, "a-1", b"first".to_vec())
        .await
        .expect("the first append");
    let refused = zombie.append(pid, tail, "b-1", b"zombie".to_vec()).await;
    assert!(
        matches!(&refused, Err(AppendError::Conflict { expected, .. }) if *expected == tail),
        "{refused:?}"
    );
    // So is a writer that thinks the id has no records.
    assert!(matches!(
        zombie.append(pid, 0, "b-2", b"zombie".to_vec()).await,
        Err(AppendError::Conflict { .. })
    ));
    assert_eq!(first.last(pid).await.expect("last"), written);
    let bodies: Vec<Vec<u8>> = first
        .read(pid, 0, 10)
        .await
        .expect("read")
        .into_iter()
        .map(|(_, body)| body)
        .collect();
    assert_eq!(bodies, [b"genesis".to_vec(), b"first".to_vec()]);
    assert_eq!(zombie.stats().conflicts, 2);
    assert_eq!(zombie.stats().appends, 0);
}

#[tokio::test]
async fn a_retried_append_is_written_once_and_answers_the_first_sequence() {
    let server = NatsServer::start(&[]);
    let log = open(&server, "a").await;
    let pid = "/user/orders/9";
    let first = log
        .append(pid, 0, "orders-9:0", b"placed".to_vec())
        .await
        .expect("append");
    // The retry's expected tail is stale by now: the duplicate is caught before that check.
    let retried = log
        .append(pid, 0, "orders-9:0", b"placed".to_vec())
        .await
        .expect("the retry");
    assert_eq!(retried, first);
    // A retry that read the tail again first: the stream drops it as a duplicate.
    let reread = log
        .append(pid, first, "orders-9:0", b"placed".to_vec())
        .await
        .expect("the retry after a read");
    assert_eq!(reread, first);
    assert_eq!(log.read(pid, 0, 10).await.expect("read").len(), 1);
    assert_eq!(log.last(pid).await.expect("last"), first);
    let stats = log.stats();
    assert_eq!((stats.appends, stats.duplicates), (1, 2));
}

#[tokio::test]
async fn a_hundred_thousand_records_are_read_in_batches() {
    const COUNT: usize = 100_000;
    let server = NatsServer::start(&[]);
    let log = open(&server, "a").await;
    let pid = "/user/big/history";
    let (subject, _) = log.subject(pid).expect("a subject");
    // Filled by a raw client, acknowledgements pipelined a thousand at a time.
    let js = raw(&server).await;
    let filled = Instant::now();
    for chunk in 0..COUNT / 1000 {
        let mut acks = Vec::with_capacity(1000);
        for i in 0..1000 {
            let body = ((chunk * 1000 + i) as u32).to_be_bytes().to_vec();
            acks.push(
                js.publish(subject.clone(), body.into())
                    .await
                    .expect("publish"),
            );
        }
        for ack in acks {
            ack.await.expect("stored");
        }
    }
    let filled = filled.elapsed();

    let started = Instant::now();
    let records = log.read(pid, 0, usize::MAX).await.expect("read");
    let took = started.elapsed();
    eprintln!("{COUNT} records: written in {filled:?}, read in {took:?}");
    assert_eq!(records.len(), COUNT);
    assert!(records.windows(2).all(|w| w[0].0 < w[1].0), "in order");
    assert_eq!(records[COUNT - 1].1, ((COUNT - 1) as u32).to_be_bytes());
    assert_eq!(log.stats().read, COUNT as u64);
}

#[tokio::test]
async fn a_purge_below_a_sequence_keeps_the_tail_and_a_full_purge_starts_over() {
    let server = NatsServer::start(&[]);
    let log = open(&server, "a").await;
    let pid = "/user/journal/3";
    let other = neighbour(&log, pid);
    let sequences = append_all(&log, pid, &[b"1", b"2", b"3", b"4", b"5"]).await;
    append_all(&log, &other, &[b"theirs"]).await;

    log.purge(pid, sequences[2]).await.expect("purge");
    let kept: Vec<u64> = log
        .read(pid, 0, 10)
        .await
        .expect("read")
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(kept, sequences[2..], "from the sequence on");
    assert_eq!(log.last(pid).await.expect("last"), sequences[4]);
    assert_eq!(log.read(&other, 0, 10).await.expect("read").len(), 1);

    log.purge(pid, 0).await.expect("purge all");
    assert!(log.read(pid, 0, 10).await.expect("read").is_empty());
    assert_eq!(log.last(pid).await.expect("last"), 0);
    assert!(
        log.append(pid, 0, "journal-3:again", b"again".to_vec())
            .await
            .is_ok(),
        "after a full purge the id has no last record"
    );
    assert_eq!(log.read(&other, 0, 10).await.expect("read").len(), 1);
}

#[tokio::test]
async fn an_acknowledgement_purge_keeps_those_stored_after_its_sequence_and_the_records() {
    let server = NatsServer::start(&[]);
    let log = open(&server, "a").await;
    let pid = "/user/sender/1";
    log.acknowledge(pid, 1).await.expect("acknowledge");
    let records = append_all(&log, pid, &[b"step"]).await;
    log.acknowledge(pid, 2).await.expect("acknowledge");
    let (acks, last) = log.acknowledgements(pid).await.expect("read");
    assert_eq!(acks, [1, 2]);
    assert!(last > records[0], "the second is stored after the record");

    // Below the first sequence there is nothing to purge.
    for below in [0, 1] {
        log.purge_acknowledgements(pid, below).await.expect("purge");
        assert_eq!(log.acknowledgements(pid).await.expect("read").0, [1, 2]);
    }
    // A checkpoint of the record purges what was stored before it, not what came since.
    log.purge_acknowledgements(pid, records[0])
        .await
        .expect("purge");
    assert_eq!(log.acknowledgements(pid).await.expect("read").0, [2]);
    assert_eq!(
        log.read(pid, 0, 10).await.expect("read").len(),
        1,
        "records stay"
    );
    log.purge_acknowledgements(pid, last + 1)
        .await
        .expect("purge");
    assert!(log.acknowledgements(pid).await.expect("read").0.is_empty());
}

#[tokio::test]
async fn a_read_whose_rest_is_purged_meanwhile_ends() {
    let server = NatsServer::start(&[]);
    let log = open(&server, "a").await;
    let pid = "/user/journal/4";
    let (subject, _) = log.subject(pid).expect("a subject");
    let js = raw(&server).await;
    let mut acks = Vec::new();
    for i in 0..2000u32 {
        acks.push(
            js.publish(subject.clone(), i.to_be_bytes().to_vec().into())
                .await
                .expect("publish"),
        );
    }
    for ack in acks {
        ack.await.expect("stored");
    }
    let mut records = log.records(pid, 0).await.expect("records");
    records.next().await.expect("a first record").expect("read");
    log.purge(pid, 0).await.expect("purge");
    let rest = tokio::time::timeout(DEADLINE, async {
        let mut n = 0;
        while let Some(record) = records.next().await {
            record.expect("a record");
            n += 1;
        }
        n
    })
    .await
    .expect("the read ends");
    assert!(
        rest < 1999,
        "what was fetched before the purge, at most: {rest}"
    );
}

#[tokio::test]
async fn checkpoints_round_trip_and_never_move_back() {
    let server = NatsServer::start(&[]);
    let log = open(&server, "a").await;
    let pid = "/user/counter/2";
    assert_eq!(log.checkpoint(pid).await.expect("checkpoint"), None);
    assert!(
        log.put_checkpoint(pid, 5, b"five".to_vec())
            .await
            .expect("put")
    );
    assert_eq!(
        log.checkpoint(pid).await.expect("checkpoint"),
        Some((5, b"five".to_vec()))
    );
    // A late writer's older checkpoint is ignored.
    assert!(
        !log.put_checkpoint(pid, 3, b"three".to_vec())
            .await
            .expect("put")
    );
    assert!(
        !log.put_checkpoint(pid, 5, b"other five".to_vec())
            .await
            .expect("put")
    );
    assert!(log.put_checkpoint(pid, 9, Vec::new()).await.expect("put"));
    assert_eq!(
        log.checkpoint(pid).await.expect("checkpoint"),
        Some((9, Vec::new()))
    );
}

#[tokio::test]
async fn a_namespace_keeps_the_shard_count_it_was_created_with() {
    let server = NatsServer::start(&[]);
    let _first = open(&server, "a").await;
    let again = Log::open(StoreConfig::new(&server.url, "b")).await;
    assert!(again.is_ok(), "the same configuration opens again");
    for shards in [2, 8] {
        let mut config = StoreConfig::new(&server.url, "c");
        config.shards = shards;
        let refused = Log::open(config).await;
        assert!(
            matches!(&refused, Err(JetStreamError::ShardsChanged { configured, .. }) if *configured == shards),
            "{:?}",
            refused.err()
        );
    }
    let mut other = StoreConfig::new(&server.url, "c");
    other.name = "elsewhere".to_owned();
    other.shards = 2;
    assert!(
        Log::open(other).await.is_ok(),
        "another namespace, its own count"
    );
}

#[tokio::test]
async fn a_node_name_is_refused_while_its_holder_lives() {
    let server = NatsServer::start(&[]);
    let first = open(&server, "a").await;
    assert_eq!(first.node(), "a");
    let refused = Log::open(StoreConfig::new(&server.url, "a")).await;
    assert!(
        matches!(&refused, Err(JetStreamError::NameTaken(n)) if n == "a"),
        "{:?}",
        refused.err()
    );
    first.stop().await;
    assert!(
        Log::open(StoreConfig::new(&server.url, "a")).await.is_ok(),
        "free once the holder stopped"
    );
    let bad = Log::open(StoreConfig::new(&server.url, "a.b")).await;
    assert!(matches!(bad, Err(JetStreamError::InvalidName { .. })));
}

#[tokio::test]
async fn a_lease_passes_only_from_a_dead_holder_and_each_taking_raises_the_revision() {
    let server = NatsServer::start(&[]);
    let a = open_with(&server, "a", short_lease).await;
    let b = open_with(&server, "b", short_lease).await;
    let pid = "/user/entity/42";
    let kept = "/user/entity/43";
    let first = a.take(pid).await.expect("the first take wins");
    let kept_first = a.take(kept).await.expect("take");
    assert_eq!(
        a.take(pid).await.expect("ours"),
        first,
        "held: ours already"
    );

    // Refused for several leases' time: a's renewal keeps it live.
    let until = Instant::now() + 3 * SHORT_LEASE;
    while Instant::now() < until {
        assert!(
            matches!(b.take(pid).await, Err(TakeError::Held { node }) if node == "a"),
            "a is live"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    drop(a); // stops renewing; its key expires after the lease
    let second = take_when_free(&b, pid).await;
    assert!(second > first, "a higher fence token: {second} > {first}");

    // The name is free again. Its new epoch takes the old one's leases over, not b's.
    let a = open_with(&server, "a", short_lease).await;
    assert!(a.take(kept).await.expect("from its dead epoch") > kept_first);
    assert!(matches!(a.take(pid).await, Err(TakeError::Held { node }) if node == "b"));
    b.release(pid).await.expect("release");
    let third = a.take(pid).await.expect("free after release");
    assert!(third > second);
    b.release(pid)
        .await
        .expect("releasing what b does not hold is nothing");
    assert_eq!(a.take(pid).await.expect("still a's"), third);
}

#[tokio::test]
async fn of_two_takers_of_a_dead_holders_lease_exactly_one_wins() {
    let server = NatsServer::start(&[]);
    let pids: Vec<String> = (0..16).map(|i| format!("/user/race/{i}")).collect();
    let dead = open_with(&server, "dead", short_lease).await;
    for pid in &pids {
        dead.take(pid).await.expect("take");
    }
    drop(dead);
    let alive = raw(&server)
        .await
        .get_key_value("mote-mote-alive")
        .await
        .expect("the liveness bucket");
    let deadline = Instant::now() + DEADLINE;
    while alive.get("dead").await.expect("get").is_some() {
        assert!(Instant::now() < deadline, "the dead node's key expires");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let b = open_with(&server, "b", short_lease).await;
    let c = open_with(&server, "c", short_lease).await;
    let races = pids.iter().map(|pid| {
        let (b, c) = (b.clone(), c.clone());
        async move { tokio::join!(b.take(pid), c.take(pid)) }
    });
    for (won_b, won_c) in futures_util::future::join_all(races).await {
        match (won_b, won_c) {
            (Ok(_), Err(TakeError::Held { node })) => assert_eq!(node, "b"),
            (Err(TakeError::Held { node }), Ok(_)) => assert_eq!(node, "c"),
            other => panic!("not exactly one winner: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_stopped_node_frees_its_leases_at_once_and_takes_no_more() {
    let server = NatsServer::start(&[]);
    // The default lease (10 s): the takeover below does not wait for it.
    let a = open(&server, "a").await;
    let b = open(&server, "b").await;
    a.take("/user/p").await.expect("take");
    a.stop().await;
    assert!(*a.lost().borrow(), "stopping gives liveness up");
    assert!(matches!(a.take("/user/q").await, Err(TakeError::Lost)));
    b.take("/user/p").await.expect("free at once");
}

#[tokio::test]
async fn a_node_that_finds_its_key_gone_or_changed_reports_liveness_lost() {
    let server = NatsServer::start(&[]);
    let gone = open_with(&server, "gone", short_lease).await;
    let changed = open_with(&server, "changed", short_lease).await;
    let alive: kv::Store = raw(&server)
        .await
        .get_key_value("mote-mote-alive")
        .await
        .expect("the liveness bucket");
    assert!(!*gone.lost().borrow());

    alive.delete("gone").await.expect("delete behind its back");
    alive
        .put("changed", "1".into())
        .await
        .expect("overwrite behind its back");
    until_lost(&gone).await;
    until_lost(&changed).await;
    assert!(matches!(gone.take("/user/p").await, Err(TakeError::Lost)));
    assert!(matches!(
        changed.take("/user/p").await,
        Err(TakeError::Lost)
    ));
}
