//! Routing invariants of every registered grouper, over random streams and parameters.

use std::collections::{HashMap, HashSet};

use keysplit_core::grouper::{MAX_WORKERS, route_batch};
use keysplit_core::parallel::{MIN_KEYS_PER_THREAD, single_threaded};
use keysplit_core::streams::Zipf;

use keysplit_core::groupers::pkg::PartialKeyGrouping;
use keysplit_core::hash::HashFamily;
use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::{build, registry};
use keysplit_core::{
    ConfigError, Key, KeyBatch, KeyValues, LoadVector, NullPolicy, OwnedKey, RouteError,
};
use proptest::prelude::*;

fn keys_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    // Few distinct keys, so that keys repeat and load decisions matter.
    prop::collection::vec(prop::collection::vec(0u8..4, 0..3), 0..400)
}

fn route_all(name: &str, workers: u64, seed: u64, params: &Params, keys: &[Vec<u8>]) -> Vec<u32> {
    let mut grouper = build(name, workers, seed, params, None).unwrap().grouper;
    keys.iter().map(|k| grouper.route(Key::Bytes(k))).collect()
}

fn owned(keys: &[Vec<u8>]) -> Vec<OwnedKey> {
    keys.iter().cloned().map(OwnedKey::Bytes).collect()
}

fn workers_per_key(keys: &[Vec<u8>], routed: &[u32]) -> HashMap<Vec<u8>, HashSet<u32>> {
    let mut map: HashMap<Vec<u8>, HashSet<u32>> = HashMap::new();
    for (key, &worker) in keys.iter().zip(routed) {
        map.entry(key.clone()).or_default().insert(worker);
    }
    map
}

fn pkg_params(distinct: bool) -> Params {
    Params::from([("distinct_candidates".to_owned(), ParamValue::Bool(distinct))])
}

proptest! {
    #[test]
    fn every_grouper_routes_below_n_deterministically_and_batch_equals_single(
        keys in keys_strategy(), workers in 1u64..40, seed in any::<u64>(),
    ) {
        for info in registry() {
            let single = route_all(info.name, workers, seed, &Params::new(), &keys);
            prop_assert!(single.iter().all(|&w| u64::from(w) < workers));
            prop_assert_eq!(&single, &route_all(info.name, workers, seed, &Params::new(), &keys));

            let mut grouper = build(info.name, workers, seed, &Params::new(), None).unwrap().grouper;
            let owned_keys = owned(&keys);
            let batch = KeyBatch::new(KeyValues::Owned(&owned_keys)).unwrap();
            let mut out = vec![u32::MAX; keys.len()];
            route_batch(grouper.as_mut(), &batch, NullPolicy::Raise, &mut out).unwrap();
            prop_assert_eq!(&out, &single, "grouper {}", info.name);
            prop_assert_eq!(grouper.loads().total(), keys.len() as u64);
        }
    }

    #[test]
    fn key_grouping_sends_each_key_to_exactly_one_worker(
        keys in keys_strategy(), workers in 1u64..64, seed in any::<u64>(),
    ) {
        let routed = route_all("key", workers, seed, &Params::new(), &keys);
        for (key, set) in workers_per_key(&keys, &routed) {
            prop_assert_eq!(set.len(), 1, "key {:?}", key);
            let expected = HashFamily::new(seed, workers as u32).candidate(0, Key::Bytes(&key));
            prop_assert!(set.contains(&expected));
        }
    }

    #[test]
    fn pkg_sends_each_key_to_at_most_two_of_its_candidates(
        keys in keys_strategy(), workers in 1u64..64, seed in any::<u64>(), distinct in any::<bool>(),
    ) {
        let params = pkg_params(distinct);
        let routed = route_all("pkg", workers, seed, &params, &keys);
        let n = workers as u32;
        let hashes = HashFamily::new(seed, n);
        for (key, set) in workers_per_key(&keys, &routed) {
            prop_assert!(set.len() <= 2);
            let c1 = hashes.candidate(1, Key::Bytes(&key));
            let mut c2 = hashes.candidate(2, Key::Bytes(&key));
            if distinct && c2 == c1 { c2 = (c2 + 1) % n; }
            prop_assert!(set.iter().all(|&w| w == c1 || w == c2), "key {:?} went to {:?}", key, set);
        }
    }

    #[test]
    fn shuffle_keeps_loads_within_one(keys in keys_strategy(), workers in 1u64..64) {
        let mut grouper = build("shuffle", workers, 0, &Params::new(), None).unwrap().grouper;
        for key in &keys {
            grouper.route(Key::Bytes(key));
            let loads = grouper.loads().snapshot();
            prop_assert!(loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 1);
        }
    }
}

#[test]
fn pkg_prefers_the_less_loaded_candidate_and_breaks_ties_to_the_first() {
    let instance = build("pkg", 8, 3, &Params::new(), None).unwrap();
    let mut grouper = instance.grouper;
    let key = Key::Bytes(b"hot");
    let first = grouper.route(key);
    let second = grouper.route(key);
    assert_ne!(first, second, "the second tuple goes to the other, empty candidate");
    assert_eq!(grouper.route(key), first, "equal loads: the first candidate wins");
}

