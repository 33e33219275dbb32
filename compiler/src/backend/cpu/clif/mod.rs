//! Kernel IR → Cranelift IR → machine code. Each kernel becomes
//! `extern "C" fn(args: *const *mut u8, start: i64, end: i64)`: `args` is the argument block
//! that [`crate::kernel::KernelSig::pack`] builds, and the loop covers elements `start..end`
//! (`start` a multiple of [`LANES`]), so a launch can be split across threads.
//!
//! Kernels of f32 values (see [`vectorizable`]) are compiled for SIMD: transcendentals are
//! expanded into polynomials (`kernel::math`, 3 ULP), and the loop runs 128-bit vectors of
//! LANES elements (several vectors per step, interleaved), then a scalar tail computing exactly
//! the same operations. Kernels are compiled without Cranelift's mid-end (see `Jit::new`): their
//! code is emitted ready. The f64 argument reduction of f32 sin and cos runs as two f64x2 halves of
//! each vector. Other kernels (f64 data, bool buffers, ops without a vector form) are scalar,
//! f32 transcendentals still expanded; f64 transcendentals call the reference interpreter's own
//! functions, so f64 results equal the interpreter's bit for bit.
//!
//! This module owns the JIT module and the order in which a kernel's forms are tried; the code
//! of a kernel is built by `flat` (elementwise loops) or `rows` (row kernels), which select
//! instructions through `isel` (with `memory` for buffer elements and `reduce` for reduction
//! steps), read vector constants from `consts`, and call the host through `host`. `vector`
//! decides which kernels run as vectors.

mod consts;
mod flat;
mod host;
mod image;
mod isel;
mod memory;
mod reduce;
mod rows;
mod vector;

pub(crate) use flat::{chunk_len, FLAT_STEP};
pub use vector::vectorizable;

use crate::kernel::halves;
use crate::kernel::{math, Access, Kernel, Role};
use consts::ConstPool;
use cranelift_codegen::ir::{types, AbiParam};
use cranelift_codegen::isa::TargetIsa;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{ArenaMemoryProvider, JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module};
use ferrax_aot_runtime::kernel::KernelFn;
use ferrax_aot_runtime::Code;
use ferrax_ir::DType;
use host::HostIds;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    #[error("cranelift: {0}")]
    Cranelift(String),
    #[error("kernel {kernel}: {what} is not supported by the CPU code generator")]
    Unsupported { kernel: String, what: String },
}

/// The address space reserved for one module's code and tables (see [`Jit::new`]).
const JIT_ARENA_BYTES: usize = 1 << 28;

fn err(e: impl std::fmt::Display) -> CodegenError {
    CodegenError::Cranelift(e.to_string())
}

/// Kernels compiled into one module: their code, and the Cranelift IR of each.
pub struct Compiled {
    pub code: Code,
    /// The Cranelift IR of each kernel, for dumps and snapshots.
    pub clif: Vec<String>,
}

/// The JIT module kernels' code lives in, freed when dropped (the [`Code`] made of it owns it).
/// Behind a mutex only to be `Sync` (the module is `Send` but not `Sync`); never locked.
struct JitCode(Option<Mutex<JITModule>>);

impl Drop for JitCode {
    fn drop(&mut self) {
        if let Some(module) = self.0.take() {
            let module = module.into_inner().unwrap_or_else(PoisonError::into_inner);
            // SAFETY: the entries point into this module's code and are called only through
            // the executable whose `Code` owns this; every launch joins its threads before the
            // run returns, so no entry is running or called after this drop. (Cranelift's
            // default memory provider would otherwise leak the code for the life of the
            // process.)
            unsafe { module.free_memory() };
        }
    }
}

/// Elements per vector step of a SIMD kernel (128-bit vectors of f32/i32).
pub const LANES: i64 = 4;

/// The JIT module of one executable's kernels, and the helper functions they may call.
struct Jit {
    module: JITModule,
    host: HostIds,
    ctx: cranelift_codegen::Context,
    recorder: image::Recorder,
}

