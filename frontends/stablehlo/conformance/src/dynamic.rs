//! The set's programs with dynamic shapes (`testdata/dynamic/`, JAX's shape-polymorphism
//! tests) carry no inputs or expected values, only the program. Each is specialized to
//! concrete sizes, as a caller of the export would, run on deterministic inputs, and checked
//! as far as it can be without JAX's values: a backend other than the reference interpreter
//! must agree with it, and a `vmap_*` program (a function mapped over a batch of any size)
//! must compute each row of a batch as it computes that row alone.
//!
//! Their calling convention: the leading `tensor<i64>` parameters are the dimension variables'
//! values (as JAX passed them before `jax.export` computed them in `@main`); which `?` each
//! variable sizes is not written down, so each assignment is tried in turn until the program
//! imports (a wrong one fails its shape checks).

use crate::{parts, Outcome};
use ferrax_compiler::pipeline::{compile_simplified, Backend};
use ferrax_ir::{DType, Elements, Func, Literal, Scalar, TensorType};
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::{load_specialized, Error, Parameter, Specialize};

/// The sizes tried for the dimension variables, one set at a time.
const SIZE_SETS: [[usize; 3]; 3] = [[3, 4, 5], [2, 3, 4], [4, 6, 8]];
/// Most assignments of variables to dynamic dimensions tried per size set.
const MAX_ASSIGNMENTS: usize = 256;

/// Whether the program's parameters have dynamic shapes.
pub fn is_dynamic(params: &[Parameter]) -> bool {
    params.iter().any(|p| p.dims.iter().any(Option::is_none))
}

/// A specialization of `params`: the program, the values of its dimension variables, and its
/// parameters' shapes.
struct Specialized {
    func: Func,
    shapes: Vec<TensorType>,
}

/// The first assignment of sizes to `params`' dynamic dimensions that imports, with the
/// variables of `size_set`; a size set of one value gives every dynamic dimension that size.
fn specialize(text: &str, params: &[Parameter], sizes: &[usize]) -> Result<Specialized, Error> {
    let variables = params
        .iter()
        .take_while(|p| p.dtype == DType::I64 && p.dims.is_empty())
        .count()
        .max(1)
        .min(sizes.len());
    let dynamic: Vec<(usize, usize)> = params
        .iter()
        .enumerate()
        .flat_map(|(k, p)| {
            p.dims
                .iter()
                .enumerate()
                .filter(|(_, d)| d.is_none())
                .map(move |(d, _)| (k, d))
        })
        .collect();
    let has_variables = params
        .first()
        .is_some_and(|p| p.dtype == DType::I64 && p.dims.is_empty());
    let mut last = None;
    let combinations = variables
        .saturating_pow(dynamic.len() as u32)
        .min(MAX_ASSIGNMENTS);
    for mut code in 0..combinations {
        let mut dims: Vec<Vec<usize>> = params
            .iter()
            .map(|p| p.dims.iter().map(|d| d.unwrap_or(0)).collect())
            .collect();
        for &(k, d) in &dynamic {
            dims[k][d] = sizes[code % variables];
            code /= variables;
        }
        let specs: Vec<Specialize> = dims
            .iter()
            .enumerate()
            .map(|(k, d)| {
                if has_variables && k < variables {
                    Specialize::Value(Literal::scalar(Scalar::I64(sizes[k] as i64)))
                } else {
                    Specialize::Shape(d.clone())
                }
            })
            .collect();
        match load_specialized(text, &specs) {
            Ok(func) => {
                let shapes = params
                    .iter()
                    .zip(&dims)
                    .enumerate()
                    .filter(|(k, _)| !(has_variables && *k < variables))
                    .map(|(_, (p, d))| TensorType::new(p.dtype, d.clone()))
                    .collect();
                return Ok(Specialized { func, shapes });
            }
            Err(e @ Error::Unsupported { .. }) => return Err(e),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::Syntax {
        line: 1,
        message: "no assignment of sizes to try".into(),
    }))
}

/// Deterministic inputs of `ty`, element `i` of input `k` varying with both: small integers,
/// floats within ±2.5.
fn input(k: usize, ty: &TensorType) -> Array {
    let values: Vec<Scalar> = (0..ty.numel())
        .map(|i| {
            let h = (i * 7919 + k * 104_729) % 101;
            let v = match ty.dtype {
                DType::Bool => (h % 2) as f64,
                d if d.is_float() || d.is_complex() => h as f64 / 20.0 - 2.5,
                DType::U8 | DType::U16 | DType::U32 | DType::U64 => (h % 7) as f64,
                _ => (h % 7) as f64 - 3.0,
            };
            Scalar::from_f64(ty.dtype, v)
        })
        .collect();
    let data = Elements::from_scalars(ty.dtype, &values)
        .unwrap_or_else(|| Elements::zeros(ty.dtype, ty.numel()));
    Array::from_literal(&Literal {
        ty: ty.clone(),
        data,
    })
}

