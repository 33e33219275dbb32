//! A kernel's independent parts. Fusion joins every run of elementwise work of one length, so
//! an optimizer's updates of many parameters of one size become one kernel whose loop repeats
//! the same arithmetic once per parameter: GPT-2's 768-wide gains and biases make kernels of
//! hundreds of divisions and square roots, and the GPU driver's compile time grows with them.
//! Cut into its parts, such a kernel is several kernels of one code, which a GPU launch of
//! several kernels runs as one loop over their buffers, its code emitted once.

use super::{Access, KInstr, KOp, Kernel, KernelSig, Role};

/// `kernel`'s independent parts, each a kernel of its own (named after it, `_0`, `_1`, ...),
/// where at least two of them compute alike ([`Kernel::same_code`]); else `kernel` alone.
/// Parts share no work and no buffer but scalars, which each loads for itself, and the
/// constants and element indices each computes: cutting never reads an array twice. Row
/// kernels, column reductions and gathers stay whole.
pub fn independent_parts(kernel: Kernel) -> Vec<Kernel> {
    let whole = kernel.rows.is_some()
        || kernel.sig.buffers.iter().any(|b| {
            matches!(b.role, Role::Partial(_)) || matches!(b.access, Access::Gather { .. })
        });
    if whole {
        return vec![kernel];
    }
    let part_of = parts(&kernel);
    let count = part_of.iter().flatten().max().map_or(0, |&p| p + 1);
    if count < 2 {
        return vec![kernel];
    }
    let parts: Vec<Kernel> = (0..count).map(|p| part(&kernel, &part_of, p)).collect();
    let repeats = parts
        .iter()
        .enumerate()
        .any(|(i, a)| parts[i + 1..].iter().any(|b| a.same_code(b)));
    if repeats {
        parts
    } else {
        vec![kernel]
    }
}

/// Whether every part may compute instruction `ins` for itself: a constant, an element index,
/// or a scalar's load. Anything else, any op to come included, ties its users into one part.
fn shared(kernel: &Kernel, ins: &KInstr) -> bool {
    match ins.op {
        KOp::Load(b) => kernel.sig.buffers[b].access == Access::Scalar,
        ref op => matches!(op, KOp::Const(_) | KOp::Index { .. }),
    }
}

/// Per instruction, its part (numbered in order of first instruction), or `None` for those
/// every part computes for itself ([`shared`]).
fn parts(kernel: &Kernel) -> Vec<Option<usize>> {
    let n = kernel.body.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for (i, ins) in kernel.body.iter().enumerate() {
        for &a in &ins.args {
            if !shared(kernel, &kernel.body[a]) {
                let (x, y) = (root(&mut parent, i), root(&mut parent, a));
                parent[x.max(y)] = x.min(y);
            }
        }
    }
    let mut number = vec![None; n];
    let mut count = 0;
    let mut part_of = vec![None; n];
    for (i, ins) in kernel.body.iter().enumerate() {
        if shared(kernel, ins) {
            continue;
        }
        let r = root(&mut parent, i);
        let p = *number[r].get_or_insert_with(|| {
            count += 1;
            count - 1
        });
        part_of[i] = Some(p);
    }
    part_of
}

/// The buffer `op` loads, stores or accumulates into, if any.
fn named_buffer(op: &KOp) -> Option<usize> {
    match *op {
        KOp::Load(b) | KOp::Store(b) | KOp::Accumulate(b) => Some(b),
        KOp::Const(_)
        | KOp::Unary(_)
        | KOp::Binary(_)
        | KOp::Compare(_)
        | KOp::Select
        | KOp::Clamp
        | KOp::Convert(_)
        | KOp::Fma
        | KOp::Bitcast
        | KOp::ShiftLeft(_)
        | KOp::ShiftRight(_)
        | KOp::ShiftRightLogical(_)
        | KOp::Index { .. }
        | KOp::Reduce(_)
        | KOp::Beyond(_) => None,
    }
}

