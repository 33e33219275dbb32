//! Batching rules, dispatched exhaustively over `Op` so that a new op without a rule does not
//! compile. A rule sees at least one batched operand (instructions on unbatched operands
//! only are copied as they are) and returns the batched result with its batch dimension.

mod attention;
mod call;
mod callback;
mod contract;
mod control;
mod elementwise;
mod fft;
mod indexing;
mod linalg;
mod movement;
mod reduce;
mod scan;
mod sort;

use super::builder::{BVal, Batcher};
use super::{BatchError, R};
use ferrax_ir::{Op, TensorType};

/// The batched result of the single-result op `op` on `args`; `ty` is its per-example type.
pub(super) fn batch(bt: &mut Batcher, op: &Op, args: &[BVal], ty: &TensorType) -> R<BVal> {
    match op {
        Op::Constant(_) | Op::Iota { .. } => {
            let v = bt.push(op.clone(), &[])?;
            Ok(BVal { v, bdim: None })
        }
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Select
        | Op::Clamp
        | Op::Convert { .. }
        | Op::BitcastConvert { .. }
        | Op::StopGradient => elementwise::batch(bt, op, args, ty.rank()),
        Op::BroadcastInDim { shape, dims } => movement::broadcast(bt, shape, dims, args[0]),
        Op::Reshape { shape } => movement::reshape(bt, shape, args[0]),
        Op::Transpose { perm } => movement::transpose(bt, perm, args[0]),
        Op::Reverse { axes } => movement::reverse(bt, axes, args[0]),
        Op::Slice {
            start,
            limit,
            strides,
        } => movement::slice(bt, (start, limit, strides), args[0]),
        Op::Pad {
            low,
            high,
            interior,
        } => movement::pad(bt, (low, high, interior), args),
        Op::Concatenate { axis } => movement::concatenate(bt, *axis, args),
        Op::Reduce { op: r, axes } => reduce::batch(bt, *r, axes, args[0]),
        Op::DotGeneral(dims) => contract::batch(bt, dims, args[0], args[1]),
        Op::Gather(g) => indexing::gather(bt, g, args[0], args[1]),
        Op::Scatter(s) => indexing::scatter(bt, s, args),
        Op::DynamicSlice { sizes } => indexing::dynamic_slice(bt, sizes, args),
        Op::DynamicUpdateSlice => indexing::dynamic_update_slice(bt, args),
        Op::Sort {
            dimension,
            descending,
        } => sort::batch(bt, *dimension, args[0], |dimension| Op::Sort {
            dimension,
            descending: *descending,
        }),
        Op::Argsort {
            dimension,
            descending,
        } => sort::batch(bt, *dimension, args[0], |dimension| Op::Argsort {
            dimension,
            descending: *descending,
        }),
        Op::Fft { kind, lengths } => fft::batch(bt, *kind, lengths, args[0]),
        Op::TriangularSolve(_)
        | Op::Cholesky
        | Op::Lu(_)
        | Op::Qr(_)
        | Op::Eigh(_)
        | Op::Svd(_)
        | Op::Geqrf(_)
        | Op::HouseholderProduct
        | Op::Eig(_) => linalg::leading(bt, op.clone(), args),
        Op::CustomVjp(c) => call::custom_vjp(bt, c, args),
        Op::CustomJvp(c) => call::custom_jvp(bt, c, args),
        Op::Attention(a) => attention::batch(bt, *a, args),
        Op::DebugCallback { .. } => callback::debug_callback(bt, op, args),
        Op::AddDependency => callback::add_dependency(bt, op, args),
        Op::PureCallback(c) => callback::pure_callback(bt, c, args),
        Op::IoCallback(c) => callback::io_callback(bt, c, args),
        Op::While(_) | Op::Cond(_) | Op::Scan(_) | Op::Remat(_) => {
            let k = op.call_result().map_or(0, |(k, _)| k);
            let results = call(bt, op, args)?;
            results
                .get(k)
                .copied()
                .ok_or_else(|| BatchError::Malformed(format!("{}: no result {k}", op.name())))
        }
    }
}

/// All results of the control-flow call `op` on `args`, batched.
pub(super) fn call(bt: &mut Batcher, op: &Op, args: &[BVal]) -> R<Vec<BVal>> {
    match op {
        Op::While(w) => control::while_loop(bt, w, args),
        Op::Cond(c) => control::cond(bt, c, args),
        Op::Scan(s) => scan::batch(bt, s, args),
        Op::Remat(r) => control::remat(bt, r, args),
        Op::Constant(_)
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
        | Op::CustomVjp(_)
        | Op::CustomJvp(_)
        | Op::DebugCallback { .. }
        | Op::PureCallback(_)
        | Op::IoCallback(_)
        | Op::AddDependency => Err(BatchError::Malformed(format!(
            "{} is not a control-flow call",
            op.name()
        ))),
    }
}
