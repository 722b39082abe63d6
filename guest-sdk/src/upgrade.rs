//! Hot swap: how an actor hands its state to the next version of its module, and the postcard
//! helpers [`state`] and [`from_state`] for it.
//!
//! The host upgrades a running actor between two messages. The actor keeps its address,
//! mailbox, children, watchers, timers, subscriptions and persistence id; only its instance
//! changes. Every actor built with [`export_actor!`](crate::export_actor!) exports the WIT
//! `upgrade` interface, which the SDK maps to two hooks of [`Actor`](crate::Actor):
//!
//! 1. [`Actor::save_state`](crate::Actor::save_state) runs on the old instance. `Ok(None)` (the
//!    default) means "start the new version afresh": the new instance runs `start` with the
//!    actor's original init bytes, and the state is lost unless the actor is persistent. An
//!    `Err` traps (WIT `save-state` has no error channel), which the host treats as a failure
//!    of the old instance. The hook takes `&self`: the old instance must still be intact if the
//!    new version refuses the state.
//! 2. Given `Ok(Some(bytes))`, the new instance runs
//!    [`Actor::migrate`](crate::Actor::migrate) with the old module's version and those bytes,
//!    instead of `start`. An error (or a trap) refuses the state: the new instance is dropped
//!    and the old one keeps running, unchanged. The default `migrate` refuses any state.
//!
//! If either version lacks the export (a module not built with this SDK), the upgrade restarts
//! the actor on the new version as in case 1.
//!
//! A migrated instance is set up like a started one: `migrate` may pick the first behaviour
//! with [`Context::become_`](crate::Context::become_) as `start` may. Behaviours, being
//! functions of the old code, and the stash do not carry over: like a restart, a successful
//! upgrade drops the stashed messages (the SDK logs a warning when `save_state` runs with a
//! non-empty stash); carry them in the saved state if they matter. `stopping` does not run on
//! the old instance: the actor has not stopped.
//!
//! The bytes are the actor's own business; [`state`] and [`from_state`] encode any serde type
//! with postcard (whatever the message types' body encoding). Keep the saved type's layout stable across versions, or
//! switch on `from_version` in `migrate` to read older layouts.
//!
//! ```no_run
//! use mote_guest::{Actor, Context, Result};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! pub enum Counter {
//!     Add(u64),
//!     Get,
//!     Value(u64),
//! }
//! mote_guest::message!(Counter);
//!
//! struct Total {
//!     count: u64,
//! }
//!
//! impl Actor for Total {
//!     type Msg = Counter;
//!
//!     fn start(_ctx: &mut Context, _init: &[u8]) -> Result<Self> {
//!         Ok(Self { count: 0 })
//!     }
//!
//!     fn receive(&mut self, ctx: &mut Context, msg: Counter) -> Result<()> {
//!         match msg {
//!             Counter::Add(k) => self.count += k,
//!             Counter::Get => ctx.reply(&Counter::Value(self.count))?,
//!             Counter::Value(_) => {}
//!         }
//!         Ok(())
//!     }
//!
//!     /// Hands the count to the next version.
//!     fn save_state(&self) -> Result<Option<Vec<u8>>> {
//!         mote_guest::state(&self.count)
//!     }
//!
//!     /// Takes the count from the previous version (every version so far saves a `u64`).
//!     fn migrate(ctx: &mut Context, from_version: &str, state: &[u8]) -> Result<Self> {
//!         let count = mote_guest::from_state(state)?;
//!         ctx.info(&format!("upgraded from {from_version} at {count}"));
//!         Ok(Self { count })
//!     }
//! }
//!
//! mote_guest::export_actor!(Total);
//! # fn main() {}
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// Encodes `value` with postcard as the state to carry: what
/// [`Actor::save_state`](crate::Actor::save_state) returns to hand it to the next version.
pub fn state<T: Serialize>(value: &T) -> Result<Option<Vec<u8>>> {
    postcard::to_allocvec(value)
        .map(Some)
        .map_err(|e| Error::msg(format!("cannot encode the state to carry: {e}")))
}

/// Decodes state encoded by [`state`] as `T`, in [`Actor::migrate`](crate::Actor::migrate):
/// fails if it is malformed or has trailing bytes (then the upgrade is refused).
pub fn from_state<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    match postcard::take_from_bytes::<T>(bytes) {
        Ok((value, [])) => Ok(value),
        Ok((_, rest)) => Err(Error::msg(format!(
            "malformed carried state: {} trailing bytes",
            rest.len()
        ))),
        Err(e) => Err(Error::msg(format!("malformed carried state: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Core {
        count: u64,
        next: Vec<(u32, u32)>,
    }

    #[test]
    fn state_round_trips() -> Result<()> {
        let core = Core {
            count: 3,
            next: vec![(1, 2)],
        };
        let bytes = state(&core)?.unwrap_or_default();
        assert_eq!(bytes, [3, 1, 1, 2]);
        assert_eq!(from_state::<Core>(&bytes)?, core);
        Ok(())
    }

    #[test]
    fn malformed_state_is_an_error() {
        let error = from_state::<u8>(&[1, 2]).err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("malformed carried state: 1 trailing bytes")
        );
        assert!(from_state::<Core>(&[3, 1]).is_err());
    }
}
