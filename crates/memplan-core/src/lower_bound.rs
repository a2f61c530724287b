//! The lower bound: per device, the most bytes live at once.
//!
//! At every position, the buffers live there must occupy disjoint bytes, so no layout's
//! footprint can be below the sum of their occupied sizes (always-live buffers included, as they
//! are live everywhere). The maximum over positions is the lower bound; the position where it is
//! reached first, and the buffers live there, are what the views show as "the peak and why".

use crate::problem::{Lifetime, LiveInterval, Problem};

/// Memory use of one device over the schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceUsage {
    pub device: usize,
    /// The occupied bytes of the always-live buffers.
    pub always_live_bytes: u64,
    /// The occupied bytes live at each position, always-live buffers included.
    pub curve: Vec<u64>,
    /// The maximum of `curve` (or `always_live_bytes` when there are no positions).
    pub lower_bound: u64,
    /// The first position where the lower bound is reached.
    pub peak_position: Option<u32>,
    /// The buffers live at `peak_position`, always-live ones included, in canonical order.
    pub live_at_peak: Vec<usize>,
}

/// The bytes live at each of `positions` positions: `base` plus the size of every span that
/// covers the position. Every span must end before `positions`; the sum must fit in a `u64`.
pub(crate) fn live_curve(
    positions: usize,
    base: u64,
    spans: impl Iterator<Item = (LiveInterval, u64)>,
) -> Vec<u64> {
    running_live(positions, spans)
        .map(|live| base + live)
        .collect()
}

/// The most bytes live at once over `spans` (0 for none): the maximum of [`live_curve`] with
/// no base, without the curve. The same conditions.
pub fn peak_live(positions: usize, spans: impl Iterator<Item = (LiveInterval, u64)>) -> u64 {
    running_live(positions, spans).max().unwrap_or(0)
}

/// The bytes the `spans` hold at each of `positions` positions, from one vector of changes
/// summed in order. The changes add modulo 2^64, so each running sum is the bytes live there,
/// which fits.
fn running_live(
    positions: usize,
    spans: impl Iterator<Item = (LiveInterval, u64)>,
) -> impl Iterator<Item = u64> {
    let mut change = vec![0u64; positions + 1];
    for (interval, size) in spans {
        let (first, after) = (interval.first as usize, interval.last as usize + 1);
        change[first] = change[first].wrapping_add(size);
        change[after] = change[after].wrapping_sub(size);
    }
    change.truncate(positions);
    change.into_iter().scan(0u64, |live, c| {
        *live = live.wrapping_add(c);
        Some(*live)
    })
}

/// The usage of every device of `problem` (which must be valid).
pub fn device_usage(problem: &Problem) -> Vec<DeviceUsage> {
    let positions = problem.positions as usize;
    (0..problem.device_ids.len())
        .map(|device| {
            let on_device = problem.buffers.iter().filter(|b| b.device() == device);
            let always_live_bytes: u64 = on_device
                .clone()
                .filter(|b| b.is_always_live())
                .map(|b| b.occupied_size())
                .sum();
            let spans = on_device.filter_map(|b| match b.lifetime() {
                Lifetime::Live(i) => Some((i, b.occupied_size())),
                Lifetime::Always => None,
            });
            let curve = live_curve(positions, always_live_bytes, spans);
            let (lower_bound, peak_position) = curve.iter().enumerate().fold(
                (always_live_bytes, None),
                |(best, at), (p, &bytes)| {
                    if at.is_none() || bytes > best {
                        (bytes, Some(p as u32))
                    } else {
                        (best, at)
                    }
                },
            );
            let live_at_peak = match peak_position {
                None => Vec::new(),
                Some(p) => problem
                    .buffers
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.device() == device)
                    .filter(|(_, b)| match b.lifetime() {
                        Lifetime::Always => true,
                        Lifetime::Live(i) => i.first <= p && p <= i.last,
                    })
                    .map(|(i, _)| i)
                    .collect(),
            };
            DeviceUsage {
                device,
                always_live_bytes,
                curve,
                lower_bound,
                peak_position,
                live_at_peak,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The curve is, at each position, the base and the sizes of the spans covering it
        /// (sizes near 2^64 included, their sum within it), and the peak its maximum.
        #[test]
        fn the_curve_sums_the_spans_covering_each_position_and_the_peak_is_its_maximum(
            raw in prop::collection::vec((0u32..40, 0u32..10, any::<u64>()), 0..30),
            base in 0u64..1000,
        ) {
            let mut budget = u64::MAX - 1000;
            let spans: Vec<(LiveInterval, u64)> = (raw.iter())
                .map(|&(first, len, size)| {
                    let size = size % (budget / 4 + 1);
                    budget -= size;
                    (LiveInterval::new(first, first + len), size)
                })
                .collect();
            let positions = spans.iter().map(|(i, _)| i.last as usize + 1).max().unwrap_or(0);
            let summed: Vec<u64> = (0..positions as u32)
                .map(|p| {
                    let covering = spans.iter().filter(|(i, _)| i.first <= p && p <= i.last);
                    base + covering.map(|(_, size)| size).sum::<u64>()
                })
                .collect();
            prop_assert_eq!(&live_curve(positions, base, spans.iter().copied()), &summed);
            let peak = summed.iter().map(|v| v - base).max().unwrap_or(0);
            prop_assert_eq!(peak_live(positions, spans.iter().copied()), peak);
        }
    }
}
