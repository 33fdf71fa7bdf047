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
//!   With `s = 0`, `seed_i = i`, exactly the `h_i` of the specification of the baselines
//!   (`docs/baselines.md`, section "Common model").
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

/// The key a null is routed as under [`NullPolicy::Group`](crate::NullPolicy::Group): the
/// empty byte string.
pub const NULL_KEY: Key<'static> = Key::Bytes(b"");

/// A key as the groupers see it: an integer widened to 64 bits, or a byte string, which
/// a short string may carry inside its Arrow view.
///
/// `Key::Int(v)` and `Key::Bytes(&v.to_le_bytes())` are the same key: they hash alike, and
/// so do `Key::Inline(k)` and `Key::Bytes(k.bytes())`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key<'a> {
    Int(u64),
    Bytes(&'a [u8]),
    Inline(InlineKey),
}

impl Key<'_> {
    /// `XXH3_64bits_withSeed(bytes(self), seed)`.
    #[inline(always)]
    pub fn hash(self, seed: u64) -> u64 {
        match self {
            Key::Int(value) => hash_int_key(value, seed),
            Key::Bytes(bytes) if bytes.len().wrapping_sub(4) <= 12 => hash_4to16(bytes, seed),
            Key::Bytes(bytes) => hash_key(bytes, seed),
            Key::Inline(key) => key.hash(seed),
        }
    }

    /// The bytes the key stands for: an integer's are its 8 little-endian bytes.
    pub fn to_bytes(self) -> Vec<u8> {
        match self {
            Key::Int(value) => value.to_le_bytes().to_vec(),
            Key::Bytes(bytes) => bytes.to_vec(),
            Key::Inline(key) => key.padded_bytes()[..key.len()].to_vec(),
        }
    }
}

/// A key of at most 12 bytes, as an Arrow string view holds it: the length in the low 32
/// bits of the 16-byte view and the bytes from bit 32 on.
///
/// Hashed from the view in registers: the words XXH3 reads are shifts of the view, so no
/// key byte is loaded from memory again and no slice is bounds-checked. Polars stores
/// every string of up to 12 bytes this way. Bytes past the length are ignored, whatever
/// the producer left there.
#[derive(Clone, Copy, Debug)]
pub struct InlineKey(u128);

/// The longest key a string view holds inline.
pub const INLINE_KEY_MAX_LEN: usize = 12;

impl InlineKey {
    /// The key inside `view`, if the view holds its key inline.
    #[inline(always)]
    pub const fn from_view(view: u128) -> Option<Self> {
        if view as u32 as usize <= INLINE_KEY_MAX_LEN { Some(Self(view)) } else { None }
    }

    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.0 as u32 as usize
    }

    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key's bytes, zero-padded to 12.
    pub fn padded_bytes(&self) -> [u8; INLINE_KEY_MAX_LEN] {
        let mut bytes = [0u8; INLINE_KEY_MAX_LEN];
        bytes[..self.len()].copy_from_slice(&self.0.to_le_bytes()[4..4 + self.len()]);
        bytes
    }

    /// `XXH3_64bits_withSeed(key bytes, seed)`; the branch-free selection of
    /// [`hash_4to16`], from the view.
    #[inline(always)]
    fn hash(self, seed: u64) -> u64 {
        let len = self.len();
        if len < 4 {
            return hash_key(&self.padded_bytes()[..len], seed);
        }
        let data = self.0 >> 32;
        let first = data as u32 as u64;
        let last = (data >> (8 * (len - 4))) as u32 as u64;
        let last_word = (data >> (8 * (len.max(8) - 8))) as u64;
        let short = xxh3_4to8(last.wrapping_add(first << 32), len as u64, seed);
        let long = xxh3_9to16(data as u64, last_word, len as u64, seed);
        std::hint::select_unpredictable(len > 8, long, short)
    }
}

/// Equal when the keys are: the bytes past the length do not count.
impl PartialEq for InlineKey {
    fn eq(&self, other: &Self) -> bool {
        self.padded_bytes() == other.padded_bytes() && self.len() == other.len()
    }
}

impl Eq for InlineKey {}

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
    // XXH3 reads the first and last 4 bytes and puts the first ones high.
    xxh3_4to8(value.rotate_left(32), INT_KEY_LEN as u64, seed)
}

