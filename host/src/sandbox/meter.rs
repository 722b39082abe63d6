//! The meter of one actor's sandbox: how much linear memory it may have, how long one call may
//! run, and how much time its calls have used so far.
//!
//! Invariants:
//! - The linear memories of one store never take more than the limit together (a component
//!   instrumented for snapshots has the shim's besides the guest's); an attempt is
//!   remembered, so the failure it causes can say that the limit was the reason.
//! - One call runs for at most its CPU deadline. The epoch callback charges it at every tick
//!   it runs through: the CPU time its thread spent on it since the last mark (a tick, or the
//!   end of the yield after one) where that mark was taken in the same poll on the same worker
//!   thread, so no other task ran in between; otherwise one whole time slice. A call is
//!   therefore not charged for time the OS gave its core to other threads (an oversubscribed
//!   or throttled host), and is charged a slice at most for a stretch it cannot tell apart:
//!   its first tick, the first after it waited in an import, and every tick off the workers.
//! - [`Usage::cpu`] only grows, and counts only the time a call was actually being run on a
//!   thread: a guest that yields (or waits for the scheduler after a time slice) is not charged
//!   for the wait. Time spent in host imports during a call is the caller's.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use wasmtime::ResourceLimiter;

use crate::stats::{ActorStats, Usage};

/// A call ran past its CPU deadline (the error the epoch callback ends the call with).
#[derive(Debug, thiserror::Error)]
#[error("cpu deadline exceeded: one call ran longer than {0:?}")]
pub(crate) struct CpuDeadlineExceeded(pub(crate) std::time::Duration);

/// The limits one call of a guest runs under, and what it has used of them.
pub(crate) struct Meter {
    memory_limit: usize,
    cpu_deadline: Duration,
    /// The length of one time slice.
    slice: Duration,
    /// The time the current call has been charged.
    used: Duration,
    /// Where the current call was last seen running, at its last tick.
    mark: Option<Mark>,
    /// Calls begun so far: a resumed mark counts only for the call it was taken in.
    calls: u64,
    /// Where a call was seen running again after the yield of its last tick (set by that
    /// yield), with the number of that call; made at the first yield, as most actors' calls
    /// never reach a tick.
    resumed: Option<Arc<Resumed>>,
    /// Set when the guest tried to grow its memory past the limit.
    memory_hit: bool,
    /// The bytes of linear memory the current store's memories take together.
    memory_total: usize,
    /// What this incarnation has done and used so far, over all its instances.
    pub(crate) stats: Arc<ActorStats>,
}

/// Where the yield after a tick saw its call run again.
type Resumed = Mutex<Option<(u64, Mark)>>;

/// A point a call was seen running at: its worker thread, that worker's poll count and the
/// thread's CPU time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mark {
    poll: (usize, u64),
    cpu: Duration,
}

impl Mark {
    /// Here and now, on a worker of the scheduler; off the workers none.
    fn here() -> Option<Mark> {
        let poll = crate::sched::poll_mark()?;
        Some(Mark {
            poll,
            cpu: thread_cpu()?,
        })
    }
}

/// The CPU time the calling thread has used, if the OS can tell (else every tick is a slice).
fn thread_cpu() -> Option<Duration> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write to.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return None;
    }
    Some(Duration::new(
        u64::try_from(now.tv_sec).ok()?,
        u32::try_from(now.tv_nsec).ok()?,
    ))
}

impl Meter {
    /// A meter for calls of at most `cpu_deadline`, in slices of `slice`.
    pub(crate) fn new(
        memory_limit: usize,
        cpu_deadline: Duration,
        slice: Duration,
        stats: Arc<ActorStats>,
    ) -> Self {
        Meter {
            memory_limit,
            cpu_deadline,
            slice,
            used: Duration::ZERO,
            mark: None,
            calls: 0,
            resumed: None,
            memory_hit: false,
            memory_total: 0,
            stats,
        }
    }

    /// Starts counting the memories of a new store (a new instance of the actor).
    pub(crate) fn new_store(&mut self) {
        self.memory_total = 0;
    }

    /// Starts the budget of a new call.
    pub(crate) fn begin_call(&mut self) {
        self.used = Duration::ZERO;
        self.mark = None;
        self.calls = self.calls.wrapping_add(1);
    }

    /// Charges the call for a tick it ran through, measured here; an error once the call has
    /// run past its CPU deadline.
    pub(crate) fn charge_tick(&mut self) -> wasmtime::Result<()> {
        self.charge(Mark::here())
    }

