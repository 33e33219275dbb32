//! Ahead-of-time artifacts of CPU executables: everything a run needs (the scheduled program,
//! the executor's steps, the kernels' signatures and machine code, the memory plan) in one
//! file that loads without compiling anything.
//!
//! The container is small and binary, so machine code is stored as it is: a magic number, the
//! format version, the SHA-256 of the rest, then two length-prefixed sections, the plan as
//! CBOR (serde, which every plan type derives; a standard, self-describing binary encoding that
//! carries every float exactly, the infinities and NaNs of constants included, where JSON
//! cannot) and the code and constant tables as raw bytes. Loading checks, in order, the magic,
//! the version, the hash, that the plan is well formed, and that this CPU has every
//! instruction-set feature the code was compiled for; only then is code mapped and made
//! executable.
//!
//! An artifact is code: load only artifacts you built or trust. The hash detects corruption,
//! not a forger, who can recompute it.

use super::clif::{CodeImage, Compiled, LoadError};
use super::{step_values, CpuExecutable, ExecStep};
use crate::backend::liveness::{MemoryReport, StepValues};
use crate::kernel::Kernel;
use ferrax_ir::{verify, Func, TensorType, ValueId};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;

const MAGIC: &[u8; 8] = b"FERRAXA\0";

/// The format this build writes and reads: the container, the plan's types and the kernels'
/// calling convention.
pub const FORMAT_VERSION: u32 = 2;

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
    #[error("the artifact was compiled for {wanted}; this machine lacks {missing}")]
    Target { wanted: String, missing: String },
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// The CPU an artifact's code was compiled for: the architecture and the instruction-set
/// features the code generator used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTarget {
    pub arch: String,
    pub features: Vec<String>,
}

impl CpuTarget {
    /// This machine: the code generator compiles for every feature it detects.
    pub fn host() -> CpuTarget {
        CpuTarget {
            arch: std::env::consts::ARCH.to_string(),
            features: FEATURES
                .iter()
                .filter(|f| detected(f))
                .map(|f| f.to_string())
                .collect(),
        }
    }

    /// What `self` needs that this machine lacks, if anything.
    fn missing_here(&self) -> Option<String> {
        if self.arch != std::env::consts::ARCH {
            return Some(format!("the {} architecture", self.arch));
        }
        let missing: Vec<&str> = self
            .features
            .iter()
            .filter(|f| !detected(f))
            .map(String::as_str)
            .collect();
        (!missing.is_empty()).then(|| missing.join(", "))
    }
}

/// The x86-64 features Cranelift's native target detects (and may use).
const FEATURES: [&str; 19] = [
    "cmpxchg16b",
    "sse3",
    "ssse3",
    "sse4.1",
    "sse4.2",
    "popcnt",
    "avx",
    "avx2",
    "fma",
    "avxvnni",
    "avx512vnni",
    "bmi1",
    "bmi2",
    "avx512bitalg",
    "avx512dq",
    "avx512f",
    "avx512vl",
    "avx512vbmi",
    "lzcnt",
];

/// Whether this CPU has feature `name` (one of [`FEATURES`]; anything else, never).
fn detected(name: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match name {
            "cmpxchg16b" => std::is_x86_feature_detected!("cmpxchg16b"),
            "sse3" => std::is_x86_feature_detected!("sse3"),
            "ssse3" => std::is_x86_feature_detected!("ssse3"),
            "sse4.1" => std::is_x86_feature_detected!("sse4.1"),
            "sse4.2" => std::is_x86_feature_detected!("sse4.2"),
            "popcnt" => std::is_x86_feature_detected!("popcnt"),
            "avx" => std::is_x86_feature_detected!("avx"),
            "avx2" => std::is_x86_feature_detected!("avx2"),
            "fma" => std::is_x86_feature_detected!("fma"),
            "avxvnni" => std::is_x86_feature_detected!("avxvnni"),
            "avx512vnni" => std::is_x86_feature_detected!("avx512vnni"),
            "bmi1" => std::is_x86_feature_detected!("bmi1"),
            "bmi2" => std::is_x86_feature_detected!("bmi2"),
            "avx512bitalg" => std::is_x86_feature_detected!("avx512bitalg"),
            "avx512dq" => std::is_x86_feature_detected!("avx512dq"),
            "avx512f" => std::is_x86_feature_detected!("avx512f"),
            "avx512vl" => std::is_x86_feature_detected!("avx512vl"),
            "avx512vbmi" => std::is_x86_feature_detected!("avx512vbmi"),
            "lzcnt" => std::is_x86_feature_detected!("lzcnt"),
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = name;
        false
    }
}

