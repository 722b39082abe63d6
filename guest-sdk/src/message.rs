//! Typed messages: the [`Message`] trait, the [`message!`](crate::message!) and
//! [`json_message!`](crate::json_message!) macros, the body codecs ([`Encoding`]) and the
//! [`Envelope`] of a message as it arrives.

use crate::bindings::mote::actor::types::Address;
use crate::error::{Error, Result};

/// How a message type's body is encoded on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Encoding {
    /// postcard: compact binary, for messages between Rust actors (the default).
    Postcard,
    /// UTF-8 JSON text (serde_json), for messages to and from actors in other languages.
    Json,
}

/// A Rust type that travels between actors: its `KIND` names it on the wire and its body is
/// encoded as its `ENCODING` says (postcard, or JSON if declared with
/// [`json_message!`](crate::json_message!)).
pub trait Message: serde::Serialize + serde::de::DeserializeOwned {
    /// The message kind sent alongside the body (the bare type name via [`message!`](crate::message!)).
    const KIND: &'static str;
    /// The body encoding: [`Encoding::Postcard`] unless the type says otherwise.
    const ENCODING: Encoding = Encoding::Postcard;
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

/// The kind of the message the host sends when an HTTP call-out ends: no sender, body = the
/// call-out id (u64, little-endian). The runtime takes the outcome from the host and routes it
/// to [`Actor::http_response`](crate::Actor::http_response).
pub const HTTP_RESPONSE: &str = "mote.http.response";

/// The path prefix of the sender of an ask's reply or timeout: `/system/ask/<id>`, whose
/// incarnation is the ask id. The runtime routes such replies to
/// [`Actor::answered`](crate::Actor::answered).
pub const ASK_PREFIX: &str = "/system/ask/";

/// Implements [`Message`] for each listed type, postcard-encoded, with the bare type name as its
/// kind or the string given after `=`.
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize)]
/// enum PingPong { Ping(u32), Pong(u32) }
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Tick;
/// mote_guest::message!(PingPong, Tick = "tick");
/// assert_eq!(<PingPong as mote_guest::Message>::KIND, "PingPong");
/// assert_eq!(<Tick as mote_guest::Message>::KIND, "tick");
/// assert_eq!(<Tick as mote_guest::Message>::ENCODING, mote_guest::Encoding::Postcard);
/// ```
#[macro_export]
macro_rules! message {
    ($($ty:ident $(= $kind:literal)?),+ $(,)?) => {
        $(
            $crate::__impl_message!(Postcard, $ty $(= $kind)?);
        )+
    };
}

/// Implements [`Message`] for each listed type with a JSON body ([`Encoding::Json`]), to talk
/// to actors written in other languages; the kind is the bare type name or the string given
/// after `=`.
///
/// The body is the type's serde_json encoding as UTF-8 text: a struct is a JSON object, and an
/// enum is externally tagged unless serde attributes say otherwise (`{"Add":5}`, `"Get"`).
///
/// ```
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Debug, PartialEq)]
/// struct Order { id: u64, item: String }
/// #[derive(Serialize, Deserialize)]
/// struct Shipped { id: u64 }
/// mote_guest::json_message!(Order = "order", Shipped);
///
/// assert_eq!(<Order as mote_guest::Message>::KIND, "order");
/// assert_eq!(<Shipped as mote_guest::Message>::KIND, "Shipped");
/// let order = Order { id: 7, item: "tea".into() };
/// let body = mote_guest::encode(&order)?;
/// assert_eq!(body, br#"{"id":7,"item":"tea"}"#);
/// assert_eq!(mote_guest::decode::<Order>("order", br#"{"item":"tea","id":7}"#)?, order);
/// # Ok::<(), mote_guest::Error>(())
/// ```
#[macro_export]
macro_rules! json_message {
    ($($ty:ident $(= $kind:literal)?),+ $(,)?) => {
        $(
            $crate::__impl_message!(Json, $ty $(= $kind)?);
        )+
    };
}

