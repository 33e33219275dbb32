//! Indexing by values through the `Tensor` API: the results of `take`, `take_along_axis`,
//! `at(..)`, the dynamic slices, `one_hot` and `argmax`/`argmin` against values worked out
//! by hand (JAX's semantics for negative and out-of-range indices), the same programs under
//! `jit` on the CPU backend, and the errors bad indices give.
#![allow(clippy::unwrap_used)]

use ferrax::{jit, nn, DType, IndexMode, Tensor};

fn f32s(shape: &[usize], data: Vec<f32>) -> Tensor {
    Tensor::from_vec(shape.to_vec(), data)
}

fn i32s(shape: &[usize], data: Vec<i32>) -> Tensor {
    Tensor::from_vec(shape.to_vec(), data)
}

/// `f` evaluated eagerly and under `jit`; both must give `want`.
fn check(
    name: &str,
    f: impl Fn(&Tensor, &Tensor) -> Tensor + Copy + Send + Sync,
    x: Tensor,
    i: Tensor,
    want: Vec<f32>,
    shape: &[usize],
) {
    let eager = f(&x, &i);
    assert_eq!(eager.shape(), shape, "{name}: eager shape");
    assert_eq!(eager.to_vec::<f32>().unwrap(), want, "{name}: eager");
    let compiled = jit(move |(x, i): (Tensor, Tensor)| f(&x, &i))
        .call((x, i))
        .unwrap();
    assert_eq!(compiled.to_vec::<f32>().unwrap(), want, "{name}: jit");
}

fn grid() -> Tensor {
    // [[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]]
    f32s(
        &[4, 3],
        (0..12).map(|k| (10 * (k / 3) + k % 3) as f32).collect(),
    )
}

#[test]
fn take_rows_and_columns_with_clamping_and_negative_indices() {
    let idx = i32s(&[2, 2], vec![1, -1, 9, 0]);
    check(
        "take axis 0",
        |x, i| x.take_with(i, 0, IndexMode::Clip),
        grid(),
        idx.clone(),
        vec![10., 11., 12., 30., 31., 32., 30., 31., 32., 0., 1., 2.],
        &[2, 2, 3],
    );
    check(
        "take axis 1",
        |x, i| x.take_with(i, 1, IndexMode::Clip),
        grid(),
        idx,
        vec![
            1., 2., 2., 0., 11., 12., 12., 10., 21., 22., 22., 20., 31., 32., 32., 30.,
        ],
        &[4, 2, 2],
    );
}

#[test]
fn take_fills_out_of_range_reads_as_jnp_take_does() {
    let idx = i32s(&[3], vec![-4, 3, -5]);
    let f = |x: &Tensor, i: &Tensor| x.take(i, 0);
    for y in [
        f(&grid(), &idx),
        jit(move |(x, i): (Tensor, Tensor)| f(&x, &i))
            .call((grid(), idx.clone()))
            .unwrap(),
    ] {
        let v = y.to_vec::<f32>().unwrap();
        // -4 is row 0; 3 is row 3; -5 is out of range, a row of NaN.
        assert_eq!(&v[..6], &[0., 1., 2., 30., 31., 32.]);
        assert!(v[6..].iter().all(|x| x.is_nan()), "{v:?}");
    }
    let ints = i32s(&[2, 2], vec![1, 2, 3, 4]).take(&i32s(&[2], vec![1, 2]), 0);
    assert_eq!(
        ints.to_vec::<i32>().unwrap(),
        vec![3, 4, i32::MIN, i32::MIN]
    );
    // Writes in clip mode clamp instead of dropping; reads in fill mode fill.
    let x = f32s(&[3], vec![0., 0., 0.]);
    let i = i32s(&[2], vec![5, -9]);
    assert_eq!(
        x.at(&i)
            .mode(IndexMode::Clip)
            .add(1.0)
            .to_vec::<f32>()
            .unwrap(),
        vec![1., 0., 1.]
    );
    assert_eq!(x.at(&i).add(1.0).to_vec::<f32>().unwrap(), vec![0., 0., 0.]);
    let filled = x
        .at(&i)
        .mode(IndexMode::FillOrDrop)
        .get()
        .to_vec::<f32>()
        .unwrap();
    assert!(filled.iter().all(|v| v.is_nan()));
}

