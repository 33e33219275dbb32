//! Derivative rules, dispatched exhaustively over `Op` so that a new op without rules does
//! not compile. `jvp` returns the tangent of an instruction's result (`None` for zero); `vjp`
//! returns the cotangent contribution for each operand.

mod attention;
mod call;
mod contract;
pub(super) mod control;
mod elementwise;
mod fft;
mod indexing;
mod linalg;
mod movement;
mod reduce;
mod remat;
pub(super) mod scan;
mod sort;

use super::emit::{Emitter, R};
use super::AutodiffError;
pub(super) use control::Calls;
use ferrax_ir::{LuPart, Op, ValueId};

/// Forward mode through a call that yields the primal result too, as `(primal, tangent)`:
/// `while`, `cond`, `scan` and `remat` with some tangent (the primal call is then not
/// needed). `None` for every other instruction, whose primal is emitted as is and
/// differentiated by [`jvp`].
pub(super) fn call_jvp(
    e: &mut Emitter,
    calls: &mut Calls,
    op: &Op,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<(ValueId, Option<ValueId>)>> {
    let differentiated = t.iter().any(Option::is_some);
    match op {
        Op::While(_) | Op::Cond(_) | Op::Remat(_) | Op::Scan(_) if differentiated => {
            control::call_jvp(e, calls, op, x, t).map(Some)
        }
        Op::While(_)
        | Op::Cond(_)
        | Op::Remat(_)
        | Op::Scan(_)
        | Op::CustomVjp(_)
        | Op::CustomJvp(_)
        | Op::Constant(_)
        | Op::Iota { .. }
        | Op::Compare(_)
        | Op::BitcastConvert { .. }
        | Op::StopGradient
        | Op::Argsort { .. }
        | Op::Fft { .. }
        | Op::TriangularSolve(_)
        | Op::Cholesky
        | Op::Lu(_)
        | Op::Qr(_)
        | Op::Eigh(_)
        | Op::Svd(_)
        | Op::Geqrf(_)
        | Op::HouseholderProduct
        | Op::Eig(_)
        | Op::Sort { .. }
        | Op::Unary(_)
        | Op::Binary(_)
        | Op::Select
        | Op::Clamp
        | Op::Convert { .. }
        | Op::BroadcastInDim { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Reverse { .. }
        | Op::Slice { .. }
        | Op::Pad { .. }
        | Op::Concatenate { .. }
        | Op::Gather(_)
        | Op::DynamicSlice { .. }
        | Op::DynamicUpdateSlice
        | Op::Scatter(_)
        | Op::Reduce { .. }
        | Op::DotGeneral(_)
        | Op::Attention(_)
        | Op::DebugCallback { .. }
        | Op::PureCallback(_)
        | Op::IoCallback(_)
        | Op::AddDependency => Ok(None),
    }
}

pub(super) fn jvp(
    e: &mut Emitter,
    op: &Op,
    x: &[ValueId],
    t: &[Option<ValueId>],
    y: ValueId,
) -> R<Option<ValueId>> {
    match op {
        // Bit reinterpretation is not differentiable (as in JAX): its tangent is zero.
        Op::Constant(_)
        | Op::Iota { .. }
        | Op::Compare(_)
        | Op::BitcastConvert { .. }
        | Op::StopGradient
        | Op::Argsort { .. }
        | Op::DebugCallback { .. } => Ok(None),
        Op::PureCallback(_) | Op::IoCallback(_) => match t.iter().any(Option::is_some) {
            true => Err(no_callback_derivative(op)),
            false => Ok(None),
        },
        // The tangent waits for the same effects as the value.
        Op::AddDependency => t[0]
            .map(|dx| e.push(Op::AddDependency, &[dx, x[1]]))
            .transpose(),
        Op::Fft { .. } => fft::jvp(e, op, t[0]),
        Op::TriangularSolve(s) => linalg::jvp(e, s, x, t, y),
        Op::Cholesky => linalg::cholesky_jvp(e, t[0], y),
        Op::Lu(part) => linalg::lu_jvp(e, *part, x[0], t[0], y),
        Op::Qr(qr) => linalg::qr_jvp(e, qr, x[0], t[0]),
        Op::Eigh(part) => linalg::eigh_jvp(e, *part, x[0], t[0]),
        Op::Svd(svd) => linalg::svd_jvp(e, svd, x[0], t[0]),
        Op::Eig(part) => linalg::eig_jvp(e, *part, x[0], t[0]),
        Op::Geqrf(_) | Op::HouseholderProduct => match t.iter().any(Option::is_some) {
            true => Err(linalg::no_derivative(op)),
            false => Ok(None),
        },
        Op::Sort {
            dimension,
            descending,
        } => sort::jvp(e, *dimension, *descending, x[0], t[0]),
        Op::Unary(u) => elementwise::unary_jvp(e, *u, x[0], t[0], y),
        Op::Binary(b) => elementwise::binary_jvp(e, *b, x, t, y),
        Op::Select => elementwise::select_jvp(e, x, t),
        Op::Clamp => elementwise::clamp_jvp(e, x, t),
        Op::Convert { to } => elementwise::convert_jvp(e, x[0], t[0], *to),
        Op::BroadcastInDim { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Reverse { .. }
        | Op::Slice { .. }
        | Op::Pad { .. }
        | Op::Concatenate { .. } => movement::jvp(e, op, x, t),
        Op::Gather(_) | Op::DynamicSlice { .. } => indexing::slice_jvp(e, op, x, t),
        Op::DynamicUpdateSlice => indexing::update_slice_jvp(e, x, t),
        Op::Scatter(s) => indexing::scatter_jvp(e, s, x, [t[0], t[2]], y).map(Some),
        Op::Reduce { op: r, axes } => reduce::jvp(e, *r, axes, x[0], t[0], y),
        Op::DotGeneral(dims) => contract::jvp(e, dims, x, t),
        Op::CustomVjp(c) => call::jvp(e, c, x, t),
        Op::CustomJvp(c) => call::custom_jvp_jvp(e, c, x, t),
        Op::Attention(a) => attention::jvp(e, *a, x, t),
        // Differentiated with their primal results by `call_jvp`, never here.
        Op::While(_) | Op::Cond(_) | Op::Remat(_) | Op::Scan(_) => Err(AutodiffError::Unsupported(
            format!("forward mode of `{}` without its primal call", op.name()),
        )),
    }
}

/// A host function's derivative is unknown to the compiler, as to JAX.
fn no_callback_derivative(op: &Op) -> AutodiffError {
    AutodiffError::Unsupported(format!(
        "{} has no derivative; give the function one with custom_jvp or custom_vjp",
        op.name()
    ))
}

/// Whether reverse mode takes the cotangents of all of `op`'s results at once, the
/// instructions of its other results with it: one backward scan, one pass of the taken
/// branch's VJP program, for all of them.
pub(super) fn joins_results(op: &Op) -> bool {
    match op {
        Op::Cond(_) | Op::Scan(_) => true,
        Op::While(_)
        | Op::Remat(_)
        | Op::CustomVjp(_)
        | Op::CustomJvp(_)
        | Op::Constant(_)
        | Op::Iota { .. }
        | Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Select
        | Op::Clamp
        | Op::Convert { .. }
        | Op::BitcastConvert { .. }
        | Op::BroadcastInDim { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Reverse { .. }
        | Op::Reduce { .. }
        | Op::DotGeneral(_)
        | Op::Slice { .. }
        | Op::Pad { .. }
        | Op::Concatenate { .. }
        | Op::Gather(_)
        | Op::Scatter(_)
        | Op::DynamicSlice { .. }
        | Op::DynamicUpdateSlice
        | Op::StopGradient
        | Op::Sort { .. }
        | Op::Argsort { .. }
        | Op::Fft { .. }
        | Op::TriangularSolve(_)
        | Op::Cholesky
        | Op::Lu(_)
        | Op::Qr(_)
        | Op::Eigh(_)
        | Op::Svd(_)
        | Op::Geqrf(_)
        | Op::HouseholderProduct
        | Op::Eig(_)
        | Op::Attention(_)
        | Op::DebugCallback { .. }
        | Op::PureCallback(_)
        | Op::IoCallback(_)
        | Op::AddDependency => false,
    }
}

pub(super) fn vjp(
    e: &mut Emitter,
    op: &Op,
    x: &[ValueId],
    y: ValueId,
    gs: &[Option<ValueId>],
) -> R<Vec<Option<ValueId>>> {
    // The cotangent of the result this instruction yields (all of a scan's or cond's are in
    // `gs`, see `joins_results`).
    let own = op.call_result().map_or(0, |(k, _)| k);
    let g = || {
        gs.get(own)
            .copied()
            .flatten()
            .ok_or(AutodiffError::Undefined(y))
    };
    match op {
        Op::Constant(_) | Op::Iota { .. } => Ok(Vec::new()),
        Op::Compare(_) => Ok(vec![None, None]),
        Op::StopGradient | Op::BitcastConvert { .. } | Op::Argsort { .. } => Ok(vec![None]),
        Op::DebugCallback { .. } => Ok(vec![None; x.len()]),
        Op::PureCallback(_) | Op::IoCallback(_) => Err(no_callback_derivative(op)),
        // The cotangent waits for the effects too, so a gradient program keeps them.
        Op::AddDependency => Ok(vec![Some(e.push(Op::AddDependency, &[g()?, x[1]])?), None]),
        Op::Fft { kind, lengths } => Ok(vec![Some(fft::vjp(e, *kind, lengths, g()?)?)]),
        Op::TriangularSolve(s) => linalg::vjp(e, s, x, y, g()?),
        Op::Cholesky => Ok(vec![Some(linalg::cholesky_vjp(e, y, g()?)?)]),
        Op::Lu(LuPart::Factors) => Ok(vec![Some(linalg::lu_vjp(e, x[0], y, g()?)?)]),
        Op::Lu(LuPart::Pivots | LuPart::Permutation) => Ok(vec![None]),
        Op::Qr(qr) => Ok(vec![Some(linalg::qr_vjp(e, qr, x[0], g()?)?)]),
        Op::Eigh(part) => Ok(vec![Some(linalg::eigh_vjp(e, *part, x[0], g()?)?)]),
        Op::Svd(svd) => Ok(vec![Some(linalg::svd_vjp(e, svd, x[0], g()?)?)]),
        Op::Eig(part) => Ok(vec![Some(linalg::eig_vjp(e, *part, x[0], g()?)?)]),
        Op::Geqrf(_) | Op::HouseholderProduct => Err(linalg::no_derivative(op)),
        Op::Sort {
            dimension,
            descending,
        } => Ok(vec![Some(sort::vjp(
            e,
            *dimension,
            *descending,
            x[0],
            g()?,
        )?)]),
        Op::Unary(u) => Ok(vec![elementwise::unary_vjp(e, *u, x[0], y, g()?)?]),
        Op::Binary(b) => elementwise::binary_vjp(e, *b, x, y, g()?),
        Op::Select => elementwise::select_vjp(e, x, g()?),
        Op::Clamp => elementwise::clamp_vjp(e, x, g()?),
        Op::Convert { .. } => Ok(vec![elementwise::convert_vjp(e, x[0], g()?)?]),
        Op::BroadcastInDim { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Reverse { .. }
        | Op::Slice { .. }
        | Op::Pad { .. }
        | Op::Concatenate { .. } => movement::vjp(e, op, x, g()?),
        Op::Gather(gather) => indexing::gather_vjp(e, gather, x, g()?),
        Op::DynamicSlice { .. } => indexing::dynamic_slice_vjp(e, x, g()?),
        Op::DynamicUpdateSlice => indexing::update_slice_vjp(e, x, g()?),
        Op::Scatter(s) => indexing::scatter_vjp(e, s, x, y, g()?),
        Op::Reduce { op: r, axes } => Ok(vec![reduce::vjp(e, *r, axes, x[0], y, g()?)?]),
        Op::DotGeneral(dims) => contract::vjp(e, dims, x, g()?),
        Op::CustomVjp(c) => call::vjp(e, c, x, g()?),
        Op::CustomJvp(c) => call::custom_jvp_vjp(e, c, x, g()?),
        Op::Attention(a) => attention::vjp(e, *a, x, y, g()?),
        Op::While(_) => control::while_vjp(),
        Op::Cond(c) => control::cond_vjp(e, c, x, gs),
        Op::Scan(s) => scan::vjp(e, s, x, gs),
        Op::Remat(r) => remat::vjp(e, r, x, g()?),
    }
}

/// `t`, or zeros shaped like `like` where the tangent is symbolically zero.
fn or_zero(e: &mut Emitter, t: Option<ValueId>, like: ValueId) -> R {
    match t {
        Some(t) => Ok(t),
        None => e.full_like(0.0, like),
    }
}

/// The sum of the present terms, `None` if there are none.
fn sum_terms(
    e: &mut Emitter,
    terms: impl IntoIterator<Item = Option<ValueId>>,
) -> R<Option<ValueId>> {
    let mut acc = None;
    for t in terms.into_iter().flatten() {
        acc = Some(match acc {
            Some(a) => e.add(a, t)?,
            None => t,
        });
    }
    Ok(acc)
}
