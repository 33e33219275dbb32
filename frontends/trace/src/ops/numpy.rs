//! What `jax.numpy` builds from the primitives and training code reaches for often: stacking
//! and splitting, variance and standard deviation, `any`/`all`, triangles, diagonals and the
//! identity, repeating and tiling, rolling, `linspace`, `logaddexp`, vector and Frobenius
//! norms, outer and Kronecker products, `meshgrid`, `nan_to_num` and `isclose`. Each is spelled in existing ops,
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

impl Tensor {
    /// `sections` equal pieces along `axis` (`jnp.split` with a count); a size `sections` does
    /// not divide gives one failed piece saying so.
    #[track_caller]
    pub fn split(&self, sections: usize, axis: i64) -> Vec<Tensor> {
        let Some(a) = super::axis_index(axis, self.ndim()) else {
            return vec![self.fail(format!("split: axis {axis} of {}", self.ty()))];
        };
        let n = self.shape()[a];
        if sections == 0 || !n.is_multiple_of(sections) {
            let message = format!("split: {sections} equal sections of the {n} along axis {axis}");
            return vec![self.fail(message)];
        }
        // Only an empty axis splits into more sections than it has elements.
        let mut indices = Vec::new();
        if indices.try_reserve_exact(sections - 1).is_err() {
            return vec![self.fail(format!("split: {sections} sections do not fit in memory"))];
        }
        let step = n / sections;
        indices.extend((1..sections).map(|i| i * step));
        self.split_at_indices(&indices, axis)
    }

    /// The pieces between `indices` along `axis` (`jnp.split` with indices): `[..i0]`,
    /// `[i0..i1]`, ..., `[ik..]`, indices past the end clamped to it.
    #[track_caller]
    pub fn split_at_indices(&self, indices: &[usize], axis: i64) -> Vec<Tensor> {
        let Some(a) = super::axis_index(axis, self.ndim()) else {
            return vec![self.fail(format!("split: axis {axis} of {}", self.ty()))];
        };
        let n = self.shape()[a];
        let mut bounds = vec![0];
        bounds.extend(indices.iter().map(|&i| i.min(n)));
        bounds.push(n);
        bounds
            .windows(2)
            .map(|w| {
                let mut start = vec![0; self.ndim()];
                let mut limit = self.shape().to_vec();
                start[a] = w[0];
                limit[a] = w[1].max(w[0]);
                self.slice(&start, &limit)
            })
            .collect()
    }

    /// The vector `p`-norm over `axis` (`jnp.linalg.norm(x, ord=p, axis=axis)`): `(Σ|x|^p)^(1/p)`,
    /// the largest `|x|` for `p = ∞`, the smallest for `−∞`, the count of nonzeros for 0; of the
    /// real type for complex `x`.
    #[track_caller]
    pub fn vector_norm(&self, p: f64, axis: i64) -> Tensor {
        let magnitude = self.abs();
        let axes = [axis as i32];
        if p == f64::INFINITY {
            magnitude.max(&axes[..])
        } else if p == f64::NEG_INFINITY {
            magnitude.min(&axes[..])
        } else if p == 0.0 {
            magnitude
                .not_equal(0.0)
                .astype(magnitude.dtype())
                .sum(&axes[..])
        } else if p == 1.0 {
            magnitude.sum(&axes[..])
        } else if p == 2.0 {
            magnitude.square().sum(&axes[..]).sqrt()
        } else {
            magnitude.pow(p).sum(&axes[..]).pow(1.0 / p)
        }
    }

    /// The Frobenius norm of the last two dimensions (`jnp.linalg.norm` of a matrix, its
    /// default): `sqrt(Σ|x|²)`.
    #[track_caller]
    pub fn frobenius_norm(&self) -> Tensor {
        self.abs().square().sum(&[-2, -1][..]).sqrt()
    }

    /// The outer product of two vectors, flattened first (`jnp.outer`).
    #[track_caller]
    pub fn outer(&self, other: &Tensor) -> Tensor {
        let (a, b) = (
            self.reshape([self.numel(), 1]),
            other.reshape([1, other.numel()]),
        );
        a * b
    }

