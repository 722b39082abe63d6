//! The step: what one call of an actor's guest produces, and when it takes effect.
//!
//! ```text
//! guest call ──> effects (sends, spawned children, stops, capability effects such as timers)
//!                  │ not held: each takes effect at once, during the call
//!                  │ held (a capability journals this actor's steps):
//!                  v
//!     the capabilities seal the step: a journal writes its changes and the step's sends
//!                  │ the cell awaits the commit
//!                  v
//!     committed: the effects are released, in order      failed: they are discarded
//! ```
//!
//! The cell drives this for every call; capabilities plug in through their `seal` hook (see
//! `caps::capability`). Nothing here knows what a journal is.
//!
//! Invariants:
//! - A held effect is released at most once, only after its step's commit succeeded, and in
//!   the order the call produced it; a discarded one never takes effect.
//! - A discarded child gives its path back without running (its queued messages become dead
//!   letters, its parent hears that it terminated).
//! - Once held, an actor's effects stay held for the rest of its instance's life (and in the
//!   successor an upgrade builds).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::mailbox::{ActorRef, SystemMsg};
use crate::error::BoxError;
use crate::kernel::{Kernel, Pending};
use crate::message::{Envelope, Receipt, StopReason};

/// An effect a capability defines (a timer to arm, say), held like the kernel's own.
pub(crate) trait Deferred: Send + 'static {
    /// Takes effect.
    fn release(self, kernel: &Arc<Kernel>);
}

/// [`Deferred`] behind a box.
pub(crate) trait Boxed: Send {
    fn release(self: Box<Self>, kernel: &Arc<Kernel>);
}

impl<D: Deferred> Boxed for D {
    fn release(self: Box<Self>, kernel: &Arc<Kernel>) {
        (*self).release(kernel);
    }
}

/// An effect held back until its step is committed.
pub(crate) enum Effect {
    /// A message.
    Send {
        path: String,
        incarnation: Option<u64>,
        envelope: Envelope,
    },
    /// A child spawned in this step: its task starts at release.
    Start(Box<dyn Pending>),
    /// A descendant to stop.
    Stop(ActorRef),
    /// A capability's effect.
    Later(Box<dyn Boxed>),
}

/// The write that must be durable before a step's effects are released. It may be under way
/// before it is polled (the JetStream store runs it as a task of its own, so that a cell that
/// stops polling it holds up no other writer).
pub(crate) type Commit = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;

/// A step with something left to do once sealed: a write to await, effects to release.
pub(crate) struct Sealed {
    pub(crate) commit: Option<Commit>,
    pub(crate) effects: Vec<Effect>,
}

/// The effects of the current call of one actor.
#[derive(Default)]
pub(crate) struct Step {
    hold: bool,
    effects: Vec<Effect>,
    /// Durable messages the call consumed besides the one it handles (taken from the stash).
    consumed: Vec<Receipt>,
}

impl Step {
    /// A step that holds its effects from the start (the successor of a held one).
    pub(crate) fn held(hold: bool) -> Self {
        Step {
            hold,
            ..Step::default()
        }
    }

    /// Whether effects wait for the step's commit.
    pub(crate) fn holds(&self) -> bool {
        self.hold
    }

    /// From now on, effects wait for the step's commit.
    pub(crate) fn hold(&mut self) {
        self.hold = true;
    }

    /// Sends now, or when the step commits.
    pub(crate) fn send(
        &mut self,
        kernel: &Arc<Kernel>,
        path: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
    ) {
        if self.hold {
            self.effects.push(Effect::Send {
                path: path.to_owned(),
                incarnation,
                envelope,
            });
        } else {
            kernel.tell_address(path, incarnation, envelope);
        }
    }

    /// Starts a spawned child's task now, or when the step commits.
    pub(crate) fn start(&mut self, task: Box<dyn Pending>) {
        if self.hold {
            self.effects.push(Effect::Start(task));
        } else {
            task.start();
        }
    }

    /// Stops a descendant now, or when the step commits.
    pub(crate) fn stop(&mut self, actor: ActorRef) {
        if self.hold {
            self.effects.push(Effect::Stop(actor));
        } else {
            actor.signal(SystemMsg::Stop(StopReason::Normal));
        }
    }

    /// A capability's effect, now or when the step commits.
    pub(crate) fn defer<D: Deferred>(&mut self, kernel: &Arc<Kernel>, effect: D) {
        if self.hold {
            self.effects.push(Effect::Later(Box::new(effect)));
        } else {
            effect.release(kernel);
        }
    }

    /// A capability's effect that waits for the step's release in any case (a journal's own,
    /// added when it seals the step).
    pub(crate) fn later<D: Deferred>(&mut self, effect: D) {
        self.effects.push(Effect::Later(Box::new(effect)));
    }

