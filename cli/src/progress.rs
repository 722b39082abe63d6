//! Progress bars for the host's long work (compiles, rolling upgrades, recoveries of large
//! journals), on stderr when it is a terminal. A running host draws its own; `mote deploy` and
//! `mote upgrade` draw what the host streams back over the control socket.

use std::collections::HashMap;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use mote_host::{ActorSystem, Progress};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;

/// One task's progress as the CLI, the control socket and the dashboard show it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct ProgressView {
    pub(crate) id: u64,
    /// What the work is, in words (`compiling py_orders@0 (18.3 MB)`).
    pub(crate) label: String,
    pub(crate) done: u64,
    pub(crate) total: Option<u64>,
    pub(crate) elapsed_ms: u64,
    /// Set once it ended: `ok`, or the error.
    pub(crate) outcome: Option<String>,
}

impl From<&Progress> for ProgressView {
    fn from(p: &Progress) -> Self {
        ProgressView {
            id: p.id,
            label: p.task.to_string(),
            done: p.done,
            total: p.total,
            elapsed_ms: u64::try_from(p.elapsed.as_millis()).unwrap_or(u64::MAX),
            outcome: p.outcome.as_ref().map(|o| match o {
                Ok(()) => "ok".to_owned(),
                Err(e) => e.clone(),
            }),
        }
    }
}

/// The bars on screen, by task.
pub(crate) struct Bars {
    multi: MultiProgress,
    bars: HashMap<u64, ProgressBar>,
}

impl Bars {
    /// Bars on stderr (drawn only if it is a terminal).
    pub(crate) fn stderr() -> Bars {
        Bars {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            bars: HashMap::new(),
        }
    }

    /// Draws one update.
    pub(crate) fn update(&mut self, view: &ProgressView) {
        let multi = &self.multi;
        let bar = self.bars.entry(view.id).or_insert_with(|| {
            let bar = match view.total {
                Some(total) => ProgressBar::new(total).with_style(
                    ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                ),
                None => {
                    let spinner = ProgressBar::new_spinner();
                    spinner.enable_steady_tick(Duration::from_millis(120));
                    spinner
                }
            };
            bar.set_message(view.label.clone());
            multi.add(bar)
        });
        bar.set_position(view.done);
        if let Some(outcome) = &view.outcome {
            let took = Duration::from_millis(view.elapsed_ms);
            let bar = self
                .bars
                .remove(&view.id)
                .unwrap_or_else(ProgressBar::hidden);
            bar.finish_with_message(format!("{}: {outcome} in {took:.1?}", view.label));
        }
    }
}

/// Draws `system`'s long work until the task is dropped.
pub(crate) fn show(system: &ActorSystem) -> tokio::task::JoinHandle<()> {
    let mut rx = system.subscribe_progress();
    tokio::spawn(async move {
        let mut bars = Bars::stderr();
        loop {
            match rx.recv().await {
                Ok(progress) => bars.update(&ProgressView::from(&progress)),
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            }
        }
    })
}
