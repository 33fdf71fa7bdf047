//! D-Choices, W-Choices and Round-robin head (Nasir et al., ICDE 2016): worked examples,
//! golden routings shared with the Python twin, and the routing invariants: worker ids below
//! `n`, deterministic routing, a batch routed as its keys one by one, and head and tail
//! tuples each routed by their own rule.

use std::collections::{HashMap, HashSet};

use keysplit_core::grouper::route_batch;

use keysplit_core::groupers::choices::{
    HeadChoices, HeadRouting, Settings, choose_d, default_capacity, default_theta,
};
use keysplit_core::hash::{HashFamily, fingerprint};
use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::build;
use keysplit_core::{Grouper, Key, KeyBatch, KeyValues, LoadVector, NullPolicy, OwnedKey};
use proptest::prelude::*;

const NAMES: [&str; 3] = ["d_choices", "w_choices", "rr_head"];

fn grouper(head: HeadRouting, workers: u32, seed: u64, theta: f64) -> HeadChoices {
    let settings =
        Settings { head, theta, capacity: default_capacity(theta), distinct_candidates: true };
    HeadChoices::new(HashFamily::new(seed, workers), LoadVector::private(workers), settings)
        .unwrap()
}

const D: HeadRouting = HeadRouting::DChoices { epsilon: 1e-4 };

// ---------------------------------------------------------------------------------------
// (a) Worked examples.

/// `d` by hand, n = 10, so q = (n−1)/n = 0.9.
#[test]
fn d_is_chosen_by_the_two_inequalities() {
    // One head key with p_1 = p_H = 0.1: start at max(2, round(1)) = 2.
    // b = 1 − 0.81 = 0.19; both sides read 0.1 + 0.9·0.19² = 0.1325 ≤ 0.19: d = 2.
    assert_eq!(choose_d(10, 1, 0.1, 0.1, 1e-4), 2);
    // p_1 = p_H = 0.2: d = 2 gives 0.2 + 0.8·0.0361 = 0.2289 > 0.19;
    // d = 3: b = 1 − 0.729 = 0.271, 0.2 + 0.8·0.0734 = 0.2588 ≤ 0.271: d = 3.
    assert_eq!(choose_d(10, 1, 0.2, 0.2, 1e-4), 3);
    // Two head keys, p_H = 0.3, p_1 = 0.2. d = 2: b_H = 1 − 0.9^4 = 0.3439,
    // 0.3 + 0.7·0.1183 = 0.3828 > 0.3439. d = 3: b_H = 1 − 0.9^6 = 0.4686,
    // 0.3 + 0.7·0.2195 = 0.4537 ≤ 0.4686; b_1 = 0.271,
    // 0.2 + 0.1·0.271³ + 0.7·0.271² = 0.2534 ≤ 0.271: d = 3.
    assert_eq!(choose_d(10, 2, 0.3, 0.2, 1e-4), 3);
    assert_eq!(choose_d(10, 2, 0.3, 0.2, 0.0), 3);
    // p_1 = p_H = 0.5: start at round(5) = 5; the first inequality needs (1 − b)² ≤ 2ε,
    // 0.9^d ≤ 0.0141, d ≥ 41 > n: no d ≤ n works, so d = n.
    assert_eq!(choose_d(10, 1, 0.5, 0.5, 1e-4), 10);
    // Halves round away from zero: p_1·n = 2.5 starts at 3.
    assert!(choose_d(10, 1, 0.25, 0.25, 1.0 - 1e-9) == 3);
    // An empty head gives PKG's two choices; one worker gives d = 1.
    assert_eq!(choose_d(64, 0, 0.0, 0.0, 1e-4), 2);
    assert_eq!(choose_d(1, 1, 1.0, 1.0, 1e-4), 1);
}

