//! A timer wheel: payloads due later, once or periodically, fired by one driver task (a sorted
//! set of due times, not a task per timer, so 100k timers cost a map entry each).
//!
//! Invariants:
//! - An entry fires under the wheel's lock, and cancelling (one entry, or all of an owner's)
//!   takes the same lock: once a cancel returns, that entry never fires again.
//! - A periodic entry that fell behind fires once and is rescheduled a period after now: no
//!   bursts of catch-up firings.
//! - An entry is owned by at most one owner, and only that owner (or nobody, for an entry
//!   without one) cancels it by id.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::kernel::Kernel;

/// What a firing did with its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fired {
    /// Delivered: a periodic entry runs again, a one-shot one is done.
    Delivered,
    /// Taken elsewhere (parked for a later actor): the entry leaves the wheel.
    Removed,
}

struct Entry<O, P> {
    owner: Option<O>,
    payload: P,
    period: Option<Duration>,
    due: Instant,
}

struct Inner<O, P> {
    due: BTreeSet<(Instant, u64)>,
    entries: HashMap<u64, Entry<O, P>>,
    by_owner: HashMap<O, HashSet<u64>>,
}

impl<O: Eq + Hash, P> Inner<O, P> {
    fn remove(&mut self, id: u64) -> Option<P> {
        let entry = self.entries.remove(&id)?;
        self.due.remove(&(entry.due, id));
        if let Some(owner) = &entry.owner
            && let Some(ids) = self.by_owner.get_mut(owner)
        {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_owner.remove(owner);
            }
        }
        Some(entry.payload)
    }
}

/// Entries of payload `P`, each under a caller-chosen id and maybe an owner `O`.
pub(crate) struct Wheel<O, P> {
    inner: Mutex<Inner<O, P>>,
    wake: Notify,
}

impl<O: Eq + Hash + Clone, P> Default for Wheel<O, P> {
    fn default() -> Self {
        Wheel {
            inner: Mutex::new(Inner {
                due: BTreeSet::new(),
                entries: HashMap::new(),
                by_owner: HashMap::new(),
            }),
            wake: Notify::new(),
        }
    }
}

impl<O: Eq + Hash + Clone, P> Wheel<O, P> {
    fn lock(&self) -> MutexGuard<'_, Inner<O, P>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Schedules `payload` under `id` after `delay`, then every `period` (a zero period means
    /// once). An entry already under `id` is replaced.
    pub(crate) fn insert(
        &self,
        id: u64,
        owner: Option<O>,
        payload: P,
        delay: Duration,
        period: Option<Duration>,
    ) {
        let due = Instant::now() + delay;
        let mut inner = self.lock();
        inner.remove(id);
        if let Some(owner) = &owner {
            inner.by_owner.entry(owner.clone()).or_default().insert(id);
        }
        let earliest = inner.due.first().is_none_or(|(first, _)| due < *first);
        inner.due.insert((due, id));
        inner.entries.insert(
            id,
            Entry {
                owner,
                payload,
                period: period.filter(|p| !p.is_zero()),
                due,
            },
        );
        drop(inner);
        if earliest {
            self.wake.notify_one();
        }
    }

    /// How many entries `owner` has.
    pub(crate) fn owned(&self, owner: &O) -> usize {
        self.lock().by_owner.get(owner).map_or(0, HashSet::len)
    }

    /// Gives every entry of `from` to `to`.
    pub(crate) fn transfer(&self, from: &O, to: O) {
        let mut inner = self.lock();
        let Some(ids) = inner.by_owner.remove(from) else {
            return;
        };
        for id in &ids {
            if let Some(entry) = inner.entries.get_mut(id) {
                entry.owner = Some(to.clone());
            }
        }
        inner.by_owner.entry(to).or_default().extend(ids);
    }

    /// Cancels entry `id` if `owner` owns it; false if it is gone or someone else's.
    pub(crate) fn cancel(&self, id: u64, owner: Option<&O>) -> bool {
        let mut inner = self.lock();
        if inner
            .entries
            .get(&id)
            .is_none_or(|e| e.owner.as_ref() != owner)
        {
            return false;
        }
        inner.remove(id);
        true
    }

    /// Every entry of `owner` by id: the time left until it is due, its period, and what
    /// `read` makes of its payload.
    pub(crate) fn entries_of<R>(
        &self,
        owner: &O,
        mut read: impl FnMut(&P) -> R,
    ) -> Vec<(u64, Duration, Option<Duration>, R)> {
        let inner = self.lock();
        let now = Instant::now();
        let mut ids: Vec<u64> = inner
            .by_owner
            .get(owner)
            .map(|ids| ids.iter().copied().collect())
            .unwrap_or_default();
        ids.sort_unstable();
        ids.into_iter()
            .filter_map(|id| {
                let entry = inner.entries.get(&id)?;
                let left = entry.due.saturating_duration_since(now);
                Some((id, left, entry.period, read(&entry.payload)))
            })
            .collect()
    }

