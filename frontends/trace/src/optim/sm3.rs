//! SM3 (`optax.sm3`, Anil et al. 2019): an adaptive method whose second-moment memory is one
//! vector per axis of each parameter rather than one value per element. An element's
//! accumulator is the smallest of its axes' maxima plus its squared gradient; the update is
//! the gradient over the accumulator's square root, then momentum.

use super::adam::first_moments;
use super::schedule::{scale_by_learning_rate, ScaleByLearningRate};
use super::{leaves_of, or_failed, Chain, GradientTransformation};
use crate::tree_util::{tree_flatten, tree_unflatten, zeros_like};
use crate::{Tensor, Tree};

/// SM3's scaling (`optax.scale_by_sm3`): with `b2 = 1` (optax's default) accumulators sum
/// squared gradients; else they decay by `b2`.
#[derive(Clone, Debug)]
pub struct ScaleBySm3 {
    pub b1: f64,
    pub b2: f64,
    pub eps: f64,
}

/// [`ScaleBySm3`]'s state: per leaf, one accumulator vector per axis (a scalar leaf has
/// none, and its accumulator is its squared gradient alone), and the momentum of the updates.
#[derive(Clone, Debug, ferrax_derive::Tree)]
#[tree(crate = "crate")]
pub struct Sm3State<P> {
    pub mu: Vec<Vec<Tensor>>,
    pub nu: P,
}

/// `v`, the accumulator of axis `axis` of a leaf of shape `dims`, reshaped to that rank with
/// 1 on every other axis.
fn along(v: &Tensor, dims: &[usize], axis: usize) -> Tensor {
    let shape: Vec<usize> = (0..dims.len())
        .map(|i| if i == axis { dims[i] } else { 1 })
        .collect();
    v.reshape(shape)
}

impl<P: Tree> GradientTransformation<P> for ScaleBySm3 {
    type State = Sm3State<P>;

    fn init(&self, params: &P) -> Sm3State<P> {
        let (leaves, _) = tree_flatten(params);
        let mu = leaves
            .iter()
            .map(|p| {
                p.shape()
                    .iter()
                    .map(|&n| Tensor::zeros(p.dtype(), [n]))
                    .collect()
            })
            .collect();
        Sm3State {
            mu,
            nu: zeros_like(params),
        }
    }

    fn update(&self, updates: &P, state: &Sm3State<P>, _: &P) -> (P, Sm3State<P>) {
        let (b2, eps) = (self.b2, self.eps);
        let fresh = if b2 != 1.0 { 1.0 - b2 } else { 1.0 };
        let result =
            leaves_of(updates, [(&state.nu, "the momentum")]).and_then(|(def, g, [nu])| {
                let mut scaled = Vec::with_capacity(g.len());
                let mut mu = Vec::with_capacity(g.len());
                for (g, v) in g.iter().zip(&state.mu) {
                    let dims = g.shape().to_vec();
                    let smallest = match v.len() {
                        // A scalar has no axis to accumulate along (optax refuses one): its
                        // accumulator is its squared gradient.
                        0 => Tensor::zeros(g.dtype(), Vec::<usize>::new()),
                        1 => along(&v[0], &dims, 0),
                        _ => (1..v.len()).fold(along(&v[0], &dims, 0), |m, i| {
                            m.minimum(along(&v[i], &dims, i))
                        }),
                    };
                    let accum = fresh * (g * g) + b2 * smallest;
                    let inv_sqrt = accum.greater(0.0).select((&accum + eps).rsqrt(), 0.0);
                    scaled.push(g * inv_sqrt);
                    mu.push(match dims.len() {
                        0 | 1 => vec![accum; dims.len()],
                        rank => (0..rank)
                            .map(|i| {
                                let others: Vec<usize> = (0..rank).filter(|&a| a != i).collect();
                                accum.max(others)
                            })
                            .collect(),
                    });
                }
                let nu = first_moments(&scaled, &nu, self.b1);
                let out: P = tree_unflatten(&def, nu.clone())?;
                Ok((
                    out,
                    Sm3State {
                        mu,
                        nu: tree_unflatten(&def, nu)?,
                    },
                ))
            });
        or_failed(result, updates, state)
    }
}

/// SM3 with momentum `momentum` (`optax.sm3(learning_rate, momentum)`).
pub type Sm3 = Chain<(ScaleBySm3, ScaleByLearningRate)>;

/// See [`Sm3`]; `eps` 1e-8 and `b2` 1 as optax's.
pub fn sm3(learning_rate: f64, momentum: f64) -> Sm3 {
    Chain((
        ScaleBySm3 {
            b1: momentum,
            b2: 1.0,
            eps: 1e-8,
        },
        scale_by_learning_rate(learning_rate),
    ))
}
