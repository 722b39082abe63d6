//! The actor scheduler: a few worker threads that poll actor cells, built for message passing.
//!
//! Tokio stays for I/O and time (the control socket, timers, asks' deadlines, the committer's
//! hand-off); the cells, where nearly all the work is, run here. Each cell is one [`Task`]: a
//! future and a small state machine (`task.rs`), polled by whichever worker pops it.
//!
//! How work moves:
//! - Each worker has a **LIFO slot** and a **local FIFO queue**. A task woken on a worker (an
//!   actor's message to another) goes to that worker's LIFO slot, so the receiver runs next,
//!   on the same core, with no system call: a request/reply pair stays on one worker. What the
//!   slot held moves to the back of the local queue.
//! - A task woken from outside the workers (the API, a tokio timer, the committer) goes to the
//!   shared **injector**, and one sleeping worker is woken if any sleeps.
//! - **Only idle workers steal**: a worker with nothing local takes a batch from the injector,
//!   then from another worker's local queue. The LIFO slot is never stolen.
//! - A worker that runs out of work **spins briefly** (yielding its core to others between
//!   spins), then parks. Work that lands in a local queue while another worker sleeps wakes
//!   that worker, so surplus is shared; the LIFO slot wakes nobody.
//! - A task may **linger** (`linger.rs`): wait on its worker, inside a guest call, for what the
//!   task in the LIFO slot is about to send it. A worker ends the lingers on it before it runs
//!   dry and after a bounded number of polls, so a worker never sleeps with a lingering task,
//!   and a lingering task never holds up others for long.
//!
//! Invariants (tested below):
//! - **Fairness.** A task woken while it runs (an epoch yield, a cell's throughput batch)
//!   goes to the back of the local queue, behind what waits in the injector, which it takes
//!   in first: a task that hogs its time slices cannot delay work from outside by more than
//!   one slice. The LIFO slot runs at most [`LIFO_RUN`] times in a
//!   row before the local queue gets a turn, and every [`INJECTOR_EVERY`]th pick looks at the
//!   injector first, so neither a ping-pong pair nor local work can starve anyone.
//! - **A pair stays together.** A task that yields with nothing waiting in its worker's
//!   queue (nothing injected either) stays on that worker and wakes no one: in the LIFO slot
//!   if that is empty, else in a **yielded slot** right behind it (the partner it just woke
//!   waits in the LIFO slot, as a ping-pong pair's does). No other worker takes from either
//!   slot, so a busy actor or a pair whose member yields keeps its core and its warm caches.
//!   Once anything else waits on the worker (in the queue, or a task already held in the
//!   yielded slot), a yielding task goes to the queue and an idle worker is woken to take it:
//!   two busy tasks share one worker for one time slice at most while another is idle. A
//!   LIFO slot past its run still passes through the queue, so the queue's task gets a turn.
//! - **Ordering** is the mailboxes' business: a cell is polled by one worker at a time (see
//!   `task.rs`), so its messages are handled one by one in its mailbox's order wherever it runs.
//! - **No lost wake-up.** A parking worker announces itself (`asleep`), then looks for work
//!   once more; a waker publishes its work, then looks for an announced sleeper. Both sides
//!   order these with sequentially consistent fences, so at least one of them sees the other.
//! - **Exit.** Workers leave once the scheduler is closed and no task is live; tasks still
//!   queued then are dropped unpolled.

mod linger;
mod task;

pub(crate) use self::linger::{Linger, Wait, can_linger, poll_mark};

use std::cell::{Cell, OnceCell};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};

use self::task::{Home, Outcome, Task};

/// Times the LIFO slot may run in a row before the local queue gets a turn.
const LIFO_RUN: u32 = 32;
/// Every this many picks, a worker looks at the injector before its own queue.
const INJECTOR_EVERY: u32 = 61;
/// How long an idle worker looks for work before it parks, yielding its core between looks:
/// a reply or the next request usually comes sooner, and parking then waking costs two
/// system calls and the wake-up latency of a thread.
const SPIN_FOR: Duration = Duration::from_micros(100);

