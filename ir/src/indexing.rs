//! The attributes of `gather` and `scatter`, with StableHLO's dimension numbers, and the
//! index arithmetic they define. Both the shape rules and every evaluator (the interpreter,
//! kernels) read the dimension numbers through the maps here, so the meaning of each field is
//! written once.

use serde::{Deserialize, Serialize};

/// `gather(operand, start_indices)` (StableHLO's `gather`): for each batch position of
/// `start_indices`, a slice of `slice_sizes` starting at the index vector found there. Start
/// indices are clamped so that the whole slice lies inside the operand (`lax.gather` in its
/// `clip`/`promise_in_bounds` modes; JAX's `fill` mode masks the result around it).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Gather {
    /// Result dimensions that index within a slice (the rest index the batch).
    pub offset_dims: Vec<usize>,
    /// Operand dimensions of slice size 1 that the result drops.
    pub collapsed_slice_dims: Vec<usize>,
    /// Operand dimensions paired one to one with `start_indices_batching_dims`.
    pub operand_batching_dims: Vec<usize>,
    pub start_indices_batching_dims: Vec<usize>,
    /// Operand dimension that each entry of an index vector starts.
    pub start_index_map: Vec<usize>,
    /// The dimension of `start_indices` holding index vectors; equal to its rank when each
    /// index is a scalar.
    pub index_vector_dim: usize,
    pub slice_sizes: Vec<usize>,
    pub indices_are_sorted: bool,
}

/// How `scatter` combines an update with the value already at its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScatterCombine {
    /// The update replaces the value (with repeated indices, the last update in row-major
    /// order of the updates wins).
    Replace,
    Add,
    Mul,
    Min,
    Max,
}

impl ScatterCombine {
    pub const ALL: [ScatterCombine; 5] = [
        ScatterCombine::Replace,
        ScatterCombine::Add,
        ScatterCombine::Mul,
        ScatterCombine::Min,
        ScatterCombine::Max,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ScatterCombine::Replace => "scatter",
            ScatterCombine::Add => "scatter_add",
            ScatterCombine::Mul => "scatter_mul",
            ScatterCombine::Min => "scatter_min",
            ScatterCombine::Max => "scatter_max",
        }
    }
}

/// `scatter(operand, scatter_indices, updates)` (StableHLO's `scatter` with one operand):
/// the operand with each update window combined into it at the window's start index. A
/// window that does not fit inside the operand is dropped whole (JAX's `FILL_OR_DROP`, XLA's
/// behaviour); JAX's `clip` mode clamps the indices before the scatter.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scatter {
    pub combine: ScatterCombine,
    /// Update dimensions that index within a window (the rest index the scatter batch).
    pub update_window_dims: Vec<usize>,
    /// Operand dimensions a window has size 1 in and the updates leave out.
    pub inserted_window_dims: Vec<usize>,
    pub input_batching_dims: Vec<usize>,
    pub scatter_indices_batching_dims: Vec<usize>,
    /// Operand dimension that each entry of an index vector starts.
    pub scatter_dims_to_operand_dims: Vec<usize>,
    pub index_vector_dim: usize,
    pub indices_are_sorted: bool,
    pub unique_indices: bool,
}

/// Where the parts of one side of a gather or scatter come from: its batch dimensions, its
/// within-window dimensions, and how a window position maps to an operand position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexMap {
    /// Dimensions of the indexed side (gather's result, scatter's updates) that run over the
    /// batch, in order, and those that run within a window.
    pub batch_dims: Vec<usize>,
    pub window_dims: Vec<usize>,
    /// Operand dimension of each window dimension, in order.
    pub window_to_operand: Vec<usize>,
    /// For each operand dimension, the entry of the index vector that starts it, if any.
    pub operand_to_index: Vec<Option<usize>>,
    /// For each operand dimension, the batch position (among `batch_dims`) that indexes it
    /// directly (batching dimensions), if any.
    pub operand_to_batch: Vec<Option<usize>>,
    /// The dimension of the indices holding index vectors (equal to their rank for scalars).
    pub index_vector_dim: usize,
}

impl IndexMap {
    /// The map of a gather with result rank `result_rank` over an operand of rank `rank`.
    pub fn of_gather(g: &Gather, rank: usize, result_rank: usize) -> IndexMap {
        let window_to_operand = (0..rank)
            .filter(|d| !g.collapsed_slice_dims.contains(d) && !g.operand_batching_dims.contains(d))
            .collect();
        IndexMap::new(
            (0..result_rank)
                .filter(|d| !g.offset_dims.contains(d))
                .collect(),
            g.offset_dims.clone(),
            window_to_operand,
            (&g.start_index_map, &g.operand_batching_dims),
            &g.start_indices_batching_dims,
            (g.index_vector_dim, rank),
        )
    }

    /// The map of a scatter with updates of rank `updates_rank` into an operand of rank `rank`.
    pub fn of_scatter(s: &Scatter, rank: usize, updates_rank: usize) -> IndexMap {
        let window_to_operand = (0..rank)
            .filter(|d| !s.inserted_window_dims.contains(d) && !s.input_batching_dims.contains(d))
            .collect();
        IndexMap::new(
            (0..updates_rank)
                .filter(|d| !s.update_window_dims.contains(d))
                .collect(),
            s.update_window_dims.clone(),
            window_to_operand,
            (&s.scatter_dims_to_operand_dims, &s.input_batching_dims),
            &s.scatter_indices_batching_dims,
            (s.index_vector_dim, rank),
        )
    }

