//! Fuzzes the frozen key hash: every grouper's routing rests on it, so it must be a pure
//! function of (key bytes, seed), an integer key must hash as its 8 little-endian bytes
//! whichever path computes it, and a candidate must always be a valid worker.

#![no_main]

use arbitrary::Arbitrary;
use keysplit_core::Key;
use keysplit_core::hash::{
    FINGERPRINT_SEED, FastMod, HashFamily, INLINE_KEY_MAX_LEN, InlineKey, SEED_STRIDE,
    candidate_seed, fingerprint, hash_int_key, hash_key,
};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    seed: u64,
    index: u64,
    /// Zero is mapped to one: a family needs at least one worker.
    workers: u32,
    /// Any divisor for `FastMod` (zero mapped to one), far beyond worker counts, because
    /// its exactness proof covers every 64-bit divisor.
    divisor: u64,
    /// Where in a larger buffer a second copy of the key starts, so that the same bytes are
    /// also hashed at another address and alignment (XXH3 reads unaligned words).
    shift: u8,
    int_key: u64,
    key: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let Input { seed, index, workers, divisor, shift, int_key, key } = input;
    let workers = workers.max(1);

    // Determinism: same bytes, same seed, same digest, wherever the bytes live.
    let digest = hash_key(&key, seed);
    assert_eq!(hash_key(&key, seed), digest);
    let shift = usize::from(shift % 64);
    let mut moved = vec![0xA5_u8; shift + key.len()];
    moved[shift..].copy_from_slice(&key);
    let moved = &moved[shift..];
    assert_eq!(hash_key(moved, seed), digest, "hash depends on the key's address");
    assert_eq!(Key::Bytes(&key).hash(seed), digest);

    // A key of up to 12 bytes inside a string view hashes from the view, and the bytes
    // past its length (here `shift`, whatever a producer left there) do not count.
    if key.len() <= INLINE_KEY_MAX_LEN {
        let mut view = [shift as u8; 16];
        view[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
        view[4..4 + key.len()].copy_from_slice(&key);
        let inline = InlineKey::from_view(u128::from_le_bytes(view)).expect("an inline view");
        assert_eq!(Key::Inline(inline).hash(seed), digest, "inline key {key:?}");
    }

    // The hand-written 8-byte path must be XXH3 itself: integer columns route through it
    // while the same key as bytes (or from Python) goes through `hash_key`.
    let int_bytes = int_key.to_le_bytes();
    let int_digest = hash_key(&int_bytes, seed);
    assert_eq!(hash_int_key(int_key, seed), int_digest, "int {int_key} seed {seed}");
    assert_eq!(Key::Int(int_key).hash(seed), int_digest);
    assert_eq!(Key::from(int_key as i64).hash(seed), int_digest);

    // The fingerprint is the documented fixed-seed hash, so sketches in every grouper agree.
    let print = fingerprint(&key[..]);
    assert_eq!(fingerprint(moved), print);
    assert_eq!(print, hash_key(&key, FINGERPRINT_SEED));
    assert_eq!(fingerprint(int_key), fingerprint(&int_bytes[..]));
    assert_eq!(fingerprint(int_key as i64), fingerprint(Key::Int(int_key)));

    // Exact remainder by multiplication, for any divisor.
    let divisor = divisor.max(1);
    let fast = FastMod::new(divisor);
    assert_eq!(fast.divisor(), divisor);
    for x in [digest, int_digest, int_key, u64::MAX - int_key] {
        assert_eq!(fast.rem(x), x % divisor, "{x} mod {divisor}");
    }

    // h_i is XXH3 under seed s * STRIDE + i (mod 2^64), as the specification freezes it.
    let family = HashFamily::new(seed, workers);
    assert_eq!(family.grouper_seed(), seed);
    assert_eq!(family.workers(), workers);
    let expected_seed = seed.wrapping_mul(SEED_STRIDE).wrapping_add(index);
    assert_eq!(candidate_seed(seed, index), expected_seed);
    let h = family.hash(index, Key::Bytes(&key));
    assert_eq!(h, hash_key(&key, expected_seed));
    assert_eq!(family.hash(index, Key::Bytes(moved)), h);
    let int_h = family.hash(index, Key::Int(int_key));
    assert_eq!(int_h, family.hash(index, Key::Bytes(&int_bytes)));

    // A candidate is h mod n, hence always a worker in 0..n.
    let n = u64::from(workers);
    for (key, h) in [(Key::Bytes(&key), h), (Key::Int(int_key), int_h)] {
        let candidate = family.candidate(index, key);
        assert!(candidate < workers, "candidate {candidate} for {workers} workers");
        assert_eq!(u64::from(candidate), h % n);
    }
    assert_eq!(
        family.candidate(index, Key::Bytes(moved)),
        family.candidate(index, Key::Bytes(&key))
    );
    assert_eq!(u64::from(family.worker_of(digest)), digest % n);
});
