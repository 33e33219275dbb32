//! `custom_vjp`: a call of a nested function. Its signature checks keep the three nested
//! programs consistent with each other and with the operands.

use super::invalid;
use super::nest::show;
use crate::{CustomVjp, TensorType, TypeError};

const OP: &str = "custom_vjp";

pub(super) fn custom_vjp(c: &CustomVjp, args: &[&TensorType]) -> Result<TensorType, TypeError> {
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
