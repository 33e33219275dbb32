//! Convolutions (`Tensor::conv_general_dilated`, `Tensor::conv`) against JAX
//! (`tests/jax/generate_conv.py`, values in `tests/jax/conv_reference.json`): outputs and the
//! gradients of a weighted sum with respect to input and kernel, eagerly and under `jit`, over
//! layouts, strides, padding (negative included), both dilations and both kinds of groups;
//! the input gradient of a grouped case again by central differences in f64; integer and
//! empty convolutions; and bad parameters as errors naming the call.
//!
//! Tolerance 2e-5 relative to `max(|want|, 1)`: each output is a sum of at most 147 f32
//! products, which XLA and ferrax add in different orders (ferrax by kernel position, then
//! feature, as its one matrix product runs), and the gradients sum as many again.
#![allow(clippy::unwrap_used)]

use ferrax::{jit, value_and_grad, ConvDims, ConvPadding, Convolution, DType, Tensor};
use serde_json::Value;

#[path = "common/jax_values.rs"]
mod jax_values;
use jax_values::{tensor, usizes};

const TOLERANCE: f32 = 2e-5;

fn assert_close(got: &Tensor, want: &Tensor, what: &str) {
    jax_values::assert_close(got, want, TOLERANCE, what);
}

fn reference() -> Value {
    serde_json::from_str(include_str!("jax/conv_reference.json")).unwrap()
}

