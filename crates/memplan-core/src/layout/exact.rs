//! The exact part of `search`: does a region fit under a capacity, and how low can it go?
//!
//! A depth-first search over *canonical* layouts, after MiniMalloc (Moffitt, ASPLOS 2023).
//! Every layout can be pushed down until each buffer rests on a conflicting one (or on 0); the
//! search enumerates only those, placing buffers in non-decreasing order of offset, each at its
//! `floor` (the lowest aligned offset clear of the conflicting buffers placed before it). At a
//! node the branches are the unplaced buffers in `(floor, rank)` order, skipping:
//! - a buffer that would break the order (below the last offset, or at it with a lower rank);
//! - a buffer at or above some unplaced buffer's `floor + size` (dominance: that one could sit
//!   wholly below it, so the layout is not pushed down);
//! - a buffer identical (size, alignment, interval, floor) to one already tried at the node;
//! - every sibling of a buffer that shares no time with any unplaced buffer, once it fails
//!   (placing it first changed nothing for the others).
//!
//! After a placement the node is dead when a buffer's floor plus size passes the capacity, or
//! when some time's unplaced bytes cannot fit between its placed height (or the current offset,
//! whichever is higher) and the capacity: the cross-section bound, kept in two max trees.
//!
//! [`fits`] runs the search under several static preorderings in turn, doubling a node budget
//! (most instances fall to one of them quickly, and which one differs). [`minimize`] starts
//! from a known layout (the warm start) and the lower bound, tries the bound first (most real
//! problems reach it), then bisects between what is proven and what is found. Every search has
//! a node limit and asks the caller's [`Control`] whether to stop, so the core has no clock;
//! the answer is the best layout found and the proven lower bound, with `optimal` when they
//! meet. Deterministic for a given node limit.

use super::{Control, Item, Progress, RegionLayout};
use crate::graph::align_up;
use crate::problem::LiveInterval;

/// A max segment tree over positions.
#[derive(Clone)]
struct MaxTree {
    tree: Vec<u64>,
    leaves: usize,
}

impl MaxTree {
    fn new(values: &[u64]) -> Self {
        let leaves = values.len().max(1).next_power_of_two();
        let mut tree = vec![0; 2 * leaves];
        tree[leaves..leaves + values.len()].copy_from_slice(values);
        for at in (1..leaves).rev() {
            tree[at] = tree[2 * at].max(tree[2 * at + 1]);
        }
        MaxTree { tree, leaves }
    }

    /// Sets a leaf without updating its ancestors: [`MaxTree::rebuild`] follows.
    fn set_leaf(&mut self, t: usize, value: u64) {
        self.tree[self.leaves + t] = value;
    }

    /// Recomputes the ancestors of leaves `a..=b`, a level at a time.
    fn rebuild(&mut self, a: usize, b: usize) {
        let (mut l, mut r) = ((self.leaves + a) / 2, (self.leaves + b) / 2);
        while l >= 1 {
            for at in l..=r {
                self.tree[at] = self.tree[2 * at].max(self.tree[2 * at + 1]);
            }
            l /= 2;
            r /= 2;
        }
    }

    /// The maximum over positions `lo..hi`.
    fn max(&self, lo: usize, hi: usize) -> u64 {
        let (mut l, mut r) = (lo + self.leaves, hi + self.leaves);
        let mut best = 0;
        while l < r {
            if l % 2 == 1 {
                best = best.max(self.tree[l]);
                l += 1;
            }
            if r % 2 == 1 {
                r -= 1;
                best = best.max(self.tree[r]);
            }
            l /= 2;
            r /= 2;
        }
        best
    }
}

