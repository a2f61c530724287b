//! What the source's own allocator did, kept beside the graph: PyTorch's caching allocator, as
//! a memory snapshot or a profiler trace records it.
//!
//! The graph is the problem (which tensors live when); this is the allocator's answer to it:
//! each allocation's real address and stream, the event that freed it, the bytes the allocator
//! reserved over time, its segments and the out-of-memory events. memplan plans the same
//! problem statically and shows the two side by side, so nothing here feeds the planner.
//!
//! Times are event indices: the `k`-th event of the device's trace, in trace order (the same
//! numbering the graph's steps carry in their `time`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The allocator's record of a trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    /// One per tensor of the graph, in tensor order. Shared: the views' labels point into it.
    /// A vector behind the `Arc`, so the importer's list is shared as it was built (an
    /// `Arc<[_]>` is a copy of millions of allocations).
    pub allocations: Arc<Vec<Allocation>>,
    /// One per device of the graph that the trace covers.
    pub devices: Vec<RecordedDevice>,
}

/// One allocation as the allocator made it: 24 bytes (a snapshot has millions). Its events are
/// numbered in 32 bits: an importer refuses a device's trace of more than [`MAX_EVENTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// Its address in the device's memory.
    pub address: u64,
    /// The CUDA stream it was allocated on; 0 is the default stream.
    pub stream: i64,
    /// The event that allocated it.
    pub allocated_at: u32,
    /// The event that freed it ([`Allocation::freed_at`]); `u32::MAX` (past [`MAX_EVENTS`]):
    /// still allocated at the end of the trace.
    #[serde(rename = "freed_at", with = "freed")]
    freed: u32,
}

/// The most events a device's trace may have: [`Allocation`] numbers them in 32 bits, one
/// number kept for "never freed". (At 76 bytes an event, a snapshot that long is 300 GB.)
pub const MAX_EVENTS: u64 = u32::MAX as u64 - 1;

/// The event of a free the trace never makes: what an importer's lifetimes hold until the free.
pub const NEVER_FREED: u64 = u64::MAX;

impl Allocation {
    /// An allocation; `freed_at` `None` (or `Some(u32::MAX)`, past [`MAX_EVENTS`]): still
    /// allocated at the end of the trace.
    pub fn new(address: u64, stream: i64, allocated_at: u32, freed_at: Option<u32>) -> Allocation {
        Allocation {
            address,
            stream,
            allocated_at,
            freed: freed_at.unwrap_or(u32::MAX),
        }
    }

    /// The event that freed it; `None`: still allocated at the end of the trace.
    pub fn freed_at(&self) -> Option<u32> {
        (self.freed != u32::MAX).then_some(self.freed)
    }

    /// Freed at event `at`.
    pub fn free(&mut self, at: u32) {
        self.freed = at;
    }
}

/// An allocation's free as its JSON says it: `freed_at`, an event or null.
mod freed {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(freed: &u32, serializer: S) -> Result<S::Ok, S::Error> {
        (*freed != u32::MAX).then_some(*freed).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
        Ok(Option::<u32>::deserialize(deserializer)?.unwrap_or(u32::MAX))
    }
}

/// A device's allocator over the trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordedDevice {
    pub device: String,
    /// How many events the device's trace has.
    pub events: u64,
    /// The reserved bytes from each event on, `(event, bytes)` in event order; the first entry
    /// is at event 0. Empty where the trace does not count the device's reservations (a
    /// profiler trace's CPU): unknown, not zero.
    pub reserved: Vec<(u64, u64)>,
    /// Whether `reserved` follows the trace's own events (segment events or the trace's
    /// totals); `false`: the trace records none, and the one entry is the reserved total when
    /// the dump was written.
    pub reserved_traced: bool,
    /// The allocator's own allocated total from each event on, when the trace gives it (a
    /// profiler trace does; it counts memory allocated before the trace began, which the
    /// graph cannot).
    pub allocated: Vec<(u64, u64)>,
    /// The segments the allocator held when the dump was written, by address.
    pub segments: Vec<Segment>,
    /// Allocations the device could not satisfy.
    pub ooms: Vec<Oom>,
}

/// A block of device memory the caching allocator reserved from the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub address: u64,
    pub bytes: u64,
    pub stream: i64,
}

/// An out-of-memory event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Oom {
    pub at: u64,
    /// The bytes the failed allocation asked for.
    pub requested: u64,
    /// What the device had free then, when the trace says.
    pub device_free: Option<u64>,
}

impl RecordedDevice {
    /// The most bytes the allocator reserved at once.
    pub fn reserved_peak(&self) -> u64 {
        self.reserved.iter().map(|r| r.1).max().unwrap_or(0)
    }
}

/// `series` (`(event, value)` from each event on) at each of `times`, positions in order: the
/// most it reaches from that position's event up to the next position's (the first position's
/// from the trace's start), so a curve drawn per position keeps every peak. `times` are the
/// events the positions start at, ascending.
pub fn at_positions(series: &[(u64, u64)], times: &[u64]) -> Vec<u64> {
    let value_at = |event: u64| {
        let k = series.partition_point(|s| s.0 <= event);
        if k == 0 { 0 } else { series[k - 1].1 }
    };
    times
        .iter()
        .enumerate()
        .map(|(p, &start)| {
            let start = if p == 0 { 0 } else { start };
            let from = series.partition_point(|s| s.0 <= start);
            let until = times
                .get(p + 1)
                .map_or(series.len(), |&next| series.partition_point(|s| s.0 < next));
            series[from.min(until)..until]
                .iter()
                .map(|s| s.1)
                .fold(value_at(start), u64::max)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An allocation reads back its free as made, in 24 bytes, and its JSON says `freed_at`,
    /// null while it is never freed.
    #[test]
    fn an_allocation_holds_its_events_in_32_bits() {
        for freed_at in [None, Some(0), Some(7), Some(MAX_EVENTS as u32)] {
            let mut a = Allocation::new(0x7f00, -1, 3, freed_at);
            assert_eq!(a.freed_at(), freed_at);
            let json = serde_json::to_value(a).unwrap();
            assert_eq!(json["freed_at"], serde_json::json!(freed_at));
            assert_eq!(serde_json::from_value::<Allocation>(json).unwrap(), a);
            a.free(9);
            assert_eq!(a.freed_at(), Some(9));
        }
        assert_eq!(std::mem::size_of::<Allocation>(), 24);
    }

    #[test]
    fn a_series_at_positions_keeps_each_window_s_peak() {
        let series = [(0, 10), (3, 50), (4, 20), (9, 5)];
        // Positions start at events 0, 2, 5, 9.
        assert_eq!(at_positions(&series, &[0, 2, 5, 9]), vec![10, 50, 20, 5]);
        assert_eq!(at_positions(&series, &[4]), vec![50]);
        assert_eq!(at_positions(&[], &[0, 1]), vec![0, 0]);
    }
}
