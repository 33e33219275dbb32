//! `ferrax-aot`: a StableHLO program (as JAX exports it) compiled to an artifact, inspected and
//! run on `.npy` inputs, computing what the compiled program computes; bad requests fail with
//! a message and a nonzero status.
#![allow(clippy::unwrap_used)]

use ferrax::{checkpoint, Tensor};
use std::process::Command;

const PROGRAM: &str = r#"func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<3x2xf32> {
  %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
  %1 = stablehlo.add %arg0, %0 : tensor<2x3xf32>
  %2 = stablehlo.tanh %1 : tensor<2x3xf32>
  %3 = "stablehlo.transpose"(%2) {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %3 : tensor<3x2xf32>
}
"#;

fn tool(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ferrax-aot"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn compile_inspect_and_run_a_stablehlo_program() {
    let dir = std::env::temp_dir().join(format!("ferrax-aot-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    std::fs::write(path("step.mlir"), PROGRAM).unwrap();
    let out = tool(&[
        "compile",
        &path("step.mlir"),
        "--target",
        "cpu",
        "-o",
        &path("step.fxa"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = tool(&["inspect", &path("step.fxa")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("inputs (f32[2,3], f32[3])"), "{text}");
    assert!(text.contains("outputs (f32[3,2])"), "{text}");

    let x = Tensor::from_vec([2, 3], vec![0.5f32, -1.0, 2.0, 0.0, 1.5, -0.25]);
    let b = Tensor::from_vec([3], vec![0.25f32, 0.5, -1.0]);
    checkpoint::save_npy(path("x.npy"), &x).unwrap();
    checkpoint::save_npy(path("b.npy"), &b).unwrap();
    let out = tool(&[
        "run",
        &path("step.fxa"),
        &path("x.npy"),
        &path("b.npy"),
        "-o",
        &path(""),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = checkpoint::load_npy(path("output_0.npy")).unwrap();
    let want = (x + b).tanh().transpose([1, 0]);
    assert_eq!(got.shape(), &[3, 2]);
    // The kernel's tanh against the interpreter's: within the CPU's 3 ULP.
    for (g, w) in got
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .zip(want.to_vec::<f32>().unwrap())
    {
        assert!(
            (g.to_bits() as i64 - w.to_bits() as i64).abs() <= 3,
            "{g} against {w}"
        );
    }

    // A GPU artifact compiles with no GPU, and says what it is.
    let gpu = path("gpu.fxa");
    let out = tool(&[
        "compile",
        &path("step.mlir"),
        "--target",
        "sm_90",
        "-o",
        &gpu,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = tool(&["inspect", &gpu]);
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && listing.contains("target sm_90 GPU"),
        "{listing}"
    );
    assert!(
        listing.contains("by kernel") || listing.contains("kernel main_"),
        "{listing}"
    );
    // Run where there is a GPU, an error where there is none; never a crash.
    let out = tool(&["run", &gpu, &path("x.npy"), &path("b.npy"), "-o", &path("")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some(), "{stderr}");
    assert!(
        out.status.success() || stderr.starts_with("ferrax-aot: "),
        "{stderr}"
    );

    // Inputs that do not fit, an unknown target, a damaged file, a bad command line.
    for args in [
        vec!["run", &path("step.fxa"), &path("b.npy"), &path("x.npy")],
        vec![
            "compile",
            &path("step.mlir"),
            "--target",
            "sm_75",
            "-o",
            &path("old.fxa"),
        ],
        vec!["inspect", &path("step.mlir")],
        vec!["frobnicate"],
    ] {
        let out = tool(&args);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("ferrax-aot: "),
            "{args:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Several programs compile in one command, in parallel, each to its own artifact in the
/// output directory, named by its file's stem.
#[test]
fn several_programs_compile_into_a_directory() {
    let dir = std::env::temp_dir().join(format!("ferrax-aot-batch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    std::fs::write(path("first.mlir"), PROGRAM).unwrap();
    let second = "func @main(%0: f32[4]) -> (f32[4]) {\n  %1 = exp %0 : f32[4]\n  return %1\n}\n";
    std::fs::write(path("second.fx"), second).unwrap();
    let out = tool(&[
        "compile",
        &path("first.mlir"),
        &path("second.fx"),
        "-o",
        &path("out"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (name, inputs) in [
        ("first", "inputs (f32[2,3], f32[3])"),
        ("second", "inputs (f32[4])"),
    ] {
        let out = tool(&["inspect", &path(&format!("out/{name}.fxa"))]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(inputs),
            "{name}: {text}"
        );
    }
    // One program that does not parse fails the command, naming its file.
    std::fs::write(path("broken.fx"), "func @main(").unwrap();
    let out = tool(&[
        "compile",
        &path("first.mlir"),
        &path("broken.fx"),
        "-o",
        &path("out"),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.fx"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A scan's `unroll` is lowered before simplification, as `jit` lowers it: fully unrolled,
/// no loop is left in the artifact.
#[test]
fn scans_are_unrolled_as_jit_unrolls_them() {
    let dir = std::env::temp_dir().join(format!("ferrax-aot-unroll-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let program = |attrs: &str| {
        format!(
            "func @main(%h0: f32[3], %xs: f32[4,3]) -> (f32[3]) {{
  %h = scan %h0, %xs, consts=0, carry=1, length=4, {attrs}result=0, body=func @step(%h: f32[3], %x: f32[3]) -> (f32[3]) {{
    %s = add %h, %x : f32[3]
    %t = tanh %s : f32[3]
    return %t
  }} : f32[3]
  return %h
}}
"
        )
    };
    for (name, attrs, loops) in [("plain", "", true), ("unrolled", "unroll=4, ", false)] {
        std::fs::write(path(&format!("{name}.fx")), program(attrs)).unwrap();
        let fx = path(&format!("{name}.fx"));
        let fxa = path(&format!("{name}.fxa"));
        let out = tool(&["compile", &fx, "-o", &fxa]);
        assert!(out.status.success(), "{name}: {out:?}");
        let out = tool(&["inspect", &fxa]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.contains("= scan "), loops, "{name}: {text}");
        assert_eq!(
            text.matches("= tanh ").count(),
            if loops { 1 } else { 4 },
            "{text}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A shape-polymorphic export compiles for the shape `--param` gives (a dimension argument's
/// value too), and runs at that shape; a shape the program cannot take is refused.
#[test]
fn shape_polymorphic_exports_compile_for_a_given_shape() {
    let dir = std::env::temp_dir().join(format!("ferrax-aot-dynamic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    // `x * x` broadcast against a row of 4, with the batch size `b` passed as `%arg0`.
    let program = r#"func.func public @main(%arg0: tensor<i64>, %arg1: tensor<?x4xf32>, %arg2: tensor<4xf32>) -> tensor<?x4xf32> {
  %0 = stablehlo.convert %arg0 : (tensor<i64>) -> tensor<i32>
  %1 = stablehlo.reshape %0 : (tensor<i32>) -> tensor<1xi32>
  %c = stablehlo.constant dense<4> : tensor<1xi32>
  %2 = stablehlo.concatenate %1, %c, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %3 = stablehlo.dynamic_broadcast_in_dim %arg2, %2, dims = [1] : (tensor<4xf32>, tensor<2xi32>) -> tensor<?x4xf32>
  %4 = stablehlo.multiply %arg1, %3 : tensor<?x4xf32>
  return %4 : tensor<?x4xf32>
}
"#;
    std::fs::write(path("poly.mlir"), program).unwrap();
    let compile = |params: &[&str]| {
        let mut args = vec!["compile".to_string(), path("poly.mlir")];
        for p in params {
            args.extend(["--param".to_string(), p.to_string()]);
        }
        args.extend(["-o".to_string(), path("poly.fxa")]);
        tool(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let out = compile(&["=3", "3x4", "4"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = tool(&["inspect", &path("poly.fxa")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("inputs (f32[3,4], f32[4])"), "{text}");

    let x = Tensor::from_vec([3, 4], (0..12).map(|i| i as f32 - 4.0).collect::<Vec<_>>());
    let row = Tensor::from_vec([4], vec![1.0f32, -2.0, 0.5, 3.0]);
    checkpoint::save_npy(path("x.npy"), &x).unwrap();
    checkpoint::save_npy(path("row.npy"), &row).unwrap();
    let out = tool(&[
        "run",
        &path("poly.fxa"),
        &path("x.npy"),
        &path("row.npy"),
        "-o",
        &path(""),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = checkpoint::load_npy(path("output_0.npy")).unwrap();
    let want: Vec<f32> = (0..12)
        .map(|i| (i as f32 - 4.0) * [1.0f32, -2.0, 0.5, 3.0][i % 4])
        .collect();
    assert_eq!(got.to_vec::<f32>().unwrap(), want);

    for (params, message) in [
        (vec!["=3", "3x5", "4"], "parameter %arg1 is tensor<?x4xf32>"),
        (vec!["=3", "3x4"], "3 parameters, specialized with 2"),
        (vec!["=3", "3by4", "4"], "--param 3by4"),
        (vec![], "load_specialized"),
    ] {
        let out = compile(&params);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{params:?}");
        assert!(stderr.contains(message), "{params:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
