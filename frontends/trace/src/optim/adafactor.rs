//! Adafactor (`optax.adafactor`): second moments kept as row and column means for matrices
//! (memory linear in the sides, not their product), each update clipped by its RMS, scaled by
//! the learning rate and the parameter's RMS, optionally averaged into a momentum and given
//! weight decay, then negated. One transformation computing optax's chain
//! (`scale_by_factored_rms`, `clip_by_block_rms`, `scale_by_learning_rate(flip_sign=False)`,
//! `scale_by_param_block_rms`, `ema`, `add_decayed_weights`, `scale(-1)`) in that order.

use super::{increment, leaves_of, or_failed, zero_count, GradientTransformation};
use super::{LearningRate, Mask};
use crate::tree::child_key_paths;
use crate::tree_util::tree_unflatten;
use crate::{Result, Tensor, Tree, TreeDef};
use ferrax_ir::DType;

/// Adafactor's settings; [`adafactor`] gives optax's defaults.
#[derive(Clone, Debug)]
pub struct Adafactor {
    /// `None` leaves the updates unscaled (optax's `learning_rate=None`).
    pub learning_rate: Option<LearningRate>,
    /// A leaf is factored when its second-largest dimension has at least this size.
    pub min_dim_size_to_factor: usize,
    /// The second moments' decay is `1 - (step + 1)^(-decay_rate)`.
    pub decay_rate: f64,
    /// Steps subtracted from the count in that decay (for fine-tuning).
    pub decay_offset: i32,
    /// Whether updates are scaled by the parameter's RMS (at least 1e-3).
    pub multiply_by_parameter_scale: bool,
    /// Updates whose RMS exceeds this are scaled down to it.
    pub clipping_threshold: Option<f64>,
    /// An exponential moving average of the updates with this decay.
    pub momentum: Option<f64>,
    /// Decoupled weight decay added after the learning rate, on the leaves `weight_decay_mask`
    /// picks.
    pub weight_decay_rate: Option<f64>,
    pub weight_decay_mask: Mask,
    /// Added to the squared gradients.
    pub eps: f64,
    /// Whether matrices' second moments are factored at all.
    pub factored: bool,
}

/// Adafactor with optax's defaults: factored moments for leaves with two dimensions of at
/// least 128, decay rate 0.8, parameter scaling, clipping at an RMS of 1, no momentum or
/// weight decay, eps 1e-30.
pub fn adafactor(learning_rate: impl Into<LearningRate>) -> Adafactor {
    Adafactor {
        learning_rate: Some(learning_rate.into()),
        min_dim_size_to_factor: 128,
        decay_rate: 0.8,
        decay_offset: 0,
        multiply_by_parameter_scale: true,
        clipping_threshold: Some(1.0),
        momentum: None,
        weight_decay_rate: None,
        weight_decay_mask: Mask::All,
        eps: 1e-30,
        factored: true,
    }
}

/// Adafactor's state: the step count, per leaf the row and column means of the squared
/// gradients (factored leaves; `[1]` zeros otherwise) or their full average (`v`, `[1]` for
/// factored leaves), and the momentum where enabled.
#[derive(Clone, Debug)]
pub struct AdafactorState<P> {
    /// An `i32` scalar: the updates made so far.
    pub count: Tensor,
    pub v_row: P,
    pub v_col: P,
    pub v: P,
    pub momentum: Option<P>,
}

