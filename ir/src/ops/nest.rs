//! How deeply ops that hold functions (`custom_vjp`, `while`, `cond`) may nest inside each
//! other: every pass that follows an op into its functions then has a bounded depth, however
//! the program was made.

use super::invalid;
use crate::{Func, Op, TypeError};

/// The most levels of such ops, within a function (the text format's 64 levels of functions).
pub(super) const MAX_CALL_NESTING: usize = 63;

/// How deeply ops holding functions nest in `op`'s functions, `op` itself counted; found with
/// an explicit stack, which stops one level past the limit.
fn nesting(op: &Op) -> usize {
    let mut deepest = 1;
    let mut stack: Vec<(&Func, usize)> = op.regions().into_iter().map(|(_, f)| (f, 1)).collect();
    while let Some((func, depth)) = stack.pop() {
        for ins in &func.body {
            let inner = ins.op.regions();
            if inner.is_empty() {
                continue;
            }
            deepest = deepest.max(depth + 1);
            if depth < MAX_CALL_NESTING {
                stack.extend(inner.into_iter().map(|(_, f)| (f, depth + 1)));
            }
        }
    }
    deepest
}

/// An error where `op`'s functions nest too deeply.
pub(super) fn check(op: &Op) -> Result<(), TypeError> {
    if nesting(op) > MAX_CALL_NESTING {
        return Err(invalid(
            op.name(),
            format!("calls nest more than {MAX_CALL_NESTING} levels deep"),
        ));
    }
    Ok(())
}

/// `(a, b)`: types as a signature shows them.
pub(super) fn show(types: &[crate::TensorType]) -> String {
    let parts: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    format!("({})", parts.join(", "))
}
