//! FlexD: Liu, Wang, Zhou and Mao, "Adaptive key partitioning in distributed stream
//! processing", CCF Transactions on High Performance Computing, 2024
//! (doi:10.1007/s42514-023-00179-3). It compares against Hash, DKG, PStream and Dalton on
//! Apache Storm. We worked from a text of the paper without its figures and Table 1; where
//! that matters, this documentation says so.
//!
//! Followed: the micro-batch design of Section 4.2 (operator COLLECT / SEND / ASSIGN,
//! scheduler WAIT ALL / RUN / SEND), the per-segment Space-Saving sketch of Section 4.3 and
//! the FlexD algorithm of Section 4.4 (Algorithm 1 as the text describes it line by line;
//! the figure itself was not in the text we worked from), with its periodic clean-up of the
//! two tables.
//!
//! # The state
//!
//! * A [`SpaceSaving`] sketch over the key [`fingerprint`]s of the current *segment*: the
//!   stream is cut into segments of `l = segment_tuples` tuples, each counted on its own
//!   (Section 4.3); the sketch is cleared when a segment closes.
//! * The frequency-threshold table `T_f` and the instance table `T_i` of Section 4.4 (lines
//!   4-5), kept as one entry per hot key: its threshold, its instances (workers, in the
//!   order they were added), the number of threshold crossings, the last segment in which
//!   it was hot and the scheduler clock of its last access (for the clean-up).
//! * The micro-batch being collected: up to `m = batch_tuples` keys (fingerprint and hash
//!   worker), and a scratch load vector for the scheduler.
//!
//! # Routing one tuple with key `k` (the operator: COLLECT and ASSIGN)
//!
//! The routing table `Pt` in force is the one the scheduler built from the *previous*
//! micro-batch. If `k` has an entry that was hot in the current segment, the tuple goes to
//! the least-loaded of `k`'s instances by the live loads, ties to the earliest instance
//! (line 22); otherwise to its hash worker `h̄(k) = h_0(k) mod n` (line 11, the same hash
//! as `key`). The loads are updated, the key joins the micro-batch, and once `m` keys are
//! collected the scheduler runs on them.
//!
//! # The scheduler run (RUN): Algorithm 1 over the `m` collected keys, in order
//!
//! The scheduler starts from a scratch copy of the live loads, the loads the table it
//! builds will meet. For each collected key `k`:
//!
//! 1. `k` enters the sketch; `f_t` is its Space-Saving count in the segment (line 1). A
//!    threshold `x` (a relative frequency) is crossed when `f_t ≥ x·l`.
//! 2. `f_t < f·l`: a low-frequency tuple, assigned to `h̄(k)` (lines 10-11).
//! 3. Otherwise, if `k` has no entry: it is hot for the first time (lines 13-16). Its entry
//!    gets the least-loaded worker of all as its one instance (lowest index on ties) and
//!    the threshold `T_f[k] = f·δ`.
//! 4. Otherwise, if `f_t ≥ T_f[k]·l`, `k` crossed its threshold again (lines 18-20): its
//!    crossings grow by one, `T_f[k] ← T_f[k]·δ`, and the least-loaded worker that is not
//!    yet an instance of `k` (lowest index on ties) joins its instances and gets the tuple.
//!    With all `n` workers in use, nothing joins and the tuple goes as in step 5.
//! 5. Otherwise the tuple goes to the least-loaded instance of `k`, earliest on ties (line 22).
//!
//! In steps 3-5 the entry is marked hot in the current segment; every step touching an
//! entry records the access. The tuple's worker is added to the scratch loads. A segment
//! closes right after its `l`-th key entered the sketch: the sketch is cleared, and every
//! entry is cold (routed by hash) until its key crosses `f` again in the new segment; its
//! threshold and instances are kept. Every `cleanup_segments` closed segments, the tables
//! keep only the `retain` entries accessed most recently (the paper's "cleared and
//! retained the top 50k records every 10 min", Section 4.4).
//!
//! Hence the invariant the tests check: an entry's instance count is
//! `min(n, 1 + crossings)`.
//!
//! # Parameters
//!
//! * `delta` (float > 1, default 1.5): the growth factor δ of the threshold, Section 6
//!   (Fig. 7: "we adopt a default value of δ = 1.5"); the update is multiplicative,
//!   `T_f[k] = T_f[k]·δ` (Section 4.4). The paper's range is `δ ∈ (1, ∞]`; parameters
//!   must be finite, so `δ = ∞` (one instance per hot key) is approximated by any
//!   `δ > 1/f`, whose first crossing would need more than the whole segment.
//! * `threshold` (float, default 0 = auto `1/(2n)`): the high/low frequency threshold `f`,
//!   a fraction of the segment. Else in `(0, 1]`.
//! * `counters` (int, default 0 = auto `⌈2/f⌉`, i.e. `4n` at the auto `f`): the
//!   Space-Saving counters `⌈1/ε⌉` with `ε = f/2` (Section 4.3). Else in `[1, 2^24]`.
//! * `segment_tuples` (int ≥ 1, default 100 000): the segment size `l`.
//! * `batch_tuples` (int ≥ 1, at most 2^24, default 1000): the micro-batch size `m`.
//! * `cleanup_segments` (int ≥ 1, default 10): segments between two clean-ups.
//! * `retain` (int ≥ 0, default 50 000): entries kept by a clean-up (Section 4.4: "50k").
//!
//! [`Grouper::end_window`] closes the current window early: the scheduler runs on the
//! keys collected so far (they belong to the closing segment), then the segment closes,
//! counting towards the clean-up period. A caller that calls it every `T` seconds gets
//! segments of `T` seconds and a clean-up every `cleanup_segments · T` seconds, as long as
//! fewer than `l` tuples arrive in `T`. No randomness is used.
//!
//! # Where the paper is ambiguous, and what we chose
//!
//! * **Algorithm 1** is a figure, missing from the text we worked from; the text of
//!   Section 4.4 describes it line by line and that text is followed.
//! * **Micro-batches and tuple-at-a-time routing.** In the paper the operator holds `m`
//!   tuples until the scheduler returns their routing table. A grouper must return each
//!   tuple's worker at once (and batch routing must equal routing key by key), so the
//!   routing table built from micro-batch `b` applies to micro-batch `b + 1`: the lag is
//!   one micro-batch, as in a pipelined operator that assigns a batch while the scheduler
//!   works on the previous one. What the table holds for a key (its instances, and whether
//!   it is hot) is Algorithm 1's state after the run; which instance a tuple takes is
//!   decided when it is routed, by the live loads (line 22's "lightest load").
//! * **Scheduler loads.** Within a run, loads are a scratch copy of the live loads plus
//!   the run's own assignments of the `m` keys. Those tuples were already routed (they are
//!   in the live loads); the scheduler's assignments project them once more, as the next
//!   micro-batch the table will route. Without it, every key that turns hot in one run
//!   would get the same least-loaded worker. The assignments themselves are discarded.
//! * **Initial threshold.** The text says only that a first-time hot key gets the lightest
//!   worker, and that later crossings multiply `T_f[k]` by δ. We set `T_f[k] = f·δ` on
//!   creation: becoming hot is the first crossing (of `f`), and every crossing multiplies
//!   the threshold the key just crossed by δ. (`T_f[k] = f` would split the key on its
//!   very next tuple.)
//! * **Units of `f` and `f_t`.** `f_t` is the Space-Saving count of `k` in the current
//!   segment (Section 4.3: heavy hitters "within that segment"), and `f` a fraction of the
//!   segment, as the sketch's threshold θ: a key is hot when `f_t ≥ f·l` (`f·l` in `f64`,
//!   compared with the integer count). The text's `f_t ≥ f` and `f_t ≥ T_f[k]` are read as
//!   "at least", its `f_t < T_f[k]` as the complement.
//! * **Default `f`, ε and `l`.** The text gives none (its Table 1 was missing from the
//!   text we worked from). Section 4.3 copies DKG's sketch parameters (θ, ε, ⌈1/ε⌉ counters, citing
//!   Rivetti et al. 2015), so we take DKG's values as `dkg_rivetti` does: `f = θ = 1/(2n)`,
//!   `ε = θ/2`, `⌈1/ε⌉ = 4n` counters, and `l = 100 000` like DKG's learning phase here:
//!   at `n = 8` (the paper's cluster) a key turns hot after 6 250 tuples of a segment,
//!   far above the sketch's error `ε·l`.
//! * **Default `m`.** Not given ("at least m tuples"). `m = 1000`: a hundredth of a
//!   segment, so the table follows the sketch closely, while the scheduler's `O(n)` scan
//!   of the loads is amortised over many tuples.
//! * **Segment boundaries and the tables.** The sketch restarts with each segment, so a
//!   hot key is routed by hash at the start of a segment until it crosses `f` again (the
//!   literal reading of lines 10-11). Its entry is kept: it finds its instances and its
//!   grown threshold again. Thresholds never shrink; only the clean-up forgets them.
//! * **Clean-up.** "Every 10 min" becomes every `cleanup_segments` segments (10 segments,
//!   a million tuples by default, so a long-lived hot key keeps its entry), counted in
//!   segments so that `end_window` drives it. "Top 50k records" is read with the preceding
//!   sentence ("keys that had not been accessed for a long time"): the 50 000 most recently
//!   accessed entries stay. An access is any tuple of the key processed by the scheduler
//!   while the key has an entry; its clock is the scheduler's tuple count, so no two
//!   entries share one.
//! * **All workers in use.** A crossing still counts and still multiplies the threshold;
//!   no worker joins. Hence `instances = min(n, 1 + crossings)`.
//! * **Ties.** Least-loaded of all, or of the unused: lowest index. Among a key's
//!   instances: the earliest added.
//! * **How far a key splits.** A key of segment share `p` ends with about
//!   `1 + log_δ(p/f)` instances, so at large `n` the defaults under-split the hottest key
//!   (z = 1.5, `n = 32`: 8 instances for a key that needs 12, λ ≈ 0.66), while at the
//!   paper's `n = 8` they balance; smaller δ splits more (`docs/reproduction.md`).
//! * **One source.** The paper's schedulers synchronise their loads "over specific time
//!   intervals"; with a shared [`LoadVector`] every source sees the global loads at once.
//!
//! # Memory
//!
//! `state_bytes()` counts the sketch (allocated for its counters), the entry table (room
//! for its capacity: entry and control byte), each entry's instance buffer, the micro-batch
//! buffer (`16·m` bytes), the scratch loads (`8·n`) and the load counters. An entry is
//! created only for a key whose count reaches `f·l` in a segment, at most `1/f` per
//! segment, so between clean-ups the table holds at most `retain + cleanup_segments/f`
//! entries (about 60 bytes each with one instance). With the defaults, measured empty:
//! 21 176 bytes at `n = 8` (16 000 of them the micro-batch buffer), 92 936 at `n = 128`;
//! the sketch's `4n` counters and the `n` load counters dominate as `n` grows.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting};
use crate::hash::{HashFamily, Key, fingerprint};
use crate::loads::{LoadVector, first_least, first_least_by};
use crate::params::{ParamError, ParamReader, ParamSpec, ParamValue};
use crate::sketches::{ItemMap, SpaceSaving, map_bytes};
use crate::grouper::restore_state;
use serde::{Deserialize, Serialize};

