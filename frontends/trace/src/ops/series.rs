//! `jax.numpy`'s operations on sequences along an axis: differences (`diff`), 1-D
//! convolution and correlation (`convolve`, `correlate`, as one `lax.conv_general_dilated`
//! with NumPy's modes), polynomial evaluation (`polyval`, Horner's rule), the trapezoidal
//! rule (`trapezoid`) and the cross product of 3-vectors (`cross`).

use crate::Tensor;
use ferrax_ir::{ConvPadding, DType};
use std::panic::Location;

/// The output length of [`Tensor::convolve`] and [`Tensor::correlate`] (NumPy's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConvolveMode {
    /// Every overlap: `n + m - 1`.
    #[default]
    Full,
    /// The longer input's length, centred.
    Same,
    /// Only full overlaps: `max(n, m) - min(n, m) + 1`.
    Valid,
}

impl Tensor {
    /// The `n`-th differences along `axis` (`jnp.diff`): `x[1:] - x[:-1]`, `n` times.
    #[track_caller]
    pub fn diff(&self, n: usize, axis: i64) -> Tensor {
        let Some(axis) = super::axis_index(axis, self.ndim()) else {
            return self.fail(format!("diff: axis {axis} of {}", self.ty()));
        };
        let mut x = self.clone();
        // Each difference shortens the axis by one, so at most its length of them do anything
        // (none on a failed tensor, whose length is a guess).
        let steps = match self.error() {
            Some(_) => 0,
            None => n.min(self.shape()[axis]),
        };
        for _ in 0..steps {
            let size = x.shape()[axis];
            if size == 0 {
                break;
            }
            let cut = |from: usize, to: usize| {
                let mut start = vec![0; x.ndim()];
                let mut limit = x.shape().to_vec();
                start[axis] = from;
                limit[axis] = to;
                x.slice(&start, &limit)
            };
            x = match x.dtype() {
                DType::Bool => cut(1, size).not_equal(cut(0, size - 1)),
                _ => cut(1, size) - cut(0, size - 1),
            };
        }
        x
    }

    /// The discrete linear convolution of two vectors (`jnp.convolve(a, v, mode)`).
    #[track_caller]
    pub fn convolve(&self, v: &Tensor, mode: ConvolveMode) -> Tensor {
        one_dimensional(self, v, mode, false, Location::caller())
    }

    /// The cross-correlation of two vectors (`jnp.correlate(a, v, mode)`; `v` conjugated).
    #[track_caller]
    pub fn correlate(&self, v: &Tensor, mode: ConvolveMode) -> Tensor {
        one_dimensional(self, v, mode, true, Location::caller())
    }

    /// The polynomial with coefficients `self` (highest power first, along the leading axis)
    /// at `x` (`jnp.polyval`), by Horner's rule.
    #[track_caller]
    pub fn polyval(&self, x: &Tensor) -> Tensor {
        if self.ndim() == 0 {
            return self.fail(format!("polyval: coefficients {} need an axis", self.ty()));
        }
        // One step per coefficient: a failed tensor's (guessed) length need not be walked.
        if self.error().is_some() || x.error().is_some() {
            return self * x;
        }
        let n = self.shape()[0];
        let coefficient = |i: usize| {
            let mut start = vec![0; self.ndim()];
            let mut limit = self.shape().to_vec();
            start[0] = i;
            limit[0] = i + 1;
            self.slice(&start, &limit).squeeze(0)
        };
        let zero = (x * 0.0) + coefficient(0) * 0.0;
        (0..n).fold(zero, |y, i| y * x + coefficient(i))
    }