    /// The messages held in this step, for a journal to record (and stamp with receipts).
    pub(crate) fn sends_mut(&mut self) -> impl Iterator<Item = (&str, &mut Envelope)> {
        self.effects.iter_mut().filter_map(|e| match e {
            Effect::Send { path, envelope, .. } => Some((path.as_str(), envelope)),
            _ => None,
        })
    }

    /// How many messages are held.
    pub(crate) fn held_sends(&self) -> usize {
        self.effects
            .iter()
            .filter(|e| matches!(e, Effect::Send { .. }))
            .count()
    }

    /// Records a durable message the call consumed besides the one it handles: it is
    /// acknowledged with the step.
    pub(crate) fn consume(&mut self, receipt: Receipt) {
        self.consumed.push(receipt);
    }

    /// Takes what the call consumed besides its own message.
    pub(crate) fn take_consumed(&mut self) -> Vec<Receipt> {
        std::mem::take(&mut self.consumed)
    }

    /// Takes the held effects, leaving the step empty (still holding).
    pub(crate) fn take(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }
}

/// Releases committed effects, in order.
pub(crate) fn release(kernel: &Arc<Kernel>, effects: Vec<Effect>) {
    for effect in effects {
        match effect {
            Effect::Send {
                path,
                incarnation,
                envelope,
            } => kernel.tell_address(&path, incarnation, envelope),
            Effect::Start(task) => task.start(),
            Effect::Stop(actor) => {
                actor.signal(SystemMsg::Stop(StopReason::Normal));
            }
            Effect::Later(effect) => effect.release(kernel),
        }
    }
}

/// Drops effects that will never be committed; a child that was never started gives its path
/// back.
pub(crate) fn discard(effects: Vec<Effect>) {
    for effect in effects {
        if let Effect::Start(task) = effect {
            task.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actor::mailbox::{self, UserMsg};
    use crate::kernel::testing::{kernel, register};
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Count(Arc<AtomicUsize>);

    impl Deferred for Count {
        fn release(self, _kernel: &Arc<Kernel>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn setup() -> (tokio::runtime::Runtime, Arc<Kernel>, mailbox::Mailbox) {
        let (runtime, kernel) = kernel();
        let (_, mailbox) = register(&kernel, "/user/r", 100);
        (runtime, kernel, mailbox)
    }

    #[test]
    fn without_hold_effects_take_place_at_once() {
        let (_rt, kernel, mut mailbox) = setup();
        let mut step = Step::default();
        let fired = Arc::new(AtomicUsize::new(0));
        step.send(
            &kernel,
            "/user/r",
            None,
            Envelope::new(None, "a", Vec::new()),
        );
        step.defer(&kernel, Count(fired.clone()));
        assert!(matches!(mailbox.try_next(), Ok(UserMsg::Message(_))));
        assert_eq!(fired.load(Ordering::SeqCst), 1);
        assert!(step.take().is_empty());
    }

    #[test]
    fn held_effects_wait_and_are_released_in_order_once() {
        let (_rt, kernel, mut mailbox) = setup();
        let mut step = Step::default();
        step.hold();
        let fired = Arc::new(AtomicUsize::new(0));
        for kind in ["1", "2", "3"] {
            step.send(
                &kernel,
                "/user/r",
                None,
                Envelope::new(None, kind, Vec::new()),
            );
        }
        step.defer(&kernel, Count(fired.clone()));
        assert!(mailbox.try_next().is_err(), "nothing before the commit");
        assert_eq!(fired.load(Ordering::SeqCst), 0);
        assert_eq!(step.held_sends(), 3);
        release(&kernel, step.take());
        let kinds: Vec<String> = std::iter::from_fn(|| match mailbox.try_next() {
            Ok(UserMsg::Message(e)) => Some(e.kind),
            _ => None,
        })
        .collect();
        assert_eq!(kinds, ["1", "2", "3"]);
        assert_eq!(fired.load(Ordering::SeqCst), 1);
        assert!(step.take().is_empty(), "released effects are gone");
        assert!(step.holds(), "a held step stays held");
    }

    #[test]
    fn discarded_effects_never_take_place() {
        let (_rt, kernel, mut mailbox) = setup();
        let mut step = Step::held(true);
        let fired = Arc::new(AtomicUsize::new(0));
        step.send(
            &kernel,
            "/user/r",
            None,
            Envelope::new(None, "x", Vec::new()),
        );
        step.defer(&kernel, Count(fired.clone()));
        discard(step.take());
        assert!(mailbox.try_next().is_err());
        assert_eq!(fired.load(Ordering::SeqCst), 0);
    }
}
