//! D-Choices, W-Choices and Round-Robin head: Nasir, De Francisci Morales, Kourtellis and
//! Serafini, "When two choices are not enough: Balancing at scale in distributed stream
//! processing", ICDE 2016 (arXiv:1510.05714).
//!
//! Specification: `docs/baselines.md`, sections "Heavy hitters", "D-Choices", "W-Choices"
//! and "Round-robin head". The three groupers share everything but the routing of head
//! keys:
//!
//! * Each source keeps a [`SpaceSaving`] summary over key [`fingerprint`]s and its tuple
//!   count `m` (the summary's total). `f̂_k` is the summary's count of `k` (its
//!   overestimate; 0 when unmonitored). The **head** is `H = {k : f̂_k / m > θ}`.
//! * **Tail** keys go exactly as [PKG](super::pkg): candidates `c1 = h_1(k) mod n` and
//!   `c2 = h_2(k) mod n`, the smaller local load, ties to `c1`; `c2` moves to
//!   `(c2 + 1) mod n` when it equals `c1` unless `distinct_candidates = false`.
//! * `d_choices`: a head key goes to the least-loaded of its `d` candidates, ties to the first
//!   in candidate order; when `d ≥ n`, to the least-loaded of all workers, ties to the lowest
//!   index. `d` is chosen by [`choose_d`].
//! * `w_choices`: a head key goes to the least-loaded of all `n` workers, ties to the lowest
//!   index.
//! * `rr_head`: head keys go round robin over all workers: one cursor per source, shared by
//!   all head keys, starting at worker 0 and advanced by each head tuple only.
//!
//! # Parameters
//!
//! * `theta` (default `0.0`, meaning the paper's `θ = 1/(5n)`, computed as
//!   `1.0 / (5.0 · n)`): the head threshold; an explicit value must lie in `(0, 1)`.
//! * `capacity` (default `0`, meaning `⌈4/θ⌉`): the counters of the summary. The spec asks
//!   for at least `⌈1/θ⌉`, and a few times more for sharper estimates; we take four times.
//!   Space-Saving overestimates by at most `m / capacity = θ·m/4`, so every key with true
//!   frequency above `θ·m` is in the head and no key at or below `3θ·m/4` is. An explicit
//!   value must be at least `⌈1/θ⌉`: then the counter a new key takes over has count at
//!   most `m/capacity ≤ θ·m`, so a head key is never evicted (the change detection below
//!   relies on it).
//! * `epsilon` (`d_choices` only, default `1e-4`, the spec's slack): in `[0, 1)`.
//! * `distinct_candidates` (default `true`, as PKG's default, Apache Storm's rule): the tail
//!   candidates, and the first two head candidates of `d_choices`.
//!
//! # Choices where the paper and spec leave room
//!
//! * **Count, then route.** Each tuple is first counted into the summary (`m` grows by one),
//!   then `f̂_k / m > θ` is tested with the counts *after* counting it. So the tuple that
//!   makes a key cross into the head is routed as a head tuple. The test is the float
//!   comparison `count as f64 > θ · m as f64`, equal to the exact comparison for `m < 2^53`.
//! * **When the head changes (`d_choices`).** After each tuple is counted, `d_choices`
//!   re-evaluates the head set (the prefix of the summary by count whose counts exceed `θ·m`).
//!   If its membership differs from the head stored at the last re-evaluation that found a
//!   change, the stored head is replaced and `d` is recomputed from it, *before* the tuple is
//!   routed, so the tuple is routed with the new `d`. Changes of `p_H` or `p_1` alone, without
//!   a change of membership, keep `d`. Between two tuples only the counted key can enter the
//!   head (other counts are unchanged while `θ·m` grows; a head key is never evicted) and no
//!   member can leave except by `θ·m` overtaking its count, so membership changed exactly when
//!   the counted key entered or the head's size differs from the stored size plus that entry;
//!   that is how it is checked, in `O(|H|)` per tuple.
//! * **Statistics for `d`.** `p_H = (Σ_{k∈H} f̂_k) / m` (one division), `p_T = 1 − p_H`,
//!   `p_1 = f̂_top / m` for the head's largest count, and `|H|` the head's size; with an
//!   empty head `p_H = p_1 = 0`, which gives `d = 2`. Before any tuple `d = min(2, n)`.
//! * **Computing `d`** ([`choose_d`]): powers with integer exponents by binary
//!   exponentiation in plain `f64` products, so the Python twin reproduces them bit for bit;
//!   `round(p_1·n)` rounds halves away from zero. If `n = 1`, `d = 1`.
//! * **Head candidates of `d_choices`.** Candidate `i` (`1 ≤ i ≤ d`) is `h_i(k) mod n`, except
//!   that candidate 2 is PKG's `c2`, moved off `c1` when `distinct_candidates` holds. The
//!   first two head candidates are then the key's two tail candidates, so a key that moves
//!   between tail and head stays within the first `D` candidates, where `D ≥ 2` is the largest
//!   `d` its head tuples saw: it reaches at most `D` workers. With
//!   `distinct_candidates = false` the candidates are exactly the paper's `h_1 … h_d`.
//! * **Colliding head candidates.** Candidates `h_i(k) mod n` may repeat, as in the paper's
//!   analysis of `d` independent hash choices: duplicates are kept, not re-hashed, so a key
//!   with collisions simply has fewer distinct workers to choose from; a repeated candidate
//!   changes nothing in the choice, ties going to its first occurrence.
//! * **θ and other papers' W-C.** Pd-Stream reports W-C's γ rising to 7.97 at z = 2.0,
//!   p = 128, without saying which θ it used; with the default `1/(5n)` W-C splits only
//!   the ~20 keys above `1/640` there and γ is 1.80, while a fixed `θ ≈ 1e-5` gives 7.69
//!   (`keysplit reproduce pdstream_wc_theta`, `docs/reproduction.md`). The default stays
//!   the spec's `1/(5n)`.
//! * **No windows.** The summary counts from the start of the stream; `end_window()` does
//!   nothing, as the paper keeps one running summary per source.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting};
use crate::hash::{HashFamily, Key, fingerprint};
use crate::loads::{LeastLoaded, LoadVector};
use crate::params::{ParamError, DISTINCT_CANDIDATES, ParamReader, ParamSpec, ParamValue};
use crate::sketches::space_saving::MAX_CAPACITY;
use crate::sketches::{ItemMap, SketchError, SpaceSaving};
use crate::grouper::restore_state;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const PAPER: &str = "Nasir et al., When two choices are not enough: Balancing at scale in \
                     distributed stream processing, ICDE 2016";

