//! `stablehlo.rng_bit_generator` with the `PHILOX` algorithm (and `DEFAULT`, which XLA's CPU
//! and GPU compilers take to be Philox), as XLA computes it: Philox4x32 with 10 rounds. The key
//! is the state's first word (its low and high halves); the 128-bit counter is the state's
//! second word (low) over its first (high), or for a `u64[3]` state its second over its third.
//! Block `j` hashes the counter plus `j` into four u32 words; the blocks' words, in order, make
//! the u32 results, and pairs of them (low word first) the u64 ones; the last block's unused
//! words are dropped. The new state is the key and the counter advanced by the block count
//! (for a `u64[2]` state only its low word, as XLA keeps it).

use super::Importer;
use crate::Error;
use ferrax_ir::{BinaryOp, CompareOp, DType, Op, Scalar, Shape, ValueId};

/// Philox4x32's round multipliers and key increments.
const MULTIPLIERS: [u64; 2] = [0xD251_1F53, 0xCD9E_8D57];
const KEY_STEPS: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];
const ROUNDS: usize = 10;

/// Emits ops of one shape at one line.
struct Emit<'i, 'p> {
    importer: &'i mut Importer<'p>,
    line: usize,
}

impl Emit<'_, '_> {
    fn push(&mut self, op: Op, args: &[ValueId]) -> Result<ValueId, Error> {
        self.importer.push(op, args, self.line)
    }

