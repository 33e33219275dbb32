//! tanh and logistic, and the `1 + tanh(u)` of GELU's tanh form computed as a quotient of
//! exp: tanh's own relatives, sharing exp's reduction by `k·ln2` ([`Emit::reduce_ln2`]) but
//! arranged so that nothing cancels where tanh nears ±1.

use super::exp_log::{Count, F32_EXP_COEFFS};
use super::{int_of, inverse_factorials, layout, Emit};
use crate::kernel::{use_counts, KOp, Kernel};
use ferrax_ir::{BinaryOp, CompareOp, DType, Scalar, UnaryOp};

/// Q(r) of f32 `expm1(2r)/2 = r + r^2·Q(r)` over |r| <= 1.01·ln2/4 (tanh's reduced range),
/// fitted the same way: 0.04 ULP.
const F32_TANH_COEFFS: [f64; 6] = [
    1.0,
    0.666_666_626_930_236_8,
    0.333_330_899_477_005,
    0.133_334_100_246_429_44,
    0.044_609_881_937_503_815,
    0.012_703_646_905_720_234,
];

/// What [`expand`](super::expand) makes of an instruction in an f32 `1 + tanh(u)` whose tanh has no other use
/// (in a row kernel, all in one stage): the sum is computed as `2 / (1 + exp(-2u))`, the same
/// function in about half the operations of tanh's, and without cancelling where tanh(u) nears
/// -1 (in f32 the sum is 0 from u = -9 on). Within 3 ULP down to u = -44; below, 0 or
/// subnormal (see [`Emit::one_plus_exp`]). GELU's tanh form, `x·0.5·(1 + tanh(x'·c))`, spends
/// most of its time here, so its constant products fold into the quotient:
/// `x / (1 + exp(x'·(-2c)))`.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Quotient {
    None,
    /// A product by a constant that its one user folds in: it reads the product's other
    /// operand, `args[kept]`, instead. Exact: what folds into the constant is a power of two
    /// (the -2 of `exp(-2u)`, the 2 of the quotient).
    Folded {
        kept: usize,
    },
    /// The tanh: becomes the denominator `1 + exp(v·scale)`, `v` its argument (-2 the scale)
    /// or its argument's folded product's other operand (-2c the scale).
    Tanh {
        scale: f64,
    },
    /// The sum, `args[tanh]` its tanh: `2 / denominator` where it is `alone`, else the
    /// denominator, which the product takes.
    Sum {
        tanh: usize,
        alone: bool,
    },
    /// `x·0.5·(1 + tanh(u))`, `args[sum]` the sum, the other operand a folded `x·0.5`:
    /// `x / denominator`, which neither overflows nor rounds twice.
    Product {
        sum: usize,
    },
}

pub(super) fn tanh_quotients(kernel: &Kernel) -> Vec<Quotient> {
    let body = &kernel.body;
    let uses = use_counts(kernel);
    let mut user = vec![0; body.len()];
    for (i, ins) in body.iter().enumerate() {
        for &a in &ins.args {
            user[a] = i;
        }
    }
    let stage = |k: usize| kernel.rows.as_ref().map(|r| r.stages[k]);
    let f32_op = |k: usize, op: KOp| body[k].op == op && body[k].dtype == DType::F32;
    let mut plan = vec![Quotient::None; body.len()];
    // A product of a constant whose only use is `by`: the other operand's position and the
    // constant.
    let const_product = |plan: &[Quotient], k: usize, by: usize| {
        let candidate = f32_op(k, KOp::Binary(BinaryOp::Mul))
            && uses[k] == 1
            && stage(k) == stage(by)
            && plan[k] == Quotient::None;
        let args = &body[k].args;
        (0..2)
            .filter(|_| candidate)
            .find_map(|i| match body[args[i]].op {
                KOp::Const(c) => Some((1 - i, c.to_f64())),
                _ => None,
            })
    };
    for (i, ins) in body.iter().enumerate() {
        if !f32_op(i, KOp::Binary(BinaryOp::Add)) {
            continue;
        }
        let is_tanh = |k: usize| body[k].op == KOp::Unary(UnaryOp::Tanh);
        let is_one = |k: usize| body[k].op == KOp::Const(Scalar::F32(1.0));
        let (a, b) = (ins.args[0], ins.args[1]);
        let tanh = match (is_tanh(a), is_tanh(b)) {
            (true, _) if is_one(b) => 0,
            (_, true) if is_one(a) => 1,
            _ => continue,
        };
        let t = ins.args[tanh];
        if uses[t] != 1 || stage(t) != stage(i) {
            continue;
        }
        plan[i] = Quotient::Sum { tanh, alone: true };
        plan[t] = Quotient::Tanh { scale: -2.0 };
        let u = body[t].args[0];
        if let Some((kept, c)) = const_product(&plan, u, t) {
            let scale = c * -2.0;
            if (scale as f32).is_normal() {
                plan[u] = Quotient::Folded { kept };
                plan[t] = Quotient::Tanh { scale };
            }
        }
        let p = user[i];
        if uses[i] == 1 && f32_op(p, KOp::Binary(BinaryOp::Mul)) && stage(p) == stage(i) {
            let sum = usize::from(body[p].args[1] == i);
            let m = body[p].args[1 - sum];
            if let Some((kept, 0.5)) = const_product(&plan, m, p) {
                plan[m] = Quotient::Folded { kept };
                plan[i] = Quotient::Sum { tanh, alone: false };
                plan[p] = Quotient::Product { sum };
            }
        }
    }
    plan
}

