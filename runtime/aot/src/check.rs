//! A plan's well-formedness: its parts agree with one another and with its program, so that
//! a run of any plan that passes (made by the compiler or read from a file) reads and writes
//! only inside its buffers. Checked when an executable is made.

use crate::error::ArtifactError;
use crate::gemm::Gemm;
use crate::kernel::{Access, KernelLaunch, Role};
use crate::memory::StepValues;
use crate::plan::{step_values, ExecStep, RunPlan};
use crate::rounding::Rounding;
use ferrax_ir::{verify, DType, Func, Op, TensorType, ValueId};

/// Whether `plan` is well formed: the program verifies, every step names an instruction or
/// kernel that exists, every kernel has code (one of `entries`) and buffers the sizes of the
/// values they hold for the elements it runs over, every product the sizes of its operands,
/// and every value is made before it is read.
pub(crate) fn check_plan(plan: &RunPlan, entries: usize) -> Result<(), ArtifactError> {
    let malformed = |what: &str| Err(ArtifactError::Malformed(what.to_string()));
    verify(&plan.func).map_err(|e| ArtifactError::Malformed(format!("its program: {e}")))?;
    let func = &plan.func;
    let values = func.num_values();
    for step in &plan.steps {
        let fits = match step {
            ExecStep::Kernel(k) => *k < plan.kernels.len(),
            ExecStep::Gemm(i, _, _, Some(r)) => *i < func.body.len() && r.output.index() < values,
            ExecStep::Gemm(i, ..)
            | ExecStep::Gather(i, _)
            | ExecStep::Scatter(i, _)
            | ExecStep::Op(i) => *i < func.body.len(),
            ExecStep::Call(members) => {
                !members.is_empty() && members.iter().all(|i| *i < func.body.len())
            }
        };
        if !fits {
            return malformed("a step names an instruction or kernel it lacks");
        }
    }
    if entries != plan.kernels.len() {
        return malformed("its kernels do not match its code");
    }
    for k in &plan.kernels {
        kernel_fits(func, k)
            .map_err(|what| ArtifactError::Malformed(format!("kernel {}: {what}", k.name)))?;
    }
    for step in &plan.steps {
        let fits = match step {
            ExecStep::Gemm(i, g, _, rounding) => gemm_fits(func, *i, g, rounding.as_ref()),
            // The indexing step runs the instruction's own dimension numbers.
            ExecStep::Gather(i, g) => {
                matches!(func.body.get(*i).map(|ins| &ins.op), Some(Op::Gather(op)) if **op == *g)
            }
            ExecStep::Scatter(i, sc) => {
                matches!(func.body.get(*i).map(|ins| &ins.op), Some(Op::Scatter(op)) if **op == *sc)
            }
            // One call's instructions: the same call of the same operands, one per result.
            ExecStep::Call(members) => members.first().is_some_and(|&first| {
                let call = &func.body[first];
                members.iter().all(|&j| {
                    let ins = &func.body[j];
                    ins.args == call.args && ins.op.same_call(&call.op)
                })
            }),
            ExecStep::Kernel(_) | ExecStep::Op(_) => true,
        };
        if !fits {
            return malformed("a step does not match the instruction it runs");
        }
    }
    if plan.frees.len() != plan.steps.len()
        || plan.frees.iter().flatten().any(|v| v.index() >= values)
    {
        return malformed("its memory plan does not match its steps");
    }
    // Every value a step reads, and every output, is defined before it is needed.
    let mut defined = vec![false; values];
    defined[..func.params.len()].fill(true);
    for step in &plan.steps {
        let StepValues { reads, writes } = step_values(func, &plan.kernels, step);
        if reads
            .iter()
            .any(|v| !defined.get(v.index()).copied().unwrap_or(false))
        {
            return malformed("a step reads a value no earlier step makes");
        }
        for v in writes {
            if let Some(d) = defined.get_mut(v.index()) {
                *d = true;
            }
        }
    }
    if func
        .outputs
        .iter()
        .any(|v| !defined.get(v.index()).copied().unwrap_or(false))
    {
        return malformed("an output no step makes");
    }
    Ok(())
}

