//! The glue [`export_actor!`](crate::export_actor!) expands to: it owns the actor's
//! [`Instance`] across the host's calls and converts between WIT and SDK types.

use std::cell::RefCell;
use std::thread::LocalKey;

use crate::actor::Actor;
use crate::bindings::mote::actor::types::{
    Address, Directive, LogLevel, Message as WitMessage, StopReason,
};
use crate::bindings::mote::actor::{host, stash};
use crate::instance::{Instance, StashOp};
use crate::message::Envelope;
use crate::supervision::Failure;

/// Where `export_actor!` keeps the actor: `None` before `start` and after `stopping`.
pub type State<A> = LocalKey<RefCell<Option<Instance<A>>>>;

/// Runs [`Actor::start`] and stores the new instance.
pub fn start<A: Actor>(state: &'static State<A>, init: &[u8]) -> Result<(), String> {
    install(state, || Instance::<A>::start(init))
}

/// Runs [`Actor::migrate`] (a hot swap's `start`) and stores the new instance.
pub fn migrate<A: Actor>(
    state: &'static State<A>,
    from_version: &str,
    saved: &[u8],
) -> Result<(), String> {
    install(state, || Instance::<A>::migrate(from_version, saved))
}

/// Creates the instance with `create` and stores it, unless one is already there.
fn install<A: Actor>(
    state: &'static State<A>,
    create: impl FnOnce() -> crate::error::Result<Instance<A>>,
) -> Result<(), String> {
    if state.with(|cell| cell.try_borrow().map(|s| s.is_some()).unwrap_or(true)) {
        return Err("actor already started".to_string());
    }
    let mut instance = create()?;
    perform(instance.take_stash_ops());
    state.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            *slot = Some(instance);
            Ok(())
        }
        Err(_) => Err("actor state is busy".to_string()),
    })
}

/// Delivers one message, then passes the hook's stash requests and any rejection on to the
/// host.
pub fn receive<A: Actor>(state: &'static State<A>, msg: WitMessage) -> Result<(), String> {
    state.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| "actor state is busy".to_string())?;
        let instance = slot
            .as_mut()
            .ok_or_else(|| "actor is not running (not started, or stopped)".to_string())?;
        let WitMessage { sender, kind, body } = msg;
        instance
            .receive(Envelope { sender, kind, body })
            .map_err(String::from)?;
        if let Some(reason) = instance.take_rejected() {
            host::reject(&reason);
        }
        perform(instance.take_stash_ops());
        Ok(())
    })
}

/// Passes a hook's stash requests on to the host, in order. A message the stash has no room
/// for is rejected: it becomes a dead letter rather than vanish.
fn perform(ops: Vec<StashOp>) {
    for op in ops {
        match op {
            StashOp::Stash => {
                if let Err(e) = stash::stash() {
                    let why = format!("the stash refused the message: {e:?}");
                    host::log(LogLevel::Warn, &why);
                    host::reject(&why);
                }
            }
            StashOp::UnstashAll => {
                stash::unstash_all();
            }
        }
    }
}

/// Asks [`Actor::supervise`] about a failed child; `None` if the actor is not running.
pub fn supervise<A: Actor>(
    state: &'static State<A>,
    child: &Address,
    failure: &Failure,
) -> Option<Directive> {
    state.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        let instance = slot.as_mut()?;
        let directive = instance.supervise(child, failure);
        perform(instance.take_stash_ops());
        directive
    })
}

/// Runs [`Actor::save_state`] for a hot swap: `None` if the actor is not running, and a trap
/// (panic) if the hook fails, as WIT `save-state` has no error channel. The stash is the
/// host's: it goes to the new version as it is.
pub fn save_state<A: Actor>(state: &'static State<A>) -> Option<Vec<u8>> {
    let saved = state.with(|cell| {
        let slot = cell
            .try_borrow()
            .unwrap_or_else(|_| panic!("save-state: actor state is busy"));
        Some(slot.as_ref()?.save_state())
    })?;
    match saved {
        Ok(bytes) => bytes,
        Err(e) => panic!("save-state failed: {e}"),
    }
}

/// Runs [`Actor::stopping`] and drops the instance; nothing happens if it never started.
pub fn stopping<A: Actor>(state: &'static State<A>, reason: StopReason) {
    let instance = state.with(|cell| cell.try_borrow_mut().ok().and_then(|mut slot| slot.take()));
    if let Some(instance) = instance {
        instance.stopping(reason);
    }
}
