"""Reference trajectories for ferrax::optim (tests/optim.rs), computed with JAX in float32.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_optim.py > tests/jax/optim_reference.json
(needs jax and numpy; optax is not needed). optax is not installed where this was written, so
the update rules below are optax's own formulas (optax 0.2: scale_by_adam, trace,
add_decayed_weights with a mask, clip_by_global_norm, scale_by_learning_rate, the schedules
and join_schedules) written in jax.numpy, expression by expression, with optax's int32 step
count and its float32 arithmetic. Each case runs an optimizer for STEPS steps from the same
params (a dict of two arrays) on committed gradients and records the params after every step.
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

STEPS = 6
rng = np.random.default_rng(20270127)
PARAMS = {
    "b": rng.uniform(-1, 1, size=(3,)).astype(np.float32),
    "w": rng.uniform(-1, 1, size=(2, 3)).astype(np.float32),
}
# Gradient scales vary so that clip_by_global_norm(1.0) clips some steps and not others.
SCALES = [0.1, 3.0, 0.5, 2.0, 0.2, 1.5]
GRADS = [
    {k: (rng.normal(size=v.shape) * s).astype(np.float32) for k, v in PARAMS.items()}
    for s in SCALES
]

tmap = jax.tree.map


def safe_increment(count):
    max_int32 = jnp.iinfo(jnp.int32).max
    return jnp.where(count < max_int32, count + jnp.array(1, jnp.int32), max_int32)


# --- schedules (optax.schedules) ---
def constant_schedule(value):
    return lambda count: value


def linear_schedule(init_value, end_value, transition_steps, transition_begin=0):
    def schedule(count):
        count = jnp.clip(count - transition_begin, 0, transition_steps)
        frac = 1 - count / transition_steps
        return (init_value - end_value) * (frac**1) + end_value

    return schedule


def cosine_decay_schedule(init_value, decay_steps, alpha=0.0, exponent=1.0):
    def schedule(count):
        count = jnp.minimum(count, decay_steps)
        cosine_decay = 0.5 * (1 + jnp.cos(jnp.pi * count / decay_steps))
        decayed = (1 - alpha) * cosine_decay**exponent + alpha
        return init_value * decayed

    return schedule


def join_schedules(schedules, boundaries):
    def schedule(step):
        output = schedules[0](step)
        for boundary, s in zip(boundaries, schedules[1:]):
            output = jnp.where(step < boundary, output, s(step - boundary))
        return output

    return schedule


def warmup_cosine_decay_schedule(init_value, peak_value, warmup_steps, decay_steps,
                                 end_value=0.0, exponent=1.0):
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules(
        [linear_schedule(init_value, peak_value, warmup_steps),
         cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)],
        [warmup_steps])


# --- gradient transformations: (init(params) -> state, update(g, state, params)) ---
def scale_by_learning_rate(lr):
    def init(p):
        return jnp.zeros([], jnp.int32)

    def update(g, count, p):
        step = -lr(count) if callable(lr) else -lr
        g = tmap(lambda x: jnp.array(step, dtype=x.dtype) * x, g)
        return g, safe_increment(count)

    return init, update


def trace(decay, nesterov):
    def init(p):
        return tmap(jnp.zeros_like, p)

    def update(g, t, p):
        f = lambda g, t: g + decay * t
        new_trace = tmap(f, g, t)
        return (tmap(f, g, new_trace) if nesterov else new_trace), new_trace

    return init, update


def scale_by_adam(b1, b2, eps, eps_root=0.0):
    def init(p):
        return (jnp.zeros([], jnp.int32), tmap(jnp.zeros_like, p), tmap(jnp.zeros_like, p))

    def update(g, state, p):
        count, mu, nu = state
        mu = tmap(lambda g, t: (1 - b1) * (g**1) + b1 * t, g, mu)
        nu = tmap(lambda g, t: (1 - b2) * (g * g) + b2 * t, g, nu)
        count_inc = safe_increment(count)
        bc1, bc2 = 1 - b1**count_inc, 1 - b2**count_inc
        mu_hat = tmap(lambda t: t / bc1.astype(t.dtype), mu)
        nu_hat = tmap(lambda t: t / bc2.astype(t.dtype), nu)
        out = tmap(lambda m, v: m / (jnp.sqrt(v + eps_root) + eps), mu_hat, nu_hat)
        return out, (count_inc, mu, nu)

    return init, update


def add_decayed_weights(weight_decay, mask):
    def init(p):
        return ()

    def update(g, state, p):
        out = {k: g[k] + weight_decay * p[k] if mask[k] else g[k] for k in g}
        return out, state

    return init, update


def clip_by_global_norm(max_norm):
    def init(p):
        return ()

    def update(g, state, p):
        g_norm = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree.leaves(g)))
        trigger = jnp.squeeze(g_norm < max_norm)
        clip = lambda t: jax.lax.select(trigger, t, (t / g_norm.astype(t.dtype)) * max_norm)
        return tmap(clip, g), state

    return init, update


def chain(*ts):
    def init(p):
        return tuple(i(p) for i, _ in ts)

    def update(g, states, p):
        new = []
        for (_, u), s in zip(ts, states):
            g, s = u(g, s, p)
            new.append(s)
        return g, tuple(new)

    return init, update


def sgd(lr, momentum=None, nesterov=False):
    first = [trace(momentum, nesterov)] if momentum is not None else []
    return chain(*first, scale_by_learning_rate(lr))


def adam(lr, b1=0.9, b2=0.999, eps=1e-8):
    return chain(scale_by_adam(b1, b2, eps), scale_by_learning_rate(lr))


def adamw(lr, b1, b2, eps, weight_decay, mask):
    return chain(scale_by_adam(b1, b2, eps), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(lr))


def apply_updates(p, u):
    return tmap(lambda p, u: jnp.asarray(p + u).astype(jnp.asarray(p).dtype), p, u)


WARMUP_COSINE = warmup_cosine_decay_schedule(0.0, 0.1, 2, 5, 0.01)
CASES = {
    "sgd": sgd(0.1),
    "momentum": sgd(0.1, momentum=0.9),
    "nesterov": sgd(0.1, momentum=0.9, nesterov=True),
    "adam": adam(0.01),
    "adamw_masked": adamw(0.01, 0.9, 0.999, 1e-8, 0.1, {"b": False, "w": True}),
    "clip_then_adam": chain(clip_by_global_norm(1.0), adam(0.05)),
    "momentum_warmup_cosine": sgd(WARMUP_COSINE, momentum=0.9),
    "adam_linear": adam(linear_schedule(0.1, 0.01, 4, 1), b1=0.8, b2=0.99, eps=1e-6),
}
SCHEDULES = {
    "constant": constant_schedule(0.25),
    "linear": linear_schedule(1.0, 0.1, 4, 1),
    "cosine": cosine_decay_schedule(0.5, 6, 0.1, 2.0),
    "warmup_cosine": WARMUP_COSINE,
}


def tensor(x):
    x = np.asarray(x, dtype=np.float32)
    return {"shape": list(x.shape), "data": [float(v) for v in x.ravel()]}


def tree(t):
    return {k: tensor(v) for k, v in t.items()}


cases = []
for name, (init, update) in CASES.items():
    params = {k: jnp.asarray(v) for k, v in PARAMS.items()}
    state = init(params)
    trajectory = []
    for g in GRADS:
        u, state = update({k: jnp.asarray(v) for k, v in g.items()}, state, params)
        params = apply_updates(params, u)
        trajectory.append(tree(params))
    cases.append({"name": name, "params": trajectory})
out = {
    "generator": "tests/jax/generate_optim.py",
    "jax": jax.__version__,
    "params": tree(PARAMS),
    "grads": [tree(g) for g in GRADS],
    "cases": cases,
    "schedules": {
        name: [float(s(jnp.array(c, jnp.int32))) for c in range(10)]
        for name, s in SCHEDULES.items()
    },
}
json.dump(out, sys.stdout, indent=1)
sys.stdout.write("\n")
