//! A graph from an allocator's events, device by device: what PyTorch snapshots ([`crate::torch`])
//! and profiler traces ([`crate::torch_trace`]) share once each has read its own file.
//!
//! Each device's events are numbered in trace order. An allocation opens a tensor at its address;
//! a free ends the oldest open allocation at that address (half-open: live from the allocation's
//! event up to the free's), or, with none open, is memory allocated before the trace began,
//! counted and not planned. An allocation never freed lives to the end of the trace. The
//! schedule is one step per distinct allocation event ([`steps_of_lifetimes`]); the allocator's
//! own record ([`Recorded`]) keeps each allocation's address, stream and free.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use memplan_core::graph::{Device, Frame, Graph, Id, Tensor, site};
use memplan_core::recorded::{Allocation, NEVER_FREED, Recorded, RecordedDevice};

use crate::minimalloc::{EventsBuilder, steps_of_lifetimes};

/// A source read into a graph, with what its allocator did.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub graph: Graph,
    pub recorded: Recorded,
    pub warnings: Vec<String>,
}

/// Stacks shared by every allocation made from the same frames: a training loop allocates from
/// a few stacks millions of times.
#[derive(Default)]
pub(crate) struct Stacks {
    frames: FxHashMap<Frame, u32>,
    stacks: FxHashMap<Vec<u32>, Arc<[Frame]>>,
    all: Vec<Frame>,
}

impl Stacks {
    pub(crate) fn intern(&mut self, frames: impl Iterator<Item = Frame>) -> Arc<[Frame]> {
        let ids: Vec<u32> = frames.map(|f| self.frame_id(f)).collect();
        self.stack(&ids)
    }

    /// The id of frame `f`.
    pub(crate) fn frame_id(&mut self, f: Frame) -> u32 {
        if let Some(&id) = self.frames.get(&f) {
            return id;
        }
        let id = self.all.len() as u32;
        self.frames.insert(f.clone(), id);
        self.all.push(f);
        id
    }

    /// The stack of the frames `ids` names.
    pub(crate) fn stack(&mut self, ids: &[u32]) -> Arc<[Frame]> {
        if let Some(stack) = self.stacks.get(ids) {
            return stack.clone();
        }
        let stack: Arc<[Frame]> = ids.iter().map(|&i| self.all[i as usize].clone()).collect();
        self.stacks.insert(ids.to_vec(), stack.clone());
        stack
    }
}

/// The name of the allocations from `site` on `stream`: the site, with the stream when not the
/// default. Allocations from one site on one stream share it (a training loop makes millions).
fn allocation_name(
    names: &mut FxHashMap<(Arc<str>, i64), Arc<str>>,
    site: Arc<str>,
    stream: i64,
) -> Arc<str> {
    (names.entry((site, stream)))
        .or_insert_with_key(|(site, stream)| match stream {
            0 => site.clone(),
            _ => format!("{site} [stream {stream}]").into(),
        })
        .clone()
}

/// The name of an allocation from a stack without a site: its size and address, and its
/// stream when not the default.
fn address_name(size: u64, address: u64, stream: i64) -> Arc<str> {
    let mut name = format!("{size} B at 0x{address:x}");
    if stream != 0 {
        name.push_str(&format!(" [stream {stream}]"));
    }
    name.into()
}

/// An allocation read, its tensor made once the trace is read: the count is unknown until then,
/// and what grows by doubling is these few fields, not whole tensors (in wasm, whose memory
/// never shrinks, a tensor list's last doubling and its copy set the import's peak).
struct Pending {
    bytes: u64,
    name: Arc<str>,
    stack: Arc<[Frame]>,
    /// The device as the tensor names it ([`DeviceEvents::named`]).
    device: Option<Arc<str>>,
}

/// The id of the `t`-th allocation read (of every device).
fn allocation_id(t: usize) -> Id {
    format!("alloc{t}").into()
}

/// The graph being built, over every device.
#[derive(Default)]
pub(crate) struct Allocations {
    pub(crate) stacks: Stacks,
    pending: Vec<Pending>,
    /// The name of each site on each stream, shared by its allocations.
    names: FxHashMap<(Arc<str>, i64), Arc<str>>,
    /// The name of the allocations of each interned stack (by its address: interned stacks
    /// live as long as their table) on each stream; none for a stack without a site, whose
    /// allocations are named by address. One lookup an allocation, where a site's name was
    /// hashed for each.
    named: FxHashMap<(usize, i64), Option<Arc<str>>>,
    events: EventsBuilder,
    /// Each allocation's steps, as the graph records them ([`Graph::lifetimes`]).
    lifetimes: Vec<(u32, u32)>,
    devices: Vec<Device>,
    /// The record being read: one allocation per tensor, in tensor order, and each device's
    /// allocator.
    allocations: Vec<Allocation>,
    recorded_devices: Vec<RecordedDevice>,
    warnings: Vec<String>,
}

