//! `while`, `cond`, `scan` and `remat`: their functions' signatures against the operands and each other.
//! Errors name the carried value or the branch at fault.

use super::invalid;
use super::nest::show;
use crate::{Cond, DType, Func, Remat, Scan, Shape, TensorType, TypeError, While};

/// The first position where `got` differs from `want`, described for an error.
fn first_difference(got: &[TensorType], want: &[TensorType], what: &str) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!(
            "{} {what}(s) {} where {} are expected {}",
            got.len(),
            show(got),
            want.len(),
            show(want)
        ));
    }
    let (k, (g, w)) = got
        .iter()
        .zip(want)
        .enumerate()
        .find(|(_, (g, w))| g != w)?;
    Some(format!("{what} {k} is {g} where {w} is expected"))
}

/// A function's output types, or an error where one is not defined.
fn outputs(op: &'static str, role: &str, f: &Func) -> Result<Vec<TensorType>, TypeError> {
    let types = f.output_types();
    if types.len() != f.outputs.len() {
        return Err(invalid(op, format!("{role} returns an undefined value")));
    }
    Ok(types)
}

pub(super) fn while_loop(w: &While, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    const OP: &str = "while";
    let carried: Vec<TensorType> = args.iter().map(|&t| t.clone()).collect();
    if let Some(d) = first_difference(&w.cond.params, &carried, "parameter") {
        return Err(invalid(
            OP,
            format!("cond must take the carried values: its {d}"),
        ));
    }
    if let Some(d) = first_difference(&w.body.params, &carried, "parameter") {
        return Err(invalid(
            OP,
            format!("body must take the carried values: its {d}"),
        ));
    }
    let cond_out = outputs(OP, "cond", &w.cond)?;
    if cond_out != [TensorType::new(DType::Bool, Vec::<usize>::new())] {
        return Err(invalid(
            OP,
            format!(
                "cond must return one bool[], it returns {}",
                show(&cond_out)
            ),
        ));
    }
    let body_out = outputs(OP, "body", &w.body)?;
    if let Some(d) = first_difference(&body_out, &carried, "result") {
        return Err(invalid(
            OP,
            format!("body must return the carried values' types: its {d}"),
        ));
    }
    carried.get(w.result).cloned().ok_or_else(|| {
        invalid(
            OP,
            format!(
                "result={} but there are {} carried values",
                w.result,
                carried.len()
            ),
        )
    })
}

pub(super) fn cond(c: &Cond, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    const OP: &str = "cond";
    let Some((&index, operands)) = args.split_first() else {
        return Err(TypeError::Arity {
            op: OP,
            expected: "at least 1".into(),
            got: 0,
        });
    };
    let Some(first) = c.branches.first() else {
        return Err(invalid(OP, "needs at least one branch"));
    };
    let scalar = |d: DType| TensorType::new(d, Vec::<usize>::new());
    if *index == scalar(DType::Bool) {
        if c.branches.len() != 2 {
            return Err(invalid(
                OP,
                format!(
                    "a bool[] predicate picks between 2 branches, there are {}",
                    c.branches.len()
                ),
            ));
        }
    } else if *index != scalar(DType::I32) {
        return Err(invalid(
            OP,
            format!("the index must be i32[] or bool[], it is {index}"),
        ));
    }
    let operands: Vec<TensorType> = operands.iter().map(|&t| t.clone()).collect();
    let results = outputs(OP, "branch 0", first)?;
    for (k, branch) in c.branches.iter().enumerate() {
        if let Some(d) = first_difference(&branch.params, &operands, "parameter") {
            return Err(invalid(
                OP,
                format!("branch {k} must take the operands after the index: its {d}"),
            ));
        }
        let out = outputs(OP, &format!("branch {k}"), branch)?;
        if let Some(d) = first_difference(&out, &results, "result") {
            return Err(invalid(
                OP,
                format!("branch {k} must return what branch 0 returns: its {d}"),
            ));
        }
    }
    results.get(c.result).cloned().ok_or_else(|| {
        invalid(
            OP,
            format!(
                "result={} but the branches return {} values",
                c.result,
                results.len()
            ),
        )
    })
}

pub(super) fn scan(s: &Scan, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    const OP: &str = "scan";
    if s.unroll == 0 {
        return Err(invalid(
            OP,
            "unroll=0, where each iteration must run at least 1 step",
        ));
    }
    let leading = s.consts.checked_add(s.carry).filter(|&n| n <= args.len());
    let Some((fixed, xs)) = leading.and_then(|n| args.split_at_checked(n)) else {
        return Err(invalid(
            OP,
            format!(
                "consts={} and carry={} but there are {} operands",
                s.consts,
                s.carry,
                args.len()
            ),
        ));
    };
    let mut params: Vec<TensorType> = fixed.iter().map(|&t| t.clone()).collect();
    for (k, x) in xs.iter().enumerate() {
        match x.dims().split_first() {
            Some((&n, rest)) if n == s.length => {
                params.push(TensorType::new(x.dtype, rest.to_vec()));
            }
            _ => {
                return Err(invalid(
                    OP,
                    format!(
                        "scanned operand {k} is {x}, which has no leading dimension of length={}",
                        s.length
                    ),
                ))
            }
        }
    }
    if let Some(d) = first_difference(&s.body.params, &params, "parameter") {
        return Err(invalid(
            OP,
            format!(
                "body must take the constants, the carried values, then one slice of each \
                 scanned operand: its {d}"
            ),
        ));
    }
    let out = outputs(OP, "body", &s.body)?;
    let carried_out = out.get(..s.carry).unwrap_or_default();
    let carried = &params[s.consts..s.consts + s.carry];
    if let Some(d) = first_difference(carried_out, carried, "result") {
        return Err(invalid(
            OP,
            format!("body must return the carried values' types first: its {d}"),
        ));
    }
    let stacked = |t: &TensorType| {
        let mut dims = vec![s.length];
        dims.extend_from_slice(t.dims());
        TensorType::new(t.dtype, Shape::new(dims))
    };
    match out.get(s.result) {
        Some(t) if s.result < s.carry => Ok(t.clone()),
        Some(t) => Ok(stacked(t)),
        None => Err(invalid(
            OP,
            format!(
                "result={} but the body returns {} values",
                s.result,
                out.len()
            ),
        )),
    }
}

pub(super) fn remat(r: &Remat, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let op = r.policy.op_name();
    let operands: Vec<TensorType> = args.iter().map(|&t| t.clone()).collect();
    if let Some(d) = first_difference(&r.body.params, &operands, "parameter") {
        return Err(invalid(op, format!("body must take the operands: its {d}")));
    }
    let out = outputs(op, "body", &r.body)?;
    out.get(r.result).cloned().ok_or_else(|| {
        invalid(
            op,
            format!(
                "result={} but the body returns {} values",
                r.result,
                out.len()
            ),
        )
    })
}
