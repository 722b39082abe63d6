//! Deadwatch: reports every dead letter, for dead-letter tests.
//!
//! Init: `<R>` (an absolute path). It subscribes to `/system/deadletters` in `start` and
//! reports each dead letter to `R` as `Report { from: <its target>, label: <the original
//! sender's path, or "none">, value: <its body's length> }`, except letters whose target is
//! `R` itself, which would loop. It ignores any `Report` sent to it.

use mote_example_protocol::{Report, init_arg, init_words};
use mote_guest::{Actor, Context, DEAD_LETTERS_TOPIC, DeadLetter, Result};

/// The deadwatch's state: where to report.
struct Deadwatch {
    report_to: String,
}

impl Actor for Deadwatch {
    type Msg = Report;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let report_to = init_arg(&words, 0, "report-path")?;
        ctx.subscribe(DEAD_LETTERS_TOPIC)?;
        Ok(Self { report_to })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Report) -> Result<()> {
        ctx.debug(&format!("deadwatch ignoring {msg:?}"));
        Ok(())
    }

    fn dead_letter(&mut self, ctx: &mut Context, letter: DeadLetter) -> Result<()> {
        if letter.target == self.report_to {
            return Ok(());
        }
        let report = Report {
            label: letter.sender.map_or_else(|| "none".to_string(), |s| s.path),
            from: letter.target,
            value: letter.body.len() as u64,
        };
        ctx.tell_path(&self.report_to, &report)
    }
}

mote_guest::export_actor!(Deadwatch);
