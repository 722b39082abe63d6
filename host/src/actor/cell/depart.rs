//! A cell's part in a move to another node (see `actor::departure`): capture, wait for the
//! verdict, then serve on or hand the mailbox over and end without terminating.
//!
//! Invariants:
//! - The actor handles no user message between its capture and the verdict: the image is
//!   the state the actor continues from elsewhere.
//! - A departed actor runs no `stopping` hook and tells no watcher or parent that it ended:
//!   it did not; its capabilities' host-side state (timers, subscriptions) is released here
//!   because the image carries it to where the actor continues.

use tokio::sync::oneshot;

use super::{Cell, Exit};
use crate::actor::departure::{Departure, Handover};

impl Cell {
    /// Captures the actor and waits for the mover's verdict: `Exit::Departed` to go, `None`
    /// to serve on (also when it cannot be captured).
    pub(super) async fn depart(&mut self, departure: Departure) -> Option<Exit> {
        let Departure { image, verdict } = departure;
        let limits = *self.limits;
        let captured = self.capture().await.map(|image| (image.encode(), limits));
        let ok = captured.is_ok();
        if image.send(captured).is_err() || !ok {
            return None;
        }
        match verdict.await {
            Ok(Some(handover)) => Some(Exit::Departed(handover)),
            _ => {
                tracing::info!("the move did not happen: serving on here");
                None
            }
        }
    }

    /// Ends this cell for a move: releases what the capabilities hold for the instance here
    /// and hands the mailbox (still registered) and the watchers to the mover. A mover gone
    /// meanwhile leaves the actor to terminate here, its messages to dead letters.
    pub(super) async fn hand_over(mut self, to: oneshot::Sender<Handover>) {
        let mut last = self.instance.take().map(|i| Box::new(i.into_state().caps));
        self.caps
            .stopped(&self.kernel, &self.me.address, last.as_deref_mut());
        let handover = Handover {
            me: self.me.clone(),
            mailbox: self.mailbox,
            watchers: self.watchers.drain().collect(),
            parent: self.parent.clone(),
        };
        if let Err(handover) = to.send(handover) {
            tracing::error!("the mover of this actor is gone: it ends here");
            let Handover {
                me,
                mailbox,
                parent,
                ..
            } = handover;
            self.kernel.tally.retire(&me, || {
                self.kernel.registry.remove(&me.address);
                true
            });
            self.kernel.abandon(&me, parent.as_ref(), mailbox);
        }
        tracing::info!("moved away");
    }
}
