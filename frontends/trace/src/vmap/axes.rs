//! `in_axes` and `out_axes` as JAX spells them: one value for every leaf (`0`, `None`,
//! `-1`), or a tree prefix of the arguments with one such value per argument (`(None, 0, 0)`)
//! or deeper (`vec![0, 1]`, nested tuples), each applying to every leaf below it.

use crate::TreeDef;
use std::fmt;

/// The batch axes of a tree's leaves, as a prefix of its structure: [`AxisTree::All`] applies
/// to every leaf below it (`None`: not batched; negative axes count from the end),
/// [`AxisTree::Each`] has one entry per child of a tuple, struct, array, vector or map.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AxisTree {
    All(Option<i64>),
    Each(Vec<AxisTree>),
}

/// What `vmap_axes` accepts as `in_axes` and `out_axes`: `0`, `-1`, `None`, `Some(1)`,
/// tuples, arrays and vectors of them, or an [`AxisTree`].
pub trait AxisSpec {
    fn axis_tree(&self) -> AxisTree;
}

impl AxisSpec for AxisTree {
    fn axis_tree(&self) -> AxisTree {
        self.clone()
    }
}

impl AxisSpec for i32 {
    fn axis_tree(&self) -> AxisTree {
        AxisTree::All(Some(i64::from(*self)))
    }
}

impl AxisSpec for Option<i32> {
    fn axis_tree(&self) -> AxisTree {
        AxisTree::All(self.map(i64::from))
    }
}

impl<T: AxisSpec> AxisSpec for Vec<T> {
    fn axis_tree(&self) -> AxisTree {
        AxisTree::Each(self.iter().map(AxisSpec::axis_tree).collect())
    }
}

impl<T: AxisSpec, const N: usize> AxisSpec for [T; N] {
    fn axis_tree(&self) -> AxisTree {
        AxisTree::Each(self.iter().map(AxisSpec::axis_tree).collect())
    }
}

macro_rules! tuple_spec {
    ($($t:ident $i:tt),+) => {
        impl<$($t: AxisSpec),+> AxisSpec for ($($t,)+) {
            fn axis_tree(&self) -> AxisTree {
                AxisTree::Each(vec![$(self.$i.axis_tree()),+])
            }
        }
    };
}

tuple_spec!(A 0);
tuple_spec!(A 0, B 1);
tuple_spec!(A 0, B 1, C 2);
tuple_spec!(A 0, B 1, C 2, D 3);
tuple_spec!(A 0, B 1, C 2, D 3, E 4);
tuple_spec!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_spec!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_spec!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

impl fmt::Display for AxisTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisTree::All(Some(a)) => write!(f, "{a}"),
            AxisTree::All(None) => f.write_str("None"),
            AxisTree::Each(c) => {
                f.write_str("(")?;
                for (i, a) in c.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl AxisTree {
    /// The axis of each leaf of `def`, in flattening order, or why `self` is no prefix of it.
    pub(crate) fn leaves(&self, def: &TreeDef) -> Result<Vec<Option<i64>>, String> {
        let mut out = Vec::with_capacity(def.num_leaves());
        self.collect(def, &mut out)?;
        Ok(out)
    }

    fn collect(&self, def: &TreeDef, out: &mut Vec<Option<i64>>) -> Result<(), String> {
        let children: Vec<&TreeDef> = match def {
            TreeDef::Node(c) => c.iter().collect(),
            TreeDef::Dict(c) => c.iter().map(|(_, d)| d).collect(),
            TreeDef::Leaf | TreeDef::None | TreeDef::Static(_) => Vec::new(),
        };
        match self {
            AxisTree::All(a) => out.extend(std::iter::repeat_n(*a, def.num_leaves())),
            AxisTree::Each(specs) if specs.len() == children.len() => {
                for (s, d) in specs.iter().zip(children) {
                    s.collect(d, out)?;
                }
            }
            AxisTree::Each(specs) => {
                return Err(format!(
                    "{} entries where the structure {def} has {}",
                    specs.len(),
                    children.len()
                ))
            }
        }
        Ok(())
    }
}

/// `axis` (negative from the end) as an index into `0..=top`, or `None` out of range.
pub(crate) fn normalize(axis: i64, top: usize) -> Option<usize> {
    let n = top as i64 + 1;
    let a = if axis < 0 { axis + n } else { axis };
    (0..n).contains(&a).then_some(a as usize)
}
