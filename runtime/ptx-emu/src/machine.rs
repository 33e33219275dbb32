//! The emulator as a [`GpuMachine`], on which whole GPU programs run through the executor the
//! CUDA device uses.

use crate::block::launch;
use crate::bytes::{array_of, bytes_of, le};
use crate::memory::Memory;
use crate::parse::Module;
use crate::EmulatorError;
use ferrax_ir::{DType, Shape, TensorType};
use ferrax_runtime::machine::{checked_copy, checked_view};
use ferrax_runtime::{Array, GemmOperand, GpuMachine, MachineError, MatmulPrecision};
use half::{bf16, f16};
use std::sync::{Arc, Mutex, MutexGuard};

/// A GPU made of the emulator, on which whole programs run as on a device
/// ([`GpuMachine`]): modules parsed, memory allocated one buffer after another and never
/// reused, launches run at once with at most two blocks (so grid-stride loops go round), and
/// matrix products computed with cuBLAS's conventions, summed exactly in f64 whatever the
/// precision asked (TF32 is a device test's). It reports compute capability 8.0 (sm_80). A
/// graph is its launches, products and copies recorded in order (buffers are never reused,
/// so a replay writes those of the recording), and a host copy while recording is refused.
///
/// Clones share the machine: its memory, its record of launches and the recording under way.
#[derive(Clone, Default)]
pub struct Emulator {
    memory: Arc<Mutex<Memory>>,
    /// Launches run so far, by entry name, and `gemm` for each matrix product.
    launched: Arc<Mutex<Vec<String>>>,
    /// Bytes its allocations may take in all (never given back), if bounded.
    capacity: Option<usize>,
    /// The work recorded so far, while a graph is recorded.
    recording: Arc<Mutex<Option<Vec<Work>>>>,
}

/// A unit of work the emulator runs, or records for a graph.
#[derive(Clone)]
enum Work {
    Launch {
        function: (Arc<Module>, String),
        grid: u32,
        block: u32,
        args: Vec<u64>,
    },
    Gemm {
        dtype: DType,
        transposes: (bool, bool),
        mnk: (usize, usize, usize),
        operands: [GemmOperand; 3],
        batch: usize,
    },
    Copy {
        from: u64,
        to: u64,
        bytes: usize,
    },
}

/// Work an [`Emulator`] recorded, replayed in order on the same buffers.
pub struct EmulatedGraph(Vec<Work>);

/// An array in an [`Emulator`]'s memory.
#[derive(Clone, Debug)]
pub struct EmulatedArray {
    address: u64,
    ty: TensorType,
}

impl Emulator {
    /// An emulator whose allocations may take `bytes` in all, as a device of that much memory
    /// whose buffers are never reused: one more is refused as out of memory.
    pub fn with_capacity(bytes: usize) -> Emulator {
        Emulator {
            capacity: Some(bytes),
            ..Emulator::default()
        }
    }

    /// A new buffer holding `data`, within the capacity.
    fn allocate(&self, data: &[u8]) -> Result<u64, MachineError> {
        let mut memory = lock(&self.memory);
        if let Some(capacity) = self.capacity {
            let available = capacity.saturating_sub(memory.allocated());
            if data.len() > available {
                return Err(EmulatorError::OutOfMemory {
                    bytes: data.len(),
                    available,
                }
                .into());
            }
        }
        Ok(memory.alloc(data))
    }

    /// The entries launched so far, in order, `gemm` standing for each matrix product and
    /// `copy` for each copy between arrays (replays' included).
    pub fn launched(&self) -> Vec<String> {
        lock(&self.launched).clone()
    }

    /// Runs `work`, or records it while a graph is recorded.
    fn queue(&self, work: Work) -> Result<(), MachineError> {
        match lock(&self.recording).as_mut() {
            Some(recorded) => {
                recorded.push(work);
                Ok(())
            }
            None => self.run(&work),
        }
    }

    /// A refusal of a host copy while a graph is recorded.
    fn not_recording(&self, what: &str) -> Result<(), MachineError> {
        match lock(&self.recording).is_some() {
            true => Err(MachineError::Refused(format!(
                "{what} while recording a graph"
            ))),
            false => Ok(()),
        }
    }