/// n = 4, θ = 0.3. The tuple is counted before the head test, so every first tuple of the
/// stream is a head tuple (count 1 > 0.3·1).
#[test]
fn w_choices_and_rr_head_route_head_keys_over_all_workers() {
    for head in [HeadRouting::WChoices, HeadRouting::RoundRobin] {
        let mut g = grouper(head, 4, 0, 0.3);
        let a = Key::Bytes(b"a");
        // A, A, A: m = 1, 2, 3 and f̂_A = m > 0.3·m, head: workers 0, 1, 2 (the least
        // loaded, lowest index first; or the round robin's 0, 1, 2).
        assert_eq!([g.route(a), g.route(a), g.route(a)], [0, 1, 2]);
        // B: f̂_B = 1 ≤ 0.3·4 = 1.2, tail: PKG over loads [1, 1, 1, 0].
        let b = Key::Bytes(b"b");
        let (c1, c2) = g.pkg_candidates(b);
        let expected = if g.loads().get(c2) < g.loads().get(c1) { c2 } else { c1 };
        assert_eq!(g.route(b), expected);
        assert!(!g.is_head(b) && g.is_head(a));
        // A again, m = 5, f̂_A = 4 > 1.5: W-Choices takes the least loaded, worker 3 if B went
        // elsewhere; the round robin continues at 3 whatever the loads.
        let next = g.route(a);
        match head {
            HeadRouting::RoundRobin => assert_eq!(next, 3),
            _ => {
                let before = {
                    let mut loads = g.loads().snapshot();
                    loads[next as usize] -= 1;
                    loads
                };
                assert_eq!(before[next as usize], *before.iter().min().unwrap());
            }
        }
    }
}

/// θ = 0.5: B, A, A. The second A is the tuple that brings A into the head (2 > 0.5·3),
/// and it is routed as a head tuple; the first A (1 ≤ 0.5·2) is a tail tuple.
#[test]
fn the_tuple_that_crosses_into_the_head_is_routed_as_head() {
    let mut g = grouper(HeadRouting::RoundRobin, 8, 5, 0.5);
    let (a, b) = (Key::Bytes(b"a"), Key::Bytes(b"b"));
    assert_eq!(g.route(b), 0, "f̂_B = 1 > 0.5: head, round robin slot 0");
    let first = g.route(a);
    assert!(!g.is_head(a));
    let (c1, c2) = g.pkg_candidates(a);
    assert!(first == c1 || first == c2, "a tail tuple goes as PKG");
    assert_eq!(g.route(a), 1, "f̂_A = 2 > 1.5: head, round robin slot 1");
    assert!(g.is_head(a));
}

/// D-Choices keeps `d` while the head's membership holds, and recomputes it when it changes.
/// n = 10, θ = 0.2.
#[test]
fn d_changes_only_with_the_head() {
    let mut g = grouper(D, 10, 0, 0.2);
    assert_eq!(g.d(), 2, "an empty head");
    // The first tuple puts A alone in the head, p_1 = p_H = 1: no d ≤ 10 works, d = n.
    for _ in 0..6 {
        g.route(Key::Int(0));
    }
    assert_eq!(g.head(), [fingerprint(0u64)]);
    assert_eq!(g.d(), 10);
    // Keys 1..=23 once each (m = 7..=29): none enters (1 ≤ 0.2·m), A stays (6 > 0.2·29 = 5.8).
    // p_1 = 6/m falls to 0.207, for which choose_d would give 3, but the membership never
    // changed, so d stays 10.
    for k in 1..=23u64 {
        g.route(Key::Int(k));
        assert_eq!(g.head(), [fingerprint(0u64)], "key {k}");
        assert_eq!(g.d(), 10, "key {k}");
    }
    assert_eq!(choose_d(10, 1, 6.0 / 29.0, 6.0 / 29.0, 1e-4), 3);
    // Key 24 makes m = 30 and A's 6 ≤ 0.2·30: A leaves, the head is empty, d = 2.
    g.route(Key::Int(24));
    assert!(g.head().is_empty());
    assert_eq!(g.d(), 2);
}

