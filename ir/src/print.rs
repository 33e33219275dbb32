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
use std::fmt;

pub fn print_func(func: &Func) -> String {
    func.to_string()
}

impl fmt::Display for Func {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_func(f, self, 0)?;
        f.write_str("\n")
    }
}

impl fmt::Display for Instr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_instr(f, self, 0)
    }
}

/// `func` up to its closing `}`, every line after the first indented by `indent` spaces.
/// Nested functions are written in place, so the text is written once, in time linear in
/// its length.
fn write_func(f: &mut fmt::Formatter<'_>, func: &Func, indent: usize) -> fmt::Result {
    write!(f, "func @{}(", func.name)?;
    for (i, p) in func.params.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "%{i}: {p}")?;
    }
    f.write_str(") -> (")?;
    for (i, o) in func.outputs.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        match func.value_type(*o) {
            Some(ty) => write!(f, "{ty}")?,
            None => f.write_str("?")?,
        }
    }
    f.write_str(") {\n")?;
    for (i, ins) in func.body.iter().enumerate() {
        write!(f, "{:indent$}  {} = ", "", func.instr_value(i))?;
        write_instr(f, ins, indent)?;
        f.write_str("\n")?;
    }
    write!(f, "{:indent$}  ", "")?;
    write_return(f, func)?;
    write!(f, "\n{:indent$}}}", "")
}

/// `return` and `func`'s outputs.
pub(crate) fn write_return(w: &mut impl fmt::Write, func: &Func) -> fmt::Result {
    w.write_str("return")?;
    for (i, o) in func.outputs.iter().enumerate() {
        w.write_str(if i == 0 { " " } else { ", " })?;
        write!(w, "{o}")?;
    }
    Ok(())
}

/// Writes the comma-separated operands and attributes of one instruction.
struct Items<'a, 'b> {
    f: &'a mut fmt::Formatter<'b>,
    first: bool,
}

impl<'b> Items<'_, 'b> {
    /// Starts the next item: the separator, then what the caller writes.
    fn next(&mut self) -> Result<&mut fmt::Formatter<'b>, fmt::Error> {
        if !self.first {
            self.f.write_str(", ")?;
        }
        self.first = false;
        Ok(&mut *self.f)
    }

    fn item(&mut self, args: fmt::Arguments<'_>) -> fmt::Result {
        self.next()?.write_fmt(args)
    }

    /// `key=[..]`, left out when `dims` is empty: the parser's default is the same.
    fn dims(&mut self, key: &str, dims: &[usize]) -> fmt::Result {
        if dims.is_empty() {
            return Ok(());
        }
        self.item(format_args!("{key}={}", List(dims)))
    }

    /// `key=1` when `on`; the parser reads an absent flag as 0.
    fn flag(&mut self, key: &str, on: bool) -> fmt::Result {
        if !on {
            return Ok(());
        }
        self.item(format_args!("{key}=1"))
    }
}

