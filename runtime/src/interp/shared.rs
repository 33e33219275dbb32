//! The parts of one decomposition of one operand that a program reads (`svd_u`, `svd_values`
//! and `svd_vh` of `a`; `eig_left` and `eig_right` in `eig_values`' derivative) are separate
//! instructions, each the whole decomposition's work. A run computes the decomposition once,
//! at the first of them, and keeps the other parts until their instructions take them.

use super::decompose::{all_parts, part_of};
use crate::{Array, RuntimeError};
use ferrax_ir::{Elements, Func, Op, Svd, SvdPart};

/// Whether `a` and `b` are parts of one decomposition (their operands aside): the same op with
/// the same attributes, except that the singular values go with either form of the vectors.
fn compatible(a: &Op, b: &Op) -> bool {
    match (a, b) {
        (Op::Lu(_), Op::Lu(_))
        | (Op::Eigh(_), Op::Eigh(_))
        | (Op::Geqrf(_), Op::Geqrf(_))
        | (Op::Eig(_), Op::Eig(_)) => true,
        (Op::Qr(x), Op::Qr(y)) => x.full_matrices == y.full_matrices,
        (Op::Svd(x), Op::Svd(y)) => {
            x.part == SvdPart::Values
                || y.part == SvdPart::Values
                || x.full_matrices == y.full_matrices
        }
        _ => false,
    }
}

/// A decomposition computed for instructions still to run.
struct Pending {
    /// The instruction that computed it (its operands are the decomposition's).
    first: usize,
    /// A part standing for the decomposition's attributes.
    key: Op,
    parts: Vec<Elements>,
    /// Instructions still to take a part.
    users: usize,
}

/// The decompositions a run has computed for instructions still to run.
#[derive(Default)]
pub struct SharedParts {
    pending: Vec<Pending>,
}

impl SharedParts {
    /// The value of instruction `i` of `func` on `operands` where it is a part of a
    /// decomposition that another instruction still to run (or run before) reads a part of
    /// too; `None` for any other instruction, which the caller evaluates itself.
    pub fn value(
        &mut self,
        func: &Func,
        i: usize,
        operands: &[&Array],
    ) -> Result<Option<Array>, RuntimeError> {
        let ins = &func.body[i];
        let (Some(at), Some(&operand)) = (part_of(&ins.op), operands.first()) else {
            return Ok(None);
        };
        let same = |p: &Pending| func.body[p.first].args == ins.args && compatible(&p.key, &ins.op);
        let index = match self.pending.iter().position(same) {
            Some(index) => index,
            None => {
                // The vectors' form decides an SVD's attributes (the values go with either).
                let siblings = || {
                    func.body[i..]
                        .iter()
                        .filter(|other| other.args == ins.args)
                        .map(|other| &other.op)
                };
                let key = match &ins.op {
                    Op::Svd(Svd {
                        part: SvdPart::Values,
                        ..
                    }) => siblings()
                        .find(|op| matches!(op, Op::Svd(s) if s.part != SvdPart::Values))
                        .unwrap_or(&ins.op)
                        .clone(),
                    op => op.clone(),
                };
                let users = siblings().filter(|op| compatible(&key, op)).count();
                if users < 2 {
                    return Ok(None);
                }
                let parts = all_parts(&key, operand)?;
                self.pending.push(Pending {
                    first: i,
                    key,
                    parts,
                    users,
                });
                self.pending.len() - 1
            }
        };
        let pending = &mut self.pending[index];
        pending.users -= 1;
        let part = match pending.users {
            0 => self.pending.swap_remove(index).parts.swap_remove(at),
            _ => pending.parts[at].clone(),
        };
        Ok(Some(Array::new(ins.ty.shape.clone(), part)?))
    }
}
