//! A fuzzer for the tracing API: random chains of `Tensor` methods and `nn` functions on random
//! dtypes and shapes, with random arguments (axes out of range, lengths that do not match,
//! sizes near `usize::MAX`, empty and zero-size operands, specs that do not parse). No call may
//! panic: a wrong use is a failed tensor whose error `trace` returns. Where the traced program
//! is small, the interpreter runs it and, for some, the CPU backend too: an `Err` is fine, a
//! panic is not, and where both run their results must have the same types (the runtime
//! fuzzer, `tests/fuzz_runtime/`, compares values).
//!
//! `FERRAX_FUZZ_INPUTS=N` runs N cases instead of the default; `FERRAX_FUZZ_SEED=S` starts
//! from another seed; `FERRAX_FUZZ_TRACE=1` prints each case's seed before running it (an
//! abort or a hang shows no report). A failure prints each failing case's seed and the calls
//! it made.
#![allow(clippy::unwrap_used)]

mod common;

use common::rng::Rng;
use ferrax::compiler::backend::CpuExecutable;
use ferrax::ir::{DotDims, FftKind, ReduceOp};
use ferrax::runtime::interpret;
use ferrax::{
    nn, trace, ConvDims, ConvPadding, Convolution, ConvolveMode, DType, IndexMode, MatrixNorm,
    PadMode, Padding, QuantileMethod, Tensor, Window,
};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Cases a default run (CI) tries.
const DEFAULT_INPUTS: u64 = 4_000;
/// Calls chained in one case, at most.
const CHAIN: usize = 5;
/// A program is run only where its values hold at most this many elements in all.
const RUN_ELEMENTS: usize = 1 << 14;

/// Mostly f32, sometimes any dtype.
fn dtype(rng: &mut Rng) -> DType {
    match rng.below(3) {
        0 => *rng.pick(&DType::ALL),
        _ => DType::F32,
    }
}

/// A dimension: mostly 1 to 4, sometimes 0.
fn dim(rng: &mut Rng) -> usize {
    match rng.below(8) {
        0 => 0,
        _ => 1 + rng.below(4),
    }
}

/// A size argument: mostly small, sometimes 0 or large enough to overflow an element or byte
/// count. (Not merely huge: a valid type of 2^40 elements is a user's right, and a function
/// that traces one op per element, as `polyval` of 2^40 coefficients, takes that long.)
fn size(rng: &mut Rng) -> usize {
    match rng.below(16) {
        0 => usize::MAX,
        1 => usize::MAX / 2 + 1,
        2 => 1 << 62,
        3 => 0,
        _ => rng.below(6),
    }
}

fn sizes(rng: &mut Rng) -> Vec<usize> {
    (0..rng.below(5)).map(|_| size(rng)).collect()
}

/// An axis of a tensor of rank `rank`: mostly one of its own, counted from either end,
/// sometimes out of range either way.
fn axis(rng: &mut Rng, rank: usize) -> i64 {
    match (rng.below(4), rank) {
        (0, _) | (_, 0) => rng.below(11) as i64 - 5,
        _ => rng.below(2 * rank) as i64 - rank as i64,
    }
}

fn axes(rng: &mut Rng, rank: usize) -> Vec<i64> {
    (0..rng.below(4)).map(|_| axis(rng, rank)).collect()
}

fn small_i32s(rng: &mut Rng, lo: i32, hi: i32) -> Vec<i32> {
    let span = (hi - lo + 1) as usize;
    (0..rng.below(5))
        .map(|_| lo + rng.below(span) as i32)
        .collect()
}

fn signed(rng: &mut Rng) -> i64 {
    match rng.below(12) {
        0 => i64::MAX,
        1 => i64::MIN,
        _ => rng.below(9) as i64 - 4,
    }
}

fn number(rng: &mut Rng) -> f64 {
    *rng.pick(&[
        0.0,
        1.0,
        -2.5,
        0.5,
        f64::NAN,
        f64::INFINITY,
        -1e300,
        1e-300,
        3.0,
    ])
}

fn reduce_op(rng: &mut Rng) -> ReduceOp {
    *rng.pick(&[ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod])
}

