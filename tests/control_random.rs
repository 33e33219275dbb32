//! Random programs with loops and branches (a seeded generator of IR text: bounded elementwise
//! work around and inside `scan`, `while` and `cond`) on the CPU backend (simplified, each
//! region compiled) and the emulated GPU, against the interpreter. Kernels compute transcendentals within a few ULP of
//! the interpreter, so results agree to 1e-4 of their scale (values stay in [-4, 4]).
#![allow(clippy::unwrap_used)]

use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
use ferrax::compiler::pipeline::{compile, Backend};
use ferrax::ir::parse_func;
use ferrax::runtime::interpret;
use ferrax::Array;

struct Gen {
    state: u64,
}

impl Gen {
    fn next(&mut self, n: usize) -> usize {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state >> 33) as usize % n
    }
}

/// Writes instructions into `out` (names `%{prefix}{k}`), each an elementwise op of values
/// in `pool` (all of type `ty`) that stays bounded, and returns the pool grown by them.
fn chain(g: &mut Gen, out: &mut String, prefix: &str, pool: &mut Vec<String>, ty: &str, n: usize) {
    for k in 0..n {
        let a = pool[g.next(pool.len())].clone();
        let b = pool[g.next(pool.len())].clone();
        let name = format!("%{prefix}{k}");
        let line = match g.next(7) {
            0 => format!("{name} = tanh {a} : {ty}"),
            1 => format!("{name} = sin {a} : {ty}"),
            2 => {
                let t = format!("%{prefix}{k}t");
                out.push_str(&format!("  {t} = mul {a}, {b} : {ty}\n"));
                format!("{name} = tanh {t} : {ty}")
            }
            3 => {
                let t = format!("%{prefix}{k}t");
                out.push_str(&format!("  {t} = add {a}, {b} : {ty}\n"));
                format!("{name} = sin {t} : {ty}")
            }
            4 => format!("{name} = max {a}, {b} : {ty}"),
            5 => format!("{name} = neg {a} : {ty}"),
            _ => {
                let t = format!("%{prefix}{k}t");
                out.push_str(&format!("  {t} = tanh {a} : {ty}\n"));
                format!("{name} = exp {t} : {ty}")
            }
        };
        out.push_str(&format!("  {line}\n"));
        pool.push(name);
    }
}

/// A function `@name` of `params` (names and types) returning `results` (a value and its
/// type; an empty value is one chosen from the pool) after `n` random instructions.
fn region(
    g: &mut Gen,
    name: &str,
    params: &[(&str, &str)],
    results: &[(&str, &str)],
    n: usize,
) -> String {
    let mut body = String::new();
    let ty = "f32[4,3]";
    let mut pool: Vec<String> = params
        .iter()
        .filter(|(_, t)| *t == ty)
        .map(|(p, _)| format!("%{p}"))
        .collect();
    chain(g, &mut body, "r", &mut pool, ty, n);
    let outs: Vec<String> = results
        .iter()
        .map(|(v, _)| match *v {
            "" => pool[pool.len() - 1 - g.next(pool.len().min(3))].clone(),
            v => v.to_string(),
        })
        .collect();
    let sig: Vec<String> = params.iter().map(|(p, t)| format!("%{p}: {t}")).collect();
    let types: Vec<&str> = results.iter().map(|(_, t)| *t).collect();
    format!(
        "func @{name}({}) -> ({}) {{\n{body}  return {}\n}}",
        sig.join(", "),
        types.join(", "),
        outs.join(", ")
    )
}

