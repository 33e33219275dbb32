//! What `jax.numpy` builds from the primitives and training code reaches for often: stacking,
//! variance and standard deviation, `any`/`all`, triangles, diagonals and the identity,
//! repeating and tiling, rolling, `linspace` and `logaddexp`. Each is spelled in existing ops,
//! so backends, autodiff and `vmap` need nothing new.

use crate::tensor::Tensor;
use ferrax_ir::DType;
use std::borrow::Borrow;

impl Tensor {
    /// `tensors`, all of one shape, stacked along a new axis `axis` (`jnp.stack`; negative
    /// counts from the end of the result's axes).
    #[track_caller]
    pub fn stack(tensors: &[impl Borrow<Tensor>], axis: i64) -> Tensor {
        let expanded: Vec<Tensor> = tensors
            .iter()
            .map(|t| t.borrow().expand_dims(axis))
            .collect();
        Tensor::concatenate(&expanded, axis)
    }

    /// The variance over `axes` (`jnp.var`, `ddof = 0`): the mean of squared deviations from
    /// the mean; `|x − mean|²` for complex numbers, of the real type.
    #[track_caller]
    pub fn var(&self, axes: impl Into<crate::Axes>) -> Tensor {
        let axes = axes.into();
        let centered = self - self.mean_keepdims(axes.clone());
        let squared = match self.dtype().is_complex() {
            true => (&centered * &centered.conj()).real(),
            false => centered.square(),
        };
        squared.mean(axes)
    }

    /// The standard deviation over `axes` (`jnp.std`, `ddof = 0`).
    #[track_caller]
    pub fn std(&self, axes: impl Into<crate::Axes>) -> Tensor {
        self.var(axes).sqrt()
    }

    /// Whether any element over `axes` is nonzero (`jnp.any`); a bool result.
    #[track_caller]
    pub fn any(&self, axes: impl Into<crate::Axes>) -> Tensor {
        self.truth().max(axes)
    }

    /// Whether every element over `axes` is nonzero (`jnp.all`); a bool result.
    #[track_caller]
    pub fn all(&self, axes: impl Into<crate::Axes>) -> Tensor {
        self.truth().min(axes)
    }

    /// `self != 0` (booleans as they are).
    #[track_caller]
    fn truth(&self) -> Tensor {
        match self.dtype() {
            DType::Bool => self.clone(),
            _ => self.not_equal(0.0),
        }
    }

    /// Where the position (`row`, `col`) of the last two dimensions has `col − row` `relation`
    /// `k`: `[.., m, n]` booleans.
    #[track_caller]
    fn diagonal_band(&self, k: i64, above: bool) -> Tensor {
        let rank = self.ndim();
        let shape = self.shape().to_vec();
        if rank < 2 {
            return self.fail(format!(
                "tril/triu: a matrix or a batch of them is needed, not {}",
                self.ty()
            ));
        }
        let rows = Tensor::iota(DType::I64, shape.clone(), rank - 2);
        let cols = Tensor::iota(DType::I64, shape, rank - 1);
        let offset = cols - rows;
        match above {
            true => offset.greater_equal(k as f64),
            false => offset.less_equal(k as f64),
        }
    }

    /// The lower triangle of the last two dimensions, on and below diagonal `k` (`jnp.tril`;
    /// `k > 0` above the main one), zeros elsewhere.
    #[track_caller]
    pub fn tril(&self, k: i64) -> Tensor {
        self.diagonal_band(k, false).select(self, 0.0)
    }

    /// The upper triangle of the last two dimensions, on and above diagonal `k` (`jnp.triu`),
    /// zeros elsewhere.
    #[track_caller]
    pub fn triu(&self, k: i64) -> Tensor {
        self.diagonal_band(k, true).select(self, 0.0)
    }

    /// The `n × n` identity of `dtype` (`jnp.eye`).
    #[track_caller]
    pub fn eye(dtype: DType, n: usize) -> Tensor {
        let rows = Tensor::iota(DType::I64, [n, n], 0);
        let cols = Tensor::iota(DType::I64, [n, n], 1);
        rows.equal(&cols).astype(dtype)
    }

