//! The `pod-manager` pattern component, driven through its JSON protocol on a host with a
//! database: pods of the event-sourced `journal` example (durable state keyed by the pod's
//! path) and of the JSON `stage` example.

use mote_example_protocol::{Journal, JournalState};
use mote_guest::patterns::init;
use mote_guest::patterns::pod_manager::{
    self, Create, Created, Deliver, List, OnFailure, Pods, Remove, Removed, Supervision,
};
use mote_guest::serde::{Deserialize, Serialize};
use mote_host::{ActorSystem, DeadLetterReason, Directive};
use mote_tests::*;

/// A system on the database `db` with the pod manager and the named example modules.
fn durable_system(db: &std::path::Path, examples: &[&str]) -> ActorSystem {
    let system = system_configured(durable_config(db), examples);
    let bytes = mote_patterns::component("pod-manager").expect("mote-patterns embeds it");
    system
        .deploy("pod-manager", bytes)
        .expect("deploy pod-manager");
    system
}

/// A manager `/user/pm` of journal pods.
fn journal_manager(system: &ActorSystem, config: &pod_manager::Config) {
    system.spawn("pm", "pod-manager", &init(config)).unwrap();
}

fn deliver(pod: &str, msg: &Journal) -> Deliver {
    Deliver::of(pod, msg).expect("a journal message encodes")
}

async fn pods(system: &ActorSystem) -> Vec<String> {
    ask_as::<List, Pods>(system, "/user/pm", &List {})
        .await
        .pods
}

async fn values(system: &ActorSystem, pod: &str) -> Vec<u64> {
    let state: JournalState = ask_as(system, "/user/pm", &deliver(pod, &Journal::Query)).await;
    state.values
}

