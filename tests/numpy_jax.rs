//! The `jax.numpy`, `jax.nn` and optax functions ferrax composes from its primitives, against
//! values computed by JAX in f64 (`tests/jax/generate_numpy.py` wrote
//! `tests/jax/numpy_reference.json`; no Python is needed here): `stack`, `var`, `std`, `any`,
//! `all`, `tril`, `triu`, `eye`, `diagonal`, `repeat`, `tile`, `roll`, `linspace`,
//! `logaddexp` (infinities included), `split`, the vector and Frobenius norms, `outer`, `kron`,
//! `meshgrid`, `nan_to_num`, `isclose`, `searchsorted`, the activations `softplus`, `log_sigmoid`, `leaky_relu`,
//! `elu`, `relu6`, `hard_tanh`, `glu` at and around their kinks, and the losses
//! `softmax_cross_entropy`, `sigmoid_binary_cross_entropy`, `l2_loss`, `huber_loss`, and
//! `einsum` (products, batches, implicit output, traces, diagonals, `...`, three operands),
//! `pad` in every mode (pads wider than the operand), `jnp.fft` along any axes at any length
//! and normalization (five axes among them), `bincount`, `digitize`, `histogram`,
//! `unique_values`/`counts`/`inverse` (NaNs), `interp`, `lax.associative_scan`, `lax.map`
//! and `jax.nn.dot_product_attention` with bias, mask, lengths, window and grouped heads;
//! the NaN-skipping reductions, quantiles in every method, `median`, `average`, `ptp`, `cov`,
//! `corrcoef`, `diff`, `convolve`/`correlate` in every mode, `polyval`, `trapezoid`, `cross`,
//! `remainder`/`floor_divide` (floats and integers), `nonzero`, `argwhere`, `flatnonzero`,
//! `count_nonzero` and `isin`; the activations `celu`, `selu`, `hard_sigmoid`, `hard_silu`,
//! `soft_sign`, `sparse_plus`, `sparse_sigmoid`, `squareplus`, `mish`, `standardize` and
//! relu's and relu6's forward-mode derivatives at their kinks; optax's `squared_error`,
//! `log_cosh`, `cosine_similarity`/`distance`, `kl_divergence` (both forms), `hinge_loss`,
//! `smooth_labels`, `poly_loss_cross_entropy`; `jax.scipy.special`'s `xlogy`, `xlog1py`,
//! `entr`, `logit`, `ndtr`, `betaln` and `jax.scipy.stats`' normal and multivariate normal;
//! `matrix_power`, `expm` (each Padé degree, scaling and squaring, a batch), the matrix norms,
//! `cho_solve`, `tensordot`, `inner`, `vdot` and `multi_dot`;
//! each
//! value, and the gradient of `sum(f(x)·w)` where JAX defines one. Tolerance: 1e-12 of the
//! largest magnitude (the same formulas in f64); infinities and NaN must match exactly.
#![allow(clippy::unwrap_used, clippy::panic)]

use ferrax::fft::{self, Norm};
use ferrax::nn::AttentionOptions;
use ferrax::scipy::{special, stats};
use ferrax::{
    grad, jit, jvp, lax, nn, vmap, ConvolveMode, DType, MatrixNorm, PadMode, QuantileMethod, Tensor,
};
use serde_json::Value;

fn data(v: &Value) -> (Vec<usize>, Vec<f64>) {
    let shape = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let values = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| match x {
            Value::Null => f64::NAN,
            Value::String(s) if s == "inf" => f64::INFINITY,
            Value::String(_) => f64::NEG_INFINITY,
            x => x.as_f64().unwrap(),
        })
        .collect();
    (shape, values)
}

fn tensor(v: &Value) -> Tensor {
    let (shape, values) = data(v);
    Tensor::from_vec(shape, values)
}

