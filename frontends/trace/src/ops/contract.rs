//! Contraction: `dot_general` as the IR has it, and `matmul` with `jnp.matmul`'s rules
//! (vector operands, broadcast batch dimensions) built on it. Mixed precision (JAX's
//! `preferred_element_type`) is a [`DotPrecision`]: the operands are rounded to its compute
//! dtype and the product is summed and returned in its result dtype. Where the result dtype is
//! wider, the product is traced as an f32 (or wider) product of the rounded operands widened
//! back: exact, since a product of two halves fits f32's significand, so autodiff needs no
//! rule of its own (a convert's cotangent is converted back, as in JAX).

use super::broadcast_shapes;
use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{DType, DotDims, Op};
use std::panic::Location;

/// How a matrix product computes: operands rounded to `compute`, products summed and
/// returned in `result`. `{compute: BF16, result: F32}` is `jnp.matmul(a.astype(bfloat16),
/// b.astype(bfloat16), preferred_element_type=float32)`; `{BF16, BF16}` is JAX's default bf16
/// product (on the CPU summed in f32 and rounded once to bf16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DotPrecision {
    pub compute: DType,
    pub result: DType,
}

impl DotPrecision {
    /// Operands rounded to `compute`, the product in `result`, which must be `compute` or a
    /// type holding every product of two `compute` values exactly (see [`Tensor::dot_general_with`]).
    pub const fn new(compute: DType, result: DType) -> DotPrecision {
        DotPrecision { compute, result }
    }

    /// bf16 operands, f32 accumulation and result: the usual mixed-precision policy.
    pub const BF16_F32: DotPrecision = DotPrecision::new(DType::BF16, DType::F32);
    /// f16 operands, f32 accumulation and result.
    pub const F16_F32: DotPrecision = DotPrecision::new(DType::F16, DType::F32);
}

/// Whether every product of two `from` values is exact in `to`, so that widening the operands
/// first equals summing the exact products in `to` (`preferred_element_type`).
fn widens_products(from: DType, to: DType) -> bool {
    match from {
        // 11 and 8 significand bits: products have at most 22, f32 holds 24.
        DType::F16 | DType::BF16 => matches!(to, DType::F32 | DType::F64),
        DType::F32 => to == DType::F64,
        DType::U8 => matches!(
            to,
            DType::I16 | DType::U16 | DType::I32 | DType::I64 | DType::U32 | DType::U64
        ),
        // |i8 · i8| ≤ 2^14.
        DType::I8 => matches!(to, DType::I16 | DType::I32 | DType::I64),
        DType::I16 => matches!(to, DType::I32 | DType::I64),
        DType::U16 => matches!(to, DType::I32 | DType::I64 | DType::U32 | DType::U64),
        DType::U32 => matches!(to, DType::I64 | DType::U64),
        DType::I32 => to == DType::I64,
        // A complex product's parts are sums of products of the parts.
        DType::C64 => to == DType::C128,
        DType::F64 | DType::I64 | DType::U64 | DType::Bool | DType::C128 => false,
    }
}

impl Tensor {
    /// A general contraction (`lax.dot_general`).
    #[track_caller]
    pub fn dot_general(&self, other: &Tensor, dims: DotDims) -> Tensor {
        apply(Op::DotGeneral(dims), &[self, other])
    }

    /// A general contraction at `precision` (`lax.dot_general` of the operands cast to
    /// `precision.compute`, with `preferred_element_type=precision.result`). A result type
    /// that cannot hold the products exactly (narrower, or an integer for floats) is an error
    /// naming both types.
    #[track_caller]
    pub fn dot_general_with(
        &self,
        other: &Tensor,
        dims: DotDims,
        precision: DotPrecision,
    ) -> Tensor {
        let DotPrecision { compute, result } = precision;
        let (a, b) = (self.astype(compute), other.astype(compute));
        if result == compute {
            return a.dot_general(&b, dims);
        }
        if !widens_products(compute, result) {
            let location = Location::caller();
            let message = format!(
                "dot_general_with: a product of {} operands cannot be summed in {}",
                compute.name(),
                result.name()
            );
            // The shape is the product's, so that the error flows on with a sensible type.
            let ty = a.dot_general(&b, dims).ty().with_dtype(result);
            return Tensor::failed(location, message, ty);
        }
        a.astype(result).dot_general(&b.astype(result), dims)
    }

