use crate::checkpoint::CheckpointError;
use ferrax_compiler::pipeline::PipelineError;
use ferrax_ir::{ParseError, VerifyError};
use ferrax_runtime::RuntimeError;
use std::panic::Location;
use std::sync::Arc;

/// Errors from tracing and running user functions. Mistakes made inside a user's closure carry
/// the source location of the offending call in the user's own code.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("{location}: {message}")]
    Trace {
        location: &'static Location<'static>,
        message: String,
    },
    #[error("input structure mismatch: expected {expected}, found {found}")]
    Tree { expected: String, found: String },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error(transparent)]
    Simplify(#[from] ferrax_compiler::simplify::SimplifyError),
    #[error("compilation failed: {0}")]
    Backend(String),
    #[error("device: {0}")]
    Device(String),
    /// A checkpoint that could not be saved or loaded, so that `?` on [`crate::checkpoint`]'s
    /// functions works in functions returning [`Result`]. Shared, as errors are cloned.
    #[error(transparent)]
    Checkpoint(Arc<CheckpointError>),
    #[error("artifact: {0}")]
    Artifact(String),
}

impl From<CheckpointError> for Error {
    /// A checkpoint error, or the tree error it wraps as it was.
    fn from(e: CheckpointError) -> Error {
        match e {
            CheckpointError::Tree(e) => e,
            e => Error::Checkpoint(Arc::new(e)),
        }
    }
}

impl From<PipelineError> for Error {
    fn from(e: PipelineError) -> Error {
        match e {
            PipelineError::Simplify(e) => Error::Simplify(e),
            PipelineError::Runtime(e) => Error::Runtime(e),
            e @ (PipelineError::Cpu(_) | PipelineError::Gpu(_)) => Error::Backend(e.to_string()),
        }
    }
}

impl Error {
    /// The user source location an error points at, if it came from a traced operation.
    pub fn location(&self) -> Option<&'static Location<'static>> {
        match self {
            Error::Trace { location, .. } => Some(location),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
