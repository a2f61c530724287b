//! PyTorch profiler traces: the Chrome trace JSON `torch.profiler` writes with
//! `profile_memory=True` (`.json`, or `.json.gz`, unpacked by the caller).
//!
//! Its `[memory]` instant events carry `Device Type` (0 the CPU, 1 CUDA), `Device Id`, `Addr`,
//! `Bytes` (positive: an allocation; negative: the free of that address), and the caching
//! allocator's `Total Allocated` and `Total Reserved` after the event. Each device's events,
//! ordered by time (then by `Ev Idx`), pair an allocation with the next free of its address;
//! the allocation becomes a tensor live from its event to the free's (half-open), or to the end
//! of the trace when never freed. A free with no allocation before it (memory allocated before
//! the profiler started) ends nothing and is counted.
//!
//! A tensor's stack is the chain of operators (`cpu_op`, `user_annotation`, and with
//! `with_stack=True` the `python_function` frames) whose span encloses its allocation on the
//! same thread, innermost first; it is named by its site, the innermost operator. The trace's
//! own totals become the allocator's record (`memplan_core::recorded`): reserved and allocated
//! over time, the reserved left out (with a warning) on a device whose reserved total falls below
//! its allocated total, as the CPU's does. The pairing itself is [`crate::allocations`]'.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use memplan_core::graph::Frame;
use memplan_core::recorded::MAX_EVENTS;
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::FormatError;
pub use crate::allocations::Imported;
use crate::allocations::{Allocations, DeviceRecord, Stacks};

/// How to record a trace this reader can use.
pub const NO_MEMORY_HELP: &str = "the trace has no `[memory]` events: record them with `torch.profiler.profile(activities=[...], profile_memory=True)` (add `with_stack=True` for Python frames) and export it with `prof.export_chrome_trace(\"trace.json\")`";

fn bad(message: impl Into<String>) -> FormatError {
    FormatError::Trace(message.into())
}

/// A process or thread id: Chrome traces write numbers, and strings for named tracks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(untagged)]
enum TrackId {
    Number(i64),
    Text(String),
}

/// The fields of an event this reader uses; the rest are skipped unread.
#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    ph: String,
    #[serde(default)]
    cat: String,
    #[serde(default)]
    name: String,
    pid: Option<TrackId>,
    tid: Option<TrackId>,
    ts: Option<f64>,
    dur: Option<f64>,
    #[serde(default)]
    args: Option<Args>,
}

#[derive(Deserialize)]
struct Args {
    #[serde(rename = "Device Type")]
    device_type: Option<i64>,
    #[serde(rename = "Device Id")]
    device_id: Option<i64>,
    #[serde(rename = "Addr")]
    addr: Option<u64>,
    #[serde(rename = "Bytes")]
    bytes: Option<i64>,
    #[serde(rename = "Total Allocated")]
    total_allocated: Option<i64>,
    #[serde(rename = "Total Reserved")]
    total_reserved: Option<i64>,
    #[serde(rename = "Ev Idx")]
    ev_idx: Option<i64>,
}

/// A memory event, read.
struct Memory {
    ts: f64,
    order: i64,
    thread: Thread,
    address: u64,
    bytes: i64,
    allocated: Option<u64>,
    reserved: Option<u64>,
}

/// A span that can enclose an allocation: an operator, an annotation, a Python function.
struct Span {
    start: f64,
    end: f64,
    /// Its frame in [`Collected::frames`].
    frame: u32,
}

type Thread = (Option<TrackId>, Option<TrackId>);

/// What the reader keeps of a trace's events as they stream by: the memory events by device
/// (in device-name order), the spans of each thread, their frames once each.
#[derive(Default)]
struct Collected {
    by_device: BTreeMap<String, Vec<Memory>>,
    spans: HashMap<Thread, Vec<Span>>,
    frames: Vec<Frame>,
    /// Frame ids by name: of other spans, then of Python functions.
    frame_ids: [HashMap<String, u32>; 2],
    malformed: usize,
    /// Events seen, all kinds.
    events: usize,
}

