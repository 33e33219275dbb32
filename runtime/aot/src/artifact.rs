//! Ahead-of-time artifacts of CPU executables: everything a run needs (the scheduled program,
//! the executor's steps, the kernels' signatures and machine code, the memory plan) in one
//! file that loads without compiling anything.
//!
//! The container is small and binary, so machine code is stored as it is: a magic number, the
//! format version, the SHA-256 of the rest, then four length-prefixed sections: the plan as
//! CBOR (serde, which every plan type derives; a standard, self-describing binary encoding that
//! carries every float exactly, the infinities and NaNs of constants included, where JSON
//! cannot), the code and constant tables as raw bytes, and the compiler's notes and the
//! caller's metadata as they wrote them. Loading checks, in order, the magic,
//! the version, the hash, that the plan is well formed, and that this CPU has every
//! instruction-set feature the code was compiled for; only then is code mapped and made
//! executable.
//!
//! An artifact is code: load only artifacts you built or trust. The hash detects corruption,
//! not a forger, who can recompute it.

use crate::check::check_plan;
use crate::code::Code;
use crate::control::CompiledCall;
use crate::error::ArtifactError;
use crate::executable::Executable;
use crate::image::CodeImage;
use crate::memory::MemoryReport;
use crate::plan::RunPlan;
use crate::target::CpuTarget;
use crate::FORMAT_VERSION;
use ferrax_ir::TensorType;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"FERRAXA\0";

/// The plan section: what a run does, and where the code section's bytes belong.
#[derive(Serialize, Deserialize)]
struct Plan {
    compiler: String,
    target: CpuTarget,
    inputs: Vec<TensorType>,
    outputs: Vec<TensorType>,
    /// The executable, then the executables of its control-flow regions, each after the one
    /// whose call runs it (so they load last to first without recursion).
    executables: Vec<Part>,
}

/// One executable of an artifact.
#[derive(Serialize, Deserialize)]
struct Part {
    run: RunPlan,
    /// The image without its bytes, and the length of each function's and table's bytes in
    /// the code section (the parts' bytes follow one another in part order).
    image: CodeImage,
    lengths: Vec<usize>,
    /// Each control-flow call with compiled regions: its first instruction, and the parts of
    /// its regions in the call's order (`CompiledCall::regions`).
    calls: Vec<(usize, Vec<usize>)>,
}

/// What an artifact holds, read without loading its code (for `inspect`).
#[derive(Clone, Debug)]
pub struct ArtifactInfo {
    pub format: u32,
    pub compiler: String,
    pub target: CpuTarget,
    pub inputs: Vec<TensorType>,
    pub outputs: Vec<TensorType>,
    /// The kernels' names, in launch order of first use.
    pub kernels: Vec<String>,
    pub code_bytes: usize,
    pub memory: MemoryReport,
    /// The fused program, each step headed by what runs it.
    pub fused: String,
    /// What [`Executable::to_artifact`] was given as the caller's metadata.
    pub metadata: Vec<u8>,
    /// What it was given as the compiler's notes.
    pub notes: Vec<u8>,
}

