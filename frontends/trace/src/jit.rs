//! `jit`: trace once per input signature, simplify (equality saturation), compile for the
//! device of the inputs (the CPU: fused Cranelift kernels, other ops on the interpreter's
//! evaluator; a GPU: PTX kernels, reductions and cuBLAS), cache, and run the executable on later
//! calls.
//!
//! A `Jit` is shared between threads (it is `Send + Sync`), so its cache is a read-write lock
//! that is never held while tracing or compiling: a function may call other jitted functions,
//! and threads compile different signatures in parallel. Two threads missing on one signature
//! at once each compile it, and the first program inserted is kept. The cache is bounded (least
//! recently used signatures go first), and a program's code is freed when the last
//! [`Lowered`]/[`Compiled`] or cache entry holding it is dropped.

use crate::device::Device;
use crate::persistent::CacheDir;
use crate::tensor::Inner;
use crate::trace::{trace_named, Traced};
use crate::{Error, Result, Tensor, Tree, TreeDef};
use ferrax_aot_runtime::gpu::GpuRunError;
use ferrax_compiler::backend::gpu::{
    compile_artifact, GpuError, GpuExecutable, GpuOptions, Recording,
};
use ferrax_compiler::backend::ptx::{MathMode, PtxTarget};
use ferrax_compiler::pipeline::{self, Backend, Executable};
use ferrax_ir::{Func, TensorType};
use ferrax_runtime::interpret;
use ferrax_runtime::{CudaDevice, DeviceArray, MatmulPrecision};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// What a compiled program is keyed by: the input structure, the type of every leaf, and the
/// GPU it runs on (ordinal and compute capability), if any.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Signature {
    pub structure: TreeDef,
    pub types: Vec<TensorType>,
    pub gpu: Option<(usize, (i32, i32))>,
}

/// A traced, simplified program and its executable.
struct Program {
    /// The traced program after simplification.
    traced: Traced,
    /// As traced, before simplification.
    raw: Func,
    simplify_report: String,
    /// `None` for a program that closes over an enclosing trace's values (it is inlined
    /// there, never run on its own).
    executable: Option<Executable>,
    /// How its GPU code computes.
    options: GpuOptions,
    /// Loaded from the persistent cache rather than compiled.
    from_persistent_cache: bool,
    /// Whether GPU runs replay a recording of the first ([`Jit::cuda_graphs`]).
    graphs: bool,
    /// That recording, once made.
    recording: Mutex<Option<Recording<Arc<CudaDevice>>>>,
}

/// Runs `program` on `leaves` (whose device the program was compiled for). Leaves given by
/// value and held nowhere else donate their buffers to the run.
fn run_program<O: Tree>(program: &Program, leaves: Vec<Tensor>, device: &Device) -> Result<O> {
    if let (Some(Executable::Gpu(gpu)), Device::Cuda(_)) = (&program.executable, device) {
        let inputs = leaves
            .iter()
            .map(|l| match l.to_device(device)?.0 {
                Inner::Device { array, .. } => Ok(array),
                _ => Err(Error::Device("an input did not reach the GPU".into())),
            })
            .collect::<Result<Vec<_>>>()?;
        let outputs = match program.graphs {
            true => replay(program, gpu, &inputs),
            false => gpu.run_device(&inputs),
        }
        .map_err(|e| Error::Device(e.to_string()))?;
        let mut out_leaves = outputs.into_iter().map(Tensor::on_device);
        return O::unflatten(&program.traced.out_def, &mut out_leaves);
    }
    let arrays = leaves
        .into_iter()
        .map(Tensor::into_array)
        .collect::<Result<Vec<_>>>()?;
    let outputs = match &program.executable {
        Some(exe) => exe.run(arrays)?,
        None => interpret(&program.traced.func, &arrays)?,
    };
    let mut out_leaves = outputs.into_iter().map(Tensor::new);
    O::unflatten(&program.traced.out_def, &mut out_leaves)
}

