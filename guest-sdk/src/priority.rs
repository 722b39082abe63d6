//! Urgent messages: the [`Context`] methods wrapping the `priority` imports of the WIT
//! contract. An urgent message goes on the receiver's urgent lane and is handled before its
//! ordinary messages; urgent messages from one sender keep their order among themselves.

use crate::bindings::mote::actor::priority;
use crate::bindings::mote::actor::types::Address;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::message::{Message, encode};

impl Context {
    /// Sends `msg` to `to` on its urgent lane, ahead of its ordinary messages.
    pub fn tell_urgent<M: Message>(&self, to: &Address, msg: &M) -> Result<()> {
        crate::outbox::flush();
        priority::tell_urgent(to, M::KIND, &encode(msg)?)
            .map_err(|e| Error::refused(format_args!("cannot tell `{}`", to.path), e))
    }

    /// Sends `msg` to `path` (absolute or relative) on its urgent lane.
    pub fn tell_path_urgent<M: Message>(&self, path: &str, msg: &M) -> Result<()> {
        crate::outbox::flush();
        priority::tell_path_urgent(path, M::KIND, &encode(msg)?)
            .map_err(|e| Error::refused(format_args!("cannot tell `{path}`"), e))
    }
}