fn convolution(case: &Value) -> Convolution {
    let layouts: Vec<&str> = case["layouts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let dims = ConvDims::from_layouts(layouts[0], layouts[1], layouts[2]).unwrap();
    let mut conv = Convolution::new(dims);
    conv.strides = usizes(&case["strides"]);
    conv.padding = match case["padding"].as_str() {
        Some("valid") => ConvPadding::Valid,
        Some("same") => ConvPadding::Same,
        _ => ConvPadding::Explicit(
            case["padding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_i64().unwrap(), p[1].as_i64().unwrap()))
                .collect(),
        ),
    };
    if !case["lhs_dilation"].is_null() {
        conv.lhs_dilation = usizes(&case["lhs_dilation"]);
    }
    if !case["rhs_dilation"].is_null() {
        conv.rhs_dilation = usizes(&case["rhs_dilation"]);
    }
    conv.feature_groups = case["feature_groups"].as_u64().unwrap() as usize;
    conv.batch_groups = case["batch_groups"].as_u64().unwrap() as usize;
    conv
}

#[test]
fn convolutions_and_their_gradients_match_jax_eagerly_and_under_jit() {
    let cases = reference()["cases"].as_array().unwrap().clone();
    assert!(cases.len() >= 13);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let conv = convolution(case);
        let (x, k, w) = (
            tensor(&case["x"]),
            tensor(&case["kernel"]),
            tensor(&case["weights"]),
        );
        let want = tensor(&case["out"]);
        assert_close(
            &x.conv_general_dilated(&k, &conv),
            &want,
            &format!("{name} eager"),
        );
        let jitted = jit(|(x, k): (Tensor, Tensor)| x.conv_general_dilated(&k, &conv))
            .call((x.clone(), k.clone()))
            .unwrap();
        assert_close(&jitted, &want, &format!("{name} jit"));
        let weighted = |(x, k): (Tensor, Tensor)| (x.conv_general_dilated(&k, &conv) * &w).sum(..);
        let (_, (gx, gk)) = value_and_grad(weighted)((x.clone(), k.clone()));
        assert_close(&gx, &tensor(&case["grad_x"]), &format!("{name} d/dx eager"));
        assert_close(
            &gk,
            &tensor(&case["grad_kernel"]),
            &format!("{name} d/dk eager"),
        );
        let (cx, ck) = jit(|args: (Tensor, Tensor)| value_and_grad(weighted)(args).1)
            .call((x.clone(), k.clone()))
            .unwrap();
        assert_close(&cx, &tensor(&case["grad_x"]), &format!("{name} d/dx jit"));
        assert_close(
            &ck,
            &tensor(&case["grad_kernel"]),
            &format!("{name} d/dk jit"),
        );
    }
}

/// The gradient of a depthwise, strided, dilated convolution by central differences in f64,
/// independently of JAX.
#[test]
fn grouped_gradient_matches_central_differences() {
    let dims = ConvDims::from_layouts("NHWC", "HWIO", "NHWC").unwrap();
    let mut conv = Convolution::new(dims);
    conv.strides = vec![2, 1];
    conv.padding = ConvPadding::Same;
    conv.rhs_dilation = vec![1, 2];
    conv.feature_groups = 2;
    let x: Vec<f64> = (0..2 * 5 * 4 * 2)
        .map(|i| ((i * 7 % 11) as f64 - 5.0) / 4.0)
        .collect();
    let k: Vec<f64> = (0..3 * 2 * 4)
        .map(|i| ((i * 5 % 9) as f64 - 4.0) / 3.0)
        .collect();
    let k = Tensor::from_vec([3, 2, 1, 4], k);
    let value = |x: &Tensor| x.conv_general_dilated(&k, &conv).sin().sum(..);
    let x_t = Tensor::from_vec([2, 5, 4, 2], x.clone());
    let (_, grad) = value_and_grad(|x: Tensor| value(&x))(x_t);
    let grad = grad.to_vec::<f64>().unwrap();
    let h = 1e-6;
    for (i, &g) in grad.iter().enumerate() {
        let at = |d: f64| {
            let mut v = x.clone();
            v[i] += d;
            value(&Tensor::from_vec([2, 5, 4, 2], v))
                .to_vec::<f64>()
                .unwrap()[0]
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        assert!(
            (fd - g).abs() <= 1e-7 * fd.abs().max(1.0),
            "d/dx[{i}] = {g}, central differences {fd}"
        );
    }
}

/// Integer convolutions are exact; empty inputs, empty outputs and empty kernels give the
/// shapes XLA gives (zeros where nothing is summed).
#[test]
fn integer_and_empty_convolutions() {
    let x = Tensor::from_vec([1, 1, 5], vec![1i32, 2, 3, 4, 5]);
    let k = Tensor::from_vec([1, 1, 2], vec![10i32, 1]);
    let y = x.conv(&k, &[1], ConvPadding::Valid);
    assert_eq!(y.to_vec::<i32>().unwrap(), vec![12, 23, 34, 45]);
    let strided =
        jit(|(x, k): (Tensor, Tensor)| x.conv(&k, &[2], ConvPadding::Explicit(vec![(1, 0)])))
            .call((x.clone(), k.clone()))
            .unwrap();
    assert_eq!(strided.to_vec::<i32>().unwrap(), vec![1, 23, 45]);

    // Output with no positions: a kernel longer than the input.
    let long = Tensor::zeros(DType::F32, [2, 3, 4]);
    let kernel = Tensor::ones(DType::F32, [5, 3, 6]);
    assert_eq!(
        long.conv(&kernel, &[1], ConvPadding::Valid).shape(),
        &[2, 5, 0]
    );
    // An empty batch, and no input features: zeros of the output's shape.
    let empty = Tensor::zeros(DType::F32, [0, 3, 4]);
    let k3 = Tensor::ones(DType::F32, [2, 3, 2]);
    assert_eq!(
        empty.conv(&k3, &[1], ConvPadding::Valid).shape(),
        &[0, 2, 3]
    );
    let featureless = Tensor::zeros(DType::F32, [2, 0, 4]);
    let k0 = Tensor::ones(DType::F32, [2, 0, 2]);
    let y = jit(|(x, k): (Tensor, Tensor)| x.conv(&k, &[1], ConvPadding::Valid))
        .call((featureless, k0))
        .unwrap();
    assert_eq!(y.shape(), &[2, 2, 3]);
    assert!(y.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
}

#[test]
fn bad_convolutions_are_errors_naming_the_call() {
    let x = Tensor::zeros(DType::F32, [1, 3, 8, 8]);
    let err = |y: Tensor| y.to_array().unwrap_err().to_string();
    let e = err(x.conv(
        &Tensor::zeros(DType::F32, [4, 2, 3, 3]),
        &[1, 1],
        ConvPadding::Valid,
    ));
    assert!(
        e.contains("conv_general_dilated") && e.contains("3 features"),
        "{e}"
    );
    assert!(e.contains("conv.rs"), "{e}");
    let e = err(x.conv(
        &Tensor::zeros(DType::F32, [4, 3, 3]),
        &[1, 1],
        ConvPadding::Valid,
    ));
    assert!(e.contains("rank"), "{e}");
    let e = err(x.conv(
        &Tensor::zeros(DType::F64, [4, 3, 3, 3]),
        &[1, 1],
        ConvPadding::Valid,
    ));
    assert!(e.contains("element types"), "{e}");
    let e = err(x.conv(
        &Tensor::zeros(DType::F32, [4, 3, 3, 3]),
        &[0, 1],
        ConvPadding::Valid,
    ));
    assert!(e.contains("strides") && e.contains("positive"), "{e}");
    let e = err(x.conv(
        &Tensor::zeros(DType::F32, [4, 3, 3, 3]),
        &[1],
        ConvPadding::Valid,
    ));
    assert!(e.contains("1 entries for 2 spatial"), "{e}");
    let crop = ConvPadding::Explicit(vec![(-5, -5), (0, 0)]);
    let e = err(x.conv(&Tensor::zeros(DType::F32, [4, 3, 3, 3]), &[1, 1], crop));
    assert!(e.contains("crops"), "{e}");
    let e = err(x.conv(
        &Tensor::zeros(DType::F32, [4, 3, 65, 65]),
        &[1, 1],
        ConvPadding::Same,
    ));
    assert!(e.contains("more than 4096"), "{e}");
    let mut grouped = Convolution::new(ConvDims::channels_first(2));
    grouped.feature_groups = 2;
    let e = err(x.conv_general_dilated(&Tensor::zeros(DType::F32, [4, 1, 3, 3]), &grouped));
    assert!(e.contains("in each of 2 groups"), "{e}");
    // Sizes past what can be addressed, an empty kernel dimension over the largest padding,
    // and "SAME" padding of a transposed convolution: errors, never overflows.
    let huge = ConvPadding::Explicit(vec![(i64::MAX, 0), (i64::MAX, 0)]);
    let e = err(x.conv(&Tensor::zeros(DType::F32, [4, 3, 1, 1]), &[1, 1], huge));
    assert!(e.contains("too large to address"), "{e}");
    let one = Tensor::zeros(DType::F32, [1, 1, 1]);
    let widest = ConvPadding::Explicit(vec![(i64::MAX, i64::MAX)]);
    let e = err(one.conv(&Tensor::zeros(DType::F32, [1, 1, 0]), &[1], widest));
    assert!(e.contains("too large to address"), "{e}");
    let mut transposed = Convolution::new(ConvDims::channels_first(2));
    transposed.lhs_dilation = vec![2, 2];
    transposed.padding = ConvPadding::Same;
    let e = err(x.conv_general_dilated(&Tensor::zeros(DType::F32, [4, 3, 3, 3]), &transposed));
    assert!(e.contains("SAME") && e.contains("explicitly"), "{e}");
    assert!(ConvDims::from_layouts("NCHW", "OIHW", "NHC").is_err());
    assert!(ConvDims::from_layouts("NCHW", "OIHW", "NCWX").is_err());
}

/// A direct loop over `lax.conv_general_dilated`'s definition for `NC...`/`OI...`/`NC...`
/// layouts with two spatial dimensions (f64, so the order of summation does not matter).
fn reference_conv2d(
    x: &[f64],
    xd: [usize; 4],
    k: &[f64],
    kd: [usize; 4],
    conv: &Convolution,
) -> (Vec<f64>, [usize; 4]) {
    let ConvPadding::Explicit(pad) = &conv.padding else {
        unreachable!()
    };
    let (fg, bg) = (conv.feature_groups, conv.batch_groups);
    let [n, c, h, w] = xd;
    let [o, i, kh, kw] = kd;
    let size =
        |len: usize, d: usize, ld: usize, (lo, hi): (i64, i64), kl: usize, rd: usize, s: usize| {
            let dilated = if len == 0 {
                0
            } else {
                (len as i64 - 1) * ld as i64 + 1
            };
            let padded = dilated + lo + hi;
            let extent = (kl as i64 - 1) * rd as i64 + 1;
            let _ = d;
            if padded < extent {
                0
            } else {
                ((padded - extent) / s as i64 + 1) as usize
            }
        };
    let oh = size(
        h,
        0,
        conv.lhs_dilation[0],
        pad[0],
        kh,
        conv.rhs_dilation[0],
        conv.strides[0],
    );
    let ow = size(
        w,
        1,
        conv.lhs_dilation[1],
        pad[1],
        kw,
        conv.rhs_dilation[1],
        conv.strides[1],
    );
    let (on, og) = (n / bg, o / fg.max(bg));
    let mut out = vec![0f64; on * o * oh * ow];
    let source = |p: usize, j: usize, d: usize, len: usize| -> Option<usize> {
        let at = (p * conv.strides[d] + j * conv.rhs_dilation[d]) as i64 - pad[d].0;
        let ld = conv.lhs_dilation[d] as i64;
        (at >= 0 && at % ld == 0 && at / ld < len as i64).then(|| (at / ld) as usize)
    };
    for b in 0..on {
        for f in 0..o {
            let group = f / og;
            for y in 0..oh {
                for xx in 0..ow {
                    let mut acc = 0.0;
                    for ci in 0..i {
                        // The input feature (feature groups) and batch (batch groups) it reads.
                        let (feat, batch) = if fg > 1 {
                            (group * i + ci, b)
                        } else {
                            (ci, group * on + b)
                        };
                        for a in 0..kh {
                            for e in 0..kw {
                                let (Some(sy), Some(sx)) =
                                    (source(y, a, 0, h), source(xx, e, 1, w))
                                else {
                                    continue;
                                };
                                acc += x[((batch * c + feat) * h + sy) * w + sx]
                                    * k[((f * i + ci) * kh + a) * kw + e];
                            }
                        }
                    }
                    out[((b * o + f) * oh + y) * ow + xx] = acc;
                }
            }
        }
    }
    (out, [on, o, oh, ow])
}

/// 200 random two-dimensional convolutions (strides, padding of either sign, both dilations,
/// feature or batch groups, empty dimensions) in f64 against the loop, eagerly; a tenth also
/// under `jit`. Parameters that do not fit are errors, never panics.
#[test]
fn random_convolutions_match_a_loop_over_the_definition() {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let (mut checked, mut refused) = (0, 0);
    for case in 0..200 {
        let (fg, bg) = match next(3) {
            0 => (1 + next(3), 1),
            1 => (1, 1 + next(3)),
            _ => (1, 1),
        };
        let i = next(3) + usize::from(next(4) != 0);
        let (n, c) = (bg * next(3), fg * i);
        let o = fg.max(bg) * (1 + next(3));
        let xd = [n, c, next(7), next(7)];
        let kd = [o, i, 1 + next(3), 1 + next(3)];
        let mut conv = Convolution::new(ConvDims::channels_first(2));
        conv.strides = vec![1 + next(3), 1 + next(3)];
        conv.lhs_dilation = vec![1 + next(2), 1 + next(2)];
        conv.rhs_dilation = vec![1 + next(2), 1 + next(2)];
        let p = |r: usize| r as i64 - 2;
        conv.padding =
            ConvPadding::Explicit(vec![(p(next(5)), p(next(5))), (p(next(5)), p(next(5)))]);
        conv.feature_groups = fg;
        conv.batch_groups = bg;
        let x: Vec<f64> = (0..xd.iter().product::<usize>())
            .map(|_| next(9) as f64 - 4.0)
            .collect();
        let k: Vec<f64> = (0..kd.iter().product::<usize>())
            .map(|_| next(7) as f64 - 3.0)
            .collect();
        let (xt, kt) = (
            Tensor::from_vec(xd, x.clone()),
            Tensor::from_vec(kd, k.clone()),
        );
        let got = xt.conv_general_dilated(&kt, &conv);
        let Ok(array) = got.to_array() else {
            refused += 1;
            continue;
        };
        let (want, shape) = reference_conv2d(&x, xd, &k, kd, &conv);
        assert_eq!(array.dims(), shape, "case {case}: {conv:?}");
        assert_eq!(
            array.to_vec::<f64>().unwrap(),
            want,
            "case {case}: {conv:?}"
        );
        if case % 10 == 0 {
            let jitted = jit(|(x, k): (Tensor, Tensor)| x.conv_general_dilated(&k, &conv))
                .call((xt, kt))
                .unwrap();
            assert_eq!(jitted.to_vec::<f64>().unwrap(), want, "case {case} jit");
        }
        checked += 1;
    }
    assert!(checked > 150, "{checked} checked, {refused} refused");
}

/// `vmap` over a batch of kernels (a convolution per example, as per-example models have)
/// equals the convolutions one by one.
#[test]
fn vmapped_convolutions_equal_each_one() {
    let x = Tensor::from_vec(
        [1, 2, 5, 5],
        (0..50).map(|v| (v % 7) as f32 - 3.0).collect::<Vec<_>>(),
    );
    let kernels = Tensor::from_vec(
        [3, 4, 2, 2, 2],
        (0..96).map(|v| (v % 5) as f32 - 2.0).collect::<Vec<_>>(),
    );
    let same = ConvPadding::Same;
    let batched = ferrax::vmap(|k: Tensor| x.conv(&k, &[1, 2], same.clone()))(kernels.clone());
    assert_eq!(batched.shape(), &[3, 1, 4, 5, 3]);
    let got = batched.to_vec::<f32>().unwrap();
    let per = got.len() / 3;
    for e in 0..3 {
        let k = kernels
            .slice(&[e, 0, 0, 0, 0], &[e + 1, 4, 2, 2, 2])
            .reshape([4, 2, 2, 2]);
        let one = x.conv(&k, &[1, 2], same.clone()).to_vec::<f32>().unwrap();
        assert_eq!(&got[e * per..(e + 1) * per], one.as_slice(), "example {e}");
    }
}

/// A strided, dilated, grouped convolution and its gradients, as traced programs, on the
/// emulated GPU against the interpreter (the gather of the patches, the index kernel, the
/// product and the col2im scatter-add of the input's gradient).
#[test]
fn convolutions_run_on_the_emulated_gpu() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    let dims = ConvDims::from_layouts("NHWC", "HWIO", "NHWC").unwrap();
    let mut conv = Convolution::new(dims);
    conv.strides = vec![2, 1];
    conv.padding = ConvPadding::Explicit(vec![(1, 0), (2, 1)]);
    conv.rhs_dilation = vec![1, 2];
    conv.feature_groups = 2;
    let loss = move |(x, k): (Tensor, Tensor)| x.conv_general_dilated(&k, &conv).square().sum(..);
    let func = ferrax::trace(
        move |(x, k): (Tensor, Tensor)| ferrax::value_and_grad(loss)((x, k)),
        &(
            Tensor::spec(DType::F32, [2, 7, 6, 4]),
            Tensor::spec(DType::F32, [3, 2, 2, 6]),
        ),
    )
    .unwrap();
    let x: Vec<f32> = (0..2 * 7 * 6 * 4)
        .map(|i| ((i * 5) % 11) as f32 - 5.0)
        .collect();
    let k: Vec<f32> = (0..3 * 2 * 2 * 6)
        .map(|i| ((i * 3) % 7) as f32 - 3.0)
        .collect();
    let args = vec![
        ferrax::Array::from_vec([2, 7, 6, 4], x).unwrap(),
        ferrax::Array::from_vec([3, 2, 2, 6], k).unwrap(),
    ];
    let want = ferrax::runtime::interpret(&func, &args).unwrap();
    let emulator = ferrax_ptx_emu::Emulator::default();
    let got = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST)
        .unwrap()
        .run(&args)
        .unwrap();
    // Small integers: every sum is exact in f32, in any order.
    assert_eq!(got, want);
}
