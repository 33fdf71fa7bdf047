//! Shuffle grouping (SG, SH): round robin, no key affinity. Apache Storm's shuffle
//! grouping, the baseline of Nasir, De Francisci Morales, García-Soriano, Kourtellis and
//! Serafini, "The power of both choices: Practical load balancing for distributed stream
//! processing engines", ICDE 2015.
//!
//! Specification: `docs/baselines.md`, section "Shuffle grouping". Tuple `i` of a source
//! goes to worker `i mod n`, whatever its key; the seed is not used, so every source starts
//! at worker 0, as Storm's shuffle grouping does per task.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, built_as};
use crate::hash::Key;
use crate::keys::KeyBatch;
use crate::loads::LoadVector;
use crate::params::ParamReader;
use crate::grouper::restore_state;
use serde::{Deserialize, Serialize};

pub const INFO: GrouperInfo = GrouperInfo {
    name: "shuffle",
    title: "Shuffle grouping (round robin)",
    paper: "Shuffle grouping (Storm's round robin): the baseline of Nasir et al., The power of both \
            choices, ICDE 2015",
    params: &[],
    build,
    restore: restore_state::<Shuffle>,
};

fn build(config: GrouperConfig, _: &mut ParamReader<'_>) -> Result<Box<dyn Grouper>, ConfigError> {
    Ok(Box::new(Shuffle { next: 0, workers: config.workers, loads: config.loads }))
}

#[derive(Serialize, Deserialize)]
pub struct Shuffle {
    next: u32,
    workers: u32,
    loads: LoadVector,
}

impl Grouper for Shuffle {
    fn name(&self) -> &'static str {
        INFO.name
    }

    // Inlined into the batch loop of every key layout, where integer keys have a constant
    // length and the hash compiles to its 8-byte path.
    #[inline(always)]
    fn route(&mut self, _key: Key<'_>) -> u32 {
        let worker = self.next;
        self.next = if worker + 1 == self.workers { 0 } else { worker + 1 };
        self.loads.add(worker, 1);
        worker
    }

    /// The ids cycle whatever the keys; the loads of a batch are whole rounds plus one
    /// tuple for each worker of the last, partial round.
    fn route_batch(&mut self, keys: &KeyBatch<'_>, out: &mut [u32]) {
        let start = self.next;
        let mut worker = start;
        for slot in out.iter_mut() {
            *slot = worker;
            worker = if worker + 1 == self.workers { 0 } else { worker + 1 };
        }
        self.next = worker;
        debug_assert_eq!(out.len(), keys.len());
        let rounds = (out.len() / self.workers as usize) as u64;
        let partial = out.len() % self.workers as usize;
        if rounds == 0 {
            for &worker in out.iter() {
                self.loads.add(worker, 1);
            }
            return;
        }
        for offset in 0..self.workers {
            let worker = (start as u64 + offset as u64) % self.workers as u64;
            self.loads.add(worker as u32, rounds + u64::from((offset as usize) < partial));
        }
    }

    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String> {
        // Shuffle's only setting is its worker count, which restore compares already.
        built_as::<Self>(built).map(|_| ())
    }

    fn check_state(&self) -> Result<(), String> {
        let n = self.workers;
        if self.loads.workers() != n {
            return Err(format!("{} load counters for {n} workers", self.loads.workers()));
        }
        // The cursor wraps to 0 when it reaches `n`: it is always a worker.
        if self.next >= n {
            return Err(format!("a next worker {} of {n}", self.next));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_state_refuses_a_cursor_or_loads_out_of_range() {
        let shuffle =
            |next, workers, loads| Shuffle { next, workers, loads: LoadVector::private(loads) };
        assert_eq!(shuffle(2, 3, 3).check_state(), Ok(()));
        assert!(shuffle(3, 3, 3).check_state().is_err());
        assert!(shuffle(0, 3, 4).check_state().is_err());
    }
}
