//! A mutation fuzzer for what runs programs (issue #26): the reference interpreter, the CPU
//! backend (simplify, compile, run) and the emulated GPU backend. No valid program, however odd
//! its shapes and attributes, may panic or fault in them; errors are fine. Where the
//! interpreter and a backend both succeed they must agree.
//!
//! Seeds are valid programs (the corpus, its gradients, the benchmark workloads, random fusion
//! programs and a few indexing programs written here), also with their large sizes shrunk.
//! Each input is a seed's text after a few mutations (dimensions, dtypes, attribute numbers,
//! op names, constants, instructions duplicated or deleted, operands swapped or replaced),
//! then *repaired*: each instruction whose declared type no longer follows from its operands
//! takes the inferred one, so that a changed dimension flows through the program instead of
//! being a parse error. Inputs that still do not parse or verify are skipped: the parser has
//! its own fuzzer (`ir/tests/fuzz.rs`). Programs with a value of more than 2^22 elements are
//! not run; the GPU runs only small ones (the emulator interprets every thread).
//!
//! A second test calls the entry points (`interpret`, `CpuExecutable::run`/`run_donated`,
//! `GpuProgram::run`) with wrong argument counts, dtypes and shapes: each must be an `Err`.
//!
//! `FERRAX_FUZZ_INPUTS=N` runs N inputs instead of the default; `FERRAX_FUZZ_SEED=S` starts
//! from another seed; `FERRAX_FUZZ_TRACE=1` prints each program before running it (a fault in
//! compiled code cannot be caught). Crashing inputs are kept in
//! `tests/fuzz_runtime_regressions.rs`.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
use ferrax::compiler::backend::CpuExecutable;
use ferrax::compiler::simplify::simplify;
use ferrax::ir::{parse_func, verify, BinaryOp, Elements, Op, UnaryOp};
use ferrax::runtime::interpret;
use ferrax::{Array, DType, Func, TensorType};
use ferrax_ptx_emu::Emulator;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// Inputs a default run (CI, a debug build) tries.
const DEFAULT_INPUTS: u64 = 2_000;
/// The fuzzing thread's stack, as small as the parser fuzzers': recursion whose depth grows
/// with the program (simplification, compiling, the executors) shows as an overflow here.
const STACK: usize = 256 * 1024;
/// A program with a value of more elements than this is not run.
const MAX_VALUE_ELEMENTS: usize = 1 << 22;
/// Nor one whose values hold more elements than this in all (bounds a case's time).
const MAX_TOTAL_ELEMENTS: usize = 1 << 22;
/// The emulated GPU runs programs of at most this many elements in all and instructions.
const GPU_MAX_ELEMENTS: usize = 1 << 13;
const GPU_MAX_INSTRS: usize = 40;
/// A case that takes longer than this is reported as a hang.
const SLOW: Duration = Duration::from_secs(60);

