//! DAGreedy: hand-worked examples, a golden stream shared with the Python twin, and the
//! routing invariants: worker ids below `n`, deterministic routing, a batch routed as its
//! keys one by one, cold keys to their hash worker and hot keys to the best score.

use keysplit_core::grouper::{Grouper, route_batch};

use keysplit_core::groupers::dagreedy::DaGreedy;
use keysplit_core::hash::HashFamily;
use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::build;
use keysplit_core::{Key, KeyBatch, KeyValues, LoadVector, NullPolicy, OwnedKey};
use proptest::prelude::*;

#[path = "common/hot_keys.rs"]
mod hot_keys;
use hot_keys::hot_oracle;

fn params(interval: i64, panes: i64) -> Params {
    Params::from([
        ("interval_tuples".to_owned(), ParamValue::Int(interval)),
        ("window_panes".to_owned(), ParamValue::Int(panes)),
    ])
}

fn grouper(workers: u64, seed: u64, interval: i64, panes: i64) -> Box<dyn Grouper> {
    build("dagreedy", workers, seed, &params(interval, panes), None).unwrap().grouper
}

// With seed 0 and 2 workers, h_0(1) mod 2 = 0 and h_0(0) mod 2 = 1 (checked below).
const X: Key<'static> = Key::Int(1);
const Y: Key<'static> = Key::Int(0);

#[test]
fn hand_worked_example() {
    let family = HashFamily::new(0, 2);
    assert_eq!((family.candidate(0, X), family.candidate(0, Y)), (0, 1));
    // n = 2, intervals of 4 tuples, window = current pane + 1 closed pane.
    let mut g = grouper(2, 0, 4, 1);
    // Interval 0: no previous interval, nothing is hot: key grouping.
    // x x x y -> 0 0 0 1. Window loads L = [3, 1], T = 4; x on {0}, y on {1}.
    let first: Vec<u32> = [X, X, X, Y].into_iter().map(|k| g.route(k)).collect();
    assert_eq!(first, [0, 0, 0, 1]);
    // Interval 1: threshold 4 / (100 * 2) = 0.02, so every tuple is hot.
    // Score order [k on w]*T - n*L_w (score = 0.5[on] - 0.5(L - avg)/avg):
    //  x: w0: 4 - 6 = -2, w1: 0 - 2 = -2 (both scores 0.25): tie -> 0. L = [4, 1], T = 5.
    //  x: w0: 5 - 8 = -3, w1: 0 - 2 = -2 -> 1. L = [4, 2], T = 6; x on {0, 1}.
    //  x: w0: 6 - 8 = -2, w1: 6 - 4 = 2 -> 1. L = [4, 3], T = 7.
    //  y: w0: 0 - 8 = -8, w1: 7 - 6 = 1 -> 1. L = [4, 4]. The interval closes; pane 0
    //  leaves the window: L = [1, 3] (pane 1: x->0, x->1, x->1, y->1), T = 4.
    let second: Vec<u32> = [X, X, X, Y].into_iter().map(|k| g.route(k)).collect();
    assert_eq!(second, [0, 1, 1, 1]);
    // Interval 2: y: w0: 0 - 2 = -2, w1: 4 - 6 = -2: tie -> 0.
    assert_eq!(g.route(Y), 0);
}

#[test]
fn threshold_is_strict_and_hot_status_lasts_one_more_interval() {
    // n = 1 worker makes routing trivial; observe hotness through the public probe.
    let family = HashFamily::new(0, 1);
    let mut g = DaGreedy::new(family, LoadVector::private(1), 200, 1);
    // Interval 0: 200 tuples of other keys; T = 200, threshold 200 / 100 = 2.
    (0..200u64).for_each(|i| _ = g.route(Key::Int(100 + i % 7)));
    g.route(X);
    g.route(X);
    assert!(!g.is_hot_key(X), "count 2 does not exceed 2");
    g.route(X);
    assert!(g.is_hot_key(X), "count 3 exceeds 2");
    g.end_window(); // interval 1 closes (3 tuples): x stays hot through interval 2
    assert!(g.is_hot_key(X));
    g.end_window(); // interval 2 closes without x being found hot again: x expires
    assert!(!g.is_hot_key(X));
}

#[test]
fn an_empty_previous_interval_makes_no_key_hot() {
    let family = HashFamily::new(0, 2);
    let mut g = DaGreedy::new(family, LoadVector::private(2), 1000, 1);
    (0..50).for_each(|_| _ = g.route(X));
    g.end_window();
    g.end_window(); // empty interval: T = 0
    (0..50).for_each(|_| assert_eq!(g.route(X), 0, "cold: key grouping"));
    assert!(!g.is_hot_key(X));
}

