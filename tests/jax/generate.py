"""Reference derivatives from JAX for tests/jax_reference.rs.

Run: python3 tests/jax/generate.py  (needs `pip install jax jaxlib numpy`)
Writes tests/jax/reference.json. Each case has named inputs and the outputs JAX computed:
for most cases the function value followed by its gradient with respect to every input.
"""
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(20261122)


def arr(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape)


def onehot(rows, classes):
    y = np.zeros((rows, classes))
    y[np.arange(rows), np.arange(rows) % classes] = 1.0
    return y


def log_softmax(z, axis=-1):
    m = jax.lax.stop_gradient(z.max(axis=axis, keepdims=True))
    s = z - m
    return s - jnp.log(jnp.exp(s).sum(axis=axis, keepdims=True))


def softmax(z, axis=-1):
    e = jnp.exp(z - jax.lax.stop_gradient(z.max(axis=axis, keepdims=True)))
    return e / e.sum(axis=axis, keepdims=True)


def layernorm(x, g, b):
    mean = x.mean(-1, keepdims=True)
    c = x - mean
    var = (c * c).mean(-1, keepdims=True)
    return c * jax.lax.rsqrt(var + 1e-5) * g + b


def mlp_loss(w1, b1, w2, b2, x, y):
    h = jnp.maximum(x @ w1 + b1, 0.0)
    return -(log_softmax(h @ w2 + b2) * y).sum(-1).mean()


def attention(x, wq, wk, wv):
    q, k, v = x @ wq, x @ wk, x @ wv
    s = q @ jnp.swapaxes(k, 1, 2) / np.sqrt(q.shape[-1])
    return ((softmax(s) @ v + x) ** 2).sum()


CASES = {
    "mlp_loss": (mlp_loss, lambda: [arr(4, 6), arr(6), arr(6, 3), arr(3), arr(5, 4), onehot(5, 3)]),
    "softmax_cross_entropy": (lambda z, y: -(log_softmax(z) * y).sum(), lambda: [arr(4, 5, lo=-3, hi=3), onehot(4, 5)]),
    "layernorm": (lambda x, g, b: (layernorm(x, g, b) * jnp.arange(1.0, 7.0)).sum(), lambda: [arr(3, 6), arr(6), arr(6)]),
    "attention": (attention, lambda: [arr(2, 3, 4), arr(4, 4), arr(4, 4), arr(4, 4)]),
    "gaussian_log_likelihood": (
        lambda x, mu, log_sigma: (-0.5 * ((x - mu) / jnp.exp(log_sigma)) ** 2 - log_sigma - 0.5 * np.log(2 * np.pi)).sum(),
        lambda: [arr(8), arr(8), arr(8, lo=-0.5, hi=0.5)],
    ),
    "logsumexp": (lambda x: (jax.nn.logsumexp(x, axis=1) * jnp.array([1.0, 2.0, 3.0])).sum(), lambda: [arr(3, 4, lo=-4, hi=4)]),
    "tanh_mlp": (lambda w1, w2, x: jnp.tanh(jnp.tanh(x @ w1) @ w2).sum(), lambda: [arr(3, 5), arr(5, 2), arr(4, 3)]),
    "sigmoid_bce": (
        lambda w, x, y: -(y * jnp.log(jax.nn.sigmoid(x @ w)) + (1 - y) * jnp.log(1 - jax.nn.sigmoid(x @ w))).mean(),
        lambda: [arr(3), arr(6, 3), (np.arange(6) % 2).astype(np.float64)],
    ),
    "huber": (lambda x: jnp.where(jnp.abs(x) < 1.0, 0.5 * x * x, jnp.abs(x) - 0.5).sum(), lambda: [arr(7, lo=-3, hi=3)]),
    "rational": (lambda x: ((x ** 2 + 1.0) / (x ** 3 + 2.0)).sum(), lambda: [arr(5, lo=0.1, hi=2.0)]),
    "product": (lambda x: jnp.prod(x, axis=1).sum(), lambda: [arr(3, 4, lo=0.5, hi=1.5)]),
    "max_pool": (lambda x: (x.reshape(4, 2, 3).max(axis=1) ** 2).sum(), lambda: [arr(8, 3)]),
    "matmul_chain": (lambda a, b, c: jnp.sin(a @ b @ c).sum(), lambda: [arr(2, 3), arr(3, 4), arr(4, 2)]),
    "batched_matmul_transpose": (
        lambda a, b: jnp.cos(jnp.einsum("bij,bkj->bik", a, b)).sum(),
        lambda: [arr(2, 3, 4), arr(2, 5, 4)],
    ),
    "normalize": (lambda x: (x / jnp.sqrt((x * x).sum()) * jnp.arange(1.0, 7.0)).sum(), lambda: [arr(6)]),
    "softplus": (lambda x: jnp.log1p(jnp.exp(x)).sum(), lambda: [arr(6, lo=-3, hi=3)]),
    "clipped_square": (lambda x: (jnp.clip(x, -1.0, 1.0) ** 2).sum(), lambda: [arr(7, lo=-2, hi=2)]),
    "pad_slice_concat": (
        lambda x: (jnp.concatenate([jax.lax.pad(x, jnp.asarray(0.5, x.dtype), [(1, -1, 1)]), x[1:5:2] * 3.0]) ** 2).sum(),
        lambda: [arr(5)],
    ),
    "cosine_similarity": (
        lambda a, b: (a * b).sum() / (jnp.sqrt((a * a).sum()) * jnp.sqrt((b * b).sum())),
        lambda: [arr(5), arr(5)],
    ),
    "expm1_log1p": (lambda x: (jnp.expm1(x) * jnp.log1p(x * x)).sum(), lambda: [arr(6)]),
    "power": (lambda a, b: (a ** b).sum(), lambda: [arr(5, lo=0.5, hi=2.0), arr(5, lo=-2.0, hi=2.0)]),
    "linear_regression_mse": (lambda w, b, x, y: (((x @ w + b) - y) ** 2).mean(), lambda: [arr(3), arr(), arr(10, 3), arr(10)]),
    "broadcast_reduce": (lambda a, b: ((a[:, None, :] * b[None, :, :]).max(axis=2) + a.min(axis=1)[:, None]).sum(), lambda: [arr(3, 4), arr(2, 4)]),
    "sin_cos_chain": (lambda x: jnp.sin(jnp.cos(x) * 2.0 + x).sum(), lambda: [arr(6, lo=-3, hi=3)]),
    "rsqrt_variance": (lambda x: jax.lax.rsqrt(x.var(axis=0) + 0.1).sum(), lambda: [arr(5, 3)]),
}

