//! Nested inputs and outputs (JAX's pytrees): any `Tree` flattens to a list of tensor leaves
//! plus a [`TreeDef`] describing its structure, and rebuilds from them.

use crate::{Error, Result, Tensor};
use std::any::{type_name, Any};
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The structure of a tree with its leaves taken out.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TreeDef {
    Leaf,
    /// An absent optional value.
    None,
    /// A struct, tuple, array or vector with these children, in order.
    Node(Vec<TreeDef>),
    /// A map with string keys (`BTreeMap<String, _>`, JAX's dict): its keys, in order, are part
    /// of the structure.
    Dict(Vec<(String, TreeDef)>),
    /// A [`Static`] value.
    Static(StaticValue),
}

/// A value of a tree that is not traced (JAX's `static_argnums`): the function receives it as
/// is, and it is part of the tree's structure, so of `jit`'s cache key. A call with another
/// value (by the value's `Eq`) traces and compiles again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Static<T>(pub T);

/// The value of a [`Static`] inside a [`TreeDef`], compared and hashed by its own type's `Eq`
/// and `Hash` (values of different types differ).
#[derive(Clone)]
pub struct StaticValue(Arc<dyn StaticKey>);

trait StaticKey: Any + fmt::Debug + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn equals(&self, other: &dyn StaticKey) -> bool;
    fn hash_into(&self, state: &mut dyn Hasher);
}

impl<T: Any + fmt::Debug + Eq + Hash + Send + Sync> StaticKey for T {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn equals(&self, other: &dyn StaticKey) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }

    fn hash_into(&self, mut state: &mut dyn Hasher) {
        std::any::TypeId::of::<T>().hash(&mut state);
        self.hash(&mut state);
    }
}

impl PartialEq for StaticValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.equals(&*other.0)
    }
}

impl Eq for StaticValue {}

impl Hash for StaticValue {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash_into(state);
    }
}

impl fmt::Debug for StaticValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl TreeDef {
    /// The children of a node with exactly `n` children, or a structure error.
    pub fn children(&self, n: usize) -> Result<&[TreeDef]> {
        match self {
            TreeDef::Node(c) if c.len() == n => Ok(c),
            other => Err(Error::Tree {
                expected: format!("a node with {n} children"),
                found: other.to_string(),
            }),
        }
    }

    pub fn num_leaves(&self) -> usize {
        match self {
            TreeDef::Leaf => 1,
            TreeDef::None | TreeDef::Static(_) => 0,
            TreeDef::Node(c) => c.iter().map(TreeDef::num_leaves).sum(),
            TreeDef::Dict(c) => c.iter().map(|(_, d)| d.num_leaves()).sum(),
        }
    }
}

impl fmt::Display for TreeDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeDef::Leaf => f.write_str("*"),
            TreeDef::None => f.write_str("None"),
            TreeDef::Static(v) => write!(f, "static {v:?}"),
            TreeDef::Node(c) => {
                f.write_str("(")?;
                for (i, d) in c.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{d}")?;
                }
                f.write_str(")")
            }
            TreeDef::Dict(c) => {
                f.write_str("{")?;
                for (i, (k, d)) in c.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k:?}: {d}")?;
                }
                f.write_str("}")
            }
        }
    }
}

/// A value made of tensors: a `Tensor`, tuples, arrays, `Vec`s, `Option`s, `Box`es,
/// `BTreeMap<String, _>`s, and user structs with `#[derive(Tree)]`.
///
/// A value must rebuild from its own flattening (`unflatten(&x.flatten(..), ..)` succeeds):
/// the tree utilities ([`crate::tree_map`], ...) rely on it.
pub trait Tree: Sized {
    /// Appends the leaves in a fixed order and returns the structure.
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef;

    /// Rebuilds a value of structure `def` from leaves in [`Tree::flatten`]'s order.
    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self>;

    /// The leaves alone.
    fn leaves(&self) -> Vec<Tensor> {
        let mut out = Vec::new();
        self.flatten(&mut out);
        out
    }

    /// Appends the key path of every leaf, in [`Tree::flatten`]'s order, each below `prefix`
    /// (JAX's `tree_flatten_with_path`; checkpoints name tensors by them): a derived struct's
    /// children are keyed by field name, a map's by key, a sequence's or tuple's by position,
    /// and `Option` and `Box` add no key. `TreeDef` holds no names, so the default keys every
    /// child by its position in the structure (an `Option`'s value as `0`).
    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        positional_key_paths(&self.flatten(&mut Vec::new()), prefix, out);
    }
}

/// The key path of every leaf of `def`, children keyed by position (or dict key).
pub(crate) fn positional_key_paths(
    def: &TreeDef,
    prefix: &mut Vec<String>,
    out: &mut Vec<Vec<String>>,
) {
    match def {
        TreeDef::Leaf => out.push(prefix.clone()),
        TreeDef::None | TreeDef::Static(_) => {}
        TreeDef::Node(c) => c.iter().enumerate().for_each(|(i, d)| {
            prefix.push(i.to_string());
            positional_key_paths(d, prefix, out);
            prefix.pop();
        }),
        TreeDef::Dict(c) => c.iter().for_each(|(k, d)| {
            prefix.push(k.clone());
            positional_key_paths(d, prefix, out);
            prefix.pop();
        }),
    }
}

