//! Where a GPT step's GPU time should go, estimated without a GPU: each step of the planned
//! program costs the longer of its memory traffic at the device's bandwidth and its products'
//! multiply-adds at the tensor cores' rate, plus a launch. The estimate is a floor (every
//! byte moved once, every product at the rate of a large one); what it is for is finding the
//! steps that move bytes no one needs, before a GPU is at hand to profile them.
//!
//! `cargo run --release -p ferrax-bench -- gpu-traffic [w9|w10] [--top N] [--steps]`:
//! `--steps` lists the steps and each launch's parameters, `IR_OUT=file` keeps the program as
//! planned.

use crate::gpu_compile_time::plan_gpt;
use ferrax::aot_runtime::gpu::{CopySpec, GpuRunPlan, GpuStep, Param};
use ferrax::ir::{AttentionPart, Op, TensorType};
use ferrax::{DType, Result};
use std::collections::BTreeMap;

/// An H200's HBM bandwidth as large copies reach it, bytes a second.
const BANDWIDTH: f64 = 4.0e12;
/// Dense bf16 tensor-core multiply-adds a second as large products reach them (half the
/// FLOP/s).
const TENSOR_MACS: f64 = 330e12;
/// f32 FMAs a second without tensor cores.
const F32_MACS: f64 = 33e12;
/// A launch's cost inside a CUDA graph, seconds.
const LAUNCH: f64 = 2e-6;

/// One step's estimate.
struct Cost {
    kind: &'static str,
    what: String,
    bytes: f64,
    seconds: f64,
}

/// Runs with the arguments after the subcommand.
pub fn run(args: &[String]) -> Result<()> {
    let w9 = args.iter().any(|a| a == "w9");
    let top = args
        .iter()
        .position(|a| a == "--top")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(25);
    let plan = plan_gpt(w9, ferrax::PtxTarget::Sm90)?;
    let run = &plan.plan.run;
    if let Ok(path) = std::env::var("IR_OUT") {
        let _ = std::fs::write(path, run.func.to_string());
    }
    if args.iter().any(|a| a == "--steps") {
        println!("{}", run.describe_steps());
        for l in &run.launches {
            let params: Vec<String> = l
                .params
                .iter()
                .map(|p| match p {
                    Param::Input(v, t) => format!("in %{} {t}", v.0),
                    Param::Output(v, t) => format!("out %{} {t}", v.0),
                    Param::Partial {
                        value,
                        partials,
                        totals,
                    } => format!(
                        "partials {partials} of %{} in {} folds",
                        value.0,
                        totals.len()
                    ),
                })
                .collect();
            println!("{}: {}", l.name, params.join(", "));
        }
    }
    let costs = costs(run);
    let mut kinds: BTreeMap<&str, (usize, f64, f64)> = BTreeMap::new();
    for c in &costs {
        let k = kinds.entry(c.kind).or_default();
        k.0 += 1;
        k.1 += c.bytes;
        k.2 += c.seconds;
    }
    let total: f64 = costs.iter().map(|c| c.seconds).sum();
    let memory = &run.memory;
    println!(
        "estimated step: {:.2} ms; planned peak {:.2} GB (inputs {:.2} GB)",
        total * 1e3,
        memory.peak as f64 / 1e9,
        memory.inputs as f64 / 1e9
    );
    println!("| kind | steps | GB moved | ms | share |");
    println!("|---|---|---|---|---|");
    for (kind, (n, bytes, s)) in &kinds {
        println!(
            "| {kind} | {n} | {:.2} | {:.2} | {:.0}% |",
            bytes / 1e9,
            s * 1e3,
            100.0 * s / total
        );
    }
    let mut sorted: Vec<&Cost> = costs.iter().collect();
    sorted.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    println!("\nthe {top} dearest steps:");
    for c in sorted.iter().take(top) {
        println!(
            "{:8.1} us {:8.1} MB  {:10} {}",
            c.seconds * 1e6,
            c.bytes / 1e6,
            c.kind,
            c.what
        );
    }
    Ok(())
}

