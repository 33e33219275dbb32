//! The artifact container, shared by CPU and GPU artifacts. It is small and binary, so machine
//! code and PTX are stored as they are: a magic number, the format version, the SHA-256 of the
//! rest, then four length-prefixed sections: the plan as CBOR (serde, which every plan type
//! derives; a standard, self-describing binary encoding that carries every float exactly, the
//! infinities and NaNs of constants included, where JSON cannot), the code (a CPU artifact's
//! machine code and constant tables, a GPU artifact's PTX and any cubins) as raw bytes, and the compiler's
//! notes and the caller's metadata as they wrote them.
//!
//! An artifact is code: load only artifacts you built or trust. The hash detects corruption,
//! not a forger, who can recompute it.

use crate::error::ArtifactError;
use crate::gpu::{GpuRunPlan, GpuTarget};
use crate::image::CodeImage;
use crate::memory::MemoryReport;
use crate::plan::RunPlan;
use crate::target::CpuTarget;
use crate::FORMAT_VERSION;
use ferrax_ir::TensorType;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

const MAGIC: &[u8; 8] = b"FERRAXA\0";

/// How deep an artifact's regions may nest: as deep as the IR lets calls nest, so that loading,
/// running and dropping a program (each recursive over its regions) stays within the stack.
const MAX_REGION_DEPTH: usize = 64;

/// The parts of an artifact (the program's, then its regions') as a tree: each region's part
/// after the part whose call runs it, claimed once, at most [`MAX_REGION_DEPTH`] deep.
pub(crate) struct RegionTree {
    claimed: Vec<bool>,
    depth: Vec<usize>,
}

impl RegionTree {
    pub(crate) fn new(parts: usize) -> RegionTree {
        RegionTree {
            claimed: vec![false; parts],
            depth: vec![0; parts],
        }
    }

    /// Part `r` claimed as a region of part `k`, or what is wrong with that.
    pub(crate) fn claim(&mut self, k: usize, r: usize) -> Result<(), ArtifactError> {
        let malformed = |what: &str| Err(ArtifactError::Malformed(what.to_string()));
        if r <= k || r >= self.claimed.len() || std::mem::replace(&mut self.claimed[r], true) {
            return malformed("a region's part does not match it");
        }
        self.depth[r] = self.depth[k] + 1;
        if self.depth[r] > MAX_REGION_DEPTH {
            return malformed("its regions nest too deep");
        }
        Ok(())
    }

    /// Whether every part but the program's is some call's region.
    pub(crate) fn complete(&self) -> Result<(), ArtifactError> {
        match self.claimed.iter().skip(1).all(|&c| c) {
            true => Ok(()),
            false => Err(ArtifactError::Malformed("a part no call runs".into())),
        }
    }
}

/// The plan section: what a run does, and where the code section's bytes belong.
#[derive(Serialize, Deserialize)]
pub(crate) struct Plan {
    pub(crate) compiler: String,
    pub(crate) inputs: Vec<TensorType>,
    pub(crate) outputs: Vec<TensorType>,
    pub(crate) contents: Contents,
}

/// What an artifact runs on, and its programs.
#[derive(Serialize, Deserialize)]
pub(crate) enum Contents {
    /// The executable, then the executables of its control-flow regions, each after the one
    /// whose call runs it (so they load last to first without recursion).
    Cpu {
        target: CpuTarget,
        executables: Vec<Part>,
    },
    Gpu(GpuContents),
}

/// What an artifact's code runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArtifactTarget {
    Cpu(CpuTarget),
    Gpu(GpuTarget),
}

impl fmt::Display for ArtifactTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArtifactTarget::Cpu(t) => write!(f, "{} CPU with {}", t.arch, t.features.join(", ")),
            ArtifactTarget::Gpu(t) => write!(
                f,
                "{t} GPU (compute capability {}.{} or later)",
                t.major, t.minor
            ),
        }
    }
}

