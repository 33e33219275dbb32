//! Serde for float element vectors that keeps infinities and NaNs (with their payloads) in
//! every format: human-readable formats (JSON, whose numbers cannot be `inf` or `NaN`) get each
//! element's bit pattern as an unsigned integer, binary ones (the artifacts' CBOR) the floats
//! themselves, as before.

use half::{bf16, f16};
use num_complex::Complex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A float type with a same-width bit pattern.
pub(crate) trait Bits: Sized + Copy + Serialize + for<'de> Deserialize<'de> {
    type Word: Serialize + for<'de> Deserialize<'de> + Copy;
    fn to_word(self) -> Self::Word;
    fn from_word(w: Self::Word) -> Self;
}

macro_rules! bits {
    ($($t:ty => $w:ty),*) => {$(
        impl Bits for $t {
            type Word = $w;
            fn to_word(self) -> $w {
                self.to_bits()
            }
            fn from_word(w: $w) -> $t {
                <$t>::from_bits(w)
            }
        }
    )*};
}

bits!(f32 => u32, f64 => u64, f16 => u16, bf16 => u16);

/// `#[serde(with = "float_serde::real")]` for `Vec<f32>`, `Vec<f64>`, `Vec<f16>`, `Vec<bf16>`.
pub(crate) mod real {
    use super::*;

    pub fn serialize<T: Bits, S: Serializer>(v: &[T], s: S) -> Result<S::Ok, S::Error> {
        match s.is_human_readable() {
            true => s.collect_seq(v.iter().map(|x| x.to_word())),
            false => v.serialize(s),
        }
    }

    pub fn deserialize<'de, T: Bits, D: Deserializer<'de>>(d: D) -> Result<Vec<T>, D::Error> {
        match d.is_human_readable() {
            true => Ok(Vec::<T::Word>::deserialize(d)?
                .into_iter()
                .map(T::from_word)
                .collect()),
            false => Vec::<T>::deserialize(d),
        }
    }
}

/// `#[serde(with = "float_serde::complex")]` for `Vec<Complex<f32>>` and `Vec<Complex<f64>>`:
/// in human-readable formats, each element's two parts' bit patterns.
pub(crate) mod complex {
    use super::*;

    pub fn serialize<T: Bits, S: Serializer>(v: &[Complex<T>], s: S) -> Result<S::Ok, S::Error>
    where
        Complex<T>: Serialize,
    {
        match s.is_human_readable() {
            true => s.collect_seq(v.iter().map(|z| [z.re.to_word(), z.im.to_word()])),
            false => v.serialize(s),
        }
    }

    pub fn deserialize<'de, T: Bits, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<Complex<T>>, D::Error>
    where
        Complex<T>: Deserialize<'de>,
    {
        match d.is_human_readable() {
            true => Ok(Vec::<[T::Word; 2]>::deserialize(d)?
                .into_iter()
                .map(|[re, im]| Complex::new(T::from_word(re), T::from_word(im)))
                .collect()),
            false => Vec::<Complex<T>>::deserialize(d),
        }
    }
}
