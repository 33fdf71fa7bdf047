//! Partial key grouping (PKG): Nasir, De Francisci Morales, García-Soriano, Kourtellis and
//! Serafini, "The power of both choices: Practical load balancing for distributed stream
//! processing engines", ICDE 2015 (arXiv:1504.00788).
//!
//! Specification: `docs/baselines.md`, section "Partial key grouping". The candidates are
//! `c1 = h_1(k) mod n` and `c2 = h_2(k) mod n`; the tuple goes to the one with the smaller
//! local load, ties to `c1`.
//!
//! Choice: the paper lets the two hashes collide, so a key may have one candidate only.
//! Apache Storm 2.x forces distinct candidates by moving `c2` to `(c2 + 1) mod n`; that is
//! the default here (`distinct_candidates = true`), and `false` gives the paper's rule.
//! With `n = 1` both rules give the single worker.
//!
//! `choices = M` generalises the rule to `M` candidates `c_i = h_i(k) mod n`, the holistic
//! paper's PK-5 (Katsipoulakis, Labrinidis and Chrysanthis, "A Holistic View of Stream
//! Partitioning Costs", PVLDB 10(11), 2017, Section 5.1: "partial key (PK) with 2 and 5
//! candidate workers"). Candidates 3 and above are kept as hashed, duplicates included,
//! and the least loaded wins, ties to the earliest candidate: the candidate rule of the
//! holistic groupers (`groupers/holistic.rs`). `M = 2`, the default, is PKG exactly.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting, NULL_KEY, route_each};
use crate::hash::{HashFamily, Key, Remainder, RemainderVisitor, candidate_seed, with_remainder};
use crate::keys::{KeyBatch, KeyVisitor};
use crate::loads::{LoadScope, LoadVector, first_least};
use crate::params::{ParamError, DISTINCT_CANDIDATES, ParamReader, ParamSpec, ParamValue};
use crate::grouper::restore_state;
use serde::{Deserialize, Serialize};

pub const INFO: GrouperInfo = GrouperInfo {
    name: "pkg",
    title: "Partial key grouping (power of both choices)",
    paper: "Nasir et al., The power of both choices: Practical load balancing for distributed stream \
            processing engines, ICDE 2015",
    params: &[
        DISTINCT_CANDIDATES,
        ParamSpec {
            name: "choices",
            default: ParamValue::Int(2),
            doc: "candidates per key, 2 to 32: 2 is PKG, 5 the holistic paper's PK-5",
        },
    ],
    build,
    restore: restore_state::<PartialKeyGrouping>,
};

fn build(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let distinct_candidates = params.bool("distinct_candidates")?;
    let choices = params.int("choices")?;
    if !choices_in_range(choices) {
        return Err(params.refuse(ParamError::not_in("choices", MIN_CHOICES, MAX_CHOICES, choices)));
    }
    let mut pkg = PartialKeyGrouping::new(config.hashes, distinct_candidates, config.loads);
    pkg.choices = choices as u32;
    Ok(Box::new(pkg))
}

/// The fewest candidates a key may have: PKG's two.
pub const MIN_CHOICES: i64 = 2;

/// The most candidates a key may have, as for the holistic groupers.
pub const MAX_CHOICES: i64 = 32;

/// Whether `choices` is a valid `M`, from [`MIN_CHOICES`] to [`MAX_CHOICES`].
fn choices_in_range(choices: i64) -> bool {
    (MIN_CHOICES..=MAX_CHOICES).contains(&choices)
}

#[derive(Serialize, Deserialize)]
pub struct PartialKeyGrouping {
    hashes: HashFamily,
    distinct_candidates: bool,
    /// `M`, the candidates per key; 2 takes the two-candidate paths below.
    choices: u32,
    loads: LoadVector,
}

impl PartialKeyGrouping {
    /// PKG with its two candidates.
    pub fn new(hashes: HashFamily, distinct_candidates: bool, loads: LoadVector) -> Self {
        Self { hashes, distinct_candidates, choices: 2, loads }
    }

    /// PK-M for `M > 2`: the least loaded of candidates 1..=M, ties to the earliest.
    fn route_among_many(&mut self, key: Key<'_>) -> u32 {
        let (first, second) = self.candidates(key);
        let (hashes, loads) = (&self.hashes, &self.loads);
        let more = (3..=u64::from(self.choices)).map(|index| hashes.candidate(index, key));
        let candidates = [first, second].into_iter().chain(more);
        let (best, _) = first_least(candidates.map(|worker| (worker, loads.get(worker))))
            .expect("at least two candidates");
        self.loads.add(best, 1);
        best
    }

    /// The two candidates of `key`, in tie-breaking order.
    #[inline(always)]
    pub fn candidates(&self, key: Key<'_>) -> (u32, u32) {
        self.hashes.two_candidates(key, self.distinct_candidates)
    }
}

