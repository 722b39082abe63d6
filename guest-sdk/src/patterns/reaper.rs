//! `reaper`: Dust's ReaperActor (and, with a [`Reduce`], its ReapTransformServiceActor);
//! Akka's scatter-gather, generalised from "first completed" to "all, the first `want`, or
//! whatever came by the deadline". One reaper serves many gathers at once.
//!
//! A [`Gather`] asks each of its targets the same request, with the gather's deadline as the
//! ask timeout, and collects the replies until all came, `want` of them came, or the deadline
//! passed. The requester then gets a [`Gathered`] (each reply with its sender path, kind and
//! body, plus the targets that timed out), or with a [`Reduce`] a [`Reduced`] (one value
//! computed from the replies). Past a bound ([`Config::max_gathers`], [`Config::max_targets`],
//! [`Config::max_asks`]) a gather is answered with [`Refused`], naming the bound.
//!
//! Bodies travel inside the JSON messages as a [`Payload`]: a JSON body as a JSON value
//! (`"body"`), any other (a Rust actor's postcard, say) as base64 text (`"base64"`).
//!
//! Init: [`Config`] as JSON. Control kinds: [`Gather`] (answered with [`Gathered`],
//! [`Reduced`] or [`Refused`]) and [`GetStatus`] (answered with [`Status`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Encoding, Message};

/// The module name of the component (`builtin = "reaper"`).
pub const MODULE: &str = "reaper";

/// The reaper's configuration, its spawn `init` (JSON; `{}` takes every default).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Config {
    /// Gathers in progress at most; one more is refused (default 1000).
    #[serde(default = "thousand")]
    pub max_gathers: u32,
    /// Targets of one gather at most; a longer list is refused (default 1000).
    #[serde(default = "thousand")]
    pub max_targets: u32,
    /// Asks awaiting a reply at most, over all gathers (late ones of finished gathers
    /// included); a gather that would pass it is refused (default 1000, the host's default
    /// ask quota per actor).
    #[serde(default = "thousand")]
    pub max_asks: u32,
    /// The deadline of a gather that names none, in milliseconds (default 5000).
    #[serde(default = "five_seconds")]
    pub deadline_ms: u64,
    /// Reduce every gather that names no reduction of its own (Dust's
    /// ReapTransformServiceActor); by default a gather replies with all it gathered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduce: Option<Reduce>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_gathers: thousand(),
            max_targets: thousand(),
            max_asks: thousand(),
            deadline_ms: five_seconds(),
            reduce: None,
        }
    }
}

fn thousand() -> u32 {
    1000
}

fn five_seconds() -> u64 {
    5000
}

/// A message body inside a JSON message: a JSON value (`"body"`), or any other bytes as
/// standard base64 (`"base64"`); neither is the empty body. Exactly one may be present.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Payload {
    /// The body, if it is JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// The body, if it is not JSON: its bytes in standard base64 (with padding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
}

impl Payload {
    /// A body as it travels: a JSON value if it is JSON text, base64 otherwise.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        if bytes.is_empty() {
            return Payload::default();
        }
        match serde_json::from_slice::<Value>(bytes) {
            Ok(value) => Payload {
                body: Some(value),
                base64: None,
            },
            Err(_) => Payload {
                body: None,
                base64: Some(base64_encode(bytes)),
            },
        }
    }

    /// The body of a typed message, as its encoding makes it.
    pub fn of<M: Message>(msg: &M) -> crate::Result<Self> {
        let bytes = crate::encode(msg)?;
        Ok(match M::ENCODING {
            Encoding::Json => Payload {
                body: Some(serde_json::from_slice(&bytes)?),
                base64: None,
            },
            _ => Payload {
                body: None,
                base64: Some(base64_encode(&bytes)),
            },
        })
    }

    /// The body's bytes (a JSON value as compact JSON text); an error for bad base64 or
    /// both forms at once.
    pub fn to_bytes(&self) -> crate::Result<Vec<u8>> {
        match (&self.body, &self.base64) {
            (Some(_), Some(_)) => Err(crate::Error::msg(
                "a body is either `body` (JSON) or `base64`, not both",
            )),
            (Some(value), None) => Ok(serde_json::to_vec(value)?),
            (None, Some(text)) => base64_decode(text),
            (None, None) => Ok(Vec::new()),
        }
    }

    /// The JSON value of the body, if it is JSON.
    pub fn json(&self) -> Option<&Value> {
        self.body.as_ref()
    }
}