const THETA: ParamSpec = ParamSpec {
    name: "theta",
    default: ParamValue::Float(0.0),
    doc: "head threshold: a key is in the head when its estimated frequency exceeds theta; \
          0 means the paper's 1/(5n)",
};
const CAPACITY: ParamSpec = ParamSpec {
    name: "capacity",
    default: ParamValue::Int(0),
    doc: "counters of the SpaceSaving summary, at least ceil(1/theta); 0 means ceil(4/theta)",
};
const EPSILON: ParamSpec = ParamSpec {
    name: "epsilon",
    default: ParamValue::Float(1e-4),
    doc: "slack of the two inequalities that choose d, in [0, 1)",
};

pub const D_CHOICES: GrouperInfo = GrouperInfo {
    name: "d_choices",
    title: "D-Choices (head keys over d hash choices, tail keys as PKG)",
    paper: PAPER,
    params: &[THETA, CAPACITY, EPSILON, DISTINCT_CANDIDATES],
    build: build_d,
    restore: restore_state::<HeadChoices>,
};

pub const W_CHOICES: GrouperInfo = GrouperInfo {
    name: "w_choices",
    title: "W-Choices (head keys to the least-loaded worker, tail keys as PKG)",
    paper: PAPER,
    params: &[THETA, CAPACITY, DISTINCT_CANDIDATES],
    build: build_w,
    restore: restore_state::<HeadChoices>,
};

