//! The live spans of one flip set after another, each derived from the one before: what a
//! rematerialization fit asks hundreds of times, of sets a flip or two apart (a candidate tried
//! on top of the accepted ones, an accepted one pruned).
//!
//! The rules are those of [`for_each_taken`](super::for_each_taken): a step that writes only
//! flipped roots takes nothing; any other takes the roots it reads and writes, each flipped one
//! replaced by its expansion (what its producers read, through flipped roots); a loop's back
//! edge takes what it reads, as a step that writes nothing. Toggling one tensor changes the takes
//! of the steps that use it, or use a flipped root whose expansion reaches it, and of no other:
//! a toggle derives those steps' takes again, before and after, and the spans of the roots they
//! take. Each root keeps its takes as positions with counts, so its span shrinks when the last
//! take at one of its ends goes.
//!
//! Expansions met in a cycle depend on the order the full derivation meets them in, so this is
//! only made ([`FlipSpans::new`]) where no candidate's producers read another candidate that
//! (through candidates) reads it back; a producer reading its own output adds nothing either
//! way. Only candidates are toggled; a set with another tensor is derived in full by the caller.

use super::Uses;
use crate::dtype::DType;
use crate::graph::{ResolvedGraph, Storage};
use crate::lists::Lists;
use crate::problem::LiveInterval;

/// Where takes come from: a step, or a loop's back edge.
struct Source {
    position: u32,
    /// The roots it reads, then those it writes, repeats kept (each is one take).
    uses: Vec<u32>,
    /// The roots it writes: all flipped, it takes nothing.
    writes: Vec<u32>,
}

/// A flip set's live spans, and what moving to the next set needs.
pub(crate) struct FlipSpans {
    sources: Vec<Source>,
    /// Per root, the steps that write it (the producers its expansion reads through).
    producers: Lists,
    /// Per root, the sources among whose uses it is, once each.
    takers: Vec<Vec<u32>>,
    /// Per candidate root, the other candidate roots whose producers read it.
    dependents: Vec<Vec<u32>>,
    /// Per step, the roots it reads.
    reads: Vec<Vec<u32>>,
    /// Per tensor, whether it may be flipped here, and whether it is a root (a flag on any
    /// other tensor changes nothing: only roots are taken).
    candidate: Vec<bool>,
    is_root: Vec<bool>,
    /// The current set, one flag per tensor, and its tensors in order.
    flags: Vec<bool>,
    flipped: Vec<usize>,
    /// Per root, whether its expansion is to be derived again.
    pending: Vec<bool>,
    /// Per flipped root, its expansion: sorted, each once.
    expansion: Vec<Vec<u32>>,
    /// Per root, the positions that take it, with how many takes, by position.
    takes: Vec<Vec<(u32, u32)>>,
    spans: Vec<Option<LiveInterval>>,
    floors: Floors,
}

/// What the floor of the current set is made of, kept as its spans move: per region of an arena
/// (a device, and a dtype when regions are by dtype), the live occupied bytes at each position
/// with their peak ([`PeakTree`]), so a span that moves is two range additions and the floor a
/// read of each region's peak; and the always-live bytes.
pub(super) struct Floors {
    /// Per root, the region its buffer is in, unless it is always-live or owns no storage.
    region: Vec<Option<u32>>,
    occupied: Vec<u64>,
    always_live: Vec<bool>,
    bytes: Vec<u64>,
    devices: Vec<usize>,
    live: Vec<PeakTree>,
    /// Of the roots not flipped.
    always_live_bytes: u64,
    device_count: usize,
}

impl Floors {
    /// The floors of the flip set `flipped` (a flag per tensor; those past the last ignored)
    /// whose roots live
    /// over `spans`.
    pub(super) fn of_spans(
        resolved: &ResolvedGraph,
        flipped: &[bool],
        spans: &[Option<LiveInterval>],
        by_dtype: bool,
    ) -> Floors {
        let mut floors = Floors::new(resolved, by_dtype);
        let flipped = &flipped[..flipped.len().min(resolved.tensors.len())];
        for (t, _) in flipped.iter().enumerate().filter(|(_, f)| **f) {
            floors.flipped(t, true);
        }
        for (r, &span) in spans.iter().enumerate() {
            floors.moved(r, None, span);
        }
        floors
    }