/// Implements [`Message`] for one type; used by [`message!`](crate::message!) and
/// [`json_message!`](crate::json_message!).
#[doc(hidden)]
#[macro_export]
macro_rules! __impl_message {
    ($encoding:ident, $ty:ident) => {
        $crate::__impl_message!($encoding, $ty = ::core::stringify!($ty));
    };
    ($encoding:ident, $ty:ident = $kind:expr) => {
        impl $crate::Message for $ty {
            const KIND: &'static str = $kind;
            const ENCODING: $crate::Encoding = $crate::Encoding::$encoding;
        }
    };
}

/// Encodes a message body as `M::ENCODING` says (postcard or JSON).
pub fn encode<M: Message>(msg: &M) -> Result<Vec<u8>> {
    let encoded = match M::ENCODING {
        Encoding::Postcard => postcard::to_allocvec(msg).map_err(|e| e.to_string()),
        Encoding::Json => serde_json::to_vec(msg).map_err(|e| e.to_string()),
    };
    encoded.map_err(cannot_encode::<M>)
}

/// The error of a message `M` that cannot be encoded.
fn cannot_encode<M: Message>(e: impl std::fmt::Display) -> Error {
    Error::msg(format!("cannot encode `{}`: {e}", M::KIND))
}

/// Encodes `msg` into a buffer kept between calls and hands the bytes to `use_them`: sending
/// a message allocates nothing once the buffer has grown to the messages' size. A call made
/// while the buffer is in use (from `use_them`) encodes into a fresh one.
pub(crate) fn with_encoded<M: Message, R>(msg: &M, use_them: impl FnOnce(&[u8]) -> R) -> Result<R> {
    thread_local! {
        static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    /// A buffer grown past this is not kept, so one big message does not stay.
    const KEEP: usize = 4096;
    if M::ENCODING != Encoding::Postcard {
        return Ok(use_them(&encode(msg)?));
    }
    BUFFER.with(|cell| {
        let Ok(mut buffer) = cell.try_borrow_mut() else {
            return Ok(use_them(&encode(msg)?));
        };
        buffer.clear();
        let mut bytes =
            postcard::to_extend(msg, std::mem::take(&mut *buffer)).map_err(cannot_encode::<M>)?;
        let result = use_them(&bytes);
        if bytes.capacity() <= KEEP {
            bytes.clear();
            *buffer = bytes;
        }
        Ok(result)
    })
}

/// Decodes a body of the given kind as `M`, per `M::ENCODING`: fails if the kind is not
/// `M::KIND`, or if the body is malformed or has trailing bytes (JSON allows trailing whitespace).
pub fn decode<M: Message>(kind: &str, body: &[u8]) -> Result<M> {
    if kind != M::KIND {
        return Err(Error::msg(format!(
            "expected a `{}` message, got `{kind}`",
            M::KIND
        )));
    }
    match M::ENCODING {
        Encoding::Postcard => match postcard::take_from_bytes::<M>(body) {
            Ok((msg, [])) => Ok(msg),
            Ok((_, rest)) => Err(Error::msg(format!(
                "malformed `{kind}` body: {} trailing bytes",
                rest.len()
            ))),
            Err(e) => Err(Error::msg(format!("malformed `{kind}` body: {e}"))),
        },
        Encoding::Json => serde_json::from_slice(body)
            .map_err(|e| Error::msg(format!("malformed `{kind}` JSON body: {e}"))),
    }
}

/// A message as it arrives, before decoding: who sent it, its kind and its encoded body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// The sending actor, if the message came from one.
    pub sender: Option<Address>,
    /// The kind naming the body's type.
    pub kind: String,
    /// The encoded body (postcard or JSON, as its type's [`Message::ENCODING`] says).
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

    /// A JSON message with the lower-case kind a Python or JS actor would use.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Order {
        id: u64,
        item: String,
        #[serde(default)]
        note: Option<String>,
    }

    /// A JSON enum, externally tagged as serde does by default.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    enum Op {
        Add(u64),
        Get,
    }

    /// A postcard message with an explicit kind.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Tick;

    /// A hand-written impl that does not name an encoding.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Manual(u8);

    impl Message for Manual {
        const KIND: &'static str = "manual";
    }

    crate::json_message!(Order = "order", Op);
    crate::message!(Tick = "tick");

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
    fn kinds_and_encodings_follow_the_declarations() {
        assert_eq!((Order::KIND, Order::ENCODING), ("order", Encoding::Json));
        assert_eq!((Op::KIND, Op::ENCODING), ("Op", Encoding::Json));
        assert_eq!((Tick::KIND, Tick::ENCODING), ("tick", Encoding::Postcard));
        assert_eq!(Counter::ENCODING, Encoding::Postcard);
        assert_eq!(Manual::ENCODING, Encoding::Postcard);
    }

    #[test]
    fn json_bodies_are_utf8_json_text() -> Result<()> {
        let order = Order {
            id: 7,
            item: "tea".to_string(),
            note: None,
        };
        assert_eq!(encode(&order)?, br#"{"id":7,"item":"tea","note":null}"#);
        assert_eq!(encode(&Op::Add(5))?, br#"{"Add":5}"#);
        assert_eq!(encode(&Op::Get)?, br#""Get""#);
        assert_eq!(
            encode(&Tick)?,
            [] as [u8; 0],
            "postcard types stay postcard"
        );
        assert_eq!(encode(&Manual(3))?, [3]);
        Ok(())
    }

    #[test]
    fn json_written_by_other_languages_decodes() -> Result<()> {
        // What Python's `json.dumps` or JS's `JSON.stringify` might send: other field order,
        // whitespace, escapes, a missing optional field and an unknown one.
        let body = " {\"item\": \"th\\u00e9 \u{1f375}\", \"extra\": [1, 2], \"id\": 42}\n";
        let order = decode::<Order>("order", body.as_bytes())?;
        let expected = Order {
            id: 42,
            item: "thé \u{1f375}".to_string(),
            note: None,
        };
        assert_eq!(order, expected);
        Ok(())
    }

    #[test]
    fn json_round_trips_through_envelopes() -> Result<()> {
        let order = Order {
            id: 1,
            item: "cake".to_string(),
            note: Some("no nuts".to_string()),
        };
        let env = Envelope::of(None, &order)?;
        assert_eq!(env.kind, "order");
        assert!(env.is::<Order>() && !env.is::<Op>());
        assert!(std::str::from_utf8(&env.body).is_ok());
        assert_eq!(env.decode::<Order>()?, order);
        let env = Envelope::of(None, &Op::Add(9))?;
        assert_eq!(env.decode::<Op>()?, Op::Add(9));
        Ok(())
    }

    #[test]
    fn json_kind_mismatch_and_malformed_bodies_are_errors() {
        let error = decode::<Order>("Order", br#"{"id":1,"item":"x"}"#)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("expected a `order` message, got `Order`")
        );
        for body in [
            &b""[..],
            b"not json",
            br#"{"id":-1,"item":"x"}"#,
            br#"{"item":"x"}"#,
            br#"{"id":1,"item":"x"} {}"#,
            b"\xff",
        ] {
            let error = decode::<Order>("order", body).err().map(|e| e.to_string());
            assert!(
                error
                    .as_deref()
                    .is_some_and(|e| e.starts_with("malformed `order` JSON body: ")),
                "{body:?}: {error:?}"
            );
        }
        assert!(decode::<Op>("Op", br#"{"Mul":2}"#).is_err());
    }

    #[test]
    fn non_finite_floats_become_json_null() -> Result<()> {
        #[derive(Serialize, Deserialize)]
        struct Reading {
            value: f64,
        }
        crate::json_message!(Reading = "reading");
        // serde_json writes non-finite floats as `null`, which then fails to decode.
        let body = encode(&Reading { value: f64::NAN })?;
        assert_eq!(body, br#"{"value":null}"#);
        assert!(decode::<Reading>("reading", &body).is_err());
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
