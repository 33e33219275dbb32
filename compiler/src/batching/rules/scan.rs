//! `scan`: the body is batched (constants and carried values batched at 0, scanned arrays at
//! 1 so each step's slice is batched at 0). A carried value is batched if its initial value
//! is or the body makes it so (iterated to a fixed point); a stacked output batched in the
//! body comes out batched at 1, behind the scanned dimension.

use super::{BVal, Batcher, R};
use crate::batching::{batch_func, OutAxis};
use ferrax_ir::{Op, Scan};

pub(super) fn batch(bt: &mut Batcher, s: &Scan, args: &[BVal]) -> R<Vec<BVal>> {
    let n_out = s.body.outputs.len();
    let mut batched: Vec<bool> = args.iter().map(|a| a.bdim.is_some()).collect();
    let carried = s.consts..s.consts + s.carry;
    let outs = |batched: &[bool]| -> Vec<OutAxis> {
        (0..n_out)
            .map(|k| match batched.get(s.consts + k) {
                Some(true) if k < s.carry => OutAxis::At(0),
                _ => OutAxis::Auto,
            })
            .collect()
    };
    let axes = |batched: &[bool]| -> Vec<Option<usize>> {
        batched.iter().map(|&b| b.then_some(0)).collect()
    };
    let body = loop {
        let (body, out) = batch_func(&s.body, &axes(&batched), bt.size, &outs(&batched))?;
        let mut changed = false;
        for k in 0..s.carry {
            if out[k] && !batched[s.consts + k] {
                batched[s.consts + k] = true;
                changed = true;
            }
        }
        if !changed {
            break (body, out);
        }
    };
    let (body, out_batched) = body;
    let mut values = Vec::with_capacity(args.len());
    for (i, (a, &b)) in args.iter().zip(&batched).enumerate() {
        let scanned = i >= carried.end;
        values.push(match (b, scanned) {
            (false, _) => a.v,
            (true, false) => bt.materialize(*a, 0)?,
            (true, true) => bt.materialize(*a, 1)?,
        });
    }
    let mut results = Vec::with_capacity(n_out);
    for (k, &b) in out_batched.iter().enumerate() {
        let op = Op::Scan(Box::new(Scan {
            body: body.clone(),
            result: k,
            ..s.clone()
        }));
        let v = bt.push(op, &values)?;
        let bdim = match (b, k < s.carry) {
            (false, _) => None,
            (true, true) => Some(0),
            (true, false) => Some(1),
        };
        results.push(BVal { v, bdim });
    }
    Ok(results)
}
