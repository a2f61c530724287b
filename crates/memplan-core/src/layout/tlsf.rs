//! `tlsf`: online, in schedule order, with a two-level segregated-fit allocator.
//!
//! At each position, the buffers whose last position was the one before are freed first, then the
//! buffers starting there are allocated, each in canonical order. Sizes are rounded up to the
//! granule (256 bytes, or the largest alignment of the region when that is larger), so every
//! offset is a multiple of every alignment. The allocator is TLSF proper: free blocks sit in
//! lists segregated by a first level (the power of two of the size) and a second level (16
//! linear steps inside it), found through two bitmaps in O(1); a request is rounded up to its
//! list's upper edge so any block found fits ("good fit"); blocks split on allocation and merge
//! with free physical neighbours on release. The arena has no fixed size: when no free block
//! fits, the top block grows (or a new one is appended), and the arena is the top.

use super::{Item, RegionLayout, by_position};

/// The smallest size and offset step, bytes.
pub(crate) const GRANULE: u64 = 256;

const SL_LOG2: u32 = 4;
const SL_COUNT: usize = 1 << SL_LOG2;
const FL_COUNT: usize = 64;
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Block {
    start: u64,
    size: u64,
    free: bool,
    prev_phys: u32,
    next_phys: u32,
    prev_free: u32,
    next_free: u32,
}

/// A TLSF allocator over units (granules). Allocations are block indices.
#[derive(Debug, Clone)]
pub(crate) struct Tlsf {
    blocks: Vec<Block>,
    spare: Vec<u32>,
    fl_bitmap: u64,
    sl_bitmap: [u32; FL_COUNT],
    heads: [[u32; SL_COUNT]; FL_COUNT],
    /// The block at the top of the arena.
    top: u32,
}

/// The (first level, second level) list that holds blocks of `size` units.
fn mapping(size: u64) -> (usize, usize) {
    if size < SL_COUNT as u64 {
        (0, size as usize)
    } else {
        let msb = 63 - size.leading_zeros();
        let fl = (msb - SL_LOG2 + 1) as usize;
        let sl = ((size >> (msb - SL_LOG2)) as usize) - SL_COUNT;
        (fl, sl)
    }
}

/// The first list whose every block holds `size` units: `size` rounded up to its list's edge.
fn mapping_search(size: u64) -> (usize, usize) {
    if size < SL_COUNT as u64 {
        mapping(size)
    } else {
        let msb = 63 - size.leading_zeros();
        mapping(size.saturating_add((1u64 << (msb - SL_LOG2)) - 1))
    }
}

impl Tlsf {
    pub(crate) fn new() -> Self {
        Tlsf {
            blocks: Vec::new(),
            spare: Vec::new(),
            fl_bitmap: 0,
            sl_bitmap: [0; FL_COUNT],
            heads: [[NONE; SL_COUNT]; FL_COUNT],
            top: NONE,
        }
    }

    fn new_block(&mut self, block: Block) -> u32 {
        match self.spare.pop() {
            Some(i) => {
                self.blocks[i as usize] = block;
                i
            }
            None => {
                self.blocks.push(block);
                (self.blocks.len() - 1) as u32
            }
        }
    }

    fn insert_free(&mut self, b: u32) {
        let (fl, sl) = mapping(self.blocks[b as usize].size);
        let head = self.heads[fl][sl];
        let block = &mut self.blocks[b as usize];
        block.free = true;
        block.prev_free = NONE;
        block.next_free = head;
        if head != NONE {
            self.blocks[head as usize].prev_free = b;
        }
        self.heads[fl][sl] = b;
        self.fl_bitmap |= 1 << fl;
        self.sl_bitmap[fl] |= 1 << sl;
    }

    fn remove_free(&mut self, b: u32) {
        let (fl, sl) = mapping(self.blocks[b as usize].size);
        let Block {
            prev_free,
            next_free,
            ..
        } = self.blocks[b as usize];
        if prev_free != NONE {
            self.blocks[prev_free as usize].next_free = next_free;
        } else {
            self.heads[fl][sl] = next_free;
            if next_free == NONE {
                self.sl_bitmap[fl] &= !(1 << sl);
                if self.sl_bitmap[fl] == 0 {
                    self.fl_bitmap &= !(1 << fl);
                }
            }
        }
        if next_free != NONE {
            self.blocks[next_free as usize].prev_free = prev_free;
        }
        self.blocks[b as usize].free = false;
    }

    /// A free block of at least `size` units, if the lists hold one.
    fn find_free(&self, size: u64) -> Option<u32> {
        let (fl, sl) = mapping_search(size);
        if fl >= FL_COUNT {
            return None;
        }
        let mut fl = fl;
        let mut sl_map = self.sl_bitmap[fl] & (u32::MAX << sl);
        if sl_map == 0 {
            let fl_map = self.fl_bitmap & u64::MAX.checked_shl(fl as u32 + 1).unwrap_or(0);
            if fl_map == 0 {
                return None;
            }
            fl = fl_map.trailing_zeros() as usize;
            sl_map = self.sl_bitmap[fl];
        }
        Some(self.heads[fl][sl_map.trailing_zeros() as usize])
    }

    /// Allocates `size` (> 0) units; returns the block, whose start is the offset in units.
    pub(crate) fn allocate(&mut self, size: u64) -> u32 {
        let b = match self.find_free(size) {
            Some(b) => {
                self.remove_free(b);
                b
            }
            None => self.grow(size),
        };
        let block = self.blocks[b as usize].clone();
        if block.size > size {
            let rest = self.new_block(Block {
                start: block.start + size,
                size: block.size - size,
                free: false,
                prev_phys: b,
                next_phys: block.next_phys,
                prev_free: NONE,
                next_free: NONE,
            });
            if block.next_phys != NONE {
                self.blocks[block.next_phys as usize].prev_phys = rest;
            } else {
                self.top = rest;
            }
            self.blocks[b as usize].next_phys = rest;
            self.blocks[b as usize].size = size;
            self.insert_free(rest);
        }
        b
    }

