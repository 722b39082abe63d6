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
