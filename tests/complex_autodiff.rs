//! Derivatives through complex numbers, in JAX's convention: the gradient of a real loss `f`
//! at a complex `z = x + iy` is `∂f/∂x − i·∂f/∂y`, checked against central finite differences
//! along both parts in c128; forward mode along complex directions agrees with it
//! (`df = Re(Σ g·dz)`); the pullback of 1 through a holomorphic function is its derivative
//! `f'(z)`; Fourier transforms of every kind (odd, even and several lengths) inside real
//! losses; and `jit` of the gradient programs on the CPU backend against the interpreter.
//!
//! Finite differences use h = 1e-6 on O(1) functions, so about 1e-10 absolute error: 1e-7
//! relative (floor 1e-7) cannot be met by a rule off by a sign, a conjugate or a factor.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "common/numbers.rs"]
mod numbers;

use ferrax::ir::FftKind;
use ferrax::{grad, jit, jvp, vjp, DType, Tensor};
use numbers::{uniform as values, C64};

/// Complex values with real parts in `re` and imaginary parts in `im`.
fn complex_values(n: usize, seed: u64, re: (f64, f64), im: (f64, f64)) -> Vec<C64> {
    let a = values(n, seed, re.0, re.1);
    let b = values(n, seed + 1, im.0, im.1);
    a.into_iter().zip(b).map(|(x, y)| C64::new(x, y)).collect()
}

fn c128(shape: &[usize], data: Vec<C64>) -> Tensor {
    Tensor::from_vec(shape.to_vec(), data)
}

fn f64s(shape: &[usize], data: Vec<f64>) -> Tensor {
    Tensor::from_vec(shape.to_vec(), data)
}

fn scalar(t: &Tensor) -> f64 {
    t.to_vec::<f64>().unwrap()[0]
}

/// An input's elements as complex numbers (real inputs with zero imaginary parts), and
/// whether it is complex.
fn elements(t: &Tensor) -> (Vec<C64>, bool) {
    match t.dtype() {
        DType::C128 => (t.to_vec::<C64>().unwrap(), true),
        _ => (
            t.to_vec::<f64>()
                .unwrap()
                .into_iter()
                .map(|x| C64::new(x, 0.0))
                .collect(),
            false,
        ),
    }
}

fn rebuilt(like: &Tensor, data: Vec<C64>, complex: bool) -> Tensor {
    match complex {
        true => c128(like.shape(), data),
        false => f64s(like.shape(), data.iter().map(|z| z.re).collect()),
    }
}

/// Checks `grad(f)` (a real scalar of real and complex inputs) against central differences
/// along each part, and `jvp` along a complex direction against the gradient.
fn check_grad(name: &str, f: impl Fn(Vec<Tensor>) -> Tensor, xs: Vec<Tensor>) {
    let grads = grad(&f)(xs.clone());
    let h = 1e-6;
    for (k, x) in xs.iter().enumerate() {
        let (base, complex) = elements(x);
        let (g, g_complex) = elements(&grads[k]);
        assert_eq!(g_complex, complex, "{name}: gradient {k}'s type");
        assert_eq!(grads[k].shape(), x.shape(), "{name}: gradient shape");
        for i in 0..base.len() {
            let eval = |delta: C64| {
                let mut v = base.clone();
                v[i] += delta;
                let mut args = xs.clone();
                args[k] = rebuilt(x, v, complex);
                scalar(&f(args))
            };
            let along = |d: C64| (eval(d * h) - eval(-d * h)) / (2.0 * h);
            let want = match complex {
                true => C64::new(along(C64::new(1.0, 0.0)), -along(C64::new(0.0, 1.0))),
                false => C64::new(along(C64::new(1.0, 0.0)), 0.0),
            };
            let tol = 1e-7 * want.norm().max(1.0);
            assert!(
                (g[i] - want).norm() <= tol,
                "{name}: gradient {k}[{i}] = {} but finite differences give {want}",
                g[i]
            );
        }
    }
    let dirs: Vec<Tensor> = xs
        .iter()
        .enumerate()
        .map(|(k, x)| {
            let d = complex_values(x.numel(), 100 + k as u64, (-1.0, 1.0), (-1.0, 1.0));
            rebuilt(x, d, x.dtype() == DType::C128)
        })
        .collect();
    let (_, tangent) = jvp(&f, &xs, &dirs).unwrap();
    let expected: f64 = grads
        .iter()
        .zip(&dirs)
        .map(|(g, d)| {
            let (g, d) = (elements(g).0, elements(d).0);
            g.iter().zip(&d).map(|(a, b)| (a * b).re).sum::<f64>()
        })
        .sum();
    let got = scalar(&tangent);
    assert!(
        (got - expected).abs() <= 1e-10 * expected.abs().max(1.0),
        "{name}: jvp gives {got}, Re(grad·v) gives {expected}"
    );
}

