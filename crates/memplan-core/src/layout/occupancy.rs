//! Which addresses are taken at which times: what lets `first-fit` and `best-fit` place a
//! buffer without listing the thousands of placed buffers it overlaps.
//!
//! A segment tree over time (compressed to the distinct starts). Each node keeps two unions of
//! address ranges, merged as they grow: `touching`, of the placed buffers whose live interval
//! meets the node's span, and `covering`, of those whose interval spans all of it. A buffer's
//! interval splits into canonical nodes (it covers them) whose strict ancestors lie on the
//! two root paths of its first and last positions (it touches them). So a query for `[a, b]`
//! reads the `touching` union of its own canonical nodes and the `covering` union of every
//! node on the root paths of `a` and `b`: exactly the buffers that overlap `[a, b]`, in
//! O(log T) merged lists, each as short as the address map is fragmented there. No item's
//! span holds a node above the level of the longest span's canonical nodes, so nothing reads
//! or fills a union up there: a schedule of short lifetimes skips the tree's top levels, and
//! the tree stores none of them ([`Nodes`]). A leaf is one start: whatever meets it covers it,
//! so its two unions are one.
//!
//! The unions hold addresses in units of the region's [`grain`]: a decode puts each buffer at 0
//! or at an end of others rounded up to its alignment, as the exact search's canonical layouts
//! do, so the grain divides every offset. They hold them as `u32` until an address passes
//! `u32::MAX` units, and the tree then widens to `u64` where it stands: at a million buffers
//! the process takes a quarter less memory than with `u64`, and an eighth less time. The width
//! is not chosen up front from the sum of the sizes: the ResNet-50 problem tiled 96 times sums
//! past `u32` units while its layouts reach a twentieth of it.
//!
//! Invariant: the union of the ranges a query reads equals the union of the address ranges of
//! the placed buffers overlapping it, so the gap chosen is the one a full scan would choose
//! (property-tested against [`choose_gap`] over the listed conflicts).
//!
//! Regions of up to [`SCAN_MOST`] buffers skip the tree: their placed buffers are kept in order
//! of offset ([`ByOffset`]) and a query scans them bottom up, passing those it does not meet in
//! time. That is quadratic, but its steps are few and cache-friendly, and it fills one list
//! where the tree fills two unions per node; and it passes whole a block of them that has no
//! hole for the item ([`Block`]). Measured side by side (`memplan bench`, three runs or more of
//! each): on the two large ML-compiler problems (816 and 1,042 buffers) `best` takes a quarter
//! of the tree's time or less and first-fit a third to a sixth; on the 2,000-tensor training
//! step a fit a third and a sweep half; at 2,000 buffers all live at once a third; at 2,000
//! random intervals the two are even, which bounds the choice (the scan is quadratic).
//! [`Taken`] is whichever of the two a region uses; both give the same offsets.

use super::exact::grain;
use super::greedy::{GapChoice, GapScan, choose_gap};
use super::interval_index::IntervalIndex;
use super::resume::{LowestStart, Resume};
use super::segment_tree::{canonical, root_paths};
use super::{Item, RegionLayout, by_position};
use crate::graph::align_up;
use crate::problem::LiveInterval;
use crate::reused::Reused;

/// An address as the tree's unions hold it: in units of the region's grain, as `u32` until one
/// passes it, then as `u64` (see the module docs).
trait Unit: Copy + Ord + Default + Into<u64> + TryFrom<u64> {}

impl Unit for u32 {}
impl Unit for u64 {}

/// Disjoint address ranges `[start, end)`, sorted; touching ranges merge. They live in a
/// [`Pool`]: the first `len` of the block at `at`, whose slots are the least block size that
/// holds them ([`Ranges::capacity`]; a union merged down past a smaller size moves to it), so a union is three words. Half the non-empty unions hold one or two ranges (a
/// million buffers of random lifetimes), so the least block is one slot. The end of the last
/// (`top`, when `len > 0`) is kept here too: most inserts compare only with it, and reading it
/// from the pool was a cache miss per union (two fifths of the inserts' time on the ResNet-50
/// problem tiled 96 times).
#[derive(Default, Clone, Copy)]
struct Ranges<W> {
    at: u32,
    len: u32,
    top: W,
}

impl<W> Ranges<W> {
    /// The slots of its block; none while it is empty.
    fn capacity(&self) -> usize {
        capacity_of(self.len as usize)
    }
}

/// The slots of the block of a union of `len` ranges: the least block size that holds them.
/// The sizes are the powers of two and one and a half times each (1, 2, 3, 4, 6, 8, 12...), so a
/// block is at most half as large again as its union, not twice (at a million buffers of random
/// lifetimes the pool held 75% ranges and 25% unused slots: 129 MB).
fn capacity_of(len: usize) -> usize {
    match len {
        0 => 0,
        len => {
            let p = len.next_power_of_two();
            match p >= 4 && len <= p / 4 * 3 {
                true => p / 4 * 3,
                false => p,
            }
        }
    }
}

/// The largest block size at most `slots` (one or more).
fn largest_block_in(slots: usize) -> usize {
    let p = 1 << slots.ilog2();
    match p >= 2 && slots >= p + p / 2 {
        true => p + p / 2,
        false => p,
    }
}

/// The ranges of every union of a tree, in blocks of a few large chunks: a union that outgrows
/// its block moves to one of the next size ([`capacity_of`]), and leaves the old one to the next
/// union that needs that size. A few hundred allocations where a vector per union made two million at a million
/// buffers (and freeing them took a tenth of first-fit's time); chunks, not one vector, because
/// a vector grows by doubling and copying: half its last doubling went unused, and in wasm
/// (whose memory never shrinks) the copy it left behind stayed in the page's memory (a 2.35
/// million-allocation snapshot: a 256 MiB pool half full, and its 128 MiB old copy).
#[derive(Default)]
struct Pool<W> {
    /// [`CHUNK`] slots each, but a block longer than that has a chunk of its own. A block is in
    /// one chunk: its address `at` is its chunk's index times [`CHUNK`] plus its offset there.
    chunks: Vec<Vec<(W, W)>>,
    /// The chunk new blocks are cut from, and how much of it is cut.
    cutting: Option<usize>,
    cut: usize,
    /// Free blocks by size: the `k`-th block size in list `k` ([`free_list`]).
    free: Vec<Vec<u32>>,
}

/// The slots of a [`Pool`]'s chunk.
const CHUNK: usize = 1 << 16;

/// The free list of blocks of `capacity` slots (a block size: [`capacity_of`]): sizes in
/// increasing order, 1 in list 0, 2 in list 1, 3 in list 2, 4 in list 3, 6 in list 4...
fn free_list(capacity: usize) -> usize {
    let a = capacity.trailing_zeros() as usize;
    match capacity >> a {
        // 2^a
        1 => (2 * a).saturating_sub(1),
        // 3 * 2^a
        _ => 2 * a + 2,
    }
}

impl<W: Unit> Pool<W> {
    fn get(&self, r: Ranges<W>) -> &[(W, W)] {
        if r.len == 0 {
            return &[];
        }
        let at = r.at as usize;
        &self.chunks[at / CHUNK][at % CHUNK..][..r.len as usize]
    }

    /// `r`'s block, as its length sizes it.
    fn block(&mut self, r: Ranges<W>) -> &mut [(W, W)] {
        let at = r.at as usize;
        &mut self.chunks[at / CHUNK][at % CHUNK..][..r.capacity()]
    }

    /// Every block free and gone; the chunks stay for the next tree (a local search decodes
    /// thousands of times).
    fn clear(&mut self) {
        self.chunks.retain(|c| c.len() == CHUNK);
        (self.cutting, self.cut) = (None, 0);
        self.free.iter_mut().for_each(Vec::clear);
    }

    fn release(&mut self, at: usize, capacity: usize) {
        let k = free_list(capacity);
        if self.free.len() <= k {
            self.free.resize_with(k + 1, Vec::new);
        }
        self.free[k].push(u32::try_from(at).expect("pool addresses fit u32"));
    }

    /// A block of `capacity` slots (a power of two) no union holds.
    fn allocate(&mut self, capacity: usize) -> usize {
        if let Some(at) = self.free.get_mut(free_list(capacity)).and_then(Vec::pop) {
            return at as usize;
        }
        let address = |chunk: usize| {
            assert!(
                chunk < 1 << 16,
                "a pool of 2^32 ranges is past any memory a plan has"
            );
            chunk * CHUNK
        };
        if capacity > CHUNK {
            self.chunks.push(vec![Default::default(); capacity]);
            return address(self.chunks.len() - 1);
        }
        if self.cutting.is_none_or(|_| self.cut + capacity > CHUNK) {
            // The rest of the chunk goes to the free lists, the largest blocks first (each of
            // a block size, as every block is).
            if let Some(chunk) = self.cutting {
                while self.cut < CHUNK {
                    let size = largest_block_in(CHUNK - self.cut);
                    self.release(address(chunk) + self.cut, size);
                    self.cut += size;
                }
            }
            // The next chunk of the usual size: a cleared tree's where there is one.
            let from = self.cutting.map_or(0, |c| c + 1);
            let next = (from..self.chunks.len()).find(|&c| self.chunks[c].len() == CHUNK);
            self.cutting = Some(next.unwrap_or_else(|| {
                self.chunks.push(vec![Default::default(); CHUNK]);
                self.chunks.len() - 1
            }));
            self.cut = 0;
        }
        let at = address(self.cutting.expect("a chunk to cut")) + self.cut;
        self.cut += capacity;
        at
    }

