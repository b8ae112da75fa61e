//! A small, seedable, portable pseudo-random generator, shared by the model-only Monte Carlo, the
//! scenario, the simulator's faults and the engine's sampling.

/// A small, seedable, portable pseudo-random generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A uniform draw in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        #[allow(clippy::cast_precision_loss)] // 53 bits fit an f64 mantissa exactly
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit
    }
    /// A uniform index in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        #[allow(clippy::cast_possible_truncation)] // the result is < n, which is a usize
        let i = (self.next_u64() % n as u64) as usize;
        i
    }
}
