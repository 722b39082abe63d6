//! Forwarding: the [`Context`] methods wrapping the `forwarding` imports of the WIT contract.
//!
//! A forwarded message keeps the sender of the message being handled, so the end of a chain
//! (a worker behind a router, the last stage of a pipeline) answers the original requester,
//! an ask included. The host passes on the sender of the message it delivers in this call (an
//! unstashed message is delivered again, with its own sender).

use crate::bindings::mote::actor::forwarding;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::message::{Message, encode};

impl Context {
    /// Passes `msg` on to `path` (absolute or relative) with the sender of the message being
    /// handled.
    pub fn forward<M: Message>(&self, path: &str, msg: &M) -> Result<()> {
        self.forward_raw(path, M::KIND, &encode(msg)?)
    }

    /// Passes an already encoded body of `kind` on to `path` with the sender of the message
    /// being handled.
    pub fn forward_raw(&self, path: &str, kind: &str, body: &[u8]) -> Result<()> {
        crate::outbox::flush();
        forwarding::forward_path(path, kind, body)
            .map_err(|e| Error::refused(format_args!("cannot forward to `{path}`"), e))
    }
}
