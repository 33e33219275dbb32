//! `jnp.linalg.qr`, `eigh` and `eig` as `jax.export` writes them for the CPU (LAPACK's
//! `geqrf`, `orgqr`/`ungqr`, `syevd`/`heevd` and `geev` custom calls, with JAX's own steps
//! around them), against the values JAX computed for the same inputs
//! (`data/export_linalg.py` wrote `data/linalg.json`). QR factors compare entry for entry (the
//! reflections' signs are LAPACK's); eigenvectors column by column up to a unit factor (LAPACK
//! fixes none); `eig`'s eigenvalues in any order, their vectors following. Then `info`, the
//! `U` triangle, vectors not asked for, and bad calls.
#![allow(clippy::unwrap_used, clippy::panic)]

use ferrax_ir::{Complex, Element};
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::load;
use serde_json::Value;

type C = Complex<f64>;

fn array<T: Element>(dims: &[usize], v: Vec<T>) -> Array {
    Array::new(dims.to_vec(), T::into_elements(v)).unwrap()
}

/// A JSON array of numbers.
fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// A recorded array: its dtype name, dims and elements as c128.
fn recorded(v: &Value) -> (String, Vec<usize>, Vec<C>) {
    let dims: Vec<usize> = numbers(&v["shape"]).iter().map(|&d| d as usize).collect();
    let re = numbers(&v["re"]);
    let im = match v.get("im") {
        Some(im) => numbers(im),
        None => vec![0.0; re.len()],
    };
    let values = re.into_iter().zip(im).map(|(r, i)| C::new(r, i)).collect();
    (v["dtype"].as_str().unwrap().to_string(), dims, values)
}

fn to_array(dtype: &str, dims: &[usize], v: &[C]) -> Array {
    match dtype {
        "float32" => array(dims, v.iter().map(|z| z.re as f32).collect()),
        "float64" => array(dims, v.iter().map(|z| z.re).collect()),
        "complex64" => array(
            dims,
            v.iter()
                .map(|z| Complex::new(z.re as f32, z.im as f32))
                .collect(),
        ),
        "complex128" => array(dims, v.to_vec()),
        other => panic!("dtype {other}"),
    }
}

fn elements(x: &Array) -> Vec<C> {
    match x.dtype() {
        ferrax_ir::DType::F32 => x
            .as_slice::<f32>()
            .unwrap()
            .iter()
            .map(|&r| C::new(f64::from(r), 0.0))
            .collect(),
        ferrax_ir::DType::F64 => x
            .as_slice::<f64>()
            .unwrap()
            .iter()
            .map(|&r| C::new(r, 0.0))
            .collect(),
        ferrax_ir::DType::C64 => x
            .as_slice::<Complex<f32>>()
            .unwrap()
            .iter()
            .map(|z| C::new(f64::from(z.re), f64::from(z.im)))
            .collect(),
        _ => x.as_slice::<C>().unwrap().to_vec(),
    }
}

/// The tolerance for a result of `dtype`, relative to the recorded values' largest magnitude:
/// 256 rounding units.
fn tolerance(dtype: &str) -> f64 {
    match dtype {
        "float32" | "complex64" => 256.0 * f64::from(f32::EPSILON),
        _ => 256.0 * f64::EPSILON,
    }
}

