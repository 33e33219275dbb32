//! PTX text from kernel IR: a pure renderer (no CUDA needed to build or test it), so every
//! kernel can be snapshotted and assembled with `ptxas` anywhere.
//!
//! Legalization comes first ([`legalize`]): transcendentals are expanded into primitives
//! (`kernel::math`, 3 ULP for f32, so no `.approx` instruction is emitted unless fast math is
//! asked for, [`MathMode::Fast`]), then every
//! instruction is checked against what the renderer supports, and the index width is chosen
//! (32-bit while the element count allows, since 64-bit division is slow on the GPU).
//!
//! Each flat kernel is one grid-stride loop over its elements (several independent ones
//! launched together are their loops in turn, see [`Launch`]), branch-free but for the rare
//! path of sin and cos arguments beyond the short reduction ([`KOp::Beyond`]); row kernels
//! are rendered by [`rows`]. Constants (each once)
//! and scalar inputs are loaded before the loop; inputs use the read-only (`.nc`) path; float
//! arithmetic uses the `.rn` forms so that `ptxas` never contracts a multiply and an add into
//! an fma on its own: the kernel IR already contracts the products whose only use is a sum
//! ([`crate::kernel::contract`]), so the GPU computes exactly what the CPU backend does.

pub mod copy;
pub mod matmul;
pub mod reduce;
pub mod rows;
pub mod support;

use crate::kernel::halves::{self, is_half};
use crate::kernel::{math, Access, Buffer, KInstr, KOp, Kernel, KernelSig, Role};
use crate::target::Support;
use copy::{render_copy, CopyKernel};
use ferrax_ir::{BinaryOp, CompareOp, DType, Scalar, UnaryOp, ValueId};
use matmul::{render_int_gemm, IntGemmKernel};
use reduce::{render_reduce_launch, ReduceKernel, ReduceLaunch};
use std::collections::HashMap;
use std::fmt::Write;

/// The GPU architecture a module is rendered for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PtxTarget {
    /// Ampere and later (the baseline).
    Sm80,
    /// Hopper.
    Sm90,
}

impl PtxTarget {
    pub const ALL: [PtxTarget; 2] = [PtxTarget::Sm80, PtxTarget::Sm90];

    /// The best target a device of compute capability `major.minor` runs.
    pub fn for_compute_capability(major: i32, _minor: i32) -> PtxTarget {
        if major >= 9 {
            PtxTarget::Sm90
        } else {
            PtxTarget::Sm80
        }
    }

    pub fn arch(self) -> &'static str {
        match self {
            PtxTarget::Sm80 => "sm_80",
            PtxTarget::Sm90 => "sm_90",
        }
    }

    /// The lowest PTX ISA version that has the target: CUDA 11.0+ drivers load 7.0, CUDA 11.8+
    /// load 7.8, CUDA 12 and 13 load both.
    fn isa(self) -> &'static str {
        match self {
            PtxTarget::Sm80 => "7.0",
            PtxTarget::Sm90 => "7.8",
        }
    }
}

/// How f32 transcendentals, square roots and quotients are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MathMode {
    /// Expanded into primitives (`kernel::math`), each within 3 ULP; quotients and square
    /// roots correctly rounded, as on the CPU.
    #[default]
    Accurate,
    /// Opt-in (CUDA's `--use_fast_math`): f32 exp, log, sin, cos and rsqrt by the hardware's
    /// approximate instructions (`ex2`, `lg2`, `sin`, `cos`, `rsqrt.approx`), square roots by
    /// `sqrt.approx` and quotients by `div.full`: one or two instructions each instead of ten
    /// to thirty, at the errors CUDA documents for the same instructions (exp 2 + ⌊1.2·|x|⌋
    /// ULP; log and sin 2^-21.41 absolute on [0.5, 2] and [-π, π], cos 2^-21.19 on [-π, π],
    /// log 3 ULP elsewhere, sin/cos worse beyond; rsqrt and quotients 2 ULP, square roots 1).
    /// Logistic and GELU's `1 + tanh(u)` take the approximate exp; tanh otherwise, expm1,
    /// log1p, pow and f64 keep their accurate expansions.
    Fast,
}

#[derive(Debug, thiserror::Error)]
pub enum PtxError {
    #[error("kernel {kernel}: {what} is not supported by the PTX renderer")]
    Unsupported { kernel: String, what: String },
}

