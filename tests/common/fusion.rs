//! Random fusion programs for the backends' property tests: programs of any float type that a
//! backend must compute exactly as the interpreter does, and the same with a transcendental and
//! a sum at the end, with the checks both backends apply.

use ferrax::compiler::kernel::{Kernel, Role};
use ferrax::ir::Func;
use ferrax::{Array, DType};

/// The shapes random programs take: a large one, whose kernels split across threads or blocks.
pub const SHAPES: [(usize, usize); 4] = [(37, 24), (8, 3), (5, 64), (300, 260)];

/// The transcendental tails of [`with_tail`]'s programs.
pub const TAILS: [&[&str]; 11] = [
    &["exp"],
    &["tanh"],
    &["logistic"],
    &["sin"],
    &["cos"],
    &["log"],
    &["expm1"],
    &["log1p"],
    &["rsqrt"],
    &["tanh", "plus one"],
    &["sqrt"],
];

/// Case `seed` of the property test of what rounds differently: a random program of f32, f16
/// or bf16 whose first result goes through one of [`TAILS`] and then a sum over its last axis;
/// its text, and its tail.
pub fn tail_case(seed: u64, f64_transcendentals: bool) -> (Func, String, &'static [&'static str]) {
    let dtypes = ["f32", "f16", "bf16"];
    let dtype = dtypes[seed as usize % dtypes.len()];
    let shape = SHAPES[(seed as usize / dtypes.len()) % SHAPES.len()];
    let tail = TAILS[(seed as usize / 12) % TAILS.len()];
    let mix = Mix {
        f64_transcendentals,
        ..Mix::default()
    };
    let text = random_fusion_program(seed, dtype, shape, mix);
    let chain = ferrax::ir::parse_func(&text).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let text = with_tail(&chain, tail);
    let func = ferrax::ir::parse_func(&text).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
    (func, text, tail)
}

/// That `got` has `want`'s bits, any NaN equal to any other.
pub fn assert_same_bits_any_nan(got: &[Array], want: &[Array], what: &str) {
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let key = |a: &Array| -> Vec<Option<u64>> {
            a.to_f64_vec()
                .iter()
                .zip(float_bits(a))
                .map(|(x, b)| (!x.is_nan()).then_some(b))
                .collect()
        };
        let (gk, wk) = (key(g), key(w));
        if let Some(i) = gk.iter().zip(&wk).position(|(a, b)| a != b) {
            panic!(
                "{what}: output {k} element {i}: {:?} want {:?}",
                g.to_f64_vec()[i],
                w.to_f64_vec()[i]
            );
        }
    }
}

/// That a [`with_tail`] program's results agree with the interpreter's: the transcendental to
/// 3 ULP in f32 (one unit after rounding to f16 or bf16; `1 + tanh`, which the interpreter
/// computes with cancellation, to 2^-21), and the sum to the f32 accumulation bound,
/// `(n + 4)·2^-23` of the sum of magnitudes (plus the terms' own tolerance for `1 + tanh`).
pub fn assert_tail_close(got: &[Array], want: &[Array], tail: &[&str], what: &str) {
    let dtype = want[0].dtype();
    let plus_one = tail.contains(&"plus one");
    let n = got[0].shape().numel();
    for i in 0..n {
        let (g, w) = (got[0].elements().get(i), want[0].elements().get(i));
        let ulps = ferrax::ir::ulp_distance(g, w);
        let close = ulps <= if dtype == DType::F32 { 3 } else { 1 }
            || (plus_one && (g.to_f64() - w.to_f64()).abs() <= 2f64.powi(-21));
        assert!(close, "{what}: element {i}: {g:?} want {w:?}");
    }
    // One unit in the last place of a half-precision sum's rounding.
    let unit = match dtype {
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        _ => 0.0,
    };
    let terms = want[0].to_f64_vec();
    let cols = terms.len() / got[1].shape().numel().max(1);
    let (sums, want_sums) = (got[1].to_f64_vec(), want[1].to_f64_vec());
    for (r, (&g, &w)) in sums.iter().zip(&want_sums).enumerate() {
        let magnitude: f64 = terms[r * cols..(r + 1) * cols]
            .iter()
            .map(|t| t.abs())
            .sum();
        let mut bound = (cols as f64 + 4.0) * 2f64.powi(-23) * magnitude;
        if plus_one {
            bound += cols as f64 * 2f64.powi(-21);
        }
        let close = g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= bound + w.abs() * unit;
        assert!(close, "{what}: row {r}: sum {g} want {w}");
    }
}

