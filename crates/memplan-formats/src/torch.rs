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
//! What the caching allocator did is kept beside the graph ([`Recorded`]): each allocation's
//! address, stream and free; the reserved bytes over the trace (the segments at the dump,
//! walked back through the trace's segment events); the segments; the out-of-memory events.

use std::collections::HashMap;
use std::sync::Arc;

use memplan_core::graph::{Device, Frame, Graph, Tensor, site};

use crate::FormatError;
use crate::minimalloc::steps_of_lifetimes;
use crate::pickle::{self, Value};
use memplan_core::recorded::{Allocation, Oom, Recorded, RecordedDevice, Segment};

/// A snapshot read into a graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub graph: Graph,
    /// What the caching allocator did.
    pub recorded: Recorded,
    pub warnings: Vec<String>,
}

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

/// Stacks shared by every allocation made from the same frames: a training loop allocates from
/// a few stacks millions of times.
#[derive(Default)]
pub(crate) struct Stacks {
    frames: HashMap<Frame, u32>,
    stacks: HashMap<Vec<u32>, Arc<[Frame]>>,
    all: Vec<Frame>,
}

impl Stacks {
    pub(crate) fn intern(&mut self, frames: impl Iterator<Item = Frame>) -> Arc<[Frame]> {
        let ids: Vec<u32> = frames
            .map(|f| match self.frames.get(&f) {
                Some(&id) => id,
                None => {
                    let id = self.all.len() as u32;
                    self.frames.insert(f.clone(), id);
                    self.all.push(f);
                    id
                }
            })
            .collect();
        if let Some(stack) = self.stacks.get(&ids) {
            return stack.clone();
        }
        let stack: Arc<[Frame]> = ids.iter().map(|&i| self.all[i as usize].clone()).collect();
        self.stacks.insert(ids, stack.clone());
        stack
    }
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

/// The name of an allocation: its site, its stream when not the default.
pub(crate) fn allocation_name(stack: &[Frame], size: u64, address: u64, stream: i64) -> String {
    let mut name = match site(stack) {
        Some(f) => f.to_string(),
        None => format!("{size} B at 0x{address:x}"),
    };
    if stream != 0 {
        name.push_str(&format!(" [stream {stream}]"));
    }
    name
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
    let mut stacks = Stacks::default();
    let mut tensors = Vec::new();
    let mut steps = Vec::new();
    let mut devices = Vec::new();
    let mut recorded = Recorded::default();
    let mut warnings = Vec::new();
    for (d, trace) in traces.iter().enumerate() {
        let Some(events) = trace.items() else {
            return Err(bad(format!("device_traces[{d}] is not a list of events")));
        };
        if events.is_empty() {
            continue;
        }
        let device = format!("cuda:{d}");
        let n = events.len() as u64;
        let first = tensors.len();
        // Open allocations by address, oldest first: tensor indices.
        let mut open: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut lifetimes: Vec<(String, u64, u64)> = Vec::new();
        let mut orphan_frees = 0;
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
                    let stack = stacks.intern(frames.iter().filter_map(frame));
                    let id = format!("alloc{}", tensors.len());
                    open.entry(address).or_default().push(tensors.len());
                    tensors.push(Tensor {
                        id: id.clone(),
                        name: Some(allocation_name(&stack, size, address, stream)),
                        bytes: Some(size),
                        device: Some(device.clone()),
                        stack,
                        ..Tensor::default()
                    });
                    recorded.allocations.push(Allocation {
                        address,
                        stream,
                        allocated_at: k,
                        freed_at: None,
                    });
                    lifetimes.push((id, k, n));
                }
                "free_completed" => {
                    let address = field(e, "addr", &at)?;
                    match open.get_mut(&address).filter(|l| !l.is_empty()) {
                        Some(list) => {
                            let t = list.remove(0);
                            let start = recorded.allocations[t].allocated_at;
                            recorded.allocations[t].freed_at = Some(k);
                            // An allocation freed at its own event lives one event.
                            lifetimes[t - first].2 = k.max(start + 1);
                        }
                        None => orphan_frees += 1,
                    }
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
        if orphan_frees > 0 {
            warnings.push(format!(
                "{device}: {orphan_frees} frees of memory allocated before the trace began are not planned"
            ));
        }
        let never = lifetimes.iter().filter(|l| l.2 == n).count();
        if never > 0 {
            warnings.push(format!(
                "{device}: {never} allocations are never freed in the trace: they live to its end"
            ));
        }
        let segments = segments_of(&segment_list, d)?;
        let at_dump: i128 = segments.iter().map(|s| i128::from(s.bytes)).sum();
        let traced: i128 = segment_changes.iter().map(|c| c.1).sum();
        let mut reserved_now = at_dump - traced;
        if reserved_now < 0 {
            warnings.push(format!(
                "{device}: the trace's segment events add up to more than the segments at the dump; the reserved curve starts at 0"
            ));
            reserved_now = 0;
        }
        let mut reserved = vec![(0, reserved_now as u64)];
        for (k, change) in &segment_changes {
            reserved_now = (reserved_now + change).max(0);
            reserved.push((*k, u64::try_from(reserved_now).unwrap_or(u64::MAX)));
        }
        steps.extend(steps_of_lifetimes(
            &lifetimes,
            &format!("{device} "),
            Some(&device),
        ));
        recorded.devices.push(RecordedDevice {
            device: device.clone(),
            events: n,
            reserved,
            reserved_traced: !segment_changes.is_empty(),
            allocated: Vec::new(),
            segments,
            ooms,
        });
        devices.push(Device {
            id: device,
            hardware_class: None,
        });
    }
    if tensors.is_empty() {
        return Err(bad(format!(
            "the trace records no allocation; {NO_TRACE_HELP}"
        )));
    }
    Ok(Imported {
        graph: Graph {
            name: "PyTorch CUDA memory snapshot".into(),
            devices,
            tensors,
            steps,
            // Allocations and frees, no ops: nothing can be recomputed.
            remat_candidates: Some(Vec::new()),
            ..Graph::default()
        },
        recorded,
        warnings,
    })
}
