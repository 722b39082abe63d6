//! The glue [`export_actor!`](crate::export_actor!) expands to: it owns the actor state across
//! the host's calls and routes each incoming message to `receive` or `unhandled`.

use std::cell::RefCell;
use std::thread::LocalKey;

use crate::actor::Actor;
use crate::bindings::mote::actor::types::{Message as WitMessage, StopReason};
use crate::context::Context;
use crate::message::{Envelope, Message, decode};

/// Where `export_actor!` keeps the actor: `None` before `start` and after `stopping`.
pub type State<A> = LocalKey<RefCell<Option<A>>>;

/// Runs [`Actor::start`] and stores the new state.
pub fn start<A: Actor>(state: &'static State<A>, init: &[u8]) -> Result<(), String> {
    if state.with(|cell| cell.try_borrow().map(|s| s.is_some()).unwrap_or(true)) {
        return Err("actor already started".to_string());
    }
    let actor = A::start(&mut Context::new(None), init)?;
    state.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            *slot = Some(actor);
            Ok(())
        }
        Err(_) => Err("actor state is busy".to_string()),
    })
}

/// Delivers one message: decoded to `receive` if it has the actor's kind, else to `unhandled`.
pub fn receive<A: Actor>(state: &'static State<A>, msg: WitMessage) -> Result<(), String> {
    state.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| "actor state is busy".to_string())?;
        let actor = slot
            .as_mut()
            .ok_or_else(|| "actor is not running (not started, or stopped)".to_string())?;
        let WitMessage { sender, kind, body } = msg;
        let outcome = if kind == A::Msg::KIND {
            let msg = decode::<A::Msg>(&kind, &body)?;
            actor.receive(&mut Context::new(sender), msg)
        } else {
            let mut ctx = Context::new(sender.clone());
            actor.unhandled(&mut ctx, Envelope { sender, kind, body })
        };
        outcome.map_err(String::from)
    })
}

/// Runs [`Actor::stopping`] and drops the state; nothing happens if the actor never started.
pub fn stopping<A: Actor>(state: &'static State<A>, reason: StopReason) {
    let actor = state.with(|cell| cell.try_borrow_mut().ok().and_then(|mut slot| slot.take()));
    if let Some(mut actor) = actor {
        actor.stopping(&mut Context::new(None), reason);
    }
}
