//! Subscriber: reports what is published to a topic, for publish/subscribe tests.
//!
//! Init: `<topic> <R>`. It subscribes to `<topic>` in `start` (a topic written `group:<name>`:
//! it joins the group `<name>` instead); each `Seq { n, .. }` it receives (published or not) is
//! reported to `R` as `Report { from: <its path>, label: <the sender's path, or "none">, value:
//! n }`.

use mote_example_protocol::{Seq, init_arg, init_words, report};
use mote_guest::{Actor, Context, Result};

/// The subscriber's state: where to report.
struct Subscriber {
    report_to: String,
}

impl Actor for Subscriber {
    type Msg = Seq;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let topic: String = init_arg(&words, 0, "topic")?;
        let report_to = init_arg(&words, 1, "report-path")?;
        match topic.strip_prefix("group:") {
            Some(group) => ctx.join(group)?,
            None => ctx.subscribe(&topic)?,
        }
        Ok(Self { report_to })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Seq) -> Result<()> {
        let label = ctx.sender().map_or("none", |s| s.path.as_str());
        report(ctx, Some(&self.report_to), label, u64::from(msg.n))
    }
}

mote_guest::export_actor!(Subscriber);
