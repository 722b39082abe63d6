//! Timers: messages delivered later, once or periodically, by one driver task for the whole
//! system (a sorted map of due times, not a task per timer, so 100k timers cost a map entry each).
//!
//! Invariants:
//! - A timer fires under the wheel's lock, and cancelling (one timer, or all of an actor's when it
//!   stops or restarts) takes the same lock: once `cancel_owner` returns, none of that actor's
//!   timers fires again.
//! - A periodic timer that fell behind fires once and is rescheduled a period after now: no
//!   bursts of catch-up messages.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::address::Address;
use crate::message::{Envelope, Receipt};
use crate::system::Shared;

/// One scheduled message.
struct Timer {
    owner: Option<Address>,
    to: String,
    incarnation: Option<u64>,
    envelope: Envelope,
    period: Option<Duration>,
    due: Instant,
    /// Set on a reminder (a durable timer): its id in the store.
    reminder: Option<u64>,
}

#[derive(Default)]
struct Wheel {
    next_id: u64,
    due: BTreeSet<(Instant, u64)>,
    timers: HashMap<u64, Timer>,
    by_owner: HashMap<Address, HashSet<u64>>,
    /// Reminder ids to their timers and owning persistence ids.
    reminders: HashMap<u64, (u64, String)>,
}

/// The timers of one system.
#[derive(Default)]
pub(crate) struct Timers {
    wheel: Mutex<Wheel>,
    wake: Notify,
}

/// Where a timer's message goes: a path, and the incarnation if one is addressed.
pub(crate) struct TimerTarget {
    pub(crate) path: String,
    pub(crate) incarnation: Option<u64>,
}

impl Timers {
    fn wheel(&self) -> std::sync::MutexGuard<'_, Wheel> {
        self.wheel.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Schedules `envelope` for `to` after `delay` (then every `period`); returns its id.
    pub(crate) fn schedule(
        &self,
        owner: Option<Address>,
        to: TimerTarget,
        envelope: Envelope,
        delay: Duration,
        period: Option<Duration>,
    ) -> u64 {
        let id = self.reserve();
        self.schedule_as(id, owner, to, envelope, delay, period, None);
        id
    }

    /// Hands out a timer id for a timer scheduled later with [`Timers::schedule_as`].
    pub(crate) fn reserve(&self) -> u64 {
        let mut wheel = self.wheel();
        wheel.next_id += 1;
        wheel.next_id
    }

    /// Schedules a durable reminder: no actor owns it (it outlives incarnations), and each
    /// firing carries a receipt so the receiver's commit acknowledges it.
    pub(crate) fn remind(
        &self,
        reminder: u64,
        owner: &str,
        to: &str,
        envelope: Envelope,
        delay: Duration,
        period: Option<Duration>,
    ) {
        let id = self.reserve();
        let target = TimerTarget {
            path: to.to_owned(),
            incarnation: None,
        };
        self.wheel()
            .reminders
            .insert(reminder, (id, owner.to_owned()));
        self.schedule_as(id, None, target, envelope, delay, period, Some(reminder));
    }

    /// Cancels a reminder of the persistence id `owner`; false if none is scheduled here.
    pub(crate) fn cancel_reminder_of(&self, owner: &str, reminder: u64) -> bool {
        let mut wheel = self.wheel();
        match wheel.reminders.get(&reminder) {
            Some((id, o)) if o == owner => {
                let id = *id;
                wheel.remove(id);
                true
            }
            _ => false,
        }
    }