impl Collected {
    fn push(&mut self, e: Event) {
        let index = self.events;
        self.events += 1;
        if e.name == "[memory]" {
            let Some(args) = e.args else {
                self.malformed += 1;
                return;
            };
            let (Some(ts), Some(device_type), Some(address), Some(bytes)) =
                (e.ts, args.device_type, args.addr, args.bytes)
            else {
                self.malformed += 1;
                return;
            };
            self.by_device
                .entry(device_name(device_type, args.device_id.unwrap_or(0)))
                .or_default()
                .push(Memory {
                    ts,
                    order: args.ev_idx.unwrap_or(index as i64),
                    thread: (e.pid, e.tid),
                    address,
                    bytes,
                    allocated: nonnegative(args.total_allocated),
                    reserved: nonnegative(args.total_reserved),
                });
        } else if e.ph == "X"
            && matches!(
                e.cat.as_str(),
                "cpu_op" | "user_annotation" | "python_function"
            )
            && let (Some(ts), Some(dur)) = (e.ts, e.dur)
        {
            let ids = &mut self.frame_ids[usize::from(e.cat == "python_function")];
            let frame = match ids.get(e.name.as_str()) {
                Some(&id) => id,
                None => {
                    let id = self.frames.len() as u32;
                    self.frames.push(span_frame(&e.cat, &e.name));
                    ids.insert(e.name, id);
                    id
                }
            };
            self.spans.entry((e.pid, e.tid)).or_default().push(Span {
                start: ts,
                end: ts + dur.max(0.0),
                frame,
            });
        }
    }
}

/// The trace's JSON: an object whose `traceEvents` array is read an event at a time (the
/// other keys skipped unread), or the bare array of events.
struct Trace<'a>(&'a mut Collected);

impl<'de> DeserializeSeed<'de> for Trace<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Trace<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object with `traceEvents` or an array of events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(event) = seq.next_element::<Event>()? {
            self.0.push(event);
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut found = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "traceEvents" && !found {
                map.next_value_seed(Trace(&mut *self.0))?;
                found = true;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        match found {
            true => Ok(()),
            false => Err(serde::de::Error::missing_field("traceEvents")),
        }
    }
}

/// The frame of a span: a Python function (`file.py(54): forward`) with its file and line,
/// any other event by its name.
fn span_frame(cat: &str, name: &str) -> Frame {
    if cat == "python_function"
        && let Some((file_line, function)) = name.split_once("): ")
        && let Some((file, line)) = file_line.rsplit_once('(')
        && let Ok(line) = line.parse()
    {
        return Frame {
            function: function.to_string(),
            file: file.to_string(),
            line,
        };
    }
    Frame {
        function: name.to_string(),
        ..Frame::default()
    }
}

/// The device a memory event is on: `cpu`, `cuda:N`, or the type's number for others.
fn device_name(device_type: i64, id: i64) -> String {
    match device_type {
        0 => "cpu".to_string(),
        1 => format!("cuda:{id}"),
        t => format!("device{t}:{id}"),
    }
}

fn nonnegative(v: Option<i64>) -> Option<u64> {
    v.and_then(|v| u64::try_from(v).ok())
}

/// Reads a profiler trace's JSON text.
pub fn parse(text: &str) -> Result<Imported, FormatError> {
    parse_from(text.as_bytes())
}

/// Reads a profiler trace's JSON from `input` as a stream: the reader keeps the memory events
/// and the operators' spans, never the text or the other events, so traces of gigabytes load.
pub fn parse_from(mut input: impl std::io::Read) -> Result<Imported, FormatError> {
    read(&mut input)
}

