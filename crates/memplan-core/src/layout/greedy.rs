//! `first-fit` and `best-fit`: greedy by decreasing size, each buffer at a gap among the buffers
//! already placed that conflict with it.
//!
//! Order: decreasing occupied size, ties by canonical index. For each buffer, the placed buffers
//! whose live intervals overlap its own are its conflicts; their address ranges, sorted, leave
//! gaps. `first-fit` takes the lowest aligned offset that clears them all; `best-fit` takes the
//! smallest gap the buffer fits in (ties: the lowest), or the top when none is bounded. The two
//! differ in that one choice only ([`gap_among`]), so they share everything else. Listing the
//! conflicts is quadratic when thousands of buffers overlap, so the two strategies run over
//! [`super::occupancy`], which answers the same question from merged unions (in a region of up
//! to a couple of thousand buffers, from a scan of the placed ones in order of offset), and so does
//! `search`'s local search (`occupancy::Redecoder`); [`place_in_order`] and
//! [`place_in_order_within`] are the tests' reference. The module also holds the orders of
//! `search`'s greedy portfolio ([`portfolio`]).

use super::Item;
#[cfg(test)]
use super::RegionLayout;
use super::interval_index::overlap_counts;
use crate::graph::align_up;
use crate::problem::LiveInterval;

/// Which gap a buffer goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum GapChoice {
    Lowest,
    Smallest,
}

/// Item indices by decreasing size, ties by index: a stable radix sort of the indices in order,
/// by size reversed (a relayout of a rematerialization fit sorts its region's items once per
/// flip set; a comparison sort took a twelfth of a fit).
pub(crate) fn size_order(items: &[Item]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..items.len() as u32).collect();
    radsort::sort_by_key(&mut order, |&i| u64::MAX - items[i as usize].size);
    order
}

/// The greedy portfolio `search` starts from, each order decoded by first-fit: decreasing size
/// (TFLite's greedy by size), conflict degree times size, conflict degree (how many buffers
/// each overlaps), area (size times lifetime), lifetime, increasing start, and the canonical
/// order; each tie broken by size, then index. These are the orders of OmniMalloc's
/// `greedy_by_all`. Which packs best differs from problem to problem (on real models conflict
/// times size and area lead, on puzzles any of them), and each costs one decode.
pub(crate) fn portfolio(items: &[Item]) -> Vec<Vec<u32>> {
    let width = |it: &Item| u64::from(it.live.len());
    let intervals: Vec<LiveInterval> = items.iter().map(|i| i.live).collect();
    let degree: Vec<u64> = overlap_counts(&intervals).collect();
    let by = |key: &dyn Fn(usize, &Item) -> u64| order_by(items, |i, it| (key(i, it), it.size));
    vec![
        size_order(items),
        by(&|i, it| degree[i].saturating_mul(it.size)),
        by(&|i, _| degree[i]),
        by(&|_, it| it.size.saturating_mul(width(it))),
        by(&|_, it| width(it)),
        by(&|_, it| u64::from(u32::MAX - it.live.first)),
        (0..items.len() as u32).collect(),
    ]
}

