//! The PTX renderer: snapshots of the benchmark programs' modules; every kernel of the test
//! corpus, the gradients and the benchmark programs assembled with `ptxas` for sm_80 and sm_90,
//! with accurate and with fast math, without a register spilled;
//! every kernel of the corpus, the gradients and small benchmark forms run in a PTX emulator
//! (the `ferrax-ptx-emu` crate) against the interpreter, so that kernels are checked by running them where
//! there is no GPU; and whole programs (those and the conformance suite) run on the emulated GPU
//! through the executor the CUDA device uses.
//!
//! `ptxas` is taken from `FERRAX_PTXAS` or the `PATH`; `.ci/run` installs it (PyPI
//! `nvidia-cuda-nvcc`) and sets `FERRAX_REQUIRE_PTXAS=1`, so in CI a missing assembler fails
//! the test instead of skipping it.
#![allow(clippy::unwrap_used)]

mod common;

use ferrax::compiler::backend::gpu::{GpuOptions, GpuPlan, GpuProgram};
use ferrax::compiler::backend::ptx::columns::ColumnSplit;
use ferrax::compiler::backend::ptx::reduce::{ReduceKernel, ReduceLaunch};
use ferrax::compiler::backend::ptx::rows::row_layout;
use ferrax::compiler::backend::ptx::{
    legalize, render_launches, render_module, Launch, MathMode, PtxTarget,
};
use ferrax::compiler::kernel::rows::recompute_carried;
use ferrax::compiler::kernel::{Access, KOp, Role};
use ferrax::compiler::simplify::simplify;
use ferrax::ir::Elements;
use ferrax::ir::ReduceOp;
use ferrax::ir::{Func, ValueId};
use ferrax::runtime::eval_op;
use ferrax::Array;
use ferrax::{nn, trace, DType, Tensor, TensorType};
use ferrax_ptx_emu::{array_of, bytes_of, launch, Emulator, Memory, Module};
use std::path::PathBuf;
use std::process::Command;

/// The host steps of `plan` other than indexing by values (gather, scatter and the dynamic
/// slices), sorts and reverses, which the GPU backend leaves to the host until it has kernels
/// for them.
/// Whether any value of `func` is a complex number.
fn has_complex_values(func: &Func) -> bool {
    (0..func.num_values())
        .filter_map(|v| func.value_type(ferrax::ir::ValueId(v as u32)))
        .any(|t| t.dtype.is_complex())
}

fn unexpected_host_ops(plan: &GpuPlan) -> Vec<&str> {
    // Sorting, reversing, arctangents and the other elementary and special functions kernels
    // do not expand, triangular solves and the factorizations are host steps on the GPU for
    // now (docs/architecture.md), as indexing may be.
    let expected = |op: &&str| {
        *op == "triangular_solve"
            || *op == "cholesky"
            || op.starts_with("lu")
            || op.starts_with("qr_")
            || op.starts_with("eigh_")
            || op.starts_with("svd_")
            || op.starts_with("eig_")
            || op.contains("gather")
            || op.contains("scatter")
            || op.starts_with("dynamic_")
            || op.ends_with("sort")
            || *op == "reverse"
            || *op == "atan2"
            || [
                "tan",
                "asin",
                "acos",
                "atan",
                "sinh",
                "cosh",
                "asinh",
                "acosh",
                "atanh",
                "cbrt",
                "lgamma",
                "digamma",
                "erf",
                "erfc",
                "erf_inv",
                "bessel_i0e",
                "bessel_i1e",
            ]
            .contains(op)
    };
    plan.host_ops()
        .into_iter()
        .filter(|op| !expected(op))
        .collect()
}

fn plan_of(func: &Func) -> GpuPlan {
    let (simple, _) = simplify(func).unwrap();
    GpuPlan::new(&simple, PtxTarget::Sm80, MathMode::Accurate).unwrap()
}

/// The PTX module of every benchmark workload but the matrix product: its kernels (launched
/// together where independent), reductions and copies.
#[test]
fn benchmark_programs_ptx_snapshots() {
    for (name, func) in common::benchmark_programs() {
        let plan = plan_of(&func);
        assert!(
            !plan.ptx.contains(".approx"),
            "{name}: approximate instruction"
        );
        insta::assert_snapshot!(format!("ptx_{name}"), plan.ptx);
    }
}

/// The MLP step's flat kernels and reductions wait until a step of another kind reads them: its
/// six parameter updates launch together, so its 11 kernels (one of them the loss gradient's
/// row kernel, which launches alone) take 6 launches, and its three bias gradients one launch
/// (that it precedes the updates that read it, the emulated runs check).
#[test]
fn independent_kernels_launch_together() {
    let (_, func) = common::benchmark_programs()
        .into_iter()
        .find(|(name, _)| *name == "w5_mlp_step")
        .unwrap();
    let plan = plan_of(&func);
    let sizes: Vec<usize> = plan.launches.iter().map(|l| l.kernels.len()).collect();
    assert_eq!(sizes, [1, 1, 1, 1, 1, 6]);
    let rows: Vec<bool> = plan
        .launches
        .iter()
        .map(|l| plan.kernels[l.kernels[0]].rows.is_some())
        .collect();
    // The loss gradient's rows are one kernel: what it reads of the labels alone waits for
    // the logits' product rather than being a row kernel of its own before it.
    assert_eq!(rows, [false, false, true, false, false, false]);
    let updates = plan.launches.last().unwrap();
    // One entry, each kernel's loop in turn over its own parameters.
    let entry = plan
        .ptx
        .split(".visible .entry ")
        .find(|e| e.starts_with(&updates.name))
        .unwrap();
    let params: usize = updates
        .kernels
        .iter()
        .map(|&k| plan.kernels[k].sig.buffers.len())
        .sum();
    assert_eq!(entry.matches(".param .u64").count(), params);
    for k in 0..6 {
        assert!(entry.contains(&format!("$L_loop_{k}:")), "loop {k}");
    }
    let lens: Vec<usize> = updates
        .kernels
        .iter()
        .map(|&k| plan.kernels[k].len)
        .collect();
    assert_eq!(lens, [784 * 1024, 1024, 1024 * 1024, 1024, 1024 * 10, 10]);
    let [(sums, instrs)] = plan.reduce_steps()[..] else {
        panic!("bias gradients in {} launches", plan.reduce_steps().len());
    };
    let outputs: Vec<usize> = plan.reduce_launches[sums]
        .parts
        .iter()
        .map(|&r| plan.reductions[r].outputs)
        .collect();
    assert_eq!(outputs, [10, 1024, 1024]);
    assert_eq!(instrs.len(), 3);
    // One block per 32 columns of each part.
    assert_eq!(
        plan.reduce_launches[sums].grid(&plan.reductions, 132),
        1 + 32 + 32
    );
}

/// A wave of many different kernels is cut into several launches, so that no entry, which the
/// driver compiles on one thread, holds more than about 256 kernel instructions of distinct
/// code: here twelve independent chains of arithmetic over inputs of twelve sizes.
#[test]
fn a_wave_of_much_code_launches_as_several_entries() {
    let chains = |xs: Vec<Tensor>| -> Vec<Tensor> {
        xs.iter()
            .map(|x| {
                let mut y = x.clone();
                for k in 0..12 {
                    y = (y.sin() * (1.0 + k as f64)).exp() - x;
                }
                y
            })
            .collect()
    };
    let specs: Vec<Tensor> = (0..12)
        .map(|i| Tensor::spec(DType::F32, [100 + i]))
        .collect();
    let (simple, _) = simplify(&trace(chains, &specs).unwrap()).unwrap();
    let plan = plan_of(&simple);
    let grouped: Vec<&Launch> = plan
        .launches
        .iter()
        .filter(|l| l.kernels.len() > 1)
        .collect();
    assert!(grouped.len() >= 2, "{} grouped launches", grouped.len());
    let kernels: usize = plan.launches.iter().map(|l| l.kernels.len()).sum();
    assert_eq!(kernels, 12);
    for l in &plan.launches {
        let code: usize = l.kernels.iter().map(|&k| plan.kernels[k].body.len()).sum();
        let largest = l.kernels.iter().map(|&k| plan.kernels[k].body.len()).max();
        assert!(
            code <= 256 || l.kernels.len() == 1,
            "{}: {code} instructions, the largest kernel {largest:?}",
            l.name
        );
    }
}

/// Rows longer than 256 threads hold in registers (16 columns each) take more threads, up to
/// 1,024: softmax over 16,384 columns is one launch of 1,024-thread blocks, a layernorm
/// gradient over 12,288 columns row kernels of 768.
#[test]
fn long_rows_take_blocks_of_up_to_1024_threads() {
    let programs = emulated_programs();
    let plan = |name: &str| plan_of(&programs.iter().find(|(n, _)| *n == name).unwrap().1);
    let softmax = plan("softmax_16384");
    assert_eq!(softmax.launches.len(), 1);
    assert!(softmax.kernels[0].rows.is_some());
    assert_eq!(softmax.launch_shape(0), (2 * 1024, 1024));
    assert!(softmax.ptx.contains(".maxntid 1024"));
    let layernorm = plan("layernorm_grad_12288");
    let rows: Vec<(usize, u32)> = (0..layernorm.launches.len())
        .filter(|&l| {
            layernorm.kernels[layernorm.launches[l].kernels[0]]
                .rows
                .is_some()
        })
        .map(|l| layernorm.launch_shape(l))
        .collect();
    assert!(
        !rows.is_empty() && rows.iter().all(|&r| r == (2 * 768, 768)),
        "{rows:?}"
    );
}

/// Rows longer than 1,024 threads hold in registers are streamed: each pass of the row kernel
/// loops over chunks of 8,192 columns (8 a thread), and recomputes what an earlier pass kept
/// rather than keeping a row in scratch memory. Softmax over 40,000 columns is still one
/// launch, its exponential computed in both passes that read it.
#[test]
fn rows_beyond_registers_are_streamed_a_chunk_at_a_time() {
    let programs = emulated_programs();
    let plan = |name: &str| plan_of(&programs.iter().find(|(n, _)| *n == name).unwrap().1);
    let softmax = plan("softmax_40000");
    assert_eq!(softmax.launches.len(), 1);
    let layout = row_layout(&softmax.kernels[0]).unwrap();
    assert_eq!((layout.v, layout.threads, layout.slots), (4, 1024, 8));
    assert!(layout.streamed);
    assert_eq!(softmax.launch_shape(0), (3 * 1024, 1024));
    let loops = softmax.ptx.matches("bra $L_pass").count();
    assert_eq!(loops, 3, "a chunk loop per pass:\n{}", softmax.ptx);
    insta::assert_snapshot!("ptx_streamed_softmax", softmax.ptx);
    // The exponential the sum's pass kept for the last pass is computed again there.
    let recomputed = recompute_carried(&softmax.kernels[0]);
    insta::assert_snapshot!(
        "streamed_softmax_kernel",
        format!("{}\n{recomputed}", softmax.kernels[0])
    );
    let legal = legalize(&softmax.kernels[0], MathMode::Accurate).unwrap();
    assert!(legal.body.iter().all(|i| match i.op {
        KOp::Load(b) | KOp::Store(b) => legal.sig.buffers[b].role != Role::Scratch,
        _ => true,
    }));
    let layernorm = plan("layernorm_grad_20001");
    assert_eq!(layernorm.host_ops(), Vec::<&str>::new());
    let streamed: Vec<_> = layernorm
        .kernels
        .iter()
        .filter_map(row_layout)
        .map(|l| (l.v, l.threads, l.slots, l.streamed))
        .collect();
    assert!(!streamed.is_empty() && streamed.iter().all(|&l| l == (1, 1024, 8, true)));
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
    let plan = GpuPlan::new(&simple, PtxTarget::Sm80, MathMode::Accurate).unwrap();
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
    let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
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
    // Beyond 32-bit counts and offsets: the host path.
    let huge = |shape: &[usize], axes: &[usize]| {
        let ty = TensorType::new(DType::F32, shape.to_vec());
        ReduceKernel::plan("huge".into(), ReduceOp::Sum, &ty, axes)
    };
    assert!(huge(&[1 << 31], &[0]).is_none());
    assert!(huge(&[4, 1 << 30], &[1]).is_some());
    assert!(huge(&[1 << 28, 8], &[0]).is_none());
    assert_eq!(rows.split("none".into()), None, "4096 blocks need no split");
    let no_rows = huge(&[0, 100_000], &[1]).unwrap();
    assert_eq!(
        no_rows.split("none".into()),
        None,
        "no results, nothing to split"
    );
    assert_eq!(columns.split("none".into()), None, "8,192 elements a block");
    let ptx = render_module(&[], &[rows, columns], &[], PtxTarget::Sm80).unwrap();
    insta::assert_snapshot!("ptx_reductions", ptx);
}

