//! A GPU plan's well-formedness: every step names an instruction, launch, copy or region that
//! exists and fits it, and every value a launch or release names is one of the program's, so
//! that a run of any plan that passes (made by the compiler or read from a file) indexes only
//! what is there. The PTX and the launches' shapes are trusted as code is (docs/guarantees.md).

use super::plan::{CallKind, GpuRunPlan, GpuStep, Param, ScatterLaunches, ScatterSpec};
use crate::error::ArtifactError;
use crate::gemm::Gemm;
use ferrax_ir::{verify, AttentionPart, Func, Op, TensorType, ValueId};

/// Whether `plan` and the plans of its regions (and theirs) are well formed.
pub(crate) fn check_gpu_plan(plan: &GpuRunPlan) -> Result<(), ArtifactError> {
    let mut work = vec![plan];
    while let Some(plan) = work.pop() {
        check_one(plan).map_err(|what| {
            ArtifactError::Malformed(format!("its GPU plan of `{}`: {what}", plan.func.name))
        })?;
        work.extend(plan.calls.iter().flat_map(|c| &c.regions));
    }
    Ok(())
}

/// `plan` alone (its regions' plans are checked on their own), or what is wrong with it.
fn check_one(plan: &GpuRunPlan) -> Result<(), String> {
    verify(&plan.func).map_err(|e| format!("its program: {e}"))?;
    let func = &plan.func;
    let values = func.num_values();
    let value = |v: &ValueId| v.index() < values;
    for step in &plan.steps {
        if !step_fits(plan, step) {
            return Err(format!("step {step:?} does not fit its program"));
        }
    }
    for launch in &plan.launches {
        let fits = whole_warps(launch.block)
            && launch.params.iter().all(|p| match p {
                Param::Input(v, ty) | Param::Output(v, ty) => func.value_type(*v) == Some(ty),
                Param::Partial {
                    value,
                    partials,
                    totals,
                } => partials_fit(plan, *value, partials, totals),
            });
        if !fits {
            return Err(format!(
                "launch {} binds a value it was not compiled for",
                launch.name
            ));
        }
    }
    if plan.releases.len() != plan.steps.len() || !plan.releases.iter().flatten().all(value) {
        return Err("its memory plan does not match its steps".into());
    }
    let entries = plan
        .modules
        .iter()
        .try_fold(0usize, |total, (_, n)| total.checked_add(*n));
    if entries != Some(plan.defined_entries().len()) {
        return Err("its modules do not define its entries".into());
    }
    for s in &plan.scatters {
        let wanted = match s.launches {
            ScatterLaunches::Atomic { .. } => 2,
            ScatterLaunches::Sorted { rank_block, .. } if whole_warps(rank_block) => 3,
            ScatterLaunches::Sorted { .. } => {
                return Err("a scatter ranks in blocks of part of a warp".into())
            }
            ScatterLaunches::Elements { .. } => 3,
        };
        if s.entries.len() != wanted {
            return Err("a scatter's entries do not match its launches".into());
        }
    }
    // Reductions keep a partial per thread of a block of at most 256 in shared memory.
    if plan
        .reduce_launches
        .iter()
        .any(|r| !whole_warps(r.block) || r.block > 256)
    {
        return Err("a reduction launches blocks other than whole warps of at most 256".into());
    }
    Ok(())
}

/// Whether `totals` fold `partials` into column reduction `value`: a reduction's result,
/// each fold a reduction launch alone that reads the buffer before it and writes its own
/// type, the last `value`'s.
fn partials_fit(
    plan: &GpuRunPlan,
    value: ValueId,
    partials: &TensorType,
    totals: &[(usize, TensorType)],
) -> bool {
    let func = &plan.func;
    let reduction = value
        .index()
        .checked_sub(func.params.len())
        .and_then(|i| func.body.get(i))
        .is_some_and(|ins| matches!(ins.op, Op::Reduce { .. }));
    let mut read = partials;
    for (l, written) in totals {
        let fits = plan
            .reduce_launches
            .get(*l)
            .is_some_and(|r| r.alone && r.parts == [(read.clone(), written.clone())]);
        if !fits {
            return false;
        }
        read = written;
    }
    reduction && !totals.is_empty() && func.value_type(value) == Some(read)
}

