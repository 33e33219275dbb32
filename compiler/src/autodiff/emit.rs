//! A thin builder for derivative rules: typed helpers over `FuncBuilder` so that rules read
//! like the math they implement.

use super::AutodiffError;
use ferrax_ir::{
    BinaryOp, CompareOp, DType, FuncBuilder, Literal, Op, ReduceOp, Scalar, Shape, TensorType,
    UnaryOp, ValueId,
};

pub(crate) struct Emitter {
    pub b: FuncBuilder,
}

pub(crate) type R<T = ValueId> = Result<T, AutodiffError>;

impl Emitter {
    pub fn push(&mut self, op: Op, args: &[ValueId]) -> R {
        Ok(self.b.push(op, args)?)
    }

    pub fn ty(&self, v: ValueId) -> R<TensorType> {
        self.b
            .value_type(v)
            .cloned()
            .ok_or(AutodiffError::Undefined(v))
    }

    /// A constant of type `ty` with every element `value`.
    pub fn splat(&mut self, value: f64, ty: &TensorType) -> R {
        let lit = Literal::splat(Scalar::from_f64(ty.dtype, value), ty.shape.clone());
        self.push(Op::Constant(lit), &[])
    }

    /// A constant shaped like `like` with every element `value`.
    pub fn full_like(&mut self, value: f64, like: ValueId) -> R {
        let ty = self.ty(like)?;
        self.splat(value, &ty)
    }

    pub fn unary(&mut self, u: UnaryOp, x: ValueId) -> R {
        self.push(Op::Unary(u), &[x])
    }

    pub fn binary(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> R {
        self.push(Op::Binary(op), &[a, b])
    }

    pub fn add(&mut self, a: ValueId, b: ValueId) -> R {
        self.binary(BinaryOp::Add, a, b)
    }

    pub fn sub(&mut self, a: ValueId, b: ValueId) -> R {
        self.binary(BinaryOp::Sub, a, b)
    }

    pub fn mul(&mut self, a: ValueId, b: ValueId) -> R {
        self.binary(BinaryOp::Mul, a, b)
    }

    pub fn div(&mut self, a: ValueId, b: ValueId) -> R {
        self.binary(BinaryOp::Div, a, b)
    }

    pub fn neg(&mut self, a: ValueId) -> R {
        self.unary(UnaryOp::Neg, a)
    }

    /// `a * value` for a number `value`.
    pub fn scale(&mut self, a: ValueId, value: f64) -> R {
        let c = self.full_like(value, a)?;
        self.mul(a, c)
    }

    pub fn compare(&mut self, c: CompareOp, a: ValueId, b: ValueId) -> R {
        self.push(Op::Compare(c), &[a, b])
    }

    pub fn select(&mut self, p: ValueId, a: ValueId, b: ValueId) -> R {
        self.push(Op::Select, &[p, a, b])
    }

    pub fn convert(&mut self, x: ValueId, to: DType) -> R {
        if self.ty(x)?.dtype == to {
            return Ok(x);
        }
        self.push(Op::Convert { to }, &[x])
    }

    pub fn broadcast(&mut self, x: ValueId, shape: &Shape, dims: Vec<usize>) -> R {
        if self.ty(x)?.shape == *shape {
            return Ok(x);
        }
        let op = Op::BroadcastInDim {
            shape: shape.clone(),
            dims,
        };
        self.push(op, &[x])
    }

    pub fn reshape(&mut self, x: ValueId, shape: &Shape) -> R {
        if self.ty(x)?.shape == *shape {
            return Ok(x);
        }
        self.push(
            Op::Reshape {
                shape: shape.clone(),
            },
            &[x],
        )
    }

    pub fn transpose(&mut self, x: ValueId, perm: Vec<usize>) -> R {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(x);
        }
        self.push(Op::Transpose { perm }, &[x])
    }

    pub fn reduce(&mut self, op: ReduceOp, x: ValueId, axes: Vec<usize>) -> R {
        if axes.is_empty() {
            return Ok(x);
        }
        self.push(Op::Reduce { op, axes }, &[x])
    }

    /// Sums `x` (of a broadcast shape) down to `shape`: the transpose of implicit
    /// scalar-to-shape broadcasting used by `select` and `clamp` operands.
    pub fn sum_to(&mut self, x: ValueId, shape: &Shape) -> R {
        let ty = self.ty(x)?;
        if ty.shape == *shape {
            return Ok(x);
        }
        let all: Vec<usize> = (0..ty.rank()).collect();
        let total = self.reduce(ReduceOp::Sum, x, all)?;
        self.reshape(total, shape)
    }

    /// `1.0` where `p` holds, `0.0` elsewhere, in `dtype`.
    pub fn mask(&mut self, p: ValueId, dtype: DType) -> R {
        self.convert(p, dtype)
    }
}
