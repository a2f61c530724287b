//! Which items' live intervals overlap a given interval, and were placed before a given one,
//! without a quadratic scan.
//!
//! Static: built once over all the items of a region, with each item's *rank* (its place in the
//! placement order). A query for `[a, b]` returns the items that start before `a` and reach it (a
//! stabbing query down a segment tree over positions that holds each item's `[first + 1, last]`,
//! so no filtering is needed) plus the items that start in `[a, b]` (a range of the items sorted
//! by start, answered by a merge-sort tree over that order). Every list is sorted
//! by rank, so "placed before rank r" is a prefix of each: a query costs O(log n + k) for k
//! overlapping items placed before, and never looks at the items not yet placed.

use crate::problem::LiveInterval;

/// How many of `intervals` each one overlaps, itself included. Two sorts and a binary search
/// each: an interval overlaps `i` when it starts by `i`'s last position and does not end before
/// `i`'s first (those that end before it started before it too).
pub(crate) fn overlap_counts(intervals: &[LiveInterval]) -> impl Iterator<Item = u64> + '_ {
    let (firsts, lasts) = sorted_ends(intervals);
    intervals.iter().map(move |i| {
        let started = firsts.partition_point(|&f| f <= i.last);
        let ended = lasts.partition_point(|&l| l < i.first);
        (started - ended) as u64
    })
}

/// How many (ordered) pairs of `intervals` overlap, each interval with itself included: the sum
/// of [`overlap_counts`], each of its two terms summed by one merge of the sorted ends rather
/// than a binary search per interval (at a million intervals, a cache miss a step).
pub(crate) fn total_overlaps(intervals: &[LiveInterval]) -> u64 {
    let (firsts, lasts) = sorted_ends(intervals);
    // Summed over each value `x` of `at`: how many values of `of` lie below `x` (or at it, with
    // `or_equal`). Both are sorted, so one cursor walks `of` once.
    let below = |at: &[u32], of: &[u32], or_equal: bool| {
        let mut k = 0;
        at.iter()
            .map(|&x| {
                while of.get(k).is_some_and(|&y| y < x || (or_equal && y == x)) {
                    k += 1;
                }
                k as u64
            })
            .sum::<u64>()
    };
    below(&lasts, &firsts, true) - below(&firsts, &lasts, false)
}

/// The first and the last positions of `intervals`, each sorted.
fn sorted_ends(intervals: &[LiveInterval]) -> (Vec<u32>, Vec<u32>) {
    let mut firsts: Vec<u32> = intervals.iter().map(|i| i.first).collect();
    let mut lasts: Vec<u32> = intervals.iter().map(|i| i.last).collect();
    radsort::sort(&mut firsts);
    radsort::sort(&mut lasts);
    (firsts, lasts)
}

pub(crate) struct IntervalIndex {
    /// Leaves of the position tree: a power of two at least the number of positions.
    leaves: usize,
    /// Per position-tree node, the ranks of the items whose `[first + 1, last]` covers the
    /// node's range canonically, sorted.
    node_items: Vec<Vec<u32>>,
    /// Firsts in by-start order, and the merge-sort tree over that order (ranks sorted per node).
    starts: Vec<u32>,
    start_leaves: usize,
    start_tree: Vec<Vec<u32>>,
}

impl IntervalIndex {
    /// `rank[i]` is item `i`'s place in the placement order (a permutation of `0..n`).
    pub(crate) fn new(intervals: &[LiveInterval], rank: &[u32]) -> Self {
        let n = intervals.len();
        let positions = intervals
            .iter()
            .map(|i| i.last as usize + 1)
            .max()
            .unwrap_or(1);
        let leaves = positions.next_power_of_two();
        let mut node_items = vec![Vec::new(); 2 * leaves];
        for (item, interval) in intervals.iter().enumerate() {
            // Bottom-up canonical decomposition of [first + 1, last] (empty for one position).
            let (mut lo, mut hi) = (
                interval.first as usize + 1 + leaves,
                interval.last as usize + leaves + 1,
            );
            while lo < hi {
                if lo & 1 == 1 {
                    node_items[lo].push(rank[item]);
                    lo += 1;
                }
                if hi & 1 == 1 {
                    hi -= 1;
                    node_items[hi].push(rank[item]);
                }
                lo /= 2;
                hi /= 2;
            }
        }
        for list in &mut node_items {
            list.sort_unstable();
        }

        let mut by_start: Vec<u32> = (0..n as u32).collect();
        by_start.sort_by_key(|&i| (intervals[i as usize].first, i));
        let starts = by_start
            .iter()
            .map(|&i| intervals[i as usize].first)
            .collect();
        let start_leaves = n.next_power_of_two().max(1);
        let mut start_tree = vec![Vec::new(); 2 * start_leaves];
        for (k, &i) in by_start.iter().enumerate() {
            start_tree[start_leaves + k].push(rank[i as usize]);
        }
        for node in (1..start_leaves).rev() {
            let mut merged =
                Vec::with_capacity(start_tree[2 * node].len() + start_tree[2 * node + 1].len());
            merged.extend_from_slice(&start_tree[2 * node]);
            merged.extend_from_slice(&start_tree[2 * node + 1]);
            merged.sort_unstable();
            start_tree[node] = merged;
        }
        IntervalIndex {
            leaves,
            node_items,
            starts,
            start_leaves,
            start_tree,
        }
    }

