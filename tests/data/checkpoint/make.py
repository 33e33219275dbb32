"""Checkpoint interop data for tests/checkpoint.rs.

Writes, with Python's own libraries, the files ferrax must read:
  python.safetensors        (safetensors.numpy.save_file; bf16 through ml_dtypes)
  python.npz                (numpy.savez)
  python_layouts.npz        (numpy.savez of a Fortran-ordered, a big-endian and a 0-d array)
  python_compressed.npz     (numpy.savez_compressed of the same arrays, plus 16 KiB of hashed
                            values and 40 KB of zeros, so deflate streams of several blocks)
and checks that Python reads the files ferrax wrote (ferrax.safetensors, ferrax.npz,
ferrax_compressed.npz, ferrax_bf16.npy, made by `cargo test --test checkpoint -- --ignored write_ferrax_files`),
printing one line per check. Needs numpy, ml_dtypes and safetensors:

    pip install --target /tmp/pysite safetensors numpy ml_dtypes
    PYTHONPATH=/tmp/pysite python3 tests/data/checkpoint/make.py
"""

import os

import ml_dtypes
import numpy as np
from safetensors import deserialize
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
BF16 = ml_dtypes.bfloat16


def expected():
    """The tree both sides write: `{"layers": [{"b", "w"}, {"b", "w"}], "state": [{..}]}`,
    named as ferrax and `flatten_dict(sep=".")` name it. tests/checkpoint.rs builds the same."""
    return {
        "layers.0.w": (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3),
        "layers.0.b": np.arange(3, dtype=np.float64) / 3,
        "layers.1.w": np.array([[1.5, -2], [0.25, 65504]], dtype=np.float16),
        "layers.1.b": np.array([1.0, -3.5], dtype=BF16),
        "state.0.count": np.array(7, dtype=np.int32),
        "state.0.ids": np.array([-1, 0, 1 << 40], dtype=np.int64),
        "state.0.pixels": np.array([0, 1, 128, 255], dtype=np.uint8),
        "state.0.mask": np.array([[True, False], [False, True]]),
    }


def compressible():
    """Arrays whose deflate streams span blocks; tests/checkpoint.rs computes the same."""
    k = np.arange(4096, dtype=np.int64)
    return {
        "hashed": ((k * 2654435761) % 65536).astype(np.float32) / 256,
        "zeros": np.zeros(10000, dtype=np.float32),
    }


def write():
    arrays = expected()
    save_file(arrays, os.path.join(HERE, "python.safetensors"))
    np.savez(os.path.join(HERE, "python.npz"), **arrays)
    w = arrays["layers.0.w"]
    layouts = {
        "fortran": np.asfortranarray(w.T),
        "big": np.arange(-2, 4, dtype=">i4").reshape(3, 2),
        "scalar": np.array(2.5, dtype=np.float64),
    }
    assert layouts["fortran"].flags.f_contiguous and not layouts["fortran"].flags.c_contiguous
    np.savez(os.path.join(HERE, "python_layouts.npz"), **layouts)
    np.savez_compressed(os.path.join(HERE, "python_compressed.npz"), **arrays, **compressible())
    print("wrote python.safetensors, python.npz, python_layouts.npz, python_compressed.npz")


def same(name, got, want):
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    assert np.array_equal(got, want), (name, got, want)


def check_ferrax():
    want = expected()
    path = os.path.join(HERE, "ferrax.safetensors")
    if not os.path.exists(path):
        print("ferrax.safetensors missing: run the ignored test write_ferrax_files first")
        return
    # The raw reader: every dtype, bf16 viewed through ml_dtypes.
    with open(path, "rb") as f:
        raw = dict(deserialize(f.read()))
    types = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "BF16": BF16,
             "I32": np.int32, "I64": np.int64, "U8": np.uint8, "BOOL": np.bool_}
    assert sorted(raw) == sorted(want), (sorted(raw), sorted(want))
    for name, info in raw.items():
        got = np.frombuffer(bytes(info["data"]), dtype=types[info["dtype"]])
        same(name, got.reshape(info["shape"]), want[name])
    print(f"ferrax.safetensors: safetensors.deserialize reads all {len(raw)} tensors, values equal")
    try:
        import jax
        from safetensors.flax import load_file
    except ImportError:
        print("ferrax.safetensors: jax not importable, skipped safetensors.flax")
    else:
        jax.config.update("jax_enable_x64", True)  # keep int64 and float64
        loaded = load_file(path)
        for name, v in loaded.items():
            same(name, np.asarray(v), want[name])
        print(f"ferrax.safetensors: safetensors.flax.load_file (JAX arrays) reads all {len(loaded)}, values equal")

    for file in ["ferrax.npz", "ferrax_compressed.npz"]:
        with np.load(os.path.join(HERE, file)) as z:
            assert sorted(z.files) == sorted(want), z.files
            for name in z.files:
                got = z[name]
                if want[name].dtype == BF16:
                    assert got.dtype == np.dtype("V2"), got.dtype
                    got = got.view(BF16)
                same(name, got, want[name])
            print(f"{file}: numpy.load reads all {len(z.files)} arrays, values equal (bf16 as V2)")

    got = np.load(os.path.join(HERE, "ferrax_bf16.npy")).view(BF16)
    same("ferrax_bf16.npy", got, np.array([[1.0, -3.5, 0.0078125]], dtype=BF16))
    print("ferrax_bf16.npy: numpy.load reads it, viewed as ml_dtypes.bfloat16 values equal")


if __name__ == "__main__":
    write()
    check_ferrax()
