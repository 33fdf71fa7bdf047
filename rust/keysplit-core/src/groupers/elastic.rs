//! Elastic key splitting: keysplit's own grouper for the corner of the λ–γ trade-off,
//! perfect balance at almost the replication that the key shares force.
//!
//! No paper's grouper reaches that corner. A key of share `p` needs at least `⌈p·n⌉`
//! workers for perfect balance and every other key can stay on one worker, so the offline
//! bound is `γ* = Σ_k max(1, ⌈p_k·n⌉) / K` at `λ = 0` (`keysplit.metrics.gamma_bound`).
//! W-Choices and Pd-Stream reach `λ ≈ 0` by giving every head key many candidates; elastic
//! gives a key only the workers its load has shown it needs.
//!
//! # The rule
//!
//! Every tuple's key is hashed once, `h = h_0(k)` (the hash of key grouping), and its
//! *hash worker* is `h mod n`.
//!
//! 1. **Hot-key table** (HeavyKeeper's counting, Gong et al., "HeavyKeeper: An accurate
//!    algorithm for finding top-k elephant flows", USENIX ATC 2018, with SpaceSaving's
//!    bounded-memory idea, Metwally, Agrawal and El Abbadi, ICDT 2005). `table_entries`
//!    entries `(fingerprint h, count, worker set)` in buckets of 4, the bucket chosen by the
//!    top bits of `h`. The key's entry counts one more; a new key takes an empty entry; in a
//!    full bucket the entry of least count (the first on ties) is decayed by one with
//!    probability `1.08^-count`, and the new key takes it when it reaches 0. Every
//!    `decay_tuples` tuples all counts are halved, so a count measures the recent stream: a
//!    burst raises a key's count at once, and a cooled key fades out of the table. Nothing is
//!    kept for the tail.
//! 2. **Cold keys** (not in the table, or counted below `hot_count`) go to their hash
//!    worker, as in key grouping.
//! 3. **Hot keys** go to the least-loaded worker of their *worker set*, which starts as
//!    `{hash worker}` (the local loads of PKG: Nasir et al., ICDE 2015). When even that
//!    worker is above the mean load by more than `epsilon` (relative), the set grows by the
//!    globally least-loaded worker, which takes the tuple. This is consistent hashing with
//!    bounded loads (Mirrokni, Thorup and Zadimoghaddam, SODA 2018) applied to a key's
//!    tuples instead of to keys: a key overflows only when its workers are full.
//!    DKG gives a hot key a contiguous slice of the ring instead (Dalabasmaz and Can); we
//!    tried that in a prototype, and overlapping slices made every heavy key grow over
//!    nearly all workers (γ 1.19 against 1.03 on Zipf 2.0 at n = 128), so a set takes the
//!    least-loaded worker wherever it is.
//!
//!    **One key at a time off a full worker.** A worker above the threshold stays there
//!    until the mean catches up, so every hot key on it would grow within a few tuples,
//!    although moving one or two large ones already cuts its inflow below the mean. So
//!    after a key grows off worker `w`, another may grow off `w` only once
//!    [`MARK_TUPLES`] tuples per worker have passed and `w` took more than [`INFLOW`] = 0.9
//!    times the mean inflow since. The next tuple to arrive picks the key, so large keys,
//!    which arrive most often, move first. Measured at n = 128 over five real and drifting
//!    streams, this halved the extra replication of the level test alone (γ 1.52 → 1.26 on
//!    NYC flights by tail number, 1.51 → 1.23 on drifting Zipf) at λ ≤ 0.008; with a gate
//!    of 1.0 times the mean a worker's level drained too slowly (λ up to 0.04), with 256
//!    tuples per worker balance failed (λ 0.1–0.6).
//! 4. **Shrinking.** At each halving, a set larger than `2·⌈p̂·n⌉ + 1` workers, with `p̂`
//!    the share of the last `decay_tuples` tuples that the key sent through its set,
//!    drops the members that took fewest of those tuples (the latest added first on ties,
//!    never the hash worker). The factor 2 leaves room for the load that other keys put on
//!    the same workers, and for a set that grew during the period. A set that took no
//!    tuple is dropped at once. (Estimating `p̂` from the count, which halves once per
//!    period, kept cooled keys' sets for many periods: under drift the workers held beyond
//!    the hash workers grew sevenfold over eight shifts of the hot keys.) A key that leaves
//!    the table loses its set, and starts again from its hash worker if it comes back.
//! 5. **Windows.** Loads are counted from the last `end_window()` (from the start without
//!    one), so that each window is balanced on its own; worker sets persist across windows.
//!
//! # Why it approaches the bound, and what it guarantees
//!
//! A set grows only when all its members are above the mean, so no worker is above
//! `(1 + ε)` times the mean by a hot key's tuple except by the staleness below, and a key
//! takes a new worker only when its current ones are full: the sets are the water level of
//! a greedy water-filling, which needs about `⌈p·n⌉` workers per key of share `p`. What
//! elastic cannot balance is the tail on a worker: cold keys never move, as in key
//! grouping, so `λ` is bounded below by the tail's own imbalance; on skewed streams the hot
//! keys fill every other worker up to it.
//!
//! Guarantees: state is bounded by `table_entries` entries and at most `n` workers per
//! entry, whatever the number of keys; every tuple of a key whose count is below
//! `hot_count` goes to its hash worker; routing is deterministic for a seed (the decay coins
//! come from the grouper's seeded generator).
//!
//! # Speed: the least-loaded member without a scan per tuple
//!
//! A scan of a set picks its least-loaded member, which then takes the next `⌊ε·mean/2⌋`
//! tuples of the key (at least 1) before the next scan. So a set of `s` members costs
//! about `s / (ε·mean/2)` comparisons per tuple, and a member overshoots by at most that
//! budget per key that chose it. (A budget that also spanned the gap to the second
//! least-loaded member scanned less, but let several keys that grew onto the same
//! least-loaded worker overfill it: λ 0.016 under drift instead of 0.01.) A key with no set
//! beyond its hash worker is checked on every tuple.
//!
//! A batch on private load counters routes on a dense copy of them
//! ([`LoadVector::with_dense_loads`]): one plain array in L1 instead of a padded atomic per
//! worker. The rule and the result are the same as routing tuple by tuple.
//!
//! # Parameters (defaults from a trial on Zipf, Pd-Stream's presets and text streams)
//!
//! * `epsilon = 0.005`: the relative load above the mean that makes a set grow.
//! * `hot_count = 32`: the count from which a key uses its worker set. A count halved every
//!   `decay_tuples` settles at `2·p·decay_tuples`, so keys from a share of 1.6·10^-4 on
//!   qualify. With 64, the 4,000 tail numbers of NYC flights (shares near 2.5·10^-4) stayed
//!   on their hash workers, and λ stayed at 0.04–0.17 at n = 128.
//! * `table_entries = 16384`: entries of the hot-key table, a power of two from 4 to 2^24
//!   (16 bytes each: 256 KB).
//! * `decay_tuples = 100000`: tuples between halvings of every count.
//!
//! # Choices
//!
//! * The decay probability `1.08^-c` is a table built (at compile time) by repeated
//!   multiplication by `1 / 1.08`, so that a reference implementation reproduces it bit for bit; counts of
//!   512 and more never decay (`1.08^-512 < 2^-53`, below the coin's resolution).
//! * With a shared load vector the mean is re-read from the counters every `n` tuples; in
//!   between it counts this source's tuples.

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::grouper::{
    Grouper, GrouperConfig, GrouperInfo, NULL_KEY, built_as, restore_state, route_each, same_setting,
};
use crate::keys::{KeyBatch, KeyVisitor};
use crate::hash::{HashFamily, Key};
use crate::loads::{LoadScope, LoadVector, first_least};
use crate::params::{ParamError, ParamReader, ParamSpec, ParamValue};
use crate::rng::SplitMix64;

