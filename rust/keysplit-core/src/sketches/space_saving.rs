//! Space-Saving: Metwally, Agrawal and El Abbadi, "Efficient computation of frequent and
//! top-k elements in data streams", ICDT 2005.
//!
//! At most `capacity` counters monitor items. A counter's count overestimates its item's
//! weight by at most its error, the count of the counter it took over; every item heavier
//! than `total / capacity` is monitored.
//!
//! # Specification (a reference twin replays it step by step)
//!
//! Insertions of positive weight are numbered 0, 1, 2, … from construction or the last
//! [`SpaceSaving::clear`]; each counter holds a stamp, the number of the insertion that last
//! changed its count. Insertion `t` of item `x` with weight `w > 0`:
//!
//! 1. if `x` has a counter, its count grows by `w`;
//! 2. else, with fewer than `capacity` counters, `x` gets a new counter of count `w` and
//!    error 0;
//! 3. else `x` takes over the counter with the smallest count, and among those the smallest
//!    stamp (the one that entered the minimum count earliest): its error becomes its count,
//!    then its count grows by `w`, and the evicted item is forgotten.
//!
//! The counter changed gets stamp `t`. Weight 0 changes nothing and takes no number.
//! [`SpaceSaving::iter_by_count`] lists counters by count, largest first, and among equal
//! counts by stamp, smallest first. The sum of the counts always equals
//! [`SpaceSaving::total`].
//!
//! # Stream-Summary
//!
//! Counters hang in buckets of equal count, a doubly linked list by increasing count.
//! A counter whose count changes is appended to the end of its new bucket, so each bucket
//! lists its counters in stamp order and the counter to evict is the first of the first
//! bucket. Weight 1 moves a counter to the next bucket or a new one just after its own,
//! in O(1); weight `w` walks past the buckets of counts between the old count and the new,
//! O(1) per bucket skipped. Links are `u32` indices into vectors allocated once for
//! `capacity` counters: no pointers, no `unsafe`, no reference counting.

use crate::sketches::{ItemMap, SketchError, item_map, item_map_bytes, too_large};
use crate::snapshot::SketchSnapshot;
use serde::{Deserialize, Serialize};

/// The most counters a sketch may have: links are `u32` indices, with one spare bucket
/// beyond the counters and `u32::MAX` reserved for the end of a list.
pub const MAX_CAPACITY: usize = (u32::MAX - 2) as usize;

/// The end of a list.
const NIL: u32 = u32::MAX;

/// How an insertion changed the monitored items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insertion {
    /// The item was monitored already.
    Counted,
    /// The item took a free counter.
    Admitted,
    /// The item took over the counter of `evicted`, which is no longer monitored.
    Replaced { evicted: u64 },
}

/// The estimate of a monitored item: `count - error <= true weight <= count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Counter {
    pub count: u64,
    pub error: u64,
}

