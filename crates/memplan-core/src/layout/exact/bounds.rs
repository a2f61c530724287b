//! The search's incremental state: per time, the bytes still to place and the least floor of
//! what is left there (`Sections`, in one segment tree of maxima), the unplaced buffers by time
//! (`Unplaced`), and the journal that undoes a placement (`Journal`).

use super::*;

/// A segment tree over positions of `K` values each, keeping their maxima, elementwise: one walk
/// updates them all.
#[derive(Clone)]
pub(super) struct MaxTree<const K: usize> {
    pub(super) tree: Vec<[u64; K]>,
    pub(super) leaves: usize,
}

pub(super) fn elementwise_max<const K: usize>(a: [u64; K], b: [u64; K]) -> [u64; K] {
    std::array::from_fn(|k| a[k].max(b[k]))
}

impl<const K: usize> MaxTree<K> {
    pub(super) fn new(values: &[[u64; K]]) -> Self {
        let leaves = values.len().max(1).next_power_of_two();
        let mut tree = vec![[0; K]; 2 * leaves];
        tree[leaves..leaves + values.len()].copy_from_slice(values);
        for at in (1..leaves).rev() {
            tree[at] = elementwise_max(tree[2 * at], tree[2 * at + 1]);
        }
        MaxTree { tree, leaves }
    }

    /// Sets a leaf without updating its ancestors: [`MaxTree::rebuild`] follows.
    pub(super) fn set_leaf(&mut self, t: usize, value: [u64; K]) {
        self.tree[self.leaves + t] = value;
    }

    /// Recomputes the ancestors of leaves `a..=b`, a level at a time.
    pub(super) fn rebuild(&mut self, a: usize, b: usize) {
        let (mut l, mut r) = ((self.leaves + a) / 2, (self.leaves + b) / 2);
        while l >= 1 {
            for at in l..r + 1 {
                self.tree[at] = elementwise_max(self.tree[2 * at], self.tree[2 * at + 1]);
            }
            l /= 2;
            r /= 2;
        }
    }

    /// The maxima over positions `lo..hi`.
    pub(super) fn max(&self, lo: usize, hi: usize) -> [u64; K] {
        let (mut l, mut r) = (lo + self.leaves, hi + self.leaves);
        let mut best = [0; K];
        while l < r {
            if l % 2 == 1 {
                best = elementwise_max(best, self.tree[l]);
                l += 1;
            }
            if r % 2 == 1 {
                r -= 1;
                best = elementwise_max(best, self.tree[r]);
            }
            l /= 2;
            r /= 2;
        }
        best
    }
}

/// Per position `t`: the bytes still to place there and the least floor among them. Placing in
/// non-decreasing offset order, whatever is still to place at `t` lands above both that floor
/// (MiniMalloc's unallocated floor) and the current offset, so `max(lowest[t], offset) +
/// need[t]` must fit. Every unplaced buffer's floor is at or above the end of each placed buffer
/// beside it, so the lowest floor already covers what is placed at `t`.
#[derive(Clone)]
pub(super) struct Sections {
    pub(super) need: Vec<u64>,
    /// The least floor of the buffers still to place at `t` (`u64::MAX` when none)...
    pub(super) lowest: Vec<u64>,
    /// ...and how many of them rest on it: only when the last one leaves (placed, or its floor
    /// raised) does `lowest[t]` need a rescan.
    pub(super) resting: Vec<u32>,
    /// Per position: [`STACKED`] `lowest + need` with something to place there (else 0),
    /// [`UNPLACED`] `need`, and [`RESTING_ON`] `lowest` with something to place (else 0): a
    /// raised buffer's old floor above the maximum over its interval rests nowhere, and
    /// nothing there needs a look.
    pub(super) maxima: MaxTree<3>,
}

pub(super) const STACKED: usize = 0;
pub(super) const UNPLACED: usize = 1;
pub(super) const RESTING_ON: usize = 2;

impl Sections {
    pub(super) fn new(items: &[Item], positions: usize) -> Self {
        let mut need = vec![0u64; positions];
        let mut resting = vec![0u32; positions];
        for it in items {
            for t in it.live.first as usize..=it.live.last as usize {
                need[t] = need[t].saturating_add(it.size);
                resting[t] += 1;
            }
        }
        let leaves: Vec<[u64; 3]> = need.iter().map(|&n| [n, n, 0]).collect();
        Sections {
            lowest: vec![0; positions],
            resting,
            maxima: MaxTree::new(&leaves),
            need,
        }
    }

    /// How high what is still to place at a position reaches from its lowest floor (0 where
    /// nothing is): past the capacity, the position overflows.
    pub(super) fn stacked(lowest: u64, need: u64) -> u64 {
        if need > 0 {
            lowest.saturating_add(need)
        } else {
            0
        }
    }

    /// Writes position `t`'s leaves; the caller rebuilds.
    pub(super) fn write(&mut self, t: usize) {
        let stacked = Sections::stacked(self.lowest[t], self.need[t]);
        let resting_on = if self.resting[t] > 0 {
            self.lowest[t]
        } else {
            0
        };
        self.maxima.set_leaf(t, [stacked, self.need[t], resting_on]);
    }