/// The index mixed into the grouper seed for the generator of the decay coins.
pub const RNG_INDEX: u64 = u64::from_le_bytes(*b"elastic\0");

/// Entries per bucket of the hot-key table.
pub const WAYS: usize = 4;

/// Counts from which an entry never decays (see the module documentation).
pub const DECAY_TABLE_LEN: usize = 512;

/// HeavyKeeper's decay base.
pub const DECAY_BASE: f64 = 1.08;

/// Tuples per worker that must pass before another key grows off a worker.
pub const MARK_TUPLES: u64 = 16;

/// The share of the mean inflow above which a worker that a key grew off lets another one
/// grow off it (see the module documentation, rule 3).
pub const INFLOW: f64 = 0.9;

pub const MIN_TABLE_ENTRIES: i64 = 4;
pub const MAX_TABLE_ENTRIES: i64 = 1 << 24;

pub const INFO: GrouperInfo = GrouperInfo {
    name: "elastic",
    title: "Elastic key splitting (hot keys grow a worker set only when its workers are full)",
    paper: "keysplit's own grouper (2026), after HeavyKeeper (Gong et al., USENIX ATC 2018), \
            PKG (Nasir et al., ICDE 2015) and consistent hashing with bounded loads \
            (Mirrokni, Thorup and Zadimoghaddam, SODA 2018)",
    params: &[
        ParamSpec {
            name: "epsilon",
            default: ParamValue::Float(0.005),
            doc: "relative load above the mean at which a hot key's worker set grows, in \
                  (0, 1]",
        },
        ParamSpec {
            name: "hot_count",
            default: ParamValue::Int(32),
            doc: "recent count from which a key routes by its worker set, in [1, 2^31]",
        },
        ParamSpec {
            name: "table_entries",
            default: ParamValue::Int(16384),
            doc: "entries of the hot-key table, a power of two in [4, 2^24]",
        },
        ParamSpec {
            name: "decay_tuples",
            default: ParamValue::Int(100_000),
            doc: "tuples between halvings of every count, in [1, 2^40]",
        },
    ],
    build,
    restore: restore_state::<Elastic>,
};

