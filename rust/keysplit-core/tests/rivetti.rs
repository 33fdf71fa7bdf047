//! Distribution-aware key grouping (`dkg_rivetti`): worked examples, a golden routing
//! produced by the Python twin (`tests/reference_rivetti.py`) and routing invariants.

use std::collections::{HashMap, HashSet};

use keysplit_core::grouper::route_batch;

use keysplit_core::groupers::rivetti::{BucketHash, DistributionAwareKeyGrouping, PRIME};
use keysplit_core::hash::{HashFamily, fingerprint};
use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::build;
use keysplit_core::{Grouper, Key, KeyBatch, KeyValues, LoadVector, NullPolicy, OwnedKey};
use proptest::prelude::*;

fn params(learning: i64) -> Params {
    Params::from([("learning_tuples".to_owned(), ParamValue::Int(learning))])
}

fn dkg(workers: u32, seed: u64, learning: u64) -> DistributionAwareKeyGrouping {
    let hashes = HashFamily::new(seed, workers);
    DistributionAwareKeyGrouping::new(hashes, learning, LoadVector::private(workers)).unwrap()
}

fn kg(workers: u32, seed: u64, key: &[u8]) -> u32 {
    HashFamily::new(seed, workers).candidate(0, Key::Bytes(key))
}

#[test]
fn learning_routes_by_key_grouping_then_the_heavy_hitter_gets_a_worker_of_its_own() {
    // n = 2, L = 8: φ = 1/4, SpaceSaving has 8 counters (every key counted exactly) and
    // there are 4 buckets. Stream a×6, b, c: the threshold is ⌈8/4⌉ = 2, so only `a` is a
    // heavy hitter (weight 6), and its bucket loses those 6. LPT: `a` (6) goes to worker
    // 0; the buckets weigh 1, 1, 0, 0 (or 2, 0, 0, 0 if b and c share one) and all go to
    // worker 1, whose LPT load stays below 6. So after learning `a` → 0, any other → 1.
    for seed in 0..20 {
        let mut grouper = dkg(2, seed, 8);
        let stream: [&[u8]; 8] = [b"a", b"b", b"a", b"a", b"c", b"a", b"a", b"a"];
        for key in stream {
            assert_eq!(grouper.route(Key::Bytes(key)), kg(2, seed, key), "learning is KG");
        }
        assert!(grouper.is_built());
        assert_eq!(grouper.heavy_hitters(), [(fingerprint(&b"a"[..]), 0)]);
        assert_eq!(grouper.bucket_workers().unwrap(), [1, 1, 1, 1]);
        for key in [&b"b"[..], b"c", b"new", b"zz"] {
            assert_eq!(grouper.route(Key::Bytes(key)), 1);
        }
        assert_eq!(grouper.route(Key::Bytes(b"a")), 0);
    }
}

#[test]
fn equal_weights_are_placed_by_fingerprint_and_ties_go_to_the_lowest_worker() {
    // n = 2, L = 4, stream a a b b: threshold ⌈4/4⌉ = 1, both keys are heavy hitters of
    // weight 2. fingerprint(a) = 1151682644001663 < fingerprint(b) = 13017750815083633610,
    // so `a` is placed first, on worker 0, and `b` on worker 1. The four buckets are empty
    // and the LPT loads tie at 2, 2: every bucket goes to worker 0.
    let (fa, fb) = (fingerprint(&b"a"[..]), fingerprint(&b"b"[..]));
    assert_eq!((fa, fb), (1_151_682_644_001_663, 13_017_750_815_083_633_610));
    let mut grouper = dkg(2, 9, 4);
    for key in [&b"a"[..], b"a", b"b", b"b"] {
        grouper.route(Key::Bytes(key));
    }
    assert_eq!(grouper.heavy_hitters(), [(fa, 0), (fb, 1)]);
    assert_eq!(grouper.bucket_workers().unwrap(), [0, 0, 0, 0]);
    assert_eq!(grouper.route(Key::Bytes(b"b")), 1);
    assert_eq!(grouper.route(Key::Bytes(b"other")), 0);
}

#[test]
fn the_bucket_hash_coefficients_come_from_the_grouper_seed() {
    // Values printed by the Python twin (SplitMix64.for_grouper(s, "rivetti")).
    let zero = BucketHash::from_seed(0, 6);
    assert_eq!((zero.a, zero.b), (188_310_669_684_732_490, 1_939_948_818_609_105_324));
    let seven = BucketHash::from_seed(7, 6);
    assert_eq!((seven.a, seven.b), (2_254_069_303_014_009_214, 118_337_418_234_721_472));
    assert!(zero.a >= 1 && zero.a < PRIME && zero.b < PRIME);
    let x = u64::MAX;
    let expected =
        ((u128::from(zero.a) * u128::from(x) + u128::from(zero.b)) % u128::from(PRIME)) as u64 % 6;
    assert_eq!(zero.bucket(x) as u64, expected);
}