impl Counter {
    /// The weight the item is guaranteed to have: `count - error`.
    pub fn guaranteed(&self) -> u64 {
        self.count - self.error
    }
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct Slot {
    item: u64,
    error: u64,
    bucket: u32,
    /// `earlier` and `later` are the neighbours within the bucket, in stamp order.
    earlier: u32,
    later: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct Bucket {
    count: u64,
    first: u32,
    last: u32,
    /// `lower` and `higher` are the neighbouring buckets by count; a free bucket links the
    /// free list with `higher`.
    lower: u32,
    higher: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(try_from = "SpaceSavingFields")]
pub struct SpaceSaving {
    capacity: usize,
    slots: Vec<Slot>,
    buckets: Vec<Bucket>,
    free_buckets: u32,
    smallest: u32,
    largest: u32,
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    slot_of: ItemMap<u32>,
    /// The bytes of `slot_of`, which never grows.
    table_bytes: usize,
    total: u64,
}

crate::sketches::checked_on_decode!(SpaceSaving, SpaceSavingFields { capacity: usize, slots: Vec<Slot>, buckets: Vec<Bucket>, free_buckets: u32, smallest: u32, largest: u32, slot_of: ItemMap<u32>, table_bytes: usize, total: u64 });

impl SpaceSaving {
    /// A sketch of `capacity` counters, allocated up front.
    pub fn new(capacity: usize) -> Result<Self, SketchError> {
        if capacity == 0 {
            return Err(SketchError::parameter("capacity", "must be at least 1, got 0"));
        }
        if capacity > MAX_CAPACITY {
            return Err(SketchError::parameter(
                "capacity",
                format!("must be at most {MAX_CAPACITY}, got {capacity}"),
            ));
        }
        let reject = |bytes| SketchError::parameter("capacity", too_large(bytes));
        let bytes = Self::bytes_for(capacity);
        let mut slots = Vec::new();
        slots.try_reserve_exact(capacity).map_err(|_| reject(bytes))?;
        // A moving counter joins its new bucket before it leaves its old one.
        let mut buckets = Vec::new();
        buckets.try_reserve_exact(capacity + 1).map_err(|_| reject(bytes))?;
        let (slot_of, table_bytes) = item_map(capacity).ok_or_else(|| reject(bytes))?;
        Ok(Self {
            capacity,
            slots,
            buckets,
            free_buckets: NIL,
            smallest: NIL,
            largest: NIL,
            slot_of,
            table_bytes,
            total: 0,
        })
    }

    fn bytes_for(capacity: usize) -> Option<usize> {
        let slots = capacity.checked_mul(std::mem::size_of::<Slot>())?;
        let buckets = (capacity + 1).checked_mul(std::mem::size_of::<Bucket>())?;
        slots.checked_add(buckets)?.checked_add(item_map_bytes::<u32>(capacity)?)
    }

    /// Counts one occurrence of `item`.
    #[inline]
    pub fn insert(&mut self, item: u64) {
        self.insert_weighted(item, 1);
    }

    /// Counts `weight` occurrences of `item`, as the module documentation specifies, and
    /// returns its count after (0 for weight 0 and an item not monitored), which saves a
    /// caller that tests it a second lookup.
    ///
    /// # Panics
    ///
    /// If the total weight overflows `u64`.
    pub fn insert_weighted(&mut self, item: u64, weight: u64) -> u64 {
        if weight == 0 {
            return self.estimate(item).map_or(0, |c| c.count);
        }
        self.add(item, weight).0
    }

    /// Counts one occurrence of `item` and says how the monitored set changed, for a
    /// caller that keeps something per monitored item.
    #[inline]
    pub fn insert_tracked(&mut self, item: u64) -> Insertion {
        self.add(item, 1).1
    }

    fn add(&mut self, item: u64, weight: u64) -> (u64, Insertion) {
        // Every count is at most the total, so checking the total checks them all.
        self.total =
            self.total.checked_add(weight).expect("Space-Saving total weight overflows u64");
        if let Some(&slot) = self.slot_of.get(&item) {
            let count = self.buckets[self.slots[slot as usize].bucket as usize].count + weight;
            self.move_to(slot, count);
            (count, Insertion::Counted)
        } else if self.slots.len() < self.capacity {
            let slot = self.slots.len() as u32;
            self.slots.push(Slot { item, error: 0, bucket: NIL, earlier: NIL, later: NIL });
            self.slot_of.insert(item, slot);
            let bucket = self.bucket_of_count(NIL, weight);
            self.append(slot, bucket);
            (weight, Insertion::Admitted)
        } else {
            let smallest = &self.buckets[self.smallest as usize];
            let (slot, min_count) = (smallest.first, smallest.count);
            let evicted = std::mem::replace(&mut self.slots[slot as usize].item, item);
            self.slots[slot as usize].error = min_count;
            self.slot_of.remove(&evicted);
            self.slot_of.insert(item, slot);
            self.move_to(slot, min_count + weight);
            (min_count + weight, Insertion::Replaced { evicted })
        }
    }

    /// The counter of `item`, or `None` when it is not monitored.
    pub fn estimate(&self, item: u64) -> Option<Counter> {
        self.slot_of.get(&item).map(|&slot| self.counter(slot))
    }

    /// The most an item that is not monitored can weigh: the smallest count once every
    /// counter is in use, 0 before.
    pub fn unmonitored_bound(&self) -> u64 {
        if self.slots.len() < self.capacity {
            return 0;
        }
        self.buckets[self.smallest as usize].count
    }

    /// The total weight inserted, `m`.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The number of monitored items.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Forgets every item, keeping the allocations.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.buckets.clear();
        self.free_buckets = NIL;
        self.smallest = NIL;
        self.largest = NIL;
        self.slot_of.clear();
        self.total = 0;
    }

    /// The monitored items and their counters, largest count first and, among equal
    /// counts, the one that reached its count earliest first.
    pub fn iter_by_count(&self) -> ByCount<'_> {
        let slot = match self.largest {
            NIL => NIL,
            bucket => self.buckets[bucket as usize].first,
        };
        ByCount { sketch: self, slot }
    }

