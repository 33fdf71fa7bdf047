//! Key grouping (KG, FLD, "hash"): one worker per key.
//!
//! Specification: `spec/baselines.md`, "Key grouping". A key goes to `h_0(k) mod n`.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, NULL_KEY, route_each};
use crate::hash::{HashFamily, Key, Remainder, RemainderVisitor, candidate_seed, with_remainder};
use crate::keys::{KeyBatch, KeyVisitor};
use crate::loads::LoadVector;
use crate::params::ParamReader;
use crate::snapshot::restore_state;
use serde::{Deserialize, Serialize};

pub const INFO: GrouperInfo = GrouperInfo {
    name: "key",
    title: "Key grouping (hash partitioning)",
    paper: "spec/baselines.md: Key grouping (KG, FLD, hash)",
    params: &[],
    build,
    restore: restore_state::<KeyGrouping>,
};

fn build(config: GrouperConfig, _: &mut ParamReader<'_>) -> Result<Box<dyn Grouper>, ConfigError> {
    Ok(Box::new(KeyGrouping { hashes: config.hashes, loads: config.loads }))
}

#[derive(Serialize, Deserialize)]
pub struct KeyGrouping {
    hashes: HashFamily,
    loads: LoadVector,
}

impl Grouper for KeyGrouping {
    fn name(&self) -> &'static str {
        INFO.name
    }

    // Inlined into the batch loop of every key layout, where integer keys have a constant
    // length and the hash compiles to its 8-byte path.
    #[inline(always)]
    fn route(&mut self, key: Key<'_>) -> u32 {
        let worker = self.hashes.candidate(0, key);
        self.loads.add(worker, 1);
        worker
    }

    /// KG never reads its loads, so a batch counts its tuples per worker in a local array
    /// and adds them once at the end (in both load scopes), and the loop is compiled per
    /// remainder form (a mask for a power-of-two `n`).
    fn route_batch(&mut self, keys: &KeyBatch<'_>, out: &mut [u32]) {
        let workers = self.hashes.workers() as usize;
        if keys.len() < workers {
            // Fewer keys than counters: counting locally would cost more than it saves.
            return route_each(self, keys, out);
        }
        let mut counts = vec![0u64; workers];
        let seed = candidate_seed(self.hashes.grouper_seed(), 0);
        with_remainder(
            self.hashes.worker_modulus(),
            KeyBatchLoop { seed, keys, out, counts: &mut counts },
        );
        self.loads.add_counts(&counts);
    }

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.loads.state_bytes()
    }
}

/// KG's batch loop for one remainder form.
struct KeyBatchLoop<'a, 'k> {
    seed: u64,
    keys: &'a KeyBatch<'k>,
    out: &'a mut [u32],
    counts: &'a mut [u64],
}

impl RemainderVisitor for KeyBatchLoop<'_, '_> {
    type Output = ();

    fn visit<R: Remainder>(self, remainder: R) {
        let KeyBatchLoop { seed, keys, out, counts } = self;
        keys.visit(&mut KeyRows { seed, remainder, out, counts });
    }
}

struct KeyRows<'a, R> {
    seed: u64,
    remainder: R,
    out: &'a mut [u32],
    counts: &'a mut [u64],
}

impl<R: Remainder> KeyVisitor for KeyRows<'_, R> {
    #[inline(always)]
    fn visit(&mut self, row: usize, key: Option<Key<'_>>) {
        let worker = self.remainder.rem(key.unwrap_or(NULL_KEY).hash(self.seed)) as usize;
        self.counts[worker] += 1;
        self.out[row] = worker as u32;
    }
}
