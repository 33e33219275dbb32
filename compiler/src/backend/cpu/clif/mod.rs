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

use crate::kernel::halves::{self, is_half};
use crate::kernel::{math, Access, KInstr, KOp, Kernel, Role, Rows, Stage};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, Block, BlockArg, Endianness, FuncRef, GlobalValue, InstBuilder, MemFlagsData,
    Opcode, Type, Value,
};
use cranelift_codegen::ir::{StackSlotData, StackSlotKind};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::Variable;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{DataDescription, FuncId, Linkage, Module};
use ferrax_ir::{BinaryOp, CompareOp, DType, ReduceOp, Scalar, UnaryOp};
use std::collections::HashMap;

/// A compiled kernel's entry point.
pub type KernelFn = unsafe extern "C" fn(*const *mut u8, i64, i64);

#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    #[error("cranelift: {0}")]
    Cranelift(String),
    #[error("kernel {kernel}: {what} is not supported by the CPU code generator")]
    Unsupported { kernel: String, what: String },
}

fn err(e: impl std::fmt::Display) -> CodegenError {
    CodegenError::Cranelift(e.to_string())
}

extern "C" fn wide_unary(code: i32, x: f64) -> f64 {
    let op = usize::try_from(code)
        .ok()
        .and_then(|c| UnaryOp::ALL.get(c).copied());
    match op.and_then(ferrax_runtime::wide_unary) {
        Some(f) => f(x),
        None => f64::NAN,
    }
}

extern "C" fn pow_f64(a: f64, b: f64) -> f64 {
    a.powf(b)
}

extern "C" fn rem_f32(a: f32, b: f32) -> f32 {
    a % b
}

extern "C" fn rem_f64(a: f64, b: f64) -> f64 {
    a % b
}

/// Kernels compiled into one module, which must outlive every call of their entries.
pub struct Compiled {
    _module: JITModule,
    pub entries: Vec<KernelFn>,
    /// The Cranelift IR of each kernel, for dumps and snapshots.
    pub clif: Vec<String>,
}

fn clif_type(d: DType) -> Option<Type> {
    match d {
        DType::F32 => Some(types::F32),
        DType::F64 => Some(types::F64),
        DType::Bool => Some(types::I8),
        DType::I32 => Some(types::I32),
        DType::I64 => Some(types::I64),
        _ => None,
    }
}

/// The JIT module of one executable's kernels, and the helper functions they may call.
struct Jit {
    module: JITModule,
    helpers: [FuncId; 5],
    ctx: cranelift_codegen::Context,
}

