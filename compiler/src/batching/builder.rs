//! The batched program under construction: values with their batch dimension, and the moves
//! and broadcasts rules use to line batch dimensions up.

use super::{BatchError, R};
use ferrax_ir::{
    CompareOp, DType, Func, FuncBuilder, Literal, Op, Scalar, Shape, TensorType, ValueId,
};

/// A value of the batched program and the position of its batch dimension (`None`: the same
/// for every example, of the per-example type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BVal {
    pub v: ValueId,
    pub bdim: Option<usize>,
}

impl BVal {
    pub fn at(v: ValueId, bdim: usize) -> BVal {
        BVal {
            v,
            bdim: Some(bdim),
        }
    }
}

pub(crate) struct Batcher {
    pub b: FuncBuilder,
    pub size: usize,
}

/// Per-example dimension `d` of a value batched at `bdim`, as a dimension of the batched one.
pub(crate) fn shifted(d: usize, bdim: Option<usize>) -> usize {
    match bdim {
        Some(b) if d >= b => d + 1,
        _ => d,
    }
}

impl Batcher {
    pub fn new(b: FuncBuilder, size: usize) -> Batcher {
        Batcher { b, size }
    }

    pub fn push(&mut self, op: Op, args: &[ValueId]) -> R {
        Ok(self.b.push(op, args)?)
    }

    pub fn ty(&self, v: ValueId) -> R<TensorType> {
        self.b
            .value_type(v)
            .cloned()
            .ok_or(BatchError::Undefined(v))
    }

    /// The rank `x` has per example.
    pub fn rank(&self, x: BVal) -> R<usize> {
        Ok(self.ty(x.v)?.rank() - usize::from(x.bdim.is_some()))
    }

    /// The per-example type of `x`.
    pub fn example_type(&self, x: BVal) -> R<TensorType> {
        let ty = self.ty(x.v)?;
        let mut dims = ty.dims().to_vec();
        if let Some(b) = x.bdim {
            dims.remove(b);
        }
        Ok(ty.with_shape(dims))
    }

    /// `x` with its batch dimension at `to`: moved there if `x` is batched, broadcast along
    /// the batch otherwise.
    pub fn materialize(&mut self, x: BVal, to: usize) -> R {
        let ty = self.ty(x.v)?;
        match x.bdim {
            Some(from) if from == to => Ok(x.v),
            Some(from) => {
                let mut perm: Vec<usize> = (0..ty.rank()).filter(|&d| d != from).collect();
                perm.insert(to, from);
                self.push(Op::Transpose { perm }, &[x.v])
            }
            None => {
                let shape = super::batched_type(&ty, to, self.size)?.shape;
                let dims = (0..ty.rank()).map(|d| shifted(d, Some(to))).collect();
                self.push(Op::BroadcastInDim { shape, dims }, &[x.v])
            }
        }
    }

    /// A scalar constant `value` of `dtype`, the same for every example.
    pub fn scalar(&mut self, dtype: DType, value: f64) -> R {
        self.constant(Scalar::from_f64(dtype, value), Shape::scalar())
    }

    pub fn constant(&mut self, value: Scalar, shape: Shape) -> R {
        self.push(Op::Constant(Literal::splat(value, shape)), &[])
    }

    /// `pred` (`bool[B]` or `i32[B]` compared with `k`) spread over `like`'s batched shape,
    /// whose batch dimension is 0.
    pub fn lane_mask(&mut self, pred: ValueId, like: ValueId) -> R {
        let shape = self.ty(like)?.shape;
        if self.ty(pred)?.shape == shape {
            return Ok(pred);
        }
        self.push(
            Op::BroadcastInDim {
                shape,
                dims: vec![0],
            },
            &[pred],
        )
    }

    /// `index == k` per lane, for a batched `i32` or `bool` index.
    pub fn lane_equals(&mut self, index: ValueId, k: usize) -> R {
        let ty = self.ty(index)?;
        let c = self.constant(Scalar::from_f64(ty.dtype, k as f64), ty.shape)?;
        self.push(Op::Compare(CompareOp::Eq), &[index, c])
    }

    pub fn select(&mut self, pred: ValueId, on_true: ValueId, on_false: ValueId) -> R {
        let mask = self.lane_mask(pred, on_true)?;
        self.push(Op::Select, &[mask, on_true, on_false])
    }

    /// Emits `func`'s instructions on `args` and returns its outputs.
    pub fn inline(&mut self, func: &Func, args: &[ValueId]) -> R<Vec<ValueId>> {
        let mut values: Vec<ValueId> = args.to_vec();
        for ins in &func.body {
            let operands: Vec<ValueId> = ins
                .args
                .iter()
                .map(|a| {
                    values
                        .get(a.index())
                        .copied()
                        .ok_or(BatchError::Undefined(*a))
                })
                .collect::<R<_>>()?;
            values.push(self.push(ins.op.clone(), &operands)?);
        }
        func.outputs
            .iter()
            .map(|o| {
                values
                    .get(o.index())
                    .copied()
                    .ok_or(BatchError::Undefined(*o))
            })
            .collect()
    }
}
