//! `jnp.einsum`: a subscript string such as `"bij,bjk->bik"` spelled as `dot_general`s,
//! sums, diagonals and one transpose. Operands are contracted left to right, two at a time;
//! before each product, labels that only one side reads and the rest of the expression does
//! not are summed out, and a label repeated within one operand takes its diagonal. Without
//! `->`, the output is the labels seen once, in alphabetical order (NumPy's implicit mode).
//! `...` stands for the same leading dimensions in every operand that has it.

use crate::tensor::Tensor;
use ferrax_ir::{DType, DotDims};
use std::panic::Location;

/// An operand with one label per dimension.
struct Labeled {
    tensor: Tensor,
    labels: Vec<char>,
}

/// The labels of each operand and of the output, `...` expanded to upper-case-free
/// placeholders (characters from U+2460), or a message saying what is wrong.
fn parse(spec: &str, ranks: &[usize]) -> Result<(Vec<Vec<char>>, Vec<char>), String> {
    let spec: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    let (inputs, output) = match spec.split_once("->") {
        Some((i, o)) => (i.to_string(), Some(o.to_string())),
        None => (spec.clone(), None),
    };
    if inputs.matches("...").count() > ranks.len()
        || output
            .as_ref()
            .is_some_and(|o| o.matches("...").count() > 1)
    {
        return Err("`...` at most once per operand and in the output".to_string());
    }
    let terms: Vec<&str> = inputs.split(',').collect();
    if terms.len() != ranks.len() {
        return Err(format!(
            "{} operand subscripts for {} operands",
            terms.len(),
            ranks.len()
        ));
    }
    let ellipsis = |count: usize| -> Vec<char> {
        (0..count)
            .map(|i| char::from_u32(0x2460 + i as u32).unwrap_or('\u{2460}'))
            .collect()
    };
    let mut ellipsis_rank: Option<usize> = None;
    let mut labels = Vec::with_capacity(terms.len());
    for (term, &rank) in terms.iter().zip(ranks) {
        if term.matches("...").count() > 1 {
            return Err(format!("`...` twice in {term:?}"));
        }
        let named: Vec<char> = term.replace("...", "").chars().collect();
        if let Some(bad) = named.iter().find(|c| !c.is_ascii_alphabetic()) {
            return Err(format!(
                "subscript {bad:?} in {term:?} (letters and `...` only)"
            ));
        }
        let mut term_labels = Vec::with_capacity(rank);
        match term.split_once("...") {
            Some((before, after)) => {
                let count = rank.checked_sub(named.len()).ok_or_else(|| {
                    format!("{term:?} names more dimensions than the operand's {rank}")
                })?;
                if ellipsis_rank.is_some_and(|r| r != count) {
                    return Err(format!(
                        "`...` stands for {count} dimensions in {term:?} but {} elsewhere",
                        ellipsis_rank.unwrap_or(0)
                    ));
                }
                ellipsis_rank = Some(count);
                term_labels.extend(before.chars());
                term_labels.extend(ellipsis(count));
                term_labels.extend(after.chars());
            }
            None if named.len() == rank => term_labels = named,
            None => {
                return Err(format!(
                    "{term:?} names {} dimensions of an operand of {rank}",
                    named.len()
                ))
            }
        }
        labels.push(term_labels);
    }
    let output = match output {
        Some(o) => {
            let mut out = Vec::new();
            match o.split_once("...") {
                Some((before, after)) => {
                    out.extend(before.chars());
                    out.extend(ellipsis(ellipsis_rank.unwrap_or(0)));
                    out.extend(after.chars());
                }
                None => out.extend(o.chars()),
            }
            for (i, c) in out.iter().enumerate() {
                if out[..i].contains(c) {
                    return Err(format!("output subscript {c:?} appears twice"));
                }
                if !labels.iter().any(|l| l.contains(c)) {
                    return Err(format!("output subscript {c:?} is no operand's"));
                }
            }
            out
        }
        None => {
            let all: Vec<char> = labels.iter().flatten().copied().collect();
            let mut once: Vec<char> = all
                .iter()
                .copied()
                .filter(|c| c.is_ascii_alphabetic() && all.iter().filter(|d| *d == c).count() == 1)
                .collect();
            once.sort_unstable();
            let mut out = ellipsis(ellipsis_rank.unwrap_or(0));
            out.extend(once);
            out
        }
    };
    Ok((labels, output))
}

impl Labeled {
    /// The diagonal over every label this operand repeats.
    fn diagonals(mut self) -> Labeled {
        while let Some((i, j)) = (0..self.labels.len()).find_map(|i| {
            (i + 1..self.labels.len())
                .find(|&j| self.labels[j] == self.labels[i])
                .map(|j| (i, j))
        }) {
            let shape = self.tensor.shape().to_vec();
            let rows = Tensor::iota(DType::I64, shape.clone(), i);
            let on = rows.equal(Tensor::iota(DType::I64, shape, j));
            self.tensor = on.select(&self.tensor, 0.0).sum(j);
            self.labels.remove(j);
        }
        self
    }

