//! FlexD: hand-worked routings of Algorithm 1 (Section 4.4) with its micro-batch lag,
//! segments, clean-up and parameters, and the routing invariants: worker ids below `n`,
//! deterministic routing, a batch routed as its keys one by one, and an instance count of
//! one plus the threshold crossings.

use std::collections::HashMap;

use keysplit_core::grouper::Grouper;

use keysplit_core::groupers::flexd::{FlexD, FlexDParams};
use keysplit_core::hash::HashFamily;
use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::build;
use keysplit_core::{Key, LoadVector};
use proptest::prelude::*;

mod common;

fn grouper(workers: u32, seed: u64, params: FlexDParams) -> FlexD {
    FlexD::new(HashFamily::new(seed, workers), LoadVector::private(workers), params).unwrap()
}

/// `l = 16`, `f = 1/4` (hot at a count of 4), δ = 1.5: thresholds 0.375, 0.5625, 0.84375,
/// 1.265625 of the segment, crossed at counts 6, 9, 14 (13.5 rounded up) and never
/// (20.25 > 16). All exact in binary.
fn small(batch_tuples: i64) -> FlexDParams {
    FlexDParams {
        threshold: 0.25,
        counters: 8,
        segment_tuples: 16,
        batch_tuples,
        ..FlexDParams::default()
    }
}

/// The lowest worker index not in `used`.
fn lowest_except(used: &[u32]) -> u32 {
    (0..).find(|w| !used.contains(w)).unwrap()
}

/// n = 8, m = 1: the table built from tuple t routes tuple t + 1.
#[test]
fn a_single_key_splits_progressively_with_a_one_tuple_lag() {
    let mut fx = grouper(8, 3, small(1));
    let key = Key::Bytes(b"a");
    let hash = HashFamily::new(3, 8).candidate(0, key);
    // Tuples 1-4 go by hash: the 4th makes the key hot (count 4 = f·l) only after it is routed.
    for _ in 0..4 {
        assert_eq!(fx.route(key), hash);
    }
    // Lines 13-16: the least-loaded worker of all (the scheduler's loads: hash 4, others 0).
    let w0 = lowest_except(&[hash]);
    assert_eq!(fx.instances(key), Some(&[w0][..]));
    assert_eq!(fx.entry(key).unwrap().threshold, 0.375);
    assert!(fx.is_hot(key));
    // Tuples 5-6 go to its one instance; the 6th reaches 0.375 · 16 = 6: a crossing adds
    // the least-loaded unused worker and the threshold becomes 0.5625.
    assert_eq!(fx.route(key), w0);
    assert_eq!(fx.crossings(key), Some(0));
    assert_eq!(fx.route(key), w0);
    let w1 = lowest_except(&[hash, w0]);
    assert_eq!(fx.instances(key), Some(&[w0, w1][..]));
    assert_eq!((fx.crossings(key), fx.entry(key).unwrap().threshold), (Some(1), 0.5625));
    // Line 22 by the live loads (w0 has 2): w1, w1, then the tie 2-2 goes to w0. The 9th
    // count reaches 9: w2 joins.
    assert_eq!(fx.route(key), w1);
    assert_eq!(fx.route(key), w1);
    assert_eq!(fx.route(key), w0);
    let w2 = lowest_except(&[hash, w0, w1]);
    assert_eq!(fx.instances(key), Some(&[w0, w1, w2][..]));
    // Loads w0 3, w1 2, w2 0: w2, w2, then w1 (2-2 tie, earlier), w2, w0 (3-3-3 tie).
    for expected in [w2, w2, w1, w2, w0] {
        assert_eq!(fx.route(key), expected);
    }
    // Count 14 ≥ 13.5: the third crossing adds w3.
    let w3 = lowest_except(&[hash, w0, w1, w2]);
    assert_eq!(fx.instances(key), Some(&[w0, w1, w2, w3][..]));
    assert_eq!(fx.crossings(key), Some(3));
    assert_eq!(fx.route(key), w3);
    assert_eq!(fx.route(key), w3);
    // The 16th key closes the segment: the sketch restarts and the key is cold again.
    assert_eq!(fx.segment(), 1);
    assert!(!fx.is_hot(key));
    assert_eq!(fx.segment_count(key), 0);
    for _ in 0..4 {
        assert_eq!(fx.route(key), hash);
    }
    // Hot again at a count of 4, with its instances and threshold kept; 1.265625 · 16 > 16,
    // so it never crosses again.
    assert!(fx.is_hot(key));
    for _ in 0..12 {
        let worker = fx.route(key);
        assert!([w0, w1, w2, w3].contains(&worker));
    }
    assert_eq!(fx.crossings(key), Some(3));
    assert_eq!(fx.instances(key).unwrap().len(), 4);
    assert_eq!(fx.loads().snapshot().iter().sum::<u64>(), 32);
}

