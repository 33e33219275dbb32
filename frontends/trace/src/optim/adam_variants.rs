//! Adam's relatives, each optax's transformation chained with the learning rate as its alias
//! is: Adamax (`scale_by_adamax`, an infinity-norm second moment), AMSGrad
//! (`scale_by_amsgrad`, the running maximum of the corrected second moment), AdaBelief
//! (`scale_by_belief`, the second moment of the gradient's deviation from its mean), RAdam
//! (`scale_by_radam`, Adam rectified by the variance of its adaptive rate, plain momentum while
//! that is undefined) and LAMB (Adam, weight decay, then `scale_by_trust_ratio`: each leaf's
//! update scaled to the ratio of the parameter's norm to the update's).

use super::adam::{
    adaptive_updates, bias_correction, corrected_first, correction_type, first_moments,
    second_moments,
};
use super::{increment, leaves_of, or_failed, scale_by_learning_rate, zero_count, Chain};
use super::{AdamState, AddDecayedWeights, GradientTransformation, LearningRate, Mask};
use super::{ScaleByAdam, ScaleByLearningRate};
use crate::tree::child_key_paths;
use crate::tree_util::{tree_map, tree_unflatten, zeros_like};
use crate::{Result, Tensor, Tree, TreeDef};

/// Adamax's scaling (`optax.scale_by_adamax`): `mu` as Adam's, `nu = max(b2 nu, |g| + eps)`,
/// the update `mu_hat / nu`.
#[derive(Clone, Debug)]
pub struct ScaleByAdamax {
    pub b1: f64,
    pub b2: f64,
    pub eps: f64,
}

impl<P: Tree> GradientTransformation<P> for ScaleByAdamax {
    type State = AdamState<P>;

    fn init(&self, params: &P) -> AdamState<P> {
        AdamState::zeros(params)
    }

    fn update(&self, updates: &P, state: &AdamState<P>, _: &P) -> (P, AdamState<P>) {
        let result = moments_of(updates, state).and_then(|(def, g, [mu, nu])| {
            let count = increment(&state.count);
            let mu = first_moments(&g, &mu, self.b1);
            let nu: Vec<Tensor> = g
                .iter()
                .zip(&nu)
                .map(|(g, v)| (g.abs() + self.eps).maximum(v * self.b2))
                .collect();
            let m_hat = corrected_first(&g, &mu, self.b1, &count, false);
            let out = m_hat.iter().zip(&nu).map(|(m, v)| m / v).collect();
            adam_result(&def, out, count, mu, nu)
        });
        or_failed(result, updates, state)
    }
}

/// AdaBelief's scaling (`optax.scale_by_belief`): `mu` as Adam's, `nu = b2 nu + (1 - b2)
/// (g - mu)² + eps_root` (with the new `mu`), the update `mu_hat / (sqrt(nu_hat) + eps)`.
#[derive(Clone, Debug)]
pub struct ScaleByBelief {
    pub b1: f64,
    pub b2: f64,
    pub eps: f64,
    pub eps_root: f64,
}

impl<P: Tree> GradientTransformation<P> for ScaleByBelief {
    type State = AdamState<P>;

    fn init(&self, params: &P) -> AdamState<P> {
        AdamState::zeros(params)
    }

    fn update(&self, updates: &P, state: &AdamState<P>, _: &P) -> (P, AdamState<P>) {
        let result = moments_of(updates, state).and_then(|(def, g, [mu, nu])| {
            let count = increment(&state.count);
            let mu = first_moments(&g, &mu, self.b1);
            let error: Vec<Tensor> = g.iter().zip(&mu).map(|(g, m)| g - m).collect();
            let nu: Vec<Tensor> = second_moments(&error, &nu, self.b2)
                .iter()
                .map(|v| v + self.eps_root)
                .collect();
            let m_hat = corrected_first(&g, &mu, self.b1, &count, false);
            let c2 = bias_correction(self.b2, &count, correction_type(&g));
            let out = m_hat
                .iter()
                .zip(&nu)
                .map(|(m, v)| m / ((v / c2.astype(v.dtype())).sqrt() + self.eps))
                .collect();
            adam_result(&def, out, count, mu, nu)
        });
        or_failed(result, updates, state)
    }
}

