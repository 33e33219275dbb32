"""Reference values from JAX for tests/control_flow_jax.rs: jax.lax.cond, switch (indices out
of range included: JAX clamps them), while_loop (data-dependent trip count; values and jvp,
as JAX refuses reverse mode), fori_loop with static bounds, scan forward and reverse with
stacked outputs and a tuple carry, nested loops (scan in scan, cond in scan, fori_loop in
while), a loop under jit(grad), and second derivatives through scan; values, grad, jvp and
vjp, in f64.

Run: PYTHONPATH=/tmp/jaxsite python3 tests/jax/generate_control_flow.py  (jax 0.10.2)
Writes tests/jax/control_flow_reference.json: per case, "inputs" and "outputs" maps from a
name to {"shape": [...], "data": [...]} (row-major), plus plain numbers for predicates,
indices and trip counts.
"""
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(20261128)


def arr(*shape):
    return rng.uniform(-1.0, 1.0, size=shape)


def enc(x):
    x = np.asarray(x, dtype=np.float64)
    return {"shape": list(x.shape), "data": x.reshape(-1).tolist()}


def encs(d):
    return {k: enc(v) for k, v in d.items()}


cases = {}

# cond, with the true branch closing over w; both predicates; grad of a scalar loss, jvp, vjp.
x, w = arr(3), arr(3)
tx, tw, ct = arr(3), arr(3), arr(3)


def cond_f(p, x, w):
    return lax.cond(p, lambda x: jnp.sin(x * w) * x, lambda x: jnp.exp(x) - w, x)


def cond_loss(p, x, w):
    return jnp.sum(cond_f(p, x, w) ** 2)


case = {"inputs": encs({"x": x, "w": w, "tx": tx, "tw": tw, "ct": ct}), "outputs": {}}
for p in [True, False]:
    y, ty = jax.jvp(lambda x, w: cond_f(p, x, w), (x, w), (tx, tw))
    _, pull = jax.vjp(lambda x, w: cond_f(p, x, w), x, w)
    gx, gw = jax.grad(cond_loss, argnums=(1, 2))(p, x, w)
    vx, vw = pull(ct)
    case["outputs"][str(p).lower()] = encs(
        {"y": y, "grad_x": gx, "grad_w": gw, "jvp": ty, "vjp_x": vx, "vjp_w": vw}
    )
cases["cond"] = case

# switch over three branches, at indices below, in and above range.
x, w, tx, tw = arr(4), arr(4), arr(4), arr(4)
branches = [
    lambda x, w: x * w,
    lambda x, w: jnp.sin(x) + w,
    lambda x, w: x**3 * jnp.cos(w),
]


def switch_f(k, x, w):
    return lax.switch(k, branches, x, w)


case = {"inputs": encs({"x": x, "w": w, "tx": tx, "tw": tw}), "outputs": {}}
for k in [-3, 0, 1, 2, 7]:
    y, ty = jax.jvp(lambda x, w: switch_f(k, x, w), (x, w), (tx, tw))
    gx, gw = jax.grad(lambda x, w: jnp.sum(switch_f(k, x, w) ** 2), argnums=(0, 1))(x, w)
    case["outputs"][str(k)] = encs({"y": y, "grad_x": gx, "grad_w": gw, "jvp": ty})
cases["switch"] = case

# A while loop whose trip count depends on the data: contract x until its squared norm is
# small (bounded at 100 steps, never reached here); the final carry, the count and jvp.
x = np.array([1.5, -2.0, 0.7])
a = np.array(0.7)
tx, ta = arr(3), np.array(0.3)


def while_f(x, a):
    def more(c):
        x, n = c
        return (jnp.sum(x * x) > 0.05) & (n < 100)

    def body(c):
        x, n = c
        return a * x + 0.05 * jnp.sin(x), n + 1

    return lax.while_loop(more, body, (x, jnp.int32(0)))


(y, n), (ty, _) = jax.jvp(while_f, (x, a), (tx, ta))
cases["while"] = {
    "inputs": encs({"x": x, "a": a, "tx": tx, "ta": ta}),
    "outputs": {**encs({"y": y, "jvp": ty}), "trips": int(n)},
}