/// xorshift64*: small, deterministic, good enough to pick mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Programs of ops the traced corpus has few of: indexing with its dimension numbers, iota,
/// concatenation, padding, batched products, the integer types.
const INLINE_SEEDS: &[&str] = &[
    "func @gather(%0: f32[4,3], %1: i32[5]) -> (f32[5,3]) {
  %2 = gather %0, %1, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1,3] : f32[5,3]
  return %2
}",
    "func @scatter(%0: f32[4,3], %1: i32[5], %2: f32[5,3]) -> (f32[4,3], f32[4,3]) {
  %3 = scatter_add %0, %1, %2, update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1 : f32[4,3]
  %4 = scatter %3, %1, %2, update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1 : f32[4,3]
  return %3, %4
}",
    "func @gather2(%0: i64[5,6], %1: i32[3,2]) -> (i64[3,2,2]) {
  %2 = gather %0, %1, offset_dims=[1,2], start_index_map=[0,1], index_vector_dim=1, slice_sizes=[2,2] : i64[3,2,2]
  return %2
}",
    "func @batched(%0: f32[2,3,4], %1: i32[2,3]) -> (f32[2,3]) {
  %2 = gather %0, %1, collapsed_slice_dims=[2], operand_batching_dims=[0,1], start_indices_batching_dims=[0,1], start_index_map=[2], index_vector_dim=2, slice_sizes=[1,1,1] : f32[2,3]
  return %2
}",
    "func @scatter_max(%0: i32[6], %1: i32[4,1], %2: i32[4]) -> (i32[6]) {
  %3 = scatter_max %0, %1, %2, inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1 : i32[6]
  return %3
}",
    "func @movement(%0: f32[3,4], %1: f32[]) -> (f32[9,5], f32[2,2], f32[4,3], f32[6,4]) {
  %2 = pad %0, %1, low=[1,-1], high=[2,0], interior=[1,1] : f32[9,6]
  %3 = slice %2, start=[0,1], limit=[9,6], strides=[1,1] : f32[9,5]
  %4 = slice %0, start=[0,1], limit=[3,4], strides=[2,2] : f32[2,2]
  %5 = transpose %0, perm=[1,0] : f32[4,3]
  %6 = concatenate %0, %0, axis=0 : f32[6,4]
  return %3, %4, %5, %6
}",
    "func @iota(%0: i32[2,3]) -> (i32[2,3], u8[2,3], f32[3], i64[6]) {
  %1 = iota dim=1 : i32[2,3]
  %2 = add %0, %1 : i32[2,3]
  %3 = convert %2 : u8[2,3]
  %4 = iota dim=0 : f32[3]
  %5 = reshape %2 : i32[6]
  %6 = convert %5 : i64[6]
  %7 = mul %6, %6 : i64[6]
  return %2, %3, %4, %7
}",
    "func @dots(%0: f32[2,3,4], %1: f32[2,4,5], %2: i32[3,4]) -> (f32[2,3,5], i32[4,4], f32[2,2]) {
  %3 = dot_general %0, %1, batch=[0]x[0], contract=[2]x[1] : f32[2,3,5]
  %4 = dot_general %2, %2, contract=[0]x[0] : i32[4,4]
  %5 = dot_general %0, %0, contract=[1,2]x[1,2] : f32[2,2]
  return %3, %4, %5
}",
    "func @reduce(%0: f64[3,4,5], %1: bool[3,4]) -> (f64[4], f64[3,5], bool[3], f64[3,4,5]) {
  %2 = reduce_sum %0, axes=[0,2] : f64[4]
  %3 = reduce_prod %0, axes=[1] : f64[3,5]
  %4 = reduce_max %1, axes=[1] : bool[3]
  %5 = reduce_min %0, axes=[] : f64[3,4,5]
  return %2, %3, %4, %5
}",
    "func @dynamic(%0: f32[5,4], %1: i32[], %2: i32[], %3: f32[2,2]) -> (f32[2,3], f32[5,4]) {
  %4 = dynamic_slice %0, %1, %2 : f32[2,3]
  %5 = dynamic_update_slice %0, %3, %2, %1 : f32[5,4]
  return %4, %5
}",
    "func @broadcasts(%0: f32[3], %1: f32[], %2: bool[3,3]) -> (f32[3,3], f32[3,3]) {
  %3 = broadcast_in_dim %0, dims=[1] : f32[3,3]
  %4 = broadcast_in_dim %1, dims=[] : f32[3,3]
  %5 = select %2, %3, %4 : f32[3,3]
  %6 = clamp %1, %5, %1 : f32[3,3]
  %7 = broadcast_in_dim %0, dims=[0] : f32[3,3]
  %8 = rem %6, %7 : f32[3,3]
  return %5, %8
}",
    "func @ints(%0: i64[2,3,4], %1: u8[4], %2: bool[2,3,4]) -> (i64[4,2,3], u8[4], bool[2,3,4], i64[2,3,4], u8[6], i64[3]) {
  %3 = transpose %0, perm=[2,0,1] : i64[4,2,3]
  %4 = mul %1, %1 : u8[4]
  %5 = not %2 : bool[2,3,4]
  %6 = convert %2 : i64[2,3,4]
  %7 = add %0, %6 : i64[2,3,4]
  %8 = constant 7 : u8[]
  %9 = pad %4, %8, low=[1], high=[-1], interior=[0] : u8[4]
  %10 = concatenate %9, %4, %9, axis=0 : u8[12]
  %11 = slice %10, start=[1], limit=[12], strides=[2] : u8[6]
  %12 = reduce_sum %7, axes=[0,2] : i64[3]
  %13 = xor %5, %2 : bool[2,3,4]
  return %3, %4, %13, %7, %11, %12
}",
    "func @rank5(%0: f32[2,1,3,1,2], %1: f16[3,2]) -> (f32[2,2,1,3,1], f32[2,3,2], f16[2,3], f16[3,2,2]) {
  %2 = transpose %0, perm=[4,0,3,2,1] : f32[2,2,1,3,1]
  %3 = reshape %0 : f32[2,3,2]
  %4 = transpose %1, perm=[1,0] : f16[2,3]
  %5 = broadcast_in_dim %1, dims=[0,1] : f16[3,2,2]
  return %2, %3, %4, %5
}",
    "func @scatter_batched(%0: f32[2,5,3], %1: i64[2,4,1], %2: f32[2,4,3]) -> (f32[2,5,3]) {
  %3 = scatter_mul %0, %1, %2, update_window_dims=[2], inserted_window_dims=[1], input_batching_dims=[0], scatter_indices_batching_dims=[0], scatter_dims_to_operand_dims=[1], index_vector_dim=2 : f32[2,5,3]
  return %3
}",
    "func @gather_u8(%0: bf16[6,2], %1: u8[3,1]) -> (bf16[3,2], bf16[6,2]) {
  %2 = gather %0, %1, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1,2] : bf16[3,2]
  %3 = scatter_min %0, %1, %2, update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1 : bf16[6,2]
  return %2, %3
}",
    "func @dyn64(%0: f64[6,5], %1: i64[], %2: u8[], %3: f64[2,5]) -> (f64[3,2], f64[6,5]) {
  %4 = convert %2 : i64[]
  %5 = dynamic_slice %0, %1, %4 : f64[3,2]
  %6 = dynamic_update_slice %0, %3, %4, %1 : f64[6,5]
  return %5, %6
}",
    "func @intdot(%0: i64[3,4], %1: u8[4,2], %2: i32[2,3,4]) -> (i64[3,3], u8[2,2], i32[2,3,3]) {
  %3 = dot_general %0, %0, contract=[1]x[1] : i64[3,3]
  %4 = dot_general %1, %1, contract=[0]x[0] : u8[2,2]
  %5 = dot_general %2, %2, batch=[0]x[0], contract=[2]x[2] : i32[2,3,3]
  return %3, %4, %5
}",
    "func @rows(%0: f32[4,300], %1: f32[300]) -> (f32[4,300], f32[4], f32[300]) {
  %2 = broadcast_in_dim %1, dims=[1] : f32[4,300]
  %3 = add %0, %2 : f32[4,300]
  %4 = reduce_max %3, axes=[1] : f32[4]
  %5 = broadcast_in_dim %4, dims=[0] : f32[4,300]
  %6 = sub %3, %5 : f32[4,300]
  %7 = exp %6 : f32[4,300]
  %8 = reduce_sum %7, axes=[1] : f32[4]
  %9 = reduce_sum %7, axes=[0] : f32[300]
  return %7, %8, %9
}",
];