/// A strided copy's bytes: each element read and written once.
fn copy_bytes(c: &CopySpec) -> f64 {
    2.0 * c.len as f64 * c.input.dtype.size_bytes() as f64
}

fn bytes(t: &TensorType) -> f64 {
    t.checked_bytes().unwrap_or(0) as f64
}

/// The estimate of each step of `plan` that runs on the device.
fn costs(plan: &GpuRunPlan) -> Vec<Cost> {
    let func = &plan.func;
    let ty = |v| func.value_type(v).map_or(0.0, bytes);
    let instr_bytes = |i: usize| {
        func.body.get(i).map_or(0.0, |ins| {
            bytes(&ins.ty) + ins.args.iter().map(|&a| ty(a)).sum::<f64>()
        })
    };
    let name = |i: usize| {
        func.body.get(i).map_or_else(String::new, |ins| {
            format!(
                "%{} = {} {:?}",
                func.instr_value(i).0,
                ins.op.name(),
                ins.ty.dims()
            )
        })
    };
    let memory = |kind, what, bytes: f64, launches: usize| Cost {
        kind,
        what,
        bytes,
        seconds: bytes / BANDWIDTH + LAUNCH * launches as f64,
    };
    let mut out = Vec::new();
    for step in &plan.steps {
        let cost = match step {
            GpuStep::Launch(l) => {
                let Some(launch) = plan.launches.get(*l) else {
                    continue;
                };
                let mut moved = 0.0;
                for p in &launch.params {
                    match p {
                        Param::Input(_, t) | Param::Output(_, t) => moved += bytes(t),
                        // Each fold of a column reduction's partials reads the buffer before
                        // it and writes its own.
                        Param::Partial {
                            value,
                            partials,
                            totals,
                        } => {
                            moved += bytes(partials);
                            let mut read = bytes(partials);
                            for (_, t) in totals {
                                let what = format!("%{} folded", value.0);
                                out.push(memory("reductions", what, read + bytes(t), 1));
                                read = bytes(t);
                            }
                        }
                    }
                }
                let outputs = launch
                    .params
                    .iter()
                    .filter(|p| matches!(p, Param::Output(..) | Param::Partial { .. }))
                    .count();
                memory(
                    "kernels",
                    format!("{} ({outputs} results)", launch.name),
                    moved,
                    1,
                )
            }
            GpuStep::Gemm {
                index,
                gemm,
                lhs_copy,
                rhs_copy,
                ..
            } => {
                let macs = (gemm.batch * gemm.m * gemm.n * gemm.k) as f64;
                let half = func.body.get(*index).is_some_and(|ins| {
                    ins.args.iter().all(|&a| {
                        func.value_type(a)
                            .is_some_and(|t| matches!(t.dtype, DType::BF16 | DType::F16))
                    })
                });
                let rate = match half {
                    true => TENSOR_MACS,
                    false => F32_MACS,
                };
                let copies: f64 = [lhs_copy, rhs_copy]
                    .into_iter()
                    .flatten()
                    .filter_map(|&c| plan.copies.get(c))
                    .map(copy_bytes)
                    .sum();
                let moved = instr_bytes(*index);
                Cost {
                    kind: "products",
                    what: format!(
                        "{} [{}x{}x{}x{}]{}",
                        name(*index),
                        gemm.batch,
                        gemm.m,
                        gemm.n,
                        gemm.k,
                        if copies > 0.0 { " with copies" } else { "" }
                    ),
                    bytes: moved + copies,
                    seconds: (moved / BANDWIDTH).max(macs / rate) + copies / BANDWIDTH + LAUNCH,
                }
            }
            GpuStep::Reduce { launch, instrs } => {
                let moved = plan.reduce_launches.get(*launch).map_or(0.0, |r| {
                    r.parts.iter().map(|(i, o)| bytes(i) + bytes(o)).sum()
                });
                let what: Vec<String> = instrs.iter().map(|&i| name(i)).collect();
                memory("reductions", what.join(", "), moved, 1)
            }
            GpuStep::SplitReduce { index, .. } => {
                memory("reductions", name(*index), instr_bytes(*index), 2)
            }
            GpuStep::Copies(i, parts) => {
                let moved = parts
                    .iter()
                    .filter_map(|&(c, _)| plan.copies.get(c))
                    .map(copy_bytes)
                    .sum();
                memory("copies", name(*i), moved, parts.len())
            }
            GpuStep::Scatter { index, .. } => {
                memory("indexing", name(*index), instr_bytes(*index), 1)
            }
            // A gather reads its indices and the elements it picks, not its whole operand.
            GpuStep::Gather { index, .. } => {
                let moved = func.body.get(*index).map_or(0.0, |ins| {
                    2.0 * bytes(&ins.ty) + ins.args.get(1).map_or(0.0, |&i| ty(i))
                });
                memory("indexing", name(*index), moved, 1)
            }
            GpuStep::Attention { members, .. } => attention(func, members, &name),
            GpuStep::View(_) | GpuStep::Constant(_) | GpuStep::Host(_) | GpuStep::Call { .. } => {
                continue
            }
        };
        out.push(cost);
    }
    out
}

