//! An upgrade rolled across a cluster: the node that gets the command asks every live node to
//! upgrade its own actors, and merges their reports into one.
//!
//! ```text
//! the node that got the command                   each other live node
//!   shares the version (bytes, then record)
//!   canary? the stage runs on one node first: this one if it has actors to move, else the
//!           next by name that has; the others are asked only if it passed
//!   request on mote.<cluster>.upgrade.<node> ─────> fetches the version if it lacks it,
//!                                                    upgrades its actors (never makes the
//!                                                    version current by itself)
//!             <── Working (each heartbeat), Progress (each actor), Done (its report or why not)
//!   one report: every node's actors, `nodes` says whose; all done and passed: the version is
//!   recorded current in the bucket, and every node follows it
//! ```
//!
//! Invariants:
//! - Nothing waits for ever: a node that says nothing for twice the failure timeout, or is
//!   found down, is a [`NodeUpgradeError`] in the report, and the upgrade goes on without it.
//! - A version becomes current only if every live node answered, none of their actors kept
//!   the old version, and the canary, if any, passed; then in the bucket first, so a node
//!   that joins later has it current too.
//! - When the canary stage does not pass (or its node does not answer), no other node is
//!   asked: their actors keep their version.
//! - Requests and answers are under the cluster's prefix, except the reply inbox NATS gives;
//!   a request or answer that does not decode is an answer of its own, never a panic.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::config::{ClusterConfig, ClusterError, Names};
use super::modules::{ModuleStores, SharedModules, Write};
use super::wire;
use crate::deploy::upgrade::{
    NodeUpgrade, NodeUpgradeError, SetCurrent, UpgradeError, UpgradeOptions, UpgradeProgress,
    UpgradeReport, Upgrader,
};
use crate::error::{ModuleError, chain};

/// What a node is asked to do.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Request {
    /// A module name, or the path of one actor.
    target: String,
    version: String,
    /// The content hash the asking node has under that version (none for one actor: the
    /// asking node may not know its module).
    hash: Option<String>,
    options: UpgradeOptions,
}

/// What a node says while it serves a request, and at the end.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
enum Answer {
    /// Still at it (sent each heartbeat, so that silence means trouble).
    Working,
    /// One more of its actors finished.
    Progress(UpgradeProgress),
    /// Its report, or why it could not upgrade.
    Done(Result<Box<UpgradeReport>, String>),
}

/// One node's part: its report, or why there is none.
type Part = Result<UpgradeReport, NodeUpgradeError>;

