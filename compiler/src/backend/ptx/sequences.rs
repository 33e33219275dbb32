//! Multi-instruction sequences for operations PTX has no single instruction for, each as the
//! interpreter defines it (integer division by zero and overflow, C's `fmod` on f64, NaN- and
//! signed-zero-aware max and min) or rounding once where PTX would round twice (f32 round to
//! odd for bf16).

use super::emit::{bits_class, reg_class, suffix, Class, Emitter};
use ferrax_ir::DType;

impl Emitter {
    /// `x` (of type `from`) rounded to f32 to odd: toward zero, then, where that was inexact,
    /// with the lowest bit set. Rounding that to a type of at most 22 bits of precision
    /// (bf16's 8) rounds as once from `x` (sm_80 has no `cvt.rn.bf16.f64`, and from integers
    /// none at all).
    pub(super) fn f32_round_to_odd(&mut self, x: &str, from: DType) -> String {
        let (ft, _) = suffix(from);
        let (w, back, inexact) = (
            self.reg(Class::F),
            self.reg(reg_class(from)),
            self.reg(Class::P),
        );
        self.line(format!("cvt.rz.f32.{ft} {w}, {x}"));
        if from == DType::F64 {
            self.line(format!("cvt.f64.f32 {back}, {w}"));
            self.line(format!("setp.neu.f64 {inexact}, {back}, {x}"));
        } else {
            self.line(format!("cvt.rzi.{ft}.f32 {back}, {w}"));
            self.line(format!("setp.ne.{ft} {inexact}, {back}, {x}"));
        }
        let (bits, odd, r) = (self.reg(Class::R), self.reg(Class::R), self.reg(Class::F));
        self.line(format!("mov.b32 {bits}, {w}"));
        self.line(format!("or.b32 {odd}, {bits}, 1"));
        self.line(format!("selp.b32 {bits}, {odd}, {bits}, {inexact}"));
        self.line(format!("mov.b32 {r}, {bits}"));
        r
    }

    /// Integer `a / b` (or `a % b`) as the interpreter defines it, truncating: `a / 0 = -1`,
    /// `a % 0 = a`, and `MIN / -1` wrapping to `MIN` (`MIN % -1 = 0`). The divisor is made 1
    /// in those cases, so the hardware never sees them (PTX leaves them unspecified).
    pub(super) fn int_division(&mut self, a: &str, b: &str, d: DType, quotient: bool) -> String {
        let (t, _) = suffix(d);
        let class = reg_class(d);
        let min = if d == DType::I32 {
            i32::MIN.to_string()
        } else {
            "0x8000000000000000".to_string()
        };
        let (zero, lowest, minus_one, overflow) = (
            self.reg(Class::P),
            self.reg(Class::P),
            self.reg(Class::P),
            self.reg(Class::P),
        );
        self.line(format!("setp.eq.{t} {zero}, {b}, 0"));
        self.line(format!("setp.eq.{t} {lowest}, {a}, {min}"));
        self.line(format!("setp.eq.{t} {minus_one}, {b}, -1"));
        self.line(format!("and.pred {overflow}, {lowest}, {minus_one}"));
        self.line(format!("or.pred {overflow}, {overflow}, {zero}"));
        let divisor = self.reg(class);
        self.line(format!("selp.{t} {divisor}, 1, {b}, {overflow}"));
        let (op, by_zero) = if quotient {
            ("div", "-1".to_string())
        } else {
            ("rem", a.to_string())
        };
        let r = self.reg(class);
        self.line(format!("{op}.{t} {r}, {a}, {divisor}"));
        let out = self.reg(class);
        self.line(format!("selp.{t} {out}, {by_zero}, {r}, {zero}"));
        out
    }

