//! Derivatives of every op against central finite differences in f64, forward against reverse
//! mode, higher order, and the printed gradient IR; `custom_vjp` and `custom_jvp` rules (the
//! latter against values JAX computed, `tests/jax/generate_custom_jvp.py`).
//!
//! Finite differences use h = 1e-6: truncation error ~h² and rounding error ~1e-16/h give
//! about 1e-10 absolute error on these O(1) functions, so 1e-7 relative (floor 1e-7) is a
//! tight bound that a wrong rule (off by a factor, a sign, a transpose) cannot meet.
#![allow(clippy::unwrap_used)]

mod common;

use common::numbers::uniform as values;
use common::Gen;

use ferrax::{
    grad, grad_with_aux, hessian, jit, jvp, nn, trace, value_and_grad, value_and_grad_with_aux,
    vjp, vmap, DType, IndexMode, Tensor,
};

fn t64(shape: &[usize], data: Vec<f64>) -> Tensor {
    Tensor::from_vec(shape.to_vec(), data)
}

fn scalar(t: &Tensor) -> f64 {
    t.to_vec::<f64>().unwrap()[0]
}

/// Checks `grad(f)` at `xs` against central differences, and `jvp` against `grad`.
fn check_grad(name: &str, f: impl Fn(Vec<Tensor>) -> Tensor, xs: Vec<Tensor>) {
    let grads = grad(&f)(xs.clone());
    let h = 1e-6;
    for (k, x) in xs.iter().enumerate() {
        let base = x.to_vec::<f64>().unwrap();
        let g = grads[k]
            .to_vec::<f64>()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(grads[k].shape(), x.shape(), "{name}: gradient shape");
        for i in 0..base.len() {
            let eval = |delta: f64| {
                let mut v = base.clone();
                v[i] += delta;
                let mut args = xs.clone();
                args[k] = t64(x.shape(), v);
                scalar(&f(args))
            };
            let fd = (eval(h) - eval(-h)) / (2.0 * h);
            let tol = 1e-7 * fd.abs().max(1.0);
            assert!(
                (g[i] - fd).abs() <= tol,
                "{name}: d/dx{k}[{i}] = {} but finite differences give {fd}",
                g[i]
            );
        }
    }
    // Forward mode along a random direction agrees with the gradient.
    let dirs: Vec<Tensor> = xs
        .iter()
        .enumerate()
        .map(|(k, x)| t64(x.shape(), values(x.numel(), 100 + k as u64, -1.0, 1.0)))
        .collect();
    let (_, tangent) = jvp(&f, &xs, &dirs).unwrap();
    let expected: f64 = grads
        .iter()
        .zip(&dirs)
        .map(|(g, d)| {
            let (g, d) = (g.to_vec::<f64>().unwrap(), d.to_vec::<f64>().unwrap());
            g.iter().zip(&d).map(|(a, b)| a * b).sum::<f64>()
        })
        .sum();
    let got = scalar(&tangent);
    assert!(
        (got - expected).abs() <= 1e-10 * expected.abs().max(1.0),
        "{name}: jvp gives {got}, grad·v gives {expected}"
    );
}

/// A weighted sum so that every output element gets a distinct cotangent.
fn weighted(y: &Tensor) -> Tensor {
    let w = t64(y.shape(), values(y.numel(), 999, 0.5, 1.5));
    (y * &w).sum(..)
}

macro_rules! unary_fd {
    ($($name:ident: $lo:expr, $hi:expr => |$x:ident| $body:expr;)*) => {$(
        #[test]
        fn $name() {
            let x = t64(&[2, 3], values(6, 1, $lo, $hi));
            check_grad(stringify!($name), |v| { let $x = &v[0]; weighted(&$body) }, vec![x]);
        }
    )*};
}

unary_fd! {
    d_neg: -1.0, 1.0 => |x| -x;
    d_abs: 0.2, 1.0 => |x| (x - 0.6).abs();
    d_exp: -1.0, 1.0 => |x| x.exp();
    d_expm1: -1.0, 1.0 => |x| x.expm1();
    d_log: 0.5, 2.0 => |x| x.log();
    d_log1p: -0.5, 1.0 => |x| x.log1p();
    d_sqrt: 0.5, 2.0 => |x| x.sqrt();
    d_rsqrt: 0.5, 2.0 => |x| x.rsqrt();
    d_tanh: -2.0, 2.0 => |x| x.tanh();
    d_sigmoid: -3.0, 3.0 => |x| x.sigmoid();
    d_sin: -3.0, 3.0 => |x| x.sin();
    d_cos: -3.0, 3.0 => |x| x.cos();
    d_tan: -1.2, 1.2 => |x| x.tan();
    d_asin: -0.9, 0.9 => |x| x.asin();
    d_acos: -0.9, 0.9 => |x| x.acos();
    d_atan: -3.0, 3.0 => |x| x.atan();
    d_sinh: -2.0, 2.0 => |x| x.sinh();
    d_cosh: -2.0, 2.0 => |x| x.cosh();
    d_asinh: -3.0, 3.0 => |x| x.asinh();
    d_acosh: 1.1, 3.0 => |x| x.acosh();
    d_atanh: -0.9, 0.9 => |x| x.atanh();
    d_cbrt: 0.2, 2.0 => |x| x.cbrt();
    d_cbrt_negative: -2.0, -0.2 => |x| x.cbrt() * 2.0;
    d_square_and_constants: -1.0, 1.0 => |x| x.square() * 3.0 - 1.0 / (x + 4.0);
    d_rounding_is_flat: 0.1, 0.4 => |x| x.floor() + x.ceil() + x.round() + x.round_even() + x.sign() + x;
    d_convert: -1.0, 1.0 => |x| x.astype(DType::F32).astype(DType::F64) * 0.0 + x.stop_gradient() * 0.0 + x;
}

