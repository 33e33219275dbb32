"""Reference values from JAX for tests/vmap.rs: per-example gradients (vmap of grad), vmap
with non-leading and unbatched axes, jacfwd, jacrev and their composition, in f64.

Run: PYTHONPATH=/tmp/jaxsite python3 tests/jax/generate_vmap.py  (jax 0.10.2)
Writes tests/jax/vmap_reference.json: each case's inputs and JAX's outputs, as
{"shape": [...], "data": [...]} (row-major).
"""
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(20261127)


def arr(*shape):
    return rng.uniform(-1.0, 1.0, size=shape)


def enc(x):
    x = np.asarray(x, dtype=np.float64)
    return {"shape": list(x.shape), "data": x.reshape(-1).tolist()}


def mlp_loss(ps, x, y):
    for w, b in ps[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = ps[-1]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(x @ w + b) * y, axis=-1))


cases = {}

# Per-example gradients of an MLP 3 -> 5 -> 4 (w15's form: in_axes=(None, 0, 0)).
ps = [(arr(3, 5), arr(5)), (arr(5, 4), arr(4))]
x = arr(6, 3)
y = np.eye(4)[np.arange(6) % 4]
one = lambda p, x, y: mlp_loss(p, x[None], y[None])
g = jax.vmap(jax.grad(one), in_axes=(None, 0, 0))(ps, x, y)
cases["per_example_grads"] = {
    "inputs": [enc(ps[0][0]), enc(ps[0][1]), enc(ps[1][0]), enc(ps[1][1]), enc(x), enc(y)],
    "outputs": [enc(g[0][0]), enc(g[0][1]), enc(g[1][0]), enc(g[1][1])],
}

# A batch along axis 1 of the first argument, the second unbatched, stacked along axis 1.
a, b = arr(2, 4, 3), arr(3, 2)
f = lambda a, b: jnp.tanh(a @ b) * a.sum()
cases["axes"] = {
    "inputs": [enc(a), enc(b)],
    "outputs": [enc(jax.vmap(f, in_axes=(1, None), out_axes=1)(a, b))],
}

# Jacobians of R^3 -> R^2 and a Hessian as jacfwd(jacrev).
w = arr(2, 3)
x3 = arr(3)
h = lambda x: jnp.tanh(w @ x) * jnp.sum(x * x)
s = lambda x: jnp.sum(jnp.sin(x) * x * x)
cases["jacobians"] = {
    "inputs": [enc(w), enc(x3)],
    "outputs": [
        enc(jax.jacfwd(h)(x3)),
        enc(jax.jacrev(h)(x3)),
        enc(jax.jacfwd(jax.jacrev(s))(x3)),
    ],
}

# Per-example gradients of a matrix-input function, batched along the last axis.
m = arr(2, 2, 5)
q = lambda m: jnp.sum(jnp.exp(m) @ m)
cases["grad_last_axis"] = {
    "inputs": [enc(m)],
    "outputs": [enc(jax.vmap(jax.grad(q), in_axes=2, out_axes=-1)(m))],
}

out = pathlib.Path(__file__).with_name("vmap_reference.json")
out.write_text(json.dumps(cases, indent=1) + "\n")
print(f"wrote {out}")
