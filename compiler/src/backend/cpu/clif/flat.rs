//! Flat kernels: one loop over elements `start..end`, groups of [`FLAT_COPIES`] interleaved
//! vectors first when the kernel vectorizes, then a scalar tail. Broadcast buffers are indexed
//! by positions the loop steps, so that no division runs per element.

use super::consts::{ConstPool, Consts};
use super::host::HostFuncs;
use super::isel::{clif_type, emit_val, value_type, Val};
use super::memory::{kernel_dtype, load_elements, load_mask, store_elements, store_mask};
use super::reduce::reduce_step;
use super::vector::element_index;
use super::{CodegenError, LANES};
use crate::kernel::halves::is_half;
use crate::kernel::{Access, KInstr, KOp, Kernel, Role};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, BlockArg, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;
use ferrax_ir::{DType, Scalar, UnaryOp};
use std::collections::HashMap;

mod chunked;
pub(crate) use chunked::chunk_len;

/// Vectors a flat kernel's loop computes per step, their instructions interleaved so that each
/// vector's dependency chains overlap the others' and both FMA pipes stay busy; eight spill
/// the 16 vector registers in transcendental bodies. A power of two: the loop's bound is the
/// element count masked to a multiple of the step.
const FLAT_COPIES: usize = 4;
const _: () = assert!(FLAT_COPIES.is_power_of_two());

/// Kernel instructions (transcendentals expanded) past which a flat kernel computes one vector
/// per step: code generation costs per instruction emitted, and interleaved copies would
/// multiply a long kernel's compile time by five where they buy it a fraction of its speed.
const INTERLEAVED_BODY_LIMIT: usize = 256;

/// Elements per step of a flat kernel's vector loop. Launches start their parts at multiples
/// of it, so that a step lies within one row of every broadcast or gather whose row length
/// it divides.
pub(crate) const FLAT_STEP: usize = LANES as usize * FLAT_COPIES;

/// The flat kernel's code: the vector loop (with `simd`), then the scalar tail.
pub(super) fn build_flat(
    b: &mut FunctionBuilder,
    kernel: &Kernel,
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
    let body = b.create_block();
    let exit = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (args, start, end) = {
        let p = b.block_params(entry);
        (p[0], p[1], p[2])
    };
    // Buffer base pointers, and scalar inputs loaded once.
    let mut bases = Vec::with_capacity(kernel.sig.buffers.len());
    let mut scalars: Vec<Option<Value>> = Vec::with_capacity(kernel.sig.buffers.len());
    for (k, buffer) in kernel.sig.buffers.iter().enumerate() {
        let offset = i32::try_from(k * ptr.bytes() as usize)
            .map_err(|_| unsupported("argument offset".into()))?;
        let base = b.ins().load(ptr, flags, args, offset);
        bases.push(base);
        let scalar = if buffer.access == Access::Scalar && buffer.role == Role::Input {
            let ty = match buffer.dtype {
                d if is_half(d) => Some(types::I32),
                d => clif_type(d),
            }
            .ok_or_else(|| unsupported(format!("dtype {}", buffer.dtype)))?;
            Some(load_elements(b, buffer.dtype, ty, flags, base))
        } else {
            None
        };
        scalars.push(scalar);
    }
    let divisors = Divisors::of(kernel);
    let mem = Memory {
        divisors: &divisors,
        bases: &bases,
        scalars: &scalars,
    };
    let tail = b.create_block();
    if simd {
        // Groups of `copies` whole vectors from `start` (a multiple of LANES), then the scalar
        // tail.
        let copies = if kernel.body.len() > INTERLEAVED_BODY_LIMIT {
            1
        } else {
            FLAT_COPIES
        };
        let base = pool.address(b, ptr);
        // Whole chunks first where the kernel gathers rows; the loop below takes the rest.
        let start = match chunked::chunk_len(kernel) {
            Some(chunk) => {
                let mut consts = Consts::new(pool, base);
                let parts = (&mem, funcs);
                chunked::build_chunks(b, kernel, (start, end), (chunk, copies), parts, &mut consts)?
            }
            None => start,
        };
        let step = LANES * copies as i64;
        let vector = b.create_block();
        let count = b.ins().isub(end, start);
        let whole = b.ins().band_imm_s(count, -step);
        let vend = b.ins().iadd(start, whole);
        let any = b.ins().icmp(IntCC::SignedLessThan, start, vend);
        let first = divisors.at(b, start);
        b.ins()
            .brif(any, vector, &first.args(), tail, &[start.into()]);
        b.switch_to_block(vector);
        let first = divisors.params(b, vector);
        // Where every row length is a multiple of the step (which starts at a multiple of it),
        // the step's vectors share their rows: their positions are offsets in the row, and the
        // rows advance once per step.
        let one_row = divisors.0.iter().all(|&n| n.is_multiple_of(FLAT_STEP));
        let mut at = vec![first];
        for c in 1..copies {
            let next = if one_row {
                divisors.within_row(b, &at[0], c as i64 * LANES)
            } else {
                divisors.advance(b, &at[c - 1], LANES)
            };
            at.push(next);
        }
        let mut consts = Consts::new(pool, base);
        emit_body(b, kernel, &at, Some(&mut consts), &mem, funcs)?;
        let next = if one_row {
            divisors.advance(b, &at[0], step)
        } else {
            divisors.advance(b, &at[copies - 1], LANES)
        };
        let more = b.ins().icmp(IntCC::SignedLessThan, next.i, vend);
        b.ins()
            .brif(more, vector, &next.args(), tail, &[next.i.into()]);
    } else {
        b.ins().jump(tail, &[start.into()]);
    }
    b.switch_to_block(tail);
    let from = b.append_block_param(tail, types::I64);
    let any = b.ins().icmp(IntCC::SignedLessThan, from, end);
    let first = divisors.at(b, from);
    b.ins().brif(any, body, &first.args(), exit, &[]);
    b.switch_to_block(body);
    let at = divisors.params(b, body);
    emit_body(b, kernel, std::slice::from_ref(&at), None, &mem, funcs)?;
    let next = divisors.advance(b, &at, 1);
    let more = b.ins().icmp(IntCC::SignedLessThan, next.i, end);
    b.ins().brif(more, body, &next.args(), exit, &[]);
    b.switch_to_block(exit);
    b.ins().return_(&[]);
    b.seal_all_blocks();
    Ok(())
}

