//! Cardinality-aware partitioning: CM, AM, cAM and LM of Katsipoulakis, Labrinidis and
//! Chrysanthis, "A Holistic View of Stream Partitioning Costs", PVLDB 10(11), 2017.
//!
//! Followed: the cost model of Section 3.1 (Eq. 5-10), the cardinality structures of
//! Section 3.2 (naive exact sets, Section 3.2.1; HyperLogLog with the optimistic "already
//! sent" probe, Section 3.2.2), Algorithm 1 (window reset, `M` hash candidates) and the
//! `decide()` variants of Algorithms 2-5, with the setup of Section 5.1 (HLL of `2^12`
//! registers of 5 bits, `p = 0.5`) and the variants of Table 2.
//!
//! # State
//!
//! Per window, for every worker `j`: `C[j]`, the keys (fingerprints) this source sent to
//! `j` in the window, either an exact set (`cm`, `am`, `cam`, `lm`) or a
//! [`HyperLogLog`] of `2^12` registers of 5 bits (`cm_hll`, `am_hll`, `cam_hll`, `lm_hll`;
//! the paper's `-H` variants); and `L[j]`, the tuples sent to `j` in the window, read as
//! `loads.get(j)` minus its value when the window opened (so a shared load vector gives
//! the global view, as for the other groupers).
//!
//! # Routing one tuple with key `k`
//!
//! The candidates are `c_1 .. c_M`, `c_i = h_i(k) mod n`, where `c_2` moves to
//! `(c_2 + 1) mod n` when it equals `c_1` unless `distinct_candidates = false` (PKG's rule,
//! `groupers/pkg.rs`); candidates 3 and above are kept as hashed, duplicates included.
//! "Least" is always a strict comparison walked in candidate order, so ties go to the
//! first candidate, as the paper's `l_1 <= l_2` does.
//!
//! * `cm` (Algorithm 2): to the candidate with the least cardinality estimate `C[c].estimate()`.
//! * `am` (Algorithm 3): to the first candidate `c` with `C[c].contains(k)`; if none, to the
//!   candidate with the least cardinality estimate.
//! * `cam` (Algorithm 4): as `am`, but when no candidate holds `k`, to the candidate with
//!   the least window load `L[c]`.
//! * `lm` (Algorithm 5, Eq. 7-9): to the candidate with the least hybrid load
//!   `H_c = p·L'_c + (1 − p)·CL'_c`, where `L'` and `CL'` are the window loads and the
//!   cardinality estimates min-max normalised over all `n` workers (Eq. 7, 8), a metric
//!   whose maximum equals its minimum normalising to 0 for every worker.
//!
//! The tuple then counts in `L` of its worker, and `k` is added to `C` of its worker,
//! except in the "already held" branch of `am` and `cam` (Algorithms 3-4 lines 1-6 do not
//! update `C`). `contains(k)` is the set's membership for exact sets, and for HLL the
//! paper's probe: "already sent" when inserting `k` would leave the estimate unchanged
//! ([`HyperLogLog::insert_would_change_estimate`] returns false).
//!
//! # Windows
//!
//! Algorithm 1 resets `C` and `L` when a tuple's timestamp reaches the window's end. Here
//! a window is `window_tuples` tuples: it closes right after its `window_tuples`-th tuple
//! is routed; `0` means no window closes by count. [`Grouper::end_window`] closes the
//! current window at once (so a caller drives event-time windows). Closing clears every
//! `C[j]` and restarts every `L[j]` at 0; `loads()` keeps counting from the start of the
//! stream.
//!
//! # Parameters
//!
//! * `choices` (int in `[1, 32]`, default 2): `M`, the hash candidates per key. The paper
//!   presents its algorithms with two and runs 2 and 5 (Table 2: AM-5, cAM-5).
//! * `window_tuples` (int `>= 0`, default 0): tuples per window; 0, the default, closes
//!   windows only by `end_window()`. The paper's windows are of time (DEBS, GCM) or absent
//!   (TPC-H, Table 3 "N/A"), and it gives no tuple count, so by default the whole stream is
//!   one window until the caller closes it.
//! * `distinct_candidates` (bool, default true): as PKG (Apache Storm's rule).
//! * `p` (`lm`, `lm_hll` only; float in `[0, 1]`, default 0.5, Section 5.1: "to achieve
//!   unbiased load estimation"): the weight of the tuple load in Eq. 9.
//!
//! # Where the paper is ambiguous, and what we chose
//!
//! * **Normalised or raw hybrid load.** Algorithm 5 writes `p·L + (1 − p)·CL` without the
//!   primes of Eq. 9, but the text says LM "calculates hybrid load as indicated in Eq. 9",
//!   and Section 3.1.1 introduces the scaling so that neither metric dominates. We follow
//!   Eq. 9 with the normalisations of Eq. 7 and 8, over all `n` workers of the window, and
//!   take `0/0` as 0. The normalised values are `f64` divisions of the differences.
//! * **The HLL probe.** Section 3.2.2 estimates, updates a trial copy, estimates again and
//!   answers "already sent" when the two estimates are equal. We run exactly that test
//!   (`insert_would_change_estimate`, bit-for-bit equality of the estimates). Under linear
//!   counting (few distinct keys per worker) raising a register that is not empty leaves
//!   the estimate unchanged, so the probe then answers "sent" for some new keys, more often
//!   than [`HyperLogLog::maybe_contains`] would. That is the paper's optimism: AM-2-H
//!   routes such a key to that candidate without updating its sketch. A consequence,
//!   measured (tests/holistic.rs, the raw-range golden test): all workers' sketches share
//!   one register hash, so under AM-H and cAM-H a key is inserted only when its register is
//!   empty at every candidate, and any later key of that register finds it occupied and
//!   follows it. At `n = 2` each register ends up occupied at one worker at most, the
//!   sketches never leave linear counting (each near `m·ln 2 ≈ 2 839`, where CM-H's reach
//!   the true ~59 000 on the same stream), and keys are routed by register rather than by
//!   cardinality. This is the paper's mechanism as written, and consistent with AM-2-H
//!   trailing AM-2 in its Fig. 7.
//! * **HLL parameters.** Section 5.1: `2^12` registers of 5 bits, as
//!   `sketches/hyperloglog.rs` implements (raw estimate with linear counting; the paper
//!   cites Heule et al. for improvements but does not say which it used). Estimates are
//!   compared as `f64`; exact sets compare their sizes.
//! * **Duplicate candidates.** The paper's hash functions are independent, so candidates
//!   may coincide; we keep PKG's rule for `c_2` (default distinct, as in Apache Storm, the
//!   paper's reference PK) and keep duplicates among further candidates, which changes no
//!   decision (a repeated candidate loses ties to its first occurrence).
//! * **`am` and `cam` ties.** If several candidates hold `k` (only possible with HLL false
//!   positives), the first in candidate order wins, as Algorithm 3's `if / else if`.
//! * **`M = 1`** is accepted and is key grouping with bookkeeping; `M` above 32 is refused.
//! * **Table 2's `cAM`** is listed only with the naive structure; `cam_hll` is provided for
//!   symmetry, so that each of the four decision rules has an exact and a HyperLogLog form.
//!   (Section 5.1 names both affinity variants "cAM" by a typo; Algorithms 3 and 4 tell
//!   them apart.) The registry names are ours, one per rule and structure; the paper's
//!   symbols are `CM-2`, `AM-5`, `LM-2-H`, ...: `cm` with `choices = 2` is CM-2, `am_hll`
//!   is AM-2-H, and so on.
//! * **Windows without a default length.** See `window_tuples` above: the paper's count is
//!   not given, so the default is one window until `end_window()`. With exact sets and no
//!   window the sets grow with the distinct keys of the stream, as the paper's Table 4
//!   measures (all 8.1M DEBS groups in one window).
//! * **Cost.** CM, AM and cAM cost `O(M)` per tuple. LM reads the minimum and maximum of
//!   both metrics over all `n` workers (Eq. 7, 8), `O(n)` per tuple, which the paper also
//!   pays (its Fig. 13c shows LM's extra latency at 32 workers). HLL estimates are cached
//!   per worker, so reading one is `O(1)`; the probe is `O(1)`.
//!
//! # Memory
//!
//! `state_bytes()` counts the load counters, the window's starting loads (`8n` bytes), the
//! candidate buffer, and the cardinality structures: for exact sets each set's table
//! (9 bytes per slot of capacity, kept across windows), for HLL `2560` bytes per worker
//! that has received a key (sketches are allocated on a worker's first key and kept, cleared,
//! across windows) plus the cached estimates. At 32 workers the HLL variants hold about
//! 88 KB once every worker has a sketch: 81 920 bytes of registers as Table 4's 0.08 MB.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting};
use crate::hash::{HashFamily, Key, fingerprint};
use crate::loads::{LoadScope, LoadVector, first_least_by};
use crate::min_tree::MinTree;
use crate::params::{ParamError, DISTINCT_CANDIDATES, ParamReader, ParamSpec, ParamValue};
use crate::sketches::{HyperLogLog, ItemMap, map_bytes};
use crate::grouper::restore_state;
use serde::{Deserialize, Serialize};