/// A reduction of too few blocks for a GPU, each folding many elements, splits in two kernels:
/// a sum of a whole bf16 array (partial sums in f32) and a max over a large batch into three
/// columns.
#[test]
fn split_reduction_kernels_ptx_snapshot() {
    let plan = |op, ty: TensorType, axes: &[usize]| {
        let whole = ReduceKernel::plan("whole".into(), op, &ty, axes).unwrap();
        whole.split("whole_total".into()).unwrap()
    };
    let sum = plan(ReduceOp::Sum, TensorType::new(DType::BF16, [1 << 24]), &[0]);
    assert_eq!(
        (
            sum.partial.segments,
            sum.partial.segment(),
            sum.partial.result
        ),
        (512, 32768, DType::F32)
    );
    assert_eq!(
        (sum.total.reduced, sum.total.dtype, sum.total.result),
        (512, DType::F32, DType::BF16)
    );
    let max = plan(
        ReduceOp::Max,
        TensorType::new(DType::F32, [100000, 3]),
        &[0],
    );
    // Three columns by 85 row lanes a block, segments of 5,556 rows (16,668 elements, at
    // least 16,384), the last shorter.
    assert_eq!((max.partial.width(), max.partial.lanes()), (3, 85));
    assert_eq!((max.partial.segments, max.partial.segment()), (18, 5556));
    assert_eq!((max.total.reduced, max.total.inner), (18, 3));
    let reductions = [sum.partial, sum.total, max.partial, max.total];
    let ptx = render_module(&[], &reductions, &[], PtxTarget::Sm80).unwrap();
    insta::assert_snapshot!("ptx_split_reductions", ptx);
}

/// A bias gradient beside the kernel that makes its operand: one column kernel (each thread a
/// column residue over a stride of 524,288 elements, its four lanes folded in registers and
/// stored as partials), then the fold of its `[512, 1024]` partials.
#[test]
fn column_kernel_ptx_snapshot() {
    let func = trace(
        |(x, b): (Tensor, Tensor)| (&x + &b).tanh().sum(0),
        &(
            Tensor::spec(DType::F32, [4096, 1024]),
            Tensor::spec(DType::F32, [1024]),
        ),
    )
    .unwrap();
    let plan = plan_of(&func);
    let [launch] = &plan.launches[..] else {
        panic!("{} launches", plan.launches.len());
    };
    let split = ColumnSplit::of(&plan.kernels[launch.kernels[0]]).unwrap();
    assert_eq!((split.lanes, split.stride), (4, 1 << 19));
    assert_eq!(split.partials(1024), [512, 1024]);
    assert_eq!(launch.totals.iter().map(Vec::len).collect::<Vec<_>>(), [1]);
    insta::assert_snapshot!("ptx_column_kernel", plan.ptx);
}

