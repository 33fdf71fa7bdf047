//! Dynamic Key Grouping (Dalabasmaz and Can): Table 1, hand-worked routings of Algorithms
//! 1-6, and the routing invariants: worker ids below `n`, deterministic routing, a batch
//! routed as its keys one by one, and candidates that form a contiguous ring slice.

use keysplit_core::grouper::Grouper;

use keysplit_core::groupers::dkg::{
    DkgParams, DynamicKeyGrouping, Space, max_machines, threshold_load, threshold_table,
};
use keysplit_core::hash::HashFamily;
use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::build;
use keysplit_core::{Key, LoadVector};
use proptest::prelude::*;

mod common;

/// Table 1: machines, ideal load (%), threshold load (%), max machines.
const TABLE_1: [(u32, f64, f64, u32); 5] = [
    (5, 20.00, 24.47, 5),
    (10, 10.00, 13.16, 8),
    (20, 5.00, 7.24, 14),
    (50, 2.00, 3.41, 30),
    (100, 1.00, 2.00, 51),
];

fn round_2dp(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn grouper(workers: u32, seed: u64, params: DkgParams) -> DynamicKeyGrouping {
    DynamicKeyGrouping::new(HashFamily::new(seed, workers), LoadVector::private(workers), params)
        .unwrap()
}

/// Small spaces (old 1, teenage 4, baby 5), no warm-up, both cycles at every window, and
/// windows closed by hand only.
fn small() -> DkgParams {
    DkgParams {
        window_tuples: 1_000_000,
        old_cycle_windows: 1,
        warmup_windows: 0,
        expected_keys: 10,
    }
}

#[test]
fn the_threshold_table_is_table_1() {
    let machines: Vec<u32> = TABLE_1.iter().map(|row| row.0).collect();
    let table = threshold_table(&machines);
    for (row, &(m, ideal, threshold, max)) in table.iter().zip(&TABLE_1) {
        assert_eq!(row.machines, m);
        assert_eq!(round_2dp(row.ideal_load), ideal, "ideal load of {m}");
        assert_eq!(round_2dp(row.threshold_load), threshold, "threshold of {m}");
        assert_eq!(row.max_machines, max, "max machines of {m}");
    }
    // The grouper uses the same values.
    for &(m, _, _, max) in &TABLE_1 {
        let dkg = grouper(m, 0, DkgParams::default());
        assert_eq!(dkg.max_width(), max);
        assert_eq!(dkg.threshold(), threshold_load(m));
    }
}

#[test]
fn the_maximum_is_at_most_n_and_at_least_the_initial_width() {
    for m in 1..=2000u32 {
        let max = max_machines(m);
        assert!(max <= m && max >= m.min(2), "{m}: {max}");
        // floor(100/Ls) machines at Ls percent fit in 100%, one more does not.
        let ls = threshold_load(m);
        if max < m {
            assert!(f64::from(max - 1) * ls <= 100.0 && f64::from(max) * ls > 100.0);
        }
    }
    assert_eq!((max_machines(1), max_machines(2), max_machines(3)), (1, 2, 3));
}

#[test]
fn default_spaces_are_the_papers_10_40_50() {
    let dkg = grouper(10, 0, DkgParams::default());
    assert_eq!(dkg.space_sizes(), (10, 40, 50));
    let dkg = grouper(10, 0, DkgParams { expected_keys: 25, ..DkgParams::default() });
    assert_eq!(dkg.space_sizes(), (2, 10, 12));
}

/// n = 4: Li = 25%, Ls = 30%, max 4. `a` starts at worker i = h_0(a) mod 4.
#[test]
fn a_hot_key_scales_out_then_down_by_hand() {
    let a = Key::Bytes(b"a");
    let mut dkg = grouper(4, 7, small());
    let i = dkg.first_worker(a);
    let ring = |o: u32| (i + o) % 4;
    // Before any window the key is in the baby space: PKG-like over {i, i+1}, ties to i.
    assert_eq!(dkg.candidates(a), vec![ring(0), ring(1)]);
    let routed: Vec<u32> = (0..3).map(|_| dkg.route(a)).collect();
    assert_eq!(routed, vec![ring(0), ring(1), ring(0)]);
    assert_eq!(dkg.space_of(a), Some(Space::Baby));
    // Window end: baby [a] fills the empty teenage space, which fills the empty old space.
    dkg.end_window();
    assert_eq!(dkg.space_of(a), Some(Space::Old));
    // Loads i: 2 (66.7%), i+1: 1 (33.3%). The least, 33.3%, is >= 30%: scale out to i+2,
    // whose load 0 is below 1. Width 3.
    assert_eq!(dkg.route(a), ring(2));
    assert_eq!(dkg.width(a), 3);
    assert_eq!(dkg.candidates(a), vec![ring(0), ring(1), ring(2)]);
    // Loads 2, 1, 1 of 4: 50%, 25%, 25%. Least i+1 (25% < 30%): no scale out. Two
    // candidates below 30% and width 3 > 2: scale down to 2, choose again over {i, i+1}:
    // i+1 (25%), one below the threshold, so it stays at 2.
    assert_eq!(dkg.route(a), ring(1));
    assert_eq!(dkg.width(a), 2);
    assert_eq!(dkg.loads().snapshot().iter().sum::<u64>(), 5);
}

#[test]
fn no_scale_out_during_the_warm_up_or_outside_the_old_space() {
    let a = Key::Bytes(b"a");
    // Warm-up of 2 windows: after one window, a is old, but the warm-up is not over.
    let mut dkg = grouper(4, 7, DkgParams { warmup_windows: 2, ..small() });
    let i = dkg.first_worker(a);
    for _ in 0..3 {
        dkg.route(a);
    }
    dkg.end_window();
    assert!(!dkg.warmed_up());
    assert_eq!(dkg.route(a), (i + 1) % 4);
    assert_eq!(dkg.width(a), 2);
    dkg.end_window();
    assert!(dkg.warmed_up());
    // Loads i: 2, i+1: 2 (50% each): scale out to i+2.
    assert_eq!(dkg.route(a), (i + 2) % 4);
    assert_eq!(dkg.width(a), 3);

    // Teenage only (the old cycle every 2 windows): no scale out after one window.
    let mut dkg = grouper(4, 7, DkgParams { old_cycle_windows: 2, ..small() });
    for _ in 0..3 {
        dkg.route(a);
    }
    dkg.end_window();
    assert_eq!(dkg.space_of(a), Some(Space::Teenage));
    assert_eq!(dkg.route(a), (i + 1) % 4);
    assert_eq!(dkg.width(a), 2);
    dkg.end_window();
    assert_eq!(dkg.space_of(a), Some(Space::Old));
}

/// Spaces of sizes old 1, teenage 4, baby 5 (expected_keys = 10).
#[test]
fn promotions_follow_algorithms_1_to_3() {
    let mut dkg = grouper(8, 1, DkgParams { old_cycle_windows: 2, ..small() });
    // Keys 1..=7 seen 7, 6, ..., 1 times.
    for k in 1..=7u64 {
        for _ in 0..(8 - k) {
            dkg.route(Key::Int(k));
        }
    }
    assert_eq!(dkg.space_lengths(), (0, 0, 7));
    // Window 1: baby sorted 1..7, truncated to 5 (keys 6, 7 dropped); the teenage space
    // fills with keys 1..4; key 5 stays a baby.
    dkg.end_window();
    assert_eq!(dkg.space_lengths(), (0, 4, 1));
    assert_eq!(dkg.space_of(Key::Int(6)), None);
    assert_eq!(dkg.space_of(Key::Int(7)), None);
    assert_eq!(dkg.space_of(Key::Int(5)), Some(Space::Baby));
    for k in 1..=4 {
        assert_eq!(dkg.space_of(Key::Int(k)), Some(Space::Teenage));
    }
    // Key 5 now seen 10 times: more than key 4 (4 times), the lowest teenager.
    for _ in 0..7 {
        dkg.route(Key::Int(5));
    }
    // Window 2: key 5 swaps with key 4 (strictly more); then key 4 (4) is not above key
    // 3 (5): done. Then the old cycle: key 5 (10) fills the empty old space.
    dkg.end_window();
    assert_eq!(dkg.space_of(Key::Int(4)), Some(Space::Baby));
    assert_eq!(dkg.space_of(Key::Int(5)), Some(Space::Old));
    assert_eq!(dkg.space_lengths(), (1, 3, 1));
    // Key 1 (7) vs the old key 5 (10): no swap. A key with equal count does not swap.
    for _ in 0..3 {
        dkg.route(Key::Int(1));
    }
    dkg.end_window();
    dkg.end_window();
    assert_eq!(dkg.space_of(Key::Int(5)), Some(Space::Old));
    assert_eq!(dkg.count(Key::Int(1)), dkg.count(Key::Int(5)));
    dkg.route(Key::Int(1));
    dkg.end_window();
    dkg.end_window();
    assert_eq!(dkg.space_of(Key::Int(1)), Some(Space::Old));
    assert_eq!(dkg.space_of(Key::Int(5)), Some(Space::Teenage));
}

#[test]
fn windows_close_after_window_tuples_or_at_end_window() {
    let mut dkg = grouper(4, 0, DkgParams { window_tuples: 3, ..small() });
    dkg.route(Key::Int(1));
    dkg.route(Key::Int(1));
    assert_eq!(dkg.windows_closed(), 0);
    dkg.route(Key::Int(1));
    assert_eq!(dkg.windows_closed(), 1);
    assert_eq!(dkg.space_of(Key::Int(1)), Some(Space::Old));
    dkg.route(Key::Int(2));
    dkg.end_window();
    assert_eq!(dkg.windows_closed(), 2);
    // end_window restarted the count: three more tuples close the next window.
    for _ in 0..3 {
        dkg.route(Key::Int(3));
    }
    assert_eq!(dkg.windows_closed(), 3);
    // An empty window closes too.
    dkg.end_window();
    assert_eq!(dkg.windows_closed(), 4);
}

#[test]
fn one_and_two_workers() {
    let mut dkg = grouper(1, 0, DkgParams { window_tuples: 2, ..small() });
    for _ in 0..20 {
        assert_eq!(dkg.route(Key::Int(0)), 0);
    }
    assert_eq!(dkg.width(Key::Int(0)), 1);
    let mut dkg = grouper(2, 0, DkgParams { window_tuples: 2, ..small() });
    for _ in 0..20 {
        dkg.route(Key::Int(0));
    }
    assert_eq!(dkg.width(Key::Int(0)), 2);
    assert_eq!(dkg.loads().snapshot(), vec![10, 10]);
}

fn params(pairs: &[(&str, ParamValue)]) -> Params {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

#[test]
fn parameters_are_validated_with_messages() {
    let cases = [
        ("window_tuples", 0, "must be at least 1, got 0"),
        ("old_cycle_windows", 0, "must be at least 1, got 0"),
        ("warmup_windows", -1, "must be at least 0, got -1"),
        ("expected_keys", 9, "must be in [10, 1073741824], got 9"),
    ];
    for (name, value, message) in cases {
        let error = build("dkg", 8, 0, &params(&[(name, ParamValue::Int(value))]), None)
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains(name) && error.contains(message), "{error}");
    }
    let built = build("dkg", 8, 0, &Params::new(), None).unwrap();
    assert_eq!(built.params["window_tuples"], ParamValue::Int(15_000));
    assert_eq!(built.params["old_cycle_windows"], ParamValue::Int(4));
    assert_eq!(built.params["warmup_windows"], ParamValue::Int(1));
    assert_eq!(built.params["expected_keys"], ParamValue::Int(100));
}

#[test]
fn the_hot_key_spreads_beyond_two_workers_with_the_defaults() {
    // 80% of the tuples on one key over 10 workers (the paper's example of Section 4).
    let mut dkg = grouper(10, 5, DkgParams::default());
    let mut reached = std::collections::BTreeSet::new();
    for i in 0..200_000u64 {
        let key = if i % 5 == 0 { 1 + i % 997 } else { 0 };
        let worker = dkg.route(Key::Int(key));
        if key == 0 && i >= 100_000 {
            reached.insert(worker);
        }
    }
    assert_eq!(dkg.space_of(Key::Int(0)), Some(Space::Old));
    assert!(reached.len() > 2, "{reached:?}");
    assert!(reached.len() <= 8);
    // State: spaces of 100 items plus one window of new keys at most.
    assert!(dkg.state_bytes() < 64 * 1024, "{}", dkg.state_bytes());
}

/// The routing of fixed streams, checked against tests/reference_dkg.py (`DkgTwin`).
#[test]
fn golden_routing_matches_the_python_twin() {
    let small =
        DkgParams { window_tuples: 10, old_cycle_windows: 2, warmup_windows: 1, expected_keys: 10 };
    let mut dkg = grouper(6, 11, small);
    let routed: Vec<u32> = (0..300u64)
        .map(|i| dkg.route(Key::Int(if i % 3 != 0 { 0 } else { (i * 7) % 11 })))
        .collect();
    assert_eq!(routed, GOLDEN);
    assert_eq!(dkg.loads().snapshot(), vec![62, 62, 62, 26, 25, 63]);
    assert_eq!((dkg.width(Key::Int(0)), dkg.space_of(Key::Int(0))), (2, Some(Space::Old)));

    // Defaults, 70 000 tuples over 10 workers: a running checksum of the routing.
    let mut dkg = grouper(10, 3, DkgParams::default());
    let mut checksum: u128 = 0;
    for i in 0..70_000u64 {
        let key = if i % 5 < 2 { (i * 2_654_435_761) % 97 } else { i % 4 };
        let worker = dkg.route(Key::Int(key));
        checksum = (checksum * 31 + u128::from(worker)) % (1 << 61);
    }
    assert_eq!(checksum, 392_847_014_032_001_352);
    assert_eq!(
        dkg.loads().snapshot(),
        vec![3248, 11103, 11103, 9216, 9215, 8291, 8082, 3247, 3248, 3247]
    );
    let widths: Vec<u32> = (0..4).map(|k| dkg.width(Key::Int(k))).collect();
    assert_eq!(widths, vec![3, 5, 3, 2]);
}

const GOLDEN: &[u32] = &[
    5, 0, 5, 4, 0, 5, 2, 0, 5, 0, 5, 0, 5, 0, 5, 3, 0, 5, 1, 0, 1, 4, 1, 1, 2, 1, 1, 5, 2, 1, 2, 2,
    2, 2, 1, 2, 4, 3, 3, 3, 0, 1, 5, 2, 0, 5, 1, 2, 4, 0, 1, 2, 5, 0, 4, 1, 2, 3, 5, 0, 5, 1, 2, 1,
    0, 2, 3, 3, 5, 4, 0, 1, 3, 5, 0, 5, 1, 2, 0, 1, 2, 4, 5, 0, 2, 1, 2, 4, 5, 0, 3, 1, 5, 0, 1, 2,
    2, 5, 0, 1, 2, 3, 4, 5, 0, 3, 1, 5, 0, 1, 2, 5, 0, 1, 4, 2, 5, 2, 0, 1, 4, 5, 0, 3, 1, 2, 5, 0,
    1, 2, 2, 5, 0, 1, 2, 4, 5, 0, 3, 1, 5, 0, 1, 2, 5, 0, 1, 4, 2, 2, 1, 5, 0, 4, 5, 0, 3, 1, 2, 5,
    0, 1, 2, 2, 5, 0, 1, 2, 4, 5, 0, 3, 1, 2, 5, 0, 1, 5, 2, 0, 3, 1, 2, 1, 5, 0, 4, 5, 0, 3, 1, 2,
    5, 0, 1, 2, 2, 3, 5, 0, 1, 4, 2, 5, 3, 0, 1, 5, 0, 1, 5, 2, 2, 4, 0, 1, 2, 5, 0, 4, 1, 2, 3, 5,
    0, 5, 1, 0, 2, 1, 2, 3, 5, 0, 4, 1, 2, 3, 5, 0, 5, 0, 1, 5, 1, 2, 4, 0, 1, 2, 2, 5, 4, 0, 1, 3,
    5, 0, 5, 1, 2, 2, 0, 1, 2, 3, 5, 4, 0, 1, 3, 5, 0, 5, 1, 0, 5, 1, 2, 4, 0, 1, 2, 2, 2, 4, 5, 0,
    3, 1, 5, 0, 1, 2, 2, 5, 0, 1, 2, 5,
];

fn keys_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(
        prop_oneof![4 => Just(vec![0u8]), 1 => prop::collection::vec(0u8..6, 0..2)],
        0..400,
    )
}