/// A handle to the scheduler: cheap to clone; [`Scheduler::close`] lets its workers leave.
#[derive(Clone)]
pub(crate) struct Scheduler {
    shared: Arc<Shared>,
}

/// What the workers and every task share.
pub(crate) struct Shared {
    injector: Injector<Arc<Task>>,
    stealers: Vec<Stealer<Arc<Task>>>,
    sleepers: Vec<Sleeper>,
    /// Workers announced asleep.
    asleep: AtomicUsize,
    /// Tasks created and not yet finished.
    live: AtomicUsize,
    closed: AtomicBool,
    /// Worker threads that have not left.
    running: AtomicUsize,
}

/// Where a task goes on its worker: a woken one runs next, a new one waits its turn.
#[derive(Clone, Copy)]
enum Slot {
    Lifo,
    Queue,
}

/// A worker as others wake it.
struct Sleeper {
    asleep: AtomicBool,
    thread: OnceLock<Thread>,
}

/// The worker the current thread is, if it is one.
struct Local {
    shared: Arc<Shared>,
    index: usize,
    queue: Worker<Arc<Task>>,
    lifo: Cell<Option<Arc<Task>>>,
    /// A task that yielded while the LIFO slot held another and nothing else waited: it runs
    /// after the slot's task and before the queue, and no other worker takes it.
    yielded: Cell<Option<Arc<Task>>>,
}

thread_local! {
    static LOCAL: OnceCell<Local> = const { OnceCell::new() };
}

impl Scheduler {
    /// Starts `workers` threads (at least one), each inside `runtime`'s context so that cells
    /// can use tokio's time and spawn I/O work.
    pub(crate) fn start(workers: usize, runtime: tokio::runtime::Handle) -> std::io::Result<Self> {
        let workers = workers.max(1);
        let queues: Vec<Worker<Arc<Task>>> = (0..workers).map(|_| Worker::new_fifo()).collect();
        let shared = Arc::new(Shared {
            injector: Injector::new(),
            stealers: queues.iter().map(Worker::stealer).collect(),
            sleepers: (0..workers)
                .map(|_| Sleeper {
                    asleep: AtomicBool::new(false),
                    thread: OnceLock::new(),
                })
                .collect(),
            asleep: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            running: AtomicUsize::new(workers),
        });
        for (index, queue) in queues.into_iter().enumerate() {
            let mine = shared.clone();
            let runtime = runtime.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("mote-worker-{index}"))
                .spawn(move || {
                    let _context = runtime.enter();
                    work(Local {
                        shared: mine,
                        index,
                        queue,
                        lifo: Cell::new(None),
                        yielded: Cell::new(None),
                    });
                });
            let thread = match spawned {
                Ok(thread) => thread,
                Err(e) => {
                    // The workers already started leave: nothing will ever be spawned on them.
                    shared.running.fetch_sub(workers - index, Ordering::AcqRel);
                    Scheduler {
                        shared: shared.clone(),
                    }
                    .close();
                    return Err(e);
                }
            };
            // The thread may park before this is set: a waker that finds no handle yet skips
            // it, and the worker's park then returns at once on its next unpark.
            let _ = shared.sleepers[index].thread.set(thread.thread().clone());
        }
        Ok(Scheduler { shared })
    }

    /// Runs `future` to completion on the workers.
    pub(crate) fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) {
        self.shared.live.fetch_add(1, Ordering::AcqRel);
        let task = Task::new(self.shared.clone(), Box::pin(future));
        if self.shared.closed.load(Ordering::Acquire) {
            task.cancel();
            return;
        }
        self.shared.enqueue(task, Slot::Queue);
    }

    /// Lets the workers leave once no task is live (tasks finish on their own first).
    pub(crate) fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.wake_all();
    }

    /// Tasks created and not yet finished.
    #[cfg(test)]
    fn live(&self) -> usize {
        self.shared.live.load(Ordering::Acquire)
    }

    /// Workers parked now.
    #[cfg(test)]
    fn asleep(&self) -> usize {
        self.shared.asleep.load(Ordering::Acquire)
    }

    /// Worker threads still running.
    #[cfg(test)]
    fn running(&self) -> usize {
        self.shared.running.load(Ordering::Acquire)
    }
}