/// Per position `t`: the highest end of the buffers placed at `t` and the bytes still to place
/// there. Placing in non-decreasing offset order, whatever is still to place at `t` lands above
/// both `height[t]` and the current offset, so `max(height[t], offset) + need[t]` must fit.
#[derive(Clone)]
struct Sections {
    height: Vec<u64>,
    /// The least floor of the buffers still to place at `t` (0 when none): all of them land
    /// at or above it (MiniMalloc's unallocated floor).
    lowest: Vec<u64>,
    need: Vec<u64>,
    /// `max(height, lowest) + need` per position.
    stacked: MaxTree,
    /// `need` per position.
    unplaced: MaxTree,
}

impl Sections {
    fn new(items: &[Item]) -> Self {
        let positions = items
            .iter()
            .map(|i| i.live.last as usize + 1)
            .max()
            .unwrap_or(1);
        let mut need = vec![0u64; positions];
        for it in items {
            for t in it.live.first..=it.live.last {
                need[t as usize] = need[t as usize].saturating_add(it.size);
            }
        }
        Sections {
            height: vec![0; positions],
            lowest: vec![0; positions],
            stacked: MaxTree::new(&need),
            unplaced: MaxTree::new(&need),
            need,
        }
    }

    /// Writes position `t`'s leaves; the caller rebuilds.
    fn write(&mut self, t: usize) {
        let base = self.height[t].max(self.lowest[t]);
        self.stacked.set_leaf(t, base.saturating_add(self.need[t]));
        self.unplaced.set_leaf(t, self.need[t]);
    }

    fn rebuild(&mut self, a: usize, b: usize) {
        self.stacked.rebuild(a, b);
        self.unplaced.rebuild(a, b);
    }

    /// Rebuilds over the span of the positions `changes` wrote.
    fn rebuild_at(&mut self, changes: &[(usize, u64)]) {
        let lo = changes.iter().map(|c| c.0).min();
        let hi = changes.iter().map(|c| c.0).max();
        if let (Some(lo), Some(hi)) = (lo, hi) {
            self.rebuild(lo, hi);
        }
    }

    /// Places `item` ending at `end`; returns the heights it replaced, to undo.
    fn place(&mut self, item: &Item, end: u64) -> Vec<u64> {
        let (a, b) = (item.live.first as usize, item.live.last as usize);
        let old = self.height[a..=b].to_vec();
        for t in a..=b {
            self.height[t] = self.height[t].max(end);
            self.need[t] -= item.size;
            self.write(t);
        }
        self.rebuild(a, b);
        old
    }

    fn unplace(&mut self, item: &Item, old: Vec<u64>) {
        let a = item.live.first as usize;
        for (k, h) in old.into_iter().enumerate() {
            self.height[a + k] = h;
            self.need[a + k] += item.size;
            self.write(a + k);
        }
        self.rebuild(a, item.live.last as usize);
    }

    /// The most any position of `lo..hi` needs when nothing more goes below `offset` there.
    fn top(&self, lo: usize, hi: usize, offset: u64) -> u64 {
        self.stacked
            .max(lo, hi)
            .max(offset.saturating_add(self.unplaced.max(lo, hi)))
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

/// How one depth-first run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    Found,
    Exhausted,
    /// Out of nodes: says nothing.
    OutOfNodes,
    /// The caller stopped it.
    Stopped,
}

/// Unplaced buffers that share no time with the other unplaced buffers outside positions
/// `lo..hi`: a sub-problem solved on its own (dynamic decomposition).
struct Part {
    members: Vec<u32>,
    lo: usize,
    hi: usize,
}

struct Search<'a> {
    items: &'a [Item],
    neighbours: &'a [Vec<u32>],
    /// Each buffer's place in the static preordering (ties between equal floors).
    rank: Vec<u32>,
    capacity: u64,
    floor: Vec<u64>,
    offset: Vec<u64>,
    placed: Vec<bool>,
    /// The offsets of the parts solved so far (each part's search unwinds when it returns).
    solution: Vec<u64>,
    sections: Sections,
    /// Per boundary `p` (between positions `p` and `p + 1`): the unplaced buffers live on both
    /// sides. At zero the part splits there.
    crossing: Vec<u32>,
    /// The buffers live at each position.
    live_at: &'a [Vec<u32>],
    /// Marks positions already refreshed in one placement.
    seen: Vec<u64>,
    stamp: u64,
    nodes: u64,
    limit: u64,
}