/// The seed programs' texts: every program the other suites run, then each of them with its
/// large sizes shrunk (so the benchmark workloads run at all), then the inline seeds.
fn seeds() -> Vec<String> {
    use common::fusion::{random_fusion_program, Mix};
    let mut funcs: Vec<Func> = Vec::new();
    funcs.extend(common::corpus().into_iter().map(|(_, f)| f));
    funcs.extend(common::gradient_programs().into_iter().map(|(_, f)| f));
    funcs.extend(common::benchmark_programs().into_iter().map(|(_, f)| f));
    let mut texts: Vec<String> = funcs.iter().map(|f| f.to_string()).collect();
    let dtypes = ["f32", "f64", "f16", "bf16"];
    for seed in 0..12u64 {
        let dtype = dtypes[seed as usize % dtypes.len()];
        let shape = [(8, 3), (5, 64), (3, 0), (1, 1)][seed as usize / 4 % 4];
        let mix = Mix {
            f64_transcendentals: true,
            row_passes: seed % 2 == 1,
        };
        texts.push(random_fusion_program(seed, dtype, shape, mix));
    }
    for seed in 0..4u64 {
        texts.push(common::fusion::tail_case(seed * 13, true).1);
    }
    let shrunk: Vec<String> = texts
        .iter()
        .map(|t| shrink(t))
        .filter(|t| parse_func(t).is_ok())
        .collect();
    texts.extend(shrunk);
    texts.extend(INLINE_SEEDS.iter().map(|s| s.to_string()));
    texts.retain(|t| parse_func(t).is_ok_and(|f| verify(&f).is_ok()));
    texts.sort();
    texts.dedup();
    texts
}

/// `text` with each integer of 64 or more replaced by a small one (the same for the same
/// number, so that shapes stay consistent where only sizes, not their products, recur).
fn shrink(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let sites = number_sites(text);
    let mut at = 0;
    for s in &sites {
        out.push_str(&text[at..s.start]);
        let word = &text[s.start..s.end];
        match word.parse::<u64>() {
            Ok(n) if n >= 64 && s.kind != Site::Literal => {
                out.push_str(&(2 + n % 7).to_string());
            }
            _ => out.push_str(word),
        }
        at = s.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Where an integer stands in the text.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Site {
    /// A dimension size in a type (`f32[2,3]`).
    Dim,
    /// In an attribute's value (`axes=[1]`, `dim=0`, `low=[-1]`).
    Attr,
    /// Elsewhere: constant literals, names.
    Literal,
}

struct NumSite {
    start: usize,
    end: usize,
    kind: Site,
}

const DTYPES: &[&str] = &["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"];

/// Every integer in `text` (a leading `-` included), with what it stands for.
fn number_sites(text: &str) -> Vec<NumSite> {
    let b = text.as_bytes();
    let mut sites = Vec::new();
    let mut i = 0;
    let word_byte = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'%';
    while i < b.len() {
        let starts_number =
            b[i].is_ascii_digit() || (b[i] == b'-' && i + 1 < b.len() && b[i + 1].is_ascii_digit());
        if !starts_number || (i > 0 && word_byte(b[i - 1])) {
            i += 1;
            continue;
        }
        let mut end = i + 1;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        if end < b.len() && (word_byte(b[end]) || b[end] == b'e') {
            // A float, or part of a name.
            while end < b.len() && word_byte(b[end]) {
                end += 1;
            }
            i = end;
            continue;
        }
        // What opened the innermost bracket, or the `key=` right before.
        let line_start = text[..i].rfind('\n').map_or(0, |p| p + 1);
        let before = &text[line_start..i];
        let kind = match before.rfind('[') {
            Some(open) if !before[open..].contains(']') => {
                let head = &before[..open];
                if DTYPES.iter().any(|d| {
                    head.ends_with(d)
                        && !head[..head.len() - d.len()]
                            .ends_with(|c: char| c.is_ascii_alphanumeric())
                }) {
                    Site::Dim
                } else if head.ends_with('=') || head.ends_with("]x") {
                    Site::Attr
                } else {
                    Site::Literal
                }
            }
            _ if before.ends_with('=') => Site::Attr,
            _ => Site::Literal,
        };
        sites.push(NumSite {
            start: i,
            end,
            kind,
        });
        i = end;
    }
    sites
}

const DIMS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "5",
    "8",
    "17",
    "65",
    "65536",
    "2147483648",
    "4294967296",
    "1099511627776",
    "35184372088832",
    "140737488355328",
    "9223372036854775807",
    "18446744073709551615",
];

const ATTR_NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "4",
    "7",
    "8",
    "-1",
    "-2",
    "-3",
    "64",
    "2147483647",
    "4294967296",
    "1099511627776",
    "9223372036854775807",
    "-9223372036854775808",
];

/// Ops that may stand for each other: same operands, often the same type.
const OP_FAMILIES: &[&[&str]] = &[
    &[
        "neg",
        "abs",
        "sign",
        "floor",
        "ceil",
        "round",
        "round_even",
        "exp",
        "expm1",
        "log",
        "log1p",
        "sqrt",
        "rsqrt",
        "tanh",
        "logistic",
        "sin",
        "cos",
        "not",
        "stop_gradient",
    ],
    &[
        "add", "sub", "mul", "div", "rem", "pow", "max", "min", "and", "or", "xor",
    ],
    &["eq", "ne", "lt", "le", "gt", "ge"],
    &["reduce_sum", "reduce_prod", "reduce_max", "reduce_min"],
    &[
        "scatter",
        "scatter_add",
        "scatter_mul",
        "scatter_min",
        "scatter_max",
    ],
    &["select", "clamp"],
    &["reshape", "convert", "broadcast_in_dim", "transpose"],
];

const LITERALS: &[&str] = &[
    "0.0",
    "-0.0",
    "NaN",
    "inf",
    "-inf",
    "1e38",
    "-1e-45",
    "65504.0",
    "0",
    "-1",
    "255",
    "true",
    "2147483647",
];

/// The defining instruction lines of the top-level function (`  %n = ...`).
fn instruction_lines(lines: &[String]) -> Vec<usize> {
    (0..lines.len())
        .filter(|&i| lines[i].starts_with("  %") && !lines[i].starts_with("   "))
        .collect()
}

/// The name an instruction line defines (`%n`).
fn defined(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    rest.split_once(" = ").map(|(name, _)| name)
}

