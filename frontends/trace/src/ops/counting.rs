//! Counting, binning and selecting with static result sizes, as `jax.numpy` does them under
//! `jit`: `bincount` (a scatter-add), `digitize` and `histogram` (a sorted search, then a
//! scatter-add), `unique_values`, `unique_counts` and `unique_inverse` (a sort, a running
//! count of the distinct values, and scatters into `size` slots), `nonzero`, `argwhere` and
//! `flatnonzero` (a running count of the nonzero elements and a scatter into `size` slots),
//! `count_nonzero` and `isin`.

use super::IndexMode;
use crate::Tensor;
use ferrax_ir::DType;

impl Tensor {
    /// The count of each value `0..length` among these integers, or the sum of `weights`
    /// (of this shape) at each (`jnp.bincount(x, weights, length=length)`): negative values
    /// count as 0, values `>= length` are dropped. Counts are i32, sums `weights`' dtype.
    #[track_caller]
    pub fn bincount(&self, weights: Option<&Tensor>, length: usize) -> Tensor {
        if !self.dtype().is_int() {
            return self.fail(format!("bincount: integers are needed, not {}", self.ty()));
        }
        let weights = match weights {
            Some(w) if w.shape() != self.shape() => {
                return self.fail(format!(
                    "bincount: weights {} for values {}",
                    w.ty(),
                    self.ty()
                ))
            }
            Some(w) => w.clone(),
            None => Tensor::ones(DType::I32, self.shape().to_vec()),
        };
        let n = self.numel();
        let bins = self.reshape([n]).maximum(0);
        Tensor::zeros(weights.dtype(), [length])
            .at(&bins)
            .mode(IndexMode::FillOrDrop)
            .add(weights.reshape([n]))
    }

    /// The index of the bin of `bins` (increasing or decreasing edges) each value falls in
    /// (`jnp.digitize`): `i` with `bins[i-1] <= x < bins[i]` for increasing edges
    /// (`bins[i-1] < x <= bins[i]` when `right`), mirrored for decreasing ones; i32.
    #[track_caller]
    pub fn digitize(&self, bins: &Tensor, right: bool) -> Tensor {
        if bins.ndim() != 1 {
            return self.fail(format!(
                "digitize: bins must be a vector, not {}",
                bins.ty()
            ));
        }
        let n = bins.shape()[0];
        if n == 0 {
            return Tensor::zeros(DType::I32, self.shape().to_vec());
        }
        let rising = bins.searchsorted(self, !right);
        let falling = -bins.flip([0usize]).searchsorted(self, !right) + n as f64;
        let last = bins.slice(&[n - 1], &[n]).reshape(Vec::<usize>::new());
        let first = bins.slice(&[0], &[1]).reshape(Vec::<usize>::new());
        last.greater_equal(&first).select(&rising, &falling)
    }

    /// The counts (or summed `weights`) of these values in `bins` equal bins over `range`
    /// (the values' minimum and maximum when `None`; an empty range widened by 0.5 each way)
    /// and the `bins + 1` edges (`jnp.histogram`). The last bin includes its right edge;
    /// values outside are not counted. `density` divides by the total and the bin widths.
    #[track_caller]
    pub fn histogram(
        &self,
        bins: usize,
        range: Option<(f64, f64)>,
        weights: Option<&Tensor>,
        density: bool,
    ) -> (Tensor, Tensor) {
        let x = self.astype(float_type(self.dtype()));
        let (lo, hi) = match range {
            Some((lo, hi)) => (
                Tensor::full(x.dtype(), Vec::<usize>::new(), lo),
                Tensor::full(x.dtype(), Vec::<usize>::new(), hi),
            ),
            None if x.numel() == 0 => (
                Tensor::zeros(x.dtype(), Vec::<usize>::new()),
                Tensor::ones(x.dtype(), Vec::<usize>::new()),
            ),
            None => (x.min(..), x.max(..)),
        };
        let empty = lo.equal(&hi);
        let lo = empty.select(&(&lo - 0.5), &lo);
        let hi = empty.select(&(&hi + 0.5), &hi);
        let Some(count) = bins.checked_add(1) else {
            let failed = self.fail(format!("histogram: {bins} bins are too many"));
            return (failed.clone(), failed);
        };
        let steps = Tensor::arange(x.dtype(), count) / bins.max(1) as f64;
        let edges = &lo + (&hi - &lo) * steps;
        let edges = match bins {
            0 => edges,
            _ => edges.at(&Tensor::scalar(bins as i64)).set(&hi),
        };
        let counts = x.histogram_edges(&edges, weights, density);
        (counts, edges)
    }

