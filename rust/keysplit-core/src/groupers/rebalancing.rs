//! Stateful load balancing by substream reassignment: ELB (eager load balancing) and CLB
//! (correlation-based load balancing), from Guo and Zhou, "Stateful load balancing for
//! parallel stream processing", Euro-Par 2017 Workshops, LNCS 10659
//! (doi:10.1007/978-3-319-75178-8_7): Section 2 (problem, Eq. 1–2), Section 3 (ELB,
//! Algorithm 1), Section 4 (CLB, Algorithm 2), Section 5 (defaults of the evaluation). Its
//! baseline UHLB is `groupers/uhlb.rs`.
//!
//! # Model (Section 2.1)
//!
//! Keys are hashed into `p ≫ n` **substreams**: the substream of key `k` is
//! `h_0(k) mod p`, with `h_0` the grouper's first hash ([`HashFamily::hash`]`(0, k)`, the
//! 64-bit hash). A table `F: substream → worker` routes every tuple, so between two
//! rebalances each key has exactly one worker. Tuples are counted per substream in
//! **statistics windows** (the histogram `Y_t`); when a window closes the grouper may
//! rebalance, i.e. change `F`, which moves the state of every reassigned substream.
//!
//! # Parameters and defaults
//!
//! * `substreams` (`p`), default `0` = auto = `10·n`, capped at [`MAX_SUBSTREAMS`]. The
//!   paper asks `p ≫ n` and `p = O(n)`; its synthetic streams use 100 substreams for
//!   `n = 10` (Section 5), hence `10·n`. An explicit value must be in `1..=MAX_SUBSTREAMS`.
//! * `window_tuples`, default `600000`: the statistics window `Δ`. The paper uses 1-minute
//!   windows (Section 5.1) at a Poisson rate `λ = 10000` tuples/s, i.e. 600 000 tuples. The
//!   window closes after `window_tuples` routed tuples, or early on
//!   [`Grouper::end_window`], so a caller can drive event-time windows. The tuple that
//!   fills a window is routed with the old table and counted in that window; the rebalance
//!   applies from the next tuple on.
//! * ELB `tolerance` `δ`, default `0.1`: the load bounds are `v = l̄ − ε`, `u = l̄ + ε` with
//!   `ε = δ·l̄` and `l̄ = w/n` the mean load of the window. See the ambiguities below.
//! * CLB `period_windows` `m`, default `24`: CLB rebalances every `m` windows. The paper's
//!   evaluation has 120 windows and "5 load balancing in total" (Section 5.1): `m = 24`.
//! * CLB `covariance_threshold` `θ`, default `0.0`: Algorithm 2's threshold, `0 ≤ θ < 1`
//!   (Section 4); the paper gives its range, not its value, and we take the lower end.
//!
//! # State movements (Eq. 2)
//!
//! Every rebalance records `ψ(F_1, F_2) = Σ_i x_i·d_i`, `x_i = 1` when substream `i`
//! changes worker. We define `d_i`, the state size of substream `i`, as **the number of
//! tuples of substream `i` in the statistics window that just closed** (the state of a
//! windowed operator such as the paper's WordCounter over 1-minute windows, Section 5.2).
//! [`Elb::last_movement`] / [`Elb::total_movement`] (and the same on [`Clb`]) expose `ψ`
//! of the last rebalance and cumulated over all rebalances.
//!
//! # Initial assignment
//!
//! The paper does not give one. We use round robin, `F(i) = i mod n`: with `p = 10·n`
//! every worker starts with `10` substreams.
//!
//! # ELB (Section 3, Algorithm 1), as implemented
//!
//! At the end of every window with `w > 0` tuples, with loads `L_j = Σ_{F(i)=j} y_i`:
//!
//! 0. If every `L_j ∈ [v, u]`, nothing moves (the relaxation to `[v, u]` is what lets ELB
//!    move little).
//! 1. Phase 1. The number of instances stays `n` (`π = ⌈2w/(u+v)⌉ = n` since `u + v = 2l̄`;
//!    the paper also fixes `n` in its evaluation), so the sets `R` of removed instances and
//!    the added empty instances are empty. `OI` = workers with `L_j > u`, in descending
//!    load order (ties: lower index first).
//! 2. Phase 2. For each `j ∈ OI`, traverse its substreams in descending `y_i` (ties: lower
//!    substream first) once; remove into `PQ` every `y_i` with `0 < y_i ≤ θ_j`,
//!    `θ_j = min(L_j − l̄, ε)`, updating `L_j` and `θ_j` after each removal. Empty
//!    substreams are never moved (they move state without moving load).
//! 3. Phase 3. `UI` = workers with `L_j < l̄` after phase 2. `PQ` is drained largest first
//!    (ties: lower substream first); each substream goes to the least-loaded worker of `UI`
//!    that can hold it (`L_j + y_i ≤ u`; ties: lowest index); if none can, to the
//!    least-loaded worker of `UI`, or, `UI` empty, the least-loaded worker overall. A
//!    worker that gets over `u` leaves `UI`.
//! 4. Repair (ours, see below). While some worker is outside `[v, u]`: let `b` be the
//!    least-loaded worker (ties: lowest index). The donors are the other workers over `u`,
//!    or all the other workers when `L_b < v`, in descending load (ties: lowest index).
//!    From the first donor `a` that has one, move to `b` the largest substream (ties:
//!    lowest) with `0 < y_i < L_a − L_b`, `L_a − y_i ≥ v` and `L_b + y_i ≤ u`; stop when no
//!    donor has one. Each move strictly lowers `Σ L_j²`, so this terminates. A worker left
//!    out of range then holds a substream too hot to fit (`y_i > ε`, an infeasible window).
//!
//! **Feasibility and the invariant.** The paper assumes (Section 3) that every substream's
//! load in the window is at most `(u − v)/2 = ε`. We call a window *feasible* when
//! `w > 0` and `y_i ≤ ε` for every substream `i`. Then after ELB's rebalance every worker's
//! load in that window under the new table lies in `[v, u]`. Proof: while a worker is over
//! `u` (or under `v`), the most loaded worker `a` is a donor with `L_a > l̄ ≥ L_b` and
//! `L_a − L_b > ε`, so any nonempty substream of `a` is a valid repair move
//! (`L_a − y > l̄ − ε = v`, `L_b + y < l̄ + ε = u`); the repair only stops when every worker
//! is in range. Whether an assignment in `[v, u]` exists in general is a bin-packing
//! question (NP-hard); the paper's assumption is the sufficient condition we guarantee and
//! test (`tests/rebalancing.rs`, `tests/test_rebalancing.py`).
//!
//! # CLB (Section 4, Algorithm 2), as implemented
//!
//! Every `m` windows CLB takes the series `X_i = (y_{i1}, …, y_{im})` of the `m` windows
//! closed since the last rebalance, the population covariances
//! `cov(X_i, X_j) = (m·Σ_t y_it·y_jt − Σ_t y_it·Σ_t y_jt) / m²` (computed exactly in
//! integers; `θ` is compared as `numerator ≥ θ·m²` in `f64`), and splits `S` greedily:
//!
//! * `ω_i = Σ cov(X_i, X_j)` over the `j ≠ i` of `i`'s current set with `cov ≥ θ`.
//! * A run picks the substream `k` of largest `ω_k` (ties: lowest index) among the sets of
//!   two or more substreams, and moves out of its set `S_h` into a new set `S_r` every
//!   `i ≠ k` with `cov(X_k, X_i) ≥ θ`; `k` stays in `S_h`. This follows the paper's
//!   `S_1 = {s_1} ∪ {s_i : cov(X_1, X_i) < θ}`, `S_2 = S − S_1`, and separates `k` from the
//!   substreams it covaries with, which raises the cross covariance of Eq. 5. If no `i`
//!   qualifies, `S_r = {k}` (ours: the paper's split would leave `S_r` empty).
//! * `ω` is recomputed for the members of `S_h` and `S_r` (Lines 15–18); runs repeat until
//!   there are `n` sets (or every set is a singleton, when `p < n`).
//! * Sets are numbered in creation order and given to workers so as to keep state in place
//!   (ours; the paper does not say): pairs `(set, worker)` sorted by the state
//!   `Σ d_i` of the set's substreams already on the worker, largest first (ties: lower set,
//!   then lower worker), are taken greedily; sets left over get the free workers in
//!   increasing order.
//!
//! **Observed behaviour, kept.** When every pair of substreams covaries at or above `θ`
//! (e.g. a rate that rises and falls for the whole stream), the first run isolates `k` and
//! every later run peels one more substream off the big set: `n − 1` singletons and one set
//! of the rest, far from balanced. This is the algorithm as written; the paper reports
//! CLB's imbalance an order of magnitude above UHLB's and PKG's (Section 5.1).
//!
//! Cost: covariances are computed on demand, not stored, so a CLB rebalance takes
//! `O(p²·m)` time for the initial `ω` plus `O(|S_h|²·m)` per run, and no `p × p` matrix;
//! the state is the `m` histograms, `p·m` counters. With the default `p = 10·n` this is
//! fine for the paper's scale (`n ≤ 15`) and grows quadratically beyond. An ELB rebalance
//! takes `O(p log p + |OI|·p)` plus `O(n + p)` per repair move.
//!
//! # Ambiguities and what we chose
//!
//! * `[v, u]` have no default in the paper. With a fixed `n`, `π = n` requires
//!   `(u + v)/2 = l̄`, so we centre the range on the window's mean with a relative
//!   half-width `δ` (`tolerance`, default `0.1`). With the default `p = 10·n` the mean
//!   substream carries `w/p = l̄/10 = ε`: `δ = 0.1` is the narrowest range in which an
//!   average substream meets the paper's assumption `y_i ≤ (u − v)/2`.
//! * `OI` holds the workers over `u`; `UI` the workers under the mean after phase 2.
//! * The repair phase is ours: the paper's phases 2–3 alone can leave a worker under `v`
//!   (phase 2 never takes a donor under `l̄`, and workers in range never give).
//! * Strict vs non-strict thresholds: the paper says both "at most `l_j − l̄`" and "under
//!   the threshold"; we remove `y_i ≤ θ_j`.
//! * `cov ≥ θ` uses the raw covariance of tuple counts, as written, although
//!   `0 ≤ θ < 1` would suggest a normalised one.
//! * A window closed by `end_window()` with no tuple counts as a window (of zero tuples):
//!   ELB does nothing for it, CLB includes it in its series.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting};
use crate::hash::{HashFamily, Key};
use crate::loads::LoadVector;
use crate::params::{ParamError, ParamReader, ParamSpec, ParamValue};
use crate::grouper::restore_state;
use serde::{Deserialize, Serialize};