/// Asks every target and gathers the replies (kind `reaper.gather`); the requester (its
/// sender) gets [`Gathered`], [`Reduced`] or [`Refused`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Gather {
    /// The actors to ask: absolute paths (`/user/a`), or relative to the reaper. The same
    /// path twice is asked twice.
    pub targets: Vec<String>,
    /// The kind of the request each target is asked.
    pub kind: String,
    /// The request's body.
    #[serde(flatten)]
    pub payload: Payload,
    /// How long to wait for replies, in milliseconds (default: the config's `deadline_ms`):
    /// each target's ask timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// Reply as soon as this many replies came (at least 1; more than the targets means
    /// all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub want: Option<u32>,
    /// Reduce the replies to one value (default: the config's, else none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduce: Option<Reduce>,
}

impl Gather {
    /// Asks `targets` the typed request `msg` with this deadline (in milliseconds).
    pub fn new<M: Message>(
        targets: impl IntoIterator<Item = impl Into<String>>,
        msg: &M,
        deadline_ms: u64,
    ) -> crate::Result<Self> {
        Ok(Gather {
            targets: targets.into_iter().map(Into::into).collect(),
            kind: M::KIND.to_string(),
            payload: Payload::of(msg)?,
            deadline_ms: Some(deadline_ms),
            want: None,
            reduce: None,
        })
    }

    /// This gather, replying as soon as `n` replies came.
    #[must_use]
    pub fn want(self, n: u32) -> Self {
        Gather {
            want: Some(n),
            ..self
        }
    }

    /// This gather, replying with the replies reduced to one value.
    #[must_use]
    pub fn reduce(self, reduce: Reduce) -> Self {
        Gather {
            reduce: Some(reduce),
            ..self
        }
    }
}

/// One target's reply, in [`Gathered::replies`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Reply {
    /// The target, as the gather named it.
    pub from: String,
    /// The reply's kind.
    pub kind: String,
    /// The reply's body.
    #[serde(flatten)]
    pub payload: Payload,
}

impl Reply {
    /// The reply decoded as the typed message `M` (by its kind and encoding).
    pub fn decode<M: Message>(&self) -> crate::Result<M> {
        crate::decode(&self.kind, &self.payload.to_bytes()?)
    }
}

/// A target the reaper could not ask at all (in [`Gathered::failed`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// The target, as the gather named it.
    pub target: String,
    /// Why: the host's refusal, in words.
    pub error: String,
}

/// What a gather collected (kind `reaper.gathered`), the reply to a [`Gather`] without a
/// reduction.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Gathered {
    /// The replies, in the order they came.
    pub replies: Vec<Reply>,
    /// The targets that had not replied by the deadline, in the gather's order.
    pub timed_out: Vec<String>,
    /// The targets the reaper could not ask (a bad path, the host's ask quota).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<Failed>,
    /// Whether the gather got what it wanted: a reply from every target, or `want` replies.
    pub complete: bool,
}

/// What a gather reduced its replies to (kind `reaper.reduced`), the reply to a [`Gather`]
/// with a reduction.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Reduced {
    /// The reduction's result.
    pub value: Value,
    /// How many replies it was computed from (replies without the field, or not JSON,
    /// are left out; `count` counts every reply).
    pub from: u32,
    /// The targets that had not replied by the deadline, in the gather's order.
    pub timed_out: Vec<String>,
    /// The targets the reaper could not ask.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<Failed>,
    /// Whether the gather got what it wanted: a reply from every target, or `want` replies.
    pub complete: bool,
}

/// A gather the reaper did not take on (kind `reaper.refused`): it would pass a bound.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The bound: `max_gathers`, `max_targets` or `max_asks`.
    pub bound: String,
    /// The bound's value.
    pub limit: u32,
    /// In words.
    pub reason: String,
}

/// How to reduce the replies of a gather to one value (Dust's ReapTransformServiceActor's
/// transform, as a small fixed set). `field` picks a value out of each JSON reply body: a
/// JSON pointer (`/stats/n`), or a top-level key (`n`); empty (the default) is the whole
/// body. JSON: `{"op": "sum", "field": "n"}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Reduce {
    /// The sum of the field over the replies where it is a number (0 if none).
    Sum {
        /// The field.
        #[serde(default)]
        field: String,
    },
    /// How many replies came.
    Count,
    /// The field of every reply that has it, in the order they came (an array).
    Collect {
        /// The field.
        #[serde(default)]
        field: String,
    },
    /// The field of the first reply that has it (`null` if none).
    First {
        /// The field.
        #[serde(default)]
        field: String,
    },
    /// The greatest of the field where it is a number (`null` if none).
    Max {
        /// The field.
        #[serde(default)]
        field: String,
    },
    /// The least of the field where it is a number (`null` if none).
    Min {
        /// The field.
        #[serde(default)]
        field: String,
    },
}

