//! StableHLO and CHLO ops the IR spells with its own ops, each exactly: `is_finite`
//! (`|x| < inf`), `popcnt` (bit counting on the unsigned view), `reduce_precision` (XLA's
//! rounding of the significand to nearest even and clamping of the exponent, on the bits),
//! `chlo.next_after` (one step of the bit pattern) and `chlo.top_k` (a stable descending sort and its permutation, first `k` along the last axis).

use super::attrs::ints;
use super::Importer;
use crate::lex::Tok;
use crate::parse::Operation;
use crate::Error;
use ferrax_ir::{
    BinaryOp, CompareOp, DType, Literal, Op, Scalar, Shape, TensorType, UnaryOp, ValueId,
};

/// The unsigned integer type of `dtype`'s width, for its bits.
fn unsigned_of(dtype: DType) -> Option<DType> {
    Some(match dtype.size_bytes() {
        1 if dtype != DType::Bool => DType::U8,
        2 => DType::U16,
        4 => DType::U32,
        8 => DType::U64,
        _ => return None,
    })
}

/// Exponent and explicit significand bits of a float dtype.
fn float_bits(dtype: DType) -> Option<(u32, u32)> {
    match dtype {
        DType::F16 => Some((5, 10)),
        DType::BF16 => Some((8, 7)),
        DType::F32 => Some((8, 23)),
        DType::F64 => Some((11, 52)),
        DType::I32
        | DType::I64
        | DType::U32
        | DType::U8
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::Bool
        | DType::C64
        | DType::C128 => None,
    }
}