/// The largest number of substreams.
pub const MAX_SUBSTREAMS: u64 = 1 << 20;

/// Substreams per worker when `substreams = 0` (Section 5: 100 substreams for 10 workers).
pub const AUTO_SUBSTREAMS_PER_WORKER: u64 = 10;

const SUBSTREAMS: ParamSpec = ParamSpec {
    name: "substreams",
    default: ParamValue::Int(0),
    doc: "p, the number of substreams (key -> h_0(k) mod p); 0 = auto = 10*n capped at 2^20 \
          (Section 5: 100 substreams for n = 10)",
};

// Not shared with the other groupers' `window_tuples`: the default differs (see params.rs).
const WINDOW_TUPLES: ParamSpec = ParamSpec {
    name: "window_tuples",
    default: ParamValue::Int(600_000),
    doc: "tuples per statistics window (Section 5.1: 1-minute windows at lambda = 10000 \
          tuples/s); end_window() closes a window early",
};

pub const ELB: GrouperInfo = GrouperInfo {
    name: "elb",
    title: "ELB: eager load balancing of substreams within [v, u]",
    paper: "Guo and Zhou, Stateful load balancing for parallel stream processing, Euro-Par 2017 \
            Workshops, LNCS 10659, doi:10.1007/978-3-319-75178-8_7; Section 3, Algorithm 1",
    params: &[
        SUBSTREAMS,
        WINDOW_TUPLES,
        ParamSpec {
            name: "tolerance",
            default: ParamValue::Float(0.1),
            doc: "delta: load bounds v = (1 - delta) * mean, u = (1 + delta) * mean of each \
                  window (the paper gives no default)",
        },
    ],
    build: build_elb,
    restore: restore_state::<Elb>,
};

