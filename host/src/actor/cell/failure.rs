//! Failures: a cell's own (it reports, waits for its parent's directive, and is taken down
//! for a restart) and its children's (it decides with its strategy and its `supervise`
//! export, and stops children before it restarts or stops).
//!
//! Invariants:
//! - A failed actor handles no user message until its parent (or the guardian) decides.
//! - Children stop before their parent restarts or stops, and the parent waits for each.
//! - Restart intensity and backoff are the supervisor's pure decision (`actor::supervisor`).

use std::time::{Duration, Instant};

use super::{Cell, Exit, Verdict};
use crate::actor::instance::{ActorInstance, Failure};
use crate::actor::mailbox::{ActorRef, SystemMsg, UpgradeOutcome as Outcome};
use crate::actor::supervisor::{Directive, FailureKind, Scope};
use crate::address::Address;
use crate::message::StopReason;

impl Cell {
    pub(super) fn child_gone(&mut self, child: &Address) {
        let name = child.path.name();
        if let Some(state) = self.state()
            && state
                .core
                .children
                .get(name)
                .is_some_and(|c| c.address.incarnation == child.incarnation)
        {
            state.core.children.remove(name);
            state.core.supervisor.forget(name);
        }
    }

    /// Applies this actor's strategy to a failed child.
    pub(super) async fn supervise_child(
        &mut self,
        child: Address,
        kind: FailureKind,
        error: String,
    ) -> Option<Exit> {
        let instance = self.instance.as_mut()?;
        let name = child.path.name().to_owned();
        let failed = instance
            .state()
            .core
            .children
            .get(&name)
            .filter(|c| c.address.incarnation == child.incarnation)
            .cloned()?;
        let chosen = match instance.supervise(&child, kind, &error).await {
            Ok(chosen) => chosen,
            Err(failure) => {
                self.abandon_step(None);
                return Some(Exit::Failed(failure));
            }
        };
        if let Err(failure) = self.settle(None).await {
            return Some(Exit::Failed(failure));
        }
        let instance = self.instance.as_mut()?;
        let core = &mut instance.state().core;
        let scope = core.supervisor.strategy.scope;
        let decision = core.supervisor.decide(&name, chosen, Instant::now());
        tracing::info!(child = %child, directive = ?decision.directive, ?scope, %error, "supervising a failed child");
        self.kernel
            .guardian
            .publish(&child, kind, &error, decision.directive);
        let siblings: Vec<ActorRef> = match scope {
            Scope::OneForOne => Vec::new(),
            Scope::AllForOne => core
                .children
                .values()
                .filter(|c| c.address != child)
                .cloned()
                .collect(),
        };
        let directive = |directive, cause: String| SystemMsg::Directive {
            directive,
            delay: decision.delay,
            cause,
        };
        match decision.directive {
            Directive::Escalate => {
                self.escalated.push(failed);
                return Some(Exit::Failed(Failure::new(
                    FailureKind::Escalated,
                    format!("escalated: child {child} failed: {error}"),
                )));
            }
            Directive::Resume => {
                failed.signal(directive(Directive::Resume, error));
            }
            Directive::Restart => {
                for sibling in &siblings {
                    sibling.signal(directive(
                        Directive::Restart,
                        format!("sibling {child} failed: {error}"),
                    ));
                }
                failed.signal(directive(Directive::Restart, error));
            }
            Directive::Stop => {
                for sibling in &siblings {
                    sibling.signal(SystemMsg::Stop(StopReason::Normal));
                }
                failed.signal(directive(Directive::Stop, error));
            }
        }
        None
    }