/// m = 4: the table changes only at micro-batch boundaries.
#[test]
fn the_table_of_a_micro_batch_routes_the_next_one() {
    let mut fx = grouper(8, 3, small(4));
    let key = Key::Bytes(b"a");
    let hash = HashFamily::new(3, 8).candidate(0, key);
    for i in 0..4 {
        assert_eq!(fx.pending(), i);
        assert_eq!(fx.instances(key), None);
        assert_eq!(fx.route(key), hash);
    }
    // The run over keys 1-4 made the key hot at its 4th.
    assert_eq!(fx.pending(), 0);
    let w0 = lowest_except(&[hash]);
    assert_eq!(fx.instances(key), Some(&[w0][..]));
    // Keys 5-8 all go to w0: the crossing at count 6 is found only by the next run.
    for _ in 0..4 {
        assert_eq!(fx.route(key), w0);
    }
    // That run: scratch loads hash 4, w0 4; key 5 adds 1 to w0; key 6 crosses and gets the
    // least-loaded unused worker.
    let w1 = lowest_except(&[hash, w0]);
    assert_eq!(fx.instances(key), Some(&[w0, w1][..]));
    // Live loads w0 4, w1 0: the next four go to w1.
    for _ in 0..4 {
        assert_eq!(fx.route(key), w1);
    }
}

/// Two keys turn hot in one run: the scheduler's scratch loads spread them.
#[test]
fn keys_turning_hot_in_one_run_get_different_workers() {
    let mut fx = grouper(8, 0, small(8));
    let (a, b) = (Key::Bytes(b"a"), Key::Bytes(b"b"));
    for _ in 0..4 {
        fx.route(a);
        fx.route(b);
    }
    let (ia, ib) = (fx.instances(a).unwrap()[0], fx.instances(b).unwrap()[0]);
    assert_ne!(ia, ib);
}

#[test]
fn end_window_runs_the_scheduler_and_closes_the_segment() {
    let mut fx = grouper(8, 5, small(100));
    let key = Key::Int(42);
    let hash = HashFamily::new(5, 8).candidate(0, key);
    for _ in 0..5 {
        assert_eq!(fx.route(key), hash);
    }
    assert_eq!((fx.pending(), fx.instances(key)), (5, None));
    fx.end_window();
    // The five keys were scheduled (hot at the 4th), then the segment closed.
    assert_eq!(fx.pending(), 0);
    assert_eq!(fx.instances(key).map(<[u32]>::len), Some(1));
    assert_eq!(fx.segment(), 1);
    assert!(!fx.is_hot(key));
    assert_eq!(fx.route(key), hash);
    // An empty window closes too.
    fx.end_window();
    fx.end_window();
    assert_eq!(fx.segment(), 3);
}

#[test]
fn the_clean_up_keeps_the_most_recently_accessed_entries() {
    let params = FlexDParams { cleanup_segments: 2, retain: 1, ..small(1) };
    let mut fx = grouper(8, 0, params);
    let (a, b) = (Key::Bytes(b"a"), Key::Bytes(b"b"));
    for key in [a, a, a, a, b, b, b, b] {
        fx.route(key);
    }
    assert_eq!(fx.hot_keys(), 2);
    fx.end_window(); // segment 1: no clean-up yet
    assert_eq!(fx.hot_keys(), 2);
    fx.route(a); // a cold access: a is now the most recent
    fx.end_window(); // segment 2: clean-up, retain 1
    assert_eq!(fx.hot_keys(), 1);
    assert!(fx.entry(a).is_some() && fx.entry(b).is_none());
}

#[test]
fn the_defaults_are_the_papers_and_dkgs() {
    let fx = grouper(8, 0, FlexDParams::default());
    assert_eq!(fx.threshold(), 1.0 / 16.0);
    assert_eq!(fx.counters(), 32);
    let fx = grouper(8, 0, FlexDParams { threshold: 0.1, ..FlexDParams::default() });
    assert_eq!(fx.counters(), 20);
    let instance = build("flexd", 8, 0, &Params::new(), None).unwrap();
    assert_eq!(instance.params["delta"], ParamValue::Float(1.5));
    assert_eq!(instance.params["segment_tuples"], ParamValue::Int(100_000));
    assert_eq!(instance.params["batch_tuples"], ParamValue::Int(1_000));
    assert_eq!(instance.params["retain"], ParamValue::Int(50_000));
    // Memory, as the module documents it: about 28 KB at n = 8.
    let bytes = instance.grouper.state_bytes();
    assert!((20_000..40_000).contains(&bytes), "{bytes}");
}

