//! Counter: holds a number that `Counter::Add(k)` increases and `Counter::Get` asks for.
//!
//! Init: `[start-value]` (default 0). `Get` replies `Value(count)` to its sender (a `Get`
//! without a sender is ignored); a stray `Value` is ignored with a warning.

use mote_example_protocol::{Counter, init_opt, init_words};
use mote_guest::{Actor, Context, Result};

/// The count so far.
struct Count(u64);

impl Actor for Count {
    type Msg = Counter;

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let start = init_opt(&init_words(init), 0, "start-value")?;
        Ok(Self(start.unwrap_or(0)))
    }

    fn receive(&mut self, ctx: &mut Context, msg: Counter) -> Result<()> {
        match msg {
            Counter::Add(k) => self.0 = self.0.wrapping_add(k),
            Counter::Get if ctx.sender().is_some() => ctx.reply(&Counter::Value(self.0))?,
            Counter::Get => ctx.debug("ignoring a Get without a sender"),
            Counter::Value(v) => ctx.warn(&format!("ignoring a stray Value({v})")),
        }
        Ok(())
    }
}

mote_guest::export_actor!(Count);