/// The number of elements of value `v`, if it is one of `func`'s.
fn numel(func: &Func, v: ValueId) -> Option<usize> {
    func.value_type(v).map(TensorType::numel)
}

/// Whether every buffer of `k` holds a value of `func` of the size its access reads (or writes)
/// over `k.len` elements (and, for a row kernel, its rows), so that the kernel's loads and
/// stores stay inside its buffers; else what does not fit.
fn kernel_fits(func: &Func, k: &KernelLaunch) -> Result<(), String> {
    match k.rows {
        Some((rows, cols)) if rows.checked_mul(cols) != Some(k.len) => {
            return Err(format!(
                "{rows} rows of {cols} are not its {} elements",
                k.len
            ));
        }
        None if k.step == 0 => return Err("its parts have no step".into()),
        Some(_) | None => {}
    }
    // A flat kernel over no elements, or a row kernel over no rows, reads and writes nothing.
    let runs = k.len > 0 || k.rows.is_some_and(|(rows, _)| rows > 0);
    let buffers = &k.sig.buffers;
    for (at, b) in buffers.iter().enumerate() {
        let ty = func.value_type(b.value);
        let n = ty.map_or(0, TensorType::numel);
        let dtype_fits = ty.is_some_and(|t| t.dtype == b.dtype);
        let fits = match (b.role, b.access) {
            // A thread's own row (a row kernel's), of no program value's size.
            (Role::Scratch, _) => k.rows.is_some(),
            (Role::Partial(_), Access::Inner(cols)) => {
                dtype_fits && n == cols && k.len.is_multiple_of(cols.max(1))
            }
            (Role::Partial(_), _) => false,
            (Role::Input | Role::Output, _) if !runs => dtype_fits,
            (Role::Input | Role::Output, access) => {
                dtype_fits
                    && match access {
                        Access::Each => n == k.len,
                        Access::Scalar => n >= 1,
                        // A row kernel's per-row values: one per row.
                        Access::Outer(m) => match k.rows {
                            Some((rows, cols)) if m == cols => n == rows,
                            Some(_) | None => m > 0 && k.len.is_multiple_of(m) && n == k.len / m,
                        },
                        Access::Inner(m) => n == m && (m > 0 || k.len == 0),
                        Access::Gather {
                            index,
                            n: width,
                            rows,
                        } => {
                            let index_fits = buffers.get(index).is_some_and(|i| {
                                i.access == Access::Outer(width) && i.role == Role::Input
                            });
                            index_fits
                                && width > 0
                                && rows > 0
                                && rows.checked_mul(width) == Some(n)
                        }
                        // The GPU's alone: CPU kernels store no windows.
                        Access::Window { .. } => false,
                    }
            }
        };
        if !fits {
            return Err(format!(
                "buffer {at} ({:?} {:?} {}) does not fit value %{} ({})",
                b.role,
                b.access,
                b.dtype,
                b.value.0,
                ty.map_or("none".to_string(), ToString::to_string)
            ));
        }
    }
    Ok(())
}

/// Whether product step `g` of instruction `i` multiplies operands of its sizes into a result
/// of its size (and its rounding, if any, defines a value of that size).
fn gemm_fits(func: &Func, i: usize, g: &Gemm, rounding: Option<&Rounding>) -> bool {
    let Some(ins) = func.body.get(i) else {
        return false;
    };
    let size = |a: usize, b: usize| g.batch.checked_mul(a).and_then(|x| x.checked_mul(b));
    let operand = |k: usize| ins.args.get(k).and_then(|&v| numel(func, v));
    let result = size(g.m, g.n);
    // A rounding defines a value of the product's shape, of the type it rounds to (or f32).
    let rounded = |r: &Rounding| {
        let dtype = if r.widened { DType::F32 } else { r.dtype };
        func.value_type(r.output) == Some(&TensorType::new(dtype, ins.ty.shape.clone()))
    };
    matches!(ins.op, Op::DotGeneral(_))
        && operand(0).is_some()
        && operand(0) == size(g.m, g.k)
        && operand(1).is_some()
        && operand(1) == size(g.k, g.n)
        && result == Some(ins.ty.numel())
        && rounding.is_none_or(rounded)
}
