//! Hot swap: replacing the behaviour of running actors with another version of their module,
//! keeping their address, mailbox, children, watchers, timers and state.
//!
//! One actor (in its cell, between two messages: the request travels on the system lane):
//!
//! ```text
//! old.save-state() ──> new instance ──> new.migrate(old version, state)   (both export `upgrade`)
//!                                  └──> new.start(init)                   (otherwise: restart-style)
//! success: the new instance serves the queued messages, in order
//! failure (trap, error, refused state): the new instance is dropped, the old one keeps serving
//! ```
//!
//! A whole module is upgraded rolling: at most `concurrency` actors at a time, progress reported
//! as each finishes. When every actor of the module made it, the version becomes the module's
//! current one (new spawns get it); rolling back is upgrading to the previous version.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot};

use super::modules::Module;
use crate::actor::mailbox::{ActorRef, SystemMsg, UpgradeOutcome as Outcome, UpgradeRequest};
use crate::error::ModuleError;
use crate::progress::Tracker;

/// How an upgrade runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpgradeOptions {
    /// At most this many actors are being upgraded at once (default 16).
    pub concurrency: usize,
    /// How long one actor may take to finish its current message and swap (default 30 s).
    pub timeout: Duration,
}

impl Default for UpgradeOptions {
    fn default() -> Self {
        UpgradeOptions {
            concurrency: 16,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Progress of a rolling upgrade, sent as each actor finishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpgradeProgress {
    /// Actors finished (upgraded, unchanged or failed).
    pub done: usize,
    /// Actors in this upgrade.
    pub total: usize,
    /// Of those finished, how many failed (and kept their old version).
    pub failed: usize,
}

/// One actor that now runs the new version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upgraded {
    /// Its path.
    pub path: String,
    /// True if its state was carried by `save-state`/`migrate`; false if it restarted.
    pub migrated: bool,
    /// How long it handled no message: from taking the request to serving again.
    pub pause: Duration,
}

/// What an upgrade did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpgradeReport {
    /// The module.
    pub module: String,
    /// The version upgraded to.
    pub version: String,
    /// Actors now on that version.
    pub upgraded: Vec<Upgraded>,
    /// Actors that already ran it.
    pub unchanged: usize,
    /// Actors that kept their old version, with why.
    pub failed: Vec<(String, String)>,
    /// Whether the version became the module's current one (a whole-module upgrade that
    /// fully succeeded).
    pub current: bool,
}

/// Why an upgrade could not start.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The module or version is not deployed.
    #[error(transparent)]
    Module(#[from] ModuleError),
    /// No live actor at that path, or it is a probe.
    #[error("no actor lives at {0}")]
    NoActor(String),
}

/// Upgrades `actors` to `module`, at most `options.concurrency` at a time.
pub(crate) async fn upgrade_actors(
    module: Arc<Module>,
    actors: Vec<ActorRef>,
    options: UpgradeOptions,
    progress: Option<mpsc::UnboundedSender<UpgradeProgress>>,
    mut tracker: Tracker,
) -> UpgradeReport {
    let total = actors.len();
    let gate = Arc::new(Semaphore::new(options.concurrency.max(1)));
    let mut running = tokio::task::JoinSet::new();
    for actor in actors {
        let gate = gate.clone();
        let module = module.clone();
        running.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let path = actor.address.path.to_string();
            (path, upgrade_one(&actor, module, options.timeout).await)
        });
    }
    let mut report = UpgradeReport {
        module: module.name.to_string(),
        version: module.version.to_string(),
        ..UpgradeReport::default()
    };
    let mut done = 0;
    while let Some(joined) = running.join_next().await {
        let (path, outcome) = match joined {
            Ok(result) => result,
            Err(e) => (
                String::new(),
                Outcome::Failed(format!("upgrade task failed: {e}")),
            ),
        };
        match outcome {
            Outcome::Upgraded { migrated, pause } => report.upgraded.push(Upgraded {
                path,
                migrated,
                pause,
            }),
            Outcome::Unchanged => report.unchanged += 1,
            Outcome::Failed(why) => {
                tracing::warn!(actor = %path, error = %why, "upgrade failed; the old version keeps running");
                report.failed.push((path, why));
            }
        }
        done += 1;
        let step = UpgradeProgress {
            done,
            total,
            failed: report.failed.len(),
        };
        if let Some(tx) = &progress {
            let _ = tx.send(step);
        }
        tracker.advance(u64::try_from(done).unwrap_or(u64::MAX));
        if total >= 10 && done % (total / 10) == 0 {
            tracing::info!(module = %module.name, version = %module.version, done, total, failed = step.failed, "upgrading");
        }
    }
    report.upgraded.sort_by(|a, b| a.path.cmp(&b.path));
    report.failed.sort();
    tracker.finish(match report.failed.len() {
        0 => Ok(()),
        n => Err(format!("{n} of {total} actors kept their old version")),
    });
    report
}

/// Sends the request to one actor's cell and waits for its answer.
async fn upgrade_one(actor: &ActorRef, module: Arc<Module>, timeout: Duration) -> Outcome {
    let (reply, answer) = oneshot::channel();
    let request = UpgradeRequest {
        name: module.name.clone(),
        version: module.version.clone(),
        hash: module.hash.clone(),
        reply,
    };
    if !actor.signal(SystemMsg::Upgrade(request)) {
        return Outcome::Failed("the actor has stopped".into());
    }
    match tokio::time::timeout(timeout, answer).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_)) => Outcome::Failed("the actor stopped before it could be upgraded".into()),
        Err(_) => Outcome::Failed(format!("no answer within {timeout:?}")),
    }
}