impl Jit {
    /// Kernels skip Cranelift's mid-end: it would place each interleaved vector's
    /// instructions next to that vector's store, undoing the interleaving, and hoist the
    /// constants of long bodies out of loops into registers that then spill. Kernel code is
    /// emitted ready for the backend instead: constants read from a table where used,
    /// positions stepped without division, row values splatted once per row.
    fn new() -> Result<Jit, CodegenError> {
        let mut jb = JITBuilder::with_flags(
            &[("opt_level", "none")],
            cranelift_module::default_libcall_names(),
        )
        .map_err(err)?;
        jb.symbol("ferrax_wide_unary", wide_unary as *const u8);
        jb.symbol("ferrax_pow_f64", pow_f64 as *const u8);
        jb.symbol("ferrax_rem_f32", rem_f32 as *const u8);
        jb.symbol("ferrax_rem_f64", rem_f64 as *const u8);
        let mut module = JITModule::new(jb);
        let mut import = |name: &str, params: &[Type], ret: Type| {
            let mut sig = module.make_signature();
            sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
            sig.returns.push(AbiParam::new(ret));
            module
                .declare_function(name, Linkage::Import, &sig)
                .map_err(err)
        };
        let wide = import("ferrax_wide_unary", &[types::I32, types::F64], types::F64)?;
        let pow = import("ferrax_pow_f64", &[types::F64, types::F64], types::F64)?;
        let rem32 = import("ferrax_rem_f32", &[types::F32, types::F32], types::F32)?;
        let rem64 = import("ferrax_rem_f64", &[types::F64, types::F64], types::F64)?;
        let mut ctx = module.make_context();
        let beyond = define_host_beyond(&mut module, wide, &mut ctx)?;
        let helpers = [wide, pow, rem32, rem64, beyond];
        Ok(Jit {
            module,
            helpers,
            ctx,
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
            helpers,
            ctx,
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
        // f16 and bf16 computed in f32. Then SIMD with polynomial transcendentals where the
        // kernel allows; else scalar, with polynomial f32 transcendentals; f64 transcendentals
        // (or a target lacking an instruction, such as a vector fma) get the interpreter's own
        // functions.
        let kernel = &halves::expand_conversions(&halves::widen(kernel));
        let expanded = math::expand_guarded(kernel);
        let f64_math = kernel
            .body
            .iter()
            .any(|ins| ins.dtype == DType::F64 && math::expands(&ins.op, ins.dtype));
        let mut attempts = Vec::new();
        if vectorizable(&expanded) {
            attempts.push((&expanded, true));
        }
        if !f64_math {
            attempts.push((&expanded, false));
        }
        attempts.push((kernel, false));
        let mut last = None;
        for (k, simd) in attempts {
            let data = module.declare_anonymous_data(false, false).map_err(err)?;
            let mut pool = ConstPool {
                table: module.declare_data_in_func(data, &mut ctx.func),
                bytes: Vec::new(),
                offsets: HashMap::new(),
            };
            ctx.func.signature.params.push(AbiParam::new(ptr));
            ctx.func.signature.params.push(AbiParam::new(types::I64));
            ctx.func.signature.params.push(AbiParam::new(types::I64));
            let funcs = helpers.map(|id| module.declare_func_in_func(id, &mut ctx.func));
            let built = {
                let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
                let r = match &k.rows {
                    Some(rows) => build_rows(&mut b, k, rows, ptr, &funcs, simd, &mut pool),
                    None => build(&mut b, k, ptr, &funcs, simd, &mut pool),
                };
                b.finalize(module.target_config());
                r
            };
            let text = ctx.func.display().to_string();
            let result = built.and_then(|()| module.define_function(id, ctx).map_err(err));
            module.clear_context(ctx);
            let mut table = DataDescription::new();
            table.define(pool.bytes.into_boxed_slice());
            table.set_align(16);
            module.define_data(data, &table).map_err(err)?;
            match result {
                Ok(()) => return Ok((id, text)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| CodegenError::Cranelift("no attempt".into())))
    }
}

/// The layout of the buffer [`define_host_beyond`]'s function works in: the op's index in
/// `UnaryOp::ALL`, then a vector of arguments, then their results, updated in place.
const BEYOND_CODE: i32 = 0;
const BEYOND_ARGS: i32 = 16;
const BEYOND_RESULTS: i32 = 32;

/// A function `(buffer)` that replaces each result lane whose argument reaches
/// [`math::SIN_COS_F32_LIMIT`] by the host's f64 function of it, rounded once. It preserves
/// every register (`preserve_all`), so that a kernel's rarely taken call to it leaves the
/// kernel's register allocation alone; a call to the host function itself would clobber every
/// vector register and make the hot loop spill around it.
fn define_host_beyond(
    module: &mut JITModule,
    wide: FuncId,
    ctx: &mut cranelift_codegen::Context,
) -> Result<FuncId, CodegenError> {
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    sig.call_conv = CallConv::PreserveAll;
    sig.params.push(AbiParam::new(ptr));
    let id = module
        .declare_function("ferrax_host_beyond", Linkage::Local, &sig)
        .map_err(err)?;
    ctx.func.signature = sig;
    let wide = module.declare_func_in_func(wide, &mut ctx.func);
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let buffer = b.block_params(entry)[0];
    let flags = MemFlagsData::trusted();
    let code = b.ins().load(types::I32, flags, buffer, BEYOND_CODE);
    for lane in 0..LANES as i32 {
        let x = b
            .ins()
            .load(types::F32, flags, buffer, BEYOND_ARGS + 4 * lane);
        let big = beyond_limit(&mut b, x);
        let host = b.create_block();
        b.set_cold_block(host);
        let next = b.create_block();
        b.ins().brif(big, host, &[], next, &[]);
        b.switch_to_block(host);
        let x = b.ins().fpromote(types::F64, x);
        let call = b.ins().call(wide, &[code, x]);
        let y = b.inst_results(call)[0];
        let y = b.ins().fdemote(types::F32, y);
        b.ins().store(flags, y, buffer, BEYOND_RESULTS + 4 * lane);
        b.ins().jump(next, &[]);
        b.switch_to_block(next);
    }
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(module.target_config());
    module.define_function(id, ctx).map_err(err)?;
    module.clear_context(ctx);
    Ok(id)
}

pub fn compile(kernels: &[Kernel]) -> Result<Compiled, CodegenError> {
    let mut jit = Jit::new()?;
    let mut fctx = FunctionBuilderContext::new();
    let mut ids = Vec::with_capacity(kernels.len());
    let mut clif = Vec::with_capacity(kernels.len());
    for kernel in kernels {
        let (id, text) = jit.define(kernel, &mut fctx)?;
        ids.push(id);
        clif.push(text);
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
    Ok(Compiled {
        _module: jit.module,
        entries,
        clif,
    })
}

/// Elements per vector step of a SIMD kernel (128-bit vectors of f32/i32).
pub const LANES: i64 = 4;

/// Whether a kernel (with transcendentals already expanded) can run LANES elements at a time:
/// every value is f32, i32 or a bool mask (or f64 used only by `wide_op`s), buffers are
/// f32/i32 or f16/bf16 (whose conversions `halves::expand_conversions` spelled out), broadcast
/// patterns keep groups of LANES elements together, and every op has a vector form. A row
/// kernel vectorizes its element stages (any number of columns: the last few run as scalars);
/// its row stages are
/// scalar code whatever their types.
pub fn vectorizable(kernel: &Kernel) -> bool {
    let lanes = LANES as usize;
    if let Some(r) = &kernel.rows {
        let elem = |k: usize| matches!(r.stages[k], Stage::Elem(_));
        return kernel
            .body
            .iter()
            .enumerate()
            .all(|(k, ins)| match &ins.op {
                KOp::Load(b) | KOp::Store(b) if elem(k) => matches!(
                    kernel.sig.buffers[*b].dtype,
                    DType::F32 | DType::I32 | DType::F16 | DType::BF16
                ),
                KOp::Reduce(_) => ins.dtype == DType::F32,
                KOp::Beyond(_) => false,
                _ if elem(k) => {
                    vector_op(ins)
                        && ins.args.iter().all(|&a| {
                            elem(a)
                                || matches!(
                                    kernel.body[a].dtype,
                                    DType::F32 | DType::I32 | DType::Bool
                                )
                        })
                }
                _ => true,
            });
    }
    let buffers_ok = kernel
        .sig
        .buffers
        .iter()
        .all(|b| match (b.dtype, b.access) {
            // Each vector of a step loads, combines and stores its columns before the next
            // loads, so vectors of one step may share columns.
            (DType::F32, Access::Inner(n)) if matches!(b.role, Role::Partial(_)) => {
                n.is_multiple_of(lanes)
            }
            (_, _) if matches!(b.role, Role::Partial(_)) => false,
            // Bools are bytes: LANES of them widen into a lane mask, and narrow back.
            (DType::Bool, access) => access == Access::Each,
            // f16 and bf16 buffers hold 16-bit lanes of i32 vectors.
            (DType::F32 | DType::I32 | DType::F16 | DType::BF16, access) => match access {
                Access::Outer(n) | Access::Inner(n) => n.is_multiple_of(lanes),
                Access::Each | Access::Scalar => true,
            },
            _ => false,
        });
    let wide = wide_values(kernel);
    buffers_ok
        && kernel.body.iter().enumerate().all(|(k, ins)| {
            if wide[k] || ins.args.iter().any(|&a| wide[a]) {
                wide_op(kernel, ins, &wide)
            } else {
                vector_op(ins)
            }
        })
}

/// The values a vector kernel holds as two halves of two lanes: f64 and i64 values, and the
/// bools computed from them (their masks have 64-bit lanes).
fn wide_values(kernel: &Kernel) -> Vec<bool> {
    let mut wide = Vec::with_capacity(kernel.body.len());
    for ins in &kernel.body {
        let w = match ins.dtype {
            DType::F64 | DType::I64 => true,
            DType::Bool => ins.args.iter().any(|&a| wide[a]),
            _ => false,
        };
        wide.push(w);
    }
    wide
}

/// Whether an instruction has a vector form.
fn vector_op(ins: &KInstr) -> bool {
    matches!(ins.dtype, DType::F32 | DType::I32 | DType::Bool)
        && match &ins.op {
            KOp::Unary(u) => vector_unary(*u) && (ins.dtype != DType::Bool || *u == UnaryOp::Not),
            KOp::Binary(op) => match op {
                BinaryOp::Rem | BinaryOp::Pow => false,
                BinaryOp::Add
                | BinaryOp::Sub
                | BinaryOp::Mul
                | BinaryOp::Div
                | BinaryOp::Max
                | BinaryOp::Min
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor => true,
            },
            KOp::Reduce(_) => false,
            KOp::Load(_)
            | KOp::Const(_)
            | KOp::Compare(_)
            | KOp::Select
            | KOp::Clamp
            | KOp::Convert(_)
            | KOp::Fma
            | KOp::Bitcast
            | KOp::ShiftLeft(_)
            | KOp::ShiftRight(_)
            | KOp::Store(_)
            | KOp::Accumulate(_)
            | KOp::Beyond(_) => true,
        }
}

/// Unary ops with a vector form: round half away from zero and sign have none.
fn vector_unary(u: UnaryOp) -> bool {
    match u {
        UnaryOp::Round | UnaryOp::Sign => false,
        // Expanded into vector primitives before the kernel is built.
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Rsqrt
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Neg
        | UnaryOp::Abs
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::RoundEven
        | UnaryOp::Sqrt
        | UnaryOp::Not => true,
    }
}

/// Vectors a row kernel's pass loop computes per step, interleaved as in flat kernels
/// ([`FLAT_COPIES`]), each with its own accumulators to hide their latency; eight spill.
const ROW_COPIES: usize = 4;

/// The row kernel's code: for each row of `start..end`, the row stages and pass loops in order.
fn build_rows(
    b: &mut FunctionBuilder,
    kernel: &Kernel,
    r: &Rows,
    ptr: Type,
    funcs: &[FuncRef; 5],
    simd: bool,
    pool: &mut ConstPool,
) -> Result<(), CodegenError> {
    let unsupported = |what: String| CodegenError::Unsupported {
        kernel: kernel.name.clone(),
        what,
    };
    let flags = MemFlagsData::trusted();
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (args, start, end) = {
        let p = b.block_params(entry);
        (p[0], p[1], p[2])
    };
    let mut bases = Vec::with_capacity(kernel.sig.buffers.len());
    for k in 0..kernel.sig.buffers.len() {
        let offset = i32::try_from(k * ptr.bytes() as usize)
            .map_err(|_| unsupported("argument offset".into()))?;
        bases.push(b.ins().load(ptr, flags, args, offset));
    }
    let table = b.ins().symbol_value(ptr, pool.table);
    let mut consts = Consts { pool, base: table };
    let row_var = b.declare_var(types::I64);
    b.def_var(row_var, start);
    let head = b.create_block();
    let row_block = b.create_block();
    let exit = b.create_block();
    b.ins().jump(head, &[]);
    b.switch_to_block(head);
    let row = b.use_var(row_var);
    let more = b.ins().icmp(IntCC::SignedLessThan, row, end);
    b.ins().brif(more, row_block, &[], exit, &[]);
    b.switch_to_block(row_block);
    // Per-element buffers are addressed from the row's first element, so that a column's
    // address is one x86 addressing mode.
    let row_start = b.ins().imul_imm_s(row, r.cols as i64);
    let row_bases: Vec<Value> = kernel
        .sig
        .buffers
        .iter()
        .zip(&bases)
        .map(|(buffer, &base)| match buffer.access {
            Access::Each => {
                let shift = i64::from(buffer.dtype.size_bytes().trailing_zeros());
                let offset = b.ins().ishl_imm_u(row_start, shift);
                b.ins().iadd(base, offset)
            }
            _ => base,
        })
        .collect();
    let mut rc = RowCode {
        kernel,
        r,
        bases: &bases,
        row_bases: &row_bases,
        funcs,
        unsupported: &unsupported,
        row,
        values: HashMap::new(),
    };
    for pass in 0..=r.passes {
        for k in 0..kernel.body.len() {
            if r.stages[k] == Stage::Row(pass) && !matches!(kernel.body[k].op, KOp::Reduce(_)) {
                let v = rc.row_instr(b, k)?;
                rc.values.insert(k, v);
            }
        }
        if pass < r.passes {
            rc.pass(b, pass, simd, &mut consts)?;
        }
    }
    let next = b.ins().iadd_imm_s(row, 1);
    b.def_var(row_var, next);
    b.ins().jump(head, &[]);
    b.switch_to_block(exit);
    b.ins().return_(&[]);
    b.seal_all_blocks();
    Ok(())
}

/// The state of one row's code: the row's values (row stages, reductions) by kernel value.
struct RowCode<'a> {
    kernel: &'a Kernel,
    r: &'a Rows,
    bases: &'a [Value],
    /// Each buffer's base, moved to the row's first element for per-element buffers.
    row_bases: &'a [Value],
    funcs: &'a [FuncRef; 5],
    unsupported: &'a dyn Fn(String) -> CodegenError,
    row: Value,
    values: HashMap<usize, Value>,
}

fn reduce_step(b: &mut FunctionBuilder, op: ReduceOp, acc: Value, x: Value) -> Value {
    match op {
        ReduceOp::Max => b.ins().fmax(acc, x),
        ReduceOp::Min => b.ins().fmin(acc, x),
        ReduceOp::Sum => b.ins().fadd(acc, x),
        ReduceOp::Prod => b.ins().fmul(acc, x),
    }
}

/// A vector step of a max or min reduction in three instructions rather than the nine of
/// Cranelift's `fmax`/`fmin`: x86 `maxps`/`minps` in both operand orders, whose results
/// differ only where an operand is NaN (one of them is that NaN) or on a tie of zeros, joined
/// by a bitwise or, which keeps a NaN a NaN and makes a tie -0. That is min's answer; max
/// corrects its zeros at the end with [`positive_zeros`]. Sums add, products multiply.
fn vector_reduce_step(b: &mut FunctionBuilder, op: ReduceOp, acc: Value, x: Value) -> Value {
    // `x < y ? x : y` and `y < x ? x : y` lower to `minps x, y` and `maxps x, y`.
    let pick = |b: &mut FunctionBuilder, x: Value, y: Value, min: bool| {
        let lt = if min {
            b.ins().fcmp(FloatCC::LessThan, x, y)
        } else {
            b.ins().fcmp(FloatCC::LessThan, y, x)
        };
        let mask = b.ins().bitcast(types::F32X4, lanes(), lt);
        b.ins().bitselect(mask, x, y)
    };
    match op {
        ReduceOp::Max | ReduceOp::Min => {
            let min = op == ReduceOp::Min;
            let first = pick(b, x, acc, min);
            let second = pick(b, acc, x, min);
            b.ins().bor(first, second)
        }
        ReduceOp::Sum => b.ins().fadd(acc, x),
        ReduceOp::Prod => b.ins().fmul(acc, x),
    }
}

/// Flags of a bitcast between vector types.
fn lanes() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// The lanes of a max accumulator from [`vector_reduce_step`] with each zero made +0 where
/// the lane saw a +0 (`seen`, the unsigned minimum of the lane's bit patterns, is 0).
fn positive_zeros(b: &mut FunctionBuilder, acc: Value, seen: Value) -> Value {
    let zero = b.ins().f32const(0.0);
    let zeros = b.ins().splat(types::F32X4, zero);
    let is_zero = b.ins().fcmp(FloatCC::Equal, acc, zeros);
    let int_zero = b.ins().iconst(types::I32, 0);
    let int_zeros = b.ins().splat(types::I32X4, int_zero);
    let saw = b.ins().icmp(IntCC::Equal, seen, int_zeros);
    let both = b.ins().band(is_zero, saw);
    let mask = b.ins().bitcast(types::F32X4, lanes(), both);
    b.ins().bitselect(mask, zeros, acc)
}

/// A reduction's accumulators in a row kernel pass: `copies` vectors (SIMD), with, for max,
/// the unsigned minimum of each vector lane's bit patterns (see [`positive_zeros`]), and a
/// scalar for the columns past the last whole vector.
struct Accumulator {
    vecs: Vec<Variable>,
    seen: Vec<Variable>,
    scalar: Variable,
}

/// What one pass of a row kernel computes per column: its element instructions, the
/// reductions they feed with their accumulators (vector copies and a scalar), and the row
/// values splatted for the vector loop.
struct PassPlan {
    elems: Vec<usize>,
    reductions: Vec<(usize, ReduceOp)>,
    accs: Vec<Accumulator>,
    splats: HashMap<usize, Value>,
}

impl RowCode<'_> {
    fn address(&self, b: &mut FunctionBuilder, buffer: usize, col: Option<Value>) -> Value {
        let kernel = self.kernel;
        let size = kernel.sig.buffers[buffer].dtype.size_bytes();
        let (base, index) = match (kernel.sig.buffers[buffer].access, col) {
            (Access::Scalar, _) => return self.bases[buffer],
            (Access::Outer(_), _) | (_, None) => (self.bases[buffer], self.row),
            (Access::Inner(_), Some(c)) => (self.bases[buffer], c),
            (Access::Each, Some(c)) => (self.row_bases[buffer], c),
        };
        let offset = b.ins().ishl_imm_u(index, i64::from(size.trailing_zeros()));
        b.ins().iadd(base, offset)
    }

    /// A row-stage instruction (scalar code, run once per row).
    fn row_instr(&mut self, b: &mut FunctionBuilder, k: usize) -> Result<Value, CodegenError> {
        let ins = &self.kernel.body[k];
        let flags = MemFlagsData::trusted();
        let ty = clif_type(ins.dtype)
            .ok_or_else(|| (self.unsupported)(format!("dtype {}", ins.dtype)))?;
        Ok(match &ins.op {
            KOp::Load(buffer) => {
                let addr = self.address(b, *buffer, None);
                load_elements(b, kernel_dtype(self.kernel, *buffer), ty, flags, addr)
            }
            KOp::Store(buffer) => {
                let x = self.values[&ins.args[0]];
                let addr = self.address(b, *buffer, None);
                store_elements(b, kernel_dtype(self.kernel, *buffer), flags, x, addr);
                x
            }
            _ => {
                let args: Vec<Value> = ins.args.iter().map(|a| self.values[a]).collect();
                emit_op(b, ins, &args, false, self.funcs, self.unsupported)?
            }
        })
    }

    /// Row value `v` as a vector of LANES copies (a bool becomes a lane mask).
    fn splat(
        &self,
        b: &mut FunctionBuilder,
        v: Value,
        dtype: DType,
    ) -> Result<Value, CodegenError> {
        let ty = value_type(dtype, true)
            .ok_or_else(|| (self.unsupported)(format!("vector of {dtype}")))?;
        Ok(if dtype == DType::Bool {
            let wide = b.ins().uextend(types::I32, v);
            let mask = b.ins().ineg(wide);
            b.ins().splat(ty, mask)
        } else {
            b.ins().splat(ty, v)
        })
    }

    /// The loop of pass `pass` over the row, and the results of its reductions.
    fn pass(
        &mut self,
        b: &mut FunctionBuilder,
        pass: usize,
        simd: bool,
        consts: &mut Consts,
    ) -> Result<(), CodegenError> {
        let kernel = self.kernel;
        let body = &kernel.body;
        let stages = &self.r.stages;
        let elems: Vec<usize> = (0..body.len())
            .filter(|&k| stages[k] == Stage::Elem(pass))
            .collect();
        let reductions: Vec<(usize, ReduceOp)> = (0..body.len())
            .filter(|&k| stages[k] == Stage::Row(pass + 1))
            .filter_map(|k| match body[k].op {
                KOp::Reduce(op) => Some((k, op)),
                _ => None,
            })
            .collect();
        // Row values the loop reads, splatted once.
        let mut splats = HashMap::new();
        if simd {
            let used = elems
                .iter()
                .chain(reductions.iter().map(|(k, _)| k))
                .flat_map(|&k| body[k].args.iter().copied());
            for a in used {
                let constant = matches!(body[a].op, KOp::Const(_));
                if let (Stage::Row(_), false, std::collections::hash_map::Entry::Vacant(e)) =
                    (stages[a], constant, splats.entry(a))
                {
                    e.insert(self.splat(b, self.values[&a], body[a].dtype)?);
                }
            }
        }
        let cols = self.r.cols as i64;
        let copies = if simd { ROW_COPIES } else { 1 };
        let vectors = if simd { cols / LANES } else { 0 };
        let scalar_acc = |b: &mut FunctionBuilder, op: ReduceOp, dtype: DType| {
            let id = op.identity(DType::F64).to_f64();
            let v = if dtype == DType::F32 {
                b.ins().f32const(id as f32)
            } else {
                b.ins().f64const(id)
            };
            let var = b.declare_var(b.func.dfg.value_type(v));
            b.def_var(var, v);
            (var, v)
        };
        // Per reduction: `copies` vector accumulators (SIMD) and one scalar accumulator.
        let mut accs = Vec::new();
        for &(k, op) in &reductions {
            let (scalar, init) = scalar_acc(b, op, body[k].dtype);
            let (mut vecs, mut seen) = (Vec::new(), Vec::new());
            if simd {
                for _ in 0..copies {
                    let v = b.ins().splat(types::F32X4, init);
                    let var = b.declare_var(types::F32X4);
                    b.def_var(var, v);
                    vecs.push(var);
                    if op == ReduceOp::Max {
                        let all = b.ins().iconst(types::I32, -1);
                        let v = b.ins().splat(types::I32X4, all);
                        let var = b.declare_var(types::I32X4);
                        b.def_var(var, v);
                        seen.push(var);
                    }
                }
            }
            accs.push(Accumulator { vecs, seen, scalar });
        }
        let plan = PassPlan {
            elems,
            reductions,
            accs,
            splats,
        };
        // The main loop: `copies` vectors (or one scalar) per step.
        let step = if simd { LANES * copies as i64 } else { 1 };
        let (main_end, loop_copies) = if simd {
            (vectors / copies as i64 * step, copies)
        } else {
            (cols, 1)
        };
        if main_end > 0 {
            let col_var = b.declare_var(types::I64);
            let zero = b.ins().iconst(types::I64, 0);
            b.def_var(col_var, zero);
            let body_block = b.create_block();
            let after = b.create_block();
            b.ins().jump(body_block, &[]);
            b.switch_to_block(body_block);
            let col = b.use_var(col_var);
            let at: Vec<Value> = (0..loop_copies)
                .map(|u| match u {
                    0 => col,
                    _ => b.ins().iadd_imm_s(col, u as i64 * LANES),
                })
                .collect();
            let vector = simd.then_some(&mut *consts);
            self.elements(b, &plan, &at, vector)?;
            let next = b.ins().iadd_imm_s(col, step);
            b.def_var(col_var, next);
            let again = b.ins().icmp_imm_s(IntCC::SignedLessThan, next, main_end);
            b.ins().brif(again, body_block, &[], after, &[]);
            b.switch_to_block(after);
        }
        if simd {
            // Whole vectors after the unrolled loop, then single elements.
            let at: Vec<Value> = (main_end / LANES..vectors)
                .map(|v| b.ins().iconst(types::I64, v * LANES))
                .collect();
            if !at.is_empty() {
                let vector = Some(&mut *consts);
                self.elements(b, &plan, &at, vector)?;
            }
            for col in vectors * LANES..cols {
                let c = b.ins().iconst(types::I64, col);
                self.elements(b, &plan, &[c], None)?;
            }
        }
        for (&(k, op), acc) in plan.reductions.iter().zip(&plan.accs) {
            let mut total = b.use_var(acc.scalar);
            if !acc.vecs.is_empty() {
                let mut parts: Vec<Value> = acc.vecs.iter().map(|&v| b.use_var(v)).collect();
                for (part, &seen) in parts.iter_mut().zip(&acc.seen) {
                    let seen = b.use_var(seen);
                    *part = positive_zeros(b, *part, seen);
                }
                while parts.len() > 1 {
                    let mut pairs = Vec::with_capacity(parts.len().div_ceil(2));
                    for p in parts.chunks(2) {
                        pairs.push(if p.len() == 2 {
                            reduce_step(b, op, p[0], p[1])
                        } else {
                            p[0]
                        });
                    }
                    parts = pairs;
                }
                let lane = |b: &mut FunctionBuilder, l: u8| b.ins().extractlane(parts[0], l);
                let (l0, l1, l2, l3) = (lane(b, 0), lane(b, 1), lane(b, 2), lane(b, 3));
                let low = reduce_step(b, op, l0, l1);
                let high = reduce_step(b, op, l2, l3);
                let lanes = reduce_step(b, op, low, high);
                total = reduce_step(b, op, lanes, total);
            }
            self.values.insert(k, total);
        }
        Ok(())
    }

    /// A pass's element stage at columns `at` (vectors of LANES columns when `consts` is
    /// given, else single columns), each instruction emitted for every column in turn, and
    /// column `u`'s values folded into accumulator copy `u` of each reduction.
    fn elements(
        &self,
        b: &mut FunctionBuilder,
        plan: &PassPlan,
        at: &[Value],
        mut consts: Option<&mut Consts>,
    ) -> Result<(), CodegenError> {
        let kernel = self.kernel;
        let PassPlan {
            elems,
            reductions,
            accs,
            splats,
        } = plan;
        let vector = consts.is_some();
        let flags = if vector {
            MemFlagsData::new().with_notrap()
        } else {
            MemFlagsData::trusted()
        };
        let mut local = HashMap::new();
        // Vector constants load at their use, one load shared by the copies and by uses at
        // most two steps later (as in flat kernels, see `emit_body`).
        let mut loaded: HashMap<usize, (usize, Value)> = HashMap::new();
        let mut value =
            |b: &mut FunctionBuilder,
             local: &HashMap<(usize, usize), Value>,
             consts: &mut Option<&mut Consts>,
             step: usize,
             a,
             u| match (local.get(&(a, u)), consts, &kernel.body[a].op) {
                (Some(&v), _, _) => v,
                (None, Some(consts), KOp::Const(x)) => match loaded.get(&a) {
                    Some(&(when, v)) if step - when <= 2 => v,
                    _ => {
                        let v = consts.vector(b, *x).one();
                        loaded.insert(a, (step, v));
                        v
                    }
                },
                (None, Some(_), _) => splats[&a],
                (None, None, _) => self.values[&a],
            };
        for (step, &k) in elems.iter().enumerate() {
            let ins = &kernel.body[k];
            if vector && matches!(ins.op, KOp::Const(_)) {
                continue;
            }
            for (u, &col) in at.iter().enumerate() {
                let v = match &ins.op {
                    KOp::Load(buffer) => {
                        let ty = value_type(ins.dtype, vector)
                            .ok_or_else(|| (self.unsupported)(format!("dtype {}", ins.dtype)))?;
                        let addr = self.address(b, *buffer, Some(col));
                        load_elements(b, kernel_dtype(kernel, *buffer), ty, flags, addr)
                    }
                    KOp::Store(buffer) => {
                        let x = value(b, &local, &mut consts, step, ins.args[0], u);
                        let addr = self.address(b, *buffer, Some(col));
                        store_elements(b, kernel_dtype(kernel, *buffer), flags, x, addr);
                        x
                    }
                    _ => {
                        let args: Vec<Value> = ins
                            .args
                            .iter()
                            .map(|&a| value(b, &local, &mut consts, step, a, u))
                            .collect();
                        emit_op(b, ins, &args, vector, self.funcs, self.unsupported)?
                    }
                };
                local.insert((k, u), v);
            }
        }
        for (&(k, op), acc) in reductions.iter().zip(accs) {
            for u in 0..at.len() {
                let x = value(
                    b,
                    &local,
                    &mut consts,
                    elems.len(),
                    kernel.body[k].args[0],
                    u,
                );
                if !vector {
                    let sum = b.use_var(acc.scalar);
                    let next = reduce_step(b, op, sum, x);
                    b.def_var(acc.scalar, next);
                    continue;
                }
                let copy = u % acc.vecs.len();
                let var = acc.vecs[copy];
                let old = b.use_var(var);
                let next = vector_reduce_step(b, op, old, x);
                b.def_var(var, next);
                if let Some(&seen) = acc.seen.get(copy) {
                    let old = b.use_var(seen);
                    let bits = b.ins().bitcast(types::I32X4, lanes(), x);
                    let next = b.ins().umin(old, bits);
                    b.def_var(seen, next);
                }
            }
        }
        Ok(())
    }
}

fn build(
    b: &mut FunctionBuilder,
    kernel: &Kernel,
    ptr: Type,
    funcs: &[FuncRef; 5],
    simd: bool,
    pool: &mut ConstPool,
) -> Result<(), CodegenError> {
    let unsupported = |what: String| CodegenError::Unsupported {
        kernel: kernel.name.clone(),
        what,
    };
    let flags = MemFlagsData::trusted();
    let entry = b.create_block();
    let body = b.create_block();
    let exit = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (args, start, end) = {
        let p = b.block_params(entry);
        (p[0], p[1], p[2])
    };
    // Buffer base pointers, and scalar inputs loaded once.
    let mut bases = Vec::with_capacity(kernel.sig.buffers.len());
    let mut scalars: Vec<Option<Value>> = Vec::with_capacity(kernel.sig.buffers.len());
    for (k, buffer) in kernel.sig.buffers.iter().enumerate() {
        let offset = i32::try_from(k * ptr.bytes() as usize)
            .map_err(|_| unsupported("argument offset".into()))?;
        let base = b.ins().load(ptr, flags, args, offset);
        bases.push(base);
        let scalar = if buffer.access == Access::Scalar && buffer.role == Role::Input {
            let ty = match buffer.dtype {
                d if is_half(d) => Some(types::I32),
                d => clif_type(d),
            }
            .ok_or_else(|| unsupported(format!("dtype {}", buffer.dtype)))?;
            Some(load_elements(b, buffer.dtype, ty, flags, base))
        } else {
            None
        };
        scalars.push(scalar);
    }
    let divisors = Divisors::of(kernel);
    let tail = b.create_block();
    if simd {
        // Groups of `copies` whole vectors from `start` (a multiple of LANES), then the scalar
        // tail.
        let copies = FLAT_COPIES;
        let step = LANES * copies as i64;
        let vector = b.create_block();
        let count = b.ins().isub(end, start);
        let whole = b.ins().band_imm_s(count, -step);
        let vend = b.ins().iadd(start, whole);
        let any = b.ins().icmp(IntCC::SignedLessThan, start, vend);
        let first = divisors.at(b, start);
        let base = b.ins().symbol_value(ptr, pool.table);
        b.ins()
            .brif(any, vector, &first.args(), tail, &[start.into()]);
        b.switch_to_block(vector);
        let mut at = vec![divisors.params(b, vector)];
        for _ in 1..copies {
            let next = divisors.advance(b, &at[at.len() - 1], LANES);
            at.push(next);
        }
        let mut consts = Consts {
            pool: &mut *pool,
            base,
        };
        let mem = Memory {
            divisors: &divisors,
            bases: &bases,
            scalars: &scalars,
        };
        emit_body(b, kernel, &at, Some(&mut consts), &mem, funcs)?;
        let next = divisors.advance(b, &at[copies - 1], LANES);
        let more = b.ins().icmp(IntCC::SignedLessThan, next.i, vend);
        b.ins()
            .brif(more, vector, &next.args(), tail, &[next.i.into()]);
    } else {
        b.ins().jump(tail, &[start.into()]);
    }
    b.switch_to_block(tail);
    let from = b.append_block_param(tail, types::I64);
    let any = b.ins().icmp(IntCC::SignedLessThan, from, end);
    let first = divisors.at(b, from);
    b.ins().brif(any, body, &first.args(), exit, &[]);
    b.switch_to_block(body);
    let at = divisors.params(b, body);
    let mem = Memory {
        divisors: &divisors,
        bases: &bases,
        scalars: &scalars,
    };
    emit_body(b, kernel, std::slice::from_ref(&at), None, &mem, funcs)?;
    let next = divisors.advance(b, &at, 1);
    let more = b.ins().icmp(IntCC::SignedLessThan, next.i, end);
    b.ins().brif(more, body, &next.args(), exit, &[]);
    b.switch_to_block(exit);
    b.ins().return_(&[]);
    b.seal_all_blocks();
    Ok(())
}

/// Where a flat kernel's buffers are: base pointers, scalar inputs loaded once, and the
/// divisors that index broadcasts.
struct Memory<'a> {
    divisors: &'a Divisors,
    bases: &'a [Value],
    scalars: &'a [Option<Value>],
}

/// The row lengths `n` by which a flat kernel's broadcast buffers are indexed (`i / n`, `i % n`).
/// Loops carry each element's row and column for every such `n` and step them, so that no
/// division runs per element.
struct Divisors(Vec<usize>);

/// Element `i` of a flat loop, with its row and column for each of the kernel's [`Divisors`].
struct Position {
    i: Value,
    rows_cols: Vec<(Value, Value)>,
}

impl Position {
    fn args(&self) -> Vec<BlockArg> {
        std::iter::once(self.i)
            .chain(self.rows_cols.iter().flat_map(|&(r, c)| [r, c]))
            .map(BlockArg::from)
            .collect()
    }
}

impl Divisors {
    fn of(kernel: &Kernel) -> Divisors {
        let mut ns: Vec<usize> = kernel
            .sig
            .buffers
            .iter()
            .filter_map(|b| match b.access {
                Access::Outer(n) | Access::Inner(n) => Some(n),
                Access::Each | Access::Scalar => None,
            })
            .collect();
        ns.sort_unstable();
        ns.dedup();
        Divisors(ns)
    }

