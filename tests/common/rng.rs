//! The fuzzers' small, deterministic random numbers (xorshift64*), and inputs of any dtype.

use ferrax::ir::{Complex, Elements};
use ferrax::{Array, DType, Func};

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Deterministic inputs of any dtype: floats in [-2, 2), integers in -1..=4 (so that gathers
/// and scatters see negative and out-of-range indices), alternating bools.
pub fn any_inputs(func: &Func, seed: u64) -> Vec<Array> {
    let mut g = Rng::new(seed ^ 0x5DEE_CE66);
    func.params
        .iter()
        .map(|t| {
            let n = t.numel();
            let mut float = || (g.next_u64() >> 40) as f64 / (1u64 << 22) as f64 - 2.0;
            let data = match t.dtype {
                DType::F32 => Elements::F32((0..n).map(|_| float() as f32).collect()),
                DType::F64 => Elements::F64((0..n).map(|_| float()).collect()),
                DType::F16 => Elements::F16((0..n).map(|_| half::f16::from_f64(float())).collect()),
                DType::BF16 => {
                    Elements::BF16((0..n).map(|_| half::bf16::from_f64(float())).collect())
                }
                DType::I32 => Elements::I32((0..n).map(|_| (float() * 1.5 + 1.5) as i32).collect()),
                DType::I64 => Elements::I64((0..n).map(|_| (float() * 1.5 + 1.5) as i64).collect()),
                DType::U32 => Elements::U32((0..n).map(|_| (float() + 2.0) as u32).collect()),
                DType::U8 => Elements::U8((0..n).map(|_| (float() + 2.0) as u8).collect()),
                DType::I8 => Elements::I8((0..n).map(|_| (float() * 1.5 + 1.5) as i8).collect()),
                DType::I16 => Elements::I16((0..n).map(|_| (float() * 1.5 + 1.5) as i16).collect()),
                DType::U16 => Elements::U16((0..n).map(|_| (float() + 2.0) as u16).collect()),
                DType::U64 => Elements::U64((0..n).map(|_| (float() + 2.0) as u64).collect()),
                DType::Bool => Elements::Bool((0..n).map(|i| i % 2 == 0).collect()),
                DType::C64 => Elements::C64(
                    (0..n)
                        .map(|_| Complex::new(float() as f32, float() as f32))
                        .collect(),
                ),
                DType::C128 => {
                    Elements::C128((0..n).map(|_| Complex::new(float(), float())).collect())
                }
            };
            Array::new(t.shape.clone(), data).unwrap()
        })
        .collect()
}