    /// `a % b` on f64 exactly, as C's `fmod` (and the interpreter's `%`): NaN where `a` is
    /// infinite or either is NaN or `b` is zero, `a` where `|a| < |b|`, else the significands'
    /// long division, `r = (ma · 2^(ea - eb)) mod mb` taken 11 bits of the exponent difference
    /// a step (so `r << 11` stays within 64 bits), scaled back by `b`'s exponent (exactly: the
    /// result is a multiple of `b`'s last place below `|b|`) and given `a`'s sign. A loop, where
    /// a branch-free form would take the widest exponent difference's 190 steps every time.
    pub(super) fn f64_remainder(&mut self, a: &str, b: &str) -> String {
        let (ax, ay) = (self.reg(Class::Fd), self.reg(Class::Fd));
        self.line(format!("abs.f64 {ax}, {a}"));
        self.line(format!("abs.f64 {ay}, {b}"));
        let (nan, special, small) = (self.reg(Class::P), self.reg(Class::P), self.reg(Class::P));
        self.line(format!("setp.geu.f64 {nan}, {ax}, 0d7FF0000000000000"));
        self.line(format!("setp.nan.f64 {special}, {ay}, {ay}"));
        self.line(format!("or.pred {nan}, {nan}, {special}"));
        self.line(format!("setp.eq.f64 {special}, {ay}, 0d0000000000000000"));
        self.line(format!("or.pred {nan}, {nan}, {special}"));
        self.line(format!("setp.lt.f64 {small}, {ax}, {ay}"));
        self.line(format!("or.pred {special}, {nan}, {small}"));
        let (out, nan_value) = (self.reg(Class::Fd), self.reg(Class::Fd));
        self.line(format!("mov.f64 {nan_value}, 0d7FF8000000000000"));
        self.line(format!("selp.f64 {out}, {nan_value}, {a}, {nan}"));
        let done = self.label("rem_done");
        self.line(format!("@{special} bra {done}"));
        // Significand and exponent field of each magnitude (a subnormal's field read as 1).
        let mut parts = |v: &str| {
            let (bits, field, m, with_one) = (
                self.reg(Class::Rd),
                self.reg(Class::Rd),
                self.reg(Class::Rd),
                self.reg(Class::Rd),
            );
            let normal = self.reg(Class::P);
            self.line(format!("mov.b64 {bits}, {v}"));
            self.line(format!("shr.u64 {field}, {bits}, 52"));
            self.line(format!("and.b64 {m}, {bits}, 0x000FFFFFFFFFFFFF"));
            self.line(format!("or.b64 {with_one}, {m}, 0x0010000000000000"));
            self.line(format!("setp.ne.u64 {normal}, {field}, 0"));
            self.line(format!("selp.b64 {m}, {with_one}, {m}, {normal}"));
            self.line(format!("max.u64 {field}, {field}, 1"));
            (m, field)
        };
        let (mx, ex) = parts(&ax);
        let (my, ey) = parts(&ay);
        let (r, steps, step, shift) = (
            self.reg(Class::Rd),
            self.reg(Class::Rd),
            self.reg(Class::Rd),
            self.reg(Class::R),
        );
        self.line(format!("rem.u64 {r}, {mx}, {my}"));
        self.line(format!("sub.u64 {steps}, {ex}, {ey}"));
        let (repeat, divided, finished) = (
            self.label("rem_step"),
            self.label("rem_divided"),
            self.reg(Class::P),
        );
        self.body.push_str(&format!("{repeat}:\n"));
        self.line(format!("setp.eq.u64 {finished}, {steps}, 0"));
        self.line(format!("@{finished} bra {divided}"));
        self.line(format!("min.u64 {step}, {steps}, 11"));
        self.line(format!("cvt.u32.u64 {shift}, {step}"));
        self.line(format!("shl.b64 {r}, {r}, {shift}"));
        self.line(format!("rem.u64 {r}, {r}, {my}"));
        self.line(format!("sub.u64 {steps}, {steps}, {step}"));
        self.line(format!("bra.uni {repeat}"));
        self.body.push_str(&format!("{divided}:\n"));
        // r · 2^(ey - 1075), the scale built as bits: normal from ey = 53, else subnormal.
        let (normal_scale, low_scale, one, scale_bits) = (
            self.reg(Class::Rd),
            self.reg(Class::Rd),
            self.reg(Class::Rd),
            self.reg(Class::Rd),
        );
        let (low_shift, normal) = (self.reg(Class::R), self.reg(Class::P));
        self.line(format!("sub.u64 {normal_scale}, {ey}, 52"));
        self.line(format!("shl.b64 {normal_scale}, {normal_scale}, 52"));
        self.line(format!("cvt.u32.u64 {low_shift}, {ey}"));
        self.line(format!("sub.u32 {low_shift}, {low_shift}, 1"));
        self.line(format!("mov.b64 {one}, 1"));
        self.line(format!("shl.b64 {low_scale}, {one}, {low_shift}"));
        self.line(format!("setp.ge.u64 {normal}, {ey}, 53"));
        self.line(format!(
            "selp.b64 {scale_bits}, {normal_scale}, {low_scale}, {normal}"
        ));
        let (rf, scale, magnitude) = (
            self.reg(Class::Fd),
            self.reg(Class::Fd),
            self.reg(Class::Fd),
        );
        self.line(format!("cvt.rn.f64.u64 {rf}, {r}"));
        self.line(format!("mov.b64 {scale}, {scale_bits}"));
        self.line(format!("mul.rn.f64 {magnitude}, {rf}, {scale}"));
        self.line(format!("copysign.f64 {out}, {a}, {magnitude}"));
        self.body.push_str(&format!("{done}:\n"));
        out
    }

    /// `max` (or `min`) as the interpreter defines it: NaN if either operand is NaN, and on a
    /// tie the +0 (max) or -0 (min) of a pair of zeros.
    pub(super) fn min_max(&mut self, a: &str, b: &str, d: DType, max: bool) -> String {
        let (t, bits) = suffix(d);
        let p = self.reg(Class::P);
        let pick = self.reg(reg_class(d));
        let cmp = if max { "gt" } else { "lt" };
        self.line(format!("setp.{cmp}.{t} {p}, {a}, {b}"));
        self.line(format!("selp.{t} {pick}, {a}, {b}, {p}"));
        let (ia, ib, ic) = (
            self.reg(bits_class(d)),
            self.reg(bits_class(d)),
            self.reg(bits_class(d)),
        );
        self.line(format!("mov.{bits} {ia}, {a}"));
        self.line(format!("mov.{bits} {ib}, {b}"));
        let join = if max { "and" } else { "or" };
        self.line(format!("{join}.{bits} {ic}, {ia}, {ib}"));
        let tie = self.reg(reg_class(d));
        self.line(format!("mov.{bits} {tie}, {ic}"));
        let eq = self.reg(Class::P);
        self.line(format!("setp.eq.{t} {eq}, {a}, {b}"));
        let pick2 = self.reg(reg_class(d));
        self.line(format!("selp.{t} {pick2}, {tie}, {pick}, {eq}"));
        let nan = self.reg(Class::P);
        self.line(format!("setp.nan.{t} {nan}, {a}, {b}"));
        let sum = self.reg(reg_class(d));
        self.line(format!("add.rn.{t} {sum}, {a}, {b}"));
        let out = self.reg(reg_class(d));
        self.line(format!("selp.{t} {out}, {sum}, {pick2}, {nan}"));
        out
    }
}