fn build(config: GrouperConfig, params: &mut ParamReader<'_>) -> Result<Box<dyn Grouper>, ConfigError> {
    let settings = ElasticParams {
        epsilon: params.float("epsilon")?,
        hot_count: params.int("hot_count")?,
        table_entries: params.int("table_entries")?,
        decay_tuples: params.int("decay_tuples")?,
    };
    match Elastic::new(config.hashes, config.loads, settings) {
        Ok(grouper) => Ok(Box::new(grouper)),
        Err(error) => Err(params.refuse(error)),
    }
}

/// Elastic's own parameters, as documented in the module.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ElasticParams {
    pub epsilon: f64,
    pub hot_count: i64,
    pub table_entries: i64,
    pub decay_tuples: i64,
}

impl Default for ElasticParams {
    fn default() -> Self {
        Self { epsilon: 0.005, hot_count: 32, table_entries: 16384, decay_tuples: 100_000 }
    }
}

impl ElasticParams {
    /// Each parameter in its range; what [`Elastic::new`] and a restored state's check
    /// require.
    pub fn check(&self) -> Result<(), ParamError> {
        let ElasticParams { epsilon, hot_count, table_entries, decay_tuples } = *self;
        if !(epsilon > 0.0 && epsilon <= 1.0) {
            return Err(ParamError::new("epsilon", format!("must be in (0, 1], got {epsilon}")));
        }
        if !(1..=MAX_HOT_COUNT).contains(&hot_count) {
            return Err(ParamError::not_in("hot_count", 1, MAX_HOT_COUNT, hot_count));
        }
        if !(MIN_TABLE_ENTRIES..=MAX_TABLE_ENTRIES).contains(&table_entries)
            || !(table_entries as u64).is_power_of_two()
        {
            return Err(ParamError::new(
                "table_entries",
                format!(
                    "must be a power of two in [{MIN_TABLE_ENTRIES}, {MAX_TABLE_ENTRIES}], got \
                     {table_entries}"
                ),
            ));
        }
        if !(1..=MAX_DECAY_TUPLES).contains(&decay_tuples) {
            return Err(ParamError::not_in("decay_tuples", 1, MAX_DECAY_TUPLES, decay_tuples));
        }
        Ok(())
    }
}

const MAX_HOT_COUNT: i64 = 1 << 31;
const MAX_DECAY_TUPLES: i64 = 1 << 40;

/// An entry's `set` when the key has no worker set beyond its hash worker.
const NO_SET: u32 = u32::MAX;

/// `1.08^-c` for `c` in `0..DECAY_TABLE_LEN`, by repeated multiplication.
pub const DECAY_PROBABILITIES: [f64; DECAY_TABLE_LEN] = {
    let step = 1.0 / DECAY_BASE;
    let mut table = [1.0; DECAY_TABLE_LEN];
    let mut c = 1;
    while c < DECAY_TABLE_LEN {
        table[c] = table[c - 1] * step;
        c += 1;
    }
    table
};

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Entry {
    fingerprint: u64,
    /// 0 for an empty entry.
    count: u32,
    /// Index into `sets`, or [`NO_SET`].
    set: u32,
}

