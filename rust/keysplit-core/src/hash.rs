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
//!
//! Integer keys reach the groupers as [`Key::Int`], hashed by [`hash_int_key`]: XXH3's own
//! 4-to-8-byte path written out for exactly 8 bytes, equal to hashing the bytes (tested),
//! and small enough to inline into every batch loop.

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// A key as the groupers see it: an integer widened to 64 bits, or a byte string.
///
/// `Key::Int(v)` and `Key::Bytes(&v.to_le_bytes())` are the same key: they hash alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key<'a> {
    Int(u64),
    Bytes(&'a [u8]),
}

impl Key<'_> {
    /// `XXH3_64bits_withSeed(bytes(self), seed)`.
    #[inline(always)]
    pub fn hash(self, seed: u64) -> u64 {
        match self {
            Key::Int(value) => hash_int_key(value, seed),
            Key::Bytes(bytes) => hash_key(bytes, seed),
        }
    }
}

impl<'a> From<&'a [u8]> for Key<'a> {
    fn from(bytes: &'a [u8]) -> Self {
        Key::Bytes(bytes)
    }
}

impl From<u64> for Key<'_> {
    fn from(value: u64) -> Self {
        Key::Int(value)
    }
}

impl From<i64> for Key<'_> {
    fn from(value: i64) -> Self {
        Key::Int(value as u64)
    }
}

/// XXH3's default secret, bytes 8..16 XOR bytes 16..24: the only part of it that the
/// 4-to-8-byte path reads.
const SECRET_FLIP_4TO8: u64 = 0x1cad_21f7_2c81_017c ^ 0xdb97_9083_e96d_d4de;
const RRMXMX_PRIME: u64 = 0x9FB2_1C65_1E98_DF25;

/// `XXH3_64bits_withSeed(value.to_le_bytes(), seed)`, computed without the length dispatch.
#[inline(always)]
pub const fn hash_int_key(value: u64, seed: u64) -> u64 {
    let seed = seed ^ (((seed as u32).swap_bytes() as u64) << 32);
    let flip = SECRET_FLIP_4TO8.wrapping_sub(seed);
    // XXH3 reads the first and last 4 bytes and puts the first ones high.
    let mut h = value.rotate_left(32) ^ flip;
    h ^= h.rotate_left(49) ^ h.rotate_left(24);
    h = h.wrapping_mul(RRMXMX_PRIME);
    h ^= (h >> 35).wrapping_add(INT_KEY_LEN as u64);
    h = h.wrapping_mul(RRMXMX_PRIME);
    h ^ (h >> 28)
}

/// The golden-ratio multiplier that spreads grouper seeds apart before candidate indices
/// are added, so that `(s, i)` and `(s', i')` never share a seed for small indices.
pub const SEED_STRIDE: u64 = 0x9E37_79B9_7F4A_7C15;

/// The byte length of an integer key once widened.
pub const INT_KEY_LEN: usize = 8;

/// The seed of [`fingerprint`]: the bytes of "keysplit", read as a little-endian integer.
pub const FINGERPRINT_SEED: u64 = u64::from_le_bytes(*b"keysplit");

/// `XXH3_64bits_withSeed(key, seed)`.
///
/// Kept out of line: inlined, XXH3's paths for every length make each grouper's routing
/// closure too large for the batch loops to inline it, which costs more than this call.
#[inline(never)]
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
pub fn fingerprint<'a>(key: impl Into<Key<'a>>) -> u64 {
    key.into().hash(FINGERPRINT_SEED)
}

/// The seed of hash function `h_index` for a grouper seeded with `grouper_seed`.
#[inline]
pub const fn candidate_seed(grouper_seed: u64, index: u64) -> u64 {
    grouper_seed.wrapping_mul(SEED_STRIDE).wrapping_add(index)
}

/// Exact `x mod d` by two multiplications instead of a division, which costs tens of
/// cycles and dominated routing (Lemire, Kaser and Kurz, "Faster remainder by direct
/// computation", 2019: with a 128-bit multiplier `ceil(2^128 / d)` the result is exact
/// for every 64-bit `x` and `d`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
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
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
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
    #[inline(always)]
    pub fn hash(&self, index: u64, key: Key<'_>) -> u64 {
        key.hash(candidate_seed(self.seed, index))
    }

    /// `h_index(key) mod n`.
    #[inline(always)]
    pub fn candidate(&self, index: u64, key: Key<'_>) -> u32 {
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
        let divisors =
            [1, 2, 3, 7, 8, 1000, (1 << 20) + 1, u32::MAX as u64, (1 << 63) + 5, u64::MAX];
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
            assert_eq!(family.hash(index, Key::Bytes(b"key")), hash_key(b"key", index));
        }
    }

    proptest::proptest! {
        #[test]
        fn integer_keys_hash_as_their_little_endian_bytes(value: u64, seed: u64) {
            proptest::prop_assert_eq!(hash_int_key(value, seed), hash_key(&value.to_le_bytes(), seed));
            proptest::prop_assert_eq!(fingerprint(value), fingerprint(&value.to_le_bytes()[..]));
        }
    }

    #[test]
    fn integer_keys_match_the_golden_vectors() {
        for &(key, seed, digest) in GOLDEN.iter().filter(|(key, _, _)| key.len() == 8) {
            let value = u64::from_le_bytes(key.try_into().unwrap());
            assert_eq!(hash_int_key(value, seed), digest);
        }
    }
}
