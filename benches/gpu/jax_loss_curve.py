"""JAX's side of the GPT loss curve (issue 31): trains jax_reference.py's GPT step from the
parameters and on the batches `ferrax-bench loss-curve` wrote to DIR, writes DIR/jax.json, and prints
both curves side by side with their largest difference.

Usage: python3 benches/gpu/jax_loss_curve.py DIR [--reference PATH/jax_reference.py] [--reuse]
(by default ../shared/bench/jax_reference.py, or .gpu/jax_reference.py where staged; --reuse
prints the comparison from DIR/jax.json without training again).
"""
import argparse, importlib.util, json, os, sys, time
import numpy as np

cli = argparse.ArgumentParser()
cli.add_argument("dir")
cli.add_argument("--reference", default=None)
cli.add_argument("--reuse", action="store_true")
opts = cli.parse_args()
candidates = [opts.reference] if opts.reference else [
    os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "bench", "jax_reference.py"),
    os.path.join(".gpu", "jax_reference.py"),
]
path = next((p for p in candidates if p and os.path.exists(p)), None)
if path is None:
    sys.exit(f"jax_reference.py not found (tried {candidates}); pass --reference")

# jax_reference.py parses its own arguments when imported: ask it to run no workload.
sys.argv = [path, "--only", "none"]
spec = importlib.util.spec_from_file_location("jax_reference", path)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
import jax, jax.numpy as jnp

run = json.load(open(os.path.join(opts.dir, "run.json")))
gpu = run["config"] == "w10"
c = ref.gpt_config(gpu)
assert (c["B"], c["T"]) == (run["batch"], run["time"]), (c, run)
cdt = jnp.bfloat16 if gpu else jnp.float32

flat = np.fromfile(os.path.join(opts.dir, "params.f32"), dtype="<f4")
params, at = {"layers": [dict() for _ in range(c["L"])]}, 0
for name, shape in json.load(open(os.path.join(opts.dir, "params.json"))):
    n = int(np.prod(shape))
    value = jnp.asarray(flat[at:at + n].reshape(shape))
    at += n
    parts = name.split(".")
    if parts[0] == "layers":
        params["layers"][int(parts[1])][parts[2]] = value
    else:
        params[name] = value
assert at == flat.size, "params.f32 holds more than params.json lists"

steps, B, T = run["steps"], run["batch"], run["time"]
saved = os.path.join(opts.dir, "jax.json")
if opts.reuse:
    saved_run = json.load(open(saved))
    losses, seconds = saved_run["losses"], float("nan")
    compile_seconds = saved_run.get("compile_seconds", float("nan"))
else:
    tokens = np.fromfile(os.path.join(opts.dir, "batches.i32"), dtype="<i4")
    tokens = tokens.reshape(steps, 2, B, T)
    m = jax.tree.map(jnp.zeros_like, params)
    v = jax.tree.map(jnp.zeros_like, params)
    # Compiled ahead of the loop so that JAX's compile time (trace to executable) prints apart.
    start = time.perf_counter()
    step = jax.jit(ref.gpt_step(c, cdt)).lower(
        params, m, v, jnp.float32(1), jnp.asarray(tokens[0, 0]), jnp.asarray(tokens[0, 1])
    ).compile()
    compile_seconds = time.perf_counter() - start
    losses, start = [], time.perf_counter()
    for s in range(steps):
        idx, tgt = jnp.asarray(tokens[s, 0]), jnp.asarray(tokens[s, 1])
        params, m, v, loss = step(params, m, v, jnp.float32(s + 1), idx, tgt)
        losses.append(float(loss))
    seconds = time.perf_counter() - start
    json.dump({"losses": losses, "platform": jax.devices()[0].platform, "jax": jax.__version__,
               "compile_seconds": compile_seconds}, open(saved, "w"))

ours = json.load(open(os.path.join(opts.dir, "ferrax.json")))["losses"]
print(f"{run['config']}: {steps} steps on JAX {jax.__version__} ({jax.devices()[0].platform}) "
      f"in {seconds:.1f} s after compiling for {compile_seconds:.1f} s")
print("| step | ferrax | JAX | difference |")
print("|---|---|---|---|")
shown = sorted({0, 1, 2, 5, 10, 20, 50, 100, 150, 200, 250, steps - 1} & set(range(steps)))
for s in shown:
    print(f"| {s + 1} | {ours[s]:.6f} | {losses[s]:.6f} | {ours[s] - losses[s]:+.2e} |")
# Rounding differences grow over steps, as between any two implementations; the curves are
# compared where they are steps apart by their means over windows of 25 steps.
gaps = np.abs(np.asarray(ours) - np.asarray(losses)) / np.maximum(np.abs(losses), 1e-12)
apart = np.flatnonzero(gaps > 1e-3)
print(f"relative difference below 1e-3 up to step {apart[0] if apart.size else steps} "
      f"(largest before it {gaps[:apart[0] if apart.size else steps].max():.1e})")
print("| steps | ferrax mean | JAX mean | relative difference |")
print("|---|---|---|---|")
for w in range(0, steps, 25):
    a, b = np.mean(ours[w:w + 25]), np.mean(losses[w:w + 25])
    print(f"| {w + 1}-{min(w + 25, steps)} | {a:.5f} | {b:.5f} | {(a - b) / b:+.1e} |")