/// One instruction after its `%v = `, nested functions indented by `indent + 4`.
fn write_instr(f: &mut fmt::Formatter<'_>, ins: &Instr, indent: usize) -> fmt::Result {
    write!(f, "{} ", ins.op.name())?;
    let mut items = Items { f, first: true };
    for a in &ins.args {
        items.item(format_args!("{a}"))?;
    }
    match &ins.op {
        Op::Constant(lit) => items.item(format_args!("{}", literal_text(lit)))?,
        Op::Iota { dim, .. } => items.item(format_args!("dim={dim}"))?,
        Op::BroadcastInDim { dims, .. } => items.item(format_args!("dims={}", List(dims)))?,
        Op::Transpose { perm } => items.item(format_args!("perm={}", List(perm)))?,
        Op::Reverse { axes } => items.item(format_args!("axes={}", List(axes)))?,
        Op::Reduce { axes, .. } => items.item(format_args!("axes={}", List(axes)))?,
        Op::DotGeneral(d) => {
            if !d.lhs_batch.is_empty() {
                items.item(format_args!(
                    "batch={}x{}",
                    List(&d.lhs_batch),
                    List(&d.rhs_batch)
                ))?;
            }
            items.item(format_args!(
                "contract={}x{}",
                List(&d.lhs_contract),
                List(&d.rhs_contract)
            ))?;
        }
        Op::Slice {
            start,
            limit,
            strides,
        } => {
            items.item(format_args!("start={}", List(start)))?;
            items.item(format_args!("limit={}", List(limit)))?;
            if strides.iter().any(|&s| s != 1) {
                items.item(format_args!("strides={}", List(strides)))?;
            }
        }
        Op::Pad {
            low,
            high,
            interior,
        } => {
            items.item(format_args!("low={}", List(low)))?;
            items.item(format_args!("high={}", List(high)))?;
            if interior.iter().any(|&s| s != 0) {
                items.item(format_args!("interior={}", List(interior)))?;
            }
        }
        Op::Concatenate { axis } => items.item(format_args!("axis={axis}"))?,
        Op::Sort {
            dimension,
            descending,
        }
        | Op::Argsort {
            dimension,
            descending,
        } => {
            items.item(format_args!("dimension={dimension}"))?;
            items.flag("descending", *descending)?;
        }
        Op::Fft { lengths, .. } => items.item(format_args!("lengths={}", List(lengths)))?,
        Op::Qr(qr) => items.flag("full_matrices", qr.full_matrices)?,
        Op::Svd(svd) => items.flag("full_matrices", svd.full_matrices)?,
        Op::TriangularSolve(s) => {
            items.flag("left_side", s.left_side)?;
            items.flag("lower", s.lower)?;
            items.flag("transpose_a", s.transpose_a)?;
            items.flag("conjugate_a", s.conjugate_a)?;
            items.flag("unit_diagonal", s.unit_diagonal)?;
        }
        Op::Attention(a) => {
            items.flag("causal", a.causal)?;
            if let Some(h) = a.precision {
                items.item(format_args!("precision={}", h.name()))?;
            }
        }
        Op::DebugCallback { callback } => items.item(format_args!("callback={callback}"))?,
        Op::PureCallback(c) => {
            items.item(format_args!("callback={}", c.callback))?;
            items.flag("expand_dims", c.expand_dims)?;
        }
        Op::IoCallback(c) => {
            items.item(format_args!("callback={}", c.callback))?;
            items.flag("ordered", c.ordered)?;
        }
        Op::Gather(g) => gather_attrs(g, &mut items)?,
        Op::Scatter(s) => scatter_attrs(s, &mut items)?,
        Op::CustomVjp(c) => {
            for (role, nested) in [("primal", &c.primal), ("fwd", &c.fwd), ("bwd", &c.bwd)] {
                let f = items.next()?;
                write!(f, "{role}=")?;
                write_func(f, nested, indent + 4)?;
            }
        }
        Op::CustomJvp(c) => {
            for (role, nested) in [("primal", &c.primal), ("jvp", &c.jvp)] {
                let f = items.next()?;
                write!(f, "{role}=")?;
                write_func(f, nested, indent + 4)?;
            }
        }
        Op::While(w) => {
            items.item(format_args!("result={}", w.result))?;
            for (role, nested) in [("cond", &w.cond), ("body", &w.body)] {
                let f = items.next()?;
                write!(f, "{role}=")?;
                write_func(f, nested, indent + 4)?;
            }
        }
        Op::Scan(s) => {
            if s.consts > 0 {
                items.item(format_args!("consts={}", s.consts))?;
            }
            items.item(format_args!("carry={}", s.carry))?;
            items.item(format_args!("length={}", s.length))?;
            items.flag("reverse", s.reverse)?;
            if s.unroll != 1 {
                items.item(format_args!("unroll={}", s.unroll))?;
            }
            items.item(format_args!("result={}", s.result))?;
            let f = items.next()?;
            f.write_str("body=")?;
            write_func(f, &s.body, indent + 4)?;
        }
        Op::Remat(r) => {
            items.item(format_args!("result={}", r.result))?;
            let f = items.next()?;
            f.write_str("body=")?;
            write_func(f, &r.body, indent + 4)?;
        }
        Op::Cond(c) => {
            items.item(format_args!("result={}", c.result))?;
            let f = items.next()?;
            f.write_str("branches=[")?;
            for (k, branch) in c.branches.iter().enumerate() {
                if k > 0 {
                    f.write_str(", ")?;
                }
                write_func(f, branch, indent + 4)?;
            }
            f.write_str("]")?;
        }
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Select
        | Op::Clamp
        | Op::Convert { .. }
        | Op::BitcastConvert { .. }
        | Op::Reshape { .. }
        | Op::DynamicSlice { .. }
        | Op::DynamicUpdateSlice
        | Op::StopGradient
        | Op::Cholesky
        | Op::Lu(_)
        | Op::Eigh(_)
        | Op::Geqrf(_)
        | Op::HouseholderProduct
        | Op::Eig(_)
        | Op::AddDependency => {}
    }
    write!(items.f, " : {}", ins.ty)
}

