//! PyTorch CUDA memory snapshots: the pickle `torch.cuda.memory._dump_snapshot()` writes.
//!
//! Read with the safe unpickler ([`crate::pickle`]): nothing is imported or executed. Each traced
//! device becomes a device; each allocation of its trace (`alloc`, matched with the next
//! `free_completed` at the same address) becomes a tensor whose live interval runs from its
//! `alloc` event to its `free_completed` event (half-open, in event order) or, never freed, to
//! the end of the trace. Its name is its top frames (`function (file:line)`) and its stream when
//! not the default. A free of memory allocated before the trace began has no allocation to end
//! and is counted, not planned. The segments' total is what the caching allocator had reserved:
//! kept beside the graph, to compare with the live peak and a static plan.

use memplan_core::graph::{Device, Graph, Tensor};

use crate::FormatError;
use crate::minimalloc::steps_of_lifetimes;
use crate::pickle::{self, Value};

/// A snapshot read into a graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub graph: Graph,
    /// What the caching allocator had reserved: the segments' total size.
    pub reserved_bytes: u64,
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

/// `function (file:line)` of a frame dict.
fn frame_text(frame: &Value) -> Option<String> {
    let name = frame.get("name")?;
    let file = frame.get("filename")?;
    let file = file.as_str()?.rsplit(['/', '\\']).next()?;
    let line = frame.get("line").and_then(|l| l.as_int()).unwrap_or(0);
    Some(format!("{} ({file}:{line})", name.as_str()?))
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
    let reserved_bytes = match root.get("segments").and_then(|s| s.items()) {
        Some(segments) => segments
            .iter()
            .map(|s| {
                s.get("total_size")
                    .map_or(Ok(0), |t| int(&t, "a segment's total_size"))
            })
            .sum::<Result<u64, _>>()?,
        None => 0,
    };
    let mut tensors = Vec::new();
    let mut steps = Vec::new();
    let mut devices = Vec::new();
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
        // Open allocations by address, in order: (tensor index, alloc event).
        let mut open: std::collections::HashMap<u64, Vec<(usize, u64)>> = Default::default();
        let mut lifetimes: Vec<(String, u64, u64)> = Vec::new();
        let mut orphan_frees = 0;
        for (k, e) in events.iter().enumerate() {
            let at = || format!("device_traces[{d}][{k}]");
            let action = e
                .get("action")
                .and_then(|a| a.as_str().map(str::to_string))
                .ok_or_else(|| bad(format!("{} has no `action`", at())))?;
            match action.as_str() {
                "alloc" => {
                    let addr = int(
                        &e.get("addr")
                            .ok_or_else(|| bad(format!("{} has no `addr`", at())))?,
                        "addr",
                    )?;
                    let size = int(
                        &e.get("size")
                            .ok_or_else(|| bad(format!("{} has no `size`", at())))?,
                        "size",
                    )?;
                    let stream = e.get("stream").and_then(|s| s.as_int()).unwrap_or(0);
                    let frames: Vec<String> = e
                        .get("frames")
                        .and_then(|f| f.items())
                        .unwrap_or_default()
                        .iter()
                        .take(2)
                        .filter_map(frame_text)
                        .collect();
                    let mut name = if frames.is_empty() {
                        format!("{size} B at 0x{addr:x}")
                    } else {
                        frames.join(" < ")
                    };
                    if stream != 0 {
                        name.push_str(&format!(" [stream {stream}]"));
                    }
                    let id = format!("alloc{}", tensors.len());
                    open.entry(addr)
                        .or_default()
                        .push((tensors.len(), k as u64));
                    tensors.push(Tensor {
                        id: id.clone(),
                        name: Some(name),
                        bytes: Some(size),
                        device: Some(device.clone()),
                        ..Tensor::default()
                    });
                    lifetimes.push((id, k as u64, n));
                }
                "free_completed" => {
                    let addr = int(
                        &e.get("addr")
                            .ok_or_else(|| bad(format!("{} has no `addr`", at())))?,
                        "addr",
                    )?;
                    match open.get_mut(&addr).filter(|l| !l.is_empty()) {
                        Some(list) => {
                            let (t, start) = list.remove(0);
                            let index = t - (tensors.len() - lifetimes.len());
                            // An allocation freed at its own event lives one event.
                            lifetimes[index].2 = (k as u64).max(start + 1);
                        }
                        None => orphan_frees += 1,
                    }
                }
                _ => {}
            }
        }
        if orphan_frees > 0 {
            warnings.push(format!(
                "{device}: {orphan_frees} frees of memory allocated before the trace began are not planned"
            ));
        }
        let never: usize = lifetimes.iter().filter(|l| l.2 == n).count();
        if never > 0 {
            warnings.push(format!(
                "{device}: {never} allocations are never freed in the trace: they live to its end"
            ));
        }
        steps.extend(steps_of_lifetimes(
            &lifetimes,
            &format!("{device} "),
            Some(&device),
        ));
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
        reserved_bytes,
        warnings,
    })
}