#[test]
fn distinct_candidates_differ_and_colliding_ones_may_not() {
    let family = HashFamily::new(0, 4);
    let colliding = (0u64..10_000)
        .map(Key::Int)
        .find(|&k| family.candidate(1, k) == family.candidate(2, k))
        .expect("with 4 workers some key has equal candidates");
    let pkg = |distinct| PartialKeyGrouping::new(family, distinct, LoadVector::private(4));
    let (a, b) = pkg(false).candidates(colliding);
    assert_eq!(a, b, "the paper's rule keeps the collision");
    let (a, b) = pkg(true).candidates(colliding);
    assert_eq!(b, (a + 1) % 4, "Storm's rule moves c2 to the next worker");
}

#[test]
fn shared_loads_give_every_source_the_global_view() {
    let shared = LoadVector::shared(4);
    let mut a = build("pkg", 4, 0, &Params::new(), shared.share()).unwrap().grouper;
    let mut b = build("pkg", 4, 0, &Params::new(), shared.share()).unwrap().grouper;
    std::thread::scope(|scope| {
        scope.spawn(|| (0u64..50_000).for_each(|i| _ = a.route(Key::Int(i % 97))));
        scope.spawn(|| (0u64..50_000).for_each(|i| _ = b.route(Key::Int(i % 89))));
    });
    // Tuples routed one by one are published every `publish_interval` tuples; a batch
    // publishes at its end, and so does a handle that is dropped.
    assert!(shared.snapshot().iter().sum::<u64>() >= 100_000 - 2 * shared.publish_interval());
    a.loads().publish();
    drop(b);
    assert_eq!(shared.snapshot().iter().sum::<u64>(), 100_000);
    assert_eq!(a.loads().snapshot(), shared.snapshot());
}

#[test]
fn bad_configurations_name_the_problem() {
    let err = |r: Result<keysplit_core::GrouperInstance, ConfigError>| r.err().unwrap().to_string();
    assert!(err(build("nope", 4, 0, &Params::new(), None)).contains("unknown grouper \"nope\""));
    assert!(err(build("key", 0, 0, &Params::new(), None)).contains("workers must be in [1, "));
    let too_many = u64::from(MAX_WORKERS) + 1;
    assert!(err(build("key", too_many, 0, &Params::new(), None)).contains(&too_many.to_string()));
    let typo = Params::from([("distinct".to_owned(), ParamValue::Bool(true))]);
    assert!(err(build("pkg", 4, 0, &typo, None)).contains("distinct_candidates"));
    let wrong_type = Params::from([("distinct_candidates".to_owned(), ParamValue::Int(1))]);
    assert!(err(build("pkg", 4, 0, &wrong_type, None)).contains("must be bool, got int"));
    assert!(
        err(build("pkg", 4, 0, &Params::new(), Some(LoadVector::shared(3)))).contains("3 workers")
    );
}

#[test]
fn null_keys_are_refused_or_grouped_never_dropped() {
    let values = [5u64, 6, 7];
    let validity = [0b101u8];
    let batch =
        KeyBatch::new(KeyValues::UInt64(&values)).unwrap().with_validity(&validity, 0).unwrap();
    let mut grouper = build("key", 16, 0, &Params::new(), None).unwrap().grouper;
    let mut out = [0u32; 3];
    let refused = route_batch(grouper.as_mut(), &batch, NullPolicy::Raise, &mut out);
    assert_eq!(refused, Err(RouteError::NullKeys { nulls: 1 }));
    assert_eq!(grouper.loads().total(), 0, "a refused batch changes no state");
    route_batch(grouper.as_mut(), &batch, NullPolicy::Group, &mut out).unwrap();
    assert_eq!(out[1], grouper.route(Key::Bytes(b"")));
    assert_eq!(grouper.loads().total(), 4);
}

/// KG cuts a large batch over threads; the routing and counts equal one thread's.
#[test]
fn a_batch_cut_over_threads_routes_and_counts_as_one() {
    let keys: Vec<u64> = (0..3 * MIN_KEYS_PER_THREAD as u64 + 7).map(|k| k % 10_007).collect();
    let batch = KeyBatch::new(KeyValues::UInt64(&keys)).unwrap();
    let route = |n| {
        let mut grouper = build("key", n, 9, &Default::default(), None).unwrap().grouper;
        let mut out = vec![0u32; keys.len()];
        route_batch(grouper.as_mut(), &batch, NullPolicy::Raise, &mut out).unwrap();
        (out, grouper.loads().snapshot())
    };
    for n in [8, 1000] {
        let one_thread = single_threaded(|| route(n));
        assert_eq!(route(n), one_thread, "n = {n}");
        let mut single = build("key", n, 9, &Default::default(), None).unwrap().grouper;
        let each: Vec<u32> = keys.iter().map(|&k| single.route(Key::Int(k))).collect();
        assert_eq!(one_thread.0, each);
    }
}

/// Private loads take the trees, a shared vector that no other source holds takes the
/// scans; with one source both must route alike, at every worker count the trees serve.
#[test]
fn every_grouper_routes_alike_with_trees_and_with_scans() {
    for info in registry() {
        for workers in [3u32, 100, 1024] {
            let route = |loads: Option<LoadVector>| {
                let mut grouper = build(info.name, workers.into(), 7, &Default::default(), loads)
                    .unwrap()
                    .grouper;
                let mut zipf = Zipf::new(5_000, 1.2, 9).unwrap();
                (0..10_000).map(|_| grouper.route(Key::Int(zipf.next_key()))).collect::<Vec<_>>()
            };
            assert_eq!(
                route(None),
                route(Some(LoadVector::shared(workers))),
                "{} at {workers} workers",
                info.name
            );
        }
    }
}
