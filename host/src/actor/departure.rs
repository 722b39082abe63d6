//! A departure: an actor leaving this node for another (a live move). Between two messages
//! the cell captures itself and answers with the image; it then waits, serving nothing, for
//! the mover's verdict: stay (the cell serves on, its mailbox untouched) or go (the cell ends
//! without its `stopping` hook and hands its mailbox and watchers over, for the mover to
//! forward what they hold to where the actor continues).
//!
//! Invariants:
//! - Nothing queued is lost either way: staying serves the mailbox as it is; going hands the
//!   mailbox over whole, still registered at the actor's path, so senders go on queueing
//!   into it until the mover releases the path.
//! - A verdict that never comes (the mover dropped it) means stay.

use tokio::sync::oneshot;

use super::mailbox::{ActorRef, Mailbox};
use crate::address::Address;
use crate::kernel::spawn::Limits;
use crate::sandbox::image::ImageError;

/// What a departing actor is asked: its image, then whether to go.
pub(crate) struct Departure {
    /// Gets the image's bytes and the actor's limits (which go with it), or why the actor
    /// cannot be captured (then it serves on).
    pub(crate) image: oneshot::Sender<Result<(Vec<u8>, Limits), ImageError>>,
    /// The verdict: `Some` to go, handing over through it; `None` or dropped to stay.
    pub(crate) verdict: oneshot::Receiver<Option<oneshot::Sender<Handover>>>,
}

impl std::fmt::Debug for Departure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Departure")
    }
}

/// What a departed actor leaves behind for its mover.
pub(crate) struct Handover {
    /// Its handle, still registered at its path.
    pub(crate) me: ActorRef,
    /// Its mailbox, with what was queued.
    pub(crate) mailbox: Mailbox,
    /// Who watched it.
    pub(crate) watchers: Vec<Address>,
    /// Its parent (`None`: the `/user` guardian).
    pub(crate) parent: Option<Address>,
}