    /// Bytes of counters, buckets and item table, the table counted as an entry and a
    /// control byte for each entry it has room for.
    pub fn state_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.buckets.capacity() * std::mem::size_of::<Bucket>()
            + self.table_bytes
    }

    fn counter(&self, slot: u32) -> Counter {
        let slot = &self.slots[slot as usize];
        Counter { count: self.buckets[slot.bucket as usize].count, error: slot.error }
    }

    /// Moves counter `slot` from its bucket to the end of the bucket of `count`, a larger
    /// count than its own.
    fn move_to(&mut self, slot: u32, count: u64) {
        let bucket = self.bucket_of_count(self.slots[slot as usize].bucket, count);
        self.detach(slot);
        self.append(slot, bucket);
    }

    /// The bucket of `count`, created if missing, searched upwards from bucket `below`, whose
    /// count is smaller, or from the smallest bucket when `below` is [`NIL`].
    fn bucket_of_count(&mut self, below: u32, count: u64) -> u32 {
        let (mut lower, mut higher) = match below {
            NIL => (NIL, self.smallest),
            below => (below, self.buckets[below as usize].higher),
        };
        while higher != NIL && self.buckets[higher as usize].count < count {
            lower = higher;
            higher = self.buckets[higher as usize].higher;
        }
        if higher != NIL && self.buckets[higher as usize].count == count {
            return higher;
        }
        let bucket = Bucket { count, first: NIL, last: NIL, lower, higher };
        let new = match self.free_buckets {
            NIL => {
                self.buckets.push(bucket);
                (self.buckets.len() - 1) as u32
            }
            free => {
                self.free_buckets = self.buckets[free as usize].higher;
                self.buckets[free as usize] = bucket;
                free
            }
        };
        match lower {
            NIL => self.smallest = new,
            lower => self.buckets[lower as usize].higher = new,
        }
        match higher {
            NIL => self.largest = new,
            higher => self.buckets[higher as usize].lower = new,
        }
        new
    }

    fn append(&mut self, slot: u32, bucket: u32) {
        let last = self.buckets[bucket as usize].last;
        let entry = &mut self.slots[slot as usize];
        entry.bucket = bucket;
        entry.earlier = last;
        entry.later = NIL;
        match last {
            NIL => self.buckets[bucket as usize].first = slot,
            last => self.slots[last as usize].later = slot,
        }
        self.buckets[bucket as usize].last = slot;
    }

    /// Unlinks counter `slot` from its bucket, freeing the bucket if it empties.
    fn detach(&mut self, slot: u32) {
        let Slot { bucket, earlier, later, .. } = self.slots[slot as usize];
        match earlier {
            NIL => self.buckets[bucket as usize].first = later,
            earlier => self.slots[earlier as usize].later = later,
        }
        match later {
            NIL => self.buckets[bucket as usize].last = earlier,
            later => self.slots[later as usize].earlier = earlier,
        }
        if self.buckets[bucket as usize].first != NIL {
            return;
        }
        let Bucket { lower, higher, .. } = self.buckets[bucket as usize];
        match lower {
            NIL => self.smallest = higher,
            lower => self.buckets[lower as usize].higher = higher,
        }
        match higher {
            NIL => self.largest = lower,
            higher => self.buckets[higher as usize].lower = lower,
        }
        self.buckets[bucket as usize].higher = self.free_buckets;
        self.free_buckets = bucket;
    }
}

