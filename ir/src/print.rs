//! The canonical text format. Printing is deterministic, and `parse_func(print_func(f))`
//! gives back `f`, so printed IR can be stored, diffed and snapshot-tested.
//!
//! ```text
//! func @affine(%0: f32[8,4], %1: f32[4,2]) -> (f32[8,2]) {
//!   %2 = dot_general %0, %1, contract=[1]x[0] : f32[8,2]
//!   return %2
//! }
//! ```

use crate::{Elements, Func, Gather, Instr, Literal, Op, Scalar, Scatter};
use half::{bf16, f16};
use std::fmt::{self, Write};

pub fn print_func(func: &Func) -> String {
    func.to_string()
}

impl fmt::Display for Func {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "func @{}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "%{i}: {p}")?;
        }
        f.write_str(") -> (")?;
        for (i, o) in self.outputs.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match self.value_type(*o) {
                Some(ty) => write!(f, "{ty}")?,
                None => f.write_str("?")?,
            }
        }
        f.write_str(") {\n")?;
        for (i, ins) in self.body.iter().enumerate() {
            writeln!(f, "  {} = {}", self.instr_value(i), ins)?;
        }
        f.write_str("  return")?;
        for (i, o) in self.outputs.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { ", " })?;
            write!(f, "{o}")?;
        }
        f.write_str("\n}\n")
    }
}

impl fmt::Display for Instr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self.args.iter().map(|a| a.to_string()).collect();
        match &self.op {
            Op::Constant(lit) => parts.push(literal_text(lit)),
            Op::Iota { dim, .. } => parts.push(format!("dim={dim}")),
            Op::BroadcastInDim { dims, .. } => parts.push(format!("dims={}", list(dims))),
            Op::Transpose { perm } => parts.push(format!("perm={}", list(perm))),
            Op::Reduce { axes, .. } => parts.push(format!("axes={}", list(axes))),
            Op::DotGeneral(d) => {
                if !d.lhs_batch.is_empty() {
                    parts.push(format!(
                        "batch={}x{}",
                        list(&d.lhs_batch),
                        list(&d.rhs_batch)
                    ));
                }
                parts.push(format!(
                    "contract={}x{}",
                    list(&d.lhs_contract),
                    list(&d.rhs_contract)
                ));
            }
            Op::Slice {
                start,
                limit,
                strides,
            } => {
                parts.push(format!("start={}", list(start)));
                parts.push(format!("limit={}", list(limit)));
                if strides.iter().any(|&s| s != 1) {
                    parts.push(format!("strides={}", list(strides)));
                }
            }
            Op::Pad {
                low,
                high,
                interior,
            } => {
                parts.push(format!("low={}", list(low)));
                parts.push(format!("high={}", list(high)));
                if interior.iter().any(|&s| s != 0) {
                    parts.push(format!("interior={}", list(interior)));
                }
            }
            Op::Concatenate { axis } => parts.push(format!("axis={axis}")),
            Op::Gather(g) => gather_attrs(g, &mut parts),
            Op::Scatter(s) => scatter_attrs(s, &mut parts),
            Op::CustomVjp(c) => {
                for (role, nested) in [("primal", &c.primal), ("fwd", &c.fwd), ("bwd", &c.bwd)] {
                    let text = nested.to_string();
                    parts.push(format!(
                        "{role}={}",
                        text.trim_end().replace('\n', "\n    ")
                    ));
                }
            }
            Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::Clamp
            | Op::Convert { .. }
            | Op::Reshape { .. }
            | Op::DynamicSlice { .. }
            | Op::DynamicUpdateSlice
            | Op::StopGradient => {}
        }
        write!(f, "{} {} : {}", self.op.name(), parts.join(", "), self.ty)
    }
}

/// Dimension lists that may be empty are left out when they are; the defaults the parser
/// fills in are the same.
fn dims_attr(parts: &mut Vec<String>, key: &str, dims: &[usize]) {
    if !dims.is_empty() {
        parts.push(format!("{key}={}", list(dims)));
    }
}

fn flag_attr(parts: &mut Vec<String>, key: &str, on: bool) {
    if on {
        parts.push(format!("{key}=1"));
    }
}

fn gather_attrs(g: &Gather, parts: &mut Vec<String>) {
    dims_attr(parts, "offset_dims", &g.offset_dims);
    dims_attr(parts, "collapsed_slice_dims", &g.collapsed_slice_dims);
    dims_attr(parts, "operand_batching_dims", &g.operand_batching_dims);
    dims_attr(
        parts,
        "start_indices_batching_dims",
        &g.start_indices_batching_dims,
    );
    parts.push(format!("start_index_map={}", list(&g.start_index_map)));
    parts.push(format!("index_vector_dim={}", g.index_vector_dim));
    parts.push(format!("slice_sizes={}", list(&g.slice_sizes)));
    flag_attr(parts, "indices_are_sorted", g.indices_are_sorted);
}

fn scatter_attrs(s: &Scatter, parts: &mut Vec<String>) {
    dims_attr(parts, "update_window_dims", &s.update_window_dims);
    dims_attr(parts, "inserted_window_dims", &s.inserted_window_dims);
    dims_attr(parts, "input_batching_dims", &s.input_batching_dims);
    dims_attr(
        parts,
        "scatter_indices_batching_dims",
        &s.scatter_indices_batching_dims,
    );
    parts.push(format!(
        "scatter_dims_to_operand_dims={}",
        list(&s.scatter_dims_to_operand_dims)
    ));
    parts.push(format!("index_vector_dim={}", s.index_vector_dim));
    flag_attr(parts, "indices_are_sorted", s.indices_are_sorted);
    flag_attr(parts, "unique_indices", s.unique_indices);
}

fn list<T: fmt::Display>(items: &[T]) -> String {
    let mut s = String::from("[");
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{x}");
    }
    s.push(']');
    s
}

fn literal_text(lit: &Literal) -> String {
    if lit.is_splat() {
        return scalar_text(lit.data.get(0));
    }
    let mut s = String::from("[");
    for i in 0..lit.data.len() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&scalar_text(lit.data.get(i)));
    }
    s.push(']');
    s
}

/// A scalar in the shortest form that parses back to the same bits. NaNs other than the
/// canonical quiet NaN print as their bit pattern, `0x...`.
pub fn scalar_text(s: Scalar) -> String {
    match s {
        Scalar::F32(x) if x.is_nan() && x.to_bits() != f32::NAN.to_bits() => {
            format!("0x{:08x}", x.to_bits())
        }
        Scalar::F64(x) if x.is_nan() && x.to_bits() != f64::NAN.to_bits() => {
            format!("0x{:016x}", x.to_bits())
        }
        Scalar::F16(x) if x.is_nan() && x.to_bits() != f16::NAN.to_bits() => {
            format!("0x{:04x}", x.to_bits())
        }
        Scalar::BF16(x) if x.is_nan() && x.to_bits() != bf16::NAN.to_bits() => {
            format!("0x{:04x}", x.to_bits())
        }
        Scalar::F32(x) => format!("{x:?}"),
        Scalar::F64(x) => format!("{x:?}"),
        Scalar::F16(x) => format!("{:?}", x.to_f32()),
        Scalar::BF16(x) => format!("{:?}", x.to_f32()),
        Scalar::I32(x) => x.to_string(),
        Scalar::I64(x) => x.to_string(),
        Scalar::U8(x) => x.to_string(),
        Scalar::Bool(x) => x.to_string(),
    }
}

impl fmt::Display for Elements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for i in 0..self.len() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&scalar_text(self.get(i)))?;
        }
        f.write_str("]")
    }
}
