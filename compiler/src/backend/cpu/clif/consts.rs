//! Vector constants, read from a table at each use rather than splatted into registers: the
//! kernels run without Cranelift's mid-end, and a constant held in a register across a long
//! vector body would spill.

use super::isel::Val;
use cranelift_codegen::ir::{types, GlobalValue, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;
use cranelift_module::DataDescription;
use ferrax_ir::Scalar;
use std::collections::HashMap;

/// The vector constants of a kernel, in a read-only table of 16-byte entries, one per value:
/// each use (with the interleaved copies of its instruction) loads its entry, one instruction
/// where a splat is two, and no register holds a constant across a long body.
pub(super) struct ConstPool {
    table: GlobalValue,
    bytes: Vec<u8>,
    offsets: HashMap<[u8; 16], i32>,
}

impl ConstPool {
    /// An empty pool whose table is `table` in the function being built.
    pub(super) fn new(table: GlobalValue) -> ConstPool {
        ConstPool {
            table,
            bytes: Vec::new(),
            offsets: HashMap::new(),
        }
    }

    /// The table's address, a pointer of type `ptr`.
    pub(super) fn address(&self, b: &mut FunctionBuilder, ptr: Type) -> Value {
        b.ins().symbol_value(ptr, self.table)
    }

    /// The table's bytes.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The table's contents, for the module's data object.
    pub(super) fn into_data(self) -> DataDescription {
        let mut table = DataDescription::new();
        table.define(self.bytes.into_boxed_slice());
        table.set_align(16);
        table
    }
}

/// A [`ConstPool`] and its address in the function being built.
pub(super) struct Consts<'a> {
    pool: &'a mut ConstPool,
    base: Value,
}

impl Consts<'_> {
    /// `pool`, whose table is at `base` ([`ConstPool::address`]).
    pub(super) fn new(pool: &mut ConstPool, base: Value) -> Consts<'_> {
        Consts { pool, base }
    }

    /// `x` in every lane: an f64 or i64 fills both halves of a vector of such values, and a
    /// bool is a lane mask.
    pub(super) fn vector(&mut self, b: &mut FunctionBuilder, x: Scalar) -> Val {
        let (ty, lane): (Type, Vec<u8>) = match x {
            Scalar::F32(v) => (types::F32X4, v.to_le_bytes().to_vec()),
            Scalar::F64(v) => (types::F64X2, v.to_le_bytes().to_vec()),
            Scalar::I32(v) => (types::I32X4, v.to_le_bytes().to_vec()),
            Scalar::U32(v) => (types::I32X4, v.to_le_bytes().to_vec()),
            Scalar::I64(v) => (types::I64X2, v.to_le_bytes().to_vec()),
            Scalar::Bool(v) => (types::I32X4, (-i32::from(v)).to_le_bytes().to_vec()),
            _ => (types::I64X2, 0i64.to_le_bytes().to_vec()),
        };
        let entry: [u8; 16] = std::array::from_fn(|i| lane[i % lane.len()]);
        let pool = &mut *self.pool;
        let offset = *pool.offsets.entry(entry).or_insert_with(|| {
            pool.bytes.extend(entry);
            i32::try_from(pool.bytes.len() - 16).unwrap_or(i32::MAX)
        });
        let flags = MemFlagsData::trusted().with_readonly();
        let v = b.ins().load(ty, flags, self.base, offset);
        if ty == types::F64X2 || ty == types::I64X2 {
            Val::Halves(v, v)
        } else {
            Val::One(v)
        }
    }
}
