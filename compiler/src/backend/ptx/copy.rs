//! Data movement as strided copies: transposes, broadcasts and slices all read element
//! `base + Σ c_d · stride_d` of their operand for the result element at coordinates `c`, so one
//! kernel form covers them (a stride is 0 along a broadcast dimension). A copy may also write
//! into part of a larger result (`out_base + Σ c_d · out_stride_d`): each operand of a
//! concatenation is copied into its slab, and a pad is a fill of the padding value (a
//! broadcast) and a copy of the operand into the interior. Each thread takes elements in a
//! grid-stride loop and unravels the index with one division per dimension; the copy moves
//! bits, so it serves every dtype.

use super::emit::{Class, Emitter};
use super::loops::grid_stride_entry;
use ferrax_ir::{Op, TensorType};
use std::fmt::Write;

/// One strided copy into a row-major result.
#[derive(Clone, Debug, PartialEq)]
pub struct CopyKernel {
    pub name: String,
    /// Result dimensions.
    pub dims: Vec<usize>,
    /// Operand element stride per result dimension.
    pub strides: Vec<usize>,
    /// Operand element where the result starts.
    pub base: usize,
    /// Element size in bytes.
    pub size: usize,
    /// Result element stride per dimension (row-major over `dims` for a whole result).
    pub out_strides: Vec<usize>,
    /// Result element where the copy starts writing.
    pub out_base: usize,
}

fn row_major_strides(dims: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * dims[d + 1];
    }
    strides
}

impl CopyKernel {
    /// The copy computing `op` on an operand of type `input` into `output`, for transposes,
    /// broadcasts and unit-stride or strided slices.
    pub fn plan(name: String, op: &Op, input: &TensorType, output: &TensorType) -> Option<Self> {
        let in_strides = row_major_strides(input.dims());
        let (strides, base) = match op {
            Op::Transpose { perm } => (perm.iter().map(|&p| in_strides[p]).collect(), 0),
            Op::BroadcastInDim { dims, .. } => {
                let mut strides = vec![0; output.rank()];
                for (k, &d) in dims.iter().enumerate() {
                    if input.dims()[k] != 1 {
                        strides[d] = in_strides[k];
                    }
                }
                (strides, 0)
            }
            Op::Slice { start, strides, .. } => (
                strides
                    .iter()
                    .zip(&in_strides)
                    .map(|(s, i)| s * i)
                    .collect(),
                start.iter().zip(&in_strides).map(|(s, i)| s * i).sum(),
            ),
            _ => return None,
        };
        let size = input.dtype.size_bytes();
        let fits = output.numel() < i32::MAX as usize && input.numel() < i32::MAX as usize;
        (fits && output.numel() > 0).then(|| CopyKernel {
            name,
            dims: output.dims().to_vec(),
            strides,
            base,
            size,
            out_strides: row_major_strides(output.dims()),
            out_base: 0,
        })
    }

