//! `stablehlo.sort`: the comparator region must be one `jax.lax.sort` emits, a lexicographic
//! order on some of the operands (its keys), each compared `LT` (ascending) or `GT`
//! (descending); float keys must be put in lax's canonical form first (-0 as +0, every NaN as
//! one NaN, then a `TOTALORDER` comparison), which is the order of ferrax's `sort`; complex
//! operands are ordered by their canonical real parts, then imaginary parts. Keys
//! after the first break ties as `or(lt(a, b), and(eq(a, b), rest))`. The import is the
//! stable permutation of the keys, least significant first (so each stable argsort keeps the
//! order the later keys gave), gathered from every operand. Other comparators are refused
//! with the reason.

use super::attrs::usizes;
use super::names::direction;
use super::Importer;
use crate::parse::{Operation, Region};
use crate::Error;
use ferrax_ir::{CompareOp, Gather, Op, UnaryOp, ValueId};
use std::collections::HashMap;

/// One key of the order: the operand it compares (or the real or imaginary part of a complex
/// operand, as lax orders complex numbers), and whether it sorts descending.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    operand: usize,
    part: Option<UnaryOp>,
    descending: bool,
}

/// The comparator's ops by the names they define, and its arguments' positions.
struct Comparator<'a> {
    defs: HashMap<&'a str, &'a Operation>,
    args: HashMap<&'a str, usize>,
    line: usize,
}

impl<'a> Comparator<'a> {
    fn new(region: &'a Region, line: usize) -> Comparator<'a> {
        let mut defs = HashMap::new();
        for op in &region.ops {
            for r in &op.results {
                defs.insert(r.as_str(), op);
            }
        }
        let args = region
            .args
            .iter()
            .enumerate()
            .map(|(k, (name, _))| (name.as_str(), k))
            .collect();
        Comparator { defs, args, line }
    }

    fn refuse(&self, why: &str) -> Error {
        Error::unsupported(self.line, format!("sort with a comparator {why}"))
    }

    fn def(&self, name: &str) -> Result<&'a Operation, Error> {
        self.defs
            .get(name)
            .copied()
            .ok_or_else(|| self.refuse(&format!("reading %{name}, which is no comparison")))
    }

    fn short(op: &Operation) -> &str {
        op.name.strip_prefix("stablehlo.").unwrap_or(&op.name)
    }

    /// The comparator argument `name` is, directly (`false`) or in lax's canonical float form
    /// `select(x != x, NaN, select(x == 0, 0, x))` (`true`), where `x` is the argument or its
    /// real or imaginary part (the part returned).
    fn argument(&self, name: &str) -> Result<(usize, bool, Option<UnaryOp>), Error> {
        if let Some(&k) = self.args.get(name) {
            return Ok((k, false, None));
        }
        let not_canonical = || self.refuse("comparing values other than its arguments");
        let outer = self.def(name)?;
        let [is_nan, _, inner] = outer.operands.as_slice() else {
            return Err(not_canonical());
        };
        let inner_op = self.def(inner)?;
        let [is_zero, _, x] = inner_op.operands.as_slice() else {
            return Err(not_canonical());
        };
        let part_of = |x: &str| -> Option<(usize, Option<UnaryOp>)> {
            if let Some(&k) = self.args.get(x) {
                return Some((k, None));
            }
            let def = self.defs.get(x)?;
            let part = match Self::short(def) {
                "real" => UnaryOp::Real,
                "imag" => UnaryOp::Imag,
                _ => return None,
            };
            let k = *self.args.get(def.operands.first()?.as_str())?;
            Some((k, Some(part)))
        };
        let (Some((k, part)), "select", "select") = (
            part_of(x.as_str()),
            Self::short(outer),
            Self::short(inner_op),
        ) else {
            return Err(not_canonical());
        };
        let nan_test = self.def(is_nan)?;
        let zero_test = self.def(is_zero)?;
        let tests_x = |t: &Operation, dir: CompareOp| {
            Self::short(t) == "compare"
                && direction(&t.words) == Some(dir)
                && t.operands.first() == Some(x)
        };
        let canonical = tests_x(nan_test, CompareOp::Ne)
            && nan_test.operands.get(1) == Some(x)
            && tests_x(zero_test, CompareOp::Eq);
        if !canonical {
            return Err(not_canonical());
        }
        Ok((k, true, part))
    }

