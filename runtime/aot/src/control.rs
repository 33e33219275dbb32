//! Control-flow calls (`while`, `cond`, `scan`) as host steps: the instructions of one call
//! (one per result) run once and each gets its result. The compiler compiles each region
//! into an executable of its own ([`CompiledCall`]), which the step runs per iteration without
//! planning again: carried values are given to it by value, so their buffers are reused in
//! place where nothing else holds them. Artifacts carry the regions' executables with the
//! program's. A call without compiled regions runs on the interpreter.

use crate::memory::live;
use ferrax_ir::{with_elements, Elements, Func, Op, Scalar, Shape, TensorType};
use ferrax_runtime::{eval_call, recycle, Array, RuntimeError};

/// A region compiled: an executable run on its operands (given by value, so their buffers may
/// be reused).
pub trait Region {
    fn run_donated(&self, args: Vec<Array>) -> Result<Vec<Array>, RuntimeError>;
    fn output_types(&self) -> Vec<TensorType>;
    /// Takes back a result of an earlier run that is no longer needed, for its buffer to be
    /// reused by later runs.
    fn reclaim(&self, value: Array);
}

/// A call's regions, each compiled into an executable of its own (`R`).
pub enum CompiledCall<R> {
    While {
        cond: Box<R>,
        body: Box<R>,
    },
    Cond(Vec<R>),
    Scan {
        body: Box<R>,
        consts: usize,
        carry: usize,
        length: usize,
        reverse: bool,
    },
}

impl<R> CompiledCall<R> {
    /// The call `op` with `regions`, its regions compiled in order (a loop's condition and
    /// body, a cond's branches, a scan's body); `None` for another op or another count.
    pub fn of(op: &Op, regions: Vec<R>) -> Option<CompiledCall<R>> {
        let mut regions = regions.into_iter();
        let call = match op {
            Op::While(_) => CompiledCall::While {
                cond: Box::new(regions.next()?),
                body: Box::new(regions.next()?),
            },
            Op::Cond(c) => {
                let branches: Vec<R> = regions.by_ref().take(c.branches.len()).collect();
                if branches.len() != c.branches.len() {
                    return None;
                }
                CompiledCall::Cond(branches)
            }
            Op::Scan(s) => CompiledCall::Scan {
                body: Box::new(regions.next()?),
                consts: s.consts,
                carry: s.carry,
                length: s.length,
                reverse: s.reverse,
            },
            // Simplification inlines `remat`; one left runs on the interpreter.
            Op::Remat(_)
            | Op::CustomVjp(_)
            | Op::CustomJvp(_)
            | Op::Constant(_)
            | Op::Iota { .. }
            | Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::Clamp
            | Op::Convert { .. }
            | Op::BitcastConvert { .. }
            | Op::BroadcastInDim { .. }
            | Op::Reshape { .. }
            | Op::Reverse { .. }
            | Op::Transpose { .. }
            | Op::Reduce { .. }
            | Op::DotGeneral(_)
            | Op::Slice { .. }
            | Op::Pad { .. }
            | Op::Concatenate { .. }
            | Op::Gather(_)
            | Op::Scatter(_)
            | Op::DynamicSlice { .. }
            | Op::DynamicUpdateSlice
            | Op::StopGradient
            | Op::Sort { .. }
            | Op::Argsort { .. }
            | Op::Fft { .. }
            | Op::TriangularSolve(_)
            | Op::Cholesky
            | Op::Lu(_)
            | Op::Qr(_)
            | Op::Eigh(_)
            | Op::Svd(_)
            | Op::Geqrf(_)
            | Op::HouseholderProduct
            | Op::Eig(_)
            | Op::Attention(_)
            | Op::DebugCallback { .. }
            | Op::PureCallback(_)
            | Op::IoCallback(_)
            | Op::AddDependency => return None,
        };
        regions.next().is_none().then_some(call)
    }

