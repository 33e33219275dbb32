"""Reference eigendecompositions for tests/eig.rs, computed with JAX on the CPU (LAPACK's
`geev`, which balances first): matrices whose rows and columns isolate eigenvalues (their
order is the permutation's) and badly scaled ones (`d·b·d⁻¹`, `d` powers of 2, whose
eigenvalues only a balanced decomposition finds to full accuracy), in float32, float64 and
complex128.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_eig.py > tests/jax/eig_reference.json
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)


def scaled(b, powers):
    d = 2.0 ** np.array(powers, dtype=np.float64)
    return d[:, None] * b / d[None, :]


def parts(z):
    z = np.asarray(z)
    return {"re": np.real(z).ravel().tolist(), "im": np.imag(z).ravel().tolist()}


rng = np.random.default_rng(7)
b5 = rng.standard_normal((5, 5))
c4 = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
CASES = {
    "isolating": (np.array([[1.0, 0, 2, 0], [3, 4, 5, 6], [0, 0, 7, 0], [8, 0, 9, 10]]), "f64"),
    "lower_triangular": (np.tril(np.arange(1.0, 17.0).reshape(4, 4)), "f64"),
    "badly_scaled": (scaled(b5, [-20, -10, 0, 10, 20]), "f64"),
    "badly_scaled_f32": (scaled(b5, [-8, -4, 0, 4, 8]), "f32"),
    "badly_scaled_complex": (scaled(c4, [-16, 0, 8, 16]), "c128"),
}

out = {}
for name, (a, dtype) in CASES.items():
    a = a.astype({"f64": np.float64, "f32": np.float32, "c128": np.complex128}[dtype])
    w, vl, vr = lax.linalg.eig(jnp.asarray(a))
    out[name] = {
        "dtype": dtype,
        "m": a.shape[0],
        "a": parts(a),
        "values": parts(w),
        "left": parts(vl),
        "right": parts(vr),
    }
print(json.dumps(out, indent=1))
