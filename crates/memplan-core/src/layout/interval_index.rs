//! Which buffers' live intervals overlap a given interval, without a quadratic scan.
//!
//! Static: built once over all the items of a region. A query for `[a, b]` returns the items that
//! contain `a` (a stabbing query down a segment tree over positions) plus the items that start in
//! `(a, b]` (a range of the items sorted by start). Each overlapping item is returned once, so a
//! query costs O(log P + k) for k overlaps.

use crate::problem::LiveInterval;

pub(crate) struct IntervalIndex {
    /// Leaves of the segment tree: a power of two at least the number of positions.
    leaves: usize,
    /// For each tree node, the items whose interval covers the node's range canonically.
    node_items: Vec<Vec<u32>>,
    /// Item indices sorted by (first, index), and their firsts.
    by_start: Vec<u32>,
    starts: Vec<u32>,
    intervals: Vec<LiveInterval>,
}

impl IntervalIndex {
    pub(crate) fn new(intervals: &[LiveInterval]) -> Self {
        let positions = intervals
            .iter()
            .map(|i| i.last as usize + 1)
            .max()
            .unwrap_or(1);
        let leaves = positions.next_power_of_two();
        let mut node_items = vec![Vec::new(); 2 * leaves];
        for (item, interval) in intervals.iter().enumerate() {
            // Bottom-up canonical decomposition of [first, last].
            let (mut lo, mut hi) = (
                interval.first as usize + leaves,
                interval.last as usize + leaves + 1,
            );
            while lo < hi {
                if lo & 1 == 1 {
                    node_items[lo].push(item as u32);
                    lo += 1;
                }
                if hi & 1 == 1 {
                    hi -= 1;
                    node_items[hi].push(item as u32);
                }
                lo /= 2;
                hi /= 2;
            }
        }
        let mut by_start: Vec<u32> = (0..intervals.len() as u32).collect();
        by_start.sort_by_key(|&i| (intervals[i as usize].first, i));
        let starts = by_start
            .iter()
            .map(|&i| intervals[i as usize].first)
            .collect();
        IntervalIndex {
            leaves,
            node_items,
            by_start,
            starts,
            intervals: intervals.to_vec(),
        }
    }

    /// Appends to `out` every item whose interval overlaps `query`.
    pub(crate) fn overlapping(&self, query: LiveInterval, out: &mut Vec<u32>) {
        let a = query.first;
        if (a as usize) < self.leaves {
            let mut node = a as usize + self.leaves;
            while node >= 1 {
                out.extend(
                    self.node_items[node]
                        .iter()
                        .filter(|&&i| self.intervals[i as usize].first < a),
                );
                node /= 2;
            }
        }
        let lo = self.starts.partition_point(|&s| s < a);
        let hi = self.starts.partition_point(|&s| s <= query.last);
        out.extend_from_slice(&self.by_start[lo..hi]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn finds_exactly_the_overlapping_items(
            raw in prop::collection::vec((0u32..40, 0u32..10), 0..60),
            q in (0u32..45, 0u32..10),
        ) {
            let intervals: Vec<_> = raw.iter().map(|&(f, l)| LiveInterval::new(f, f + l)).collect();
            let index = IntervalIndex::new(&intervals);
            let query = LiveInterval::new(q.0, q.0 + q.1);
            let mut found = Vec::new();
            index.overlapping(query, &mut found);
            found.sort_unstable();
            let expected: Vec<u32> = (0..intervals.len() as u32)
                .filter(|&i| intervals[i as usize].overlaps(query))
                .collect();
            prop_assert_eq!(found, expected);
        }
    }
}
