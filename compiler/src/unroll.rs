//! `scan`'s `unroll` lowered away (JAX's `lax.scan(..., unroll=k)`): a scan of `length` L
//! unrolled by k becomes a scan of L / k steps whose body runs the original body k times, on
//! the slices of a `[L / k, k, ...]` reshape of each scanned array, its outputs stacked the
//! same way and reshaped back; the L mod k steps left over are inlined after it (before it
//! when `reverse`). Where fewer than two such blocks remain (k ≥ L / 2), every step is
//! inlined and no scan is left. The body's instructions run on the same values in the same
//! order, and slices, reshapes and concatenations move bits without arithmetic, so results
//! are identical to the scan's.
//!
//! The compile pipeline runs this first: derivatives are already
//! taken (the derived scans keep their `unroll`), and the simplifier then sees the unrolled
//! steps side by side, sharing work between them. A scan of length 0, or one whose body runs
//! a host callback, is left as it is.

use crate::dce::eliminate_dead_code;
use ferrax_ir::{Func, FuncBuilder, Op, Scan, Shape, TensorType, TypeError, ValueId};

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum UnrollError {
    #[error("unrolling a scan built an ill-typed instruction: {0}")]
    Type(#[from] TypeError),
    #[error("unrolling a scan: {0}")]
    Malformed(String),
}

type R<T> = Result<T, UnrollError>;

/// Whether `func`, or a function it holds, has a scan to unroll.
fn has_unrolled_scan(func: &Func) -> bool {
    func.body.iter().any(|ins| {
        matches!(&ins.op, Op::Scan(s) if s.unroll > 1)
            || ins.op.regions().iter().any(|(_, f)| has_unrolled_scan(f))
    })
}

/// `func` with every scan of `unroll` > 1 (in the functions it holds too) lowered into a scan
/// over blocks of steps and inlined steps; `func` itself where there is none.
pub fn unroll_scans(func: &Func) -> R<Func> {
    if !has_unrolled_scan(func) {
        return Ok(func.clone());
    }
    let mut b = FuncBuilder::new(func.name.clone());
    let mut values: Vec<ValueId> = func.params.iter().map(|t| b.param(t.clone())).collect();
    // The values of instructions yielding results of a call already lowered.
    let mut done: Vec<Option<ValueId>> = vec![None; func.body.len()];
    for (i, ins) in func.body.iter().enumerate() {
        let args: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        let op = ins.op.map_regions(unroll_scans)?;
        let v = match (done[i], &op) {
            (Some(v), _) => v,
            // Steps with callbacks stay steps: copies of one would be one call where they read
            // the same values, and a callback runs once per step.
            (None, Op::Scan(s)) if s.unroll > 1 && s.length > 0 && !s.body.has_effects() => {
                let results = unrolled(&mut b, s, &args)?;
                for j in func.call_instructions(i) {
                    let k = func.body[j].op.call_result().map_or(0, |(k, _)| k);
                    done[j] = results.get(k).copied();
                }
                done[i].ok_or_else(|| malformed(format!("result {i} of the scan")))?
            }
            (None, Op::Scan(s)) => {
                let once = Op::Scan(Box::new(Scan {
                    unroll: 1,
                    ..(**s).clone()
                }));
                b.push(once, &args)?
            }
            (None, op) => b.push(op.clone(), &args)?,
        };
        values.push(v);
    }
    let outputs = func.outputs.iter().map(|o| values[o.index()]).collect();
    Ok(eliminate_dead_code(&b.finish(outputs)))
}

fn malformed(what: String) -> UnrollError {
    UnrollError::Malformed(format!("{what} is missing"))
}

fn ty(b: &FuncBuilder, v: ValueId) -> R<TensorType> {
    b.value_type(v)
        .cloned()
        .ok_or_else(|| malformed(format!("the type of {v}")))
}

/// Rows `from..to` of `x` along its leading dimension.
fn rows(b: &mut FuncBuilder, x: ValueId, from: usize, to: usize) -> R<ValueId> {
    let dims = ty(b, x)?.dims().to_vec();
    let mut start = vec![0; dims.len()];
    let mut limit = dims.clone();
    if let (Some(s), Some(l)) = (start.first_mut(), limit.first_mut()) {
        (*s, *l) = (from, to);
    }
    let strides = vec![1; dims.len()];
    let op = Op::Slice {
        start,
        limit,
        strides,
    };
    Ok(b.push(op, &[x])?)
}

fn reshape(b: &mut FuncBuilder, x: ValueId, dims: Vec<usize>) -> R<ValueId> {
    let shape = Shape::new(dims);
    Ok(b.push(Op::Reshape { shape }, &[x])?)
}

/// Row `t` of `x`, its leading dimension dropped.
fn row(b: &mut FuncBuilder, x: ValueId, t: usize) -> R<ValueId> {
    let sliced = rows(b, x, t, t + 1)?;
    let dims = ty(b, x)?.dims().get(1..).unwrap_or_default().to_vec();
    reshape(b, sliced, dims)
}

/// `ys` (each of one step, in index order) stacked along a new leading dimension.
fn stack(b: &mut FuncBuilder, ys: &[ValueId]) -> R<ValueId> {
    let lifted = ys
        .iter()
        .map(|&y| {
            let mut dims = vec![1];
            dims.extend_from_slice(ty(b, y)?.dims());
            reshape(b, y, dims)
        })
        .collect::<R<Vec<_>>>()?;
    Ok(b.push(Op::Concatenate { axis: 0 }, &lifted)?)
}

/// One step of `s` inlined: the body on the constants, `carry` and row `t` of each of `xs`;
/// `carry` becomes the next carried values, and the step's outputs are returned.
fn step(
    b: &mut FuncBuilder,
    s: &Scan,
    consts: &[ValueId],
    carry: &mut Vec<ValueId>,
    xs: &[ValueId],
    t: usize,
) -> R<Vec<ValueId>> {
    let mut args = consts.to_vec();
    args.append(carry);
    for &x in xs {
        args.push(row(b, x, t)?);
    }
    let mut out = b.inline(&s.body, &args)?;
    let ys = out.split_off(s.carry.min(out.len()));
    *carry = out;
    Ok(ys)
}

/// The order in which `s` visits indices `from..to`.
fn order(s: &Scan, from: usize, to: usize) -> Vec<usize> {
    match s.reverse {
        false => (from..to).collect(),
        true => (from..to).rev().collect(),
    }
}

/// The body of the scan over blocks: the body of `s` run on each of `k` rows of each block
/// (`[k, ...]` slices), in `s`'s order, its outputs stacked in index order.
fn block_body(s: &Scan, k: usize) -> R<Func> {
    let mut b = FuncBuilder::new(format!("{}_x{k}", s.body.name));
    let fixed = s.consts + s.carry;
    let params: Vec<ValueId> = s
        .body
        .params
        .iter()
        .enumerate()
        .map(|(p, t)| {
            let mut dims = if p < fixed { vec![] } else { vec![k] };
            dims.extend_from_slice(t.dims());
            b.param(TensorType::new(t.dtype, Shape::new(dims)))
        })
        .collect();
    let (consts, rest) = params.split_at(s.consts.min(params.len()));
    let (carry, xs) = rest.split_at(s.carry.min(rest.len()));
    let mut carry = carry.to_vec();
    let ny = s.body.outputs.len().saturating_sub(s.carry);
    let mut ys: Vec<Vec<ValueId>> = vec![vec![ValueId(0); k]; ny];
    for t in order(s, 0, k) {
        for (j, y) in step(&mut b, s, consts, &mut carry, xs, t)?
            .into_iter()
            .enumerate()
        {
            ys[j][t] = y;
        }
    }
    let mut outputs = carry;
    for y in &ys {
        outputs.push(stack(&mut b, y)?);
    }
    Ok(b.finish(outputs))
}

/// The steps of `s` left after its blocks, rows `from..` of `xs`.
struct Tail<'a> {
    s: &'a Scan,
    consts: &'a [ValueId],
    xs: &'a [ValueId],
    from: usize,
}

