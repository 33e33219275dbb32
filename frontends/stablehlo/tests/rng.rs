//! `stablehlo.rng_bit_generator` (`THREE_FRY`, u64 bits): threefry2x32's published known
//! answers (Salmon et al.'s Random123 test vectors) through the whole lowering, row-major
//! counters over a shape, the new state (the counter advanced, wrapping at 2^64), and the
//! algorithms and types that are refused; `PHILOX` and `DEFAULT` against XLA's bits. The StableHLO conformance file
//! `rng_bit_generator_uint32_4.mlir` checks 10,000 of XLA's values besides.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{Element, Elements};
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::{load, Error};

/// The program: state in, new state and bits of `shape` out.
fn program(algorithm: &str, shape: &str, bits: &str) -> String {
    format!(
        "func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, tensor<{shape}x{bits}>) {{\n  %state, %out = stablehlo.rng_bit_generator %s, algorithm = {algorithm} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<{shape}x{bits}>)\n  return %state, %out : tensor<2xui64>, tensor<{shape}x{bits}>\n}}"
    )
}

fn run(shape: &str, state: [u64; 2]) -> (Vec<u64>, Vec<u64>) {
    let func = load(&program("THREE_FRY", shape, "ui64")).unwrap();
    let out = interpret(
        &func,
        &[Array::new([2], u64::into_elements(state.to_vec())).unwrap()],
    )
    .unwrap();
    let words = |a: &Array| match a.elements() {
        Elements::U64(v) => v.clone(),
        other => panic!("{:?}", other.dtype()),
    };
    (words(&out[0]), words(&out[1]))
}

/// The state whose key words are `k` and counter words `x` (low words first).
fn state(k: [u32; 2], x: [u32; 2]) -> [u64; 2] {
    let join = |w: [u32; 2]| u64::from(w[0]) | u64::from(w[1]) << 32;
    [join(k), join(x)]
}

#[test]
fn known_answers() {
    for (k, x, want) in [
        ([0, 0], [0, 0], [0x6b20_0159u32, 0x99ba_4efe]),
        ([u32::MAX; 2], [u32::MAX; 2], [0x1cb9_96fc, 0xbb00_2be7]),
        (
            [0x1319_8a2e, 0x0370_7344],
            [0x243f_6a88, 0x85a3_08d3],
            [0xc492_3a9c, 0x483d_f7a0],
        ),
    ] {
        let (new_state, bits) = run("1", state(k, x));
        assert_eq!(
            bits,
            vec![u64::from(want[0]) | u64::from(want[1]) << 32],
            "{k:x?} {x:x?}"
        );
        assert_eq!(new_state[0], state(k, x)[0]);
        assert_eq!(new_state[1], state(k, x)[1].wrapping_add(1));
    }
}

/// Element `i` (row-major) hashes the counter plus `i`: with the counter of a known answer
/// at element 0, and the counter wrapping past 2^64 along the way.
#[test]
fn counters_run_row_major_and_the_state_advances() {
    let s = state([0x1319_8a2e, 0x0370_7344], [0x243f_6a88, 0x85a3_08d3]);
    let (new_state, bits) = run("2x3", s);
    assert_eq!(bits.len(), 6);
    assert_eq!(bits[0], 0x483d_f7a0_c492_3a9c);
    assert_eq!(new_state, vec![s[0], s[1] + 6]);
    let one_ahead = run("1", [s[0], s[1] + 4]).1[0];
    assert_eq!(bits[4], one_ahead);
    let (wrapped, bits) = run("3", [0, u64::MAX - 1]);
    assert_eq!(wrapped, vec![0, 1]);
    assert_eq!(bits[2], run("1", [0, 0]).1[0]);
    assert_eq!(bits[0], run("1", [0, u64::MAX - 1]).1[0]);
}