/// The plan section: what a run does, and where the code section's bytes belong.
#[derive(Serialize, Deserialize)]
struct Plan {
    compiler: String,
    target: CpuTarget,
    inputs: Vec<TensorType>,
    outputs: Vec<TensorType>,
    func: Func,
    fused: String,
    steps: Vec<ExecStep>,
    kernels: Vec<Kernel>,
    frees: Vec<Vec<ValueId>>,
    memory: MemoryReport,
    /// The image without its bytes, and the length of each function's and table's bytes in
    /// the code section, in that order.
    image: CodeImage,
    lengths: Vec<usize>,
    /// The caller's own data (the frontend stores its trees' structures here).
    metadata: Vec<u8>,
}

/// What an artifact holds, read without loading its code (for `inspect`).
#[derive(Clone, Debug)]
pub struct ArtifactInfo {
    pub format: u32,
    pub compiler: String,
    pub target: CpuTarget,
    pub inputs: Vec<TensorType>,
    pub outputs: Vec<TensorType>,
    pub kernels: usize,
    pub code_bytes: usize,
    pub memory: MemoryReport,
    /// The fused program, each step headed by what runs it.
    pub fused: String,
    /// What [`CpuExecutable::to_artifact_with`] was given.
    pub metadata: Vec<u8>,
}

impl CpuExecutable {
    /// This executable as an artifact for this machine's CPU.
    pub fn to_artifact(&self) -> Result<Vec<u8>, ArtifactError> {
        self.to_artifact_with(&[])
    }