pub const DEFAULT_DELTA: f64 = 1.5;
pub const DEFAULT_SEGMENT_TUPLES: i64 = 100_000;
pub const DEFAULT_BATCH_TUPLES: i64 = 1_000;
pub const DEFAULT_CLEANUP_SEGMENTS: i64 = 10;
pub const DEFAULT_RETAIN: i64 = 50_000;

/// The most Space-Saving counters, and the largest micro-batch.
pub const MAX_COUNTERS: usize = 1 << 24;
pub const MAX_BATCH_TUPLES: usize = 1 << 24;

pub const INFO: GrouperInfo = GrouperInfo {
    name: "flexd",
    title: "FlexD: progressive key splitting with per-key frequency thresholds",
    paper: "Liu, Wang, Zhou, Mao, Adaptive key partitioning in distributed stream \
            processing (FlexD), CCF Transactions on High Performance Computing 2024; \
            Sections 4.2-4.4 and 6",
    params: &[
        ParamSpec {
            name: "delta",
            default: ParamValue::Float(DEFAULT_DELTA),
            doc: "growth factor of a key's threshold at each crossing, T_f[k] *= delta; \
                  > 1 (Section 6, Fig. 7)",
        },
        ParamSpec {
            name: "threshold",
            default: ParamValue::Float(0.0),
            doc: "f, the hot-key threshold as a fraction of the segment, in (0, 1]; \
                  0 means 1/(2n) (DKG's theta, Section 4.3)",
        },
        ParamSpec {
            name: "counters",
            default: ParamValue::Int(0),
            doc: "Space-Saving counters ceil(1/epsilon), in [1, 2^24]; 0 means ceil(2/f) \
                  (epsilon = f/2)",
        },
        ParamSpec {
            name: "segment_tuples",
            default: ParamValue::Int(DEFAULT_SEGMENT_TUPLES),
            doc: "l, tuples per segment counted by the sketch (Section 4.3); end_window() \
                  closes a segment early",
        },
        ParamSpec {
            name: "batch_tuples",
            default: ParamValue::Int(DEFAULT_BATCH_TUPLES),
            doc: "m, tuples per micro-batch; the table built from one applies to the next \
                  (Section 4.2)",
        },
        ParamSpec {
            name: "cleanup_segments",
            default: ParamValue::Int(DEFAULT_CLEANUP_SEGMENTS),
            doc: "segments between two clean-ups of the tables (the paper's 10 min)",
        },
        ParamSpec {
            name: "retain",
            default: ParamValue::Int(DEFAULT_RETAIN),
            doc: "entries a clean-up keeps, the most recently accessed (Section 4.4: 50k)",
        },
    ],
    build,
    restore: restore_state::<FlexD>,
};