#[test]
fn take_along_axis_picks_per_row() {
    let idx = i32s(&[4, 1], vec![2, 0, 1, -1]);
    check(
        "take_along_axis",
        |x, i| x.take_along_axis(i, 1),
        grid(),
        idx,
        vec![2., 10., 21., 32.],
        &[4, 1],
    );
}

#[test]
fn at_updates_follow_jax() {
    let x = f32s(&[4], vec![1., 2., 3., 4.]);
    // Index 1 twice, 7 is out of range (dropped), -1 is the last element.
    let idx = i32s(&[4], vec![1, 7, 1, -1]);
    let u = f32s(&[4], vec![5., 6., 0.5, -2.]);
    let run = |f: fn(&Tensor, &Tensor, &Tensor) -> Tensor| {
        let eager = f(&x, &idx, &u).to_vec::<f32>().unwrap();
        let compiled = jit(move |(x, i, u): (Tensor, Tensor, Tensor)| f(&x, &i, &u))
            .call((x.clone(), idx.clone(), u.clone()))
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(eager, compiled);
        eager
    };
    assert_eq!(run(|x, i, u| x.at(i).set(u)), vec![1., 0.5, 3., -2.]);
    assert_eq!(run(|x, i, u| x.at(i).add(u)), vec![1., 7.5, 3., 2.]);
    assert_eq!(run(|x, i, u| x.at(i).mul(u)), vec![1., 5., 3., -8.]);
    assert_eq!(run(|x, i, u| x.at(i).min(u)), vec![1., 0.5, 3., -2.]);
    assert_eq!(run(|x, i, u| x.at(i).max(u)), vec![1., 5., 3., 4.]);
    assert_eq!(run(|x, i, _| x.at(i).get()), vec![2., 4., 2., 4.]);
    // A scalar update broadcasts; rows of a matrix are updated whole.
    let m = grid().at(&i32s(&[2], vec![0, 0])).add(1.0);
    assert_eq!(&m.to_vec::<f32>().unwrap()[..4], &[2., 3., 4., 10.]);
}

#[test]
fn dynamic_slices_clamp_their_start() {
    let i = i32s(&[], vec![3]);
    let j = i32s(&[], vec![-2]);
    let s = grid().dynamic_slice(&[&i, &j], &[2, 2]);
    // Row 3 clamps to 2 so that two rows fit; column -2 is 1.
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![21., 22., 31., 32.]);
    let compiled = jit(|(x, i): (Tensor, Tensor)| x.dynamic_slice(&[&i, &i], &[2, 2]))
        .call((grid(), i32s(&[], vec![1])))
        .unwrap();
    assert_eq!(compiled.to_vec::<f32>().unwrap(), vec![11., 12., 21., 22.]);
    let u = f32s(&[1, 2], vec![-1., -2.]);
    let w = grid().dynamic_update_slice(&u, &[&i, &i]);
    assert_eq!(&w.to_vec::<f32>().unwrap()[9..], &[30., -1., -2.]);
}

#[test]
fn one_hot_and_arg_extrema() {
    let labels = i32s(&[3], vec![2, 0, 5]);
    let oh = labels.one_hot(3, DType::F32);
    assert_eq!(oh.shape(), &[3, 3]);
    assert_eq!(
        oh.to_vec::<f32>().unwrap(),
        vec![0., 0., 1., 1., 0., 0., 0., 0., 0.]
    );
    let x = f32s(&[2, 4], vec![1., 5., 5., -1., f32::NAN, 2., 9., 0.]);
    assert_eq!(x.argmax(1).to_vec::<i32>().unwrap(), vec![1, 0]);
    assert_eq!(x.argmin(1).to_vec::<i32>().unwrap(), vec![3, 0]);
    assert_eq!(x.argmax(0).to_vec::<i32>().unwrap(), vec![1, 0, 1, 1]);
    let compiled = jit(|x: Tensor| x.argmax(-1)).call(x).unwrap();
    assert_eq!(compiled.to_vec::<i32>().unwrap(), vec![1, 0]);
}

