//! The layouts' one source of chance: a fixed-seed generator, so that every plan is the same
//! for the same input, natively and in WebAssembly.

/// A small, fast, fixed-seed generator (SplitMix64).
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    /// The generator's step.
    pub(crate) const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

    /// The generator's output function: a fixed, well-mixed hash of `z`.
    pub(crate) fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::GAMMA);
        Self::mix(self.0)
    }

    /// A value in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