/// With the defaults at n = 8, a Zipf(1.2) stream of 300 000 tuples: the hottest key is
/// split over several workers (measured: 3, load imbalance 0.25 against key grouping's
/// 1.13), and only the two hottest keys ever turn hot (`f = 1/16`).
#[test]
fn the_defaults_split_the_head_of_a_zipf_stream() {
    let stream: Vec<u64> = {
        let mut zipf = keysplit_core::streams::Zipf::new(10_000, 1.2, 7).unwrap();
        (0..300_000).map(|_| zipf.next_key()).collect()
    };
    let imbalance = |loads: Vec<u64>| {
        let mean = loads.iter().sum::<u64>() as f64 / loads.len() as f64;
        (*loads.iter().max().unwrap() as f64 - mean) / mean
    };
    let mut fx = grouper(8, 0, FlexDParams::default());
    let mut key = build("key", 8, 0, &Params::new(), None).unwrap().grouper;
    for &k in &stream {
        fx.route(Key::Int(k));
        key.route(Key::Int(k));
    }
    let head = fx.instances(Key::Int(0)).unwrap().len();
    assert!(head >= 3, "{head}");
    let (flexd, hashed) = (imbalance(fx.loads().snapshot()), imbalance(key.loads().snapshot()));
    assert!(flexd < hashed / 2.0, "flexd {flexd}, key {hashed}");
    assert!(fx.hot_keys() <= 16, "{}", fx.hot_keys());
}

fn params(pairs: &[(&str, ParamValue)]) -> Params {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
}

#[test]
fn parameters_are_validated_with_messages() {
    let err = |pairs: &[(&str, ParamValue)]| {
        build("flexd", 8, 0, &params(pairs), None).err().map(|e| e.to_string()).unwrap()
    };
    assert!(err(&[("delta", ParamValue::Float(1.0))]).contains("must be finite and > 1, got 1"));
    assert!(err(&[("threshold", ParamValue::Float(1.5))]).contains("must be in (0, 1]"));
    assert!(err(&[("threshold", ParamValue::Float(-0.1))]).contains("threshold"));
    assert!(err(&[("threshold", ParamValue::Float(1e-9))]).contains("Space-Saving counters"));
    assert!(err(&[("counters", ParamValue::Int(-1))]).contains("counters"));
    assert!(err(&[("segment_tuples", ParamValue::Int(0))]).contains("at least 1, got 0"));
    assert!(err(&[("batch_tuples", ParamValue::Int(0))]).contains("batch_tuples"));
    assert!(err(&[("cleanup_segments", ParamValue::Int(0))]).contains("cleanup_segments"));
    assert!(err(&[("retain", ParamValue::Int(-1))]).contains("retain"));
    assert!(build("flexd", 8, 0, &params(&[("retain", ParamValue::Int(0))]), None).is_ok());
}

/// Routing of a fixed stream, checked against `tests/reference_flexd.py` (the twin printed
/// the same list for these parameters; see `tests/test_flexd.py`).
#[test]
fn golden_routing_matches_the_python_twin() {
    let params = FlexDParams {
        threshold: 0.125,
        counters: 6,
        segment_tuples: 40,
        batch_tuples: 3,
        cleanup_segments: 2,
        retain: 2,
        ..FlexDParams::default()
    };
    let mut fx = grouper(5, 11, params);
    let routed: Vec<u32> = golden_stream().into_iter().map(|k| fx.route(Key::Int(k))).collect();
    assert_eq!(routed, GOLDEN);
}

/// 200 keys: i*i mod 7 mixed with a hot key 0 on every third tuple.
fn golden_stream() -> Vec<u64> {
    (0..200u64).map(|i| if i % 3 == 0 { 0 } else { (i * i) % 7 }).collect()
}

