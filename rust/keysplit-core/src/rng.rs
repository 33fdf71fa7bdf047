//! SplitMix64: the seeded generator behind every random draw of keysplit.
//!
//! Frozen, like the key hash: it is specified by its few lines (Steele, Lea and Flood,
//! "Fast splittable pseudorandom number generators", OOPSLA 2014), so a draw reproduces on
//! every machine, in every release and in any language.

use crate::hash::candidate_seed;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The generator of random stream `stream` (a tag such as `b"dalton\0\0"` read as a
    /// little-endian integer) of a grouper seeded with `grouper_seed`: the one way groupers
    /// seed their draws.
    ///
    /// It starts from the first output of `SplitMix64::new(candidate_seed(grouper_seed,
    /// stream))`, not from that seed itself: SplitMix64's state advances by the same
    /// golden-ratio constant that spreads grouper seeds, so seeded directly, seed `s + 1`
    /// would replay seed `s`'s draws shifted by one.
    pub fn for_grouper(grouper_seed: u64, stream: u64) -> Self {
        Self::new(Self::new(candidate_seed(grouper_seed, stream)).next_u64())
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw in `[0, 1)` with 53 random bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_grouper_seeds_draw_unrelated_streams() {
        let mut a = SplitMix64::for_grouper(0, 7);
        let mut b = SplitMix64::for_grouper(1, 7);
        let first: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let second: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert!(first.iter().all(|x| !second.contains(x)));
    }

    #[test]
    fn matches_the_published_reference_output() {
        // The reference C implementation (Vigna, splitmix64.c) seeded with 1234567.
        let mut rng = SplitMix64::new(1_234_567);
        let expected =
            [6_457_827_717_110_365_317, 3_203_168_211_198_807_973, 9_817_491_932_198_370_423];
        for value in expected {
            assert_eq!(rng.next_u64(), value);
        }
    }
}
