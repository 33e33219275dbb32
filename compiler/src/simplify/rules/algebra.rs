//! Algebraic identities that hold bit for bit: multiplying or dividing by one, subtracting +0
//! or adding -0, double negation, and folding negation into subtraction. `x * 0 → 0`,
//! `x + 0 → x` and `-(x - y) → y - x` are not here: they are wrong for NaN, infinities or -0.

use super::{pattern, splat_value, var, Rule};
use crate::simplify::lang::Graph;
use egg::{ConditionalApplier, Id, Rewrite, Subst};

fn splat_is(
    name: &'static str,
    want: fn(f64, bool) -> bool,
) -> impl Fn(&mut Graph, Id, &Subst) -> bool {
    let v = var(name);
    move |egraph: &mut Graph, _, subst: &Subst| {
        splat_value(&egraph[subst[v]].data).is_some_and(|(x, negative)| want(x, negative))
    }
}

fn when(
    name: &str,
    lhs: &str,
    rhs: &str,
    cond: impl Fn(&mut Graph, Id, &Subst) -> bool + Send + Sync + 'static,
) -> Rule {
    let applier = ConditionalApplier {
        condition: cond,
        applier: pattern(rhs),
    };
    Rewrite::new(name, pattern(lhs), applier).unwrap_or_else(|e| panic!("rule {name}: {e}"))
}

fn always(name: &str, lhs: &str, rhs: &str) -> Rule {
    Rewrite::new(name, pattern(lhs), pattern(rhs)).unwrap_or_else(|e| panic!("rule {name}: {e}"))
}

pub fn rules() -> Vec<Rule> {
    let one = |x: f64, _| x == 1.0;
    vec![
        when("mul-by-one", "(mul ?x ?c)", "?x", splat_is("?c", one)),
        when("mul-one-by", "(mul ?c ?x)", "?x", splat_is("?c", one)),
        when("div-by-one", "(div ?x ?c)", "?x", splat_is("?c", one)),
        when(
            "sub-positive-zero",
            "(sub ?x ?c)",
            "?x",
            splat_is("?c", |x, negative| x == 0.0 && !negative),
        ),
        when(
            "add-negative-zero",
            "(add ?x ?c)",
            "?x",
            splat_is("?c", |x, negative| x == 0.0 && negative),
        ),
        always("neg-neg", "(neg (neg ?x))", "?x"),
        always("sub-neg", "(sub ?x (neg ?y))", "(add ?x ?y)"),
        always("add-neg", "(add ?x (neg ?y))", "(sub ?x ?y)"),
    ]
}
