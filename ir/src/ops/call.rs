//! `custom_vjp` and `custom_jvp`: calls of a nested function. Their signature checks keep the
//! nested programs consistent with each other and with the operands.

use super::invalid;
use super::nest::show;
use crate::{CustomJvp, CustomVjp, TensorType, TypeError};

const OP: &str = "custom_vjp";

pub(super) fn custom_vjp(c: &CustomVjp, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let operands: Vec<TensorType> = args.iter().map(|&t| t.clone()).collect();
    let result = single_result(OP, &c.primal)?;
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
    if fwd_out.first() != Some(&result) {
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
    Ok(result)
}

pub(super) fn custom_jvp(c: &CustomJvp, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    const OP: &str = "custom_jvp";
    let operands: Vec<TensorType> = args.iter().map(|&t| t.clone()).collect();
    let result = single_result(OP, &c.primal)?;
    if c.primal.params != operands {
        return Err(invalid(
            OP,
            format!(
                "operands {} do not match the primal parameters {}",
                show(&operands),
                show(&c.primal.params)
            ),
        ));
    }
    let jvp_params: Vec<TensorType> = operands.iter().chain(&operands).cloned().collect();
    if c.jvp.params != jvp_params {
        return Err(invalid(
            OP,
            format!(
                "jvp must take the operands and one tangent each {}, it takes {}",
                show(&jvp_params),
                show(&c.jvp.params)
            ),
        ));
    }
    let jvp_out = c.jvp.output_types();
    if jvp_out != [result.clone(), result.clone()] {
        return Err(invalid(
            OP,
            format!(
                "jvp must return the result and its tangent, both {result}, it returns {}",
                show(&jvp_out)
            ),
        ));
    }
    Ok(result)
}

/// The one result type of a custom-derivative call's `primal` function.
fn single_result(op: &'static str, primal: &crate::Func) -> Result<TensorType, TypeError> {
    match primal.output_types().as_slice() {
        [result] => Ok(result.clone()),
        outputs => Err(invalid(
            op,
            format!(
                "the primal function must return one value, it returns {}",
                show(outputs)
            ),
        )),
    }
}