    /// Charges the call for a tick it ran through, seen at `now`: the CPU time since its last
    /// mark if that was in the same poll, else a whole slice.
    fn charge(&mut self, now: Option<Mark>) -> wasmtime::Result<()> {
        let resumed = self
            .resumed
            .as_deref()
            .and_then(|resumed| lock(resumed).take())
            .and_then(|(call, mark)| (call == self.calls).then_some(mark));
        let since = resumed.or(self.mark);
        let charge = match (since, now) {
            (Some(then), Some(now)) if then.poll == now.poll => now.cpu.saturating_sub(then.cpu),
            _ => self.slice,
        };
        self.mark = now;
        self.used = self.used.saturating_add(charge);
        if self.used > self.cpu_deadline {
            return Err(wasmtime::Error::new(CpuDeadlineExceeded(self.cpu_deadline)));
        }
        Ok(())
    }

    /// The yield after a tick: it gives the worker to others once, and marks where the call
    /// runs again, so that the next tick charges only the CPU time from there.
    pub(crate) fn yield_marked(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let resumed = self.resumed.get_or_insert_default().clone();
        let call = self.calls;
        let mut yielded = false;
        Box::pin(std::future::poll_fn(move |cx| {
            if yielded {
                *lock(&resumed) = Mark::here().map(|mark| (call, mark));
                return Poll::Ready(());
            }
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }))
    }

    /// The memory limit, if the guest ran into it.
    pub(crate) fn memory_hit(&self) -> Option<usize> {
        self.memory_hit.then_some(self.memory_limit)
    }
}

/// The resumed mark, even if a panic poisoned its lock (it holds a plain value).
fn lock(resumed: &Resumed) -> std::sync::MutexGuard<'_, Option<(u64, Mark)>> {
    resumed.lock().unwrap_or_else(|p| p.into_inner())
}

impl ResourceLimiter for Meter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // A new memory comes with `current` 0; one memory's growth adds the difference.
        let total = self
            .memory_total
            .saturating_sub(current)
            .saturating_add(desired);
        if total > self.memory_limit {
            self.memory_hit = true;
            wasmtime::bail!(
                "memory limit exceeded: the actor asked for {total} bytes, its limit is {} bytes",
                self.memory_limit
            );
        }
        self.memory_total = total;
        self.stats.usage.set_memory(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// A guest call whose every run (poll) is charged to a [`Usage`], if it has one.
pub(crate) struct Metered<'u, F> {
    call: F,
    usage: Option<&'u Usage>,
}

impl<'u, F> Metered<'u, F> {
    /// Charges the runs of `call` to the usage of `stats` (none: not metered).
    pub(crate) fn new(call: F, stats: Option<&'u ActorStats>) -> Self {
        Metered {
            call,
            usage: stats.map(|s| &s.usage),
        }
    }
}