pub const CLB: GrouperInfo = GrouperInfo {
    name: "clb",
    title: "CLB: correlation-based periodic load balancing of substreams",
    paper: "Guo and Zhou, Stateful load balancing for parallel stream processing, Euro-Par 2017 \
            Workshops, LNCS 10659, doi:10.1007/978-3-319-75178-8_7; Section 4, Algorithm 2",
    params: &[
        SUBSTREAMS,
        WINDOW_TUPLES,
        ParamSpec {
            name: "period_windows",
            default: ParamValue::Int(24),
            doc: "m: rebalance every m statistics windows (Section 5.1: 5 rebalances over \
                  120 windows)",
        },
        ParamSpec {
            name: "covariance_threshold",
            default: ParamValue::Float(0.0),
            doc: "theta in [0, 1) of Algorithm 2: substreams with cov >= theta are split apart",
        },
    ],
    build: build_clb,
    restore: restore_state::<Clb>,
};

/// The parameters both groupers share: `(p, window_tuples)`.
fn read_common(workers: u32, params: &mut ParamReader<'_>) -> Result<(usize, u64), ConfigError> {
    let p = params.int("substreams")?;
    let p = match p {
        0 => (AUTO_SUBSTREAMS_PER_WORKER * u64::from(workers)).min(MAX_SUBSTREAMS),
        1.. if p as u64 <= MAX_SUBSTREAMS => p as u64,
        _ => {
            return Err(params.out_of_range(
                "substreams",
                format!("must be 0 (auto) or in [1, {MAX_SUBSTREAMS}], got {p}"),
            ));
        }
    };
    let window = params.int("window_tuples")?;
    if window < 1 {
        return Err(params.refuse(ParamError::below("window_tuples", 1, window)));
    }
    Ok((p as usize, window as u64))
}

