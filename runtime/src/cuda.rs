//! NVIDIA GPUs through the CUDA driver API (`cudarc`). The driver and cuBLAS are loaded at run
//! time, so ferrax builds and runs everywhere; without them, [`CudaDevice::new`] is an `Err`.
//!
//! One context and one stream per device: every copy, launch and GEMM is queued on that stream
//! and runs in order, so only reading results back waits. Device memory comes from a caching
//! allocator (freed buffers are kept by size and reused), and loaded PTX modules are cached by
//! their text, so executing a compiled program again allocates and loads nothing. The work of
//! a run can be recorded once and replayed by one launch (`graph`: CUDA graphs).

mod graph;

pub use graph::CudaGraph;
use graph::GraphPool;

use crate::{Array, RuntimeError};
use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::driver::{result, sys, CudaContext, DriverError};
use ferrax_ir::{with_elements, DType, Elements, Shape, TensorType};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// How cuBLAS multiplies f32 matrices (`jax.default_matmul_precision`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatmulPrecision {
    /// TF32 tensor cores (Ampere on): operands rounded to 10-bit mantissas, products summed in
    /// f32, relative error about 2^-10 of the sum of magnitudes. JAX's default on such GPUs.
    #[default]
    Tf32,
    /// True f32 arithmetic (JAX's `"highest"`).
    Highest,
}

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver: libcuda could not be loaded (is an NVIDIA driver installed?)")]
    NoDriver,
    #[error("CUDA device {ordinal} does not exist ({count} found)")]
    NoDevice { ordinal: usize, count: usize },
    #[error("CUDA driver: {0}")]
    Driver(#[from] DriverError),
    #[error("cuBLAS could not be loaded (libcublas); matrix products on the GPU need it")]
    NoBlas,
    #[error("cuBLAS: {0:?}")]
    Blas(blas::CublasError),
    #[error("{0} arrays are not supported on the GPU")]
    DType(DType),
    #[error("module has no kernel named {0}")]
    NoKernel(String),
    #[error("recording a graph: {0}")]
    Capture(String),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// A device pointer and the raw handles the driver gives out, which the driver lets any
/// thread use once the context is bound.
#[derive(Clone, Copy, Debug)]
struct Handle<T>(T);
// SAFETY: CUDA driver handles are process-wide; every use binds the owning context first.
unsafe impl<T> Send for Handle<T> {}
// SAFETY: as above; the handles are only read.
unsafe impl<T> Sync for Handle<T> {}

/// One GPU: its context, stream, memory cache, module cache and cuBLAS handle.
pub struct CudaDevice {
    ordinal: usize,
    name: String,
    compute_capability: (i32, i32),
    multiprocessors: u32,
    ctx: Arc<CudaContext>,
    stream: Handle<sys::CUstream>,
    free: Mutex<HashMap<usize, Vec<sys::CUdeviceptr>>>,
    /// Loaded modules by PTX text, held by the functions taken from them: a module is unloaded
    /// when its last function (so its last executable) is dropped.
    modules: Mutex<HashMap<String, Weak<Module>>>,
    /// The cuBLAS handle, with the precision its math mode is set for.
    blas: Mutex<Option<(Handle<blas_sys::cublasHandle_t>, MatmulPrecision)>>,
    /// The pool of the graph being recorded, while one is.
    capture: Mutex<Option<Arc<GraphPool>>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cuda:{} ({}, sm_{}{})",
            self.ordinal, self.name, self.compute_capability.0, self.compute_capability.1
        )
    }
}

fn devices() -> &'static Mutex<HashMap<usize, Arc<CudaDevice>>> {
    static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<CudaDevice>>>> = OnceLock::new();
    DEVICES.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Rounding of allocation sizes, so that buffers of nearby sizes share the cache.
const GRANULE: usize = 512;

