//! The PTX renderer: snapshots of the benchmark programs' kernels, and every kernel of the test
//! corpus, the gradients and the benchmark programs assembled with `ptxas` for sm_80 and sm_90.
//!
//! `ptxas` is taken from `FERRAX_PTXAS` or the `PATH`; `.ci/run` installs it (PyPI
//! `nvidia-cuda-nvcc`) and sets `FERRAX_REQUIRE_PTXAS=1`, so in CI a missing assembler fails
//! the test instead of skipping it.
#![allow(clippy::unwrap_used)]

mod common;

use ferrax::compiler::backend::gpu::GpuPlan;
use ferrax::compiler::backend::ptx::reduce::ReduceKernel;
use ferrax::compiler::backend::ptx::{render_module, PtxTarget};
use ferrax::compiler::kernel::Kernel;
use ferrax::compiler::simplify::simplify;
use ferrax::ir::Func;
use ferrax::ir::ReduceOp;
use ferrax::{trace, DType, Tensor, TensorType};
use std::path::PathBuf;
use std::process::Command;

fn kernels_of(func: &Func) -> Vec<Kernel> {
    let (simple, _) = simplify(func).unwrap();
    GpuPlan::new(&simple, PtxTarget::Sm80).unwrap().kernels
}

#[test]
fn benchmark_kernels_ptx_snapshots() {
    for (name, func) in common::benchmark_programs() {
        let kernels = kernels_of(&func);
        assert!(!kernels.is_empty(), "{name} has no kernel");
        let ptx = render_module(&kernels, &[], &[], PtxTarget::Sm80).unwrap();
        assert!(!ptx.contains(".approx"), "{name}: approximate instruction");
        insta::assert_snapshot!(format!("ptx_{name}"), ptx);
    }
}

#[test]
fn half_precision_kernel_ptx_snapshot() {
    let spec = Tensor::spec(DType::F16, [1024]);
    let func = trace(
        |(x, y): (Tensor, Tensor)| ((&x * 2.0 + &y).exp(), x.astype(DType::BF16)),
        &(spec.clone(), spec),
    )
    .unwrap();
    let (simple, _) = simplify(&func).unwrap();
    let plan = GpuPlan::new(&simple, PtxTarget::Sm80).unwrap();
    assert_eq!(plan.host_ops(), Vec::<&str>::new());
    insta::assert_snapshot!("ptx_half_precision", plan.ptx);
}

#[test]
fn strided_copy_ptx_snapshot() {
    let func = trace(
        |(a, b): (Tensor, Tensor)| (a.transpose([1, 0]), b.broadcast_to([3, 5])),
        &(
            Tensor::spec(DType::F32, [4, 6]),
            Tensor::spec(DType::F16, [5]),
        ),
    )
    .unwrap();
    let plan = GpuPlan::new(&func, PtxTarget::Sm80).unwrap();
    assert_eq!(plan.host_ops(), Vec::<&str>::new());
    assert_eq!(plan.copies.len(), 2);
    insta::assert_snapshot!("ptx_copies", plan.ptx);
}

#[test]
fn reduction_kernels_ptx_snapshot() {
    let rows = ReduceKernel::plan(
        "w7_rowsum".into(),
        ReduceOp::Sum,
        &TensorType::new(DType::F32, [4096, 4096]),
        &[1],
    )
    .unwrap();
    let columns = ReduceKernel::plan(
        "bias_grad".into(),
        ReduceOp::Max,
        &TensorType::new(DType::F64, [256, 1024]),
        &[0],
    )
    .unwrap();
    assert_eq!(
        (rows.outputs, rows.reduced, rows.block()),
        (4096, 4096, 256)
    );
    assert_eq!((columns.outputs, columns.reduced), (1024, 256));
    let ptx = render_module(&[], &[rows, columns], &[], PtxTarget::Sm80).unwrap();
    insta::assert_snapshot!("ptx_reductions", ptx);
}

