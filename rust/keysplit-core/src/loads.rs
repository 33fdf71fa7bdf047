//! Per-worker load counters: lock-free, one cache line each.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::min_tree::MinTree;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The largest worker count: each worker costs one cache line of load counter.
pub const MAX_WORKERS: u32 = 1 << 20;

/// Whether a load vector belongs to one source or is shared by several.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LoadScope {
    /// Local load estimation, the papers' default: a source counts only what it sent.
    /// Deterministic, since no other thread writes the counters.
    Private,
    /// A global view: every source that holds a handle adds to the same counters. A handle
    /// publishes its tuples in bursts and routes on its view of the counters as of its last
    /// burst plus its own tuples since (see [`LoadVector`]).
    Shared,
}

/// `L_w`, the number of tuples sent to each worker.
///
/// Every counter sits on its own cache line, so sources that share the vector do not
/// invalidate each other's lines when they bump different workers. Updates are
/// lock-free in both scopes: a private vector uses plain relaxed load/store pairs (only
/// its owner writes), a shared one uses relaxed `fetch_add`.
///
/// A shared handle does not `fetch_add` every tuple: two sources doing so on the same hot
/// workers' lines (true sharing) made two threads slower than one. It counts its tuples
/// locally and publishes them every [`LoadVector::publish_interval`] tuples, at the end of
/// every routed batch ([`crate::grouper::route_batch`]), before a [`LoadVector::snapshot`]
/// and when it is dropped, and then re-reads every counter. Its routing reads
/// ([`get`](Self::get), [`iter`](Self::iter), [`total`](Self::total),
/// [`least_loaded`](Self::least_loaded)) see the counters as of its last publication
/// plus its own tuples since: the other sources' tuples reach it at most one interval
/// late. No tuple is lost or counted twice.
#[derive(Debug)]
pub struct LoadVector {
    counters: Arc<[CachePadded<AtomicU64>]>,
    /// A shared handle's view and its unpublished tuples; `None` when private.
    view: Option<RefCell<SharedView>>,
}

#[derive(Debug)]
struct SharedView {
    /// The counters as of the last publication, plus this handle's tuples since.
    loads: Vec<u64>,
    /// This handle's tuples since its last publication, per worker.
    unpublished: Vec<u64>,
    pending: u64,
}

impl SharedView {
    fn of(counters: &[CachePadded<AtomicU64>]) -> Self {
        let loads = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        Self { loads, unpublished: vec![0; counters.len()], pending: 0 }
    }

    fn publish(&mut self, counters: &[CachePadded<AtomicU64>]) {
        for ((counter, unpublished), load) in
            counters.iter().zip(&mut self.unpublished).zip(&mut self.loads)
        {
            if *unpublished > 0 {
                counter.fetch_add(std::mem::take(unpublished), Ordering::Relaxed);
            }
            *load = counter.load(Ordering::Relaxed);
        }
        self.pending = 0;
    }

    /// Records `tuples` more of this handle's tuples on `worker`, its view already counting
    /// them.
    fn record(&mut self, worker: usize, tuples: u64) {
        self.unpublished[worker] += tuples;
        self.pending += tuples;
    }

    fn publish_if_due(&mut self, counters: &[CachePadded<AtomicU64>]) {
        if self.pending >= publish_interval(counters.len()) {
            self.publish(counters);
        }
    }
}

/// See [`LoadVector::publish_interval`].
fn publish_interval(workers: usize) -> u64 {
    256.max(4 * workers as u64)
}

/// A snapshot holds the counts and the scope. A shared vector restores as a new shared
/// vector that nobody else holds yet: the other sources' handles cannot be in a snapshot.
impl Serialize for LoadVector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (self.scope(), self.snapshot()).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for LoadVector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (scope, counts) = <(LoadScope, Vec<u64>)>::deserialize(deserializer)?;
        if counts.is_empty() || counts.len() > MAX_WORKERS as usize {
            return Err(serde::de::Error::custom(format!("{} load counters", counts.len())));
        }
        // Totals and shares add the counts up, and routing adds one per tuple: a sum of at
        // most 2^63 - 1 leaves room for 2^63 more tuples, more than any stream routes.
        let sum = counts.iter().try_fold(0u64, |sum, &c| sum.checked_add(c));
        if sum.is_none_or(|sum| sum > i64::MAX as u64) {
            return Err(serde::de::Error::custom("load counts whose sum exceeds 2^63 - 1"));
        }
        let counters = counts.into_iter().map(|c| CachePadded::new(AtomicU64::new(c))).collect();
        Ok(Self::from_counters(counters, scope))
    }
}

/// A shared handle's last tuples reach the counters when it goes.
impl Drop for LoadVector {
    fn drop(&mut self) {
        self.publish();
    }
}