pub const RR_HEAD: GrouperInfo = GrouperInfo {
    name: "rr_head",
    title: "Round-robin head (head keys round robin, tail keys as PKG)",
    paper: PAPER,
    params: &[THETA, CAPACITY, DISTINCT_CANDIDATES],
    build: build_rr,
    restore: restore_state::<HeadChoices>,
};

/// How head keys are routed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub enum HeadRouting {
    /// The least-loaded of `d` candidates, `d` chosen with slack `epsilon`.
    DChoices { epsilon: f64 },
    /// The least-loaded of all workers.
    WChoices,
    /// Round robin over all workers.
    RoundRobin,
}

/// The resolved settings of a grouper of this family.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    pub head: HeadRouting,
    /// The head threshold `θ`, in `(0, 1)`.
    pub theta: f64,
    /// The summary's counters, at least `⌈1/θ⌉`.
    pub capacity: usize,
    pub distinct_candidates: bool,
}

impl Settings {
    /// The settings with the paper's defaults over `workers` workers.
    pub fn defaults(head: HeadRouting, workers: u32) -> Self {
        let theta = default_theta(workers);
        Self { head, theta, capacity: default_capacity(theta), distinct_candidates: true }
    }

    /// Checks decoded settings against the ranges the builder enforces.
    fn check(&self) -> Result<(), String> {
        if let HeadRouting::DChoices { epsilon } = self.head
            && !epsilon_in_range(epsilon)
        {
            return Err(format!("epsilon {epsilon}"));
        }
        if !theta_in_range(self.theta)
            || !(min_capacity(self.theta)..=MAX_CAPACITY).contains(&self.capacity)
        {
            return Err(format!("theta {} and a capacity of {}", self.theta, self.capacity));
        }
        Ok(())
    }
}

/// The paper's `θ = 1/(5n)`.
pub fn default_theta(workers: u32) -> f64 {
    1.0 / (5.0 * f64::from(workers))
}

/// `⌈4/θ⌉`, saturating.
pub fn default_capacity(theta: f64) -> usize {
    let capacity = (4.0 / theta).ceil();
    if capacity >= MAX_CAPACITY as f64 { MAX_CAPACITY.saturating_add(1) } else { capacity as usize }
}

/// `⌈1/θ⌉`, saturating: the fewest counters allowed.
pub fn min_capacity(theta: f64) -> usize {
    let capacity = (1.0 / theta).ceil();
    if capacity >= MAX_CAPACITY as f64 { MAX_CAPACITY.saturating_add(1) } else { capacity as usize }
}

/// Whether `theta` is an explicit head threshold, in `(0, 1)` (NaN is not).
fn theta_in_range(theta: f64) -> bool {
    theta > 0.0 && theta < 1.0
}

/// Whether `epsilon` is a slack of [`choose_d`], in `[0, 1)` (NaN is not).
fn epsilon_in_range(epsilon: f64) -> bool {
    (0.0..1.0).contains(&epsilon)
}

/// `d_choices`: the most keys the head can hold, the room reserved for it. The head's
/// counts each exceed `θ·m` and sum to at most `m`, so `|H| < 1/θ`.
fn head_room(settings: &Settings) -> usize {
    min_capacity(settings.theta).min(settings.capacity)
}

/// The `d` of `w_choices` and `rr_head`, and of `d_choices` before its first head: PKG's two
/// choices, or the one worker.
fn pkg_d(workers: u32) -> u32 {
    workers.min(2)
}

/// Every `d` that [`choose_d`] can return for `workers` workers.
fn d_range(workers: u32) -> std::ops::RangeInclusive<u32> {
    pkg_d(workers)..=workers
}