/// The hot-key table: buckets of [`WAYS`] entries, each bucket one cache line, so that a
/// lookup reads one line. Indexed by entry, `bucket * WAYS + way`.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct EntryTable(Vec<Bucket>);

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Bucket([Entry; WAYS]);

impl EntryTable {
    fn new(entries: usize) -> Self {
        Self(vec![Bucket::default(); entries / WAYS])
    }

    fn len(&self) -> usize {
        self.0.len() * WAYS
    }

    /// The bucket whose first entry is `first`.
    #[inline(always)]
    fn bucket(&self, first: usize) -> &[Entry; WAYS] {
        &self.0[first / WAYS].0
    }

    #[inline(always)]
    fn bucket_mut(&mut self, first: usize) -> &mut [Entry; WAYS] {
        &mut self.0[first / WAYS].0
    }

    fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.0.iter().flat_map(|bucket| &bucket.0)
    }
}

impl std::ops::Index<usize> for EntryTable {
    type Output = Entry;

    #[inline(always)]
    fn index(&self, index: usize) -> &Entry {
        &self.0[index / WAYS].0[index % WAYS]
    }
}

impl std::ops::IndexMut<usize> for EntryTable {
    #[inline(always)]
    fn index_mut(&mut self, index: usize) -> &mut Entry {
        &mut self.0[index / WAYS].0[index % WAYS]
    }
}

/// A hot key's workers, the hash worker first, in the order they joined.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
struct WorkerSet {
    members: Vec<Member>,
    /// The member that takes the next tuples, and for how many more.
    best: u32,
    budget: u32,
}

/// A worker of a set and the tuples it took since the last halving, side by side so that
/// routing a tuple touches one line.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
struct Member {
    worker: u32,
    hits: u32,
}

impl Member {
    fn new(worker: u32) -> Self {
        Self { worker, hits: 0 }
    }
}

#[derive(Serialize, Deserialize)]
pub struct Elastic {
    loads: LoadVector,
    router: Router,
}

/// Everything of [`Elastic`] but its load counters, which routing reads through
/// [`WorkerLoads`]: the counters themselves one tuple at a time, or a batch's dense copy.
#[derive(Serialize, Deserialize)]
struct Router {
    hashes: HashFamily,
    epsilon: f64,
    /// `(1 + ε) / n`, `ε / (2n)` and `INFLOW / n`: the threshold, the budget and the inflow
    /// that lets another key grow off a worker, per tuple of the window.
    growth_factor: f64,
    slack_factor: f64,
    inflow_factor: f64,
    hot_count: u32,
    decay_tuples: u64,
    table: EntryTable,
    /// Worker sets by index; a free one is empty and listed in `free_sets`.
    sets: Vec<WorkerSet>,
    free_sets: Vec<u32>,
    rng: SplitMix64,
    /// Tuples routed since the last halving.
    since_decay: u64,
    /// The loads at the last `end_window()`.
    window_start: Vec<u64>,
    /// Tuples in the current window (all sources' with a shared load vector, as last read).
    window_tuples: u64,
    /// Per worker, the window's tuples and the worker's window load when a key last grew
    /// off it.
    marks: Vec<(u64, u64)>,
}

impl Elastic {
    pub fn new(
        hashes: HashFamily,
        loads: LoadVector,
        params: ElasticParams,
    ) -> Result<Self, ParamError> {
        params.check()?;
        let ElasticParams { epsilon, hot_count, table_entries, decay_tuples } = params;
        let window_start = loads.snapshot();
        let (growth_factor, slack_factor, inflow_factor) = factors(epsilon, hashes.workers());
        let router = Router {
            hashes,
            epsilon,
            growth_factor,
            slack_factor,
            inflow_factor,
            hot_count: hot_count as u32,
            decay_tuples: decay_tuples as u64,
            table: EntryTable::new(table_entries as usize),
            sets: Vec::new(),
            free_sets: Vec::new(),
            rng: SplitMix64::for_grouper(hashes.grouper_seed(), RNG_INDEX),
            since_decay: 0,
            window_tuples: 0,
            marks: vec![(0, 0); window_start.len()],
            window_start,
        };
        Ok(Self { loads, router })
    }

