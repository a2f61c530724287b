//! Resuming a greedy decode from an earlier one past the prefix their orders share.
//!
//! A greedy decode places each item by the placed items it overlaps in time alone, so a decode of
//! a problem like an earlier one (a rematerialization flip drops a buffer and stretches a few live
//! intervals) takes the shared prefix of their orders as it is (`occupancy::Decode`). Past that
//! prefix most items still land where they landed before; [`Resume`] says when one surely does,
//! and its walk over the placed buffers is skipped.
//!
//! Each item of the decode under way (N) is paired with an entry of the earlier decode (E) that
//! holds the same item (size, alignment, interval), among the few after the last paired: both
//! orders are by size, ties by index, so they differ by a dropped or stretched item here and
//! there (any one-to-one pairing of equal items would be sound). Item x, paired with E's entry
//! k, placed after N's first r items, takes E's offset o for it when `E[..k]` and `N[..r]` agree
//! on every placed buffer that overlaps x in time and starts below `o + size(x)`: first-fit
//! chooses the lowest gap that clears what lies below its end, so it reads nothing above `o +
//! size(x)`, and both decodes saw the same ranges there. Best-fit compares every gap: there the
//! two must agree on every buffer that overlaps x in time.
//!
//! Where they differ below that end, first-fit still learns a floor: with `L` the lowest start
//! of a buffer they disagree on, every offset `o < o_E` with `o + size(x) <= L` is blocked in N
//! as it was in E, so N's walk starts at `L + 1 - size(x)`, past what it would only find taken.
//!
//! What they may disagree on is kept as a superset, the *changed* buffers: each entry of E
//! passed over by a pairing (pairs are made in order), each entry whose item landed elsewhere,
//! with where it landed, and each item of N without a pair. These sit in a segment tree over
//! positions that answers the lowest start among the changed buffers overlapping an interval,
//! in O(log T). An item without a pair is walked in full.
//!
//! Invariant: an item is given E's offset, or a floor for its walk, only where its walk from
//! zero would choose that offset, or one at or above the floor (property-tested against decodes
//! from scratch of perturbed problems).

use super::Item;
use super::greedy::GapChoice;
use super::segment_tree::{canonical, root_paths};
use crate::problem::LiveInterval;

/// The decode under way's pairing with an earlier one, and what the two may disagree on.
pub(super) struct Resume<'e> {
    earlier: &'e [(Item, u64)],
    /// The first entry of `earlier` not yet settled. Each before it either had an item land on
    /// it again or is in `changed`.
    next: usize,
    changed: LowestStart,
    /// Best-fit: every address the item overlaps in time matters, not only those below it.
    reads_all: bool,
}

/// How far past the first unsettled entry an item's pair is looked for: a flip drops a buffer
/// or stretches a few, so the two orders differ by a few entries at a time.
const LOOKAHEAD: usize = 8;

impl<'e> Resume<'e> {
    /// Resuming from the entries of `earlier` past the first `shared` (the prefix taken as is),
    /// for a decode of `items` by `choice`, in the tree an earlier resume filled (its memory).
    pub(super) fn new(
        earlier: &'e [(Item, u64)],
        shared: usize,
        items: &[Item],
        choice: GapChoice,
        changed: Option<LowestStart>,
    ) -> Self {
        let positions = (items.iter().chain(earlier.iter().map(|(item, _)| item)))
            .map(|item| item.live.last as usize + 1)
            .max()
            .unwrap_or(0);
        Resume {
            earlier,
            next: shared,
            changed: LowestStart::emptied(changed, positions),
            reads_all: choice == GapChoice::Smallest,
        }
    }

    /// Places `item` (not empty): at its pair's offset where that is surely the choice, else
    /// where `walk(floor)` chooses, told that no offset below `floor` is free (first-fit only;
    /// `0` where nothing is known).
    pub(super) fn place(&mut self, item: &Item, walk: impl FnOnce(u64) -> u64) -> u64 {
        let ahead = &self.earlier[self.next..];
        let Some(k) = (ahead.iter().take(LOOKAHEAD))
            .position(|(entry, _)| entry == item)
            .map(|at| self.next + at)
        else {
            let offset = walk(0);
            self.changed.insert(item.live, offset);
            return offset;
        };
        // The entries passed over hold items this decode places elsewhere or not at all.
        for &(passed, offset) in &self.earlier[self.next..k] {
            if passed.size > 0 {
                self.changed.insert(passed.live, offset);
            }
        }
        self.next = k + 1;
        let earlier = self.earlier[k].1;
        // The lowest start of every changed buffer is at most that of those the item overlaps:
        // where it already clears what the item reads, it answers for them without the tree.
        let reads_up_to = match self.reads_all {
            true => u64::MAX,
            false => earlier + item.size,
        };
        let lowest = match self.changed.least {
            least if least >= reads_up_to => least,
            _ => self.changed.lowest_start(item.live),
        };
        let offset = match self.reads_all {
            true if lowest == u64::MAX => earlier,
            true => walk(0),
            false if lowest >= earlier + item.size => earlier,
            false => walk((lowest + 1).saturating_sub(item.size)),
        };
        // Both places it held are changed; the tree keeps the lowest start an interval has, so
        // the lower of the two stands for both.
        if offset != earlier {
            self.changed.insert(item.live, earlier.min(offset));
        }
        offset
    }

