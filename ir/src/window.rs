//! The geometry of window reductions (`lax.reduce_window`, pooling, cumulative sums, and
//! StableHLO's `reduce_window` and `select_and_scatter`). The IR has no window op: frontends
//! spell a window reduction as the padded operand sliced once per window position with the
//! window's strides, the slices combined elementwise. This is where the positions, the
//! result's size and the bound on their number are decided, once for every frontend.

/// Most positions a window may have: each becomes a slice and an elementwise op.
pub const MAX_WINDOW_ELEMENTS: usize = 4096;

/// A window of `dims` positions, stepped by `strides`, its positions `dilations` apart,
/// over an operand already padded (and base-dilated) to `padded`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowGeometry {
    pub dims: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub padded: Vec<usize>,
    /// The result's dimensions: how many windows fit along each.
    pub out: Vec<usize>,
}

impl WindowGeometry {
    /// The geometry, or a message naming what does not fit: sizes of another rank than the
    /// operand's, a zero size, stride or dilation, more than [`MAX_WINDOW_ELEMENTS`]
    /// positions, or an extent that overflows.
    pub fn new(
        padded: &[usize],
        dims: &[usize],
        strides: &[usize],
        dilations: &[usize],
    ) -> Result<WindowGeometry, String> {
        let rank = padded.len();
        if [dims, strides, dilations].iter().any(|v| v.len() != rank) {
            return Err(format!(
                "window {dims:?}, strides {strides:?} and dilations {dilations:?} need {rank} sizes each"
            ));
        }
        if [dims, strides, dilations].iter().any(|v| v.contains(&0)) {
            return Err(format!(
                "window {dims:?}, strides {strides:?} and dilations {dilations:?} need positive sizes"
            ));
        }
        let positions = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if positions.is_none_or(|n| n > MAX_WINDOW_ELEMENTS) {
            return Err(format!(
                "window {dims:?} has more than {MAX_WINDOW_ELEMENTS} positions"
            ));
        }
        let mut out = Vec::with_capacity(rank);
        for k in 0..rank {
            let extent = (dims[k] - 1)
                .checked_mul(dilations[k])
                .and_then(|e| e.checked_add(1))
                .ok_or_else(|| format!("window {dims:?} with dilations {dilations:?} overflows"))?;
            out.push(
                padded[k]
                    .checked_sub(extent)
                    .map_or(0, |room| room / strides[k] + 1),
            );
        }
        Ok(WindowGeometry {
            dims: dims.to_vec(),
            strides: strides.to_vec(),
            dilations: dilations.to_vec(),
            padded: padded.to_vec(),
            out,
        })
    }

    /// Whether no window fits (the result has no elements).
    pub fn is_empty(&self) -> bool {
        self.out.contains(&0)
    }

    /// Each window position in row-major order as the `(start, limit)` of the strided slice
    /// of the padded operand holding that position of every window; none when no window fits.
    pub fn positions(&self) -> Vec<(Vec<usize>, Vec<usize>)> {
        if self.is_empty() {
            return Vec::new();
        }
        let rank = self.dims.len();
        let mut k = vec![0usize; rank];
        let mut all = Vec::new();
        loop {
            let start: Vec<usize> = (0..rank).map(|d| k[d] * self.dilations[d]).collect();
            let limit = (0..rank)
                .map(|d| start[d] + (self.out[d] - 1) * self.strides[d] + 1)
                .collect();
            all.push((start, limit));
            let mut d = rank;
            loop {
                if d == 0 {
                    return all;
                }
                d -= 1;
                k[d] += 1;
                if k[d] < self.dims[d] {
                    break;
                }
                k[d] = 0;
            }
        }
    }
}

/// `lax.padtype_to_pads` for "SAME": padding that gives `ceil(input / stride)` windows, split
/// evenly with the odd one after.
pub fn same_padding(
    input: &[usize],
    dims: &[usize],
    strides: &[usize],
    dilations: &[usize],
) -> Vec<(i64, i64)> {
    input
        .iter()
        .zip(dims)
        .zip(strides.iter().zip(dilations))
        .map(|((&n, &w), (&s, &d))| {
            let extent = (w.saturating_sub(1)).saturating_mul(d).saturating_add(1) as i128;
            let s = s.max(1) as i128;
            let n = n as i128;
            let out = (n + s - 1) / s;
            let total = ((out - 1) * s + extent - n).max(0);
            let low = total / 2;
            let clamp = |v: i128| i64::try_from(v).unwrap_or(i64::MAX);
            (clamp(low), clamp(total - low))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_step_through_the_window_in_row_major_order() {
        let g = WindowGeometry::new(&[5, 4], &[2, 2], &[2, 1], &[1, 2]).unwrap();
        assert_eq!(g.out, vec![2, 2]);
        let starts: Vec<Vec<usize>> = g.positions().into_iter().map(|p| p.0).collect();
        assert_eq!(starts, vec![vec![0, 0], vec![0, 2], vec![1, 0], vec![1, 2]]);
        assert_eq!(g.positions()[3].1, vec![4, 4]);
        let none = WindowGeometry::new(&[1], &[2], &[1], &[1]).unwrap();
        assert!(none.is_empty() && none.positions().is_empty());
        assert!(WindowGeometry::new(&[4], &[0], &[1], &[1]).is_err());
        assert!(WindowGeometry::new(&[4, 4], &[100, 100], &[1, 1], &[1, 1]).is_err());
        assert!(WindowGeometry::new(&[4], &[2, 1], &[1], &[1]).is_err());
    }

    #[test]
    fn same_padding_is_lax_s() {
        // lax.padtype_to_pads((5, 6), (3, 2), (2, 2), "SAME") == [(1, 1), (0, 0)]
        assert_eq!(
            same_padding(&[5, 6], &[3, 2], &[2, 2], &[1, 1]),
            vec![(1, 1), (0, 0)]
        );
        assert_eq!(same_padding(&[4], &[2], &[1], &[1]), vec![(0, 1)]);
        // An empty axis: max(0, (0 - 1)·s + w - 0), as lax computes it, so no window fits.
        assert_eq!(same_padding(&[0], &[3], &[1], &[1]), vec![(1, 1)]);
        assert_eq!(same_padding(&[0], &[3], &[2], &[1]), vec![(0, 1)]);
    }
}
