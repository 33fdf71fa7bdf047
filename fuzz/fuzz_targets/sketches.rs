//! Fuzzes every sketch against an exact model: arbitrary parameters (refused with an `Err`
//! when out of range, never a panic) and arbitrary weighted streams, checking the bounds each
//! sketch guarantees and that a snapshot restores to a sketch that answers the same.

#![no_main]

use std::collections::HashMap;

use arbitrary::Arbitrary;
use keysplit_core::SketchSnapshot;
use keysplit_core::sketches::{CountMin, HyperLogLog, SlidingWindowCounter, SpaceSaving};
use libfuzzer_sys::fuzz_target;

const MAX_ITEMS: usize = 2000;

#[derive(Arbitrary, Debug)]
struct Input {
    capacity: u16,
    width: u16,
    depth: u8,
    seed: u64,
    conservative_update: bool,
    precision: u8,
    window: u16,
    items: Vec<(u8, u8)>,
}

fuzz_target!(|input: Input| {
    let items: Vec<(u64, u64)> = input
        .items
        .iter()
        .take(MAX_ITEMS)
        .map(|&(i, w)| (u64::from(i % 64), u64::from(w % 4)))
        .collect();
    let mut truth: HashMap<u64, u64> = HashMap::new();
    for &(item, weight) in &items {
        *truth.entry(item).or_default() += weight;
    }
    let total: u64 = truth.values().sum();

    if let Ok(mut summary) = SpaceSaving::new(usize::from(input.capacity % 70)) {
        for &(item, weight) in &items {
            // The count an insertion returns is the item's counter right after it.
            let count = summary.insert_weighted(item, weight);
            assert_eq!(count, summary.estimate(item).map_or(0, |c| c.count));
        }
        assert_eq!(summary.total(), total);
        for (&item, &count) in &truth {
            match summary.estimate(item) {
                Some(c) => assert!(c.count - c.error <= count && count <= c.count),
                None => assert!(count <= summary.unmonitored_bound()),
            }
        }
        let restored = SpaceSaving::restore(&summary.snapshot().unwrap()).unwrap();
        assert!(restored.iter_by_count().eq(summary.iter_by_count()));
    }

    let count_min =
        CountMin::new(usize::from(input.width % 300), usize::from(input.depth % 8), input.seed);
    if let Ok(count_min) = count_min {
        let mut count_min = count_min.with_conservative_update(input.conservative_update);
        items.iter().for_each(|&(item, weight)| count_min.insert(item, weight));
        let restored = CountMin::restore(&count_min.snapshot().unwrap()).unwrap();
        for (&item, &count) in &truth {
            assert!(count_min.estimate(item) >= count);
            assert_eq!(restored.estimate(item), count_min.estimate(item));
        }
    }

    if let Ok(mut hll) = HyperLogLog::new(input.precision % 20) {
        items.iter().for_each(|&(item, _)| hll.insert(item));
        for &(item, _) in &items {
            assert!(hll.maybe_contains(item));
        }
        let restored = HyperLogLog::restore(&hll.snapshot().unwrap()).unwrap();
        assert_eq!(restored, hll);
    }

    if let Ok(mut window) = SlidingWindowCounter::new(usize::from(input.window % 100)) {
        let size = window.window();
        for (i, &(item, _)) in items.iter().enumerate() {
            let start = (i + 1).saturating_sub(size);
            let expected = items[start..=i].iter().filter(|&&(x, _)| x == item).count() as u32;
            assert_eq!(window.push(item).count, expected);
        }
        let restored = SlidingWindowCounter::restore(&window.snapshot().unwrap()).unwrap();
        for item in 0..64 {
            assert_eq!(restored.count(item), window.count(item));
        }
    }
});
