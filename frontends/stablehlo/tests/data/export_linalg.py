"""Exports jnp.linalg's QR and eigendecompositions for the CPU, with inputs and JAX's results.

Run: python3 frontends/stablehlo/tests/data/export_linalg.py  (needs jax, jaxlib, numpy)
Writes linalg.json: per case its StableHLO text (`jax.export` for the CPU, where XLA calls
LAPACK: `lapack_?geqrf_ffi`, `?orgqr_ffi`/`?ungqr_ffi`, `?syevd_ffi`/`?heevd_ffi`,
`?geev_ffi`), its inputs and JAX's outputs, and how each output compares
(`values`: entry for entry; `columns`: each column up to a unit factor, since LAPACK's
eigenvectors are unique only up to one; `set`: eigenvalues in any order, with their vectors'
columns following). frontends/stablehlo/tests/lapack_qr_eig.rs loads it without Python.
"""
import json
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from jax._src.lax import linalg as lax_linalg  # geqrf is not re-exported by jax.lax.linalg

jax.config.update("jax_enable_x64", True)


def encode(x):
    x = np.asarray(x)
    out = {"dtype": str(x.dtype), "shape": list(x.shape), "re": np.real(x).ravel().tolist()}
    if np.iscomplexobj(x):
        out["im"] = np.imag(x).ravel().tolist()
    return out


def without_locations(text):
    """The module without its source locations (they name this machine's paths)."""
    text = re.sub(r' loc\((?:"[^"]*"|#loc\d*|unknown)\)', "", text)
    return "\n".join(line for line in text.splitlines() if not line.startswith("#loc")) + "\n"


def case(name, f, inputs, compare):
    args = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in inputs]
    exported = export.export(jax.jit(f), platforms=["cpu"])(*args)
    outputs = jax.jit(f)(*inputs)
    if not isinstance(outputs, (tuple, list)):
        outputs = [outputs]
    return {
        "name": name,
        "mlir": without_locations(exported.mlir_module()),
        "inputs": [encode(x) for x in inputs],
        "outputs": [encode(y) for y in outputs],
        "compare": compare,
    }


def main():
    rng = np.random.default_rng(11)
    f32, f64, c64, c128 = np.float32, np.float64, np.complex64, np.complex128
    tall = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 10], [1, 0, 1]], f64)
    wide = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 12, 11]], f64)
    symmetric = np.array([[2, 1, 0], [1, 3, 1], [0, 1, 4]], f64)
    hermitian = np.array([[2, 1 - 1j, 0.5j], [1 + 1j, 3, 2], [-0.5j, 2, -1]], c128)
    general = np.array([[1, -2, 0], [1, 1, 0], [0, 0, 3]], f64)
    batch = rng.normal(size=(2, 4, 3)) + 1j * rng.normal(size=(2, 4, 3))
    lower = np.tril(rng.normal(size=(2, 3, 3))) + np.triu(np.full((2, 3, 3), 99.0), 1)
    random = rng.normal(size=(4, 4))
    random_c = rng.normal(size=(3, 3)) + 1j * rng.normal(size=(3, 3))
    qr = lambda mode: lambda a: jnp.linalg.qr(a, mode=mode)
    cases = [
        case("qr_reduced_tall_f32", qr("reduced"), [tall.astype(f32)], ["values", "values"]),
        case("qr_complete_tall_f64", qr("complete"), [tall], ["values", "values"]),
        case("qr_reduced_wide_f32", qr("reduced"), [wide.astype(f32)], ["values", "values"]),
        case("qr_complete_wide_f64", qr("complete"), [wide], ["values", "values"]),
        case("qr_r_tall_f64", qr("r"), [tall], ["values"]),
        case("qr_batched_c64", qr("reduced"), [batch.astype(c64)], ["values", "values"]),
        case("geqrf_f64", lax_linalg.geqrf, [tall], ["values", "values"]),
        case(
            "householder_product_f64",
            jax.lax.linalg.householder_product,
            [rng.normal(size=(4, 3)), rng.normal(size=(2,))],
            ["values"],
        ),
        case("eigh_f32", jnp.linalg.eigh, [symmetric.astype(f32)], ["values", "columns"]),
        case("eigh_c64", jnp.linalg.eigh, [hermitian.astype(c64)], ["values", "columns"]),
        case(
            "eigh_upper_c128",
            lambda a: jnp.linalg.eigh(a, UPLO="U", symmetrize_input=False),
            [np.triu(hermitian) + np.tril(np.full((3, 3), 7.0 + 5j), -1)],
            ["values", "columns"],
        ),
        case("eigvalsh_f64", jnp.linalg.eigvalsh, [symmetric], ["values"]),
        case(
            "eigh_lower_batched_f64",
            lambda a: jax.lax.linalg.eigh(a, lower=True, symmetrize_input=False),
            [lower],
            ["columns", "values"],
        ),
        case("eig_f32", jnp.linalg.eig, [general.astype(f32)], ["set", "columns"]),
        case("eig_random_f64", jnp.linalg.eig, [random], ["set", "columns"]),
        case("eig_c128", jnp.linalg.eig, [random_c], ["set", "columns"]),
        case("eigvals_f64", jnp.linalg.eigvals, [random], ["set"]),
        case(
            "eig_left_f64",
            lambda a: jax.lax.linalg.eig(
                a, compute_left_eigenvectors=True, compute_right_eigenvectors=False
            ),
            [random],
            ["set", "columns"],
        ),
    ]
    here = pathlib.Path(__file__).parent
    (here / "linalg.json").write_text(json.dumps({"jax": jax.__version__, "cases": cases}))


if __name__ == "__main__":
    main()
