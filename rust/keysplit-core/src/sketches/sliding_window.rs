//! The sampling window of Pd-Stream (Sun, Wu, Wen, Gao and Buyya, "A popularity-aware
//! discriminative grouping strategy in distributed stream computing systems", Section V-B
//! and Algorithm 2): the last `N` items and each one's count among them.
//!
//! The paper counts a key's occurrences by scanning the window, `O(N)` per tuple; here a
//! table of counts, updated as items enter and leave, answers in `O(1)`. A push first adds
//! the item at the head, then, once more than `N` items are held, removes the oldest from
//! the tail, the order of the paper's steps 18 and 19; the window slides by one item per
//! push, the paper's default step. [`Push::count`] is the pushed item's count with the
//! incoming tuple included, which is the `n_k` the `pdstream` grouper reads (its module
//! documents why), and a routing entry of a tail key that no longer occurs is dropped
//! (steps 20-21) when [`Push::evicted`] reports a count of 0.

use crate::snapshot::SketchSnapshot;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

use crate::sketches::{ItemMap, SketchError, item_map, item_map_bytes, too_large};

/// The largest window: counts are `u32`, and the ring holds one item more while it slides.
pub const MAX_WINDOW: usize = (u32::MAX - 1) as usize;

/// What a push did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Push {
    /// The pushed item's count in the window after the push.
    pub count: u32,
    /// The item that left the window, with its count in the window after it left: 0 when
    /// no occurrence of it remains. `None` while the window is filling.
    pub evicted: Option<(u64, u32)>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(try_from = "SlidingWindowCounterFields")]
pub struct SlidingWindowCounter {
    window: usize,
    items: VecDeque<u64>,
    #[serde(serialize_with = "crate::sketches::serialize_sorted")]
    counts: ItemMap<u32>,
    /// The bytes of `counts`, which never grows.
    table_bytes: usize,
}

crate::sketches::checked_on_decode!(SlidingWindowCounter, SlidingWindowCounterFields { window: usize, items: VecDeque<u64>, counts: ItemMap<u32>, table_bytes: usize });

impl SlidingWindowCounter {
    /// An empty window of `window` items, its ring and table allocated up front.
    pub fn new(window: usize) -> Result<Self, SketchError> {
        if window == 0 {
            return Err(SketchError::parameter("window", "must be at least 1, got 0"));
        }
        if window > MAX_WINDOW {
            return Err(SketchError::parameter(
                "window",
                format!("must be at most {MAX_WINDOW}, got {window}"),
            ));
        }
        let bytes = Self::bytes_for(window);
        let reject = || SketchError::parameter("window", too_large(bytes));
        // The pushed item enters before the oldest leaves.
        let mut items = VecDeque::new();
        items.try_reserve_exact(window + 1).map_err(|_| reject())?;
        let (counts, table_bytes) = item_map(window + 1).ok_or_else(reject)?;
        Ok(Self { window, items, counts, table_bytes })
    }

    fn bytes_for(window: usize) -> Option<usize> {
        (window + 1)
            .checked_mul(std::mem::size_of::<u64>())?
            .checked_add(item_map_bytes::<u32>(window + 1)?)
    }

    /// Slides the window over `item`.
    pub fn push(&mut self, item: u64) -> Push {
        self.items.push_back(item);
        *self.counts.entry(item).or_insert(0) += 1;
        let evicted = if self.items.len() > self.window {
            let oldest = self.items.pop_front().expect("the window holds more than one item");
            let remaining = match self.counts.get_mut(&oldest) {
                Some(count) if *count > 1 => {
                    *count -= 1;
                    *count
                }
                _ => {
                    self.counts.remove(&oldest);
                    0
                }
            };
            Some((oldest, remaining))
        } else {
            None
        };
        Push { count: self.count(item), evicted }
    }

    /// The occurrences of `item` in the window.
    pub fn count(&self, item: u64) -> u32 {
        self.counts.get(&item).copied().unwrap_or(0)
    }

    /// The items held: `window` once full.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn window(&self) -> usize {
        self.window
    }

    /// The number of distinct items in the window.
    pub fn distinct(&self) -> usize {
        self.counts.len()
    }

    /// Empties the window, keeping the allocations.
    pub fn clear(&mut self) {
        self.items.clear();
        self.counts.clear();
    }

    /// Bytes of the ring of items and the table of counts, the table counted as an entry and
    /// a control byte for each entry it has room for.
    pub fn state_bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<u64>() + self.table_bytes
    }
}

impl SketchSnapshot for SlidingWindowCounter {
    const NAME: &'static str = "sliding_window";

    fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_WINDOW).contains(&self.window) {
            return Err(format!("window {} is out of range", self.window));
        }
        if self.items.len() > self.window {
            return Err(format!("{} items in a window of {}", self.items.len(), self.window));
        }
        let mut counts: ItemMap<u32> = ItemMap::default();
        for &item in &self.items {
            *counts.entry(item).or_insert(0) += 1;
        }
        if counts != self.counts {
            return Err("the counts disagree with the items in the window".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn window_zero_is_refused_with_a_message() {
        assert_eq!(
            SlidingWindowCounter::new(0).unwrap_err().to_string(),
            "window must be at least 1, got 0"
        );
        assert!(SlidingWindowCounter::new(usize::MAX).is_err());
    }

    #[test]
    fn counts_the_last_n_items() {
        let mut window = SlidingWindowCounter::new(3).unwrap();
        assert_eq!(window.push(1), Push { count: 1, evicted: None });
        assert_eq!(window.push(2), Push { count: 1, evicted: None });
        assert_eq!(window.push(1), Push { count: 2, evicted: None });
        assert_eq!(window.push(3), Push { count: 1, evicted: Some((1, 1)) });
        assert_eq!(window.push(4), Push { count: 1, evicted: Some((2, 0)) });
        assert_eq!((window.count(1), window.count(2), window.distinct()), (1, 0, 3));
        window.clear();
        assert!(window.is_empty() && window.count(3) == 0);
    }

    #[test]
    fn an_item_can_replace_itself() {
        let mut window = SlidingWindowCounter::new(1).unwrap();
        window.push(7);
        assert_eq!(window.push(7), Push { count: 1, evicted: Some((7, 1)) });
    }

    #[test]
    fn state_is_allocated_once_for_the_window() {
        let mut window = SlidingWindowCounter::new(100).unwrap();
        let bytes = window.state_bytes();
        assert!(bytes >= 100 * 8);
        (0..1_000).for_each(|item| {
            window.push(item);
        });
        assert_eq!(window.state_bytes(), bytes);
    }

    proptest! {
        #[test]
        fn matches_a_naive_window(
            size in 1usize..12, items in prop::collection::vec(0u64..10, 0..200),
        ) {
            let mut window = SlidingWindowCounter::new(size).unwrap();
            let mut naive: VecDeque<u64> = VecDeque::new();
            let naive_count = |naive: &VecDeque<u64>, item| naive.iter().filter(|&&x| x == item).count() as u32;
            for item in items {
                naive.push_back(item);
                let evicted = (naive.len() > size).then(|| {
                    let oldest = naive.pop_front().unwrap();
                    (oldest, naive_count(&naive, oldest))
                });
                let push = window.push(item);
                prop_assert_eq!(push, Push { count: naive_count(&naive, item), evicted });
                prop_assert_eq!(window.len(), naive.len());
                for probe in 0..10 {
                    prop_assert_eq!(window.count(probe), naive_count(&naive, probe));
                }
                prop_assert_eq!(window.distinct(), (0..10).filter(|&p| naive_count(&naive, p) > 0).count());
            }
        }
    }
}
