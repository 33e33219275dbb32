//! Loop-invariant work out of loop bodies. In a scan's body, an instruction that reads only the
//! scan's constants (directly or through other such instructions, not constants alone) is
//! computed once before the loop, and the values the loop still reads become more of its
//! constants. In a `while`, the invariants are the carried values its body returns unchanged:
//! work of the body or of the condition that reads only them is computed once before the
//! loop, and the values the loop still reads are carried beside them, unchanged (the carried
//! values it then no longer reads are dropped). A `while` may run zero times; moving work
//! before it changes no result, since every op outside a region is pure and total (integer
//! division by zero, out-of-range indices and the like have defined results; none traps), and
//! calls are never moved.
//!
//! Broadcasts and reshapes stay inside (a kernel reads a broadcast in place; a reshape is a
//! view). Each instruction of a call does this alike; the e-graph then merges the copies of the
//! work outside, so they remain one call.

use crate::dce::eliminate_dead_code;
use ferrax_ir::{Func, FuncBuilder, Op, Scan, TensorType, ValueId, While};

/// `func` with the invariant work of each loop's body moved before the loop.
pub(super) fn hoist_loop_invariants(func: &Func) -> Func {
    if !func
        .body
        .iter()
        .any(|ins| matches!(ins.op, Op::Scan(_) | Op::While(_)))
    {
        return func.clone();
    }
    let mut b = FuncBuilder::new(func.name.clone());
    let mut values: Vec<ValueId> = func.params.iter().map(|p| b.param(p.clone())).collect();
    for ins in &func.body {
        let args: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        let moved = match &ins.op {
            Op::Scan(s) => hoisted_scan(&mut b, s, &args).map(|(op, args)| Hoisted::Call(op, args)),
            Op::While(w) => hoisted_while(&mut b, w, &args),
            // A branch runs once per call and a remat is inlined: nothing to hoist out of.
            Op::Cond(_)
            | Op::Remat(_)
            | Op::Constant(_)
            | Op::Iota { .. }
            | Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::Clamp
            | Op::Convert { .. }
            | Op::BitcastConvert { .. }
            | Op::BroadcastInDim { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Reverse { .. }
            | Op::Reduce { .. }
            | Op::DotGeneral(_)
            | Op::Slice { .. }
            | Op::Pad { .. }
            | Op::Concatenate { .. }
            | Op::Gather(_)
            | Op::Scatter(_)
            | Op::DynamicSlice { .. }
            | Op::DynamicUpdateSlice
            | Op::StopGradient
            | Op::Sort { .. }
            | Op::Argsort { .. }
            | Op::Fft { .. }
            | Op::TriangularSolve(_)
            | Op::Cholesky
            | Op::Lu(_)
            | Op::Qr(_)
            | Op::Eigh(_)
            | Op::Svd(_)
            | Op::Geqrf(_)
            | Op::HouseholderProduct
            | Op::Eig(_)
            | Op::Attention(_)
            | Op::CustomVjp(_)
            | Op::CustomJvp(_)
            | Op::DebugCallback { .. }
            | Op::PureCallback(_)
            | Op::IoCallback(_)
            | Op::AddDependency => None,
        };
        let pushed = match moved {
            Some(Hoisted::Call(op, operands)) => b.push(op, &operands),
            Some(Hoisted::Value(v)) => Ok(v),
            None => b.push(ins.op.clone(), &args),
        };
        match pushed {
            Ok(v) => values.push(v),
            Err(_) => return func.clone(),
        }
    }
    b.finish(func.outputs.iter().map(|o| values[o.index()]).collect())
}

/// A loop instruction with its invariant work moved out: the new call and its operands, or,
/// for a carried value that the loop leaves as it is, that value.
enum Hoisted {
    Call(Op, Vec<ValueId>),
    Value(ValueId),
}

/// What moves out of one function of a loop.
struct Plan {
    /// Per value: the same every iteration (an invariant parameter, or work on such values).
    invariant: Vec<bool>,
    /// Per value: invariant work worth doing once, outside.
    moved: Vec<bool>,
    /// The moved values the function still reads (or returns), in order.
    passed: Vec<usize>,
}

/// The plan for `func`, whose parameters flagged in `fixed` are the same every iteration.
fn plan(func: &Func, fixed: &[bool]) -> Plan {
    let np = func.params.len();
    let n = func.num_values();
    let mut invariant = vec![false; n];
    let mut reads_fixed = vec![false; n];
    for (p, &f) in fixed.iter().enumerate().take(np) {
        (invariant[p], reads_fixed[p]) = (f, f);
    }
    let mut moved = vec![false; n];
    for (k, ins) in func.body.iter().enumerate() {
        let v = np + k;
        // A callback runs every iteration, whatever it reads.
        invariant[v] = ins.op.regions().is_empty()
            && !ins.op.has_effect()
            && ins.args.iter().all(|a| invariant[a.index()]);
        reads_fixed[v] = ins.args.iter().any(|a| reads_fixed[a.index()]);
        let cheap = matches!(
            ins.op,
            Op::Constant(_) | Op::Iota { .. } | Op::BroadcastInDim { .. } | Op::Reshape { .. }
        );
        moved[v] = invariant[v] && reads_fixed[v] && !cheap;
    }
    let mut passed = vec![false; n];
    for (k, ins) in func.body.iter().enumerate() {
        if !moved[np + k] {
            for a in &ins.args {
                passed[a.index()] |= moved[a.index()];
            }
        }
    }
    for o in &func.outputs {
        passed[o.index()] |= moved[o.index()];
    }
    Plan {
        invariant,
        moved,
        passed: (0..n).filter(|&v| passed[v]).collect(),
    }
}

/// Emits into `b` every invariant instruction of `func` (the outer simplifier drops what
/// nothing reads), given the values outside of its fixed parameters; each of the passed
/// values' value outside.
fn emit_outside(
    b: &mut FuncBuilder,
    func: &Func,
    plan: &Plan,
    params: Vec<Option<ValueId>>,
) -> Option<Vec<ValueId>> {
    let np = func.params.len();
    let mut outside = params;
    outside.resize(func.num_values(), None);
    for (k, ins) in func.body.iter().enumerate() {
        if plan.invariant[np + k] {
            let operands: Option<Vec<ValueId>> =
                ins.args.iter().map(|a| outside[a.index()]).collect();
            outside[np + k] = Some(b.push(ins.op.clone(), &operands?).ok()?);
        }
    }
    plan.passed.iter().map(|&v| outside[v]).collect()
}

/// `func` rebuilt without its moved work, taking `types`: old parameter `p` is `at[p]` (none
/// where it is dropped, so not read), passed value `j` is `passed_at[j]`; it returns its
/// outputs `outputs`, then the parameters `extra_outputs`.
fn rebuild(
    func: &Func,
    plan: &Plan,
    types: &[TensorType],
    at: &[Option<usize>],
    passed_at: &[usize],
    (outputs, extra_outputs): (&[usize], &[usize]),
) -> Option<Func> {
    let np = func.params.len();
    let mut nb = FuncBuilder::new(func.name.clone());
    let params: Vec<ValueId> = types.iter().map(|t| nb.param(t.clone())).collect();
    let mut inside: Vec<Option<ValueId>> = vec![None; func.num_values()];
    for (p, &i) in at.iter().enumerate().take(np) {
        inside[p] = i.and_then(|i| params.get(i).copied());
    }
    for (&v, &i) in plan.passed.iter().zip(passed_at) {
        inside[v] = params.get(i).copied();
    }
    for (k, ins) in func.body.iter().enumerate() {
        // Moved work the function reads comes in as a parameter; the rest is not read here.
        if plan.moved[np + k] {
            continue;
        }
        let operands: Option<Vec<ValueId>> = ins.args.iter().map(|a| inside[a.index()]).collect();
        inside[np + k] = Some(nb.push(ins.op.clone(), &operands?).ok()?);
    }
    let mut outputs: Vec<ValueId> = outputs
        .iter()
        .map(|&k| inside[func.outputs.get(k)?.index()])
        .collect::<Option<_>>()?;
    for &i in extra_outputs {
        outputs.push(*params.get(i)?);
    }
    Some(eliminate_dead_code(&nb.finish(outputs)))
}

/// The types of `func`'s values `vs`.
fn types_of(func: &Func, vs: &[usize]) -> Vec<TensorType> {
    vs.iter()
        .filter_map(|&v| func.value_type(ValueId(v as u32)).cloned())
        .collect()
}

/// Emits into `b` the invariant work of `s`'s body (its operands `args`), and returns the scan
/// that takes the values of that work it still reads as more constants, with its operands;
/// `None` where there is nothing to move.
fn hoisted_scan(b: &mut FuncBuilder, s: &Scan, args: &[ValueId]) -> Option<(Op, Vec<ValueId>)> {
    let body = &s.body;
    let np = body.params.len();
    let fixed: Vec<bool> = (0..np).map(|p| p < s.consts).collect();
    let plan = plan(body, &fixed);
    if plan.passed.is_empty() {
        return None;
    }
    let params = (0..s.consts).map(|p| args.get(p).copied()).collect();
    let outside = emit_outside(b, body, &plan, params)?;
    // The new body: the old constants, the passed values, then the carried values and slices.
    let m = plan.passed.len();
    let types: Vec<TensorType> = body.params[..s.consts]
        .iter()
        .cloned()
        .chain(types_of(body, &plan.passed))
        .chain(body.params[s.consts..].iter().cloned())
        .collect();
    let at: Vec<Option<usize>> = (0..np)
        .map(|p| Some(if p < s.consts { p } else { p + m }))
        .collect();
    let passed_at: Vec<usize> = (s.consts..s.consts + m).collect();
    let all: Vec<usize> = (0..body.outputs.len()).collect();
    let new_body = rebuild(body, &plan, &types, &at, &passed_at, (&all, &[]))?;
    let mut operands: Vec<ValueId> = args.get(..s.consts)?.to_vec();
    operands.extend(outside);
    operands.extend_from_slice(args.get(s.consts..)?);
    let op = Op::Scan(Box::new(Scan {
        body: new_body,
        consts: s.consts + m,
        ..s.clone()
    }));
    Some((op, operands))
}

/// Whether `func` still reads its parameter `p` once `plan`'s work is moved out, apart from
/// returning it as output `skip`.
fn still_reads(func: &Func, plan: &Plan, p: usize, skip: Option<usize>) -> bool {
    let np = func.params.len();
    let by_work = func
        .body
        .iter()
        .enumerate()
        .any(|(k, ins)| !plan.moved[np + k] && ins.args.iter().any(|a| a.index() == p));
    let by_outputs = func
        .outputs
        .iter()
        .enumerate()
        .any(|(k, o)| Some(k) != skip && o.index() == p);
    by_work || by_outputs
}

/// Emits into `b` the invariant work of `w`'s body and condition (its operands `args`), and
/// returns the `while` that carries the values of that work they still read, unchanged,
/// after its own carried values, with its operands; `None` where there is nothing to move.
/// Carried values that the body returns unchanged and that nothing in the loop reads any
/// more are dropped; where the instruction yields one, its value is the operand itself.
fn hoisted_while(b: &mut FuncBuilder, w: &While, args: &[ValueId]) -> Option<Hoisted> {
    let n = w.body.params.len();
    // The carried values the body returns as it got them.
    let fixed: Vec<bool> = (0..n)
        .map(|p| w.body.outputs.get(p) == Some(&ValueId(p as u32)))
        .collect();
    let (body_plan, cond_plan) = (plan(&w.body, &fixed), plan(&w.cond, &fixed));
    if body_plan.passed.is_empty() && cond_plan.passed.is_empty() {
        return None;
    }
    let params: Vec<Option<ValueId>> = (0..n)
        .map(|p| fixed[p].then(|| args.get(p).copied()).flatten())
        .collect();
    let body_passed = emit_outside(b, &w.body, &body_plan, params.clone())?;
    let cond_passed = emit_outside(b, &w.cond, &cond_plan, params)?;
    if fixed.get(w.result) == Some(&true) {
        return args.get(w.result).copied().map(Hoisted::Value);
    }
    // The carried values kept, each one's new position.
    let kept: Vec<usize> = (0..n)
        .filter(|&p| {
            !fixed[p]
                || still_reads(&w.body, &body_plan, p, Some(p))
                || still_reads(&w.cond, &cond_plan, p, None)
        })
        .collect();
    let mut at: Vec<Option<usize>> = vec![None; n];
    for (i, &p) in kept.iter().enumerate() {
        at[p] = Some(i);
    }
    let mut operands: Vec<ValueId> = kept.iter().filter_map(|&p| args.get(p).copied()).collect();
    operands.extend(body_passed);
    operands.extend(cond_passed);
    // Both functions take the kept carried values, the body's passed values, then the
    // condition's; the body returns the new ones unchanged.
    let (nk, mb, mc) = (kept.len(), body_plan.passed.len(), cond_plan.passed.len());
    let types: Vec<TensorType> = kept
        .iter()
        .filter_map(|&p| w.body.params.get(p).cloned())
        .chain(types_of(&w.body, &body_plan.passed))
        .chain(types_of(&w.cond, &cond_plan.passed))
        .collect();
    let extra: Vec<usize> = (nk..nk + mb + mc).collect();
    let body = rebuild(
        &w.body,
        &body_plan,
        &types,
        &at,
        &extra[..mb],
        (&kept, &extra),
    )?;
    let cond = rebuild(&w.cond, &cond_plan, &types, &at, &extra[mb..], (&[0], &[]))?;
    let op = Op::While(Box::new(While {
        cond,
        body,
        result: at[w.result]?,
    }));
    Some(Hoisted::Call(op, operands))
}
