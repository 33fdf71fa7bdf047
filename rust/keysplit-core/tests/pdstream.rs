//! Pd-Stream (Sun et al.): the paper's Table III and Fig. 3, hand-worked routings, and
//! the routing invariants: worker ids below `n`, deterministic routing, a batch routed as
//! its keys one by one, and candidate sets that grow by one within the table's bound.

use std::collections::HashMap;

use keysplit_core::grouper::Grouper;

use keysplit_core::groupers::pdstream::{
    PdStream, PdStreamParams, binomial_tail, estimate_probability, estimated_candidates,
    probability_table, window_length,
};
use keysplit_core::hash::HashFamily;
use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::build;
use keysplit_core::{Key, LoadVector};
use proptest::prelude::*;

mod common;

/// Table III: `p̂_k` in percent for `n_k = 1..16`, `N = 16`, `P̂ = 99%`, `ε = 1e-4`.
const TABLE_III: [f64; 16] = [
    25.0, 34.9, 43.1, 50.3, 56.9, 63.0, 68.7, 73.9, 78.8, 83.4, 87.5, 91.2, 94.5, 97.1, 99.0, 99.9,
];

fn percent_1dp(p: f64) -> f64 {
    (p * 1000.0).round() / 10.0
}

fn grouper(workers: u32, seed: u64, params: PdStreamParams) -> PdStream {
    PdStream::new(HashFamily::new(seed, workers), LoadVector::private(workers), params).unwrap()
}

fn with_alpha(alpha: i64) -> PdStreamParams {
    PdStreamParams { alpha, ..Default::default() }
}

#[test]
fn the_probability_table_is_table_iii() {
    let table = probability_table(16, 0.99, 1e-4);
    assert_eq!(table.len(), 16);
    let printed: Vec<f64> = table.iter().map(|&p| percent_1dp(p)).collect();
    assert_eq!(printed, TABLE_III);
    // Fig. 3(a): "62.99%" for n_k = 6 (62.997%, truncated), so n̂ = ⌊0.63 * 8⌋ = 5.
    assert_eq!((table[5] * 10_000.0).floor() / 100.0, 62.99);
    assert_eq!(estimated_candidates(table[5], 8), 5);
    // Table III is the table of n = 8 workers at the default α = 4 (N = 2n = 16).
    assert_eq!(window_length(4, 8), Some(16));
    assert_eq!(grouper(8, 0, PdStreamParams::default()).window_length(), 16);
}

#[test]
fn the_ambiguous_readings_do_not_give_table_iii() {
    // The text's 99.9% gives 35.1% for n_k = 1.
    assert_eq!(percent_1dp(probability_table(16, 0.999, 1e-4)[0]), 35.1);
    // Algorithm 1 read literally (the last midpoint computed) gives 43.0% for n_k = 3.
    let literal_last_midpoint = |occurrences| {
        let (mut lower, mut upper, mut mid) = (0.0f64, 1.0f64, 0.5);
        while upper - lower > 1e-4 {
            mid = (upper + lower) / 2.0;
            if binomial_tail(16, occurrences, mid) < 0.99 {
                lower = mid;
            } else {
                upper = mid;
            }
        }
        mid
    };
    assert_eq!(percent_1dp(literal_last_midpoint(3)), 43.0);
    assert_eq!(percent_1dp(estimate_probability(16, 3, 0.99, 1e-4)), 43.1);
}

#[test]
fn the_binomial_tail_matches_exact_sums() {
    // N = 4, p = 1/2: P(X >= k) = (16, 15, 11, 5, 1) / 16.
    let expected = [16.0, 15.0, 11.0, 5.0, 1.0, 0.0];
    for (k, &e) in expected.iter().enumerate() {
        assert!((binomial_tail(4, k as u32, 0.5) - e / 16.0).abs() < 1e-15, "k = {k}");
    }
    // p^16 for n_k = N, and 1 - (1-p)^16 for n_k = 1.
    assert!((binomial_tail(16, 16, 0.9) - 0.9f64.powi(16)).abs() < 1e-15);
    assert!((binomial_tail(16, 1, 0.1) - (1.0 - 0.9f64.powi(16))).abs() < 1e-15);
    // A large window stays finite and monotone.
    let tails: Vec<f64> = (1..=10).map(|k| binomial_tail(1 << 21, k * 100_000, 0.3)).collect();
    assert!(tails.windows(2).all(|w| w[0] >= w[1]) && tails.iter().all(|t| t.is_finite()));
    assert!(tails[5] > 0.999 && tails[6] < 1e-3);
}