#[test]
fn routes_like_the_python_twin_on_a_fixed_stream() {
    // tests/reference_rivetti.py: DkgRivettiTwin(5, 42, learning_tuples=100) over the
    // integer keys `0 if i % 3 == 0 else i*i % 13` for i in 0..300.
    const GOLDEN: &str = "310303333320331320333302313302333330301310303333320331320333302313302333330301310303333320331320333343020033021024032023042012033002034011043020033021024032023042012033002034011043020033021024032023042012033002034011043020033021024032023042012033002034011043020033021024032023042012033002034011043020";
    let mut grouper = build("dkg_rivetti", 5, 42, &params(100), None).unwrap().grouper;
    let routed: String = (0u64..300)
        .map(|i| if i % 3 == 0 { 0 } else { i * i % 13 })
        .map(|k| char::from(b'0' + grouper.route(Key::Int(k)) as u8))
        .collect();
    assert_eq!(routed, GOLDEN);
    assert_eq!(grouper.loads().snapshot(), [97, 30, 51, 101, 21]);
}

#[test]
fn parameters_are_validated_and_end_window_changes_nothing() {
    for bad in [0, -5] {
        let err = build("dkg_rivetti", 4, 0, &params(bad), None).err().unwrap().to_string();
        assert!(err.contains("learning_tuples") && err.contains("must be at least 1"), "{err}");
    }
    let instance = build("dkg_rivetti", 4, 0, &Params::new(), None).unwrap();
    assert_eq!(instance.params["learning_tuples"], ParamValue::Int(100_000));

    let mut a = build("dkg_rivetti", 3, 1, &params(10), None).unwrap().grouper;
    let mut b = build("dkg_rivetti", 3, 1, &params(10), None).unwrap().grouper;
    for i in 0u64..60 {
        if i % 7 == 0 {
            a.end_window();
        }
        assert_eq!(a.route(Key::Int(i % 11)), b.route(Key::Int(i % 11)));
    }
}

#[test]
fn learning_state_is_released_after_building() {
    let mut grouper = dkg(16, 0, 50);
    let learning_bytes = grouper.state_bytes();
    for i in 0u64..50 {
        grouper.route(Key::Int(i % 5));
    }
    assert!(grouper.is_built());
    assert!(grouper.state_bytes() < learning_bytes);
}

fn keys_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(0u8..5, 0..3), 0..300)
}

proptest! {
    #[test]
    fn ids_below_n_deterministic_and_batch_equals_single(
        keys in keys_strategy(), workers in 1u64..24, seed in any::<u64>(), learning in 1i64..120,
    ) {
        let route_all = || {
            let mut g = build("dkg_rivetti", workers, seed, &params(learning), None).unwrap().grouper;
            keys.iter().map(|k| g.route(Key::Bytes(k))).collect::<Vec<u32>>()
        };
        let single = route_all();
        prop_assert!(single.iter().all(|&w| u64::from(w) < workers));
        prop_assert_eq!(&single, &route_all());

        let mut grouper = build("dkg_rivetti", workers, seed, &params(learning), None).unwrap().grouper;
        let owned: Vec<OwnedKey> = keys.iter().cloned().map(OwnedKey::Bytes).collect();
        let batch = KeyBatch::new(KeyValues::Owned(&owned)).unwrap();
        let mut out = vec![u32::MAX; keys.len()];
        route_batch(grouper.as_mut(), &batch, NullPolicy::Raise, &mut out).unwrap();
        prop_assert_eq!(out, single);
    }

    #[test]
    fn kg_while_learning_then_one_worker_per_key_so_at_most_two(
        keys in keys_strategy(), workers in 1u32..24, seed in any::<u64>(), learning in 1usize..120,
    ) {
        let mut grouper = dkg(workers, seed, learning as u64);
        let mut after: HashMap<&[u8], u32> = HashMap::new();
        let mut all: HashMap<&[u8], HashSet<u32>> = HashMap::new();
        for (i, key) in keys.iter().enumerate() {
            let worker = grouper.route(Key::Bytes(key));
            if i < learning {
                prop_assert_eq!(worker, kg(workers, seed, key), "tuple {} is learning", i);
            } else {
                let first = *after.entry(key).or_insert(worker);
                prop_assert_eq!(worker, first, "key {:?} moved after learning", key);
            }
            all.entry(key).or_default().insert(worker);
        }
        for (key, set) in all {
            prop_assert!(set.len() <= 2);
            if let Some(&table) = after.get(key) {
                prop_assert!(set.iter().all(|&w| w == table || w == kg(workers, seed, key)));
            }
        }
    }
}
