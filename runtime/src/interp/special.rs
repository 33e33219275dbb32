//! The f64 special functions `libm` lacks: digamma, the inverse error function and the
//! exponentially scaled Bessel functions of orders 0 and 1, for the
//! interpreter's [`super::elementwise::wide_unary`] (and so every backend's host steps).

use std::f64::consts::{FRAC_2_SQRT_PI, PI};

/// ψ(x) = Γ'(x)/Γ(x): reflected below 1/2 (`ψ(1 - x) - π/tan(πx)`), stepped up to x ≥ 10 by
/// `ψ(x) = ψ(x + 1) - 1/x`, then the asymptotic series `ln x - 1/2x - Σ B₂ₖ/(2k·x²ᵏ)` to
/// B₁₂ (its next term is below 1e-15 there). NaN at 0 and the negative integers, as XLA.
/// Within a few ulp where |ψ| is near 1 or above; near its zeros (x ≈ 1.4616 and one in each
/// negative unit interval) the sums cancel, leaving about 1e-15 absolute error.
pub(super) fn digamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY || (x <= 0.0 && x == x.floor()) {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return x;
    }
    let (mut x, mut shift) = (x, 0.0);
    if x < 0.5 {
        // π/tan(πx) with πx reduced to (-π/2, π/2] first, for accuracy far from zero.
        let r = x - x.round();
        shift = -PI / (PI * r).tan();
        x = 1.0 - x;
    }
    while x < 10.0 {
        shift -= 1.0 / x;
        x += 1.0;
    }
    let inv2 = 1.0 / (x * x);
    // B₂ₖ/(2k) for k = 6..1, highest first.
    let series = [
        691.0 / 32760.0,
        -1.0 / 132.0,
        1.0 / 240.0,
        -1.0 / 252.0,
        1.0 / 120.0,
        -1.0 / 12.0,
    ]
    .iter()
    .fold(0.0, |acc, c| acc * inv2 + c)
        * inv2;
    shift + x.ln() - 0.5 / x + series
}

/// erf⁻¹(y) for y in [-1, 1]: ±inf at ±1, NaN outside. Newton's method from Winitzki's
/// closed-form estimate (relative error about 2e-3), on `erf(x) - y` for |y| ≤ 1/2 and on
/// `erfc(x) - (1 - y)` beyond it, where `1 - y` is exact and `erfc` keeps its digits; four
/// steps reach f64's precision from that start (the error squares each step).
pub(super) fn erf_inv(y: f64) -> f64 {
    if y.is_nan() || y.abs() > 1.0 {
        return f64::NAN;
    }
    if y.abs() == 1.0 {
        return y * f64::INFINITY;
    }
    if y == 0.0 {
        return y;
    }
    let (sign, y) = (y.signum(), y.abs());
    let a = 0.147;
    let log = (-y).ln_1p() + y.ln_1p();
    let b = 2.0 / (PI * a) + log / 2.0;
    let mut x = ((b * b - log / a).sqrt() - b).sqrt();
    let tail = 1.0 - y;
    for _ in 0..4 {
        let slope = FRAC_2_SQRT_PI * (-x * x).exp();
        if slope == 0.0 {
            break;
        }
        let step = if y <= 0.5 {
            (libm::erf(x) - y) / slope
        } else {
            (tail - libm::erfc(x)) / slope
        };
        x -= step;
    }
    sign * x
}

/// `e^{-|x|}·I₀(x)` and `e^{-|x|}·I₁(x)` (`lax.bessel_i0e`, `bessel_i1e`): the power series
/// `Iᵥ(x) = Σ (x/2)^{2k+ν} / (k!·(k+ν)!)` (positive terms, so no cancellation) scaled by
/// `e^{-|x|}` below |x| = 50, and Hankel's asymptotic expansion
/// `e^{-x}·Iᵥ(x) ~ (2πx)^{-1/2} Σ (-1)^k Π_{j≤k} (4ν² - (2j-1)²) / (k!·(8x)^k)` from there,
/// whose terms fall below 1e-17 of the sum well before they grow again.
fn bessel_scaled(order: u32, x: f64) -> f64 {
    let a = x.abs();
    if x.is_nan() {
        return x;
    }
    let magnitude = if a < 50.0 {
        let nu = f64::from(order);
        let q = a * a / 4.0;
        let mut term = if order == 0 { 1.0 } else { a / 2.0 };
        let mut sum = term;
        let mut k = 0.0;
        while term > sum * 1e-17 {
            k += 1.0;
            term *= q / (k * (k + nu));
            sum += term;
        }
        sum * (-a).exp()
    } else if a.is_infinite() {
        0.0
    } else {
        let mu = 4.0 * f64::from(order * order);
        let (mut term, mut sum) = (1.0f64, 1.0f64);
        for k in 1..60 {
            let odd = f64::from(2 * k - 1);
            term *= -(mu - odd * odd) / (f64::from(k) * 8.0 * a);
            sum += term;
            if term.abs() < 1e-17 * sum.abs() {
                break;
            }
        }
        sum / (2.0 * std::f64::consts::PI * a).sqrt()
    };
    // I₁ is odd, I₀ even.
    if order == 1 && x < 0.0 {
        -magnitude
    } else {
        magnitude
    }
}

pub(super) fn bessel_i0e(x: f64) -> f64 {
    bessel_scaled(0, x)
}

pub(super) fn bessel_i1e(x: f64) -> f64 {
    bessel_scaled(1, x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digamma_meets_its_identities() {
        // ψ(1) = -γ, ψ(1/2) = -γ - 2 ln 2, within the rounding of the nine or ten steps of
        // the recurrence (a few ulp each).
        let gamma = 0.577_215_664_901_532_9;
        assert!(
            (digamma(1.0) + gamma).abs() < 4e-15,
            "{}",
            digamma(1.0) + gamma
        );
        assert!((digamma(0.5) + gamma + 2.0 * 2f64.ln()).abs() < 8e-15);
        for x in [-7.3, -2.5, -0.25, 0.1, 1.7, 3.0, 12.5, 1e6] {
            // The recurrence ψ(x + 1) = ψ(x) + 1/x.
            let gap = digamma(x + 1.0) - digamma(x) - 1.0 / x;
            assert!(gap.abs() < 1e-12 * digamma(x).abs().max(1.0), "{x}: {gap}");
        }
        assert!(digamma(0.0).is_nan() && digamma(-3.0).is_nan());
    }

    #[test]
    fn erf_inv_inverts_erf() {
        for k in -999..1000 {
            let y = f64::from(k) / 1000.0;
            let x = erf_inv(y);
            let back = libm::erf(x);
            assert!(
                (back - y).abs() <= 4.0 * f64::EPSILON,
                "{y}: erf({x}) = {back}"
            );
        }
        for tail in [1e-10, 1e-15, 1e-300] {
            let x = erf_inv(1.0 - tail);
            let rel = (libm::erfc(x) - tail).abs() / tail;
            // 1 - tail is rounded to f64: its tail is exact only to ~1e-16 absolute.
            assert!(rel <= 1e-16 / tail + 1e-12, "{tail}: {rel}");
        }
        assert_eq!(erf_inv(1.0), f64::INFINITY);
        assert_eq!(erf_inv(-1.0), f64::NEG_INFINITY);
        assert!(erf_inv(1.5).is_nan());
    }
}
