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
use memplan_core::recorded::{MAX_EVENTS, Oom, Segment};

use crate::FormatError;
pub use crate::allocations::Imported;
use crate::allocations::{Allocations, DeviceEvents, DeviceRecord};
use crate::pickle::{self, Value};
use std::rc::Rc;
use std::sync::Arc;

/// How a snapshot that has no trace can get one.
pub const NO_TRACE_HELP: &str = "the snapshot holds no allocation trace (`device_traces` is missing or empty): record one with `torch.cuda.memory._record_memory_history(max_entries=100000)` before running, then `torch.cuda.memory._dump_snapshot(\"snapshot.pickle\")`";

fn bad(message: impl Into<String>) -> FormatError {
    FormatError::Snapshot(message.into())
}

/// `v` as a non-negative integer; `what` names it in the error (made only for one: a snapshot
/// reads a few million).
fn int(v: &Value, what: impl FnOnce() -> String) -> Result<u64, FormatError> {
    v.as_int()
        .and_then(|i| u64::try_from(i).ok())
        .ok_or_else(|| bad(format!("{} is not a non-negative integer", what())))
}

/// The field `key` of event `e` as a non-negative integer.
fn field(e: &Value, key: &str, at: &dyn Fn() -> String) -> Result<u64, FormatError> {
    let v = e
        .get(key)
        .ok_or_else(|| bad(format!("{} has no `{key}`", at())))?;
    int(&v, || format!("{}'s `{key}`", at()))
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
                .map_or(Ok(0), |v| int(&v, || format!("{}'s `address`", at())))?,
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
    parse_from(
        &mut std::io::Cursor::new(bytes),
        bytes.len() as u64,
        true,
        &mut |_| {},
        &|| false,
    )
}

/// Reads a snapshot pickle of `len` bytes from `input`, as a stream: each trace event becomes
/// part of the graph as the unpickler completes it, and is then dropped, so what the reader
/// holds is the graph and the values the pickle shares (frames, strings), never the events.
/// `progress` hears the bytes read so far, of `2 * len` ([`pickle::read_streaming`]);
/// `should_stop` is asked once the file is read, before each device's events are paired, and
/// before the graph is built ([`crate::load_from`]).
pub fn parse_stream<R: std::io::Read + std::io::Seek>(
    mut input: R,
    len: u64,
    progress: &mut dyn FnMut(u64),
    should_stop: &dyn Fn() -> bool,
) -> Result<Imported, FormatError> {
    parse_from(&mut input, len, true, progress, should_stop)
}

/// [`parse_stream`], or with `stream` false, the events read whole first and then walked (the
/// plain reading that the stream is tested against).
fn parse_from(
    input: &mut dyn crate::ReadSeek,
    len: u64,
    stream: bool,
    progress: &mut dyn FnMut(u64),
    should_stop: &dyn Fn() -> bool,
) -> Result<Imported, FormatError> {
    let mut reader = Reader::default();
    let mut failed: Option<FormatError> = None;
    let mut on_item = |d: usize, e: Value| {
        reader.event(d, &e).map_err(|error| {
            let message = error.to_string();
            failed = Some(error);
            message
        })
    };
    let root = pickle::read_streaming(
        input,
        len,
        stream.then_some(pickle::Stream {
            key: "device_traces",
            on_item: &mut on_item,
        }),
        progress,
    );
    if let Some(error) = failed {
        return Err(error);
    }
    let root = root?;
    if !matches!(root, Value::Dict(_)) {
        return Err(bad(
            "the pickle is not a dict (a snapshot is one with `device_traces`)",
        ));
    }
    let traces = root
        .get("device_traces")
        .and_then(|t| t.items())
        .ok_or_else(|| bad(NO_TRACE_HELP))?;
    // Events the stream did not take (a pickle laid out otherwise), in order.
    for (d, trace) in traces.iter().enumerate() {
        let Some(events) = trace.items() else {
            return Err(bad(format!("device_traces[{d}] is not a list of events")));
        };
        for e in &events {
            reader.event(d, e)?;
        }
    }
    let segment_list = root
        .get("segments")
        .and_then(|s| s.items())
        .unwrap_or_default();
    reader.finish(&segment_list, should_stop)
}

