//! Echo-worker: a one-shot JSON worker, the kind a `service-manager` spawns per request, and
//! a target whose answers a `reaper` can reduce.
//!
//! Init: `[value]` (default 0). It answers its sender: `square` `{"n": n}` with `squared`
//! `{"n": n²}`, `get-value` `{}` with `value` `{"value": value}`, and `echo` (any body) with
//! `echoed` (the same body). `hold` is answered `released` (same body) only once a `release`
//! (from anyone) lets it go. `trap` panics, `fail` returns an error, `flaky` panics unless
//! this instance is a restarted one (then it answers `recovered`), and any other kind is
//! never answered.

use mote_example_protocol::{GetValue, Square, Squared, WorkerValue, init_opt, init_words};
use mote_guest::{Actor, Address, Context, Envelope, Error, Result};

/// Its value, from the init, and whether this instance replaces a failed one.
struct EchoWorker {
    value: i64,
    restarted: bool,
}

impl Actor for EchoWorker {
    type Msg = Square;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let value = init_opt(&init_words(init), 0, "value")?;
        Ok(Self {
            value: value.unwrap_or(0),
            restarted: ctx.restart_cause().is_some(),
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Square) -> Result<()> {
        ctx.reply(&Squared {
            n: msg.n.wrapping_mul(msg.n),
        })
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        match env.kind.as_str() {
            "get-value" => {
                env.decode::<GetValue>().map_err(Error::into_malformed)?;
                ctx.reply(&WorkerValue { value: self.value })
            }
            "echo" => answer(ctx, env.sender.as_ref(), "echoed", &env.body),
            "hold" => {
                ctx.stash();
                Ok(())
            }
            "release" => match ctx.take(Some("hold")) {
                Some(held) => answer(ctx, held.sender.as_ref(), "released", &held.body),
                None => Ok(()),
            },
            "flaky" if self.restarted => answer(ctx, env.sender.as_ref(), "recovered", &env.body),
            "trap" | "flaky" => panic!("echo-worker asked to trap"),
            "fail" => Err(Error::msg("echo-worker asked to fail")),
            other => {
                ctx.debug(&format!("not answering `{other}`"));
                Ok(())
            }
        }
    }
}

/// Sends `kind` with `body` to `to`, if there is one.
fn answer(ctx: &Context, to: Option<&Address>, kind: &str, body: &[u8]) -> Result<()> {
    match to {
        Some(to) => ctx.tell_raw(to, kind, body),
        None => Ok(()),
    }
}

mote_guest::export_actor!(EchoWorker);
