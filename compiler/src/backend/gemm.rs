//! `dot_general` as a (batched) matrix product: when the batch dimensions lead both operands
//! and the contracting and free dimensions form contiguous groups, the operands are row-major
//! matrices, possibly transposed, and a GEMM library (cuBLAS on the GPU, `gemm` on the CPU)
//! computes the product in place of the interpreter's loop.

pub use ferrax_aot_runtime::Gemm;
use ferrax_ir::{DType, DotDims, Func};

/// Whether dimensions `dims` are exactly `start..start + dims.len()`.
fn consecutive(dims: &[usize], start: usize) -> bool {
    dims.iter().enumerate().all(|(i, &d)| d == start + i)
}

/// The GEMM form of a `dot_general` of one of `dtypes`, if its operands are laid out as
/// batched matrices.
pub fn plan_gemm(func: &Func, index: usize, dims: &DotDims, dtypes: &[DType]) -> Option<Gemm> {
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
    (dtypes.contains(&ins.ty.dtype) && batch * k > 0).then_some(Gemm {
        batch,
        m,
        n,
        k,
        lhs_k_first,
        rhs_k_last,
        bf16_operands: false,
    })
}

/// Permutations that bring a `dot_general`'s operands into batched-matrix layout (the lhs as
/// batch, free, contracting dimensions; the rhs as batch, contracting, free), and the GEMM on
/// the permuted operands, for one of `dtypes`. The result's layout (batch, lhs free, rhs free)
/// is already the GEMM's.
pub fn plan_permuted_gemm(
    func: &Func,
    index: usize,
    dims: &DotDims,
    dtypes: &[DType],
) -> Option<(Vec<usize>, Vec<usize>, Gemm)> {
    let ins = &func.body[index];
    let (lhs, rhs) = (func.value_type(ins.args[0])?, func.value_type(ins.args[1])?);
    if !dtypes.contains(&ins.ty.dtype) {
        return None;
    }
    let free = |rank: usize, batch: &[usize], contract: &[usize]| -> Vec<usize> {
        (0..rank)
            .filter(|d| !batch.contains(d) && !contract.contains(d))
            .collect()
    };
    let lhs_free = free(lhs.rank(), &dims.lhs_batch, &dims.lhs_contract);
    let rhs_free = free(rhs.rank(), &dims.rhs_batch, &dims.rhs_contract);
    let lhs_perm: Vec<usize> = [&dims.lhs_batch[..], &lhs_free, &dims.lhs_contract].concat();
    let rhs_perm: Vec<usize> = [&dims.rhs_batch[..], &dims.rhs_contract, &rhs_free].concat();
    let size = |ds: &[usize], shape: &[usize]| ds.iter().map(|&d| shape[d]).product::<usize>();
    let batch = size(&dims.lhs_batch, lhs.dims());
    let k = size(&dims.lhs_contract, lhs.dims());
    let gemm = Gemm {
        batch,
        m: size(&lhs_free, lhs.dims()),
        n: size(&rhs_free, rhs.dims()),
        k,
        lhs_k_first: false,
        rhs_k_last: false,
        bf16_operands: false,
    };
    (batch * k > 0).then_some((lhs_perm, rhs_perm, gemm))
}