/// FlexD's own parameters; `0` for `threshold` and `counters` means the automatic value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlexDParams {
    pub delta: f64,
    pub threshold: f64,
    pub counters: i64,
    pub segment_tuples: i64,
    pub batch_tuples: i64,
    pub cleanup_segments: i64,
    pub retain: i64,
}

impl Default for FlexDParams {
    fn default() -> Self {
        Self {
            delta: DEFAULT_DELTA,
            threshold: 0.0,
            counters: 0,
            segment_tuples: DEFAULT_SEGMENT_TUPLES,
            batch_tuples: DEFAULT_BATCH_TUPLES,
            cleanup_segments: DEFAULT_CLEANUP_SEGMENTS,
            retain: DEFAULT_RETAIN,
        }
    }
}

/// What [`FlexD::new`] keeps of its parameters, validated, with `f` and the counters
/// resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Settings {
    delta: f64,
    threshold: f64,
    counters: usize,
    segment_tuples: u64,
    batch_tuples: usize,
    cleanup_segments: u64,
    retain: usize,
}

impl FlexDParams {
    /// Validates the parameters for `workers` workers and resolves the automatic ones.
    fn settings(self, workers: u32) -> Result<Settings, ParamError> {
        let FlexDParams {
            delta,
            threshold,
            counters,
            segment_tuples,
            batch_tuples,
            cleanup_segments,
            retain,
        } = self;
        if !(delta > 1.0 && delta.is_finite()) {
            return Err(ParamError::new("delta", format!("must be finite and > 1, got {delta}")));
        }
        let auto_threshold = threshold == 0.0;
        if !(auto_threshold || (threshold > 0.0 && threshold <= 1.0)) {
            return Err(ParamError::new(
                "threshold",
                format!("must be in (0, 1], or 0 for 1/(2n), got {threshold}"),
            ));
        }
        let threshold = if auto_threshold { 1.0 / (2.0 * f64::from(workers)) } else { threshold };
        let counters = match counters {
            0 if auto_threshold => 4 * workers as usize,
            0 => {
                let derived = (2.0 / threshold).ceil();
                if derived > MAX_COUNTERS as f64 {
                    return Err(ParamError::new(
                        "threshold",
                        format!(
                            "gives ceil(2/f) = {derived} Space-Saving counters, more than \
                             {MAX_COUNTERS}; raise it or set counters"
                        ),
                    ));
                }
                derived as usize
            }
            c if (1..=MAX_COUNTERS as i64).contains(&c) => c as usize,
            c => {
                return Err(ParamError::new(
                    "counters",
                    format!("must be in [1, {MAX_COUNTERS}], or 0 for ceil(2/f), got {c}"),
                ));
            }
        };
        if counters > MAX_COUNTERS {
            return Err(ParamError::new(
                "threshold",
                format!("gives 4n = {counters} Space-Saving counters, more than {MAX_COUNTERS}"),
            ));
        }
        if segment_tuples < 1 {
            return Err(ParamError::below("segment_tuples", 1, segment_tuples));
        }
        if !(1..=MAX_BATCH_TUPLES as i64).contains(&batch_tuples) {
            return Err(ParamError::not_in("batch_tuples", 1, MAX_BATCH_TUPLES, batch_tuples));
        }
        if cleanup_segments < 1 {
            return Err(ParamError::below("cleanup_segments", 1, cleanup_segments));
        }
        if retain < 0 {
            return Err(ParamError::below("retain", 0, retain));
        }
        Ok(Settings {
            delta,
            threshold,
            counters,
            segment_tuples: segment_tuples as u64,
            batch_tuples: batch_tuples as usize,
            cleanup_segments: cleanup_segments as u64,
            retain: usize::try_from(retain).unwrap_or(usize::MAX),
        })
    }
}

