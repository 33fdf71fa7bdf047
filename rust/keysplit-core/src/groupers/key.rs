//! Key grouping (KG, FLD, "hash"): one worker per key. Apache Storm's fields grouping, the
//! baseline of Nasir, De Francisci Morales, García-Soriano, Kourtellis and Serafini, "The
//! power of both choices: Practical load balancing for distributed stream processing
//! engines", ICDE 2015.
//!
//! Specification: `docs/baselines.md`, section "Key grouping". A key goes to
//! `h_0(k) mod n`.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as, same_setting, NULL_KEY, route_each};
use crate::hash::{HashFamily, Key, Remainder, RemainderVisitor, candidate_seed, with_remainder};
use crate::keys::{KeyBatch, KeyVisitor};
use crate::loads::LoadVector;
use crate::parallel::{batch_threads, row_ranges};
use crate::params::ParamReader;
use crate::grouper::restore_state;
use serde::{Deserialize, Serialize};

pub const INFO: GrouperInfo = GrouperInfo {
    name: "key",
    title: "Key grouping (hash partitioning)",
    paper: "Key grouping (Storm's fields grouping, hash partitioning): the baseline of Nasir et al., \
            The power of both choices, ICDE 2015",
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
    /// remainder form (a mask for a power-of-two `n`). A key's worker depends on nothing
    /// else, so a large batch is cut into parts routed on several threads
    /// ([`crate::parallel`]) with the same ids and counts.
    fn route_batch(&mut self, keys: &KeyBatch<'_>, out: &mut [u32]) {
        let workers = self.hashes.workers() as usize;
        if keys.len() < workers {
            // Fewer keys than counters: counting locally would cost more than it saves.
            return route_each(self, keys, out);
        }
        let seed = candidate_seed(self.hashes.grouper_seed(), 0);
        let modulus = self.hashes.worker_modulus();
        let route_part = |keys: &KeyBatch<'_>, out: &mut [u32]| {
            let mut counts = vec![0u64; workers];
            with_remainder(modulus, KeyBatchLoop { seed, keys, out, counts: &mut counts });
            counts
        };
        let threads = batch_threads(keys.len());
        if threads == 1 {
            self.loads.add_counts(&route_part(keys, out));
            return;
        }
        let ranges: Vec<(usize, usize)> = row_ranges(keys.len(), threads).collect();
        let mut counts = vec![0u64; workers];
        let mut add = |part: Vec<u64>| counts.iter_mut().zip(part).for_each(|(c, p)| *c += p);
        let mut unrouted = Vec::new();
        std::thread::scope(|scope| {
            let mut outs = Vec::with_capacity(ranges.len());
            let mut rest = &mut *out;
            for &(_, len) in &ranges {
                let (part, tail) = std::mem::take(&mut rest).split_at_mut(len);
                outs.push(part);
                rest = tail;
            }
            let mut outs = outs.into_iter();
            let first_out = outs.next().expect("at least one part");
            let mut handles = Vec::with_capacity(ranges.len() - 1);
            for (&(start, len), part_out) in ranges[1..].iter().zip(outs) {
                let part_keys = keys.rows(start, len);
                let part = move || route_part(&part_keys, part_out);
                match std::thread::Builder::new().spawn_scoped(scope, part) {
                    Ok(handle) => handles.push(handle),
                    // No thread to be had (a process limit): routed here once the scope ends.
                    Err(_) => unrouted.push((start, len)),
                }
            }
            let (start, len) = ranges[0];
            add(route_part(&keys.rows(start, len), first_out));
            for handle in handles {
                add(handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            }
        });
        for (start, len) in unrouted {
            add(route_part(&keys.rows(start, len), &mut out[start..start + len]));
        }
        self.loads.add_counts(&counts);
    }

    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
        same_setting("hash family", &self.hashes, &built_as::<Self>(built)?.hashes)
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.hashes.workers();
        if self.loads.workers() != n {
            return Err(format!("{} load counters for {n} workers", self.loads.workers()));
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

#[cfg(test)]
mod tests {
    #[test]
    fn check_state_refuses_loads_of_another_worker_count() {
        use super::{Grouper, HashFamily, KeyGrouping, LoadVector};
        let hashes = HashFamily::new(1, 3);
        assert_eq!(KeyGrouping { hashes, loads: LoadVector::private(3) }.check_state(), Ok(()));
        assert!(KeyGrouping { hashes, loads: LoadVector::private(4) }.check_state().is_err());
    }
}
