"""Reference draws for ferrax::random's distributions built on uniform, normal, exponential
and gamma draws, Poisson and binomial (tests/random_more.rs), computed with JAX's default threefry2x32
generator, so the same key gives the same values.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_random_more.py > tests/jax/random_more_reference.json
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import random

# f32 draws as JAX draws them by default; f64 ones with 64-bit types enabled (the only JAX
# that draws them), where Python numbers are f64 too (a Rademacher sign's uniform draw).

MEAN = np.array([0.5, -1.0, 2.0])
COV = np.array([[2.0, 0.3, -0.4], [0.3, 1.0, 0.2], [-0.4, 0.2, 0.7]])
LAM = np.array([0.0, 0.5, 3.0, 9.9, 10.0, 25.0, 300.0, 1e4])


def enc(x):
    return [float(v) for v in np.asarray(x, np.float64).ravel()]


cases = []


def case(name, dtype, seed, value):
    cases.append({"name": name, "dtype": dtype, "seed": seed, "value": enc(value)})


def draws(dtype):
    dt = jnp.dtype(dtype)
    k = random.key
    case("cauchy", dtype, 1, random.cauchy(k(1), (5,), dt))
    case("lognormal", dtype, 2, random.lognormal(k(2), 0.7, (5,), dt))
    case("pareto", dtype, 3, random.pareto(k(3), 2.5, (5,), dt))
    case("weibull_min", dtype, 4, random.weibull_min(k(4), 1.5, 0.8, (5,), dt))
    case("rayleigh", dtype, 5, random.rayleigh(k(5), 2.0, (5,), dt))
    case("wald", dtype, 6, random.wald(k(6), 1.3, (6,), dt))
    case("geometric", dtype, 7, random.geometric(k(7), jnp.asarray(0.3, dt), (6,), jnp.int32))
    case("triangular", dtype, 8, random.triangular(k(8), -1.0, 0.5, 2.0, (6,), dt))
    case("maxwell", dtype, 9, random.maxwell(k(9), (5,), dt))
    case("double_sided_maxwell", dtype, 10, random.double_sided_maxwell(k(10), 0.5, 2.0, (5,), dt))
    case("t", dtype, 11, random.t(k(11), 3.5, (5,), dt))
    case("chisquare", dtype, 12, random.chisquare(k(12), 2.5, (5,), dt))
    case("f", dtype, 13, random.f(k(13), 3.0, 7.0, (5,), dt))
    case("generalized_normal", dtype, 14, random.generalized_normal(k(14), 1.5, (5,), dt))
    case("ball", dtype, 15, random.ball(k(15), 3, 2.0, (4,), dt))
    case("orthogonal", dtype, 16, random.orthogonal(k(16), 3, (2,), dt))
    case("orthogonal_wide", dtype, 17, random.orthogonal(k(17), 3, (), dt, m=5))
    for method in ["cholesky", "svd", "eigh"]:
        case("multivariate_normal_" + method, dtype, 18,
             random.multivariate_normal(k(18), jnp.asarray(MEAN, dt), jnp.asarray(COV, dt), (4,), dt, method))


draws("float32")
with jax.enable_x64(True):
    draws("float64")
case("poisson", "int32", 19, random.poisson(random.key(19), jnp.asarray(LAM, jnp.float32), (8,), jnp.int32))
case("poisson_shape", "int32", 20, random.poisson(random.key(20), 4.0, (3, 5), jnp.int32))
case("poisson_large", "int32", 21, random.poisson(random.key(21), 60.0, (400,), jnp.int32))
# Binomial counts are floats that may be NaN or infinite: those as strings, which JSON lacks.
BINOMIAL_N = np.array([10.0, 100.0, 1000.0, -1.0, np.nan, np.inf, 5.5, 0.0, 30.0, 2e4, 40.0, 40.0, 12.0])
BINOMIAL_P = np.array([0.3, 0.7, 0.5, 0.5, 0.5, 0.5, 0.9, 0.5, 0.0, 0.999, 1.0, np.nan, -0.1])


def counts(x):
    return [v if np.isfinite(v) else str(v) for v in np.asarray(x, np.float64).ravel().tolist()]


binomial_cases = []


def binomial_case(name, dtype, seed, value):
    binomial_cases.append({"name": name, "dtype": dtype, "seed": seed, "value": counts(value)})


def binomials(dtype):
    dt = jnp.dtype(dtype)
    k = random.key
    binomial_case("edges", dtype, 22, random.binomial(
        k(22), jnp.asarray(BINOMIAL_N, dt), jnp.asarray(BINOMIAL_P, dt), (13,), dt))
    binomial_case("inversion", dtype, 23, random.binomial(k(23), 20.0, 0.4, (3, 5), dt))
    binomial_case("inversion_complement", dtype, 24, random.binomial(k(24), 20.0, 0.6, (20,), dt))
    binomial_case("rejection", dtype, 25, random.binomial(k(25), 500.0, 0.3, (300,), dt))
    binomial_case("rejection_complement", dtype, 26, random.binomial(k(26), 47.0, 0.55, (100,), dt))


binomials("float32")
with jax.enable_x64(True):
    binomials("float64")
json.dump({"jax": jax.__version__, "mean": enc(MEAN), "cov": enc(COV), "lam": enc(LAM),
           "binomial_n": counts(BINOMIAL_N), "binomial_p": counts(BINOMIAL_P),
           "cases": cases, "binomial_cases": binomial_cases}, sys.stdout)
sys.stdout.write("\n")