const PAPER: &str = "Katsipoulakis, Labrinidis and Chrysanthis, A Holistic View of Stream \
                     Partitioning Costs, PVLDB 10(11), 2017";

/// HyperLogLog precision of Section 5.1: `2^12 = 4096` registers.
pub const HLL_PRECISION: u8 = 12;

/// The largest `choices` accepted.
pub const MAX_CHOICES: i64 = 32;

const CHOICES: ParamSpec = ParamSpec {
    name: "choices",
    default: ParamValue::Int(2),
    doc: "M, hash candidates per key (the paper runs 2 and 5)",
};
// Not shared with the other groupers' `window_tuples`: the default differs (see params.rs).
const WINDOW_TUPLES: ParamSpec = ParamSpec {
    name: "window_tuples",
    default: ParamValue::Int(0),
    doc: "tuples per window, after which C and L reset (Algorithm 1); 0 = only end_window() \
          closes windows",
};
const P: ParamSpec = ParamSpec {
    name: "p",
    default: ParamValue::Float(0.5),
    doc: "weight of the tuple load in the hybrid load of Eq. 9 (Section 5.1: 0.5)",
};

const COMMON: &[ParamSpec] = &[CHOICES, WINDOW_TUPLES, DISTINCT_CANDIDATES];
const HYBRID: &[ParamSpec] = &[CHOICES, WINDOW_TUPLES, DISTINCT_CANDIDATES, P];

