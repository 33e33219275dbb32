//! Ahead-of-time artifacts of CPU executables and (at the end, on the emulated GPU) of GPU
//! programs: every program of the test corpus, the gradient programs and (on the CPU) the
//! benchmark workloads, written to an artifact and loaded back with no code generation,
//! computes the compiled program's results bit for bit; and no damaged, foreign or future
//! artifact is loaded, each refused with an error saying why.
#![allow(clippy::unwrap_used)]

mod common;

use ciborium::Value;
use common::fusion::float_bits;
use ferrax::aot_runtime::ArtifactTarget;
use ferrax::compiler::backend::{inspect_artifact, ArtifactError, CpuExecutable};
use ferrax::compiler::simplify::simplify;
use ferrax::{Array, DType, Tensor};

fn compiled(func: &ferrax::Func) -> CpuExecutable {
    let (simple, _) = simplify(func).unwrap();
    CpuExecutable::compile(&simple).unwrap()
}

#[test]
fn artifacts_compute_what_their_executables_compute() {
    let mut programs = common::corpus();
    programs.extend(common::gradient_programs());
    programs.extend(common::benchmark_programs());
    let mut kernels = 0;
    for (name, func) in programs {
        let exe = compiled(&func);
        let bytes = exe.to_artifact().unwrap();
        let loaded = CpuExecutable::from_artifact(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(loaded.fused(), exe.fused(), "{name}");
        assert_eq!(loaded.memory(), exe.memory(), "{name}");
        let args = common::inputs(&func, 7);
        let want = exe.run(&args).unwrap();
        let got = loaded.run(&args).unwrap();
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            if g.dtype().is_float() {
                assert_eq!(float_bits(g), float_bits(w), "{name} output {k}");
            } else {
                assert_eq!(g, w, "{name} output {k}");
            }
        }
        kernels += loaded.kernels().count();
        // The same artifact again from the loaded executable: nothing was lost on the way.
        assert_eq!(loaded.to_artifact().unwrap(), bytes, "{name}");
    }
    assert!(kernels >= 50, "only {kernels} kernels");
}

/// A program with a kernel that calls the host (f64 transcendentals), one with vector
/// constants, and infinite and NaN constants (which the plan must carry exactly).
fn sample() -> (CpuExecutable, Vec<Array>) {
    let f = |(x, y): (Tensor, Tensor)| {
        let masked = x.greater(Tensor::scalar(0.0f32)).select(
            (x.sin() * 2.5 + 1.0).exp(),
            Tensor::full(DType::F32, [300], f64::NEG_INFINITY),
        );
        let nan = Tensor::full(DType::F64, [40], f64::NAN);
        (masked, (y.cos() * 0.5).tanh().maximum(&nan))
    };
    let specs = (
        Tensor::spec(DType::F32, [300]),
        Tensor::spec(DType::F64, [40]),
    );
    let func = ferrax::trace(f, &specs).unwrap();
    let args = common::inputs(&func, 3);
    (compiled(&func), args)
}

#[test]
fn inspect_reads_the_signature_target_and_plan() {
    let (exe, args) = sample();
    let bytes = exe.to_artifact().unwrap();
    let loaded = CpuExecutable::from_artifact(&bytes).unwrap();
    let (got, want) = (loaded.run(&args).unwrap(), exe.run(&args).unwrap());
    assert_eq!(float_bits(&got[0]), float_bits(&want[0]));
    assert_eq!(float_bits(&got[1]), float_bits(&want[1]));
    assert!(got[0].to_f64_vec().contains(&f64::NEG_INFINITY));
    assert!(got[1].to_f64_vec().iter().all(|v| v.is_nan()));
    let info = inspect_artifact(&bytes).unwrap();
    assert_eq!(info.inputs.len(), 2);
    assert_eq!(info.outputs.len(), 2);
    match &info.target {
        ArtifactTarget::Cpu(t) => assert_eq!(t.arch, std::env::consts::ARCH),
        other => panic!("a CPU executable's artifact targets {other}"),
    }
    assert!(info.kernels.len() >= 2 && info.code_bytes > 0, "{info:?}");
    assert_eq!(info.fused, exe.fused());
}

