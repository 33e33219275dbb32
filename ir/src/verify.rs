//! The verifier: checks SSA dominance and that every stored type is the one the shape rules
//! give. Passes run it on their output in debug and test builds.

use crate::{infer_type, print_func, Func, Op, ValueId, MAX_BYTES, MAX_RANK};

/// A verification failure, with the function printed around the offending value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid IR at {value}: {message}\n{context}")]
pub struct VerifyError {
    pub value: ValueId,
    pub message: String,
    pub context: String,
}

pub fn verify(func: &Func) -> Result<(), VerifyError> {
    let fail = |value: ValueId, message: String| VerifyError {
        value,
        message,
        context: context_around(func, value),
    };
    for (i, p) in func.params.iter().enumerate() {
        if p.rank() > MAX_RANK {
            return Err(fail(
                ValueId(i as u32),
                format!("parameter type {p} exceeds rank {MAX_RANK}"),
            ));
        }
        if p.checked_bytes().is_none() {
            return Err(fail(
                ValueId(i as u32),
                format!("parameter type {p} takes more than {MAX_BYTES} bytes"),
            ));
        }
    }
    for (i, ins) in func.body.iter().enumerate() {
        let v = func.instr_value(i);
        let mut types = Vec::with_capacity(ins.args.len());
        for &a in &ins.args {
            if a >= v {
                return Err(fail(v, format!("operand {a} is used before it is defined")));
            }
            match func.value_type(a) {
                Some(ty) => types.push(ty),
                None => return Err(fail(v, format!("operand {a} is not defined"))),
            }
        }
        let inferred = infer_type(&ins.op, &types).map_err(|e| fail(v, e.to_string()))?;
        if let Op::CustomVjp(c) = &ins.op {
            for (role, nested) in [("primal", &c.primal), ("fwd", &c.fwd), ("bwd", &c.bwd)] {
                verify(nested).map_err(|e| fail(v, format!("in its {role} function: {e}")))?;
            }
        }
        if inferred != ins.ty {
            return Err(fail(
                v,
                format!(
                    "{} declares type {} but its operands give {}",
                    ins.op.name(),
                    ins.ty,
                    inferred
                ),
            ));
        }
    }
    for &o in &func.outputs {
        if o.index() >= func.num_values() {
            return Err(fail(o, format!("returned value {o} is not defined")));
        }
    }
    Ok(())
}

/// The printed function with the line that defines `value` marked.
fn context_around(func: &Func, value: ValueId) -> String {
    let printed = print_func(func);
    let marker = format!("  {value} = ");
    let lines: Vec<&str> = printed.lines().collect();
    let at = lines.iter().position(|l| l.starts_with(&marker));
    let (lo, hi) = match at {
        Some(i) => (i.saturating_sub(3), (i + 4).min(lines.len())),
        None => (0, lines.len().min(8)),
    };
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate().take(hi).skip(lo) {
        out.push_str(if Some(i) == at { "> " } else { "  " });
        out.push_str(line);
        out.push('\n');
    }
    out
}
