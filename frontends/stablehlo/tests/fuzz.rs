//! A mutation fuzzer for the StableHLO loader: no input may crash the process (issue #26).
//! Seeds are the conformance files (when `../shared/conformance/stablehlo` is present) and a
//! few programs written here; each input is a seed after a few random mutations (byte flips,
//! truncation, repeated tokens, huge numbers, deep nesting, splices). Every input is imported
//! (`load` and `test_cases`) and what imports is verified; a panic fails the test with the seed
//! that reproduces it. The fuzzer runs on a thread with a small, fixed stack, so that
//! recursion whose depth grows with the input shows as a stack overflow here.
//!
//! `FERRAX_FUZZ_INPUTS=N` runs N inputs instead of the default; `FERRAX_FUZZ_SEED=S` starts
//! from another seed; `FERRAX_FUZZ_TRACE=1` names each seed before running it (to find the
//! input behind an abort). A failing input is written to the temporary directory, as is the
//! input of a run of one seed.

use ferrax_ir::{verify, DType, Func, Literal, Scalar};
use ferrax_stablehlo::{load, load_specialized, parameters, test_cases, Specialize};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Inputs a default run (CI) tries.
const DEFAULT_INPUTS: usize = 3_000;
/// The fuzzing thread's stack: the loader's recursion is bounded well below it.
const STACK: usize = 256 * 1024;
/// Conformance files larger than this are not seeds (they slow a debug run down).
const MAX_SEED_BYTES: u64 = 6 * 1024;
/// Inputs are cut to this size after each mutation (repeated growth would slow the run).
const MAX_INPUT_BYTES: usize = 256 * 1024;
/// An input that takes longer than this is reported as a hang.
const SLOW: Duration = Duration::from_secs(5);

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const INLINE_SEEDS: &[&str] = &[
    r#"func.func @main(%x: tensor<2x3xf32>, %q: tensor<3x2x!quant.uniform<i8<-127:127>:f32, 0.5:-3>>) -> (tensor<3x2x!quant.uniform<i8:f32:1, {0.5:1, 0.25}>>, tensor<3x2xf32>) {
  %0 = stablehlo.uniform_quantize %x : (tensor<2x3xf32>) -> tensor<2x3x!quant.uniform<i8<-127:127>:f32, 0.5:-3>>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<2x3x!quant.uniform<i8<-127:127>:f32, 0.5:-3>>) -> tensor<3x2x!quant.uniform<i8<-127:127>:f32, 0.5:-3>>
  %2 = stablehlo.add %1, %q : (tensor<3x2x!quant.uniform<i8<-127:127>:f32, 0.5:-3>>, tensor<3x2x!quant.uniform<i8<-127:127>:f32, 0.5:-3>>) -> tensor<3x2x!quant.uniform<i8:f32:1, {0.5:1, 0.25}>>
  %3 = stablehlo.uniform_dequantize %2 : (tensor<3x2x!quant.uniform<i8:f32:1, {0.5:1, 0.25}>>) -> tensor<3x2xf32>
  return %2, %3 : tensor<3x2x!quant.uniform<i8:f32:1, {0.5:1, 0.25}>>, tensor<3x2xf32>
}"#,
    r#"module @m {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<3x2xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %1 = "stablehlo.add"(%arg0, %0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %2 = "stablehlo.transpose"(%1) {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %3 = stablehlo.slice %2 [0:3, 1:2] : (tensor<3x2xf32>) -> tensor<3x1xf32>
    %4 = stablehlo.pad %2, %cst, low = [0, 1], high = [1, 0], interior = [0, 0] : (tensor<3x2xf32>, tensor<f32>) -> tensor<4x3xf32>
    return %2 : tensor<3x2xf32>
  }
}"#,
    r#"func.func @main(%x: tensor<4x3xf32>) -> (tensor<4xf32>, tensor<3xf32>) {
  %init = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %init) applies stablehlo.add across dimensions = [1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = "stablehlo.reduce"(%x, %init) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) {dimensions = array<i64: 0>} : (tensor<4x3xf32>, tensor<f32>) -> tensor<3xf32>
  %2:2 = call @pair(%0) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %2#1, %1 : tensor<4xf32>, tensor<3xf32>
}
func.func private @pair(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = stablehlo.constant dense<"0x0000803F000000400000404000008040"> : tensor<4xf32>
  %s = stablehlo.add %a, %c : tensor<4xf32>
  return %a, %s : tensor<4xf32>, tensor<4xf32>
}"#,
    r#"func.func public @main() -> tensor<2x2xi32> {
  %0 = stablehlo.iota dim = 0 : tensor<4x2xi32>
  %1 = stablehlo.constant dense<[[1], [2]]> : tensor<2x1xi32>
  %2 = "stablehlo.gather"(%0, %1) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 2>}> : (tensor<4x2xi32>, tensor<2x1xi32>) -> tensor<2x2xi32>
  %3 = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
  %4 = "stablehlo.dynamic_gather"(%0, %1, %3) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>}> : (tensor<4x2xi32>, tensor<2x1xi32>, tensor<2xi64>) -> tensor<2x2xi32>
  %5 = "stablehlo.scatter"(%0, %1, %2) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = stablehlo.add %a, %b : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) : (tensor<4x2xi32>, tensor<2x1xi32>, tensor<2x2xi32>) -> tensor<4x2xi32>
  %6 = stablehlo.dot_general %0, %0, contracting_dims = [0] x [0] : (tensor<4x2xi32>, tensor<4x2xi32>) -> tensor<2x2xi32>
  %7 = stablehlo.concatenate %2, %4, dim = 0 : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<4x2xi32>
  return %2 : tensor<2x2xi32>
}"#,
    r#"func.func public @main(%x: tensor<3xf32>, %k: tensor<i32>, %p: tensor<i1>) -> (tensor<3xf32>, tensor<3xf32>) {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %x) : tensor<i32>, tensor<3xf32>
   cond {
    %c_1 = stablehlo.constant dense<4> : tensor<i32>
    %1 = stablehlo.compare  LT, %iterArg, %c_1,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.multiply %iterArg_0, %x : tensor<3xf32>
    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %2 = stablehlo.add %iterArg, %c_1 : tensor<i32>
    stablehlo.return %2, %1 : tensor<i32>, tensor<3xf32>
  }
  %r:2 = "stablehlo.case"(%k) ({
    %n = stablehlo.negate %x : tensor<3xf32>
    stablehlo.return %n, %0#1 : tensor<3xf32>, tensor<3xf32>
  }, {
    stablehlo.return %x, %x : tensor<3xf32>, tensor<3xf32>
  }) : (tensor<i32>) -> (tensor<3xf32>, tensor<3xf32>)
  %f = "stablehlo.if"(%p) ({
    stablehlo.return %r#0 : tensor<3xf32>
  }, {
    %e = stablehlo.exponential %r#1 : tensor<3xf32>
    stablehlo.return %e : tensor<3xf32>
  }) : (tensor<i1>) -> tensor<3xf32>
  return %f, %r#1 : tensor<3xf32>, tensor<3xf32>
}"#,
    r#"module @jit {
  func.func public @main() -> (tensor<3xf32> {jax.result_info = ""}) {
    %0 = call @inputs() : () -> tensor<3xf32>
    %1 = call @expected() : () -> tensor<3xf32>
    %2 = stablehlo.sqrt %0 : tensor<3xf32>
    stablehlo.custom_call @check.expect_close(%2, %1) {has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()
    "check.expect_almost_eq_const"(%2) <{value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>}> : (tensor<3xf32>) -> ()
    return %2 : tensor<3xf32>
  }
  func.func private @inputs() -> (tensor<3xf32> {jax.result_info = ""}) {
    %cst = stablehlo.constant dense<[1.0, 4.0, 9.0]> : tensor<3xf32>
    return %cst : tensor<3xf32>
  }
  func.func private @expected() -> (tensor<3xf32> {jax.result_info = ""}) {
    %cst = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
    return %cst : tensor<3xf32>
  }
}"#,
];

