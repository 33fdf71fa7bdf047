//! Pd-Stream: Sun, Wu, Wen, Gao and Buyya, "A popularity-aware discriminative grouping
//! strategy in distributed stream computing systems", IEEE journal manuscript, 2025 (its
//! newest references are of 2025): the paper's Sections III-V.
//!
//! Followed: the sliding sampling window of Section V-B (length `N = α·n/2`, step 1), the
//! hot key probability search of Section V-C (Algorithm 1, Eq. 14-15, the probability
//! table built at start-up, Table III) and the instance assignment of Section V-D
//! (Algorithm 2, Eq. 16, the dynamic routing table of Fig. 3).
//!
//! # Routing one tuple with key `k`
//!
//! 1. The fingerprint of `k` enters the head of the window of the last `N` keys and the
//!    oldest key leaves its tail ([`SlidingWindowCounter::push`]); if no occurrence of the
//!    tail key remains in the window, its routing entry is dropped (steps 18-22).
//! 2. `n_k` is the number of occurrences of `k` in the window, the incoming tuple included.
//! 3. `n_k = 1`: a non-hot key, routed as PKG over `c1 = h_1(k) mod n`, `c2 = h_2(k) mod n`
//!    (as `groupers/pkg.rs`), to the less loaded, ties to `c1`. Nothing is recorded.
//! 4. `n_k ≥ 2`: a hot key. Its routing entry, created as `[c1, c2]` if absent, is its
//!    candidate set in insertion order. With `p̂ = table[n_k]` and `n̂ = ⌊p̂·n⌋` (Eq. 16), if
//!    `n̂` exceeds the set's size, the least-loaded of all `n` workers (lowest index on
//!    ties) joins the set unless it is already in it. The tuple goes to the least-loaded
//!    candidate, ties to the earliest in the set.
//!
//! Loads are [`LoadVector`]: the tuples this source sent, the paper's local view.
//!
//! # Parameters
//!
//! * `alpha` (int in [1, 16], default 4): the window length coefficient α of Section V-B, chosen
//!   there from Table II. `N = α·n/2` with `θ = 2/n`, so that a key of probability `≥ θ`
//!   is missing from the window with probability below `e^-α` (Eq. 10-13); α = 4 gives the
//!   paper's `N = 2n`. When `α·n` is odd, `N = ⌈α·n/2⌉`.
//! * `expected_probability` (float in (0, 1), default 0.99): `P̂_k(X_k ≥ n_k)`, the target
//!   of Algorithm 1. Table III's caption and values use 99% (see the ambiguities).
//! * `epsilon` (float in [1e-12, 1), default 1e-4): Algorithm 1's search margin ε, the
//!   paper's value (Section V-C).
//! * `distinct_candidates` (bool, default true): as in `pkg`, move `c2` to `(c2+1) mod n`
//!   when it equals `c1`, as Apache Storm does (the paper runs on Storm and Fig. 3 shows
//!   two distinct hash instances); false lets them collide, giving a one-worker set.
//!
//! No randomness is used. `end_window()` does nothing: the paper's window is a sliding
//! window counted in tuples (step 1), not an interval of time, so there is nothing to
//! close; the windows `ds^w` of Section III-C only define the metrics.
//!
//! # Where the paper is ambiguous, and what we chose
//!
//! * **α and N.** Table I calls α "the limit of the upper bound of `P_k(X_k = 0)`", but
//!   Section V-B defines it as the length coefficient in `N = α·n/2`; `e^-α` is that limit.
//!   We take the definition: `alpha` is the coefficient, `N = ⌈α·n/2⌉` (odd `α·n` rounds
//!   up so the bound of Eq. 11 still holds; `n = 1, α = 1` gives `N = 1`).
//! * **Expected probability: 99% or 99.9%.** The text says the maximum expected
//!   probability is 99.9%, Table III's caption says 99%. Only 99% reproduces the table
//!   (99.9% gives 35.1% for `n_k = 1`, not 25.0%), so the default is 0.99.
//! * **Algorithm 1's output.** Line 11 returns `p_mid`; read literally (the last midpoint
//!   computed in the loop) it gives 43.0% for `n_k = 3` where Table III prints 43.1% (the
//!   exact root is 43.049%). The midpoint of the final bracket, `(p_lower + p_upper)/2`,
//!   reproduces all sixteen values of Table III, so that is `p̂`. Fig. 3's "62.99%" for
//!   `n_k = 6` is this value, 62.997%, truncated. The search compares
//!   `P(X ≥ n_k) < P̂` with `P(X ≥ n_k)` computed in `f64` (see [`binomial_tail`]).
//! * **When `n_k` is read.** Algorithm 2 reads `n_k` (step 1) before adding the key to the
//!   window (step 18). Read literally, a key never seen before has `n_k = 0`, which is not
//!   in the table (`n_k` ranges over `1..N`, Table III) and would make every new key hot;
//!   and Fig. 3(b) makes key 6 hot when it "now appears twice", counting the incoming
//!   tuple. The architecture (Section III-C, Fig. 2) passes each tuple through the window
//!   before distributing it. So `n_k` is the count in the window after it slid over the
//!   incoming tuple: the last `N` keys, this one included, `1 ≤ n_k ≤ N`. (Reading the
//!   count before the slide and adding 1 for the incoming tuple, as the docs of
//!   [`SlidingWindowCounter`] suggest, would count over `N + 1` keys and reach `N + 1`,
//!   outside the table; the two differ only when the key leaving is the incoming key.)
//! * **"Seen once".** A key is non-hot exactly when `n_k = 1`: its only occurrence among
//!   the last `N` keys is the incoming tuple. It becomes hot at its second occurrence.
//! * **Entries of keys that cool down.** An entry is dropped only when the last occurrence
//!   of its key leaves the window (steps 20-21), never shrunk. A key whose count falls back
//!   to 1 keeps its entry but is routed by its hashes (step 2 tests `n_k`, not the table);
//!   if it turns hot again before leaving, it finds its old candidate set.
//! * **Growth.** The least-loaded worker joins only if absent ("there is no need to add
//!   additional instance"), so a set grows by at most one worker per tuple, and only while
//!   `n̂ > |C|`; `n̂ = 0` (`p̂·n < 1`) adds nothing, and `n̂` is capped at `n`.
//! * **Ties.** The least-loaded of all workers: lowest index. The target: the earliest
//!   candidate in the set's order (`c1`, `c2`, then workers in the order they joined),
//!   matching PKG's ties to `c1`.
//! * **Table at large n.** The table is built at start-up (as the paper does) when
//!   `N ≤ 16384` (`n ≤ 8192` at `α = 4`; 0.3 s at that size in a release build, 1 ms at
//!   `n = 128`). Above, it grows as counts need it: a key's count rises by one per tuple
//!   of that key, so each tuple computes at most one new entry, and a large `n` does not
//!   cost seconds of start-up. An entry is the same pure function of `n_k` either way, so
//!   routing does not change.
//! * **Range of α.** The paper takes α an integer and studies 1 to 6 (Table II); we accept
//!   `1..=16` (state grows as `α·n`; see Memory).
//! * **Time complexity.** The paper scans the window for `n_k` (`O(N)`); the window keeps
//!   counts, so `n_k` costs `O(1)`. Growing a set scans the `n` loads (`O(n)`), as the
//!   paper's "lowest load from downstream instances" does; at most once per tuple, but
//!   at `n = 2^20` a hot key that grows on most of its tuples is slow (about 10 ms each).
//!
//! # Memory
//!
//! `state_bytes()` counts the window's ring and count table, the probability table
//! (`8·N` bytes, or its computed prefix above `EAGER_TABLE_WINDOW`), the routing table (allocated up front for `N` live entries, one per
//! distinct key the window can hold, so it never grows), each candidate set's heap buffer
//! and the load counters. At `n = 128`, `α = 4` it is about 60 KB plus the candidate sets
//! (at most `4·n` bytes per hot key): measured 65 544 bytes empty and 67 144 at the peak of
//! a Zipf(1.2) stream, far below 5 MB, the bound we hold it to (just above the
//! paper's figure); the paper's ~4.5 MB (Fig. 12) measures a whole Storm executor. The state is linear in `α·n`, about 130·α bytes per
//! worker (530 MB at `α = 4`, `n = 2^20`, mostly reserved and untouched hash tables).

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting};
use crate::hash::{HashFamily, Key, fingerprint};
use crate::loads::{LeastLoaded, LoadVector};
use crate::params::{ParamError, DISTINCT_CANDIDATES, ParamReader, ParamSpec, ParamValue};
use crate::sketches::sliding_window::MAX_WINDOW;
use crate::sketches::{ItemMap, SlidingWindowCounter, item_map, item_map_bytes};
use crate::grouper::restore_state;
use serde::{Deserialize, Serialize};