/// The results of `gpu` on `inputs` by a replay of its recording, made on the first call; a
/// program that cannot be recorded (steps on the host) runs as usual.
fn replay(
    program: &Program,
    gpu: &GpuExecutable,
    inputs: &[DeviceArray],
) -> std::result::Result<Vec<DeviceArray>, GpuError> {
    let mut recording = program
        .recording
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if recording.is_none() {
        match gpu.record() {
            Ok(r) => *recording = Some(r),
            Err(GpuError::Run(GpuRunError::NotRecordable(_))) => return gpu.run_device(inputs),
            Err(e) => return Err(e),
        }
    }
    match recording.as_ref() {
        Some(r) => gpu.replay(r, inputs),
        None => gpu.run_device(inputs),
    }
}

/// A function lowered for one input signature (`jax.jit(f).lower(...)`): its program at every
/// stage, compiled but not run.
pub struct Lowered<I, O> {
    program: Arc<Program>,
    key: Signature,
    _types: PhantomData<fn(I) -> O>,
}

impl<I: Tree, O: Tree> Lowered<I, O> {
    /// The program as traced.
    pub fn traced(&self) -> &Func {
        &self.program.raw
    }

    /// The program after equality-saturation simplification (what is compiled).
    pub fn simplified(&self) -> &Func {
        &self.program.traced.func
    }

    /// What the simplifier did: stop reasons and the rewrites that fired.
    pub fn simplify_report(&self) -> &str {
        &self.program.simplify_report
    }

    /// The CPU program as fused: scheduled for fusion, each step headed by what runs it (a
    /// kernel, gemm or the interpreter), for CPU programs.
    pub fn fused(&self) -> Option<&str> {
        self.program.executable.as_ref()?.fused()
    }

    /// The program's fused kernels, each in kernel IR (on the CPU followed by its Cranelift
    /// IR).
    pub fn kernels(&self) -> Vec<String> {
        self.program
            .executable
            .as_ref()
            .map_or_else(Vec::new, Executable::kernels)
    }

    /// The memory plan's figures (peak bytes of live values), for compiled programs.
    pub fn memory(&self) -> Option<ferrax_compiler::backend::MemoryReport> {
        self.program.executable.as_ref()?.memory()
    }

    /// The values live when the memory plan peaks, largest first, each with its bytes and the
    /// instruction that makes it (CPU programs): what to shorten to lower the peak.
    pub fn live_at_peak(&self) -> Option<String> {
        self.program.executable.as_ref()?.live_at_peak()
    }

    /// The PTX module of the program (for the GPU it was compiled for, or else for sm_80;
    /// rendering needs no GPU).
    pub fn ptx(&self) -> Result<String> {
        if let Some(ptx) = self.program.executable.as_ref().and_then(Executable::ptx) {
            return Ok(ptx.to_string());
        }
        let func = self.simplified_for_gpu()?;
        Ok(pipeline::render_ptx(
            &func,
            PtxTarget::Sm80,
            self.program.options,
        )?)
    }

