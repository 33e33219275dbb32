//! Instruction selection: the PTX of one lane of one arithmetic instruction of a legalized
//! kernel, on its arguments' registers. Float arithmetic takes the `.rn` forms (so `ptxas`
//! never contracts a product and a sum on its own), and where PTX's instruction differs from
//! the interpreter (max and min on NaN and zeros, integer division by zero, rounding) a
//! sequence ([`super::sequences`]) computes what the interpreter does.

use super::emit::{float_literal, reg_class, suffix, Class, Emitter};
use super::{MathMode, PtxError};
use crate::kernel::halves::is_half;
use crate::kernel::{math, Access, Buffer, KInstr, KOp, Kernel, KernelSig, Role};
use ferrax_ir::{BinaryOp, CompareOp, DType, Scalar, UnaryOp, ValueId};

/// One lane of an arithmetic instruction, on argument registers `args`; returns its register.
pub(super) fn emit_op(
    e: &mut Emitter,
    kernel: &Kernel,
    ins: &KInstr,
    args: &[String],
) -> Result<String, PtxError> {
    let d = ins.dtype;
    let (t, bits) = suffix(d);
    let class = reg_class(d);
    let arg = |k: usize| args[k].clone();
    let out = match &ins.op {
        KOp::Unary(u) => emit_unary(e, kernel, *u, d, &arg(0))?,
        KOp::Binary(op) => emit_binary(e, *op, d, &arg(0), &arg(1)),
        KOp::Compare(c) => {
            let from = kernel.body[ins.args[0]].dtype;
            emit_compare(e, *c, from, &arg(0), &arg(1))
        }
        KOp::Select => {
            let (p, a, b) = (arg(0), arg(1), arg(2));
            let r = e.reg(class);
            if d == DType::Bool {
                let (x, y, np) = (e.reg(Class::P), e.reg(Class::P), e.reg(Class::P));
                e.line(format!("and.pred {x}, {p}, {a}"));
                e.line(format!("not.pred {np}, {p}"));
                e.line(format!("and.pred {y}, {np}, {b}"));
                e.line(format!("or.pred {r}, {x}, {y}"));
            } else {
                e.line(format!("selp.{t} {r}, {a}, {b}, {p}"));
            }
            r
        }
        KOp::Clamp if matches!(d, DType::I32 | DType::I64 | DType::U32) => {
            let (low, r) = (e.reg(class), e.reg(class));
            e.line(format!("max.{t} {low}, {}, {}", arg(1), arg(0)));
            e.line(format!("min.{t} {r}, {low}, {}", arg(2)));
            r
        }
        KOp::Clamp => {
            let low = e.min_max(&arg(1), &arg(0), d, true);
            e.min_max(&low, &arg(2), d, false)
        }
        KOp::Convert(to) => {
            let from = kernel.body[ins.args[0]].dtype;
            emit_convert(e, kernel, from, *to, &arg(0))?
        }
        KOp::Fma => {
            let r = e.reg(class);
            e.line(format!(
                "fma.rn.{t} {r}, {}, {}, {}",
                arg(0),
                arg(1),
                arg(2)
            ));
            r
        }
        KOp::Bitcast => {
            let r = e.reg(class);
            e.line(format!("mov.{bits} {r}, {}", arg(0)));
            r
        }
        KOp::ShiftLeft(n) => {
            let r = e.reg(class);
            e.line(format!("shl.{bits} {r}, {}, {n}", arg(0)));
            r
        }
        // Sign-filling on every integer type (`kernel::integers` masks a logical shift).
        KOp::ShiftRight(n) => {
            let r = e.reg(class);
            let signed = if d == DType::U32 { "s32" } else { t };
            e.line(format!("shr.{signed} {r}, {}, {n}", arg(0)));
            r
        }
        KOp::ShiftRightLogical(n) => {
            let r = e.reg(class);
            e.line(format!("shr.u32 {r}, {}, {n}", arg(0)));
            r
        }
        KOp::Beyond(u) => emit_beyond(e, kernel, *u, d, &arg(0), &arg(1))?,
        KOp::Load(_)
        | KOp::Const(_)
        | KOp::Index { .. }
        | KOp::Store(_)
        | KOp::Reduce(_)
        | KOp::Accumulate(_) => {
            return Err(PtxError::unsupported(
                kernel,
                format!("{:?} as arithmetic", ins.op),
            ))
        }
    };
    Ok(out)
}

