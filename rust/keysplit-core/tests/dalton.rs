//! Dalton: hand-worked examples, a golden stream shared with the Python twin, and the
//! routing invariants (worker ids below `n`, deterministic routing, a batch routed as its
//! keys one by one, cold keys by key grouping, reached keys on the workers that hold them),
//! including what "never spreads beyond maxSplit" means.

use std::collections::HashSet;

use keysplit_core::grouper::{Grouper, route_batch};

use keysplit_core::groupers::dalton::{Dalton, KeyView};
use keysplit_core::hash::HashFamily;
use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::build;
use keysplit_core::{Key, KeyBatch, KeyValues, LoadVector, NullPolicy, OwnedKey};
use proptest::prelude::*;

#[path = "common/hot_keys.rs"]
mod hot_keys;
use hot_keys::hot_oracle;

fn params(interval: i64, panes: i64, epsilon: f64) -> Params {
    Params::from([
        ("interval_tuples".to_owned(), ParamValue::Int(interval)),
        ("window_panes".to_owned(), ParamValue::Int(panes)),
        ("epsilon".to_owned(), ParamValue::Float(epsilon)),
    ])
}

fn grouper(workers: u64, seed: u64, interval: i64, panes: i64, epsilon: f64) -> Box<dyn Grouper> {
    build("dalton", workers, seed, &params(interval, panes, epsilon), None).unwrap().grouper
}

fn dalton(workers: u32, seed: u64, interval: u64, panes: usize, epsilon: f64) -> Dalton {
    Dalton::new(
        HashFamily::new(seed, workers),
        LoadVector::private(workers),
        interval,
        panes,
        epsilon,
    )
}

// With seed 0 and 2 workers, h_0(1) mod 2 = 0 and h_0(0) mod 2 = 1.
const X: Key<'static> = Key::Int(1);
const Y: Key<'static> = Key::Int(0);

#[test]
fn hand_worked_example_without_exploration() {
    // n = 2, intervals of 4 tuples, 1 closed pane in the window, epsilon = 0.
    let mut g = dalton(2, 0, 4, 1, 0.0);
    // Interval 0: nothing is hot. x x x y -> 0 0 0 1; T = 4, threshold 4 / 2 = 2.
    let first: Vec<u32> = [X, X, X, Y].into_iter().map(|k| g.route(k)).collect();
    assert_eq!(first, [0, 0, 0, 1]);
    // Interval 1: x, x have counts 1, 2 (not above 2): cold -> 0, 0. The third x (count
    // 3) is hot: a new row [-2, -2], exploit ties to the hash worker 0. Window after it:
    // L = [6, 1], T = 7, avg = 3.5, spread(x) = 1 < maxSplit = 2:
    // r = -(0.5 (6 - 3.5) / 6 + 0.5 * 1/2) = -0.458333..., Q[x][0] = -1.8 - 0.0458333...
    let second: Vec<u32> = [X, X, X, Y].into_iter().map(|k| g.route(k)).collect();
    assert_eq!(second, [0, 0, 0, 1]);
    let view = g.inspect(X);
    assert_eq!(view, KeyView { hot: true, reached: false, holders: vec![0], tried: vec![0] });
    // Interval 2: x was found hot in interval 1, so it is still hot; its tried entry
    // (above -1.9) beats the untried -2: exploit keeps it on worker 0.
    assert_eq!(g.route(X), 0);
    assert_eq!(g.max_split(), 2);
    // Closing interval 2 without finding x hot again drops its row.
    g.end_window();
    assert!(!g.inspect(X).hot);
}

#[test]
fn a_single_hot_key_raises_max_split_to_six_and_never_exceeds_it() {
    // epsilon = 1: every hot tuple explores. One key in the Q-table: as soon as its spread
    // reaches maxSplit, 1 of 1 keys reached it (>= 70%): maxSplit rises, up to 6. Then the
    // key explores only among its 6 holders. The window (1000 panes) never loses a pane.
    let mut g = dalton(16, 3, 10, 1000, 1.0);
    (0..10).for_each(|_| _ = g.route(X)); // interval 0: cold
    let mut workers = HashSet::new();
    for _ in 0..500 {
        workers.insert(g.route(X));
        assert!(g.inspect(X).holders.len() <= g.max_split());
    }
    assert_eq!(g.max_split(), 6);
    assert_eq!(g.inspect(X).holders.len(), 6);
    assert!(workers.len() <= 6);
}

#[test]
fn golden_stream_matches_the_python_twin() {
    // tests/reference_dalton.py, DaltonTwin(4, 7, interval_tuples=20, window_panes=2,
    // epsilon=0.5), the stream of tests/dagreedy.rs, end_window() before tuple 70.
    let expected: [u32; 120] = [
        1, 2, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 2, 1, 3, 1, 2, 1, 1, 1, 3, 1, 1,
        1, 1, 1, 3, 2, 1, 3, 3, 3, 3, 1, 2, 2, 3, 0, 1, 3, 3, 1, 3, 1, 1, 2, 3, 2, 1, 3, 1, 3, 3,
        1, 3, 1, 2, 3, 1, 2, 2, 3, 3, 1, 3, 1, 1, 1, 1, 2, 2, 2, 1, 3, 3, 1, 3, 2, 3, 0, 3, 2, 2,
        3, 3, 2, 3, 2, 1, 2, 0, 2, 2, 1, 1, 2, 3, 2, 0, 2, 2, 0, 3, 1, 2, 0, 3, 2, 1, 1, 1, 0, 2,
    ];
    let mut g = dalton(4, 7, 20, 2, 0.5);
    let routed: Vec<u32> = (0..120u64)
        .map(|i| {
            if i == 70 {
                g.end_window();
            }
            g.route(golden_key(i))
        })
        .collect();
    assert_eq!(routed, expected);
    assert_eq!(g.max_split(), 5);
}

