//! How a pattern supervises the children it spawns (a pipeline's stages, a pod manager's
//! pods): the `strategy` field of their configuration, in JSON either a directive's name
//! (`"restart"`) or an object (`{"directive": "restart", "max_restarts": 5, "within_ms":
//! 1000}`), every field but `directive` defaulted as in [`Strategy`].

use serde::{Deserialize, Serialize};

use crate::bindings::mote::actor::types::{Directive, Strategy};

/// What happens to a child that fails (one-for-one: its siblings are left alone).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    /// A fresh instance at the same address, with the same mailbox (the failed message is
    /// dropped).
    #[default]
    Restart,
    /// Drop the failed message and go on with the same state (a trap restarts instead).
    Resume,
    /// Stop the child.
    Stop,
    /// Fail the pattern itself, for its own parent to decide.
    Escalate,
}

/// A pattern's strategy for its children, as its configuration gives it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(from = "Repr")]
pub struct Supervision {
    /// The directive for a failed child.
    pub directive: OnFailure,
    /// Restarts of one child allowed within `within_ms` (default 3); one more escalates.
    pub max_restarts: u32,
    /// The window, in milliseconds, over which restarts are counted (default 10000).
    pub within_ms: u64,
    /// The first restart delay in milliseconds, doubling per restart (default 10).
    pub backoff_min_ms: u64,
    /// The longest restart delay in milliseconds (default 1000).
    pub backoff_max_ms: u64,
}

impl Supervision {
    /// `directive` with the host's default limits and backoff.
    pub fn new(directive: OnFailure) -> Self {
        Supervision {
            directive,
            max_restarts: Strategy::DEFAULT_MAX_RESTARTS,
            within_ms: Strategy::DEFAULT_WITHIN_MS,
            backoff_min_ms: Strategy::DEFAULT_BACKOFF_MIN_MS,
            backoff_max_ms: Strategy::DEFAULT_BACKOFF_MAX_MS,
        }
    }

    /// The host strategy this stands for (one-for-one).
    pub fn strategy(&self) -> Strategy {
        let directive = match self.directive {
            OnFailure::Restart => Directive::Restart,
            OnFailure::Resume => Directive::Resume,
            OnFailure::Stop => Directive::Stop,
            OnFailure::Escalate => Directive::Escalate,
        };
        Strategy::one_for_one(directive)
            .restarts(self.max_restarts, self.within_ms)
            .backoff(self.backoff_min_ms, self.backoff_max_ms)
    }
}

impl Default for Supervision {
    /// Restart, with the host's default limits.
    fn default() -> Self {
        Supervision::new(OnFailure::Restart)
    }
}

/// The JSON forms: a directive's name, or an object.
#[derive(Deserialize)]
#[serde(untagged)]
enum Repr {
    Name(OnFailure),
    Full {
        #[serde(default)]
        directive: OnFailure,
        #[serde(default = "max_restarts")]
        max_restarts: u32,
        #[serde(default = "within_ms")]
        within_ms: u64,
        #[serde(default = "backoff_min_ms")]
        backoff_min_ms: u64,
        #[serde(default = "backoff_max_ms")]
        backoff_max_ms: u64,
    },
}

fn max_restarts() -> u32 {
    Strategy::DEFAULT_MAX_RESTARTS
}

fn within_ms() -> u64 {
    Strategy::DEFAULT_WITHIN_MS
}

fn backoff_min_ms() -> u64 {
    Strategy::DEFAULT_BACKOFF_MIN_MS
}

fn backoff_max_ms() -> u64 {
    Strategy::DEFAULT_BACKOFF_MAX_MS
}

impl From<Repr> for Supervision {
    fn from(repr: Repr) -> Self {
        match repr {
            Repr::Name(directive) => Supervision::new(directive),
            Repr::Full {
                directive,
                max_restarts,
                within_ms,
                backoff_min_ms,
                backoff_max_ms,
            } => Supervision {
                directive,
                max_restarts,
                within_ms,
                backoff_min_ms,
                backoff_max_ms,
            },
        }
    }
}

/// A child's init as a pattern's configuration gives it: a JSON string is passed as its
/// UTF-8 text, `null` (or nothing) as no bytes, any other value as its JSON text.
pub fn init_bytes(init: &serde_json::Value) -> Vec<u8> {
    match init {
        serde_json::Value::Null => Vec::new(),
        serde_json::Value::String(text) => text.clone().into_bytes(),
        other => serde_json::to_vec(other).unwrap_or_default(),
    }
}

/// The longest child name a pattern gives, in bytes.
pub const MAX_CHILD_NAME: usize = 128;

/// Whether `name` may name a pattern's child (a pod, a pipeline): 1 to [`MAX_CHILD_NAME`]
/// bytes, no `/`, `#` or control characters, not `.` or `..`.
pub fn valid_child_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_CHILD_NAME
        && name != "."
        && name != ".."
        && !name.chars().any(|c| c == '/' || c == '#' || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strategy_is_a_name_or_an_object_with_defaults() {
        let named: Supervision = serde_json::from_str(r#""resume""#).unwrap();
        assert_eq!(named, Supervision::new(OnFailure::Resume));
        let full: Supervision =
            serde_json::from_str(r#"{"directive": "stop", "max_restarts": 9}"#).unwrap();
        assert_eq!(full.directive, OnFailure::Stop);
        assert_eq!(full.max_restarts, 9);
        assert_eq!(full.within_ms, Strategy::DEFAULT_WITHIN_MS);
        let strategy = full.strategy();
        assert_eq!(strategy.directive, Directive::Stop);
        assert_eq!(strategy.max_restarts, 9);
        assert!(serde_json::from_str::<Supervision>(r#""reboot""#).is_err());
        // It writes the object form, which reads back the same.
        let text = serde_json::to_string(&full).unwrap();
        assert_eq!(serde_json::from_str::<Supervision>(&text).unwrap(), full);
    }

    #[test]
    fn child_names_are_single_path_segments() {
        assert!(valid_child_name("acme-1"));
        for bad in ["", ".", "..", "a/b", "a#1", "a\n"] {
            assert!(!valid_child_name(bad), "{bad:?}");
        }
        assert!(!valid_child_name(&"x".repeat(MAX_CHILD_NAME + 1)));
    }

    #[test]
    fn a_child_init_is_text_or_json() {
        assert_eq!(init_bytes(&serde_json::Value::Null), b"");
        assert_eq!(init_bytes(&serde_json::json!("a b")), b"a b");
        assert_eq!(init_bytes(&serde_json::json!({"add": 1})), br#"{"add":1}"#);
    }
}
