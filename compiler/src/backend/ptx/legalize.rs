//! Legalization: a kernel as the PTX renderer takes it. What the support table
//! ([`super::support`]) marks [`Support::Expand`] is expanded into primitives, and every
//! instruction left is checked against the table, so the renderer never meets an instruction it
//! has no selection for; a kernel that fails is left to the host by the plan rather than failing
//! the program.

use super::{entry_name, rows, support, MathMode, PtxError};
use crate::kernel::halves;
use crate::kernel::{math, KOp, Kernel};
use crate::target::Support;
use ferrax_ir::DType;

/// A kernel ready to render: what the support table ([`support`]) marks
/// [`Support::Expand`] expanded (f16/bf16 widened to f32, f32 remainders and integer powers,
/// transcendentals but for those `mode` approximates), and every instruction left one the
/// table marks [`Support::Native`] or a primitive the renderer has.
pub fn legalize(kernel: &Kernel, mode: MathMode) -> Result<Kernel, PtxError> {
    let target = support::target(mode);
    let native = |op: &KOp, d: DType| {
        op.kernel_op()
            .is_some_and(|op| target.support(op, d) == Support::Native)
    };
    let widened = math::expand_arithmetic(&halves::widen(kernel));
    let mut expanded = math::expand_guarded_except(&widened, &native);
    let unsupported = |what: String| PtxError::Unsupported {
        kernel: kernel.name.clone(),
        what,
    };
    if let Some(r) = &kernel.rows {
        if r.cols > rows::MAX_COLS {
            return Err(unsupported(format!("rows of {} elements", r.cols)));
        }
        if rows::row_layout(&expanded).is_some_and(|l| l.streamed) {
            expanded = crate::kernel::rows::recompute_carried(&expanded);
        }
    }
    for ins in &expanded.body {
        // u8 values are only loaded, converted and stored.
        let byte = std::iter::once(ins.dtype)
            .chain(ins.args.iter().map(|&a| expanded.body[a].dtype))
            .any(|d| d == DType::U8);
        if byte && !matches!(ins.op, KOp::Load(_) | KOp::Store(_) | KOp::Convert(_)) {
            return Err(unsupported(format!("{:?} on u8", ins.op)));
        }
        let int = matches!(ins.dtype, DType::I32 | DType::I64 | DType::U32);
        let ok = match &ins.op {
            KOp::Load(_) | KOp::Store(_) | KOp::Const(_) | KOp::Bitcast => true,
            KOp::Fma => !int && ins.dtype != DType::Bool,
            KOp::ShiftLeft(_) | KOp::ShiftRight(_) => int,
            KOp::ShiftRightLogical(_) => matches!(ins.dtype, DType::I32 | DType::U32),
            KOp::Index { .. } => matches!(ins.dtype, DType::I32 | DType::U32),
            KOp::Beyond(_) => matches!(ins.dtype, DType::F32 | DType::F64),
            KOp::Reduce(_) if kernel.rows.is_none() => false,
            KOp::Unary(_)
            | KOp::Binary(_)
            | KOp::Compare(_)
            | KOp::Select
            | KOp::Clamp
            | KOp::Convert(_)
            | KOp::Reduce(_)
            | KOp::Accumulate(_) => expanded
                .support_entry(ins)
                .is_some_and(|(op, d)| target.support(op, d) == Support::Native),
        };
        if !ok {
            return Err(unsupported(format!("{:?} on {}", ins.op, ins.dtype)));
        }
    }
    Ok(expanded)
}

/// `kernel` legalized, and checked to render as an entry of its own.
pub fn legal_kernel(kernel: &Kernel, mode: MathMode) -> Result<Kernel, PtxError> {
    let legal = legalize(kernel, mode)?;
    let name = entry_name(kernel);
    super::render_alone(&name, &legal, mode)?;
    Ok(legal)
}