/// Whether a block of `threads` is whole warps, as every kernel's warp shuffles assume, and
/// at most CUDA's 1,024 threads. (A kernel that takes fewer than that says so in its PTX, where
/// the device refuses a larger block.)
fn whole_warps(threads: u32) -> bool {
    threads.is_multiple_of(32) && (32..=1024).contains(&threads)
}

/// Whether `step` names what `plan` has, the instruction it computes is of its kind, and every
/// launch it makes binds values of the types the launch was compiled for.
fn step_fits(plan: &GpuRunPlan, step: &GpuStep) -> bool {
    let func = &plan.func;
    let Some(index) = step_instruction(step) else {
        return match step {
            GpuStep::Launch(l) => *l < plan.launches.len(),
            GpuStep::Reduce { launch, instrs } => {
                let parts: Option<Vec<_>> = instrs.iter().map(|&i| reduce_types(func, i)).collect();
                plan.reduce_launches
                    .get(*launch)
                    .zip(parts)
                    .is_some_and(|(l, parts)| !parts.is_empty() && l.parts == parts)
            }
            GpuStep::Call { members, call } => call_fits(plan, members, *call),
            GpuStep::Attention { members, launch } => attention_fits(plan, members, *launch),
            _ => false,
        };
    };
    let Some(ins) = func.body.get(index) else {
        return false;
    };
    let operand = |k: usize| ins.args.get(k).and_then(|&v| func.value_type(v)).cloned();
    let operands: Option<Vec<TensorType>> = (0..ins.args.len()).map(operand).collect();
    let Some(operands) = operands else {
        return false;
    };
    match (step, &ins.op) {
        (
            GpuStep::Gemm {
                gemm,
                lhs_copy,
                rhs_copy,
                int,
                ..
            },
            Op::DotGeneral(_),
        ) => {
            // Each operand as the product reads it: its copy into matrix layout, or itself.
            let read = |k: usize, copy: &Option<usize>| match copy {
                // A layout copy: the operand's elements, permuted.
                Some(c) => plan
                    .copies
                    .get(*c)
                    .filter(|c| {
                        Some(&c.input) == operands.get(k)
                            && c.starts.is_empty()
                            && c.output.dtype == c.input.dtype
                            && c.output.numel() == c.input.numel()
                    })
                    .map(|c| c.output.clone()),
                None => operands.get(k).cloned(),
            };
            let (Some(lhs), Some(rhs)) = (read(0, lhs_copy), read(1, rhs_copy)) else {
                return false;
            };
            let kernel = match int {
                Some(k) => plan
                    .int_gemms
                    .get(*k)
                    .is_some_and(|g| g.types == [lhs.clone(), rhs.clone(), ins.ty.clone()]),
                None => lhs.dtype == ins.ty.dtype && rhs.dtype == ins.ty.dtype,
            };
            kernel && gemm_fits(gemm, (&lhs, &rhs), &ins.ty)
        }
        (
            GpuStep::SplitReduce {
                partial,
                total,
                partials,
                ..
            },
            Op::Reduce { .. },
        ) => {
            let launch = |l: usize| plan.reduce_launches.get(l).map(|l| l.parts.as_slice());
            let (Some(first), Some(last)) = (launch(*partial), launch(*total)) else {
                return false;
            };
            operands.len() == 1
                && first == [(operands[0].clone(), partials.clone())]
                && last == [(partials.clone(), ins.ty.clone())]
        }
        (GpuStep::Copies(_, parts), _) => parts.iter().all(|&(c, k)| {
            plan.copies.get(c).is_some_and(|copy| {
                Some(&copy.input) == operands.get(k)
                    && copy.output == ins.ty
                    && copy.starts.iter().all(|(s, t)| operands.get(*s) == Some(t))
            })
        }),
        (GpuStep::Scatter { kernels, .. }, Op::Scatter(_)) => match operands.as_slice() {
            [operand, indices, updates] => plan
                .scatters
                .get(*kernels)
                .is_some_and(|s| scatter_fits(s, (operand, indices, updates), &ins.ty)),
            _ => false,
        },
        (GpuStep::Gather { kernel, .. }, Op::Gather(_)) => {
            let mut types = operands.clone();
            types.push(ins.ty.clone());
            operands.len() == 2 && plan.gathers.get(*kernel).is_some_and(|g| g.types == types)
        }
        (GpuStep::View(_), Op::Reshape { .. }) => {
            operands.len() == 1 && operands[0].numel() == ins.ty.numel()
        }
        (GpuStep::View(_), Op::AddDependency) => operands.len() == 2 && operands[0] == ins.ty,
        (GpuStep::Constant(_), Op::Constant(_) | Op::Iota { .. }) | (GpuStep::Host(_), _) => true,
        _ => false,
    }
}

