//! `ferrax-conformance DIR... [--backend reference|cpu|gpu] [--min-passed N] [--min-ran N]`:
//! imports every `.mlir` file under the given directories, runs it with the file's inputs
//! passed as runtime arguments, applies the file's own checks, and prints one line per file
//! and a summary.
//!
//! A file passes, fails (a wrong result, or an error while importing, compiling or running
//! it), is unsupported (the importer refuses a form, op or element type ferrax lacks: an
//! `Error::Unsupported`), or panics. A program with dynamic shapes, which has no expected
//! values, runs instead of passing (see `dynamic`). A panic is caught per file so that one bad
//! file cannot stop the run, and it always makes the exit status 1, as does passing fewer
//! than `--min-passed` files or running fewer than `--min-ran`.

mod dynamic;

use ferrax_compiler::backend::gpu::GpuOptions;
use ferrax_compiler::pipeline::{compile_simplified, Backend};
use ferrax_ir::{ulp_distance as ulps, Scalar};
use ferrax_runtime::CudaDevice;
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::{test_cases, CheckKind, Expected, TestCase};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub(crate) enum Outcome {
    Pass,
    /// A program without expected values ran, and agreed with what it could be checked against.
    Ran,
    Fail(String),
    Unsupported(String),
    Panic(String),
}

/// An element's values to compare: a complex number's two parts, or the one value.
fn parts(x: Scalar) -> impl Iterator<Item = f64> {
    let (first, second) = match x {
        Scalar::C64(z) => (f64::from(z.re), Some(f64::from(z.im))),
        Scalar::C128(z) => (z.re, Some(z.im)),
        other => (other.to_f64(), None),
    };
    std::iter::once(first).chain(second)
}

/// `Ok(())` or the largest error found. Complex numbers compare part by part (their ULP
/// distance is their parts' larger one).
fn compare(kind: &CheckKind, actual: &Array, expected: &Array) -> Result<(), String> {
    if actual.ty() != expected.ty() {
        return Err(format!(
            "type {} but expected {}",
            actual.ty(),
            expected.ty()
        ));
    }
    let dtype = actual.dtype();
    let inexact = dtype.is_float() || dtype.is_complex();
    let (a, e) = (actual.elements(), expected.elements());
    let mut worst = 0f64;
    let mut failed = false;
    for i in 0..a.len() {
        let (x, y) = (a.get(i), e.get(i));
        if let CheckKind::Ulp { min, max } = kind {
            if inexact {
                let d = ulps(x, y);
                if d > *max || d < *min {
                    failed = true;
                }
                worst = worst.max(d as f64);
                continue;
            }
        }
        for (fx, fy) in parts(x).zip(parts(y)) {
            if fx.is_nan() && fy.is_nan() {
                continue;
            }
            let err = match kind {
                _ if !inexact => {
                    if x == y {
                        0.0
                    } else {
                        (fx - fy).abs().max(1.0)
                    }
                }
                CheckKind::Exact | CheckKind::Ulp { .. } => {
                    if fx == fy {
                        0.0
                    } else {
                        (fx - fy).abs()
                    }
                }
                CheckKind::Absolute(tol) => {
                    let d = if fx == fy { 0.0 } else { (fx - fy).abs() };
                    if d.is_nan() || d > *tol {
                        failed = true;
                    }
                    worst = worst.max(if d.is_nan() { f64::INFINITY } else { d });
                    continue;
                }
            };
            if err != 0.0 {
                failed = true;
                worst = worst.max(err);
            }
        }
    }
    if !failed {
        return Ok(());
    }
    Err(match kind {
        CheckKind::Ulp { .. } if inexact => format!("largest error {worst} ulp"),
        _ => format!("largest error {worst:e}"),
    })
}

fn run_case(case: &TestCase, backend: &Backend) -> Outcome {
    let mut args = Vec::new();
    for input in &case.inputs {
        match interpret(input, &[]) {
            Ok(values) => args.extend(values),
            Err(e) => return Outcome::Fail(format!("{}: inputs: {e}", case.name)),
        }
    }
    // The program as imported, unsimplified: its own instructions are under test.
    let outputs = match compile_simplified(&case.program.func, backend) {
        Ok(exe) => exe.run(args).map_err(|e| e.to_string()),
        Err(e) => return Outcome::Fail(format!("{}: compiling: {e}", case.name)),
    };
    let outputs = match outputs {
        Ok(o) => o,
        Err(e) => return Outcome::Fail(format!("{}: {e}", case.name)),
    };
    for check in &case.program.checks {
        let output = |k: usize| {
            outputs
                .get(k)
                .ok_or_else(|| format!("{}: no output {k} to check", case.name))
        };
        let actual = match output(check.actual) {
            Ok(a) => a,
            Err(e) => return Outcome::Fail(e),
        };
        let expected = match &check.expected {
            Expected::Output(k) => match output(*k) {
                Ok(e) => e.clone(),
                Err(e) => return Outcome::Fail(e),
            },
            Expected::Constant(lit) => Array::from_literal(lit),
        };
        if let Err(e) = compare(&check.kind, actual, &expected) {
            return Outcome::Fail(format!("{}: check at line {}: {e}", case.name, check.line));
        }
    }
    Outcome::Pass
}

