//! Tree: builds a tree of actors, for supervision and shutdown tests.
//!
//! Init: `<depth> <fanout> <R>`, `R` an absolute path. A node of depth > 0 spawns `fanout`
//! children `n0`..`n{fanout-1}` from module `tree` with init `<depth-1> <fanout> <R>`.
//! A `Report` labelled `ping` is answered with `Report { label: "pong", value: depth }`, proof
//! that the node is alive; when it stops it reports `stopped` with its depth to `R`.

use mote_example_protocol::{Report, init_arg, init_words, report};
use mote_guest::{Actor, Context, Result, StopReason};

/// One node of the tree.
struct Node {
    depth: u32,
    report_to: String,
}

impl Actor for Node {
    type Msg = Report;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let depth: u32 = init_arg(&words, 0, "depth")?;
        let fanout: u32 = init_arg(&words, 1, "fanout")?;
        let report_to: String = init_arg(&words, 2, "report-path")?;
        if let Some(below) = depth.checked_sub(1) {
            let init = format!("{below} {fanout} {report_to}");
            for i in 0..fanout {
                ctx.spawn(&format!("n{i}"), "tree", init.as_bytes())?;
            }
        }
        Ok(Self { depth, report_to })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Report) -> Result<()> {
        if msg.label != "ping" {
            ctx.debug(&format!("ignoring a `{}` report", msg.label));
            return Ok(());
        }
        ctx.reply(&Report {
            from: ctx.myself().path,
            label: "pong".to_string(),
            value: u64::from(self.depth),
        })
    }

    fn stopping(&mut self, ctx: &mut Context, _reason: StopReason) {
        let depth = u64::from(self.depth);
        if let Err(e) = report(ctx, Some(&self.report_to), "stopped", depth) {
            ctx.warn(&format!("cannot report stopping: {e}"));
        }
    }
}

mote_guest::export_actor!(Node);