impl Home for Shared {
    /// Queues a woken task: on the current worker's LIFO slot if this thread is one of ours,
    /// else on the injector (waking a sleeper).
    fn schedule(&self, task: Arc<Task>) {
        self.enqueue(task, Slot::Lifo);
    }

    /// A task ended: the last one after closing lets the workers go.
    fn task_done(&self) {
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 && self.closed.load(Ordering::Acquire) {
            self.wake_all();
        }
    }
}

impl Shared {
    /// Queues `task` on this thread's worker (in `slot`) if it is one of ours, else on the
    /// injector; wakes a sleeper when work is left for others.
    fn enqueue(&self, task: Arc<Task>, slot: Slot) {
        let task = LOCAL.with(|local| match local.get() {
            Some(local) if std::ptr::eq(Arc::as_ptr(&local.shared), self) => {
                if linger::ending() {
                    // An ended linger waits behind this worker's own work, and wakes nobody:
                    // what it has left to do is return.
                    local.queue.push(task);
                    return None;
                }
                let surplus = match slot {
                    Slot::Lifo => local.lifo.replace(Some(task)),
                    Slot::Queue => Some(task),
                };
                if let Some(surplus) = surplus {
                    local.queue.push(surplus);
                    self.wake_one();
                }
                None
            }
            _ => Some(task),
        });
        if let Some(task) = task {
            self.injector.push(task);
            self.wake_one();
        }
    }

    /// Wakes one sleeping worker, if any sleeps.
    fn wake_one(&self) {
        fence(Ordering::SeqCst);
        if self.asleep.load(Ordering::SeqCst) == 0 {
            return;
        }
        for sleeper in &self.sleepers {
            if sleeper.wake() {
                self.asleep.fetch_sub(1, Ordering::SeqCst);
                return;
            }
        }
    }