/// Strings mutations splice in: forms that once crashed the loader, and boundary numbers.
const NASTY: &[&str] = &[
    "%0:999999999999999999 = ",
    "%0:3000000000 = ",
    "dense<\"0x0\u{e9}\">",
    "dense<\"0xABC\">",
    "tensor<4294967296x4294967296xf32>",
    "tensor<1x1x1x1x1x1x1x1x1x1xf32>",
    "tensor<?x4xf32>",
    "tensor<2x!quant.uniform<i8:f32, 0.1>>",
    "\u{e9}",
    "\u{FFFD}",
    "@\"",
    "\"",
    "{",
    "}",
    "(",
    ")",
    "<",
    ">",
    "[",
    "]",
    "->",
    "#",
    "!",
    ":",
    "^bb0(%a: tensor<f32>):",
    "[9223372036854775807:0]",
    "low = [9223372036854775807], high = [9223372036854775807]",
];

const HUGE_NUMBERS: &[&str] = &[
    "99999999999999999999",
    "4294967296",
    "-1",
    "0",
    "2147483648",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "65536",
];

fn mutate(rng: &mut Rng, seeds: &[String], input: &mut Vec<u8>) {
    let len = input.len();
    let at = rng.below(len + 1);
    match rng.below(9) {
        // Byte flips: one bit, or any byte (non-ASCII included).
        0 => {
            for _ in 0..=rng.below(4) {
                if !input.is_empty() {
                    let k = rng.below(input.len());
                    input[k] = if rng.below(2) == 0 {
                        input[k] ^ (1 << rng.below(8))
                    } else {
                        rng.next() as u8
                    };
                }
            }
        }
        1 => input.truncate(at),
        // A token (up to the next space) repeated.
        2 => {
            let end = input[at..]
                .iter()
                .position(|b| b.is_ascii_whitespace())
                .map_or(len, |e| at + e);
            let token = input[at..end].to_vec();
            let times = 1 + rng.below(64);
            let copies: Vec<u8> = token
                .iter()
                .copied()
                .cycle()
                .take(token.len() * times)
                .collect();
            input.splice(end..end, copies);
        }
        // A number replaced by a huge or negative one.
        3 => {
            let digits: Vec<usize> = (0..len).filter(|&k| input[k].is_ascii_digit()).collect();
            if !digits.is_empty() {
                let start = *rng.pick(&digits);
                let end = input[start..]
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .map_or(len, |e| start + e);
                let n = rng.pick(HUGE_NUMBERS).as_bytes().to_vec();
                input.splice(start..end, n);
            }
        }
        // Deep nesting: regions, brackets or angle brackets, up to a few thousand deep.
        4 => {
            let depth = 1 + rng.below(3_000);
            let (open, close): (&str, &str) = match rng.below(4) {
                0 => ("\"x.op\"() ({\n", "}) : () -> tensor<f32>\n"),
                1 => ("[", "]"),
                2 => ("tensor<", ">"),
                _ => ("(", ")"),
            };
            let mut nest = open.repeat(depth).into_bytes();
            nest.extend_from_slice(b"stablehlo.return\n");
            nest.extend(close.repeat(depth).into_bytes());
            input.splice(at..at, nest);
        }
        // Splicing: part of another seed inserted, or the rest replaced by it.
        5 => {
            let other = rng.pick(seeds).as_bytes();
            let from = rng.below(other.len() + 1);
            let to = (from + rng.below(512)).min(other.len());
            let piece = other[from..to].to_vec();
            if rng.below(2) == 0 {
                input.splice(at..at, piece);
            } else {
                input.truncate(at);
                input.extend(piece);
            }
        }
        6 => {
            let nasty = rng.pick(NASTY).as_bytes().to_vec();
            input.splice(at..at, nasty);
        }
        // A line deleted or repeated.
        7 => {
            let start = input[..at]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1);
            let end = input[at..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(len, |p| at + p + 1);
            if rng.below(2) == 0 {
                input.drain(start..end);
            } else {
                let line = input[start..end].to_vec();
                input.splice(end..end, line.repeat(1 + rng.below(8)));
            }
        }
        // A range deleted.
        _ => {
            let end = (at + rng.below(64)).min(len);
            input.drain(at..end);
        }
    }
}