    /// Element `i`'s position, by division (once per loop entry).
    fn at(&self, b: &mut FunctionBuilder, i: Value) -> Position {
        let rows_cols = self
            .0
            .iter()
            .map(|&n| {
                (
                    b.ins().udiv_imm_u(i, n as i64),
                    b.ins().urem_imm_u(i, n as i64),
                )
            })
            .collect();
        Position { i, rows_cols }
    }

    /// A position as the parameters of loop block `block`.
    fn params(&self, b: &mut FunctionBuilder, block: Block) -> Position {
        let i = b.append_block_param(block, types::I64);
        let rows_cols = self
            .0
            .iter()
            .map(|_| {
                (
                    b.append_block_param(block, types::I64),
                    b.append_block_param(block, types::I64),
                )
            })
            .collect();
        Position { i, rows_cols }
    }

    /// The position `k` elements on, `k` at most every divisor.
    fn advance(&self, b: &mut FunctionBuilder, p: &Position, k: i64) -> Position {
        let i = b.ins().iadd_imm_s(p.i, k);
        let rows_cols = self
            .0
            .iter()
            .zip(&p.rows_cols)
            .map(|(&n, &(row, col))| {
                let col = b.ins().iadd_imm_s(col, k);
                let wrap = b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, col, n as i64);
                let wrapped = b.ins().iadd_imm_s(col, -(n as i64));
                let col = b.ins().select(wrap, wrapped, col);
                let carry = b.ins().uextend(types::I64, wrap);
                (b.ins().iadd(row, carry), col)
            })
            .collect();
        Position { i, rows_cols }
    }

