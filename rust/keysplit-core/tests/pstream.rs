//! PStream (`pstream`): worked examples, golden routings produced by the Python twin
//! (`tests/reference_pstream.py`) and routing invariants.

use std::collections::{HashMap, HashSet};

use keysplit_core::grouper::route_batch;

use keysplit_core::groupers::pstream::{PStream, RNG_INDEX};
use keysplit_core::hash::{HashFamily, fingerprint};
use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::build;
use keysplit_core::rng::SplitMix64;
use keysplit_core::{Grouper, Key, KeyBatch, KeyValues, LoadVector, NullPolicy, OwnedKey};
use proptest::prelude::*;

fn params(l: i64, r: i64, p: f64, round_robin: bool) -> Params {
    Params::from([
        ("l".to_owned(), ParamValue::Int(l)),
        ("r".to_owned(), ParamValue::Int(r)),
        ("p".to_owned(), ParamValue::Float(p)),
        ("round_robin".to_owned(), ParamValue::Bool(round_robin)),
    ])
}

fn pstream(workers: u32, seed: u64, l: u32, r: u32, p: f64, round_robin: bool) -> PStream {
    PStream::new(HashFamily::new(seed, workers), l, r, p, round_robin, LoadVector::private(workers))
}

fn kg(workers: u32, seed: u64, key: Key<'_>) -> u32 {
    HashFamily::new(seed, workers).candidate(0, key)
}

fn digits(routed: impl Iterator<Item = u32>) -> String {
    routed.map(|w| char::from(b'0' + w as u8)).collect()
}

#[test]
fn with_r_equal_to_l_and_no_decay_a_key_only_ever_has_one_bit_so_stays_on_kg() {
    // Every count that reaches the predictor is capped at l = r, so only bit l is ever
    // set; without decay (p = 0) no entry ever has two bits: nothing is hot.
    let mut grouper = pstream(4, 3, 2, 2, 0.0, false);
    for i in 0u64..2_000 {
        let key = Key::Int(i % 3);
        assert_eq!(grouper.route(key), kg(4, 3, key));
    }
    assert!(grouper.entries().all(|(_, bits)| bits == 1 << 2));
    assert_eq!(grouper.entries().count(), 3);
}

#[test]
fn with_certain_decay_a_key_turns_hot_at_its_second_update_and_stays_hot() {
    // l = r = 2, p = 1, one key. An update first shifts every entry, then sets bit 2:
    // {} → {2} (cold) → {1,2} (hot) → {0,1,2} → {0,1,2} … Cold tuples go to the KG
    // worker; hot ones to the least-loaded worker, which is never the KG worker once it
    // holds the most load, as here.
    let (n, seed) = (3, 11);
    let key = Key::Bytes(b"k");
    let home = kg(n, seed, key);
    let mut grouper = pstream(n, seed, 2, 2, 1.0, false);
    let mut states = vec![0u64];
    for _ in 0..400 {
        let least = grouper.loads().least_loaded();
        let worker = grouper.route(key);
        let bits = grouper.entries().next().map_or(0, |(x, bits)| {
            assert_eq!(x, fingerprint(key));
            bits
        });
        if *states.last().unwrap() != bits {
            states.push(bits);
        }
        if bits.count_ones() >= 2 {
            assert_eq!(worker, least);
        } else {
            assert_eq!(worker, home);
        }
    }
    assert_eq!(states, [0, 0b100, 0b110, 0b111]);
}

#[test]
fn a_single_coin_per_tuple_and_one_decay_draw_per_entry() {
    // l = 1, r = 0, p = 0: every tuple updates the predictor with count = (u & 1) for
    // its coin draw u, after one (ineffective) decay draw per existing entry. The one
    // key turns hot at the first tuple whose coins so far include both 0 and 1; we replay
    // the generator to predict it.
    let (n, seed) = (5u32, 2);
    let key = Key::Int(77);
    let mut rng = SplitMix64::for_grouper(seed, RNG_INDEX);
    let mut seen = 0u64;
    let mut grouper = pstream(n, seed, 1, 0, 0.0, true);
    let mut hot_tuples = 0;
    for t in 0..64 {
        let coin = rng.next_u64() & 1;
        if t > 0 {
            rng.next_u64(); // the decay draw of the key's entry
        }
        seen |= 1 << coin;
        let worker = grouper.route(key);
        if seen == 0b11 {
            assert_eq!(worker, hot_tuples % n, "round robin over hot tuples");
            hot_tuples += 1;
        } else {
            assert_eq!(worker, kg(n, seed, key));
        }
    }
    assert!(hot_tuples > 0);
}

/// The integer keys `0 if i % 3 == 0 else i*i % 13`, i in 0..300.
fn fixed_stream() -> impl Iterator<Item = u64> {
    (0u64..300).map(|i| if i % 3 == 0 { 0 } else { i * i % 13 })
}

#[test]
fn routes_like_the_python_twin_on_fixed_streams() {
    // PStreamTwin(5, 42, r=2, p=0.05)
    const LEAST: &str = "310303333320331420433102412402133430101210403233420411240234102412401234130204120403123410241240124102412401234031240124012340123401234012340123401234012340123401234012340123401234012340123401234012340123401234012340123401234012340123401234012340123401234012340123401234012340123401234012340123401234";
    // PStreamTwin(5, 42, round_robin=True, r=3, l=5, p=0.2)
    const ROUND: &str = "310303333320331320333302313302333300311312303334320331320333302323402123340012340123430122340120233304012340123340012340102334012341010233304011234013230401112304031234012340012304011234012340011213400123401231400123400112304012340001110203401230401120340102314001234010201314001234012341010234001234";
    let mut g = build("pstream", 5, 42, &params(16, 2, 0.05, false), None).unwrap().grouper;
    assert_eq!(digits(fixed_stream().map(|k| g.route(Key::Int(k)))), LEAST);
    let mut g = build("pstream", 5, 42, &params(5, 3, 0.2, true), None).unwrap().grouper;
    assert_eq!(digits(fixed_stream().map(|k| g.route(Key::Int(k)))), ROUND);
    assert_eq!(g.loads().snapshot(), [76, 58, 47, 82, 37]);
}