    /// The main diagonal of the last two dimensions, `[.., min(m, n)]` (`jnp.diagonal` of
    /// the last two axes).
    #[track_caller]
    pub fn diagonal(&self) -> Tensor {
        let rank = self.ndim();
        if rank < 2 {
            return self.fail(format!(
                "diagonal: a matrix or a batch of them is needed, not {}",
                self.ty()
            ));
        }
        let (m, n) = (self.shape()[rank - 2], self.shape()[rank - 1]);
        let k = m.min(n);
        let mut limit = self.shape().to_vec();
        limit[rank - 2] = k;
        limit[rank - 1] = k;
        let square = self.slice(&vec![0; rank], &limit);
        let on = Tensor::eye(DType::Bool, k);
        on.select(&square, 0.0).sum(-1)
    }

    /// Each element repeated `repeats` times along `axis`, next to itself (`jnp.repeat` with a
    /// scalar count).
    #[track_caller]
    pub fn repeat(&self, repeats: usize, axis: i64) -> Tensor {
        let Some(axis) = super::axis_index(axis, self.ndim()) else {
            return self.fail(format!("repeat: axis {axis} of {}", self.ty()));
        };
        let mut inner = self.shape().to_vec();
        inner.insert(axis + 1, repeats);
        let mut out = self.shape().to_vec();
        out[axis] = out[axis].saturating_mul(repeats);
        self.expand_dims(axis as i64 + 1)
            .broadcast_to(inner)
            .reshape(out)
    }

    /// The whole array repeated `reps[i]` times along axis `i` (`jnp.tile`; fewer
    /// repetitions than axes repeat the trailing ones, more add leading axes).
    #[track_caller]
    pub fn tile(&self, reps: &[usize]) -> Tensor {
        let rank = self.ndim().max(reps.len());
        let mut dims = vec![1; rank - self.ndim()];
        dims.extend(self.shape());
        let mut counts = vec![1; rank - reps.len()];
        counts.extend(reps);
        // [1, d0, 1, d1, ...] broadcast to [c0, d0, c1, d1, ...], then merged pairwise.
        let mut ones = Vec::with_capacity(2 * rank);
        let mut spread = Vec::with_capacity(2 * rank);
        for (&c, &d) in counts.iter().zip(&dims) {
            ones.extend([1, d]);
            spread.extend([c, d]);
        }
        let merged: Vec<usize> = counts
            .iter()
            .zip(&dims)
            .map(|(&c, &d)| c.saturating_mul(d))
            .collect();
        self.reshape(ones).broadcast_to(spread).reshape(merged)
    }

    /// The elements shifted by `shift` places along `axis`, those pushed past the end coming
    /// back at the start (`jnp.roll` with a static shift; negative shifts go the other way).
    #[track_caller]
    pub fn roll(&self, shift: i64, axis: i64) -> Tensor {
        let Some(axis) = super::axis_index(axis, self.ndim()) else {
            return self.fail(format!("roll: axis {axis} of {}", self.ty()));
        };
        let n = self.shape()[axis];
        if n == 0 {
            return self.clone();
        }
        let k = shift.rem_euclid(n as i64) as usize;
        let cut = |from: usize, to: usize| {
            let mut start = vec![0; self.ndim()];
            let mut limit = self.shape().to_vec();
            start[axis] = from;
            limit[axis] = to;
            self.slice(&start, &limit)
        };
        Tensor::concatenate(&[cut(n - k, n), cut(0, n - k)], axis as i64)
    }

    /// `num` values of `dtype` evenly spaced from `start` to `stop`, both included
    /// (`jnp.linspace`, `endpoint=True`).
    #[track_caller]
    pub fn linspace(dtype: DType, start: f64, stop: f64, num: usize) -> Tensor {
        let step = match num {
            0 | 1 => 0.0,
            _ => (stop - start) / (num - 1) as f64,
        };
        let values = Tensor::arange(DType::F64, num) * step + start;
        // The last value exactly `stop`, as NumPy's.
        let last = Tensor::iota(DType::I64, [num], 0).equal(num.saturating_sub(1) as f64);
        let values = match num {
            0 | 1 => values,
            _ => last.select(stop, &values),
        };
        values.astype(dtype)
    }

    /// `log(exp(self) + exp(other))` without overflow (`jnp.logaddexp`): the larger plus
    /// `log1p(exp(−|difference|))`; equal infinities give themselves.
    #[track_caller]
    pub fn logaddexp(&self, other: &Tensor) -> Tensor {
        let larger = self.maximum(other);
        let difference = self - other;
        let tail = (-difference.abs()).exp().log1p();
        // `inf − inf` is NaN: both infinite of one sign give that infinity.
        difference.is_nan().select(self + other, larger + tail)
    }
}