/// Nothing of the test corpus, the gradients, the benchmark programs or attention scores takes
/// the host path: every op has a GPU step, but for sorting and control flow.
#[test]
fn corpus_gradients_benchmarks_and_attention_run_entirely_on_the_gpu() {
    let mut programs = common::benchmark_programs();
    programs.extend(common::gradient_programs());
    programs.extend(common::corpus());
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
    for dtype in [DType::F16, DType::BF16] {
        programs.push((
            "half matmul",
            trace(
                |(a, b): (Tensor, Tensor)| a.matmul(&b.transpose([1, 0])),
                &(Tensor::spec(dtype, [64, 32]), Tensor::spec(dtype, [48, 32])),
            )
            .unwrap(),
        ));
    }
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
    for (name, func) in programs {
        let (simple, _) = simplify(&func).unwrap();
        let plan = GpuPlan::new(&simple, PtxTarget::Sm90, MathMode::Accurate).unwrap();
        // Complex numbers are the host's (the support table).
        if !has_complex_values(&simple) {
            assert_eq!(unexpected_host_ops(&plan), Vec::<&str>::new(), "{name}");
        }
        if name == "half matmul" {
            // A transposed operand is cuBLAS's to read, as in f32: no copy.
            assert!(plan.copies.is_empty(), "{name}");
        }
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
    programs.extend(integer_products());
    programs.extend(emulated_programs());
    let f64_pair = (
        Tensor::spec(DType::F64, [300]),
        Tensor::spec(DType::F64, [300]),
    );
    let f64_remainder = |(a, b): (Tensor, Tensor)| (&a % &b) * 2.0;
    programs.push(("f64_remainder", trace(f64_remainder, &f64_pair).unwrap()));
    programs.push(("i64_arithmetic", i64_arithmetic()));
    programs.push(("bool_compares", bool_compares()));
    programs.push(("half_conversions", half_conversions(18)));
    // Launches that loop over repeats of one kernel.
    programs.push(("repeated_layers", common::repeated_layers_step(3, 8, 2)));
    // Row kernels computing iotas, in rows a block holds and in streamed rows.
    programs.push(("row_iotas", common::row_iota_program()));
    programs.push(("cross_entropy", common::cross_entropy_with_gradient(6, 50)));
    programs.push((
        "streamed_cross_entropy",
        common::cross_entropy_with_gradient(6, 20_000),
    ));
    // The GPU's own partition (f16/bf16 kernels included).
    let mut kernels = Vec::new();
    let mut launches = Vec::new();
    let mut reductions = Vec::new();
    let mut reduce_launches = Vec::new();
    let mut copies = Vec::new();
    let mut int_gemms = Vec::new();
    let mut regions = 0;
    for (program, func) in &programs {
        let (simple, _) = simplify(func).unwrap();
        let whole = GpuPlan::new(&simple, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        // Each control-flow region's plan, its names told apart by its place.
        let plans = std::iter::once(&whole).chain(whole.regions());
        for (r, plan) in plans.enumerate() {
            regions += usize::from(r > 0);
            let name = format!("{program}_r{r}");
            for mut l in plan.launches.iter().cloned() {
                l.name = format!("{name}_{}", l.name);
                l.kernels.iter_mut().for_each(|k| *k += kernels.len());
                launches.push(l);
            }
            for mut k in plan.kernels.iter().cloned() {
                k.name = format!("{name}_{}", k.name);
                kernels.push(k);
            }
            for mut l in plan.reduce_launches.iter().cloned() {
                l.name = format!("{name}_{}", l.name);
                l.parts.iter_mut().for_each(|r| *r += reductions.len());
                reduce_launches.push(l);
            }
            for mut r in plan.reductions.iter().cloned() {
                r.name = format!("{name}_{}", r.name);
                reductions.push(r);
            }
            for mut c in plan.copies.iter().cloned() {
                c.name = format!("{name}_{}", c.name);
                copies.push(c);
            }
            for mut g in plan.int_gemms.iter().cloned() {
                g.name = format!("{name}_{}", g.name);
                int_gemms.push(g);
            }
        }
    }
    assert!(regions >= 10, "only {regions} control-flow regions");
    assert!(
        kernels
            .iter()
            .any(|k| k.sig.buffers.iter().any(|b| b.dtype == DType::F16)),
        "no f16 kernel in the corpus"
    );
    assert!(copies.len() >= 5, "only {} strided copies", copies.len());
    assert!(kernels.len() >= 25, "only {} kernels", kernels.len());
    assert!(
        launches.iter().any(|l| l.kernels.len() > 1),
        "no kernels launched together"
    );
    assert!(
        reduce_launches.iter().any(|l| l.parts.len() > 1),
        "no reductions launched together"
    );
    // Every reduction kernel form: each op, type and layout, alone and all of a type in one
    // launch.
    let types = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::Bool,
    ];
    for dtype in types {
        let mut parts = Vec::new();
        let ops = ReduceOp::ALL
            .into_iter()
            .filter(|&op| dtype != DType::Bool || matches!(op, ReduceOp::Max | ReduceOp::Min));
        for op in ops {
            for (shape, axes) in [([64, 1000], [1]), ([300, 7], [0])] {
                let name = format!("reduce_{}_{dtype}_{}", op.name(), axes[0]);
                let ty = TensorType::new(dtype, shape);
                reductions.push(ReduceKernel::plan(name, op, &ty, &axes).unwrap());
                parts.push(reductions.len() - 1);
            }
            // Split in two kernels each (launched alone).
            for (shape, axes) in [([2, 100000], [1]), ([100000, 3], [0])] {
                let name = format!("split_{}_{dtype}_{}", op.name(), axes[0]);
                let ty = TensorType::new(dtype, shape);
                let whole = ReduceKernel::plan(name.clone(), op, &ty, &axes).unwrap();
                let split = whole.split(format!("{name}_total")).unwrap();
                for r in [split.partial, split.total] {
                    reduce_launches.push(ReduceLaunch {
                        name: r.name.clone(),
                        parts: vec![reductions.len()],
                    });
                    reductions.push(r);
                }
            }
        }
        for &r in &parts {
            reduce_launches.push(ReduceLaunch {
                name: reductions[r].name.clone(),
                parts: vec![r],
            });
        }
        reduce_launches.push(ReduceLaunch {
            name: format!("reduce_all_{dtype}"),
            parts,
        });
    }
    let dir = std::env::temp_dir().join(format!("ferrax-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let modes = [MathMode::Accurate, MathMode::Fast];
    for (target, mode) in PtxTarget::ALL
        .into_iter()
        .flat_map(|t| modes.map(|m| (t, m)))
    {
        let ptx = render_launches(
            &kernels,
            &launches,
            (&reductions, &reduce_launches),
            (&copies, &int_gemms, &[], &[]),
            target,
            mode,
        )
        .unwrap();
        let file = dir.join(format!("corpus_{}_{mode:?}.ptx", target.arch()));
        std::fs::write(&file, &ptx).unwrap();
        let out = Command::new(&ptxas)
            .arg(format!("-arch={}", target.arch()))
            .arg("-v")
            .arg(&file)
            .arg("-o")
            .arg(dir.join("out.cubin"))
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "ptxas {} {mode:?}: {report}",
            target.arch()
        );
        // `-v` reports each entry's registers and spills; anything else is a warning.
        let warnings: Vec<&str> = report
            .lines()
            .filter(|l| !l.starts_with("ptxas info") && !l.starts_with(' '))
            .collect();
        assert!(warnings.is_empty(), "ptxas warnings: {warnings:?}");
        let spills = report.lines().filter(|l| l.contains("spill")).count();
        let entries = launches.len() + reduce_launches.len() + copies.len() + int_gemms.len();
        assert_eq!(spills, entries, "a spill report per entry: {report}");
        for line in report.lines().filter(|l| l.contains("spill")) {
            assert!(
                line.contains(" 0 bytes spill stores, 0 bytes spill loads"),
                "{} {mode:?}: registers spilled: {line}",
                target.arch()
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Every value of `func` at `args`, by value index, as the interpreter computes it.
fn all_values(func: &Func, args: &[Array]) -> Vec<Array> {
    let mut values: Vec<Array> = args.to_vec();
    for ins in &func.body {
        let operands: Vec<&Array> = ins.args.iter().map(|a| &values[a.index()]).collect();
        let v = eval_op(&ins.op, &operands).unwrap();
        values.push(v);
    }
    values
}

/// f32: 3-ULP transcendentals and sums in another order; f64: rounding; halves: about an ULP
/// of theirs; integers and bools exactly.
fn tolerance(d: DType) -> f64 {
    match d {
        DType::F32 | DType::C64 => 2e-5,
        DType::F64 | DType::C128 => 1e-11,
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 0.0,
    }
}

/// Small forms of the benchmark workloads and of the row and branch shapes the renderer
/// distinguishes: rows of several warps with a partial last column slot, f64 rows, sines
/// beyond the short f32 and f64 reductions.
fn emulated_programs() -> Vec<(&'static str, Func)> {
    let mlp_step = |(p, x, y): (common::Mlp, Tensor, Tensor)| {
        let g = ferrax::grad(|p: common::Mlp| common::mlp_loss(&p, &x, &y))(p.clone());
        let layers = p.layers.iter().zip(&g.layers);
        layers
            .map(|(p, g)| (&p.w - &g.w * 0.01, &p.b - &g.b * 0.01))
            .collect::<Vec<_>>()
    };
    vec![
        ("gelu", trace(common::gelu, &common::spec(&[1000])).unwrap()),
        (
            "sin_chain",
            trace(common::sin_chain, &common::spec(&[1000])).unwrap(),
        ),
        (
            "huge_sin",
            trace(
                |x: Tensor| (&x * 1e12).sin() + (&x * 3e7).cos() + (&x * 1e30).sin(),
                &common::spec(&[999]),
            )
            .unwrap(),
        ),
        (
            "huge_sin_f64",
            trace(
                |x: Tensor| (&x * 1e20).sin() + (&x * 3e15).cos() + (&x * 1e300).sin(),
                &Tensor::spec(DType::F64, [99]),
            )
            .unwrap(),
        ),
        (
            "softmax_300",
            trace(|x: Tensor| nn::softmax(&x, -1), &common::spec(&[8, 300])).unwrap(),
        ),
        (
            "row_sums_300",
            trace(|x: Tensor| (&x * 2.0).sum(-1), &common::spec(&[6, 300])).unwrap(),
        ),
        (
            "softmax_f64",
            trace(
                |x: Tensor| nn::softmax(&x, -1),
                &Tensor::spec(DType::F64, [4, 70]),
            )
            .unwrap(),
        ),
        (
            "layernorm_1000",
            trace(
                |(x, g, b): (Tensor, Tensor, Tensor)| common::layernorm(&x, &g, &b),
                &(
                    common::spec(&[4, 1000]),
                    common::spec(&[1000]),
                    common::spec(&[1000]),
                ),
            )
            .unwrap(),
        ),
        // Longer than 256 threads hold in 16 columns each: blocks of 1,024 threads.
        (
            "softmax_16384",
            trace(|x: Tensor| nn::softmax(&x, -1), &common::spec(&[2, 16384])).unwrap(),
        ),
        ("layernorm_grad_12288", layernorm_grad(&[2, 12288])),
        // Longer than 1,024 threads hold: streamed a chunk at a time. 10,000 vectors of four
        // (a last chunk partly outside the row), and a layernorm gradient over an odd row
        // (vectors of one column, each pass recomputing what the one before kept).
        (
            "softmax_40000",
            trace(|x: Tensor| nn::softmax(&x, -1), &common::spec(&[3, 40000])).unwrap(),
        ),
        ("layernorm_grad_20001", layernorm_grad(&[3, 20001])),
        (
            "mlp_step",
            trace(
                mlp_step,
                &(
                    common::mlp_params(&[20, 48, 40, 10]),
                    common::spec(&[16, 20]),
                    common::spec(&[16, 10]),
                ),
            )
            .unwrap(),
        ),
    ]
}

/// The gradient of a weighted layernorm of an array of `shape` (rows by columns).
fn layernorm_grad(shape: &[usize]) -> Func {
    let cols = shape[1];
    trace(
        |(x, g, b, w): (Tensor, Tensor, Tensor, Tensor)| {
            let loss = |x: Tensor| (common::layernorm(&x, &g, &b) * &w).sum([0, 1]);
            ferrax::grad(loss)(x)
        },
        &(
            common::spec(shape),
            common::spec(&[cols]),
            common::spec(&[cols]),
            common::spec(shape),
        ),
    )
    .unwrap()
}

/// Runs `launch` of `plan` (rendered as `module`) in the emulator, on the interpreter's
/// `values` of its inputs, with at most two blocks (so that loops over elements or rows go
/// round); returns what it stores, by value.
fn emulate(
    plan: &GpuPlan,
    module: &Module,
    launched: &Launch,
    values: &[Array],
) -> Vec<(ValueId, Array)> {
    let mut memory = Memory::default();
    let mut params = Vec::new();
    let mut outputs = Vec::new();
    // A column reduction's partials, folded here by the interpreter.
    let mut partials = Vec::new();
    for kernel in launched.kernels.iter().map(|&k| &plan.kernels[k]) {
        for b in &kernel.sig.buffers {
            let value = &values[b.value.index()];
            match b.role {
                Role::Input => params.push(memory.alloc(&bytes_of(value))),
                Role::Output => {
                    let bytes = bytes_of(value).len();
                    let address = memory.alloc(&vec![0xEE; bytes]);
                    params.push(address);
                    outputs.push((b.value, address, bytes));
                }
                Role::Scratch => {}
                Role::Partial(op) => {
                    let (Some(split), Access::Inner(cols)) = (ColumnSplit::of(kernel), b.access)
                    else {
                        panic!("{}: partials of no column kernel", kernel.name);
                    };
                    let ty = TensorType::new(b.dtype, split.partials(cols));
                    let bytes = ty.numel() * b.dtype.size_bytes();
                    let address = memory.alloc(&vec![0xEE; bytes]);
                    params.push(address);
                    partials.push((b.value, op, ty, address));
                }
            }
        }
    }
    let index = plan.launches.iter().position(|l| l.name == launched.name);
    let (len, block) = plan.launch_shape(index.unwrap());
    let grid = len.div_ceil(block as usize).clamp(1, 2) as u32;
    launch(
        module.entry(plan.entry(&launched.name)).unwrap(),
        grid,
        block,
        &params,
        &mut memory,
    )
    .unwrap();
    let mut stored: Vec<(ValueId, Array)> = outputs
        .into_iter()
        .map(|(v, address, bytes)| {
            (
                v,
                array_of(memory.read(address, bytes).unwrap(), values[v.index()].ty()).unwrap(),
            )
        })
        .collect();
    for (v, op, ty, address) in partials {
        let bytes = ty.numel() * ty.dtype.size_bytes();
        let folded = array_of(memory.read(address, bytes).unwrap(), &ty).unwrap();
        let reduce = ferrax::ir::Op::Reduce { op, axes: vec![0] };
        let folded = eval_op(&reduce, &[&folded]).unwrap();
        let shape = values[v.index()].shape().clone();
        stored.push((v, folded.reshaped(shape).unwrap()));
    }
    stored
}

/// Every kernel the GPU plans for the corpus, the gradients and small forms of the benchmark
/// workloads, run in the PTX emulator (`ferrax-ptx-emu`) on the interpreter's values of its
/// inputs, stores the interpreter's values of its outputs: flat kernels and launches of
/// several (two blocks, so the grid-stride loops go round), row kernels (two blocks striding
/// over the rows), and the branch for sines beyond the f32 reduction.
#[test]
fn kernels_compute_the_interpreters_values_in_the_emulator() {
    let mut programs = common::corpus();
    programs.extend(common::gradient_programs());
    programs.extend(emulated_programs());
    let mut launches = 0;
    let mut rows = 0;
    for (name, func) in programs {
        let (simple, _) = simplify(&func).unwrap();
        let plan = GpuPlan::new(&simple, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        let module = Module::parse(&plan.ptx).unwrap();
        for seed in 0..2 {
            let values = all_values(&plan.func, &common::inputs(&plan.func, seed));
            for l in &plan.launches {
                rows += l
                    .kernels
                    .iter()
                    .filter(|&&k| plan.kernels[k].rows.is_some())
                    .count();
                launches += 1;
                for (v, got) in emulate(&plan, &module, l, &values) {
                    let want = &values[v.index()];
                    let what = format!("{name} seed {seed} {} value %{}", l.name, v.0);
                    common::assert_close(&got, want, tolerance(want.dtype()), &what);
                }
            }
        }
    }
    assert!(
        launches >= 80 && rows >= 30,
        "{launches} launches, {rows} row kernels"
    );
}

/// Integer matrix products in each layout: i32, i64 and u8 (their sums wrap), either operand
/// transposed, batched, and with batch dimensions that are not leading (copies first).
fn integer_products() -> Vec<(&'static str, Func)> {
    type Product = fn((Tensor, Tensor)) -> Tensor;
    let cases: [(&str, Product, DType, [&[usize]; 2]); 5] = [
        (
            "i32_a_b",
            |(a, b)| a.matmul(&b),
            DType::I32,
            [&[33, 17], &[17, 9]],
        ),
        (
            "i32_at_bt",
            |(a, b)| a.transpose([1, 0]).matmul(&b.transpose([1, 0])),
            DType::I32,
            [&[17, 33], &[9, 17]],
        ),
        (
            "i64_batched",
            |(a, b)| a.matmul(&b),
            DType::I64,
            [&[4, 8, 5], &[4, 5, 3]],
        ),
        (
            "u8_a_bt",
            |(a, b)| a.matmul(&b.transpose([1, 0])),
            DType::U8,
            [&[12, 40], &[7, 40]],
        ),
        (
            "i32_bqhd_bkhd_bhqk",
            |(q, k)| {
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
            DType::I32,
            [&[2, 5, 3, 4], &[2, 6, 3, 4]],
        ),
    ];
    cases
        .into_iter()
        .map(|(name, f, dtype, [a, b])| {
            let specs = (
                Tensor::spec(dtype, a.to_vec()),
                Tensor::spec(dtype, b.to_vec()),
            );
            (name, trace(f, &specs).unwrap())
        })
        .collect()
}

/// Integer matrix products, which cuBLAS does not compute, run as kernels of their own on the
/// GPU, no step on the host, and on the emulated GPU give the interpreter's results bit for bit,
/// sums wrapping (inputs up to 2^30 and 255).
#[test]
fn integer_products_run_in_kernels_with_the_interpreters_wrapping() {
    for (name, func) in integer_products() {
        let plan = plan_of(&func);
        assert_eq!(plan.host_ops(), Vec::<&str>::new(), "{name}");
        assert_eq!(plan.int_gemms.len(), 1, "{name}");
        let args: Vec<Array> = func
            .params
            .iter()
            .enumerate()
            .map(|(p, ty)| {
                let n = ty.numel();
                let x = |i: usize| (i * 7919 + p * 104_729) % 2003;
                let elements = match ty.dtype {
                    DType::I32 => {
                        Elements::I32((0..n).map(|i| (x(i) << 20) as i32 - (1 << 30)).collect())
                    }
                    DType::I64 => {
                        Elements::I64((0..n).map(|i| ((x(i) as i64) << 52) - (1 << 62)).collect())
                    }
                    _ => Elements::U8((0..n).map(|i| x(i) as u8).collect()),
                };
                Array::new(ty.shape.clone(), elements).unwrap()
            })
            .collect();
        let (simple, _) = simplify(&func).unwrap();
        let emulator = Emulator::default();
        let program = GpuProgram::compile(&simple, &emulator, GpuOptions::HIGHEST).unwrap();
        let got = program.run(&args).unwrap();
        assert_eq!(
            got,
            ferrax::runtime::interpret(&func, &args).unwrap(),
            "{name}"
        );
        assert!(
            emulator.launched().iter().any(|l| l.contains("_m0")),
            "{name}: {:?}",
            emulator.launched()
        );
    }
}

/// Runs `func` on the emulated GPU (the executor the CUDA device uses, [`GpuProgram`]) at
/// `args` and checks its results against the interpreter's; returns what it launched.
fn run_on_emulator(name: &str, func: &Func, args: &[Array]) -> Vec<String> {
    let emulator = Emulator::default();
    let program = GpuProgram::compile(func, &emulator, GpuOptions::HIGHEST)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let got = program.run(args).unwrap_or_else(|e| panic!("{name}: {e}"));
    let want = ferrax::runtime::interpret(func, args).unwrap();
    assert_eq!(got.len(), want.len(), "{name}: results");
    for (i, (got, want)) in got.iter().zip(&want).enumerate() {
        let what = format!("{name} result {i}");
        common::assert_close(got, want, tolerance(want.dtype()), &what);
    }
    emulator.launched()
}

/// Whole programs of the corpus, the gradients and the small benchmark forms run on the
/// emulated GPU through the executor the CUDA device uses, and compute the interpreter's
/// results. This checks what the kernel-by-kernel tests cannot: the step order, launch
/// shapes, launches deferred and grouped, values released after their last reader, views,
/// constants, and the operand layouts and transposes given to cuBLAS for every matrix product.
#[test]
fn whole_programs_run_on_the_emulated_gpu() {
    let mut programs = common::corpus();
    programs.extend(common::gradient_programs());
    programs.extend(emulated_programs());
    let (mut launches, mut gemms) = (0, 0);
    for (name, func) in programs {
        let (simple, _) = simplify(&func).unwrap();
        for seed in 0..2 {
            let launched = run_on_emulator(name, &simple, &common::inputs(&simple, seed));
            gemms += launched.iter().filter(|l| *l == "gemm").count();
            launches += launched.len();
        }
    }
    assert!(
        launches >= 250 && gemms >= 50,
        "{launches} launches, {gemms} GEMMs"
    );
}

/// Fast math ([`MathMode::Fast`]): f32 exp, log, sin, cos, rsqrt, square roots and quotients
/// become the approximate instructions, one or two each, and kernels stay right: run in the
/// emulator, which computes each approximate instruction correctly rounded (so this checks
/// their operands and base-2 scalings; tests/gpu.rs checks the hardware's errors), every
/// kernel of the small benchmark forms stores the interpreter's values. w8's module is a
/// fraction of the accurate one.
#[test]
fn fast_math_renders_approximate_instructions_that_compute_the_functions() {
    let unary = trace(
        |x: Tensor| {
            let a = x.abs() + 0.5;
            x.exp() + a.log() + x.sin() * x.cos() + a.rsqrt() + a.sqrt() / (&x + 3.0) + x.sigmoid()
        },
        &common::spec(&[1000]),
    )
    .unwrap();
    let plan = |func: &Func, mode| {
        let (simple, _) = simplify(func).unwrap();
        GpuPlan::new(&simple, PtxTarget::Sm80, mode).unwrap()
    };
    let fast = plan(&unary, MathMode::Fast).ptx;
    for instruction in [
        "mul.rn.f32",
        "ex2.approx.f32",
        "lg2.approx.f32",
        "sin.approx.f32",
        "cos.approx.f32",
        "rsqrt.approx.f32",
        "sqrt.approx.f32",
        "div.full.f32",
    ] {
        assert!(fast.contains(instruction), "no {instruction}");
    }
    assert!(!fast.contains("sqrt.rn") && !fast.contains("div.rn"));
    // exp and logistic's exp, per lane (as the one sine).
    let per_lane = |i: &str| fast.matches(i).count() / fast.matches("sin.approx.f32").count();
    assert_eq!(per_lane("ex2.approx.f32"), 2);
    assert!(!plan(&unary, MathMode::Accurate).ptx.contains(".approx"));
    let mut programs = emulated_programs();
    // Sines of huge arguments are where the approximation is poor.
    programs.retain(|(name, _)| *name != "huge_sin");
    programs.push(("unary", unary));
    for (name, func) in programs {
        let plan = plan(&func, MathMode::Fast);
        if name == "gelu" {
            // `x·0.5·(1 + tanh(u))` as `x / (1 + exp(-2u))`, its exp approximate too.
            assert!(plan.ptx.contains("ex2.approx.f32") && plan.ptx.contains("div.full.f32"));
        }
        let module = Module::parse(&plan.ptx).unwrap();
        let values = all_values(&plan.func, &common::inputs(&plan.func, 0));
        for l in &plan.launches {
            for (v, got) in emulate(&plan, &module, l, &values) {
                let want = &values[v.index()];
                let what = format!("{name} {} value %{}", l.name, v.0);
                common::assert_close(&got, want, tolerance(want.dtype()), &what);
            }
        }
    }
    let (_, w8) = common::benchmark_programs()
        .into_iter()
        .find(|(name, _)| *name == "w8_sin_chain")
        .unwrap();
    let (fast, accurate) = (
        plan(&w8, MathMode::Fast).ptx,
        plan(&w8, MathMode::Accurate).ptx,
    );
    let lines = |ptx: &str| ptx.lines().count();
    assert!(
        lines(&fast) * 3 < lines(&accurate),
        "{} lines, accurately {}",
        lines(&fast),
        lines(&accurate)
    );
    insta::assert_snapshot!("ptx_w8_sin_chain_fast_math", fast);
}

/// Each reduction and strided-copy kernel form, run in the PTX emulator, computes what the
/// interpreter does: sums, products, maxima and minima over rows (blocks of several warps) and
/// over columns (with the four-row unrolled loop and its tail), in f32 and f64, maxima and
/// minima of NaN and signed zeros exactly, and i32 ones (wrapping) exactly; transposes, broadcasts and strided slices of f32,
/// f16 and bool, bit for bit.
#[test]
fn reductions_and_copies_compute_the_interpreters_values_in_the_emulator() {
    let f32s = |shape: &[usize]| common::spec(shape);
    let f64s = |shape: &[usize]| Tensor::spec(DType::F64, shape.to_vec());
    type Body = fn(Tensor) -> Tensor;
    let cases: Vec<(&str, Body, Tensor)> = vec![
        ("sum rows", |x| x.sum(-1), f32s(&[5, 300])),
        ("max rows", |x| x.max(-1), f32s(&[5, 300])),
        ("min rows", |x| x.min(-1), f32s(&[3, 20])),
        ("prod rows", |x| x.prod(-1), f32s(&[4, 9])),
        ("sum rows f64", |x| x.sum(-1), f64s(&[3, 40])),
        ("sum columns", |x| x.sum(0), f32s(&[300, 7])),
        ("sum of one column", |x| x.sum(0), f32s(&[700, 1])),
        ("max of two columns f64", |x| x.max(0), f64s(&[300, 2])),
        ("max columns", |x| x.max(0), f32s(&[37, 70])),
        ("min columns f64", |x| x.min(0), f64s(&[40, 33])),
        (
            "i32 sum rows",
            |x| x.sum(-1),
            Tensor::spec(DType::I32, [3, 300]),
        ),
        (
            "i32 prod rows",
            |x| x.prod(-1),
            Tensor::spec(DType::I32, [3, 40]),
        ),
        (
            "i32 max columns",
            |x| x.max(0),
            Tensor::spec(DType::I32, [50, 9]),
        ),
        (
            "i64 sum rows",
            |x| x.sum(-1),
            Tensor::spec(DType::I64, [3, 300]),
        ),
        (
            "i64 prod columns",
            |x| x.prod(0),
            Tensor::spec(DType::I64, [40, 5]),
        ),
        (
            "i64 min middle",
            |x| x.min(1),
            Tensor::spec(DType::I64, [3, 37, 4]),
        ),
        (
            "sum rows f16",
            |x| x.sum(-1),
            Tensor::spec(DType::F16, [3, 300]),
        ),
        (
            "prod columns bf16",
            |x| x.prod(0),
            Tensor::spec(DType::BF16, [9, 40]),
        ),
        (
            "max columns bf16",
            |x| x.max(0),
            Tensor::spec(DType::BF16, [37, 70]),
        ),
        (
            "min rows f16",
            |x| x.min(-1),
            Tensor::spec(DType::F16, [5, 70]),
        ),
        (
            "any rows",
            |x| x.max(-1),
            Tensor::spec(DType::Bool, [4, 300]),
        ),
        (
            "all columns",
            |x| x.min(0),
            Tensor::spec(DType::Bool, [30, 7]),
        ),
        ("sum middle", |x| x.sum(1), f32s(&[3, 37, 20])),
        ("max middle f64", |x| x.max([1, 2]), f64s(&[4, 5, 6, 7])),
        ("transpose", |x| x.transpose([1, 0]), f32s(&[4, 6])),
        ("transpose 3d", |x| x.transpose([2, 0, 1]), f32s(&[2, 3, 5])),
        ("broadcast", |x| x.broadcast_to([3, 5]), f32s(&[5])),
        (
            "slice",
            |x| x.slice_strided(&[1, 2], &[9, 11], &[2, 3]),
            f32s(&[10, 12]),
        ),
        (
            "half transpose",
            |x| x.transpose([1, 0]),
            Tensor::spec(DType::F16, [3, 7]),
        ),
        (
            "bool broadcast",
            |x| x.broadcast_to([4, 6]),
            Tensor::spec(DType::Bool, [1, 6]),
        ),
    ];
    // Values from -2 to 2 in an irregular order, with zeros of both signs among them (and, for
    // maxima and minima, infinities and a NaN, below).
    let values = |ty: &TensorType, extremes: bool| -> Array {
        let n = ty.numel();
        let x = |i: usize| match i % 11 {
            3 => -0.0,
            5 => 0.0,
            7 if extremes => f64::INFINITY,
            9 if extremes => f64::NEG_INFINITY,
            _ => ((i * 7919) % 4001) as f64 / 1000.0 - 2.0 + 1e-7 * i as f64,
        };
        let elements = match ty.dtype {
            DType::F32 => Elements::F32((0..n).map(|i| x(i) as f32).collect()),
            DType::F64 => Elements::F64((0..n).map(x).collect()),
            DType::F16 => Elements::F16((0..n).map(|i| half::f16::from_f64(x(i))).collect()),
            DType::BF16 => Elements::BF16((0..n).map(|i| half::bf16::from_f64(x(i))).collect()),
            // Mostly true, so that rows of all true and rows with a false both occur.
            DType::Bool => Elements::Bool((0..n).map(|i| x(i) > -1.9).collect()),
            // Products of these overflow: i32 reductions wrap.
            DType::I32 => {
                Elements::I32((0..n).map(|i| ((i * 7919) % 4001) as i32 - 2000).collect())
            }
            // All above i32's range (a minimum starting from i32::MAX would show), their sums
            // and products overflowing.
            DType::I64 => Elements::I64(
                (0..n)
                    .map(|i| (((i * 7919) % 4001) as i64 + 1) << 50)
                    .collect(),
            ),
            other => panic!("no values for {other}"),
        };
        Array::new(ty.shape.clone(), elements).unwrap()
    };
    for (name, body, spec) in cases {
        let func = trace(body, &spec).unwrap();
        let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        let module = Module::parse(&plan.ptx).unwrap();
        let extremes = name.starts_with("max") || name.starts_with("min");
        let mut input = values(&func.params[0], extremes);
        if extremes {
            // A NaN in one row or column, the others without.
            let mut v = bytes_of(&input);
            let nan = if func.params[0].dtype == DType::F32 {
                f32::NAN.to_le_bytes().to_vec()
            } else {
                f64::NAN.to_le_bytes().to_vec()
            };
            v[..nan.len()].copy_from_slice(&nan);
            input = array_of(&v, input.ty()).unwrap();
        }
        let want = &ferrax::runtime::interpret(&func, std::slice::from_ref(&input)).unwrap()[0];
        let mut memory = Memory::default();
        let from = memory.alloc(&bytes_of(&input));
        let bytes = bytes_of(want).len();
        let to = memory.alloc(&vec![0xEE; bytes]);
        let (entry, grid, block) = match (&plan.reductions[..], &plan.copies[..]) {
            ([r], []) => (r.name.clone(), r.grid(2), r.block()),
            ([], [c]) => (
                c.name.clone(),
                c.len().div_ceil(256).clamp(1, 2) as u32,
                256,
            ),
            _ => panic!("{name}: not one reduction or copy"),
        };
        let entry = module.entry(&entry).unwrap();
        launch(entry, grid, block, &[from, to], &mut memory).unwrap();
        let got = array_of(memory.read(to, bytes).unwrap(), want.ty()).unwrap();
        let exact = !name.starts_with("sum") && !name.starts_with("prod");
        if exact {
            assert_eq!(bytes_of(&got), bytes_of(want), "{name}");
        } else {
            common::assert_close(&got, want, tolerance(want.dtype()), name);
        }
    }
}

/// i32 division and remainders run in GPU kernels with the interpreter's edge cases: `x / 0 =
/// -1`, `x % 0 = x`, `MIN / -1 = MIN` and `MIN % -1 = 0` (the emulator, like the hardware's
/// leaving them unspecified, refuses a zero or overflowing divisor), truncating toward zero;
/// so do abs (`MIN` its own) and sign.
#[test]
fn integer_division_runs_in_kernels_with_the_interpreters_edge_cases() {
    let spec = Tensor::spec(DType::I32, [12]);
    let func = trace(
        |(a, b): (Tensor, Tensor)| {
            let q = &a / &b;
            let r = &a % &b;
            (&q * 3 + &r, q, r, a.abs(), b.sign())
        },
        &(spec.clone(), spec),
    )
    .unwrap();
    let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    assert_eq!(plan.host_ops(), Vec::<&str>::new());
    let min = i32::MIN;
    let a = vec![7, -7, 7, -7, min, min, 5, 0, min, i32::MAX, -1, 9];
    let b = vec![2, 2, -2, -2, -1, 0, 0, 0, 1, -1, 3, 9];
    let args = [
        Array::from_vec([12], a).unwrap(),
        Array::from_vec([12], b).unwrap(),
    ];
    let values = all_values(&plan.func, &args);
    let module = Module::parse(&plan.ptx).unwrap();
    let mut outputs = 0;
    for l in &plan.launches {
        for (v, got) in emulate(&plan, &module, l, &values) {
            assert_eq!(got, values[v.index()], "value %{}", v.0);
            outputs += 1;
        }
    }
    assert_eq!(outputs, 5);
}

/// i64 arithmetic: wrapping sums and products, division and remainders at their edge cases,
/// powers (by squaring over 63 bits), abs, sign, max, compares, selects and conversions.
fn i64_arithmetic() -> Func {
    let spec = Tensor::spec(DType::I64, [16]);
    trace(
        |(a, b): (Tensor, Tensor)| {
            let q = &a / &b;
            let r = &a % &b;
            let p = a.pow(&b);
            let big = (&a * &b + &a - &b).maximum(&q);
            let chosen = big.greater(&r).select(&big, &p);
            (
                chosen.abs() + b.sign(),
                q,
                r,
                p,
                a.astype(DType::F64) + b.astype(DType::I32).astype(DType::F64),
            )
        },
        &(spec.clone(), spec),
    )
    .unwrap()
}

/// i64 arithmetic runs in GPU kernels (wrapping; `x / 0 = -1`, `x % 0 = x`, `MIN / -1 = MIN`,
/// negative exponents and `abs(MIN) = MIN` as the interpreter's) and, on the emulated GPU,
/// computes the interpreter's results bit for bit.
#[test]
fn i64_arithmetic_runs_in_kernels_with_the_interpreters_edge_cases() {
    let func = i64_arithmetic();
    let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    assert_eq!(plan.host_ops(), Vec::<&str>::new());
    let (min, max) = (i64::MIN, i64::MAX);
    let a = vec![
        7,
        -7,
        7,
        -7,
        min,
        min,
        5,
        0,
        min,
        max,
        -1,
        9,
        3,
        -2,
        1 << 40,
        -1,
    ];
    let b = vec![
        2,
        2,
        -2,
        -2,
        -1,
        0,
        0,
        0,
        1,
        -1,
        3,
        9,
        63,
        -3,
        1i64 << 33,
        -7,
    ];
    let args = [
        Array::from_vec([16], a).unwrap(),
        Array::from_vec([16], b).unwrap(),
    ];
    let emulator = Emulator::default();
    let program = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
    assert_eq!(
        program.run(&args).unwrap(),
        ferrax::runtime::interpret(&func, &args).unwrap()
    );
}

/// Compares of bools (false below true) run in GPU kernels, as predicate logic, and give the
/// interpreter's results for every pair.
#[test]
fn bool_compares_run_in_kernels() {
    let func = bool_compares();
    let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    assert_eq!(plan.host_ops(), Vec::<&str>::new());
    let args = [
        Array::from_vec([4], vec![false, false, true, true]).unwrap(),
        Array::from_vec([4], vec![false, true, false, true]).unwrap(),
    ];
    let launched = run_on_emulator("bool compares", &func, &args);
    assert_eq!(launched.len(), 1, "{launched:?}");
}

/// Every compare of two bools.
fn bool_compares() -> Func {
    let text = "func @main(%0: bool[4], %1: bool[4]) -> (bool[4], bool[4], bool[4], bool[4], bool[4], bool[4]) {
  %2 = eq %0, %1 : bool[4]
  %3 = ne %0, %1 : bool[4]
  %4 = lt %0, %1 : bool[4]
  %5 = le %0, %1 : bool[4]
  %6 = gt %0, %1 : bool[4]
  %7 = ge %0, %1 : bool[4]
  return %2, %3, %4, %5, %6, %7
}";
    ferrax::ir::parse_func(text).unwrap()
}

/// Conversions through u8, i64 and bool run in GPU kernels, bit for bit as the interpreter's:
/// floats to integers truncated and saturated (NaN to 0), integers narrowed by wrapping,
/// bools to 1 and 0, and `x != 0` to bool (NaN true).
#[test]
fn conversions_through_u8_i64_and_bool_run_in_kernels() {
    let func = trace(
        |x: Tensor| {
            let u = x.astype(DType::U8);
            let i = x.astype(DType::I64);
            let flag = x.astype(DType::Bool);
            (
                u.astype(DType::F32),
                u.astype(DType::I64),
                i.astype(DType::F64),
                i.astype(DType::I32).astype(DType::U8),
                flag.astype(DType::F32),
                x.greater(0.0).astype(DType::I32),
            )
        },
        &common::spec(&[12]),
    )
    .unwrap();
    let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    assert_eq!(plan.host_ops(), Vec::<&str>::new());
    let x = common::conversion_edges();
    let values = all_values(&plan.func, &[Array::from_vec([12], x).unwrap()]);
    let module = Module::parse(&plan.ptx).unwrap();
    let mut outputs = 0;
    for l in &plan.launches {
        for (v, got) in emulate(&plan, &module, l, &values) {
            assert_eq!(
                bytes_of(&got),
                bytes_of(&values[v.index()]),
                "value %{}",
                v.0
            );
            outputs += 1;
        }
    }
    assert_eq!(outputs, 6);
}

/// Integers and f64 convert to f16 and bf16 in GPU kernels, rounded once as the interpreter
/// rounds them, bit for bit: ties of the half type that rounding through f32 to nearest would
/// break the wrong way (2^24 + 2^16 + 1 to bf16, 1 + 2^-8 + 2^-40 to bf16), f16's overflow
/// from 65,520, and the extremes of i32 and i64; halves convert back to integers truncated
/// and saturated.
#[test]
fn integers_and_f64_convert_to_halves_rounded_once() {
    let ints: Vec<i64> = vec![
        0,
        1,
        -1,
        2049,
        2051,
        65504,
        65519,
        65520,
        -65520,
        (1 << 24) + (1 << 16) + 1,
        -((1 << 24) + (1 << 16) + 1),
        (1 << 24) + (1 << 16),
        i64::from(i32::MAX),
        i64::from(i32::MIN),
        (1 << 40) + (1 << 32) + 1,
        (1 << 53) + 1,
        i64::MAX,
        i64::MIN,
    ];
    let n = ints.len();
    let floats: Vec<f64> = vec![
        1.0 + 2f64.powi(-8) + 2f64.powi(-40),
        -(1.0 + 2f64.powi(-8) + 2f64.powi(-40)),
        1.0 + 2f64.powi(-8),
        1.0 + 2f64.powi(-11) + 2f64.powi(-40),
        1e300,
        -1e300,
        3.3961e38,
        f64::INFINITY,
        1e-40,
        2f64.powi(-140) * (1.0 + 2f64.powi(-8) + 2f64.powi(-50)),
        0.0,
        -0.0,
        65519.99,
        1.5,
        -2.5,
        7.0,
        1e5,
        -1e10,
    ];
    let func = half_conversions(n);
    let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    assert_eq!(plan.host_ops(), Vec::<&str>::new());
    let args = [
        Array::from_vec([n], ints).unwrap(),
        Array::from_vec([n], floats).unwrap(),
    ];
    let values = all_values(&plan.func, &args);
    let module = Module::parse(&plan.ptx).unwrap();
    let mut outputs = 0;
    for l in &plan.launches {
        for (v, got) in emulate(&plan, &module, l, &values) {
            let want = &values[v.index()];
            assert_eq!(
                bytes_of(&got),
                bytes_of(want),
                "value %{}: {got:?}, want {want:?}",
                v.0
            );
            outputs += 1;
        }
    }
    assert!(outputs >= 10, "{outputs} outputs");
    run_on_emulator("conversions to halves", &func, &args);
}

/// Conversions of i64, i32, u8 and f64 `[n]` to halves, and of halves to integers.
fn half_conversions(n: usize) -> Func {
    trace(
        |(i, x): (Tensor, Tensor)| {
            let narrow = i.astype(DType::I32);
            let byte = i.astype(DType::U8);
            let (h, b) = (x.astype(DType::F16), x.astype(DType::BF16));
            vec![
                narrow.astype(DType::F16),
                narrow.astype(DType::BF16),
                i.astype(DType::F16),
                i.astype(DType::BF16),
                byte.astype(DType::BF16),
                b.clone(),
                h.clone(),
                h.astype(DType::I32),
                b.astype(DType::I64),
                b.astype(DType::U8),
            ]
        },
        &(Tensor::spec(DType::I64, [n]), Tensor::spec(DType::F64, [n])),
    )
    .unwrap()
}

/// i32 powers run in GPU kernels as the interpreter computes them: by squaring, wrapping, and
/// for negative exponents 1, ±1 or 0 by the base.
#[test]
fn integer_powers_run_in_kernels_as_the_interpreters() {
    let spec = Tensor::spec(DType::I32, [16]);
    let func = trace(|(a, b): (Tensor, Tensor)| a.pow(&b), &(spec.clone(), spec)).unwrap();
    let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    assert_eq!(plan.host_ops(), Vec::<&str>::new());
    let max = i32::MAX;
    let a = vec![3, 3, -2, 0, 0, 1, -1, -1, 7, 5, -3, max, 2, 2, 2, -1];
    let b = vec![
        0,
        19,
        31,
        0,
        5,
        -4,
        -3,
        -8,
        -1,
        1,
        1_000_003,
        2,
        30,
        31,
        1 << 30,
        max,
    ];
    let args = [
        Array::from_vec([16], a).unwrap(),
        Array::from_vec([16], b).unwrap(),
    ];
    let values = all_values(&plan.func, &args);
    let module = Module::parse(&plan.ptx).unwrap();
    assert_eq!(plan.launches.len(), 1);
    let outputs = emulate(&plan, &module, &plan.launches[0], &values);
    assert_eq!(outputs.len(), 1);
    for (v, got) in outputs {
        assert_eq!(got, values[v.index()], "value %{}", v.0);
    }
}

/// Reductions over axes that are not consecutive (batch norm's over N, H and W of NCHW) run
/// on the GPU as reductions over each consecutive run, last run first, which together compute
/// the original's result; in the emulator each computes what the interpreter does (given its
/// value of the operand), and the plan keeps nothing on the host.
#[test]
fn reductions_over_separated_axes_split_into_consecutive_ones() {
    type Body = fn(Tensor) -> Tensor;
    let cases: Vec<(&str, Body, Tensor, usize)> = vec![
        (
            "sum [0, 2]",
            |x| x.sum([0, 2]),
            common::spec(&[3, 40, 5]),
            2,
        ),
        (
            "batch norm mean",
            |x| x.mean([0, 2, 3]),
            common::spec(&[4, 3, 6, 7]),
            2,
        ),
        (
            "max [0, 2, 4] f64",
            |x| x.max([0, 2, 4]),
            Tensor::spec(DType::F64, [2, 3, 4, 5, 6]),
            3,
        ),
        (
            "i32 sum [1, 3]",
            |x| x.sum([1, 3]),
            Tensor::spec(DType::I32, [3, 4, 5, 6]),
            2,
        ),
    ];
    for (name, body, spec, count) in cases {
        let func = trace(body, &spec).unwrap();
        let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        assert_eq!(plan.host_ops(), Vec::<&str>::new(), "{name}");
        assert_eq!(plan.reductions.len(), count, "{name}");
        let module = Module::parse(&plan.ptx).unwrap();
        let args = common::inputs(&func, 0);
        let values = all_values(&plan.func, &args);
        // The split program computes the original's result.
        let whole = &ferrax::runtime::interpret(&func, &args).unwrap()[0];
        let split = &values[plan.func.outputs[0].index()];
        common::assert_close(split, whole, tolerance(whole.dtype()), name);
        for (i, got) in emulate_reductions(&plan, &module, &values) {
            let want = &values[plan.func.instr_value(i).index()];
            common::assert_close(&got, want, tolerance(want.dtype()), name);
        }
    }
}

/// Runs each instruction's strided copies of `plan` in the emulator, on the interpreter's
/// `values` of their operands, into one result each; returns them, by instruction.
fn emulate_copies(plan: &GpuPlan, module: &Module, values: &[Array]) -> Vec<(usize, Array)> {
    plan.copy_steps()
        .into_iter()
        .map(|(i, parts)| {
            let ins = &plan.func.body[i];
            let want = &values[plan.func.instr_value(i).index()];
            let mut memory = Memory::default();
            let bytes = bytes_of(want).len();
            let to = memory.alloc(&vec![0xEE; bytes]);
            for &(c, operand) in parts {
                let from = memory.alloc(&bytes_of(&values[ins.args[operand].index()]));
                let copy = &plan.copies[c];
                let grid = copy.len().div_ceil(256).clamp(1, 2) as u32;
                // Dynamic slices read their start indices on the device.
                let mut addresses = vec![from, to];
                for start in &copy.starts {
                    let value = &values[ins.args[start.operand].index()];
                    addresses.push(memory.alloc(&bytes_of(value)));
                }
                launch(
                    module.entry(plan.entry(&copy.name)).unwrap(),
                    grid,
                    256,
                    &addresses,
                    &mut memory,
                )
                .unwrap();
            }
            (
                i,
                array_of(memory.read(to, bytes).unwrap(), want.ty()).unwrap(),
            )
        })
        .collect()
}

/// Runs each reduction launch of `plan` in the emulator on the interpreter's values of its
/// operands; returns the results, by instruction.
fn emulate_reductions(plan: &GpuPlan, module: &Module, values: &[Array]) -> Vec<(usize, Array)> {
    let mut results = Vec::new();
    for (l, instrs) in plan.reduce_steps() {
        let mut memory = Memory::default();
        let mut params = Vec::new();
        for &i in instrs {
            let input = &values[plan.func.body[i].args[0].index()];
            let bytes = bytes_of(&values[plan.func.instr_value(i).index()]).len();
            params.push(memory.alloc(&bytes_of(input)));
            params.push(memory.alloc(&vec![0xEE; bytes]));
        }
        let launched = &plan.reduce_launches[l];
        launch(
            module.entry(plan.entry(&launched.name)).unwrap(),
            launched.grid(&plan.reductions, 2),
            launched.block(&plan.reductions),
            &params,
            &mut memory,
        )
        .unwrap();
        for (&i, to) in instrs.iter().zip(params.iter().skip(1).step_by(2)) {
            let want = &values[plan.func.instr_value(i).index()];
            let got = array_of(memory.read(*to, bytes_of(want).len()).unwrap(), want.ty()).unwrap();
            results.push((i, got));
        }
    }
    results
}

/// Concatenations and pads run on the GPU as strided copies into parts of one result; in the
/// PTX emulator they write what the interpreter computes, bit for bit (each copy given the
/// interpreter's value of its operand): operands of several sizes, an empty one, a pad with
/// low, high and interior padding, and its fill.
#[test]
fn concatenations_and_pads_compute_the_interpreters_values_in_the_emulator() {
    type Body = fn(Tensor) -> Tensor;
    let cases: Vec<(&str, Body, Tensor)> = vec![
        (
            "concatenate",
            |x| {
                let parts = [
                    x.clone(),
                    &x + 2.0,
                    x.slice(&[0, 1], &[3, 4]),
                    x.slice(&[0, 0], &[3, 0]),
                ];
                Tensor::concatenate(&parts, 1)
            },
            common::spec(&[3, 5]),
        ),
        (
            "concatenate rows",
            |x| Tensor::concatenate(&[x.clone(), x.clone()], 0),
            Tensor::spec(DType::F16, [2, 3]),
        ),
        (
            "pad",
            |x| x.pad(&[(1, 2, 1), (0, 3, 2)], -1.5),
            common::spec(&[3, 4]),
        ),
        (
            "pad bool",
            |x| x.pad(&[(2, 0, 0)], 1.0),
            Tensor::spec(DType::Bool, [5]),
        ),
        (
            "pad cropping",
            |x| x.pad(&[(-1, 2, 1), (1, -3, 0)], 0.5),
            common::spec(&[4, 6]),
        ),
        (
            "pad to nothing",
            |x| x.pad(&[(-3, 1, 0)], 2.0),
            common::spec(&[2]),
        ),
    ];
    let mut copied = 0;
    for (name, body, spec) in cases {
        let func = trace(body, &spec).unwrap();
        let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        assert_eq!(plan.host_ops(), Vec::<&str>::new(), "{name}");
        let module = Module::parse(&plan.ptx).unwrap();
        let values = all_values(&plan.func, &common::inputs(&plan.func, 0));
        for (i, got) in emulate_copies(&plan, &module, &values) {
            let want = &values[plan.func.instr_value(i).index()];
            let op = plan.func.body[i].op.name();
            assert_eq!(bytes_of(&got), bytes_of(want), "{name}: {op}");
            copied += plan
                .copy_steps()
                .iter()
                .find(|s| s.0 == i)
                .map_or(0, |s| s.1.len());
        }
    }
    assert!(copied >= 10, "only {copied} copies");
}

/// The GPU run lets go of every value once (after its last reader), never of a result: the
/// MLP step's peak memory is what is live at once.
#[test]
fn values_are_released_once_and_results_never() {
    for (name, func) in common::benchmark_programs() {
        let (simple, _) = simplify(&func).unwrap();
        let plan = plan_of(&simple);
        let released: Vec<ferrax::ir::ValueId> = plan.releases.iter().flatten().copied().collect();
        let mut once = released.clone();
        once.sort_by_key(|v| v.0);
        once.dedup();
        assert_eq!(once.len(), released.len(), "{name}: a value released twice");
        assert!(
            released.iter().all(|v| !plan.func.outputs.contains(v)),
            "{name}: a result released"
        );
        if name == "w5_mlp_step" {
            // Its inputs and the buffers between its steps.
            assert!(
                released.len() >= 25,
                "{name}: {} released of {} steps",
                released.len(),
                plan.releases.len()
            );
        }
    }
}

/// Every program of the StableHLO conformance suite (`../shared/conformance`, where present),
/// planned for the GPU: each plan builds, assembles with `ptxas` (where there is one), and
/// each of its kernel launches, reductions and strided copies, run in the emulator on the
/// interpreter's values of its inputs, stores the interpreter's values of its outputs; and
/// each whole program, run on the emulated GPU, computes the interpreter's results.
#[test]
fn conformance_programs_run_in_the_emulator() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/stablehlo");
    let Ok(entries) = std::fs::read_dir(dir.join("testdata")) else {
        eprintln!("skipped: no conformance suite at {}", dir.display());
        return;
    };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    files.sort();
    let assembler = ptxas();
    let scratch = std::env::temp_dir().join(format!("ferrax-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let (mut launched, mut whole) = (0, 0);
    for file in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "mlir"))
    {
        let text = std::fs::read_to_string(file).unwrap();
        let Ok(cases) = ferrax::stablehlo::test_cases(&text) else {
            continue;
        };
        for case in cases {
            let args: Vec<Array> = case
                .inputs
                .iter()
                .flat_map(|f| ferrax::runtime::interpret(f, &[]).unwrap())
                .collect();
            let name = file.file_name().unwrap().to_string_lossy();
            let (simple, _) = simplify(&case.program.func).unwrap();
            let plan = GpuPlan::new(&simple, PtxTarget::Sm80, MathMode::Accurate)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            // The GPU table leaves arithmetic on u8 values, on the 8-, 16- and 64-bit
            // integers and on complex numbers, and u32 division, powers and conversions, to
            // the host; all else runs there.
            let bytes = has_complex_values(&simple)
                || (0..simple.num_values())
                    .filter_map(|v| simple.value_type(ferrax::ir::ValueId(v as u32)))
                    .any(|t| {
                        use ferrax::DType::{I16, I8, U16, U32, U64, U8};
                        matches!(t.dtype, U8 | U32 | I8 | I16 | U16 | U64)
                    });
            if !bytes {
                assert_eq!(unexpected_host_ops(&plan), Vec::<&str>::new(), "{name}");
            }
            if let Some(ptxas) = &assembler {
                let source = scratch.join("module.ptx");
                std::fs::write(&source, &plan.ptx).unwrap();
                let out = Command::new(ptxas)
                    .arg("-arch=sm_80")
                    .arg(&source)
                    .arg("-o")
                    .arg(scratch.join("module.cubin"))
                    .output()
                    .unwrap();
                let report = String::from_utf8_lossy(&out.stderr);
                assert!(
                    out.status.success() && report.is_empty(),
                    "{name}: {report}"
                );
            }
            let module = Module::parse(&plan.ptx).unwrap();
            let values = all_values(&plan.func, &args);
            for l in &plan.launches {
                for (v, got) in emulate(&plan, &module, l, &values) {
                    let want = &values[v.index()];
                    let what = format!("{name} {} value %{}", l.name, v.0);
                    common::assert_close(&got, want, tolerance(want.dtype()), &what);
                }
                launched += 1;
            }
            let steps = emulate_copies(&plan, &module, &values)
                .into_iter()
                .chain(emulate_reductions(&plan, &module, &values));
            for (i, got) in steps {
                let want = &values[plan.func.instr_value(i).index()];
                let what = format!("{name} {}", plan.func.body[i].op.name());
                common::assert_close(&got, want, tolerance(want.dtype()), &what);
                launched += 1;
            }
            whole += run_on_emulator(&name, &simple, &args).len();
        }
    }
    std::fs::remove_dir_all(&scratch).ok();
    assert!(launched >= 120, "only {launched} launches");
    assert!(whole >= 140, "only {whole} launches of whole programs");
}

/// Row scatters run on the emulated GPU: floats sorted by row (the rank, bounds and apply
/// entries), integer sums, minima and maxima by atomics (the copy and combine entries). Every
/// combiner the GPU computes, on f32, f64, i32 and i64 rows, with i32 and i64 indices that
/// repeat, count from the end and fall outside the rows (dropped), gives the interpreter's
/// results bit for bit, including the order of float additions and the last of repeated
/// `set`s. Float sums by atomics, when asked for, are within rounding of it. The last cases
/// have more updates than a tile of the rank entry, and more than a grid covers at once.
#[test]
fn row_scatters_run_on_the_emulated_gpu_as_the_interpreter() {
    use ferrax::ir::{FuncBuilder, Op, Scatter, ScatterCombine};
    let scatter = |combine| Scatter {
        combine,
        update_window_dims: vec![2],
        inserted_window_dims: vec![0],
        input_batching_dims: vec![],
        scatter_indices_batching_dims: vec![],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 2,
        indices_are_sorted: false,
        unique_indices: false,
    };
    let (sorted, atomic) = ("_apply", "_combine");
    let small = ([6, 5], [3, 4]);
    let many = ([40, 3], [3, 250]);
    let cases = [
        (DType::F32, ScatterCombine::Add, false, sorted, small),
        (DType::F32, ScatterCombine::Replace, false, sorted, small),
        (DType::F32, ScatterCombine::Mul, true, sorted, small),
        (DType::F64, ScatterCombine::Add, false, sorted, small),
        (DType::I32, ScatterCombine::Max, false, atomic, small),
        (DType::I64, ScatterCombine::Min, false, atomic, small),
        (DType::I32, ScatterCombine::Add, false, atomic, small),
        (DType::I64, ScatterCombine::Add, false, atomic, small),
        (DType::F32, ScatterCombine::Add, true, atomic, small),
        (DType::F64, ScatterCombine::Add, true, atomic, small),
        (DType::F32, ScatterCombine::Add, false, sorted, many),
        (DType::I64, ScatterCombine::Add, false, atomic, many),
    ];
    for (k, (dtype, combine, atomic_floats, entry, ([rows, n], [b0, b1]))) in
        cases.into_iter().enumerate()
    {
        let index = if k % 2 == 0 { DType::I32 } else { DType::I64 };
        let mut b = FuncBuilder::new("scatter");
        let x = b.param(TensorType::new(dtype, [rows, n]));
        let i = b.param(TensorType::new(index, [b0, b1]));
        let u = b.param(TensorType::new(dtype, [b0, b1, n]));
        let y = b
            .push(Op::Scatter(Box::new(scatter(combine))), &[x, i, u])
            .unwrap();
        let func = b.finish(vec![y]);
        let options = GpuOptions {
            atomic_float_scatter: atomic_floats,
            ..GpuOptions::HIGHEST
        };
        let plan = GpuPlan::with_options(&func, PtxTarget::Sm80, options).unwrap();
        assert!(
            plan.host_ops().is_empty(),
            "{dtype} {combine:?}: {:?}",
            plan.host_ops()
        );
        let pattern: [i64; 12] = [2, 5, 2, -1, 9, 0, 2, -7, 3, 2, 5, 6];
        let rows_of = (0..b0 * b1).map(|j| pattern[j % 12] * (1 + (j / 12) as i64) % 50);
        let indices = match index {
            DType::I32 => Elements::I32(rows_of.map(|r| r as i32).collect()),
            _ => Elements::I64(rows_of.collect()),
        };
        let numbers = |count: usize, seed: usize| -> Elements {
            let v = (0..count).map(move |j| ((j * 37 + seed * 11) % 23) as f64 / 3.0 - 3.5);
            match dtype {
                DType::F32 => Elements::F32(v.map(|x| x as f32).collect()),
                DType::F64 => Elements::F64(v.collect()),
                DType::I32 => Elements::I32(v.map(|x| (x * 3.0) as i32).collect()),
                _ => Elements::I64(v.map(|x| (x * 3.0) as i64).collect()),
            }
        };
        let args = vec![
            Array::new([rows, n], numbers(rows * n, 1)).unwrap(),
            Array::new([b0, b1], indices).unwrap(),
            Array::new([b0, b1, n], numbers(b0 * b1 * n, 2)).unwrap(),
        ];
        let emulator = Emulator::default();
        let program = GpuProgram::compile(&func, &emulator, options).unwrap();
        let got = program.run(&args).unwrap();
        let want = ferrax::runtime::interpret(&func, &args).unwrap();
        let case = format!("{dtype} {combine:?} by {index}, {b0}x{b1} updates");
        if dtype.is_float() && entry == atomic {
            // Each sum of at most a few dozen terms of magnitude below 4, in another order.
            let (g, w) = (got[0].to_f64_vec(), want[0].to_f64_vec());
            for (g, w) in g.iter().zip(&w) {
                assert!((g - w).abs() <= 1e-4, "{case}: {g} against {w}");
            }
        } else {
            assert_eq!(got, want, "{case}");
        }
        assert!(
            emulator.launched().iter().any(|l| l.ends_with(entry)),
            "{case}: {:?}",
            emulator.launched()
        );
    }
}

/// A scatter into a splat constant (the zeros an embedding's gradient starts from) reads one
/// element of it for all, on both paths: sorted for f32 sums, atomic for i32 ones, as the
/// interpreter computes them, with repeated and out-of-range rows.
#[test]
fn row_scatters_into_a_splat_read_one_element_of_it() {
    use ferrax::ir::{FuncBuilder, Literal, Op, Scalar, Scatter, ScatterCombine};
    for (value, entry) in [(Scalar::F32(1.5), "_apply"), (Scalar::I32(-2), "_combine")] {
        let dtype = value.dtype();
        let mut b = FuncBuilder::new("splat");
        let i = b.param(TensorType::new(DType::I32, [5]));
        let u = b.param(TensorType::new(dtype, [5, 4]));
        let x = b
            .push(Op::Constant(Literal::splat(value, [7, 4])), &[])
            .unwrap();
        let scatter = Scatter {
            combine: ScatterCombine::Add,
            update_window_dims: vec![1],
            inserted_window_dims: vec![0],
            input_batching_dims: vec![],
            scatter_indices_batching_dims: vec![],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
            indices_are_sorted: false,
            unique_indices: false,
        };
        let y = b.push(Op::Scatter(Box::new(scatter)), &[x, i, u]).unwrap();
        let func = b.finish(vec![y]);
        let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        assert!(
            matches!(&plan.scatters[..], [ferrax::compiler::backend::ptx::Scatters::Rows(k)] if k.splat_operand),
            "{dtype}"
        );
        let updates = match dtype {
            DType::F32 => Elements::F32((0..20).map(|j| j as f32 * 0.25 - 2.0).collect()),
            _ => Elements::I32((0..20).map(|j| j * 3 - 30).collect()),
        };
        let args = vec![
            Array::new([5], Elements::I32(vec![3, 0, 3, 9, -1])).unwrap(),
            Array::new([5, 4], updates).unwrap(),
        ];
        let emulator = Emulator::default();
        let program = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
        let got = program.run(&args).unwrap();
        assert_eq!(
            got,
            ferrax::runtime::interpret(&func, &args).unwrap(),
            "{dtype}"
        );
        assert!(
            emulator.launched().iter().any(|l| l.ends_with(entry)),
            "{dtype}"
        );
    }
}

/// Scatters that are not row scatters (columns, batching dimensions as in the gradient of
/// `take_along_axis`, index vectors of two entries) run on the emulated GPU as the keys, rank
/// and apply entries, with repeated and out-of-range indices, bit for bit as the interpreter.
#[test]
fn element_scatters_run_on_the_emulated_gpu_as_the_interpreter() {
    use ferrax::ir::{FuncBuilder, Op, Scatter, ScatterCombine};
    let columns = Scatter {
        combine: ScatterCombine::Add,
        update_window_dims: vec![0],
        inserted_window_dims: vec![1],
        input_batching_dims: vec![],
        scatter_indices_batching_dims: vec![],
        scatter_dims_to_operand_dims: vec![1],
        index_vector_dim: 1,
        indices_are_sorted: false,
        unique_indices: false,
    };
    let batched = Scatter {
        combine: ScatterCombine::Replace,
        update_window_dims: vec![],
        inserted_window_dims: vec![1],
        input_batching_dims: vec![0],
        scatter_indices_batching_dims: vec![0],
        scatter_dims_to_operand_dims: vec![1],
        index_vector_dim: 2,
        indices_are_sorted: false,
        unique_indices: false,
    };
    let pairs = Scatter {
        combine: ScatterCombine::Mul,
        update_window_dims: vec![],
        inserted_window_dims: vec![0, 1],
        input_batching_dims: vec![],
        scatter_indices_batching_dims: vec![],
        scatter_dims_to_operand_dims: vec![0, 1],
        index_vector_dim: 1,
        indices_are_sorted: false,
        unique_indices: false,
    };
    // Name, dimension numbers, operand, indices and updates dimensions, index values.
    type Case = (
        &'static str,
        Scatter,
        [usize; 2],
        Vec<usize>,
        Vec<usize>,
        Vec<i32>,
    );
    let cases: [Case; 3] = [
        (
            "columns",
            columns,
            [4, 6],
            vec![5],
            vec![4, 5],
            vec![2, 0, 2, 9, -1],
        ),
        (
            "batched",
            batched,
            [3, 5],
            vec![3, 2],
            vec![3, 2],
            vec![4, 4, 0, 7, 1, 1],
        ),
        (
            "pairs",
            pairs,
            [3, 4],
            vec![5, 2],
            vec![5],
            vec![1, 2, 0, 3, 1, 2, 3, 0, 1, 2],
        ),
    ];
    for (name, s, x_dims, i_dims, u_dims, idx) in cases {
        let mut b = FuncBuilder::new("scatter");
        let x = b.param(TensorType::new(DType::F32, x_dims));
        let i = b.param(TensorType::new(DType::I32, i_dims.clone()));
        let u = b.param(TensorType::new(DType::F32, u_dims.clone()));
        let y = b.push(Op::Scatter(Box::new(s)), &[x, i, u]).unwrap();
        let func = b.finish(vec![y]);
        let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        assert!(plan.host_ops().is_empty(), "{name}: {:?}", plan.host_ops());
        let n: usize = u_dims.iter().product();
        let m = x_dims[0] * x_dims[1];
        let args = vec![
            Array::new(
                x_dims,
                Elements::F32((0..m).map(|j| (j % 7) as f32 * 0.75 - 2.0).collect()),
            )
            .unwrap(),
            Array::new(i_dims, Elements::I32(idx)).unwrap(),
            Array::new(
                u_dims,
                Elements::F32((0..n).map(|j| (j % 5) as f32 * 1.25 - 1.0).collect()),
            )
            .unwrap(),
        ];
        let emulator = Emulator::default();
        let program = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
        let got = program.run(&args).unwrap();
        let want = ferrax::runtime::interpret(&func, &args).unwrap();
        assert_eq!(got, want, "{name}");
        assert!(
            emulator.launched().iter().any(|l| l.ends_with("_keys")),
            "{name}: {:?}",
            emulator.launched()
        );
    }
}

/// The GPU memory plan counts buffers: a reshape is a view of its operand's, which stays
/// live until the last use of either. Here the product `y` is a result as `[4096]` and read
/// again by a second product, so at the peak `w`, `y` and the second product are live, three
/// 16 KiB arrays, and the view adds nothing.
#[test]
fn the_gpu_memory_plan_counts_a_view_with_its_operand() {
    let func = trace(
        |(x, w): (Tensor, Tensor)| {
            let y = x.matmul(&w);
            (y.reshape([4096]), y.matmul(&w))
        },
        &(
            Tensor::spec(DType::F32, [64, 64]),
            Tensor::spec(DType::F32, [64, 64]),
        ),
    )
    .unwrap();
    let plan = plan_of(&func);
    let array = 64 * 64 * 4;
    assert_eq!(plan.memory.inputs, 2 * array);
    assert_eq!(plan.memory.peak, 3 * array, "{:?}", plan.memory);
    assert_eq!(plan.memory.unplanned, 4 * array, "{:?}", plan.memory);
}

/// The attention kernels (flash attention's forward and backward passes) of GPT-2's heads (64
/// features, causal; with w10's bf16 products too, forward on the tensor cores) and smaller
/// ones, the forward ones writing the output, the log-sum-exps or both: two forward kernels'
/// PTX (one on the tensor cores) as snapshotted, and every one
/// assembled by `ptxas` for sm_80 and sm_90, with accurate and fast math, without a register
/// spilled.
#[test]
fn attention_kernels_assemble_with_ptxas_without_spills() {
    use ferrax::compiler::backend::ptx::attention::{render_attention, AttentionKernel};
    use ferrax::compiler::backend::ptx::attention_grad::{
        render_attention_grad, AttentionGradKernel,
    };
    use ferrax::compiler::backend::ptx::module_text;
    use ferrax::ir::AttentionPart;
    let kernel =
        |name: &str, (features, causal): (usize, bool), (out, lse): (bool, bool)| AttentionKernel {
            name: name.into(),
            batch: 8,
            queries: 1024,
            keys: 1024,
            heads: 12,
            features,
            causal,
            precision: None,
            operands: DType::F32,
            out,
            lse,
        };
    // w10's: bf16 products of bf16 operands.
    let w10 = AttentionKernel {
        precision: Some(DType::BF16),
        operands: DType::BF16,
        ..kernel("gpt2_bf16", (64, true), (true, true))
    };
    let kernels = [
        w10,
        kernel("gpt2", (64, true), (true, true)),
        kernel("gpt2_out", (64, true), (true, false)),
        kernel("plain_lse", (32, false), (false, true)),
        kernel("small", (8, true), (true, true)),
        AttentionKernel {
            precision: Some(DType::BF16),
            ..kernel("small_bf16", (16, true), (true, true))
        },
        AttentionKernel {
            precision: Some(DType::BF16),
            operands: DType::BF16,
            ..kernel("small_bf16_operands", (16, true), (true, true))
        },
        AttentionKernel {
            precision: Some(DType::F16),
            operands: DType::F16,
            ..kernel("small_f16_operands", (8, true), (true, true))
        },
    ];
    let mut grads = Vec::new();
    for part in [
        AttentionPart::QueryGrad,
        AttentionPart::KeyGrad,
        AttentionPart::ValueGrad,
    ] {
        for (features, causal, precision, operands) in [
            (64, true, Some(DType::BF16), DType::BF16),
            (64, true, Some(DType::BF16), DType::F32),
            (32, false, Some(DType::BF16), DType::F32),
            (64, true, None, DType::F32),
            (16, false, None, DType::F32),
            (24, true, Some(DType::F16), DType::F16),
        ] {
            grads.push(AttentionGradKernel {
                name: format!(
                    "grad_{part:?}_{features}_{causal}_{}_{operands}",
                    precision.map_or("f32", |h| h.name())
                ),
                batch: 8,
                queries: 1024,
                keys: 1024,
                heads: 12,
                features,
                causal,
                precision,
                operands,
                part,
                values_too: false,
            });
        }
    }
    // w10's keys' and values' gradients in one kernel.
    grads.push(AttentionGradKernel {
        name: "grad_keys_and_values".into(),
        batch: 8,
        queries: 1024,
        keys: 1024,
        heads: 12,
        features: 64,
        causal: true,
        precision: Some(DType::BF16),
        operands: DType::BF16,
        part: AttentionPart::KeyGrad,
        values_too: true,
    });
    insta::assert_snapshot!(
        "attention_small_kernel",
        render_attention(&kernels[4], MathMode::Accurate).unwrap()
    );
    // bf16 products over 16 features: the tensor-core kernel.
    insta::assert_snapshot!(
        "attention_small_tensor_core_kernel",
        render_attention(&kernels[5], MathMode::Accurate).unwrap()
    );
    // The same with bf16 operands, loaded as they are.
    insta::assert_snapshot!(
        "attention_small_tensor_core_kernel_bf16_operands",
        render_attention(&kernels[6], MathMode::Accurate).unwrap()
    );
    let Some(ptxas) = ptxas() else {
        assert!(
            std::env::var_os("FERRAX_REQUIRE_PTXAS").is_none(),
            "FERRAX_REQUIRE_PTXAS is set but no ptxas was found"
        );
        eprintln!("skipped: no ptxas (set FERRAX_PTXAS or put it on PATH)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("ferrax-attention-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for target in PtxTarget::ALL {
        for mode in [MathMode::Accurate, MathMode::Fast] {
            let mut pieces: Vec<(String, usize)> = kernels
                .iter()
                .map(|k| (render_attention(k, mode).unwrap(), 1))
                .collect();
            pieces.extend(
                grads
                    .iter()
                    .map(|k| (render_attention_grad(k, mode).unwrap(), 1)),
            );
            let file = dir.join(format!("attention_{}_{mode:?}.ptx", target.arch()));
            std::fs::write(&file, module_text(target, &pieces)).unwrap();
            let out = Command::new(&ptxas)
                .arg(format!("-arch={}", target.arch()))
                .arg("-v")
                .arg(&file)
                .arg("-o")
                .arg(dir.join("attention.cubin"))
                .output()
                .unwrap();
            let report = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success(),
                "ptxas {} {mode:?}: {report}",
                target.arch()
            );
            let spills: Vec<&str> = report.lines().filter(|l| l.contains("spill")).collect();
            assert_eq!(spills.len(), kernels.len() + grads.len(), "{report}");
            for line in spills {
                assert!(
                    line.contains(" 0 bytes spill stores, 0 bytes spill loads"),
                    "{} {mode:?}: registers spilled: {line}",
                    target.arch()
                );
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Modules assembled at once (one `ptxas` process each, as many as the host has cores) come
/// back in their order, each its own module's; an assembler that fails is an error.
#[test]
fn modules_assemble_at_once_in_their_order() {
    use ferrax::compiler::backend::ptx::assemble::assemble_all;
    let dir = std::env::temp_dir().join(format!("ferrax-assemble-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = dir.join("ptxas");
    let script = |path: &std::path::Path, text: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    // `ptxas -arch=sm_XX -o OUT IN`: OUT is the architecture and IN's text.
    script(
        &fake,
        "#!/bin/sh\n{ printf 'CUBIN %s\\n' \"$1\"; cat \"$4\"; } > \"$3\"\n",
    );
    let modules: Vec<String> = (0..9).map(|i| format!("// module {i}\n")).collect();
    let texts: Vec<&str> = modules.iter().map(String::as_str).collect();
    let cubins = assemble_all(&fake, &texts, PtxTarget::Sm90).unwrap();
    assert_eq!(cubins.len(), modules.len());
    for (i, cubin) in cubins.iter().enumerate() {
        let want = format!("CUBIN -arch=sm_90\n// module {i}\n");
        assert_eq!(String::from_utf8_lossy(cubin), want, "module {i}");
    }
    let failing = dir.join("failing");
    script(&failing, "#!/bin/sh\necho 'no such target' >&2\nexit 1\n");
    let refused = assemble_all(&failing, &texts, PtxTarget::Sm90).unwrap_err();
    assert!(refused.to_string().contains("no such target"), "{refused}");
    std::fs::remove_dir_all(&dir).ok();
}
