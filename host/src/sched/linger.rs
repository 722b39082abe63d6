//! Lingering: a task that waits for something another task on its worker is about to produce
//! (a pulled receive waiting for the reply to the message it just sent) stays suspended while
//! its worker has other work, for a bounded number of polls.
//!
//! A ping-pong pair on one worker then never leaves its guest calls: each waits inside its
//! call for the other's reply instead of returning to the host and being called again. A task
//! that waits while its worker runs dry, or while its worker polls [`LINGER_POLLS`] other
//! tasks, is woken and sees its linger [`Linger::ended`]: it finishes its call and sleeps at
//! its idle wait as usual, where its fiber stack can be given back.
//!
//! Invariants (tested below):
//! - A worker never parks while a task waits in a linger on it, and a linger's wait lasts
//!   [`LINGER_POLLS`] polls of other tasks, give or take one checking period: the worker checks
//!   every [`LINGER_POLLS`] polls.
//! - A task does not linger while others wait in its worker's queue: it would only delay them.
//! - Only a worker's own tasks linger on it: off the workers (the API, tokio, tests) a task
//!   does not linger, and the waiter goes on at once.
//! - An ended linger stays ended: the call it belongs to returns.
//! - Only a waiting linger is woken when it ends, behind the worker's own work and waking no
//!   other worker: one that took what it waited for is left alone, so a ping-pong pair is not
//!   woken twice nor split across workers.
//! - The waker its worker wakes when the linger ends is the one of its latest wait. Waiting
//!   again with the same waker takes no lock: only the worker's thread touches a linger's
//!   stored waker (its waits, and the worker ending it).

