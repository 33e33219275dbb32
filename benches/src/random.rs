//! w16 (workloads.md): 2^24 uniform f32s from one threefry2x32 key, compiled (JAX's
//! `jit(lambda k: random.uniform(k, (1 << 24,)))`); bandwidth counts the 4-byte outputs.

use crate::{emit, timed, Args};
use ferrax::random::{self, Key};
use ferrax::{jit, DType, Result};

pub fn rows(args: &Args) -> Result<()> {
    if args.want("w16_random_uniform") {
        let n = 1 << 24;
        let f = jit(move |k: Key| random::uniform(&k, [n], DType::F32));
        let key = random::key(0);
        let t = timed(args.reps, || f.call(key.clone()).map(drop))?;
        emit("w16_random_uniform", t, Some(4.0 * n as f64), None);
    }
    Ok(())
}