macro_rules! info {
    ($name:literal, $title:literal, $params:expr, $algorithm:expr, $hll:expr) => {
        GrouperInfo {
            name: $name,
            title: $title,
            paper: PAPER,
            params: $params,
            build: |config, params| build(config, params, $algorithm, $hll),
            restore: restore_state::<Holistic>,
        }
    };
}

pub const CM: GrouperInfo =
    info!("cm", "CM: cardinality imbalance minimization", COMMON, Algorithm::Cm, false);
pub const AM: GrouperInfo = info!(
    "am",
    "AM: group affinity with cardinality imbalance minimization",
    COMMON,
    Algorithm::Am,
    false
);
pub const CAM: GrouperInfo =
    info!("cam", "cAM: group affinity with imbalance minimization", COMMON, Algorithm::Cam, false);
pub const LM: GrouperInfo =
    info!("lm", "LM: hybrid imbalance minimization", HYBRID, Algorithm::Lm, false);
pub const CM_HLL: GrouperInfo = info!(
    "cm_hll",
    "CM-H: cardinality imbalance minimization, HyperLogLog",
    COMMON,
    Algorithm::Cm,
    true
);
pub const AM_HLL: GrouperInfo = info!(
    "am_hll",
    "AM-H: group affinity with cardinality imbalance minimization, HyperLogLog",
    COMMON,
    Algorithm::Am,
    true
);
pub const CAM_HLL: GrouperInfo = info!(
    "cam_hll",
    "cAM-H: group affinity with imbalance minimization, HyperLogLog",
    COMMON,
    Algorithm::Cam,
    true
);
pub const LM_HLL: GrouperInfo = info!(
    "lm_hll",
    "LM-H: hybrid imbalance minimization, HyperLogLog",
    HYBRID,
    Algorithm::Lm,
    true
);

/// The `decide()` of Algorithms 2-5.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Cm,
    Am,
    Cam,
    Lm,
}

impl Algorithm {
    fn name(self, hll: bool) -> &'static str {
        match (self, hll) {
            (Algorithm::Cm, false) => CM.name,
            (Algorithm::Am, false) => AM.name,
            (Algorithm::Cam, false) => CAM.name,
            (Algorithm::Lm, false) => LM.name,
            (Algorithm::Cm, true) => CM_HLL.name,
            (Algorithm::Am, true) => AM_HLL.name,
            (Algorithm::Cam, true) => CAM_HLL.name,
            (Algorithm::Lm, true) => LM_HLL.name,
        }
    }
}

