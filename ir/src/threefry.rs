//! The threefry2x32 hash (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011),
//! written once over an abstract word arithmetic ([`Words`]) so that the tracing frontend
//! (JAX's PRNG) and the StableHLO importer (`rng_bit_generator`) emit the same 20 rounds.

/// Rotation distances of the even and odd groups of four rounds.
const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];

/// Threefry's key-schedule parity constant.
const PARITY: u32 = 0x1BD1_1BDA;

/// Arithmetic on 32-bit words (`u32` values of one shape, or scalars the frontend
/// broadcasts), wrapping as `u32` does; each op may fail as the builder behind it does.
pub trait Words {
    type Word: Clone;
    type Error;
    fn add(&mut self, a: &Self::Word, b: &Self::Word) -> Result<Self::Word, Self::Error>;
    fn xor(&mut self, a: &Self::Word, b: &Self::Word) -> Result<Self::Word, Self::Error>;
    fn rotate_left(&mut self, x: &Self::Word, distance: u32) -> Result<Self::Word, Self::Error>;
    fn constant(&mut self, value: u32) -> Result<Self::Word, Self::Error>;
}

/// Threefry's key schedule for one key: the words added before the rounds and after each
/// group of four.
pub struct Schedule<W> {
    first: [W; 2],
    injections: Vec<[W; 2]>,
}

impl<W: Clone> Schedule<W> {
    /// The schedule of the key words `(k1, k2)`.
    pub fn new<O: Words<Word = W>>(ops: &mut O, k1: &W, k2: &W) -> Result<Schedule<W>, O::Error> {
        let mixed = ops.xor(k1, k2)?;
        let parity = ops.constant(PARITY)?;
        let ks = [k1.clone(), k2.clone(), ops.xor(&mixed, &parity)?];
        let mut injections = Vec::with_capacity(5);
        for block in 0..5usize {
            let count = ops.constant(block as u32 + 1)?;
            injections.push([
                ks[(block + 1) % 3].clone(),
                ops.add(&ks[(block + 2) % 3], &count)?,
            ]);
        }
        Ok(Schedule {
            first: [k1.clone(), k2.clone()],
            injections,
        })
    }
}

/// The 20-round threefry2x32 hash of the counter words `x` under the key `schedule`.
pub fn threefry2x32<O: Words>(
    ops: &mut O,
    schedule: &Schedule<O::Word>,
    x: [O::Word; 2],
) -> Result<[O::Word; 2], O::Error> {
    let [x0, x1] = x;
    let mut x0 = ops.add(&x0, &schedule.first[0])?;
    let mut x1 = ops.add(&x1, &schedule.first[1])?;
    for (block, [a, b]) in schedule.injections.iter().enumerate() {
        for distance in ROTATIONS[block % 2] {
            x0 = ops.add(&x0, &x1)?;
            let rotated = ops.rotate_left(&x1, distance)?;
            x1 = ops.xor(&rotated, &x0)?;
        }
        x0 = ops.add(&x0, a)?;
        x1 = ops.add(&x1, b)?;
    }
    Ok([x0, x1])
}