/// One random program of `x, y: f32[4,3]`, `xs: f32[5,4,3]`, `n, k: i32[]`.
fn program(seed: u64) -> String {
    let mut g = Gen {
        state: seed.wrapping_mul(0x9E3779B97F4A7C15) | 1,
    };
    let ty = "f32[4,3]";
    let mut out = String::new();
    let mut pool = vec!["%x".to_string(), "%y".to_string()];
    for step in 0..3 {
        chain(&mut g, &mut out, &format!("a{step}_"), &mut pool, ty, 2);
        let a = pool[g.next(pool.len())].clone();
        let b = pool[g.next(pool.len())].clone();
        let v = format!("%c{step}");
        match g.next(3) {
            0 => {
                let body = region(
                    &mut g,
                    "step",
                    &[("k", ty), ("c", ty), ("x", ty)],
                    &[("", ty), ("", ty)],
                    3,
                );
                let ys = format!("%ys{step}");
                out.push_str(&format!(
                    "  {ys} = scan {a}, {b}, %xs, consts=1, carry=1, length=5, result=1, body={body} : f32[5,4,3]\n"
                ));
                out.push_str(&format!("  {v} = reduce_max {ys}, axes=[0] : {ty}\n"));
            }
            1 => {
                let cond = "func @c(%i: i32[], %v: f32[4,3], %w: f32[4,3]) -> (bool[]) {\n  %p = lt %i, %n : bool[]\n  return %p\n}";
                let cond = cond
                    .replace("%n : bool[]", "%lim : bool[]")
                    .replace("  %p = lt", "  %lim = constant 3 : i32[]\n  %p = lt");
                let body = region(
                    &mut g,
                    "body",
                    &[("i", "i32[]"), ("v", ty), ("w", ty)],
                    &[("%i2", "i32[]"), ("", ty), ("%w", ty)],
                    3,
                )
                .replacen(
                    "  return",
                    "  %one = constant 1 : i32[]\n  %i2 = add %i, %one : i32[]\n  return",
                    1,
                );
                out.push_str(&format!(
                    "  {v} = while %n, {a}, {b}, result=1, cond={cond}, body={body} : {ty}\n"
                ));
            }
            _ => {
                let branches: Vec<String> = (0..3)
                    .map(|k| {
                        region(
                            &mut g,
                            &format!("b{k}"),
                            &[("u", ty), ("w", ty)],
                            &[("", ty)],
                            2 + k,
                        )
                    })
                    .collect();
                out.push_str(&format!(
                    "  {v} = cond %k, {a}, {b}, result=0, branches=[{}] : {ty}\n",
                    branches.join(", ")
                ));
            }
        }
        pool.push(v);
    }
    let last = pool.len() - 1;
    format!(
        "func @p(%x: {ty}, %y: {ty}, %xs: f32[5,4,3], %n: i32[], %k: i32[]) -> ({ty}, {ty}) {{\n{out}  return {}, {}\n}}",
        pool[last],
        pool[last - 1]
    )
}

fn close(got: &[Array], want: &[Array], what: &str) {
    for (g, w) in got.iter().zip(want) {
        let (g, w) = (g.to_vec::<f32>().unwrap(), w.to_vec::<f32>().unwrap());
        for (a, b) in g.iter().zip(&w) {
            assert!(
                (a - b).abs() <= 1e-4 * b.abs().max(1.0),
                "{what}: {a} vs {b}"
            );
        }
    }
}

#[test]
fn random_programs_with_loops_agree_with_the_interpreter() {
    let data = |n: usize, s: f32| {
        (0..n)
            .map(|i| (i as f32 * s).sin() * 2.0)
            .collect::<Vec<f32>>()
    };
    let mut kinds = [0; 3];
    for seed in 0..24 {
        let src = program(seed);
        for (k, op) in [" = scan ", " = while ", " = cond "].iter().enumerate() {
            kinds[k] += src.matches(op).count();
        }
        let func = parse_func(&src).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
        let cpu = compile(&func, &Backend::Cpu).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let emulator = ferrax_ptx_emu::Emulator::default();
        let gpu = GpuProgram::compile(&cpu.simplified, &emulator, GpuOptions::HIGHEST).unwrap();
        assert_eq!(gpu.host_steps(), 0, "seed {seed}\n{src}");
        for (n, k) in [(0, 0), (2, 1), (5, 9)] {
            let args = vec![
                Array::from_vec([4, 3], data(12, 0.7)).unwrap(),
                Array::from_vec([4, 3], data(12, 1.3)).unwrap(),
                Array::from_vec([5, 4, 3], data(60, 0.37)).unwrap(),
                Array::scalar(n),
                Array::scalar(k),
            ];
            let want = interpret(&func, &args).unwrap();
            let what = format!("seed {seed}, n={n}, k={k}\n{src}");
            close(&cpu.executable.run(args.clone()).unwrap(), &want, &what);
            close(&gpu.run(&args).unwrap(), &want, &what);
        }
    }
    // Each kind of call appears several times.
    assert!(kinds.iter().all(|&n| n >= 10), "{kinds:?}");
}