macro_rules! binary_fd {
    ($($name:ident: ($alo:expr, $ahi:expr), ($blo:expr, $bhi:expr) => |$a:ident, $b:ident| $body:expr;)*) => {$(
        #[test]
        fn $name() {
            let a = t64(&[2, 3], values(6, 2, $alo, $ahi));
            let b = t64(&[2, 3], values(6, 3, $blo, $bhi));
            check_grad(stringify!($name), |v| { let ($a, $b) = (&v[0], &v[1]); weighted(&$body) }, vec![a, b]);
        }
    )*};
}

binary_fd! {
    d_add: (-1.0, 1.0), (-1.0, 1.0) => |a, b| a + b;
    d_sub: (-1.0, 1.0), (-1.0, 1.0) => |a, b| a - b;
    d_mul: (-1.0, 1.0), (-1.0, 1.0) => |a, b| a * b;
    d_div: (-1.0, 1.0), (0.5, 2.0) => |a, b| a / b;
    d_rem: (2.1, 2.9), (0.7, 0.9) => |a, b| a % b;
    d_pow: (0.5, 2.0), (-1.5, 1.5) => |a, b| a.pow(b);
    d_maximum: (-1.0, 1.0), (-1.0, 1.0) => |a, b| a.maximum(b);
    d_atan2: (-1.0, 1.0), (0.2, 1.0) => |a, b| a.atan2(b) + b.atan2(a * 2.0 - 3.0);
    d_minimum: (-1.0, 1.0), (-1.0, 1.0) => |a, b| a.minimum(b);
    d_select: (-1.0, 1.0), (-1.0, 1.0) => |a, b| a.greater(b).select(a * 2.0, b * b);
    d_clip: (-2.0, 2.0), (-1.0, 1.0) => |a, b| a.clip(-0.9, b.abs() + 0.05);
    d_broadcasting: (-1.0, 1.0), (-1.0, 1.0) => |a, b| a * b.sum(0) + b.max_keepdims(1);
}

#[test]
fn d_movement_ops() {
    let x = t64(&[2, 3, 4], values(24, 4, -1.0, 1.0));
    check_grad(
        "movement",
        |v| {
            let x = &v[0];
            let y = x.transpose([2, 0, 1]).reshape([4, 6]);
            let s = y.slice_strided(&[1, 0], &[4, 5], &[2, 2]);
            let p = s.pad(&[(1, -1, 1), (-1, 2, 0)], 0.25);
            let c = Tensor::concatenate(&[&p, &p.exp()], 1);
            let b = x.sum(2).expand_dims(0).broadcast_to([3, 2, 3]);
            weighted(&c) + weighted(&b) + weighted(&x.t())
        },
        vec![x.clone()],
    );
    // A reverse is its own transpose; weights that differ per position catch a rule that
    // forgets to reverse the cotangent.
    check_grad(
        "reverse",
        |v| {
            let x = &v[0];
            weighted(&x.flip([0, 2]).exp()) + weighted(&(x.flip([-2]) * x))
        },
        vec![x],
    );
}

#[test]
fn d_pad_value() {
    let x = t64(&[3], values(3, 5, -1.0, 1.0));
    let v = t64(&[], vec![0.3]);
    check_grad(
        "pad value",
        |a| {
            let padded = ferrax::Tensor::concatenate(&[&a[0], &a[1].broadcast_to([2])], 0);
            weighted(&padded.pad(&[(2, -1, 1)], 0.0))
                + weighted(&(a[0].pad(&[(1, 1, 2)], 0.0) * &a[1]))
        },
        vec![x, v],
    );
}

#[test]
fn d_reductions() {
    let x = t64(&[2, 3, 4], values(24, 6, 0.5, 1.5));
    check_grad(
        "reductions",
        |v| {
            let x = &v[0];
            weighted(&x.sum([0, 2]))
                + weighted(&x.max(1))
                + weighted(&x.min([0, 1]))
                + weighted(&x.prod(2))
                + x.mean(..)
        },
        vec![x],
    );
}

#[test]
fn d_prod_with_a_zero() {
    let x = t64(&[4], vec![2.0, 0.0, 3.0, 0.5]);
    let g = grad(|x: Tensor| x.prod(..))(x);
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![0.0, 3.0, 0.0, 0.0]);
}

#[test]
fn max_ties_split_the_gradient_as_jax_does() {
    let x = t64(&[3], vec![1.0, 3.0, 3.0]);
    let g = grad(|x: Tensor| x.max(..))(x.clone());
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![0.0, 0.5, 0.5]);
    let g = grad(|x: Tensor| x.maximum(x.reverse_for_test()).sum(..))(t64(&[2], vec![2.0, 2.0]));
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![1.0, 1.0]);
    let (ga, gb) = grad(|(a, b): (Tensor, Tensor)| a.maximum(&b).sum(..))((
        t64(&[1], vec![1.0]),
        t64(&[1], vec![1.0]),
    ));
    assert_eq!(
        (ga.to_vec::<f64>().unwrap(), gb.to_vec::<f64>().unwrap()),
        (vec![0.5], vec![0.5])
    );
}

trait ReverseForTest {
    fn reverse_for_test(&self) -> Tensor;
}

impl ReverseForTest for Tensor {
    fn reverse_for_test(&self) -> Tensor {
        let n = self.shape()[0];
        let parts: Vec<Tensor> = (0..n).rev().map(|i| self.slice(&[i], &[i + 1])).collect();
        Tensor::concatenate(&parts, 0)
    }
}

