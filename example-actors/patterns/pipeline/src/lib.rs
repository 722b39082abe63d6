//! `pipeline`: Dust's PipelineActor. Its stages are its children `stage-0` .. `stage-<n-1>`;
//! each input goes through them in order and the last stage's output goes back to the input's
//! original sender (Dust's returnable messages), or to the configured sink. The schema and the
//! stage protocol are in `mote_guest::patterns::pipeline`.
//!
//! How: every kind not `pipeline.*` is an input. The pipeline numbers it, remembers its
//! sender and asks stage 0 with it (`ask_raw`, deadline `stage_timeout_ms`); a stage's reply
//! is asked of the next stage, and the last reply is the output. Asks make the correlation
//! exact, whatever order a stage answers in. Inputs move through the stages concurrently
//! (stage k works on one while stage k+1 works on an earlier one), and a reorder buffer
//! releases outcomes in input order: an input that finished early waits for the earlier ones.
//!
//! An input fails, answered with `pipeline.failed` {input, stage, reason}, when the stage's
//! deadline passes, when the stage answers `pipeline.failed` itself (a nested pipeline), or
//! when the stage fails on it. The last needs care: a failure reaches the pipeline as a call
//! of its `supervise` hook, which does not say on which message, and the stage's replies
//! come through ask endpoints, each its own task, so a reply sent before the failure may
//! arrive after the news of it. The hook notes the failure in the pipeline's mailbox with the
//! newest request sent to the stage by then (its fence). The failed request is one of the
//! requests up to the fence still unanswered: it never gets a reply, and every other one
//! does (a reply in flight, or an answer from the restarted stage) or times out. So once no
//! more of them are left unanswered than failures are noted, those are the failed ones, and
//! they fail at once. A failed stage is restarted (or resumed) by the strategy and keeps its
//! mailbox, so later inputs go on. A stage that stops ends the pipeline: what is in flight
//! fails first.
//!
//! Invariants: at most `max_in_flight` inputs are held (from entry until their outcome
//! leaves); past it an input is rejected (a dead letter). Each input gets exactly one outcome:
//! an output, a `pipeline.failed`, or nothing if a stage dropped it (`pipeline.drop`).
//! Outcomes leave in input order. A failure is pinned on a request only when no other
//! request can be the failed one (for stages that fail only while handling the pipeline's
//! requests). A reply to an ask the pipeline no longer waits for is ignored.

use core::time::Duration;
use std::collections::{BTreeMap, HashMap, VecDeque};

use mote_guest::patterns::{config, control, pipeline::*};
use mote_guest::{
    Actor, Address, Context, Directive, Envelope, Error, Failure, Message, Result, decode, encode,
};

/// One input between its entry and the release of its outcome.
struct Input {
    /// Who sent it: the output goes back there.
    sender: Option<Address>,
    /// Its outcome once known, waiting for the earlier inputs' to leave.
    outcome: Option<Outcome>,
}

/// How an input ended.
enum Outcome {
    /// The last stage's reply.
    Output { kind: String, body: Vec<u8> },
    /// It failed at a stage.
    Failed(Failed),
    /// A stage dropped it.
    Dropped,
}

/// A request to a stage, in the order it was sent.
struct Request {
    ask: u64,
    /// The input it carries, or `None` once it timed out (kept: the stage may yet fail on it,
    /// and a failure must not be pinned on another request).
    input: Option<u64>,
}

/// One stage and what the pipeline knows of its work.
struct StageBook {
    address: Address,
    /// Its unanswered requests, oldest first.
    requests: VecDeque<Request>,
    /// Failures noted and not yet pinned on a request, oldest first: their reasons.
    failures: VecDeque<String>,
    /// The newest request sent to it when the last failure was noted: the failed requests
    /// are at or before it.
    fence: u64,
}

impl StageBook {
    /// The unanswered requests that a noted failure may be on.
    fn suspects(&self) -> impl Iterator<Item = &Request> {
        self.requests.iter().filter(|r| r.ask <= self.fence)
    }
}

struct Pipeline {
    stages: Vec<StageBook>,
    sink: Option<String>,
    timeout: Duration,
    max_in_flight: usize,
    /// The number of the last input taken.
    last_input: u64,
    /// The inputs held, by number: the first is the oldest.
    inputs: BTreeMap<u64, Input>,
    /// Open asks: ask id -> (input, stage).
    asks: HashMap<u64, (u64, usize)>,
    completed: u64,
    failed: u64,
    dropped: u64,
    refused: u64,
}