    /// Reports the failure and waits for the decision, serving only system messages.
    pub(super) async fn await_directive(&mut self, kind: FailureKind, error: String) -> Verdict {
        self.kernel
            .report_failure(&self.me, self.parent.as_ref(), kind, error);
        loop {
            let Some(msg) = self.mailbox.system.recv().await else {
                return Verdict::Stop(StopReason::Normal);
            };
            let Some(msg) = self.track(msg) else {
                continue;
            };
            match msg {
                SystemMsg::Directive {
                    directive,
                    delay,
                    cause,
                } => {
                    return match directive {
                        Directive::Resume => Verdict::Resume,
                        Directive::Restart => Verdict::Restart(delay),
                        Directive::Stop | Directive::Escalate => {
                            Verdict::Stop(StopReason::Failure(cause))
                        }
                    };
                }
                SystemMsg::Stop(reason) => return Verdict::Stop(reason),
                SystemMsg::ChildTerminated(child) => self.child_gone(&child),
                failed @ SystemMsg::Failed { .. } => self.deferred.push_back(failed),
                SystemMsg::Upgrade(request) => request.answer(Outcome::Failed(
                    "the actor has failed and waits for its supervisor".into(),
                )),
                SystemMsg::Snapshot(answer) => {
                    let _ = answer.send(Err(crate::sandbox::image::ImageError::Uncapturable(
                        "the actor has failed and waits for its supervisor".into(),
                    )));
                }
                SystemMsg::Depart(departure) => {
                    let _ =
                        departure
                            .image
                            .send(Err(crate::sandbox::image::ImageError::Uncapturable(
                                "the actor has failed and waits for its supervisor".into(),
                            )));
                }
                SystemMsg::Watch(_)
                | SystemMsg::Unwatch(_)
                | SystemMsg::Deactivate
                | SystemMsg::Activate
                | SystemMsg::Urgent => {}
            }
        }
    }

    /// Takes down the old instance (children first) and waits out the backoff. Returns a stop
    /// reason if the actor was stopped meanwhile.
    pub(super) async fn prepare_restart(
        &mut self,
        cause: &str,
        delay: Duration,
    ) -> Option<StopReason> {
        match self.instance.as_mut() {
            Some(instance) => self
                .caps
                .restarting(&self.me.address, &mut instance.state().caps),
            None => {
                if let Some(states) = self.carried.as_mut() {
                    self.caps.restarting(&self.me.address, states);
                }
            }
        }
        self.deferred.clear();
        self.escalated.clear();
        let mut stopped = None;
        if let Some(mut instance) = self.instance.take() {
            instance.state().core.stopping = true;
            stopped = self
                .stop_children(&mut instance, StopReason::ParentFailure(cause.to_owned()))
                .await;
            if !instance.poisoned {
                let stopped = instance
                    .stopping(&StopReason::Failure(cause.to_owned()))
                    .await;
                self.settle_final(
                    &mut instance,
                    stopped,
                    "stopping hook failed during restart",
                )
                .await;
            }
            self.carried = Some(Box::new(instance.into_state().caps));
        }
        if stopped.is_some() || delay.is_zero() {
            return stopped;
        }
        let sleep = tokio::time::sleep(delay);
        tokio::pin!(sleep);
        loop {
            let msg = tokio::select! {
                _ = &mut sleep => return None,
                msg = self.mailbox.system.recv() => msg,
            };
            let Some(msg) = msg else {
                return Some(StopReason::Normal);
            };
            match self.track(msg) {
                Some(SystemMsg::Stop(reason)) => return Some(reason),
                Some(SystemMsg::Directive {
                    directive: Directive::Stop,
                    cause,
                    ..
                }) => return Some(StopReason::Failure(cause)),
                _ => {}
            }
        }
    }

    /// Stops every child with `reason` and waits until each has terminated. Returns a stop
    /// reason that arrived for this actor meanwhile.
    pub(super) async fn stop_children(
        &mut self,
        instance: &mut ActorInstance,
        reason: StopReason,
    ) -> Option<StopReason> {
        for child in instance.state().core.children.values() {
            child.signal(SystemMsg::Stop(reason.clone()));
        }
        let mut stopped = None;
        while !instance.state().core.children.is_empty() {
            let Some(msg) = self.mailbox.system.recv().await else {
                break;
            };
            match self.track(msg) {
                Some(SystemMsg::ChildTerminated(child)) => {
                    instance.state().core.children.remove(child.path.name());
                }
                Some(SystemMsg::Stop(r)) => stopped = stopped.or(Some(r)),
                Some(SystemMsg::Directive {
                    directive: Directive::Stop,
                    cause,
                    ..
                }) => stopped = stopped.or(Some(StopReason::Failure(cause))),
                _ => {}
            }
        }
        stopped
    }
}
