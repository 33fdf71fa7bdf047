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
    /// Node `k` holds the least `(value, index)` below it, packed as `value << 32 | index`
    /// so that one `u128` comparison orders by value, then by index. The root is node 1,
    /// leaf `i` is node `leaves + i`; leaves past `len` hold `u128::MAX`. Node 0 is unused.
    nodes: Vec<u128>,
    len: usize,
}

#[inline]
fn pack(value: u64, index: u32) -> u128 {
    (u128::from(value) << 32) | u128::from(index)
}

impl MinTree {
    /// A tree over `values`, built in `O(n)`.
    pub fn new(values: impl IntoIterator<Item = u64>) -> Self {
        let mut tree = Self::default();
        tree.rebuild(values);
        tree
    }

    /// Replaces every value, in `O(n)`, keeping the allocation when the size is the same.
    pub fn rebuild(&mut self, values: impl IntoIterator<Item = u64>) {
        let values = values.into_iter();
        self.nodes.clear();
        // Leaves first, at the front, then moved behind the internal nodes.
        self.nodes.extend(values.enumerate().map(|(index, value)| {
            assert!(index < u32::MAX as usize, "a MinTree indexes its values with u32");
            pack(value, index as u32)
        }));
        self.len = self.nodes.len();
        let leaves = self.len.next_power_of_two();
        self.nodes.resize(leaves, u128::MAX);
        self.nodes.splice(0..0, std::iter::repeat_n(u128::MAX, leaves));
        for node in (1..leaves).rev() {
            self.nodes[node] = self.nodes[2 * node].min(self.nodes[2 * node + 1]);
        }
    }

    /// Forgets every value, keeping the allocation: [`MinTree::len`] is then 0 until the
    /// next [`MinTree::rebuild`].
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.len = 0;
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
        (self.nodes[self.nodes.len() / 2 + index as usize] >> 32) as u64
    }

    /// The index of the smallest value, the lowest index on ties.
    ///
    /// # Panics
    ///
    /// If the tree is empty.
    #[inline]
    pub fn min_index(&self) -> u32 {
        assert!(self.len > 0, "the minimum of no values");
        self.nodes[1] as u32
    }

    /// The smallest value.
    #[inline]
    pub fn min_value(&self) -> u64 {
        assert!(self.len > 0, "the minimum of no values");
        (self.nodes[1] >> 32) as u64
    }

    /// Sets value `index` to `value`, a value not smaller than its current one.
    ///
    /// Only the nodes that `index` won can change, so the walk stops at the first node
    /// won by another index: `O(1)` for most increments, `O(log n)` at worst.
    #[inline]
    pub fn increase(&mut self, index: u32, value: u64) {
        let nodes = self.nodes.as_mut_slice();
        let mut node = nodes.len() / 2 + index as usize;
        let old = nodes[node];
        debug_assert!(value >= (old >> 32) as u64);
        // The new minimum of the subtree walked so far: each parent the old pair won takes
        // the lesser of it and the sibling's, one read per level instead of two.
        let mut carried = pack(value, index);
        nodes[node] = carried;
        while node > 1 && nodes[node / 2] == old {
            carried = carried.min(nodes[node ^ 1]);
            node /= 2;
            nodes[node] = carried;
        }
    }

    /// Sets value `index` to any `value`, in `O(log n)`.
    #[inline]
    pub fn set(&mut self, index: u32, value: u64) {
        let mut node = self.nodes.len() / 2 + index as usize;
        self.nodes[node] = pack(value, index);
        node /= 2;
        while node >= 1 {
            self.nodes[node] = self.nodes[2 * node].min(self.nodes[2 * node + 1]);
            node /= 2;
        }
    }

    /// Bytes held by the tree.
    pub fn state_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<u128>()
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