    /// The counts (or summed `weights`) of these values between consecutive `edges`
    /// (increasing; `jnp.histogram` with explicit bins): bin `i` holds `edges[i] <= x <
    /// edges[i+1]`, the last its right edge too.
    #[track_caller]
    pub fn histogram_edges(
        &self,
        edges: &Tensor,
        weights: Option<&Tensor>,
        density: bool,
    ) -> Tensor {
        if edges.ndim() != 1 || edges.shape()[0] == 0 {
            return self.fail(format!(
                "histogram: edges must be a non-empty vector, not {}",
                edges.ty()
            ));
        }
        let weights = match weights {
            Some(w) if w.shape() != self.shape() => {
                return self.fail(format!(
                    "histogram: weights {} for values {}",
                    w.ty(),
                    self.ty()
                ))
            }
            Some(w) => w.clone(),
            None => Tensor::ones(float_type(self.dtype()), self.shape().to_vec()),
        };
        let n = edges.shape()[0];
        let x = self.reshape([self.numel()]).astype(edges.dtype());
        let last = edges.slice(&[n - 1], &[n]);
        let bin = edges.searchsorted(&x, true);
        let bin = x
            .equal(&last)
            .select(Tensor::full(DType::I32, [1], (n - 1) as f64), &bin);
        let counts = Tensor::zeros(weights.dtype(), [n])
            .at(&bin)
            .mode(IndexMode::FillOrDrop)
            .add(weights.reshape([self.numel()]))
            .slice(&[1], &[n]);
        match density {
            false => counts,
            true => {
                let widths = edges.slice(&[1], &[n]) - edges.slice(&[0], &[n - 1]);
                let counts = counts.astype(widths.dtype());
                &counts / counts.sum(..) / widths
            }
        }
    }

    /// The distinct values, sorted, in `size` slots, the rest `fill_value` (the smallest
    /// value when `None`) (`jnp.unique_values(x, size=size)`; each NaN is a value of its own, as the array API has it).
    #[track_caller]
    pub fn unique_values(&self, size: usize, fill_value: Option<f64>) -> Tensor {
        self.distinct(size, fill_value).values
    }

    /// [`Tensor::unique_values`] and how often each occurs (`jnp.unique_counts`; i32, 0 in
    /// the filled slots).
    #[track_caller]
    pub fn unique_counts(&self, size: usize, fill_value: Option<f64>) -> (Tensor, Tensor) {
        let d = self.distinct(size, fill_value);
        let counts = Tensor::zeros(DType::I32, [size])
            .at(&d.group)
            .mode(IndexMode::FillOrDrop)
            .add(Tensor::ones(DType::I32, [d.group.numel()]));
        (d.values, counts)
    }

    /// [`Tensor::unique_values`] and, for each element, the slot of its value (of this
    /// shape; `jnp.unique_inverse`).
    #[track_caller]
    pub fn unique_inverse(&self, size: usize, fill_value: Option<f64>) -> (Tensor, Tensor) {
        let d = self.distinct(size, fill_value);
        let n = d.group.numel();
        let inverse = Tensor::zeros(DType::I32, [n])
            .at(&d.order)
            .set(&d.group)
            .reshape(self.shape().to_vec());
        (d.values, inverse)
    }

    #[track_caller]
    fn distinct(&self, size: usize, fill_value: Option<f64>) -> Distinct {
        let n = self.numel();
        let flat = self.reshape([n]);
        let order = flat.argsort(0);
        let sorted = flat.sort(0);
        // Where a sorted element differs from the one before it (each NaN from every value).
        let new = match n {
            0 => Tensor::zeros(DType::Bool, [0]),
            _ => {
                let (head, tail) = (sorted.slice(&[0], &[n - 1]), sorted.slice(&[1], &[n]));
                let differs = head.not_equal(&tail);
                Tensor::concatenate(&[Tensor::full(DType::Bool, [1], 1.0), differs], 0)
            }
        };
        let group = new.astype(DType::I32).cumsum(0) - 1;
        // The first of each run goes to its slot; the others to `size`, which is dropped.
        let slot = new.select(&group, Tensor::full(DType::I32, [n], size as f64));
        let fill = match (fill_value, n) {
            (Some(v), _) => Tensor::full(self.dtype(), [size], v),
            (None, 0) => Tensor::zeros(self.dtype(), [size]),
            (None, _) => sorted.slice(&[0], &[1]).broadcast_to([size]),
        };
        let values = fill.at(&slot).mode(IndexMode::FillOrDrop).set(&sorted);
        Distinct {
            values,
            group,
            order,
        }
    }
}

