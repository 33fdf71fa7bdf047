//! Per-worker load counters: lock-free, one cache line each.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::min_tree::MinTree;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Whether a load vector belongs to one source or is shared by several.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LoadScope {
    /// Local load estimation, the papers' default: a source counts only what it sent.
    /// Deterministic, since no other thread writes the counters.
    Private,
    /// A global view: every source that holds a handle adds to the same counters.
    Shared,
}

/// `L_w`, the number of tuples sent to each worker.
///
/// Every counter sits on its own cache line, so sources that share the vector do not
/// invalidate each other's lines when they bump different workers. Updates are
/// lock-free in both scopes: a private vector uses plain relaxed load/store pairs (only
/// its owner writes), a shared one uses relaxed `fetch_add`.
#[derive(Debug)]
pub struct LoadVector {
    counters: Arc<[CachePadded<AtomicU64>]>,
    scope: LoadScope,
}

/// A snapshot holds the counts and the scope. A shared vector restores as a new shared
/// vector that nobody else holds yet: the other sources' handles cannot be in a snapshot.
impl Serialize for LoadVector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (self.scope, self.snapshot()).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for LoadVector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (scope, counts) = <(LoadScope, Vec<u64>)>::deserialize(deserializer)?;
        let counters = counts.into_iter().map(|c| CachePadded::new(AtomicU64::new(c))).collect();
        Ok(Self { counters, scope })
    }
}

impl LoadVector {
    pub fn new(workers: u32, scope: LoadScope) -> Self {
        let counters = (0..workers).map(|_| CachePadded::new(AtomicU64::new(0))).collect();
        Self { counters, scope }
    }

    pub fn private(workers: u32) -> Self {
        Self::new(workers, LoadScope::Private)
    }

    pub fn shared(workers: u32) -> Self {
        Self::new(workers, LoadScope::Shared)
    }

    /// Another handle on a shared vector, for another source; `None` for a private one.
    pub fn share(&self) -> Option<Self> {
        match self.scope {
            LoadScope::Shared => {
                Some(Self { counters: Arc::clone(&self.counters), scope: LoadScope::Shared })
            }
            LoadScope::Private => None,
        }
    }

    pub fn scope(&self) -> LoadScope {
        self.scope
    }

    pub fn workers(&self) -> u32 {
        self.counters.len() as u32
    }

    #[inline]
    pub fn get(&self, worker: u32) -> u64 {
        self.counters[worker as usize].load(Ordering::Relaxed)
    }

    #[inline]
    pub fn add(&self, worker: u32, tuples: u64) {
        let counter = &self.counters[worker as usize];
        match self.scope {
            LoadScope::Private => {
                counter.store(counter.load(Ordering::Relaxed) + tuples, Ordering::Relaxed)
            }
            LoadScope::Shared => {
                counter.fetch_add(tuples, Ordering::Relaxed);
            }
        }
    }

    /// Runs `route` on a plain, dense copy of the counters and writes them back, for a
    /// batch loop that reads and bumps them tuple after tuple; `None` for a shared vector,
    /// whose counters other sources bump meanwhile.
    ///
    /// The copy turns one atomic cache line per worker into eight counters per line, and
    /// lets the loop keep them in ordinary memory the compiler can reason about. Only the
    /// owner writes a private vector, so the result is the same as bumping it in place.
    pub fn with_private_copy<T>(&self, route: impl FnOnce(&mut [u64]) -> T) -> Option<T> {
        if self.scope != LoadScope::Private {
            return None;
        }
        let mut local = self.snapshot();
        let result = route(&mut local);
        for (counter, value) in self.counters.iter().zip(local) {
            counter.store(value, Ordering::Relaxed);
        }
        Some(result)
    }

    /// Adds `counts[w]` tuples to every worker `w`, for a batch loop that counted them
    /// locally (a grouper that never reads its loads while routing).
    pub fn add_counts(&self, counts: &[u64]) {
        debug_assert_eq!(counts.len(), self.counters.len());
        for (worker, &count) in counts.iter().enumerate() {
            if count > 0 {
                self.add(worker as u32, count);
            }
        }
    }

    /// The counters in worker order, each read once.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.counters.iter().map(|c| c.load(Ordering::Relaxed))
    }

    /// The counters as plain numbers. Under concurrent updates each one is exact at
    /// some instant, not all at the same instant.
    pub fn snapshot(&self) -> Vec<u64> {
        self.counters.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    pub fn total(&self) -> u64 {
        self.counters.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// The index of the smallest counter, the lowest index on ties.
    pub fn least_loaded(&self) -> u32 {
        let mut best = 0u32;
        let mut best_load = u64::MAX;
        for (worker, counter) in self.counters.iter().enumerate() {
            let load = counter.load(Ordering::Relaxed);
            if load < best_load {
                best = worker as u32;
                best_load = load;
            }
        }
        best
    }

    /// Bytes held by the counters.
    pub fn state_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.counters)
    }
}

