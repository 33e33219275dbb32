//! The LU factorization as `jax.export` writes it: `custom_call @lapack_?getrf_ffi` (and the
//! older `lapack_?getrf`, the GPUs' `cusolver_getrf_ffi`) giving the packed factors, 1-based
//! pivots and `info`, then JAX's own steps (pivots from 0, the NaN guard on `info`, the
//! permutation by a loop of swaps). The values are those `jax.lax.linalg.lu` gives for the
//! 3 × 3 iota matrix; `info` names the first zero pivot; results equal the IR's `lu` parts;
//! other custom calls are refused by name. Likewise `potrf`, `trsm` and `gesdd` (the SVD, with
//! JAX's published singular values).
#![allow(clippy::unwrap_used)]

use ferrax_ir::{parse_func, Element};
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::{load, Error};

/// `lax.linalg.lu` of an `n × n` matrix of `f` (`f32`, `f64`) through `target`, returning the
/// factors, the pivots, the permutation and `info`, as JAX's lowering computes them.
fn exported_lu(target: &str, f: &str, n: usize) -> String {
    let (m, v, p) = (
        format!("tensor<{n}x{n}x{f}>"),
        format!("tensor<{n}xi32>"),
        format!("tensor<{n}x{n}xi1>"),
    );
    let nan = if f == "f32" {
        "0x7FC00000"
    } else {
        "0x7FF8000000000000"
    };
    format!(
        r#"func.func public @main(%a: {m}) -> ({m}, {v}, {v}, tensor<i32>) {{
  %lu:3 = stablehlo.custom_call @{target}(%a) {{mhlo.backend_config = {{}}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]}} : ({m}) -> ({m}, {v}, tensor<i32>)
  %one = stablehlo.constant dense<1> : {v}
  %pivots = stablehlo.subtract %lu#1, %one : {v}
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %ok = stablehlo.compare  GE, %lu#2, %zero,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
  %okb = stablehlo.broadcast_in_dim %ok, dims = [] : (tensor<i1>) -> {p}
  %nan = stablehlo.constant dense<{nan}> : {m}
  %factors = stablehlo.select %okb, %lu#0, %nan : {p}, {m}
  %start = stablehlo.iota dim = 0 : {v}
  %w:2 = stablehlo.while(%i = %zero, %perm = %start) : tensor<i32>, {v}
   cond {{
    %n = stablehlo.constant dense<{n}> : tensor<i32>
    %c = stablehlo.compare  LT, %i, %n,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }} do {{
    %p1 = stablehlo.dynamic_slice %pivots, %i, sizes = [1] : ({v}, tensor<i32>) -> tensor<1xi32>
    %p = stablehlo.reshape %p1 : (tensor<1xi32>) -> tensor<i32>
    %x = stablehlo.dynamic_slice %perm, %i, sizes = [1] : ({v}, tensor<i32>) -> tensor<1xi32>
    %y = stablehlo.dynamic_slice %perm, %p, sizes = [1] : ({v}, tensor<i32>) -> tensor<1xi32>
    %s1 = stablehlo.dynamic_update_slice %perm, %y, %i : ({v}, tensor<1xi32>, tensor<i32>) -> {v}
    %s2 = stablehlo.dynamic_update_slice %s1, %x, %p : ({v}, tensor<1xi32>, tensor<i32>) -> {v}
    %step = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %step : tensor<i32>
    stablehlo.return %next, %s2 : tensor<i32>, {v}
  }}
  return %factors, %pivots, %w#1, %lu#2 : {m}, {v}, {v}, tensor<i32>
}}"#
    )
}

fn array<T: Element>(dims: &[usize], v: Vec<T>) -> Array {
    Array::new(dims.to_vec(), T::into_elements(v)).unwrap()
}

fn ints(a: &Array) -> Vec<i32> {
    a.as_slice::<i32>().unwrap().to_vec()
}

