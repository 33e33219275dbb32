//! A program's run recorded once and replayed by one launch (CUDA graphs), so that a step
//! costs its kernels' time rather than a host call per kernel: [`GpuProgram::record`] records
//! the work of a run on inputs of its own, and [`GpuProgram::replay`] copies a call's arguments
//! into those inputs, replays, and copies the results out of the recording's buffers (which
//! the next replay overwrites) into arrays of the caller's.
//!
//! Only work the device queues can be recorded: a plan with steps on the host (or control
//! flow, whose conditions the host reads) is refused.

use super::plan::GpuStep;
use super::program::GpuProgram;
use super::GpuRunError;
use ferrax_runtime::machine::GpuMachine;

/// A run of one program recorded on inputs of its own, replayed by that program only.
pub struct Recording<M: GpuMachine> {
    /// The identity of the program recorded ([`GpuProgram::id`]).
    program: u64,
    graph: M::Graph,
    inputs: Vec<M::Array>,
    outputs: Vec<M::Array>,
}

impl<M: GpuMachine> GpuProgram<M> {
    /// Records a run, for [`GpuProgram::replay`]. Refused for a plan with host steps or
    /// control flow, and (as [`GpuProgram::run_device`]) for one that does not fit in the
    /// device's memory. The recording holds the run's buffers while it lives.
    pub fn record(&self) -> Result<Recording<M>, GpuRunError> {
        let host = self
            .plan
            .steps
            .iter()
            .position(|s| matches!(s, GpuStep::Host(_) | GpuStep::Call { .. }));
        if let Some(step) = host {
            return Err(GpuRunError::NotRecordable(step));
        }
        self.check_memory()?;
        let inputs = self
            .plan
            .func
            .params
            .iter()
            .map(|ty| self.machine.alloc(ty))
            .collect::<Result<Vec<_>, _>>()?;
        self.machine.begin_capture()?;
        let outputs = self.run_planned(&inputs);
        // The recording ends whatever the run did.
        let graph = self.machine.end_capture();
        let (outputs, graph) = (outputs?, graph?);
        Ok(Recording {
            program: self.id(),
            graph,
            inputs,
            outputs,
        })
    }

    /// The program's results on `args` (arrays on the device) by a replay of `recording`:
    /// `args` copied into its inputs, its results copied into new arrays. Work is queued, not
    /// waited for. A recording of another program is refused.
    pub fn replay(
        &self,
        recording: &Recording<M>,
        args: &[M::Array],
    ) -> Result<Vec<M::Array>, GpuRunError> {
        if recording.program != self.id() {
            return Err(GpuRunError::ForeignRecording);
        }
        self.check_device_args(args)?;
        let machine = &self.machine;
        let len = |a: &M::Array| M::array_type(a).numel();
        for (arg, input) in args.iter().zip(&recording.inputs) {
            if len(arg) > 0 && M::address(arg) != M::address(input) {
                machine.copy_elements((arg, 0), (input, 0), len(arg))?;
            }
        }
        machine.replay(&recording.graph)?;
        recording
            .outputs
            .iter()
            .map(|o| {
                let out = machine.alloc(&M::array_type(o))?;
                if len(o) > 0 {
                    machine.copy_elements((o, 0), (&out, 0), len(o))?;
                }
                Ok(out)
            })
            .collect()
    }
}