/// Up to this many workers, a scan of the counters costs fewer instructions than keeping
/// a tree (callgrind, PStream on the Zipf stream: 677 against 702 Ir a key at 64 workers,
/// 814 against 717 at 128).
const SCAN_UP_TO_WORKERS: usize = 64;

/// The least-loaded worker of a [`LoadVector`] its owner bumps, lowest index on ties, without
/// a scan of all `n` counters per query.
///
/// Private counters of more than 64 workers (`SCAN_UP_TO_WORKERS`) are mirrored in a
/// [`MinTree`], built on the first query (so also after a restore: keep this
/// `#[serde(skip)]`) and kept by [`LeastLoaded::added`], which the owner must call after each
/// of its `add`s of one tuple. Fewer counters, and shared ones, which change under other
/// sources, are scanned.
#[derive(Clone, Debug, Default)]
pub struct LeastLoaded {
    tree: MinTree,
}

impl LeastLoaded {
    /// The index of the smallest counter of `loads`, as [`LoadVector::least_loaded`].
    #[inline]
    pub fn of(&mut self, loads: &LoadVector) -> u32 {
        if loads.scope() == LoadScope::Shared || loads.counters.len() <= SCAN_UP_TO_WORKERS {
            return loads.least_loaded();
        }
        if self.tree.len() != loads.counters.len() {
            self.tree.rebuild(loads.iter());
        }
        self.tree.min_index()
    }

    /// Records one tuple added to `worker`'s private counter.
    #[inline(always)]
    pub fn added(&mut self, worker: u32) {
        // Inlined, this test is all that groupers with few workers (no tree) pay per tuple.
        if !self.tree.is_empty() {
            self.tree_added(worker);
        }
    }

    #[inline(never)]
    fn tree_added(&mut self, worker: u32) {
        self.tree.increase(worker, self.tree.get(worker) + 1);
    }

    /// Bytes of the tree.
    pub fn state_bytes(&self) -> usize {
        self.tree.state_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sit_on_separate_cache_lines() {
        let loads = LoadVector::private(2);
        let a = &loads.counters[0] as *const _ as usize;
        let b = &loads.counters[1] as *const _ as usize;
        assert!(b - a >= 64);
        assert_eq!(loads.state_bytes(), 2 * std::mem::size_of::<CachePadded<AtomicU64>>());
    }

    #[test]
    fn private_vectors_cannot_be_shared() {
        assert!(LoadVector::private(4).share().is_none());
        assert!(LoadVector::shared(4).share().is_some());
    }

    #[test]
    fn shared_counters_lose_no_update_across_threads() {
        let loads = LoadVector::shared(3);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                let handle = loads.share().unwrap();
                scope.spawn(move || {
                    for i in 0..30_000u32 {
                        handle.add(i % 3, 1);
                    }
                });
            }
        });
        assert_eq!(loads.snapshot(), vec![40_000; 3]);
    }

    #[test]
    fn a_private_copy_is_written_back_and_a_shared_vector_refuses_one() {
        let loads = LoadVector::private(3);
        loads.add(1, 4);
        let seen = loads.with_private_copy(|local| {
            local[2] += 5;
            local.to_vec()
        });
        assert_eq!(seen, Some(vec![0, 4, 5]));
        assert_eq!(loads.snapshot(), vec![0, 4, 5]);
        assert!(LoadVector::shared(3).with_private_copy(|_| ()).is_none());
        loads.add_counts(&[1, 0, 2]);
        assert_eq!(loads.snapshot(), vec![1, 4, 7]);
    }

    #[test]
    fn least_loaded_from_the_tree_equals_the_scan_in_both_scopes() {
        let mut rng = crate::rng::SplitMix64::new(11);
        for loads in [LoadVector::private(3), LoadVector::private(300), LoadVector::shared(300)] {
            let workers = u64::from(loads.workers());
            let other = loads.share();
            let mut least = LeastLoaded::default();
            for step in 0..3_000 {
                let worker = if step % 3 == 0 {
                    least.of(&loads)
                } else {
                    (rng.next_u64() % workers) as u32
                };
                assert_eq!(least.of(&loads), loads.least_loaded());
                loads.add(worker, 1);
                least.added(worker);
                if let Some(other) = &other {
                    other.add((rng.next_u64() % workers) as u32, 1);
                }
            }
        }
    }

    #[test]
    fn least_loaded_breaks_ties_to_the_lowest_index() {
        let loads = LoadVector::private(3);
        loads.add(0, 2);
        assert_eq!(loads.least_loaded(), 1);
    }
}