fn build_elb(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let (p, window) = read_common(config.workers, params)?;
    let tolerance = params.float("tolerance")?;
    if !(tolerance > 0.0 && tolerance < 1.0) {
        return Err(params.out_of_range("tolerance", format!("must be in (0, 1), got {tolerance}")));
    }
    Ok(Box::new(Elb::new(config, p, window, tolerance)))
}

fn build_clb(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let (p, window) = read_common(config.workers, params)?;
    let m = params.int("period_windows")?;
    if !(1..=1 << 16).contains(&m) {
        return Err(
            params.refuse(ParamError::not_in("period_windows", 1, 65536, m))
        );
    }
    let theta = params.float("covariance_threshold")?;
    if !(0.0..1.0).contains(&theta) {
        return Err(
            params.out_of_range("covariance_threshold", format!("must be in [0, 1), got {theta}"))
        );
    }
    Ok(Box::new(Clb::new(config, p, window, m as usize, theta)))
}

/// What ELB and CLB share: the substream table, the window histogram and `ψ`.
#[derive(Serialize, Deserialize)]
struct Substreams {
    hashes: HashFamily,
    workers: u32,
    /// `F`: substream → worker.
    table: Vec<u32>,
    /// `Y_t` of the open window.
    window: Vec<u64>,
    window_count: u64,
    window_tuples: u64,
    /// `Y` of the last closed window, `d` of Eq. 2.
    last_window: Vec<u64>,
    last_movement: u64,
    total_movement: u64,
    rebalances: u64,
    loads: LoadVector,
}

impl Substreams {
    fn new(config: GrouperConfig, p: usize, window_tuples: u64) -> Self {
        let n = config.workers;
        Self {
            hashes: config.hashes,
            workers: n,
            table: (0..p).map(|i| (i % n as usize) as u32).collect(),
            window: vec![0; p],
            window_count: 0,
            window_tuples,
            last_window: vec![0; p],
            last_movement: 0,
            total_movement: 0,
            rebalances: 0,
            loads: config.loads,
        }
    }

    #[inline]
    fn substream_of(&self, key: Key<'_>) -> usize {
        (self.hashes.hash(0, key) % self.table.len() as u64) as usize
    }

    /// Routes one tuple; `true` when it fills the window.
    #[inline]
    fn route(&mut self, key: Key<'_>) -> (u32, bool) {
        let s = self.substream_of(key);
        let worker = self.table[s];
        self.window[s] += 1;
        self.window_count += 1;
        self.loads.add(worker, 1);
        (worker, self.window_count >= self.window_tuples)
    }

