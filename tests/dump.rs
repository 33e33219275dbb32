//! `FERRAX_DUMP=dir` writes every traced and derived program, the simplifier's report, the
//! fused program and the kernels (kernel IR, Cranelift IR and PTX). Its own test binary, because the
//! variable is process-wide.
#![allow(clippy::unwrap_used)]

use ferrax::{grad, jit, Tensor};

#[test]
fn dump_writes_traced_forward_linearized_and_transposed_programs() {
    let dir = std::env::temp_dir().join(format!("ferrax-dump-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("FERRAX_DUMP", &dir);
    let step = jit(|x: Tensor| grad(|x: Tensor| (x.sin() * &x).sum(..))(x)).named("step");
    step.call(Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0]))
        .unwrap();
    std::env::remove_var("FERRAX_DUMP");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "0000-f.forward.ir",
            "0001-f_jvp.linearized.ir",
            "0002-f_vjp.transposed.ir",
            "0003-step.traced.ir",
            "0004-step.simplified.ir",
            "0005-step.simplify.txt",
            "0006-step.fused.txt",
            "0007-step.kernels.txt",
            "0008-step.ptx"
        ]
    );
    let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
    // Every dumped file is valid IR in the text format.
    for n in names.iter().filter(|n| n.ends_with(".ir")) {
        ferrax::ir::parse_func(&read(n)).unwrap();
    }
    assert!(read("0005-step.simplify.txt").contains("stage algebra+layout: stopped:"));
    let fused = read("0006-step.fused.txt");
    assert!(
        fused.contains("  // kernel @step_k0\n") && fused.contains("cos"),
        "{fused}"
    );
    let kernels = read("0007-step.kernels.txt");
    assert!(
        kernels.contains("kernel @step_k0") && kernels.contains("function u0:0"),
        "{kernels}"
    );
    assert!(read("0000-f.forward.ir").contains("sin"));
    assert!(read("0008-step.ptx").contains(".visible .entry step_k0("));
    assert!(read("0002-f_vjp.transposed.ir").contains("cos"));
    let _ = std::fs::remove_dir_all(&dir);
}
