//! `jnp.pad`'s modes beyond a constant: `edge`, `reflect`, `symmetric` and `wrap`, the
//! statistics `mean`, `median`, `maximum` and `minimum`, and `linear_ramp`. Each copying mode
//! is a map from a padded position to a position of the operand along one axis; the map is
//! cut into runs that rise by one (a slice), fall by one (a reversed slice) or stay (a
//! broadcast edge), and the runs are concatenated. The result is made of slices, so kernels
//! fuse it and its derivative is the slices' (no gather). The other modes pad one axis after
//! another, as JAX's do: a statistic of the whole axis so far (padding of earlier axes
//! included), or a ramp from an end value to the edge.

use crate::Tensor;
use ferrax_ir::DType;

/// How [`Tensor::pad_with`] fills the padding (`jnp.pad`'s `mode`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// Copies of one value (`mode="constant"`, `constant_values`).
    Constant(f64),
    /// Copies of the edge element (`"edge"`).
    Edge,
    /// The operand mirrored about its edge element, which is not repeated (`"reflect"`).
    Reflect,
    /// The operand mirrored about its edge, the edge element repeated (`"symmetric"`).
    Symmetric,
    /// The operand repeated periodically (`"wrap"`).
    Wrap,
    /// The mean along the axis (`"mean"`; rounded to the nearest integer, ties to even, for
    /// integer operands).
    Mean,
    /// The median along the axis (`"median"`; rounded likewise).
    Median,
    /// The maximum along the axis (`"maximum"`).
    Maximum,
    /// The minimum along the axis (`"minimum"`).
    Minimum,
    /// A linear ramp from the value to the edge element, not reaching it (`"linear_ramp"`,
    /// `end_values`).
    LinearRamp(f64),
}

impl PadMode {
    fn name(self) -> &'static str {
        match self {
            PadMode::Constant(_) => "constant",
            PadMode::Edge => "edge",
            PadMode::Reflect => "reflect",
            PadMode::Symmetric => "symmetric",
            PadMode::Wrap => "wrap",
            PadMode::Mean => "mean",
            PadMode::Median => "median",
            PadMode::Maximum => "maximum",
            PadMode::Minimum => "minimum",
            PadMode::LinearRamp(_) => "linear_ramp",
        }
    }

    /// The operand position (of `n` > 0) that padded position `i` (relative to the operand's
    /// first element) shows.
    fn source(self, i: i64, n: i64) -> i64 {
        match self {
            // The other modes pad without copying (`pad_filled`): the edge stands for them.
            PadMode::Constant(_)
            | PadMode::Edge
            | PadMode::Mean
            | PadMode::Median
            | PadMode::Maximum
            | PadMode::Minimum
            | PadMode::LinearRamp(_) => i.clamp(0, n - 1),
            PadMode::Wrap => i.rem_euclid(n),
            PadMode::Reflect if n == 1 => 0,
            PadMode::Reflect => {
                let period = 2 * (n - 1);
                let j = i.rem_euclid(period);
                if j < n {
                    j
                } else {
                    period - j
                }
            }
            PadMode::Symmetric => {
                let j = i.rem_euclid(2 * n);
                if j < n {
                    j
                } else {
                    2 * n - 1 - j
                }
            }
        }
    }
}

/// A stretch of padded positions shown by one slice of the operand.
enum Run {
    /// Positions `start..start + len`, in order.
    Rising { start: i64, len: usize },
    /// Positions `start, start - 1, ...`, `len` of them.
    Falling { start: i64, len: usize },
    /// Position `at`, `len` times.
    Repeated { at: i64, len: usize },
}

