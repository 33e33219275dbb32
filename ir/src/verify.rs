//! The verifier: checks SSA dominance and that every stored type is the one the shape rules
//! give. Passes run it on their output in debug and test builds.
//!
//! It recurses into the functions ops hold (`custom_vjp`, `while`, `cond`). Text is written only for an error, and
//! then only the few lines around the offending value, so that an error deep in a nest costs
//! time in proportion to the depth, not to the size of every enclosing function.

use crate::print::write_return;
use crate::{infer_type, Func, ValueId, MAX_BYTES, MAX_RANK};
use std::fmt::{self, Write};

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
        let param = ValueId(u32::try_from(i).unwrap_or(u32::MAX));
        if p.rank() > MAX_RANK {
            return Err(fail(
                param,
                format!("parameter type {p} exceeds rank {MAX_RANK}"),
            ));
        }
        if p.checked_bytes().is_none() {
            return Err(fail(
                param,
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
        // Nested functions first: an error inside one is reported there, not as the
        // signature mismatch it causes.
        for (role, nested) in ins.op.regions() {
            verify(nested).map_err(|e| fail(v, format!("in its {role} function: {e}")))?;
        }
        let inferred = infer_type(&ins.op, &types).map_err(|e| fail(v, e.to_string()))?;
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

/// The lines of the printed function around the one that defines `value`, that line
/// marked; with no such line, the first lines. An instruction counts as one line, its
/// first: nested functions are not written out.
fn context_around(func: &Func, value: ValueId) -> String {
    // Line 0 is the signature, then one per instruction, `return` and `}`.
    let n = func.body.len() + 3;
    let at = (func.params.len()..func.num_values())
        .contains(&value.index())
        .then(|| value.index() - func.params.len() + 1);
    let (lo, hi) = match at {
        Some(i) => (i.saturating_sub(3), (i + 4).min(n)),
        None => (0, n.min(8)),
    };
    let mut out = String::new();
    for line in lo..hi {
        out.push_str(if Some(line) == at { "> " } else { "  " });
        let mut first = FirstLine(&mut out);
        // Writing stops at the first newline, with an error that only means "done".
        let _ = match line {
            0 => write!(first, "{func}"),
            l if l <= func.body.len() => {
                write!(
                    first,
                    "  {} = {}",
                    func.instr_value(l - 1),
                    func.body[l - 1]
                )
            }
            l if l == n - 2 => first
                .write_str("  ")
                .and_then(|()| write_return(&mut first, func)),
            _ => first.write_str("}"),
        };
        out.push('\n');
    }
    out
}

/// Appends what is written to it up to the first newline, then refuses the rest.
struct FirstLine<'a>(&'a mut String);

impl Write for FirstLine<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        match s.split_once('\n') {
            Some((line, _)) => {
                self.0.push_str(line);
                Err(fmt::Error)
            }
            None => {
                self.0.push_str(s);
                Ok(())
            }
        }
    }
}
