//! `scan`'s `unroll`: the lowering leaves the results bit-identical to the scan's, on the
//! interpreter and the CPU backend, for lengths and unroll factors drawn at random (factors
//! that do not divide the length, at least the length, a length of 0, both directions), and so
//! does the gradient through an unrolled scan on the interpreter (on the CPU, within a few
//! units in the last place: `gemm` rounds by the layout the simplifier picks).
#![allow(clippy::unwrap_used)]

use ferrax_compiler::autodiff::vjp;
use ferrax_compiler::pipeline::{compile, Backend};
use ferrax_compiler::unroll::unroll_scans;
use ferrax_ir::{parse_func, print_func, Func};
use ferrax_runtime::{interpret, Array};

/// An RNN step scanned over `length` rows with a counter carried beside the state: the final
/// state and count, then the stacked outputs `tanh(w h + x) * x` and the count as a float.
fn rnn(length: usize, reverse: bool, unroll: usize) -> Func {
    let attrs = format!(
        "consts=1, carry=2, length={length}, {}unroll={unroll}, ",
        if reverse { "reverse=1, " } else { "" }
    );
    let body = "body=func @step(%w: f32[3,3], %h: f32[3], %i: i32[], %x: f32[3]) -> (f32[3], i32[], f32[3], f32[]) {
      %m = dot_general %w, %h, contract=[1]x[0] : f32[3]
      %s = add %m, %x : f32[3]
      %t = tanh %s : f32[3]
      %one = constant 1 : i32[]
      %j = add %i, %one : i32[]
      %y = mul %t, %x : f32[3]
      %f = convert %i : f32[]
      return %t, %j, %y, %f
    }";
    let types = [
        "f32[3]",
        "i32[]",
        &format!("f32[{length},3]"),
        &format!("f32[{length}]"),
    ];
    let mut src = format!(
        "func @f(%w: f32[3,3], %h: f32[3], %xs: f32[{length},3]) -> ({}) {{\n  %n = constant 0 : i32[]\n",
        types.join(", ")
    );
    for (k, ty) in types.iter().enumerate() {
        src += &format!("  %r{k} = scan %w, %h, %n, %xs, {attrs}result={k}, {body} : {ty}\n");
    }
    src += "  return %r0, %r1, %r2, %r3\n}";
    parse_func(&src).unwrap()
}

/// A small deterministic generator (xorshift), for inputs and cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn floats(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }
}

fn inputs(rng: &mut Rng, length: usize) -> Vec<Array> {
    vec![
        Array::from_vec(vec![3, 3], rng.floats(9)).unwrap(),
        Array::from_vec(vec![3], rng.floats(3)).unwrap(),
        Array::from_vec(vec![length, 3], rng.floats(3 * length)).unwrap(),
    ]
}

/// Every result's bits (floats as f32 bits, integers as i32).
fn bits(out: &[Array]) -> Vec<Vec<u32>> {
    out.iter()
        .map(|a| match a.to_vec::<f32>() {
            Ok(v) => v.iter().map(|x| x.to_bits()).collect(),
            Err(_) => a
                .to_vec::<i32>()
                .unwrap()
                .iter()
                .map(|&x| x as u32)
                .collect(),
        })
        .collect()
}

fn run(f: &Func, backend: &Backend, args: &[Array]) -> Vec<Vec<u32>> {
    let compiled = compile(f, backend).unwrap();
    bits(&compiled.executable.run(args.to_vec()).unwrap())
}