/// `text` specialized as a caller of a shape-polymorphic export might: leading `tensor<i64>`
/// parameters (dimension variables) 3, every dynamic size 3. `None` without dynamic shapes.
fn specialized(text: &str) -> Option<Result<Func, ferrax_stablehlo::Error>> {
    let params = parameters(text).ok()?;
    if params.iter().all(|p| p.dims.iter().all(Option::is_some)) {
        return None;
    }
    let mut leading = true;
    let specs = params
        .iter()
        .map(|p| {
            leading &= p.dtype == DType::I64 && p.dims.is_empty();
            if leading {
                Specialize::Value(Literal::scalar(Scalar::I64(3)))
            } else {
                Specialize::Shape(p.dims.iter().map(|d| d.unwrap_or(3)).collect())
            }
        })
        .collect::<Vec<_>>();
    Some(load_specialized(text, &specs))
}

/// Imports `text` every way (specialized too, where it has dynamic shapes); an import that
/// succeeds must verify. `Err` says what is wrong (a panic propagates).
fn exercise(text: &str) -> Result<bool, String> {
    let loaded = load(text);
    if let Ok(func) = &loaded {
        verify(func).map_err(|e| format!("load gave an invalid function: {e}"))?;
    }
    if let Some(Ok(func)) = specialized(text) {
        verify(&func).map_err(|e| format!("load_specialized gave an invalid function: {e}"))?;
        return Ok(true);
    }
    if let Ok(cases) = test_cases(text) {
        for case in &cases {
            for f in case.inputs.iter().chain([&case.program.func]) {
                verify(f).map_err(|e| format!("test_cases gave an invalid function: {e}"))?;
            }
        }
    }
    Ok(loaded.is_ok())
}