    fn wake_all(&self) {
        fence(Ordering::SeqCst);
        for sleeper in &self.sleepers {
            if sleeper.wake() {
                self.asleep.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    fn finished(&self) -> bool {
        self.closed.load(Ordering::Acquire) && self.live.load(Ordering::Acquire) == 0
    }
}

impl Sleeper {
    /// Wakes this worker if it announced sleep; true if it did.
    fn wake(&self) -> bool {
        if self
            .asleep
            .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return false;
        }
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
        true
    }
}

/// A worker's life: run what it finds, sleep when there is nothing, leave when finished.
fn work(local: Local) {
    linger::enter(local.index, local.queue.stealer());
    LOCAL.with(|slot| {
        if slot.set(local).is_ok()
            && let Some(local) = slot.get()
        {
            local.run();
        }
    });
}

impl Local {
    fn run(&self) {
        let mut picks: u32 = 0;
        let mut lifo_run: u32 = 0;
        loop {
            picks = picks.wrapping_add(1);
            let task = self.next(picks, &mut lifo_run);
            let Some(task) = task else {
                // Run dry: the tasks lingering here go on first (they stop lingering).
                if linger::run_dry() {
                    continue;
                }
                if !self.idle() {
                    break;
                }
                continue;
            };
            let outcome = task.run();
            linger::polled();
            if outcome == Outcome::Yielded {
                // A task that yields may have run a whole time slice: work from outside, which
                // the pick count alone would reach only after many such slices, goes first.
                if let Some(outside) = self.take_injected() {
                    self.queue.push(outside);
                }
                self.requeue(task);
            }
        }
        // Closed with nothing live: whatever is still queued never runs.
        linger::leave();
        while let Some(task) = self.queue.pop() {
            task.cancel();
        }
        for slot in [&self.lifo, &self.yielded] {
            if let Some(task) = slot.take() {
                task.cancel();
            }
        }
        self.shared.running.fetch_sub(1, Ordering::AcqRel);
    }

    /// The next task to poll, in fairness order.
    fn next(&self, picks: u32, lifo_run: &mut u32) -> Option<Arc<Task>> {
        if picks.is_multiple_of(INJECTOR_EVERY)
            && let Some(task) = self.take_injected()
        {
            return Some(task);
        }
        if *lifo_run < LIFO_RUN {
            if let Some(task) = self.lifo.take() {
                *lifo_run += 1;
                return Some(task);
            }
        } else if let Some(task) = self.lifo.take() {
            self.queue.push(task);
        }
        *lifo_run = 0;
        if let Some(task) = self.yielded.take() {
            return Some(task);
        }
        if let Some(task) = self.queue.pop() {
            return Some(task);
        }
        self.steal()
    }

    /// Queues a task that yielded. With nothing in the queue it stays on this worker, where no
    /// other worker takes it, and wakes nobody: in the LIFO slot if that is empty, else (the
    /// partner it just woke waits there, as in a ping-pong pair) right behind it. Moving it
    /// would cost its warm caches and split the pair. With anything else waiting here, or a
    /// task held already, it goes to the back of the queue and an idle worker is woken to
    /// share the work: two busy tasks share a worker for one time slice at most.
    fn requeue(&self, task: Arc<Task>) {
        let held = self.yielded.take();
        if held.is_none() && self.queue.is_empty() {
            match self.lifo.take() {
                None => self.lifo.set(Some(task)),
                Some(partner) => {
                    self.lifo.set(Some(partner));
                    self.yielded.set(Some(task));
                }
            }
            return;
        }
        self.yielded.set(held);
        self.queue.push(task);
        self.shared.wake_one();
    }

    /// Takes work from the injector, then from the other workers.
    fn steal(&self) -> Option<Arc<Task>> {
        if let Some(task) = self.take_injected() {
            return Some(task);
        }
        let n = self.shared.stealers.len();
        for offset in 1..n {
            let victim = &self.shared.stealers[(self.index + offset) % n];
            if let Some(task) = self.steal_from(|q| victim.steal_batch_and_pop(q)) {
                return Some(task);
            }
        }
        None
    }

    /// Takes a batch from the injector into the local queue; returns one of it.
    fn take_injected(&self) -> Option<Arc<Task>> {
        self.steal_from(|q| self.shared.injector.steal_batch_and_pop(q))
    }

    fn steal_from(
        &self,
        mut steal: impl FnMut(&Worker<Arc<Task>>) -> Steal<Arc<Task>>,
    ) -> Option<Arc<Task>> {
        loop {
            match steal(&self.queue) {
                Steal::Success(task) => return Some(task),
                Steal::Empty => return None,
                Steal::Retry => std::hint::spin_loop(),
            }
        }
    }

    fn has_work(&self) -> bool {
        !self.shared.injector.is_empty() || self.shared.stealers.iter().any(|s| !s.is_empty())
    }

    /// Spins, then parks until woken; false once the worker should leave.
    fn idle(&self) -> bool {
        let started = Instant::now();
        let mut spin: u32 = 0;
        loop {
            if self.has_work() {
                return true;
            }
            if self.shared.finished() {
                return false;
            }
            spin += 1;
            if spin.is_multiple_of(8) {
                if started.elapsed() >= SPIN_FOR {
                    break;
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let me = &self.shared.sleepers[self.index];
        me.asleep.store(true, Ordering::SeqCst);
        self.shared.asleep.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !self.has_work() && !self.shared.finished() {
            std::thread::park();
        }
        // Woken, spurious, or work found before parking: withdraw the announcement if a
        // waker has not taken it.
        if me
            .asleep
            .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            self.shared.asleep.fetch_sub(1, Ordering::SeqCst);
        }
        !self.shared.finished()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, mpsc};
    use std::time::{Duration, Instant};

    use super::Scheduler;

    const DEADLINE: Duration = Duration::from_secs(20);

    /// A waker that counts its wakes and passes each on to `inner`.
    pub(crate) struct Counting {
        woken: AtomicUsize,
        inner: std::task::Waker,
    }

    impl Counting {
        /// A counting waker in front of `inner`, and the handle that reads its count.
        pub(crate) fn new(inner: std::task::Waker) -> (Arc<Counting>, std::task::Waker) {
            let counting = Arc::new(Counting {
                woken: AtomicUsize::new(0),
                inner,
            });
            (counting.clone(), std::task::Waker::from(counting))
        }

        /// Wakes so far.
        pub(crate) fn woken(&self) -> usize {
            self.woken.load(Ordering::Relaxed)
        }
    }

    impl std::task::Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.woken.fetch_add(1, Ordering::Relaxed);
            self.inner.wake_by_ref();
        }
    }

    pub(crate) fn scheduler(workers: usize) -> (tokio::runtime::Runtime, Scheduler) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let scheduler = Scheduler::start(workers, runtime.handle().clone()).expect("workers");
        (runtime, scheduler)
    }

    /// Waits until `done` holds, at most the deadline.
    pub(crate) fn wait_for(what: &str, done: impl Fn() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
            std::thread::yield_now();
        }
    }

