//! Functions of square matrices: integer powers (`jnp.linalg.matrix_power`, by squaring),
//! the exponential (`jax.scipy.linalg.expm`: Higham's scaling and squaring with the Padé
//! approximant JAX picks by the 1-norm, degree 3 to 13 in f64 and 3 to 7 in f32), matrix
//! norms (`jnp.linalg.norm` over the last two axes) and solves from a Cholesky factor
//! (`jax.scipy.linalg.cho_solve`). Composites of products, solves and reductions, so they
//! differentiate and batch.

use crate::{lax, Tensor};
use ferrax_ir::{DType, TriangularSolve};

/// The norm [`Tensor::matrix_norm`] computes (`jnp.linalg.norm`'s `ord` for matrices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatrixNorm {
    /// `sqrt(Σ |a_ij|²)` (`"fro"`).
    Frobenius,
    /// The sum of the singular values (`"nuc"`).
    Nuclear,
    /// The largest column sum of absolute values (`1`).
    MaxColumnSum,
    /// The smallest column sum (`-1`).
    MinColumnSum,
    /// The largest row sum of absolute values (`inf`).
    MaxRowSum,
    /// The smallest row sum (`-inf`).
    MinRowSum,
    /// The largest singular value (`2`).
    LargestSingular,
    /// The smallest singular value (`-2`).
    SmallestSingular,
}

impl Tensor {
    /// Each square matrix to the integer power `n` (`jnp.linalg.matrix_power`): the identity
    /// for 0, the inverse's power for negative `n`, by repeated squaring.
    #[track_caller]
    pub fn matrix_power(&self, n: i64) -> Tensor {
        if let Some(failed) = self.square_matrices("matrix_power") {
            return failed;
        }
        if n == 0 {
            return self.identity();
        }
        let base = match n < 0 {
            true => self.inv(),
            false => self.clone(),
        };
        let mut remaining = n.unsigned_abs();
        let mut square: Option<Tensor> = None;
        let mut result: Option<Tensor> = None;
        while remaining > 0 {
            let z = match square {
                None => base.clone(),
                Some(z) => z.matmul(&z),
            };
            if remaining % 2 == 1 {
                result = Some(match result {
                    None => z.clone(),
                    Some(r) => r.matmul(&z),
                });
            }
            square = Some(z);
            remaining /= 2;
        }
        result.unwrap_or_else(|| self.identity())
    }

    /// The matrix exponential of each square matrix (`jax.scipy.linalg.expm`): scaled by
    /// `2^-s` until its 1-norm is below the largest Padé degree's bound, the approximant
    /// `Q⁻¹P` of the degree the unscaled norm selects, then squared `s` times (NaN beyond 16
    /// squarings, as JAX's).
    #[track_caller]
    pub fn expm(&self) -> Tensor {
        if let Some(failed) = self.square_matrices("expm") {
            return failed;
        }
        let a = match self.dtype() {
            DType::F64 | DType::F32 | DType::C64 | DType::C128 => self.clone(),
            _ => self.astype(DType::F32),
        };
        if a.ndim() == 2 {
            return expm_one(&a);
        }
        let n = a.shape()[a.ndim() - 1];
        let batch: usize = a.shape()[..a.ndim() - 2].iter().product();
        crate::vmap(|m: Tensor| expm_one(&m))(a.reshape([batch, n, n])).reshape(a.shape().to_vec())
    }

    /// The matrix norm `ord` of each matrix over the last two axes (`jnp.linalg.norm(a, ord,
    /// axis=(-2, -1))`), of the real type.
    #[track_caller]
    pub fn matrix_norm(&self, ord: MatrixNorm) -> Tensor {
        if let Some(failed) = self.matrices("matrix_norm") {
            return failed;
        }
        let magnitude = self.abs();
        match ord {
            MatrixNorm::Frobenius => self.frobenius_norm(),
            MatrixNorm::Nuclear => self.nuclear_norm(),
            MatrixNorm::MaxColumnSum => magnitude.sum(-2).max(-1),
            MatrixNorm::MinColumnSum => magnitude.sum(-2).min(-1),
            MatrixNorm::MaxRowSum => magnitude.sum(-1).max(-1),
            MatrixNorm::MinRowSum => magnitude.sum(-1).min(-1),
            MatrixNorm::LargestSingular => self.svd_values().max(-1),
            MatrixNorm::SmallestSingular => self.svd_values().min(-1),
        }
    }

    /// `x` with `a·x = b` where `a = l·lᴴ` and `self` is its Cholesky factor `l` (`lower`) or
    /// `u = lᴴ` (`jax.scipy.linalg.cho_solve((c, lower), b)`): two triangular solves. `b` is
    /// a vector or matrices with `self`'s batch dimensions.
    #[track_caller]
    pub fn cho_solve(&self, b: &Tensor, lower: bool) -> Tensor {
        if let Some(failed) = self.square_matrices("cho_solve") {
            return failed;
        }
        if b.ndim() == 1 {
            return self.cho_solve(&b.expand_dims(-1), lower).squeeze(-1);
        }
        let triangle = |adjoint: bool| TriangularSolve {
            left_side: true,
            lower,
            transpose_a: adjoint,
            conjugate_a: adjoint,
            unit_diagonal: false,
        };
        // l·(lᴴ·x) = b: l·y = b, then lᴴ·x = y; uᴴ·(u·x) = b: uᴴ·y = b, then u·x = y.
        let y = self.triangular_solve(b, triangle(!lower));
        self.triangular_solve(&y, triangle(lower))
    }

