"""Reference draws for ferrax::random's exponential, laplace, logistic and rademacher
and choice (tests/random_distributions.rs), computed with JAX's default threefry2x32 generator.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_distributions.py > tests/jax/distributions_reference.json
The f64 cases are computed with 64-bit mode enabled, Rademacher's in the default mode.
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import random

jax.config.update("jax_enable_x64", True)

cases = []


def record(name, seed, shape, dtype):
    f = getattr(random, name)
    x = np.asarray(f(random.key(seed), shape, dtype=jnp.dtype(dtype)))
    cases.append({
        "name": name,
        "seed": seed,
        "shape": list(shape),
        "dtype": dtype,
        "data": [float(v) for v in x.astype(np.float64).ravel()],
    })


for name in ["exponential", "laplace", "logistic"]:
    record(name, 0, (257,), "float32")
    record(name, 9, (3, 5), "float64")
# Rademacher's bernoulli(0.5) draws uniforms of 0.5's type: f32 in JAX's default mode.
jax.config.update("jax_enable_x64", False)
record("rademacher", 0, (257,), "float32")
record("rademacher", 4, (6,), "int32")
P = np.array([0.1, 0.05, 0.2, 0.15, 0.1, 0.05, 0.2, 0.15], np.float32)
for seed, shape, replace, p in [(1, (5,), True, None), (2, (2, 3), False, None),
                                 (3, (7,), True, P), (4, (4,), False, P)]:
    x = np.asarray(random.choice(random.key(seed), 8, shape, replace=replace, p=p))
    cases.append({
        "name": "choice",
        "seed": seed,
        "shape": list(shape),
        "replace": replace,
        "p": None if p is None else [float(v) for v in p],
        "data": [int(v) for v in x.ravel()],
    })
json.dump({"jax": jax.__version__, "cases": cases}, sys.stdout)
sys.stdout.write("\n")