/// Every byte flipped in turn (over a sample of positions spread through the file), and every
/// truncation: each is an error, never a crash and never code run.
#[test]
fn damaged_artifacts_are_refused() {
    let (exe, _) = sample();
    let bytes = exe.to_artifact().unwrap();
    let step = (bytes.len() / 400).max(1);
    for at in (0..bytes.len()).step_by(step) {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x5A;
        let e = CpuExecutable::from_artifact(&damaged).err();
        assert!(
            matches!(
                e,
                Some(
                    ArtifactError::NotAnArtifact
                        | ArtifactError::Version { .. }
                        | ArtifactError::Corrupted
                )
            ),
            "byte {at}: {e:?}"
        );
    }
    for len in (0..bytes.len()).step_by(step) {
        assert!(
            CpuExecutable::from_artifact(&bytes[..len]).is_err(),
            "{len} bytes"
        );
    }
}

/// Re-sealed with a correct hash: the checks after the hash still refuse a file from a future
/// version, for another machine, or with a plan that does not fit its program.
#[test]
fn foreign_and_future_artifacts_are_refused() {
    let (exe, args) = sample();
    let bytes = exe.to_artifact().unwrap();
    let mut future = bytes.clone();
    let next = ferrax::aot_runtime::FORMAT_VERSION + 1;
    future[8..12].copy_from_slice(&next.to_le_bytes());
    let e = CpuExecutable::from_artifact(&future).err().unwrap();
    assert!(e.to_string().contains(&format!("version {next}")), "{e}");

    // The plan decoded, one field changed, encoded and sealed again.
    let edit = |change: &dyn Fn(&mut Value)| -> Vec<u8> {
        let (plan, code) = sections(&bytes);
        let mut plan: Value = ciborium::from_reader(plan).unwrap();
        change(&mut plan);
        let mut encoded = Vec::new();
        ciborium::into_writer(&plan, &mut encoded).unwrap();
        reseal(&encoded, code)
    };
    let other_arch =
        edit(&|p| *field(field(cpu(p), "target"), "arch") = Value::Text("riscv64".into()));
    let e = CpuExecutable::from_artifact(&other_arch).err().unwrap();
    assert!(e.to_string().contains("riscv64"), "{e}");
    let unknown_feature = edit(&|p| {
        let Value::Array(features) = field(field(cpu(p), "target"), "features") else {
            panic!("features")
        };
        features.push(Value::Text("quantum".into()));
    });
    let e = CpuExecutable::from_artifact(&unknown_feature)
        .err()
        .unwrap();
    assert!(e.to_string().contains("lacks quantum"), "{e}");
    let bad_step = edit(&|p| {
        let Value::Array(steps) = field(field(top(p), "run"), "steps") else {
            panic!("steps")
        };
        let kernel = Value::Map(vec![(
            Value::Text("Kernel".into()),
            Value::Integer(999.into()),
        )]);
        steps.insert(0, kernel);
    });
    let e = CpuExecutable::from_artifact(&bad_step).err().unwrap();
    assert!(matches!(e, ArtifactError::Malformed(_)), "{e}");
    let unknown_host = edit(&|p| {
        let Value::Array(hosts) = field(field(top(p), "image"), "hosts") else {
            panic!("hosts")
        };
        hosts[1] = Value::Text("ferrax_pow_f65".into());
    });
    let e = CpuExecutable::from_artifact(&unknown_host).err().unwrap();
    assert!(e.to_string().contains("ferrax_pow_f65"), "{e}");

    // Calls are checked against the signature.
    let loaded = CpuExecutable::from_artifact(&bytes).unwrap();
    assert!(loaded.run(&args[..1]).is_err());
    assert!(loaded.run(&[args[1].clone(), args[0].clone()]).is_err());
}

/// A CPU artifact's contents: its target and executables.
fn cpu(plan: &mut Value) -> &mut Value {
    field(field(plan, "contents"), "Cpu")
}

/// The run plan of a CPU artifact's first executable.
fn cpu_run(plan: &mut Value) -> &mut Value {
    field(top(plan), "run")
}

/// The plan of a GPU artifact's first part.
fn gpu_run(plan: &mut Value) -> &mut Value {
    field(gpu_part(plan), "plan")
}

