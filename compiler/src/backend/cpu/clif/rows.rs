//! Row kernels: for each row of `start..end`, the row stages (scalar code, once per row) and
//! the passes over the row's columns (vectors of LANES columns interleaved [`ROW_COPIES`] to a
//! step, then single columns) whose reductions give the next stages their row values.

use super::consts::{ConstPool, Consts};
use super::host::HostFuncs;
use super::isel::{clif_type, emit_op, lanes, value_type};
use super::memory::{kernel_dtype, load_elements, store_elements};
use super::reduce::{positive_zeros, reduce_step, vector_reduce_step};
use super::vector::element_index;
use super::{CodegenError, LANES};
use crate::kernel::{Access, KOp, Kernel, Rows, Stage};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::{FunctionBuilder, Variable};
use ferrax_ir::{DType, ReduceOp};
use std::collections::HashMap;

/// Vectors a row kernel's pass loop computes per step, interleaved as in flat kernels
/// (`flat::FLAT_COPIES`), each with its own accumulators to hide their latency; eight spill.
const ROW_COPIES: usize = 4;

/// The row kernel's code: for each row of `start..end`, the row stages and pass loops in order.
pub(super) fn build_rows(
    b: &mut FunctionBuilder,
    kernel: &Kernel,
    r: &Rows,
    ptr: Type,
    funcs: &HostFuncs,
    simd: bool,
    pool: &mut ConstPool,
) -> Result<(), CodegenError> {
    let unsupported = |what: String| CodegenError::Unsupported {
        kernel: kernel.name.clone(),
        what,
    };
    let flags = MemFlagsData::trusted();
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (args, start, end) = {
        let p = b.block_params(entry);
        (p[0], p[1], p[2])
    };
    let mut bases = Vec::with_capacity(kernel.sig.buffers.len());
    for k in 0..kernel.sig.buffers.len() {
        let offset = i32::try_from(k * ptr.bytes() as usize)
            .map_err(|_| unsupported("argument offset".into()))?;
        bases.push(b.ins().load(ptr, flags, args, offset));
    }
    let table = pool.address(b, ptr);
    let mut consts = Consts::new(pool, table);
    let row_var = b.declare_var(types::I64);
    b.def_var(row_var, start);
    let head = b.create_block();
    let row_block = b.create_block();
    let exit = b.create_block();
    b.ins().jump(head, &[]);
    b.switch_to_block(head);
    let row = b.use_var(row_var);
    let more = b.ins().icmp(IntCC::SignedLessThan, row, end);
    b.ins().brif(more, row_block, &[], exit, &[]);
    b.switch_to_block(row_block);
    // Per-element buffers are addressed from the row's first element, so that a column's
    // address is one x86 addressing mode.
    let row_start = b.ins().imul_imm_s(row, r.cols as i64);
    let row_bases: Vec<Value> = kernel
        .sig
        .buffers
        .iter()
        .zip(&bases)
        .map(|(buffer, &base)| match buffer.access {
            Access::Each => {
                let shift = i64::from(buffer.dtype.size_bytes().trailing_zeros());
                let offset = b.ins().ishl_imm_u(row_start, shift);
                b.ins().iadd(base, offset)
            }
            _ => base,
        })
        .collect();
    let mut rc = RowCode {
        kernel,
        r,
        bases: &bases,
        row_bases: &row_bases,
        funcs,
        unsupported: &unsupported,
        row,
        values: HashMap::new(),
    };
    for pass in 0..=r.passes {
        for k in 0..kernel.body.len() {
            if r.stages[k] == Stage::Row(pass) && !matches!(kernel.body[k].op, KOp::Reduce(_)) {
                let v = rc.row_instr(b, k)?;
                rc.values.insert(k, v);
            }
        }
        if pass < r.passes {
            rc.pass(b, pass, simd, &mut consts)?;
        }
    }
    let next = b.ins().iadd_imm_s(row, 1);
    b.def_var(row_var, next);
    b.ins().jump(head, &[]);
    b.switch_to_block(exit);
    b.ins().return_(&[]);
    b.seal_all_blocks();
    Ok(())
}