fn build(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let settings = FlexDParams {
        delta: params.float("delta")?,
        threshold: params.float("threshold")?,
        counters: params.int("counters")?,
        segment_tuples: params.int("segment_tuples")?,
        batch_tuples: params.int("batch_tuples")?,
        cleanup_segments: params.int("cleanup_segments")?,
        retain: params.int("retain")?,
    };
    match FlexD::new(config.hashes, config.loads, settings) {
        Ok(grouper) => Ok(Box::new(grouper)),
        Err(error) => Err(params.refuse(error)),
    }
}

/// The entry of a hot key in `T_f` and `T_i`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Entry {
    /// `T_f[k]`, a fraction of the segment.
    pub threshold: f64,
    /// Threshold crossings after the key first turned hot.
    pub crossings: u32,
    /// `T_i[k]`: the instances, in the order they were added.
    pub instances: Vec<u32>,
    /// The last segment in which the key was hot.
    pub hot_segment: u64,
    /// The scheduler clock (tuples processed, from 1) of the key's last access.
    pub last_access: u64,
}

const WORKER_BYTES: usize = std::mem::size_of::<u32>();

/// FlexD over `n` workers; see the module documentation.
#[derive(Serialize, Deserialize)]
pub struct FlexD {
    hashes: HashFamily,
    loads: LoadVector,
    delta: f64,
    threshold: f64,
    /// `f·l`, the count at which a key is hot.
    hot_count: f64,
    segment_tuples: u64,
    batch_tuples: usize,
    cleanup_segments: u64,
    retain: usize,
    sketch: SpaceSaving,
    /// Keys entered in the sketch in the current segment.
    segment_fill: u64,
    /// The current segment's number, from 0.
    segment: u64,
    /// Tuples processed by the scheduler.
    clock: u64,
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    entries: ItemMap<Entry>,
    /// Bytes of the instance buffers.
    instance_bytes: usize,
    /// The micro-batch: fingerprint and hash worker of each collected key.
    pending: Vec<(u64, u32)>,
    scratch: Vec<u64>,
}