#[test]
fn d_dot_general() {
    let a = t64(&[2, 3, 4], values(24, 7, -1.0, 1.0));
    let b = t64(&[4, 5], values(20, 8, -1.0, 1.0));
    let c = t64(&[3, 2, 5], values(30, 9, -1.0, 1.0));
    check_grad(
        "dot_general",
        |v| {
            let ab = v[0].matmul(&v[1]);
            let dims = ferrax::ir::DotDims {
                lhs_batch: vec![0],
                rhs_batch: vec![1],
                lhs_contract: vec![1, 2],
                rhs_contract: vec![0, 2],
            };
            let batched = ab.dot_general(&v[2], dims);
            weighted(&ab) + weighted(&batched) + weighted(&v[1].matmul(&v[1].t()))
        },
        vec![a, b, c],
    );
}

/// Every side, triangle, transpose and unit diagonal, with a batch dimension: the gradient
/// reaches only the triangle the solve reads (finite differences of the other entries are 0).
#[test]
fn d_triangular_solve() {
    for bits in 0..16u32 {
        let s = ferrax::ir::TriangularSolve {
            left_side: bits & 1 != 0,
            lower: bits & 2 != 0,
            transpose_a: bits & 4 != 0,
            conjugate_a: false,
            unit_diagonal: bits & 8 != 0,
        };
        let mut a = values(18, 12, -1.0, 1.0);
        for k in [0, 4, 8, 9, 13, 17] {
            a[k] += 3.0;
        }
        let b_dims = if s.left_side { [2, 3, 2] } else { [2, 2, 3] };
        let b = t64(&b_dims, values(12, 13, -1.0, 1.0));
        check_grad(
            &format!("triangular_solve {s:?}"),
            |v| weighted(&v[0].triangular_solve(&v[1], s)),
            vec![t64(&[2, 3, 3], a), b],
        );
    }
}

/// `cholesky` (symmetrized, as `jnp.linalg.cholesky`) of a batch of positive-definite
/// matrices, alone and solving a system with it.
#[test]
fn d_cholesky() {
    let mut a = values(18, 14, -0.5, 0.5);
    for k in [0, 4, 8, 9, 13, 17] {
        a[k] += 3.0;
    }
    let b = t64(&[2, 3, 2], values(12, 15, -1.0, 1.0));
    check_grad(
        "cholesky",
        |v| {
            let l = v[0].cholesky();
            let lower = ferrax::ir::TriangularSolve {
                left_side: true,
                lower: true,
                ..Default::default()
            };
            weighted(&l) + weighted(&l.triangular_solve(&v[1], lower))
        },
        vec![t64(&[2, 3, 3], a), b],
    );
}

#[test]
fn d_composites() {
    let x = t64(&[3, 5], values(15, 10, -2.0, 2.0));
    let g = t64(&[5], values(5, 11, 0.5, 1.5));
    let b = t64(&[5], values(5, 12, -0.5, 0.5));
    check_grad(
        "softmax, logsumexp, layernorm",
        |v| {
            weighted(&nn::softmax(&v[0], -1))
                + weighted(&nn::logsumexp(&v[0], 0))
                + weighted(&common::layernorm(&v[0], &v[1], &v[2]))
                + nn::log_softmax(&v[0], 1).sum(..)
        },
        vec![x, g, b],
    );
}

#[test]
fn second_derivatives() {
    let x = t64(&[], vec![0.7]);
    let d2 = grad(grad(|x: Tensor| x.sin()))(x.clone());
    assert!((scalar(&d2) + 0.7f64.sin()).abs() < 1e-15);
    let d3 = grad(grad(grad(|x: Tensor| x.exp() * x)))(x.clone());
    assert!((scalar(&d3) - 0.7f64.exp() * 3.7).abs() < 1e-13);
    let h = hessian(|x: Tensor| (x.square() * &x).sum(..) + x.prod(..))(&t64(
        &[3],
        vec![1.0, 2.0, 3.0],
    ))
    .unwrap();
    assert_eq!(h.shape(), &[3, 3]);
    // d²/dxi² Σx³ = 6xi; d²/dxi dxj Πx = Π of the third element.
    assert_eq!(
        h.to_vec::<f64>().unwrap(),
        vec![6.0, 3.0, 2.0, 3.0, 12.0, 1.0, 2.0, 1.0, 18.0]
    );
}

#[test]
fn hessian_vector_product_by_jvp_of_grad() {
    let x = t64(&[3], vec![0.5, -1.0, 2.0]);
    let v = t64(&[3], vec![1.0, 0.0, -1.0]);
    let f = |x: Tensor| (x.tanh() * x.sum(..)).sum(..);
    let (_, hv) = jvp(grad(f), &x, &v).unwrap();
    let h = hessian(f)(&x).unwrap().to_vec::<f64>().unwrap();
    let vv = v.to_vec::<f64>().unwrap();
    let want: Vec<f64> = (0..3)
        .map(|i| (0..3).map(|j| h[i * 3 + j] * vv[j]).sum())
        .collect();
    for (a, b) in hv.to_vec::<f64>().unwrap().iter().zip(&want) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

#[test]
fn vjp_pullback_and_value_and_grad() {
    let x = t64(&[2], vec![1.0, 2.0]);
    let (y, pullback) = vjp(|x: Tensor| (x.exp(), x.sum(..)), &x).unwrap();
    assert_eq!(y.1.to_vec::<f64>().unwrap(), vec![3.0]);
    let ct = (t64(&[2], vec![1.0, 0.0]), t64(&[], vec![2.0]));
    let gx = pullback.call(&ct).unwrap();
    assert_eq!(gx.to_vec::<f64>().unwrap(), vec![1f64.exp() + 2.0, 2.0]);
    let (value, g) = value_and_grad(|x: Tensor| x.square().sum(..))(x);
    assert_eq!(scalar(&value), 5.0);
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![2.0, 4.0]);
}

