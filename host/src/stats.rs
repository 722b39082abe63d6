//! What one actor incarnation has done and used, as the metrics, the dashboard and `mote tree`
//! read it: messages received and sent, failures, restarts, committed steps, its refusals, and
//! its [`Usage`] of CPU time and linear memory.
//!
//! Invariants:
//! - Every counter only grows during an incarnation, and each has one writer at a time (the
//!   actor's own cell, or the guest call it runs), so a count is a load and a store, never a
//!   locked read-modify-write on the message path. Readers on other threads may see a value a
//!   message late, never a torn or decreasing one.
//! - [`Usage::cpu`] only grows and counts only time a guest call was actually run (see
//!   `sandbox::meter::Metered`).
//! - One allocation per actor holds all of it, shared by its mailbox handle (readers) and its
//!   instances (writers); a restart or an upgrade keeps counting in the same place.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::quota::Refusals;

/// The account of one actor incarnation.
#[derive(Debug, Default)]
pub(crate) struct ActorStats {
    /// Messages its guest was handed (`receive` calls, and messages pulled within them).
    pub(crate) received: Counter,
    /// Of those, the messages its guest pulled within a call (`inbox.next`, see `actor::pull`).
    pub(crate) pulled: Counter,
    /// Messages it sent (tell, forward, ask, reply, publish and group sends count one each).
    pub(crate) sent: Counter,
    /// Of those, the replies sent with the call that took the next message
    /// (`inbox.reply-next`).
    pub(crate) replied_with_next: Counter,
    /// Times it failed (trap, error, limit, deadline, failed commit).
    pub(crate) failures: Counter,
    /// Times it was restarted after a failure.
    pub(crate) restarts: Counter,
    /// Steps whose durable writes were committed (persistent actors only).
    pub(crate) committed: Counter,
    /// Times it hibernated: gave up its instance for an image while idle.
    pub(crate) hibernations: Counter,
    /// What it was refused, by quota.
    pub(crate) refusals: Refusals,
    /// Its CPU time and linear memory.
    pub(crate) usage: Usage,
}

/// A count with one writer at a time.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Counts one.
    #[inline]
    pub(crate) fn bump(&self) {
        // One writer: a plain load and store cost no bus lock on the message path.
        let now = self.0.load(Ordering::Relaxed);
        self.0.store(now.wrapping_add(1), Ordering::Relaxed);
    }

    /// The count so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A copy of an actor's figures at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Messages handed to its guest.
    pub received: u64,
    /// Of those, the messages its guest pulled in a burst within one call (`inbox.next`).
    pub pulled: u64,
    /// Messages it sent.
    pub sent: u64,
    /// Of those, the replies its guest sent with the call that took its next message
    /// (`inbox.reply-next`).
    pub replied_with_next: u64,
    /// Times it failed.
    pub failures: u64,
    /// Times it was restarted.
    pub restarts: u64,
    /// Steps committed to the database.
    pub committed: u64,
    /// Times it hibernated (gave up its instance for an image while idle).
    pub hibernations: u64,
    /// Bytes of linear memory of its instance now.
    pub memory_bytes: u64,
    /// CPU time its guest calls have run (counted when the host meters CPU time).
    pub cpu: Duration,
    /// Refusals of every kind together.
    pub refusals: u64,
}

impl std::ops::AddAssign for StatsSnapshot {
    fn add_assign(&mut self, o: StatsSnapshot) {
        self.received += o.received;
        self.pulled += o.pulled;
        self.sent += o.sent;
        self.replied_with_next += o.replied_with_next;
        self.failures += o.failures;
        self.restarts += o.restarts;
        self.committed += o.committed;
        self.hibernations += o.hibernations;
        self.memory_bytes += o.memory_bytes;
        self.cpu += o.cpu;
        self.refusals += o.refusals;
    }
}

impl ActorStats {
    /// Its figures now.
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            received: self.received.get(),
            pulled: self.pulled.get(),
            sent: self.sent.get(),
            replied_with_next: self.replied_with_next.get(),
            failures: self.failures.get(),
            restarts: self.restarts.get(),
            committed: self.committed.get(),
            hibernations: self.hibernations.get(),
            memory_bytes: self.usage.memory_bytes(),
            cpu: self.usage.cpu(),
            refusals: self.refusals.total(),
        }
    }
}

