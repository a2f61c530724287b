//! PyTorch CUDA memory snapshots: the pickle `torch.cuda.memory._dump_snapshot()` writes.
//!
//! Read with the safe unpickler ([`crate::pickle`]): nothing is imported or executed. Each traced
//! device becomes a device; each allocation of its trace (`alloc`, matched with the next
//! `free_completed` at the same address) becomes a tensor whose live interval runs from its
//! `alloc` event to its `free_completed` event (half-open, in event order) or, never freed, to
//! the end of the trace. Its stack is the event's frames; its name is the stack's allocation
//! site ([`memplan_core::graph::site`]: the first frame in the user's code). A free of memory
//! allocated before the trace began has no allocation to end and is counted, not planned.
//!
//! What the caching allocator did is kept beside the graph (`memplan_core::recorded`, built by [`crate::allocations`]): each allocation's
//! address, stream and free; the reserved bytes over the trace (the segments at the dump,
//! walked back through the trace's segment events); the segments; the out-of-memory events.

use memplan_core::graph::Frame;
use memplan_core::recorded::{Oom, Segment};

use crate::FormatError;
pub use crate::allocations::Imported;
use crate::allocations::{Allocations, DeviceRecord};
use crate::pickle::{self, Value};

/// How a snapshot that has no trace can get one.
pub const NO_TRACE_HELP: &str = "the snapshot holds no allocation trace (`device_traces` is missing or empty): record one with `torch.cuda.memory._record_memory_history(max_entries=100000)` before running, then `torch.cuda.memory._dump_snapshot(\"snapshot.pickle\")`";

fn bad(message: impl Into<String>) -> FormatError {
    FormatError::Snapshot(message.into())
}

fn int(v: &Value, what: &str) -> Result<u64, FormatError> {
    v.as_int()
        .and_then(|i| u64::try_from(i).ok())
        .ok_or_else(|| bad(format!("{what} is not a non-negative integer")))
}

/// The field `key` of event `e` as a non-negative integer.
fn field(e: &Value, key: &str, at: &dyn Fn() -> String) -> Result<u64, FormatError> {
    let v = e
        .get(key)
        .ok_or_else(|| bad(format!("{} has no `{key}`", at())))?;
    int(&v, &format!("{}'s `{key}`", at()))
}

/// A snapshot frame dict: `name`, `filename`, `line`.
fn frame(f: &Value) -> Option<Frame> {
    Some(Frame {
        function: f.get("name")?.as_str()?.to_string(),
        file: f.get("filename")?.as_str()?.to_string(),
        line: f
            .get("line")
            .and_then(|l| l.as_int())
            .and_then(|l| u32::try_from(l).ok())
            .unwrap_or(0),
    })
}

/// Segments of the snapshot's `segments` list on device `d` (all, when segments name no
/// device), by address.
fn segments_of(list: &[Value], d: usize) -> Result<Vec<Segment>, FormatError> {
    let mut out = Vec::new();
    for (k, s) in list.iter().enumerate() {
        let on = s.get("device").and_then(|v| v.as_int());
        if on.is_some_and(|on| on != d as i128) {
            continue;
        }
        let at = || format!("segments[{k}]");
        out.push(Segment {
            address: s
                .get("address")
                .map_or(Ok(0), |v| int(&v, &format!("{}'s `address`", at())))?,
            bytes: field(s, "total_size", &at)?,
            stream: s
                .get("stream")
                .and_then(|v| v.as_int())
                .map_or(0, |v| v as i64),
        });
    }
    out.sort_by_key(|s| s.address);
    Ok(out)
}

/// Reads a snapshot pickle.
pub fn parse(bytes: &[u8]) -> Result<Imported, FormatError> {
    let root = pickle::read(bytes)?;
    if !matches!(root, Value::Dict(_)) {
        return Err(bad(
            "the pickle is not a dict (a snapshot is one with `device_traces`)",
        ));
    }
    let traces = root
        .get("device_traces")
        .and_then(|t| t.items())
        .filter(|t| t.iter().any(|d| d.items().is_some_and(|e| !e.is_empty())))
        .ok_or_else(|| bad(NO_TRACE_HELP))?;
    let segment_list = root
        .get("segments")
        .and_then(|s| s.items())
        .unwrap_or_default();
    let mut all = Allocations::default();
    for (d, trace) in traces.iter().enumerate() {
        let Some(events) = trace.items() else {
            return Err(bad(format!("device_traces[{d}] is not a list of events")));
        };
        if events.is_empty() {
            continue;
        }
        let device = format!("cuda:{d}");
        let mut on = all.device(device.clone(), events.len() as u64);
        // Segment bytes the trace adds (+) and returns (-), in order, to walk back from the
        // segments at the dump.
        let mut segment_changes: Vec<(u64, i128)> = Vec::new();
        let mut ooms = Vec::new();
        for (k, e) in events.iter().enumerate() {
            let at = || format!("device_traces[{d}][{k}]");
            let action = e
                .get("action")
                .and_then(|a| a.as_str().map(str::to_string))
                .ok_or_else(|| bad(format!("{} has no `action`", at())))?;
            let k = k as u64;
            match action.as_str() {
                "alloc" => {
                    let address = field(e, "addr", &at)?;
                    let size = field(e, "size", &at)?;
                    let stream = e
                        .get("stream")
                        .and_then(|s| s.as_int())
                        .map_or(0, |s| s as i64);
                    let frames = e.get("frames").and_then(|f| f.items()).unwrap_or_default();
                    let stack = on.intern(frames.iter().filter_map(frame));
                    on.alloc(k, address, size, stream, stack);
                }
                "free_completed" => {
                    on.free(k, field(e, "addr", &at)?);
                }
                "segment_alloc" | "segment_map" => {
                    segment_changes.push((k, i128::from(field(e, "size", &at)?)));
                }
                "segment_free" | "segment_unmap" => {
                    segment_changes.push((k, -i128::from(field(e, "size", &at)?)));
                }
                "oom" => ooms.push(Oom {
                    at: k,
                    requested: field(e, "size", &at)?,
                    device_free: e
                        .get("device_free")
                        .and_then(|v| v.as_int())
                        .and_then(|v| u64::try_from(v).ok()),
                }),
                _ => {}
            }
        }
        let segments = segments_of(&segment_list, d)?;
        let at_dump: i128 = segments.iter().map(|s| i128::from(s.bytes)).sum();
        let traced: i128 = segment_changes.iter().map(|c| c.1).sum();
        let mut reserved_now = at_dump - traced;
        if reserved_now < 0 {
            on.warn(format!(
                "{device}: the trace's segment events add up to more than the segments at the dump; the reserved curve starts at 0"
            ));
            reserved_now = 0;
        }
        let mut reserved = vec![(0, reserved_now as u64)];
        for (k, change) in &segment_changes {
            reserved_now = (reserved_now + change).max(0);
            reserved.push((*k, u64::try_from(reserved_now).unwrap_or(u64::MAX)));
        }
        on.finish(DeviceRecord {
            reserved,
            reserved_traced: !segment_changes.is_empty(),
            allocated: Vec::new(),
            segments,
            ooms,
        });
    }
    all.finish("PyTorch CUDA memory snapshot")
        .ok_or_else(|| bad(format!("the trace records no allocation; {NO_TRACE_HELP}")))
}
