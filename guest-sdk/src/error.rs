//! [`Error`]: the one error type of actor code, a readable message like `anyhow::Error`.

use core::fmt;

use crate::bindings::mote::actor::persistence::PersistError;
use crate::bindings::mote::actor::types::{Quota, SendError, SpawnError};

/// Result of actor code; the error defaults to [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// An error raised by actor code and reported to the host as text.
///
/// Any `std::error::Error` converts into it, so `?` works on most fallible calls; plain text
/// goes through [`Error::msg`]. It deliberately does not implement `std::error::Error` itself,
/// which is what keeps that blanket conversion coherent. An error from a
/// [`persistence`](crate::persistence) call also keeps the host's [`PersistError`].
pub struct Error {
    message: String,
    persist: Option<PersistError>,
    /// A message body did not decode: the sender's problem, not the actor's.
    malformed: bool,
}

impl Error {
    /// Creates an error from any displayable message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            persist: None,
            malformed: false,
        }
    }

    /// Marks the error as a message body that did not decode: the runtime rejects such a
    /// message (a dead letter) instead of failing the actor.
    #[must_use]
    pub fn into_malformed(self) -> Self {
        Self {
            malformed: true,
            ..self
        }
    }

    /// Whether this is a message body that did not decode.
    pub fn is_malformed(&self) -> bool {
        self.malformed
    }

    /// Prefixes the message with what was being done, as in `context: message`.
    #[must_use]
    pub fn context(self, context: impl fmt::Display) -> Self {
        Self {
            message: format!("{context}: {}", self.message),
            ..self
        }
    }

    /// The message text.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The host's reason if a persistence call was refused (`None` for any other error).
    pub fn persist_error(&self) -> Option<&PersistError> {
        self.persist.as_ref()
    }

    /// Turns a refused send into a readable error.
    pub(crate) fn send(to: &str, error: SendError) -> Self {
        Self::refused(format_args!("cannot send to `{to}`"), error)
    }

    /// Turns a refused send into a readable error, `action` saying what was attempted.
    pub(crate) fn refused(action: impl fmt::Display, error: SendError) -> Self {
        match error {
            SendError::InvalidPath(path) => Self::msg(format!("{action}: invalid path `{path}`")),
            SendError::TooLarge(size) => {
                Self::msg(format!("{action}: message of {size} bytes is too large"))
            }
            SendError::ReservedKind(kind) => Self::msg(format!(
                "{action}: kind `{kind}` is the host's own (kinds starting `mote.` are reserved)"
            )),
            SendError::Quota(quota) => Self::msg(format!("{action}: {}", quota_text(quota))),
        }
    }

    /// Turns a refused spawn into a readable error.
    pub(crate) fn spawn(name: &str, module: &str, error: SpawnError) -> Self {
        let why = match error {
            SpawnError::InvalidName(name) => format!("invalid child name `{name}`"),
            SpawnError::NameTaken(name) => format!("a live child is already named `{name}`"),
            SpawnError::UnknownModule(module) => format!("no module `{module}` is deployed"),
            SpawnError::Instantiation(why) => format!("instantiation failed: {why}"),
            SpawnError::Stopping => "this actor is stopping".to_string(),
            SpawnError::Quota(quota) => quota_text(quota),
        };
        Self::msg(format!(
            "cannot spawn `{name}` from module `{module}`: {why}"
        ))
    }

    /// Turns a refused persistence call into a readable error that keeps the host's reason,
    /// `action` saying what was attempted.
    pub(crate) fn persist(action: impl fmt::Display, error: PersistError) -> Self {
        let why = match &error {
            PersistError::Unavailable => "the host runs without a database".to_string(),
            PersistError::TooLarge(size) => format!("{size} bytes is too large"),
            PersistError::InvalidId(id) => format!("invalid persistence id `{id}`"),
            PersistError::NotRecovered => {
                "this actor is not persistent: call `recover` first".to_string()
            }
            PersistError::Storage(why) => format!("storage failed: {why}"),
            PersistError::NotOwned(id) => {
                format!("persistence id `{id}` is in another owner's scope")
            }
            PersistError::Quota(quota) => quota_text(*quota),
            PersistError::ReservedKind(kind) => {
                format!("kind `{kind}` is the host's own (kinds starting `mote.` are reserved)")
            }
        };
        Self {
            message: format!("{action}: {why}"),
            persist: Some(error),
            malformed: false,
        }
    }
}

/// What a refusal by quota means, in words.
fn quota_text(quota: Quota) -> String {
    let what = match quota {
        Quota::Timers => "too many timers pending",
        Quota::TimerPeriod => "the period is shorter than the host allows",
        Quota::Reminders => "too many reminders pending",
        Quota::Subscriptions => "too many topics subscribed",
        Quota::Groups => "too many groups joined",
        Quota::Asks => "too many asks pending",
        Quota::AskDeadline => "the deadline is longer than the host allows",
        Quota::Descendants => "too many live descendants",
        Quota::Watches => "too many incarnations watched",
        Quota::InitSize => "the init is larger than the host's message limit",
        Quota::Aliases => "too many aliases",
        Quota::NameLength => "a name, path or kind is longer than the host allows",
    };
    format!("refused by quota: {what}")
}

impl<E: std::error::Error> From<E> for Error {
    fn from(error: E) -> Self {
        Self::msg(error)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.message, f)
    }
}

impl From<Error> for String {
    fn from(error: Error) -> Self {
        error.message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_errors_convert_with_question_mark() {
        fn parse(text: &str) -> Result<u32> {
            Ok(text.parse::<u32>()?)
        }
        let error = parse("nope").err().map(|e| e.to_string());
        assert_eq!(error.as_deref(), Some("invalid digit found in string"));
    }

    #[test]
    fn context_prefixes_the_message() {
        let error = Error::msg("disk full").context("saving state");
        assert_eq!(error.message(), "saving state: disk full");
        assert_eq!(format!("{error:?}"), "\"saving state: disk full\"");
    }

    #[test]
    fn wit_errors_read_well() {
        let error = Error::send("../x", SendError::TooLarge(9));
        assert_eq!(
            error.to_string(),
            "cannot send to `../x`: message of 9 bytes is too large"
        );
        let error = Error::spawn("w", "counter", SpawnError::NameTaken("w".into()));
        assert_eq!(
            error.to_string(),
            "cannot spawn `w` from module `counter`: a live child is already named `w`"
        );
        assert_eq!(error.persist_error(), None);
    }

    #[test]
    fn persist_errors_read_well_and_keep_their_reason() {
        let error = Error::persist("cannot persist an event", PersistError::TooLarge(70_000));
        assert_eq!(
            error.to_string(),
            "cannot persist an event: 70000 bytes is too large"
        );
        assert_eq!(error.persist_error(), Some(&PersistError::TooLarge(70_000)));
        let error = Error::persist("cannot save", PersistError::NotRecovered).context("`Add`");
        assert_eq!(
            error.message(),
            "`Add`: cannot save: this actor is not persistent: call `recover` first"
        );
        assert_eq!(error.persist_error(), Some(&PersistError::NotRecovered));
        let texts = [
            (
                PersistError::Unavailable,
                "x: the host runs without a database",
            ),
            (
                PersistError::InvalidId(String::new()),
                "x: invalid persistence id ``",
            ),
            (
                PersistError::Storage("disk full".into()),
                "x: storage failed: disk full",
            ),
        ];
        for (reason, text) in texts {
            assert_eq!(Error::persist("x", reason).to_string(), text);
        }
    }
}
