//! What each instruction does to a thread's registers and to memory, with PTX's semantics.
#![allow(
    clippy::panic,
    reason = "a kernel bug the emulator detects, or an instruction it does not know, panics \
              (see the crate docs)"
)]

use crate::block::{Block, State};
use crate::memory::{check_aligned, Memory};
use crate::parse::Operand;
use crate::values::{compare, convert, f32_of, f64_of, float_binary, mask, of_f32, signed, width};

impl Block<'_> {
    pub(crate) fn step(&mut self, t: usize, pc: usize, memory: &mut Memory) {
        let ins = &self.entry.instrs[pc];
        let mut parts = [""; 8];
        for (part, o) in parts.iter_mut().zip(&ins.op) {
            *part = o;
        }
        let op = &parts[..ins.op.len()];
        let ty = op.last().copied().unwrap_or_default();
        let line = ins.line.as_str();
        let arg = |k: usize| &ins.args[k];
        let v = |s: &Self, k: usize| s.value(t, &ins.args[k], line);
        let mut next = pc + 1;
        match op[0] {
            "ret" => {
                self.threads[t].state = State::Exited;
                return;
            }
            "bra" => {
                let Operand::Label(l) = arg(0) else {
                    panic!("{line}")
                };
                next = self.entry.labels[l];
            }
            "mov" => match (arg(0), arg(1)) {
                (Operand::Vector(parts), src) => {
                    let b = self.value(t, src, line);
                    self.threads[t].regs[parts[0]] = Some(b & 0xFFFF_FFFF);
                    self.threads[t].regs[parts[1]] = Some(b >> 32);
                }
                (dst, Operand::Vector(parts)) => {
                    let lo = self.value(t, &Operand::Reg(parts[0]), line) & 0xFFFF_FFFF;
                    let hi = self.value(t, &Operand::Reg(parts[1]), line) & 0xFFFF_FFFF;
                    let dst = dst.clone();
                    self.set(t, &dst, lo | (hi << 32));
                }
                _ => {
                    let x = v(self, 1) & mask(ty);
                    self.set(t, arg(0), x);
                }
            },
            "cvta" => {
                let x = v(self, 1);
                self.set(t, arg(0), x);
            }
            "ld" => {
                let (param, a) = self.address(t, arg(1), line);
                let w = width(ty);
                let regs: &[usize] = match arg(0) {
                    Operand::Vector(r) => r,
                    Operand::Reg(r) => std::slice::from_ref(r),
                    other => panic!("load into {other:?}"),
                };
                if param.is_none() {
                    check_aligned(a, w * regs.len(), line);
                }
                for (k, r) in regs.iter().enumerate() {
                    let at = a + (k * w) as u64;
                    let mut b = [0u8; 8];
                    if let Some(i) = param {
                        b[..w].copy_from_slice(&self.params[i].to_le_bytes()[..w]);
                    } else if op[1] == "shared" {
                        b[..w].copy_from_slice(self.shared_slice(t, at, w, false, line));
                    } else {
                        b[..w].copy_from_slice(memory.slice(at, w, line));
                    }
                    self.threads[t].regs[*r] = Some(u64::from_le_bytes(b));
                }
            }
            "st" => {
                let (_, a) = self.address(t, arg(0), line);
                let w = width(ty);
                let values = match arg(1) {
                    Operand::Vector(r) => r.len(),
                    _ => 1,
                };
                check_aligned(a, w * values, line);
                for k in 0..values {
                    let value = match arg(1) {
                        Operand::Vector(r) => self.value(t, &Operand::Reg(r[k]), line),
                        other => self.value(t, other, line),
                    };
                    let bits = value.to_le_bytes();
                    let at = a + (k * w) as u64;
                    if op[1] == "shared" {
                        self.shared_slice(t, at, w, true, line)
                            .copy_from_slice(&bits[..w]);
                    } else {
                        memory.slice(at, w, line).copy_from_slice(&bits[..w]);
                    }
                }
            }
            "add" | "sub" | "mul" | "div" if matches!(ty, "f32" | "f64") => {
                let (a, b) = (v(self, 1), v(self, 2));
                let r = match op[0] {
                    "add" => float_binary(ty, a, b, |x, y| x + y, |x, y| x + y),
                    "sub" => float_binary(ty, a, b, |x, y| x - y, |x, y| x - y),
                    "mul" => float_binary(ty, a, b, |x, y| x * y, |x, y| x * y),
                    "div" => float_binary(ty, a, b, |x, y| x / y, |x, y| x / y),
                    other => panic!("float {other}: {line}"),
                };
                self.set(t, arg(0), r);
            }
            "fma" => {
                let (a, b, c) = (v(self, 1), v(self, 2), v(self, 3));
                let r = match ty {
                    "f32" => of_f32(f32_of(a).mul_add(f32_of(b), f32_of(c))),
                    "f64" => f64_of(a).mul_add(f64_of(b), f64_of(c)).to_bits(),
                    other => panic!("fma {other}"),
                };
                self.set(t, arg(0), r);
            }
            "neg" | "abs" | "sqrt" if matches!(ty, "f32" | "f64") => {
                let a = v(self, 1);
                let r = match (op[0], ty) {
                    ("neg", "f32") => of_f32(-f32_of(a)),
                    ("neg", _) => (-f64_of(a)).to_bits(),
                    ("abs", "f32") => of_f32(f32_of(a).abs()),
                    ("abs", _) => f64_of(a).abs().to_bits(),
                    ("sqrt", "f32") => of_f32(f32_of(a).sqrt()),
                    _ => f64_of(a).sqrt().to_bits(),
                };
                self.set(t, arg(0), r);
            }
            // The approximate instructions of fast math, here correctly rounded: the tests
            // allow for the hardware's documented errors.
            "ex2" | "lg2" | "sin" | "cos" | "rsqrt" => {
                assert!(ty == "f32" && op[1] == "approx", "{line}");
                let x = f64::from(f32_of(v(self, 1)));
                let r = match op[0] {
                    "ex2" => x.exp2(),
                    "lg2" => x.log2(),
                    "sin" => x.sin(),
                    "cos" => x.cos(),
                    _ => 1.0 / x.sqrt(),
                };
                self.set(t, arg(0), of_f32(r as f32));
            }
            "copysign" => {
                // d = |b| with the sign of a.
                let (a, b) = (v(self, 1), v(self, 2));
                let r = match ty {
                    "f32" => of_f32(f32_of(b).copysign(f32_of(a))),
                    _ => f64_of(b).copysign(f64_of(a)).to_bits(),
                };
                self.set(t, arg(0), r);
            }
            "add" | "sub" | "mul" | "mad" | "div" | "rem" | "and" | "or" | "xor" | "shl"
            | "shr" | "not" | "neg" | "abs" | "max" | "min" => {
                let m = mask(ty);
                let a = v(self, 1);
                let r = match (op[0], op.get(1).copied()) {
                    ("add", _) => a.wrapping_add(v(self, 2)) & m,
                    ("sub", _) => a.wrapping_sub(v(self, 2)) & m,
                    ("neg", _) => a.wrapping_neg() & m,
                    // The most negative value is its own absolute value.
                    ("abs", _) => signed(a, ty).wrapping_abs() as u64 & m,
                    ("mul", Some("wide")) => {
                        let b = v(self, 2);
                        if ty.starts_with('s') {
                            (signed(a, ty).wrapping_mul(signed(b, ty))) as u64
                        } else {
                            (a & m).wrapping_mul(b & m)
                        }
                    }
                    ("mul", Some("lo")) => a.wrapping_mul(v(self, 2)) & m,
                    ("mad", Some("lo")) => a.wrapping_mul(v(self, 2)).wrapping_add(v(self, 3)) & m,
                    ("div" | "rem", _) => {
                        let b = v(self, 2);
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
                            (if op[0] == "div" {
                                x.wrapping_div(y)
                            } else {
                                x.wrapping_rem(y)
                            }) as u64
                                & m
                        } else if op[0] == "div" {
                            x / y
                        } else {
                            x % y
                        }
                    }
                    ("max" | "min", _) => {
                        let b = v(self, 2);
                        let (x, y): (i128, i128) = if ty.starts_with('s') {
                            (i128::from(signed(a, ty)), i128::from(signed(b, ty)))
                        } else {
                            (i128::from(a & m), i128::from(b & m))
                        };
                        let pick = if (op[0] == "max") == (x >= y) { a } else { b };
                        pick & m
                    }
                    ("and", _) => a & v(self, 2) & m,
                    ("or", _) => (a | v(self, 2)) & m,
                    ("xor", _) => (a ^ v(self, 2)) & m,
                    ("not", _) if ty == "pred" => u64::from(a == 0),
                    ("not", _) => !a & m,
                    ("shl", _) => {
                        let n = v(self, 2);
                        if n >= (8 * width(ty)) as u64 {
                            0
                        } else {
                            (a << n) & m
                        }
                    }
                    ("shr", _) => {
                        let n = v(self, 2).min((8 * width(ty) - 1) as u64);
                        if ty.starts_with('s') {
                            (signed(a, ty) >> n) as u64 & m
                        } else {
                            (a & m) >> n
                        }
                    }
                    (other, _) => panic!("integer {other}: {line}"),
                };
                self.set(t, arg(0), r);
            }
            "setp" => {
                let r = compare(op[1], ty, v(self, 1), v(self, 2));
                self.set(t, arg(0), u64::from(r));
            }
            "selp" => {
                let p = v(self, 3) != 0;
                let r = if p { v(self, 1) } else { v(self, 2) };
                self.set(t, arg(0), r & mask(ty));
            }
            "cvt" => {
                // cvt[.mode].to.from
                let n = op.len();
                let (to, from) = (op[n - 2], op[n - 1]);
                let mode = (n == 4).then(|| op[1]);
                let r = convert(v(self, 1), to, from, mode);
                self.set(t, arg(0), r);
            }
            other => panic!("unknown instruction {other}: {line}"),
        }
        self.threads[t].pc = next;
    }
}