/// Where a flat kernel's buffers are: base pointers, scalar inputs loaded once, and the
/// divisors that index broadcasts.
struct Memory<'a> {
    divisors: &'a Divisors,
    bases: &'a [Value],
    scalars: &'a [Option<Value>],
}

/// The row lengths `n` by which a flat kernel's broadcast buffers are indexed (`i / n`, `i % n`).
/// Loops carry each element's row and column for every such `n` and step them, so that no
/// division runs per element.
struct Divisors(Vec<usize>);

/// Element `i` of a flat loop, with its row and column for each of the kernel's [`Divisors`],
/// and where a chunked loop knows them, the buffers' addresses ([`Direct`]).
struct Position {
    i: Value,
    rows_cols: Vec<(Value, Value)>,
    direct: Option<Direct>,
}

/// Buffer addresses a chunked loop advances (`None` for buffers read as scalars), and the
/// position's element offset from them: a buffer read a row at a time (`Access::Outer`) is at
/// its pointer, every other buffer `offset` elements on. Only [`Body::address`] reads a
/// position, and it reads these first: the element and rows of a position that has them are
/// its chunk's first.
struct Direct {
    pointers: Vec<Option<Value>>,
    offset: i64,
}

impl Position {
    fn args(&self) -> Vec<BlockArg> {
        std::iter::once(self.i)
            .chain(self.rows_cols.iter().flat_map(|&(r, c)| [r, c]))
            .map(BlockArg::from)
            .collect()
    }
}

impl Divisors {
    fn of(kernel: &Kernel) -> Divisors {
        let mut ns: Vec<usize> = kernel
            .sig
            .buffers
            .iter()
            .filter_map(|b| match b.access {
                Access::Outer(n) | Access::Inner(n) | Access::Gather { n, .. } => Some(n),
                Access::Each | Access::Scalar | Access::Window { .. } => None,
            })
            .collect();
        ns.sort_unstable();
        ns.dedup();
        Divisors(ns)
    }

    /// Element `i`'s position, by division (once per loop entry).
    fn at(&self, b: &mut FunctionBuilder, i: Value) -> Position {
        let rows_cols = self
            .0
            .iter()
            .map(|&n| {
                (
                    b.ins().udiv_imm_u(i, n as i64),
                    b.ins().urem_imm_u(i, n as i64),
                )
            })
            .collect();
        Position {
            i,
            rows_cols,
            direct: None,
        }
    }

    /// A position as the parameters of loop block `block`.
    fn params(&self, b: &mut FunctionBuilder, block: Block) -> Position {
        let i = b.append_block_param(block, types::I64);
        let rows_cols = self
            .0
            .iter()
            .map(|_| {
                (
                    b.append_block_param(block, types::I64),
                    b.append_block_param(block, types::I64),
                )
            })
            .collect();
        Position {
            i,
            rows_cols,
            direct: None,
        }
    }

