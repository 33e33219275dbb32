//! Mutation fuzzing of the IR text parser: no input may panic, abort or overflow the stack.
//!
//! Seeds are the IR text checked in across the workspace (file tests and snapshots, read from
//! disk) and a few inline programs. Each input is a seed mutated by byte flips, truncation,
//! token duplication, huge numbers, splicing with another seed, or a deep `custom_vjp` nest.
//! Whatever parses must verify, print, and parse back to an equal function. The generator is
//! a seeded xorshift, so a failure names an input that reproduces it. The run is bounded for
//! CI; `FERRAX_FUZZ_INPUTS=N` runs N inputs. It runs on a 256 KiB stack so that recursion
//! growing with the input shows up as a crash here rather than on a user's larger stack.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{parse_func, print_func, verify};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

const DEFAULT_INPUTS: usize = 3_000;
const STACK: usize = 256 * 1024;
/// An input that takes longer than this counts as a hang.
const HANG: Duration = Duration::from_secs(5);

const INLINE_SEEDS: &[&str] = &[
    "func @f(%x: f32[2,3], %s: f32[]) -> (f32[3,2], f32[4,2]) {
  %c = constant 1.5 : f32[2,3]
  %a = add %x, %c : f32[2,3]
  %r = reshape %a : f32[3,2]
  %sl = slice %x, start=[0,1], limit=[2,3], strides=[1,2] : f32[2,1]
  %pd = pad %sl, %s, low=[1,-1], high=[0,2], interior=[1,0] : f32[4,2]
  return %r, %pd
}",
    "func @g(%x: f32[4,3], %i: i32[5]) -> (f32[5,3], f32[4,6], f32[3]) {
  %g = gather %x, %i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1,3] : f32[5,3]
  %c = concatenate %x, %x, axis=1 : f32[4,6]
  %r = reduce_sum %x, axes=[0] : f32[3]
  return %g, %c, %r
}",
    "func @h(%a: f32[2,3], %b: f32[3,4], %u: i32[], %v: f32[1,3]) -> (f32[2,4], i64[4,2], f32[2,3]) {
  %d = dot_general %a, %b, contract=[1]x[0] : f32[2,4]
  %io = iota dim=0 : i64[4,2]
  %up = dynamic_update_slice %a, %v, %u, %u : f32[2,3]
  return %d, %io, %up
}",
    "func @k(%x: f32[3]) -> (f32[3]) {
  %c = constant [1, 0x7fc00001, -inf] : f32[3]
  %m = mul %x, %c : f32[3]
  return %m
}",
];

/// What a number is replaced with: huge values, and small ones that keep the text valid.
const NUMBERS: &[&str] = &[
    "99999999999999999999",
    "4294967296",
    "-1",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "0",
    "1",
    "2",
    "3",
];

/// Characters a flip writes: the format's punctuation, digits and a few letters.
const FLIP: &[u8] = b"%@[](){},:=x-+.0123456789 \nfuncreturnf32i64\x00\xff";

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The IR text of the workspace's file tests and snapshots, from its first `func @`, with
/// `;` comment lines (file-test notes) left out.
fn corpus_seeds() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dirs = [
        "tests/filetests",
        "tests/snapshots",
        "compiler/tests/snapshots",
        "ir/tests/snapshots",
    ];
    let mut seeds = Vec::new();
    for dir in dirs {
        collect(&root.join(dir), &mut seeds);
    }
    seeds
}

fn collect(dir: &Path, seeds: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            collect(&path, seeds);
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if let Some(at) = text.find("func @") {
            let lines: Vec<&str> = text[at..]
                .lines()
                .filter(|l| !l.trim_start().starts_with(';'))
                .collect();
            seeds.push(lines.join("\n"));
        }
    }
}

/// A well-formed nest: `depth` functions, each but the innermost calling the next through
/// `custom_vjp`'s primal.
fn nest(depth: usize) -> String {
    let open = "func @f(%x: f32[2]) -> (f32[2]) {\n  %y = custom_vjp %x, primal=";
    let close = ", fwd=func @fw(%a: f32[2]) -> (f32[2]) { return %a }, \
                 bwd=func @bw(%c: f32[2]) -> (f32[2]) { return %c } : f32[2]\n  return %y\n}";
    let leaf = "func @leaf(%x: f32[2]) -> (f32[2]) {\n  %y = exp %x : f32[2]\n  return %y\n}";
    let inner = depth.saturating_sub(1);
    let mut s = open.repeat(inner);
    s.push_str(leaf);
    s.push_str(&close.repeat(inner));
    s
}