    /// Room in `r`'s block for one more range.
    fn reserve_one(&mut self, r: &mut Ranges<W>) {
        let capacity = r.capacity();
        if (r.len as usize) < capacity {
            return;
        }
        self.move_block(r, capacity, capacity_of(r.len as usize + 1));
    }

    /// Moves `r`'s ranges from its block of `old` slots to a new one of `capacity`.
    fn move_block(&mut self, r: &mut Ranges<W>, old: usize, capacity: usize) {
        let at = self.allocate(capacity);
        let (from, len) = (r.at as usize, r.len as usize);
        // Blocks never overlap; the two may be in different chunks.
        for k in 0..len {
            let range = self.chunks[from / CHUNK][from % CHUNK + k];
            self.chunks[at / CHUNK][at % CHUNK + k] = range;
        }
        if old > 0 {
            self.release(from, old);
        }
        r.at = at as u32;
    }

    /// Adds `[start, end)` to `r`; `false` when it held it all already.
    fn insert(&mut self, r: &mut Ranges<W>, start: W, end: W) -> bool {
        let len = r.len as usize;
        // Most buffers land at or above the top of the ranges they meet.
        let top = (len > 0).then_some(r.top);
        match top {
            Some(top) if top == start => {
                self.block(*r)[len - 1].1 = end;
                r.top = end;
                return true;
            }
            Some(top) if top > start => {}
            _ => {
                self.reserve_one(r);
                r.len += 1;
                self.block(*r)[len] = (start, end);
                r.top = end;
                return true;
            }
        }
        // Below the top: the ranges it meets merge, and the top moves only if it passes it.
        r.top = r.top.max(end);
        // The first range that reaches `start`, and the first past it that begins after `end`.
        let v = self.get(*r);
        let lo = v.partition_point(|&(_, e)| e < start);
        if v.get(lo).is_some_and(|&(s, e)| s <= start && end <= e) {
            return false;
        }
        let hi = lo + v[lo..].iter().take_while(|&&(s, _)| s <= end).count();
        if lo == hi {
            self.reserve_one(r);
            r.len += 1;
            let block = self.block(*r);
            block.copy_within(lo..len, lo + 1);
            block[lo] = (start, end);
        } else {
            let merged = (start.min(v[lo].0), end.max(v[hi - 1].1));
            let (block, old) = (self.block(*r), r.capacity());
            block[lo] = merged;
            block.copy_within(hi..len, lo + 1);
            r.len -= (hi - lo - 1) as u32;
            if r.capacity() < old {
                self.move_block(r, old, r.capacity());
            }
        }
        true
    }
}

/// The first index at or after `from` whose element fails `pred` (true, then false, along `v`):
/// exponential search, so a cursor that moves a little costs a little.
fn gallop<T>(v: &[T], from: usize, pred: impl Fn(&T) -> bool) -> usize {
    // A walk that has passed everything is the common case at the top of the map.
    if v.last().is_none_or(&pred) {
        return v.len();
    }
    let (mut lo, mut step) = (from, 1);
    while lo + step <= v.len() && pred(&v[lo + step - 1]) {
        lo += step;
        step *= 2;
    }
    lo + v[lo..(lo + step).min(v.len())].partition_point(pred)
}

/// A walk up the address space through the unions one query reads, with a cursor per union
/// (how many of its ranges start below the walk) that only moves up.
struct Walk<'a, W> {
    pool: &'a Pool<W>,
    unions: &'a mut [Ranges<W>],
    cursors: &'a mut [usize],
    /// Bytes per unit.
    grain: u64,
}

/// The memory of a [`Walk`], kept from one query to the next.
#[derive(Default)]
struct WalkBuffers<W> {
    unions: Vec<Ranges<W>>,
    cursors: Vec<usize>,
}

impl<'a, W: Unit> Walk<'a, W> {
    fn union(&self, u: usize) -> &'a [(W, W)] {
        self.pool.get(self.unions[u])
    }

    /// The least `x >= from`, as `align` rounds, with `[x, x + size)` clear of every range.
    /// A range that blocks sends `x` past its end; that skips only offsets it blocks. Done when
    /// every union in turn lets `x` pass. A union that blocks moves to the front, so the next
    /// `x` is tried first against the unions that blocked last: blocks come in runs from a
    /// few unions, and each union that lets `x` pass before the next block is a wasted step
    /// (side by side on the ResNet-50 problem tiled 28 times: a third of the steps, and `best`
    /// takes two thirds of the time). The order of the checks changes neither `x` nor the
    /// cursors.
    fn clear(&mut self, from: u64, size: u64, align: impl Fn(u64) -> u64) -> u64 {
        let n = self.unions.len();
        let (mut x, mut passed, mut u) = (from, 0, 0);
        let bytes = |w: W| w.into() * self.grain;
        while passed < n {
            let ranges = self.union(u);
            let k = gallop(ranges, self.cursors[u], |&(start, _)| {
                bytes(start) < x + size
            });
            self.cursors[u] = k;
            match k
                .checked_sub(1)
                .map(|j| bytes(ranges[j].1))
                .filter(|&end| end > x)
            {
                Some(end) => {
                    x = align(end);
                    passed = 0;
                    if u > 0 {
                        self.unions[..=u].rotate_right(1);
                        self.cursors[..=u].rotate_right(1);
                        u = 0;
                    }
                }
                None => {
                    passed += 1;
                    u = (u + 1) % n;
                }
            }
        }
        x
    }

    /// Where the free run at a clear `x` ends: the least start above it, if any.
    fn next_start(&self) -> Option<u64> {
        (0..self.unions.len())
            .filter_map(|u| self.union(u).get(self.cursors[u]))
            .map(|&(start, _)| start.into() * self.grain)
            .min()
    }
}

#[derive(Default, Clone, Copy)]
struct Node<W> {
    /// The union of the placed buffers whose live interval meets the node's span.
    touching: Ranges<W>,
    /// The union of those whose live interval spans all of it.
    covering: Ranges<W>,
}

/// The tree's unions, stored only where an insert or a query reaches: the inner levels from
/// `lowest` down, each as far as the real leaves reach (their count is padded to a power of two:
/// at 4.7 million starts, 3.7 million inner nodes above padding took 89 MB), and the leaves
/// apart, with one union each: a leaf is one start, so every buffer that meets it covers it, and
/// its `touching` and `covering` unions would hold the same ranges (a sixth of the pool at a
/// million buffers). Nodes keep their heap indices (see `segment_tree`); only where each is
/// stored changes.
#[derive(Default)]
struct Nodes<W> {
    /// Per level `l` (nodes `2^l` to `2^(l+1) - 1`), the index in `inner` of its node `2^l`, less
    /// `2^l` (wrapping): node `n` is `inner[level_at[log2 n] + n]`.
    level_at: Vec<usize>,
    inner: Vec<Node<W>>,
    /// The first leaf's heap index (a power of two) and, from it, each leaf's union.
    first_leaf: usize,
    leaves: Vec<Ranges<W>>,
}

impl<W: Copy + Default> Nodes<W> {
    /// Empty, for `starts` leaves from `first_leaf` (the least power of two that holds them),
    /// with inner nodes from `lowest` down.
    fn reset(&mut self, starts: usize, first_leaf: usize, lowest: usize) {
        let (height, top) = (first_leaf.ilog2(), lowest.ilog2());
        self.first_leaf = first_leaf;
        // Levels above `lowest` are never reached: an index there is out of bounds.
        self.level_at.clear();
        self.level_at.resize(height as usize, usize::MAX / 2);
        let mut stored = 0usize;
        for level in top..height {
            // A node of this level spans `2^(height - level)` leaves.
            self.level_at[level as usize] = stored.wrapping_sub(1 << level);
            stored += starts.div_ceil(1 << (height - level));
        }
        self.inner.clear();
        self.inner.resize(stored, Node::default());
        self.leaves.clear();
        self.leaves.resize(starts, Ranges::default());
    }

    /// Where inner node `n` is in `inner`.
    fn inner_index(&self, n: usize) -> usize {
        self.level_at[n.ilog2() as usize].wrapping_add(n)
    }

    /// Inner node `n`.
    fn inner_mut(&mut self, n: usize) -> &mut Node<W> {
        let k = self.inner_index(n);
        &mut self.inner[k]
    }

    /// Node `n`'s `touching` union, or its `covering` one.
    fn union(&self, n: usize, covering: bool) -> Ranges<W> {
        match n.checked_sub(self.first_leaf) {
            Some(leaf) => self.leaves[leaf],
            None => {
                let node = &self.inner[self.inner_index(n)];
                if covering {
                    node.covering
                } else {
                    node.touching
                }
            }
        }
    }
}