    /// The position `k` elements on, in the same row for every divisor (the caller knows that
    /// no column wraps).
    fn within_row(&self, b: &mut FunctionBuilder, p: &Position, k: i64) -> Position {
        let i = b.ins().iadd_imm_s(p.i, k);
        let rows_cols = p
            .rows_cols
            .iter()
            .map(|&(row, col)| (row, b.ins().iadd_imm_s(col, k)))
            .collect();
        Position {
            i,
            rows_cols,
            direct: None,
        }
    }

    /// The position `k` elements on, `k` at most every divisor.
    fn advance(&self, b: &mut FunctionBuilder, p: &Position, k: i64) -> Position {
        let i = b.ins().iadd_imm_s(p.i, k);
        let rows_cols = self
            .0
            .iter()
            .zip(&p.rows_cols)
            .map(|(&n, &(row, col))| {
                let col = b.ins().iadd_imm_s(col, k);
                let wrap = b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, col, n as i64);
                let wrapped = b.ins().iadd_imm_s(col, -(n as i64));
                let col = b.ins().select(wrap, wrapped, col);
                let carry = b.ins().uextend(types::I64, wrap);
                (b.ins().iadd(row, carry), col)
            })
            .collect();
        Position {
            i,
            rows_cols,
            direct: None,
        }
    }

    /// The element index of buffer access `access` at `p` (`None` for a row length that is
    /// not one of the divisors).
    fn index(&self, p: &Position, access: Access) -> Option<Value> {
        let of = |n: usize| self.0.iter().position(|&m| m == n).map(|k| p.rows_cols[k]);
        match access {
            Access::Outer(n) => of(n).map(|rc| rc.0),
            // The column; the row comes from the index buffer (`Body::address`).
            Access::Inner(n) | Access::Gather { n, .. } => of(n).map(|rc| rc.1),
            Access::Each | Access::Scalar => Some(p.i),
            // `compile` refuses windows.
            Access::Window { .. } => None,
        }
    }
}

/// The kernel's body for elements `at` (one element each, or vectors of LANES elements at
/// multiples of LANES), each instruction emitted for every element in turn.
fn emit_body(
    b: &mut FunctionBuilder,
    kernel: &Kernel,
    at: &[Position],
    mut consts: Option<&mut Consts>,
    mem: &Memory,
    funcs: &HostFuncs,
) -> Result<(), CodegenError> {
    let unsupported = |what: String| CodegenError::Unsupported {
        kernel: kernel.name.clone(),
        what,
    };
    let mut body = Body::new(kernel, (mem, funcs), &unsupported, consts.is_some());
    for (k, ins) in kernel.body.iter().enumerate() {
        let ty = value_type(ins.dtype, body.vector)
            .ok_or_else(|| unsupported(format!("dtype {}", ins.dtype)))?;
        if let (KOp::Const(x), true) = (&ins.op, body.vector) {
            body.values.push(Vec::new());
            body.deferred.push(Some(*x));
            continue;
        }
        if let (KOp::Beyond(u), Some(table)) = (&ins.op, &mut consts) {
            let results = body.beyond_vectors(b, table, *u, ins, at.len());
            body.values.push(results);
            body.deferred.push(None);
            continue;
        }
        let mut copies = Vec::with_capacity(at.len());
        for (c, p) in at.iter().enumerate() {
            copies.push(body.copy(b, &mut consts, k, ty, p, c)?);
        }
        body.values.push(copies);
        body.deferred.push(None);
    }
    Ok(())
}

/// A flat kernel's body as it is emitted: the values of the instructions so far, one per
/// element (or vector) of the step.
///
/// A vector constant is loaded where it is used (see `ConstPool`), so that no register holds
/// it across the body. The interleaved copies of one instruction and uses a step or two apart
/// share one load: the register lives a few instructions, and a clamp's compare and select see
/// one value and become `maxps`/`minps`. (x86 could fold a load used once into its
/// instruction, but Cranelift folds almost none here, and a load per use and copy costs more
/// than the register it saves.)
struct Body<'a> {
    kernel: &'a Kernel,
    mem: &'a Memory<'a>,
    funcs: &'a HostFuncs,
    unsupported: &'a dyn Fn(String) -> CodegenError,
    vector: bool,
    values: Vec<Vec<Val>>,
    /// Per instruction, the constant of a vector kernel, loaded at its uses instead.
    deferred: Vec<Option<Scalar>>,
    /// The last load of each such constant, with the instruction it was loaded for.
    loaded: HashMap<usize, (usize, Val)>,
    /// The rows gathers read, by index buffer and row position: the vectors of a step that
    /// share a row share its index load.
    gathered: std::cell::RefCell<HashMap<(usize, Value), Value>>,
}

