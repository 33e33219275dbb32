"""Reference trajectories for ferrax::optim's RMSProp, Adagrad, Lion, gradient accumulation
(MultiSteps), Adamax, Nadam, AMSGrad, AdaBelief, RAdam, LAMB, Adafactor (factored or not,
with momentum and weight decay), Yogi, Adadelta, the clip, zero_nans and apply_if_finite
guards (on gradients with NaNs and infinities), MultiSteps skipping non-finite or large
gradients, SM3, schedule-free SGD, AdamW and Adam (with their
evaluation parameters after the last step) and the schedules (tests/optim.rs), computed with
optax itself in float32.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_optim_optax.py > tests/jax/optim_optax_reference.json
(needs jax, numpy and optax). The format is generate_optim.py's: each case runs an optimizer
for STEPS steps from the same params (a dict of two arrays) on committed gradients and records
the params after every step; each schedule is recorded at steps 0 to 11.
"""
import functools
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

STEPS = 6
rng = np.random.default_rng(20271130)
PARAMS = {
    "b": rng.uniform(-1, 1, size=(3,)).astype(np.float32),
    "w": rng.uniform(-1, 1, size=(2, 3)).astype(np.float32),
}
SCALES = [0.1, 3.0, 0.5, 2.0, 0.2, 1.5]
GRADS = [
    {k: (rng.normal(size=v.shape) * s).astype(np.float32) for k, v in PARAMS.items()}
    for s in SCALES
]
# One exact zero, where Adagrad's accumulator stays at its initial value plus nothing.
GRADS[0]["b"][1] = 0.0
# The same gradients with NaNs (for zero_nans) and with non-finite values in steps 2, 3 and 5
# (for apply_if_finite: two in a row are skipped, within its limit of 2).
NAN_GRADS = [{k: v.copy() for k, v in g.items()} for g in GRADS]
NAN_GRADS[1]["b"][0] = np.nan
NAN_GRADS[2]["w"][1, 2] = np.nan
NAN_GRADS[4]["b"][2] = np.nan
BAD_GRADS = [{k: v.copy() for k, v in g.items()} for g in GRADS]
BAD_GRADS[1]["b"][0] = np.nan
BAD_GRADS[2]["w"][1, 2] = np.inf
BAD_GRADS[4]["b"][2] = -np.inf

EXPONENTIAL = optax.exponential_decay(0.5, 3, 0.5, transition_begin=2, staircase=False, end_value=0.1)
STAIRCASE = optax.exponential_decay(0.5, 3, 0.5, transition_begin=0, staircase=True)
GROWTH = optax.exponential_decay(0.1, 2, 1.5, end_value=0.3)
PIECEWISE = optax.piecewise_constant_schedule(0.2, {3: 0.5, 6: 0.1})
CASES = {
    "rmsprop": optax.rmsprop(0.01, decay=0.9, eps=1e-8),
    "adagrad": optax.adagrad(0.1, initial_accumulator_value=0.1, eps=1e-7),
    "lion_masked": optax.lion(0.01, b1=0.9, b2=0.99, weight_decay=0.1, mask={"b": False, "w": True}),
    "adam_exponential": optax.adam(EXPONENTIAL),
    "sgd_piecewise": optax.sgd(PIECEWISE),
    "multi_steps_adam": optax.MultiSteps(optax.adam(0.05), every_k_schedule=3),
    "adamax": optax.adamax(0.05),
    "nadam": optax.nadam(0.05),
    "amsgrad": optax.amsgrad(0.05),
    "adabelief": optax.adabelief(0.05),
    # b2 = 0.99: the rectification starts at step 6 (ro 4.96 at step 5, 5.94 at step 6).
    "radam": optax.radam(0.05, b2=0.99),
    "lamb_masked": optax.lamb(0.05, weight_decay=0.01, mask={"b": False, "w": True}),
    # w (2 x 3) factored, b not.
    "adafactor": optax.adafactor(0.05, min_dim_size_to_factor=2),
    "adafactor_unfactored": optax.adafactor(0.05),
    "adafactor_momentum_decay": optax.adafactor(
        EXPONENTIAL, min_dim_size_to_factor=2, momentum=0.9, weight_decay_rate=0.01,
        weight_decay_mask={"b": False, "w": True}, clipping_threshold=None,
        multiply_by_parameter_scale=False,
    ),
}
CASES.update({
    "yogi": optax.yogi(0.05),
    "adadelta_decay": optax.adadelta(0.5, rho=0.9, eps=1e-6, weight_decay=0.01, weight_decay_mask={"b": False, "w": True}),
    "clip_sgd": optax.chain(optax.clip(0.3), optax.sgd(0.1)),
    "zero_nans_adam": optax.chain(optax.zero_nans(), optax.adam(0.05)),
    "apply_if_finite_adam": optax.apply_if_finite(optax.adam(0.05), 2),
})
CASES.update({
    "schedule_free_sgd": optax.contrib.schedule_free_sgd(0.1, warmup_steps=3, b1=0.9, weight_decay=0.01),
    "schedule_free_adamw": optax.contrib.schedule_free_adamw(
        0.05, warmup_steps=2, b1=0.9, b2=0.99, eps=1e-8, weight_decay=0.01),
    "schedule_free_adam": optax.contrib.schedule_free(optax.adam(0.05, b1=0.0), 0.05, b1=0.8, weight_lr_power=1.0),
})
# Gradient norms² about 0.1, 81, 2, 36, 0.4 and 20: a bound of 10 skips steps 2, 4 and 6.
CASES.update({
    "multi_steps_skip_not_finite": optax.MultiSteps(
        optax.adam(0.05), every_k_schedule=2, should_skip_update_fn=optax.skip_not_finite),
    "multi_steps_skip_large": optax.MultiSteps(
        optax.adam(0.05), every_k_schedule=2,
        should_skip_update_fn=functools.partial(optax.skip_large_updates, max_squared_norm=10.0)),
})
CASES.update({
    "sm3": optax.sm3(0.1, momentum=0.9),
    "sm3_decaying": optax.chain(optax.scale_by_sm3(b1=0.5, b2=0.9, eps=1e-6), optax.scale(-0.05)),
})
STREAMS = {"zero_nans_adam": NAN_GRADS, "apply_if_finite_adam": BAD_GRADS,
           "multi_steps_skip_not_finite": BAD_GRADS}
