//! Lookup: the [`Context`] methods wrapping the `lookup` imports of the WIT contract: an
//! actor's live children, and the address living at a path (to watch an actor known by path).

use crate::bindings::mote::actor::lookup;
use crate::bindings::mote::actor::types::Address;
use crate::context::Context;

impl Context {
    /// This actor's live children (spawned and not yet terminated).
    pub fn children(&self) -> Vec<Address> {
        crate::outbox::flush();
        lookup::children()
    }

    /// The live actor at `path`, absolute or relative (`child`, `../sibling`); `None` if no
    /// actor lives there now.
    pub fn resolve(&self, path: &str) -> Option<Address> {
        crate::outbox::flush();
        lookup::resolve(path)
    }

    /// How many messages wait in the mailbox of the live actor at `path` (absolute or
    /// relative); `None` if no actor lives there on this node.
    pub fn mailbox_depth(&self, path: &str) -> Option<u32> {
        crate::outbox::flush();
        lookup::mailbox_depth(path)
    }
}