    /// The program simplified as a GPU compiles it, what to plan for a GPU from a program
    /// lowered for the CPU: [`Lowered::simplified`] where it was compiled for a GPU, else
    /// simplified again from the trace, since other backends spell attention in plain ops
    /// before simplifying and a GPU computes it by its kernels.
    pub fn simplified_for_gpu(&self) -> Result<std::borrow::Cow<'_, Func>> {
        use std::borrow::Cow;
        if let Some(Executable::Gpu(_)) = &self.program.executable {
            return Ok(Cow::Borrowed(self.simplified()));
        }
        let (func, _) = pipeline::simplify_for_gpu(&self.program.raw)?;
        Ok(Cow::Owned(func))
    }

    /// The executable, callable on inputs of this signature without tracing again.
    pub fn compile(&self) -> Compiled<I, O> {
        Compiled {
            program: self.program.clone(),
            key: self.key.clone(),
            _types: PhantomData,
        }
    }

    /// Whether the program was loaded from the persistent compile cache, not compiled.
    pub fn from_persistent_cache(&self) -> bool {
        self.program.from_persistent_cache
    }

    /// The compiled program as an ahead-of-time artifact ([`Artifact`](crate::Artifact) loads
    /// it in any process, with no compiler work): a CPU program's for this CPU, a GPU
    /// program's for its device's architecture; an error for programs on the interpreter, or
    /// whose inputs or outputs hold static values.
    pub fn export(&self) -> Result<Vec<u8>> {
        let (inputs, outputs) = (&self.key.structure, &self.program.traced.out_def);
        match &self.program.executable {
            Some(Executable::Cpu(exe)) => crate::aot::export(exe, inputs, outputs),
            Some(Executable::Gpu(exe)) => {
                let metadata = crate::aot::signature(inputs, outputs)?;
                let bytes = exe.to_artifact(&metadata, &[]);
                bytes.map_err(|e| Error::from(pipeline::PipelineError::Gpu(e)))
            }
            Some(Executable::Interpreter(_)) | None => Err(Error::Artifact(
                "only programs compiled for the CPU or a GPU export as artifacts".to_string(),
            )),
        }
    }

    /// The program planned for a GPU of architecture `target` (or later), computing as this
    /// program's GPU options say, as an artifact; no GPU is needed to make it.
    pub fn export_gpu(&self, target: PtxTarget) -> Result<Vec<u8>> {
        if !self.program.traced.captures.is_empty() {
            return Err(Error::Artifact(
                "a function that closes over an enclosing trace's values does not export".into(),
            ));
        }
        let metadata = crate::aot::signature(&self.key.structure, &self.program.traced.out_def)?;
        let options = self.program.options;
        let func = self.simplified_for_gpu()?;
        compile_artifact(&func, target, options, (&metadata, &[]))
            .map_err(|e| Error::from(pipeline::PipelineError::Gpu(e)))
    }
}

/// A compiled program for one input signature (`jax.jit(f).lower(...).compile()`).
pub struct Compiled<I, O> {
    program: Arc<Program>,
    key: Signature,
    _types: PhantomData<fn(I) -> O>,
}

impl<I: Tree, O: Tree> Compiled<I, O> {
    /// Runs on inputs of the signature it was compiled for; others are an error naming both.
    pub fn call(&self, args: I) -> Result<O> {
        let mut leaves = Vec::new();
        let structure = args.flatten(&mut leaves);
        let device = device_of(&leaves)?;
        let key = signature(structure, &leaves, &device);
        if key != self.key {
            return Err(Error::Tree {
                expected: format!("inputs like the compiled ones ({})", describe(&self.key)),
                found: describe(&key),
            });
        }
        drop(args);
        run_program(&self.program, leaves, &device)
    }
}

fn describe(key: &Signature) -> String {
    let types: Vec<String> = key.types.iter().map(ToString::to_string).collect();
    format!("{} of {}", key.structure, types.join(", "))
}

fn signature(structure: TreeDef, leaves: &[Tensor], device: &Device) -> Signature {
    Signature {
        structure,
        types: leaves.iter().map(|l| l.ty().clone()).collect(),
        gpu: match device {
            Device::Cpu => None,
            Device::Cuda(d) => Some((d.ordinal(), d.compute_capability())),
        },
    }
}

/// The one device the inputs live on (the CPU when none is on a GPU).
fn device_of(leaves: &[Tensor]) -> Result<Device> {
    let mut device = Device::Cpu;
    for leaf in leaves {
        let d = leaf.device();
        if !d.is_cpu() {
            if !device.is_cpu() && device != d {
                return Err(Error::Device(format!(
                    "inputs live on two devices, {device:?} and {d:?}; move them to one"
                )));
            }
            device = d;
        }
    }
    Ok(device)
}

