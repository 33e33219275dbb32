//! The emitter every entry takes its registers from: registers taken by class and numbered in
//! order (declared once the entry is complete, so their counts are the ones used), and for
//! kernel, row kernel, copy and integer product entries the entry's text in two parts (set-up
//! before its loops, and the loop body), labels and constants. Instruction sequences take
//! registers from it rather than naming them, so no two parts of an entry can pick the same
//! register by accident. Reduction entries ask for theirs by what they hold (`reduce::regs`),
//! so that each part of a grouped launch repeats one reduction's code on the same registers.

use super::MathMode;
use ferrax_ir::{DType, Scalar};
use std::collections::HashMap;
use std::fmt::Write;

/// Register classes: f32, f64, 32-bit int, 64-bit int, predicate, 16-bit scratch.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Class {
    F,
    Fd,
    R,
    Rd,
    P,
    Rs,
}

const CLASSES: [(Class, &str, &str); 6] = [
    (Class::P, "pred", "%p"),
    (Class::Rs, "b16", "%rs"),
    (Class::R, "b32", "%r"),
    (Class::Rd, "b64", "%rd"),
    (Class::F, "f32", "%f"),
    (Class::Fd, "f64", "%fd"),
];

/// The class of registers holding values of type `d`.
pub(super) fn reg_class(d: DType) -> Class {
    match d {
        DType::F32 => Class::F,
        DType::F64 => Class::Fd,
        DType::I32 | DType::U32 => Class::R,
        DType::I64 | DType::U64 => Class::Rd,
        DType::Bool => Class::P,
        // u8 values are only loaded, converted and stored (`KernelTypes::conversions`).
        DType::F16 | DType::BF16 | DType::U8 | DType::I8 | DType::I16 | DType::U16 => Class::Rs,
        // Never in a kernel (the support table leaves complex numbers to the host).
        DType::C64 | DType::C128 => Class::Rd,
    }
}

/// The PTX type suffix of arithmetic on `d`, and of its raw bits.
pub(super) fn suffix(d: DType) -> (&'static str, &'static str) {
    match d {
        DType::F32 => ("f32", "b32"),
        DType::F64 => ("f64", "b64"),
        DType::I32 => ("s32", "b32"),
        DType::I64 => ("s64", "b64"),
        DType::U32 => ("u32", "b32"),
        DType::F16 | DType::BF16 => ("b16", "b16"),
        DType::U8 => ("u8", "b16"),
        DType::I8 => ("s8", "b16"),
        DType::I16 => ("s16", "b16"),
        DType::U16 => ("u16", "b16"),
        DType::U64 => ("u64", "b64"),
        DType::Bool => ("pred", "pred"),
        // Never in a kernel (the support table leaves complex numbers to the host).
        DType::C64 | DType::C128 => ("b64", "b64"),
    }
}

/// The integer class holding the bits of float type `d`.
pub(super) fn bits_class(d: DType) -> Class {
    if d == DType::F32 {
        Class::R
    } else {
        Class::Rd
    }
}

/// One entry under construction.
pub(super) struct Emitter {
    pub(super) mode: MathMode,
    counts: HashMap<Class, usize>,
    /// Labels taken so far in the kernel body.
    labels: usize,
    /// The register of each constant (by type and literal), set once before the loop.
    constants: HashMap<(DType, String), String>,
    /// Set-up before the entry's loops.
    pub(super) pre: String,
    /// Where set-up goes instead while a loop over instances of one kernel is rendered: each
    /// instance's (its buffers' addresses, its first index); constants still go to `pre`.
    pub(super) instance: Option<String>,
    /// The loop body being built.
    pub(super) body: String,
}

impl Emitter {
    pub(super) fn new(mode: MathMode) -> Emitter {
        Emitter {
            mode,
            counts: HashMap::new(),
            labels: 0,
            constants: HashMap::new(),
            pre: String::new(),
            instance: None,
            body: String::new(),
        }
    }

    /// The register declarations of everything taken so far.
    pub(super) fn declare(&self, out: &mut String) {
        for (c, ty, prefix) in CLASSES {
            if let Some(n) = self.counts.get(&c) {
                let _ = writeln!(out, "\t.reg .{ty} {prefix}<{}>;", n + 1);
            }
        }
    }

    /// A new register of class `c`.
    pub(super) fn reg(&mut self, c: Class) -> String {
        let n = self.counts.entry(c).or_insert(0);
        *n += 1;
        let prefix = CLASSES
            .iter()
            .find(|(k, _, _)| *k == c)
            .map_or("%x", |e| e.2);
        format!("{prefix}{n}")
    }

    /// `N` new registers of class `c`.
    pub(super) fn regs<const N: usize>(&mut self, c: Class) -> [String; N] {
        std::array::from_fn(|_| self.reg(c))
    }

    /// An instruction of the body.
    pub(super) fn line(&mut self, s: String) {
        push_line(&mut self.body, &s);
    }

    /// A new label, named for `what` it marks.
    pub(super) fn label(&mut self, what: &str) -> String {
        self.labels += 1;
        format!("$L_{what}_{}", self.labels)
    }

    /// A constant's register, set before the loop (once per kernel).
    pub(super) fn constant(&mut self, s: Scalar, d: DType) -> String {
        let literal = float_literal(s).unwrap_or_else(|| ferrax_ir::scalar_text(s));
        if let Some(r) = self.constants.get(&(d, literal.clone())) {
            return r.clone();
        }
        let (t, _) = suffix(d);
        let r = self.reg(reg_class(d));
        let lines = if let Scalar::Bool(v) = s {
            let k = self.reg(Class::R);
            vec![
                format!("mov.u32 {k}, {}", u32::from(v)),
                format!("setp.ne.u32 {r}, {k}, 0"),
            ]
        } else {
            vec![format!("mov.{t} {r}, {literal}")]
        };
        for line in lines {
            push_line(&mut self.pre, &line);
        }
        self.constants.insert((d, literal), r.clone());
        r
    }

    /// An instruction of the set-up (of the instance, while one is rendered).
    pub(super) fn pre_line(&mut self, s: String) {
        push_line(self.instance.as_mut().unwrap_or(&mut self.pre), &s);
    }
}

/// Instruction `s` appended to `text`.
fn push_line(text: &mut String, s: &str) {
    text.push('\t');
    text.push_str(s);
    text.push_str(";\n");
}

/// The PTX literal of a float `s` (its bits); `None` for other types.
pub(super) fn float_literal(s: Scalar) -> Option<String> {
    match s {
        Scalar::F32(x) => Some(format!("0f{:08X}", x.to_bits())),
        Scalar::F64(x) => Some(format!("0d{:016X}", x.to_bits())),
        _ => None,
    }
}
