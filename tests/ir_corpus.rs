//! Snapshots of the IR of the corpus programs, and the text-format and serde round trips.
#![allow(clippy::unwrap_used)]

mod common;

use ferrax::ir::{parse_func, print_func, verify};

#[test]
fn corpus_ir_snapshots() {
    for (name, func) in common::corpus() {
        insta::assert_snapshot!(name, print_func(&func));
    }
}

#[test]
fn corpus_is_verified() {
    for (name, func) in common::corpus() {
        verify(&func).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn text_round_trip_is_exact() {
    for (name, func) in common::corpus() {
        let printed = print_func(&func);
        let parsed = parse_func(&printed).unwrap_or_else(|e| panic!("{name}: {e}\n{printed}"));
        assert_eq!(parsed, func, "{name}: parse(print(f)) != f");
        assert_eq!(
            print_func(&parsed),
            printed,
            "{name}: print is not canonical"
        );
    }
}

#[test]
fn serde_round_trip() {
    for (name, func) in common::corpus() {
        let json = serde_json::to_string(&func).unwrap();
        let back: ferrax::Func = serde_json::from_str(&json).unwrap();
        assert_eq!(back, func, "{name}");
    }
}

#[test]
fn corpus_covers_every_op() {
    use std::collections::BTreeSet;
    let used: BTreeSet<&str> = common::corpus()
        .iter()
        .flat_map(|(_, f)| f.body.iter().map(|i| i.op.name()).collect::<Vec<_>>())
        .collect();
    let mut all: Vec<&str> = vec![
        "constant",
        "iota",
        "select",
        "clamp",
        "convert",
        "bitcast_convert",
        "broadcast_in_dim",
        "reshape",
        "transpose",
        "reverse",
        "dot_general",
        "slice",
        "pad",
        "concatenate",
        "stop_gradient",
        "custom_vjp",
        "custom_jvp",
        "gather",
        "dynamic_slice",
        "dynamic_update_slice",
        "sort",
        "argsort",
        "while",
        "cond",
        "scan",
    ];
    all.extend(ferrax::ir::AttentionPart::ALL.iter().map(|a| a.name()));
    all.extend(ferrax::ir::UnaryOp::ALL.iter().map(|u| u.name()));
    all.extend(ferrax::ir::BinaryOp::ALL.iter().map(|b| b.name()));
    all.extend(ferrax::ir::CompareOp::ALL.iter().map(|c| c.name()));
    all.extend(ferrax::ir::ReduceOp::ALL.iter().map(|r| r.name()));
    all.extend(ferrax::ir::ScatterCombine::ALL.iter().map(|c| c.name()));
    all.extend(ferrax::ir::RematPolicy::ALL.iter().map(|r| r.op_name()));
    let missing: Vec<&str> = all.into_iter().filter(|op| !used.contains(op)).collect();
    assert!(missing.is_empty(), "ops not in the corpus: {missing:?}");
}