impl SharedModules {
    /// Upgrades `target` across the cluster; see the module's doc.
    pub(crate) async fn upgrade(
        &self,
        target: &str,
        version: &str,
        options: UpgradeOptions,
        progress: Option<mpsc::UnboundedSender<UpgradeProgress>>,
    ) -> Result<UpgradeReport, UpgradeError> {
        let Some(kernel) = self.cluster.kernel.upgrade() else {
            return Err(UpgradeError::NoActor(target.to_owned()));
        };
        let me = self.cluster.me.clone();
        if target.starts_with('/') {
            // One actor: where it lives.
            let node = match self.cluster.owner(target) {
                Some(node) if kernel.registry.get(target).is_none() => node,
                _ => {
                    let here = Upgrader {
                        kernel: &kernel,
                        modules: &self.modules,
                        counts: &self.upgrades,
                    };
                    return (here.upgrade(target, version, options, progress, SetCurrent::Here))
                        .await
                        .map(|report| with_nodes(report, &me));
                }
            };
            if options.canary.is_some() {
                return Err(UpgradeError::CanaryOfOneActor(target.to_owned()));
            }
            let (tx, rx) = mpsc::unbounded_channel();
            let request = Request {
                target: target.to_owned(),
                version: version.to_owned(),
                hash: None,
                options,
            };
            let (part, ()) = tokio::join!(self.ask(&node, &request, tx), aggregate(rx, progress));
            return Ok(merge(target, version, vec![(node, part)]));
        }
        if options.canary.is_some_and(|c| c.actors == 0) {
            return Err(UpgradeError::EmptyCanary);
        }
        let module =
            (self.modules.get_version(target, version)).ok_or_else(|| ModuleError::Unknown {
                name: target.to_owned(),
                version: Some(version.to_owned()),
            })?;
        // Every node must be able to fetch it: shared first (a no-op if it is).
        self.share(target, version, Write::IfAbsent)
            .await
            .map_err(|e| UpgradeError::Share {
                module: target.to_owned(),
                version: version.to_owned(),
                source: e.into(),
            })?;
        let mut request = Request {
            target: target.to_owned(),
            version: version.to_owned(),
            hash: Some(module.hash.to_string()),
            options,
        };
        // This node first, then the others by name.
        let mut rest: Vec<String> = self.cluster.nodes();
        rest.retain(|n| *n != me);
        rest.insert(0, me.clone());
        tracing::info!(module = target, version, nodes = ?rest, canary = options.canary.is_some(), "cluster-wide upgrade started");
        let (tx, rx) = mpsc::unbounded_channel();
        let roll = async {
            let mut parts: Vec<(String, Part)> = Vec::new();
            if options.canary.is_some() {
                // The stage runs on the first node that has actors to move; nodes before it
                // had none, so their part is done too.
                while !rest.is_empty() {
                    let node = rest.remove(0);
                    let part = self.run(&node, &request, tx.clone()).await;
                    let judged = match &part {
                        Ok(report) => report.canary.as_ref().map(|v| v.passed()),
                        Err(_) => Some(false),
                    };
                    parts.push((node.clone(), part));
                    match judged {
                        None => continue,
                        Some(true) => break,
                        Some(false) => {
                            for other in rest.drain(..) {
                                let skipped = NodeUpgradeError::NotAsked {
                                    node: other.clone(),
                                    canary_node: node.clone(),
                                };
                                parts.push((other, Err(skipped)));
                            }
                        }
                    }
                }
                request.options.canary = None;
            }
            let runs = rest.iter().map(|node| self.run(node, &request, tx.clone()));
            let results = join_all(runs).await;
            parts.extend(rest.iter().cloned().zip(results));
            drop(tx);
            parts
        };
        let (parts, ()) = tokio::join!(roll, aggregate(rx, progress));
        let mut report = merge(target, version, parts);
        let all_done = report.nodes.iter().all(|n| n.error.is_none()) && report.fully_done();
        if all_done {
            match self.set_current(target, version).await {
                Ok(()) => report.current = true,
                Err(e) => {
                    tracing::warn!(module = target, version, error = %chain(&*e), "every node upgraded, but the version could not be recorded current")
                }
            }
        }
        tracing::info!(
            module = target,
            version,
            upgraded = report.upgraded.len(),
            unchanged = report.unchanged,
            failed = report.failed.len(),
            nodes_failed = report.nodes.iter().filter(|n| n.error.is_some()).count(),
            current = report.current,
            "cluster-wide upgrade finished"
        );
        Ok(report)
    }