/// Artifact `bytes` with integers of the plan `run` picks (up to `samples` of them, evenly
/// spaced) each set in turn to its neighbours, 0 and 2^40, and the file sealed again with a
/// correct hash, each given to `refused` (which loads and runs it, and says whether loading
/// refused it): how many were refused, and how many ran.
fn mutated_plans(
    bytes: &[u8],
    run: fn(&mut Value) -> &mut Value,
    samples: usize,
    mut refused: impl FnMut(&[u8]) -> bool,
) -> (usize, usize) {
    let (plan, code) = sections(bytes);
    let plan: Value = ciborium::from_reader(plan).unwrap();
    let original = run(&mut plan.clone()).clone();
    let mut paths = Vec::new();
    integer_paths(&original, &mut Vec::new(), &mut paths);
    let stride = paths.len().div_ceil(samples).max(1);
    let (mut no, mut ran) = (0, 0);
    for path in paths.iter().step_by(stride) {
        let Value::Integer(n) = at_path(&mut original.clone(), path).clone() else {
            unreachable!()
        };
        let n = i128::from(n);
        for m in [n + 1, n - 1, 0, 1 << 40] {
            let Ok(m) = ciborium::value::Integer::try_from(m) else {
                continue;
            };
            let mut mutated = plan.clone();
            *at_path(run(&mut mutated), path) = Value::Integer(m);
            let mut encoded = Vec::new();
            ciborium::into_writer(&mutated, &mut encoded).unwrap();
            match refused(&reseal(&encoded, code)) {
                true => no += 1,
                false => ran += 1,
            }
        }
    }
    (no, ran)
}

/// A GPU artifact's first part (the program's own plan).
fn gpu_part(plan: &mut Value) -> &mut Value {
    let Value::Array(parts) = field(field(field(plan, "contents"), "Gpu"), "parts") else {
        panic!("no parts")
    };
    &mut parts[0]
}

/// The plan's first executable (the program's own).
fn top(plan: &mut Value) -> &mut Value {
    let Value::Array(parts) = field(cpu(plan), "executables") else {
        panic!("no executables")
    };
    &mut parts[0]
}

/// The value of map `v`'s entry `key`.
fn field<'a>(v: &'a mut Value, key: &str) -> &'a mut Value {
    let Value::Map(entries) = v else {
        panic!("not a map: {key}")
    };
    let at = entries
        .iter()
        .position(|(k, _)| k.as_text() == Some(key))
        .unwrap_or_else(|| panic!("no {key}"));
    &mut entries[at].1
}

/// The plan section of an artifact (after magic, version and hash), and the sections after it
/// (code and notes) as they are.
fn sections(bytes: &[u8]) -> (&[u8], &[u8]) {
    let body = &bytes[44..];
    let plan_len = u64::from_le_bytes(body[..8].try_into().unwrap()) as usize;
    (&body[8..8 + plan_len], &body[8 + plan_len..])
}

/// An artifact of this plan and these later sections, with a correct hash.
fn reseal(plan: &[u8], rest: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    let mut body = (plan.len() as u64).to_le_bytes().to_vec();
    body.extend_from_slice(plan);
    body.extend_from_slice(rest);
    let mut out = b"FERRAXA\0".to_vec();
    out.extend_from_slice(&ferrax::aot_runtime::FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&sha2::Sha256::digest(&body));
    out.extend_from_slice(&body);
    out
}

