//! Why a component cannot be instrumented for images.

/// Why a component cannot be instrumented for images.
#[derive(Debug, thiserror::Error)]
pub enum InstrumentError {
    /// The bytes are not a valid component.
    #[error("it is not a valid component")]
    Invalid(#[from] wasmparser::BinaryReaderError),
    /// The component has a shape whose state images cannot reach.
    #[error("{0}")]
    Unsupported(String),
}

/// A refusal of a shape images cannot reach, as an `Err`.
pub(super) fn unsupported<T>(why: impl Into<String>) -> Result<T, InstrumentError> {
    Err(InstrumentError::Unsupported(why.into()))
}