/// Part `p` of `kernel` as a kernel: its instructions and the shared ones they read, in order,
/// and the buffers they load and store, in order.
fn part(kernel: &Kernel, part_of: &[Option<usize>], p: usize) -> Kernel {
    let body = &kernel.body;
    let mut wanted: Vec<bool> = part_of.iter().map(|&q| q == Some(p)).collect();
    for i in (0..body.len()).rev() {
        if wanted[i] {
            for &a in &body[i].args {
                wanted[a] = true;
            }
        }
    }
    let mut used = vec![false; kernel.sig.buffers.len()];
    for b in (0..body.len())
        .filter(|&i| wanted[i])
        .filter_map(|i| named_buffer(&body[i].op))
    {
        used[b] = true;
    }
    let mut sig = KernelSig::default();
    let mut renumbered = vec![0; kernel.sig.buffers.len()];
    for (b, buffer) in kernel
        .sig
        .buffers
        .iter()
        .enumerate()
        .filter(|&(b, _)| used[b])
    {
        renumbered[b] = sig.buffers.len();
        sig.buffers.push(buffer.clone());
    }
    let mut index = vec![0; body.len()];
    let mut instrs = Vec::new();
    for (i, ins) in body.iter().enumerate().filter(|&(i, _)| wanted[i]) {
        let op = match ins.op {
            KOp::Load(b) => KOp::Load(renumbered[b]),
            KOp::Store(b) => KOp::Store(renumbered[b]),
            KOp::Accumulate(b) => KOp::Accumulate(renumbered[b]),
            ref op => {
                debug_assert!(named_buffer(op).is_none(), "{op:?} names a buffer");
                op.clone()
            }
        };
        index[i] = instrs.len();
        instrs.push(KInstr {
            op,
            args: ins.args.iter().map(|&a| index[a]).collect(),
            dtype: ins.dtype,
        });
    }
    Kernel {
        name: format!("{}_{p}", kernel.name),
        len: kernel.len,
        sig,
        body: instrs,
        rows: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Buffer;
    use ferrax_ir::{BinaryOp, DType, Scalar, UnaryOp, ValueId};

    fn buffer(role: Role, access: Access, value: u32) -> Buffer {
        Buffer {
            role,
            dtype: DType::F32,
            access,
            value: ValueId(value),
        }
    }

    fn ins(op: KOp, args: &[usize]) -> KInstr {
        KInstr {
            op,
            args: args.to_vec(),
            dtype: DType::F32,
        }
    }

    /// `out_k = in_k * scale + 1` for two pairs of buffers (buffers: scale, in0, in1, out0,
    /// out1), `second` the second's arithmetic.
    fn two_updates(second: BinaryOp, second_input: Access) -> Kernel {
        use Access::{Each, Scalar as Scalar_};
        Kernel {
            name: "f_k3".into(),
            len: 64,
            sig: KernelSig {
                buffers: vec![
                    buffer(Role::Input, Scalar_, 0),
                    buffer(Role::Input, Each, 1),
                    buffer(Role::Input, second_input, 2),
                    buffer(Role::Output, Each, 3),
                    buffer(Role::Output, Each, 4),
                ],
            },
            body: vec![
                ins(KOp::Load(0), &[]),
                ins(KOp::Const(Scalar::F64(1.0)), &[]),
                ins(KOp::Load(1), &[]),
                ins(KOp::Binary(BinaryOp::Mul), &[2, 0]),
                ins(KOp::Load(2), &[]),
                ins(KOp::Binary(second), &[4, 0]),
                ins(KOp::Binary(BinaryOp::Add), &[3, 1]),
                ins(KOp::Binary(BinaryOp::Add), &[5, 1]),
                ins(KOp::Store(3), &[6]),
                ins(KOp::Store(4), &[7]),
            ],
            rows: None,
        }
    }

    #[test]
    fn parts_of_one_code_are_cut_apart_each_loading_the_scalars() {
        let parts = independent_parts(two_updates(BinaryOp::Mul, Access::Each));
        assert_eq!(parts.len(), 2);
        assert!(parts[0].same_code(&parts[1]));
        assert_eq!(parts[0].name, "f_k3_0");
        let values = |k: &Kernel| -> Vec<u32> { k.sig.buffers.iter().map(|b| b.value.0).collect() };
        assert_eq!(values(&parts[0]), [0, 1, 3]);
        assert_eq!(values(&parts[1]), [0, 2, 4]);
        assert_eq!(
            parts[1].body,
            vec![
                ins(KOp::Load(0), &[]),
                ins(KOp::Const(Scalar::F64(1.0)), &[]),
                ins(KOp::Load(1), &[]),
                ins(KOp::Binary(BinaryOp::Mul), &[2, 0]),
                ins(KOp::Binary(BinaryOp::Add), &[3, 1]),
                ins(KOp::Store(2), &[4]),
            ]
        );
    }

    #[test]
    fn parts_that_differ_stay_one_kernel() {
        let kernel = two_updates(BinaryOp::Sub, Access::Each);
        assert_eq!(independent_parts(kernel.clone()), vec![kernel]);
    }

    #[test]
    fn parts_reading_one_array_stay_one_kernel() {
        let mut kernel = two_updates(BinaryOp::Mul, Access::Each);
        // The second reads the first's input too: cut apart, both would load it.
        kernel.body[5] = ins(KOp::Binary(BinaryOp::Mul), &[2, 4]);
        assert_eq!(independent_parts(kernel.clone()), vec![kernel]);
        let mut unary = two_updates(BinaryOp::Mul, Access::Each);
        unary.body[1] = ins(KOp::Unary(UnaryOp::Neg), &[0]);
        assert_eq!(
            independent_parts(unary.clone()).len(),
            1,
            "a shared computed value"
        );
    }
}
