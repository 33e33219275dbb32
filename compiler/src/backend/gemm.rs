//! `dot_general` as a (batched) matrix product: when the batch dimensions lead both operands
//! and the contracting and free dimensions form contiguous groups, the operands are row-major
//! matrices, possibly transposed, and a GEMM library (cuBLAS on the GPU, `gemm` on the CPU)
//! computes the product in place of the interpreter's loop.

use ferrax_ir::{DType, DotDims, Func};

/// A `dot_general` as one strided-batched GEMM on row-major operands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// The lhs is stored `[K, M]` (contracting dimensions first) rather than `[M, K]`.
    pub lhs_k_first: bool,
    /// The rhs is stored `[N, K]` rather than `[K, N]`.
    pub rhs_k_last: bool,
}

/// Whether dimensions `dims` are exactly `start..start + dims.len()`.
fn consecutive(dims: &[usize], start: usize) -> bool {
    dims.iter().enumerate().all(|(i, &d)| d == start + i)
}

/// The GEMM form of a `dot_general`, if its operands are laid out as batched matrices.
pub fn plan_gemm(func: &Func, index: usize, dims: &DotDims) -> Option<Gemm> {
    let ins = &func.body[index];
    let (lhs, rhs) = (func.value_type(ins.args[0])?, func.value_type(ins.args[1])?);
    let nb = dims.lhs_batch.len();
    if !consecutive(&dims.lhs_batch, 0) || !consecutive(&dims.rhs_batch, 0) {
        return None;
    }
    let (lr, rr, nc) = (lhs.rank(), rhs.rank(), dims.lhs_contract.len());
    let lhs_k_first = if consecutive(&dims.lhs_contract, lr - nc) {
        false
    } else if consecutive(&dims.lhs_contract, nb) {
        true
    } else {
        return None;
    };
    let rhs_k_last = if consecutive(&dims.rhs_contract, nb) {
        false
    } else if consecutive(&dims.rhs_contract, rr - nc) {
        true
    } else {
        return None;
    };
    let size = |dims: &[usize], shape: &[usize]| dims.iter().map(|&d| shape[d]).product::<usize>();
    let ls = lhs.dims();
    let batch = size(&dims.lhs_batch, ls);
    let k = size(&dims.lhs_contract, ls);
    let m = lhs.numel() / (batch * k).max(1);
    let n = rhs.numel() / (batch * k).max(1);
    let float = matches!(ins.ty.dtype, DType::F32 | DType::F64);
    (float && batch * k > 0).then_some(Gemm {
        batch,
        m,
        n,
        k,
        lhs_k_first,
        rhs_k_last,
    })
}