/// [`Tree::key_paths`] of `child`, keyed `key` below `prefix`.
pub(crate) fn child_key_paths<T: Tree>(
    key: impl ToString,
    child: &T,
    prefix: &mut Vec<String>,
    out: &mut Vec<Vec<String>>,
) {
    prefix.push(key.to_string());
    child.key_paths(prefix, out);
    prefix.pop();
}

impl Tree for Tensor {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        leaves.push(self.clone());
        TreeDef::Leaf
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        match def {
            TreeDef::Leaf => leaves.next().ok_or_else(|| Error::Tree {
                expected: "another leaf".into(),
                found: "no more leaves".into(),
            }),
            other => Err(Error::Tree {
                expected: "a tensor leaf".into(),
                found: other.to_string(),
            }),
        }
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(prefix.clone());
    }
}

impl<T: Clone + fmt::Debug + Eq + Hash + Send + Sync + 'static> Tree for Static<T> {
    fn flatten(&self, _: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Static(StaticValue(Arc::new(self.0.clone())))
    }

    fn unflatten(def: &TreeDef, _: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let value = match def {
            TreeDef::Static(v) => v.0.as_any().downcast_ref::<T>(),
            _ => None,
        };
        value.cloned().map(Static).ok_or_else(|| Error::Tree {
            expected: format!("a static {}", type_name::<T>()),
            found: def.to_string(),
        })
    }
}

impl Tree for () {
    fn flatten(&self, _: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(Vec::new())
    }

    fn unflatten(def: &TreeDef, _: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        def.children(0).map(|_| ())
    }
}

macro_rules! impl_tuple {
    ($n:expr; $($t:ident $i:tt),+) => {
        impl<$($t: Tree),+> Tree for ($($t,)+) {
            fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
                TreeDef::Node(vec![$(self.$i.flatten(leaves)),+])
            }

            fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
                let c = def.children($n)?;
                Ok(($($t::unflatten(&c[$i], leaves)?,)+))
            }

            fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
                $(child_key_paths($i, &self.$i, prefix, out);)+
            }
        }
    };
}

impl_tuple!(1; A 0);
impl_tuple!(2; A 0, B 1);
impl_tuple!(3; A 0, B 1, C 2);
impl_tuple!(4; A 0, B 1, C 2, D 3);
impl_tuple!(5; A 0, B 1, C 2, D 3, E 4);
impl_tuple!(6; A 0, B 1, C 2, D 3, E 4, F 5);
impl_tuple!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
impl_tuple!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

impl<T: Tree> Tree for Vec<T> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(self.iter().map(|x| x.flatten(leaves)).collect())
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        match def {
            TreeDef::Node(c) => c.iter().map(|d| T::unflatten(d, leaves)).collect(),
            other => Err(Error::Tree {
                expected: "a sequence".into(),
                found: other.to_string(),
            }),
        }
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for (i, x) in self.iter().enumerate() {
            child_key_paths(i, x, prefix, out);
        }
    }
}

impl<T: Tree, const N: usize> Tree for [T; N] {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(self.iter().map(|x| x.flatten(leaves)).collect())
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let items = def
            .children(N)?
            .iter()
            .map(|d| T::unflatten(d, leaves))
            .collect::<Result<Vec<T>>>()?;
        items.try_into().map_err(|_| Error::Tree {
            expected: format!("{N} elements"),
            found: "a different count".into(),
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for (i, x) in self.iter().enumerate() {
            child_key_paths(i, x, prefix, out);
        }
    }
}

impl<T: Tree> Tree for Option<T> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        match self {
            Some(x) => TreeDef::Node(vec![x.flatten(leaves)]),
            None => TreeDef::None,
        }
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        match def {
            TreeDef::None => Ok(None),
            d => Ok(Some(T::unflatten(&d.children(1)?[0], leaves)?)),
        }
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if let Some(x) = self {
            x.key_paths(prefix, out);
        }
    }
}

impl<T: Tree> Tree for Box<T> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        (**self).flatten(leaves)
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        T::unflatten(def, leaves).map(Box::new)
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        (**self).key_paths(prefix, out);
    }
}

/// Flattened in key order, as JAX flattens a dict.
impl<T: Tree> Tree for BTreeMap<String, T> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Dict(
            self.iter()
                .map(|(k, v)| (k.clone(), v.flatten(leaves)))
                .collect(),
        )
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        match def {
            TreeDef::Dict(c) => c
                .iter()
                .map(|(k, d)| Ok((k.clone(), T::unflatten(d, leaves)?)))
                .collect(),
            other => Err(Error::Tree {
                expected: "a map".into(),
                found: other.to_string(),
            }),
        }
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for (k, v) in self {
            child_key_paths(k, v, prefix, out);
        }
    }
}
