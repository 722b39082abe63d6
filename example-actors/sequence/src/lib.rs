//! Sequence: checks that messages from one sender arrive in the order they were sent.
//!
//! The role comes from the init words:
//! - `send <target-path> <stream> <count>`: at start sends `Seq { stream, n }` for `n` in
//!   `0..count` to the target, then stops.
//! - `check <R> <streams> <per-stream>`: expects, on each stream `0..streams`, `n` to follow
//!   the previous one; any other `n` (or unknown stream) counts as out of order. Once every
//!   stream has delivered `per-stream` messages it reports `in_order` (received minus out of
//!   order) and then `out_of_order` to `R`.

use mote_example_protocol::{Seq, init_arg, init_words, report};
use mote_guest::{Actor, Context, Error, Result};

/// What the checker tracks for one stream.
#[derive(Clone, Copy, Default)]
struct Stream {
    /// The next `n` expected.
    expected: u32,
    /// How many messages arrived on it.
    received: u32,
}

/// The order checker's state.
struct Checker {
    report_to: String,
    per_stream: u32,
    streams: Vec<Stream>,
    received: u64,
    out_of_order: u64,
    reported: bool,
}

impl Checker {
    /// Reports the tallies once every stream is complete.
    fn report_if_complete(&mut self, ctx: &Context) -> Result<()> {
        if self.reported || self.streams.iter().any(|s| s.received < self.per_stream) {
            return Ok(());
        }
        self.reported = true;
        let to = Some(self.report_to.as_str());
        report(ctx, to, "in_order", self.received - self.out_of_order)?;
        report(ctx, to, "out_of_order", self.out_of_order)
    }
}

/// A sender (stateless once started) or a checker.
enum Sequence {
    /// Has sent its stream and stopped.
    Sender,
    /// Checks the order of arriving streams.
    Checker(Checker),
}

impl Actor for Sequence {
    type Msg = Seq;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        match words.first().copied() {
            Some("send") => {
                let target: String = init_arg(&words, 1, "target-path")?;
                let stream = init_arg(&words, 2, "stream")?;
                let count: u32 = init_arg(&words, 3, "count")?;
                for n in 0..count {
                    ctx.tell_path(&target, &Seq { stream, n })?;
                }
                ctx.stop_self();
                Ok(Self::Sender)
            }
            Some("check") => {
                let streams: u32 = init_arg(&words, 2, "streams")?;
                let mut checker = Checker {
                    report_to: init_arg(&words, 1, "report-path")?,
                    per_stream: init_arg(&words, 3, "per-stream")?,
                    streams: vec![Stream::default(); streams as usize],
                    received: 0,
                    out_of_order: 0,
                    reported: false,
                };
                checker.report_if_complete(ctx)?;
                Ok(Self::Checker(checker))
            }
            other => Err(Error::msg(format!(
                "init must start with `send` or `check`, got {other:?}"
            ))),
        }
    }

    fn receive(&mut self, ctx: &mut Context, msg: Seq) -> Result<()> {
        let Self::Checker(checker) = self else {
            ctx.warn(&format!("sender ignoring {msg:?}"));
            return Ok(());
        };
        checker.received += 1;
        match checker.streams.get_mut(msg.stream as usize) {
            Some(stream) => {
                stream.received += 1;
                if msg.n != stream.expected {
                    checker.out_of_order += 1;
                    ctx.warn(&format!(
                        "stream {}: got {} but expected {}",
                        msg.stream, msg.n, stream.expected
                    ));
                }
                stream.expected = msg.n.wrapping_add(1);
            }
            None => {
                checker.out_of_order += 1;
                ctx.warn(&format!("unknown stream {} (n = {})", msg.stream, msg.n));
            }
        }
        checker.report_if_complete(ctx)
    }
}

mote_guest::export_actor!(Sequence);