/// The one instruction a step computes, if it computes one.
fn step_instruction(step: &GpuStep) -> Option<usize> {
    match step {
        GpuStep::Gemm { index, .. }
        | GpuStep::SplitReduce { index, .. }
        | GpuStep::Scatter { index, .. }
        | GpuStep::Gather { index, .. }
        | GpuStep::Copies(index, _)
        | GpuStep::View(index)
        | GpuStep::Constant(index)
        | GpuStep::Host(index) => Some(*index),
        GpuStep::Launch(_)
        | GpuStep::Reduce { .. }
        | GpuStep::Call { .. }
        | GpuStep::Attention { .. } => None,
    }
}

/// Whether attention launch `launch` computes the attention instructions `members` (the
/// forward parts, one or two of the same operands, one gradient part, or the keys' and the
/// values' gradients of the same operands): it reads their
/// operands and writes their results, as typed in the program.
fn attention_fits(plan: &GpuRunPlan, members: &[usize], launch: usize) -> bool {
    let func = &plan.func;
    let Some(first) = members.first().and_then(|&i| func.body.get(i)) else {
        return false;
    };
    let forward = |i: usize| {
        func.body.get(i).is_some_and(|ins| {
            ins.args == first.args
                && matches!(
                    &ins.op,
                    Op::Attention(a) if matches!(a.part, AttentionPart::Output | AttentionPart::LogSumExp)
                )
        })
    };
    let mut params: Vec<Param> = Vec::with_capacity(first.args.len() + members.len());
    for &v in &first.args {
        match func.value_type(v) {
            Some(t) => params.push(Param::Input(v, t.clone())),
            None => return false,
        }
    }
    for &i in members {
        match func.body.get(i) {
            Some(ins) => params.push(Param::Output(func.instr_value(i), ins.ty.clone())),
            None => return false,
        }
    }
    let gradient = |i: usize| {
        func.body.get(i).is_some_and(|ins| {
            matches!(
                &ins.op,
                Op::Attention(a) if matches!(
                    a.part,
                    AttentionPart::QueryGrad | AttentionPart::KeyGrad | AttentionPart::ValueGrad
                )
            )
        })
    };
    // The keys' and the values' gradients of the same attention, in that order.
    let keys_and_values = |k: usize, v: usize| {
        let part = |i: usize| match func.body.get(i).map(|ins| &ins.op) {
            Some(Op::Attention(a)) => Some((a.part, a.causal, a.precision)),
            Some(_) | None => None,
        };
        let (Some((AttentionPart::KeyGrad, kc, kp)), Some((AttentionPart::ValueGrad, vc, vp))) =
            (part(k), part(v))
        else {
            return false;
        };
        (kc, kp) == (vc, vp) && func.body.get(v).is_some_and(|ins| ins.args == first.args)
    };
    let parts = match members {
        [one] => forward(*one) || gradient(*one),
        [a, b] => (forward(*a) && forward(*b)) || keys_and_values(*a, *b),
        _ => false,
    };
    parts
        && plan
            .attentions
            .get(launch)
            .is_some_and(|a| a.params == params && whole_warps(a.block))
}