    /// Matrix product with `jnp.matmul` semantics: 1-D operands are vectors, leading
    /// dimensions are batch dimensions and broadcast.
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        self.matmul_at(other, None)
    }

    /// [`matmul`](Tensor::matmul) at `precision` (see [`Tensor::dot_general_with`]).
    #[track_caller]
    pub fn matmul_with(&self, other: &Tensor, precision: DotPrecision) -> Tensor {
        self.matmul_at(other, Some(precision))
    }

    /// [`matmul`](Tensor::matmul) with the operands rounded to `compute` and the products
    /// summed and returned in `self`'s dtype: `matmul_in(&w, DType::BF16)` on f32 master
    /// weights is a bf16 product accumulated in f32, with an f32 result.
    #[track_caller]
    pub fn matmul_in(&self, other: &Tensor, compute: DType) -> Tensor {
        self.matmul_at(other, Some(DotPrecision::new(compute, self.dtype())))
    }

    #[track_caller]
    fn dot_at(&self, other: &Tensor, dims: DotDims, precision: Option<DotPrecision>) -> Tensor {
        match precision {
            Some(p) => self.dot_general_with(other, dims, p),
            None => self.dot_general(other, dims),
        }
    }

    #[track_caller]
    fn matmul_at(&self, other: &Tensor, precision: Option<DotPrecision>) -> Tensor {
        let (ra, rb) = (self.ndim(), other.ndim());
        let location = Location::caller();
        let mismatch = || {
            self.fail_at(
                location,
                format!("matmul: cannot multiply {} by {}", self.ty(), other.ty()),
            )
        };
        if ra == 0 || rb == 0 {
            return mismatch();
        }
        let k_a = self.shape()[ra - 1];
        let k_b = if rb == 1 {
            other.shape()[0]
        } else {
            other.shape()[rb - 2]
        };
        if k_a != k_b {
            return mismatch();
        }
        if rb <= 2 {
            // A plain contraction already yields (lhs leading dims, rhs columns).
            let dims = DotDims {
                lhs_contract: vec![ra - 1],
                rhs_contract: vec![0],
                ..DotDims::default()
            };
            return self.dot_at(other, dims, precision);
        }
        let (a, b) = (
            if ra == 1 {
                self.expand_dims(0)
            } else {
                self.clone()
            },
            if rb == 1 {
                other.expand_dims(-1)
            } else {
                other.clone()
            },
        );
        let (ba, bb) = (&a.shape()[..a.ndim() - 2], &b.shape()[..b.ndim() - 2]);
        let Some(batch) = broadcast_shapes(ba, bb) else {
            return mismatch();
        };
        let target = |t: &Tensor| {
            let mut s = batch.clone();
            s.extend_from_slice(&t.shape()[t.ndim() - 2..]);
            s
        };
        let (a, b) = (a.broadcast_to(target(&a)), b.broadcast_to(target(&b)));
        let nb = batch.len();
        let dims = DotDims {
            lhs_batch: (0..nb).collect(),
            rhs_batch: (0..nb).collect(),
            lhs_contract: vec![nb + 1],
            rhs_contract: vec![nb],
        };
        let out = a.dot_at(&b, dims, precision);
        match (ra, rb) {
            (1, _) => out.squeeze([-2]),
            (_, 1) => out.squeeze([-1]),
            _ => out,
        }
    }
}

impl Tensor {
    /// The sum of products over `self`'s axes `axes.0` and `other`'s `axes.1`, paired in
    /// order (`jnp.tensordot(a, b, axes=(..., ...))`): the result has `self`'s other axes,
    /// then `other`'s.
    #[track_caller]
    pub fn tensordot(&self, other: &Tensor, axes: (&[i64], &[i64])) -> Tensor {
        let resolve = |t: &Tensor, list: &[i64]| -> Option<Vec<usize>> {
            list.iter()
                .map(|&a| super::axis_index(a, t.ndim()))
                .collect()
        };
        match (resolve(self, axes.0), resolve(other, axes.1)) {
            (Some(lhs), Some(rhs)) if lhs.len() == rhs.len() => self.dot_general(
                other,
                DotDims {
                    lhs_batch: vec![],
                    rhs_batch: vec![],
                    lhs_contract: lhs,
                    rhs_contract: rhs,
                },
            ),
            _ => self.fail(format!(
                "tensordot: axes {:?} of {} and {:?} of {} (as many of each, in range)",
                axes.0,
                self.ty(),
                axes.1,
                other.ty()
            )),
        }
    }

    /// [`Tensor::tensordot`] over `self`'s last `n` axes and `other`'s first `n`
    /// (`jnp.tensordot(a, b, axes=n)`).
    #[track_caller]
    pub fn tensordot_n(&self, other: &Tensor, n: usize) -> Tensor {
        if n > self.ndim() || n > other.ndim() {
            return self.fail(format!(
                "tensordot: {n} axes of {} and {}",
                self.ty(),
                other.ty()
            ));
        }
        let rank = self.ndim() as i64;
        let lhs: Vec<i64> = (rank - n as i64..rank).collect();
        let rhs: Vec<i64> = (0..n as i64).collect();
        self.tensordot(other, (&lhs, &rhs))
    }

    /// The sum of products over the last axes of both (`jnp.inner`).
    #[track_caller]
    pub fn inner(&self, other: &Tensor) -> Tensor {
        match (self.ndim(), other.ndim()) {
            (0, _) | (_, 0) => self * other,
            _ => self.tensordot(other, (&[-1], &[-1])),
        }
    }

    /// The dot product of the flattened operands, `self` conjugated (`jnp.vdot`).
    #[track_caller]
    pub fn vdot(&self, other: &Tensor) -> Tensor {
        let a = self.conj().reshape([self.numel()]);
        a.tensordot(&other.reshape([other.numel()]), (&[0], &[0]))
    }

    /// The product of a chain of matrices, the first and last possibly vectors
    /// (`jnp.linalg.multi_dot`), multiplied left to right.
    #[track_caller]
    pub fn multi_dot(matrices: &[&Tensor]) -> Tensor {
        match matrices.split_first() {
            None => Tensor::failed(
                Location::caller(),
                "multi_dot: needs at least one matrix".into(),
                ferrax_ir::TensorType::scalar(DType::F32),
            ),
            Some((first, rest)) => rest.iter().fold((*first).clone(), |acc, m| acc.matmul(m)),
        }
    }
}
