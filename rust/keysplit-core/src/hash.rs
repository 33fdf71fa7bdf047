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

/// A family of seeded hash functions `h_0, h_1, …` for one grouper seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashFamily {
    seed: u64,
}

impl HashFamily {
    pub const fn new(grouper_seed: u64) -> Self {
        Self { seed: grouper_seed }
    }

    /// The grouper seed this family was built from.
    pub const fn grouper_seed(&self) -> u64 {
        self.seed
    }

    /// `h_index(key)`.
    #[inline]
    pub fn hash(&self, index: u64, key: &[u8]) -> u64 {
        hash_key(key, candidate_seed(self.seed, index))
    }

    /// `h_index(key) mod workers`.
    #[inline]
    pub fn candidate(&self, index: u64, key: &[u8], workers: u32) -> u32 {
        (self.hash(index, key) % u64::from(workers)) as u32
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
    fn seed_zero_gives_the_specification_hashes() {
        let family = HashFamily::new(0);
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