/// JAX's results for `lax.linalg.lu(jnp.arange(9.).reshape(3, 3))`, with LAPACK's pivots.
#[test]
fn lu_of_the_iota_matrix_is_jaxs() {
    for target in [
        "lapack_sgetrf_ffi",
        "cusolver_getrf_ffi",
        "hipsolver_getrf_ffi",
    ] {
        let func = load(&exported_lu(target, "f32", 3)).unwrap();
        let a = array(&[3, 3], (0..9).map(|x| x as f32).collect());
        let out = interpret(&func, &[a]).unwrap();
        assert_eq!(
            out[0].as_slice::<f32>().unwrap(),
            &[6.0, 7.0, 8.0, 0.0, 1.0, 2.0, 0.5, 0.5, 0.0],
            "{target}"
        );
        assert_eq!(ints(&out[1]), [2, 2, 2]);
        assert_eq!(ints(&out[2]), [2, 0, 1]);
        // u's last pivot is 0: LAPACK reports it (JAX keeps the factors, info ≥ 0).
        assert_eq!(ints(&out[3]), [3]);
    }
}

/// `info` is 0 for a regular matrix and the first zero pivot's position otherwise; `f64`.
#[test]
fn info_names_the_first_zero_pivot() {
    let func = load(&exported_lu("lapack_dgetrf_ffi", "f64", 2)).unwrap();
    for (a, info) in [
        (vec![2.0, 1.0, 4.0, 3.0], 0),
        (vec![1.0, 2.0, 2.0, 4.0], 2),
        (vec![0.0, 1.0, 0.0, 1.0], 1),
    ] {
        let out = interpret(&func, &[array(&[2, 2], a.clone())]).unwrap();
        assert_eq!(ints(&out[3]), [info], "{a:?}");
        assert!(out[0]
            .as_slice::<f64>()
            .unwrap()
            .iter()
            .all(|x| !x.is_nan()));
    }
}

/// A batch of complex matrices, and the older form whose last operand is the matrix: the
/// factors are the IR's `lu`, the pivots its `lu_pivots` plus one.
#[test]
fn batched_complex_and_older_calls_are_the_irs_lu() {
    let matrix = "tensor<2x3x3xcomplex<f32>>";
    let text = format!(
        r#"func.func @main(%a: {matrix}) -> ({matrix}, tensor<2x3xi32>, tensor<2xi32>) {{
  %0:3 = stablehlo.custom_call @lapack_cgetrf_ffi(%a) {{mhlo.backend_config = {{}}}} : ({matrix}) -> ({matrix}, tensor<2x3xi32>, tensor<2xi32>)
  return %0#0, %0#1, %0#2 : {matrix}, tensor<2x3xi32>, tensor<2xi32>
}}"#
    );
    let values: Vec<ferrax_ir::Complex<f32>> = (0..18)
        .map(|k| ferrax_ir::Complex::new((k * 7 % 11) as f32 - 5.0, (k * 5 % 7) as f32 - 3.0))
        .collect();
    let a = array(&[2, 3, 3], values);
    let imported = interpret(&load(&text).unwrap(), std::slice::from_ref(&a)).unwrap();
    let ir = parse_func(
        "func @f(%0: c64[2,3,3]) -> (c64[2,3,3], i32[2,3]) {\n  %1 = lu %0 : c64[2,3,3]\n  %2 = lu_pivots %0 : i32[2,3]\n  return %1, %2\n}\n",
    )
    .unwrap();
    let want = interpret(&ir, &[a]).unwrap();
    assert_eq!(imported[0].elements(), want[0].elements());
    let pivots: Vec<i32> = ints(&want[1]).iter().map(|p| p + 1).collect();
    assert_eq!(ints(&imported[1]), pivots);
    assert_eq!(ints(&imported[2]), [0, 0]);

    let older = r#"func.func @main(%a: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2xi32>, tensor<i32>) {
  %b = stablehlo.constant dense<1> : tensor<i64>
  %m = stablehlo.constant dense<2> : tensor<i32>
  %0:3 = stablehlo.custom_call @lapack_sgetrf(%b, %m, %m, %a) {api_version = 2 : i32} : (tensor<i64>, tensor<i32>, tensor<i32>, tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2xi32>, tensor<i32>)
  return %0#0, %0#1, %0#2 : tensor<2x2xf32>, tensor<2xi32>, tensor<i32>
}"#;
    let out = interpret(
        &load(older).unwrap(),
        &[array(&[2, 2], vec![2.0f32, 1.0, 4.0, 3.0])],
    )
    .unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[4.0, 3.0, 0.5, -0.5]);
    assert_eq!(ints(&out[1]), [2, 2]);
    let generic = r#"func.func @main(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0:3 = "stablehlo.custom_call"(%a) {call_target_name = "lapack_sgetrf_ffi"} : (tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2xi32>, tensor<i32>)
  return %0#0 : tensor<2x2xf32>
}"#;
    let out = interpret(
        &load(generic).unwrap(),
        &[array(&[2, 2], vec![2.0f32, 1.0, 4.0, 3.0])],
    )
    .unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[4.0, 3.0, 0.5, -0.5]);
}

