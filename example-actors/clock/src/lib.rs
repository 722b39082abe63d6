//! Clock: reads the `clock` interface. `Clock::Read` replies a `ClockReading` (its age, the CPU
//! time its calls used, whether this instance is a restarted one); `Clock::Burn(rounds)` does
//! that much busy work first; `Clock::ReadAfter(ms)` replies after idling that long (a timer
//! wakes it); `Clock::Crash` panics, so its supervisor restarts it.

use core::time::Duration;

use mote_example_protocol::{Clock, ClockReading};
use mote_guest::{Actor, Address, Context, Result};

/// Whether this instance replaced a failed one, and who waits for a `ReadAfter`.
struct Reader {
    restarted: bool,
    waiting: Option<Address>,
}

impl Reader {
    fn reading(&self, ctx: &Context, work: u64) -> ClockReading {
        // Read the CPU time first: its value is at most the age read right after it.
        let cpu = ctx.cpu_time();
        let age = ctx.since_start();
        ClockReading {
            since_start_ns: u64::try_from(age.as_nanos()).unwrap_or(u64::MAX),
            cpu_ns: u64::try_from(cpu.as_nanos()).unwrap_or(u64::MAX),
            restarted: self.restarted,
            work,
        }
    }
}

/// Busy work: a xorshift over `rounds` steps.
fn burn(rounds: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

impl Actor for Reader {
    type Msg = Clock;

    fn start(ctx: &mut Context, _init: &[u8]) -> Result<Self> {
        Ok(Reader {
            restarted: ctx.restart_cause().is_some(),
            waiting: None,
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Clock) -> Result<()> {
        match msg {
            Clock::Read => ctx.reply(&self.reading(ctx, 0))?,
            Clock::Burn(rounds) => {
                let work = burn(rounds);
                ctx.reply(&self.reading(ctx, work))?;
            }
            Clock::ReadAfter(ms) => {
                self.waiting = ctx.sender().cloned();
                ctx.schedule_self(&Clock::Due, Duration::from_millis(ms), None)?;
            }
            Clock::Due => {
                if let Some(to) = self.waiting.take() {
                    ctx.tell(&to, &self.reading(ctx, 0))?;
                }
            }
            Clock::Crash => panic!("asked to crash"),
        }
        Ok(())
    }
}

mote_guest::export_actor!(Reader);
