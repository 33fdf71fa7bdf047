//! Distribution-aware key grouping (DKG): Rivetti, Querzoni, Anceaume, Busnel and Sericola,
//! "Efficient key grouping for near-optimal load balancing in stream processing systems",
//! ACM DEBS 2015. This is the "DKG" that FlexD compares against, registered as
//! `dkg_rivetti` (the name `dkg` belongs to Dynamic Key Grouping).
//!
//! Specification: `docs/baselines.md`, section "Distribution-aware key grouping", whose
//! three phases are followed literally; where it is silent, the choices below are ours.
//!
//! 1. **Learning**, over the first `L = learning_tuples` tuples. Each tuple is routed by
//!    plain key grouping, `h_0(k) mod n` (never dropped, never delayed), and its key's
//!    [`fingerprint`] `x` is counted twice: into a [`SpaceSaving`] summary of
//!    `⌈1/ε⌉ = 4n` counters (`φ = θ = 1/(2n)`, `ε = θ/2 = 1/(4n)`), and into bucket
//!    `g(x)` of `2n` bucket counters, with the 2-universal hash
//!    `g(x) = ((a·x + b) mod P) mod 2n`, `P = 2^61 − 1` (a Mersenne prime), computed
//!    exactly in 128-bit arithmetic. `a` and `b` are the first two draws of
//!    `SplitMix64::for_grouper(grouper_seed, u64::from_le_bytes(*b"rivetti\0"))`:
//!    `a = 1 + (draw_1 mod (P − 1))`, `b = draw_2 mod P`.
//! 2. **Building**, right after the `L`-th tuple is routed, with `m = L`. A monitored key
//!    is a heavy hitter when `count − error ≥ ⌈φ·m⌉ = ⌈m / 2n⌉` (integer arithmetic); its
//!    weight is `count − error`, which is subtracted from its bucket (saturating at 0). The
//!    heavy hitters and the `2n` buckets are then placed by LPT (longest processing time
//!    first): sorted by weight, largest first, and each given to the worker with the
//!    smallest LPT load so far (the sum of the weights already given to it, starting at 0
//!    for every worker; ties to the lowest index). The learning summary and counters are
//!    then dropped.
//! 3. **Routing**, from tuple `L + 1` on, forever: a heavy hitter goes to its worker, any
//!    other key to its bucket's worker. One worker per key.
//!
//! Hence a key reaches at most two workers over the whole stream: its KG worker while
//! learning and its table worker afterwards.
//!
//! # Ambiguities and choices
//!
//! * **Learning length.** The spec says only "the first `L` tuples", and FlexD (the paper
//!   that compares against DKG) does not give its configuration. Default
//!   `learning_tuples = 100_000`: long against the `2n` buckets and `4n` counters for the
//!   worker counts of the papers (8 nodes in FlexD, up to 100 workers in the Dynamic Key
//!   Grouping paper), e.g. 500 tuples per bucket on average with `n = 100`, so that bucket
//!   weights and the heavy-hitter threshold `⌈m/2n⌉` are well above SpaceSaving's error
//!   bound `εm = m/4n`. It must be at least 1.
//! * **Routing while learning.** Plain KG, as the spec says: learning tuples are neither
//!   dropped nor delayed, so a key may move once, from its KG worker to its table worker.
//!   Over a whole stream γ is therefore above 1 (about 1.2 – 1.5 on 10^6 Zipf tuples over
//!   10^5 keys); over the tuples after learning it is exactly 1, the value FlexD's Fig. 14
//!   shows for DKG (`docs/reproduction.md`).
//! * **The 2-universal hash** is applied to the key's fingerprint, a 64-bit value that can
//!   exceed `P`; `(a·x + b) mod P` is taken on the full 64-bit `x`, so `x` and `x + P`
//!   share a bucket (harmless: the family stays 2-universal over `x mod P`).
//! * **LPT tie order.** Items of equal weight: heavy hitters before buckets, heavy hitters
//!   by increasing fingerprint, buckets by increasing index. Empty buckets (weight 0) are
//!   placed too, so every bucket has a worker.
//! * **Re-learning.** The spec (like FlexD's description of DKG as an offline algorithm)
//!   defines one learning phase and a table that "never changes after learning", so
//!   [`Grouper::end_window`] does nothing: windows neither restart nor shorten learning.
//! * The LPT loads start at zero, not at the KG loads of the learning phase: the spec
//!   places the learned weights, and the table is meant for the rest of the stream.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting};
use crate::hash::{HashFamily, Key, fingerprint};
use crate::loads::{LoadVector, least_loaded_of};
use crate::params::{ParamError, ParamReader, ParamSpec, ParamValue};
use crate::rng::SplitMix64;
use crate::sketches::{ItemMap, SpaceSaving, item_map, map_bytes};
use crate::grouper::restore_state;
use serde::{Deserialize, Serialize};

