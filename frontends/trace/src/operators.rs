//! Rust operators on tensors: `+ - * / %`, the bitwise `& | ^` and the shifts `<< >>` between
//! owned or borrowed tensors and Rust numbers on either side, unary `-`, and `!`
//! (logical/bitwise not). Numbers are `f64` or `i32` only: with more number types, unsuffixed
//! literals like `x + 1.0` would not infer. `>>` is logical on unsigned integers and arithmetic
//! on signed ones, as in `jax.numpy`.

use crate::Tensor;
use ferrax_ir::BinaryOp;
use std::ops::{Add, BitAnd, BitOr, BitXor, Div, Mul, Neg, Not, Rem, Shl, Shr, Sub};

/// `op` as it applies to the tensor `t`: `>>` (written as the arithmetic shift) shifts in
/// zeros on unsigned integers.
fn on(op: BinaryOp, t: &Tensor) -> BinaryOp {
    let unsigned = t.dtype().is_int() && !t.dtype().is_signed_int();
    match op {
        BinaryOp::ShiftRightArithmetic if unsigned => BinaryOp::ShiftRightLogical,
        other => other,
    }
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:ident) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.binary(on(BinaryOp::$op, self), rhs)
            }
        }

        impl $trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                self.binary(on(BinaryOp::$op, self), &rhs)
            }
        }

        impl $trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.binary(on(BinaryOp::$op, &self), rhs)
            }
        }

        impl $trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                self.binary(on(BinaryOp::$op, &self), &rhs)
            }
        }

        binary_operator!(@numbers $trait, $method, $op, f64, i32);
    };
    (@numbers $trait:ident, $method:ident, $op:ident, $($num:ty),*) => {$(
        impl $trait<$num> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $num) -> Tensor {
                self.binary_number(on(BinaryOp::$op, self), rhs as f64, false)
            }
        }

        impl $trait<$num> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $num) -> Tensor {
                self.binary_number(on(BinaryOp::$op, &self), rhs as f64, false)
            }
        }

        impl $trait<&Tensor> for $num {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                rhs.binary_number(on(BinaryOp::$op, rhs), self as f64, true)
            }
        }

        impl $trait<Tensor> for $num {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                rhs.binary_number(on(BinaryOp::$op, &rhs), self as f64, true)
            }
        }
    )*};
}

binary_operator!(Add, add, Add);
binary_operator!(Sub, sub, Sub);
binary_operator!(Mul, mul, Mul);
binary_operator!(Div, div, Div);
binary_operator!(Rem, rem, Rem);
binary_operator!(BitAnd, bitand, And);
binary_operator!(BitOr, bitor, Or);
binary_operator!(BitXor, bitxor, Xor);
binary_operator!(Shl, shl, ShiftLeft);
binary_operator!(Shr, shr, ShiftRightArithmetic);

impl Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        crate::tensor::apply(ferrax_ir::Op::Unary(ferrax_ir::UnaryOp::Neg), &[self])
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        -&self
    }
}

impl Not for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        self.logical_not()
    }
}

impl Not for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn not(self) -> Tensor {
        self.logical_not()
    }
}
