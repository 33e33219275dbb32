"""JAX's `rng_bit_generator` with the PHILOX and DEFAULT algorithms on the CPU, for the importer.

Run: python3 frontends/stablehlo/tests/data/export_philox.py  (needs jax, jaxlib, numpy)
Writes philox.json: per case the algorithm, the u64[2] state (JAX's u32[4] key as XLA reads
it), the shape and type of the bits, and XLA's new state and bits (as decimal strings, u64
exceeding JSON's exact integers). frontends/stablehlo/tests/rng.rs loads it without Python.
"""
import json
import pathlib

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)


def case(algorithm, state, shape, dtype):
    key = np.array(state, np.uint64).view(np.uint32)
    f = jax.jit(lambda k: jax.lax.rng_bit_generator(k, shape, dtype=dtype, algorithm=algorithm))
    new, bits = f(key)
    return {
        "algorithm": algorithm.name.removeprefix("RNG_"),
        "state": [str(w) for w in state],
        "shape": list(shape),
        "dtype": np.dtype(dtype).name,
        "new_state": [str(w) for w in np.asarray(new).view(np.uint64)],
        "bits": [str(b) for b in np.asarray(bits).ravel()],
    }


def main():
    philox, default = jax.lax.RandomAlgorithm.RNG_PHILOX, jax.lax.RandomAlgorithm.RNG_DEFAULT
    ordinary = [0x9ABCDEF012345678, 0x876543210FEDCBA9]
    wrapping = [0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFFE]
    cases = [
        case(philox, ordinary, (2, 5), np.uint32),
        case(philox, ordinary, (2, 5), np.uint64),
        case(philox, ordinary, (7,), np.uint32),
        case(philox, wrapping, (3, 4), np.uint32),
        case(philox, wrapping, (5,), np.uint64),
        case(default, ordinary, (2, 5), np.uint32),
        case(philox, [0, 0], (1,), np.uint32),
    ]
    here = pathlib.Path(__file__).parent
    (here / "philox.json").write_text(json.dumps({"jax": jax.__version__, "cases": cases}, indent=0))


if __name__ == "__main__":
    main()
