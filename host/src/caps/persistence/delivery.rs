//! `mote:actor/delivery`: what a host crash may do to the durable messages of an actor that keeps
//! no durable state. A durable message (sent by a persistent actor) is an outbox row until its
//! receiver acknowledges it:
//!
//! ```text
//! receiver                      acknowledged                       after a crash
//! persistent (any mode)         in the commit of its new state     exactly once
//! other, at-least-once (deflt)  lazily, after it handled it        may arrive again
//! other, at-most-once           durably (fsync), before it sees it never again; may be lost
//! ```
//!
//! At-least-once is the default because losing a message is usually worse than seeing it twice,
//! and it costs no fsync per message; an actor whose handling must not be repeated (it charges,
//! it launches) asks for at-most-once.
//!
//! Invariants:
//! - An actor in at-most-once mode that is not persistent never sees a durable message whose
//!   acknowledgement is not durable: the cell awaits the acknowledgement before the call, and a
//!   failed acknowledgement fails the actor (kind `commit`) without delivering the message; its
//!   row stays, for a later host run.
//! - The mode never weakens exactly-once: a persistent actor's messages are acknowledged by its
//!   own commit, whatever its mode.
//! - The mode belongs to the actor's incarnation: it holds across restarts and upgrades until the
//!   actor changes it.

use std::future::Future;
use std::sync::Arc;

use super::journal::Ack;
use crate::error::DatabaseError;
use crate::message::Receipt;
use crate::sandbox::bindings::mote::actor::delivery::DeliveryMode;
use crate::storage::committer::Committer;

/// How an actor's durable messages are acknowledged if it is not persistent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// After it handled them, lazily.
    #[default]
    AtLeastOnce,
    /// Durably, before it sees them.
    AtMostOnce,
}

impl From<DeliveryMode> for Delivery {
    fn from(mode: DeliveryMode) -> Self {
        match mode {
            DeliveryMode::AtLeastOnce => Delivery::AtLeastOnce,
            DeliveryMode::AtMostOnce => Delivery::AtMostOnce,
        }
    }
}

impl From<Delivery> for DeliveryMode {
    fn from(delivery: Delivery) -> Self {
        match delivery {
            Delivery::AtLeastOnce => DeliveryMode::AtLeastOnce,
            Delivery::AtMostOnce => DeliveryMode::AtMostOnce,
        }
    }
}

/// The write that acknowledges `receipt` before the guest sees its message, if an actor in
/// `mode` that is `persistent` or not must have one (a host with a database, `committer`);
/// it takes the receipt.
pub(super) fn acknowledge_first(
    mode: Delivery,
    persistent: bool,
    committer: Option<&Arc<Committer>>,
    receipt: &mut Option<Receipt>,
) -> Option<impl Future<Output = Result<(), Arc<DatabaseError>>> + Send + 'static> {
    if mode != Delivery::AtMostOnce || persistent {
        return None;
    }
    let committer = committer?.clone();
    let receipt = receipt.take()?;
    Some(async move { committer.commit(Box::new(Ack(receipt))).await })
}

#[cfg(test)]
mod tests {
    use super::super::journal::{OutboxRow, StepWrite};
    use super::super::{Journaled, Persistence, Persistent};
    use super::*;
    use crate::caps::capability::{Capability, Env};
    use crate::config::HostConfig;
    use crate::guestlog::GuestLog;
    use crate::storage::Scratch;
    use crate::storage::committer::Write;

    /// A persistence service on a fresh database, with outbox rows 1..=`rows` waiting.
    fn persistence(rows: u64) -> (Persistence, Scratch) {
        let scratch = Scratch::new("delivery");
        let db = scratch.database("d.redb");
        let persistence = Persistence::new(&Env {
            config: &HostConfig::new(),
            database: Some(&db),
            guest_log: &GuestLog::start(1),
        })
        .expect("a persistence service");
        let journal = &persistence.durable.as_ref().expect("durable").journal;
        let write = StepWrite {
            pid: "m:/user/source".into(),
            outbox: (1..=rows)
                .map(|id| {
                    let row = OutboxRow {
                        target: "/user/receiver".into(),
                        sender: None,
                        kind: "k".into(),
                        body: vec![id as u8],
                    };
                    (id, row)
                })
                .collect(),
            ..StepWrite::default()
        };
        db.write_with(|txn| write.apply(txn)).expect("the rows");
        assert_eq!(journal.outbox_len().unwrap(), rows);
        (persistence, scratch)
    }

    fn receiver(delivery: Delivery, persistent: bool) -> Persistent {
        Persistent {
            scope: "m".into(),
            pid: None,
            journal: persistent.then(|| Journaled::new("m:/user/receiver".into(), 0)),
            delivery,
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    #[test]
    fn at_most_once_acknowledges_durably_before_the_guest_sees_the_message() {
        let (persistence, _scratch) = persistence(2);
        let state = receiver(Delivery::AtMostOnce, false);
        let mut receipt = Some(Receipt::Outbox(1));
        let ack = persistence
            .acknowledge_first(&state, &mut receipt)
            .expect("a write to await first");
        assert_eq!(
            receipt, None,
            "the receipt is taken: nothing acknowledges it again"
        );
        runtime()
            .block_on(ack)
            .expect("the acknowledgement commits");
        let journal = &persistence.durable.as_ref().unwrap().journal;
        assert_eq!(
            journal.outbox_len().unwrap(),
            1,
            "row 1 is gone, row 2 waits"
        );
    }

    #[test]
    fn at_least_once_and_persistent_receivers_acknowledge_after_handling() {
        let (persistence, _scratch) = persistence(1);
        for state in [
            receiver(Delivery::AtLeastOnce, false),
            receiver(Delivery::AtLeastOnce, true),
            // A persistent receiver's own commit acknowledges it: exactly once, in any mode.
            receiver(Delivery::AtMostOnce, true),
        ] {
            let mut receipt = Some(Receipt::Outbox(1));
            assert!(
                persistence
                    .acknowledge_first(&state, &mut receipt)
                    .is_none()
            );
            assert_eq!(receipt, Some(Receipt::Outbox(1)), "left for after handling");
        }
        let journal = &persistence.durable.as_ref().unwrap().journal;
        assert_eq!(journal.outbox_len().unwrap(), 1);
    }

    #[test]
    fn a_message_without_a_receipt_or_a_host_without_a_database_writes_nothing() {
        let (persistence, _scratch) = persistence(0);
        let state = receiver(Delivery::AtMostOnce, false);
        assert!(persistence.acknowledge_first(&state, &mut None).is_none());
        let volatile = Persistence::new(&Env {
            config: &HostConfig::new(),
            database: None,
            guest_log: &GuestLog::start(1),
        })
        .expect("a persistence service");
        let mut receipt = Some(Receipt::Outbox(1));
        assert!(volatile.acknowledge_first(&state, &mut receipt).is_none());
    }

    #[test]
    fn a_failed_acknowledgement_is_an_error_to_the_cell() {
        let (persistence, _scratch) = persistence(1);
        let durable = persistence.durable.as_ref().unwrap();
        durable.committer.close();
        let state = receiver(Delivery::AtMostOnce, false);
        let mut receipt = Some(Receipt::Outbox(1));
        let ack = persistence.acknowledge_first(&state, &mut receipt).unwrap();
        assert!(
            runtime().block_on(ack).is_err(),
            "the guest must not see it"
        );
        assert_eq!(durable.journal.outbox_len().unwrap(), 1, "its row stays");
    }
}