#[test]
fn default_parameters_match_the_python_twin() {
    // PStreamTwin(8, 5) over `0 if i % 2 == 0 else i % 97`, i in 0..5000.
    let mut g = pstream(8, 5, 16, 6, 0.01, false);
    for i in 0u64..5_000 {
        g.route(Key::Int(if i % 2 == 0 { 0 } else { i % 97 }));
    }
    assert_eq!(g.loads().snapshot(), [626, 625, 625, 625, 625, 625, 625, 624]);
    let entries: Vec<(u64, u64)> = g.entries().collect();
    assert_eq!(entries.len(), 25);
    assert_eq!(entries[0], (410_732_492_271_875_143, 64));
    assert_eq!(entries[8], (8_123_565_122_857_367_666, 64));
    assert_eq!(entries[23], (16_902_716_848_140_941_160, 64));
    assert!(g.is_hot(Key::Int(0)));
}

#[test]
fn parameters_have_the_spec_defaults_and_are_validated() {
    let instance = build("pstream", 4, 0, &Params::new(), None).unwrap();
    assert_eq!(instance.params["l"], ParamValue::Int(16));
    assert_eq!(instance.params["r"], ParamValue::Int(6));
    assert_eq!(instance.params["p"], ParamValue::Float(0.01));
    assert_eq!(instance.params["round_robin"], ParamValue::Bool(false));
    let err = |name: &str, value: ParamValue| {
        let given = Params::from([(name.to_owned(), value)]);
        build("pstream", 4, 0, &given, None).err().unwrap().to_string()
    };
    assert!(err("l", ParamValue::Int(0)).contains("must be in [1, 63], got 0"));
    assert!(err("l", ParamValue::Int(64)).contains("must be in [1, 63], got 64"));
    assert!(err("r", ParamValue::Int(17)).contains("must be in [0, l = 16], got 17"));
    assert!(err("r", ParamValue::Int(-1)).contains("got -1"));
    // Found by the route_batch fuzz target: a given l below r's default blames l, which the
    // caller chose, not the r they never set.
    assert_eq!(
        err("l", ParamValue::Int(3)),
        "parameter \"l\" of grouper \"pstream\" must be at least r = 6 (r's default), got 3"
    );
    assert!(err("p", ParamValue::Float(1.5)).contains("must be in [0, 1], got 1.5"));
    assert!(err("p", ParamValue::Float(-0.1)).contains("must be in [0, 1]"));
    assert!(err("p", ParamValue::Float(f64::NAN)).contains("finite"));
}

fn keys_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(0u8..5, 0..3), 0..400)
}

fn any_params() -> impl Strategy<Value = (u32, u32, f64, bool)> {
    (1u32..20).prop_flat_map(|l| {
        (Just(l), 0..=l, prop_oneof![Just(0.0), Just(1.0), 0.0..1.0], any::<bool>())
    })
}

proptest! {
    #[test]
    fn ids_below_n_deterministic_and_batch_equals_single(
        keys in keys_strategy(), workers in 1u64..24, seed in any::<u64>(),
        (l, r, p, rr) in any_params(),
    ) {
        let given = params(i64::from(l), i64::from(r), p, rr);
        let route_all = || {
            let mut g = build("pstream", workers, seed, &given, None).unwrap().grouper;
            keys.iter().map(|k| g.route(Key::Bytes(k))).collect::<Vec<u32>>()
        };
        let single = route_all();
        prop_assert!(single.iter().all(|&w| u64::from(w) < workers));
        prop_assert_eq!(&single, &route_all());

        let mut grouper = build("pstream", workers, seed, &given, None).unwrap().grouper;
        let owned: Vec<OwnedKey> = keys.iter().cloned().map(OwnedKey::Bytes).collect();
        let batch = KeyBatch::new(KeyValues::Owned(&owned)).unwrap();
        let mut out = vec![u32::MAX; keys.len()];
        route_batch(grouper.as_mut(), &batch, NullPolicy::Raise, &mut out).unwrap();
        prop_assert_eq!(out, single);
    }

    #[test]
    fn cold_keys_go_to_their_kg_worker_and_never_hot_keys_never_leave_it(
        keys in keys_strategy(), workers in 1u32..24, seed in any::<u64>(),
        (l, r, p, rr) in any_params(),
    ) {
        let mut grouper = pstream(workers, seed, l, r, p, rr);
        let mut ever_hot: HashSet<&[u8]> = HashSet::new();
        let mut placed: HashMap<&[u8], HashSet<u32>> = HashMap::new();
        for key in &keys {
            let worker = grouper.route(Key::Bytes(key));
            // The predictor does not change after the routing decision of a tuple.
            if grouper.is_hot(Key::Bytes(key)) {
                ever_hot.insert(key);
            } else {
                prop_assert_eq!(worker, kg(workers, seed, Key::Bytes(key)));
            }
            placed.entry(key).or_default().insert(worker);
            prop_assert!(grouper.entries().all(|(_, bits)| bits != 0 && bits < 1 << (l + 1)));
        }
        for (key, set) in placed {
            if !ever_hot.contains(key) {
                prop_assert_eq!(set, HashSet::from([kg(workers, seed, Key::Bytes(key))]));
            }
        }
    }
}
