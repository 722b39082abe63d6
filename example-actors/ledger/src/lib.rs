//! Ledger: a chain of persistent actors for the crash test, a source sending `Inc`s to a relay
//! that counts them and sends each count to a sink.
//!
//! Init: `<mode> ...`, one of
//! - `source <n> <target-path>`: after recovery, while fewer than `n` were sent, it sends
//!   itself `Next`; each `Next` (if still fewer than `n`) counts one more sent, saves a
//!   snapshot, sends `Inc` to the target and, if still fewer than `n`, `Next` to itself;
//! - `relay <target-path>`: each `Inc` adds one to `count` and `count` to `sum`, saves a
//!   snapshot and sends `Count(count)` to the target;
//! - `sink`: each `Count(n)` is journaled as an event, then taken if it is `count + 1`
//!   (`count = n`, `sum += n`), counted in `dups` if at most `count`, else counted in `gaps`
//!   and taken anyway. Every 64th event saves a snapshot and deletes the events it covers, so
//!   recovery is a snapshot and a replay;
//! - `tally`: a sink that does not rely on order (across nodes, a count lost with a node comes
//!   again after later ones): each `Count(n)` is journaled as an event, then taken if it was
//!   never seen (`count` is how many distinct counts it took, `sum` their sum), else counted in
//!   `dups`; it never snapshots, so recovery replays every event;
//! - `stasher <batch>`: a sink that stashes each `Count` until it holds `batch`, then takes
//!   them, in order, as `sink` does, before stashing again: one batch by unstashing them all
//!   (one per call), the next by taking them out of the stash in one call, and so on. `Flush`
//!   unstashes what it holds without waiting for a full batch;
//! - `witness <target-path> <at-least-once|at-most-once> [<linger-ms>]`: not persistent; sets
//!   that delivery mode in `start`, then passes each `Count(n)` on to the target (a sink, which
//!   records it durably and counts any it sees twice), and then, if asked, stays busy with it
//!   for `linger-ms` (a long handling, for a crash test to land in). Its own `count` is how
//!   many it saw in this instance.
//!
//! Every mode replies to `Query` with its `LedgerState` (a source's `count` is how many it
//! sent); other orders are ignored with a warning.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mote_example_protocol::{Ledger, LedgerState, init_arg, init_opt, init_words};
use mote_guest::{Actor, Context, Delivery, Result};

/// Events between two snapshots of the sink.
const SNAPSHOT_EVERY: u64 = 64;

/// What a ledger actor does with its orders.
enum Mode {
    /// Sends `n` increments to `target`.
    Source { n: u64, target: String },
    /// Counts increments and sends each count to `target`.
    Relay { target: String },
    /// Checks the counts it receives.
    Sink,
    /// Checks the counts it receives, in any order.
    Tally,
    /// Checks the counts it receives, `batch` at a time through the stash.
    Stasher { batch: u64 },
    /// Keeps nothing durable; passes counts on to `target`, then lingers over each.
    Witness { target: String, linger: Duration },
}

/// A ledger actor: its mode and its durable state (a snapshot in every mode).
struct Node {
    mode: Mode,
    state: LedgerState,
    /// A stasher's unstashed counts it has still to take.
    draining: u64,
    /// A stasher's full batches so far.
    batches: u64,
    /// A tally's counts taken.
    seen: BTreeSet<u64>,
}

/// Takes count `n` into a tally's state, whatever the order counts come in.
fn tally(state: &mut LedgerState, seen: &mut BTreeSet<u64>, n: u64) {
    if seen.insert(n) {
        state.count += 1;
        state.sum += n;
    } else {
        state.dups += 1;
    }
}

/// Takes count `n` into a sink's state: the rule shared by live counts and replayed events.
fn take(state: &mut LedgerState, n: u64) {
    if n <= state.count {
        state.dups += 1;
        return;
    }
    if n != state.count + 1 {
        state.gaps += 1;
    }
    state.count = n;
    state.sum += n;
}

impl Node {
    /// A sink's step: journals count `n`, takes it, and every so often snapshots.
    fn count(&mut self, ctx: &Context, n: u64) -> Result<()> {
        let seq = ctx.persist(&n)?;
        take(&mut self.state, n);
        if seq % SNAPSHOT_EVERY == 0 {
            let covered = ctx.save_snapshot(&self.state)?;
            ctx.delete_events(covered)?;
        }
        Ok(())
    }

    /// A source's step: sends one more `Inc` unless all `n` are sent.
    fn next(&mut self, ctx: &Context, n: u64, target: &str) -> Result<()> {
        if self.state.count >= n {
            return Ok(());
        }
        self.state.count += 1;
        ctx.save_snapshot(&self.state)?;
        ctx.tell_path(target, &Ledger::Inc)?;
        if self.state.count < n {
            ctx.tell(&ctx.myself(), &Ledger::Next)?;
        }
        Ok(())
    }
}