/// The state of one row's code: the row's values (row stages, reductions) by kernel value.
struct RowCode<'a> {
    kernel: &'a Kernel,
    r: &'a Rows,
    bases: &'a [Value],
    /// Each buffer's base, moved to the row's first element for per-element buffers.
    row_bases: &'a [Value],
    funcs: &'a HostFuncs,
    unsupported: &'a dyn Fn(String) -> CodegenError,
    row: Value,
    values: HashMap<usize, Value>,
}

/// A reduction's accumulators in a row kernel pass: `copies` vectors (SIMD), with, for max,
/// the unsigned minimum of each vector lane's bit patterns (see [`positive_zeros`]), and a
/// scalar for the columns past the last whole vector.
struct Accumulator {
    vecs: Vec<Variable>,
    seen: Vec<Variable>,
    scalar: Variable,
}

impl Accumulator {
    /// The accumulators of reduction `op` of `dtype` values, `copies` of them vectors, all
    /// holding the reduction's identity.
    fn new(b: &mut FunctionBuilder, op: ReduceOp, dtype: DType, copies: usize) -> Accumulator {
        let id = op.identity(DType::F64).to_f64();
        let init = if dtype == DType::F32 {
            b.ins().f32const(id as f32)
        } else {
            b.ins().f64const(id)
        };
        let scalar = b.declare_var(b.func.dfg.value_type(init));
        b.def_var(scalar, init);
        let (mut vecs, mut seen) = (Vec::new(), Vec::new());
        for _ in 0..copies {
            let v = b.ins().splat(types::F32X4, init);
            let var = b.declare_var(types::F32X4);
            b.def_var(var, v);
            vecs.push(var);
            if op == ReduceOp::Max {
                let all = b.ins().iconst(types::I32, -1);
                let v = b.ins().splat(types::I32X4, all);
                let var = b.declare_var(types::I32X4);
                b.def_var(var, v);
                seen.push(var);
            }
        }
        Accumulator { vecs, seen, scalar }
    }

    /// Column `u`'s value `x` (a vector when `vector`) folded into reduction `op`: into vector
    /// copy `u` (modulo the copies), else into the scalar.
    fn fold(&self, b: &mut FunctionBuilder, op: ReduceOp, u: usize, x: Value, vector: bool) {
        if !vector {
            let sum = b.use_var(self.scalar);
            let next = reduce_step(b, op, sum, x);
            b.def_var(self.scalar, next);
            return;
        }
        let copy = u % self.vecs.len();
        let var = self.vecs[copy];
        let old = b.use_var(var);
        let next = vector_reduce_step(b, op, old, x);
        b.def_var(var, next);
        if let Some(&seen) = self.seen.get(copy) {
            let old = b.use_var(seen);
            let bits = b.ins().bitcast(types::I32X4, lanes(), x);
            let next = b.ins().umin(old, bits);
            b.def_var(seen, next);
        }
    }
}

/// What one pass of a row kernel computes per column: its element instructions, the
/// reductions they feed with their accumulators (vector copies and a scalar), and the row
/// values splatted for the vector loop.
struct PassPlan {
    elems: Vec<usize>,
    reductions: Vec<(usize, ReduceOp)>,
    accs: Vec<Accumulator>,
    splats: HashMap<usize, Value>,
}