    fn new(
        batch_dims: Vec<usize>,
        window_dims: Vec<usize>,
        window_to_operand: Vec<usize>,
        (start_map, operand_batching): (&[usize], &[usize]),
        indices_batching: &[usize],
        (index_vector_dim, rank): (usize, usize),
    ) -> IndexMap {
        let mut operand_to_index = vec![None; rank];
        for (k, &d) in start_map.iter().enumerate() {
            if let Some(slot) = operand_to_index.get_mut(d) {
                *slot = Some(k);
            }
        }
        // A batching dimension of the indices is a batch position once the index vector
        // dimension is taken out.
        let mut operand_to_batch = vec![None; rank];
        for (&d, &i) in operand_batching.iter().zip(indices_batching) {
            if let Some(slot) = operand_to_batch.get_mut(d) {
                *slot = Some(if i < index_vector_dim { i } else { i - 1 });
            }
        }
        IndexMap {
            batch_dims,
            window_dims,
            window_to_operand,
            operand_to_index,
            operand_to_batch,
            index_vector_dim,
        }
    }

    /// The dimensions of the indices array that the batch runs over (all but the index
    /// vector dimension), for indices of rank `indices_rank`.
    pub fn indices_batch_dims(&self, indices_rank: usize) -> Vec<usize> {
        (0..indices_rank)
            .filter(|&d| d != self.index_vector_dim)
            .collect()
    }

    /// How to read start indices from row-major indices of dimensions `indices_dims`.
    pub fn start_reader(&self, indices_dims: &[usize]) -> StartReader {
        let strides = crate::Shape::new(indices_dims.to_vec()).strides();
        StartReader {
            batch_dims: self.indices_batch_dims(indices_dims.len()),
            vector_stride: strides.get(self.index_vector_dim).copied().unwrap_or(0),
            strides,
        }
    }

    /// Into `start`, the operand start of batch position `batch` (a multi-index over the
    /// indices' batch dimensions), as read from index values `idx`: the index vector's entry
    /// on each dimension it starts, the batch position on batching dimensions, 0 elsewhere.
    /// Unclamped: the caller clamps (gather) or drops the window (scatter).
    pub fn start(&self, reader: &StartReader, idx: &[i64], batch: &[usize], start: &mut Vec<i64>) {
        let base: usize = reader
            .batch_dims
            .iter()
            .zip(batch)
            .map(|(&d, &b)| b * reader.strides[d])
            .sum();
        start.clear();
        start.extend(
            self.operand_to_index
                .iter()
                .zip(&self.operand_to_batch)
                .map(|(entry, batching)| match (entry, batching) {
                    (Some(k), _) => idx[base + k * reader.vector_stride],
                    (None, Some(p)) => batch[*p] as i64,
                    (None, None) => 0,
                }),
        );
    }
}

/// The layout of an indices array, for [`IndexMap::start`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartReader {
    batch_dims: Vec<usize>,
    strides: Vec<usize>,
    vector_stride: usize,
}

impl Scatter {
    /// The extent of an update window along each operand dimension: the updates' window
    /// sizes on the dimensions they cover, 1 on inserted and batching dimensions.
    pub fn window_extent(&self, operand_rank: usize, updates_dims: &[usize]) -> Vec<usize> {
        let map = IndexMap::of_scatter(self, operand_rank, updates_dims.len());
        let mut extent = vec![1; operand_rank];
        for (&u, &d) in map.window_dims.iter().zip(&map.window_to_operand) {
            extent[d] = updates_dims[u];
        }
        extent
    }

    /// The gather that reads, for each update element, the operand position it is combined
    /// into: updates-shaped. Where the scatter drops a window that does not fit, the gather
    /// clamps it instead, so callers mask those windows.
    pub fn window_gather(&self, operand_rank: usize, updates_dims: &[usize]) -> Gather {
        Gather {
            offset_dims: self.update_window_dims.clone(),
            collapsed_slice_dims: self.inserted_window_dims.clone(),
            operand_batching_dims: self.input_batching_dims.clone(),
            start_indices_batching_dims: self.scatter_indices_batching_dims.clone(),
            start_index_map: self.scatter_dims_to_operand_dims.clone(),
            index_vector_dim: self.index_vector_dim,
            slice_sizes: self.window_extent(operand_rank, updates_dims),
            indices_are_sorted: self.indices_are_sorted,
        }
    }
}

impl Gather {
    /// `jnp.take_along_axis` on same-shaped operand and indices of rank `rank`: element `j`
    /// of the result is the operand's at `j` with coordinate `axis` replaced by the index there
    /// (every other dimension a batching dimension). Sorting several operands by one
    /// permutation is this gather of each.
    pub fn along_axis(rank: usize, axis: usize) -> Gather {
        let others: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
        Gather {
            offset_dims: Vec::new(),
            collapsed_slice_dims: vec![axis],
            operand_batching_dims: others.clone(),
            start_indices_batching_dims: others,
            start_index_map: vec![axis],
            index_vector_dim: rank,
            slice_sizes: vec![1; rank],
            indices_are_sorted: false,
        }
    }

    /// The scatter that combines a gather-result-shaped tensor into the positions this
    /// gather reads (its transpose, with `Add`). Gather clamps start indices and scatter
    /// drops windows that do not fit, so the indices must be clamped first.
    pub fn transpose_scatter(&self, combine: ScatterCombine) -> Scatter {
        Scatter {
            combine,
            update_window_dims: self.offset_dims.clone(),
            inserted_window_dims: self.collapsed_slice_dims.clone(),
            input_batching_dims: self.operand_batching_dims.clone(),
            scatter_indices_batching_dims: self.start_indices_batching_dims.clone(),
            scatter_dims_to_operand_dims: self.start_index_map.clone(),
            index_vector_dim: self.index_vector_dim,
            indices_are_sorted: self.indices_are_sorted,
            unique_indices: false,
        }
    }
}
