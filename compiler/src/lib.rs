//! ferrax's compiler: IR→IR transformations (autodiff, egg simplification) and backends
//! (fusion, kernel IR, Cranelift and PTX codegen). Passes land here in turn; until then `jit`
//! runs verified IR through the reference interpreter in `ferrax-runtime`.
