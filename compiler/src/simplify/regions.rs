//! Large programs are simplified in bounded regions: consecutive runs of at most
//! [`Limits::region`](super::Limits) instructions, each its own e-graph whose inputs are the
//! values it reads from before it and whose outputs are the values read after it. The work of
//! equality saturation grows faster than the e-graph, so bounded regions keep the whole pass
//! linear in program size; what is lost is rewriting across a region's border. Splat
//! constants are copied into each region that reads them, so that folding and the algebra of
//! constants see them.

use ferrax_ir::{Func, FuncBuilder, Op, ValueId};
use std::collections::{HashMap, HashSet};

/// One region: a program of its own, and how its values map to the whole program's.
pub struct Region {
    pub func: Func,
    /// The whole program's value for each of the region's parameters.
    pub inputs: Vec<ValueId>,
    /// The whole program's value for each of the region's outputs.
    pub outputs: Vec<ValueId>,
}

/// `func`'s body cut into regions of at most `size` instructions, in program order.
pub fn regions(func: &Func, size: usize) -> Vec<Region> {
    let params = func.params.len();
    let n = func.body.len();
    // The last instruction reading each value; past the end for the program's outputs.
    let mut last_read = vec![0usize; params + n];
    for (i, ins) in func.body.iter().enumerate() {
        for a in &ins.args {
            last_read[a.index()] = last_read[a.index()].max(i);
        }
    }
    for o in &func.outputs {
        last_read[o.index()] = n;
    }
    let splat = |v: ValueId| {
        v.index()
            .checked_sub(params)
            .and_then(|i| match &func.body[i].op {
                Op::Constant(lit) if lit.is_splat() => Some(i),
                _ => None,
            })
    };
    let size = size.max(1);
    let mut out = Vec::with_capacity(n.div_ceil(size));
    for start in (0..n).step_by(size) {
        let end = (start + size).min(n);
        let defined_before = |v: ValueId| v.index() < params + start;
        let mut inputs: Vec<ValueId> = Vec::new();
        let mut copied: Vec<usize> = Vec::new();
        let mut seen = HashSet::new();
        for ins in &func.body[start..end] {
            for &a in ins.args.iter().filter(|&&a| defined_before(a)) {
                if seen.insert(a) {
                    match splat(a) {
                        Some(i) => copied.push(i),
                        None => inputs.push(a),
                    }
                }
            }
        }
        let mut b = FuncBuilder::new(format!("{}.region{}", func.name, out.len()));
        let mut local = HashMap::new();
        for &v in &inputs {
            let ty = func.value_type(v).cloned();
            if let Some(ty) = ty {
                local.insert(v, b.param(ty));
            }
        }
        let push = |b: &mut FuncBuilder, i: usize, local: &mut HashMap<ValueId, ValueId>| {
            let ins = &func.body[i];
            let args: Option<Vec<ValueId>> =
                ins.args.iter().map(|a| local.get(a).copied()).collect();
            if let Some(v) = args.and_then(|args| b.push(ins.op.clone(), &args).ok()) {
                local.insert(value(params + i), v);
            }
        };
        for i in copied {
            push(&mut b, i, &mut local);
        }
        for i in start..end {
            push(&mut b, i, &mut local);
        }
        let outputs: Vec<ValueId> = (params + start..params + end)
            .filter(|&v| last_read[v] >= end)
            .map(value)
            .collect();
        let region_outputs = outputs
            .iter()
            .filter_map(|v| local.get(v).copied())
            .collect();
        out.push(Region {
            func: b.finish(region_outputs),
            inputs,
            outputs,
        });
    }
    out
}

/// The value numbered `index` (values are numbered parameters first, in 32 bits, so every
/// index of a built program fits).
fn value(index: usize) -> ValueId {
    ValueId(index as u32)
}
