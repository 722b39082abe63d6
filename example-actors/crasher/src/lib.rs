//! Crasher: misbehaves on demand, to test how the host contains a failing actor.
//!
//! Init: `[fail-start] [group:<name>]... [R]`, in any order: `R` is the first word that is
//! neither `fail-start` nor `group:<name>`. With `fail-start` its `start` fails with "start
//! refused"; otherwise it joins each group `<name>` and `R` (if given) receives a `stopped`
//! report when it stops (value: 0 normal, 1 failure, 2 parent failure, 3 shutdown). A restarted
//! instance logs its restart cause and reports `restarted` (value 0) to `R` in `start`, before
//! a `fail-start` failure, and joins its groups again. Each `Crash` message
//! picks a failure: a panic, an `unreachable` trap, an error, an endless loop, a memory bomb
//! or a stack overflow; `Echo(n)` replies `Echo(n)` to show it is still alive and `Bump` adds
//! one to a count kept in its state and replies `Echo(count)`, showing whether state survived.
//! `ReplyThenTell`, `ReplyThenPanic` and `ReplyThenFail` reply first, then tell, panic or fail.

use std::hint::black_box;

use mote_example_protocol::{Crash, init_words, report};
use mote_guest::{Actor, Context, Error, Result, StopReason};

/// Bytes in a MiB.
const MIB: usize = 1 << 20;

/// Bytes apart of the writes that make allocated memory resident (a wasm page).
const PAGE: usize = 64 * 1024;

/// The crasher's state: where to report, its `Bump` count and the memory it hoards.
struct Crasher {
    report_to: Option<String>,
    count: u64,
    hoard: Vec<Vec<u8>>,
}

/// Recurses `depth` times with a 4 KiB frame that the optimiser must keep.
#[inline(never)]
fn recurse(depth: u32) -> u64 {
    let mut frame = [0u8; 4096];
    frame[depth as usize % frame.len()] = depth as u8;
    let frame = black_box(frame);
    if depth == 0 {
        return u64::from(frame[0]);
    }
    recurse(depth - 1) + u64::from(frame[(depth as usize * 7) % frame.len()])
}

impl Actor for Crasher {
    type Msg = Crash;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let fail_start = words.contains(&"fail-start");
        let groups: Vec<&str> = words
            .iter()
            .filter_map(|w| w.strip_prefix("group:"))
            .collect();
        let report_to = words
            .iter()
            .find(|w| **w != "fail-start" && !w.starts_with("group:"))
            .map(|w| w.to_string());
        if groups.contains(&"") {
            return Err(Error::msg("init word `group:` names no group"));
        }
        if let Some(cause) = ctx.restart_cause() {
            ctx.info(&format!("crasher restarted after: {cause}"));
            if let Err(e) = report(ctx, report_to.as_deref(), "restarted", 0) {
                ctx.warn(&format!("cannot report the restart: {e}"));
            }
        }
        if fail_start {
            return Err(Error::msg("start refused"));
        }
        for group in groups {
            ctx.join(group)?;
        }
        Ok(Self {
            report_to,
            count: 0,
            hoard: Vec::new(),
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Crash) -> Result<()> {
        match msg {
            Crash::Panic => panic!("crasher asked to panic"),
            Crash::Unreachable => {
                #[cfg(target_arch = "wasm32")]
                core::arch::wasm32::unreachable();
                #[cfg(not(target_arch = "wasm32"))]
                panic!("crasher asked to hit unreachable");
            }
            Crash::Fail(why) => Err(Error::msg(why)),
            Crash::Echo(n) => ctx.reply(&Crash::Echo(n)),
            Crash::Spin => {
                let mut spins = 0u64;
                loop {
                    spins = black_box(spins.wrapping_add(1));
                }
            }
            Crash::Alloc(mib) => {
                let size = (mib as usize).checked_mul(MIB).ok_or_else(|| {
                    Error::msg(format!("{mib} MiB does not fit the address space"))
                })?;
                let mut block = vec![0u8; size];
                for byte in block.iter_mut().step_by(PAGE) {
                    *byte = 1;
                }
                self.hoard.push(black_box(block));
                ctx.debug(&format!("holding {mib} more MiB"));
                Ok(())
            }
            Crash::Fill(mib) => {
                let size = (mib as usize).checked_mul(MIB).ok_or_else(|| {
                    Error::msg(format!("{mib} MiB does not fit the address space"))
                })?;
                // xorshift64: cheap, and nothing zstd finds to squeeze.
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(mib);
                let block: Vec<u8> = (0..size)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                self.hoard.push(black_box(block));
                ctx.debug(&format!("holding {mib} more MiB of dense state"));
                Ok(())
            }
            Crash::Recurse(depth) => {
                black_box(recurse(depth));
                Ok(())
            }
            Crash::Bump => {
                self.count += 1;
                ctx.reply(&Crash::Echo(self.count as u32))
            }
            Crash::ReplyThenTell(n) => {
                ctx.reply(&Crash::Echo(n))?;
                let sender = ctx
                    .sender()
                    .cloned()
                    .ok_or_else(|| Error::msg("no sender"))?;
                ctx.tell(&sender, &Crash::Echo(n + 1))
            }
            Crash::ReplyThenPanic(n) => {
                ctx.reply(&Crash::Echo(n))?;
                panic!("crasher asked to panic after its reply")
            }
            Crash::ReplyThenFail(n) => {
                ctx.reply(&Crash::Echo(n))?;
                Err(Error::msg("crasher asked to fail after its reply"))
            }
        }
    }

    fn stopping(&mut self, ctx: &mut Context, reason: StopReason) {
        // The reason as a number: 0 normal, 1 failure, 2 parent failure, 3 shutdown.
        let code = match reason {
            StopReason::Normal => 0,
            StopReason::Failure(_) => 1,
            StopReason::ParentFailure(_) => 2,
            StopReason::Shutdown => 3,
        };
        if let Err(e) = report(ctx, self.report_to.as_deref(), "stopped", code) {
            ctx.warn(&format!("cannot report stopping: {e}"));
        }
    }
}

mote_guest::export_actor!(Crasher);