fn build_d(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let epsilon = params.float("epsilon")?;
    if !epsilon_in_range(epsilon) {
        return Err(params.out_of_range("epsilon", format!("must be in [0, 1), got {epsilon}")));
    }
    build_with(config, params, HeadRouting::DChoices { epsilon })
}

fn build_w(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    build_with(config, params, HeadRouting::WChoices)
}

fn build_rr(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    build_with(config, params, HeadRouting::RoundRobin)
}

fn build_with(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
    head: HeadRouting,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let theta = match params.float("theta")? {
        0.0 => default_theta(config.workers),
        t if theta_in_range(t) => t,
        t => {
            return Err(params
                .out_of_range("theta", format!("must be in (0, 1), or 0 for 1/(5n), got {t}")));
        }
    };
    let least = min_capacity(theta);
    let capacity = match params.int("capacity")? {
        0 => default_capacity(theta),
        c if c > 0 && (c as u64) >= least as u64 => c as usize,
        c => {
            return Err(params.out_of_range(
                "capacity",
                format!(
                    "must be at least ceil(1/theta) = {least}, or 0 for ceil(4/theta), got {c}"
                ),
            ));
        }
    };
    // Left at its default, the capacity follows theta: a summary too large is theta's fault.
    let blame = if params.given("capacity") { "capacity" } else { "theta" };
    if capacity > MAX_CAPACITY {
        return Err(params.out_of_range(
            blame,
            format!(
                "needs a summary of at most {MAX_CAPACITY} counters, got {capacity} (theta = \
                 {theta} needs at least {least})"
            ),
        ));
    }
    let distinct_candidates = params.bool("distinct_candidates")?;
    let settings = Settings { head, theta, capacity, distinct_candidates };
    match HeadChoices::new(config.hashes, config.loads, settings) {
        Ok(grouper) => Ok(Box::new(grouper)),
        Err(error) => Err(params.out_of_range(blame, error.reason)),
    }
}

/// `base^exp` by binary exponentiation, as the Python twin computes it.
pub fn pow_int(mut base: f64, mut exp: u64) -> f64 {
    let mut result = 1.0;
    while exp > 0 {
        if exp & 1 == 1 {
            result *= base;
        }
        base *= base;
        exp >>= 1;
    }
    result
}

/// The `d` of D-Choices for `workers` workers and a head of `head_size` keys whose
/// frequencies sum to `p_head`, the largest being `p_top`.
///
/// The smallest `d`, from `max(2, round(p_top·n))` up to `n`, for which both
/// `p_H + p_T·b_H² ≤ b_H + ε` with `b_H = 1 − ((n−1)/n)^(|H|·d)` and
/// `p_1 + (p_H − p_1)·b_1^d + p_T·b_1² ≤ b_1 + ε` with `b_1 = 1 − ((n−1)/n)^d` hold;
/// `n` if none does (and `1` when `n = 1`).
pub fn choose_d(workers: u32, head_size: usize, p_head: f64, p_top: f64, epsilon: f64) -> u32 {
    let n = f64::from(workers);
    let q = (n - 1.0) / n;
    let p_tail = 1.0 - p_head;
    let start = (p_top * n).round().max(2.0);
    if start > n {
        return workers;
    }
    for d in start as u32..=workers {
        let b_head = 1.0 - pow_int(q, head_size as u64 * u64::from(d));
        let head_ok = p_head + p_tail * b_head * b_head <= b_head + epsilon;
        let b_top = 1.0 - pow_int(q, u64::from(d));
        let top_ok =
            p_top + (p_head - p_top) * pow_int(b_top, u64::from(d)) + p_tail * b_top * b_top
                <= b_top + epsilon;
        if head_ok && top_ok {
            return d;
        }
    }
    workers
}

