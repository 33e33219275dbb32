//! A row kernel's memory accesses: where each thread's vectors of a buffer's row are, and
//! their loads and stores, guarded where a vector lies past the row's end (the last vectors of
//! a row that is not a whole number of vectors a thread).

use crate::backend::ptx::emit::{float_literal, suffix, Class, Emitter};
use crate::backend::ptx::PtxError;
use crate::kernel::{Access, Kernel};
use ferrax_ir::{DType, Scalar};
use std::collections::HashMap;

/// Where a row kernel's vectors are: the address of each buffer's row (once per row) and of
/// each of the thread's vectors in it (once per row, or, in a streamed kernel, once per chunk:
/// [`RowAddresses::forget`] at each chunk), computed where first needed.
pub(super) struct RowAddresses<'a> {
    kernel: &'a Kernel,
    /// Each buffer's base address; none for a scratch row, which stays in registers.
    bases: Vec<Option<String>>,
    /// Each of the thread's vectors' index in the row (or chunk).
    pub(super) columns: Vec<String>,
    /// The row the block is on.
    pub(super) row: String,
    v: usize,
    streamed: bool,
    /// Byte offsets of each vector, by element size.
    offsets: HashMap<(usize, usize), String>,
    /// Per buffer, the address of its row's first element.
    starts: HashMap<usize, String>,
}

impl<'a> RowAddresses<'a> {
    pub(super) fn new(
        kernel: &'a Kernel,
        bases: Vec<Option<String>>,
        columns: Vec<String>,
        row: String,
        v: usize,
        streamed: bool,
    ) -> Self {
        RowAddresses {
            kernel,
            bases,
            columns,
            row,
            v,
            streamed,
            offsets: HashMap::new(),
            starts: HashMap::new(),
        }
    }

    /// Buffer `b`'s base address.
    pub(super) fn base(&self, b: usize) -> Result<String, PtxError> {
        self.bases[b].clone().ok_or_else(|| PtxError::Unsupported {
            kernel: self.kernel.name.clone(),
            what: "scratch access".into(),
        })
    }

    /// The address of vector `q` of buffer `b` in this row.
    pub(super) fn vector(
        &mut self,
        e: &mut Emitter,
        b: usize,
        q: usize,
    ) -> Result<String, PtxError> {
        let buffer = &self.kernel.sig.buffers[b];
        let size = buffer.dtype.size_bytes();
        let cols = self.kernel.rows.as_ref().map_or(0, |r| r.cols);
        let offset = match self.offsets.get(&(q, size)) {
            Some(o) => o.clone(),
            None => {
                let o = e.reg(Class::Rd);
                let line = format!("mul.wide.u32 {o}, {}, {}", self.columns[q], self.v * size);
                if self.streamed {
                    e.line(line);
                } else {
                    e.pre_line(line);
                }
                self.offsets.insert((q, size), o.clone());
                o
            }
        };
        let start = match buffer.access {
            Access::Each => self.row_start(e, b)?,
            Access::Inner(n) if n == cols => self.base(b)?,
            other => {
                return Err(PtxError::Unsupported {
                    kernel: self.kernel.name.clone(),
                    what: format!("{other:?} per element"),
                })
            }
        };
        let a = e.reg(Class::Rd);
        e.line(format!("add.s64 {a}, {start}, {offset}"));
        Ok(a)
    }

    /// The address of the first element of buffer `b`'s row (a per-element buffer).
    pub(super) fn row_start(&mut self, e: &mut Emitter, b: usize) -> Result<String, PtxError> {
        if let Some(a) = self.starts.get(&b) {
            return Ok(a.clone());
        }
        let size = self.kernel.sig.buffers[b].dtype.size_bytes();
        let cols = self.kernel.rows.as_ref().map_or(0, |r| r.cols);
        let (o, a) = (e.reg(Class::Rd), e.reg(Class::Rd));
        e.line(format!("mul.wide.u32 {o}, {}, {}", self.row, cols * size));
        e.line(format!("add.s64 {a}, {}, {o}", self.base(b)?));
        self.starts.insert(b, a.clone());
        Ok(a)
    }

    /// The row start of every per-element buffer, computed now rather than where first needed.
    pub(super) fn start_rows(&mut self, e: &mut Emitter) -> Result<(), PtxError> {
        for b in 0..self.bases.len() {
            if self.kernel.sig.buffers[b].access == Access::Each && self.bases[b].is_some() {
                self.row_start(e, b)?;
            }
        }
        Ok(())
    }

    /// Drops the vector offsets of the chunk before.
    pub(super) fn forget(&mut self) {
        self.offsets.clear();
    }
}

/// `regs = [a..]` (consecutive elements, guarded by `p`), or, `pre`, before the row loop.
pub(super) fn load(
    e: &mut Emitter,
    d: DType,
    space: &str,
    regs: &[String],
    a: &str,
    p: Option<&str>,
    pre: bool,
) {
    let (t, bits) = suffix(d);
    let guard = p.map(|p| format!("@{p} ")).unwrap_or_default();
    let mut lines = Vec::new();
    if d == DType::Bool {
        for (lane, r) in regs.iter().enumerate() {
            let s = e.reg(Class::Rs);
            lines.push(format!("mov.u16 {s}, 0"));
            lines.push(format!("{guard}{space}.u8 {s}, [{a}+{lane}]"));
            lines.push(format!("setp.ne.u16 {r}, {s}, 0"));
        }
    } else {
        if p.is_some() {
            // Outside the row the registers still get a value: nothing reads it, but it is set.
            let zero = match d {
                DType::F32 | DType::F64 => {
                    float_literal(Scalar::from_f64(d, 0.0)).unwrap_or_default()
                }
                _ => "0".into(),
            };
            lines.extend(regs.iter().map(|r| format!("mov.{bits} {r}, {zero}")));
        }
        match regs {
            [r] => lines.push(format!("{guard}{space}.{t} {r}, [{a}]")),
            _ => lines.push(format!(
                "{guard}{space}.v{}.{t} {{{}}}, [{a}]",
                regs.len(),
                regs.join(", ")
            )),
        }
    }
    for line in lines {
        if pre {
            e.pre_line(line);
        } else {
            e.line(line);
        }
    }
}

/// `[a..] = values` (consecutive elements), guarded by `p`.
pub(super) fn store(e: &mut Emitter, d: DType, a: &str, values: &[String], p: Option<&String>) {
    let (t, _) = suffix(d);
    let guard = p.map(|p| format!("@{p} ")).unwrap_or_default();
    if d == DType::Bool {
        for (lane, x) in values.iter().enumerate() {
            let s = e.reg(Class::Rs);
            e.line(format!("selp.u16 {s}, 1, 0, {x}"));
            e.line(format!("{guard}st.global.u8 [{a}+{lane}], {s}"));
        }
    } else if let [x] = values {
        e.line(format!("{guard}st.global.{t} [{a}], {x}"));
    } else {
        e.line(format!(
            "{guard}st.global.v{}.{t} [{a}], {{{}}}",
            values.len(),
            values.join(", ")
        ));
    }
}
