//! The layout of a message handed to the optional `packed-receive` export: sender, kind and
//! body in one byte list, so lowering it makes one allocation in guest memory, not three (see
//! `wit/actor.wit` for the layout, which the Rust SDK's unpacker mirrors).
//!
//! Invariants:
//! - A packed message holds exactly what `actor.receive` would get: the sender's path and
//!   incarnation, the kind and the body, byte for byte.
//! - Its first byte says whether there is a sender (bit 0) and whether the guest is to pull
//!   more before it returns (bit 1, see `actor::pull`); no other bit is ever set, so a guest
//!   that does not pull (and refuses other values) never sees bit 1.
//! - Packing reuses the buffer it is given: no allocation once it has grown to the messages'
//!   size.

use crate::address::Address;

/// The first byte's bit for a message with a sender.
const SENDER: u8 = 1;
/// The first byte's bit that tells the guest to pull the next messages (`inbox.next`) before
/// it returns.
const PULL: u8 = 2;

/// Writes the message `(sender, kind, body)` into `out`, replacing what it held; `pull` tells
/// the guest to pull.
pub(crate) fn pack(
    sender: Option<&Address>,
    kind: &str,
    body: &[u8],
    pull: bool,
    out: &mut Vec<u8>,
) {
    out.clear();
    let pull = if pull { PULL } else { 0 };
    match sender {
        Some(sender) => {
            let path = sender.path.as_str();
            out.reserve(1 + 8 + 4 + path.len() + 4 + kind.len() + body.len());
            out.push(SENDER | pull);
            out.extend_from_slice(&sender.incarnation.to_le_bytes());
            out.extend_from_slice(&len32(path.len()).to_le_bytes());
            out.extend_from_slice(path.as_bytes());
        }
        None => {
            out.reserve(1 + 4 + kind.len() + body.len());
            out.push(pull);
        }
    }
    out.extend_from_slice(&len32(kind.len()).to_le_bytes());
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(body);
}

/// A length as the layout stores it. Paths and kinds are short (the host refuses long ones
/// before they get here), so this never saturates in practice.
fn len32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::ActorPath;

    #[test]
    fn the_layout_is_flag_incarnation_path_kind_body() {
        let sender = Address {
            path: ActorPath::parse("/user/a").unwrap(),
            incarnation: 0x0102,
        };
        let mut out = vec![9; 100];
        pack(Some(&sender), "K", b"xy", false, &mut out);
        let mut expected = vec![1, 2, 1, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0];
        expected.extend_from_slice(b"/user/a");
        expected.extend_from_slice(&[1, 0, 0, 0, b'K', b'x', b'y']);
        assert_eq!(out, expected);
        pack(Some(&sender), "K", b"xy", true, &mut out);
        expected[0] = 3;
        assert_eq!(out, expected, "the pull bit beside the sender's");
        pack(None, "", b"", false, &mut out);
        assert_eq!(out, vec![0, 0, 0, 0, 0], "no sender, empty kind and body");
        pack(None, "", b"", true, &mut out);
        assert_eq!(out, vec![2, 0, 0, 0, 0], "the pull bit alone");
    }

    #[test]
    fn packing_again_reuses_the_buffer() {
        let mut out = Vec::new();
        pack(None, "kind", &[7; 64], false, &mut out);
        let (ptr, cap) = (out.as_ptr(), out.capacity());
        pack(None, "kind", &[8; 60], false, &mut out);
        assert_eq!((out.as_ptr(), out.capacity()), (ptr, cap));
        assert_eq!(out.len(), 1 + 4 + 4 + 60);
    }
}