    /// The element index of buffer access `access` at `p` (`None` for a row length that is
    /// not one of the divisors).
    fn index(&self, p: &Position, access: Access) -> Option<Value> {
        let of = |n: usize| self.0.iter().position(|&m| m == n).map(|k| p.rows_cols[k]);
        match access {
            Access::Outer(n) => of(n).map(|rc| rc.0),
            Access::Inner(n) => of(n).map(|rc| rc.1),
            Access::Each | Access::Scalar => Some(p.i),
        }
    }
}

/// One instruction other than a load or store, on argument values `args` (scalars, or vectors
/// of LANES elements).
fn emit_op(
    b: &mut FunctionBuilder,
    ins: &KInstr,
    args: &[Value],
    vector: bool,
    funcs: &[FuncRef; 5],
    unsupported: &dyn Fn(String) -> CodegenError,
) -> Result<Value, CodegenError> {
    let ty =
        value_type(ins.dtype, vector).ok_or_else(|| unsupported(format!("dtype {}", ins.dtype)))?;
    let arg = |k: usize| args[k];
    let lanes = lanes();
    let v = match &ins.op {
        KOp::Const(s) => {
            let x = match (*s, vector) {
                (Scalar::F32(x), _) => b.ins().f32const(x),
                (Scalar::F64(x), _) => b.ins().f64const(x),
                (Scalar::Bool(x), false) => b.ins().iconst(types::I8, i64::from(x)),
                (Scalar::Bool(x), true) => b.ins().iconst(types::I32, -i64::from(x)),
                (Scalar::I32(x), _) => b.ins().iconst(types::I32, i64::from(x)),
                (Scalar::I64(x), _) => b.ins().iconst(types::I64, x),
                (other, _) => return Err(unsupported(format!("constant of {}", other.dtype()))),
            };
            if vector {
                b.ins().splat(ty, x)
            } else {
                x
            }
        }
        KOp::Unary(UnaryOp::Not) if ins.dtype == DType::Bool => {
            if vector {
                b.ins().bnot(arg(0))
            } else {
                let one = b.ins().iconst(types::I8, 1);
                b.ins().bxor(arg(0), one)
            }
        }
        KOp::Binary(op) if ty.lane_type().is_int() => {
            let (x, y) = (arg(0), arg(1));
            match op {
                BinaryOp::Add => b.ins().iadd(x, y),
                BinaryOp::Sub => b.ins().isub(x, y),
                BinaryOp::Mul => b.ins().imul(x, y),
                BinaryOp::Max => b.ins().smax(x, y),
                BinaryOp::Min => b.ins().smin(x, y),
                BinaryOp::And => b.ins().band(x, y),
                BinaryOp::Or => b.ins().bor(x, y),
                BinaryOp::Xor => b.ins().bxor(x, y),
                other => return Err(unsupported(format!("integer {}", other.name()))),
            }
        }
        KOp::Compare(c) if b.func.dfg.value_type(arg(0)).lane_type().is_int() => {
            let cc = match c {
                CompareOp::Eq => IntCC::Equal,
                CompareOp::Ne => IntCC::NotEqual,
                CompareOp::Lt => IntCC::SignedLessThan,
                CompareOp::Le => IntCC::SignedLessThanOrEqual,
                CompareOp::Gt => IntCC::SignedGreaterThan,
                CompareOp::Ge => IntCC::SignedGreaterThanOrEqual,
            };
            b.ins().icmp(cc, arg(0), arg(1))
        }
        KOp::Fma => b.ins().fma(arg(0), arg(1), arg(2)),
        KOp::Bitcast if vector => b.ins().bitcast(ty, lanes, arg(0)),
        KOp::Bitcast => b.ins().bitcast(ty, MemFlagsData::new(), arg(0)),
        KOp::ShiftLeft(n) => b.ins().ishl_imm_u(arg(0), i64::from(*n)),
        KOp::ShiftRight(n) => b.ins().sshr_imm_u(arg(0), i64::from(*n)),
        KOp::Unary(u) if ty.lane_type().is_int() => match u {
            UnaryOp::Neg => b.ins().ineg(arg(0)),
            UnaryOp::Not => b.ins().bnot(arg(0)),
            other => return Err(unsupported(format!("integer {}", other.name()))),
        },
        KOp::Unary(u) => {
            let x = arg(0);
            match u {
                UnaryOp::Neg => b.ins().fneg(x),
                UnaryOp::Abs => b.ins().fabs(x),
                UnaryOp::Sqrt => b.ins().sqrt(x),
                UnaryOp::Floor => b.ins().floor(x),
                UnaryOp::Ceil => b.ins().ceil(x),
                UnaryOp::RoundEven => b.ins().nearest(x),
                UnaryOp::Not => return Err(unsupported("not".into())),
                other if vector => return Err(unsupported(format!("vector {}", other.name()))),
                other => host_unary(b, *other, x, funcs),
            }
        }
        KOp::Binary(op) => {
            let (x, y) = (arg(0), arg(1));
            match op {
                BinaryOp::Add => b.ins().fadd(x, y),
                BinaryOp::Sub => b.ins().fsub(x, y),
                BinaryOp::Mul => b.ins().fmul(x, y),
                BinaryOp::Div => b.ins().fdiv(x, y),
                BinaryOp::Max => b.ins().fmax(x, y),
                BinaryOp::Min => b.ins().fmin(x, y),
                BinaryOp::Rem | BinaryOp::Pow if vector => {
                    return Err(unsupported(format!("vector {}", op.name())))
                }
                BinaryOp::Rem => {
                    let f = if ty == types::F32 { funcs[2] } else { funcs[3] };
                    let call = b.ins().call(f, &[x, y]);
                    b.inst_results(call)[0]
                }
                BinaryOp::Pow => {
                    let (wx, wy) = if ty == types::F32 {
                        (
                            b.ins().fpromote(types::F64, x),
                            b.ins().fpromote(types::F64, y),
                        )
                    } else {
                        (x, y)
                    };
                    let call = b.ins().call(funcs[1], &[wx, wy]);
                    let r = b.inst_results(call)[0];
                    if ty == types::F32 {
                        b.ins().fdemote(types::F32, r)
                    } else {
                        r
                    }
                }
                other => return Err(unsupported(other.name().into())),
            }
        }
        KOp::Compare(c) => {
            let cc = match c {
                CompareOp::Eq => FloatCC::Equal,
                CompareOp::Ne => FloatCC::NotEqual,
                CompareOp::Lt => FloatCC::LessThan,
                CompareOp::Le => FloatCC::LessThanOrEqual,
                CompareOp::Gt => FloatCC::GreaterThan,
                CompareOp::Ge => FloatCC::GreaterThanOrEqual,
            };
            b.ins().fcmp(cc, arg(0), arg(1))
        }
        KOp::Select if vector => {
            // x64 selects with one blend where it sees the mask is a compare's: a float
            // compare's as a float mask (also the `maxps`/`minps` pattern of a clamp), anything
            // else (an integer compare, a bool buffer's lanes) with the data as integers.
            let mask = arg(0);
            let def = b.func.dfg.value_def(mask).inst();
            let float_compare = def.is_some_and(|i| b.func.dfg.insts[i].opcode() == Opcode::Fcmp);
            if ty == types::I32X4 {
                b.ins().bitselect(mask, arg(1), arg(2))
            } else if float_compare {
                let mask = b.ins().bitcast(ty, lanes, mask);
                b.ins().bitselect(mask, arg(1), arg(2))
            } else {
                let x = b.ins().bitcast(types::I32X4, lanes, arg(1));
                let y = b.ins().bitcast(types::I32X4, lanes, arg(2));
                let picked = b.ins().bitselect(mask, x, y);
                b.ins().bitcast(ty, lanes, picked)
            }
        }
        KOp::Select => b.ins().select(arg(0), arg(1), arg(2)),
        KOp::Clamp if ty.lane_type().is_int() => {
            let low = b.ins().smax(arg(1), arg(0));
            b.ins().smin(low, arg(2))
        }
        KOp::Clamp => {
            let low = b.ins().fmax(arg(1), arg(0));
            b.ins().fmin(low, arg(2))
        }
        KOp::Convert(to) => match (ty, b.func.dfg.value_type(arg(0)), to) {
            (types::F64, types::F32, _) => b.ins().fpromote(types::F64, arg(0)),
            (types::F32, types::F64, _) => b.ins().fdemote(types::F32, arg(0)),
            (t, u, _) if t == u => arg(0),
            (t, u, _) if t.lane_type().is_int() && u.lane_type().is_float() => {
                b.ins().fcvt_to_sint_sat(t, arg(0))
            }
            (t, u, _) if t.lane_type().is_float() && u.lane_type().is_int() => {
                b.ins().fcvt_from_sint(t, arg(0))
            }
            (t, u, _) if t.is_int() && u.is_int() && t.bits() < u.bits() => {
                b.ins().ireduce(t, arg(0))
            }
            _ => return Err(unsupported(format!("convert to {to}"))),
        },
        KOp::Beyond(u) if !vector => {
            // One element: a branch to the host's function when |x| reaches the limit.
            let big = beyond_limit(b, arg(0));
            let host = b.create_block();
            b.set_cold_block(host);
            let join = b.create_block();
            let result = b.append_block_param(join, ty);
            b.ins().brif(big, host, &[], join, &[arg(1).into()]);
            b.switch_to_block(host);
            let exact = host_unary(b, *u, arg(0), funcs);
            b.ins().jump(join, &[exact.into()]);
            b.switch_to_block(join);
            result
        }
        KOp::Load(_) | KOp::Store(_) | KOp::Reduce(_) | KOp::Beyond(_) | KOp::Accumulate(_) => {
            return Err(unsupported(format!("{:?} outside its stage", ins.op)))
        }
    };
    Ok(v)
}

