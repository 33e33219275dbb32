//! Loop-invariant work out of scan bodies: an instruction of a body that reads only the scan's
//! constants (directly or through other such instructions, not constants alone) is computed
//! once before the loop, and the values the loop still reads become more of its constants.
//! Broadcasts and reshapes stay inside (a kernel reads a broadcast in place; a reshape is a
//! view). Each instruction of a call does this alike; the e-graph then merges the copies of the
//! work outside, so they remain one call.

use crate::dce::eliminate_dead_code;
use ferrax_ir::{Func, FuncBuilder, Op, Scan, TensorType, ValueId};

/// `func` with the invariant work of each scan's body moved before the scan.
pub(super) fn hoist_scan_invariants(func: &Func) -> Func {
    if !func.body.iter().any(|ins| matches!(ins.op, Op::Scan(_))) {
        return func.clone();
    }
    let mut b = FuncBuilder::new(func.name.clone());
    let mut values: Vec<ValueId> = func.params.iter().map(|p| b.param(p.clone())).collect();
    for ins in &func.body {
        let args: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        let pushed = match &ins.op {
            Op::Scan(s) => match hoisted(&mut b, s, &args) {
                Some((op, operands)) => b.push(op, &operands),
                None => b.push(ins.op.clone(), &args),
            },
            op => b.push(op.clone(), &args),
        };
        match pushed {
            Ok(v) => values.push(v),
            Err(_) => return func.clone(),
        }
    }
    b.finish(func.outputs.iter().map(|o| values[o.index()]).collect())
}

/// Emits into `b` the invariant work of `s`'s body (its operands `args`), and returns the scan
/// that takes the values of that work it still reads as more constants, with its operands;
/// `None` where there is nothing to move.
fn hoisted(b: &mut FuncBuilder, s: &Scan, args: &[ValueId]) -> Option<(Op, Vec<ValueId>)> {
    let body = &s.body;
    let np = body.params.len();
    let n = body.num_values();
    // Per body value: whether it is the same every step, and whether it reads a constant.
    let mut invariant = vec![false; n];
    let mut reads_const = vec![false; n];
    for p in 0..s.consts.min(np) {
        (invariant[p], reads_const[p]) = (true, true);
    }
    // The instructions to move: invariant work on the constants worth doing once.
    let mut moved = vec![false; n];
    for (k, ins) in body.body.iter().enumerate() {
        let v = np + k;
        invariant[v] = ins.op.regions().is_empty() && ins.args.iter().all(|a| invariant[a.index()]);
        reads_const[v] = ins.args.iter().any(|a| reads_const[a.index()]);
        let cheap = matches!(
            ins.op,
            Op::Constant(_) | Op::Iota { .. } | Op::BroadcastInDim { .. } | Op::Reshape { .. }
        );
        moved[v] = invariant[v] && reads_const[v] && !cheap;
    }
    // The moved values the body still reads: they become constants.
    let mut passed = vec![false; n];
    for (k, ins) in body.body.iter().enumerate() {
        if !moved[np + k] {
            for a in &ins.args {
                passed[a.index()] |= moved[a.index()];
            }
        }
    }
    for o in &body.outputs {
        passed[o.index()] |= moved[o.index()];
    }
    if !passed.iter().any(|&p| p) {
        return None;
    }
    // Every invariant instruction emitted outside (the outer simplifier drops what nothing
    // reads), each body value's value there.
    let mut outside: Vec<Option<ValueId>> = (0..n)
        .map(|v| (v < s.consts).then(|| args.get(v).copied()).flatten())
        .collect();
    for (k, ins) in body.body.iter().enumerate() {
        if invariant[np + k] {
            let operands: Option<Vec<ValueId>> =
                ins.args.iter().map(|a| outside[a.index()]).collect();
            outside[np + k] = Some(b.push(ins.op.clone(), &operands?).ok()?);
        }
    }
    let passed: Vec<usize> = (0..n).filter(|&v| passed[v]).collect();
    // The new body: the old constants, the passed values, then the carried values and slices.
    let mut nb = FuncBuilder::new(body.name.clone());
    let types: Vec<TensorType> = body.params[..s.consts]
        .iter()
        .cloned()
        .chain(
            passed
                .iter()
                .filter_map(|&v| body.value_type(ValueId(v as u32)).cloned()),
        )
        .chain(body.params[s.consts..].iter().cloned())
        .collect();
    let params: Vec<ValueId> = types.into_iter().map(|t| nb.param(t)).collect();
    let mut inside: Vec<Option<ValueId>> = vec![None; n];
    for (p, slot) in inside.iter_mut().enumerate().take(np) {
        let at = if p < s.consts { p } else { p + passed.len() };
        *slot = params.get(at).copied();
    }
    for (j, &v) in passed.iter().enumerate() {
        inside[v] = params.get(s.consts + j).copied();
    }
    for (k, ins) in body.body.iter().enumerate() {
        // Moved work the body reads comes in as a constant; the rest is not read here.
        if moved[np + k] {
            continue;
        }
        let operands: Option<Vec<ValueId>> = ins.args.iter().map(|a| inside[a.index()]).collect();
        inside[np + k] = Some(nb.push(ins.op.clone(), &operands?).ok()?);
    }
    let outputs: Option<Vec<ValueId>> = body.outputs.iter().map(|o| inside[o.index()]).collect();
    let new_body = eliminate_dead_code(&nb.finish(outputs?));
    let mut operands: Vec<ValueId> = args.get(..s.consts)?.to_vec();
    operands.extend(passed.iter().filter_map(|&v| outside[v]));
    operands.extend_from_slice(args.get(s.consts..)?);
    let op = Op::Scan(Box::new(Scan {
        body: new_body,
        consts: s.consts + passed.len(),
        ..s.clone()
    }));
    Some((op, operands))
}
