//! The stash: the [`Context`] methods wrapping the `stash` imports of the WIT contract. The
//! host keeps the stash, so stashed messages survive a restart and an upgrade of the actor,
//! and a durable one stays unacknowledged until it is handled: a crash loses none.
//!
//! [`Context::stash`] and [`Context::unstash_all`] take effect when the hook succeeds (a failed
//! hook stashes nothing: its message is dropped as usual). Unstashed messages come back one
//! per call, in stash order, before any message still in the mailbox, and go through the
//! behaviour on top then. [`Context::peek`] and [`Context::take`] look into the stash at once
//! (selective receive); each costs a scan of the stash.

use crate::behavior::Request;
use crate::bindings::mote::actor::stash;
use crate::context::Context;
use crate::message::Envelope;

impl Context {
    /// Keeps the message being handled, with its sender, for [`Context::unstash_all`]; only
    /// meaningful while handling a message (elsewhere it is ignored with a warning). Past the
    /// actor's stash quota the message is rejected (a dead letter) instead.
    pub fn stash(&mut self) {
        if self.in_message {
            self.requests.push(Request::Stash);
        } else {
            self.warn("stash ignored: this hook is not handling a message");
        }
    }

    /// Has every stashed message handled again, in stash order and with its original sender,
    /// before any new one (the message this hook stashed too, if it did so first).
    pub fn unstash_all(&mut self) {
        self.requests.push(Request::UnstashAll);
    }

    /// How many messages the stash holds (unstashed ones not yet handled included).
    pub fn stashed(&self) -> u32 {
        crate::outbox::flush();
        stash::stashed()
    }

    /// A copy of the oldest stashed message of `kind` (any kind for `None`), left in place.
    pub fn peek(&self, kind: Option<&str>) -> Option<Envelope> {
        crate::outbox::flush();
        stash::peek(kind).map(from_wit)
    }

    /// Takes the oldest stashed message of `kind` (any kind for `None`) out of the stash: this
    /// hook handles it too, and a durable one is acknowledged with this hook's step (if the
    /// hook fails, it is dropped with the hook's own message).
    pub fn take(&self, kind: Option<&str>) -> Option<Envelope> {
        crate::outbox::flush();
        stash::take(kind).map(from_wit)
    }
}

/// A stashed message as the SDK carries it.
fn from_wit(msg: crate::bindings::mote::actor::types::Message) -> Envelope {
    Envelope {
        sender: msg.sender,
        kind: msg.kind,
        body: msg.body,
    }
}
