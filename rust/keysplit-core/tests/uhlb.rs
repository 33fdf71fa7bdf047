//! Universal-hash grouping (the UHLB baseline of Guo and Zhou, Euro-Par 2017 Workshops): a
//! worked example, a golden routing shared with the Python twin, and the routing
//! invariants: one worker per key, worker ids below `n`, deterministic routing, and a batch
//! routed as its keys one by one.

use std::collections::{HashMap, HashSet};

use keysplit_core::grouper::route_batch;

use keysplit_core::groupers::uhlb::{PRIME, UniversalHashGrouping};
use keysplit_core::hash::{HashFamily, hash_key};
use keysplit_core::params::Params;
use keysplit_core::registry::build;
use keysplit_core::{Key, KeyBatch, KeyValues, LoadVector, NullPolicy, OwnedKey};
use proptest::prelude::*;

/// Seed 0, 10 workers, key "apple", values printed by tests/reference_uhlb.py.
#[test]
fn routes_a_key_by_hand() {
    let (a, b) = UniversalHashGrouping::draw(0);
    assert_eq!((a, b), (714_393_656_571_916_682, 851_087_534_771_435_056));
    // x = h_0("apple") = XXH3-64("apple", seed 0).
    let x = hash_key(b"apple", 0);
    assert_eq!(x, 5_871_078_790_819_449_344);
    // (a·x + b) mod (2^61 − 1), in exact 128-bit arithmetic.
    let v = (a as u128 * x as u128 + b as u128) % PRIME as u128;
    assert_eq!(v, 510_370_938_693_886_036);
    // 510370938693886036 mod 10 = 6.
    let mut g = UniversalHashGrouping::new(HashFamily::new(0, 10), LoadVector::private(10));
    assert_eq!(g.universal_hash(Key::Bytes(b"apple")), v as u64);
    use keysplit_core::Grouper;
    assert_eq!(g.route(Key::Bytes(b"apple")), 6);
    assert_eq!(g.loads().snapshot()[6], 1);
}

fn fnv1a(workers: &[u32]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for byte in workers.iter().flat_map(|w| w.to_le_bytes()) {
        h = (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The stream of tests/choices.rs; the Python twin gives the same digest.
#[test]
fn routes_the_golden_stream_as_the_python_twin() {
    let mut g = build("uhlb", 37, 12345, &Params::new(), None).unwrap().grouper;
    let routed: Vec<u32> = (0u64..4000)
        .map(|i| match (i * 2_654_435_761) % 1000 {
            v if v < 60 => 0,
            v if v < 100 => 1,
            v if v < 130 => 2,
            v if v < 150 => 3,
            v => v % 500,
        })
        .map(|k| g.route(Key::Int(k)))
        .collect();
    assert_eq!(fnv1a(&routed), 0x6e49_25c3_1cf8_5fa5);
}

#[test]
fn takes_no_parameter() {
    let params = Params::from([("prime".to_owned(), keysplit_core::params::ParamValue::Int(7))]);
    let err = build("uhlb", 4, 0, &params, None).err().unwrap().to_string();
    assert!(err.contains("takes no parameter"), "{err}");
}

proptest! {
    #[test]
    fn one_worker_per_key_below_n_deterministic_and_batch_equals_single(
        keys in prop::collection::vec(prop::collection::vec(0u8..4, 0..3), 0..300),
        workers in 1u32..64,
        seed in any::<u64>(),
    ) {
        let run = || {
            let mut g = build("uhlb", u64::from(workers), seed, &Params::new(), None).unwrap().grouper;
            keys.iter().map(|k| g.route(Key::Bytes(k))).collect::<Vec<u32>>()
        };
        let single = run();
        prop_assert!(single.iter().all(|&w| w < workers));
        prop_assert_eq!(&single, &run());

        let mut g = build("uhlb", u64::from(workers), seed, &Params::new(), None).unwrap().grouper;
        let owned: Vec<OwnedKey> = keys.iter().cloned().map(OwnedKey::Bytes).collect();
        let batch = KeyBatch::new(KeyValues::Owned(&owned)).unwrap();
        let mut out = vec![u32::MAX; keys.len()];
        route_batch(g.as_mut(), &batch, NullPolicy::Raise, &mut out).unwrap();
        prop_assert_eq!(&out, &single);

        let (a, b) = UniversalHashGrouping::draw(seed);
        let hashes = HashFamily::new(seed, workers);
        let mut placed: HashMap<&[u8], HashSet<u32>> = HashMap::new();
        for (key, &worker) in keys.iter().zip(&single) {
            placed.entry(key).or_default().insert(worker);
            let x = hashes.hash(0, Key::Bytes(key));
            let v = (a as u128 * x as u128 + b as u128) % PRIME as u128;
            prop_assert_eq!(u128::from(worker), v % u128::from(workers));
        }
        prop_assert!(placed.values().all(|set| set.len() == 1));
    }
}
