//! DAGreedy: Pacaci and Özsu, "Distribution-aware stream partitioning for distributed
//! stream processing systems", BeyondMR (SIGMOD workshop) 2018
//! (doi:10.1145/3206333.3206338).
//!
//! Specification: `docs/baselines.md`, section "DAGreedy", which the implementation
//! follows; where that section is silent we follow the authors' public re-implementation in
//! the Dalton repository (github.com/ezapridou/Dalton,
//! `flink/.../partitioning/DAGreedy.java`, `dalton/state/State.java`,
//! `dalton/containers/HotStatistics.java`, cited below as "the authors' code"). Pd-Stream
//! compares against DAGreedy (Section VI-A, its reference 22) and FlexD cites it for the
//! hybrid strategy and for λ (Eq. 2); neither states an interval or window length for it
//! (we checked both texts).
//!
//! # Algorithm, exactly
//!
//! * **Intervals.** The stream of this source is cut into intervals of `interval_tuples`
//!   tuples: an interval closes right after its `interval_tuples`-th tuple is routed.
//!   [`Grouper::end_window`] closes the current interval at once, even an empty one, so a
//!   caller can drive event-time intervals. The interval is also the pane of the load
//!   window (below): the authors' code uses the window slide for both.
//! * **Hot keys.** Let `T` be the number of tuples of the previous interval. A tuple of key
//!   `k` in interval `j` is hot when `c_j(k) > T / (100·n)`, where `c_j(k)` is the exact
//!   count of `k` in interval `j` including this tuple (a table of fingerprints, cleared at
//!   every interval end), or when `k` was found hot in interval `j − 1`. So hot status found
//!   in interval `j` lasts to the end of interval `j + 1` ("expires one interval later"),
//!   and is renewed if the key is found hot again in `j + 1`. The comparison is exact,
//!   `100·n·c > T` in integers.
//! * **Cold tuples** go to `h_0(k) mod n` (key grouping).
//! * **Hot tuples** go to the worker with the highest score
//!   `s_w = 0.5·[k on w in the window] − 0.5·(L_w − avg)/avg`, ties to the lowest index,
//!   where `L_w` is the number of tuples this source sent to `w` in the window and
//!   `avg = Σ L_w / n`. Multiplying by `2·Σ L / n > 0` and dropping a constant, the order of
//!   the scores is that of the integers `[k on w]·ΣL − n·L_w`, which we compare exactly:
//!   no rounding can change the choice.
//! * **Window.** The window is the current pane plus the `window_panes` most recent closed
//!   panes (the authors' code keeps `size/slide` closed slides plus the open one). Both the
//!   loads `L_w` and the sets "workers that received `k`" count only tuples in the window;
//!   they include cold tuples, so a key's hash worker holds it once it was routed there.
//!
//! # Ambiguities and our choices
//!
//! * First interval, and an interval after an empty one (`T = 0`): no previous traffic to
//!   compare with, so no key is hot. (The literal `c > 0/(100n)` would make every key hot;
//!   the authors' code starts with an infinite threshold.)
//! * The authors' code computes the threshold with integer division, `⌊T/(100n)⌋`; we use
//!   the exact quotient, as the specification writes it.
//! * `avg = 0` (an empty window): the load term is taken as 0 for every worker. With
//!   `window_panes ≥ 1` a hot tuple always finds a non-empty window, so this is defensive.
//! * The authors' code keeps the key-to-worker sets only for slides that saw a hot key and
//!   clears bits with the key's id instead of the worker's; we keep the exact windowed sets.
//! * The first interval routes every key by hash, so at large `n` its hottest key can set
//!   λ on its own (at `n = 128`, z = 2.0 on 10^7 tuples, λ ≈ 0.9 with the default
//!   interval); shorter intervals shrink that but raise γ sharply. Pd-Stream's
//!   statements about DAGreedy are compared for several intervals in
//!   `docs/reproduction.md` (`keysplit reproduce pdstream_dagreedy_params`).
//! * Hot status is dropped eagerly at the interval end where it expires (the authors'
//!   code drops it on the key's next tuple); routing is the same, state is smaller.
//!
//! # Parameters
//!
//! * `interval_tuples` (default 100 000): neither the paper's comparators nor the authors'
//!   code fix it (the code reads the slide from the command line). The threshold
//!   `T/(100n)` needs `T ≫ 100n` to separate keys by their counts: 100 000 keeps it at 15
//!   or more up to 64 workers.
//! * `window_panes` (default 10): closed panes in the load window, our choice (the code
//!   reads the window size from the command line); at least 1, so that the previous
//!   interval, whose hot keys are still hot, is in the window.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting};
use crate::hash::{HashFamily, Key, fingerprint};
use crate::loads::{LoadVector, first_least};
use crate::min_tree::MinTree;
use crate::params::{ParamError, INTERVAL_TUPLES, ParamReader, WINDOW_PANES};
use crate::sketches::ItemMap;
use crate::grouper::restore_state;