    /// Moves the open window to `last_window` and opens a new one.
    fn close_window(&mut self) {
        std::mem::swap(&mut self.window, &mut self.last_window);
        self.window.iter_mut().for_each(|y| *y = 0);
        self.window_count = 0;
    }

    /// The fields agree: `p` substreams in every vector, each assigned a worker in range,
    /// the open window not past its end, and `ψ`'s sum at least its last term.
    fn check_configuration(&self, built: &Self) -> Result<(), String> {
        same_setting("hash family", &self.hashes, &built.hashes)?;
        same_setting("substreams", &self.table.len(), &built.table.len())?;
        same_setting("window_tuples", &self.window_tuples, &built.window_tuples)
    }

    fn check(&self) -> Result<(), String> {
        let (n, p) = (self.workers, self.table.len());
        if n != self.hashes.workers() || n != self.loads.workers() {
            return Err(format!("{n} workers, a hash family of {}", self.hashes.workers()));
        }
        if p == 0 || self.window.len() != p || self.last_window.len() != p {
            return Err(format!(
                "{p} substreams with histograms of {} and {}",
                self.window.len(),
                self.last_window.len()
            ));
        }
        if let Some(w) = self.table.iter().find(|&&w| w >= n) {
            return Err(format!("a substream on worker {w} of {n}"));
        }
        if self.window_tuples == 0 || self.window_count >= self.window_tuples {
            return Err(format!(
                "{} tuples in a window of {}",
                self.window_count, self.window_tuples
            ));
        }
        if self.window.iter().try_fold(0u64, |sum, &y| sum.checked_add(y))
            != Some(self.window_count)
        {
            return Err("an open window whose histogram does not sum to its count".to_owned());
        }
        if self.last_movement > self.total_movement {
            return Err("a last movement above the total".to_owned());
        }
        Ok(())
    }

    /// Installs `new_table` and records `ψ` with `d = last_window`.
    fn install(&mut self, new_table: Vec<u32>) {
        let psi = movement(&self.table, &new_table, &self.last_window);
        self.table = new_table;
        self.last_movement = psi;
        self.total_movement += psi;
        self.rebalances += 1;
    }

    fn state_bytes(&self) -> usize {
        self.table.len() * 4
            + (self.window.len() + self.last_window.len()) * 8
            + self.loads.state_bytes()
    }
}

/// `ψ(F_1, F_2) = Σ_i x_i·d_i` (Eq. 2).
pub fn movement(old: &[u32], new: &[u32], d: &[u64]) -> u64 {
    old.iter().zip(new).zip(d).filter(|((a, b), _)| a != b).map(|(_, &d)| d).sum()
}

/// Worker loads `L = Aᵀ·Y` of histogram `y` under `table`.
pub fn worker_loads(y: &[u64], table: &[u32], workers: u32) -> Vec<u64> {
    let mut loads = vec![0u64; workers as usize];
    for (&yi, &w) in y.iter().zip(table) {
        loads[w as usize] += yi;
    }
    loads
}

/// The load bounds `(v, u, ε, l̄)` of ELB for a window of `w` tuples.
pub fn elb_bounds(w: u64, workers: u32, tolerance: f64) -> (f64, f64, f64, f64) {
    let mean = w as f64 / f64::from(workers);
    let eps = tolerance * mean;
    (mean - eps, mean + eps, eps, mean)
}

/// Whether ELB guarantees `[v, u]` for histogram `y`: `w > 0` and every `y_i ≤ ε`.
pub fn elb_feasible(y: &[u64], workers: u32, tolerance: f64) -> bool {
    let w: u64 = y.iter().sum();
    let (_, _, eps, _) = elb_bounds(w, workers, tolerance);
    w > 0 && y.iter().all(|&yi| yi as f64 <= eps)
}

/// Index of the least (or, `most`, the largest) load among `candidates`, lowest index on ties.
fn extreme(loads: &[u64], candidates: impl Iterator<Item = usize>, most: bool) -> Option<usize> {
    let mut best: Option<usize> = None;
    for j in candidates {
        best = match best {
            Some(b) if (most && loads[j] <= loads[b]) || (!most && loads[j] >= loads[b]) => Some(b),
            _ => Some(j),
        };
    }
    best
}

