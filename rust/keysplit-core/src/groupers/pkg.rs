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
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo};
use crate::hash::{HashFamily, Key};
use crate::loads::LoadVector;
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

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.loads.state_bytes()
    }
}
