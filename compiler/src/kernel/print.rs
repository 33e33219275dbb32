//! The kernel IR's text form (kernel dumps, snapshots): the buffers with their roles and
//! accesses, then the body, a row kernel's stage by stage.

use super::{Access, KOp, Kernel, Role, Stage};
use ferrax_ir::ReduceOp;
use std::fmt;

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.rows {
            None => write!(f, "kernel @{} len={} (", self.name, self.len)?,
            Some(r) => write!(
                f,
                "kernel @{} rows={} cols={} passes={} (",
                self.name, r.rows, r.cols, r.passes
            )?,
        }
        for (i, b) in self.sig.buffers.iter().enumerate() {
            let role = match b.role {
                Role::Input => "in",
                Role::Output => "out",
                Role::Scratch => "scratch",
                Role::Partial(op) => match op {
                    ReduceOp::Sum => "partial sum",
                    ReduceOp::Max => "partial max",
                    ReduceOp::Min => "partial min",
                    ReduceOp::Prod => "partial prod",
                },
            };
            let access = match b.access {
                Access::Each => String::new(),
                Access::Scalar => " [0]".to_string(),
                Access::Outer(n) => format!(" [i / {n}]"),
                Access::Inner(n) => format!(" [i % {n}]"),
                Access::Gather { index, n, rows } => {
                    format!(" [clamp(#{index}[i / {n}], 0, {rows} - 1) * {n} + i % {n}]")
                }
                Access::Window { row, start, len } => format!(
                    " [(i / {row}) * {len} + i % {row} - {start}, where {start} <= i % {row} < {}]",
                    start + len
                ),
            };
            write!(
                f,
                "{}{role} #{i}: {}{access} = {}",
                if i > 0 { ", " } else { "" },
                b.dtype,
                b.value
            )?;
        }
        writeln!(f, ") {{")?;
        // A row kernel lists its instructions stage by stage, in the order they run.
        let mut order: Vec<usize> = (0..self.body.len()).collect();
        if let Some(r) = &self.rows {
            order.sort_by_key(|&k| {
                let stage = r.stages[k];
                let at = match stage {
                    Stage::Row(p) => (p, 0),
                    Stage::Elem(p) => (p, 1),
                };
                (at, k)
            });
        }
        let mut current = None;
        for k in order {
            let ins = &self.body[k];
            if let Some(r) = &self.rows {
                let stage = r.stages[k];
                if current != Some(stage) {
                    current = Some(stage);
                    match stage {
                        Stage::Row(p) => writeln!(f, " row {p}:")?,
                        Stage::Elem(p) => writeln!(f, " pass {p}:")?,
                    }
                }
            }
            let args: Vec<String> = ins.args.iter().map(|a| format!("v{a}")).collect();
            let head = match &ins.op {
                KOp::Load(b) => format!("load #{b}"),
                KOp::Const(s) => format!("const {}", ferrax_ir::scalar_text(*s)),
                KOp::Unary(u) => u.name().to_string(),
                KOp::Binary(b) => b.name().to_string(),
                KOp::Compare(c) => c.name().to_string(),
                KOp::Select => "select".to_string(),
                KOp::Clamp => "clamp".to_string(),
                KOp::Convert(d) => format!("convert.{d}"),
                KOp::Fma => "fma".to_string(),
                KOp::Bitcast => "bitcast".to_string(),
                KOp::ShiftLeft(n) => format!("shl {n},"),
                KOp::ShiftRight(n) => format!("shr {n},"),
                KOp::ShiftRightLogical(n) => format!("shr.logical {n},"),
                KOp::Index { stride, size } => format!("index stride={stride} size={size}"),
                KOp::Reduce(r) => r.name().to_string(),
                KOp::Beyond(u) => format!("beyond {},", u.name()),
                KOp::Store(b) => {
                    writeln!(f, "  store #{b}, {}", args.join(", "))?;
                    continue;
                }
                KOp::Accumulate(b) => {
                    writeln!(f, "  accumulate #{b}, {}", args.join(", "))?;
                    continue;
                }
            };
            let sep = if args.is_empty() { "" } else { " " };
            writeln!(f, "  v{k} = {head}{sep}{} : {}", args.join(", "), ins.dtype)?;
        }
        f.write_str("}\n")
    }
}