/// Whether scalar f32 `x` has a magnitude of at least [`math::SIN_COS_F32_LIMIT`] (infinities
/// and NaNs included), compared as integer bits.
fn beyond_limit(b: &mut FunctionBuilder, x: Value) -> Value {
    let bits = b.ins().bitcast(types::I32, MemFlagsData::new(), x);
    let magnitude = b.ins().band_imm_s(bits, i64::from(i32::MAX));
    let limit = i64::from(math::SIN_COS_F32_LIMIT.to_bits());
    b.ins()
        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, magnitude, limit)
}

/// The index of `op` in `UnaryOp::ALL`, by which the host function `wide_unary` knows it.
fn unary_code(op: UnaryOp) -> i64 {
    UnaryOp::ALL.iter().position(|&o| o == op).unwrap_or(0) as i64
}

/// Scalar `op(x)` by the host's f64 function (the interpreter's): an f32 `x` is widened and
/// the result rounded once.
fn host_unary(b: &mut FunctionBuilder, op: UnaryOp, x: Value, funcs: &[FuncRef; 5]) -> Value {
    let narrow = b.func.dfg.value_type(x) == types::F32;
    let code = b.ins().iconst(types::I32, unary_code(op));
    let wide = if narrow {
        b.ins().fpromote(types::F64, x)
    } else {
        x
    };
    let call = b.ins().call(funcs[0], &[code, wide]);
    let r = b.inst_results(call)[0];
    if narrow {
        b.ins().fdemote(types::F32, r)
    } else {
        r
    }
}