/// Reads the middle of each union that the insert over the leaf span `(lo, hi)` after a query
/// may search ([`Occupancy::insert`]: the `touching` unions up its root paths, the `covering`
/// ones of its canonical nodes), in one loop of independent loads, as the query reads the ends
/// of its own: at a million buffers each is a cache miss, which an insert's search met one
/// union after another (side by side on a million-row CSV: `plan` a tenth faster).
fn touch_for_insert<W: Unit>(
    nodes: &Nodes<W>,
    pool: &Pool<W>,
    lowest: usize,
    (lo, hi): (usize, usize),
) {
    let touch = |r: Ranges<W>| {
        if r.len > 1 {
            std::hint::black_box(pool.get(r)[r.len as usize / 2]);
        }
    };
    root_paths(lo / 2, (hi - 1) / 2, lowest, |n| {
        touch(nodes.union(n, false))
    });
    canonical(lo, hi, |n| touch(nodes.union(n, true)));
}

#[derive(Default)]
struct Occupancy<W> {
    /// Bytes per unit of the unions.
    grain: u64,
    /// Sorted distinct starts: time compressed to them keeps every overlap.
    starts: Vec<u32>,
    /// Per item, the leaf span `[lo, hi)` of its live interval (see [`Occupancy::span`]).
    spans: Vec<(u32, u32)>,
    leaves: usize,
    /// The least node a query reads: the nodes above it lie wholly inside no item's span, so
    /// no query reads their `touching` union and no `covering` one holds anything. A problem
    /// of short lifetimes over a long schedule keeps the tree's top levels out of every insert
    /// and query.
    lowest: usize,
    nodes: Nodes<W>,
    pool: Pool<W>,
    walk: WalkBuffers<W>,
}

impl<W: Unit> Occupancy<W> {
    fn new(items: &[Item], grain: u64) -> Self {
        let mut occupancy = Occupancy {
            grain,
            starts: Vec::new(),
            spans: Vec::new(),
            leaves: 0,
            lowest: 1,
            nodes: Nodes::default(),
            pool: Pool::default(),
            walk: WalkBuffers::default(),
        };
        occupancy.reset(items, grain);
        occupancy
    }

    /// Empty, over the times of `items`; the pool keeps its memory, so a decode after
    /// another of a similar problem allocates little.
    fn reset(&mut self, items: &[Item], grain: u64) {
        self.grain = grain;
        // The spans by two sweeps over the items in order of first and of last position, not a
        // binary search per item over the starts (a tenth of first-fit's time at a million).
        self.spans.clear();
        self.spans.resize(items.len(), (0, 0));
        self.starts.clear();
        for (first, i) in by_position(items, |it| it.live.first) {
            if self.starts.last() != Some(&first) {
                self.starts.push(first);
            }
            self.spans[i].0 = (self.starts.len() - 1) as u32;
        }
        let mut reached = 0;
        for (last, i) in by_position(items, |it| it.live.last) {
            while self.starts.get(reached).is_some_and(|&s| s <= last) {
                reached += 1;
            }
            self.spans[i].1 = reached as u32;
        }
        self.leaves = self.starts.len().next_power_of_two();
        // The longest span's canonical nodes are the highest any item has: `2^level` leaves fit
        // in it.
        let longest = (self.spans.iter())
            .map(|&(lo, hi)| hi - lo)
            .max()
            .unwrap_or(1);
        self.lowest = (self.leaves >> longest.ilog2()).max(1);
        (self.nodes).reset(self.starts.len(), self.leaves, self.lowest);
        self.pool.clear();
    }

    /// The leaf span `[lo, hi)` of item `i`'s live interval: every start it reaches.
    fn span(&self, i: usize) -> (usize, usize) {
        let (lo, hi) = self.spans[i];
        (lo as usize + self.leaves, hi as usize + self.leaves)
    }

    /// Marks `[offset, offset + size)` taken over the leaf span `(lo, hi)`; `false`, with
    /// nothing marked, when its units do not fit `W`.
    fn insert(&mut self, (lo, hi): (usize, usize), offset: u64, size: u64) -> bool {
        if size == 0 {
            return true;
        }
        // Decodes give multiples of the grain; were one not, rounding outward keeps the ranges
        // over everything taken.
        let (Ok(offset), Ok(end)) = (
            W::try_from(offset / self.grain),
            W::try_from((offset + size).div_ceil(self.grain)),
        ) else {
            return false;
        };
        // Up the root paths of the span's first and last leaves first: every `touching` union
        // holds those of the nodes below it, so a climb stops at the first union that held the
        // range already (every union above holds it too). The canonical nodes come after, so a
        // canonical node on a path does not stop its own climb. The climbs start above the
        // leaves, at inner nodes.
        let (nodes, pool) = (&mut self.nodes, &mut self.pool);
        for mut n in [lo / 2, (hi - 1) / 2] {
            while n >= self.lowest && pool.insert(&mut nodes.inner_mut(n).touching, offset, end) {
                n /= 2;
            }
        }
        canonical(lo, hi, |n| match n.checked_sub(nodes.first_leaf) {
            Some(leaf) => {
                pool.insert(&mut nodes.leaves[leaf], offset, end);
            }
            None => {
                let node = nodes.inner_mut(n);
                pool.insert(&mut node.covering, offset, end);
                pool.insert(&mut node.touching, offset, end);
            }
        });
        true
    }

    /// How many ranges the unions a query over the leaf span `(lo, hi)` reads hold together.
    fn ranges_read(&self, (lo, hi): (usize, usize)) -> usize {
        let mut read = 0;
        canonical(lo, hi, |n| read += self.nodes.union(n, false).len as usize);
        root_paths(lo, hi - 1, self.lowest, |n| {
            read += self.nodes.union(n, true).len as usize
        });
        read
    }

    /// A walk through the unions a query over `live` must clear, the longest first (the
    /// likeliest to block).
    fn walk(&mut self, (lo, hi): (usize, usize)) -> Walk<'_, W> {
        let (nodes, pool) = (&self.nodes, &self.pool);
        let WalkBuffers { unions, cursors } = &mut self.walk;
        unions.clear();
        // The empty unions left out, and the longest first: the likeliest to block. Ordering
        // the rest costs more than it saves. Each node is read once (at a million buffers most
        // are cache misses).
        let mut longest = (0, 0);
        let mut add = |n: usize, covering: bool| {
            let union = nodes.union(n, covering);
            let ranges = pool.get(union);
            let len = ranges.len();
            if len > 0 {
                // Both ends read now, in a loop of independent loads: the walk's first steps
                // read them one union after another, and at a million buffers each is a cache
                // miss (side by side: 1M random first-fit 5-15% faster).
                std::hint::black_box((ranges[0].0, ranges[len - 1].1));
                if len >= longest.0 {
                    longest = (len, unions.len());
                }
                unions.push(union);
            }
        };
        canonical(lo, hi, |n| add(n, false));
        root_paths(lo, hi - 1, self.lowest, |n| add(n, true));
        // The insert that follows, read now with these (see `touch_for_insert`).
        touch_for_insert(nodes, pool, self.lowest, (lo, hi));
        if !unions.is_empty() {
            unions.swap(0, longest.1);
        }
        cursors.clear();
        cursors.resize(unions.len(), 0);
        Walk {
            pool,
            unions,
            cursors,
            grain: self.grain,
        }
    }

    /// Where `choice` puts `item` among the placed buffers it overlaps: the same offset as
    /// [`choose_gap`] over all of them, for `first-fit` told that none below `floor` is free.
    fn choose(&mut self, item: &Item, span: (usize, usize), choice: GapChoice, floor: u64) -> u64 {
        let mut walk = self.walk(span);
        let aligned = |v: u64| align_up(v, item.alignment).expect("validated: extents fit in u64");
        match choice {
            GapChoice::Lowest => walk.clear(aligned(floor), item.size, aligned),
            // Every free run of the union, bottom up: the tightest that fits, else the top.
            GapChoice::Smallest => {
                let mut best: Option<(u64, u64)> = None;
                let mut from = 0;
                loop {
                    let free = walk.clear(from, 1, |v| v);
                    let Some(next) = walk.next_start() else {
                        return best.map_or_else(|| aligned(free), |(_, offset)| offset);
                    };
                    let (gap, offset) = (next - free, aligned(free));
                    if offset + item.size <= next && best.is_none_or(|(b, _)| gap < b) {
                        best = Some((gap, offset));
                    }
                    from = next;
                }
            }
        }
    }
}

/// Up to how many buffers a region's placed buffers are scanned in order of offset rather than
/// kept in the tree (see the module docs).
const SCAN_MOST: usize = 2048;

/// The placed buffers in order of offset, each with its address range and live interval, in
/// blocks of at most [`BLOCK`] with the hull of their live intervals: an insert moves at most a
/// block (into one sorted list, it moved half the list: a sixth of a rematerialization fit's
/// time), and a query passes whole blocks that share no time with its item.
#[derive(Default)]
struct ByOffset {
    blocks: Vec<Block>,
}

/// Consecutive placed buffers in order of offset, the hull of their live intervals and their
/// highest end. The lowest offset is kept beside them: an insert's search over the blocks reads
/// it from each block it passes, where reading the buffers' list was a cache miss each.
///
/// A block whose buffers all share some time (`core`, the meet of their live intervals) and
/// whose address ranges leave no hole between `lowest` and `top` (`solid`) is, to an item live
/// in its core, one taken range: a scan passes it whole. In a training step's dense map
/// (activations stacked, each live across the peak) that is two in five of the buffers a walk
/// would read.
struct Block {
    placed: Vec<(u64, u64, LiveInterval)>,
    lowest: u64,
    hull: LiveInterval,
    top: u64,
    /// The times every buffer of the block is live, when there are any.
    core: Option<LiveInterval>,
    /// The address ranges cover `[lowest, top)` without a hole (kept when an insert cannot
    /// open one, else cleared until the block is next bounded afresh).
    solid: bool,
}

