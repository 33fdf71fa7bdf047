//! Dynamic Key Grouping (DKG): Dalabasmaz and Can, "Dynamic Key Grouping: A Load Balancing
//! Algorithm for Distributed Stream Processing Engines", Hacettepe University manuscript,
//! c. 2017 (its newest reference is of 2017): Sections 4.1-4.6, Algorithms 1-6, Table 1,
//! experimental setup of Section 5. Not to be confused with `dkg_rivetti`
//! ([`super::rivetti`]), Rivetti et al.'s distribution-aware key grouping.
//!
//! Where the paper is silent we consult the authors' public Storm code
//! (github.com/odalabasmaz/DynamicKeyGrouping, `loadbalancer/grouping/dkg/{DynamicKeyGrouping,
//! KeySpace,KeySpaceManager}.java`, cited as "the authors' code"); every such place is listed
//! below, with the places where we keep to the paper against the code.
//!
//! # Routing one tuple with key `k`
//!
//! * **Key Space** (Section 4.1.2): every key has a Key Item (its occurrence count and its
//!   width), held in the old, teenage or baby space, in that lookup order. A key found in
//!   none gets a new item at the tail of the baby space. The item's count rises by one.
//! * **Ring slice** (Section 4.4, Eq. 5): `index = h_0(k) mod n`, one hash only. The key's
//!   candidates are the contiguous ring slice `index, index+1, …, index+N_m−1 (mod n)`, its
//!   width `N_m` starting at `min(2, n)`.
//! * **Algorithm 4** (`chooseBestTask`), with the loads `L_w` of this source
//!   ([`LoadVector`]) read as percentages `100·L_w / ΣL` (Section 4.3: "we compare the load
//!   distribution over the percentage"; 0 before the first tuple):
//!   `findBestCandidate` takes the least-loaded candidate (`CM`, ties to the first in ring
//!   order) and `NLL`, the candidates below the threshold `Ls`. Then
//!   - **scale out** (Algorithm 5) when the warm-up is over, the least load is `≥ Ls`, `k`
//!     is in the old space (Section 4.2), and `N_m` is below the maximum of Table 1: the
//!     next ring worker `index + N_m` is tried; if its load is below the least load, the
//!     tuple goes there and `N_m` grows by one;
//!   - else **scale down** (Algorithm 6) when `N_m > 2` and `NLL ≥ 2`: `N_m` shrinks by one
//!     and Algorithm 4 runs again (it may shrink again, down to 2);
//!   - else the tuple goes to `CM`.
//! * **Threshold** (Section 4.3, Eq. 3-4): `Li = 100/n`, `Ls = Li + √Li`, in `f64`.
//!   [`threshold_table`] computes Table 1, [`max_machines`] its last column.
//!
//! # Key Space Manager (Section 4.1.3, Algorithms 1-3)
//!
//! Time is counted in **windows** of `window_tuples` tuples, one window per 15-second cycle
//! of the paper. A window closes right after its `window_tuples`-th tuple is routed, or at
//! once when [`Grouper::end_window`] is called (even an empty window), so a caller can drive
//! event-time cycles. At each window end:
//!
//! 1. **Algorithm 1** (`promoteToTeenageSpace`, every 15 s): sort the baby space by count,
//!    largest first; truncate it to its size (the lowest counts, "quite new items", are
//!    discarded with their items); sort the teenage space; promote baby → teenage
//!    (Algorithm 3).
//! 2. **Algorithm 2** (`promoteToOldSpace`, every 60 s = every `old_cycle_windows = 4`
//!    windows): sort the teenage and old spaces, promote teenage → old.
//!
//! **Algorithm 3** (`promoteToNextSpace(SS, DS)`), at most `|DS|max` moves: while `DS` has
//! room, the first item of `SS` moves to the head of `DS`; then, while the first item of
//! `SS` has a strictly higher count than the last item of `DS`, the first of `SS` moves to
//! the head of `DS` and the last of `DS` to the tail of `SS`.
//!
//! **Warm-up** (Algorithm 5, `isWarmUp`: "elapsed time > 15 s"): over once `warmup_windows =
//! 1` window has closed.
//!
//! # Parameters
//!
//! * `window_tuples` (int ≥ 1, default 15 000): the tuples of one 15-second cycle. The paper
//!   counts seconds; Table 3 measures DKG at 4 529 tuples/s in total over 5 sources
//!   (Section 5.3), about 900 per source, which we round to 1 000 tuples/s: 15 s ≈ 15 000
//!   tuples per source.
//! * `old_cycle_windows` (int ≥ 1, default 4): windows per teenage → old cycle, 60 s / 15 s
//!   (Section 4.1.3; the authors' `KeySpaceManager` also runs it every 4th cycle).
//! * `warmup_windows` (int ≥ 0, default 1): windows of cold start, 15 s / 15 s
//!   (Algorithm 5); 0 disables the warm-up.
//! * `expected_keys` (int in [10, 2^30], default 100): "the number of expected different
//!   keys" (Section 4.1.2; 100 in the paper). The old space holds `⌊10%⌋` of it (10), the
//!   teenage space `⌊40%⌋` (40), the baby space `⌊50%⌋` (50) after each truncation, in
//!   integer arithmetic. At least 10 so that the old space holds one key.
//!
//! No randomness is used.
//!
//! # Where the paper is ambiguous, and what we chose
//!
//! * **Seconds.** Every duration (15 s, 60 s, 15 s warm-up) is a number of windows of
//!   `window_tuples` tuples (see Parameters). The paper's manager also runs at `t = 0`,
//!   on an empty key space: a no-op, skipped. At a window that ends both cycles,
//!   Algorithm 1 runs before Algorithm 2, as in the authors' `KeySpaceManager`.
//! * **Filling an empty space.** Algorithm 3 loops "for each item in DS": read literally it
//!   never moves anything into an empty space, so the old space would stay empty. The
//!   authors' code (`KeySpace.upToNextSpace`) first fills `DS` to its size from the head of
//!   `SS`; we do the same, the fill counting towards the `|DS|max` moves.
//! * **Ties in Algorithm 3.** The pseudocode swaps when `Lio ≥ Fio`; the text says "the
//!   items with higher occurrence are promoted" and the authors' code swaps only when the
//!   first of `SS` is strictly higher. We take strictly higher, so equal counts never
//!   ping-pong.
//! * **Sorting.** By count, largest first, stable: equal counts keep their order in the
//!   space (as Java's `Collections.sort` in the authors' code). New baby items enter at the
//!   tail, promoted items at the head of their new space, demoted ones at the tail.
//! * **Truncating the baby space** ("truncate BS to discard quite new items"): to its size,
//!   `⌊expected_keys/2⌋`, after sorting, as the authors' `truncateBabySpace`. The baby space
//!   is unbounded between cycles (Section 4.1.2), so it holds at most that size plus the
//!   keys demoted to it plus one window's new keys.
//! * **Where the width lives.** Section 4.1.1 puts "the list of machines" in the Key Item;
//!   Section 4.4 keeps only widths above 2. We keep the width in the Key Item (2 by
//!   default), so a key discarded by the baby truncation starts again from 2. Scale out is
//!   only possible in the old space, but a key demoted from it keeps its width and can
//!   still scale down (Algorithm 6 does not test the old space).
//! * **Percent loads and comparisons.** `L_w` is the count of tuples this source sent to
//!   `w` (the loads of all sources when the load vector is shared), `ΣL` their sum before
//!   the tuple. The threshold test is `100.0·L_w / ΣL < Ls` in `f64` (0 when `ΣL = 0`); the
//!   least load and the scale-out comparison `LLnew < LLmin` compare the integer counts,
//!   which orders the same percentages exactly. The authors' code truncates both loads and
//!   threshold to integers; Table 1 prints real thresholds, which we use.
//! * **The maximum of Table 1.** "We limit the number of machines that can be selected for
//!   a key": the width never exceeds `max_machines(n) = min(n, ⌊100/Ls⌋ + 1)`, which
//!   reproduces the printed column (5, 8, 14, 30, 51). It is what the scale-out rule itself
//!   allows: `N_m` machines all at `≥ Ls` percent need `N_m·Ls ≤ 100`. The cap only guards
//!   against rounding.
//! * **Counting.** A Key Item counts occurrences (1 at creation); the authors' item starts
//!   at 0, the same order. The count is updated before routing; routing reads only the
//!   space and the width, which change only at window ends and at this key's own tuples.
//! * **The per-key check interval.** The authors' code checks scaling at most once per
//!   60 s per key ("the last time Scale Out is checked", Section 4.1.1); Algorithms 4-6 do
//!   not, and we follow them: scaling is checked at every tuple.
//!
//! # Memory and time
//!
//! `state_bytes()` counts the item table, the three spaces' buffers and the load counters.
//! Between two window ends the table holds at most `⌊expected_keys/2⌋ +
//! ⌊4·expected_keys/10⌋ + ⌊expected_keys/10⌋` surviving items plus the window's new keys (at
//! most `window_tuples`); after the baby truncation the table is rehashed to fit and the
//! baby buffer shrunk, so the state falls back to about 100 bytes per surviving item (a
//! few KB at the defaults) plus the load counters.
//!
//! A tuple costs `O(N_m)`: one scan of its slice, and on a scale down a walk back over the
//! dropped candidates and one more scan (the recursion of Algorithm 4 re-scans each
//! narrower slice; the result is the same, see `choose_best_task`). With a shared load
//! vector, `ΣL` is summed over the `n` counters at each tuple. A window end sorts the
//! spaces, `O(B log B)` for a baby space of `B` items.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting};
use crate::hash::{HashFamily, Key, fingerprint};
use crate::loads::{LoadScope, LoadVector};
use crate::params::{ParamError, ParamReader, ParamSpec, ParamValue};
use crate::sketches::{ItemMap, ItemSet, map_bytes};
use crate::grouper::restore_state;