/// RAdam's scaling (`optax.scale_by_radam`): Adam's moments; where the rectification term
/// `ro = ro_inf - 2 t b2^t / (1 - b2^t)` (`ro_inf = 2 / (1 - b2) - 1`) reaches `threshold`,
/// the update `r mu_hat / (sqrt(nu_hat + eps_root) + eps)` with `r = sqrt((ro - 4)(ro - 2)
/// ro_inf / ((ro_inf - 4)(ro_inf - 2) ro))`, before that `mu_hat`.
#[derive(Clone, Debug)]
pub struct ScaleByRadam {
    pub b1: f64,
    pub b2: f64,
    pub eps: f64,
    pub eps_root: f64,
    pub threshold: f64,
}

impl<P: Tree> GradientTransformation<P> for ScaleByRadam {
    type State = AdamState<P>;

    fn init(&self, params: &P) -> AdamState<P> {
        AdamState::zeros(params)
    }

    fn update(&self, updates: &P, state: &AdamState<P>, _: &P) -> (P, AdamState<P>) {
        let result = moments_of(updates, state).and_then(|(def, g, [mu, nu])| {
            let count = increment(&state.count);
            let (mu, nu) = (
                first_moments(&g, &mu, self.b1),
                second_moments(&g, &nu, self.b2),
            );
            let wide = correction_type(&g);
            let ro_inf = 2.0 / (1.0 - self.b2) - 1.0;
            let t = count.astype(wide);
            let b2t = Tensor::full(wide, Vec::<usize>::new(), self.b2).pow(&t);
            let ro = -(t * 2.0 * &b2t / (-&b2t + 1.0)) + ro_inf;
            let r = ((&ro - 4.0) * (&ro - 2.0) * ro_inf
                / (&ro * ((ro_inf - 4.0) * (ro_inf - 2.0))))
                .sqrt();
            let rectified = ro.greater_equal(self.threshold);
            let m_hat = corrected_first(&g, &mu, self.b1, &count, false);
            let c2 = bias_correction(self.b2, &count, wide);
            let out = m_hat
                .iter()
                .zip(&nu)
                .map(|(m, v)| {
                    let v_hat = v / c2.astype(v.dtype());
                    let adapted =
                        r.astype(m.dtype()) * m / ((v_hat + self.eps_root).sqrt() + self.eps);
                    rectified.select(&adapted, m)
                })
                .collect();
            adam_result(&def, out, count, mu, nu)
        });
        or_failed(result, updates, state)
    }
}

/// The gradients' leaves with the first and second moments'.
fn moments_of<P: Tree>(
    updates: &P,
    state: &AdamState<P>,
) -> Result<(TreeDef, Vec<Tensor>, [Vec<Tensor>; 2])> {
    leaves_of(
        updates,
        [
            (&state.mu, "the first moment"),
            (&state.nu, "the second moment"),
        ],
    )
}

fn adam_result<P: Tree>(
    def: &TreeDef,
    out: Vec<Tensor>,
    count: Tensor,
    mu: Vec<Tensor>,
    nu: Vec<Tensor>,
) -> Result<(P, AdamState<P>)> {
    Ok((
        tree_unflatten(def, out)?,
        AdamState {
            count,
            mu: tree_unflatten(def, mu)?,
            nu: tree_unflatten(def, nu)?,
        },
    ))
}

/// AMSGrad's state: Adam's and the running maximum of the corrected second moment.
#[derive(Clone, Debug)]
pub struct AmsgradState<P> {
    /// An `i32` scalar: the updates made so far.
    pub count: Tensor,
    pub mu: P,
    pub nu: P,
    pub nu_max: P,
}