impl CudaDevice {
    /// GPU `ordinal`, opened once per process and shared.
    pub fn new(ordinal: usize) -> Result<Arc<CudaDevice>, CudaError> {
        let mut all = lock(devices());
        if let Some(d) = all.get(&ordinal) {
            return Ok(d.clone());
        }
        // SAFETY: only probes whether the library can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::NoDriver);
        }
        result::init()?;
        let count = usize::try_from(result::device::get_count()?).unwrap_or(0);
        if ordinal >= count {
            return Err(CudaError::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal)?;
        let compute_capability = ctx.compute_capability()?;
        let multiprocessors = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
            .max(1) as u32;
        let name = ctx.name()?;
        ctx.bind_to_thread()?;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)?;
        let device = Arc::new(CudaDevice {
            ordinal,
            name,
            compute_capability,
            multiprocessors,
            ctx,
            stream: Handle(stream),
            free: Mutex::new(HashMap::new()),
            modules: Mutex::new(HashMap::new()),
            blas: Mutex::new(None),
            capture: Mutex::new(None),
        });
        all.insert(ordinal, device.clone());
        Ok(device)
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `(major, minor)`; part of every compiled program's cache key.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    pub fn multiprocessors(&self) -> u32 {
        self.multiprocessors
    }

    fn bind(&self) -> Result<(), CudaError> {
        Ok(self.ctx.bind_to_thread()?)
    }

    /// A buffer of at least `bytes`, from the cache when one of that size was freed (from the
    /// graph's pool while one is recorded).
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        let size = bytes.max(1).div_ceil(GRANULE) * GRANULE;
        if let Some(pool) = self.recording() {
            return Ok(DeviceBuffer {
                ptr: pool.take(size)?,
                size,
                device: self.clone(),
                pool: Some(pool),
            });
        }
        let cached = lock(&self.free).get_mut(&size).and_then(Vec::pop);
        let ptr = match cached {
            Some(p) => p,
            None => {
                self.bind()?;
                // SAFETY: a plain allocation on this device's stream.
                match unsafe { result::malloc_async(self.stream.0, size) } {
                    Err(DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY)) => {
                        // The cache may hold what is missing: give it back, then try again.
                        self.release_cached()?;
                        // SAFETY: as above.
                        unsafe { result::malloc_async(self.stream.0, size)? }
                    }
                    other => other?,
                }
            }
        };
        Ok(DeviceBuffer {
            ptr,
            size,
            device: self.clone(),
            pool: None,
        })
    }

    /// Bytes that allocations can still get: the device's free memory and the cache's buffers.
    pub fn memory_available(&self) -> Result<usize, CudaError> {
        let (free, _total) = self.ctx.mem_get_info()?;
        Ok(free.saturating_add(self.cached_bytes()))
    }

    /// An uninitialized device array of type `ty`, for a kernel to fill.
    pub fn alloc_array(self: &Arc<Self>, ty: &TensorType) -> Result<DeviceArray, CudaError> {
        let buffer = self.alloc(ty.numel() * ty.dtype.size_bytes())?;
        Ok(DeviceArray::from_buffer(ty.shape.clone(), ty.dtype, buffer))
    }

    /// Queues a copy of `bytes` bytes from device address `from` to `to`.
    pub(crate) fn copy_device(&self, from: u64, to: u64, bytes: usize) -> Result<(), CudaError> {
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the caller checked both ranges against live buffers of this device.
        unsafe { result::memcpy_dtod_async(to, from, bytes, self.stream.0)? };
        Ok(())
    }

    /// Copies `array` to this device.
    pub fn upload(self: &Arc<Self>, array: &Array) -> Result<DeviceArray, CudaError> {
        self.not_recording("an upload")?;
        let dtype = array.dtype();
        let bytes = array.shape().numel() * dtype.size_bytes();
        let buffer = self.alloc(bytes)?;
        self.bind()?;
        match array.elements() {
            Elements::Bool(v) => {
                let raw: Vec<u8> = v.iter().map(|&b| u8::from(b)).collect();
                // SAFETY: the buffer holds `bytes` bytes; the copy completes before `raw` drops.
                unsafe {
                    result::memcpy_htod_async(buffer.ptr, &raw, self.stream.0)?;
                    result::stream::synchronize(self.stream.0)?;
                }
            }
            e => with_elements!(e, v => {
                // SAFETY: the buffer holds `bytes` bytes; the source outlives the copy, which
                // completes before this returns.
                unsafe {
                    result::memcpy_htod_async(buffer.ptr, v.as_slice(), self.stream.0)?;
                    result::stream::synchronize(self.stream.0)?;
                }
            }),
        }
        Ok(DeviceArray {
            shape: array.shape().clone(),
            dtype,
            offset: 0,
            buffer: Arc::new(buffer),
        })
    }

    /// Loads a PTX module (once per distinct text while any holder of it lives). The driver
    /// compiles it on the calling thread, with no lock held: threads may load modules at once.
    pub fn load_module(&self, ptx: &str) -> Result<Arc<Module>, CudaError> {
        if let Some(m) = lock(&self.modules).get(ptx).and_then(Weak::upgrade) {
            return Ok(m);
        }
        self.bind()?;
        let text = CString::new(ptx).map_err(|_| CudaError::NoKernel("<PTX with NUL>".into()))?;
        // SAFETY: `text` is a NUL-terminated PTX image that outlives the call.
        let module = unsafe { result::module::load_data(text.as_ptr().cast())? };
        let m = Arc::new(Module {
            module: Handle(module),
            ctx: self.ctx.clone(),
            stream: self.stream,
        });
        let mut modules = lock(&self.modules);
        modules.retain(|_, m| m.strong_count() > 0);
        modules.insert(ptx.to_string(), Arc::downgrade(&m));
        Ok(m)
    }

    /// Loads `cubin`, machine code `ptxas` assembled for this device's architecture (or an
    /// earlier one of the same major version): no compilation by the driver.
    pub fn load_cubin(&self, cubin: &[u8]) -> Result<Arc<Module>, CudaError> {
        self.bind()?;
        // The driver reads the image's ELF header for its size; an 8-byte aligned copy.
        let mut image = vec![0u64; cubin.len().div_ceil(8)];
        // SAFETY: `image` holds at least `cubin.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                cubin.as_ptr(),
                image.as_mut_ptr().cast::<u8>(),
                cubin.len(),
            );
        }
        // SAFETY: `image` is a cubin (the caller's artifact says so, and the driver checks its
        // ELF header and architecture) that outlives the call.
        let module = unsafe { result::module::load_data(image.as_ptr().cast())? };
        Ok(Arc::new(Module {
            module: Handle(module),
            ctx: self.ctx.clone(),
            stream: self.stream,
        }))
    }

    /// Queues `function` over `grid` blocks of `block` threads; `args` are its `.u64`
    /// parameters (buffer addresses) in order.
    ///
    /// # Safety
    /// The addresses must be live buffers of the sizes the kernel indexes.
    pub unsafe fn launch(
        &self,
        function: &Function,
        grid: u32,
        block: u32,
        args: &[u64],
    ) -> Result<(), CudaError> {
        self.bind()?;
        let mut values = args.to_vec();
        let mut params: Vec<*mut c_void> = values
            .iter_mut()
            .map(|v| (v as *mut u64).cast::<c_void>())
            .collect();
        // SAFETY: the caller guarantees the buffers; `params` points at `values`, alive here.
        unsafe {
            result::launch_kernel(
                function.function.0,
                (grid, 1, 1),
                (block, 1, 1),
                0,
                self.stream.0,
                &mut params,
            )?
        };
        Ok(())
    }

    /// The grid for an elementwise kernel over `len` elements: enough blocks to fill the
    /// device a few times over, each thread striding through the rest.
    pub fn grid_for(&self, len: usize, block: u32) -> u32 {
        let needed = len.div_ceil(block as usize).max(1);
        let full = self.multiprocessors as usize * 32;
        needed.min(full) as u32
    }

    /// Batched matrix product on column-major operands (cuBLAS conventions):
    /// `C[i] = op(A[i]) · op(B[i])` for `i < batch`, `C` being `m × n`; f32 ones at
    /// `precision`.
    ///
    /// # Safety
    /// The addresses must be live buffers of `dtype` large enough for the given shapes,
    /// leading dimensions and strides.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm(
        &self,
        dtype: DType,
        (transpose_a, transpose_b): (bool, bool),
        (m, n, k): (usize, usize, usize),
        (a, lda, stride_a): (u64, usize, usize),
        (b, ldb, stride_b): (u64, usize, usize),
        (c, ldc, stride_c): (u64, usize, usize),
        batch: usize,
        precision: MatmulPrecision,
    ) -> Result<(), CudaError> {
        self.bind()?;
        // Held through the call, so that no other thread's product changes the math mode
        // before this one is queued.
        let mut blas = lock(&self.blas);
        let handle = self.blas_handle(&mut blas, precision)?;
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let int = |v: usize| i32::try_from(v).map_err(|_| CudaError::DType(dtype));
        let long = |v: usize| i64::try_from(v).map_err(|_| CudaError::DType(dtype));
        let (ta, tb) = (op(transpose_a), op(transpose_b));
        let (m, n, k, lda, ldb, ldc) = (int(m)?, int(n)?, int(k)?, int(lda)?, int(ldb)?, int(ldc)?);
        let (sa, sb, sc, batch) = (
            long(stride_a)?,
            long(stride_b)?,
            long(stride_c)?,
            int(batch)?,
        );
        // SAFETY: the caller guarantees the operands; alpha and beta are host scalars.
        unsafe {
            match dtype {
                DType::F32 => blas::sgemm_strided_batched(
                    handle,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    &1.0f32,
                    a as *const f32,
                    lda,
                    sa,
                    b as *const f32,
                    ldb,
                    sb,
                    &0.0f32,
                    c as *mut f32,
                    ldc,
                    sc,
                    batch,
                ),
                // Half operands and result, products summed in f32 (tensor cores).
                DType::F16 | DType::BF16 => {
                    let ty = if dtype == DType::F16 {
                        blas_sys::cudaDataType::CUDA_R_16F
                    } else {
                        blas_sys::cudaDataType::CUDA_R_16BF
                    };
                    blas::gemm_strided_batched_ex(
                        handle,
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        (&1.0f32 as *const f32).cast(),
                        a as *const c_void,
                        ty,
                        lda,
                        sa,
                        b as *const c_void,
                        ty,
                        ldb,
                        sb,
                        (&0.0f32 as *const f32).cast(),
                        c as *mut c_void,
                        ty,
                        ldc,
                        sc,
                        batch,
                        blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                        blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                    )
                }
                DType::F64 => blas::dgemm_strided_batched(
                    handle,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    &1.0f64,
                    a as *const f64,
                    lda,
                    sa,
                    b as *const f64,
                    ldb,
                    sb,
                    &0.0f64,
                    c as *mut f64,
                    ldc,
                    sc,
                    batch,
                ),
                other => return Err(CudaError::DType(other)),
            }
            .map_err(CudaError::Blas)
        }
    }

    /// This device's cuBLAS handle (created in `slot` the first time), its math mode set for
    /// `precision`.
    fn blas_handle(
        &self,
        slot: &mut Option<(Handle<blas_sys::cublasHandle_t>, MatmulPrecision)>,
        precision: MatmulPrecision,
    ) -> Result<blas_sys::cublasHandle_t, CudaError> {
        let handle = match *slot {
            Some((handle, set)) if set == precision => return Ok(handle.0),
            Some((handle, _)) => handle.0,
            None => {
                // SAFETY: only probes whether the library can be loaded.
                if !unsafe { blas_sys::is_culib_present() } {
                    return Err(CudaError::NoBlas);
                }
                let handle = blas::create_handle().map_err(CudaError::Blas)?;
                // SAFETY: both handles are live; cuBLAS then queues its work on our stream.
                unsafe { blas::set_stream(handle, self.stream.0 as _) }.map_err(CudaError::Blas)?;
                handle
            }
        };
        let math = match precision {
            MatmulPrecision::Tf32 => blas_sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH,
            MatmulPrecision::Highest => blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH,
        };
        // SAFETY: the handle is live and this device's.
        unsafe { blas_sys::cublasSetMathMode(handle, math) }
            .result()
            .map_err(CudaError::Blas)?;
        *slot = Some((Handle(handle), precision));
        Ok(handle)
    }

    /// Waits for everything queued on the device.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.bind()?;
        // SAFETY: the stream is live for the device's lifetime.
        unsafe { result::stream::synchronize(self.stream.0)? };
        Ok(())
    }

    /// Frees every cached buffer (in stream order, after the work queued before).
    fn release_cached(&self) -> Result<(), CudaError> {
        let cached: Vec<sys::CUdeviceptr> = lock(&self.free).drain().flat_map(|(_, v)| v).collect();
        for ptr in cached {
            // SAFETY: cached buffers belong to no array; later work cannot reach them.
            unsafe { result::free_async(ptr, self.stream.0)? };
        }
        Ok(())
    }

    /// Bytes held in the allocation cache, ready for reuse.
    pub fn cached_bytes(&self) -> usize {
        lock(&self.free)
            .iter()
            .map(|(size, v)| size * v.len())
            .sum()
    }
}

