//! A launch: its blocks one after another, each block's threads with their registers,
//! program counters and states, warps run in a varying order, shuffles and barriers completed
//! when every live thread reaches them, and the block's shared memory with who used each byte
//! since the last barrier.
#![allow(
    clippy::panic,
    reason = "a kernel bug the emulator detects panics (see the crate docs)"
)]

use crate::memory::Memory;
use crate::parse::{Entry, Operand};
use crate::EmulatorError;

/// Where a thread is.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum State {
    Running,
    /// Waiting at the `bar.sync`, `shfl.sync` or `mma.sync` at this instruction.
    Waiting(usize),
    Exited,
}

/// One thread: its registers (`None` until written), program counter and state.
pub(crate) struct Thread {
    pub(crate) regs: Vec<Option<u64>>,
    pub(crate) pc: usize,
    pub(crate) state: State,
}

/// Who used a byte of shared memory since the last barrier (`epoch`).
#[derive(Clone, Copy, Default)]
struct SharedUse {
    epoch: u32,
    /// The warp that wrote it.
    writer: Option<usize>,
    /// The warps that read it, one bit each.
    readers: u32,
}

/// Bytes of one parameter in the parameter space: every parameter the renderer declares is a
/// `.u64` address.
const PARAM_BYTES: usize = 8;

/// One block of one launch.
pub(crate) struct Block<'a> {
    pub(crate) entry: &'a Entry,
    pub(crate) threads: Vec<Thread>,
    shared: Vec<u8>,
    /// Per byte of `shared`, its use since the last barrier.
    shared_uses: Vec<SharedUse>,
    /// Barriers the block has passed.
    epoch: u32,
    block_dim: u32,
    block: u32,
    grid: u32,
    pub(crate) params: &'a [u64],
}

