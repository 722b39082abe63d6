//! Scenarios shared by the tests of the Rust example actors and their ports to other languages:
//! each takes the module name and the [`Speech`] it speaks, so the same assertions hold for
//! every SDK.

use mote_example_protocol::{Journal, JournalState};

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
