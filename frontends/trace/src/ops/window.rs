//! Window reductions (`lax.reduce_window`, which pooling is made of) and cumulative
//! reductions (`jnp.cumsum`, `cumprod`, and `lax.cummax`, `cummin`), spelled in the IR's own
//! ops, so that every backend computes them and autodiff differentiates them:
//!
//! - a window reduction pads the operand with the reduction's identity (base dilations as
//!   interior padding) and combines one strided slice per window position, in the window's
//!   row-major order after the identity, as XLA's evaluator does ([`WindowGeometry`]);
//! - a cumulative reduction is a log-step (Hillis–Steele) scan: the running values combined
//!   with themselves shifted by 1, 2, 4, ... positions, so an axis of `n` takes `log2 n` steps
//!   of one pad, one slice and one elementwise op.

use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{same_padding, Op, ReduceOp, Scalar, Shape, WindowGeometry};
use ferrax_runtime::Array;

/// How windows are padded (`lax.reduce_window`'s `padding`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Padding {
    /// None: only windows that fit inside the operand.
    Valid,
    /// Enough for `ceil(n / stride)` windows per dimension, split evenly, the odd one after
    /// (`lax.padtype_to_pads`, from the operand's shape and the dilated window).
    Same,
    /// `(low, high)` per dimension; negative amounts crop.
    Explicit(Vec<(i64, i64)>),
}

/// A window's placement: its sizes, strides, padding and dilations, as `lax.reduce_window`
/// takes them. Strides and dilations default to 1, padding to [`Padding::Valid`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub dims: Vec<usize>,
    pub strides: Option<Vec<usize>>,
    pub padding: Padding,
    pub base_dilation: Option<Vec<usize>>,
    pub window_dilation: Option<Vec<usize>>,
}

impl Window {
    /// A window of `dims` with unit strides and dilations and no padding.
    pub fn new(dims: impl Into<Vec<usize>>) -> Window {
        Window {
            dims: dims.into(),
            strides: None,
            padding: Padding::Valid,
            base_dilation: None,
            window_dilation: None,
        }
    }

    pub fn strides(mut self, strides: impl Into<Vec<usize>>) -> Window {
        self.strides = Some(strides.into());
        self
    }

    pub fn padding(mut self, padding: Padding) -> Window {
        self.padding = padding;
        self
    }

    pub fn base_dilation(mut self, dilation: impl Into<Vec<usize>>) -> Window {
        self.base_dilation = Some(dilation.into());
        self
    }

    pub fn window_dilation(mut self, dilation: impl Into<Vec<usize>>) -> Window {
        self.window_dilation = Some(dilation.into());
        self
    }
}

impl Tensor {
    /// The initial value of `op` on this tensor's dtype, as a scalar: its identity, but +0
    /// for sums, as JAX starts them (so a sum of -0s is +0, as in JAX).
    fn initial(&self, op: ReduceOp) -> Tensor {
        let value = match op {
            ReduceOp::Sum => Scalar::zero(self.dtype()),
            ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min => op.identity(self.dtype()),
        };
        Tensor::new(Array::full(Shape::scalar(), value))
    }