impl<'a> Body<'a> {
    fn new(
        kernel: &'a Kernel,
        (mem, funcs): (&'a Memory<'a>, &'a HostFuncs),
        unsupported: &'a dyn Fn(String) -> CodegenError,
        vector: bool,
    ) -> Body<'a> {
        Body {
            kernel,
            mem,
            funcs,
            unsupported,
            vector,
            values: Vec::with_capacity(kernel.body.len()),
            deferred: Vec::with_capacity(kernel.body.len()),
            loaded: HashMap::new(),
            gathered: Default::default(),
        }
    }

    /// Copy `c` (at `p`) of instruction `k`, of type `ty`: neither a constant nor a
    /// [`KOp::Beyond`] of a vector kernel.
    fn copy(
        &mut self,
        b: &mut FunctionBuilder,
        consts: &mut Option<&mut Consts>,
        k: usize,
        ty: Type,
        p: &Position,
        c: usize,
    ) -> Result<Val, CodegenError> {
        let kernel = self.kernel;
        let ins = &kernel.body[k];
        let vector = self.vector;
        // Vectors are only element-aligned.
        let flags = if vector {
            MemFlagsData::new().with_notrap()
        } else {
            MemFlagsData::trusted()
        };
        let v = match &ins.op {
            KOp::Load(buffer) => self.load(b, ins, *buffer, ty, p)?,
            KOp::Accumulate(buffer) => {
                let Role::Partial(op) = kernel.sig.buffers[*buffer].role else {
                    return Err((self.unsupported)(
                        "accumulating into a non-partial buffer".into(),
                    ));
                };
                let addr = self.address(b, p, *buffer)?;
                let x = self.operand(b, consts, k, ins.args[0], c).one();
                let acc = b.ins().load(ty, flags, addr, 0);
                // Cranelift's NaN-propagating max and min, which order -0 below +0.
                let combined = reduce_step(b, op, acc, x);
                b.ins().store(flags, combined, addr, 0);
                combined
            }
            KOp::Index { stride, size } => {
                let vector = self.vector.then_some(ty);
                element_index(b, p.i, (*stride, *size), self.kernel.len, vector)
            }
            KOp::Store(buffer) => {
                let addr = self.address(b, p, *buffer)?;
                let x = self.operand(b, consts, k, ins.args[0], c).one();
                if vector && ins.dtype == DType::Bool {
                    store_mask(b, x, addr);
                } else {
                    store_elements(b, kernel_dtype(kernel, *buffer), flags, x, addr);
                }
                x
            }
            _ => {
                let args: Vec<Val> = ins
                    .args
                    .iter()
                    .map(|&a| self.operand(b, consts, k, a, c))
                    .collect();
                return emit_val(b, ins, &args, vector, self.funcs, self.unsupported);
            }
        };
        Ok(Val::One(v))
    }

    /// Load `ins` from `buffer` at `p`, as a value of type `ty`.
    fn load(
        &self,
        b: &mut FunctionBuilder,
        ins: &KInstr,
        buffer: usize,
        ty: Type,
        p: &Position,
    ) -> Result<Value, CodegenError> {
        let kernel = self.kernel;
        let flags = MemFlagsData::trusted();
        let access = kernel.sig.buffers[buffer].access;
        Ok(match (self.mem.scalars[buffer], self.vector, access) {
            (Some(s), false, _) => s,
            (Some(s), true, _) => b.ins().splat(ty, s),
            (None, true, Access::Outer(_)) => {
                // All lanes share one row (`i` and `n` are multiples of LANES).
                let addr = self.address(b, p, buffer)?;
                let dtype = kernel_dtype(kernel, buffer);
                let x = load_elements(b, dtype, ty.lane_type(), flags, addr);
                b.ins().splat(ty, x)
            }
            (None, true, _) if ins.dtype == DType::Bool => {
                let addr = self.address(b, p, buffer)?;
                load_mask(b, addr)
            }
            (None, vector, _) => {
                let addr = self.address(b, p, buffer)?;
                // Vectors are only element-aligned.
                let flags = if vector {
                    MemFlagsData::new().with_notrap()
                } else {
                    flags
                };
                load_elements(b, kernel_dtype(kernel, buffer), ty, flags, addr)
            }
        })
    }

