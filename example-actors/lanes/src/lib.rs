//! Lanes: a parent that deactivates and activates its worker and sends it urgent messages, for
//! the priority-lane and deactivate/activate tests.
//!
//! Init: `boss <R>` spawns a child `worker` (init `worker <R>`) and obeys `Lane::Pause`,
//! `Resume`, `Urgent(n)` and `PauseOther(path)`, reporting to `R`; `worker <R>` reports each
//! `Lane::Work(n)` as `work` = `n`.

use mote_example_protocol::{Lane, init_arg, init_words, report};
use mote_guest::{Actor, Address, Context, Error, Result};

/// A lanes actor: where it reports, and the boss's worker.
struct Lanes {
    report_to: String,
    worker: Option<Address>,
}

impl Actor for Lanes {
    type Msg = Lane;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let role: String = init_arg(&words, 0, "role")?;
        let report_to: String = init_arg(&words, 1, "report-path")?;
        let worker = match role.as_str() {
            "boss" => {
                Some(ctx.spawn("worker", "lanes", format!("worker {report_to}").as_bytes())?)
            }
            "worker" => None,
            other => {
                return Err(Error::msg(format!(
                    "unknown role `{other}` (boss or worker)"
                )));
            }
        };
        Ok(Self { report_to, worker })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Lane) -> Result<()> {
        let to = Some(self.report_to.as_str());
        let flag = |ok: bool| u64::from(ok);
        match (&self.worker, msg) {
            (None, Lane::Work(n)) => report(ctx, to, "work", u64::from(n)),
            (Some(worker), Lane::Pause) => report(ctx, to, "paused", flag(ctx.deactivate(worker))),
            (Some(worker), Lane::Resume) => report(ctx, to, "resumed", flag(ctx.activate(worker))),
            (Some(worker), Lane::Urgent(n)) => ctx.tell_urgent(worker, &Lane::Work(n)),
            (Some(_), Lane::PauseOther(path)) => {
                let paused = ctx.resolve(&path).is_some_and(|a| ctx.deactivate(&a));
                report(ctx, to, "paused", flag(paused))
            }
            (_, other) => {
                ctx.warn(&format!("ignoring {other:?} in this role"));
                Ok(())
            }
        }
    }
}

mote_guest::export_actor!(Lanes);