impl Block<'_> {
    pub(crate) fn value(&self, t: usize, o: &Operand, line: &str) -> u64 {
        match o {
            Operand::Reg(r) => self.threads[t].regs[*r]
                .unwrap_or_else(|| panic!("thread {t}: register read before written: {line}")),
            Operand::Imm(v) => *v,
            Operand::Special(s) => u64::from(match s.as_str() {
                "%tid.x" => t as u32,
                "%ntid.x" => self.block_dim,
                "%ctaid.x" => self.block,
                "%nctaid.x" => self.grid,
                other => panic!("special register {other}"),
            }),
            Operand::Symbol(s) => match self.entry.shared.get(s) {
                Some(&(offset, _)) => offset,
                // A parameter's address in the parameter space, where they lie in order, 8
                // bytes each (all are `.u64`), as the CUDA ABI lays them out.
                None => match self.entry.params.iter().position(|p| p == s) {
                    Some(i) => (i * PARAM_BYTES) as u64,
                    None => panic!("symbol {s}: {line}"),
                },
            },
            other => panic!("operand {other:?}: {line}"),
        }
    }

    /// The address `o` names in its state space.
    pub(crate) fn address(&self, t: usize, o: &Operand, line: &str) -> u64 {
        let Operand::Address(base, offset) = o else {
            panic!("not an address: {line}")
        };
        self.value(t, base, line).wrapping_add(*offset as u64)
    }

    /// The parameter at `address` in the parameter space: a read between or beyond the
    /// parameters is a bug of the kernel's.
    pub(crate) fn param(&self, address: u64, line: &str) -> u64 {
        let at = usize::try_from(address).unwrap_or(usize::MAX);
        match self.params.get(at / PARAM_BYTES) {
            Some(&v) if at % PARAM_BYTES == 0 => v,
            _ => panic!("parameter space read at {address} outside the parameters: {line}"),
        }
    }

    pub(crate) fn set(&mut self, t: usize, o: &Operand, v: u64) {
        match o {
            Operand::Reg(r) => self.threads[t].regs[*r] = Some(v),
            other => panic!("destination {other:?}"),
        }
    }

    /// The `len` bytes of shared memory at `address` that thread `t` reads or writes: a use
    /// of bytes another warp wrote, or a write of bytes another warp read or wrote, with no
    /// barrier between is a race (the hardware may order the warps either way) and panics.
    pub(crate) fn shared_slice(
        &mut self,
        t: usize,
        address: u64,
        len: usize,
        write: bool,
        line: &str,
    ) -> &mut [u8] {
        let at = address as usize;
        assert!(
            at >= 16 && at + len <= self.shared.len(),
            "shared address {address} out of bounds: {line}"
        );
        let warp = t / 32;
        for used in &mut self.shared_uses[at..at + len] {
            if used.epoch != self.epoch {
                *used = SharedUse {
                    epoch: self.epoch,
                    ..SharedUse::default()
                };
            }
            let other_writer = used.writer.is_some_and(|w| w != warp);
            let other_reader = used.readers & !(1 << warp) != 0;
            let race = other_writer || (write && other_reader);
            assert!(
                !race,
                "thread {t}: shared memory race at {address} (no barrier since another warp used it): {line}"
            );
            if write {
                used.writer = Some(warp);
            } else {
                used.readers |= 1 << warp;
            }
        }
        &mut self.shared[at..at + len]
    }

    /// Completes the warp instruction (a shuffle or a matrix product) every live lane of
    /// `lanes` (a warp) waits at, if they do.
    fn complete_warp(&mut self, lanes: std::ops::Range<usize>) -> bool {
        let live: Vec<usize> = lanes
            .filter(|&t| self.threads[t].state != State::Exited)
            .collect();
        let Some(&first) = live.first() else {
            return false;
        };
        let State::Waiting(pc) = self.threads[first].state else {
            return false;
        };
        let ins = &self.entry.instrs[pc];
        let all = live
            .iter()
            .all(|&t| self.threads[t].state == State::Waiting(pc));
        if !matches!(ins.op[0].as_str(), "shfl" | "mma") || !all {
            return false;
        }
        assert_eq!(
            live.len(),
            32,
            "warp instruction with exited lanes: {}",
            ins.line
        );
        if ins.op[0] == "mma" {
            self.matrix_product(&live, pc);
        } else {
            self.shuffle(&live, pc);
        }
        for &t in &live {
            self.threads[t].pc = pc + 1;
            self.threads[t].state = State::Running;
        }
        true
    }

    /// The butterfly shuffle at `pc` of the warp's lanes `live`.
    fn shuffle(&mut self, live: &[usize], pc: usize) {
        let ins = &self.entry.instrs[pc];
        assert!(ins.op.iter().any(|m| m == "bfly"), "{}", ins.line);
        let sources: Vec<u64> = live
            .iter()
            .map(|&t| self.value(t, &ins.args[1], &ins.line))
            .collect();
        for &t in live {
            let offset = self.value(t, &ins.args[2], &ins.line) as usize;
            let v = sources[(t % 32) ^ offset];
            self.set(t, &ins.args[0], v);
        }
    }

    /// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c` at `pc`: the warp's
    /// `D = A·B + C` of a 16x16 bf16 `A`, a 16x8 bf16 `B` and 16x8 f32 `C`, each spread over
    /// the lanes as PTX lays out their fragments. Each element of `D` is summed in f64 (the bf16
    /// products are exact there) and rounded once to f32: the tensor cores' own order and
    /// intermediate precision are unspecified.
    fn matrix_product(&mut self, live: &[usize], pc: usize) {
        let ins = &self.entry.instrs[pc];
        let form = [
            "mma", "sync", "aligned", "m16n8k16", "row", "col", "f32", "bf16", "bf16", "f32",
        ];
        assert!(ins.op == form, "matrix product form: {}", ins.line);
        let regs = |k: usize, n: usize| match &ins.args[k] {
            Operand::Vector(r) if r.len() == n => r.clone(),
            other => panic!("mma operand {k} {other:?}: {}", ins.line),
        };
        let (d, a, b, c) = (regs(0, 4), regs(1, 4), regs(2, 2), regs(3, 4));
        let mut ma = [[0f64; 16]; 16];
        let mut mb = [[0f64; 8]; 16];
        let mut mc = [[0f64; 8]; 16];
        let bf16 = |bits: u64| f64::from(f32::from_bits((bits as u32) << 16));
        let read = |t: usize, r: usize| self.value(t, &Operand::Reg(r), &ins.line);
        for &t in live {
            let (group, pair) = ((t % 32) / 4, 2 * (t % 4));
            for (i, &r) in a.iter().enumerate() {
                // a0..a7 in pairs: rows g, g + 8, g, g + 8; columns +8 for the last two.
                let bits = read(t, r);
                let row = group + 8 * (i % 2);
                let col = pair + 8 * (i / 2);
                ma[row][col] = bf16(bits & 0xFFFF);
                ma[row][col + 1] = bf16(bits >> 16);
            }
            for (i, &r) in b.iter().enumerate() {
                let bits = read(t, r);
                let row = pair + 8 * i;
                mb[row][group] = bf16(bits & 0xFFFF);
                mb[row + 1][group] = bf16(bits >> 16);
            }
            for (i, &r) in c.iter().enumerate() {
                let x = f64::from(f32::from_bits(read(t, r) as u32));
                mc[group + 8 * (i / 2)][pair + i % 2] = x;
            }
        }
        for &t in live {
            let (group, pair) = ((t % 32) / 4, 2 * (t % 4));
            for (i, &r) in d.iter().enumerate() {
                let (row, col) = (group + 8 * (i / 2), pair + i % 2);
                let sum = (0..16).fold(mc[row][col], |s, k| s + ma[row][k] * mb[k][col]);
                self.threads[t].regs[r] = Some(u64::from((sum as f32).to_bits()));
            }
        }
    }

    /// Runs thread `t` until it waits or exits.
    fn run(&mut self, t: usize, memory: &mut Memory) {
        while self.threads[t].state == State::Running {
            let pc = self.threads[t].pc;
            let ins = &self.entry.instrs[pc];
            if let Some((p, neg)) = ins.guard {
                let v = self.value(t, &Operand::Reg(p), &ins.line) != 0;
                if v == neg {
                    self.threads[t].pc += 1;
                    continue;
                }
            }
            match ins.op[0].as_str() {
                "bar" | "shfl" | "mma" => {
                    self.threads[t].state = State::Waiting(pc);
                    return;
                }
                _ => self.step(t, pc, memory),
            }
        }
    }
}

