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
use ferrax_ir::{DType, Op, TensorType};
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
    /// Start indices read on the device (a dynamic slice's or update's), each moving the
    /// read or the written element.
    pub starts: Vec<DynamicStart>,
}

/// A start index a copy reads at run time: the instruction's operand `operand`, an i32 or
/// (`wide`) i64 scalar, clamped to `0..=max`, times `stride`, added to the element read or
/// (`write`) written.
#[derive(Clone, Debug, PartialEq)]
pub struct DynamicStart {
    pub operand: usize,
    pub wide: bool,
    pub stride: usize,
    pub max: usize,
    pub write: bool,
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
            starts: Vec::new(),
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
                starts: Vec::new(),
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
                    starts: Vec::new(),
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
                    starts: Vec::new(),
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

    /// The copy that computes a `dynamic_slice` of `sizes` from `inputs` (the operand, then
    /// its starts) into `output`, reading at the starts; `None` for start indices of a type
    /// other than i32 and i64, or sizes past 32-bit indexing.
    pub fn plan_dynamic_slice(
        name: &str,
        sizes: &[usize],
        inputs: &[&TensorType],
        output: &TensorType,
    ) -> Option<Vec<(CopyKernel, usize)>> {
        Self::plan_dynamic(name, (sizes.to_vec(), 1, false), inputs, output)
    }

    /// The copies that compute a `dynamic_update_slice` of `inputs` (the operand, the update,
    /// then the starts) into `output`: the operand whole, then the update written at the
    /// starts; `None` as for [`CopyKernel::plan_dynamic_slice`].
    pub fn plan_dynamic_update(
        name: &str,
        inputs: &[&TensorType],
        output: &TensorType,
    ) -> Option<Vec<(CopyKernel, usize)>> {
        let window = inputs.get(1)?.dims().to_vec();
        Self::plan_dynamic(name, (window, 2, true), inputs, output)
    }

