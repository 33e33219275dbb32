"""Reference values for ferrax's convolutions (tests/conv.rs), computed with JAX in float32:
lax.conv_general_dilated over one, two and three spatial dimensions, with layouts given as
lax's strings ("NCHW", "OIHW", "NHWC", "HWIO", ...), strides, explicit, "SAME" and "VALID"
padding, input and kernel dilation, feature groups (depthwise included) and batch groups.

Run: JAX_PLATFORMS=cpu python3 tests/jax/generate_conv.py > tests/jax/conv_reference.json

Each case records its input, kernel and output, and the gradients of `sum(output * weights)`
(weights a fixed random tensor of the output's shape) with respect to the input and the
kernel. Products run at HIGHEST precision, so XLA sums in float32 as ferrax does.
"""
import json

import jax
import numpy as np
from jax import lax

rng = np.random.default_rng(20261129)


def normal(*shape):
    return rng.normal(size=shape).astype(np.float32)


def tensor(x):
    x = np.asarray(x)
    return {"shape": list(x.shape), "data": [float(str(np.float32(v))) for v in x.ravel()]}


def shape_in(layout, sizes):
    return tuple(sizes[c] for c in layout)


CASES = [
    # name, layouts, input sizes by letter, kernel sizes by letter, strides, padding,
    # lhs dilation, rhs dilation, feature groups, batch groups
    ("conv1d_valid", ("NCH", "OIH", "NCH"), dict(N=2, C=3, H=10), dict(O=4, I=3, H=3),
     (1,), "VALID", None, None, 1, 1),
    ("conv1d_stride_same", ("NCH", "OIH", "NCH"), dict(N=2, C=3, H=11), dict(O=2, I=3, H=4),
     (2,), "SAME", None, None, 1, 1),
    ("conv2d_nchw", ("NCHW", "OIHW", "NCHW"), dict(N=2, C=3, H=7, W=6),
     dict(O=4, I=3, H=3, W=2), (1, 1), "VALID", None, None, 1, 1),
    ("conv2d_nhwc_same_stride", ("NHWC", "HWIO", "NHWC"), dict(N=2, C=3, H=9, W=8),
     dict(O=5, I=3, H=3, W=3), (2, 3), "SAME", None, None, 1, 1),
    ("conv2d_explicit_padding", ("NCHW", "OIHW", "NCHW"), dict(N=1, C=2, H=6, W=5),
     dict(O=3, I=2, H=3, W=3), (1, 2), ((2, 1), (0, 3)), None, None, 1, 1),
    ("conv2d_negative_padding", ("NCHW", "OIHW", "NCHW"), dict(N=1, C=2, H=8, W=8),
     dict(O=2, I=2, H=2, W=3), (1, 1), ((-1, 0), (1, -2)), None, None, 1, 1),
    ("conv2d_rhs_dilation", ("NCHW", "OIHW", "NHWC"), dict(N=2, C=2, H=9, W=10),
     dict(O=3, I=2, H=3, W=2), (1, 1), "VALID", None, (2, 3), 1, 1),
    ("conv2d_transpose_like", ("NHWC", "HWIO", "NHWC"), dict(N=1, C=2, H=5, W=4),
     dict(O=3, I=2, H=3, W=3), (1, 1), ((2, 2), (1, 2)), (2, 2), None, 1, 1),
    ("conv2d_feature_groups", ("NCHW", "OIHW", "NCHW"), dict(N=2, C=6, H=6, W=6),
     dict(O=9, I=2, H=3, W=3), (1, 1), "SAME", None, None, 3, 1),
    ("conv2d_depthwise", ("NHWC", "HWIO", "NHWC"), dict(N=2, C=4, H=7, W=5),
     dict(O=8, I=1, H=3, W=3), (2, 1), "SAME", None, (1, 2), 4, 1),
    ("conv2d_batch_groups", ("NCHW", "OIHW", "NCHW"), dict(N=4, C=3, H=6, W=5),
     dict(O=6, I=3, H=2, W=2), (1, 1), "VALID", None, None, 1, 2),
    ("conv3d", ("NCDHW", "OIDHW", "NCDHW"), dict(N=1, C=2, D=4, H=5, W=4),
     dict(O=2, I=2, D=2, H=3, W=2), (1, 2, 1), ((1, 0), (1, 1), (0, 1)), None, None, 1, 1),
    ("conv2d_kernel_past_input", ("NCHW", "OIHW", "NCHW"), dict(N=1, C=3, H=2, W=2),
     dict(O=4, I=3, H=7, W=7), (2, 2), ((3, 3), (3, 3)), None, None, 1, 1),
]


def main():
    cases = []
    for name, layouts, xs, ks, strides, padding, lhs_d, rhs_d, fg, bg in CASES:
        lhs_layout, rhs_layout, out_layout = layouts
        x = normal(*shape_in(lhs_layout, xs))
        k = normal(*shape_in(rhs_layout, ks))

        def conv(x, k):
            return lax.conv_general_dilated(
                x, k, strides, padding, lhs_dilation=lhs_d, rhs_dilation=rhs_d,
                dimension_numbers=layouts, feature_group_count=fg, batch_group_count=bg,
                precision=lax.Precision.HIGHEST)

        y = conv(x, k)
        w = normal(*y.shape)
        gx, gk = jax.grad(lambda x, k: (conv(x, k) * w).sum(), argnums=(0, 1))(x, k)
        cases.append({
            "name": name,
            "layouts": list(layouts),
            "strides": list(strides),
            "padding": padding.lower() if isinstance(padding, str) else [list(p) for p in padding],
            "lhs_dilation": list(lhs_d) if lhs_d else None,
            "rhs_dilation": list(rhs_d) if rhs_d else None,
            "feature_groups": fg,
            "batch_groups": bg,
            "x": tensor(x), "kernel": tensor(k), "out": tensor(y), "weights": tensor(w),
            "grad_x": tensor(gx), "grad_kernel": tensor(gk),
        })
    print(json.dumps({"jax": jax.__version__, "cases": cases}))


if __name__ == "__main__":
    main()