/// Wrong result types are an error naming the right ones; other targets are unsupported.
#[test]
fn other_calls_and_wrong_types_are_refused() {
    let wrong = r#"func.func @main(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0:3 = stablehlo.custom_call @lapack_sgetrf_ffi(%a) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3xi32>, tensor<i32>)
  return %0#0 : tensor<2x3xf32>
}"#;
    let e = load(wrong).unwrap_err().to_string();
    assert!(e.contains("i32[2]") && e.contains("line 2"), "{e}");
    let other = r#"func.func @main(%p: tensor<3xi32>) -> tensor<4xi32> {
  %0 = stablehlo.custom_call @cu_lu_pivots_to_permutation(%p) : (tensor<3xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}"#;
    match load(other) {
        Err(e @ Error::Unsupported { .. }) => {
            assert!(e.to_string().contains("cu_lu_pivots_to_permutation"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

/// `lapack_?potrf_ffi`: the factor of `uplo`'s triangle with the other kept as the input had
/// it (LAPACK writes one triangle), `info` 0; a matrix that is not positive definite gives
/// `info` 1 and NaN in the written triangle.
#[test]
fn potrf_factors_one_triangle() {
    let program = |uplo: u8| {
        format!(
            r#"func.func @main(%a: tensor<2x2xf64>) -> (tensor<2x2xf64>, tensor<i32>) {{
  %0:2 = stablehlo.custom_call @lapack_dpotrf_ffi(%a) {{mhlo.backend_config = {{uplo = {uplo} : ui8}}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>]}} : (tensor<2x2xf64>) -> (tensor<2x2xf64>, tensor<i32>)
  return %0#0, %0#1 : tensor<2x2xf64>, tensor<i32>
}}"#
        )
    };
    let a = array(&[2, 2], vec![4.0, 2.0, 2.0, 5.0]);
    for (uplo, want) in [(b'L', [2.0, 2.0, 1.0, 2.0]), (b'U', [2.0, 1.0, 2.0, 2.0])] {
        let out = interpret(&load(&program(uplo)).unwrap(), std::slice::from_ref(&a)).unwrap();
        assert_eq!(out[0].as_slice::<f64>().unwrap(), &want, "{}", uplo as char);
        assert_eq!(ints(&out[1]), [0]);
    }
    let indefinite = array(&[2, 2], vec![1.0, 2.0, 2.0, 1.0]);
    let out = interpret(&load(&program(b'L')).unwrap(), &[indefinite]).unwrap();
    let factor = out[0].as_slice::<f64>().unwrap();
    assert!(factor[0].is_nan() && factor[2].is_nan() && factor[3].is_nan());
    assert_eq!(factor[1], 2.0);
    assert_eq!(ints(&out[1]), [1]);
    let e = load(&program(b'X')).unwrap_err().to_string();
    assert!(e.contains("uplo"), "{e}");
}

/// `lapack_?trsm_ffi` is the IR's `triangular_solve` for every side, triangle, `trans_x` and
/// diagonal, with `alpha` scaling the right-hand side; an exact system solves exactly.
#[test]
fn trsm_is_the_irs_triangular_solve() {
    let a = array(&[2, 2], vec![2.0f32, 7.0, 3.0, 1.0]);
    let b = array(&[2, 2], vec![4.0f32, 1.0, 11.0, -2.0]);
    for side in [b'L', b'R'] {
        for uplo in [b'L', b'U'] {
            for trans in [b'N', b'T', b'C'] {
                for diag in [b'N', b'U'] {
                    let text = format!(
                        r#"func.func @main(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> tensor<2x2xf32> {{
  %alpha = stablehlo.constant dense<2.0> : tensor<f32>
  %0 = stablehlo.custom_call @lapack_strsm_ffi(%a, %b, %alpha) {{mhlo.backend_config = {{diag = {diag} : ui8, side = {side} : ui8, trans_x = {trans} : ui8, uplo = {uplo} : ui8}}}} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}}"#
                    );
                    let flags: String = [
                        ("left_side", side == b'L'),
                        ("lower", uplo == b'L'),
                        ("transpose_a", trans != b'N'),
                        ("conjugate_a", trans == b'C'),
                        ("unit_diagonal", diag == b'U'),
                    ]
                    .iter()
                    .filter(|(_, on)| *on)
                    .map(|(name, _)| format!(", {name}=1"))
                    .collect();
                    let ir = parse_func(&format!(
                        "func @f(%0: f32[2,2], %1: f32[2,2]) -> (f32[2,2]) {{\n  %2 = constant 2.0 : f32[2,2]\n  %3 = mul %2, %1 : f32[2,2]\n  %4 = triangular_solve %0, %3{flags} : f32[2,2]\n  return %4\n}}\n"
                    ))
                    .unwrap();
                    let inputs = [a.clone(), b.clone()];
                    let got = interpret(&load(&text).unwrap(), &inputs).unwrap();
                    let want = interpret(&ir, &inputs).unwrap();
                    assert_eq!(got[0].elements(), want[0].elements(), "{text}");
                }
            }
        }
    }
    // [[2, 0], [3, 1]]·x = [4, 11] (lower, left): x = [2, 5].
    let text = r#"func.func @main(%a: tensor<2x2xf64>, %b: tensor<2x1xf64>) -> tensor<2x1xf64> {
  %0 = stablehlo.custom_call @lapack_dtrsm_ffi(%a, %b) {mhlo.backend_config = {diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}} : (tensor<2x2xf64>, tensor<2x1xf64>) -> tensor<2x1xf64>
  return %0 : tensor<2x1xf64>
}"#;
    let out = interpret(
        &load(text).unwrap(),
        &[
            array(&[2, 2], vec![2.0, 99.0, 3.0, 1.0]),
            array(&[2, 1], vec![4.0, 11.0]),
        ],
    )
    .unwrap();
    assert_eq!(out[0].as_slice::<f64>().unwrap(), &[2.0, 5.0]);
}