/// The child name of stage `k`.
fn stage_name(k: usize) -> String {
    format!("stage-{k}")
}

impl Pipeline {
    /// Takes an input: refused past the bound, else asked of stage 0.
    fn admit(&mut self, ctx: &mut Context, env: &Envelope) -> Result<()> {
        if self.inputs.len() >= self.max_in_flight {
            self.refused += 1;
            return Err(Error::msg(format!(
                "pipeline: {} inputs in flight already",
                self.max_in_flight
            ))
            .into_malformed());
        }
        self.last_input += 1;
        let input = self.last_input;
        let sender = ctx.sender().cloned();
        self.inputs.insert(
            input,
            Input {
                sender,
                outcome: None,
            },
        );
        self.ask_stage(ctx, input, 0, &env.kind, &env.body);
        Ok(())
    }

    /// Asks stage `stage` with the input's current message; a refused ask fails the input.
    fn ask_stage(&mut self, ctx: &mut Context, input: u64, stage: usize, kind: &str, body: &[u8]) {
        let book = &mut self.stages[stage];
        match ctx.ask_raw(&book.address, kind, body, self.timeout) {
            Ok(ask) => {
                self.asks.insert(ask, (input, stage));
                book.requests.push_back(Request {
                    ask,
                    input: Some(input),
                });
            }
            Err(e) => self.fail(ctx, input, stage, e.message().to_string()),
        }
    }

    /// A stage's reply to the ask `ask`, which the pipeline waits for.
    fn reply(&mut self, ctx: &mut Context, ask: u64, input: u64, stage: usize, reply: Envelope) {
        let book = &mut self.stages[stage];
        // Answered. While no failure waits to be pinned, the timed-out requests before it are
        // taken as done with too (by a stage that answers in order, they are).
        let sweep = book.failures.is_empty();
        let mut before = true;
        book.requests.retain(|r| {
            if r.ask == ask {
                before = false;
                return false;
            }
            !(before && sweep && r.input.is_none())
        });
        self.pin_failures(ctx, stage);
        if reply.kind == Failed::KIND {
            // The stage's own reason (a nested pipeline's names its stage).
            let reason = match decode::<Failed>(&reply.kind, &reply.body) {
                Ok(inner) => inner.reason,
                Err(_) => String::from_utf8_lossy(&reply.body).into_owned(),
            };
            self.fail(ctx, input, stage, reason);
        } else if reply.kind == DropInput::KIND {
            self.finish(ctx, input, Outcome::Dropped);
        } else if stage + 1 < self.stages.len() {
            self.ask_stage(ctx, input, stage + 1, &reply.kind, &reply.body);
        } else {
            let output = Outcome::Output {
                kind: reply.kind,
                body: reply.body,
            };
            self.finish(ctx, input, output);
        }
    }

    /// The stage's deadline for `ask` passed: the input fails; the request stays as a marker.
    fn timed_out(&mut self, ctx: &mut Context, ask: u64) {
        let Some((input, stage)) = self.asks.remove(&ask) else {
            return;
        };
        let book = &mut self.stages[stage];
        if let Some(request) = book.requests.iter_mut().find(|r| r.ask == ask) {
            request.input = None;
        }
        // A stage that never answers would pile markers up: at most `max_in_flight` are kept.
        let live = self.asks.values().filter(|(_, at)| *at == stage).count();
        while book.requests.len() > live + self.max_in_flight {
            match book.requests.iter().position(|r| r.input.is_none()) {
                Some(oldest) => {
                    book.requests.remove(oldest);
                }
                None => break,
            }
        }
        let reason = format!(
            "stage {stage} did not answer within {} ms",
            self.timeout.as_millis()
        );
        self.fail(ctx, input, stage, reason);
        self.pin_failures(ctx, stage);
    }

    /// Stage `stage` failed: noted with its fence, pinned once it is clear on what.
    fn stage_failed(&mut self, ctx: &mut Context, stage: usize, reason: String) {
        let Some(book) = self.stages.get_mut(stage) else {
            return;
        };
        let Some(newest) = book.requests.back() else {
            // Nothing of the pipeline's was in the stage: not a failure on a request.
            return;
        };
        book.fence = newest.ask;
        book.failures.push_back(reason);
        self.pin_failures(ctx, stage);
    }

