//! Reminders: durable timers to a persistent actor's path, fired by a wheel of their own.
//!
//! Invariants:
//! - A reminder is armed only once the step that scheduled it has committed (or when its row is
//!   recovered and an actor lives at its path again).
//! - Each firing carries the reminder's receipt; the row stays in the database until the
//!   receiver's commit acknowledges it (a periodic one then moves to its next due time).
//! - A firing that finds no actor is parked for the path (an entity is activated for it) and
//!   leaves the wheel; it is armed again, due at once, when an actor lives there.
//! - Cancelling and firing take the wheel's lock: a cancelled reminder never fires again.

use std::sync::Arc;
use std::time::Duration;

use super::backlog::{Parked, Parking};
use super::entities::Entities;
use crate::caps::timers::wheel::{Fired, Wheel};
use crate::kernel::Kernel;
use crate::message::{Envelope, Receipt};

/// One armed reminder: where it fires, and what.
pub(crate) struct Reminder {
    path: String,
    envelope: Envelope,
    period: Option<Duration>,
}

/// The armed reminders of the host, by reminder id, owned by persistence ids.
#[derive(Default)]
pub(crate) struct Reminders {
    wheel: Arc<Wheel<String, Reminder>>,
}

impl Reminders {
    /// Cancels reminder `id` of `owner`; false if none is armed.
    pub(crate) fn cancel(&self, owner: &str, id: u64) -> bool {
        self.wheel.cancel(id, Some(&owner.to_owned()))
    }

    /// Cancels every reminder of `owner`.
    pub(crate) fn cancel_all(&self, owner: &str) {
        self.wheel.cancel_owner(&owner.to_owned());
    }

    /// How many reminders of `owner` are armed.
    pub(crate) fn owned(&self, owner: &str) -> usize {
        self.wheel.owned(&owner.to_owned())
    }

    /// Hands the armed reminders of `from` to `to` (an adopted persistence id).
    pub(crate) fn transfer(&self, from: &str, to: &str) {
        self.wheel.transfer(&from.to_owned(), to.to_owned());
    }

    /// A handle that arms reminders later (from a step's release).
    pub(crate) fn handle(&self) -> Arc<Wheel<String, Reminder>> {
        self.wheel.clone()
    }

    /// Starts the driver that fires reminders until the kernel is gone.
    pub(crate) fn drive(
        &self,
        kernel: &Arc<Kernel>,
        parking: Arc<Parking>,
        entities: Arc<Entities>,
    ) {
        let driver = self.wheel.clone().drive(
            Arc::downgrade(kernel),
            move |kernel, id, owner, reminder| {
                let mut envelope = reminder.envelope.clone();
                envelope.receipt = Some(Receipt::Reminder(id));
                let Some(undelivered) = kernel.deliver(&reminder.path, None, envelope) else {
                    return Fired::Delivered;
                };
                // Parked until its actor lives again; it is armed again then.
                let item = Parked::Reminder {
                    id,
                    owner: owner.cloned().unwrap_or_default(),
                    envelope: undelivered.envelope,
                    due_ms: 0,
                    period: reminder.period,
                };
                parking.park(&reminder.path, vec![item]);
                // An entity comes back to life for its reminder.
                entities.activate_parked(kernel, &reminder.path);
                Fired::Removed
            },
        );
        kernel.runtime.spawn(driver);
    }

    /// Wakes the driver (to see that the kernel is gone).
    pub(crate) fn wake(&self) {
        self.wheel.wake();
    }
}

/// Arms a reminder on `wheel` (for a step's release).
pub(crate) fn arm_on(
    wheel: &Wheel<String, Reminder>,
    id: u64,
    owner: String,
    path: &str,
    envelope: Envelope,
    delay: Duration,
    period: Option<Duration>,
) {
    let reminder = Reminder {
        path: path.to_owned(),
        envelope,
        period,
    };
    wheel.insert(id, Some(owner), reminder, delay, period);
}