    /// Runs `work` at once.
    fn run(&self, work: &Work) -> Result<(), MachineError> {
        match work {
            Work::Launch {
                function: (module, name),
                grid,
                block,
                args,
            } => {
                let entry = module.entry(name)?;
                launch(entry, *grid, *block, args, &mut lock(&self.memory))?;
                lock(&self.launched).push(name.clone());
            }
            Work::Gemm {
                dtype,
                transposes,
                mnk,
                operands,
                batch,
            } => {
                multiply(
                    &mut lock(&self.memory),
                    *dtype,
                    *transposes,
                    *mnk,
                    operands,
                    *batch,
                )?;
                lock(&self.launched).push("gemm".into());
            }
            Work::Copy { from, to, bytes } => {
                let mut memory = lock(&self.memory);
                let data = memory.read(*from, *bytes)?.to_vec();
                memory.write(*to, &data)?;
                lock(&self.launched).push("copy".into());
            }
        }
        Ok(())
    }
}

impl From<EmulatorError> for MachineError {
    fn from(e: EmulatorError) -> MachineError {
        MachineError::Refused(e.to_string())
    }
}

/// How elements of `dtype` are read from and written to memory, as f64; `None` for a dtype
/// cuBLAS does not multiply.
#[allow(clippy::type_complexity)]
fn element_io(dtype: DType) -> Option<(fn(&[u8]) -> f64, fn(f64) -> Vec<u8>)> {
    Some(match dtype {
        DType::F32 => (
            |b| f64::from(f32::from_le_bytes(le(b))),
            |x| (x as f32).to_le_bytes().to_vec(),
        ),
        DType::F64 => (|b| f64::from_le_bytes(le(b)), |x| x.to_le_bytes().to_vec()),
        DType::F16 => (
            |b| f16::from_le_bytes(le(b)).to_f64(),
            |x| f16::from_f64(x).to_le_bytes().to_vec(),
        ),
        DType::BF16 => (
            |b| bf16::from_le_bytes(le(b)).to_f64(),
            |x| bf16::from_f64(x).to_le_bytes().to_vec(),
        ),
        _ => return None,
    })
}

impl GpuMachine for Emulator {
    type Array = EmulatedArray;
    type Function = (Arc<Module>, String);
    type Graph = EmulatedGraph;

    fn compute_capability(&self) -> (i32, i32) {
        (8, 0)
    }

    fn load(&self, ptx: &str, names: &[&str]) -> Result<Vec<Self::Function>, MachineError> {
        let module = Arc::new(Module::parse(ptx)?);
        names
            .iter()
            .map(|n| {
                module.entry(n)?;
                Ok((module.clone(), n.to_string()))
            })
            .collect()
    }

    fn multiprocessors(&self) -> u32 {
        1
    }

    fn grid_for(&self, len: usize, block: u32) -> u32 {
        len.div_ceil(block as usize).clamp(1, 2) as u32
    }

    fn alloc(&self, ty: &TensorType) -> Result<EmulatedArray, MachineError> {
        let bytes = ty.numel() * ty.dtype.size_bytes();
        Ok(EmulatedArray {
            address: self.allocate(&vec![0xEE; bytes])?,
            ty: ty.clone(),
        })
    }

    fn memory_available(&self) -> Result<usize, MachineError> {
        Ok(self.capacity.map_or(usize::MAX, |capacity| {
            capacity.saturating_sub(lock(&self.memory).allocated())
        }))
    }

    fn upload(&self, array: &Array) -> Result<EmulatedArray, MachineError> {
        self.not_recording("an upload")?;
        Ok(EmulatedArray {
            address: self.allocate(&bytes_of(array))?,
            ty: array.ty().clone(),
        })
    }

    fn download(&self, array: &EmulatedArray) -> Result<Array, MachineError> {
        self.not_recording("a download")?;
        let bytes = array.ty.numel() * array.ty.dtype.size_bytes();
        let memory = lock(&self.memory);
        let array = array_of(memory.read(array.address, bytes)?, &array.ty);
        array.map_err(|e| MachineError::Refused(e.to_string()))
    }

    fn address(array: &EmulatedArray) -> u64 {
        array.address
    }

    fn array_type(array: &EmulatedArray) -> TensorType {
        array.ty.clone()
    }

    /// # Panics
    /// Where `shape` has another element count than `array`: a bug of the caller's.
    fn reshaped(array: &EmulatedArray, shape: Shape) -> EmulatedArray {
        assert_eq!(array.ty.numel(), shape.numel(), "reshape of {}", array.ty);
        EmulatedArray {
            address: array.address,
            ty: TensorType::new(array.ty.dtype, shape),
        }
    }

