//! `stablehlo.reduce`: its body region (or `applies` op) must be one combining op, which
//! picks the ferrax reduction; an initial value other than that reduction's identity is
//! combined with the result afterwards.

use super::attrs::usizes;
use super::Importer;
use crate::lex::Tok;
use crate::parse::{Operation, Region};
use crate::Error;
use ferrax_ir::{BinaryOp, DType, Op, ReduceOp, Scalar, TensorType, ValueId};

/// Whether `op`'s body is one combining op that an IR reduction computes.
pub(super) fn combines_simply(op: &Operation) -> bool {
    let dtype = op.result_types.first().map(|t| t.dtype);
    applied_op(op)
        .ok()
        .zip(dtype)
        .is_some_and(|(body, dtype)| combiner(&body, dtype).is_some())
}

impl Importer<'_> {
    pub(super) fn reduce(
        &mut self,
        op: &Operation,
        args: &[ValueId],
        ty: &TensorType,
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let [x, init] = args else {
            return Err(Error::unsupported(
                line,
                "reduce over several operands".to_string(),
            ));
        };
        let body = applied_op(op)?;
        let (reduce_op, combine) = combiner(&body, ty.dtype)
            .ok_or_else(|| Error::unsupported(line, format!("reduce with body {body}")))?;
        let mut axes = usizes(op.attr(&["dimensions"]).unwrap_or(&[]), line)?;
        axes.sort_unstable();
        let reduced = self.push(
            Op::Reduce {
                op: reduce_op,
                axes,
            },
            &[*x],
            line,
        )?;
        if self.is_identity(*init, reduce_op) {
            return Ok(reduced);
        }
        let init_b = self.push(
            Op::BroadcastInDim {
                shape: ty.shape.clone(),
                dims: Vec::new(),
            },
            &[*init],
            line,
        )?;
        self.push(Op::Binary(combine), &[reduced, init_b], line)
    }

    /// Whether `v` is a constant equal to the identity of `r` (then it need not be applied).
    fn is_identity(&self, v: ValueId, r: ReduceOp) -> bool {
        let Some(lit) = self.constants.get(&v) else {
            return false;
        };
        if !lit.is_splat() {
            return false;
        }
        let s = lit.data.get(0);
        let d = s.dtype();
        let identity = match (r, d) {
            (ReduceOp::Sum, _) => Scalar::zero(d),
            (ReduceOp::Prod, _) => Scalar::from_f64(d, 1.0),
            (ReduceOp::Max, DType::Bool) => Scalar::Bool(false),
            (ReduceOp::Min, DType::Bool) => Scalar::Bool(true),
            (ReduceOp::Max, DType::I32) => Scalar::I32(i32::MIN),
            (ReduceOp::Max, DType::I64) => Scalar::I64(i64::MIN),
            (ReduceOp::Max, DType::U8) => Scalar::U8(0),
            (ReduceOp::Min, DType::I32) => Scalar::I32(i32::MAX),
            (ReduceOp::Min, DType::I64) => Scalar::I64(i64::MAX),
            (ReduceOp::Min, DType::U8) => Scalar::U8(u8::MAX),
            (ReduceOp::Max, _) => Scalar::from_f64(d, f64::NEG_INFINITY),
            (ReduceOp::Min, _) => Scalar::from_f64(d, f64::INFINITY),
        };
        s == identity
    }
}

/// The reduction and the elementwise op a combining region's op (`stablehlo.add`, ...) is on
/// `dtype`: sums and maxima of bools are `or`, products and minima `and`.
pub(super) fn combiner(body: &str, dtype: DType) -> Option<(ReduceOp, BinaryOp)> {
    let short = body.strip_prefix("stablehlo.").unwrap_or(body);
    let op = match (short, dtype == DType::Bool) {
        ("add", false) => ReduceOp::Sum,
        ("multiply", false) => ReduceOp::Prod,
        ("maximum", false) => ReduceOp::Max,
        ("minimum", false) => ReduceOp::Min,
        ("add" | "maximum" | "or", true) => ReduceOp::Max,
        ("multiply" | "minimum" | "and", true) => ReduceOp::Min,
        _ => return None,
    };
    // Complex numbers have no IR maximum or minimum.
    if dtype.is_complex() && matches!(op, ReduceOp::Max | ReduceOp::Min) {
        return None;
    }
    Some((op, op.combining_op(dtype)))
}

/// The name of the one op a region applies to its two arguments and returns.
pub(super) fn region_op(region: &Region) -> Option<String> {
    match region.ops.as_slice() {
        [combine, ret]
            if matches!(ret.name.as_str(), "stablehlo.return" | "return")
                && combine.operands.len() == 2
                && region
                    .args
                    .iter()
                    .all(|(a, _)| combine.operands.contains(a))
                && ret.operands == combine.results =>
        {
            Some(combine.name.clone())
        }
        _ => None,
    }
}

/// The name of the op a reduce combines with: after `applies` in the pretty form, else the
/// one op of its body region that combines the region's two arguments and is returned.
pub(super) fn applied_op(op: &Operation) -> Result<String, Error> {
    let line = op.line;
    match op
        .words
        .iter()
        .position(|t| *t == Tok::Word("applies".into()))
    {
        Some(k) => match op.words.get(k + 1) {
            Some(Tok::Word(w)) => Ok(w.clone()),
            _ => Err(Error::at(line, "reduce: expected the applied op")),
        },
        None => {
            let region = op
                .regions
                .first()
                .ok_or_else(|| Error::at(line, format!("{} needs a body", op.name)))?;
            region_op(region).ok_or_else(|| {
                Error::unsupported(
                    line,
                    format!(
                        "{} with a body other than one add/multiply/maximum/minimum",
                        op.name
                    ),
                )
            })
        }
    }
}
