//! A planned program loaded on a [`GpuMachine`] by the runtime's executor, and its artifact.

use crate::backend::liveness::MemoryReport;
use crate::backend::ptx::assemble::{assemble_all, ptxas};
use crate::backend::ptx::PtxTarget;
use crate::kernel::Kernel;
use ferrax_aot_runtime::gpu::{Cubins, GpuRunPlan, GpuTarget};
use ferrax_aot_runtime::gpu_artifact;
use ferrax_ir::Func;
use ferrax_runtime::Array;
use std::borrow::Cow;

use super::*;

/// The compute capability `target`'s PTX needs.
pub fn gpu_target(target: PtxTarget) -> GpuTarget {
    match target {
        PtxTarget::Sm80 => GpuTarget { major: 8, minor: 0 },
        PtxTarget::Sm90 => GpuTarget { major: 9, minor: 0 },
    }
}

/// `func` as a GPU artifact for `target`, planned without a device, computing as `options`
/// say, with the caller's `metadata` and the compiler's `notes`; its modules assembled to
/// machine code too where `ptxas` is at hand.
pub fn compile_artifact(
    func: &Func,
    target: PtxTarget,
    options: GpuOptions,
    (metadata, notes): (&[u8], &[u8]),
) -> Result<Vec<u8>, GpuError> {
    let plan = GpuPlan::with_options(func, target, options)?;
    let run = assembled(Cow::Owned(plan.run), target)?;
    let target = gpu_target(target);
    Ok(gpu_artifact(
        &run,
        target,
        options.matmul,
        (metadata, notes),
    )?)
}

/// `plan` (rendered for `target`) with its modules and its regions' assembled by `ptxas`
/// where one is at hand ([`ptxas`]), else as it is (as it is too where it holds their machine
/// code for `target` already: a program loaded on a device).
fn assembled(
    plan: Cow<'_, GpuRunPlan>,
    target: PtxTarget,
) -> Result<Cow<'_, GpuRunPlan>, GpuError> {
    let done = |p: &GpuRunPlan| {
        p.cubins
            .as_ref()
            .is_some_and(|c| c.arch == gpu_target(target))
    };
    let Some(ptxas) = ptxas().filter(|_| !done(&plan)) else {
        return Ok(plan);
    };
    let mut plan = plan.into_owned();
    // Every plan of the tree, each assembled in place (iteratively: regions nest).
    let mut work = vec![&mut plan];
    while let Some(p) = work.pop() {
        let texts: Vec<&str> = p.modules.iter().map(|(ptx, _)| ptx.as_str()).collect();
        let modules = assemble_all(&ptxas, &texts, target)?;
        p.cubins = Some(Cubins {
            arch: gpu_target(target),
            modules,
        });
        work.extend(p.calls.iter_mut().flat_map(|c| c.regions.iter_mut()));
    }
    Ok(Cow::Owned(plan))
}

impl<M: GpuMachine + Clone> GpuProgram<M> {
    /// `func` planned for `machine`'s architecture and loaded there.
    pub fn compile(
        func: &Func,
        machine: &M,
        options: GpuOptions,
    ) -> Result<GpuProgram<M>, GpuError> {
        let (major, minor) = machine.compute_capability();
        let target = PtxTarget::for_compute_capability(major, minor);
        let plan = GpuPlan::with_options(func, target, options)?;
        GpuProgram::load(plan, target, machine, options.matmul)
    }

    /// `plan` (rendered for `target`) loaded on `machine`, its f32 products computed as
    /// `matmul` says.
    pub fn load(
        mut plan: GpuPlan,
        target: PtxTarget,
        machine: &M,
        matmul: MatmulPrecision,
    ) -> Result<GpuProgram<M>, GpuError> {
        // A device's driver compiles PTX modules one after another, most of a cold compile;
        // `ptxas` processes, where one is at hand, assemble them at once (kept in the plan, so
        // an artifact of the program reuses them). PTX where that fails: the driver may take
        // what this `ptxas` does not.
        if machine.loads_machine_code() {
            if let Ok(Cow::Owned(run)) = assembled(Cow::Borrowed(&plan.run), target) {
                plan.run = run;
            }
        }
        let program = ferrax_aot_runtime::gpu::GpuProgram::load(plan.run.clone(), machine, matmul)?;
        Ok(GpuProgram {
            plan,
            target,
            program,
        })
    }
}

impl<M: GpuMachine> GpuProgram<M> {
    /// The PTX module of the program's kernels.
    pub fn ptx(&self) -> &str {
        &self.plan.ptx
    }

    pub fn kernels(&self) -> &[Kernel] {
        &self.plan.kernels
    }

    pub fn plan(&self) -> &GpuPlan {
        &self.plan
    }

    /// The memory plan's figures: the peak of live device memory over a run.
    pub fn memory(&self) -> MemoryReport {
        self.plan.memory
    }

    /// How many instructions run on the host path, those of control-flow regions included.
    pub fn host_steps(&self) -> usize {
        self.program.host_steps()
    }

    /// Copies `args` to the device, runs, and copies the results back.
    pub fn run(&self, args: &[Array]) -> Result<Vec<Array>, GpuError> {
        Ok(self.program.run(args)?)
    }

    /// Runs on arrays already on the device; the results stay there. Work is queued, not
    /// waited for, unless a host step needs a value.
    pub fn run_device(&self, args: &[M::Array]) -> Result<Vec<M::Array>, GpuError> {
        Ok(self.program.run_device(args)?)
    }

    /// A run recorded as a graph, for [`GpuProgram::replay`]; refused for a program with
    /// steps on the host.
    pub fn record(&self) -> Result<Recording<M>, GpuError> {
        Ok(self.program.record()?)
    }

    /// The results on `args` (on the device) by one launch of `recording`, a graph of this
    /// program's; work is queued, not waited for.
    pub fn replay(
        &self,
        recording: &Recording<M>,
        args: &[M::Array],
    ) -> Result<Vec<M::Array>, GpuError> {
        Ok(self.program.replay(recording, args)?)
    }

    /// This program as a GPU artifact (for devices of its target's compute capability or
    /// later), with the caller's `metadata` and the compiler's `notes`.
    pub fn to_artifact(&self, metadata: &[u8], notes: &[u8]) -> Result<Vec<u8>, GpuError> {
        let run = assembled(Cow::Borrowed(&self.plan.run), self.target)?;
        let target = gpu_target(self.target);
        Ok(gpu_artifact(
            &run,
            target,
            self.program.matmul(),
            (metadata, notes),
        )?)
    }
}
