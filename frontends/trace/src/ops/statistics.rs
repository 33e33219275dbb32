//! `jax.numpy`'s statistics: reductions that skip NaNs (`nansum`, `nanmean`, `nanmax`,
//! `nanmin`, `nanvar`, `nanstd`), quantiles with NumPy's interpolation methods (`quantile`,
//! `percentile`, `median` and their NaN-skipping forms), weighted averages, peak-to-peak,
//! covariance and correlation matrices. Composites of sorts, gathers and reductions.

use super::Axes;
use crate::Tensor;
use ferrax_ir::DType;

/// How [`Tensor::quantile`] picks a value between the two sorted neighbours of a quantile's
/// position `q (n - 1)` (NumPy's `method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum QuantileMethod {
    /// Interpolated between the neighbours.
    #[default]
    Linear,
    Lower,
    Higher,
    /// The nearer neighbour (the lower one at a tie).
    Nearest,
    /// The neighbours' mean.
    Midpoint,
}

impl Tensor {
    /// The sum over `axes` treating NaNs as zero (`jnp.nansum`).
    #[track_caller]
    pub fn nansum(&self, axes: impl Into<Axes>) -> Tensor {
        self.is_nan().select(0.0, self).sum(axes)
    }

    /// The mean over `axes` of the values that are not NaN (`jnp.nanmean`; NaN where all are).
    #[track_caller]
    pub fn nanmean(&self, axes: impl Into<Axes>) -> Tensor {
        let axes = axes.into();
        self.nansum(axes.clone()) / self.present(axes)
    }

    /// The maximum over `axes` ignoring NaNs (`jnp.nanmax`; NaN where all are).
    #[track_caller]
    pub fn nanmax(&self, axes: impl Into<Axes>) -> Tensor {
        self.nan_extreme(axes.into(), true)
    }

    /// The minimum over `axes` ignoring NaNs (`jnp.nanmin`; NaN where all are).
    #[track_caller]
    pub fn nanmin(&self, axes: impl Into<Axes>) -> Tensor {
        self.nan_extreme(axes.into(), false)
    }

    /// The variance over `axes` of the values that are not NaN (`jnp.nanvar`, `ddof = 0`).
    #[track_caller]
    pub fn nanvar(&self, axes: impl Into<Axes>) -> Tensor {
        let axes = axes.into();
        let mean = self.nansum_keepdims(axes.clone()) / self.present_keepdims(axes.clone());
        let centered = self.is_nan().select(0.0, &(self - mean));
        centered.square().sum(axes.clone()) / self.present(axes)
    }

    /// The standard deviation over `axes` of the values that are not NaN (`jnp.nanstd`).
    #[track_caller]
    pub fn nanstd(&self, axes: impl Into<Axes>) -> Tensor {
        self.nanvar(axes).sqrt()
    }

    /// The largest minus the smallest value over `axes` (`jnp.ptp`).
    #[track_caller]
    pub fn ptp(&self, axes: impl Into<Axes>) -> Tensor {
        let axes = axes.into();
        self.max(axes.clone()) - self.min(axes)
    }

    /// `sum(x·w) / sum(w)` over `axes`, `weights` broadcast to `self` (`jnp.average`).
    #[track_caller]
    pub fn average(&self, weights: &Tensor, axes: impl Into<Axes>) -> Tensor {
        let axes = axes.into();
        let w = weights
            .broadcast_to(self.shape().to_vec())
            .astype(self.dtype());
        (self * &w).sum(axes.clone()) / w.sum(axes)
    }

    /// The count of values that are not NaN over `axes`, in this dtype.
    #[track_caller]
    fn present(&self, axes: Axes) -> Tensor {
        self.is_nan().logical_not().astype(self.dtype()).sum(axes)
    }

    #[track_caller]
    fn present_keepdims(&self, axes: Axes) -> Tensor {
        self.is_nan()
            .logical_not()
            .astype(self.dtype())
            .sum_keepdims(axes)
    }

    #[track_caller]
    fn nansum_keepdims(&self, axes: Axes) -> Tensor {
        self.is_nan().select(0.0, self).sum_keepdims(axes)
    }

    #[track_caller]
    fn nan_extreme(&self, axes: Axes, max: bool) -> Tensor {
        let nan = self.is_nan();
        let reduced = match max {
            true => nan.select(f64::NEG_INFINITY, self).max(axes.clone()),
            false => nan.select(f64::INFINITY, self).min(axes.clone()),
        };
        nan.all(axes).select(f64::NAN, &reduced)
    }

    /// The quantiles `q` (each in [0, 1]) along `axis` (of the flattened values when `None`),
    /// interpolated as `method` says (`jnp.quantile`): the result is `[q.len()]` followed by
    /// the shape without `axis`. A slice holding a NaN gives NaN.
    #[track_caller]
    pub fn quantile(&self, q: &[f64], axis: Option<i64>, method: QuantileMethod) -> Tensor {
        self.quantiles("quantile", q, axis, method, false)
    }

    /// [`Tensor::quantile`] of the values that are not NaN (`jnp.nanquantile`).
    #[track_caller]
    pub fn nanquantile(&self, q: &[f64], axis: Option<i64>, method: QuantileMethod) -> Tensor {
        self.quantiles("nanquantile", q, axis, method, true)
    }

    /// [`Tensor::quantile`] at percentages (`jnp.percentile`).
    #[track_caller]
    pub fn percentile(&self, p: &[f64], axis: Option<i64>, method: QuantileMethod) -> Tensor {
        let q: Vec<f64> = p.iter().map(|p| p / 100.0).collect();
        self.quantiles("percentile", &q, axis, method, false)
    }

