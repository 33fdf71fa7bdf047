//! Universal-hash grouping (UHLB): the baseline of Guo and Zhou, "Stateful load balancing
//! for parallel stream processing", Euro-Par 2017 Workshops, LNCS 10659
//! (doi:10.1007/978-3-319-75178-8_7), Section 5 "Evaluation": UHLB "balances load with a
//! universal hash function rather than the key grouping … It returns h(t), where
//! h: `[p] → [n]` is chosen at random from a family of 2-universal hash functions."
//!
//! Specification: `docs/baselines.md`, section "Universal-hash grouping". A key `k` goes to
//!
//! ```text
//! ((a·x + b) mod P) mod n,    x = h_0(k), the key's 64-bit hash
//! ```
//!
//! the family of Carter and Wegman ("Universal classes of hash functions", Journal of
//! Computer and System Sciences 18(2), 1979), one member drawn per grouper.
//!
//! # Choices (the paper names the family only)
//!
//! * **Prime.** `P = 2^61 − 1`, a Mersenne prime: `a·x + b < 2^125` fits in 128 bits and
//!   `mod P` is two folds of 61 bits, exact (tested against `u128 %`).
//! * **Universe.** `x` is the full 64-bit `h_0(k)`, which may exceed `P`; since
//!   `(a·x + b) mod P = (a·(x mod P) + b) mod P`, the family acts on `x mod P`. Two distinct
//!   hashes then collide with probability about `2^-61·8` more than under the family alone,
//!   far below the `1/n` of the family.
//! * **Drawing `a` and `b`.** From
//!   `SplitMix64::for_grouper(seed, u64::from_le_bytes(*b"uhlb\0\0\0\0"))`: `a` is
//!   the first draw `v = next_u64() >> 3` (61 bits) with `1 ≤ v < P`, then `b` the next such
//!   draw with `v < P`. Rejection keeps both uniform; a draw is rejected with probability
//!   `2^-60`.
//! * No parameters: the grouper seed selects the member of the family. With one member
//!   fixed, each key has one worker, as in key grouping.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting};
use crate::hash::{HashFamily, Key};
use crate::loads::LoadVector;
use crate::params::ParamReader;
use crate::rng::SplitMix64;
use crate::grouper::restore_state;
use serde::{Deserialize, Serialize};

pub const INFO: GrouperInfo = GrouperInfo {
    name: "uhlb",
    title: "Universal-hash grouping (2-universal hash partitioning)",
    paper: "The UHLB baseline of Guo and Zhou, Stateful load balancing for parallel stream \
            processing, Euro-Par 2017 Workshops, doi:10.1007/978-3-319-75178-8_7, Section 5",
    params: &[],
    build,
    restore: restore_state::<UniversalHashGrouping>,
};

/// The prime of the family, the Mersenne prime `2^61 − 1`.
pub const PRIME: u64 = (1 << 61) - 1;

/// The stream index of the generator that draws `a` and `b`.
pub const RNG_STREAM: u64 = u64::from_le_bytes(*b"uhlb\0\0\0\0");

fn build(config: GrouperConfig, _: &mut ParamReader<'_>) -> Result<Box<dyn Grouper>, ConfigError> {
    Ok(Box::new(UniversalHashGrouping::new(config.hashes, config.loads)))
}

/// `v mod (2^61 − 1)` for `v < 2^126`.
#[inline]
pub const fn mod_mersenne61(v: u128) -> u64 {
    let p = PRIME as u128;
    // v < 2^126: one fold leaves less than 2^65 + 2^61, a second less than 2^61 + 2^5.
    let v = (v & p) + (v >> 61);
    let v = ((v & p) + (v >> 61)) as u64;
    if v >= PRIME { v - PRIME } else { v }
}

#[derive(Serialize, Deserialize)]
pub struct UniversalHashGrouping {
    hashes: HashFamily,
    a: u64,
    b: u64,
    loads: LoadVector,
}