/// Item indices by decreasing `key`, ties by index.
fn order_by(items: &[Item], key: impl Fn(usize, &Item) -> (u64, u64)) -> Vec<u32> {
    // Each key computed once, not at every comparison (a portfolio's orders took 15% of a
    // `best` relayout so). The index makes every key distinct: an unstable sort gives the one
    // order.
    let mut keyed: Vec<(std::cmp::Reverse<(u64, u64)>, u32)> = (items.iter().enumerate())
        .map(|(i, it)| (std::cmp::Reverse(key(i, it)), i as u32))
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// Places the items in `order`, each at the gap `choice` picks among its placed conflicts.
/// `conflicts(r, out)` appends the *ranks* (places in `order`) below `r` of the items whose
/// live intervals overlap the item of rank `r`.
#[cfg(test)]
pub(crate) fn place_in_order(
    items: &[Item],
    order: &[u32],
    choice: GapChoice,
    conflicts: &mut dyn FnMut(usize, &mut Vec<u32>),
) -> RegionLayout {
    place_in_order_within(items, order, choice, conflicts, u64::MAX).expect("no limit")
}

/// [`place_in_order`], giving up (`None`) as soon as the extent would pass `limit`.
#[cfg(test)]
pub(crate) fn place_in_order_within(
    items: &[Item],
    order: &[u32],
    choice: GapChoice,
    conflicts: &mut dyn FnMut(usize, &mut Vec<u32>),
    limit: u64,
) -> Option<RegionLayout> {
    // (offset, end) of each rank placed so far.
    let mut placed: Vec<(u64, u64)> = Vec::with_capacity(order.len());
    let mut earlier = Vec::new();
    let mut ranges = Vec::new();
    let mut extent = 0;
    for (r, &i) in order.iter().enumerate() {
        let item = &items[i as usize];
        if item.size == 0 {
            placed.push((0, 0));
            continue;
        }
        earlier.clear();
        conflicts(r, &mut earlier);
        ranges.clear();
        ranges.extend(earlier.iter().map(|&e| placed[e as usize]));
        let offset = choose_gap(&mut ranges, item.size, item.alignment, choice);
        placed.push((offset, offset + item.size));
        extent = extent.max(offset + item.size);
        if extent > limit {
            return None;
        }
    }
    let mut offsets = vec![0; items.len()];
    for (&i, &(offset, _)) in order.iter().zip(&placed) {
        offsets[i as usize] = offset;
    }
    Some(RegionLayout { offsets, extent })
}

/// The offset `choice` picks for `size` bytes at `alignment` among the occupied `ranges`.
pub(crate) fn choose_gap(
    ranges: &mut [(u64, u64)],
    size: u64,
    alignment: u64,
    choice: GapChoice,
) -> u64 {
    // Radix sort: these lists run to thousands for long-lived buffers, and sorting them is most
    // of a large layout's time.
    radsort::sort_by_key(ranges, |&(start, _)| start);
    gap_among(ranges.iter().copied(), size, alignment, choice)
}

/// The offset `choice` picks for `size` bytes at `alignment` among occupied `ranges` given in
/// order of start.
pub(crate) fn gap_among(
    ranges: impl Iterator<Item = (u64, u64)>,
    size: u64,
    alignment: u64,
    choice: GapChoice,
) -> u64 {
    let mut scan = GapScan::new(size, alignment, choice);
    for (start, end) in ranges {
        if let Some(offset) = scan.pass(start, end) {
            return offset;
        }
    }
    scan.offset()
}

/// [`gap_among`] fed one range at a time, for a caller that walks its ranges itself (and may
/// skip those wholly below [`GapScan::cursor`], which change nothing).
pub(crate) struct GapScan {
    size: u64,
    alignment: u64,
    choice: GapChoice,
    cursor: u64,
    /// The tightest gap that fits so far, and the offset in it (`Smallest`).
    smallest: Option<(u64, u64)>,
}

impl GapScan {
    pub(crate) fn new(size: u64, alignment: u64, choice: GapChoice) -> Self {
        GapScan {
            size,
            alignment,
            choice,
            cursor: 0,
            smallest: None,
        }
    }

    fn aligned(&self, v: u64) -> u64 {
        align_up(v, self.alignment).expect("validated: extents fit in u64")
    }

    /// The top of the ranges passed so far: a range ending at or below it changes nothing.
    pub(crate) fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Passes the occupied range `[start, end)`, the next in order of start; the offset, when
    /// `Lowest` has found its gap below it.
    pub(crate) fn pass(&mut self, start: u64, end: u64) -> Option<u64> {
        let candidate = self.aligned(self.cursor);
        if candidate + self.size <= start {
            match self.choice {
                GapChoice::Lowest => return Some(candidate),
                GapChoice::Smallest => {
                    let gap = start - self.cursor;
                    if self.smallest.is_none_or(|(best, _)| gap < best) {
                        self.smallest = Some((gap, candidate));
                    }
                }
            }
        }
        self.cursor = self.cursor.max(end);
        None
    }

    /// The offset chosen once every range is passed.
    pub(crate) fn offset(&self) -> u64 {
        self.smallest
            .map_or_else(|| self.aligned(self.cursor), |(_, offset)| offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_takes_the_first_gap_and_smallest_the_tightest() {
        let ranges = [(10, 20), (50, 60), (64, 100)];
        assert_eq!(choose_gap(&mut ranges.clone(), 4, 1, GapChoice::Lowest), 0);
        assert_eq!(
            choose_gap(&mut ranges.clone(), 4, 1, GapChoice::Smallest),
            60
        );
        assert_eq!(
            choose_gap(&mut ranges.clone(), 12, 1, GapChoice::Lowest),
            20
        );
        assert_eq!(
            choose_gap(&mut ranges.clone(), 40, 1, GapChoice::Smallest),
            100
        );
    }

    #[test]
    fn orders_go_by_decreasing_key_then_size_ties_by_index() {
        let item = |size, first, last| Item {
            size,
            alignment: 1,
            live: LiveInterval::new(first, last),
        };
        let items = [
            item(8, 0, 3),
            item(16, 2, 2),
            item(8, 1, 4),
            item(16, 0, 0),
            item(4, 0, 9),
        ];
        assert_eq!(size_order(&items), vec![1, 3, 0, 2, 4]);
        let orders = portfolio(&items);
        // Lifetime (ties by size, then index), then increasing start (ties likewise).
        assert_eq!(orders[4], vec![4, 0, 2, 1, 3]);
        assert_eq!(orders[5], vec![3, 0, 4, 2, 1]);
        assert_eq!(orders[6], vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn offsets_are_aligned_inside_gaps() {
        let ranges = [(0, 5), (24, 30)];
        assert_eq!(choose_gap(&mut ranges.clone(), 8, 8, GapChoice::Lowest), 8);
        assert_eq!(choose_gap(&mut ranges.clone(), 16, 8, GapChoice::Lowest), 8);
        assert_eq!(
            choose_gap(&mut ranges.clone(), 17, 8, GapChoice::Lowest),
            32
        );
    }
}
