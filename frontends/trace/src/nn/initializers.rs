//! Parameter initializers, named and parameterized as `jax.nn.initializers`.
//!
//! ferrax has no PRNG keys yet (issue #30), so an [`Initializer`] takes a `u64` seed and
//! draws its values eagerly on the host from [`HostRng`], a documented deterministic
//! generator: the same seed, shape and dtype give the same tensor on every machine. When keys
//! land, `init` will take a key as JAX's initializers do; the distributions and their
//! parameters will stay as they are.
//!
//! The variance-scaling family follows `jax.nn.initializers.variance_scaling` exactly: fans
//! from `in_axis`/`out_axis` (default the last two axes) times the receptive field (the
//! other axes), a variance of `scale / fan`, and a truncated normal on [-2, 2] rescaled by
//! 0.8796 (its standard deviation) so that the variance is the one asked for.

use crate::Tensor;
use ferrax_ir::{DType, Shape, TensorType};
use std::panic::Location;

/// SplitMix64 (Steele, Lea and Flood, 2014): a 64-bit state advanced by the golden-ratio
/// increment and mixed by two multiply-xorshift rounds. Uniform floats take the top 53 bits
/// (`[0, 1)`); normals come in pairs from the Box-Muller transform of two uniforms. A
/// stand-in for JAX's `jax.random` until ferrax has keys (issue #30); not for cryptography.
#[derive(Clone, Debug)]
pub struct HostRng {
    state: u64,
    spare: Option<f64>,
}

impl HostRng {
    /// A generator whose stream is determined by `seed`.
    pub fn new(seed: u64) -> HostRng {
        HostRng {
            state: seed,
            spare: None,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform on `[0, 1)`, a multiple of 2^-53.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box-Muller; the second value of each pair is the next call's).
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        // 1 - u is in (0, 1], so the logarithm is finite.
        let r = (-2.0 * (1.0 - self.uniform()).ln()).sqrt();
        let theta = std::f64::consts::TAU * self.uniform();
        self.spare = Some(r * theta.sin());
        r * theta.cos()
    }
}

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
}

/// The standard deviation of N(0, 1) truncated to [-2, 2] (JAX's constant).
const TRUNCATED_STDDEV: f64 = 0.879_625_661_034_239_8;

/// Draws per element before a truncated normal gives up (its bounds hold almost no mass).
const MAX_TRIES: usize = 10_000;

impl Initializer {
    /// A tensor of `shape` and float `dtype`, drawn from [`HostRng::new(seed)`](HostRng) in
    /// row-major order (constants need no seed). Invalid requests (a random initializer for a
    /// non-float dtype, fans of a tensor of rank < 2, axes out of range, empty truncation
    /// bounds) give a failed tensor, as tensor operations do.
    #[track_caller]
    pub fn init(&self, seed: u64, shape: impl Into<Shape>, dtype: DType) -> Tensor {
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
        let n = shape.numel();
        let mut rng = HostRng::new(seed);
        let values: Result<Vec<f64>, String> = match *self {
            Initializer::Constant(_) => Ok(Vec::new()),
            Initializer::Normal { stddev } => Ok((0..n).map(|_| rng.normal() * stddev).collect()),
            Initializer::Uniform { scale } => Ok((0..n).map(|_| rng.uniform() * scale).collect()),
            Initializer::TruncatedNormal {
                stddev,
                lower,
                upper,
            } => truncated(&mut rng, n, lower, upper).map(|v| scaled(v, stddev)),
            Initializer::VarianceScaling {
                scale,
                mode,
                distribution,
                in_axis,
                out_axis,
            } => fans(shape.dims(), in_axis, out_axis).and_then(|(fan_in, fan_out)| {
                let fan = match mode {
                    FanMode::FanIn => fan_in,
                    FanMode::FanOut => fan_out,
                    FanMode::FanAvg => (fan_in + fan_out) / 2.0,
                    FanMode::FanGeoAvg => (fan_in * fan_out).sqrt(),
                };
                let variance = scale / fan;
                match distribution {
                    Distribution::TruncatedNormal => truncated(&mut rng, n, -2.0, 2.0)
                        .map(|v| scaled(v, variance.sqrt() / TRUNCATED_STDDEV)),
                    Distribution::Normal => {
                        Ok((0..n).map(|_| rng.normal() * variance.sqrt()).collect())
                    }
                    Distribution::Uniform => {
                        let limit = (3.0 * variance).sqrt();
                        Ok((0..n)
                            .map(|_| (2.0 * rng.uniform() - 1.0) * limit)
                            .collect())
                    }
                }
            }),
        };
        match values {
            Ok(v) => Tensor::from_vec(shape.clone(), v).astype(dtype),
            Err(message) => fail(format!("{self:?}: {message}")),
        }
    }
}

fn scaled(mut v: Vec<f64>, by: f64) -> Vec<f64> {
    v.iter_mut().for_each(|x| *x *= by);
    v
}

/// `n` standard normals truncated to `[lower, upper]`, by rejection.
fn truncated(rng: &mut HostRng, n: usize, lower: f64, upper: f64) -> Result<Vec<f64>, String> {
    if lower.partial_cmp(&upper) != Some(std::cmp::Ordering::Less) {
        return Err(format!("truncation bounds [{lower}, {upper}] are empty"));
    }
    (0..n)
        .map(|_| {
            (0..MAX_TRIES)
                .map(|_| rng.normal())
                .find(|z| (lower..=upper).contains(z))
                .ok_or_else(|| {
                    format!("bounds [{lower}, {upper}] hold too little of a normal's mass")
                })
        })
        .collect()
}

/// `(fan_in, fan_out)` as JAX's `_compute_fans`: the sizes of `in_axis` and `out_axis`, each
/// times the product of the other axes.
fn fans(dims: &[usize], in_axis: i64, out_axis: i64) -> Result<(f64, f64), String> {
    let axis = |a: i64| {
        let i = if a < 0 { a + dims.len() as i64 } else { a };
        usize::try_from(i)
            .ok()
            .filter(|&i| i < dims.len())
            .ok_or_else(|| {
                format!("axis {a} is out of range for shape {dims:?} (fans need rank >= 2)")
            })
    };
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

pub use glorot_normal as xavier_normal;
pub use glorot_uniform as xavier_uniform;
pub use he_normal as kaiming_normal;
pub use he_uniform as kaiming_uniform;
