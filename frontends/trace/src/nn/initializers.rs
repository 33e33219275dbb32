//! Parameter initializers, named and parameterized as `jax.nn.initializers`, drawing from a
//! [`Key`] with [`crate::random`] exactly as JAX's do: the same key, shape and dtype give
//! JAX's values (bit for bit for the uniform ones, within a few ULP through `erf_inv`).
//!
//! The variance-scaling family follows `jax.nn.initializers.variance_scaling` exactly: fans
//! from `in_axis`/`out_axis` (default the last two axes) times the receptive field (the
//! other axes), a variance of `scale / fan`, and a truncated normal on [-2, 2] rescaled by
//! 0.8796 (its standard deviation) so that the variance is the one asked for.

use crate::random::{self, Key};
use crate::{jit, Tensor};
use ferrax_ir::{DType, Shape, TensorType};
use std::panic::Location;

/// Which fan a variance-scaling initializer divides by (JAX's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    FanIn,
    FanOut,
    /// `(fan_in + fan_out) / 2`.
    FanAvg,
    /// `sqrt(fan_in · fan_out)`.
    FanGeoAvg,
}

/// The distribution a variance-scaling initializer draws from (JAX's `distribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// A normal truncated to two standard deviations, rescaled to the asked-for variance.
    TruncatedNormal,
    Normal,
    /// Uniform on `[-sqrt(3·var), sqrt(3·var))`.
    Uniform,
}

/// A way to fill a parameter tensor (a `jax.nn.initializers` initializer); build one with the
/// functions of this module and call [`Initializer::init`].
#[derive(Clone, Debug, PartialEq)]
pub enum Initializer {
    Constant(f64),
    /// `stddev · N(0, 1)`.
    Normal {
        stddev: f64,
    },
    /// Uniform on `[0, scale)` (JAX's `uniform`).
    Uniform {
        scale: f64,
    },
    /// `stddev · N(0, 1)` truncated to `[lower, upper]` (not rescaled, as in JAX).
    TruncatedNormal {
        stddev: f64,
        lower: f64,
        upper: f64,
    },
    VarianceScaling {
        scale: f64,
        mode: FanMode,
        distribution: Distribution,
        in_axis: i64,
        out_axis: i64,
    },
    /// `scale` times a uniformly distributed orthogonal matrix: the `q` of a normal matrix's
    /// QR factorization, its columns' signs set by `r`'s diagonal, as rows and columns of
    /// `column_axis` (JAX's `orthogonal`).
    Orthogonal {
        scale: f64,
        column_axis: i64,
    },
}

/// The standard deviation of N(0, 1) truncated to [-2, 2] (JAX's constant).
const TRUNCATED_STDDEV: f64 = 0.879_625_661_034_239_8;

impl Initializer {
    /// A tensor of `shape` and float `dtype` drawn with `key` (constants ignore it), as
    /// `initializer(key, shape, dtype)` in JAX. A concrete key draws with a compiled program
    /// (one fused kernel, however large the tensor); a traced one records the draw in the
    /// trace. Invalid requests (a random initializer for a non-float dtype, fans of a tensor
    /// of rank < 2, axes out of range, empty truncation bounds) give a failed tensor, as
    /// tensor operations do.
    #[track_caller]
    pub fn init(&self, key: &Key, shape: impl Into<Shape>, dtype: DType) -> Tensor {
        let shape = shape.into();
        let location = Location::caller();
        let fail = |message: String| {
            Tensor::failed(location, message, TensorType::new(dtype, shape.clone()))
        };
        if let Initializer::Constant(v) = self {
            return Tensor::full(dtype, shape.clone(), *v);
        }
        if !dtype.is_float() {
            return fail(format!(
                "{self:?}: random initializers need a float dtype, got {dtype}"
            ));
        }
        if let Err(message) = self.check(shape.dims()) {
            return fail(format!("{self:?}: {message}"));
        }
        if key.data().is_traced() {
            return self.draw(key, &shape, dtype);
        }
        let draw = jit(|k: Key| self.draw(&k, &shape, dtype));
        draw.call(key.clone())
            .unwrap_or_else(|e| fail(format!("{self:?}: {e}")))
    }