/// The family's own parameters, as documented in the module.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HolisticParams {
    pub algorithm: Algorithm,
    pub hll: bool,
    pub choices: i64,
    pub window_tuples: i64,
    pub distinct_candidates: bool,
    /// Read by LM only.
    pub p: f64,
}

impl HolisticParams {
    pub fn new(algorithm: Algorithm, hll: bool) -> Self {
        Self { algorithm, hll, choices: 2, window_tuples: 0, distinct_candidates: true, p: 0.5 }
    }
}

fn build(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
    algorithm: Algorithm,
    hll: bool,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let mut settings = HolisticParams::new(algorithm, hll);
    settings.choices = params.int("choices")?;
    settings.window_tuples = params.int("window_tuples")?;
    settings.distinct_candidates = params.bool("distinct_candidates")?;
    if algorithm == Algorithm::Lm {
        settings.p = params.float("p")?;
    }
    match Holistic::new(config.hashes, config.loads, settings) {
        Ok(grouper) => Ok(Box::new(grouper)),
        Err(error) => Err(params.refuse(error)),
    }
}

/// `C`: one cardinality structure per worker.
#[derive(Serialize, Deserialize)]
enum Cardinality {
    /// Section 3.2.1: the exact set of fingerprints sent to each worker.
    Exact(#[serde(serialize_with = "crate::sketches::serialize_sorted_each")] Vec<ItemMap<()>>),
    /// Section 3.2.2: a HyperLogLog per worker, allocated on the worker's first key, and
    /// its estimate, cached after each insertion.
    Hll { sketches: Vec<Option<HyperLogLog>>, estimates: Vec<f64> },
}

impl Cardinality {
    fn is_hll(&self) -> bool {
        matches!(self, Cardinality::Hll { .. })
    }

    fn new(workers: usize, hll: bool) -> Self {
        if hll {
            Cardinality::Hll {
                sketches: (0..workers).map(|_| None).collect(),
                estimates: vec![0.0; workers],
            }
        } else {
            Cardinality::Exact((0..workers).map(|_| ItemMap::default()).collect())
        }
    }

    /// `C[worker].estimate()`.
    #[inline]
    fn estimate(&self, worker: u32) -> f64 {
        match self {
            Cardinality::Exact(sets) => sets[worker as usize].len() as f64,
            Cardinality::Hll { estimates, .. } => estimates[worker as usize],
        }
    }

    /// `C[worker].contains(item)`: membership, or the paper's optimistic probe.
    #[inline]
    fn contains(&self, worker: u32, item: u64) -> bool {
        match self {
            Cardinality::Exact(sets) => sets[worker as usize].contains_key(&item),
            Cardinality::Hll { sketches, .. } => sketches[worker as usize]
                .as_ref()
                .is_some_and(|sketch| !sketch.insert_would_change_estimate(item)),
        }
    }

    /// `C[worker].update(item)`.
    #[inline]
    fn insert(&mut self, worker: u32, item: u64) {
        match self {
            Cardinality::Exact(sets) => {
                sets[worker as usize].insert(item, ());
            }
            Cardinality::Hll { sketches, estimates } => {
                let sketch = sketches[worker as usize].get_or_insert_with(|| {
                    HyperLogLog::new(HLL_PRECISION).expect("precision 12 is valid")
                });
                if sketch.insert_raises(item) {
                    estimates[worker as usize] = sketch.estimate();
                }
            }
        }
    }

    fn clear(&mut self) {
        match self {
            Cardinality::Exact(sets) => sets.iter_mut().for_each(ItemMap::clear),
            Cardinality::Hll { sketches, estimates } => {
                sketches.iter_mut().flatten().for_each(HyperLogLog::clear);
                estimates.fill(0.0);
            }
        }
    }