pub const DEFAULT_WINDOW_TUPLES: i64 = 15_000;
pub const DEFAULT_OLD_CYCLE_WINDOWS: i64 = 4;
pub const DEFAULT_WARMUP_WINDOWS: i64 = 1;
pub const DEFAULT_EXPECTED_KEYS: i64 = 100;
/// The largest `expected_keys`.
pub const MAX_EXPECTED_KEYS: i64 = 1 << 30;

pub const INFO: GrouperInfo = GrouperInfo {
    name: "dkg",
    title: "Dynamic Key Grouping (hot keys widen a ring slice of workers)",
    paper: "Dalabasmaz and Can, Dynamic Key Grouping: A Load Balancing Algorithm for \
            Distributed Stream Processing Engines, Hacettepe University manuscript, c. 2017 \
            (its newest reference is of 2017)",
    params: &[
        // Not shared with the other groupers' `window_tuples`: the default differs (see
        // params.rs).
        ParamSpec {
            name: "window_tuples",
            default: ParamValue::Int(DEFAULT_WINDOW_TUPLES),
            doc: "tuples per 15-second Key Space Manager cycle (baby -> teenage); \
                  end_window() closes a cycle early",
        },
        ParamSpec {
            name: "old_cycle_windows",
            default: ParamValue::Int(DEFAULT_OLD_CYCLE_WINDOWS),
            doc: "cycles per teenage -> old promotion (60 s / 15 s = 4, Section 4.1.3)",
        },
        ParamSpec {
            name: "warmup_windows",
            default: ParamValue::Int(DEFAULT_WARMUP_WINDOWS),
            doc: "cycles of cold start before any scale out (15 s / 15 s = 1, Algorithm 5); \
                  0 for none",
        },
        ParamSpec {
            name: "expected_keys",
            default: ParamValue::Int(DEFAULT_EXPECTED_KEYS),
            doc: "expected distinct keys: old, teenage and baby spaces hold 10%, 40% and 50% \
                  of it (Section 4.1.2); at least 10",
        },
    ],
    build,
    restore: restore_state::<DynamicKeyGrouping>,
};

