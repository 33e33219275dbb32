//! `debug_callback`, `io_callback` and `add_dependency`: the ops that carry a host callback's
//! effect. A token
//! is a `bool[]` value; it has no meaning but the effects that produced it.

use super::{arity, invalid};
use crate::{DType, IoCallback, TensorType, TypeError};

fn check_token(op: &'static str, token: &TensorType) -> Result<(), TypeError> {
    if *token == TensorType::scalar(DType::Bool) {
        Ok(())
    } else {
        Err(invalid(
            op,
            format!("the token operand must be bool[], found {token}"),
        ))
    }
}

/// That `args` start with a token.
fn leading_token(op: &'static str, args: &[&TensorType]) -> Result<(), TypeError> {
    let token = args.first().ok_or_else(|| TypeError::Arity {
        op,
        expected: "at least 1".into(),
        got: 0,
    })?;
    check_token(op, token)
}

/// `(token, x_1, .., x_n)` to the next token.
pub(super) fn debug_callback(args: &[&TensorType]) -> Result<TensorType, TypeError> {
    leading_token("debug_callback", args)?;
    Ok(TensorType::scalar(DType::Bool))
}

/// `(token, x_1, .., x_n)` to the callback's promised result.
pub(super) fn io_callback(c: &IoCallback, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    leading_token("io_callback", args)?;
    Ok(c.result.clone())
}

/// `(x, after)` to `x`; `after` may be any value.
pub(super) fn add_dependency(args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [x, _] = arity::<2>("add_dependency", args)?;
    Ok(x.clone())
}