impl Search<'_> {
    /// Searches `part` from its current state, its last buffer placed at
    /// `(last_offset, last_rank)`.
    fn dfs(
        &mut self,
        part: &Part,
        last_offset: u64,
        last_rank: u32,
        control: &mut Control<'_>,
    ) -> Run {
        let mut order: Vec<usize> = part
            .members
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| !self.placed[i])
            .collect();
        if order.is_empty() {
            self.record(part);
            return Run::Found;
        }
        self.nodes += 1;
        if self.nodes > self.limit {
            return Run::OutOfNodes;
        }
        if self.nodes.is_multiple_of(1024) && control.stop() {
            return Run::Stopped;
        }
        order.sort_unstable_by_key(|&i| (self.floor[i], self.rank[i]));
        let min_height = order
            .iter()
            .map(|&i| self.floor[i] + self.items[i].size.max(1))
            .min()
            .unwrap_or(u64::MAX);
        let mut tried: Vec<(u64, u64, u32, u32, u64)> = Vec::new();
        for c in order {
            let (at, rank) = (self.floor[c], self.rank[c]);
            if at >= min_height {
                break;
            }
            if (at, rank) < (last_offset, last_rank) {
                continue;
            }
            let it = self.items[c];
            let key = (it.size, it.alignment, it.live.first, it.live.last, at);
            if tried.contains(&key) {
                continue;
            }
            tried.push(key);
            let run = self.branch(part, c, control);
            // A buffer with nothing unplaced beside it changes nothing for the rest: placed
            // later, it would leave them the same problem, which just failed.
            let hatless = self.neighbours[c].iter().all(|&j| self.placed[j as usize]);
            if run != Run::Exhausted || hatless {
                return run;
            }
        }
        Run::Exhausted
    }

    /// Places `c` at its floor, searches on (splitting the part where nothing unplaced crosses
    /// any more), and undoes the placement.
    fn branch(&mut self, part: &Part, c: usize, control: &mut Control<'_>) -> Run {
        let it = self.items[c];
        let at = self.floor[c];
        let end = at + it.size;
        self.placed[c] = true;
        self.offset[c] = at;
        let heights = self.sections.place(&it, end);
        let (first, last) = (it.live.first as usize, it.live.last as usize);
        let mut cuts = Vec::new();
        for p in first..last {
            self.crossing[p] -= 1;
            if self.crossing[p] == 0 {
                cuts.push(p);
            }
        }
        let mut raised: Vec<(usize, u64)> = Vec::new();
        let mut dead = false;
        for &j in &self.neighbours[c] {
            let j = j as usize;
            if self.placed[j] {
                continue;
            }
            let Some(lifted) = align_up(end, self.items[j].alignment) else {
                dead = true;
                break;
            };
            if lifted > self.floor[j] {
                raised.push((j, self.floor[j]));
                self.floor[j] = lifted;
                if lifted.saturating_add(self.items[j].size) > self.capacity {
                    dead = true;
                    break;
                }
            }
        }
        let lowered = if dead {
            Vec::new()
        } else {
            self.refresh_lowest(c, &raised)
        };
        dead = dead || self.sections.top(part.lo, part.hi, at) > self.capacity;
        let run = if dead {
            Run::Exhausted
        } else if cuts.is_empty() {
            self.dfs(part, at, self.rank[c], control)
        } else {
            self.split(part, &cuts, control)
        };
        for (j, old) in raised.into_iter().rev() {
            self.floor[j] = old;
        }
        for &(t, old) in lowered.iter().rev() {
            self.sections.lowest[t] = old;
            self.sections.write(t);
        }
        self.sections.rebuild_at(&lowered);
        for p in first..last {
            self.crossing[p] += 1;
        }
        self.sections.unplace(&it, heights);
        self.placed[c] = false;
        run
    }

    /// Solves the pieces of `part` between `cuts` one after another: they share no unplaced
    /// buffer, so one failing fails them all and no combination needs retrying.
    fn split(&mut self, part: &Part, cuts: &[usize], control: &mut Control<'_>) -> Run {
        let mut bounds = vec![part.lo];
        bounds.extend(cuts.iter().map(|&p| p + 1));
        bounds.push(part.hi);
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let members: Vec<u32> = part
                .members
                .iter()
                .copied()
                .filter(|&i| {
                    let live = self.items[i as usize].live;
                    !self.placed[i as usize]
                        && (live.first as usize) < hi
                        && live.last as usize >= lo
                })
                .collect();
            if members.is_empty() {
                continue;
            }
            let run = self.dfs(&Part { members, lo, hi }, 0, 0, control);
            if run != Run::Found {
                return run;
            }
        }
        self.record(part);
        Run::Found
    }

    /// Recomputes `lowest` where `c` was placed and where floors rose (`raised`: each buffer with
    /// its floor before); returns what it replaced.
    fn refresh_lowest(&mut self, c: usize, raised: &[(usize, u64)]) -> Vec<(usize, u64)> {
        self.stamp += 1;
        let mut lowered = Vec::new();
        // Only where the buffer was the lowest (before it was placed or raised) can it change.
        let before = std::iter::once((c, self.offset[c])).chain(raised.iter().copied());
        for (b, was) in before {
            let live = self.items[b].live;
            for t in live.first as usize..=live.last as usize {
                if self.seen[t] == self.stamp || self.sections.lowest[t] != was {
                    continue;
                }
                self.seen[t] = self.stamp;
                let lowest = self.live_at[t]
                    .iter()
                    .filter(|&&i| !self.placed[i as usize])
                    .map(|&i| self.floor[i as usize])
                    .min()
                    .unwrap_or(0);
                if lowest != self.sections.lowest[t] {
                    lowered.push((t, self.sections.lowest[t]));
                    self.sections.lowest[t] = lowest;
                    self.sections.write(t);
                }
            }
        }
        self.sections.rebuild_at(&lowered);
        lowered
    }

    /// Keeps the offsets of the part's placed buffers.
    fn record(&mut self, part: &Part) {
        for &i in &part.members {
            if self.placed[i as usize] {
                self.solution[i as usize] = self.offset[i as usize];
            }
        }
    }
}

