//! `Tensor` methods, named after `jax.numpy`. Each lowers to primitive IR ops through
//! `apply`, adding NumPy broadcasting, negative axes and Rust scalars on top of the IR's
//! strict rules. Every method is `#[track_caller]` so errors point at the user's call.
//!
//! The files mirror `ir/src/ops/` (the shape rules) and `ferrax_runtime`'s `interp/` (the
//! reference interpreter), so an op's rule, its tracer method and its evaluation are found in
//! files of the same name. This module holds what the families share: the argument types
//! users pass ([`Operand`], [`Axes`], [`ShapeArg`]) and the failure and axis helpers.

mod call;
mod contract;
mod conv;
mod counting;
mod einsum;
mod elementwise;
mod fft;
mod indexing;
mod linalg;
mod matrix_functions;
mod movement;
mod numpy;
mod pad_modes;
mod reduce;
mod series;
pub(crate) mod sort;
mod source;
mod statistics;
mod window;

pub use call::{custom_jvp, custom_jvp_named, custom_vjp, custom_vjp_named};
pub use contract::DotPrecision;
pub use indexing::{At, IndexMode};
pub use matrix_functions::MatrixNorm;
pub use pad_modes::PadMode;
pub use series::ConvolveMode;
pub use statistics::QuantileMethod;
pub use window::{Padding, Window};

use crate::Tensor;
use std::ops::RangeFull;
use std::panic::Location;

/// The other operand of a binary method: a tensor or a Rust number. Numbers take the
/// tensor's dtype, like Python scalars in JAX.
pub enum Operand<'a> {
    Borrowed(&'a Tensor),
    Owned(Tensor),
    Number(f64),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Borrowed(t)
    }
}

impl From<Tensor> for Operand<'_> {
    fn from(t: Tensor) -> Self {
        Operand::Owned(t)
    }
}

macro_rules! operand_from_number {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(x: $t) -> Self {
                Operand::Number(x as f64)
            }
        }
    )*};
}
operand_from_number!(f64, i32, u32);

impl Operand<'_> {
    /// The operand as a tensor; a number becomes a scalar of `like`'s dtype.
    #[track_caller]
    pub(crate) fn resolve(self, like: &Tensor) -> Tensor {
        match self {
            Operand::Borrowed(t) => t.clone(),
            Operand::Owned(t) => t,
            Operand::Number(x) => source::number_like(x, like),
        }
    }
}

/// Axes to reduce over: one axis, a list (negative counts from the end), or `..` for all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Axes {
    All,
    List(Vec<i64>),
}

impl From<RangeFull> for Axes {
    fn from(_: RangeFull) -> Axes {
        Axes::All
    }
}

impl From<i32> for Axes {
    fn from(a: i32) -> Axes {
        Axes::List(vec![a as i64])
    }
}

impl From<usize> for Axes {
    fn from(a: usize) -> Axes {
        Axes::List(vec![saturated(a)])
    }
}

impl<const N: usize> From<[i32; N]> for Axes {
    fn from(a: [i32; N]) -> Axes {
        Axes::List(a.iter().map(|&x| x as i64).collect())
    }
}

impl From<&[i32]> for Axes {
    fn from(a: &[i32]) -> Axes {
        Axes::List(a.iter().map(|&x| x as i64).collect())
    }
}

impl From<Vec<usize>> for Axes {
    fn from(a: Vec<usize>) -> Axes {
        Axes::List(a.iter().map(|&x| saturated(x)).collect())
    }
}

/// `x` as an `i64`, sizes past `i64::MAX` as `i64::MAX` (too large for any type, so still
/// refused as too large rather than wrapping to a negative size or axis).
fn saturated(x: usize) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// A shape argument: sizes, where one entry of `reshape`'s may be `-1` (inferred).
pub trait ShapeArg {
    fn to_sizes(&self) -> Vec<i64>;
}

impl<const N: usize> ShapeArg for [i32; N] {
    fn to_sizes(&self) -> Vec<i64> {
        self.iter().map(|&x| x as i64).collect()
    }
}

impl ShapeArg for &[i32] {
    fn to_sizes(&self) -> Vec<i64> {
        self.iter().map(|&x| x as i64).collect()
    }
}

impl<const N: usize> ShapeArg for [usize; N] {
    fn to_sizes(&self) -> Vec<i64> {
        self.iter().map(|&x| saturated(x)).collect()
    }
}

impl ShapeArg for &[usize] {
    fn to_sizes(&self) -> Vec<i64> {
        self.iter().map(|&x| saturated(x)).collect()
    }
}

impl ShapeArg for Vec<usize> {
    fn to_sizes(&self) -> Vec<i64> {
        self.iter().map(|&x| saturated(x)).collect()
    }
}

/// The NumPy broadcast of two shapes.
fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|i| {
            let da = if i + a.len() >= rank {
                a[i + a.len() - rank]
            } else {
                1
            };
            let db = if i + b.len() >= rank {
                b[i + b.len() - rank]
            } else {
                1
            };
            match (da, db) {
                _ if da == db => Some(da),
                (1, _) => Some(db),
                (_, 1) => Some(da),
                _ => None,
            }
        })
        .collect()
}

/// Normalizes a possibly negative axis.
fn axis_index(axis: i64, rank: usize) -> Option<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    (0..rank as i64).contains(&a).then_some(a as usize)
}

impl Tensor {
    #[track_caller]
    fn fail(&self, message: String) -> Tensor {
        self.fail_at(Location::caller(), message)
    }

    /// For use inside closures, which do not pass on `#[track_caller]` locations.
    fn fail_at(&self, location: &'static Location<'static>, message: String) -> Tensor {
        Tensor::failed(location, message, self.ty().clone())
    }

    /// `axes` as sorted, distinct dimension indices, or a failed tensor saying why not.
    #[track_caller]
    fn axes(&self, op: &str, axes: Axes) -> Result<Vec<usize>, Tensor> {
        let list = match axes {
            Axes::All => return Ok((0..self.ndim()).collect()),
            Axes::List(l) => l,
        };
        let mut out = Vec::with_capacity(list.len());
        for a in list {
            let Some(i) = axis_index(a, self.ndim()) else {
                return Err(self.fail(format!("{op}: axis {a} is out of range for {}", self.ty())));
            };
            if out.contains(&i) {
                return Err(self.fail(format!("{op}: axis {a} is given twice")));
            }
            out.push(i);
        }
        out.sort_unstable();
        Ok(out)
    }
}
