//! Control flow on the GPU: each region of a `while`, `cond`, `scan` or `remat` is a GPU
//! program of its own, planned with the enclosing program and loaded once with it. A call
//! queues its regions' steps on the device's stream, so the loop is driven from the host but
//! its data stays on the device:
//! - a `scan` waits for nothing: each step reads its slices of the stacked inputs in place
//!   (copied out only where a slice would start off [`VIEW_ALIGNMENT`]), its row of each
//!   stacked output is a device-to-device copy queued with its kernels, and the carried
//!   values pass from one step to the next as buffers, uncopied;
//! - a `while` reads back its condition's one `bool` per iteration, a `cond` its index once.

use super::plan::{CallKind, GpuCallPlan, ScanShape};
use super::program::GpuProgram;
use super::GpuRunError;
use ferrax_ir::{Scalar, Shape, TensorType};
use ferrax_runtime::branch_index;
use ferrax_runtime::cuda::MatmulPrecision;
use ferrax_runtime::machine::GpuMachine;

/// Slices whose bytes are a multiple of this are read in place: each then starts as aligned
/// as an allocation (CUDA's are 256-byte aligned), as kernels' vector loads and cuBLAS assume.
const VIEW_ALIGNMENT: usize = 256;

/// The regions of a control-flow call, loaded on a machine.
pub(super) struct Call<M: GpuMachine> {
    kind: CallKind,
    regions: Vec<GpuProgram<M>>,
}

impl<M: GpuMachine + Clone> Call<M> {
    /// Loads `plan`'s regions (checked with the plan they are in) on `machine`.
    pub(super) fn load(
        plan: GpuCallPlan,
        machine: &M,
        matmul: MatmulPrecision,
    ) -> Result<Self, GpuRunError> {
        let regions = plan
            .regions
            .into_iter()
            .map(|p| GpuProgram::load_checked(p, machine, matmul))
            .collect::<Result<_, _>>()?;
        Ok(Call {
            kind: plan.kind,
            regions,
        })
    }
}

impl<M: GpuMachine> Call<M> {
    /// The regions' programs.
    pub(super) fn regions(&self) -> &[GpuProgram<M>] {
        &self.regions
    }

    /// Region `k`.
    fn region(&self, k: usize) -> Result<&GpuProgram<M>, GpuRunError> {
        self.regions.get(k).ok_or(GpuRunError::MissingCallPart(k))
    }

    /// Every result of the call on `args`.
    pub(super) fn run(
        &self,
        machine: &M,
        args: Vec<M::Array>,
    ) -> Result<Vec<M::Array>, GpuRunError> {
        match self.kind {
            CallKind::While => {
                let (cond, body) = (self.region(0)?, self.region(1)?);
                let mut carried = args;
                loop {
                    let holds = cond.run_planned(&carried)?;
                    let predicate = holds.first().ok_or(GpuRunError::MissingCallPart(0))?;
                    if machine.download(predicate)?.elements().get(0) != Scalar::Bool(true) {
                        return Ok(carried);
                    }
                    carried = body.run_planned(&carried)?;
                }
            }
            CallKind::Cond => {
                let (index, operands) =
                    args.split_first().ok_or(GpuRunError::MissingCallPart(0))?;
                let k = branch_index(&machine.download(index)?, self.regions.len());
                self.region(k)?.run_planned(operands)
            }
            CallKind::Scan(shape) => scan(machine, self.region(0)?, shape, args),
            CallKind::Remat => self.region(0)?.run_planned(&args),
        }
    }
}

/// A `scan` of `body` on `args` (constants, carried values, stacked inputs), every step
/// queued without waiting for the device.
fn scan<M: GpuMachine>(
    machine: &M,
    body: &GpuProgram<M>,
    s: ScanShape,
    mut args: Vec<M::Array>,
) -> Result<Vec<M::Array>, GpuRunError> {
    let xs = args.split_off((s.consts + s.carry).min(args.len()));
    let mut carried = args.split_off(s.consts.min(args.len()));
    let consts = args;
    let func = &body.plan.func;
    let slices = func.params.get(s.consts + s.carry..).unwrap_or_default();
    let rows = func.output_types();
    let rows = rows.get(s.carry..).unwrap_or_default();
    let ys = rows
        .iter()
        .map(|ty| {
            let dims = std::iter::once(s.length).chain(ty.dims().iter().copied());
            machine.alloc(&TensorType::new(
                ty.dtype,
                Shape::new(dims.collect::<Vec<_>>()),
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for step in 0..s.length {
        let t = if s.reverse { s.length - 1 - step } else { step };
        let mut inputs = consts.clone();
        inputs.append(&mut carried);
        for (x, ty) in xs.iter().zip(slices) {
            let n = ty.numel();
            if (n * ty.dtype.size_bytes()).is_multiple_of(VIEW_ALIGNMENT) {
                inputs.push(M::view(x, t * n, ty)?);
            } else {
                let slice = machine.alloc(ty)?;
                machine.copy_elements((x, t * n), (&slice, 0), n)?;
                inputs.push(slice);
            }
        }
        let mut out = body.run_planned(&inputs)?;
        let y = out.split_off(s.carry.min(out.len()));
        carried = out;
        for ((stacked, y), ty) in ys.iter().zip(&y).zip(rows) {
            let n = ty.numel();
            machine.copy_elements((y, 0), (stacked, t * n), n)?;
        }
    }
    carried.extend(ys);
    Ok(carried)
}
