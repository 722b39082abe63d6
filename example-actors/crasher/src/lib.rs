//! Crasher: misbehaves on demand, to test how the host contains a failing actor.
//!
//! Init: `[fail-start] [R]`. With `fail-start` its `start` fails with "start refused";
//! otherwise `R` (if given) receives a `stopped` report when it stops. Each `Crash` message
//! picks a failure: a panic, an `unreachable` trap, an error, an endless loop, a memory bomb
//! or a stack overflow; `Echo(n)` replies `Echo(n)` to show it is still alive.

use std::hint::black_box;

use mote_example_protocol::{Crash, init_words, report};
use mote_guest::{Actor, Context, Error, Result, StopReason};

/// Bytes in a MiB.
const MIB: usize = 1 << 20;

/// Bytes apart of the writes that make allocated memory resident (a wasm page).
const PAGE: usize = 64 * 1024;

/// The crasher's state: where to report and the memory it hoards.
struct Crasher {
    report_to: Option<String>,
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

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        if words.first() == Some(&"fail-start") {
            return Err(Error::msg("start refused"));
        }
        Ok(Self {
            report_to: words.first().map(|w| w.to_string()),
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
            Crash::Recurse(depth) => {
                black_box(recurse(depth));
                Ok(())
            }
        }
    }

    fn stopping(&mut self, ctx: &mut Context, _reason: StopReason) {
        if let Err(e) = report(ctx, self.report_to.as_deref(), "stopped", 0) {
            ctx.warn(&format!("cannot report stopping: {e}"));
        }
    }
}

mote_guest::export_actor!(Crasher);
