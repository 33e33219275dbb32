//! Shape and dtype rules of every op, valid and invalid uses, as one reviewed table.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{
    infer_type, BinaryOp, CompareOp, DType, DotDims, Literal, Op, ReduceOp, Scalar, Shape,
    TensorType, UnaryOp,
};

fn ty(s: &str) -> TensorType {
    let (d, rest) = s.split_at(s.find('[').expect("a type like f32[2,3]"));
    TensorType::new(
        DType::from_name(d).expect("a dtype"),
        Shape::parse(rest).expect("dims"),
    )
}

fn case(op: Op, args: &[&str]) -> String {
    let types: Vec<TensorType> = args.iter().map(|a| ty(a)).collect();
    let refs: Vec<&TensorType> = types.iter().collect();
    let result = match infer_type(&op, &refs) {
        Ok(t) => t.to_string(),
        Err(e) => format!("error: {e}"),
    };
    format!("{}({}) -> {result}", op.name(), args.join(", "))
}

fn dot(lb: &[usize], rb: &[usize], lc: &[usize], rc: &[usize]) -> Op {
    Op::DotGeneral(DotDims {
        lhs_batch: lb.to_vec(),
        rhs_batch: rb.to_vec(),
        lhs_contract: lc.to_vec(),
        rhs_contract: rc.to_vec(),
    })
}

