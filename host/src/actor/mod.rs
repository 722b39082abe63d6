//! One actor: its mailbox, its core (what every capability sees of it), the step its calls
//! build, the wasm instance it runs in, and the cell that runs its lifecycle and supervises its
//! children.

pub(crate) mod cell;
pub(crate) mod core;
pub(crate) mod departure;
pub(crate) mod image;
pub(crate) mod inbox;
pub(crate) mod instance;
pub(crate) mod lane;
pub(crate) mod launch;
pub(crate) mod mailbox;
pub(crate) mod pull;
pub(crate) mod route;
pub(crate) mod step;
pub(crate) mod supervisor;