    /// The integral along `axis` by the trapezoidal rule (`jnp.trapezoid`): over sample
    /// points `x` (a vector of the axis' length, or of `self`'s shape) or spacing `dx`.
    #[track_caller]
    pub fn trapezoid(&self, x: Option<&Tensor>, dx: f64, axis: i64) -> Tensor {
        let Some(a) = super::axis_index(axis, self.ndim()) else {
            return self.fail(format!("trapezoid: axis {axis} of {}", self.ty()));
        };
        let y = self.clone();
        let n = y.shape()[a];
        if n == 0 {
            return y.sum(a) * 0.0;
        }
        let cut = |t: &Tensor, from: usize, to: usize| {
            let mut start = vec![0; t.ndim()];
            let mut limit = t.shape().to_vec();
            start[a] = from;
            limit[a] = to;
            t.slice(&start, &limit)
        };
        let pairs = (cut(&y, 1, n) + cut(&y, 0, n - 1)) * 0.5;
        match x {
            None => (pairs * dx).sum(a),
            Some(x) if x.ndim() == 1 && x.shape()[0] == n => {
                let mut shape = vec![1; y.ndim()];
                shape[a] = n;
                let steps = x.reshape(shape).diff(1, a as i64);
                (pairs * steps).sum(a)
            }
            Some(x) if x.shape() == y.shape() => (pairs * x.diff(1, a as i64)).sum(a),
            Some(x) => self.fail(format!(
                "trapezoid: sample points {} for values {} along axis {a}",
                x.ty(),
                y.ty()
            )),
        }
    }

    /// The cross product of 3-vectors along the last axis (`jnp.cross`), broadcast.
    #[track_caller]
    pub fn cross(&self, other: &Tensor) -> Tensor {
        if self.shape().last() != Some(&3) || other.shape().last() != Some(&3) {
            return self.fail(format!(
                "cross: 3-vectors along the last axis are needed, not {} and {}",
                self.ty(),
                other.ty()
            ));
        }
        let part = |t: &Tensor, i: usize| {
            let mut start = vec![0; t.ndim()];
            let mut limit = t.shape().to_vec();
            start[t.ndim() - 1] = i;
            limit[t.ndim() - 1] = i + 1;
            t.slice(&start, &limit)
        };
        let (a0, a1, a2) = (part(self, 0), part(self, 1), part(self, 2));
        let (b0, b1, b2) = (part(other, 0), part(other, 1), part(other, 2));
        let c = [
            &a1 * &b2 - &a2 * &b1,
            &a2 * &b0 - &a0 * &b2,
            &a0 * &b1 - &a1 * &b0,
        ];
        Tensor::concatenate(&c, -1)
    }
}

fn one_dimensional(
    a: &Tensor,
    v: &Tensor,
    mode: ConvolveMode,
    correlate: bool,
    location: &'static Location<'static>,
) -> Tensor {
    let op = if correlate { "correlate" } else { "convolve" };
    if a.ndim() != 1 || v.ndim() != 1 || a.numel() == 0 || v.numel() == 0 {
        return Tensor::failed(
            location,
            format!(
                "{op}: two non-empty vectors are needed, not {} and {}",
                a.ty(),
                v.ty()
            ),
            a.ty().clone(),
        );
    }
    let dtype = match (a.dtype(), v.dtype()) {
        (DType::C128, _) | (_, DType::C128) => DType::C128,
        (DType::C64, _) | (_, DType::C64) => DType::C64,
        (DType::F64, _) | (_, DType::F64) => DType::F64,
        _ => DType::F32,
    };
    let (mut x, mut y) = (a.astype(dtype), v.astype(dtype));
    let mut reversed = false;
    if correlate {
        y = y.conj();
    }
    if x.numel() < y.numel() {
        std::mem::swap(&mut x, &mut y);
        reversed = correlate;
    }
    if !correlate {
        y = y.flip([0usize]);
    }
    let m = y.numel() as i64;
    let padding = match mode {
        ConvolveMode::Valid => (0, 0),
        ConvolveMode::Same => (m / 2, m - m / 2 - 1),
        ConvolveMode::Full => (m - 1, m - 1),
    };
    let n = x.numel();
    let out = x.reshape([1, 1, n]).conv(
        &y.reshape([1, 1, m as usize]),
        &[1],
        ConvPadding::Explicit(vec![padding]),
    );
    let len = out.numel();
    let out = out.reshape([len]);
    match reversed {
        true => out.flip([0usize]),
        false => out,
    }
}