/// Sums the PMF directly, for small windows.
fn naive_tail(trials: u32, at_least: u32, p: f64) -> f64 {
    let mut sum = 0.0;
    for i in at_least..=trials {
        let mut comb = 1.0f64;
        for j in 0..i {
            comb = comb * f64::from(trials - j) / f64::from(j + 1);
        }
        sum += comb * p.powi(i as i32) * (1.0 - p).powi((trials - i) as i32);
    }
    sum
}

proptest! {
    #[test]
    fn the_binomial_tail_agrees_with_the_naive_sum(
        trials in 1u32..200, at_least in 0u32..201, p in 0.0001f64..0.9999,
    ) {
        let at_least = at_least.min(trials + 1);
        prop_assert!((binomial_tail(trials, at_least, p) - naive_tail(trials, at_least, p)).abs() < 1e-12);
    }
}

#[test]
fn tables_are_increasing_and_below_one() {
    for window in [1, 2, 7, 16, 64, 256] {
        let table = probability_table(window, 0.99, 1e-4);
        assert!(table.windows(2).all(|w| w[0] < w[1]), "N = {window}");
        assert!(table.iter().all(|&p| p > 0.0 && p < 1.0));
    }
}

/// n = 8, N = 16: a key's first tuple goes by PKG; its second creates the entry [c1, c2]
/// (n̂ = ⌊0.3488 * 8⌋ = 2, no growth) and goes to the empty c2; its third (p̂ = 43.05%,
/// n̂ = 3) adds the least-loaded worker, the lowest-index empty one, and goes there; its
/// fourth (50.30%, n̂ = 4) adds the next empty worker.
#[test]
fn a_hot_key_grows_its_candidates_as_table_iii_says() {
    let mut pd = grouper(8, 7, PdStreamParams::default());
    let key = Key::Bytes(b"hot");
    let (c1, c2) = pd.hash_candidates(key);
    assert_ne!(c1, c2);
    assert_eq!(pd.route(key), c1);
    assert_eq!(pd.candidate_set(key), None, "a key seen once has no entry");
    assert_eq!(pd.route(key), c2);
    assert_eq!(pd.candidate_set(key), Some(&[c1, c2][..]));
    let empty: Vec<u32> = (0..8).filter(|w| ![c1, c2].contains(w)).collect();
    assert_eq!(pd.route(key), empty[0]);
    assert_eq!(pd.candidate_set(key), Some(&[c1, c2, empty[0]][..]));
    assert_eq!(pd.route(key), empty[1]);
    assert_eq!(pd.candidate_set(key), Some(&[c1, c2, empty[0], empty[1]][..]));
    // n_k = 5: 56.90%, n̂ = 4: no growth; every candidate has load 1: ties to c1.
    assert_eq!(pd.route(key), c1);
    assert_eq!(pd.candidate_set(key).unwrap().len(), 4);
    assert_eq!(pd.occurrences(key), 5);
}

/// n = 4, N = 8: an entry lives while an occurrence of its key is in the window.
#[test]
fn entries_are_dropped_when_the_key_leaves_the_window() {
    let mut pd = grouper(4, 1, PdStreamParams::default());
    let hot = Key::Bytes(b"a");
    pd.route(hot);
    pd.route(hot);
    let entry = pd.candidate_set(hot).unwrap().to_vec();
    for i in 0..7u64 {
        pd.route(Key::Int(1000 + i));
    }
    // The window is [a, 1000..1006]: one occurrence left, the entry stays.
    assert_eq!((pd.occurrences(hot), pd.candidate_set(hot)), (1, Some(&entry[..])));
    // "a" again: the old "a" leaves as the new one enters, n_k = 1: routed by its hashes
    // (both have load 1 from the first two tuples: ties to c1), the entry kept.
    let (c1, _) = pd.hash_candidates(hot);
    assert_eq!(pd.route(hot), c1);
    assert_eq!(pd.candidate_set(hot), Some(&entry[..]));
    for i in 0..8u64 {
        pd.route(Key::Int(2000 + i));
    }
    assert_eq!((pd.occurrences(hot), pd.candidate_set(hot)), (0, None));
    assert_eq!(pd.hot_keys(), 0, "distinct keys never become hot");
}

