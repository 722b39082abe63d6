//! Watcher: watches the incarnations it is told to, for death-watch tests.
//!
//! Init: `<R>`. `Watch::Watch { path, incarnation }` watches that incarnation and
//! `Watch::Unwatch { .. }` stops watching it; each watched incarnation's end is reported to `R`
//! as `terminated` = its incarnation, `from` its path.

use mote_example_protocol::{Report, Watch, init_arg, init_words};
use mote_guest::{Actor, Address, Context, Result};

/// The watcher's state: where to report.
struct Watcher {
    report_to: String,
}

impl Actor for Watcher {
    type Msg = Watch;

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let report_to = init_arg(&words, 0, "report-path")?;
        Ok(Self { report_to })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Watch) -> Result<()> {
        match msg {
            Watch::Watch { path, incarnation } => ctx.watch(&Address { path, incarnation })?,
            Watch::Unwatch { path, incarnation } => ctx.unwatch(&Address { path, incarnation }),
        }
        Ok(())
    }

    fn terminated(&mut self, ctx: &mut Context, who: Address) -> Result<()> {
        let report = Report {
            from: who.path,
            label: "terminated".to_string(),
            value: who.incarnation,
        };
        ctx.tell_path(&self.report_to, &report)
    }
}

mote_guest::export_actor!(Watcher);