impl Reduce {
    /// The sum of `field`.
    pub fn sum(field: impl Into<String>) -> Self {
        Reduce::Sum {
            field: field.into(),
        }
    }

    /// The reduction of `replies` (in arrival order): the value and how many replies it
    /// was computed from.
    pub fn apply(&self, replies: &[Reply]) -> (Value, u32) {
        let field = match self {
            Reduce::Count => return (Value::from(replies.len()), count(replies.len())),
            Reduce::Sum { field }
            | Reduce::Collect { field }
            | Reduce::First { field }
            | Reduce::Max { field }
            | Reduce::Min { field } => field,
        };
        let values = replies
            .iter()
            .filter_map(|r| pick(r.payload.json()?, field));
        match self {
            Reduce::Count => unreachable!("returned above"),
            Reduce::Collect { .. } => {
                let all: Vec<Value> = values.cloned().collect();
                let n = count(all.len());
                (Value::Array(all), n)
            }
            Reduce::First { .. } => match values.into_iter().next() {
                Some(v) => (v.clone(), 1),
                None => (Value::Null, 0),
            },
            Reduce::Sum { .. } => sum(values.filter(|v| v.is_number())),
            Reduce::Max { .. } => extreme(values, core::cmp::Ordering::Greater),
            Reduce::Min { .. } => extreme(values, core::cmp::Ordering::Less),
        }
    }
}

/// A length as the `u32` the messages carry (saturating).
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The value at `field` of `body`: a JSON pointer if it starts with `/`, else a key.
fn pick<'a>(body: &'a Value, field: &str) -> Option<&'a Value> {
    if field.is_empty() || field.starts_with('/') {
        body.pointer(field)
    } else {
        body.get(field)
    }
}

/// The sum of numbers: exact while they are integers, else a float.
fn sum<'a>(numbers: impl Iterator<Item = &'a Value>) -> (Value, u32) {
    let mut n = 0u32;
    let mut exact: Option<i128> = Some(0);
    let mut float = 0f64;
    for v in numbers {
        n += 1;
        let int = v
            .as_i64()
            .map(i128::from)
            .or_else(|| v.as_u64().map(i128::from));
        exact = match (exact, int) {
            (Some(total), Some(i)) => total.checked_add(i),
            _ => None,
        };
        float += v.as_f64().unwrap_or(0.0);
    }
    let value = match exact {
        Some(total) => i64::try_from(total)
            .map(Value::from)
            .or_else(|_| u64::try_from(total).map(Value::from))
            .unwrap_or_else(|_| Value::from(float)),
        None => Value::from(float),
    };
    (value, n)
}

/// The greatest (`Greater`) or least (`Less`) number, compared as floats, kept as it came.
fn extreme<'a>(values: impl Iterator<Item = &'a Value>, want: core::cmp::Ordering) -> (Value, u32) {
    let mut best: Option<&Value> = None;
    let mut n = 0u32;
    for v in values {
        let Some(x) = v.as_f64() else { continue };
        n += 1;
        let better = best
            .and_then(Value::as_f64)
            .is_none_or(|b| x.partial_cmp(&b) == Some(want));
        if better {
            best = Some(v);
        }
    }
    (best.cloned().unwrap_or(Value::Null), n)
}

/// Asks for a [`Status`] (kind `reaper.get-status`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct GetStatus {}

/// How the reaper is doing (kind `reaper.status`), the reply to [`GetStatus`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Status {
    /// Gathers in progress.
    pub gathering: u32,
    /// Asks awaiting a reply (those of finished gathers included, until they end).
    pub asks_pending: u32,
    /// Gathers answered so far (refused ones not included).
    pub gathered: u64,
    /// Gathers refused so far.
    pub refused: u64,
}

