//! The `Grouper` trait, what every grouper is built from, and how its state is saved and
//! decoded. The list of groupers and the building of one by name are in
//! [`crate::registry`](mod@crate::registry).

use crate::error::{ConfigError, RouteError};
use crate::hash::{HashFamily, Key};
use crate::keys::{KeyBatch, KeyVisitor};
use crate::loads::LoadVector;
use crate::params::{ParamReader, ParamSpec};
use crate::snapshot::{SnapshotError, decode_exact, encode_state};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::any::Any;
use std::fmt;

pub use crate::loads::MAX_WORKERS;

pub use crate::hash::NULL_KEY;

/// What to do with null keys. They are never dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NullPolicy {
    /// Refuse the whole batch before routing any of it.
    #[default]
    Raise,
    /// Route every null as one key, the empty byte string [`NULL_KEY`]. Nulls then share
    /// their worker (and any routing state) with `""` and `b""`, but stay a group of their
    /// own in any aggregation downstream, as in SQL's `GROUP BY`.
    Group,
}

/// A partitioner of a keyed stream over `n` workers, as one source sees it.
///
/// A grouper is a state machine driven by the tuples of one source: routing a batch must
/// be exactly routing its keys one at a time, in order.
pub trait Grouper: Send + SaveState + Any {
    /// The registry name, e.g. `"pkg"`.
    fn name(&self) -> &'static str;

    /// Routes one tuple with key `key` and returns its worker in `0..n`.
    fn route(&mut self, key: Key<'_>) -> u32;

    /// Routes every key of `keys` in order into `out`; a null routes as [`NULL_KEY`].
    ///
    /// `out.len() == keys.len()`, checked by [`route_batch`]. Overriding this is only for
    /// speed: the result must equal calling [`Grouper::route`] key by key.
    fn route_batch(&mut self, keys: &KeyBatch<'_>, out: &mut [u32]) {
        route_each(self, keys, out);
    }

    /// Marks the end of a window (of time or of tuples). Groupers without windowed state
    /// ignore it.
    fn end_window(&mut self) {}

    /// The tuples this source has sent to each worker, or the global view when shared.
    fn loads(&self) -> &LoadVector;

    /// Bytes of routing state: tables, sketches and load counters.
    fn state_bytes(&self) -> usize;

    fn workers(&self) -> u32 {
        self.loads().workers()
    }

    /// Checks a decoded state before it routes: its fields agree with each other, with
    /// the worker count and with the grouper's parameters, so that no routing on it can
    /// panic, loop or route out of range. Restore calls it; every state that routing
    /// produces passes it. A snapshot is state read back from storage, where a bug or a
    /// flipped bit may have changed it under a valid checksum.
    fn check_state(&self) -> Result<(), String>;

    /// Checks that a decoded state was built with the configuration of `built`, a new
    /// grouper of the same kind made from the snapshot header's seed, workers and
    /// parameters: its hash family and every field its parameters set. Restore calls it
    /// after [`Grouper::check_state`], so that a state never routes under parameters other
    /// than the ones its header reports. Fields the stream changes are not compared.
    fn check_configuration(&self, built: &dyn Grouper) -> Result<(), String>;
}

/// `built` as the grouper type `G` of a state being restored (see
/// [`Grouper::check_configuration`]).
pub fn built_as<G: Grouper>(built: &dyn Grouper) -> Result<&G, String> {
    let built: &dyn Any = built;
    built.downcast_ref::<G>().ok_or_else(|| "a header of another grouper type".to_owned())
}

/// One configuration field of a restored state against the one built from its header.
pub fn same_setting<T: PartialEq + fmt::Debug>(
    name: &str,
    state: &T,
    built: &T,
) -> Result<(), String> {
    if state == built {
        Ok(())
    } else {
        Err(format!("the state's {name} is {state:?}, its header's {built:?}"))
    }
}

/// Routes every key of `keys` with [`Grouper::route`], one at a time: the default batch
/// loop, for the groupers whose own loop only pays off on some batches.
#[inline]
pub fn route_each<G: Grouper + ?Sized>(grouper: &mut G, keys: &KeyBatch<'_>, out: &mut [u32]) {
    keys.visit(&mut RouteInto { grouper, out });
}

/// The batch loop of [`Grouper::route_batch`]: routes each row into its output slot.
struct RouteInto<'a, G: ?Sized> {
    grouper: &'a mut G,
    out: &'a mut [u32],
}