/// A real loss that reads both parts of every element, each with its own weight: the real
/// part of a complex-weighted sum.
fn weighted(y: &Tensor) -> Tensor {
    let w = c128(
        y.shape(),
        complex_values(y.numel(), 999, (0.5, 1.5), (-1.0, 1.0)),
    );
    (y * &w).real().sum(..)
}

/// Points away from every branch cut of the functions below.
fn upper_right(n: usize) -> Tensor {
    c128(&[n], complex_values(n, 1, (0.2, 0.8), (0.1, 0.6)))
}

macro_rules! holomorphic {
    ($($name:ident => |$z:ident| $body:expr;)*) => {$(
        #[test]
        fn $name() {
            check_grad(stringify!($name), |v| { let $z = &v[0]; weighted(&$body) }, vec![upper_right(5)]);
        }
    )*};
}

holomorphic! {
    d_neg => |z| -z;
    d_exp => |z| z.exp();
    d_expm1 => |z| z.expm1();
    d_log => |z| z.log();
    d_log1p => |z| z.log1p();
    d_sqrt => |z| z.sqrt();
    d_rsqrt => |z| z.rsqrt();
    d_tanh => |z| z.tanh();
    d_sigmoid => |z| z.sigmoid();
    d_sin => |z| z.sin();
    d_cos => |z| z.cos();
    d_tan => |z| z.tan();
    d_asin => |z| z.asin();
    d_acos => |z| z.acos();
    d_atan => |z| z.atan();
    d_sinh => |z| z.sinh();
    d_cosh => |z| z.cosh();
    d_asinh => |z| z.asinh();
    d_acosh => |z| z.acosh();
    d_atanh => |z| z.atanh();
    d_square => |z| z * z;
    d_reciprocal => |z| z.pow(-1.0);
    d_pow => |z| z.pow(&(z * 0.5 + 1.0));
}

/// `acosh` left of the imaginary axis, where `1/√(z²−1)` has the wrong sign.
#[test]
fn d_acosh_of_negative_real_part() {
    let z = c128(&[4], complex_values(4, 3, (-2.5, -1.2), (0.2, 0.9)));
    check_grad("acosh", |v| weighted(&v[0].acosh()), vec![z]);
}

/// The ops that are not holomorphic: real and imaginary parts, absolute values (JAX: 0 at 0),
/// conjugates, and complex numbers made of real parts.
#[test]
fn d_parts_abs_conj_and_complex() {
    let z = upper_right(4);
    let w = c128(&[4], complex_values(4, 7, (-1.0, 1.0), (-1.0, 1.0)));
    check_grad(
        "parts",
        |v| {
            let (z, w) = (&v[0], &v[1]);
            (z.real() * w.imag() + z.imag().exp()).sum(..) + (z * w).abs().sum(..)
        },
        vec![z.clone(), w],
    );
    check_grad("conj", |v| weighted(&(&v[0] * &v[0].conj().sin())), vec![z]);
    let (a, b) = (
        f64s(&[3], values(3, 11, -1.0, 1.0)),
        f64s(&[3], values(3, 12, -1.0, 1.0)),
    );
    check_grad(
        "complex",
        |v| weighted(&v[0].complex(&v[1]).exp()),
        vec![a, b],
    );
    // |z|² has gradient 2·conj(z) (JAX: grad(lambda z: abs(z)**2)(3+4j) == 6-8j), and |z| has
    // gradient 0 at 0.
    let g = grad(|z: Tensor| (z.abs() * z.abs()).sum(..))(c128(&[1], vec![C64::new(3.0, 4.0)]));
    assert_eq!(g.to_vec::<C64>().unwrap(), vec![C64::new(6.0, -8.0)]);
    let g = grad(|z: Tensor| z.abs().sum(..))(c128(&[2], vec![C64::new(0.0, 0.0); 2]));
    assert_eq!(g.to_vec::<C64>().unwrap(), vec![C64::new(0.0, 0.0); 2]);
}