    fn new(resolved: &ResolvedGraph, by_dtype: bool) -> Floors {
        let positions = resolved.positions.len();
        let mut keys: Vec<(usize, Option<DType>)> = Vec::new();
        let mut region = vec![None; resolved.tensors.len()];
        for (t, rt) in resolved.tensors.iter().enumerate() {
            if rt.storage != Storage::Owned || rt.always_live {
                continue;
            }
            let key = (rt.device as usize, rt.dtype.filter(|_| by_dtype));
            let k = keys.iter().position(|&r| r == key).unwrap_or_else(|| {
                keys.push(key);
                keys.len() - 1
            });
            region[t] = Some(k as u32);
        }
        let owned_always =
            |rt: &crate::graph::ResolvedTensor| rt.storage == Storage::Owned && rt.always_live;
        Floors {
            region,
            occupied: (resolved.tensors.iter())
                .map(|rt| rt.occupied_size().unwrap_or(u64::MAX))
                .collect(),
            always_live: resolved.tensors.iter().map(owned_always).collect(),
            bytes: resolved.tensors.iter().map(|rt| rt.bytes).collect(),
            devices: keys.iter().map(|&(device, _)| device).collect(),
            live: (0..keys.len()).map(|_| PeakTree::new(positions)).collect(),
            always_live_bytes: (resolved.tensors.iter())
                .filter(|rt| owned_always(rt))
                .fold(0, |sum, rt| sum.saturating_add(rt.bytes)),
            device_count: resolved.device_ids.len(),
        }
    }

    /// Root `r`'s span moved from `old` to `new`.
    fn moved(&mut self, r: usize, old: Option<LiveInterval>, new: Option<LiveInterval>) {
        let Some(k) = self.region[r] else { return };
        let (live, occupied) = (&mut self.live[k as usize], i128::from(self.occupied[r]));
        if let Some(old) = old {
            live.add(old.first as usize, old.last as usize + 1, -occupied);
        }
        if let Some(new) = new {
            live.add(new.first as usize, new.last as usize + 1, occupied);
        }
    }

    /// Root `r` was flipped (`now`) or stored again.
    fn flipped(&mut self, r: usize, now: bool) {
        if self.always_live[r] {
            self.always_live_bytes = match now {
                true => self.always_live_bytes.saturating_sub(self.bytes[r]),
                false => self.always_live_bytes.saturating_add(self.bytes[r]),
            };
        }
    }

    /// Per device, the sum of its regions' peaks; and the always-live bytes.
    pub(super) fn floors(&self) -> (Vec<u64>, u64) {
        let mut floors = vec![0u64; self.device_count];
        for (live, &device) in self.live.iter().zip(&self.devices) {
            let peak = u64::try_from(live.peak()).unwrap_or(u64::MAX);
            floors[device] = floors[device].saturating_add(peak);
        }
        (floors, self.always_live_bytes)
    }
}

/// Past this many toggles from the current set, a set is derived afresh.
const MOST_TOGGLES: usize = 16;