/// A kernel ready to render: what the support table ([`support`]) marks
/// [`Support::Expand`] expanded (f16/bf16 widened to f32, f32 remainders and integer powers,
/// transcendentals but for those `mode` approximates), and every instruction left one the
/// table marks [`Support::Native`] or a primitive the renderer has.
pub fn legalize(kernel: &Kernel, mode: MathMode) -> Result<Kernel, PtxError> {
    let target = support::target(mode);
    let native = |op: &KOp, d: DType| {
        op.kernel_op()
            .is_some_and(|op| target.support(op, d) == Support::Native)
    };
    let widened = math::expand_arithmetic(&halves::widen(kernel));
    let mut expanded = math::expand_guarded_except(&widened, &native);
    let unsupported = |what: String| PtxError::Unsupported {
        kernel: kernel.name.clone(),
        what,
    };
    if let Some(r) = &kernel.rows {
        if r.cols > rows::MAX_COLS {
            return Err(unsupported(format!("rows of {} elements", r.cols)));
        }
        if rows::row_layout(&expanded).is_some_and(|l| l.streamed) {
            expanded = crate::kernel::rows::recompute_carried(&expanded);
        }
    }
    for ins in &expanded.body {
        // u8 values are only loaded, converted and stored.
        let byte = std::iter::once(ins.dtype)
            .chain(ins.args.iter().map(|&a| expanded.body[a].dtype))
            .any(|d| d == DType::U8);
        if byte && !matches!(ins.op, KOp::Load(_) | KOp::Store(_) | KOp::Convert(_)) {
            return Err(unsupported(format!("{:?} on u8", ins.op)));
        }
        let int = matches!(ins.dtype, DType::I32 | DType::I64);
        let ok = match &ins.op {
            KOp::Load(_) | KOp::Store(_) | KOp::Const(_) | KOp::Bitcast => true,
            KOp::Fma => !int && ins.dtype != DType::Bool,
            KOp::ShiftLeft(_) | KOp::ShiftRight(_) => int,
            KOp::Beyond(_) => matches!(ins.dtype, DType::F32 | DType::F64),
            KOp::Reduce(_) if kernel.rows.is_none() => false,
            KOp::Unary(_)
            | KOp::Binary(_)
            | KOp::Compare(_)
            | KOp::Select
            | KOp::Clamp
            | KOp::Convert(_)
            | KOp::Reduce(_)
            | KOp::Accumulate(_) => expanded
                .support_entry(ins)
                .is_some_and(|(op, d)| target.support(op, d) == Support::Native),
        };
        if !ok {
            return Err(unsupported(format!("{:?} on {}", ins.op, ins.dtype)));
        }
    }
    Ok(expanded)
}

/// `kernel` legalized, where the renderer takes it: it renders as an entry of its own. A plan
/// leaves a kernel it does not take to the host rather than failing the program.
pub fn legal_kernel(kernel: &Kernel, mode: MathMode) -> Option<Kernel> {
    let legal = legalize(kernel, mode).ok()?;
    let name = entry_name(kernel);
    let rendered = match legal.rows {
        Some(_) => rows::render_row_entry(&name, &legal, mode),
        None => render_entry(&name, &[&legal], mode),
    };
    rendered.ok().map(|_| legal)
}

/// Kernels launched as one: the entry `name` runs each of `kernels` (indices into the
/// module's kernels) in turn, its parameters theirs in that order. They must not read one
/// another's outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub name: String,
    pub kernels: Vec<usize>,
}

impl Launch {
    /// One launch per kernel, named after it.
    pub fn each(kernels: &[Kernel]) -> Vec<Launch> {
        (0..kernels.len())
            .map(|k| Launch {
                name: entry_name(&kernels[k]),
                kernels: vec![k],
            })
            .collect()
    }
}

/// One PTX module holding `kernels` (each its own entry, named after it), `reductions` and
/// `copies`, with accurate math.
pub fn render_module(
    kernels: &[Kernel],
    reductions: &[ReduceKernel],
    copies: &[CopyKernel],
    target: PtxTarget,
) -> Result<String, PtxError> {
    render_launches(
        kernels,
        &Launch::each(kernels),
        (reductions, &ReduceLaunch::each(reductions)),
        copies,
        &[],
        target,
        MathMode::Accurate,
    )
}

/// One PTX module holding an entry per launch of `kernels`, then one per launch of `reductions`,
/// then `copies` and integer products.
pub fn render_launches(
    kernels: &[Kernel],
    launches: &[Launch],
    reductions: (&[ReduceKernel], &[ReduceLaunch]),
    copies: &[CopyKernel],
    int_gemms: &[IntGemmKernel],
    target: PtxTarget,
    mode: MathMode,
) -> Result<String, PtxError> {
    let legal = kernels
        .iter()
        .map(|k| legalize(k, mode))
        .collect::<Result<Vec<_>, _>>()?;
    render_legal_launches(
        &legal, launches, reductions, copies, int_gemms, target, mode,
    )
}