#[test]
fn grad_of_struct_parameters_under_jit() {
    let params = common::Mlp {
        layers: vec![
            common::Layer {
                w: t64(&[2, 3], values(6, 20, -1.0, 1.0)),
                b: t64(&[3], values(3, 21, -0.1, 0.1)),
            },
            common::Layer {
                w: t64(&[3, 2], values(6, 22, -1.0, 1.0)),
                b: t64(&[2], values(2, 23, -0.1, 0.1)),
            },
        ],
    };
    let x = t64(&[4, 2], values(8, 24, -1.0, 1.0));
    let y = t64(&[4, 2], vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]);
    let loss = |(p, x, y): (common::Mlp, Tensor, Tensor)| common::mlp_loss(&p, &x, &y);
    let step = jit(move |(p, x, y): (common::Mlp, Tensor, Tensor)| grad(loss)((p, x, y)).0);
    let g_jit = step.call((params.clone(), x.clone(), y.clone())).unwrap();
    let g_eager = grad(loss)((params.clone(), x.clone(), y.clone())).0;
    // jit runs the products on `gemm`, whose f64 accumulation order differs from the
    // interpreter's: equal to rounding.
    let close = |a: &Tensor, b: &Tensor| {
        let (a, b) = (a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-13 * y.abs().max(1.0), "{x} vs {y}");
        }
    };
    for (a, b) in g_jit.layers.iter().zip(&g_eager.layers) {
        close(&a.w, &b.w);
        close(&a.b, &b.b);
    }
    // And against finite differences on one weight.
    let h = 1e-6;
    let bump = |d: f64| {
        let mut p = params.clone();
        let mut w = p.layers[0].w.to_vec::<f64>().unwrap();
        w[4] += d;
        p.layers[0].w = t64(&[2, 3], w);
        scalar(&loss((p, x.clone(), y.clone())))
    };
    let fd = (bump(h) - bump(-h)) / (2.0 * h);
    let g = g_jit.layers[0].w.to_vec::<f64>().unwrap()[4];
    assert!((g - fd).abs() < 1e-8, "{g} vs {fd}");
}

#[test]
fn gradient_ir_of_the_mlp_loss() {
    let p = common::mlp_params(&[4, 8, 8, 3]);
    let ir = trace(
        |(p, x, y): (common::Mlp, Tensor, Tensor)| {
            grad(|p: common::Mlp| common::mlp_loss(&p, &x, &y))(p)
        },
        &(p, common::spec(&[2, 4]), common::spec(&[2, 3])),
    )
    .unwrap();
    insta::assert_snapshot!(ir.to_string());
}

#[test]
fn grad_errors_are_reported() {
    let r = trace(
        |x: Tensor| grad(|x: Tensor| x.exp())(x),
        &common::spec(&[3]),
    );
    let msg = r.unwrap_err().to_string();
    assert!(
        msg.contains(
            "grad needs a function returning a real float scalar, this one returns f32[3]"
        ),
        "{msg}"
    );
    assert!(msg.contains("autodiff.rs:"), "{msg}");
}

#[test]
fn auxiliary_outputs_are_returned_undifferentiated() {
    let x = t64(&[3], vec![1.0, 2.0, 3.0]);
    let f = |x: Tensor| {
        let y = x.square();
        (y.sum(..), (y.clone(), x.max(..)))
    };
    let ((value, (squares, top)), g) = value_and_grad_with_aux(f)(x.clone());
    assert_eq!(scalar(&value), 14.0);
    assert_eq!(squares.to_vec::<f64>().unwrap(), vec![1.0, 4.0, 9.0]);
    assert_eq!(scalar(&top), 3.0);
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![2.0, 4.0, 6.0]);
    let (g2, (_, top2)) = jit(move |x: Tensor| grad_with_aux(f)(x)).call(x).unwrap();
    assert_eq!(g2.to_vec::<f64>().unwrap(), vec![2.0, 4.0, 6.0]);
    assert_eq!(scalar(&top2), 3.0);
}

#[test]
fn aux_structure_survives_a_failed_trace() {
    let r = trace(
        |x: Tensor| {
            let (g, aux) = grad_with_aux(|x: Tensor| (x.sum(..), x.reshape([7])))(x);
            (g, aux)
        },
        &common::spec(&[2, 3]),
    );
    assert!(r
        .unwrap_err()
        .to_string()
        .contains("reshape: cannot reshape f32[2,3]"));
}

/// softplus(x) = log(1 + exp(x)), whose naive derivative exp(x)/(1+exp(x)) is NaN for large x.
fn stable_softplus() -> impl Fn(Tensor) -> Tensor {
    ferrax::custom_vjp(
        |x: Tensor| x.exp().log1p(),
        |x: Tensor| (x.exp().log1p(), x.sigmoid()),
        |s: Tensor, g: Tensor| g * s,
    )
}

#[test]
fn custom_vjp_rule_is_used_by_grad_and_jit() {
    let x = t64(&[3], vec![-2.0, 0.5, 1000.0]);
    let naive = grad(|x: Tensor| x.exp().log1p().sum(..))(x.clone())
        .to_vec::<f64>()
        .unwrap();
    assert!(
        naive[2].is_nan(),
        "the naive derivative overflows: {naive:?}"
    );
    let sp = stable_softplus();
    let g = grad(|x: Tensor| sp(x).sum(..))(x.clone())
        .to_vec::<f64>()
        .unwrap();
    let want: Vec<f64> = [-2.0f64, 0.5, 1000.0]
        .iter()
        .map(|v| 1.0 / (1.0 + (-v).exp()))
        .collect();
    assert_eq!(g, want);
    let sp = stable_softplus();
    let jitted = jit(move |x: Tensor| grad(|x: Tensor| sp(x).sum(..))(x))
        .call(x.clone())
        .unwrap();
    assert_eq!(jitted.to_vec::<f64>().unwrap(), want);
    // Values are the primal function's.
    let sp = stable_softplus();
    assert_eq!(
        sp(t64(&[], vec![0.0])).to_vec::<f64>().unwrap(),
        vec![2f64.ln()]
    );
}

