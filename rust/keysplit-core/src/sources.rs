//! Multi-source routing: `s` upstream sources route their own streams in parallel.
//!
//! As in the papers' multi-spout experiments, each source holds its own grouper (its own
//! tables, sketches and random draws), built from the same name, worker count, seed and
//! parameters, so that every source agrees on the hash functions and a key's candidates.
//! Their load counters are either
//!
//! * private ([`LoadScope::Private`]): local load estimation, the papers' default. No
//!   source sees another's tuples, so the result is deterministic and equals routing each
//!   source alone, whatever the threads do;
//! * shared ([`LoadScope::Shared`]): one global [`LoadVector`] that every source adds to
//!   with lock-free `fetch_add`s, one cache line per worker, in bursts of
//!   [`LoadVector::publish_interval`] tuples (and at the end of every batch); each source
//!   routes on the counters as of its last burst plus its own tuples since. Which worker a
//!   tuple goes to then depends on how the threads interleave; ids stay below `n` and the
//!   counters add up to the tuples routed.
//!
//! Sources are spread over `threads` scoped threads, source `i` on thread `i mod threads`.

use std::fmt;

use crate::error::{ConfigError, RouteError};
use crate::grouper::{Grouper, MAX_WORKERS, NullPolicy, route_batch};
use crate::keys::KeyBatch;
use crate::loads::{LoadScope, LoadVector};
use crate::parallel::single_threaded;
use crate::params::Params;
use crate::registry::build;
use crate::worker_ids::worker_ids_buffer;

/// The keys of one source: its batches, routed in order.
pub type SourceKeys<'a> = [KeyBatch<'a>];

/// What one source routed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceRouting {
    /// One worker id per key, in the source's key order.
    pub ids: Vec<u32>,
    /// The source's load counters at the end: its own tuples when private, the global
    /// vector once every source has finished when shared.
    pub loads: Vec<u64>,
    /// The bytes of the source's routing state at the end.
    pub state_bytes: usize,
}

/// Why the sources could not be routed. Nothing was routed.
#[derive(Clone, Debug, PartialEq)]
pub enum SourcesError {
    Config(ConfigError),
    Route { source: usize, error: RouteError },
}

impl fmt::Display for SourcesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourcesError::Config(e) => e.fmt(f),
            SourcesError::Route { source, error } => write!(f, "source {source}: {error}"),
        }
    }
}

impl std::error::Error for SourcesError {}

/// How [`route_sources`] builds each source's grouper and runs the sources.
#[derive(Clone, Copy, Debug)]
pub struct SourcesConfig<'a> {
    /// The grouper every source builds, with its worker count, seed and parameters.
    pub name: &'a str,
    pub workers: u64,
    pub seed: u64,
    pub params: &'a Params,
    /// Private (local estimation, deterministic) or shared (global, lock-free) loads.
    pub scope: LoadScope,
    pub nulls: NullPolicy,
    /// At most this many threads, and no more than there are sources; 0 counts as 1.
    pub threads: usize,
}

