//! The runtime fuzzer's seed programs (see `main.rs`): every program the other suites run,
//! the same with their large sizes shrunk, and a few written here for the ops the traced
//! corpus has few of.

use crate::common;
use crate::mutate::{number_sites, Site};
use ferrax::ir::{parse_func, verify};
use ferrax::Func;

/// Programs of ops the traced corpus has few of: indexing with its dimension numbers, iota,
/// concatenation, padding, batched products, the integer types.
const INLINE_SEEDS: &[&str] = &[
    "func @gather(%0: f32[4,3], %1: i32[5]) -> (f32[5,3]) {
  %2 = gather %0, %1, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1,3] : f32[5,3]
  return %2
}",
    "func @scatter(%0: f32[4,3], %1: i32[5], %2: f32[5,3]) -> (f32[4,3], f32[4,3]) {
  %3 = scatter_add %0, %1, %2, update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1 : f32[4,3]
  %4 = scatter %3, %1, %2, update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1 : f32[4,3]
  return %3, %4
}",
    "func @gather2(%0: i64[5,6], %1: i32[3,2]) -> (i64[3,2,2]) {
  %2 = gather %0, %1, offset_dims=[1,2], start_index_map=[0,1], index_vector_dim=1, slice_sizes=[2,2] : i64[3,2,2]
  return %2
}",
    "func @batched(%0: f32[2,3,4], %1: i32[2,3]) -> (f32[2,3]) {
  %2 = gather %0, %1, collapsed_slice_dims=[2], operand_batching_dims=[0,1], start_indices_batching_dims=[0,1], start_index_map=[2], index_vector_dim=2, slice_sizes=[1,1,1] : f32[2,3]
  return %2
}",
    "func @scatter_max(%0: i32[6], %1: i32[4,1], %2: i32[4]) -> (i32[6]) {
  %3 = scatter_max %0, %1, %2, inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1 : i32[6]
  return %3
}",
    "func @movement(%0: f32[3,4], %1: f32[]) -> (f32[9,5], f32[2,2], f32[4,3], f32[6,4]) {
  %2 = pad %0, %1, low=[1,-1], high=[2,0], interior=[1,1] : f32[9,6]
  %3 = slice %2, start=[0,1], limit=[9,6], strides=[1,1] : f32[9,5]
  %4 = slice %0, start=[0,1], limit=[3,4], strides=[2,2] : f32[2,2]
  %5 = transpose %0, perm=[1,0] : f32[4,3]
  %6 = concatenate %0, %0, axis=0 : f32[6,4]
  return %3, %4, %5, %6
}",
    "func @iota(%0: i32[2,3]) -> (i32[2,3], u8[2,3], f32[3], i64[6]) {
  %1 = iota dim=1 : i32[2,3]
  %2 = add %0, %1 : i32[2,3]
  %3 = convert %2 : u8[2,3]
  %4 = iota dim=0 : f32[3]
  %5 = reshape %2 : i32[6]
  %6 = convert %5 : i64[6]
  %7 = mul %6, %6 : i64[6]
  return %2, %3, %4, %7
}",
    "func @dots(%0: f32[2,3,4], %1: f32[2,4,5], %2: i32[3,4]) -> (f32[2,3,5], i32[4,4], f32[2,2]) {
  %3 = dot_general %0, %1, batch=[0]x[0], contract=[2]x[1] : f32[2,3,5]
  %4 = dot_general %2, %2, contract=[0]x[0] : i32[4,4]
  %5 = dot_general %0, %0, contract=[1,2]x[1,2] : f32[2,2]
  return %3, %4, %5
}",
    "func @reduce(%0: f64[3,4,5], %1: bool[3,4]) -> (f64[4], f64[3,5], bool[3], f64[3,4,5]) {
  %2 = reduce_sum %0, axes=[0,2] : f64[4]
  %3 = reduce_prod %0, axes=[1] : f64[3,5]
  %4 = reduce_max %1, axes=[1] : bool[3]
  %5 = reduce_min %0, axes=[] : f64[3,4,5]
  return %2, %3, %4, %5
}",
    "func @dynamic(%0: f32[5,4], %1: i32[], %2: i32[], %3: f32[2,2]) -> (f32[2,3], f32[5,4]) {
  %4 = dynamic_slice %0, %1, %2 : f32[2,3]
  %5 = dynamic_update_slice %0, %3, %2, %1 : f32[5,4]
  return %4, %5
}",
    "func @broadcasts(%0: f32[3], %1: f32[], %2: bool[3,3]) -> (f32[3,3], f32[3,3]) {
  %3 = broadcast_in_dim %0, dims=[1] : f32[3,3]
  %4 = broadcast_in_dim %1, dims=[] : f32[3,3]
  %5 = select %2, %3, %4 : f32[3,3]
  %6 = clamp %1, %5, %1 : f32[3,3]
  %7 = broadcast_in_dim %0, dims=[0] : f32[3,3]
  %8 = rem %6, %7 : f32[3,3]
  return %5, %8
}",
    "func @ints(%0: i64[2,3,4], %1: u8[4], %2: bool[2,3,4]) -> (i64[4,2,3], u8[4], bool[2,3,4], i64[2,3,4], u8[6], i64[3]) {
  %3 = transpose %0, perm=[2,0,1] : i64[4,2,3]
  %4 = mul %1, %1 : u8[4]
  %5 = not %2 : bool[2,3,4]
  %6 = convert %2 : i64[2,3,4]
  %7 = add %0, %6 : i64[2,3,4]
  %8 = constant 7 : u8[]
  %9 = pad %4, %8, low=[1], high=[-1], interior=[0] : u8[4]
  %10 = concatenate %9, %4, %9, axis=0 : u8[12]
  %11 = slice %10, start=[1], limit=[12], strides=[2] : u8[6]
  %12 = reduce_sum %7, axes=[0,2] : i64[3]
  %13 = xor %5, %2 : bool[2,3,4]
  return %3, %4, %13, %7, %11, %12
}",
    "func @rank5(%0: f32[2,1,3,1,2], %1: f16[3,2]) -> (f32[2,2,1,3,1], f32[2,3,2], f16[2,3], f16[3,2,2]) {
  %2 = transpose %0, perm=[4,0,3,2,1] : f32[2,2,1,3,1]
  %3 = reshape %0 : f32[2,3,2]
  %4 = transpose %1, perm=[1,0] : f16[2,3]
  %5 = broadcast_in_dim %1, dims=[0,1] : f16[3,2,2]
  return %2, %3, %4, %5
}",
    "func @scatter_batched(%0: f32[2,5,3], %1: i64[2,4,1], %2: f32[2,4,3]) -> (f32[2,5,3]) {
  %3 = scatter_mul %0, %1, %2, update_window_dims=[2], inserted_window_dims=[1], input_batching_dims=[0], scatter_indices_batching_dims=[0], scatter_dims_to_operand_dims=[1], index_vector_dim=2 : f32[2,5,3]
  return %3
}",
    "func @gather_u8(%0: bf16[6,2], %1: u8[3,1]) -> (bf16[3,2], bf16[6,2]) {
  %2 = gather %0, %1, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1,2] : bf16[3,2]
  %3 = scatter_min %0, %1, %2, update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1 : bf16[6,2]
  return %2, %3
}",
    "func @dyn64(%0: f64[6,5], %1: i64[], %2: u8[], %3: f64[2,5]) -> (f64[3,2], f64[6,5]) {
  %4 = convert %2 : i64[]
  %5 = dynamic_slice %0, %1, %4 : f64[3,2]
  %6 = dynamic_update_slice %0, %3, %4, %1 : f64[6,5]
  return %5, %6
}",
    "func @intdot(%0: i64[3,4], %1: u8[4,2], %2: i32[2,3,4]) -> (i64[3,3], u8[2,2], i32[2,3,3]) {
  %3 = dot_general %0, %0, contract=[1]x[1] : i64[3,3]
  %4 = dot_general %1, %1, contract=[0]x[0] : u8[2,2]
  %5 = dot_general %2, %2, batch=[0]x[0], contract=[2]x[2] : i32[2,3,3]
  return %3, %4, %5
}",
    "func @rows(%0: f32[4,300], %1: f32[300]) -> (f32[4,300], f32[4], f32[300]) {
  %2 = broadcast_in_dim %1, dims=[1] : f32[4,300]
  %3 = add %0, %2 : f32[4,300]
  %4 = reduce_max %3, axes=[1] : f32[4]
  %5 = broadcast_in_dim %4, dims=[0] : f32[4,300]
  %6 = sub %3, %5 : f32[4,300]
  %7 = exp %6 : f32[4,300]
  %8 = reduce_sum %7, axes=[1] : f32[4]
  %9 = reduce_sum %7, axes=[0] : f32[300]
  return %7, %8, %9
}",
];