/// [`render_launches`] of kernels already legalized (for `mode`).
pub fn render_legal_launches(
    legal: &[Kernel],
    launches: &[Launch],
    (reductions, reduce_launches): (&[ReduceKernel], &[ReduceLaunch]),
    copies: &[CopyKernel],
    int_gemms: &[IntGemmKernel],
    target: PtxTarget,
    mode: MathMode,
) -> Result<String, PtxError> {
    let mut out = format!(
        "//\n// Generated by ferrax\n//\n\n.version {}\n.target {}\n.address_size 64\n",
        target.isa(),
        target.arch()
    );
    for launch in launches {
        let legal: Vec<&Kernel> = launch.kernels.iter().map(|&k| &legal[k]).collect();
        out.push('\n');
        out.push_str(&match legal.as_slice() {
            [one] if one.rows.is_some() => rows::render_row_entry(&launch.name, one, mode)?,
            _ => render_entry(&launch.name, &legal, mode)?,
        });
    }
    for launch in reduce_launches {
        out.push('\n');
        out.push_str(&render_reduce_launch(launch, reductions));
    }
    for c in copies {
        out.push('\n');
        out.push_str(&render_copy(c));
    }
    for g in int_gemms {
        out.push('\n');
        out.push_str(&render_int_gemm(g));
    }
    Ok(out)
}

/// A kernel's PTX entry name: its name with anything PTX does not allow replaced.
pub fn entry_name(kernel: &Kernel) -> String {
    symbol(&kernel.name)
}

/// `name` with anything a PTX identifier does not allow replaced.
pub fn symbol(name: &str) -> String {
    let mut name: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) || name.is_empty() {
        name.insert(0, '_');
    }
    name
}

/// Register classes: f32, f64, 32-bit int, 64-bit int, predicate, 16-bit scratch.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Class {
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

fn reg_class(d: DType) -> Class {
    match d {
        DType::F32 => Class::F,
        DType::F64 => Class::Fd,
        DType::I32 => Class::R,
        DType::I64 => Class::Rd,
        DType::Bool => Class::P,
        // u8 values are only loaded, converted and stored (`KernelTypes::conversions`).
        DType::F16 | DType::BF16 | DType::U8 => Class::Rs,
    }
}

/// The PTX type suffix of arithmetic on `d`, and of its raw bits.
fn suffix(d: DType) -> (&'static str, &'static str) {
    match d {
        DType::F32 => ("f32", "b32"),
        DType::F64 => ("f64", "b64"),
        DType::I32 => ("s32", "b32"),
        DType::I64 => ("s64", "b64"),
        DType::F16 | DType::BF16 => ("b16", "b16"),
        DType::U8 => ("u8", "b16"),
        _ => ("pred", "pred"),
    }
}

/// The integer class holding the bits of float type `d`.
fn bits_class(d: DType) -> Class {
    if d == DType::F32 {
        Class::R
    } else {
        Class::Rd
    }
}

struct Emitter {
    mode: MathMode,
    counts: HashMap<Class, usize>,
    /// Labels taken so far in the kernel body.
    labels: usize,
    /// The register of each constant (by type and literal), set once before the loop.
    constants: HashMap<(DType, String), String>,
    pre: String,
    body: String,
}

impl Emitter {
    fn new(mode: MathMode) -> Emitter {
        Emitter {
            mode,
            counts: HashMap::new(),
            labels: 0,
            constants: HashMap::new(),
            pre: String::new(),
            body: String::new(),
        }
    }

    /// The register declarations of everything taken so far.
    fn declare(&self, out: &mut String) {
        for (c, ty, prefix) in CLASSES {
            if let Some(n) = self.counts.get(&c) {
                let _ = writeln!(out, "\t.reg .{ty} {prefix}<{}>;", n + 1);
            }
        }
    }

    fn reg(&mut self, c: Class) -> String {
        let n = self.counts.entry(c).or_insert(0);
        *n += 1;
        let prefix = CLASSES
            .iter()
            .find(|(k, _, _)| *k == c)
            .map_or("%x", |e| e.2);
        format!("{prefix}{n}")
    }

    fn line(&mut self, s: String) {
        self.body.push('\t');
        self.body.push_str(&s);
        self.body.push_str(";\n");
    }

    /// A new label, named for `what` it marks.
    fn label(&mut self, what: &str) -> String {
        self.labels += 1;
        format!("$L_{what}_{}", self.labels)
    }