# fori_loop with static bounds (a scan in both JAX and ferrax): grad and jvp.
x, tx = arr(3), arr(3)


def fori_f(x):
    return lax.fori_loop(0, 6, lambda i, y: 0.5 * y * jnp.cos(y) + x * i, x)


y, ty = jax.jvp(fori_f, (x,), (tx,))
g = jax.grad(lambda x: jnp.sum(fori_f(x) ** 2))(x)
cases["fori_loop"] = {
    "inputs": encs({"x": x, "tx": tx}),
    "outputs": encs({"y": y, "grad": g, "jvp": ty}),
}

# An RNN as a scan, forward and reverse, with stacked outputs: values, grad, jvp, vjp; and
# its gradient under jit (the loop inside grad inside jit).
w, h, xs = arr(3, 3), arr(3), arr(5, 3)
tw, th, txs = arr(3, 3), arr(3), arr(5, 3)
ch, cys = arr(3), arr(5, 3)


def rnn(w, h, xs, reverse):
    def cell(h, x):
        nxt = jnp.tanh(w @ h + x)
        return nxt, nxt * x

    return lax.scan(cell, h, xs, reverse=reverse)


case = {
    "inputs": encs({"w": w, "h": h, "xs": xs, "tw": tw, "th": th, "txs": txs, "ch": ch, "cys": cys}),
    "outputs": {},
}
for reverse in [False, True]:
    f = lambda w, h, xs: rnn(w, h, xs, reverse)
    (last, ys), (tlast, tys) = jax.jvp(f, (w, h, xs), (tw, th, txs))
    loss = lambda w, h, xs: jnp.sum(f(w, h, xs)[0]) + jnp.sum(f(w, h, xs)[1] ** 2)
    gw, gh, gxs = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(w, h, xs)
    _, pull = jax.vjp(f, w, h, xs)
    vw, vh, vxs = pull((ch, cys))
    case["outputs"]["reverse" if reverse else "forward"] = encs(
        {
            "last": last,
            "ys": ys,
            "grad_w": gw,
            "grad_h": gh,
            "grad_xs": gxs,
            "jvp_last": tlast,
            "jvp_ys": tys,
            "vjp_w": vw,
            "vjp_h": vh,
            "vjp_xs": vxs,
        }
    )
cases["scan_rnn"] = case

# A scan carrying a tuple.
a0, b0, xs = arr(2), arr(2), arr(4, 2)


def pair(a, b, xs):
    def step(c, x):
        a, b = c
        a2 = a + x * b
        b2 = b * jnp.cos(x) + 0.1 * a
        return (a2, b2), a2 * b2

    return lax.scan(step, (a, b), xs)


(a, b), ys = pair(a0, b0, xs)


def pair_loss(a, b, xs):
    (a, b), ys = pair(a, b, xs)
    return jnp.sum(a) + jnp.sum(b**2) + jnp.sum(jnp.sin(ys))


ga, gb, gxs = jax.grad(pair_loss, argnums=(0, 1, 2))(a0, b0, xs)
cases["scan_tuple"] = {
    "inputs": encs({"a": a0, "b": b0, "xs": xs}),
    "outputs": encs({"a": a, "b": b, "ys": ys, "grad_a": ga, "grad_b": gb, "grad_xs": gxs}),
}

# A scan inside a scan: the outer one over the rows of xs (3 x 4 x 2), the inner one over each
# row's 4 steps, its stacked outputs the outer step's output.
w, h, xs = arr(2), arr(2), arr(3, 4, 2)


def scan_scan(w, h, xs):
    def outer(h, row):
        inner = lambda c, x: (jnp.tanh(c * w + x), jnp.sum(c))
        return lax.scan(inner, h, row)

    return lax.scan(outer, h, xs)


last, ys = scan_scan(w, h, xs)
loss = lambda w, h, xs: (lambda r: jnp.sum(r[0]) + jnp.sum(r[1] ** 2))(scan_scan(w, h, xs))
gw, gh, gxs = jax.grad(loss, argnums=(0, 1, 2))(w, h, xs)
cases["scan_in_scan"] = {
    "inputs": encs({"w": w, "h": h, "xs": xs}),
    "outputs": encs({"last": last, "ys": ys, "grad_w": gw, "grad_h": gh, "grad_xs": gxs}),
}

