//! `jax.scipy.stats`: the normal distribution's density, log-density, CDF, log-CDF, survival
//! functions and quantiles, and the multivariate normal's log-density (by a Cholesky factor,
//! as JAX's).

/// `jax.scipy.stats.norm`.
pub mod norm {
    use super::super::special;
    use crate::Tensor;

    /// The log-density of Normal(`loc`, `scale`) at `x`.
    #[track_caller]
    pub fn logpdf(x: &Tensor, loc: f64, scale: f64) -> Tensor {
        let z = (x - loc) / scale;
        let log_normalizer = 0.5 * (2.0 * std::f64::consts::PI).ln() + scale.ln();
        -(z.square() * 0.5) - log_normalizer
    }

    /// The density of Normal(`loc`, `scale`) at `x`.
    #[track_caller]
    pub fn pdf(x: &Tensor, loc: f64, scale: f64) -> Tensor {
        logpdf(x, loc, scale).exp()
    }

    /// The CDF of Normal(`loc`, `scale`) at `x`.
    #[track_caller]
    pub fn cdf(x: &Tensor, loc: f64, scale: f64) -> Tensor {
        special::ndtr(&((x - loc) / scale))
    }

    /// The log-CDF, accurate far in the lower tail (`log_ndtr`).
    #[track_caller]
    pub fn logcdf(x: &Tensor, loc: f64, scale: f64) -> Tensor {
        special::log_ndtr(&((x - loc) / scale))
    }

    /// The survival function `1 − cdf`, as `cdf(−x)` so the upper tail keeps its digits.
    #[track_caller]
    pub fn sf(x: &Tensor, loc: f64, scale: f64) -> Tensor {
        cdf(&-x, -loc, scale)
    }

    /// The log of the survival function.
    #[track_caller]
    pub fn logsf(x: &Tensor, loc: f64, scale: f64) -> Tensor {
        logcdf(&-x, -loc, scale)
    }

    /// The quantile function, the CDF's inverse (`ndtri(q)·scale + loc`).
    #[track_caller]
    pub fn ppf(q: &Tensor, loc: f64, scale: f64) -> Tensor {
        special::ndtri(q) * scale + loc
    }

    /// The inverse survival function, `ppf(1 − q)`.
    #[track_caller]
    pub fn isf(q: &Tensor, loc: f64, scale: f64) -> Tensor {
        ppf(&(-q + 1.0), loc, scale)
    }
}

/// `jax.scipy.stats.multivariate_normal`.
pub mod multivariate_normal {
    use crate::Tensor;
    use ferrax_ir::TriangularSolve;

    /// The log-density at `x` (`[.., k]`) of the normal with `mean` (`[k]`, broadcast) and
    /// covariance `cov` (`[k, k]`, positive definite): with `L` its Cholesky factor and `y =
    /// L⁻¹(x − mean)`, `−½·|y|² − k/2·log 2π − Σ log L_ii`.
    #[track_caller]
    pub fn logpdf(x: &Tensor, mean: &Tensor, cov: &Tensor) -> Tensor {
        let k = cov.shape().first().copied().unwrap_or(0);
        if cov.shape() != [k, k] || x.shape().last() != Some(&k) {
            return Tensor::failed(
                std::panic::Location::caller(),
                format!(
                    "multivariate_normal.logpdf: x {} and cov {} must share the last size k, cov [k, k]",
                    x.ty(),
                    cov.ty()
                ),
                x.ty().clone(),
            );
        }
        let l = cov.cholesky();
        let centered = x - mean;
        let rows = centered.numel() / k.max(1);
        let flat = centered.reshape([rows, k]).t();
        let solve = TriangularSolve {
            left_side: true,
            lower: true,
            transpose_a: false,
            conjugate_a: false,
            unit_diagonal: false,
        };
        let y = l.triangular_solve(&flat, solve);
        let batch = &x.shape()[..x.ndim() - 1];
        let squared = y.square().sum(0).reshape(batch.to_vec());
        let log_det = l.diagonal().log().sum(..);
        -(squared * 0.5) - (k as f64 * 0.5 * (2.0 * std::f64::consts::PI).ln()) - log_det
    }
}