impl<P: Tree> Tree for AmsgradState<P> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![
            self.count.flatten(leaves),
            self.mu.flatten(leaves),
            self.nu.flatten(leaves),
            self.nu_max.flatten(leaves),
        ])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(4)?;
        Ok(AmsgradState {
            count: Tensor::unflatten(&c[0], leaves)?,
            mu: P::unflatten(&c[1], leaves)?,
            nu: P::unflatten(&c[2], leaves)?,
            nu_max: P::unflatten(&c[3], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("count", &self.count, prefix, out);
        child_key_paths("mu", &self.mu, prefix, out);
        child_key_paths("nu", &self.nu, prefix, out);
        child_key_paths("nu_max", &self.nu_max, prefix, out);
    }
}

/// AMSGrad's scaling (`optax.scale_by_amsgrad`): Adam's moments, `nu_max = max(nu_max,
/// nu_hat)`, the update `mu_hat / (sqrt(nu_max + eps_root) + eps)`.
#[derive(Clone, Debug)]
pub struct ScaleByAmsgrad {
    pub b1: f64,
    pub b2: f64,
    pub eps: f64,
    pub eps_root: f64,
}

impl<P: Tree> GradientTransformation<P> for ScaleByAmsgrad {
    type State = AmsgradState<P>;

    fn init(&self, params: &P) -> AmsgradState<P> {
        AmsgradState {
            count: zero_count(),
            mu: zeros_like(params),
            nu: zeros_like(params),
            nu_max: zeros_like(params),
        }
    }

    fn update(&self, updates: &P, state: &AmsgradState<P>, _: &P) -> (P, AmsgradState<P>) {
        let result = leaves_of(
            updates,
            [
                (&state.mu, "the first moment"),
                (&state.nu, "the second moment"),
                (&state.nu_max, "the second moment's maximum"),
            ],
        )
        .and_then(|(def, g, [mu, nu, nu_max])| {
            let count = increment(&state.count);
            let (mu, nu) = (
                first_moments(&g, &mu, self.b1),
                second_moments(&g, &nu, self.b2),
            );
            let m_hat = corrected_first(&g, &mu, self.b1, &count, false);
            let c2 = bias_correction(self.b2, &count, correction_type(&g));
            let nu_max: Vec<Tensor> = nu_max
                .iter()
                .zip(&nu)
                .map(|(top, v)| top.maximum(v / c2.astype(v.dtype())))
                .collect();
            let out = m_hat
                .iter()
                .zip(&nu_max)
                .map(|(m, v)| m / ((v + self.eps_root).sqrt() + self.eps))
                .collect();
            Ok((
                tree_unflatten(&def, out)?,
                AmsgradState {
                    count,
                    mu: tree_unflatten(&def, mu)?,
                    nu: tree_unflatten(&def, nu)?,
                    nu_max: tree_unflatten(&def, nu_max)?,
                },
            ))
        });
        or_failed(result, updates, state)
    }
}

/// LAMB's layer-wise scaling (`optax.scale_by_trust_ratio`, no minimum norm): each leaf's
/// update times `|param| / |update|` (Euclidean norms), or 1 where either is zero.
#[derive(Clone, Debug)]
pub struct ScaleByTrustRatio;

impl<P: Tree> GradientTransformation<P> for ScaleByTrustRatio {
    type State = ();

    fn init(&self, _: &P) {}

    fn update(&self, updates: &P, state: &(), params: &P) -> (P, ()) {
        let result = leaves_of(updates, [(params, "the parameters")]).and_then(|(def, u, [p])| {
            let out = u
                .iter()
                .zip(&p)
                .map(|(u, p)| {
                    let norm = |x: &Tensor| x.square().sum(..).sqrt();
                    let (param_norm, update_norm) = (norm(p), norm(u));
                    let zero = param_norm.equal(0.0).logical_or(update_norm.equal(0.0));
                    u * zero.select(1.0, &(param_norm / update_norm))
                })
                .collect();
            Ok((tree_unflatten(&def, out)?, ()))
        });
        or_failed(result, updates, state)
    }
}

/// Adamax: [`ScaleByAdamax`] then the learning rate.
pub type Adamax = Chain<(ScaleByAdamax, ScaleByLearningRate)>;
/// AMSGrad: [`ScaleByAmsgrad`] then the learning rate.
pub type Amsgrad = Chain<(ScaleByAmsgrad, ScaleByLearningRate)>;
/// AdaBelief: [`ScaleByBelief`] then the learning rate.
pub type AdaBelief = Chain<(ScaleByBelief, ScaleByLearningRate)>;
/// RAdam: [`ScaleByRadam`] then the learning rate.
pub type Radam = Chain<(ScaleByRadam, ScaleByLearningRate)>;
/// LAMB: [`ScaleByAdam`], [`AddDecayedWeights`], [`ScaleByTrustRatio`], then the learning rate.
pub type Lamb = Chain<(
    ScaleByAdam,
    AddDecayedWeights,
    ScaleByTrustRatio,
    ScaleByLearningRate,
)>;

/// Adamax (`optax.adamax(lr, b1, b2, eps)`; the usual values are 0.9, 0.999, 1e-8).
pub fn adamax(learning_rate: impl Into<LearningRate>, b1: f64, b2: f64, eps: f64) -> Adamax {
    Chain((
        ScaleByAdamax { b1, b2, eps },
        scale_by_learning_rate(learning_rate),
    ))
}

/// AMSGrad (`optax.amsgrad(lr, b1, b2, eps)`; the usual values are 0.9, 0.999, 1e-8).
pub fn amsgrad(learning_rate: impl Into<LearningRate>, b1: f64, b2: f64, eps: f64) -> Amsgrad {
    Chain((
        ScaleByAmsgrad {
            b1,
            b2,
            eps,
            eps_root: 0.0,
        },
        scale_by_learning_rate(learning_rate),
    ))
}

/// AdaBelief (`optax.adabelief(lr, b1, b2, eps, eps_root)`; the usual values are 0.9, 0.999,
/// 1e-16, 1e-16).
pub fn adabelief(
    learning_rate: impl Into<LearningRate>,
    b1: f64,
    b2: f64,
    eps: f64,
    eps_root: f64,
) -> AdaBelief {
    Chain((
        ScaleByBelief {
            b1,
            b2,
            eps,
            eps_root,
        },
        scale_by_learning_rate(learning_rate),
    ))
}

/// RAdam (`optax.radam(lr, b1, b2, eps)`, threshold 5; the usual values are 0.9, 0.999, 1e-8).
pub fn radam(learning_rate: impl Into<LearningRate>, b1: f64, b2: f64, eps: f64) -> Radam {
    Chain((
        ScaleByRadam {
            b1,
            b2,
            eps,
            eps_root: 0.0,
            threshold: 5.0,
        },
        scale_by_learning_rate(learning_rate),
    ))
}

/// LAMB (`optax.lamb(lr, b1, b2, eps, weight_decay=, mask=)`; the usual values are 0.9, 0.999,
/// 1e-6).
pub fn lamb(
    learning_rate: impl Into<LearningRate>,
    b1: f64,
    b2: f64,
    eps: f64,
    weight_decay: f64,
    mask: Mask,
) -> Lamb {
    Chain((
        ScaleByAdam::new(b1, b2, eps, false),
        AddDecayedWeights { weight_decay, mask },
        ScaleByTrustRatio,
        scale_by_learning_rate(learning_rate),
    ))
}

/// Yogi's scaling (`optax.scale_by_yogi`): `mu` as Adam's, `nu = nu − (1 − b2)·sign(nu −
/// g²)·g²` (an additive second moment that grows no faster than the gradients), both from
/// `initial_accumulator_value`, the update `mu_hat / (sqrt(nu_hat + eps_root) + eps)`.
#[derive(Clone, Debug)]
pub struct ScaleByYogi {
    pub b1: f64,
    pub b2: f64,
    pub eps: f64,
    pub eps_root: f64,
    pub initial_accumulator_value: f64,
}

impl<P: Tree> GradientTransformation<P> for ScaleByYogi {
    type State = AdamState<P>;

    fn init(&self, params: &P) -> AdamState<P> {
        let full = |p: &P| {
            tree_map(p, |t| {
                Tensor::full(
                    t.dtype(),
                    t.shape().to_vec(),
                    self.initial_accumulator_value,
                )
            })
        };
        AdamState {
            count: zero_count(),
            mu: full(params),
            nu: full(params),
        }
    }

    fn update(&self, updates: &P, state: &AdamState<P>, _: &P) -> (P, AdamState<P>) {
        let result = moments_of(updates, state).and_then(|(def, g, [mu, nu])| {
            let count = increment(&state.count);
            let mu = first_moments(&g, &mu, self.b1);
            let nu: Vec<Tensor> = g
                .iter()
                .zip(&nu)
                .map(|(g, v)| {
                    let g2 = g * g;
                    v - (v - &g2).sign() * g2 * (1.0 - self.b2)
                })
                .collect();
            let m_hat = corrected_first(&g, &mu, self.b1, &count, false);
            let c2 = bias_correction(self.b2, &count, correction_type(&g));
            let out = adaptive_updates(&m_hat, &nu, &c2, self.eps_root, self.eps);
            adam_result(&def, out, count, mu, nu)
        });
        or_failed(result, updates, state)
    }
}

/// Yogi (`optax.yogi`): Yogi's scaling, then the learning rate (optax's `eps` default is
/// 1e-3).
pub type Yogi = Chain<(ScaleByYogi, ScaleByLearningRate)>;

/// [`Yogi`] with optax's accumulator start, 1e-6.
pub fn yogi(learning_rate: impl Into<LearningRate>, b1: f64, b2: f64, eps: f64) -> Yogi {
    Chain((
        ScaleByYogi {
            b1,
            b2,
            eps,
            eps_root: 0.0,
            initial_accumulator_value: 1e-6,
        },
        scale_by_learning_rate(learning_rate),
    ))
}