impl FlexD {
    /// Validates the parameters and allocates the sketch and the micro-batch buffer.
    pub fn new(
        hashes: HashFamily,
        loads: LoadVector,
        params: FlexDParams,
    ) -> Result<Self, ParamError> {
        let workers = hashes.workers();
        let Settings {
            delta,
            threshold,
            counters,
            segment_tuples,
            batch_tuples,
            cleanup_segments,
            retain,
        } = params.settings(workers)?;
        let sketch =
            SpaceSaving::new(counters).map_err(|e| ParamError::new("counters", e.to_string()))?;
        let mut pending = Vec::new();
        pending.try_reserve_exact(batch_tuples).map_err(|_| {
            ParamError::new("batch_tuples", format!("{batch_tuples} keys cannot be allocated"))
        })?;
        Ok(Self {
            hashes,
            loads,
            delta,
            threshold,
            hot_count: threshold * segment_tuples as f64,
            segment_tuples,
            batch_tuples,
            cleanup_segments,
            retain,
            sketch,
            segment_fill: 0,
            segment: 0,
            clock: 0,
            entries: ItemMap::default(),
            instance_bytes: 0,
            pending,
            scratch: vec![0; workers as usize],
        })
    }

    /// `f`, the effective threshold.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The Space-Saving counters.
    pub fn counters(&self) -> usize {
        self.sketch.capacity()
    }

    /// The entry of `key` in `T_f` / `T_i`, if it has one.
    pub fn entry(&self, key: Key<'_>) -> Option<&Entry> {
        self.entries.get(&fingerprint(key))
    }

    /// The instances of `key`, in the order they were added.
    pub fn instances(&self, key: Key<'_>) -> Option<&[u32]> {
        self.entry(key).map(|e| e.instances.as_slice())
    }

    /// The threshold crossings of `key` since it first turned hot.
    pub fn crossings(&self, key: Key<'_>) -> Option<u32> {
        self.entry(key).map(|e| e.crossings)
    }

    /// Whether the table in force routes `key` over its instances (else by hash).
    pub fn is_hot(&self, key: Key<'_>) -> bool {
        self.entry(key).is_some_and(|e| e.hot_segment == self.segment)
    }

    /// The number of entries.
    pub fn hot_keys(&self) -> usize {
        self.entries.len()
    }

    /// Every entry, by fingerprint.
    pub fn entries(&self) -> impl Iterator<Item = (u64, &Entry)> {
        self.entries.iter().map(|(&id, e)| (id, e))
    }

    /// The current segment's number, from 0.
    pub fn segment(&self) -> u64 {
        self.segment
    }

    /// Keys collected in the current micro-batch.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The Space-Saving count of `key` in the current segment (0 if not monitored).
    pub fn segment_count(&self, key: Key<'_>) -> u64 {
        self.sketch.estimate(fingerprint(key)).map_or(0, |c| c.count)
    }

    /// The stored parameters are ones [`FlexDParams::settings`] accepts and resolves to
    /// themselves (a stored `f` of 0 would resolve to `1/(2n)`), with the sketch's capacity
    /// as the counters, and `f·l` is their product. A value above `i64::MAX`, which no
    /// parameter gives, reads as -1 so that its range check fails.
    fn check_settings(&self) -> Result<(), String> {
        let param = |value: u64| i64::try_from(value).unwrap_or(-1);
        let stored = Settings {
            delta: self.delta,
            threshold: self.threshold,
            counters: self.sketch.capacity(),
            segment_tuples: self.segment_tuples,
            batch_tuples: self.batch_tuples,
            cleanup_segments: self.cleanup_segments,
            retain: self.retain,
        };
        let params = FlexDParams {
            delta: self.delta,
            threshold: self.threshold,
            counters: param(self.sketch.capacity() as u64),
            segment_tuples: param(self.segment_tuples),
            batch_tuples: param(self.batch_tuples as u64),
            cleanup_segments: param(self.cleanup_segments),
            retain: param(self.retain as u64),
        };
        let settings = params
            .settings(self.hashes.workers())
            .map_err(|error| error.to_string())?;
        if settings != stored {
            return Err(format!(
                "a threshold of {} with {} counters that are not the parameters'",
                self.threshold,
                self.sketch.capacity()
            ));
        }
        if self.hot_count.to_bits() != (self.threshold * self.segment_tuples as f64).to_bits() {
            return Err(format!("a hot count of {} for f = {}", self.hot_count, self.threshold));
        }
        Ok(())
    }