#[rustfmt::skip]
const GOLDEN: [u32; 200] = [2, 4, 4, 2, 0, 4, 2, 2, 4, 2, 0, 0, 1, 4, 1, 1, 4, 0, 3, 4, 4, 3, 4, 4, 3, 0, 3, 1, 1, 1, 3, 1, 1, 3, 1, 0, 3, 3, 1, 2, 3, 1, 2, 4, 4, 2, 0, 4, 2, 2, 4, 2, 0, 0, 3, 4, 0, 3, 4, 0, 1, 4, 4, 3, 1, 3, 0, 0, 3, 2, 2, 1, 0, 1, 0, 2, 1, 3, 2, 3, 0, 2, 4, 4, 2, 4, 4, 2, 0, 4, 2, 2, 4, 1, 0, 0, 3, 4, 1, 3, 4, 0, 1, 4, 4, 3, 1, 3, 1, 3, 0, 2, 1, 1, 3, 3, 3, 0, 1, 2, 2, 4, 0, 2, 4, 4, 2, 4, 4, 2, 0, 4, 2, 2, 4, 1, 0, 0, 3, 4, 1, 3, 4, 0, 1, 3, 4, 1, 1, 3, 0, 3, 0, 2, 1, 2, 3, 3, 2, 0, 1, 0, 2, 4, 0, 2, 4, 4, 2, 4, 4, 2, 0, 4, 1, 3, 4, 1, 0, 0, 3, 4, 1, 3, 4, 0, 1, 3, 1, 3, 1, 3, 2, 2, 3, 0, 1, 1, 0, 2];

fn keys_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(
        prop_oneof![3 => Just(vec![0u8]), 1 => prop::collection::vec(0u8..6, 0..2)],
        0..400,
    )
}

fn params_strategy() -> impl Strategy<Value = FlexDParams> {
    (
        prop::sample::select(vec![1.01, 1.2, 1.5, 2.0, 4.0]),
        prop::sample::select(vec![0.0, 0.02, 0.1, 0.25, 0.5, 1.0]),
        0i64..10,
        1i64..60,
        1i64..12,
        1i64..4,
        0i64..4,
    )
        .prop_map(
            |(
                delta,
                threshold,
                counters,
                segment_tuples,
                batch_tuples,
                cleanup_segments,
                retain,
            )| {
                FlexDParams {
                    delta,
                    threshold,
                    counters,
                    segment_tuples,
                    batch_tuples,
                    cleanup_segments,
                    retain,
                }
            },
        )
}

proptest! {
    #[test]
    fn routes_below_n_deterministically_and_batch_equals_single(
        keys in keys_strategy(), workers in 1u32..40, seed in any::<u64>(), params in params_strategy(),
    ) {
        common::check_routing(|| grouper(workers, seed, params), &keys, workers)?;
    }

    /// A key's instance count is 1 plus its threshold crossings (capped at n, when
    /// every worker is in use); instances are distinct and only grow; a tuple goes to one
    /// of its key's instances when the key is hot, else to its hash.
    #[test]
    fn instances_are_one_plus_the_crossings(
        keys in keys_strategy(), workers in 1u32..12, seed in any::<u64>(),
        params in params_strategy(), windows in prop::collection::vec(0usize..400, 0..4),
    ) {
        let mut fx = grouper(workers, seed, params);
        let hashes = HashFamily::new(seed, workers);
        let mut previous: HashMap<u64, Vec<u32>> = HashMap::new();
        let mut segment = fx.segment();
        for (i, k) in keys.iter().enumerate() {
            let key = Key::Bytes(k);
            let hot = fx.is_hot(key);
            let instances = fx.instances(key).map(<[u32]>::to_vec);
            let worker = fx.route(key);
            if hot {
                prop_assert!(instances.unwrap().contains(&worker));
            } else {
                prop_assert_eq!(worker, hashes.candidate(0, key));
            }
            if windows.contains(&i) {
                fx.end_window();
            }
            for (id, entry) in fx.entries() {
                let expected = (1 + entry.crossings as usize).min(workers as usize);
                prop_assert_eq!(entry.instances.len(), expected);
                let mut distinct = entry.instances.clone();
                distinct.sort_unstable();
                distinct.dedup();
                prop_assert_eq!(distinct.len(), entry.instances.len());
                prop_assert!(entry.instances.iter().all(|&w| w < workers));
                // Instances only grow, unless a clean-up (at a segment's close) dropped
                // the entry and the key turned hot again.
                if let Some(before) = previous.get(&id).filter(|_| fx.segment() == segment) {
                    prop_assert!(entry.instances.starts_with(before));
                }
            }
            previous = fx.entries().map(|(id, e)| (id, e.instances.clone())).collect();
            segment = fx.segment();
        }
    }
}