    /// The compiled regions, in the order [`CompiledCall::of`] takes them.
    pub fn regions(&self) -> Vec<&R> {
        match self {
            CompiledCall::While { cond, body } => vec![cond, body],
            CompiledCall::Cond(branches) => branches.iter().collect(),
            CompiledCall::Scan { body, .. } => vec![body],
        }
    }
}

/// Runs the call whose instructions are `members` (the first one's op and operands), on its
/// compiled regions where there are some, and stores each instruction's result in `values`.
pub(crate) fn run_call<R: Region>(
    func: &Func,
    members: &[usize],
    compiled: Option<&CompiledCall<R>>,
    values: &mut [Option<Array>],
) -> Result<(), RuntimeError> {
    let Some(&first) = members.first() else {
        return Ok(());
    };
    let ins = &func.body[first];
    let operands = ins
        .args
        .iter()
        .map(|&a| live(values, a))
        .collect::<Result<Vec<_>, _>>()?;
    let results = match compiled {
        Some(c) => run_compiled(c, operands)?,
        None => eval_call(&ins.op, &operands.iter().collect::<Vec<_>>())?,
    };
    for &j in members {
        let (k, _) = func.body[j].op.call_result().unwrap_or((0, 1));
        let out = results.get(k).cloned().ok_or(RuntimeError::ArgCount {
            expected: k + 1,
            got: results.len(),
        })?;
        values[func.instr_value(j).index()] = Some(out);
    }
    Ok(())
}

fn run_compiled<R: Region>(
    c: &CompiledCall<R>,
    mut args: Vec<Array>,
) -> Result<Vec<Array>, RuntimeError> {
    match c {
        CompiledCall::While { cond, body } => loop {
            let holds = cond.run_donated(args.clone())?;
            if holds.first().map(|p| p.elements().get(0)) != Some(ferrax_ir::Scalar::Bool(true)) {
                return Ok(args);
            }
            args = body.run_donated(args)?;
        },
        CompiledCall::Cond(branches) => {
            if args.is_empty() {
                return Err(RuntimeError::ArgCount {
                    expected: 1,
                    got: 0,
                });
            }
            let index = args.remove(0);
            match branches.get(ferrax_runtime::branch_index(&index, branches.len())) {
                Some(b) => b.run_donated(args),
                None => Err(RuntimeError::ArgCount {
                    expected: 1,
                    got: 0,
                }),
            }
        }
        CompiledCall::Scan {
            body,
            consts,
            carry,
            length,
            reverse,
        } => scan(&**body, args, (*consts, *carry), *length, *reverse),
    }
}

/// Slice `t` of `x` along its leading dimension, without that dimension.
fn row(x: &Array, t: usize) -> Result<Array, RuntimeError> {
    let dims = x.dims();
    let size: usize = dims.iter().skip(1).product();
    let data = ferrax_ir::map_elements!(x.elements(), v => v
        .get(t * size..(t + 1) * size)
        .unwrap_or_default()
        .to_vec());
    Array::new(Shape::new(dims.get(1..).unwrap_or_default().to_vec()), data)
}

/// A buffer for `length` rows of type `ty` stacked along a new leading dimension: a recycled
/// one where there is one, as a fresh one's pages fault on first write.
fn stacked_buffer(ty: &TensorType, length: usize) -> Result<Elements, RuntimeError> {
    let mut dims = vec![length];
    dims.extend_from_slice(ty.dims());
    let oom = || RuntimeError::OutOfMemory {
        ty: TensorType::new(ty.dtype, dims.clone()),
    };
    let len = length.checked_mul(ty.numel()).ok_or_else(oom)?;
    recycle::take(ty.dtype, len)
        .or_else(|| Elements::try_splat(Scalar::zero(ty.dtype), len))
        .ok_or_else(oom)
}