/// A random spec for `einsum`: letters, commas, arrows and stray characters.
fn einsum_spec(rng: &mut Rng) -> String {
    let pieces = [
        "i", "j", "k", "ij", "jk", "ii", "...", ",", "->", " ", "a", "ba", "Z", "-",
    ];
    (0..1 + rng.below(6)).map(|_| *rng.pick(&pieces)).collect()
}

/// A window with random dimensions, strides, padding and dilations.
fn window(rng: &mut Rng) -> Window {
    let mut w = Window::new(sizes(rng));
    if rng.below(2) == 0 {
        w = w.strides(sizes(rng));
    }
    w = w.padding(match rng.below(3) {
        0 => Padding::Valid,
        1 => Padding::Same,
        _ => Padding::Explicit(
            (0..rng.below(4))
                .map(|_| (signed(rng), signed(rng)))
                .collect(),
        ),
    });
    if rng.below(3) == 0 {
        w = w.base_dilation(sizes(rng));
    }
    if rng.below(3) == 0 {
        w = w.window_dilation(sizes(rng));
    }
    w
}

fn conv_padding(rng: &mut Rng) -> ConvPadding {
    match rng.below(3) {
        0 => ConvPadding::Valid,
        1 => ConvPadding::Same,
        _ => ConvPadding::Explicit(
            (0..rng.below(4))
                .map(|_| (signed(rng), signed(rng)))
                .collect(),
        ),
    }
}