impl RowCode<'_> {
    /// The address of `buffer`'s element at column `col` of the row, or (`None`, in row
    /// stages) of the row's own element.
    fn address(&self, b: &mut FunctionBuilder, buffer: usize, col: Option<Value>) -> Value {
        let kernel = self.kernel;
        let size = kernel.sig.buffers[buffer].dtype.size_bytes();
        let (base, index) = match (kernel.sig.buffers[buffer].access, col) {
            (Access::Scalar, _) => return self.bases[buffer],
            (Access::Outer(_), _) | (_, None) => (self.bases[buffer], self.row),
            (Access::Inner(_), Some(c)) => (self.bases[buffer], c),
            (Access::Each, Some(c)) => (self.row_bases[buffer], c),
            // Fusion keeps gathers out of row kernels (`fuse::row_role`).
            (Access::Gather { .. }, Some(_)) => unreachable!("a gather in a row kernel"),
            (Access::Window { .. }, Some(_)) => unreachable!("a window in a row kernel"),
        };
        let offset = b.ins().ishl_imm_u(index, i64::from(size.trailing_zeros()));
        b.ins().iadd(base, offset)
    }

    /// A row-stage instruction (scalar code, run once per row).
    fn row_instr(&mut self, b: &mut FunctionBuilder, k: usize) -> Result<Value, CodegenError> {
        let ins = &self.kernel.body[k];
        let flags = MemFlagsData::trusted();
        let ty = clif_type(ins.dtype)
            .ok_or_else(|| (self.unsupported)(format!("dtype {}", ins.dtype)))?;
        Ok(match &ins.op {
            KOp::Load(buffer) => {
                let addr = self.address(b, *buffer, None);
                load_elements(b, kernel_dtype(self.kernel, *buffer), ty, flags, addr)
            }
            KOp::Store(buffer) => {
                let x = self.values[&ins.args[0]];
                let addr = self.address(b, *buffer, None);
                store_elements(b, kernel_dtype(self.kernel, *buffer), flags, x, addr);
                x
            }
            // An index that is the same across the row: of the row's first element.
            KOp::Index { stride, size } => {
                let per_row = stride / self.r.cols;
                element_index(b, self.row, (per_row, *size), self.r.rows, None)
            }
            _ => {
                let args: Vec<Value> = ins.args.iter().map(|a| self.values[a]).collect();
                emit_op(b, ins, &args, false, self.funcs, self.unsupported)?
            }
        })
    }

    /// Row value `v` as a vector of LANES copies (a bool becomes a lane mask).
    fn splat(
        &self,
        b: &mut FunctionBuilder,
        v: Value,
        dtype: DType,
    ) -> Result<Value, CodegenError> {
        let ty = value_type(dtype, true)
            .ok_or_else(|| (self.unsupported)(format!("vector of {dtype}")))?;
        Ok(if dtype == DType::Bool {
            let wide = b.ins().uextend(types::I32, v);
            let mask = b.ins().ineg(wide);
            b.ins().splat(ty, mask)
        } else {
            b.ins().splat(ty, v)
        })
    }

    /// The loop of pass `pass` over the row, and the results of its reductions.
    fn pass(
        &mut self,
        b: &mut FunctionBuilder,
        pass: usize,
        simd: bool,
        consts: &mut Consts,
    ) -> Result<(), CodegenError> {
        let plan = self.plan(b, pass, simd)?;
        self.columns(b, &plan, simd, consts)?;
        self.totals(b, &plan);
        Ok(())
    }

    /// What pass `pass` computes per column, with the row values it reads splatted (SIMD) and
    /// its accumulators set to their reductions' identities.
    fn plan(
        &self,
        b: &mut FunctionBuilder,
        pass: usize,
        simd: bool,
    ) -> Result<PassPlan, CodegenError> {
        let body = &self.kernel.body;
        let stages = &self.r.stages;
        let elems: Vec<usize> = (0..body.len())
            .filter(|&k| stages[k] == Stage::Elem(pass))
            .collect();
        let reductions: Vec<(usize, ReduceOp)> = (0..body.len())
            .filter(|&k| stages[k] == Stage::Row(pass + 1))
            .filter_map(|k| match body[k].op {
                KOp::Reduce(op) => Some((k, op)),
                _ => None,
            })
            .collect();
        // Row values the loop reads, splatted once.
        let mut splats = HashMap::new();
        if simd {
            let used = elems
                .iter()
                .chain(reductions.iter().map(|(k, _)| k))
                .flat_map(|&k| body[k].args.iter().copied());
            for a in used {
                let constant = matches!(body[a].op, KOp::Const(_));
                if let (Stage::Row(_), false, std::collections::hash_map::Entry::Vacant(e)) =
                    (stages[a], constant, splats.entry(a))
                {
                    e.insert(self.splat(b, self.values[&a], body[a].dtype)?);
                }
            }
        }
        let copies = if simd { ROW_COPIES } else { 0 };
        let accs = reductions
            .iter()
            .map(|&(k, op)| Accumulator::new(b, op, body[k].dtype, copies))
            .collect();
        Ok(PassPlan {
            elems,
            reductions,
            accs,
            splats,
        })
    }

    /// The pass's loops over the row's columns: the main loop, `ROW_COPIES` vectors (or one
    /// column) a step; then (SIMD) the whole vectors left, and the columns past them one by one.
    fn columns(
        &self,
        b: &mut FunctionBuilder,
        plan: &PassPlan,
        simd: bool,
        consts: &mut Consts,
    ) -> Result<(), CodegenError> {
        let cols = self.r.cols as i64;
        let copies = if simd { ROW_COPIES } else { 1 };
        let vectors = if simd { cols / LANES } else { 0 };
        // The main loop: `copies` vectors (or one scalar) per step.
        let step = if simd { LANES * copies as i64 } else { 1 };
        let (main_end, loop_copies) = if simd {
            (vectors / copies as i64 * step, copies)
        } else {
            (cols, 1)
        };
        if main_end > 0 {
            let col_var = b.declare_var(types::I64);
            let zero = b.ins().iconst(types::I64, 0);
            b.def_var(col_var, zero);
            let body_block = b.create_block();
            let after = b.create_block();
            b.ins().jump(body_block, &[]);
            b.switch_to_block(body_block);
            let col = b.use_var(col_var);
            let at: Vec<Value> = (0..loop_copies)
                .map(|u| match u {
                    0 => col,
                    _ => b.ins().iadd_imm_s(col, u as i64 * LANES),
                })
                .collect();
            let vector = simd.then_some(&mut *consts);
            self.elements(b, plan, &at, vector)?;
            let next = b.ins().iadd_imm_s(col, step);
            b.def_var(col_var, next);
            let again = b.ins().icmp_imm_s(IntCC::SignedLessThan, next, main_end);
            b.ins().brif(again, body_block, &[], after, &[]);
            b.switch_to_block(after);
        }
        if simd {
            // Whole vectors after the unrolled loop, then single elements.
            let at: Vec<Value> = (main_end / LANES..vectors)
                .map(|v| b.ins().iconst(types::I64, v * LANES))
                .collect();
            if !at.is_empty() {
                let vector = Some(&mut *consts);
                self.elements(b, plan, &at, vector)?;
            }
            for col in vectors * LANES..cols {
                let c = b.ins().iconst(types::I64, col);
                self.elements(b, plan, &[c], None)?;
            }
        }
        Ok(())
    }

    /// Each reduction's result, a row value: its vector accumulators combined pairwise, their
    /// lanes, and the scalar accumulator.
    fn totals(&mut self, b: &mut FunctionBuilder, plan: &PassPlan) {
        for (&(k, op), acc) in plan.reductions.iter().zip(&plan.accs) {
            let mut total = b.use_var(acc.scalar);
            if !acc.vecs.is_empty() {
                let mut parts: Vec<Value> = acc.vecs.iter().map(|&v| b.use_var(v)).collect();
                for (part, &seen) in parts.iter_mut().zip(&acc.seen) {
                    let seen = b.use_var(seen);
                    *part = positive_zeros(b, *part, seen);
                }
                while parts.len() > 1 {
                    let mut pairs = Vec::with_capacity(parts.len().div_ceil(2));
                    for p in parts.chunks(2) {
                        pairs.push(if p.len() == 2 {
                            reduce_step(b, op, p[0], p[1])
                        } else {
                            p[0]
                        });
                    }
                    parts = pairs;
                }
                let lane = |b: &mut FunctionBuilder, l: u8| b.ins().extractlane(parts[0], l);
                let (l0, l1, l2, l3) = (lane(b, 0), lane(b, 1), lane(b, 2), lane(b, 3));
                let low = reduce_step(b, op, l0, l1);
                let high = reduce_step(b, op, l2, l3);
                let lanes = reduce_step(b, op, low, high);
                total = reduce_step(b, op, lanes, total);
            }
            self.values.insert(k, total);
        }
    }

    /// A pass's element stage at columns `at` (vectors of LANES columns when `consts` is
    /// given, else single columns), each instruction emitted for every column in turn, and
    /// column `u`'s values folded into accumulator copy `u` of each reduction.
    fn elements(
        &self,
        b: &mut FunctionBuilder,
        plan: &PassPlan,
        at: &[Value],
        mut consts: Option<&mut Consts>,
    ) -> Result<(), CodegenError> {
        let kernel = self.kernel;
        let PassPlan {
            elems,
            reductions,
            accs,
            splats,
        } = plan;
        let vector = consts.is_some();
        let flags = if vector {
            MemFlagsData::new().with_notrap()
        } else {
            MemFlagsData::trusted()
        };
        let mut local = HashMap::new();
        // Vector constants load at their use, one load shared by the copies and by uses at
        // most two steps later (as in flat kernels, see `flat::Body`).
        let mut loaded: HashMap<usize, (usize, Value)> = HashMap::new();
        let mut value =
            |b: &mut FunctionBuilder,
             local: &HashMap<(usize, usize), Value>,
             consts: &mut Option<&mut Consts>,
             step: usize,
             a,
             u| match (local.get(&(a, u)), consts, &kernel.body[a].op) {
                (Some(&v), _, _) => v,
                (None, Some(consts), KOp::Const(x)) => match loaded.get(&a) {
                    Some(&(when, v)) if step - when <= 2 => v,
                    _ => {
                        let v = consts.vector(b, *x).one();
                        loaded.insert(a, (step, v));
                        v
                    }
                },
                (None, Some(_), _) => splats[&a],
                (None, None, _) => self.values[&a],
            };
        for (step, &k) in elems.iter().enumerate() {
            let ins = &kernel.body[k];
            if vector && matches!(ins.op, KOp::Const(_)) {
                continue;
            }
            for (u, &col) in at.iter().enumerate() {
                let v = match &ins.op {
                    KOp::Index { stride, size } => {
                        let vector = vector.then_some(types::I32X4);
                        element_index(b, col, (*stride, *size), self.r.cols, vector)
                    }
                    KOp::Load(buffer) => {
                        let ty = value_type(ins.dtype, vector)
                            .ok_or_else(|| (self.unsupported)(format!("dtype {}", ins.dtype)))?;
                        let addr = self.address(b, *buffer, Some(col));
                        load_elements(b, kernel_dtype(kernel, *buffer), ty, flags, addr)
                    }
                    KOp::Store(buffer) => {
                        let x = value(b, &local, &mut consts, step, ins.args[0], u);
                        let addr = self.address(b, *buffer, Some(col));
                        store_elements(b, kernel_dtype(kernel, *buffer), flags, x, addr);
                        x
                    }
                    _ => {
                        let args: Vec<Value> = ins
                            .args
                            .iter()
                            .map(|&a| value(b, &local, &mut consts, step, a, u))
                            .collect();
                        emit_op(b, ins, &args, vector, self.funcs, self.unsupported)?
                    }
                };
                local.insert((k, u), v);
            }
        }
        for (&(k, op), acc) in reductions.iter().zip(accs) {
            for u in 0..at.len() {
                let x = value(
                    b,
                    &local,
                    &mut consts,
                    elems.len(),
                    kernel.body[k].args[0],
                    u,
                );
                acc.fold(b, op, u, x, vector);
            }
        }
        Ok(())
    }
}
