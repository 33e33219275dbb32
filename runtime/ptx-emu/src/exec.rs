//! What each instruction does to a thread's registers and to memory, with PTX's semantics.
//! [`Block::step`] decodes the instruction and hands it to the function for its class: moves,
//! memory, float and integer arithmetic, compares and conversions. Branches and `ret` it does
//! itself; barriers and shuffles involve other threads and are completed in `block`.
#![allow(
    clippy::panic,
    reason = "a kernel bug the emulator detects, or an instruction it does not know, panics \
              (see the crate docs)"
)]

use crate::block::{Block, State};
use crate::memory::{check_aligned, Memory};
use crate::parse::Operand;
use crate::values::{compare, convert, f32_of, f64_of, float_binary, mask, of_f32, signed, width};

/// One thread's instruction, decoded for the function of its class.
struct Exec<'i> {
    /// The thread.
    t: usize,
    /// The opcode split at its dots: `["add", "rn", "f32"]`.
    op: &'i [&'i str],
    /// The opcode's last part, its type where it has one.
    ty: &'i str,
    args: &'i [Operand],
    /// The source line, for panics.
    line: &'i str,
}

impl Block<'_> {
    pub(crate) fn step(&mut self, t: usize, pc: usize, memory: &mut Memory) {
        let ins = &self.entry.instrs[pc];
        let mut parts = [""; 8];
        for (part, o) in parts.iter_mut().zip(&ins.op) {
            *part = o;
        }
        let op = &parts[..ins.op.len()];
        let x = Exec {
            t,
            op,
            ty: op.last().copied().unwrap_or_default(),
            args: &ins.args,
            line: ins.line.as_str(),
        };
        let mut next = pc + 1;
        match op[0] {
            "ret" => {
                self.threads[t].state = State::Exited;
                return;
            }
            "bra" => {
                let Operand::Label(l) = &x.args[0] else {
                    panic!("{}", x.line)
                };
                next = self.entry.labels[l];
            }
            "mov" => self.mov(&x),
            "cvta" => {
                let v = self.operand(&x, 1);
                self.write(&x, v);
            }
            "ld" => self.load(&x, memory),
            "st" => self.store(&x, memory),
            "red" => self.reduce_into(&x, memory),
            "add" | "sub" | "mul" | "div" | "neg" | "abs" | "sqrt" | "max" | "min"
                if matches!(x.ty, "f32" | "f64") =>
            {
                self.float(&x);
            }
            "fma" | "ex2" | "lg2" | "sin" | "cos" | "rsqrt" | "copysign" => self.float(&x),
            "add" | "sub" | "mul" | "mad" | "div" | "rem" | "and" | "or" | "xor" | "shl"
            | "shr" | "not" | "neg" | "abs" | "max" | "min" => self.integer(&x),
            "setp" | "selp" | "cvt" => self.compare_convert(&x),
            other => panic!("unknown instruction {other}: {}", x.line),
        }
        self.threads[t].pc = next;
    }

    /// The value of operand `k`.
    fn operand(&self, x: &Exec, k: usize) -> u64 {
        self.value(x.t, &x.args[k], x.line)
    }

    /// Writes `r` to the destination, operand 0.
    fn write(&mut self, x: &Exec, r: u64) {
        self.set(x.t, &x.args[0], r);
    }

    /// `mov`, also from a 64-bit value to a pair of 32-bit registers and back.
    fn mov(&mut self, x: &Exec) {
        let t = x.t;
        match (&x.args[0], &x.args[1]) {
            (Operand::Vector(parts), src) => {
                let b = self.value(t, src, x.line);
                self.threads[t].regs[parts[0]] = Some(b & 0xFFFF_FFFF);
                self.threads[t].regs[parts[1]] = Some(b >> 32);
            }
            (dst, Operand::Vector(parts)) => {
                let lo = self.value(t, &Operand::Reg(parts[0]), x.line) & 0xFFFF_FFFF;
                let hi = self.value(t, &Operand::Reg(parts[1]), x.line) & 0xFFFF_FFFF;
                self.set(t, dst, lo | (hi << 32));
            }
            _ => {
                let v = self.operand(x, 1) & mask(x.ty);
                self.write(x, v);
            }
        }
    }

    /// `ld` from a parameter, shared or global memory, into a register or a vector of them.
    fn load(&mut self, x: &Exec, memory: &mut Memory) {
        let (t, line) = (x.t, x.line);
        let a = self.address(t, &x.args[1], line);
        let w = width(x.ty);
        let param = x.op[1] == "param";
        let regs: &[usize] = match &x.args[0] {
            Operand::Vector(r) => r,
            Operand::Reg(r) => std::slice::from_ref(r),
            other => panic!("load into {other:?}"),
        };
        if !param {
            check_aligned(a, w * regs.len(), line);
        }
        for (k, r) in regs.iter().enumerate() {
            let at = a + (k * w) as u64;
            let mut b = [0u8; 8];
            if param {
                b[..w].copy_from_slice(&self.param(at, line).to_le_bytes()[..w]);
            } else if x.op[1] == "shared" {
                b[..w].copy_from_slice(self.shared_slice(t, at, w, false, line));
            } else {
                b[..w].copy_from_slice(memory.slice(at, w, line));
            }
            self.threads[t].regs[*r] = Some(u64::from_le_bytes(b));
        }
    }

    /// `st` of a register or a vector of them to shared or global memory.
    fn store(&mut self, x: &Exec, memory: &mut Memory) {
        let (t, line) = (x.t, x.line);
        let a = self.address(t, &x.args[0], line);
        let w = width(x.ty);
        let values = match &x.args[1] {
            Operand::Vector(r) => r.len(),
            _ => 1,
        };
        check_aligned(a, w * values, line);
        for k in 0..values {
            let value = match &x.args[1] {
                Operand::Vector(r) => self.value(t, &Operand::Reg(r[k]), line),
                other => self.value(t, other, line),
            };
            let bits = value.to_le_bytes();
            let at = a + (k * w) as u64;
            if x.op[1] == "shared" {
                self.shared_slice(t, at, w, true, line)
                    .copy_from_slice(&bits[..w]);
            } else {
                memory.slice(at, w, line).copy_from_slice(&bits[..w]);
            }
        }
    }

    /// `red.global.{add,min,max}`: combines a register into global memory. Threads run one
    /// at a time here, so each is atomic; their order is the emulator's, as the hardware's is
    /// its own.
    fn reduce_into(&mut self, x: &Exec, memory: &mut Memory) {
        let (t, line, ty) = (x.t, x.line, x.ty);
        assert!(x.op.len() == 4 && x.op[1] == "global", "red: {line}");
        let a = self.address(t, &x.args[0], line);
        let w = width(ty);
        check_aligned(a, w, line);
        let v = self.operand(x, 1);
        let mut b = [0u8; 8];
        b[..w].copy_from_slice(memory.slice(a, w, line));
        let old = u64::from_le_bytes(b);
        let m = mask(ty);
        let r = match (x.op[2], ty) {
            ("add", "f32" | "f64") => float_binary(ty, old, v, |x, y| x + y, |x, y| x + y),
            ("add", "s32" | "u32" | "u64") => old.wrapping_add(v) & m,
            ("min" | "max", "s32" | "s64") => {
                let keep_old = (signed(old, ty) <= signed(v, ty)) == (x.op[2] == "min");
                if keep_old {
                    old
                } else {
                    v & m
                }
            }
            (op, _) => panic!("red {op} on {ty}: {line}"),
        };
        memory
            .slice(a, w, line)
            .copy_from_slice(&r.to_le_bytes()[..w]);
    }

    /// Floating-point arithmetic on `f32` and `f64`.
    fn float(&mut self, x: &Exec) {
        let (ty, line) = (x.ty, x.line);
        let r = match x.op[0] {
            "add" | "sub" | "mul" | "div" => {
                let (a, b) = (self.operand(x, 1), self.operand(x, 2));
                match x.op[0] {
                    "add" => float_binary(ty, a, b, |x, y| x + y, |x, y| x + y),
                    "sub" => float_binary(ty, a, b, |x, y| x - y, |x, y| x - y),
                    "mul" => float_binary(ty, a, b, |x, y| x * y, |x, y| x * y),
                    "div" => float_binary(ty, a, b, |x, y| x / y, |x, y| x / y),
                    other => panic!("float {other}: {line}"),
                }
            }
            "fma" => {
                let (a, b, c) = (self.operand(x, 1), self.operand(x, 2), self.operand(x, 3));
                match ty {
                    "f32" => of_f32(f32_of(a).mul_add(f32_of(b), f32_of(c))),
                    "f64" => f64_of(a).mul_add(f64_of(b), f64_of(c)).to_bits(),
                    other => panic!("fma {other}"),
                }
            }
            "neg" | "abs" | "sqrt" => {
                let a = self.operand(x, 1);
                match (x.op[0], ty) {
                    ("neg", "f32") => of_f32(-f32_of(a)),
                    ("neg", _) => (-f64_of(a)).to_bits(),
                    ("abs", "f32") => of_f32(f32_of(a).abs()),
                    ("abs", _) => f64_of(a).abs().to_bits(),
                    ("sqrt", "f32") => of_f32(f32_of(a).sqrt()),
                    _ => f64_of(a).sqrt().to_bits(),
                }
            }
            // The approximate instructions of fast math, here correctly rounded: the tests
            // allow for the hardware's documented errors.
            "ex2" | "lg2" | "sin" | "cos" | "rsqrt" => {
                assert!(ty == "f32" && x.op[1] == "approx", "{line}");
                let a = f64::from(f32_of(self.operand(x, 1)));
                let r = match x.op[0] {
                    "ex2" => a.exp2(),
                    "lg2" => a.log2(),
                    "sin" => a.sin(),
                    "cos" => a.cos(),
                    _ => 1.0 / a.sqrt(),
                };
                of_f32(r as f32)
            }
            // A NaN operand gives the other; +0 is the greater zero.
            "max" | "min" => {
                let (a, b) = (self.operand(x, 1), self.operand(x, 2));
                let max = x.op[0] == "max";
                let pick = |x: f64, y: f64| match (x.is_nan(), y.is_nan()) {
                    (true, _) => false,
                    (_, true) => true,
                    _ if x == y => x.is_sign_positive() == max,
                    _ => (x > y) == max,
                };
                match ty {
                    "f32" => {
                        let (fa, fb) = (f64::from(f32_of(a)), f64::from(f32_of(b)));
                        if pick(fa, fb) {
                            a
                        } else {
                            b
                        }
                    }
                    _ => {
                        if pick(f64_of(a), f64_of(b)) {
                            a
                        } else {
                            b
                        }
                    }
                }
            }
            "copysign" => {
                // d = |b| with the sign of a.
                let (a, b) = (self.operand(x, 1), self.operand(x, 2));
                match ty {
                    "f32" => of_f32(f32_of(b).copysign(f32_of(a))),
                    _ => f64_of(b).copysign(f64_of(a)).to_bits(),
                }
            }
            other => panic!("float {other}: {line}"),
        };
        self.write(x, r);
    }

    /// Integer and bitwise arithmetic, wrapping to the type's width (`pred` for `not`).
    fn integer(&mut self, x: &Exec) {
        let (ty, line) = (x.ty, x.line);
        let m = mask(ty);
        let a = self.operand(x, 1);
        let r = match (x.op[0], x.op.get(1).copied()) {
            ("add", _) => a.wrapping_add(self.operand(x, 2)) & m,
            ("sub", _) => a.wrapping_sub(self.operand(x, 2)) & m,
            ("neg", _) => a.wrapping_neg() & m,
            // The most negative value is its own absolute value.
            ("abs", _) => signed(a, ty).wrapping_abs() as u64 & m,
            ("mul", Some("wide")) => {
                let b = self.operand(x, 2);
                if ty.starts_with('s') {
                    (signed(a, ty).wrapping_mul(signed(b, ty))) as u64
                } else {
                    (a & m).wrapping_mul(b & m)
                }
            }
            ("mul", Some("lo")) => a.wrapping_mul(self.operand(x, 2)) & m,
            ("mad", Some("lo")) => {
                a.wrapping_mul(self.operand(x, 2))
                    .wrapping_add(self.operand(x, 3))
                    & m
            }
            ("div" | "rem", _) => divide(x.op[0] == "div", ty, a, self.operand(x, 2), line),
            ("max" | "min", _) => {
                let b = self.operand(x, 2);
                let (p, q): (i128, i128) = if ty.starts_with('s') {
                    (i128::from(signed(a, ty)), i128::from(signed(b, ty)))
                } else {
                    (i128::from(a & m), i128::from(b & m))
                };
                let pick = if (x.op[0] == "max") == (p >= q) { a } else { b };
                pick & m
            }
            ("and", _) => a & self.operand(x, 2) & m,
            ("or", _) => (a | self.operand(x, 2)) & m,
            ("xor", _) => (a ^ self.operand(x, 2)) & m,
            ("not", _) if ty == "pred" => u64::from(a == 0),
            ("not", _) => !a & m,
            ("shl", _) => {
                let n = self.operand(x, 2);
                if n >= (8 * width(ty)) as u64 {
                    0
                } else {
                    (a << n) & m
                }
            }
            // Amounts above the width are clamped to it: all sign bits, or 0.
            ("shr", _) => {
                let n = self.operand(x, 2).min((8 * width(ty) - 1) as u64);
                if ty.starts_with('s') {
                    (signed(a, ty) >> n) as u64 & m
                } else if self.operand(x, 2) >= (8 * width(ty)) as u64 {
                    0
                } else {
                    (a & m) >> n
                }
            }
            (other, _) => panic!("integer {other}: {line}"),
        };
        self.write(x, r);
    }

    /// `setp` (a compare into a predicate), `selp` (a select on one) and `cvt`.
    fn compare_convert(&mut self, x: &Exec) {
        let op = x.op;
        let r = match op[0] {
            "setp" => u64::from(compare(op[1], x.ty, self.operand(x, 1), self.operand(x, 2))),
            "selp" => {
                let p = self.operand(x, 3) != 0;
                let r = if p {
                    self.operand(x, 1)
                } else {
                    self.operand(x, 2)
                };
                r & mask(x.ty)
            }
            // Two f32 rounded to bf16 into one register, the first operand's in the upper half.
            "cvt" if op[2] == "bf16x2" => {
                assert!(op == ["cvt", "rn", "bf16x2", "f32"], "{}", x.line);
                let half = |k: usize| convert(self.operand(x, k), "bf16", "f32", Some("rn"));
                (half(1) << 16) | half(2)
            }
            "cvt" => {
                // cvt[.mode].to.from
                let n = op.len();
                let (to, from) = (op[n - 2], op[n - 1]);
                let mode = (n == 4).then(|| op[1]);
                convert(self.operand(x, 1), to, from, mode)
            }
            other => panic!("unknown instruction {other}: {}", x.line),
        };
        self.write(x, r);
    }
}

/// Integer `div` (else `rem`) of `a` by `b` as `ty`: dividing by zero, or the most negative
/// value by -1, is a kernel bug.
fn divide(div: bool, ty: &str, a: u64, b: u64, line: &str) -> u64 {
    let m = mask(ty);
    assert!(b & m != 0, "division by zero: {line}");
    let (x, y) = (a & m, b & m);
    if ty.starts_with('s') {
        let (x, y) = (signed(a, ty), signed(b, ty));
        let min = if ty == "s32" {
            i64::from(i32::MIN)
        } else {
            i64::MIN
        };
        assert!(x != min || y != -1, "overflowing division: {line}");
        (if div {
            x.wrapping_div(y)
        } else {
            x.wrapping_rem(y)
        }) as u64
            & m
    } else if div {
        x / y
    } else {
        x % y
    }
}