/// One random call on `x`, reading `y` and `z` where it takes more operands; its name goes
/// to `log`.
fn call(rng: &mut Rng, log: &RefCell<Vec<String>>, [x, y, z]: [&Tensor; 3]) -> Vec<Tensor> {
    let choice = rng.below(86);
    log.borrow_mut()
        .push(format!("call {choice} on {} and {}", x.ty(), y.ty()));
    let one = |t: Tensor| vec![t];
    let ax = axis(rng, x.ndim());
    let a32 = ax as i32;
    match choice {
        0 => one(x.reshape(&small_i32s(rng, -2, 6)[..])),
        1 => one(x.broadcast_to(&sizes(rng)[..])),
        2 => {
            let perm: Vec<usize> = (0..rng.below(5)).map(|_| rng.below(6)).collect();
            one(x.transpose(&perm[..]))
        }
        3 => one(x.flip(&small_i32s(rng, -5, 5)[..])),
        4 => one(x.expand_dims(ax)),
        5 => one(x.squeeze(ferrax::Axes::List(axes(rng, x.ndim())))),
        6 => one(x.slice(&sizes(rng), &sizes(rng))),
        7 => one(x.slice_strided(&sizes(rng), &sizes(rng), &sizes(rng))),
        8 => {
            let config: Vec<(i64, i64, usize)> = (0..rng.below(5))
                .map(|_| (signed(rng), signed(rng), size(rng)))
                .collect();
            one(x.pad(&config, number(rng)))
        }
        9 => one(Tensor::concatenate(&[x, y], ax)),
        10 => one(Tensor::stack(&[x, y], ax)),
        11 => {
            let list = ferrax::Axes::List(axes(rng, x.ndim()));
            one(match rng.below(9) {
                0 => x.sum(list),
                1 => x.prod(list),
                2 => x.max(list),
                3 => x.min(list),
                4 => x.mean(list),
                5 => x.var(list),
                6 => x.std(list),
                7 => x.any(list),
                _ => x.all(list),
            })
        }
        12 => one(x.argmax(ax)),
        13 => one(x.argmin(ax)),
        14 => one(match rng.below(4) {
            0 => x.cumsum(ax),
            1 => x.cumprod(ax),
            2 => x.cummax(ax),
            _ => x.cummin(ax),
        }),
        15 => one(x.sort(ax)),
        16 => one(x.argsort_descending(ax)),
        17 => {
            let (v, i) = x.top_k(size(rng));
            vec![v, i]
        }
        18 => one(x.take(&y.astype(DType::I32), ax)),
        19 => one(x.take_with(y, ax, IndexMode::Clip)),
        20 => one(x.take_along_axis(y, ax)),
        21 => one(x.dynamic_slice(&[y, z], &sizes(rng))),
        22 => one(x.dynamic_update_slice(y, &[z, z])),
        23 => one(x.one_hot(size(rng), dtype(rng))),
        24 => one(x.reduce_window(reduce_op(rng), &window(rng))),
        25 => one(x.bincount(if rng.below(2) == 0 { Some(y) } else { None }, size(rng))),
        26 => one(x.digitize(y, rng.below(2) == 0)),
        27 => {
            let range = match rng.below(2) {
                0 => Some((number(rng), number(rng))),
                _ => None,
            };
            let (h, e) = x.histogram(size(rng), range, None, rng.below(2) == 0);
            vec![h, e]
        }
        28 => one(x.histogram_edges(y, Some(z), rng.below(2) == 0)),
        29 => one(x.unique_values(size(rng), Some(number(rng)))),
        30 => {
            let (v, c) = x.unique_counts(size(rng), None);
            vec![v, c]
        }
        31 => x.nonzero(size(rng), -1),
        32 => one(x.argwhere(size(rng), 0)),
        33 => one(x.count_nonzero(ferrax::Axes::List(axes(rng, x.ndim())))),
        34 => one(x.isin(y)),
        35 => one(x.tril(signed(rng))),
        36 => one(x.triu(signed(rng))),
        37 => one(x.diagonal()),
        38 => one(x.repeat(size(rng), ax)),
        39 => one(x.tile(&sizes(rng))),
        40 => one(x.roll(signed(rng), ax)),
        41 => x.split(size(rng), ax),
        42 => x.split_at_indices(&sizes(rng), ax),
        43 => one(x.vector_norm(number(rng), ax)),
        44 => one(x.outer(y)),
        45 => one(x.kron(y)),
        46 => one(x.cross(y)),
        47 => one(x.diff(size(rng), ax)),
        48 => {
            let mode = *rng.pick(&[ConvolveMode::Full, ConvolveMode::Same, ConvolveMode::Valid]);
            one(match rng.below(2) {
                0 => x.convolve(y, mode),
                _ => x.correlate(y, mode),
            })
        }
        49 => one(x.polyval(y)),
        50 => one(x.trapezoid(None, number(rng), ax)),
        51 => one(x.matmul(y)),
        52 => {
            let (l, r) = (axes(rng, x.ndim()), axes(rng, x.ndim()));
            one(x.tensordot(y, (&l, &r)))
        }
        53 => one(x.tensordot_n(y, size(rng))),
        54 => {
            let pick = |rng: &mut Rng| (0..rng.below(3)).map(|_| rng.below(5)).collect();
            let dims = DotDims {
                lhs_batch: pick(rng),
                rhs_batch: pick(rng),
                lhs_contract: pick(rng),
                rhs_contract: pick(rng),
            };
            one(x.dot_general(y, dims))
        }
        55 => one(x.conv(y, &sizes(rng), conv_padding(rng))),
        56 => {
            let mut conv = Convolution::new(ConvDims::channels_first(rng.below(3)));
            conv.strides = sizes(rng);
            conv.padding = conv_padding(rng);
            conv.lhs_dilation = sizes(rng);
            conv.rhs_dilation = sizes(rng);
            conv.feature_groups = size(rng);
            conv.batch_groups = size(rng);
            one(x.conv_general_dilated(y, &conv))
        }
        57 => one(x.cholesky()),
        58 => {
            let (w, v) = x.eigh();
            vec![w, v]
        }
        59 => {
            let (l, p, q) = x.lu();
            vec![l, p, q]
        }
        60 => {
            let (q, r) = x.qr(rng.below(2) == 0);
            vec![q, r]
        }
        61 => {
            let (w, l, r) = x.eig_left_right();
            vec![w, l, r]
        }
        62 => {
            let (u, s, v) = x.svd(rng.below(2) == 0);
            vec![u, s, v]
        }
        63 => one(match rng.below(6) {
            0 => x.pinv(),
            1 => x.inv(),
            2 => x.det(),
            3 => x.solve(y),
            4 => x.matrix_rank(),
            _ => x.cond(),
        }),
        64 => {
            let (a, b, c, d) = x.lstsq(y, Some(number(rng)));
            vec![a, b, c, d]
        }
        65 => {
            let kind = *rng.pick(&FftKind::ALL);
            one(x.fft(kind, &sizes(rng)))
        }
        66 => {
            let widths: Vec<(usize, usize)> =
                (0..rng.below(5)).map(|_| (size(rng), size(rng))).collect();
            let mode = match rng.below(5) {
                0 => PadMode::Constant(number(rng)),
                1 => PadMode::Edge,
                2 => PadMode::Reflect,
                3 => PadMode::Symmetric,
                _ => PadMode::Wrap,
            };
            one(x.pad_with(&widths, mode))
        }
        67 => one(x.astype(dtype(rng))),
        68 => one(x.bitcast(*rng.pick(&DType::ALL))),
        69 => one(match rng.below(8) {
            0 => x + y,
            1 => x - y,
            2 => x * y,
            3 => x / y,
            4 => x.pow(y),
            5 => x.atan2(y),
            6 => x.remainder(y),
            _ => x.floor_divide(y),
        }),
        70 => one(match rng.below(4) {
            0 => x.less(y),
            1 => x.equal(y),
            2 => x.logical_and(y),
            _ => x.shift_left(y),
        }),
        71 => one(x.select(y, z)),
        72 => one(x.clip(y, z)),
        73 => one(match rng.below(8) {
            0 => x.exp(),
            1 => x.log(),
            2 => x.sqrt(),
            3 => x.lgamma(),
            4 => x.abs(),
            5 => x.real(),
            6 => x.logical_not(),
            _ => x.conj(),
        }),
        74 => {
            let method = *rng.pick(&[
                QuantileMethod::Linear,
                QuantileMethod::Lower,
                QuantileMethod::Higher,
                QuantileMethod::Nearest,
                QuantileMethod::Midpoint,
            ]);
            let q: Vec<f64> = (0..rng.below(3)).map(|_| number(rng)).collect();
            let axis = if rng.below(2) == 0 { Some(ax) } else { None };
            one(match rng.below(3) {
                0 => x.quantile(&q, axis, method),
                1 => x.median(axis),
                _ => x.nanquantile(&q, axis, method),
            })
        }
        75 => one(match rng.below(2) {
            0 => x.cov(rng.below(2) == 0, size(rng)),
            _ => x.corrcoef(rng.below(2) == 0),
        }),
        76 => one(x.searchsorted(y, rng.below(2) == 0)),
        77 => one(x.interp(y, z, Some(number(rng)), None)),
        78 => one(Tensor::einsum(&einsum_spec(rng), &[x, y])),
        79 => {
            let at = x.at(y).mode(*rng.pick(&[
                IndexMode::Clip,
                IndexMode::FillOrDrop,
                IndexMode::PromiseInBounds,
            ]));
            one(match rng.below(4) {
                0 => at.get(),
                1 => at.set(z),
                2 => at.add(z),
                _ => at.max(z),
            })
        }
        80 => one(match rng.below(3) {
            0 => x.matrix_power(signed(rng)),
            1 => x.expm(),
            _ => x.matrix_norm(*rng.pick(&[
                MatrixNorm::Frobenius,
                MatrixNorm::Nuclear,
                MatrixNorm::MaxColumnSum,
                MatrixNorm::MinRowSum,
            ])),
        }),
        81 => Tensor::meshgrid(&[x, y], rng.below(2) == 0),
        82 => one(match rng.below(4) {
            0 => Tensor::eye(dtype(rng), size(rng)),
            1 => Tensor::linspace(dtype(rng), number(rng), number(rng), size(rng)),
            2 => Tensor::iota(dtype(rng), sizes(rng), rng.below(5)),
            _ => Tensor::full(dtype(rng), sizes(rng), number(rng)),
        }),
        83 => one(match rng.below(5) {
            0 => nn::softmax(x, a32),
            1 => nn::log_softmax(x, a32),
            2 => nn::logsumexp(x, ferrax::Axes::List(axes(rng, x.ndim()))),
            3 => nn::gelu(x, rng.below(2) == 0),
            _ => nn::softmax_cross_entropy_with_integer_labels(x, y),
        }),
        84 => one(nn::layer_norm(x, y, z, number(rng))),
        _ => one(x.nan_to_num(number(rng), number(rng), number(rng))),
    }
}