impl Jit {
    /// Kernels skip Cranelift's mid-end: it would place each interleaved vector's
    /// instructions next to that vector's store, undoing the interleaving, and hoist the
    /// constants of long bodies out of loops into registers that then spill. Kernel code is
    /// emitted ready for the backend instead: constants read from a table where used,
    /// positions stepped without division, row values splatted once per row.
    fn new() -> Result<Jit, CodegenError> {
        // Cranelift's IR verifier checks our code generation; debug builds (the tests) run it.
        let verify = if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        };
        let mut jb = JITBuilder::with_flags(
            &[("opt_level", "none"), ("enable_verifier", verify)],
            cranelift_module::default_libcall_names(),
        )
        .map_err(err)?;
        // Calls of the module's own functions and loads from its constant tables are
        // RIP-relative, 32-bit offsets. The default provider maps each segment wherever
        // `mmap` puts it, in a busy process possibly beyond that reach (Cranelift then panics
        // on the relocation); one reservation under 2 GiB keeps them all within it, and
        // costs address space alone until used.
        let arena = ArenaMemoryProvider::new_with_size(JIT_ARENA_BYTES).map_err(err)?;
        jb.memory_provider(Box::new(arena));
        HostIds::link(&mut jb);
        let mut module = JITModule::new(jb);
        let mut ctx = module.make_context();
        let mut recorder = image::Recorder::default();
        let host = HostIds::declare(&mut module, &mut ctx, &mut recorder)?;
        Ok(Jit {
            module,
            host,
            ctx,
            recorder,
        })
    }

    /// Defines `kernel`'s function, and returns it with its Cranelift IR.
    fn define(
        &mut self,
        kernel: &Kernel,
        fctx: &mut FunctionBuilderContext,
    ) -> Result<(FuncId, String), CodegenError> {
        let Jit {
            module,
            host,
            ctx,
            recorder,
        } = self;
        let ptr = module.target_config().pointer_type();
        let id = module
            .declare_function(&kernel.name, Linkage::Local, &{
                let mut sig = module.make_signature();
                sig.params.push(AbiParam::new(ptr));
                sig.params.push(AbiParam::new(types::I64));
                sig.params.push(AbiParam::new(types::I64));
                sig
            })
            .map_err(err)?;
        let form = Form::of(kernel, module.isa());
        let k = &form.kernel;
        let simd = form.simd;
        let data = module.declare_anonymous_data(false, false).map_err(err)?;
        let mut pool = ConstPool::new(module.declare_data_in_func(data, &mut ctx.func));
        ctx.func.signature.params.push(AbiParam::new(ptr));
        ctx.func.signature.params.push(AbiParam::new(types::I64));
        ctx.func.signature.params.push(AbiParam::new(types::I64));
        let funcs = host.declare_in(module, &mut ctx.func);
        let built = {
            let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
            let r = match &k.rows {
                Some(rows) => rows::build_rows(&mut b, k, rows, ptr, &funcs, simd, &mut pool),
                None => flat::build_flat(&mut b, k, ptr, &funcs, simd, &mut pool),
            };
            if r.is_ok() {
                b.finalize(module.target_config());
            }
            r
        };
        let text = ctx.func.display().to_string();
        // The table first: the function's relocations name it.
        recorder.table(data.as_u32(), pool.bytes());
        let result = built
            .and_then(|()| module.define_function(id, ctx).map_err(err))
            .and_then(|()| recorder.function(id.as_u32(), ctx));
        module.clear_context(ctx);
        module.define_data(data, &pool.into_data()).map_err(err)?;
        result.map(|()| (id, text))
    }
}

/// The form a kernel is compiled in, decided before any code is built (a form that fails to
/// build is an error, never a silent fallback to another). f16 and bf16 are computed in f32.
/// Then SIMD with polynomial transcendentals where the kernel allows ([`vectorizable`]) and
/// the CPU has the vector instructions the code uses (fma, rounding); else scalar, with
/// polynomial f32 transcendentals, unless f64 transcendentals call the interpreter's own
/// functions (so f64 results are its bits), which leaves the kernel unexpanded.
pub struct Form {
    pub kernel: Kernel,
    pub simd: bool,
}