SECOND_ORDER = {
    "second_derivative_sin_exp": (lambda x: jnp.sin(x) * jnp.exp(x), [0.3, -1.2, 2.0]),
    "second_derivative_logistic": (lambda x: jax.nn.sigmoid(x * 3.0), [0.1, -0.7, 1.5]),
}


def tensor(a):
    a = np.asarray(a, dtype=np.float64)
    return {"shape": list(a.shape), "data": a.reshape(-1).tolist()}


def main():
    out = []
    for name, (f, make) in CASES.items():
        inputs = make()
        args = [jnp.asarray(a) for a in inputs]
        value, grads = jax.value_and_grad(f, argnums=tuple(range(len(args))))(*args)
        # The same computation in f32, from the inputs rounded to f32.
        args32 = [jnp.asarray(a, dtype=jnp.float32) for a in inputs]
        value32, grads32 = jax.value_and_grad(f, argnums=tuple(range(len(args))))(*args32)
        out.append({
            "name": name,
            "inputs": [tensor(a) for a in inputs],
            "outputs": [tensor(value)] + [tensor(g) for g in grads],
            "outputs_f32": [tensor(value32)] + [tensor(g) for g in grads32],
        })
    for name, (f, points) in SECOND_ORDER.items():
        d2 = [float(jax.grad(jax.grad(f))(p)) for p in points]
        out.append({"name": name, "inputs": [tensor(points)], "outputs": [tensor(d2)]})
    hess_f = lambda x: (x ** 3).sum() * x[0] + jnp.sin(x).prod()
    x = arr(3)
    out.append({"name": "hessian", "inputs": [tensor(x)], "outputs": [tensor(jax.hessian(hess_f)(jnp.asarray(x)))]})
    v = arr(3)
    hvp = jax.jvp(jax.grad(hess_f), (jnp.asarray(x),), (jnp.asarray(v),))[1]
    out.append({"name": "hessian_vector_product", "inputs": [tensor(x), tensor(v)], "outputs": [tensor(hvp)]})
    path = pathlib.Path(__file__).with_name("reference.json")
    path.write_text(json.dumps({"generator": "tests/jax/generate.py", "jax": jax.__version__, "cases": out}, indent=1) + "\n")
    print(f"wrote {len(out)} cases to {path}")


if __name__ == "__main__":
    main()