impl<G: Grouper + ?Sized> KeyVisitor for RouteInto<'_, G> {
    #[inline(always)]
    fn visit(&mut self, row: usize, key: Option<Key<'_>>) {
        self.out[row] = self.grouper.route(key.unwrap_or(NULL_KEY));
    }
}

/// Routes `keys` into `out` after checking the batch against `nulls`, so that a refused
/// batch changes no state.
pub fn route_batch(
    grouper: &mut dyn Grouper,
    keys: &KeyBatch<'_>,
    nulls: NullPolicy,
    out: &mut [u32],
) -> Result<(), RouteError> {
    if out.len() != keys.len() {
        return Err(RouteError::OutputLength { keys: keys.len(), out: out.len() });
    }
    if nulls == NullPolicy::Raise {
        let null_count = keys.null_count();
        if null_count > 0 {
            return Err(RouteError::NullKeys { nulls: null_count });
        }
    }
    grouper.route_batch(keys, out);
    // A shared load vector's last tuples of the batch become visible to the other sources.
    grouper.loads().publish();
    Ok(())
}

/// What every grouper is built from, besides its own parameters.
pub struct GrouperConfig {
    pub workers: u32,
    pub hashes: HashFamily,
    pub loads: LoadVector,
}

/// A registry entry: a grouper's name, its paper and its parameters with their defaults.
pub struct GrouperInfo {
    pub name: &'static str,
    pub title: &'static str,
    /// The publication the grouper follows (authors, title, venue, year). The baselines are
    /// also specified in the repository's `docs/baselines.md`.
    pub paper: &'static str,
    pub params: &'static [ParamSpec],
    pub build: BuildFn,
    /// Decodes this grouper's snapshot state (see [`crate::snapshot`]).
    pub restore: RestoreFn,
}

/// Builds a grouper from its configuration and its own parameters.
pub type BuildFn = fn(GrouperConfig, &mut ParamReader<'_>) -> Result<Box<dyn Grouper>, ConfigError>;

/// The fields of a grouper as snapshot state. Every grouper has it, since [`Grouper`]
/// requires it and every `Serialize` type provides it.
pub trait SaveState {
    fn save_state(&self) -> Result<Vec<u8>, SnapshotError>;
}

impl<T: Serialize> SaveState for T {
    fn save_state(&self) -> Result<Vec<u8>, SnapshotError> {
        encode_state(self)
    }
}

/// Decodes a grouper of type `G` from snapshot state: each registry entry's `restore`.
pub type RestoreFn = fn(&[u8]) -> Result<Box<dyn Grouper>, SnapshotError>;

pub(crate) fn restore_state<G: Grouper + DeserializeOwned + 'static>(
    state: &[u8],
) -> Result<Box<dyn Grouper>, SnapshotError> {
    Ok(Box::new(decode_exact::<G>("state", state)?))
}

/// Test support: `state` passes [`Grouper::check_state`], and each forgery, applied to a
/// copy of it decoded from its snapshot encoding as a restore would, is refused.
#[cfg(test)]
pub(crate) fn assert_forgeries_refused<G, F>(state: &G, forgeries: impl IntoIterator<Item = F>)
where
    G: Grouper + DeserializeOwned,
    F: FnOnce(&mut G),
{
    let bytes = state.save_state().unwrap();
    for (i, forge) in forgeries.into_iter().enumerate() {
        let mut forged: G = decode_exact("state", &bytes).unwrap();
        assert_eq!(forged.check_state(), Ok(()));
        forge(&mut forged);
        assert!(forged.check_state().is_err(), "forgery {i} passed");
    }
}
