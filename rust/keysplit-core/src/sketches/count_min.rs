//! Count-Min: Cormode and Muthukrishnan, "An improved data stream summary: the count-min
//! sketch and its applications", J. Algorithms 55(1), 2005; conservative update from Estan
//! and Varghese, "New directions in traffic measurement and accounting", SIGCOMM 2002.
//!
//! `depth` rows of `width` counters. With `width = ceil(e / ε)` and `depth = ceil(ln(1/δ))`
//! an estimate exceeds the true count by more than `ε · total` with probability at most δ,
//! and it never falls below the true count.
//!
//! # Specification
//!
//! * Row `r` (from 0) places item `x` in column
//!   `hash_key(x.to_le_bytes(), candidate_seed(seed, r)) % width`, that is
//!   `XXH3_64bits_withSeed(8 little-endian bytes of x, seed_r) mod width` with
//!   `seed_r = seed * 0x9E3779B97F4A7C15 + r (mod 2^64)`, the seed derivation of
//!   [`crate::hash`].
//! * `insert(x, c)` adds `c` to the `depth` counters of `x`. With conservative update it
//!   instead raises each of them to `max(counter, e + c)`, where `e` is the estimate of `x`
//!   before the insertion: no counter grows beyond what the new estimate needs, so
//!   estimates are never above plain Count-Min's on the same stream, and still never below
//!   the truth.
//! * `estimate(x)` is the smallest of the `depth` counters of `x`.
//! * Counters and the total saturate at `u64::MAX` rather than wrap.

use crate::snapshot::SketchSnapshot;
use serde::{Deserialize, Serialize};
use std::f64::consts::E;

use crate::hash::{candidate_seed, hash_key};
use crate::sketches::{SketchError, too_large};

#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(try_from = "CountMinFields")]
pub struct CountMin {
    width: usize,
    depth: usize,
    seed: u64,
    conservative_update: bool,
    /// Row-major: row `r` is `counters[r * width..(r + 1) * width]`.
    counters: Vec<u64>,
    /// The counter index of the item being inserted in each row, reused across insertions.
    row_cells: Vec<usize>,
    total: u64,
}

crate::sketches::checked_on_decode!(CountMin, CountMinFields { width: usize, depth: usize, seed: u64, conservative_update: bool, counters: Vec<u64>, row_cells: Vec<usize>, total: u64 });

impl CountMin {
    /// A plain (not conservative-update) sketch of `depth` rows of `width` counters.
    pub fn new(width: usize, depth: usize, seed: u64) -> Result<Self, SketchError> {
        if width == 0 {
            return Err(SketchError::parameter("width", "must be at least 1, got 0"));
        }
        if depth == 0 {
            return Err(SketchError::parameter("depth", "must be at least 1, got 0"));
        }
        let cells = width.checked_mul(depth);
        let bytes = cells.and_then(|cells| cells.checked_add(depth)?.checked_mul(8));
        let reject = || SketchError::parameter("width * depth", too_large(bytes));
        let cells = cells.ok_or_else(reject)?;
        let mut counters = Vec::new();
        counters.try_reserve_exact(cells).map_err(|_| reject())?;
        counters.resize(cells, 0);
        let mut row_cells = Vec::new();
        row_cells.try_reserve_exact(depth).map_err(|_| reject())?;
        row_cells.resize(depth, 0);
        Ok(Self { width, depth, seed, conservative_update: false, counters, row_cells, total: 0 })
    }

    /// The sketch that overestimates by at most `epsilon * total` with probability at least
    /// `1 - delta`: `width = ceil(e / epsilon)`, `depth = ceil(ln(1 / delta))`, computed with
    /// `libm` so that every machine agrees on them.
    pub fn with_error(epsilon: f64, delta: f64, seed: u64) -> Result<Self, SketchError> {
        if !(epsilon > 0.0 && epsilon < 1.0) {
            return Err(SketchError::parameter(
                "epsilon",
                format!("must be in (0, 1), got {epsilon}"),
            ));
        }
        if !(delta > 0.0 && delta < 1.0) {
            return Err(SketchError::parameter("delta", format!("must be in (0, 1), got {delta}")));
        }
        let width = libm::ceil(E / epsilon);
        let depth = libm::ceil(libm::log(1.0 / delta));
        // Both are at least 1 here; `as` saturates absurd sizes, infinity included, to
        // `usize::MAX`, which `new` refuses as too large.
        Self::new(width as usize, depth as usize, seed)
    }

    /// Switches conservative update on or off. Either way every estimate stays an upper
    /// bound, so switching mid-stream is safe.
    pub fn with_conservative_update(mut self, conservative_update: bool) -> Self {
        self.conservative_update = conservative_update;
        self
    }

