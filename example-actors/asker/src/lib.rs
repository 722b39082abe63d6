//! Asker: asks other actors with a deadline, for ask tests.
//!
//! Init: `<R>`. `Asking::Ask { path, incarnation, timeout_ms, get }` asks that incarnation
//! within `timeout_ms`: with `get`, a counter for `Counter::Get`; without, a ticker for
//! `Timer::ReplyAfter { delay_ms: 3 * timeout_ms, tag: 7 }`, whose reply comes too late. A
//! reply is reported to `R` as `answer` = the value of a `Counter::Value`, the tag of a
//! `Timer::Fired`, else 0; a timeout as `timeout` = the ask id.

use std::collections::HashSet;
use std::time::Duration;

use mote_example_protocol::{Asking, Counter, Timer, init_arg, init_words, report};
use mote_guest::{Actor, Address, Context, Envelope, Result};

/// The asker's state: where to report and the asks still unanswered.
struct Asker {
    report_to: String,
    pending: HashSet<u64>,
}

impl Asker {
    /// Forgets the ask `id`, warning if it was not pending.
    fn settle(&mut self, ctx: &Context, id: u64) {
        if !self.pending.remove(&id) {
            ctx.warn(&format!("ask {id} was not pending"));
        }
    }
}

/// What a reply is worth: a counter's value, a timer's tag, or 0.
fn answer(reply: &Envelope) -> u64 {
    if let Ok(Counter::Value(value)) = reply.decode::<Counter>() {
        return value;
    }
    match reply.decode::<Timer>() {
        Ok(Timer::Fired { tag }) => u64::from(tag),
        _ => 0,
    }
}

impl Actor for Asker {
    type Msg = Asking;

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let report_to = init_arg(&words, 0, "report-path")?;
        Ok(Self {
            report_to,
            pending: HashSet::new(),
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Asking) -> Result<()> {
        let Asking::Ask {
            path,
            incarnation,
            timeout_ms,
            get,
        } = msg;
        let to = Address { path, incarnation };
        let timeout = Duration::from_millis(timeout_ms);
        let id = if get {
            ctx.ask(&to, &Counter::Get, timeout)?
        } else {
            let late = Timer::ReplyAfter {
                delay_ms: timeout_ms.saturating_mul(3),
                tag: 7,
            };
            ctx.ask(&to, &late, timeout)?
        };
        self.pending.insert(id);
        Ok(())
    }

    fn answered(&mut self, ctx: &mut Context, id: u64, reply: Envelope) -> Result<()> {
        self.settle(ctx, id);
        report(ctx, Some(&self.report_to), "answer", answer(&reply))
    }

    fn ask_timeout(&mut self, ctx: &mut Context, id: u64) -> Result<()> {
        self.settle(ctx, id);
        report(ctx, Some(&self.report_to), "timeout", id)
    }
}

mote_guest::export_actor!(Asker);
