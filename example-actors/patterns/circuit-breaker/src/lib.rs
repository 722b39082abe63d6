//! `circuit-breaker`: Akka's `CircuitBreaker` in front of one target actor (the schema is
//! `mote_guest::patterns::circuit_breaker`). Each request goes to the target as an ask; the
//! reply goes back to the request's sender; while the target keeps failing, requests are
//! refused at once.
//!
//! How: every request is resolved to the target's live address and asked with the call
//! timeout; the pending asks map ask ids to the requests' senders. A reply of a kind in
//! `failure_kinds`, an ask timeout (answered with `circuit-breaker.failed`) or a target that
//! does not live are failures; any other reply is a success. Closed: a success resets the
//! count of consecutive failures, `max_failures` of them open the breaker. Open: requests are
//! refused with `circuit-breaker.open`; once the reset timeout has passed (read from the
//! actor's monotonic clock when a request or `get-state` comes; no timer) the breaker is
//! half-open: the first request is the trial, the rest are refused; the trial's success
//! closes it, its failure opens it again with the reset timeout doubled up to
//! `max_reset_timeout_ms` (if set). Outcomes of asks made before the state last changed (a
//! late success while open, say) are relayed but change nothing, except while closed.
//!
//! Invariants: at most `max_pending` asks wait (past it: `circuit-breaker.busy`); every
//! request with a sender gets exactly one answer: the target's reply, `failed`, `open` or
//! `busy` (a refused request without a sender is a dead letter, `rejected`); a malformed control message is
//! rejected and the breaker goes on. An upgrade carries the whole state over. The breaker
//! fails only by a trap (a bug); its restart starts closed and forgets the pending asks,
//! whose late answers would look like requests from asks (both come from an ask's address):
//! so for `call_timeout_ms` after a restart, a request from an ask is refused with
//! `circuit-breaker.busy` (an answer's is a dead letter), and requests from actors pass.

use std::collections::HashMap;
use std::time::Duration;

use mote_guest::patterns::{circuit_breaker::*, config, malformed};
use mote_guest::serde::{Deserialize, Serialize};
use mote_guest::{Actor, Address, Context, Envelope, Error, Message, Result, decode};

/// The prefix of the breaker's own kinds.
const PREFIX: &str = "circuit-breaker.";

/// A request waiting for the target's answer.
#[derive(Serialize, Deserialize)]
#[serde(crate = "mote_guest::serde")]
struct Call {
    /// Who to relay the answer to.
    sender: Option<Address>,
}

/// The state, with what it needs.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(crate = "mote_guest::serde")]
enum Phase {
    Closed,
    /// Open until this clock reading (ms).
    Open {
        until: u64,
    },
    /// The trial's ask id, once one passed.
    HalfOpen {
        trial: Option<u64>,
    },
}

/// The breaker's state, all of which an upgrade carries over (the pending asks included,
/// so their answers are still told apart from requests).
#[derive(Serialize, Deserialize)]
#[serde(crate = "mote_guest::serde")]
struct Breaker {
    target: String,
    max_failures: u32,
    call_timeout: Duration,
    base_reset_ms: u64,
    max_reset_ms: Option<u64>,
    failure_kinds: Vec<String>,
    max_pending: usize,
    phase: Phase,
    failures: u32,
    reset_ms: u64,
    pending: HashMap<u64, Call>,
    /// Until this clock reading (ms), after a restart, a message from an ask's address may be
    /// the late answer to a forgotten ask.
    blind_until: u64,
    passed: u64,
    refused: u64,
    opened: u64,
}

/// A configuration the breaker cannot start with.
fn bad(why: &str) -> Error {
    Error::msg(format!("{MODULE}: bad configuration: {why}"))
}

/// Replies to the sender of the message being handled; a reply the host refuses is logged
/// (the breaker does not fail for it, which would forget its pending asks).
fn answer_sender<M: Message>(ctx: &Context, msg: &M) {
    if let Err(e) = ctx.reply(msg) {
        ctx.warn(&format!("{MODULE}: cannot answer: {}", e.message()));
    }
}

fn now_ms(ctx: &Context) -> u64 {
    u64::try_from(ctx.since_start().as_millis()).unwrap_or(u64::MAX)
}

impl Breaker {
    /// The state now: an open breaker whose reset timeout has passed is half-open.
    fn phase(&mut self, ctx: &Context) -> Phase {
        if let Phase::Open { until } = self.phase
            && now_ms(ctx) >= until
        {
            self.phase = Phase::HalfOpen { trial: None };
        }
        self.phase
    }