/// The type reduction `i` reads and the type it writes, if it is a reduction.
fn reduce_types(func: &Func, i: usize) -> Option<(TensorType, TensorType)> {
    let ins = func.body.get(i)?;
    match (&ins.op, ins.args.as_slice()) {
        (Op::Reduce { .. }, [x]) => Some((func.value_type(*x)?.clone(), ins.ty.clone())),
        _ => None,
    }
}

/// Whether a product of `gemm`'s sizes reads operands of the sizes of `lhs` and `rhs` and
/// writes a result of the size of `result`.
fn gemm_fits(g: &Gemm, (lhs, rhs): (&TensorType, &TensorType), result: &TensorType) -> bool {
    // Each matrix's size on its own too: the executor computes them (batch strides).
    let size = |a: usize, b: usize| a.checked_mul(b).and_then(|x| x.checked_mul(g.batch));
    size(g.m, g.k) == Some(lhs.numel())
        && size(g.k, g.n) == Some(rhs.numel())
        && size(g.m, g.n) == Some(result.numel())
}

/// Whether scatter `s`'s launches and scratch fit a scatter of these operands into `result`.
fn scatter_fits(
    s: &ScatterSpec,
    (operand, indices, updates): (&TensorType, &TensorType, &TensorType),
    result: &TensorType,
) -> bool {
    let shapes = operand == result;
    match s.launches {
        ScatterLaunches::Atomic {
            len,
            update_elements,
        } => shapes && len == operand.numel() && update_elements == updates.numel(),
        ScatterLaunches::Sorted {
            updates: count,
            rows,
            len,
            ..
        } => {
            let row = operand.dims().iter().skip(1).product::<usize>();
            shapes
                && len == operand.numel()
                && operand.dims().first() == Some(&rows)
                && count == indices.numel()
                && count.checked_mul(row) == Some(updates.numel())
        }
        ScatterLaunches::Elements {
            updates: count,
            operand_len,
        } => shapes && operand_len == operand.numel() && count == updates.numel(),
    }
}

/// Whether `members` are one call's instructions (the same call of the same operands, one per
/// result) and `call` is a call of that kind whose regions' plans take and return what the
/// instruction's regions do.
fn call_fits(plan: &GpuRunPlan, members: &[usize], call: usize) -> bool {
    let func: &Func = &plan.func;
    let (Some(&first), Some(c)) = (members.first(), plan.calls.get(call)) else {
        return false;
    };
    let Some(ins) = func.body.get(first) else {
        return false;
    };
    let same = members.iter().all(|&j| {
        func.body
            .get(j)
            .is_some_and(|m| m.args == ins.args && m.op.same_call(&ins.op))
    });
    let kind = match (&ins.op, c.kind) {
        (Op::While(_), CallKind::While) | (Op::Cond(_), CallKind::Cond) => true,
        (Op::Remat(_), CallKind::Remat) => true,
        (Op::Scan(s), CallKind::Scan(shape)) => {
            s.consts == shape.consts
                && s.carry == shape.carry
                && s.length == shape.length
                && s.reverse == shape.reverse
        }
        _ => false,
    };
    let regions = ins.op.regions();
    same && kind
        && ins.op.call_result().is_some()
        && regions.len() == c.regions.len()
        && regions.iter().zip(&c.regions).all(|((_, f), p)| {
            p.func.params == f.params && p.func.output_types() == f.output_types()
        })
}