/// The members of `d_choices`' stored head by the count each had when last looked at,
/// smallest first, and the sum of their counts now.
///
/// Members' counts only grow (a head key is never evicted) and `θ·m` only grows, so a
/// member can leave only once `θ·m` reaches its count, and no member can while `θ·m` is
/// below the smallest recorded count. A member found still above is pushed back with its
/// current count: each push raises its record, so pushes are at most the tuples counted.
#[derive(Default)]
struct HeadIndex {
    by_count: BinaryHeap<Reverse<(u64, u64)>>,
    /// `Σ_{k∈H} f̂_k`, kept exactly.
    sum: u64,
    built: bool,
    leavers: Vec<u64>,
}

/// D-Choices, W-Choices or Round-robin head, as [`Settings::head`] says.
#[derive(Serialize, Deserialize)]
pub struct HeadChoices {
    hashes: HashFamily,
    settings: Settings,
    summary: SpaceSaving,
    /// `d_choices`: the head at the last change, as sorted fingerprints; room for `⌈1/θ⌉`.
    head: Vec<u64>,
    /// `d_choices`: the `d` in force.
    d: u32,
    /// `rr_head`: the next worker of the round robin.
    next_head_worker: u32,
    loads: LoadVector,
    /// `d_choices`: the stored head ordered by count, for finding who leaves without a walk
    /// of the whole head. Derived, rebuilt from `head` and the summary after a restore.
    #[serde(skip)]
    head_index: HeadIndex,
    #[serde(skip)]
    least_loaded: LeastLoaded,
    /// `d_choices`: the first candidates of each head key, as many as the largest `d` it
    /// was routed with, by fingerprint; an entry goes when its key leaves the head. Derived,
    /// empty after a restore. Hashing `d` candidates per head tuple was most of the cost.
    #[serde(skip)]
    head_candidates: ItemMap<Vec<u32>>,
}

