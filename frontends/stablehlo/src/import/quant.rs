//! Uniform quantized types (`!quant.uniform`): a quantized tensor is its storage integers,
//! standing for `(q - zero_point) * scale` in the expressed float type. The IR has no
//! quantized types, so the import spells StableHLO's semantics out with ordinary ops:
//! `uniform_quantize` and `uniform_dequantize` become arithmetic, ops that only move elements
//! (a transpose, a gather) move the storage integers when every type they touch is quantized
//! alike, and every other op on quantized values dequantizes its operands, computes in the
//! expressed type and quantizes its results (the specification's
//! `dequantize_op_quantize`).

use super::{Env, Importer};
use crate::parse::Operation;
use crate::types::Quant;
use crate::Error;
use ferrax_ir::{
    BinaryOp, DType, Elements, Literal, Op, Scalar, Shape, TensorType, UnaryOp, ValueId,
};

/// Ops that only move, copy or select elements: on storage integers they give the storage of
/// their result when operands and result share one quantization.
const MOVES_ELEMENTS: [&str; 11] = [
    "broadcast_in_dim",
    "concatenate",
    "dynamic_gather",
    "dynamic_slice",
    "gather",
    "pad",
    "reshape",
    "reverse",
    "select",
    "slice",
    "transpose",
];

