//! `reaper`: scatter-gather. Asks many actors the same request and replies to the requester
//! with what came back by a deadline, and who did not answer (the schema is
//! `mote_guest::patterns::reaper`).
//!
//! Dust's ReaperActor reaps one set of targets and dies; Akka's scatter-gather-first-completed
//! wants one reply. This reaper is one long-lived actor serving many gathers at once, each
//! wanting all its replies, the first `want`, or whatever came by its deadline; with a
//! reduction (per gather, or for all in the config) it is Dust's ReapTransformServiceActor,
//! replying with one value computed from the replies instead of the replies themselves.
//!
//! How: a `reaper.gather` is one host ask per target (the gather's deadline is each ask's
//! timeout), tracked by ask id. Each reply or ask timeout settles one target; the gather
//! replies to its requester (the sender of the gather) when every target is settled, or as
//! soon as `want` replies came. An ask that ends after its gather replied is dropped. A target
//! that does not exist, traps or never answers times out; one the host refuses to ask (a bad
//! path, the host's ask quota) is listed in `failed` at once.
//!
//! Invariants: every gather taken on is answered exactly once, never before its deadline
//! unless all (or `want`) replies came, and never later than its deadline plus the time to
//! deliver the last ask timeout; the reaper holds at most `max_gathers` gathers of at most
//! `max_targets` targets, and at most `max_asks` asks awaiting a reply; a gather past one of
//! these is answered `reaper.refused`, naming the bound. A malformed gather (a bad body, no
//! sender to reply to, a zero deadline or `want`) is a dead letter (`rejected`).

use std::collections::HashMap;

use mote_guest::patterns::{config, control, reaper::*};
use mote_guest::{Actor, Address, Context, Envelope, Error, Message, Result};

/// Where a target of a gather stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Asked; no reply yet.
    Waiting,
    /// Replied.
    Replied,
    /// Its ask timed out.
    TimedOut,
    /// The host refused to ask it.
    Failed,
}

/// One gather in progress.
struct Gathering {
    /// Who gets the answer: the sender of the gather.
    requester: Address,
    targets: Vec<String>,
    states: Vec<Target>,
    /// Targets still `Waiting`.
    waiting: usize,
    /// Reply once this many replies came.
    want: usize,
    replies: Vec<Reply>,
    failed: Vec<Failed>,
    reduce: Option<Reduce>,
}

impl Gathering {
    /// Whether the gather can reply now.
    fn done(&self) -> bool {
        self.waiting == 0 || self.replies.len() >= self.want
    }

    /// Settles target `index` as `state` (a reply, if `reply` is given).
    fn settle(&mut self, index: usize, state: Target, reply: Option<Reply>) {
        if self.states.get(index) != Some(&Target::Waiting) {
            return;
        }
        self.states[index] = state;
        self.waiting -= 1;
        self.replies.extend(reply);
    }
}

struct Reaper {
    config: Config,
    /// Gathers in progress, by the reaper's own id.
    gathers: HashMap<u64, Gathering>,
    /// Every ask awaiting a reply: its gather and target index. Asks of gathers that already
    /// replied stay until they end, so that this counts what the host holds for the reaper.
    asks: HashMap<u64, (u64, usize)>,
    next_gather: u64,
    gathered: u64,
    refused: u64,
}

/// The sender's problem: the message is rejected (a dead letter), the reaper goes on.
fn malformed(why: impl core::fmt::Display) -> Error {
    Error::msg(format!("reaper: {why}")).into_malformed()
}

impl Reaper {
    /// Answers the requester that its gather would pass `bound` (of value `limit`).
    fn refuse(&mut self, ctx: &Context, bound: &str, limit: u32, reason: String) -> Result<()> {
        self.refused += 1;
        ctx.reply(&Refused {
            bound: bound.to_string(),
            limit,
            reason,
        })
    }

    /// The address to ask for `target`: an absolute path reaches whoever lives there
    /// (incarnation 0); a relative one is resolved against the reaper.
    fn address(ctx: &Context, target: &str) -> Result<Address> {
        if target.starts_with('/') {
            return Ok(Address {
                path: target.to_string(),
                incarnation: 0,
            });
        }
        ctx.resolve(target)
            .ok_or_else(|| Error::msg(format!("no actor lives at `{target}`")))
    }