use std::cell::{Cell, OnceCell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;

use crossbeam_deque::Stealer;

use super::task::Task;

/// Polls of other tasks a linger may wait through before its worker ends it.
pub(crate) const LINGER_POLLS: u64 = 64;

/// `Slot::since` of a linger that is not waiting.
const NOT_WAITING: u64 = u64::MAX;

/// What a linger and the worker it waits on share.
struct Slot {
    /// The worker it is registered on.
    worker: AtomicUsize,
    /// That worker's poll count when the wait began; [`NOT_WAITING`] while it does not wait.
    since: AtomicU64,
    ended: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

/// How a wait in a linger went.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// It waits: its waker is woken by its worker if the linger ends first.
    Waiting,
    /// It does not wait: the linger ended, or the task is not on a worker.
    Over,
}

/// A worker's lingers: made by its thread ([`enter`]), reached by the tasks it polls.
struct Lingers {
    index: usize,
    /// The worker's own queue, to see whether others wait in it.
    queue: Stealer<Arc<Task>>,
    /// The lingers registered on it.
    slots: RefCell<Vec<Arc<Slot>>>,
    /// Tasks it polled so far.
    polls: Cell<u64>,
    /// Set while it wakes the tasks of the lingers it ends.
    ending: Cell<bool>,
}

thread_local! {
    static WORKER: OnceCell<Lingers> = const { OnceCell::new() };
}

/// Makes this thread worker `index` (its queue seen through `queue`) for lingers.
pub(super) fn enter(index: usize, queue: Stealer<Arc<Task>>) {
    WORKER.with(|worker| {
        let _ = worker.set(Lingers {
            index,
            queue,
            slots: RefCell::new(Vec::new()),
            polls: Cell::new(0),
            ending: Cell::new(false),
        });
    });
}

/// Whether a task polled now could linger: it runs on a worker.
pub(crate) fn can_linger() -> bool {
    WORKER.with(|worker| worker.get().is_some())
}

/// One call's linger: it may wait several times, once for each thing it waits for.
pub(crate) struct Linger {
    slot: Option<Arc<Slot>>,
    /// Which waker its slot holds (the waker's data and vtable addresses), so waiting again
    /// with the same one takes no lock: only its worker's thread touches the slot's waker
    /// (this wait, and `end`, which ends the linger as it takes it).
    stored: Option<(usize, usize)>,
    /// Set when it would have waited behind others: it is over.
    refused: bool,
}

impl Linger {
    /// A linger that has not waited yet.
    pub(crate) fn new() -> Self {
        Linger {
            slot: None,
            stored: None,
            refused: false,
        }
    }

    /// Waits on the current worker, `waker` to be woken if the linger ends first.
    pub(crate) fn wait(&mut self, waker: &Waker) -> Wait {
        if self.ended() {
            return Wait::Over;
        }
        WORKER.with(|worker| {
            let Some(worker) = worker.get() else {
                return Wait::Over;
            };
            if !worker.queue.is_empty() {
                // Others wait their turn here: a wait would only delay them, and what this
                // task waits for comes to its idle wait as well.
                self.refused = true;
                return Wait::Over;
            }
            let slot = match &self.slot {
                Some(slot) if slot.worker.load(Ordering::Relaxed) == worker.index => slot.clone(),
                _ => {
                    // First wait, or on another worker than the last one: registered here.
                    let slot = Arc::new(Slot {
                        worker: AtomicUsize::new(worker.index),
                        since: AtomicU64::new(NOT_WAITING),
                        ended: AtomicBool::new(false),
                        waker: Mutex::new(None),
                    });
                    worker.slots.borrow_mut().push(slot.clone());
                    self.slot = Some(slot.clone());
                    self.stored = None;
                    slot
                }
            };
            let identity = (waker.data() as usize, waker.vtable() as *const _ as usize);
            if self.stored != Some(identity) {
                let mut stored = slot.waker.lock().unwrap_or_else(|p| p.into_inner());
                match &mut *stored {
                    Some(old) => old.clone_from(waker),
                    none => *none = Some(waker.clone()),
                }
                drop(stored);
                self.stored = Some(identity);
            }
            if slot.since.load(Ordering::Relaxed) == NOT_WAITING {
                slot.since.store(worker.polls.get(), Ordering::Relaxed);
            }
            Wait::Waiting
        })
    }

    /// It got what it waited for: its wait is over, the linger goes on.
    pub(crate) fn resumed(&self) {
        if let Some(slot) = &self.slot {
            slot.since.store(NOT_WAITING, Ordering::Relaxed);
        }
    }

    /// Whether it is over: its worker ended it, or it found others waiting their turn.
    pub(crate) fn ended(&self) -> bool {
        self.refused
            || self
                .slot
                .as_ref()
                .is_some_and(|slot| slot.ended.load(Ordering::Acquire))
    }
}

/// Which worker thread this is (an id no other live worker of any scheduler has) and how many
/// tasks it has polled so far; off the workers none. Two equal readings were taken within one
/// poll of one task, with no other task run between them.
pub(crate) fn poll_mark() -> Option<(usize, u64)> {
    WORKER.with(|worker| {
        worker
            .get()
            .map(|w| (std::ptr::from_ref(w) as usize, w.polls.get()))
    })
}

/// Counts a poll of this worker; every [`LINGER_POLLS`] of them, ends the lingers that waited
/// that long.
pub(super) fn polled() {
    WORKER.with(|worker| {
        if let Some(worker) = worker.get() {
            let polls = worker.polls.get() + 1;
            worker.polls.set(polls);
            if polls.is_multiple_of(LINGER_POLLS) {
                worker.end(false);
            }
        }
    });
}

/// Ends the lingers waiting on this worker, all of them as it runs dry; true if it woke a task.
pub(super) fn run_dry() -> bool {
    WORKER.with(|worker| worker.get().is_some_and(|worker| worker.end(true)))
}

/// Whether this worker is waking the tasks of the lingers it ends: they queue behind its own
/// work and wake no other worker.
pub(super) fn ending() -> bool {
    WORKER.with(|worker| worker.get().is_some_and(|worker| worker.ending.get()))
}

/// Forgets this worker's lingers (it leaves).
pub(super) fn leave() {
    WORKER.with(|worker| {
        if let Some(worker) = worker.get() {
            worker.slots.borrow_mut().clear();
        }
    });
}

impl Lingers {
    /// Ends the lingers waiting here (all of them if it ran `dry`, else those that waited
    /// [`LINGER_POLLS`] polls or more) and wakes their tasks; true if it woke one.
    fn end(&self, dry: bool) -> bool {
        let polls = self.polls.get();
        let mut woken = Vec::new();
        self.slots.borrow_mut().retain(|slot| {
            // Its call is over, or it lingers on another worker now.
            if Arc::strong_count(slot) == 1 || slot.worker.load(Ordering::Relaxed) != self.index {
                return false;
            }
            let since = slot.since.load(Ordering::Relaxed);
            if since == NOT_WAITING || (!dry && polls - since < LINGER_POLLS) {
                return true;
            }
            slot.ended.store(true, Ordering::Release);
            if let Some(waker) = slot.waker.lock().unwrap_or_else(|p| p.into_inner()).take() {
                woken.push(waker);
            }
            false
        });
        let any = !woken.is_empty();
        self.ending.set(true);
        for waker in woken {
            waker.wake();
        }
        self.ending.set(false);
        any
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, mpsc};
    use std::task::{Poll, Waker};
    use std::time::Duration;

    use super::{LINGER_POLLS, Linger, Wait, poll_mark};
    use crate::sched::tests::{Counting, scheduler, wait_for};

    const DEADLINE: Duration = Duration::from_secs(20);

    /// Lingers until the linger ends; returns how many times it was polled.
    async fn linger_to_the_end() -> usize {
        let mut linger = Linger::new();
        let mut polls = 0;
        poll_fn(|cx| {
            polls += 1;
            match linger.wait(cx.waker()) {
                Wait::Waiting => Poll::Pending,
                Wait::Over => Poll::Ready(()),
            }
        })
        .await;
        assert!(linger.ended(), "it ended, not refused");
        polls
    }

    #[test]
    fn off_the_workers_nothing_lingers() {
        let mut linger = Linger::new();
        assert_eq!(linger.wait(Waker::noop()), Wait::Over);
        assert!(!linger.ended());
    }

    #[test]
    fn a_poll_mark_holds_within_one_poll_and_changes_when_another_task_ran() {
        assert_eq!(poll_mark(), None, "off the workers");
        let (_runtime, scheduler) = scheduler(1);
        let (tx, rx) = mpsc::channel();
        let other = Arc::new(AtomicBool::new(false));
        let ran = other.clone();
        scheduler.spawn(async move {
            let first = poll_mark();
            let again = poll_mark();
            // Another task on this worker runs while this one yields.
            tokio::task::yield_now().await;
            let after = poll_mark();
            let _ = tx.send((first, again, after, ran.load(Ordering::Acquire)));
        });
        scheduler.spawn(async move { other.store(true, Ordering::Release) });
        let (first, again, after, other_ran) = rx.recv_timeout(DEADLINE).expect("the task ran");
        assert!(first.is_some(), "a worker has a mark");
        assert_eq!(first, again, "one poll, one mark");
        assert!(other_ran, "the other task ran while this one yielded");
        assert_eq!(after.map(|m| m.0), first.map(|m| m.0), "one worker");
        assert_ne!(after, first, "a later poll has a later mark");
    }

    #[test]
    fn a_linger_ends_once_its_worker_runs_dry() {
        let (_runtime, scheduler) = scheduler(1);
        let (tx, rx) = mpsc::channel();
        scheduler.spawn(async move {
            let polls = linger_to_the_end().await;
            let _ = tx.send(polls);
        });
        // Nothing else runs: the worker runs dry right after the first poll and ends it.
        let polls = rx.recv_timeout(DEADLINE).expect("the linger ended");
        assert_eq!(polls, 2, "polled once to linger, once when it ended");
    }

    /// Where a task of a pair keeps its waker for the other to wake.
    #[derive(Default)]
    struct Parked(Mutex<Option<Waker>>);

    impl Parked {
        fn wake(&self) {
            if let Some(waker) = self.0.lock().unwrap().take() {
                waker.wake();
            }
        }
    }

    /// One of a pair that keeps its worker busy through the LIFO slot, as a ping-pong pair of
    /// actors does: each poll wakes the other and waits, counting the polls, until `stop`.
    async fn play(
        me: Arc<Parked>,
        other: Arc<Parked>,
        polls: Arc<AtomicUsize>,
        stop: Arc<AtomicBool>,
    ) {
        poll_fn(|cx| {
            if stop.load(Ordering::Relaxed) {
                other.wake();
                return Poll::Ready(());
            }
            polls.fetch_add(1, Ordering::Relaxed);
            *me.0.lock().unwrap() = Some(cx.waker().clone());
            other.wake();
            Poll::Pending
        })
        .await;
    }

    #[test]
    fn a_busy_worker_ends_a_linger_after_a_bounded_number_of_polls() {
        let (_runtime, scheduler) = scheduler(1);
        let (a, b) = (Arc::new(Parked::default()), Arc::new(Parked::default()));
        let polls = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        scheduler.spawn(play(a.clone(), b.clone(), polls.clone(), stop.clone()));
        scheduler.spawn(play(b.clone(), a.clone(), polls.clone(), stop.clone()));
        // The pair starts itself (the second's first poll wakes the first) and goes on in the
        // LIFO slot; the lingering task comes from outside once it plays.
        let (tx, rx) = mpsc::channel();
        let seen = polls.clone();
        wait_for("the pair to start", || polls.load(Ordering::Relaxed) >= 2);
        drop((a, b));
        scheduler.spawn(async move {
            let before = seen.load(Ordering::Relaxed);
            linger_to_the_end().await;
            let _ = tx.send(seen.load(Ordering::Relaxed) - before);
        });
        let others = rx.recv_timeout(DEADLINE).expect("the linger ended");
        stop.store(true, Ordering::Relaxed);
        let most = 2 * LINGER_POLLS as usize + crate::sched::LIFO_RUN as usize;
        assert!(
            (LINGER_POLLS as usize - 1..=most).contains(&others),
            "the worker polled {others} others while a task lingered"
        );
    }

    #[test]
    fn a_task_does_not_linger_while_others_wait_in_its_workers_queue() {
        let (_runtime, scheduler) = scheduler(1);
        let (polls, stop) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (counted, hog_stop) = (polls.clone(), stop.clone());
        // A task that yields at every poll: it always waits in the queue when another runs.
        scheduler.spawn(async move {
            while !hog_stop.load(Ordering::Relaxed) {
                counted.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        });
        while polls.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        let (tx, rx) = mpsc::channel();
        scheduler.spawn(async move {
            let _ = tx.send(linger_to_the_end().await);
        });
        let lingered = rx.recv_timeout(DEADLINE).expect("the linger ended");
        stop.store(true, Ordering::Relaxed);
        assert_eq!(lingered, 1, "over at its first poll");
    }

    #[test]
    fn an_ended_linger_wakes_the_waker_of_its_latest_wait() {
        let (_runtime, scheduler) = scheduler(1);
        let (tx, rx) = mpsc::channel();
        scheduler.spawn(async move {
            let mut linger = Linger::new();
            let mut polls = 0;
            let mut other: Option<Arc<Counting>> = None;
            poll_fn(|cx| {
                polls += 1;
                match polls {
                    // The task's own waker twice (the second wait stores nothing new), each
                    // time woken at once as a reply would wake it.
                    1 | 2 => {
                        assert_eq!(linger.wait(cx.waker()), Wait::Waiting);
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    }
                    // Then another waker: the one the worker must wake when it runs dry.
                    3 => {
                        let (counting, waker) = Counting::new(cx.waker().clone());
                        other = Some(counting);
                        assert_eq!(linger.wait(&waker), Wait::Waiting);
                        Poll::Pending
                    }
                    _ => {
                        assert_eq!(linger.wait(cx.waker()), Wait::Over);
                        Poll::Ready(())
                    }
                }
            })
            .await;
            let woken = other.map(|o| o.woken());
            let _ = tx.send((polls, woken));
        });
        assert_eq!(rx.recv_timeout(DEADLINE), Ok((4, Some(1))));
    }

    #[test]
    fn a_linger_that_keeps_getting_what_it_waits_for_goes_on() {
        let (_runtime, scheduler) = scheduler(1);
        let (tx, rx) = mpsc::channel();
        // Waits, is woken by itself as a reply would wake it, takes it: far more polls than
        // the bound, and the linger never ends while the worker is busy with it.
        scheduler.spawn(async move {
            let mut linger = Linger::new();
            for _ in 0..10 * LINGER_POLLS {
                let mut waited = false;
                poll_fn(|cx| {
                    if waited {
                        linger.resumed();
                        return Poll::Ready(());
                    }
                    assert_eq!(linger.wait(cx.waker()), Wait::Waiting);
                    waited = true;
                    cx.waker().wake_by_ref();
                    Poll::Pending
                })
                .await;
            }
            let _ = tx.send(linger.ended());
        });
        assert_eq!(rx.recv_timeout(DEADLINE), Ok(false));
    }
}
