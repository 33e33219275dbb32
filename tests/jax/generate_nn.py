"""Reference values for ferrax::nn (tests/nn.rs), computed with JAX in float32.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_nn.py > tests/jax/nn_reference.json
(needs jax and numpy; flax and optax are not needed). Each case applies one layer, written
here as flax/optax compute it in jax.numpy, to small fixed inputs, and records its output and
the gradient of `sum(output * weights)` (weights a fixed random tensor of the output's shape)
with respect to every float input. `gelu_sweep` holds jax.nn.gelu (both forms), its
derivative and lax.erf over a dense sweep of [-6, 6] in steps of 0.02, and the same three
functions computed in f64 with Python's math.erf/erfc and rounded to f32 ("*_true"), for the
error bounds of ferrax's composite erf.
"""
import json
import math
import sys

import jax
import jax.numpy as jnp
import numpy as np

rng = np.random.default_rng(20270227)


def normal(*shape, scale=1.0):
    return (rng.normal(size=shape) * scale).astype(np.float32)


def layer_norm(x, g, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + eps) * g + b


def rms_norm(x, g, eps=1e-6):
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + eps) * g


def attention(x, w_qkv, b_qkv, w_o, b_o, heads=2):
    # As ../shared/bench/jax_reference.py's gpt_loss.
    B, T, D = x.shape
    qkv = x @ w_qkv + b_qkv
    q, k, v = [t.reshape(B, T, heads, D // heads).transpose(0, 2, 1, 3)
               for t in jnp.split(qkv, 3, axis=-1)]
    att = (q @ k.transpose(0, 1, 3, 2)) / np.sqrt(D // heads)
    mask = jnp.tril(jnp.ones((T, T), bool))
    att = jax.nn.softmax(jnp.where(mask, att, -jnp.inf), axis=-1)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    return y @ w_o + b_o


def cross_entropy(logits, labels):
    # optax.softmax_cross_entropy_with_integer_labels
    logits = logits - jax.lax.stop_gradient(logits.max(-1, keepdims=True))
    label_logits = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return jnp.log(jnp.exp(logits).sum(-1)) - label_logits


def accuracy(logits, labels):
    return (jnp.argmax(logits, -1) == labels).astype(jnp.float32).mean()


LABELS = np.array([[0, 4, 2], [3, 3, 1]], np.int32)
CASES = {
    "linear": (lambda x, w, b: x @ w + b,
               dict(x=normal(2, 3, 4), w=normal(4, 5), b=normal(5))),
    "linear_no_bias": (lambda x, w: x @ w, dict(x=normal(3, 4), w=normal(4, 2))),
    "embedding": (lambda table, ids: table[ids],
                  dict(table=normal(6, 3), ids=np.array([[1, 5, 1], [0, 2, 4]], np.int32))),
    "layer_norm": (layer_norm, dict(x=normal(3, 6, scale=2.0) + 1.0, g=normal(6), b=normal(6))),
    "rms_norm": (rms_norm, dict(x=normal(3, 6), g=normal(6))),
    "gelu_tanh": (lambda x: jax.nn.gelu(x, approximate=True), dict(x=normal(4, 5, scale=2.0))),
    "gelu_exact": (lambda x: jax.nn.gelu(x, approximate=False), dict(x=normal(4, 5, scale=2.0))),
    "silu": (jax.nn.silu, dict(x=normal(4, 5, scale=2.0))),
    "causal_self_attention": (attention, dict(
        x=normal(2, 4, 8), w_qkv=normal(8, 24, scale=0.5), b_qkv=normal(24, scale=0.1),
        w_o=normal(8, 8, scale=0.5), b_o=normal(8, scale=0.1))),
    "softmax_cross_entropy_with_integer_labels": (cross_entropy, dict(
        logits=normal(2, 3, 5, scale=3.0), labels=LABELS)),
    "accuracy": (accuracy, dict(logits=normal(2, 3, 5), labels=LABELS)),
}


def tensor(x):
    x = np.asarray(x)
    out = {"shape": list(x.shape)}
    if x.dtype == np.int32:
        out["dtype"] = "i32"
        out["data"] = [int(v) for v in x.ravel()]
    else:
        # The shortest decimal that reads back as the same float32.
        out["data"] = [float(str(np.float32(v))) for v in x.ravel()]
    return out


cases = []
for name, (f, inputs) in CASES.items():
    names = list(inputs)
    args = [jnp.asarray(v) for v in inputs.values()]
    out = f(*args)
    weights = normal(*out.shape)
    floats = [i for i, v in enumerate(args) if v.dtype == jnp.float32]
    weighted = lambda *a: (f(*a) * weights).sum()
    grads = jax.grad(weighted, argnums=floats)(*args) if name != "accuracy" else []
    cases.append({
        "name": name,
        "inputs": {k: tensor(v) for k, v in inputs.items()},
        "output": tensor(out),
        "weights": tensor(weights),
        "grads": {names[i]: tensor(g) for i, g in zip(floats, grads)},
    })

x = np.linspace(-6, 6, 601).astype(np.float32)
xd = [float(v) for v in x]
true = lambda f: tensor(np.array([f(v) for v in xd], np.float64).astype(np.float32))
gelu_exact = lambda x: jax.nn.gelu(x, approximate=False)
sweep = {
    "x": tensor(x),
    "gelu_exact": tensor(gelu_exact(x)),
    "gelu_exact_grad": tensor(jax.vmap(jax.grad(gelu_exact))(x)),
    "gelu_tanh": tensor(jax.nn.gelu(x, approximate=True)),
    "erf": tensor(jax.lax.erf(x)),
    "gelu_exact_true": true(lambda v: 0.5 * v * math.erfc(-v / math.sqrt(2))),
    "gelu_exact_grad_true": true(lambda v: 0.5 * math.erfc(-v / math.sqrt(2))
                                 + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi)),
    "erf_true": true(math.erf),
}
out = {"generator": "tests/jax/generate_nn.py", "jax": jax.__version__, "cases": cases,
       "gelu_sweep": sweep}
json.dump(out, sys.stdout, separators=(",", ":"))
sys.stdout.write("\n")