#[test]
fn custom_vjp_gradient_clipping_over_a_tree() {
    let clip = ferrax::custom_vjp(
        |(a, b): (Tensor, Tensor)| (&a * &b).sum(..),
        |(a, b): (Tensor, Tensor)| ((&a * &b).sum(..), (a, b)),
        |(a, b): (Tensor, Tensor), g: Tensor| {
            ((&b * &g).clip(-1.0, 1.0), (&a * &g).clip(-1.0, 1.0))
        },
    );
    let a = t64(&[2], vec![3.0, -0.25]);
    let b = t64(&[2], vec![0.5, -4.0]);
    let (ga, gb) = grad(|p: (Tensor, Tensor)| clip(p) * 2.0)((a, b));
    assert_eq!(ga.to_vec::<f64>().unwrap(), vec![1.0, -1.0]);
    assert_eq!(gb.to_vec::<f64>().unwrap(), vec![1.0, -0.5]);
}

#[test]
fn custom_vjp_second_order_and_forward_mode() {
    // Second derivative through the rule: d/dx sigmoid(x) = s (1 - s).
    let sp = stable_softplus();
    let d2 = grad(grad(|x: Tensor| sp(x)))(t64(&[], vec![0.3]))
        .to_vec::<f64>()
        .unwrap()[0];
    let s = 1.0 / (1.0 + (-0.3f64).exp());
    assert!((d2 - s * (1.0 - s)).abs() < 1e-15, "{d2}");
    // Forward mode differentiates the primal function.
    let sp = stable_softplus();
    let (_, t) = jvp(
        |x: Tensor| sp(x),
        &t64(&[], vec![0.3]),
        &t64(&[], vec![2.0]),
    )
    .unwrap();
    assert!((scalar(&t) - 2.0 * s).abs() < 1e-15);
}

#[test]
fn custom_vjp_ir_prints_nested_programs_and_round_trips() {
    let sp = stable_softplus();
    let ir = trace(|x: Tensor| sp(x), &common::spec(&[2])).unwrap();
    let text = ir.to_string();
    assert_eq!(ferrax::ir::parse_func(&text).unwrap(), ir);
    insta::assert_snapshot!(text);
}

#[test]
fn custom_vjp_misuse_is_reported() {
    let bad = ferrax::custom_vjp(
        |x: Tensor| x.exp(),
        |x: Tensor| (x.exp(), x.clone()),
        |_: Tensor, g: Tensor| g.sum(..),
    );
    let err = trace(|x: Tensor| bad(x), &common::spec(&[3]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("bwd must return one cotangent per operand (f32[3]), it returns (f32[])"),
        "{err}"
    );
}

/// `scaled_sin(x, y) = sin(x)·y` with a forward-mode rule that is not its derivative (the x
/// term tripled and reading y²), as in `tests/jax/generate_custom_jvp.py`.
fn scaled_sin() -> impl Fn((Tensor, Tensor)) -> Tensor {
    ferrax::custom_jvp(
        |(x, y): (Tensor, Tensor)| x.sin() * y,
        |(x, y): (Tensor, Tensor), (tx, ty): (Tensor, Tensor)| {
            let rule = x.cos() * &y * &y * 3.0 * tx + x.sin() * ty;
            (x.sin() * y, rule)
        },
    )
}

fn reference_vector(record: &serde_json::Value, key: &str) -> Vec<f64> {
    record[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

fn assert_near(what: &str, got: &Tensor, want: &[f64]) {
    let got = got.to_vec::<f64>().unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-13 * w.abs().max(1.0),
            "{what}: {got:?} against JAX's {want:?}"
        );
    }
}

/// Both modes, second and third orders, `vmap` and `jit` use the rule as JAX does: values
/// JAX computed for a rule that differs from the true derivative.
#[test]
fn custom_jvp_matches_jax() {
    let record: serde_json::Value =
        serde_json::from_str(include_str!("jax/custom_jvp_reference.json")).unwrap();
    let v = |key: &str| t64(&[3], reference_vector(&record, key));
    let (x, y) = (v("x"), v("y"));
    let f = scaled_sin();
    let loss =
        |(x, y): (Tensor, Tensor)| (f((x, y)) * Tensor::linspace(DType::F64, 1.0, 3.0, 3)).sum(..);
    let (gx, gy) = grad(loss)((x.clone(), y.clone()));
    assert_near("grad x", &gx, &reference_vector(&record, "grad_x"));
    assert_near("grad y", &gy, &reference_vector(&record, "grad_y"));
    let f2 = scaled_sin();
    let jitted = jit(move |(x, y): (Tensor, Tensor)| {
        grad(|(x, y): (Tensor, Tensor)| {
            (f2((x, y)) * Tensor::linspace(DType::F64, 1.0, 3.0, 3)).sum(..)
        })((x, y))
    })
    .call((x.clone(), y.clone()))
    .unwrap();
    assert_near(
        "jit grad x",
        &jitted.0,
        &reference_vector(&record, "grad_x"),
    );
    let (_, tangent) = jvp(
        |p: (Tensor, Tensor)| f(p),
        &(x.clone(), y.clone()),
        &(v("tx"), v("ty")),
    )
    .unwrap();
    assert_near("jvp", &tangent, &reference_vector(&record, "jvp"));
    // Elementwise derivatives of the scalar function, batched with vmap.
    let scalar_f = scaled_sin();
    let d1 = |x: Tensor, y: Tensor| grad(|x: Tensor| scalar_f((x, y.clone())))(x);
    let d2 = vmap(|(x, y): (Tensor, Tensor)| grad(|x: Tensor| d1(x, y.clone()))(x))((
        x.clone(),
        y.clone(),
    ));
    assert_near("d2/dx2", &d2, &reference_vector(&record, "d2_dx2"));
    let cross = vmap(|(x, y): (Tensor, Tensor)| grad(|y: Tensor| d1(x.clone(), y))(y))((
        x.clone(),
        y.clone(),
    ));
    assert_near("d2/dxdy", &cross, &reference_vector(&record, "d2_dxdy"));
    let d3 = vmap(|(x, y): (Tensor, Tensor)| {
        grad(|x: Tensor| grad(|x: Tensor| d1(x, y.clone()))(x))(x)
    })((x.clone(), y.clone()));
    assert_near("d3/dx3", &d3, &reference_vector(&record, "d3_dx3"));
    let per_example =
        vmap(|(x, y): (Tensor, Tensor)| grad(|x: Tensor| scalar_f((x, y.clone())) * 2.0)(x))((
            x, y,
        ));
    assert_near(
        "vmap grad",
        &per_example,
        &reference_vector(&record, "vmap_grad"),
    );
}

/// JAX's motivating example: `log(1 + exp(x))` with the rule `t · (1 - 1/(1 + exp(x)))`
/// stays finite at 1000 in both modes, where differentiating the expression gives NaN.
#[test]
fn custom_jvp_log1pexp_is_stable_in_both_modes() {
    let log1pexp = || {
        ferrax::custom_jvp(
            |x: Tensor| x.exp().log1p(),
            |x: Tensor, t: Tensor| (x.exp().log1p(), t * (1.0 - 1.0 / (x.exp() + 1.0))),
        )
    };
    let x = t64(&[3], vec![-2.0, 0.5, 1000.0]);
    let want: Vec<f64> = [-2.0f64, 0.5, 1000.0]
        .iter()
        .map(|v| 1.0 - 1.0 / (1.0 + v.exp()))
        .collect();
    let f = log1pexp();
    assert_eq!(
        grad(|x: Tensor| f(x).sum(..))(x.clone())
            .to_vec::<f64>()
            .unwrap(),
        want
    );
    let (_, t) = jvp(|x: Tensor| f(x), &x, &t64(&[3], vec![1.0; 3])).unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), want);
    // Reverse mode of the batched call transposes the batched rule.
    let f = log1pexp();
    let batched = grad(|x: Tensor| vmap(&f)(x).sum(..))(x.clone());
    assert_eq!(batched.to_vec::<f64>().unwrap(), want);
    let f = log1pexp();
    let jitted = jit(move |x: Tensor| grad(|x: Tensor| f(x).sum(..))(x))
        .call(x)
        .unwrap();
    assert_eq!(jitted.to_vec::<f64>().unwrap(), want);
}