fn build(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let window_tuples = params.int("window_tuples")?;
    let old_cycle_windows = params.int("old_cycle_windows")?;
    let warmup_windows = params.int("warmup_windows")?;
    let expected_keys = params.int("expected_keys")?;
    let settings = DkgParams { window_tuples, old_cycle_windows, warmup_windows, expected_keys };
    match DynamicKeyGrouping::new(config.hashes, config.loads, settings) {
        Ok(grouper) => Ok(Box::new(grouper)),
        Err(error) => Err(params.refuse(error)),
    }
}

/// DKG's own parameters, as documented in the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DkgParams {
    pub window_tuples: i64,
    pub old_cycle_windows: i64,
    pub warmup_windows: i64,
    pub expected_keys: i64,
}

impl Default for DkgParams {
    fn default() -> Self {
        Self {
            window_tuples: DEFAULT_WINDOW_TUPLES,
            old_cycle_windows: DEFAULT_OLD_CYCLE_WINDOWS,
            warmup_windows: DEFAULT_WARMUP_WINDOWS,
            expected_keys: DEFAULT_EXPECTED_KEYS,
        }
    }
}

/// Eq. 3: the ideal load `Li = 100/m` percent of `m` machines.
pub fn ideal_load(machines: u32) -> f64 {
    100.0 / f64::from(machines)
}

