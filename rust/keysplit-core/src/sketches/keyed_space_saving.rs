//! [`SpaceSaving`] that remembers each monitored item's key, so that a caller who asks for
//! the heaviest keys gets keys back and not fingerprints.
//!
//! Counting is exactly [`SpaceSaving`]'s: the summary inside is the same state a
//! fingerprint-only sketch would hold for the same items. Only monitored items have a key,
//! at most `capacity` of them, so memory stays bounded by the capacity. A key is recorded
//! once per batch for each item the batch admitted and left monitored, not once per
//! occurrence: in a heavy-tailed stream most insertions replace a counter, and writing a
//! key for each would cost an allocation per tuple.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::keys::KeyLabel;
use crate::sketches::space_saving::{Insertion, SpaceSaving};
use crate::sketches::{ItemMap, SketchError};
use crate::snapshot::{SKETCH_KIND_PREFIX, SketchSnapshot, Snapshot, SnapshotError};

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct KeyedSpaceSaving {
    summary: SpaceSaving,
    /// Ordered so that a snapshot's bytes depend on the state alone.
    keys: BTreeMap<u64, KeyLabel>,
}

impl KeyedSpaceSaving {
    pub fn new(capacity: usize) -> Result<Self, SketchError> {
        Ok(Self::from_summary(SpaceSaving::new(capacity)?))
    }

    /// A sketch whose monitored keys are not known yet, such as one restored from a
    /// fingerprint-only snapshot; [`KeyedSpaceSaving::key`] answers `None` for them.
    pub fn from_summary(summary: SpaceSaving) -> Self {
        Self { summary, keys: BTreeMap::new() }
    }

    pub fn summary(&self) -> &SpaceSaving {
        &self.summary
    }

    /// Counts `items` in order; `key_of(row)` gives the key of `items[row]`, and is called
    /// once for each item this batch admitted that is still monitored at its end. An item
    /// whose key it cannot give (`None`) is counted all the same, with its key unknown.
    pub fn update(&mut self, items: &[u64], mut key_of: impl FnMut(usize) -> Option<KeyLabel>) {
        // The row of each item admitted by this batch and still monitored: a subset of the
        // monitored items, so it never holds more than `capacity` entries.
        let mut admitted: ItemMap<usize> = ItemMap::default();
        // Keys go unknown only through a fingerprint-only restore; the check per counted
        // item is then worth it, to learn them again, and skipped otherwise.
        let some_unknown = self.keys.len() < self.summary.len();
        for (row, &item) in items.iter().enumerate() {
            match self.summary.insert_tracked(item) {
                Insertion::Counted => {
                    if some_unknown && !self.keys.contains_key(&item) {
                        admitted.insert(item, row);
                    }
                }
                Insertion::Admitted => {
                    admitted.insert(item, row);
                }
                Insertion::Replaced { evicted } => {
                    self.keys.remove(&evicted);
                    admitted.remove(&evicted);
                    admitted.insert(item, row);
                }
            }
        }
        for (item, row) in admitted {
            if let Some(key) = key_of(row) {
                self.keys.insert(item, key);
            }
        }
    }

    /// The key of a monitored item, `None` when it is not monitored or not known.
    pub fn key(&self, item: u64) -> Option<&KeyLabel> {
        self.keys.get(&item)
    }

    /// Bytes of the summary plus each recorded key (its entry and its heap bytes).
    pub fn state_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(u64, KeyLabel)>();
        self.summary.state_bytes()
            + self
                .keys
                .values()
                .map(|key| {
                    entry
                        + match key {
                            KeyLabel::Text(s) => s.capacity(),
                            KeyLabel::Bytes(b) => b.capacity(),
                            _ => 0,
                        }
                })
                .sum::<usize>()
    }

    /// Restores this sketch's snapshot, or a plain [`SpaceSaving`] snapshot with no keys
    /// known, so that summaries written before keys were kept still read.
    pub fn restore_either(bytes: &[u8]) -> Result<Self, SnapshotError> {
        let snapshot = Snapshot::decode(bytes)?;
        if snapshot.kind == format!("{SKETCH_KIND_PREFIX}{}", SpaceSaving::NAME) {
            return SpaceSaving::restore(bytes).map(Self::from_summary);
        }
        Self::restore(bytes)
    }
}