    fn state_bytes(&self) -> usize {
        match self {
            Cardinality::Exact(sets) => sets
                .iter()
                .map(|set| {
                    std::mem::size_of_val(set)
                        + map_bytes::<()>(set.capacity()).unwrap_or(usize::MAX)
                })
                .fold(0, usize::saturating_add),
            Cardinality::Hll { sketches, estimates } => {
                std::mem::size_of_val(&**sketches)
                    + sketches.iter().flatten().map(HyperLogLog::state_bytes).sum::<usize>()
                    + std::mem::size_of_val(&**estimates)
            }
        }
    }
}

/// CM, AM, cAM and LM over exact sets or HyperLogLogs.
#[derive(Serialize, Deserialize)]
pub struct Holistic {
    algorithm: Algorithm,
    hashes: HashFamily,
    loads: LoadVector,
    choices: u64,
    distinct_candidates: bool,
    p: f64,
    /// 0: no window closes by count.
    window_tuples: u64,
    /// Tuples routed in the current window.
    window_routed: u64,
    /// `loads` when the current window opened: `L[j] = loads.get(j) - window_start[j]`.
    window_start: Vec<u64>,
    cardinality: Cardinality,
    candidates: Vec<u32>,
    /// LM: Eq. 7 and 8's extremes kept up to date instead of scanned per tuple. Derived,
    /// rebuilt after a restore and when a window closes.
    #[serde(skip)]
    extremes: Extremes,
}

/// The window loads and cardinality estimates of all workers as tournament trees, for
/// LM's minima and maxima in `O(1)`.
///
/// Estimates are non-negative `f64`s, which order as their bits; the maximum is the minimum
/// of the complemented bits. Window loads only grow within a window, so their maximum is a
/// running one. The loads' tree is only used for private loads: shared ones change under
/// other sources, and are scanned.
#[derive(Default)]
struct Extremes {
    built: bool,
    loads: MinTree,
    load_max: u64,
    card_min: MinTree,
    card_max: MinTree,
}

impl Holistic {
    /// Fails with the name of the parameter out of range and why.
    pub fn new(
        hashes: HashFamily,
        loads: LoadVector,
        params: HolisticParams,
    ) -> Result<Self, ParamError> {
        if !(1..=MAX_CHOICES).contains(&params.choices) {
            return Err(ParamError::not_in("choices", 1, MAX_CHOICES, params.choices));
        }
        if params.window_tuples < 0 {
            return Err(ParamError::below("window_tuples", 0, params.window_tuples));
        }
        if !(0.0..=1.0).contains(&params.p) {
            return Err(ParamError::not_in("p", 0, 1, params.p));
        }
        let workers = loads.workers() as usize;
        Ok(Self {
            algorithm: params.algorithm,
            window_start: loads.snapshot(),
            hashes,
            loads,
            choices: params.choices as u64,
            distinct_candidates: params.distinct_candidates,
            p: params.p,
            window_tuples: params.window_tuples as u64,
            window_routed: 0,
            cardinality: Cardinality::new(workers, params.hll),
            candidates: Vec::with_capacity(params.choices as usize),
            extremes: Extremes::default(),
        })
    }

    /// The candidates `c_1 .. c_M` of `key`, in tie-breaking order.
    pub fn candidates(&self, key: Key<'_>) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.choices as usize);
        self.fill_candidates(key, &mut out);
        out
    }

    fn fill_candidates(&self, key: Key<'_>, out: &mut Vec<u32>) {
        out.clear();
        let (first, second) = self.hashes.two_candidates(key, self.distinct_candidates);
        out.push(first);
        if self.choices >= 2 {
            out.push(second);
        }
        out.extend((3..=self.choices).map(|index| self.hashes.candidate(index, key)));
    }

    /// `L[worker]`: tuples sent to `worker` in the current window.
    pub fn window_load(&self, worker: u32) -> u64 {
        self.loads.get(worker).saturating_sub(self.window_start[worker as usize])
    }

    /// `C[worker].estimate()` in the current window.
    pub fn cardinality(&self, worker: u32) -> f64 {
        self.cardinality.estimate(worker)
    }

    /// Whether `C[worker]` reports `key` as already sent in the current window.
    pub fn holds(&self, key: Key<'_>, worker: u32) -> bool {
        self.cardinality.contains(worker, fingerprint(key))
    }

    /// LM: builds the trees of [`Extremes`] from the window's loads and estimates.
    fn build_extremes(&mut self) {
        let workers = self.loads.workers();
        let window_loads: Vec<u64> = (0..workers).map(|w| self.window_load(w)).collect();
        let cards: Vec<u64> =
            (0..workers).map(|w| self.cardinality.estimate(w).to_bits()).collect();
        let extremes = &mut self.extremes;
        extremes.load_max = window_loads.iter().copied().max().unwrap_or(0);
        extremes.loads.rebuild(window_loads);
        extremes.card_min.rebuild(cards.iter().copied());
        extremes.card_max.rebuild(cards.iter().map(|&bits| !bits));
        extremes.built = true;
    }