    /// Cancels every reminder of the persistence id `owner`.
    pub(crate) fn cancel_reminders_of(&self, owner: &str) {
        let mut wheel = self.wheel();
        let ids: Vec<u64> = wheel
            .reminders
            .values()
            .filter(|(_, o)| o == owner)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            wheel.remove(id);
        }
    }

    /// The persistence id owning a scheduled reminder.
    fn reminder_owner(wheel: &Wheel, reminder: u64) -> String {
        wheel
            .reminders
            .get(&reminder)
            .map(|(_, o)| o.clone())
            .unwrap_or_default()
    }

    /// Schedules a timer under an id from [`Timers::reserve`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn schedule_as(
        &self,
        id: u64,
        owner: Option<Address>,
        to: TimerTarget,
        envelope: Envelope,
        delay: Duration,
        period: Option<Duration>,
        reminder: Option<u64>,
    ) {
        let due = Instant::now() + delay;
        let mut wheel = self.wheel();
        if let Some(owner) = &owner {
            wheel.by_owner.entry(owner.clone()).or_default().insert(id);
        }
        let earliest = wheel.due.first().is_none_or(|(first, _)| due < *first);
        wheel.due.insert((due, id));
        wheel.timers.insert(
            id,
            Timer {
                owner,
                to: to.path,
                incarnation: to.incarnation,
                envelope,
                period: period.filter(|p| !p.is_zero()),
                due,
                reminder,
            },
        );
        drop(wheel);
        if earliest {
            self.wake.notify_one();
        }
    }

    /// Cancels one timer, only if `owner` scheduled it; false if it is gone already.
    pub(crate) fn cancel(&self, owner: Option<&Address>, id: u64) -> bool {
        let mut wheel = self.wheel();
        if wheel
            .timers
            .get(&id)
            .is_none_or(|t| t.owner.as_ref() != owner)
        {
            return false;
        }
        wheel.remove(id);
        true
    }

    /// Cancels every timer `owner` scheduled.
    pub(crate) fn cancel_owner(&self, owner: &Address) {
        let mut wheel = self.wheel();
        if let Some(ids) = wheel.by_owner.remove(owner) {
            for id in ids {
                wheel.remove(id);
            }
        }
    }

    /// How many timers are pending.
    pub(crate) fn pending(&self) -> usize {
        self.wheel().timers.len()
    }

    /// Fires due timers until the system is gone (its drop wakes this loop one last time).
    pub(crate) async fn drive(self: std::sync::Arc<Self>, shared: Weak<Shared>) {
        loop {
            let wake = self.wake.notified();
            let next = {
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                self.fire_due(&shared)
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

    /// Wakes the driver, e.g. to let it see that the system is gone.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Delivers every due timer; returns when the next one is due.
    fn fire_due(&self, shared: &Shared) -> Option<Instant> {
        let now = Instant::now();
        let mut wheel = self.wheel();
        while let Some(&(due, id)) = wheel.due.first() {
            if due > now {
                return Some(due);
            }
            wheel.due.pop_first();
            let Some(reminder) = wheel.timers.get(&id).map(|t| t.reminder) else {
                continue;
            };
            let owner = reminder.map(|r| Self::reminder_owner(&wheel, r));
            let Some(timer) = wheel.timers.get_mut(&id) else {
                continue;
            };
            if let (Some(reminder), Some(owner)) = (reminder, owner) {
                let mut envelope = timer.envelope.clone();
                envelope.receipt = Some(Receipt::Reminder(reminder));
                if !shared.deliver_reminder(&timer.to, envelope, (reminder, &owner), timer.period) {
                    // Parked until its actor lives again; it is rescheduled then.
                    wheel.remove(id);
                    continue;
                }
            } else {
                shared.tell_address(&timer.to, timer.incarnation, timer.envelope.clone());
            }
            match timer.period {
                Some(period) => {
                    let next = timer.due + period;
                    timer.due = if next > now { next } else { now + period };
                    let next = timer.due;
                    wheel.due.insert((next, id));
                }
                None => wheel.remove(id),
            }
        }
        None
    }
}

impl Wheel {
    fn remove(&mut self, id: u64) {
        if let Some(timer) = self.timers.remove(&id) {
            self.due.remove(&(timer.due, id));
            if let Some(reminder) = timer.reminder
                && self.reminders.get(&reminder).is_some_and(|(t, _)| *t == id)
            {
                self.reminders.remove(&reminder);
            }
            if let Some(owner) = &timer.owner
                && let Some(ids) = self.by_owner.get_mut(owner)
            {
                ids.remove(&id);
                if ids.is_empty() {
                    self.by_owner.remove(owner);
                }
            }
        }
    }
}
