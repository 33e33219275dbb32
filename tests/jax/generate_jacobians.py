"""Reference Jacobians and Hessians of functions of a parameter dictionary
(tests/jacobian_trees.rs), computed with jax.jacfwd, jax.jacrev and jax.hessian in float64.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_jacobians.py > tests/jax/jacobians_reference.json
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(31)
X = rng.normal(size=(4, 2))
PARAMS = {"b": rng.normal(size=(3,)), "w": rng.normal(size=(2, 3))}


def layer(p):
    return jnp.tanh(X @ p["w"] + p["b"])


def loss(p):
    return jnp.sum(layer(p) ** 2 * jnp.arange(1.0, 4.0)) + jnp.sum(p["w"] ** 3)


def enc(tree):
    return {k: {"shape": list(np.shape(v)), "data": [float(x) for x in np.ravel(v)]} for k, v in tree.items()}


out = {
    "x": enc({"x": X})["x"],
    "params": enc(PARAMS),
    "jacfwd": enc(jax.jacfwd(layer)(PARAMS)),
    "jacrev": enc(jax.jacrev(layer)(PARAMS)),
    "hessian": {k: enc(v) for k, v in jax.hessian(loss)(PARAMS).items()},
}
json.dump(out, sys.stdout)
sys.stdout.write("\n")