/// The function `name` of the generator, written with ferrax.
fn function(name: &str, args: &[Tensor]) -> Tensor {
    let a = args.first();
    let x = || a.unwrap();
    match name {
        "stack" => Tensor::stack(args, 1),
        "var" => x().var([1]),
        "std" => x().std([0]),
        "any" => x().any([1]).astype(DType::F64),
        "all" => x().all([1]).astype(DType::F64),
        "tril" => x().tril(-1),
        "triu" => x().triu(1),
        "eye" => Tensor::eye(DType::F64, 3),
        "diagonal" => x().diagonal(),
        "repeat" => x().repeat(2, 1),
        "tile" => x().tile(&[2, 1, 3]),
        "roll" => x().roll(-2, 1),
        "roll_wrap" => x().roll(7, 0),
        "linspace" => Tensor::linspace(DType::F64, 0.5, 2.0, 7),
        "logaddexp" | "logaddexp_grad" => x().logaddexp(&args[1]),
        "softplus" => nn::softplus(x()),
        "log_sigmoid" => nn::log_sigmoid(x()),
        "leaky_relu" => nn::leaky_relu(x(), 0.1),
        "elu" => nn::elu(x(), 1.5),
        "relu6" => nn::relu6(x()),
        "hard_tanh" => nn::hard_tanh(x()),
        "glu" => nn::glu(x(), -1),
        "softmax_cross_entropy" => nn::softmax_cross_entropy(x(), &args[1]),
        "sigmoid_binary_cross_entropy" => nn::sigmoid_binary_cross_entropy(x(), &args[1]),
        "l2_loss" => nn::l2_loss(x(), &args[1]),
        "huber_loss" => nn::huber_loss(x(), &args[1], 1.5),
        "split" => Tensor::stack(&x().split(3, 1), 0),
        "split_indices" => {
            let pieces = x().split_at_indices(&[1, 3], 0);
            Tensor::concatenate(&pieces, 0)
                * Tensor::linspace(DType::F64, 1.0, 5.0, 5).reshape([5, 1])
        }
        "norm_2" => x().vector_norm(2.0, 1),
        "norm_1" => x().vector_norm(1.0, 0),
        "norm_inf" => x().vector_norm(f64::INFINITY, 1),
        "norm_neginf" => x().vector_norm(f64::NEG_INFINITY, 1),
        "norm_0" => x().vector_norm(0.0, 1),
        "norm_3" => x().vector_norm(3.0, 1),
        "frobenius" => x().frobenius_norm(),
        "outer" => x().outer(&args[1]),
        "kron" => x().kron(&args[1]),
        "meshgrid_xy" => Tensor::stack(&Tensor::meshgrid(&[x(), &args[1]], true), 0),
        "meshgrid_ij" => {
            let grids = Tensor::meshgrid(&[x(), &args[1], &args[2]], false);
            let flat: Vec<Tensor> = grids.iter().map(|g| g.reshape([g.numel()])).collect();
            Tensor::stack(&flat, 0)
        }
        "nan_to_num" => x().nan_to_num(0.5, 9.0, -9.0),
        "searchsorted_left" => x().searchsorted(&args[1], false).astype(DType::F64),
        "searchsorted_right" => x().searchsorted(&args[1], true).astype(DType::F64),
        "isclose" => x().isclose(&args[1], 1e-3, 1e-6).astype(DType::F64),
        "pad_edge" => x().pad_with(&[(2, 5), (1, 3)], PadMode::Edge),
        "pad_reflect" => x().pad_with(&[(2, 5), (4, 9)], PadMode::Reflect),
        "pad_symmetric" => x().pad_with(&[(7, 2), (1, 4)], PadMode::Symmetric),
        "pad_wrap" => x().pad_with(&[(4, 7), (0, 2)], PadMode::Wrap),
        "pad_constant" => x().pad_with(&[(1, 0), (2, 1)], PadMode::Constant(1.5)),
        "pad_reflect_single" => x().pad_with(&[(2, 3), (1, 1)], PadMode::Reflect),
        "fft_axis0_n5_ortho" => parts(&fft::fft(x(), Some(5), 0, Norm::Ortho)),
        "ifft_n3_forward" => parts(&fft::ifft(x(), Some(3), -1, Norm::Forward)),
        "rfft_axis0_n6" => parts(&fft::rfft(x(), Some(6), 0, Norm::Backward)),
        "irfft_axis1_n7" => fft::irfft(x(), Some(7), 1, Norm::Backward),
        "irfft_default" => fft::irfft(x(), None, 0, Norm::Ortho),
        "fftn_axes" => parts(&fft::fftn(
            x(),
            Some(&[3, 5]),
            Some(&[0, 2]),
            Norm::Backward,
        )),
        "ifftn_all" => parts(&fft::ifftn(x(), None, None, Norm::Backward)),
        "rfftn_all" => parts(&fft::rfftn(x(), None, None, Norm::Ortho)),
        "irfftn_s" => fft::irfftn(x(), Some(&[3, 6]), None, Norm::Backward),
        "fft2_ortho" => parts(&fft::fft2(x(), Norm::Ortho)),
        "fftn_five_axes" => parts(&fft::fftn(x(), None, None, Norm::Backward)),
        "rfftn_five_axes" => parts(&fft::rfftn(x(), None, None, Norm::Forward)),
        "irfftn_five_axes" => fft::irfftn(x(), Some(&[2, 3, 2, 2, 4]), None, Norm::Backward),
        "fftfreq" => fft::fftfreq(DType::F64, 7, 0.5),
        "fftfreq_even" => fft::fftfreq(DType::F64, 8, 1.0),
        "rfftfreq" => fft::rfftfreq(DType::F64, 9, 0.1),
        "fftshift" => fft::fftshift(x(), None),
        "ifftshift_axis" => fft::ifftshift(x(), Some(&[1])),
        "bincount" => x().astype(DType::I32).bincount(None, 6).astype(DType::F64),
        "bincount_weights" => args[1].astype(DType::I32).bincount(Some(x()), 5),
        "digitize" | "digitize_decreasing" => x().digitize(&args[1], false).astype(DType::F64),
        "digitize_right" => x().digitize(&args[1], true).astype(DType::F64),
        "histogram" => {
            let (counts, edges) = x().histogram(5, None, None, false);
            Tensor::concatenate(&[counts, edges], 0)
        }
        "histogram_range_weights" => {
            let (counts, edges) = args[1].histogram(4, Some((-1.0, 1.0)), Some(x()), false);
            Tensor::concatenate(&[counts, edges], 0)
        }
        "histogram_density" => x().histogram(3, None, None, true).0,
        "histogram_edges" => args[1].histogram_edges(&args[2], Some(x()), false),
        "unique_values" => x().unique_values(8, None),
        "unique_values_fill" => x().unique_values(4, Some(-9.0)),
        "unique_counts" => {
            let (values, counts) = x().unique_counts(8, None);
            Tensor::concatenate(&[values, counts.astype(DType::F64)], 0)
        }
        "unique_inverse" => x().unique_inverse(5, None).1.astype(DType::F64),
        "interp" => x().interp(&args[1], &args[2], None, None),
        "interp_left_right" => args[1].interp(&args[2], x(), Some(-7.0), Some(9.0)),
        "associative_scan_add" => lax::associative_scan(|a, b| a + b, x().clone(), false, 0),
        "associative_scan_recurrence" => {
            let (a, b) = lax::associative_scan(
                |(a1, b1): (Tensor, Tensor), (a2, b2): (Tensor, Tensor)| {
                    (&a1 * &a2, &a2 * &b1 + b2)
                },
                (x().clone(), args[1].clone()),
                true,
                1,
            );
            Tensor::stack(&[a, b], 0)
        }
        "associative_scan_odd" => lax::associative_scan(|a, b| a * b, x().clone(), false, -1),
        "lax_map" => lax::map(|r: Tensor| r.sin() * r.sum(..), x().clone()),
        "nansum" => x().nansum(1),
        "nanmean" => x().nanmean(1),
        "nanmax" => x().nanmax(1),
        "nanmin" => x().nanmin(0),
        "nanvar" => x().nanvar(1),
        "nanstd" => x().nanstd(0),
        "ptp" => x().ptp(1),
        "average" => x().average(&args[1], 1),
        "quantile_linear" => {
            x().quantile(&[0.0, 0.3, 0.5, 0.85, 1.0], Some(1), QuantileMethod::Linear)
        }
        "quantile_lower" => x().quantile(&[0.1, 0.5, 0.9], Some(0), QuantileMethod::Lower),
        "quantile_higher" => x().quantile(&[0.1, 0.5, 0.9], Some(0), QuantileMethod::Higher),
        "quantile_nearest" => x().quantile(
            &[0.1, 0.25, 0.5, 0.75, 0.9],
            Some(1),
            QuantileMethod::Nearest,
        ),
        "quantile_all" => x().quantile(&[0.2, 0.7], None, QuantileMethod::Linear),
        "quantile_nan" => x().quantile(&[0.5], Some(1), QuantileMethod::Linear),
        "nanquantile" => x().nanquantile(&[0.25, 0.5, 1.0], Some(1), QuantileMethod::Linear),
        "percentile" => x().percentile(&[10.0, 50.0], Some(1), QuantileMethod::Linear),
        "median" => x().median(Some(1)),
        "median_all" => x().median(None),
        "nanmedian" => x().nanmedian(Some(1)),
        "cov" => x().cov(true, 1),
        "cov_columns" => x().cov(false, 0),
        "corrcoef" => x().corrcoef(true),
        "diff" => x().diff(2, 1),
        "convolve_full" => x().convolve(&args[1], ConvolveMode::Full),
        "convolve_same" => x().convolve(&args[1], ConvolveMode::Same),
        "convolve_valid_swapped" => x().convolve(&args[1], ConvolveMode::Valid),
        "correlate_full" => x().correlate(&args[1], ConvolveMode::Full),
        "correlate_same_swapped" => x().correlate(&args[1], ConvolveMode::Same),
        "polyval" => args[1].polyval(x()),
        "polyval_coefficients" => x().polyval(&args[1]),
        "trapezoid_dx" => x().trapezoid(None, 0.5, 1),
        "trapezoid_x" => x().trapezoid(Some(&args[1]), 1.0, 0),
        "cross" => x().cross(&args[1]),
        "remainder" | "floor_divide" => match name {
            "remainder" => x().remainder(&args[1]),
            _ => x().floor_divide(&args[1]),
        },
        "remainder_int" => x()
            .astype(DType::I32)
            .remainder(&args[1].astype(DType::I32))
            .astype(DType::F64),
        "floor_divide_int" => x()
            .astype(DType::I32)
            .floor_divide(&args[1].astype(DType::I32))
            .astype(DType::F64),
        "nonzero" => Tensor::stack(&x().nonzero(5, -1), 0).astype(DType::F64),
        "argwhere" => x().argwhere(2, 0).astype(DType::F64),
        "flatnonzero" => x().flatnonzero(6, None).astype(DType::F64),
        "count_nonzero" => x().count_nonzero(0).astype(DType::F64),
        "isin" => x().isin(&args[1]).astype(DType::F64),
        "celu" => nn::celu(x(), 1.5),
        "selu" => nn::selu(x()),
        "hard_sigmoid" => nn::hard_sigmoid(x()),
        "hard_silu" => nn::hard_silu(x()),
        "soft_sign" => nn::soft_sign(x()),
        "sparse_plus" => nn::sparse_plus(x()),
        "sparse_sigmoid" => nn::sparse_sigmoid(x()),
        "squareplus" => nn::squareplus(x(), 2.0),
        "mish" => nn::mish(x()),
        "standardize" => nn::standardize(x(), -1, 1e-5),
        "relu_jvp" | "relu6_jvp" => {
            let ones = Tensor::ones(DType::F64, x().shape().to_vec());
            let f = |x: Tensor| match name {
                "relu_jvp" => nn::relu(&x),
                _ => nn::relu6(&x),
            };
            jvp(f, x(), &ones).unwrap().1
        }
        "squared_error" => nn::squared_error(x(), &args[1]),
        "log_cosh" => nn::log_cosh(x(), &args[1]),
        "cosine_similarity" => nn::cosine_similarity(x(), &args[1], 1e-3),
        "cosine_distance" => nn::cosine_distance(x(), &args[1], 0.0),
        "kl_divergence" => nn::kl_divergence(x(), &args[1]),
        "kl_divergence_with_log_targets" => nn::kl_divergence_with_log_targets(x(), &args[1]),
        "hinge_loss" => nn::hinge_loss(x(), &args[1]),
        "smooth_labels" => nn::smooth_labels(x(), 0.1),
        "poly_loss_cross_entropy" => nn::poly_loss_cross_entropy(x(), &args[1], 2.0),
        "xlogy" | "xlogy_grad" => special::xlogy(x(), &args[1]),
        "xlog1py" => special::xlog1py(x(), &args[1]),
        "entr" => special::entr(x()),
        "logit" => special::logit(x()),
        "ndtr" => special::ndtr(x()),
        "betaln" => special::betaln(x(), &args[1]),
        "norm_logpdf" => stats::norm::logpdf(x(), 0.5, 2.0),
        "norm_pdf" => stats::norm::pdf(x(), -1.0, 0.5),
        "norm_cdf" => stats::norm::cdf(x(), 0.5, 2.0),
        "mvn_logpdf" => stats::multivariate_normal::logpdf(x(), &args[1], &args[2]),
        "ndtri" | "ndtri_ends" | "ndtri_grad" => special::ndtri(x()),
        "log_ndtr" => special::log_ndtr(x()),
        "norm_logcdf" => stats::norm::logcdf(x(), 0.5, 2.0),
        "norm_sf" => stats::norm::sf(x(), 0.5, 2.0),
        "norm_logsf" => stats::norm::logsf(x(), 0.5, 2.0),
        "norm_ppf" => stats::norm::ppf(x(), 0.5, 2.0),
        "norm_isf" => stats::norm::isf(x(), 0.5, 2.0),
        "pad_mean" => x().pad_with(&[(1, 2), (2, 1)], PadMode::Mean),
        "pad_median" => x().pad_with(&[(2, 1), (0, 3)], PadMode::Median),
        "pad_maximum" => x().pad_with(&[(1, 0), (1, 2)], PadMode::Maximum),
        "pad_minimum" => x().pad_with(&[(0, 2), (3, 1)], PadMode::Minimum),
        "pad_linear_ramp" => x().pad_with(&[(2, 1), (3, 2)], PadMode::LinearRamp(0.5)),
        "pad_mean_int" => x()
            .astype(DType::I32)
            .pad_with(&[(1, 1), (2, 1)], PadMode::Mean)
            .astype(DType::F64),
        "pad_linear_ramp_int" => x()
            .astype(DType::I32)
            .pad_with(&[(2, 1), (0, 3)], PadMode::LinearRamp(1.0))
            .astype(DType::F64),
        "sigmoid_focal_loss" => nn::sigmoid_focal_loss(x(), &args[1], Some(0.25), 2.0),
        "sigmoid_focal_loss_soft" => nn::sigmoid_focal_loss(x(), &args[1], None, 1.5),
        "lu_factor_lu" => x().lu_factor().0,
        "lu_factor_piv" => x().lu_factor().1.astype(DType::F64),
        "lu_pivots_to_permutation" => x()
            .astype(DType::I32)
            .lu_pivots_to_permutation(5)
            .astype(DType::F64),
        "lu_solve" => {
            let (lu, pivots) = args[1].lu_factor();
            lu.lu_solve(&pivots, x(), 0)
        }
        "lu_solve_vector_trans" => {
            let (lu, pivots) = args[1].lu_factor();
            lu.lu_solve(&pivots, x(), 1)
        }
        "lu_solve_grad_a" | "lu_solve_batch_trans" => {
            let (lu, pivots) = x().lu_factor();
            let trans = u8::from(name == "lu_solve_batch_trans");
            lu.lu_solve(&pivots, &args[1], trans)
        }
        "rel_entr" | "rel_entr_grad" => special::rel_entr(x(), &args[1]),
        "kl_div" | "kl_div_grad" => special::kl_div(x(), &args[1]),
        "matrix_power_5" => x().matrix_power(5),
        "matrix_power_neg" => x().matrix_power(-3),
        "matrix_power_batch" => x().matrix_power(6),
        "expm_small" | "expm_pade5" | "expm_pade7" | "expm_pade9" | "expm_scaled"
        | "expm_batch" => x().expm(),
        "matrix_norm_fro" => x().matrix_norm(MatrixNorm::Frobenius),
        "matrix_norm_nuc" => x().matrix_norm(MatrixNorm::Nuclear),
        "matrix_norm_1" => x().matrix_norm(MatrixNorm::MaxColumnSum),
        "matrix_norm_neg1" => x().matrix_norm(MatrixNorm::MinColumnSum),
        "matrix_norm_inf" => x().matrix_norm(MatrixNorm::MaxRowSum),
        "matrix_norm_neginf" => x().matrix_norm(MatrixNorm::MinRowSum),
        "matrix_norm_2" => x().matrix_norm(MatrixNorm::LargestSingular),
        "matrix_norm_neg2" => x().matrix_norm(MatrixNorm::SmallestSingular),
        "cho_solve_lower" => args[1].cho_solve(x(), true),
        "cho_solve_upper" => args[1].cho_solve(x(), false),
        "tensordot" => x().tensordot(&args[1], (&[0, 2], &[1, 0])),
        "tensordot_n" => x().tensordot_n(&args[1], 2),
        "inner" => x().inner(&args[1]),
        "vdot" => x().vdot(&args[1]),
        "multi_dot" => Tensor::multi_dot(&[x(), &args[1], &args[2]]),
        "attention_bias_mask" => nn::dot_product_attention_with(
            x(),
            &args[1],
            &args[2],
            &AttentionOptions {
                bias: Some(args[3].clone()),
                mask: Some(args[4].greater(0.5)),
                ..AttentionOptions::default()
            },
        ),
        "attention_gqa_causal" => nn::dot_product_attention_with(
            x(),
            &args[1],
            &args[2],
            &AttentionOptions {
                causal: true,
                ..AttentionOptions::default()
            },
        ),
        "attention_gqa_bias" => nn::dot_product_attention_with(
            x(),
            &args[1],
            &args[2],
            &AttentionOptions {
                bias: Some(args[3].clone()),
                scale: Some(0.4),
                ..AttentionOptions::default()
            },
        ),
        "attention_masked_row" => nn::dot_product_attention_with(
            x(),
            &args[1],
            &args[2],
            &AttentionOptions {
                mask: Some(args[3].greater(0.5)),
                ..AttentionOptions::default()
            },
        ),
        "attention_lengths_window" => nn::dot_product_attention_with(
            x(),
            &args[1],
            &args[2],
            &AttentionOptions {
                query_seq_lengths: Some(args[3].astype(DType::I32)),
                key_value_seq_lengths: Some(args[4].astype(DType::I32)),
                local_window: Some((1, 2)),
                ..AttentionOptions::default()
            },
        ),
        other => match other.strip_prefix("einsum:") {
            Some(spec) => Tensor::einsum(spec, &args.iter().collect::<Vec<_>>()),
            None => panic!("no function {other}"),
        },
    }
}