    /// The Kronecker product of two matrices (`jnp.kron`): block `(i, j)` is `self[i, j]·other`.
    #[track_caller]
    pub fn kron(&self, other: &Tensor) -> Tensor {
        if self.ndim() != 2 || other.ndim() != 2 {
            return self.fail(format!(
                "kron: two matrices are needed, not {} and {}",
                self.ty(),
                other.ty()
            ));
        }
        let (m, n) = (self.shape()[0], self.shape()[1]);
        let (p, q) = (other.shape()[0], other.shape()[1]);
        let blocks = self.reshape([m, 1, n, 1]) * other.reshape([1, p, 1, q]);
        blocks.reshape([m * p, n * q])
    }

    /// Coordinate grids of the vectors `axes` (`jnp.meshgrid`): `xy` indexing (the default,
    /// first two grid axes swapped) or `ij`.
    #[track_caller]
    pub fn meshgrid(axes: &[&Tensor], xy: bool) -> Vec<Tensor> {
        let mut shape: Vec<usize> = axes.iter().map(|t| t.numel()).collect();
        if xy && shape.len() >= 2 {
            shape.swap(0, 1);
        }
        axes.iter()
            .enumerate()
            .map(|(i, t)| {
                let at = match (xy, i) {
                    (true, 0) if axes.len() >= 2 => 1,
                    (true, 1) => 0,
                    _ => i,
                };
                let mut view = vec![1usize; shape.len()];
                view[at] = t.numel();
                t.reshape(view).broadcast_to(shape.clone())
            })
            .collect()
    }

    /// `self` with NaN replaced by `nan`, `+∞` by `posinf` and `−∞` by `neginf`
    /// (`jnp.nan_to_num`, whose defaults are 0 and the dtype's largest and lowest values).
    #[track_caller]
    pub fn nan_to_num(&self, nan: f64, posinf: f64, neginf: f64) -> Tensor {
        let infinite = self.is_inf();
        let positive = self.greater(0.0);
        let replaced = self.is_nan().select(nan, self);
        let highest = Tensor::full(self.dtype(), self.shape().to_vec(), posinf);
        infinite.select(positive.select(&highest, neginf), &replaced)
    }

    /// Where `|self − other| ≤ atol + rtol·|other|` elementwise (`jnp.isclose`, NaN never
    /// close, equal infinities close).
    #[track_caller]
    pub fn isclose(&self, other: &Tensor, rtol: f64, atol: f64) -> Tensor {
        let within = (self - other).abs().less_equal(other.abs() * rtol + atol);
        within.logical_or(self.equal(other))
    }
}

impl Tensor {
    /// Where each value of `values` would go in this sorted vector to keep it sorted
    /// (`jnp.searchsorted`): the count of elements below it (`side="left"`), or not above it
    /// (`right`); `i32`, of `values`' shape. Every pair is compared (`method="compare_all"`),
    /// which gives the same indices as JAX's default.
    #[track_caller]
    pub fn searchsorted(&self, values: &Tensor, right: bool) -> Tensor {
        if self.ndim() != 1 {
            return self.fail(format!(
                "searchsorted: a sorted vector is needed, not {}",
                self.ty()
            ));
        }
        let v = values.expand_dims(-1);
        let before = match right {
            true => self.less_equal(&v),
            false => self.less(&v),
        };
        before.astype(DType::I32).sum(-1)
    }
}