    /// Runs `request` on `node`: here, or by asking it.
    async fn run(
        &self,
        node: &str,
        request: &Request,
        progress: mpsc::UnboundedSender<(String, UpgradeProgress)>,
    ) -> Part {
        if node != self.cluster.me {
            return self.ask(node, request, progress).await;
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        let forward = async {
            while let Some(step) = rx.recv().await {
                let _ = progress.send((node.to_owned(), step));
            }
        };
        let (result, ()) = tokio::join!(self.serve_here(request, tx), forward);
        result.map_err(|reason| NodeUpgradeError::Refused {
            node: node.to_owned(),
            reason,
        })
    }

    /// Asks `node` to run `request` and waits for its report while it keeps talking.
    async fn ask(
        &self,
        node: &str,
        request: &Request,
        progress: mpsc::UnboundedSender<(String, UpgradeProgress)>,
    ) -> Part {
        let unreachable = |what: &str, e: &dyn std::fmt::Display| NodeUpgradeError::Refused {
            node: node.to_owned(),
            reason: format!("{what}: {e}"),
        };
        let inbox = self.client.new_inbox();
        let mut answers = (self.client.subscribe(inbox.clone()).await)
            .map_err(|e| unreachable("cannot hear answers", &e))?;
        let subject = self.cluster.names.upgrades(node);
        (self.client)
            .publish_with_reply(subject, inbox, wire::encode(request).into())
            .await
            .map_err(|e| unreachable("cannot send the request", &e))?;
        let silence = self.cluster.config.failure_timeout * 2;
        loop {
            let heard = tokio::time::timeout(silence, answers.next()).await;
            let message = match heard {
                Ok(Some(message)) => message,
                Ok(None) => return Err(unreachable("the answers stopped", &"no subscription")),
                Err(_) if !self.cluster.members.is_live(node) => {
                    return Err(NodeUpgradeError::Left(node.to_owned()));
                }
                Err(_) => {
                    return Err(NodeUpgradeError::Silent {
                        node: node.to_owned(),
                        silence,
                    });
                }
            };
            match wire::decode::<Answer>(&message.payload) {
                Ok(Answer::Working) => {}
                Ok(Answer::Progress(step)) => {
                    let _ = progress.send((node.to_owned(), step));
                }
                Ok(Answer::Done(Ok(report))) => return Ok(*report),
                Ok(Answer::Done(Err(reason))) => {
                    return Err(NodeUpgradeError::Refused {
                        node: node.to_owned(),
                        reason,
                    });
                }
                Err(e) => return Err(unreachable("an answer did not decode", &e)),
            }
        }
    }

    /// Runs a request on this node: fetches the version if it lacks it, then upgrades.
    async fn serve_here(
        &self,
        request: &Request,
        progress: mpsc::UnboundedSender<UpgradeProgress>,
    ) -> Result<UpgradeReport, String> {
        let Some(kernel) = self.cluster.kernel.upgrade() else {
            return Err("the node is shutting down".to_owned());
        };
        let name = match request.target.strip_prefix('/') {
            Some(_) => kernel
                .registry
                .get(&request.target)
                .and_then(|a| a.module.as_deref().map(str::to_owned)),
            None => Some(request.target.clone()),
        };
        if let Some(name) = name {
            (self.ensure(&name, &request.version, request.hash.as_deref()))
                .await
                .map_err(|e| chain(&e))?;
        }
        let here = Upgrader {
            kernel: &kernel,
            modules: &self.modules,
            counts: &self.upgrades,
        };
        let (target, version) = (&request.target, &request.version);
        here.upgrade(
            target,
            version,
            request.options,
            Some(progress),
            SetCurrent::Later,
        )
        .await
        .map_err(|e| chain(&e))
    }

    /// Serves one request from another node, talking until it is done.
    async fn answer(&self, reply: async_nats::Subject, payload: &[u8]) {
        let say = |answer: Answer| {
            let (client, reply) = (self.client.clone(), reply.clone());
            async move {
                if let Err(e) = client.publish(reply, wire::encode(&answer).into()).await {
                    tracing::warn!(error = %e, "an answer to an upgrade request was not sent");
                }
            }
        };
        let request = match wire::decode::<Request>(payload) {
            Ok(request) => request,
            Err(e) => {
                say(Answer::Done(Err(format!(
                    "the request did not decode: {e}"
                ))))
                .await;
                return;
            }
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let work = self.serve_here(&request, tx);
        tokio::pin!(work);
        let mut tick = tokio::time::interval(self.cluster.config.heartbeat);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let result = loop {
            tokio::select! {
                result = &mut work => break result,
                Some(step) = rx.recv() => say(Answer::Progress(step)).await,
                _ = tick.tick() => say(Answer::Working).await,
            }
        };
        while let Ok(step) = rx.try_recv() {
            say(Answer::Progress(step)).await;
        }
        say(Answer::Done(result.map(Box::new))).await;
    }
}

/// The upgrade requests to one node, heard from before it joins so that none is missed.
pub(crate) struct UpgradeRequests(async_nats::Subscriber);

impl UpgradeRequests {
    /// Subscribes to the requests to `config.node` on the modules' connection.
    pub(crate) async fn open(
        stores: &ModuleStores,
        config: &ClusterConfig,
    ) -> Result<UpgradeRequests, ClusterError> {
        let subject = Names::new(&config.name).upgrades(&config.node);
        (stores.client.subscribe(subject).await)
            .map(UpgradeRequests)
            .map_err(|e| ClusterError::jetstream("subscribing to upgrade requests", e))
    }
}

impl SharedModules {
    /// Serves the requests other nodes send this one, until [`SharedModules::stop`].
    pub(crate) fn serve(self: &Arc<Self>, requests: UpgradeRequests) {
        self.keep(serve(self.clone(), requests.0));
    }
}

/// Serves the upgrade requests other nodes send this one, each on a task of its own.
async fn serve(shared: Arc<SharedModules>, mut requests: async_nats::Subscriber) {
    while let Some(request) = requests.next().await {
        let Some(kernel) = shared.cluster.kernel.upgrade() else {
            return;
        };
        let Some(reply) = request.reply else { continue };
        let shared = shared.clone();
        kernel.runtime.spawn(async move {
            shared.answer(reply, &request.payload).await;
        });
    }
}

/// Passes each node's progress on as the sum over the nodes, until every sender is gone.
async fn aggregate(
    mut steps: mpsc::UnboundedReceiver<(String, UpgradeProgress)>,
    to: Option<mpsc::UnboundedSender<UpgradeProgress>>,
) {
    let mut latest: BTreeMap<String, UpgradeProgress> = BTreeMap::new();
    while let Some((node, step)) = steps.recv().await {
        latest.insert(node, step);
        let sum = latest.values().fold(
            UpgradeProgress {
                done: 0,
                total: 0,
                failed: 0,
            },
            |a, s| UpgradeProgress {
                done: a.done + s.done,
                total: a.total + s.total,
                failed: a.failed + s.failed,
            },
        );
        if let Some(to) = &to {
            let _ = to.send(sum);
        }
    }
}

/// A report of this node's upgrade alone, with its part named.
fn with_nodes(report: UpgradeReport, me: &str) -> UpgradeReport {
    merge(
        &report.module.clone(),
        &report.version.clone(),
        vec![(me.to_owned(), Ok(report))],
    )
}

/// One report of every node's part: the actors of all, each node's part in `nodes` (by name).
/// `current` is left to the caller; the module is the one the nodes name (`target` is a path
/// when one actor was upgraded).
fn merge(target: &str, version: &str, parts: Vec<(String, Part)>) -> UpgradeReport {
    let mut report = UpgradeReport {
        module: target.to_owned(),
        version: version.to_owned(),
        ..UpgradeReport::default()
    };
    for (node, part) in parts {
        if let Ok(part) = &part {
            report.module.clone_from(&part.module);
        }
        let mut mine = NodeUpgrade {
            node,
            ..NodeUpgrade::default()
        };
        match part {
            Ok(part) => {
                mine.actors
                    .extend(part.upgraded.iter().map(|u| u.path.clone()));
                mine.actors
                    .extend(part.failed.iter().map(|(p, _)| p.clone()));
                if let Some(verdict) = &part.canary {
                    mine.actors.extend(verdict.rolled_back.iter().cloned());
                    mine.actors
                        .extend(verdict.stuck.iter().map(|(p, _)| p.clone()));
                }
                mine.actors.sort();
                mine.actors.dedup();
                mine.unchanged = part.unchanged;
                report.upgraded.extend(part.upgraded);
                report.failed.extend(part.failed);
                report.unchanged += part.unchanged;
                if part.canary.is_some() {
                    report.canary = part.canary;
                }
            }
            Err(e) => mine.error = Some(e),
        }
        report.nodes.push(mine);
    }
    report.upgraded.sort_by(|a, b| a.path.cmp(&b.path));
    report.failed.sort();
    report.nodes.sort_by(|a, b| a.node.cmp(&b.node));
    report
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::deploy::upgrade::Upgraded;

    fn upgraded(path: &str) -> Upgraded {
        Upgraded {
            path: path.into(),
            migrated: true,
            pause: Duration::from_micros(50),
        }
    }

    #[test]
    fn one_report_names_each_nodes_actors_and_a_silent_node() {
        let a = UpgradeReport {
            module: "m".into(),
            version: "2".into(),
            upgraded: vec![upgraded("/user/x")],
            unchanged: 1,
            ..UpgradeReport::default()
        };
        let b = UpgradeReport {
            upgraded: vec![upgraded("/user/w")],
            failed: vec![("/user/v".into(), "trapped".into())],
            ..a.clone()
        };
        let silent = NodeUpgradeError::Silent {
            node: "c".into(),
            silence: Duration::from_secs(6),
        };
        let report = merge(
            "m",
            "2",
            vec![
                ("b".into(), Ok(b)),
                ("c".into(), Err(silent.clone())),
                ("a".into(), Ok(a)),
            ],
        );
        let paths: Vec<&str> = report.upgraded.iter().map(|u| u.path.as_str()).collect();
        assert_eq!(paths, ["/user/w", "/user/x"]);
        assert_eq!(
            report.failed,
            [("/user/v".to_owned(), "trapped".to_owned())]
        );
        assert_eq!(report.unchanged, 2);
        let nodes: Vec<(&str, Vec<&str>)> = (report.nodes.iter())
            .map(|n| {
                (
                    n.node.as_str(),
                    n.actors.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            nodes,
            [
                ("a", vec!["/user/x"]),
                ("b", vec!["/user/v", "/user/w"]),
                ("c", vec![])
            ]
        );
        assert_eq!(report.nodes[2].error, Some(silent));
        assert!(!report.current, "the caller decides");
    }

    #[test]
    fn requests_and_answers_cross_whole_and_garbage_is_an_error() {
        let request = Request {
            target: "m".into(),
            version: "2".into(),
            hash: Some("ab".into()),
            options: UpgradeOptions {
                canary: Some(crate::deploy::canary::Canary::new(
                    2,
                    Duration::from_secs(3),
                )),
                ..UpgradeOptions::default()
            },
        };
        let back: Request = wire::decode(&wire::encode(&request)).unwrap();
        assert_eq!(back, request);
        let done = Answer::Done(Ok(Box::new(UpgradeReport {
            upgraded: vec![upgraded("/user/x")],
            ..UpgradeReport::default()
        })));
        assert_eq!(wire::decode::<Answer>(&wire::encode(&done)).unwrap(), done);
        assert!(wire::decode::<Request>(&[0xff, 0xff, 0xff]).is_err());
        assert!(wire::decode::<Answer>(&[9]).is_err());
    }

    #[tokio::test]
    async fn progress_is_summed_over_the_nodes() {
        let (tx, rx) = mpsc::unbounded_channel();
        let (out, mut sums) = mpsc::unbounded_channel();
        let step = |done, total| UpgradeProgress {
            done,
            total,
            failed: 0,
        };
        tx.send(("a".to_owned(), step(1, 2))).unwrap();
        tx.send(("b".to_owned(), step(1, 3))).unwrap();
        tx.send(("a".to_owned(), step(2, 2))).unwrap();
        drop(tx);
        aggregate(rx, Some(out)).await;
        let mut seen = Vec::new();
        while let Ok(s) = sums.try_recv() {
            seen.push((s.done, s.total));
        }
        assert_eq!(seen, [(1, 2), (2, 5), (3, 5)]);
    }
}
