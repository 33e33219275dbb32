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
//!
//! This file is the driver: the two tests, running each input, its size checks, the
//! comparison and the tallies. The seed programs are in `seeds.rs`; mutating a seed and
//! repairing the result into an input is in `mutate.rs`.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;
mod mutate;
mod seeds;

use common::rng::any_inputs as inputs;
use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
use ferrax::compiler::backend::CpuExecutable;
use ferrax::compiler::simplify::simplify;
use ferrax::ir::{parse_func, AttentionPart, BinaryOp, Elements, Op, UnaryOp};
use ferrax::runtime::interpret;
use ferrax::{Array, DType, Func, TensorType};
use ferrax_ptx_emu::Emulator;
use mutate::{input, Rng};
use seeds::seeds;
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
            Op::Attention(a) if a.part.arity() == 7 => forward_of_same_attention(func, ins),
            _ => true,
        }
    })
}

/// Whether a gradient part's `out` and `lse` are what the forward parts compute from its own
/// queries, keys and values under its own mask and precision: the op's contract
/// (`ferrax_ir::Attention`), which a mutation (a flipped `causal`) can break, and where it is
/// broken a kernel (softmax from `lse`) and the plain ops (softmax from the scores) differ.
fn forward_of_same_attention(func: &Func, grad: &ferrax::ir::Instr) -> bool {
    let Op::Attention(a) = &grad.op else {
        return true;
    };
    let made_by = |k: usize, part: AttentionPart| {
        let Some(&v) = grad.args.get(k) else {
            return false;
        };
        let Some(producer) = v.index().checked_sub(func.params.len()) else {
            return false;
        };
        func.body.get(producer).is_some_and(|p| match &p.op {
            Op::Attention(b) => {
                b.part == part
                    && (b.causal, b.precision) == (a.causal, a.precision)
                    && p.args.get(..3) == grad.args.get(..3)
            }
            _ => false,
        })
    };
    made_by(3, AttentionPart::Output) && made_by(4, AttentionPart::LogSumExp)
}

/// Whether `func`'s results on `args` (`want`) stay within an eighth of the comparison's
/// tolerance when the f32 and f64 inputs move by a millionth (up and down in turn). Where they
/// do not (a mutation made a sum cancel, then divided by it), the backends' roundings, which
/// differ by as much as such a nudge, can move them past the tolerance, so their values cannot
/// be compared.
fn well_conditioned(func: &Func, args: &[Array], want: &[Array]) -> bool {
    const NUDGE: f64 = 1.0 / (1u64 << 20) as f64;
    let nudge = |i: usize| {
        if i.is_multiple_of(2) {
            1.0 + NUDGE
        } else {
            1.0 - NUDGE
        }
    };
    let nudged: Vec<Array> = args
        .iter()
        .map(|a| {
            let data = match a.elements() {
                Elements::F32(v) => Elements::F32(
                    v.iter()
                        .enumerate()
                        .map(|(i, &x)| (f64::from(x) * nudge(i)) as f32)
                        .collect(),
                ),
                Elements::F64(v) => {
                    Elements::F64(v.iter().enumerate().map(|(i, &x)| x * nudge(i)).collect())
                }
                other => other.clone(),
            };
            Array::new(a.shape().clone(), data).unwrap_or_else(|_| a.clone())
        })
        .collect();
    match interpret(func, &nudged) {
        Ok(near) => compare_within(&near, want, true, 1.0 / 8.0).is_ok(),
        Err(_) => true,
    }
}

/// Tolerance for each float type (transcendentals and sums differ between the backends).
fn rtol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 | DType::F64 | DType::C64 | DType::C128 => 1e-3,
        DType::F16 => 1e-2,
        DType::BF16 => 5e-2,
        DType::I32
        | DType::I64
        | DType::U32
        | DType::U8
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::Bool => 0.0,
    }
}

/// `Err` if `got` is clearly not `want`: another count, shape or dtype, or, where `values`,
/// an element off by more than the tolerance of the output's scale or of 1 (the inputs'
/// scale; a result of cancellation may be far smaller than the terms it came from), finite
/// ones only.
fn compare(got: &[Array], want: &[Array], values: bool) -> Result<(), String> {
    compare_within(got, want, values, 1.0)
}

/// [`compare`] with `fraction` of the tolerance.
fn compare_within(
    got: &[Array],
    want: &[Array],
    values: bool,
    fraction: f64,
) -> Result<(), String> {
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
        let tol = rtol(w.dtype()) * fraction;
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
    let values = values_comparable(func)
        && want
            .as_ref()
            .is_none_or(|w| well_conditioned(func, &args, w));
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
