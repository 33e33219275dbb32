//! `stablehlo.rng_bit_generator` with the `THREE_FRY` algorithm and u64 results, as XLA
//! computes it: the state `u64[2]` is a key and a counter; element `i` (row-major) of the
//! result is the threefry2x32 hash (`ferrax_ir::threefry2x32`, JAX's PRNG's rounds) of the
//! counter `state[1] + i` (its low and high words) under the key's low and high words, the
//! hash's words its low and high halves; the new state is the key and the counter advanced
//! by the element count. `PHILOX` and `DEFAULT` are `philox.rs`'s. Other algorithms and
//! result types are implementation-defined or not built, and refused as unsupported.

use super::Importer;
use crate::lex::Tok;
use crate::parse::Operation;
use crate::Error;
use ferrax_ir::{
    threefry2x32, BinaryOp, DType, Op, Scalar, Shape, ThreefrySchedule, ValueId, Words,
};

/// `u32` words of one shape, emitted into the importer at the op's line.
struct ImportedWords<'i, 'p> {
    importer: &'i mut Importer<'p>,
    shape: Shape,
    line: usize,
}

impl ImportedWords<'_, '_> {
    fn binary(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> Result<ValueId, Error> {
        self.importer.push(Op::Binary(op), &[a, b], self.line)
    }
}

impl Words for ImportedWords<'_, '_> {
    type Word = ValueId;
    type Error = Error;

    fn add(&mut self, a: &ValueId, b: &ValueId) -> Result<ValueId, Error> {
        self.binary(BinaryOp::Add, *a, *b)
    }

    fn xor(&mut self, a: &ValueId, b: &ValueId) -> Result<ValueId, Error> {
        self.binary(BinaryOp::Xor, *a, *b)
    }

    fn rotate_left(&mut self, x: &ValueId, distance: u32) -> Result<ValueId, Error> {
        let (left, right) = (self.constant(distance)?, self.constant(32 - distance)?);
        let high = self.binary(BinaryOp::ShiftLeft, *x, left)?;
        let low = self.binary(BinaryOp::ShiftRightLogical, *x, right)?;
        self.binary(BinaryOp::Or, high, low)
    }

