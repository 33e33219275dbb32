//! Recorded runs (CUDA graphs): the work a program queues, captured once from the device's
//! stream and replayed by one launch, so that a step costs its kernels' time and not one host
//! call per kernel.
//!
//! A graph's kernels read and write the buffers they had when it was recorded, so those
//! buffers belong to the graph: while the device records, allocations come from the graph's
//! own pool (taken with `cuMemAlloc`, which relaxed capture allows, or reused from buffers the
//! recorded run already let go of, as replays do in the same order), and a buffer of the pool
//! returns to the pool, never to the device's cache, until the graph and every array over its
//! buffers are gone.

use super::{lock, CudaDevice, CudaError, Handle};
use cudarc::driver::{result, sys};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The buffers of a graph: every one allocated while it was recorded, and those free for the
/// recording to reuse.
pub(crate) struct GraphPool {
    device: Arc<CudaDevice>,
    all: Mutex<Vec<sys::CUdeviceptr>>,
    free: Mutex<HashMap<usize, Vec<sys::CUdeviceptr>>>,
}

impl GraphPool {
    /// A buffer of `size` bytes: one the recording let go of, or a new one.
    pub(crate) fn take(&self, size: usize) -> Result<sys::CUdeviceptr, CudaError> {
        if let Some(ptr) = lock(&self.free).get_mut(&size).and_then(Vec::pop) {
            return Ok(ptr);
        }
        self.device.bind()?;
        // SAFETY: a plain allocation; relaxed capture allows it.
        let ptr = unsafe { result::malloc_sync(size)? };
        lock(&self.all).push(ptr);
        Ok(ptr)
    }

    /// Takes back a buffer of `size` bytes.
    pub(crate) fn give(&self, ptr: sys::CUdeviceptr, size: usize) {
        lock(&self.free).entry(size).or_default().push(ptr);
    }
}

impl Drop for GraphPool {
    fn drop(&mut self) {
        if self.device.bind().is_err() {
            return;
        }
        // SAFETY: the stream lives as long as the device; replays still queued finish first.
        let _ = unsafe { result::stream::synchronize(self.device.stream.0) };
        for ptr in lock(&self.all).drain(..) {
            // SAFETY: no array and no graph reaches the buffer any more (each holds the pool).
            let _ = unsafe { result::free_sync(ptr) };
        }
    }
}

/// A recorded run, replayed on its device's stream.
pub struct CudaGraph {
    graph: Handle<sys::CUgraph>,
    /// The executable graph; the driver wants its launches serialized.
    exec: Mutex<Handle<sys::CUgraphExec>>,
    /// Its buffers, kept while it lives.
    _pool: Arc<GraphPool>,
    device: Arc<CudaDevice>,
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: the graph and its executable are this object's; replays still queued
            // hold the executable until they finish.
            let _ = unsafe { result::graph::exec_destroy(lock(&self.exec).0) };
            // SAFETY: as above.
            let _ = unsafe { result::graph::destroy(self.graph.0) };
        }
    }
}

impl CudaDevice {
    /// Starts recording the work queued on the device's stream, instead of running it, until
    /// [`CudaDevice::end_capture`]; allocations meanwhile come from the recording's pool.
    pub fn begin_capture(self: &Arc<Self>) -> Result<(), CudaError> {
        let mut capture = lock(&self.capture);
        if capture.is_some() {
            return Err(CudaError::Capture("already recording".into()));
        }
        // The recording allocates anew: the cache's buffers go back to the device first.
        self.release_cached()?;
        self.bind()?;
        // SAFETY: the stream is live; the frees queued just now complete first.
        unsafe { result::stream::synchronize(self.stream.0)? };
        // SAFETY: the stream is live; relaxed mode lets the recording allocate its buffers.
        unsafe {
            result::stream::begin_capture(
                self.stream.0,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
            )?
        };
        *capture = Some(Arc::new(GraphPool {
            device: self.clone(),
            all: Mutex::new(Vec::new()),
            free: Mutex::new(HashMap::new()),
        }));
        Ok(())
    }

    /// Ends the recording [`CudaDevice::begin_capture`] started: its graph, ready to replay.
    pub fn end_capture(self: &Arc<Self>) -> Result<CudaGraph, CudaError> {
        let pool = lock(&self.capture)
            .take()
            .ok_or_else(|| CudaError::Capture("not recording".into()))?;
        self.bind()?;
        // SAFETY: the stream is recording (begin_capture started it).
        let graph = unsafe { result::stream::end_capture(self.stream.0)? };
        if graph.is_null() {
            return Err(CudaError::Capture("the driver recorded no graph".into()));
        }
        // SAFETY: `graph` is the recording just ended.
        let exec =
            match unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) } {
                Ok(exec) => exec,
                Err(e) => {
                    // SAFETY: as above; nothing else holds it.
                    let _ = unsafe { result::graph::destroy(graph) };
                    return Err(e.into());
                }
            };
        Ok(CudaGraph {
            graph: Handle(graph),
            exec: Mutex::new(Handle(exec)),
            _pool: pool,
            device: self.clone(),
        })
    }

    /// Queues a replay of `graph` on the device's stream.
    pub fn replay(&self, graph: &CudaGraph) -> Result<(), CudaError> {
        if !Arc::ptr_eq(&graph.device.ctx, &self.ctx) {
            return Err(CudaError::Capture(
                "a graph recorded on another device".into(),
            ));
        }
        self.bind()?;
        let exec = lock(&graph.exec);
        // SAFETY: the graph is live and was recorded on this device; its buffers are its pool's.
        unsafe { result::graph::launch(exec.0, self.stream.0)? };
        Ok(())
    }

    /// Refuses a copy between host and device while a graph is recorded.
    pub(crate) fn not_recording(&self, what: &str) -> Result<(), CudaError> {
        match lock(&self.capture).is_some() {
            true => Err(CudaError::Capture(format!("{what} while recording"))),
            false => Ok(()),
        }
    }

    /// The pool of the recording under way, if any.
    pub(crate) fn recording(&self) -> Option<Arc<GraphPool>> {
        lock(&self.capture).clone()
    }
}