/// The seed programs' texts: every program the other suites run, then each of them with its
/// large sizes shrunk (so the benchmark workloads run at all), then the inline seeds.
pub fn seeds() -> Vec<String> {
    use common::fusion::{random_fusion_program, Mix};
    let mut funcs: Vec<Func> = Vec::new();
    funcs.extend(common::corpus().into_iter().map(|(_, f)| f));
    funcs.extend(common::gradient_programs().into_iter().map(|(_, f)| f));
    funcs.extend(common::benchmark_programs().into_iter().map(|(_, f)| f));
    let mut texts: Vec<String> = funcs.iter().map(|f| f.to_string()).collect();
    let dtypes = ["f32", "f64", "f16", "bf16"];
    for seed in 0..12u64 {
        let dtype = dtypes[seed as usize % dtypes.len()];
        let shape = [(8, 3), (5, 64), (3, 0), (1, 1)][seed as usize / 4 % 4];
        let mix = Mix {
            f64_transcendentals: true,
            row_passes: seed % 2 == 1,
        };
        texts.push(random_fusion_program(seed, dtype, shape, mix));
    }
    for seed in 0..4u64 {
        texts.push(common::fusion::tail_case(seed * 13, true).1);
    }
    let shrunk: Vec<String> = texts
        .iter()
        .map(|t| shrink(t))
        .filter(|t| parse_func(t).is_ok())
        .collect();
    texts.extend(shrunk);
    texts.extend(INLINE_SEEDS.iter().map(|s| s.to_string()));
    texts.retain(|t| parse_func(t).is_ok_and(|f| verify(&f).is_ok()));
    texts.sort();
    texts.dedup();
    texts
}

/// `text` with each integer of 64 or more replaced by a small one (the same for the same
/// number, so that shapes stay consistent where only sizes, not their products, recur).
fn shrink(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let sites = number_sites(text);
    let mut at = 0;
    for s in &sites {
        out.push_str(&text[at..s.start]);
        let word = &text[s.start..s.end];
        match word.parse::<u64>() {
            Ok(n) if n >= 64 && s.kind != Site::Literal => {
                out.push_str(&(2 + n % 7).to_string());
            }
            _ => out.push_str(word),
        }
        at = s.end;
    }
    out.push_str(&text[at..]);
    out
}