pub const INFO: GrouperInfo = GrouperInfo {
    name: "pdstream",
    title: "Pd-Stream: popularity-aware discriminative grouping",
    paper: "Sun, Wu, Wen, Gao and Buyya, A popularity-aware discriminative grouping strategy \
            in distributed stream computing systems (Pd-Stream), IEEE journal manuscript, 2025 \
            (its newest references are of 2025)",
    params: &[
        ParamSpec {
            name: "alpha",
            default: ParamValue::Int(4),
            doc: "window length coefficient: the window holds N = ceil(alpha * n / 2) keys \
                  (Section V-B, Table II; alpha = 4 gives N = 2n)",
        },
        ParamSpec {
            name: "expected_probability",
            default: ParamValue::Float(0.99),
            doc: "P(X_k >= n_k) targeted by the probability search (Algorithm 1, Table III)",
        },
        ParamSpec {
            name: "epsilon",
            default: ParamValue::Float(1e-4),
            doc: "search margin of Algorithm 1 (Section V-C)",
        },
        DISTINCT_CANDIDATES,
    ],
    build,
    restore: restore_state::<PdStream>,
};

/// Windows up to this length get their whole probability table at start-up.
pub const EAGER_TABLE_WINDOW: usize = 1 << 14;

/// The largest `alpha`: Table II stops at 6 (a miss probability of 0.24%); 16 puts the
/// bound of Eq. 13 near `1e-7`. The state is about `130·α` bytes per worker, so 16 bounds
/// it near 2 GB at `n = 2^20`.
pub const MAX_ALPHA: i64 = 16;

