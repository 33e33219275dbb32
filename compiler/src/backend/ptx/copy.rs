//! Data movement as strided copies: transposes, broadcasts and slices all read element
//! `base + Σ c_d · stride_d` of their operand for the result element at coordinates `c`, so one
//! kernel form covers them (a stride is 0 along a broadcast dimension). A copy may also write
//! into part of a larger result (`out_base + Σ c_d · out_stride_d`): each operand of a
//! concatenation is copied into its slab, and a pad is a fill of the padding value (a
//! broadcast) and a copy of the operand into the interior. Each thread takes elements in a
//! grid-stride loop and unravels the index with one division per dimension; the copy moves
//! bits, so it serves every dtype.

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
    // The value register: one not used for indexing.
    let (ty, value) = match k.size {
        1 => ("u8", "%rs2"),
        2 => ("b16", "%rs2"),
        4 => ("b32", "%r15"),
        _ => ("b64", "%rd10"),
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
    s.push_str(&super::loops::grid_stride_entry(
        name,
        2,
        "\t.reg .pred %p<3>;\n\t.reg .b16 %rs<3>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<12>;\n",
        len,
    ));
    s.push_str("$L_loop:\n");
    // %r7: the index left to unravel; %r8: the operand element; %r10: the result element.
    let _ = writeln!(s, "\tmov.u32 %r7, %r5;\n\tmov.u32 %r8, {};", k.base);
    if !dense {
        let _ = writeln!(s, "\tmov.u32 %r10, {};", k.out_base);
    }
    for d in (0..k.dims.len()).rev() {
        let (dim, stride) = (k.dims[d], k.strides[d]);
        if d > 0 {
            let _ = writeln!(s, "\trem.u32 %r9, %r7, {dim};\n\tdiv.u32 %r7, %r7, {dim};");
        } else {
            let _ = writeln!(s, "\tmov.u32 %r9, %r7;");
        }
        if stride != 0 {
            let _ = writeln!(s, "\tmad.lo.s32 %r8, %r9, {stride}, %r8;");
        }
        if !dense {
            let _ = writeln!(s, "\tmad.lo.s32 %r10, %r9, {}, %r10;", k.out_strides[d]);
        }
    }
    let written = if dense { "%r5" } else { "%r10" };
    let _ = writeln!(
        s,
        "\tmul.wide.u32 %rd3, %r8, {};\n\tadd.s64 %rd3, %rd1, %rd3;",
        k.size
    );
    let _ = writeln!(
        s,
        "\tmul.wide.u32 %rd4, {written}, {};\n\tadd.s64 %rd4, %rd2, %rd4;",
        k.size
    );
    let _ = writeln!(
        s,
        "\tld.global.nc.{ty} {value}, [%rd3];\n\tst.global.{ty} [%rd4], {value};"
    );
    let _ = writeln!(
        s,
        "\tadd.s32 %r5, %r5, %r6;\n\tsetp.lt.u32 %p2, %r5, {len};\n\t@%p2 bra $L_loop;"
    );
    s.push_str("$L_done:\n\tret;\n}\n");
    s
}
