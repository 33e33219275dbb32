//! Where a tensor's data lives. `jit` compiles for the device of its inputs (JAX's
//! "computation follows data"): tensors moved to a GPU with [`Tensor::to_device`] make the
//! program run there, and its results stay there until read.

use crate::tensor::Inner;
use crate::{Error, Result, Tensor};
use ferrax_runtime::CudaDevice;
use std::fmt;
use std::sync::Arc;

#[derive(Clone)]
pub enum Device {
    Cpu,
    Cuda(Arc<CudaDevice>),
}

impl Device {
    /// NVIDIA GPU `ordinal`; an `Err` (never a panic) without a driver or such a GPU.
    pub fn cuda(ordinal: usize) -> Result<Device> {
        CudaDevice::new(ordinal)
            .map(Device::Cuda)
            .map_err(|e| Error::Device(e.to_string()))
    }

    pub fn is_cpu(&self) -> bool {
        matches!(self, Device::Cpu)
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        match (self, other) {
            (Device::Cpu, Device::Cpu) => true,
            (Device::Cuda(a), Device::Cuda(b)) => a.ordinal() == b.ordinal(),
            _ => false,
        }
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(d) => write!(f, "{d:?}"),
        }
    }
}

impl Tensor {
    /// The device holding the tensor's data (the CPU for tracers and specs).
    pub fn device(&self) -> Device {
        match &self.0 {
            Inner::Device { array, .. } => Device::Cuda(array.device().clone()),
            _ => Device::Cpu,
        }
    }

    /// The tensor's data copied to `device`.
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        match device {
            Device::Cpu => Ok(Tensor::new(self.to_array()?)),
            Device::Cuda(d) => {
                if let Inner::Device { array, .. } = &self.0 {
                    if array.device().ordinal() == d.ordinal() {
                        return Ok(self.clone());
                    }
                }
                let array = d
                    .upload(&self.to_array()?)
                    .map_err(|e| Error::Device(e.to_string()))?;
                Ok(Tensor::on_device(array))
            }
        }
    }
}
