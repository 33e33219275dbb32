//! Writing a kernel's results over its inputs: a flat kernel whose output has the dtype and
//! length of an input it reads for the last time, once and element by element, writes the
//! output into that input's buffer (a donated parameter's update lands in the parameter's own
//! buffer), so a step needs no fresh memory for it.

use crate::kernel::{Access, Buffer, KernelLaunch, Role};
use crate::plan::ExecStep;
use ferrax_ir::{Elements, Func, TensorType, ValueId};
use ferrax_runtime::Array;

/// Per step, the inputs whose buffers its kernel's results are written over ([`in_place`]).
pub fn reused(
    func: &Func,
    steps: &[ExecStep],
    kernels: &[KernelLaunch],
    frees: &[Vec<ValueId>],
) -> Vec<Vec<ValueId>> {
    steps
        .iter()
        .zip(frees)
        .map(|(step, frees)| match *step {
            ExecStep::Kernel(k) => in_place(func, &kernels[k], frees)
                .into_iter()
                .flatten()
                .collect(),
            ExecStep::Op(_)
            | ExecStep::Gemm(..)
            | ExecStep::Gather(..)
            | ExecStep::Scatter(..)
            | ExecStep::Call(_) => Vec::new(),
        })
        .collect()
}

/// Per output buffer of flat `kernel` (in order), an input it may be written over: one that
/// step's `frees` let go of, of the same dtype and length, that the kernel loads once and
/// element by element (a flat kernel loads every element before it stores any at that
/// index). Each output takes, where it can, the nearest input it is computed from, a program
/// input first, so that a donated parameter's update lands in the parameter's own buffer; an
/// output computed from none of them takes what is left after every output has had its turn.
pub(crate) fn in_place(
    func: &Func,
    kernel: &KernelLaunch,
    frees: &[ValueId],
) -> Vec<Option<ValueId>> {
    let buffers = &kernel.sig.buffers;
    if kernel.rows.is_some() {
        return vec![None; buffers.iter().filter(|b| b.role == Role::Output).count()];
    }
    let numel = |v: ValueId| func.value_type(v).map(TensorType::numel);
    let mut free: Vec<ValueId> = buffers
        .iter()
        .filter(|b| {
            b.role == Role::Input
                && b.access == Access::Each
                && frees.contains(&b.value)
                && buffers.iter().filter(|c| c.value == b.value).count() == 1
        })
        .map(|b| b.value)
        .collect();
    let params = func.params.len();
    let input = |v: &ValueId| v.index() < params;
    let outputs: Vec<&Buffer> = buffers.iter().filter(|b| b.role == Role::Output).collect();
    let fits = |out: &Buffer, v: &ValueId| {
        func.value_type(*v).map(|t| t.dtype) == Some(out.dtype) && numel(*v) == numel(out.value)
    };
    // Each output's operands breadth first, a few levels deep.
    let near = |out: &Buffer| {
        let mut near = vec![out.value];
        let mut level = 0;
        for _ in 0..4 {
            let next: Vec<ValueId> = near[level..]
                .iter()
                .filter_map(|v| v.index().checked_sub(params))
                .flat_map(|i| func.body[i].args.iter().copied())
                .collect();
            level = near.len();
            near.extend(next);
        }
        near
    };
    // First every output takes an input it is computed from (a program input first), so that
    // an output computed from none cannot take a parameter another output updates; then the
    // rest take what is left.
    let mut picks: Vec<Option<ValueId>> = vec![None; outputs.len()];
    for (pick, out) in picks.iter_mut().zip(&outputs) {
        let near = near(out);
        let own = near
            .iter()
            .filter(|v| input(v))
            .chain(&near)
            .copied()
            .find(|v| free.contains(v) && fits(out, v));
        if let Some(v) = own {
            free.retain(|&f| f != v);
            *pick = Some(v);
        }
    }
    for (pick, out) in picks.iter_mut().zip(&outputs) {
        if pick.is_some() {
            continue;
        }
        let left = free
            .iter()
            .filter(|v| input(v))
            .chain(&free)
            .copied()
            .find(|v| fits(out, v));
        if let Some(v) = left {
            free.retain(|&f| f != v);
            *pick = Some(v);
        }
    }
    picks
}

/// The buffer of value `v`, taken out of the run where nothing else holds it.
pub(crate) fn take_unique(values: &mut [Option<Array>], v: ValueId) -> Option<Elements> {
    match values[v.index()].take()?.into_elements() {
        Ok(e) => Some(e),
        Err(a) => {
            values[v.index()] = Some(a);
            None
        }
    }
}
