//! Dalton: Zapridou, Mytilinis and Ailamaki, "Dalton: Learned partitioning for distributed
//! data streams", PVLDB 16(3), 2022 (VLDB 2023; doi:10.14778/3570690.3570699),
//! single-partitioner setup.
//!
//! Specification: `docs/baselines.md`, section "Dalton", which the implementation follows;
//! where that section is silent we follow the authors' public code
//! (github.com/ezapridou/Dalton,
//! `flink/.../partitioning/dalton/{Dalton,ContextualBandits}.java`, `state/State.java`,
//! `containers/HotStatistics.java`, cited as "the authors' code"). FlexD (Section 6.1.2)
//! and Pd-Stream (memory, Fig. 12) compare against Dalton without stating its interval or
//! window; we checked both texts.
//!
//! # Algorithm, exactly
//!
//! * **Intervals and window**: as DAGreedy (see [`super::dagreedy`]): intervals of
//!   `interval_tuples` tuples, closed early by [`Grouper::end_window`]; each interval is a
//!   pane of the window, which is the current pane plus `window_panes` closed panes. The
//!   authors' code uses the window slide both as hot interval and as pane. Loads `L_w` and
//!   "workers holding `k`" (its *spread*) count the tuples of the window, cold ones included.
//! * **Hot keys.** A tuple of `k` in interval `j` is hot when the exact count of `k` in `j`,
//!   this tuple included, exceeds `T/n` (`n·c > T` in integers), `T` being the previous
//!   interval's tuple count, or when `k` was found hot in `j − 1`. No key is hot while
//!   `T = 0` (first interval, or after an empty one), as the authors' code starts with an
//!   infinite threshold.
//! * **Q-table.** A key found hot without a Q-row gets one, every entry `−2`. Found hot
//!   again, it keeps its row. The row is dropped at the end of the interval where its hot
//!   status expires (the end of `j + 1` if last found hot in `j`): a row exists exactly
//!   while the key is hot. (The authors' code drops it on the key's next tuple.)
//! * **Cold tuples** go to `h_0(k) mod n`.
//! * **Hot tuples**: draw `u = next_f64()` from SplitMix64. If `u < ε` (explore): when the
//!   key is in the *reached* set, a uniform worker among those holding it in the window, in
//!   index order; otherwise a uniform worker among all `n`. Else (exploit): the argmax of the
//!   key's Q-row, ties to the hash worker `h_0(k) mod n`, then to the lowest index (the
//!   authors' scan). A uniform index below `m` is `⌊x·m / 2^64⌋` of the next `x = next_u64()`.
//! * **Reward**, after the tuple is counted in the window:
//!   `r = −(0.5·(L_w − avg)/max(L_w, avg) + 0.5·spread(k)/n)`, `avg = ΣL/n`; then
//!   `Q[k][w] ← 0.9·Q[k][w] + 0.1·r`, in this order of floating-point operations.
//! * **maxSplit**, starting at 2: at the reward of a hot tuple, if `spread(k) == maxSplit`
//!   the key joins the reached set; then if at least 70% of the Q-table's keys are in the
//!   reached set (`10·|reached ∩ Q| ≥ 7·|Q|`) and `maxSplit < 6`, the reached set is
//!   emptied and `maxSplit` rises by one (the authors' `State.reward`).
//! * **Reached set upkeep.** A key stays in the set when its row is dropped (as in the
//!   authors' code), so a key that cools and heats again keeps exploring among its holders;
//!   only keys of the Q-table count towards the 70%. At every interval end, keys holding no
//!   worker in the window leave the set; should a reached key hold none when exploring,
//!   it leaves the set and explores among all workers (the authors' fallback).
//!
//! # What "never spreads beyond maxSplit" means here
//!
//! `r > −1` (the load term is above −1 since `L_w ≥ 1` after routing, the spread term at
//! most 1), so every updated Q entry is above `0.9·(−2) − 0.1 = −1.9`: once a row has been
//! rewarded, its argmax is a worker the row already tried, and a fresh row's all-`−2` tie
//! goes to the hash worker. A reached key explores only among its holders. So:
//!
//! 1. Each hot tuple of a key in the reached set goes to a worker that holds the key in the
//!    window, or that its current row has tried, or to its hash worker while the row has
//!    tried none (tested, Rust and twin).
//! 2. When no pane has left the window (the stream so far fits in it), a key that has
//!    stayed hot since its first hot tuple holds at most `maxSplit` workers at every
//!    moment (tested): its row only tried holders, its spread grows by at most one per
//!    tuple and is checked at every hot tuple, so it enters the reached set exactly when
//!    the spread reaches `maxSplit`, and from then on goes only to holders.
//!
//! Nothing stronger holds. A worker tried in a pane that left the window can win the
//! exploit again and raise the spread above `maxSplit`; a reached key whose row was dropped
//! goes to its hash worker while cold, and a fresh row's first exploit goes there too,
//! whatever the spread.
//!
//! # Parameters
//!
//! * `interval_tuples` (default 100 000) and `window_panes` (default 10): as DAGreedy; the
//!   authors' code reads slide and size from the command line.
//! * `epsilon` (default 0.1, the paper's and the authors' code's ε): exploration rate.
//!
//! Randomness: `SplitMix64::for_grouper(grouper_seed, u64::from_le_bytes(*b"dalton\0\0"))`,
//! one `next_f64` per hot tuple and one `next_u64` per exploration.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::collections::hash_map::Entry;
use std::hash::BuildHasherDefault;

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting};
use crate::groupers::dagreedy::{Intervals, PaneWindow, read_window_params};
use crate::hash::{HashFamily, Key, fingerprint};
use crate::loads::LoadVector;
use crate::params::{ParamError, INTERVAL_TUPLES, ParamReader, ParamSpec, ParamValue, WINDOW_PANES};
use crate::rng::SplitMix64;
use crate::sketches::{ItemHasher, ItemMap};
use crate::grouper::restore_state;

