//! The sketches groupers keep about the stream, all over `u64` items, the
//! [`fingerprint`](crate::hash::fingerprint)s of keys.
//!
//! * [`SpaceSaving`]: the heaviest items with per-item overestimation bounds (Metwally et
//!   al., ICDT 2005).
//! * [`KeyedSpaceSaving`]: [`SpaceSaving`] that also keeps the key of each monitored item.
//! * [`CountMin`]: a frequency upper bound for every item, optionally with conservative
//!   update (Cormode and Muthukrishnan 2005; Estan and Varghese 2002).
//! * [`HyperLogLog`]: distinct counts in 5-bit packed registers, with the "already sent"
//!   probe of the holistic partitioning paper (Flajolet et al. 2007).
//! * [`SlidingWindowCounter`]: exact counts over the last `N` items, as Pd-Stream samples
//!   hot keys.
//!
//! Every sketch is deterministic: its state and outputs depend only on its parameters and
//! the items inserted, never on the machine. Placement hashes are
//! [`hash_key`](crate::hash::hash_key) of the item's 8 little-endian bytes with documented
//! seeds. Lookup tables hash items with a fixed hasher, and only to find entries: no
//! sketch answer depends on the order of a table.

use serde::{Deserialize, Serialize, Serializer};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use crate::rng::SplitMix64;

pub mod count_min;
pub mod hyperloglog;
pub mod keyed_space_saving;
pub mod sliding_window;
pub mod space_saving;

pub use count_min::CountMin;
pub use hyperloglog::HyperLogLog;
pub use keyed_space_saving::KeyedSpaceSaving;
pub use sliding_window::{Push, SlidingWindowCounter};
pub use space_saving::{Counter, Insertion, SpaceSaving};

/// Makes a sketch check itself whenever serde decodes it, wherever it is embedded (a
/// grouper's state holds sketches too): `$sketch` gets `#[serde(try_from = "$fields")]`,
/// and this defines `$fields` with the same fields (and their serde attributes, which the
/// sketch's own fields must repeat), decoded as they are and then checked
/// by [`SketchSnapshot::validate`](crate::snapshot::SketchSnapshot::validate). The struct
/// literal inside names every field, so a field added to the sketch and not here fails
/// to compile.
macro_rules! checked_on_decode {
    ($sketch:ident, $fields:ident { $($(#[$attribute:meta])* $field:ident: $ty:ty),* $(,)? }) => {
        #[derive(serde::Deserialize)]
        struct $fields {
            $($(#[$attribute])* $field: $ty),*
        }

        impl TryFrom<$fields> for $sketch {
            type Error = String;

            fn try_from(fields: $fields) -> Result<Self, String> {
                let sketch = $sketch { $($field: fields.$field),* };
                crate::snapshot::SketchSnapshot::validate(&sketch)?;
                Ok(sketch)
            }
        }
    };
}
pub(crate) use checked_on_decode;

/// A sketch could not be built or merged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SketchError {
    /// Parameter `name` is out of range; the message reads "`name` `reason`".
    Parameter { name: &'static str, reason: String },
    /// Two sketches that do not share their shape or seed cannot be merged.
    Incompatible { reason: String },
}

impl SketchError {
    pub(crate) fn parameter(name: &'static str, reason: impl Into<String>) -> Self {
        SketchError::Parameter { name, reason: reason.into() }
    }
}

impl fmt::Display for SketchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SketchError::Parameter { name, reason } => write!(f, "{name} {reason}"),
            SketchError::Incompatible { reason } => write!(f, "cannot merge: {reason}"),
        }
    }
}

impl std::error::Error for SketchError {}

/// The reason given when `bytes` of state cannot be allocated.
pub(crate) fn too_large(bytes: Option<usize>) -> String {
    match bytes {
        Some(bytes) => format!("needs {bytes} bytes of state, which cannot be allocated"),
        None => "needs more bytes of state than the address space holds".to_owned(),
    }
}

/// The hasher of the sketches' lookup tables: an item hashes to the first output of
/// SplitMix64 seeded with it, a bijection that spreads even sequential integers over all
/// 64 bits.
///
/// Not SipHash with a random key: lookups need no defence against chosen keys here, since
/// items are already XXH3 fingerprints, and a fixed hasher keeps a table's layout, speed
/// and memory the same on every run.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default)]
pub(crate) struct ItemHasher(u64);

impl Hasher for ItemHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u64(&mut self, item: u64) {
        self.0 = SplitMix64::new(self.0 ^ item).next_u64();
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A lookup table keyed by item.
pub(crate) type ItemMap<V> = HashMap<u64, V, BuildHasherDefault<ItemHasher>>;

/// A set of items.
pub(crate) type ItemSet = HashSet<u64, BuildHasherDefault<ItemHasher>>;

/// Serializes an [`ItemMap`] in item order (`#[serde(serialize_with = ...)]`), so that a
/// snapshot's bytes depend on the state alone, not on the order the table iterates in,
/// which its insertion history and the standard library decide. It reads back as any map.
pub(crate) fn serialize_sorted<V: Serialize, S: Serializer>(
    map: &ItemMap<V>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut entries: Vec<(&u64, &V)> = map.iter().collect();
    entries.sort_unstable_by_key(|&(item, _)| *item);
    serializer.collect_map(entries)
}

/// [`serialize_sorted`] for an [`ItemSet`].
pub(crate) fn serialize_sorted_set<S: Serializer>(
    set: &ItemSet,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut items: Vec<u64> = set.iter().copied().collect();
    items.sort_unstable();
    serializer.collect_seq(items)
}

/// [`serialize_sorted`] for each map of a vector.
pub(crate) fn serialize_sorted_each<V: Serialize, S: Serializer>(
    maps: &[ItemMap<V>],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    struct Sorted<'a, V>(&'a ItemMap<V>);
    impl<V: Serialize> Serialize for Sorted<'_, V> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serialize_sorted(self.0, serializer)
        }
    }
    serializer.collect_seq(maps.iter().map(Sorted))
}