/// n = 8, N = 16: a stream of one key saturates at n_k = 16, p̂ = 99.94%, n̂ = ⌊7.995⌋ = 7:
/// the key reaches 7 workers, never the 8th, and keeps them balanced.
#[test]
fn a_single_key_spreads_over_seven_of_eight_workers() {
    let mut pd = grouper(8, 0, PdStreamParams::default());
    let key = Key::Bytes(b"only");
    for _ in 0..1_000 {
        pd.route(key);
    }
    assert_eq!(pd.candidate_set(key).unwrap().len(), 7);
    let loads = pd.loads().snapshot();
    assert_eq!(loads.iter().filter(|&&l| l == 0).count(), 1);
    assert!(loads.iter().filter(|&&l| l > 0).all(|&l| (142..=143).contains(&l)));
}

/// n_k counts the last N keys, the incoming one included (the window slides first):
/// n = 2, α = 2, N = 2. In "a b a" the first "a" leaves as the second enters, so n_k = 1
/// and "a" is not hot; reading the count before the slide and adding the incoming tuple
/// (a window of N + 1) would make it hot. "a a" then gives n_k = 2: hot.
#[test]
fn n_k_counts_the_last_n_keys_including_the_incoming_one() {
    let mut pd = grouper(2, 0, with_alpha(2));
    assert_eq!(pd.window_length(), 2);
    let (a, b) = (Key::Bytes(b"a"), Key::Bytes(b"b"));
    pd.route(a);
    pd.route(b);
    pd.route(a);
    assert_eq!((pd.occurrences(a), pd.candidate_set(a)), (1, None));
    pd.route(a);
    assert_eq!(pd.occurrences(a), 2);
    assert!(pd.candidate_set(a).is_some());
}

#[test]
fn a_window_of_one_key_is_pkg() {
    // n = 2, α = 1: N = 1, every n_k is 1.
    let mut pd = grouper(2, 9, with_alpha(1));
    assert_eq!(pd.window_length(), 1);
    let mut pkg = build("pkg", 2, 9, &Params::new(), None).unwrap().grouper;
    for i in 0..500u64 {
        let key = Key::Int(i % 3);
        assert_eq!(pd.route(key), pkg.route(key));
    }
    assert_eq!(pd.hot_keys(), 0);
}

#[test]
fn collide_or_not_like_pkg() {
    let family = HashFamily::new(0, 4);
    let colliding = (0u64..10_000)
        .map(Key::Int)
        .find(|&k| family.candidate(1, k) == family.candidate(2, k))
        .unwrap();
    let c1 = family.candidate(1, colliding);
    // n = 4, N = 8: the second tuple has p̂ = 60%, n̂ = 2.
    let params = PdStreamParams { distinct_candidates: false, ..Default::default() };
    let mut paper = grouper(4, 0, params);
    paper.route(colliding);
    paper.route(colliding);
    // The paper's rule: the entry starts as {c1}; n̂ = 2 adds the least-loaded worker.
    let least_loaded = if c1 == 0 { 1 } else { 0 };
    assert_eq!(paper.candidate_set(colliding), Some(&[c1, least_loaded][..]));
    let mut storm = grouper(4, 0, PdStreamParams::default());
    storm.route(colliding);
    storm.route(colliding);
    assert_eq!(storm.candidate_set(colliding), Some(&[c1, (c1 + 1) % 4][..]));
}

#[test]
fn end_window_changes_nothing() {
    let keys: Vec<u64> = (0..300).map(|i| (i * i) % 11).collect();
    let mut a = build("pdstream", 5, 3, &Params::new(), None).unwrap().grouper;
    let mut b = build("pdstream", 5, 3, &Params::new(), None).unwrap().grouper;
    for (i, &k) in keys.iter().enumerate() {
        if i % 17 == 0 {
            b.end_window();
        }
        assert_eq!(a.route(Key::Int(k)), b.route(Key::Int(k)));
    }
}

fn params(pairs: &[(&str, ParamValue)]) -> Params {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
}