    fn open(&mut self, ctx: &Context) {
        self.phase = Phase::Open {
            until: now_ms(ctx).saturating_add(self.reset_ms),
        };
        self.opened += 1;
        ctx.info(&format!(
            "circuit-breaker: open for {} ms ({} failures)",
            self.reset_ms, self.failures
        ));
    }

    fn close(&mut self, ctx: &Context) {
        self.phase = Phase::Closed;
        self.failures = 0;
        self.reset_ms = self.base_reset_ms;
        ctx.info("circuit-breaker: closed");
    }

    /// Counts the outcome of a call: `trial` if it was the half-open state's trial (which
    /// decides the state), else it counts only while closed.
    fn settle(&mut self, ctx: &Context, trial: bool, success: bool) {
        match self.phase {
            Phase::HalfOpen { .. } if trial => {
                if success {
                    self.close(ctx);
                } else {
                    if let Some(max) = self.max_reset_ms {
                        self.reset_ms = self.reset_ms.saturating_mul(2).min(max);
                    }
                    self.open(ctx);
                }
            }
            Phase::Closed if success => self.failures = 0,
            Phase::Closed => {
                self.failures += 1;
                if self.failures >= self.max_failures {
                    self.open(ctx);
                }
            }
            // Calls from before the breaker opened change nothing now.
            _ => {}
        }
    }

    /// Whether ask `id` is the trial under way.
    fn is_trial(&self, id: u64) -> bool {
        self.phase == Phase::HalfOpen { trial: Some(id) }
    }

    /// Relays an answer to a request's sender; one that is gone is the host's dead letter.
    fn relay(ctx: &Context, call: &Call, kind: &str, body: &[u8]) {
        if let Some(sender) = &call.sender
            && let Err(e) = ctx.tell_raw(sender, kind, body)
        {
            ctx.warn(&format!("{MODULE}: cannot relay `{kind}`: {}", e.message()));
        }
    }

    /// Answers the request being handled with a refusal, or rejects it if it has no sender.
    fn refuse<M: Message>(&mut self, ctx: &Context, env: &Envelope, answer: &M) -> Result<()> {
        self.refused += 1;
        if ctx.sender().is_some() {
            answer_sender(ctx, answer);
            Ok(())
        } else {
            Err(malformed(format!(
                "{MODULE}: refused `{}` ({}), and it has no sender to tell",
                env.kind,
                M::KIND
            )))
        }
    }

    /// A request: passed on to the target as an ask, or refused.
    fn request(&mut self, ctx: &Context, env: &Envelope) -> Result<()> {
        let trial = match self.phase(ctx) {
            Phase::Closed => false,
            Phase::HalfOpen { trial: None } => true,
            Phase::HalfOpen { trial: Some(_) } => {
                return self.refuse(ctx, env, &Open { retry_in_ms: 0 });
            }
            Phase::Open { until } => {
                let retry_in_ms = until.saturating_sub(now_ms(ctx));
                return self.refuse(ctx, env, &Open { retry_in_ms });
            }
        };
        if self.pending.len() >= self.max_pending {
            let pending = self.pending.len() as u32;
            return self.refuse(ctx, env, &Busy { pending });
        }
        let Some(target) = ctx.resolve(&self.target) else {
            // Nobody to ask: a failure, answered at once.
            self.settle(ctx, trial, false);
            return self.refuse(
                ctx,
                env,
                &Failed {
                    reason: format!("no actor at `{}`", self.target),
                },
            );
        };
        let id = match ctx.ask_raw(&target, &env.kind, &env.body, self.call_timeout) {
            Ok(id) => id,
            // Refused by the host (its quota of asks, say): not the target's failure.
            Err(e) => {
                let reason = format!("{MODULE}: {}", e.message());
                return self.refuse(ctx, env, &Failed { reason });
            }
        };
        self.pending.insert(
            id,
            Call {
                sender: ctx.sender().cloned(),
            },
        );
        if trial {
            self.phase = Phase::HalfOpen { trial: Some(id) };
        }
        self.passed += 1;
        Ok(())
    }