    /// A used block of at least `size` units at the top: the free top block extended, or a new one.
    fn grow(&mut self, size: u64) -> u32 {
        if self.top != NONE && self.blocks[self.top as usize].free {
            let top = self.top;
            self.remove_free(top);
            let block = &mut self.blocks[top as usize];
            block.size = block.size.max(size);
            return top;
        }
        let start = match self.top {
            NONE => 0,
            t => self.blocks[t as usize].start + self.blocks[t as usize].size,
        };
        let b = self.new_block(Block {
            start,
            size,
            free: false,
            prev_phys: self.top,
            next_phys: NONE,
            prev_free: NONE,
            next_free: NONE,
        });
        if self.top != NONE {
            self.blocks[self.top as usize].next_phys = b;
        }
        self.top = b;
        b
    }

    /// Frees an allocated block, merging it with free physical neighbours.
    pub(crate) fn free(&mut self, mut b: u32) {
        let next = self.blocks[b as usize].next_phys;
        if next != NONE && self.blocks[next as usize].free {
            self.remove_free(next);
            self.absorb_next(b);
        }
        let prev = self.blocks[b as usize].prev_phys;
        if prev != NONE && self.blocks[prev as usize].free {
            self.remove_free(prev);
            self.absorb_next(prev);
            b = prev;
        }
        self.insert_free(b);
    }

    /// Merges the physical successor of `b` into `b`.
    fn absorb_next(&mut self, b: u32) {
        let next = self.blocks[b as usize].next_phys;
        let Block {
            size, next_phys, ..
        } = self.blocks[next as usize];
        self.blocks[b as usize].size += size;
        self.blocks[b as usize].next_phys = next_phys;
        if next_phys != NONE {
            self.blocks[next_phys as usize].prev_phys = b;
        } else {
            self.top = b;
        }
        self.spare.push(next);
    }

    pub(crate) fn start(&self, b: u32) -> u64 {
        self.blocks[b as usize].start
    }
}

/// Lays the items out online in schedule order (see the module docs). `None` where the arena
/// passes `extent_limit` (it only grows, so it stops there: `best` asks for a layout below one
/// it has), or where the rounded layout would pass 2^64 bytes (a huge alignment rounds every
/// item up).
pub(crate) fn layout(items: &[Item], extent_limit: u64) -> Option<RegionLayout> {
    let granule = items.iter().map(|i| i.alignment).fold(GRANULE, u64::max);
    // The items by start and by end, each in canonical order within a position, swept side by
    // side.
    let placed = |&(_, i): &(u32, usize)| items[i].size > 0;
    let mut ended = by_position(items, |i| i.live.last)
        .filter(placed)
        .peekable();
    let mut tlsf = Tlsf::new();
    let mut block = vec![NONE; items.len()];
    let mut offsets = vec![0; items.len()];
    let mut extent = 0;
    for (first, i) in by_position(items, |i| i.live.first).filter(placed) {
        // Whatever ended before this position is freed first.
        while let Some((_, j)) = ended.next_if(|&(last, _)| last < first) {
            tlsf.free(block[j]);
        }
        let units = items[i].size.div_ceil(granule);
        block[i] = tlsf.allocate(units);
        offsets[i] = tlsf.start(block[i]).checked_mul(granule)?;
        extent = extent.max(offsets[i].checked_add(units.checked_mul(granule)?)?);
        if extent > extent_limit {
            return None;
        }
    }
    Some(RegionLayout { offsets, extent })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_segregate_by_two_levels() {
        assert_eq!(mapping(5), (0, 5));
        assert_eq!(mapping(16), (1, 0));
        assert_eq!(mapping(31), (1, 15));
        assert_eq!(mapping(32), (2, 0));
        assert_eq!(mapping(33), (2, 0));
        assert_eq!(mapping(34), (2, 1));
        // A search rounds up so that any block of the list found fits.
        assert_eq!(mapping_search(33), (2, 1));
    }

    #[test]
    fn freed_neighbours_merge_and_are_reused() {
        let mut t = Tlsf::new();
        let a = t.allocate(4);
        let b = t.allocate(4);
        let c = t.allocate(4);
        assert_eq!((t.start(a), t.start(b), t.start(c)), (0, 4, 8));
        t.free(a);
        t.free(b);
        // a and b merged into one 8-unit block at 0.
        let d = t.allocate(8);
        assert_eq!(t.start(d), 0);
        t.free(c);
        t.free(d);
        let e = t.allocate(12);
        assert_eq!(t.start(e), 0);
    }

    #[test]
    fn a_request_larger_than_every_free_block_grows_the_top() {
        let mut t = Tlsf::new();
        let a = t.allocate(4);
        let _b = t.allocate(4);
        t.free(a);
        let c = t.allocate(6);
        assert_eq!(t.start(c), 8);
    }

    #[test]
    fn a_layout_stops_where_its_arena_passes_the_limit() {
        use crate::problem::LiveInterval;
        let item = |size, first, last| Item {
            size,
            alignment: 1,
            live: LiveInterval::new(first, last),
        };
        // Two granules at once at position 1: the arena reaches 512 bytes.
        let items = [item(256, 0, 1), item(256, 1, 2), item(100, 2, 3)];
        let whole = layout(&items, u64::MAX).unwrap();
        assert_eq!(whole.extent, 512);
        assert_eq!(layout(&items, 512).map(|l| l.offsets), Some(whole.offsets));
        assert!(layout(&items, 511).is_none());
    }
}