/// [`parse_from`] over one reader type, so the reader is compiled once (the bundle).
fn read(input: &mut dyn std::io::Read) -> Result<Imported, FormatError> {
    // The JSON reader asks for a byte at a time.
    let input = std::io::BufReader::with_capacity(1 << 16, input);
    let de = &mut serde_json::Deserializer::from_reader(input);
    let json_error = |e: serde_json::Error| {
        bad(format!(
            "line {}, column {}: {}",
            e.line(),
            e.column(),
            crate::json::plain_message(&e.to_string())
        ))
    };
    let mut collected = Collected::default();
    Trace(&mut collected)
        .deserialize(&mut *de)
        .and_then(|()| de.end())
        .map_err(json_error)?;
    let Collected {
        by_device,
        mut spans,
        frames,
        malformed,
        ..
    } = collected;
    if by_device.is_empty() {
        return Err(bad(NO_MEMORY_HELP));
    }
    for list in spans.values_mut() {
        // Outer spans first where two start together.
        list.sort_by(|a, b| a.start.total_cmp(&b.start).then(b.end.total_cmp(&a.end)));
    }
    let mut all = Allocations::default();
    if malformed > 0 {
        all.warn(format!(
            "{malformed} `[memory]` events lack a time, device, address or byte count and are skipped"
        ));
    }
    for (device, mut memory) in by_device {
        if memory.len() as u64 > MAX_EVENTS {
            return Err(bad(format!(
                "{device} has {} `[memory]` events, more than the {MAX_EVENTS} memplan numbers",
                memory.len()
            )));
        }
        memory.sort_by(|a, b| a.ts.total_cmp(&b.ts).then(a.order.cmp(&b.order)));
        let enclosing = enclosing_stacks(&memory, (&spans, &frames), &mut all.stacks);
        let mut on = all.device(device.clone());
        let (mut empty, mut mismatched) = (0usize, 0usize);
        let mut reserved = Vec::new();
        let mut allocated = Vec::new();
        for (k, m) in memory.iter().enumerate() {
            // At most `MAX_EVENTS`, checked above.
            let event = k as u32;
            let at = u64::from(event);
            if let Some(r) = m.reserved {
                reserved.push((at, r));
            }
            if let Some(a) = m.allocated {
                allocated.push((at, a));
            }
            match m.bytes {
                0 => empty += 1,
                bytes if bytes > 0 => {
                    on.alloc(
                        &mut all,
                        event,
                        m.address,
                        bytes as u64,
                        0,
                        enclosing[k].clone(),
                    );
                }
                bytes => {
                    if on
                        .free(&mut all, event, m.address)
                        .is_some_and(|b| b != bytes.unsigned_abs())
                    {
                        mismatched += 1;
                    }
                }
            }
        }
        if mismatched > 0 {
            all.warn(format!(
                "{device}: {mismatched} frees name a size other than their allocation's; the allocation's is planned"
            ));
        }
        if empty > 0 {
            all.warn(format!("{device}: {empty} events of 0 bytes are skipped"));
        }
        // A device whose reserved total falls below its allocated total (PyTorch's CPU, whose
        // `Total Reserved` stays 0) has no reservations counted: no reserved record, not zeros.
        let uncounted = memory.iter().any(|m| match (m.reserved, m.allocated) {
            (Some(r), Some(a)) => r < a,
            _ => false,
        });
        if uncounted {
            all.warn(format!(
                "{device}: the trace's `Total Reserved` falls below its `Total Allocated`, so it does not count this device's reservations: its reserved memory is unknown"
            ));
            reserved.clear();
        }
        on.finish(
            &mut all,
            memory.len() as u64,
            DeviceRecord {
                reserved_traced: !reserved.is_empty(),
                reserved: starting_at_zero(reserved),
                allocated: starting_at_zero(allocated),
                segments: Vec::new(),
                ooms: Vec::new(),
            },
        );
    }
    all.finish("PyTorch profiler trace").ok_or_else(|| {
        bad(format!(
            "the trace's `[memory]` events allocate nothing; {NO_MEMORY_HELP}"
        ))
    })
}

/// A series whose first entry is at event 0 (its first value holds from the start).
fn starting_at_zero(mut series: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    if let Some(first) = series.first_mut() {
        first.0 = 0;
    }
    series
}

