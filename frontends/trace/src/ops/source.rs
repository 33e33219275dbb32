//! Ops without operands: `constant` (`Tensor::full`, `zeros`, `ones`, and the Rust numbers
//! methods take, [`number_like`]) and `iota` (`Tensor::iota`, `arange`). Inside a trace they
//! are recorded in the innermost running trace rather than evaluated.

use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{DType, Literal, Op, Scalar, Shape};
use ferrax_runtime::Array;
use std::panic::Location;

impl Tensor {
    /// `value` everywhere. Inside a trace this records a splat constant rather than data.
    #[track_caller]
    pub fn full(dtype: DType, shape: impl Into<Shape>, value: f64) -> Tensor {
        let lit = Literal::splat(Scalar::from_f64(dtype, value), shape);
        apply(Op::Constant(lit), &[])
    }

    #[track_caller]
    pub fn zeros(dtype: DType, shape: impl Into<Shape>) -> Tensor {
        Tensor::full(dtype, shape, 0.0)
    }

    #[track_caller]
    pub fn ones(dtype: DType, shape: impl Into<Shape>) -> Tensor {
        Tensor::full(dtype, shape, 1.0)
    }

    /// The indices along `axis` of a tensor of `shape` (`lax.broadcasted_iota`).
    #[track_caller]
    pub fn iota(dtype: DType, shape: impl Into<Shape>, axis: usize) -> Tensor {
        let op = Op::Iota {
            dtype,
            shape: shape.into(),
            dim: axis,
        };
        apply(op, &[])
    }

    /// `0, 1, ..., n-1` (`jnp.arange(n)`).
    #[track_caller]
    pub fn arange(dtype: DType, n: usize) -> Tensor {
        Tensor::iota(dtype, [n], 0)
    }
}

/// The Rust number `x` as a scalar of `like`'s dtype, or a failed tensor if that dtype cannot
/// hold it exactly.
#[track_caller]
pub(super) fn number_like(x: f64, like: &Tensor) -> Tensor {
    let dtype = like.dtype();
    let representable = dtype.is_float()
        || dtype.is_complex()
        || (dtype.is_bool() && (x == 0.0 || x == 1.0))
        || (dtype.is_int() && x.fract() == 0.0 && Scalar::from_f64(dtype, x).to_f64() == x);
    if representable {
        Tensor::new(Array::full(Shape::scalar(), Scalar::from_f64(dtype, x)))
    } else {
        Tensor::failed(
            Location::caller(),
            format!("the number {x} cannot be combined with {} without changing its value; convert with astype first", like.ty()),
            like.ty().clone(),
        )
    }
}