/// [`KOp::Beyond`] over the vectors `xs` (arguments) and `ys` (their expansions): one
/// test of all their lanes, and only if some lane reaches the limit, each such lane computed
/// by the host (through [`define_host_beyond`]'s function). A lane's result depends on its own
/// argument alone.
fn host_beyond_vectors(
    b: &mut FunctionBuilder,
    op: UnaryOp,
    xs: &[Value],
    ys: &[Value],
    funcs: &[FuncRef; 5],
    consts: &mut Consts,
) -> Vec<Value> {
    // The largest magnitude (bits without the sign) over every lane, against the limit.
    let magnitudes: Vec<Value> = xs
        .iter()
        .map(|&x| {
            let bits = b.ins().bitcast(types::I32X4, lanes(), x);
            let sign_off = consts.vector(b, Scalar::I32(i32::MAX)).one();
            b.ins().band(bits, sign_off)
        })
        .collect();
    let Some(top) = magnitudes.into_iter().reduce(|t, m| b.ins().smax(t, m)) else {
        return ys.to_vec();
    };
    let below = i32::try_from(math::SIN_COS_F32_LIMIT.to_bits() - 1).unwrap_or(i32::MAX);
    let below = consts.vector(b, Scalar::I32(below)).one();
    let big = b.ins().icmp(IntCC::SignedGreaterThan, top, below);
    let any = b.ins().vany_true(big);
    let host = b.create_block();
    b.set_cold_block(host);
    let join = b.create_block();
    let results: Vec<Value> = ys
        .iter()
        .map(|_| b.append_block_param(join, types::F32X4))
        .collect();
    let passed: Vec<BlockArg> = ys.iter().map(|&y| y.into()).collect();
    b.ins().brif(any, host, &[], join, &passed);
    b.switch_to_block(host);
    let slot = b.create_sized_stack_slot(StackSlotData::new(
        StackSlotKind::ExplicitSlot,
        BEYOND_RESULTS as u32 + 16,
        4,
    ));
    let buffer = b.ins().stack_addr(types::I64, slot, 0);
    let code = b.ins().iconst(types::I32, unary_code(op));
    let flags = MemFlagsData::trusted();
    b.ins().store(flags, code, buffer, BEYOND_CODE);
    let mut fixed = Vec::with_capacity(ys.len());
    for (&x, &y) in xs.iter().zip(ys) {
        b.ins().store(flags, x, buffer, BEYOND_ARGS);
        b.ins().store(flags, y, buffer, BEYOND_RESULTS);
        b.ins().call(funcs[4], &[buffer]);
        let y = b.ins().load(types::F32X4, flags, buffer, BEYOND_RESULTS);
        fixed.push(y.into());
    }
    b.ins().jump(join, &fixed);
    b.switch_to_block(join);
    results
}

