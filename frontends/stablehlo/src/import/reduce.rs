//! `stablehlo.reduce`: its body region (or `applies` op) must be one combining op, which
//! picks the ferrax reduction; an initial value other than that reduction's identity is
//! combined with the result afterwards.

use super::attrs::usizes;
use super::Importer;
use crate::lex::Tok;
use crate::parse::Operation;
use crate::Error;
use ferrax_ir::{BinaryOp, DType, Op, ReduceOp, Scalar, TensorType, ValueId};

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
        let short = body.strip_prefix("stablehlo.").unwrap_or(&body);
        let (reduce_op, combine) = match (short, ty.dtype == DType::Bool) {
            ("add", false) => (ReduceOp::Sum, BinaryOp::Add),
            ("multiply", false) => (ReduceOp::Prod, BinaryOp::Mul),
            ("maximum", false) => (ReduceOp::Max, BinaryOp::Max),
            ("minimum", false) => (ReduceOp::Min, BinaryOp::Min),
            ("add" | "maximum" | "or", true) => (ReduceOp::Max, BinaryOp::Or),
            ("multiply" | "minimum" | "and", true) => (ReduceOp::Min, BinaryOp::And),
            _ => return Err(Error::unsupported(line, format!("reduce with body {body}"))),
        };
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

/// The name of the op a reduce combines with: after `applies` in the pretty form, else the
/// one op of its body region that combines the region's two arguments and is returned.
fn applied_op(op: &Operation) -> Result<String, Error> {
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
                .ok_or_else(|| Error::at(line, "reduce needs a body"))?;
            match region.ops.as_slice() {
                [combine, ret]
                    if matches!(ret.name.as_str(), "stablehlo.return" | "return")
                        && combine.operands.len() == 2
                        && region
                            .args
                            .iter()
                            .all(|(a, _)| combine.operands.contains(a)) =>
                {
                    Ok(combine.name.clone())
                }
                _ => Err(Error::unsupported(
                    line,
                    "reduce with a body other than one add/multiply/maximum/minimum".to_string(),
                )),
            }
        }
    }
}
