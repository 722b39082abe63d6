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
use crate::outbox;
use crate::spare;
use crate::supervision::Failure;

/// Where `export_actor!` keeps the actor: `None` before `start` and after `stopping`.
pub type State<A> = LocalKey<RefCell<Option<Instance<A>>>>;

/// Runs [`Actor::start`] and stores the new instance.
pub fn start<A: Actor>(state: &'static State<A>, init: &[u8]) -> Result<(), String> {
    crate::bindings::link_component_type();
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
    report_panics();
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

/// Makes a panic send a reply the handler made before it (see `outbox`) and write its message
/// and place to the host's log (at error, tagged with the actor's path) before it aborts the
/// instance: a lean build has no stderr to print it to, and
/// on wasip2 a log line beats a line of captured stderr. Set before the actor's own `start`
/// runs, so an actor may still install a hook of its own.
fn report_panics() {
    #[cfg(target_arch = "wasm32")]
    std::panic::set_hook(Box::new(|info| {
        // A reply made before the panic was made before it: it goes out first.
        outbox::flush_in_panic();
        host::log(LogLevel::Error, &info.to_string().replace('\n', " "))
    }));
}

/// Delivers one message, then passes the hook's stash requests and any rejection on to the
/// host.
pub fn receive<A: Actor>(state: &'static State<A>, msg: WitMessage) -> Result<(), String> {
    let WitMessage { sender, kind, body } = msg;
    deliver(state, Envelope { sender, kind, body })
}

/// [`receive`] for a message packed into one list (`packed-receive`), then for each message the
/// host hands over through `inbox.next` in the same call (a burst costs one call, not one a
/// message; see the host's `actor::pull`).
///
/// In that burst a handler's reply may be held and sent with the call that takes the next
/// message (`outbox`): one call a message answered instead of two.
pub fn receive_packed<A: Actor>(state: &'static State<A>, msg: Vec<u8>) -> Result<(), String> {
    let pull = msg.first().is_some_and(|flags| flags & PULL != 0);
    if !pull {
        return deliver(state, unpack(msg)?);
    }
    let mut msg = msg;
    loop {
        let env = unpack(msg)?;
        outbox::arm();
        let delivered = deliver(state, env);
        if let Err(failed) = delivered {
            // A reply held is sent before the failure, as it was made before it (its own
            // refusal, if any, is dropped: the message fails with the handler's error).
            outbox::flush();
            let _ = outbox::take_refused();
            return Err(failed);
        }
        if let Some(refused) = outbox::take_refused() {
            return Err(refused.into());
        }
        match outbox::next().map_err(String::from)? {
            Some(next) => msg = next,
            None => return Ok(()),
        }
    }
}

/// The flag bit of a packed message with a sender.
const SENDER: u8 = 1;
/// The flag bit that says the host lent the call the rest of the mailbox: pull before returning.
const PULL: u8 = 2;

/// Unpacks a `packed-receive` message (its layout is in `wit/actor.wit`). The body keeps the
/// list's allocation: the header in front of it is moved out, not the body copied.
fn unpack(mut msg: Vec<u8>) -> Result<Envelope, String> {
    let flags = *msg.first().ok_or_else(malformed)?;
    if flags & !(SENDER | PULL) != 0 {
        return Err(malformed());
    }
    let (sender, at) = match flags & SENDER {
        0 => (None, 1),
        _ => {
            let incarnation = u64::from_le_bytes(field::<8>(&msg, 1)?);
            let (path, end) = text(&msg, 9, spare::path())?;
            (Some(Address { path, incarnation }), end)
        }
    };
    let (kind, end) = text(&msg, at, spare::kind())?;
    msg.drain(..end);
    Ok(Envelope {
        sender,
        kind,
        body: msg,
    })
}

/// The `N` bytes of `msg` at `at`.
fn field<const N: usize>(msg: &[u8], at: usize) -> Result<[u8; N], String> {
    msg.get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(malformed)
}

/// The length-prefixed text at `at` in `msg`, copied into `into` (empty, kept from the last
/// message: see [`spare`]), and where it ends.
fn text(msg: &[u8], at: usize, mut into: String) -> Result<(String, usize), String> {
    let len = u32::from_le_bytes(field::<4>(msg, at)?) as usize;
    let start = at + 4;
    let bytes = start
        .checked_add(len)
        .and_then(|end| msg.get(start..end))
        .ok_or_else(malformed)?;
    // The host writes these from its own strings. Like wit-bindgen's lifting of a `string`,
    // only debug builds check the UTF-8 (a release guest trusts the host's, at no cost).
    if cfg!(debug_assertions) {
        into.push_str(std::str::from_utf8(bytes).map_err(|_| malformed())?);
    } else {
        // SAFETY: the host packed valid UTF-8 (a Rust `str`), as the layout requires, and
        // `into` held valid UTF-8 (it is empty).
        unsafe { into.as_mut_vec().extend_from_slice(bytes) };
    }
    Ok((into, start + len))
}

/// The error of a message that does not follow the layout (a host bug, never the sender's).
fn malformed() -> String {
    "malformed packed message".to_string()
}

/// Delivers one envelope (see [`receive`]).
fn deliver<A: Actor>(state: &'static State<A>, env: Envelope) -> Result<(), String> {
    state.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| "actor state is busy".to_string())?;
        let instance = slot
            .as_mut()
            .ok_or_else(|| "actor is not running (not started, or stopped)".to_string())?;
        instance.receive(env).map_err(String::from)?;
        if let Some(reason) = instance.take_rejected() {
            outbox::flush();
            host::reject(&reason);
        }
        perform(instance.take_stash_ops());
        Ok(())
    })
}

