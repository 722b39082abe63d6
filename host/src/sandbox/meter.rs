//! The meter of one actor's sandbox: how much linear memory it may have, how long one call may
//! run, and how much time its calls have used so far.
//!
//! Invariants:
//! - The linear memories of one store never take more than the limit together (a component
//!   instrumented for snapshots has the shim's besides the guest's); an attempt is
//!   remembered, so the failure it causes can say that the limit was the reason.
//! - One call runs for at most its CPU deadline, counted in whole time slices (the epoch
//!   callback charges one slice per tick the guest runs through). Ticks are wall-clock: a
//!   slice in which the OS ran another thread on the worker's core is charged all the same.
//! - [`Usage::cpu`] only grows, and counts only the time a call was actually being run on a
//!   thread: a guest that yields (or waits for the scheduler after a time slice) is not charged
//!   for the wait. Time spent in host imports during a call is the caller's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
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
    /// Time slices the current call has run through.
    slices_used: u64,
    /// Set when the guest tried to grow its memory past the limit.
    memory_hit: bool,
    /// The bytes of linear memory the current store's memories take together.
    memory_total: usize,
    /// What this incarnation has done and used so far, over all its instances.
    pub(crate) stats: Arc<ActorStats>,
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
            slices_used: 0,
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
        self.slices_used = 0;
    }

    /// Charges one time slice; an error once the call has run past its CPU deadline.
    pub(crate) fn charge_slice(&mut self) -> wasmtime::Result<()> {
        self.slices_used += 1;
        let used = self
            .slice
            .saturating_mul(u32::try_from(self.slices_used).unwrap_or(u32::MAX));
        if used > self.cpu_deadline {
            return Err(wasmtime::Error::new(CpuDeadlineExceeded(self.cpu_deadline)));
        }
        Ok(())
    }

    /// The memory limit, if the guest ran into it.
    pub(crate) fn memory_hit(&self) -> Option<usize> {
        self.memory_hit.then_some(self.memory_limit)
    }
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

    #[test]
    fn the_cpu_deadline_counts_whole_slices_of_one_call() {
        let mut meter = Meter::new(
            1 << 20,
            Duration::from_millis(25),
            Duration::from_millis(10),
            Arc::default(),
        );
        meter.begin_call();
        assert!(meter.charge_slice().is_ok());
        assert!(meter.charge_slice().is_ok());
        assert!(
            meter.charge_slice().is_err(),
            "30 ms is past a 25 ms deadline"
        );
        meter.begin_call();
        assert!(meter.charge_slice().is_ok(), "each call has its own budget");
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