/// The runs that show `sources` in order.
fn runs(sources: &[i64]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for &s in sources {
        let extended = match runs.last_mut() {
            Some(Run::Rising { start, len }) if *start + *len as i64 == s => {
                *len += 1;
                true
            }
            Some(Run::Falling { start, len }) if *start - *len as i64 == s => {
                *len += 1;
                true
            }
            Some(Run::Repeated { at, len }) if *at == s => {
                *len += 1;
                true
            }
            // A single element starts whichever run its successor continues.
            Some(run @ Run::Rising { len: 1, .. }) => match run {
                Run::Rising { start, .. } if *start - 1 == s => {
                    *run = Run::Falling {
                        start: *start,
                        len: 2,
                    };
                    true
                }
                Run::Rising { start, .. } if *start == s => {
                    *run = Run::Repeated { at: s, len: 2 };
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if !extended {
            runs.push(Run::Rising { start: s, len: 1 });
        }
    }
    runs
}

impl Tensor {
    /// Pads each dimension with `(before, after)` elements filled as `mode` says (`jnp.pad`
    /// with `mode` `"constant"`, `"edge"`, `"reflect"`, `"symmetric"` or `"wrap"`); pads wider
    /// than the operand repeat the pattern, as NumPy's do. A dimension of size zero can be
    /// padded only with a constant.
    #[track_caller]
    pub fn pad_with(&self, widths: &[(usize, usize)], mode: PadMode) -> Tensor {
        // Its gathers index each padded position on the host: not a failed tensor's guess.
        if self.error().is_some() {
            return self.clone();
        }
        if widths.len() != self.ndim() {
            return self.fail(format!(
                "pad: {} (before, after) widths for {}",
                widths.len(),
                self.ty()
            ));
        }
        if let PadMode::Constant(value) = mode {
            let config: Option<Vec<(i64, i64, usize)>> = widths
                .iter()
                .map(|&(b, a)| Some((i64::try_from(b).ok()?, i64::try_from(a).ok()?, 0)))
                .collect();
            return match config {
                Some(config) => self.pad(&config, value),
                None => self.fail(format!("pad: widths {widths:?} are too large")),
            };
        }
        let mut out = self.clone();
        for (axis, &(before, after)) in widths.iter().enumerate() {
            if before == 0 && after == 0 {
                continue;
            }
            let n = self.shape()[axis];
            if n == 0 {
                return self.fail(format!(
                    "pad: mode {} cannot pad axis {axis} of {}, which is empty",
                    mode.name(),
                    self.ty()
                ));
            }
            let Some(padded) = n.checked_add(before).and_then(|s| s.checked_add(after)) else {
                return self.fail(format!("pad: widths {widths:?} are too large"));
            };
            out = match mode {
                PadMode::Mean
                | PadMode::Median
                | PadMode::Maximum
                | PadMode::Minimum
                | PadMode::LinearRamp(_) => out.pad_filled(axis, (before, after), mode),
                PadMode::Constant(_)
                | PadMode::Edge
                | PadMode::Reflect
                | PadMode::Symmetric
                | PadMode::Wrap => {
                    // Each padded position's source index, on the host.
                    let mut sources = Vec::new();
                    let (Ok(first), Ok(len), true) = (
                        i64::try_from(before),
                        i64::try_from(padded),
                        sources.try_reserve_exact(padded).is_ok(),
                    ) else {
                        return self.fail(format!("pad: widths {widths:?} are too large"));
                    };
                    sources.extend((0..len).map(|p| mode.source(p - first, n as i64)));
                    out.gather_runs(axis, &runs(&sources))
                }
            };
        }
        out
    }

    /// `self` padded along `axis` by a statistic of the axis or a ramp to its edges.
    #[track_caller]
    fn pad_filled(&self, axis: usize, (before, after): (usize, usize), mode: PadMode) -> Tensor {
        let dtype = self.dtype();
        let block = |value: &Tensor, len: usize| {
            let mut shape = self.shape().to_vec();
            shape[axis] = len;
            value.broadcast_to(shape)
        };
        let statistic = |stat: Tensor| {
            let stat = match dtype.is_float() || dtype.is_complex() {
                true => stat,
                false => stat.round_even().astype(dtype),
            };
            stat.expand_dims(axis as i64)
        };
        let wide = || match dtype.is_float() || dtype.is_complex() {
            true => self.clone(),
            false => self.astype(DType::F64),
        };
        let (low, high) = match mode {
            PadMode::Mean => {
                let s = statistic(wide().mean(axis));
                (block(&s, before), block(&s, after))
            }
            PadMode::Median => {
                let s = statistic(wide().median(Some(axis as i64)));
                (block(&s, before), block(&s, after))
            }
            PadMode::Maximum => {
                let s = self.max(axis).expand_dims(axis as i64);
                (block(&s, before), block(&s, after))
            }
            PadMode::Minimum => {
                let s = self.min(axis).expand_dims(axis as i64);
                (block(&s, before), block(&s, after))
            }
            PadMode::LinearRamp(end) => {
                let n = self.shape()[axis];
                // end + (edge − end)·j/len for j = 0, 1, .., len − 1 along the axis (in f64,
                // then floored, for integers).
                let ramp = |edge: Tensor, len: usize| {
                    let mut shape = self.shape().to_vec();
                    shape[axis] = len;
                    let edge = edge.broadcast_to(shape.clone());
                    let j = Tensor::iota(edge.dtype(), shape, axis);
                    let ramp = (edge - end) * (j / len.max(1) as f64) + end;
                    match dtype.is_float() || dtype.is_complex() {
                        true => ramp,
                        false => ramp.floor().astype(dtype),
                    }
                };
                let edge = |at: usize| {
                    let mut start = vec![0; self.ndim()];
                    let mut limit = self.shape().to_vec();
                    start[axis] = at;
                    limit[axis] = at + 1;
                    wide().slice(&start, &limit)
                };
                let (first, last) = (edge(0), edge(n - 1));
                (ramp(first, before), ramp(last, after).flip([axis]))
            }
            PadMode::Constant(_)
            | PadMode::Edge
            | PadMode::Reflect
            | PadMode::Symmetric
            | PadMode::Wrap => return self.clone(),
        };
        Tensor::concatenate(&[low, self.clone(), high], axis as i64)
    }

    /// The concatenation along `axis` of the slices `runs` names.
    #[track_caller]
    fn gather_runs(&self, axis: usize, runs: &[Run]) -> Tensor {
        let piece = |from: i64, len: usize| {
            let mut start = vec![0; self.ndim()];
            let mut limit = self.shape().to_vec();
            start[axis] = from as usize;
            limit[axis] = from as usize + len;
            self.slice(&start, &limit)
        };
        let pieces: Vec<Tensor> = runs
            .iter()
            .map(|run| match *run {
                Run::Rising { start, len } => piece(start, len),
                Run::Falling { start, len } => piece(start + 1 - len as i64, len).flip([axis]),
                Run::Repeated { at, len } => {
                    let mut shape = self.shape().to_vec();
                    shape[axis] = len;
                    piece(at, 1).broadcast_to(shape)
                }
            })
            .collect();
        match pieces.len() {
            1 => pieces.into_iter().next().unwrap_or_else(|| self.clone()),
            _ => Tensor::concatenate(&pieces, axis as i64),
        }
    }
}