/// A complex result as JAX's generator writes it: real parts, then imaginary parts.
fn parts(z: &Tensor) -> Tensor {
    Tensor::stack(&[z.real(), z.imag()], 0)
}

fn weights(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        shape.to_vec(),
        (1..=n).map(|i| i as f64 / n as f64).collect::<Vec<f64>>(),
    )
}

fn assert_close(what: &str, got: &Tensor, want: &Value, tolerance: f64) {
    let (shape, want) = data(want);
    assert_eq!(got.shape(), &shape[..], "{what}: shape");
    let got = got.to_vec::<f64>().unwrap();
    let scale = want
        .iter()
        .filter(|v| v.is_finite())
        .fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let ok = match (g.is_finite(), w.is_finite()) {
            (true, true) => (g - w).abs() <= tolerance * scale,
            _ => g == w || (g.is_nan() && w.is_nan()),
        };
        assert!(ok, "{what}[{i}]: {g} against JAX's {w}");
    }
}

#[test]
fn composites_match_jax() {
    let record: Value = serde_json::from_str(include_str!("jax/numpy_reference.json")).unwrap();
    let cases = record["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 233);
    let names: std::collections::BTreeSet<&str> =
        cases.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), cases.len(), "case names must be distinct");
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let tolerance = case["tolerance"].as_f64().unwrap_or(1e-12);
        let args: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        assert_close(name, &function(name, &args), &case["value"], tolerance);
        if let Some(want) = case.get("grad") {
            let shape = data(&case["value"]).0;
            let rest = args[1..].to_vec();
            let g = grad(|x: Tensor| {
                let mut all = vec![x];
                all.extend(rest.iter().cloned());
                (function(name, &all) * weights(&shape)).sum(..)
            })(args[0].clone());
            assert_close(&format!("{name}'s gradient"), &g, want, tolerance);
        }
    }
}

