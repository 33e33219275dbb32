//! An emulator for the PTX the renderer emits, so that kernels are run, not only assembled,
//! where there is no GPU: each thread is interpreted on its own (registers, predicates, its
//! own program counter, so divergent branches need nothing special); `shfl.sync` waits for
//! every live lane of the warp and `bar.sync` for every live thread of the block, as on the
//! hardware. Reading a register no instruction has written, touching memory outside every
//! buffer, a barrier that some threads never reach, or shared memory one warp uses after
//! another wrote it (or writes after another used it) with no barrier between panics: those
//! are the bugs it is for.
//!
//! It implements what the renderer uses, with PTX's semantics: IEEE arithmetic rounded to
//! nearest (`.rn`; fma fused), ordered and unordered compares, conversions with their rounding
//! modes (float to integer saturating, NaN to 0), `copysign`, predicated instructions, 128-bit
//! vector loads and stores, shared memory and butterfly shuffles. What it does not know it
//! rejects by name.
#![allow(clippy::unwrap_used, clippy::panic)]
// Shared by tests/ptx.rs and tests/gpu.rs, each using a part.
#![allow(dead_code)]

use ferrax::compiler::backend::gpu::{GemmOperand, GpuError, GpuMachine};
use ferrax::compiler::backend::ptx::PtxTarget;
use ferrax::ir::{DType, Elements, Shape};
use ferrax::{Array, MatmulPrecision, TensorType};
use half::{bf16, f16};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Where global buffers start: address 0 is never valid.
const GLOBAL_BASE: u64 = 0x1_0000;

#[derive(Clone, Debug)]
enum Operand {
    Reg(usize),
    Imm(u64),
    Special(String),
    /// A `.shared` variable's address, or a parameter's name.
    Symbol(String),
    /// `[reg + offset]` or `[symbol + offset]`.
    Address(Box<Operand>, i64),
    Vector(Vec<usize>),
    Label(String),
}

#[derive(Clone, Debug)]
struct Instr {
    /// Register and whether the predicate is negated.
    guard: Option<(usize, bool)>,
    /// The opcode split at its dots: `["add", "rn", "f32"]`.
    op: Vec<String>,
    args: Vec<Operand>,
    line: String,
}

#[derive(Debug)]
pub struct Entry {
    params: Vec<String>,
    registers: usize,
    /// Shared variables: offset in the block's shared memory, bytes.
    shared: HashMap<String, (u64, u64)>,
    shared_bytes: u64,
    /// The `.maxntid` bound on a block's threads, where declared.
    max_threads: Option<u32>,
    instrs: Vec<Instr>,
    labels: HashMap<String, usize>,
}

/// The entries of a PTX module.
pub struct Module {
    entries: HashMap<String, Entry>,
}