impl HeadChoices {
    /// Fails with the parameter out of range and why, or when the summary cannot be
    /// allocated.
    pub fn new(
        hashes: HashFamily,
        loads: LoadVector,
        settings: Settings,
    ) -> Result<Self, ParamError> {
        if !theta_in_range(settings.theta) {
            return Err(ParamError::new(
                "theta",
                format!("must be in (0, 1), got {}", settings.theta),
            ));
        }
        if settings.capacity < min_capacity(settings.theta) {
            return Err(ParamError::below(
                "capacity",
                format_args!("ceil(1/theta) = {}", min_capacity(settings.theta)),
                settings.capacity,
            ));
        }
        let summary = SpaceSaving::new(settings.capacity).map_err(|e| match e {
            SketchError::Parameter { reason, .. } => ParamError::new("capacity", reason),
            other => ParamError::new("capacity", other.to_string()),
        })?;
        let mut head = Vec::new();
        if let HeadRouting::DChoices { .. } = settings.head {
            let room = head_room(&settings);
            head.try_reserve_exact(room)
                .map_err(|_| ParamError::new("theta", format!("cannot allocate a head of {room}")))?;
        }
        let workers = hashes.workers();
        let d = match settings.head {
            HeadRouting::DChoices { epsilon } => choose_d(workers, 0, 0.0, 0.0, epsilon),
            _ => pkg_d(workers),
        };
        Ok(Self {
            hashes,
            settings,
            summary,
            head,
            d,
            next_head_worker: 0,
            loads,
            head_index: HeadIndex::default(),
            least_loaded: LeastLoaded::default(),
            head_candidates: ItemMap::default(),
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The `d` in force: the one the last routed tuple used, if it was a head tuple of
    /// `d_choices`, and the next one will use unless the head changes. Always `min(2, n)` for
    /// `w_choices` and `rr_head`.
    pub fn d(&self) -> u32 {
        self.d
    }

    /// `d_choices`: the head as of the last change, as sorted fingerprints.
    pub fn head(&self) -> &[u64] {
        &self.head
    }

    /// Whether `key` is in the head now: `f̂_k / m > θ`.
    pub fn is_head(&self, key: Key<'_>) -> bool {
        let count = self.summary.estimate(fingerprint(key)).map_or(0, |c| c.count);
        self.above_threshold(count)
    }

    pub fn summary(&self) -> &SpaceSaving {
        &self.summary
    }

    #[inline]
    fn threshold(&self) -> f64 {
        self.settings.theta * self.summary.total() as f64
    }

    #[inline]
    fn above_threshold(&self, count: u64) -> bool {
        count as f64 > self.threshold()
    }

    /// PKG's two candidates of `key`, in tie-breaking order.
    #[inline]
    pub fn pkg_candidates(&self, key: Key<'_>) -> (u32, u32) {
        self.hashes.two_candidates(key, self.settings.distinct_candidates)
    }

    /// Head candidate `i` of `d_choices`, for `1 ≤ i`.
    #[inline]
    pub fn head_candidate(&self, i: u32, key: Key<'_>) -> u32 {
        match i {
            1 => self.pkg_candidates(key).0,
            2 => self.pkg_candidates(key).1,
            _ => self.hashes.candidate(u64::from(i), key),
        }
    }

    /// `d_choices`: indexes the stored head by count, before the next tuple is counted.
    fn build_head_index(&mut self) {
        let index = &mut self.head_index;
        index.by_count.clear();
        index.sum = 0;
        for &item in &self.head {
            let count = self.summary.estimate(item).map_or(0, |c| c.count);
            index.by_count.push(Reverse((count, item)));
            index.sum += count;
        }
        index.built = true;
    }

    /// `d_choices`: re-evaluates the head after `item` was counted (to `count`) and
    /// recomputes `d` if its membership changed.
    ///
    /// The new head is the stored one less the members whose count `θ·m` reached, plus
    /// `item` if it entered: no other count changed.
    fn refresh_head(&mut self, item: u64, count: u64, in_head: bool, epsilon: f64) {
        let threshold = self.threshold();
        let member = self.head.binary_search(&item);
        let index = &mut self.head_index;
        if member.is_ok() {
            index.sum += 1;
        }
        let entered = in_head && member.is_err();
        while let Some(&Reverse((recorded, member))) = index.by_count.peek() {
            if recorded as f64 > threshold {
                break;
            }
            index.by_count.pop();
            let now = self.summary.estimate(member).map_or(0, |c| c.count);
            if now as f64 > threshold {
                index.by_count.push(Reverse((now, member)));
            } else {
                index.sum -= now;
                index.leavers.push(member);
            }
        }
        if !entered && index.leavers.is_empty() {
            return;
        }
        if !index.leavers.is_empty() {
            index.leavers.sort_unstable();
            let leavers = &index.leavers;
            self.head.retain(|member| leavers.binary_search(member).is_err());
            for leaver in leavers {
                self.head_candidates.remove(leaver);
            }
            index.leavers.clear();
        }
        if entered {
            let at = self.head.binary_search(&item).unwrap_or_else(|at| at);
            self.head.insert(at, item);
            index.by_count.push(Reverse((count, item)));
            index.sum += count;
        }
        // A head that is not empty holds the largest counter.
        let top = if self.head.is_empty() {
            0
        } else {
            self.summary.iter_by_count().next().map_or(0, |(_, c)| c.count)
        };
        let m = self.summary.total() as f64;
        self.d = choose_d(
            self.hashes.workers(),
            self.head.len(),
            index.sum as f64 / m,
            top as f64 / m,
            epsilon,
        );
    }

    /// `d_choices`: checks the decoded head and `d` against the summary.
    fn check_head(&self, epsilon: f64) -> Result<(), String> {
        let n = self.hashes.workers();
        if !d_range(n).contains(&self.d) {
            return Err(format!("d = {} for {n} workers", self.d));
        }
        if self.head.len() > head_room(&self.settings) {
            return Err(format!(
                "a head of {} keys in room for {}",
                self.head.len(),
                head_room(&self.settings)
            ));
        }
        // Membership tests and insertions binary-search the head.
        if self.head.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err("a head that is not sorted and unique".to_owned());
        }
        // Each tuple re-evaluates the head: its members are exactly the monitored keys
        // whose counts are above `θ·m` now, a prefix of the summary by count.
        let member_ok = |&item: &u64| {
            self.summary.estimate(item).is_some_and(|c| self.above_threshold(c.count))
        };
        let above = self
            .summary
            .iter_by_count()
            .take_while(|(_, counter)| self.above_threshold(counter.count))
            .count();
        if !self.head.iter().all(member_ok) || above != self.head.len() {
            return Err(format!("a head of {} keys, {above} above the threshold", self.head.len()));
        }
        // `d` is recomputed whenever the membership changes, and an empty head gives the
        // `d` of no head at all.
        if self.head.is_empty() && self.d != choose_d(n, 0, 0.0, 0.0, epsilon) {
            return Err(format!("d = {} for an empty head", self.d));
        }
        Ok(())
    }

    fn route_head(&mut self, key: Key<'_>, item: u64) -> u32 {
        let workers = self.hashes.workers();
        match self.settings.head {
            HeadRouting::DChoices { .. } if self.d < workers => {
                // Candidate i depends on i and the key only, so the list hashed for the
                // largest d seen so far serves every smaller d as its prefix.
                let d = self.d as usize;
                let hashes = &self.hashes;
                let cached = self.head_candidates.entry(item).or_default();
                if cached.len() < d {
                    if cached.is_empty() {
                        let (first, second) =
                            hashes.two_candidates(key, self.settings.distinct_candidates);
                        cached.extend([first, second]);
                    }
                    let from = cached.len() as u64 + 1;
                    cached.extend((from..=d as u64).map(|i| hashes.candidate(i, key)));
                }
                self.loads.least_loaded_among(&cached[..d])
            }
            HeadRouting::DChoices { .. } | HeadRouting::WChoices => {
                self.least_loaded.of(&self.loads)
            }
            HeadRouting::RoundRobin => {
                let worker = self.next_head_worker;
                self.next_head_worker = if worker + 1 == workers { 0 } else { worker + 1 };
                worker
            }
        }
    }
}

impl Grouper for HeadChoices {
    fn name(&self) -> &'static str {
        match self.settings.head {
            HeadRouting::DChoices { .. } => D_CHOICES.name,
            HeadRouting::WChoices => W_CHOICES.name,
            HeadRouting::RoundRobin => RR_HEAD.name,
        }
    }

    fn route(&mut self, key: Key<'_>) -> u32 {
        let item = fingerprint(key);
        let d_choices = matches!(self.settings.head, HeadRouting::DChoices { .. });
        if d_choices && !self.head_index.built {
            self.build_head_index();
        }
        let count = self.summary.insert_weighted(item, 1);
        let in_head = self.above_threshold(count);
        if let HeadRouting::DChoices { epsilon } = self.settings.head {
            self.refresh_head(item, count, in_head, epsilon);
        }
        let worker = if in_head {
            self.route_head(key, item)
        } else {
            let (first, second) = self.pkg_candidates(key);
            self.loads.less_loaded_of_two(first, second)
        };
        self.loads.add(worker, 1);
        self.least_loaded.added(worker);
        worker
    }

    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
        let built = built_as::<Self>(built)?;
        same_setting("hash family", &self.hashes, &built.hashes)?;
        same_setting("settings", &self.settings, &built.settings)
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.hashes.workers();
        if self.loads.workers() != n {
            return Err(format!("{} load counters for {n} workers", self.loads.workers()));
        }
        self.settings.check()?;
        if self.summary.capacity() != self.settings.capacity {
            return Err(format!(
                "a summary of {} counters for a capacity of {}",
                self.summary.capacity(),
                self.settings.capacity
            ));
        }
        // Every tuple is counted once by the summary and once by a worker's load, which
        // other sources may share.
        if self.summary.total() > self.loads.total() {
            return Err(format!(
                "{} tuples counted of {} routed",
                self.summary.total(),
                self.loads.total()
            ));
        }
        // Only `rr_head` moves its cursor, which wraps to 0 when it reaches `n`.
        let cursor_ok = match self.settings.head {
            HeadRouting::RoundRobin => self.next_head_worker < n,
            _ => self.next_head_worker == 0,
        };
        if !cursor_ok {
            return Err(format!("a next head worker {} of {n}", self.next_head_worker));
        }
        match self.settings.head {
            HeadRouting::DChoices { epsilon } => self.check_head(epsilon),
            // Only `d_choices` keeps a head and changes `d`.
            HeadRouting::WChoices | HeadRouting::RoundRobin => {
                if self.d != pkg_d(n) || !self.head.is_empty() {
                    return Err(format!("d = {} and a head of {}", self.d, self.head.len()));
                }
                Ok(())
            }
        }
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.summary.state_bytes()
            + self.least_loaded.state_bytes()
            + self.head_index.by_count.capacity() * std::mem::size_of::<(u64, u64)>()
            + self
                .head_candidates
                .values()
                .map(|c| std::mem::size_of::<(u64, Vec<u32>)>() + c.capacity() * 4)
                .sum::<usize>()
            + self.head.capacity() * std::mem::size_of::<u64>()
            + self.loads.state_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grouper::assert_forgeries_refused;
    use crate::streams::Zipf;

    /// A grouper of each head routing after a skewed stream, whose state must pass.
    fn routed(head: HeadRouting, workers: u32) -> HeadChoices {
        let settings = Settings::defaults(head, workers);
        let loads = LoadVector::private(workers);
        let mut grouper = HeadChoices::new(HashFamily::new(3, workers), loads, settings).unwrap();
        let mut zipf = Zipf::new(500, 1.4, 9).unwrap();
        for _ in 0..3000 {
            grouper.route(Key::Int(zipf.next_key()));
            assert_eq!(grouper.check_state(), Ok(()));
        }
        grouper
    }

    #[test]
    fn check_state_refuses_each_forged_field() {
        let d_choices = || routed(HeadRouting::DChoices { epsilon: 1e-4 }, 7);
        assert!(!d_choices().head.is_empty() && d_choices().d > 2);
        let forged: [fn(&mut HeadChoices); 7] = [
            |g| g.d = 0,
            |g| g.d = 8,
            |g| g.head.reverse(),
            |g| g.head.push(u64::MAX),
            |g| g.head.clear(),
            |g| g.next_head_worker = 1,
            |g| g.settings.capacity += 1,
        ];
        assert_forgeries_refused(&d_choices(), forged);
        assert_forgeries_refused(&routed(HeadRouting::RoundRobin, 7), [|g: &mut HeadChoices| {
            g.next_head_worker = 7
        }]);
        assert_forgeries_refused(&routed(HeadRouting::WChoices, 7), [|g: &mut HeadChoices| g.d = 3]);
    }

    #[test]
    fn pow_int_matches_repeated_products() {
        assert_eq!(pow_int(0.75, 0), 1.0);
        assert_eq!(pow_int(0.5, 10), 1.0 / 1024.0);
        assert!((pow_int(0.9, 37) - 0.9f64.powi(37)).abs() < 1e-15);
    }

    #[test]
    fn an_empty_head_gives_pkg_two_choices() {
        for n in 2..50 {
            assert_eq!(choose_d(n, 0, 0.0, 0.0, 1e-4), 2);
        }
        assert_eq!(choose_d(1, 0, 0.0, 0.0, 1e-4), 1);
        assert_eq!(choose_d(1, 1, 1.0, 1.0, 1e-4), 1);
    }
}
