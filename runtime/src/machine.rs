//! What running a GPU program asks of a GPU, as a trait: loading a module, memory, launches and
//! matrix products. The CUDA device ([`cuda`](crate::cuda)) is one machine; the PTX emulator
//! (the `ferrax-ptx-emu` crate) is another, so a whole GPU program (its step order, launch
//! shapes, deferred launches, releases, GEMM operand layouts and host path) runs and is checked
//! where there is no GPU.

use crate::cuda::{CudaDevice, CudaError, CudaGraph, DeviceArray, Function, MatmulPrecision};
use crate::parallel::map_on_cores;
use crate::Array;
use ferrax_ir::{DType, Shape, TensorType};
use std::sync::Arc;

/// One operand of a [`GpuMachine::gemm`]: its address, leading dimension and batch stride, in
/// elements.
pub type GemmOperand = (u64, usize, usize);

/// Why a [`GpuMachine`] could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    /// The machine's own refusal (an emulator's, say), in its words.
    #[error("{0}")]
    Refused(String),
    /// A [`GpuMachine::view`] reaching past its array or of another dtype.
    #[error("a view {view} at element {start} of {array}")]
    ViewOutOfBounds {
        array: TensorType,
        start: usize,
        view: TensorType,
    },
    /// A [`GpuMachine::copy_elements`] reaching past an array or between dtypes.
    #[error("a copy of {len} elements from {from} at {from_start} to {to} at {to_start}")]
    CopyOutOfBounds {
        from: TensorType,
        from_start: usize,
        to: TensorType,
        to_start: usize,
        len: usize,
    },
}

/// Checks that a [`GpuMachine::view`] `view` at element `start` of `array` lies within it
/// and has its dtype; returns where it starts, in bytes.
pub fn checked_view(
    array: &TensorType,
    start: usize,
    view: &TensorType,
) -> Result<u64, MachineError> {
    let end = start.checked_add(view.numel());
    if view.dtype != array.dtype || end.is_none_or(|end| end > array.numel()) {
        return Err(MachineError::ViewOutOfBounds {
            array: array.clone(),
            start,
            view: view.clone(),
        });
    }
    Ok((start * array.dtype.size_bytes()) as u64)
}

/// Checks that a [`GpuMachine::copy_elements`] of `len` elements stays within both arrays,
/// of one dtype; returns its size in bytes.
pub fn checked_copy(
    (from, from_start): (&TensorType, usize),
    (to, to_start): (&TensorType, usize),
    len: usize,
) -> Result<usize, MachineError> {
    let within =
        |ty: &TensorType, start: usize| start.checked_add(len).is_some_and(|end| end <= ty.numel());
    if from.dtype != to.dtype || !within(from, from_start) || !within(to, to_start) {
        return Err(MachineError::CopyOutOfBounds {
            from: from.clone(),
            from_start,
            to: to.clone(),
            to_start,
            len,
        });
    }
    Ok(len * from.dtype.size_bytes())
}

pub trait GpuMachine {
    /// An array in the machine's memory; clones share its buffer, which lives as long as one.
    type Array: Clone;
    /// An entry of a loaded module.
    type Function;
    /// A recorded run, replayed by one call.
    type Graph;