    /// Counts `count` occurrences of `item`.
    pub fn insert(&mut self, item: u64, count: u64) {
        self.total = self.total.saturating_add(count);
        let (bytes, width, seed) = (item.to_le_bytes(), self.width, self.seed);
        for (row, cell) in self.row_cells.iter_mut().enumerate() {
            *cell = row * width + column(&bytes, row, width, seed);
        }
        if self.conservative_update {
            let target = self.min_over_cells().saturating_add(count);
            for &cell in &self.row_cells {
                let counter = &mut self.counters[cell];
                *counter = (*counter).max(target);
            }
        } else {
            for &cell in &self.row_cells {
                self.counters[cell] = self.counters[cell].saturating_add(count);
            }
        }
    }

    /// An upper bound on the count of `item`.
    pub fn estimate(&self, item: u64) -> u64 {
        let bytes = item.to_le_bytes();
        (0..self.depth)
            .map(|row| self.counters[row * self.width + column(&bytes, row, self.width, self.seed)])
            .min()
            .expect("depth is at least 1")
    }

    /// Adds `other`'s counters to these, so the sketch counts both streams.
    ///
    /// Both sketches need the same width, depth and seed. The sum of conservative-update
    /// sketches is not the conservative-update sketch of the joined streams: its estimates
    /// remain upper bounds but lose the tighter error of conservative update, and can
    /// exceed those of a conservative-update sketch fed both streams.
    pub fn merge(&mut self, other: &CountMin) -> Result<(), SketchError> {
        let shape = |s: &CountMin| (s.width, s.depth, s.seed);
        if shape(self) != shape(other) {
            return Err(SketchError::Incompatible {
                reason: format!(
                    "Count-Min sketches differ in (width, depth, seed): {:?} and {:?}",
                    shape(self),
                    shape(other)
                ),
            });
        }
        for (mine, theirs) in self.counters.iter_mut().zip(&other.counters) {
            *mine = mine.saturating_add(*theirs);
        }
        self.total = self.total.saturating_add(other.total);
        Ok(())
    }

    /// Zeroes every counter.
    pub fn clear(&mut self) {
        self.counters.fill(0);
        self.total = 0;
    }

    /// The sum of all counts inserted.
    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn depth(&self) -> usize {
        self.depth
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn conservative_update(&self) -> bool {
        self.conservative_update
    }

    /// Bytes of counters, plus the per-row scratch of insertions.
    pub fn state_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.counters) + std::mem::size_of_val(&*self.row_cells)
    }

    fn min_over_cells(&self) -> u64 {
        self.row_cells.iter().map(|&cell| self.counters[cell]).min().expect("depth is at least 1")
    }
}

/// The column of the item of little-endian bytes `bytes` in row `row`.
#[inline]
fn column(bytes: &[u8; 8], row: usize, width: usize, seed: u64) -> usize {
    (hash_key(bytes, candidate_seed(seed, row as u64)) % width as u64) as usize
}

impl SketchSnapshot for CountMin {
    const NAME: &'static str = "count_min";