/// Writes `y` (of type `ty`) as row `t` of `stacked`.
fn put_row(
    stacked: &mut Elements,
    t: usize,
    ty: &TensorType,
    y: &Array,
) -> Result<(), RuntimeError> {
    let n = ty.numel();
    let wrong_length = || RuntimeError::DataLength {
        shape: ty.shape.clone(),
        len: y.elements().len(),
    };
    with_elements!(stacked, v => {
        let row = y.as_slice()?;
        let dst = t
            .checked_mul(n)
            .and_then(|at| v.get_mut(at..at.checked_add(n)?))
            .filter(|dst| dst.len() == row.len())
            .ok_or_else(wrong_length)?;
        dst.copy_from_slice(row);
    });
    Ok(())
}

fn scan(
    body: &dyn Region,
    args: Vec<Array>,
    (consts, carry): (usize, usize),
    length: usize,
    reverse: bool,
) -> Result<Vec<Array>, RuntimeError> {
    let mut rest = args;
    let xs = rest.split_off((consts + carry).min(rest.len()));
    let mut carried = rest.split_off(consts.min(rest.len()));
    let consts = rest;
    let outputs = body.output_types();
    let per_step = outputs.get(carry..).unwrap_or_default();
    // Each step's outputs go straight into their rows, and their buffers back to the body.
    let mut ys = per_step
        .iter()
        .map(|ty| stacked_buffer(ty, length))
        .collect::<Result<Vec<_>, _>>()?;
    for step in 0..length {
        let t = if reverse { length - 1 - step } else { step };
        let mut inputs = consts.clone();
        inputs.append(&mut carried);
        for x in &xs {
            inputs.push(row(x, t)?);
        }
        let mut out = body.run_donated(inputs)?;
        let y = out.split_off(carry.min(out.len()));
        carried = out;
        for ((stacked, ty), y) in ys.iter_mut().zip(per_step).zip(y) {
            put_row(stacked, t, ty, &y)?;
            body.reclaim(y);
        }
    }
    for (data, ty) in ys.into_iter().zip(per_step) {
        let mut dims = vec![length];
        dims.extend_from_slice(ty.dims());
        carried.push(Array::new(Shape::new(dims), data)?);
    }
    Ok(carried)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrax_ir::DType;

    fn f32s(values: &[f32]) -> Array {
        Array::new(
            Shape::new(vec![values.len()]),
            Elements::F32(values.to_vec()),
        )
        .unwrap()
    }

    #[test]
    fn rows_land_in_their_place_and_a_row_of_another_length_is_an_error() {
        let ty = TensorType::new(DType::F32, [2]);
        let mut stacked = stacked_buffer(&ty, 3).unwrap();
        put_row(&mut stacked, 2, &ty, &f32s(&[5.0, 6.0])).unwrap();
        put_row(&mut stacked, 0, &ty, &f32s(&[1.0, 2.0])).unwrap();
        put_row(&mut stacked, 1, &ty, &f32s(&[3.0, 4.0])).unwrap();
        assert_eq!(stacked, Elements::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
        let short = put_row(&mut stacked, 1, &ty, &f32s(&[7.0]));
        assert!(matches!(
            short,
            Err(RuntimeError::DataLength { len: 1, .. })
        ));
        let past_the_end = put_row(&mut stacked, 3, &ty, &f32s(&[7.0, 8.0]));
        assert!(past_the_end.is_err());
        let wrong_dtype = Array::new(Shape::new(vec![2]), Elements::I32(vec![1, 2])).unwrap();
        assert!(put_row(&mut stacked, 0, &ty, &wrong_dtype).is_err());
    }

    #[test]
    fn zero_size_rows_and_lengths_stack() {
        let empty = TensorType::new(DType::F32, [0]);
        let mut stacked = stacked_buffer(&empty, 4).unwrap();
        put_row(&mut stacked, 3, &empty, &f32s(&[])).unwrap();
        assert!(stacked.is_empty());
        let ty = TensorType::new(DType::F32, [2]);
        assert!(stacked_buffer(&ty, 0).unwrap().is_empty());
        assert!(matches!(
            stacked_buffer(&ty, usize::MAX),
            Err(RuntimeError::OutOfMemory { .. })
        ));
    }
}
