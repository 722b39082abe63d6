//! Timers: the [`Context`] methods wrapping the `timers` imports of the WIT contract.
//!
//! A timer sends a message later, once or periodically, with the scheduling actor as its
//! sender; it dies with that actor. Durations have millisecond resolution: sub-millisecond
//! parts are dropped, and durations beyond `u64::MAX` milliseconds saturate.

use core::time::Duration;

use crate::bindings::mote::actor::timers;
use crate::bindings::mote::actor::types::Address;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::message::{Message, encode};

/// A duration in whole milliseconds, saturating at `u64::MAX`.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl Context {
    /// Sends `msg` to `to` after `delay`, then every `period` if one is given, until
    /// cancelled; returns the timer's id for [`Context::cancel_timer`].
    pub fn schedule<M: Message>(
        &self,
        to: &Address,
        msg: &M,
        delay: Duration,
        period: Option<Duration>,
    ) -> Result<u64> {
        self.schedule_raw(to, M::KIND, &encode(msg)?, delay, period)
    }

    /// Like [`Context::schedule`], sending `msg` to this actor itself.
    pub fn schedule_self<M: Message>(
        &self,
        msg: &M,
        delay: Duration,
        period: Option<Duration>,
    ) -> Result<u64> {
        self.schedule(&self.myself(), msg, delay, period)
    }

    /// Like [`Context::schedule`], with an already encoded body of the given kind.
    pub fn schedule_raw(
        &self,
        to: &Address,
        kind: &str,
        body: &[u8],
        delay: Duration,
        period: Option<Duration>,
    ) -> Result<u64> {
        crate::outbox::flush();
        timers::schedule(to, kind, body, millis(delay), period.map(millis)).map_err(|e| {
            Error::refused(
                format_args!("cannot schedule `{kind}` for `{}`", to.path),
                e,
            )
        })
    }

    /// Cancels a timer of this actor; false if it already fired (one-shot) or is unknown.
    pub fn cancel_timer(&self, id: u64) -> bool {
        crate::outbox::flush();
        timers::cancel(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_become_whole_milliseconds() {
        assert_eq!(millis(Duration::from_millis(250)), 250);
        assert_eq!(millis(Duration::from_micros(1_999)), 1);
        assert_eq!(millis(Duration::ZERO), 0);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