pub const INFO: GrouperInfo = GrouperInfo {
    name: "dagreedy",
    title: "DAGreedy: distribution-aware greedy key splitting",
    paper: "Pacaci and Özsu, Distribution-aware stream partitioning for distributed stream \
            processing systems, BeyondMR 2018",
    params: &[
        INTERVAL_TUPLES,
        WINDOW_PANES,
    ],
    build,
    restore: restore_state::<DaGreedy>,
};

/// The largest accepted `window_panes`.
pub const MAX_WINDOW_PANES: i64 = 1 << 16;

/// Reads and validates `interval_tuples` and `window_panes`, shared with Dalton.
pub(crate) fn read_window_params(
    params: &mut ParamReader<'_>,
) -> Result<(u64, usize), ConfigError> {
    let interval = params.int("interval_tuples")?;
    if interval < 1 {
        return Err(
            params.refuse(ParamError::below("interval_tuples", 1, interval))
        );
    }
    let panes = params.int("window_panes")?;
    if !(1..=MAX_WINDOW_PANES).contains(&panes) {
        return Err(params.refuse(ParamError::not_in("window_panes", 1, MAX_WINDOW_PANES, panes)));
    }
    Ok((interval as u64, panes as usize))
}

fn build(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let (interval_tuples, window_panes) = read_window_params(params)?;
    Ok(Box::new(DaGreedy::new(config.hashes, config.loads, interval_tuples, window_panes)))
}

/// Tuple-count intervals and the total of the previous one.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct Intervals {
    pub interval_tuples: u64,
    /// Tuples routed in the current interval.
    pub current: u64,
    /// The current interval's number, from 0.
    pub index: u64,
    /// Tuples of the previous interval; 0 before the first one closes.
    pub previous_total: u64,
}

impl Intervals {
    pub fn new(interval_tuples: u64) -> Self {
        Self { interval_tuples, current: 0, index: 0, previous_total: 0 }
    }

    /// Counts a routed tuple; true when it completes the interval.
    pub fn tick(&mut self) -> bool {
        self.current += 1;
        self.current >= self.interval_tuples
    }

    pub fn close(&mut self) {
        self.previous_total = self.current;
        self.current = 0;
        self.index += 1;
    }

    /// An interval closes when it fills, or earlier at the end of a window.
    pub fn check(&self) -> Result<(), String> {
        if self.interval_tuples == 0
            || self.current >= self.interval_tuples
            || self.previous_total > self.interval_tuples
        {
            return Err(format!(
                "intervals of {} tuples with {} and {} in the last two",
                self.interval_tuples, self.current, self.previous_total
            ));
        }
        Ok(())
    }
}

/// A list whose single element, the common case, is kept inline: every cold key goes to
/// one worker, so most (pane, key) and (window, key) lists hold one entry and would
/// otherwise cost an allocation each. Serialized as the sequence of its elements, exactly
/// as a `Vec<T>`, so snapshots do not change.
#[derive(Clone, Debug)]
pub(crate) enum InlineList<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> Default for InlineList<T> {
    fn default() -> Self {
        Self::Many(Vec::new())
    }
}

