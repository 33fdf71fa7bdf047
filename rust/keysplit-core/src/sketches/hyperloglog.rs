//! HyperLogLog: Flajolet, Fusy, Gandouet and Meunier, "HyperLogLog: the analysis of a
//! near-optimal cardinality estimation algorithm", AofA 2007, with a 64-bit hash and no
//! large-range correction as in Heule, Nunkesser and Hall, "HyperLogLog in practice", EDBT
//! 2013, but without their empirical bias correction: the raw estimate, with linear counting
//! for small cardinalities.
//!
//! The registers are packed 5 bits each as in Katsipoulakis, Labrinidis and Chrysanthis,
//! "A holistic view of stream partitioning costs", VLDB 2017 (Section 5.1: 2^12 registers
//! of 5 bits), 2560 bytes at precision 12; the standard error is `1.04 / sqrt(2^p)`.
//!
//! # Specification
//!
//! * `h = hash_key(x.to_le_bytes(), HLL_SEED)`. Register index `j = h >> (64 - p)`, the top
//!   `p` bits. Rank `ρ = min(1 + leading_zeros(h << p), 31)`: the position of the first 1
//!   among the low `64 - p` bits, capped at 31, the largest value of 5 bits (the cap binds
//!   with probability 2^-30 per item).
//! * `insert(x)` sets `M[j] = max(M[j], ρ)`.
//! * With `m = 2^p`, `Z = Σ_j 2^-M[j]` (exact: kept as the integer `Σ_j 2^(31 - M[j])`) and
//!   `V` registers at 0: `E = α_m * m * m / Z`, and when `E <= 2.5 * m` and `V > 0` the
//!   linear-counting estimate `m * ln(m / V)` replaces it. `α_16 = 0.673`, `α_32 = 0.697`,
//!   `α_64 = 0.709`, `α_m = 0.7213 / (1 + 1.079 / m)` from `m = 128`. `ln` is `libm::log`,
//!   musl's, whose algorithm glibc (from 2.28) shares. There is no large-range correction:
//!   64-bit hashes make collisions negligible, and the 5-bit registers saturate first, near
//!   `2^31 * m` distinct items. Without Heule et al.'s bias tables the raw estimate runs high just above the switch, by about
//!   2% at 2.5m distinct items, fading out by 4m.
//! * Packing: register `j` is bits `5j .. 5j + 5` of the register bytes read as one
//!   little-endian integer, `5 * 2^p / 8` bytes.
//!
//! # The "already sent" probe
//!
//! The holistic partitioning paper (Section 3.2.2) asks whether a key was already sent to a
//! worker by estimating the worker's cardinality, updating a trial copy of its sketch with
//! the key, estimating again, and answering yes when the two estimates are equal. The
//! update changes the sketch exactly when the key's rank exceeds its register, which is the
//! test of [`HyperLogLog::maybe_contains`]. [`HyperLogLog::insert_would_change_estimate`]
//! is the paper's comparison of estimates itself; the two answer alike whenever the raw
//! estimate is in use, but under linear counting, which sees only the number of empty
//! registers, raising a register that was not empty leaves the estimate unchanged, so the
//! paper's test then answers "already sent" where `maybe_contains` answers "not sent".
//! Neither misses an inserted item; both give false positives.

use crate::hash::hash_key;
use crate::sketches::SketchError;
use crate::snapshot::SketchSnapshot;
use serde::{Deserialize, Serialize};

/// The seed of the register hash: the bytes of "hyperlog", read as a little-endian integer.
pub const HLL_SEED: u64 = u64::from_le_bytes(*b"hyperlog");

pub const MIN_PRECISION: u8 = 4;
pub const MAX_PRECISION: u8 = 16;

/// The largest rank a register holds: 5 bits.
pub const MAX_RANK: u8 = 31;