#[test]
fn parameters_are_validated_with_messages() {
    let err = |p: Params| build("pdstream", 8, 0, &p, None).err().unwrap().to_string();
    assert!(err(params(&[("alpha", ParamValue::Int(0))])).contains("must be in [1, 16], got 0"));
    assert!(err(params(&[("alpha", ParamValue::Int(17))])).contains("got 17"));
    assert!(build("pdstream", 1000, 0, &params(&[("alpha", ParamValue::Int(16))]), None).is_ok());
    assert!(
        err(params(&[("expected_probability", ParamValue::Float(1.0))]))
            .contains("must be in (0, 1), got 1")
    );
    assert!(err(params(&[("epsilon", ParamValue::Float(0.0))])).contains("epsilon"));
    assert!(err(params(&[("epsilon", ParamValue::Float(1.0))])).contains("got 1"));
    let instance = build("pdstream", 8, 0, &Params::new(), None).unwrap();
    assert_eq!(instance.params["alpha"], ParamValue::Int(4));
    assert_eq!(instance.params["expected_probability"], ParamValue::Float(0.99));
    assert_eq!(instance.params["epsilon"], ParamValue::Float(1e-4));
    assert_eq!(instance.params["distinct_candidates"], ParamValue::Bool(true));
    // Odd α·n rounds up; n = 1 still gets a window.
    assert_eq!(window_length(1, 1), Some(1));
    assert_eq!(window_length(3, 5), Some(8));
    assert!(build("pdstream", 1, 0, &Params::new(), None).is_ok());
}

/// A Zipf(1.2)-like stream over 10 000 keys, deterministic.
fn skewed_keys(len: usize) -> Vec<u64> {
    let weights: Vec<f64> = (1..=10_000).map(|r| 1.0 / (r as f64).powf(1.2)).collect();
    let total: f64 = weights.iter().sum();
    let mut cumulative = Vec::with_capacity(weights.len());
    let mut acc = 0.0;
    for w in weights {
        acc += w / total;
        cumulative.push(acc);
    }
    let mut rng = keysplit_core::rng::SplitMix64::new(42);
    (0..len)
        .map(|_| {
            let u = rng.next_f64();
            cumulative.partition_point(|&c| c < u).min(9_999) as u64
        })
        .collect()
}

/// State at n = 128 within 5 MB, a bound just above the paper's figure (about 4.5 MB for
/// a whole Storm executor, Fig. 12).
#[test]
fn state_at_128_workers_is_small_and_bounded() {
    let mut pd = grouper(128, 0, PdStreamParams::default());
    let empty = pd.state_bytes();
    let mut peak = empty;
    for k in skewed_keys(200_000) {
        pd.route(Key::Int(k));
        peak = peak.max(pd.state_bytes());
    }
    // The hot keys' candidate sets, at most n workers of 4 bytes for each of N entries.
    assert!(peak <= empty + 256 * 128 * 4);
    assert!(peak <= 5 << 20);
    println!("pdstream state_bytes at n = 128: {empty} empty, {peak} peak");
    let loads = pd.loads().snapshot();
    let mean = loads.iter().sum::<u64>() as f64 / 128.0;
    let imbalance = (*loads.iter().max().unwrap() as f64 - mean) / mean;
    assert!(imbalance < 0.05, "load imbalance {imbalance}");
}

/// The routing of a fixed stream, checked against tests/reference_pdstream.py
/// (`PdStreamTwin(6, seed=11)` over the same keys).
#[test]
fn golden_routing_matches_the_python_twin() {
    let keys: Vec<u64> = (0..60u64).map(|i| (i * 7 + i * i) % 9 % (1 + i % 5)).collect();
    let mut pd = build("pdstream", 6, 11, &Params::new(), None).unwrap().grouper;
    let routed: Vec<u32> = keys.iter().map(|&k| pd.route(Key::Int(k))).collect();
    assert_eq!(routed, GOLDEN);
}

const GOLDEN: &[u32] = &[
    3, 5, 0, 4, 4, 3, 1, 0, 2, 5, 1, 2, 3, 5, 1, 0, 2, 3, 5, 4, 0, 1, 0, 3, 2, 5, 4, 1, 2, 3, 5, 0,
    1, 4, 4, 2, 3, 0, 5, 4, 1, 2, 3, 5, 4, 0, 1, 2, 4, 0, 3, 5, 0, 1, 2, 3, 5, 1, 2, 1,
];

fn keys_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(
        prop_oneof![3 => Just(vec![0u8]), 1 => prop::collection::vec(0u8..6, 0..2)],
        0..400,
    )
}

