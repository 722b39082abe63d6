//! Publisher: publishes a numbered stream to a topic, for publish/subscribe tests.
//!
//! Init: `<topic> <count> [R]`. In `start` it publishes `Seq { stream: 0, n }` for `n` in
//! `0..count` to `<topic>`, reports to `R` (if given) `published` = the sum of the subscriber
//! counts the publishes reached, then stops itself. It ignores any message. With the word
//! `durable` anywhere in its init it first makes itself persistent (`recover`), so its
//! publishes are held until its start step is committed.

use mote_example_protocol::{Seq, init_arg, init_opt, init_words, report};
use mote_guest::{Actor, Context, Result};

/// Has published its stream and is stopping.
struct Publisher;

impl Actor for Publisher {
    type Msg = Seq;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let mut words = init_words(init);
        if words.contains(&"durable") {
            words.retain(|w| *w != "durable");
            ctx.recover::<(), ()>()?;
        }
        let topic: String = init_arg(&words, 0, "topic")?;
        let count: u32 = init_arg(&words, 1, "count")?;
        let report_to: Option<String> = init_opt(&words, 2, "report-path")?;
        let mut reached = 0u64;
        for n in 0..count {
            reached += u64::from(ctx.publish(&topic, &Seq { stream: 0, n })?);
        }
        report(ctx, report_to.as_deref(), "published", reached)?;
        ctx.stop_self();
        Ok(Self)
    }

    fn receive(&mut self, ctx: &mut Context, msg: Seq) -> Result<()> {
        ctx.debug(&format!("publisher ignoring {msg:?}"));
        Ok(())
    }
}

mote_guest::export_actor!(Publisher);