impl Form {
    pub fn of(kernel: &Kernel, isa: &dyn TargetIsa) -> Form {
        let kernel = halves::expand_conversions(&halves::widen(kernel));
        let f64_math = kernel
            .body
            .iter()
            .any(|ins| ins.dtype == DType::F64 && math::expands(&ins.op, ins.dtype));
        let expanded = math::expand_guarded(&kernel);
        let vector_isa = isa.has_native_fma() && isa.has_round();
        if vector_isa && vectorizable(&expanded) {
            Form {
                kernel: expanded,
                simd: true,
            }
        } else if f64_math {
            Form {
                kernel,
                simd: false,
            }
        } else {
            Form {
                kernel: expanded,
                simd: false,
            }
        }
    }
}

pub fn compile(kernels: &[Kernel]) -> Result<Compiled, CodegenError> {
    let mut jit = Jit::new()?;
    let mut fctx = FunctionBuilderContext::new();
    let mut ids = Vec::with_capacity(kernels.len());
    let mut clif: Vec<String> = Vec::with_capacity(kernels.len());
    // Kernels that differ only in the program values their buffers hold (the steps of an
    // unrolled loop, a long chain cut into kernels) share one function.
    let mut compiled: HashMap<String, Vec<usize>> = HashMap::new();
    for (k, kernel) in kernels.iter().enumerate() {
        let candidates = compiled.entry(code_key(kernel)).or_default();
        if let Some(&same) = candidates.iter().find(|&&j| same_code(&kernels[j], kernel)) {
            ids.push(ids[same]);
            clif.push(clif[same].clone());
            continue;
        }
        candidates.push(k);
        if kernel
            .sig
            .buffers
            .iter()
            .any(|b| matches!(b.access, Access::Window { .. }))
        {
            return Err(CodegenError::Unsupported {
                kernel: kernel.name.clone(),
                what: "a window store (the GPU's)".into(),
            });
        }
        let (id, text) = jit.define(kernel, &mut fctx)?;
        ids.push(id);
        clif.push(text);
    }
    for id in &ids {
        jit.recorder.entry(id.as_u32())?;
    }
    jit.module.finalize_definitions().map_err(err)?;
    let entries = ids
        .into_iter()
        .map(|id| {
            let code = jit.module.get_finalized_function(id);
            // SAFETY: `code` was compiled from a function with exactly this signature.
            unsafe { std::mem::transmute::<*const u8, KernelFn>(code) }
        })
        .collect();
    let owner = Box::new(JitCode(Some(Mutex::new(jit.module))));
    // SAFETY: each entry was compiled from its kernel with `KernelFn`'s signature, into the
    // module `owner` holds, and the recorder recorded that code.
    let code = unsafe { Code::new(entries, jit.recorder.image, owner) };
    Ok(Compiled { code, clif })
}

/// A hash key for what `kernel`'s code depends on: everything but its name and the program
/// values its buffers hold. Equal kernels have equal keys; [`same_code`] decides.
fn code_key(kernel: &Kernel) -> String {
    let buffers: Vec<_> = buffer_layout(kernel).collect();
    format!(
        "{} {buffers:?} {:?} {:?}",
        kernel.len, kernel.body, kernel.rows
    )
}

/// Whether `a` and `b` compile to the same code (constants compared bit for bit).
fn same_code(a: &Kernel, b: &Kernel) -> bool {
    a.len == b.len && a.body == b.body && a.rows == b.rows && buffer_layout(a).eq(buffer_layout(b))
}

/// What the code of `kernel` knows of each buffer: its role, dtype and access, not its value.
fn buffer_layout(kernel: &Kernel) -> impl Iterator<Item = (Role, DType, Access)> + '_ {
    kernel
        .sig
        .buffers
        .iter()
        .map(|b| (b.role, b.dtype, b.access))
}