/// The smallest search margin accepted: finer ones stall `f64` bisection.
pub const MIN_EPSILON: f64 = 1e-12;

/// The range of `alpha`.
const ALPHA: std::ops::RangeInclusive<i64> = 1..=MAX_ALPHA;

/// The range of `epsilon`.
const EPSILON: std::ops::Range<f64> = MIN_EPSILON..1.0;

/// Whether `expected_probability` is in its range, `(0, 1)`.
fn valid_expected_probability(p: f64) -> bool {
    p > 0.0 && p < 1.0
}

fn build(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let alpha = params.int("alpha")?;
    let expected_probability = params.float("expected_probability")?;
    let epsilon = params.float("epsilon")?;
    let distinct_candidates = params.bool("distinct_candidates")?;
    let settings = PdStreamParams { alpha, expected_probability, epsilon, distinct_candidates };
    match PdStream::new(config.hashes, config.loads, settings) {
        Ok(grouper) => Ok(Box::new(grouper)),
        Err(error) => Err(params.refuse(error)),
    }
}

/// Pd-Stream's own parameters, as documented in the module.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PdStreamParams {
    pub alpha: i64,
    pub expected_probability: f64,
    pub epsilon: f64,
    pub distinct_candidates: bool,
}

impl Default for PdStreamParams {
    fn default() -> Self {
        Self { alpha: 4, expected_probability: 0.99, epsilon: 1e-4, distinct_candidates: true }
    }
}

/// The window length `N = ⌈α·n/2⌉`, or `None` if it exceeds the largest window.
pub fn window_length(alpha: u64, workers: u32) -> Option<usize> {
    let length = alpha.checked_mul(u64::from(workers))?.div_ceil(2);
    usize::try_from(length).ok().filter(|&length| (1..=MAX_WINDOW).contains(&length))
}