impl Block {
    /// A block of `placed` (not empty), in order of offset, with room for a full block (a block
    /// grown a push at a time reallocated seven times).
    fn of(placed: &[(u64, u64, LiveInterval)]) -> Self {
        let mut block = Block {
            placed: Vec::with_capacity(BLOCK + 1),
            lowest: 0,
            hull: LiveInterval::new(0, 0),
            top: 0,
            core: None,
            solid: false,
        };
        block.placed.extend_from_slice(placed);
        block.bound();
        block
    }

    /// Sets the lowest offset, the hull, the top, the core and whether it is solid from the
    /// buffers.
    fn bound(&mut self) {
        let Some(&(lowest, _, live)) = self.placed.first() else {
            return;
        };
        let (mut hull, mut meet) = ((live.first, live.last), (live.first, live.last));
        // In order of start, each range starts at or below the highest end before it.
        let (mut top, mut solid) = (lowest, true);
        for &(start, end, live) in &self.placed {
            hull = (hull.0.min(live.first), hull.1.max(live.last));
            meet = (meet.0.max(live.first), meet.1.min(live.last));
            solid &= start <= top;
            top = top.max(end);
        }
        self.lowest = lowest;
        self.hull = LiveInterval::new(hull.0, hull.1);
        self.top = top;
        self.core = (meet.0 <= meet.1).then(|| LiveInterval::new(meet.0, meet.1));
        self.solid = solid;
    }

    /// Whether a scan with its cursor at `cursor` may pass the block as one range for `item`:
    /// every buffer of it overlaps the item, and they leave no hole above the cursor, so an item
    /// of some size fits nowhere in it (an empty one would fit at a buffer's start).
    fn passed_whole(&self, item: &Item, cursor: u64) -> bool {
        self.solid
            && item.size > 0
            && cursor >= self.lowest
            && self.core.is_some_and(|c| c.overlaps(item.live))
    }
}

/// The most buffers a [`ByOffset`] block holds: a full one splits in two.
const BLOCK: usize = 64;

impl ByOffset {
    /// What [`gap_among`](super::greedy::gap_among) picks among the placed buffers that share
    /// time with `item`, first-fit told that no offset below `floor` is free. A block that shares
    /// none, or ends at or below the scan's cursor, is passed whole: none of its buffers would
    /// change the answer.
    fn choose(&self, item: &Item, choice: GapChoice, floor: u64) -> u64 {
        match choice {
            GapChoice::Lowest => self.lowest(item, floor),
            GapChoice::Smallest => self.smallest(item),
        }
    }

    /// [`Self::choose`] for `best-fit`.
    fn smallest(&self, item: &Item) -> u64 {
        let mut scan = GapScan::new(item.size, item.alignment, GapChoice::Smallest);
        for block in &self.blocks {
            if !block.hull.overlaps(item.live) || block.top <= scan.cursor() {
                continue;
            }
            // No gap in it: one taken range.
            if block.passed_whole(item, scan.cursor()) {
                scan.pass(block.lowest, block.top);
                continue;
            }
            for &(start, end, live) in &block.placed {
                if live.overlaps(item.live)
                    && let Some(offset) = scan.pass(start, end)
                {
                    return offset;
                }
            }
        }
        scan.offset()
    }

    /// [`Self::choose`] for `first-fit`, the walk of most of a rematerialization fit's
    /// relayouts, without [`GapScan`]: a buffer ending at or below the cursor starts below the
    /// offset it would be compared with, so it is passed on one comparison, before its live
    /// interval is read, and the offset is aligned again only when the cursor moves (side by
    /// side with the same loop through `GapScan`, a fit of the 2,000-tensor training step takes
    /// a twentieth less time).
    fn lowest(&self, item: &Item, floor: u64) -> u64 {
        let aligned = |v: u64| align_up(v, item.alignment).expect("validated: extents fit in u64");
        let (mut cursor, mut offset) = (floor, aligned(floor));
        for block in &self.blocks {
            if block.top <= cursor || !block.hull.overlaps(item.live) {
                continue;
            }
            if block.passed_whole(item, cursor) {
                (cursor, offset) = (block.top, aligned(block.top));
                continue;
            }
            for &(start, end, live) in &block.placed {
                if end > cursor && live.overlaps(item.live) {
                    if offset + item.size <= start {
                        return offset;
                    }
                    (cursor, offset) = (end, aligned(end));
                }
            }
        }
        offset
    }

    fn insert(&mut self, live: LiveInterval, offset: u64, size: u64) {
        let placed = (offset, offset + size, live);
        // The last block whose first buffer starts at or below `offset` (else the first).
        let k = (self.blocks.partition_point(|b| b.lowest <= offset)).saturating_sub(1);
        let Some(block) = self.blocks.get_mut(k) else {
            self.blocks.push(Block::of(&[placed]));
            return;
        };
        let at = block
            .placed
            .partition_point(|&(start, _, _)| start <= offset);
        block.placed.insert(at, placed);
        // A range that meets `[lowest, top)` or touches it leaves it without a hole.
        block.solid &= offset <= block.top && placed.1 >= block.lowest;
        block.lowest = block.lowest.min(offset);
        block.hull = LiveInterval::new(
            block.hull.first.min(live.first),
            block.hull.last.max(live.last),
        );
        block.core = (block.core)
            .filter(|c| c.overlaps(live))
            .map(|c| LiveInterval::new(c.first.max(live.first), c.last.min(live.last)));
        block.top = block.top.max(placed.1);
        if block.placed.len() > BLOCK {
            let upper = Block::of(&block.placed[BLOCK / 2..]);
            block.placed.truncate(BLOCK / 2);
            block.bound();
            self.blocks.insert(k + 1, upper);
        }
    }

    fn clear(&mut self) {
        self.blocks.clear();
    }

    /// Fills an empty list with `placed` at once, in half-full blocks (as splits leave them).
    fn fill(&mut self, mut placed: Vec<(u64, u64, LiveInterval)>) {
        debug_assert!(self.blocks.is_empty());
        placed.sort_by_key(|p| p.0);
        (self.blocks).extend(placed.chunks(BLOCK / 2).map(Block::of));
    }
}

impl Occupancy<u32> {
    /// The same tree in `u64` units.
    fn widen(self) -> Occupancy<u64> {
        let widen = |&(start, end): &(u32, u32)| (u64::from(start), u64::from(end));
        let ranges = |r: Ranges<u32>| Ranges {
            at: r.at,
            len: r.len,
            top: u64::from(r.top),
        };
        let nodes = Nodes {
            level_at: self.nodes.level_at,
            inner: (self.nodes.inner.iter())
                .map(|n| Node {
                    touching: ranges(n.touching),
                    covering: ranges(n.covering),
                })
                .collect(),
            first_leaf: self.nodes.first_leaf,
            leaves: self.nodes.leaves.iter().map(|&r| ranges(r)).collect(),
        };
        Occupancy {
            grain: self.grain,
            starts: self.starts,
            spans: self.spans,
            leaves: self.leaves,
            lowest: self.lowest,
            nodes,
            pool: Pool {
                chunks: (self.pool.chunks.iter())
                    .map(|c| c.iter().map(widen).collect())
                    .collect(),
                cutting: self.pool.cutting,
                cut: self.pool.cut,
                free: self.pool.free,
            },
            walk: WalkBuffers::default(),
        }
    }
}

/// Which addresses are taken at which times, kept as suits the region's size: a scan of the
/// placed buffers, or the tree, in narrow units until an address passes them, then wide.
enum Taken {
    Narrow(Occupancy<u32>),
    Wide(Occupancy<u64>),
    Scan(ByOffset),
}

/// `$body` with `$occupancy` bound to the tree of `$taken`, whichever its width, else `$scan`.
macro_rules! tree {
    ($taken:expr, $occupancy:ident => $body:expr, $list:pat => $scan:expr) => {
        match $taken {
            Taken::Narrow($occupancy) => $body,
            Taken::Wide($occupancy) => $body,
            Taken::Scan($list) => $scan,
        }
    };
}

impl Taken {
    /// Empty, for `items`: scanned when there are at most `scan_most` of them.
    fn new(items: &[Item], scan_most: usize) -> Self {
        if items.len() <= scan_most {
            return Taken::Scan(ByOffset::default());
        }
        Taken::Narrow(Occupancy::new(items, grain(items)))
    }

    /// Emptied for `items`, keeping what memory it can.
    fn reset(&mut self, items: &[Item], scan_most: usize) {
        if items.len() <= scan_most {
            match self {
                Taken::Scan(list) => list.clear(),
                this => *this = Taken::new(items, scan_most),
            }
            return;
        }
        // A tree that widened stays wide: the next decode of a region like it would widen too.
        match self {
            Taken::Narrow(occupancy) => occupancy.reset(items, grain(items)),
            Taken::Wide(occupancy) => occupancy.reset(items, grain(items)),
            this => *this = Taken::new(items, scan_most),
        }
    }

