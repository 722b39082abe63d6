//! Ticker: sets timers on demand, for timer tests.
//!
//! Init: `<R>`. Each `Timer` order names its timer by `tag` (a new timer with a tag in use
//! replaces it in the ticker's memory, not in the host: the old one keeps running):
//! - `Once { delay_ms, tag }` sends `Fired { tag }` to itself after `delay_ms`;
//! - `Every { period_ms, tag }` sends `Fired { tag }` to itself every `period_ms`, the first
//!   after one period;
//! - `Cancel { tag }` cancels the timer and reports `cancelled` = 1 to `R` if the host
//!   cancelled it, 0 if it had already fired (one-shot) or the tag is unknown;
//! - `Fired { tag }` reports `fired` = `tag` to `R`;
//! - `EveryToSender { period_ms, tag }` sends `Report { from: <its path>, label: "tick",
//!   value: tag }` to the order's sender every `period_ms`, the first after one period;
//! - `ReplyAfter { delay_ms, tag }` sends `Fired { tag }` to the order's sender once, after
//!   `delay_ms` (asked, it makes a late reply).
//!
//! The last two fail without a sender.

use std::collections::HashMap;
use std::time::Duration;

use mote_example_protocol::{Report, Timer, init_arg, init_words, report};
use mote_guest::{Actor, Address, Context, Error, Result};

/// The ticker's state: where to report and its timers' ids by tag.
struct Ticker {
    report_to: String,
    timers: HashMap<u32, u64>,
}

/// The sender of the message being handled, which `order` needs.
fn sender(ctx: &Context, order: &str) -> Result<Address> {
    ctx.sender()
        .cloned()
        .ok_or_else(|| Error::msg(format!("`{order}` needs a sender")))
}

impl Actor for Ticker {
    type Msg = Timer;

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let report_to = init_arg(&words, 0, "report-path")?;
        Ok(Self {
            report_to,
            timers: HashMap::new(),
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Timer) -> Result<()> {
        let (tag, id) = match msg {
            Timer::Once { delay_ms, tag } => {
                let delay = Duration::from_millis(delay_ms);
                (tag, ctx.schedule_self(&Timer::Fired { tag }, delay, None)?)
            }
            Timer::Every { period_ms, tag } => {
                let period = Duration::from_millis(period_ms);
                let fired = Timer::Fired { tag };
                (tag, ctx.schedule_self(&fired, period, Some(period))?)
            }
            Timer::Cancel { tag } => {
                let id = self.timers.remove(&tag);
                let cancelled = id.is_some_and(|id| ctx.cancel_timer(id));
                let to = Some(self.report_to.as_str());
                return report(ctx, to, "cancelled", u64::from(cancelled));
            }
            Timer::Fired { tag } => {
                return report(ctx, Some(&self.report_to), "fired", u64::from(tag));
            }
            Timer::EveryToSender { period_ms, tag } => {
                let to = sender(ctx, "EveryToSender")?;
                let period = Duration::from_millis(period_ms);
                let tick = Report {
                    from: ctx.myself().path,
                    label: "tick".to_string(),
                    value: u64::from(tag),
                };
                (tag, ctx.schedule(&to, &tick, period, Some(period))?)
            }
            Timer::ReplyAfter { delay_ms, tag } => {
                let to = sender(ctx, "ReplyAfter")?;
                let delay = Duration::from_millis(delay_ms);
                (tag, ctx.schedule(&to, &Timer::Fired { tag }, delay, None)?)
            }
        };
        self.timers.insert(tag, id);
        Ok(())
    }
}

mote_guest::export_actor!(Ticker);