/// Bad axes and shapes are errors naming the function and the caller's line.
#[test]
fn errors() {
    let v = Tensor::from_vec([3], vec![1.0f64, 2.0, 3.0]);
    for (what, t) in [
        ("tril", v.tril(0)),
        ("diagonal", v.diagonal()),
        ("repeat", v.repeat(2, 1)),
        ("roll", v.roll(1, -2)),
        ("glu", nn::glu(&v, 0)),
    ] {
        let e = t.to_array().unwrap_err().to_string();
        assert!(
            e.contains(what) && e.contains("tests/numpy_jax.rs"),
            "{what}: {e}"
        );
    }
    let m = Tensor::from_vec([2, 3], vec![1.0f64; 6]);
    for (spec, operands, why) in [
        ("ij,jk->ik", vec![&m], "2 operand subscripts for 1 operands"),
        ("ij,jk->ik", vec![&m, &m], "label 'j' has sizes 3 and 2"),
        ("ij->ii", vec![&m], "appears twice"),
        ("ij->q", vec![&m], "is no operand's"),
        ("i1", vec![&m], "letters and `...` only"),
        ("ijk", vec![&m], "names 3 dimensions of an operand of 2"),
    ] {
        let e = Tensor::einsum(spec, &operands)
            .to_array()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(why) && e.contains("tests/numpy_jax.rs"),
            "{spec}: {e}"
        );
    }
    // Malformed subscripts of every kind are errors, never panics.
    let scalar = Tensor::scalar(2.0f64);
    for spec in [
        "",
        "->",
        ",",
        "i,->i",
        "...,...",
        "i...j...",
        "...->......",
        "->i",
        "ii->ii",
        "é",
        "i.j",
        "ij->",
        "..i",
        "i,j,k->ijk",
        "abcdefghijklmnopqrstuvwxyz",
    ] {
        for operands in [vec![&m], vec![&m, &m], vec![&scalar], vec![]] {
            let _ = Tensor::einsum(spec, &operands).to_array();
        }
    }
    let e = Tensor::einsum("i...j...", &[&m])
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`...` at most once"), "{e}");
    assert_eq!(
        Tensor::einsum("", &[&scalar]).to_vec::<f64>().unwrap(),
        [2.0]
    );
    let six = Tensor::from_vec([6], vec![1.0f64; 6]);
    let pieces = six.split(4, 0);
    let e = pieces[0].to_array().unwrap_err().to_string();
    assert!(e.contains("split: 4 equal sections of the 6"), "{e}");
    let e = v.kron(&m).to_array().unwrap_err().to_string();
    assert!(e.contains("kron: two matrices"), "{e}");
    let empty = Tensor::from_vec([0], Vec::<f64>::new());
    assert_eq!(empty.roll(3, 0).shape(), &[0]);
    assert_eq!(Tensor::linspace(DType::F32, 0.0, 1.0, 0).shape(), &[0]);
    assert_eq!(
        Tensor::linspace(DType::F64, 2.0, 5.0, 1)
            .to_vec::<f64>()
            .unwrap(),
        [2.0]
    );
}