/// The graph being read from a snapshot's events, device by device.
#[derive(Default)]
struct Reader {
    all: Allocations,
    /// The device whose events are being read, with how many it has had.
    on: Option<(usize, DeviceEvents, Trace)>,
    /// Devices done, with what their trace says of segments and out-of-memory events.
    done: Vec<(usize, DeviceEvents, Trace)>,
    /// Whether each device index is done, asked at each change of device (a file can list
    /// millions).
    done_devices: Vec<bool>,
    /// Frame ids by the frame dict's address: a snapshot shares its frame dicts, so most
    /// frames are found without reading their strings. Each dict is kept alive while its
    /// address is a key (so the address cannot be reused); the table is emptied when full.
    by_dict: rustc_hash::FxHashMap<usize, Option<u32>>,
    alive: Vec<Value>,
    /// Stacks by the addresses of their frame dicts, all kept alive in `alive`: a training
    /// loop's events list a few stacks millions of times, each event its own list of shared
    /// dicts, so most stacks are found with one lookup, not one a frame. Emptied with
    /// `by_dict`, and when full.
    by_dicts: rustc_hash::FxHashMap<Box<[usize]>, Arc<[Frame]>>,
    dicts: Vec<usize>,
    ids: Vec<u32>,
}

/// A device's trace besides its allocations.
#[derive(Default)]
struct Trace {
    events: u64,
    /// Segment bytes the trace adds (+) and returns (-), in order, to walk back from the
    /// segments at the dump.
    segment_changes: Vec<(u64, i128)>,
    ooms: Vec<Oom>,
}

/// The most frame dicts [`Reader::by_dict`] keeps.
const FRAME_DICTS: usize = 1 << 18;

/// The most stacks [`Reader::by_dicts`] keeps.
const DICT_STACKS: usize = 1 << 16;

impl Reader {
    /// Event `e`, the next of device `d`.
    fn event(&mut self, d: usize, e: &Value) -> Result<(), FormatError> {
        if self.on.as_ref().is_none_or(|on| on.0 != d) {
            if let Some(on) = self.on.take() {
                if self.done_devices.len() <= on.0 {
                    self.done_devices.resize(on.0 + 1, false);
                }
                self.done_devices[on.0] = true;
                self.done.push(on);
            }
            if self.done_devices.get(d).copied().unwrap_or(false) {
                return Err(bad(format!(
                    "device_traces[{d}]'s events come in two parts; a snapshot lists each device's events together"
                )));
            }
            let events = self.all.device(format!("cuda:{d}"));
            self.on = Some((d, events, Trace::default()));
        }
        let (_, on, trace) = self.on.as_mut().expect("a device");
        let k = trace.events;
        if k > MAX_EVENTS {
            return Err(bad(format!(
                "device_traces[{d}] has more than the {MAX_EVENTS} events memplan numbers"
            )));
        }
        // At most `MAX_EVENTS`, checked above.
        let event = k as u32;
        trace.events += 1;
        let at = || format!("device_traces[{d}][{k}]");
        let Some(Value::Str(action)) = e.get("action") else {
            return Err(bad(format!("{} has no `action`", at())));
        };
        match &**action {
            "alloc" => {
                let address = field(e, "addr", &at)?;
                let size = field(e, "size", &at)?;
                let stream = e
                    .get("stream")
                    .and_then(|s| s.as_int())
                    .map_or(0, |s| s as i64);
                let frames = match e.get("frames") {
                    Some(Value::List(frames)) => frames,
                    _ => Rc::default(),
                };
                let frames = frames.borrow();
                self.dicts.clear();
                self.dicts.extend(frames.iter().filter_map(|f| match f {
                    Value::Dict(dict) => Some(Rc::as_ptr(dict) as usize),
                    _ => None,
                }));
                let stack = match self.by_dicts.get(&self.dicts[..]) {
                    Some(stack) => stack.clone(),
                    None => self.stack_of(&frames),
                };
                let (_, on, _) = self.on.as_mut().expect("a device");
                on.alloc(&mut self.all, event, address, size, stream, stack);
            }
            "free_completed" => {
                on.free(&mut self.all, event, field(e, "addr", &at)?);
            }
            "segment_alloc" | "segment_map" => {
                trace
                    .segment_changes
                    .push((k, i128::from(field(e, "size", &at)?)));
            }
            "segment_free" | "segment_unmap" => {
                trace
                    .segment_changes
                    .push((k, -i128::from(field(e, "size", &at)?)));
            }
            "oom" => trace.ooms.push(Oom {
                at: k,
                requested: field(e, "size", &at)?,
                device_free: e
                    .get("device_free")
                    .and_then(|v| v.as_int())
                    .and_then(|v| u64::try_from(v).ok()),
            }),
            _ => {}
        }
        Ok(())
    }