/// `u(x)` on `d` into a new register.
fn emit_unary(
    e: &mut Emitter,
    kernel: &Kernel,
    u: UnaryOp,
    d: DType,
    x: &str,
) -> Result<String, PtxError> {
    let (t, bits) = suffix(d);
    let class = reg_class(d);
    let fast = e.mode == MathMode::Fast && d == DType::F32;
    let r = e.reg(class);
    match u {
        UnaryOp::Not if d == DType::Bool => e.line(format!("not.pred {r}, {x}")),
        UnaryOp::Not => e.line(format!("not.{bits} {r}, {x}")),
        UnaryOp::Neg => e.line(format!("neg.{t} {r}, {x}")),
        UnaryOp::Abs => e.line(format!("abs.{t} {r}, {x}")),
        UnaryOp::Sqrt if fast => e.line(format!("sqrt.approx.{t} {r}, {x}")),
        UnaryOp::Sqrt => e.line(format!("sqrt.rn.{t} {r}, {x}")),
        // Fast math's approximations (`support::support_fast`), in base 2.
        UnaryOp::Exp if fast => {
            let log2e = e.constant(Scalar::F32(std::f32::consts::LOG2_E), d);
            let scaled = e.reg(class);
            e.line(format!("mul.rn.{t} {scaled}, {x}, {log2e}"));
            e.line(format!("ex2.approx.{t} {r}, {scaled}"));
        }
        UnaryOp::Log if fast => {
            let ln2 = e.constant(Scalar::F32(std::f32::consts::LN_2), d);
            let log2 = e.reg(class);
            e.line(format!("lg2.approx.{t} {log2}, {x}"));
            e.line(format!("mul.rn.{t} {r}, {log2}, {ln2}"));
        }
        UnaryOp::Sin if fast => e.line(format!("sin.approx.{t} {r}, {x}")),
        UnaryOp::Cos if fast => e.line(format!("cos.approx.{t} {r}, {x}")),
        UnaryOp::Rsqrt if fast => e.line(format!("rsqrt.approx.{t} {r}, {x}")),
        UnaryOp::Floor => e.line(format!("cvt.rmi.{t}.{t} {r}, {x}")),
        UnaryOp::Ceil => e.line(format!("cvt.rpi.{t}.{t} {r}, {x}")),
        UnaryOp::RoundEven => e.line(format!("cvt.rni.{t}.{t} {r}, {x}")),
        UnaryOp::Round => {
            // Truncate, then step away from zero when the dropped part is >= 1/2.
            let (tr, diff, ad, one, step, sum) = (
                e.reg(class),
                e.reg(class),
                e.reg(class),
                e.reg(class),
                e.reg(class),
                e.reg(class),
            );
            let p = e.reg(Class::P);
            let half = float_literal(half_of(d)).unwrap_or_default();
            let unit = float_literal(one_of(d)).unwrap_or_default();
            e.line(format!("cvt.rzi.{t}.{t} {tr}, {x}"));
            e.line(format!("sub.rn.{t} {diff}, {x}, {tr}"));
            e.line(format!("abs.{t} {ad}, {diff}"));
            e.line(format!("setp.ge.{t} {p}, {ad}, {half}"));
            e.line(format!("mov.{t} {one}, {unit}"));
            e.line(format!("copysign.{t} {step}, {x}, {one}"));
            e.line(format!("add.rn.{t} {sum}, {tr}, {step}"));
            e.line(format!("selp.{t} {r}, {sum}, {tr}, {p}"));
        }
        // -1, 0 or 1; `abs.s32` wraps `MIN` to itself, as the interpreter's abs.
        UnaryOp::Sign if matches!(d, DType::I32 | DType::I64) => {
            let t1 = e.reg(class);
            e.line(format!("max.{t} {t1}, {x}, -1"));
            e.line(format!("min.{t} {r}, {t1}, 1"));
        }
        UnaryOp::Sign => {
            // ±1 by the sign bit; zeros and NaN are returned as they are.
            let (one, zero, signed) = (e.reg(class), e.reg(class), e.reg(class));
            let z = e.reg(Class::P);
            let unit = float_literal(one_of(d)).unwrap_or_default();
            let nil = float_literal(zero_of(d)).unwrap_or_default();
            e.line(format!("mov.{t} {one}, {unit}"));
            e.line(format!("mov.{t} {zero}, {nil}"));
            e.line(format!("copysign.{t} {signed}, {x}, {one}"));
            e.line(format!("setp.equ.{t} {z}, {x}, {zero}"));
            e.line(format!("selp.{t} {r}, {x}, {signed}, {z}"));
        }
        // Transcendentals were expanded by `legalize`.
        other => {
            return Err(PtxError::unsupported(
                kernel,
                format!("unexpanded {}", other.name()),
            ))
        }
    }
    Ok(r)
}