    /// The copies of a dynamic slice (`write` false) or update (`write` true) whose window is
    /// `window` and whose starts are the operands from `first`, each with the operand it reads.
    fn plan_dynamic(
        name: &str,
        (window, first, write): (Vec<usize>, usize, bool),
        inputs: &[&TensorType],
        output: &TensorType,
    ) -> Option<Vec<(CopyKernel, usize)>> {
        let x = inputs.first()?;
        let fits = x.numel() < i32::MAX as usize && output.numel() > 0;
        let strides = row_major_strides(x.dims());
        let starts = (0..x.rank())
            .map(|d| {
                let wide = match inputs.get(first + d)?.dtype {
                    DType::I32 => false,
                    DType::I64 => true,
                    DType::U32
                    | DType::U8
                    | DType::I8
                    | DType::I16
                    | DType::U16
                    | DType::U64
                    | DType::F32
                    | DType::F64
                    | DType::F16
                    | DType::BF16
                    | DType::Bool
                    | DType::C64
                    | DType::C128 => return None,
                };
                Some(DynamicStart {
                    operand: first + d,
                    wide,
                    stride: strides[d],
                    max: x.dims()[d].checked_sub(window[d])?,
                    write,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let window_copy = |k: usize| CopyKernel {
            name: format!("{name}_{k}"),
            dims: window.clone(),
            strides: if write {
                row_major_strides(&window)
            } else {
                strides.clone()
            },
            base: 0,
            size: x.dtype.size_bytes(),
            out_strides: if write {
                strides.clone()
            } else {
                row_major_strides(&window)
            },
            out_base: 0,
            starts: starts.clone(),
        };
        let parts = if write {
            let whole = CopyKernel {
                name: format!("{name}_0"),
                dims: x.dims().to_vec(),
                strides: strides.clone(),
                base: 0,
                size: x.dtype.size_bytes(),
                out_strides: strides.clone(),
                out_base: 0,
                starts: Vec::new(),
            };
            let update = window_copy(1);
            let mut parts = vec![(whole, 0)];
            if !update.is_empty() {
                parts.push((update, 1));
            }
            parts
        } else {
            vec![(window_copy(0), 0)]
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
    let mut s = String::new();
    let writes_at_start = k.starts.iter().any(|s| s.write);
    let dense = k.out_base == 0 && k.out_strides == row_major_strides(&k.dims) && !writes_at_start;
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
    if !k.starts.is_empty() {
        let _ = writeln!(s, "// starts read on the device: {:?}", k.starts);
    }
    let copy = |e: &mut Emitter, addresses: &[String], index: &str| {
        // Each start index, clamped and scaled once, before the loop.
        let offsets: Vec<(String, bool)> = k
            .starts
            .iter()
            .enumerate()
            .map(|(j, start)| (start_offset(e, start, &addresses[2 + j]), start.write))
            .collect();
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
        for (offset, write) in &offsets {
            match (write, &to) {
                (true, Some(to)) => e.line(format!("add.s32 {to}, {to}, {offset}")),
                _ => e.line(format!("add.s32 {from}, {from}, {offset}")),
            }
        }
        let written = to.as_deref().unwrap_or(index);
        let (source, target) = (e.reg(Class::Rd), e.reg(Class::Rd));
        e.line(format!("mul.wide.u32 {source}, {from}, {}", k.size));
        e.line(format!("add.s64 {source}, {}, {source}", addresses[0]));
        e.line(format!("mul.wide.u32 {target}, {written}, {}", k.size));
        e.line(format!("add.s64 {target}, {}, {target}", addresses[1]));
        move_element(e, k.size, &source, &target);
    };
    s.push_str(&grid_stride_entry(
        name,
        2 + k.starts.len(),
        len,
        "loop",
        copy,
    ));
    s
}

/// Loads the element of `size` bytes at address `source` and stores it at `target`; 16-byte
/// elements (c128) move as a vector of two 64-bit words.
pub(super) fn move_element(e: &mut Emitter, size: usize, source: &str, target: &str) {
    let (ty, value) = match size {
        1 => ("u8", e.reg(Class::Rs)),
        2 => ("b16", e.reg(Class::Rs)),
        4 => ("b32", e.reg(Class::R)),
        8 => ("b64", e.reg(Class::Rd)),
        _ => {
            let [low, high] = e.regs::<2>(Class::Rd);
            ("v2.b64", format!("{{{low}, {high}}}"))
        }
    };
    e.line(format!("ld.global.nc.{ty} {value}, [{source}]"));
    e.line(format!("st.global.{ty} [{target}], {value}"));
}

/// A register holding start index `start` (read from `address`) clamped to `0..=max` and
/// multiplied by its stride, computed before the loop.
fn start_offset(e: &mut Emitter, start: &DynamicStart, address: &str) -> String {
    let (offset, lines) = clamped_start(e, address, start.wide, start.max);
    for line in lines {
        e.pre_line(line);
    }
    e.pre_line(format!("mul.lo.s32 {offset}, {offset}, {}", start.stride));
    offset
}

/// A new u32 register holding the start index at `address` (i32, or i64 where `wide`)
/// clamped to `0..=max`, and the lines that compute it (for the set-up or the loop body).
pub(super) fn clamped_start(
    e: &mut Emitter,
    address: &str,
    wide: bool,
    max: usize,
) -> (String, Vec<String>) {
    let start = e.reg(Class::R);
    let lines = if wide {
        let value = e.reg(Class::Rd);
        vec![
            format!("ld.global.nc.s64 {value}, [{address}]"),
            format!("max.s64 {value}, {value}, 0"),
            format!("min.s64 {value}, {value}, {max}"),
            format!("cvt.u32.u64 {start}, {value}"),
        ]
    } else {
        vec![
            format!("ld.global.nc.s32 {start}, [{address}]"),
            format!("max.s32 {start}, {start}, 0"),
            format!("min.s32 {start}, {start}, {max}"),
        ]
    };
    (start, lines)
}