/// One device's events, being read: each method takes the graph being built.
pub(crate) struct DeviceEvents {
    device: Arc<str>,
    first: usize,
    /// Open allocations by address, oldest first: tensor indices.
    open: FxHashMap<u64, Vec<usize>>,
    /// Each allocation's live events (tensor `first + i`); [`NEVER_FREED`] until its free.
    lifetimes: Vec<(u64, u64)>,
    orphan_frees: usize,
}

/// What a device's allocator held besides its allocations.
pub(crate) struct DeviceRecord {
    pub(crate) reserved: Vec<(u64, u64)>,
    pub(crate) reserved_traced: bool,
    pub(crate) allocated: Vec<(u64, u64)>,
    pub(crate) segments: Vec<memplan_core::recorded::Segment>,
    pub(crate) ooms: Vec<memplan_core::recorded::Oom>,
}

impl Allocations {
    pub(crate) fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }

    /// Starts device `device`, whose events follow.
    pub(crate) fn device(&self, device: String) -> DeviceEvents {
        DeviceEvents {
            device: device.into(),
            first: self.pending.len(),
            open: FxHashMap::default(),
            lifetimes: Vec::new(),
            orphan_frees: 0,
        }
    }

    /// The graph named `name`; `None` when nothing was allocated.
    pub(crate) fn finish(mut self, name: &str) -> Option<Imported> {
        if self.pending.is_empty() {
            return None;
        }
        // The record grew by doubling, its count unknown until the end: what it did not use
        // goes back now, so that in wasm (whose memory never shrinks) what comes next reuses it.
        self.allocations.shrink_to_fit();
        let tensors = (self.pending.into_iter().enumerate())
            .map(|(t, p)| Tensor {
                id: allocation_id(t),
                name: Some(p.name),
                bytes: Some(p.bytes),
                device: p.device,
                stack: p.stack,
                ..Tensor::default()
            })
            .collect();
        Some(Imported {
            graph: Graph {
                name: name.into(),
                devices: self.devices,
                tensors,
                events: self.events.finish(),
                lifetimes: self.lifetimes,
                // Allocations and frees, not a dataflow graph: nothing can be recomputed.
                remat_candidates: Some(Vec::new()),
                ..Graph::default()
            },
            recorded: Recorded {
                allocations: Arc::new(self.allocations),
                devices: self.recorded_devices,
            },
            warnings: self.warnings,
        })
    }
}

impl DeviceEvents {
    /// The device as its tensors and steps name it: not at all on the graph's first device
    /// (the one whose tensors come first), which is what an absent device means. A snapshot of
    /// one device then holds no copy of its name per allocation and step.
    fn named(&self) -> Option<&Arc<str>> {
        (self.first != 0).then_some(&self.device)
    }

    /// Event `at` allocates `size` bytes at `address` on `stream`, from `stack`.
    pub(crate) fn alloc(
        &mut self,
        all: &mut Allocations,
        at: u32,
        address: u64,
        size: u64,
        stream: i64,
        stack: Arc<[Frame]>,
    ) {
        let t = all.pending.len();
        self.open.entry(address).or_default().push(t);
        let named = (all.named.entry((stack.as_ptr() as usize, stream))).or_insert_with(|| {
            let site = site(&stack)?;
            Some(allocation_name(
                &mut all.names,
                site.to_string().into(),
                stream,
            ))
        });
        let name = match named {
            Some(name) => name.clone(),
            None => address_name(size, address, stream),
        };
        all.pending.push(Pending {
            bytes: size,
            name,
            stack,
            device: self.named().cloned(),
        });
        all.allocations
            .push(Allocation::new(address, stream, at, None));
        self.lifetimes.push((at.into(), NEVER_FREED));
    }

    /// Event `at` frees `address`: the size of the tensor it ends, if one was open there.
    pub(crate) fn free(&mut self, all: &mut Allocations, at: u32, address: u64) -> Option<u64> {
        let Some(list) = self.open.get_mut(&address).filter(|l| !l.is_empty()) else {
            self.orphan_frees += 1;
            return None;
        };
        let t = list.remove(0);
        let start = all.allocations[t].allocated_at;
        all.allocations[t].free(at);
        // An allocation freed at its own event lives one event.
        self.lifetimes[t - self.first].1 = u64::from(at).max(u64::from(start) + 1);
        Some(all.pending[t].bytes)
    }