/// Conversions between real and complex types (complex to real keeps the real part), products,
/// reductions and data movement of complex values.
#[test]
fn d_conversions_products_reductions_and_movement() {
    let x = f64s(&[2, 3], values(6, 21, -1.0, 1.0));
    check_grad(
        "convert",
        |v| {
            let z = v[0].astype(DType::C128);
            let y = (&z * &z.exp()).astype(DType::F64);
            (y * &v[0]).sum(..)
        },
        vec![x],
    );
    let a = c128(&[2, 3], complex_values(6, 22, (-1.0, 1.0), (-1.0, 1.0)));
    let b = c128(&[3, 4], complex_values(12, 23, (-1.0, 1.0), (-1.0, 1.0)));
    check_grad(
        "matmul",
        |v| weighted(&v[0].matmul(&v[1]).tanh()),
        vec![a.clone(), b],
    );
    check_grad(
        "reductions",
        |v| weighted(&(v[0].prod([1]) + v[0].sum([1]).exp())),
        vec![a.clone()],
    );
    check_grad(
        "movement",
        |v| {
            let z = &v[0];
            let moved = z
                .t()
                .reshape([6])
                .slice(&[1], &[5])
                .pad(&[(2, 1, 1)], 0.0)
                .flip([0]);
            let moved = Tensor::concatenate(&[moved, z.reshape([6]).slice(&[0], &[2])], 0);
            weighted(&(&moved * &moved))
        },
        vec![a.clone()],
    );
    check_grad(
        "select and gather",
        |v| {
            let z = &v[0];
            let keep = z.real().greater(0.0);
            let picked = keep.select(z, z.sin());
            let rows = Tensor::from_vec([3], vec![1i32, 0, 1]);
            weighted(&picked.take(&rows, 0))
        },
        vec![a],
    );
}

fn real_signal(shape: &[usize], seed: u64) -> Tensor {
    f64s(shape, values(shape.iter().product(), seed, -1.0, 1.0))
}

