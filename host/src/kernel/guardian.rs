//! The `/user` guardian: the supervisor of top-level actors, and the stream of supervision
//! decisions.
//!
//! Invariants:
//! - The guardian never escalates: where its strategy would, it stops the actor instead, so the
//!   host itself never fails.
//! - `top_level` holds exactly the top-level incarnations whose cells have not terminated; the
//!   count watchers see is its length after each change.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, watch};

use crate::actor::mailbox::ActorRef;
use crate::actor::supervisor::{Directive, FailureKind, Strategy, Supervisor};
use crate::address::{ActorPath, Address};

/// A supervision decision, published for observers (operators, tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupervisionEvent {
    /// The actor that failed.
    pub child: Address,
    /// How it failed.
    pub kind: FailureKind,
    /// Why it failed, as its supervisor saw it.
    pub error: String,
    /// What its supervisor (or the `/user` guardian) decided.
    pub directive: Directive,
}

/// The guardian of `/user`.
pub(crate) struct Guardian {
    /// The children of `/user`.
    top_level: Mutex<HashMap<ActorPath, ActorRef>>,
    count: watch::Sender<usize>,
    /// Restart bookkeeping under the root strategy.
    root: Mutex<Supervisor>,
    /// Top-level actors with a strategy of their own, by path.
    own: Mutex<HashMap<String, Supervisor>>,
    events: broadcast::Sender<SupervisionEvent>,
}

impl Guardian {
    /// A guardian deciding with `root` unless an actor has a strategy of its own.
    pub(crate) fn new(root: Strategy) -> Self {
        Guardian {
            top_level: Mutex::default(),
            count: watch::channel(0).0,
            root: Mutex::new(Supervisor::new(root)),
            own: Mutex::default(),
            events: broadcast::channel(1024).0,
        }
    }

    fn top(&self) -> std::sync::MutexGuard<'_, HashMap<ActorPath, ActorRef>> {
        self.top_level.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `spawn` under the guardian's lock and adopts what it spawned, so no count watcher
    /// sees the moment between the spawn and the adoption.
    pub(crate) fn adopt<E>(
        &self,
        spawn: impl FnOnce() -> Result<ActorRef, E>,
    ) -> Result<ActorRef, E> {
        let mut top = self.top();
        let actor = spawn()?;
        top.insert(actor.address.path.clone(), actor.clone());
        self.count.send_replace(top.len());
        Ok(actor)
    }

    /// A top-level incarnation has terminated.
    pub(crate) fn release(&self, child: &Address) {
        let mut top = self.top();
        if top
            .get(&child.path)
            .is_some_and(|a| a.address.incarnation == child.incarnation)
        {
            top.remove(&child.path);
        }
        self.count.send_replace(top.len());
    }

    /// The top-level actors now.
    pub(crate) fn children(&self) -> Vec<ActorRef> {
        self.top().values().cloned().collect()
    }

    /// Resolves once no top-level actor is left.
    pub(crate) async fn emptied(&self) {
        let mut rx = self.count.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// Gives the top-level actor at `path` a strategy of its own.
    pub(crate) fn set_strategy(&self, path: &str, strategy: Strategy) {
        self.own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.to_owned(), Supervisor::new(strategy));
    }

    /// Decides about a failed top-level actor: never escalate.
    pub(crate) fn decide(
        &self,
        child: &Address,
        kind: FailureKind,
        error: &str,
    ) -> (Directive, Duration) {
        let key = child.path.as_str();
        let now = Instant::now();
        let decision = match self
            .own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(key)
        {
            Some(own) => own.decide(key, None, now),
            None => self
                .root
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .decide(key, None, now),
        };
        let directive = match decision.directive {
            Directive::Escalate => {
                tracing::error!(actor = %child, %error, "top-level actor escalated or restarted too often; the guardian stops it");
                Directive::Stop
            }
            other => other,
        };
        self.publish(child, kind, error, directive);
        (directive, decision.delay)
    }

    /// Publishes a supervision decision to subscribers.
    pub(crate) fn publish(
        &self,
        child: &Address,
        kind: FailureKind,
        error: &str,
        directive: Directive,
    ) {
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(SupervisionEvent {
                child: child.clone(),
                kind,
                error: error.to_owned(),
                directive,
            });
        }
    }

    /// A stream of decisions from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<SupervisionEvent> {
        self.events.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actor::mailbox::test_mailbox;

    fn actor(path: &str, incarnation: u64) -> ActorRef {
        test_mailbox(path, incarnation, 1).0
    }

    #[test]
    fn the_guardian_stops_where_its_strategy_would_escalate() {
        let guardian = Guardian::new(Strategy {
            max_restarts: 1,
            ..Strategy::default()
        });
        let child = actor("/user/a", 1).address;
        let mut events = guardian.subscribe();
        assert_eq!(
            guardian.decide(&child, FailureKind::Error, "boom").0,
            Directive::Restart
        );
        assert_eq!(
            guardian.decide(&child, FailureKind::Error, "boom").0,
            Directive::Stop
        );
        assert_eq!(events.try_recv().unwrap().directive, Directive::Restart);
        assert_eq!(events.try_recv().unwrap().directive, Directive::Stop);
    }

    #[test]
    fn an_actor_with_its_own_strategy_is_decided_by_it() {
        let guardian = Guardian::new(Strategy::default());
        guardian.set_strategy(
            "/user/a",
            Strategy {
                directive: Directive::Resume,
                ..Strategy::default()
            },
        );
        let a = actor("/user/a", 1).address;
        let b = actor("/user/b", 2).address;
        assert_eq!(
            guardian.decide(&a, FailureKind::Error, "x").0,
            Directive::Resume
        );
        assert_eq!(
            guardian.decide(&b, FailureKind::Error, "x").0,
            Directive::Restart
        );
    }

    #[test]
    fn only_the_adopted_incarnation_is_released() {
        let guardian = Guardian::new(Strategy::default());
        let first = guardian.adopt(|| Ok::<_, ()>(actor("/user/a", 1))).unwrap();
        assert_eq!(guardian.children().len(), 1);
        guardian.release(&Address {
            incarnation: 99,
            ..first.address.clone()
        });
        assert_eq!(
            guardian.children().len(),
            1,
            "another incarnation is not released"
        );
        guardian.release(&first.address);
        assert!(guardian.children().is_empty());
    }
}