    /// Each entry as Algorithm 1 leaves it (see the checks), and its instance buffers counted.
    fn check_entries(&self) -> Result<(), String> {
        let n = self.hashes.workers();
        // A new entry's threshold is `f·δ`. A crossing multiplies it by `δ > 1`, and needs
        // `f_t ≥ T·l` with `f_t ≤ l`, so `T ≤ 1` before it and `T·δ ≤ δ` after.
        let thresholds = self.threshold * self.delta..=self.delta;
        let mut accesses = Vec::with_capacity(self.entries.len());
        let mut instances = 0u64;
        // The entry that last listed each worker, to find a repeat in one pass.
        let mut listed_by = vec![usize::MAX; n as usize];
        for (index, entry) in self.entries.values().enumerate() {
            let Entry { threshold, crossings, hot_segment, last_access, .. } = *entry;
            // One instance on creation, one more per crossing while a worker is unused.
            let expected = (1 + u64::from(crossings)).min(u64::from(n));
            if entry.instances.len() as u64 != expected {
                return Err(format!(
                    "a key on {} instances after {crossings} crossings",
                    entry.instances.len()
                ));
            }
            for &w in &entry.instances {
                match listed_by.get_mut(w as usize) {
                    Some(by) if *by != index => *by = index,
                    _ => return Err(format!("an instance on worker {w} of {n}, or listed twice")),
                }
            }
            if !thresholds.contains(&threshold) {
                return Err(format!("a key threshold of {threshold}, not in [f·δ, δ]"));
            }
            // Entries are marked hot in the current segment and accessed at scheduler
            // ticks, from 1.
            if hot_segment > self.segment || !(1..=self.clock).contains(&last_access) {
                return Err(format!(
                    "a key hot in segment {hot_segment} of {}, accessed at {last_access} of {}",
                    self.segment, self.clock
                ));
            }
            accesses.push(last_access);
            instances += entry.instances.len() as u64;
        }
        // A scheduler tick accesses one entry at most.
        accesses.sort_unstable();
        if accesses.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err("two keys accessed at the same scheduler tick".to_owned());
        }
        // The buffers hold at least their instances.
        if (self.instance_bytes as u64) < instances * WORKER_BYTES as u64 {
            return Err(format!(
                "{} bytes of instance buffers for {instances} instances",
                self.instance_bytes
            ));
        }
        Ok(())
    }

    /// The scheduler's run over the collected micro-batch (Algorithm 1).
    fn run_scheduler(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        for worker in 0..self.scratch.len() {
            self.scratch[worker] = self.loads.get(worker as u32);
        }
        let pending = std::mem::take(&mut self.pending);
        for &(id, hash_worker) in &pending {
            let worker = self.schedule(id, hash_worker);
            self.scratch[worker as usize] += 1;
        }
        self.pending = pending;
        self.pending.clear();
    }

    /// Algorithm 1 for one collected key: updates the sketch and the tables and returns
    /// the worker the scheduler assigns it.
    fn schedule(&mut self, id: u64, hash_worker: u32) -> u32 {
        self.sketch.insert(id);
        self.segment_fill += 1;
        self.clock += 1;
        let count = self.sketch.estimate(id).map_or(0, |c| c.count) as f64;
        let (segment, clock, l) = (self.segment, self.clock, self.segment_tuples as f64);
        let worker = if count < self.hot_count {
            // Lines 10-11: a low-frequency tuple.
            if let Some(entry) = self.entries.get_mut(&id) {
                entry.last_access = clock;
            }
            hash_worker
        } else if let Some(entry) = self.entries.get_mut(&id) {
            entry.hot_segment = segment;
            entry.last_access = clock;
            let mut joined = None;
            if count >= entry.threshold * l {
                // Lines 18-20: the key crossed its threshold again.
                // Saturates rather than wraps: `min(n, 1 + crossings)` still holds.
                entry.crossings = entry.crossings.saturating_add(1);
                entry.threshold *= self.delta;
                if let Some(worker) = least_loaded_unused(&self.scratch, &entry.instances) {
                    let before = entry.instances.capacity();
                    entry.instances.push(worker);
                    let grown = (entry.instances.capacity() - before) * WORKER_BYTES;
                    self.instance_bytes = self.instance_bytes.saturating_add(grown);
                    joined = Some(worker);
                }
            }
            // Line 22 otherwise.
            joined.unwrap_or_else(|| least_loaded_among(&self.scratch, &entry.instances))
        } else {
            // Lines 13-16: hot for the first time.
            let worker = least_loaded_unused(&self.scratch, &[]).unwrap_or(0);
            let instances = vec![worker];
            // Saturates: a restored count can exceed the buffers, whose capacities a
            // snapshot does not hold (see `check_entries`).
            self.instance_bytes =
                self.instance_bytes.saturating_add(instances.capacity() * WORKER_BYTES);
            self.entries.insert(
                id,
                Entry {
                    threshold: self.threshold * self.delta,
                    crossings: 0,
                    instances,
                    hot_segment: segment,
                    last_access: clock,
                },
            );
            worker
        };
        if self.segment_fill == self.segment_tuples {
            self.close_segment();
        }
        worker
    }

    /// Ends the current segment: a new sketch, and a clean-up every `cleanup_segments`.
    fn close_segment(&mut self) {
        self.sketch.clear();
        self.segment_fill = 0;
        self.segment += 1;
        if self.segment.is_multiple_of(self.cleanup_segments) {
            self.clean_up();
        }
    }

    /// Keeps the `retain` most recently accessed entries, in a table sized for them.
    fn clean_up(&mut self) {
        if self.entries.len() <= self.retain {
            return;
        }
        let mut all: Vec<(u64, Entry)> = self.entries.drain().collect();
        all.sort_unstable_by_key(|(_, e)| std::cmp::Reverse(e.last_access));
        all.truncate(self.retain);
        let mut kept = ItemMap::default();
        kept.reserve(all.len());
        self.instance_bytes = 0;
        for (id, mut entry) in all {
            entry.instances.shrink_to_fit();
            self.instance_bytes += entry.instances.capacity() * WORKER_BYTES;
            kept.insert(id, entry);
        }
        self.entries = kept;
    }
}

