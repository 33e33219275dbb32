"""Reference values and gradients from JAX for the indexing ops (tests/jax_reference.rs).

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_indexing.py > tests/jax/indexing_reference.json
(needs jax and numpy). Each case names a function of float inputs (indices are constants,
given under "indices"); the outputs are the function's value followed by its gradient with
respect to every input. Repeated indices appear only where JAX's result does not depend on
the order updates are applied in.
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(20261127)


def arr(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape)


def weights(shape):
    return np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape)


def weighted(y):
    return (y * weights(y.shape)).sum()


IDX = {
    "rows": np.array([[1, 3, 1], [-1, 0, 2]]),
    "cols": np.array([[2, 0], [1, 1], [0, 2], [2, -2]]),
    "scatter": np.array([1, 9, 3, -1]),
    "repeated": np.array([1, 1, 4, 1]),
    "starts": np.array([3, -4]),
}


def embedding(table, pos):
    return weighted(jnp.tanh(table[IDX["rows"]] + pos))


def gather_rows_clamped(x):
    # Reads clamp out-of-range indices; mode="clip" clamps them in the gradient too, as
    # ferrax does (x[i]'s default mode promises in-bounds indices and drops such gradients).
    return weighted(jnp.sin(x.at[np.array([0, 7, -1, 2])].get(mode="clip")))


def take_along(x):
    return weighted(jnp.exp(jnp.take_along_axis(x, IDX["cols"], axis=1)))


def set_rows(x, u):
    return weighted(x.at[IDX["scatter"]].set(u) ** 2)


def add_rows(x, u):
    return weighted(jnp.sin(x.at[IDX["repeated"]].add(u)))


def mul_rows(x, u):
    return weighted(x.at[IDX["scatter"]].mul(u, unique_indices=True))


def max_rows(x, u):
    return weighted(x.at[IDX["repeated"]].max(u))


def min_rows(x, u):
    return weighted(x.at[IDX["scatter"]].min(u))


def dynamic(x, u):
    i, j = IDX["starts"]
    s = jax.lax.dynamic_slice(x, (i, j), (2, 3))
    w = jax.lax.dynamic_update_slice(x, u * u, (j, i))
    return weighted(jnp.sin(s)) + weighted(jnp.exp(w))


CASES = {
    "embedding": (embedding, lambda: [arr(4, 3), arr(3, 3)]),
    "gather_rows_clamped": (gather_rows_clamped, lambda: [arr(5, 3)]),
    "take_along_axis": (take_along, lambda: [arr(4, 3)]),
    "scatter_set": (set_rows, lambda: [arr(5, 2), arr(4, 2)]),
    "scatter_add": (add_rows, lambda: [arr(5, 2), arr(4, 2)]),
    "scatter_mul": (mul_rows, lambda: [arr(5, 2, lo=0.5, hi=1.5), arr(4, 2, lo=0.5, hi=1.5)]),
    "scatter_max": (max_rows, lambda: [arr(5, 2), arr(4, 2)]),
    "scatter_min": (min_rows, lambda: [arr(5, 2), arr(4, 2)]),
    "dynamic_slices": (dynamic, lambda: [arr(4, 5), arr(2, 3)]),
}


def tensor(x):
    x = np.asarray(x, dtype=np.float64)
    return {"shape": list(x.shape), "data": x.ravel().tolist()}


cases = []
for name, (f, make) in CASES.items():
    inputs = make()
    value, grads = jax.value_and_grad(f, argnums=tuple(range(len(inputs))))(*inputs)
    cases.append(
        {
            "name": name,
            "inputs": [tensor(x) for x in inputs],
            "outputs": [tensor(value)] + [tensor(g) for g in grads],
        }
    )
out = {
    "generator": "tests/jax/generate_indexing.py",
    "jax": jax.__version__,
    "indices": {k: v.tolist() for k, v in IDX.items()},
    "cases": cases,
}
json.dump(out, sys.stdout, indent=1)
sys.stdout.write("\n")