/// The clif type of kernel values of `d`: scalar, or a 4-lane vector (bools become lane masks).
fn value_type(d: DType, vector: bool) -> Option<Type> {
    if !vector {
        return clif_type(d);
    }
    match d {
        DType::F32 => Some(types::F32X4),
        DType::I32 | DType::Bool => Some(types::I32X4),
        DType::F64 => Some(types::F64X2),
        DType::I64 => Some(types::I64X2),
        _ => None,
    }
}

/// The vector constants of a kernel, in a read-only table of 16-byte entries, one per value:
/// each use (with the interleaved copies of its instruction) loads its entry, one instruction
/// where a splat is two, and no register holds a constant across a long body.
struct ConstPool {
    table: GlobalValue,
    bytes: Vec<u8>,
    offsets: HashMap<[u8; 16], i32>,
}

/// A [`ConstPool`] and its address in the function being built.
struct Consts<'a> {
    pool: &'a mut ConstPool,
    base: Value,
}

impl Consts<'_> {
    /// `x` in every lane: an f64 or i64 fills both halves of a vector of such values, and a
    /// bool is a lane mask.
    fn vector(&mut self, b: &mut FunctionBuilder, x: Scalar) -> Val {
        let (ty, lane): (Type, Vec<u8>) = match x {
            Scalar::F32(v) => (types::F32X4, v.to_le_bytes().to_vec()),
            Scalar::F64(v) => (types::F64X2, v.to_le_bytes().to_vec()),
            Scalar::I32(v) => (types::I32X4, v.to_le_bytes().to_vec()),
            Scalar::I64(v) => (types::I64X2, v.to_le_bytes().to_vec()),
            Scalar::Bool(v) => (types::I32X4, (-i32::from(v)).to_le_bytes().to_vec()),
            _ => (types::I64X2, 0i64.to_le_bytes().to_vec()),
        };
        let entry: [u8; 16] = std::array::from_fn(|i| lane[i % lane.len()]);
        let pool = &mut *self.pool;
        let offset = *pool.offsets.entry(entry).or_insert_with(|| {
            pool.bytes.extend(entry);
            i32::try_from(pool.bytes.len() - 16).unwrap_or(i32::MAX)
        });
        let flags = MemFlagsData::trusted().with_readonly();
        let v = b.ins().load(ty, flags, self.base, offset);
        if ty == types::F64X2 || ty == types::I64X2 {
            Val::Halves(v, v)
        } else {
            Val::One(v)
        }
    }
}

/// A kernel value in generated code: one clif value, or in a vector kernel an f64 value, as the
/// two f64x2 halves of its LANES lanes.
#[derive(Clone, Copy)]
enum Val {
    One(Value),
    Halves(Value, Value),
}

impl Val {
    /// The value of a 32-bit (or scalar) kernel value; [`wide_op`] keeps halves out of ops
    /// that take these.
    fn one(self) -> Value {
        match self {
            Val::One(v) | Val::Halves(v, _) => v,
        }
    }
}

/// `emit_op`, and in a vector kernel the f64 ops of [`wide_op`]: each runs on both halves;
/// conversions from f32 widen the low and high lane pairs, conversions to f32 narrow both
/// halves and join them.
fn emit_val(
    b: &mut FunctionBuilder,
    ins: &KInstr,
    args: &[Val],
    vector: bool,
    funcs: &[FuncRef; 5],
    unsupported: &dyn Fn(String) -> CodegenError,
) -> Result<Val, CodegenError> {
    let lanes = lanes();
    let shuffle = |b: &mut FunctionBuilder, x: Value, y: Value, mask: [u8; 16]| {
        let mask = b.func.dfg.immediates.push(mask.to_vec().into());
        let x = b.ins().bitcast(types::I8X16, lanes, x);
        let y = b.ins().bitcast(types::I8X16, lanes, y);
        let joined = b.ins().shuffle(x, y, mask);
        b.ins().bitcast(types::F32X4, lanes, joined)
    };
    let wide = matches!(ins.dtype, DType::F64 | DType::I64)
        || args.iter().any(|a| matches!(a, Val::Halves(..)));
    if !vector || !wide {
        let args: Vec<Value> = args.iter().map(|a| a.one()).collect();
        return emit_op(b, ins, &args, vector, funcs, unsupported).map(Val::One);
    }
    Ok(match (&ins.op, args) {
        (KOp::Convert(DType::F64), &[Val::One(x)]) => {
            let upper: [u8; 16] = std::array::from_fn(|i| 8 + (i % 8) as u8);
            let high = shuffle(b, x, x, upper);
            Val::Halves(b.ins().fvpromote_low(x), b.ins().fvpromote_low(high))
        }
        (KOp::Convert(DType::F32), &[Val::Halves(lo, hi)]) => {
            let (lo, hi) = (b.ins().fvdemote(lo), b.ins().fvdemote(hi));
            let low_pairs: [u8; 16] = std::array::from_fn(|i| (i % 8 + i / 8 * 16) as u8);
            Val::One(shuffle(b, lo, hi, low_pairs))
        }
        (KOp::Bitcast, &[Val::Halves(lo, hi)]) if ins.dtype == DType::I64 => Val::Halves(
            b.ins().bitcast(types::I64X2, lanes, lo),
            b.ins().bitcast(types::I64X2, lanes, hi),
        ),
        (KOp::Convert(DType::I32), &[Val::Halves(lo, hi)]) => {
            let low_words: [u8; 16] = std::array::from_fn(|i| (i % 4 + i / 4 * 8) as u8);
            let words = shuffle(b, lo, hi, low_words);
            Val::One(b.ins().bitcast(types::I32X4, lanes, words))
        }
        (KOp::Select, &[Val::Halves(m0, m1), Val::Halves(x0, x1), Val::Halves(y0, y1)]) => {
            // A mask of 64-bit lanes, as the data's type.
            let ty = b.func.dfg.value_type(x0);
            let mut pick = |m: Value, x: Value, y: Value| {
                let m = if b.func.dfg.value_type(m) == ty {
                    m
                } else {
                    b.ins().bitcast(ty, lanes, m)
                };
                b.ins().bitselect(m, x, y)
            };
            Val::Halves(pick(m0, x0, y0), pick(m1, x1, y1))
        }
        (_, args) => {
            let halves: Option<Vec<(Value, Value)>> = args
                .iter()
                .map(|a| match a {
                    Val::Halves(lo, hi) => Some((*lo, *hi)),
                    Val::One(_) => None,
                })
                .collect();
            let halves = halves.ok_or_else(|| unsupported("f64 op on f32 lanes".into()))?;
            let (lo, hi): (Vec<Value>, Vec<Value>) = halves.into_iter().unzip();
            Val::Halves(
                emit_op(b, ins, &lo, true, funcs, unsupported)?,
                emit_op(b, ins, &hi, true, funcs, unsupported)?,
            )
        }
    })
}

/// Whether a vector kernel runs `ins`, which makes or uses wide values ([`wide_values`]), as
/// two halves: f64 arithmetic, i64 integer arithmetic and shifts, bit casts between them,
/// compares and bool logic on them, selects of f64 values, and conversions between f32 and
/// f64 and from i64 to i32 (f32 sin and cos reduce in f64; f32 pow computes in f64).
fn wide_op(kernel: &Kernel, ins: &KInstr, wide: &[bool]) -> bool {
    let args_are = |d: DType| ins.args.iter().all(|&a| kernel.body[a].dtype == d);
    let all_wide = ins.args.iter().all(|&a| wide[a]);
    match (&ins.op, ins.dtype) {
        (KOp::Convert(_), DType::F64) => args_are(DType::F32) || args_are(DType::F64),
        (KOp::Convert(_), DType::F32) => args_are(DType::F64),
        (KOp::Convert(_), DType::I32) => args_are(DType::I64),
        (KOp::Bitcast, DType::I64) => args_are(DType::F64),
        (KOp::Bitcast, DType::F64) => args_are(DType::I64),
        _ if !all_wide => false,
        (op, DType::F64) => match op {
            KOp::Const(_) | KOp::Fma | KOp::Select => true,
            KOp::Unary(u) => matches!(
                u,
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::RoundEven
            ),
            KOp::Binary(b) => matches!(
                b,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
            ),
            _ => false,
        },
        (op, DType::I64) => match op {
            KOp::Const(_) | KOp::ShiftLeft(_) | KOp::ShiftRight(_) => true,
            KOp::Binary(b) => matches!(
                b,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::And | BinaryOp::Or | BinaryOp::Xor
            ),
            _ => false,
        },
        (op, DType::Bool) => match op {
            KOp::Compare(_) => args_are(DType::F64) || args_are(DType::I64),
            KOp::Unary(u) => *u == UnaryOp::Not,
            KOp::Binary(b) => matches!(b, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor),
            _ => false,
        },
        _ => false,
    }
}

/// Vectors a flat kernel's loop computes per step, their instructions interleaved so that each
/// vector's dependency chains overlap the others' and both FMA pipes stay busy; eight spill
/// the 16 vector registers in transcendental bodies. A power of two: the loop's bound is the
/// element count masked to a multiple of the step.
const FLAT_COPIES: usize = 4;
const _: () = assert!(FLAT_COPIES.is_power_of_two());