#[test]
fn defaults_are_the_papers() {
    assert_eq!(default_theta(10), 0.02);
    assert_eq!(default_capacity(0.02), 200);
    for name in NAMES {
        let instance = build(name, 10, 0, &Params::new(), None).unwrap();
        assert_eq!(instance.params["theta"], ParamValue::Float(0.0));
        assert_eq!(instance.params["capacity"], ParamValue::Int(0));
        assert_eq!(instance.params["distinct_candidates"], ParamValue::Bool(true));
        assert!(instance.grouper.state_bytes() > 200 * 16);
    }
    let d = build("d_choices", 10, 0, &Params::new(), None).unwrap();
    assert_eq!(d.params["epsilon"], ParamValue::Float(1e-4));
}

#[test]
fn bad_parameters_are_refused_with_a_message() {
    let err = |name: &str, key: &str, value: ParamValue| {
        let params = Params::from([(key.to_owned(), value)]);
        build(name, 10, 0, &params, None).err().unwrap().to_string()
    };
    for name in NAMES {
        assert!(err(name, "theta", ParamValue::Float(1.5)).contains("must be in (0, 1)"));
        assert!(err(name, "theta", ParamValue::Float(-0.1)).contains("got -0.1"));
        assert!(err(name, "capacity", ParamValue::Int(-1)).contains("at least ceil(1/theta) = 50"));
        assert!(err(name, "capacity", ParamValue::Int(49)).contains("got 49"));
        // A tiny theta with the default capacity asks for a summary too large: theta is the
        // parameter the caller set, so the error names it (found by the route_batch fuzz target).
        let tiny = err(name, "theta", ParamValue::Float(1e-300));
        assert!(tiny.starts_with("parameter \"theta\""), "{tiny}");
        assert!(tiny.contains("needs a summary of at most"), "{tiny}");
        let huge = Params::from([
            ("theta".to_owned(), ParamValue::Float(1e-300)),
            ("capacity".to_owned(), ParamValue::Int(i64::MAX)),
        ]);
        let huge = build(name, 10, 0, &huge, None).err().unwrap().to_string();
        assert!(huge.starts_with("parameter \"capacity\""), "{huge}");
    }
    assert!(err("d_choices", "epsilon", ParamValue::Float(1.0)).contains("[0, 1)"));
    assert!(err("w_choices", "epsilon", ParamValue::Float(0.1)).contains("no parameter"));
    let ok = Params::from([("capacity".to_owned(), ParamValue::Int(50))]);
    assert!(build("rr_head", 10, 0, &ok, None).is_ok());
}

// ---------------------------------------------------------------------------------------
// Golden routings: the same 4000-tuple stream through the Python twins of
// tests/reference_choices.py gives the same FNV-1a digests (checked when written).

fn golden_stream() -> Vec<u64> {
    (0u64..4000)
        .map(|i| match (i * 2_654_435_761) % 1000 {
            v if v < 60 => 0,
            v if v < 100 => 1,
            v if v < 130 => 2,
            v if v < 150 => 3,
            v => v % 500,
        })
        .collect()
}