    /// The machine's compute capability, `(major, minor)`: which PTX target it runs.
    fn compute_capability(&self) -> (i32, i32);
    /// Loads `ptx` and returns its entries `names`, in order.
    fn load(&self, ptx: &str, names: &[&str]) -> Result<Vec<Self::Function>, MachineError>;
    /// Loads each of `modules` (PTX and the names of its entries) and returns all their
    /// entries, in order. A machine may load them at once.
    fn load_modules(
        &self,
        modules: &[(&str, &[&str])],
    ) -> Result<Vec<Self::Function>, MachineError> {
        let mut functions = Vec::new();
        for (ptx, names) in modules {
            functions.extend(self.load(ptx, names)?);
        }
        Ok(functions)
    }
    /// Loads each of `modules` (a cubin: machine code `ptxas` assembled for this machine's
    /// architecture, and the names of its entries) and returns all their entries, in order. A
    /// machine that runs PTX alone refuses.
    fn load_cubins(
        &self,
        modules: &[(&[u8], &[&str])],
    ) -> Result<Vec<Self::Function>, MachineError> {
        let _ = modules;
        Err(MachineError::Refused("this machine loads PTX only".into()))
    }
    /// Whether [`GpuMachine::load_cubins`] takes machine code, so that a compiler may
    /// assemble its modules first.
    fn loads_machine_code(&self) -> bool {
        false
    }
    fn multiprocessors(&self) -> u32;
    /// Blocks for a grid-stride kernel over `len` elements with blocks of `block` threads.
    fn grid_for(&self, len: usize, block: u32) -> u32;
    /// An uninitialized array of type `ty`, for a kernel to fill.
    fn alloc(&self, ty: &TensorType) -> Result<Self::Array, MachineError>;
    /// Bytes that allocations can still get: the device's free memory and what the machine's
    /// own cache holds for reuse.
    fn memory_available(&self) -> Result<usize, MachineError>;
    fn upload(&self, array: &Array) -> Result<Self::Array, MachineError>;
    /// Copies `array` back, once the work that produces it is done.
    fn download(&self, array: &Self::Array) -> Result<Array, MachineError>;
    fn address(array: &Self::Array) -> u64;
    fn array_type(array: &Self::Array) -> TensorType;
    /// The same buffer under another shape of the same element count.
    fn reshaped(array: &Self::Array, shape: Shape) -> Self::Array;
    /// Elements `start..start + ty.numel()` of `array` as an array of type `ty`, sharing its
    /// buffer (a slice of a loop's stacked inputs); an error where they reach past its end or
    /// `ty` has another dtype.
    fn view(
        array: &Self::Array,
        start: usize,
        ty: &TensorType,
    ) -> Result<Self::Array, MachineError>;

    /// Queues a copy of `len` elements of `from`, starting at element `from.1`, into `to` from
    /// element `to.1`: a slice of a loop's stacked inputs, or a step's row of its stacked
    /// outputs. Both arrays have one dtype and hold the elements copied
    /// ([`checked_copy`]).
    fn copy_elements(
        &self,
        from: (&Self::Array, usize),
        to: (&Self::Array, usize),
        len: usize,
    ) -> Result<(), MachineError>;

    /// Queues `function` over `grid` blocks of `block` threads with buffer addresses `args`.
    ///
    /// # Safety
    /// The addresses must be live buffers of the sizes the kernel indexes.
    unsafe fn launch(
        &self,
        function: &Self::Function,
        grid: u32,
        block: u32,
        args: &[u64],
    ) -> Result<(), MachineError>;

    /// [`Machine::launch`], except that a grid of no blocks (a kernel over no elements)
    /// queues nothing, where CUDA would refuse the launch.
    ///
    /// # Safety
    /// As for [`Machine::launch`].
    unsafe fn launch_blocks(
        &self,
        function: &Self::Function,
        grid: u32,
        block: u32,
        args: &[u64],
    ) -> Result<(), MachineError> {
        if grid == 0 {
            return Ok(());
        }
        // SAFETY: the caller's guarantee.
        unsafe { self.launch(function, grid, block, args) }
    }

    /// Starts recording the work queued from now on (launches, products, copies between
    /// arrays) instead of running it, until [`GpuMachine::end_capture`]. The arrays allocated
    /// meanwhile belong to the recording: their buffers are reused only within it, and live as
    /// long as its graph or an array over them. Nothing may be copied to or from the host
    /// while recording.
    fn begin_capture(&self) -> Result<(), MachineError>;
    /// Ends the recording: its graph, which runs nothing until replayed.
    fn end_capture(&self) -> Result<Self::Graph, MachineError>;
    /// Queues the recorded work of `graph`, on the buffers it was recorded with.
    fn replay(&self, graph: &Self::Graph) -> Result<(), MachineError>;

    /// Batched column-major matrix product with cuBLAS's conventions:
    /// `C[i] = op(A[i]) · op(B[i])`, `C` being `m × n`, `op` transposing where asked.
    ///
    /// # Safety
    /// The addresses must be live buffers of `dtype` large enough for the given shapes,
    /// leading dimensions and strides.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        &self,
        dtype: DType,
        transposes: (bool, bool),
        mnk: (usize, usize, usize),
        a: GemmOperand,
        b: GemmOperand,
        c: GemmOperand,
        batch: usize,
        precision: MatmulPrecision,
    ) -> Result<(), MachineError>;
}

impl GpuMachine for Arc<CudaDevice> {
    type Array = DeviceArray;
    type Function = Function;
    type Graph = CudaGraph;

    fn begin_capture(&self) -> Result<(), MachineError> {
        Ok(CudaDevice::begin_capture(self)?)
    }

