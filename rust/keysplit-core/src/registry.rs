//! Every grouper by name: the list ([`registry`]), and building one by name and
//! parameters ([`build`]) or from a snapshot ([`GrouperInstance::restore`]).
//!
//! The list itself is in [`crate::groupers`], one line per grouper module.

use crate::error::ConfigError;
use crate::grouper::{Grouper, GrouperConfig, GrouperInfo, MAX_WORKERS};
use crate::groupers;
use crate::hash::HashFamily;
use crate::loads::LoadVector;
use crate::params::{ParamReader, Params};
use crate::snapshot::{SKETCH_KIND_PREFIX, Snapshot, SnapshotError};

/// Every grouper keysplit has, in the order the documentation lists them.
pub fn registry() -> &'static [GrouperInfo] {
    groupers::REGISTRY
}

pub fn lookup(name: &str) -> Result<&'static GrouperInfo, ConfigError> {
    registry().iter().find(|info| info.name == name).ok_or_else(|| ConfigError::UnknownGrouper {
        name: name.to_owned(),
        known: registry().iter().map(|info| info.name).collect(),
    })
}

/// A built grouper with the configuration it was built from.
pub struct GrouperInstance {
    pub info: &'static GrouperInfo,
    pub seed: u64,
    /// Every parameter with its effective value, defaults included.
    pub params: Params,
    pub grouper: Box<dyn Grouper>,
}

/// Builds grouper `name` over `workers` workers. `loads` is a handle on a shared load
/// vector when several sources share a global view; `None` gives private counters.
pub fn build(
    name: &str,
    workers: u64,
    seed: u64,
    params: &Params,
    loads: Option<LoadVector>,
) -> Result<GrouperInstance, ConfigError> {
    let info = lookup(name)?;
    let workers = match u32::try_from(workers) {
        Ok(w) if (1..=MAX_WORKERS).contains(&w) => w,
        _ => return Err(ConfigError::Workers { workers, max: MAX_WORKERS }),
    };
    let loads = match loads {
        Some(shared) if shared.workers() == workers => shared,
        Some(shared) => {
            return Err(ConfigError::SharedLoads { loads: shared.workers(), workers });
        }
        None => LoadVector::private(workers),
    };
    let config = GrouperConfig { workers, hashes: HashFamily::new(seed, workers), loads };
    let mut reader = ParamReader::new(info.name, info.params, params)?;
    let grouper = (info.build)(config, &mut reader)?;
    let params = reader.finish();
    Ok(GrouperInstance { info, seed, params, grouper })
}

/// A grouper's configuration and whole state, in the format of this module.
pub fn snapshot_grouper(
    info: &GrouperInfo,
    seed: u64,
    params: &Params,
    grouper: &dyn Grouper,
) -> Result<Vec<u8>, SnapshotError> {
    Snapshot {
        kind: info.name.to_owned(),
        workers: grouper.workers(),
        seed,
        params: params.clone(),
        library: env!("CARGO_PKG_VERSION").to_owned(),
        state: grouper.save_state()?,
    }
    .encode()
}

impl GrouperInstance {
    pub fn snapshot(&self) -> Result<Vec<u8>, SnapshotError> {
        snapshot_grouper(self.info, self.seed, &self.params, self.grouper.as_ref())
    }

    /// The grouper a [`snapshot_grouper`] holds, ready to route the next tuple.
    /// A shared load vector restores as a new shared vector that no other source holds
    /// yet: other sources' handles are not part of one source's snapshot.
    pub fn restore(bytes: &[u8]) -> Result<Self, SnapshotError> {
        let snapshot = Snapshot::decode(bytes)?;
        if snapshot.kind.starts_with(SKETCH_KIND_PREFIX) {
            return Err(SnapshotError::WrongKind {
                expected: "a grouper".to_owned(),
                found: snapshot.kind,
            });
        }
        let info = lookup(&snapshot.kind)?;
        let mut instance =
            build(info.name, snapshot.workers.into(), snapshot.seed, &snapshot.params, None)?;
        let grouper = (info.restore)(&snapshot.state)?;
        let mismatch =
            |reason: String| SnapshotError::Mismatch { kind: snapshot.kind.clone(), reason };
        if grouper.name() != info.name {
            return Err(mismatch(format!("the state is a {:?} grouper", grouper.name())));
        }
        if grouper.workers() != snapshot.workers {
            return Err(mismatch(format!(
                "the state has {} workers, the header {}",
                grouper.workers(),
                snapshot.workers
            )));
        }
        grouper.check_state().map_err(mismatch)?;
        grouper.check_configuration(instance.grouper.as_ref()).map_err(mismatch)?;
        instance.grouper = grouper;
        Ok(instance)
    }
}