#[test]
fn zero_size_indexing() {
    let empty = i32s(&[0], vec![]);
    assert_eq!(grid().take(&empty, 0).shape(), &[0, 3]);
    let x = grid().at(&empty).add(f32s(&[0, 3], vec![]));
    assert_eq!(x.to_vec::<f32>().unwrap(), grid().to_vec::<f32>().unwrap());
    let compiled = jit(|(x, i): (Tensor, Tensor)| x.take(&i, 0).sum(..))
        .call((grid(), empty))
        .unwrap();
    assert_eq!(compiled.to_vec::<f32>().unwrap(), vec![0.0]);
}

#[test]
fn bad_indices_are_errors_naming_the_op_and_line() {
    let f = |(x, i): (Tensor, Tensor)| x.take(&i, 0);
    let err = jit(f)
        .call((grid(), f32s(&[1], vec![0.0])))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("take") && err.contains("integer") && err.contains("indexing.rs"),
        "{err}"
    );
    let err = grid()
        .take(&i32s(&[1], vec![0]), 2)
        .to_vec::<f32>()
        .unwrap_err()
        .to_string();
    assert!(err.contains("axis 2"), "{err}");
    let err = grid()
        .take_along_axis(&i32s(&[2], vec![0, 1]), 0)
        .to_vec::<f32>()
        .unwrap_err()
        .to_string();
    assert!(err.contains("rank"), "{err}");
    let i = i32s(&[], vec![0]);
    let err = grid()
        .dynamic_slice(&[&i], &[1, 1])
        .to_vec::<f32>()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dynamic_slice") && err.contains("start indices"),
        "{err}"
    );
    let err = grid()
        .dynamic_slice(&[&i, &i], &[5, 1])
        .to_vec::<f32>()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dynamic_slice") && err.contains("[5, 1]"),
        "{err}"
    );
    let err = grid()
        .at(&i32s(&[2], vec![0, 1]))
        .add(f32s(&[3, 3], vec![0.0; 9]))
        .to_vec::<f32>()
        .unwrap_err()
        .to_string();
    assert!(err.contains("broadcast"), "{err}");
}

/// A small deterministic generator for the random programs below.
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

    /// An index in `-n - 2 ..= n + 1`: negative, in range and out of range.
    fn index(&mut self, n: usize) -> i32 {
        self.below(2 * n + 4) as i32 - n as i32 - 2
    }
}

#[test]
fn random_gathers_and_scatters_match_the_interpreter_bit_for_bit_on_both_backends() {
    let mut rng = Rng(0x5eed);
    for case in 0..60 {
        // Every fourth case is large enough for the threaded paths.
        let dims: Vec<usize> = if case % 4 == 3 {
            vec![300 + rng.below(40), 256]
        } else {
            (0..1 + rng.below(3)).map(|_| 1 + rng.below(5)).collect()
        };
        let n: usize = dims.iter().product();
        let x = f32s(
            &dims,
            (0..n)
                .map(|k| ((k * 37 % 101) as f32 - 50.0) / 7.0)
                .collect(),
        );
        let axis = rng.below(dims.len());
        let count = 1 + rng.below(if case % 4 == 3 { 400 } else { 6 });
        let idx = i32s(
            &[count],
            (0..count).map(|_| rng.index(dims[axis])).collect(),
        );
        let mut update_dims = vec![count];
        update_dims.extend_from_slice(&dims[1..]);
        let m: usize = update_dims.iter().product();
        let u = f32s(
            &update_dims,
            (0..m)
                .map(|k| ((k * 53 % 97) as f32 - 48.0) / 5.0)
                .collect(),
        );
        let op = rng.below(7);
        let f = move |(x, i, u): (Tensor, Tensor, Tensor)| match op {
            0 => x.take(&i, axis as i64),
            1 => x.at(&i).set(&u),
            2 => x.at(&i).add(&u),
            3 => x.at(&i).mul(&u),
            4 => x.at(&i).min(&u),
            5 => x.at(&i).max(&u),
            _ => x.take(&i, 0).astype(DType::F64).astype(DType::F32),
        };
        let eager = f((x.clone(), idx.clone(), u.clone()))
            .to_vec::<f32>()
            .unwrap();
        let specs = (
            Tensor::spec(DType::F32, x.shape().to_vec()),
            Tensor::spec(DType::I32, idx.shape().to_vec()),
            Tensor::spec(DType::F32, u.shape().to_vec()),
        );
        let arrays: Vec<ferrax::Array> = [&x, &idx, &u]
            .iter()
            .map(|t| t.to_array().unwrap())
            .collect();
        let compiled = jit(f).call((x, idx, u)).unwrap().to_vec::<f32>().unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&eager),
            bits(&compiled),
            "case {case}: op {op} on {dims:?}"
        );
        // The same program on the emulated GPU: row gathers in kernels, row scatters by the
        // rank and apply entries, the rest on the host.
        let func = ferrax::compiler::simplify::simplify(&ferrax::trace(f, &specs).unwrap())
            .unwrap()
            .0;
        let emulator = ferrax_ptx_emu::Emulator::default();
        let gpu = ferrax::compiler::backend::gpu::GpuProgram::compile(
            &func,
            &emulator,
            ferrax::compiler::backend::gpu::GpuOptions::HIGHEST,
        )
        .unwrap();
        let on_gpu = gpu.run(&arrays).unwrap()[0].to_vec::<f32>().unwrap();
        assert_eq!(
            bits(&eager),
            bits(&on_gpu),
            "case {case}: op {op} on {dims:?} (emulated GPU)"
        );
    }
}