/// For each memory event (in time order), the spans of its thread that enclose it, innermost
/// first: one sweep per thread over its spans in start order, keeping those still open. The
/// open spans are pruned only when the earliest end among them has passed, and an event whose
/// open spans are those of the event before takes that event's stack, so deeply nested
/// operators cost their events, not their events times their depth.
fn enclosing_stacks(
    memory: &[Memory],
    (spans, frames): (&HashMap<Thread, Vec<Span>>, &[Frame]),
    stacks: &mut Stacks,
) -> Vec<std::sync::Arc<[Frame]>> {
    let mut out = vec![std::sync::Arc::from(Vec::new()); memory.len()];
    let mut by_thread: HashMap<&Thread, Vec<usize>> = HashMap::default();
    for (k, m) in memory.iter().enumerate() {
        if m.bytes > 0 {
            by_thread.entry(&m.thread).or_default().push(k);
        }
    }
    for (thread, events) in by_thread {
        let Some(list) = spans.get(thread) else {
            continue;
        };
        let mut next = 0;
        let mut open: Vec<&Span> = Vec::new();
        // The earliest end among the open spans, and the stack of the last event (`None` once
        // the open spans change).
        let mut earliest_end = f64::INFINITY;
        let mut last: Option<std::sync::Arc<[Frame]>> = None;
        let close_before = |open: &mut Vec<&Span>, at: f64, earliest_end: &mut f64| {
            if *earliest_end < at {
                open.retain(|o| o.end >= at);
                *earliest_end = open.iter().map(|o| o.end).fold(f64::INFINITY, f64::min);
                return true;
            }
            false
        };
        for k in events {
            let t = memory[k].ts;
            while next < list.len() && list[next].start <= t {
                let s = &list[next];
                close_before(&mut open, s.start, &mut earliest_end);
                open.push(s);
                earliest_end = earliest_end.min(s.end);
                last = None;
                next += 1;
            }
            if close_before(&mut open, t, &mut earliest_end) {
                last = None;
            }
            let stack = last.get_or_insert_with(|| {
                stacks.intern(open.iter().rev().map(|s| frames[s.frame as usize].clone()))
            });
            out[k] = stack.clone();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(ts: u64, addr: u64, bytes: i64, reserved: u64) -> String {
        format!(
            r#"{{"ph":"i","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":{ts},"args":{{"Device Type":1,"Device Id":0,"Addr":{addr},"Bytes":{bytes},"Total Allocated":0,"Total Reserved":{reserved}}}}}"#
        )
    }

    fn op(name: &str, ts: u64, dur: u64) -> String {
        format!(
            r#"{{"ph":"X","cat":"cpu_op","name":"{name}","pid":1,"tid":1,"ts":{ts},"dur":{dur}}}"#
        )
    }

    /// Each allocation's stack is the spans open at it, innermost first, as the operators open
    /// and close around it: ones that overlap without nesting, one that ends at the allocation
    /// (it still encloses it), one that ended before, and runs of allocations in the same spans
    /// (which take the stack of the one before without interning it again). The same stacks as
    /// pruning at every span and allocation gave; the time saved is not a test's to assert.
    #[test]
    fn allocations_take_the_spans_open_at_them_as_they_open_and_close() {
        let events = [
            op("outer", 0, 1000),
            op("a", 10, 100),
            op("b", 50, 100),
            op("c", 300, 20),
            memory(20, 0x100, 8, 1024),
            memory(60, 0x200, 8, 1024),
            memory(70, 0x300, 8, 1024),
            memory(110, 0x400, 8, 1024),
            memory(200, 0x500, 8, 1024),
            memory(320, 0x600, 8, 1024),
            memory(400, 0x700, 8, 1024),
        ];
        let text = format!(r#"{{"traceEvents":[{}]}}"#, events.join(","));
        let imported = parse(&text).unwrap();
        let stacks: Vec<Vec<&str>> = (imported.graph.tensors.iter())
            .map(|t| t.stack.iter().map(|f| f.function.as_str()).collect())
            .collect();
        assert_eq!(
            stacks,
            [
                vec!["a", "outer"],
                vec!["b", "a", "outer"],
                vec!["b", "a", "outer"],
                vec!["b", "a", "outer"],
                vec!["outer"],
                vec!["c", "outer"],
                vec!["outer"],
            ]
        );
    }

    #[test]
    fn allocations_pair_with_frees_and_take_their_operator() {
        let events = [
            op("aten::linear", 0, 100),
            op("aten::mm", 10, 20),
            memory(15, 0x100, 64, 1024),
            memory(40, 0x200, 32, 1024),
            memory(50, 0x100, -64, 1024),
            memory(60, 0x300, -8, 2048),
        ];
        let text = format!(r#"{{"traceEvents":[{}]}}"#, events.join(","));
        let imported = parse(&text).unwrap();
        let g = &imported.graph;
        assert_eq!(g.tensors.len(), 2);
        assert_eq!(g.tensors[0].name.as_deref(), Some("aten::mm"));
        assert_eq!(
            g.tensors[0]
                .stack
                .iter()
                .map(|f| f.function.as_str())
                .collect::<Vec<_>>(),
            ["aten::mm", "aten::linear"]
        );
        assert_eq!(g.tensors[1].name.as_deref(), Some("aten::linear"));
        let a = &imported.recorded.allocations;
        assert_eq!((a[0].freed_at(), a[1].freed_at()), (Some(2), None));
        assert!(
            imported.warnings.iter().any(|w| w.contains("1 frees")),
            "{:?}",
            imported.warnings
        );
        let d = &imported.recorded.devices[0];
        assert_eq!(d.device, "cuda:0");
        assert_eq!(d.reserved_peak(), 2048);
        g.resolve().unwrap();
    }

    #[test]
    fn a_device_whose_reserved_total_falls_below_its_allocated_has_no_reserved_record() {
        // PyTorch's CPU: `Total Reserved` stays 0 while `Total Allocated` counts.
        let cpu = |ts: u64, addr: u64, bytes: i64, allocated: u64| {
            format!(
                r#"{{"ph":"i","name":"[memory]","pid":1,"tid":1,"ts":{ts},"args":{{"Device Type":0,"Device Id":-1,"Addr":{addr},"Bytes":{bytes},"Total Allocated":{allocated},"Total Reserved":0}}}}"#
            )
        };
        let events = [
            cpu(1, 0x10, 8, 8),
            cpu(2, 0x10, -8, 0),
            memory(3, 0x100, 64, 1024),
        ];
        let text = format!(r#"{{"traceEvents":[{}]}}"#, events.join(","));
        let imported = parse(&text).unwrap();
        let devices = &imported.recorded.devices;
        let cpu = devices.iter().find(|d| d.device == "cpu").unwrap();
        assert!(cpu.reserved.is_empty() && !cpu.reserved_traced);
        assert_eq!(cpu.allocated, vec![(0, 8), (1, 0)]);
        let cuda = devices.iter().find(|d| d.device == "cuda:0").unwrap();
        assert_eq!((cuda.reserved_peak(), cuda.reserved_traced), (1024, true));
        let warned = |d: &str| {
            (imported.warnings.iter()).any(|w| w.starts_with(d) && w.contains("Total Reserved"))
        };
        assert!(
            warned("cpu") && !warned("cuda:0"),
            "{:?}",
            imported.warnings
        );
    }

    #[test]
    fn a_trace_without_memory_events_says_how_to_record_one() {
        let text = format!(r#"{{"traceEvents":[{}]}}"#, op("aten::mm", 0, 1));
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("profile_memory=True"), "{e}");
    }

    #[test]
    fn python_frames_keep_their_file_and_line() {
        let f = span_frame("python_function", "models/net.py(54): forward");
        assert_eq!(f.to_string(), "forward (net.py:54)");
        assert_eq!(span_frame("cpu_op", "aten::mm").to_string(), "aten::mm");
    }
}