    /// The stack of `frames`, an event's, whose frame dicts' addresses are `self.dicts`: each
    /// frame found by its dict's address, else read; the stack then kept by those addresses
    /// unless a dict met first was let go on the way.
    fn stack_of(&mut self, frames: &[Value]) -> Arc<[Frame]> {
        self.ids.clear();
        let mut kept = true;
        for f in frames {
            let Value::Dict(dict) = f else { continue };
            let key = Rc::as_ptr(dict) as usize;
            let id = match self.by_dict.get(&key) {
                Some(&id) => id,
                None => {
                    let id = frame(f).map(|f| self.all.stacks.frame_id(f));
                    if self.by_dict.len() >= FRAME_DICTS {
                        self.by_dict.clear();
                        self.alive.clear();
                        self.by_dicts.clear();
                        kept = false;
                    }
                    self.by_dict.insert(key, id);
                    self.alive.push(f.clone());
                    id
                }
            };
            self.ids.extend(id);
        }
        let stack = self.all.stacks.stack(&self.ids);
        if kept {
            if self.by_dicts.len() >= DICT_STACKS {
                self.by_dicts.clear();
            }
            self.by_dicts.insert(self.dicts[..].into(), stack.clone());
        }
        stack
    }

    /// The graph, once every event is read: each device's reserved bytes walked back from
    /// the segments at the dump (`segment_list`).
    fn finish(
        mut self,
        segment_list: &[Value],
        should_stop: &dyn Fn() -> bool,
    ) -> Result<Imported, FormatError> {
        self.done.extend(self.on.take());
        if self.done.iter().all(|(_, _, t)| t.events == 0) {
            return Err(bad(NO_TRACE_HELP));
        }
        let mut all = self.all;
        for (d, on, trace) in self.done {
            crate::stop_if(should_stop)?;
            let device = format!("cuda:{d}");
            let segments = segments_of(segment_list, d)?;
            let at_dump: i128 = segments.iter().map(|s| i128::from(s.bytes)).sum();
            let traced: i128 = trace.segment_changes.iter().map(|c| c.1).sum();
            let mut reserved_now = at_dump - traced;
            if reserved_now < 0 {
                all.warn(format!(
                    "{device}: the trace's segment events add up to more than the segments at the dump; the reserved curve starts at 0"
                ));
                reserved_now = 0;
            }
            let mut reserved = vec![(0, reserved_now as u64)];
            for (k, change) in &trace.segment_changes {
                reserved_now = (reserved_now + change).max(0);
                reserved.push((*k, u64::try_from(reserved_now).unwrap_or(u64::MAX)));
            }
            on.finish(
                &mut all,
                trace.events,
                DeviceRecord {
                    reserved,
                    reserved_traced: !trace.segment_changes.is_empty(),
                    allocated: Vec::new(),
                    segments,
                    ooms: trace.ooms,
                },
            );
        }
        crate::stop_if(should_stop)?;
        all.finish("PyTorch CUDA memory snapshot")
            .ok_or_else(|| bad(format!("the trace records no allocation; {NO_TRACE_HELP}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNAPSHOTS: [&[u8]; 5] = [
        include_bytes!("../../../tests/data/torch/magma27_memory_snapshot.pickle"),
        include_bytes!("../../../tests/data/torch/generated-p2.pickle"),
        include_bytes!("../../../tests/data/torch/generated-p3.pickle"),
        include_bytes!("../../../tests/data/torch/generated-p4.pickle"),
        include_bytes!("../../../tests/data/torch/generated-p5.pickle"),
    ];

    #[test]
    fn streaming_the_events_reads_what_reading_them_whole_does() {
        for bytes in SNAPSHOTS {
            let len = bytes.len() as u64;
            let cursor = || std::io::Cursor::new(bytes);
            let streamed = parse_from(&mut cursor(), len, true, &mut |_| {}, &|| false).unwrap();
            let whole = parse_from(&mut cursor(), len, false, &mut |_| {}, &|| false).unwrap();
            assert!(!streamed.graph.tensors.is_empty());
            assert_eq!(streamed, whole);
        }
    }

    /// Each allocation's stack is its event's frames, read here from the whole pickle one
    /// event at a time: however the reader finds stacks (by their frame dicts' addresses, by
    /// each frame's), it finds these.
    #[test]
    fn each_allocation_has_its_events_frames() {
        for bytes in SNAPSHOTS {
            let root = pickle::read(bytes).unwrap();
            let mut expected: Vec<Vec<Frame>> = Vec::new();
            for trace in root.get("device_traces").unwrap().items().unwrap() {
                for e in trace.items().unwrap() {
                    if e.get("action").unwrap().as_str() != Some("alloc") {
                        continue;
                    }
                    let frames = e.get("frames").and_then(|f| f.items()).unwrap_or_default();
                    expected.push(frames.iter().filter_map(frame).collect());
                }
            }
            let graph = parse(bytes).unwrap().graph;
            let read: Vec<Vec<Frame>> = (graph.tensors.iter()).map(|t| t.stack.to_vec()).collect();
            assert!(read.iter().filter(|s| !s.is_empty()).count() > 10);
            assert_eq!(read, expected);
        }
    }

    /// A reader that hands over one byte per read: the unpickler's buffer then never holds an
    /// argument ahead of its opcode, so every opcode with one takes the checked reads.
    struct Trickle<'a>(std::io::Cursor<&'a [u8]>);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(1);
            self.0.read(&mut buf[..n])
        }
    }

