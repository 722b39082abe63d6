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
//! current one (new spawns get it); rolling back is upgrading to the previous version. With a
//! [`Canary`], a few actors go first and are watched before the rest follow (see `canary`).
//! In a cluster, each node runs this for its own actors and one node merges the reports
//! (`cluster::upgrades`).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot};

use super::canary::{self, Canary, CanaryFigures, CanaryOutcome, CanaryVerdict, RollbackReason};
use super::modules::{Module, Modules};
use crate::actor::mailbox::{ActorRef, SystemMsg, UpgradeOutcome as Outcome, UpgradeRequest};
use crate::error::{BoxError, ModuleError};
use crate::kernel::Kernel;
use crate::progress::{Reports, Task, Tracker};

/// How an upgrade runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UpgradeOptions {
    /// At most this many actors are being upgraded at once (default 16).
    pub concurrency: usize,
    /// How long one actor may take to finish its current message and swap (default 30 s).
    pub timeout: Duration,
    /// Upgrade a few actors first and watch them before the rest (default none; a whole
    /// module only).
    pub canary: Option<Canary>,
}

impl Default for UpgradeOptions {
    fn default() -> Self {
        UpgradeOptions {
            concurrency: 16,
            timeout: Duration::from_secs(30),
            canary: None,
        }
    }
}

/// Progress of a rolling upgrade, sent as each actor finishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UpgradeProgress {
    /// Actors finished (upgraded, unchanged or failed).
    pub done: usize,
    /// Actors in this upgrade.
    pub total: usize,
    /// Of those finished, how many failed (and kept their old version).
    pub failed: usize,
}

/// One actor that now runs the new version.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Upgraded {
    /// Its path.
    pub path: String,
    /// True if its state was carried by `save-state`/`migrate`; false if it restarted.
    pub migrated: bool,
    /// How long it handled no message: from taking the request to serving again.
    pub pause: Duration,
}

/// What an upgrade did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UpgradeReport {
    /// The module.
    pub module: String,
    /// The version upgraded to.
    pub version: String,
    /// Actors now on that version (canaries that were rolled back are not).
    pub upgraded: Vec<Upgraded>,
    /// Actors that already ran it.
    pub unchanged: usize,
    /// Actors that kept their old version, with why.
    pub failed: Vec<(String, String)>,
    /// Whether the version became the module's current one (a whole-module upgrade that
    /// fully succeeded, and whose canary, if any, passed; in a cluster, on every node).
    pub current: bool,
    /// What the canary stage found and did, if the upgrade had one.
    pub canary: Option<CanaryVerdict>,
    /// In a cluster, each live node's part, by node name; empty on a host of its own.
    #[serde(default)]
    pub nodes: Vec<NodeUpgrade>,
}

/// One node's part in an upgrade rolled across a cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeUpgrade {
    /// The node's name.
    pub node: String,
    /// The paths of its actors that the report names (upgraded, failed or canaries).
    pub actors: Vec<String>,
    /// Its actors that already ran the version.
    pub unchanged: usize,
    /// Why it did not do its part, or not all of it; `None` if it answered with its report.
    pub error: Option<NodeUpgradeError>,
}

/// Why a node of a cluster did not do its part of an upgrade.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum NodeUpgradeError {
    /// It said nothing about the request for this long (not even that it was working on it).
    #[error("node {node} did not answer within {silence:?}")]
    Silent {
        /// The node.
        node: String,
        /// How long it was silent.
        silence: Duration,
    },
    /// It left the cluster, or was found down, before it answered.
    #[error("node {0} left the cluster before it answered")]
    Left(String),
    /// Its upgrade could not start there (the module could not be fetched or checked, say).
    #[error("node {node} refused: {reason}")]
    Refused {
        /// The node.
        node: String,
        /// Why, with its causes.
        reason: String,
    },
    /// It was not asked: the canary stage on `canary_node` rolled back or failed first.
    #[error("node {node} was not asked: the canary stage on node {canary_node} did not pass")]
    NotAsked {
        /// The node.
        node: String,
        /// The node that ran the canary stage.
        canary_node: String,
    },
}

impl UpgradeReport {
    /// Whether every actor it tried made it and its canary, if any, passed: a whole-module
    /// upgrade like that makes its version current.
    pub(crate) fn fully_done(&self) -> bool {
        self.failed.is_empty() && self.canary.as_ref().is_none_or(CanaryVerdict::passed)
    }

