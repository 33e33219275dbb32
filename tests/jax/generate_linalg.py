"""Reference gradients of the linear-algebra ops (tests/linalg_jax.rs), computed with JAX in
float64 and complex128: cholesky, lu, qr, eigh, svd, eig (eigenvalues), det, slogdet, inv,
solve, pinv and triangular_solve, each through a loss that reads its results in a way the
decomposition fixes (squared magnitudes of eigen- and singular vectors, whose signs and phases
are free). The same losses are written in the test with ferrax tensors.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_linalg.py > tests/jax/linalg_reference.json
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)


def weights(shape):
    """1, 2, 3, ... over the shape, scaled by 1/size (the test builds the same)."""
    n = int(np.prod(shape))
    return (jnp.arange(1, n + 1, dtype=jnp.float64) / n).reshape(shape)


def real_part(x):
    return jnp.real(x) if jnp.iscomplexobj(x) else x


def magnitude2(x):
    return jnp.real(x * jnp.conj(x))


LOSSES = {
    "cholesky": lambda a: jnp.sum(real_part(jnp.sin(jnp.linalg.cholesky(a))) * weights(a.shape)),
    "lu": lambda a: jnp.sum(real_part(jnp.sin(lax.linalg.lu(a)[0])) * weights(a.shape)),
    "qr": lambda a: jnp.sum(real_part(jnp.sin(jnp.linalg.qr(a)[0])) * weights((a.shape[0], min(a.shape))))
    + jnp.sum(real_part(jnp.cos(jnp.linalg.qr(a)[1])) * weights((min(a.shape), a.shape[1]))),
    "eigh": lambda a: jnp.sum(jnp.linalg.eigh(a)[0] * weights(a.shape[:1]))
    + jnp.sum(magnitude2(jnp.linalg.eigh(a)[1]) * weights(a.shape)),
    "svd": lambda a: jnp.sum(jnp.linalg.svd(a, full_matrices=False)[1] * weights((min(a.shape),)))
    + jnp.sum(magnitude2(jnp.linalg.svd(a, full_matrices=False)[0]) * weights((a.shape[0], min(a.shape))))
    + jnp.sum(magnitude2(jnp.linalg.svd(a, full_matrices=False)[2]) * weights((min(a.shape), a.shape[1]))),
    "eigvals": lambda a: jnp.sum(jnp.real(jnp.sin(jnp.linalg.eigvals(a))))
    + jnp.sum(jnp.real(jnp.linalg.eigvals(a)) * jnp.imag(jnp.linalg.eigvals(a))),
    "det": lambda a: real_part(jnp.linalg.det(a)),
    "slogdet": lambda a: jnp.linalg.slogdet(a)[1],
    "inv": lambda a: jnp.sum(real_part(jnp.linalg.inv(a)) * weights(a.shape)),
    "solve": lambda a, b: jnp.sum(real_part(jnp.linalg.solve(a, b)) * weights(b.shape)),
    "pinv": lambda a: jnp.sum(real_part(jnp.linalg.pinv(a)) * weights(a.shape[::-1])),
    "triangular_solve": lambda a, b: jnp.sum(
        real_part(lax.linalg.triangular_solve(a, b, left_side=True, lower=True)) * weights(b.shape)
    ),
}


def encode(x):
    x = np.asarray(x)
    out = {"shape": list(x.shape), "re": np.real(x).ravel().tolist()}
    if np.iscomplexobj(x):
        out["im"] = np.imag(x).ravel().tolist()
    return out


def main():
    rng = np.random.default_rng(5)
    real = lambda *s: rng.normal(size=s)
    cplx = lambda *s: rng.normal(size=s) + 1j * rng.normal(size=s)
    spd = real(4, 4)
    spd = spd @ spd.T + 4 * np.eye(4)
    hpd = cplx(3, 3)
    hpd = hpd @ hpd.conj().T + 3 * np.eye(3)
    lower = np.tril(real(4, 4)) + 4 * np.eye(4)
    cases = [
        ("cholesky", [spd]),
        ("cholesky", [hpd]),
        ("lu", [real(4, 4)]),
        ("lu", [cplx(3, 3)]),
        ("qr", [real(5, 3)]),
        ("qr", [cplx(4, 3)]),
        ("eigh", [(lambda s: s + s.T)(real(4, 4))]),
        ("eigh", [(lambda s: s + s.conj().T)(cplx(3, 3))]),
        ("svd", [real(4, 3)]),
        ("svd", [real(3, 5)]),
        ("svd", [cplx(4, 3)]),
        ("eigvals", [real(4, 4)]),
        ("eigvals", [cplx(3, 3)]),
        ("det", [real(4, 4)]),
        ("slogdet", [real(4, 4)]),
        ("inv", [real(4, 4)]),
        ("inv", [cplx(3, 3)]),
        ("solve", [real(4, 4), real(4, 2)]),
        ("pinv", [real(5, 3)]),
        ("triangular_solve", [lower, real(4, 3)]),
    ]
    out = []
    for name, inputs in cases:
        f = LOSSES[name]
        argnums = tuple(range(len(inputs)))
        value, grads = jax.value_and_grad(f, argnums=argnums)(*[jnp.asarray(x) for x in inputs])
        out.append({
            "name": name,
            "inputs": [encode(x) for x in inputs],
            "value": float(value),
            "grads": [encode(g) for g in grads],
        })
    print(json.dumps({"jax": jax.__version__, "cases": out}))


if __name__ == "__main__":
    main()