impl LoadVector {
    pub fn new(workers: u32, scope: LoadScope) -> Self {
        let counters = (0..workers).map(|_| CachePadded::new(AtomicU64::new(0))).collect();
        Self::from_counters(counters, scope)
    }

    fn from_counters(counters: Arc<[CachePadded<AtomicU64>]>, scope: LoadScope) -> Self {
        let view = (scope == LoadScope::Shared).then(|| RefCell::new(SharedView::of(&counters)));
        Self { counters, view }
    }

    /// How many of its own tuples a shared handle counts before it publishes them: 256,
    /// or four per worker when there are more than 64 workers, so that re-reading the `n`
    /// counters costs at most a quarter of a read per tuple.
    pub fn publish_interval(&self) -> u64 {
        publish_interval(self.counters.len())
    }

    /// Adds a shared handle's unpublished tuples to the counters and re-reads them; nothing
    /// for a private vector.
    pub fn publish(&self) {
        if let Some(view) = &self.view {
            view.borrow_mut().publish(&self.counters);
        }
    }

    pub fn private(workers: u32) -> Self {
        Self::new(workers, LoadScope::Private)
    }

    pub fn shared(workers: u32) -> Self {
        Self::new(workers, LoadScope::Shared)
    }

    /// Another handle on a shared vector, for another source; `None` for a private one.
    pub fn share(&self) -> Option<Self> {
        match self.scope() {
            LoadScope::Shared => {
                Some(Self::from_counters(Arc::clone(&self.counters), LoadScope::Shared))
            }
            LoadScope::Private => None,
        }
    }

    pub fn scope(&self) -> LoadScope {
        if self.view.is_some() { LoadScope::Shared } else { LoadScope::Private }
    }

    pub fn workers(&self) -> u32 {
        self.counters.len() as u32
    }

    #[inline]
    pub fn get(&self, worker: u32) -> u64 {
        match &self.view {
            None => self.counters[worker as usize].load(Ordering::Relaxed),
            Some(view) => view.borrow().loads[worker as usize],
        }
    }

    #[inline]
    pub fn add(&self, worker: u32, tuples: u64) {
        match &self.view {
            None => {
                let counter = &self.counters[worker as usize];
                counter.store(counter.load(Ordering::Relaxed) + tuples, Ordering::Relaxed)
            }
            Some(view) => {
                let mut view = view.borrow_mut();
                view.loads[worker as usize] += tuples;
                view.record(worker as usize, tuples);
                view.publish_if_due(&self.counters);
            }
        }
    }

    /// Runs `route` on the loads as one plain, dense array, for a batch loop that reads and
    /// bumps them tuple after tuple.
    ///
    /// A private vector's counters are copied out and written back: one cache line per
    /// eight workers instead of one per worker, in ordinary memory the compiler can reason
    /// about; only the owner writes them, so the result is the same as bumping them in
    /// place. A shared handle hands out its view, and what `route` added becomes its
    /// unpublished tuples, published once there are [`publish_interval`](Self::publish_interval)
    /// of them: a caller that wants the usual staleness routes at most that many tuples per
    /// call.
    pub fn with_dense_loads<T>(&self, route: impl FnOnce(&mut [u64]) -> T) -> T {
        let Some(view) = &self.view else {
            let mut local = self.snapshot();
            let result = route(&mut local);
            for (counter, value) in self.counters.iter().zip(local) {
                counter.store(value, Ordering::Relaxed);
            }
            return result;
        };
        let mut view = view.borrow_mut();
        let before = view.loads.clone();
        let result = route(&mut view.loads);
        for (worker, start) in before.into_iter().enumerate() {
            let added = view.loads[worker] - start;
            view.record(worker, added);
        }
        view.publish_if_due(&self.counters);
        result
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

    /// The loads in worker order, as [`get`](Self::get) reads them.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.workers()).map(|worker| self.get(worker))
    }

    /// The counters as plain numbers, a shared handle's own tuples published first. Under
    /// concurrent updates each one is exact at some instant, not all at the same instant.
    pub fn snapshot(&self) -> Vec<u64> {
        match &self.view {
            None => self.counters.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
            Some(view) => {
                let mut view = view.borrow_mut();
                view.publish(&self.counters);
                view.loads.clone()
            }
        }
    }

    pub fn total(&self) -> u64 {
        self.iter().sum()
    }

    /// The first of `candidates` (not empty, in tie-breaking order) of least load.
    #[inline]
    pub fn least_loaded_among(&self, candidates: &[u32]) -> u32 {
        first_least_by(candidates, |worker| self.get(worker))
    }