/// Eq. 4: the scale-out threshold `Ls = Li + √Li` percent.
pub fn threshold_load(machines: u32) -> f64 {
    let ideal = ideal_load(machines);
    ideal + ideal.sqrt()
}

/// Table 1's last column: the widest ring slice of a key, `min(m, ⌊100/Ls⌋ + 1)`.
///
/// A key widens only while all its machines hold `≥ Ls` percent, so `N_m` machines before
/// the last scale out need `N_m·Ls ≤ 100`.
pub fn max_machines(machines: u32) -> u32 {
    let below = (100.0 / threshold_load(machines)).floor();
    // below < m since Ls > Li = 100/m.
    (below as u32 + 1).min(machines)
}

/// One row of Table 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThresholdRow {
    pub machines: u32,
    /// `Li`, percent.
    pub ideal_load: f64,
    /// `Ls`, percent.
    pub threshold_load: f64,
    pub max_machines: u32,
}

/// Table 1 for the given machine counts; `threshold_table(&[5, 10, 20, 50, 100])` is the
/// paper's table.
pub fn threshold_table(machines: &[u32]) -> Vec<ThresholdRow> {
    machines
        .iter()
        .map(|&m| ThresholdRow {
            machines: m,
            ideal_load: ideal_load(m),
            threshold_load: threshold_load(m),
            max_machines: max_machines(m),
        })
        .collect()
}

/// The Key Space part holding a Key Item.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Baby,
    Teenage,
    Old,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug)]
struct KeyItem {
    count: u64,
    width: u32,
    space: Space,
}

/// Dynamic Key Grouping over `n` workers; see the module documentation.
#[derive(Serialize, Deserialize)]
pub struct DynamicKeyGrouping {
    hashes: HashFamily,
    loads: LoadVector,
    threshold: f64,
    max_width: u32,
    initial_width: u32,
    window_tuples: u64,
    old_cycle_windows: u64,
    warmup_windows: u64,
    old_size: usize,
    teenage_size: usize,
    baby_size: usize,
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    items: ItemMap<KeyItem>,
    baby: VecDeque<u64>,
    teenage: VecDeque<u64>,
    old: VecDeque<u64>,
    /// Tuples this source routed (the loads' sum when they are private).
    routed: u64,
    in_window: u64,
    windows_closed: u64,
}

impl DkgParams {
    /// The ranges of the module documentation; the error names the parameter and why.
    fn check(&self) -> Result<(), ParamError> {
        let DkgParams { window_tuples, old_cycle_windows, warmup_windows, expected_keys } = *self;
        if window_tuples < 1 {
            return Err(ParamError::below("window_tuples", 1, window_tuples));
        }
        if old_cycle_windows < 1 {
            return Err(ParamError::below("old_cycle_windows", 1, old_cycle_windows));
        }
        if warmup_windows < 0 {
            return Err(ParamError::below("warmup_windows", 0, warmup_windows));
        }
        if !(10..=MAX_EXPECTED_KEYS).contains(&expected_keys) {
            return Err(ParamError::not_in("expected_keys", 10, MAX_EXPECTED_KEYS, expected_keys));
        }
        Ok(())
    }
}

/// The sizes of the old, teenage and baby spaces for `expected_keys`: `⌊10%⌋`, `⌊40%⌋` and
/// `⌊50%⌋` of it, in integer arithmetic (exact in `u128` for any `u64`).
fn space_sizes(expected_keys: u64) -> (usize, usize, usize) {
    let keys = u128::from(expected_keys);
    let size = |share: u128| usize::try_from(keys * share / 10).unwrap_or(usize::MAX);
    (size(1), size(4), size(5))
}