    /// Actors moved from one version to another: each upgraded one, and a rolled-back canary
    /// twice (there and back).
    pub(crate) fn moves(&self) -> usize {
        let back = self.canary.as_ref().map_or(0, |c| c.rolled_back.len());
        self.upgraded.len() + 2 * back
    }
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
    /// A canary was asked for an upgrade of one actor: there is nothing to compare it with.
    #[error(
        "a canary needs a module name, not the path {0}: it compares a module's upgraded actors with those still on the old version"
    )]
    CanaryOfOneActor(String),
    /// A canary of no actors was asked for.
    #[error("a canary needs at least one actor")]
    EmptyCanary,
    /// In a cluster: the version could not be stored for the other nodes to fetch.
    #[error("{module}@{version} could not be shared with the cluster")]
    Share {
        /// The module.
        module: String,
        /// The version.
        version: String,
        /// Why.
        #[source]
        source: BoxError,
    },
}

/// Actors moved by upgrades on this host, and those that kept their version, for the metrics.
#[derive(Debug, Default)]
pub(crate) struct Upgrades {
    /// Actors moved to another version.
    pub(crate) done: AtomicU64,
    /// Actors that kept their version because the new one failed to take over.
    pub(crate) failed: AtomicU64,
}

/// Whether a whole-module upgrade that fully succeeds makes its version the current one here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetCurrent {
    /// Yes: a host of its own decides alone.
    Here,
    /// No: in a cluster, the node that rolls the upgrade decides once every node is done.
    Later,
}

/// What an upgrade on this host works with: its actors, its registry and its counts.
pub(crate) struct Upgrader<'a> {
    /// The kernel, whose registry has the actors.
    pub(crate) kernel: &'a Kernel,
    /// The module registry.
    pub(crate) modules: &'a Modules,
    /// Where the moves are counted.
    pub(crate) counts: &'a Upgrades,
}

impl Upgrader<'_> {
    /// Upgrades the actor at `target` (a path), or every actor of the module `target` (a
    /// name), on this host, to `version`; see `ActorSystem::upgrade_with`.
    pub(crate) async fn upgrade(
        &self,
        target: &str,
        version: &str,
        options: UpgradeOptions,
        progress: Option<mpsc::UnboundedSender<UpgradeProgress>>,
        set_current: SetCurrent,
    ) -> Result<UpgradeReport, UpgradeError> {
        let Upgrader {
            kernel,
            modules,
            counts,
        } = *self;
        let (name, actors, whole) = if target.starts_with('/') {
            if options.canary.is_some() {
                return Err(UpgradeError::CanaryOfOneActor(target.to_owned()));
            }
            let actor = kernel
                .registry
                .get(target)
                .filter(|a| a.module.is_some() && a.system.is_some())
                .ok_or_else(|| UpgradeError::NoActor(target.to_owned()))?;
            let name = actor.module.as_deref().unwrap_or_default().to_owned();
            (name, vec![actor], false)
        } else {
            (target.to_owned(), actors_of(kernel, target), true)
        };
        if options.canary.is_some_and(|c| c.actors == 0) {
            return Err(UpgradeError::EmptyCanary);
        }
        let module = modules
            .get_version(&name, version)
            .ok_or_else(|| ModuleError::Unknown {
                name: name.clone(),
                version: Some(version.to_owned()),
            })?;
        tracing::info!(module = %name, version, actors = actors.len(), "upgrade started");
        let task = Task::Upgrade {
            module: name.clone(),
            version: version.to_owned(),
        };
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        let tracker = kernel.reports.begin(task, Some(count(actors.len())));
        let mut rollout = Rollout::new(module, actors.len(), options, progress, Some(tracker));
        match options.canary {
            Some(rule) => with_canary(&mut rollout, rule, actors, modules, &kernel.reports).await,
            None => rollout.upgrade(actors).await,
        }
        let mut report = rollout.finish();
        (counts.done).fetch_add(count(report.moves()), Ordering::Relaxed);
        (counts.failed).fetch_add(count(report.failed.len()), Ordering::Relaxed);
        if whole && set_current == SetCurrent::Here && report.fully_done() {
            modules.set_current(&name, version)?;
            report.current = true;
        }
        tracing::info!(
            module = %name,
            version,
            upgraded = report.upgraded.len(),
            unchanged = report.unchanged,
            failed = report.failed.len(),
            canary_passed = report.canary.as_ref().map(CanaryVerdict::passed),
            "upgrade finished"
        );
        Ok(report)
    }
}

/// How many live actors of this host run this version of this module.
pub(crate) fn running(kernel: &Kernel, name: &str, version: &str) -> usize {
    (kernel.registry.snapshot().iter())
        .filter(|a| {
            a.module.as_deref() == Some(name) && a.running_version().as_deref() == Some(version)
        })
        .count()
}