#[test]
fn shape_rules_table() {
    let bcast = |shape: &[usize], dims: &[usize]| Op::BroadcastInDim {
        shape: Shape::new(shape.to_vec()),
        dims: dims.to_vec(),
    };
    let slice = |s: &[usize], l: &[usize], st: &[usize]| Op::Slice {
        start: s.to_vec(),
        limit: l.to_vec(),
        strides: st.to_vec(),
    };
    let pad = |lo: &[i64], hi: &[i64], int: &[usize]| Op::Pad {
        low: lo.to_vec(),
        high: hi.to_vec(),
        interior: int.to_vec(),
    };
    let reduce = |op, axes: &[usize]| Op::Reduce {
        op,
        axes: axes.to_vec(),
    };
    let cases = [
        case(Op::Constant(Literal::splat(Scalar::F32(1.0), [2, 3])), &[]),
        case(
            Op::Iota {
                dtype: DType::I32,
                shape: Shape::new([2, 3]),
                dim: 1,
            },
            &[],
        ),
        case(
            Op::Iota {
                dtype: DType::I32,
                shape: Shape::new([2, 3]),
                dim: 2,
            },
            &[],
        ),
        case(
            Op::Iota {
                dtype: DType::Bool,
                shape: Shape::new([2]),
                dim: 0,
            },
            &[],
        ),
        case(Op::Unary(UnaryOp::Exp), &["f16[4]"]),
        case(Op::Unary(UnaryOp::Exp), &["i32[4]"]),
        case(Op::Unary(UnaryOp::Neg), &["u8[4]"]),
        case(Op::Unary(UnaryOp::Abs), &["u8[4]"]),
        case(Op::Unary(UnaryOp::Not), &["bool[4]"]),
        case(Op::Unary(UnaryOp::Not), &["f32[4]"]),
        case(Op::Unary(UnaryOp::Exp), &["f32[4]", "f32[4]"]),
        case(Op::Unary(UnaryOp::Abs), &["c64[4]"]),
        case(Op::Unary(UnaryOp::Real), &["c128[4]"]),
        case(Op::Unary(UnaryOp::Imag), &["f32[4]"]),
        case(Op::Unary(UnaryOp::Exp), &["c64[4]"]),
        case(Op::Unary(UnaryOp::Floor), &["c64[4]"]),
        case(Op::Binary(BinaryOp::Complex), &["f32[2]", "f32[2]"]),
        case(Op::Binary(BinaryOp::Complex), &["f16[2]", "f16[2]"]),
        case(Op::Binary(BinaryOp::Mul), &["c128[2]", "c128[2]"]),
        case(Op::Binary(BinaryOp::Max), &["c64[2]", "c64[2]"]),
        case(Op::Compare(CompareOp::Ne), &["c64[2]", "c64[2]"]),
        case(Op::Compare(CompareOp::Lt), &["c64[2]", "c64[2]"]),
        case(reduce(ReduceOp::Prod, &[0]), &["c64[2]"]),
        case(reduce(ReduceOp::Max, &[0]), &["c64[2]"]),
        case(Op::Binary(BinaryOp::Add), &["bf16[2,3]", "bf16[2,3]"]),
        case(Op::Binary(BinaryOp::Add), &["f32[2,3]", "f32[3]"]),
        case(Op::Binary(BinaryOp::Add), &["f32[3]", "f64[3]"]),
        case(Op::Binary(BinaryOp::Add), &["bool[3]", "bool[3]"]),
        case(Op::Binary(BinaryOp::Xor), &["i64[3]", "i64[3]"]),
        case(Op::Binary(BinaryOp::And), &["f32[3]", "f32[3]"]),
        case(Op::Compare(CompareOp::Lt), &["f32[2]", "f32[2]"]),
        case(Op::Compare(CompareOp::Eq), &["f32[2]", "f32[3]"]),
        case(Op::Select, &["bool[2]", "f32[2]", "f32[2]"]),
        case(Op::Select, &["bool[]", "f32[2]", "f32[2]"]),
        case(Op::Select, &["f32[2]", "f32[2]", "f32[2]"]),
        case(Op::Select, &["bool[3]", "f32[2]", "f32[2]"]),
        case(Op::Clamp, &["f32[]", "f32[2]", "f32[2]"]),
        case(Op::Clamp, &["f32[3]", "f32[2]", "f32[]"]),
        case(Op::Convert { to: DType::BF16 }, &["i64[2,2]"]),
        case(Op::StopGradient, &["f32[5]"]),
        case(bcast(&[4, 3], &[1]), &["f32[3]"]),
        case(bcast(&[4, 3], &[0, 1]), &["f32[1,3]"]),
        case(bcast(&[4, 3], &[0]), &["f32[3]"]),
        case(bcast(&[4, 3], &[1, 1]), &["f32[3,3]"]),
        case(
            Op::Reshape {
                shape: Shape::new([3, 2]),
            },
            &["f32[6]"],
        ),
        case(
            Op::Reshape {
                shape: Shape::new([4]),
            },
            &["f32[6]"],
        ),
        case(
            Op::Transpose {
                perm: vec![2, 0, 1],
            },
            &["f32[2,3,4]"],
        ),
        case(
            Op::Transpose {
                perm: vec![0, 0, 1],
            },
            &["f32[2,3,4]"],
        ),
        case(reduce(ReduceOp::Sum, &[0, 2]), &["f32[2,3,4]"]),
        case(reduce(ReduceOp::Max, &[]), &["bool[2]"]),
        case(reduce(ReduceOp::Sum, &[2, 0]), &["f32[2,3,4]"]),
        case(reduce(ReduceOp::Prod, &[0]), &["bool[2]"]),
        case(dot(&[], &[], &[1], &[0]), &["f32[2,3]", "f32[3,5]"]),
        case(dot(&[0], &[0], &[2], &[1]), &["f32[7,2,3]", "f32[7,3,5]"]),
        case(dot(&[], &[], &[0], &[0]), &["f32[3,2]", "f32[3,5]"]),
        case(dot(&[], &[], &[1], &[0]), &["f32[2,3]", "f32[4,5]"]),
        case(dot(&[], &[], &[1], &[0]), &["f32[2,3]", "f64[3,5]"]),
        case(dot(&[0], &[], &[1], &[0]), &["f32[2,3]", "f32[3,5]"]),
        case(slice(&[1, 0], &[5, 3], &[2, 1]), &["f32[6,3]"]),
        case(slice(&[0, 0], &[7, 3], &[1, 1]), &["f32[6,3]"]),
        case(slice(&[0, 0], &[6, 3], &[0, 1]), &["f32[6,3]"]),
        case(pad(&[1, -1], &[2, 0], &[0, 2]), &["f32[3,4]", "f32[]"]),
        case(pad(&[-5], &[0], &[0]), &["f32[3]", "f32[]"]),
        case(pad(&[0], &[0], &[0]), &["f32[3]", "f64[]"]),
        case(Op::Concatenate { axis: 1 }, &["f32[2,3]", "f32[2,1]"]),
        case(Op::Concatenate { axis: 1 }, &["f32[2,3]", "f32[3,1]"]),
        case(Op::Concatenate { axis: 2 }, &["f32[2,3]"]),
        case(Op::Concatenate { axis: 0 }, &[]),
        case(bcast(&[1, 1, 1, 1, 1, 1, 1, 1, 1], &[]), &["f32[]"]),
    ];
    insta::assert_snapshot!(cases.join("\n"));
}