impl DynamicKeyGrouping {
    /// Validates the parameters; the error names the parameter and why.
    pub fn new(
        hashes: HashFamily,
        loads: LoadVector,
        params: DkgParams,
    ) -> Result<Self, ParamError> {
        params.check()?;
        let DkgParams { window_tuples, old_cycle_windows, warmup_windows, expected_keys } = params;
        let workers = hashes.workers();
        let (old_size, teenage_size, baby_size) = space_sizes(expected_keys as u64);
        Ok(Self {
            hashes,
            loads,
            threshold: threshold_load(workers),
            max_width: max_machines(workers),
            initial_width: workers.min(2),
            window_tuples: window_tuples as u64,
            old_cycle_windows: old_cycle_windows as u64,
            warmup_windows: warmup_windows as u64,
            old_size,
            teenage_size,
            baby_size,
            items: ItemMap::default(),
            baby: VecDeque::new(),
            teenage: VecDeque::new(),
            old: VecDeque::new(),
            routed: 0,
            in_window: 0,
            windows_closed: 0,
        })
    }

    /// `Ls`, percent.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The widest ring slice allowed, Table 1's maximum for `n`.
    pub fn max_width(&self) -> u32 {
        self.max_width
    }

    /// The sizes of the old, teenage and baby spaces (the baby one after truncation).
    pub fn space_sizes(&self) -> (usize, usize, usize) {
        (self.old_size, self.teenage_size, self.baby_size)
    }

    /// `h_0(k) mod n`, the first worker of `key`'s ring slice (Eq. 5).
    pub fn first_worker(&self, key: Key<'_>) -> u32 {
        self.hashes.candidate(0, key)
    }

    /// `N_m` of `key`: its Key Item's width, or the initial `min(2, n)` without an item.
    pub fn width(&self, key: Key<'_>) -> u32 {
        self.items.get(&fingerprint(key)).map_or(self.initial_width, |item| item.width)
    }

    /// The candidates of `key`: the ring slice of [`Self::width`] workers from
    /// [`Self::first_worker`].
    pub fn candidates(&self, key: Key<'_>) -> Vec<u32> {
        let first = self.first_worker(key);
        (0..self.width(key)).map(|i| self.ring(first, i)).collect()
    }

    /// The space holding `key`'s Key Item, if it has one.
    pub fn space_of(&self, key: Key<'_>) -> Option<Space> {
        self.items.get(&fingerprint(key)).map(|item| item.space)
    }

    /// The occurrence count of `key`'s Key Item (0 without an item).
    pub fn count(&self, key: Key<'_>) -> u64 {
        self.items.get(&fingerprint(key)).map_or(0, |item| item.count)
    }

    /// The numbers of items in the old, teenage and baby spaces.
    pub fn space_lengths(&self) -> (usize, usize, usize) {
        (self.old.len(), self.teenage.len(), self.baby.len())
    }

    /// Windows closed so far.
    pub fn windows_closed(&self) -> u64 {
        self.windows_closed
    }

    /// Whether the warm-up is over (Algorithm 5, `isWarmUp`).
    pub fn warmed_up(&self) -> bool {
        self.windows_closed >= self.warmup_windows
    }

    #[inline]
    fn ring(&self, first: u32, offset: u32) -> u32 {
        let n = u64::from(self.hashes.workers());
        ((u64::from(first) + u64::from(offset)) % n) as u32
    }

    #[inline]
    fn total(&self) -> u64 {
        match self.loads.scope() {
            LoadScope::Private => self.routed,
            LoadScope::Shared => self.loads.total(),
        }
    }

    /// Whether a load of `load` tuples out of `total` is below `Ls` percent.
    #[inline]
    fn below_threshold(&self, load: u64, total: u64) -> bool {
        let percent = if total == 0 { 0.0 } else { 100.0 * load as f64 / total as f64 };
        percent < self.threshold
    }

    /// Algorithm 4 for a key at ring start `first` with width `width`, in the old space or
    /// not: the chosen worker and the new width.
    fn choose_best_task(&self, first: u32, mut width: u32, in_old: bool) -> (u32, u32) {
        let total = self.total();
        let (mut best, mut best_load, mut below) = self.find_best_candidate(first, width, total);
        // Algorithm 5, with Table 1's cap.
        let scale_out = self.warmed_up()
            && !self.below_threshold(best_load, total)
            && in_old
            && width < self.max_width;
        if scale_out {
            let candidate = self.ring(first, width);
            if self.loads.get(candidate) < best_load {
                return (candidate, width + 1);
            }
            return (best, width);
        }
        // Algorithm 6, then chooseBestTask again, until it no longer scales down. A
        // narrower slice never scales out: it still has `NLL ≥ 2 − 1` candidates below
        // `Ls`, so its least load is below `Ls`. Dropping the last candidate lowers `NLL` by
        // its own test, so the repeated scans of the recursion reduce to one walk back.
        if width > 2 && below >= 2 {
            while width > 2 && below >= 2 {
                width -= 1;
                let dropped = self.loads.get(self.ring(first, width));
                if self.below_threshold(dropped, total) {
                    below -= 1;
                }
            }
            (best, best_load, below) = self.find_best_candidate(first, width, total);
            debug_assert!(below >= 1 && best_load < u64::MAX);
        }
        (best, width)
    }

