//! Partial key grouping (PKG): Nasir et al., "The power of both choices: Practical load
//! balancing for distributed stream processing engines", ICDE 2015.
//!
//! Specification: `spec/baselines.md`, "Partial key grouping". The candidates are
//! `c1 = h_1(k) mod n` and `c2 = h_2(k) mod n`; the tuple goes to the one with the smaller
//! local load, ties to `c1`.
//!
//! Choice: the paper lets the two hashes collide, so a key may have one candidate only.
//! Apache Storm 2.x forces distinct candidates by moving `c2` to `(c2 + 1) mod n`; that is
//! the default here (`distinct_candidates = true`), and `false` gives the paper's rule.
//! With `n = 1` both rules give the single worker.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, NULL_KEY, route_each};
use crate::hash::{HashFamily, Key, Remainder, RemainderVisitor, candidate_seed, with_remainder};
use crate::keys::{KeyBatch, KeyVisitor};
use crate::loads::{LoadScope, LoadVector};
use crate::params::{ParamReader, ParamSpec, ParamValue};
use crate::snapshot::restore_state;
use serde::{Deserialize, Serialize};

pub const INFO: GrouperInfo = GrouperInfo {
    name: "pkg",
    title: "Partial key grouping (power of both choices)",
    paper: "Nasir et al., The power of both choices, ICDE 2015; spec/baselines.md",
    params: &[ParamSpec {
        name: "distinct_candidates",
        default: ParamValue::Bool(true),
        doc: "force c2 != c1 as Apache Storm does; false lets them collide as in the paper",
    }],
    build,
    restore: restore_state::<PartialKeyGrouping>,
};

fn build(
    config: GrouperConfig,
    params: &mut ParamReader<'_>,
) -> Result<Box<dyn Grouper>, ConfigError> {
    let distinct_candidates = params.bool("distinct_candidates")?;
    Ok(Box::new(PartialKeyGrouping::new(config.hashes, distinct_candidates, config.loads)))
}

#[derive(Serialize, Deserialize)]
pub struct PartialKeyGrouping {
    hashes: HashFamily,
    distinct_candidates: bool,
    loads: LoadVector,
}

impl PartialKeyGrouping {
    pub fn new(hashes: HashFamily, distinct_candidates: bool, loads: LoadVector) -> Self {
        Self { hashes, distinct_candidates, loads }
    }

    /// The two candidates of `key`, in tie-breaking order.
    #[inline(always)]
    pub fn candidates(&self, key: Key<'_>) -> (u32, u32) {
        let first = self.hashes.candidate(1, key);
        let mut second = self.hashes.candidate(2, key);
        if self.distinct_candidates && second == first {
            second = if second + 1 == self.hashes.workers() { 0 } else { second + 1 };
        }
        (first, second)
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
        let (first, second) = self.candidates(key);
        let worker = if self.loads.get(second) < self.loads.get(first) { second } else { first };
        self.loads.add(worker, 1);
        worker
    }

    /// With private loads and at least `n / 4` keys, the batch routes against a dense
    /// copy of the loads (see [`LoadVector::with_private_copy`]), compiled per remainder
    /// form. Shared loads are read and bumped tuple by tuple, as the global view requires.
    fn route_batch(&mut self, keys: &KeyBatch<'_>, out: &mut [u32]) {
        let private = self.loads.scope() == LoadScope::Private;
        if private && keys.len() >= self.hashes.workers() as usize / 4 {
            let seed = self.hashes.grouper_seed();
            let batch_loop = |loads: &mut [u64]| {
                let batch_loop = PkgBatchLoop {
                    seeds: [candidate_seed(seed, 1), candidate_seed(seed, 2)],
                    distinct_candidates: self.distinct_candidates,
                    keys,
                    out,
                    loads,
                };
                with_remainder(self.hashes.worker_modulus(), batch_loop)
            };
            self.loads.with_private_copy(batch_loop);
            return;
        }
        route_each(self, keys, out);
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
        let to_second = second_load < first_load;
        // When the candidates collide (distinct_candidates = false), the second store is
        // the one that counts: `first` is chosen and gets its tuple.
        self.loads[second as usize] = second_load + u64::from(to_second);
        self.loads[first as usize] = first_load + u64::from(!to_second);
        self.out[row] = if to_second { second } else { first };
    }
}