fn split_operands(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            out.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

impl Module {
    pub fn parse(ptx: &str) -> Module {
        let mut entries = HashMap::new();
        let mut lines = ptx.lines().peekable();
        while let Some(line) = lines.next() {
            let Some(rest) = line.trim().strip_prefix(".visible .entry ") else {
                continue;
            };
            let name = rest.trim_end_matches('(').to_string();
            let mut params = Vec::new();
            for l in lines.by_ref() {
                let l = l.trim();
                if l.starts_with(')') {
                    break;
                }
                if let Some(p) = l.strip_prefix(".param .u64 ") {
                    params.push(p.trim_end_matches(',').to_string());
                }
            }
            let mut regs: HashMap<String, usize> = HashMap::new();
            let mut declared: HashMap<String, usize> = HashMap::new();
            let mut shared = HashMap::new();
            // Each shared variable at an odd multiple of its declared 8-byte alignment, no
            // better aligned than `.align 8` promises.
            let mut shared_bytes = 24;
            let mut max_threads = None;
            let mut instrs = Vec::new();
            let mut labels = HashMap::new();
            for l in lines.by_ref() {
                if l.starts_with('}') {
                    break;
                }
                let l = l.trim();
                if l.is_empty() || l.starts_with("//") || l == "{" {
                    continue;
                }
                if let Some(dims) = l.strip_prefix(".maxntid ") {
                    let x = dims.split(',').next().unwrap().trim();
                    max_threads = Some(x.parse().unwrap());
                    continue;
                }
                if let Some(label) = l.strip_suffix(':') {
                    labels.insert(label.to_string(), instrs.len());
                    continue;
                }
                if let Some(decl) = l.strip_prefix(".reg .") {
                    // `.reg .b32 %r<24>;` declares %r0 to %r23.
                    let (_, names) = decl.split_once(' ').unwrap();
                    let (prefix, count) = names.trim_end_matches(">;").split_once('<').unwrap();
                    declared.insert(prefix.to_string(), count.parse::<usize>().unwrap());
                    continue;
                }
                if let Some(decl) = l.strip_prefix(".shared .align 8 .b8 ") {
                    let decl = decl.trim_end_matches(';');
                    let (sym, size) = decl.split_once('[').unwrap();
                    let bytes: u64 = size.trim_end_matches(']').parse().unwrap();
                    shared.insert(sym.to_string(), (shared_bytes, bytes));
                    shared_bytes += bytes.div_ceil(8) * 8;
                    if shared_bytes.is_multiple_of(16) {
                        shared_bytes += 8;
                    }
                    continue;
                }
                instrs.push(parse_instr(l, &mut regs));
            }
            // ptxas refuses a register the entry does not declare.
            for reg in regs.keys() {
                let digits = reg.trim_start_matches(|c: char| !c.is_ascii_digit());
                let prefix = &reg[..reg.len() - digits.len()];
                let index: usize = digits.parse().unwrap_or(usize::MAX);
                assert!(
                    declared.get(prefix).is_some_and(|&n| index < n),
                    "{name}: register {reg} not declared"
                );
            }
            entries.insert(
                name,
                Entry {
                    params,
                    registers: regs.len(),
                    shared,
                    shared_bytes,
                    max_threads,
                    instrs,
                    labels,
                },
            );
        }
        Module { entries }
    }

    pub fn entry(&self, name: &str) -> &Entry {
        self.entries
            .get(name)
            .unwrap_or_else(|| panic!("no entry {name}"))
    }
}

fn parse_operand(s: &str, regs: &mut HashMap<String, usize>) -> Operand {
    let mut reg = |name: &str| {
        let n = regs.len();
        *regs.entry(name.to_string()).or_insert(n)
    };
    if let Some(inner) = s.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
        let (base, offset) = match inner.split_once('+') {
            Some((b, o)) => (b.trim(), o.trim().parse().unwrap()),
            None => (inner.trim(), 0),
        };
        let base = if base.starts_with('%') {
            Operand::Reg(reg(base))
        } else {
            Operand::Symbol(base.to_string())
        };
        return Operand::Address(Box::new(base), offset);
    }
    if let Some(inner) = s.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
        return Operand::Vector(inner.split(',').map(|r| reg(r.trim())).collect());
    }
    if s.starts_with("%tid")
        || s.starts_with("%ntid")
        || s.starts_with("%ctaid")
        || s.starts_with("%nctaid")
    {
        return Operand::Special(s.to_string());
    }
    if s.starts_with('%') {
        return Operand::Reg(reg(s));
    }
    if s.starts_with('$') {
        return Operand::Label(s.to_string());
    }
    if let Some(h) = s.strip_prefix("0f") {
        return Operand::Imm(u64::from(u32::from_str_radix(h, 16).unwrap()));
    }
    if let Some(h) = s.strip_prefix("0d").or_else(|| s.strip_prefix("0x")) {
        return Operand::Imm(u64::from_str_radix(h, 16).unwrap());
    }
    if let Ok(v) = s.parse::<i64>() {
        return Operand::Imm(v as u64);
    }
    Operand::Symbol(s.to_string())
}

