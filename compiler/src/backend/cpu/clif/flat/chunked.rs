//! The vector loop of a flat kernel that gathers rows (an embedding lookup, and what is fused
//! with it), by chunks: runs of elements, as long as the greatest common divisor of the
//! kernel's row lengths, in which no buffer changes row. A chunk computes each buffer's address
//! once (the gathered row's index loaded and clamped once, not once per step), and its steps
//! address the buffers by pointers that advance with them, where the position-stepping loop
//! steps every row and column and rebuilds every address. Launches start their parts at
//! multiples of the chunk ([`chunk_len`]), so chunks are whole from the first element.

use super::{emit_body, Body, Direct, Memory, Position, FLAT_STEP};
use crate::backend::cpu::clif::consts::Consts;
use crate::backend::cpu::clif::host::HostFuncs;
use crate::backend::cpu::clif::{CodegenError, LANES};
use crate::kernel::{Access, KOp, Kernel, Role};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use std::collections::HashMap;

/// Chunks shorter than this many steps would spend more on their set-up than they save.
const MIN_STEPS: usize = 4;

/// The chunk a flat kernel's vector loop runs by, if it runs by chunks: kernels that gather,
/// without column reductions (whose parts start where their partial sums do) or iotas, whose row
/// lengths share a divisor of at least [`MIN_STEPS`] whole steps.
pub(crate) fn chunk_len(kernel: &Kernel) -> Option<usize> {
    let buffers = &kernel.sig.buffers;
    let gathers = buffers
        .iter()
        .any(|b| matches!(b.access, Access::Gather { .. }));
    let partial = buffers.iter().any(|b| matches!(b.role, Role::Partial(_)));
    // A chunk's steps know their elements by pointer only; an iota needs the index.
    let indexed = kernel
        .body
        .iter()
        .any(|ins| matches!(ins.op, KOp::Index { .. }));
    if !gathers || partial || indexed {
        return None;
    }
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let chunk = buffers
        .iter()
        .filter_map(|b| match b.access {
            Access::Outer(n) | Access::Inner(n) | Access::Gather { n, .. } => Some(n),
            Access::Each | Access::Scalar | Access::Window { .. } => None,
        })
        .fold(0, gcd);
    (chunk.is_multiple_of(FLAT_STEP) && chunk >= MIN_STEPS * FLAT_STEP).then_some(chunk)
}

/// Emits the loop over the whole chunks of `start..end` (`start` a multiple of `chunk`), each
/// step `copies` vectors; returns where they end, the builder in the block after them.
pub(super) fn build_chunks(
    b: &mut FunctionBuilder,
    kernel: &Kernel,
    (start, end): (Value, Value),
    (chunk, copies): (usize, usize),
    (mem, funcs): (&Memory, &HostFuncs),
    consts: &mut Consts,
) -> Result<Value, CodegenError> {
    let divisors = mem.divisors;
    let (outer, inner, next_chunk, after) = (
        b.create_block(),
        b.create_block(),
        b.create_block(),
        b.create_block(),
    );
    let count = b.ins().isub(end, start);
    let rest = b.ins().urem_imm_u(count, chunk as i64);
    let chunks_end = b.ins().isub(end, rest);
    let any = b.ins().icmp(IntCC::SignedLessThan, start, chunks_end);
    let first = divisors.at(b, start);
    b.ins()
        .brif(any, outer, &first.args(), after, &[start.into()]);

    // A chunk: each buffer's address at its first element.
    b.switch_to_block(outer);
    let p = divisors.params(b, outer);
    let unsupported = |what: String| CodegenError::Unsupported {
        kernel: kernel.name.clone(),
        what,
    };
    let body = Body::new(kernel, (mem, funcs), &unsupported, true);
    let pointers = kernel
        .sig
        .buffers
        .iter()
        .enumerate()
        .map(|(k, buffer)| match (buffer.access, mem.scalars[k]) {
            (Access::Scalar, _) | (_, Some(_)) => Ok(None),
            (
                Access::Each
                | Access::Outer(_)
                | Access::Inner(_)
                | Access::Gather { .. }
                | Access::Window { .. },
                None,
            ) => body.address(b, &p, k).map(Some),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let zero = b.ins().iconst(types::I64, 0);
    b.ins().jump(inner, &[zero.into()]);

    // A step: `copies` vectors at element `j` of the chunk.
    b.switch_to_block(inner);
    let j = b.append_block_param(inner, types::I64);
    // `j` in bytes, once per element size.
    let mut bytes: HashMap<u32, Value> = HashMap::new();
    let stepped: Vec<Option<Value>> = kernel
        .sig
        .buffers
        .iter()
        .zip(&pointers)
        .map(|(buffer, &pointer)| {
            let pointer = pointer?;
            Some(match buffer.access {
                Access::Outer(_) => pointer,
                Access::Each
                | Access::Scalar
                | Access::Inner(_)
                | Access::Gather { .. }
                | Access::Window { .. } => {
                    let shift = buffer.dtype.size_bytes().trailing_zeros();
                    let offset = *bytes
                        .entry(shift)
                        .or_insert_with(|| b.ins().ishl_imm_u(j, i64::from(shift)));
                    b.ins().iadd(pointer, offset)
                }
            })
        })
        .collect();
    let at: Vec<Position> = (0..copies)
        .map(|c| Position {
            i: p.i,
            rows_cols: p.rows_cols.clone(),
            direct: Some(Direct {
                pointers: stepped.clone(),
                offset: c as i64 * LANES,
            }),
        })
        .collect();
    emit_body(b, kernel, &at, Some(consts), mem, funcs)?;
    let j = b.ins().iadd_imm_s(j, LANES * copies as i64);
    let more = b.ins().icmp_imm_s(IntCC::SignedLessThan, j, chunk as i64);
    b.ins().brif(more, inner, &[j.into()], next_chunk, &[]);

    b.switch_to_block(next_chunk);
    let next = divisors.advance(b, &p, chunk as i64);
    let more = b.ins().icmp(IntCC::SignedLessThan, next.i, chunks_end);
    b.ins()
        .brif(more, outer, &next.args(), after, &[next.i.into()]);

    b.switch_to_block(after);
    Ok(b.append_block_param(after, types::I64))
}