/// `jit`'s calling convention from an artifact: an MLP training step (parameters as a derived
/// tree in and out) exported, loaded and called gives `jit`'s results bit for bit; inputs of
/// another structure or type are an error naming both, as `jit`'s compiled functions do.
#[test]
fn exported_training_steps_run_as_jit_runs_them() {
    use common::{mlp_loss, Layer, Mlp};
    use ferrax::{jit, tree_map2, Artifact};
    let step = |(p, x, y): (Mlp, Tensor, Tensor)| {
        let g = ferrax::grad(|p: Mlp| mlp_loss(&p, &x, &y))(p.clone());
        let loss = mlp_loss(&p, &x, &y);
        (tree_map2(&p, &g, |w, g| w - &(g * 0.1)).unwrap(), loss)
    };
    let layer = |n: usize, m: usize, seed: usize| Layer {
        w: Tensor::from_vec(
            [n, m],
            (0..n * m)
                .map(|k| ((k * 37 + seed) % 19) as f32 / 19.0 - 0.5)
                .collect::<Vec<f32>>(),
        ),
        b: Tensor::zeros(DType::F32, [m]),
    };
    let params = Mlp {
        layers: vec![layer(12, 16, 1), layer(16, 4, 2)],
    };
    let x = Tensor::from_vec(
        [8, 12],
        (0..96)
            .map(|k| (k % 7) as f32 * 0.3 - 1.0)
            .collect::<Vec<f32>>(),
    );
    let y = Tensor::from_vec(
        [8, 4],
        (0..32).map(|k| f32::from(k % 4 == 1)).collect::<Vec<f32>>(),
    );
    let args = (params, x, y);
    let f = jit(step);
    let bytes = f.lower(&args).unwrap().export().unwrap();
    let loaded: Artifact<(Mlp, Tensor, Tensor), (Mlp, Tensor)> = Artifact::load(&bytes).unwrap();
    let (want_p, want_loss) = f.call(args.clone()).unwrap();
    let (got_p, got_loss) = loaded.call(args.clone()).unwrap();
    let bits = |t: &Tensor| {
        t.to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&got_loss), bits(&want_loss));
    for (g, w) in ferrax::tree_leaves(&got_p)
        .iter()
        .zip(ferrax::tree_leaves(&want_p).iter())
    {
        assert_eq!(bits(g), bits(w));
    }
    let wrong = (
        args.0.clone(),
        Tensor::zeros(DType::F32, [9, 12]),
        args.2.clone(),
    );
    let e = loaded.call(wrong).err().unwrap();
    assert!(e.to_string().contains("f32[9,12]"), "{e}");
    assert!(!loaded.info().kernels.is_empty());

    // The same step planned for a GPU (no GPU needed), loaded on the emulated GPU and called
    // with the same trees: the GPU program's results, bit for bit, and within rounding of the
    // CPU's.
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax::compiler::backend::ptx::PtxTarget;
    let lowered = f.lower(&args).unwrap();
    let bytes = lowered.export_gpu(PtxTarget::Sm80).unwrap();
    let emulator = ferrax_ptx_emu::Emulator::default();
    let on_gpu: Artifact<(Mlp, Tensor, Tensor), (Mlp, Tensor)> =
        Artifact::load_on(&bytes, &emulator).unwrap();
    let (gpu_p, gpu_loss) = on_gpu.call(args.clone()).unwrap();
    let program = GpuProgram::compile(lowered.simplified(), &emulator, GpuOptions::default());
    let leaves: Vec<Array> = ferrax::tree_leaves(&args)
        .iter()
        .map(|t| t.clone().into_array().unwrap())
        .collect();
    let want = program.unwrap().run(&leaves).unwrap();
    let got: Vec<Tensor> = ferrax::tree_leaves(&gpu_p)
        .into_iter()
        .chain([gpu_loss.clone()])
        .collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(bits(g), bits(&Tensor::new(w.clone())));
    }
    let (g, w) = (
        gpu_loss.to_vec::<f32>().unwrap(),
        want_loss.to_vec::<f32>().unwrap(),
    );
    assert!(
        (g[0] - w[0]).abs() <= 1e-3 * w[0].abs(),
        "{g:?} against {w:?}"
    );
    assert!(on_gpu.info().kernels.iter().any(|k| k.starts_with("main_")));
}

/// Where an integer lies in a decoded plan: the entry or element index at each level.
type Path = Vec<usize>;