pub const INFO: GrouperInfo = GrouperInfo {
    name: "dalton",
    title: "Dalton: learned partitioning with an epsilon-greedy contextual bandit",
    paper: "Zapridou, Mytilinis and Ailamaki, Dalton: Learned partitioning for distributed \
            data streams, PVLDB 16(3), 2022",
    params: &[
        INTERVAL_TUPLES,
        WINDOW_PANES,
        ParamSpec {
            name: "epsilon",
            default: ParamValue::Float(0.1),
            doc: "exploration probability of the epsilon-greedy bandit, in [0, 1]",
        },
    ],
    build,
    restore: restore_state::<Dalton>,
};

/// The initial value of every Q entry.
pub const Q_INIT: f64 = -2.0;
/// The learning rate `a` of the update `Q ← (1 − a)·Q + a·r`.
pub const LEARNING_RATE: f64 = 0.1;
pub const INITIAL_MAX_SPLIT: usize = 2;
pub const MAX_MAX_SPLIT: usize = 6;
/// The SplitMix64 stream index of Dalton's draws.
pub const RNG_STREAM: u64 = u64::from_le_bytes(*b"dalton\0\0");

fn build(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let (interval_tuples, window_panes) = read_window_params(params)?;
    let epsilon = params.float("epsilon")?;
    if !(0.0..=1.0).contains(&epsilon) {
        return Err(params.refuse(ParamError::not_in("epsilon", 0, 1, epsilon)));
    }
    Ok(Box::new(Dalton::new(config.hashes, config.loads, interval_tuples, window_panes, epsilon)))
}

#[derive(Serialize, Deserialize)]
struct Row {
    q: Vec<f64>,
    /// The last interval in which the key was found hot.
    found: u64,
    /// The workers whose entry was ever rewarded, in index order, or `None` until listed;
    /// every other entry is exactly [`Q_INIT`]. Derived: `None` after a restore, then
    /// listed from the entries that differ from [`Q_INIT`].
    #[serde(skip)]
    tried: Option<Vec<u32>>,
}