impl Tail<'_> {
    /// Inlines the steps in order from `carry`, adding each step's outputs to `pieces`.
    fn inline(
        &self,
        b: &mut FuncBuilder,
        carry: &mut Vec<ValueId>,
        pieces: &mut [Vec<(usize, ValueId)>],
    ) -> R<()> {
        for t in order(self.s, self.from, self.s.length) {
            let ys = step(b, self.s, self.consts, carry, self.xs, t)?;
            for (j, y) in ys.into_iter().enumerate() {
                let mut dims = vec![1];
                dims.extend_from_slice(ty(b, y)?.dims());
                let lifted = reshape(b, y, dims)?;
                if let Some(p) = pieces.get_mut(j) {
                    p.push((t, lifted));
                }
            }
        }
        Ok(())
    }
}

/// The lowered `s` on `args` (its constants, carried values and scanned arrays): its final
/// carried values, then its stacked outputs.
fn unrolled(b: &mut FuncBuilder, s: &Scan, args: &[ValueId]) -> R<Vec<ValueId>> {
    let (l, k) = (s.length, s.unroll);
    let fixed = s.consts + s.carry;
    let (consts, xs) = (
        args.get(..s.consts).unwrap_or_default(),
        args.get(fixed..).unwrap_or_default(),
    );
    let mut carry = args.get(s.consts..fixed).unwrap_or_default().to_vec();
    let ny = s.body.outputs.len().saturating_sub(s.carry);
    // Blocks of k steps in a scan over rows 0..main, the rest inlined.
    let blocks = match l / k {
        q if q >= 2 => q,
        _ => 0,
    };
    let main = blocks * k;
    // Per stacked output: its pieces in index order, each `(first row, value)`.
    let mut pieces: Vec<Vec<(usize, ValueId)>> = vec![Vec::new(); ny];
    let tail = Tail {
        s,
        consts,
        xs,
        from: main,
    };
    if s.reverse {
        tail.inline(b, &mut carry, &mut pieces)?;
    }
    if blocks > 0 {
        let mut operands = consts.to_vec();
        operands.extend(&carry);
        for &x in xs {
            let mut dims = vec![blocks, k];
            dims.extend_from_slice(ty(b, x)?.dims().get(1..).unwrap_or_default());
            let head = rows(b, x, 0, main)?;
            operands.push(reshape(b, head, dims)?);
        }
        let op = Op::Scan(Box::new(Scan {
            body: block_body(s, k)?,
            length: blocks,
            unroll: 1,
            result: 0,
            ..s.clone()
        }));
        let results: Vec<ValueId> = (0..s.carry + ny)
            .map(|r| b.push(op.with_result(r), &operands))
            .collect::<Result<_, _>>()?;
        carry = results[..s.carry].to_vec();
        for (j, &y) in results[s.carry..].iter().enumerate() {
            let mut dims = vec![main];
            dims.extend_from_slice(ty(b, y)?.dims().get(2..).unwrap_or_default());
            pieces[j].push((0, reshape(b, y, dims)?));
        }
    }
    if !s.reverse {
        tail.inline(b, &mut carry, &mut pieces)?;
    }
    let mut results = carry;
    for mut p in pieces {
        p.sort_by_key(|&(t, _)| t);
        let values: Vec<ValueId> = p.into_iter().map(|(_, v)| v).collect();
        results.push(match values.as_slice() {
            [one] => *one,
            _ => b.push(Op::Concatenate { axis: 0 }, &values)?,
        });
    }
    Ok(results)
}