    /// LM: keeps [`Extremes`] after `worker` got a tuple and possibly a new estimate.
    fn update_extremes(&mut self, worker: u32) {
        let extremes = &mut self.extremes;
        if !extremes.built {
            return;
        }
        let load = extremes.loads.get(worker) + 1;
        extremes.loads.increase(worker, load);
        extremes.load_max = extremes.load_max.max(load);
        let card = self.cardinality.estimate(worker);
        debug_assert!(card.is_sign_positive());
        let bits = card.to_bits();
        if extremes.card_min.get(worker) != bits {
            extremes.card_min.set(worker, bits);
            extremes.card_max.set(worker, !bits);
        }
    }

    /// Eq. 9 for every candidate, with Eq. 7 and 8 over all workers; least wins.
    fn least_hybrid(&mut self, candidates: &[u32]) -> u32 {
        if !self.extremes.built {
            self.build_extremes();
        }
        let extremes = &self.extremes;
        let (load_min, load_max) = if self.loads.scope() == LoadScope::Private {
            (extremes.loads.min_value(), extremes.load_max)
        } else {
            let (mut load_min, mut load_max) = (u64::MAX, 0);
            for (load, &start) in self.loads.iter().zip(&self.window_start) {
                let load = load.saturating_sub(start);
                load_min = load_min.min(load);
                load_max = load_max.max(load);
            }
            (load_min, load_max)
        };
        let card_min = f64::from_bits(extremes.card_min.min_value());
        let card_max = f64::from_bits(!extremes.card_max.min_value());
        let p = self.p;
        first_least_by(candidates, |worker| {
            let load = self.window_load(worker);
            let load_norm = if load_max > load_min {
                (load - load_min) as f64 / (load_max - load_min) as f64
            } else {
                0.0
            };
            let card_norm = if card_max > card_min {
                (self.cardinality.estimate(worker) - card_min) / (card_max - card_min)
            } else {
                0.0
            };
            p * load_norm + (1.0 - p) * card_norm
        })
    }

    fn decide(&mut self, item: u64, candidates: &[u32]) -> u32 {
        match self.algorithm {
            Algorithm::Am | Algorithm::Cam => {
                if let Some(&held) =
                    candidates.iter().find(|&&worker| self.cardinality.contains(worker, item))
                {
                    return held;
                }
                let worker = if self.algorithm == Algorithm::Am {
                    first_least_by(candidates, |w| self.cardinality.estimate(w))
                } else {
                    first_least_by(candidates, |w| self.window_load(w) as f64)
                };
                self.cardinality.insert(worker, item);
                worker
            }
            Algorithm::Cm => {
                let worker = first_least_by(candidates, |w| self.cardinality.estimate(w));
                self.cardinality.insert(worker, item);
                worker
            }
            Algorithm::Lm => {
                let worker = self.least_hybrid(candidates);
                self.cardinality.insert(worker, item);
                worker
            }
        }
    }

    fn close_window(&mut self) {
        self.extremes.built = false;
        self.cardinality.clear();
        self.window_start = self.loads.snapshot();
        self.window_routed = 0;
    }
}

impl Grouper for Holistic {
    fn name(&self) -> &'static str {
        self.algorithm.name(matches!(self.cardinality, Cardinality::Hll { .. }))
    }