impl Row {
    fn new(workers: usize, found: u64) -> Self {
        Self { q: vec![Q_INIT; workers], found, tried: Some(Vec::new()) }
    }

    fn tried(&mut self) -> &mut Vec<u32> {
        let q = &self.q;
        self.tried.get_or_insert_with(|| {
            (0..q.len() as u32).filter(|&w| q[w as usize] != Q_INIT).collect()
        })
    }

    /// The argmax of the row, ties to `hash_worker`, then to the lowest index: the scan
    /// `best = hash_worker; for w in 0..n { if q[w] > q[best] { best = w } }`, computed
    /// from the rewarded entries alone, since all others hold [`Q_INIT`].
    fn argmax(&mut self, hash_worker: u32) -> u32 {
        let workers = self.q.len();
        self.tried();
        let tried = self.tried.as_deref().unwrap_or_default();
        // The lowest index holding Q_INIT for not having been rewarded.
        let first_untried = tried
            .iter()
            .enumerate()
            .find(|&(position, &w)| w as usize != position)
            .map_or(tried.len(), |(position, _)| position);
        let mut max = f64::NEG_INFINITY;
        for &w in tried.iter() {
            max = max.max(self.q[w as usize]);
        }
        if first_untried < workers && Q_INIT > max {
            max = Q_INIT;
        }
        if self.q[hash_worker as usize] == max {
            return hash_worker;
        }
        let mut best =
            if first_untried < workers && max == Q_INIT { first_untried } else { workers };
        for &w in tried {
            if w as usize >= best {
                break;
            }
            if self.q[w as usize] == max {
                best = w as usize;
                break;
            }
        }
        best as u32
    }

    /// Records that `worker`'s entry was rewarded.
    fn rewarded(&mut self, worker: u32) {
        let tried = self.tried();
        if let Err(at) = tried.binary_search(&worker) {
            tried.insert(at, worker);
        }
    }
}

/// A key's routing state, for tests and inspection.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyView {
    /// The key has a Q-row: its next tuple is hot.
    pub hot: bool,
    pub reached: bool,
    /// Workers holding the key in the window, in index order.
    pub holders: Vec<u32>,
    /// Workers whose Q entry was updated, in index order.
    pub tried: Vec<u32>,
}

#[derive(Serialize, Deserialize)]
pub struct Dalton {
    hashes: HashFamily,
    loads: LoadVector,
    workers: u32,
    epsilon: f64,
    rng: SplitMix64,
    intervals: Intervals,
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    counts: ItemMap<u64>,
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    rows: ItemMap<Row>,
    #[serde(serialize_with = "crate::sketches::serialize_sorted_set")]
    reached: HashSet<u64, BuildHasherDefault<ItemHasher>>,
    /// `|reached ∩ rows|`.
    reached_rows: usize,
    max_split: usize,
    window: PaneWindow,
}

impl Dalton {
    pub fn new(
        hashes: HashFamily,
        loads: LoadVector,
        interval_tuples: u64,
        window_panes: usize,
        epsilon: f64,
    ) -> Self {
        let workers = hashes.workers();
        let rng = SplitMix64::for_grouper(hashes.grouper_seed(), RNG_STREAM);
        Self {
            hashes,
            loads,
            workers,
            epsilon,
            rng,
            intervals: Intervals::new(interval_tuples.max(1)),
            counts: ItemMap::default(),
            rows: ItemMap::default(),
            reached: HashSet::default(),
            reached_rows: 0,
            max_split: INITIAL_MAX_SPLIT,
            window: PaneWindow::new(workers, window_panes.max(1)),
        }
    }

    pub fn max_split(&self) -> usize {
        self.max_split
    }