impl<P: Tree> Tree for AdafactorState<P> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![
            self.count.flatten(leaves),
            self.v_row.flatten(leaves),
            self.v_col.flatten(leaves),
            self.v.flatten(leaves),
            self.momentum.flatten(leaves),
        ])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(5)?;
        Ok(AdafactorState {
            count: Tensor::unflatten(&c[0], leaves)?,
            v_row: P::unflatten(&c[1], leaves)?,
            v_col: P::unflatten(&c[2], leaves)?,
            v: P::unflatten(&c[3], leaves)?,
            momentum: Option::<P>::unflatten(&c[4], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("count", &self.count, prefix, out);
        child_key_paths("v_row", &self.v_row, prefix, out);
        child_key_paths("v_col", &self.v_col, prefix, out);
        child_key_paths("v", &self.v, prefix, out);
        child_key_paths("momentum", &self.momentum, prefix, out);
    }
}

impl Adafactor {
    /// The dimensions a leaf of `shape` is factored over, `(d1, d0)`: the second-largest and
    /// the largest (ties to the later dimension, as NumPy's `argsort`), when the
    /// second-largest has at least `min_dim_size_to_factor`.
    fn factored_dims(&self, shape: &[usize]) -> Option<(usize, usize)> {
        if !self.factored || shape.len() < 2 {
            return None;
        }
        let mut order: Vec<usize> = (0..shape.len()).collect();
        order.sort_by_key(|&d| shape[d]);
        let (d1, d0) = (order[order.len() - 2], order[order.len() - 1]);
        (shape[d1] >= self.min_dim_size_to_factor).then_some((d1, d0))
    }

    /// The momentum's type for a leaf of `dtype`: f32 for half types (optax's
    /// `dtype_momentum`), the leaf's otherwise.
    fn momentum_type(dtype: DType) -> DType {
        match dtype {
            DType::F16 | DType::BF16 => DType::F32,
            other => other,
        }
    }
}

/// `shape` without dimension `d`.
fn without(shape: &[usize], d: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    s.remove(d);
    s
}

impl<P: Tree> GradientTransformation<P> for Adafactor {
    type State = AdafactorState<P>;

    fn init(&self, params: &P) -> AdafactorState<P> {
        let (leaves, def) = crate::tree_util::tree_flatten(params);
        let one = |p: &Tensor| Tensor::zeros(p.dtype(), [1]);
        let mut rows = Vec::new();
        let mut cols = Vec::new();
        let mut full = Vec::new();
        for p in &leaves {
            match self.factored_dims(p.shape()) {
                Some((d1, d0)) => {
                    rows.push(Tensor::zeros(p.dtype(), without(p.shape(), d0)));
                    cols.push(Tensor::zeros(p.dtype(), without(p.shape(), d1)));
                    full.push(one(p));
                }
                None => {
                    rows.push(one(p));
                    cols.push(one(p));
                    full.push(Tensor::zeros(p.dtype(), p.shape().to_vec()));
                }
            }
        }
        let momentum: Option<Vec<Tensor>> = self.momentum.map(|_| {
            leaves
                .iter()
                .map(|p| Tensor::zeros(Self::momentum_type(p.dtype()), p.shape().to_vec()))
                .collect()
        });
        let tree = |v: Vec<Tensor>| tree_unflatten(&def, v);
        let state = (|| {
            Ok(AdafactorState {
                count: zero_count(),
                v_row: tree(rows)?,
                v_col: tree(cols)?,
                v: tree(full)?,
                momentum: momentum.map(tree).transpose()?,
            })
        })();
        state.unwrap_or_else(|e: crate::Error| AdafactorState {
            count: zero_count(),
            v_row: crate::tree_util::failed_like(params, e.clone()),
            v_col: crate::tree_util::failed_like(params, e.clone()),
            v: crate::tree_util::failed_like(params, e),
            momentum: None,
        })
    }

    fn update(&self, updates: &P, state: &AdafactorState<P>, params: &P) -> (P, AdafactorState<P>) {
        let result = leaves_of(
            updates,
            [
                (&state.v_row, "the row moments"),
                (&state.v_col, "the column moments"),
                (&state.v, "the second moments"),
                (params, "the parameters"),
            ],
        )
        .and_then(|(def, g, [v_row, v_col, v, p])| {
            let momentum = match (&self.momentum, &state.momentum) {
                (Some(_), Some(m)) => {
                    let [m] = leaves_of(updates, [(m, "the momentum")])?.2;
                    Some(m)
                }
                (None, None) => None,
                (Some(_), None) | (None, Some(_)) => {
                    return Err(crate::Error::Tree {
                        expected: format!(
                            "a momentum in the state exactly when momentum is set ({:?})",
                            self.momentum
                        ),
                        found: format!("momentum {}", state.momentum.is_some()),
                    })
                }
            };
            let decay_flags = self.weight_decay_mask.flags(&p)?;
            // optax computes the decay in f32: `1 - (step - offset + 1)^(-decay_rate)`.
            let step = (&state.count - f64::from(self.decay_offset) + 1.0).astype(DType::F32);
            let decay = -step.pow(-self.decay_rate) + 1.0;
            let lr = match &self.learning_rate {
                None => None,
                Some(LearningRate::Constant(lr)) => {
                    Some(Tensor::full(DType::F32, Vec::<usize>::new(), *lr))
                }
                Some(LearningRate::Schedule(s)) => Some(s.value(&state.count)),
            };
            let mut out = Vec::new();
            let (mut rows, mut cols, mut full, mut moms) = (vec![], vec![], vec![], vec![]);
            for i in 0..g.len() {
                let (g, p) = (&g[i], &p[i]);
                let decay = decay.astype(g.dtype());
                let keep = -&decay + 1.0;
                let grad_sqr = g.square() + self.eps;
                let mut u = match self.factored_dims(g.shape()) {
                    Some((d1, d0)) => {
                        let row = &decay * &v_row[i] + &keep * grad_sqr.mean(d0);
                        let col = &decay * &v_col[i] + &keep * grad_sqr.mean(d1);
                        let reduced_d1 = if d1 > d0 { d1 - 1 } else { d1 };
                        let row_col_mean = row.mean_keepdims(reduced_d1);
                        let row_factor = (&row / row_col_mean).pow(-0.5);
                        let col_factor = col.pow(-0.5);
                        let u = g
                            * row_factor.expand_dims(d0 as i64)
                            * col_factor.expand_dims(d1 as i64);
                        rows.push(row);
                        cols.push(col);
                        full.push(v[i].clone());
                        u
                    }
                    None => {
                        let full_v = &decay * &v[i] + &keep * &grad_sqr;
                        let u = g * full_v.pow(-0.5);
                        rows.push(v_row[i].clone());
                        cols.push(v_col[i].clone());
                        full.push(full_v);
                        u
                    }
                };
                if let Some(threshold) = self.clipping_threshold {
                    let rms = u.square().mean(..).sqrt();
                    u = &u / (rms / threshold).maximum(1.0);
                }
                if let Some(lr) = &lr {
                    u = u * lr.astype(g.dtype());
                }
                if self.multiply_by_parameter_scale {
                    u = u * p.square().mean(..).sqrt().maximum(1e-3);
                }
                if let (Some(beta), Some(m)) = (self.momentum, &momentum) {
                    let averaged = &u * (1.0 - beta) + &m[i] * beta;
                    moms.push(averaged.astype(m[i].dtype()));
                    u = averaged;
                }
                if let (Some(rate), true) = (self.weight_decay_rate, decay_flags[i]) {
                    u = u + p * rate;
                }
                out.push(-u);
            }
            Ok((
                tree_unflatten(&def, out)?,
                AdafactorState {
                    count: increment(&state.count),
                    v_row: tree_unflatten(&def, rows)?,
                    v_col: tree_unflatten(&def, cols)?,
                    v: tree_unflatten(&def, full)?,
                    momentum: momentum.map(|_| tree_unflatten(&def, moms)).transpose()?,
                },
            ))
        });
        or_failed(result, updates, state)
    }
}
