//! The hot tuples of the interval-based groupers (DAGreedy, Dalton), recomputed from their
//! definition, for the tests of both.

use std::collections::HashMap;

/// Which tuples are hot, recomputed from the definition: count in the interval (this
/// tuple included) times `factor` exceeds the previous interval's total, or found hot in
/// the previous interval.
pub fn hot_oracle(keys: &[Vec<u8>], interval: usize, factor: u128) -> Vec<bool> {
    let mut hot = Vec::with_capacity(keys.len());
    let mut counts: HashMap<&[u8], u128> = HashMap::new();
    let mut found: HashMap<&[u8], usize> = HashMap::new();
    let mut previous = 0u128;
    for (i, key) in keys.iter().enumerate() {
        let j = i / interval;
        let c = counts.entry(key).or_default();
        *c += 1;
        let is_hot = if previous > 0 && *c * factor > previous {
            found.insert(key, j);
            true
        } else {
            found.get(&key[..]).is_some_and(|&f| f + 1 >= j)
        };
        hot.push(is_hot);
        if (i + 1).is_multiple_of(interval) {
            previous = interval as u128;
            counts.clear();
        }
    }
    hot
}
