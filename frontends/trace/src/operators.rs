//! Rust operators on tensors: `+ - * / %` between owned or borrowed tensors and Rust numbers
//! on either side, unary `-`, and `!` (logical/bitwise not). Numbers are `f64` or `i32` only:
//! with more number types, unsuffixed literals like `x + 1.0` would not infer.

use crate::Tensor;
use ferrax_ir::BinaryOp;
use std::ops::{Add, Div, Mul, Neg, Not, Rem, Sub};

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:ident) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.binary(BinaryOp::$op, rhs)
            }
        }

        impl $trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                self.binary(BinaryOp::$op, &rhs)
            }
        }

        impl $trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.binary(BinaryOp::$op, rhs)
            }
        }

        impl $trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                self.binary(BinaryOp::$op, &rhs)
            }
        }

        binary_operator!(@numbers $trait, $method, $op, f64, i32);
    };
    (@numbers $trait:ident, $method:ident, $op:ident, $($num:ty),*) => {$(
        impl $trait<$num> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $num) -> Tensor {
                self.binary_number(BinaryOp::$op, rhs as f64, false)
            }
        }

        impl $trait<$num> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $num) -> Tensor {
                self.binary_number(BinaryOp::$op, rhs as f64, false)
            }
        }

        impl $trait<&Tensor> for $num {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                rhs.binary_number(BinaryOp::$op, self as f64, true)
            }
        }

        impl $trait<Tensor> for $num {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                rhs.binary_number(BinaryOp::$op, self as f64, true)
            }
        }
    )*};
}

binary_operator!(Add, add, Add);
binary_operator!(Sub, sub, Sub);
binary_operator!(Mul, mul, Mul);
binary_operator!(Div, div, Div);
binary_operator!(Rem, rem, Rem);

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