/// The paths of the integers under `v`, but those of kernels' launch steps (`step`), which
/// the code relies on as it relies on its relocations: trusted as code (see the trust model
/// in `ferrax_aot_runtime`).
fn integer_paths(v: &Value, path: &mut Path, out: &mut Vec<Path>) {
    match v {
        Value::Integer(_) => out.push(path.clone()),
        Value::Array(items) => {
            for (k, item) in items.iter().enumerate() {
                path.push(k);
                integer_paths(item, path, out);
                path.pop();
            }
        }
        Value::Map(entries) => {
            for (k, (key, item)) in entries.iter().enumerate() {
                if key.as_text() == Some("step") {
                    continue;
                }
                path.push(k);
                integer_paths(item, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at_path<'a>(v: &'a mut Value, path: &[usize]) -> &'a mut Value {
    path.iter().fold(v, |v, &k| match v {
        Value::Array(items) => &mut items[k],
        Value::Map(entries) => &mut entries[k].1,
        _ => panic!("no children"),
    })
}

/// The loader under structured mutation: every sampled integer of a plan's run (value ids,
/// instruction and kernel indices, sizes, dimensions, accesses, releases), set to its
/// neighbours, zero and a huge value, the artifact sealed again with a correct hash. Each is
/// refused with an error or loads and runs to a result or an error; none panics or crashes.
#[test]
fn mutated_plans_are_refused_or_run_safely() {
    use ferrax::aot_runtime::Executable;
    use ferrax::nn;
    let f = |(x, w, i, u): (Tensor, Tensor, Tensor, Tensor)| {
        let h = nn::softmax(&x.matmul(&w), -1);
        let rows = h.take(&i, 0);
        let added = h.at(&i).add(&u);
        (rows.sum(0), (added * 2.0).exp(), h.sum(0))
    };
    let specs = (
        Tensor::spec(DType::F32, [8, 16]),
        Tensor::spec(DType::F32, [16, 32]),
        Tensor::spec(DType::I32, [5]),
        Tensor::spec(DType::F32, [5, 32]),
    );
    let func = ferrax::trace(f, &specs).unwrap();
    let args = common::inputs(&func, 5);
    let bytes = compiled(&func).to_artifact().unwrap();
    let (refused, ran) = mutated_plans(
        &bytes,
        cpu_run,
        300,
        |file| match Executable::from_artifact(file) {
            Err(_) => true,
            Ok((exe, _)) => {
                let _ = exe.run(&args);
                false
            }
        },
    );
    assert!(refused > 100 && ran > 0, "refused {refused}, ran {ran}");
}

/// Loops in an artifact: their regions' code travels with the program's, so the loaded
/// function (through `ferrax::Artifact` or the runtime alone) gives `jit`'s results bit for
/// bit; the executable the runtime loads runs its calls on compiled regions.
#[test]
fn artifacts_carry_loops() {
    use ferrax::{jit, lax, Artifact};
    let step = |(x, w): (Tensor, Tensor)| {
        let y = lax::fori_loop(0, 6, |_, y: Tensor| (y.matmul(&w) * 0.5).tanh() + &y, x);
        let (last, ys) = lax::scan(
            |c: Tensor, r: Tensor| (&c + &r, (&c * &r).exp()),
            y.sum(0),
            y.clone(),
        );
        (last, ys)
    };
    let x = Tensor::from_vec(
        [4, 8],
        (0..32).map(|k| (k % 5) as f32 * 0.1).collect::<Vec<f32>>(),
    );
    let w = Tensor::from_vec(
        [8, 8],
        (0..64)
            .map(|k| ((k * 7) % 11) as f32 * 0.02 - 0.1)
            .collect::<Vec<f32>>(),
    );
    let f = jit(step);
    let bytes = f.lower(&(x.clone(), w.clone())).unwrap().export().unwrap();
    let (want_last, want_ys) = f.call((x.clone(), w.clone())).unwrap();
    let compiled: Artifact<(Tensor, Tensor), (Tensor, Tensor)> = Artifact::load(&bytes).unwrap();
    let (last, ys) = compiled.call((x.clone(), w.clone())).unwrap();
    let bits = |t: &Tensor| {
        t.to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&last), bits(&want_last));
    assert_eq!(bits(&ys), bits(&want_ys));

    let alone = ferrax::aot_runtime::Artifact::load(&bytes).unwrap();
    assert_eq!(alone.executable().map(|e| e.calls().len()), Some(2));
    let arrays = [x, w].map(|t| t.into_array().unwrap()).to_vec();
    let outputs = alone.call(arrays).unwrap();
    assert_eq!(bits(&Tensor::new(outputs[0].clone())), bits(&want_last));
    assert_eq!(bits(&Tensor::new(outputs[1].clone())), bits(&want_ys));
}

/// A program with loops and a branch, whose regions travel as plans of their own.
fn loops_program() -> ferrax::Func {
    use ferrax::lax;
    let f = |(x, w, k): (Tensor, Tensor, Tensor)| {
        let y = lax::fori_loop(0, 3, |_, y: Tensor| (y.matmul(&w) * 0.5).tanh() + &y, x);
        let (last, ys) = lax::scan(
            |c: Tensor, r: Tensor| (&c + &r, (&c * &r).exp()),
            y.sum(0),
            y.clone(),
        );
        let picked = lax::switch(&k, [&|a: Tensor| a.sin(), &|a: Tensor| -a], last);
        (picked, ys)
    };
    let specs = (
        Tensor::spec(DType::F32, [4, 8]),
        Tensor::spec(DType::F32, [8, 8]),
        Tensor::spec(DType::I32, []),
    );
    simplify(&ferrax::trace(f, &specs).unwrap()).unwrap().0
}

/// GPU artifacts, planned and loaded on the emulated GPU: every program of the test corpus,
/// the gradient programs and a program with loops, loaded back from its artifact with no
/// compiler, computes what the compiled program computes, bit for bit, with the same host
/// steps and regions.
#[test]
fn gpu_artifacts_compute_what_their_programs_compute() {
    use ferrax::aot_runtime::gpu::{GpuProgram as Loaded, GpuTarget};
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    let emulator = ferrax_ptx_emu::Emulator::default();
    let mut programs = common::corpus();
    programs.extend(common::gradient_programs());
    programs.push(("loops", loops_program()));
    let mut entries = 0;
    for (name, func) in programs {
        let (simple, _) = simplify(&func).unwrap();
        let gpu = GpuProgram::compile(&simple, &emulator, GpuOptions::HIGHEST).unwrap();
        let bytes = gpu.to_artifact(b"caller", b"compiler").unwrap();
        let (loaded, info) =
            Loaded::from_artifact(&bytes, &emulator).unwrap_or_else(|e| panic!("{name}: {e}"));
        let sm80 = GpuTarget { major: 8, minor: 0 };
        assert_eq!(info.target, ArtifactTarget::Gpu(sm80), "{name}");
        assert_eq!(
            (&info.metadata[..], &info.notes[..]),
            (&b"caller"[..], &b"compiler"[..])
        );
        assert_eq!(info.memory, gpu.memory(), "{name}");
        assert_eq!(loaded.host_steps(), gpu.host_steps(), "{name}");
        let args = common::inputs(&simple, 7);
        let want = gpu.run(&args).unwrap();
        let got = loaded.run(&args).unwrap();
        assert_eq!(got.len(), want.len(), "{name}");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            if g.dtype().is_float() {
                assert_eq!(float_bits(g), float_bits(w), "{name} output {k}");
            } else {
                assert_eq!(g, w, "{name} output {k}");
            }
        }
        if name == "loops" {
            assert!(loaded.regions().count() >= 3, "{name}: regions lost");
        }
        entries += info.kernels.len();
    }
    assert!(entries >= 50, "only {entries} entries");
}

/// An sm_80 artifact of `run` (highest matrix precision, no metadata): what the checks at
/// artifact time make of a plan.
fn sm80_artifact(
    run: &ferrax::aot_runtime::gpu::GpuRunPlan,
) -> Result<Vec<u8>, ferrax::aot_runtime::ArtifactError> {
    use ferrax::aot_runtime::gpu::GpuTarget;
    use ferrax::aot_runtime::gpu_artifact;
    gpu_artifact(
        run,
        GpuTarget { major: 8, minor: 0 },
        ferrax::MatmulPrecision::Highest,
        (&[], &[]),
    )
}

/// An attention's keys' and values' gradients in one launch (on the tensor cores) round trip
/// through a GPU artifact, bit for bit; a plan whose launch claims them in the other order, or
/// pairs the keys' gradient with the queries', is refused.
#[test]
fn gpu_artifacts_carry_paired_attention_gradients() {
    use ferrax::aot_runtime::gpu::{GpuProgram as Loaded, GpuStep};
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuPlan, GpuProgram};
    use ferrax::compiler::backend::ptx::{MathMode, PtxTarget};
    let (q, kv, rows) = ("bf16[1,40,2,16]", "bf16[1,40,2,16]", "f32[1,2,40]");
    let out = "f32[1,40,2,16]";
    let flag = ", causal=1, precision=bf16";
    let text = format!(
        "func @main(%q: {q}, %k: {kv}, %v: {kv}, %g: {out}, %gl: {rows}) -> ({q}, {kv}, {kv}) {{
  %o = attention %q, %k, %v{flag} : {out}
  %l = attention_lse %q, %k, %v{flag} : {rows}
  %dq = attention_dq %q, %k, %v, %o, %l, %g, %gl{flag} : {q}
  %dk = attention_dk %q, %k, %v, %o, %l, %g, %gl{flag} : {kv}
  %dv = attention_dv %q, %k, %v, %o, %l, %g, %gl{flag} : {kv}
  return %dq, %dk, %dv
}}"
    );
    let func = ferrax::ir::parse_func(&text).unwrap();
    let emulator = ferrax_ptx_emu::Emulator::default();
    let gpu = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
    assert_eq!(gpu.plan().attentions.len(), 3);
    let bytes = gpu.to_artifact(b"", b"").unwrap();
    let (loaded, _) = Loaded::from_artifact(&bytes, &emulator).unwrap();
    let args = common::inputs(&func, 5);
    let (want, got) = (gpu.run(&args).unwrap(), loaded.run(&args).unwrap());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(float_bits(g), float_bits(w), "output {k}");
    }

    let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    assert!(sm80_artifact(&plan.run).is_ok());
    let paired = plan
        .run
        .steps
        .iter()
        .position(|s| matches!(s, GpuStep::Attention { members, .. } if members.len() == 2 && members[0] > 2))
        .unwrap_or_else(|| panic!("no paired gradients in\n{}", plan.run.describe_steps()));
    type Mutation = fn(&mut Vec<usize>);
    let mutations: [(&str, Mutation); 2] = [
        ("the values' gradient first", |m| m.reverse()),
        ("the queries' gradient with the keys'", |m| m[1] -= 2),
    ];
    for (what, mutate) in mutations {
        let mut run = plan.run.clone();
        if let GpuStep::Attention { members, .. } = &mut run.steps[paired] {
            mutate(members);
        }
        assert!(sm80_artifact(&run).is_err(), "{what}");
    }
}

