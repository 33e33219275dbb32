"""Reference values for ferrax's special-function ops (tests/special.rs), computed with JAX in
float64: lax.lgamma, lax.digamma, lax.erf, lax.erfc, lax.erf_inv, lax.bessel_i0e and
lax.bessel_i1e on grids that cross their
poles, zeros and tails, and the derivatives JAX defines for all but digamma (whose derivative,
polygamma(1, x), ferrax does not define). Beside them, the exact values rounded to float64
(mpmath at 40 digits), which JAX's own approximations miss by up to about 1e-11 relative
near erf_inv's ±1.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_special.py > tests/jax/special_reference.json
"""
import json

import jax
import mpmath
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)


def grid(lo, hi, n):
    return np.linspace(lo, hi, n, dtype=np.float64)


INPUTS = {
    # Negative non-integers (log |Γ|), near the poles, the minimum near 1.46, large values.
    "lgamma": np.concatenate([grid(-6.9, -0.1, 35), grid(0.05, 5.0, 45), [10.5, 33.3, 171.7, 1e5]]),
    "digamma": np.concatenate([grid(-6.9, -0.1, 35), grid(0.05, 5.0, 45), [10.5, 33.3, 1e5]]),
    "erf": grid(-6.0, 6.0, 97),
    "erfc": np.concatenate([grid(-3.0, 6.0, 73), [9.0, 15.0, 26.0]]),
    "erf_inv": np.concatenate([grid(-0.999, 0.999, 81), [1 - 1e-9, -1 + 1e-12]]),
    # Both sides of 0 and of the switch to the asymptotic expansion at 50.
    "bessel_i0e": np.concatenate([grid(-12.0, 12.0, 61), [0.0, 49.5, 50.5, -75.0, 300.0, 1e4]]),
    "bessel_i1e": np.concatenate([grid(-12.0, 12.0, 61), [0.0, 1e-9, 49.5, 50.5, -75.0, 300.0]]),
}
mpmath.mp.dps = 40
EXACT = {
    "lgamma": lambda x: mpmath.log(abs(mpmath.gamma(x))),
    "digamma": mpmath.digamma,
    "erf": mpmath.erf,
    "erfc": mpmath.erfc,
    "erf_inv": mpmath.erfinv,
    "bessel_i0e": lambda x: mpmath.besseli(0, x) * mpmath.exp(-abs(x)),
    "bessel_i1e": lambda x: mpmath.besseli(1, x) * mpmath.exp(-abs(x)),
}
FUNCS = {
    "lgamma": lax.lgamma,
    "digamma": lax.digamma,
    "erf": lax.erf,
    "erfc": lax.erfc,
    "erf_inv": lax.erf_inv,
    "bessel_i0e": lax.bessel_i0e,
    "bessel_i1e": lax.bessel_i1e,
}


def main():
    cases = []
    for name, f in FUNCS.items():
        x = INPUTS[name]
        exact = [float(EXACT[name](mpmath.mpf(float(v)))) for v in x]
        # Inputs as exact decimal strings: near the poles a one-ulp misreading of x (as
        # serde_json's default parser may make) moves the values past the tolerance.
        case = {"op": name, "x": [repr(float(v)) for v in x], "y": np.asarray(f(x)).tolist(),
                "exact": exact}
        if name != "digamma":
            case["dy"] = np.asarray(jax.vmap(jax.grad(f))(x)).tolist()
        cases.append(case)
    print(json.dumps({"jax": jax.__version__, "cases": cases}))


if __name__ == "__main__":
    main()
