//! Gathers on the GPU that fusion does not read in place (any dimension numbers: columns,
//! several index vector entries, batching dimensions): one thread per result element
//! unravels its coordinates, reads its batch position's index vector, clamps each start as
//! the gather does, and copies the operand element's bits. Every size and stride is a
//! constant of the entry, so the address arithmetic is a few multiply-adds.

use super::copy::{clamped_start, move_element};
use super::emit::{Class, Emitter};
use super::loops::grid_stride_entry;
use ferrax_ir::{DType, Gather, IndexMap, TensorType};
use std::fmt::Write;

/// One gather, planned for its types.
#[derive(Clone, Debug, PartialEq)]
pub struct GatherKernel {
    pub name: String,
    /// Result dimensions.
    pub dims: Vec<usize>,
    /// Per result dimension, the operand stride it moves (window dimensions) or 0.
    pub window_strides: Vec<usize>,
    /// Per result dimension, the indices' stride it moves (batch dimensions) or 0.
    pub index_strides: Vec<usize>,
    /// Per result dimension, the operand stride of a batching dimension it indexes, or 0.
    pub batching_strides: Vec<usize>,
    /// Per index vector entry: its offset in the indices (entry × vector stride), the
    /// operand stride of the dimension it starts and the largest start there.
    pub starts: Vec<(usize, usize, usize)>,
    pub index: DType,
    /// Element size in bytes.
    pub size: usize,
}

impl GatherKernel {
    /// The kernel of `g` from `operand` by `indices` into `result`; `None` for indices of a
    /// type other than i32 and i64, or sizes past 32-bit indexing.
    pub fn plan(
        name: String,
        g: &Gather,
        (operand, indices, result): (&TensorType, &TensorType, &TensorType),
    ) -> Option<GatherKernel> {
        let fits = [operand, indices, result]
            .iter()
            .all(|t| t.numel() < i32::MAX as usize)
            && result.numel() > 0
            && matches!(indices.dtype, DType::I32 | DType::I64);
        if !fits {
            return None;
        }
        let map = IndexMap::of_gather(g, operand.rank(), result.rank());
        let in_strides = operand.shape.strides();
        let ind_strides = indices.shape.strides();
        let batch_of_indices = map.indices_batch_dims(indices.rank());
        let mut window_strides = vec![0; result.rank()];
        for (&r, &d) in map.window_dims.iter().zip(&map.window_to_operand) {
            window_strides[r] = in_strides[d];
        }
        let mut index_strides = vec![0; result.rank()];
        let mut batching_strides = vec![0; result.rank()];
        for (p, (&r, &i)) in map.batch_dims.iter().zip(&batch_of_indices).enumerate() {
            index_strides[r] = ind_strides[i];
            for (d, batch) in map.operand_to_batch.iter().enumerate() {
                if *batch == Some(p) {
                    batching_strides[r] = in_strides[d];
                }
            }
        }
        let vector_stride = ind_strides.get(g.index_vector_dim).copied().unwrap_or(0);
        let starts = g
            .start_index_map
            .iter()
            .enumerate()
            .map(|(k, &d)| {
                let max = operand.dims()[d].checked_sub(g.slice_sizes[d])?;
                Some((k * vector_stride, in_strides[d], max))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(GatherKernel {
            name,
            dims: result.dims().to_vec(),
            window_strides,
            index_strides,
            batching_strides,
            starts,
            index: indices.dtype,
            size: operand.dtype.size_bytes(),
        })
    }

    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Emits the operand element (`from`) and index vector position (`at`) of result element
/// `index`, unravelling it dimension by dimension.
fn unravel(e: &mut Emitter, k: &GatherKernel, index: &str, (from, at): (&str, &str)) {
    let (left, coordinate) = (e.reg(Class::R), e.reg(Class::R));
    e.line(format!("mov.u32 {left}, {index}"));
    e.line(format!("mov.u32 {from}, 0"));
    e.line(format!("mov.u32 {at}, 0"));
    for d in (0..k.dims.len()).rev() {
        if d > 0 {
            e.line(format!("rem.u32 {coordinate}, {left}, {}", k.dims[d]));
            e.line(format!("div.u32 {left}, {left}, {}", k.dims[d]));
        } else {
            e.line(format!("mov.u32 {coordinate}, {left}"));
        }
        let operand_stride = k.window_strides[d] + k.batching_strides[d];
        if operand_stride != 0 {
            e.line(format!(
                "mad.lo.s32 {from}, {coordinate}, {operand_stride}, {from}"
            ));
        }
        if k.index_strides[d] != 0 {
            let s = k.index_strides[d];
            e.line(format!("mad.lo.s32 {at}, {coordinate}, {s}, {at}"));
        }
    }
}

/// The gather's `.entry` (without the module header): params operand, indices, result.
pub fn render_gather(k: &GatherKernel) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// gather into {:?}: window strides {:?}, index strides {:?}, batching strides {:?}, starts {:?}",
        k.dims, k.window_strides, k.index_strides, k.batching_strides, k.starts
    );
    let body = |e: &mut Emitter, a: &[String], index: &str| {
        let (from, at) = (e.reg(Class::R), e.reg(Class::R));
        unravel(e, k, index, (&from, &at));
        let index_size = if k.index == DType::I64 { 8 } else { 4 };
        for &(offset, stride, max) in &k.starts {
            let (entry, address) = (e.reg(Class::R), e.reg(Class::Rd));
            e.line(format!("add.u32 {entry}, {at}, {offset}"));
            e.line(format!("mul.wide.u32 {address}, {entry}, {index_size}"));
            e.line(format!("add.s64 {address}, {}, {address}", a[1]));
            let (start, lines) = clamped_start(e, &address, k.index == DType::I64, max);
            for line in lines {
                e.line(line);
            }
            e.line(format!("mad.lo.s32 {from}, {start}, {stride}, {from}"));
        }
        let (source, target) = (e.reg(Class::Rd), e.reg(Class::Rd));
        e.line(format!("mul.wide.u32 {source}, {from}, {}", k.size));
        e.line(format!("add.s64 {source}, {}, {source}", a[0]));
        e.line(format!("mul.wide.u32 {target}, {index}, {}", k.size));
        e.line(format!("add.s64 {target}, {}, {target}", a[2]));
        move_element(e, k.size, &source, &target);
    };
    s.push_str(&grid_stride_entry(&k.name, 3, k.len(), "gather", body));
    s
}