    fn status(&mut self, ctx: &Context) -> Status {
        let phase = self.phase(ctx);
        let (state, retry_in_ms) = match phase {
            Phase::Closed => (State::Closed, 0),
            Phase::Open { until } => (State::Open, until.saturating_sub(now_ms(ctx))),
            Phase::HalfOpen { .. } => (State::HalfOpen, 0),
        };
        Status {
            state,
            failures: self.failures,
            pending: self.pending.len() as u32,
            retry_in_ms,
            reset_timeout_ms: self.reset_ms,
            passed: self.passed,
            refused: self.refused,
            opened: self.opened,
        }
    }

    /// Any message but an answer to one of the breaker's asks.
    fn handle(&mut self, ctx: &Context, env: &Envelope) -> Result<()> {
        if env.kind == GetState::KIND {
            let _: GetState = decode(&env.kind, &env.body).map_err(Error::into_malformed)?;
            let status = self.status(ctx);
            answer_sender(ctx, &status);
            Ok(())
        } else if env.kind.starts_with(PREFIX) {
            Err(malformed(format!(
                "{MODULE}: `{}` is not a request it takes",
                env.kind
            )))
        } else {
            self.request(ctx, env)
        }
    }
}

impl Actor for Breaker {
    type Msg = GetState;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let config: Config = config(MODULE, init)?;
        if config.max_failures == 0 {
            return Err(bad("max_failures must be at least 1"));
        }
        if config.call_timeout_ms == 0 || config.reset_timeout_ms == 0 {
            return Err(bad(
                "call_timeout_ms and reset_timeout_ms must be at least 1",
            ));
        }
        if config
            .max_reset_timeout_ms
            .is_some_and(|max| max < config.reset_timeout_ms)
        {
            return Err(bad(
                "max_reset_timeout_ms must be at least reset_timeout_ms",
            ));
        }
        if config.max_pending == 0 {
            return Err(bad("max_pending must be at least 1"));
        }
        Ok(Breaker {
            target: config.target,
            max_failures: config.max_failures,
            call_timeout: Duration::from_millis(config.call_timeout_ms),
            base_reset_ms: config.reset_timeout_ms,
            max_reset_ms: config.max_reset_timeout_ms,
            failure_kinds: config.failure_kinds,
            max_pending: config.max_pending as usize,
            phase: Phase::Closed,
            failures: 0,
            reset_ms: config.reset_timeout_ms,
            pending: HashMap::new(),
            blind_until: match ctx.restart_cause() {
                Some(_) => now_ms(ctx).saturating_add(config.call_timeout_ms),
                None => 0,
            },
            passed: 0,
            refused: 0,
            opened: 0,
        })
    }

    fn receive(&mut self, ctx: &mut Context, _get: GetState) -> Result<()> {
        let status = self.status(ctx);
        answer_sender(ctx, &status);
        Ok(())
    }

    fn save_state(&self) -> Result<Option<Vec<u8>>> {
        mote_guest::state(self)
    }

    fn migrate(_ctx: &mut Context, _from_version: &str, state: &[u8]) -> Result<Self> {
        mote_guest::from_state(state)
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        self.handle(ctx, &env)
    }

    /// The target's reply to one of the breaker's asks, or a request from an asker (whose
    /// sender is an ask's address too).
    fn answered(&mut self, ctx: &mut Context, id: u64, reply: Envelope) -> Result<()> {
        let Some(call) = self.pending.remove(&id) else {
            if now_ms(ctx) < self.blind_until && !reply.is::<GetState>() {
                let pending = self.pending.len() as u32;
                return self.refuse(ctx, &reply, &Busy { pending });
            }
            return self.handle(ctx, &reply);
        };
        let success = !self.failure_kinds.contains(&reply.kind);
        let trial = self.is_trial(id);
        self.settle(ctx, trial, success);
        Self::relay(ctx, &call, &reply.kind, &reply.body);
        Ok(())
    }

    fn ask_timeout(&mut self, ctx: &mut Context, id: u64) -> Result<()> {
        let Some(call) = self.pending.remove(&id) else {
            return Ok(());
        };
        let trial = self.is_trial(id);
        self.settle(ctx, trial, false);
        let failed = Failed {
            reason: format!(
                "no reply from `{}` within {} ms",
                self.target,
                self.call_timeout.as_millis()
            ),
        };
        if let Some(sender) = &call.sender
            && let Err(e) = ctx.tell(sender, &failed)
        {
            ctx.warn(&format!("{MODULE}: cannot answer: {}", e.message()));
        }
        Ok(())
    }
}

mote_guest::export_actor!(Breaker);
