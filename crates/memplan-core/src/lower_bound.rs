//! The lower bound: per device, the most bytes live at once.
//!
//! At every position, the buffers live there must occupy disjoint bytes, so no layout's
//! footprint can be below the sum of their occupied sizes (always-live buffers included, as they
//! are live everywhere). The maximum over positions is the lower bound; the position where it is
//! reached first, and the buffers live there, are what the views show as "the peak and why".

use crate::problem::{Lifetime, Problem};

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

/// The usage of every device of `problem` (which must be valid).
pub fn device_usage(problem: &Problem) -> Vec<DeviceUsage> {
    let positions = problem.positions as usize;
    (0..problem.device_ids.len())
        .map(|device| {
            let mut always_live_bytes = 0u64;
            let mut starts = vec![0u64; positions];
            let mut ends = vec![0u64; positions];
            for b in problem.buffers.iter().filter(|b| b.device == device) {
                match b.lifetime {
                    Lifetime::Always => always_live_bytes += b.occupied_size(),
                    Lifetime::Live(i) => {
                        starts[i.first as usize] += b.occupied_size();
                        ends[i.last as usize] += b.occupied_size();
                    }
                }
            }
            let mut curve = Vec::with_capacity(positions);
            let mut live = always_live_bytes;
            for p in 0..positions {
                live += starts[p];
                curve.push(live);
                live -= ends[p];
            }
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
                    .filter(|(_, b)| b.device == device)
                    .filter(|(_, b)| match b.lifetime {
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