/// ELB's rebalance of `table` for window histogram `y` (module docs, phases 0–4).
pub fn elb_rebalance(y: &[u64], table: &mut [u32], workers: u32, tolerance: f64) {
    let n = workers as usize;
    let w: u64 = y.iter().sum();
    if w == 0 {
        return;
    }
    let (v, u, eps, mean) = elb_bounds(w, workers, tolerance);
    let mut loads = worker_loads(y, table, workers);
    let in_range = |l: u64| (l as f64) >= v && (l as f64) <= u;
    if loads.iter().all(|&l| in_range(l)) {
        return;
    }
    // Substreams of each worker, descending load, lower index first on ties.
    let mut order: Vec<usize> = (0..y.len()).collect();
    order.sort_by(|&a, &b| y[b].cmp(&y[a]).then(a.cmp(&b)));
    // Phase 1: the overloaded instances, in descending load.
    let mut over: Vec<usize> = (0..n).filter(|&j| loads[j] as f64 > u).collect();
    over.sort_by(|&a, &b| loads[b].cmp(&loads[a]).then(a.cmp(&b)));
    // Phase 2: identify substreams to move.
    let mut pq: Vec<usize> = Vec::new();
    for &j in &over {
        for &i in order.iter().filter(|&&i| table[i] as usize == j) {
            let theta = (loads[j] as f64 - mean).min(eps);
            if y[i] > 0 && y[i] as f64 <= theta {
                pq.push(i);
                loads[j] -= y[i];
            }
        }
    }
    // Phase 3: largest first to the least-loaded underloaded instance that can hold it.
    pq.sort_by(|&a, &b| y[b].cmp(&y[a]).then(a.cmp(&b)));
    let mut under: Vec<bool> = (0..n).map(|j| (loads[j] as f64) < mean).collect();
    for i in pq {
        let fits =
            extreme(&loads, (0..n).filter(|&j| under[j] && (loads[j] + y[i]) as f64 <= u), false);
        let j = fits
            .or_else(|| extreme(&loads, (0..n).filter(|&j| under[j]), false))
            .or_else(|| extreme(&loads, 0..n, false))
            .unwrap_or(0);
        table[i] = j as u32;
        loads[j] += y[i];
        if loads[j] as f64 > u {
            under[j] = false;
        }
    }
    // Phase 4 (repair): from the most loaded donor that can give, to the least loaded.
    // Each worker's substreams in `order`, kept as substreams move: a donor's candidates
    // without a pass over all p substreams.
    let mut rank = vec![0usize; y.len()];
    for (position, &i) in order.iter().enumerate() {
        rank[i] = position;
    }
    let mut held: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &i in &order {
        held[table[i] as usize].push(i);
    }
    while loads.iter().any(|&l| !in_range(l)) {
        let Some(b) = extreme(&loads, 0..n, false) else { break };
        let lb = loads[b];
        let mut donors: Vec<usize> =
            (0..n).filter(|&a| a != b && (loads[a] as f64 > u || (lb as f64) < v)).collect();
        donors.sort_by(|&x, &z| loads[z].cmp(&loads[x]).then(x.cmp(&z)));
        let pick = donors.iter().find_map(|&a| {
            let la = loads[a];
            held[a]
                .iter()
                .copied()
                .find(|&i| {
                    y[i] > 0
                        && y[i] < la.saturating_sub(lb)
                        && (la - y[i]) as f64 >= v
                        && ((lb + y[i]) as f64) <= u
                })
                .map(|i| (a, i))
        });
        let Some((a, i)) = pick else { break };
        let from = held[a].binary_search_by_key(&rank[i], |&k| rank[k]).expect("a holds i");
        held[a].remove(from);
        let to = held[b].binary_search_by_key(&rank[i], |&k| rank[k]).unwrap_err();
        held[b].insert(to, i);
        table[i] = b as u32;
        loads[a] -= y[i];
        loads[b] += y[i];
    }
}

/// `m²·cov(X_i, X_j)` from the `m` histograms, exactly.
fn cov_numerator(history: &[Vec<u64>], i: usize, j: usize) -> i128 {
    let m = history.len() as i128;
    let (mut sij, mut si, mut sj) = (0i128, 0i128, 0i128);
    for y in history {
        let (a, b) = (i128::from(y[i]), i128::from(y[j]));
        sij += a * b;
        si += a;
        sj += b;
    }
    m * sij - si * sj
}