const REGISTER_BITS: usize = 5;
const REGISTER_MASK: u16 = (1 << REGISTER_BITS) - 1;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(try_from = "HyperLogLogFields")]
pub struct HyperLogLog {
    precision: u8,
    #[serde(with = "crate::snapshot::byte_vec")]
    packed: Vec<u8>,
    /// `V`, the registers still at 0.
    zero_registers: u32,
    /// `Σ_j 2^(MAX_RANK - M[j])`, at most `2^16 * 2^31`: `Z` scaled to an exact integer,
    /// so that the estimate is the same whatever order registers were raised in.
    scaled_inverse_sum: u64,
}

crate::sketches::checked_on_decode!(HyperLogLog, HyperLogLogFields {
    precision: u8,
    #[serde(with = "crate::snapshot::byte_vec")]
    packed: Vec<u8>,
    zero_registers: u32,
    scaled_inverse_sum: u64,
});

impl HyperLogLog {
    /// An empty sketch of `2^precision` registers, `precision` in 4..=16.
    pub fn new(precision: u8) -> Result<Self, SketchError> {
        if !(MIN_PRECISION..=MAX_PRECISION).contains(&precision) {
            return Err(SketchError::parameter(
                "precision",
                format!("must be in [{MIN_PRECISION}, {MAX_PRECISION}], got {precision}"),
            ));
        }
        let registers = 1usize << precision;
        Ok(Self {
            precision,
            packed: vec![0; registers * REGISTER_BITS / 8],
            zero_registers: registers as u32,
            scaled_inverse_sum: (registers as u64) << MAX_RANK,
        })
    }

    pub fn precision(&self) -> u8 {
        self.precision
    }

    /// The number of registers, `m = 2^precision`.
    pub fn registers_len(&self) -> usize {
        1 << self.precision
    }