/// The operand names of an instruction line, with their byte ranges.
fn operand_ranges(line: &str) -> Vec<(usize, usize)> {
    let Some(eq) = line.find(" = ") else {
        return Vec::new();
    };
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = eq + 3;
    while i < b.len() {
        if b[i] == b'%' {
            let mut end = i + 1;
            while end < b.len() && (b[end].is_ascii_alphanumeric() || b"_.+-".contains(&b[end])) {
                end += 1;
            }
            out.push((i, end));
            i = end;
        } else if b[i] == b':' {
            break;
        } else {
            i += 1;
        }
    }
    out
}

/// Names defined before line `at` (parameters and earlier instructions).
fn names_before(lines: &[String], at: usize) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    if let Some(header) = lines.first() {
        let params = header.split("->").next().unwrap_or("");
        for part in params.split('%').skip(1) {
            if let Some(name) = part.split(':').next() {
                names.push(format!("%{name}"));
            }
        }
    }
    for i in instruction_lines(lines) {
        if i >= at {
            break;
        }
        if let Some(n) = defined(&lines[i]) {
            names.push(n.to_string());
        }
    }
    names
}

/// One random mutation of the program text `text`.
fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let instrs = instruction_lines(&lines);
    let sites = number_sites(text);
    let replace =
        |start: usize, end: usize, with: &str| format!("{}{with}{}", &text[..start], &text[end..]);
    match rng.below(14) {
        // One dtype for another everywhere, or one size for another in every type (the
        // program stays consistent more often than after a single change).
        12 => {
            let (from, to) = (*rng.pick(DTYPES), rng.pick(DTYPES));
            let mut out = String::with_capacity(text.len());
            let mut rest = text;
            let pattern = format!("{from}[");
            while let Some(i) = rest.find(&pattern) {
                let word_before = i > 0 && rest.as_bytes()[i - 1].is_ascii_alphanumeric();
                out.push_str(&rest[..i]);
                out.push_str(if word_before { from } else { to });
                rest = &rest[i + from.len()..];
            }
            out.push_str(rest);
            return out;
        }
        13 => {
            let dims: Vec<&NumSite> = sites.iter().filter(|s| s.kind == Site::Dim).collect();
            if dims.is_empty() {
                return text.to_string();
            }
            let s = dims[rng.below(dims.len())];
            let from = &text[s.start..s.end];
            let to = *rng.pick(DIMS);
            let mut out = String::with_capacity(text.len());
            let mut at = 0;
            for d in dims.iter().filter(|d| &text[d.start..d.end] == from) {
                out.push_str(&text[at..d.start]);
                out.push_str(to);
                at = d.end;
            }
            out.push_str(&text[at..]);
            return out;
        }
        // A dimension, often a parameter's (the change then flows through the program).
        0 | 1 => {
            let header_end = text.find('\n').unwrap_or(text.len());
            let dims: Vec<&NumSite> = sites
                .iter()
                .filter(|s| s.kind == Site::Dim && (rng.below(2) == 0 || s.start < header_end))
                .collect();
            if dims.is_empty() {
                return text.to_string();
            }
            let s = dims[rng.below(dims.len())];
            let with: &str = DIMS[rng.below(DIMS.len())];
            return replace(s.start, s.end, with);
        }
        // A dtype.
        2 => {
            let mut at: Vec<(usize, &str)> = Vec::new();
            for d in DTYPES {
                let pattern = format!("{d}[");
                for (i, _) in text.match_indices(&pattern) {
                    if i == 0 || !text.as_bytes()[i - 1].is_ascii_alphanumeric() {
                        at.push((i, d));
                    }
                }
            }
            if at.is_empty() {
                return text.to_string();
            }
            let (i, d) = *rng.pick(&at);
            let with: &str = DTYPES[rng.below(DTYPES.len())];
            return replace(i, i + d.len(), with);
        }
        // An attribute number: replaced, or one off.
        3 | 4 => {
            let attrs: Vec<&NumSite> = sites.iter().filter(|s| s.kind == Site::Attr).collect();
            if attrs.is_empty() {
                return text.to_string();
            }
            let s = attrs[rng.below(attrs.len())];
            let with = match (rng.below(3), text[s.start..s.end].parse::<i64>()) {
                (0, Ok(n)) => (n + 1).to_string(),
                (1, Ok(n)) => (n - 1).to_string(),
                _ => rng.pick(ATTR_NUMBERS).to_string(),
            };
            return replace(s.start, s.end, &with);
        }
        // An attribute list: an entry added or dropped, or two swapped.
        5 => {
            let lists: Vec<(usize, usize)> = text
                .match_indices("=[")
                .filter_map(|(i, _)| text[i + 1..].find(']').map(|e| (i + 2, i + 1 + e)))
                .collect();
            if lists.is_empty() {
                return text.to_string();
            }
            let (start, end) = *rng.pick(&lists);
            let mut items: Vec<String> = text[start..end]
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            match rng.below(3) {
                0 => {
                    let k = rng.below(items.len() + 1);
                    items.insert(k, rng.pick(&["0", "1", "2", "-1"]).to_string());
                }
                1 if !items.is_empty() => {
                    let k = rng.below(items.len());
                    items.remove(k);
                }
                _ if items.len() >= 2 => {
                    let (a, b) = (rng.below(items.len()), rng.below(items.len()));
                    items.swap(a, b);
                }
                _ => {}
            }
            return replace(start, end, &items.join(","));
        }
        // An op renamed within its family.
        6 => {
            if instrs.is_empty() {
                return text.to_string();
            }
            let i = *rng.pick(&instrs);
            let line = &lines[i];
            let Some(eq) = line.find(" = ") else {
                return text.to_string();
            };
            let op_start = eq + 3;
            let op_end = line[op_start..]
                .find(' ')
                .map_or(line.len(), |e| op_start + e);
            let op = &line[op_start..op_end];
            if let Some(family) = OP_FAMILIES.iter().find(|f| f.contains(&op)) {
                let new = rng.pick(family);
                lines[i] = format!("{}{new}{}", &line[..op_start], &line[op_end..]);
            }
        }
        // A constant's literal.
        7 => {
            let consts: Vec<usize> = instrs
                .iter()
                .copied()
                .filter(|&i| lines[i].contains(" = constant "))
                .collect();
            if consts.is_empty() {
                return text.to_string();
            }
            let i = *rng.pick(&consts);
            let line = &lines[i];
            let (Some(a), Some(b)) = (line.find(" = constant "), line.rfind(" : ")) else {
                return text.to_string();
            };
            let lit = rng.pick(LITERALS);
            lines[i] = format!("{} = constant {lit}{}", &line[..a], &line[b..]);
        }
        // An instruction duplicated under a new name, which a later use then reads.
        8 => {
            if instrs.is_empty() {
                return text.to_string();
            }
            let k = rng.below(instrs.len());
            let i = instrs[k];
            let Some(name) = defined(&lines[i]).map(str::to_string) else {
                return text.to_string();
            };
            let copy_name = format!("%dup{}", rng.below(1000));
            let copy = lines[i].replacen(&name, &copy_name, 1);
            lines.insert(i + 1, copy);
            let later: Vec<usize> = ((i + 2)..lines.len())
                .filter(|&j| {
                    operand_ranges(&lines[j])
                        .iter()
                        .any(|&(s, e)| lines[j][s..e] == name)
                })
                .collect();
            if !later.is_empty() {
                let j = *rng.pick(&later);
                let ranges = operand_ranges(&lines[j]);
                if let Some(&(s, e)) = ranges.iter().find(|&&(s, e)| lines[j][s..e] == name) {
                    lines[j].replace_range(s..e, &copy_name);
                }
            } else if let Some(ret) = lines
                .iter()
                .rposition(|l| l.trim_start().starts_with("return"))
            {
                lines[ret] = lines[ret].replacen(&name, &copy_name, 1);
            }
        }
        // An instruction deleted; its uses read an earlier value instead.
        9 => {
            if instrs.is_empty() {
                return text.to_string();
            }
            let i = *rng.pick(&instrs);
            let Some(name) = defined(&lines[i]).map(str::to_string) else {
                return text.to_string();
            };
            let earlier = names_before(&lines, i);
            lines.remove(i);
            if earlier.is_empty() {
                return lines.join("\n");
            }
            let sub = rng.pick(&earlier).clone();
            for line in lines.iter_mut().skip(i) {
                let ranges = operand_ranges(line);
                for &(s, e) in ranges.iter().rev() {
                    if line[s..e] == name {
                        line.replace_range(s..e, &sub);
                    }
                }
                if let Some((head, rest)) = line.split_once("return ") {
                    let values: Vec<&str> = rest
                        .split(',')
                        .map(str::trim)
                        .map(|w| if w == name { sub.as_str() } else { w })
                        .collect();
                    *line = format!("{head}return {}", values.join(", "));
                }
            }
        }
        // Two operands swapped.
        10 => {
            let with_two: Vec<usize> = instrs
                .iter()
                .copied()
                .filter(|&i| operand_ranges(&lines[i]).len() >= 2)
                .collect();
            if with_two.is_empty() {
                return text.to_string();
            }
            let i = *rng.pick(&with_two);
            let ranges = operand_ranges(&lines[i]);
            let a = rng.below(ranges.len());
            let b = (a + 1 + rng.below(ranges.len() - 1)) % ranges.len();
            let (a, b) = (ranges[a.min(b)], ranges[a.max(b)]);
            let line = &lines[i];
            lines[i] = format!(
                "{}{}{}{}{}",
                &line[..a.0],
                &line[b.0..b.1],
                &line[a.1..b.0],
                &line[a.0..a.1],
                &line[b.1..]
            );
        }
        // An operand replaced by another earlier value.
        _ => {
            if instrs.is_empty() {
                return text.to_string();
            }
            let i = *rng.pick(&instrs);
            let ranges = operand_ranges(&lines[i]);
            let earlier = names_before(&lines, i);
            if ranges.is_empty() || earlier.is_empty() {
                return text.to_string();
            }
            let (s, e) = *rng.pick(&ranges);
            let sub = rng.pick(&earlier).clone();
            lines[i].replace_range(s..e, &sub);
        }
    }
    lines.join("\n") + "\n"
}