/// Real losses of Fourier transforms of every kind, for odd and even lengths and over several
/// dimensions: `rfft` and `irfft` weigh the frequencies they fold, `fft` and `ifft` are their
/// own transposes.
#[test]
fn d_fourier_transforms() {
    for n in [1, 2, 5, 8] {
        check_grad(
            &format!("rfft n={n}"),
            |v| {
                let s = v[0].fft(FftKind::Rfft, &[n]);
                (s.abs() * s.abs()).sum(..) + weighted(&s)
            },
            vec![real_signal(&[2, n], n as u64)],
        );
        let half = n / 2 + 1;
        check_grad(
            &format!("irfft n={n}"),
            |v| {
                let x = v[0].fft(FftKind::Irfft, &[n]);
                (&x * &x.sin()).sum(..)
            },
            vec![c128(
                &[2, half],
                complex_values(2 * half, n as u64, (-1.0, 1.0), (-1.0, 1.0)),
            )],
        );
    }
    let z = c128(&[2, 3, 4], complex_values(24, 31, (-1.0, 1.0), (-1.0, 1.0)));
    for kind in [FftKind::Fft, FftKind::Ifft] {
        check_grad(
            &format!("{} of 3x4", kind.name()),
            |v| weighted(&(v[0].fft(kind, &[3, 4]) * &v[0])),
            vec![z.clone()],
        );
    }
    check_grad(
        "rfft of 3x5",
        |v| weighted(&v[0].fft(FftKind::Rfft, &[3, 5]).exp()),
        vec![real_signal(&[2, 3, 5], 41)],
    );
    check_grad(
        "irfft of 3x6",
        |v| {
            let x = v[0].fft(FftKind::Irfft, &[3, 6]);
            (&x * &x).sum(..)
        },
        vec![c128(
            &[3, 4],
            complex_values(12, 43, (-1.0, 1.0), (-1.0, 1.0)),
        )],
    );
    // A spectral loss of a real signal: the gradient of Σ|rfft(x)|² is 2·N·x weighted by how
    // often each frequency is counted, here checked through the round trip irfft(rfft(x)) = x.
    check_grad(
        "round trip",
        |v| {
            let back = v[0].fft(FftKind::Rfft, &[6]).fft(FftKind::Irfft, &[6]);
            (&back * &back.cos()).sum(..)
        },
        vec![real_signal(&[6], 51)],
    );
}

/// Triangular solves with complex operands, conjugated or not (the adjoint among them), on
/// both sides.
#[test]
fn d_triangular_solve() {
    for bits in [0u32, 1, 2, 5, 7, 8, 12, 13, 14, 15] {
        let s = ferrax::ir::TriangularSolve {
            left_side: bits & 1 != 0,
            lower: bits & 2 != 0,
            transpose_a: bits & 4 != 0,
            conjugate_a: bits & 8 != 0,
            unit_diagonal: false,
        };
        let mut a = complex_values(9, 81, (-1.0, 1.0), (-1.0, 1.0));
        for k in [0, 4, 8] {
            a[k] += C64::new(3.0, 0.5);
        }
        let b = complex_values(6, 83, (-1.0, 1.0), (-1.0, 1.0));
        let b_dims = if s.left_side { [3, 2] } else { [2, 3] };
        check_grad(
            &format!("triangular_solve {s:?}"),
            |v| weighted(&v[0].triangular_solve(&v[1], s)),
            vec![c128(&[3, 3], a), c128(&b_dims, b)],
        );
    }
}

/// `cholesky` of a Hermitian positive-definite matrix (symmetrized first, as JAX's).
#[test]
fn d_cholesky() {
    let mut a = complex_values(9, 91, (-0.5, 0.5), (-0.5, 0.5));
    for k in [0, 4, 8] {
        a[k] += C64::new(3.0, 0.0);
    }
    check_grad(
        "cholesky",
        |v| weighted(&v[0].cholesky()),
        vec![c128(&[3, 3], a)],
    );
}

/// `lu`'s packed factors, square, tall and wide, real and complex (real inputs through a
/// conversion, so the same complex weights read them), and what is built on them: `det`,
/// `slogdet`'s log, `solve` in both operands and `inv`.
#[test]
fn d_lu() {
    for (dims, seed) in [([3, 3], 101), ([4, 2], 103), ([2, 4], 105)] {
        let n = dims[0] * dims[1];
        let z = complex_values(n, seed, (-1.0, 1.0), (-1.0, 1.0));
        check_grad("lu", |v| weighted(&v[0].lu().0), vec![c128(&dims, z)]);
        let x = values(n, seed + 7, -1.0, 1.0);
        check_grad(
            "lu of reals",
            |v| weighted(&v[0].lu().0.astype(DType::C128)),
            vec![f64s(&dims, x)],
        );
    }
    let mut a = complex_values(9, 111, (-1.0, 1.0), (-1.0, 1.0));
    for k in [0, 4, 8] {
        a[k] += C64::new(1.5, -0.5);
    }
    let a = c128(&[3, 3], a);
    let b = c128(&[3, 2], complex_values(6, 113, (-1.0, 1.0), (-1.0, 1.0)));
    check_grad("det", |v| weighted(&v[0].det()), vec![a.clone()]);
    check_grad("slogdet", |v| v[0].slogdet().1, vec![a.clone()]);
    check_grad(
        "solve",
        |v| weighted(&v[0].solve(&v[1])),
        vec![a.clone(), b],
    );
    check_grad("inv", |v| weighted(&v[0].inv()), vec![a]);
    let x = f64s(&[3, 3], values(9, 115, -1.0, 1.0));
    check_grad("det of reals", |v| v[0].det(), vec![x.clone()]);
    check_grad(
        "inv of reals",
        |v| weighted(&v[0].inv().astype(DType::C128)),
        vec![x],
    );
}