    fn end_capture(&self) -> Result<CudaGraph, MachineError> {
        Ok(CudaDevice::end_capture(self)?)
    }

    fn replay(&self, graph: &CudaGraph) -> Result<(), MachineError> {
        Ok(CudaDevice::replay(self, graph)?)
    }

    fn compute_capability(&self) -> (i32, i32) {
        CudaDevice::compute_capability(self)
    }

    fn load(&self, ptx: &str, names: &[&str]) -> Result<Vec<Function>, MachineError> {
        let module = self.load_module(ptx)?;
        Ok(names
            .iter()
            .map(|n| module.function(n))
            .collect::<Result<_, _>>()?)
    }

    fn loads_machine_code(&self) -> bool {
        true
    }

    fn load_cubins(&self, modules: &[(&[u8], &[&str])]) -> Result<Vec<Function>, MachineError> {
        let mut functions = Vec::new();
        for (cubin, names) in modules {
            let module = self.load_cubin(cubin)?;
            for name in names.iter() {
                functions.push(module.function(name)?);
            }
        }
        Ok(functions)
    }

    /// On as many threads as the host has cores (at most one a module): the driver compiles
    /// each module on the thread that loads it.
    fn load_modules(&self, modules: &[(&str, &[&str])]) -> Result<Vec<Function>, MachineError> {
        let loaded = map_on_cores(modules, |(ptx, names)| self.load(ptx, names));
        let mut functions = Vec::new();
        for result in loaded {
            let result =
                result.ok_or_else(|| MachineError::Refused("a module load stopped".into()))?;
            functions.extend(result?);
        }
        Ok(functions)
    }

    fn multiprocessors(&self) -> u32 {
        CudaDevice::multiprocessors(self)
    }

    fn grid_for(&self, len: usize, block: u32) -> u32 {
        CudaDevice::grid_for(self, len, block)
    }

    fn alloc(&self, ty: &TensorType) -> Result<DeviceArray, MachineError> {
        Ok(self.alloc_array(ty)?)
    }

    fn memory_available(&self) -> Result<usize, MachineError> {
        Ok(CudaDevice::memory_available(self)?)
    }

    fn upload(&self, array: &Array) -> Result<DeviceArray, MachineError> {
        Ok(CudaDevice::upload(self, array)?)
    }

    fn download(&self, array: &DeviceArray) -> Result<Array, MachineError> {
        Ok(array.to_host()?)
    }

    fn address(array: &DeviceArray) -> u64 {
        array.address()
    }

    fn array_type(array: &DeviceArray) -> TensorType {
        TensorType::new(array.dtype(), array.shape().clone())
    }

    fn reshaped(array: &DeviceArray, shape: Shape) -> DeviceArray {
        array.reshaped(shape)
    }

    fn view(
        array: &DeviceArray,
        start: usize,
        ty: &TensorType,
    ) -> Result<DeviceArray, MachineError> {
        let bytes = checked_view(&Self::array_type(array), start, ty)?;
        Ok(array.view_at(bytes, ty.shape.clone()))
    }

    fn copy_elements(
        &self,
        (from, from_start): (&DeviceArray, usize),
        (to, to_start): (&DeviceArray, usize),
        len: usize,
    ) -> Result<(), MachineError> {
        let bytes = checked_copy(
            (&Self::array_type(from), from_start),
            (&Self::array_type(to), to_start),
            len,
        )?;
        let size = from.dtype().size_bytes() as u64;
        let source = from.address() + from_start as u64 * size;
        let target = to.address() + to_start as u64 * size;
        Ok(self.copy_device(source, target, bytes)?)
    }

    unsafe fn launch(
        &self,
        function: &Function,
        grid: u32,
        block: u32,
        args: &[u64],
    ) -> Result<(), MachineError> {
        // SAFETY: the caller's guarantee.
        Ok(unsafe { CudaDevice::launch(self, function, grid, block, args) }?)
    }

    unsafe fn gemm(
        &self,
        dtype: DType,
        transposes: (bool, bool),
        mnk: (usize, usize, usize),
        a: GemmOperand,
        b: GemmOperand,
        c: GemmOperand,
        batch: usize,
        precision: MatmulPrecision,
    ) -> Result<(), MachineError> {
        // SAFETY: the caller's guarantee.
        Ok(unsafe { CudaDevice::gemm(self, dtype, transposes, mnk, a, b, c, batch, precision) }?)
    }
}
