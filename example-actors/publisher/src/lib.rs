//! Publisher: publishes a numbered stream to a topic, for publish/subscribe tests.
//!
//! Init: `<topic> <count> [R]`. In `start` it publishes `Seq { stream: 0, n }` for `n` in
//! `0..count` to `<topic>`, reports to `R` (if given) `published` = the sum of the subscriber
//! counts the publishes reached, then stops itself. A topic written `group:<name>` is the group
//! `<name>` instead: each message is a `tell-group` to one member (reaching 1, or 0 if no member
//! is known). With the word `durable` anywhere in its init it first makes itself persistent
//! (`recover`), so its publishes are held until its start step is committed. With the word
//! `stay` it does not stop: each `Seq` it receives is published the same way and reported to
//! `R` as `reached` = the count it reached; without `stay` it ignores any message.

use mote_example_protocol::{Seq, init_arg, init_opt, init_words, report};
use mote_guest::{Actor, Context, Result};

/// Where it publishes and reports.
struct Publisher {
    topic: String,
    report_to: Option<String>,
    stay: bool,
}

impl Publisher {
    /// Publishes `seq` to the topic (or tells it to one member of the group) and returns how
    /// many it reached.
    fn publish(&self, ctx: &Context, seq: &Seq) -> Result<u64> {
        match self.topic.strip_prefix("group:") {
            Some(group) => Ok(u64::from(ctx.tell_group(group, seq)?)),
            None => Ok(u64::from(ctx.publish(&self.topic, seq)?)),
        }
    }
}

impl Actor for Publisher {
    type Msg = Seq;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let mut words = init_words(init);
        if words.contains(&"durable") {
            words.retain(|w| *w != "durable");
            ctx.recover::<(), ()>()?;
        }
        let stay = words.contains(&"stay");
        words.retain(|w| *w != "stay");
        let count: u32 = init_arg(&words, 1, "count")?;
        let publisher = Self {
            topic: init_arg(&words, 0, "topic")?,
            report_to: init_opt(&words, 2, "report-path")?,
            stay,
        };
        let mut reached = 0u64;
        for n in 0..count {
            reached += publisher.publish(ctx, &Seq { stream: 0, n })?;
        }
        report(ctx, publisher.report_to.as_deref(), "published", reached)?;
        if !stay {
            ctx.stop_self();
        }
        Ok(publisher)
    }

    fn receive(&mut self, ctx: &mut Context, msg: Seq) -> Result<()> {
        if !self.stay {
            ctx.debug(&format!("publisher ignoring {msg:?}"));
            return Ok(());
        }
        let reached = self.publish(ctx, &msg)?;
        report(ctx, self.report_to.as_deref(), "reached", reached)
    }
}

mote_guest::export_actor!(Publisher);