    /// `findBestCandidate` over the slice of `width` workers from `first`: the least-loaded
    /// (ties to the first in ring order), its load, and `NLL`.
    fn find_best_candidate(&self, first: u32, width: u32, total: u64) -> (u32, u64, u32) {
        let (mut best, mut best_load, mut below) = (first, u64::MAX, 0u32);
        for offset in 0..width {
            let worker = self.ring(first, offset);
            let load = self.loads.get(worker);
            if self.below_threshold(load, total) {
                below += 1;
            }
            if load < best_load {
                best = worker;
                best_load = load;
            }
        }
        (best, best_load, below)
    }

    /// The parameters the stored ones were built from. `expected_keys` is recovered from the
    /// space sizes: the baby space's `⌊expected_keys/2⌋` leaves an even and an odd
    /// candidate, and the even one, tried first, is in range whenever the odd one is (the
    /// range's bounds are even). A count above `i64::MAX`, which no parameter gives, reads
    /// as -1 so that its range check fails.
    fn stored_params(&self) -> Result<DkgParams, String> {
        let param = |value: u64| i64::try_from(value).unwrap_or(-1);
        let sizes = (self.old_size, self.teenage_size, self.baby_size);
        let expected_keys = (0..2)
            .filter_map(|odd| u64::try_from(2 * self.baby_size as u128 + odd).ok())
            .find(|&keys| space_sizes(keys) == sizes)
            .ok_or_else(|| format!("spaces sized {sizes:?} for no expected key count"))?;
        Ok(DkgParams {
            window_tuples: param(self.window_tuples),
            old_cycle_windows: param(self.old_cycle_windows),
            warmup_windows: param(self.warmup_windows),
            expected_keys: param(expected_keys),
        })
    }

    /// The three spaces list every Key Item once, each in the space its item names, and
    /// every item was counted by routing within the width bounds of Algorithms 5 and 6.
    fn check_items(&self) -> Result<(), String> {
        let listed = self.baby.len() + self.teenage.len() + self.old.len();
        if listed != self.items.len() {
            return Err(format!("{listed} keys in the spaces for {} items", self.items.len()));
        }
        let mut seen = ItemSet::default();
        let spaces =
            [(Space::Baby, &self.baby), (Space::Teenage, &self.teenage), (Space::Old, &self.old)];
        for (space, ids) in spaces {
            for &id in ids {
                if self.items.get(&id).is_none_or(|item| item.space != space) || !seen.insert(id) {
                    return Err(format!("a {space:?} key listed without its item or twice"));
                }
            }
        }
        let mut counted = 0u64;
        for item in self.items.values() {
            // A scale out stops at the maximum, a scale down at 2 (never below the start).
            if !(self.initial_width..=self.max_width).contains(&item.width) {
                return Err(format!(
                    "a key on {} workers, not {} to {}",
                    item.width, self.initial_width, self.max_width
                ));
            }
            // An item is created by its key's tuple and counts it.
            if item.count == 0 {
                return Err("a key item that counted no tuple".to_owned());
            }
            counted = counted.saturating_add(item.count);
        }
        // Each routed tuple counts once, in its key's item.
        if counted > self.routed {
            return Err(format!("key items counting {counted} of {} tuples", self.routed));
        }
        Ok(())
    }