/// Parses `text`, first giving each instruction whose declared type its operands no longer
/// give the inferred type, and the signature the returned types; `None` if it still does not
/// parse.
fn repair(text: &str) -> Option<(Func, String)> {
    let mut text = text.to_string();
    for _ in 0..400 {
        let e = match parse_func(&text) {
            Ok(f) => return Some((f, text)),
            Err(e) => e,
        };
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let at = e.line.checked_sub(1).filter(|&l| l < lines.len())?;
        if let Some((_, inferred)) = e.message.split_once(" but its operands give ") {
            let line = &lines[at];
            let colon = line.rfind(" : ")?;
            lines[at] = format!("{} : {inferred}", &line[..colon]);
        } else if let Some((returned, _)) = e.message.split_once(" but the signature declares") {
            let returned = returned.strip_prefix("returns ")?;
            let header = (0..=at).rev().find(|&l| lines[l].contains("func @"))?;
            let line = &lines[header];
            let open = line.find(") -> (")? + ") -> ".len();
            let close = line.rfind(") {")? + 1;
            if close < open {
                return None;
            }
            lines[header] = format!("{}{returned}{}", &line[..open], &line[close..]);
        } else {
            return None;
        }
        text = lines.join("\n") + "\n";
    }
    None
}

/// One fuzzing input: a seed after 1 to 6 mutations, each repaired; a mutation after which
/// the program does not parse is undone and another tried. `None` if none took.
fn input(seeds: &[String], s: u64) -> Option<(Func, String)> {
    let mut rng = Rng::new(s);
    let mut text = rng.pick(seeds).clone();
    let mut func = None;
    let wanted = 1 + rng.below(6);
    let mut done = 0;
    for _ in 0..4 * wanted {
        if done == wanted {
            break;
        }
        if let Some((f, repaired)) = repair(&mutate(&mut rng, &text)) {
            if verify(&f).is_ok() {
                (func, text) = (Some(f), repaired);
                done += 1;
            }
        }
    }
    Some((func?, text))
}

