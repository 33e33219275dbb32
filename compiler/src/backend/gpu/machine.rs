//! What running a GPU program asks of a GPU, as a trait: loading a module, memory, launches and
//! matrix products. The CUDA device is one machine; the tests' PTX emulator is another, so a
//! whole [`GpuProgram`](super::GpuProgram) (its step order, launch shapes, deferred launches,
//! releases, GEMM operand layouts and host path) runs and is checked where there is no GPU.

use super::GpuError;
use crate::backend::ptx::PtxTarget;
use ferrax_ir::{DType, Shape, TensorType};
use ferrax_runtime::cuda::{CudaDevice, DeviceArray, Function, MatmulPrecision};
use ferrax_runtime::Array;
use std::sync::Arc;

/// One operand of a [`GpuMachine::gemm`]: its address, leading dimension and batch stride, in
/// elements.
pub type GemmOperand = (u64, usize, usize);

pub trait GpuMachine {
    /// An array in the machine's memory; clones share its buffer, which lives as long as one.
    type Array: Clone;
    /// An entry of a loaded module.
    type Function;

    /// The PTX target the machine runs.
    fn target(&self) -> PtxTarget;
    /// Loads `ptx` and returns its entries `names`, in order.
    fn load(&self, ptx: &str, names: &[&str]) -> Result<Vec<Self::Function>, GpuError>;
    fn multiprocessors(&self) -> u32;
    /// Blocks for a grid-stride kernel over `len` elements with blocks of `block` threads.
    fn grid_for(&self, len: usize, block: u32) -> u32;
    /// An uninitialized array of type `ty`, for a kernel to fill.
    fn alloc(&self, ty: &TensorType) -> Result<Self::Array, GpuError>;
    fn upload(&self, array: &Array) -> Result<Self::Array, GpuError>;
    /// Copies `array` back, once the work that produces it is done.
    fn download(&self, array: &Self::Array) -> Result<Array, GpuError>;
    fn address(array: &Self::Array) -> u64;
    fn array_type(array: &Self::Array) -> TensorType;
    /// The same buffer under another shape of the same element count.
    fn reshaped(array: &Self::Array, shape: Shape) -> Self::Array;

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
    ) -> Result<(), GpuError>;

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
    ) -> Result<(), GpuError>;
}

impl GpuMachine for Arc<CudaDevice> {
    type Array = DeviceArray;
    type Function = Function;

    fn target(&self) -> PtxTarget {
        let (major, minor) = self.compute_capability();
        PtxTarget::for_compute_capability(major, minor)
    }

    fn load(&self, ptx: &str, names: &[&str]) -> Result<Vec<Function>, GpuError> {
        let module = self.load_module(ptx)?;
        Ok(names
            .iter()
            .map(|n| module.function(n))
            .collect::<Result<_, _>>()?)
    }

    fn multiprocessors(&self) -> u32 {
        CudaDevice::multiprocessors(self)
    }

    fn grid_for(&self, len: usize, block: u32) -> u32 {
        CudaDevice::grid_for(self, len, block)
    }

    fn alloc(&self, ty: &TensorType) -> Result<DeviceArray, GpuError> {
        Ok(self.alloc_array(ty)?)
    }

    fn upload(&self, array: &Array) -> Result<DeviceArray, GpuError> {
        Ok(CudaDevice::upload(self, array)?)
    }

    fn download(&self, array: &DeviceArray) -> Result<Array, GpuError> {
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

    unsafe fn launch(
        &self,
        function: &Function,
        grid: u32,
        block: u32,
        args: &[u64],
    ) -> Result<(), GpuError> {
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
    ) -> Result<(), GpuError> {
        // SAFETY: the caller's guarantee.
        Ok(unsafe { CudaDevice::gemm(self, dtype, transposes, mnk, a, b, c, batch, precision) }?)
    }
}
