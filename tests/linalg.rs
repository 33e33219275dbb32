//! `triangular_solve`: every combination of side, triangle, transpose, conjugate and unit
//! diagonal solves its system (the residual `op(a)·x − b` against a bound derived from the
//! conditioning), in f32, f64 and c128, with batch dimensions, on the interpreter, the CPU
//! backend and the emulated GPU bit for bit; exact results where the arithmetic is exact; zero
//! sizes; `vmap`; type errors; the text format; and the StableHLO import.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::run_on_every_backend as run;

use ferrax::ir::{parse_func, Complex, Element, TriangularSolve};
use ferrax::{Array, DType, Tensor};

type C64 = Complex<f64>;

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(7);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            2.0 * ((s >> 11) as f64 / (1u64 << 53) as f64) - 1.0
        })
        .collect()
}

/// Batches of `m × m` matrices whose diagonal (4 + …) dominates, so every triangle is well
/// conditioned.
fn matrices(batches: usize, m: usize, seed: u64) -> Vec<f64> {
    let mut a = values(batches * m * m, seed);
    for batch in 0..batches {
        for i in 0..m {
            a[batch * m * m + i * m + i] += 4.0;
        }
    }
    a
}

fn options(bits: u32) -> TriangularSolve {
    TriangularSolve {
        left_side: bits & 1 != 0,
        lower: bits & 2 != 0,
        transpose_a: bits & 4 != 0,
        conjugate_a: bits & 8 != 0,
        unit_diagonal: bits & 16 != 0,
    }
}

fn flags(s: &TriangularSolve) -> String {
    [
        ("left_side", s.left_side),
        ("lower", s.lower),
        ("transpose_a", s.transpose_a),
        ("conjugate_a", s.conjugate_a),
        ("unit_diagonal", s.unit_diagonal),
    ]
    .iter()
    .filter(|(_, on)| *on)
    .map(|(name, _)| format!(", {name}=1"))
    .collect()
}

/// Entry (`r`, `c`) of `op(a)` for one batch's matrix `a`.
fn op_entry(s: &TriangularSolve, a: &[C64], m: usize, r: usize, c: usize) -> C64 {
    let (i, j) = if s.transpose_a { (c, r) } else { (r, c) };
    let read = match (i == j, s.lower) {
        (true, _) => !s.unit_diagonal,
        (false, true) => i > j,
        (false, false) => i < j,
    };
    let v = match (read, i == j) {
        (true, _) => a[i * m + j],
        (false, true) => C64::new(1.0, 0.0),
        (false, false) => C64::new(0.0, 0.0),
    };
    if s.conjugate_a {
        v.conj()
    } else {
        v
    }
}

/// The largest `|op(a)·x − b|` (or `|x·op(a) − b|`) over every batch and entry, in c128.
fn residual(s: &TriangularSolve, a: &[C64], b: &[C64], x: &[C64], m: usize, n: usize) -> f64 {
    let batches = a.len() / (m * m);
    let mut worst: f64 = 0.0;
    for batch in 0..batches {
        let a = &a[batch * m * m..(batch + 1) * m * m];
        let (b, x) = (
            &b[batch * m * n..(batch + 1) * m * n],
            &x[batch * m * n..(batch + 1) * m * n],
        );
        for (idx, &want) in b.iter().enumerate() {
            let got: C64 = match s.left_side {
                true => {
                    let (r, k) = (idx / n, idx % n);
                    (0..m).map(|j| op_entry(s, a, m, r, j) * x[j * n + k]).sum()
                }
                false => {
                    let (k, c) = (idx / m, idx % m);
                    (0..m).map(|j| x[k * m + j] * op_entry(s, a, m, j, c)).sum()
                }
            };
            worst = worst.max((got - want).norm());
        }
    }
    worst
}

fn array<T: Element>(dims: &[usize], v: Vec<T>) -> Array {
    Array::new(dims.to_vec(), T::into_elements(v)).unwrap()
}