/// `P(X ≥ at_least)` for `X ~ Binomial(trials, p)`: Eq. 15 over the PMF of Eq. 14.
///
/// Sums the smaller side of the distribution, from the term nearest the mode outwards,
/// each term from the previous by the PMF's ratio, until terms no longer change the sum;
/// the first term is `exp(ln C(N, i) + i ln p + (N − i) ln(1 − p))` with `ln C` from
/// `lgamma`. Every function is `libm`'s, so the result is the same on every machine.
/// Its absolute error is a few ulps of 1, far below the search margin.
pub fn binomial_tail(trials: u32, at_least: u32, p: f64) -> f64 {
    if at_least == 0 {
        return 1.0;
    }
    if at_least > trials || p.is_nan() || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let n = f64::from(trials);
    let q = 1.0 - p;
    let (ln_p, ln_q) = (libm::log(p), libm::log1p(-p));
    let ln_pmf = |i: u32| {
        let i = f64::from(i);
        libm::lgamma(n + 1.0) - libm::lgamma(i + 1.0) - libm::lgamma(n - i + 1.0)
            + i * ln_p
            + (n - i) * ln_q
    };
    let mode = libm::floor((n + 1.0) * p).min(n);
    if f64::from(at_least) > mode {
        // The upper tail: terms fall from i = at_least upwards.
        let mut term = libm::exp(ln_pmf(at_least));
        let mut sum = term;
        let mut i = at_least;
        while i < trials {
            term *= f64::from(trials - i) / f64::from(i + 1) * (p / q);
            i += 1;
            sum += term;
            if term <= sum * 1e-17 {
                break;
            }
        }
        sum.min(1.0)
    } else {
        // 1 − the lower tail, whose terms fall from i = at_least − 1 downwards.
        let mut term = libm::exp(ln_pmf(at_least - 1));
        let mut sum = term;
        let mut i = at_least - 1;
        while i > 0 {
            term *= f64::from(i) / f64::from(trials - i + 1) * (q / p);
            i -= 1;
            sum += term;
            if term <= sum * 1e-17 {
                break;
            }
        }
        (1.0 - sum).max(0.0)
    }
}

/// Algorithm 1: the estimated probability `p̂_k` of a key that occurs `occurrences` times
/// in a window of `window` keys, for the target `P̂(X_k ≥ n_k) = expected_probability`
/// and the margin `epsilon`.
///
/// Bisects `[0, 1]`: while `p_upper − p_lower > ε`, the midpoint becomes the lower bound
/// if `P(X ≥ n_k) < P̂` there, the upper bound otherwise. Returns the midpoint of the final
/// bracket, which reproduces Table III (see the module's ambiguities). Every bound is a
/// dyadic fraction, exact in `f64`. `epsilon` is clamped to at least [`MIN_EPSILON`].
pub fn estimate_probability(
    window: u32,
    occurrences: u32,
    expected_probability: f64,
    epsilon: f64,
) -> f64 {
    let epsilon = epsilon.max(MIN_EPSILON);
    let (mut lower, mut upper) = (0.0f64, 1.0f64);
    while upper - lower > epsilon {
        let mid = (upper + lower) / 2.0;
        if binomial_tail(window, occurrences, mid) < expected_probability {
            lower = mid;
        } else {
            upper = mid;
        }
    }
    (lower + upper) / 2.0
}

/// The probability table of Section V-C: entry `i` is `p̂` for `n_k = i + 1`, for `n_k` in
/// `1..=window`. `probability_table(16, 0.99, 1e-4)` is the paper's Table III.
pub fn probability_table(window: u32, expected_probability: f64, epsilon: f64) -> Vec<f64> {
    (1..=window)
        .map(|occurrences| estimate_probability(window, occurrences, expected_probability, epsilon))
        .collect()
}

/// Eq. 16: `n̂ = ⌊p̂·n⌋`, capped at `n`.
pub fn estimated_candidates(p_hat: f64, workers: u32) -> u32 {
    let estimate = libm::floor(p_hat * f64::from(workers));
    if estimate >= f64::from(workers) {
        workers
    } else if estimate >= 0.0 {
        estimate as u32
    } else {
        0
    }
}

/// Pd-Stream over `n` workers; see the module documentation.
#[derive(Serialize, Deserialize)]
pub struct PdStream {
    hashes: HashFamily,
    loads: LoadVector,
    distinct_candidates: bool,
    expected_probability: f64,
    epsilon: f64,
    window: SlidingWindowCounter,
    /// `p̂` for `n_k = i + 1`: all `N` entries up to [`EAGER_TABLE_WINDOW`], above it the
    /// prefix up to the largest count met so far.
    table: Vec<f64>,
    /// Hot key fingerprint -> candidate set, in the order workers joined it.
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    routes: ItemMap<Vec<u32>>,
    /// Bytes of `routes`' own table, which never grows.
    routes_bytes: usize,
    /// Bytes of the candidate sets' heap buffers.
    candidate_bytes: usize,
    #[serde(skip)]
    least_loaded: LeastLoaded,
}

