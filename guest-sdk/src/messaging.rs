//! Topics, groups and asking: the [`Context`] methods wrapping the `messaging` imports of the
//! WIT contract.
//!
//! - Topics: [`Context::subscribe`] to receive what is [`Context::publish`]ed to a topic;
//!   subscribing to [`DEAD_LETTERS_TOPIC`] brings every dead letter to
//!   [`Actor::dead_letter`](crate::Actor::dead_letter).
//! - Groups: [`Context::join`] a named group; [`Context::tell_group`] reaches the member with
//!   the shortest mailbox, [`Context::broadcast_group`] every member.
//! - Asking: [`Context::ask`] sends a request whose reply (or, past the deadline, a timeout)
//!   comes back to [`Actor::answered`](crate::Actor::answered) (or
//!   [`Actor::ask_timeout`](crate::Actor::ask_timeout)) with the ask id it returned.

use core::time::Duration;

use crate::bindings::mote::actor::messaging;
use crate::bindings::mote::actor::types::Address;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::message::{Message, encode};
use crate::timers::millis;

/// The topic on which the host publishes every dead letter, as kind
/// [`DEAD_LETTER`](crate::message::DEAD_LETTER).
pub const DEAD_LETTERS_TOPIC: &str = "/system/deadletters";

impl Context {
    /// Receives every message published to `topic` from now on; refused past this actor's
    /// subscription quota or for a topic name that is too long.
    pub fn subscribe(&self, topic: &str) -> Result<()> {
        crate::outbox::flush();
        messaging::subscribe(topic)
            .map_err(|e| Error::refused(format_args!("cannot subscribe to `{topic}`"), e))
    }

    /// Stops receiving `topic`.
    pub fn unsubscribe(&self, topic: &str) {
        crate::outbox::flush();
        messaging::unsubscribe(topic);
    }

    /// Sends `msg` to every current subscriber of `topic`; returns how many it reached.
    pub fn publish<M: Message>(&self, topic: &str, msg: &M) -> Result<u32> {
        self.publish_raw(topic, M::KIND, &encode(msg)?)
    }

    /// Like [`Context::publish`], with an already encoded body of the given kind.
    pub fn publish_raw(&self, topic: &str, kind: &str, body: &[u8]) -> Result<u32> {
        crate::outbox::flush();
        messaging::publish(topic, kind, body)
            .map_err(|e| Error::refused(format_args!("cannot publish to topic `{topic}`"), e))
    }

    /// Joins the named group.
    pub fn join(&self, group: &str) -> Result<()> {
        crate::outbox::flush();
        messaging::join(group).map_err(|e| Error::refused(format_args!("cannot join `{group}`"), e))
    }

    /// Leaves the named group.
    pub fn leave(&self, group: &str) {
        crate::outbox::flush();
        messaging::leave(group);
    }

    /// Sends `msg` to the member of `group` with the shortest mailbox; false if it is empty.
    pub fn tell_group<M: Message>(&self, group: &str, msg: &M) -> Result<bool> {
        self.tell_group_raw(group, M::KIND, &encode(msg)?)
    }

    /// Like [`Context::tell_group`], with an already encoded body of the given kind.
    pub fn tell_group_raw(&self, group: &str, kind: &str, body: &[u8]) -> Result<bool> {
        crate::outbox::flush();
        messaging::tell_group(group, kind, body)
            .map_err(|e| Error::refused(format_args!("cannot send to group `{group}`"), e))
    }

    /// Sends `msg` to every member of `group`; returns how many it reached.
    pub fn broadcast_group<M: Message>(&self, group: &str, msg: &M) -> Result<u32> {
        self.broadcast_group_raw(group, M::KIND, &encode(msg)?)
    }

    /// Like [`Context::broadcast_group`], with an already encoded body of the given kind.
    pub fn broadcast_group_raw(&self, group: &str, kind: &str, body: &[u8]) -> Result<u32> {
        crate::outbox::flush();
        messaging::broadcast_group(group, kind, body)
            .map_err(|e| Error::refused(format_args!("cannot broadcast to group `{group}`"), e))
    }

    /// Sends `msg` to `to` as a request; its reply reaches
    /// [`Actor::answered`](crate::Actor::answered), or if `timeout` passes first a timeout
    /// reaches [`Actor::ask_timeout`](crate::Actor::ask_timeout), each with the returned ask id.
    pub fn ask<M: Message>(&self, to: &Address, msg: &M, timeout: Duration) -> Result<u64> {
        self.ask_raw(to, M::KIND, &encode(msg)?, timeout)
    }

    /// Like [`Context::ask`], with an already encoded body of the given kind.
    pub fn ask_raw(&self, to: &Address, kind: &str, body: &[u8], timeout: Duration) -> Result<u64> {
        crate::outbox::flush();
        messaging::ask(to, kind, body, millis(timeout))
            .map_err(|e| Error::refused(format_args!("cannot ask `{}`", to.path), e))
    }
}
