//! Key grouping (KG, FLD, "hash"): one worker per key.
//!
//! Specification: `spec/baselines.md`, "Key grouping". A key goes to `h_0(k) mod n`.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo};
use crate::hash::{HashFamily, Key};
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

    fn loads(&self) -> &LoadVector {
        &self.loads
    }

    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.loads.state_bytes()
    }
}