impl Executable {
    /// This executable as an artifact for this machine's CPU, with the caller's `metadata`
    /// and the compiler's `notes` (both returned by [`inspect_artifact`]).
    pub fn to_artifact(&self, metadata: &[u8], notes: &[u8]) -> Result<Vec<u8>, ArtifactError> {
        let mut code = Vec::new();
        let mut executables = Vec::new();
        let mut queue: Vec<&Executable> = vec![self];
        while let Some(&exe) = queue.get(executables.len()) {
            let mut image = exe.code().image().clone();
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
            let mut firsts: Vec<usize> = exe.calls().keys().copied().collect();
            firsts.sort_unstable();
            let calls = firsts
                .into_iter()
                .map(|first| {
                    let regions = exe.calls()[&first].regions();
                    let parts = (queue.len()..queue.len() + regions.len()).collect();
                    queue.extend(regions);
                    (first, parts)
                })
                .collect();
            executables.push(Part {
                run: exe.plan().clone(),
                image,
                lengths,
                calls,
            });
        }
        let func = &self.plan().func;
        let plan = Plan {
            compiler: env!("CARGO_PKG_VERSION").to_string(),
            target: CpuTarget::host(),
            inputs: func.params.clone(),
            outputs: func.output_types(),
            executables,
        };
        let mut encoded = Vec::new();
        ciborium::into_writer(&plan, &mut encoded)
            .map_err(|e| ArtifactError::Malformed(e.to_string()))?;
        let plan = encoded;
        let mut body =
            Vec::with_capacity(32 + plan.len() + code.len() + notes.len() + metadata.len());
        for section in [&plan, &code, notes, metadata] {
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
    /// check (see the module docs), with what [`inspect_artifact`] tells of it (read once).
    pub fn from_artifact(bytes: &[u8]) -> Result<(Executable, ArtifactInfo), ArtifactError> {
        let malformed = |what: &str| ArtifactError::Malformed(what.to_string());
        let Sections {
            plan,
            code,
            notes,
            metadata,
        } = read(bytes)?;
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
        let info = info(&plan, code.len(), (notes, metadata))?;
        let top = &plan.executables[0].run.func;
        if plan.inputs != top.params || plan.outputs != top.output_types() {
            return Err(malformed("its signature is not its program's"));
        }
        // Every part checked, and its code cut out, before any code is mapped.
        let mut rest = code;
        let mut images = Vec::with_capacity(plan.executables.len());
        let mut used = vec![false; plan.executables.len()];
        for (k, part) in plan.executables.iter().enumerate() {
            let image = image_with_code(part.image.clone(), &part.lengths, &mut rest)?;
            check_plan(&part.run, image.entries.len())?;
            for (first, regions) in &part.calls {
                let op = part.run.func.body.get(*first).map(|ins| &ins.op);
                let funcs = op.map(|op| op.regions()).unwrap_or_default();
                if op.and_then(|op| op.call_result()).is_none() || funcs.len() != regions.len() {
                    return Err(malformed("a call's regions do not match its instruction"));
                }
                for (&r, (_, region)) in regions.iter().zip(funcs) {
                    let fits = plan.executables.get(r).is_some_and(|p| {
                        p.run.func.params == region.params
                            && p.run.func.output_types() == region.output_types()
                    });
                    if r <= k || !fits || std::mem::replace(&mut used[r], true) {
                        return Err(malformed("a region's executable does not match it"));
                    }
                }
            }
            images.push(image);
        }
        if !rest.is_empty() {
            return Err(malformed("code bytes no function holds"));
        }
        if used.iter().skip(1).any(|u| !u) {
            return Err(malformed("an executable no call runs"));
        }
        // Regions first, so that each call finds its regions' executables built.
        let mut built: Vec<Option<Executable>> = Vec::new();
        built.resize_with(plan.executables.len(), || None);
        for (k, (part, image)) in plan.executables.into_iter().zip(images).enumerate().rev() {
            let mut calls = std::collections::HashMap::new();
            for (first, regions) in part.calls {
                let regions = regions
                    .iter()
                    .map(|&r| built.get_mut(r).and_then(Option::take))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| malformed("a region's executable is missing"))?;
                let op = &part.run.func.body[first].op;
                let call = CompiledCall::of(op, regions)
                    .ok_or_else(|| malformed("a call's regions do not match its instruction"))?;
                calls.insert(first, call);
            }
            let exe = Executable::checked(part.run, Code::load(image)?).with_calls(calls);
            built[k] = Some(exe);
        }
        let exe = built
            .into_iter()
            .next()
            .flatten()
            .ok_or_else(|| malformed("it holds no executable"))?;
        Ok((exe, info))
    }
}

/// What artifact `bytes` holds, checked as loading checks it but for the target.
pub fn inspect_artifact(bytes: &[u8]) -> Result<ArtifactInfo, ArtifactError> {
    let s = read(bytes)?;
    info(&s.plan, s.code.len(), (s.notes, s.metadata))
}

fn info(
    plan: &Plan,
    code_bytes: usize,
    (notes, metadata): (&[u8], &[u8]),
) -> Result<ArtifactInfo, ArtifactError> {
    let top = plan
        .executables
        .first()
        .ok_or_else(|| ArtifactError::Malformed("it holds no executable".into()))?;
    Ok(ArtifactInfo {
        format: FORMAT_VERSION,
        compiler: plan.compiler.clone(),
        target: plan.target.clone(),
        inputs: plan.inputs.clone(),
        outputs: plan.outputs.clone(),
        kernels: top.run.kernels.iter().map(|k| k.name.clone()).collect(),
        code_bytes,
        memory: top.run.memory,
        fused: top.run.fused.clone(),
        metadata: metadata.to_vec(),
        notes: notes.to_vec(),
    })
}

/// What an artifact's sections hold.
struct Sections<'a> {
    plan: Plan,
    code: &'a [u8],
    notes: &'a [u8],
    metadata: &'a [u8],
}

/// The sections of `bytes`, after the magic, version and hash checks.
fn read(bytes: &[u8]) -> Result<Sections<'_>, ArtifactError> {
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

/// `image` with its functions' and tables' bytes, cut from the front of `code` by `lengths`.
fn image_with_code(
    mut image: CodeImage,
    lengths: &[usize],
    code: &mut &[u8],
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
        *code = rest;
    }
    Ok(image)
}
