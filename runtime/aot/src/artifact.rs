//! Ahead-of-time artifacts of CPU executables: everything a run needs (the scheduled program,
//! the executor's steps, the kernels' signatures and machine code, the memory plan) in one
//! file (`crate::container`) that loads without compiling anything. Loading checks, in order,
//! the magic, the version, the hash, that the plan is well formed, and that this CPU has every
//! instruction-set feature the code was compiled for; only then is code mapped and made
//! executable.

use crate::check::check_plan;
use crate::code::Code;
use crate::container::{
    cut, info, read, seal, ArtifactInfo, ArtifactTarget, Contents, Part, Plan, RegionTree, Sections,
};
use crate::control::CompiledCall;
use crate::error::ArtifactError;
use crate::executable::Executable;
use crate::image::CodeImage;
use crate::target::CpuTarget;

impl Executable {
    /// This executable as an artifact for this machine's CPU, with the caller's `metadata`
    /// and the compiler's `notes` (both returned by [`inspect_artifact`]).
    pub fn to_artifact(&self, metadata: &[u8], notes: &[u8]) -> Result<Vec<u8>, ArtifactError> {
        if self.plan().func.calls_host() {
            return Err(ArtifactError::HostCallback);
        }
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
            inputs: func.params.clone(),
            outputs: func.output_types(),
            contents: Contents::Cpu {
                target: CpuTarget::host(),
                executables,
            },
        };
        seal(&plan, &code, notes, metadata)
    }

    /// The executable an artifact holds, its code loaded with no compilation, after every
    /// check (see the module docs), with what [`inspect_artifact`] tells of it (read once).
    pub fn from_artifact(bytes: &[u8]) -> Result<(Executable, ArtifactInfo), ArtifactError> {
        Executable::from_sections(read(bytes)?)
    }

    /// [`Executable::from_artifact`] of an artifact's sections, read and hashed already.
    pub(crate) fn from_sections(
        sections: Sections<'_>,
    ) -> Result<(Executable, ArtifactInfo), ArtifactError> {
        let malformed = |what: &str| ArtifactError::Malformed(what.to_string());
        let Sections {
            plan,
            code,
            notes,
            metadata,
        } = sections;
        let info = info(&plan, code.len(), (notes, metadata))?;
        let (target, executables) = match plan.contents {
            Contents::Cpu {
                target,
                executables,
            } => (target, executables),
            Contents::Gpu(g) => {
                return Err(ArtifactError::Kind {
                    found: format!("a GPU artifact ({})", ArtifactTarget::Gpu(g.target)),
                    how: "on a GPU, with `GpuProgram::from_artifact`",
                })
            }
        };
        if let Some(missing) = target.missing_here() {
            return Err(ArtifactError::Target {
                wanted: format!("{} with {}", target.arch, target.features.join(", ")),
                missing,
            });
        }
        let top = &executables
            .first()
            .ok_or_else(|| malformed("it holds no executable"))?
            .run
            .func;
        if plan.inputs != top.params || plan.outputs != top.output_types() {
            return Err(malformed("its signature is not its program's"));
        }
        // A callback id names a function of another process.
        if top.calls_host() {
            return Err(ArtifactError::HostCallback);
        }
        // Every part checked, and its code cut out, before any code is mapped.
        let mut rest = code;
        let mut images = Vec::with_capacity(executables.len());
        let mut tree = RegionTree::new(executables.len());
        for (k, part) in executables.iter().enumerate() {
            let image = image_with_code(part.image.clone(), &part.lengths, &mut rest)?;
            check_plan(&part.run, image.entries.len())?;
            for (first, regions) in &part.calls {
                let op = part.run.func.body.get(*first).map(|ins| &ins.op);
                let funcs = op.map(|op| op.regions()).unwrap_or_default();
                if op.and_then(|op| op.call_result()).is_none() || funcs.len() != regions.len() {
                    return Err(malformed("a call's regions do not match its instruction"));
                }
                for (&r, (_, region)) in regions.iter().zip(funcs) {
                    let fits = executables.get(r).is_some_and(|p| {
                        p.run.func.params == region.params
                            && p.run.func.output_types() == region.output_types()
                    });
                    if !fits {
                        return Err(malformed("a region's executable does not match it"));
                    }
                    tree.claim(k, r)?;
                }
            }
            images.push(image);
        }
        if !rest.is_empty() {
            return Err(malformed("code bytes no function holds"));
        }
        tree.complete()?;
        // Regions first, so that each call finds its regions' executables built.
        let mut built: Vec<Option<Executable>> = Vec::new();
        built.resize_with(executables.len(), || None);
        for (k, (part, image)) in executables.into_iter().zip(images).enumerate().rev() {
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
        *bytes = cut(code, len)?.to_vec();
    }
    Ok(image)
}