fn fnv1a(workers: &[u32]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for byte in workers.iter().flat_map(|w| w.to_le_bytes()) {
        h = (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[test]
fn routes_the_golden_stream_as_the_python_twin() {
    let params = |theta: Option<f64>, capacity: Option<i64>, eps: Option<f64>, distinct: bool| {
        let mut p = Params::new();
        theta.map(|t| p.insert("theta".to_owned(), ParamValue::Float(t)));
        capacity.map(|c| p.insert("capacity".to_owned(), ParamValue::Int(c)));
        eps.map(|e| p.insert("epsilon".to_owned(), ParamValue::Float(e)));
        p.insert("distinct_candidates".to_owned(), ParamValue::Bool(distinct));
        p
    };
    let cases = [
        ("d_choices", 37, 12345, params(None, None, None, true), 0x2cf8_e04f_c349_74be),
        ("d_choices", 64, u64::MAX, params(Some(0.05), None, None, false), 0xa0f8_1874_c7ce_4848),
        (
            "d_choices",
            64,
            u64::MAX,
            params(Some(0.01), Some(100), Some(0.0), true),
            0x8480_a418_8333_76cf,
        ),
        ("w_choices", 10, 0, params(None, None, None, true), 0xb32b_edcc_9623_eb61),
        ("rr_head", 37, 12345, params(Some(0.05), None, None, false), 0xf540_5ba4_724d_de6f),
    ];
    let keys = golden_stream();
    for (name, n, seed, params, digest) in cases {
        let mut g = build(name, n, seed, &params, None).unwrap().grouper;
        let routed: Vec<u32> = keys.iter().map(|&k| g.route(Key::Int(k))).collect();
        assert_eq!(fnv1a(&routed), digest, "{name} n={n} seed={seed}");
    }
}

// ---------------------------------------------------------------------------------------
// (b) Invariants over random streams and parameters.

fn keys_strategy() -> impl Strategy<Value = Vec<u64>> {
    // Skewed: key 0 often, a few others sometimes, so that heads form and dissolve.
    prop::collection::vec(
        prop_oneof![4 => Just(0u64), 2 => 0u64..3, 1 => 0u64..40, 1 => any::<u64>()],
        0..400,
    )
}

fn settings_strategy(workers: u32) -> impl Strategy<Value = Settings> {
    (
        prop_oneof![Just(None), (0.001f64..0.9).prop_map(Some)],
        1usize..4,
        prop_oneof![Just(0.0), Just(1e-4), 0.0f64..0.2],
        any::<bool>(),
        0usize..3,
    )
        .prop_map(move |(theta, factor, epsilon, distinct_candidates, which)| {
            let theta = theta.unwrap_or_else(|| default_theta(workers));
            let head = match which {
                0 => HeadRouting::DChoices { epsilon },
                1 => HeadRouting::WChoices,
                _ => HeadRouting::RoundRobin,
            };
            let capacity = (1.0 / theta).ceil() as usize * factor;
            Settings { head, theta, capacity, distinct_candidates }
        })
}

fn params_of(settings: &Settings) -> (&'static str, Params) {
    let mut params = Params::from([
        ("theta".to_owned(), ParamValue::Float(settings.theta)),
        ("capacity".to_owned(), ParamValue::Int(settings.capacity as i64)),
        ("distinct_candidates".to_owned(), ParamValue::Bool(settings.distinct_candidates)),
    ]);
    let name = match settings.head {
        HeadRouting::DChoices { epsilon } => {
            params.insert("epsilon".to_owned(), ParamValue::Float(epsilon));
            "d_choices"
        }
        HeadRouting::WChoices => "w_choices",
        HeadRouting::RoundRobin => "rr_head",
    };
    (name, params)
}

proptest! {
    #[test]
    fn routes_below_n_deterministically_and_batch_equals_single(
        keys in keys_strategy(),
        (workers, settings) in (1u32..40).prop_flat_map(|n| (Just(n), settings_strategy(n))),
        seed in any::<u64>(),
    ) {
        let (name, params) = params_of(&settings);
        let run = || {
            let mut g = build(name, u64::from(workers), seed, &params, None).unwrap().grouper;
            keys.iter().map(|&k| g.route(Key::Int(k))).collect::<Vec<u32>>()
        };
        let single = run();
        prop_assert!(single.iter().all(|&w| w < workers));
        prop_assert_eq!(&single, &run());

        let mut g = build(name, u64::from(workers), seed, &params, None).unwrap().grouper;
        let owned: Vec<OwnedKey> = keys.iter().map(|&k| OwnedKey::Bytes(k.to_le_bytes().to_vec())).collect();
        let batch = KeyBatch::new(KeyValues::Owned(&owned)).unwrap();
        let mut out = vec![u32::MAX; keys.len()];
        route_batch(g.as_mut(), &batch, NullPolicy::Raise, &mut out).unwrap();
        prop_assert_eq!(&out, &single);
        prop_assert_eq!(g.loads().total(), keys.len() as u64);
    }

    #[test]
    fn head_and_tail_tuples_follow_their_rules(
        keys in keys_strategy(),
        (workers, settings) in (1u32..40).prop_flat_map(|n| (Just(n), settings_strategy(n))),
        seed in any::<u64>(),
    ) {
        let mut g = HeadChoices::new(
            HashFamily::new(seed, workers), LoadVector::private(workers), settings,
        ).unwrap();
        let mut placed: HashMap<u64, HashSet<u32>> = HashMap::new();
        // The largest d each key's head tuples saw, at least 2.
        let mut widest: HashMap<u64, u32> = HashMap::new();
        let mut round_robin = 0u32;
        let mut d_before = g.d();
        let mut head_before = g.head().to_vec();
        for &k in &keys {
            let key = Key::Int(k);
            let loads_before = g.loads().snapshot();
            let worker = g.route(key);
            prop_assert!(worker < workers);
            placed.entry(k).or_default().insert(worker);
            let m = g.summary().total() as f64;
            let count = g.summary().estimate(fingerprint(key)).map_or(0, |c| c.count);
            let head = count as f64 > settings.theta * m;
            prop_assert_eq!(head, g.is_head(key));
            if let HeadRouting::DChoices { .. } = settings.head {
                // d moves only with the head's membership, which is the live head.
                let mut live: Vec<u64> = g.summary().iter_by_count()
                    .take_while(|(_, c)| c.count as f64 > settings.theta * m)
                    .map(|(item, _)| item).collect();
                live.sort_unstable();
                prop_assert_eq!(g.head(), &live[..]);
                if g.d() != d_before {
                    prop_assert_ne!(&head_before, &live);
                }
            }
            d_before = g.d();
            head_before = g.head().to_vec();
            if !head {
                let (c1, c2) = g.pkg_candidates(key);
                prop_assert!(worker == c1 || worker == c2, "tail key {} went to {}", k, worker);
                let better = if loads_before[c2 as usize] < loads_before[c1 as usize] { c2 } else { c1 };
                prop_assert_eq!(worker, better);
                continue;
            }
            let least = *loads_before.iter().min().unwrap();
            match settings.head {
                HeadRouting::DChoices { .. } => {
                    let d = g.d();
                    let w = widest.entry(k).or_insert(2);
                    *w = (*w).max(d);
                    if d < workers {
                        let candidates: Vec<u32> = (1..=d).map(|i| g.head_candidate(i, key)).collect();
                        prop_assert!(candidates.contains(&worker));
                        let best = candidates.iter().map(|&c| loads_before[c as usize]).min().unwrap();
                        prop_assert_eq!(loads_before[worker as usize], best);
                    } else {
                        prop_assert_eq!(loads_before[worker as usize], least);
                    }
                }
                HeadRouting::WChoices => {
                    prop_assert_eq!(worker, loads_before.iter().position(|&l| l == least).unwrap() as u32);
                }
                HeadRouting::RoundRobin => {
                    prop_assert_eq!(worker, round_robin);
                    round_robin = (round_robin + 1) % workers;
                }
            }
        }
        if let HeadRouting::DChoices { .. } = settings.head {
            // A key reaches at most D(k) workers, D(k) the widest d its head tuples saw,
            // all among its first D(k) candidates.
            for (k, set) in &placed {
                let d = widest.get(k).copied().unwrap_or(2);
                prop_assert!(set.len() as u32 <= d.min(workers), "key {} on {:?} with d {}", k, set, d);
                if d < workers {
                    let candidates: HashSet<u32> = (1..=d).map(|i| g.head_candidate(i, Key::Int(*k))).collect();
                    prop_assert!(set.is_subset(&candidates));
                }
            }
        }
    }
}