    /// The median along `axis` (all values when `None`; `jnp.median`: the midpoint of the
    /// middle two for an even count).
    #[track_caller]
    pub fn median(&self, axis: Option<i64>) -> Tensor {
        middle(self.quantiles("median", &[0.5], axis, QuantileMethod::Midpoint, false))
    }

    /// The median of the values that are not NaN (`jnp.nanmedian`).
    #[track_caller]
    pub fn nanmedian(&self, axis: Option<i64>) -> Tensor {
        middle(self.quantiles("nanmedian", &[0.5], axis, QuantileMethod::Midpoint, true))
    }

    #[track_caller]
    fn quantiles(
        &self,
        op: &str,
        q: &[f64],
        axis: Option<i64>,
        method: QuantileMethod,
        skip_nans: bool,
    ) -> Tensor {
        if let Some(bad) = q.iter().find(|q| !(0.0..=1.0).contains(*q)) {
            return self.fail(format!("{op}: quantiles must be in [0, 1], not {bad}"));
        }
        let dtype = match self.dtype() {
            DType::F64 | DType::F32 | DType::F16 | DType::BF16 => self.dtype(),
            _ => DType::F32,
        };
        let (x, axis) = match axis {
            None => (self.reshape([self.numel()]).astype(dtype), 0),
            Some(a) => match super::axis_index(a, self.ndim()) {
                Some(a) => (self.astype(dtype), a),
                None => return self.fail(format!("{op}: axis {a} of {}", self.ty())),
            },
        };
        let n = x.shape()[axis];
        if n == 0 {
            return self.fail(format!("{op}: axis {axis} of {} is empty", self.ty()));
        }
        let nan = x.is_nan();
        let (sorted, count) = match skip_nans {
            // NaNs sort last; each slice counts its other values.
            true => (
                x.sort(axis as i64),
                nan.logical_not().astype(dtype).sum_keepdims(axis),
            ),
            false => {
                let poisoned = nan.any(axis).expand_dims(axis as i64);
                let x = poisoned.select(f64::NAN, &x);
                (
                    x.sort(axis as i64),
                    Tensor::full(dtype, Vec::<usize>::new(), n as f64),
                )
            }
        };
        let last = &count - 1.0;
        let picks: Vec<Tensor> = q
            .iter()
            .map(|&q| {
                let position = &last * q;
                let low = position.floor();
                let high = position.ceil();
                let high_weight = &position - &low;
                let index = |p: &Tensor| {
                    let p = p.clip(0.0, last.maximum(0.0)).astype(DType::I32);
                    sorted.take_along_axis(&p.broadcast_to(keep_shape(&sorted, axis)), axis as i64)
                };
                let (lo, hi) = (index(&low), index(&high));
                let value = match method {
                    QuantileMethod::Linear => &lo * (-&high_weight + 1.0) + &hi * &high_weight,
                    QuantileMethod::Lower => lo,
                    QuantileMethod::Higher => hi,
                    QuantileMethod::Nearest => high_weight.less_equal(0.5).select(&lo, &hi),
                    QuantileMethod::Midpoint => (lo + hi) * 0.5,
                };
                value.squeeze(axis)
            })
            .collect();
        Tensor::stack(&picks, 0)
    }
}

/// The one quantile of `quantiles` (a failed tensor as it is).
fn middle(quantiles: Tensor) -> Tensor {
    match quantiles.error() {
        Some(_) => quantiles,
        None => quantiles.squeeze(0),
    }
}

/// `x`'s shape with `axis` of size 1.
fn keep_shape(x: &Tensor, axis: usize) -> Vec<usize> {
    let mut s = x.shape().to_vec();
    s[axis] = 1;
    s
}

impl Tensor {
    /// The covariance matrix of the variables in the rows (`rowvar`) or columns of this
    /// matrix, observations along the other axis, normalized by `N - ddof` (`jnp.cov`;
    /// `ddof = 1` unbiased). A vector is one variable (a scalar result).
    #[track_caller]
    pub fn cov(&self, rowvar: bool, ddof: usize) -> Tensor {
        let x = match (self.ndim(), rowvar) {
            (1, _) => self.reshape([1, self.numel()]),
            (2, true) => self.clone(),
            (2, false) => self.t(),
            _ => {
                return self.fail(format!(
                    "cov: a vector or matrix is needed, not {}",
                    self.ty()
                ))
            }
        };
        let x = match x.dtype() {
            DType::F64 | DType::F32 | DType::C64 | DType::C128 => x,
            _ => x.astype(DType::F32),
        };
        let observations = x.shape()[1] as f64;
        let centered = &x - x.mean_keepdims(1);
        let c = centered.matmul(&centered.conj().t()) / (observations - ddof as f64);
        match self.ndim() {
            1 => c.reshape(Vec::<usize>::new()),
            _ => c,
        }
    }

    /// The correlation coefficients of the variables (`jnp.corrcoef`): the covariance divided
    /// by the standard deviations' products, real ones clipped to [-1, 1].
    #[track_caller]
    pub fn corrcoef(&self, rowvar: bool) -> Tensor {
        let c = self.cov(rowvar, 1);
        if c.ndim() == 0 {
            // One variable: `c / c`, 1 unless its variance is zero or not finite.
            let defined = c.is_finite().logical_and(c.not_equal(0.0));
            return defined.select(1.0, f64::NAN).astype(c.dtype());
        }
        let variances = match c.dtype().is_complex() {
            true => c.diagonal().real(),
            false => c.diagonal(),
        };
        let std = variances.sqrt().astype(c.dtype());
        let c = &c / std.expand_dims(1) / std.expand_dims(0);
        match c.dtype().is_complex() {
            true => c,
            false => c.clip(-1.0, 1.0),
        }
    }
}
