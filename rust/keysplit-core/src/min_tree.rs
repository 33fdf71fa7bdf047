//! A tournament tree over `n` counters: the smallest counter and its index, lowest index on
//! ties, in `O(1)`, after `O(log n)` updates.
//!
//! Several papers' per-tuple rules read an extreme over all `n` workers: the least-loaded
//! worker (W-Choices, D-Choices with `d ≥ n`, Pd-Stream, PStream, DAGreedy) or the minimum
//! and maximum of a per-worker metric (LM's Eq. 7-8). A scan costs `O(n)` per tuple. The
//! groupers keep this tree beside the counters they own instead, as derived state: never
//! serialized, rebuilt from the counters after a restore or a window reset, so snapshots
//! and routing stay exactly those of the scan.
//!
//! The tree only sees the updates its owner makes; counters that other threads bump (a
//! shared [`LoadVector`](crate::loads::LoadVector)) cannot use it, and their groupers keep
//! the scan.

/// The smallest of `n` `u64` values and its index, lowest index on ties.
///
/// A maximum is the minimum of the complemented values (`!v` reverses `u64` order), and a
/// non-negative `f64` orders as its bits; [`MinTree::min_index`] then answers
/// "lowest index among the largest" or "among the smallest", as the caller encodes.
#[derive(Clone, Debug, Default)]
pub struct MinTree {
    /// The values, padded with `u64::MAX` to a power of two (`leaves`).
    values: Vec<u64>,
    /// `winners[node]` for `1 ≤ node < leaves`: the index of the least value below `node`,
    /// the left (lower-index) child's on ties. Leaf `i` is node `leaves + i`, implicit.
    winners: Vec<u32>,
    len: usize,
}

impl MinTree {
    /// A tree over `values`, built in `O(n)`.
    pub fn new(values: impl IntoIterator<Item = u64>) -> Self {
        let mut tree = Self::default();
        tree.rebuild(values);
        tree
    }

    /// Replaces every value, in `O(n)`, keeping the allocations when the size is the same.
    pub fn rebuild(&mut self, values: impl IntoIterator<Item = u64>) {
        self.values.clear();
        self.values.extend(values);
        self.len = self.values.len();
        assert!(self.len < u32::MAX as usize, "a MinTree indexes its values with u32");
        let leaves = self.len.next_power_of_two();
        self.values.resize(leaves, u64::MAX);
        self.winners.clear();
        self.winners.resize(leaves, 0);
        for node in (1..leaves).rev() {
            let (left, right) = (self.child_winner(2 * node), self.child_winner(2 * node + 1));
            self.winners[node] = self.better(left, right);
        }
    }

    /// The number of values (without padding).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Value `index`.
    #[inline]
    pub fn get(&self, index: u32) -> u64 {
        self.values[index as usize]
    }

    /// The index of the smallest value, the lowest index on ties.
    ///
    /// # Panics
    ///
    /// If the tree is empty.
    #[inline]
    pub fn min_index(&self) -> u32 {
        assert!(self.len > 0, "the minimum of no values");
        if self.winners.len() > 1 { self.winners[1] } else { 0 }
    }

    /// The smallest value.
    #[inline]
    pub fn min_value(&self) -> u64 {
        self.values[self.min_index() as usize]
    }

    /// Sets value `index` to `value`, a value not smaller than its current one.
    ///
    /// Only the nodes that `index` won can change, so the walk stops at the first node
    /// won by another index: `O(1)` for most increments, `O(log n)` at worst.
    #[inline]
    pub fn increase(&mut self, index: u32, value: u64) {
        debug_assert!(value >= self.values[index as usize]);
        self.values[index as usize] = value;
        let mut node = (self.values.len() + index as usize) / 2;
        while node >= 1 && self.winners[node] == index {
            let (left, right) = (self.child_winner(2 * node), self.child_winner(2 * node + 1));
            self.winners[node] = self.better(left, right);
            node /= 2;
        }
    }

    /// Sets value `index` to any `value`, in `O(log n)`.
    #[inline]
    pub fn set(&mut self, index: u32, value: u64) {
        self.values[index as usize] = value;
        let mut node = (self.values.len() + index as usize) / 2;
        while node >= 1 {
            let (left, right) = (self.child_winner(2 * node), self.child_winner(2 * node + 1));
            self.winners[node] = self.better(left, right);
            node /= 2;
        }
    }

    /// The winner of `node`, a leaf (`node ≥ leaves`) being its own index.
    #[inline]
    fn child_winner(&self, node: usize) -> u32 {
        let leaves = self.values.len();
        if node >= leaves { (node - leaves) as u32 } else { self.winners[node] }
    }

    /// The lower value, `left` on ties (`left` always has the lower index).
    #[inline]
    fn better(&self, left: u32, right: u32) -> u32 {
        if self.values[right as usize] < self.values[left as usize] { right } else { left }
    }

    /// Bytes held by the tree.
    pub fn state_bytes(&self) -> usize {
        self.values.capacity() * std::mem::size_of::<u64>()
            + self.winners.capacity() * std::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The scan the tree replaces: lowest index among the smallest.
    fn scan(values: &[u64]) -> u32 {
        let mut best = 0;
        for (index, &value) in values.iter().enumerate() {
            if value < values[best] {
                best = index;
            }
        }
        best as u32
    }

    #[test]
    fn one_value_and_ties_to_the_lowest_index() {
        let mut tree = MinTree::new([5]);
        assert_eq!((tree.min_index(), tree.min_value()), (0, 5));
        tree.increase(0, 9);
        assert_eq!(tree.min_value(), 9);
        let mut tree = MinTree::new([3, 1, 1, 2, 1]);
        assert_eq!(tree.min_index(), 1);
        tree.increase(1, 4);
        assert_eq!(tree.min_index(), 2);
        tree.set(4, 0);
        assert_eq!(tree.min_index(), 4);
        // Padding never wins, even against u64::MAX.
        let tree = MinTree::new([u64::MAX; 3]);
        assert_eq!(tree.min_index(), 0);
    }

    proptest! {
        #[test]
        fn the_tree_minimum_is_the_scan_minimum(
            len in 1usize..70,
            ops in prop::collection::vec((0usize..70, 0u64..6, any::<bool>()), 0..400),
        ) {
            let mut values = vec![0u64; len];
            let mut tree = MinTree::new(values.iter().copied());
            for (index, amount, increase) in ops {
                let index = index % len;
                if increase {
                    values[index] += amount;
                    tree.increase(index as u32, values[index]);
                } else {
                    values[index] = amount;
                    tree.set(index as u32, amount);
                }
                prop_assert_eq!(tree.min_index(), scan(&values));
                prop_assert_eq!(tree.min_value(), values[scan(&values) as usize]);
                prop_assert_eq!(tree.len(), len);
            }
            let rebuilt = MinTree::new(values.iter().copied());
            prop_assert_eq!(rebuilt.min_index(), tree.min_index());
        }
    }
}
