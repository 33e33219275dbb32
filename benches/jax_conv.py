"""JAX's side of ferrax-bench's conv2d_3x3 rows (not in ../shared/bench/workloads.md): a CNN
layer, [32, 64, 32, 32] (NCHW) by [64, 64, 3, 3] (OIHW), SAME, and the gradient of the sum of
its squares with respect to both operands. Prints JSON lines in workloads.md's format, so
compare.py pairs them:

  python3 ../shared/bench/compare.py "./target/release/ferrax-bench --only conv2d_3x3,conv2d_3x3_grad --reps 10" "python3 benches/jax_conv.py"
"""
import json
import time

import jax
import numpy as np
from jax import lax

rng = np.random.default_rng(0)
x = jax.numpy.asarray(rng.normal(size=(32, 64, 32, 32)).astype(np.float32))
k = jax.numpy.asarray(rng.normal(size=(64, 64, 3, 3)).astype(np.float32))
flops = 2.0 * 32 * 64 * 64 * 9 * 1024


def conv(x, k):
    return lax.conv_general_dilated(x, k, (1, 1), "SAME")


def timed(f, reps=10):
    jax.block_until_ready(f(x, k))
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        jax.block_until_ready(f(x, k))
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2], times[0]


rows = [
    ("conv2d_3x3", jax.jit(conv), flops),
    ("conv2d_3x3_grad", jax.jit(jax.grad(lambda x, k: (conv(x, k) ** 2).sum(), argnums=(0, 1))), 3 * flops),
]
for name, f, n in rows:
    median, best = timed(f)
    print(json.dumps({"name": name, "impl": "jax-cpu", "seconds": median, "min_seconds": best,
                      "gflops": n / best / 1e9}))