    fn binary(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> Result<ValueId, Error> {
        self.push(Op::Binary(op), &[a, b])
    }

    fn full(&mut self, value: Scalar, shape: &Shape) -> Result<ValueId, Error> {
        self.importer.full(value, shape, self.line)
    }

    fn convert(&mut self, v: ValueId, to: DType) -> Result<ValueId, Error> {
        self.push(Op::Convert { to }, &[v])
    }

    /// The low and high u32 halves of u64 `v`.
    fn halves(&mut self, v: ValueId, shape: &Shape) -> Result<[ValueId; 2], Error> {
        let low = self.convert(v, DType::U32)?;
        let thirty_two = self.full(Scalar::U64(32), shape)?;
        let shifted = self.binary(BinaryOp::ShiftRightLogical, v, thirty_two)?;
        Ok([low, self.convert(shifted, DType::U32)?])
    }

    /// `low | high << 32` of u32 halves, as u64.
    fn joined(&mut self, low: ValueId, high: ValueId, shape: &Shape) -> Result<ValueId, Error> {
        let low = self.convert(low, DType::U64)?;
        let high = self.convert(high, DType::U64)?;
        let thirty_two = self.full(Scalar::U64(32), shape)?;
        let high = self.binary(BinaryOp::ShiftLeft, high, thirty_two)?;
        self.binary(BinaryOp::Or, low, high)
    }

    /// Element `index` of the u64 vector `v`, as a scalar.
    fn word(&mut self, v: ValueId, index: usize) -> Result<ValueId, Error> {
        let slice = Op::Slice {
            start: vec![index],
            limit: vec![index + 1],
            strides: vec![1],
        };
        let one = self.push(slice, &[v])?;
        self.push(
            Op::Reshape {
                shape: Shape::scalar(),
            },
            &[one],
        )
    }

    /// The 128-bit `(low, high)` plus u64 `add` (both of `shape`).
    fn add128(
        &mut self,
        (low, high): (ValueId, ValueId),
        add: ValueId,
        shape: &Shape,
    ) -> Result<(ValueId, ValueId), Error> {
        let sum = self.binary(BinaryOp::Add, low, add)?;
        let wrapped = self.push(Op::Compare(CompareOp::Lt), &[sum, low])?;
        let one = self.full(Scalar::U64(1), shape)?;
        let carried = self.binary(BinaryOp::Add, high, one)?;
        let high = self.push(Op::Select, &[wrapped, carried, high])?;
        Ok((sum, high))
    }

    /// Philox4x32's ten rounds on the counter words `x` under the key words `key`.
    fn philox(
        &mut self,
        mut x: [ValueId; 4],
        key: [ValueId; 2],
        shape: &Shape,
    ) -> Result<[ValueId; 4], Error> {
        let mut key = key;
        for round in 0..ROUNDS {
            if round > 0 {
                for (k, step) in key.iter_mut().zip(KEY_STEPS) {
                    let step = self.full(Scalar::U32(step), shape)?;
                    *k = self.binary(BinaryOp::Add, *k, step)?;
                }
            }
            // The high and low words of x[0]·M0 and x[2]·M1.
            let mut products = Vec::with_capacity(2);
            for (word, multiplier) in [x[0], x[2]].into_iter().zip(MULTIPLIERS) {
                let wide = self.convert(word, DType::U64)?;
                let m = self.full(Scalar::U64(multiplier), shape)?;
                let product = self.binary(BinaryOp::Mul, wide, m)?;
                products.push(self.halves(product, shape)?);
            }
            let ([low0, high0], [low1, high1]) = (products[0], products[1]);
            let y0 = self.binary(BinaryOp::Xor, high1, x[1])?;
            let y0 = self.binary(BinaryOp::Xor, y0, key[0])?;
            let y2 = self.binary(BinaryOp::Xor, high0, x[3])?;
            let y2 = self.binary(BinaryOp::Xor, y2, key[1])?;
            x = [y0, low1, y2, low0];
        }
        Ok(x)
    }
}

impl Importer<'_> {
    /// The new state and the bits (`out`, u32 or u64) of Philox from `state` (`u64[2]` or
    /// `u64[3]`).
    pub(super) fn philox_bits(
        &mut self,
        state: ValueId,
        state_len: usize,
        out: &ferrax_ir::TensorType,
        line: usize,
    ) -> Result<Vec<ValueId>, Error> {
        let words_per_element = match out.dtype {
            DType::U32 => 1,
            DType::U64 => 2,
            other => {
                return Err(Error::unsupported(
                    line,
                    format!(
                        "rng_bit_generator of {other} bits with PHILOX (u32 and u64 are built)"
                    ),
                ))
            }
        };
        let count = out.shape.numel();
        let blocks = count
            .checked_mul(words_per_element)
            .map(|words| words.div_ceil(4))
            .ok_or_else(|| Error::at(line, "rng_bit_generator: too many bits"))?;
        let mut e = Emit {
            importer: self,
            line,
        };
        let scalar = Shape::scalar();
        let key = e.word(state, 0)?;
        let counter = match state_len {
            2 => (e.word(state, 1)?, key),
            _ => (e.word(state, 1)?, e.word(state, 2)?),
        };
        // Each block's counter: the state's plus the block's index.
        let lane = Shape::new([blocks]);
        let spread = |e: &mut Emit, v: ValueId| {
            e.push(
                Op::BroadcastInDim {
                    shape: lane.clone(),
                    dims: Vec::new(),
                },
                &[v],
            )
        };
        let index = e.push(
            Op::Iota {
                dtype: DType::U64,
                shape: lane.clone(),
                dim: 0,
            },
            &[],
        )?;
        let start = (spread(&mut e, counter.0)?, spread(&mut e, counter.1)?);
        let (low, high) = e.add128(start, index, &lane)?;
        let [c0, c1] = e.halves(low, &lane)?;
        let [c2, c3] = e.halves(high, &lane)?;
        let keys = spread(&mut e, key)?;
        let [k0, k1] = e.halves(keys, &lane)?;
        let words = e.philox([c0, c1, c2, c3], [k0, k1], &lane)?;
        // Block j's values side by side, then in row-major order.
        let per_block = 4 / words_per_element;
        let values = match words_per_element {
            1 => words.to_vec(),
            _ => vec![
                e.joined(words[0], words[1], &lane)?,
                e.joined(words[2], words[3], &lane)?,
            ],
        };
        let column = Op::Reshape {
            shape: Shape::new([blocks, 1]),
        };
        let columns = values
            .into_iter()
            .map(|v| e.push(column.clone(), &[v]))
            .collect::<Result<Vec<_>, _>>()?;
        let table = e.push(Op::Concatenate { axis: 1 }, &columns)?;
        let flat = e.push(
            Op::Reshape {
                shape: Shape::new([blocks * per_block]),
            },
            &[table],
        )?;
        let first = e.push(
            Op::Slice {
                start: vec![0],
                limit: vec![count],
                strides: vec![1],
            },
            &[flat],
        )?;
        let bits = e.push(
            Op::Reshape {
                shape: out.shape.clone(),
            },
            &[first],
        )?;
        // The new state: the key and the counter past every block.
        let advance = e.full(Scalar::U64(blocks as u64), &scalar)?;
        let (low, high) = e.add128(counter, advance, &scalar)?;
        let vector = Op::Reshape {
            shape: Shape::new([1]),
        };
        let mut parts = vec![
            e.push(vector.clone(), &[key])?,
            e.push(vector.clone(), &[low])?,
        ];
        if state_len == 3 {
            parts.push(e.push(vector, &[high])?);
        }
        let new_state = e.push(Op::Concatenate { axis: 0 }, &parts)?;
        Ok(vec![new_state, bits])
    }
}