/// Device memory; dropping it returns it to the device's cache (or its graph's pool).
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    size: usize,
    device: Arc<CudaDevice>,
    pool: Option<Arc<GraphPool>>,
}

impl DeviceBuffer {
    pub fn address(&self) -> u64 {
        self.ptr
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        match &self.pool {
            Some(pool) => pool.give(self.ptr, self.size),
            None => lock(&self.device.free)
                .entry(self.size)
                .or_default()
                .push(self.ptr),
        }
    }
}

/// An array in GPU memory.
#[derive(Clone)]
pub struct DeviceArray {
    shape: Shape,
    dtype: DType,
    /// Where the array starts in its buffer, in bytes.
    offset: u64,
    buffer: Arc<DeviceBuffer>,
}

impl std::fmt::Debug for DeviceArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceArray({} {} on {:?})",
            self.dtype, self.shape, self.buffer.device
        )
    }
}

impl DeviceArray {
    /// An array of `shape` over `buffer` (which must be large enough).
    pub fn from_buffer(shape: Shape, dtype: DType, buffer: DeviceBuffer) -> DeviceArray {
        DeviceArray {
            shape,
            dtype,
            offset: 0,
            buffer: Arc::new(buffer),
        }
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The same buffer under another shape of the same element count (row-major reshape).
    pub fn reshaped(&self, shape: Shape) -> DeviceArray {
        DeviceArray {
            shape,
            dtype: self.dtype,
            offset: self.offset,
            buffer: self.buffer.clone(),
        }
    }

    /// The array's elements from `bytes` on as an array of `shape`, sharing its buffer (the
    /// caller checked that they lie within it, with the machine module's `checked_view`).
    pub(crate) fn view_at(&self, bytes: u64, shape: Shape) -> DeviceArray {
        DeviceArray {
            shape,
            dtype: self.dtype,
            offset: self.offset + bytes,
            buffer: self.buffer.clone(),
        }
    }

    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.buffer.device
    }