/// A GPU plan whose column kernel's partials are folded by the wrong launches, into the wrong
/// type or into a value no reduction computes is refused when an artifact is made of it (and
/// so when one is loaded: the same check).
#[test]
fn gpu_plans_with_misfolded_column_partials_are_refused() {
    use ferrax::aot_runtime::gpu::{GpuRunPlan, Param};
    use ferrax::compiler::backend::gpu::GpuPlan;
    use ferrax::compiler::backend::ptx::{MathMode, PtxTarget};
    use ferrax::TensorType;
    let f = |x: Tensor| ((&x * 2.0).exp().sum(0), x.max(0) * 3.0);
    let func = ferrax::trace(f, &Tensor::spec(DType::F32, [2048, 1024])).unwrap();
    let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    assert!(sm80_artifact(&plan.run).is_ok());
    let partial = |run: &mut GpuRunPlan| -> (usize, usize) {
        for (l, launch) in run.launches.iter().enumerate() {
            if let Some(p) = launch
                .params
                .iter()
                .position(|p| matches!(p, Param::Partial { .. }))
            {
                return (l, p);
            }
        }
        panic!("no column kernel in\n{}", run.describe_steps());
    };
    type Mutation = fn(&mut Param, usize);
    let mutations: [(&str, Mutation); 4] = [
        ("a wrong result type", |p, _| {
            if let Param::Partial { totals, .. } = p {
                let last = totals.last_mut().unwrap();
                last.1 = TensorType::new(DType::F32, [1023]);
            }
        }),
        ("no folds", |p, _| {
            if let Param::Partial { totals, .. } = p {
                totals.clear();
            }
        }),
        ("a launch that is not there", |p, launches| {
            if let Param::Partial { totals, .. } = p {
                totals[0].0 = launches;
            }
        }),
        ("the result of no reduction", |p, _| {
            if let Param::Partial { value, .. } = p {
                *value = ferrax::ir::ValueId(0);
            }
        }),
    ];
    for (what, mutate) in mutations {
        let mut run = plan.run.clone();
        let (l, p) = partial(&mut run);
        let launches = run.reduce_launches.len();
        mutate(&mut run.launches[l].params[p], launches);
        assert!(sm80_artifact(&run).is_err(), "{what}");
    }
}