    fn constant(&mut self, value: u32) -> Result<ValueId, Error> {
        let (shape, line) = (self.shape.clone(), self.line);
        self.importer.full(Scalar::U32(value), &shape, line)
    }
}

impl Importer<'_> {
    pub(super) fn rng_bit_generator(
        &mut self,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let algorithm = op
            .attr(&["algorithm", "rng_algorithm"])
            .and_then(|tokens| {
                tokens.iter().rev().find_map(|t| match t {
                    Tok::Word(w) if w.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
                        Some(w.as_str())
                    }
                    _ => None,
                })
            })
            .unwrap_or("DEFAULT");
        let (&[state], [state_ty, out_ty]) = (args, op.result_types.as_slice()) else {
            return Err(Error::at(
                line,
                "rng_bit_generator takes a state and gives a state and bits",
            ));
        };
        let given = self.b.value_type(state).cloned();
        match algorithm {
            "THREE_FRY" => {}
            "PHILOX" | "DEFAULT" => {
                let len = state_ty.shape.dims().first().copied().unwrap_or(0);
                if state_ty.dtype != DType::U64
                    || state_ty.rank() != 1
                    || !(2..=3).contains(&len)
                    || given.as_ref() != Some(state_ty)
                {
                    return Err(Error::unsupported(
                        line,
                        format!("rng_bit_generator with a {state_ty} state (PHILOX's is ui64[2] or ui64[3])"),
                    ));
                }
                return self.philox_bits(state, len, out_ty, line);
            }
            other => {
                return Err(Error::unsupported(
                    line,
                    format!("rng_bit_generator with the {other} algorithm"),
                ))
            }
        }
        let words_of_state = Shape::new([2]);
        if state_ty.dtype != DType::U64
            || state_ty.shape != words_of_state
            || given.as_ref() != Some(state_ty)
        {
            return Err(Error::unsupported(
                line,
                format!("rng_bit_generator with a {state_ty} state (THREE_FRY's is ui64[2])"),
            ));
        }
        if out_ty.dtype != DType::U64 {
            return Err(Error::unsupported(
                line,
                format!("rng_bit_generator of {} bits (u64 is built)", out_ty.dtype),
            ));
        }
        let shape = out_ty.shape.clone();
        let count = shape.numel() as u64;
        let u64_word =
            |s: &mut Self, bits: u64, shape: &Shape| s.full(Scalar::U64(bits), shape, line);
        let part = |s: &mut Self, index: usize| -> Result<ValueId, Error> {
            let slice = Op::Slice {
                start: vec![index],
                limit: vec![index + 1],
                strides: vec![1],
            };
            let one = s.push(slice, &[state], line)?;
            s.push(
                Op::Reshape {
                    shape: Shape::scalar(),
                },
                &[one],
                line,
            )
        };
        let (key, counter) = (part(self, 0)?, part(self, 1)?);
        // The low and high words of a u64 value.
        let halves = |s: &mut Self, v: ValueId, shape: &Shape| -> Result<[ValueId; 2], Error> {
            let low = s.push(Op::Convert { to: DType::U32 }, &[v], line)?;
            let thirty_two = u64_word(s, 32, shape)?;
            let shifted = s.push(
                Op::Binary(BinaryOp::ShiftRightLogical),
                &[v, thirty_two],
                line,
            )?;
            let high = s.push(Op::Convert { to: DType::U32 }, &[shifted], line)?;
            Ok([low, high])
        };
        // Each element's counter: the state's plus its row-major index.
        let rank = shape.rank();
        let spread = Op::BroadcastInDim {
            shape: shape.clone(),
            dims: Vec::new(),
        };
        let mut counters = self.push(spread.clone(), &[counter], line)?;
        let mut stride = 1u64;
        for axis in (0..rank).rev() {
            let size = shape.dims()[axis];
            if size > 1 {
                let iota = Op::Iota {
                    dtype: DType::U64,
                    shape: shape.clone(),
                    dim: axis,
                };
                let index = self.push(iota, &[], line)?;
                let step = u64_word(self, stride, &shape)?;
                let offset = self.push(Op::Binary(BinaryOp::Mul), &[index, step], line)?;
                counters = self.push(Op::Binary(BinaryOp::Add), &[counters, offset], line)?;
            }
            stride = stride.wrapping_mul(size as u64);
        }
        let keys = self.push(spread, &[key], line)?;
        let [k1, k2] = halves(self, keys, &shape)?;
        let x = halves(self, counters, &shape)?;
        let mut words = ImportedWords {
            importer: self,
            shape: shape.clone(),
            line,
        };
        let schedule = ThreefrySchedule::new(&mut words, &k1, &k2)?;
        let [y0, y1] = threefry2x32(&mut words, &schedule, x)?;
        let low = self.push(Op::Convert { to: DType::U64 }, &[y0], line)?;
        let high = self.push(Op::Convert { to: DType::U64 }, &[y1], line)?;
        let thirty_two = u64_word(self, 32, &shape)?;
        let high = self.push(Op::Binary(BinaryOp::ShiftLeft), &[high, thirty_two], line)?;
        let bits = self.push(Op::Binary(BinaryOp::Or), &[low, high], line)?;
        // The new state: the key, and the counter advanced past every element.
        let advance = u64_word(self, count, &Shape::scalar())?;
        let advanced = self.push(Op::Binary(BinaryOp::Add), &[counter, advance], line)?;
        let as_vector = Op::Reshape {
            shape: Shape::new([1]),
        };
        let key = self.push(as_vector.clone(), &[key], line)?;
        let advanced = self.push(as_vector, &[advanced], line)?;
        let new_state = self.push(Op::Concatenate { axis: 0 }, &[key, advanced], line)?;
        Ok(vec![new_state, bits])
    }
}