    /// The key a `compare` of two arguments orders by, given its expected direction (`LT`
    /// or `GT` for an order, `EQ` for a tie test).
    fn key(
        &self,
        compare: &Operation,
        float: impl Fn(usize) -> bool,
    ) -> Result<(Key, CompareOp), Error> {
        if Self::short(compare) != "compare" {
            return Err(self.refuse(&format!("combining with {}", compare.name)));
        }
        let dir = direction(&compare.words)
            .ok_or_else(|| self.refuse("with a comparison without a direction"))?;
        let [a, b] = compare.operands.as_slice() else {
            return Err(self.refuse("with a malformed comparison"));
        };
        let ((a, ca, pa), (b, cb, pb)) = (self.argument(a)?, self.argument(b)?);
        let (lo, hi) = (a.min(b), a.max(b));
        if lo % 2 != 0 || hi != lo + 1 || pa != pb {
            return Err(self.refuse("comparing arguments of different operands"));
        }
        let operand = lo / 2;
        if (float(operand) || pa.is_some()) && !(ca && cb) {
            return Err(self.refuse(
                "ordering floats by a total order that separates -0 from +0 and NaNs by sign \
                 (lax canonicalises them first)",
            ));
        }
        let swapped = a > b;
        let descending = match dir {
            CompareOp::Lt => swapped,
            CompareOp::Gt => !swapped,
            CompareOp::Eq => false,
            CompareOp::Le | CompareOp::Ge | CompareOp::Ne => {
                return Err(self.refuse(&format!("comparing by {}", dir.name())))
            }
        };
        Ok((
            Key {
                operand,
                part: pa,
                descending,
            },
            dir,
        ))
    }

    /// The keys, most significant first, of the lexicographic order returned as `result`.
    fn keys(&self, result: &str, float: impl Fn(usize) -> bool + Copy) -> Result<Vec<Key>, Error> {
        let mut keys = Vec::new();
        let mut current = result.to_string();
        loop {
            let op = self.def(&current)?;
            if Self::short(op) == "compare" {
                let (key, dir) = self.key(op, float)?;
                if dir == CompareOp::Eq {
                    return Err(self.refuse("ordering by equality"));
                }
                keys.push(key);
                return Ok(keys);
            }
            let (Some(first), Some(second), "or") =
                (op.operands.first(), op.operands.get(1), Self::short(op))
            else {
                return Err(self.refuse(&format!("combining with {}", op.name)));
            };
            let (less, tie) = match Self::short(self.def(first)?) {
                "compare" => (self.def(first)?, self.def(second)?),
                _ => (self.def(second)?, self.def(first)?),
            };
            let (key, dir) = self.key(less, float)?;
            if dir == CompareOp::Eq || Self::short(tie) != "and" {
                return Err(self.refuse("that is not lexicographic"));
            }
            let [x, y] = tie.operands.as_slice() else {
                return Err(self.refuse("that is not lexicographic"));
            };
            let (equal, rest) = match Self::short(self.def(x)?) {
                "compare" if direction(&self.def(x)?.words) == Some(CompareOp::Eq) => (x, y),
                _ => (y, x),
            };
            let (tie_key, tie_dir) = self.key(self.def(equal)?, float)?;
            if tie_dir != CompareOp::Eq
                || tie_key.operand != key.operand
                || tie_key.part != key.part
            {
                return Err(self.refuse("that is not lexicographic"));
            }
            keys.push(key);
            current = rest.clone();
        }
    }
}

impl Importer<'_> {
    /// Every result of a `stablehlo.sort` of `args`.
    pub(super) fn sort(&mut self, op: &Operation, args: &[ValueId]) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let dimension = usizes(op.attr(&["dimension"]).unwrap_or(&[]), line)?
            .first()
            .copied()
            .unwrap_or(0);
        let region = op
            .regions
            .first()
            .ok_or_else(|| Error::at(line, "sort needs a comparator"))?;
        let returned = match region.ops.last() {
            Some(r) if matches!(r.name.as_str(), "stablehlo.return" | "return") => {
                r.operands.first().cloned()
            }
            _ => None,
        }
        .ok_or_else(|| Error::at(line, "sort: the comparator returns nothing"))?;
        let types: Vec<_> = args
            .iter()
            .map(|&a| self.b.value_type(a).cloned())
            .collect();
        let float = |k: usize| {
            types
                .get(k)
                .and_then(|t| t.as_ref())
                .is_some_and(|t| t.dtype.is_float())
        };
        let keys = Comparator::new(region, line).keys(&returned, float)?;
        if let ([only], [key @ Key { part: None, .. }]) = (args, keys.as_slice()) {
            let sorted = Op::Sort {
                dimension,
                descending: key.descending,
            };
            return Ok(vec![self.push(sorted, &[*only], line)?]);
        }
        let rank = types
            .first()
            .and_then(|t| t.as_ref())
            .map_or(0, |t| t.rank());
        let gather = Op::Gather(Box::new(Gather::along_axis(rank, dimension)));
        let mut perm: Option<ValueId> = None;
        for key in keys.iter().rev() {
            let x = *args
                .get(key.operand)
                .ok_or_else(|| Error::at(line, "sort: the comparator reads a missing operand"))?;
            let x = match key.part {
                Some(part) => self.push(Op::Unary(part), &[x], line)?,
                None => x,
            };
            let x = match perm {
                Some(p) => self.push(gather.clone(), &[x, p], line)?,
                None => x,
            };
            let order = Op::Argsort {
                dimension,
                descending: key.descending,
            };
            let p = self.push(order, &[x], line)?;
            perm = Some(match perm {
                Some(prev) => self.push(gather.clone(), &[prev, p], line)?,
                None => p,
            });
        }
        let perm = perm.ok_or_else(|| Error::at(line, "sort: the comparator has no key"))?;
        args.iter()
            .map(|&x| self.push(gather.clone(), &[x, perm], line))
            .collect()
    }
}