/// `qr`'s factors, both of them, of tall and square matrices (full factors of square ones),
/// real and complex.
#[test]
fn d_qr() {
    for (dims, full, seed) in [
        ([4, 3], false, 121),
        ([3, 3], true, 123),
        ([5, 2], false, 125),
    ] {
        let n = dims[0] * dims[1];
        let z = complex_values(n, seed, (-1.0, 1.0), (-1.0, 1.0));
        let x = values(n, seed + 7, -1.0, 1.0);
        check_grad(
            "qr q",
            |v| weighted(&v[0].qr(full).0),
            vec![c128(&dims, z.clone())],
        );
        check_grad("qr r", |v| weighted(&v[0].qr(full).1), vec![c128(&dims, z)]);
        check_grad(
            "qr of reals",
            |v| {
                let (q, r) = v[0].qr(full);
                weighted(&q.astype(DType::C128)) + weighted(&r.astype(DType::C128))
            },
            vec![f64s(&dims, x)],
        );
    }
}

/// `eigh`: the eigenvalues, and for complex matrices losses that do not depend on each
/// eigenvector's phase (JAX's rule fixes `vᴴ·dv`'s diagonal at 0, not any phase convention):
/// `|v|²` and `v·diag(sin w)·vᴴ`; real eigenvectors directly.
#[test]
fn d_eigh() {
    let z = c128(&[3, 3], complex_values(9, 131, (-1.0, 1.0), (-1.0, 1.0)));
    check_grad(
        "eigh values",
        |v| (v[0].eigh().0 * 1.5).sin().sum(..),
        vec![z.clone()],
    );
    check_grad(
        "eigh |v|²",
        |v| {
            let (_, vectors) = v[0].eigh();
            weighted(&(&vectors * &vectors.conj()))
        },
        vec![z.clone()],
    );
    check_grad(
        "eigh v·f(w)·vᴴ",
        |v| {
            let (w, vectors) = v[0].eigh();
            let scaled = &vectors * &w.sin().astype(DType::C128).reshape([1, 3]);
            weighted(&scaled.matmul(&vectors.conj().t()))
        },
        vec![z],
    );
    let x = f64s(&[4, 4], values(16, 133, -1.0, 1.0));
    check_grad(
        "eigh of reals",
        |v| {
            let (w, vectors) = v[0].eigh();
            (&w * &w).sum(..) + weighted(&vectors.astype(DType::C128))
        },
        vec![x],
    );
}

/// `svd`: the singular values, and for complex matrices losses that do not depend on each
/// pair's phase (`|u|²`, `|vh|²`, `u·diag(sin s)·vh`); real singular vectors directly. Tall,
/// square (full vectors too) and wide matrices, each with JAX's extra terms where `m ≠ n`.
/// The eigenvalues of general matrices (JAX's rule: `dw = diag(vlᴴ·da·vr) / diag(vlᴴ·vr)`),
/// complex and real, through losses that read both parts and do not depend on the
/// eigenvalues' order.
#[test]
fn d_eig() {
    let loss = |v: Vec<Tensor>| {
        let w = v[0].eigvals();
        w.sin().real().sum(..) + (w.real() * (w.imag() * 3.0).sin()).sum(..)
    };
    for (m, seed) in [(1, 151), (3, 153), (4, 155)] {
        let z = c128(
            &[m, m],
            complex_values(m * m, seed, (-1.0, 1.0), (-1.0, 1.0)),
        );
        check_grad("eigvals", loss, vec![z]);
        let x = f64s(&[m, m], values(m * m, seed + 7, -1.0, 1.0));
        check_grad("eigvals of reals", loss, vec![x]);
    }
}