    /// Ends the device after `events` events: its schedule, the warnings about what the trace
    /// cannot say, and the allocator's record. A device that allocated nothing is left out.
    pub(crate) fn finish(self, all: &mut Allocations, events: u64, record: DeviceRecord) {
        let named = self.named().cloned();
        let DeviceEvents {
            device,
            first,
            mut lifetimes,
            orphan_frees,
            ..
        } = self;
        if orphan_frees > 0 {
            all.warnings.push(format!(
                "{device}: {orphan_frees} frees of memory allocated before the trace began are not planned"
            ));
        }
        let mut never = 0;
        for l in lifetimes.iter_mut().filter(|l| l.1 == NEVER_FREED) {
            l.1 = events;
            never += 1;
        }
        if never > 0 {
            all.warnings.push(format!(
                "{device}: {never} allocations are never freed in the trace: they live to its end"
            ));
        }
        if lifetimes.is_empty() {
            return;
        }
        let recorded =
            steps_of_lifetimes(&mut all.events, &lifetimes, &format!("{device} "), named);
        // A device's allocations are consecutive tensors.
        if all.lifetimes.len() < first + recorded.len() {
            all.lifetimes.resize(first + recorded.len(), (0, 0));
        }
        all.lifetimes[first..first + recorded.len()].copy_from_slice(&recorded);
        all.recorded_devices.push(RecordedDevice {
            device: device.to_string(),
            events,
            reserved: record.reserved,
            reserved_traced: record.reserved_traced,
            allocated: record.allocated,
            segments: record.segments,
            ooms: record.ooms,
        });
        all.devices.push(Device {
            id: device.to_string(),
            hardware_class: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> DeviceRecord {
        DeviceRecord {
            reserved: Vec::new(),
            reserved_traced: false,
            allocated: Vec::new(),
            segments: Vec::new(),
            ooms: Vec::new(),
        }
    }

    #[test]
    fn allocations_are_named_by_site_and_stream_and_share_the_name() {
        let mut all = Allocations::default();
        let user = Frame {
            function: "forward".into(),
            file: "model.py".into(),
            line: 54,
        };
        let internal = Frame {
            function: "torch::unwind::unwind()".into(),
            file: "??".into(),
            line: 0,
        };
        let at_user = all.stacks.intern([internal.clone(), user].into_iter());
        let mut cuda0 = all.device("cuda:0".into());
        cuda0.alloc(&mut all, 0, 0x100, 8, 0, at_user.clone());
        cuda0.alloc(&mut all, 1, 0x200, 16, 0, at_user.clone());
        cuda0.alloc(&mut all, 2, 0x300, 32, 7, at_user);
        assert_eq!(cuda0.free(&mut all, 3, 0x200), Some(16));
        assert_eq!(cuda0.free(&mut all, 4, 0x999), None);
        cuda0.finish(&mut all, 5, record());
        let mut cuda1 = all.device("cuda:1".into());
        // A stack without a site: each allocation named by its own size and address.
        let nowhere = all.stacks.intern(std::iter::empty());
        cuda1.alloc(&mut all, 0, 0xab, 4, 0, nowhere.clone());
        cuda1.alloc(&mut all, 1, 0xcd, 8, 0, nowhere);
        cuda1.finish(&mut all, 2, record());
        let imported = all.finish("trace").unwrap();
        let tensors = &imported.graph.tensors;
        let names: Vec<&str> = tensors.iter().map(|t| t.name.as_deref().unwrap()).collect();
        assert_eq!(
            names,
            [
                "forward (model.py:54)",
                "forward (model.py:54)",
                "forward (model.py:54) [stream 7]",
                "4 B at 0xab",
                "8 B at 0xcd",
            ]
        );
        // One name for the site's allocations on a stream, not a copy each.
        let name = |t: usize| tensors[t].name.clone().unwrap();
        assert!(Arc::ptr_eq(&name(0), &name(1)));
        let ids: Vec<&str> = tensors.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["alloc0", "alloc1", "alloc2", "alloc3", "alloc4"]);
        let bytes: Vec<Option<u64>> = tensors.iter().map(|t| t.bytes).collect();
        assert_eq!(bytes, [Some(8), Some(16), Some(32), Some(4), Some(8)]);
        // The first device is the one an absent device means; the others are named.
        let devices: Vec<Option<&str>> = tensors.iter().map(|t| t.device.as_deref()).collect();
        assert_eq!(devices, [None, None, None, Some("cuda:1"), Some("cuda:1")]);
        // One name per device, shared by its tensors and steps.
        let on_cuda1 = |d: &Option<Arc<str>>| d.clone().unwrap();
        let step = imported.graph.step(imported.graph.step_count() - 1);
        assert!(Arc::ptr_eq(
            &on_cuda1(&tensors[3].device),
            &on_cuda1(&step.device)
        ));
        // A step per distinct allocation event, each device's own, the tensor it allocates
        // written there (by the lifetimes the graph records, its steps events listing nothing).
        assert!(imported.graph.steps.is_empty());
        assert!(
            imported
                .graph
                .schedule()
                .all(|s| s.writes.is_empty() && s.pinned)
        );
        let listed = imported.graph.listed();
        let steps: Vec<(&str, &[Id])> = (listed.steps.iter())
            .map(|s| (s.id.as_str(), &s.writes[..]))
            .collect();
        assert_eq!(steps.len(), 5);
        assert_eq!(steps[1], ("cuda:0 t=1", &["alloc1".into()][..]));
        assert_eq!(steps[3], ("cuda:1 t=0", &["alloc3".into()][..]));
        assert_eq!(imported.recorded.allocations[1].freed_at(), Some(3));
        assert!(
            imported
                .warnings
                .iter()
                .any(|w| w.contains("1 frees of memory"))
        );
    }
}