/// Rows `from..to` of `x` along its first dimension.
fn rows(x: &Array, from: usize, to: usize) -> Option<Array> {
    let first = *x.dims().first()?;
    if to > first {
        return None;
    }
    let inner = x.numel() / first.max(1);
    let values: Vec<Scalar> = (from * inner..to * inner)
        .map(|i| x.elements().get(i))
        .collect();
    let mut dims = x.dims().to_vec();
    dims[0] = to - from;
    let data = Elements::from_scalars(x.dtype(), &values)?;
    Some(Array::from_literal(&Literal {
        ty: TensorType::new(x.dtype(), dims),
        data,
    }))
}

/// Whether `a` and `b` agree: integers exactly, floats to 1e-4 of their magnitude (backends
/// may round sums in another order or fuse a multiply-add), NaN with NaN.
fn agree(a: &Array, b: &Array) -> Result<(), String> {
    if a.ty() != b.ty() {
        return Err(format!("{} against {}", a.ty(), b.ty()));
    }
    let inexact = a.dtype().is_float() || a.dtype().is_complex();
    for i in 0..a.numel() {
        let (x, y) = (a.elements().get(i), b.elements().get(i));
        let close = |(p, q): (f64, f64)| {
            p == q || (p.is_nan() && q.is_nan()) || (p - q).abs() <= 1e-4 * q.abs().max(1.0)
        };
        let agrees = match inexact {
            true => parts(x).zip(parts(y)).all(close),
            false => x == y,
        };
        if !agrees {
            return Err(format!("element {i}: {x:?} against {y:?}"));
        }
    }
    Ok(())
}

fn run(func: &Func, args: Vec<Array>, backend: &Backend) -> Result<Vec<Array>, String> {
    let exe = compile_simplified(func, backend).map_err(|e| format!("compiling: {e}"))?;
    exe.run(args).map_err(|e| e.to_string())
}

/// Specializes, runs and checks the program `text` (see the module's documentation).
pub fn run_dynamic(text: &str, params: &[Parameter], backend: &Backend, vmapped: bool) -> Outcome {
    let mut failure = String::new();
    for sizes in SIZE_SETS {
        let s = match specialize(text, params, &sizes) {
            Ok(s) => s,
            Err(e @ Error::Unsupported { .. }) => return Outcome::Unsupported(e.to_string()),
            Err(e) => {
                failure = e.to_string();
                continue;
            }
        };
        let args: Vec<Array> = s
            .shapes
            .iter()
            .enumerate()
            .map(|(k, t)| input(k, t))
            .collect();
        let outputs = match run(&s.func, args.clone(), backend) {
            Ok(o) => o,
            Err(e) => return Outcome::Fail(e),
        };
        if !matches!(backend, Backend::Interpreter) {
            let reference = match interpret(&s.func, &args) {
                Ok(r) => r,
                Err(e) => return Outcome::Fail(format!("reference: {e}")),
            };
            for (k, (o, r)) in outputs.iter().zip(&reference).enumerate() {
                if let Err(e) = agree(o, r) {
                    return Outcome::Fail(format!(
                        "output {k} against the reference interpreter: {e}"
                    ));
                }
            }
        }
        if vmapped {
            if let Err(e) = rows_alone(text, params, &args, &outputs, backend) {
                return Outcome::Fail(e);
            }
        }
        return Outcome::Ran;
    }
    Outcome::Fail(failure)
}

/// A `vmap_*` program's batch computes each row as a batch of that row alone does: checked
/// where every dynamic dimension is the first of its array (the batch) and the outputs are
/// batched alike.
fn rows_alone(
    text: &str,
    params: &[Parameter],
    args: &[Array],
    outputs: &[Array],
    backend: &Backend,
) -> Result<(), String> {
    let batched = |p: &Parameter| p.dims.first() == Some(&None);
    let arrays: Vec<&Parameter> = params
        .iter()
        .filter(|p| !(p.dtype == DType::I64 && p.dims.is_empty()))
        .collect();
    let only_batch = arrays
        .iter()
        .all(|p| p.dims.iter().skip(1).all(Option::is_some));
    let Some(batch) = args
        .iter()
        .zip(&arrays)
        .find(|(_, p)| batched(p))
        .map(|(a, _)| a.dims()[0])
    else {
        return Ok(());
    };
    if !only_batch || outputs.iter().any(|o| o.dims().first() != Some(&batch)) {
        return Ok(());
    }
    let single = specialize(text, params, &[1]).map_err(|e| format!("a batch of one: {e}"))?;
    for row in 0..batch {
        let row_args = args
            .iter()
            .zip(&arrays)
            .map(|(a, p)| {
                if batched(p) {
                    rows(a, row, row + 1)
                } else {
                    Some(a.clone())
                }
            })
            .collect::<Option<Vec<_>>>()
            .ok_or("slicing a row")?;
        let alone = run(&single.func, row_args, backend)?;
        for (k, (o, a)) in outputs.iter().zip(&alone).enumerate() {
            let from_batch = rows(o, row, row + 1).ok_or("slicing an output row")?;
            agree(&from_batch, a)
                .map_err(|e| format!("row {row} of output {k} differs alone: {e}"))?;
        }
    }
    Ok(())
}