    /// Fails the requests noted failures are on, once no other request can be: when no more
    /// suspects are left than failures (every other suspect was answered or timed out).
    fn pin_failures(&mut self, ctx: &mut Context, stage: usize) {
        let book = &mut self.stages[stage];
        if book.failures.is_empty() {
            return;
        }
        let live = book.suspects().filter(|r| r.input.is_some()).count();
        let suspects = book.suspects().count();
        if live > 0 && suspects > book.failures.len() {
            return;
        }
        // Either every suspect failed, or none is live any more: either way the notes are
        // settled (a failure on a timed-out request, or on something else, pins nothing).
        let fence = book.fence;
        let mut reasons = std::mem::take(&mut book.failures);
        let mut failed = Vec::new();
        book.requests.retain(|r| {
            if r.ask > fence {
                return true;
            }
            if let Some(input) = r.input {
                failed.push((r.ask, input));
            }
            false
        });
        for (ask, input) in failed {
            self.asks.remove(&ask);
            let reason = reasons
                .pop_front()
                .unwrap_or_else(|| format!("stage {stage} failed"));
            self.fail(ctx, input, stage, reason);
        }
    }

    fn fail(&mut self, ctx: &mut Context, input: u64, stage: usize, reason: String) {
        let failed = Failed {
            input,
            stage: u32::try_from(stage).unwrap_or(u32::MAX),
            reason,
        };
        self.finish(ctx, input, Outcome::Failed(failed));
    }

    /// Records an input's outcome and releases every outcome now at the front, in order.
    fn finish(&mut self, ctx: &mut Context, input: u64, outcome: Outcome) {
        if let Some(held) = self.inputs.get_mut(&input) {
            held.outcome = Some(outcome);
        }
        while let Some(entry) = self.inputs.first_entry() {
            if entry.get().outcome.is_none() {
                break;
            }
            let Input { sender, outcome } = entry.remove();
            if let Some(outcome) = outcome {
                self.release(ctx, sender, outcome);
            }
        }
    }

    /// Sends an outcome where it goes. A refused send is logged: the pipeline goes on.
    fn release(&mut self, ctx: &mut Context, sender: Option<Address>, outcome: Outcome) {
        let sent = match outcome {
            Outcome::Output { kind, body } => {
                self.completed += 1;
                match (&self.sink, &sender) {
                    (Some(sink), _) => ctx.tell_path_raw(sink, &kind, &body),
                    (None, Some(sender)) => ctx.tell_raw(sender, &kind, &body),
                    (None, None) => Ok(()),
                }
            }
            Outcome::Failed(failed) => {
                self.failed += 1;
                match (&sender, &self.sink) {
                    (Some(sender), _) => ctx.tell(sender, &failed),
                    (None, Some(sink)) => ctx.tell_path(sink, &failed),
                    (None, None) => Ok(()),
                }
            }
            Outcome::Dropped => {
                self.dropped += 1;
                Ok(())
            }
        };
        if let Err(e) = sent {
            ctx.warn(&format!("pipeline: an outcome was not sent: {e}"));
        }
    }

    /// The stage at `child`'s path, if it is one.
    fn stage_of(&self, child: &Address) -> Option<usize> {
        self.stages
            .iter()
            .position(|s| s.address.path == child.path)
    }

    fn status(&self) -> Status {
        Status {
            stages: u32::try_from(self.stages.len()).unwrap_or(u32::MAX),
            in_flight: u32::try_from(self.inputs.len()).unwrap_or(u32::MAX),
            completed: self.completed,
            failed: self.failed,
            dropped: self.dropped,
            refused: self.refused,
        }
    }

    /// A control message, an input, or a kind of the pipeline's own it does not take.
    fn message(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        if env.kind == GetStatus::KIND {
            control::<GetStatus>(&env)?;
            ctx.reply(&self.status())
        } else if env.kind == StageFailed::KIND {
            let note: StageFailed = control(&env)?;
            if ctx.sender().map(|s| &s.path) != Some(&ctx.myself().path) {
                return Err(
                    Error::msg("pipeline: only the pipeline notes a stage's failure")
                        .into_malformed(),
                );
            }
            let stage = usize::try_from(note.stage).unwrap_or(usize::MAX);
            self.stage_failed(ctx, stage, note.reason);
            Ok(())
        } else if env.kind.starts_with("pipeline.") {
            Err(Error::msg(format!(
                "pipeline: `{}` is not a pipeline request",
                env.kind
            ))
            .into_malformed())
        } else {
            self.admit(ctx, &env)
        }
    }
}