    /// A constant's register, set before the loop (once per kernel).
    fn constant(&mut self, s: Scalar, d: DType) -> String {
        let literal = float_literal(s).unwrap_or_else(|| ferrax_ir::scalar_text(s));
        if let Some(r) = self.constants.get(&(d, literal.clone())) {
            return r.clone();
        }
        let (t, _) = suffix(d);
        let r = self.reg(reg_class(d));
        if let Scalar::Bool(v) = s {
            let k = self.reg(Class::R);
            self.pre_line(format!("mov.u32 {k}, {}", u32::from(v)));
            self.pre_line(format!("setp.ne.u32 {r}, {k}, 0"));
        } else {
            self.pre_line(format!("mov.{t} {r}, {literal}"));
        }
        self.constants.insert((d, literal), r.clone());
        r
    }

    /// `x` (of type `from`) rounded to f32 to odd: toward zero, then, where that was inexact,
    /// with the lowest bit set. Rounding that to a type of at most 22 bits of precision
    /// (bf16's 8) rounds as once from `x` (sm_80 has no `cvt.rn.bf16.f64`, and from integers
    /// none at all).
    fn f32_round_to_odd(&mut self, x: &str, from: DType) -> String {
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

    fn pre_line(&mut self, s: String) {
        self.pre.push('\t');
        self.pre.push_str(&s);
        self.pre.push_str(";\n");
    }

    /// Integer `a / b` (or `a % b`) as the interpreter defines it, truncating: `a / 0 = -1`,
    /// `a % 0 = a`, and `MIN / -1` wrapping to `MIN` (`MIN % -1 = 0`). The divisor is made 1
    /// in those cases, so the hardware never sees them (PTX leaves them unspecified).
    fn int_division(&mut self, a: &str, b: &str, d: DType, quotient: bool) -> String {
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
    fn f64_remainder(&mut self, a: &str, b: &str) -> String {
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
    fn min_max(&mut self, a: &str, b: &str, d: DType, max: bool) -> String {
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

fn float_literal(s: Scalar) -> Option<String> {
    match s {
        Scalar::F32(x) => Some(format!("0f{:08X}", x.to_bits())),
        Scalar::F64(x) => Some(format!("0d{:016X}", x.to_bits())),
        _ => None,
    }
}

/// Elements per thread and iteration: 16 bytes of f32 (or of an 8-byte type) when every access
/// pattern keeps groups of that many consecutive elements together, else 1.
fn vector_width(kernel: &Kernel) -> usize {
    let v = if kernel.sig.buffers.iter().any(|b| b.dtype.size_bytes() == 8) {
        2
    } else {
        4
    };
    let fits = kernel.len.is_multiple_of(v)
        && kernel.sig.buffers.iter().all(|b| match b.access {
            Access::Outer(n) | Access::Inner(n) => n.is_multiple_of(v),
            Access::Each | Access::Scalar => true,
        });
    if fits {
        v
    } else {
        1
    }
}

/// The `.entry` of a launch: its legalized kernels' grid-stride loops one after another, every
/// thread running each in turn (so no kernel may read another's output: nothing orders one
/// thread's stores before another thread's loads).
fn render_entry(name: &str, kernels: &[&Kernel], mode: MathMode) -> Result<String, PtxError> {
    let mut e = Emitter::new(mode);
    let thread = Thread::new(&mut e);
    let mut params = Vec::new();
    let mut comments = String::new();
    let mut loops = String::new();
    for (k, kernel) in kernels.iter().enumerate() {
        let first = params.len();
        params.extend((0..kernel.sig.buffers.len()).map(|i| format!("{name}_param_{}", first + i)));
        let tag = if kernels.len() > 1 {
            format!("_{k}")
        } else {
            String::new()
        };
        let (comment, text) = render_loop(&mut e, kernel, &params[first..], &thread, &tag)?;
        comments.push_str(&comment);
        loops.push_str(&text);
    }
    let mut out = comments;
    entry_header(&mut out, name, &params, None);
    e.declare(&mut out);
    out.push('\n');
    out.push_str(&e.pre);
    out.push_str(&loops);
    out.push_str("\tret;\n}\n");
    Ok(out)
}

/// `.visible .entry name(params)`, with its largest block size where given, up to the `{`.
fn entry_header(out: &mut String, name: &str, params: &[String], threads: Option<usize>) {
    let declared: Vec<String> = params
        .iter()
        .map(|p| format!("\t.param .u64 {p}"))
        .collect();
    let _ = writeln!(out, ".visible .entry {name}(\n{}\n)", declared.join(",\n"));
    if let Some(n) = threads {
        let _ = writeln!(out, ".maxntid {n}, 1, 1");
    }
    out.push_str("{\n");
}

/// The start of a grid-stride entry over `len` elements with `buffers` address parameters: its
/// header, the `registers` it declares, the addresses in `%rd1..`, the thread's first element in
/// `%r5` and the grid's stride in `%r6` (its indices in `%r1..%r4`), and a branch to `$L_done`
/// for a thread with none.
fn grid_stride_entry(name: &str, buffers: usize, registers: &str, len: usize) -> String {
    let params: Vec<String> = (0..buffers).map(|p| format!("{name}_param_{p}")).collect();
    let mut s = String::new();
    entry_header(&mut s, name, &params, None);
    s.push_str(registers);
    for (p, param) in params.iter().enumerate() {
        let r = p + 1;
        let _ = writeln!(
            s,
            "\tld.param.u64 %rd{r}, [{param}];\n\tcvta.to.global.u64 %rd{r}, %rd{r};"
        );
    }
    s.push_str("\tmov.u32 %r1, %ctaid.x;\n\tmov.u32 %r2, %ntid.x;\n\tmov.u32 %r3, %tid.x;\n");
    s.push_str("\tmov.u32 %r4, %nctaid.x;\n\tmad.lo.s32 %r5, %r1, %r2, %r3;\n");
    let _ = writeln!(s, "\tmul.lo.s32 %r6, %r4, %r2;");
    let _ = writeln!(s, "\tsetp.ge.u32 %p1, %r5, {len};\n\t@%p1 bra $L_done;");
    s
}

/// The special registers every loop of an entry starts from.
struct Thread {
    ctaid: String,
    ntid: String,
    tid: String,
    nctaid: String,
}

impl Thread {
    /// Registers holding them, read before the loops.
    fn new(e: &mut Emitter) -> Thread {
        let (ctaid, ntid, tid, nctaid) = (
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
        );
        e.pre_line(format!("mov.u32 {ctaid}, %ctaid.x"));
        e.pre_line(format!("mov.u32 {ntid}, %ntid.x"));
        e.pre_line(format!("mov.u32 {tid}, %tid.x"));
        e.pre_line(format!("mov.u32 {nctaid}, %nctaid.x"));
        Thread {
            ctaid,
            ntid,
            tid,
            nctaid,
        }
    }
}

/// One kernel's grid-stride loop (its setup goes to `e.pre`), on the buffers whose addresses
/// are the parameters `params`; `tag` keeps its labels apart from other loops of the entry.
/// Returns the comment describing it and the loop's text.
fn render_loop(
    e: &mut Emitter,
    kernel: &Kernel,
    params: &[String],
    thread: &Thread,
    tag: &str,
) -> Result<(String, String), PtxError> {
    let lanes = vector_width(kernel);
    let wide = kernel.len > i32::MAX as usize;
    // Buffer base addresses.
    let bases: Vec<String> = params
        .iter()
        .map(|param| {
            let r = e.reg(Class::Rd);
            e.pre_line(format!("ld.param.u64 {r}, [{param}]"));
            e.pre_line(format!("cvta.to.global.u64 {r}, {r}"));
            r
        })
        .collect();
    // The first element index of this thread and the grid stride, both in elements.
    let Thread {
        ctaid,
        ntid,
        tid,
        nctaid,
    } = thread;
    let (index, stride, it) = if wide {
        let (i, s, t) = (e.reg(Class::Rd), e.reg(Class::Rd), e.reg(Class::Rd));
        e.pre_line(format!("mul.wide.u32 {i}, {ctaid}, {ntid}"));
        e.pre_line(format!("cvt.u64.u32 {t}, {tid}"));
        e.pre_line(format!("add.s64 {i}, {i}, {t}"));
        e.pre_line(format!("mul.lo.s64 {i}, {i}, {lanes}"));
        e.pre_line(format!("mul.wide.u32 {s}, {nctaid}, {ntid}"));
        e.pre_line(format!("mul.lo.s64 {s}, {s}, {lanes}"));
        (i, s, "u64")
    } else {
        let (i, s) = (e.reg(Class::R), e.reg(Class::R));
        e.pre_line(format!("mad.lo.s32 {i}, {ctaid}, {ntid}, {tid}"));
        e.pre_line(format!("mul.lo.s32 {i}, {i}, {lanes}"));
        e.pre_line(format!("mul.lo.s32 {s}, {nctaid}, {ntid}"));
        e.pre_line(format!("mul.lo.s32 {s}, {s}, {lanes}"));
        (i, s, "u32")
    };
    let len = kernel.len;
    // Per instruction, its register in each lane.
    let mut values: Vec<Vec<String>> = Vec::with_capacity(kernel.body.len());
    // Per-iteration addresses of element `index` (or its broadcast source), one per buffer.
    let mut addresses: HashMap<usize, String> = HashMap::new();
    let mut address = |e: &mut Emitter, buffer: usize| -> String {
        if let Some(a) = addresses.get(&buffer) {
            return a.clone();
        }
        let b = &kernel.sig.buffers[buffer];
        let size = b.dtype.size_bytes();
        let idx_class = if wide { Class::Rd } else { Class::R };
        let idx = match b.access {
            Access::Each => index.clone(),
            Access::Scalar => {
                let z = e.reg(idx_class);
                e.line(format!("mov.{it} {z}, 0"));
                z
            }
            Access::Outer(n) => {
                let q = e.reg(idx_class);
                e.line(format!("div.{it} {q}, {index}, {n}"));
                q
            }
            Access::Inner(n) => {
                let q = e.reg(idx_class);
                e.line(format!("rem.{it} {q}, {index}, {n}"));
                q
            }
        };
        let offset = e.reg(Class::Rd);
        if wide {
            e.line(format!("mul.lo.s64 {offset}, {idx}, {size}"));
        } else {
            e.line(format!("mul.wide.u32 {offset}, {idx}, {size}"));
        }
        let addr = e.reg(Class::Rd);
        e.line(format!("add.s64 {addr}, {}, {offset}", bases[buffer]));
        addresses.insert(buffer, addr.clone());
        addr
    };
    for ins in &kernel.body {
        let d = ins.dtype;
        let (t, _) = suffix(d);
        let class = reg_class(d);
        let out = match &ins.op {
            KOp::Load(buffer) => {
                let b = &kernel.sig.buffers[*buffer];
                // Broadcast sources are one element for the whole group of lanes.
                let shared = matches!(b.access, Access::Scalar | Access::Outer(_));
                let count = if shared { 1 } else { lanes };
                let regs: Vec<String> = (0..count).map(|_| e.reg(class)).collect();
                let space = if b.access == Access::Scalar {
                    "ld.global"
                } else {
                    "ld.global.nc"
                };
                let mut text = Vec::new();
                if d == DType::Bool {
                    for (lane, r) in regs.iter().enumerate() {
                        let s = e.reg(Class::Rs);
                        text.push(format!("{space}.u8 {s}, [ADDR+{lane}]"));
                        text.push(format!("setp.ne.u16 {r}, {s}, 0"));
                    }
                } else if count == 1 {
                    text.push(format!("{space}.{t} {}, [ADDR]", regs[0]));
                } else {
                    text.push(format!(
                        "{space}.v{count}.{t} {{{}}}, [ADDR]",
                        regs.join(", ")
                    ));
                }
                for line in text {
                    if b.access == Access::Scalar {
                        e.pre_line(line.replace("ADDR", &bases[*buffer]));
                    } else {
                        let a = address(e, *buffer);
                        e.line(line.replace("ADDR", &a));
                    }
                }
                if shared {
                    vec![regs[0].clone(); lanes]
                } else {
                    regs
                }
            }
            KOp::Const(s) => vec![e.constant(*s, d); lanes],
            KOp::Store(buffer) => {
                let a = address(e, *buffer);
                let v = values[ins.args[0]].clone();
                if d == DType::Bool {
                    for (lane, p) in v.iter().enumerate() {
                        let s = e.reg(Class::Rs);
                        e.line(format!("selp.u16 {s}, 1, 0, {p}"));
                        e.line(format!("st.global.u8 [{a}+{lane}], {s}"));
                    }
                } else if lanes == 1 {
                    e.line(format!("st.global.{t} [{a}], {}", v[0]));
                } else {
                    e.line(format!(
                        "st.global.v{lanes}.{t} [{a}], {{{}}}",
                        v.join(", ")
                    ));
                }
                v
            }
            _ => (0..lanes)
                .map(|lane| {
                    let args: Vec<String> =
                        ins.args.iter().map(|&a| values[a][lane].clone()).collect();
                    emit_op(e, kernel, ins, &args)
                })
                .collect::<Result<_, _>>()?,
        };
        values.push(out);
    }
    let (done, more) = (e.reg(Class::P), e.reg(Class::P));
    let mut comment = String::new();
    let _ = writeln!(
        comment,
        "// {len} elements, {lanes} per thread and step; buffers:"
    );
    for (i, b) in kernel.sig.buffers.iter().enumerate() {
        let role = if b.role == Role::Input { "in" } else { "out" };
        let _ = writeln!(comment, "//   #{i} {role} {} {:?}", b.dtype, b.access);
    }
    let mut out = String::new();
    let _ = writeln!(out, "\tsetp.ge.{it} {done}, {index}, {len};");
    let _ = writeln!(out, "\t@{done} bra $L_done{tag};");
    let _ = writeln!(out, "$L_loop{tag}:");
    out.push_str(&std::mem::take(&mut e.body));
    let _ = writeln!(out, "\tadd.s{} {index}, {index}, {stride};", &it[1..]);
    let _ = writeln!(out, "\tsetp.lt.{it} {more}, {index}, {len};");
    let _ = writeln!(out, "\t@{more} bra $L_loop{tag};");
    let _ = writeln!(out, "$L_done{tag}:");
    Ok((comment, out))
}

/// One lane of an arithmetic instruction, on argument registers `args`; returns its register.
fn emit_op(
    e: &mut Emitter,
    kernel: &Kernel,
    ins: &KInstr,
    args: &[String],
) -> Result<String, PtxError> {
    let unsupported = |what: String| PtxError::Unsupported {
        kernel: kernel.name.clone(),
        what,
    };
    let d = ins.dtype;
    let (t, bits) = suffix(d);
    let class = reg_class(d);
    let arg = |k: usize| args[k].clone();
    let fast = e.mode == MathMode::Fast && d == DType::F32;
    let out = match &ins.op {
        KOp::Unary(u) => {
            let x = arg(0);
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
                other => return Err(unsupported(format!("unexpanded {}", other.name()))),
            }
            r
        }
        KOp::Binary(op) => {
            let (a, b) = (arg(0), arg(1));
            match (d, op) {
                (DType::F32 | DType::F64, BinaryOp::Max | BinaryOp::Min) => {
                    e.min_max(&a, &b, d, *op == BinaryOp::Max)
                }
                (DType::I32 | DType::I64, BinaryOp::Div | BinaryOp::Rem) => {
                    e.int_division(&a, &b, d, *op == BinaryOp::Div)
                }
                (DType::F64, BinaryOp::Rem) => e.f64_remainder(&a, &b),
                _ => {
                    let r = e.reg(class);
                    let int = matches!(d, DType::I32 | DType::I64);
                    let name = match op {
                        BinaryOp::Add => format!("add{}", rn(d)),
                        BinaryOp::Sub => format!("sub{}", rn(d)),
                        // Wrapping, as the interpreter's i32 product.
                        BinaryOp::Mul if int => "mul.lo".to_string(),
                        BinaryOp::Mul => format!("mul{}", rn(d)),
                        BinaryOp::Div if fast => "div.full".to_string(),
                        BinaryOp::Div => format!("div{}", rn(d)),
                        other => other.name().to_string(),
                    };
                    let ty = if op.is_logical() { bits } else { t };
                    e.line(format!("{name}.{ty} {r}, {a}, {b}"));
                    r
                }
            }
        }
        KOp::Compare(c) => {
            let r = e.reg(Class::P);
            let from = kernel.body[ins.args[0]].dtype;
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
            e.line(format!("setp.{cc}.{ft} {r}, {}, {}", arg(0), arg(1)));
            r
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
        KOp::Clamp if matches!(d, DType::I32 | DType::I64) => {
            let (low, r) = (e.reg(class), e.reg(class));
            e.line(format!("max.{t} {low}, {}, {}", arg(1), arg(0)));
            e.line(format!("min.{t} {r}, {low}, {}", arg(2)));
            r
        }
        KOp::Clamp => {
            let low = e.min_max(&arg(1), &arg(0), d, true);
            e.min_max(&low, &arg(2), d, false)
        }
        KOp::Convert(to) if is_half(*to) || is_half(kernel.body[ins.args[0]].dtype) => {
            let from = kernel.body[ins.args[0]].dtype;
            let r = e.reg(class);
            let x = arg(0);
            match (from, *to) {
                (DType::F16, DType::F32) => e.line(format!("cvt.f32.f16 {r}, {x}")),
                (DType::BF16, DType::F32) => {
                    // bf16 is the upper half of an f32 (cvt.f32.bf16 needs sm_90).
                    let w = e.reg(Class::R);
                    e.line(format!("cvt.u32.u16 {w}, {x}"));
                    e.line(format!("shl.b32 {w}, {w}, 16"));
                    e.line(format!("mov.b32 {r}, {w}"));
                }
                (DType::F32 | DType::F64, DType::F16) => {
                    e.line(format!("cvt.rn.f16.{} {r}, {x}", suffix(from).0))
                }
                (DType::F32, DType::BF16) => e.line(format!("cvt.rn.bf16.f32 {r}, {x}")),
                // Integers are exact in f32 below 2^24, and f16 is infinite from 65,520 on:
                // rounded once. u8 is exact in both halves.
                (DType::U8 | DType::I32 | DType::I64, DType::F16) | (DType::U8, DType::BF16) => {
                    let w = e.reg(Class::F);
                    let half = if *to == DType::F16 { "f16" } else { "bf16" };
                    e.line(format!("cvt.rn.f32.{} {w}, {x}", suffix(from).0));
                    e.line(format!("cvt.rn.{half}.f32 {r}, {w}"));
                }
                (DType::I32 | DType::I64 | DType::F64, DType::BF16) => {
                    let w = e.f32_round_to_odd(&x, from);
                    e.line(format!("cvt.rn.bf16.f32 {r}, {w}"));
                }
                _ => return Err(unsupported(format!("convert {from} to {to}"))),
            }
            r
        }
        // Bools as the interpreter converts them: 1 or 0, and `x != 0` (NaN is true).
        KOp::Convert(to) if kernel.body[ins.args[0]].dtype == DType::Bool => {
            let r = e.reg(class);
            let (one, zero) = match to {
                DType::F32 | DType::F64 => (
                    float_literal(one_of(d)).unwrap_or_default(),
                    float_literal(zero_of(d)).unwrap_or_default(),
                ),
                _ => ("1".to_string(), "0".to_string()),
            };
            e.line(format!("selp.{t} {r}, {one}, {zero}, {}", arg(0)));
            r
        }
        KOp::Convert(DType::Bool) => {
            let from = kernel.body[ins.args[0]].dtype;
            let (ft, _) = suffix(from);
            let r = e.reg(Class::P);
            let (ne, zero) = match from {
                DType::F32 | DType::F64 => {
                    ("neu", float_literal(zero_of(from)).unwrap_or_default())
                }
                _ => ("ne", "0".to_string()),
            };
            e.line(format!("setp.{ne}.{ft} {r}, {}, {zero}", arg(0)));
            r
        }
        KOp::Convert(to) => {
            let from = kernel.body[ins.args[0]].dtype;
            let r = e.reg(class);
            let (ft, _) = suffix(from);
            let x = arg(0);
            let mode = match (from, *to) {
                (f, t) if f == t => "",
                (DType::F32, DType::F64) => "",
                (DType::F64, DType::F32) => ".rn",
                (DType::F32 | DType::F64, _) => ".rzi",
                (_, DType::F32 | DType::F64) => ".rn",
                _ => "",
            };
            if from == *to {
                e.line(format!("mov.{t} {r}, {x}"));
            } else {
                e.line(format!("cvt{mode}.{t}.{ft} {r}, {x}"));
            }
            r
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
        KOp::ShiftRight(n) => {
            let r = e.reg(class);
            e.line(format!("shr.{t} {r}, {}, {n}", arg(0)));
            r
        }
        KOp::Beyond(u) => {
            // The short reduction's result, unless |x| reaches its limit: then a branch (taken
            // by no warp whose arguments are all in range) to the full-range expansion.
            let (x, r, magnitude) = (arg(0), e.reg(class), e.reg(class));
            let in_range = e.reg(Class::P);
            let limit = if d == DType::F32 {
                Scalar::F32(math::SIN_COS_F32_LIMIT)
            } else {
                Scalar::F64(math::SIN_COS_F64_LIMIT)
            };
            let limit = float_literal(limit).unwrap_or_default();
            e.line(format!("mov.{t} {r}, {}", arg(1)));
            e.line(format!("abs.{t} {magnitude}, {x}"));
            // Unordered: NaN stays on the short path, which passes it through.
            e.line(format!("setp.ltu.{t} {in_range}, {magnitude}, {limit}"));
            let skip = e.label("beyond");
            e.line(format!("@{in_range} bra {skip}"));
            let full = emit_full_range(e, kernel, *u, d, &x)?;
            e.line(format!("mov.{t} {r}, {full}"));
            e.body.push_str(&format!("{skip}:\n"));
            r
        }
        KOp::Load(_) | KOp::Const(_) | KOp::Store(_) | KOp::Reduce(_) | KOp::Accumulate(_) => {
            return Err(unsupported(format!("{:?} as arithmetic", ins.op)))
        }
    };
    Ok(out)
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
