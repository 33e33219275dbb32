//! `stablehlo.reduce_window` and `stablehlo.select_and_scatter`, imported as pads, strided
//! slices and elementwise ops, against direct loops over their definitions (XLA's: the
//! padded, base-dilated operand; windows of strides and dilations; `select_and_scatter`
//! keeping the element its comparison prefers, first in row-major order, never padding). The
//! values are small integers in f32, so sums in any order are exact.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{parse_func, print_func, Elements};
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::{load, Error};

/// Dimension sizes and attributes of one 2-d window.
#[derive(Clone, Copy)]
struct Geometry {
    dims: [usize; 2],
    window: [usize; 2],
    strides: [usize; 2],
    base: [usize; 2],
    dilations: [usize; 2],
    padding: [(i64, i64); 2],
}

impl Geometry {
    fn padded(&self) -> [i64; 2] {
        [0, 1].map(|d| {
            let n = self.dims[d] as i64;
            self.padding[d].0 + self.padding[d].1 + n + (n - 1).max(0) * (self.base[d] as i64 - 1)
        })
    }

    fn out(&self) -> [usize; 2] {
        let p = self.padded();
        [0, 1].map(|d| {
            let extent = ((self.window[d] - 1) * self.dilations[d] + 1) as i64;
            if p[d] < extent {
                0
            } else {
                ((p[d] - extent) as usize) / self.strides[d] + 1
            }
        })
    }

    /// The operand element at padded position `(i, j)`, or `None` for padding.
    fn at(&self, x: &[f32], i: i64, j: i64) -> Option<f32> {
        let source = |p: i64, d: usize| {
            let q = p - self.padding[d].0;
            let b = self.base[d] as i64;
            (q >= 0 && q % b == 0 && q / b < self.dims[d] as i64).then_some((q / b) as usize)
        };
        Some(x[source(i, 0)? * self.dims[1] + source(j, 1)?])
    }

    fn attrs(&self) -> String {
        let list = |v: [usize; 2]| format!("array<i64: {}, {}>", v[0], v[1]);
        format!(
            "window_dimensions = {}, window_strides = {}, base_dilations = {}, window_dilations = {}, padding = dense<[[{}, {}], [{}, {}]]> : tensor<2x2xi64>",
            list(self.window),
            list(self.strides),
            list(self.base),
            list(self.dilations),
            self.padding[0].0,
            self.padding[0].1,
            self.padding[1].0,
            self.padding[1].1
        )
    }
}

fn ramp(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|k| ((k * 7 + seed * 3) % 11) as f32 - 5.0)
        .collect()
}

fn array(dims: &[usize], v: Vec<f32>) -> Array {
    Array::new(dims.to_vec(), Elements::F32(v)).unwrap()
}

/// A reduce_window of `op` (`add`, `maximum`, ...) with initial value `init` by the definition.
fn reduce_window_by_loops(g: &Geometry, x: &[f32], init: f32, op: fn(f32, f32) -> f32) -> Vec<f32> {
    let [o0, o1] = g.out();
    let mut out = Vec::new();
    for a in 0..o0 {
        for b in 0..o1 {
            let mut acc = init;
            for p in 0..g.window[0] {
                for q in 0..g.window[1] {
                    let i = (a * g.strides[0] + p * g.dilations[0]) as i64;
                    let j = (b * g.strides[1] + q * g.dilations[1]) as i64;
                    acc = op(acc, g.at(x, i, j).unwrap_or(init));
                }
            }
            out.push(acc);
        }
    }
    out
}

fn reduce_window_text(g: &Geometry, body: &str, init: f32) -> String {
    let [d0, d1] = g.dims;
    let [o0, o1] = g.out();
    format!(
        r#"
func.func @main(%x: tensor<{d0}x{d1}xf32>) -> tensor<{o0}x{o1}xf32> {{
  %init = stablehlo.constant dense<{init:?}> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%x, %init) <{{{attrs}}}> ({{
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.{body} %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }}) : (tensor<{d0}x{d1}xf32>, tensor<f32>) -> tensor<{o0}x{o1}xf32>
  return %0 : tensor<{o0}x{o1}xf32>
}}
"#,
        attrs = g.attrs()
    )
}

fn geometries() -> Vec<Geometry> {
    let g = Geometry {
        dims: [5, 6],
        window: [2, 3],
        strides: [1, 1],
        base: [1, 1],
        dilations: [1, 1],
        padding: [(0, 0), (0, 0)],
    };
    vec![
        g,
        Geometry {
            strides: [2, 3],
            ..g
        },
        Geometry {
            padding: [(1, 2), (0, 1)],
            ..g
        },
        Geometry {
            dilations: [2, 1],
            strides: [1, 2],
            ..g
        },
        Geometry {
            base: [2, 1],
            padding: [(1, 0), (2, 2)],
            ..g
        },
        // A cumulative sum's window: as long as the axis, padded before.
        Geometry {
            window: [5, 1],
            padding: [(4, 0), (0, 0)],
            ..g
        },
        // Negative padding crops.
        Geometry {
            padding: [(-1, 0), (0, -2)],
            ..g
        },
        // A window larger than the operand: an empty result.
        Geometry {
            window: [7, 1],
            ..g
        },
    ]
}

