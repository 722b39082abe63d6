//! The host-wide counts the kernel keeps for the metrics: actors spawned, failures by module and
//! kind, and the figures of actors that have terminated, by module.
//!
//! Invariants:
//! - Per-module sums never go down when an actor stops: its counts join its module's retired
//!   totals and it leaves the registry in one step, under the lock a scrape holds while it reads
//!   both, so a scrape sees an actor either live or retired, never both or neither. Its gauges
//!   (memory) are left behind, as they describe only live actors.
//! - Nothing here is on the message path: spawns, failures and stops only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::actor::mailbox::ActorRef;
use crate::actor::supervisor::FailureKind;
use crate::quota::Quota;
use crate::stats::StatsSnapshot;

/// Counts kept across the lives of actors.
#[derive(Default)]
pub(crate) struct Tally {
    spawns: AtomicU64,
    failures: Mutex<HashMap<(Arc<str>, FailureKind), u64>>,
    retired: Mutex<Retired>,
}

/// What stopped actors did.
#[derive(Default)]
pub(crate) struct Retired {
    /// Their figures, by module.
    pub(crate) modules: HashMap<Arc<str>, StatsSnapshot>,
    /// Their refusals, by quota (in the order of [`Quota::ALL`]).
    pub(crate) refusals: [u64; Quota::ALL.len()],
}

impl Tally {
    /// An actor was spawned (it holds its path now).
    pub(crate) fn spawned(&self) {
        self.spawns.fetch_add(1, Ordering::Relaxed);
    }

    /// Actors spawned so far.
    pub(crate) fn spawns(&self) -> u64 {
        self.spawns.load(Ordering::Relaxed)
    }

    /// An actor of `module` failed with `kind`.
    pub(crate) fn failed(&self, module: &Arc<str>, kind: FailureKind) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        *failures.entry((module.clone(), kind)).or_default() += 1;
    }

    /// Failures so far, by module and kind.
    pub(crate) fn failures(&self) -> Vec<(Arc<str>, FailureKind, u64)> {
        let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures
            .iter()
            .map(|((m, k), n)| (m.clone(), *k, *n))
            .collect()
    }

    /// `actor` leaves the registry by `release`: if that says it did, its counts join its
    /// module's retired totals in the same step.
    pub(crate) fn retire(&self, actor: &ActorRef, release: impl FnOnce() -> bool) -> bool {
        let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        if !release() {
            return false;
        }
        if let (Some(module), Some(stats)) = (&actor.module, &actor.stats) {
            let mut last = stats.snapshot();
            last.memory_bytes = 0;
            *retired.modules.entry(module.clone()).or_default() += last;
            stats.refusals.add_to(&mut retired.refusals);
        }
        true
    }

    /// Runs `f` on the retired totals by module; no actor retires meanwhile.
    pub(crate) fn with_retired<R>(&self, f: impl FnOnce(&Retired) -> R) -> R {
        f(&self.retired.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actor::mailbox::test_mailbox;

    #[test]
    fn a_stopped_actor_keeps_counting_in_its_module_but_not_its_memory() {
        let tally = Tally::default();
        let (mut actor, _mailbox) = test_mailbox("/user/a", 1, 4);
        actor.module = Some("counter".into());
        let stats = Arc::new(crate::stats::ActorStats::default());
        actor.stats = Some(stats.clone());
        stats.received.bump();
        stats.received.bump();
        stats.usage.set_memory(65536);
        stats.refusals.add(Quota::Timers, 3);
        assert!(tally.retire(&actor, || true));
        assert!(tally.retire(&actor, || true));
        assert!(!tally.retire(&actor, || false), "not released, not counted");
        let (received, memory, timers) = tally.with_retired(|r| {
            let c = &r.modules[&Arc::<str>::from("counter")];
            (
                c.received,
                c.memory_bytes,
                r.refusals[Quota::Timers as usize],
            )
        });
        assert_eq!(received, 4, "both lives count");
        assert_eq!(memory, 0, "a stopped actor holds no memory");
        assert_eq!(timers, 6, "its refusals are kept by quota, both lives");
    }

    #[test]
    fn failures_are_counted_by_module_and_kind() {
        let tally = Tally::default();
        let module: Arc<str> = "m".into();
        tally.failed(&module, FailureKind::Trap);
        tally.failed(&module, FailureKind::Trap);
        tally.failed(&module, FailureKind::CpuDeadline);
        let mut failures = tally.failures();
        failures.sort_by_key(|(_, k, _)| k.name());
        assert_eq!(
            failures,
            vec![
                (module.clone(), FailureKind::CpuDeadline, 1),
                (module, FailureKind::Trap, 2)
            ]
        );
    }
}
