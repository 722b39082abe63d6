//! Aliases: the [`Context`] methods wrapping the `naming` imports of the WIT contract. An
//! alias is a second name, `/system/alias/<name>`, that reaches this actor while it lives.

use crate::bindings::mote::actor::naming;
use crate::context::Context;
use crate::error::{Error, Result};

impl Context {
    /// Gives this actor the second name `/system/alias/<name>` (returned), until it stops or
    /// gives it up; refused for an invalid or taken name, or past its quota of aliases.
    pub fn alias(&self, name: &str) -> Result<String> {
        crate::outbox::flush();
        naming::alias(name).map_err(|e| Error::refused(format_args!("cannot alias `{name}`"), e))
    }

    /// Gives up an alias of this actor; false if it holds none of that name.
    pub fn unalias(&self, name: &str) -> bool {
        crate::outbox::flush();
        naming::unalias(name)
    }
}