/// `a op b` on `d` into a new register.
fn emit_binary(e: &mut Emitter, op: BinaryOp, d: DType, a: &str, b: &str) -> String {
    let (t, bits) = suffix(d);
    let fast = e.mode == MathMode::Fast && d == DType::F32;
    match (d, op) {
        (DType::F32 | DType::F64, BinaryOp::Max | BinaryOp::Min) => {
            e.min_max(a, b, d, op == BinaryOp::Max)
        }
        (DType::I32 | DType::I64, BinaryOp::Div | BinaryOp::Rem) => {
            e.int_division(a, b, d, op == BinaryOp::Div)
        }
        (DType::F64, BinaryOp::Rem) => e.f64_remainder(a, b),
        _ => {
            let r = e.reg(reg_class(d));
            let int = matches!(d, DType::I32 | DType::I64 | DType::U32);
            let name = match op {
                BinaryOp::Add => format!("add{}", rn(d)),
                BinaryOp::Sub => format!("sub{}", rn(d)),
                // Wrapping, as the interpreter's i32 product.
                BinaryOp::Mul if int => "mul.lo".to_string(),
                BinaryOp::Mul => format!("mul{}", rn(d)),
                BinaryOp::Div if fast => "div.full".to_string(),
                BinaryOp::Div => format!("div{}", rn(d)),
                BinaryOp::Max | BinaryOp::Min | BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
                    op.name().to_string()
                }
                // Integer and f64 remainders are the sequences above; f32 ones and powers are
                // expanded by legalization (the support table marks them `Expand`), and
                // arctangents and complex numbers run on the host (`Host`): neither reaches
                // here.
                BinaryOp::Rem | BinaryOp::Pow | BinaryOp::Atan2 | BinaryOp::Complex => {
                    op.name().to_string()
                }
                // Amounts above the width are clamped to it: 0, or every bit the sign's.
                BinaryOp::ShiftLeft
                | BinaryOp::ShiftRightLogical
                | BinaryOp::ShiftRightArithmetic => {
                    let wide = d == DType::I64;
                    let (name, ty) = match (op, wide) {
                        (BinaryOp::ShiftLeft, _) => ("shl", bits),
                        (BinaryOp::ShiftRightLogical, false) => ("shr", "u32"),
                        (BinaryOp::ShiftRightLogical, true) => ("shr", "u64"),
                        (_, false) => ("shr", "s32"),
                        (_, true) => ("shr", "s64"),
                    };
                    // The amount is a u32 operand: a 64-bit one saturates to 64 first.
                    let amount = if wide {
                        let (low, n) = (e.reg(Class::Rd), e.reg(Class::R));
                        e.line(format!("min.u64 {low}, {b}, 64"));
                        e.line(format!("cvt.u32.u64 {n}, {low}"));
                        n
                    } else {
                        b.to_string()
                    };
                    e.line(format!("{name}.{ty} {r}, {a}, {amount}"));
                    return r;
                }
            };
            let ty = if op.is_logical() { bits } else { t };
            e.line(format!("{name}.{ty} {r}, {a}, {b}"));
            r
        }
    }
}

/// `a c b` on values of type `from` into a new predicate.
fn emit_compare(e: &mut Emitter, c: CompareOp, from: DType, a: &str, b: &str) -> String {
    let r = e.reg(Class::P);
    let (ft, _) = suffix(from);
    let float = matches!(from, DType::F32 | DType::F64);
    let cc = match c {
        CompareOp::Eq => "eq",
        // IEEE: NaN != anything.
        CompareOp::Ne if float => "neu",
        CompareOp::Ne => "ne",
        CompareOp::Lt => "lt",
        CompareOp::Le => "le",
        CompareOp::Gt => "gt",
        CompareOp::Ge => "ge",
    };
    e.line(format!("setp.{cc}.{ft} {r}, {a}, {b}"));
    r
}

