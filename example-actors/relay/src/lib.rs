//! Relay: a parent that spawns counter children and relays orders to them.
//!
//! Init: `<children> <child-module> [R]`. At start it spawns `worker-0`..`worker-{n-1}` from
//! `<child-module>` (a counter) with empty init. `Relay::Broadcast(k)` sends `Counter::Add(k)`
//! to every child; `Relay::Collect` sends each child `Counter::Get` and sums their
//! `Counter::Value` replies, which arrive outside its `Relay` message type through `unhandled`;
//! once every child has answered it logs the sum and reports it to `R` as `sum`.

use mote_example_protocol::{Counter, Relay, init_arg, init_opt, init_words, report};
use mote_guest::{Actor, Address, Context, Envelope, Result};

/// A collection under way.
struct Collecting {
    /// Children that have not answered yet.
    waiting: Vec<Address>,
    /// The sum of the answers so far.
    sum: u64,
}

/// The relay's state.
struct Relayer {
    children: Vec<Address>,
    report_to: Option<String>,
    collecting: Option<Collecting>,
}

impl Relayer {
    /// Logs and reports the sum once no child is left to answer.
    fn finish_if_complete(&mut self, ctx: &Context) -> Result<()> {
        let Some(collecting) = self.collecting.take_if(|c| c.waiting.is_empty()) else {
            return Ok(());
        };
        ctx.info(&format!(
            "relay: {} children sum to {}",
            self.children.len(),
            collecting.sum
        ));
        report(ctx, self.report_to.as_deref(), "sum", collecting.sum)
    }
}

impl Actor for Relayer {
    type Msg = Relay;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let count: u32 = init_arg(&words, 0, "children")?;
        let module: String = init_arg(&words, 1, "child-module")?;
        let report_to = init_opt(&words, 2, "report-path")?;
        let mut children = Vec::with_capacity(count as usize);
        for i in 0..count {
            let child = ctx.spawn(&format!("worker-{i}"), &module, &[])?;
            ctx.info(&format!("relay: spawned {} from `{module}`", child.path));
            children.push(child);
        }
        Ok(Self {
            children,
            report_to,
            collecting: None,
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Relay) -> Result<()> {
        match msg {
            Relay::Broadcast(k) => {
                for child in &self.children {
                    ctx.tell(child, &Counter::Add(k))?;
                }
                Ok(())
            }
            Relay::Collect => {
                for child in &self.children {
                    ctx.tell(child, &Counter::Get)?;
                }
                self.collecting = Some(Collecting {
                    waiting: self.children.clone(),
                    sum: 0,
                });
                self.finish_if_complete(ctx)
            }
        }
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        if !env.is::<Counter>() {
            ctx.warn(&format!("unhandled message of kind `{}`", env.kind));
            return Ok(());
        }
        let Counter::Value(value) = env.decode::<Counter>()? else {
            ctx.warn("ignoring a Counter message that is not a Value");
            return Ok(());
        };
        let Some(collecting) = &mut self.collecting else {
            ctx.warn(&format!("ignoring Value({value}): no collection under way"));
            return Ok(());
        };
        let position = env
            .sender
            .as_ref()
            .and_then(|sender| collecting.waiting.iter().position(|c| c == sender));
        let Some(position) = position else {
            ctx.warn(&format!(
                "ignoring Value({value}) from an unexpected sender"
            ));
            return Ok(());
        };
        collecting.waiting.swap_remove(position);
        collecting.sum = collecting.sum.wrapping_add(value);
        self.finish_if_complete(ctx)
    }
}

mote_guest::export_actor!(Relayer);
