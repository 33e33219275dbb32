//! Element types. The set is closed and small on purpose: every backend must handle each one.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DType {
    F32,
    F64,
    F16,
    BF16,
    I32,
    I64,
    /// Unsigned 32-bit integers (JAX's PRNG keys and bits): arithmetic wraps, division,
    /// comparisons and shifts are unsigned.
    U32,
    U8,
    /// The narrow and wide integers JAX programs also use (`int8`, `int16`, `uint16`,
    /// `uint64`): the same arithmetic as their 32-bit kin at their own width.
    I8,
    I16,
    U16,
    U64,
    Bool,
    /// Complex numbers of two f32 or two f64 parts (JAX's `complex64`, `complex128`).
    C64,
    C128,
}

impl DType {
    pub const ALL: [DType; 15] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U32,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::U16,
        DType::U64,
        DType::Bool,
        DType::C64,
        DType::C128,
    ];

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::I32
                | DType::I64
                | DType::U32
                | DType::U8
                | DType::I8
                | DType::I16
                | DType::U16
                | DType::U64
        )
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64 | DType::I8 | DType::I16)
    }

    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// The type of a complex type's real and imaginary parts (`None` for other types).
    pub fn complex_part(self) -> Option<DType> {
        match self {
            DType::C64 => Some(DType::F32),
            DType::C128 => Some(DType::F64),
            DType::F32
            | DType::F64
            | DType::F16
            | DType::BF16
            | DType::I32
            | DType::I64
            | DType::U32
            | DType::U8
            | DType::I8
            | DType::I16
            | DType::U16
            | DType::U64
            | DType::Bool => None,
        }
    }

    /// The complex type whose parts are of this float type (f32 and f64 only).
    pub fn complex_of(self) -> Option<DType> {
        match self {
            DType::F32 => Some(DType::C64),
            DType::F64 => Some(DType::C128),
            DType::F16
            | DType::BF16
            | DType::I32
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

    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }

    /// Floats and integers: the types arithmetic is defined on.
    pub fn is_numeric(self) -> bool {
        self.is_float() || self.is_int()
    }

    pub fn size_bytes(self) -> usize {
        match self {
            DType::C128 => 16,
            DType::F64 | DType::I64 | DType::U64 | DType::C64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::U8 | DType::I8 | DType::Bool => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U32 => "u32",
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::U64 => "u64",
            DType::Bool => "bool",
            DType::C64 => "c64",
            DType::C128 => "c128",
        }
    }

    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