    pub fn address(&self) -> u64 {
        self.buffer.ptr + self.offset
    }

    /// Copies the array back to the host (waiting for the work that produces it).
    pub fn to_host(&self) -> Result<Array, CudaError> {
        let device = &self.buffer.device;
        device.not_recording("a download")?;
        device.bind()?;
        let n = self.shape.numel();
        let stream = device.stream.0;
        let elements = if self.dtype == DType::Bool {
            let mut raw = vec![0u8; n];
            // SAFETY: the buffer holds `n` bytes; the copy completes before `raw` is read.
            unsafe {
                result::memcpy_dtoh_async(&mut raw, self.address(), stream)?;
                result::stream::synchronize(stream)?;
            }
            Elements::Bool(raw.into_iter().map(|b| b != 0).collect())
        } else {
            let mut e = Elements::zeros(self.dtype, n);
            with_elements!(&mut e, v => {
                // SAFETY: the buffer holds `n` elements of this dtype; the copy completes
                // before `e` is read.
                unsafe {
                    result::memcpy_dtoh_async(v.as_mut_slice(), self.address(), stream)?;
                    result::stream::synchronize(stream)?;
                }
            });
            e
        };
        Ok(Array::new(self.shape.clone(), elements)?)
    }
}

/// A loaded PTX module.
pub struct Module {
    module: Handle<sys::CUmodule>,
    ctx: Arc<CudaContext>,
    /// The stream its kernels are queued on (the device's, which lives as long as the process).
    stream: Handle<sys::CUstream>,
}

/// One kernel entry point of a loaded module.
pub struct Function {
    function: Handle<sys::CUfunction>,
    _module: Arc<Module>,
}

impl Module {
    pub fn function(self: &Arc<Self>, name: &str) -> Result<Function, CudaError> {
        let c = CString::new(name).map_err(|_| CudaError::NoKernel(name.into()))?;
        self.ctx.bind_to_thread()?;
        // SAFETY: the module is loaded; the name is NUL-terminated.
        let f = unsafe { result::module::get_function(self.module.0, c) }
            .map_err(|_| CudaError::NoKernel(name.into()))?;
        Ok(Function {
            function: Handle(f),
            _module: self.clone(),
        })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: no function of the module outlives it (each holds an `Arc`), and launches
            // of its kernels still queued finish before it is unloaded.
            let _ = unsafe { result::stream::synchronize(self.stream.0) };
            // SAFETY: as above.
            let _ = unsafe { result::module::unload(self.module.0) };
        }
    }
}