#[test]
fn reduce_window_matches_its_definition() {
    type Combine = fn(f32, f32) -> f32;
    let ops: [(&str, f32, Combine); 3] = [
        ("add", 0.5, |a, b| a + b),
        ("maximum", f32::NEG_INFINITY, f32::max),
        ("minimum", 100.0, f32::min),
    ];
    for g in geometries() {
        let x = ramp(g.dims[0] * g.dims[1], 1);
        for (body, init, f) in ops {
            let text = reduce_window_text(&g, body, init);
            let func = load(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(parse_func(&print_func(&func)).unwrap(), func);
            let got = interpret(&func, &[array(&g.dims, x.clone())]).unwrap();
            let want = reduce_window_by_loops(&g, &x, init, f);
            assert_eq!(got[0].as_slice::<f32>().unwrap(), want, "{body}\n{text}");
        }
    }
}

/// XLA's select_and_scatter with `GE` and `add`: every window keeps its first maximum among
/// the operand's own elements, and its source element is added there.
fn select_and_scatter_by_loops(g: &Geometry, x: &[f32], source: &[f32], init: f32) -> Vec<f32> {
    let [o0, o1] = g.out();
    let mut out = vec![init; x.len()];
    for a in 0..o0 {
        for b in 0..o1 {
            let mut best: Option<(f32, usize)> = None;
            for p in 0..g.window[0] {
                for q in 0..g.window[1] {
                    let i = (a * g.strides[0] + p) as i64;
                    let j = (b * g.strides[1] + q) as i64;
                    if let Some(v) = g.at(x, i, j) {
                        let k = (i - g.padding[0].0) as usize * g.dims[1]
                            + (j - g.padding[1].0) as usize;
                        // `GE` keeps the current element unless the new one is larger
                        // (the values here are never NaN).
                        if best.is_none_or(|(kept, _)| v > kept) {
                            best = Some((v, k));
                        }
                    }
                }
            }
            if let Some((_, k)) = best {
                out[k] += source[a * o1 + b];
            }
        }
    }
    out
}

#[test]
fn select_and_scatter_matches_its_definition() {
    let g = Geometry {
        dims: [5, 6],
        window: [2, 3],
        strides: [1, 1],
        base: [1, 1],
        dilations: [1, 1],
        padding: [(0, 0), (0, 0)],
    };
    let cases = [
        g,
        Geometry {
            strides: [2, 3],
            ..g
        },
        Geometry {
            strides: [2, 2],
            padding: [(1, 1), (0, 2)],
            ..g
        },
        // Windows over padding alone select nothing.
        Geometry {
            window: [2, 2],
            strides: [2, 2],
            padding: [(2, 0), (0, 0)],
            ..g
        },
    ];
    for g in cases {
        let [d0, d1] = g.dims;
        let [o0, o1] = g.out();
        let text = format!(
            r#"
func.func @main(%x: tensor<{d0}x{d1}xf32>, %s: tensor<{o0}x{o1}xf32>) -> tensor<{d0}x{d1}xf32> {{
  %init = stablehlo.constant dense<0.25> : tensor<f32>
  %0 = "stablehlo.select_and_scatter"(%x, %s, %init) <{{window_dimensions = array<i64: {w0}, {w1}>, window_strides = array<i64: {s0}, {s1}>, padding = dense<[[{p0}, {p1}], [{p2}, {p3}]]> : tensor<2x2xi64>}}> ({{
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.compare  GE, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }}, {{
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }}) : (tensor<{d0}x{d1}xf32>, tensor<{o0}x{o1}xf32>, tensor<f32>) -> tensor<{d0}x{d1}xf32>
  return %0 : tensor<{d0}x{d1}xf32>
}}
"#,
            w0 = g.window[0],
            w1 = g.window[1],
            s0 = g.strides[0],
            s1 = g.strides[1],
            p0 = g.padding[0].0,
            p1 = g.padding[0].1,
            p2 = g.padding[1].0,
            p3 = g.padding[1].1,
        );
        // Few distinct values, so windows hold ties.
        let x: Vec<f32> = (0..d0 * d1).map(|k| ((k * 5) % 4) as f32).collect();
        let s = ramp(o0 * o1, 2);
        let func = load(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let got = interpret(
            &func,
            &[array(&g.dims, x.clone()), array(&[o0, o1], s.clone())],
        )
        .unwrap();
        let want = select_and_scatter_by_loops(&g, &x, &s, 0.25);
        assert_eq!(got[0].as_slice::<f32>().unwrap(), want, "{text}");
    }
}

#[test]
fn bad_windows_are_errors() {
    let g = Geometry {
        dims: [2, 2],
        window: [1, 1],
        strides: [1, 1],
        base: [1, 1],
        dilations: [1, 1],
        padding: [(0, 0), (0, 0)],
    };
    let text = reduce_window_text(&g, "add", 0.0);
    let zero = text.replace(
        "window_dimensions = array<i64: 1, 1>",
        "window_dimensions = array<i64: 0, 1>",
    );
    let e = load(&zero).unwrap_err().to_string();
    assert!(e.contains("positive sizes"), "{e}");
    let huge = text.replace(
        "window_dimensions = array<i64: 1, 1>",
        "window_dimensions = array<i64: 100000, 100000>",
    );
    assert!(matches!(
        load(&huge).unwrap_err(),
        Error::Unsupported { .. }
    ));
    let wrong = text.replace("-> tensor<2x2xf32>", "-> tensor<2x3xf32>");
    let e = load(&wrong).unwrap_err().to_string();
    assert!(e.contains("reduce_window gives [2, 2]"), "{e}");
    // Splats, as MLIR prints dense attributes whose values are all equal.
    let splats = text
        .replace("padding = dense<[[0, 0], [0, 0]]>", "padding = dense<0>")
        .replace(
            "window_strides = array<i64: 1, 1>",
            "window_strides = dense<1> : tensor<2xi64>",
        );
    let func = load(&splats).unwrap_or_else(|e| panic!("{e}\n{splats}"));
    let x = array(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        interpret(&func, &[x]).unwrap()[0]
            .as_slice::<f32>()
            .unwrap(),
        [1.0, 2.0, 3.0, 4.0]
    );
    // A body that returns its accumulator rather than the sum it computed is not a sum: every
    // window keeps the initial value.
    let returns_arg = text.replace(
        "stablehlo.return %1 : tensor<f32>",
        "stablehlo.return %a : tensor<f32>",
    );
    let func = load(&returns_arg).unwrap();
    let x = array(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        interpret(&func, &[x]).unwrap()[0]
            .as_slice::<f32>()
            .unwrap(),
        [0.0; 4]
    );
    let rank = text.replace(
        "padding = dense<[[0, 0], [0, 0]]>",
        "padding = dense<[[0, 0]]>",
    );
    let e = load(&rank).unwrap_err().to_string();
    assert!(e.contains("padding needs 2"), "{e}");
}

/// A `reduce_window` of two operands whose body is not one op (`select_and_gather_add`'s:
/// keep the second operand's element where the first is smallest), and one whose body calls a
/// function, against loops.
#[test]
fn reduce_window_of_several_operands_and_any_body() {
    let text = r#"
func.func @main(%x: tensor<5x6xf32>, %y: tensor<5x6xf32>) -> tensor<4x2xf32> {
  %inf = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0:2 = "stablehlo.reduce_window"(%x, %y, %inf, %zero) <{window_dimensions = array<i64: 2, 3>, window_strides = array<i64: 1, 2>}> ({
  ^bb0(%a0: tensor<f32>, %a1: tensor<f32>, %e0: tensor<f32>, %e1: tensor<f32>):
    %1 = stablehlo.compare  LE, %a0, %e0,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %2 = stablehlo.select %1, %a0, %e0 : tensor<i1>, tensor<f32>
    %3 = stablehlo.select %1, %a1, %e1 : tensor<i1>, tensor<f32>
    stablehlo.return %2, %3 : tensor<f32>, tensor<f32>
  }) : (tensor<5x6xf32>, tensor<5x6xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x2xf32>, tensor<4x2xf32>)
  return %0#1 : tensor<4x2xf32>
}
"#;
    let x: Vec<f32> = (0..30).map(|k| ((k * 7) % 11) as f32).collect();
    let y: Vec<f32> = (0..30).map(|k| k as f32).collect();
    let func = load(text).unwrap_or_else(|e| panic!("{e}"));
    let got = interpret(
        &func,
        &[array(&[5, 6], x.clone()), array(&[5, 6], y.clone())],
    )
    .unwrap();
    let mut want = Vec::new();
    for a in 0..4 {
        for b in 0..2 {
            let mut best = (f32::INFINITY, 0.0);
            for p in 0..2 {
                for q in 0..3 {
                    let k = (a + p) * 6 + b * 2 + q;
                    if best.0 > x[k] {
                        best = (x[k], y[k]);
                    }
                }
            }
            want.push(best.1);
        }
    }
    assert_eq!(got[0].as_slice::<f32>().unwrap(), want);

    let called = r#"
func.func @main(%x: tensor<6xf32>) -> tensor<5xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%x, %zero) <{window_dimensions = array<i64: 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = func.call @plus(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<6xf32>, tensor<f32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}
func.func private @plus(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.add %a, %b : tensor<f32>
  return %0 : tensor<f32>
}
"#;
    let func = load(called).unwrap_or_else(|e| panic!("{e}"));
    let x: Vec<f32> = (0..6).map(|k| k as f32).collect();
    let got = interpret(&func, &[array(&[6], x)]).unwrap();
    assert_eq!(got[0].as_slice::<f32>().unwrap(), [1.0, 3.0, 5.0, 7.0, 9.0]);
}