/// CLB's split of the substreams into at most `workers` sets (Algorithm 2), in creation
/// order, from the histograms of the last `m` windows.
pub fn clb_split(history: &[Vec<u64>], workers: u32, theta: f64) -> Vec<Vec<usize>> {
    let p = history.first().map_or(0, Vec::len);
    if p == 0 {
        return Vec::new();
    }
    let m = history.len() as f64;
    let bound = theta * m * m;
    let correlated = |num: i128| num as f64 >= bound;
    let mut set_of = vec![0usize; p];
    let mut sets: Vec<Vec<usize>> = vec![(0..p).collect()];
    let omega_of = |i: usize, members: &[usize]| -> i128 {
        members
            .iter()
            .filter(|&&j| j != i)
            .map(|&j| cov_numerator(history, i, j))
            .filter(|&c| correlated(c))
            .sum()
    };
    let mut omega: Vec<i128> = (0..p).map(|i| omega_of(i, &sets[0])).collect();
    while sets.len() < workers as usize {
        let mut best: Option<usize> = None;
        for i in 0..p {
            if sets[set_of[i]].len() >= 2 && best.is_none_or(|b| omega[i] > omega[b]) {
                best = Some(i);
            }
        }
        let Some(k) = best else { break };
        let h = set_of[k];
        let (mut moved, kept): (Vec<usize>, Vec<usize>) =
            sets[h].iter().partition(|&&i| i != k && correlated(cov_numerator(history, k, i)));
        let kept = if moved.is_empty() {
            moved = vec![k];
            sets[h].iter().copied().filter(|&i| i != k).collect()
        } else {
            kept
        };
        let r = sets.len();
        for &i in &moved {
            set_of[i] = r;
        }
        sets[h] = kept;
        sets.push(moved);
        for s in [h, r] {
            for idx in 0..sets[s].len() {
                let i = sets[s][idx];
                omega[i] = omega_of(i, &sets[s]);
            }
        }
    }
    sets
}

/// The new table giving each set a worker, keeping state `d` in place greedily (module docs).
pub fn clb_assign(sets: &[Vec<usize>], table: &[u32], d: &[u64], workers: u32) -> Vec<u32> {
    use std::collections::BTreeMap;
    let mut overlap: BTreeMap<(usize, u32), u64> = BTreeMap::new();
    for (s, members) in sets.iter().enumerate() {
        for &i in members {
            if d[i] > 0 {
                *overlap.entry((s, table[i])).or_insert(0) += d[i];
            }
        }
    }
    let mut pairs: Vec<((usize, u32), u64)> = overlap.into_iter().collect();
    pairs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut worker_of_set: Vec<Option<u32>> = vec![None; sets.len()];
    let mut taken = vec![false; workers as usize];
    for ((s, w), _) in pairs {
        if worker_of_set[s].is_none() && !taken[w as usize] {
            worker_of_set[s] = Some(w);
            taken[w as usize] = true;
        }
    }
    let mut free = (0..workers).filter(|&w| !taken[w as usize]);
    let mut new_table = table.to_vec();
    for (s, members) in sets.iter().enumerate() {
        let w = match worker_of_set[s] {
            Some(w) => w,
            None => free.next().unwrap_or(0),
        };
        for &i in members {
            new_table[i] = w;
        }
    }
    new_table
}

/// ELB: eager load balancing at the end of every statistics window.
#[derive(Serialize, Deserialize)]
pub struct Elb {
    core: Substreams,
    tolerance: f64,
}

impl Elb {
    pub fn new(
        config: GrouperConfig,
        substreams: usize,
        window_tuples: u64,
        tolerance: f64,
    ) -> Self {
        Self { core: Substreams::new(config, substreams, window_tuples), tolerance }
    }
    fn close(&mut self) {
        self.core.close_window();
        let mut table = self.core.table.clone();
        elb_rebalance(&self.core.last_window, &mut table, self.core.workers, self.tolerance);
        self.core.install(table);
    }
}

/// CLB: correlation-based load balancing every `m` statistics windows.
#[derive(Serialize, Deserialize)]
pub struct Clb {
    core: Substreams,
    period: usize,
    theta: f64,
    /// Histograms of the windows closed since the last rebalance.
    history: Vec<Vec<u64>>,
}

