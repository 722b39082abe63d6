//! [`DeadLetter`]: a message no actor could take, as the host hands it to subscribers of
//! [`DEAD_LETTERS_TOPIC`](crate::messaging::DEAD_LETTERS_TOPIC), and the codec of its body.
//!
//! The body of a [`DEAD_LETTER`](crate::message::DEAD_LETTER) message is three fields, each a
//! LEB128 varint length followed by that many bytes: the target (UTF-8), the original kind
//! (UTF-8) and the original body. Its sender is the original sender.

use crate::bindings::mote::actor::types::Address;
use crate::error::{Error, Result};
use crate::message::{Message, decode};

/// A message that could not be delivered: who sent it, where to, and what it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    /// The original sender, if the message came from an actor.
    pub sender: Option<Address>,
    /// The path the message was sent to.
    pub target: String,
    /// The original message's kind.
    pub kind: String,
    /// The original message's body, still encoded.
    pub body: Vec<u8>,
}

impl DeadLetter {
    /// Decodes a `mote.deadletter` body, `sender` being that message's sender; an error if a
    /// field is truncated, a text is not UTF-8 or bytes trail the third field.
    pub fn decode(sender: Option<Address>, body: &[u8]) -> Result<Self> {
        let mut rest = body;
        let target = text(field(&mut rest, "target")?, "target")?;
        let kind = text(field(&mut rest, "kind")?, "kind")?;
        let original = field(&mut rest, "body")?.to_vec();
        if !rest.is_empty() {
            return Err(malformed(format!("{} trailing bytes", rest.len())));
        }
        Ok(Self {
            sender,
            target,
            kind,
            body: original,
        })
    }

    /// Encodes the body of a `mote.deadletter` message (the sender travels beside it).
    pub fn encode(&self) -> Vec<u8> {
        let size = self.target.len() + self.kind.len() + self.body.len() + 3 * 10;
        let mut out = Vec::with_capacity(size);
        for field in [self.target.as_bytes(), self.kind.as_bytes(), &self.body] {
            put_varint(&mut out, field.len() as u64);
            out.extend_from_slice(field);
        }
        out
    }

    /// Decodes the original message as `M`; an error if its kind is not `M`'s or its body is
    /// malformed.
    pub fn decode_original<M: Message>(&self) -> Result<M> {
        decode(&self.kind, &self.body)
    }
}

/// The error for a malformed dead-letter body.
fn malformed(why: impl core::fmt::Display) -> Error {
    Error::msg(format!("malformed `mote.deadletter` body: {why}"))
}

/// Takes one length-prefixed field off the front of `rest`.
fn field<'a>(rest: &mut &'a [u8], name: &str) -> Result<&'a [u8]> {
    let len = take_varint(rest).ok_or_else(|| malformed(format!("bad {name} length")))?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&len| len <= rest.len())
        .ok_or_else(|| malformed(format!("{name} of {len} bytes is truncated")))?;
    let (field, tail) = rest.split_at(len);
    *rest = tail;
    Ok(field)
}

/// A field as UTF-8 text.
fn text(bytes: &[u8], name: &str) -> Result<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| malformed(format!("{name} is not UTF-8")))
}

/// Takes an unsigned LEB128 varint off the front of `rest`; `None` if it is truncated or
/// overflows a `u64`.
fn take_varint(rest: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, &byte) in rest.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        let shift = 7 * i as u32;
        if shift == 63 && bits > 1 {
            return None;
        }
        value |= bits << shift;
        if byte & 0x80 == 0 {
            *rest = &rest[i + 1..];
            return Some(value);
        }
    }
    None
}

/// Appends `value` as an unsigned LEB128 varint.
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(body: Vec<u8>) -> DeadLetter {
        DeadLetter {
            sender: Some(Address {
                path: "/user/a".to_string(),
                incarnation: 3,
            }),
            target: "/user/gone".to_string(),
            kind: "Counter".to_string(),
            body,
        }
    }

    #[test]
    fn round_trip() -> Result<()> {
        for body in [Vec::new(), vec![1, 2, 3], vec![0xaa; 300]] {
            let letter = letter(body);
            let decoded = DeadLetter::decode(letter.sender.clone(), &letter.encode())?;
            assert_eq!(decoded, letter);
        }
        Ok(())
    }

    #[test]
    fn layout_is_length_prefixed_fields() {
        let mut letter = letter(vec![0; 200]);
        letter.target = "/t".to_string();
        letter.kind = "K".to_string();
        let encoded = letter.encode();
        assert_eq!(encoded[..6], [2, b'/', b't', 1, b'K', 0xc8]);
        assert_eq!(encoded[6], 0x01, "200 takes two varint bytes");
        assert_eq!(encoded.len(), 7 + 200);
    }

    #[test]
    fn varints_round_trip_and_reject_overflow() {
        for value in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            let mut rest = out.as_slice();
            assert_eq!(take_varint(&mut rest), Some(value));
            assert!(rest.is_empty());
        }
        let mut too_big: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(take_varint(&mut too_big), None);
        let mut too_long: &[u8] = &[0x80; 11];
        assert_eq!(take_varint(&mut too_long), None);
        let mut truncated: &[u8] = &[0x80];
        assert_eq!(take_varint(&mut truncated), None);
    }

    #[test]
    fn malformed_bodies_are_errors() {
        let error = |body: &[u8]| {
            DeadLetter::decode(None, body)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(
            error(&[]),
            "malformed `mote.deadletter` body: bad target length"
        );
        assert_eq!(
            error(&[5, b'/']),
            "malformed `mote.deadletter` body: target of 5 bytes is truncated"
        );
        assert_eq!(
            error(&[1, 0xff, 0, 0]),
            "malformed `mote.deadletter` body: target is not UTF-8"
        );
        assert_eq!(
            error(&[1, b'/', 1, b'K']),
            "malformed `mote.deadletter` body: bad body length"
        );
        assert_eq!(
            error(&[1, b'/', 0, 0, 9]),
            "malformed `mote.deadletter` body: 1 trailing bytes"
        );
        assert!(DeadLetter::decode(None, &[1, b'/', 0, 0]).is_ok());
    }

    #[test]
    fn the_original_decodes() -> Result<()> {
        #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
        enum Counter {
            Add(u64),
        }
        crate::message!(Counter);
        let letter = letter(crate::encode(&Counter::Add(5))?);
        assert_eq!(letter.decode_original::<Counter>()?, Counter::Add(5));
        Ok(())
    }
}
