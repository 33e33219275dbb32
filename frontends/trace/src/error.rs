use ferrax_compiler::pipeline::PipelineError;
use ferrax_ir::{DType, ParseError, VerifyError};
use ferrax_runtime::RuntimeError;
use std::panic::Location;
use std::path::PathBuf;
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
    /// A checkpoint that could not be saved or loaded, so that `?` on the checkpoint module's
    /// functions works in functions returning [`Result`]. Shared, as errors are cloned.
    #[error(transparent)]
    Checkpoint(Arc<CheckpointError>),
    #[error("artifact: {0}")]
    Artifact(String),
}

/// Why a checkpoint could not be saved or loaded. Errors about one tensor name it by its path.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file ends before the data its header promises.
    #[error("truncated {format} file: {what}")]
    Truncated { format: &'static str, what: String },
    /// A header (or zip directory) that does not parse or is inconsistent.
    #[error("bad {format} header: {message}")]
    Header {
        format: &'static str,
        message: String,
    },
    #[error("tensor `{name}` is in the template but not in the file")]
    Missing { name: String },
    #[error("tensor `{name}` is in the file but not in the template")]
    Extra { name: String },
    #[error("tensor `{name}`: expected dtype {expected}, the file has {found}")]
    DType {
        name: String,
        expected: DType,
        found: String,
    },
    #[error("tensor `{name}`: expected shape {expected:?}, the file has {found:?}")]
    Shape {
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    /// Data that is present but invalid (a checksum, a bool byte) or a feature not supported.
    #[error("tensor `{name}`: {message}")]
    Data { name: String, message: String },
    #[error("two leaves of the tree have the path `{name}`")]
    Duplicate { name: String },
    /// A leaf to save without data (a tracer, a spec or a failed operation).
    #[error("leaf `{name}` has no data to save: {source}")]
    Leaf {
        name: String,
        #[source]
        source: Error,
    },
    #[error("tensor `{name}` needs {bytes} bytes, more than can be allocated")]
    TooLarge { name: String, bytes: u64 },
    #[error(transparent)]
    Tree(#[from] Error),
}

/// Errors are equal when their messages are (an I/O error has no other equality), which lets
/// [`Error`], which holds them, compare errors as it does.
impl PartialEq for CheckpointError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
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
            e @ (PipelineError::Unroll(_)
            | PipelineError::Cpu(_)
            | PipelineError::Gpu(_)
            | PipelineError::Type(_)) => Error::Backend(e.to_string()),
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
