//! The host functions compiled kernels call, by the names they link them by: what generated
//! code cannot compute itself, or must compute as the interpreter does (f64 transcendentals,
//! pow, rem). They live here, beside the loader, so that code loaded from an artifact finds
//! them without the compiler.

use ferrax_ir::UnaryOp;

extern "C" fn wide_unary(code: i32, x: f64) -> f64 {
    let op = usize::try_from(code)
        .ok()
        .and_then(|c| UnaryOp::ALL.get(c).copied());
    match op.and_then(ferrax_runtime::wide_unary) {
        Some(f) => f(x),
        None => f64::NAN,
    }
}

extern "C" fn pow_f64(a: f64, b: f64) -> f64 {
    a.powf(b)
}

extern "C" fn rem_f32(a: f32, b: f32) -> f32 {
    a % b
}

extern "C" fn rem_f64(a: f64, b: f64) -> f64 {
    a % b
}

/// The names kernels call the host functions by: `(code of a unary op in UnaryOp::ALL, x)`
/// → the interpreter's f64 function of it; f64 pow; f32 and f64 rem.
pub const HOST_NAMES: [&str; 4] = [
    "ferrax_wide_unary",
    "ferrax_pow_f64",
    "ferrax_rem_f32",
    "ferrax_rem_f64",
];

/// The address of host function `name`, as kernels link it.
pub fn host_symbol(name: &str) -> Option<usize> {
    let address = match name {
        "ferrax_wide_unary" => wide_unary as *const u8,
        "ferrax_pow_f64" => pow_f64 as *const u8,
        "ferrax_rem_f32" => rem_f32 as *const u8,
        "ferrax_rem_f64" => rem_f64 as *const u8,
        _ => return None,
    };
    Some(address as usize)
}