/// The element count of `ty`, `None` past `usize`.
fn elements(ty: &TensorType) -> Option<usize> {
    ty.dims().iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// A value of at least this many bytes cannot be allocated anywhere (it is past the 47-bit
/// address space), so a program may make one: the interpreter and the backends must refuse it.
const ABSURD_BYTES: usize = 1 << 47;

/// How large a program's values are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Size {
    /// The elements of all values, each at most `MAX_VALUE_ELEMENTS`.
    Small(usize),
    /// Parameters small, and each other value small or absurd (at least one is absurd);
    /// the small ones' elements.
    Absurd(usize),
    /// Too large to run: an input too large to make, or a value large enough that
    /// allocating it could succeed and take the machine's memory.
    Large,
}

fn size(func: &Func) -> Size {
    let mut total = 0usize;
    let mut absurd = false;
    for (k, ty) in func
        .params
        .iter()
        .chain(func.body.iter().map(|i| &i.ty))
        .enumerate()
    {
        let n = elements(ty);
        match n {
            Some(n) if n <= MAX_VALUE_ELEMENTS => total = total.saturating_add(n),
            _ if k < func.params.len() => return Size::Large,
            _ => {
                let bytes = n.and_then(|n| n.checked_mul(ty.dtype.size_bytes()));
                if bytes.is_some_and(|b| b < ABSURD_BYTES) {
                    return Size::Large;
                }
                absurd = true;
            }
        }
    }
    if absurd {
        Size::Absurd(total)
    } else {
        Size::Small(total)
    }
}

/// The elements of all of `func`'s values if each has at most `MAX_VALUE_ELEMENTS`.
fn total_elements(func: &Func) -> Option<usize> {
    match size(func) {
        Size::Small(n) => Some(n),
        Size::Absurd(_) | Size::Large => None,
    }
}

/// Deterministic inputs of any dtype: floats in [-2, 2), integers in -1..=4 (so that gathers
/// and scatters see negative and out-of-range indices), alternating bools.
pub fn inputs(func: &Func, seed: u64) -> Vec<Array> {
    let mut g = Rng::new(seed ^ 0x5DEE_CE66);
    func.params
        .iter()
        .map(|t| {
            let n = t.numel();
            let mut float = || (g.next_u64() >> 40) as f64 / (1u64 << 22) as f64 - 2.0;
            let data = match t.dtype {
                DType::F32 => Elements::F32((0..n).map(|_| float() as f32).collect()),
                DType::F64 => Elements::F64((0..n).map(|_| float()).collect()),
                DType::F16 => Elements::F16((0..n).map(|_| half::f16::from_f64(float())).collect()),
                DType::BF16 => {
                    Elements::BF16((0..n).map(|_| half::bf16::from_f64(float())).collect())
                }
                DType::I32 => Elements::I32((0..n).map(|_| (float() * 1.5 + 1.5) as i32).collect()),
                DType::I64 => Elements::I64((0..n).map(|_| (float() * 1.5 + 1.5) as i64).collect()),
                DType::U8 => Elements::U8((0..n).map(|_| (float() + 2.0) as u8).collect()),
                DType::Bool => Elements::Bool((0..n).map(|i| i % 2 == 0).collect()),
            };
            Array::new(t.shape.clone(), data).unwrap()
        })
        .collect()
}

/// Whether a backend's values may be held to the interpreter's: not where an approximate
/// value feeds something discontinuous (a float compare, rounding, a conversion to an
/// integer, a float remainder) or is amplified (by a large constant), nor integer division,
/// remainder or power (implementation defined at zero).
fn values_comparable(func: &Func) -> bool {
    func.body.iter().all(|ins| {
        let arg_float = ins
            .args
            .first()
            .and_then(|&a| func.value_type(a))
            .is_some_and(|t| t.dtype.is_float());
        match &ins.op {
            Op::Compare(_) => !arg_float,
            Op::Convert { .. } => !arg_float || ins.ty.dtype.is_float(),
            Op::Unary(
                UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
                | UnaryOp::RoundEven
                | UnaryOp::Sign,
            ) => false,
            Op::Binary(BinaryOp::Rem) => false,
            // A large constant amplifies rounding (a product contracted into an fma, then a
            // sine) past any tolerance.
            Op::Constant(lit) => {
                !ins.ty.dtype.is_float() || lit.data.to_f64_vec().iter().all(|x| x.abs() <= 1e3)
            }
            Op::Binary(BinaryOp::Div | BinaryOp::Pow) => ins.ty.dtype.is_float(),
            _ => true,
        }
    })
}

/// Tolerance for each float type (transcendentals and sums differ between the backends).
fn rtol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 | DType::F64 => 1e-3,
        DType::F16 => 1e-2,
        DType::BF16 => 5e-2,
        DType::I32 | DType::I64 | DType::U8 | DType::Bool => 0.0,
    }
}

/// `Err` if `got` is clearly not `want`: another count, shape or dtype, or, where `values`,
/// an element off by more than the tolerance of the output's scale or of 1 (the inputs'
/// scale; a result of cancellation may be far smaller than the terms it came from), finite
/// ones only.
fn compare(got: &[Array], want: &[Array], values: bool) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} results, want {}", got.len(), want.len()));
    }
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        if g.ty() != w.ty() {
            return Err(format!("result {k} is {}, want {}", g.ty(), w.ty()));
        }
        if !values {
            continue;
        }
        let (gv, wv) = (g.to_f64_vec(), w.to_f64_vec());
        let scale = wv
            .iter()
            .filter(|x| x.is_finite())
            .fold(0f64, |m, x| m.max(x.abs()));
        let tol = rtol(w.dtype());
        for (i, (&a, &b)) in gv.iter().zip(&wv).enumerate() {
            let close = (a - b).abs() <= tol * (b.abs() + scale + 1.0);
            if b.is_finite() && !close {
                return Err(format!("result {k} element {i} is {a}, want {b}"));
            }
        }
    }
    Ok(())
}