    /// Two-choice routing's rule: `second` only if strictly less loaded than `first`.
    #[inline(always)]
    pub fn less_loaded_of_two(&self, first: u32, second: u32) -> u32 {
        if self.get(second) < self.get(first) { second } else { first }
    }

    /// The index of the smallest load, the lowest index on ties.
    pub fn least_loaded(&self) -> u32 {
        match &self.view {
            None => least_loaded_of(self.counters.iter().map(|c| c.load(Ordering::Relaxed))),
            Some(view) => least_loaded_of(view.borrow().loads.iter().copied()),
        }
    }

    /// Bytes held by the counters.
    pub fn state_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.counters)
    }
}

/// The index of the smallest of `loads`, the lowest index on ties; 0 for none.
#[inline]
pub fn least_loaded_of(loads: impl IntoIterator<Item = u64>) -> u32 {
    first_least(loads.into_iter().enumerate().map(|(worker, load)| (worker as u32, load)))
        .map_or(0, |(worker, _)| worker)
}

/// The first of `scored` (candidates with their scores, in tie-breaking order) of least
/// score, with that score; `None` for none.
///
/// Every grouper's "least loaded, ties to the first" goes through here, so that the
/// tie-breaking, which the routing digests pin, is written once.
#[inline(always)]
pub fn first_least<T: PartialOrd>(scored: impl IntoIterator<Item = (u32, T)>) -> Option<(u32, T)> {
    let mut scored = scored.into_iter();
    let mut best = scored.next()?;
    for next in scored {
        if next.1 < best.1 {
            best = next;
        }
    }
    Some(best)
}

/// The first of `candidates` (not empty, in tie-breaking order) of least `score`.
#[inline(always)]
pub fn first_least_by<T: PartialOrd>(candidates: &[u32], mut score: impl FnMut(u32) -> T) -> u32 {
    let (best, _) = first_least(candidates.iter().map(|&worker| (worker, score(worker))))
        .expect("at least one candidate");
    best
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
    fn decoding_refuses_counts_that_routing_could_overflow() {
        let decode = |counts: Vec<u64>| {
            let bytes = postcard::to_allocvec(&(LoadScope::Private, counts)).unwrap();
            postcard::from_bytes::<LoadVector>(&bytes).map(|loads| loads.snapshot())
        };
        assert_eq!(decode(vec![3, i64::MAX as u64 - 3]).unwrap(), [3, i64::MAX as u64 - 3]);
        assert!(decode(vec![u64::MAX, 0]).is_err());
        assert!(decode(vec![i64::MAX as u64, 1]).is_err());
        assert!(decode(vec![]).is_err());
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
    fn a_shared_handle_routes_on_its_view_and_publishes_in_bursts() {
        let loads = LoadVector::shared(2);
        let (a, b) = (loads.share().unwrap(), loads.share().unwrap());
        a.add(0, 10);
        assert_eq!((a.get(0), b.get(0), a.total()), (10, 0, 10));
        a.publish();
        assert_eq!(b.get(0), 0, "b sees a's tuples at its own next publication");
        b.add(1, 1);
        b.publish();
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![10, 1]);
        assert_eq!(b.least_loaded(), 1);
        // A burst goes out by itself once the interval is reached.
        for _ in 0..a.publish_interval() {
            a.add(1, 1);
        }
        assert_eq!(b.snapshot(), vec![10, 1 + a.publish_interval()]);
        // Dropping a handle publishes what it holds.
        a.add(0, 5);
        drop(a);
        assert_eq!(loads.snapshot(), vec![15, 1 + 256]);
        assert_eq!(LoadVector::shared(1000).publish_interval(), 4000);
    }

    #[test]
    fn dense_loads_are_written_back_or_become_unpublished_tuples() {
        let loads = LoadVector::private(3);
        loads.add(1, 4);
        let seen = loads.with_dense_loads(|local| {
            local[2] += 5;
            local.to_vec()
        });
        assert_eq!(seen, vec![0, 4, 5]);
        assert_eq!(loads.snapshot(), vec![0, 4, 5]);
        loads.add_counts(&[1, 0, 2]);
        assert_eq!(loads.snapshot(), vec![1, 4, 7]);

        let shared = LoadVector::shared(3);
        let (a, b) = (shared.share().unwrap(), shared.share().unwrap());
        a.with_dense_loads(|view| view[0] += 7);
        assert_eq!((a.get(0), b.snapshot()), (7, vec![0, 0, 0]), "not published yet");
        let interval = a.publish_interval();
        a.with_dense_loads(|view| view[2] += interval);
        assert_eq!(b.snapshot(), vec![7, 0, interval], "a burst went out");
        assert_eq!(a.get(2), interval);
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
