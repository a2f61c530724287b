//! `search`: a deterministic local search over placement orders, decoded by first-fit.
//!
//! Every compact layout is what first-fit makes of some order, so searching orders searches
//! layouts. Start from the best order of a greedy portfolio ([`portfolio_best`]: OmniMalloc's
//! seven orders, the first first-fit's, whose layout the caller has decoded already; a decode
//! gives up once it passes the best so far, and the portfolio stops at the floor); then
//! ([`improve`]) repeatedly take a buffer that reaches the current extent and move it to an
//! earlier, pseudo-random place in the order (now and then any buffer, to leave plateaus); keep
//! a move unless it raises the extent (a decode stops as soon as it does). A move leaves the
//! order before both of its places as it was, so a decode keeps those items' offsets and walks
//! the rest through the occupancy tree ([`Redecoder`]). The generator is a fixed-seed
//! SplitMix64 and the budget is a count of evaluations, never a clock, so the result is the
//! same bytes on every machine. It returns the best layout seen, never worse than first-fit's
//! nor the portfolio's. The caller's [`Control`] may end it early (before any evaluation or
//! within a decode: it then keeps the best so far) and hears the best extent and the bound as
//! it goes. The exact search runs the two parts apart: the portfolio as its start, the local
//! search as its warm start.

use super::greedy::portfolio;
use super::occupancy::Redecoder;
use super::rng::SplitMix64;
use super::{Control, Item, Progress, RegionLayout};
use crate::lower_bound::peak_live;

/// How many evaluations pass between two reports to the caller. It is asked whether to stop
/// before each (and within a decode, every 1,024 buffers): at a hundred thousand buffers one
/// evaluation can take a good part of a second.
const EVALUATIONS_PER_REPORT: u32 = 16;

/// Searches up to `evaluations` orders, from `first_fit` (first-fit's layout of `items`, the
/// portfolio's first order, which the caller has already decoded) down to `floor` (the most
/// bytes live at once: [`lower_bound_hint`]). Returns the best layout and whether `control`
/// stopped the search early.
pub(crate) fn layout(
    items: &[Item],
    redecoder: &mut Redecoder,
    (first_fit, floor): (RegionLayout, u64),
    evaluations: u32,
    device: usize,
    control: &mut Control<'_>,
) -> (RegionLayout, bool) {
    match portfolio_best(items, redecoder, (first_fit, floor), device, control) {
        (_, best, true) => (best, true),
        (order, best, false) => improve(
            items,
            redecoder,
            (order, best),
            floor,
            evaluations,
            device,
            control,
        ),
    }
}

/// The best of the greedy portfolio (the first on a tie), from `first_fit` (its first order's
/// layout, which the caller has decoded): that order, its layout, and whether `control` stopped
/// it. It stops at the floor. Each decode takes a while at a million buffers: the caller hears
/// the best so far after each, and may stop between them and within them.
pub(crate) fn portfolio_best(
    items: &[Item],
    redecoder: &mut Redecoder,
    (first_fit, floor): (RegionLayout, u64),
    device: usize,
    control: &mut Control<'_>,
) -> (Vec<u32>, RegionLayout, bool) {
    let mut orders = portfolio(items).into_iter().enumerate();
    let first = orders.next().expect("seven orders").1;
    let (mut order, mut current) = (first, first_fit);
    for (decoded, next) in orders {
        if current.extent <= floor {
            break;
        }
        control.report(Progress {
            device,
            evaluations: decoded as u64,
            exact: false,
            best_bytes: current.extent,
            bound_bytes: floor,
        });
        if control.stop() {
            return (order, current, true);
        }
        let limit = current.extent - 1;
        match redecoder.decode(items, &next, None, limit, &mut || control.stop()) {
            Some(layout) => (order, current) = (next, layout),
            None if control.stop() => return (order, current, true),
            None => {}
        }
    }
    (order, current, false)
}