    pub(super) fn rebuild(&mut self, a: usize, b: usize) {
        self.maxima.rebuild(a, b);
    }

    /// A buffer of `size` bytes at `floor` over positions `first..=last` is placed: it no longer
    /// needs room there, nor rests there.
    pub(super) fn take(
        &mut self,
        journal: &mut Journal,
        first: usize,
        last: usize,
        size: u64,
        floor: u64,
    ) {
        let span = first..last + 1;
        let need = &mut self.need[span.clone()];
        let (lowest, resting) = (&self.lowest[span.clone()], &mut self.resting[span.clone()]);
        for (t, ((need, &lowest), resting)) in span.zip(need.iter_mut().zip(lowest).zip(resting)) {
            journal.note(t, lowest, *resting);
            *need -= size;
            *resting -= u32::from(lowest == floor);
        }
    }

    /// A buffer's floor over `first..=last` was raised from `old`: it no longer rests where
    /// `old` is the lowest floor.
    pub(super) fn lift(&mut self, journal: &mut Journal, first: usize, last: usize, old: u64) {
        let span = first..last + 1;
        let (lowest, resting) = (&self.lowest[span.clone()], &mut self.resting[span.clone()]);
        for (t, (&lowest, resting)) in span.zip(lowest.iter().zip(resting)) {
            if lowest == old {
                journal.note(t, old, *resting);
                *resting -= 1;
            }
        }
    }

    /// The most any position of `lo..hi` needs when nothing more goes below `offset` there.
    pub(super) fn top(&self, lo: usize, hi: usize, offset: u64) -> u64 {
        let m = self.maxima.max(lo, hi);
        m[STACKED].max(offset.saturating_add(m[UNPLACED]))
    }
}

/// What the sections were at each position a placement changed, to undo it: `(position, lowest
/// and resting before)`, each position once per placement. Apart from the sections, so that
/// their loops can note a position while they hold them.
pub(super) struct Journal {
    pub(super) changed: Vec<(u32, u64, u32)>,
    /// The placement that last noted each position.
    pub(super) seen: Vec<u64>,
    pub(super) stamp: u64,
}

impl Journal {
    pub(super) fn note(&mut self, t: usize, lowest: u64, resting: u32) {
        if self.seen[t] != self.stamp {
            self.seen[t] = self.stamp;
            self.changed.push((t as u32, lowest, resting));
        }
    }
}

/// Per position, the buffers live there that are still to place, at the front of its list.
/// Placing a buffer swaps it just past the end of that prefix at each of its positions; undoing
/// placements last-first grows each prefix back over it, so the lists stay consistent without
/// any search.
#[derive(Clone)]
pub(super) struct Unplaced {
    pub(super) lists: Vec<Vec<u32>>,
    /// The length of each position's prefix.
    pub(super) count: Vec<u32>,
    /// Buffer `i`'s index in the list of position `first + k` is `slot[base[i] + k]`.
    pub(super) slot: Vec<u32>,
    pub(super) base: Vec<usize>,
}

impl Unplaced {
    pub(super) fn new(items: &[Item], positions: usize) -> Self {
        let mut lists = vec![Vec::new(); positions];
        let mut slot = Vec::new();
        let mut base = Vec::with_capacity(items.len());
        for (i, it) in items.iter().enumerate() {
            base.push(slot.len());
            for list in &mut lists[it.live.first as usize..=it.live.last as usize] {
                slot.push(list.len() as u32);
                list.push(i as u32);
            }
        }
        let count = lists.iter().map(|l| l.len() as u32).collect();
        Unplaced {
            lists,
            count,
            slot,
            base,
        }
    }

    pub(super) fn at(&self, t: usize) -> &[u32] {
        &self.lists[t][..self.count[t] as usize]
    }

    pub(super) fn remove(&mut self, items: &[Item], i: usize) {
        let first = items[i].live.first as usize;
        for t in first..items[i].live.last as usize + 1 {
            let k = self.slot[self.base[i] + t - first] as usize;
            let end = self.count[t] as usize - 1;
            let d = self.lists[t][end] as usize;
            self.lists[t].swap(k, end);
            self.slot[self.base[i] + t - first] = end as u32;
            self.slot[self.base[d] + t - items[d].live.first as usize] = k as u32;
            self.count[t] -= 1;
        }
    }

    /// Undoes the last [`Unplaced::remove`] still in force, of a buffer live over `live`.
    pub(super) fn restore(&mut self, live: LiveInterval) {
        for count in &mut self.count[live.first as usize..live.last as usize + 1] {
            *count += 1;
        }
    }
}

/// The answer of one capacity search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Feasibility {
    /// A layout within the capacity.
    Fits(RegionLayout),
    /// Proven: nothing fits.
    Infeasible,
    /// The node limit or the caller stopped it first.
    Unknown,
}