impl<T: Copy> InlineList<T> {
    fn as_slice(&self) -> &[T] {
        match self {
            Self::One(x) => std::slice::from_ref(x),
            Self::Many(v) => v,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Self::One(x) => std::slice::from_mut(x),
            Self::Many(v) => v,
        }
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn insert(&mut self, at: usize, x: T) {
        match self {
            Self::Many(v) if v.is_empty() => *self = Self::One(x),
            Self::Many(v) => v.insert(at, x),
            Self::One(y) => {
                let y = *y;
                *self = Self::Many(if at == 0 { vec![x, y] } else { vec![y, x] });
            }
        }
    }

    fn push(&mut self, x: T) {
        let at = self.len();
        self.insert(at, x);
    }

    fn remove(&mut self, at: usize) {
        match self {
            Self::One(_) => *self = Self::Many(Vec::new()),
            Self::Many(v) => {
                v.remove(at);
            }
        }
    }

    /// Bytes on the heap.
    fn heap_bytes(&self) -> usize {
        match self {
            Self::One(_) => 0,
            Self::Many(v) => v.capacity() * std::mem::size_of::<T>(),
        }
    }
}

impl<T: Copy + Serialize> Serialize for InlineList<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.as_slice())
    }
}

impl<'de, T: Copy + Deserialize<'de>> Deserialize<'de> for InlineList<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let v = Vec::<T>::deserialize(deserializer)?;
        Ok(match v.as_slice() {
            [x] => Self::One(*x),
            _ => Self::Many(v),
        })
    }
}

/// One pane: the tuples sent to each worker and the workers each key went to.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct Pane {
    loads: Vec<u64>,
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    holders: ItemMap<InlineList<u32>>,
}

impl Pane {
    fn new(workers: u32) -> Self {
        Self { loads: vec![0; workers as usize], holders: ItemMap::default() }
    }

    fn bytes(&self) -> usize {
        self.loads.capacity() * 8 + holder_map_bytes(&self.holders)
    }
}

fn holder_map_bytes<V: Copy>(map: &ItemMap<InlineList<V>>) -> usize {
    map.capacity() * (std::mem::size_of::<(u64, InlineList<V>)>() + 1)
        + map.values().map(InlineList::heap_bytes).sum::<usize>()
}

/// A sliding window of panes: the current pane and up to `panes` closed ones, with the
/// windowed load of every worker and, for every key, the workers it went to in the window.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub(crate) struct PaneWindow {
    panes: usize,
    closed: VecDeque<Pane>,
    current: Pane,
    loads: Vec<u64>,
    total: u64,
    /// Per key: (worker, number of panes of the window in which the key went to it),
    /// by worker index.
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    spread: ItemMap<InlineList<(u32, u32)>>,
}

impl PaneWindow {
    /// The closed panes the window keeps besides the current one.
    pub fn panes(&self) -> usize {
        self.panes
    }

    pub fn new(workers: u32, panes: usize) -> Self {
        Self {
            panes,
            closed: VecDeque::new(),
            current: Pane::new(workers),
            loads: vec![0; workers as usize],
            total: 0,
            spread: ItemMap::default(),
        }
    }

    /// Records a tuple of key `item` sent to `worker`.
    pub fn record(&mut self, item: u64, worker: u32) {
        self.current.loads[worker as usize] += 1;
        self.loads[worker as usize] += 1;
        self.total += 1;
        let in_pane = self.current.holders.entry(item).or_default();
        if !in_pane.as_slice().contains(&worker) {
            in_pane.push(worker);
            let spread = self.spread.entry(item).or_default();
            match spread.as_slice().binary_search_by_key(&worker, |&(w, _)| w) {
                Ok(i) => spread.as_mut_slice()[i].1 += 1,
                Err(i) => spread.insert(i, (worker, 1)),
            }
        }
    }