    fn validate(&self) -> Result<(), String> {
        if self.width == 0 || self.depth == 0 {
            return Err(format!("width {} and depth {} must be positive", self.width, self.depth));
        }
        if self.width.checked_mul(self.depth) != Some(self.counters.len()) {
            return Err(format!(
                "{} counters for {} rows of {}",
                self.counters.len(),
                self.depth,
                self.width
            ));
        }
        if self.row_cells.len() != self.depth {
            return Err(format!("{} row cells for {} rows", self.row_cells.len(), self.depth));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;
    use crate::streams::Zipf;

    fn zipf_stream(keys: u64, z: f64, length: usize, seed: u64) -> Vec<u64> {
        let mut zipf = Zipf::new(keys, z, seed).unwrap();
        (0..length).map(|_| zipf.next_key()).collect()
    }

    fn exact(stream: &[u64]) -> HashMap<u64, u64> {
        let mut counts = HashMap::new();
        for &item in stream {
            *counts.entry(item).or_insert(0) += 1;
        }
        counts
    }

    #[test]
    fn bad_parameters_are_refused_with_a_message() {
        assert_eq!(
            CountMin::new(0, 3, 0).unwrap_err().to_string(),
            "width must be at least 1, got 0"
        );
        assert_eq!(
            CountMin::new(3, 0, 0).unwrap_err().to_string(),
            "depth must be at least 1, got 0"
        );
        assert!(CountMin::new(usize::MAX, 2, 0).is_err());
        assert!(CountMin::new(usize::MAX / 16, 1, 0).is_err());
        for (epsilon, delta) in [(0.0, 0.1), (1.0, 0.1), (f64::NAN, 0.1), (0.1, 0.0), (0.1, 1.0)] {
            assert!(CountMin::with_error(epsilon, delta, 0).is_err(), "{epsilon} {delta}");
        }
        let error = CountMin::with_error(0.1, f64::INFINITY, 0).unwrap_err();
        assert_eq!(error.to_string(), "delta must be in (0, 1), got inf");
        assert!(CountMin::with_error(f64::MIN_POSITIVE, 0.5, 0).is_err());
    }

    #[test]
    fn with_error_sizes_the_sketch_as_the_paper_says() {
        let sketch = CountMin::with_error(0.01, 0.01, 0).unwrap();
        assert_eq!((sketch.width(), sketch.depth()), (272, 5));
        let sketch = CountMin::with_error(0.5, 0.9, 0).unwrap();
        assert_eq!((sketch.width(), sketch.depth()), (6, 1));
        assert_eq!(sketch.state_bytes(), 6 * 8 + 8);
    }

    #[test]
    fn rows_place_items_by_the_documented_hash() {
        let mut sketch = CountMin::new(1_000, 3, 42).unwrap();
        sketch.insert(7, 5);
        for row in 0..3 {
            let column =
                hash_key(&7u64.to_le_bytes(), 42u64.wrapping_mul(0x9E37_79B9_7F4A_7C15) + row)
                    % 1_000;
            assert_eq!(sketch.counters[row as usize * 1_000 + column as usize], 5);
        }
        assert_eq!(sketch.counters.iter().sum::<u64>(), 15);
    }

    #[test]
    fn overestimates_by_at_most_epsilon_m_on_all_but_a_delta_fraction() {
        let (epsilon, delta) = (0.002, 0.05);
        let stream = zipf_stream(20_000, 0.8, 100_000, 11);
        let truth = exact(&stream);
        for conservative in [false, true] {
            let mut sketch = CountMin::with_error(epsilon, delta, 5)
                .unwrap()
                .with_conservative_update(conservative);
            stream.iter().for_each(|&item| sketch.insert(item, 1));
            let bound = epsilon * sketch.total() as f64;
            let over = truth
                .iter()
                .filter(|&(&item, &count)| (sketch.estimate(item) - count) as f64 > bound)
                .count();
            // The guarantee allows delta; a sketch this wide should stay far below it.
            assert!(
                (over as f64) < delta / 10.0 * truth.len() as f64,
                "{over} of {} keys",
                truth.len()
            );
        }
    }

    #[test]
    fn conservative_update_never_estimates_above_plain() {
        let stream = zipf_stream(5_000, 1.0, 50_000, 3);
        let mut plain = CountMin::new(200, 4, 9).unwrap();
        let mut conservative = CountMin::new(200, 4, 9).unwrap().with_conservative_update(true);
        for &item in &stream {
            plain.insert(item, 1);
            conservative.insert(item, 1);
        }
        let truth = exact(&stream);
        let mut strictly_lower = 0;
        for (&item, &count) in &truth {
            let (p, c) = (plain.estimate(item), conservative.estimate(item));
            assert!(count <= c && c <= p, "item {item}: true {count}, conservative {c}, plain {p}");
            strictly_lower += usize::from(c < p);
        }
        assert!(strictly_lower > truth.len() / 2);
        assert_eq!(plain.total(), conservative.total());
    }

    #[test]
    fn merging_plain_sketches_equals_sketching_both_streams() {
        let (left, right) = (zipf_stream(1_000, 1.0, 5_000, 1), zipf_stream(1_000, 1.0, 5_000, 2));
        let mut a = CountMin::new(64, 3, 8).unwrap();
        let mut b = CountMin::new(64, 3, 8).unwrap();
        let mut both = CountMin::new(64, 3, 8).unwrap();
        left.iter().for_each(|&item| a.insert(item, 1));
        right.iter().for_each(|&item| b.insert(item, 1));
        left.iter().chain(&right).for_each(|&item| both.insert(item, 1));
        a.merge(&b).unwrap();
        assert_eq!(a.counters, both.counters);
        assert_eq!(a.total(), both.total());
        a.clear();
        assert!(a.counters.iter().all(|&c| c == 0) && a.total() == 0);
    }

    #[test]
    fn merging_differently_shaped_or_seeded_sketches_is_refused() {
        let mut a = CountMin::new(64, 3, 8).unwrap();
        for other in [CountMin::new(65, 3, 8), CountMin::new(64, 4, 8), CountMin::new(64, 3, 9)] {
            let error = a.merge(&other.unwrap()).unwrap_err();
            assert!(
                error.to_string().starts_with("cannot merge: Count-Min sketches differ"),
                "{error}"
            );
        }
    }

    proptest! {
        #[test]
        fn never_underestimates(
            stream in prop::collection::vec((0u64..50, 0u64..4), 0..300),
            width in 1usize..20, depth in 1usize..5, seed in any::<u64>(),
            conservative in any::<bool>(),
        ) {
            let mut sketch = CountMin::new(width, depth, seed).unwrap().with_conservative_update(conservative);
            let mut truth: HashMap<u64, u64> = HashMap::new();
            for &(item, count) in &stream {
                sketch.insert(item, count);
                *truth.entry(item).or_insert(0) += count;
            }
            prop_assert_eq!(sketch.total(), truth.values().sum::<u64>());
            for (&item, &count) in &truth {
                prop_assert!(sketch.estimate(item) >= count);
            }
        }
    }
}