fn golden_key(i: u64) -> Key<'static> {
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
    let err = |p: Params| build("dalton", 4, 0, &p, None).err().unwrap().to_string();
    assert!(err(params(0, 1, 0.1)).contains("interval_tuples"));
    assert!(err(params(10, 0, 0.1)).contains("window_panes"));
    assert!(
        err(params(10, 1, 1.5))
            .contains("epsilon\" of grouper \"dalton\" must be in [0, 1], got 1.5")
    );
    assert!(err(params(10, 1, -0.1)).contains("epsilon"));
}

fn keys_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(
        prop_oneof![3 => Just(vec![0u8]), 2 => prop::collection::vec(0u8..5, 0..2)],
        0..400,
    )
}

proptest! {
    #[test]
    fn ids_below_n_deterministic_and_batch_equals_single(
        keys in keys_strategy(), workers in 1u64..20, seed: u64, interval in 1i64..40,
        panes in 1i64..4, epsilon in 0.0f64..=1.0,
    ) {
        let route = || {
            let mut g = grouper(workers, seed, interval, panes, epsilon);
            keys.iter().map(|k| g.route(Key::Bytes(k))).collect::<Vec<u32>>()
        };
        let single = route();
        prop_assert!(single.iter().all(|&w| u64::from(w) < workers));
        prop_assert_eq!(&single, &route());
        let mut g = grouper(workers, seed, interval, panes, epsilon);
        let owned: Vec<OwnedKey> = keys.iter().cloned().map(OwnedKey::Bytes).collect();
        let batch = KeyBatch::new(KeyValues::Owned(&owned)).unwrap();
        let mut out = vec![u32::MAX; keys.len()];
        route_batch(g.as_mut(), &batch, NullPolicy::Raise, &mut out).unwrap();
        prop_assert_eq!(&out, &single);
        prop_assert_eq!(g.loads().total(), keys.len() as u64);
    }

    /// Cold tuples go to the hash worker; a hot tuple of a reached key goes to a worker
    /// that held it or that its row had tried (or, for a row that tried none yet, to the
    /// hash worker: the exploit tie); a hot key's row never tries a new worker by exploit.
    #[test]
    fn cold_keys_use_key_grouping_and_reached_keys_stay_on_known_workers(
        keys in keys_strategy(), workers in 1u32..12, seed: u64, interval in 1usize..40,
        panes in 1usize..4, epsilon in 0.0f64..=1.0,
    ) {
        let family = HashFamily::new(seed, workers);
        let hot = hot_oracle(&keys, interval, u128::from(workers));
        let mut g = dalton(workers, seed, interval as u64, panes, epsilon);
        for (key, &is_hot) in keys.iter().zip(&hot) {
            let key = Key::Bytes(key);
            let before = g.inspect(key);
            let worker = g.route(key);
            let hash_worker = family.candidate(0, key);
            if !is_hot {
                prop_assert_eq!(worker, hash_worker);
                continue;
            }
            if before.hot && before.reached {
                let known = before.holders.contains(&worker)
                    || before.tried.contains(&worker)
                    || (before.tried.is_empty() && worker == hash_worker);
                prop_assert!(known, "worker {} not among {:?}", worker, before);
            }
        }
    }

    /// When no pane leaves the window, a key that has stayed hot since its first hot tuple
    /// never holds more than maxSplit workers.
    #[test]
    fn within_one_window_a_key_that_stays_hot_never_exceeds_max_split(
        keys in keys_strategy(), workers in 1u32..16, seed: u64, interval in 2u64..30,
        epsilon in 0.0f64..=1.0,
    ) {
        // 400 tuples, intervals of 2 or more: fewer than 1000 panes ever close.
        let mut g = dalton(workers, seed, interval, 1000, epsilon);
        let mut cooled: HashSet<Vec<u8>> = HashSet::new();
        let mut ever_hot: HashSet<Vec<u8>> = HashSet::new();
        for key in &keys {
            g.route(Key::Bytes(key));
            for k in ever_hot.iter().chain(std::iter::once(key)) {
                let view = g.inspect(Key::Bytes(k));
                if !view.hot && ever_hot.contains(k) {
                    cooled.insert(k.clone());
                }
            }
            if g.inspect(Key::Bytes(key)).hot {
                ever_hot.insert(key.clone());
            }
            for k in ever_hot.difference(&cooled) {
                let spread = g.inspect(Key::Bytes(k)).holders.len();
                prop_assert!(spread <= g.max_split(), "key {:?}: {} > {}", k, spread, g.max_split());
            }
        }
    }
}