    /// The tree's leaf span of item `i` (the scan reads the item's interval itself).
    fn span(&self, i: usize) -> (usize, usize) {
        tree!(self, occupancy => occupancy.span(i), _ => (0, 0))
    }

    /// How many ranges the unions a query over `span` reads hold, in the tree.
    fn ranges_read(&self, span: (usize, usize)) -> Option<usize> {
        tree!(self, occupancy => Some(occupancy.ranges_read(span)), _ => None)
    }

    /// Where `choice` puts `item`; `first-fit` told that no offset below `floor` is free
    /// (`0` when nothing is known; `best-fit` is told nothing).
    fn choose(&mut self, item: &Item, span: (usize, usize), choice: GapChoice, floor: u64) -> u64 {
        debug_assert!(floor == 0 || choice == GapChoice::Lowest);
        tree!(
            self,
            occupancy => occupancy.choose(item, span, choice, floor),
            list => list.choose(item, choice, floor)
        )
    }

    /// Marks `item` placed at `offset`. A narrow tree that cannot hold its end widens first.
    fn insert(&mut self, item: &Item, span: (usize, usize), offset: u64) {
        let marked = tree!(
            self,
            occupancy => occupancy.insert(span, offset, item.size),
            list => {
                list.insert(item.live, offset, item.size);
                true
            }
        );
        // Only a narrow tree refuses; in `u64` units every address fits.
        if let (false, Taken::Narrow(narrow)) = (marked, &mut *self) {
            let mut wide = std::mem::take(narrow).widen();
            wide.insert(span, offset, item.size);
            *self = Taken::Wide(wide);
        }
    }
}

/// Up to how many overlapping buffers `best-fit` lists them all rather than walking the
/// unions: its walk visits every free run of the union, which costs more than a short list.
const LISTING_LIMIT: u64 = 1024;

/// Nor past this many overlapping buffers per range of the unions its walk reads: a dense map
/// merges many buffers into few ranges (a training step's activations, a thousand live at
/// once), and walking those few beats sorting the list (a `best` fit on a 2,000-tensor step:
/// 24% less time; fragmented maps, listed as before, unchanged).
const LISTING_PER_RANGE: u64 = 4;

/// Earlier decodes of a region, each its items in the order placed with their offsets: the
/// first (the baseline the variants of a problem start from) and the latest (the variant
/// before this one).
///
/// A greedy decode places each item by the items placed before it alone (their sizes,
/// alignments, live intervals and offsets), so a decode whose order starts with the same items
/// as an earlier one gives them the same offsets: it takes them without a walk and resumes at
/// the first difference; one of the same items in the same order is that decode, and is not
/// made again (a flip on one device, or of one dtype, leaves the other regions as they were).
/// A rematerialization flip changes a few intervals, often late in the size order, so a
/// relayout after one resumes part-way; past that point [`Resume`] still gives most items their
/// earlier offsets without a walk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Decode {
    first: Vec<(Item, u64)>,
    latest: Vec<(Item, u64)>,
    /// The last decode's occupancy, emptied and refilled by the next.
    scratch: Reused<Taken>,
    /// The last resume's tree of changed buffers, emptied and refilled by the next.
    changed: Reused<LowestStart>,
}

/// Places the items in `order`, each where `choice` puts it among the placed buffers it
/// overlaps; resumes after the prefix it shares with `earlier`, and leaves its own decode
/// there for the next. `None` as soon as the extent passes `extent_limit` or `stop` says so
/// (asked every [`STOP_EVERY`] items; the decode left in `earlier` is then the last whole one).
pub(crate) fn place(
    items: &[Item],
    order: &[u32],
    choice: GapChoice,
    earlier: Option<&mut Decode>,
    extent_limit: u64,
    stop: &mut dyn FnMut() -> bool,
) -> Option<RegionLayout> {
    place_listing_up_to(
        items,
        order,
        choice,
        listing_limit(choice),
        SCAN_MOST,
        earlier,
        (extent_limit, stop),
    )
}

/// Up to how many overlapping buffers `choice` lists them rather than walking the tree.
fn listing_limit(choice: GapChoice) -> u64 {
    match choice {
        GapChoice::Lowest => 0,
        GapChoice::Smallest => LISTING_LIMIT,
    }
}