impl PdStream {
    /// Validates the parameters and builds the window, the routing table and the
    /// probability table (whole when `N ≤ EAGER_TABLE_WINDOW`).
    pub fn new(
        hashes: HashFamily,
        loads: LoadVector,
        params: PdStreamParams,
    ) -> Result<Self, ParamError> {
        let PdStreamParams { alpha, expected_probability, epsilon, distinct_candidates } = params;
        let workers = hashes.workers();
        if !ALPHA.contains(&alpha) {
            return Err(ParamError::not_in("alpha", 1, MAX_ALPHA, alpha));
        }
        let length = window_length(alpha as u64, workers).ok_or_else(|| {
            ParamError::new(
                "alpha",
                format!(
                    "gives a window of alpha * n / 2 = {alpha} * {workers} / 2 keys, \
                     more than the largest window ({MAX_WINDOW})"
                ),
            )
        })?;
        if !valid_expected_probability(expected_probability) {
            return Err(ParamError::new(
                "expected_probability",
                format!("must be in (0, 1), got {expected_probability}"),
            ));
        }
        if !EPSILON.contains(&epsilon) {
            return Err(ParamError::new(
                "epsilon",
                format!("must be in [{MIN_EPSILON:e}, 1), got {epsilon}"),
            ));
        }
        let too_large = |what: &str| {
            ParamError::new(
                "alpha",
                format!("gives a window of {length} keys whose {what} cannot be allocated"),
            )
        };
        let window = SlidingWindowCounter::new(length).map_err(|_| too_large("counts"))?;
        let table = if length <= EAGER_TABLE_WINDOW {
            probability_table(length as u32, expected_probability, epsilon)
        } else {
            Vec::new()
        };
        let (routes, routes_bytes) = item_map(length).ok_or_else(|| too_large("routing table"))?;
        Ok(Self {
            hashes,
            loads,
            distinct_candidates,
            expected_probability,
            epsilon,
            window,
            table,
            routes,
            routes_bytes,
            candidate_bytes: 0,
            least_loaded: LeastLoaded::default(),
        })
    }

    /// The window length `N`.
    pub fn window_length(&self) -> usize {
        self.window.window()
    }

    /// The occurrences of `key` among the last `N` keys.
    pub fn occurrences(&self, key: Key<'_>) -> u32 {
        self.window.count(fingerprint(key))
    }

    /// The routing-table entry of `key`: its candidate set in the order workers joined it,
    /// or `None` if it has no entry (never hot, or no longer in the window).
    pub fn candidate_set(&self, key: Key<'_>) -> Option<&[u32]> {
        self.routes.get(&fingerprint(key)).map(Vec::as_slice)
    }

    /// The number of routing-table entries.
    pub fn hot_keys(&self) -> usize {
        self.routes.len()
    }

    /// `p̂` for `n_k = occurrences` (clamped to `1..=N`), from the table.
    ///
    /// A lazy table (`N > EAGER_TABLE_WINDOW`) grows to `n_k` first. A key's count rises by
    /// at most one per tuple of that key, from 1, so routing extends it by one entry at a
    /// time, and it holds as many entries as the largest count met.
    pub fn probability(&mut self, occurrences: u32) -> f64 {
        let length = self.window.window() as u32;
        let occurrences = occurrences.clamp(1, length);
        while self.table.len() < occurrences as usize {
            let next = self.table.len() as u32 + 1;
            let entry = estimate_probability(length, next, self.expected_probability, self.epsilon);
            self.table.push(entry);
        }
        self.table[occurrences as usize - 1]
    }

    /// The probability table is a prefix of Algorithm 1's values for the window, all of
    /// them when the window is eagerly tabled. Entries are recomputed as `new` computes
    /// them: all of a table of up to `EAGER_TABLE_WINDOW` entries, else that many evenly
    /// spaced ones and the last, so that a check costs at most an eager build.
    fn check_table(&self) -> Result<(), String> {
        let (length, entries) = (self.window.window(), self.table.len());
        if entries > length || (length <= EAGER_TABLE_WINDOW && entries != length) {
            return Err(format!("{entries} probabilities for a window of {length}"));
        }
        let step = entries.div_ceil(EAGER_TABLE_WINDOW).max(1);
        let checked = (0..entries).step_by(step).chain(entries.checked_sub(1));
        let (p, epsilon) = (self.expected_probability, self.epsilon);
        for index in checked {
            let occurrences = index as u32 + 1;
            let expected = estimate_probability(length as u32, occurrences, p, epsilon);
            if self.table[index].to_bits() != expected.to_bits() {
                return Err(format!(
                    "a probability of {} for {occurrences} occurrences",
                    self.table[index]
                ));
            }
        }
        Ok(())
    }