    /// The number of items whose interval overlaps `query` (itself included if indexed), without
    /// listing them: O(log P + log n).
    pub(crate) fn count_overlapping(&self, query: LiveInterval) -> u64 {
        let a = query.first as usize;
        let mut count = 0u64;
        if a < self.leaves {
            let mut node = a + self.leaves;
            while node >= 1 {
                count += self.node_items[node].len() as u64;
                node /= 2;
            }
        }
        let lo = self.starts.partition_point(|&s| s < query.first);
        let hi = self.starts.partition_point(|&s| s <= query.last);
        count + (hi - lo) as u64
    }

    /// Appends to `out` the rank of every item of rank below `below` whose interval overlaps
    /// `query`.
    pub(crate) fn overlapping(&self, query: LiveInterval, below: u32, out: &mut Vec<u32>) {
        let a = query.first;
        if (a as usize) < self.leaves {
            let mut node = a as usize + self.leaves;
            while node >= 1 {
                let list = &self.node_items[node];
                out.extend_from_slice(&list[..list.partition_point(|&r| r < below)]);
                node /= 2;
            }
        }
        // Items starting in [a, b]: the canonical nodes of that range of the by-start order.
        let (mut lo, mut hi) = (
            self.starts.partition_point(|&s| s < a) + self.start_leaves,
            self.starts.partition_point(|&s| s <= query.last) + self.start_leaves,
        );
        while lo < hi {
            if lo & 1 == 1 {
                let list = &self.start_tree[lo];
                out.extend_from_slice(&list[..list.partition_point(|&r| r < below)]);
                lo += 1;
            }
            if hi & 1 == 1 {
                hi -= 1;
                let list = &self.start_tree[hi];
                out.extend_from_slice(&list[..list.partition_point(|&r| r < below)]);
            }
            lo /= 2;
            hi /= 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn finds_exactly_the_overlapping_items_placed_before(
            raw in prop::collection::vec((0u32..40, 0u32..10), 0..60),
            q in (0u32..45, 0u32..10),
            seed in any::<u64>(),
            below in 0u32..70,
        ) {
            let intervals: Vec<_> = raw.iter().map(|&(f, l)| LiveInterval::new(f, f + l)).collect();
            // A permutation of ranks from the seed.
            let mut rank: Vec<u32> = (0..intervals.len() as u32).collect();
            rank.sort_by_key(|&r| (u64::from(r) ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let index = IntervalIndex::new(&intervals, &rank);
            let query = LiveInterval::new(q.0, q.0 + q.1);
            let mut found = Vec::new();
            index.overlapping(query, below, &mut found);
            found.sort_unstable();
            let mut expected: Vec<u32> = (0..intervals.len())
                .filter(|&i| intervals[i].overlaps(query) && rank[i] < below)
                .map(|i| rank[i])
                .collect();
            expected.sort_unstable();
            prop_assert_eq!(found, expected);
            let all = (0..intervals.len()).filter(|&i| intervals[i].overlaps(query)).count();
            prop_assert_eq!(index.count_overlapping(query), all as u64);
            let counts: Vec<u64> = intervals.iter().map(|&a| intervals.iter().filter(|&&b| a.overlaps(b)).count() as u64).collect();
            prop_assert_eq!(overlap_counts(&intervals).collect::<Vec<_>>(), counts.clone());
            prop_assert_eq!(total_overlaps(&intervals), counts.iter().sum::<u64>());
        }
    }
}
