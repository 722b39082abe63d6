//! Gate: holds items back while closed, for stash and behaviour-switching tests.
//!
//! Init: `<R>`. It starts closed: `Gate::Item(n)` is stashed, `Gate::Open` lets the stashed
//! items through (in arrival order) and switches to the open behaviour, `Gate::Close` is
//! ignored. Open: `Gate::Item(n)` is reported to `R` as `item` = `n`, `Gate::Close` switches
//! back to closed, `Gate::Open` is ignored.

use mote_example_protocol::{Gate, init_arg, init_words, report};
use mote_guest::{Actor, Context, Result};

/// The gate's state: where to report; open or closed is its behaviour.
struct Gatekeeper {
    report_to: String,
}

impl Gatekeeper {
    /// The open behaviour: items pass and are reported.
    fn open(&mut self, ctx: &mut Context, msg: Gate) -> Result<()> {
        match msg {
            Gate::Item(n) => report(ctx, Some(&self.report_to), "item", u64::from(n))?,
            Gate::Close => ctx.unbecome(),
            Gate::Open => {}
        }
        Ok(())
    }
}

impl Actor for Gatekeeper {
    type Msg = Gate;

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let report_to = init_arg(&words, 0, "report-path")?;
        Ok(Self { report_to })
    }

    /// The closed behaviour: items wait in the stash.
    fn receive(&mut self, ctx: &mut Context, msg: Gate) -> Result<()> {
        match msg {
            Gate::Item(_) => ctx.stash(),
            Gate::Open => {
                ctx.unstash_all();
                ctx.become_(Self::open);
            }
            Gate::Close => {}
        }
        Ok(())
    }
}

mote_guest::export_actor!(Gatekeeper);