#[test]
fn an_embedding_lookup_and_its_positional_add_are_one_cpu_kernel() {
    let f = jit(|(t, p, i): (Tensor, Tensor, Tensor)| nn::embedding(&t, &i) + p);
    let specs = (
        Tensor::spec(DType::F32, [50, 8]),
        Tensor::spec(DType::F32, [4, 8]),
        Tensor::spec(DType::I32, [3, 4]),
    );
    let lowered = f.lower(&specs).unwrap();
    let fused = lowered.fused().unwrap_or_default();
    // The indices' normalisation, then one kernel reading rows by index.
    assert_eq!(fused.matches("// kernel").count(), 2, "{fused}");
    assert!(!fused.contains("// indexing"), "{fused}");
    let kernels = lowered.kernels().join("\n");
    assert!(
        kernels.contains("f32 [clamp(#0[i / 8], 0, 50 - 1) * 8 + i % 8] = %0"),
        "{kernels}"
    );
    let table = f32s(&[50, 8], (0..400).map(|k| k as f32 * 0.25).collect());
    let pos = f32s(&[4, 8], (0..32).map(|k| -(k as f32)).collect());
    let ids = i32s(&[3, 4], vec![0, 49, -1, 70, 3, -60, 7, 7, 25, 1, 2, 48]);
    let eager = (nn::embedding(&table, &ids) + &pos)
        .to_vec::<f32>()
        .unwrap();
    let compiled = f.call((table, pos, ids)).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(eager, compiled);
}

/// Embedding lookups fused with positions and a per-token scale, large enough to run in
/// parts on every thread: the kernel's vector loop runs by chunks of rows (row lengths 64, 96
/// and 128 share divisors of four steps or more) or, at width 40, steps positions; each gives
/// the interpreter's result bit for bit, with indices clamped at both ends.
#[test]
fn embedding_lookups_by_chunks_match_the_interpreter_across_threads() {
    for width in [64, 96, 128, 40] {
        let (vocab, batch, time) = (300, 4, 512);
        let f = jit(|(t, p, s, i): (Tensor, Tensor, Tensor, Tensor)| {
            (nn::embedding(&t, &i) + p) * s.reshape([4, 512, 1])
        });
        let table = f32s(
            &[vocab, width],
            (0..vocab * width)
                .map(|k| (k % 1013) as f32 * 0.125)
                .collect(),
        );
        let pos = f32s(
            &[time, width],
            (0..time * width).map(|k| -((k % 977) as f32)).collect(),
        );
        let scale = f32s(
            &[batch, time],
            (0..batch * time)
                .map(|k| 1.0 + (k % 7) as f32 / 8.0)
                .collect(),
        );
        let ids = i32s(
            &[batch, time],
            (0..batch * time)
                .map(|k| (k as i32 * 7919) % (vocab as i32 + 60) - 30)
                .collect(),
        );
        let eager = ((nn::embedding(&table, &ids) + &pos) * scale.reshape([4, 512, 1]))
            .to_vec::<f32>()
            .unwrap();
        let compiled = f.call((table, pos, scale, ids)).unwrap();
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(
            bits(compiled.to_vec::<f32>().unwrap()),
            bits(eager),
            "width {width}"
        );
    }
}