impl SketchSnapshot for KeyedSpaceSaving {
    const NAME: &'static str = "keyed_space_saving";

    fn validate(&self) -> Result<(), String> {
        // The summary checked itself as it was decoded.
        for (&item, key) in &self.keys {
            if self.summary.estimate(item).is_none() {
                return Err(format!("a key is recorded for {item:#018x}, which is not monitored"));
            }
            if key.fingerprint() != item {
                return Err(format!("the key recorded for {item:#018x} has another fingerprint"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Key;
    use crate::hash::fingerprint;

    fn text(s: &str) -> KeyLabel {
        KeyLabel::Text(s.to_owned())
    }

    fn update(sketch: &mut KeyedSpaceSaving, keys: &[&str]) {
        let items: Vec<u64> = keys.iter().map(|k| fingerprint(Key::Bytes(k.as_bytes()))).collect();
        sketch.update(&items, |row| Some(text(keys[row])));
    }

    #[test]
    fn counts_as_the_plain_summary_and_keeps_keys_of_monitored_items_only() {
        let keys: Vec<String> = (0..2_000).map(|i| format!("k{}", (i * i) % 97)).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut keyed = KeyedSpaceSaving::new(16).unwrap();
        let mut plain = SpaceSaving::new(16).unwrap();
        for batch in keys.chunks(300) {
            update(&mut keyed, batch);
            batch.iter().for_each(|k| plain.insert(fingerprint(Key::Bytes(k.as_bytes()))));
        }
        let listed: Vec<_> = keyed.summary().iter_by_count().collect();
        assert_eq!(listed, plain.iter_by_count().collect::<Vec<_>>());
        assert_eq!(keyed.keys.len(), 16);
        for (item, _) in listed {
            let key = keyed.key(item).expect("every monitored item has its key");
            assert_eq!(key.fingerprint(), item);
        }
        keyed.validate().unwrap();
    }

    #[test]
    fn an_item_evicted_and_readmitted_within_one_batch_keeps_its_key() {
        let mut sketch = KeyedSpaceSaving::new(1).unwrap();
        update(&mut sketch, &["a", "b", "a"]);
        let (item, counter) = sketch.summary().iter_by_count().next().unwrap();
        assert_eq!(sketch.key(item), Some(&text("a")));
        assert_eq!((counter.count, counter.error), (3, 2));
        sketch.validate().unwrap();
    }

    #[test]
    fn restores_its_own_and_plain_snapshots_and_refuses_a_forged_key() {
        let mut sketch = KeyedSpaceSaving::new(4).unwrap();
        update(&mut sketch, &["x", "y", "x", "z"]);
        let restored = KeyedSpaceSaving::restore_either(&sketch.snapshot().unwrap()).unwrap();
        assert_eq!(restored.keys, sketch.keys);
        let plain = KeyedSpaceSaving::restore_either(&sketch.summary.snapshot().unwrap()).unwrap();
        assert!(plain.keys.is_empty());
        assert_eq!(plain.summary.total(), 4);
        let mut relearned = plain.clone();
        update(&mut relearned, &["y"]);
        assert_eq!(relearned.key(fingerprint(Key::Bytes(b"y"))), Some(&text("y")));
        assert_eq!(relearned.keys.len(), 1);

        let mut forged = sketch.clone();
        let first = *forged.keys.keys().next().unwrap();
        forged.keys.insert(first, text("not the key"));
        let error = KeyedSpaceSaving::restore(&forged.snapshot().unwrap()).unwrap_err();
        assert!(error.to_string().contains("has another fingerprint"), "{error}");
    }
}