    pub fn inspect(&self, key: Key<'_>) -> KeyView {
        let item = fingerprint(key);
        let row = self.rows.get(&item);
        KeyView {
            hot: row.is_some(),
            reached: self.reached.contains(&item),
            holders: self.window.holders(item).collect(),
            tried: row.map_or_else(Vec::new, |r| {
                (0..self.workers).filter(|&w| r.q[w as usize] != Q_INIT).collect()
            }),
        }
    }

    /// Counts the tuple, keeps the Q-table and tells whether the tuple is hot, and whether
    /// it gave the key a new row.
    fn is_hot(&mut self, item: u64) -> (bool, bool) {
        let count = self.counts.entry(item).or_insert(0);
        *count += 1;
        let previous = u128::from(self.intervals.previous_total);
        let workers = u128::from(self.workers);
        if previous > 0 && u128::from(*count) * workers > previous {
            // Counts only grow within an interval and rows are dropped only when one
            // closes, so past the tuple that crossed the threshold the row exists and
            // already records this interval.
            if u128::from(*count - 1) * workers > previous {
                return (true, false);
            }
            let found = self.intervals.index;
            return match self.rows.entry(item) {
                Entry::Occupied(mut row) => {
                    row.get_mut().found = found;
                    (true, false)
                }
                Entry::Vacant(slot) => {
                    slot.insert(Row::new(self.workers as usize, found));
                    (true, true)
                }
            };
        }
        (self.rows.contains_key(&item), false)
    }

    /// `⌊x·m / 2^64⌋` for the next draw `x`: a uniform index below `m`.
    fn uniform(&mut self, m: u32) -> u32 {
        ((u128::from(self.rng.next_u64()) * u128::from(m)) >> 64) as u32
    }

    fn choose_hot(&mut self, item: u64, key: Key<'_>) -> u32 {
        let hash_worker = self.hashes.candidate(0, key);
        if self.rng.next_f64() < self.epsilon {
            if self.reached.contains(&item) {
                let spread = self.window.spread(item) as u32;
                if spread > 0 {
                    let pick = self.uniform(spread) as usize;
                    return self.window.holders(item).nth(pick).expect("pick < spread");
                }
                self.reached.remove(&item);
                self.reached_rows -= 1;
            }
            return self.uniform(self.workers);
        }
        self.rows.get_mut(&item).expect("a hot key has a row").argmax(hash_worker)
    }

    fn reward(&mut self, item: u64, worker: u32) {
        let spread = self.window.spread(item);
        if spread == self.max_split && self.reached.insert(item) {
            self.reached_rows += 1;
        }
        let n = f64::from(self.workers);
        let load = self.window.load(worker) as f64;
        let avg = self.window.total() as f64 / n;
        let cost_map = (load - avg) / load.max(avg);
        let cost_reduce = spread as f64 / n;
        if 10 * self.reached_rows >= 7 * self.rows.len() && self.max_split < MAX_MAX_SPLIT {
            self.reached.clear();
            self.reached_rows = 0;
            self.max_split += 1;
        }
        let r = -(0.5 * cost_map + 0.5 * cost_reduce);
        let row = self.rows.get_mut(&item).expect("a hot key has a row");
        let q = &mut row.q[worker as usize];
        *q = *q * (1.0 - LEARNING_RATE) + LEARNING_RATE * r;
        row.rewarded(worker);
    }

    fn close_interval(&mut self) {
        self.intervals.close();
        self.counts.clear();
        let last = self.intervals.index - 1;
        let reached = &self.reached;
        let mut dropped_reached = 0;
        self.rows.retain(|item, row| {
            let keep = row.found == last;
            if !keep && reached.contains(item) {
                dropped_reached += 1;
            }
            keep
        });
        self.reached_rows -= dropped_reached;
        self.window.slide(self.workers);
        let window = &self.window;
        let rows = &self.rows;
        let mut removed_rows = 0;
        self.reached.retain(|item| {
            let keep = window.spread(*item) > 0;
            if !keep && rows.contains_key(item) {
                removed_rows += 1;
            }
            keep
        });
        self.reached_rows -= removed_rows;
    }
}

