//! File tests (Cranelift's `filetests` in insta's clothes): each `tests/filetests/**/*.ir` is
//! a header line naming a pass, `;` comment lines saying what the file pins, and one function
//! in the IR text format. The runner parses and verifies the function, runs the pass and
//! snapshots what it prints (`tests/snapshots/filetests__filetests@<dir>__<file>.ir.snap`).
//!
//! ```text
//! test simplify
//! ; x * 1 is x.
//! func @f(%x: f32[4]) -> (f32[4]) { ... }
//! ```
//!
//! Headers: `test simplify`, `test vjp`, `test jvp`, `test vmap in_axes=0,none,.. [size=N]`
//! (each parameter's batch axis or `none`, every output at 0, batch size 4 by default),
//! `test fuse`, `test lower-clif`, `test lower-ptx [target=sm_80|sm_90] [math=accurate|fast]`.
//! See docs/testing.md.

use ferrax::compiler::autodiff::{jvp, vjp};
use ferrax::compiler::backend::gpu::{move_across_windows, GpuPlan};
use ferrax::compiler::backend::ptx::{self, MathMode, PtxTarget};
use ferrax::compiler::backend::CpuExecutable;
use ferrax::compiler::batching;
use ferrax::compiler::simplify::simplify;
use ferrax::ir::{parse_func, verify};
use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::Path;

/// Runs one file test: the pass's printed output, or an error naming the file and line (a
/// parse error's own; the header's for a bad header, an unknown pass or option; the
/// function's first line for a verifier or pass error).
fn run_file(path: &Path, text: &str) -> Result<String, String> {
    run(text).map_err(|(line, e)| format!("{}:{line}: {e}", path.display()))
}

fn run(text: &str) -> Result<String, (usize, String)> {
    let mut words = text.lines().next().unwrap_or_default().split_whitespace();
    let pass = match (words.next(), words.next()) {
        (Some("test"), Some(pass)) => pass,
        _ => {
            return Err((
                1,
                "the first line must be `test <pass> [key=value ...]`".into(),
            ))
        }
    };
    let mut options = BTreeMap::new();
    for w in words {
        let (k, v) = w
            .split_once('=')
            .ok_or((1, format!("option `{w}` is not key=value")))?;
        options.insert(k, v);
    }
    // The header and `;` comments blanked, so that the parser's line numbers are the file's.
    let lines: Vec<&str> = text
        .lines()
        .enumerate()
        .map(|(i, l)| match i == 0 || l.trim_start().starts_with(';') {
            true => "",
            false => l,
        })
        .collect();
    let at = 1 + lines.iter().position(|l| !l.trim().is_empty()).unwrap_or(0);
    let func = parse_func(&lines.join("\n"))
        .map_err(|e| (e.line, format!("column {}: {}", e.col, e.message)))?;
    verify(&func).map_err(|e| (at, e.to_string()))?;
    let mut option = |key: &str, values: &[&str]| match options.remove(key) {
        Some(v) if !values.contains(&v) => {
            Err((1, format!("{key}={v}: expected one of {values:?}")))
        }
        v => Ok(v),
    };
    let output = match pass {
        "simplify" => show(simplify(&func).map(|(f, _report)| f)),
        "vjp" => show(vjp(&func)),
        "jvp" => show(jvp(&func)),
        "vmap" => {
            let axes = options.remove("in_axes").unwrap_or_default();
            let in_axes = axes
                .split(',')
                .map(|a| match a {
                    "none" => Ok(None),
                    a => a.parse().map(Some),
                })
                .collect::<Result<Vec<Option<usize>>, _>>()
                .map_err(|e| (1, format!("in_axes={axes}: {e}")))?;
            let size = match options.remove("size") {
                Some(n) => n.parse().map_err(|e| (1, format!("size={n}: {e}")))?,
                None => 4,
            };
            let out_axes = vec![Some(0); func.outputs.len()];
            show(batching::vmap(&func, &in_axes, &out_axes, size))
        }
        "fuse" => show(CpuExecutable::compile(&func).map(|e| e.fused().to_string())),
        "lower-clif" => show(CpuExecutable::compile(&func).map(|e| {
            let clif: Vec<&str> = e.kernels().map(|(_kernel, clif)| clif).collect();
            clif.join("\n")
        })),
        "move-across-windows" => show(move_across_windows(
            &func,
            &ptx::support::target(MathMode::Accurate),
        )),
        "lower-ptx" => {
            let target = match option("target", &["sm_80", "sm_90"])? {
                Some("sm_90") => PtxTarget::Sm90,
                _ => PtxTarget::Sm80,
            };
            let math = match option("math", &["accurate", "fast"])? {
                Some("fast") => MathMode::Fast,
                _ => MathMode::Accurate,
            };
            show(GpuPlan::new(&func, target, math).map(|plan| plan.ptx))
        }
        _ => return Err((1, format!("unknown pass `{pass}`"))),
    }
    .map_err(|e| (at, format!("{pass}: {e}")))?;
    match options.keys().next() {
        Some(key) => Err((1, format!("`test {pass}` takes no option `{key}`"))),
        None => Ok(output),
    }
}

fn show<T: Display, E: Display>(r: Result<T, E>) -> Result<String, String> {
    r.map(|t| t.to_string()).map_err(|e| e.to_string())
}

#[test]
fn filetests() {
    insta::glob!("filetests/**/*.ir", |path| {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let output = run_file(path, &text).unwrap_or_else(|e| panic!("{e}"));
        insta::assert_snapshot!(output);
    });
}

/// A bad file fails with its path and the line at fault.
#[test]
fn errors_name_the_file_and_line() {
    let path = Path::new("tests/filetests/bad.ir");
    let func = "func @f(%x: f32[2]) -> (f32[2]) {\n  %y = foo %x : f32[2]\n  return %y\n}\n";
    let cases = [
        (
            format!("test simplify\n; a comment\n{func}"),
            "tests/filetests/bad.ir:4: column 8: unknown op 'foo'",
        ),
        (
            "test frobnicate\nfunc @f() -> () { return }\n".to_string(),
            "tests/filetests/bad.ir:1: unknown pass `frobnicate`",
        ),
        (
            "func @f() -> () { return }\n".to_string(),
            "tests/filetests/bad.ir:1: the first line must be `test <pass> [key=value ...]`",
        ),
        (
            "test fuse target=gpu\nfunc @f() -> () { return }\n".to_string(),
            "tests/filetests/bad.ir:1: `test fuse` takes no option `target`",
        ),
        (
            "test lower-ptx math=fastest\nfunc @f() -> () { return }\n".to_string(),
            "tests/filetests/bad.ir:1: math=fastest: expected one of [\"accurate\", \"fast\"]",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(run_file(path, &text).err().as_deref(), Some(want), "{text}");
    }
}