impl Actor for Node {
    type Msg = Ledger;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let mode = match init_arg::<String>(&words, 0, "mode")?.as_str() {
            "source" => Mode::Source {
                n: init_arg(&words, 1, "n")?,
                target: init_arg(&words, 2, "target-path")?,
            },
            "relay" => Mode::Relay {
                target: init_arg(&words, 1, "target-path")?,
            },
            "sink" => Mode::Sink,
            "tally" => Mode::Tally,
            "stasher" => Mode::Stasher {
                batch: init_arg(&words, 1, "batch")?,
            },
            "witness" => {
                let delivery = match init_arg::<String>(&words, 2, "delivery")?.as_str() {
                    "at-least-once" => Delivery::AtLeastOnce,
                    "at-most-once" => Delivery::AtMostOnce,
                    other => {
                        let why = format!("unknown delivery `{other}`");
                        return Err(mote_guest::Error::msg(why));
                    }
                };
                ctx.set_delivery(delivery);
                Mode::Witness {
                    target: init_arg(&words, 1, "target-path")?,
                    linger: Duration::from_millis(init_opt(&words, 3, "linger-ms")?.unwrap_or(0)),
                }
            }
            other => {
                let why = format!(
                    "unknown mode `{other}` (source, relay, sink, tally, stasher or witness)"
                );
                return Err(mote_guest::Error::msg(why));
            }
        };
        let mut seen = BTreeSet::new();
        let state = match mode {
            Mode::Tally => ctx
                .recover::<LedgerState, u64>()?
                .fold(LedgerState::default, |state, n| tally(state, &mut seen, n))?,
            Mode::Sink | Mode::Stasher { .. } => ctx
                .recover::<LedgerState, u64>()?
                .fold(LedgerState::default, take)?,
            Mode::Source { .. } | Mode::Relay { .. } => {
                ctx.recover_snapshot::<LedgerState>()?.unwrap_or_default()
            }
            Mode::Witness { .. } => LedgerState::default(),
        };
        ctx.debug(&format!("recovered {state:?}"));
        if let Mode::Source { n, .. } = mode
            && state.count < n
        {
            ctx.tell(&ctx.myself(), &Ledger::Next)?;
        }
        Ok(Self {
            mode,
            state,
            draining: 0,
            batches: 0,
            seen,
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Ledger) -> Result<()> {
        match (&self.mode, msg) {
            (_, Ledger::Query) if ctx.sender().is_some() => ctx.reply(&self.state)?,
            (_, Ledger::Query) => ctx.debug("ignoring a Query without a sender"),
            (Mode::Source { n, target }, Ledger::Next) => {
                let (n, target) = (*n, target.clone());
                self.next(ctx, n, &target)?;
            }
            (Mode::Relay { target }, Ledger::Inc) => {
                self.state.count += 1;
                self.state.sum += self.state.count;
                ctx.save_snapshot(&self.state)?;
                ctx.tell_path(target, &Ledger::Count(self.state.count))?;
            }
            (Mode::Sink, Ledger::Count(n)) => self.count(ctx, n)?,
            (Mode::Tally, Ledger::Count(n)) => {
                ctx.persist(&n)?;
                tally(&mut self.state, &mut self.seen, n);
            }
            (Mode::Witness { target, linger }, Ledger::Count(n)) => {
                self.state.count += 1;
                ctx.tell_path(target, &Ledger::Count(n))?;
                let until = Instant::now() + *linger;
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
            }
            (Mode::Stasher { batch }, Ledger::Count(n)) => {
                if self.draining > 0 {
                    self.draining -= 1;
                    self.count(ctx, n)?;
                } else if u64::from(ctx.stashed()) + 1 < *batch {
                    ctx.stash();
                } else {
                    self.batches += 1;
                    if self.batches % 2 == 1 {
                        ctx.stash();
                        self.draining = u64::from(ctx.stashed()) + 1;
                        ctx.unstash_all();
                    } else {
                        // Out of the stash in this call: older first, then this one.
                        while let Some(env) = ctx.take(None) {
                            match env.decode::<Ledger>()? {
                                Ledger::Count(m) => self.count(ctx, m)?,
                                other => ctx.warn(&format!("stashed {other:?}?")),
                            }
                        }
                        self.count(ctx, n)?;
                    }
                }
            }
            (Mode::Stasher { .. }, Ledger::Flush) if self.draining == 0 => {
                self.draining = u64::from(ctx.stashed());
                ctx.unstash_all();
            }
            (Mode::Stasher { .. }, Ledger::Flush) => {}
            (_, other) => ctx.warn(&format!("ignoring {other:?} in this mode")),
        }
        Ok(())
    }
}

mote_guest::export_actor!(Node);