/// Passes a hook's stash requests on to the host, in order. A message the stash has no room
/// for is rejected: it becomes a dead letter rather than vanish.
fn perform(ops: Vec<StashOp>) {
    if !ops.is_empty() {
        outbox::flush();
    }
    for op in ops {
        match op {
            StashOp::Stash => {
                if let Err(e) = stash::stash() {
                    // Written out, not `{e:?}`: a `Debug` impl reached through a format is one
                    // more function reference in every instance's vmctx.
                    let why = match e {
                        stash::StashError::NoMessage => "the stash refused the message: NoMessage",
                        stash::StashError::Full => "the stash refused the message: Full",
                    };
                    host::log(LogLevel::Warn, why);
                    host::reject(why);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The message the host's packer writes for sender `/user/a` (incarnation 0x0102), kind
    /// `K` and body `xy` (see `host/src/sandbox/packed.rs`).
    fn packed() -> Vec<u8> {
        let mut bytes = vec![1, 2, 1, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0];
        bytes.extend_from_slice(b"/user/a");
        bytes.extend_from_slice(&[1, 0, 0, 0, b'K', b'x', b'y']);
        bytes
    }

    #[test]
    fn a_packed_message_unpacks_to_the_envelope_receive_would_get() {
        let env = unpack(packed()).unwrap();
        assert_eq!(
            env.sender,
            Some(Address {
                path: "/user/a".into(),
                incarnation: 0x0102
            })
        );
        assert_eq!((env.kind.as_str(), env.body.as_slice()), ("K", &b"xy"[..]));
        let none = unpack(vec![0, 0, 0, 0, 0]).unwrap();
        assert_eq!(
            (none.sender, none.kind, none.body),
            (None, String::new(), vec![])
        );
    }

    #[test]
    fn a_malformed_packed_message_is_an_error_not_a_panic() {
        let full = packed();
        for cut in 0..full.len() - 2 {
            assert!(unpack(full[..cut].to_vec()).is_err(), "cut at {cut}");
        }
        let mut flag = full.clone();
        flag[0] = 4;
        assert!(unpack(flag).is_err(), "a flag no host sets");
        let mut pull = full.clone();
        pull[0] = 3;
        assert_eq!(
            unpack(pull).unwrap().kind,
            "K",
            "the pull flag beside the sender's"
        );
        if cfg!(debug_assertions) {
            let mut utf8 = full.clone();
            utf8[13] = 0xff;
            assert!(unpack(utf8).is_err(), "debug builds check the UTF-8");
        }
        let mut long = full;
        long[9] = 0xff;
        assert!(unpack(long).is_err(), "a path longer than the message");
    }
}