    /// Closes the current pane and drops the oldest one once more than `panes` are held.
    pub fn slide(&mut self, workers: u32) {
        // The pane that leaves the window (the oldest, once `panes` are closed) hands its
        // emptied tables to the next current pane, which then does not grow them again.
        let leaving = if self.closed.len() >= self.panes { self.closed.pop_front() } else { None };
        let next = match leaving {
            Some(mut old) => {
                for (w, load) in old.loads.iter().enumerate() {
                    self.loads[w] -= load;
                    self.total -= load;
                }
                for (item, workers) in old.holders.drain() {
                    let Some(spread) = self.spread.get_mut(&item) else { continue };
                    for &worker in workers.as_slice() {
                        if let Ok(i) = spread.as_slice().binary_search_by_key(&worker, |&(w, _)| w)
                        {
                            let entry = &mut spread.as_mut_slice()[i];
                            entry.1 -= 1;
                            if entry.1 == 0 {
                                spread.remove(i);
                            }
                        }
                    }
                    if spread.is_empty() {
                        self.spread.remove(&item);
                    }
                }
                old.loads.fill(0);
                old
            }
            None => Pane::new(workers),
        };
        let pane = std::mem::replace(&mut self.current, next);
        self.closed.push_back(pane);
    }

    /// The window is what its panes say: every load the sum of the panes' loads, every
    /// worker in range, and `spread` the count of panes in which each key went to each
    /// worker. Recounted in full, in the state's size.
    pub fn check(&self, workers: u32) -> Result<(), String> {
        let n = workers as usize;
        if self.panes == 0 || self.closed.len() > self.panes {
            return Err(format!(
                "{} closed panes in a window of {}",
                self.closed.len(),
                self.panes
            ));
        }
        let mut loads = vec![0u64; n];
        let mut spread: ItemMap<Vec<(u32, u32)>> = ItemMap::default();
        for pane in self.closed.iter().chain([&self.current]) {
            if pane.loads.len() != n {
                return Err(format!("a pane of {} workers, not {n}", pane.loads.len()));
            }
            for (sum, &load) in loads.iter_mut().zip(&pane.loads) {
                *sum = sum.checked_add(load).ok_or("window loads that overflow")?;
            }
            for (&item, holders) in &pane.holders {
                for &worker in holders.as_slice() {
                    if worker >= workers {
                        return Err(format!("a key held by worker {worker} of {workers}"));
                    }
                    let entries = spread.entry(item).or_default();
                    match entries.binary_search_by_key(&worker, |&(w, _)| w) {
                        Ok(i) => entries[i].1 += 1,
                        Err(i) => entries.insert(i, (worker, 1)),
                    }
                }
            }
        }
        if loads != self.loads || loads.iter().sum::<u64>() != self.total {
            return Err("window loads that are not the sum of the panes".to_owned());
        }
        let listed = spread.len() == self.spread.len()
            && spread.iter().all(|(item, entries)| {
                self.spread.get(item).is_some_and(|kept| kept.as_slice() == entries.as_slice())
            });
        if !listed {
            return Err("key spreads that disagree with the panes".to_owned());
        }
        Ok(())
    }

    /// `L_w` over the window.
    pub fn load(&self, worker: u32) -> u64 {
        self.loads[worker as usize]
    }

    /// `Σ L_w` over the window.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The workers that received `item` in the window, in index order.
    pub fn holders(&self, item: u64) -> impl Iterator<Item = u32> + '_ {
        self.holder_entries(item).iter().map(|&(w, _)| w)
    }

    /// `(worker, panes)` for every worker that received `item` in the window, by worker.
    pub fn holder_entries(&self, item: u64) -> &[(u32, u32)] {
        self.spread.get(&item).map_or(&[], InlineList::as_slice)
    }

    /// Whether `item` went to `worker` in the window.
    pub fn holds(&self, item: u64, worker: u32) -> bool {
        self.holder_entries(item).binary_search_by_key(&worker, |&(w, _)| w).is_ok()
    }

    /// The number of workers that received `item` in the window.
    pub fn spread(&self, item: u64) -> usize {
        self.spread.get(&item).map_or(0, InlineList::len)
    }

    pub fn state_bytes(&self) -> usize {
        self.closed.iter().map(Pane::bytes).sum::<usize>()
            + self.closed.capacity() * std::mem::size_of::<Pane>()
            + self.current.bytes()
            + self.loads.capacity() * 8
            + holder_map_bytes(&self.spread)
    }
}

