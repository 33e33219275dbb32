"""Reference values for the jax.numpy, jax.nn and optax functions ferrax composes from its
primitives (tests/numpy_jax.rs), computed with JAX in float64: each function's value on fixed
inputs (infinities and the activations' kinks among them; `jnp.einsum` on fourteen subscripts) and,
where it has one, the gradient
of `sum(f(x) * w)` with respect to its first input (`w` = 1, 2, 3, ... over the size).

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_numpy.py > tests/jax/numpy_reference.json
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax

jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(9)
inf = np.inf
a34 = rng.normal(size=(3, 4))
kinks = np.array([-30.0, -6.0, -1.5, -1.0, -0.25, 0.0, 0.5, 1.0, 2.0, 6.0, 7.5, 30.0])
labels = rng.dirichlet(np.ones(5), size=3)

CASES = [
    ("stack", lambda a, b: jnp.stack([a, b], axis=1), [rng.normal(size=(2, 3)), rng.normal(size=(2, 3))], False),
    ("var", lambda a: jnp.var(a, axis=1), [a34], True),
    ("std", lambda a: jnp.std(a, axis=0), [a34], True),
    ("any", lambda a: jnp.any(a, axis=1).astype(jnp.float64), [np.array([[0.0, 0, 0], [0, 2, 0]])], False),
    ("all", lambda a: jnp.all(a, axis=1).astype(jnp.float64), [np.array([[1.0, 3, -1], [0, 2, 5]])], False),
    ("tril", lambda a: jnp.tril(a, -1), [a34], True),
    ("triu", lambda a: jnp.triu(a, 1), [rng.normal(size=(2, 3, 4))], True),
    ("eye", lambda: jnp.eye(3), [], False),
    ("diagonal", lambda a: jnp.diagonal(a, axis1=-2, axis2=-1), [rng.normal(size=(2, 3, 4))], True),
    ("repeat", lambda a: jnp.repeat(a, 2, axis=1), [rng.normal(size=(2, 3))], True),
    ("tile", lambda a: jnp.tile(a, (2, 1, 3)), [rng.normal(size=(2, 3))], True),
    ("roll", lambda a: jnp.roll(a, -2, axis=1), [rng.normal(size=(2, 5))], True),
    ("roll_wrap", lambda a: jnp.roll(a, 7, axis=0), [rng.normal(size=(3, 2))], True),
    ("linspace", lambda: jnp.linspace(0.5, 2.0, 7), [], False),
    ("logaddexp", lambda a, b: jnp.logaddexp(a, b), [np.array([1.0, -inf, inf, -inf, 3.0, 700.0]), np.array([2.0, -inf, inf, 0.0, -40.0, 701.0])], False),
    ("logaddexp_grad", lambda a, b: jnp.logaddexp(a, b), [np.array([1.0, -2.0, 3.0]), np.array([2.0, -2.0, -40.0])], True),
    ("softplus", jax.nn.softplus, [kinks], True),
    ("log_sigmoid", jax.nn.log_sigmoid, [kinks], True),
    ("leaky_relu", lambda x: jax.nn.leaky_relu(x, 0.1), [kinks], True),
    ("elu", lambda x: jax.nn.elu(x, 1.5), [kinks], True),
    ("relu6", jax.nn.relu6, [kinks], True),
    ("hard_tanh", jax.nn.hard_tanh, [kinks], True),
    ("glu", lambda x: jax.nn.glu(x, axis=-1), [a34], True),
    ("softmax_cross_entropy", optax.softmax_cross_entropy, [rng.normal(size=(3, 5)) * 3, labels], True),
    ("sigmoid_binary_cross_entropy", optax.sigmoid_binary_cross_entropy, [kinks, rng.uniform(size=12)], True),
    ("l2_loss", optax.l2_loss, [a34, rng.normal(size=(3, 4))], True),
    ("huber_loss", lambda p, t: optax.huber_loss(p, t, delta=1.5), [a34 * 3, rng.normal(size=(3, 4))], True),
    ("split", lambda a: jnp.stack(jnp.split(a, 3, axis=1)), [rng.normal(size=(2, 6))], True),
    ("split_indices", lambda a: jnp.concatenate(jnp.split(a, [1, 3], axis=0), axis=0) * jnp.arange(1.0, 6.0)[:, None], [rng.normal(size=(5, 2))], True),
    ("norm_2", lambda a: jnp.linalg.norm(a, ord=2, axis=1), [a34], True),
    ("norm_1", lambda a: jnp.linalg.norm(a, ord=1, axis=0), [a34], True),
    ("norm_inf", lambda a: jnp.linalg.norm(a, ord=jnp.inf, axis=1), [a34], True),
    ("norm_neginf", lambda a: jnp.linalg.norm(a, ord=-jnp.inf, axis=1), [a34], True),
    ("norm_0", lambda a: jnp.linalg.norm(a, ord=0, axis=1), [np.array([[0.0, 1.5, 0.0], [2.0, -1.0, 3.0]])], False),
    ("norm_3", lambda a: jnp.linalg.norm(a, ord=3, axis=1), [a34], True),
    ("frobenius", lambda a: jnp.linalg.norm(a, axis=(-2, -1)), [rng.normal(size=(2, 3, 4))], True),
    ("outer", lambda a, b: jnp.outer(a, b), [rng.normal(size=(3,)), rng.normal(size=(4,))], True),
    ("kron", lambda a, b: jnp.kron(a, b), [rng.normal(size=(2, 3)), rng.normal(size=(3, 2))], True),
    ("meshgrid_xy", lambda a, b: jnp.stack(jnp.meshgrid(a, b)), [rng.normal(size=(3,)), rng.normal(size=(4,))], True),
    ("meshgrid_ij", lambda a, b, c: jnp.stack([x.ravel() for x in jnp.meshgrid(a, b, c, indexing="ij")]), [rng.normal(size=(2,)), rng.normal(size=(3,)), rng.normal(size=(2,))], True),
    ("nan_to_num", lambda a: jnp.nan_to_num(a, nan=0.5, posinf=9.0, neginf=-9.0), [np.array([1.0, np.nan, np.inf, -np.inf, -2.0])], False),
    ("isclose", lambda a, b: jnp.isclose(a, b, rtol=1e-3, atol=1e-6).astype(jnp.float64), [np.array([1.0, 1.0, np.inf, np.nan, 0.0, 1e-7]), np.array([1.0005, 1.002, np.inf, np.nan, 2e-6, 0.0])], False),
    ("searchsorted_left", lambda a, v: jnp.searchsorted(a, v).astype(jnp.float64), [np.array([1.0, 2, 2, 3, 5]), np.array([[0.0, 2, 2.5], [5, 6, 1]])], False),
    ("searchsorted_right", lambda a, v: jnp.searchsorted(a, v, side="right").astype(jnp.float64), [np.array([1.0, 2, 2, 3, 5]), np.array([[0.0, 2, 2.5], [5, 6, 1]])], False),
]

EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,kj", [(3, 4), (5, 4)]),
    ("ii", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ijk->j", [(2, 3, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("bi,ij,bj->b", [(2, 3), (3, 3), (2, 3)]),
    ("iij->ji", [(3, 3, 2)]),
]
for spec, shapes in EINSUMS:
    CASES.append(
        ("einsum:" + spec, (lambda spec: lambda *xs: jnp.einsum(spec, *xs))(spec), [rng.normal(size=s) for s in shapes], True)
    )


def weights(shape):
    n = int(np.prod(shape))
    return (jnp.arange(1, n + 1, dtype=jnp.float64) / n).reshape(shape)


def encode(x):
    x = np.asarray(x, dtype=np.float64)
    return {"shape": list(x.shape), "data": [None if np.isnan(v) else float(v) if np.isfinite(v) else ("inf" if v > 0 else "-inf") for v in x.ravel()]}


def main():
    out = []
    for name, f, inputs, differentiable in CASES:
        args = [jnp.asarray(x) for x in inputs]
        value = f(*args)
        case = {"name": name, "inputs": [encode(x) for x in inputs], "value": encode(value)}
        if differentiable:
            g = jax.grad(lambda x, *rest: jnp.sum(f(x, *rest) * weights(value.shape)))(*args)
            case["grad"] = encode(g)
        out.append(case)
    print(json.dumps({"jax": jax.__version__, "cases": out}))


if __name__ == "__main__":
    main()