    /// This operand with the labels `keep` rejects summed out.
    fn sum_except(mut self, keep: impl Fn(char) -> bool) -> Labeled {
        let axes: Vec<usize> = (0..self.labels.len())
            .filter(|&i| !keep(self.labels[i]))
            .collect();
        if !axes.is_empty() {
            self.tensor = self.tensor.sum(axes);
            self.labels.retain(|&c| keep(c));
        }
        self
    }
}

impl Tensor {
    /// The Einstein summation `spec` of `operands` (`jnp.einsum`): `"ij,jk->ik"` is a matrix
    /// product, `"bij,bjk->bik"` a batched one, `"ii->i"` a diagonal, `"ii"` a trace,
    /// `"ij->ji"` a transpose, `"...ij,...jk->...ik"` a product over leading dimensions. A
    /// malformed subscript, or sizes that disagree for one label, is an error naming it.
    #[track_caller]
    pub fn einsum(spec: &str, operands: &[&Tensor]) -> Tensor {
        let location = Location::caller();
        let fail = |message: String| {
            let ty = operands
                .first()
                .map(|t| t.ty().clone())
                .unwrap_or_else(|| ferrax_ir::TensorType::new(DType::F32, Vec::<usize>::new()));
            Tensor::failed(location, format!("einsum {spec:?}: {message}"), ty)
        };
        if let Some(failed) = operands.iter().find(|t| t.error().is_some()) {
            return (*failed).clone();
        }
        let ranks: Vec<usize> = operands.iter().map(|t| t.ndim()).collect();
        let (labels, output) = match parse(spec, &ranks) {
            Ok(parsed) => parsed,
            Err(message) => return fail(message),
        };
        // Every label's size, the same wherever it appears.
        let mut sizes: Vec<(char, usize)> = Vec::new();
        for (t, ls) in operands.iter().zip(&labels) {
            for (&c, &n) in ls.iter().zip(t.shape()) {
                match sizes.iter().find(|(d, _)| *d == c) {
                    Some(&(_, m)) if m != n => {
                        return fail(format!("label {c:?} has sizes {m} and {n}"))
                    }
                    Some(_) => {}
                    None => sizes.push((c, n)),
                }
            }
        }
        let mut pending: Vec<Labeled> = operands
            .iter()
            .zip(labels)
            .map(|(t, labels)| {
                Labeled {
                    tensor: (*t).clone(),
                    labels,
                }
                .diagonals()
            })
            .collect();
        if pending.is_empty() {
            return fail("no operands".to_string());
        }
        let mut acc = pending.remove(0);
        let needed_later = |rest: &[Labeled], c: char| {
            output.contains(&c) || rest.iter().any(|o| o.labels.contains(&c))
        };
        while !pending.is_empty() {
            let other = pending.remove(0);
            let (left, right) = (acc, other);
            let left_labels = left.labels.clone();
            let right_labels = right.labels.clone();
            let left = left.sum_except(|c| needed_later(&pending, c) || right_labels.contains(&c));
            let right = right.sum_except(|c| needed_later(&pending, c) || left_labels.contains(&c));
            let shared: Vec<char> = left
                .labels
                .iter()
                .copied()
                .filter(|c| right.labels.contains(c))
                .collect();
            let (batch, contract): (Vec<char>, Vec<char>) =
                shared.into_iter().partition(|&c| needed_later(&pending, c));
            let position = |ls: &[char], c: char| ls.iter().position(|&d| d == c).unwrap_or(0);
            let dims = DotDims {
                lhs_batch: batch.iter().map(|&c| position(&left.labels, c)).collect(),
                rhs_batch: batch.iter().map(|&c| position(&right.labels, c)).collect(),
                lhs_contract: contract
                    .iter()
                    .map(|&c| position(&left.labels, c))
                    .collect(),
                rhs_contract: contract
                    .iter()
                    .map(|&c| position(&right.labels, c))
                    .collect(),
            };
            let free = |ls: &[char]| -> Vec<char> {
                ls.iter()
                    .copied()
                    .filter(|c| !batch.contains(c) && !contract.contains(c))
                    .collect()
            };
            let mut labels = batch.clone();
            labels.extend(free(&left.labels));
            labels.extend(free(&right.labels));
            acc = Labeled {
                tensor: left.tensor.dot_general(&right.tensor, dims),
                labels,
            };
        }
        let acc = acc.sum_except(|c| output.contains(&c));
        let perm: Vec<usize> = output
            .iter()
            .map(|c| acc.labels.iter().position(|d| d == c).unwrap_or(0))
            .collect();
        match perm.iter().enumerate().all(|(i, &p)| i == p) {
            true => acc.tensor,
            false => acc.tensor.transpose(perm),
        }
    }
}