/// Operands of any tree, integer ones among them (their tangents are zeros), a rule with a
/// loop over the operand, and a matrix product's rule transposed into the matrix gradient.
#[test]
fn custom_jvp_over_trees_with_integers_and_products() {
    let power = ferrax::custom_jvp(
        |(x, n): (Tensor, Tensor)| x.pow(n.astype(DType::F64)),
        |(x, n): (Tensor, Tensor), (tx, _): (Tensor, Tensor)| {
            let n = n.astype(DType::F64);
            (x.pow(&n), tx * &n * x.pow(&(&n - 1.0)))
        },
    );
    let g = grad(|x: Tensor| power((x, Tensor::from_vec([2], vec![3i32, 2]))).sum(..))(t64(
        &[2],
        vec![2.0, -1.5],
    ));
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![12.0, -3.0]);
    // A rule whose work on the operand alone is a `while` loop, which reverse mode refuses:
    // transposing differentiates only what reads the tangent (JAX's linearization).
    let looped = ferrax::custom_jvp(
        |x: Tensor| x.square(),
        |x: Tensor, t: Tensor| {
            let (_, slope) = ferrax::lax::while_loop(
                |(i, _): (Tensor, Tensor)| i.less(3.0),
                |(i, v): (Tensor, Tensor)| (i + 1.0, v * 2.0),
                (Tensor::scalar(0.0f64), x.clone()),
            );
            (x.square(), slope * t)
        },
    );
    let g = grad(|x: Tensor| looped(x).sum(..))(t64(&[2], vec![0.5, -1.0]));
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![4.0, -8.0]);
    let matvec = ferrax::custom_jvp(
        |(w, x): (Tensor, Tensor)| w.matmul(&x),
        |(w, x): (Tensor, Tensor), (tw, tx): (Tensor, Tensor)| {
            (w.matmul(&x), tw.matmul(&x) + w.matmul(&tx))
        },
    );
    let w = t64(&[2, 3], vec![1.0, 2.0, 3.0, -1.0, 0.5, 4.0]);
    let x = t64(&[3], vec![0.5, -2.0, 1.0]);
    let (gw, gx) =
        grad(|(w, x): (Tensor, Tensor)| (matvec((w, x)) * t64(&[2], vec![1.0, -3.0])).sum(..))((
            w, x,
        ));
    assert_eq!(
        gw.to_vec::<f64>().unwrap(),
        vec![0.5, -2.0, 1.0, -1.5, 6.0, -3.0]
    );
    assert_eq!(gx.to_vec::<f64>().unwrap(), vec![4.0, 0.5, -9.0]);
}

#[test]
fn custom_jvp_ir_prints_and_round_trips() {
    let f = scaled_sin();
    let ir = trace(
        |p: (Tensor, Tensor)| f(p),
        &(common::spec(&[2]), common::spec(&[2])),
    )
    .unwrap();
    let text = ir.to_string();
    assert_eq!(ferrax::ir::parse_func(&text).unwrap(), ir);
    insta::assert_snapshot!(text);
}