/// An empty [`ItemMap`] that holds up to `live` entries at a time without ever growing,
/// with its size in bytes as [`map_bytes`] counts them; `None` if it cannot be allocated.
///
/// A removal may leave a tombstone in hashbrown's table; once tombstones use up its room,
/// the table is rehashed in place if at most half of that room is live, and doubled
/// otherwise. Room for twice the live entries thus keeps it one size however entries
/// churn. Its `capacity()` is no measure of that size: it shrinks as tombstones pile up.
pub(crate) fn item_map<V>(live: usize) -> Option<(ItemMap<V>, usize)> {
    let mut map = ItemMap::default();
    map.try_reserve(live.checked_mul(2)?).ok()?;
    let bytes = map_bytes::<V>(map.capacity())?;
    Some((map, bytes))
}

/// The bytes [`item_map`] needs for `live` entries, at least.
pub(crate) fn item_map_bytes<V>(live: usize) -> Option<usize> {
    map_bytes::<V>(live.checked_mul(2)?)
}

/// The bytes of a table with room for `entries` entries: one entry and one control byte
/// each. Hashbrown's spare buckets (up to 1/8 more, for probing) are not counted.
pub(crate) fn map_bytes<V>(entries: usize) -> Option<usize> {
    entries.checked_mul(std::mem::size_of::<(u64, V)>() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_parameter_and_the_problem() {
        let error = SketchError::parameter("capacity", "must be at least 1, got 0");
        assert_eq!(error.to_string(), "capacity must be at least 1, got 0");
    }

    #[test]
    fn item_maps_never_grow_under_churn() {
        for live in [1, 7, 100] {
            let (mut map, bytes) = item_map::<u32>(live).unwrap();
            let room = map.capacity();
            assert!(room >= 2 * live);
            assert_eq!(bytes, map_bytes::<u32>(room).unwrap());
            for item in 0..100 * live as u64 {
                map.insert(item, 0);
                if map.len() > live {
                    map.remove(&(item - live as u64));
                }
                // A doubled table would report more room than it was given.
                assert!(map.capacity() <= room);
            }
        }
        assert!(item_map::<u32>(usize::MAX).is_none());
        assert!(item_map::<u32>(usize::MAX / 4).is_none());
    }

    #[test]
    fn the_item_hasher_is_fixed() {
        let mut hasher = ItemHasher::default();
        hasher.write_u64(0);
        assert_eq!(hasher.finish(), SplitMix64::new(0).next_u64());
    }
}