    /// The keys' fingerprints with their counts and worker sets (hash worker first), by
    /// table position.
    pub fn hot_keys(&self) -> Vec<(u64, u32, Vec<u32>)> {
        self.router.hot_keys()
    }
}

/// The load counters as routing reads and bumps them.
trait WorkerLoads {
    fn load(&self, worker: u32) -> u64;
    fn add_one(&mut self, worker: u32);
    /// All sources' tuples, when other sources add to the counters too.
    fn shared_total(&self) -> Option<u64>;
}

impl WorkerLoads for LoadVector {
    #[inline(always)]
    fn load(&self, worker: u32) -> u64 {
        self.get(worker)
    }

    #[inline(always)]
    fn add_one(&mut self, worker: u32) {
        self.add(worker, 1);
    }

    #[inline(always)]
    fn shared_total(&self) -> Option<u64> {
        (self.scope() == LoadScope::Shared).then(|| self.total())
    }
}

/// A private vector's counters as one plain array, for a batch
/// ([`LoadVector::with_dense_loads`]).
impl WorkerLoads for [u64] {
    #[inline(always)]
    fn load(&self, worker: u32) -> u64 {
        self[worker as usize]
    }

    #[inline(always)]
    fn add_one(&mut self, worker: u32) {
        self[worker as usize] += 1;
    }

    #[inline(always)]
    fn shared_total(&self) -> Option<u64> {
        None
    }
}

impl Router {

    /// The table index of the first entry of `h`'s bucket.
    #[inline(always)]
    fn bucket_of(&self, h: u64) -> usize {
        let buckets = (self.table.len() / WAYS) as u64;
        // The top bits of `h`: the worker comes from `h mod n`, mostly its low bits.
        ((h >> 32).wrapping_mul(buckets) >> 32) as usize * WAYS
    }

    /// Counts one tuple of `h` in the table; the index of its entry if it has one after.
    #[inline(always)]
    fn count(&mut self, h: u64) -> Option<usize> {
        let first = self.bucket_of(h);
        let bucket = self.table.bucket_mut(first);
        if let Some(way) = bucket.iter().position(|e| e.count > 0 && e.fingerprint == h) {
            let entry = &mut bucket[way];
            entry.count = entry.count.saturating_add(1);
            return Some(first + way);
        }
        if let Some(way) = bucket.iter().position(|e| e.count == 0) {
            bucket[way] = Entry { fingerprint: h, count: 1, set: NO_SET };
            return Some(first + way);
        }
        self.decay_weakest(first, h)
    }

    #[inline(never)]
    fn decay_weakest(&mut self, first: usize, h: u64) -> Option<usize> {
        let bucket = self.table.bucket(first);
        let (way, count) =
            first_least(bucket.iter().enumerate().map(|(way, e)| (way as u32, e.count)))
                .expect("a bucket has entries");
        let index = first + way as usize;
        let probability = DECAY_PROBABILITIES.get(count as usize).copied().unwrap_or(0.0);
        if self.rng.next_f64() >= probability {
            return None;
        }
        self.table[index].count -= 1;
        if self.table[index].count > 0 {
            return None;
        }
        self.free_set_of(index);
        self.table[index] = Entry { fingerprint: h, count: 1, set: NO_SET };
        Some(index)
    }

    fn free_set_of(&mut self, index: usize) {
        let set = std::mem::replace(&mut self.table[index].set, NO_SET);
        if set != NO_SET {
            self.sets[set as usize] = WorkerSet::default();
            self.free_sets.push(set);
        }
    }

    #[inline(always)]
    fn window_load<L: WorkerLoads + ?Sized>(&self, loads: &L, worker: u32) -> u64 {
        loads.load(worker) - self.window_start[worker as usize]
    }

    /// The load above which a hot key's set grows.
    #[inline(always)]
    fn threshold(&self) -> f64 {
        self.window_tuples as f64 * self.growth_factor
    }

    /// Tuples a set's least-loaded member takes before the set is scanned again.
    #[inline(always)]
    fn slack(&self) -> u64 {
        ((self.window_tuples as f64 * self.slack_factor) as u64).max(1)
    }

    /// The globally least-loaded worker of the window, the lowest index on ties.
    fn least_loaded_worker<L: WorkerLoads + ?Sized>(&self, loads: &L) -> u32 {
        first_least((0..self.hashes.workers()).map(|w| (w, self.window_load(loads, w))))
            .map_or(0, |(w, _)| w)
    }