/// The new composites under `jit` (CPU executable) give their eager values, and `vmap` of a
/// padding and an associative scan computes each row as it does alone.
#[test]
fn compiled_and_batched() {
    let x = Tensor::from_vec(
        [3, 4],
        (0..12).map(|i| (i as f64 * 0.7).sin()).collect::<Vec<_>>(),
    );
    let f = |x: Tensor| {
        let padded = x.pad_with(&[(2, 3), (1, 2)], PadMode::Reflect);
        let scanned = lax::associative_scan(|a, b| a + b, padded, false, 1);
        let spectrum = fft::rfft(&scanned, Some(6), 0, Norm::Ortho);
        let (values, counts) = x.unique_counts(14, Some(0.0));
        (spectrum.real(), values, counts)
    };
    let eager = f(x.clone());
    let compiled = jit(f).call(x.clone()).unwrap();
    assert_eq!(
        eager.0.to_vec::<f64>().unwrap(),
        compiled.0.to_vec::<f64>().unwrap()
    );
    assert_eq!(
        eager.1.to_vec::<f64>().unwrap(),
        compiled.1.to_vec::<f64>().unwrap()
    );
    assert_eq!(
        eager.2.to_vec::<i32>().unwrap(),
        compiled.2.to_vec::<i32>().unwrap()
    );
    let row = |r: Tensor| {
        let padded = r.pad_with(&[(3, 2)], PadMode::Symmetric);
        lax::associative_scan(|a, b| a * b, padded, true, 0)
    };
    let batched = vmap(row)(x.clone());
    for i in 0..3 {
        let alone = row(x.slice(&[i, 0], &[i + 1, 4]).reshape([4]));
        let got = batched.slice(&[i, 0], &[i + 1, 9]).reshape([9]);
        assert_eq!(got.to_vec::<f64>().unwrap(), alone.to_vec::<f64>().unwrap());
    }
}

