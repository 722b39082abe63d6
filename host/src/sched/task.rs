//! One scheduled future and its waker: a small state machine that decides who may poll it.
//!
//! ```text
//!            wake                 popped by a worker
//!   IDLE ------------> SCHEDULED ------------------> RUNNING --(ready or panic)--> DONE
//!    ^                                                 |  ^
//!    |                 pending, not woken              |  | wake while running
//!    +-------------------------------------------------+  v
//!                                                    NOTIFIED --(pending)--> SCHEDULED (requeued)
//! ```
//!
//! Invariants:
//! - A task is in at most one queue at a time: only the transition to `SCHEDULED` queues it,
//!   and only the worker that popped it moves it out of `SCHEDULED`.
//! - Only that worker polls it, so a future is never polled concurrently; the lock around it
//!   is never contended.
//! - A wake is never lost: a wake while the future runs marks it `NOTIFIED`, and the worker
//!   requeues it (at the back of its queue, so a task that wakes itself yields).
//! - A panic in a poll ends that task only: its future is dropped and the worker goes on.
//! - A task counts as live from its creation until it finishes, is cancelled or is dropped,
//!   exactly once.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_util::task::{ArcWake, waker_ref};

/// A future the scheduler runs to completion.
pub(super) type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

const IDLE: u8 = 0;
const SCHEDULED: u8 = 1;
const RUNNING: u8 = 2;
const NOTIFIED: u8 = 3;
const DONE: u8 = 4;

/// How one poll ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The future finished (or panicked): the task is gone.
    Done,
    /// The future waits for a wake.
    Idle,
    /// The future was woken while it ran: queue it again, behind the others.
    Yielded,
}

/// Where a task goes when woken, and whom it tells when it ends: its scheduler.
pub(super) trait Home: Send + Sync + 'static {
    /// Queues a woken task.
    fn schedule(&self, task: Arc<Task>);
    /// A task ended (finished, panicked, cancelled or dropped unfinished).
    fn task_done(&self);
}

/// A spawned future with its scheduling state.
pub(super) struct Task {
    state: AtomicU8,
    future: Mutex<Option<BoxFuture>>,
    home: Arc<dyn Home>,
}

impl Task {
    /// A task ready to be queued for its first poll; `home` counted it live already.
    pub(super) fn new(home: Arc<dyn Home>, future: BoxFuture) -> Arc<Task> {
        Arc::new(Task {
            state: AtomicU8::new(SCHEDULED),
            future: Mutex::new(Some(future)),
            home,
        })
    }

    /// Records a wake; true if the caller must queue the task.
    fn notify(&self) -> bool {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let next = match state {
                IDLE => SCHEDULED,
                RUNNING => NOTIFIED,
                _ => return false,
            };
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return next == SCHEDULED,
                Err(actual) => state = actual,
            }
        }
    }

    /// Polls the future once; called only by the worker that popped the task.
    pub(super) fn run(self: &Arc<Self>) -> Outcome {
        debug_assert_eq!(self.state.load(Ordering::Acquire), SCHEDULED);
        self.state.store(RUNNING, Ordering::Release);
        // Borrowed from this `Arc`: no reference count moves unless the future keeps a clone.
        let waker = waker_ref(self);
        let mut cx = Context::from_waker(&waker);
        let mut slot = self.future.lock().unwrap_or_else(|p| p.into_inner());
        let Some(future) = slot.as_mut() else {
            drop(slot);
            self.finish(None);
            return Outcome::Done;
        };
        match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx))) {
            Ok(Poll::Pending) => {
                drop(slot);
                match self.state.compare_exchange(
                    RUNNING,
                    IDLE,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => Outcome::Idle,
                    Err(_) => {
                        self.state.store(SCHEDULED, Ordering::Release);
                        Outcome::Yielded
                    }
                }
            }
            Ok(Poll::Ready(())) => {
                self.finish(slot.take());
                Outcome::Done
            }
            Err(_) => {
                tracing::error!("a scheduled task panicked; it is dropped");
                self.finish(slot.take());
                Outcome::Done
            }
        }
    }

    /// Ends the task: later wakes find it done, and its future is dropped here.
    fn finish(&self, future: Option<BoxFuture>) {
        if self.state.swap(DONE, Ordering::AcqRel) != DONE {
            self.home.task_done();
        }
        if catch_unwind(AssertUnwindSafe(move || drop(future))).is_err() {
            tracing::error!("dropping a finished task panicked");
        }
    }

    /// Drops the future of a task that will never run again (the scheduler closed).
    pub(super) fn cancel(&self) {
        let future = match self.future.try_lock() {
            Ok(mut slot) => slot.take(),
            Err(_) => return,
        };
        self.finish(future);
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // A task dropped unfinished (nothing could wake it any more) ends here.
        if *self.state.get_mut() != DONE {
            self.home.task_done();
        }
    }
}

impl ArcWake for Task {
    fn wake(self: Arc<Self>) {
        if self.notify() {
            let home = self.home.clone();
            home.schedule(self);
        }
    }

    fn wake_by_ref(arc_self: &Arc<Self>) {
        if arc_self.notify() {
            arc_self.home.schedule(arc_self.clone());
        }
    }
}
