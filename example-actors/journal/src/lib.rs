//! Journal: an event-sourced list of values, for recovery and replay-order tests.
//!
//! Init: `[<snapshot-every>]` (absent or 0: never snapshot). It recovers in `start`: the
//! latest snapshot if any, then the events after it replayed in order.
//! - `Append(v)` journals `v` as an event and appends it; when `snapshot-every` > 0, every
//!   that many events it also saves a snapshot (keeping the events it covers, so recovery
//!   reads both);
//! - `Query` replies `JournalState { values, recovered_from_snapshot, replayed }` (how this
//!   instance recovered: from a snapshot or not, and how many events it replayed);
//! - `Forget` deletes its durable state and stops it;
//! - `Crash` panics, for its supervisor to restart it from the store.

use mote_example_protocol::{Journal, JournalState, init_opt, init_words};
use mote_guest::{Actor, Context, Result};

/// The values and how this instance recovered them.
struct Values {
    snapshot_every: u64,
    state: JournalState,
}

impl Actor for Values {
    type Msg = Journal;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let snapshot_every = init_opt(&init_words(init), 0, "snapshot-every")?.unwrap_or(0);
        let recovery = ctx.recover::<Vec<u64>, u64>()?;
        let recovered_from_snapshot = recovery.snapshot.is_some();
        let mut replayed = 0;
        let values = recovery.fold(Vec::new, |values, value| {
            values.push(value);
            replayed += 1;
        })?;
        ctx.debug(&format!(
            "recovered {} values, {replayed} replayed",
            values.len()
        ));
        Ok(Self {
            snapshot_every,
            state: JournalState {
                values,
                recovered_from_snapshot,
                replayed,
            },
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Journal) -> Result<()> {
        match msg {
            Journal::Append(value) => self.append(ctx, value)?,
            Journal::Query if ctx.sender().is_some() => ctx.reply(&self.state)?,
            Journal::Query => ctx.debug("ignoring a Query without a sender"),
            Journal::Forget => {
                ctx.delete_state()?;
                ctx.stop_self();
            }
            Journal::Crash => panic!("journal: crash requested"),
            Journal::AppendRange { from, count } => {
                for value in from..from.saturating_add(count) {
                    self.append(ctx, value)?;
                }
            }
        }
        Ok(())
    }
}

mote_guest::export_actor!(Values);

impl Values {
    /// Journals one value; every `snapshot_every` events the values become a snapshot.
    fn append(&mut self, ctx: &mut Context, value: u64) -> Result<()> {
        let seq = ctx.persist(&value)?;
        self.state.values.push(value);
        if self.snapshot_every > 0 && seq % self.snapshot_every == 0 {
            ctx.save_snapshot(&self.state.values)?;
        }
        Ok(())
    }
}