fn run_file(path: &Path, backend: &Backend) -> Outcome {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return Outcome::Fail(format!("cannot read: {e}")),
    };
    if let Ok(params) = ferrax_stablehlo::parameters(&text) {
        if dynamic::is_dynamic(&params) {
            let vmapped = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmap_"));
            return dynamic::run_dynamic(&text, &params, backend, vmapped);
        }
    }
    let cases = match test_cases(&text) {
        Ok(c) => c,
        Err(e @ ferrax_stablehlo::Error::Unsupported { .. }) => {
            return Outcome::Unsupported(e.to_string())
        }
        Err(e @ ferrax_stablehlo::Error::Syntax { .. }) => return Outcome::Fail(e.to_string()),
    };
    if cases.iter().all(|c| c.program.checks.is_empty()) {
        return Outcome::Unsupported("no checks".into());
    }
    for case in &cases {
        match run_case(case, backend) {
            Outcome::Pass | Outcome::Ran => {}
            other => return other,
        }
    }
    Outcome::Pass
}

/// `run_file`, with a panic caught and reported as the file's outcome.
fn run_file_caught(path: &Path, backend: &Backend) -> Outcome {
    std::panic::catch_unwind(AssertUnwindSafe(|| run_file(path, backend))).unwrap_or_else(|p| {
        let message = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        Outcome::Panic(message)
    })
}

fn mlir_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if dir.is_file() {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            mlir_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "mlir") {
            out.push(path);
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut dirs = Vec::new();
    let mut min_passed = 0usize;
    let mut min_ran = 0usize;
    let mut backend = Backend::Interpreter;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--backend" => match args.next().as_deref() {
                Some("reference") => backend = Backend::Interpreter,
                Some("cpu") => backend = Backend::Cpu,
                Some("gpu") => match CudaDevice::new(0) {
                    Ok(device) => {
                        backend = Backend::Gpu {
                            device,
                            options: GpuOptions::HIGHEST,
                        }
                    }
                    Err(e) => {
                        eprintln!("--backend gpu: {e}");
                        return ExitCode::FAILURE;
                    }
                },
                Some(other) => {
                    eprintln!("backend '{other}' is not available; use reference, cpu or gpu");
                    return ExitCode::from(2);
                }
                None => {
                    eprintln!("--backend needs a value");
                    return ExitCode::from(2);
                }
            },
            "--min-passed" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => min_passed = n,
                None => {
                    eprintln!("--min-passed needs a number");
                    return ExitCode::from(2);
                }
            },
            "--min-ran" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => min_ran = n,
                None => {
                    eprintln!("--min-ran needs a number");
                    return ExitCode::from(2);
                }
            },
            _ => dirs.push(PathBuf::from(a)),
        }
    }
    if dirs.is_empty() {
        eprintln!(
            "usage: ferrax-conformance DIR... [--backend reference|cpu|gpu] [--min-passed N] \
             [--min-ran N]"
        );
        return ExitCode::from(2);
    }
    let mut files = Vec::new();
    for d in &dirs {
        if let Err(e) = mlir_files(d, &mut files) {
            eprintln!("{}: {e}", d.display());
            return ExitCode::from(2);
        }
    }
    files.sort();
    // A caught panic is reported on the file's line; the hook adds where it happened, on one
    // line instead of the default hook's report.
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        eprintln!("panic{at}");
    }));
    let (mut passed, mut ran, mut failed, mut unsupported) = (0, 0, 0, 0);
    let mut panicked = Vec::new();
    for f in &files {
        let name = f.display();
        match run_file_caught(f, &backend) {
            Outcome::Pass => {
                passed += 1;
                println!("pass {name}");
            }
            Outcome::Ran => {
                ran += 1;
                println!("ran {name}");
            }
            Outcome::Fail(why) => {
                failed += 1;
                println!("fail {name}: {why}");
            }
            Outcome::Unsupported(why) => {
                unsupported += 1;
                println!("unsupported {name}: {why}");
            }
            Outcome::Panic(why) => {
                println!("panic {name}: {why}");
                panicked.push(name.to_string());
            }
        }
    }
    let _ = std::panic::take_hook();
    for name in &panicked {
        eprintln!("panicked: {name}");
    }
    println!(
        "{passed} passed, {failed} failed, {unsupported} unsupported, {} panicked, {ran} ran \
         without expected values",
        panicked.len()
    );
    let mut status = ExitCode::SUCCESS;
    if !panicked.is_empty() {
        eprintln!("{} files panicked", panicked.len());
        status = ExitCode::from(1);
    }
    if passed < min_passed {
        eprintln!("expected at least {min_passed} passing files");
        status = ExitCode::from(1);
    }
    if ran < min_ran {
        eprintln!("expected at least {min_ran} files without expected values to run");
        status = ExitCode::from(1);
    }
    status
}