impl Clb {
    pub fn new(
        config: GrouperConfig,
        substreams: usize,
        window_tuples: u64,
        period: usize,
        theta: f64,
    ) -> Self {
        Self {
            core: Substreams::new(config, substreams, window_tuples),
            period,
            theta,
            history: Vec::new(),
        }
    }
    fn close(&mut self) {
        self.core.close_window();
        self.history.push(self.core.last_window.clone());
        if self.history.len() >= self.period {
            let sets = clb_split(&self.history, self.core.workers, self.theta);
            let table =
                clb_assign(&sets, &self.core.table, &self.core.last_window, self.core.workers);
            self.core.install(table);
            self.history.clear();
        }
    }
}

macro_rules! accessors {
    ($t:ty) => {
        impl $t {
            /// `p`, the number of substreams.
            pub fn substreams(&self) -> usize {
                self.core.table.len()
            }
            /// The substream of `key`: `h_0(key) mod p`.
            pub fn substream_of(&self, key: Key<'_>) -> usize {
                self.core.substream_of(key)
            }
            /// The current table `F`: substream → worker.
            pub fn assignment(&self) -> &[u32] {
                &self.core.table
            }
            /// `Y` of the last closed window (`d` of Eq. 2 at the last rebalance).
            pub fn last_window(&self) -> &[u64] {
                &self.core.last_window
            }
            /// `ψ` of the last rebalance (Eq. 2), 0 before any.
            pub fn last_movement(&self) -> u64 {
                self.core.last_movement
            }
            /// `ψ` summed over every rebalance.
            pub fn total_movement(&self) -> u64 {
                self.core.total_movement
            }
            /// Rebalances run so far (ELB: closed windows; CLB: every `m` windows).
            pub fn rebalances(&self) -> u64 {
                self.core.rebalances
            }
        }

        impl Grouper for $t {
            fn name(&self) -> &'static str {
                self.info_name()
            }
            fn route(&mut self, key: Key<'_>) -> u32 {
                let (worker, full) = self.core.route(key);
                if full {
                    self.close();
                }
                worker
            }
            fn end_window(&mut self) {
                self.close();
            }
            fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
                let built = built_as::<Self>(built)?;
                self.core.check_configuration(&built.core)?;
                self.check_own_configuration(built)
            }
            fn check_state(&self) -> Result<(), String> {
                self.core.check()?;
                self.check_own()
            }
            fn loads(&self) -> &LoadVector {
                &self.core.loads
            }
            fn state_bytes(&self) -> usize {
                std::mem::size_of::<Self>() + self.core.state_bytes() + self.extra_state_bytes()
            }
        }
    };
}

impl Elb {
    fn info_name(&self) -> &'static str {
        ELB.name
    }
    fn check_own_configuration(&self, built: &Self) -> Result<(), String> {
        same_setting("tolerance", &self.tolerance, &built.tolerance)
    }
    fn check_own(&self) -> Result<(), String> {
        if !(self.tolerance > 0.0 && self.tolerance < 1.0) {
            return Err(format!("tolerance {}", self.tolerance));
        }
        Ok(())
    }
    fn extra_state_bytes(&self) -> usize {
        0
    }
}

impl Clb {
    fn info_name(&self) -> &'static str {
        CLB.name
    }
    fn check_own_configuration(&self, built: &Self) -> Result<(), String> {
        same_setting("period and theta", &(self.period, self.theta), &(built.period, built.theta))
    }
    fn check_own(&self) -> Result<(), String> {
        let p = self.core.table.len();
        if !(1..=1 << 16).contains(&self.period) || !(0.0..1.0).contains(&self.theta) {
            return Err(format!("period {} and covariance threshold {}", self.period, self.theta));
        }
        if self.history.len() >= self.period || self.history.iter().any(|y| y.len() != p) {
            return Err(format!(
                "{} histograms kept for a period of {}",
                self.history.len(),
                self.period
            ));
        }
        Ok(())
    }
    fn extra_state_bytes(&self) -> usize {
        self.history.capacity() * std::mem::size_of::<Vec<u64>>()
            + self.history.iter().map(|y| y.capacity() * 8).sum::<usize>()
    }
}

accessors!(Elb);
accessors!(Clb);
