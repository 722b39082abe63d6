//! A handler's reply, held until the handler returns so that it travels with the call that
//! takes the next message (`inbox.reply-next`): in a burst, a message that is answered costs
//! the actor one call to the host instead of two (`tell`, then `inbox.next`).
//!
//! Invariants (tested below):
//! - A reply is held only in a pulled call (the runtime arms the outbox for each message it
//!   hands to the actor there), only if it is that message's first call to the host, and only
//!   if it passes every check the host makes of a reply (its kind not `mote.*` and within the
//!   host's bound, its body and its receiver's path too): otherwise it is sent at once.
//! - Any other call to the host sends a held reply first and disarms the outbox for the rest
//!   of the message: the host sees the actor's calls in the order the actor made them.
//! - A held reply is sent by the runtime before the next message is handed over
//!   (`reply-next`), before a failed handler's error is returned, or by the panic hook before a
//!   panicking instance aborts; if the host refuses it anyway, the message fails with that
//!   refusal, as `?` on a reply sent at once would have. Only a trap the guest cannot see
//!   coming (its CPU deadline, a memory fault, a stack overflow) loses it, with the message.

use std::cell::RefCell;

use crate::bindings::mote::actor::host;
use crate::bindings::mote::actor::inbox;
use crate::bindings::mote::actor::types::{Address, SendError};
use crate::error::Error;

/// The checks the host makes of a send, from `inbox.send-bounds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounds {
    /// The largest body, in bytes.
    body: u64,
    /// The longest kind, in bytes.
    kind: u32,
    /// The longest receiver path, in bytes.
    path: u32,
}

/// The kinds only the host sends start with this.
const RESERVED: &str = "mote.";

/// A reply held back, and whether one may be.
struct Outbox {
    /// Whether the next reply may be held: a pulled call's message that has not called the
    /// host yet.
    armed: bool,
    /// Whether `to`, `kind` and `body` hold a reply.
    held: bool,
    /// The reply's receiver (the message's sender), kept with its capacity between messages.
    to: Address,
    /// The reply's kind.
    kind: String,
    /// The reply's body.
    body: Vec<u8>,
    /// The host's bounds, asked once.
    bounds: Option<Bounds>,
    /// A held reply the host refused when another call sent it.
    refused: Option<Error>,
}

/// A kept buffer grown past this is dropped once its reply is sent.
const KEEP: usize = 4096;

impl Default for Outbox {
    fn default() -> Self {
        Outbox {
            armed: false,
            held: false,
            to: Address {
                path: String::new(),
                incarnation: 0,
            },
            kind: String::new(),
            body: Vec::new(),
            bounds: None,
            refused: None,
        }
    }
}

impl Outbox {
    /// Holds the reply if the outbox is armed and it passes `bounds`; disarms either way.
    fn hold(&mut self, to: &Address, kind: &str, body: &[u8], bounds: Bounds) -> bool {
        if !std::mem::take(&mut self.armed) || !passes(to, kind, body, bounds) {
            return false;
        }
        self.held = true;
        self.to.path.clear();
        self.to.path.push_str(&to.path);
        self.to.incarnation = to.incarnation;
        self.kind.clear();
        self.kind.push_str(kind);
        self.body.clear();
        self.body.extend_from_slice(body);
        true
    }

    /// Disarms, and says whether a reply was held (it is to be sent now).
    fn release(&mut self) -> bool {
        self.armed = false;
        std::mem::take(&mut self.held)
    }

    /// Drops buffers grown past [`KEEP`], once their reply is sent.
    fn trim(&mut self) {
        if self.body.capacity() > KEEP {
            self.body = Vec::new();
        }
        if self.kind.capacity() > KEEP {
            self.kind = String::new();
        }
        if self.to.path.capacity() > KEEP {
            self.to.path = String::new();
        }
    }
}

/// Whether the host would take this reply: a kind of the actor's own within the bounds.
fn passes(to: &Address, kind: &str, body: &[u8], bounds: Bounds) -> bool {
    !kind.starts_with(RESERVED)
        && kind.len() <= bounds.kind as usize
        && body.len() as u64 <= bounds.body
        && to.path.len() <= bounds.path as usize
}

thread_local! {
    static OUTBOX: RefCell<Outbox> = RefCell::new(Outbox::default());
}

/// Lets the next reply of the message about to be handled be held (the runtime, in a pulled
/// call).
pub(crate) fn arm() {
    OUTBOX.with_borrow_mut(|outbox| outbox.armed = true);
}

/// Holds a reply to `to` if the outbox is armed and the host will take it; `false` means send
/// it now.
pub(crate) fn hold(to: &Address, kind: &str, body: &[u8]) -> bool {
    OUTBOX.with_borrow_mut(|outbox| {
        if !outbox.armed {
            return false;
        }
        let bounds = *outbox.bounds.get_or_insert_with(|| {
            let (body, kind, path) = inbox::send_bounds();
            Bounds { body, kind, path }
        });
        outbox.hold(to, kind, body, bounds)
    })
}