impl FlipSpans {
    /// The spans of the empty set, ready to move to sets of `candidates`, with their floors
    /// (regions by dtype when `by_dtype`); `None` when the candidates' expansions could meet in
    /// a cycle (see the module docs).
    pub(crate) fn new(
        resolved: &ResolvedGraph,
        candidates: &[usize],
        by_dtype: bool,
    ) -> Option<FlipSpans> {
        let n = resolved.tensors.len();
        let root = |t: usize| resolved.root(t).map(|r| r as u32);
        let mut sources = Vec::new();
        let mut reads: Vec<Vec<u32>> = Vec::with_capacity(resolved.steps.len());
        for (position, p) in resolved.positions.iter().enumerate() {
            for s in p.steps() {
                let step_reads: Vec<u32> = (resolved.reads(s).iter())
                    .filter_map(|&t| root(t as usize))
                    .collect();
                let writes: Vec<u32> = (resolved.writes(s).iter())
                    .filter_map(|&t| root(t as usize))
                    .collect();
                sources.push(Source {
                    position: position as u32,
                    uses: [&step_reads[..], &writes[..]].concat(),
                    writes,
                });
                reads.push(step_reads);
            }
            if let Some(l) = p.loop_index() {
                sources.push(Source {
                    position: position as u32,
                    uses: resolved.back_edge_reads[l]
                        .iter()
                        .filter_map(|&t| root(t))
                        .collect(),
                    writes: Vec::new(),
                });
            }
        }
        let producers = Uses::side(resolved, true);
        let mut takers: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (s, source) in sources.iter().enumerate() {
            for &r in &source.uses {
                if takers[r as usize].last() != Some(&(s as u32)) {
                    takers[r as usize].push(s as u32);
                }
            }
        }
        let mut candidate = vec![false; n];
        for &c in candidates {
            candidate[c] = true;
        }
        let is_root: Vec<bool> = (0..n).map(|t| root(t) == Some(t as u32)).collect();
        let mut dependents: Vec<Vec<u32>> = vec![Vec::new(); n];
        for f in (0..n).filter(|&f| candidate[f] && is_root[f]) {
            for &s in &producers[f] {
                for &q in &reads[s as usize] {
                    let q = q as usize;
                    if q != f && candidate[q] && !dependents[q].contains(&(f as u32)) {
                        dependents[q].push(f as u32);
                    }
                }
            }
        }
        if has_cycle(&dependents) {
            return None;
        }
        let mut spans = FlipSpans {
            sources,
            producers,
            takers,
            dependents,
            reads,
            candidate,
            is_root,
            flags: vec![false; n],
            flipped: Vec::new(),
            pending: vec![false; n],
            expansion: vec![Vec::new(); n],
            takes: vec![Vec::new(); n],
            spans: vec![None; n],
            floors: Floors::new(resolved, by_dtype),
        };
        spans.derive();
        Some(spans)
    }

    pub(crate) fn flags(&self) -> &[bool] {
        &self.flags
    }

    pub(crate) fn spans(&self) -> &[Option<LiveInterval>] {
        &self.spans
    }

    /// What [`floor_of_spans`](super::floor_of_spans) says of the current set.
    pub(crate) fn floors(&self) -> (Vec<u64>, u64) {
        self.floors.floors()
    }

    /// Moves to the set of `flipped` (tensor indices, sorted, each once); `false`, and no move,
    /// when one is not a candidate.
    pub(crate) fn set(&mut self, flipped: &[usize]) -> bool {
        self.set_toggling_up_to(flipped, MOST_TOGGLES)
    }

    /// [`Self::set`], derived afresh past `most` toggles.
    fn set_toggling_up_to(&mut self, flipped: &[usize], most: usize) -> bool {
        if flipped.iter().any(|&t| !self.candidate[t]) {
            return false;
        }
        debug_assert!(flipped.is_sorted_by(|a, b| a < b));
        // The tensors in one set and not the other: a merge of the two sorted lists.
        let (mut toggles, mut a, mut b) = (Vec::new(), 0, 0);
        loop {
            match (self.flipped.get(a), flipped.get(b)) {
                (Some(x), Some(y)) if x == y => {
                    a += 1;
                    b += 1;
                }
                (Some(&x), Some(&y)) if x < y => {
                    toggles.push(x);
                    a += 1;
                }
                (Some(&x), None) => {
                    toggles.push(x);
                    a += 1;
                }
                (_, Some(&y)) => {
                    toggles.push(y);
                    b += 1;
                }
                (None, None) => break,
            }
        }
        self.flipped = flipped.to_vec();
        if toggles.len() > most {
            for t in toggles {
                self.flags[t] = !self.flags[t];
                self.floors.flipped(t, self.flags[t]);
            }
            self.derive();
        } else {
            for t in toggles {
                self.toggle(t);
            }
        }
        true
    }

    /// Derives every expansion, take and span of the current flags afresh.
    fn derive(&mut self) {
        self.expansion.iter_mut().for_each(Vec::clear);
        let flipped = self.flipped.clone();
        for &r in &flipped {
            self.pending[r] = true;
        }
        for r in flipped {
            self.expand(r);
        }
        self.takes.iter_mut().for_each(Vec::clear);
        let mut taken = Vec::new();
        for s in 0..self.sources.len() {
            self.taken_by(s, &mut taken);
            let position = self.sources[s].position;
            for &r in &taken {
                add_take(&mut self.takes[r as usize], position);
            }
        }
        for r in 0..self.spans.len() {
            self.set_span(r);
        }
    }

