//! [`Context`]: what a hook may do, wrapping the `host` imports of the WIT contract.
//!
//! The `supervision` imports are in [`supervision`](crate::supervision), the `timers` imports
//! in [`timers`](crate::timers), the `messaging` imports in [`messaging`](crate::messaging), the
//! `persistence` imports in [`persistence`](crate::persistence), behaviour switching in
//! [`behavior`](crate::behavior) and the stash in [`stash`](crate::stash), each in its own
//! `impl Context` block.

use std::cell::OnceCell;

use crate::behavior::Request;
use crate::bindings::mote::actor::host;
use crate::bindings::mote::actor::types::{Address, LogLevel};
use crate::error::{Error, Result};
use crate::message::{Message, with_encoded};

/// Handed to every [`Actor`](crate::Actor) hook: the actor's addresses, the current sender and
/// the ways to reach the host.
#[derive(Debug)]
pub struct Context {
    sender: Option<Address>,
    myself: OnceCell<Address>,
    parent: OnceCell<Option<Address>>,
    /// Whether the hook is handling a message (only then can it be stashed).
    pub(crate) in_message: bool,
    /// Behaviour and stash changes requested by the hook, in call order.
    pub(crate) requests: Vec<Request>,
    /// Set by the default [`Actor::answered`](crate::Actor::answered): the reply is to be
    /// handled like any other message once it returns.
    pub(crate) handle_as_message: bool,
}

impl Context {
    /// A context for a hook that handles no message (`start`, `stopping`, `supervise`); a
    /// message's sender comes with [`Context::begin_message`].
    pub(crate) fn new() -> Self {
        Self {
            sender: None,
            myself: OnceCell::new(),
            parent: OnceCell::new(),
            in_message: false,
            requests: Vec::new(),
            handle_as_message: false,
        }
    }

    /// Readies the context for handling one message, from `sender` if any: what the last hook
    /// left (requests of a failed hook, an unclaimed answer) is dropped, the addresses looked
    /// up are kept.
    pub(crate) fn begin_message(&mut self, sender: Option<Address>) {
        self.sender = sender;
        self.in_message = true;
        self.requests.clear();
        self.handle_as_message = false;
    }

    /// Takes the sender back once the message is handled.
    pub(crate) fn take_sender(&mut self) -> Option<Address> {
        self.sender.take()
    }

    /// Takes the changes the hook requested, in call order.
    pub(crate) fn take_requests(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.requests)
    }

    /// This actor's own address.
    pub fn myself(&self) -> Address {
        self.myself
            .get_or_init(|| {
                crate::outbox::flush();
                host::self_address()
            })
            .clone()
    }

    /// The parent's address (`None` only for root actors).
    pub fn parent(&self) -> Option<Address> {
        self.parent
            .get_or_init(|| {
                crate::outbox::flush();
                host::parent()
            })
            .clone()
    }

    /// The sender of the message being processed (`None` in `start`, `stopping`, or if the
    /// message did not come from an actor).
    pub fn sender(&self) -> Option<&Address> {
        self.sender.as_ref()
    }

    /// Sends a typed message to an address.
    pub fn tell<M: Message>(&self, to: &Address, msg: &M) -> Result<()> {
        with_encoded(msg, |body| self.tell_raw(to, M::KIND, body))?
    }

    /// Sends a typed message to a path, absolute (`/user/a`) or relative (`child`, `../sibling`).
    pub fn tell_path<M: Message>(&self, path: &str, msg: &M) -> Result<()> {
        with_encoded(msg, |body| self.tell_path_raw(path, M::KIND, body))?
    }

    /// Sends a typed message back to the sender of the message being processed.
    ///
    /// In a burst the host hands over in one call, the reply may be held until the handler
    /// returns and sent with the call that takes the next message; any other call to the host
    /// sends it first, so the host sees the calls in the order they were made (see
    /// `outbox`). A reply the host would refuse is never held: its error comes back here.
    pub fn reply<M: Message>(&self, msg: &M) -> Result<()> {
        match &self.sender {
            Some(to) => with_encoded(msg, |body| {
                if crate::outbox::hold(to, M::KIND, body) {
                    Ok(())
                } else {
                    self.tell_raw(to, M::KIND, body)
                }
            })?,
            None => Err(Error::msg(format!(
                "cannot reply `{}`: the current message has no sender",
                M::KIND
            ))),
        }
    }

    /// Sends an already encoded body of the given kind to an address.
    pub fn tell_raw(&self, to: &Address, kind: &str, body: &[u8]) -> Result<()> {
        crate::outbox::flush();
        host::tell(to, kind, body).map_err(|e| Error::send(&to.path, e))
    }

    /// Sends an already encoded body of the given kind to a path.
    pub fn tell_path_raw(&self, path: &str, kind: &str, body: &[u8]) -> Result<()> {
        crate::outbox::flush();
        host::tell_path(path, kind, body).map_err(|e| Error::send(path, e))
    }

    /// Spawns a child named `name` from the deployed module `module`, handing it `init`.
    pub fn spawn(&self, name: &str, module: &str, init: &[u8]) -> Result<Address> {
        crate::outbox::flush();
        host::spawn(name, module, init).map_err(|e| Error::spawn(name, module, e))
    }

    /// Stops this actor or one of its descendants once the current message is done.
    pub fn stop(&self, target: &Address) {
        crate::outbox::flush();
        host::stop(target);
    }

    /// Stops this actor once the current message is done.
    pub fn stop_self(&self) {
        self.stop(&self.myself());
    }

    /// Writes a line to the host's log, tagged with this actor's path.
    pub fn log(&self, level: LogLevel, message: &str) {
        crate::outbox::flush();
        host::log(level, message);
    }

    /// Logs at trace level.
    pub fn trace(&self, message: &str) {
        self.log(LogLevel::Trace, message);
    }

    /// Logs at debug level.
    pub fn debug(&self, message: &str) {
        self.log(LogLevel::Debug, message);
    }

    /// Logs at info level.
    pub fn info(&self, message: &str) {
        self.log(LogLevel::Info, message);
    }

    /// Logs at warn level.
    pub fn warn(&self, message: &str) {
        self.log(LogLevel::Warn, message);
    }

    /// Logs at error level.
    pub fn error(&self, message: &str) {
        self.log(LogLevel::Error, message);
    }
}
