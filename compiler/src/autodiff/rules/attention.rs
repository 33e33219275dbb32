//! Dot-product attention: reverse mode of the output and of the log-sum-exps are the gradient
//! parts, which recompute the softmax from the log-sum-exps (flash attention's backward pass:
//! nothing of `T x S` is kept from the forward pass). Forward mode of every part, and reverse
//! mode of the gradient parts (second derivatives), differentiate the part's decomposition
//! into plain ops.

use super::call::inline_jvp;
use super::{Emitter, R};
use crate::autodiff::vjp as vjp_program;
use ferrax_ir::{Attention, AttentionPart, Func, ValueId};

/// The decomposition of `a` on the operands `x`.
fn decomposition(e: &Emitter, a: Attention, x: &[ValueId]) -> R<Func> {
    let types = x.iter().map(|&v| e.ty(v)).collect::<R<Vec<_>>>()?;
    Ok(a.decompose(&types.iter().collect::<Vec<_>>())?)
}

pub(super) fn jvp(
    e: &mut Emitter,
    a: Attention,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    let decomposition = decomposition(e, a, x)?;
    inline_jvp(e, &decomposition, x, t)
}

pub(super) fn vjp(
    e: &mut Emitter,
    a: Attention,
    x: &[ValueId],
    y: ValueId,
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let part = |e: &mut Emitter, part, args: &[ValueId]| {
        e.push(ferrax_ir::Op::Attention(Attention { part, ..a }), args)
    };
    let (q, k, v) = (x[0], x[1], x[2]);
    match a.part {
        AttentionPart::Output => {
            let lse = part(e, AttentionPart::LogSumExp, &[q, k, v])?;
            let no_lse = e.full_like(0.0, lse)?;
            let args = [q, k, v, y, lse, g, no_lse];
            Ok(vec![
                Some(part(e, AttentionPart::QueryGrad, &args)?),
                Some(part(e, AttentionPart::KeyGrad, &args)?),
                Some(part(e, AttentionPart::ValueGrad, &args)?),
            ])
        }
        AttentionPart::LogSumExp => {
            // The softmax weights are the log-sum-exps' derivative by the scores; the values
            // do not enter. `out` and `d_out` are zeros of the output's type.
            let types = x.iter().map(|&v| e.ty(v)).collect::<R<Vec<_>>>()?;
            let dims = a.dims(&types.iter().collect::<Vec<_>>())?;
            let zeros = e.splat(0.0, &dims.output())?;
            let args = [q, k, v, zeros, y, zeros, g];
            Ok(vec![
                Some(part(e, AttentionPart::QueryGrad, &args)?),
                Some(part(e, AttentionPart::KeyGrad, &args)?),
                None,
            ])
        }
        AttentionPart::QueryGrad | AttentionPart::KeyGrad | AttentionPart::ValueGrad => {
            let program = vjp_program(&decomposition(e, a, x)?)?;
            let mut args = x.to_vec();
            args.push(g);
            let outs = e.b.inline(&program, &args)?;
            Ok(outs.into_iter().skip(1).map(Some).collect())
        }
    }
}
