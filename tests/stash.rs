//! The stash the host keeps (issue "actor verbs"): stashed messages outlive a restart and an
//! upgrade of their actor, can be looked at and taken out of order, are bounded by a quota,
//! and become dead letters when the actor stops. (Order through stash and unstash is in
//! `supervision.rs`; that a crash loses no stashed durable message is `cli/tests/crash.rs`.)

use mote_example_protocol::{Gate, Report};
use mote_host::{DeadLetter, DeadLetterReason, HostConfig, Quota, Quotas};
use mote_tests::{DEADLINE, next_report, system_configured, system_with, tell};

/// The next report, which must carry `label`.
async fn expect(probe: &mut mote_host::Probe, label: &str) -> Report {
    let report = next_report(probe).await;
    assert_eq!(report.label, label, "{report:?}");
    report
}

/// How many messages the gate says its stash holds.
async fn stashed(system: &mote_host::ActorSystem, probe: &mut mote_host::Probe) -> u64 {
    tell(system, "/user/gate", &Gate::Stashed);
    expect(probe, "stashed").await.value
}

/// The next dead letter, or a panic after [`DEADLINE`].
async fn letter(letters: &mut tokio::sync::broadcast::Receiver<DeadLetter>) -> DeadLetter {
    tokio::time::timeout(DEADLINE, letters.recv())
        .await
        .expect("a dead letter in time")
        .expect("the dead-letter stream is open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stashed_messages_survive_a_restart_and_an_upgrade_of_their_actor() {
    let system = system_with(&["gate"]);
    let gate = std::fs::read(mote_test_programs::path("gate").unwrap()).unwrap();
    system.deploy_version("gate", "b", &gate).unwrap();
    let mut probe = system.probe("p").unwrap();
    system.spawn("gate", "gate", b"/system/p").unwrap();
    tell(&system, "/user/gate", &Gate::Item(1));
    tell(&system, "/user/gate", &Gate::Item(2));
    // A trap: the instance and its memory are gone, the host's stash is not.
    tell(&system, "/user/gate", &Gate::Fail);
    assert_eq!(stashed(&system, &mut probe).await, 2);
    tell(&system, "/user/gate", &Gate::Item(3));
    // An upgrade without state hooks starts the new version afresh: the stash goes with it.
    let report = system.upgrade("/user/gate", "b").await.unwrap();
    assert_eq!(report.upgraded.len(), 1, "{report:?}");
    assert_eq!(stashed(&system, &mut probe).await, 3);
    tell(&system, "/user/gate", &Gate::Open);
    tell(&system, "/user/gate", &Gate::Item(4));
    for n in 1..=4 {
        assert_eq!(expect(&mut probe, "item").await.value, n);
    }
    assert_eq!(stashed(&system, &mut probe).await, 0);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selective_receive_peeks_and_takes_out_of_order_and_a_stop_dead_letters_the_rest() {
    let system = system_with(&["gate"]);
    let mut probe = system.probe("p").unwrap();
    let mut letters = system.subscribe_dead_letters();
    system.spawn("gate", "gate", b"/system/p").unwrap();
    for (kind, first) in [("letter", 1), ("parcel", 2), ("letter", 3)] {
        system.tell("/user/gate", kind, vec![first]).unwrap();
    }
    tell(&system, "/user/gate", &Gate::Peek("parcel".into()));
    assert_eq!(expect(&mut probe, "peeked").await.value, 2);
    assert_eq!(stashed(&system, &mut probe).await, 3, "peek leaves it");
    for first in [1, 3] {
        tell(&system, "/user/gate", &Gate::Take("letter".into()));
        assert_eq!(expect(&mut probe, "took").await.value, first);
    }
    tell(&system, "/user/gate", &Gate::Take("letter".into()));
    expect(&mut probe, "none").await;
    tell(&system, "/user/gate", &Gate::Peek("postcard".into()));
    expect(&mut probe, "none").await;
    assert_eq!(stashed(&system, &mut probe).await, 1);
    assert!(system.stop("/user/gate"));
    let left = letter(&mut letters).await;
    assert_eq!(
        (left.envelope.kind.as_str(), left.envelope.body.as_slice()),
        ("parcel", &[2][..])
    );
    assert_eq!(left.reason, DeadLetterReason::Stopped);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_stash_refuses_the_message_as_a_dead_letter_and_counts_it() {
    let mut config = HostConfig::new();
    config.quotas(Quotas {
        stash: 3,
        stash_bytes: 1000,
        ..Quotas::default()
    });
    let system = system_configured(config, &["gate"]);
    let mut probe = system.probe("p").unwrap();
    let mut letters = system.subscribe_dead_letters();
    system.spawn("gate", "gate", b"/system/p").unwrap();
    for n in 0..5 {
        tell(&system, "/user/gate", &Gate::Item(n));
    }
    // Bytes count too: one large message does not fit what is left.
    system.tell("/user/gate", "blob", vec![7; 1000]).unwrap();
    let mut refused = Vec::new();
    for _ in 0..3 {
        let refusal = letter(&mut letters).await;
        assert_eq!(refusal.reason, DeadLetterReason::Rejected);
        refused.push(refusal.envelope.kind);
    }
    assert_eq!(refused, ["Gate", "Gate", "blob"]);
    assert_eq!(stashed(&system, &mut probe).await, 3);
    let counted = system
        .tree()
        .into_iter()
        .find(|a| a.address.path.as_str() == "/user/gate")
        .map(|a| a.refusals)
        .unwrap_or_default();
    assert_eq!(counted, [(Quota::Stash, 3)]);
    tell(&system, "/user/gate", &Gate::Open);
    for n in 0..3 {
        assert_eq!(expect(&mut probe, "item").await.value, n);
    }
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_entity_holding_a_stash_is_not_passivated() {
    // Passivating it would turn its stash into dead letters: it waits, it is not idle.
    let dir = mote_tests::TempDir::new("stash-entity");
    let system = system_configured(
        mote_tests::durable_config(&dir.join("mote.redb")),
        &["gate"],
    );
    let options = mote_host::EntityOptions {
        passivate_after: Some(std::time::Duration::from_millis(50)),
        ..mote_host::EntityOptions::default()
    };
    system.register_entity("gates", "gate", options).unwrap();
    // `holder` stashes a message of another kind; `empty` holds nothing. Both are idle from
    // then on, `holder` the longer.
    system
        .tell("/user/gates/holder", "letter", vec![1])
        .unwrap();
    tell(&system, "/user/gates/empty", &Gate::Close);
    mote_tests::wait_until(|| system.lookup("/user/gates/empty").is_none()).await;
    assert!(
        system.lookup("/user/gates/holder").is_some(),
        "the entity with a stash was passivated"
    );
    system.shutdown().await.unwrap();
}
