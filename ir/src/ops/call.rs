//! `custom_vjp`: a call of a nested function. Its signature checks keep the three nested
//! programs consistent with each other and with the operands.

use super::invalid;
use crate::{CustomVjp, Func, Op, TensorType, TypeError};

const OP: &str = "custom_vjp";

/// How deeply `custom_vjp` calls may nest (inside a function, as the text format's 64 levels
/// of functions allow): every pass that follows a call into its functions then has a bounded
/// depth, however the program was made.
const MAX_CALL_NESTING: usize = 63;

/// How deeply `custom_vjp` calls nest in `c`'s functions, `c` itself counted; found with an
/// explicit stack.
fn nesting(c: &CustomVjp) -> usize {
    let mut deepest = 1;
    let mut stack: Vec<(&Func, usize)> = vec![(&c.primal, 1), (&c.fwd, 1), (&c.bwd, 1)];
    while let Some((func, depth)) = stack.pop() {
        for ins in &func.body {
            if let Op::CustomVjp(inner) = &ins.op {
                deepest = deepest.max(depth + 1);
                if depth < MAX_CALL_NESTING {
                    stack.extend([
                        (&inner.primal, depth + 1),
                        (&inner.fwd, depth + 1),
                        (&inner.bwd, depth + 1),
                    ]);
                }
            }
        }
    }
    deepest
}

fn show(types: &[TensorType]) -> String {
    let parts: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    format!("({})", parts.join(", "))
}

pub(super) fn custom_vjp(c: &CustomVjp, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    if nesting(c) > MAX_CALL_NESTING {
        return Err(invalid(
            OP,
            format!("calls nest more than {MAX_CALL_NESTING} levels deep"),
        ));
    }
    let operands: Vec<TensorType> = args.iter().map(|&t| t.clone()).collect();
    let outputs = c.primal.output_types();
    let [result] = outputs.as_slice() else {
        return Err(invalid(
            OP,
            format!(
                "the primal function must return one value, it returns {}",
                show(&outputs)
            ),
        ));
    };
    if c.primal.params != operands || c.fwd.params != operands {
        return Err(invalid(
            OP,
            format!(
                "operands {} do not match the primal {} and fwd {} parameters",
                show(&operands),
                show(&c.primal.params),
                show(&c.fwd.params)
            ),
        ));
    }
    let fwd_out = c.fwd.output_types();
    if fwd_out.first() != Some(result) {
        return Err(invalid(
            OP,
            format!(
                "fwd must return the primal result {result} first, it returns {}",
                show(&fwd_out)
            ),
        ));
    }
    let mut bwd_params = fwd_out[1..].to_vec();
    bwd_params.push(result.clone());
    if c.bwd.params != bwd_params {
        return Err(invalid(
            OP,
            format!(
                "bwd must take the residuals and the cotangent {}, it takes {}",
                show(&bwd_params),
                show(&c.bwd.params)
            ),
        ));
    }
    if c.bwd.output_types() != operands {
        return Err(invalid(
            OP,
            format!(
                "bwd must return one cotangent per operand {}, it returns {}",
                show(&operands),
                show(&c.bwd.output_types())
            ),
        ));
    }
    Ok(result.clone())
}
