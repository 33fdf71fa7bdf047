//! Elastic key splitting (`elastic`): its guarantees (cold keys on their hash worker,
//! bounded state, sets that grow under load and shrink when their key cools), the
//! balance and replication it reaches against the offline bound, and a golden routing
//! produced by the Python twin (`tests/reference_elastic.py`).

mod common;

use std::collections::{HashMap, HashSet};

use keysplit_core::groupers::elastic::{Elastic, ElasticParams};
use keysplit_core::hash::HashFamily;
use keysplit_core::streams::Zipf;
use keysplit_core::{Grouper, Key, LoadVector};
use proptest::prelude::*;

fn elastic(workers: u32, seed: u64, params: ElasticParams) -> Elastic {
    Elastic::new(HashFamily::new(seed, workers), LoadVector::private(workers), params).unwrap()
}

fn small(hot_count: i64, table_entries: i64, decay_tuples: i64) -> ElasticParams {
    ElasticParams { epsilon: 0.05, hot_count, table_entries, decay_tuples }
}

/// `λ = max / mean − 1` of `loads`.
fn imbalance(loads: &[u64]) -> f64 {
    let mean = loads.iter().sum::<u64>() as f64 / loads.len() as f64;
    *loads.iter().max().unwrap() as f64 / mean - 1.0
}

/// Routes `keys` and returns `(λ, γ, γ*)`: γ* is the offline bound
/// `Σ_k max(1, ⌈p_k·n⌉) / K` of the same stream.
fn balance_and_replication(grouper: &mut Elastic, keys: &[u64]) -> (f64, f64, f64) {
    let n = grouper.workers();
    let mut pairs = HashSet::new();
    let mut counts: HashMap<u64, u64> = HashMap::new();
    for &key in keys {
        pairs.insert((key, grouper.route(Key::Int(key))));
        *counts.entry(key).or_default() += 1;
    }
    let bound = counts
        .values()
        .map(|&c| ((c as f64 / keys.len() as f64) * f64::from(n)).ceil().max(1.0))
        .sum::<f64>()
        / counts.len() as f64;
    let gamma = pairs.len() as f64 / counts.len() as f64;
    (imbalance(&grouper.loads().snapshot()), gamma, bound)
}