/// Whether row kernel `k` keeps element values of one pass for a later one (in a scratch
/// row, or computing them again where streamed).
pub fn carries_between_passes(k: &Kernel) -> bool {
    k.rows.is_some() && k.sig.buffers.iter().any(|b| b.role == Role::Scratch)
}

/// The bits of every element of a float array of any width.
pub fn float_bits(a: &Array) -> Vec<u64> {
    use ferrax::ir::Elements;
    match a.elements() {
        Elements::F16(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
        Elements::BF16(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
        Elements::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
        Elements::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        other => panic!("not a float array: {other:?}"),
    }
}

/// The shape class of a random fusion program's value.
#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    /// `[rows, cols]`
    Full,
    /// `[cols]`, broadcast along rows.
    Row,
    /// `[rows]`, broadcast along columns.
    Col,
    Scalar,
}

/// A value of a random fusion program.
#[derive(Clone, Copy)]
pub struct Val {
    pub kind: Kind,
    pub dtype: &'static str,
    pub is_bool: bool,
    /// Made by a product (an `add` of it would contract into an fma).
    pub product: bool,
    /// The same along each row (a row kernel would divide by it as a reciprocal).
    pub row_uniform: bool,
}

/// What [`random_fusion_program`] may generate beyond its usual mix.
#[derive(Clone, Copy, Default)]
pub struct Mix {
    /// f64 transcendentals (computed by the interpreter's functions on the CPU).
    pub f64_transcendentals: bool,
    /// Row kernels of several passes: often a max or min over a row, broadcast back and
    /// combined with an element value of an earlier pass, which the later pass must have
    /// kept (or, streamed, compute again).
    pub row_passes: bool,
}

/// A random program over `[rows, cols]` values of one float type that the CPU backend must
/// compute exactly as the interpreter does: elementwise ops, constants, row/column/scalar
/// broadcasts, max and min over rows and over columns, compares, selects, clamps, and rounding
/// through another float type, stacked into chains so that they fuse into flat and row
/// kernels. What may round differently stays out: sums, f32/f16/bf16 transcendentals (f64 ones
/// call the interpreter's functions), `add` of a product (contracted into an fma) and division
/// by a value uniform along rows (a row kernel multiplies by its reciprocal).
pub fn random_fusion_program(
    seed: u64,
    dtype: &'static str,
    (rows, cols): (usize, usize),
    mix: Mix,
) -> String {
    let mut rng = super::Gen(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    let shape = |k: Kind| match k {
        Kind::Full => format!("[{rows},{cols}]"),
        Kind::Row => format!("[{cols}]"),
        Kind::Col => format!("[{rows}]"),
        Kind::Scalar => "[]".to_string(),
    };
    let param = |kind, row_uniform| Val {
        kind,
        dtype,
        is_bool: false,
        product: false,
        row_uniform,
    };
    let mut vals = vec![
        param(Kind::Full, false),
        param(Kind::Full, false),
        param(Kind::Row, false),
        param(Kind::Col, true),
        param(Kind::Scalar, true),
    ];
    let params = vals.len();
    let mut used = vec![false; params];
    let mut lines: Vec<String> = Vec::new();
    let mut emit =
        |vals: &mut Vec<Val>, used: &mut Vec<bool>, text: String, v: Val, args: &[usize]| {
            for &a in args {
                used[a] = true;
            }
            let n = vals.len();
            let ty = if v.is_bool { "bool" } else { v.dtype };
            lines.push(format!("  %{n} = {text} : {ty}{}", shape(v.kind)));
            vals.push(v);
            used.push(false);
            n
        };
    let other_float = ["f32", "f64", "f16", "bf16"];
    for _ in 0..8 + rng.below(16) {
        let mut floats: Vec<usize> = (0..vals.len())
            .filter(|&v| !vals[v].is_bool && vals[v].dtype == dtype)
            .collect();
        if mix.row_passes {
            // Stay with whole arrays: rows for row kernels to take.
            floats.retain(|&v| vals[v].kind == Kind::Full);
        }
        let x = if rng.below(2) == 0 {
            floats[floats.len() - 1]
        } else {
            *rng.pick(&floats)
        };
        let xv = vals[x];
        let same: Vec<usize> = floats
            .iter()
            .copied()
            .filter(|&v| vals[v].kind == xv.kind)
            .collect();
        let derived = |product, row_uniform| Val {
            product,
            row_uniform,
            ..xv
        };
        let full: Vec<usize> = same
            .iter()
            .copied()
            .filter(|&v| vals[v].kind == Kind::Full && v != x)
            .collect();
        if mix.row_passes && xv.kind == Kind::Full && !full.is_empty() && rng.below(3) == 0 {
            // A row's max or min, then combined with an element value of before it.
            let op = rng.pick(&["reduce_max", "reduce_min"]);
            let col = Val {
                kind: Kind::Col,
                ..derived(false, true)
            };
            let m = emit(
                &mut vals,
                &mut used,
                format!("{op} %{x}, axes=[1]"),
                col,
                &[x],
            );
            let back = Val {
                kind: Kind::Full,
                ..col
            };
            let text = format!("broadcast_in_dim %{m}, dims=[0]");
            let b = emit(&mut vals, &mut used, text, back, &[m]);
            // Mostly a computed value (a parameter is loaded again rather than kept).
            let computed: Vec<usize> = full.iter().copied().filter(|&v| v >= params).collect();
            let carried = match computed.is_empty() || rng.below(4) == 0 {
                true => *rng.pick(&full),
                false => *rng.pick(&computed),
            };
            let op = *rng.pick(&["sub", "max", "min", "mul"]);
            let v = derived(op == "mul", false);
            let text = format!("{op} %{carried}, %{b}");
            emit(&mut vals, &mut used, text, v, &[carried, b]);
            continue;
        }
        match rng.below(11) {
            0 => {
                let mut ops = vec!["neg", "abs", "sqrt", "floor", "ceil", "round_even", "sign"];
                if dtype == "f64" && mix.f64_transcendentals {
                    ops.extend(["exp", "tanh", "log1p", "sin", "logistic"]);
                }
                let op = rng.pick(&ops);
                emit(
                    &mut vals,
                    &mut used,
                    format!("{op} %{x}"),
                    derived(false, xv.row_uniform),
                    &[x],
                );
            }
            1 | 2 => {
                let y = if rng.below(3) == 0 {
                    x
                } else {
                    *rng.pick(&same)
                };
                let yv = vals[y];
                let mut op = *rng.pick(&["add", "sub", "mul", "div", "max", "min"]);
                if op == "add" && (xv.product || yv.product) {
                    op = "sub";
                }
                if op == "div" && yv.row_uniform {
                    op = "max";
                }
                let v = derived(op == "mul", xv.row_uniform && yv.row_uniform);
                emit(&mut vals, &mut used, format!("{op} %{x}, %{y}"), v, &[x, y]);
            }
            3 => {
                let c = rng.pick(&["0.0", "-0.0", "1.0", "-1.5", "0.1", "3.0"]);
                let k = emit(
                    &mut vals,
                    &mut used,
                    format!("constant {c}"),
                    derived(false, true),
                    &[],
                );
                // A constant divisor is uniform along rows: only divide a constant.
                let mut op = *rng.pick(&["sub", "mul", "max", "min", "div"]);
                if op == "div" && xv.row_uniform {
                    op = "min";
                }
                let (a, b) = if rng.below(2) == 0 || op == "div" {
                    (k, x)
                } else {
                    (x, k)
                };
                let v = derived(op == "mul", xv.row_uniform);
                emit(&mut vals, &mut used, format!("{op} %{a}, %{b}"), v, &[a, b]);
            }
            4 if xv.kind != Kind::Full => {
                let dims = match xv.kind {
                    Kind::Row => "[1]",
                    Kind::Col => "[0]",
                    _ => "[]",
                };
                let v = Val {
                    kind: Kind::Full,
                    ..derived(false, xv.kind != Kind::Row)
                };
                emit(
                    &mut vals,
                    &mut used,
                    format!("broadcast_in_dim %{x}, dims={dims}"),
                    v,
                    &[x],
                );
            }
            5 | 6 if xv.kind == Kind::Full => {
                // Over the row (a row kernel) or over the columns.
                let (axis, kind) = if rng.below(2) == 0 {
                    (1, Kind::Col)
                } else {
                    (0, Kind::Row)
                };
                let op = rng.pick(&["reduce_max", "reduce_min"]);
                let v = Val {
                    kind,
                    ..derived(false, kind == Kind::Col)
                };
                emit(
                    &mut vals,
                    &mut used,
                    format!("{op} %{x}, axes=[{axis}]"),
                    v,
                    &[x],
                );
            }
            7 => {
                let y = *rng.pick(&same);
                let cmp = rng.pick(&["gt", "lt", "eq", "ge", "ne"]);
                let mask = Val {
                    is_bool: true,
                    ..derived(false, false)
                };
                let c = emit(
                    &mut vals,
                    &mut used,
                    format!("{cmp} %{x}, %{y}"),
                    mask,
                    &[x, y],
                );
                let z = *rng.pick(&same);
                let v = derived(
                    false,
                    xv.row_uniform && vals[y].row_uniform && vals[z].row_uniform,
                );
                emit(
                    &mut vals,
                    &mut used,
                    format!("select %{c}, %{y}, %{z}"),
                    v,
                    &[c, y, z],
                );
            }
            8 => {
                // Rounded through another float type, sometimes computed there.
                let to = *rng.pick(&other_float);
                let there = Val {
                    dtype: to,
                    ..derived(false, xv.row_uniform)
                };
                let mut at = emit(&mut vals, &mut used, format!("convert %{x}"), there, &[x]);
                if rng.below(2) == 0 {
                    at = emit(
                        &mut vals,
                        &mut used,
                        format!("max %{at}, %{at}"),
                        there,
                        &[at],
                    );
                    let constant = Val {
                        row_uniform: true,
                        ..there
                    };
                    let text = "constant 0.75".to_string();
                    let k = emit(&mut vals, &mut used, text, constant, &[]);
                    at = emit(
                        &mut vals,
                        &mut used,
                        format!("mul %{at}, %{k}"),
                        there,
                        &[at, k],
                    );
                }
                emit(
                    &mut vals,
                    &mut used,
                    format!("convert %{at}"),
                    derived(false, xv.row_uniform),
                    &[at],
                );
            }
            9 => {
                // Between constant bounds, zeros among them (whose signs count).
                let bounds = [
                    ("-1.0", "1.0"),
                    ("-0.0", "2.0"),
                    ("-3.0", "0.0"),
                    ("0.5", "-0.5"),
                ];
                let (lo, hi) = *rng.pick(&bounds);
                let constant = derived(false, true);
                let lo = emit(
                    &mut vals,
                    &mut used,
                    format!("constant {lo}"),
                    constant,
                    &[],
                );
                let hi = emit(
                    &mut vals,
                    &mut used,
                    format!("constant {hi}"),
                    constant,
                    &[],
                );
                let v = derived(false, xv.row_uniform);
                let text = format!("clamp %{lo}, %{x}, %{hi}");
                emit(&mut vals, &mut used, text, v, &[lo, x, hi]);
            }
            _ => {
                emit(
                    &mut vals,
                    &mut used,
                    format!("stop_gradient %{x}"),
                    derived(xv.product, xv.row_uniform),
                    &[x],
                );
            }
        }
    }
    let mut results: Vec<usize> = (params..vals.len())
        .filter(|&v| !used[v] && !vals[v].is_bool && vals[v].dtype == dtype)
        .collect();
    if results.is_empty() {
        results.push(
            (0..vals.len())
                .rev()
                .find(|&v| !vals[v].is_bool && vals[v].dtype == dtype)
                .unwrap_or(0),
        );
    }
    let ty = |v: usize| format!("{}{}", vals[v].dtype, shape(vals[v].kind));
    let sig: Vec<String> = (0..params).map(|v| format!("%{v}: {}", ty(v))).collect();
    let outs: Vec<String> = results.iter().map(|&v| ty(v)).collect();
    let rets: Vec<String> = results.iter().map(|v| format!("%{v}")).collect();
    format!(
        "func @fusion({}) -> ({}) {{\n{}\n  return {}\n}}\n",
        sig.join(", "),
        outs.join(", "),
        lines.join("\n"),
        rets.join(", ")
    )
}

/// Inputs for `func` of any float type: standard-normal-like values with NaN, ±inf and ±0 in
/// every seventh place.
pub fn float_inputs(func: &Func, seed: u64) -> Vec<Array> {
    use half::{bf16, f16};
    let mut g = super::Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0];
    func.params
        .iter()
        .map(|t| {
            let n = t.shape.numel();
            let v: Vec<f64> = (0..n)
                .map(|i| match i % 7 {
                    3 => specials[(i / 7) % specials.len()],
                    _ => (g.next() >> 11) as f64 / (1u64 << 51) as f64 * 6.0 - 3.0,
                })
                .collect();
            let dims = t.shape.dims().to_vec();
            match t.dtype {
                DType::F64 => Array::from_vec(dims, v),
                DType::F32 => Array::from_vec(dims, v.iter().map(|&x| x as f32).collect()),
                DType::F16 => Array::from_vec(dims, v.iter().map(|&x| f16::from_f64(x)).collect()),
                _ => Array::from_vec(dims, v.iter().map(|&x| bf16::from_f64(x)).collect()),
            }
            .unwrap()
        })
        .collect()
}

/// `chain` returning its first result through `tail` (unary ops by name, "plus one" adding 1),
/// and the sum of that over its last axis, as IR text.
pub fn with_tail(chain: &Func, tail: &[&str]) -> String {
    let printed = chain.to_string();
    let body_end = printed.rfind("  return").unwrap();
    let first_line = printed.find('\n').unwrap() + 1;
    let mut body = printed[first_line..body_end].to_string();
    let ty = chain.value_type(chain.outputs[0]).unwrap().clone();
    let dtype = ty.dtype;
    let mut at = chain.outputs[0].0 as usize;
    let mut next = chain.num_values();
    for op in tail {
        if *op == "plus one" {
            body.push_str(&format!("  %{next} = constant 1.0 : {ty}\n"));
            body.push_str(&format!("  %{} = add %{at}, %{next} : {ty}\n", next + 1));
            at = next + 1;
            next += 2;
        } else {
            body.push_str(&format!("  %{next} = {op} %{at} : {ty}\n"));
            at = next;
            next += 1;
        }
    }
    let dims = ty.shape.dims();
    let (sum_ty, axes) = match dims.split_last() {
        Some((_, lead)) => (
            format!("{dtype}{:?}", lead).replace(' ', ""),
            format!("[{}]", dims.len() - 1),
        ),
        None => (format!("{dtype}[]"), "[]".to_string()),
    };
    body.push_str(&format!(
        "  %{next} = reduce_sum %{at}, axes={axes} : {sum_ty}\n"
    ));
    let params: Vec<String> = chain
        .params
        .iter()
        .enumerate()
        .map(|(i, t)| format!("%{i}: {t}"))
        .collect();
    format!(
        "func @tail({}) -> ({ty}, {sum_ty}) {{\n{body}  return %{at}, %{next}\n}}\n",
        params.join(", ")
    )
}