    /// The LU factorization with partial pivoting of each matrix, as
    /// `jax.scipy.linalg.lu_factor` gives it: the packed factors and the `i32` pivots (row `i`
    /// was swapped with row `pivots[i]`), for [`Tensor::lu_solve`].
    #[track_caller]
    pub fn lu_factor(&self) -> (Tensor, Tensor) {
        let (lu, pivots, _) = self.lu();
        (lu, pivots)
    }

    /// The permutation (`i32`, `[.., m]`) that the row swaps `pivots` (`[.., k]`, as
    /// [`Tensor::lu_factor`] gives them) make of `0..m`, swap `i` exchanging positions `i`
    /// and `pivots[i]` in turn (`lax.linalg.lu_pivots_to_permutation`).
    #[track_caller]
    pub fn lu_pivots_to_permutation(&self, m: usize) -> Tensor {
        let Some((&k, batch)) = self.shape().split_last() else {
            return self.fail(format!(
                "lu_pivots_to_permutation: pivots need an axis, they are {}",
                self.ty()
            ));
        };
        let pivots = self.astype(DType::I32);
        let mut dims = batch.to_vec();
        dims.push(m);
        let positions = Tensor::iota(DType::I32, dims.clone(), batch.len());
        let mut column = batch.to_vec();
        column.push(1);
        let identity = positions.clone();
        lax::fori_loop(
            0,
            k as f64,
            move |i, permutation: Tensor| {
                let i = i.astype(DType::I32);
                let at_i = i.broadcast_to(column.clone());
                let j = pivots.take_along_axis(&at_i, -1);
                let from_i = permutation.take_along_axis(&at_i, -1);
                let from_j = permutation.take_along_axis(&j, -1);
                let dims = dims.clone();
                let here = positions.equal(i.broadcast_to(dims.clone()));
                let there = positions.equal(j.broadcast_to(dims.clone()));
                let swapped = there.select(from_i.broadcast_to(dims.clone()), &permutation);
                here.select(from_j.broadcast_to(dims), &swapped)
            },
            identity,
        )
    }

    /// `x` with `op(a)·x = b` for the factorization `self`, `pivots` of `a` that
    /// [`Tensor::lu_factor`] gives (`jax.scipy.linalg.lu_solve((lu, piv), b, trans)`): `op` is
    /// the identity (`trans` 0), the transpose (1) or the conjugate transpose (2). The rows of
    /// `b` (a vector, or matrices with the factors' batch dimensions) are permuted and two
    /// triangular solves follow, so the result differentiates in the factors and in `b`.
    #[track_caller]
    pub fn lu_solve(&self, pivots: &Tensor, b: &Tensor, trans: u8) -> Tensor {
        if let Some(failed) = self.square_matrices("lu_solve") {
            return failed;
        }
        if trans > 2 {
            return self.fail(format!("lu_solve: trans is 0, 1 or 2, not {trans}"));
        }
        if b.ndim() == 1 {
            return self.lu_solve(pivots, &b.expand_dims(-1), trans).squeeze(-1);
        }
        let m = self.shape()[self.ndim() - 1];
        let permutation = pivots.lu_pivots_to_permutation(m);
        let rows = |x: &Tensor, order: &Tensor| {
            let order = order.expand_dims(-1).broadcast_to(x.shape().to_vec());
            x.take_along_axis(&order, -2)
        };
        let triangle = |lower: bool, adjoint: bool, conjugate: bool| TriangularSolve {
            left_side: true,
            lower,
            transpose_a: adjoint,
            conjugate_a: conjugate,
            unit_diagonal: lower,
        };
        match trans {
            // p·a = l·u: l·(u·x) = p·b.
            0 => {
                let y = self.triangular_solve(&rows(b, &permutation), triangle(true, false, false));
                self.triangular_solve(&y, triangle(false, false, false))
            }
            // aᵀ = uᵀ·lᵀ·p: uᵀ·y = b, lᵀ·z = y, x = pᵀ·z.
            _ => {
                let conjugate = trans == 2;
                let y = self.triangular_solve(b, triangle(false, true, conjugate));
                let z = self.triangular_solve(&y, triangle(true, true, conjugate));
                rows(&z, &permutation.argsort(-1))
            }
        }
    }
}

/// Padé coefficients `b_0 .. b_d` of the degrees JAX uses.
const PADE3: [f64; 4] = [120.0, 60.0, 12.0, 1.0];
const PADE5: [f64; 6] = [30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0];
const PADE7: [f64; 8] = [
    17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0,
];
const PADE9: [f64; 10] = [
    17643225600.0,
    8821612800.0,
    2075673600.0,
    302702400.0,
    30270240.0,
    2162160.0,
    110880.0,
    3960.0,
    90.0,
    1.0,
];
const PADE13: [f64; 14] = [
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
];