/// The backend for inputs on `device`: the GPU they live on, else the CPU backend, or the
/// reference interpreter where `FERRAX_BACKEND=interpreter` asks for it (for debugging and
/// comparisons).
fn backend_for(device: &Device, options: GpuOptions) -> Backend {
    match device {
        Device::Cuda(d) => Backend::Gpu {
            device: d.clone(),
            options,
        },
        Device::Cpu if std::env::var("FERRAX_BACKEND").is_ok_and(|b| b == "interpreter") => {
            Backend::Interpreter
        }
        Device::Cpu => Backend::Cpu,
    }
}

/// How many signatures a [`Jit`] keeps compiled unless told otherwise.
const DEFAULT_CACHE_CAPACITY: usize = 64;

/// A cached program and the tick of its jit's clock at its last use (the least recent goes
/// first when the cache is full). Atomic so that hits, under the read lock, can update it.
struct Entry {
    program: Arc<Program>,
    used: AtomicU64,
}

/// A function prepared for tracing and caching; see [`jit`].
pub struct Jit<F, I, O> {
    f: F,
    name: String,
    cache: RwLock<HashMap<Signature, Entry>>,
    capacity: usize,
    clock: AtomicU64,
    traces: AtomicUsize,
    last_miss: Mutex<Option<String>>,
    options: GpuOptions,
    persistent: CacheDir,
    cuda_graphs: bool,
    _types: PhantomData<fn(I) -> O>,
}

/// Why `key` missed the cache: what differs from the closest cached signature (the one with
/// the fewest differing leaves), or that nothing was cached yet.
fn explain_miss<'a>(key: &Signature, cached: impl Iterator<Item = &'a Signature>) -> String {
    let gpu = |g: &Option<(usize, (i32, i32))>| match g {
        None => "cpu".to_string(),
        Some((n, (major, minor))) => format!("cuda:{n} (sm_{major}{minor})"),
    };
    let mut best: Option<(usize, Vec<String>)> = None;
    for old in cached {
        let mut changes = Vec::new();
        if old.structure != key.structure {
            changes.push(format!(
                "input structure {} -> {}",
                old.structure, key.structure
            ));
        } else {
            for (i, (a, b)) in old.types.iter().zip(&key.types).enumerate() {
                if a != b {
                    changes.push(format!("leaf {i}: {a} -> {b}"));
                }
            }
        }
        if old.gpu != key.gpu {
            changes.push(format!("device {} -> {}", gpu(&old.gpu), gpu(&key.gpu)));
        }
        if best.as_ref().is_none_or(|(n, _)| changes.len() < *n) {
            best = Some((changes.len(), changes));
        }
    }
    match best {
        None => "first call: nothing compiled yet".to_string(),
        Some((_, changes)) => changes.join("; "),
    }
}

/// Wraps `f` so that calls trace it once per input signature and reuse the program after
/// (`jax.jit`). Inside another trace, the call is inlined into the outer program. `f` is
/// `Send + Sync` so that the `Jit` can be called from several threads at once.
pub fn jit<I: Tree, O: Tree, F: Fn(I) -> O + Send + Sync>(f: F) -> Jit<F, I, O> {
    Jit {
        f,
        name: "main".into(),
        cache: RwLock::new(HashMap::new()),
        capacity: DEFAULT_CACHE_CAPACITY,
        clock: AtomicU64::new(0),
        traces: AtomicUsize::new(0),
        last_miss: Mutex::new(None),
        options: GpuOptions::default(),
        persistent: CacheDir::Default,
        cuda_graphs: false,
        _types: PhantomData,
    }
}