    /// Whether a key may grow off `worker` (of window load `load`, above the threshold): at
    /// least [`MARK_TUPLES`] tuples per worker have passed since the last key grew off it,
    /// and it took more than [`INFLOW`] times the mean inflow since. A worker whose level is
    /// high but whose inflow fell well below the mean drains without more splits.
    #[inline]
    fn may_grow_off(&self, worker: u32, load: u64) -> bool {
        let (tuples, level) = self.marks[worker as usize];
        let elapsed = self.window_tuples - tuples;
        elapsed >= MARK_TUPLES * u64::from(self.hashes.workers())
            && (load - level) as f64 > elapsed as f64 * self.inflow_factor
    }

    /// Marks a key growing off `worker` and returns the worker it grows to.
    fn grow_off<L: WorkerLoads + ?Sized>(&mut self, loads: &L, worker: u32, load: u64) -> u32 {
        self.marks[worker as usize] = (self.window_tuples, load);
        self.least_loaded_worker(loads)
    }

    fn route_hot<L: WorkerLoads + ?Sized>(&mut self, loads: &L, index: usize, hash_worker: u32) -> u32 {
        let set = self.table[index].set;
        if set == NO_SET {
            let load = self.window_load(loads, hash_worker);
            if load as f64 <= self.threshold() || !self.may_grow_off(hash_worker, load) {
                return hash_worker;
            }
            let grown = self.grow_off(loads, hash_worker, load);
            if grown == hash_worker {
                // Only with a shared load vector, whose mean this source reads late.
                return hash_worker;
            }
            let set = WorkerSet {
                members: vec![Member::new(hash_worker), Member::new(grown)],
                best: 1,
                budget: 0,
            };
            let slot = match self.free_sets.pop() {
                Some(slot) => {
                    self.sets[slot as usize] = set;
                    slot
                }
                None => {
                    self.sets.push(set);
                    (self.sets.len() - 1) as u32
                }
            };
            self.table[index].set = slot;
            return self.take(slot, 1);
        }
        let current = &self.sets[set as usize];
        if current.budget > 0 {
            let best = current.best;
            self.sets[set as usize].budget -= 1;
            return self.take(set, best);
        }
        self.rescan(loads, set)
    }

    /// Picks the set's least-loaded member (growing the set when all are full), gives it a
    /// budget, and routes one tuple to it.
    fn rescan<L: WorkerLoads + ?Sized>(&mut self, loads: &L, set: u32) -> u32 {
        let members = &self.sets[set as usize].members;
        let (mut best, least) =
            first_least(members.iter().enumerate().map(|(i, m)| (i as u32, self.window_load(loads, m.worker))))
                .expect("a worker set has members");
        let full = members[best as usize].worker;
        if least as f64 > self.threshold()
            && members.len() < self.hashes.workers() as usize
            && self.may_grow_off(full, least)
        {
            let grown = self.grow_off(loads, full, least);
            let target = &mut self.sets[set as usize];
            // A member is never the least loaded of all unless a shared load vector's mean
            // is read late: then the set stays as it is.
            if target.members.iter().all(|m| m.worker != grown) {
                target.members.push(Member::new(grown));
                best = (target.members.len() - 1) as u32;
            }
        }
        let budget = self.slack().min(u64::from(u32::MAX)) as u32;
        let target = &mut self.sets[set as usize];
        target.best = best;
        target.budget = budget - 1;
        self.take(set, best)
    }

    #[inline(always)]
    fn take(&mut self, set: u32, member: u32) -> u32 {
        let target = &mut self.sets[set as usize];
        let member = &mut target.members[member as usize];
        member.hits = member.hits.saturating_add(1);
        member.worker
    }

    /// Halves every count, and trims each set to what its key's recent share needs.
    fn decay(&mut self) {
        let n = f64::from(self.hashes.workers());
        for index in 0..self.table.len() {
            let Entry { count, set, .. } = self.table[index];
            if count == 0 {
                continue;
            }
            if set != NO_SET {
                let recent: u64 = self.sets[set as usize].members.iter().map(|m| u64::from(m.hits)).sum();
                let share = recent as f64 / self.decay_tuples as f64;
                if recent == 0 {
                    self.free_set_of(index);
                } else {
                    trim(&mut self.sets[set as usize], 2 * (share * n).ceil() as usize + 1);
                }
            }
            self.table[index].count = count / 2;
            if count / 2 == 0 {
                self.free_set_of(index);
                self.table[index] = Entry::default();
            }
        }
    }