#[test]
fn indexing_shape_rules_table() {
    use ferrax_ir::{Gather, Scatter, ScatterCombine};
    let rows = |slice: &[usize], offset: &[usize], ivd: usize| {
        Op::Gather(Box::new(Gather {
            offset_dims: offset.to_vec(),
            collapsed_slice_dims: vec![0],
            operand_batching_dims: vec![],
            start_indices_batching_dims: vec![],
            start_index_map: vec![0],
            index_vector_dim: ivd,
            slice_sizes: slice.to_vec(),
            indices_are_sorted: false,
        }))
    };
    let scatter = |window: &[usize], inserted: &[usize], ivd: usize| {
        Op::Scatter(Box::new(Scatter {
            combine: ScatterCombine::Add,
            update_window_dims: window.to_vec(),
            inserted_window_dims: inserted.to_vec(),
            input_batching_dims: vec![],
            scatter_indices_batching_dims: vec![],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: ivd,
            indices_are_sorted: false,
            unique_indices: false,
        }))
    };
    let batched = Op::Gather(Box::new(Gather {
        offset_dims: vec![],
        collapsed_slice_dims: vec![1],
        operand_batching_dims: vec![0],
        start_indices_batching_dims: vec![0],
        start_index_map: vec![1],
        index_vector_dim: 2,
        slice_sizes: vec![1, 1],
        indices_are_sorted: false,
    }));
    let ds = |sizes: &[usize]| Op::DynamicSlice {
        sizes: sizes.to_vec(),
    };
    let cases = [
        case(rows(&[1, 3], &[2], 2), &["f32[6,3]", "i32[2,4]"]),
        case(rows(&[1, 3], &[1], 1), &["f32[6,3]", "i64[5,1]"]),
        case(rows(&[1, 3], &[0], 1), &["f32[6,3]", "u8[5]"]),
        case(rows(&[1, 3], &[1], 1), &["f32[6,3]", "f32[5]"]),
        case(rows(&[2, 3], &[1], 1), &["f32[6,3]", "i32[5]"]),
        case(rows(&[1, 4], &[1], 1), &["f32[6,3]", "i32[5]"]),
        case(rows(&[1, 3], &[1, 2], 1), &["f32[6,3]", "i32[5]"]),
        case(rows(&[1, 3], &[1], 3), &["f32[6,3]", "i32[5]"]),
        case(rows(&[1, 3], &[1], 0), &["f32[6,3]", "i32[5,2]"]),
        case(batched.clone(), &["f32[3,7]", "i32[3,4]"]),
        case(batched, &["f32[3,7]", "i32[2,4]"]),
        case(scatter(&[1], &[0], 1), &["f32[6,3]", "i32[5]", "f32[5,3]"]),
        case(scatter(&[1], &[0], 1), &["f32[6,3]", "i32[5]", "f32[4,3]"]),
        case(scatter(&[1], &[0], 1), &["f32[6,3]", "i32[5]", "f32[5,4]"]),
        case(scatter(&[1], &[0], 1), &["f32[6,3]", "i32[5]", "f64[5,3]"]),
        case(
            scatter(&[0, 1], &[], 1),
            &["f32[6,3]", "i32[1]", "f32[2,3]"],
        ),
        case(scatter(&[1], &[1], 1), &["f32[6,3]", "i32[5]", "f32[5,6]"]),
        case(ds(&[2, 2]), &["f32[4,3]", "i32[]", "i32[]"]),
        case(ds(&[2, 2]), &["f32[4,3]", "i32[]"]),
        case(ds(&[2, 4]), &["f32[4,3]", "i32[]", "i32[]"]),
        case(ds(&[2, 2]), &["f32[4,3]", "i32[]", "i64[]"]),
        case(ds(&[2, 2]), &["f32[4,3]", "f32[]", "f32[]"]),
        case(
            Op::DynamicUpdateSlice,
            &["f32[4,3]", "f32[2,3]", "i32[]", "i32[]"],
        ),
        case(
            Op::DynamicUpdateSlice,
            &["f32[4,3]", "f32[5,3]", "i32[]", "i32[]"],
        ),
        case(
            Op::DynamicUpdateSlice,
            &["f32[4,3]", "f32[2,3]", "i32[1]", "i32[]"],
        ),
        case(Op::DynamicUpdateSlice, &["f32[4,3]"]),
    ];
    insta::assert_snapshot!(cases.join("\n"));
}