crate::json_message!(
    Config = "reaper.config",
    Gather = "reaper.gather",
    Gathered = "reaper.gathered",
    Reduced = "reaper.reduced",
    Refused = "reaper.refused",
    GetStatus = "reaper.get-status",
    Status = "reaper.status",
);

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `bytes` in standard base64, with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The bytes of standard base64 text (padding optional, no whitespace).
pub fn base64_decode(text: &str) -> crate::Result<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let digit = ALPHABET.iter().position(|&a| a == c).ok_or_else(|| {
            crate::Error::msg(format!("bad base64 character {:?}", char::from(c)))
        })?;
        acc = (acc << 6) | digit as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits >= 6 {
        return Err(crate::Error::msg("truncated base64"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_matches_the_standard_alphabet() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(base64_encode(&[0xff, 0xfe, 0x01, 0x02]), "//4BAg==");
        for n in 0..40u8 {
            let bytes: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37)).collect();
            assert_eq!(base64_decode(&base64_encode(&bytes)).unwrap(), bytes);
        }
        assert!(base64_decode("Zm9v!").is_err());
        assert!(base64_decode("Z").is_err());
    }

    #[test]
    fn a_payload_carries_json_as_a_value_and_other_bytes_as_base64() {
        let json = Payload::of_bytes(br#"{"n": 1}"#);
        assert_eq!(json.body, Some(serde_json::json!({"n": 1})));
        assert_eq!(json.to_bytes().unwrap(), br#"{"n":1}"#);
        let raw = Payload::of_bytes(&[2, 5]);
        assert_eq!(raw.base64.as_deref(), Some("AgU="));
        assert_eq!(raw.to_bytes().unwrap(), [2, 5]);
        assert_eq!(Payload::of_bytes(b"").to_bytes().unwrap(), b"");
        let both = Payload {
            body: Some(Value::Null),
            base64: Some(String::new()),
        };
        assert!(both.to_bytes().is_err());
    }

    #[test]
    fn a_gather_reads_and_writes_the_documented_json() {
        let gather: Gather = serde_json::from_str(
            r#"{"targets": ["/user/a"], "kind": "get", "body": {"x": 1}, "want": 1,
                "reduce": {"op": "sum", "field": "n"}}"#,
        )
        .unwrap();
        assert_eq!(gather.payload.body, Some(serde_json::json!({"x": 1})));
        assert_eq!(gather.want, Some(1));
        assert_eq!(gather.reduce, Some(Reduce::sum("n")));
        assert_eq!(gather.deadline_ms, None);
        let count: Reduce = serde_json::from_str(r#"{"op": "count"}"#).unwrap();
        assert_eq!(count, Reduce::Count);
        let config: Config = serde_json::from_str("{}").unwrap();
        assert_eq!(config, Config::default());
    }

    fn reply(body: Value) -> Reply {
        Reply {
            from: "/user/x".into(),
            kind: "k".into(),
            payload: Payload {
                body: Some(body),
                base64: None,
            },
        }
    }

    #[test]
    fn reductions_pick_their_field_and_skip_replies_without_it() {
        use serde_json::json;
        let replies = vec![
            reply(json!({"n": 3})),
            reply(json!({"n": 4.5})),
            reply(json!({"m": 1})),
            reply(json!({"n": -2})),
            Reply {
                from: "/user/raw".into(),
                kind: "k".into(),
                payload: Payload::of_bytes(&[1, 2]),
            },
        ];
        assert_eq!(Reduce::sum("n").apply(&replies), (json!(5.5), 3));
        assert_eq!(Reduce::sum("/n").apply(&replies[..1]), (json!(3), 1));
        assert_eq!(Reduce::sum("n").apply(&[]), (json!(0), 0));
        assert_eq!(Reduce::Count.apply(&replies), (json!(5), 5));
        let max = Reduce::Max { field: "n".into() };
        assert_eq!(max.apply(&replies), (json!(4.5), 3));
        let min = Reduce::Min { field: "n".into() };
        assert_eq!(min.apply(&replies), (json!(-2), 3));
        let first = Reduce::First { field: "m".into() };
        assert_eq!(first.apply(&replies), (json!(1), 1));
        let collect = Reduce::Collect {
            field: String::new(),
        };
        assert_eq!(
            collect.apply(&replies[..2]).0,
            json!([{"n": 3}, {"n": 4.5}])
        );
        let big = [reply(json!(u64::MAX)), reply(json!(1))];
        assert_eq!(Reduce::sum("").apply(&big).0, json!(u64::MAX as f64));
    }
}