/// `U` and `V` of the degree-`b.len() - 1` approximant (3 to 9) of the scaled `a`:
/// `U = a·Σ b_{2k+1} a^{2k}`, `V = Σ b_{2k} a^{2k}`.
fn pade_low(a: &Tensor, b: &[f64]) -> (Tensor, Tensor) {
    let identity = a.identity();
    let a2 = a.matmul(a);
    let mut powers = vec![identity, a2.clone()];
    while powers.len() < b.len() / 2 {
        let next = powers[powers.len() - 1].matmul(&a2);
        powers.push(next);
    }
    // Summed from the highest power down, as JAX's.
    let odd = powers
        .iter()
        .enumerate()
        .rev()
        .map(|(k, p)| p * b[2 * k + 1])
        .reduce(|x, y| x + y);
    let even = powers
        .iter()
        .enumerate()
        .rev()
        .map(|(k, p)| p * b[2 * k])
        .reduce(|x, y| x + y);
    match (odd, even) {
        (Some(odd), Some(even)) => (a.matmul(&odd), even),
        _ => (a.clone(), a.clone()),
    }
}

/// `U` and `V` of the degree-13 approximant, with its nested products.
fn pade13(a: &Tensor) -> (Tensor, Tensor) {
    let b = &PADE13;
    let identity = a.identity();
    let a2 = a.matmul(a);
    let a4 = a2.matmul(&a2);
    let a6 = a4.matmul(&a2);
    let u_high = &a6 * b[13] + &a4 * b[11] + &a2 * b[9];
    let u =
        a.matmul(&(a6.matmul(&u_high) + &a6 * b[7] + &a4 * b[5] + &a2 * b[3] + &identity * b[1]));
    let v_high = &a6 * b[12] + &a4 * b[10] + &a2 * b[8];
    let v = a6.matmul(&v_high) + &a6 * b[6] + &a4 * b[4] + &a2 * b[2] + identity * b[0];
    (u, v)
}

/// `floor(log2(x))` for positive `x`, exact at powers of two: `log(x) / ln 2` moved by one
/// where its rounding lands on the wrong side of a power.
fn floor_log2(x: &Tensor) -> Tensor {
    let guess = (x.log() / std::f64::consts::LN_2).floor();
    let two = Tensor::full(x.dtype(), Vec::<usize>::new(), 2.0);
    let too_low = two.pow(&(&guess + 1.0)).less_equal(x);
    let guess = too_low.select(&(&guess + 1.0), &guess);
    let too_high = two.pow(&guess).greater(x);
    too_high.select(&(&guess - 1.0), &guess)
}

/// The exponential of one square matrix.
fn expm_one(a: &Tensor) -> Tensor {
    let wide = matches!(a.dtype(), DType::F64 | DType::C128);
    let real = match wide {
        true => DType::F64,
        false => DType::F32,
    };
    let norm = a.abs().sum(0).max(0).astype(real);
    let (max_norm, bounds): (f64, &[f64]) = match wide {
        true => (
            5.371920351148152,
            &[
                1.495585217958292e-2,
                2.53939833006323e-1,
                9.504178996162932e-1,
                2.097847961257068,
            ],
        ),
        false => (3.92572478313866, &[4.258730016922831e-1, 1.880152677804762]),
    };
    let squarings = floor_log2(&(&norm / max_norm)).maximum(0.0);
    let scaled = a / Tensor::full(real, Vec::<usize>::new(), 2.0)
        .pow(&squarings)
        .astype(a.dtype());
    let index = norm.digitize(
        &Tensor::from_vec([bounds.len()], bounds.to_vec()).astype(real),
        false,
    );
    let (u, v) = match wide {
        true => lax::switch(
            &index,
            [
                &|m: Tensor| pade_low(&m, &PADE3),
                &|m: Tensor| pade_low(&m, &PADE5),
                &|m: Tensor| pade_low(&m, &PADE7),
                &|m: Tensor| pade_low(&m, &PADE9),
                &|m: Tensor| pade13(&m),
            ],
            scaled,
        ),
        false => lax::switch(
            &index,
            [
                &|m: Tensor| pade_low(&m, &PADE3),
                &|m: Tensor| pade_low(&m, &PADE5),
                &|m: Tensor| pade_low(&m, &PADE7),
            ],
            scaled,
        ),
    };
    let p = &u + &v;
    let q = -u + v;
    let r = q.solve(&p);
    // As JAX's: a scan over the most squarings, each step a `cond`, so only the squarings
    // the norm asks for are computed.
    const MAX_SQUARINGS: usize = 16;
    let steps = Tensor::arange(real, MAX_SQUARINGS);
    let (r, ()) = lax::scan(
        |r: Tensor, i: Tensor| {
            let square = i.less(&squarings);
            let r = lax::cond(&square, |r: Tensor| r.matmul(&r), |r: Tensor| r, r);
            (r, ())
        },
        r,
        steps,
    );
    squarings.greater(MAX_SQUARINGS as f64).select(f64::NAN, &r)
}