/// The iterator of [`SpaceSaving::iter_by_count`].
#[derive(Clone, Debug)]
pub struct ByCount<'a> {
    sketch: &'a SpaceSaving,
    slot: u32,
}

impl Iterator for ByCount<'_> {
    type Item = (u64, Counter);

    fn next(&mut self) -> Option<Self::Item> {
        if self.slot == NIL {
            return None;
        }
        let sketch = self.sketch;
        let slot = &sketch.slots[self.slot as usize];
        let item = (slot.item, sketch.counter(self.slot));
        self.slot = match slot.later {
            NIL => match sketch.buckets[slot.bucket as usize].lower {
                NIL => NIL,
                lower => sketch.buckets[lower as usize].first,
            },
            later => later,
        };
        Some(item)
    }
}

impl SketchSnapshot for SpaceSaving {
    const NAME: &'static str = "space_saving";

    /// Walks every list once, bounded by the vectors' lengths, so that a cycle cannot hang it.
    fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_CAPACITY).contains(&self.capacity) {
            return Err(format!("capacity {} is out of range", self.capacity));
        }
        let (slots, buckets) = (self.slots.len(), self.buckets.len());
        if slots > self.capacity || buckets > self.capacity + 1 {
            return Err(format!("{slots} counters and {buckets} buckets exceed the capacity"));
        }
        if self.slot_of.len() != slots
            || self
                .slot_of
                .iter()
                .any(|(&item, &slot)| self.slots.get(slot as usize).is_none_or(|s| s.item != item))
        {
            return Err("the item table disagrees with the counters".to_owned());
        }
        let broken = |what: &str| Err(format!("broken {what} list"));
        let (mut bucket, mut lower, mut seen_buckets, mut seen_slots, mut sum) =
            (self.smallest, NIL, 0usize, 0usize, 0u64);
        // Every bucket is on exactly one of the two lists: one on both would be handed out
        // again while in use, and the lists would then loop.
        let mut listed = vec![false; buckets];
        let mut list = |bucket: u32| match listed.get_mut(bucket as usize) {
            Some(seen) if !*seen => {
                *seen = true;
                true
            }
            _ => false,
        };
        let mut previous_count = None;
        while bucket != NIL {
            seen_buckets += 1;
            let Some(b) = self.buckets.get(bucket as usize) else { return broken("bucket") };
            if seen_buckets > buckets || b.lower != lower || b.first == NIL || !list(bucket) {
                return broken("bucket");
            }
            if previous_count.is_some_and(|c| c >= b.count) {
                return Err("bucket counts do not increase".to_owned());
            }
            previous_count = Some(b.count);
            let (mut slot, mut earlier) = (b.first, NIL);
            while slot != NIL {
                seen_slots += 1;
                let Some(s) = self.slots.get(slot as usize) else { return broken("counter") };
                if seen_slots > slots || s.bucket != bucket || s.earlier != earlier {
                    return broken("counter");
                }
                if s.error > b.count {
                    return Err("a counter's error exceeds its count".to_owned());
                }
                sum = sum.saturating_add(b.count);
                (earlier, slot) = (slot, s.later);
            }
            if b.last != earlier {
                return broken("counter");
            }
            (lower, bucket) = (bucket, b.higher);
        }
        if self.largest != lower || seen_slots != slots {
            return broken("bucket");
        }
        let mut free = self.free_buckets;
        while free != NIL {
            seen_buckets += 1;
            let Some(b) = self.buckets.get(free as usize) else { return broken("free bucket") };
            if seen_buckets > buckets || !list(free) {
                return broken("free bucket");
            }
            free = b.higher;
        }
        // A bucket on neither list is lost to both: the next count that needs a new bucket
        // would wait for it on the free list forever.
        if seen_buckets != buckets {
            return broken("free bucket");
        }
        if sum != self.total {
            return Err(format!("the counts sum to {sum}, not the total {}", self.total));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;
    use crate::rng::SplitMix64;
    use crate::streams::Zipf;

    /// The specification of the module documentation, replayed literally: a list of
    /// `(item, count, error, stamp)` scanned in full at every insertion.
    #[derive(Default)]
    struct Reference {
        capacity: usize,
        counters: Vec<(u64, u64, u64, u64)>,
        step: u64,
    }

    impl Reference {
        fn insert(&mut self, item: u64, weight: u64) {
            if weight == 0 {
                return;
            }
            let t = self.step;
            self.step += 1;
            if let Some(c) = self.counters.iter_mut().find(|c| c.0 == item) {
                c.1 += weight;
                c.3 = t;
            } else if self.counters.len() < self.capacity {
                self.counters.push((item, weight, 0, t));
            } else {
                let victim = self.counters.iter_mut().min_by_key(|c| (c.1, c.3)).unwrap();
                *victim = (item, victim.1 + weight, victim.1, t);
            }
        }

        fn by_count(&self) -> Vec<(u64, Counter)> {
            let mut sorted = self.counters.clone();
            sorted.sort_by_key(|c| (std::cmp::Reverse(c.1), c.3));
            sorted.iter().map(|c| (c.0, Counter { count: c.1, error: c.2 })).collect()
        }
    }

    fn check_guarantees(sketch: &SpaceSaving, truth: &HashMap<u64, u64>) {
        let m = sketch.total();
        assert_eq!(m, truth.values().sum::<u64>());
        let listed: Vec<_> = sketch.iter_by_count().collect();
        assert_eq!(listed.len(), sketch.len());
        assert!(sketch.len() <= sketch.capacity());
        assert_eq!(listed.iter().map(|(_, c)| c.count).sum::<u64>(), m);
        assert!(listed.windows(2).all(|w| w[0].1.count >= w[1].1.count));
        for &(item, counter) in &listed {
            let weight = truth.get(&item).copied().unwrap_or(0);
            assert!(counter.guaranteed() <= weight && weight <= counter.count, "{item}");
            assert_eq!(sketch.estimate(item), Some(counter));
        }
        for (&item, &weight) in truth {
            if sketch.estimate(item).is_none() {
                assert!(weight <= sketch.unmonitored_bound(), "{item}");
            }
            if weight as u128 * sketch.capacity() as u128 > m as u128 {
                assert!(sketch.estimate(item).is_some(), "heavy item {item} was evicted");
            }
        }
    }

    #[test]
    fn capacity_zero_is_refused_with_a_message() {
        let error = SpaceSaving::new(0).unwrap_err();
        assert_eq!(error.to_string(), "capacity must be at least 1, got 0");
        assert!(SpaceSaving::new(MAX_CAPACITY + 1).is_err());
    }

    #[test]
    fn evicts_the_earliest_counter_of_the_smallest_count() {
        let mut sketch = SpaceSaving::new(2).unwrap();
        for item in [10, 20, 30] {
            sketch.insert(item);
        }
        // 10 and 20 both counted 1; 10 got there first and goes.
        assert_eq!(sketch.estimate(10), None);
        assert_eq!(sketch.estimate(30), Some(Counter { count: 2, error: 1 }));
        sketch.insert(40);
        assert_eq!(sketch.estimate(20), None);
        let listed: Vec<_> = sketch.iter_by_count().map(|(item, _)| item).collect();
        assert_eq!(listed, [30, 40]);
        sketch.insert(30);
        sketch.insert(40);
        sketch.insert_weighted(50, 3);
        // 30 reached 3 before 40 did, so 30 is evicted and 50 takes 3 + 3.
        assert_eq!(sketch.estimate(50), Some(Counter { count: 6, error: 3 }));
        assert_eq!(
            sketch.iter_by_count().collect::<Vec<_>>(),
            [(50, Counter { count: 6, error: 3 }), (40, Counter { count: 3, error: 1 })]
        );
    }

    #[test]
    fn weight_zero_changes_nothing() {
        let mut sketch = SpaceSaving::new(1).unwrap();
        sketch.insert(1);
        sketch.insert_weighted(2, 0);
        assert_eq!(sketch.total(), 1);
        assert_eq!(
            sketch.iter_by_count().collect::<Vec<_>>(),
            [(1, Counter { count: 1, error: 0 })]
        );
    }

    #[test]
    fn finds_the_heavy_hitters_of_a_zipf_stream_deterministically() {
        let run = || {
            let mut zipf = Zipf::new(10_000, 1.1, 7).unwrap();
            let mut sketch = SpaceSaving::new(100).unwrap();
            let mut truth = HashMap::new();
            for _ in 0..50_000 {
                let item = zipf.next_key();
                sketch.insert(item);
                *truth.entry(item).or_insert(0) += 1;
            }
            check_guarantees(&sketch, &truth);
            sketch
        };
        let (a, b) = (run(), run());
        assert!(a.iter_by_count().eq(b.iter_by_count()));
        let top: Vec<_> = a.iter_by_count().take(5).map(|(item, _)| item).collect();
        assert_eq!(top, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn clear_forgets_everything_and_replays_identically() {
        let mut rng = SplitMix64::new(3);
        let items: Vec<u64> = (0..2_000).map(|_| rng.next_u64() % 300).collect();
        let mut sketch = SpaceSaving::new(16).unwrap();
        items.iter().for_each(|&item| sketch.insert(item));
        let first: Vec<_> = sketch.iter_by_count().collect();
        let bytes = sketch.state_bytes();
        sketch.clear();
        assert!(
            sketch.is_empty() && sketch.total() == 0 && sketch.iter_by_count().next().is_none()
        );
        items.iter().for_each(|&item| sketch.insert(item));
        assert_eq!(sketch.iter_by_count().collect::<Vec<_>>(), first);
        assert_eq!(sketch.state_bytes(), bytes);
    }

    #[test]
    fn state_is_allocated_once_for_the_capacity() {
        let mut sketch = SpaceSaving::new(64).unwrap();
        let bytes = sketch.state_bytes();
        assert!(bytes >= 64 * (std::mem::size_of::<Slot>() + std::mem::size_of::<Bucket>()));
        let mut rng = SplitMix64::new(9);
        for _ in 0..10_000 {
            sketch.insert_weighted(rng.next_u64() % 1_000, 1 + rng.next_u64() % 4);
        }
        assert_eq!(sketch.state_bytes(), bytes);
    }

    /// A live bucket on the free list passed a count of the lists' lengths while the bucket
    /// it replaced was lost; the next new bucket then took the live one and the bucket list
    /// looped forever (found by the `snapshot` fuzz target).
    #[test]
    fn a_live_bucket_on_the_free_list_is_refused() {
        let mut sketch = SpaceSaving::new(2).unwrap();
        for item in [1, 1, 2, 2] {
            sketch.insert(item);
        }
        assert_eq!(sketch.validate(), Ok(()));
        assert!(sketch.free_buckets != NIL && sketch.smallest == sketch.largest);
        let mut forged = sketch.clone();
        forged.free_buckets = forged.smallest;
        assert_eq!(forged.validate(), Err("broken free bucket list".to_owned()));
    }

    proptest! {
        #[test]
        fn matches_the_reference_and_keeps_its_guarantees(
            capacity in 1usize..12,
            stream in prop::collection::vec((0u64..24, 0u64..5), 0..300),
            unit_weights in any::<bool>(),
        ) {
            let mut sketch = SpaceSaving::new(capacity).unwrap();
            let mut reference = Reference { capacity, ..Reference::default() };
            let mut truth = HashMap::new();
            for (item, weight) in stream {
                let weight = if unit_weights { 1 } else { weight };
                let count = sketch.insert_weighted(item, weight);
                prop_assert_eq!(count, sketch.estimate(item).map_or(0, |c| c.count));
                reference.insert(item, weight);
                if weight > 0 {
                    *truth.entry(item).or_insert(0) += weight;
                }
                prop_assert_eq!(sketch.iter_by_count().collect::<Vec<_>>(), reference.by_count());
            }
            check_guarantees(&sketch, &truth);
        }
    }
}