    /// `op` over each window (`lax.reduce_window_sum`, `_max`, `_min`, `_prod`: initial value
    /// 0, -inf, +inf, 1). Its gradient is that of the slices and elementwise ops it is made of:
    /// tied maxima split the gradient (each elementwise maximum halves it between equal
    /// operands, in window order), where JAX's gives it all to the first.
    #[track_caller]
    pub fn reduce_window(&self, op: ReduceOp, window: &Window) -> Tensor {
        let rank = self.ndim();
        let ones = vec![1; rank];
        let strides = window.strides.clone().unwrap_or_else(|| ones.clone());
        let base = window.base_dilation.clone().unwrap_or_else(|| ones.clone());
        let dilation = window.window_dilation.clone().unwrap_or(ones);
        if base.len() != rank || base.contains(&0) {
            return self.fail(format!(
                "reduce_window: base dilation {base:?} needs {rank} positive sizes for {}",
                self.ty()
            ));
        }
        let padding = match &window.padding {
            Padding::Valid => vec![(0, 0); rank],
            // As JAX computes it: from the operand's shape (not base-dilated) and the dilated
            // window.
            Padding::Same => same_padding(self.shape(), &window.dims, &strides, &dilation),
            Padding::Explicit(p) => p.clone(),
        };
        if padding.len() != rank {
            return self.fail(format!(
                "reduce_window: padding {padding:?} needs {rank} (low, high) pairs for {}",
                self.ty()
            ));
        }
        let init = self.initial(op);
        let padded = apply(
            Op::Pad {
                low: padding.iter().map(|p| p.0).collect(),
                high: padding.iter().map(|p| p.1).collect(),
                interior: base.iter().map(|b| b - 1).collect(),
            },
            &[self, &init],
        );
        if padded.error().is_some() {
            return padded;
        }
        let geometry = match WindowGeometry::new(padded.shape(), &window.dims, &strides, &dilation)
        {
            Ok(g) => g,
            Err(e) => return self.fail(format!("reduce_window: {e} (for {})", self.ty())),
        };
        let combine = op.combining_op(self.dtype());
        let mut acc = init.broadcast_to(geometry.out.clone());
        for (start, limit) in geometry.positions() {
            let part = padded.slice_strided(&start, &limit, &geometry.strides);
            acc = apply(Op::Binary(combine), &[&acc, &part]);
        }
        acc
    }

    /// `op` over each prefix along `axis`: element `i` combines elements `0..=i`, in the
    /// tensor's dtype (`lax.cumsum` and its kin; bool sums are `or`; `jnp.cumsum` would first
    /// widen bools and narrow integers).
    #[track_caller]
    fn cumulative(&self, name: &str, op: ReduceOp, axis: i64) -> Tensor {
        let Some(a) = super::axis_index(axis, self.ndim()) else {
            return self.fail(format!(
                "{name}: axis {axis} is out of range for {}",
                self.ty()
            ));
        };
        let n = self.shape()[a];
        let init = self.initial(op);
        let combine = op.combining_op(self.dtype());
        let mut running = self.clone();
        let mut shift = 1;
        while shift < n {
            let mut limit = self.shape().to_vec();
            limit[a] = n - shift;
            let mut config = vec![(0, 0, 0); self.ndim()];
            config[a] = (shift as i64, 0, 0);
            let earlier = apply(
                Op::Pad {
                    low: config.iter().map(|c| c.0).collect(),
                    high: config.iter().map(|c| c.1).collect(),
                    interior: vec![0; self.ndim()],
                },
                &[&running.slice(&vec![0; self.ndim()], &limit), &init],
            );
            running = apply(Op::Binary(combine), &[&earlier, &running]);
            shift *= 2;
        }
        if op == ReduceOp::Sum && self.dtype().is_float() {
            // The initial value once more, as JAX's sums start from it: a sum of -0s is +0
            // (every other sum is unchanged by adding +0).
            let init = init.broadcast_to(self.shape().to_vec());
            running = apply(Op::Binary(combine), &[&init, &running]);
        }
        running
    }

    /// Running sums along `axis` (`lax.cumsum`: in the tensor's dtype).
    #[track_caller]
    pub fn cumsum(&self, axis: i64) -> Tensor {
        self.cumulative("cumsum", ReduceOp::Sum, axis)
    }

    /// Running products along `axis` (`jnp.cumprod`).
    #[track_caller]
    pub fn cumprod(&self, axis: i64) -> Tensor {
        self.cumulative("cumprod", ReduceOp::Prod, axis)
    }

    /// Running maxima along `axis` (`lax.cummax`).
    #[track_caller]
    pub fn cummax(&self, axis: i64) -> Tensor {
        self.cumulative("cummax", ReduceOp::Max, axis)
    }

    /// Running minima along `axis` (`lax.cummin`).
    #[track_caller]
    pub fn cummin(&self, axis: i64) -> Tensor {
        self.cumulative("cummin", ReduceOp::Min, axis)
    }
}