/// What the JSON `stage` pods answer: the same object, `value` transformed.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(crate = "mote_guest::serde")]
struct Tagged {
    pod: String,
    value: i64,
}
mote_guest::json_message!(Tagged = "n");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_message_for_a_pod_creates_it_and_reaches_it_with_the_original_sender() {
    let dir = TempDir::new("pods-first");
    let system = durable_system(&dir.join("mote.redb"), &["journal"]);
    journal_manager(&system, &pod_manager::Config::of("journal"));
    assert!(pods(&system).await.is_empty());
    tell(&system, "/user/pm", &deliver("a", &Journal::Append(1)));
    // The journal answers the asker itself: the manager passed the ask's sender on.
    assert_eq!(values(&system, "a").await, [1]);
    assert_eq!(pods(&system).await, ["a"]);
    assert!(system.lookup("/user/pm/a").is_some());
    // Straight to a pod's path, as to any actor: the dead letter creates it (Dust's
    // PodDeadLetterActor), and the asker still gets the answer.
    let state: JournalState = ask_as(&system, "/user/pm/b", &Journal::Query).await;
    assert!(state.values.is_empty());
    tell(&system, "/user/pm/b", &Journal::Append(7));
    assert_eq!(values(&system, "b").await, [7]);
    // An explicit create of a live pod creates nothing.
    let created: Created = ask_as(&system, "/user/pm", &Create { pod: "b".into() }).await;
    assert_eq!((created.path.as_str(), created.new), ("/user/pm/b", false));
    let created: Created = ask_as(&system, "/user/pm", &Create { pod: "c".into() }).await;
    assert!(created.new);
    assert_eq!(pods(&system).await, ["a", "b", "c"]);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_message_with_a_pod_field_goes_to_that_pod_untouched() {
    let dir = TempDir::new("pods-json");
    let system = durable_system(&dir.join("mote.redb"), &["stage"]);
    let config = pod_manager::Config {
        init: serde_json::json!({"add": 1}),
        ..pod_manager::Config::of("stage")
    };
    system.spawn("pm", "pod-manager", &init(&config)).unwrap();
    let mut source = system.probe("source").unwrap();
    for (pod, value) in [("x", 1), ("y", 10), ("x", 2)] {
        let msg = Tagged {
            pod: pod.into(),
            value,
        };
        tell_from(&source, "/user/pm", &msg);
    }
    // Each pod answers from its own path; pods run apart, so only each pod's order holds.
    let mut answers = Vec::new();
    for _ in 0..3 {
        let envelope = next(&mut source).await;
        let from = envelope.sender.as_ref().map(|s| s.path.to_string());
        let got: Tagged = mote_guest::decode(&envelope.kind, &envelope.body).unwrap();
        assert_eq!(from, Some(format!("/user/pm/{}", got.pod)));
        answers.push((got.pod, got.value));
    }
    let from_x: Vec<i64> = answers
        .iter()
        .filter(|(p, _)| p == "x")
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(from_x, [2, 3]);
    assert!(answers.contains(&("y".to_string(), 11)));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_set_survives_a_host_restart_and_the_pods_live_again_with_their_state() {
    let dir = TempDir::new("pods-restart");
    let db = dir.join("mote.redb");
    let config = pod_manager::Config::of("journal");
    {
        let system = durable_system(&db, &["journal"]);
        journal_manager(&system, &config);
        for (pod, value) in [("a", 1), ("b", 2), ("a", 3)] {
            tell(&system, "/user/pm", &deliver(pod, &Journal::Append(value)));
        }
        // Created, then removed: not in the set any more.
        tell(&system, "/user/pm", &deliver("gone", &Journal::Append(9)));
        let removed: Removed = ask_as(&system, "/user/pm", &Remove { pod: "gone".into() }).await;
        assert!(removed.existed);
        assert_eq!(values(&system, "a").await, [1, 3]);
        assert_eq!(pods(&system).await, ["a", "b"]);
        system.shutdown().await.unwrap();
    }
    let system = durable_system(&db, &["journal"]);
    journal_manager(&system, &config);
    // The manager spawns its pods as it starts, before any message reaches them.
    wait_until(|| system.lookup("/user/pm/a").is_some() && system.lookup("/user/pm/b").is_some())
        .await;
    assert!(system.lookup("/user/pm/gone").is_none());
    assert_eq!(pods(&system).await, ["a", "b"]);
    let a: JournalState = ask_as(&system, "/user/pm/a", &Journal::Query).await;
    assert_eq!(a.values, [1, 3], "the pod recovered its own state");
    assert_eq!(values(&system, "b").await, [2]);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_pod_stops_and_is_forgotten_and_a_later_message_creates_it_again() {
    let dir = TempDir::new("pods-remove");
    let system = durable_system(&dir.join("mote.redb"), &["journal"]);
    journal_manager(&system, &pod_manager::Config::of("journal"));
    tell(&system, "/user/pm", &deliver("a", &Journal::Append(5)));
    assert_eq!(values(&system, "a").await, [5]);
    let first = system.lookup("/user/pm/a").expect("the pod lives");
    let removed: Removed = ask_as(&system, "/user/pm", &Remove { pod: "a".into() }).await;
    assert!(removed.existed);
    assert!(pods(&system).await.is_empty());
    // A message right after the removal waits for the old pod's end, then makes a new one
    // (whose durable state, keyed by its path, was kept).
    assert_eq!(values(&system, "a").await, [5]);
    terminated(&system, &first).await;
    let second = system.lookup("/user/pm/a").expect("a new pod lives");
    assert_ne!(second.incarnation, first.incarnation);
    assert_eq!(pods(&system).await, ["a"]);
    let again: Removed = ask_as(&system, "/user/pm", &Remove { pod: "zz".into() }).await;
    assert!(!again.existed);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_for_a_new_pod_past_max_pods_is_refused_as_a_dead_letter() {
    let dir = TempDir::new("pods-max");
    let system = durable_system(&dir.join("mote.redb"), &["journal"]);
    let mut letters = system.subscribe_dead_letters();
    let config = pod_manager::Config {
        max_pods: 2,
        ..pod_manager::Config::of("journal")
    };
    journal_manager(&system, &config);
    for pod in ["a", "b", "c"] {
        tell(&system, "/user/pm", &deliver(pod, &Journal::Append(1)));
    }
    let letter = tokio::time::timeout(DEADLINE, letters.recv())
        .await
        .expect("a dead letter in time")
        .expect("the dead-letter stream");
    assert_eq!(letter.reason, DeadLetterReason::Rejected);
    assert!(letter.target.starts_with("/user/pm#"), "{}", letter.target);
    let refused: Deliver =
        mote_guest::decode(&letter.envelope.kind, &letter.envelope.body).unwrap();
    assert_eq!(refused.pod, "c");
    assert_eq!(pods(&system).await, ["a", "b"]);
    // Known pods still take messages.
    assert_eq!(values(&system, "b").await, [1]);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_traps_is_restarted_by_the_manager_and_recovers_its_state() {
    let dir = TempDir::new("pods-trap");
    let system = durable_system(&dir.join("mote.redb"), &["journal"]);
    let mut decisions = system.subscribe_supervision();
    journal_manager(&system, &pod_manager::Config::of("journal"));
    tell(&system, "/user/pm", &deliver("a", &Journal::Append(4)));
    tell(&system, "/user/pm", &deliver("a", &Journal::Crash));
    let decision = next_decision(&mut decisions).await;
    assert_eq!(decision.child.path.as_str(), "/user/pm/a");
    assert_eq!(decision.directive, Directive::Restart);
    assert_eq!(values(&system, "a").await, [4]);
    assert_eq!(pods(&system).await, ["a"]);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_that_fails_spawns_its_pods_again_when_it_is_restarted() {
    let dir = TempDir::new("pods-escalate");
    let system = durable_system(&dir.join("mote.redb"), &["journal"]);
    let mut decisions = system.subscribe_supervision();
    // No restarts allowed: a pod's failure escalates and fails the manager.
    let config = pod_manager::Config {
        strategy: Supervision {
            max_restarts: 0,
            ..Supervision::new(OnFailure::Restart)
        },
        ..pod_manager::Config::of("journal")
    };
    journal_manager(&system, &config);
    tell(&system, "/user/pm", &deliver("a", &Journal::Append(1)));
    tell(&system, "/user/pm", &deliver("b", &Journal::Append(2)));
    assert_eq!(values(&system, "b").await, [2]);
    let before = system.lookup("/user/pm/b").expect("pod b lives");
    tell(&system, "/user/pm", &deliver("a", &Journal::Crash));
    loop {
        let decision = next_decision(&mut decisions).await;
        if decision.child.path.as_str() == "/user/pm" {
            assert_eq!(decision.directive, Directive::Restart);
            break;
        }
    }
    terminated(&system, &before).await;
    wait_until(|| system.lookup("/user/pm/a").is_some() && system.lookup("/user/pm/b").is_some())
        .await;
    assert_eq!(pods(&system).await, ["a", "b"]);
    assert_eq!(values(&system, "a").await, [1]);
    assert_eq!(values(&system, "b").await, [2]);
    system.shutdown().await.unwrap();
}