/// One executable of an artifact.
#[derive(Serialize, Deserialize)]
pub(crate) struct Part {
    pub(crate) run: RunPlan,
    /// The image without its bytes, and the length of each function's and table's bytes in
    /// the code section (the parts' bytes follow one another in part order).
    pub(crate) image: CodeImage,
    pub(crate) lengths: Vec<usize>,
    /// Each control-flow call with compiled regions: its first instruction, and the parts of
    /// its regions in the call's order (`CompiledCall::regions`).
    pub(crate) calls: Vec<(usize, Vec<usize>)>,
}

/// What an artifact holds, read without loading its code (for `inspect`).
#[derive(Clone, Debug)]
pub struct ArtifactInfo {
    pub format: u32,
    pub compiler: String,
    pub target: ArtifactTarget,
    pub inputs: Vec<TensorType>,
    pub outputs: Vec<TensorType>,
    /// The kernels' names, in launch order of first use (a GPU artifact's: its entries).
    pub kernels: Vec<String>,
    pub code_bytes: usize,
    pub memory: MemoryReport,
    /// The fused program, each step headed by what runs it (a GPU artifact's: its steps).
    pub fused: String,
    /// A GPU artifact's machine code: the architecture `ptxas` assembled its modules for, if
    /// it did (else the driver compiles the PTX at load).
    pub cubins: Option<GpuTarget>,
    /// What [`Executable::to_artifact`] was given as the caller's metadata.
    pub metadata: Vec<u8>,
    /// What it was given as the compiler's notes.
    pub notes: Vec<u8>,
}

/// How an artifact's f32 products run: [`MatmulPrecision`], as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Matmul {
    Tf32,
    Highest,
}

/// The GPU part of an artifact's plan section.
#[derive(Serialize, Deserialize)]
pub(crate) struct GpuContents {
    pub(crate) target: GpuTarget,
    pub(crate) matmul: Matmul,
    /// The program's plan, then its regions' plans, each after the plan whose call runs it
    /// (so they are rebuilt last to first without recursion).
    pub(crate) parts: Vec<GpuPart>,
}

/// One plan of an artifact, its modules' text (in the code section) and its calls' regions
/// (indices of later parts) taken out.
#[derive(Serialize, Deserialize)]
pub(crate) struct GpuPart {
    pub(crate) plan: GpuRunPlan,
    /// The bytes of each module's PTX in the code section.
    pub(crate) lengths: Vec<usize>,
    /// Where `ptxas` assembled the modules: the architecture, and the bytes of each module's
    /// cubin in the code section (after the PTX).
    pub(crate) cubins: Option<(GpuTarget, Vec<usize>)>,
    /// Per call of the plan, the parts of its regions in order.
    pub(crate) calls: Vec<Vec<usize>>,
}

/// What artifact `bytes` holds, checked as loading checks it but for the target.
pub fn inspect_artifact(bytes: &[u8]) -> Result<ArtifactInfo, ArtifactError> {
    let s = read(bytes)?;
    info(&s.plan, s.code.len(), (s.notes, s.metadata))
}

pub(crate) fn info(
    plan: &Plan,
    code_bytes: usize,
    (notes, metadata): (&[u8], &[u8]),
) -> Result<ArtifactInfo, ArtifactError> {
    let none = || ArtifactError::Malformed("it holds no executable".into());
    let (target, kernels, memory, fused, cubins) = match &plan.contents {
        Contents::Cpu {
            target,
            executables,
        } => {
            let top = executables.first().ok_or_else(none)?;
            (
                ArtifactTarget::Cpu(target.clone()),
                top.run.kernels.iter().map(|k| k.name.clone()).collect(),
                top.run.memory,
                top.run.fused.clone(),
                None,
            )
        }
        Contents::Gpu(g) => {
            let part = g.parts.first().ok_or_else(none)?;
            let top = &part.plan;
            (
                ArtifactTarget::Gpu(g.target),
                top.defined_entries()
                    .into_iter()
                    .map(String::from)
                    .collect(),
                top.memory,
                top.describe_steps(),
                part.cubins.as_ref().map(|c| c.0),
            )
        }
    };
    Ok(ArtifactInfo {
        format: FORMAT_VERSION,
        compiler: plan.compiler.clone(),
        target,
        inputs: plan.inputs.clone(),
        outputs: plan.outputs.clone(),
        kernels,
        code_bytes,
        memory,
        fused,
        cubins,
        metadata: metadata.to_vec(),
        notes: notes.to_vec(),
    })
}