impl Importer<'_> {
    /// The results of `op`, some of whose operand or result types are quantized.
    pub(super) fn quantized(
        &mut self,
        short: &str,
        op: &Operation,
        args: &[ValueId],
        env: &Env,
        depth: usize,
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let operand_quant = |k: usize| op.operand_quant.get(k).and_then(Option::as_ref);
        let result_quant = op.result_quant.first().and_then(Option::as_ref);
        match short {
            "uniform_quantize" => {
                let (&[x], Some(to)) = (args, result_quant) else {
                    return Err(Error::at(
                        line,
                        "uniform_quantize takes one operand and gives a quantized result",
                    ));
                };
                let x = match operand_quant(0) {
                    Some(from) => self.dequantize(x, from, line)?,
                    None => x,
                };
                return Ok(vec![self.quantize(x, to, line)?]);
            }
            "uniform_dequantize" => {
                let (&[x], Some(from), None) = (args, operand_quant(0), result_quant) else {
                    return Err(Error::at(
                        line,
                        "uniform_dequantize takes one quantized operand and gives a float result",
                    ));
                };
                return Ok(vec![self.dequantize(x, from, line)?]);
            }
            _ => {}
        }
        // Movement on storage: every quantized type the same per-tensor quantization, and
        // every result quantized (operands that are not are indices or predicates).
        let quants: Vec<&Quant> = op
            .operand_quant
            .iter()
            .chain(&op.result_quant)
            .flatten()
            .collect();
        let alike = quants
            .windows(2)
            .all(|w| w[0] == w[1] && w[0].axis.is_none());
        let results_quantized = op.result_quant.iter().all(Option::is_some);
        if MOVES_ELEMENTS.contains(&short) && alike && results_quantized {
            return self.results(short, op, args, env, depth);
        }
        let mut expressed_args = Vec::with_capacity(args.len());
        for (k, &a) in args.iter().enumerate() {
            expressed_args.push(match operand_quant(k) {
                Some(q) => self.dequantize(a, q, line)?,
                None => a,
            });
        }
        let results = self.results(short, &expressed(op), &expressed_args, env, depth)?;
        let mut out = Vec::with_capacity(results.len());
        for (k, v) in results.into_iter().enumerate() {
            out.push(match op.result_quant.get(k).and_then(Option::as_ref) {
                Some(q) => self.quantize(v, q, line)?,
                None => v,
            });
        }
        Ok(out)
    }

    /// One value per tensor (`axis` `None`) or per index of `axis`, of `dtype`, broadcast to
    /// `shape`: a quantization's scales or zero points.
    fn parameters(
        &mut self,
        axis: Option<usize>,
        dtype: DType,
        values: impl Iterator<Item = f64>,
        shape: &Shape,
        line: usize,
    ) -> Result<ValueId, Error> {
        let scalars: Vec<Scalar> = values.map(|v| Scalar::from_f64(dtype, v)).collect();
        match (axis, scalars.as_slice()) {
            (None, &[s]) => self.full(s, shape, line),
            (Some(axis), _) => {
                let data = Elements::from_scalars(dtype, &scalars)
                    .ok_or_else(|| Error::at(line, "quantization parameters of mixed types"))?;
                let ty = TensorType::new(dtype, vec![scalars.len()]);
                let per_index = self.push(Op::Constant(Literal { ty, data }), &[], line)?;
                self.push(
                    Op::BroadcastInDim {
                        shape: shape.clone(),
                        dims: vec![axis],
                    },
                    &[per_index],
                    line,
                )
            }
            (None, _) => Err(Error::at(line, "a per-tensor quantization has one scale")),
        }
    }

    /// `uniform_quantize` of the float tensor `x` to `q`: `x / scale` rounded to nearest even,
    /// plus the zero point, clamped to the storage range (NaN stays NaN), converted to the
    /// storage type (NaN to 0), all in the expressed type.
    fn quantize(&mut self, x: ValueId, q: &Quant, line: usize) -> Result<ValueId, Error> {
        let ty = self.type_of(x, line)?;
        if ty.dtype != q.expressed {
            return Err(Error::at(
                line,
                format!(
                    "quantizing {} values to a type expressed in {}",
                    ty.dtype, q.expressed
                ),
            ));
        }
        let (axis, shape) = (q.axis, &ty.shape);
        let scale = self.parameters(axis, q.expressed, q.scales.iter().copied(), shape, line)?;
        let zero_points = q.zero_points.iter().map(|&z| z as f64);
        let zero_point = self.parameters(axis, q.expressed, zero_points, shape, line)?;
        let lowest = self.full(
            Scalar::from_f64(q.expressed, q.storage_min as f64),
            &ty.shape,
            line,
        )?;
        let highest = self.full(
            Scalar::from_f64(q.expressed, q.storage_max as f64),
            &ty.shape,
            line,
        )?;
        let scaled = self.binary(BinaryOp::Div, x, scale, line)?;
        let rounded = self.push(Op::Unary(UnaryOp::RoundEven), &[scaled], line)?;
        let shifted = self.binary(BinaryOp::Add, rounded, zero_point, line)?;
        let clamped = self.push(Op::Clamp, &[lowest, shifted, highest], line)?;
        self.push(Op::Convert { to: q.storage }, &[clamped], line)
    }

    /// `uniform_dequantize` of the storage integers `x` of `q`: `x - zero_point` (in i64, which
    /// holds every difference of two storage values), converted to the expressed type, times
    /// the scale.
    fn dequantize(&mut self, x: ValueId, q: &Quant, line: usize) -> Result<ValueId, Error> {
        let ty = self.type_of(x, line)?;
        let wide = self.push(Op::Convert { to: DType::I64 }, &[x], line)?;
        // Zero points are storage values: exact in f64, so exact as i64 again.
        let zero_points = q.zero_points.iter().map(|&z| z as f64);
        let zero_point = self.parameters(q.axis, DType::I64, zero_points, &ty.shape, line)?;
        let centred = self.binary(BinaryOp::Sub, wide, zero_point, line)?;
        let expressed = self.push(Op::Convert { to: q.expressed }, &[centred], line)?;
        let scales = q.scales.iter().copied();
        let scale = self.parameters(q.axis, q.expressed, scales, &ty.shape, line)?;
        self.binary(BinaryOp::Mul, expressed, scale, line)
    }
}

/// `op` with each quantized operand and result type replaced by its expressed type: the op
/// `dequantize_op_quantize` computes.
fn expressed(op: &Operation) -> Operation {
    let mut op = op.clone();
    for (ty, q) in op
        .operand_types
        .iter_mut()
        .zip(&op.operand_quant)
        .chain(op.result_types.iter_mut().zip(&op.result_quant))
    {
        if let Some(q) = q {
            ty.dtype = q.expressed;
        }
    }
    op.operand_quant = vec![None; op.operand_quant.len()];
    op.result_quant = vec![None; op.result_quant.len()];
    op
}