/// An attention launch: its operands read once and its results written once, and its score
/// products (halved when causal) at the tensor cores' rate for bf16 products, the f32 FMAs'
/// otherwise; the keys' and values' gradients in one launch share their scores.
fn attention(func: &ferrax::ir::Func, members: &[usize], name: &dyn Fn(usize) -> String) -> Cost {
    let Some(first) = members.first().and_then(|&i| func.body.get(i)) else {
        return Cost {
            kind: "attention",
            what: String::new(),
            bytes: 0.0,
            seconds: 0.0,
        };
    };
    let ty = |v| func.value_type(v).map_or(0.0, bytes);
    let results: f64 = members
        .iter()
        .filter_map(|&i| func.body.get(i))
        .map(|ins| bytes(&ins.ty))
        .sum();
    let moved = results + first.args.iter().map(|&a| ty(a)).sum::<f64>();
    let (q, k) = match (
        first.args.first().and_then(|&v| func.value_type(v)),
        first.args.get(1).and_then(|&v| func.value_type(v)),
    ) {
        (Some(q), Some(k)) => (q.clone(), k.clone()),
        _ => (first.ty.clone(), first.ty.clone()),
    };
    let (b, t, h, d) = match q.dims() {
        &[b, t, h, d] => (b, t, h, d),
        _ => (0, 0, 0, 0),
    };
    let s = k.dims().get(1).copied().unwrap_or(0);
    let (products, causal, half) = match &first.op {
        Op::Attention(a) => (
            match a.part {
                AttentionPart::Output | AttentionPart::LogSumExp => 2.0,
                AttentionPart::QueryGrad => 3.0,
                AttentionPart::KeyGrad => 4.0,
                AttentionPart::ValueGrad => 2.0,
            },
            a.causal,
            a.precision.is_some() || matches!(q.dtype, DType::BF16 | DType::F16),
        ),
        _ => (0.0, false, false),
    };
    // The values' gradient in the keys' launch: its product alone (the scores are shared).
    let pair = members.len() == 2
        && matches!(&first.op, Op::Attention(a) if a.part == AttentionPart::KeyGrad);
    let products = products + if pair { 1.0 } else { 0.0 };
    let mut macs = products * (b * h * t * s * d) as f64;
    if causal {
        macs /= 2.0;
    }
    let rate = match half {
        true => TENSOR_MACS,
        false => F32_MACS,
    };
    let what: Vec<String> = members.iter().map(|&i| name(i)).collect();
    Cost {
        kind: "attention",
        what: what.join(", "),
        bytes: moved,
        seconds: (moved / BANDWIDTH).max(macs / rate) + LAUNCH,
    }
}