fn zipf(keys: u64, z: f64, tuples: usize, seed: u64) -> Vec<u64> {
    let mut out = vec![0; tuples];
    Zipf::new(keys, z, seed).unwrap().fill(&mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn routing_invariants(
        keys in prop::collection::vec(prop::collection::vec(0u8..5, 0..3), 0..400),
        workers in 1u32..9,
        seed in any::<u64>(),
        hot_count in 1i64..6,
        table_entries in prop::sample::select(vec![4i64, 8, 16]),
        decay_tuples in 1i64..60,
    ) {
        let params = small(hot_count, table_entries, decay_tuples);
        common::check_routing(|| elastic(workers, seed, params), &keys, workers)?;
        let mut grouper = elastic(workers, seed, params);
        for (i, key) in keys.iter().enumerate() {
            grouper.route(Key::Bytes(key));
            if i % 37 == 0 {
                grouper.end_window();
            }
            prop_assert_eq!(grouper.check_state(), Ok(()));
        }
    }
}

/// A key below `hot_count` goes where key grouping sends it: with a count no key reaches,
/// elastic is key grouping.
#[test]
fn cold_keys_stay_on_their_hash_worker() {
    let keys = zipf(1000, 1.2, 20_000, 3);
    let params = ElasticParams { hot_count: 1 << 31, ..ElasticParams::default() };
    let mut grouper = elastic(16, 7, params);
    let family = HashFamily::new(7, 16);
    for &key in &keys {
        assert_eq!(grouper.route(Key::Int(key)), family.candidate(0, Key::Int(key)));
    }
}

/// The workload of the README's table: Zipf 1.5 over 10^5 keys, 10^6 tuples, 32 workers.
#[test]
fn zipf_one_and_a_half_is_balanced_near_the_bound() {
    let keys = zipf(100_000, 1.5, 1_000_000, 1);
    let (lambda, gamma, bound) =
        balance_and_replication(&mut elastic(32, 0, ElasticParams::default()), &keys);
    assert!(lambda <= 0.01, "λ = {lambda}");
    assert!(gamma <= 1.03, "γ = {gamma}");
    assert!(gamma - 1.0 <= 2.0 * (bound - 1.0) + 0.03, "γ = {gamma}, γ* = {bound}");
}

/// Most skewed of Pd-Stream's presets, at its largest worker count.
#[test]
fn zipf_two_at_128_workers_stays_within_twice_the_bound() {
    let keys = zipf(10_000_000, 2.0, 2_000_000, 5);
    let (lambda, gamma, bound) =
        balance_and_replication(&mut elastic(128, 0, ElasticParams::default()), &keys);
    assert!(lambda <= 0.01, "λ = {lambda}");
    assert!(gamma - 1.0 <= 2.0 * (bound - 1.0) + 0.03, "γ = {gamma}, γ* = {bound}");
}

/// The table holds a fixed number of entries: a stream of distinct keys (no key ever hot)
/// and a skewed one leave the state within 1 MB at 128 workers.
#[test]
fn state_is_bounded_whatever_the_keys() {
    let mut distinct = elastic(128, 0, ElasticParams::default());
    for key in 0..2_000_000u64 {
        distinct.route(Key::Int(key));
    }
    let mut skewed = elastic(128, 0, ElasticParams::default());
    for key in zipf(10_000_000, 1.8, 2_000_000, 2) {
        skewed.route(Key::Int(key));
    }
    for grouper in [&distinct, &skewed] {
        assert!(grouper.state_bytes() <= 1 << 20, "{} bytes", grouper.state_bytes());
        assert_eq!(grouper.check_state(), Ok(()));
    }
}

/// A key hot only in a recent burst is split, although its share of the whole stream is
/// small; once it cools, its set shrinks back and it leaves the table.
#[test]
fn a_burst_is_split_and_a_cooled_key_shrinks_back() {
    let n = 8;
    let mut grouper = elastic(n, 0, ElasticParams { decay_tuples: 10_000, ..Default::default() });
    let mut tail = 1_000u64;
    let mut next_tail = || {
        tail += 1;
        tail
    };
    for _ in 0..200_000 {
        grouper.route(Key::Int(next_tail()));
    }
    // A burst: key 7 is half of the next 40,000 tuples, 10% of the stream so far.
    for i in 0..40_000 {
        let key = if i % 2 == 0 { 7 } else { next_tail() };
        grouper.route(Key::Int(key));
    }
    let set_of_seven = |g: &Elastic| {
        let x = HashFamily::new(0, n).hash(0, Key::Int(7));
        g.hot_keys().into_iter().find(|(f, _, _)| *f == x).map(|(_, _, set)| set)
    };
    let burst_set = set_of_seven(&grouper).expect("the burst key is tracked");
    assert!(burst_set.len() >= 4, "{burst_set:?}");
    for _ in 0..200_000 {
        grouper.route(Key::Int(next_tail()));
    }
    assert_eq!(set_of_seven(&grouper), None, "a cooled key leaves the table");
    assert_eq!(grouper.check_state(), Ok(()));
}

/// Under drift (the hot keys change every 200,000 tuples, two halving periods), a set that
/// took no tuple for a period is dropped: no key of an earlier phase holds workers beyond
/// its hash worker at the end, the workers held level off instead of piling up, and γ
/// stays near the bound.
#[test]
fn drifting_hot_keys_do_not_pile_up_replication() {
    let n = 32;
    let mut grouper = elastic(n, 0, ElasticParams::default());
    let mut pairs = HashSet::new();
    let mut held = Vec::new();
    let mut earlier = HashSet::new();
    for phase in 0..8u64 {
        for key in zipf(10_000, 1.5, 200_000, phase) {
            let key = key + phase * 1_000_000;
            pairs.insert((key, grouper.route(Key::Int(key))));
            if phase < 7 {
                earlier.insert(HashFamily::new(0, n).hash(0, Key::Int(key)));
            }
        }
        held.push(grouper.hot_keys().iter().map(|(_, _, set)| set.len() - 1).sum::<usize>());
    }
    assert!(imbalance(&grouper.loads().snapshot()) <= 0.01);
    let keys: HashSet<u64> = pairs.iter().map(|&(key, _)| key).collect();
    let gamma = pairs.len() as f64 / keys.len() as f64;
    assert!(gamma <= 1.05, "γ = {gamma}");
    for (fingerprint, _, set) in grouper.hot_keys() {
        assert!(set.len() == 1 || !earlier.contains(&fingerprint), "an earlier key holds {set:?}");
    }
    let settled = held[2..4].iter().max().unwrap();
    let later = held[4..].iter().max().unwrap();
    assert!(2 * later <= 3 * settled, "workers held beyond the hash workers: {held:?}");
}

/// Two sources on one shared load vector read each other's tuples late, so a source's
/// mean can lag: its sets must stay valid (no worker twice) and the global loads balanced.
#[test]
fn sources_sharing_their_loads_keep_valid_sets() {
    let shared = LoadVector::shared(16);
    let source = || {
        let loads = shared.share().expect("a shared vector shares");
        Elastic::new(HashFamily::new(0, 16), loads, ElasticParams::default()).unwrap()
    };
    let (mut a, mut b) = (source(), source());
    for chunk in zipf(1_000, 1.6, 200_000, 3).chunks(997) {
        for &key in chunk {
            a.route(Key::Int(key));
        }
        a.loads().publish();
        for &key in chunk {
            b.route(Key::Int(key));
        }
        b.loads().publish();
    }
    assert_eq!(a.check_state(), Ok(()));
    assert_eq!(b.check_state(), Ok(()));
    assert!(imbalance(&shared.snapshot()) <= 0.05, "λ = {}", imbalance(&shared.snapshot()));
}