    /// Every routing entry is of a key in the window (the entry goes when the key's last
    /// occurrence leaves), and its candidate set is of distinct workers in range: two
    /// distinct hash workers at least when they are forced apart, plus joined ones.
    fn check_routes(&self) -> Result<(), String> {
        let n = self.hashes.workers();
        let smallest = if self.distinct_candidates { n.min(2) } else { 1 } as usize;
        let mut candidates = 0u64;
        // The set that last listed each worker, to find a repeat in one pass.
        let mut listed_by = vec![usize::MAX; n as usize];
        for (index, (&id, set)) in self.routes.iter().enumerate() {
            if self.window.count(id) == 0 {
                return Err("a routing entry of a key out of the window".to_owned());
            }
            if set.len() < smallest {
                return Err(format!("a candidate set of {} workers", set.len()));
            }
            for &w in set {
                match listed_by.get_mut(w as usize) {
                    Some(by) if *by != index => *by = index,
                    _ => return Err(format!("a candidate on worker {w} of {n}, or listed twice")),
                }
            }
            candidates += set.len() as u64;
        }
        // The buffers hold at least their candidates.
        if (self.candidate_bytes as u64) < candidates * WORKER_BYTES as u64 {
            return Err(format!(
                "{} bytes of candidate sets for {candidates} candidates",
                self.candidate_bytes
            ));
        }
        Ok(())
    }

    /// PKG's two candidates of `key`, in tie-breaking order.
    #[inline]
    pub fn hash_candidates(&self, key: Key<'_>) -> (u32, u32) {
        self.hashes.two_candidates(key, self.distinct_candidates)
    }
}

const WORKER_BYTES: usize = std::mem::size_of::<u32>();

impl Grouper for PdStream {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn route(&mut self, key: Key<'_>) -> u32 {
        let id = fingerprint(key);
        // Steps 18-22, done first (see the module docs): slide, then drop the entry of a
        // tail key that left the window. That key is not `key`, which the window holds.
        let push = self.window.push(id);
        if let Some((tail, 0)) = push.evicted
            && let Some(set) = self.routes.remove(&tail)
        {
            // Saturates: a restored count can fall short of the buffers, whose capacities a
            // snapshot does not hold (see `check_routes`).
            self.candidate_bytes =
                self.candidate_bytes.saturating_sub(set.capacity() * WORKER_BYTES);
        }
        let occurrences = push.count;
        let worker = if occurrences <= 1 {
            // Steps 2-3: a non-hot key, routed by its two hashes.
            let (first, second) = self.hash_candidates(key);
            self.loads.less_loaded_of_two(first, second)
        } else {
            // Steps 5-15: a hot key and its routing entry.
            let workers = self.hashes.workers();
            let wanted = estimated_candidates(self.probability(occurrences), workers);
            let (hashes, distinct) = (&self.hashes, self.distinct_candidates);
            let mut added_bytes = 0;
            let set = self.routes.entry(id).or_insert_with(|| {
                let (first, second) = hashes.two_candidates(key, distinct);
                let mut set = Vec::with_capacity(2);
                set.push(first);
                if second != first {
                    set.push(second);
                }
                added_bytes += set.capacity() * WORKER_BYTES;
                set
            });
            if wanted as usize > set.len() {
                let least_loaded = self.least_loaded.of(&self.loads);
                if !set.contains(&least_loaded) {
                    let before = set.capacity();
                    set.push(least_loaded);
                    added_bytes += (set.capacity() - before) * WORKER_BYTES;
                }
            }
            self.candidate_bytes = self.candidate_bytes.saturating_add(added_bytes);
            // Step 17: the least-loaded candidate.
            self.loads.least_loaded_among(set)
        };
        self.loads.add(worker, 1);
        self.least_loaded.added(worker);
        worker
    }

    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
        let built = built_as::<Self>(built)?;
        same_setting("hash family", &self.hashes, &built.hashes)?;
        same_setting("distinct_candidates", &self.distinct_candidates, &built.distinct_candidates)?;
        same_setting("expected_probability and epsilon", &(self.expected_probability, self.epsilon), &(built.expected_probability, built.epsilon))?;
        same_setting("window length", &self.window_length(), &built.window_length())?;
        same_setting("probability table", &self.table, &built.table)
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.hashes.workers();
        if self.loads.workers() != n {
            return Err(format!("{} load counters for {n} workers", self.loads.workers()));
        }
        // `N = ⌈α·n/2⌉` for an `alpha` in range; `alpha` itself is not stored.
        let length = self.window.window();
        if !ALPHA.into_iter().any(|alpha| window_length(alpha as u64, n) == Some(length)) {
            return Err(format!("a window of {length} keys for {n} workers"));
        }
        if !valid_expected_probability(self.expected_probability)
            || !EPSILON.contains(&self.epsilon)
        {
            return Err(format!(
                "an expected probability of {} and a margin of {}",
                self.expected_probability, self.epsilon
            ));
        }
        // Each routed tuple entered the window and the loads.
        if self.window.len() as u64 > self.loads.total() {
            return Err(format!(
                "{} keys in the window for loads of {}",
                self.window.len(),
                self.loads.total()
            ));
        }
        // The routing table was allocated for one entry per key the window holds.
        if item_map_bytes::<Vec<u32>>(length).is_none_or(|bytes| self.routes_bytes < bytes) {
            return Err(format!("a routing table of {} bytes", self.routes_bytes));
        }
        self.check_table()?;
        self.check_routes()
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.window.state_bytes()
            + self.table.capacity() * std::mem::size_of::<f64>()
            + self.routes_bytes
            + self.candidate_bytes
            + self.loads.state_bytes()
            + self.least_loaded.state_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grouper::assert_forgeries_refused;
    use crate::streams::Zipf;