    /// Routes one tuple of key hash `h` and counts it in `loads`.
    #[inline(always)]
    fn route_hash<L: WorkerLoads + ?Sized>(&mut self, loads: &mut L, h: u64) -> u32 {
        let hash_worker = self.hashes.worker_of(h);
        let worker = match self.count(h) {
            Some(index) if self.table[index].count >= self.hot_count => {
                self.route_hot(loads, index, hash_worker)
            }
            _ => hash_worker,
        };
        loads.add_one(worker);
        self.window_tuples += 1;
        self.since_decay += 1;
        if self.since_decay == self.decay_tuples {
            self.since_decay = 0;
            self.decay();
        }
        if self.since_decay.is_multiple_of(u64::from(self.hashes.workers()))
            && let Some(total) = loads.shared_total()
        {
            self.window_tuples = total - self.window_start.iter().sum::<u64>();
        }
        worker
    }

    fn hot_keys(&self) -> Vec<(u64, u32, Vec<u32>)> {
        self.table
            .iter()
            .filter(|e| e.count > 0)
            .map(|e| {
                let members = match e.set {
                    NO_SET => vec![self.hashes.worker_of(e.fingerprint)],
                    set => self.sets[set as usize].members.iter().map(|m| m.worker).collect(),
                };
                (e.fingerprint, e.count, members)
            })
            .collect()
    }
}

/// `(1 + ε) / n`, `ε / (2n)` and `INFLOW / n`, computed once: a reference implementation
/// divides in the same order.
fn factors(epsilon: f64, workers: u32) -> (f64, f64, f64) {
    let n = f64::from(workers);
    ((1.0 + epsilon) / n, epsilon / (2.0 * n), INFLOW / n)
}

/// Drops the members beyond `needed` that took fewest tuples, the latest added first on
/// ties and never the first (the hash worker); resets the hits of the others.
fn trim(set: &mut WorkerSet, needed: usize) {
    if set.members.len() > needed {
        let mut order: Vec<usize> = (1..set.members.len()).collect();
        // Fewest hits first, then the latest added.
        order.sort_by_key(|&i| (set.members[i].hits, std::cmp::Reverse(i)));
        let mut dropped = order[..set.members.len() - needed].to_vec();
        dropped.sort_unstable();
        for &i in dropped.iter().rev() {
            set.members.remove(i);
        }
    }
    set.members.iter_mut().for_each(|m| m.hits = 0);
    set.best = 0;
    set.budget = 0;
}

/// The batch loop of [`Elastic::route_batch`] over dense loads.
struct DenseRows<'a> {
    router: &'a mut Router,
    dense: &'a mut [u64],
    out: &'a mut [u32],
}

impl KeyVisitor for DenseRows<'_> {
    #[inline(always)]
    fn visit(&mut self, row: usize, key: Option<Key<'_>>) {
        let h = self.router.hashes.hash(0, key.unwrap_or(NULL_KEY));
        self.out[row] = self.router.route_hash(self.dense, h);
    }
}