/// The Mersenne prime `2^61 − 1` of the 2-universal bucket hash.
pub const PRIME: u64 = (1 << 61) - 1;

/// The index mixed into the grouper seed for the bucket hash's generator.
pub const RNG_INDEX: u64 = u64::from_le_bytes(*b"rivetti\0");

pub const DEFAULT_LEARNING_TUPLES: i64 = 100_000;

pub const INFO: GrouperInfo = GrouperInfo {
    name: "dkg_rivetti",
    title: "Distribution-aware key grouping (learn, build an LPT table, route)",
    paper: "Rivetti, Querzoni, Anceaume, Busnel, Sericola, Efficient key grouping for \
            near-optimal load balancing in stream processing systems, DEBS 2015",
    params: &[ParamSpec {
        name: "learning_tuples",
        default: ParamValue::Int(DEFAULT_LEARNING_TUPLES),
        doc: "L, the tuples of the learning phase (routed by KG) before the table is built; \
              at least 1",
    }],
    build,
    restore: restore_state::<DistributionAwareKeyGrouping>,
};

fn build(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let learning = params.int("learning_tuples")?;
    if learning < 1 {
        return Err(params.refuse(ParamError::below("learning_tuples", 1, learning)));
    }
    let grouper = DistributionAwareKeyGrouping::new(config.hashes, learning as u64, config.loads)
        .map_err(|reason| params.out_of_range("learning_tuples", reason))?;
    Ok(Box::new(grouper))
}

/// The 2-universal hash `g(x) = ((a·x + b) mod P) mod buckets`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketHash {
    pub a: u64,
    pub b: u64,
    pub buckets: u64,
}

impl BucketHash {
    /// `a` and `b` drawn from the grouper seed as the module documentation says.
    pub fn from_seed(grouper_seed: u64, buckets: u64) -> Self {
        let mut rng = SplitMix64::for_grouper(grouper_seed, RNG_INDEX);
        let a = 1 + rng.next_u64() % (PRIME - 1);
        let b = rng.next_u64() % PRIME;
        Self { a, b, buckets }
    }

    #[inline]
    pub fn bucket(&self, x: u64) -> usize {
        let value = (u128::from(self.a) * u128::from(x) + u128::from(self.b)) % u128::from(PRIME);
        (value as u64 % self.buckets) as usize
    }
}

#[derive(Serialize, Deserialize)]
struct Learning {
    summary: SpaceSaving,
    bucket_counts: Vec<u64>,
    seen: u64,
}

#[derive(Serialize, Deserialize)]
struct Table {
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    heavy: ItemMap<u32>,
    heavy_bytes: usize,
    bucket_workers: Vec<u32>,
}

#[derive(Serialize, Deserialize)]
pub struct DistributionAwareKeyGrouping {
    hashes: HashFamily,
    buckets: BucketHash,
    learning_tuples: u64,
    learning: Option<Learning>,
    table: Option<Table>,
    loads: LoadVector,
}

impl DistributionAwareKeyGrouping {
    /// Fails (with a reason) only when the learning state cannot be allocated.
    pub fn new(
        hashes: HashFamily,
        learning_tuples: u64,
        loads: LoadVector,
    ) -> Result<Self, String> {
        let n = u64::from(hashes.workers());
        let summary = SpaceSaving::new(4 * n as usize).map_err(|e| e.to_string())?;
        let mut bucket_counts = Vec::new();
        bucket_counts
            .try_reserve_exact(2 * n as usize)
            .map_err(|_| "needs more memory than can be allocated".to_owned())?;
        bucket_counts.resize(2 * n as usize, 0);
        Ok(Self {
            hashes,
            buckets: BucketHash::from_seed(hashes.grouper_seed(), 2 * n),
            learning_tuples,
            learning: Some(Learning { summary, bucket_counts, seen: 0 }),
            table: None,
            loads,
        })
    }

    /// Whether the table is built (the learning phase is over).
    pub fn is_built(&self) -> bool {
        self.table.is_some()
    }

    /// The heavy hitters of the table and their workers, by fingerprint.
    pub fn heavy_hitters(&self) -> Vec<(u64, u32)> {
        let mut heavy: Vec<(u64, u32)> = match &self.table {
            Some(table) => table.heavy.iter().map(|(&x, &w)| (x, w)).collect(),
            None => Vec::new(),
        };
        heavy.sort_unstable();
        heavy
    }

    /// The worker of each bucket, once built.
    pub fn bucket_workers(&self) -> Option<&[u32]> {
        self.table.as_ref().map(|t| t.bucket_workers.as_slice())
    }