    /// The copies that compute `op` (a concatenation or a pad) of `inputs` into `output`, each
    /// with the operand it reads, in launch order; named `name_k`.
    pub fn plan_parts(
        name: &str,
        op: &Op,
        inputs: &[&TensorType],
        output: &TensorType,
    ) -> Option<Vec<(CopyKernel, usize)>> {
        let out = row_major_strides(output.dims());
        let fits = output.numel() < i32::MAX as usize && output.numel() > 0;
        // All of `input`, written from `out_base` with strides `out_strides`.
        let whole =
            |k: usize, input: &TensorType, out_strides: Vec<usize>, out_base: usize| CopyKernel {
                name: format!("{name}_{k}"),
                dims: input.dims().to_vec(),
                strides: row_major_strides(input.dims()),
                base: 0,
                size: input.dtype.size_bytes(),
                out_strides,
                out_base,
            };
        let parts = match op {
            Op::Concatenate { axis } => {
                let mut offset = 0;
                let mut parts = Vec::new();
                for (j, input) in inputs.iter().enumerate() {
                    if input.numel() > 0 {
                        let part = whole(j, input, out.clone(), offset * out[*axis]);
                        parts.push((part, j));
                    }
                    offset += input.dims()[*axis];
                }
                parts
            }
            Op::Pad { low, interior, .. } => {
                let fill = CopyKernel {
                    name: format!("{name}_0"),
                    dims: output.dims().to_vec(),
                    strides: vec![0; output.rank()],
                    base: 0,
                    size: output.dtype.size_bytes(),
                    out_strides: out.clone(),
                    out_base: 0,
                };
                // Operand element `c` lands at `low + c·(interior + 1)` along each dimension;
                // a negative `low` or `high` crops the elements that land outside.
                let input = inputs[0];
                let in_strides = row_major_strides(input.dims());
                let mut copy = CopyKernel {
                    name: format!("{name}_1"),
                    dims: Vec::new(),
                    strides: in_strides.clone(),
                    base: 0,
                    size: input.dtype.size_bytes(),
                    out_strides: Vec::new(),
                    out_base: 0,
                };
                // `a / step` rounded up, for `a >= 0`; 0 below.
                let up = |a: i64, step: i64| if a <= 0 { 0 } else { (a + step - 1) / step };
                for d in 0..input.rank() {
                    let step = interior[d] as i64 + 1;
                    let first = up(-low[d], step);
                    let past = up(output.dims()[d] as i64 - low[d], step);
                    let count = past.min(input.dims()[d] as i64) - first;
                    copy.dims.push(count.max(0) as usize);
                    copy.base += first as usize * in_strides[d];
                    copy.out_strides.push(out[d] * step as usize);
                    copy.out_base += (low[d] + first * step) as usize * out[d];
                }
                let mut parts = vec![(fill, 1)];
                if !copy.is_empty() {
                    parts.push((copy, 0));
                }
                parts
            }
            _ => return None,
        };
        fits.then_some(parts)
    }

    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The `.entry` of a strided copy (without the module header).
pub fn render_copy(k: &CopyKernel) -> String {
    let name = &k.name;
    let len = k.len();
    let (ty, class) = match k.size {
        1 => ("u8", Class::Rs),
        2 => ("b16", Class::Rs),
        4 => ("b32", Class::R),
        _ => ("b64", Class::Rd),
    };
    let mut s = String::new();
    let dense = k.out_base == 0 && k.out_strides == row_major_strides(&k.dims);
    let _ = writeln!(
        s,
        "// copy into {:?} from strides {:?} at {} ({} bytes per element)",
        k.dims, k.strides, k.base, k.size
    );
    if !dense {
        let _ = writeln!(
            s,
            "// writing strides {:?} from {}",
            k.out_strides, k.out_base
        );
    }
    let copy = |e: &mut Emitter, addresses: &[String], index: &str| {
        // The index left to unravel, one coordinate of it, the operand element and (where not
        // the index) the result element.
        let (left, from, coordinate) = (e.reg(Class::R), e.reg(Class::R), e.reg(Class::R));
        let to = (!dense).then(|| e.reg(Class::R));
        e.line(format!("mov.u32 {left}, {index}"));
        e.line(format!("mov.u32 {from}, {}", k.base));
        if let Some(to) = &to {
            e.line(format!("mov.u32 {to}, {}", k.out_base));
        }
        for d in (0..k.dims.len()).rev() {
            let (dim, stride) = (k.dims[d], k.strides[d]);
            if d > 0 {
                e.line(format!("rem.u32 {coordinate}, {left}, {dim}"));
                e.line(format!("div.u32 {left}, {left}, {dim}"));
            } else {
                e.line(format!("mov.u32 {coordinate}, {left}"));
            }
            if stride != 0 {
                e.line(format!("mad.lo.s32 {from}, {coordinate}, {stride}, {from}"));
            }
            if let Some(to) = &to {
                let out_stride = k.out_strides[d];
                e.line(format!("mad.lo.s32 {to}, {coordinate}, {out_stride}, {to}"));
            }
        }
        let written = to.as_deref().unwrap_or(index);
        let (source, target, value) = (e.reg(Class::Rd), e.reg(Class::Rd), e.reg(class));
        e.line(format!("mul.wide.u32 {source}, {from}, {}", k.size));
        e.line(format!("add.s64 {source}, {}, {source}", addresses[0]));
        e.line(format!("mul.wide.u32 {target}, {written}, {}", k.size));
        e.line(format!("add.s64 {target}, {}, {target}", addresses[1]));
        e.line(format!("ld.global.nc.{ty} {value}, [{source}]"));
        e.line(format!("st.global.{ty} [{target}], {value}"));
    };
    s.push_str(&grid_stride_entry(name, 2, len, "loop", copy));
    s
}