    /// Closes the current window: Algorithm 1, and Algorithm 2 every `old_cycle_windows`.
    fn close_window(&mut self) {
        self.in_window = 0;
        self.windows_closed += 1;
        // Algorithm 1.
        sort_by_count(&mut self.baby, &self.items);
        if self.baby.len() > self.baby_size {
            for id in self.baby.drain(self.baby_size..) {
                self.items.remove(&id);
            }
            // Rehash without the tombstones, so that the table's capacity is its size, and
            // give back the room of the window's new keys.
            self.items.shrink_to(0);
            self.baby.shrink_to_fit();
        }
        sort_by_count(&mut self.teenage, &self.items);
        promote(
            &mut self.baby,
            &mut self.teenage,
            self.teenage_size,
            Space::Teenage,
            &mut self.items,
        );
        // Algorithm 2.
        if self.windows_closed.is_multiple_of(self.old_cycle_windows) {
            sort_by_count(&mut self.teenage, &self.items);
            sort_by_count(&mut self.old, &self.items);
            promote(&mut self.teenage, &mut self.old, self.old_size, Space::Old, &mut self.items);
        }
    }
}

/// Stable sort by count, largest first. Each count is looked up once, not at every
/// comparison (`sort_by_cached_key` is stable too).
fn sort_by_count(space: &mut VecDeque<u64>, items: &ItemMap<KeyItem>) {
    let count = |id: &u64| items.get(id).map_or(0, |item| item.count);
    space.make_contiguous().sort_by_cached_key(|id| std::cmp::Reverse(count(id)));
}

/// Algorithm 3 with the authors' fill of a space that has room (see the module docs).
fn promote(
    source: &mut VecDeque<u64>,
    destination: &mut VecDeque<u64>,
    size: usize,
    to: Space,
    items: &mut ItemMap<KeyItem>,
) {
    let from = match to {
        Space::Old => Space::Teenage,
        _ => Space::Baby,
    };
    let count = |items: &ItemMap<KeyItem>, id: u64| items.get(&id).map_or(0, |item| item.count);
    let mut moves = 0;
    while destination.len() < size
        && let Some(first) = source.pop_front()
    {
        destination.push_front(first);
        set_space(items, first, to);
        moves += 1;
    }
    while moves < size {
        let (Some(&first), Some(&last)) = (source.front(), destination.back()) else { break };
        if count(items, first) <= count(items, last) {
            break;
        }
        source.pop_front();
        destination.pop_back();
        destination.push_front(first);
        source.push_back(last);
        set_space(items, first, to);
        set_space(items, last, from);
        moves += 1;
    }
}

fn set_space(items: &mut ItemMap<KeyItem>, id: u64, space: Space) {
    if let Some(item) = items.get_mut(&id) {
        item.space = space;
    }
}

impl Grouper for DynamicKeyGrouping {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn route(&mut self, key: Key<'_>) -> u32 {
        let id = fingerprint(key);
        let initial_width = self.initial_width;
        let baby = &mut self.baby;
        let item = self.items.entry(id).or_insert_with(|| {
            baby.push_back(id);
            KeyItem { count: 0, width: initial_width, space: Space::Baby }
        });
        item.count += 1;
        let (width, in_old) = (item.width, item.space == Space::Old);
        let first = self.hashes.candidate(0, key);
        let (worker, width) = self.choose_best_task(first, width, in_old);
        if let Some(item) = self.items.get_mut(&id) {
            item.width = width;
        }
        self.loads.add(worker, 1);
        self.routed += 1;
        self.in_window += 1;
        if self.in_window >= self.window_tuples {
            self.close_window();
        }
        worker
    }