/// XXH3's path for 4 to 8 bytes, from `input = last 4 bytes + (first 4 bytes << 32)`.
#[inline(always)]
const fn xxh3_4to8(input: u64, len: u64, seed: u64) -> u64 {
    let seed = seed ^ (((seed as u32).swap_bytes() as u64) << 32);
    let flip = SECRET_FLIP_4TO8.wrapping_sub(seed);
    let mut h = input ^ flip;
    h ^= h.rotate_left(49) ^ h.rotate_left(24);
    h = h.wrapping_mul(RRMXMX_PRIME);
    h ^= (h >> 35).wrapping_add(len);
    h = h.wrapping_mul(RRMXMX_PRIME);
    h ^ (h >> 28)
}

/// XXH3's default secret, bytes 24..56 as four little-endian words: what the 9-to-16-byte
/// path reads.
const SECRET_24: u64 = 0x1f67_b3b7_a4a4_4072;
const SECRET_32: u64 = 0x78e5_c0cc_4ee6_79cb;
const SECRET_40: u64 = 0x2172_ffcc_7dd0_5a82;
const SECRET_48: u64 = 0x8e24_43f7_7446_08b8;
const XXH3_AVALANCHE_PRIME: u64 = 0x1656_6791_9E37_79F9;

/// XXH3's path for 9 to 16 bytes, from the first and the last 8 bytes (which overlap).
#[inline(always)]
const fn xxh3_9to16(first: u64, last: u64, len: u64, seed: u64) -> u64 {
    let low = first ^ (SECRET_24 ^ SECRET_32).wrapping_add(seed);
    let high = last ^ (SECRET_40 ^ SECRET_48).wrapping_sub(seed);
    let product = low as u128 * high as u128;
    let folded = product as u64 ^ (product >> 64) as u64;
    let mut h = len.wrapping_add(low.swap_bytes()).wrapping_add(high).wrapping_add(folded);
    h ^= h >> 37;
    h = h.wrapping_mul(XXH3_AVALANCHE_PRIME);
    h ^ (h >> 32)
}

/// `XXH3_64bits_withSeed(key, seed)` for keys of 4 to 16 bytes, the short keys of most
/// string columns.
///
/// XXH3 has one path for 4 to 8 bytes and one for 9 to 16. Both are computed here and the
/// result selected without a branch: on a column of mixed lengths the branch is taken at
/// random, and its mispredictions cost more than the second path. Every read is a 4-byte
/// read inside the key, valid from 4 bytes on; for keys of 9 bytes or more they compose
/// exactly the two 8-byte words XXH3 reads.
#[inline(always)]
fn hash_4to16(key: &[u8], seed: u64) -> u64 {
    let len = key.len();
    debug_assert!((4..=16).contains(&len));
    let read32 = |at: usize| -> u64 {
        let bytes: [u8; 4] = key[at..at + 4].try_into().expect("4 bytes");
        u32::from_le_bytes(bytes) as u64
    };
    let first = read32(0);
    let last = read32(len - 4);
    let first_word = first | read32(len.min(8) - 4) << 32;
    let last_word = read32(len.saturating_sub(8)) | last << 32;
    let short = xxh3_4to8(last.wrapping_add(first << 32), len as u64, seed);
    let long = xxh3_9to16(first_word, last_word, len as u64, seed);
    std::hint::select_unpredictable(len > 8, long, short)
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
/// cycles and dominated routing.
///
/// With `m = floor(2^64 / d)`, `q = floor(x * m / 2^64)` is `floor(x / d)` or one less
/// (Barrett reduction: `x * m / 2^64 > x / d - 1` because `x < 2^64` and
/// `2^64 / d - m < 1`), so `x - q * d` is below `2d` and one conditional subtraction makes
/// it exact, for every 64-bit `x` and `d`. For `d = 1` the formula's
/// `m` does not fit; `2^64 - 1` gives `r` in `{0, 1}` and the subtraction 0.
///
/// The stored multiplier is `ceil(2^128 / d)` (wrapped to 0 for `d = 1`), from an earlier
/// exact method that took four multiplications (Lemire, Kaser and Kurz, 2019); snapshots
/// hold it, so it stays, and its high half is `m` for every `d` from 2 on: the fraction
/// the ceiling adds is below `2^-64` and cannot carry into the high half, as `2^64 / d`
/// has a fractional part of at most `1 - 1/d`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(try_from = "FastModFields")]
pub struct FastMod {
    divisor: u64,
    multiplier: u128,
}

/// [`FastMod`]'s fields as a snapshot holds them, checked before they become one: a
/// multiplier that is not the divisor's would make [`Remainder::rem`] underflow.
#[derive(Deserialize)]
struct FastModFields {
    divisor: u64,
    multiplier: u128,
}

impl TryFrom<FastModFields> for FastMod {
    type Error = String;

    fn try_from(fields: FastModFields) -> Result<Self, String> {
        if fields.divisor == 0 {
            return Err("a modulus of 0".to_owned());
        }
        let built = FastMod::new(fields.divisor);
        if built.multiplier != fields.multiplier {
            return Err(format!("a multiplier that is not the one of modulus {}", fields.divisor));
        }
        Ok(built)
    }
}

impl FastMod {
    /// `divisor` must be at least 1.
    pub const fn new(divisor: u64) -> Self {
        assert!(divisor > 0, "FastMod needs a positive divisor");
        let multiplier = (u128::MAX / divisor as u128).wrapping_add(1);
        Self { divisor, multiplier }
    }

    pub const fn divisor(&self) -> u64 {
        self.divisor
    }

    /// The same remainder with its multiplier unpacked, for a loop that takes many.
    #[inline(always)]
    pub const fn barrett(&self) -> BarrettMod {
        let multiplier = if self.divisor == 1 { u64::MAX } else { (self.multiplier >> 64) as u64 };
        BarrettMod { divisor: self.divisor, multiplier }
    }

    /// `x % divisor`.
    #[inline]
    pub fn rem(&self, x: u64) -> u64 {
        Remainder::rem(self.barrett(), x)
    }
}

/// `x mod d` by Barrett reduction with `m = floor(2^64 / d)` (see [`FastMod`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarrettMod {
    divisor: u64,
    multiplier: u64,
}