fn seed_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            seed_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "mlir")
            && entry.metadata().is_ok_and(|m| m.len() <= MAX_SEED_BYTES)
        {
            out.push(path);
        }
    }
}

struct Seeds {
    all: Vec<String>,
    importing: Vec<String>,
}

fn seeds() -> Seeds {
    let all = seed_texts();
    let importing: Vec<String> = all
        .iter()
        .filter(|t| {
            load(t).is_ok()
                || specialized(t).is_some_and(|r| r.is_ok())
                || test_cases(t).is_ok_and(|c| !c.is_empty())
        })
        .cloned()
        .collect();
    eprintln!(
        "fuzz: {} seeds, {} of them import",
        all.len(),
        importing.len()
    );
    Seeds { all, importing }
}

fn seed_texts() -> Vec<String> {
    let mut seeds: Vec<String> = INLINE_SEEDS.iter().map(|s| s.to_string()).collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/stablehlo/testdata");
    let mut files = Vec::new();
    seed_files(&dir, &mut files);
    files.sort();
    if files.is_empty() {
        eprintln!(
            "fuzz: no conformance files under {}; fuzzing the inline seeds only",
            dir.display()
        );
    }
    seeds.extend(files.iter().filter_map(|f| std::fs::read_to_string(f).ok()));
    seeds
}

fn env_number(key: &str) -> Option<u64> {
    std::env::var(key).ok().and_then(|v| v.parse().ok())
}

/// One fuzzing input: the seed `s`'s text after a few mutations. Three in four start from a
/// seed that imports, so that mutations reach past the parser.
fn input(seeds: &Seeds, s: u64) -> String {
    let mut rng = Rng::new(s);
    let pool = if rng.below(4) == 0 || seeds.importing.is_empty() {
        &seeds.all
    } else {
        &seeds.importing
    };
    let mut bytes = rng.pick(pool).clone().into_bytes();
    for _ in 0..1 + rng.below(4) {
        mutate(&mut rng, &seeds.all, &mut bytes);
        bytes.truncate(MAX_INPUT_BYTES);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Runs `count` inputs from `base`; returns the failures (seed and what happened).
fn fuzz(seeds: &Seeds, base: u64, count: u64) -> Vec<(u64, String)> {
    let mut failures = Vec::new();
    let (mut slowest, mut slowest_seed) = (Duration::ZERO, base);
    let mut loaded = 0;
    // Names each seed before running it: an abort (stack overflow, allocation failure) cannot
    // be caught, so this is how to find the input behind one.
    let trace = std::env::var_os("FERRAX_FUZZ_TRACE").is_some();
    for s in base..base + count {
        let text = input(seeds, s);
        if trace {
            eprintln!("fuzz: seed {s}");
        }
        let start = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| exercise(&text)));
        let took = start.elapsed();
        if took > slowest {
            (slowest, slowest_seed) = (took, s);
        }
        let failure = match outcome {
            Ok(Ok(_)) if took > SLOW => Some(format!("took {took:?}")),
            Ok(Ok(ok)) => {
                loaded += usize::from(ok);
                None
            }
            Ok(Err(e)) => Some(e),
            Err(p) => Some(format!(
                "panicked: {}",
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            )),
        };
        // A failing input is kept; so is the input of a one-seed run (a reproduction).
        if failure.is_some() || count == 1 {
            let file = std::env::temp_dir().join(format!("ferrax-fuzz-{s}.mlir"));
            match std::fs::write(&file, &text) {
                Ok(()) => eprintln!("fuzz: seed {s}: input in {}", file.display()),
                Err(e) => eprintln!("fuzz: seed {s}: cannot write {}: {e}", file.display()),
            }
        }
        if let Some(why) = failure {
            eprintln!("fuzz: seed {s}: {why}");
            failures.push((s, why));
        }
    }
    eprintln!(
        "fuzz: {count} inputs from seed {base}, {loaded} of them loaded, {} failed; slowest {slowest:?} (seed {slowest_seed})",
        failures.len()
    );
    failures
}

#[test]
fn loader_never_panics() {
    let count = env_number("FERRAX_FUZZ_INPUTS").unwrap_or(DEFAULT_INPUTS as u64);
    let base = env_number("FERRAX_FUZZ_SEED").unwrap_or(1);
    let seeds = seeds();
    let worker = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || fuzz(&seeds, base, count))
        .expect("spawning the fuzzing thread");
    let failures = worker.join().expect("the fuzzing thread");
    assert!(
        failures.is_empty(),
        "{} of {count} inputs failed; rerun one with FERRAX_FUZZ_SEED=<seed> FERRAX_FUZZ_INPUTS=1: {:?}",
        failures.len(),
        failures.iter().map(|(s, _)| s).collect::<Vec<_>>()
    );
}