    /// The tree, for the next resume's memory.
    pub(super) fn into_changed(self) -> LowestStart {
        self.changed
    }
}

/// Intervals of positions, each with a start address, answering the lowest start among those
/// that overlap a given interval. A segment tree ([`super::segment_tree`]): an interval is kept
/// at its canonical nodes (`covering` and `touching`) and on the two root paths of its ends
/// (`touching`); a query reads `touching` at its own canonical nodes and `covering` on its ends'
/// root paths, which between them meet every interval sharing a position with it.
pub(super) struct LowestStart {
    leaves: usize,
    covering: Vec<u64>,
    touching: Vec<u64>,
    /// The nodes set since the tree was last emptied, so emptying it costs what filling did (a
    /// fit's relayouts each empty a tree of thousands of positions to set a few hundred nodes).
    set: Vec<u32>,
    /// The lowest start of every interval held: an item that ends at or below it needs no query
    /// (more than half of those a rematerialization fit's relayouts resume).
    least: u64,
}

impl LowestStart {
    fn new(positions: usize) -> Self {
        let leaves = positions.next_power_of_two();
        LowestStart {
            leaves,
            covering: vec![u64::MAX; 2 * leaves],
            touching: vec![u64::MAX; 2 * leaves],
            set: Vec::new(),
            least: u64::MAX,
        }
    }

    /// `tree` emptied, for intervals of `positions`; a new one where there is none that wide.
    fn emptied(tree: Option<LowestStart>, positions: usize) -> Self {
        match tree {
            Some(mut tree) if tree.leaves >= positions => {
                for n in tree.set.drain(..) {
                    tree.covering[n as usize] = u64::MAX;
                    tree.touching[n as usize] = u64::MAX;
                }
                tree.least = u64::MAX;
                tree
            }
            _ => LowestStart::new(positions),
        }
    }

    /// The leaf span `[lo, hi)` of `live`, as node indices.
    fn leaves_of(&self, live: LiveInterval) -> (usize, usize) {
        (
            live.first as usize + self.leaves,
            live.last as usize + 1 + self.leaves,
        )
    }

    fn insert(&mut self, live: LiveInterval, start: u64) {
        self.least = self.least.min(start);
        let (lo, hi) = self.leaves_of(live);
        let LowestStart {
            covering,
            touching,
            set,
            ..
        } = self;
        let mut lower = |values: &mut Vec<u64>, n: usize| {
            if start < values[n] {
                values[n] = start;
                set.push(n as u32);
            }
        };
        // A node touches all its children do, so `touching` never rises up a path: a climb
        // stops at the first node as low as `start`. (Before the canonical nodes, some of
        // which lie on the paths, are lowered.)
        for mut n in [lo, hi - 1] {
            while n >= 1 && touching[n] > start {
                lower(touching, n);
                n /= 2;
            }
        }
        canonical(lo, hi, |n| {
            lower(covering, n);
            lower(touching, n);
        });
    }

    /// The lowest start among the intervals that share a position with `live`; `u64::MAX` when
    /// none does.
    fn lowest_start(&self, live: LiveInterval) -> u64 {
        let (lo, hi) = self.leaves_of(live);
        let mut lowest = u64::MAX;
        canonical(lo, hi, |n| lowest = lowest.min(self.touching[n]));
        root_paths(lo, hi - 1, 1, |n| lowest = lowest.min(self.covering[n]));
        lowest
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The tree's answer is the lowest start among the intervals inserted that overlap the
        /// query, by a scan of them.
        #[test]
        fn lowest_start_is_the_scans(
            inserted in proptest::collection::vec((0u32..40, 0u32..10, 0u64..1000), 0..30),
            queries in proptest::collection::vec((0u32..40, 0u32..10), 1..20),
        ) {
            let interval = |(first, len): (u32, u32)| LiveInterval::new(first, (first + len).min(45));
            // A tree emptied after use answers as a new one.
            let mut tree = LowestStart::new(64);
            for &(first, len) in &queries {
                tree.insert(interval((first, len)), u64::from(len));
            }
            let mut tree = LowestStart::emptied(Some(tree), 46);
            for &(first, len, start) in &inserted {
                tree.insert(interval((first, len)), start);
            }
            for &query in &queries {
                let query = interval(query);
                let scan = (inserted.iter())
                    .filter(|&&(first, len, _)| interval((first, len)).overlaps(query))
                    .map(|&(_, _, start)| start)
                    .min()
                    .unwrap_or(u64::MAX);
                prop_assert_eq!(tree.lowest_start(query), scan);
            }
        }
    }
}