fn params_strategy() -> impl Strategy<Value = DkgParams> {
    (1i64..40, 1i64..4, 0i64..3, 10i64..40).prop_map(
        |(window_tuples, old_cycle_windows, warmup_windows, expected_keys)| DkgParams {
            window_tuples,
            old_cycle_windows,
            warmup_windows,
            expected_keys,
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

    /// A key's candidates are a contiguous ring slice from `h_0(k) mod n`, at
    /// least `min(2, n)` and never wider than Table 1's maximum; each tuple goes into the
    /// slice of its key after routing, and a width changes by one per scale out.
    #[test]
    fn candidates_form_a_contiguous_ring_slice_within_the_maximum(
        keys in keys_strategy(), workers in 1u32..40, seed in any::<u64>(), params in params_strategy(),
        closes in prop::collection::vec(0usize..400, 0..6),
    ) {
        let mut dkg = grouper(workers, seed, params);
        let max = max_machines(workers);
        for (t, k) in keys.iter().enumerate() {
            if closes.contains(&t) {
                dkg.end_window();
            }
            let key = Key::Bytes(k);
            let before = dkg.width(key);
            let worker = dkg.route(key);
            let first = dkg.first_worker(key);
            let width = dkg.width(key);
            prop_assert!(width >= workers.min(2) && width <= max);
            prop_assert!(width <= before + 1);
            let slice = dkg.candidates(key);
            prop_assert_eq!(slice.len(), width as usize);
            for (i, &w) in slice.iter().enumerate() {
                prop_assert_eq!(w, (first + i as u32) % workers);
            }
            // A key dropped by the baby truncation at this tuple's window end restarts at
            // min(2, n); its tuple went to a worker of its slice before the truncation.
            prop_assert!(slice.contains(&worker) || dkg.space_of(key).is_none());
            prop_assert!(worker < workers);
        }
    }
}

#[test]
fn state_bytes_count_the_key_space() {
    let mut dkg = grouper(8, 0, DkgParams::default());
    let empty = dkg.state_bytes();
    assert!(empty >= 8 * 64, "load counters: {empty}");
    // 10 000 new keys in one window: the baby space holds them all until the window ends.
    for k in 0..10_000u64 {
        dkg.route(Key::Int(k));
    }
    let full = dkg.state_bytes();
    // At least a fingerprint in the baby space and an item (fingerprint, count, width,
    // space) in the table per key.
    assert!(full >= empty + 10_000 * (8 + 8 + 16), "{full}");
    // The window end keeps 50 babies, 40 of which become teenagers (the old space fills at
    // window 4).
    dkg.end_window();
    assert_eq!(dkg.space_lengths(), (0, 40, 10));
    let after = dkg.state_bytes();
    assert!(after < empty + 16 * 1024, "{after}");
    assert!(after > empty + 50 * (8 + 16));
}