#[test]
fn custom_jvp_misuse_is_reported() {
    let bad = ferrax::custom_jvp(
        |x: Tensor| x.exp(),
        |x: Tensor, t: Tensor| (x.exp(), t.sum(..)),
    );
    let err = trace(|x: Tensor| bad(x), &common::spec(&[3]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("custom_jvp: jvp must return the primal result and its tangent, both f32[3], it returns f32[3], f32[]")
            && err.contains("tests/autodiff.rs"),
        "{err}"
    );
    let err = trace(
        |x: Tensor| {
            let captured = x.clone();
            ferrax::custom_jvp(
                |y: Tensor| y.sin(),
                move |y: Tensor, t: Tensor| (y.sin(), t * &captured),
            )(x)
        },
        &common::spec(&[3]),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("custom derivative: the jvp function closes over a traced f32[3] value"),
        "{err}"
    );
}

/// Shapes and tensors for the randomized property tests below.
impl Gen {
    fn shape(&mut self, max_rank: usize) -> Vec<usize> {
        let rank = self.below(max_rank + 1);
        (0..rank).map(|_| 1 + self.below(4)).collect()
    }

    fn tensor(&mut self, shape: &[usize], lo: f64, hi: f64) -> Tensor {
        let n = shape.iter().product();
        t64(shape, values(n, self.next(), lo, hi))
    }
}

const CASES: u64 = 40;

#[test]
fn prop_elementwise_ops_with_broadcasting() {
    for case in 0..CASES {
        let mut g = Gen(1000 + case);
        let shape = g.shape(3);
        // The second operand drops leading dimensions and sets some to 1.
        let drop = g.below(shape.len() + 1);
        let other: Vec<usize> = shape[drop..]
            .iter()
            .map(|&d| if g.below(2) == 0 { 1 } else { d })
            .collect();
        let a = g.tensor(&shape, 0.5, 2.0);
        let b = g.tensor(&other, 0.5, 2.0);
        let name = format!("elementwise {shape:?} with {other:?}");
        check_grad(
            &name,
            |v| {
                let (a, b) = (&v[0], &v[1]);
                let terms = [
                    a * b,
                    a / b,
                    a.pow(b),
                    a.maximum(b * 1.1),
                    (a - b).tanh(),
                    a.log() * b.sqrt(),
                    a.sigmoid() + b.rsqrt(),
                    a.sin() * b.cos() + a.expm1() - b.log1p(),
                    a.greater(b).select(a, &(b * 2.0)),
                    a.clip(0.8, 1.6),
                ];
                terms.iter().map(weighted).reduce(|x, y| x + y).unwrap()
            },
            vec![a, b],
        );
    }
}

#[test]
fn prop_reductions_over_random_axes() {
    for case in 0..CASES {
        let mut g = Gen(2000 + case);
        let mut shape = g.shape(3);
        if shape.is_empty() {
            shape.push(3);
        }
        let axes: Vec<i32> = (0..shape.len() as i32)
            .filter(|_| g.below(2) == 0)
            .collect();
        let x = g.tensor(&shape, 0.5, 1.5);
        let name = format!("reductions of {shape:?} over {axes:?}");
        check_grad(
            &name,
            |v| {
                let ax = || axes.as_slice();
                weighted(&v[0].sum(ax()))
                    + weighted(&v[0].max(ax()))
                    + weighted(&v[0].min(ax()))
                    + weighted(&v[0].prod(ax()))
            },
            vec![x],
        );
    }
}

#[test]
fn prop_movement_ops() {
    for case in 0..CASES {
        let mut g = Gen(3000 + case);
        let mut shape = g.shape(3);
        if shape.is_empty() {
            shape.push(2);
        }
        let rank = shape.len();
        let mut perm: Vec<i32> = (0..rank as i32).collect();
        for i in (1..rank).rev() {
            perm.swap(i, g.below(i + 1));
        }
        let start: Vec<usize> = shape.iter().map(|&d| g.below(d)).collect();
        let limit: Vec<usize> = shape
            .iter()
            .zip(&start)
            .map(|(&d, &s)| s + 1 + g.below(d - s))
            .collect();
        let strides: Vec<usize> = (0..rank).map(|_| 1 + g.below(2)).collect();
        let pads: Vec<(i64, i64, usize)> = shape
            .iter()
            .map(|&d| {
                let lo = g.below(3) as i64 - if d > 1 { 1 } else { 0 };
                (lo, g.below(3) as i64, g.below(3))
            })
            .collect();
        let axis = g.below(rank) as i64;
        let x = g.tensor(&shape, -1.0, 1.0);
        let name = format!("movement of {shape:?}: perm {perm:?}, slice {start:?}..{limit:?} by {strides:?}, pad {pads:?}, axis {axis}");
        check_grad(
            &name,
            |v| {
                let x = &v[0];
                let t = x.transpose(perm.as_slice());
                let s = x.slice_strided(&start, &limit, &strides);
                let p = x.pad(&pads, 0.5);
                let c = Tensor::concatenate(&[x, &x.exp()], axis);
                let r = x
                    .reshape([-1])
                    .reshape(x.shape().iter().rev().copied().collect::<Vec<_>>());
                let b = x
                    .expand_dims(0)
                    .broadcast_to([2].iter().chain(x.shape()).copied().collect::<Vec<usize>>());
                weighted(&t)
                    + weighted(&s)
                    + weighted(&p)
                    + weighted(&c)
                    + weighted(&r)
                    + weighted(&b)
            },
            vec![x],
        );
    }
}

#[test]
fn prop_matmul_shapes() {
    for case in 0..CASES {
        let mut g = Gen(4000 + case);
        let batch: Vec<usize> = (0..g.below(3)).map(|_| 1 + g.below(3)).collect();
        let (m, k, n) = (1 + g.below(4), 1 + g.below(4), 1 + g.below(4));
        let lhs: Vec<usize> = batch.iter().copied().chain([m, k]).collect();
        let rhs: Vec<usize> = if g.below(2) == 0 {
            vec![k, n]
        } else {
            batch.iter().copied().chain([k, n]).collect()
        };
        let vec_rhs = g.below(3) == 0;
        let rhs = if vec_rhs { vec![k] } else { rhs };
        let a = g.tensor(&lhs, -1.0, 1.0);
        let b = g.tensor(&rhs, -1.0, 1.0);
        check_grad(
            &format!("matmul {lhs:?} @ {rhs:?}"),
            |v| weighted(&v[0].matmul(&v[1])),
            vec![a, b],
        );
    }
}

#[test]
fn gradients_through_lower_precision() {
    let x = Tensor::from_vec([3], vec![0.5f32, -1.25, 2.0]);
    let g = grad(|x: Tensor| {
        (x.astype(DType::F16) * 3.0)
            .astype(DType::F32)
            .square()
            .sum(..)
    })(x);
    // d/dx (3x)^2 = 18x, with x and 3x exact in f16.
    assert_eq!(g.to_vec::<f32>().unwrap(), vec![9.0, -22.5, 36.0]);
    let h = Tensor::from_vec(
        [2],
        vec![half::bf16::from_f32(1.5), half::bf16::from_f32(-2.0)],
    );
    let gh = grad(|h: Tensor| h.astype(DType::F64).exp().sum(..))(h);
    assert_eq!(gh.dtype(), DType::BF16);
    let want: Vec<half::bf16> = [1.5f64, -2.0]
        .iter()
        .map(|v| half::bf16::from_f64(v.exp()))
        .collect();
    assert_eq!(gh.to_vec::<half::bf16>().unwrap(), want);
}

fn i64s(shape: &[usize], data: Vec<i64>) -> Tensor {
    Tensor::from_vec(shape.to_vec(), data)
}

#[test]
fn d_gather_take_and_take_along_axis() {
    let x = t64(&[4, 3], values(12, 11, -1.0, 1.0));
    // Repeated, negative and out-of-range (clamped) indices.
    let rows = i64s(&[2, 3], vec![1, 3, 1, -1, 7, 0]);
    let cols = i64s(&[4, 2], vec![2, 0, 1, 1, 0, 2, 2, -2]);
    check_grad(
        "gather",
        |v| {
            let x = &v[0];
            weighted(&x.take_with(&rows, 0, IndexMode::Clip))
                + weighted(&x.take_with(&rows, 1, IndexMode::Clip).exp())
                + weighted(&x.take(&cols.slice(&[0, 0], &[3, 1]).reshape([3]), 0))
                + weighted(&x.take_along_axis(&cols, 1))
                + weighted(&x.at(&i64s(&[], vec![2])).get())
        },
        vec![x],
    );
}

#[test]
fn d_dynamic_slices() {
    let x = t64(&[4, 5], values(20, 12, -1.0, 1.0));
    let u = t64(&[2, 3], values(6, 13, -1.0, 1.0));
    let (i, j) = (i64s(&[], vec![3]), i64s(&[], vec![-4]));
    check_grad(
        "dynamic slices",
        |v| {
            let (x, u) = (&v[0], &v[1]);
            let s = x.dynamic_slice(&[&i, &j], &[2, 3]);
            let w = x.dynamic_update_slice(&(u * u), &[&j, &i]);
            weighted(&s.sin()) + weighted(&w.exp())
        },
        vec![x, u],
    );
}

#[test]
fn d_scatter_each_combiner() {
    let x = t64(&[5, 2], values(10, 14, 0.5, 1.5));
    let u = t64(&[4, 2], values(8, 15, 0.5, 1.5));
    // Index 1 repeats, index 9 is out of range (its update is dropped), -1 is the last row.
    let idx = i64s(&[4], vec![1, 9, 1, -1]);
    for (name, combine) in [("set", 0), ("add", 1), ("mul", 2), ("min", 3), ("max", 4)] {
        check_grad(
            name,
            |v| {
                let (x, u) = (&v[0], &v[1]);
                let at = x.at(&idx);
                let y = match combine {
                    0 => at.set(u),
                    1 => at.add(u),
                    2 => at.mul(u),
                    3 => at.min(u),
                    _ => at.max(u),
                };
                weighted(&y)
            },
            vec![x.clone(), u.clone()],
        );
    }
}

#[test]
fn d_scatter_mul_with_zero_updates() {
    let x = t64(&[3], vec![0.7, -1.3, 2.0]);
    let u = t64(&[4], vec![0.0, 1.5, 0.0, 0.0]);
    // Row 0 gets one zero and a non-zero, row 2 gets two zeros.
    let idx = i64s(&[4], vec![0, 0, 2, 2]);
    check_grad(
        "scatter_mul zeros",
        |v| weighted(&v[0].at(&idx).mul(&v[1])),
        vec![x.clone(), u.clone()],
    );
    let g = grad(|v: Vec<Tensor>| weighted(&v[0].at(&idx).mul(&v[1])))(vec![x, u]);
    // d/du0 at row 0 is x0 * u1 * w0 (the other update); with two zeros at row 2 every
    // derivative there is 0.
    let gu = g[1].to_vec::<f64>().unwrap();
    assert_eq!(gu[2], 0.0);
    assert_eq!(gu[3], 0.0);
    assert!(gu[0] != 0.0);
}

#[test]
fn scatter_max_ties_share_the_gradient() {
    let x = t64(&[2], vec![1.0, 5.0]);
    let u = t64(&[2], vec![1.0, 1.0]);
    let idx = i64s(&[2], vec![0, 0]);
    let g = grad(|v: Vec<Tensor>| v[0].at(&idx).max(&v[1]).sum(..))(vec![x, u]);
    // Position 0: the operand and both updates tie, a third each (JAX's rule).
    let third = 1.0 / 3.0;
    assert_eq!(g[0].to_vec::<f64>().unwrap(), vec![third, 1.0]);
    assert_eq!(g[1].to_vec::<f64>().unwrap(), vec![third, third]);
}