fn parse_instr(line: &str, regs: &mut HashMap<String, usize>) -> Instr {
    let text = line.trim_end_matches(';').trim();
    let (guard, text) = match text.strip_prefix('@') {
        Some(rest) => {
            let (p, rest) = rest.split_once(' ').unwrap();
            let (neg, p) = match p.strip_prefix('!') {
                Some(p) => (true, p),
                None => (false, p),
            };
            let Operand::Reg(r) = parse_operand(p, regs) else {
                panic!("guard {p}")
            };
            (Some((r, neg)), rest.trim())
        }
        None => (None, text),
    };
    let (op, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    Instr {
        guard,
        op: op.split('.').map(str::to_string).collect(),
        args: split_operands(rest)
            .iter()
            .map(|a| parse_operand(a, regs))
            .collect(),
        line: line.to_string(),
    }
}

/// Global memory: buffers placed one after another, 256-byte aligned as `cuMemAlloc`'s.
#[derive(Default)]
pub struct Memory {
    bytes: Vec<u8>,
    /// Every buffer's start (offset in `bytes`) and length, ordered by start.
    buffers: Vec<(usize, usize)>,
}

impl Memory {
    /// A new buffer holding `data`; returns its address.
    pub fn alloc(&mut self, data: &[u8]) -> u64 {
        let start = self.bytes.len().div_ceil(256) * 256 + 256;
        self.bytes.resize(start, 0xAB);
        self.bytes.extend_from_slice(data);
        self.buffers.push((start, data.len()));
        GLOBAL_BASE + start as u64
    }

    pub fn write(&mut self, address: u64, data: &[u8]) {
        self.slice(address, data.len(), "write")
            .copy_from_slice(data);
    }

    pub fn read(&self, address: u64, len: usize) -> &[u8] {
        &self.bytes[self.within_buffer(address, len, "read")]
    }

    fn slice(&mut self, address: u64, len: usize, line: &str) -> &mut [u8] {
        let range = self.within_buffer(address, len, line);
        &mut self.bytes[range]
    }

    /// Where `len` bytes at `address` are in `bytes`; panics unless one buffer holds them all.
    fn within_buffer(&self, address: u64, len: usize, line: &str) -> std::ops::Range<usize> {
        let at = address
            .checked_sub(GLOBAL_BASE)
            .unwrap_or_else(|| panic!("address {address:#x} below memory: {line}"))
            as usize;
        let within = match self.buffers.partition_point(|&(start, _)| start <= at) {
            0 => false,
            i => {
                let (start, bytes) = self.buffers[i - 1];
                at + len <= start + bytes
            }
        };
        assert!(
            within,
            "{len} bytes at {address:#x} outside every buffer: {line}"
        );
        at..at + len
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum State {
    Running,
    /// Waiting at the `bar.sync` or `shfl.sync` at this instruction.
    Waiting(usize),
    Exited,
}

struct Thread {
    regs: Vec<Option<u64>>,
    pc: usize,
    state: State,
}

/// A load or store of `bytes` (a scalar or a whole vector) must be aligned to its size, or
/// the hardware faults ("misaligned address").
fn aligned(address: u64, bytes: usize, line: &str) {
    assert!(
        address.is_multiple_of(bytes as u64),
        "{bytes}-byte access at {address:#x} misaligned: {line}"
    );
}

fn width(ty: &str) -> usize {
    match ty {
        "pred" => 1,
        "u8" | "s8" | "b8" => 1,
        "u16" | "s16" | "b16" | "f16" | "bf16" => 2,
        "u32" | "s32" | "b32" | "f32" => 4,
        "u64" | "s64" | "b64" | "f64" => 8,
        other => panic!("type {other}"),
    }
}

fn mask(ty: &str) -> u64 {
    match width(ty) {
        8 => u64::MAX,
        w => (1u64 << (8 * w)) - 1,
    }
}

fn f32_of(b: u64) -> f32 {
    f32::from_bits(b as u32)
}

fn f64_of(b: u64) -> f64 {
    f64::from_bits(b)
}

fn of_f32(x: f32) -> u64 {
    u64::from(x.to_bits())
}

/// The value of bits `b` of type `ty` as f64 (exact for every type used here but u64/s64 beyond
/// 2^53).
fn to_f64(b: u64, ty: &str) -> f64 {
    match ty {
        "f32" => f64::from(f32_of(b)),
        "f64" => f64_of(b),
        "f16" => f16::from_bits(b as u16).to_f64(),
        "bf16" => bf16::from_bits(b as u16).to_f64(),
        "s32" => f64::from(b as u32 as i32),
        "u32" => f64::from(b as u32),
        "s64" => b as i64 as f64,
        "u64" => b as f64,
        "s16" => f64::from(b as u16 as i16),
        "u16" => f64::from(b as u16),
        "u8" => f64::from(b as u8),
        other => panic!("value of {other}"),
    }
}

fn signed(b: u64, ty: &str) -> i64 {
    match width(ty) {
        2 => i64::from(b as u16 as i16),
        4 => i64::from(b as u32 as i32),
        _ => b as i64,
    }
}

fn float_binary(
    ty: &str,
    a: u64,
    b: u64,
    f32op: fn(f32, f32) -> f32,
    f64op: fn(f64, f64) -> f64,
) -> u64 {
    match ty {
        "f32" => of_f32(f32op(f32_of(a), f32_of(b))),
        "f64" => f64op(f64_of(a), f64_of(b)).to_bits(),
        other => panic!("float op on {other}"),
    }
}

/// `x` rounded to an integer value by PTX rounding modifier `mode`.
fn round_mode(x: f64, mode: &str) -> f64 {
    match mode {
        "rzi" | "rz" => x.trunc(),
        "rni" | "rn" => x.round_ties_even(),
        "rmi" | "rm" => x.floor(),
        "rpi" | "rp" => x.ceil(),
        other => panic!("rounding {other}"),
    }
}

/// The f16 nearest `x`, ties to even, as `cvt.rn.f16.f64` rounds (the `half` crate drops the
/// low 32 bits of an f64 first, so a value just past a tie rounds as the tie). Its neighbours
/// are compared by their exact distances to `x`, infinity counting as 2^16, where rounding
/// overflows.
fn f16_nearest(x: f64) -> f16 {
    let guess = f16::from_f64(x);
    if !x.is_finite() {
        return guess;
    }
    let value = |h: f16| {
        if h.is_infinite() {
            65536f64.copysign(h.to_f64())
        } else {
            h.to_f64()
        }
    };
    let b = guess.to_bits();
    [b.wrapping_sub(1), b, b.wrapping_add(1)]
        .into_iter()
        .map(f16::from_bits)
        .filter(|h| {
            !h.is_nan() && (h.to_f64() == 0.0 || h.is_sign_negative() == guess.is_sign_negative())
        })
        .min_by(|p, q| {
            let (dp, dq) = ((x - value(*p)).abs(), (x - value(*q)).abs());
            dp.total_cmp(&dq)
                .then((p.to_bits() & 1).cmp(&(q.to_bits() & 1)))
        })
        .unwrap_or(guess)
}

/// The f32 next to nonzero `r` toward zero (`f32::MAX` from infinity).
fn toward_zero(r: f32) -> f32 {
    f32::from_bits(r.to_bits() - 1)
}

fn convert(b: u64, to: &str, from: &str, mode: Option<&str>) -> u64 {
    let float = |t: &str| matches!(t, "f16" | "bf16" | "f32" | "f64");
    match (to, from) {
        (t, f) if t == f && float(t) => {
            let x = to_f64(b, f);
            let r = mode.map_or(x, |m| round_mode(x, m));
            match t {
                "f32" => of_f32(r as f32),
                "f64" => r.to_bits(),
                other => panic!("round {other}"),
            }
        }
        ("f32", "f64") => {
            let x = f64_of(b);
            let r = x as f32;
            // Toward zero: one step back where rounding to nearest went past `x`.
            match mode {
                Some("rz") if f64::from(r).abs() > x.abs() => of_f32(toward_zero(r)),
                _ => of_f32(r),
            }
        }
        ("f64", "f32") => f64::from(f32_of(b)).to_bits(),
        ("f16", "f32") => u64::from(f16::from_f32(f32_of(b)).to_bits()),
        ("f16", "f64") => u64::from(f16_nearest(f64_of(b)).to_bits()),
        ("bf16", "f32") => u64::from(bf16::from_f32(f32_of(b)).to_bits()),
        ("f32", "f16") => of_f32(f16::from_bits(b as u16).to_f32()),
        ("f32", "bf16") => of_f32(bf16::from_bits(b as u16).to_f32()),
        (t, f) if float(t) => {
            // From an integer, rounded to nearest even (as `as` does from i64 and u64).
            let negative = f.starts_with('s') && signed(b, f) < 0;
            if let ("f32", Some("rz")) = (t, mode) {
                let v = if negative {
                    i128::from(signed(b, f))
                } else {
                    i128::from(b & mask(f))
                };
                let r = v as f32;
                let past = (r as i128).abs() > v.abs();
                return of_f32(if past { toward_zero(r) } else { r });
            }
            match (t, negative) {
                ("f32", true) => of_f32(signed(b, f) as f32),
                ("f32", false) => of_f32((b & mask(f)) as f32),
                ("f64", true) => (signed(b, f) as f64).to_bits(),
                ("f64", false) => ((b & mask(f)) as f64).to_bits(),
                (other, _) => panic!("convert to {other}"),
            }
        }
        (t, f) if float(f) => {
            // To an integer: round by the mode, saturate, NaN to 0.
            let x = round_mode(to_f64(b, f), mode.unwrap_or("rzi"));
            let v: i128 = if x.is_nan() { 0 } else { x as i128 };
            let (lo, hi): (i128, i128) = match t {
                "s32" => (i128::from(i32::MIN), i128::from(i32::MAX)),
                "u32" => (0, i128::from(u32::MAX)),
                "s64" => (i128::from(i64::MIN), i128::from(i64::MAX)),
                "u64" => (0, i128::from(u64::MAX)),
                "u8" => (0, i128::from(u8::MAX)),
                other => panic!("convert to {other}"),
            };
            (v.clamp(lo, hi) as i64 as u64) & mask(t)
        }
        (t, f) => {
            // Integer to integer: sign- or zero-extend, or truncate.
            let v = if f.starts_with('s') {
                signed(b, f) as u64
            } else {
                b & mask(f)
            };
            v & mask(t)
        }
    }
}

fn compare(cmp: &str, ty: &str, a: u64, b: u64) -> bool {
    let float = matches!(ty, "f32" | "f64");
    if float {
        let (x, y) = (to_f64(a, ty), to_f64(b, ty));
        let unordered = x.is_nan() || y.is_nan();
        return match cmp {
            "eq" => !unordered && x == y,
            "ne" => !unordered && x != y,
            "lt" => !unordered && x < y,
            "le" => !unordered && x <= y,
            "gt" => !unordered && x > y,
            "ge" => !unordered && x >= y,
            "equ" => unordered || x == y,
            "neu" => unordered || x != y,
            "ltu" => unordered || x < y,
            "leu" => unordered || x <= y,
            "gtu" => unordered || x > y,
            "geu" => unordered || x >= y,
            "nan" => unordered,
            "num" => !unordered,
            other => panic!("compare {other}"),
        };
    }
    let (x, y): (i128, i128) = if ty.starts_with('s') {
        (i128::from(signed(a, ty)), i128::from(signed(b, ty)))
    } else {
        (i128::from(a & mask(ty)), i128::from(b & mask(ty)))
    };
    match cmp {
        "eq" => x == y,
        "ne" => x != y,
        "lt" | "lo" => x < y,
        "le" | "ls" => x <= y,
        "gt" | "hi" => x > y,
        "ge" | "hs" => x >= y,
        other => panic!("compare {other}"),
    }
}

/// Who used a byte of shared memory since the last barrier (`epoch`).
#[derive(Clone, Copy, Default)]
struct SharedUse {
    epoch: u32,
    /// The warp that wrote it.
    writer: Option<usize>,
    /// The warps that read it, one bit each.
    readers: u32,
}

/// One block of one launch.
struct Block<'a> {
    entry: &'a Entry,
    threads: Vec<Thread>,
    shared: Vec<u8>,
    /// Per byte of `shared`, its use since the last barrier.
    shared_uses: Vec<SharedUse>,
    /// Barriers the block has passed.
    epoch: u32,
    block_dim: u32,
    block: u32,
    grid: u32,
    params: &'a [u64],
}

impl Block<'_> {
    fn value(&self, t: usize, o: &Operand, line: &str) -> u64 {
        match o {
            Operand::Reg(r) => self.threads[t].regs[*r]
                .unwrap_or_else(|| panic!("thread {t}: register read before written: {line}")),
            Operand::Imm(v) => *v,
            Operand::Special(s) => u64::from(match s.as_str() {
                "%tid.x" => t as u32,
                "%ntid.x" => self.block_dim,
                "%ctaid.x" => self.block,
                "%nctaid.x" => self.grid,
                other => panic!("special register {other}"),
            }),
            Operand::Symbol(s) => match self.entry.shared.get(s) {
                Some(&(offset, _)) => offset,
                None => panic!("symbol {s}: {line}"),
            },
            other => panic!("operand {other:?}: {line}"),
        }
    }

    fn address(&self, t: usize, o: &Operand, line: &str) -> (Option<usize>, u64) {
        let Operand::Address(base, offset) = o else {
            panic!("not an address: {line}")
        };
        match &**base {
            Operand::Symbol(s) => match self.entry.params.iter().position(|p| p == s) {
                Some(i) => (Some(i), 0),
                None => (None, self.value(t, base, line).wrapping_add(*offset as u64)),
            },
            b => (None, self.value(t, b, line).wrapping_add(*offset as u64)),
        }
    }

    fn set(&mut self, t: usize, o: &Operand, v: u64) {
        match o {
            Operand::Reg(r) => self.threads[t].regs[*r] = Some(v),
            other => panic!("destination {other:?}"),
        }
    }

    /// The `len` bytes of shared memory at `address` that thread `t` reads or writes: a use
    /// of bytes another warp wrote, or a write of bytes another warp read or wrote, with no
    /// barrier between is a race (the hardware may order the warps either way) and panics.
    fn shared_slice(
        &mut self,
        t: usize,
        address: u64,
        len: usize,
        write: bool,
        line: &str,
    ) -> &mut [u8] {
        let at = address as usize;
        assert!(
            at >= 16 && at + len <= self.shared.len(),
            "shared address {address} out of bounds: {line}"
        );
        let warp = t / 32;
        for used in &mut self.shared_uses[at..at + len] {
            if used.epoch != self.epoch {
                *used = SharedUse {
                    epoch: self.epoch,
                    ..SharedUse::default()
                };
            }
            let other_writer = used.writer.is_some_and(|w| w != warp);
            let other_reader = used.readers & !(1 << warp) != 0;
            let race = other_writer || (write && other_reader);
            assert!(
                !race,
                "thread {t}: shared memory race at {address} (no barrier since another warp used it): {line}"
            );
            if write {
                used.writer = Some(warp);
            } else {
                used.readers |= 1 << warp;
            }
        }
        &mut self.shared[at..at + len]
    }

    /// Completes the shuffle every live lane of `lanes` (a warp) waits at, if they do.
    fn shuffle(&mut self, lanes: std::ops::Range<usize>) -> bool {
        let live: Vec<usize> = lanes
            .filter(|&t| self.threads[t].state != State::Exited)
            .collect();
        let Some(&first) = live.first() else {
            return false;
        };
        let State::Waiting(pc) = self.threads[first].state else {
            return false;
        };
        let ins = &self.entry.instrs[pc];
        let all = live
            .iter()
            .all(|&t| self.threads[t].state == State::Waiting(pc));
        if ins.op[0] != "shfl" || !all {
            return false;
        }
        assert_eq!(live.len(), 32, "shuffle with exited lanes: {}", ins.line);
        assert!(ins.op.iter().any(|m| m == "bfly"), "{}", ins.line);
        let sources: Vec<u64> = live
            .iter()
            .map(|&t| self.value(t, &ins.args[1], &ins.line))
            .collect();
        for &t in &live {
            let offset = self.value(t, &ins.args[2], &ins.line) as usize;
            let v = sources[(t % 32) ^ offset];
            self.set(t, &ins.args[0], v);
            self.threads[t].pc = pc + 1;
            self.threads[t].state = State::Running;
        }
        true
    }

    /// Runs thread `t` until it waits or exits.
    fn run(&mut self, t: usize, memory: &mut Memory) {
        while self.threads[t].state == State::Running {
            let pc = self.threads[t].pc;
            let ins = &self.entry.instrs[pc];
            if let Some((p, neg)) = ins.guard {
                let v = self.value(t, &Operand::Reg(p), &ins.line) != 0;
                if v == neg {
                    self.threads[t].pc += 1;
                    continue;
                }
            }
            match ins.op[0].as_str() {
                "bar" | "shfl" => {
                    self.threads[t].state = State::Waiting(pc);
                    return;
                }
                _ => self.step(t, pc, memory),
            }
        }
    }

    fn step(&mut self, t: usize, pc: usize, memory: &mut Memory) {
        let ins = &self.entry.instrs[pc];
        let mut parts = [""; 8];
        for (part, o) in parts.iter_mut().zip(&ins.op) {
            *part = o;
        }
        let op = &parts[..ins.op.len()];
        let ty = *op.last().unwrap();
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
                    aligned(a, w * regs.len(), line);
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
                aligned(a, w * values, line);
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

/// Runs `entry` over a grid of `grid` blocks of `block` threads with parameter values
/// `params` (buffer addresses).
pub fn launch(entry: &Entry, grid: u32, block: u32, params: &[u64], memory: &mut Memory) {
    assert_eq!(params.len(), entry.params.len(), "parameter count");
    // What cuLaunchKernel refuses: an empty grid or block, more threads than a block may
    // have or than the entry's `.maxntid` allows, more static shared memory than 48 KiB.
    assert!(
        grid >= 1 && block >= 1,
        "launch of {grid} blocks of {block}"
    );
    let max_threads = entry.max_threads.unwrap_or(1024).min(1024);
    assert!(
        block <= max_threads,
        "block of {block} threads, more than {max_threads}"
    );
    assert!(
        entry.shared_bytes <= 48 * 1024,
        "{} bytes of shared memory",
        entry.shared_bytes
    );
    for b in 0..grid {
        let mut blk = Block {
            entry,
            threads: (0..block)
                .map(|_| Thread {
                    regs: vec![None; entry.registers],
                    pc: 0,
                    state: State::Running,
                })
                .collect(),
            shared: vec![0xCD; entry.shared_bytes as usize],
            shared_uses: vec![SharedUse::default(); entry.shared_bytes as usize],
            epoch: 0,
            block_dim: block,
            block: b,
            grid,
            params,
        };
        let warps = (block as usize).div_ceil(32);
        let mut order: Vec<usize> = (0..warps).collect();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(b);
        loop {
            // Warps run in a varying order, each as far as it can alone: through its own
            // shuffles, up to a barrier. So a warp runs ahead of the others as on the hardware,
            // and a missing barrier shows.
            for k in (1..warps).rev() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                order.swap(k, (seed % (k as u64 + 1)) as usize);
            }
            let before: Vec<(usize, State)> = blk.threads.iter().map(|t| (t.pc, t.state)).collect();
            for &w in &order {
                let lanes = w * 32..((w + 1) * 32).min(block as usize);
                loop {
                    for t in lanes.clone() {
                        blk.run(t, memory);
                    }
                    if !blk.shuffle(lanes.clone()) {
                        break;
                    }
                }
            }
            if blk.threads.iter().all(|t| t.state == State::Exited) {
                break;
            }
            // Barriers: every live thread of the block at the same one.
            let live: Vec<usize> = (0..block as usize)
                .filter(|&t| blk.threads[t].state != State::Exited)
                .collect();
            if let Some(State::Waiting(pc)) = live.first().map(|&t| blk.threads[t].state) {
                let all = live
                    .iter()
                    .all(|&t| blk.threads[t].state == State::Waiting(pc));
                if entry.instrs[pc].op[0] == "bar" && all {
                    blk.epoch += 1;
                    for &t in &live {
                        blk.threads[t].pc = pc + 1;
                        blk.threads[t].state = State::Running;
                    }
                }
            }
            let after: Vec<(usize, State)> = blk.threads.iter().map(|t| (t.pc, t.state)).collect();
            assert!(
                before != after,
                "block {b}: threads wait at different synchronizations"
            );
        }
    }
}

/// The little-endian bytes of `a`'s elements, bools as one byte each.
pub fn bytes_of(a: &Array) -> Vec<u8> {
    match a.elements() {
        Elements::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::U8(v) => v.clone(),
        Elements::Bool(v) => v.iter().map(|&x| u8::from(x)).collect(),
        Elements::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// The array of type `ty` whose elements are `bytes`.
pub fn array_of(bytes: &[u8], ty: &TensorType) -> Array {
    let chunks = |n: usize| bytes.chunks_exact(n);
    let elements = match ty.dtype {
        DType::F32 => Elements::F32(
            chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        DType::F64 => Elements::F64(
            chunks(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        DType::I32 => Elements::I32(
            chunks(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        DType::I64 => Elements::I64(
            chunks(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        DType::U8 => Elements::U8(bytes.to_vec()),
        DType::Bool => Elements::Bool(bytes.iter().map(|&b| b != 0).collect()),
        DType::F16 => Elements::F16(
            chunks(2)
                .map(|c| f16::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
        DType::BF16 => Elements::BF16(
            chunks(2)
                .map(|c| bf16::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ),
    };
    Array::new(ty.shape.clone(), elements).unwrap()
}

/// A GPU made of the emulator, on which whole programs run as on a device
/// ([`GpuMachine`]): modules parsed, memory allocated one buffer after another and never
/// reused, launches run at once with at most two blocks (so grid-stride loops go round), and
/// matrix products computed with cuBLAS's conventions, summed exactly in f64 whatever the
/// precision asked (TF32 is a device test's).
#[derive(Clone, Default)]
pub struct Emulator {
    memory: Rc<RefCell<Memory>>,
    /// Launches run so far, by entry name, and `gemm` for each matrix product.
    launched: Rc<RefCell<Vec<String>>>,
}

#[derive(Clone, Debug)]
pub struct EmulatedArray {
    address: u64,
    ty: TensorType,
}

impl Emulator {
    /// The entries launched so far, in order.
    pub fn launched(&self) -> Vec<String> {
        self.launched.borrow().clone()
    }
}

fn element(bytes: &[u8], dtype: DType) -> f64 {
    match dtype {
        DType::F32 => f64::from(f32::from_le_bytes(bytes.try_into().unwrap())),
        DType::F64 => f64::from_le_bytes(bytes.try_into().unwrap()),
        DType::F16 => f16::from_le_bytes(bytes.try_into().unwrap()).to_f64(),
        DType::BF16 => bf16::from_le_bytes(bytes.try_into().unwrap()).to_f64(),
        other => panic!("a {other} matrix product"),
    }
}

fn element_bytes(x: f64, dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => (x as f32).to_le_bytes().to_vec(),
        DType::F64 => x.to_le_bytes().to_vec(),
        DType::F16 => f16::from_f64(x).to_le_bytes().to_vec(),
        DType::BF16 => bf16::from_f64(x).to_le_bytes().to_vec(),
        other => panic!("a {other} matrix product"),
    }
}

impl GpuMachine for Emulator {
    type Array = EmulatedArray;
    type Function = (Rc<Module>, String);

    fn target(&self) -> PtxTarget {
        PtxTarget::Sm80
    }

    fn load(&self, ptx: &str, names: &[&str]) -> Result<Vec<Self::Function>, GpuError> {
        let module = Rc::new(Module::parse(ptx));
        for name in names {
            module.entry(name);
        }
        Ok(names
            .iter()
            .map(|n| (module.clone(), n.to_string()))
            .collect())
    }

    fn multiprocessors(&self) -> u32 {
        1
    }

    fn grid_for(&self, len: usize, block: u32) -> u32 {
        len.div_ceil(block as usize).clamp(1, 2) as u32
    }

    fn alloc(&self, ty: &TensorType) -> Result<EmulatedArray, GpuError> {
        let bytes = ty.numel() * ty.dtype.size_bytes();
        Ok(EmulatedArray {
            address: self.memory.borrow_mut().alloc(&vec![0xEE; bytes]),
            ty: ty.clone(),
        })
    }

    fn upload(&self, array: &Array) -> Result<EmulatedArray, GpuError> {
        Ok(EmulatedArray {
            address: self.memory.borrow_mut().alloc(&bytes_of(array)),
            ty: array.ty().clone(),
        })
    }

    fn download(&self, array: &EmulatedArray) -> Result<Array, GpuError> {
        let bytes = array.ty.numel() * array.ty.dtype.size_bytes();
        Ok(array_of(
            self.memory.borrow().read(array.address, bytes),
            &array.ty,
        ))
    }

    fn address(array: &EmulatedArray) -> u64 {
        array.address
    }

    fn array_type(array: &EmulatedArray) -> TensorType {
        array.ty.clone()
    }

    fn reshaped(array: &EmulatedArray, shape: Shape) -> EmulatedArray {
        assert_eq!(array.ty.numel(), shape.numel(), "reshape of {}", array.ty);
        EmulatedArray {
            address: array.address,
            ty: TensorType::new(array.ty.dtype, shape),
        }
    }

    unsafe fn launch(
        &self,
        (module, name): &Self::Function,
        grid: u32,
        block: u32,
        args: &[u64],
    ) -> Result<(), GpuError> {
        launch(
            module.entry(name),
            grid,
            block,
            args,
            &mut self.memory.borrow_mut(),
        );
        self.launched.borrow_mut().push(name.clone());
        Ok(())
    }

    unsafe fn gemm(
        &self,
        dtype: DType,
        (transpose_a, transpose_b): (bool, bool),
        (m, n, k): (usize, usize, usize),
        (a, lda, stride_a): GemmOperand,
        (b, ldb, stride_b): GemmOperand,
        (c, ldc, stride_c): GemmOperand,
        batch: usize,
        _: MatmulPrecision,
    ) -> Result<(), GpuError> {
        let size = dtype.size_bytes();
        let mut memory = self.memory.borrow_mut();
        let at = |memory: &Memory, base: u64, index: usize| {
            element(memory.read(base + (index * size) as u64, size), dtype)
        };
        // Column-major: element (row, col) of a matrix with leading dimension ld is at
        // row + col·ld; op(A) is m × k, op(B) k × n.
        for i in 0..batch {
            for col in 0..n {
                for row in 0..m {
                    let sum: f64 = (0..k)
                        .map(|l| {
                            let x = match transpose_a {
                                false => row + l * lda,
                                true => l + row * lda,
                            };
                            let y = match transpose_b {
                                false => l + col * ldb,
                                true => col + l * ldb,
                            };
                            at(&memory, a, i * stride_a + x) * at(&memory, b, i * stride_b + y)
                        })
                        .sum();
                    let to = c + ((i * stride_c + row + col * ldc) * size) as u64;
                    memory.write(to, &element_bytes(sum, dtype));
                }
            }
        }
        self.launched.borrow_mut().push("gemm".into());
        Ok(())
    }
}
