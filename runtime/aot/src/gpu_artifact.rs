//! GPU artifacts: a [`GpuRunPlan`], its regions' plans and their PTX modules in the container
//! CPU artifacts use (`crate::container`), with the GPU architecture the PTX was rendered for
//! and how f32 products are computed. The PTX text is stored as it is, in the code section;
//! the driver compiles it for the device that loads it, so an artifact for `sm_80` runs on any
//! device of compute capability 8.0 or later. Where `ptxas` was at hand when the artifact was
//! made, each module's cubin follows the PTX, and a device of the same major version loads that
//! machine code instead, with no compilation. Loading checks the container (magic, version,
//! hash), the target against the device, and every plan ([`check_gpu_plan`]) before any
//! module is loaded.

use crate::container::{
    cut, info, read, seal, ArtifactInfo, ArtifactTarget, Contents, GpuContents, GpuPart, Matmul,
    Plan, RegionTree, Sections,
};
use crate::error::ArtifactError;
use crate::gpu::{check_gpu_plan, Cubins, GpuCallPlan, GpuProgram, GpuRunPlan, GpuTarget};
use ferrax_runtime::cuda::MatmulPrecision;
use ferrax_runtime::machine::GpuMachine;

/// An artifact of `plan` (its PTX rendered for `target`, its f32 products computed as
/// `matmul` says), with the caller's `metadata` and the compiler's `notes`.
pub fn gpu_artifact(
    plan: &GpuRunPlan,
    target: GpuTarget,
    matmul: MatmulPrecision,
    (metadata, notes): (&[u8], &[u8]),
) -> Result<Vec<u8>, ArtifactError> {
    check_gpu_plan(plan)?;
    if plan.func.calls_host() {
        return Err(ArtifactError::HostCallback);
    }
    let mut code = Vec::new();
    let mut parts = Vec::new();
    let mut queue: Vec<&GpuRunPlan> = vec![plan];
    while let Some(&p) = queue.get(parts.len()) {
        let mut lengths = Vec::with_capacity(p.modules.len());
        for (ptx, _) in &p.modules {
            lengths.push(ptx.len());
            code.extend_from_slice(ptx.as_bytes());
        }
        let cubins = p.cubins.as_ref().map(|c| {
            let lengths = c.modules.iter().map(Vec::len).collect();
            for cubin in &c.modules {
                code.extend_from_slice(cubin);
            }
            (c.arch, lengths)
        });
        let mut calls = Vec::with_capacity(p.calls.len());
        for call in &p.calls {
            calls.push((queue.len()..queue.len() + call.regions.len()).collect());
            queue.extend(&call.regions);
        }
        parts.push(GpuPart {
            plan: GpuRunPlan {
                func: p.func.clone(),
                steps: p.steps.clone(),
                releases: p.releases.clone(),
                memory: p.memory,
                launches: p.launches.clone(),
                reduce_launches: p.reduce_launches.clone(),
                copies: p.copies.clone(),
                int_gemms: p.int_gemms.clone(),
                scatters: p.scatters.clone(),
                gathers: p.gathers.clone(),
                attentions: p.attentions.clone(),
                modules: p.modules.iter().map(|(_, n)| (String::new(), *n)).collect(),
                calls: p
                    .calls
                    .iter()
                    .map(|c| GpuCallPlan {
                        kind: c.kind,
                        regions: Vec::new(),
                    })
                    .collect(),
                cubins: None,
            },
            lengths,
            cubins,
            calls,
        });
    }
    let matmul = match matmul {
        MatmulPrecision::Tf32 => Matmul::Tf32,
        MatmulPrecision::Highest => Matmul::Highest,
    };
    let plan = Plan {
        compiler: env!("CARGO_PKG_VERSION").to_string(),
        inputs: plan.func.params.clone(),
        outputs: plan.func.output_types(),
        contents: Contents::Gpu(GpuContents {
            target,
            matmul,
            parts,
        }),
    };
    seal(&plan, &code, notes, metadata)
}

impl<M: GpuMachine + Clone> GpuProgram<M> {
    /// The program GPU artifact `bytes` holds, loaded on `machine` after every check (see the
    /// module docs), with what [`crate::inspect_artifact`] tells of it.
    pub fn from_artifact(
        bytes: &[u8],
        machine: &M,
    ) -> Result<(GpuProgram<M>, ArtifactInfo), ArtifactError> {
        GpuProgram::from_sections(read(bytes)?, machine)
    }

