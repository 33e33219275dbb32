//! Elementwise ops moved across the windows that GPU kernels store and load, so that they
//! run inside the kernel on the far side instead of as kernels of their own, each writing and
//! reading a value once more (a GPU plan's pass, before fusion).
//!
//! - **Into a stored window.** `f(slice(x), c)`, with `f` elementwise, `c` splat constants and
//!   the slice a window a flat kernel stores as it computes `x`, is `slice(f(x, c))` (and
//!   `f(reshape(slice(x)), c)` is `reshape(slice(f(x, c)))`): the kernel computes `f` over all
//!   of `x` in registers and stores only the window. The
//!   attention's q, k and v, scaled and rounded to bf16, are then stored by the kernel that
//!   adds the projection's bias, at half the bytes.
//! - **Out of loaded windows.** A concatenation along the last axis whose operands are
//!   converted from one dtype is the conversion of their concatenation, and one whose
//!   operands are scaled by splat constants is the product of their concatenation with each
//!   column's scale (1 for the others, picked by the column as the kernel picks the windows);
//!   a reshape between moves past the conversion or the scaling first. The kernel reading the concatenation then loads the windows of the
//!   unconverted operands (the attention's bf16 gradients) and converts and scales them itself.
//!
//! Each rewrite is exact: the same op on the same elements, or a product by 1. The CPU does not
//! take windows, so its programs keep their ops where they are.

use crate::dce::eliminate_dead_code;
use crate::fuse::{fusible, window};
use crate::kernel::splat_constant;
use crate::target::{KernelOp, Target};
use ferrax_ir::{
    BinaryOp, CompareOp, DType, Func, FuncBuilder, Instr, Literal, Op, Scalar, TensorType,
    TypeError, ValueId,
};
use std::collections::HashMap;

/// Rounds of rewrites: each moves an op one step (a chain of `n` ops past a window takes `n`).
const ROUNDS: usize = 6;

/// `func` with elementwise ops moved into the windows its kernels store and out of those they
/// load, where `target`'s kernels take them.
pub fn move_across_windows(func: &Func, target: &Target) -> Result<Func, TypeError> {
    let mut func = func.clone();
    for _ in 0..ROUNDS {
        let (next, moved) = round(&func, target)?;
        func = next;
        if !moved {
            break;
        }
    }
    Ok(eliminate_dead_code(&func))
}

/// One round: every op found next to a window moved one step.
fn round(func: &Func, target: &Target) -> Result<(Func, bool), TypeError> {
    let mut b = Builder {
        b: FuncBuilder::new(func.name.clone()),
        made: HashMap::new(),
    };
    let mut map: Vec<ValueId> = func.params.iter().map(|t| b.b.param(t.clone())).collect();
    let mut moved = false;
    for (i, ins) in func.body.iter().enumerate() {
        let args: Vec<ValueId> = ins.args.iter().map(|a| map[a.index()]).collect();
        let rewritten = match into_window(func, i, target) {
            Some(slice) => Some(store_in_window(&mut b, func, ins, slice, &map)?),
            None => out_of_windows(&mut b, func, i, target, &map)?,
        };
        let v = match rewritten {
            Some(v) => {
                moved = true;
                v
            }
            None => b.b.push(ins.op.clone(), &args)?,
        };
        map.push(v);
    }
    let outputs = func.outputs.iter().map(|o| map[o.index()]).collect();
    Ok((b.b.finish(outputs), moved))
}

/// The round's program as it is built: what the rewrites add is made once (the scalings and
/// conversions of one projection's windows are one op over it).
struct Builder {
    b: FuncBuilder,
    made: HashMap<(Op, Vec<ValueId>), ValueId>,
}

impl Builder {
    fn push(&mut self, op: Op, args: &[ValueId]) -> Result<ValueId, TypeError> {
        let key = (op, args.to_vec());
        if let Some(&v) = self.made.get(&key) {
            return Ok(v);
        }
        let v = self.b.push(key.0.clone(), args)?;
        self.made.insert(key, v);
        Ok(v)
    }
}

/// The instruction defining `v`, if an instruction does.
fn defining(func: &Func, v: ValueId) -> Option<(usize, &Instr)> {
    let i = v.index().checked_sub(func.params.len())?;
    func.body.get(i).map(|ins| (i, ins))
}

/// Whether `op` computes each element from the same elements of its operands alone.
fn elementwise(op: &Op) -> bool {
    matches!(op, Op::Unary(_) | Op::Binary(_) | Op::Convert { .. })
}

