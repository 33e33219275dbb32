//! Functions over whole trees (`jax.tree` / `jax.tree_util`): mapping leaves of one or several
//! trees of one structure, flattening, zeros of a tree's shape, sums and norms. Optimizers and
//! training steps are written with them instead of by hand per parameter.
//!
//! Functions over several trees compare their structures first and return
//! [`Error::Tree`] naming both when they differ; functions over one tree cannot fail.

use crate::tensor::Inner;
use crate::{Error, Result, Tensor, Tree, TreeDef};
use ferrax_ir::DType;
use std::sync::Arc;

/// The leaves of `tree` and its structure (`jax.tree.flatten`).
pub fn tree_flatten<T: Tree>(tree: &T) -> (Vec<Tensor>, TreeDef) {
    let mut leaves = Vec::new();
    let def = tree.flatten(&mut leaves);
    (leaves, def)
}

/// Rebuilds a tree of structure `def` from exactly `def`'s number of leaves
/// (`jax.tree.unflatten`).
pub fn tree_unflatten<T: Tree>(def: &TreeDef, leaves: Vec<Tensor>) -> Result<T> {
    let want = def.num_leaves();
    if leaves.len() != want {
        return Err(Error::Tree {
            expected: format!("{want} leaves for {def}"),
            found: format!("{} leaves", leaves.len()),
        });
    }
    T::unflatten(def, &mut leaves.into_iter())
}

/// The leaves of `tree`, in flattening order (`jax.tree.leaves`).
pub fn tree_leaves<T: Tree>(tree: &T) -> Vec<Tensor> {
    tree.leaves()
}

/// The structure of `tree` (`jax.tree.structure`).
pub fn tree_structure<T: Tree>(tree: &T) -> TreeDef {
    tree_flatten(tree).1
}

/// Rebuilds `def` from its own flattening's leaves: cannot fail for a lawful [`Tree`].
fn rebuild<T: Tree>(def: &TreeDef, leaves: Vec<Tensor>) -> T {
    tree_unflatten(def, leaves)
        .unwrap_or_else(|e| unreachable!("a Tree does not rebuild from its own flattening: {e}"))
}

/// `tree` with `f` applied to every leaf (`jax.tree.map` over one tree).
pub fn tree_map<T: Tree>(tree: &T, mut f: impl FnMut(&Tensor) -> Tensor) -> T {
    let (leaves, def) = tree_flatten(tree);
    rebuild(&def, leaves.iter().map(&mut f).collect())
}

/// The leaves of `tree`, which must have structure `def` (`what` names it in the error).
pub(crate) fn leaves_matching<T: Tree>(def: &TreeDef, tree: &T, what: &str) -> Result<Vec<Tensor>> {
    let (leaves, d) = tree_flatten(tree);
    if d != *def {
        return Err(Error::Tree {
            expected: format!("{what} to have the structure {def}"),
            found: d.to_string(),
        });
    }
    Ok(leaves)
}

/// `f` applied to the leaves of `a` and `b` pairwise, in `a`'s structure (`jax.tree.map(f, a,
/// b)`); `a` and `b` may be different types of one structure (`TreeDef`).
pub fn tree_map2<A: Tree, B: Tree>(
    a: &A,
    b: &B,
    mut f: impl FnMut(&Tensor, &Tensor) -> Tensor,
) -> Result<A> {
    let (la, def) = tree_flatten(a);
    let lb = leaves_matching(&def, b, "the second tree")?;
    tree_unflatten(&def, la.iter().zip(&lb).map(|(x, y)| f(x, y)).collect())
}

/// `f` applied to the leaves at each position of all `trees` (at least one), in their shared
/// structure (`jax.tree.map(f, *trees)`).
pub fn tree_map_n<T: Tree>(trees: &[&T], mut f: impl FnMut(&[Tensor]) -> Tensor) -> Result<T> {
    let Some((first, rest)) = trees.split_first() else {
        return Err(Error::Tree {
            expected: "at least one tree".into(),
            found: "none".into(),
        });
    };
    let (l0, def) = tree_flatten(*first);
    let others = rest
        .iter()
        .enumerate()
        .map(|(i, t)| leaves_matching(&def, *t, &format!("tree {}", i + 1)))
        .collect::<Result<Vec<_>>>()?;
    let out = (0..l0.len())
        .map(|k| {
            let column: Vec<Tensor> = std::iter::once(l0[k].clone())
                .chain(others.iter().map(|l| l[k].clone()))
                .collect();
            f(&column)
        })
        .collect();
    tree_unflatten(&def, out)
}

/// Zeros of the shape and dtype of every leaf (`jax.tree.map(jnp.zeros_like, tree)`).
pub fn zeros_like<T: Tree>(tree: &T) -> T {
    tree_map(tree, |x| Tensor::zeros(x.dtype(), x.shape().to_vec()))
}