/// Runs `entry` over a grid of `grid` blocks of `block` threads with parameter values
/// `params` (buffer addresses), one block after another.
///
/// A launch the driver would refuse is an [`EmulatorError::Launch`]: a parameter count not the
/// entry's, an empty grid or block, more threads than a block may have or than the entry's
/// `.maxntid` allows, other than its `.reqntid` requires, more static shared memory than 48 KiB.
///
/// # Panics
/// On a bug of the kernel's that the emulator detects (see the crate docs).
pub fn launch(
    entry: &Entry,
    grid: u32,
    block: u32,
    params: &[u64],
    memory: &mut Memory,
) -> Result<(), EmulatorError> {
    let refuse = |why: String| Err(EmulatorError::Launch(why));
    if params.len() != entry.params.len() {
        return refuse(format!(
            "{} parameters for an entry of {}",
            params.len(),
            entry.params.len()
        ));
    }
    if grid == 0 || block == 0 {
        return refuse(format!("launch of {grid} blocks of {block}"));
    }
    let max_threads = entry.max_threads.unwrap_or(1024).min(1024);
    if block > max_threads {
        return refuse(format!("block of {block} threads, more than {max_threads}"));
    }
    if let Some(required) = entry.required_threads.filter(|&n| n != block) {
        return refuse(format!(
            "block of {block} threads, not the {required} required"
        ));
    }
    if entry.shared_bytes > 48 * 1024 {
        return refuse(format!("{} bytes of shared memory", entry.shared_bytes));
    }
    for b in 0..grid {
        run_block(entry, b, grid, block, params, memory);
    }
    Ok(())
}

/// Runs block `b` of a launch of `grid` blocks of `block` threads.
fn run_block(entry: &Entry, b: u32, grid: u32, block: u32, params: &[u64], memory: &mut Memory) {
    let mut blk = Block {
        entry,
        threads: (0..block)
            .map(|_| Thread {
                regs: vec![None; entry.registers],
                pc: 0,
                state: State::Running,
            })
            .collect(),
        shared: vec![0xCD; entry.shared_bytes as usize],
        shared_uses: vec![SharedUse::default(); entry.shared_bytes as usize],
        epoch: 0,
        block_dim: block,
        block: b,
        grid,
        params,
    };
    let warps = (block as usize).div_ceil(32);
    let mut order: Vec<usize> = (0..warps).collect();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(b);
    loop {
        // Warps run in a varying order, each as far as it can alone: through its own
        // shuffles, up to a barrier. So a warp runs ahead of the others as on the hardware,
        // and a missing barrier shows.
        for k in (1..warps).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(k, (seed % (k as u64 + 1)) as usize);
        }
        let before: Vec<(usize, State)> = blk.threads.iter().map(|t| (t.pc, t.state)).collect();
        for &w in &order {
            let lanes = w * 32..((w + 1) * 32).min(block as usize);
            loop {
                for t in lanes.clone() {
                    blk.run(t, memory);
                }
                if !blk.complete_warp(lanes.clone()) {
                    break;
                }
            }
        }
        if blk.threads.iter().all(|t| t.state == State::Exited) {
            break;
        }
        // Barriers: every live thread of the block at the same one.
        let live: Vec<usize> = (0..block as usize)
            .filter(|&t| blk.threads[t].state != State::Exited)
            .collect();
        if let Some(State::Waiting(pc)) = live.first().map(|&t| blk.threads[t].state) {
            let all = live
                .iter()
                .all(|&t| blk.threads[t].state == State::Waiting(pc));
            if entry.instrs[pc].op[0] == "bar" && all {
                blk.epoch += 1;
                for &t in &live {
                    blk.threads[t].pc = pc + 1;
                    blk.threads[t].state = State::Running;
                }
            }
        }
        let after: Vec<(usize, State)> = blk.threads.iter().map(|t| (t.pc, t.state)).collect();
        assert!(
            before != after,
            "block {b}: threads wait at different synchronizations"
        );
    }
}