#[test]
fn exported_qr_and_eigendecompositions_match_jax() {
    let record: Value = serde_json::from_str(include_str!("data/linalg.json")).unwrap();
    for case in record["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let inputs: Vec<Array> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let (dtype, dims, values) = recorded(v);
                to_array(&dtype, &dims, &values)
            })
            .collect();
        let func = load(case["mlir"].as_str().unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = interpret(&func, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        let outputs = case["outputs"].as_array().unwrap();
        assert_eq!(got.len(), outputs.len(), "{name}");
        // Where eigenvalues come in another order, the position of each of JAX's in ours.
        let mut order: Option<Vec<usize>> = None;
        for (k, (g, w)) in got.iter().zip(outputs).enumerate() {
            let (dtype, dims, want) = recorded(w);
            assert_eq!(g.dims(), &dims[..], "{name}: result {k}'s dims");
            let g = elements(g);
            let scale = want.iter().map(|z| z.norm()).fold(1.0, f64::max);
            let tol = tolerance(&dtype) * scale;
            let what = format!("{name}, result {k}");
            match case["compare"][k].as_str().unwrap() {
                "values" => {
                    for (i, (a, b)) in g.iter().zip(&want).enumerate() {
                        assert!((a - b).norm() <= tol, "{what}[{i}]: {a} against JAX's {b}");
                    }
                }
                "set" => {
                    let mut unused: Vec<usize> = (0..g.len()).collect();
                    let mut found = Vec::new();
                    for (i, w) in want.iter().enumerate() {
                        let (at, err) = unused
                            .iter()
                            .enumerate()
                            .map(|(u, &j)| (u, (g[j] - w).norm()))
                            .fold((0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
                        assert!(
                            err <= tol,
                            "{what}: JAX's eigenvalue {i}, {w}, is not among {g:?}"
                        );
                        found.push(unused.remove(at));
                    }
                    order = Some(found);
                }
                "columns" => {
                    let m = dims[dims.len() - 1];
                    for (b, (gm, wm)) in g.chunks(m * m).zip(want.chunks(m * m)).enumerate() {
                        for j in 0..m {
                            let ours = order.as_ref().map_or(j, |o| o[j]);
                            let column = |x: &[C], c: usize| {
                                (0..m).map(|r| x[r * m + c]).collect::<Vec<C>>()
                            };
                            let (x, y) = (column(gm, ours), column(wm, j));
                            let dot: C = y.iter().zip(&x).map(|(y, x)| y.conj() * x).sum();
                            let phase = dot / dot.norm();
                            for (r, (x, y)) in x.iter().zip(&y).enumerate() {
                                let err = (x - y * phase).norm();
                                assert!(err <= tol, "{what}: matrix {b}, column {j}, row {r}: {x} against JAX's {y} (times {phase})");
                            }
                        }
                    }
                }
                other => panic!("{what}: comparison {other}"),
            }
        }
    }
}

/// The recorded program of case `name`.
fn program(name: &str) -> String {
    let record: Value = serde_json::from_str(include_str!("data/linalg.json")).unwrap();
    let case = record["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap();
    case["mlir"].as_str().unwrap().to_string()
}

/// A matrix with a NaN gives `info` ≠ 0, so JAX's guard makes every result NaN, as JAX's own
/// run does.
#[test]
fn non_finite_matrices_give_nan_through_info() {
    let mut a = [1.0f64; 16];
    a[5] = f64::NAN;
    for (name, dims) in [("eig_random_f64", [4, 4]), ("eigvalsh_f64", [3, 3])] {
        let count = dims[0] * dims[1];
        let got = interpret(
            &load(&program(name)).unwrap(),
            &[array(&dims, a[..count].to_vec())],
        )
        .unwrap();
        for (k, x) in got.iter().enumerate() {
            assert!(
                elements(x).iter().all(|z| z.re.is_nan()),
                "{name}, result {k}: {x:?}"
            );
        }
    }
}

/// Flags outside LAPACK's letters and results of other types are errors naming the call.
#[test]
fn bad_calls_are_errors() {
    let text = program("eig_random_f64").replace("compute_left = 78", "compute_left = 88");
    let e = load(&text).unwrap_err().to_string();
    assert!(
        e.contains("lapack_dgeev_ffi needs compute_left = V or N"),
        "{e}"
    );
    let text = program("eigvalsh_f64").replace("uplo = 76", "uplo = 77");
    let e = load(&text).unwrap_err().to_string();
    assert!(e.contains("lapack_dsyevd_ffi needs uplo = L or U"), "{e}");
    let text = program("geqrf_f64").replace(
        "-> (tensor<4x3xf64>, tensor<3xf64>)",
        "-> (tensor<4x3xf64>, tensor<4xf64>)",
    );
    let e = load(&text).unwrap_err().to_string();
    assert!(
        e.contains("lapack_dgeqrf_ffi of tensor") || e.contains("lapack_dgeqrf_ffi of f64"),
        "{e}"
    );
    let text = program("householder_product_f64").replace("tensor<2xf64>", "tensor<4xf64>");
    let e = load(&text).unwrap_err().to_string();
    assert!(
        e.contains("householder_product") && e.contains("k ≤ n"),
        "{e}"
    );
}
