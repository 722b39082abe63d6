//! Messages as the host carries them: the host never decodes a body.

use crate::address::Address;
use crate::trace::parent::TraceParent;

/// One message in flight: who sent it, what kind it is, and its opaque body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// The sending actor, `None` when sent from outside the system.
    pub sender: Option<Address>,
    /// The message kind; the Rust SDK uses the type name.
    pub kind: String,
    /// The encoded body (postcard for the Rust SDK).
    pub body: Vec<u8>,
    /// Set on a durable message: what its receiver acknowledges once it has handled it.
    pub(crate) receipt: Option<Receipt>,
    /// Sent on the receiver's urgent lane, ahead of its ordinary messages.
    pub(crate) urgent: bool,
    /// The span it was sent from, when traces are carried on: its handling continues that trace.
    /// Boxed: with traces off an envelope is 8 bytes larger, not 32 (w3 queues a million).
    trace: Option<Box<TraceParent>>,
}

impl Envelope {
    /// A message from `sender` (or from outside, `None`).
    pub fn new(sender: Option<Address>, kind: impl Into<String>, body: Vec<u8>) -> Self {
        Envelope {
            sender,
            kind: kind.into(),
            body,
            receipt: None,
            urgent: false,
            trace: None,
        }
    }

    /// The same (new) message, sent from the span `trace`.
    #[inline]
    pub(crate) fn traced(mut self, trace: Option<TraceParent>) -> Self {
        if let Some(trace) = trace {
            self.trace = Some(Box::new(trace));
        }
        self
    }

    /// The span it was sent from (or, once its cell took it, the span that handles it).
    pub(crate) fn trace(&self) -> Option<TraceParent> {
        self.trace.as_deref().copied()
    }

    /// Names the span it comes from, in the box it has if it has one.
    pub(crate) fn set_trace(&mut self, trace: Option<TraceParent>) {
        match (&mut self.trace, trace) {
            (Some(held), Some(trace)) => **held = trace,
            (held, trace) => *held = trace.map(Box::new),
        }
    }
}

/// The durable record behind a message, deleted (or advanced) when its receiver has handled it:
/// by the receiver's own commit if it is persistent, lazily otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Receipt {
    /// A row of the outbox.
    Outbox(u64),
    /// A firing of a reminder.
    Reminder(u64),
}

/// Why an actor stopped; handed to its `stopping` hook.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StopReason {
    /// Stopped by itself, its parent, the API or a poison pill.
    Normal,
    /// It failed with this error.
    Failure(String),
    /// Its parent failed with this error.
    ParentFailure(String),
    /// The host is shutting down.
    Shutdown,
}

impl StopReason {
    /// The reason its children stop with when an actor stops for `self`.
    pub(crate) fn for_children(&self) -> StopReason {
        match self {
            StopReason::Normal => StopReason::Normal,
            StopReason::Failure(e) | StopReason::ParentFailure(e) => {
                StopReason::ParentFailure(e.clone())
            }
            StopReason::Shutdown => StopReason::Shutdown,
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::Normal => f.write_str("normal"),
            StopReason::Failure(e) => write!(f, "failure: {e}"),
            StopReason::ParentFailure(e) => write!(f, "parent failure: {e}"),
            StopReason::Shutdown => f.write_str("shutdown"),
        }
    }
}
