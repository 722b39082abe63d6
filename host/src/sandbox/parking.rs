//! Parking an idle actor's fiber stack, so that a sweep can give its pages back.
//!
//! A store keeps the fiber stack of its first call for its whole life (wasmtime has no call to
//! give it back), and an actor's calls touch about two pages of it: 8 KiB of every awake idle
//! actor. [`Parking`] wraps an actor's task: it records the stacks its stores make (they are
//! made inside the task's polls, see [`arena::made_during`]), parks them when the task goes to
//! sleep at its idle wait ([`parked`]), and unparks them when the task is polled again. A
//! [`Sweeper`] thread sweeps the stack arena every period, so a stack parked for a whole period
//! has its pages given back; the next call touches fresh zero pages (a few microseconds).
//!
//! Invariants:
//! - A stack is parked only while its task is suspended at the idle wait, where no call of its
//!   stores is running or suspended, and it is unparked before the task's code runs again.
//! - A task owns the stores made in its polls and nobody else calls into them: a cell makes,
//!   calls and drops its instances itself.
//! - Stacks made outside a parking task's poll (deploy-time checks, tests) are never parked,
//!   so never released.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::arena::{self, StackState, Stacks};
use super::periodic::Periodic;

thread_local! {
    /// Set when the task being polled went to sleep at its idle wait.
    static PARKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// An actor's task, whose stores' fiber stacks are parked while it sleeps at its idle wait.
pub(crate) struct Parking<F> {
    inner: F,
    /// The stacks its stores made (dropped ones are pruned when it parks).
    stacks: Vec<Arc<StackState>>,
    parked: bool,
}

impl<F> Parking<F> {
    /// Wraps an actor's task.
    pub(crate) fn new(inner: F) -> Self {
        Parking {
            inner,
            stacks: Vec::new(),
            parked: false,
        }
    }
}

impl<F: Future> Future for Parking<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is never moved out of the pinned `Parking`; the other fields are
        // never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above, `inner` stays where it is.
        let mut inner = unsafe { Pin::new_unchecked(&mut this.inner) };
        if this.parked {
            this.parked = false;
            for stack in &this.stacks {
                stack.unpark();
            }
        }
        PARKED.with(|p| p.set(false));
        let poll = arena::made_during(&mut this.stacks, || inner.as_mut().poll(cx));
        if poll.is_pending() && PARKED.with(|p| p.replace(false)) {
            this.stacks.retain(|stack| !stack.is_dead());
            for stack in &this.stacks {
                stack.park();
            }
            this.parked = !this.stacks.is_empty();
        }
        poll
    }
}

impl<F> Drop for Parking<F> {
    fn drop(&mut self) {
        // A task dropped asleep (at shutdown) drops its stores next: their stacks are taken
        // back first, so no release runs while a store is being torn down.
        if self.parked {
            for stack in &self.stacks {
                stack.unpark();
            }
        }
    }
}

/// The idle wait of a task: while `wait` is pending, the task's stacks may be released.
pub(crate) fn parked<F: Future>(wait: F) -> Parked<F> {
    Parked { wait }
}

/// See [`parked`].
pub(crate) struct Parked<F> {
    wait: F,
}

impl<F: Future> Future for Parked<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `wait` is never moved out of the pinned `Parked`.
        let wait = unsafe { self.map_unchecked_mut(|p| &mut p.wait) };
        let poll = wait.poll(cx);
        if poll.is_pending() {
            // The task returns pending from here straight up to its `Parking`.
            PARKED.with(|p| p.set(true));
        }
        poll
    }
}

/// A thread that sweeps the stack arena every period until dropped.
pub(crate) struct Sweeper {
    /// Held for its drop, which ends the thread.
    _thread: Periodic,
}

impl Sweeper {
    /// Sweeps `stacks` every `period`: a stack parked for a whole period is released.
    pub(crate) fn start(stacks: Arc<Stacks>, period: Duration) -> std::io::Result<Self> {
        let sweeper = Periodic::start("mote-stacks", period, move || {
            let released = stacks.sweep();
            if released > 0 {
                tracing::trace!(released, "idle fiber stacks given back");
            }
            true
        })?;
        Ok(Sweeper { _thread: sweeper })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use wasmtime::StackCreator;

    /// A task that makes a stack, then waits twice: at its idle wait, then elsewhere.
    async fn task(stacks: Arc<Stacks>, idle: Arc<AtomicBool>, busy: Arc<AtomicBool>) {
        let _stack = stacks.new_stack(4096, true).unwrap();
        parked(until(idle)).await;
        until(busy).await;
    }

    /// Pending until `flag` is set.
    async fn until(flag: Arc<AtomicBool>) {
        std::future::poll_fn(|_| match flag.load(Ordering::Relaxed) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        })
        .await
    }

    #[test]
    fn a_task_parks_its_stacks_at_its_idle_wait_only() {
        let stacks = Arc::new(Stacks::new(16 << 10));
        let (idle, busy) = (Arc::new(AtomicBool::new(false)), Arc::default());
        let mut task = std::pin::pin!(Parking::new(task(
            stacks.clone(),
            idle.clone(),
            Arc::clone(&busy)
        )));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(task.as_mut().poll(&mut cx).is_pending());
        assert_eq!(task.stacks.len(), 1, "the stack its store made is its own");
        // Parked at the idle wait: two sweeps give it back.
        stacks.sweep();
        assert_eq!(stacks.sweep(), 1);
        // Polled again, it takes its stack back before its code runs; still idle, it parks
        // again, and again the first sweep only sees it.
        assert!(task.as_mut().poll(&mut cx).is_pending());
        assert_eq!(stacks.sweep(), 0);
        idle.store(true, Ordering::Relaxed);
        // Waiting anywhere but at the idle wait (a call, a yield), it stays busy.
        assert!(task.as_mut().poll(&mut cx).is_pending());
        for _ in 0..3 {
            assert_eq!(stacks.sweep(), 0);
        }
        busy.store(true, Ordering::Relaxed);
        assert!(task.as_mut().poll(&mut cx).is_ready());
        assert_eq!(
            stacks.stats(),
            arena::StackStats {
                live: 0,
                released: 0,
                releases: 1
            }
        );
    }
}