    fn route(&mut self, key: Key<'_>) -> u32 {
        let item = fingerprint(key);
        let mut candidates = std::mem::take(&mut self.candidates);
        self.fill_candidates(key, &mut candidates);
        let worker = self.decide(item, &candidates);
        self.candidates = candidates;
        self.loads.add(worker, 1);
        if self.algorithm == Algorithm::Lm {
            self.update_extremes(worker);
        }
        self.window_routed += 1;
        if self.window_tuples > 0 && self.window_routed >= self.window_tuples {
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
        same_setting("algorithm", &self.algorithm, &built.algorithm)?;
        same_setting("choices", &(self.choices, self.distinct_candidates), &(built.choices, built.distinct_candidates))?;
        same_setting("p", &self.p, &built.p)?;
        same_setting("window_tuples", &self.window_tuples, &built.window_tuples)?;
        same_setting("hll", &self.cardinality.is_hll(), &built.cardinality.is_hll())
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.hashes.workers();
        if self.loads.workers() != n || self.window_start.len() != n as usize {
            return Err(format!(
                "{} load counters and {} window starts for {n} workers",
                self.loads.workers(),
                self.window_start.len()
            ));
        }
        if !(1..=MAX_CHOICES as u64).contains(&self.choices) || !(0.0..=1.0).contains(&self.p) {
            return Err(format!("choices {} and p {}", self.choices, self.p));
        }
        if self.window_tuples > 0 && self.window_routed >= self.window_tuples {
            return Err(format!(
                "{} tuples in a window of {}",
                self.window_routed, self.window_tuples
            ));
        }
        if (0..n).any(|j| self.window_start[j as usize] > self.loads.get(j)) {
            return Err("a window that opened above a worker's load".to_owned());
        }
        match &self.cardinality {
            Cardinality::Exact(sets) if sets.len() == n as usize => Ok(()),
            Cardinality::Hll { sketches, estimates }
                if sketches.len() == n as usize && estimates.len() == n as usize =>
            {
                // The cached estimates are the sketches' own, as every insertion leaves them.
                let cached = sketches.iter().zip(estimates).all(|(sketch, &estimate)| {
                    estimate.to_bits()
                        == sketch.as_ref().map_or(0.0, HyperLogLog::estimate).to_bits()
                });
                if cached {
                    Ok(())
                } else {
                    Err("cached estimates that are not the sketches'".to_owned())
                }
            }
            _ => Err(format!("cardinality structures for another worker count than {n}")),
        }
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.loads.state_bytes()
            + std::mem::size_of_val(&*self.window_start)
            + self.candidates.capacity() * std::mem::size_of::<u32>()
            + self.cardinality.state_bytes()
            + self.extremes.loads.state_bytes()
            + self.extremes.card_min.state_bytes()
            + self.extremes.card_max.state_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grouper::Grouper;
    use crate::streams::Zipf;

    /// LM's choice with Eq. 7 and 8 scanned over all workers, as the paper states it.
    fn lm_by_scan(lm: &Holistic, key: Key<'_>) -> u32 {
        let workers = lm.loads().workers();
        let loads: Vec<u64> = (0..workers).map(|w| lm.window_load(w)).collect();
        let cards: Vec<f64> = (0..workers).map(|w| lm.cardinality(w)).collect();
        let (load_min, load_max) = (*loads.iter().min().unwrap(), *loads.iter().max().unwrap());
        let card_min = cards.iter().copied().fold(f64::INFINITY, f64::min);
        let card_max = cards.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let hybrid = |w: u32| {
            let load = loads[w as usize];
            let load_norm = if load_max > load_min {
                (load - load_min) as f64 / (load_max - load_min) as f64
            } else {
                0.0
            };
            let card_norm = if card_max > card_min {
                (cards[w as usize] - card_min) / (card_max - card_min)
            } else {
                0.0
            };
            lm.p * load_norm + (1.0 - lm.p) * card_norm
        };
        let candidates = lm.candidates(key);
        let mut best = candidates[0];
        for &c in &candidates[1..] {
            if hybrid(c) < hybrid(best) {
                best = c;
            }
        }
        best
    }

    #[test]
    fn lm_with_kept_extremes_routes_as_the_scan() {
        for (hll, shared, workers, window_tuples) in [
            (false, false, 13, 0),
            (true, false, 64, 500),
            (false, true, 9, 300),
            (true, true, 5, 0),
        ] {
            let loads =
                if shared { LoadVector::shared(workers) } else { LoadVector::private(workers) };
            let other = loads.share();
            let mut params = HolisticParams::new(Algorithm::Lm, hll);
            params.choices = 3;
            params.window_tuples = window_tuples;
            let mut lm = Holistic::new(HashFamily::new(5, workers), loads, params).unwrap();
            let mut zipf = Zipf::new(2_000, 1.1, 3).unwrap();
            for step in 0..4_000u64 {
                let rank = zipf.next_key();
                let key = Key::Int(rank);
                let expected = lm_by_scan(&lm, key);
                assert_eq!(lm.route(key), expected, "hll {hll}, shared {shared}, step {step}");
                if let Some(other) = &other {
                    // Another source's tuples, which only a scan of shared loads sees.
                    other.add((rank % u64::from(workers)) as u32, 1);
                }
                if step == 2_500 {
                    lm.end_window();
                }
            }
        }
    }
}