    fn build_table(&mut self) {
        let Some(Learning { summary, mut bucket_counts, seen }) = self.learning.take() else {
            return;
        };
        let n = u64::from(self.hashes.workers());
        let threshold = seen.div_ceil(2 * n);
        // Heavy hitters, and their weights subtracted from their buckets.
        let mut heavy: Vec<(u64, u64)> = Vec::new();
        for (x, counter) in summary.iter_by_count() {
            let weight = counter.guaranteed();
            if weight >= threshold {
                heavy.push((x, weight));
                let bucket = self.buckets.bucket(x);
                bucket_counts[bucket] = bucket_counts[bucket].saturating_sub(weight);
            }
        }
        // LPT items: (weight, kind: 0 = heavy hitter / 1 = bucket, fingerprint or index).
        let mut items: Vec<(u64, u8, u64)> = heavy.iter().map(|&(x, w)| (w, 0, x)).collect();
        items.extend(bucket_counts.iter().enumerate().map(|(i, &w)| (w, 1, i as u64)));
        items.sort_unstable_by_key(|&(w, kind, id)| (std::cmp::Reverse(w), kind, id));
        let mut lpt_loads = vec![0u64; n as usize];
        // Sized once for the heavy hitters, which are at most 2n (each weighs >= m/2n).
        let (mut heavy_map, _) = item_map::<u32>(heavy.len()).unwrap_or_default();
        let mut bucket_workers = vec![0u32; bucket_counts.len()];
        for (weight, kind, id) in items {
            let worker = least_loaded_of(lpt_loads.iter().copied());
            lpt_loads[worker as usize] += weight;
            if kind == 0 {
                heavy_map.insert(id, worker);
            } else {
                bucket_workers[id as usize] = worker;
            }
        }
        let heavy_bytes = map_bytes::<u32>(heavy_map.capacity()).unwrap_or(usize::MAX);
        self.table = Some(Table { heavy: heavy_map, heavy_bytes, bucket_workers });
    }
}

impl Grouper for DistributionAwareKeyGrouping {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn route(&mut self, key: Key<'_>) -> u32 {
        let worker = match (&self.table, &mut self.learning) {
            (Some(table), _) => {
                let x = fingerprint(key);
                match table.heavy.get(&x) {
                    Some(&worker) => worker,
                    None => table.bucket_workers[self.buckets.bucket(x)],
                }
            }
            (None, Some(learning)) => {
                let x = fingerprint(key);
                learning.summary.insert(x);
                learning.bucket_counts[self.buckets.bucket(x)] += 1;
                learning.seen += 1;
                let worker = self.hashes.candidate(0, key);
                if learning.seen >= self.learning_tuples {
                    self.build_table();
                }
                worker
            }
            // Unreachable: one of the two always exists. Route by KG rather than panic.
            (None, None) => self.hashes.candidate(0, key),
        };
        self.loads.add(worker, 1);
        worker
    }

    /// Does nothing: DKG learns once and its table never changes (module documentation).
    fn end_window(&mut self) {}

    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
        let built = built_as::<Self>(built)?;
        same_setting("hash family", &self.hashes, &built.hashes)?;
        same_setting("bucket hash", &self.buckets, &built.buckets)?;
        same_setting("learning_tuples", &self.learning_tuples, &built.learning_tuples)
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.hashes.workers();
        if self.loads.workers() != n {
            return Err(format!("{} load counters for {n} workers", self.loads.workers()));
        }
        let buckets = 2 * u64::from(n);
        let bucket_hash = BucketHash::from_seed(self.hashes.grouper_seed(), buckets);
        if self.buckets != bucket_hash {
            return Err("a bucket hash that is not the one of the seed and workers".to_owned());
        }
        if self.learning_tuples == 0 {
            return Err("learning_tuples of 0".to_owned());
        }
        match (&self.learning, &self.table) {
            (Some(learning), None) => {
                if learning.bucket_counts.len() as u64 != buckets
                    || learning.summary.capacity() != 4 * n as usize
                {
                    return Err("learning state sized for another worker count".to_owned());
                }
                if learning.seen >= self.learning_tuples
                    || learning.seen != learning.summary.total()
                {
                    return Err(format!(
                        "{} tuples learned of {}",
                        learning.seen, self.learning_tuples
                    ));
                }
            }
            (None, Some(table)) => {
                if table.bucket_workers.len() as u64 != buckets
                    || table.bucket_workers.iter().chain(table.heavy.values()).any(|&w| w >= n)
                {
                    return Err("a table with a bucket or worker out of range".to_owned());
                }
            }
            _ => return Err("both or neither of the learning state and the table".to_owned()),
        }
        Ok(())
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        let learning = self.learning.as_ref().map_or(0, |l| {
            l.summary.state_bytes() + l.bucket_counts.capacity() * std::mem::size_of::<u64>()
        });
        let table = self.table.as_ref().map_or(0, |t| {
            t.heavy_bytes + t.bucket_workers.capacity() * std::mem::size_of::<u32>()
        });
        std::mem::size_of::<Self>() + learning + table + self.loads.state_bytes()
    }
}
