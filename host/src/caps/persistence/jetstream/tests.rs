//! The JetStream store's promises, on a real nats-server: a step is recovered whole on another
//! node, a zombie writer's commit is refused by the log itself, a consumed message is never
//! admitted again, and a pending send goes again until it is acknowledged.

use std::time::Duration;

use mote_nats_server::NatsServer;

use super::*;
use crate::address::ActorPath;
use crate::caps::persistence::journal::OutboxRow;

/// A store of node `node`, with a lease long enough that no renewal lands within a test.
fn store(server: &NatsServer, node: &str, lease: Duration) -> Arc<Shared> {
    let mut config = StoreConfig::new(&server.url, node);
    config.lease = lease;
    JetStream::new(config, tokio::runtime::Handle::current()).shared
}

/// A node `node` of `server` on which `pid`'s writer at `path` has recovered.
async fn recovered(server: &NatsServer, node: &str, pid: &str, path: &str) -> JetStream {
    let node = JetStream {
        shared: store(server, node, Duration::from_secs(30)),
    };
    node.shared.recover(pid.into(), holder(path)).await.unwrap();
    node
}

fn holder(path: &str) -> Address {
    Address {
        path: ActorPath::parse(path).expect("a path"),
        incarnation: 1,
    }
}

fn event(seq: u64) -> Op {
    Op::Event {
        seq,
        data: vec![seq as u8],
    }
}