impl Grouper for PartialKeyGrouping {
    fn name(&self) -> &'static str {
        INFO.name
    }

    // Inlined into the batch loop of every key layout, where integer keys have a constant
    // length and the hash compiles to its 8-byte path.
    #[inline(always)]
    fn route(&mut self, key: Key<'_>) -> u32 {
        if self.choices != 2 {
            return self.route_among_many(key);
        }
        let (first, second) = self.candidates(key);
        let worker = self.loads.less_loaded_of_two(first, second);
        self.loads.add(worker, 1);
        worker
    }

    /// With at least `n / 4` keys, the batch routes against the loads as one dense array
    /// ([`LoadVector::with_dense_loads`]), compiled per remainder form: a private vector
    /// in one go, a shared handle in bursts of its publish interval, each against its view
    /// of the global loads, as one tuple at a time would.
    fn route_batch(&mut self, keys: &KeyBatch<'_>, out: &mut [u32]) {
        let workers = self.hashes.workers() as usize;
        if self.choices != 2 || keys.len() < workers / 4 {
            return route_each(self, keys, out);
        }
        let burst = match self.loads.scope() {
            LoadScope::Private => keys.len(),
            LoadScope::Shared => self.loads.publish_interval() as usize,
        };
        let seed = self.hashes.grouper_seed();
        let seeds = [candidate_seed(seed, 1), candidate_seed(seed, 2)];
        for (start, out) in (0..keys.len()).step_by(burst.max(1)).zip(out.chunks_mut(burst.max(1)))
        {
            let keys = keys.rows(start, out.len());
            self.loads.with_dense_loads(|loads: &mut [u64]| {
                let batch_loop = PkgBatchLoop {
                    seeds,
                    distinct_candidates: self.distinct_candidates,
                    keys: &keys,
                    out,
                    loads,
                };
                with_remainder(self.hashes.worker_modulus(), batch_loop)
            });
        }
    }

    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
        let built = built_as::<Self>(built)?;
        same_setting("hash family", &self.hashes, &built.hashes)?;
        same_setting("choices", &self.choices, &built.choices)?;
        same_setting("distinct_candidates", &self.distinct_candidates, &built.distinct_candidates)
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.hashes.workers();
        if self.loads.workers() != n {
            return Err(format!("{} load counters for {n} workers", self.loads.workers()));
        }
        // Routing hashes `M` candidates per tuple: a larger `M` would hold up every tuple.
        if !choices_in_range(i64::from(self.choices)) {
            return Err(format!("{} choices", self.choices));
        }
        Ok(())
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.loads.state_bytes()
    }
}

/// PKG's batch loop over a dense copy of private loads, for one remainder form.
struct PkgBatchLoop<'a, 'k> {
    seeds: [u64; 2],
    distinct_candidates: bool,
    keys: &'a KeyBatch<'k>,
    out: &'a mut [u32],
    loads: &'a mut [u64],
}

impl RemainderVisitor for PkgBatchLoop<'_, '_> {
    type Output = ();

    fn visit<R: Remainder>(self, remainder: R) {
        let PkgBatchLoop { seeds, distinct_candidates, keys, out, loads } = self;
        let workers = loads.len() as u32;
        keys.visit(&mut PkgRows { seeds, distinct_candidates, workers, remainder, out, loads });
    }
}

struct PkgRows<'a, R> {
    seeds: [u64; 2],
    distinct_candidates: bool,
    workers: u32,
    remainder: R,
    out: &'a mut [u32],
    loads: &'a mut [u64],
}

impl<R: Remainder> KeyVisitor for PkgRows<'_, R> {
    /// [`PartialKeyGrouping::route`], written for the CPU: both candidates' counters are
    /// stored back, the chosen one plus one, so that every store's address is known as
    /// soon as the key is hashed. Storing only the chosen counter gives the store an
    /// address that waits for the comparison, and the next tuple's loads, which often hit
    /// the same counter, then stall or are replayed.
    #[inline(always)]
    fn visit(&mut self, row: usize, key: Option<Key<'_>>) {
        let key = key.unwrap_or(NULL_KEY);
        let first = self.remainder.rem(key.hash(self.seeds[0])) as u32;
        let second = self.remainder.rem(key.hash(self.seeds[1])) as u32;
        let next = if second + 1 == self.workers { 0 } else { second + 1 };
        let second = if self.distinct_candidates && second == first { next } else { second };
        let first_load = self.loads[first as usize];
        let second_load = self.loads[second as usize];
        // `LoadVector::less_loaded_of_two` on the dense array, kept branch-free here.
        let to_second = second_load < first_load;
        // When the candidates collide (distinct_candidates = false), the second store is
        // the one that counts: `first` is chosen and gets its tuple.
        self.loads[second as usize] = second_load + u64::from(to_second);
        self.loads[first as usize] = first_load + u64::from(!to_second);
        // Which candidate wins is as good as random: a branch here mispredicts often.
        self.out[row] = std::hint::select_unpredictable(to_second, second, first);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_state_refuses_choices_out_of_range() {
        let mut pkg = PartialKeyGrouping::new(HashFamily::new(1, 4), true, LoadVector::private(4));
        for (choices, ok) in [(1, false), (2, true), (32, true), (33, false), (u32::MAX, false)] {
            pkg.choices = choices;
            assert_eq!(pkg.check_state().is_ok(), ok, "{choices}");
        }
    }
}