    /// A future that wakes itself `times` times before it finishes: a busy task that yields.
    async fn yield_times(times: usize) {
        for _ in 0..times {
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn every_spawned_task_runs_to_completion_on_any_number_of_workers() {
        for workers in [1, 2, 4] {
            let (_runtime, scheduler) = scheduler(workers);
            let done = Arc::new(AtomicUsize::new(0));
            for _ in 0..10_000 {
                let done = done.clone();
                scheduler.spawn(async move {
                    yield_times(3).await;
                    done.fetch_add(1, Ordering::Relaxed);
                });
            }
            wait_for("10,000 tasks", || done.load(Ordering::Relaxed) == 10_000);
            wait_for("the tasks to end", || scheduler.live() == 0);
        }
    }

    #[test]
    fn a_task_that_never_stops_yielding_does_not_starve_others_on_one_worker() {
        let (_runtime, scheduler) = scheduler(1);
        let stop = Arc::new(AtomicBool::new(false));
        let hog = stop.clone();
        scheduler.spawn(async move {
            while !hog.load(Ordering::Relaxed) {
                tokio::task::yield_now().await;
            }
        });
        let (tx, rx) = mpsc::channel();
        for i in 0..100 {
            let tx = tx.clone();
            scheduler.spawn(async move {
                yield_times(10).await;
                let _ = tx.send(i);
            });
        }
        for _ in 0..100 {
            rx.recv_timeout(DEADLINE).expect("a starved task");
        }
        stop.store(true, Ordering::Relaxed);
        wait_for("the hog to end", || scheduler.live() == 0);
    }

    #[test]
    fn outside_work_waits_at_most_one_poll_of_a_task_that_keeps_yielding() {
        let (_runtime, scheduler) = scheduler(1);
        let stop = Arc::new(AtomicBool::new(false));
        let polls = Arc::new(AtomicUsize::new(0));
        let (hog_stop, hog_polls) = (stop.clone(), polls.clone());
        scheduler.spawn(async move {
            while !hog_stop.load(Ordering::Relaxed) {
                // Each poll works for a millisecond, as a guest runs until its time slice ends.
                busy(1_000);
                hog_polls.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        });
        wait_for("the hog to run", || polls.load(Ordering::Relaxed) > 3);
        for _ in 0..20 {
            let (tx, rx) = mpsc::channel();
            let seen = polls.clone();
            let sent = polls.load(Ordering::Relaxed);
            scheduler.spawn(async move {
                let _ = tx.send(seen.load(Ordering::Relaxed));
            });
            let ran = rx
                .recv_timeout(DEADLINE)
                .expect("the task from outside ran");
            // The injected task waits for the poll under way (and the next, if it raced its
            // end), not for the dozens a pick count alone would let pass.
            assert!(ran - sent <= 2, "waited {} polls of the hog", ran - sent);
        }
        stop.store(true, Ordering::Relaxed);
    }

    /// Works for `micros` microseconds, as a guest computes.
    fn busy(micros: u64) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_micros(micros) {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn a_task_that_yields_alone_on_its_worker_is_not_moved() {
        let (_runtime, scheduler) = scheduler(2);
        let threads = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
        let polls = Arc::new(AtomicUsize::new(0));
        let (seen, count) = (threads.clone(), polls.clone());
        scheduler.spawn(async move {
            for _ in 0..20_000 {
                busy(2);
                seen.lock().unwrap().insert(std::thread::current().id());
                count.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        });
        wait_for("the busy task to end", || scheduler.live() == 0);
        assert_eq!(polls.load(Ordering::Relaxed), 20_000);
        let threads = threads.lock().unwrap().len();
        assert_eq!(threads, 1, "the lone task ran on {threads} workers");
    }

    #[test]
    fn a_ping_pong_pair_whose_member_yields_stays_on_one_worker() {
        type Parked = std::sync::Mutex<Option<std::task::Waker>>;
        let (_runtime, scheduler) = scheduler(2);
        let threads = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
        let polls = Arc::new(AtomicUsize::new(0));
        let (a, b) = (Arc::new(Parked::default()), Arc::new(Parked::default()));
        // Each poll wakes the other into the LIFO slot; every 16th poll of the first also
        // wakes itself, as a cell does at the end of its batch: it yields beside its partner.
        let member = |me: Arc<Parked>, other: Arc<Parked>, yields: bool| {
            let (seen, count) = (threads.clone(), polls.clone());
            let mut mine = 0u32;
            std::future::poll_fn(move |cx| {
                let polled = count.fetch_add(1, Ordering::Relaxed);
                if polled >= 20_000 {
                    if let Some(waker) = other.lock().unwrap().take() {
                        waker.wake();
                    }
                    return std::task::Poll::Ready(());
                }
                busy(2);
                // Spawned from outside, the two may start on different workers; the first
                // wake brings them together.
                if polled >= 100 {
                    seen.lock().unwrap().insert(std::thread::current().id());
                }
                mine += 1;
                *me.lock().unwrap() = Some(cx.waker().clone());
                if let Some(waker) = other.lock().unwrap().take() {
                    waker.wake();
                }
                if yields && mine.is_multiple_of(16) {
                    cx.waker().wake_by_ref();
                }
                std::task::Poll::Pending
            })
        };
        scheduler.spawn(member(a.clone(), b.clone(), true));
        scheduler.spawn(member(b, a, false));
        wait_for("20,000 polls", || polls.load(Ordering::Relaxed) >= 20_000);
        let workers = threads.lock().unwrap().len();
        assert_eq!(workers, 1, "the pair ran on {workers} workers");
        wait_for("the pair to end", || scheduler.live() == 0);
    }

    #[test]
    fn a_second_busy_task_on_a_worker_is_taken_by_the_idle_one() {
        let (_runtime, scheduler) = scheduler(2);
        let stop = Arc::new(AtomicBool::new(false));
        // Tasks in a busy poll now, and whether two ever were at once.
        let running = Arc::new(AtomicUsize::new(0));
        let overlapped = Arc::new(AtomicBool::new(false));
        let hog = |stop: Arc<AtomicBool>, running: Arc<AtomicUsize>, both: Arc<AtomicBool>| {
            async move {
                // The first poll outlasts an idle worker's spin: it has parked by the first
                // yield, and only a wake brings it back.
                let mut micros = 2_000;
                while !stop.load(Ordering::Relaxed) {
                    if running.fetch_add(1, Ordering::SeqCst) == 1 {
                        both.store(true, Ordering::SeqCst);
                    }
                    busy(micros);
                    micros = 200;
                    running.fetch_sub(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                }
            }
        };
        // The second waits for the first's message, so it is woken on the first's worker,
        // into its LIFO slot: the two share a worker until the first yields.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let second = hog(stop.clone(), running.clone(), overlapped.clone());
        let waiting = Arc::new(AtomicBool::new(false));
        let ready = waiting.clone();
        scheduler.spawn(async move {
            ready.store(true, Ordering::SeqCst);
            if rx.recv().await.is_some() {
                second.await;
            }
        });
        wait_for("the second to wait", || waiting.load(Ordering::SeqCst));
        let first = hog(stop.clone(), running.clone(), overlapped.clone());
        scheduler.spawn(async move {
            let _ = tx.send(());
            first.await;
        });
        wait_for("the two busy tasks to run at once", || {
            overlapped.load(Ordering::SeqCst)
        });
        stop.store(true, Ordering::Relaxed);
        wait_for("the busy tasks to end", || scheduler.live() == 0);
    }

    #[test]
    fn a_ping_pong_pair_on_the_lifo_slot_does_not_starve_the_queue() {
        let (_runtime, scheduler) = scheduler(1);
        let stop = Arc::new(AtomicBool::new(false));
        // Two tasks that wake each other forever: each wake lands in the LIFO slot.
        let (to_b, mut b_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let (to_a, mut a_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let (a_stop, b_stop) = (stop.clone(), stop.clone());
        let serve_b = to_b.clone();
        scheduler.spawn(async move {
            while a_rx.recv().await.is_some() && !a_stop.load(Ordering::Relaxed) {
                let _ = serve_b.send(());
            }
        });
        scheduler.spawn(async move {
            while b_rx.recv().await.is_some() && !b_stop.load(Ordering::Relaxed) {
                let _ = to_a.send(());
            }
        });
        to_b.send(()).expect("the pair is running");
        let (tx, rx) = mpsc::channel();
        for i in 0..50 {
            let tx = tx.clone();
            scheduler.spawn(async move {
                let _ = tx.send(i);
            });
        }
        for _ in 0..50 {
            rx.recv_timeout(DEADLINE)
                .expect("a task starved by the pair");
        }
        stop.store(true, Ordering::Relaxed);
        drop(to_b);
    }

    #[test]
    fn wakes_from_other_threads_are_never_lost() {
        let (_runtime, scheduler) = scheduler(2);
        let done = Arc::new(AtomicUsize::new(0));
        let mut senders = Vec::new();
        for _ in 0..2_000 {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
            let done = done.clone();
            scheduler.spawn(async move {
                let mut got = 0;
                while let Some(n) = rx.recv().await {
                    got += n;
                    if got == 50 {
                        done.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            });
            senders.push(tx);
        }
        // Two foreign threads wake the tasks in bursts, with gaps that let the workers park.
        let halves: Vec<Vec<_>> = vec![senders.split_off(1_000), senders];
        let threads: Vec<_> = halves
            .into_iter()
            .map(|half| {
                std::thread::spawn(move || {
                    for round in 0..50 {
                        for tx in &half {
                            tx.send(1).expect("a live task");
                        }
                        if round % 10 == 0 {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a sender thread");
        }
        wait_for("every task's 50 wakes", || {
            done.load(Ordering::Relaxed) == 2_000
        });
    }

    #[test]
    fn a_panicking_task_ends_alone_and_the_worker_goes_on() {
        let (_runtime, scheduler) = scheduler(1);
        scheduler.spawn(async { panic!("a task bug") });
        let (tx, rx) = mpsc::channel();
        scheduler.spawn(async move {
            let _ = tx.send(());
        });
        rx.recv_timeout(DEADLINE)
            .expect("the worker survived the panic");
        wait_for("both tasks to end", || scheduler.live() == 0);
    }

    #[test]
    fn closed_workers_leave_once_no_task_is_live_and_later_spawns_never_run() {
        let (_runtime, scheduler) = scheduler(2);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        scheduler.spawn(async move {
            let _ = rx.recv().await;
        });
        scheduler.close();
        // Both workers get to look for work and park: the live task keeps them.
        wait_for("both workers to park", || scheduler.asleep() == 2);
        assert_eq!(scheduler.running(), 2, "workers left with a task live");
        tx.send(()).expect("the task still waits");
        wait_for("the workers to leave", || scheduler.running() == 0);
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        scheduler.spawn(async move { flag.store(true, Ordering::Relaxed) });
        assert_eq!(scheduler.live(), 0, "a spawn after closing is dropped");
        assert!(!ran.load(Ordering::Relaxed));
    }
}