    fn view(
        array: &EmulatedArray,
        start: usize,
        ty: &TensorType,
    ) -> Result<EmulatedArray, MachineError> {
        Ok(EmulatedArray {
            address: array.address + checked_view(&array.ty, start, ty)?,
            ty: ty.clone(),
        })
    }

    /// Copies at once.
    fn copy_elements(
        &self,
        (from, from_start): (&EmulatedArray, usize),
        (to, to_start): (&EmulatedArray, usize),
        len: usize,
    ) -> Result<(), MachineError> {
        let bytes = checked_copy((&from.ty, from_start), (&to.ty, to_start), len)?;
        let size = from.ty.dtype.size_bytes() as u64;
        self.queue(Work::Copy {
            from: from.address + from_start as u64 * size,
            to: to.address + to_start as u64 * size,
            bytes,
        })
    }

    /// Runs the launch at once (see [`launch`]).
    unsafe fn launch(
        &self,
        function: &Self::Function,
        grid: u32,
        block: u32,
        args: &[u64],
    ) -> Result<(), MachineError> {
        self.queue(Work::Launch {
            function: function.clone(),
            grid,
            block,
            args: args.to_vec(),
        })
    }

    /// An operand element outside every buffer is an error, as is a dtype cuBLAS does not
    /// multiply.
    unsafe fn gemm(
        &self,
        dtype: DType,
        transposes: (bool, bool),
        mnk: (usize, usize, usize),
        a: GemmOperand,
        b: GemmOperand,
        c: GemmOperand,
        batch: usize,
        _: MatmulPrecision,
    ) -> Result<(), MachineError> {
        if element_io(dtype).is_none() {
            return Err(MachineError::Refused(format!("a {dtype} matrix product")));
        }
        self.queue(Work::Gemm {
            dtype,
            transposes,
            mnk,
            operands: [a, b, c],
            batch,
        })
    }

    fn begin_capture(&self) -> Result<(), MachineError> {
        let mut recording = lock(&self.recording);
        if recording.is_some() {
            return Err(MachineError::Refused("already recording a graph".into()));
        }
        *recording = Some(Vec::new());
        Ok(())
    }

    fn end_capture(&self) -> Result<EmulatedGraph, MachineError> {
        let recorded = lock(&self.recording).take();
        recorded
            .map(EmulatedGraph)
            .ok_or_else(|| MachineError::Refused("not recording a graph".into()))
    }

    fn replay(&self, graph: &EmulatedGraph) -> Result<(), MachineError> {
        graph.0.iter().try_for_each(|work| self.run(work))
    }
}

/// The batched product `C[i] = op(A[i]) · op(B[i])` in `memory`, column-major with cuBLAS's
/// conventions, each element summed exactly in f64 and rounded once to `dtype`.
fn multiply(
    memory: &mut Memory,
    dtype: DType,
    (transpose_a, transpose_b): (bool, bool),
    (m, n, k): (usize, usize, usize),
    [(a, lda, stride_a), (b, ldb, stride_b), (c, ldc, stride_c)]: &[GemmOperand; 3],
    batch: usize,
) -> Result<(), MachineError> {
    let Some((read, write)) = element_io(dtype) else {
        return Err(MachineError::Refused(format!("a {dtype} matrix product")));
    };
    let size = dtype.size_bytes();
    let at = |memory: &Memory, base: u64, index: usize| {
        Ok::<_, EmulatorError>(read(memory.read(base + (index * size) as u64, size)?))
    };
    // Column-major: element (row, col) of a matrix with leading dimension ld is at
    // row + col·ld; op(A) is m × k, op(B) k × n.
    for i in 0..batch {
        for col in 0..n {
            for row in 0..m {
                let products = (0..k)
                    .map(|l| {
                        let x = match transpose_a {
                            false => row + l * lda,
                            true => l + row * lda,
                        };
                        let y = match transpose_b {
                            false => l + col * ldb,
                            true => col + l * ldb,
                        };
                        Ok(at(memory, *a, i * stride_a + x)? * at(memory, *b, i * stride_b + y)?)
                    })
                    .collect::<Result<Vec<f64>, EmulatorError>>()?;
                let sum: f64 = products.iter().sum();
                let to = c + ((i * stride_c + row + col * ldc) * size) as u64;
                memory.write(to, &write(sum))?;
            }
        }
    }
    Ok(())
}

/// The emulator's state behind `m`; a launch that panicked (an emulated fault) leaves it usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
