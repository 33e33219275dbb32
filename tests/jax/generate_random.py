"""Reference values for ferrax::random (tests/random.rs), computed with JAX's default
threefry2x32 generator (jax_threefry_partitionable on, JAX's default since 0.5).

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_random.py > tests/jax/random_reference.json

Keys are recorded as their raw u32 data (`jax.random.key_data`), integers as integers and
floats as each element's value and, for exact comparisons, its bit pattern. The f64 cases
are computed with 64-bit mode enabled.
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import random


def data(x):
    x = np.asarray(x)
    out = {"shape": list(x.shape), "dtype": str(x.dtype)}
    if x.dtype == np.bool_:
        out["data"] = [bool(v) for v in x.ravel()]
    elif np.issubdtype(x.dtype, np.integer):
        out["data"] = [int(v) for v in x.ravel()]
    else:
        out["data"] = [float(v) for v in x.astype(np.float64).ravel()]
        # The exact bit patterns too: JSON readers may round a decimal f64 differently.
        width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
        out["bits"] = [int(v) for v in x.view(width).ravel()]
    return out


def key_data(k):
    return data(random.key_data(k))


cases = []


def case(name, seed, value, **attrs):
    cases.append({"name": name, "seed": seed, **attrs, "value": value})


for seed in [0, 42, 2**32 + 7, 2**63 - 1]:
    case("key", seed, key_data(random.key(seed)))

for seed, num in [(0, 2), (42, 5), (7, 1)]:
    case("split", seed, key_data(random.split(random.key(seed), num)), num=num)
case("split_shape", 3, key_data(random.split(random.key(3), (2, 3))), shape=[2, 3])

for seed, d in [(0, 7), (3, 2**32 - 1), (11, 0)]:
    case("fold_in", seed, key_data(random.fold_in(random.key(seed), d)), data=d)

for seed, shape in [(0, [10]), (1, [3, 4]), (7, [2, 3, 5]), (5, [])]:
    case("bits", seed, data(random.bits(random.key(seed), tuple(shape))), shape=shape)

for seed, shape, dtype, lo, hi in [
    (0, [1000], "float32", 0.0, 1.0),
    (1, [4, 25], "float32", -2.0, 3.0),
    (2, [64], "bfloat16", 0.0, 1.0),
    (3, [64], "float16", 0.0, 1.0),
]:
    u = random.uniform(random.key(seed), tuple(shape), jnp.dtype(dtype), lo, hi)
    case("uniform", seed, data(u), shape=shape, dtype=dtype, minval=lo, maxval=hi)

for seed, shape, dtype in [(0, [1000], "float32"), (4, [8, 8], "float32")]:
    n = random.normal(random.key(seed), tuple(shape), jnp.dtype(dtype))
    case("normal", seed, data(n), shape=shape, dtype=dtype)

case("truncated_normal", 5,
     data(random.truncated_normal(random.key(5), -1.5, 2.0, (200,), jnp.float32)),
     shape=[200], lower=-1.5, upper=2.0)
case("bernoulli", 6, data(random.bernoulli(random.key(6), 0.3, (200,))), shape=[200], p=0.3)
case("gumbel", 8, data(random.gumbel(random.key(8), (200,), jnp.float32)), shape=[200])

logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]], np.float32))
case("categorical", 9, data(random.categorical(random.key(9), logits, axis=-1, shape=(50, 2))),
     logits=data(logits), shape=[50, 2])

for seed, shape, lo, hi, dtype in [
    (10, [300], 0, 10, "int32"),
    (11, [300], -5, 1000003, "int32"),
    (12, [50], 3, 3, "int32"),
    (13, [100], 0, 256, "uint8"),
]:
    r = random.randint(random.key(seed), tuple(shape), lo, hi, jnp.dtype(dtype))
    case("randint", seed, data(r), shape=shape, minval=lo, maxval=hi, dtype=dtype)

case("permutation", 14, data(random.permutation(random.key(14), 20)), n=20)
# 2000 elements take two rounds of sorting.
case("permutation", 18, data(random.permutation(random.key(18), 2000)), n=2000)
grid = jnp.arange(24, dtype=jnp.float32).reshape(4, 6)
case("permutation_of", 16, data(random.permutation(random.key(16), grid, axis=1)), axis=1,
     x=data(grid))
case("shuffle", 17, data(random.permutation(random.key(17), grid, axis=0, independent=True)),
     axis=0, x=data(grid))

with jax.enable_x64(True):
    u = random.uniform(random.key(15), (100,), jnp.float64)
    case("uniform", 15, data(u), shape=[100], dtype="float64", minval=0.0, maxval=1.0)

json.dump({"generator": "tests/jax/generate_random.py", "jax": jax.__version__,
           "cases": cases}, sys.stdout, separators=(",", ":"))
print()