/// An exact `x mod n` for one fixed `n`, in the form a batch loop is specialised for.
pub trait Remainder: Copy {
    fn rem(self, x: u64) -> u64;
}

impl Remainder for BarrettMod {
    #[inline(always)]
    fn rem(self, x: u64) -> u64 {
        let quotient = ((x as u128 * self.multiplier as u128) >> 64) as u64;
        let r = x - quotient * self.divisor;
        // `r - d` wraps to above `r` exactly when no correction is due. Whether it is due
        // is a coin flip to a branch predictor (a quarter of the keys at d = 1000), and
        // written as a comparison LLVM may turn it into a branch.
        r.min(r.wrapping_sub(self.divisor))
    }
}

/// `x mod n` for `n` a power of two: `x & (n - 1)`, one instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PowerOfTwoMod {
    mask: u64,
}

impl Remainder for PowerOfTwoMod {
    #[inline(always)]
    fn rem(self, x: u64) -> u64 {
        x & self.mask
    }
}

/// Calls `visit` with the cheapest exact [`Remainder`] for `divisor`: batch loops are
/// compiled once per remainder form and pick theirs once per batch.
#[inline(always)]
pub fn with_remainder<T>(divisor: FastMod, visit: impl RemainderVisitor<Output = T>) -> T {
    let d = divisor.divisor();
    if d.is_power_of_two() {
        visit.visit(PowerOfTwoMod { mask: d - 1 })
    } else {
        visit.visit(divisor.barrett())
    }
}

/// The body of a batch loop, generic over the remainder form (see [`with_remainder`]).
pub trait RemainderVisitor {
    type Output;
    fn visit<R: Remainder>(self, remainder: R) -> Self::Output;
}

/// The seeded hash functions `h_0, h_1, …` of one grouper, and their candidates
/// `h_i(k) mod n` over its `n` workers.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(try_from = "HashFamilyFields")]
pub struct HashFamily {
    seed: u64,
    workers: FastMod,
}

/// [`HashFamily`]'s fields as a snapshot holds them: a worker count must fit the `u32`
/// worker ids.
#[derive(Deserialize)]
struct HashFamilyFields {
    seed: u64,
    workers: FastMod,
}

impl TryFrom<HashFamilyFields> for HashFamily {
    type Error = String;

    fn try_from(fields: HashFamilyFields) -> Result<Self, String> {
        if u32::try_from(fields.workers.divisor()).is_err() {
            return Err(format!("{} workers", fields.workers.divisor()));
        }
        Ok(Self { seed: fields.seed, workers: fields.workers })
    }
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

