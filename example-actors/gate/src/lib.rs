//! Gate: holds items back while closed, for stash and behaviour-switching tests.
//!
//! Init: `<R>`. It starts closed: `Gate::Item(n)` is stashed, `Gate::Open` lets the stashed
//! items through (in arrival order) and switches to the open behaviour, `Gate::Close` is
//! ignored. Open: `Gate::Item(n)` is reported to `R` as `item` = `n`, `Gate::Close` switches
//! back to closed, `Gate::Open` is ignored. Closed or open, a message of another kind is
//! stashed; `Gate::Take(kind)`/`Gate::Peek(kind)` take or look at the oldest stashed message of
//! that kind (reported as `took`/`peeked` = its first byte, or `none`), `Gate::Stashed`
//! reports the stash's size as `stashed`, and `Gate::Fail` traps (the host keeps the stash
//! across the restart).

use mote_example_protocol::{Gate, init_arg, init_words, report};
use mote_guest::{Actor, Context, Envelope, Result};

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
            other => self.either(ctx, other)?,
        }
        Ok(())
    }

    /// What the gate does open or closed.
    fn either(&mut self, ctx: &mut Context, msg: Gate) -> Result<()> {
        let to = Some(self.report_to.as_str());
        match msg {
            Gate::Fail => panic!("the gate was told to fail"),
            Gate::Take(kind) => {
                let first = ctx.take(Some(&kind)).map(first_byte);
                report_first(ctx, to, "took", first)?;
            }
            Gate::Peek(kind) => {
                let first = ctx.peek(Some(&kind)).map(first_byte);
                report_first(ctx, to, "peeked", first)?;
            }
            Gate::Stashed => report(ctx, to, "stashed", u64::from(ctx.stashed()))?,
            Gate::Item(_) | Gate::Open | Gate::Close => {}
        }
        Ok(())
    }
}

/// The first byte of a message's body (0 if it is empty).
fn first_byte(env: Envelope) -> u64 {
    env.body.first().copied().map_or(0, u64::from)
}

/// Reports `first` as `label`, or `none` if there was no message.
fn report_first(ctx: &Context, to: Option<&str>, label: &str, first: Option<u64>) -> Result<()> {
    match first {
        Some(n) => report(ctx, to, label, n),
        None => report(ctx, to, "none", 0),
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
            other => self.either(ctx, other)?,
        }
        Ok(())
    }

    /// Messages of other kinds wait in the stash, open or closed.
    fn unhandled(&mut self, ctx: &mut Context, _env: Envelope) -> Result<()> {
        ctx.stash();
        Ok(())
    }
}

mote_guest::export_actor!(Gatekeeper);
