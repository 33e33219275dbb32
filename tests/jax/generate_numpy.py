"""Reference values for the jax.numpy, jax.nn and optax functions ferrax composes from its
primitives (tests/numpy_jax.rs), computed with JAX in float64: each function's value on fixed
inputs (infinities and the activations' kinks among them; `jnp.einsum` on fourteen subscripts) and,
where it has one, the gradient
of `sum(f(x) * w)` with respect to its first input (`w` = 1, 2, 3, ... over the size).
Complex results are stacked as real and imaginary parts. `jax.nn.dot_product_attention`
computes its softmax in f32 whatever the input type, so its cases carry a tolerance of 1e-5.

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

a23 = rng.normal(size=(2, 3))
a234 = rng.normal(size=(2, 3, 4))
a5 = rng.normal(size=(2, 2, 2, 2, 3))
ints = np.array([3.0, 0, 1, 3, -2, 7, 1, 3, 4, 0])
unsorted = np.array([[3.0, 1, np.nan, 2], [1, 5, 3, np.nan], [2, 2, -1, 0]])


def ri(z):
    return jnp.stack([z.real, z.imag])


def recurrence(a, b):
    # (a1, b1) then (a2, b2): x -> a2 (a1 x + b1) + b2, associative.
    return (a[0] * b[0], b[0] * a[1] + b[1])


def attention_inputs(t, s, n, k, h):
    return [rng.normal(size=(2, t, n, h)), rng.normal(size=(2, s, k, h)), rng.normal(size=(2, s, k, h))]


CASES += [
    ("pad_edge", lambda a: jnp.pad(a, ((2, 5), (1, 3)), mode="edge"), [a34], True),
    ("pad_reflect", lambda a: jnp.pad(a, ((2, 5), (4, 9)), mode="reflect"), [a34], True),
    ("pad_symmetric", lambda a: jnp.pad(a, ((7, 2), (1, 4)), mode="symmetric"), [a34], True),
    ("pad_wrap", lambda a: jnp.pad(a, ((4, 7), (0, 2)), mode="wrap"), [a34], True),
    ("pad_constant", lambda a: jnp.pad(a, ((1, 0), (2, 1)), constant_values=1.5), [a34], True),
    ("pad_reflect_single", lambda a: jnp.pad(a, ((2, 3), (1, 1)), mode="reflect"), [rng.normal(size=(1, 3))], True),
    ("fft_axis0_n5_ortho", lambda a: ri(jnp.fft.fft(a, n=5, axis=0, norm="ortho")), [a34], True),
    ("ifft_n3_forward", lambda a: ri(jnp.fft.ifft(a, n=3, axis=-1, norm="forward")), [a34], True),
    ("rfft_axis0_n6", lambda a: ri(jnp.fft.rfft(a, n=6, axis=0)), [a34], True),
    ("irfft_axis1_n7", lambda a: jnp.fft.irfft(a, n=7, axis=1), [a34], True),
    ("irfft_default", lambda a: jnp.fft.irfft(a, axis=0, norm="ortho"), [a34], True),
    ("fftn_axes", lambda a: ri(jnp.fft.fftn(a, s=(3, 5), axes=(0, 2))), [a234], True),
    ("ifftn_all", lambda a: ri(jnp.fft.ifftn(a)), [a234], True),
    ("rfftn_all", lambda a: ri(jnp.fft.rfftn(a, norm="ortho")), [a234], True),
    ("irfftn_s", lambda a: jnp.fft.irfftn(a, s=(3, 6)), [a234], True),
    ("fft2_ortho", lambda a: ri(jnp.fft.fft2(a, norm="ortho")), [a234], True),
    ("fftn_five_axes", lambda a: ri(jnp.fft.fftn(a)), [a5], True),
    ("rfftn_five_axes", lambda a: ri(jnp.fft.rfftn(a, norm="forward")), [a5], True),
    ("irfftn_five_axes", lambda a: jnp.fft.irfftn(a, s=(2, 3, 2, 2, 4)), [a5], True),
    ("fftfreq", lambda: jnp.fft.fftfreq(7, 0.5), [], False),
    ("fftfreq_even", lambda: jnp.fft.fftfreq(8), [], False),
    ("rfftfreq", lambda: jnp.fft.rfftfreq(9, 0.1), [], False),
    ("fftshift", lambda a: jnp.fft.fftshift(a), [a234], True),
    ("ifftshift_axis", lambda a: jnp.fft.ifftshift(a, axes=(1,)), [rng.normal(size=(2, 5))], True),
    ("bincount", lambda x: jnp.bincount(x.astype(jnp.int32), length=6).astype(jnp.float64), [ints], False),
    ("bincount_weights", lambda w, x: jnp.bincount(x.astype(jnp.int32), weights=w, length=5), [rng.normal(size=10), ints], True),
    ("digitize", lambda x, b: jnp.digitize(x, b).astype(jnp.float64), [np.array([-1.0, 0, 0.5, 1, 2.5, 3, 9]), np.array([0.0, 1, 1, 3])], False),
    ("digitize_right", lambda x, b: jnp.digitize(x, b, right=True).astype(jnp.float64), [np.array([-1.0, 0, 0.5, 1, 2.5, 3, 9]), np.array([0.0, 1, 1, 3])], False),
    ("digitize_decreasing", lambda x, b: jnp.digitize(x, b).astype(jnp.float64), [np.array([-1.0, 0, 0.5, 1, 2.5, 3, 9]), np.array([3.0, 1, 0])], False),
    ("histogram", lambda x: jnp.concatenate(jnp.histogram(x, bins=5)), [rng.normal(size=20)], False),
    ("histogram_range_weights", lambda w, x: jnp.concatenate(jnp.histogram(x, bins=4, range=(-1.0, 1.0), weights=w)), [rng.uniform(size=20), rng.normal(size=20)], True),
    ("histogram_density", lambda x: jnp.histogram(x, bins=3, density=True)[0], [rng.normal(size=15)], False),
    ("histogram_edges", lambda w, x, e: jnp.histogram(x, bins=e, weights=w)[0], [rng.uniform(size=6), np.array([0.0, 0.5, 1, 2, 3, 3.5]), np.array([0.0, 1, 2.5, 3])], True),
    ("unique_values", lambda x: jnp.unique_values(x, size=8), [unsorted], False),
    ("unique_values_fill", lambda x: jnp.unique_values(x, size=4, fill_value=-9.0), [np.array([2.0, 1, 2, 1])], False),
    ("unique_counts", lambda x: jnp.concatenate(jnp.unique_counts(x, size=8)), [unsorted], False),
    ("unique_inverse", lambda x: jnp.unique_inverse(x, size=5).inverse_indices.astype(jnp.float64), [unsorted], False),
    ("interp", lambda x, xp, fp: jnp.interp(x, xp, fp), [np.array([-1.0, 0, 0.3, 1, 1.5, 2, 2.7, 4, 5]), np.array([0.0, 1, 1, 2, 4]), np.array([1.0, 3, -1, 2, 0.5])], True),
    ("interp_left_right", lambda fp, x, xp: jnp.interp(x, xp, fp, left=-7.0, right=9.0), [np.array([1.0, 3, -1, 2]), np.array([-1.0, 0, 0.3, 1.5, 2.5, 3, 4]), np.array([0.0, 1, 2, 3])], True),
    ("associative_scan_add", lambda a: jax.lax.associative_scan(jnp.add, a), [rng.normal(size=(6, 3))], True),
    ("associative_scan_recurrence", lambda a, b: jnp.stack(jax.lax.associative_scan(recurrence, (a, b), reverse=True, axis=1)), [rng.normal(size=(2, 7)), rng.normal(size=(2, 7))], True),
    ("associative_scan_odd", lambda a: jax.lax.associative_scan(jnp.multiply, a, axis=-1), [rng.normal(size=(2, 5))], True),
    ("lax_map", lambda a: jax.lax.map(lambda r: jnp.sin(r) * r.sum(), a), [a34], True),
]

nans = np.array([[1.0, np.nan, 3.0, -2.0], [np.nan, np.nan, np.nan, np.nan], [0.5, 4.0, np.nan, 2.0]])
a57 = rng.normal(size=(5, 7))
counts_x = np.array([[0.0, 2, 0], [1, 0, -3], [0, 0, 5]])

CASES += [
    ("nansum", lambda a: jnp.nansum(a, axis=1), [nans], True),
    ("nanmean", lambda a: jnp.nanmean(a, axis=1), [nans], False),
    ("nanmax", lambda a: jnp.nanmax(a, axis=1), [nans], False),
    ("nanmin", lambda a: jnp.nanmin(a, axis=0), [nans], False),
    ("nanvar", lambda a: jnp.nanvar(a, axis=1), [nans], False),
    ("nanstd", lambda a: jnp.nanstd(a, axis=0), [nans], False),
    ("ptp", lambda a: jnp.ptp(a, axis=1), [a34], False),
    ("average", lambda a, w: jnp.average(a, axis=1, weights=w), [a34, rng.uniform(size=(3, 4))], True),
    ("quantile_linear", lambda a: jnp.quantile(a, jnp.array([0.0, 0.3, 0.5, 0.85, 1.0]), axis=1), [a57], True),
    ("quantile_lower", lambda a: jnp.quantile(a, jnp.array([0.1, 0.5, 0.9]), axis=0, method="lower"), [a57], True),
    ("quantile_higher", lambda a: jnp.quantile(a, jnp.array([0.1, 0.5, 0.9]), axis=0, method="higher"), [a57], True),
    ("quantile_nearest", lambda a: jnp.quantile(a, jnp.array([0.1, 0.25, 0.5, 0.75, 0.9]), axis=1, method="nearest"), [a57], True),
    ("quantile_all", lambda a: jnp.quantile(a, jnp.array([0.2, 0.7])), [a34], True),
    ("quantile_nan", lambda a: jnp.quantile(a, jnp.array([0.5]), axis=1), [nans], False),
    ("nanquantile", lambda a: jnp.nanquantile(a, jnp.array([0.25, 0.5, 1.0]), axis=1), [nans], False),
    ("percentile", lambda a: jnp.percentile(a, jnp.array([10.0, 50.0]), axis=1), [a57], True),
    ("median", lambda a: jnp.median(a, axis=1), [a34], True),
    ("median_all", lambda a: jnp.median(a), [a57], True),
    ("nanmedian", lambda a: jnp.nanmedian(a, axis=1), [nans], False),
    ("cov", lambda a: jnp.cov(a), [a34], True),
    ("cov_columns", lambda a: jnp.cov(a, rowvar=False, ddof=0), [a57], True),
    ("corrcoef", lambda a: jnp.corrcoef(a), [a34], True),
    ("diff", lambda a: jnp.diff(a, n=2, axis=1), [a57], True),
    ("convolve_full", lambda a, v: jnp.convolve(a, v), [rng.normal(size=7), rng.normal(size=3)], True),
    ("convolve_same", lambda a, v: jnp.convolve(a, v, mode="same"), [rng.normal(size=7), rng.normal(size=4)], True),
    ("convolve_valid_swapped", lambda a, v: jnp.convolve(a, v, mode="valid"), [rng.normal(size=3), rng.normal(size=8)], True),
    ("correlate_full", lambda a, v: jnp.correlate(a, v, mode="full"), [rng.normal(size=6), rng.normal(size=3)], True),
    ("correlate_same_swapped", lambda a, v: jnp.correlate(a, v, mode="same"), [rng.normal(size=3), rng.normal(size=6)], True),
    ("polyval", lambda x, p: jnp.polyval(p, x), [rng.normal(size=(2, 3)), np.array([2.0, -1.0, 0.5, 3.0])], True),
    ("polyval_coefficients", lambda p, x: jnp.polyval(p, x), [np.array([2.0, -1.0, 0.5, 3.0]), rng.normal(size=(5,))], True),
    ("trapezoid_dx", lambda y: jnp.trapezoid(y, dx=0.5, axis=1), [a57], True),
    ("trapezoid_x", lambda y, x: jnp.trapezoid(y, x, axis=0), [a57, np.array([0.0, 0.5, 1.5, 1.7, 3.0])], True),
    ("cross", lambda a, b: jnp.cross(a, b), [rng.normal(size=(4, 3)), rng.normal(size=(4, 3))], True),
    ("remainder", lambda a, b: jnp.remainder(a, b), [np.array([5.5, -5.5, 5.5, -5.5, 3.0, -0.0]), np.array([2.0, 2.0, -2.0, -2.0, 1.5, 2.0])], False),
    ("remainder_int", lambda a, b: jnp.remainder(a.astype(jnp.int32), b.astype(jnp.int32)).astype(jnp.float64), [np.array([7.0, -7, 7, -7, 6, 5]), np.array([3.0, 3, -3, -3, 3, 0])], False),
    ("floor_divide", lambda a, b: jnp.floor_divide(a, b), [np.array([5.5, -5.5, 5.5, -5.5, 3.0, 7.0]), np.array([2.0, 2.0, -2.0, -2.0, 1.5, 0.5])], False),
    ("floor_divide_int", lambda a, b: jnp.floor_divide(a.astype(jnp.int32), b.astype(jnp.int32)).astype(jnp.float64), [np.array([7.0, -7, 7, -7, 6]), np.array([3.0, 3, -3, -3, 3])], False),
    ("nonzero", lambda a: jnp.stack(jnp.nonzero(a, size=5, fill_value=-1)).astype(jnp.float64), [counts_x], False),
    ("argwhere", lambda a: jnp.argwhere(a, size=2).astype(jnp.float64), [counts_x], False),
    ("flatnonzero", lambda a: jnp.flatnonzero(a, size=6).astype(jnp.float64), [counts_x], False),
    ("count_nonzero", lambda a: jnp.count_nonzero(a, axis=0).astype(jnp.float64), [counts_x], False),
    ("isin", lambda a, t: jnp.isin(a, t).astype(jnp.float64), [counts_x, np.array([5.0, 0.0, 7.0])], False),
]

import jax.scipy as jsp

probs = rng.dirichlet(np.ones(4), size=3)
spd = (lambda m: m @ m.T + 3 * np.eye(3))(rng.normal(size=(3, 3)))
a44 = rng.normal(size=(4, 4))

CASES += [
    ("celu", lambda x: jax.nn.celu(x, 1.5), [kinks], True),
    ("selu", jax.nn.selu, [kinks], True),
    ("hard_sigmoid", jax.nn.hard_sigmoid, [kinks - 2.0], True),
    ("hard_silu", jax.nn.hard_silu, [kinks - 2.0], True),
    ("soft_sign", jax.nn.soft_sign, [kinks], True),
    ("sparse_plus", jax.nn.sparse_plus, [kinks], True),
    ("sparse_sigmoid", jax.nn.sparse_sigmoid, [kinks], True),
    ("squareplus", lambda x: jax.nn.squareplus(x, 2.0), [kinks], True),
    ("mish", jax.nn.mish, [kinks], True),
    ("standardize", lambda x: jax.nn.standardize(x, axis=-1), [a34], True),
    ("relu_jvp", lambda x: jax.jvp(jax.nn.relu, (x,), (jnp.ones_like(x),))[1], [kinks], False),
    ("relu6_jvp", lambda x: jax.jvp(jax.nn.relu6, (x,), (jnp.ones_like(x),))[1], [kinks], False),
    ("squared_error", optax.squared_error, [a34, rng.normal(size=(3, 4))], True),
    ("log_cosh", optax.log_cosh, [a34 * 300, rng.normal(size=(3, 4))], True),
    ("cosine_similarity", lambda p, t: optax.cosine_similarity(p, t, epsilon=1e-3), [np.vstack([a34, np.zeros((1, 4))]), rng.normal(size=(4, 4))], True),
    ("cosine_distance", optax.cosine_distance, [a34, rng.normal(size=(3, 4))], True),
    ("kl_divergence", lambda lp, t: optax.kl_divergence(lp, t), [np.log(probs), np.array([[0.5, 0.5, 0, 0], [0.1, 0.2, 0.3, 0.4], [1.0, 0, 0, 0]])], True),
    ("kl_divergence_with_log_targets", optax.losses.kl_divergence_with_log_targets, [np.log(probs), np.log(rng.dirichlet(np.ones(4), size=3))], True),
    ("hinge_loss", optax.hinge_loss, [kinks / 3, np.sign(rng.normal(size=12))], True),
    ("smooth_labels", lambda l: optax.smooth_labels(l, 0.1), [probs], True),
    ("poly_loss_cross_entropy", lambda x, l: optax.losses.poly_loss_cross_entropy(x, l, epsilon=2.0), [rng.normal(size=(3, 4)) * 2, probs], True),
    ("xlogy", jsp.special.xlogy, [np.array([0.0, 0.0, 1.5, -2.0, 0.0, 3.0]), np.array([0.0, 2.0, 0.5, 3.0, np.nan, 1e-300])], False),
    ("xlogy_grad", jsp.special.xlogy, [np.array([0.5, 1.5, -2.0]), np.array([2.0, 0.5, 3.0])], True),
    ("xlog1py", jsp.special.xlog1py, [np.array([0.0, 0.0, 1.5, -2.0]), np.array([-1.0, 2.0, 0.5, 1e-10])], False),
    ("entr", jsp.special.entr, [np.array([0.0, 0.5, 1.0, 2.0, -1.0, 1e-300])], False),
    ("logit", jsp.special.logit, [np.array([0.001, 0.25, 0.5, 0.9, 0.999])], True),
    ("ndtr", jsp.special.ndtr, [np.array([-40.0, -8.0, -2.0, -0.5, 0.0, 0.3, 0.7, 3.0, 9.0])], True),
    ("betaln", jsp.special.betaln, [np.array([0.5, 1.0, 2.5, 7.0]), np.array([0.5, 3.0, 1.5, 2.0])], True),
    ("norm_logpdf", lambda x: jsp.stats.norm.logpdf(x, 0.5, 2.0), [kinks], True),
    ("norm_pdf", lambda x: jsp.stats.norm.pdf(x, -1.0, 0.5), [kinks / 10], True),
    ("norm_cdf", lambda x: jsp.stats.norm.cdf(x, 0.5, 2.0), [kinks], True),
    ("mvn_logpdf", lambda x, m, c: jsp.stats.multivariate_normal.logpdf(x, m, c), [rng.normal(size=(4, 3)), rng.normal(size=3), spd], True),
    ("ndtri", jsp.special.ndtri, [np.array([1e-300, 1e-20, 0.001, 0.02, 0.3, 0.5, 0.8, 0.97, 0.9999, 1 - 1e-10])], False),
    ("ndtri_ends", jsp.special.ndtri, [np.array([0.0, 1.0, -0.5, 1.5])], False),
    ("ndtri_grad", jsp.special.ndtri, [np.array([0.001, 0.1, 0.5, 0.9, 0.999])], True, 1e-10),
    ("log_ndtr", jsp.special.log_ndtr, [np.array([-40.0, -25.0, -20.5, -19.0, -5.0, 0.0, 3.0, 7.9, 8.5, 12.0])], True),
    ("norm_logcdf", lambda x: jsp.stats.norm.logcdf(x, 0.5, 2.0), [kinks], True),
    ("norm_sf", lambda x: jsp.stats.norm.sf(x, 0.5, 2.0), [kinks], True),
    ("norm_logsf", lambda x: jsp.stats.norm.logsf(x, 0.5, 2.0), [kinks], True),
    ("norm_ppf", lambda q: jsp.stats.norm.ppf(q, 0.5, 2.0), [np.array([0.01, 0.2, 0.5, 0.75, 0.995])], True, 1e-10),
    ("norm_isf", lambda q: jsp.stats.norm.isf(q, 0.5, 2.0), [np.array([0.01, 0.2, 0.5, 0.75, 0.995])], True, 1e-10),
    ("pad_mean", lambda a: jnp.pad(a, ((1, 2), (2, 1)), mode="mean"), [a34], True),
    ("pad_median", lambda a: jnp.pad(a, ((2, 1), (0, 3)), mode="median"), [a34], True),
    ("pad_maximum", lambda a: jnp.pad(a, ((1, 0), (1, 2)), mode="maximum"), [a34], True),
    ("pad_minimum", lambda a: jnp.pad(a, ((0, 2), (3, 1)), mode="minimum"), [a34], True),
    ("pad_linear_ramp", lambda a: jnp.pad(a, ((2, 1), (3, 2)), mode="linear_ramp", end_values=0.5), [a34], True),
    ("pad_mean_int", lambda a: jnp.pad(a.astype(jnp.int32), ((1, 1), (2, 1)), mode="mean").astype(jnp.float64), [np.array([[1.0, 2, 4, 7], [3, 3, 8, 0], [5, 1, 1, 2]])], False),
    ("pad_linear_ramp_int", lambda a: jnp.pad(a.astype(jnp.int32), ((2, 1), (0, 3)), mode="linear_ramp", end_values=1).astype(jnp.float64), [np.array([[1.0, 20, 4, 7], [3, 3, 8, 0], [5, 1, 1, 12]])], False),
    ("sigmoid_focal_loss", lambda x, l: optax.sigmoid_focal_loss(x, l, alpha=0.25, gamma=2.0), [kinks, (rng.uniform(size=12) > 0.5).astype(np.float64)], True),
    ("sigmoid_focal_loss_soft", lambda x, l: optax.sigmoid_focal_loss(x, l, gamma=1.5), [kinks / 4, rng.uniform(size=12)], True),
    ("lu_factor_lu", lambda a: jsp.linalg.lu_factor(a)[0], [a44], True),
    ("lu_factor_piv", lambda a: jsp.linalg.lu_factor(a)[1].astype(jnp.float64), [a44], False),
    ("lu_pivots_to_permutation", lambda p: jax.lax.linalg.lu_pivots_to_permutation(p.astype(jnp.int32), 5).astype(jnp.float64), [np.array([[2.0, 2, 4, 3], [0, 3, 2, 4]])], False),
    ("lu_solve", lambda b, a: jsp.linalg.lu_solve(jsp.linalg.lu_factor(a), b), [rng.normal(size=(4, 2)), a44], True),
    ("lu_solve_vector_trans", lambda b, a: jsp.linalg.lu_solve(jsp.linalg.lu_factor(a), b, trans=1), [rng.normal(size=(4,)), a44], True),
    ("lu_solve_grad_a", lambda a, b: jsp.linalg.lu_solve(jsp.linalg.lu_factor(a), b), [a44, rng.normal(size=(4, 3))], True),
    ("lu_solve_batch_trans", lambda a, b: jsp.linalg.lu_solve(jsp.linalg.lu_factor(a), b, trans=1), [rng.normal(size=(2, 3, 3)), rng.normal(size=(2, 3, 2))], True),
    ("rel_entr", jsp.special.rel_entr, [np.array([0.0, 0.0, 1.5, -1.0, 2.0, 0.5]), np.array([0.0, 2.0, 0.5, 1.0, -1.0, 0.0])], False),
    ("rel_entr_grad", jsp.special.rel_entr, [np.array([0.5, 1.5, 2.0]), np.array([2.0, 0.5, 2.0])], True),
    ("kl_div", jsp.special.kl_div, [np.array([0.0, 0.0, 1.5, -1.0, 2.0, 0.5]), np.array([0.0, 2.0, 0.5, 1.0, -1.0, 0.0])], False),
    ("kl_div_grad", jsp.special.kl_div, [np.array([0.5, 1.5, 2.0]), np.array([2.0, 0.5, 2.0])], True),
]

big = rng.normal(size=(3, 3)) * 4
chol = np.linalg.cholesky(spd)

CASES += [
    ("matrix_power_5", lambda a: jnp.linalg.matrix_power(a, 5), [rng.normal(size=(3, 3)) * 0.7], True),
    ("matrix_power_neg", lambda a: jnp.linalg.matrix_power(a, -3), [spd], True),
    ("matrix_power_batch", lambda a: jnp.linalg.matrix_power(a, 6), [rng.normal(size=(2, 2, 2)) * 0.6], True),
    ("expm_small", jsp.linalg.expm, [rng.normal(size=(3, 3)) * 0.005], True),
    ("expm_pade5", jsp.linalg.expm, [rng.normal(size=(3, 3)) * 0.08], True),
    ("expm_pade7", jsp.linalg.expm, [rng.normal(size=(3, 3)) * 0.3], True),
    ("expm_pade9", jsp.linalg.expm, [rng.normal(size=(3, 3)) * 0.7], True),
    ("expm_scaled", jsp.linalg.expm, [big], True),
    ("expm_batch", jsp.linalg.expm, [np.stack([rng.normal(size=(2, 2)) * 0.01, rng.normal(size=(2, 2)) * 5])], True),
    ("matrix_norm_fro", lambda a: jnp.linalg.norm(a, "fro"), [a34], True),
    ("matrix_norm_nuc", lambda a: jnp.linalg.norm(a, "nuc"), [a34], True),
    ("matrix_norm_1", lambda a: jnp.linalg.norm(a, 1), [a34], True),
    ("matrix_norm_neg1", lambda a: jnp.linalg.norm(a, -1), [a34], True),
    ("matrix_norm_inf", lambda a: jnp.linalg.norm(a, jnp.inf), [a34], True),
    ("matrix_norm_neginf", lambda a: jnp.linalg.norm(a, -jnp.inf), [a34], True),
    ("matrix_norm_2", lambda a: jnp.linalg.norm(a, 2), [a34], True),
    ("matrix_norm_neg2", lambda a: jnp.linalg.norm(a, -2), [a34], True),
    ("cho_solve_lower", lambda b, c: jsp.linalg.cho_solve((c, True), b), [rng.normal(size=(3, 2)), chol], True),
    ("cho_solve_upper", lambda b, c: jsp.linalg.cho_solve((c, False), b), [rng.normal(size=(3,)), chol.T], True),
    ("tensordot", lambda a, b: jnp.tensordot(a, b, axes=([0, 2], [1, 0])), [rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 2, 5))], True),
    ("tensordot_n", lambda a, b: jnp.tensordot(a, b, axes=2), [rng.normal(size=(2, 3, 4)), rng.normal(size=(3, 4, 2))], True),
    ("inner", jnp.inner, [rng.normal(size=(2, 3)), rng.normal(size=(4, 3))], True),
    ("vdot", jnp.vdot, [rng.normal(size=(2, 3)), rng.normal(size=(3, 2))], True),
    ("multi_dot", lambda a, b, c: jnp.linalg.multi_dot([a, b, c]), [rng.normal(size=(3,)), rng.normal(size=(3, 4)), rng.normal(size=(4, 2))], True),
]

ATTENTION = [
    ("attention_bias_mask", lambda q, k, v, bias, m: jax.nn.dot_product_attention(q, k, v, bias=bias, mask=m > 0.5), attention_inputs(4, 5, 2, 2, 3) + [rng.normal(size=(2, 2, 4, 5)), rng.uniform(size=(1, 1, 4, 5))]),
    ("attention_gqa_causal", lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True), attention_inputs(5, 5, 4, 2, 3)),
    ("attention_gqa_bias", lambda q, k, v, bias: jax.nn.dot_product_attention(q, k, v, bias=bias, scale=0.4), attention_inputs(3, 4, 6, 2, 2) + [rng.normal(size=(1, 6, 3, 4))]),
    ("attention_masked_row", lambda q, k, v, m: jax.nn.dot_product_attention(q, k, v, mask=m > 0.5), attention_inputs(3, 4, 2, 1, 2) + [np.array([[1.0, 0, 1, 1], [0, 0, 0, 0], [1, 1, 1, 0]]).reshape(1, 1, 3, 4)]),
    ("attention_lengths_window", lambda q, k, v, lq, lk: jax.nn.dot_product_attention(q, k, v, query_seq_lengths=lq.astype(jnp.int32), key_value_seq_lengths=lk.astype(jnp.int32), local_window_size=(1, 2)), attention_inputs(5, 5, 2, 2, 3) + [np.array([4.0, 5]), np.array([5.0, 3])]),
]
for name, f, inputs in ATTENTION:
    CASES.append((name, f, inputs, True, 1e-5))

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
    for name, f, inputs, differentiable, *tolerance in CASES:
        args = [jnp.asarray(x) for x in inputs]
        value = f(*args)
        case = {"name": name, "inputs": [encode(x) for x in inputs], "value": encode(value)}
        if tolerance:
            case["tolerance"] = tolerance[0]
        if differentiable:
            g = jax.grad(lambda x, *rest: jnp.sum(f(x, *rest) * weights(value.shape)))(*args)
            case["grad"] = encode(g)
        out.append(case)
    print(json.dumps({"jax": jax.__version__, "cases": out}))


if __name__ == "__main__":
    main()
