//! SplitMix64: the seeded generator behind every random draw of keysplit.
//!
//! Frozen, like the key hash: it is specified by its few lines (Steele, Lea and Flood,
//! "Fast splittable pseudorandom number generators", OOPSLA 2014), so a draw reproduces on
//! every machine, in every release and in any language.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
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