impl UniversalHashGrouping {
    pub fn new(hashes: HashFamily, loads: LoadVector) -> Self {
        let (a, b) = Self::draw(hashes.grouper_seed());
        Self { hashes, a, b, loads }
    }

    /// The coefficients `(a, b)` drawn for grouper seed `seed`, as the module documents.
    pub fn draw(seed: u64) -> (u64, u64) {
        // Seeded with an output, not a state: see the module documentation.
        let mut rng = SplitMix64::for_grouper(seed, RNG_STREAM);
        let mut next_below_prime = |low: u64| loop {
            let v = rng.next_u64() >> 3;
            if (low..PRIME).contains(&v) {
                break v;
            }
        };
        let a = next_below_prime(1);
        let b = next_below_prime(0);
        (a, b)
    }

    /// The coefficients `(a, b)` of this grouper's hash function.
    pub fn coefficients(&self) -> (u64, u64) {
        (self.a, self.b)
    }

    /// `(a·h_0(k) + b) mod P`, before the reduction to a worker.
    #[inline]
    pub fn universal_hash(&self, key: Key<'_>) -> u64 {
        let x = self.hashes.hash(0, key);
        mod_mersenne61(self.a as u128 * x as u128 + self.b as u128)
    }
}

impl Grouper for UniversalHashGrouping {
    fn name(&self) -> &'static str {
        INFO.name
    }

    #[inline(always)]
    fn route(&mut self, key: Key<'_>) -> u32 {
        let worker = self.hashes.worker_of(self.universal_hash(key));
        self.loads.add(worker, 1);
        worker
    }

    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
        let built = built_as::<Self>(built)?;
        same_setting("hash family", &self.hashes, &built.hashes)?;
        same_setting("coefficients", &(self.a, self.b), &(built.a, built.b))
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.hashes.workers();
        if self.loads.workers() != n {
            return Err(format!("{} load counters for {n} workers", self.loads.workers()));
        }
        // `a` and `b` are drawn from the seed at build time and never change; in range,
        // they also keep `a·x + b` below the `2^126` that `mod_mersenne61` reduces.
        if (self.a, self.b) != Self::draw(self.hashes.grouper_seed()) {
            return Err("coefficients that are not the ones of the seed".to_owned());
        }
        Ok(())
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.loads.state_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_state_refuses_coefficients_of_another_seed() {
        let mut grouper = UniversalHashGrouping::new(HashFamily::new(4, 5), LoadVector::private(5));
        assert_eq!(grouper.check_state(), Ok(()));
        grouper.a += 1;
        assert!(grouper.check_state().is_err());
    }

    #[test]
    fn mersenne_reduction_is_exact_at_the_edges() {
        let p = PRIME as u128;
        let max = (p - 1) * (u64::MAX as u128) + (p - 1);
        for v in [0, 1, p - 1, p, p + 1, 2 * p, 1 << 64, (1 << 125) - 1, max, max - p] {
            assert_eq!(mod_mersenne61(v) as u128, v % p, "{v}");
        }
    }

    proptest::proptest! {
        #[test]
        fn mersenne_reduction_equals_the_remainder(a in 1u64..PRIME, x: u64, b in 0u64..PRIME) {
            let v = a as u128 * x as u128 + b as u128;
            proptest::prop_assert_eq!(mod_mersenne61(v) as u128, v % PRIME as u128);
        }

        #[test]
        fn coefficients_lie_in_their_ranges_and_differ_between_adjacent_seeds(seed: u64) {
            let (a, b) = UniversalHashGrouping::draw(seed);
            proptest::prop_assert!((1..PRIME).contains(&a) && b < PRIME);
            let (next_a, next_b) = UniversalHashGrouping::draw(seed.wrapping_add(1));
            proptest::prop_assert!(next_a != b && next_a != a && next_b != b);
        }
    }
}