    /// Whether an entry is under `id`.
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.lock().entries.contains_key(&id)
    }

    /// Cancels every entry of `owner`.
    pub(crate) fn cancel_owner(&self, owner: &O) {
        let mut inner = self.lock();
        if let Some(ids) = inner.by_owner.remove(owner) {
            for id in ids {
                inner.remove(id);
            }
        }
    }

    /// How many entries are pending.
    pub(crate) fn pending(&self) -> usize {
        self.lock().entries.len()
    }

    /// Fires every entry due at `now` (under the lock, see the invariants); returns when the
    /// next one is due.
    pub(crate) fn fire_due(
        &self,
        now: Instant,
        mut fire: impl FnMut(u64, Option<&O>, &P) -> Fired,
    ) -> Option<Instant> {
        let mut inner = self.lock();
        while let Some(&(due, id)) = inner.due.first() {
            if due > now {
                return Some(due);
            }
            inner.due.pop_first();
            let Some(entry) = inner.entries.get_mut(&id) else {
                continue;
            };
            let fired = fire(id, entry.owner.as_ref(), &entry.payload);
            match (fired, entry.period) {
                (Fired::Delivered, Some(period)) => {
                    let next = entry.due + period;
                    entry.due = if next > now { next } else { now + period };
                    let next = entry.due;
                    inner.due.insert((next, id));
                }
                _ => {
                    inner.remove(id);
                }
            }
        }
        None
    }

    /// Wakes the driver (to see a new earliest entry, or that its kernel is gone).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Fires due entries with `fire` until the kernel is gone (its drop must [`Wheel::wake`]
    /// the driver one last time).
    pub(crate) async fn drive(
        self: Arc<Self>,
        kernel: Weak<Kernel>,
        mut fire: impl FnMut(&Arc<Kernel>, u64, Option<&O>, &P) -> Fired,
    ) {
        loop {
            let wake = self.wake.notified();
            let next = {
                let Some(kernel) = kernel.upgrade() else {
                    return;
                };
                self.fire_due(Instant::now(), |id, owner, payload| {
                    fire(&kernel, id, owner, payload)
                })
            };
            match next {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = wake => {}
                    }
                }
                None => wake.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fired_ids(wheel: &Wheel<&'static str, u32>, at: Instant) -> Vec<u32> {
        let mut out = Vec::new();
        wheel.fire_due(at, |_, _, p| {
            out.push(*p);
            Fired::Delivered
        });
        out
    }

    #[test]
    fn entries_fire_in_due_order_once() {
        let wheel = Wheel::default();
        wheel.insert(1, None, 30, Duration::from_millis(30), None);
        wheel.insert(2, None, 10, Duration::from_millis(10), None);
        wheel.insert(3, None, 20, Duration::from_millis(20), None);
        let later = Instant::now() + Duration::from_secs(1);
        assert_eq!(fired_ids(&wheel, later), [10, 20, 30]);
        assert_eq!(fired_ids(&wheel, later), Vec::<u32>::new());
        assert_eq!(wheel.pending(), 0);
    }

    #[test]
    fn nothing_fires_before_it_is_due_and_the_next_due_time_is_reported() {
        let wheel: Wheel<&str, u32> = Wheel::default();
        wheel.insert(1, None, 1, Duration::from_secs(60), None);
        let next = wheel.fire_due(Instant::now(), |_, _, _| unreachable!("not due"));
        assert!(next.is_some());
    }

    #[test]
    fn cancelling_an_owner_stops_all_its_entries_and_only_them() {
        let wheel = Wheel::default();
        wheel.insert(
            1,
            Some("a"),
            1,
            Duration::ZERO,
            Some(Duration::from_millis(1)),
        );
        wheel.insert(2, Some("a"), 2, Duration::ZERO, None);
        wheel.insert(3, Some("b"), 3, Duration::ZERO, None);
        wheel.cancel_owner(&"a");
        assert_eq!(
            fired_ids(&wheel, Instant::now() + Duration::from_secs(1)),
            [3]
        );
    }

    #[test]
    fn only_the_owner_cancels_by_id() {
        let wheel = Wheel::default();
        wheel.insert(1, Some("a"), 1, Duration::from_secs(1), None);
        assert!(!wheel.cancel(1, Some(&"b")));
        assert!(!wheel.cancel(1, None));
        assert!(wheel.cancel(1, Some(&"a")));
        assert!(!wheel.cancel(1, Some(&"a")), "already gone");
        assert_eq!(wheel.pending(), 0);
    }

    #[test]
    fn a_periodic_entry_that_fell_behind_fires_once_then_a_period_later() {
        let wheel = Wheel::default();
        let period = Duration::from_millis(10);
        wheel.insert(1, None, 7, Duration::ZERO, Some(period));
        let late = Instant::now() + Duration::from_millis(100);
        assert_eq!(fired_ids(&wheel, late), [7], "one firing, not ten");
        assert_eq!(fired_ids(&wheel, late), Vec::<u32>::new());
        assert_eq!(fired_ids(&wheel, late + period), [7]);
    }

    #[test]
    fn a_removed_firing_leaves_the_wheel_even_if_periodic() {
        let wheel: Wheel<&str, u32> = Wheel::default();
        wheel.insert(1, None, 1, Duration::ZERO, Some(Duration::from_millis(1)));
        wheel.fire_due(Instant::now() + Duration::from_secs(1), |_, _, _| {
            Fired::Removed
        });
        assert_eq!(wheel.pending(), 0);
    }
}