/// Every variant, in f64, f32 and c128, with a batch dimension: the residual is within a few
/// roundings of the solution's size (the matrices are well conditioned, so a wrong
/// substitution order, triangle, transpose or conjugate cannot meet it), and every backend
/// gives the interpreter's bits.
#[test]
fn every_variant_solves_its_system() {
    let (batches, m, n) = (2, 4, 3);
    let a_re = matrices(batches, m, 1);
    let a_im = values(batches * m * m, 2);
    let b_re = values(batches * m * n, 3);
    let b_im = values(batches * m * n, 4);
    let complex = |re: &[f64], im: &[f64]| -> Vec<C64> {
        re.iter().zip(im).map(|(&x, &y)| C64::new(x, y)).collect()
    };
    for bits in 0..32 {
        let s = options(bits);
        let b_dims = match s.left_side {
            true => [batches, m, n],
            false => [batches, n, m],
        };
        let shape = |t: &str, dims: &[usize]| {
            let d: Vec<String> = dims.iter().map(usize::to_string).collect();
            format!("{t}[{}]", d.join(","))
        };
        for dtype in ["f64", "f32", "c128"] {
            let (ta, tb) = (shape(dtype, &[batches, m, m]), shape(dtype, &b_dims));
            let text = format!(
                "func @f(%0: {ta}, %1: {tb}) -> ({tb}) {{\n  %2 = triangular_solve %0, %1{} : {tb}\n  return %2\n}}\n",
                flags(&s)
            );
            let (a, b, x, unit) = match dtype {
                "f64" => {
                    let out = run(
                        &text,
                        &[
                            array(&[batches, m, m], a_re.clone()),
                            array(&b_dims, b_re.clone()),
                        ],
                    );
                    let x: Vec<f64> = out[0].as_slice().unwrap().to_vec();
                    let widen = |v: &[f64]| v.iter().map(|&r| C64::new(r, 0.0)).collect::<Vec<_>>();
                    (widen(&a_re), widen(&b_re), widen(&x), f64::EPSILON)
                }
                "f32" => {
                    let (a32, b32): (Vec<f32>, Vec<f32>) = (
                        a_re.iter().map(|&v| v as f32).collect(),
                        b_re.iter().map(|&v| v as f32).collect(),
                    );
                    let out = run(
                        &text,
                        &[
                            array(&[batches, m, m], a32.clone()),
                            array(&b_dims, b32.clone()),
                        ],
                    );
                    let widen = |v: &[f32]| {
                        v.iter()
                            .map(|&r| C64::new(f64::from(r), 0.0))
                            .collect::<Vec<_>>()
                    };
                    (
                        widen(&a32),
                        widen(&b32),
                        widen(out[0].as_slice().unwrap()),
                        f64::from(f32::EPSILON),
                    )
                }
                _ => {
                    let (a, b) = (complex(&a_re, &a_im), complex(&b_re, &b_im));
                    let out = run(
                        &text,
                        &[
                            array(&[batches, m, m], a.clone()),
                            array(&b_dims, b.clone()),
                        ],
                    );
                    (
                        a,
                        b,
                        out[0].as_slice::<C64>().unwrap().to_vec(),
                        f64::EPSILON,
                    )
                }
            };
            let scale = x.iter().map(|z| z.norm()).fold(1.0, f64::max);
            let r = residual(&s, &a, &b, &x, m, n);
            assert!(r <= 16.0 * unit * scale, "{s:?} {dtype}: residual {r}");
        }
    }
}

/// With integer entries and unit or power-of-two diagonals the substitution is exact.
#[test]
fn exact_systems_give_exact_solutions() {
    // [[2, 0], [3, 1]]·x = [4, 11] (lower, left): x = [2, 5].
    let text = "func @f(%0: f32[2,2], %1: f32[2,1]) -> (f32[2,1]) {\n  %2 = triangular_solve %0, %1, left_side=1, lower=1 : f32[2,1]\n  return %2\n}\n";
    let out = run(
        text,
        &[
            array(&[2, 2], vec![2.0f32, 99.0, 3.0, 1.0]),
            array(&[2, 1], vec![4.0f32, 11.0]),
        ],
    );
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[2.0, 5.0]);
    // x·[[1, 2], [0, 1]] = [1, 4] (upper, unit diagonal read as 1, right side): x = [1, 2].
    let text = "func @f(%0: f64[2,2], %1: f64[1,2]) -> (f64[1,2]) {\n  %2 = triangular_solve %0, %1, unit_diagonal=1 : f64[1,2]\n  return %2\n}\n";
    let out = run(
        text,
        &[
            array(&[2, 2], vec![7.0f64, 2.0, -5.0, 9.0]),
            array(&[1, 2], vec![1.0f64, 4.0]),
        ],
    );
    assert_eq!(out[0].as_slice::<f64>().unwrap(), &[1.0, 2.0]);
}

/// Zero-size matrices, right-hand sides and batches give empty results.
#[test]
fn zero_sizes() {
    for (a, b) in [
        ("f32[0,0]", "f32[0,3]"),
        ("f32[3,3]", "f32[3,0]"),
        ("f32[0,2,2]", "f32[0,2,5]"),
    ] {
        let text = format!(
            "func @f(%0: {a}, %1: {b}) -> ({b}) {{\n  %2 = triangular_solve %0, %1, left_side=1, lower=1 : {b}\n  return %2\n}}\n"
        );
        let func = parse_func(&text).unwrap();
        let inputs: Vec<Array> = func
            .params
            .iter()
            .map(|t| Array::zeros(t.dtype, t.shape.clone()))
            .collect();
        let out = run(&text, &inputs);
        assert_eq!(out[0].ty(), &func.params[1], "{a}, {b}");
    }
}