/// `x` (of type `from`) converted to `to` into a new register.
fn emit_convert(
    e: &mut Emitter,
    kernel: &Kernel,
    from: DType,
    to: DType,
    x: &str,
) -> Result<String, PtxError> {
    if is_half(to) || is_half(from) {
        return convert_half(e, kernel, from, to, x);
    }
    let (t, _) = suffix(to);
    let (ft, _) = suffix(from);
    if from == DType::Bool && to == DType::Bool {
        let r = e.reg(Class::P);
        e.line(format!("mov.pred {r}, {x}"));
        return Ok(r);
    }
    // Bools as the interpreter converts them: 1 or 0, and `x != 0` (NaN is true).
    if from == DType::Bool {
        let r = e.reg(reg_class(to));
        let (one, zero) = match to {
            DType::F32 | DType::F64 => (
                float_literal(one_of(to)).unwrap_or_default(),
                float_literal(zero_of(to)).unwrap_or_default(),
            ),
            _ => ("1".to_string(), "0".to_string()),
        };
        e.line(format!("selp.{t} {r}, {one}, {zero}, {x}"));
        return Ok(r);
    }
    if to == DType::Bool {
        let r = e.reg(Class::P);
        let (ne, zero) = match from {
            DType::F32 | DType::F64 => ("neu", float_literal(zero_of(from)).unwrap_or_default()),
            _ => ("ne", "0".to_string()),
        };
        e.line(format!("setp.{ne}.{ft} {r}, {x}, {zero}"));
        return Ok(r);
    }
    let r = e.reg(reg_class(to));
    let mode = match (from, to) {
        (f, t) if f == t => "",
        (DType::F32, DType::F64) => "",
        (DType::F64, DType::F32) => ".rn",
        (DType::F32 | DType::F64, _) => ".rzi",
        (_, DType::F32 | DType::F64) => ".rn",
        _ => "",
    };
    if from == to {
        e.line(format!("mov.{t} {r}, {x}"));
    } else {
        e.line(format!("cvt{mode}.{t}.{ft} {r}, {x}"));
    }
    Ok(r)
}

/// The lines widening the half `h` (of dtype `dtype`: f16, or else bf16) into the f32 register
/// `x`, with `w` a 32-bit scratch register for bf16, which is the upper half of an f32
/// (`cvt.f32.bf16` needs sm_90).
pub(super) fn half_to_f32(dtype: DType, h: &str, w: &str, x: &str) -> Vec<String> {
    if dtype == DType::F16 {
        return vec![format!("cvt.f32.f16 {x}, {h}")];
    }
    vec![
        format!("cvt.u32.u16 {w}, {h}"),
        format!("shl.b32 {w}, {w}, 16"),
        format!("mov.b32 {x}, {w}"),
    ]
}

/// `x` (of type `from`) converted to `to` into a new register, where either is f16 or bf16.
fn convert_half(
    e: &mut Emitter,
    kernel: &Kernel,
    from: DType,
    to: DType,
    x: &str,
) -> Result<String, PtxError> {
    let r = e.reg(reg_class(to));
    match (from, to) {
        (DType::F16, DType::F32) => {
            for line in half_to_f32(from, x, "", &r) {
                e.line(line);
            }
        }
        (DType::BF16, DType::F32) => {
            let w = e.reg(Class::R);
            for line in half_to_f32(from, x, &w, &r) {
                e.line(line);
            }
        }
        (DType::F32 | DType::F64, DType::F16) => {
            e.line(format!("cvt.rn.f16.{} {r}, {x}", suffix(from).0))
        }
        (DType::F32, DType::BF16) => e.line(format!("cvt.rn.bf16.f32 {r}, {x}")),
        // Integers are exact in f32 below 2^24, and f16 is infinite from 65,520 on:
        // rounded once. u8 is exact in both halves.
        (DType::U8 | DType::I32 | DType::I64, DType::F16) | (DType::U8, DType::BF16) => {
            let w = e.reg(Class::F);
            let half = if to == DType::F16 { "f16" } else { "bf16" };
            e.line(format!("cvt.rn.f32.{} {w}, {x}", suffix(from).0));
            e.line(format!("cvt.rn.{half}.f32 {r}, {w}"));
        }
        (DType::I32 | DType::I64 | DType::F64, DType::BF16) => {
            let w = e.f32_round_to_odd(x, from);
            e.line(format!("cvt.rn.bf16.f32 {r}, {w}"));
        }
        _ => {
            return Err(PtxError::unsupported(
                kernel,
                format!("convert {from} to {to}"),
            ))
        }
    }
    Ok(r)
}