    /// The register values, in index order.
    pub fn registers(&self) -> impl Iterator<Item = u8> + '_ {
        (0..self.registers_len()).map(|index| self.register(index))
    }

    /// Adds `item` to the set whose size is estimated.
    pub fn insert(&mut self, item: u64) {
        self.insert_raises(item);
    }

    /// Adds `item` and tells whether its register rose: only then can
    /// [`HyperLogLog::estimate`] change, so a caller that caches the estimate recomputes it
    /// only then.
    pub fn insert_raises(&mut self, item: u64) -> bool {
        let (index, rank) = self.position(item);
        let old = self.register(index);
        if rank > old {
            self.set_register(index, rank);
            self.zero_registers -= u32::from(old == 0);
            self.scaled_inverse_sum -= 1 << (MAX_RANK - old);
            self.scaled_inverse_sum += 1 << (MAX_RANK - rank);
        }
        rank > old
    }

    /// Whether `item` may have been inserted: its register already holds at least its rank,
    /// so inserting it would change nothing. Always true for an inserted item; also true,
    /// falsely, for an item whose register other items raised high enough.
    pub fn maybe_contains(&self, item: u64) -> bool {
        let (index, rank) = self.position(item);
        self.register(index) >= rank
    }

    /// Whether inserting `item` would change [`HyperLogLog::estimate`], compared bit for bit:
    /// the probe of the holistic partitioning paper, Section 3.2.2, which takes `false` to
    /// mean "already sent". See the module documentation for how it differs from
    /// [`HyperLogLog::maybe_contains`].
    pub fn insert_would_change_estimate(&self, item: u64) -> bool {
        let (index, rank) = self.position(item);
        let old = self.register(index);
        if rank <= old {
            return false;
        }
        let zero_registers = self.zero_registers - u32::from(old == 0);
        let scaled_inverse_sum =
            self.scaled_inverse_sum - (1 << (MAX_RANK - old)) + (1 << (MAX_RANK - rank));
        let after = self.estimate_from(zero_registers, scaled_inverse_sum);
        after.to_bits() != self.estimate().to_bits()
    }

    /// The estimated number of distinct items inserted.
    pub fn estimate(&self) -> f64 {
        self.estimate_from(self.zero_registers, self.scaled_inverse_sum)
    }

    /// Folds `other` in: each register becomes the larger of the two, which is the sketch of
    /// the union of both streams. Both need the same precision.
    pub fn merge(&mut self, other: &HyperLogLog) -> Result<(), SketchError> {
        if self.precision != other.precision {
            return Err(SketchError::Incompatible {
                reason: format!(
                    "HyperLogLog precisions differ: {} and {}",
                    self.precision, other.precision
                ),
            });
        }
        self.zero_registers = 0;
        self.scaled_inverse_sum = 0;
        for index in 0..self.registers_len() {
            let value = self.register(index).max(other.register(index));
            self.set_register(index, value);
            self.zero_registers += u32::from(value == 0);
            self.scaled_inverse_sum += 1 << (MAX_RANK - value);
        }
        Ok(())
    }

    pub fn clear(&mut self) {
        self.packed.fill(0);
        self.zero_registers = self.registers_len() as u32;
        self.scaled_inverse_sum = (self.registers_len() as u64) << MAX_RANK;
    }

    /// Bytes of packed registers: `5 * 2^precision / 8`.
    pub fn state_bytes(&self) -> usize {
        self.packed.len()
    }

    /// The register index and rank of `item`.
    #[inline]
    fn position(&self, item: u64) -> (usize, u8) {
        let hash = hash_key(&item.to_le_bytes(), HLL_SEED);
        let index = (hash >> (64 - self.precision)) as usize;
        // The shift fills with zeros, so an all-zero remainder ranks 65 and the cap takes it.
        let rank = ((hash << self.precision).leading_zeros() + 1).min(u32::from(MAX_RANK));
        (index, rank as u8)
    }

    fn estimate_from(&self, zero_registers: u32, scaled_inverse_sum: u64) -> f64 {
        let m = self.registers_len() as f64;
        let alpha = match self.registers_len() {
            16 => 0.673,
            32 => 0.697,
            64 => 0.709,
            _ => 0.7213 / (1.0 + 1.079 / m),
        };
        // Exact: the sum is below 2^53 and the divisor a power of two.
        let inverse_sum = scaled_inverse_sum as f64 / (1u64 << MAX_RANK) as f64;
        let raw = alpha * m * m / inverse_sum;
        if raw <= 2.5 * m && zero_registers > 0 {
            m * libm::log(m / f64::from(zero_registers))
        } else {
            raw
        }
    }

    /// The two bytes that hold register `index`, little-endian, and its offset in them.
    /// The last register ends on a byte boundary, so it has no second byte: it reads as 0.
    #[inline]
    fn word_of(&self, index: usize) -> (usize, u16, u32) {
        let bit = index * REGISTER_BITS;
        let byte = bit / 8;
        let high = self.packed.get(byte + 1).copied().unwrap_or(0);
        (byte, u16::from_le_bytes([self.packed[byte], high]), (bit % 8) as u32)
    }

    #[inline]
    fn register(&self, index: usize) -> u8 {
        let (_, word, shift) = self.word_of(index);
        ((word >> shift) & REGISTER_MASK) as u8
    }

    #[inline]
    fn set_register(&mut self, index: usize, value: u8) {
        let (byte, word, shift) = self.word_of(index);
        let word = (word & !(REGISTER_MASK << shift)) | (u16::from(value) << shift);
        let [low, high] = word.to_le_bytes();
        self.packed[byte] = low;
        if let Some(next) = self.packed.get_mut(byte + 1) {
            *next = high;
        }
    }
}

impl SketchSnapshot for HyperLogLog {
    const NAME: &'static str = "hyperloglog";

