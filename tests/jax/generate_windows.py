"""Reference values for ferrax's window reductions (tests/windows.rs), computed with JAX in
float32: lax.reduce_window (sum, max, min) with strides, padding and dilations; jnp.cumsum,
jnp.cumprod, lax.cummax and lax.cummin; and flax.linen's max_pool and avg_pool, written
here as flax computes them with lax.reduce_window (flax is not needed).

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_windows.py > tests/jax/windows_reference.json

Each case records its input, its output, and the gradient of `sum(output * weights)` (weights a
fixed random tensor of the output's shape) with respect to the input, or null where JAX has
no gradient (maxima and minima over dilated windows). Inputs are normal draws,
so no window holds a tie (ferrax splits a maximum's gradient between ties, JAX gives it to
the first).
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

rng = np.random.default_rng(20261128)


def normal(*shape):
    return rng.normal(size=shape).astype(np.float32)


def tensor(x):
    x = np.asarray(x)
    # The shortest decimal that reads back as the same float32; infinities (windows of
    # padding alone) as the strings "inf" and "-inf", which JSON lacks.
    value = lambda v: float(str(np.float32(v))) if np.isfinite(v) else str(np.float32(v))
    return {"shape": list(x.shape), "data": [value(v) for v in x.ravel()]}


def reduce_window(op, init):
    def f(x, window, strides, padding, base=None, dilation=None):
        return lax.reduce_window(x, np.float32(init), op, window, strides, padding,
                                 base_dilation=base, window_dilation=dilation)
    return f


def pool(x, init, op, window, strides, padding):
    # flax.linen.pooling.pool for inputs (batch, spatial..., features).
    dims = (1,) + window + (1,)
    strides = (1,) + strides + (1,)
    if not isinstance(padding, str):
        padding = ((0, 0),) + tuple(padding) + ((0, 0),)
    return lax.reduce_window(x, np.float32(init), op, dims, strides, padding)


def avg_pool(x, window, strides, padding, count_include_pad):
    y = pool(x, 0.0, lax.add, window, strides, padding)
    if count_include_pad:
        return y / np.prod(window)
    ones = jnp.ones(x.shape[:-1] + (1,), x.dtype)
    return y / pool(ones, 0.0, lax.add, window, strides, padding)


SUM, MAX, MIN = reduce_window(lax.add, 0.0), reduce_window(lax.max, -np.inf), \
    reduce_window(lax.min, np.inf)
X = normal(5, 6)
IMAGE = normal(2, 6, 5, 3)
CASES = [
    # (name, function of x, input, description for the Rust side)
    ("sum_valid", lambda x: SUM(x, (2, 3), (1, 1), "VALID"), X,
     {"op": "sum", "window": [2, 3], "strides": [1, 1], "padding": "valid"}),
    ("sum_strided_same", lambda x: SUM(x, (3, 2), (2, 2), "SAME"), X,
     {"op": "sum", "window": [3, 2], "strides": [2, 2], "padding": "same"}),
    ("max_explicit", lambda x: MAX(x, (2, 2), (1, 2), ((1, 0), (2, 1))), X,
     {"op": "max", "window": [2, 2], "strides": [1, 2], "padding": [[1, 0], [2, 1]]}),
    ("min_dilated", lambda x: MIN(x, (2, 2), (1, 1), "VALID", (2, 1), (1, 2)), X,
     {"op": "min", "window": [2, 2], "strides": [1, 1], "padding": "valid",
      "base_dilation": [2, 1], "window_dilation": [1, 2]}),
    ("max_same_dilated", lambda x: MAX(x, (3, 2), (2, 1), "SAME", None, (2, 2)), X,
     {"op": "max", "window": [3, 2], "strides": [2, 1], "padding": "same",
      "window_dilation": [2, 2]}),
    ("cumsum_0", lambda x: jnp.cumsum(x, 0), X, {"op": "cumsum", "axis": 0}),
    ("cumsum_1", lambda x: jnp.cumsum(x, 1), X, {"op": "cumsum", "axis": 1}),
    ("cumprod_1", lambda x: jnp.cumprod(x, 1), X, {"op": "cumprod", "axis": 1}),
    ("cummax_0", lambda x: lax.cummax(x, 0), X, {"op": "cummax", "axis": 0}),
    ("cummin_1", lambda x: lax.cummin(x, 1), X, {"op": "cummin", "axis": 1}),
    ("cumsum_long", lambda x: jnp.cumsum(x, 0), normal(37), {"op": "cumsum", "axis": 0}),
    ("max_pool_2x2", lambda x: pool(x, -np.inf, lax.max, (2, 2), (2, 2), "VALID"), IMAGE,
     {"op": "max_pool", "window": [2, 2], "strides": [2, 2], "padding": "valid"}),
    ("max_pool_same", lambda x: pool(x, -np.inf, lax.max, (3, 3), (1, 1), "SAME"), IMAGE,
     {"op": "max_pool", "window": [3, 3], "strides": [1, 1], "padding": "same"}),
    ("avg_pool_2x2", lambda x: avg_pool(x, (2, 2), (2, 2), "VALID", True), IMAGE,
     {"op": "avg_pool", "window": [2, 2], "strides": [2, 2], "padding": "valid",
      "count_include_pad": True}),
    ("avg_pool_same_exclude", lambda x: avg_pool(x, (3, 2), (2, 1), "SAME", False), IMAGE,
     {"op": "avg_pool", "window": [3, 2], "strides": [2, 1], "padding": "same",
      "count_include_pad": False}),
]

cases = []
for name, f, x, spec in CASES:
    out = f(jnp.asarray(x))
    weights = normal(*out.shape)
    try:
        grad = tensor(jax.grad(lambda x: (f(x) * weights).sum())(jnp.asarray(x)))
    except NotImplementedError:
        # JAX has no VJP for a maximum or minimum over dilated windows; the Rust side checks
        # ferrax's by finite differences.
        grad = None
    cases.append({"name": name, "spec": spec, "input": tensor(x), "output": tensor(out),
                  "weights": tensor(weights), "grad": grad})

json.dump({"generator": "tests/jax/generate_windows.py", "jax": jax.__version__,
           "cases": cases}, sys.stdout, separators=(",", ":"))
sys.stdout.write("\n")
