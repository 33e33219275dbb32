//! Control flow on the GPU: each region of a `while`, `cond`, `scan` or `remat` is planned as
//! a GPU program of its own, with the enclosing program; the runtime's executor
//! (`ferrax_aot_runtime::gpu`) loads the regions with it and drives the call from the host.

use super::plan::GpuPlan;
use super::*;
use crate::backend::ptx::PtxTarget;
use ferrax_aot_runtime::gpu::{CallKind, ScanShape};
use ferrax_ir::Op;

/// The regions of a control-flow call, planned.
pub(super) struct CallPlan {
    kind: CallKind,
    regions: Vec<GpuPlan>,
}

impl CallPlan {
    /// The plans of the regions of `op`, a control-flow call, as the enclosing program's.
    pub(super) fn new(
        op: &Op,
        target: PtxTarget,
        options: GpuOptions,
    ) -> Result<CallPlan, GpuError> {
        let kind = match op {
            Op::While(_) => CallKind::While,
            Op::Cond(_) => CallKind::Cond,
            Op::Scan(s) => CallKind::Scan(ScanShape {
                consts: s.consts,
                carry: s.carry,
                length: s.length,
                reverse: s.reverse,
            }),
            Op::Remat(_) => CallKind::Remat,
            op => return Err(GpuError::NotACall(op.name().to_string())),
        };
        let regions = op
            .regions()
            .into_iter()
            .map(|(_, f)| GpuPlan::with_options(f, target, options))
            .collect::<Result<_, _>>()?;
        Ok(CallPlan { kind, regions })
    }

    pub(super) fn kind(&self) -> CallKind {
        self.kind
    }

    /// The regions' plans.
    pub(super) fn regions(&self) -> &[GpuPlan] {
        &self.regions
    }
}
