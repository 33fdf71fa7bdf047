//! Seeded synthetic key streams, reproducible on every machine.

use crate::rng::SplitMix64;

/// A finite Zipf distribution over ranks `0..keys`: rank `r` has probability proportional
/// to `(r + 1)^-z`. Key `0` is the hottest.
///
/// Sampling inverts the cumulative distribution with one uniform draw of [`SplitMix64`].
/// The weights use `libm`, a pure-Rust port of musl's libm, not the platform's `pow`,
/// whose last bit differs between C libraries.
#[derive(Clone, Debug)]
pub struct Zipf {
    cumulative: Vec<f64>,
    rng: SplitMix64,
}

/// Why a Zipf distribution cannot be built.
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidZipf(pub String);

impl std::fmt::Display for InvalidZipf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidZipf {}

/// The most keys a Zipf stream may have: its table costs 8 bytes a key.
pub const MAX_ZIPF_KEYS: u64 = 1 << 28;

impl Zipf {
    pub fn new(keys: u64, z: f64, seed: u64) -> Result<Self, InvalidZipf> {
        if keys == 0 || keys > MAX_ZIPF_KEYS {
            return Err(InvalidZipf(format!("keys must be in [1, {MAX_ZIPF_KEYS}], got {keys}")));
        }
        if !(z.is_finite() && z >= 0.0) {
            return Err(InvalidZipf(format!("z must be finite and at least 0, got {z}")));
        }
        let mut total = 0.0;
        let cumulative = (1..=keys)
            .map(|rank| {
                total += libm::pow(rank as f64, -z);
                total
            })
            .collect();
        Ok(Self { cumulative, rng: SplitMix64::new(seed) })
    }

    /// The next key rank.
    #[inline]
    pub fn next_key(&mut self) -> u64 {
        let total = *self.cumulative.last().expect("at least one key");
        let target = self.rng.next_f64() * total;
        let rank = self.cumulative.partition_point(|&c| c <= target);
        rank.min(self.cumulative.len() - 1) as u64
    }

    /// The number of keys.
    pub fn keys(&self) -> u64 {
        self.cumulative.len() as u64
    }

    /// The probability of rank `rank`, for `rank < keys()`.
    pub fn probability(&self, rank: u64) -> f64 {
        let rank = rank as usize;
        let below = if rank == 0 { 0.0 } else { self.cumulative[rank - 1] };
        (self.cumulative[rank] - below) / self.cumulative[self.cumulative.len() - 1]
    }

    /// Fills `out` with the next keys.
    pub fn fill(&mut self, out: &mut [u64]) {
        for slot in out {
            *slot = self.next_key();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hottest_key_appears_as_often_as_its_probability() {
        let mut zipf = Zipf::new(1000, 1.0, 7).unwrap();
        let draws = 200_000;
        let hits = (0..draws).filter(|_| zipf.next_key() == 0).count() as f64;
        let expected = zipf.probability(0) * draws as f64;
        // Binomial standard deviation is about 115 here; 5 of them is a safe margin.
        assert!((hits - expected).abs() < 600.0, "hits {hits} expected {expected}");
    }

    #[test]
    fn same_seed_same_stream_and_keys_stay_in_range() {
        let mut a = Zipf::new(50, 1.5, 3).unwrap();
        let mut b = Zipf::new(50, 1.5, 3).unwrap();
        for _ in 0..10_000 {
            let key = a.next_key();
            assert_eq!(key, b.next_key());
            assert!(key < 50);
        }
    }

    #[test]
    fn invalid_parameters_are_refused() {
        assert!(Zipf::new(0, 1.0, 0).is_err());
        assert!(Zipf::new(10, -1.0, 0).is_err());
        assert!(Zipf::new(10, f64::NAN, 0).is_err());
    }
}