impl Actor for Pipeline {
    type Msg = GetStatus;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let config: Config = config(MODULE, init)?;
        if config.stages.is_empty() || config.stages.len() > MAX_STAGES {
            return Err(Error::msg(format!(
                "pipeline: bad configuration: 1 to {MAX_STAGES} stages, not {}",
                config.stages.len()
            )));
        }
        if config.max_in_flight == 0 || config.stage_timeout_ms == 0 {
            return Err(Error::msg(
                "pipeline: bad configuration: max_in_flight and stage_timeout_ms must be at least 1",
            ));
        }
        ctx.set_strategy(&config.strategy.strategy());
        // After a hot swap the stages live on: take them as they are.
        let live = ctx.children();
        let mut stages = Vec::with_capacity(config.stages.len());
        for (k, stage) in config.stages.iter().enumerate() {
            let name = stage_name(k);
            let address = match live
                .iter()
                .find(|c| c.path.rsplit('/').next() == Some(&name))
            {
                Some(address) => address.clone(),
                None => ctx
                    .spawn(&name, &stage.module, &stage.init_bytes())
                    .map_err(|e| e.context(format!("pipeline: stage {k}")))?,
            };
            ctx.watch(&address)?;
            stages.push(StageBook {
                address,
                requests: VecDeque::new(),
                failures: VecDeque::new(),
                fence: 0,
            });
        }
        Ok(Pipeline {
            stages,
            sink: config.sink,
            timeout: Duration::from_millis(config.stage_timeout_ms),
            max_in_flight: usize::try_from(config.max_in_flight).unwrap_or(usize::MAX),
            last_input: 0,
            inputs: BTreeMap::new(),
            asks: HashMap::new(),
            completed: 0,
            failed: 0,
            dropped: 0,
            refused: 0,
        })
    }

    fn receive(&mut self, ctx: &mut Context, _msg: GetStatus) -> Result<()> {
        ctx.reply(&self.status())
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        self.message(ctx, env)
    }

    fn answered(&mut self, ctx: &mut Context, id: u64, reply: Envelope) -> Result<()> {
        match self.asks.remove(&id) {
            Some((input, stage)) => {
                self.reply(ctx, id, input, stage, reply);
                Ok(())
            }
            // Not a reply to the pipeline: a request from someone who asks it.
            None => self.message(ctx, reply),
        }
    }

    fn ask_timeout(&mut self, ctx: &mut Context, id: u64) -> Result<()> {
        self.timed_out(ctx, id);
        Ok(())
    }

    fn supervise(
        &mut self,
        ctx: &mut Context,
        child: &Address,
        failure: &Failure,
    ) -> Option<Directive> {
        if let Some(stage) = self.stage_of(child) {
            // Noted through the mailbox, behind the replies the stage sent before it failed.
            let note = StageFailed {
                stage: u32::try_from(stage).unwrap_or(u32::MAX),
                reason: format!(
                    "stage {stage} failed ({}): {}",
                    failure.kind.name(),
                    failure.error
                ),
            };
            if let Err(e) =
                encode(&note).and_then(|body| ctx.tell_raw(&ctx.myself(), StageFailed::KIND, &body))
            {
                ctx.warn(&format!("pipeline: cannot note a stage's failure: {e}"));
            }
        }
        None
    }

    fn terminated(&mut self, ctx: &mut Context, who: Address) -> Result<()> {
        let Some(stage) = self.stage_of(&who) else {
            return Ok(());
        };
        if self.stages[stage].address != who {
            return Ok(());
        }
        // A stage is gone: nothing held can finish. Fail it all, in order, and stop.
        let reason = format!("stage {stage} stopped");
        let open: Vec<(u64, usize)> = self.asks.drain().map(|(_, open)| open).collect();
        let mut open = open;
        open.sort_unstable();
        for (input, at) in open {
            self.fail(ctx, input, at, reason.clone());
        }
        ctx.warn(&format!("pipeline: {reason}; the pipeline stops"));
        ctx.stop_self();
        Ok(())
    }
}

mote_guest::export_actor!(Pipeline);