fn gather_attrs(g: &Gather, items: &mut Items<'_, '_>) -> fmt::Result {
    items.dims("offset_dims", &g.offset_dims)?;
    items.dims("collapsed_slice_dims", &g.collapsed_slice_dims)?;
    items.dims("operand_batching_dims", &g.operand_batching_dims)?;
    items.dims(
        "start_indices_batching_dims",
        &g.start_indices_batching_dims,
    )?;
    items.item(format_args!("start_index_map={}", List(&g.start_index_map)))?;
    items.item(format_args!("index_vector_dim={}", g.index_vector_dim))?;
    items.item(format_args!("slice_sizes={}", List(&g.slice_sizes)))?;
    items.flag("indices_are_sorted", g.indices_are_sorted)
}

fn scatter_attrs(s: &Scatter, items: &mut Items<'_, '_>) -> fmt::Result {
    items.dims("update_window_dims", &s.update_window_dims)?;
    items.dims("inserted_window_dims", &s.inserted_window_dims)?;
    items.dims("input_batching_dims", &s.input_batching_dims)?;
    items.dims(
        "scatter_indices_batching_dims",
        &s.scatter_indices_batching_dims,
    )?;
    items.item(format_args!(
        "scatter_dims_to_operand_dims={}",
        List(&s.scatter_dims_to_operand_dims)
    ))?;
    items.item(format_args!("index_vector_dim={}", s.index_vector_dim))?;
    items.flag("indices_are_sorted", s.indices_are_sorted)?;
    items.flag("unique_indices", s.unique_indices)
}

/// A bracketed, comma-separated list: `[1,2]`.
struct List<'a, T>(&'a [T]);

impl<T: fmt::Display> fmt::Display for List<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, x) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{x}")?;
        }
        f.write_str("]")
    }
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
        Scalar::U32(x) => x.to_string(),
        Scalar::U8(x) => x.to_string(),
        Scalar::I8(x) => x.to_string(),
        Scalar::I16(x) => x.to_string(),
        Scalar::U16(x) => x.to_string(),
        Scalar::U64(x) => x.to_string(),
        Scalar::Bool(x) => x.to_string(),
        Scalar::C64(x) => complex_text(Scalar::F32(x.re), Scalar::F32(x.im)),
        Scalar::C128(x) => complex_text(Scalar::F64(x.re), Scalar::F64(x.im)),
    }
}

/// `re+imi` or `re-imi`: one word, which the parser splits where both halves parse.
fn complex_text(re: Scalar, im: Scalar) -> String {
    let (re, im) = (scalar_text(re), scalar_text(im));
    if im.starts_with('-') {
        format!("{re}{im}i")
    } else {
        format!("{re}+{im}i")
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