/// `sin` or `cos` of `x` (`u`, on `d`): `short`, the short reduction's result, unless |x|
/// reaches its limit: then a branch (taken by no warp whose arguments are all in range) to the
/// full-range expansion.
fn emit_beyond(
    e: &mut Emitter,
    kernel: &Kernel,
    u: UnaryOp,
    d: DType,
    x: &str,
    short: &str,
) -> Result<String, PtxError> {
    let (t, _) = suffix(d);
    let (r, magnitude) = (e.reg(reg_class(d)), e.reg(reg_class(d)));
    let in_range = e.reg(Class::P);
    let limit = if d == DType::F32 {
        Scalar::F32(math::SIN_COS_F32_LIMIT)
    } else {
        Scalar::F64(math::SIN_COS_F64_LIMIT)
    };
    let limit = float_literal(limit).unwrap_or_default();
    e.line(format!("mov.{t} {r}, {short}"));
    e.line(format!("abs.{t} {magnitude}, {x}"));
    // Unordered: NaN stays on the short path, which passes it through.
    e.line(format!("setp.ltu.{t} {in_range}, {magnitude}, {limit}"));
    let skip = e.label("beyond");
    e.line(format!("@{in_range} bra {skip}"));
    let full = emit_full_range(e, kernel, u, d, x)?;
    e.line(format!("mov.{t} {r}, {full}"));
    e.body.push_str(&format!("{skip}:\n"));
    Ok(r)
}

/// `op(x)` by its branch-free expansion over the whole domain ([`math::expand`]: the f32 sine's
/// reduction exact for any f32), on register `x` of type `d`; returns the result's register.
fn emit_full_range(
    e: &mut Emitter,
    kernel: &Kernel,
    op: UnaryOp,
    d: DType,
    x: &str,
) -> Result<String, PtxError> {
    let buffer = |role| Buffer {
        role,
        dtype: d,
        access: Access::Each,
        value: ValueId(0),
    };
    let instr = |op, args| KInstr { op, args, dtype: d };
    let alone = math::expand(&Kernel {
        name: kernel.name.clone(),
        len: 1,
        sig: KernelSig {
            buffers: vec![buffer(Role::Input), buffer(Role::Output)],
        },
        body: vec![
            instr(KOp::Load(0), vec![]),
            instr(KOp::Unary(op), vec![0]),
            instr(KOp::Store(1), vec![1]),
        ],
        rows: None,
    });
    let mut regs: Vec<String> = Vec::with_capacity(alone.body.len());
    for ins in &alone.body {
        let r = match &ins.op {
            KOp::Load(_) => x.to_string(),
            KOp::Store(_) => return Ok(regs[ins.args[0]].clone()),
            KOp::Const(s) => e.constant(*s, ins.dtype),
            _ => {
                let args: Vec<String> = ins.args.iter().map(|&a| regs[a].clone()).collect();
                emit_op(e, &alone, ins, &args)?
            }
        };
        regs.push(r);
    }
    Err(PtxError::Unsupported {
        kernel: kernel.name.clone(),
        what: format!("an expansion of {} without a result", op.name()),
    })
}

/// `.rn` for float arithmetic (no contraction into fma), nothing for integers.
fn rn(d: DType) -> &'static str {
    if matches!(d, DType::F32 | DType::F64) {
        ".rn"
    } else {
        ""
    }
}

fn half_of(d: DType) -> Scalar {
    if d == DType::F32 {
        Scalar::F32(0.5)
    } else {
        Scalar::F64(0.5)
    }
}

fn one_of(d: DType) -> Scalar {
    if d == DType::F32 {
        Scalar::F32(1.0)
    } else {
        Scalar::F64(1.0)
    }
}

fn zero_of(d: DType) -> Scalar {
    if d == DType::F32 {
        Scalar::F32(0.0)
    } else {
        Scalar::F64(0.0)
    }
}