# A cond inside a scan: each step branches on the sign of its slice's sum.
w, h = arr(2), arr(2)
xs = np.array([[0.4, 0.3], [-0.5, 0.1], [0.2, -0.6], [0.9, -0.1], [-0.3, -0.2], [0.35, -0.05]])
assert np.all(np.abs(xs.sum(axis=1)) > 0.05), "a step's predicate is too close to its edge"
assert 0 < np.sum(xs.sum(axis=1) > 0) < 6, "both branches must be taken"


def cond_scan(w, h, xs):
    def step(h, x):
        h2 = lax.cond(
            jnp.sum(x) > 0,
            lambda h, x: jnp.tanh(h * w + x),
            lambda h, x: h * jnp.cos(x) - w,
            h,
            x,
        )
        return h2, jnp.sum(h2)

    return lax.scan(step, h, xs)


last, ys = cond_scan(w, h, xs)
loss = lambda w, h, xs: (lambda r: jnp.sum(r[0] ** 2) + jnp.sum(r[1]))(cond_scan(w, h, xs))
gw, gh, gxs = jax.grad(loss, argnums=(0, 1, 2))(w, h, xs)
cases["cond_in_scan"] = {
    "inputs": encs({"w": w, "h": h, "xs": xs}),
    "outputs": encs({"last": last, "ys": ys, "grad_w": gw, "grad_h": gh, "grad_xs": gxs}),
}

# A fori_loop (static bounds) inside a while loop with a data-dependent stop: values and jvp.
x, a = np.array([0.9, -1.2]), np.array(0.8)
tx, ta = arr(2), np.array(-0.4)


def fori_in_while(x, a):
    def more(c):
        x, n = c
        return (jnp.sum(x * x) > 0.02) & (n < 20)

    def body(c):
        x, n = c
        y = lax.fori_loop(0, 4, lambda i, y: jnp.sin(y) * a + 0.01 * i, x)
        return y, n + 1

    return lax.while_loop(more, body, (x, jnp.int32(0)))


(y, n), (ty, _) = jax.jvp(fori_in_while, (x, a), (tx, ta))
assert 1 < int(n) < 20, int(n)
cases["fori_in_while"] = {
    "inputs": encs({"x": x, "a": a, "tx": tx, "ta": ta}),
    "outputs": {**encs({"y": y, "jvp": ty}), "trips": int(n)},
}

# A scan inside a static fori_loop, both closing over w and xs, differentiated under jit.
w, xs = arr(2), arr(4, 2)


def fori_scan_loss(w, xs):
    def outer(_, h):
        return lax.scan(lambda c, x: (jnp.tanh(c * w + x), None), h, xs)[0]

    return jnp.sum(lax.fori_loop(0, 3, outer, jnp.zeros(2)))


gw, gxs = jax.jit(jax.grad(fori_scan_loss, argnums=(0, 1)))(w, xs)
cases["jit_grad_nested"] = {
    "inputs": encs({"w": w, "xs": xs}),
    "outputs": encs({"loss": fori_scan_loss(w, xs), "grad_w": gw, "grad_xs": gxs}),
}

# Second derivatives through a scan: grad of grad with respect to the initial carry, and the
# Hessian with respect to the scanned values.
c0, xs = np.array(0.6), arr(4)


def second(c, xs):
    def step(c, x):
        c2 = jnp.sin(c * x) + 0.5 * c
        return c2, c2 * x

    last, ys = lax.scan(step, c, xs)
    return last + jnp.sum(ys**2)


d1 = jax.grad(second)(c0, xs)
d2 = jax.grad(jax.grad(second))(c0, xs)
hess = jax.hessian(second, argnums=1)(c0, xs)
cases["second_order"] = {
    "inputs": encs({"c": c0, "xs": xs}),
    "outputs": encs({"value": second(c0, xs), "grad": d1, "grad_grad": d2, "hessian_xs": hess}),
}

out = pathlib.Path(__file__).with_name("control_flow_reference.json")
out.write_text(json.dumps(cases, indent=1) + "\n")
print(f"wrote {out}")