    /// Every state routing produces passes [`Grouper::check_state`], tuple after tuple,
    /// with candidates forced apart or not and windows of several lengths.
    #[test]
    fn routing_leaves_states_that_pass_the_check() {
        for (workers, alpha, distinct_candidates) in
            [(1, 4, true), (2, 3, false), (5, 1, true), (16, 16, true), (9, 2, false)]
        {
            let params = PdStreamParams { alpha, distinct_candidates, ..PdStreamParams::default() };
            let loads = LoadVector::private(workers);
            let mut pd = PdStream::new(HashFamily::new(4, workers), loads, params).unwrap();
            let mut zipf = Zipf::new(500, 1.2, u64::from(workers)).unwrap();
            let mut hot = 0;
            for step in 0..2_000 {
                pd.route(Key::Int(zipf.next_key()));
                assert_eq!(pd.check_state(), Ok(()), "{workers} workers, step {step}");
                hot = hot.max(pd.hot_keys());
            }
            assert!(hot > 0, "{workers} workers: some key was hot");
        }
    }

    /// A state with any one of the fields routing relies on changed is refused.
    #[test]
    fn forged_fields_are_refused() {
        let mut pd =
            PdStream::new(HashFamily::new(4, 6), LoadVector::private(6), PdStreamParams::default())
                .unwrap();
        let key = Key::Int(1);
        for _ in 0..5 {
            pd.route(key);
        }
        assert_eq!(pd.check_state(), Ok(()));
        let id = fingerprint(key);
        assert!(pd.routes.contains_key(&id));
        let forgeries: [fn(&mut PdStream, u64); 10] = [
            |p, id| p.routes.get_mut(&id).unwrap().clear(),
            |p, id| p.routes.get_mut(&id).unwrap()[0] = 6,
            |p, id| {
                let first = p.routes[&id][0];
                p.routes.get_mut(&id).unwrap().push(first);
            },
            |p, id| p.routes.get_mut(&id).unwrap().truncate(1),
            |p, id| drop(p.routes.insert(id + 1, vec![0, 1])),
            |p, _| p.table[3] += 0.25,
            |p, _| p.table.truncate(p.table.len() - 1),
            |p, _| p.epsilon = 0.0,
            |p, _| p.expected_probability = 1.0,
            |p, _| p.candidate_bytes = 0,
        ];
        assert_forgeries_refused(&pd, forgeries.map(|forge| move |p: &mut PdStream| forge(p, id)));
    }
}