/// What happened to one program.
#[derive(Default, Clone, Copy)]
struct Tally {
    ran: usize,
    too_large: usize,
    /// Ran with a value too large for any machine.
    absurd: usize,
    interpreted: usize,
    cpu_ok: usize,
    cpu_compared: usize,
    gpu_ok: usize,
    gpu_compared: usize,
    /// The interpreter succeeded and a backend refused (an `Err`, not a failure).
    backend_refused: usize,
}

thread_local! {
    /// The last refusal's message (a backend's `Err` for what the interpreter ran).
    static REFUSAL: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

fn refused(t: &mut Tally, why: &str) {
    t.backend_refused = 1;
    REFUSAL.with(|r| *r.borrow_mut() = Some(why.to_string()));
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Tally) {
        self.ran += o.ran;
        self.too_large += o.too_large;
        self.absurd += o.absurd;
        self.interpreted += o.interpreted;
        self.cpu_ok += o.cpu_ok;
        self.cpu_compared += o.cpu_compared;
        self.gpu_ok += o.gpu_ok;
        self.gpu_compared += o.gpu_compared;
        self.backend_refused += o.backend_refused;
    }
}

/// Runs `func` on the interpreter, the CPU and (if small) the emulated GPU; `Err` says what
/// went wrong (a panic propagates).
fn exercise(func: &Func, seed: u64) -> Result<Tally, String> {
    let mut t = Tally::default();
    REFUSAL.with(|r| r.borrow_mut().take());
    let (total, absurd) = match size(func) {
        Size::Small(n) if n <= MAX_TOTAL_ELEMENTS => (n, false),
        Size::Absurd(n) if n <= MAX_TOTAL_ELEMENTS => (n, true),
        Size::Small(_) | Size::Absurd(_) | Size::Large => {
            t.too_large = 1;
            return Ok(t);
        }
    };
    t.absurd = usize::from(absurd);
    t.ran = 1;
    let args = inputs(func, seed);
    let want = interpret(func, &args).ok();
    t.interpreted = usize::from(want.is_some());
    let values = values_comparable(func);
    let simple = match simplify(func) {
        Ok((simple, _)) => simple,
        Err(e) => {
            if want.is_some() {
                refused(&mut t, &format!("simplify: {e}"));
            }
            return Ok(t);
        }
    };
    let cpu = CpuExecutable::compile(&simple).map_err(|e| e.to_string());
    let cpu = cpu.and_then(|exe| exe.run(&args).map_err(|e| e.to_string()));
    match (&cpu, &want) {
        (Ok(got), Some(want)) => {
            t.cpu_ok = 1;
            t.cpu_compared = 1;
            compare(got, want, values).map_err(|e| format!("CPU: {e}"))?;
        }
        (Ok(_), None) => t.cpu_ok = 1,
        (Err(e), Some(_)) => refused(&mut t, &format!("CPU: {e}")),
        (Err(_), None) => {}
    }
    if !absurd && total <= GPU_MAX_ELEMENTS && func.body.len() <= GPU_MAX_INSTRS {
        let emulator = Emulator::default();
        let gpu = GpuProgram::compile(&simple, &emulator, GpuOptions::HIGHEST)
            .map_err(|e| e.to_string())
            .and_then(|p| p.run(&args).map_err(|e| e.to_string()));
        match (&gpu, &want) {
            (Ok(got), Some(want)) => {
                t.gpu_ok = 1;
                t.gpu_compared = 1;
                compare(got, want, values).map_err(|e| format!("GPU: {e}"))?;
            }
            (Ok(_), None) => t.gpu_ok = 1,
            (Err(e), Some(_)) => refused(&mut t, &format!("GPU: {e}")),
            (Err(_), None) => {}
        }
    }
    Ok(t)
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn env_number(key: &str) -> Option<u64> {
    std::env::var(key).ok().and_then(|v| v.parse().ok())
}

/// Runs inputs `base..base + count`; returns the failures (seed, program and what happened).
fn fuzz(seeds: &[String], base: u64, count: u64) -> Vec<(u64, String)> {
    let trace = std::env::var_os("FERRAX_FUZZ_TRACE").is_some();
    let mut failures = Vec::new();
    let mut tally = Tally::default();
    let mut parsed = 0usize;
    let mut refusals: Vec<(u64, String)> = Vec::new();
    let (mut slowest, mut slowest_seed) = (Duration::ZERO, base);
    let started = Instant::now();
    for s in base..base + count {
        let Some((func, text)) = input(seeds, s) else {
            continue;
        };
        parsed += 1;
        if trace {
            eprintln!("fuzz: seed {s}\n{text}");
        }
        let start = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| exercise(&func, s)));
        let took = start.elapsed();
        if took > slowest {
            (slowest, slowest_seed) = (took, s);
        }
        let failure = match outcome {
            Ok(Ok(t)) => {
                tally += t;
                if let Some(why) = REFUSAL.with(|r| r.borrow_mut().take()) {
                    let first = why.lines().next().unwrap_or("").to_string();
                    if refusals.len() < 20 && !refusals.iter().any(|(_, w)| *w == first) {
                        refusals.push((s, first));
                    }
                }
                (took > SLOW).then(|| format!("took {took:?}"))
            }
            Ok(Err(e)) => Some(e),
            Err(p) => Some(format!("panicked: {}", panic_message(&*p))),
        };
        if let Some(why) = failure {
            eprintln!("fuzz: seed {s}: {why}\n{text}");
            failures.push((s, format!("{why}\n{text}")));
        }
    }
    eprintln!(
        "fuzz: {count} inputs from seed {base} in {:?}: {parsed} parsed and verified, {} ran \
         ({} too large, {} with a value too large for any machine), interpreter ok {}, CPU ok {} (compared {}), emulated GPU ok {} \
         (compared {}), a backend refused what the interpreter ran {}; {} failed; slowest \
         {slowest:?} (seed {slowest_seed})",
        started.elapsed(),
        tally.ran,
        tally.too_large,
        tally.absurd,
        tally.interpreted,
        tally.cpu_ok,
        tally.cpu_compared,
        tally.gpu_ok,
        tally.gpu_compared,
        tally.backend_refused,
        failures.len()
    );
    for (s, why) in &refusals {
        eprintln!("fuzz: seed {s}: refused: {why}");
    }
    failures
}