/// `jnp.linalg.svd` as `jax.export` writes it on the CPU: `lapack_?gesdd_ffi` in `mode`
/// (`65` is `A`, the full vectors; `83` is `S`), then NaN where `info` is not 0.
fn exported_svd(f: &str, dims: &str, (s, u, vt): (&str, &str, &str), mode: u8) -> String {
    let a = format!("tensor<{dims}x{f}>");
    let (s, u, vt) = (
        format!("tensor<{s}x{f}>"),
        format!("tensor<{u}x{f}>"),
        format!("tensor<{vt}x{f}>"),
    );
    format!(
        r#"func.func public @main(%a: {a}) -> ({u}, {s}, {vt}, tensor<2xi32>) {{
  %0:7 = stablehlo.custom_call @lapack_{p}gesdd_ffi(%a) {{mhlo.backend_config = {{mode = {mode} : ui8}}, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>]}} : ({a}) -> ({a}, {s}, {u}, {vt}, tensor<2xi32>, tensor<32xi32>, tensor<268x{f}>)
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %zeros = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<i32>) -> tensor<2xi32>
  %ok = stablehlo.compare  EQ, %0#4, %zeros,  SIGNED : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
  %nan = stablehlo.constant dense<{nan}> : tensor<{f}>
  %okv = stablehlo.broadcast_in_dim %ok, dims = [0] : (tensor<2xi1>) -> tensor<{s_dims}xi1>
  %nans = stablehlo.broadcast_in_dim %nan, dims = [] : (tensor<{f}>) -> {s}
  %values = stablehlo.select %okv, %0#1, %nans : tensor<{s_dims}xi1>, {s}
  return %0#2, %values, %0#3, %0#4 : {u}, {s}, {vt}, tensor<2xi32>
}}"#,
        p = if f == "f32" { "s" } else { "d" },
        nan = if f == "f32" {
            "0x7FC00000"
        } else {
            "0x7FF8000000000000"
        },
        s_dims = s
            .trim_start_matches("tensor<")
            .split('x')
            .take(2)
            .collect::<Vec<_>>()
            .join("x"),
    )
}