#[derive(Serialize, Deserialize)]
pub struct DaGreedy {
    hashes: HashFamily,
    loads: LoadVector,
    workers: u32,
    intervals: Intervals,
    /// Exact counts of the current interval, by fingerprint.
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    counts: ItemMap<u64>,
    /// Hot keys: the last interval in which each was found hot.
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    hot: ItemMap<u64>,
    window: PaneWindow,
    /// The window loads as a tournament tree, for the best score without a scan of all
    /// `n` workers. Derived: empty after a restore and after a pane slides, rebuilt when
    /// next needed.
    #[serde(skip)]
    window_least: MinTree,
}

impl DaGreedy {
    pub fn new(
        hashes: HashFamily,
        loads: LoadVector,
        interval_tuples: u64,
        window_panes: usize,
    ) -> Self {
        let workers = hashes.workers();
        Self {
            hashes,
            loads,
            workers,
            intervals: Intervals::new(interval_tuples.max(1)),
            counts: ItemMap::default(),
            hot: ItemMap::default(),
            window: PaneWindow::new(workers, window_panes.max(1)),
            window_least: MinTree::default(),
        }
    }

    /// Counts the tuple and tells whether it is hot.
    fn is_hot(&mut self, item: u64) -> bool {
        let count = self.counts.entry(item).or_insert(0);
        *count += 1;
        let previous = u128::from(self.intervals.previous_total);
        let scale = 100 * u128::from(self.workers);
        if previous > 0 && u128::from(*count) * scale > previous {
            // Counts only grow within an interval, so the tuple that crossed the threshold
            // already recorded the key as found hot in this interval.
            if u128::from(*count - 1) * scale <= previous {
                self.hot.insert(item, self.intervals.index);
            }
            return true;
        }
        // Found hot in this interval or the previous one: still hot.
        self.hot.contains_key(&item)
    }

    /// The worker with the highest score for a hot key, ties to the lowest index.
    ///
    /// The score is `total·[w holds the key] − n·L_w`. Among the workers that do not hold
    /// the key, the best is the least loaded, lowest index first; if that worker holds the
    /// key it beats every other worker (ties included, having the lowest index of the least
    /// load). So only the holders are scanned, against the least-loaded worker overall.
    pub fn best_worker(&mut self, item: u64) -> u32 {
        if self.window_least.len() != self.workers as usize {
            let window = &self.window;
            self.window_least.rebuild((0..self.workers).map(|w| window.load(w)));
        }
        let least = self.window_least.min_index();
        let holders = self.window.holder_entries(item);
        if holders.binary_search_by_key(&least, |&(w, _)| w).is_ok() {
            return least;
        }
        // All holders share the term `total`, so the best of them is the least loaded,
        // the lowest index first (holders are in index order); it then meets `least`.
        let Some((holder, holder_load)) =
            first_least(holders.iter().map(|&(w, _)| (w, self.window.load(w))))
        else {
            return least;
        };
        let n = i128::from(self.workers);
        let holder_score = i128::from(self.window.total()) - n * i128::from(holder_load);
        let least_score = -n * i128::from(self.window.load(least));
        if holder_score > least_score || (holder_score == least_score && holder < least) {
            holder
        } else {
            least
        }
    }

    fn close_interval(&mut self) {
        self.window_least.clear();
        self.intervals.close();
        self.counts.clear();
        // Keys found hot in the interval that just closed stay hot through the next one.
        let last = self.intervals.index - 1;
        self.hot.retain(|_, found| *found == last);
        self.window.slide(self.workers);
    }

    /// Whether `key` would be routed as hot if its next tuple did not count.
    pub fn is_hot_key(&self, key: Key<'_>) -> bool {
        self.hot.contains_key(&fingerprint(key))
    }

    /// Windowed load of `worker` and whether `key` is on it, for tests and inspection.
    pub fn window_view(&self, key: Key<'_>, worker: u32) -> (u64, u64, bool) {
        let item = fingerprint(key);
        (self.window.load(worker), self.window.total(), self.window.holds(item, worker))
    }
}

