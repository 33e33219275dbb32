"""Reference draws for ferrax::random's gamma, loggamma, beta and dirichlet and their
derivatives with respect to the shape parameters (tests/random_gamma.rs), computed with JAX's
default threefry2x32 generator: values for given keys (the rejection loops' key splits and
accept tests must match JAX's for the draws to), and JAX's implicit reparameterization
gradients (`random_gamma_grad`).

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_gamma.py > tests/jax/gamma_reference.json
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import random

jax.config.update("jax_enable_x64", True)

A = np.array([0.05, 0.3, 0.9, 1.0, 1.7, 4.0, 25.0, 300.0])
B = np.array([2.5, 0.4, 1.0, 7.0, 0.2, 3.0, 1.5, 60.0])
ALPHA = np.array([[0.2, 1.0, 3.5], [5.0, 0.7, 0.05]])


def enc(x):
    return [float(v) for v in np.asarray(x, np.float64).ravel()]


cases = []
for dtype in ["float32", "float64"]:
    dt = jnp.dtype(dtype)
    a, b, alpha = (jnp.asarray(v, dt) for v in (A, B, ALPHA))
    w = jnp.arange(1.0, 9.0, dtype=dt)
    cases.append({"name": "gamma", "dtype": dtype, "seed": 3, "value": enc(random.gamma(random.key(3), a, dtype=dt)),
                  "grad": enc(jax.grad(lambda a: jnp.sum(random.gamma(random.key(3), a, dtype=dt) * w))(a))})
    cases.append({"name": "gamma_shape", "dtype": dtype, "seed": 11, "value": enc(random.gamma(random.key(11), a[5], (3, 4), dtype=dt))})
    cases.append({"name": "loggamma", "dtype": dtype, "seed": 5, "value": enc(random.loggamma(random.key(5), a, dtype=dt)),
                  "grad": enc(jax.grad(lambda a: jnp.sum(random.loggamma(random.key(5), a, dtype=dt) * w))(a))})
    cases.append({"name": "beta", "dtype": dtype, "seed": 7, "value": enc(random.beta(random.key(7), a, b, dtype=dt)),
                  "grad": enc(jax.grad(lambda a: jnp.sum(random.beta(random.key(7), a, b, dtype=dt) * w))(a))})
    cases.append({"name": "dirichlet", "dtype": dtype, "seed": 9, "value": enc(random.dirichlet(random.key(9), alpha, dtype=dt))})
    cases.append({"name": "dirichlet_shape", "dtype": dtype, "seed": 2, "value": enc(random.dirichlet(random.key(2), alpha[0], (4,), dtype=dt))})
json.dump({"jax": jax.__version__, "a": enc(A), "b": enc(B), "alpha": enc(ALPHA), "cases": cases}, sys.stdout)
sys.stdout.write("\n")