/// The static preorderings tried in turn, each as a key to sort by (largest first): the most
/// bytes live beside the buffer at any time (`total`), its size and its area, in three orders.
fn preorderings(items: &[Item], sections: &Sections) -> Vec<Vec<u32>> {
    let total: Vec<u64> = items
        .iter()
        .map(|it| {
            (it.live.first..=it.live.last)
                .map(|t| sections.need[t as usize])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let area = |i: usize| items[i].size.saturating_mul(u64::from(items[i].live.len()));
    let keys: [&dyn Fn(usize) -> (u64, u64, u64); 3] = [
        &|i| (total[i], items[i].size, area(i)),
        &|i| (items[i].size, area(i), total[i]),
        &|i| (area(i), total[i], items[i].size),
    ];
    keys.iter()
        .map(|key| {
            let mut order: Vec<usize> = (0..items.len()).collect();
            order.sort_by_key(|&i| (std::cmp::Reverse(key(i)), i));
            let mut rank = vec![0u32; items.len()];
            for (r, &i) in order.iter().enumerate() {
                rank[i] = r as u32;
            }
            rank
        })
        .collect()
}

/// The items with time renumbered to their distinct start positions: two buffers overlap iff
/// one starts while the other is live, and the live bytes peak at a start, so neither the
/// conflicts nor the cross-section bound change, while each placement touches far fewer
/// positions.
fn compress(items: &[Item]) -> Vec<Item> {
    let mut starts: Vec<u32> = items.iter().map(|i| i.live.first).collect();
    starts.sort_unstable();
    starts.dedup();
    let at = |t: u32| starts.partition_point(|&s| s <= t) as u32 - 1;
    items
        .iter()
        .map(|i| Item {
            live: LiveInterval::new(at(i.live.first), at(i.live.last)),
            ..*i
        })
        .collect()
}

/// Whether the region fits under `capacity`, within `limit` nodes.
///
/// The preorderings take turns under a node budget that doubles each round (from the number of
/// buffers), so an easy instance under any one of them is found quickly; a proof of
/// infeasibility from any one is final.
pub(crate) fn fits(
    items: &[Item],
    neighbours: &[Vec<u32>],
    capacity: u64,
    limit: u64,
    control: &mut Control<'_>,
) -> (Feasibility, u64) {
    if items.iter().any(|i| i.size > capacity) {
        return (Feasibility::Infeasible, 0);
    }
    let compressed = compress(items);
    let items = &compressed[..];
    let sections = Sections::new(items);
    let ranks = preorderings(items, &sections);
    let positions = sections.height.len();
    let mut crossing = vec![0u32; positions];
    for it in items {
        for p in it.live.first..it.live.last {
            crossing[p as usize] += 1;
        }
    }
    let mut live_at = vec![Vec::new(); positions];
    for (i, it) in items.iter().enumerate() {
        for t in it.live.first..=it.live.last {
            live_at[t as usize].push(i as u32);
        }
    }
    let zeros: Vec<usize> = (0..positions.saturating_sub(1))
        .filter(|&p| crossing[p] == 0)
        .collect();
    let whole = Part {
        members: (0..items.len() as u32).collect(),
        lo: 0,
        hi: positions,
    };
    let mut nodes = 0u64;
    let mut budget = (items.len() as u64).max(16);
    loop {
        for rank in &ranks {
            let share = budget.min(limit - nodes);
            let mut s = Search {
                items,
                neighbours,
                rank: rank.clone(),
                capacity,
                floor: vec![0; items.len()],
                offset: vec![0; items.len()],
                placed: vec![false; items.len()],
                solution: vec![0; items.len()],
                sections: sections.clone(),
                crossing: crossing.clone(),
                live_at: &live_at,
                seen: vec![0; positions],
                stamp: 0,
                nodes: 0,
                limit: share,
            };
            let run = s.split(&whole, &zeros, control);
            nodes += s.nodes.min(share);
            match run {
                Run::Found => {
                    let extent = items
                        .iter()
                        .zip(&s.solution)
                        .map(|(i, &o)| o + i.size)
                        .max()
                        .unwrap_or(0);
                    let layout = RegionLayout {
                        offsets: s.solution,
                        extent,
                    };
                    return (Feasibility::Fits(layout), nodes);
                }
                Run::Exhausted => return (Feasibility::Infeasible, nodes),
                Run::Stopped => return (Feasibility::Unknown, nodes),
                Run::OutOfNodes if nodes >= limit => return (Feasibility::Unknown, nodes),
                Run::OutOfNodes => {}
            }
        }
        budget = budget.saturating_mul(2);
    }
}

/// The result of [`minimize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Minimized {
    pub layout: RegionLayout,
    /// No layout of the region goes below this.
    pub proven_lower_bound: u64,
    pub nodes: u64,
    pub stopped: bool,
}

/// The lowest layout it can find and prove, starting from `warm` (a valid layout) and `bound`
/// (a lower bound), within `limit` nodes in all; with a `goal`, the first layout within it (or
/// the proof that none exists) ends the search.
///
/// Probes capacities between the proven bound and the best layout: the bound first, then the
/// goal, or without one halfway up; a probe that fits lowers the best, an infeasible one raises the
/// bound, and one that runs out of nodes only moves the next probe up (it proves nothing).
#[allow(clippy::too_many_arguments)]
pub(crate) fn minimize(
    items: &[Item],
    neighbours: &[Vec<u32>],
    warm: RegionLayout,
    bound: u64,
    goal: Option<u64>,
    limit: u64,
    device: usize,
    control: &mut Control<'_>,
) -> Minimized {
    let mut best = warm;
    let mut proven = bound.min(best.extent);
    // The bound first: a tight capacity prunes the most, and most real problems reach it.
    let mut probe = proven;
    let mut nodes = 0u64;
    let mut stopped = false;
    let open = |best: u64, proven: u64| goal.is_none_or(|g| best > g && proven <= g);
    while proven < best.extent && nodes < limit && !stopped && open(best.extent, proven) {
        let target = if probe >= best.extent {
            best.extent - 1
        } else {
            probe
        };
        // Each probe gets a share of what is left: half for the bound, all for a goal after it.
        let left = limit - nodes;
        let share = match goal {
            _ if nodes == 0 => left / 2,
            Some(_) => left,
            None => left / 4,
        }
        .clamp(1, left);
        let (answer, used) = fits(items, neighbours, target, share, control);
        nodes += used;
        match answer {
            Feasibility::Fits(layout) => best = layout,
            Feasibility::Infeasible => proven = proven.max(target + 1),
            Feasibility::Unknown => stopped = control.stop(),
        }
        probe = if let Some(g) = goal {
            // With a goal: the bound, then the goal itself.
            g.max(proven)
        } else if best.extent <= target {
            // Found: keep probing from what is proven, halfway up.
            proven + (best.extent - proven) / 2
        } else {
            target + (best.extent - target).div_ceil(2)
        };
        control.report(Progress {
            device,
            evaluations: nodes,
            best_bytes: best.extent,
            bound_bytes: proven,
        });
    }
    Minimized {
        layout: best,
        proven_lower_bound: proven,
        nodes,
        stopped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::greedy::{GapChoice, place_in_order};
    use crate::problem::LiveInterval;
    use proptest::prelude::*;

    fn neighbours(items: &[Item]) -> Vec<Vec<u32>> {
        (0..items.len())
            .map(|i| {
                (0..items.len())
                    .filter(|&j| j != i && items[i].live.overlaps(items[j].live))
                    .map(|j| j as u32)
                    .collect()
            })
            .collect()
    }

    /// The optimum by brute force: the least first-fit decode over every order (first-fit of an
    /// optimal layout's offset order never does worse, so the minimum is the optimum).
    fn brute_force(items: &[Item]) -> u64 {
        let n = items.len();
        let nb = neighbours(items);
        let mut order: Vec<u32> = (0..n as u32).collect();
        let mut best = u64::MAX;
        permute(&mut order, 0, &mut |order| {
            let mut rank = vec![0u32; n];
            for (r, &i) in order.iter().enumerate() {
                rank[i as usize] = r as u32;
            }
            let layout = place_in_order(items, order, GapChoice::Lowest, &mut |r, out| {
                out.extend(
                    nb[order[r] as usize]
                        .iter()
                        .map(|&j| rank[j as usize])
                        .filter(|&q| (q as usize) < r),
                )
            });
            best = best.min(layout.extent);
        });
        best
    }

    fn permute(v: &mut [u32], k: usize, f: &mut dyn FnMut(&[u32])) {
        if k == v.len() {
            return f(v);
        }
        for i in k..v.len() {
            v.swap(k, i);
            permute(v, k + 1, f);
            v.swap(k, i);
        }
    }

    fn arb_items() -> impl proptest::strategy::Strategy<Value = Vec<Item>> {
        prop::collection::vec(
            (
                1u64..9,
                prop::sample::select(vec![1u64, 2, 4]),
                0u32..5,
                0u32..4,
            ),
            1..7,
        )
        .prop_map(|v| {
            v.into_iter()
                .map(|(size, alignment, first, len)| Item {
                    size: size * alignment,
                    alignment,
                    live: LiveInterval::new(first, first + len),
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn the_search_finds_the_optimum_and_proves_it(items in arb_items()) {
            let optimum = brute_force(&items);
            let nb = neighbours(&items);
            // At the optimum it fits; one byte below it is proven infeasible.
            let (at, _) = fits(&items, &nb, optimum, u64::MAX, &mut Control::default());
            let Feasibility::Fits(layout) = at else {
                return Err(TestCaseError::fail(format!("no layout at the optimum {optimum}")));
            };
            prop_assert!(layout.extent <= optimum);
            // The layout is sound: conflicting items do not share bytes; offsets aligned.
            for i in 0..items.len() {
                prop_assert_eq!(layout.offsets[i] % items[i].alignment, 0);
                for &j in &nb[i] {
                    let j = j as usize;
                    let (a, b) = (layout.offsets[i], layout.offsets[j]);
                    prop_assert!(a + items[i].size <= b || b + items[j].size <= a, "{} and {} overlap", i, j);
                }
            }
            if optimum > 0 {
                let (below, _) = fits(&items, &nb, optimum - 1, u64::MAX, &mut Control::default());
                prop_assert_eq!(below, Feasibility::Infeasible);
            }
            // Minimize from a bump layout reaches the optimum and says so.
            let mut extent = 0;
            let offsets = items.iter().map(|i| { let o = align_up(extent, i.alignment).unwrap(); extent = o + i.size; o }).collect();
            let m = minimize(&items, &nb, RegionLayout { offsets, extent }, 0, None, u64::MAX, 0, &mut Control::default());
            prop_assert_eq!(m.layout.extent, optimum);
            prop_assert!(m.layout.extent <= m.proven_lower_bound, "proven optimal");
            // With a goal: met at the optimum; proven out of reach one byte below it.
            let bump = RegionLayout { offsets: m.layout.offsets.clone(), extent: u64::MAX };
            let at = minimize(&items, &nb, bump.clone(), 0, Some(optimum), u64::MAX, 0, &mut Control::default());
            prop_assert!(at.layout.extent <= optimum);
            if optimum > 0 {
                let below = minimize(&items, &nb, bump, 0, Some(optimum - 1), u64::MAX, 0, &mut Control::default());
                prop_assert!(below.proven_lower_bound > optimum - 1);
            }
        }
    }

    #[test]
    fn a_node_limit_answers_unknown_not_wrong() {
        let items: Vec<Item> = (0..12)
            .map(|i| Item {
                size: 3 + (i * 7) % 11,
                alignment: 1,
                live: LiveInterval::new(i as u32 % 4, i as u32 % 4 + 3),
            })
            .collect();
        let nb = neighbours(&items);
        let unlimited = |capacity| fits(&items, &nb, capacity, u64::MAX, &mut Control::default()).0;
        let mut optimum = items.iter().map(|i| i.size).sum::<u64>();
        while matches!(unlimited(optimum - 1), Feasibility::Fits(_)) {
            optimum -= 1;
        }
        assert_eq!(unlimited(optimum - 1), Feasibility::Infeasible);
        // Every placement is a node: 12 buffers cannot be placed within 3 nodes, and running
        // out proves nothing. Below the optimum, nothing fits, whatever the limit.
        let (answer, nodes) = fits(&items, &nb, optimum, 3, &mut Control::default());
        assert_eq!(answer, Feasibility::Unknown);
        assert!(nodes <= 3, "{nodes}");
        let (answer, _) = fits(&items, &nb, optimum - 1, 3, &mut Control::default());
        assert!(!matches!(answer, Feasibility::Fits(_)), "{answer:?}");
    }
}