/// The window (a slice) of operand `v`, and the reshape of it `v` is, if any.
fn window_of(func: &Func, v: ValueId) -> Option<(usize, &Instr, Option<&Instr>)> {
    let (j, ins) = defining(func, v)?;
    if !matches!(ins.op, Op::Reshape { .. }) {
        return Some((j, ins, None));
    }
    let (j, slice) = defining(func, *ins.args.first()?)?;
    Some((j, slice, Some(ins)))
}

/// Where instruction `i` is `f(slice(x), c...)` (or `f(reshape(slice(x)), c...)`) as the
/// module moves into a stored window: the position of the slice among its operands.
fn into_window(func: &Func, i: usize, target: &Target) -> Option<usize> {
    let ins = &func.body[i];
    if !elementwise(&ins.op) || !fusible(func, i, target) {
        return None;
    }
    let stored = |v: ValueId| {
        let (j, slice, _) = window_of(func, v)?;
        let (k, _) = defining(func, *slice.args.first()?)?;
        (window(func, j, target) && fusible(func, k, target)).then_some(())
    };
    let at = ins.args.iter().position(|&a| stored(a).is_some())?;
    let others_splat = ins
        .args
        .iter()
        .enumerate()
        .all(|(k, &a)| k == at || splat_constant(func, a).is_some());
    others_splat.then_some(at)
}

/// `f(x, c...)` over the sliced value `x` (splat constants spread to its shape), then the
/// same slice of it (and reshape).
fn store_in_window(
    b: &mut Builder,
    func: &Func,
    ins: &Instr,
    at: usize,
    map: &[ValueId],
) -> Result<ValueId, TypeError> {
    let invalid = |message: &str| TypeError::Invalid {
        op: "slice",
        message: message.into(),
    };
    let (_, slice, reshape) =
        window_of(func, ins.args[at]).ok_or_else(|| invalid("a window without its instruction"))?;
    let x = slice.args[0];
    let shape = func
        .value_type(x)
        .ok_or_else(|| invalid("a window of a value without a type"))?
        .shape
        .clone();
    let mut args = Vec::with_capacity(ins.args.len());
    for (k, &a) in ins.args.iter().enumerate() {
        if k == at {
            args.push(map[x.index()]);
            continue;
        }
        let value = splat_constant(func, a).ok_or_else(|| invalid("an operand not a splat"))?;
        args.push(b.push(Op::Constant(Literal::splat(value, shape.clone())), &[])?);
    }
    let whole = b.push(ins.op.clone(), &args)?;
    let window = b.push(slice.op.clone(), &[whole])?;
    match reshape {
        Some(r) => b.push(r.op.clone(), &[window]),
        None => Ok(window),
    }
}

/// How an operand of a concatenation moves out of it.
enum Operand {
    /// `convert(w)`.
    Converted(ValueId),
    /// `mul(w, c)` or `mul(c, w)` with `c` a splat constant.
    Scaled(ValueId, Scalar),
    /// Neither.
    Other,
}

fn operand(func: &Func, v: ValueId) -> Operand {
    let Some((_, ins)) = defining(func, v) else {
        return Operand::Other;
    };
    if let (Op::Convert { .. }, &[w]) = (&ins.op, ins.args.as_slice()) {
        return Operand::Converted(w);
    }
    if let (Op::Binary(BinaryOp::Mul), &[x, y]) = (&ins.op, ins.args.as_slice()) {
        if ins.ty.dtype.is_float() {
            if let Some(c) = splat_constant(func, y) {
                return Operand::Scaled(x, c);
            }
            if let Some(c) = splat_constant(func, x) {
                return Operand::Scaled(y, c);
            }
        }
    }
    Operand::Other
}