/// The least-loaded worker not in `used`, lowest index on ties; `None` if all are used.
fn least_loaded_unused(loads: &[u64], used: &[u32]) -> Option<u32> {
    let unused = loads.iter().enumerate().map(|(worker, &load)| (worker as u32, load));
    first_least(unused.filter(|(worker, _)| !used.contains(worker))).map(|(worker, _)| worker)
}

/// The least-loaded of `instances` (not empty) by `loads`, the earliest on ties.
fn least_loaded_among(loads: &[u64], instances: &[u32]) -> u32 {
    first_least_by(instances, |worker| loads[worker as usize])
}

impl Grouper for FlexD {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn route(&mut self, key: Key<'_>) -> u32 {
        let id = fingerprint(key);
        let hash_worker = self.hashes.candidate(0, key);
        // ASSIGN, by the table of the previous micro-batch.
        let worker = match self.entries.get(&id) {
            Some(entry) if entry.hot_segment == self.segment => {
                self.loads.least_loaded_among(&entry.instances)
            }
            _ => hash_worker,
        };
        self.loads.add(worker, 1);
        // COLLECT, and RUN once m keys are in.
        self.pending.push((id, hash_worker));
        if self.pending.len() == self.batch_tuples {
            self.run_scheduler();
        }
        worker
    }