/// JAX's published singular values of two 4 × 4 f32 matrices (its export tests' data), and
/// vectors that equal JAX's up to each pair's sign; `info` 0, and NaN results with `info` −4
/// for a matrix holding NaN; the reduced mode; the IR's `svd` parts against the call.
#[test]
fn gesdd_gives_jaxs_singular_values() {
    let a: Vec<f32> = vec![
        1.5410905,
        -2.775912,
        -2.374003,
        4.028736,
        -0.56933475,
        1.6115232,
        0.9041465,
        -0.8321383,
        -5.382895,
        4.734856,
        2.1972926,
        1.5553856,
        0.5109847,
        -1.1969309,
        3.3766198,
        -1.3678027,
        2.2637439,
        3.406768,
        4.809871,
        2.8010902,
        -1.9981416,
        -0.6599986,
        0.5138156,
        4.5982494,
        -2.335944,
        -9.151717,
        -1.0481138,
        2.272443,
        -8.257684,
        1.8223318,
        0.38403794,
        5.0769973,
    ];
    let jax_s = [
        8.551605f32,
        5.3574076,
        2.8073733,
        0.52260846,
        11.457574,
        10.041604,
        5.671653,
        1.4754113,
    ];
    let jax_u_first_column = [
        -0.48540133f32,
        0.21800542,
        0.84570533,
        0.04052323,
        -0.21146727,
        0.3461469,
        0.6526193,
        0.6399629,
    ];
    let text = exported_svd("f32", "2x4x4", ("2x4", "2x4x4", "2x4x4"), 65);
    let func = load(&text).unwrap();
    let out = interpret(&func, &[array(&[2, 4, 4], a.clone())]).unwrap();
    let s = out[1].to_vec::<f32>().unwrap();
    for (got, want) in s.iter().zip(jax_s) {
        assert!((got - want).abs() <= 4e-6 * want, "{s:?}");
    }
    let u = out[0].to_vec::<f32>().unwrap();
    for (b, chunk) in jax_u_first_column.chunks(4).enumerate() {
        let column: Vec<f32> = (0..4).map(|i| u[b * 16 + i * 4]).collect();
        let sign = if column[0] * chunk[0] < 0.0 {
            -1.0
        } else {
            1.0
        };
        for (got, want) in column.iter().zip(chunk) {
            assert!((sign * got - want).abs() <= 1e-5, "{column:?} vs {chunk:?}");
        }
    }
    assert_eq!(out[3].to_vec::<i32>().unwrap(), [0, 0]);

    let mut bad = a.clone();
    bad[20] = f32::NAN;
    let out = interpret(&func, &[array(&[2, 4, 4], bad)]).unwrap();
    assert_eq!(out[3].to_vec::<i32>().unwrap(), [0, -4]);
    let s = out[1].to_vec::<f32>().unwrap();
    assert!(s[..4].iter().all(|x| x.is_finite()) && s[4..].iter().all(|x| x.is_nan()));

    // The reduced vectors of wide matrices equal the IR's `svd` parts.
    let wide: Vec<f64> = (0..24).map(|i| ((i * 7) % 11) as f64 - 5.0).collect();
    let text = exported_svd("f64", "2x3x4", ("2x3", "2x3x3", "2x3x4"), 83);
    let out = interpret(&load(&text).unwrap(), &[array(&[2, 3, 4], wide.clone())]).unwrap();
    let ir = parse_func(
        "func @f(%0: f64[2,3,4]) -> (f64[2,3,3], f64[2,3], f64[2,3,4]) {
  %1 = svd_u %0 : f64[2,3,3]
  %2 = svd_values %0 : f64[2,3]
  %3 = svd_vh %0 : f64[2,3,4]
  return %1, %2, %3
}",
    )
    .unwrap();
    let want = interpret(&ir, &[array(&[2, 3, 4], wide)]).unwrap();
    assert_eq!(&out[..3], &want[..]);

    // Results of the wrong types are refused, naming what the call gives.
    let wrong = exported_svd("f32", "2x4x4", ("2x4", "2x4x3", "2x4x4"), 65);
    let e = load(&wrong).unwrap_err().to_string();
    assert!(
        e.contains("lapack_sgesdd_ffi of") && e.contains("gives"),
        "{e}"
    );
    let odd = exported_svd("f32", "2x4x4", ("2x4", "2x4x4", "2x4x4"), 79);
    assert!(matches!(load(&odd), Err(Error::Unsupported { .. })));
}