#[test]
fn benchmark_programs_gradients_and_attention_run_entirely_on_the_gpu() {
    let mut programs = common::benchmark_programs();
    programs.extend(common::gradient_programs());
    programs.push((
        "w4_matmul",
        trace(
            |(a, b): (Tensor, Tensor)| a.matmul(&b),
            &(
                Tensor::spec(DType::F32, [1024, 1024]),
                Tensor::spec(DType::F32, [1024, 1024]),
            ),
        )
        .unwrap(),
    ));
    programs.push((
        "attention_scores",
        trace(
            |(q, k): (Tensor, Tensor)| {
                q.dot_general(
                    &k,
                    ferrax::ir::DotDims {
                        lhs_batch: vec![0, 2],
                        rhs_batch: vec![0, 2],
                        lhs_contract: vec![3],
                        rhs_contract: vec![3],
                    },
                )
            },
            &(
                Tensor::spec(DType::F32, [2, 5, 3, 4]),
                Tensor::spec(DType::F32, [2, 6, 3, 4]),
            ),
        )
        .unwrap(),
    ));
    programs.push((
        "w7_rowsum",
        trace(
            |r: Tensor| r.sum(-1),
            &Tensor::spec(DType::F32, [4096, 4096]),
        )
        .unwrap(),
    ));
    for (name, func) in programs {
        let (simple, _) = simplify(&func).unwrap();
        let plan = GpuPlan::new(&simple, PtxTarget::Sm90).unwrap();
        assert_eq!(plan.host_ops(), Vec::<&str>::new(), "{name}");
    }
}

fn ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FERRAX_PTXAS") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("ptxas"))
        .find(|p| p.is_file())
}

#[test]
fn every_kernel_assembles_with_ptxas() {
    let Some(ptxas) = ptxas() else {
        assert!(
            std::env::var_os("FERRAX_REQUIRE_PTXAS").is_none(),
            "FERRAX_REQUIRE_PTXAS is set but no ptxas was found"
        );
        eprintln!("skipped: no ptxas (set FERRAX_PTXAS or put it on PATH)");
        return;
    };
    let mut programs = common::corpus();
    programs.extend(common::gradient_programs());
    programs.extend(common::benchmark_programs());
    // The GPU's own partition (f16/bf16 kernels included); what it leaves to the host path
    // (float remainder, for one) is not rendered.
    let mut kernels = Vec::new();
    let mut reductions = Vec::new();
    let mut copies = Vec::new();
    for (name, func) in &programs {
        let (simple, _) = simplify(func).unwrap();
        let plan = GpuPlan::new(&simple, PtxTarget::Sm80).unwrap();
        for mut k in plan.kernels {
            k.name = format!("{name}_{}", k.name);
            kernels.push(k);
        }
        for mut r in plan.reductions {
            r.name = format!("{name}_{}", r.name);
            reductions.push(r);
        }
        for mut c in plan.copies {
            c.name = format!("{name}_{}", c.name);
            copies.push(c);
        }
    }
    assert!(
        kernels
            .iter()
            .any(|k| k.sig.buffers.iter().any(|b| b.dtype == DType::F16)),
        "no f16 kernel in the corpus"
    );
    assert!(copies.len() >= 5, "only {} strided copies", copies.len());
    assert!(kernels.len() >= 25, "only {} kernels", kernels.len());
    // Every reduction kernel form: each op, float type and layout.
    for op in ReduceOp::ALL {
        for dtype in [DType::F32, DType::F64] {
            for (shape, axes) in [([64, 1000], [1]), ([300, 7], [0])] {
                let name = format!("reduce_{}_{dtype}_{}", op.name(), axes[0]);
                let ty = TensorType::new(dtype, shape);
                reductions.push(ReduceKernel::plan(name, op, &ty, &axes).unwrap());
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("ferrax-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for target in PtxTarget::ALL {
        let ptx = render_module(&kernels, &reductions, &copies, target).unwrap();
        let file = dir.join(format!("corpus_{}.ptx", target.arch()));
        std::fs::write(&file, &ptx).unwrap();
        let out = Command::new(&ptxas)
            .arg(format!("-arch={}", target.arch()))
            .arg(&file)
            .arg("-o")
            .arg(dir.join("out.cubin"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ptxas {}: {}",
            target.arch(),
            String::from_utf8_lossy(&out.stderr)
        );
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(warnings.trim().is_empty(), "ptxas warnings: {warnings}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