/// The local search: up to `evaluations` moves from `order`, whose first-fit layout is
/// `current`, down to `floor`. Returns the best layout seen and whether `control` stopped it.
pub(crate) fn improve(
    items: &[Item],
    redecoder: &mut Redecoder,
    (mut order, mut current): (Vec<u32>, RegionLayout),
    floor: u64,
    evaluations: u32,
    device: usize,
    control: &mut Control<'_>,
) -> (RegionLayout, bool) {
    let mut best = current.clone();
    if items.len() < 2 || evaluations == 0 {
        return (best, false);
    }
    let mut rng = SplitMix64(0x6d65_6d70_6c61_6e00);
    let mut at_peak = Vec::new();
    let mut stopped = false;
    for evaluation in 0..evaluations {
        if best.extent <= floor {
            break;
        }
        if evaluation % EVALUATIONS_PER_REPORT == 0 && evaluation > 0 {
            control.report(Progress {
                device,
                evaluations: u64::from(evaluation),
                exact: false,
                best_bytes: best.extent,
                bound_bytes: floor,
            });
        }
        if control.stop() {
            stopped = true;
            break;
        }
        at_peak.clear();
        at_peak.extend(
            order
                .iter()
                .enumerate()
                .filter(|&(_, &i)| {
                    current.offsets[i as usize] + items[i as usize].size == current.extent
                })
                .map(|(at, _)| at),
        );
        let from = if rng.below(4) == 0 || at_peak.is_empty() {
            rng.below(order.len())
        } else {
            at_peak[rng.below(at_peak.len())]
        };
        let to = if from == 0 {
            rng.below(order.len())
        } else {
            rng.below(from)
        };
        let moved = order.remove(from);
        order.insert(to, moved);
        // The order before both places is unchanged: its items keep their offsets.
        if let Some(candidate) = redecoder.decode(
            items,
            &order,
            Some((&current, to.min(from))),
            current.extent,
            &mut || control.stop(),
        ) {
            if candidate.extent < best.extent {
                best = candidate.clone();
            }
            current = candidate;
        } else {
            let moved = order.remove(to);
            order.insert(from, moved);
        }
    }
    (best, stopped)
}

/// The most bytes live at once among `items`: no layout goes below it, so search stops there.
pub(crate) fn lower_bound_hint(items: &[Item]) -> u64 {
    let positions = items
        .iter()
        .map(|i| i.live.last as usize + 1)
        .max()
        .unwrap_or(0);
    peak_live(positions, items.iter().map(|i| (i.live, i.size)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::greedy::{GapChoice, place_in_order};
    use crate::problem::LiveInterval;
    use proptest::prelude::*;

    proptest! {
        /// With no evaluations, the search is its portfolio: the least extent first-fit makes
        /// of any of its orders (decoded here by the full scan), though it stops decoding at
        /// the floor and gives up on an order as soon as it passes the best so far.
        #[test]
        fn the_portfolio_is_the_least_first_fit_of_its_orders(
            raw in prop::collection::vec((0u32..30, 0u32..12, 1u64..64, 0u32..3), 1..50),
        ) {
            let items: Vec<Item> = raw
                .into_iter()
                .map(|(first, length, size, align)| Item {
                    size,
                    alignment: 1 << (2 * align),
                    live: LiveInterval::new(first, first + length),
                })
                .collect();
            let least = portfolio(&items)
                .iter()
                .map(|order| {
                    place_in_order(&items, order, GapChoice::Lowest, &mut |r, out| {
                        let live = items[order[r] as usize].live;
                        out.extend((0..r as u32).filter(|&e| items[order[e as usize] as usize].live.overlaps(live)));
                    })
                    .extent
                })
                .min()
                .unwrap();
            let first_fit = crate::layout::occupancy::place(&items, &portfolio(&items)[0], GapChoice::Lowest, None, u64::MAX, &mut || false).unwrap();
            let floor = lower_bound_hint(&items);
            let mut redecoder = Redecoder::new(&items);
            let (layout, stopped) = layout(&items, &mut redecoder, (first_fit, floor), 0, 0, &mut Control::default());
            prop_assert!(!stopped);
            prop_assert_eq!(layout.extent, least);
        }
    }
}