/// [`place`], scanning the placed buffers in order of offset in a region of at most
/// `scan_most` buffers; in the tree, listing the placed buffers an item overlaps (and scanning
/// them with [`choose_gap`]) when it overlaps at most `limit` buffers, placed or not, and at
/// most [`LISTING_PER_RANGE`] per range its walk would read.
fn place_listing_up_to(
    items: &[Item],
    order: &[u32],
    choice: GapChoice,
    limit: u64,
    scan_most: usize,
    mut earlier: Option<&mut Decode>,
    (extent_limit, stop): (u64, &mut dyn FnMut() -> bool),
) -> Option<RegionLayout> {
    let scratch = earlier.as_mut().and_then(|d| d.scratch.0.take());
    let mut changed = earlier.as_mut().and_then(|d| d.changed.0.take());
    let shared_with = |decode: &[(Item, u64)]| {
        decode
            .iter()
            .zip(order)
            .take_while(|&(&(item, _), &i)| item == items[i as usize])
            .count()
    };
    let (resumed, shared): (&[(Item, u64)], usize) = match &earlier {
        Some(d) => [&d.first, &d.latest]
            .into_iter()
            .map(|decode| (decode.as_slice(), shared_with(decode)))
            .max_by_key(|&(_, shared)| shared)
            .unwrap_or_default(),
        None => (&[], 0),
    };
    // The same items in the same order: the earlier decode is this one (a flip elsewhere left
    // the region as it was).
    if shared == order.len() && resumed.len() == order.len() {
        let layout = decoded(items, order, resumed, extent_limit);
        if let Some(earlier) = earlier {
            (earlier.scratch.0, earlier.changed.0) = (scratch, changed);
        }
        return layout;
    }
    let mut taken = match scratch {
        Some(mut taken) => {
            taken.reset(items, scan_most);
            taken
        }
        None => Taken::new(items, scan_most),
    };
    // The listing index, only where it is used (`best-fit` in the tree): ranks are places in
    // `order`.
    let index = (limit > 0 && !matches!(taken, Taken::Scan(_))).then(|| {
        let mut rank = vec![0u32; items.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
        let intervals: Vec<LiveInterval> = items.iter().map(|i| i.live).collect();
        IntervalIndex::new(&intervals, &rank)
    });
    let (mut listed, mut ranges) = (Vec::new(), Vec::new());
    // Past the shared prefix, the earlier decode still answers for the items it surely does.
    let mut resume = (shared < resumed.len())
        .then(|| Resume::new(resumed, shared, items, choice, changed.take()));
    let layout = place_on(
        &mut taken,
        items,
        order,
        (shared, |r, _| resumed[r].1),
        (extent_limit, stop),
        |taken, offsets, r, item, span| {
            let mut walk = |floor| {
                // The ranges a walk would read are counted only where a listing could replace
                // the walk (first-fit never lists).
                let listing = index.as_ref().filter(|index| {
                    taken.ranges_read(span).is_some_and(|read| {
                        index.count_overlapping(item.live)
                            <= limit.min(LISTING_PER_RANGE * read as u64)
                    })
                });
                match listing {
                    Some(index) => {
                        listed.clear();
                        index.overlapping(item.live, r as u32, &mut listed);
                        ranges.clear();
                        ranges.extend(listed.iter().map(|&e| {
                            let placed = order[e as usize] as usize;
                            (offsets[placed], offsets[placed] + items[placed].size)
                        }));
                        choose_gap(&mut ranges, item.size, item.alignment, choice)
                    }
                    None => taken.choose(item, span, choice, floor),
                }
            };
            match &mut resume {
                Some(resume) => resume.place(item, walk),
                None => walk(0),
            }
        },
    );
    let changed = resume.map(Resume::into_changed).or(changed);
    let Some(earlier) = earlier else {
        return layout;
    };
    earlier.scratch.0 = Some(taken);
    earlier.changed.0 = changed;
    if let Some(layout) = &layout {
        let into = if earlier.first.is_empty() {
            &mut earlier.first
        } else {
            &mut earlier.latest
        };
        into.clear();
        into.extend(
            order
                .iter()
                .map(|&i| (items[i as usize], layout.offsets[i as usize])),
        );
    }
    layout
}

/// How many items a decode places between two questions to its `stop`: at a hundred thousand
/// buffers a decode takes a good part of a second, which a time limit should not overrun.
pub(crate) const STOP_EVERY: usize = 1024;

/// The layout of a decode of `items` in `order` whose every placement is `placed` (an earlier
/// decode of the same items in the same order); `None` past `extent_limit`, as the decode.
fn decoded(
    items: &[Item],
    order: &[u32],
    placed: &[(Item, u64)],
    extent_limit: u64,
) -> Option<RegionLayout> {
    let (mut offsets, mut extent) = (vec![0; items.len()], 0);
    for (&i, &(item, offset)) in order.iter().zip(placed) {
        if item.size > 0 {
            offsets[i as usize] = offset;
            extent = extent.max(offset + item.size);
        }
    }
    (extent <= extent_limit).then_some(RegionLayout { offsets, extent })
}

/// The one loop of every decode here: places the items of `order` on `taken` (emptied by the
/// caller): the first `prefix.0` at the offsets `prefix.1(rank, item)` already known, the rest
/// where `choose(taken, offsets so far, rank, item, span)` puts them; `None` as soon as the
/// extent passes `limit`, or `stop` says so.
fn place_on(
    taken: &mut Taken,
    items: &[Item],
    order: &[u32],
    (known, known_offset): (usize, impl Fn(usize, u32) -> u64),
    (limit, stop): (u64, &mut dyn FnMut() -> bool),
    mut choose: impl FnMut(&mut Taken, &[u64], usize, &Item, (usize, usize)) -> u64,
) -> Option<RegionLayout> {
    let (mut offsets, mut extent) = (vec![0; items.len()], 0);
    // The known offsets first, at once: a scan's blocks are cut from them in order of offset.
    let mut known_placed = Vec::with_capacity(known);
    for (r, &i) in order[..known].iter().enumerate() {
        let item = &items[i as usize];
        if item.size > 0 {
            let offset = known_offset(r, i);
            offsets[i as usize] = offset;
            extent = extent.max(offset + item.size);
            match taken {
                Taken::Scan(_) => known_placed.push((offset, offset + item.size, item.live)),
                _ => taken.insert(item, taken.span(i as usize), offset),
            }
        }
    }
    if let Taken::Scan(list) = taken {
        list.fill(known_placed);
    }
    if extent > limit {
        return None;
    }
    for (r, &i) in order.iter().enumerate().skip(known) {
        if r % STOP_EVERY == STOP_EVERY - 1 && stop() {
            return None;
        }
        if let Some(&next) = order.get(r + 1) {
            read_ahead(items, taken, &offsets, next as usize);
        }
        let item = &items[i as usize];
        if item.size == 0 {
            continue;
        }
        let span = taken.span(i as usize);
        let offset = choose(taken, &offsets, r, item, span);
        taken.insert(item, span, offset);
        offsets[i as usize] = offset;
        extent = extent.max(offset + item.size);
        if extent > limit {
            return None;
        }
    }
    Some(RegionLayout { offsets, extent })
}

/// Reads item `next`'s figures (its size, its span in `taken`, its offset's slot) before the
/// placement ahead of it: that placement's query and insert hide their cache misses (an order by
/// size reaches the items in no order of memory). One copy for every decode ([`place_on`] is
/// made once per caller).
#[inline(never)]
fn read_ahead(items: &[Item], taken: &Taken, offsets: &[u64], next: usize) {
    std::hint::black_box((items[next].size, taken.span(next), offsets[next]));
}

/// First-fit decodes of orders that differ from the last one decoded after a prefix, as a local
/// search over orders makes them: the items before the point where the order changed keep the
/// offsets of the last layout (a greedy decode places each item by those before it alone), and
/// only the rest are walked.
pub(crate) struct Redecoder {
    taken: Taken,
    scan_most: usize,
}

impl Redecoder {
    pub(crate) fn new(items: &[Item]) -> Self {
        Self::scanning_up_to(items, SCAN_MOST)
    }

    /// A redecoder that scans regions of at most `scan_most` buffers.
    fn scanning_up_to(items: &[Item], scan_most: usize) -> Self {
        Redecoder {
            taken: Taken::new(items, scan_most),
            scan_most,
        }
    }

    /// First-fit's layout of `order`, whose first `resume` items are placed as in `earlier`
    /// (the layout of an order with the same first `resume` items), or `None` as soon as the
    /// extent passes `limit`, or `stop` (asked every [`STOP_EVERY`] items) says so.
    pub(crate) fn decode(
        &mut self,
        items: &[Item],
        order: &[u32],
        earlier: Option<(&RegionLayout, usize)>,
        limit: u64,
        stop: &mut dyn FnMut() -> bool,
    ) -> Option<RegionLayout> {
        self.taken.reset(items, self.scan_most);
        let known = earlier.map_or(0, |(_, resume)| resume);
        let known_offset = |_, i: u32| earlier.map_or(0, |(layout, _)| layout.offsets[i as usize]);
        place_on(
            &mut self.taken,
            items,
            order,
            (known, known_offset),
            (limit, stop),
            |taken, _, _, item, span| taken.choose(item, span, GapChoice::Lowest, 0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::greedy::place_in_order;
    use proptest::prelude::*;

    fn items() -> impl Strategy<Value = Vec<Item>> {
        items_up_to(60)
    }

    /// Up to `most` items; past [`BLOCK`] a scan's blocks split.
    fn items_up_to(most: usize) -> impl Strategy<Value = Vec<Item>> {
        prop::collection::vec((0u32..30, 0u32..12, 1u64..64, 0u32..3, 0u64..3), 0..most).prop_map(
            |raw| {
                raw.into_iter()
                    .map(|(first, length, size, align, zero)| Item {
                        size: if zero == 0 { 0 } else { size },
                        alignment: 1 << (2 * align),
                        live: LiveInterval::new(first, first + length),
                    })
                    .collect()
            },
        )
    }

    /// Up to `most` items, most of them live at one time (stacked across position 30, as a
    /// training step's activations are across its peak), a few short-lived anywhere, some of
    /// no size: a scan's blocks then have a core, holes open where the short-lived ones sit,
    /// and first-fit passes the solid blocks whole.
    fn items_mostly_sharing_a_time(most: usize) -> impl Strategy<Value = Vec<Item>> {
        let item = (0u32..=30, 30u32..60, 0u32..16, 1u64..64, 0u32..3, 0u64..8);
        prop::collection::vec(item, 0..most).prop_map(|raw| {
            raw.into_iter()
                .map(|(first, last, short, size, align, zero)| Item {
                    size: if zero == 0 { 0 } else { size << (2 * align) },
                    alignment: 1 << (2 * align),
                    live: match short {
                        0 => LiveInterval::new(2 * first % 55, 2 * first % 55 + last % 5),
                        _ => LiveInterval::new(first, last),
                    },
                })
                .collect()
        })
    }

    /// Places `items` in an order shuffled by `seed`, fast (`limit`, `scan_most`) and by the full
    /// scan over every listed conflict: the same offsets.
    fn chooses_as_the_full_scan(
        items: &[Item],
        seed: u64,
        choice: GapChoice,
        (limit, scan_most): (u64, usize),
    ) -> Result<(), TestCaseError> {
        let mut order: Vec<u32> = (0..items.len() as u32).collect();
        order.sort_by_key(|&r| (u64::from(r) ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let fast = place_listing_up_to(
            items,
            &order,
            choice,
            limit,
            scan_most,
            None,
            (u64::MAX, &mut || false),
        )
        .unwrap()
        .offsets;
        let slow = place_in_order(items, &order, choice, &mut |r, out| {
            let live = items[order[r] as usize].live;
            out.extend(
                (0..r as u32).filter(|&e| items[order[e as usize] as usize].live.overlaps(live)),
            );
        });
        prop_assert_eq!(fast, slow.offsets);
        Ok(())
    }

    proptest! {
        /// The same offsets as the full scan over every listed conflict, in any order.
        #[test]
        fn chooses_what_the_full_scan_chooses(
            items in items_up_to(4 * BLOCK),
            seed in any::<u64>(),
            smallest in any::<bool>(),
            limit in prop::sample::select(vec![0, 4, u64::MAX]),
            scan in any::<bool>(),
        ) {
            let choice = if smallest { GapChoice::Smallest } else { GapChoice::Lowest };
            let scan_most = if scan { usize::MAX } else { 0 };
            chooses_as_the_full_scan(&items, seed, choice, (limit, scan_most))?;
        }

        /// The same on dense maps, where the scan passes whole blocks.
        #[test]
        fn a_dense_map_is_scanned_as_the_full_scan_chooses(
            items in items_mostly_sharing_a_time(6 * BLOCK),
            seed in any::<u64>(),
            smallest in any::<bool>(),
        ) {
            let choice = if smallest { GapChoice::Smallest } else { GapChoice::Lowest };
            chooses_as_the_full_scan(&items, seed, choice, (0, usize::MAX))?;
        }

        /// A redecode of an order changed after a prefix, resumed from the layout before the
        /// change, is first-fit's layout of the new order over the listed conflicts, and gives
        /// up exactly when that passes the limit.
        #[test]
        fn a_redecode_from_a_shared_prefix_is_the_full_scans_layout(
            items in items(),
            seed in any::<u64>(),
            moves in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 1..6),
            slack in 0u64..80,
            scan in any::<bool>(),
        ) {
            let mut order: Vec<u32> = (0..items.len() as u32).collect();
            order.sort_by_key(|&r| (u64::from(r) ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let full_scan = |order: &[u32], limit: u64| {
                crate::layout::greedy::place_in_order_within(&items, order, GapChoice::Lowest, &mut |r, out| {
                    let live = items[order[r] as usize].live;
                    out.extend((0..r as u32).filter(|&e| items[order[e as usize] as usize].live.overlaps(live)));
                }, limit)
            };
            let mut redecoder = Redecoder::scanning_up_to(&items, if scan { usize::MAX } else { 0 });
            let mut current = redecoder.decode(&items, &order, None, u64::MAX, &mut || false).unwrap();
            let scanned = full_scan(&order, u64::MAX);
            prop_assert_eq!(Some(&current), scanned.as_ref());
            for (from, to) in moves {
                if items.is_empty() {
                    break;
                }
                let (from, to) = (from.index(items.len()), to.index(items.len()));
                let moved = order.remove(from);
                order.insert(to, moved);
                let limit = current.extent.saturating_sub(40).saturating_add(slack);
                let resumed = redecoder.decode(&items, &order, Some((&current, from.min(to))), limit, &mut || false);
                prop_assert_eq!(&resumed, &full_scan(&order, limit));
                if let Some(layout) = resumed {
                    current = layout;
                } else {
                    let moved = order.remove(to);
                    order.insert(from, moved);
                }
            }
        }

        /// Resuming from earlier decodes of variants (an interval moved, a buffer dropped or
        /// added, as flips make them) gives the offsets of a decode from scratch.
        #[test]
        fn resuming_from_earlier_decodes_changes_nothing(
            items in items(),
            variants in prop::collection::vec(prop::collection::vec((any::<prop::sample::Index>(), 0u32..30, 0u32..12, 0u8..4), 0..4), 1..6),
            smallest in any::<bool>(),
            scan_most in prop::sample::select(vec![0, 20, usize::MAX]),
        ) {
            let choice = if smallest { GapChoice::Smallest } else { GapChoice::Lowest };
            let mut earlier = Decode::default();
            let mut variant = items.clone();
            for changes in variants {
                for (at, first, length, change) in changes {
                    if variant.is_empty() {
                        break;
                    }
                    let at = at.index(variant.len());
                    let live = LiveInterval::new(first, first + length);
                    match change {
                        0 => {
                            variant.remove(at);
                        }
                        1 => variant.insert(at, Item { live, ..variant[at] }),
                        _ => variant[at].live = live,
                    }
                }
                let order = crate::layout::greedy::size_order(&variant);
                let limit = listing_limit(choice);
                let whole = place_listing_up_to(&variant, &order, choice, limit, scan_most, None, (u64::MAX, &mut || false)).unwrap();
                // A decode that gives up below the extent leaves the last whole one to resume.
                if whole.extent > 0 {
                    let cut = place_listing_up_to(&variant, &order, choice, limit, scan_most, Some(&mut earlier), (whole.extent - 1, &mut || false));
                    prop_assert_eq!(cut, None);
                }
                let resumed = place_listing_up_to(&variant, &order, choice, limit, scan_most, Some(&mut earlier), (whole.extent, &mut || false));
                prop_assert_eq!(resumed, Some(whole));
            }
        }
    }

    proptest! {
        /// The tree in either width, at the grain of sizes and alignments scaled up, gives the
        /// offsets of the full scan.
        #[test]
        fn both_widths_at_any_grain_choose_what_the_full_scan_chooses(
            items in items(),
            (size_scale, alignment_scale, odd) in prop::sample::select(vec![(1, 1, 0), (3, 1, 0), (256, 256, 0), (768, 256, 0), (1 << 30, 1, 1)]),
            seed in any::<u64>(),
            smallest in any::<bool>(),
        ) {
            let items: Vec<Item> = (items.into_iter())
                .map(|i| Item { size: i.size * size_scale + odd * u64::from(i.size > 0), alignment: i.alignment * alignment_scale, ..i })
                .collect();
            let choice = if smallest { GapChoice::Smallest } else { GapChoice::Lowest };
            let mut order: Vec<u32> = (0..items.len() as u32).collect();
            order.sort_by_key(|&r| (u64::from(r) ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let slow = place_in_order(&items, &order, choice, &mut |r, out| {
                let live = items[order[r] as usize].live;
                out.extend((0..r as u32).filter(|&e| items[order[e as usize] as usize].live.overlaps(live)));
            });
            let grain = grain(&items);
            prop_assert!(slow.offsets.iter().all(|&o| o % grain == 0));
            // Past `u32` units (the buffers of a gigabyte and a byte), a narrow tree widens.
            let past_u32 = slow.extent.div_ceil(grain) > u64::from(u32::MAX);
            for (mut taken, wide) in [(Taken::Narrow(Occupancy::new(&items, grain)), past_u32), (Taken::Wide(Occupancy::new(&items, grain)), true)] {
                let fast = place_on(&mut taken, &items, &order, (0, |_, _| 0), (u64::MAX, &mut || false), |taken, _, _, item, span| {
                    taken.choose(item, span, choice, 0)
                });
                prop_assert_eq!(&fast.expect("no limit").offsets, &slow.offsets);
                prop_assert_eq!(matches!(taken, Taken::Wide(_)), wide);
            }
        }

        /// Each item's leaf span covers exactly the starts its interval reaches.
        #[test]
        fn spans_cover_the_starts_each_interval_reaches(items in items()) {
            let occupancy = Occupancy::<u32>::new(&items, 1);
            let starts = &occupancy.starts;
            prop_assert!(starts.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(items.iter().all(|it| starts.contains(&it.live.first)));
            for (i, it) in items.iter().enumerate() {
                let (lo, hi) = occupancy.span(i);
                let reached: Vec<usize> = (0..starts.len())
                    .filter(|&k| it.live.first <= starts[k] && starts[k] <= it.live.last)
                    .map(|k| k + occupancy.leaves)
                    .collect();
                prop_assert_eq!(reached, (lo..hi).collect::<Vec<_>>());
            }
        }
    }

    /// The tree stores each node an insert or a query reaches (the real leaves and their
    /// ancestors from `lowest` down) in a place of its own, and no other.
    #[test]
    fn the_tree_stores_each_node_it_reaches_once() {
        for (starts, longest) in [
            (1, 1),
            (2, 1),
            (5, 2),
            (8, 8),
            (9, 3),
            (1000, 1),
            (1000, 37),
        ] {
            let items: Vec<Item> = (0..starts)
                .map(|t| Item {
                    size: 1,
                    alignment: 1,
                    live: LiveInterval::new(t, (t + longest - 1).min(starts - 1)),
                })
                .collect();
            let occupancy = Occupancy::<u32>::new(&items, 1);
            let nodes = &occupancy.nodes;
            assert_eq!(nodes.leaves.len(), starts as usize);
            let mut inner = std::collections::BTreeSet::new();
            for leaf in 0..starts as usize {
                let mut n = (occupancy.leaves + leaf) / 2;
                while n >= occupancy.lowest {
                    inner.insert(n);
                    n /= 2;
                }
            }
            let slots: std::collections::BTreeSet<usize> =
                inner.iter().map(|&n| nodes.inner_index(n)).collect();
            assert_eq!(
                slots.len(),
                inner.len(),
                "{starts} starts: two nodes share a slot"
            );
            assert_eq!(slots, (0..nodes.inner.len()).collect(), "{starts} starts");
        }
    }

    #[test]
    fn the_tree_widens_when_an_address_passes_u32_units() {
        let item = |size, first| Item {
            size,
            alignment: 1,
            live: LiveInterval::new(first, first + 1),
        };
        let decode = |items: &[Item]| {
            let mut taken = Taken::new(items, 0);
            assert!(matches!(taken, Taken::Narrow(_)));
            let order: Vec<u32> = (0..items.len() as u32).collect();
            let layout = place_on(
                &mut taken,
                items,
                &order,
                (0, |_, _| 0),
                (u64::MAX, &mut || false),
                |taken, _, _, item, span| taken.choose(item, span, GapChoice::Lowest, 0),
            );
            (layout.expect("no limit").offsets, taken)
        };
        // In bytes (a 5-byte buffer makes the grain 1), two 3 GiB buffers live together end
        // past `u32::MAX`: the second widens the tree, and lands where the narrow one put it.
        let (offsets, taken) = decode(&[item(3 << 30, 0), item(5, 3), item(3 << 30, 0)]);
        assert_eq!(offsets, [0, 0, 3 << 30]);
        assert!(matches!(taken, Taken::Wide(_)));
        // Apart in time they stay narrow.
        let (offsets, taken) = decode(&[item(3 << 30, 0), item(5, 3), item(3 << 30, 6)]);
        assert_eq!(offsets, [0, 0, 0]);
        assert!(matches!(taken, Taken::Narrow(_)));
        // In units of 1 GiB they are a few units.
        let (_, taken) = decode(&[item(3 << 30, 0), item(1 << 30, 3), item(3 << 30, 0)]);
        assert!(matches!(taken, Taken::Narrow(_)));
        assert!(matches!(Taken::new(&[item(5, 0); 2], 2), Taken::Scan(_)));
    }

    /// A block passed whole only where every buffer in it overlaps the item and no hole is left
    /// above the cursor: a hole below the block, or one a later short-lived buffer opens inside
    /// it, is still found.
    #[test]
    fn first_fit_passes_a_block_whole_only_where_it_has_no_hole_for_the_item() {
        let live = LiveInterval::new;
        let item = |size, first, last| Item {
            size,
            alignment: 1,
            live: live(first, last),
        };
        // Each buffer one byte: the first block (offsets 0 to 31) lives at 50 only; the second
        // (offsets 100 to 131, solid) at every time.
        let mut list = ByOffset::default();
        let low = (0..32).map(|o| (o, o + 1, live(50, 50)));
        let high = (100..132).map(|o| (o, o + 1, live(0, 60)));
        list.fill(low.chain(high).collect());
        // The full scan over the buffers that overlap the item, and what lies below the floor.
        let full_scan = |list: &ByOffset, item: &Item, floor: u64| {
            let placed = list.blocks.iter().flat_map(|b| b.placed.iter());
            let mut ranges: Vec<(u64, u64)> = (placed.filter(|p| p.2.overlaps(item.live)))
                .map(|p| (p.0, p.1))
                .chain((floor > 0).then_some((0, floor)))
                .collect();
            choose_gap(&mut ranges, item.size, item.alignment, GapChoice::Lowest)
        };
        let first_fit = |list: &ByOffset, item: &Item, floor: u64| {
            let offset = list.choose(item, GapChoice::Lowest, floor);
            assert_eq!(offset, full_scan(list, item, floor));
            offset
        };
        // Under the solid block, at 0: its buffers all overlap the item, but the cursor is
        // below it. From a floor in it, the item goes above it, the block passed whole.
        let under = item(10, 10, 20);
        assert_eq!(first_fit(&list, &under, 0), 0);
        assert_eq!(first_fit(&list, &under, 100), 132);
        // An empty item fits at the first buffer's start above the floor, as the scan of every
        // buffer finds: no block is passed whole for it. (The full scan above stands for the
        // floor by a taken range, where an empty item would fit at 0.)
        let empty = item(0, 10, 20);
        assert_eq!(list.choose(&empty, GapChoice::Lowest, 100), 100);
        // A buffer live at 55 to 60 only, at 132 (the block's top), and one at every time above
        // it: the block stays solid, but its buffers no longer all share time with the item, so
        // the hole the first leaves it at 132 is found.
        list.insert(live(55, 60), 132, 10);
        list.insert(live(0, 60), 142, 1);
        assert!(list.blocks.iter().all(|b| b.solid));
        assert_eq!(first_fit(&list, &under, 100), 132);
        // One live with the lower block goes between the two.
        assert_eq!(first_fit(&list, &item(1, 50, 50), 0), 32);
    }

    #[test]
    fn gallop_finds_the_first_failure_from_any_cursor() {
        let v: Vec<u32> = (0..50).map(|x| x * 2).collect();
        for from in 0..=50 {
            for bound in 0..110 {
                let expected = v.partition_point(|&x| x < bound).max(from);
                assert_eq!(gallop(&v, from, |&x| x < bound), expected);
            }
        }
    }

    /// The block sizes: each the least that holds its lengths, each in a list of its own in
    /// increasing order, and the largest that fits the rest of a chunk a block size.
    #[test]
    fn block_sizes_grow_by_halves_and_doublings() {
        let sizes: Vec<usize> = (1..=100).map(capacity_of).collect();
        let mut distinct = sizes.clone();
        distinct.dedup();
        assert_eq!(
            distinct,
            [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]
        );
        assert!(
            (1..=100).all(|len| capacity_of(len) >= len && capacity_of(len) * 2 <= 3 * len.max(2))
        );
        let lists: Vec<usize> = distinct.iter().map(|&c| free_list(c)).collect();
        assert_eq!(lists, (0..distinct.len()).collect::<Vec<_>>());
        for slots in 1..=CHUNK {
            let block = largest_block_in(slots);
            assert!(
                block <= slots && capacity_of(block) == block,
                "{slots}: {block}"
            );
            assert!(capacity_of(block + 1) > slots, "{slots}: {block}");
        }
    }

    /// A union merged down past a smaller block size moves to the least block that holds it,
    /// and the block it left is the next union's of that size.
    #[test]
    fn a_union_merged_down_moves_to_a_smaller_block() {
        let mut pool = Pool::<u32>::default();
        let mut r = Ranges::default();
        for k in 0..5 {
            assert!(pool.insert(&mut r, 10 * k, 10 * k + 5));
        }
        assert_eq!((r.capacity(), pool.get(r).len()), (6, 5));
        let six = r.at;
        assert!(pool.insert(&mut r, 3, 42));
        assert_eq!(pool.get(r), [(0, 45)]);
        assert_eq!((r.capacity(), r.top), (1, 45));
        assert_ne!(r.at, six);
        let mut next = Ranges::default();
        for k in 0..5 {
            assert!(pool.insert(&mut next, 100 + 10 * k, 105 + 10 * k));
        }
        assert_eq!(next.at, six);
        assert_eq!(pool.get(r), [(0, 45)]);
        assert_eq!(pool.get(next)[4], (140, 145));
    }

    /// Unions spread over many chunks (blocks moved across chunks, the rest of each chunk cut
    /// into free blocks, a union longer than a chunk in a chunk of its own, the chunks of a
    /// cleared pool filled again) hold what merging each range into a sorted list holds.
    #[test]
    fn unions_over_many_chunks_hold_what_a_sorted_list_holds() {
        use crate::layout::rng::SplitMix64;
        fn merged(list: &mut Vec<(u32, u32)>, start: u32, end: u32) {
            let (mut s, mut e) = (start, end);
            list.retain(|&(a, b)| {
                let meets = b >= s && a <= e;
                if meets {
                    (s, e) = (s.min(a), e.max(b));
                }
                !meets
            });
            let at = list.partition_point(|&(a, _)| a < s);
            list.insert(at, (s, e));
        }
        let mut pool = Pool::<u32>::default();
        let mut rng = SplitMix64(7);
        for round in 0..2 {
            pool.clear();
            let mut unions = vec![Ranges::default(); 4000];
            let mut lists = vec![Vec::new(); unions.len()];
            for _ in 0..120_000 {
                let u = rng.below(unions.len());
                let start = rng.below(1 << 14) as u32 * 4;
                let end = start + 1 + rng.below(6) as u32;
                pool.insert(&mut unions[u], start, end);
                merged(&mut lists[u], start, end);
            }
            // A union of more ranges than a chunk holds.
            let (long, last) = (&mut unions[0], &mut lists[0]);
            *last = Vec::new();
            *long = Ranges::default();
            for k in 0..CHUNK as u32 + 5 {
                pool.insert(long, 3 * k, 3 * k + 1);
                last.push((3 * k, 3 * k + 1));
            }
            for (u, list) in unions.iter().zip(&lists) {
                assert_eq!(pool.get(*u), &list[..], "round {round}");
            }
            assert!(
                pool.chunks.len() > 4,
                "round {round}: {} chunks",
                pool.chunks.len()
            );
            assert!(pool.chunks.iter().any(|c| c.len() > CHUNK));
        }
    }

    #[test]
    fn merges_touching_ranges_and_walks_past_them() {
        let mut pool = Pool::<u64>::default();
        let (mut r, mut other) = (Ranges::default(), Ranges::default());
        assert!(pool.insert(&mut r, 10, 20));
        assert!(pool.insert(&mut other, 40, 45));
        assert!(pool.insert(&mut r, 30, 40));
        assert!(pool.insert(&mut r, 20, 30));
        assert_eq!(pool.get(r), [(10, 40)]);
        assert!(!pool.insert(&mut r, 12, 40));
        assert!(pool.insert(&mut r, 50, 60));
        assert!(pool.insert(&mut r, 0, 5));
        assert_eq!(pool.get(r), [(0, 5), (10, 40), (50, 60)]);
        assert_eq!(r.top, 60);
        assert!(pool.insert(&mut r, 45, 70));
        assert_eq!((pool.get(r)[2], r.top), ((45, 70), 70));
        assert!(!pool.insert(&mut r, 47, 60));
        assert_eq!((pool.get(r)[2], r.top), ((45, 70), 70));
        // Past six ranges the union moves to a block of eight; the other keeps its own.
        for k in 0..4 {
            assert!(pool.insert(&mut r, 100 + 10 * k, 105 + 10 * k));
        }
        assert_eq!(r.capacity(), 8);
        assert!(pool.insert(&mut r, 7, 8));
        assert_eq!(pool.get(r)[..4], [(0, 5), (7, 8), (10, 40), (45, 70)]);
        assert_eq!(r.top, 135);
        assert_eq!(pool.get(r).len(), 8);
        assert_eq!(pool.get(other), [(40, 45)]);
        // The block it left is the next union's.
        let mut third = Ranges::default();
        assert!(pool.insert(&mut third, 1, 2));
        assert_eq!(third.at, 0);
        for k in 0..4 {
            assert!(pool.insert(&mut r, 200 + 10 * k, 205 + 10 * k));
        }
        assert_eq!(pool.get(third), [(1, 2)]);
        assert_eq!(pool.get(r).len(), 12);
        // Node 0's touching union (a fresh one) and node 1's covering one.
        let mut r = Ranges::default();
        for (start, end) in [(0, 5), (10, 40), (50, 60)] {
            pool.insert(&mut r, start, end);
        }
        let mut cursors = [0, 0];
        let mut walk = Walk {
            pool: &pool,
            unions: &mut [r, other],
            cursors: &mut cursors,
            grain: 1,
        };
        assert_eq!(walk.clear(5, 5, |v| v), 5);
        assert_eq!(walk.next_start(), Some(10));
        // Past (10, 40), then (40, 45) of the other union, to the gap below 50.
        assert_eq!(walk.clear(6, 5, |v| v), 45);
        assert_eq!(walk.clear(46, 5, |v| v), 60);
        assert_eq!(walk.next_start(), None);
    }
}