/// Ill-typed solves are errors naming why.
#[test]
fn type_errors_name_the_problem() {
    for (a, b, flags, why) in [
        ("f32[2,3]", "f32[2,1]", ", left_side=1", "square"),
        ("f32[3,3]", "f32[2,1]", ", left_side=1", "left side"),
        ("f32[3,3]", "f32[3,2]", "", "right side"),
        ("f32[2,3,3]", "f32[4,3,1]", ", left_side=1", "batch"),
        (
            "i32[2,2]",
            "i32[2,1]",
            ", left_side=1",
            "floating-point or complex",
        ),
        ("f32[2,2]", "f64[2,1]", ", left_side=1", "f64"),
    ] {
        let text = format!(
            "func @f(%0: {a}, %1: {b}) -> ({b}) {{\n  %2 = triangular_solve %0, %1{flags} : {b}\n  return %2\n}}\n"
        );
        let e = parse_func(&text).unwrap_err().to_string();
        assert!(e.contains(why), "{a}, {b}: {e}");
    }
    let a = Tensor::from_vec([2, 3], vec![1.0f32; 6]);
    let e = a
        .triangular_solve(&Tensor::from_vec([2, 1], vec![1.0f32; 2]), options(1))
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("square") && e.contains("linalg.rs"), "{e}");
}

/// `vmap` over right-hand sides only, and over both operands, solves each example.
#[test]
fn batched_solves_solve_each_example() {
    let s = options(1 | 2);
    let a = Tensor::from_vec([3, 3], matrices(1, 3, 5));
    let bs = Tensor::from_vec([4, 3, 2], values(24, 6));
    let solve_b = |b: Tensor| a.triangular_solve(&b, s);
    let batched = ferrax::vmap(solve_b)(bs.clone()).to_vec::<f64>().unwrap();
    let each: Vec<f64> = (0..4)
        .flat_map(|k| {
            let b = bs.slice(&[k, 0, 0], &[k + 1, 3, 2]).reshape([3, 2]);
            a.triangular_solve(&b, s).to_vec::<f64>().unwrap()
        })
        .collect();
    assert_eq!(batched, each);
    let r#as = Tensor::from_vec([4, 3, 3], matrices(4, 3, 7));
    let both = ferrax::vmap(|(a, b): (Tensor, Tensor)| a.triangular_solve(&b, s))((
        r#as.clone(),
        bs.clone(),
    ))
    .to_vec::<f64>()
    .unwrap();
    let each: Vec<f64> = (0..4)
        .flat_map(|k| {
            let a = r#as.slice(&[k, 0, 0], &[k + 1, 3, 3]).reshape([3, 3]);
            let b = bs.slice(&[k, 0, 0], &[k + 1, 3, 2]).reshape([3, 2]);
            a.triangular_solve(&b, s).to_vec::<f64>().unwrap()
        })
        .collect();
    assert_eq!(both, each);
    assert_eq!(DType::F64, bs.dtype());
}

/// `stablehlo.triangular_solve` imports every `transpose_a` (ADJOINT conjugates), and its
/// results are the IR op's.
#[test]
fn stablehlo_triangular_solve_imports() {
    for (transpose, ir_flags) in [
        ("NO_TRANSPOSE", ""),
        ("TRANSPOSE", ", transpose_a=1"),
        ("ADJOINT", ", transpose_a=1, conjugate_a=1"),
    ] {
        let text = format!(
            r#"func.func @main(%a: tensor<3x3xcomplex<f64>>, %b: tensor<3x2xcomplex<f64>>) -> tensor<3x2xcomplex<f64>> {{
  %0 = "stablehlo.triangular_solve"(%a, %b) <{{left_side = true, lower = true, transpose_a = #stablehlo<transpose {transpose}>, unit_diagonal = false}}> : (tensor<3x3xcomplex<f64>>, tensor<3x2xcomplex<f64>>) -> tensor<3x2xcomplex<f64>>
  return %0 : tensor<3x2xcomplex<f64>>
}}"#
        );
        let func = ferrax::stablehlo::load(&text).unwrap();
        let printed = func.to_string();
        assert!(
            printed.contains(&format!(
                "triangular_solve %0, %1, left_side=1, lower=1{ir_flags} :"
            )),
            "{printed}"
        );
    }
    let bad = "func.func @main(%a: tensor<2x2xf32>, %b: tensor<2x1xf32>) -> tensor<2x1xf32> {\n  %0 = \"stablehlo.triangular_solve\"(%a, %b) <{left_side = true, lower = true, transpose_a = #stablehlo<transpose SIDEWAYS>, unit_diagonal = false}> : (tensor<2x2xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>\n  return %0 : tensor<2x1xf32>\n}";
    let e = ferrax::stablehlo::load(bad).unwrap_err().to_string();
    assert!(e.contains("NO_TRANSPOSE, TRANSPOSE or ADJOINT"), "{e}");
}
