//! Kernels' calls to the host: what generated code cannot compute itself, or must compute as
//! the interpreter does (f64 transcendentals, pow, rem, and f32 sin and cos of large
//! arguments). The functions themselves are the runtime's (`ferrax_aot_runtime::host`); here,
//! their declarations in the JIT, the preserve-all wrapper vector code calls them through, and
//! the code of the calls.

use super::consts::Consts;
use super::image::Recorder;
use super::isel::lanes;
use super::{err, CodegenError, LANES};
use crate::kernel::math;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, BlockArg, FuncRef, Function, InstBuilder, MemFlagsData, StackSlotData,
    StackSlotKind, Type, Value,
};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module};
use ferrax_aot_runtime::host::{host_symbol, HOST_NAMES};
use ferrax_ir::{Scalar, UnaryOp};

/// The host functions declared in a JIT module.
pub(super) struct HostIds {
    wide_unary: FuncId,
    pow_f64: FuncId,
    rem_f32: FuncId,
    rem_f64: FuncId,
    beyond: FuncId,
}

/// The host functions as callees of the function being built.
pub(super) struct HostFuncs {
    /// `(code, x)`: the interpreter's f64 function of unary op `code` ([`unary_code`]).
    wide_unary: FuncRef,
    pow_f64: FuncRef,
    rem_f32: FuncRef,
    rem_f64: FuncRef,
    /// `(buffer)`: [`define_host_beyond`]'s function.
    beyond: FuncRef,
}

impl HostIds {
    /// Links the host functions' symbols into the JIT.
    pub(super) fn link(jb: &mut JITBuilder) {
        for name in HOST_NAMES {
            if let Some(address) = host_symbol(name) {
                jb.symbol(name, address as *const u8);
            }
        }
    }

    /// Declares the linked host functions in `module` and defines the wrapper of
    /// [`define_host_beyond`] (with `ctx`, left clear).
    pub(super) fn declare(
        module: &mut JITModule,
        ctx: &mut cranelift_codegen::Context,
        recorder: &mut Recorder,
    ) -> Result<HostIds, CodegenError> {
        let mut import = |name: &str, params: &[Type], ret: Type| {
            let mut sig = module.make_signature();
            sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
            sig.returns.push(AbiParam::new(ret));
            let id = module
                .declare_function(name, Linkage::Import, &sig)
                .map_err(err)?;
            recorder.import(id.as_u32(), name);
            Ok::<FuncId, CodegenError>(id)
        };
        let wide_unary = import(HOST_NAMES[0], &[types::I32, types::F64], types::F64)?;
        let pow_f64 = import(HOST_NAMES[1], &[types::F64, types::F64], types::F64)?;
        let rem_f32 = import(HOST_NAMES[2], &[types::F32, types::F32], types::F32)?;
        let rem_f64 = import(HOST_NAMES[3], &[types::F64, types::F64], types::F64)?;
        let beyond = define_host_beyond(module, wide_unary, ctx, recorder)?;
        Ok(HostIds {
            wide_unary,
            pow_f64,
            rem_f32,
            rem_f64,
            beyond,
        })
    }

    /// The host functions as callees of `func` (declared in this order, which the kernels'
    /// Cranelift IR shows).
    pub(super) fn declare_in(&self, module: &mut JITModule, func: &mut Function) -> HostFuncs {
        let mut declare = |id: FuncId| module.declare_func_in_func(id, func);
        HostFuncs {
            wide_unary: declare(self.wide_unary),
            pow_f64: declare(self.pow_f64),
            rem_f32: declare(self.rem_f32),
            rem_f64: declare(self.rem_f64),
            beyond: declare(self.beyond),
        }
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
    recorder: &mut Recorder,
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
    recorder.function(id.as_u32(), ctx)?;
    module.clear_context(ctx);
    Ok(id)
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

impl HostFuncs {
    /// Scalar `op(x)` by the host's f64 function (the interpreter's): an f32 `x` is widened
    /// and the result rounded once.
    pub(super) fn unary(&self, b: &mut FunctionBuilder, op: UnaryOp, x: Value) -> Value {
        let narrow = b.func.dfg.value_type(x) == types::F32;
        let code = b.ins().iconst(types::I32, unary_code(op));
        let wide = if narrow {
            b.ins().fpromote(types::F64, x)
        } else {
            x
        };
        let call = b.ins().call(self.wide_unary, &[code, wide]);
        let r = b.inst_results(call)[0];
        if narrow {
            b.ins().fdemote(types::F32, r)
        } else {
            r
        }
    }

    /// Scalar `x % y` of type `ty` (f32 or f64) by the host.
    pub(super) fn rem(&self, b: &mut FunctionBuilder, ty: Type, x: Value, y: Value) -> Value {
        let f = if ty == types::F32 {
            self.rem_f32
        } else {
            self.rem_f64
        };
        let call = b.ins().call(f, &[x, y]);
        b.inst_results(call)[0]
    }

    /// Scalar `x` to the power `y` of type `ty` (f32 or f64) by the host, in f64.
    pub(super) fn pow(&self, b: &mut FunctionBuilder, ty: Type, x: Value, y: Value) -> Value {
        let (wx, wy) = if ty == types::F32 {
            (
                b.ins().fpromote(types::F64, x),
                b.ins().fpromote(types::F64, y),
            )
        } else {
            (x, y)
        };
        let call = b.ins().call(self.pow_f64, &[wx, wy]);
        let r = b.inst_results(call)[0];
        if ty == types::F32 {
            b.ins().fdemote(types::F32, r)
        } else {
            r
        }
    }

    /// [`crate::kernel::KOp::Beyond`] on one element: `y` (the expansion of `op(x)`, of type
    /// `ty`), or the host's function of `x` on a branch taken when |x| reaches the limit.
    pub(super) fn beyond(
        &self,
        b: &mut FunctionBuilder,
        op: UnaryOp,
        x: Value,
        y: Value,
        ty: Type,
    ) -> Value {
        let big = beyond_limit(b, x);
        let host = b.create_block();
        b.set_cold_block(host);
        let join = b.create_block();
        let result = b.append_block_param(join, ty);
        b.ins().brif(big, host, &[], join, &[y.into()]);
        b.switch_to_block(host);
        let exact = self.unary(b, op, x);
        b.ins().jump(join, &[exact.into()]);
        b.switch_to_block(join);
        result
    }

    /// [`crate::kernel::KOp::Beyond`] over the vectors `xs` (arguments) and `ys` (their
    /// expansions): one test of all their lanes, and only if some lane reaches the limit, each
    /// such lane computed by the host (through [`define_host_beyond`]'s function). A lane's
    /// result depends on its own argument alone.
    pub(super) fn beyond_vectors(
        &self,
        b: &mut FunctionBuilder,
        op: UnaryOp,
        xs: &[Value],
        ys: &[Value],
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
            b.ins().call(self.beyond, &[buffer]);
            let y = b.ins().load(types::F32X4, flags, buffer, BEYOND_RESULTS);
            fixed.push(y.into());
        }
        b.ins().jump(join, &fixed);
        b.switch_to_block(join);
        results
    }
}
