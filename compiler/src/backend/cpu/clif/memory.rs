//! Buffer elements in and out of registers: f16 and bf16 elements travel as the bits of i32
//! lanes (the kernel computes them in f32 after `halves::widen`), and bools, bytes in memory,
//! become lane masks in vectors.

use super::isel::lanes;
use crate::kernel::halves::is_half;
use crate::kernel::Kernel;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;
use ferrax_ir::DType;

/// LANES bools (bytes of 0 or 1) at `addr` as a lane mask.
pub(super) fn load_mask(b: &mut FunctionBuilder, addr: Value) -> Value {
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
pub(super) fn store_mask(b: &mut FunctionBuilder, mask: Value, addr: Value) {
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

/// The element type of `kernel`'s buffer `buffer`.
pub(super) fn kernel_dtype(kernel: &Kernel, buffer: usize) -> DType {
    kernel.sig.buffers[buffer].dtype
}

/// One element (`ty` a scalar) or LANES elements (`ty` a vector) of a `dtype` buffer at `addr`;
/// f16 and bf16 elements as their bits, zero-extended to i32 lanes.
pub(super) fn load_elements(
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
pub(super) fn store_elements(
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