impl<F: Future> Future for Metered<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let usage = self.usage;
        // SAFETY: `call` is pinned structurally: `Metered` never moves it out and has no `Drop`
        // of its own, so once `self` is pinned, `call` stays where it is until dropped.
        let call = unsafe { self.map_unchecked_mut(|m| &mut m.call) };
        let Some(usage) = usage else {
            return call.poll(cx);
        };
        let began = usage.start_run();
        let polled = call.poll(cx);
        usage.end_run(began);
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A meter with a 25 ms deadline in slices of 10 ms.
    fn meter() -> Meter {
        Meter::new(
            1 << 20,
            Duration::from_millis(25),
            Duration::from_millis(10),
            Arc::default(),
        )
    }

    /// A mark in poll `poll` of worker 1, at `cpu_ms` of its thread's CPU time.
    fn at(poll: u64, cpu_ms: u64) -> Option<Mark> {
        Some(Mark {
            poll: (1, poll),
            cpu: Duration::from_millis(cpu_ms),
        })
    }

    #[test]
    fn off_the_workers_every_tick_is_a_whole_slice_of_one_call() {
        let mut meter = meter();
        meter.begin_call();
        assert!(meter.charge_tick().is_ok());
        assert!(meter.charge_tick().is_ok());
        assert!(
            meter.charge_tick().is_err(),
            "30 ms is past a 25 ms deadline"
        );
        meter.begin_call();
        assert!(meter.charge_tick().is_ok(), "each call has its own budget");
    }

    #[test]
    fn a_tick_in_the_poll_of_the_last_mark_charges_the_cpu_time_since() {
        let mut meter = meter();
        meter.begin_call();
        meter.charge(at(5, 100)).unwrap();
        assert_eq!(meter.used, Duration::from_millis(10), "a call's first tick");
        meter.charge(at(5, 103)).unwrap();
        assert_eq!(meter.used, Duration::from_millis(13), "3 ms of CPU");
        meter.charge(at(6, 500)).unwrap();
        assert_eq!(
            meter.used,
            Duration::from_millis(23),
            "another poll: a slice"
        );
        meter.charge(at(6, 501)).unwrap();
        assert!(
            meter.charge(at(6, 503)).is_err(),
            "26 ms is past a 25 ms deadline"
        );
        meter.begin_call();
        meter.charge(at(6, 504)).unwrap();
        assert_eq!(
            meter.used,
            Duration::from_millis(10),
            "a new call's first tick is a slice, even in the same poll"
        );
        let mut other = meter.mark.unwrap();
        other.poll.0 = 2;
        meter.charge(Some(other)).unwrap();
        assert_eq!(
            meter.used,
            Duration::from_millis(20),
            "another worker: a slice"
        );
    }

    #[test]
    fn a_mark_taken_where_a_yield_resumed_counts_for_its_own_call_only() {
        let mut meter = meter();
        meter.begin_call();
        meter.charge(at(5, 100)).unwrap();
        // The yield resumed in poll 7, at 200 ms: the 100 ms between were other tasks'.
        *lock(meter.resumed.get_or_insert_default()) = at(7, 200).map(|m| (meter.calls, m));
        meter.charge(at(7, 204)).unwrap();
        assert_eq!(meter.used, Duration::from_millis(14));
        // A call that ends right after its yield resumed leaves the mark behind.
        *lock(meter.resumed.get_or_insert_default()) = at(8, 300).map(|m| (meter.calls, m));
        meter.begin_call();
        meter.charge(at(8, 301)).unwrap();
        assert_eq!(
            meter.used,
            Duration::from_millis(10),
            "not the last call's mark"
        );
    }

    #[test]
    fn the_yield_after_a_tick_gives_the_worker_up_once() {
        let mut meter = meter();
        assert!(meter.resumed.is_none(), "made at the first yield only");
        let mut yielding = meter.yield_marked();
        let (counting, waker) =
            crate::sched::tests::Counting::new(std::task::Waker::noop().clone());
        let mut cx = Context::from_waker(&waker);
        assert!(yielding.as_mut().poll(&mut cx).is_pending());
        assert_eq!(counting.woken(), 1, "it asks to be polled again");
        assert!(yielding.as_mut().poll(&mut cx).is_ready());
        assert_eq!(
            *lock(meter.resumed.as_deref().expect("made by the yield")),
            None,
            "off the workers it marks nothing"
        );
    }

    #[test]
    fn a_threads_cpu_time_grows_while_it_runs_and_not_while_it_sleeps() {
        let cpu = || thread_cpu().expect("Linux tells a thread's CPU time");
        let before = cpu();
        std::thread::sleep(Duration::from_millis(50));
        let slept = cpu() - before;
        assert!(
            slept < Duration::from_millis(20),
            "charged {slept:?} for a sleep"
        );
        let began = std::time::Instant::now();
        let mut x = 1u64;
        while cpu() - before < slept + Duration::from_millis(5) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            assert!(
                began.elapsed() < Duration::from_secs(20),
                "20 s of spinning used no CPU time"
            );
        }
    }

    #[test]
    fn growing_past_the_memory_limit_is_refused_and_remembered() {
        let stats = Arc::new(ActorStats::default());
        let mut meter = Meter::new(
            4096,
            Duration::from_secs(1),
            Duration::from_millis(10),
            stats.clone(),
        );
        assert!(meter.memory_growing(0, 4096, None).unwrap());
        assert_eq!(meter.memory_hit(), None);
        assert_eq!(
            stats.usage.memory_bytes(),
            4096,
            "the size it grew to is shown"
        );
        assert!(meter.memory_growing(4096, 8192, None).is_err());
        assert_eq!(meter.memory_hit(), Some(4096));
        assert_eq!(stats.usage.memory_bytes(), 4096, "a refused growth is not");
    }

    #[test]
    fn the_memories_of_one_store_share_the_limit_and_a_new_store_starts_from_none() {
        let stats = Arc::new(ActorStats::default());
        let mut meter = Meter::new(
            10_000,
            Duration::from_secs(1),
            Duration::from_millis(10),
            stats.clone(),
        );
        assert!(meter.memory_growing(0, 6000, None).unwrap());
        assert!(
            meter.memory_growing(0, 1000, None).unwrap(),
            "a second memory"
        );
        assert_eq!(stats.usage.memory_bytes(), 7000);
        assert!(meter.memory_growing(1000, 3000, None).unwrap());
        assert_eq!(stats.usage.memory_bytes(), 9000);
        assert!(
            meter.memory_growing(6000, 8000, None).is_err(),
            "11,000 in all"
        );
        meter.new_store();
        assert!(meter.memory_growing(0, 8000, None).unwrap());
        assert_eq!(stats.usage.memory_bytes(), 8000);
    }
}
