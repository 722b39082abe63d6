//! Entity: a virtual actor, a durable counter named by its entity id, whatever its path.
//!
//! Init: `<entity-id>` (the init bytes, UTF-8, trimmed). Its persistence id is
//! `entity/<entity-id>`, so any activation of the same entity finds its state. Each start
//! recovers the snapshot, counts one more activation and saves a snapshot.
//! - `Add(k)` adds `k` to the total and saves a snapshot;
//! - `Get` replies `EntityValue { id, total, activations }`;
//! - `Retire` deletes its durable state and stops it (the next activation starts afresh);
//! - `Stop` stops it, keeping its state;
//! - `SlowAdd { k, ms }` logs that it begins, is busy for `ms` milliseconds, then adds `k` as
//!   `Add` does.
//!
//! When the host shuts down, `stopping` saves a snapshot once more (Dust's `isInShutdown`
//! pattern; redundant here, as every change is saved at once).

use mote_example_protocol::{Entity, EntityValue};
use mote_guest::{Actor, Context, Error, Result, StopReason};
use serde::{Deserialize, Serialize};

/// What an entity keeps across activations.
#[derive(Serialize, Deserialize, Default)]
struct Durable {
    total: u64,
    activations: u64,
}

/// An active entity.
struct Active {
    id: String,
    durable: Durable,
    /// Set by `Retire`: nothing is saved any more.
    retired: bool,
}

impl Actor for Active {
    type Msg = Entity;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let id = std::str::from_utf8(init)?.trim().to_string();
        if id.is_empty() {
            return Err(Error::msg("missing init argument <entity-id>"));
        }
        let mut durable = ctx.recover_snapshot::<Durable>()?.unwrap_or_default();
        durable.activations += 1;
        ctx.save_snapshot(&durable)?;
        Ok(Self {
            id,
            durable,
            retired: false,
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Entity) -> Result<()> {
        match msg {
            Entity::Add(k) => {
                self.durable.total = self.durable.total.wrapping_add(k);
                ctx.save_snapshot(&self.durable)?;
            }
            Entity::Get if ctx.sender().is_some() => ctx.reply(&EntityValue {
                id: self.id.clone(),
                total: self.durable.total,
                activations: self.durable.activations,
            })?,
            Entity::Get => ctx.debug("ignoring a Get without a sender"),
            Entity::Retire => {
                ctx.delete_state()?;
                self.retired = true;
                ctx.stop_self();
            }
            Entity::Stop => ctx.stop_self(),
            Entity::SlowAdd { k, ms } => {
                ctx.info(&format!("slow add of {k} begins"));
                let until = std::time::Instant::now() + std::time::Duration::from_millis(ms);
                while std::time::Instant::now() < until {
                    std::hint::spin_loop();
                }
                self.durable.total = self.durable.total.wrapping_add(k);
                ctx.save_snapshot(&self.durable)?;
            }
        }
        Ok(())
    }

    fn stopping(&mut self, ctx: &mut Context, _reason: StopReason) {
        if ctx.in_shutdown()
            && !self.retired
            && let Err(e) = ctx.save_snapshot(&self.durable)
        {
            ctx.warn(&format!("entity `{}`: {e}", self.id));
        }
    }
}

mote_guest::export_actor!(Active);
