//! Reductions: `reduce` (`sum`, `prod`, `max`, `min`) over [`Axes`], and `mean` as a sum and
//! a division. The `_keepdims` variants reshape the result so it broadcasts against the input.

use super::Axes;
use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{BinaryOp, Op, ReduceOp};

impl Tensor {
    #[track_caller]
    fn reduce(&self, r: ReduceOp, axes: Axes, keepdims: bool) -> Tensor {
        let axes = match self.axes(r.name(), axes) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let reduced = apply(
            Op::Reduce {
                op: r,
                axes: axes.clone(),
            },
            &[self],
        );
        if !keepdims {
            return reduced;
        }
        let kept: Vec<usize> = (0..self.ndim())
            .map(|i| {
                if axes.contains(&i) {
                    1
                } else {
                    self.shape()[i]
                }
            })
            .collect();
        reduced.reshape(kept)
    }

    /// Sum over `axes` (`..` for all).
    #[track_caller]
    pub fn sum(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Sum, axes.into(), false)
    }

    #[track_caller]
    pub fn sum_keepdims(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Sum, axes.into(), true)
    }

    #[track_caller]
    pub fn prod(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Prod, axes.into(), false)
    }

    #[track_caller]
    pub fn max(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Max, axes.into(), false)
    }

    #[track_caller]
    pub fn max_keepdims(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Max, axes.into(), true)
    }

    #[track_caller]
    pub fn min(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Min, axes.into(), false)
    }

    #[track_caller]
    fn mean_impl(&self, axes: Axes, keepdims: bool) -> Tensor {
        let idx = match self.axes("mean", axes) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let count: usize = idx.iter().map(|&i| self.shape()[i]).product();
        let sum = self.reduce(ReduceOp::Sum, Axes::from(idx), keepdims);
        sum.binary_number(BinaryOp::Div, count as f64, false)
    }

    /// Mean over `axes` (`..` for all), in the tensor's dtype.
    #[track_caller]
    pub fn mean(&self, axes: impl Into<Axes>) -> Tensor {
        self.mean_impl(axes.into(), false)
    }

    #[track_caller]
    pub fn mean_keepdims(&self, axes: impl Into<Axes>) -> Tensor {
        self.mean_impl(axes.into(), true)
    }
}