fn params_strategy() -> impl Strategy<Value = PdStreamParams> {
    (1i64..7, prop::sample::select(vec![0.5, 0.9, 0.99, 0.999]), 1e-5f64..0.1, any::<bool>())
        .prop_map(|(alpha, expected_probability, epsilon, distinct_candidates)| PdStreamParams {
            alpha,
            expected_probability,
            epsilon,
            distinct_candidates,
        })
}

proptest! {
    #[test]
    fn routes_below_n_deterministically_and_batch_equals_single(
        keys in keys_strategy(), workers in 1u32..40, seed in any::<u64>(), params in params_strategy(),
    ) {
        common::check_routing(|| grouper(workers, seed, params), &keys, workers)?;
    }

    /// A key's candidate set grows by at most one worker per tuple and stays
    /// within its probability-table bound.
    #[test]
    fn candidate_sets_grow_by_one_within_the_table_bound(
        keys in keys_strategy(), workers in 1u32..40, seed in any::<u64>(), params in params_strategy(),
    ) {
        let mut pd = grouper(workers, seed, params);
        let length = pd.window_length() as u32;
        let table = probability_table(length, params.expected_probability, params.epsilon);
        let bound = |n_k: u32| estimated_candidates(table[n_k as usize - 1], workers);
        let alphabet: Vec<Vec<u8>> = {
            let mut a = keys.clone();
            a.sort();
            a.dedup();
            a
        };
        // The largest n̂ each live entry has seen.
        let mut entry_bound: HashMap<Vec<u8>, usize> = HashMap::new();
        for k in &keys {
            let key = Key::Bytes(k);
            let (c1, c2) = pd.hash_candidates(key);
            let initial: Vec<u32> = if c1 == c2 { vec![c1] } else { vec![c1, c2] };
            let before = pd.candidate_set(key).map(<[u32]>::to_vec);
            let worker = pd.route(key);
            let n_k = pd.occurrences(key);
            prop_assert!(n_k >= 1 && n_k <= length);
            if n_k == 1 {
                prop_assert!(worker == c1 || worker == c2);
                prop_assert_eq!(pd.candidate_set(key).map(<[u32]>::to_vec), before);
                continue;
            }
            let after = pd.candidate_set(key).unwrap().to_vec();
            let base = before.unwrap_or_else(|| { entry_bound.remove(k); initial.clone() });
            prop_assert!(after.starts_with(&base), "{:?} is not {:?} grown", after, base);
            prop_assert!(after.len() <= base.len() + 1);
            let nhat = bound(n_k) as usize;
            let seen = entry_bound.entry(k.clone()).or_insert(0);
            *seen = (*seen).max(nhat);
            if after.len() > base.len() {
                prop_assert!(after.len() <= nhat);
            }
            prop_assert!(after.len() <= initial.len().max(*seen));
            prop_assert!(after.contains(&worker));
            let mut distinct = after.clone();
            distinct.sort();
            distinct.dedup();
            prop_assert_eq!(distinct.len(), after.len());
            prop_assert!(after.iter().all(|&w| w < workers));
            // Entries exist exactly for the keys in the window that were hot there.
            for other in &alphabet {
                let o = Key::Bytes(other);
                if pd.candidate_set(o).is_some() { prop_assert!(pd.occurrences(o) >= 1); }
                if pd.occurrences(o) >= 2 { prop_assert!(pd.candidate_set(o).is_some()); }
            }
        }
    }
}

/// Above `EAGER_TABLE_WINDOW` the table fills as counts need it, with the same values.
#[test]
fn a_lazy_table_holds_algorithm_1_values() {
    use keysplit_core::groupers::pdstream::EAGER_TABLE_WINDOW;
    let workers = 8_200;
    let mut pd = grouper(workers, 0, PdStreamParams::default());
    assert!(pd.window_length() > EAGER_TABLE_WINDOW);
    let key = Key::Bytes(b"hot");
    for _ in 0..30 {
        pd.route(key);
    }
    let length = pd.window_length() as u32;
    let before = pd.state_bytes();
    for n_k in [1, 2, 17, 30, 45] {
        assert_eq!(pd.probability(n_k), estimate_probability(length, n_k, 0.99, 1e-4));
    }
    assert!(pd.state_bytes() > before, "the table grew to n_k = 45");
    let grown = pd.candidate_set(key).unwrap().len();
    assert_eq!(grown, estimated_candidates(pd.probability(30), workers) as usize);
}