impl Tensor {
    /// Piecewise-linear interpolation of the points (`xp`, `fp`) at these values
    /// (`jnp.interp`): `xp` increasing; values below `xp[0]` give `left` (`fp[0]` when
    /// `None`), above `xp[-1]` `right` (`fp[-1]`). Repeated `xp` values take the left point.
    #[track_caller]
    pub fn interp(
        &self,
        xp: &Tensor,
        fp: &Tensor,
        left: Option<f64>,
        right: Option<f64>,
    ) -> Tensor {
        if xp.ndim() != 1 || xp.shape() != fp.shape() || xp.shape()[0] == 0 {
            return self.fail(format!(
                "interp: xp {} and fp {} must be vectors of one non-zero length",
                xp.ty(),
                fp.ty()
            ));
        }
        let n = xp.shape()[0];
        let x = self.astype(xp.dtype());
        let (below, i) = match n {
            1 => {
                let first = Tensor::zeros(DType::I32, x.shape().to_vec());
                (first.clone(), first)
            }
            _ => {
                let i = xp.searchsorted(&x, true).clip(1, (n - 1) as i32);
                (&i - 1, i)
            }
        };
        let at = |v: &Tensor, j: &Tensor| v.take_with(j, 0, super::IndexMode::Clip);
        let (x0, x1, f0, f1) = (at(xp, &below), at(xp, &i), at(fp, &below), at(fp, &i));
        let dx = &x1 - &x0;
        // A step of (nearly) zero width, at most the spacing of the dtype's epsilon (as
        // JAX's), takes the left value rather than divide by it.
        let epsilon = match xp.dtype() {
            DType::F64 => f64::EPSILON,
            DType::F16 => 2f64.powi(-10),
            DType::BF16 => 2f64.powi(-7),
            _ => f64::from(f32::EPSILON),
        };
        let flat = dx.abs().less_equal(epsilon * epsilon);
        let safe_dx = flat.select(1.0, &dx);
        let f = flat.select(&f0, &(&f0 + (&x - &x0) / safe_dx * (&f1 - &f0)));
        let first = xp.slice(&[0], &[1]).reshape(Vec::<usize>::new());
        let last = xp.slice(&[n - 1], &[n]).reshape(Vec::<usize>::new());
        let left = match left {
            Some(v) => Tensor::full(f.dtype(), Vec::<usize>::new(), v),
            None => fp.slice(&[0], &[1]).reshape(Vec::<usize>::new()),
        };
        let right = match right {
            Some(v) => Tensor::full(f.dtype(), Vec::<usize>::new(), v),
            None => fp.slice(&[n - 1], &[n]).reshape(Vec::<usize>::new()),
        };
        let f = x.less(&first).select(&left, &f);
        x.greater(&last).select(&right, &f)
    }
}

impl Tensor {
    /// The remainder with the sign of the divisor (`jnp.remainder`, Python's `%`; the `%`
    /// operator is `lax.rem`, which takes the dividend's sign). Integer division by zero
    /// gives 0, as in JAX.
    #[track_caller]
    pub fn remainder(&self, divisor: &Tensor) -> Tensor {
        let divisor = self.nonzero_divisor(divisor);
        let truncated = self.fmod(&divisor);
        let differs = truncated.less(0.0).not_equal(divisor.less(0.0));
        let shift = differs.logical_and(truncated.not_equal(0.0));
        shift.select(&(&truncated + &divisor), &truncated)
    }

    /// The quotient rounded toward negative infinity (`jnp.floor_divide`, Python's `//`).
    #[track_caller]
    pub fn floor_divide(&self, divisor: &Tensor) -> Tensor {
        if self.dtype().is_int() && !self.dtype().is_signed_int() {
            return self / divisor;
        }
        if self.dtype().is_int() {
            let quotient = self / divisor;
            let signs = self.sign().not_equal(divisor.sign());
            let inexact = self.fmod(divisor).not_equal(0.0);
            return signs
                .logical_and(inexact)
                .select(&(&quotient - 1.0), &quotient);
        }
        // NumPy's float divmod: (x - mod) / y, one less where the remainder's sign is not the
        // divisor's, rounded.
        let remainder = self.fmod(divisor);
        let exact = divisor.equal(0.0).select(self, &(self - &remainder));
        let quotient = exact / divisor;
        let shift = remainder
            .not_equal(0.0)
            .logical_and(divisor.sign().not_equal(remainder.sign()));
        shift.select(&(&quotient - 1.0), &quotient).round_even()
    }

    /// Integer divisors with zeros replaced by ones (JAX's `remainder` guard); others as given.
    #[track_caller]
    fn nonzero_divisor(&self, divisor: &Tensor) -> Tensor {
        match divisor.dtype().is_int() {
            true => divisor.equal(0.0).select(1.0, divisor),
            false => divisor.clone(),
        }
    }
}
