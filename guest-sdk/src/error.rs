//! [`Error`]: the one error type of actor code, a readable message like `anyhow::Error`.

use core::fmt;

use crate::bindings::mote::actor::types::{SendError, SpawnError};

/// Result of actor code; the error defaults to [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// An error raised by actor code and reported to the host as text.
///
/// Any `std::error::Error` converts into it, so `?` works on most fallible calls; plain text
/// goes through [`Error::msg`]. It deliberately does not implement `std::error::Error` itself,
/// which is what keeps that blanket conversion coherent.
pub struct Error {
    message: String,
}

impl Error {
    /// Creates an error from any displayable message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
        }
    }

    /// Prefixes the message with what was being done, as in `context: message`.
    #[must_use]
    pub fn context(self, context: impl fmt::Display) -> Self {
        Self {
            message: format!("{context}: {}", self.message),
        }
    }

    /// The message text.
    pub fn message(&self) -> &str {
        &self.message
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
        };
        Self::msg(format!(
            "cannot spawn `{name}` from module `{module}`: {why}"
        ))
    }
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
    }
}