fn on_fuzz_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(f)
        .expect("spawning the fuzzing thread")
        .join()
        .expect("the fuzzing thread")
}

#[test]
fn mutated_programs_never_crash_the_runtime() {
    let count = env_number("FERRAX_FUZZ_INPUTS").unwrap_or(DEFAULT_INPUTS);
    let base = env_number("FERRAX_FUZZ_SEED").unwrap_or(1);
    let seeds = seeds();
    eprintln!("fuzz: {} seed programs", seeds.len());
    let failures = on_fuzz_thread(move || fuzz(&seeds, base, count));
    assert!(
        failures.is_empty(),
        "{} of {count} inputs failed; rerun one with FERRAX_FUZZ_SEED=<seed> FERRAX_FUZZ_INPUTS=1: {:?}",
        failures.len(),
        failures.iter().map(|(s, _)| s).collect::<Vec<_>>()
    );
}

/// Wrong arguments for `func`: too few, too many, another dtype, another shape or rank.
fn wrong_arguments(func: &Func, rng: &mut Rng) -> Vec<(String, Vec<Array>)> {
    let good = inputs(func, rng.next_u64());
    let mut cases = Vec::new();
    let mut with = |what: String, args: Vec<Array>| cases.push((what, args));
    if !good.is_empty() {
        let mut fewer = good.clone();
        fewer.remove(rng.below(good.len()));
        with("one argument fewer".into(), fewer);
        with("no arguments".into(), Vec::new());
    }
    let mut more = good.clone();
    more.push(Array::scalar(1.0f32));
    with("one argument more".into(), more);
    for (k, arg) in good.iter().enumerate() {
        let dtype = *rng.pick(DTYPES_ALL);
        if dtype != arg.dtype() {
            let mut args = good.clone();
            args[k] = Array::zeros(dtype, arg.dims().to_vec());
            with(format!("argument {k} as {dtype}"), args);
        }
        let mut dims = arg.dims().to_vec();
        match rng.below(4) {
            0 if !dims.is_empty() => {
                let d = rng.below(dims.len());
                dims[d] += 1;
            }
            1 if dims.iter().any(|&d| d > 0) => {
                let d = dims.iter().position(|&d| d > 0).unwrap_or(0);
                dims[d] -= 1;
            }
            2 => dims.push(1),
            _ => {
                dims.pop();
                if dims.is_empty() && arg.dims().is_empty() {
                    dims.push(2);
                }
            }
        }
        if dims != arg.dims() {
            let mut args = good.clone();
            args[k] = Array::zeros(arg.dtype(), dims.clone());
            with(format!("argument {k} of shape {dims:?}"), args);
        }
    }
    cases
}

const DTYPES_ALL: &[DType] = &[
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::Bool,
];

/// Each entry point, called with wrong arguments for a seed program (or a mutated one): an
/// `Err`, never a panic and never a result.
fn check_entry_points(func: &Func, rng: &mut Rng, gpu: bool) -> Result<usize, String> {
    let cpu = simplify(func)
        .ok()
        .and_then(|(s, _)| CpuExecutable::compile(&s).ok());
    let emulator = Emulator::default();
    let gpu = if gpu {
        simplify(func)
            .ok()
            .and_then(|(s, _)| GpuProgram::compile(&s, &emulator, GpuOptions::HIGHEST).ok())
    } else {
        None
    };
    let mut calls = 0;
    for (what, args) in wrong_arguments(func, rng) {
        let mut results: Vec<(&str, bool)> = vec![("interpret", interpret(func, &args).is_err())];
        if let Some(exe) = &cpu {
            results.push(("CpuExecutable::run", exe.run(&args).is_err()));
            results.push((
                "CpuExecutable::run_donated",
                exe.run_donated(args.clone()).is_err(),
            ));
        }
        if let Some(p) = &gpu {
            results.push(("GpuProgram::run", p.run(&args).is_err()));
        }
        calls += results.len();
        if let Some((entry, _)) = results.iter().find(|(_, err)| !err) {
            return Err(format!("{entry} accepted {what}"));
        }
    }
    Ok(calls)
}

#[test]
fn entry_points_reject_wrong_arguments() {
    let count = env_number("FERRAX_FUZZ_INPUTS").map_or(200, |n| n / 10);
    let base = env_number("FERRAX_FUZZ_SEED").unwrap_or(1);
    let seeds = seeds();
    let failures = on_fuzz_thread(move || {
        let mut failures = Vec::new();
        let mut calls = 0;
        for s in base..base + count {
            let mut rng = Rng::new(s ^ 0xE17E);
            // Half the seeds as they are, half mutated.
            let (func, text) = if s % 2 == 0 {
                let text = rng.pick(&seeds).clone();
                match parse_func(&text) {
                    Ok(f) => (f, text),
                    Err(_) => continue,
                }
            } else {
                match input(&seeds, s) {
                    Some(ft) => ft,
                    None => continue,
                }
            };
            if total_elements(&func).is_none_or(|n| n > 1 << 16) {
                continue;
            }
            let gpu = func.body.len() <= GPU_MAX_INSTRS
                && total_elements(&func) <= Some(GPU_MAX_ELEMENTS);
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                check_entry_points(&func, &mut rng, gpu)
            }));
            let failure = match outcome {
                Ok(Ok(n)) => {
                    calls += n;
                    None
                }
                Ok(Err(e)) => Some(e),
                Err(p) => Some(format!("panicked: {}", panic_message(&*p))),
            };
            if let Some(why) = failure {
                eprintln!("entry points: seed {s}: {why}\n{text}");
                failures.push(s);
            }
        }
        eprintln!(
            "entry points: {count} programs, {calls} calls with wrong arguments, {} failed",
            failures.len()
        );
        failures
    });
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
}