/// A damaged GPU artifact is refused, as is one for a later architecture than the device's,
/// a CPU artifact given to the GPU loader and the reverse; a plan with any integer changed
/// (and the file sealed again) is refused or runs on the emulator, whose every access is
/// bounds-checked, without a crash.
#[test]
fn damaged_foreign_and_mutated_gpu_artifacts_are_refused_or_run_safely() {
    use ferrax::aot_runtime::gpu::GpuProgram as Loaded;
    use ferrax::compiler::backend::gpu::{compile_artifact, GpuOptions};
    use ferrax::compiler::backend::ptx::PtxTarget;
    let emulator = ferrax_ptx_emu::Emulator::default();
    // Kernels (one with a gather fused), a product, reductions, a transpose, a scatter and a
    // dynamic slice.
    let f = |(x, w, i, u, s): (Tensor, Tensor, Tensor, Tensor, Tensor)| {
        let h = ferrax::nn::softmax(&x.matmul(&w), -1);
        let rows = h.take(&i, 0);
        let added = h.at(&i).add(&u);
        let window = h.dynamic_slice(&[&s, &s], &[2, 4]);
        (
            rows.sum(0),
            (added * 2.0).exp().transpose([1, 0]),
            window,
            h.sum(0),
        )
    };
    let specs = (
        Tensor::spec(DType::F32, [8, 16]),
        Tensor::spec(DType::F32, [16, 32]),
        Tensor::spec(DType::I32, [5]),
        Tensor::spec(DType::F32, [5, 32]),
        Tensor::spec(DType::I32, []),
    );
    let (simple, _) = simplify(&ferrax::trace(f, &specs).unwrap()).unwrap();
    let args = common::inputs(&simple, 3);
    let options = GpuOptions::HIGHEST;
    let bytes = compile_artifact(&simple, PtxTarget::Sm80, options, (&[], &[])).unwrap();
    assert!(Loaded::from_artifact(&bytes, &emulator).is_ok());
    let steps = inspect_artifact(&bytes).unwrap().fused;
    for kind in [
        "kernel main_",
        "on cuBLAS",
        "by reduction",
        "copies",
        "scatter",
    ] {
        assert!(steps.contains(kind), "no {kind} step in\n{steps}");
    }

    let stride = bytes.len().div_ceil(200).max(1);
    for at in (0..bytes.len()).step_by(stride) {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x20;
        assert!(
            Loaded::from_artifact(&damaged, &emulator).is_err(),
            "byte {at}"
        );
    }
    for len in [0, 7, 12, 44, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            Loaded::from_artifact(&bytes[..len], &emulator).is_err(),
            "{len} bytes"
        );
    }
    let hopper = compile_artifact(&simple, PtxTarget::Sm90, options, (&[], &[])).unwrap();
    let e = Loaded::from_artifact(&hopper, &emulator).err().unwrap();
    assert!(
        e.to_string().contains("sm_90") && e.to_string().contains("8.0"),
        "{e}"
    );
    let e = CpuExecutable::from_artifact(&bytes).err().unwrap();
    assert!(
        matches!(e, ArtifactError::Kind { .. }) && e.to_string().contains("GPU"),
        "{e}"
    );
    let cpu = compiled(&simple).to_artifact().unwrap();
    let e = Loaded::from_artifact(&cpu, &emulator).err().unwrap();
    assert!(
        matches!(e, ArtifactError::Kind { .. }) && e.to_string().contains("CPU"),
        "{e}"
    );

    let (refused, ran) = mutated_plans(&bytes, gpu_run, 3000, |file| {
        match Loaded::from_artifact(file, &emulator) {
            Err(_) => true,
            Ok((program, _)) => {
                let _ = program.run(&args);
                false
            }
        }
    });
    assert!(refused > 100 && ran > 0, "refused {refused}, ran {ran}");
}