    impl std::io::Seek for Trickle<'_> {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            self.0.seek(to)
        }
    }

    #[test]
    fn a_snapshot_read_a_byte_at_a_time_reads_as_one_read_whole() {
        for bytes in SNAPSHOTS {
            let len = bytes.len() as u64;
            let trickled = parse_stream(
                Trickle(std::io::Cursor::new(bytes)),
                len,
                &mut |_| {},
                &|| false,
            );
            assert_eq!(trickled.unwrap(), parse(bytes).unwrap());
        }
    }

    #[test]
    fn a_bad_event_is_named_by_device_and_index() {
        // pickle.dumps({'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 8}, {'action': 'alloc'}]]}, 4)
        let bytes: &[u8] = b"\x80\x04\x95I\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\rdevice_traces\x94]\x94]\x94(}\x94(\x8c\x06action\x94\x8c\x05alloc\x94\x8c\x04addr\x94K\x01\x8c\x04size\x94K\x08u}\x94h\x05h\x06seas.";
        let e = parse(bytes).unwrap_err();
        assert!(
            e.to_string().contains("device_traces[0][1] has no `addr`"),
            "{e}"
        );
    }

    #[test]
    fn a_device_whose_events_come_in_two_parts_is_refused() {
        // {'device_traces': [L0, L1]}, then one more event appended to L0 (fetched from the
        // memo) after L1's: what pickle.loads reads as [[a16, a48], [a32]].
        let event = |addr: u8| {
            let mut e =
                b"}(X\x06\x00\x00\x00actionX\x05\x00\x00\x00allocX\x04\x00\x00\x00addrK".to_vec();
            e.extend([addr]);
            e.extend(b"X\x04\x00\x00\x00sizeK\x08ua");
            e
        };
        let mut bytes = b"\x80\x02}X\x0d\x00\x00\x00device_traces](]q\x01".to_vec();
        bytes.extend(event(16));
        bytes.extend(b"]");
        bytes.extend(event(32));
        bytes.extend(b"esh\x01");
        bytes.extend(event(48));
        bytes.extend(b"0.");
        let e = parse(&bytes).unwrap_err();
        assert!(
            e.to_string()
                .contains("device_traces[0]'s events come in two parts"),
            "{e}"
        );
    }
}