/// What the `unique_*` functions share: the values in their slots, each sorted element's
/// slot, and the sorting permutation.
struct Distinct {
    values: Tensor,
    group: Tensor,
    order: Tensor,
}

/// The float type counting and binning compute positions in.
fn float_type(dtype: DType) -> DType {
    match dtype {
        DType::F64 | DType::F32 | DType::F16 | DType::BF16 => dtype,
        _ => DType::F32,
    }
}

impl Tensor {
    /// The coordinates of the first `size` nonzero elements in row-major order, one `i32`
    /// vector per dimension, padded with `fill_value` (`jnp.nonzero(x, size=, fill_value=)`).
    #[track_caller]
    pub fn nonzero(&self, size: usize, fill_value: i32) -> Vec<Tensor> {
        let flat = self.flatnonzero(size, None);
        let found = self.count_nonzero(..);
        let filled = Tensor::iota(DType::I32, [size], 0).greater_equal(&found);
        let mut stride = 1usize;
        let mut coordinates: Vec<Tensor> = Vec::with_capacity(self.ndim());
        for &d in self.shape().iter().rev() {
            let c = (&flat / stride as f64).fmod(d.max(1) as f64);
            coordinates.push(filled.select(f64::from(fill_value), &c));
            stride = stride.saturating_mul(d);
        }
        coordinates.reverse();
        coordinates
    }

    /// The first `size` nonzero elements' coordinates as rows of an `i32` `[size, ndim]`
    /// matrix (`jnp.argwhere(x, size=, fill_value=)`).
    #[track_caller]
    pub fn argwhere(&self, size: usize, fill_value: i32) -> Tensor {
        let coordinates = self.nonzero(size, fill_value);
        match coordinates.is_empty() {
            true => Tensor::zeros(DType::I32, [size, 0]),
            false => Tensor::stack(&coordinates, 1),
        }
    }

    /// The flat (row-major) indices of the first `size` nonzero elements, `i32`, padded with
    /// `fill_value` (0 when `None`; `jnp.flatnonzero(x, size=, fill_value=)`).
    #[track_caller]
    pub fn flatnonzero(&self, size: usize, fill_value: Option<i32>) -> Tensor {
        let n = self.numel();
        let nonzero = match self.dtype() {
            DType::Bool => self.reshape([n]),
            _ => self.reshape([n]).not_equal(0.0),
        };
        // The k-th nonzero element goes to slot k; the others to `size`, which is dropped.
        let slot = nonzero.astype(DType::I32).cumsum(0) - 1;
        let slot = nonzero.select(&slot, Tensor::full(DType::I32, [n], size as f64));
        let fill = f64::from(fill_value.unwrap_or(0));
        Tensor::full(DType::I32, [size], fill)
            .at(&slot)
            .mode(IndexMode::FillOrDrop)
            .set(Tensor::iota(DType::I32, [n], 0))
    }

    /// The count of nonzero elements over `axes` (`jnp.count_nonzero`), `i32`.
    #[track_caller]
    pub fn count_nonzero(&self, axes: impl Into<super::Axes>) -> Tensor {
        let nonzero = match self.dtype() {
            DType::Bool => self.clone(),
            _ => self.not_equal(0.0),
        };
        nonzero.astype(DType::I32).sum(axes)
    }

    /// Whether each element is among `test_elements` (`jnp.isin`), booleans of this shape.
    #[track_caller]
    pub fn isin(&self, test_elements: &Tensor) -> Tensor {
        let tests = test_elements.reshape([test_elements.numel()]);
        self.expand_dims(-1).equal(&tests).any(-1i32)
    }
}
