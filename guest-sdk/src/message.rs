//! Typed messages: the [`Message`] trait, the [`message!`](crate::message!) macro, the
//! postcard body codec and the [`Envelope`] of a message as it arrives.

use crate::bindings::mote::actor::types::Address;
use crate::error::{Error, Result};

/// A Rust type that travels between actors: its `KIND` names it on the wire and its body is
/// postcard-encoded.
pub trait Message: serde::Serialize + serde::de::DeserializeOwned {
    /// The message kind sent alongside the body (the bare type name via [`message!`](crate::message!)).
    const KIND: &'static str;
}

/// The kind of the message the host sends when a watched incarnation stops: its sender is that
/// incarnation and its body is empty. The runtime routes it to
/// [`Actor::terminated`](crate::Actor::terminated). Every host-originated kind starts `mote.`.
pub const TERMINATED: &str = "mote.terminated";

/// The kind of a dead letter as the host hands it to subscribers of
/// [`DEAD_LETTERS_TOPIC`](crate::messaging::DEAD_LETTERS_TOPIC): its sender is the original
/// sender and its body a [`DeadLetter`](crate::DeadLetter) encoding. The runtime routes it to
/// [`Actor::dead_letter`](crate::Actor::dead_letter).
pub const DEAD_LETTER: &str = "mote.deadletter";

/// The kind of the message the host sends when an ask's deadline passes before its reply; its
/// sender is the ask's address (see [`ASK_PREFIX`]). The runtime routes it to
/// [`Actor::ask_timeout`](crate::Actor::ask_timeout).
pub const ASK_TIMEOUT: &str = "mote.ask-timeout";

/// The path prefix of the sender of an ask's reply or timeout: `/system/ask/<id>`, whose
/// incarnation is the ask id. The runtime routes such replies to
/// [`Actor::answered`](crate::Actor::answered).
pub const ASK_PREFIX: &str = "/system/ask/";

/// Implements [`Message`] for each listed type, with the bare type name as its kind.
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize)]
/// enum PingPong { Ping(u32), Pong(u32) }
/// mote_guest::message!(PingPong);
/// assert_eq!(<PingPong as mote_guest::Message>::KIND, "PingPong");
/// ```
#[macro_export]
macro_rules! message {
    ($($ty:ident),+ $(,)?) => {
        $(
            impl $crate::Message for $ty {
                const KIND: &'static str = ::core::stringify!($ty);
            }
        )+
    };
}

/// Encodes a message body with postcard.
pub fn encode<M: Message>(msg: &M) -> Result<Vec<u8>> {
    postcard::to_allocvec(msg).map_err(|e| Error::msg(format!("cannot encode `{}`: {e}", M::KIND)))
}

/// Decodes a body of the given kind as `M`: fails if the kind is not `M::KIND`, or if the body
/// is malformed or has trailing bytes.
pub fn decode<M: Message>(kind: &str, body: &[u8]) -> Result<M> {
    if kind != M::KIND {
        return Err(Error::msg(format!(
            "expected a `{}` message, got `{kind}`",
            M::KIND
        )));
    }
    match postcard::take_from_bytes::<M>(body) {
        Ok((msg, [])) => Ok(msg),
        Ok((_, rest)) => Err(Error::msg(format!(
            "malformed `{kind}` body: {} trailing bytes",
            rest.len()
        ))),
        Err(e) => Err(Error::msg(format!("malformed `{kind}` body: {e}"))),
    }
}

/// A message as it arrives, before decoding: who sent it, its kind and its encoded body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// The sending actor, if the message came from one.
    pub sender: Option<Address>,
    /// The kind naming the body's type.
    pub kind: String,
    /// The postcard-encoded body.
    pub body: Vec<u8>,
}

impl Envelope {
    /// Wraps a typed message, encoding its body.
    pub fn of<M: Message>(sender: Option<Address>, msg: &M) -> Result<Self> {
        Ok(Self {
            sender,
            kind: M::KIND.to_string(),
            body: encode(msg)?,
        })
    }

    /// Decodes the body as `M`; an error if the kind differs or the body is malformed.
    pub fn decode<M: Message>(&self) -> Result<M> {
        decode(&self.kind, &self.body)
    }

    /// Whether this envelope carries an `M` (by kind; the body is not checked).
    pub fn is<M: Message>(&self) -> bool {
        self.kind == M::KIND
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    enum Counter {
        Add(u64),
        Get,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Seq {
        n: u32,
    }

    crate::message!(Counter, Seq,);

    #[test]
    fn kind_is_the_bare_type_name() {
        assert_eq!(Counter::KIND, "Counter");
        assert_eq!(Seq::KIND, "Seq");
    }

    #[test]
    fn round_trip() -> Result<()> {
        let env = Envelope::of(None, &Counter::Add(7))?;
        assert!(env.is::<Counter>());
        assert!(!env.is::<Seq>());
        assert_eq!(env.decode::<Counter>()?, Counter::Add(7));
        Ok(())
    }

    #[test]
    fn kind_mismatch_is_an_error() -> Result<()> {
        let env = Envelope::of(None, &Seq { n: 1 })?;
        let error = env.decode::<Counter>().err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("expected a `Counter` message, got `Seq`")
        );
        Ok(())
    }

    #[test]
    fn malformed_bodies_are_errors() {
        assert!(decode::<Counter>("Counter", &[9]).is_err());
        assert!(decode::<Counter>("Counter", &[]).is_err());
        let error = decode::<Counter>("Counter", &[1, 0])
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("malformed `Counter` body: 1 trailing bytes")
        );
    }
}