/// The sum of every element of every leaf, as a scalar of the first leaf's dtype (f32 for a
/// tree without leaves). Leaves of other dtypes are converted to it.
pub fn tree_sum<T: Tree>(tree: &T) -> Tensor {
    sum_of(tree.leaves(), |x| x.sum(..))
}

/// `sqrt(sum of |x|² over every element)`: the L2 norm of all leaves together
/// (`optax.global_norm`), each leaf's sum in its own dtype (the real one for complex leaves)
/// and the sums added in the type JAX promotes them to: a tree of one float type keeps it,
/// mixed half and single precision add in f32, anything with f64 in f64.
pub fn global_norm<T: Tree>(tree: &T) -> Tensor {
    let sums: Vec<Tensor> = tree
        .leaves()
        .iter()
        .map(|x| match x.dtype().is_complex() {
            true => (x * &x.conj()).real().sum(..),
            false => x.square().sum(..),
        })
        .collect();
    let dtype = sums
        .iter()
        .map(Tensor::dtype)
        .reduce(|a, b| match (a, b) {
            _ if a == b => a,
            (DType::F64, _) | (_, DType::F64) => DType::F64,
            _ => DType::F32,
        })
        .unwrap_or(DType::F32);
    let sums = sums.iter().map(|x| x.astype(dtype)).collect();
    sum_of(sums, Tensor::clone).sqrt()
}

/// `f` of each leaf, summed in leaf order.
fn sum_of(leaves: Vec<Tensor>, f: impl Fn(&Tensor) -> Tensor) -> Tensor {
    let dtype = leaves.first().map_or(DType::F32, Tensor::dtype);
    leaves
        .iter()
        .map(|x| f(x).astype(dtype))
        .reduce(|a, b| a + b)
        .unwrap_or_else(|| Tensor::zeros(dtype, Vec::<usize>::new()))
}

/// A tree like `tree` whose every leaf fails with `error`: how functions that return trees
/// rather than `Result`s (so that they can run inside `jit`) report structure errors, which
/// then surface from `jit`, `trace` or `Tensor::to_array` like any failed operation.
pub(crate) fn failed_like<T: Tree>(tree: &T, error: Error) -> T {
    let error = Arc::new(error);
    tree_map(tree, |l| {
        Tensor(Inner::Failed {
            error: error.clone(),
            ty: l.ty().clone(),
        })
    })
}

/// The dtype [`ravel_pytree`] gives leaves of `dtypes`: theirs when they share one, else the
/// widest: complex if any is (c128 with any 64-bit float), f64 if any is, otherwise f32.
fn common_dtype(dtypes: &[DType]) -> DType {
    match dtypes.split_first() {
        None => DType::F32,
        Some((first, rest)) if rest.iter().all(|d| d == first) => *first,
        Some(_) => {
            let wide = dtypes.iter().any(|d| matches!(d, DType::F64 | DType::C128));
            match (dtypes.iter().any(|d| d.is_complex()), wide) {
                (true, true) => DType::C128,
                (true, false) => DType::C64,
                (false, true) => DType::F64,
                (false, false) => DType::F32,
            }
        }
    }
}

/// The leaves of `tree` raveled and concatenated into one vector of their common dtype, and
/// the function that splits such a vector back into the tree, each leaf in its own shape and
/// dtype (`jax.flatten_util.ravel_pytree`). A vector of another length is an error.
pub fn ravel_pytree<T: Tree>(tree: &T) -> (Tensor, impl Fn(&Tensor) -> Result<T> + Clone) {
    let (leaves, def) = tree_flatten(tree);
    let dtypes: Vec<DType> = leaves.iter().map(Tensor::dtype).collect();
    let dtype = common_dtype(&dtypes);
    let shapes: Vec<Vec<usize>> = leaves.iter().map(|l| l.shape().to_vec()).collect();
    let flat = match leaves.is_empty() {
        true => Tensor::zeros(dtype, [0]),
        false => {
            let pieces: Vec<Tensor> = leaves
                .iter()
                .map(|l| l.astype(dtype).reshape([l.numel()]))
                .collect();
            Tensor::concatenate(&pieces, 0)
        }
    };
    let unravel = move |flat: &Tensor| -> Result<T> {
        let total: usize = shapes.iter().map(|s| s.iter().product::<usize>()).sum();
        if flat.shape() != [total] {
            return Err(Error::Tree {
                expected: format!("a vector of {total} elements for {def}"),
                found: flat.ty().to_string(),
            });
        }
        let mut offset = 0;
        let mut out = Vec::with_capacity(shapes.len());
        for (shape, &d) in shapes.iter().zip(&dtypes) {
            let n: usize = shape.iter().product();
            let piece = flat.slice(&[offset], &[offset + n]).reshape(shape.clone());
            out.push(match d == flat.dtype() {
                true => piece,
                false => piece.astype(d),
            });
            offset += n;
        }
        tree_unflatten(&def, out)
    };
    (flat, unravel)
}