    fn validate(&self) -> Result<(), String> {
        if !(MIN_PRECISION..=MAX_PRECISION).contains(&self.precision) {
            return Err(format!("precision {} is out of range", self.precision));
        }
        let expected = self.registers_len() * REGISTER_BITS / 8;
        if self.packed.len() != expected {
            return Err(format!("{} register bytes, expected {expected}", self.packed.len()));
        }
        let (zero_registers, scaled_inverse_sum) =
            self.registers().fold((0u32, 0u64), |(zeros, sum), r| {
                (zeros + u32::from(r == 0), sum + (1u64 << (MAX_RANK - r)))
            });
        if (zero_registers, scaled_inverse_sum) != (self.zero_registers, self.scaled_inverse_sum) {
            return Err("the cached sums disagree with the registers".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::rng::SplitMix64;

    fn sketch_of(precision: u8, items: impl IntoIterator<Item = u64>) -> HyperLogLog {
        let mut sketch = HyperLogLog::new(precision).unwrap();
        items.into_iter().for_each(|item| sketch.insert(item));
        sketch
    }

    fn random_items(count: usize, seed: u64) -> impl Iterator<Item = u64> {
        let mut rng = SplitMix64::new(seed);
        (0..count).map(move |_| rng.next_u64())
    }

    #[test]
    fn precision_out_of_range_is_refused_with_a_message() {
        assert_eq!(
            HyperLogLog::new(3).unwrap_err().to_string(),
            "precision must be in [4, 16], got 3"
        );
        assert!(HyperLogLog::new(17).is_err());
    }

    #[test]
    fn packs_5_bits_per_register() {
        assert_eq!(HyperLogLog::new(12).unwrap().state_bytes(), 2560);
        assert_eq!(HyperLogLog::new(4).unwrap().state_bytes(), 10);
        assert_eq!(HyperLogLog::new(16).unwrap().state_bytes(), 40_960);
    }

    #[test]
    fn packing_round_trips_every_value_in_every_position() {
        for precision in [4, 5, 12] {
            let mut sketch = HyperLogLog::new(precision).unwrap();
            let m = sketch.registers_len();
            for offset in 0..32 {
                let value = |index: usize| ((index * 7 + offset) % 32) as u8;
                (0..m).for_each(|index| sketch.set_register(index, value(index)));
                assert!((0..m).all(|index| sketch.register(index) == value(index)), "{offset}");
            }
            // Writing one register leaves its neighbours alone.
            sketch.packed.fill(0xFF);
            sketch.set_register(m / 2, 0);
            let values: Vec<u8> = sketch.registers().collect();
            assert!(values.iter().enumerate().all(|(i, &v)| v == if i == m / 2 { 0 } else { 31 }));
        }
    }

    #[test]
    fn places_items_by_the_documented_bit_layout() {
        let mut sketch = HyperLogLog::new(10).unwrap();
        for item in random_items(100, 1) {
            let hash = hash_key(&item.to_le_bytes(), HLL_SEED);
            let index = (hash >> 54) as usize;
            let rank = ((hash << 10).leading_zeros() + 1).min(31) as u8;
            let expected = sketch.register(index).max(rank);
            sketch.insert(item);
            assert_eq!(sketch.register(index), expected);
        }
        assert_eq!(HLL_SEED, 0x676F_6C72_6570_7968);
    }

    #[test]
    fn estimates_within_three_standard_errors() {
        for precision in [12, 14] {
            let standard_error = 1.04 / f64::from(1u32 << precision).sqrt();
            for (distinct, seed) in [(1_000, 1), (10_000, 2), (100_000, 3), (1_000_000, 4)] {
                let estimate = sketch_of(precision, random_items(distinct, seed)).estimate();
                let relative = (estimate - distinct as f64).abs() / distinct as f64;
                assert!(
                    relative <= 3.0 * standard_error,
                    "p {precision}, {distinct} items: estimate {estimate}, error {relative}"
                );
            }
        }
    }

    #[test]
    fn repeats_do_not_count() {
        let items: Vec<u64> = random_items(5_000, 8).collect();
        let once = sketch_of(12, items.iter().copied());
        let thrice = sketch_of(12, items.iter().chain(&items).chain(&items).copied());
        assert_eq!(once, thrice);
        assert_eq!(sketch_of(12, []).estimate(), 0.0);
    }

    #[test]
    fn merge_is_the_sketch_of_the_union() {
        let left: Vec<u64> = random_items(30_000, 5).collect();
        let right: Vec<u64> =
            random_items(20_000, 6).chain(left[..10_000].iter().copied()).collect();
        let mut merged = sketch_of(12, left.iter().copied());
        merged.merge(&sketch_of(12, right.iter().copied())).unwrap();
        let union = sketch_of(12, left.iter().chain(&right).copied());
        assert!(merged.registers().eq(union.registers()));
        assert_eq!(merged, union);
        assert_eq!(merged.estimate().to_bits(), union.estimate().to_bits());
        let error = merged.merge(&HyperLogLog::new(11).unwrap()).unwrap_err();
        assert_eq!(error.to_string(), "cannot merge: HyperLogLog precisions differ: 12 and 11");
    }

    #[test]
    fn clear_empties_the_sketch() {
        let mut sketch = sketch_of(8, random_items(1_000, 2));
        sketch.clear();
        assert_eq!(sketch, HyperLogLog::new(8).unwrap());
    }

    #[test]
    fn the_papers_probe_compares_estimates_and_agrees_with_maybe_contains_in_the_raw_range() {
        let mut sketch = HyperLogLog::new(8).unwrap();
        let (mut differ, mut checked_raw) = (0, 0);
        for item in random_items(3_000, 13) {
            let mut trial = sketch.clone();
            trial.insert(item);
            let changes = trial.estimate().to_bits() != sketch.estimate().to_bits();
            assert_eq!(sketch.insert_would_change_estimate(item), changes);
            // An unchanged register leaves the estimate unchanged...
            assert!(!sketch.maybe_contains(item) || !changes);
            // ...and with no empty register the raw estimate is in use, which every register
            // moves.
            if sketch.zero_registers == 0 {
                assert_eq!(sketch.maybe_contains(item), !changes);
                checked_raw += 1;
            }
            // Linear counting ignores a register raised from a non-zero value.
            differ += usize::from(!sketch.maybe_contains(item) && !changes);
            sketch.insert(item);
        }
        assert!(differ > 0 && checked_raw > 1_000, "{differ} {checked_raw}");
    }

    proptest! {
        #[test]
        fn inserted_items_are_always_reported(
            items in prop::collection::vec(any::<u64>(), 1..500), precision in 4u8..=12,
        ) {
            let sketch = sketch_of(precision, items.iter().copied());
            for &item in &items {
                prop_assert!(sketch.maybe_contains(item));
                prop_assert!(!sketch.insert_would_change_estimate(item));
            }
        }

        #[test]
        fn an_insertion_that_raises_nothing_leaves_the_estimate(
            items in prop::collection::vec(any::<u64>(), 1..500), precision in 4u8..=12,
        ) {
            let mut sketch = HyperLogLog::new(precision).unwrap();
            for item in items {
                let (before, registers) = (sketch.estimate(), sketch.packed.clone());
                let raised = sketch.insert_raises(item);
                prop_assert_eq!(raised, sketch.packed != registers);
                if !raised {
                    prop_assert_eq!(sketch.estimate().to_bits(), before.to_bits());
                }
            }
        }

        #[test]
        fn incremental_sums_match_the_registers(
            items in prop::collection::vec(any::<u64>(), 0..500), precision in 4u8..=8,
        ) {
            let sketch = sketch_of(precision, items);
            let registers: Vec<u8> = sketch.registers().collect();
            prop_assert_eq!(sketch.zero_registers as usize, registers.iter().filter(|&&r| r == 0).count());
            let sum: u64 = registers.iter().map(|&r| 1u64 << (MAX_RANK - r)).sum();
            prop_assert_eq!(sketch.scaled_inverse_sum, sum);
        }
    }
}