impl Grouper for DaGreedy {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn route(&mut self, key: Key<'_>) -> u32 {
        let item = fingerprint(key);
        let worker =
            if self.is_hot(item) { self.best_worker(item) } else { self.hashes.candidate(0, key) };
        self.window.record(item, worker);
        if !self.window_least.is_empty() {
            self.window_least.increase(worker, self.window_least.get(worker) + 1);
        }
        self.loads.add(worker, 1);
        if self.intervals.tick() {
            self.close_interval();
        }
        worker
    }

    fn end_window(&mut self) {
        self.close_interval();
    }

    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
        let built = built_as::<Self>(built)?;
        same_setting("hash family", &self.hashes, &built.hashes)?;
        same_setting("interval_tuples", &self.intervals.interval_tuples, &built.intervals.interval_tuples)?;
        same_setting("window_panes", &self.window.panes(), &built.window.panes())
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.workers;
        if self.hashes.workers() != n || self.loads.workers() != n {
            return Err(format!("{n} workers, a hash family of {}", self.hashes.workers()));
        }
        self.intervals.check()?;
        self.window.check(n)?;
        if self.counts.values().try_fold(0u64, |sum, &c| sum.checked_add(c))
            != Some(self.intervals.current)
        {
            return Err("interval counts that do not sum to the interval's tuples".to_owned());
        }
        if self.hot.values().any(|&found| found > self.intervals.index) {
            return Err("a key found hot in an interval still to come".to_owned());
        }
        Ok(())
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.loads.state_bytes()
            + self.counts.capacity() * (std::mem::size_of::<(u64, u64)>() + 1)
            + self.hot.capacity() * (std::mem::size_of::<(u64, u64)>() + 1)
            + self.window.state_bytes()
            + self.window_least.state_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streams::Zipf;

    /// The paper's rule as a scan of every worker's score, ties to the lowest index.
    fn best_by_scan(dagreedy: &DaGreedy, key: Key<'_>) -> u32 {
        let n = i128::from(dagreedy.workers);
        let (mut best, mut best_score) = (0, i128::MIN);
        for w in 0..dagreedy.workers {
            let (load, total, on) = dagreedy.window_view(key, w);
            let score = if on { i128::from(total) } else { 0 } - n * i128::from(load);
            if score > best_score {
                best = w;
                best_score = score;
            }
        }
        best
    }

    #[test]
    fn the_best_worker_from_the_tree_is_the_scan_best() {
        for workers in [1, 2, 7, 100] {
            let hashes = HashFamily::new(3, workers);
            let mut dagreedy = DaGreedy::new(hashes, LoadVector::private(workers), 700, 3);
            let mut zipf = Zipf::new(3_000, 1.1, 5).unwrap();
            for step in 0..12_000 {
                let key = Key::Int(zipf.next_key());
                let expected = best_by_scan(&dagreedy, key);
                assert_eq!(dagreedy.best_worker(fingerprint(key)), expected, "{workers}, {step}");
                dagreedy.route(key);
            }
        }
    }
}

#[cfg(test)]
mod inline_list_tests {
    use super::InlineList;

    #[test]
    fn an_inline_list_serializes_as_the_vec_of_its_elements() {
        for len in 0..5u32 {
            let elements: Vec<(u32, u32)> = (0..len).map(|i| (i * 3, i + 1)).collect();
            let mut list = InlineList::default();
            for (at, &e) in elements.iter().enumerate().rev() {
                list.insert(0, e);
                assert_eq!(list.as_slice(), &elements[at..]);
            }
            let bytes = postcard::to_allocvec(&list).unwrap();
            assert_eq!(bytes, postcard::to_allocvec(&elements).unwrap());
            let back: InlineList<(u32, u32)> = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(back.as_slice(), elements.as_slice());
            assert_eq!(matches!(back, InlineList::One(_)), len == 1);
        }
        let mut list = InlineList::default();
        list.push(7u32);
        list.push(9);
        list.remove(0);
        assert_eq!(list.as_slice(), &[9]);
        list.remove(0);
        assert!(list.is_empty());
    }
}
