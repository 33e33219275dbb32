"""Reference values for ferrax's dot-product attention (tests/attention.rs), computed with JAX
in float32: jax.nn.dot_product_attention (implementation "xla") on queries [B, T, H, D] and
keys and values [B, S, H, D], causal or not, with the default and an explicit scale, over as
many keys as queries, fewer and more.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_attention.py > tests/jax/attention_reference.json

Each case records its operands and output, and the gradients of `sum(output * weights)`
(weights a fixed random tensor of the output's shape) with respect to q, k and v. Products
run at HIGHEST precision, so XLA sums in float32 as ferrax does.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_default_matmul_precision", "highest")
rng = np.random.default_rng(20261129)


def normal(*shape):
    return rng.normal(size=shape).astype(np.float32)


def tensor(x):
    x = np.asarray(x)
    return {"shape": list(x.shape), "data": [float(str(np.float32(v))) for v in x.ravel()]}


CASES = [
    # name, B, T, S, H, D, causal, scale
    ("causal_square", 2, 7, 7, 3, 4, True, None),
    ("causal_fewer_keys", 1, 6, 4, 2, 8, True, None),
    ("causal_more_keys", 2, 3, 5, 1, 4, True, 0.7),
    ("plain", 2, 5, 6, 2, 4, False, None),
    ("plain_scaled", 1, 4, 4, 4, 2, False, 0.25),
]

cases = []
for name, b, t, s, h, d, causal, scale in CASES:
    q, k, v = normal(b, t, h, d), normal(b, s, h, d), normal(b, s, h, d)
    weights = normal(b, t, h, d)

    def attend(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, scale=scale, is_causal=causal)

    out = attend(q, k, v)
    dq, dk, dv = jax.grad(lambda q, k, v: jnp.sum(attend(q, k, v) * weights), (0, 1, 2))(q, k, v)
    cases.append({
        "name": name, "causal": causal, "scale": scale,
        "q": tensor(q), "k": tensor(k), "v": tensor(v), "weights": tensor(weights),
        "out": tensor(out), "dq": tensor(dq), "dk": tensor(dk), "dv": tensor(dv),
    })

print(json.dumps({"jax": jax.__version__, "cases": cases}))