/// Sizes of zero and bad arguments: results or errors naming the function and the line,
/// never a panic.
#[test]
fn edges_and_errors_of_the_composites() {
    let empty = Tensor::from_vec([0], Vec::<f64>::new());
    assert_eq!(
        empty
            .pad_with(&[(2, 1)], PadMode::Constant(3.0))
            .to_vec::<f64>()
            .unwrap(),
        [3.0; 3]
    );
    let e = empty
        .pad_with(&[(2, 1)], PadMode::Wrap)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mode wrap cannot pad axis 0") && e.contains("tests/numpy_jax.rs"),
        "{e}"
    );
    let v = Tensor::from_vec([3], vec![1.0f64, 2.0, 3.0]);
    let e = v
        .pad_with(&[(1, 1), (1, 1)], PadMode::Edge)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 (before, after) widths"), "{e}");
    assert_eq!(
        empty
            .astype(DType::I32)
            .bincount(None, 3)
            .to_vec::<i32>()
            .unwrap(),
        [0, 0, 0]
    );
    let e = v.bincount(None, 3).to_array().unwrap_err().to_string();
    assert!(e.contains("bincount: integers are needed"), "{e}");
    let (values, counts) = empty.unique_counts(2, Some(-1.0));
    assert_eq!(values.to_vec::<f64>().unwrap(), [-1.0, -1.0]);
    assert_eq!(counts.to_vec::<i32>().unwrap(), [0, 0]);
    assert_eq!(v.unique_values(0, None).shape(), &[0]);
    let (counts, edges) = empty.histogram(2, None, None, false);
    assert_eq!(counts.to_vec::<f64>().unwrap(), [0.0, 0.0]);
    assert_eq!(edges.to_vec::<f64>().unwrap(), [0.0, 0.5, 1.0]);
    let e = v
        .interp(&v, &empty, None, None)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("interp: xp") && e.contains("tests/numpy_jax.rs"),
        "{e}"
    );
    assert_eq!(
        Tensor::from_vec([2], vec![0.0f64, 5.0])
            .interp(
                &Tensor::from_vec([1], vec![1.0f64]),
                &Tensor::from_vec([1], vec![4.0f64]),
                None,
                None
            )
            .to_vec::<f64>()
            .unwrap(),
        [4.0, 4.0]
    );
    for (what, t) in [
        ("fft: axes [1]", fft::fft(&v, None, 1, Norm::Backward)),
        (
            "fft: axes [0, 0]",
            fft::fftn(&v, None, Some(&[0, 0]), Norm::Backward),
        ),
        ("at length 0", fft::fft(&v, Some(0), 0, Norm::Backward)),
        (
            "2 lengths for 1 axes",
            fft::fftn(&v, Some(&[2, 2]), Some(&[0]), Norm::Backward),
        ),
        ("fftshift: axes [3]", fft::fftshift(&v, Some(&[3]))),
    ] {
        let e = t.to_array().unwrap_err().to_string();
        assert!(
            e.contains(what) && e.contains("tests/numpy_jax.rs"),
            "{what}: {e}"
        );
    }
    assert_eq!(
        fft::fft(&empty.reshape([0, 1]), None, 1, Norm::Ortho).shape(),
        &[0, 1]
    );
    // Scans of lengths 0 and 1 are their input.
    for n in [0, 1] {
        let x = Tensor::from_vec([n, 2], vec![2.0f64; 2 * n]);
        let s = lax::associative_scan(|a, b| a + b, x.clone(), false, 0);
        assert_eq!(s.to_vec::<f64>().unwrap(), x.to_vec::<f64>().unwrap());
    }
    let e = lax::associative_scan(
        |a: (Tensor, Tensor), b: (Tensor, Tensor)| (a.0 + b.0, a.1 + b.1),
        (v.clone(), Tensor::from_vec([2], vec![1.0f64, 2.0])),
        false,
        0,
    )
    .0
    .to_array()
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("every leaf needs length 3") && e.contains("tests/numpy_jax.rs"),
        "{e}"
    );
    let e = lax::associative_scan(|a, _b| a.sum(..), v.clone(), false, 0)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("associative_scan"), "{e}");
    let m23 = Tensor::from_vec([2, 3], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]);
    for (what, t) in [
        (
            "quantile: quantiles must be in [0, 1], not 1.5",
            v.quantile(&[1.5], None, QuantileMethod::Linear),
        ),
        (
            "quantile: axis 2",
            v.quantile(&[0.5], Some(2), QuantileMethod::Linear),
        ),
        ("median: axis 0 of f64[0] is empty", empty.median(None)),
        (
            "convolve: two non-empty vectors",
            v.convolve(&empty, ConvolveMode::Full),
        ),
        (
            "correlate: two non-empty vectors",
            m23.correlate(&v, ConvolveMode::Full),
        ),
        (
            "cov: a vector or matrix",
            m23.reshape([1, 2, 3]).cov(true, 1),
        ),
        ("cross: 3-vectors", m23.reshape([3, 2]).cross(&m23)),
        ("trapezoid: sample points", m23.trapezoid(Some(&v), 1.0, 0)),
        ("diff: axis 3", v.diff(1, 3)),
        ("polyval: coefficients", Tensor::scalar(1.0f64).polyval(&v)),
    ] {
        let e = t.to_array().unwrap_err().to_string();
        assert!(
            e.contains(what) && e.contains("tests/numpy_jax.rs"),
            "{what}: {e}"
        );
    }
    // Differences past the length are empty; zero-size selections are padding.
    assert_eq!(v.diff(5, 0).shape(), &[0]);
    assert_eq!(
        empty.flatnonzero(2, Some(7)).to_vec::<i32>().unwrap(),
        [7, 7]
    );
    assert_eq!(
        Tensor::zeros(DType::F32, [0, 3])
            .argwhere(1, -1)
            .to_vec::<i32>()
            .unwrap(),
        [-1, -1]
    );
    assert!(empty.nanmax(..).to_vec::<f64>().unwrap()[0].is_nan());
    // A failed operand's error comes back (its type need not halve with each level).
    let failed = v.slice(&[0], &[5]);
    let e = lax::associative_scan(|a, b| a + b, failed, false, 0)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("slice: dimension 0"), "{e}");
    let q = Tensor::zeros(DType::F32, [1, 2, 3, 4]);
    let k = Tensor::zeros(DType::F32, [1, 2, 2, 4]);
    let e = nn::dot_product_attention_with(&q, &k, &k, &AttentionOptions::default())
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("their heads dividing the queries'") && e.contains("tests/numpy_jax.rs"),
        "{e}"
    );
    let options = AttentionOptions {
        mask: Some(Tensor::ones(DType::F32, [2, 2])),
        ..AttentionOptions::default()
    };
    let e = nn::dot_product_attention_with(&q, &q, &q, &options)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("must be booleans"), "{e}");
}