    /// Derives the expansion of root `r` (and of the flipped roots it reads through) where it is
    /// `pending`, under the current flags.
    fn expand(&mut self, r: usize) {
        if !self.pending[r] {
            return;
        }
        self.pending[r] = false;
        if !self.flags[r] || !self.is_root[r] {
            return;
        }
        let mut roots = Vec::new();
        for k in 0..self.producers[r].len() {
            let s = self.producers[r][k] as usize;
            for j in 0..self.reads[s].len() {
                let q = self.reads[s][j] as usize;
                if q == r {
                    continue;
                }
                if self.flags[q] {
                    self.expand(q);
                    roots.extend_from_slice(&self.expansion[q]);
                } else {
                    roots.push(q as u32);
                }
            }
        }
        roots.sort_unstable();
        roots.dedup();
        self.expansion[r] = roots;
    }

    /// The roots source `s` takes under the current flags, into `out`, repeats kept.
    fn taken_by(&self, s: usize, out: &mut Vec<u32>) {
        out.clear();
        let source = &self.sources[s];
        if !source.writes.is_empty() && source.writes.iter().all(|&w| self.flags[w as usize]) {
            return;
        }
        for &r in &source.uses {
            match self.flags[r as usize] {
                true => out.extend_from_slice(&self.expansion[r as usize]),
                false => out.push(r),
            }
        }
    }