/// Splits text into runs of name characters and single other characters, so that the
/// pieces join back to it.
fn tokens(s: &str) -> Vec<&str> {
    let word = |c: char| c.is_ascii_alphanumeric() || "_.+-%@".contains(c);
    let mut out = Vec::new();
    let (mut start, mut prev_word) = (0, false);
    for (i, c) in s.char_indices() {
        let w = word(c);
        if i > start && !(w && prev_word) {
            out.push(&s[start..i]);
            start = i;
        }
        prev_word = w;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

fn mutate(rng: &mut Rng, seeds: &[String]) -> String {
    let mut text = rng.pick(seeds).clone();
    for _ in 0..1 + rng.below(3) {
        text = mutate_once(rng, &text, seeds);
    }
    text
}

fn mutate_once(rng: &mut Rng, text: &str, seeds: &[String]) -> String {
    let bytes = text.as_bytes();
    match rng.below(8) {
        0 | 1 if !bytes.is_empty() => {
            let mut b = bytes.to_vec();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(b.len());
                b[i] = *rng.pick(FLIP);
            }
            String::from_utf8_lossy(&b).into_owned()
        }
        2 => String::from_utf8_lossy(&bytes[..rng.below(bytes.len() + 1)]).into_owned(),
        3 => {
            let toks = tokens(text);
            if toks.is_empty() {
                return text.to_string();
            }
            let i = rng.below(toks.len());
            let j = (i + 1 + rng.below(8)).min(toks.len());
            let copies = 1 + rng.below(3);
            let mut out = toks[..j].concat();
            out.push_str(&toks[i..j].concat().repeat(copies));
            out.push_str(&toks[j..].concat());
            out
        }
        4 | 5 => {
            let toks = tokens(text);
            let numbers: Vec<usize> = (0..toks.len())
                .filter(|&i| toks[i].bytes().all(|b| b.is_ascii_digit()))
                .collect();
            if numbers.is_empty() {
                return text.to_string();
            }
            let at = *rng.pick(&numbers);
            let number = *rng.pick(NUMBERS);
            toks.iter()
                .enumerate()
                .map(|(i, t)| if i == at { number } else { t })
                .collect()
        }
        6 => {
            let other = rng.pick(seeds);
            let a: Vec<&str> = text.lines().collect();
            let b: Vec<&str> = other.lines().collect();
            let (i, j) = (rng.below(a.len() + 1), rng.below(b.len() + 1));
            let mut lines = a[..i].to_vec();
            lines.extend(&b[j..]);
            lines.join("\n")
        }
        _ => match rng.below(3) {
            0 => nest(1 + rng.below(80)),
            1 => nest(60 + rng.below(2000)),
            _ => "func @g(%x: f32[]) -> (f32[]) { %y = custom_vjp %x, primal="
                .repeat(1 + rng.below(5000)),
        },
    }
}

/// Parses `input`; a function that parses must verify and print back to itself. Says
/// whether it parsed.
fn check(input: &str) -> Result<bool, String> {
    let Ok(func) = parse_func(input) else {
        return Ok(false);
    };
    verify(&func).map_err(|e| format!("parsed but does not verify: {e}"))?;
    let printed = print_func(&func);
    let again = parse_func(&printed).map_err(|e| format!("printed text does not parse: {e}"))?;
    if again != func {
        return Err(format!("parse(print(f)) != f; printed:\n{printed}"));
    }
    if print_func(&again) != printed {
        return Err("printing is not canonical".into());
    }
    Ok(true)
}

fn run(count: usize) -> Vec<String> {
    let mut seeds: Vec<String> = INLINE_SEEDS.iter().map(|s| s.to_string()).collect();
    seeds.extend(corpus_seeds());
    seeds.push(nest(8));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut failures, mut parsed) = (Vec::new(), 0);
    for n in 0..count {
        let input = mutate(&mut rng, &seeds);
        let start = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| check(&input)));
        let problem = match outcome {
            Ok(Ok(_)) if start.elapsed() > HANG => Some(format!("took {:?}", start.elapsed())),
            Ok(Ok(ok)) => {
                parsed += usize::from(ok);
                None
            }
            Ok(Err(e)) => Some(e),
            Err(_) => Some("panicked".to_string()),
        };
        if let Some(problem) = problem {
            failures.push(format!(
                "input #{n}: {problem}\n--- input ---\n{input}\n---"
            ));
        }
    }
    eprintln!(
        "fuzzed {count} inputs from {} seeds: {parsed} parsed, {} failures",
        seeds.len(),
        failures.len()
    );
    failures
}

#[test]
fn parser_survives_mutated_inputs() {
    let count = std::env::var("FERRAX_FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_INPUTS);
    let failures = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || run(count))
        .unwrap()
        .join()
        .unwrap();
    assert!(
        failures.is_empty(),
        "{} failing inputs; the first:\n{}",
        failures.len(),
        failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn seeds_are_read_from_the_workspace() {
    // The corpus is optional (the crate may be built alone), but when the workspace is
    // there its IR must be found, or the fuzzer would silently lose its seeds.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/filetests");
    if root.is_dir() {
        let seeds = corpus_seeds();
        assert!(seeds.len() >= 10, "found {} seeds", seeds.len());
        let parsed = seeds.iter().filter(|s| parse_func(s).is_ok()).count();
        assert!(parsed >= 10, "{parsed} of {} seeds parse", seeds.len());
    }
}