/// A scalar result is element 0; an empty one leaves the counter where it was.
#[test]
fn scalar_and_empty_results() {
    for (ty, count) in [("tensor<ui64>", 1), ("tensor<0x5xui64>", 0)] {
        let text = format!(
            "func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, {ty}) {{\n  %state, %out = stablehlo.rng_bit_generator %s, algorithm = THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, {ty})\n  return %state, %out : tensor<2xui64>, {ty}\n}}"
        );
        let func = load(&text).unwrap();
        let s = Array::new([2], u64::into_elements(vec![7, 9])).unwrap();
        let out = interpret(&func, &[s]).unwrap();
        assert_eq!(
            out[0].elements(),
            &Elements::U64(vec![7, 9 + count]),
            "{ty}"
        );
        if count == 1 {
            assert_eq!(
                out[1].elements(),
                &Elements::U64(run("1", [7, 9]).1),
                "{ty}"
            );
        }
    }
}

#[test]
fn other_algorithms_and_types_are_unsupported() {
    for (algorithm, bits, why) in [
        ("PHILOX", "ui16", "u16 bits with PHILOX"),
        ("THREE_FRY", "ui32", "u32 bits"),
    ] {
        match load(&program(algorithm, "4", bits)) {
            Err(e @ Error::Unsupported { .. }) => {
                assert!(e.to_string().contains(why), "{e}")
            }
            other => panic!("{algorithm} {bits}: {other:?}"),
        }
    }
    let text = program("PHILOX", "4", "ui32").replace("tensor<2xui64>", "tensor<4xui64>");
    match load(&text) {
        Err(e @ Error::Unsupported { .. }) => {
            assert!(e.to_string().contains("ui64[2] or ui64[3]"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

/// The bits and new state of `algorithm` from a `u64[n]` state.
fn philox(algorithm: &str, state: &[u64], dims: &[usize], bits: &str) -> (Vec<u64>, Vec<u64>) {
    let n = state.len();
    let shape: String = dims.iter().map(|d| format!("{d}x")).collect();
    let text = program(algorithm, shape.trim_end_matches('x'), bits)
        .replace("tensor<2xui64>", &format!("tensor<{n}xui64>"))
        .replace("tensor<x", "tensor<");
    let func = load(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let out = interpret(
        &func,
        &[Array::new([n], u64::into_elements(state.to_vec())).unwrap()],
    )
    .unwrap();
    let words = |a: &Array| match a.elements() {
        Elements::U64(v) => v.clone(),
        Elements::U32(v) => v.iter().map(|&x| u64::from(x)).collect(),
        other => panic!("{:?}", other.dtype()),
    };
    (words(&out[0]), words(&out[1]))
}

/// `PHILOX` and `DEFAULT` give XLA's bits and new state, bit for bit, as JAX computed them on
/// the CPU (`data/export_philox.py` wrote `data/philox.json`): u32 and u64 bits, a counter
/// whose low word wraps into the key's, a partial last block. A `u64[3]` state whose third
/// word is the key gives the same bits (a `u64[2]` state's counter is its second word over its
/// first), and keeps the counter's high word.
#[test]
fn philox_matches_xla() {
    let record: serde_json::Value = serde_json::from_str(include_str!("data/philox.json")).unwrap();
    let words = |v: &serde_json::Value| -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().parse().unwrap())
            .collect()
    };
    let cases = record["cases"].as_array().unwrap();
    for case in cases {
        let algorithm = case["algorithm"].as_str().unwrap();
        let state = words(&case["state"]);
        let dims: Vec<usize> = case["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let bits = match case["dtype"].as_str().unwrap() {
            "uint32" => "ui32",
            _ => "ui64",
        };
        let (new_state, got) = philox(algorithm, &state, &dims, bits);
        assert_eq!(
            got,
            words(&case["bits"]),
            "{algorithm} {dims:?} {bits} from {state:x?}"
        );
        assert_eq!(
            new_state,
            words(&case["new_state"]),
            "{algorithm} {dims:?} {bits}"
        );
        let three = [state[0], state[1], state[0]];
        let (longer, same) = philox(algorithm, &three, &dims, bits);
        assert_eq!(same, got, "u64[3] state");
        assert_eq!(longer[..2], new_state[..], "u64[3] state");
    }
    assert!(cases.len() >= 7);
    // The high word carries in a u64[3] state; nothing is generated for an empty shape.
    let (state, _) = philox("PHILOX", &[5, u64::MAX, 7], &[3], "ui32");
    assert_eq!(state, [5, 0, 8]);
    let (state, bits) = philox("PHILOX", &[5, 9], &[0], "ui64");
    assert_eq!((state, bits), (vec![5, 9], vec![]));
}