/// Routes every source's keys with its own grouper, on up to `config.threads` threads.
///
/// Every source is checked against `config.nulls` before any key is routed.
pub fn route_sources(
    config: &SourcesConfig<'_>,
    sources: &[&SourceKeys<'_>],
) -> Result<Vec<SourceRouting>, SourcesError> {
    let SourcesConfig { name, workers, seed, params, scope, nulls, threads } = *config;
    if nulls == NullPolicy::Raise {
        for (source, batches) in sources.iter().enumerate() {
            let nulls: usize = batches.iter().map(|b| b.null_count()).sum();
            if nulls > 0 {
                return Err(SourcesError::Route { source, error: RouteError::NullKeys { nulls } });
            }
        }
    }
    let shared = match (scope, u32::try_from(workers)) {
        (LoadScope::Private, _) => None,
        (LoadScope::Shared, Ok(n)) if (1..=MAX_WORKERS).contains(&n) => Some(LoadVector::shared(n)),
        (LoadScope::Shared, _) => {
            return Err(SourcesError::Config(ConfigError::Workers { workers, max: MAX_WORKERS }));
        }
    };
    if sources.is_empty() {
        // No source to route, but a bad name or parameter is still an error.
        build(name, workers, seed, params, None).map_err(SourcesError::Config)?;
        return Ok(Vec::new());
    }
    let mut groupers = Vec::with_capacity(sources.len());
    for _ in sources {
        let loads = shared.as_ref().and_then(LoadVector::share);
        let instance = build(name, workers, seed, params, loads).map_err(SourcesError::Config)?;
        groupers.push(instance.grouper);
    }

    let threads = threads.clamp(1, sources.len().max(1));
    let mut lanes: Vec<Vec<(usize, Box<dyn Grouper>)>> = (0..threads).map(|_| Vec::new()).collect();
    for (index, grouper) in groupers.into_iter().enumerate() {
        lanes[index % threads].push((index, grouper));
    }
    let mut routed: Vec<Option<Result<SourceRouting, RouteError>>> = vec![None; sources.len()];
    std::thread::scope(|scope| {
        let handles: Vec<_> = lanes
            .into_iter()
            .map(|lane| {
                // The sources are the parallelism: no batch takes more threads of its own.
                scope.spawn(move || {
                    single_threaded(|| {
                        lane.into_iter()
                            .map(|(index, mut grouper)| {
                                (index, route_source(grouper.as_mut(), sources[index]))
                            })
                            .collect::<Vec<_>>()
                    })
                })
            })
            .collect();
        for handle in handles {
            // A panic in a grouper is a bug; pass it on rather than return partial results.
            let lane = handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            for (index, result) in lane {
                routed[index] = Some(result);
            }
        }
    });
    // A source that finished early saw the shared counters before the others finished.
    let global = shared.as_ref().map(LoadVector::snapshot);
    let mut out = Vec::with_capacity(routed.len());
    for (source, result) in routed.into_iter().enumerate() {
        match result {
            Some(Ok(mut routing)) => {
                if let Some(global) = &global {
                    routing.loads.clone_from(global);
                }
                out.push(routing)
            }
            Some(Err(error)) => return Err(SourcesError::Route { source, error }),
            None => unreachable!("every source is routed by one lane"),
        }
    }
    Ok(out)
}

fn route_source(
    grouper: &mut dyn Grouper,
    batches: &SourceKeys<'_>,
) -> Result<SourceRouting, RouteError> {
    let total = batches.iter().map(KeyBatch::len).sum();
    let mut ids = worker_ids_buffer(total);
    let mut start = 0;
    for batch in batches {
        let out = &mut ids[start..start + batch.len()];
        route_batch(grouper, batch, NullPolicy::Group, out)?;
        start += batch.len();
    }
    Ok(SourceRouting { ids, loads: grouper.loads().snapshot(), state_bytes: grouper.state_bytes() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeyValues;

    fn ranks(source: u64, len: usize) -> Vec<u64> {
        let mut zipf = crate::streams::Zipf::new(1000, 1.2, source).unwrap();
        let mut keys = vec![0u64; len];
        zipf.fill(&mut keys);
        keys
    }

    #[test]
    fn private_loads_equal_routing_each_source_alone() {
        let keys: Vec<Vec<u64>> = (0..3).map(|s| ranks(s, 5000)).collect();
        let batches: Vec<Vec<KeyBatch<'_>>> = keys
            .iter()
            .map(|k| {
                let (a, b) = k.split_at(1234);
                vec![
                    KeyBatch::new(KeyValues::UInt64(a)).unwrap(),
                    KeyBatch::new(KeyValues::UInt64(b)).unwrap(),
                ]
            })
            .collect();
        let sources: Vec<&SourceKeys<'_>> = batches.iter().map(Vec::as_slice).collect();
        for name in ["pkg", "w_choices", "pstream"] {
            let params = Params::new();
            let run = |threads| {
                let config = SourcesConfig {
                    name,
                    workers: 8,
                    seed: 5,
                    params: &params,
                    scope: LoadScope::Private,
                    nulls: NullPolicy::Raise,
                    threads,
                };
                route_sources(&config, &sources).unwrap()
            };
            let parallel = run(2);
            assert_eq!(parallel, run(1), "{name}");
            for (source, routing) in parallel.iter().enumerate() {
                let mut alone = build(name, 8, 5, &params, None).unwrap().grouper;
                let ids: Vec<u32> =
                    keys[source].iter().map(|&k| alone.route(crate::Key::Int(k))).collect();
                assert_eq!(routing.ids, ids, "{name}, source {source}");
                assert_eq!(routing.loads, alone.loads().snapshot());
            }
        }
    }

    #[test]
    fn shared_loads_count_every_tuple_of_every_source() {
        let keys: Vec<Vec<u64>> = (0..4).map(|s| ranks(s, 20_000)).collect();
        let batches: Vec<Vec<KeyBatch<'_>>> =
            keys.iter().map(|k| vec![KeyBatch::new(KeyValues::UInt64(k)).unwrap()]).collect();
        let sources: Vec<&SourceKeys<'_>> = batches.iter().map(Vec::as_slice).collect();
        let params = Params::new();
        let config = SourcesConfig {
            name: "pkg",
            workers: 6,
            seed: 1,
            params: &params,
            scope: LoadScope::Shared,
            nulls: NullPolicy::Raise,
            threads: 2,
        };
        let routed = route_sources(&config, &sources).unwrap();
        let mut counted = vec![0u64; 6];
        for routing in &routed {
            assert_eq!(routing.ids.len(), 20_000);
            for &id in &routing.ids {
                counted[id as usize] += 1;
            }
        }
        // Every handle sees the one global vector, and it counts every tuple exactly once.
        for routing in &routed {
            assert_eq!(routing.loads, counted);
        }
        assert_eq!(counted.iter().sum::<u64>(), 80_000);
    }

    #[test]
    fn a_null_refuses_every_source_before_routing() {
        let keys = [1u64, 2, 3];
        let bits = [0b101u8];
        let clean = [KeyBatch::new(KeyValues::UInt64(&keys)).unwrap()];
        let holed =
            [KeyBatch::new(KeyValues::UInt64(&keys)).unwrap().with_validity(&bits, 0).unwrap()];
        let sources: [&SourceKeys<'_>; 2] = [&clean, &holed];
        let params = Params::new();
        let config = SourcesConfig {
            name: "key",
            workers: 4,
            seed: 0,
            params: &params,
            scope: LoadScope::Private,
            nulls: NullPolicy::Raise,
            threads: 2,
        };
        let error = route_sources(&config, &sources).unwrap_err();
        assert_eq!(
            error,
            SourcesError::Route { source: 1, error: RouteError::NullKeys { nulls: 1 } }
        );
    }
}