    /// PKG's two candidates `(c_1, c_2)`, in tie-breaking order: `c_2` moves to
    /// `(c_2 + 1) mod n` when it equals `c_1` and `distinct` (Apache Storm's rule). The
    /// candidate rule of PKG, PK-M and the holistic groupers.
    #[inline(always)]
    pub fn two_candidates(&self, key: Key<'_>, distinct: bool) -> (u32, u32) {
        let first = self.candidate(1, key);
        let mut second = self.candidate(2, key);
        if distinct && second == first {
            second = if second + 1 == self.workers() { 0 } else { second + 1 };
        }
        (first, second)
    }

    /// `h mod n` as a [`FastMod`], for batch loops that specialise it (see
    /// [`with_remainder`]).
    pub const fn worker_modulus(&self) -> FastMod {
        self.workers
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
        // Around the multiples of d, where Barrett's quotient falls one short most often.
        for d in (2..200).chain([999, 1000, 1 << 20, (1 << 20) - 1]) {
            let fast = FastMod::new(d);
            let top = u64::MAX / d;
            for q in (0..50).chain(top - 50..=top) {
                let multiple = q * d;
                for x in [multiple, multiple.saturating_sub(1), multiple.saturating_add(d - 1)] {
                    assert_eq!(fast.rem(x), x % d, "{x} mod {d}");
                }
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
    fn every_remainder_form_is_exact() {
        for d in [1u64, 2, 3, 7, 8, 1000, 1024, (1 << 20) + 1, 1 << 20] {
            for x in [0, 1, 12345, u64::MAX, 1 << 40] {
                let (rem, form) = with_remainder(FastMod::new(d), Probe(x));
                assert_eq!(rem, x % d, "{x} mod {d}");
                assert_eq!(form.ends_with("PowerOfTwoMod"), d.is_power_of_two(), "{d}");
            }
        }
    }

    struct Probe(u64);

    impl RemainderVisitor for Probe {
        type Output = (u64, &'static str);
        fn visit<R: Remainder>(self, remainder: R) -> Self::Output {
            (remainder.rem(self.0), std::any::type_name::<R>())
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

    proptest::proptest! {
        #[test]
        fn short_keys_hash_as_xxh3(key in proptest::collection::vec(proptest::num::u8::ANY, 0..40), seed: u64) {
            proptest::prop_assert_eq!(Key::Bytes(&key).hash(seed), xxh3_64_with_seed(&key, seed));
        }
    }

    /// A string view holding `key` inline, with `padding` in the bytes past the key.
    fn view_of(key: &[u8], padding: u8) -> u128 {
        let mut raw = [padding; 16];
        raw[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
        raw[4..4 + key.len()].copy_from_slice(key);
        u128::from_le_bytes(raw)
    }

    proptest::proptest! {
        #[test]
        fn inline_keys_hash_as_xxh3_whatever_their_padding(
            key in proptest::collection::vec(proptest::num::u8::ANY, 0..=INLINE_KEY_MAX_LEN),
            padding: u8,
            seed: u64,
        ) {
            let inline = InlineKey::from_view(view_of(&key, padding)).unwrap();
            proptest::prop_assert_eq!(Key::Inline(inline).hash(seed), xxh3_64_with_seed(&key, seed));
            proptest::prop_assert_eq!(&inline.padded_bytes()[..key.len()], &key[..]);
            proptest::prop_assert_eq!(inline, InlineKey::from_view(view_of(&key, !padding)).unwrap());
        }
    }

    #[test]
    fn only_views_of_up_to_12_bytes_are_inline() {
        assert!(InlineKey::from_view(view_of(&[1; 12], 0)).is_some());
        assert!(InlineKey::from_view(13).is_none());
        assert!(InlineKey::from_view(u32::MAX as u128).is_none());
        let empty = InlineKey::from_view(view_of(b"", 0xff)).unwrap();
        assert!(empty.is_empty());
        assert_eq!(Key::Inline(empty).hash(5), xxh3_64_with_seed(b"", 5));
    }

    #[test]
    fn short_keys_of_every_length_hash_as_xxh3() {
        let bytes: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(151).wrapping_add(7)).collect();
        for len in 0..=bytes.len() {
            for seed in [0, 1, u64::MAX, candidate_seed(3, 2), 0x0123_4567_89ab_cdef] {
                let key = &bytes[..len];
                assert_eq!(Key::Bytes(key).hash(seed), xxh3_64_with_seed(key, seed), "len {len}");
                if len <= INLINE_KEY_MAX_LEN {
                    let inline = InlineKey::from_view(view_of(key, 0xa5)).unwrap();
                    assert_eq!(Key::Inline(inline).hash(seed), xxh3_64_with_seed(key, seed));
                }
            }
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