    /// Runs the scheduler on the keys collected so far, then closes the segment.
    fn end_window(&mut self) {
        self.run_scheduler();
        self.close_segment();
    }

    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
        let built = built_as::<Self>(built)?;
        same_setting("hash family", &self.hashes, &built.hashes)?;
        same_setting("delta and threshold", &(self.delta, self.threshold, self.hot_count), &(built.delta, built.threshold, built.hot_count))?;
        same_setting("counters", &self.sketch.capacity(), &built.sketch.capacity())?;
        same_setting("segments", &(self.segment_tuples, self.batch_tuples, self.cleanup_segments, self.retain), &(built.segment_tuples, built.batch_tuples, built.cleanup_segments, built.retain))
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.hashes.workers();
        if self.loads.workers() != n || self.scratch.len() != n as usize {
            return Err(format!(
                "{} load counters and {} scratch loads for {n} workers",
                self.loads.workers(),
                self.scratch.len()
            ));
        }
        self.check_settings()?;
        // A segment closes as its `l`-th key enters the sketch, which counts every key.
        if self.segment_fill >= self.segment_tuples || self.segment_fill != self.sketch.total() {
            return Err(format!(
                "{} keys in a segment of {} counted {} times",
                self.segment_fill,
                self.segment_tuples,
                self.sketch.total()
            ));
        }
        // The scheduler runs as the `m`-th key is collected.
        if self.pending.len() >= self.batch_tuples {
            return Err(format!(
                "{} keys collected for micro-batches of {}",
                self.pending.len(),
                self.batch_tuples
            ));
        }
        if let Some(&(_, w)) = self.pending.iter().find(|&&(_, w)| w >= n) {
            return Err(format!("a collected key hashed to worker {w} of {n}"));
        }
        // Every collected or scheduled tuple was routed onto the loads first.
        let routed = self.clock.checked_add(self.pending.len() as u64);
        if routed.is_none_or(|routed| routed > self.loads.total()) {
            return Err(format!(
                "{} scheduled and {} collected tuples on loads of {}",
                self.clock,
                self.pending.len(),
                self.loads.total()
            ));
        }
        // The next segment end must be able to count itself.
        if self.segment == u64::MAX {
            return Err("a segment count that cannot grow".to_owned());
        }
        self.check_entries()
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.sketch.state_bytes()
            + map_bytes::<Entry>(self.entries.capacity()).unwrap_or(usize::MAX)
            + self.instance_bytes
            + self.pending.capacity() * std::mem::size_of::<(u64, u32)>()
            + self.scratch.capacity() * std::mem::size_of::<u64>()
            + self.loads.state_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grouper::assert_forgeries_refused;
    use crate::streams::Zipf;

    /// Every state routing produces passes [`Grouper::check_state`]: after each tuple and
    /// each window end, through segment ends, clean-ups, keys on every worker and the
    /// automatic and explicit threshold and counters.
    #[test]
    fn routing_leaves_states_that_pass_the_check() {
        let settings = [
            (1, FlexDParams::default()),
            (4, FlexDParams { delta: 1.05, threshold: 0.02, ..FlexDParams::default() }),
            (7, FlexDParams { threshold: 0.5, counters: 3, ..FlexDParams::default() }),
            (16, FlexDParams { delta: 1.2, ..FlexDParams::default() }),
        ];
        for (workers, params) in settings {
            let params = FlexDParams {
                segment_tuples: 90,
                batch_tuples: 6,
                cleanup_segments: 2,
                retain: 3,
                ..params
            };
            let loads = LoadVector::private(workers);
            let mut flexd = FlexD::new(HashFamily::new(9, workers), loads, params).unwrap();
            let mut zipf = Zipf::new(200, 1.5, u64::from(workers)).unwrap();
            for step in 0..3_000 {
                flexd.route(Key::Int(zipf.next_key()));
                if step % 250 == 0 {
                    flexd.end_window();
                }
                assert_eq!(flexd.check_state(), Ok(()), "{workers} workers, step {step}");
            }
            assert!(flexd.hot_keys() > 0, "{workers} workers: some key turned hot");
        }
    }

    /// A state with any one of the fields routing relies on changed is refused.
    #[test]
    fn forged_fields_are_refused() {
        let params = FlexDParams { segment_tuples: 90, batch_tuples: 6, ..FlexDParams::default() };
        let mut flexd = FlexD::new(HashFamily::new(9, 4), LoadVector::private(4), params).unwrap();
        let mut zipf = Zipf::new(50, 1.5, 1).unwrap();
        for _ in 0..400 {
            flexd.route(Key::Int(zipf.next_key()));
        }
        flexd.route(Key::Int(1));
        assert_eq!(flexd.check_state(), Ok(()));
        assert!(!flexd.pending.is_empty() && flexd.entries.len() > 1);
        let (&id, _) = flexd.entries.iter().min_by_key(|(_, e)| e.instances.len()).unwrap();
        assert!(flexd.entries[&id].instances.len() < 4);
        let forgeries: [fn(&mut FlexD, u64); 14] = [
            |f, _| f.scratch.truncate(3),
            |f, _| f.pending[0].1 = 4,
            |f, _| f.pending.extend([(1, 0); 5]),
            |f, id| f.entries.get_mut(&id).unwrap().instances.clear(),
            |f, id| f.entries.get_mut(&id).unwrap().instances[0] = 4,
            |f, id| f.entries.get_mut(&id).unwrap().crossings += 1,
            |f, id| f.entries.get_mut(&id).unwrap().threshold = f64::NAN,
            |f, id| f.entries.get_mut(&id).unwrap().last_access = f.clock + 1,
            |f, _| f.segment_fill += 1,
            |f, _| f.threshold = 0.0,
            |f, _| f.hot_count += 1.0,
            |f, _| f.segment = u64::MAX,
            |f, _| f.batch_tuples = MAX_BATCH_TUPLES + 1,
            |f, _| f.clock = f.loads.total(),
        ];
        assert_forgeries_refused(&flexd, forgeries.map(|forge| move |f: &mut FlexD| forge(f, id)));
    }
}