/// The time one actor incarnation has lived and run, and the linear memory it holds, shared by
/// its instances (a restart or an upgrade keeps counting).
///
/// Every poll of a guest call reads the clock twice, so the clock is `quanta`'s: the CPU's
/// time-stamp counter, calibrated against the OS clock (a few ns a read where `std`'s
/// `Instant` costs ~25 ns), falling back to the OS clock where there is no usable counter.
#[derive(Debug)]
pub(crate) struct Usage {
    born: quanta::Instant,
    /// Nanoseconds of completed runs (polls) of its calls.
    cpu_ns: AtomicU64,
    /// When the run in progress began, in nanoseconds after `born` plus one; 0 between runs.
    running_since: AtomicU64,
    /// Bytes of linear memory of its current instance, as last grown.
    memory: AtomicU64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage::new()
    }
}

impl Usage {
    /// A fresh account, born now.
    pub(crate) fn new() -> Self {
        Usage {
            born: quanta::Instant::now(),
            cpu_ns: AtomicU64::new(0),
            running_since: AtomicU64::new(0),
            memory: AtomicU64::new(0),
        }
    }

    /// Time since the incarnation was spawned.
    pub(crate) fn age(&self) -> Duration {
        self.born.elapsed()
    }

    /// Time its calls have run so far, including the run in progress.
    pub(crate) fn cpu(&self) -> Duration {
        let done = self.cpu_ns.load(Ordering::Relaxed);
        let since = self.running_since.load(Ordering::Relaxed);
        let current = match since {
            0 => 0,
            start => nanos(self.born.elapsed()).saturating_sub(start - 1),
        };
        Duration::from_nanos(done.saturating_add(current))
    }

    /// Bytes of linear memory its instance holds.
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.memory.load(Ordering::Relaxed)
    }

    /// Its instance's linear memory is now `bytes` long.
    pub(crate) fn set_memory(&self, bytes: usize) {
        self.memory
            .store(u64::try_from(bytes).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// A guest call begins to run now.
    pub(crate) fn start_run(&self) -> quanta::Instant {
        let now = quanta::Instant::now();
        let since = nanos(now.duration_since(self.born)).saturating_add(1);
        self.running_since.store(since, Ordering::Relaxed);
        now
    }

    /// The run begun at `began` has ended.
    pub(crate) fn end_run(&self, began: quanta::Instant) {
        self.running_since.store(0, Ordering::Relaxed);
        // One writer (the actor's own task): no read-modify-write needed.
        let done = self.cpu_ns.load(Ordering::Relaxed);
        self.cpu_ns.store(
            done.saturating_add(nanos(began.elapsed())),
            Ordering::Relaxed,
        );
    }
}

/// A duration in whole nanoseconds, saturating.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::Quota;

    #[test]
    fn only_running_time_is_charged() {
        let usage = Usage::new();
        assert_eq!(usage.cpu(), Duration::ZERO);
        let began = usage.start_run();
        let busy = std::time::Instant::now();
        while busy.elapsed() < Duration::from_millis(5) {}
        assert!(
            usage.cpu() >= Duration::from_millis(5),
            "a run in progress counts"
        );
        usage.end_run(began);
        let after_run = usage.cpu();
        assert!(after_run >= Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(usage.cpu(), after_run, "time between runs is not charged");
        assert!(usage.age() >= after_run + Duration::from_millis(20));
    }

    #[test]
    fn a_snapshot_reads_every_figure_and_snapshots_add_up() {
        let stats = ActorStats::default();
        for _ in 0..3 {
            stats.received.bump();
        }
        stats.sent.bump();
        stats.failures.bump();
        stats.restarts.bump();
        stats.committed.bump();
        stats.refusals.add(Quota::Timers, 2);
        stats.refusals.add(Quota::Asks, 1);
        stats.usage.set_memory(65536);
        let one = stats.snapshot();
        assert_eq!(
            (
                one.received,
                one.sent,
                one.failures,
                one.restarts,
                one.committed
            ),
            (3, 1, 1, 1, 1)
        );
        assert_eq!((one.memory_bytes, one.refusals), (65536, 3));
        let mut sum = one;
        sum += one;
        assert_eq!(
            (sum.received, sum.memory_bytes, sum.refusals),
            (6, 131072, 6)
        );
    }

    #[test]
    fn counts_seen_from_another_thread_never_go_back() {
        let stats = std::sync::Arc::new(ActorStats::default());
        let writer = {
            let stats = stats.clone();
            std::thread::spawn(move || {
                for _ in 0..100_000 {
                    stats.received.bump();
                }
            })
        };
        let mut last = 0;
        while !writer.is_finished() {
            let now = stats.received.get();
            assert!(now >= last, "{now} after {last}");
            last = now;
        }
        writer.join().unwrap();
        assert_eq!(stats.received.get(), 100_000, "one writer loses no count");
    }
}
