//! The checks of conformance programs (`check.expect_*`): each becomes outputs of the
//! program and a [`Check`] saying how a runner compares them, so that the checked values are
//! computed by ferrax and compared outside it.

use super::Importer;
use crate::dense::literal;
use crate::lex::Tok;
use crate::parse::Operation;
use crate::Error;
use ferrax_ir::{CompareOp, Literal, Op, ReduceOp, ValueId};

/// How a conformance check compares its actual and expected values.
#[derive(Clone, Debug, PartialEq)]
pub enum CheckKind {
    /// Bit-exact (NaNs equal each other).
    Exact,
    /// Between `min` and `max` units in the last place apart (non-finite values that are not
    /// identical are `u64::MAX` apart).
    Ulp { min: u64, max: u64 },
    /// Absolute difference at most this.
    Absolute(f64),
}

/// A check: output `actual` against output `expected` or a constant.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub kind: CheckKind,
    pub actual: usize,
    pub expected: Expected,
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expected {
    Output(usize),
    Constant(Literal),
}

impl Importer<'_> {
    /// The check `op` on `args`: the compared values become outputs. A check with a result
    /// (`custom_call @check.eq`, a boolean) gives whether every pair of elements is equal.
    pub(super) fn check(
        &mut self,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Option<ValueId>, Error> {
        let which = op
            .callee
            .clone()
            .filter(|c| c.starts_with("check."))
            .unwrap_or_else(|| op.name.clone());
        let kind = match which.as_str() {
            "check.expect_eq" | "check.expect_eq_const" | "check.eq" => CheckKind::Exact,
            "check.expect_close" => {
                let bound = |key: &str| {
                    op.attr(&[key]).and_then(|t| match t.first() {
                        Some(Tok::Word(w)) => w.parse::<u64>().ok(),
                        _ => None,
                    })
                };
                CheckKind::Ulp {
                    min: bound("min_ulp_difference").unwrap_or(0),
                    max: bound("max_ulp_difference").unwrap_or(3),
                }
            }
            "check.expect_almost_eq" | "check.expect_almost_eq_const" => CheckKind::Absolute(1e-3),
            other => return Err(Error::unsupported(op.line, format!("check {other}"))),
        };
        let Some(&actual) = args.first() else {
            return Err(Error::at(op.line, "a check needs a value"));
        };
        let expected = if which.ends_with("_const") {
            let ty = op
                .operand_types
                .last()
                .cloned()
                .ok_or_else(|| Error::at(op.line, "a constant check needs a type"))?;
            // Pretty form: `dense<...>` among the words; generic: the `value` property.
            let dense = Tok::Word("dense".into());
            let tokens = match op.attr(&["value"]) {
                Some(v) if !op.words.contains(&dense) => v,
                _ => &op.words,
            };
            Expected::Constant(literal(tokens, &ty, op.line)?)
        } else {
            let &e = args
                .get(1)
                .ok_or_else(|| Error::at(op.line, "a check needs an expected value"))?;
            Expected::Output(self.output(e))
        };
        let equal = match (&expected, op.results.is_empty()) {
            (Expected::Output(k), false) => {
                let e = self.outputs[*k];
                let rank = self.type_of(actual, op.line)?.rank();
                let eq = self.push(Op::Compare(CompareOp::Eq), &[actual, e], op.line)?;
                let axes = (0..rank).collect();
                Some(self.push(
                    Op::Reduce {
                        op: ReduceOp::Min,
                        axes,
                    },
                    &[eq],
                    op.line,
                )?)
            }
            (Expected::Constant(_), false) => {
                return Err(Error::unsupported(
                    op.line,
                    "a constant check with a result",
                ))
            }
            (_, true) => None,
        };
        let actual = self.output(actual);
        self.checks.push(Check {
            kind,
            actual,
            expected,
            line: op.line,
        });
        Ok(equal)
    }
}