    /// Why this initializer cannot fill a tensor of `dims`, if it cannot.
    fn check(&self, dims: &[usize]) -> Result<(), String> {
        match *self {
            Initializer::TruncatedNormal { lower, upper, .. }
                if lower.partial_cmp(&upper) != Some(std::cmp::Ordering::Less) =>
            {
                Err(format!("truncation bounds [{lower}, {upper}] are empty"))
            }
            Initializer::VarianceScaling {
                in_axis, out_axis, ..
            } => fans(dims, in_axis, out_axis).map(drop),
            Initializer::Orthogonal { column_axis, .. } => match dims.len() {
                0 | 1 => Err(format!(
                    "an orthogonal matrix needs rank >= 2, not shape {dims:?}"
                )),
                _ => axis_index(dims, column_axis).map(drop),
            },
            Initializer::Constant(_)
            | Initializer::Normal { .. }
            | Initializer::Uniform { .. }
            | Initializer::TruncatedNormal { .. } => Ok(()),
        }
    }

    /// The draw itself, as JAX's initializers compute it.
    #[track_caller]
    fn draw(&self, key: &Key, shape: &Shape, dtype: DType) -> Tensor {
        let dims = shape.dims();
        match *self {
            Initializer::Constant(v) => Tensor::full(dtype, shape.clone(), v),
            Initializer::Normal { stddev } => random::normal(key, dims.to_vec(), dtype) * stddev,
            Initializer::Uniform { scale } => random::uniform(key, dims.to_vec(), dtype) * scale,
            Initializer::TruncatedNormal {
                stddev,
                lower,
                upper,
            } => random::truncated_normal(key, lower, upper, dims.to_vec(), dtype) * stddev,
            Initializer::VarianceScaling {
                scale,
                mode,
                distribution,
                in_axis,
                out_axis,
            } => {
                let (fan_in, fan_out) = fans(dims, in_axis, out_axis).unwrap_or((1.0, 1.0));
                let fan = match mode {
                    FanMode::FanIn => fan_in,
                    FanMode::FanOut => fan_out,
                    FanMode::FanAvg => (fan_in + fan_out) / 2.0,
                    FanMode::FanGeoAvg => (fan_in * fan_out).sqrt(),
                };
                let variance = scale / fan;
                match distribution {
                    Distribution::TruncatedNormal => {
                        random::truncated_normal(key, -2.0, 2.0, dims.to_vec(), dtype)
                            * (variance.sqrt() / TRUNCATED_STDDEV)
                    }
                    Distribution::Normal => {
                        random::normal(key, dims.to_vec(), dtype) * variance.sqrt()
                    }
                    Distribution::Uniform => {
                        random::uniform_in(key, dims.to_vec(), dtype, -1.0, 1.0)
                            * (3.0 * variance).sqrt()
                    }
                }
            }
            Initializer::Orthogonal { scale, column_axis } => {
                orthogonal_draw(key, dims, column_axis, dtype) * scale
            }
        }
    }
}

/// JAX's `orthogonal` draw (unscaled): `q·sign(diag(r))` of a normal `max × min` matrix over
/// the rows and columns of `column_axis`, transposed when there are fewer rows than columns,
/// then laid back out with the columns along `column_axis`.
#[track_caller]
fn orthogonal_draw(key: &Key, dims: &[usize], column_axis: i64, dtype: DType) -> Tensor {
    let Ok(axis) = axis_index(dims, column_axis) else {
        return Tensor::zeros(dtype, dims.to_vec());
    };
    let cols = dims[axis];
    let total: usize = dims.iter().product();
    if total == 0 {
        return Tensor::zeros(dtype, dims.to_vec());
    }
    let rows = total / cols;
    let tall = [rows.max(cols), rows.min(cols)];
    let a = random::normal(key, tall.to_vec(), dtype);
    let (q, r) = a.qr(false);
    let mut q = q * r.matrix_diagonal().sign();
    if rows < cols {
        q = q.t();
    }
    // `[other axes.., cols]`, then the columns moved to `column_axis`.
    let mut laid: Vec<usize> = dims.to_vec();
    laid.remove(axis);
    laid.push(cols);
    let rank = dims.len();
    let mut perm: Vec<usize> = (0..rank - 1).collect();
    perm.insert(axis, rank - 1);
    q.reshape(laid).transpose(perm)
}

/// `axis` (negative from the end) as an index into `dims`.
fn axis_index(dims: &[usize], axis: i64) -> Result<usize, String> {
    let i = if axis < 0 {
        axis + dims.len() as i64
    } else {
        axis
    };
    usize::try_from(i)
        .ok()
        .filter(|&i| i < dims.len())
        .ok_or_else(|| format!("axis {axis} is out of range for shape {dims:?}"))
}

