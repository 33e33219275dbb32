"""Exports one SGD step of a small MLP as StableHLO text, with inputs and JAX's results.

Run: python3 frontends/stablehlo/tests/data/export_mlp_step.py  (needs jax, jaxlib, numpy)
Writes mlp_step.mlir (the program) and mlp_step.json (inputs and JAX's outputs), which
frontends/stablehlo/tests/mlp_step.rs loads without Python.
"""
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np


def loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = jax.nn.relu(x @ w1 + b1)
    logits = h @ w2 + b2
    return -(jax.nn.log_softmax(logits) * y).sum(-1).mean()


def step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    new = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    return value, new


def main():
    rng = np.random.default_rng(7)
    f32 = np.float32
    params = (
        (rng.normal(size=(8, 16)).astype(f32) / np.sqrt(8), np.zeros(16, f32)),
        (rng.normal(size=(16, 4)).astype(f32) / 4.0, np.zeros(4, f32)),
    )
    x = rng.normal(size=(32, 8)).astype(f32)
    y = np.eye(4, dtype=f32)[np.arange(32) % 4]
    text = jax.jit(step).lower(params, x, y).as_text()
    value, new = jax.jit(step)(params, x, y)
    here = pathlib.Path(__file__).parent
    (here / "mlp_step.mlir").write_text(text)
    flat = lambda tree: [np.asarray(a) for a in jax.tree_util.tree_leaves(tree)]
    enc = lambda a: {"shape": list(a.shape), "data": a.reshape(-1).astype(np.float64).tolist()}
    record = {
        "inputs": [enc(a) for a in flat(params) + [x, y]],
        "outputs": [enc(a) for a in [np.asarray(value)] + flat(new)],
        "jax": jax.__version__,
    }
    (here / "mlp_step.json").write_text(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