    /// Flips `k` if it is not, else stores it again.
    fn toggle(&mut self, k: usize) {
        let now = !self.flags[k];
        // The flipped roots whose expansions can change, marked pending: `k` and those reading
        // it through flipped roots, under the flags after the toggle.
        let mut changed = vec![k];
        self.pending[k] = true;
        let mut at = 0;
        while at < changed.len() {
            let q = changed[at];
            at += 1;
            for &f in &self.dependents[q] {
                let f = f as usize;
                if self.flags[f] && !self.pending[f] {
                    self.pending[f] = true;
                    changed.push(f);
                }
            }
        }
        let mut sources: Vec<u32> = changed
            .iter()
            .flat_map(|&r| self.takers[r].iter().copied())
            .collect();
        sources.sort_unstable();
        sources.dedup();
        let mut touched: Vec<u32> = Vec::new();
        let mut taken = Vec::new();
        for &s in &sources {
            self.taken_by(s as usize, &mut taken);
            let position = self.sources[s as usize].position;
            for &r in &taken {
                remove_take(&mut self.takes[r as usize], position);
                touched.push(r);
            }
        }
        self.flags[k] = now;
        self.floors.flipped(k, now);
        // Every other expansion stands.
        for &r in &changed {
            self.expansion[r].clear();
        }
        for &r in &changed {
            self.expand(r);
        }
        for &s in &sources {
            self.taken_by(s as usize, &mut taken);
            let position = self.sources[s as usize].position;
            for &r in &taken {
                add_take(&mut self.takes[r as usize], position);
                touched.push(r);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for r in touched {
            self.set_span(r as usize);
        }
    }
}

/// Values per position under additions over ranges of positions, and their peak:
/// a segment tree, bottom up, whose node holds the peak of its span less what its ancestors
/// added to the whole of theirs (`added`, on inner nodes).
struct PeakTree {
    leaves: usize,
    peak: Vec<i128>,
    added: Vec<i128>,
}

impl PeakTree {
    fn new(positions: usize) -> PeakTree {
        let leaves = positions.next_power_of_two();
        PeakTree {
            leaves,
            peak: vec![0; 2 * leaves],
            added: vec![0; leaves],
        }
    }

    /// Adds `value` at positions `lo..hi` (`lo < hi`): to the nodes that cover the range, then
    /// the peaks of their ancestors again.
    fn add(&mut self, lo: usize, hi: usize, value: i128) {
        let (mut l, mut r) = (lo + self.leaves, hi + self.leaves);
        let (first, last) = (l, r - 1);
        while l < r {
            if l % 2 == 1 {
                self.add_at(l, value);
                l += 1;
            }
            if r % 2 == 1 {
                r -= 1;
                self.add_at(r, value);
            }
            l /= 2;
            r /= 2;
        }
        self.lift(first);
        self.lift(last);
    }

    fn add_at(&mut self, node: usize, value: i128) {
        self.peak[node] += value;
        if node < self.leaves {
            self.added[node] += value;
        }
    }

    /// Recomputes the peaks on the path from `node` to the root.
    fn lift(&mut self, mut node: usize) {
        while node > 1 {
            node /= 2;
            self.peak[node] = self.added[node] + self.peak[2 * node].max(self.peak[2 * node + 1]);
        }
    }

    fn peak(&self) -> i128 {
        self.peak[1]
    }
}

impl FlipSpans {
    /// Sets root `r`'s span from its takes, and moves it in the floors.
    fn set_span(&mut self, r: usize) {
        let new = span_of(&self.takes[r]);
        if new != self.spans[r] {
            self.floors.moved(r, self.spans[r], new);
            self.spans[r] = new;
        }
    }
}

fn add_take(takes: &mut Vec<(u32, u32)>, position: u32) {
    match takes.binary_search_by_key(&position, |&(p, _)| p) {
        Ok(i) => takes[i].1 += 1,
        Err(i) => takes.insert(i, (position, 1)),
    }
}

fn remove_take(takes: &mut Vec<(u32, u32)>, position: u32) {
    if let Ok(i) = takes.binary_search_by_key(&position, |&(p, _)| p) {
        takes[i].1 -= 1;
        if takes[i].1 == 0 {
            takes.remove(i);
        }
    }
}

fn span_of(takes: &[(u32, u32)]) -> Option<LiveInterval> {
    Some(LiveInterval::new(takes.first()?.0, takes.last()?.0))
}

/// Whether the graph of `edges` (node to the nodes it points to) has a cycle.
fn has_cycle(edges: &[Vec<u32>]) -> bool {
    // Kahn: a graph is acyclic iff repeatedly removing nodes with no incoming edge removes all.
    let mut incoming = vec![0usize; edges.len()];
    for e in edges.iter().flatten() {
        incoming[*e as usize] += 1;
    }
    let mut ready: Vec<usize> = (0..edges.len()).filter(|&v| incoming[v] == 0).collect();
    let mut removed = 0;
    while let Some(v) = ready.pop() {
        removed += 1;
        for &w in &edges[v] {
            incoming[w as usize] -= 1;
            if incoming[w as usize] == 0 {
                ready.push(w as usize);
            }
        }
    }
    removed < edges.len()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Moves `spans` to the set of `flipped`, toggling at most `most` tensors.
    pub(in crate::liveness) fn set_toggling(
        spans: &mut FlipSpans,
        flipped: &[usize],
        most: usize,
    ) -> bool {
        spans.set_toggling_up_to(flipped, most)
    }

    #[test]
    fn a_peak_tree_keeps_the_peak_of_its_additions() {
        let mut tree = PeakTree::new(5);
        tree.add(0, 3, 4);
        tree.add(2, 5, 3);
        assert_eq!(tree.peak(), 7);
        tree.add(2, 3, -7);
        assert_eq!(tree.peak(), 4);
        tree.add(0, 5, -4);
        assert_eq!(tree.peak(), 0);
        // Against the values themselves, over every range of a tree of 7 positions.
        let (mut tree, mut values) = (PeakTree::new(7), [0i128; 7]);
        for (step, (lo, hi)) in (0..7)
            .flat_map(|lo| (lo + 1..=7).map(move |hi| (lo, hi)))
            .enumerate()
        {
            let value = [5, -3, 2, -1][step % 4];
            tree.add(lo, hi, value);
            values[lo..hi].iter_mut().for_each(|v| *v += value);
            assert_eq!(tree.peak(), values.iter().copied().max().unwrap().max(0));
        }
    }

    #[test]
    fn a_cycle_is_found_and_a_chain_is_not() {
        assert!(has_cycle(&[vec![1], vec![2], vec![0]]));
        assert!(!has_cycle(&[vec![1], vec![2], vec![]]));
        assert!(!has_cycle(&[vec![1, 2], vec![2], vec![]]));
    }
}