impl Grouper for Elastic {
    fn name(&self) -> &'static str {
        INFO.name
    }

    #[inline]
    fn route(&mut self, key: Key<'_>) -> u32 {
        let h = self.router.hashes.hash(0, key);
        self.router.route_hash(&mut self.loads, h)
    }

    /// A private vector's batch reads and bumps a dense copy of the counters (see
    /// [`LoadVector::with_dense_loads`]); a shared one routes tuple by tuple, so that other
    /// sources see its tuples as often as they do every other grouper's.
    fn route_batch(&mut self, keys: &KeyBatch<'_>, out: &mut [u32]) {
        if self.loads.scope() == LoadScope::Shared {
            return route_each(self, keys, out);
        }
        let Self { loads, router } = self;
        loads.with_dense_loads(|dense| keys.visit(&mut DenseRows { router, dense, out }));
    }

    fn end_window(&mut self) {
        let router = &mut self.router;
        router.window_start = self.loads.snapshot();
        router.window_tuples = 0;
        router.marks.iter_mut().for_each(|mark| *mark = (0, 0));
        for set in &mut router.sets {
            set.budget = 0;
        }
    }

    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
        let built = built_as::<Self>(built)?;
        same_setting("hash family", &self.router.hashes, &built.router.hashes)?;
        same_setting("epsilon", &self.router.epsilon, &built.router.epsilon)?;
        same_setting("hot_count", &self.router.hot_count, &built.router.hot_count)?;
        same_setting("table_entries", &self.router.table.len(), &built.router.table.len())?;
        same_setting("decay_tuples", &self.router.decay_tuples, &built.router.decay_tuples)
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.router.hashes.workers();
        if self.loads.workers() != n || self.router.window_start.len() != n as usize {
            return Err(format!(
                "{} load counters and {} window starts for {n} workers",
                self.loads.workers(),
                self.router.window_start.len()
            ));
        }
        let params = ElasticParams {
            epsilon: self.router.epsilon,
            hot_count: i64::from(self.router.hot_count),
            table_entries: self.router.table.len() as i64,
            decay_tuples: self.router.decay_tuples as i64,
        };
        params.check().map_err(|error| error.to_string())?;
        if (self.router.growth_factor, self.router.slack_factor, self.router.inflow_factor) != factors(self.router.epsilon, n) {
            return Err("threshold factors that are not epsilon's".to_owned());
        }
        if self.router.since_decay >= self.router.decay_tuples {
            return Err(format!("{} tuples since the last halving", self.router.since_decay));
        }
        let loads = self.loads.snapshot();
        if loads.iter().zip(&self.router.window_start).any(|(load, start)| start > load) {
            return Err("a window start above its worker's load".to_owned());
        }
        let window: u64 = loads.iter().zip(&self.router.window_start).map(|(l, s)| l - s).sum();
        if self.router.window_tuples > window {
            return Err(format!("{} tuples in a window of {window}", self.router.window_tuples));
        }
        let marks_ok = self.router.marks.len() == n as usize
            && self.router.marks.iter().enumerate().all(|(w, &(tuples, level))| {
                tuples <= self.router.window_tuples && level <= loads[w] - self.router.window_start[w]
            });
        if !marks_ok {
            return Err("growth marks ahead of the window".to_owned());
        }
        let mut owner = vec![false; self.router.sets.len()];
        for (index, entry) in self.router.table.iter().enumerate() {
            if entry.count == 0 {
                if *entry != Entry::default() {
                    return Err(format!("empty entry {index} with a key or a set"));
                }
                continue;
            }
            if self.router.bucket_of(entry.fingerprint) != index / WAYS * WAYS {
                return Err(format!("entry {index} in another key's bucket"));
            }
            if entry.set == NO_SET {
                continue;
            }
            let set = self.router.sets.get(entry.set as usize).ok_or("a set out of range")?;
            if std::mem::replace(&mut owner[entry.set as usize], true) {
                return Err(format!("set {} held by two entries", entry.set));
            }
            let members = &set.members;
            if members.len() < 2
                || members.len() > n as usize
                || set.best as usize >= members.len()
                || members[0].worker != self.router.hashes.worker_of(entry.fingerprint)
            {
                return Err(format!("set {} of {} members", entry.set, members.len()));
            }
            let mut seen = vec![false; n as usize];
            for &Member { worker, .. } in members {
                if worker >= n || std::mem::replace(&mut seen[worker as usize], true) {
                    return Err(format!("set {} holds worker {worker} twice or of {n}", entry.set));
                }
            }
        }
        let mut free = vec![false; self.router.sets.len()];
        for &set in &self.router.free_sets {
            let index = set as usize;
            if index >= self.router.sets.len()
                || owner[index]
                || std::mem::replace(&mut free[index], true)
                || self.router.sets[index] != WorkerSet::default()
            {
                return Err(format!("free set {set} in use, listed twice or out of range"));
            }
        }
        if owner.iter().zip(&free).any(|(&o, &f)| o == f) {
            return Err("a set neither held nor free".to_owned());
        }
        Ok(())
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.router.table.len() * std::mem::size_of::<Entry>()
            + self.router.sets.capacity() * std::mem::size_of::<WorkerSet>()
            + self.router.sets.iter().map(|s| s.members.capacity() * 8).sum::<usize>()
            + self.router.free_sets.capacity() * 4
            + self.router.window_start.capacity() * 8
            + self.loads.state_bytes()
    }
}
