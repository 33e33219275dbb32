"""Peak memory of JAX's w9 GPT step with parameters and Adam state donated, to set beside
ferrax's (`cargo run --release -p ferrax-bench --bin gpt_memory`).

The step and its arguments are jax_reference.py's own (`gpt_step`, `gpt_args`; imported with
`--only` naming nothing, so none of its workloads run). Three figures:
- XLA's buffer assignment (`compile().memory_analysis()`): arguments, outputs, aliased bytes
  and temporaries; with donation the outputs alias the arguments, so the step holds
  arguments + outputs - aliased + temporaries at most: the figure comparable to ferrax's plan.
- `memory_stats()` of the device, where the CPU client reports it (it does not in 0.10.2).
- The process's peak resident set (VmHWM) during the steps less the resident set before them
  (after import, argument creation and compilation, the peak reset there by
  /proc/self/clear_refs), beside ferrax's measured the same way.

Usage: PYTHONPATH=/tmp/jaxsite python3 benches/memory/jax_memory.py [steps]
"""
import importlib.util, os, sys

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
reference = os.path.join(os.path.dirname(__file__), "../../../shared/bench/jax_reference.py")
sys.argv = [reference, "--only", "none"]
spec = importlib.util.spec_from_file_location("jax_reference", reference)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
jax, jnp = ref.jax, ref.jnp


def status(key):
    """A /proc/self/status figure in bytes (VmRSS, VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak():
    """Starts VmHWM again from the present resident set (Linux's clear_refs)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def mb(n):
    return f"{n / 1e6:.1f} MB"


c = ref.gpt_config(False)
p, m, v, t, idx, tgt = ref.gpt_args(c)
# m and v must not be one array: donated twice, a buffer cannot be updated in place twice.
v = jax.tree.map(jnp.zeros_like, v)
step = jax.jit(ref.gpt_step(c, jnp.float32), donate_argnums=(0, 1, 2))
compiled = step.lower(p, m, v, t, idx, tgt).compile()
a = compiled.memory_analysis()
held = a.argument_size_in_bytes + a.output_size_in_bytes - a.alias_size_in_bytes
print(f"xla: arguments {mb(a.argument_size_in_bytes)}, outputs {mb(a.output_size_in_bytes)}, "
      f"aliased {mb(a.alias_size_in_bytes)}, temporaries {mb(a.temp_size_in_bytes)}, "
      f"peak {mb(held + a.temp_size_in_bytes)}")
print("memory_stats:", jax.devices()[0].memory_stats())
reset_peak()
rss = status("VmRSS")
before = [x.unsafe_buffer_pointer() for x in jax.tree.leaves((p, m, v))]
for s in range(steps):
    # Arguments given by their only references, so that the donated buffers are reused.
    p, m, v, loss = compiled(p, m, v, t, idx, tgt)
    jax.block_until_ready(loss)
    print(f"step {s}: loss {float(loss):.4f}, rss {mb(status('VmRSS'))}, hwm {mb(status('VmHWM'))}")
after = [x.unsafe_buffer_pointer() for x in jax.tree.leaves((p, m, v))]
in_place = sum(a == b for a, b in zip(before, after))
hwm = status("VmHWM")
print(f"rss before the steps {mb(rss)}, peak {mb(hwm)}: steps added {mb(hwm - rss)}; "
      f"{in_place}/{len(after)} leaves in place")
