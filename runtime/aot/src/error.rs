//! Why an executable could not be made or loaded.

use crate::image::LoadError;
use crate::FORMAT_VERSION;
use ferrax_runtime::RuntimeError;

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("not a ferrax artifact (its first bytes are not the magic number)")]
    NotAnArtifact,
    #[error("artifact format version {found}; this build reads version {FORMAT_VERSION}")]
    Version { found: u32 },
    #[error("the artifact is truncated: {0}")]
    Truncated(&'static str),
    #[error("the artifact is corrupted: its content does not match its SHA-256")]
    Corrupted,
    #[error("the artifact is malformed: {0}")]
    Malformed(String),
    #[error("the program calls host functions of the process that traced it (debug or pure callbacks), which an artifact cannot hold")]
    HostCallback,
    #[error("the artifact was compiled for {wanted}; this machine lacks {missing}")]
    Target { wanted: String, missing: String },
    #[error("this is {found}; load it {how}")]
    Kind { found: String, how: &'static str },
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("the artifact's GPU program did not load: {0}")]
    GpuLoad(String),
    #[error("the artifact's GPU program failed: {0}")]
    GpuRun(String),
    #[error("the inputs do not match the artifact's: {0}")]
    Inputs(String),
    #[error(transparent)]
    Run(#[from] RuntimeError),
}