/// Instruction `i` rewritten where it is a concatenation along the last axis that a kernel
/// loads in windows, one of whose operands moves out of it (one step), or `None`.
fn out_of_windows(
    b: &mut Builder,
    func: &Func,
    i: usize,
    target: &Target,
    map: &[ValueId],
) -> Result<Option<ValueId>, TypeError> {
    let ins = &func.body[i];
    let Op::Concatenate { axis } = ins.op else {
        return Ok(None);
    };
    if axis + 1 != ins.ty.rank() || !fusible(func, i, target) {
        return Ok(None);
    }
    let types = |v: ValueId| func.value_type(v).cloned();
    // A reshape of a converted or scaled value: the reshape moves inside first.
    let mut reshaped = false;
    let mut args = Vec::with_capacity(ins.args.len());
    for &a in &ins.args {
        let inner = defining(func, a).filter(|(_, r)| matches!(r.op, Op::Reshape { .. }));
        let Some((_, reshape)) = inner else {
            args.push(map[a.index()]);
            continue;
        };
        let (to, r) = (reshape.ty.shape.clone(), reshape.args[0]);
        let reshape_of = |b: &mut Builder, w: ValueId| {
            b.push(Op::Reshape { shape: to.clone() }, &[map[w.index()]])
        };
        let Some((_, inner)) = defining(func, r) else {
            args.push(map[a.index()]);
            continue;
        };
        match operand(func, r) {
            Operand::Converted(w) => {
                let w = reshape_of(b, w)?;
                args.push(b.push(inner.op.clone(), &[w])?);
                reshaped = true;
            }
            Operand::Scaled(w, c) => {
                let w = reshape_of(b, w)?;
                let c = b.push(Op::Constant(Literal::splat(c, to.clone())), &[])?;
                args.push(b.push(Op::Binary(BinaryOp::Mul), &[w, c])?);
                reshaped = true;
            }
            Operand::Other => args.push(map[a.index()]),
        }
    }
    if reshaped {
        return Ok(Some(b.push(ins.op.clone(), &args)?));
    }
    let operands: Vec<Operand> = ins.args.iter().map(|&a| operand(func, a)).collect();
    // Scaled operands: the concatenation of what they scale, times each column's scale.
    if operands.iter().any(|o| matches!(o, Operand::Scaled(..))) {
        let dtype = ins.ty.dtype;
        let mut unscaled = Vec::with_capacity(ins.args.len());
        let mut windows = Vec::with_capacity(ins.args.len());
        let mut end = 0;
        for (&a, o) in ins.args.iter().zip(&operands) {
            end += types(a).map_or(0, |t| t.dims()[axis]);
            let (w, c) = match o {
                Operand::Scaled(w, c) => (*w, *c),
                Operand::Converted(_) | Operand::Other => (a, Scalar::from_f64(dtype, 1.0)),
            };
            match windows.last_mut() {
                Some((last_end, last)) if *last == c => *last_end = end,
                Some(_) | None => windows.push((end, c)),
            }
            unscaled.push(map[w.index()]);
        }
        let Ok(end) = i32::try_from(end) else {
            return Ok(None);
        };
        let scale = column_values(b, &ins.ty, &windows, end)?;
        let joined = b.push(ins.op.clone(), &unscaled)?;
        return Ok(Some(b.push(Op::Binary(BinaryOp::Mul), &[joined, scale])?));
    }
    // Operands all converted from one dtype: the conversion of their concatenation, where a
    // kernel loads windows of that dtype.
    let sources: Option<Vec<ValueId>> = operands
        .iter()
        .map(|o| match o {
            Operand::Converted(w) => Some(*w),
            Operand::Scaled(..) | Operand::Other => None,
        })
        .collect();
    let Some(sources) = sources else {
        return Ok(None);
    };
    let dtypes: Option<Vec<_>> = sources.iter().map(|&w| types(w).map(|t| t.dtype)).collect();
    let Some(from) = dtypes.as_deref().and_then(|d| d.first().copied()) else {
        return Ok(None);
    };
    let one_dtype = dtypes.iter().flatten().all(|&d| d == from);
    let loads = [KernelOp::Window, KernelOp::Select].map(|op| target.computes(op, from));
    if !one_dtype || loads.contains(&false) {
        return Ok(None);
    }
    let joined: Vec<ValueId> = sources.iter().map(|w| map[w.index()]).collect();
    let joined = b.push(ins.op.clone(), &joined)?;
    Ok(Some(b.push(Op::Convert { to: ins.ty.dtype }, &[joined])?))
}

/// A value of type `ty` whose element in column `c` (of the last axis, `width` wide) is the
/// value of the first window `(end, value)` with `c < end`: selects on the column, as a kernel
/// computes them in registers.
fn column_values(
    b: &mut Builder,
    ty: &TensorType,
    windows: &[(usize, Scalar)],
    width: i32,
) -> Result<ValueId, TypeError> {
    let splat = |b: &mut Builder, value: Scalar| {
        b.push(Op::Constant(Literal::splat(value, ty.shape.clone())), &[])
    };
    let Some(&(_, last)) = windows.last() else {
        return splat(b, Scalar::from_f64(ty.dtype, 1.0));
    };
    let column = b.push(
        Op::Iota {
            dtype: DType::I32,
            shape: ty.shape.clone(),
            dim: ty.rank() - 1,
        },
        &[],
    )?;
    let mut value = splat(b, last)?;
    for &(end, c) in windows.iter().rev().skip(1) {
        let end = i32::try_from(end).unwrap_or(width);
        let end = splat(b, Scalar::I32(end))?;
        let inside = b.push(Op::Compare(CompareOp::Lt), &[column, end])?;
        let c = splat(b, c)?;
        value = b.push(Op::Select, &[inside, c, value])?;
    }
    Ok(value)
}
