//! Shape and dtype rules: one function computes every op's result type, split by op family.
//! Attributes may hold any value the text format can write, so arithmetic on them is checked
//! and a result that would not fit is an error naming the op.

mod call;
mod contract;
mod control;
mod effect;
mod elementwise;
mod fft;
mod indexing;
mod linalg;
mod movement;
mod nest;
mod reduce;
mod sort;
mod source;

use crate::{Op, TensorType, TypeError, MAX_RANK};

/// The result type of `op` applied to operands of types `args`, or why it is ill-typed.
pub fn infer_type(op: &Op, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    if !op.regions().is_empty() {
        nest::check(op)?;
    }
    let ty = match op {
        Op::Constant(lit) => source::constant(lit, args)?,
        Op::Iota { dtype, shape, dim } => source::iota(*dtype, shape, *dim, args)?,
        Op::Unary(u) => elementwise::unary(*u, args)?,
        Op::Binary(b) => elementwise::binary(*b, args)?,
        Op::Compare(c) => elementwise::compare(*c, args)?,
        Op::Select => elementwise::select(args)?,
        Op::Clamp => elementwise::clamp(args)?,
        Op::Convert { to } => elementwise::convert(*to, args)?,
        Op::BitcastConvert { to } => elementwise::bitcast_convert(*to, args)?,
        Op::StopGradient => elementwise::identity(op.name(), args)?,
        Op::BroadcastInDim { shape, dims } => movement::broadcast_in_dim(shape, dims, args)?,
        Op::Reshape { shape } => movement::reshape(shape, args)?,
        Op::Transpose { perm } => movement::transpose(perm, args)?,
        Op::Reverse { axes } => movement::reverse(axes, args)?,
        Op::Slice {
            start,
            limit,
            strides,
        } => movement::slice(start, limit, strides, args)?,
        Op::Pad {
            low,
            high,
            interior,
        } => movement::pad(low, high, interior, args)?,
        Op::Concatenate { axis } => movement::concatenate(*axis, args)?,
        Op::Gather(g) => indexing::gather(g, args)?,
        Op::Scatter(s) => indexing::scatter(s, args)?,
        Op::DynamicSlice { sizes } => indexing::dynamic_slice(sizes, args)?,
        Op::DynamicUpdateSlice => indexing::dynamic_update_slice(args)?,
        Op::Reduce { op: r, axes } => reduce::reduce(*r, axes, args)?,
        Op::DotGeneral(dims) => contract::dot_general(dims, args)?,
        Op::Attention(a) => a.result_type(args)?,
        Op::CustomVjp(c) => call::custom_vjp(c, args)?,
        Op::CustomJvp(c) => call::custom_jvp(c, args)?,
        Op::DebugCallback { .. } => effect::debug_callback(args)?,
        Op::AddDependency => effect::add_dependency(args)?,
        Op::PureCallback(c) => c.result.clone(),
        Op::IoCallback(c) => effect::io_callback(c, args)?,
        Op::While(w) => control::while_loop(w, args)?,
        Op::Cond(c) => control::cond(c, args)?,
        Op::Scan(s) => control::scan(s, args)?,
        Op::Remat(r) => control::remat(r, args)?,
        Op::Sort { dimension, .. } => sort::sort(op.name(), *dimension, args)?,
        Op::Argsort { dimension, .. } => sort::argsort(op.name(), *dimension, args)?,
        Op::Fft { kind, lengths } => fft::fft(*kind, lengths, args)?,
        Op::TriangularSolve(s) => linalg::triangular_solve(s, args)?,
        Op::Cholesky => linalg::cholesky(args)?,
        Op::Lu(part) => linalg::lu(*part, args)?,
        Op::Qr(qr) => linalg::qr(qr, args)?,
        Op::Eigh(part) => linalg::eigh(*part, args)?,
        Op::Svd(svd) => linalg::svd(svd, args)?,
        Op::Geqrf(part) => linalg::geqrf(*part, args)?,
        Op::HouseholderProduct => linalg::householder_product(args)?,
        Op::Eig(part) => linalg::eig(*part, args)?,
    };
    if ty.rank() > MAX_RANK {
        return Err(TypeError::Rank {
            op: op.name(),
            rank: ty.rank(),
            max: MAX_RANK,
        });
    }
    if ty.checked_bytes().is_none() {
        return Err(TypeError::Size { op: op.name(), ty });
    }
    Ok(ty)
}

fn arity<'a, const N: usize>(
    op: &'static str,
    args: &[&'a TensorType],
) -> Result<[&'a TensorType; N], TypeError> {
    args.try_into().map_err(|_| TypeError::Arity {
        op,
        expected: N.to_string(),
        got: args.len(),
    })
}

fn invalid(op: &'static str, message: impl Into<String>) -> TypeError {
    TypeError::Invalid {
        op,
        message: message.into(),
    }
}

/// An axis as an error reports it (axes past `i64::MAX` show as `i64::MAX`).
fn axis_number(axis: usize) -> i64 {
    i64::try_from(axis).unwrap_or(i64::MAX)
}

/// The element count of `ty`, which must be within [`crate::MAX_BYTES`] (so it cannot overflow).
fn numel(op: &'static str, ty: &TensorType) -> Result<usize, TypeError> {
    match ty.checked_bytes() {
        Some(_) => Ok(ty.numel()),
        None => Err(TypeError::Size { op, ty: ty.clone() }),
    }
}

/// Checks that `axes` are distinct and below `rank`.
fn check_axes(op: &'static str, axes: &[usize], ty: &TensorType) -> Result<(), TypeError> {
    for (i, &a) in axes.iter().enumerate() {
        if a >= ty.rank() {
            return Err(TypeError::Axis {
                op,
                axis: axis_number(a),
                ty: ty.clone(),
            });
        }
        if axes[..i].contains(&a) {
            return Err(invalid(op, format!("axis {a} appears twice in {axes:?}")));
        }
    }
    Ok(())
}