/// The Cranelift code of a chunked gather kernel: per chunk, the row's index loaded and
/// clamped and each buffer's address computed once; per step, pointers advanced and vectors
/// loaded at offsets from them.
#[test]
fn chunked_gather_kernel_clif_snapshot() {
    let f = jit(|(t, p, i): (Tensor, Tensor, Tensor)| nn::embedding(&t, &i) + p);
    let specs = (
        Tensor::spec(DType::F32, [50, 64]),
        Tensor::spec(DType::F32, [4, 64]),
        Tensor::spec(DType::I32, [2, 4]),
    );
    let lowered = f.lower(&specs).unwrap();
    let listing = lowered.kernels().join("\n");
    assert!(listing.contains("block"), "{listing}");
    insta::assert_snapshot!("chunked_gather_kernel", listing);
}

#[test]
fn nn_embedding_and_its_gradient() {
    use ferrax::grad;
    let table = f32s(&[5, 2], (0..10).map(|k| k as f32).collect());
    let ids = i32s(&[2, 2], vec![4, 0, 4, -1]);
    let rows = nn::embedding(&table, &ids);
    assert_eq!(rows.shape(), &[2, 2, 2]);
    assert_eq!(
        rows.to_vec::<f32>().unwrap(),
        vec![8., 9., 0., 1., 8., 9., 8., 9.]
    );
    // Row 4 is looked up three times, row 0 once.
    let g = grad(|t: Tensor| nn::embedding(&t, &ids).sum(..))(table);
    assert_eq!(
        g.to_vec::<f32>().unwrap(),
        vec![1., 1., 0., 0., 0., 0., 0., 0., 3., 3.]
    );
    let oh = nn::one_hot(&i32s(&[2], vec![1, 3]), 3, DType::F32);
    assert_eq!(oh.to_vec::<f32>().unwrap(), vec![0., 1., 0., 0., 0., 0.]);
}