    fn end_window(&mut self) {
        self.close_window();
    }

    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
        let built = built_as::<Self>(built)?;
        same_setting("hash family", &self.hashes, &built.hashes)?;
        same_setting("thresholds", &(self.threshold, self.max_width, self.initial_width), &(built.threshold, built.max_width, built.initial_width))?;
        same_setting("windows", &(self.window_tuples, self.old_cycle_windows, self.warmup_windows), &(built.window_tuples, built.old_cycle_windows, built.warmup_windows))?;
        same_setting("generation sizes", &(self.baby_size, self.teenage_size, self.old_size), &(built.baby_size, built.teenage_size, built.old_size))
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.hashes.workers();
        if self.loads.workers() != n {
            return Err(format!("{} load counters for {n} workers", self.loads.workers()));
        }
        // Derived from `n` alone by `new`, bit for bit.
        if self.threshold.to_bits() != threshold_load(n).to_bits()
            || self.max_width != max_machines(n)
            || self.initial_width != n.min(2)
        {
            return Err(format!(
                "a threshold of {} and widths {} to {} for {n} workers",
                self.threshold, self.initial_width, self.max_width
            ));
        }
        self.stored_params()?.check().map_err(|error| error.to_string())?;
        // A window closes as its last tuple is routed.
        if self.in_window >= self.window_tuples || self.in_window > self.routed {
            return Err(format!(
                "{} tuples in a window of {} after {} routed",
                self.in_window, self.window_tuples, self.routed
            ));
        }
        // Every routed tuple is on the loads, which other sources may add to when shared.
        if self.routed > self.loads.total() {
            return Err(format!(
                "{} tuples routed onto loads of {}",
                self.routed,
                self.loads.total()
            ));
        }
        // The next window end must be able to count itself.
        if self.windows_closed == u64::MAX {
            return Err("a window count that cannot grow".to_owned());
        }
        // Promotion fills the old and teenage spaces to their sizes, never past; the baby
        // space is truncated to its size at each window end and then gains one new key at
        // most per tuple.
        if self.old.len() > self.old_size
            || self.teenage.len() > self.teenage_size
            || self.baby.len() as u64 > self.baby_size as u64 + self.in_window
        {
            return Err(format!(
                "spaces of {}, {} and {} keys",
                self.old.len(),
                self.teenage.len(),
                self.baby.len()
            ));
        }
        self.check_items()
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        let deque = |d: &VecDeque<u64>| d.capacity() * std::mem::size_of::<u64>();
        std::mem::size_of::<Self>()
            + map_bytes::<KeyItem>(self.items.capacity()).unwrap_or(usize::MAX)
            + deque(&self.baby)
            + deque(&self.teenage)
            + deque(&self.old)
            + self.loads.state_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grouper::assert_forgeries_refused;
    use crate::streams::Zipf;

    /// Every state routing produces passes [`Grouper::check_state`]: after each tuple and
    /// each window end, over skewed streams, widths that scale out and down, and shared
    /// loads.
    #[test]
    fn routing_leaves_states_that_pass_the_check() {
        for (workers, shared) in [(1, false), (2, false), (5, true), (16, false)] {
            let params = DkgParams {
                window_tuples: 40,
                old_cycle_windows: 2,
                warmup_windows: 1,
                expected_keys: 11,
            };
            let loads =
                if shared { LoadVector::shared(workers) } else { LoadVector::private(workers) };
            let mut dkg =
                DynamicKeyGrouping::new(HashFamily::new(3, workers), loads, params).unwrap();
            let mut zipf = Zipf::new(300, 1.4, u64::from(workers)).unwrap();
            for step in 0..3_000 {
                dkg.route(Key::Int(zipf.next_key()));
                if step % 170 == 0 {
                    dkg.end_window();
                }
                assert_eq!(dkg.check_state(), Ok(()), "{workers} workers, step {step}");
            }
            if workers == 16 {
                assert!(dkg.items.values().any(|item| item.width > 2), "some key scaled out");
            }
        }
    }

    /// A state with any one of the fields routing relies on changed is refused.
    #[test]
    fn forged_fields_are_refused() {
        let params = DkgParams { window_tuples: 40, expected_keys: 20, ..DkgParams::default() };
        let mut dkg =
            DynamicKeyGrouping::new(HashFamily::new(3, 16), LoadVector::private(16), params)
                .unwrap();
        let mut zipf = Zipf::new(300, 1.4, 2).unwrap();
        for _ in 0..1_000 {
            dkg.route(Key::Int(zipf.next_key()));
        }
        dkg.route(Key::Int(1));
        assert_eq!(dkg.check_state(), Ok(()));
        assert!(!dkg.baby.is_empty() && !dkg.old.is_empty() && dkg.in_window > 0);
        let forgeries: [fn(&mut DynamicKeyGrouping); 12] = [
            |d| d.items.get_mut(&d.old[0]).unwrap().width = d.max_width + 1,
            |d| d.items.get_mut(&d.old[0]).unwrap().width = u32::MAX,
            |d| d.items.get_mut(&d.old[0]).unwrap().space = Space::Baby,
            |d| d.baby.push_back(d.baby[0]),
            |d| d.baby.push_back(7),
            |d| d.in_window = d.window_tuples,
            |d| d.old_size += 1,
            |d| d.threshold += 1.0,
            |d| d.max_width += 1,
            |d| d.routed = d.loads.total() + 1,
            |d| d.window_tuples = 0,
            |d| d.windows_closed = u64::MAX,
        ];
        assert_forgeries_refused(&dkg, forgeries);
    }
}