SCHEDULES = {
    "polynomial": optax.polynomial_schedule(0.5, 0.01, 2.0, 7, transition_begin=2),
    "warmup_exponential": optax.warmup_exponential_decay_schedule(0.0, 0.3, 3, 2, 0.5, transition_begin=1, end_value=0.05),
    "linear_onecycle": optax.linear_onecycle_schedule(10, 0.4),
    "cosine_onecycle": optax.cosine_onecycle_schedule(9, 0.2, pct_start=0.4),
    "interpolate_cosine": optax.piecewise_interpolate_schedule("cosine", 1.0, {4: 0.1, 8: 0.01, 8: 0.5}),
    "interpolate_linear": optax.piecewise_interpolate_schedule("linear", 2.0, {3: 0.5, 3: 2.0, 9: 0.1}),
    "sgdr": optax.sgdr_schedule([
        dict(init_value=0.0, peak_value=0.4, warmup_steps=2, decay_steps=5, end_value=0.05),
        dict(init_value=0.1, peak_value=0.2, warmup_steps=1, decay_steps=4, end_value=0.0, exponent=2.0),
    ]),
    "exponential": EXPONENTIAL,
    "staircase": STAIRCASE,
    "growth": GROWTH,
    "piecewise": PIECEWISE,
}


def tensor(x):
    x = np.asarray(x, dtype=np.float32)
    number = lambda v: float(v) if np.isfinite(v) else ("nan" if np.isnan(v) else ("inf" if v > 0 else "-inf"))
    return {"shape": list(x.shape), "data": [number(v) for v in x.ravel()]}


def tree(t):
    return {k: tensor(v) for k, v in t.items()}


cases = []
for name, opt in CASES.items():
    params = {k: jnp.asarray(v) for k, v in PARAMS.items()}
    state = opt.init(params)
    trajectory = []
    grads = STREAMS.get(name, GRADS)
    for g in grads:
        u, state = opt.update({k: jnp.asarray(v) for k, v in g.items()}, state, params)
        params = optax.apply_updates(params, u)
        trajectory.append(tree(params))
    case = {"name": name, "params": trajectory}
    if name.startswith("schedule_free"):
        case["eval_params"] = tree(optax.contrib.schedule_free_eval_params(state, params))
    if name in STREAMS:
        case["grads"] = [tree(g) for g in grads]
    cases.append(case)
out = {
    "generator": "tests/jax/generate_optim_optax.py",
    "jax": jax.__version__,
    "optax": optax.__version__,
    "params": tree(PARAMS),
    "grads": [tree(g) for g in GRADS],
    "cases": cases,
    "schedules": {
        name: [float(s(jnp.array(c, jnp.int32))) for c in range(12)]
        for name, s in SCHEDULES.items()
    },
}
json.dump(out, sys.stdout, indent=1)
sys.stdout.write("\n")
