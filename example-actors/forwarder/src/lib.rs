//! Forwarder: one stage of a chain. Init: `<stage> [next-path]`.
//!
//! `Counter::Get` is forwarded to `next-path` with its original sender, or, at the last stage
//! (no next path), answered with `Counter::Value(stage)`: so an ask of the first stage is
//! answered by the last, straight to the asker. Other messages are ignored.

use mote_example_protocol::{Counter, init_arg, init_opt, init_words};
use mote_guest::{Actor, Context, Result};

/// Where this stage passes requests on, and which stage it is.
struct Stage {
    stage: u64,
    next: Option<String>,
}

impl Actor for Stage {
    type Msg = Counter;

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        Ok(Self {
            stage: init_arg(&words, 0, "stage")?,
            next: init_opt(&words, 1, "next-path")?,
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Counter) -> Result<()> {
        match (msg, &self.next) {
            (Counter::Get, Some(next)) => ctx.forward(next, &Counter::Get),
            (Counter::Get, None) => ctx.reply(&Counter::Value(self.stage)),
            _ => Ok(()),
        }
    }
}

mote_guest::export_actor!(Stage);