/// The live actors of the module `name` on this host (not probes).
pub(crate) fn actors_of(kernel: &Kernel, name: &str) -> Vec<ActorRef> {
    (kernel.registry.snapshot().into_iter())
        .filter(|a| a.module.as_deref() == Some(name) && a.system.is_some())
        .collect()
}

/// Where a rolling upgrade stands across its stages (canaries, the rest): what it did so far,
/// and how many actors finished, for the progress channel, the host's report and the log.
pub(crate) struct Rollout {
    module: Arc<Module>,
    options: UpgradeOptions,
    /// What was done so far.
    pub(crate) report: UpgradeReport,
    total: usize,
    done: usize,
    progress: Option<mpsc::UnboundedSender<UpgradeProgress>>,
    tracker: Option<Tracker>,
}

impl Rollout {
    /// A rollout of `total` actors to `module`, reported on `progress` and `tracker`.
    pub(crate) fn new(
        module: Arc<Module>,
        total: usize,
        options: UpgradeOptions,
        progress: Option<mpsc::UnboundedSender<UpgradeProgress>>,
        tracker: Option<Tracker>,
    ) -> Rollout {
        let report = UpgradeReport {
            module: module.name.to_string(),
            version: module.version.to_string(),
            ..UpgradeReport::default()
        };
        Rollout {
            module,
            options,
            report,
            total,
            done: 0,
            progress,
            tracker,
        }
    }

    /// The module version actors are moved to.
    pub(crate) fn module(&self) -> &Arc<Module> {
        &self.module
    }

    /// The options it runs with.
    pub(crate) fn options(&self) -> UpgradeOptions {
        self.options
    }

    /// Upgrades `actors`, at most `concurrency` at a time, adding their outcomes to the report.
    pub(crate) async fn upgrade(&mut self, actors: Vec<ActorRef>) {
        let gate = Arc::new(Semaphore::new(self.options.concurrency.max(1)));
        let timeout = self.options.timeout;
        let mut running = tokio::task::JoinSet::new();
        for actor in actors {
            let gate = gate.clone();
            let module = self.module.clone();
            running.spawn(async move {
                let _permit = gate.acquire_owned().await;
                let path = actor.address.path.to_string();
                (path, upgrade_one(&actor, module, timeout).await)
            });
        }
        while let Some(joined) = running.join_next().await {
            let (path, outcome) = match joined {
                Ok(result) => result,
                Err(e) => (
                    String::new(),
                    Outcome::Failed(format!("upgrade task failed: {e}")),
                ),
            };
            self.record(path, outcome);
        }
    }

    fn record(&mut self, path: String, outcome: Outcome) {
        let report = &mut self.report;
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
        self.done += 1;
        let (done, total) = (self.done, self.total);
        let step = UpgradeProgress {
            done,
            total,
            failed: report.failed.len(),
        };
        if let Some(tx) = &self.progress {
            let _ = tx.send(step);
        }
        if let Some(tracker) = &mut self.tracker {
            tracker.advance(u64::try_from(done).unwrap_or(u64::MAX));
        }
        if total >= 10 && done % (total / 10) == 0 {
            let module = &self.module;
            tracing::info!(module = %module.name, version = %module.version, done, total, failed = step.failed, "upgrading");
        }
    }