#[test]
fn golden_stream_matches_the_python_twin() {
    // tests/reference_dagreedy.py, DaGreedyTwin(4, 7, interval_tuples=20, window_panes=2),
    // the same stream, end_window() before tuple 70.
    let expected: [u32; 120] = [
        1, 2, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 2,
        0, 0, 0, 0, 0, 3, 0, 3, 0, 3, 3, 2, 0, 0, 0, 3, 1, 3, 0, 3, 3, 2, 1, 0, 1, 3, 0, 2, 1, 3,
        3, 3, 1, 2, 1, 3, 1, 2, 1, 3, 3, 3, 0, 2, 0, 3, 0, 1, 0, 2, 3, 3, 1, 3, 0, 3, 1, 0, 1, 2,
        3, 3, 0, 3, 0, 2, 0, 1, 0, 1, 2, 2, 0, 3, 1, 2, 0, 2, 1, 0, 2, 2, 1, 3, 1, 2, 1, 2, 1, 1,
    ];
    let mut g = grouper(4, 7, 20, 2);
    let routed: Vec<u32> = (0..120u64)
        .map(|i| {
            if i == 70 {
                g.end_window();
            }
            g.route(golden_key(i))
        })
        .collect();
    assert_eq!(routed, expected);
}

/// The golden stream: `b"hot"` every 5th tuple, else 0 on even tuples, else
/// `(7i² + 3i) mod 11`.
pub fn golden_key(i: u64) -> Key<'static> {
    if i.is_multiple_of(5) {
        Key::Bytes(b"hot")
    } else if i.is_multiple_of(2) {
        Key::Int(0)
    } else {
        Key::Int((i * i * 7 + 3 * i) % 11)
    }
}

#[test]
fn parameters_are_validated() {
    let err = |p: Params| build("dagreedy", 4, 0, &p, None).err().unwrap().to_string();
    assert!(
        err(params(0, 1)).contains("interval_tuples\" of grouper \"dagreedy\" must be at least 1")
    );
    assert!(err(params(10, 0)).contains("window_panes"));
    assert!(err(params(10, 1 << 20)).contains("window_panes"));
}

fn keys_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    // Skewed: key [0] about half the time, so that some keys turn hot.
    prop::collection::vec(
        prop_oneof![3 => Just(vec![0u8]), 2 => prop::collection::vec(0u8..5, 0..2)],
        0..400,
    )
}

proptest! {
    #[test]
    fn ids_below_n_deterministic_and_batch_equals_single(
        keys in keys_strategy(), workers in 1u64..20, seed: u64, interval in 1i64..40, panes in 1i64..4,
    ) {
        let route = || {
            let mut g = grouper(workers, seed, interval, panes);
            keys.iter().map(|k| g.route(Key::Bytes(k))).collect::<Vec<u32>>()
        };
        let single = route();
        prop_assert!(single.iter().all(|&w| u64::from(w) < workers));
        prop_assert_eq!(&single, &route());
        let mut g = grouper(workers, seed, interval, panes);
        let owned: Vec<OwnedKey> = keys.iter().cloned().map(OwnedKey::Bytes).collect();
        let batch = KeyBatch::new(KeyValues::Owned(&owned)).unwrap();
        let mut out = vec![u32::MAX; keys.len()];
        route_batch(g.as_mut(), &batch, NullPolicy::Raise, &mut out).unwrap();
        prop_assert_eq!(&out, &single);
        prop_assert_eq!(g.loads().total(), keys.len() as u64);
    }

    #[test]
    fn cold_keys_go_to_their_hash_worker_and_hot_keys_to_the_best_score(
        keys in keys_strategy(), workers in 1u32..12, seed: u64, interval in 1usize..40, panes in 1usize..4,
    ) {
        let family = HashFamily::new(seed, workers);
        let hot = hot_oracle(&keys, interval, 100 * u128::from(workers));
        let mut g = DaGreedy::new(family, LoadVector::private(workers), interval as u64, panes);
        for (key, &is_hot) in keys.iter().zip(&hot) {
            let key = Key::Bytes(key);
            // The float score of every worker before routing.
            let scores: Vec<f64> = (0..workers).map(|w| {
                let (load, total, on) = g.window_view(key, w);
                let avg = total as f64 / f64::from(workers);
                let term = if avg == 0.0 { 0.0 } else { (load as f64 - avg) / avg };
                0.5 * f64::from(u8::from(on)) - 0.5 * term
            }).collect();
            let worker = g.route(key);
            if is_hot {
                let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                // Distinct scores differ by at least 1/(2T) here, far above 1e-9.
                let first_best = scores.iter().position(|&s| s >= max - 1e-9).unwrap() as u32;
                prop_assert_eq!(worker, first_best, "scores {:?}", scores);
            } else {
                prop_assert_eq!(worker, family.candidate(0, key));
            }
        }
    }
}
