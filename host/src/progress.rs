//! Long work the host reports as it goes: compiling a module (seconds for a Python or JS
//! component), a rolling upgrade, and the recovery of a large journal. The CLI draws it as
//! progress bars and the dashboard lists it; anyone may subscribe.
//!
//! Invariants:
//! - Every task that begins ends exactly once, with its outcome, even if the work stops early
//!   (dropping a [`Tracker`] ends it as failed unless it was finished).
//! - `done` never goes down and never passes `total` when there is one.
//! - Reporting never blocks the work: updates go to a broadcast channel (a slow subscriber
//!   loses updates, not the work) and into the table of running tasks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::broadcast;

/// What a long piece of work is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Task {
    /// Compiling a module version to machine code (not a load from the compiled cache).
    Compile {
        /// The module.
        module: String,
        /// Its version.
        version: String,
        /// Size of the component.
        bytes: u64,
    },
    /// Moving actors of a module to another version, one after another.
    Upgrade {
        /// The module.
        module: String,
        /// The version upgraded to.
        version: String,
    },
    /// The canaries of an upgrade being watched before the rest follow (units: seconds).
    Canary {
        /// The module.
        module: String,
        /// The version the canaries run.
        version: String,
        /// How many canaries.
        actors: usize,
    },
    /// An actor replaying its journal after a (re)start.
    Recovery {
        /// The journal.
        persistence_id: String,
        /// The actor recovering it.
        actor: String,
    },
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Task::Compile {
                module,
                version,
                bytes,
            } => write!(
                f,
                "compiling {module}@{version} ({:.1} MB)",
                *bytes as f64 / 1e6
            ),
            Task::Upgrade { module, version } => write!(f, "upgrading {module} to {version}"),
            Task::Canary {
                module,
                version,
                actors,
            } => write!(
                f,
                "watching {actors} canary actor(s) of {module}@{version} (seconds)"
            ),
            Task::Recovery {
                persistence_id,
                actor,
            } => write!(f, "{actor} recovering {persistence_id}"),
        }
    }
}

/// Where a task stands.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// Names the task among those of this host run.
    pub id: u64,
    /// What it is.
    pub task: Task,
    /// Units done (actors upgraded, events replayed; 0 for a compile until it ends).
    pub done: u64,
    /// Units in all, if known.
    pub total: Option<u64>,
    /// Time since it began.
    pub elapsed: Duration,
    /// `None` while it runs; then `Ok` or the error it ended with.
    pub outcome: Option<Result<(), String>>,
}

/// The host's long tasks: running ones, and a stream of their updates.
pub(crate) struct Reports {
    tx: broadcast::Sender<Progress>,
    next: AtomicU64,
    running: Mutex<BTreeMap<u64, Progress>>,
}

impl Default for Reports {
    fn default() -> Self {
        Reports {
            tx: broadcast::channel(256).0,
            next: AtomicU64::new(1),
            running: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Reports {
    /// Begins a task of `total` units (if known).
    pub(crate) fn begin(self: &Arc<Self>, task: Task, total: Option<u64>) -> Tracker {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let tracker = Tracker {
            reports: self.clone(),
            id,
            task,
            total,
            done: 0,
            began: Instant::now(),
            ended: false,
        };
        tracker.publish(None);
        tracker
    }

    /// The tasks running now.
    pub(crate) fn running(&self) -> Vec<Progress> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.values().cloned().collect()
    }

    /// Updates from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Progress> {
        self.tx.subscribe()
    }
}

/// One running task; dropping it unfinished ends it as failed.
pub(crate) struct Tracker {
    reports: Arc<Reports>,
    id: u64,
    task: Task,
    total: Option<u64>,
    done: u64,
    began: Instant,
    ended: bool,
}

impl Tracker {
    /// `done` units are done now (never less than before, never more than the total).
    pub(crate) fn advance(&mut self, done: u64) {
        let done = self.total.map_or(done, |t| done.min(t));
        if done > self.done {
            self.done = done;
            self.publish(None);
        }
    }

    /// The task has ended with `outcome`.
    pub(crate) fn finish(mut self, outcome: Result<(), String>) {
        if outcome.is_ok()
            && let Some(total) = self.total
        {
            self.done = total;
        }
        self.end(outcome);
    }

    fn end(&mut self, outcome: Result<(), String>) {
        self.ended = true;
        self.publish(Some(outcome));
    }

    fn publish(&self, outcome: Option<Result<(), String>>) {
        let progress = Progress {
            id: self.id,
            task: self.task.clone(),
            done: self.done,
            total: self.total,
            elapsed: self.began.elapsed(),
            outcome,
        };
        {
            let mut running = self
                .reports
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match progress.outcome {
                None => running.insert(self.id, progress.clone()),
                Some(_) => running.remove(&self.id),
            };
        }
        let _ = self.reports.tx.send(progress);
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        if !self.ended {
            self.end(Err("stopped before it finished".to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile() -> Task {
        Task::Compile {
            module: "m".into(),
            version: "1".into(),
            bytes: 1,
        }
    }

    #[test]
    fn a_task_runs_advances_and_ends_once() {
        let reports = Arc::new(Reports::default());
        let mut rx = reports.subscribe();
        let mut tracker = reports.begin(compile(), Some(10));
        assert_eq!(reports.running().len(), 1);
        tracker.advance(4);
        tracker.advance(3);
        tracker.advance(40);
        tracker.finish(Ok(()));
        assert!(reports.running().is_empty());
        let seen: Vec<(u64, bool)> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|p| (p.done, p.outcome.is_some()))
            .collect();
        assert_eq!(
            seen,
            [(0, false), (4, false), (10, false), (10, true)],
            "never backwards, never past the total, ended once"
        );
    }

    #[test]
    fn a_dropped_task_ends_as_failed() {
        let reports = Arc::new(Reports::default());
        let mut rx = reports.subscribe();
        drop(reports.begin(compile(), None));
        let last = std::iter::from_fn(|| rx.try_recv().ok()).last().unwrap();
        assert!(matches!(last.outcome, Some(Err(_))));
        assert!(reports.running().is_empty());
    }
}