/// The container of `plan` and its sections: the magic number, the format version, the
/// SHA-256 of the rest, then each section's length and bytes.
pub(crate) fn seal(
    plan: &Plan,
    code: &[u8],
    notes: &[u8],
    metadata: &[u8],
) -> Result<Vec<u8>, ArtifactError> {
    let mut encoded = Vec::new();
    ciborium::into_writer(plan, &mut encoded)
        .map_err(|e| ArtifactError::Malformed(e.to_string()))?;
    let mut body =
        Vec::with_capacity(32 + encoded.len() + code.len() + notes.len() + metadata.len());
    for section in [&encoded, code, notes, metadata] {
        body.extend_from_slice(&(section.len() as u64).to_le_bytes());
        body.extend_from_slice(section);
    }
    let mut out = Vec::with_capacity(44 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&Sha256::digest(&body));
    out.extend_from_slice(&body);
    Ok(out)
}

/// What an artifact's sections hold.
pub(crate) struct Sections<'a> {
    pub(crate) plan: Plan,
    pub(crate) code: &'a [u8],
    pub(crate) notes: &'a [u8],
    pub(crate) metadata: &'a [u8],
}

/// The sections of `bytes`, after the magic, version and hash checks.
pub(crate) fn read(bytes: &[u8]) -> Result<Sections<'_>, ArtifactError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(ArtifactError::NotAnArtifact);
    }
    let rest = &bytes[MAGIC.len()..];
    let (version, rest) = take(rest, 4, "in its version")?;
    let found = u32::from_le_bytes([version[0], version[1], version[2], version[3]]);
    if found != FORMAT_VERSION {
        return Err(ArtifactError::Version { found });
    }
    let (hash, body) = take(rest, 32, "in its hash")?;
    if Sha256::digest(body).as_slice() != hash {
        return Err(ArtifactError::Corrupted);
    }
    let (plan, rest) = section(body, "in its plan")?;
    let (code, rest) = section(rest, "in its code")?;
    let (notes, rest) = section(rest, "in its notes")?;
    let (metadata, rest) = section(rest, "in its metadata")?;
    if !rest.is_empty() {
        return Err(ArtifactError::Malformed("bytes after its metadata".into()));
    }
    let plan: Plan = ciborium::from_reader(plan)
        .map_err(|e| ArtifactError::Malformed(format!("its plan: {e}")))?;
    Ok(Sections {
        plan,
        code,
        notes,
        metadata,
    })
}

/// The first `len` bytes of `rest`, which then starts after them.
pub(crate) fn cut<'a>(rest: &mut &'a [u8], len: usize) -> Result<&'a [u8], ArtifactError> {
    let (these, after) = take(rest, len, "in its code")?;
    *rest = after;
    Ok(these)
}

pub(crate) fn take<'a>(
    bytes: &'a [u8],
    n: usize,
    what: &'static str,
) -> Result<(&'a [u8], &'a [u8]), ArtifactError> {
    (bytes.len() >= n)
        .then(|| bytes.split_at(n))
        .ok_or(ArtifactError::Truncated(what))
}

/// A section: its length (8 bytes, little-endian), then its bytes.
fn section<'a>(bytes: &'a [u8], what: &'static str) -> Result<(&'a [u8], &'a [u8]), ArtifactError> {
    let (len, rest) = take(bytes, 8, what)?;
    let mut word = [0u8; 8];
    word.copy_from_slice(len);
    let len =
        usize::try_from(u64::from_le_bytes(word)).map_err(|_| ArtifactError::Truncated(what))?;
    take(rest, len, what)
}