fn scans(f: &Func) -> Vec<usize> {
    let text = print_func(f);
    text.match_indices("scan ")
        .map(|(at, _)| {
            let rest = &text[at..];
            let from = rest.find("length=").unwrap() + "length=".len();
            let digits: String = rest[from..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().unwrap()
        })
        .collect()
}

#[test]
fn the_lowering_keeps_one_scan_over_blocks_or_none() {
    // 10 steps by 3: a scan of 3 blocks (one call, four results) and one step inlined.
    let lowered = unroll_scans(&rnn(10, false, 3)).unwrap();
    assert_eq!(scans(&lowered), vec![3; 4], "{lowered}");
    assert!(!print_func(&lowered).contains("unroll="), "{lowered}");
    // At least half the length: every step inlined, no scan left.
    for (length, unroll) in [(5, 3), (4, 4), (4, 9)] {
        let lowered = unroll_scans(&rnn(length, true, unroll)).unwrap();
        assert!(scans(&lowered).is_empty(), "{lowered}");
    }
    // Length 0: the scan stays, unrolled no further.
    let lowered = unroll_scans(&rnn(0, false, 4)).unwrap();
    assert_eq!(scans(&lowered), vec![0; 4], "{lowered}");
}

#[test]
fn unrolled_scans_give_the_same_bits() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut cases: Vec<(usize, usize, bool)> = vec![(0, 1, false), (0, 3, true), (7, 7, false)];
    for _ in 0..24 {
        let length = rng.below(13);
        let unroll = 1 + rng.below(length + 3);
        cases.push((length, unroll, rng.below(2) == 1));
    }
    for (length, unroll, reverse) in cases {
        let args = inputs(&mut rng, length);
        let plain = rnn(length, reverse, 1);
        let unrolled = rnn(length, reverse, unroll);
        let case = format!("length={length} unroll={unroll} reverse={reverse}");
        let want = bits(&interpret(&plain, &args).unwrap());
        // The interpreter runs the scan as it is, whatever `unroll` says.
        assert_eq!(bits(&interpret(&unrolled, &args).unwrap()), want, "{case}");
        assert_eq!(run(&unrolled, &Backend::Interpreter, &args), want, "{case}");
        // The CPU backend's matrix products round as `gemm` does, not as the interpreter.
        let cpu = run(&plain, &Backend::Cpu, &args);
        assert_eq!(
            run(&unrolled, &Backend::Cpu, &args),
            cpu,
            "{case} on the CPU"
        );
    }
}

#[test]
fn gradients_through_unrolled_scans_give_the_same_bits() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for (length, unroll, reverse) in [(6, 2, false), (7, 3, true), (5, 8, false), (9, 4, true)] {
        let (plain, unrolled) = (
            vjp(&rnn(length, reverse, 1)).unwrap(),
            vjp(&rnn(length, reverse, unroll)).unwrap(),
        );
        assert!(print_func(&unrolled).contains(&format!("unroll={unroll}")));
        let mut args = inputs(&mut rng, length);
        args.extend([
            Array::from_vec(vec![3], rng.floats(3)).unwrap(),
            Array::scalar(0i32),
            Array::from_vec(vec![length, 3], rng.floats(3 * length)).unwrap(),
            Array::from_vec(vec![length], rng.floats(length)).unwrap(),
        ]);
        let case = format!("length={length} unroll={unroll} reverse={reverse}");
        let want = run(&plain, &Backend::Interpreter, &args);
        assert_eq!(run(&unrolled, &Backend::Interpreter, &args), want, "{case}");
        // On the CPU, the simplifier may lay out the unrolled steps' matrix products
        // differently, and `gemm` rounds by layout: within a few units in the last place.
        let (a, b) = (
            run(&plain, &Backend::Cpu, &args),
            run(&unrolled, &Backend::Cpu, &args),
        );
        for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
            assert!(
                (*x as i64 - *y as i64).abs() <= 8,
                "{case} on the CPU: {a:?} {b:?}"
            );
        }
    }
}

#[test]
fn unroll_prints_parses_and_is_at_least_one() {
    let f = rnn(4, false, 3);
    let text = print_func(&f);
    assert!(text.contains("length=4, unroll=3, result=0"), "{text}");
    assert_eq!(parse_func(&text).unwrap(), f);
    assert!(!print_func(&rnn(4, false, 1)).contains("unroll"));
    let e = parse_func(&text.replace("unroll=3", "unroll=0"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unroll=0"), "{e}");
}
