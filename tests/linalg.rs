//! `triangular_solve`: every combination of side, triangle, transpose, conjugate and unit
//! diagonal solves its system (the residual `op(a)·x − b` against a bound derived from the
//! conditioning), in f32, f64 and c128, with batch dimensions, on the interpreter, the CPU
//! backend and the emulated GPU bit for bit; exact results where the arithmetic is exact; zero
//! sizes; `vmap`; type errors; the text format; and the StableHLO import.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::numbers::{array, signed as values, typed, widened, C64};
use common::run_on_every_backend as run;

use ferrax::ir::{parse_func, TriangularSolve};
use ferrax::{Array, DType, Tensor};

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

/// The rounding unit of `dtype`.
fn unit(dtype: &str) -> f64 {
    match dtype {
        "f32" => f64::from(f32::EPSILON),
        _ => f64::EPSILON,
    }
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
            let imaginary = |part: &[f64]| {
                if dtype == "c128" {
                    part.to_vec()
                } else {
                    vec![0.0; part.len()]
                }
            };
            let inputs = [
                typed(&[batches, m, m], &complex(&a_re, &imaginary(&a_im)), dtype),
                typed(&b_dims, &complex(&b_re, &imaginary(&b_im)), dtype),
            ];
            let x = widened(&run(&text, &inputs)[0]);
            let (a, b) = (widened(&inputs[0]), widened(&inputs[1]));
            let scale = x.iter().map(|z| z.norm()).fold(1.0, f64::max);
            let r = residual(&s, &a, &b, &x, m, n);
            assert!(
                r <= 16.0 * unit(dtype) * scale,
                "{s:?} {dtype}: residual {r}"
            );
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

/// Hermitian positive-definite `m × m` matrices `b·bᴴ + m·I`, as c128, in batches.
fn positive_definite(batches: usize, m: usize, seed: u64, complex: bool) -> Vec<C64> {
    let re = values(batches * m * m, seed);
    let im = values(batches * m * m, seed + 1);
    let b: Vec<C64> = re
        .iter()
        .zip(&im)
        .map(|(&x, &y)| C64::new(x, if complex { y } else { 0.0 }))
        .collect();
    let mut a = vec![C64::new(0.0, 0.0); batches * m * m];
    for batch in 0..batches {
        let b = &b[batch * m * m..(batch + 1) * m * m];
        for i in 0..m {
            for j in 0..m {
                let mut s: C64 = (0..m).map(|k| b[i * m + k] * b[j * m + k].conj()).sum();
                if i == j {
                    s += C64::new(m as f64, 0.0);
                }
                a[batch * m * m + i * m + j] = s;
            }
        }
    }
    a
}

/// `cholesky` in f64, f32 and c128 with a batch dimension: lower triangular with a positive
/// real diagonal, zeros above it, and `l·lᴴ` within a few roundings of `a`; on every backend
/// bit for bit. Only the lower triangle is read: what lies above it changes nothing.
#[test]
fn cholesky_factors() {
    let (batches, m) = (2, 5);
    for dtype in ["f64", "f32", "c128"] {
        let a = positive_definite(batches, m, 11, dtype == "c128");
        let text = format!(
            "func @f(%0: {dtype}[{batches},{m},{m}]) -> ({dtype}[{batches},{m},{m}]) {{\n  %1 = cholesky %0 : {dtype}[{batches},{m},{m}]\n  return %1\n}}\n"
        );
        // The same matrices with noise above the diagonal.
        let noisy: Vec<C64> = a
            .iter()
            .enumerate()
            .map(|(k, &z)| match (k % (m * m)) / m < k % m {
                true => z + C64::new(100.0, -7.0),
                false => z,
            })
            .collect();
        let dims = [batches, m, m];
        let out = run(&text, &[typed(&dims, &a, dtype)]);
        let again = run(&text, &[typed(&dims, &noisy, dtype)]);
        assert_eq!(again[0], out[0], "{dtype}: reads the upper triangle");
        let (l, unit) = (widened(&out[0]), unit(dtype));
        for batch in 0..batches {
            let (a, l) = (
                &a[batch * m * m..(batch + 1) * m * m],
                &l[batch * m * m..(batch + 1) * m * m],
            );
            for i in 0..m {
                assert!(
                    l[i * m + i].re > 0.0 && l[i * m + i].im == 0.0,
                    "{dtype}: diagonal"
                );
                for j in 0..m {
                    if j > i {
                        assert_eq!(
                            l[i * m + j],
                            C64::new(0.0, 0.0),
                            "{dtype}: above the diagonal"
                        );
                    }
                    let product: C64 = (0..m).map(|k| l[i * m + k] * l[j * m + k].conj()).sum();
                    let error = (product - a[i * m + j]).norm();
                    assert!(
                        error <= 8.0 * unit * 2.0 * m as f64,
                        "{dtype} ({i}, {j}): {error}"
                    );
                }
            }
        }
    }
}

/// A matrix that is not positive definite (or holds NaN) factors to NaN throughout, and the
/// other matrices of its batch are unaffected; zero sizes give empty results.
#[test]
fn cholesky_of_indefinite_matrices_is_nan() {
    let text = "func @f(%0: f32[3,2,2]) -> (f32[3,2,2]) {\n  %1 = cholesky %0 : f32[3,2,2]\n  return %1\n}\n";
    let a = array(
        &[3, 2, 2],
        vec![
            4.0f32,
            0.0,
            2.0,
            5.0,
            1.0,
            0.0,
            2.0,
            1.0,
            1.0,
            0.0,
            f32::NAN,
            1.0,
        ],
    );
    let out = run(text, &[a]);
    let l = out[0].as_slice::<f32>().unwrap();
    assert_eq!(&l[..4], &[2.0, 0.0, 1.0, 2.0]);
    assert!(l[4..].iter().all(|x| x.is_nan()), "{l:?}");
    for ty in ["f32[0,0]", "f64[0,3,3]", "c64[2,0,0]"] {
        let text =
            format!("func @f(%0: {ty}) -> ({ty}) {{\n  %1 = cholesky %0 : {ty}\n  return %1\n}}\n");
        let func = parse_func(&text).unwrap();
        let input = Array::zeros(func.params[0].dtype, func.params[0].shape.clone());
        assert_eq!(run(&text, &[input])[0].ty(), &func.params[0], "{ty}");
    }
    for (ty, why) in [
        ("f32[2,3]", "square"),
        ("i32[2,2]", "floating-point or complex"),
        ("f32[3]", "square"),
    ] {
        let text =
            format!("func @f(%0: {ty}) -> ({ty}) {{\n  %1 = cholesky %0 : {ty}\n  return %1\n}}\n");
        let e = parse_func(&text).unwrap_err().to_string();
        assert!(e.contains(why), "{ty}: {e}");
    }
}

/// `Tensor::cholesky` symmetrizes as `jnp.linalg.cholesky` does; with a triangular solve each
/// way it solves a positive-definite system (`cho_solve`); `vmap` factors each example.
#[test]
fn traced_cholesky_solves_positive_definite_systems() {
    let m = 4;
    let a: Vec<f64> = positive_definite(1, m, 21, false)
        .iter()
        .map(|z| z.re)
        .collect();
    let a = Tensor::from_vec([m, m], a);
    let b = Tensor::from_vec([m, 2], values(2 * m, 22));
    let l = a.cholesky();
    let lower = TriangularSolve {
        left_side: true,
        lower: true,
        ..TriangularSolve::default()
    };
    let y = l.triangular_solve(&b, lower);
    let x = l.triangular_solve(
        &y,
        TriangularSolve {
            transpose_a: true,
            ..lower
        },
    );
    let residual = (&a.matmul(&x) - &b).abs().max(..).to_vec::<f64>().unwrap()[0];
    assert!(residual < 1e-14, "{residual}");
    let stack = Tensor::from_vec(
        [3, m, m],
        positive_definite(3, m, 23, false)
            .iter()
            .map(|z| z.re)
            .collect::<Vec<f64>>(),
    );
    let batched = ferrax::vmap(|a: Tensor| a.cholesky())(stack.clone())
        .to_vec::<f64>()
        .unwrap();
    let each: Vec<f64> = (0..3)
        .flat_map(|k| {
            let a = stack.slice(&[k, 0, 0], &[k + 1, m, m]).reshape([m, m]);
            a.cholesky().to_vec::<f64>().unwrap()
        })
        .collect();
    assert_eq!(batched, each);
}

/// `stablehlo.cholesky` with `lower = true` is the IR's op; without it (the upper factor `u`,
/// `a = uᴴ·u`, read from the upper triangle) it is the lower factor of the transpose,
/// transposed.
#[test]
fn stablehlo_cholesky_imports_both_triangles() {
    let a = positive_definite(1, 3, 31, true);
    for lower in [true, false] {
        let text = format!(
            "func.func @main(%a: tensor<3x3xcomplex<f64>>) -> tensor<3x3xcomplex<f64>> {{\n  %0 = stablehlo.cholesky %a, lower = {lower} : tensor<3x3xcomplex<f64>>\n  return %0 : tensor<3x3xcomplex<f64>>\n}}"
        );
        let func = ferrax::stablehlo::load(&text).unwrap();
        let out = ferrax::runtime::interpret(&func, &[array(&[3, 3], a.clone())]).unwrap();
        let f = out[0].as_slice::<C64>().unwrap();
        for i in 0..3 {
            for j in 0..3 {
                // l·lᴴ, or uᴴ·u.
                let product: C64 = (0..3)
                    .map(|k| match lower {
                        true => f[i * 3 + k] * f[j * 3 + k].conj(),
                        false => f[k * 3 + i].conj() * f[k * 3 + j],
                    })
                    .sum();
                assert!(
                    (product - a[i * 3 + j]).norm() < 1e-13,
                    "lower={lower} ({i}, {j})"
                );
                let zero_side = if lower { j > i } else { j < i };
                if zero_side {
                    assert_eq!(f[i * 3 + j], C64::new(0.0, 0.0), "lower={lower}");
                }
            }
        }
    }
}

/// The raw op's derivatives (no symmetrization) against central differences of each entry's
/// real and imaginary parts, in c128 and f64: entries above the diagonal, and the diagonal's
/// imaginary parts, which the factorization does not read, get zero; forward mode agrees with
/// reverse mode. The loss is `Re(Σ w·l)` with complex weights `w`.
#[test]
fn cholesky_derivatives_of_the_raw_op() {
    use ferrax::compiler::autodiff::{jvp, vjp};
    let m = 3;
    for complex in [true, false] {
        let dtype = if complex { "c128" } else { "f64" };
        let text = format!(
            "func @f(%0: {dtype}[{m},{m}]) -> ({dtype}[{m},{m}]) {{\n  %1 = cholesky %0 : {dtype}[{m},{m}]\n  return %1\n}}\n"
        );
        let func = parse_func(&text).unwrap();
        let a = positive_definite(1, m, 41, complex);
        let w: Vec<C64> = values(m * m, 42)
            .iter()
            .zip(values(m * m, 43))
            .map(|(&x, y)| C64::new(x, y))
            .collect();
        let input = |v: &[C64]| typed(&[m, m], v, dtype);
        let loss = |v: &[C64]| -> f64 {
            let l = ferrax::runtime::interpret(&func, &[input(v)]).unwrap();
            widened(&l[0]).iter().zip(&w).map(|(x, w)| (x * w).re).sum()
        };
        let weights = typed(&[m, m], &w, dtype);
        let backward = vjp(&func).unwrap();
        let out = ferrax::runtime::interpret(&backward, &[input(&a), weights]).unwrap();
        let g = widened(&out[1]);
        let h = 1e-6;
        for k in 0..m * m {
            let along = |d: C64| {
                let (mut up, mut down) = (a.clone(), a.clone());
                up[k] += d * h;
                down[k] -= d * h;
                (loss(&up) - loss(&down)) / (2.0 * h)
            };
            let want = match complex {
                true => C64::new(along(C64::new(1.0, 0.0)), -along(C64::new(0.0, 1.0))),
                false => C64::new(along(C64::new(1.0, 0.0)), 0.0),
            };
            assert!(
                (g[k] - want).norm() <= 1e-7 * want.norm().max(1.0),
                "{dtype}[{k}]: {} vs {want}",
                g[k]
            );
            if k / m < k % m {
                assert_eq!(g[k], C64::new(0.0, 0.0), "{dtype}[{k}] above the diagonal");
            }
        }
        // Forward mode along a direction: Re(Σ w·dl) = Re(Σ g·da).
        let d: Vec<C64> = values(m * m, 44)
            .iter()
            .zip(values(m * m, 45))
            .map(|(&x, y)| C64::new(x, if complex { y } else { 0.0 }))
            .collect();
        let forward = jvp(&func).unwrap();
        let out = ferrax::runtime::interpret(&forward, &[input(&a), input(&d)]).unwrap();
        let got: f64 = widened(&out[1])
            .iter()
            .zip(&w)
            .map(|(x, w)| (x * w).re)
            .sum();
        let expected: f64 = g.iter().zip(&d).map(|(g, d)| (g * d).re).sum();
        assert!(
            (got - expected).abs() <= 1e-10 * expected.abs().max(1.0),
            "{dtype}: {got} vs {expected}"
        );
    }
}