    /// Ends the rollout: its report, sorted by path, and the end of its progress report.
    pub(crate) fn finish(mut self) -> UpgradeReport {
        let mut report = std::mem::take(&mut self.report);
        report.upgraded.sort_by(|a, b| a.path.cmp(&b.path));
        report.failed.sort();
        let outcome = match (&report.canary, report.failed.len()) {
            (Some(verdict), _) if !verdict.passed() => Err(verdict.to_string()),
            (_, 0) => Ok(()),
            (_, n) => Err(format!(
                "{n} of {} actors kept their old version",
                self.total
            )),
        };
        if let Some(tracker) = self.tracker.take() {
            tracker.finish(outcome);
        }
        report
    }
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

/// Upgrades every actor of a module (`actors`) through a canary stage: the canaries, the watch,
/// then the rest or a rollback. What happened goes into the rollout's report.
pub(crate) async fn with_canary(
    rollout: &mut Rollout,
    rule: Canary,
    actors: Vec<ActorRef>,
    modules: &Modules,
    reports: &Arc<Reports>,
) {
    let target = rollout.module().clone();
    let (mut canaries, on_it): (Vec<ActorRef>, Vec<ActorRef>) = actors
        .into_iter()
        .partition(|a| a.running_version().as_deref() != Some(&*target.version));
    if canaries.is_empty() {
        // Nothing moves: no stage to judge.
        rollout.upgrade(on_it).await;
        return;
    }
    canaries.sort_by(|a, b| a.address.path.cmp(&b.address.path));
    let rest = canaries.split_off(rule.actors.min(canaries.len()));
    let was: Vec<Option<Arc<str>>> = canaries.iter().map(ActorRef::running_version).collect();
    tracing::info!(module = %target.name, version = %target.version, canaries = canaries.len(), watch = ?rule.watch, "canary stage started");
    rollout.upgrade(canaries.clone()).await;
    let mut verdict = CanaryVerdict {
        canaries: canaries
            .iter()
            .map(|a| a.address.path.to_string())
            .collect(),
        watched: Duration::ZERO,
        canary: CanaryFigures {
            actors: canaries.len(),
            ..CanaryFigures::default()
        },
        old: CanaryFigures {
            actors: rest.len(),
            ..CanaryFigures::default()
        },
        rule,
        outcome: CanaryOutcome::Passed,
        rolled_back: Vec::new(),
        stuck: Vec::new(),
        untouched: 0,
    };
    let failed = rollout.report.failed.len();
    if failed > 0 {
        verdict.outcome = CanaryOutcome::RolledBack(RollbackReason::UpgradeFailed { failed });
    } else {
        let task = Task::Canary {
            module: target.name.to_string(),
            version: target.version.to_string(),
            actors: canaries.len(),
        };
        let seconds = rule.watch.as_secs_f64().ceil() as u64;
        let begin = || reports.begin(task, Some(seconds));
        let watched = canary::watch(&canaries, &rest, rule.watch, begin).await;
        (verdict.canary, verdict.old, verdict.watched) =
            (watched.canary, watched.old, watched.time);
        verdict.outcome = canary::judge(&rule, &verdict.canary, &verdict.old);
        watched.tracker.finish(match verdict.outcome {
            CanaryOutcome::Passed => Ok(()),
            CanaryOutcome::RolledBack(_) => Err(verdict.to_string()),
        });
    }
    if verdict.passed() {
        tracing::info!(module = %target.name, version = %target.version, "{verdict}");
        rollout.report.canary = Some(verdict);
        rollout
            .upgrade(rest.into_iter().chain(on_it).collect())
            .await;
        return;
    }
    tracing::warn!(module = %target.name, version = %target.version, "{verdict}");
    rollout.report.unchanged += on_it.len();
    verdict.untouched = rest.len();
    roll_back(rollout, &mut verdict, &canaries, &was, modules).await;
    rollout.report.canary = Some(verdict);
}

/// Moves each upgraded canary back to the version it ran (`was`, in the order of `canaries`).
async fn roll_back(
    rollout: &mut Rollout,
    verdict: &mut CanaryVerdict,
    canaries: &[ActorRef],
    was: &[Option<Arc<str>>],
    modules: &Modules,
) {
    let upgraded: HashSet<&str> = (rollout.report.upgraded.iter())
        .map(|u| u.path.as_str())
        .collect();
    let mut by_version: BTreeMap<Arc<str>, Vec<ActorRef>> = BTreeMap::new();
    for (actor, version) in canaries.iter().zip(was) {
        let path = actor.address.path.to_string();
        match version {
            _ if !upgraded.contains(path.as_str()) => {}
            Some(v) => by_version.entry(v.clone()).or_default().push(actor.clone()),
            None => (verdict.stuck).push((path, "its old version is not known".to_owned())),
        }
    }
    let name = rollout.module().name.clone();
    for (version, actors) in by_version {
        let Some(module) = modules.get_version(&name, &version) else {
            for actor in actors {
                let why = format!("its old version {version} is no longer deployed");
                verdict.stuck.push((actor.address.path.to_string(), why));
            }
            continue;
        };
        let mut back = Rollout::new(module, actors.len(), rollout.options(), None, None);
        back.upgrade(actors).await;
        let back = back.finish();
        (verdict.rolled_back).extend(back.upgraded.into_iter().map(|u| u.path));
        verdict.stuck.extend(back.failed);
    }
    let rolled_back: HashSet<&str> = verdict.rolled_back.iter().map(String::as_str).collect();
    (rollout.report.upgraded).retain(|u| !rolled_back.contains(u.path.as_str()));
    verdict.rolled_back.sort();
    verdict.stuck.sort();
}