fn step(pid: &str, seq: u64) -> StepWrite {
    StepWrite {
        pid: pid.to_owned(),
        ops: vec![event(seq)],
        last_seq: Some(seq),
        ..StepWrite::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_is_recovered_whole_on_another_node() {
    let server = NatsServer::start(&[]);
    let a = store(&server, "a", Duration::from_secs(30));
    a.recover("m:p".into(), holder("/user/p")).await.unwrap();
    let mut write = step("m:p", 1);
    write.outbox = vec![(
        a.next_handle.fetch_add(1, Ordering::Relaxed),
        OutboxRow {
            target: "/user/q".into(),
            sender: Some("/user/p".into()),
            kind: "k".into(),
            body: vec![7],
        },
    )];
    a.clone().commit(write).await.unwrap();
    a.release("m:p".into(), holder("/user/p")).await;

    let b = store(&server, "b", Duration::from_secs(30));
    let recovered = b.recover("m:p".into(), holder("/user/p")).await.unwrap();
    assert_eq!(recovered.seq, 1);
    assert_eq!(
        recovered.unsent.len(),
        1,
        "the message it sent is still pending"
    );
    assert_eq!(recovered.unsent[0].1.body, vec![7]);
    let writer = b.writer("m:p").unwrap();
    assert_eq!(
        writer.lock().state.events_after(0, 10).unwrap(),
        vec![(1, vec![1])]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_writers_commit_is_refused_by_the_log_itself() {
    let server = NatsServer::start(&[]);
    // Long leases: the zombie's renewal cannot notice anything within the test.
    let a = store(&server, "a", Duration::from_secs(30));
    let b = store(&server, "b", Duration::from_secs(30));
    a.recover("m:p".into(), holder("/user/p")).await.unwrap();
    a.clone().commit(step("m:p", 1)).await.unwrap();

    // a is taken for dead behind its back (its liveness key purged, as an expiry would),
    // and b takes the id over.
    let raw = async_nats::jetstream::new(async_nats::connect(server.url.as_str()).await.unwrap());
    let alive = raw.get_key_value("mote-mote-alive").await.unwrap();
    alive.purge("a").await.unwrap();
    let recovered = b.recover("m:p".into(), holder("/user/p")).await.unwrap();
    assert_eq!(recovered.seq, 1);

    // a does not know, and commits: JetStream refuses the stale tail.
    let refused = a.clone().commit(step("m:p", 2)).await;
    assert!(
        matches!(refused, Err(StorageError::Fenced { .. })),
        "{refused:?}"
    );
    assert_eq!(a.conflicts.load(Ordering::Relaxed), 1);
    assert!(
        matches!(
            a.clone().commit(step("m:p", 2)).await,
            Err(StorageError::Fenced { .. })
        ),
        "fenced for good"
    );
    // b's line of history goes on from the step a committed before the takeover.
    b.clone().commit(step("m:p", 2)).await.unwrap();
    let c = store(&server, "c", Duration::from_secs(30));
    b.release("m:p".into(), holder("/user/p")).await;
    let last = c.recover("m:p".into(), holder("/user/p")).await.unwrap();
    assert_eq!(last.seq, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumed_message_is_never_admitted_again_even_after_recovery() {
    let server = NatsServer::start(&[]);
    let node = recovered(&server, "a", "m:q", "/user/q").await;
    let shared = node.shared.clone();
    let msg = Numbered {
        sender: "m:p".into(),
        n: 3,
        floor: 0,
    };
    let token = postcard::to_allocvec(&msg).unwrap();
    let receipt = node.import(&token).unwrap();
    assert!(node.admit("m:q", receipt), "new");
    let mut write = step("m:q", 1);
    write.acks = vec![receipt];
    shared.clone().commit(write).await.unwrap();
    // The same message comes again (its sender sent it again after a crash).
    let again = node.import(&token).unwrap();
    assert!(!node.admit("m:q", again), "a duplicate");
    // Also on another node that recovers the receiver.
    shared.release("m:q".into(), holder("/user/q")).await;
    let other = recovered(&server, "b", "m:q", "/user/q").await;
    let there = other.import(&token).unwrap();
    assert!(!other.admit("m:q", there), "a duplicate there too");
    let next = Numbered { n: 4, ..msg };
    let fresh = other
        .import(&postcard::to_allocvec(&next).unwrap())
        .unwrap();
    assert!(other.admit("m:q", fresh), "the next one is new");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_send_goes_again_until_it_is_acknowledged() {
    let server = NatsServer::start(&[]);
    let node = recovered(&server, "a", "m:p", "/user/p").await;
    let shared = node.shared.clone();
    let handle = node.allocate_outbox(1);
    let mut write = step("m:p", 1);
    write.outbox = vec![(
        handle,
        OutboxRow {
            target: "/user/q".into(),
            sender: None,
            kind: "k".into(),
            body: vec![1],
        },
    )];
    shared.clone().commit(write).await.unwrap();
    assert!(
        node.overdue(Duration::from_secs(60)).is_empty(),
        "just sent"
    );
    let again = node.overdue(Duration::ZERO);
    assert_eq!(again.len(), 1, "sent again once overdue");
    assert_eq!(
        again[0].receipt,
        Receipt::Outbox(handle),
        "under the same receipt"
    );
    // Its receiver (on another node) acknowledges it: heard here, it is pending no more. The
    // settler writes what was heard every 200 ms (`SETTLE_EVERY`), which takes it from
    // `settled` and out of the pending sends: either shows it was heard.
    let log = shared.log().await.unwrap();
    log.acknowledge("m:p", 1).await.unwrap();
    eventually(|| {
        let writer = shared.writer("m:p").unwrap();
        let w = writer.lock();
        w.settled.contains(&1) || !w.state.outbox.pending.contains_key(&1)
    })
    .await;
    assert!(node.overdue(Duration::ZERO).is_empty());
}

/// Waits (at most 10 s) for `condition`.
async fn eventually(mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "not within 10 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledgements_from_other_nodes_are_recorded_then_purged_when_the_sender_recovers() {
    let server = NatsServer::start(&[]);
    let a = store(&server, "a", Duration::from_secs(30));
    a.recover("m:p".into(), holder("/user/p")).await.unwrap();
    let mut write = step("m:p", 1);
    let rows = (0..2).map(|i| {
        let row = OutboxRow {
            target: "/user/q".into(),
            sender: None,
            kind: "k".into(),
            body: vec![i],
        };
        (a.next_handle.fetch_add(1, Ordering::Relaxed), row)
    });
    write.outbox = rows.collect();
    a.clone().commit(write).await.unwrap();
    a.clone().release("m:p".into(), holder("/user/p")).await;
    // A receiver elsewhere consumed the first, while the sender was gone.
    let log = a.log().await.unwrap();
    log.acknowledge("m:p", 1).await.unwrap();

    let b = store(&server, "b", Duration::from_secs(30));
    let recovered = b.recover("m:p".into(), holder("/user/p")).await.unwrap();
    let unsent: Vec<Vec<u8>> = recovered
        .unsent
        .iter()
        .map(|(_, r)| r.body.clone())
        .collect();
    assert_eq!(unsent, [vec![1]], "only the second is sent again");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !log.acknowledgements("m:p").await.unwrap().0.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "acks purged");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Recorded in the fence record: a third node agrees without them.
    b.release("m:p".into(), holder("/user/p")).await;
    let c = store(&server, "c", Duration::from_secs(30));
    let again = c.recover("m:p".into(), holder("/user/p")).await.unwrap();
    assert_eq!(again.unsent.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_its_liveness_fences_its_writers_and_opens_again() {
    let server = NatsServer::start(&[]);
    let a = store(&server, "a", Duration::from_secs(1));
    a.recover("m:p".into(), holder("/user/p")).await.unwrap();
    a.clone().commit(step("m:p", 1)).await.unwrap();
    // Its liveness key goes behind its back, as a pause past the lease would make it expire.
    let raw = async_nats::jetstream::new(async_nats::connect(server.url.as_str()).await.unwrap());
    raw.get_key_value("mote-mote-alive")
        .await
        .unwrap()
        .purge("a")
        .await
        .unwrap();
    eventually(|| a.writer("m:p").unwrap().lock().fenced).await;
    assert!(matches!(
        a.clone().commit(step("m:p", 2)).await,
        Err(StorageError::Fenced { .. })
    ));
    // Its actor recovers again: the store opens with a new epoch and takes the id back.
    let recovered = a.recover("m:p".into(), holder("/user/p")).await.unwrap();
    assert_eq!(recovered.seq, 1, "the refused step left nothing");
    a.clone().commit(step("m:p", 2)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_released_with_messages_pending_is_indexed_to_be_woken() {
    let server = NatsServer::start(&[]);
    let a = store(&server, "a", Duration::from_secs(30));
    a.recover("m:p".into(), holder("/user/carts/p"))
        .await
        .unwrap();
    let mut write = step("m:p", 1);
    write.outbox = vec![(
        a.next_handle.fetch_add(1, Ordering::Relaxed),
        OutboxRow {
            target: "/user/q".into(),
            sender: None,
            kind: "k".into(),
            body: vec![1],
        },
    )];
    a.clone().commit(write).await.unwrap();
    let log = a.log().await.unwrap();
    assert!(
        log.due().await.unwrap().is_empty(),
        "nothing to wake while it lives"
    );
    a.clone()
        .release("m:p".into(), holder("/user/carts/p"))
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let due = loop {
        let due = log.due().await.unwrap();
        if !due.is_empty() {
            break due;
        }
        assert!(tokio::time::Instant::now() < deadline, "indexed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(due[0].pid, "m:p");
    assert_eq!(due[0].path, "/user/carts/p", "its own path, to wake it");
    // Nobody writes it now: the waker of any node will find it once due.
    assert!(!log.writer_alive("m:p").await.unwrap());
}

/// A commit its cell stops polling (its worker blocked in a read, say) holds up no other user
/// of the log: it runs as a task of the runtime (the module's invariant). Before, the cell
/// polled the commit itself, the log's lock went to it, and nobody got the log again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_its_cell_stops_polling_holds_up_no_other_user_of_the_log() {
    let server = NatsServer::start(&[]);
    let node = recovered(&server, "a", "m:p", "/user/p").await;
    let shared = node.shared.clone();
    // Another user holds the log's lock for a moment.
    let moment = shared.log.lock().await;
    // The cell makes its step's commit and polls it once, then not again for a while.
    let mut commit = node.commit(step("m:p", 1));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(commit.as_mut().poll(&mut cx).is_pending());
    drop(moment);
    // Meanwhile a recovery (the worker's read) gets the log, and the commit is written.
    tokio::time::timeout(Duration::from_secs(10), shared.log())
        .await
        .expect("the log was held up by the unpolled commit")
        .unwrap();
    commit.await.unwrap();
    assert_eq!(shared.steps.load(Ordering::Relaxed), 1);
}