/// `(fan_in, fan_out)` as JAX's `_compute_fans`: the sizes of `in_axis` and `out_axis`, each
/// times the product of the other axes.
fn fans(dims: &[usize], in_axis: i64, out_axis: i64) -> Result<(f64, f64), String> {
    let axis = |a: i64| axis_index(dims, a).map_err(|e| format!("{e} (fans need rank >= 2)"));
    let (i, o) = (axis(in_axis)?, axis(out_axis)?);
    let (fan_in, fan_out) = (dims[i] as f64, dims[o] as f64);
    let total: f64 = dims.iter().map(|&d| d as f64).product();
    let receptive = total / fan_in / fan_out;
    Ok((fan_in * receptive, fan_out * receptive))
}

/// Zeros (`jax.nn.initializers.zeros`).
pub fn zeros() -> Initializer {
    Initializer::Constant(0.0)
}

/// Ones (`jax.nn.initializers.ones`).
pub fn ones() -> Initializer {
    Initializer::Constant(1.0)
}

/// Every element `value` (`jax.nn.initializers.constant`).
pub fn constant(value: f64) -> Initializer {
    Initializer::Constant(value)
}

/// `stddev · N(0, 1)` (`jax.nn.initializers.normal`; JAX's default stddev is 1e-2).
pub fn normal(stddev: f64) -> Initializer {
    Initializer::Normal { stddev }
}

/// Uniform on `[0, scale)` (`jax.nn.initializers.uniform`; JAX's default scale is 1e-2).
pub fn uniform(scale: f64) -> Initializer {
    Initializer::Uniform { scale }
}

/// `stddev · N(0, 1)` truncated to [-2, 2] standard deviations
/// (`jax.nn.initializers.truncated_normal`; not rescaled, so its stddev is 0.88·`stddev`).
pub fn truncated_normal(stddev: f64) -> Initializer {
    Initializer::TruncatedNormal {
        stddev,
        lower: -2.0,
        upper: 2.0,
    }
}

/// `jax.nn.initializers.variance_scaling` over the last two axes (fan in, fan out).
pub fn variance_scaling(scale: f64, mode: FanMode, distribution: Distribution) -> Initializer {
    Initializer::VarianceScaling {
        scale,
        mode,
        distribution,
        in_axis: -2,
        out_axis: -1,
    }
}

/// Glorot (Xavier) uniform: variance `1 / fan_avg`, uniform.
pub fn glorot_uniform() -> Initializer {
    variance_scaling(1.0, FanMode::FanAvg, Distribution::Uniform)
}

/// Glorot (Xavier) normal: variance `1 / fan_avg`, truncated normal.
pub fn glorot_normal() -> Initializer {
    variance_scaling(1.0, FanMode::FanAvg, Distribution::TruncatedNormal)
}

/// LeCun uniform: variance `1 / fan_in`, uniform.
pub fn lecun_uniform() -> Initializer {
    variance_scaling(1.0, FanMode::FanIn, Distribution::Uniform)
}

/// LeCun normal: variance `1 / fan_in`, truncated normal.
pub fn lecun_normal() -> Initializer {
    variance_scaling(1.0, FanMode::FanIn, Distribution::TruncatedNormal)
}

/// He (Kaiming) uniform: variance `2 / fan_in`, uniform.
pub fn he_uniform() -> Initializer {
    variance_scaling(2.0, FanMode::FanIn, Distribution::Uniform)
}

/// He (Kaiming) normal: variance `2 / fan_in`, truncated normal.
pub fn he_normal() -> Initializer {
    variance_scaling(2.0, FanMode::FanIn, Distribution::TruncatedNormal)
}

/// A uniformly distributed orthogonal matrix times `scale`, its columns along the last axis
/// (`jax.nn.initializers.orthogonal`; JAX's default scale is 1). With more rows than columns
/// the columns are orthonormal, with fewer the rows; a tensor of higher rank is a matrix of
/// its last axis against the others.
pub fn orthogonal(scale: f64) -> Initializer {
    Initializer::Orthogonal {
        scale,
        column_axis: -1,
    }
}

pub use glorot_normal as xavier_normal;
pub use glorot_uniform as xavier_uniform;
pub use he_normal as kaiming_normal;
pub use he_uniform as kaiming_uniform;