    /// This executable as an artifact, with the caller's `metadata` (returned by
    /// [`inspect_artifact`]).
    pub fn to_artifact_with(&self, metadata: &[u8]) -> Result<Vec<u8>, ArtifactError> {
        let mut image = self.code.image.clone();
        let mut code = Vec::new();
        let mut lengths = Vec::new();
        for bytes in image
            .functions
            .iter_mut()
            .map(|f| &mut f.bytes)
            .chain(image.tables.iter_mut())
        {
            lengths.push(bytes.len());
            code.append(bytes);
        }
        let plan = Plan {
            compiler: env!("CARGO_PKG_VERSION").to_string(),
            target: CpuTarget::host(),
            inputs: self.func.params.clone(),
            outputs: self.func.output_types(),
            func: self.func.clone(),
            fused: self.fused.clone(),
            steps: self.steps.clone(),
            kernels: self.kernels.clone(),
            frees: self.frees.clone(),
            memory: self.memory,
            image,
            lengths,
            metadata: metadata.to_vec(),
        };
        let mut encoded = Vec::new();
        ciborium::into_writer(&plan, &mut encoded)
            .map_err(|e| ArtifactError::Malformed(e.to_string()))?;
        let plan = encoded;
        let mut body = Vec::with_capacity(16 + plan.len() + code.len());
        for section in [&plan, &code] {
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

    /// The executable an artifact holds, its code loaded with no compilation, after every
    /// check (see the module docs).
    pub fn from_artifact(bytes: &[u8]) -> Result<CpuExecutable, ArtifactError> {
        Ok(CpuExecutable::from_artifact_with_info(bytes)?.0)
    }

    /// [`CpuExecutable::from_artifact`], with what [`inspect_artifact`] tells of it (read
    /// once).
    pub fn from_artifact_with_info(
        bytes: &[u8],
    ) -> Result<(CpuExecutable, ArtifactInfo), ArtifactError> {
        let (plan, code) = read(bytes)?;
        if let Some(missing) = plan.target.missing_here() {
            return Err(ArtifactError::Target {
                wanted: format!(
                    "{} with {}",
                    plan.target.arch,
                    plan.target.features.join(", ")
                ),
                missing,
            });
        }
        let image = image_with_code(plan.image.clone(), &plan.lengths, code)?;
        check_plan(&plan, &image)?;
        let info = info(&plan, code.len());
        let code = Compiled::load(image)?;
        let calls = super::control::compile_steps(&plan.func, &plan.steps)
            .map_err(|e| ArtifactError::Malformed(format!("its regions do not compile: {e}")))?;
        let exe = CpuExecutable {
            func: plan.func,
            fused: plan.fused,
            steps: plan.steps,
            kernels: plan.kernels,
            code,
            frees: plan.frees,
            memory: plan.memory,
            pool: Mutex::new(HashMap::new()),
            calls,
        };
        Ok((exe, info))
    }
}

impl CpuExecutable {
    /// The program as compiled (scheduled for fusion).
    pub fn program(&self) -> &Func {
        &self.func
    }

    /// The Cranelift IR of each kernel, where it is known (empty for code loaded from an
    /// artifact, which holds machine code only).
    pub fn clif(&self) -> &[String] {
        &self.code.clif
    }

    /// Gives loaded kernels the Cranelift IR they were compiled from (kept beside their
    /// artifact, as the persistent cache does), for dumps; ignored unless one per kernel.
    pub fn set_clif(&mut self, clif: Vec<String>) {
        if clif.len() == self.kernels.len() {
            self.code.clif = clif;
        }
    }
}

/// What artifact `bytes` holds, checked as loading checks it but for the target.
pub fn inspect_artifact(bytes: &[u8]) -> Result<ArtifactInfo, ArtifactError> {
    let (plan, code) = read(bytes)?;
    Ok(info(&plan, code.len()))
}

fn info(plan: &Plan, code_bytes: usize) -> ArtifactInfo {
    ArtifactInfo {
        format: FORMAT_VERSION,
        compiler: plan.compiler.clone(),
        target: plan.target.clone(),
        inputs: plan.inputs.clone(),
        outputs: plan.outputs.clone(),
        kernels: plan.kernels.len(),
        code_bytes,
        memory: plan.memory,
        fused: plan.fused.clone(),
        metadata: plan.metadata.clone(),
    }
}

/// The plan and code sections of `bytes`, after the magic, version and hash checks.
fn read(bytes: &[u8]) -> Result<(Plan, &[u8]), ArtifactError> {
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
    if !rest.is_empty() {
        return Err(ArtifactError::Malformed("bytes after its code".into()));
    }
    let plan: Plan = ciborium::from_reader(plan)
        .map_err(|e| ArtifactError::Malformed(format!("its plan: {e}")))?;
    Ok((plan, code))
}

fn take<'a>(
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

/// `image` with its functions' and tables' bytes, cut from `code` by `lengths`.
fn image_with_code(
    mut image: CodeImage,
    lengths: &[usize],
    mut code: &[u8],
) -> Result<CodeImage, ArtifactError> {
    let slots = image.functions.len() + image.tables.len();
    if lengths.len() != slots {
        return Err(ArtifactError::Malformed(
            "its code lengths do not match its functions".into(),
        ));
    }
    for (bytes, &len) in image
        .functions
        .iter_mut()
        .map(|f| &mut f.bytes)
        .chain(image.tables.iter_mut())
        .zip(lengths)
    {
        let (these, rest) = take(code, len, "in its code")?;
        *bytes = these.to_vec();
        code = rest;
    }
    if !code.is_empty() {
        return Err(ArtifactError::Malformed(
            "code bytes no function holds".into(),
        ));
    }
    Ok(image)
}

/// The plan's parts agree with one another and with the program, so that running it indexes
/// nothing out of range: the program verifies, every step names an instruction or kernel that
/// exists, every kernel buffer a value of the program, and every kernel has code.
fn check_plan(plan: &Plan, image: &CodeImage) -> Result<(), ArtifactError> {
    let malformed = |what: &str| Err(ArtifactError::Malformed(what.to_string()));
    verify(&plan.func).map_err(|e| ArtifactError::Malformed(format!("its program: {e}")))?;
    let func = &plan.func;
    if plan.inputs != func.params || plan.outputs != func.output_types() {
        return malformed("its signature is not its program's");
    }
    let values = func.num_values();
    for step in &plan.steps {
        let fits = match step {
            ExecStep::Kernel(k) => *k < plan.kernels.len(),
            ExecStep::Gemm(i, _, _, Some(r)) => *i < func.body.len() && r.output.index() < values,
            ExecStep::Gemm(i, ..)
            | ExecStep::Gather(i, _)
            | ExecStep::Scatter(i, _)
            | ExecStep::Op(i) => *i < func.body.len(),
            ExecStep::Call(members) => members.iter().all(|i| *i < func.body.len()),
        };
        if !fits {
            return malformed("a step names an instruction or kernel it lacks");
        }
    }
    let buffers_fit = plan
        .kernels
        .iter()
        .flat_map(|k| &k.sig.buffers)
        .all(|b| b.value.index() < values);
    if !buffers_fit || image.entries.len() != plan.kernels.len() {
        return malformed("its kernels do not match its program or code");
    }
    if plan.frees.len() != plan.steps.len()
        || plan.frees.iter().flatten().any(|v| v.index() >= values)
    {
        return malformed("its memory plan does not match its steps");
    }
    // Every value a step reads, and every output, is defined before it is needed.
    let mut defined = vec![false; values];
    defined[..func.params.len()].fill(true);
    for step in &plan.steps {
        let StepValues { reads, writes } = step_values(func, &plan.kernels, step);
        if reads
            .iter()
            .any(|v| !defined.get(v.index()).copied().unwrap_or(false))
        {
            return malformed("a step reads a value no earlier step makes");
        }
        for v in writes {
            if let Some(d) = defined.get_mut(v.index()) {
                *d = true;
            }
        }
    }
    if func
        .outputs
        .iter()
        .any(|v| !defined.get(v.index()).copied().unwrap_or(false))
    {
        return malformed("an output no step makes");
    }
    Ok(())
}