impl Emit {
    /// What instruction `args` is as part of a quotient `quotient` plans, its exp the backend's
    /// own where `native_exp`; `None` where it takes no part.
    pub(super) fn tanh_quotient(
        &mut self,
        quotient: Quotient,
        args: &[usize],
        t: DType,
        native_exp: bool,
    ) -> Option<usize> {
        Some(match quotient {
            Quotient::None => return None,
            Quotient::Folded { kept } => args[kept],
            // 1 + tanh(u) as 2 / (1 + exp(-2u)): the tanh becomes the denominator, the sum
            // the quotient unless a product takes the denominator.
            Quotient::Tanh { scale } => {
                let s = self.c(scale, t);
                let x = self.mul(args[0], s, t);
                if native_exp {
                    let ex = self.un(UnaryOp::Exp, x, t);
                    let one = self.c(1.0, t);
                    self.add(one, ex, t)
                } else {
                    self.one_plus_exp(x, t)
                }
            }
            Quotient::Sum { tanh, alone } => {
                if alone {
                    let two = self.c(2.0, t);
                    self.div(two, args[tanh], t)
                } else {
                    args[tanh]
                }
            }
            Quotient::Product { sum } => self.div(args[1 - sum], args[sum], t),
        })
    }

    /// f32 `1 + exp(x)` for `2 / (1 + exp(x))`: `x` clamped to [-87, 88.8], and one power of
    /// two, which is infinite for x from 88.38 on (where the quotient's exact value is
    /// subnormal, and rounds to 0 from 88.72), so the quotient is 0 there; from -87 down the
    /// quotient is 2, as exactly. The sum is the fma of the polynomial, the power and 1.
    fn one_plus_exp(&mut self, x: usize, t: DType) -> usize {
        let xc = self.clamp_c(x, -87.0, 88.8, t);
        let (field, r) = self.reduce_ln2(xc, 1.0, Count::Field, t);
        let p = self.poly(r, &F32_EXP_COEFFS, t);
        let one = self.c(1.0, t);
        let p = self.fma(p, r, one, t);
        let scale = self.power_of_two(field, t);
        self.fma(p, scale, one, t)
    }

    /// tanh(a) for a = |x| as `(h + 1/2 - 2^-(k+1)) / (h + 1/2 + 2^-(k+1))`, from
    /// `2a = k·ln2 + 2r` and `h = expm1(2r)/2`: the quotient `(e^2a - 1)/(e^2a + 1)` divided
    /// through by `2^(k+1)`. For `k = 0` the numerator is `h` itself; above, `|h| <= 0.21`
    /// meets constants of at least 1/4, so the sums lose little. The constants hang off `k`,
    /// not off the polynomial, which keeps the chain from `x` to the result short. Exhaustively
    /// at most 3 ULP for f32 (inputs near |x| = 8, where numerator and denominator straddle 1/2).
    pub(super) fn tanh(&mut self, x: usize, t: DType) -> usize {
        // |x| and x's sign bit alone, by bit masks: the sign goes back on with one `or`.
        let it = int_of(t);
        let bits = self.bitcast(x, it);
        let magnitude_mask = if t == DType::F32 {
            i64::from(i32::MAX)
        } else {
            i64::MAX
        };
        let mask = self.ci(magnitude_mask, it);
        let a_bits = self.bin(BinaryOp::And, bits, mask, it);
        let sign = self.bin(BinaryOp::Xor, bits, a_bits, it);
        let a = self.bitcast(a_bits, t);
        // From 10 (f32) or 20 (f64) on the quotient rounds to 1; NaN passes the clamp.
        let hi = if t == DType::F32 { 10.0 } else { 20.0 };
        let hi = self.c(hi, t);
        let above = self.cmp(CompareOp::Lt, hi, a);
        let ac = self.select(above, hi, a, t);
        let (bias, _) = layout(t);
        let (field, r) = self.reduce_ln2(ac, 2.0, Count::Minus(bias - 1), t);
        let coeffs = if t == DType::F32 {
            F32_TANH_COEFFS.to_vec()
        } else {
            // Q(r) = 2·q(2r), q expm1's series after `r`: 2^(j+1)/(j+2)!.
            inverse_factorials(2, 15)
                .iter()
                .zip(1..)
                .map(|(f, j)| 2f64.powi(j) * f)
                .collect()
        };
        let q = self.poly(r, &coeffs, t);
        let r2 = self.mul(r, r, t);
        let h = self.fma(r2, q, r, t);
        let half_u = self.power_of_two(field, t);
        let half = self.c(0.5, t);
        let c_num = self.sub(half, half_u, t);
        let c_den = self.add(half, half_u, t);
        let num = self.add(h, c_num, t);
        let den = self.add(h, c_den, t);
        let y = self.div(num, den, t);
        let y_bits = self.bitcast(y, it);
        let signed = self.bin(BinaryOp::Or, y_bits, sign, it);
        self.bitcast(signed, t)
    }

    /// `1 / (1 + exp(-x))`, its exp the backend's own where `native_exp`.
    pub(super) fn logistic(&mut self, x: usize, t: DType, native_exp: bool) -> usize {
        let a = self.un(UnaryOp::Abs, x, t);
        let na = self.un(UnaryOp::Neg, a, t);
        let e = if native_exp {
            self.un(UnaryOp::Exp, na, t)
        } else {
            self.exp(na, t)
        };
        let one = self.c(1.0, t);
        let den = self.add(one, e, t);
        let pos = self.div(one, den, t);
        let neg = self.div(e, den, t);
        let is_neg = self.cmp_c(CompareOp::Lt, x, 0.0, t);
        self.select(is_neg, neg, pos, t)
    }
}
