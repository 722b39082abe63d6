//! `throttle`: passes every message on to its target at a configured rate, in arrival order
//! and with its original sender, holding the surplus in a bounded queue (the schema is
//! `mote_guest::patterns::throttle`).
//!
//! How: a token bucket refilled from the actor's monotonic clock. A message that finds credit
//! and nothing waiting goes at once; any other waits in the host-kept stash (so it survives a
//! restart or an upgrade, and a durable one stays unacknowledged until it is passed on). While
//! messages wait, a periodic tick takes as many out of the stash as the credit allows and
//! forwards them; `take` makes each one's sender the one `forward` passes on. A tick costs
//! O(credit), never O(queue). Past `queue` waiting messages, a message is rejected: a dead
//! letter with reason `rejected`.

use core::time::Duration;

use mote_guest::patterns::{config, control, throttle::*};
use mote_guest::{Actor, Context, Envelope, Error, Message, Result};

/// The shortest tick the host allows (its minimum timer period).
const MIN_TICK_MS: u64 = 10;

struct Throttle {
    target: String,
    rate: u32,
    per_ms: u64,
    burst: u32,
    queue: u32,
    /// Credit in units: time adds `rate` a millisecond, a message costs `per_ms`.
    units: u64,
    /// The clock reading (ms) the credit was last brought up to.
    refilled_at: u64,
    /// The periodic tick, while messages wait.
    tick: Option<u64>,
    forwarded: u64,
    refused: u64,
}

impl Throttle {
    fn set_rate(&mut self, rate: u32, per_ms: u64, burst: Option<u32>) -> Result<()> {
        if rate == 0 || per_ms == 0 {
            return Err(Error::msg("throttle: rate and per_ms must be at least 1"));
        }
        self.rate = rate;
        self.per_ms = per_ms;
        self.burst = burst.unwrap_or(rate).max(1);
        self.units = self.units.min(self.capacity());
        Ok(())
    }

    fn capacity(&self) -> u64 {
        u64::from(self.burst).saturating_mul(self.per_ms)
    }

    fn now_ms(ctx: &Context) -> u64 {
        u64::try_from(ctx.since_start().as_millis()).unwrap_or(u64::MAX)
    }

    /// Adds the credit the time since the last refill earned.
    fn refill(&mut self, ctx: &Context) {
        let now = Self::now_ms(ctx);
        let earned = now
            .saturating_sub(self.refilled_at)
            .saturating_mul(u64::from(self.rate));
        self.units = self.units.saturating_add(earned).min(self.capacity());
        self.refilled_at = now;
    }

    fn can_pass(&self) -> bool {
        self.units >= self.per_ms
    }

    /// Forwards the message this call handles (or last took) to the target.
    fn pass(&mut self, ctx: &Context, kind: &str, body: &[u8]) -> Result<()> {
        ctx.forward_raw(&self.target, kind, body)?;
        self.units -= self.per_ms;
        self.forwarded += 1;
        Ok(())
    }

    /// The tick period: one message's worth of time, no shorter than the host allows.
    fn period(&self) -> Duration {
        Duration::from_millis((self.per_ms / u64::from(self.rate)).max(MIN_TICK_MS))
    }

    fn ensure_tick(&mut self, ctx: &Context) -> Result<()> {
        if self.tick.is_none() {
            let period = self.period();
            self.tick = Some(ctx.schedule_self(&Tick {}, period, Some(period))?);
        }
        Ok(())
    }

    /// Passes on as many waiting messages as the credit allows; stops ticking once none wait.
    fn drain(&mut self, ctx: &Context) -> Result<()> {
        self.refill(ctx);
        while self.can_pass() {
            let Some(waiting) = ctx.take(None) else {
                break;
            };
            self.pass(ctx, &waiting.kind, &waiting.body)?;
        }
        if ctx.stashed() == 0
            && let Some(tick) = self.tick.take()
        {
            ctx.cancel_timer(tick);
        }
        Ok(())
    }

    fn status(&self, ctx: &Context) -> Status {
        Status {
            queued: ctx.stashed(),
            forwarded: self.forwarded,
            refused: self.refused,
            rate: self.rate,
            per_ms: self.per_ms,
        }
    }

    /// A message to pass on: now if it may go, else it waits (or is refused past the queue).
    fn admit(&mut self, ctx: &mut Context, env: &Envelope) -> Result<()> {
        self.refill(ctx);
        let waiting = ctx.stashed();
        if waiting == 0 && self.can_pass() {
            return self.pass(ctx, &env.kind, &env.body);
        }
        if waiting >= self.queue {
            self.refused += 1;
            return Err(
                Error::msg(format!("throttle: queue full ({} waiting)", self.queue))
                    .into_malformed(),
            );
        }
        ctx.stash();
        self.ensure_tick(ctx)
    }
}

impl Actor for Throttle {
    type Msg = Tick;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let config: Config = config(MODULE, init)?;
        let mut throttle = Throttle {
            target: config.target,
            rate: 1,
            per_ms: 1,
            burst: 1,
            queue: config.queue,
            units: 0,
            refilled_at: Self::now_ms(ctx),
            tick: None,
            forwarded: 0,
            refused: 0,
        };
        throttle.set_rate(config.rate, config.per_ms, config.burst)?;
        // A full bucket to begin with: the first burst goes at once.
        throttle.units = throttle.capacity();
        // Messages stashed before a restart or an upgrade still wait.
        if ctx.stashed() > 0 {
            throttle.ensure_tick(ctx)?;
        }
        Ok(throttle)
    }

    fn receive(&mut self, ctx: &mut Context, _tick: Tick) -> Result<()> {
        self.drain(ctx)
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        if env.kind == SetRate::KIND {
            let set: SetRate = control(&env)?;
            self.refill(ctx);
            self.set_rate(set.rate, set.per_ms, None)
                .map_err(Error::into_malformed)?;
            // The tick follows the new rate.
            if let Some(tick) = self.tick.take() {
                ctx.cancel_timer(tick);
                self.ensure_tick(ctx)?;
            }
            Ok(())
        } else if env.kind == GetStatus::KIND {
            let status = self.status(ctx);
            ctx.reply(&status)
        } else {
            self.admit(ctx, &env)
        }
    }
}

mote_guest::export_actor!(Throttle);