impl Importer<'_> {
    /// `value` of `dtype` broadcast to `shape`.
    pub(super) fn full(
        &mut self,
        value: Scalar,
        shape: &Shape,
        line: usize,
    ) -> Result<ValueId, Error> {
        self.push(
            Op::Constant(Literal::splat(value, shape.clone())),
            &[],
            line,
        )
    }

    /// An unsigned constant of `dtype` (U8..U64) holding `bits`, broadcast to `shape`.
    fn word(
        &mut self,
        dtype: DType,
        bits: u64,
        shape: &Shape,
        line: usize,
    ) -> Result<ValueId, Error> {
        let value = match dtype {
            DType::U8 => Scalar::U8(bits as u8),
            DType::U16 => Scalar::U16(bits as u16),
            DType::U32 => Scalar::U32(bits as u32),
            _ => Scalar::U64(bits),
        };
        self.full(value, shape, line)
    }

    pub(super) fn binary(
        &mut self,
        op: BinaryOp,
        a: ValueId,
        b: ValueId,
        line: usize,
    ) -> Result<ValueId, Error> {
        self.push(Op::Binary(op), &[a, b], line)
    }

    /// `stablehlo.is_finite`, `popcnt`, `reduce_precision` and `chlo.next_after` on
    /// `args`.
    pub(super) fn composite(
        &mut self,
        short: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let x = *args
            .first()
            .ok_or_else(|| Error::at(line, format!("{short} needs an operand")))?;
        let ty = self.type_of(x, line)?;
        match (short, args.get(1)) {
            ("is_finite", None) => self.is_finite(x, &ty, line),
            ("popcnt", None) => self.popcnt(x, &ty, line),
            ("reduce_precision", None) => self.reduce_precision(op, x, &ty),
            ("chlo.next_after", Some(&y)) => self.next_after(x, y, &ty, line),
            _ => Err(Error::at(
                line,
                format!("{short} of {} operands", args.len()),
            )),
        }
    }

    fn is_finite(&mut self, x: ValueId, ty: &TensorType, line: usize) -> Result<ValueId, Error> {
        if !ty.dtype.is_float() {
            return Err(Error::at(line, format!("is_finite of {ty}")));
        }
        let magnitude = self.push(Op::Unary(UnaryOp::Abs), &[x], line)?;
        let inf = self.full(Scalar::from_f64(ty.dtype, f64::INFINITY), &ty.shape, line)?;
        self.push(Op::Compare(CompareOp::Lt), &[magnitude, inf], line)
    }

    /// The number of set bits of each element, in its own dtype.
    fn popcnt(&mut self, x: ValueId, ty: &TensorType, line: usize) -> Result<ValueId, Error> {
        let u = unsigned_of(ty.dtype)
            .filter(|_| ty.dtype.is_int())
            .ok_or_else(|| Error::at(line, format!("popcnt of {ty}")))?;
        let width = 8 * u.size_bytes() as u32;
        let ones = |pattern: u64| {
            if width == 64 {
                pattern
            } else {
                pattern & ((1 << width) - 1)
            }
        };
        let shape = &ty.shape;
        let bits = self.push(Op::BitcastConvert { to: u }, &[x], line)?;
        let shifted = |s: &mut Self, v: ValueId, by: u64| -> Result<ValueId, Error> {
            let amount = s.word(u, by, shape, line)?;
            s.binary(BinaryOp::ShiftRightLogical, v, amount, line)
        };
        // Pairs, nibbles, bytes: each field holds the count of its bits.
        let m1 = self.word(u, ones(0x5555_5555_5555_5555), shape, line)?;
        let half = shifted(self, bits, 1)?;
        let half = self.binary(BinaryOp::And, half, m1, line)?;
        let pairs = self.binary(BinaryOp::Sub, bits, half, line)?;
        let m2 = self.word(u, ones(0x3333_3333_3333_3333), shape, line)?;
        let low = self.binary(BinaryOp::And, pairs, m2, line)?;
        let high = shifted(self, pairs, 2)?;
        let high = self.binary(BinaryOp::And, high, m2, line)?;
        let nibbles = self.binary(BinaryOp::Add, low, high, line)?;
        let m4 = self.word(u, ones(0x0f0f_0f0f_0f0f_0f0f), shape, line)?;
        let upper = shifted(self, nibbles, 4)?;
        let bytes = self.binary(BinaryOp::Add, nibbles, upper, line)?;
        let bytes = self.binary(BinaryOp::And, bytes, m4, line)?;
        // The sum of the bytes gathers in the top byte.
        let spread = self.word(u, ones(0x0101_0101_0101_0101), shape, line)?;
        let summed = self.binary(BinaryOp::Mul, bytes, spread, line)?;
        let count = shifted(self, summed, u64::from(width - 8))?;
        self.push(Op::BitcastConvert { to: ty.dtype }, &[count], line)
    }

    /// XLA's `ReducePrecision`: the significand rounded to `mantissa_bits` (nearest, ties to
    /// even), then exponents beyond `exponent_bits` overflowing to infinity and underflowing
    /// to zero, both signed; NaN stays NaN.
    fn reduce_precision(
        &mut self,
        op: &Operation,
        x: ValueId,
        ty: &TensorType,
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let (exponent_bits, mantissa_bits) = precision_format(op)
            .ok_or_else(|| Error::at(line, "reduce_precision needs exponent and mantissa bits"))?;
        let (src_exponent, src_mantissa) = float_bits(ty.dtype)
            .ok_or_else(|| Error::at(line, format!("reduce_precision of {ty}")))?;
        if exponent_bits == 0 {
            return Err(Error::at(
                line,
                "reduce_precision needs at least one exponent bit",
            ));
        }
        let u = unsigned_of(ty.dtype)
            .ok_or_else(|| Error::at(line, format!("reduce_precision of {ty}")))?;
        let shape = &ty.shape;
        let mut bits = self.push(Op::BitcastConvert { to: u }, &[x], line)?;
        if mantissa_bits < src_mantissa {
            let dropped = u64::from(src_mantissa - mantissa_bits);
            let last_kept = 1u64 << dropped;
            let mask = self.word(u, last_kept, shape, line)?;
            let kept = self.binary(BinaryOp::And, bits, mask, line)?;
            let by = self.word(u, dropped, shape, line)?;
            let odd = self.binary(BinaryOp::ShiftRightLogical, kept, by, line)?;
            let base = self.word(u, (last_kept >> 1) - 1, shape, line)?;
            let bias = self.binary(BinaryOp::Add, odd, base, line)?;
            let rounded = self.binary(BinaryOp::Add, bits, bias, line)?;
            let truncation = self.word(u, !(last_kept - 1), shape, line)?;
            bits = self.binary(BinaryOp::And, rounded, truncation, line)?;
        }
        if exponent_bits < src_exponent {
            let width = 8 * u.size_bytes() as u32;
            let exponent_mask = ((1u64 << src_exponent) - 1) << src_mantissa;
            let bias = (1u64 << (src_exponent - 1)) - 1;
            let reduced_bias = (1u64 << (exponent_bits - 1)) - 1;
            let max_exponent = (bias + reduced_bias) << src_mantissa;
            let min_exponent = (bias - reduced_bias) << src_mantissa;
            let mask = self.word(u, exponent_mask, shape, line)?;
            let exponent = self.binary(BinaryOp::And, bits, mask, line)?;
            let max = self.word(u, max_exponent, shape, line)?;
            let min = self.word(u, min_exponent, shape, line)?;
            let overflows = self.push(Op::Compare(CompareOp::Gt), &[exponent, max], line)?;
            let underflows = self.push(Op::Compare(CompareOp::Le), &[exponent, min], line)?;
            let sign_mask = self.word(u, 1u64 << (width - 1), shape, line)?;
            let signed_zero = self.binary(BinaryOp::And, bits, sign_mask, line)?;
            let signed_inf = self.binary(BinaryOp::Or, signed_zero, mask, line)?;
            let low = self.push(Op::Select, &[underflows, signed_zero, bits], line)?;
            bits = self.push(Op::Select, &[overflows, signed_inf, low], line)?;
        }
        let reduced = self.push(Op::BitcastConvert { to: ty.dtype }, &[bits], line)?;
        let nan = self.push(Op::Compare(CompareOp::Ne), &[x, x], line)?;
        self.push(Op::Select, &[nan, x, reduced], line)
    }

    /// The next representable value after `x` towards `y` (`nextafter`): `y` where they are
    /// equal, NaN where either is NaN, the smallest subnormal of `y`'s sign after a zero.
    fn next_after(
        &mut self,
        x: ValueId,
        y: ValueId,
        ty: &TensorType,
        line: usize,
    ) -> Result<ValueId, Error> {
        let u = unsigned_of(ty.dtype)
            .filter(|_| ty.dtype.is_float())
            .ok_or_else(|| Error::at(line, format!("next_after of {ty}")))?;
        let shape = &ty.shape;
        let width = 8 * u.size_bytes() as u32;
        let xb = self.push(Op::BitcastConvert { to: u }, &[x], line)?;
        let yb = self.push(Op::BitcastConvert { to: u }, &[y], line)?;
        let sign_mask = self.word(u, 1u64 << (width - 1), shape, line)?;
        let magnitude_mask = self.word(u, (1u64 << (width - 1)) - 1, shape, line)?;
        let one = self.word(u, 1, shape, line)?;
        // Away from zero where x and the step have one sign: |x| grows when y is beyond x on
        // x's side of zero.
        let x_negative = self.binary(BinaryOp::And, xb, sign_mask, line)?;
        let zero_word = self.word(u, 0, shape, line)?;
        let x_is_negative =
            self.push(Op::Compare(CompareOp::Ne), &[x_negative, zero_word], line)?;
        let x_less = self.push(Op::Compare(CompareOp::Lt), &[x, y], line)?;
        let away = self.push(Op::Compare(CompareOp::Ne), &[x_less, x_is_negative], line)?;
        let up = self.binary(BinaryOp::Add, xb, one, line)?;
        let down = self.binary(BinaryOp::Sub, xb, one, line)?;
        let stepped = self.push(Op::Select, &[away, up, down], line)?;
        // From a zero: the smallest subnormal with y's sign.
        let x_magnitude = self.binary(BinaryOp::And, xb, magnitude_mask, line)?;
        let x_zero = self.push(Op::Compare(CompareOp::Eq), &[x_magnitude, zero_word], line)?;
        let y_sign = self.binary(BinaryOp::And, yb, sign_mask, line)?;
        let tiny = self.binary(BinaryOp::Or, y_sign, one, line)?;
        let from_zero = self.push(Op::Select, &[x_zero, tiny, stepped], line)?;
        let result = self.push(Op::BitcastConvert { to: ty.dtype }, &[from_zero], line)?;
        let equal = self.push(Op::Compare(CompareOp::Eq), &[x, y], line)?;
        let result = self.push(Op::Select, &[equal, y, result], line)?;
        // The canonical quiet NaN where either is a NaN, as CHLO returns.
        let x_nan = self.push(Op::Compare(CompareOp::Ne), &[x, x], line)?;
        let y_nan = self.push(Op::Compare(CompareOp::Ne), &[y, y], line)?;
        let nan = self.binary(BinaryOp::Or, x_nan, y_nan, line)?;
        let quiet = self.full(Scalar::from_f64(ty.dtype, f64::NAN), shape, line)?;
        self.push(Op::Select, &[nan, quiet, result], line)
    }

    /// `chlo.top_k`: the `k` largest along the last axis, in descending order (ties in index
    /// order), and their indices as i32. The order is the IR sort's: -0 ties with +0 and every
    /// NaN sorts above all numbers, where CHLO's total order puts -0 below +0 and -NaN lowest.
    pub(super) fn top_k(
        &mut self,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let [x] = args else {
            return Err(Error::at(line, "top_k needs one operand"));
        };
        let ty = self.type_of(*x, line)?;
        let k = top_k_count(op).ok_or_else(|| Error::at(line, "top_k needs k"))?;
        let rank = ty.rank();
        let last = rank
            .checked_sub(1)
            .ok_or_else(|| Error::at(line, "top_k of a scalar"))?;
        if k > ty.dims()[last] {
            return Err(Error::at(
                line,
                format!("top_k: k = {k} exceeds the last dimension of {ty}"),
            ));
        }
        let sorted = self.push(
            Op::Sort {
                dimension: last,
                descending: true,
            },
            &[*x],
            line,
        )?;
        let order = self.push(
            Op::Argsort {
                dimension: last,
                descending: true,
            },
            &[*x],
            line,
        )?;
        let mut limit = ty.dims().to_vec();
        limit[last] = k;
        let slice = |limit: &Vec<usize>| Op::Slice {
            start: vec![0; rank],
            limit: limit.clone(),
            strides: vec![1; rank],
        };
        Ok(vec![
            self.push(slice(&limit), &[sorted], line)?,
            self.push(slice(&limit), &[order], line)?,
        ])
    }
}

/// `format = eEmM` (pretty) or `exponent_bits = E, mantissa_bits = M` (generic).
fn precision_format(op: &Operation) -> Option<(u32, u32)> {
    if let (Some(e), Some(m)) = (op.attr(&["exponent_bits"]), op.attr(&["mantissa_bits"])) {
        let e = u32::try_from(*ints(e).first()?).ok()?;
        let m = u32::try_from(*ints(m).first()?).ok()?;
        return Some((e, m));
    }
    let tokens = op.attr(&["format"]).unwrap_or(&op.words);
    tokens.iter().find_map(|t| match t {
        Tok::Word(w) => {
            let (e, m) = w.strip_prefix('e')?.split_once('m')?;
            Some((e.parse().ok()?, m.parse().ok()?))
        }
        _ => None,
    })
}

/// `k = K` among the op's attributes or words.
fn top_k_count(op: &Operation) -> Option<usize> {
    if let Some(k) = op.attr(&["k"]) {
        return usize::try_from(*ints(k).first()?).ok();
    }
    let at = op.words.iter().position(|t| *t == Tok::Word("k".into()))?;
    op.words[at + 1..].iter().find_map(|t| match t {
        Tok::Word(w) => w.parse().ok(),
        _ => None,
    })
}
