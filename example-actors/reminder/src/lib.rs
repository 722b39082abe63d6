//! Reminder: sets durable reminders on demand, for tests of timers that survive host restarts.
//!
//! Init: `<R>`; as an entity, its id, with `~` standing for `/` (an id has no `/`): the entity
//! `/user/alarms/~system~nodes~t~system~fired` reports to `/system/nodes/t/system/fired`. It
//! calls `recover` in `start` (reminders need a persistent actor) and keeps no
//! state of its own: the host keeps the reminders.
//! - `Arm { tag, delay_ms }` sets a reminder that sends `Fired(tag)` to itself once, after
//!   `delay_ms`, and reports `armed` = the reminder's id to `R`;
//! - `ArmPeriodic { tag, period_ms }` sets one that sends `Fired(tag)` every `period_ms`, the
//!   first after one period, and reports `armed` = its id to `R`;
//! - `Cancel(id)` cancels the reminder `id` and reports `cancelled` = 1 to `R` if the host
//!   cancelled it, 0 if it had already fired (one-shot) or is unknown;
//! - `Fired(tag)` reports `fired` = `tag` to `R`.

use std::time::Duration;

use mote_example_protocol::{Remind, init_arg, init_words, report};
use mote_guest::{Actor, Context, Result};

/// Where to report.
struct Reminder {
    report_to: String,
}

impl Actor for Reminder {
    type Msg = Remind;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let report_to: String = init_arg(&init_words(init), 0, "report-path")?;
        let report_to = report_to.replace('~', "/");
        ctx.recover_snapshot::<()>()?;
        Ok(Self { report_to })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Remind) -> Result<()> {
        let to = Some(self.report_to.as_str());
        match msg {
            Remind::Arm { tag, delay_ms } => {
                let delay = Duration::from_millis(delay_ms);
                let id = ctx.remind(&Remind::Fired(tag), delay, None)?;
                report(ctx, to, "armed", id)
            }
            Remind::ArmPeriodic { tag, period_ms } => {
                let period = Duration::from_millis(period_ms);
                let id = ctx.remind(&Remind::Fired(tag), period, Some(period))?;
                report(ctx, to, "armed", id)
            }
            Remind::Cancel(id) => {
                let cancelled = ctx.cancel_reminder(id);
                report(ctx, to, "cancelled", u64::from(cancelled))
            }
            Remind::Fired(tag) => report(ctx, to, "fired", tag),
        }
    }
}

mote_guest::export_actor!(Reminder);