#[test]
fn d_svd() {
    for (dims, full, seed) in [
        ([4, 3], false, 141),
        ([3, 3], true, 143),
        ([2, 4], false, 145),
    ] {
        let n = dims[0] * dims[1];
        let k = dims[0].min(dims[1]);
        let z = c128(&dims, complex_values(n, seed, (-1.0, 1.0), (-1.0, 1.0)));
        check_grad(
            "svd values",
            |v| (v[0].svd_values() * 1.5).sin().sum(..),
            vec![z.clone()],
        );
        check_grad(
            "svd |u|²",
            |v| {
                let (u, _, _) = v[0].svd(full);
                weighted(&(&u * &u.conj()))
            },
            vec![z.clone()],
        );
        check_grad(
            "svd |vh|²",
            |v| {
                let (_, _, vh) = v[0].svd(full);
                weighted(&(&vh * &vh.conj()))
            },
            vec![z.clone()],
        );
        check_grad(
            "svd u·f(s)·vh",
            |v| {
                let (u, s, vh) = v[0].svd(false);
                let scaled = &u * &s.sin().astype(DType::C128).reshape([1, k]);
                weighted(&scaled.matmul(&vh))
            },
            vec![z],
        );
        let x = f64s(&dims, values(n, seed + 7, -1.0, 1.0));
        check_grad(
            "svd of reals",
            |v| {
                let (u, s, vh) = v[0].svd(full);
                (&s * &s).sum(..)
                    + weighted(&u.astype(DType::C128))
                    + weighted(&vh.astype(DType::C128))
            },
            vec![x.clone()],
        );
        check_grad(
            "pinv",
            |v| weighted(&v[0].pinv().astype(DType::C128)),
            vec![x],
        );
    }
}

/// The pullback of 1 through a holomorphic function is its complex derivative (what
/// `jax.grad(f, holomorphic=True)` returns): here `d/dz z·sin(z) = sin(z) + z·cos(z)`.
#[test]
fn holomorphic_derivative_is_the_pullback_of_one() {
    let points = complex_values(4, 61, (-1.0, 1.0), (-1.0, 1.0));
    let z = c128(&[4], points.clone());
    let (_, pullback) = vjp(|z: Tensor| &z * &z.sin(), &z).unwrap();
    let d = pullback
        .call(&c128(&[4], vec![C64::new(1.0, 0.0); 4]))
        .unwrap();
    for (got, z) in d.to_vec::<C64>().unwrap().iter().zip(points) {
        let want = z.sin() + z * z.cos();
        assert!(
            (got - want).norm() <= 1e-14 * want.norm(),
            "{got} vs {want}"
        );
    }
}

/// `jit` of a gradient program through complex values and transforms (simplified, compiled
/// for the CPU) gives the interpreter's values.
#[test]
fn jitted_complex_gradients_match_the_interpreter() {
    let loss = |x: Tensor| {
        let s = x.fft(FftKind::Rfft, &[8]);
        let z = &s * &s.conj().exp();
        z.real().sum(..) + z.abs().sum(..)
    };
    let x = real_signal(&[3, 8], 71);
    let want = grad(loss)(x.clone()).to_vec::<f64>().unwrap();
    let got = jit(grad(loss)).call(x).unwrap().to_vec::<f64>().unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{g} vs {w}");
    }
}

/// A complex loss has no gradient: the error says so and points at `vjp`.
#[test]
fn grad_of_a_complex_result_is_an_error() {
    let e = grad(|z: Tensor| z.sum(..))(upper_right(2))
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("real float scalar") && e.contains("vjp"), "{e}");
}
