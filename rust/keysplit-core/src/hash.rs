//! The stable, seeded key hash every grouper routes with.
//!
//! # Specification (frozen: changing it changes every routing)
//!
//! * A key is a byte string. Strings are their UTF-8 bytes and binary keys their raw bytes.
//!   Integer keys of any width are widened to 64 bits (sign-extended when signed) and taken
//!   as their 8 little-endian bytes, so `5_i32`, `5_i64` and `5_u64` are the same key.
//!   An unsigned value above `i64::MAX` therefore shares its bytes with a negative `i64`;
//!   that only makes the two keys share a hash, it never merges their results.
//! * `h_i(k) = XXH3_64bits_withSeed(bytes(k), seed_i)` with
//!   `seed_i = s * 0x9E3779B97F4A7C15 + i (mod 2^64)`, where `s` is the grouper's seed.
//!   With `s = 0`, `seed_i = i`, exactly the `h_i` of the specification of the baselines.
//! * A candidate worker is `h_i(k) mod n`.
//!
//! XXH3 is a published, versioned format whose output is frozen; `xxhash-rust` and the
//! reference C library agree on it, and the golden vectors in this module's tests were
//! produced with Python's `xxhash` package.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The golden-ratio multiplier that spreads grouper seeds apart before candidate indices
/// are added, so that `(s, i)` and `(s', i')` never share a seed for small indices.
pub const SEED_STRIDE: u64 = 0x9E37_79B9_7F4A_7C15;

/// The byte length of an integer key once widened.
pub const INT_KEY_LEN: usize = 8;

/// The seed of [`fingerprint`]: the bytes of "keysplit", read as a little-endian integer.
pub const FINGERPRINT_SEED: u64 = u64::from_le_bytes(*b"keysplit");

/// `XXH3_64bits_withSeed(key, seed)`.
#[inline]
pub fn hash_key(key: &[u8], seed: u64) -> u64 {
    xxh3_64_with_seed(key, seed)
}

/// The 64-bit identity under which sketches and routing tables store a key.
///
/// Independent of the grouper seed, so that every grouper and sketch agrees on it. Two
/// distinct keys share a fingerprint with probability 2^-64; they would then share sketch
/// counts and table entries, which changes where they are routed, never whether a tuple
/// is routed or counted downstream.
#[inline]
pub fn fingerprint(key: &[u8]) -> u64 {
    hash_key(key, FINGERPRINT_SEED)
}

/// The seed of hash function `h_index` for a grouper seeded with `grouper_seed`.
#[inline]
pub const fn candidate_seed(grouper_seed: u64, index: u64) -> u64 {
    grouper_seed.wrapping_mul(SEED_STRIDE).wrapping_add(index)
}

/// The 8 little-endian bytes of a signed integer key.
#[inline]
pub const fn signed_key_bytes(value: i64) -> [u8; INT_KEY_LEN] {
    value.to_le_bytes()
}

/// The 8 little-endian bytes of an unsigned integer key.
#[inline]
pub const fn unsigned_key_bytes(value: u64) -> [u8; INT_KEY_LEN] {
    value.to_le_bytes()
}

/// Exact `x mod d` by two multiplications instead of a division, which costs tens of
/// cycles and dominated routing (Lemire, Kaser and Kurz, "Faster remainder by direct
/// computation", 2019: with a 128-bit multiplier `ceil(2^128 / d)` the result is exact
/// for every 64-bit `x` and `d`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastMod {
    divisor: u64,
    multiplier: u128,
}

impl FastMod {
    /// `divisor` must be at least 1.
    pub const fn new(divisor: u64) -> Self {
        assert!(divisor > 0, "FastMod needs a positive divisor");
        // ceil(2^128 / d); it wraps to 0 for d = 1, where every remainder is 0.
        let multiplier = (u128::MAX / divisor as u128).wrapping_add(1);
        Self { divisor, multiplier }
    }

    pub const fn divisor(&self) -> u64 {
        self.divisor
    }

    /// `x % divisor`.
    #[inline]
    pub const fn rem(&self, x: u64) -> u64 {
        let fraction = self.multiplier.wrapping_mul(x as u128);
        // The high 64 bits of the 192-bit product fraction * divisor.
        let d = self.divisor as u128;
        let low = (fraction as u64 as u128 * d) >> 64;
        let high = (fraction >> 64) * d;
        ((high + low) >> 64) as u64
    }
}

/// The seeded hash functions `h_0, h_1, …` of one grouper, and their candidates
/// `h_i(k) mod n` over its `n` workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashFamily {
    seed: u64,
    workers: FastMod,
}

impl HashFamily {
    /// `workers` must be at least 1.
    pub const fn new(grouper_seed: u64, workers: u32) -> Self {
        Self { seed: grouper_seed, workers: FastMod::new(workers as u64) }
    }

    /// The grouper seed this family was built from.
    pub const fn grouper_seed(&self) -> u64 {
        self.seed
    }

    pub const fn workers(&self) -> u32 {
        self.workers.divisor() as u32
    }

    /// `h_index(key)`.
    #[inline]
    pub fn hash(&self, index: u64, key: &[u8]) -> u64 {
        hash_key(key, candidate_seed(self.seed, index))
    }

    /// `h_index(key) mod n`.
    #[inline]
    pub fn candidate(&self, index: u64, key: &[u8]) -> u32 {
        self.workers.rem(self.hash(index, key)) as u32
    }

    /// `value mod n`, for a hash computed elsewhere.
    #[inline]
    pub fn worker_of(&self, value: u64) -> u32 {
        self.workers.rem(value) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (key bytes, seed, XXH3-64 digest) as printed by Python's `xxhash.xxh3_64_intdigest`.
    const GOLDEN: &[(&[u8], u64, u64)] = include!("../tests/data/xxh3_golden.in");

    #[test]
    fn golden_vectors_match_the_reference_implementation() {
        assert!(GOLDEN.len() >= 10);
        for &(key, seed, digest) in GOLDEN {
            assert_eq!(hash_key(key, seed), digest, "key {key:?} seed {seed}");
        }
    }

    #[test]
    fn fast_mod_equals_the_remainder_at_the_edges() {
        let divisors = [1, 2, 3, 7, 8, 1000, (1 << 20) + 1, u32::MAX as u64, (1 << 63) + 5, u64::MAX];
        let values = [0, 1, 2, 12345, 1 << 32, (1 << 63) - 1, 1 << 63, u64::MAX - 1, u64::MAX];
        for d in divisors {
            let fast = FastMod::new(d);
            for x in values {
                assert_eq!(fast.rem(x), x % d, "{x} mod {d}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn fast_mod_equals_the_remainder(x: u64, d in 1u64..) {
            proptest::prop_assert_eq!(FastMod::new(d).rem(x), x % d);
        }

        #[test]
        fn fast_mod_equals_the_remainder_for_worker_counts(x: u64, d in 1u64..(1 << 20)) {
            proptest::prop_assert_eq!(FastMod::new(d).rem(x), x % d);
        }
    }

    #[test]
    fn seed_zero_gives_the_specification_hashes() {
        let family = HashFamily::new(0, 8);
        for index in 0..4 {
            assert_eq!(family.hash(index, b"key"), hash_key(b"key", index));
        }
    }

    #[test]
    fn integer_widths_widen_to_the_same_key() {
        assert_eq!(signed_key_bytes(i64::from(-5_i32)), signed_key_bytes(-5));
        assert_eq!(unsigned_key_bytes(u64::from(7_u32)), signed_key_bytes(7));
    }
}