/// Before any call to the host but `reply-next`: sends a held reply first (as `tell`) and
/// disarms for the rest of the message.
pub(crate) fn flush() {
    OUTBOX.with_borrow_mut(|outbox| {
        if outbox.release() {
            if let Err(e) = host::tell(&outbox.to, &outbox.kind, &outbox.body) {
                let refused = Error::send(&outbox.to.path, e);
                outbox.refused.get_or_insert(refused);
            }
            outbox.trim();
        }
    });
}

/// [`flush`] from the panic hook: a reply held when the handler panicked is sent before the
/// instance aborts (unless the panic came from inside the outbox itself).
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) fn flush_in_panic() {
    let free = OUTBOX.with(|outbox| outbox.try_borrow_mut().is_ok());
    if free {
        flush();
    }
}

/// The refusal of a held reply sent by [`flush`], if there was one: the message fails with it.
pub(crate) fn take_refused() -> Option<Error> {
    OUTBOX.with_borrow_mut(|outbox| outbox.refused.take())
}

/// Ends the message handled: sends a held reply and takes the next message in one call
/// (`inbox.reply-next`), or takes it alone (`inbox.next`).
pub(crate) fn next() -> Result<Option<Vec<u8>>, Error> {
    OUTBOX.with_borrow_mut(|outbox| {
        if !outbox.release() {
            return Ok(inbox::next());
        }
        let next = inbox::reply_next(&outbox.kind, &outbox.body)
            .map_err(|e: SendError| Error::send(&outbox.to.path, e));
        outbox.trim();
        next
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds {
        body: 16,
        kind: 8,
        path: 12,
    };

    fn pong() -> Address {
        Address {
            path: "/user/pong".to_string(),
            incarnation: 7,
        }
    }

    fn armed() -> Outbox {
        Outbox {
            armed: true,
            ..Outbox::default()
        }
    }

    #[test]
    fn an_armed_outbox_holds_the_first_reply_and_only_the_first() {
        let mut outbox = armed();
        assert!(outbox.hold(&pong(), "Pong", b"\x01", BOUNDS));
        assert_eq!(
            (outbox.to.path.as_str(), outbox.to.incarnation),
            ("/user/pong", 7)
        );
        assert_eq!(
            (outbox.kind.as_str(), &outbox.body[..]),
            ("Pong", &b"\x01"[..])
        );
        // A second reply in the same message goes at once, after the first.
        assert!(!outbox.hold(&pong(), "Pong", b"\x02", BOUNDS));
        assert!(outbox.release(), "the first is still held, to be sent");
        assert!(!outbox.release(), "and sent once");
    }

    #[test]
    fn an_unarmed_outbox_holds_nothing() {
        let mut outbox = Outbox::default();
        assert!(!outbox.hold(&pong(), "Pong", b"", BOUNDS));
        assert!(!outbox.release());
    }

    #[test]
    fn any_other_call_disarms_for_the_rest_of_the_message() {
        let mut outbox = armed();
        // What `flush` does before another import: nothing was held, so nothing is sent...
        assert!(!outbox.release());
        // ...and a reply after that call goes at once.
        assert!(!outbox.hold(&pong(), "Pong", b"", BOUNDS));
    }

    #[test]
    fn a_reply_the_host_would_refuse_is_never_held() {
        let refused = [
            (pong(), "mote.stop", &b""[..]),
            (pong(), "TooLongKind", &b""[..]),
            (pong(), "Pong", &[0u8; 17][..]),
            (
                Address {
                    path: "/user/far/away".to_string(),
                    incarnation: 1,
                },
                "Pong",
                &b""[..],
            ),
        ];
        for (to, kind, body) in refused {
            let mut outbox = armed();
            assert!(
                !outbox.hold(&to, kind, body, BOUNDS),
                "{kind} to {}",
                to.path
            );
            assert!(!outbox.armed, "and the outbox is disarmed");
        }
        // At the bounds exactly, it is held.
        assert!(armed().hold(&pong(), "PingPong", &[0u8; 16], BOUNDS));
    }

    #[test]
    fn the_buffers_are_kept_between_replies_unless_they_grew_past_keep() {
        let wide = Bounds {
            body: 1 << 20,
            ..BOUNDS
        };
        let mut outbox = armed();
        assert!(outbox.hold(&pong(), "Pong", &[1; 64], wide));
        outbox.release();
        outbox.trim();
        let at = outbox.body.as_ptr();
        outbox.armed = true;
        assert!(outbox.hold(&pong(), "Pong", &[2; 32], wide));
        assert_eq!(outbox.body.as_ptr(), at, "the body's buffer was kept");
        outbox.release();
        outbox.armed = true;
        let big = vec![3; KEEP + 1];
        assert!(outbox.hold(&pong(), "Pong", &big, wide));
        outbox.release();
        outbox.trim();
        assert_eq!(outbox.body.capacity(), 0, "a big body's buffer is not kept");
    }
}
