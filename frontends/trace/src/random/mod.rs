//! Random numbers with JAX's design and bits (`jax.random`): keys are values ([`Key`]),
//! split and folded purely, and every sampler is a pure function of a key and a shape, so
//! results are the same across runs, backends and thread counts, inside `jit` or not.
//!
//! The generator is threefry2x32 with JAX's default counters, so the same key and shape give
//! the bits JAX gives (`tests/random.rs` checks them against values JAX generated). Samplers
//! trace to `u32` elementwise IR over an iota: compiled, a draw is one fused kernel.

mod binomial;
mod distributions;
mod gamma;
mod integers;
mod key;
mod permutation;
mod poisson;
mod sample;
mod threefry;
mod transforms;

pub use binomial::binomial;
pub use distributions::{choice, exponential, laplace, logistic, rademacher};
pub use gamma::{beta, dirichlet, gamma, loggamma};
pub use integers::randint;
pub use key::{fold_in, key, split, split2, Key};
pub use permutation::{permutation, permutation_of, shuffle};
pub use poisson::poisson;
pub use sample::{
    bernoulli, bits, categorical, gumbel, normal, truncated_normal, uniform, uniform_in,
};
pub use transforms::{
    ball, cauchy, chisquare, double_sided_maxwell, f, generalized_normal, geometric, lognormal,
    maxwell, multivariate_normal, orthogonal, pareto, rayleigh, t, triangular, wald, weibull_min,
    CovarianceFactor,
};