    fn gather(&mut self, ctx: &Context, gather: Gather) -> Result<()> {
        let requester = ctx
            .sender()
            .cloned()
            .ok_or_else(|| malformed("a gather needs a sender to reply to"))?;
        let deadline = gather.deadline_ms.unwrap_or(self.config.deadline_ms);
        if deadline == 0 {
            return Err(malformed("deadline_ms must be at least 1"));
        }
        if gather.want == Some(0) {
            return Err(malformed("want must be at least 1"));
        }
        let body = gather
            .payload
            .to_bytes()
            .map_err(|e| malformed(e.message()))?;
        let n = gather.targets.len();
        let config = &self.config;
        if n > config.max_targets as usize {
            let (limit, reason) = (config.max_targets, format!("{n} targets"));
            return self.refuse(ctx, "max_targets", limit, reason);
        }
        if self.gathers.len() >= config.max_gathers as usize {
            let limit = config.max_gathers;
            let reason = format!("{} gathers in progress", self.gathers.len());
            return self.refuse(ctx, "max_gathers", limit, reason);
        }
        if self.asks.len() + n > config.max_asks as usize {
            let limit = config.max_asks;
            let reason = format!("{} asks pending, {n} more asked", self.asks.len());
            return self.refuse(ctx, "max_asks", limit, reason);
        }
        let id = self.next_gather;
        self.next_gather += 1;
        let mut gathering = Gathering {
            requester,
            states: vec![Target::Waiting; n],
            waiting: n,
            want: gather.want.map_or(n, |w| w as usize),
            replies: Vec::new(),
            failed: Vec::new(),
            reduce: gather.reduce.or_else(|| self.config.reduce.clone()),
            targets: gather.targets,
        };
        let timeout = core::time::Duration::from_millis(deadline);
        for index in 0..n {
            let target = &gathering.targets[index];
            let asked = Self::address(ctx, target)
                .and_then(|to| ctx.ask_raw(&to, &gather.kind, &body, timeout));
            match asked {
                Ok(ask) => {
                    self.asks.insert(ask, (id, index));
                }
                Err(e) => {
                    gathering.failed.push(Failed {
                        target: target.clone(),
                        error: e.message().to_string(),
                    });
                    gathering.settle(index, Target::Failed, None);
                }
            }
        }
        if gathering.done() {
            self.answer(ctx, gathering);
        } else {
            self.gathers.insert(id, gathering);
        }
        Ok(())
    }

    /// Settles the target of ask `ask` (a reply or a timeout) and answers its gather if it
    /// is done; an ask of a gather that already replied is dropped.
    fn settle(&mut self, ctx: &Context, ask: u64, state: Target, reply: Option<Envelope>) {
        let Some((id, index)) = self.asks.remove(&ask) else {
            return;
        };
        let Some(gathering) = self.gathers.get_mut(&id) else {
            return;
        };
        let reply = reply.map(|env| Reply {
            from: gathering.targets[index].clone(),
            kind: env.kind,
            payload: Payload::of_bytes(&env.body),
        });
        gathering.settle(index, state, reply);
        if gathering.done()
            && let Some(gathering) = self.gathers.remove(&id)
        {
            self.answer(ctx, gathering);
        }
    }

    /// Sends a finished gather's answer to its requester.
    fn answer(&mut self, ctx: &Context, gathering: Gathering) {
        self.gathered += 1;
        let timed_out: Vec<String> = gathering
            .targets
            .iter()
            .zip(&gathering.states)
            .filter(|(_, state)| **state == Target::TimedOut)
            .map(|(target, _)| target.clone())
            .collect();
        let complete = gathering.replies.len() >= gathering.want;
        let to = &gathering.requester;
        let sent = match &gathering.reduce {
            Some(reduce) => {
                let (value, from) = reduce.apply(&gathering.replies);
                ctx.tell(
                    to,
                    &Reduced {
                        value,
                        from,
                        timed_out,
                        failed: gathering.failed,
                        complete,
                    },
                )
            }
            None => ctx.tell(
                to,
                &Gathered {
                    replies: gathering.replies,
                    timed_out,
                    failed: gathering.failed,
                    complete,
                },
            ),
        };
        if let Err(e) = sent {
            ctx.warn(&format!("reaper: cannot answer {}: {e}", to.path));
        }
    }

    fn status(&self) -> Status {
        Status {
            gathering: u32::try_from(self.gathers.len()).unwrap_or(u32::MAX),
            asks_pending: u32::try_from(self.asks.len()).unwrap_or(u32::MAX),
            gathered: self.gathered,
            refused: self.refused,
        }
    }
}

impl Actor for Reaper {
    type Msg = Gather;

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let init = if init.is_empty() { b"{}" } else { init };
        let config: Config = config(MODULE, init)?;
        Ok(Reaper {
            config,
            gathers: HashMap::new(),
            asks: HashMap::new(),
            next_gather: 0,
            gathered: 0,
            refused: 0,
        })
    }

    fn receive(&mut self, ctx: &mut Context, gather: Gather) -> Result<()> {
        self.gather(ctx, gather)
    }

    fn answered(&mut self, ctx: &mut Context, id: u64, reply: Envelope) -> Result<()> {
        if self.asks.contains_key(&id) {
            self.settle(ctx, id, Target::Replied, Some(reply));
            Ok(())
        } else if reply.kind == Gather::KIND {
            // Not a reply: a gather (or other message) from an asker outside.
            let gather = control(&reply)?;
            self.gather(ctx, gather)
        } else {
            self.unhandled(ctx, reply)
        }
    }

    fn ask_timeout(&mut self, ctx: &mut Context, id: u64) -> Result<()> {
        self.settle(ctx, id, Target::TimedOut, None);
        Ok(())
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        if env.kind == GetStatus::KIND {
            control::<GetStatus>(&env)?;
            ctx.reply(&self.status())
        } else {
            Err(malformed(format!("unknown kind `{}`", env.kind)))
        }
    }
}

mote_guest::export_actor!(Reaper);