    /// [`GpuProgram::from_artifact`] of an artifact's sections, read and hashed already.
    pub(crate) fn from_sections(
        sections: Sections<'_>,
        machine: &M,
    ) -> Result<(GpuProgram<M>, ArtifactInfo), ArtifactError> {
        let malformed = |what: &str| ArtifactError::Malformed(what.to_string());
        let info = info(
            &sections.plan,
            sections.code.len(),
            (sections.notes, sections.metadata),
        )?;
        let Plan {
            inputs,
            outputs,
            contents,
            ..
        } = sections.plan;
        let contents = match contents {
            Contents::Gpu(g) => g,
            Contents::Cpu { target, .. } => {
                return Err(ArtifactError::Kind {
                    found: format!("a CPU artifact ({})", ArtifactTarget::Cpu(target)),
                    how: "with `Executable::from_artifact`",
                })
            }
        };
        let device = machine.compute_capability();
        if !contents.target.runs_on(device) {
            return Err(ArtifactError::Target {
                wanted: format!(
                    "{} (compute capability {}.{} or later)",
                    contents.target, contents.target.major, contents.target.minor
                ),
                missing: format!(
                    "it (the device's compute capability is {}.{})",
                    device.0, device.1
                ),
            });
        }
        // Every module's text cut from the code section, and every region found exactly once
        // after the plan whose call runs it, before anything is loaded.
        let mut rest = sections.code;
        let count = contents.parts.len();
        let mut tree = RegionTree::new(count);
        let mut built: Vec<Option<GpuRunPlan>> = Vec::with_capacity(count);
        let mut region_lists = Vec::with_capacity(count);
        for (k, part) in contents.parts.into_iter().enumerate() {
            let GpuPart {
                mut plan,
                lengths,
                cubins,
                calls,
            } = part;
            if lengths.len() != plan.modules.len() || calls.len() != plan.calls.len() {
                return Err(malformed(
                    "a GPU plan's modules or calls do not match its parts",
                ));
            }
            for ((ptx, _), len) in plan.modules.iter_mut().zip(lengths) {
                let text = cut(&mut rest, len)?;
                *ptx = String::from_utf8(text.to_vec())
                    .map_err(|_| malformed("a PTX module is not text"))?;
            }
            // Machine code comes from the code section alone.
            plan.cubins = None;
            if let Some((arch, lengths)) = cubins {
                if lengths.len() != plan.modules.len() {
                    return Err(malformed("a GPU plan's cubins do not match its modules"));
                }
                let modules = lengths
                    .into_iter()
                    .map(|len| cut(&mut rest, len).map(<[u8]>::to_vec))
                    .collect::<Result<_, _>>()?;
                plan.cubins = Some(Cubins { arch, modules });
            }
            for &r in calls.iter().flatten() {
                tree.claim(k, r)?;
            }
            built.push(Some(plan));
            region_lists.push(calls);
        }
        if !rest.is_empty() {
            return Err(malformed("code bytes no module holds"));
        }
        tree.complete()?;
        // Regions first, so that each call finds its regions' plans whole.
        for k in (0..count).rev() {
            let mut plan = built[k]
                .take()
                .ok_or_else(|| malformed("a plan is missing"))?;
            for (call, regions) in plan.calls.iter_mut().zip(&region_lists[k]) {
                call.regions = regions
                    .iter()
                    .map(|&r| built.get_mut(r).and_then(Option::take))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| malformed("a region's plan is missing"))?;
            }
            built[k] = Some(plan);
        }
        let plan = built
            .into_iter()
            .next()
            .flatten()
            .ok_or_else(|| malformed("it holds no plan"))?;
        if inputs != plan.func.params || outputs != plan.func.output_types() {
            return Err(malformed("its signature is not its program's"));
        }
        if plan.func.calls_host() {
            return Err(ArtifactError::HostCallback);
        }
        check_gpu_plan(&plan)?;
        let matmul = match contents.matmul {
            Matmul::Tf32 => MatmulPrecision::Tf32,
            Matmul::Highest => MatmulPrecision::Highest,
        };
        let program = GpuProgram::load_checked(plan, machine, matmul)
            .map_err(|e| ArtifactError::GpuLoad(e.to_string()))?;
        Ok((program, info))
    }
}