impl<I: Tree, O: Tree, F: Fn(I) -> O> Jit<F, I, O> {
    /// Names the traced function (the `@name` in printed IR).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Keeps this function's compiled CPU programs in `dir` across processes, in place of the
    /// persistent cache's default directory (see the crate docs on the persistent cache).
    pub fn cache_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.persistent = CacheDir::At(dir.into());
        self
    }

    /// Compiles this function's programs in every process: no persistent cache.
    pub fn no_persistent_cache(mut self) -> Self {
        self.persistent = CacheDir::Off;
        self
    }

    /// Runs on the GPU by replaying a recording (a CUDA graph) of the first run of each
    /// signature, one launch for all of a step's kernels instead of a host call each: for steps
    /// of many small kernels, whose launches would otherwise take longer than the kernels.
    /// Each call copies its inputs into the recording's and the results out; the recording
    /// holds its run's device memory while the signature stays cached. A program with work on
    /// the host runs as usual. CPU programs are unaffected.
    pub fn cuda_graphs(mut self) -> Self {
        self.cuda_graphs = true;
        self
    }

    /// Opts in to fast math on the GPU ([`MathMode::Fast`]): f32 exp, log, sin, cos, rsqrt,
    /// square roots and quotients by the hardware's approximate instructions, a few ULP off
    /// (more for large arguments of exp, sin and cos) where the default is within 3. CPU code is
    /// the same either way; inlined into another traced function, that function's choice holds.
    pub fn fast_math(mut self) -> Self {
        self.options.math = MathMode::Fast;
        self
    }

    /// Lets float scatter-adds on the GPU (an embedding's gradient) combine by atomics, as
    /// JAX's do: faster, but their summation order, and so the result's rounding, varies from
    /// run to run. By default they are sorted by destination and summed in update order,
    /// deterministic and equal to the CPU's. Integer scatter-adds, minima and maxima use
    /// atomics either way (their result does not depend on the order).
    pub fn atomic_float_scatter(mut self) -> Self {
        self.options.atomic_float_scatter = true;
        self
    }

    /// How f32 matrix products on the GPU multiply (`jax.default_matmul_precision`): TF32
    /// tensor cores by default, as JAX on such GPUs, or [`MatmulPrecision::Highest`] for true
    /// f32 (results then within rounding of the CPU's). CPU products are true f32 either way.
    pub fn matmul_precision(mut self, precision: MatmulPrecision) -> Self {
        self.options.matmul = precision;
        self
    }

    /// Keeps at most `n` signatures compiled (default 64); a new one past that evicts the least
    /// recently used, whose code is freed once no [`Lowered`] or [`Compiled`] holds it. With 0
    /// nothing is kept and every call traces.
    pub fn cache_capacity(mut self, n: usize) -> Self {
        self.capacity = n;
        self
    }

    /// Runs the function on concrete inputs.
    pub fn call(&self, args: I) -> Result<O> {
        let mut leaves = Vec::new();
        let structure = args.flatten(&mut leaves);
        if leaves.iter().any(Tensor::is_traced) {
            return Ok((self.f)(args));
        }
        let device = device_of(&leaves)?;
        let program = self.program(&args, structure, &leaves, &device)?;
        if !program.traced.captures.is_empty() {
            // The function closes over tracers of an enclosing trace: inline it there.
            return Ok((self.f)(args));
        }
        // The leaves now hold the only references this call was given.
        drop(args);
        run_program(&program, leaves, &device)
    }

    /// The program for inputs shaped like `args` (tensors or [`Tensor::spec`]s) at every
    /// stage, compiled for their device, without running it.
    pub fn lower(&self, args: &I) -> Result<Lowered<I, O>> {
        let mut leaves = Vec::new();
        let structure = args.flatten(&mut leaves);
        let device = device_of(&leaves)?;
        let key = signature(structure.clone(), &leaves, &device);
        Ok(Lowered {
            program: self.program(args, structure, &leaves, &device)?,
            key,
            _types: PhantomData,
        })
    }

    /// How many times the function has been traced: once per distinct signature, again after
    /// an eviction, and once per thread where threads miss on one signature at once.
    pub fn trace_count(&self) -> usize {
        self.traces.load(Ordering::Relaxed)
    }

    /// How many signatures are compiled and cached now (at most the cache capacity).
    pub fn cache_len(&self) -> usize {
        self.read_cache().len()
    }

    /// Why the last cache miss happened (`None` before the first call): which input leaves
    /// changed type, from what to what, against the closest signature compiled before, or a
    /// change of input structure or device. `FERRAX_EXPLAIN_CACHE_MISSES=1` also prints each
    /// explanation to stderr as it happens.
    pub fn last_cache_miss(&self) -> Option<String> {
        self.last_miss
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    // The locks guard plain maps that no panic leaves half-updated, so poisoning is ignored.
    fn read_cache(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Signature, Entry>> {
        self.cache.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    /// The cached program for `key`, marked as just used.
    fn cached(&self, key: &Signature) -> Option<Arc<Program>> {
        let cache = self.read_cache();
        let entry = cache.get(key)?;
        entry.used.fetch_max(self.tick(), Ordering::Relaxed);
        Some(entry.program.clone())
    }

    /// Caches `program` for `key`, evicting the least recently used entries past the capacity.
    /// If another thread cached `key` meanwhile, its program is kept and returned.
    fn insert(&self, key: Signature, program: Arc<Program>) -> Arc<Program> {
        if self.capacity == 0 {
            return program;
        }
        let mut evicted = Vec::new();
        let kept = {
            let mut cache = self.cache.write().unwrap_or_else(PoisonError::into_inner);
            if let Some(existing) = cache.get(&key) {
                existing.used.fetch_max(self.tick(), Ordering::Relaxed);
                existing.program.clone()
            } else {
                while cache.len() >= self.capacity {
                    let Some(oldest) = cache
                        .iter()
                        .min_by_key(|(_, e)| e.used.load(Ordering::Relaxed))
                        .map(|(k, _)| k.clone())
                    else {
                        break;
                    };
                    evicted.extend(cache.remove(&oldest));
                }
                let used = AtomicU64::new(self.tick());
                cache.insert(
                    key,
                    Entry {
                        program: program.clone(),
                        used,
                    },
                );
                program
            }
        };
        // Evicted code is freed here, after the lock is released.
        drop(evicted);
        kept
    }

    fn program(
        &self,
        args: &I,
        structure: TreeDef,
        leaves: &[Tensor],
        device: &Device,
    ) -> Result<Arc<Program>> {
        if let Some(e) = leaves.iter().find_map(|l| match &l.0 {
            Inner::Failed { error, .. } => Some(error),
            _ => None,
        }) {
            return Err(Error::clone(e));
        }
        let key = signature(structure, leaves, device);
        if let Some(hit) = self.cached(&key) {
            return Ok(hit);
        }
        let why = explain_miss(&key, self.read_cache().keys());
        if std::env::var_os("FERRAX_EXPLAIN_CACHE_MISSES").is_some() {
            eprintln!("ferrax: jit {}: cache miss: {why}", self.name);
        }
        *self
            .last_miss
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(why);
        // No lock is held from here on: tracing may call other jitted functions, and other
        // threads look up or compile other signatures meanwhile.
        let mut traced = trace_named(&self.name, &self.f, args)?;
        crate::dump::write("traced", &traced.func);
        let raw = traced.func.clone();
        let mut simplify_report = String::new();
        let mut executable = None;
        let mut from_persistent_cache = false;
        if traced.captures.is_empty() {
            let backend = backend_for(device, self.options);
            let options = format!("{:?}", self.options);
            let (compiled, hit) =
                crate::persistent::compile(&traced.func, &backend, &self.persistent, &options)?;
            from_persistent_cache = hit;
            simplify_report = compiled.simplify_report;
            traced.func = compiled.simplified;
            crate::dump::compiled(
                &traced.func,
                &simplify_report,
                &compiled.executable,
                self.options,
            );
            executable = Some(compiled.executable);
        }
        let program = Arc::new(Program {
            traced,
            raw,
            simplify_report,
            executable,
            options: self.options,
            from_persistent_cache,
            graphs: self.cuda_graphs,
            recording: Mutex::new(None),
        });
        self.traces.fetch_add(1, Ordering::Relaxed);
        if !program.traced.captures.is_empty() {
            return Ok(program);
        }
        Ok(self.insert(key, program))
    }
}
