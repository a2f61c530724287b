//! A graph from an allocator's events, device by device: what PyTorch snapshots ([`crate::torch`])
//! and profiler traces ([`crate::torch_trace`]) share once each has read its own file.
//!
//! Each device's events are numbered in trace order. An allocation opens a tensor at its address;
//! a free ends the oldest open allocation at that address (half-open: live from the allocation's
//! event up to the free's), or, with none open, is memory allocated before the trace began,
//! counted and not planned. An allocation never freed lives to the end of the trace. The
//! schedule is one step per distinct allocation event ([`steps_of_lifetimes`]); the allocator's
//! own record ([`Recorded`]) keeps each allocation's address, stream and free.

use rustc_hash::FxHashMap as HashMap;

use rustc_hash::FxHashMap;
use std::sync::Arc;

use memplan_core::graph::{Device, Frame, Graph, Step, Tensor, site};
use memplan_core::recorded::{Allocation, Recorded, RecordedDevice};

use crate::minimalloc::steps_of_lifetimes;

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
    /// Each interned stack's site, as shown, by the stack's address (interned stacks live as
    /// long as this table, so their addresses are theirs).
    sites: FxHashMap<usize, Option<Arc<str>>>,
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

    /// The site of `stack`, one of this table's, as shown ([`site`]).
    fn site(&mut self, stack: &Arc<[Frame]>) -> Option<Arc<str>> {
        let key = stack.as_ptr() as usize;
        (self.sites.entry(key))
            .or_insert_with(|| site(stack).map(|f| Arc::from(f.to_string())))
            .clone()
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

/// The name of an allocation: its site, its stream when not the default.
fn allocation_name(site: Option<&str>, size: u64, address: u64, stream: i64) -> String {
    let mut name = match site {
        Some(site) => site.to_string(),
        None => format!("{size} B at 0x{address:x}"),
    };
    if stream != 0 {
        name.push_str(&format!(" [stream {stream}]"));
    }
    name
}

/// The graph being built, over every device.
#[derive(Default)]
pub(crate) struct Allocations {
    pub(crate) stacks: Stacks,
    tensors: Vec<Tensor>,
    steps: Vec<Step>,
    devices: Vec<Device>,
    recorded: Recorded,
    warnings: Vec<String>,
}

/// One device's events, being read: each method takes the graph being built.
pub(crate) struct DeviceEvents {
    device: String,
    first: usize,
    /// Open allocations by address, oldest first: tensor indices.
    open: HashMap<u64, Vec<usize>>,
    /// Each allocation's live events (tensor `first + i`); [`NEVER_FREED`] until its free.
    lifetimes: Vec<(u64, u64)>,
    orphan_frees: usize,
}

/// The end of a lifetime whose free the trace never records.
const NEVER_FREED: u64 = u64::MAX;

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
            device,
            first: self.tensors.len(),
            open: HashMap::default(),
            lifetimes: Vec::new(),
            orphan_frees: 0,
        }
    }

    /// The graph named `name`; `None` when nothing was allocated.
    pub(crate) fn finish(mut self, name: &str) -> Option<Imported> {
        if self.tensors.is_empty() {
            return None;
        }
        // The lists grew by doubling, their count unknown until the end: what they did not use
        // goes back now, so that in wasm (whose memory never shrinks) what comes next reuses it.
        self.tensors.shrink_to_fit();
        self.recorded.allocations.shrink_to_fit();
        Some(Imported {
            graph: Graph {
                name: name.into(),
                devices: self.devices,
                tensors: self.tensors,
                steps: self.steps,
                // Allocations and frees, not a dataflow graph: nothing can be recomputed.
                remat_candidates: Some(Vec::new()),
                ..Graph::default()
            },
            recorded: self.recorded,
            warnings: self.warnings,
        })
    }
}

impl DeviceEvents {
    /// The device as its tensors and steps name it: not at all on the graph's first device
    /// (the one whose tensors come first), which is what an absent device means. A snapshot of
    /// one device then holds no copy of its name per allocation and step.
    fn named(&self) -> Option<&str> {
        (self.first != 0).then_some(self.device.as_str())
    }

    /// Event `at` allocates `size` bytes at `address` on `stream`, from `stack`.
    pub(crate) fn alloc(
        &mut self,
        all: &mut Allocations,
        at: u64,
        address: u64,
        size: u64,
        stream: i64,
        stack: Arc<[Frame]>,
    ) {
        let t = all.tensors.len();
        self.open.entry(address).or_default().push(t);
        let site = all.stacks.site(&stack);
        all.tensors.push(Tensor {
            id: format!("alloc{t}").into(),
            name: Some(allocation_name(site.as_deref(), size, address, stream).into()),
            bytes: Some(size),
            device: self.named().map(Into::into),
            stack,
            ..Tensor::default()
        });
        all.recorded.allocations.push(Allocation {
            address,
            stream,
            allocated_at: at,
            freed_at: None,
        });
        self.lifetimes.push((at, NEVER_FREED));
    }

    /// Event `at` frees `address`: the size of the tensor it ends, if one was open there.
    pub(crate) fn free(&mut self, all: &mut Allocations, at: u64, address: u64) -> Option<u64> {
        let Some(list) = self.open.get_mut(&address).filter(|l| !l.is_empty()) else {
            self.orphan_frees += 1;
            return None;
        };
        let t = list.remove(0);
        let start = all.recorded.allocations[t].allocated_at;
        all.recorded.allocations[t].freed_at = Some(at);
        // An allocation freed at its own event lives one event.
        self.lifetimes[t - self.first].1 = at.max(start + 1);
        all.tensors[t].bytes
    }

    /// Ends the device after `events` events: its schedule, the warnings about what the trace
    /// cannot say, and the allocator's record. A device that allocated nothing is left out.
    pub(crate) fn finish(self, all: &mut Allocations, events: u64, record: DeviceRecord) {
        let named = self.named().map(str::to_string);
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
        let tensors = &all.tensors;
        let steps = steps_of_lifetimes(
            &lifetimes,
            |i| &tensors[first + i].id,
            &format!("{device} "),
            named.as_deref(),
        );
        all.steps.extend(steps);
        all.recorded.devices.push(RecordedDevice {
            device: device.clone(),
            events,
            reserved: record.reserved,
            reserved_traced: record.reserved_traced,
            allocated: record.allocated,
            segments: record.segments,
            ooms: record.ooms,
        });
        all.devices.push(Device {
            id: device,
            hardware_class: None,
        });
    }
}