/// Gathers and scatters as the API builds them, each with one field of its dimension numbers
/// or one operand dimension nudged (often ill-formed): the shape rules answer every one with
/// a type or an error, every well-typed one differentiates in both modes, and evaluates on
/// the interpreter, the CPU backend and the emulated GPU alike, whatever the index values
/// (the extremes included), with no panic.
#[test]
fn mutated_dimension_numbers_never_panic() {
    use ferrax::ir::{infer_type, Op, TensorType};
    use ferrax::runtime::eval_op;
    use ferrax::Array;
    let mut rng = Rng(0xd1ce);
    let (mut typed, mut rejected) = (0, 0);
    for case in 0..1200 {
        let rank = 1 + rng.below(3);
        let x_dims: Vec<usize> = (0..rank).map(|_| 1 + rng.below(3)).collect();
        let i_dims: Vec<usize> = (0..rng.below(3)).map(|_| 1 + rng.below(3)).collect();
        let axis = rng.below(rank);
        let x_spec = Tensor::spec(DType::F32, x_dims.clone());
        let i_spec = Tensor::spec(DType::I32, i_dims.clone());
        let mut u_dims = i_dims.clone();
        u_dims.extend_from_slice(&x_dims[1..]);
        let u_spec = Tensor::spec(DType::F32, u_dims);
        let kind = case % 7;
        let traced = ferrax::trace(
            move |(x, i, u): (Tensor, Tensor, Tensor)| match kind {
                0 => x.take_with(&i, axis as i64, IndexMode::Clip),
                1 => x.at(&i).set(&u),
                2 => x.at(&i).add(&u),
                3 => x.at(&i).mul(&u),
                4 => x.at(&i).min(&u),
                5 => x.at(&i).max(&u),
                _ => x.take_along_axis(&i.reshape([-1]).broadcast_to(x.shape()), axis as i64),
            },
            &(x_spec, i_spec, u_spec),
        );
        let Ok(func) = traced else { continue };
        let Some(ins) = func
            .body
            .iter()
            .find(|ins| matches!(ins.op, Op::Gather(_) | Op::Scatter(_)))
        else {
            continue;
        };
        let mut types: Vec<TensorType> = ins
            .args
            .iter()
            .map(|&a| func.value_type(a).unwrap().clone())
            .collect();
        let mut op = ins.op.clone();
        let nudge = |v: &mut Vec<usize>, rng: &mut Rng| match rng.below(3) {
            0 => v.push(rng.below(4)),
            1 => {
                v.pop();
            }
            _ => {
                if let Some(x) = v.last_mut() {
                    *x = (*x + 1 + rng.below(2)) % 5;
                }
            }
        };
        match (&mut op, rng.below(8)) {
            (Op::Gather(g), 0) => nudge(&mut g.offset_dims, &mut rng),
            (Op::Gather(g), 1) => nudge(&mut g.collapsed_slice_dims, &mut rng),
            (Op::Gather(g), 2) => nudge(&mut g.start_index_map, &mut rng),
            (Op::Gather(g), 3) => nudge(&mut g.slice_sizes, &mut rng),
            (Op::Gather(g), 4) => nudge(&mut g.operand_batching_dims, &mut rng),
            (Op::Gather(g), 5) => g.index_vector_dim = rng.below(4),
            (Op::Scatter(s), 0) => nudge(&mut s.update_window_dims, &mut rng),
            (Op::Scatter(s), 1) => nudge(&mut s.inserted_window_dims, &mut rng),
            (Op::Scatter(s), 2) => nudge(&mut s.scatter_dims_to_operand_dims, &mut rng),
            (Op::Scatter(s), 3) => nudge(&mut s.input_batching_dims, &mut rng),
            (Op::Scatter(s), 4) => s.index_vector_dim = rng.below(4),
            (_, 6) => {
                let k = rng.below(types.len());
                let mut dims = types[k].dims().to_vec();
                nudge(&mut dims, &mut rng);
                types[k] = types[k].with_shape(dims);
            }
            _ => {}
        }
        let refs: Vec<&TensorType> = types.iter().collect();
        if infer_type(&op, &refs).is_err() {
            rejected += 1;
            continue;
        }
        typed += 1;
        let extreme = [i32::MIN, -3, -1, 0, 1, 2, 7, i32::MAX];
        let arrays: Vec<Array> = types
            .iter()
            .map(|t| match t.dtype {
                DType::I32 => Array::from_vec(
                    t.dims().to_vec(),
                    (0..t.numel())
                        .map(|_| extreme[rng.below(8)])
                        .collect::<Vec<i32>>(),
                )
                .unwrap(),
                _ => Array::from_vec(
                    t.dims().to_vec(),
                    (0..t.numel())
                        .map(|k| k as f32 * 0.5 - 1.0)
                        .collect::<Vec<f32>>(),
                )
                .unwrap(),
            })
            .collect();
        let refs: Vec<&Array> = arrays.iter().collect();
        let eager = eval_op(&op, &refs).unwrap();
        let mut b = ferrax::ir::FuncBuilder::new("f");
        let params: Vec<_> = types.iter().map(|t| b.param(t.clone())).collect();
        let y = b.push(op.clone(), &params).unwrap();
        let func = b.finish(vec![y]);
        // Both derivatives build well-typed programs for every well-typed gather and scatter.
        ferrax::compiler::autodiff::vjp(&func).unwrap_or_else(|e| panic!("vjp of {op:?}: {e}"));
        ferrax::compiler::autodiff::jvp(&func).unwrap_or_else(|e| panic!("jvp of {op:?}: {e}"));
        let compiled = ferrax::compiler::backend::CpuExecutable::compile(&func)
            .unwrap()
            .run(&arrays)
            .unwrap();
        assert_eq!(
            compiled[0].to_vec::<f32>().unwrap(),
            eager.to_vec::<f32>().unwrap(),
            "{op:?} on {types:?}"
        );
        let emulator = ferrax_ptx_emu::Emulator::default();
        let on_gpu = ferrax::compiler::backend::gpu::GpuProgram::compile(
            &func,
            &emulator,
            ferrax::compiler::backend::gpu::GpuOptions::HIGHEST,
        )
        .unwrap()
        .run(&arrays)
        .unwrap();
        assert_eq!(
            on_gpu[0].to_vec::<f32>().unwrap(),
            eager.to_vec::<f32>().unwrap(),
            "{op:?} on {types:?} (emulated GPU)"
        );
    }
    assert!(
        typed > 200 && rejected > 100,
        "{typed} typed, {rejected} rejected"
    );
}