impl Grouper for Dalton {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn route(&mut self, key: Key<'_>) -> u32 {
        let item = fingerprint(key);
        let (hot, new_row) = self.is_hot(item);
        if new_row && self.reached.contains(&item) {
            // A reached key heats again: its new row counts towards the 70%.
            self.reached_rows += 1;
        }
        let worker = if hot { self.choose_hot(item, key) } else { self.hashes.candidate(0, key) };
        self.window.record(item, worker);
        self.loads.add(worker, 1);
        if hot {
            self.reward(item, worker);
        }
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
        same_setting("epsilon", &self.epsilon, &built.epsilon)?;
        same_setting("interval_tuples", &self.intervals.interval_tuples, &built.intervals.interval_tuples)?;
        same_setting("window_panes", &self.window.panes(), &built.window.panes())
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.workers;
        if self.hashes.workers() != n || self.loads.workers() != n {
            return Err(format!("{n} workers, a hash family of {}", self.hashes.workers()));
        }
        if !(0.0..=1.0).contains(&self.epsilon)
            || !(INITIAL_MAX_SPLIT..=MAX_MAX_SPLIT).contains(&self.max_split)
        {
            return Err(format!("epsilon {} and a split of {}", self.epsilon, self.max_split));
        }
        self.intervals.check()?;
        self.window.check(n)?;
        if self.counts.values().try_fold(0u64, |sum, &c| sum.checked_add(c))
            != Some(self.intervals.current)
        {
            return Err("interval counts that do not sum to the interval's tuples".to_owned());
        }
        let row_ok = |row: &Row| {
            row.q.len() == n as usize
                && row.q.iter().all(|q| q.is_finite())
                && row.found <= self.intervals.index
        };
        if !self.rows.values().all(row_ok) {
            return Err(
                "a Q-table row of another width, a value not finite, or found later".to_owned()
            );
        }
        // Routing takes a key past the hot threshold to have its row for this interval.
        let (previous, workers) = (u128::from(self.intervals.previous_total), u128::from(n));
        let hot_without_row = previous > 0
            && self.counts.iter().any(|(item, &count)| {
                u128::from(count) * workers > previous
                    && self.rows.get(item).is_none_or(|row| row.found != self.intervals.index)
            });
        if hot_without_row {
            return Err("a key past the hot threshold without its row".to_owned());
        }
        if self.reached.iter().filter(|item| self.rows.contains_key(item)).count()
            != self.reached_rows
        {
            return Err("a count of reached rows that is not theirs".to_owned());
        }
        Ok(())
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        let row_bytes = std::mem::size_of::<(u64, Row)>() + 1;
        std::mem::size_of::<Self>()
            + self.loads.state_bytes()
            + self.counts.capacity() * (std::mem::size_of::<(u64, u64)>() + 1)
            + self.rows.capacity() * row_bytes
            + self
                .rows
                .values()
                .map(|r| r.q.capacity() * 8 + r.tried.as_ref().map_or(0, |t| t.capacity() * 4))
                .sum::<usize>()
            + self.reached.capacity() * (std::mem::size_of::<u64>() + 1)
            + self.window.state_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_argmax_from_the_rewarded_entries_is_the_scan_argmax(
            workers in 1usize..40,
            rewards in prop::collection::vec((0u32..40, prop::sample::select(vec![-2.0, -1.5, -0.0, 0.0, 0.25, 0.5])), 0..60),
            hash_worker in 0u32..40,
            restored in any::<bool>(),
        ) {
            let hash_worker = hash_worker % workers as u32;
            let mut row = Row::new(workers, 0);
            for (worker, value) in rewards {
                let worker = worker % workers as u32;
                row.q[worker as usize] = value;
                row.rewarded(worker);
            }
            if restored {
                row.tried = None;
            }
            let mut best = hash_worker;
            for (w, &value) in row.q.iter().enumerate() {
                if value > row.q[best as usize] {
                    best = w as u32;
                }
            }
            prop_assert_eq!(row.argmax(hash_worker), best);
        }
    }
}
