"""Training losses of a small GPT by JAX for tests/gpt.rs: jax_reference.py's own `gpt_init`,
`gpt_step` (its `gpt_loss` and `adamw_step`) at f32, on a two-layer GPT, for STEPS steps on
random token batches; the initial parameters, the batches and each step's loss.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_gpt.py > tests/jax/gpt_reference.json
(needs jax, numpy and ../shared/bench/jax_reference.py, which it imports).
"""
import importlib.util
import json
import os
import sys

import numpy as np

path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "bench", "jax_reference.py")
# jax_reference.py parses its own arguments when imported: ask it to run no workload.
sys.argv = [path, "--only", "none"]
spec = importlib.util.spec_from_file_location("jax_reference", path)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
import jax
import jax.numpy as jnp

STEPS = 20
C = dict(V=16, T=8, D=16, H=2, L=2, B=2)
rng = np.random.default_rng(20271129)
params = ref.gpt_init(C)
batches = rng.integers(0, C["V"], (STEPS, 2, C["B"], C["T"]), dtype=np.int32)

named = [("wte", params["wte"]), ("wpe", params["wpe"])]
for i, layer in enumerate(params["layers"]):
    named += [(f"layers.{i}.{k}", v) for k, v in layer.items()]
named += [(k, params[k]) for k in ("lnf_g", "lnf_b", "w_head")]

step = jax.jit(ref.gpt_step(C, jnp.float32))
p, m, v = params, jax.tree.map(jnp.zeros_like, params), jax.tree.map(jnp.zeros_like, params)
losses = []
for s in range(STEPS):
    p, m, v, loss = step(p, m, v, jnp.float32(s + 1), jnp.asarray(batches[s, 0]), jnp.asarray(batches[s, 1]))
    losses.append(float(loss))

json.dump({
    "jax": jax.__version__,
    "config": C,
    "params": [{"name": k, "shape": list(x.shape), "data": np.asarray(x).ravel().tolist()} for k, x in named],
    "batches": batches.tolist(),
    "losses": losses,
}, sys.stdout)