/// The kernel's body for elements `at` (one element each, or vectors of LANES elements at
/// multiples of LANES), each instruction emitted for every element in turn.
fn emit_body(
    b: &mut FunctionBuilder,
    kernel: &Kernel,
    at: &[Position],
    mut consts: Option<&mut Consts>,
    mem: &Memory,
    funcs: &[FuncRef; 5],
) -> Result<(), CodegenError> {
    let vector = consts.is_some();
    let unsupported = |what: String| CodegenError::Unsupported {
        kernel: kernel.name.clone(),
        what,
    };
    let flags = MemFlagsData::trusted();
    // Vectors are only element-aligned.
    let vflags = MemFlagsData::new().with_notrap();
    let mut values: Vec<Vec<Val>> = Vec::with_capacity(kernel.body.len());
    // A vector constant is loaded where it is used (see `ConstPool`), so that no register holds
    // it across the body. The interleaved copies of one instruction and uses a step or two
    // apart share one load: the register lives a few instructions, and a clamp's compare and
    // select see one value and become `maxps`/`minps`. (x86 could fold a load used once into
    // its instruction, but Cranelift folds almost none here, and a load per use and copy costs
    // more than the register it saves.)
    let mut deferred: Vec<Option<Scalar>> = Vec::with_capacity(kernel.body.len());
    let mut loaded: HashMap<usize, (usize, Val)> = HashMap::new();
    for (k, ins) in kernel.body.iter().enumerate() {
        let ty = value_type(ins.dtype, vector)
            .ok_or_else(|| unsupported(format!("dtype {}", ins.dtype)))?;
        if let (KOp::Const(x), true) = (&ins.op, vector) {
            values.push(Vec::new());
            deferred.push(Some(*x));
            continue;
        }
        if let (KOp::Beyond(u), Some(table)) = (&ins.op, &mut consts) {
            let mut per_vector = |b: &mut FunctionBuilder, a: usize| -> Vec<Value> {
                match deferred[a] {
                    Some(x) => at.iter().map(|_| table.vector(b, x).one()).collect(),
                    None => values[a].iter().map(|v| v.one()).collect(),
                }
            };
            let xs = per_vector(b, ins.args[0]);
            let ys = per_vector(b, ins.args[1]);
            let results = host_beyond_vectors(b, *u, &xs, &ys, funcs, table);
            values.push(results.into_iter().map(Val::One).collect());
            deferred.push(None);
            continue;
        }
        let mut copies = Vec::with_capacity(at.len());
        for (c, p) in at.iter().enumerate() {
            let mut operand = |b: &mut FunctionBuilder, a: usize| match (deferred[a], &mut consts) {
                (Some(x), Some(consts)) => match loaded.get(&a) {
                    Some(&(when, v)) if k - when <= 2 => v,
                    _ => {
                        let v = consts.vector(b, x);
                        loaded.insert(a, (k, v));
                        v
                    }
                },
                _ => values[a][c],
            };
            let address = |b: &mut FunctionBuilder, buffer: usize| {
                let size = kernel.sig.buffers[buffer].dtype.size_bytes();
                let index = mem
                    .divisors
                    .index(p, kernel.sig.buffers[buffer].access)
                    .ok_or_else(|| unsupported("a broadcast without its row length".into()))?;
                // A shift, which x64 folds into the address (element sizes are powers of two).
                let offset = b.ins().ishl_imm_u(index, i64::from(size.trailing_zeros()));
                Ok::<Value, CodegenError>(b.ins().iadd(mem.bases[buffer], offset))
            };
            let v = match &ins.op {
                KOp::Load(buffer) => {
                    let access = kernel.sig.buffers[*buffer].access;
                    match (mem.scalars[*buffer], vector, access) {
                        (Some(s), false, _) => s,
                        (Some(s), true, _) => b.ins().splat(ty, s),
                        (None, true, Access::Outer(_)) => {
                            // All lanes share one row (`i` and `n` are multiples of LANES).
                            let addr = address(b, *buffer)?;
                            let dtype = kernel_dtype(kernel, *buffer);
                            let x = load_elements(b, dtype, ty.lane_type(), flags, addr);
                            b.ins().splat(ty, x)
                        }
                        (None, true, _) if ins.dtype == DType::Bool => {
                            let addr = address(b, *buffer)?;
                            load_mask(b, addr)
                        }
                        (None, vector, _) => {
                            let addr = address(b, *buffer)?;
                            let flags = if vector { vflags } else { flags };
                            load_elements(b, kernel_dtype(kernel, *buffer), ty, flags, addr)
                        }
                    }
                }
                KOp::Accumulate(buffer) => {
                    let Role::Partial(op) = kernel.sig.buffers[*buffer].role else {
                        return Err(unsupported("accumulating into a non-partial buffer".into()));
                    };
                    let addr = address(b, *buffer)?;
                    let x = operand(b, ins.args[0]).one();
                    let flags = if vector { vflags } else { flags };
                    let acc = b.ins().load(ty, flags, addr, 0);
                    // Cranelift's NaN-propagating max and min, which order -0 below +0.
                    let combined = reduce_step(b, op, acc, x);
                    b.ins().store(flags, combined, addr, 0);
                    combined
                }
                KOp::Store(buffer) => {
                    let addr = address(b, *buffer)?;
                    let x = operand(b, ins.args[0]).one();
                    if vector && ins.dtype == DType::Bool {
                        store_mask(b, x, addr);
                    } else {
                        let flags = if vector { vflags } else { flags };
                        store_elements(b, kernel_dtype(kernel, *buffer), flags, x, addr);
                    }
                    x
                }
                _ => {
                    let args: Vec<Val> = ins.args.iter().map(|&a| operand(b, a)).collect();
                    copies.push(emit_val(b, ins, &args, vector, funcs, &unsupported)?);
                    continue;
                }
            };
            copies.push(Val::One(v));
        }
        values.push(copies);
        deferred.push(None);
    }
    Ok(())
}

/// LANES bools (bytes of 0 or 1) at `addr` as a lane mask.
fn load_mask(b: &mut FunctionBuilder, addr: Value) -> Value {
    let lanes = lanes();
    // Bool buffers are only byte-aligned.
    let bytes = b
        .ins()
        .load(types::I32, MemFlagsData::new().with_notrap(), addr, 0);
    let v = b.ins().scalar_to_vector(types::I32X4, bytes);
    let v = b.ins().bitcast(types::I8X16, lanes, v);
    let halves = b.ins().uwiden_low(v);
    let words = b.ins().uwiden_low(halves);
    let zero = b.ins().iconst(types::I32, 0);
    let zero = b.ins().splat(types::I32X4, zero);
    b.ins().icmp(IntCC::NotEqual, words, zero)
}

/// Lane mask `mask` stored as LANES bools at `addr`.
fn store_mask(b: &mut FunctionBuilder, mask: Value, addr: Value) {
    let lanes = lanes();
    let one = b.ins().iconst(types::I32, 1);
    let one = b.ins().splat(types::I32X4, one);
    let words = b.ins().band(mask, one);
    let halves = b.ins().snarrow(words, words);
    let bytes = b.ins().unarrow(halves, halves);
    let packed = b.ins().bitcast(types::I32X4, lanes, bytes);
    let first = b.ins().extractlane(packed, 0);
    b.ins()
        .store(MemFlagsData::new().with_notrap(), first, addr, 0);
}

fn kernel_dtype(kernel: &Kernel, buffer: usize) -> DType {
    kernel.sig.buffers[buffer].dtype
}

/// One element (`ty` a scalar) or LANES elements (`ty` a vector) of a `dtype` buffer at `addr`;
/// f16 and bf16 elements as their bits, zero-extended to i32 lanes.
fn load_elements(
    b: &mut FunctionBuilder,
    dtype: DType,
    ty: Type,
    flags: MemFlagsData,
    addr: Value,
) -> Value {
    match (is_half(dtype), ty.is_vector()) {
        (false, _) => b.ins().load(ty, flags, addr, 0),
        (true, false) => b.ins().uload16(types::I32, flags, addr, 0),
        (true, true) => b.ins().uload16x4(flags, addr, 0),
    }
}

/// [`load_elements`]' inverse: `x` stored at `addr` as elements of `dtype`.
fn store_elements(
    b: &mut FunctionBuilder,
    dtype: DType,
    flags: MemFlagsData,
    x: Value,
    addr: Value,
) {
    let vector = b.func.dfg.value_type(x).is_vector();
    match (is_half(dtype), vector) {
        (false, _) => {
            b.ins().store(flags, x, addr, 0);
        }
        (true, false) => {
            b.ins().istore16(flags, x, addr, 0);
        }
        (true, true) => {
            // The lanes' low halves (all they hold), packed into the vector's low 64 bits.
            let packed = b.ins().unarrow(x, x);
            let packed = b.ins().bitcast(types::I64X2, lanes(), packed);
            let low = b.ins().extractlane(packed, 0);
            b.ins().store(flags, low, addr, 0);
        }
    }
}