    /// The address of `buffer`'s element at `p`.
    fn address(
        &self,
        b: &mut FunctionBuilder,
        p: &Position,
        buffer: usize,
    ) -> Result<Value, CodegenError> {
        let buffer_of = &self.kernel.sig.buffers[buffer];
        let size = buffer_of.dtype.size_bytes();
        if let Some(d) = &p.direct {
            if let Some(pointer) = d.pointers[buffer] {
                return Ok(match buffer_of.access {
                    Access::Outer(_) => pointer,
                    Access::Each
                    | Access::Scalar
                    | Access::Inner(_)
                    | Access::Gather { .. }
                    | Access::Window { .. } => b.ins().iadd_imm_s(pointer, d.offset * size as i64),
                });
            }
        }
        let index = self
            .mem
            .divisors
            .index(p, buffer_of.access)
            .ok_or_else(|| (self.unsupported)("a broadcast without its row length".into()))?;
        let index = match buffer_of.access {
            Access::Gather {
                index: rows_of,
                n,
                rows,
            } => {
                let row = self.gathered_row(b, p, rows_of, rows)?;
                let start = b.ins().imul_imm_s(row, n as i64);
                b.ins().iadd(start, index)
            }
            Access::Each
            | Access::Scalar
            | Access::Outer(_)
            | Access::Inner(_)
            | Access::Window { .. } => index,
        };
        // A shift, which x64 folds into the address (element sizes are powers of two).
        let offset = b.ins().ishl_imm_u(index, i64::from(size.trailing_zeros()));
        Ok(b.ins().iadd(self.mem.bases[buffer], offset))
    }

    /// The row a gather reads at `p`: the index in buffer `index_buffer` (i32 or i64, read
    /// at `i / n`), clamped to `0..rows` as gather clamps.
    fn gathered_row(
        &self,
        b: &mut FunctionBuilder,
        p: &Position,
        index_buffer: usize,
        rows: usize,
    ) -> Result<Value, CodegenError> {
        let row_of = self
            .mem
            .divisors
            .index(p, self.kernel.sig.buffers[index_buffer].access);
        let known = row_of.and_then(|r| self.gathered.borrow().get(&(index_buffer, r)).copied());
        if let Some(row) = known {
            return Ok(row);
        }
        let addr = self.address(b, p, index_buffer)?;
        let flags = MemFlagsData::trusted();
        let raw = match self.kernel.sig.buffers[index_buffer].dtype {
            DType::I32 => {
                let v = b.ins().load(types::I32, flags, addr, 0);
                b.ins().sextend(types::I64, v)
            }
            DType::I64 => b.ins().load(types::I64, flags, addr, 0),
            other => {
                return Err((self.unsupported)(format!(
                    "gather indices of dtype {other}"
                )))
            }
        };
        let zero = b.ins().iconst(types::I64, 0);
        let last = b.ins().iconst(types::I64, rows as i64 - 1);
        let low = b.ins().smax(raw, zero);
        let row = b.ins().smin(low, last);
        if let Some(r) = row_of {
            self.gathered.borrow_mut().insert((index_buffer, r), row);
        }
        Ok(row)
    }

    /// Argument `a` of copy `c` of instruction `k`: its value, or a vector constant, loaded
    /// here unless a load of it for an instruction at most two back can be shared.
    fn operand(
        &mut self,
        b: &mut FunctionBuilder,
        consts: &mut Option<&mut Consts>,
        k: usize,
        a: usize,
        c: usize,
    ) -> Val {
        match (self.deferred[a], consts) {
            (Some(x), Some(consts)) => match self.loaded.get(&a) {
                Some(&(when, v)) if k - when <= 2 => v,
                _ => {
                    let v = consts.vector(b, x);
                    self.loaded.insert(a, (k, v));
                    v
                }
            },
            _ => self.values[a][c],
        }
    }

    /// [`KOp::Beyond`] of a vector kernel, on all `copies` vectors at once.
    fn beyond_vectors(
        &self,
        b: &mut FunctionBuilder,
        table: &mut Consts,
        op: UnaryOp,
        ins: &KInstr,
        copies: usize,
    ) -> Vec<Val> {
        let mut per_vector = |b: &mut FunctionBuilder, a: usize| -> Vec<Value> {
            match self.deferred[a] {
                Some(x) => (0..copies).map(|_| table.vector(b, x).one()).collect(),
                None => self.values[a].iter().map(|v| v.one()).collect(),
            }
        };
        let xs = per_vector(b, ins.args[0]);
        let ys = per_vector(b, ins.args[1]);
        let results = self.funcs.beyond_vectors(b, op, &xs, &ys, table);
        results.into_iter().map(Val::One).collect()
    }
}