/// How far a case got.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reached {
    /// Tracing returned an error (a wrong use, caught).
    Refused,
    /// Traced, too large to run.
    Traced,
    /// Run by the interpreter.
    Interpreted,
    /// Compiled and run on the CPU too.
    Compiled,
}

/// How far case `seed` got, or what went wrong.
fn run_case(seed: u64) -> Result<Reached, String> {
    let mut rng = Rng::new(seed);
    let inputs: Vec<Tensor> = (0..1 + rng.below(3))
        .map(|_| {
            let dims: Vec<usize> = (0..rng.below(5)).map(|_| dim(&mut rng)).collect();
            Tensor::spec(dtype(&mut rng), dims)
        })
        .collect();
    let log = RefCell::new(Vec::new());
    let traced = catch_unwind(AssertUnwindSafe(|| {
        trace(
            |inputs: Vec<Tensor>| {
                let mut pool = inputs;
                for _ in 0..1 + rng.below(CHAIN) {
                    let operand = |rng: &mut Rng| pool[rng.below(pool.len())].clone();
                    let (x, y, z) = (operand(&mut rng), operand(&mut rng), operand(&mut rng));
                    let results = call(&mut rng, &log, [&x, &y, &z]);
                    // A failed result fails what reads it (and the case, if it is the last).
                    pool.extend(results);
                }
                pool.pop().into_iter().collect::<Vec<Tensor>>()
            },
            &inputs,
        )
    }));
    let calls = || log.borrow().join("; ");
    let func = match traced {
        Err(_) => return Err(format!("seed {seed}: tracing panicked after {}", calls())),
        Ok(Err(_)) => return Ok(Reached::Refused),
        Ok(Ok(func)) => func,
    };
    let elements: usize = (0..func.num_values())
        .filter_map(|v| func.value_type(ferrax::ir::ValueId(v as u32)))
        .map(|t| t.numel())
        .fold(0, usize::saturating_add);
    if elements > RUN_ELEMENTS {
        return Ok(Reached::Traced);
    }
    let args = common::rng::any_inputs(&func, seed);
    let want = match catch_unwind(AssertUnwindSafe(|| interpret(&func, &args))) {
        Err(_) => {
            return Err(format!(
                "seed {seed}: the interpreter panicked after {}\n{func}",
                calls()
            ))
        }
        Ok(result) => result,
    };
    if !seed.is_multiple_of(4) {
        return Ok(Reached::Interpreted);
    }
    let cpu = catch_unwind(AssertUnwindSafe(|| {
        CpuExecutable::compile(&func).map(|exe| exe.run(&args))
    }));
    let types =
        |arrays: &[ferrax::Array]| arrays.iter().map(|a| a.ty().clone()).collect::<Vec<_>>();
    match (cpu, want) {
        (Err(_), _) => Err(format!(
            "seed {seed}: the CPU backend panicked after {}\n{func}",
            calls()
        )),
        (Ok(Ok(Ok(got))), Ok(want)) if types(&got) != types(&want) => Err(format!(
            "seed {seed}: the CPU backend's result types are not the interpreter's after {}\n{func}",
            calls()
        )),
        _ => Ok(Reached::Compiled),
    }
}

#[test]
fn random_api_calls_never_panic() {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let count: u64 = env("FERRAX_FUZZ_INPUTS").unwrap_or(DEFAULT_INPUTS);
    let start: u64 = env("FERRAX_FUZZ_SEED").unwrap_or(1);
    let verbose = std::env::var_os("FERRAX_FUZZ_TRACE").is_some();
    let (mut failures, mut reached) = (Vec::new(), Vec::new());
    for seed in start..start + count {
        if verbose {
            eprintln!("case {seed}");
        }
        match run_case(seed) {
            Ok(r) => reached.push(r),
            Err(failure) => failures.push(failure),
        }
    }
    let tally = |r: Reached| reached.iter().filter(|&&x| x == r).count();
    eprintln!(
        "fuzz_api: {count} cases from seed {start}: {} refused while tracing, {} traced too \
         large to run, {} interpreted, {} also compiled and run on the CPU; {} failed",
        tally(Reached::Refused),
        tally(Reached::Traced),
        tally(Reached::Interpreted),
        tally(Reached::Compiled),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
