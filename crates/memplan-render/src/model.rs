//! The view model: a plan as the views show it.
//!
//! Everything here is a figure of memplan-core's, rearranged for reading: per buffer its tensor,
//! place and interval, the steps that write and read it, and the views into it; per position
//! what runs there; per device the pools, the usage curve and the peak; and the tensors that own
//! no bytes, with the reason, so no tensor of the dump disappears from the page.
//!
//! What no plan changes (names, the steps that write and read each tensor, the views, the
//! schedule) is gathered once into [`Labels`] and shared, reference-counted, by every view
//! model made from it: a flip re-plans a 2,000-tensor dump many times a second, and its view
//! model then allocates its placements, not ten thousand strings and lists.

pub mod columns;
mod packed;
mod steps;

pub use steps::{ListedStep, StepView, Steps};

use std::borrow::Cow;
use std::sync::Arc;

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use memplan_core::graph::{
    Frame, Graph, Id, NO_STACK, SiteGroup, Storage, TensorKind, group_by_site, site,
};
use memplan_core::lists::OptionalIndex;
use memplan_core::liveness::for_each_use;
use memplan_core::recorded::{Allocation, Oom, Recorded, Segment, at_positions};
use memplan_core::{DType, Liveness, Plan, PoolRole, ResolvedGraph};
use serde::{Deserialize, Serialize};

/// Indices of steps (into [`ViewModel::steps`]): a buffer's producers or consumers. Most
/// buffers have at most one of each (a snapshot's allocation: its allocation and its free), so
/// that one is held inline; longer lists share one allocation, behind a pointer of one word
/// (8 bytes a list in wasm where an `Arc<[u32]>`, two words, made 12). It reads as a slice.
#[derive(Clone, Default)]
pub enum StepIndices {
    #[default]
    None,
    One(u32),
    Many(Arc<Vec<u32>>),
}

impl std::ops::Deref for StepIndices {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        match self {
            StepIndices::None => &[],
            StepIndices::One(step) => std::slice::from_ref(step),
            StepIndices::Many(steps) => steps,
        }
    }
}

impl StepIndices {
    /// Appends `step`, unless it is the last already (the uses of a step are in schedule order).
    fn push(&mut self, step: u32) {
        match self {
            StepIndices::None => *self = StepIndices::One(step),
            StepIndices::One(last) if *last == step => {}
            StepIndices::One(last) => *self = StepIndices::Many(Arc::new(vec![*last, step])),
            StepIndices::Many(steps) => {
                if steps.last() != Some(&step) {
                    Arc::make_mut(steps).push(step);
                }
            }
        }
    }

    /// These, holding no more room than they use.
    fn fitted(mut self) -> StepIndices {
        if let StepIndices::Many(steps) = &mut self {
            Arc::make_mut(steps).shrink_to_fit();
        }
        self
    }
}

/// No allocation for none or one (a million tensors' labels are made so).
impl FromIterator<u32> for StepIndices {
    fn from_iter<I: IntoIterator<Item = u32>>(steps: I) -> Self {
        let mut steps = steps.into_iter();
        match (steps.next(), steps.next()) {
            (None, _) => StepIndices::None,
            (Some(step), None) => StepIndices::One(step),
            (Some(a), Some(b)) => {
                StepIndices::Many(Arc::new([a, b].into_iter().chain(steps).collect()))
            }
        }
    }
}

/// Equal when they list the same steps, however held.
impl PartialEq for StepIndices {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for StepIndices {}

impl std::fmt::Debug for StepIndices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for StepIndices {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

/// Read as a list, with no allocation for none or one (the page reads a million buffers' so).
impl<'de> Deserialize<'de> for StepIndices {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Steps;
        impl<'de> serde::de::Visitor<'de> for Steps {
            type Value = StepIndices;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of step indices")
            }

            /// Collected as [`FromIterator`] collects, the first error kept.
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<StepIndices, A::Error> {
                let mut failed = None;
                let steps = std::iter::from_fn(|| {
                    seq.next_element().unwrap_or_else(|e| {
                        failed = Some(e);
                        None
                    })
                })
                .collect();
                failed.map_or(Ok(steps), Err)
            }
        }
        deserializer.deserialize_seq(Steps)
    }
}

/// One planned buffer, as the views show it: its tensor, which every plan of the same labels
/// shares, and where and when this plan puts it. The worker sends hundreds of thousands of them
/// for a large snapshot, column by column ([`columns`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferView {
    /// What no plan changes of it. Shared, not copied: a buffer holds a pointer where it held
    /// a copy of every field (about 110 bytes in wasm), and a plan's buffers are one vector,
    /// which at millions of allocations was the largest block the worker asked for.
    pub tensor: Arc<TensorLabel>,
    pub dtype: Option<DType>,
    pub size: u64,
    /// Its alignment, as a power of two: its size rounded up to it is the bytes it holds
    /// ([`BufferView::occupied`]). The exponent is a byte where the bytes held are a word, and a
    /// snapshot's plan has millions of buffers.
    pub alignment_log2: u8,
    pub device: usize,
    pub pool: usize,
    /// The offset in its pool; its address in the device's memory follows from its pool's
    /// base ([`ViewModel::address`]).
    pub offset: u64,
    /// Live interval `[first, last]`; always-live buffers span every position.
    pub first: u32,
    pub last: u32,
    pub always_live: bool,
}

impl BufferView {
    /// Its size rounded up to its alignment: the bytes it holds.
    pub fn occupied(&self) -> u64 {
        let alignment = 1u64 << self.alignment_log2.min(63);
        memplan_core::graph::align_up(self.size, alignment).unwrap_or(u64::MAX)
    }
}

/// A buffer but for its tensor: its size and type, and where and when its plan puts it
/// ([`BufferView`]'s other fields). Read from a plan's buffers without making their tensors'
/// labels ([`BufferRows::place`]). Not a field of [`BufferView`]: held apart, the tensor's
/// pointer would not share its padding, 48 bytes a buffer in wasm where they are 40, and the
/// page holds millions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferPlace {
    pub dtype: Option<DType>,
    pub size: u64,
    pub alignment_log2: u8,
    pub device: usize,
    pub pool: usize,
    pub offset: u64,
    pub first: u32,
    pub last: u32,
    pub always_live: bool,
}

impl BufferPlace {
    /// The buffer of `tensor` placed here.
    pub fn with_tensor(self, tensor: Arc<TensorLabel>) -> BufferView {
        let BufferPlace {
            dtype,
            size,
            alignment_log2,
            device,
            pool,
            offset,
            first,
            last,
            always_live,
        } = self;
        BufferView {
            tensor,
            dtype,
            size,
            alignment_log2,
            device,
            pool,
            offset,
            first,
            last,
            always_live,
        }
    }
}

impl BufferView {
    /// All of it but its tensor.
    pub fn place(&self) -> BufferPlace {
        BufferPlace {
            dtype: self.dtype,
            size: self.size,
            alignment_log2: self.alignment_log2,
            device: self.device,
            pool: self.pool,
            offset: self.offset,
            first: self.first,
            last: self.last,
            always_live: self.always_live,
        }
    }
}

/// Buffers read one at a time, by index: the wire's columns are written from these
/// ([`columns::write`]), so a plan's buffers go to the page without being made whole first
/// ([`PlannedBuffers`]).
pub trait BufferRows {
    fn count(&self) -> usize;
    /// Buffer `k`'s tensor, borrowed.
    fn tensor(&self, k: usize) -> TensorRef<'_>;
    /// Buffer `k` but for its tensor.
    fn place(&self, k: usize) -> BufferPlace;

    /// Buffer `k`, made.
    fn buffer(&self, k: usize) -> BufferView {
        self.place(k).with_tensor(Arc::new(self.tensor(k).label()))
    }

    /// All of them, made.
    fn made(&self) -> Arc<[BufferView]> {
        (0..self.count()).map(|k| self.buffer(k)).collect()
    }
}

impl BufferRows for Arc<[BufferView]> {
    fn count(&self) -> usize {
        self.len()
    }

    fn tensor(&self, k: usize) -> TensorRef<'_> {
        self[k].tensor.borrowed()
    }

    fn place(&self, k: usize) -> BufferPlace {
        self[k].place()
    }

    fn buffer(&self, k: usize) -> BufferView {
        self[k].clone()
    }
}

/// A plan's buffers as the views show them, each made when it is read: its labels, liveness
/// and plan, shared. The worker writes a plan's answer from these: made whole, a snapshot's
/// buffers were 40 bytes each in wasm (180 MiB at 4.7 million), and their tensors' labels
/// another 76, held beside everything they are made of.
#[derive(Clone)]
pub struct PlannedBuffers {
    labels: Arc<Labels>,
    liveness: Arc<Liveness>,
    plan: Arc<Plan>,
}

impl PlannedBuffers {
    /// The buffers of `plan`, with `labels`: those of the graph and params `liveness` was
    /// derived from.
    pub fn new(labels: Arc<Labels>, liveness: Arc<Liveness>, plan: Arc<Plan>) -> Self {
        PlannedBuffers {
            labels,
            liveness,
            plan,
        }
    }
}

impl BufferRows for PlannedBuffers {
    fn count(&self) -> usize {
        self.liveness.problem.buffers.len()
    }

    fn tensor(&self, k: usize) -> TensorRef<'_> {
        self.labels.tensor(self.liveness.buffer_tensor[k] as usize)
    }

    fn place(&self, k: usize) -> BufferPlace {
        let problem = &self.liveness.problem;
        let buffer = &problem.buffers[k];
        let span = buffer.span(problem.positions);
        BufferPlace {
            dtype: buffer.dtype,
            size: buffer.size,
            alignment_log2: buffer.alignment_log2(),
            device: buffer.device(),
            pool: self.plan.placements[k].pool,
            offset: self.plan.placements[k].offset,
            first: span.first,
            last: span.last,
            always_live: buffer.is_always_live(),
        }
    }
}

/// What the views show of a buffer's tensor that no plan changes (flips and strategies move a
/// buffer, never these), as the page holds it: one per buffer it reads. The worker holds them
/// as [`Labels`]' columns and lends them as [`TensorRef`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TensorLabel {
    /// The tensor id: held inline up to 12 bytes in wasm (a snapshot's `a1234567`), where an
    /// `Arc<str>` was an allocation per tensor.
    pub id: Id,
    /// Its name where the dump gives one, shared with the graph (a snapshot's allocations share
    /// a few hundred); [`TensorLabel::display_name`] is what the views show.
    pub name: Option<Arc<str>>,
    pub kind: TensorKind,
    /// Steps (indices into [`ViewModel::steps`]) writing it or a view of it, and reading it, in
    /// schedule order.
    pub producers: StepIndices,
    pub consumers: StepIndices,
    /// The views that take its bytes, in tensor order.
    pub views: Arc<[ViewInto]>,
    /// The stack that allocated it: an index into [`ViewModel::stacks`].
    pub stack: OptionalIndex,
    /// Where the dump's source put it, if it says ([`TensorLabel::allocation`],
    /// [`TensorLabel::given_offset`]).
    pub source: Option<SourcePlace>,
}

/// A tensor's label, borrowed: from a [`TensorLabel`], or from the [`Labels`] of a plan's
/// buffers, which hold no label per tensor.
#[derive(Debug, Clone, Copy)]
pub struct TensorRef<'a> {
    identity: TensorIdentity,
    pub id: &'a Id,
    /// Its name, when the dump gives one that is not its id.
    pub name: Option<&'a Arc<str>>,
    pub kind: TensorKind,
    pub producers: &'a StepIndices,
    pub consumers: &'a StepIndices,
    pub views: &'a Arc<[ViewInto]>,
    pub stack: OptionalIndex,
    /// Its entry in the source's record.
    source: Option<(&'a Arc<SourceRecord>, u32)>,
}

impl<'a> TensorRef<'a> {
    /// Its name, else its id.
    pub fn display_name(self) -> &'a str {
        self.name.map_or(self.id, |name| name)
    }

    /// How the source's allocator made it (a PyTorch snapshot or trace).
    pub fn allocation(self) -> Option<&'a Allocation> {
        let (record, index) = self.source?;
        record.allocation(index)
    }

    /// Its offset in the plan the dump came with (XLA's, a minimalloc `offset` column).
    pub fn given_offset(self) -> Option<u64> {
        let (record, index) = self.source?;
        record.given_offset(index)
    }

    pub fn identity(self) -> TensorIdentity {
        self.identity
    }

    /// The label, made.
    pub fn label(self) -> TensorLabel {
        TensorLabel {
            id: self.id.clone(),
            name: self.name.cloned(),
            kind: self.kind,
            producers: self.producers.clone(),
            consumers: self.consumers.clone(),
            views: self.views.clone(),
            stack: self.stack,
            source: (self.source).map(|(record, index)| SourcePlace {
                record: record.clone(),
                index,
            }),
        }
    }
}

/// Which tensor a [`TensorRef`] lends, cheaply compared: the same for the same tensor of the
/// same labels (one [`Labels`], or one [`TensorLabel`]), whatever plan's buffer lends it: the
/// address of what lends it and the tensor's index there. Identities compare only while what
/// lends them lives, where it is (in an `Arc`, as plans share their labels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TensorIdentity(usize, usize);

/// Where the dump's source put a tensor: its entry in the [`SourceRecord`] its labels share.
/// A label holds a pointer and an index (8 bytes in wasm) where it held a copy of the entry (48).
#[derive(Clone)]
pub struct SourcePlace {
    record: Arc<SourceRecord>,
    index: u32,
}

/// What the dump's source did with its tensors, one entry per tensor it places: a dump records
/// its allocator or gives a plan, never both.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceRecord {
    /// How the source's allocator made them (a PyTorch snapshot or trace): the session's own
    /// [`Recorded::allocations`] (on the page, the ones its answer carries).
    Allocated(Arc<Vec<Allocation>>),
    /// Their offsets in the plan the dump came with (XLA's, a minimalloc `offset` column).
    Given(Vec<u64>),
}

impl SourceRecord {
    /// Entry `index`, if the record has it.
    pub fn place(self: &Arc<Self>, index: usize) -> Option<SourcePlace> {
        let len = match &**self {
            SourceRecord::Allocated(allocations) => allocations.len(),
            SourceRecord::Given(offsets) => offsets.len(),
        };
        let index = u32::try_from(index).ok().filter(|_| index < len)?;
        Some(SourcePlace {
            record: self.clone(),
            index,
        })
    }

    fn allocation(&self, index: u32) -> Option<&Allocation> {
        match self {
            SourceRecord::Allocated(allocations) => allocations.get(index as usize),
            SourceRecord::Given(_) => None,
        }
    }

    fn given_offset(&self, index: u32) -> Option<u64> {
        match self {
            SourceRecord::Given(offsets) => offsets.get(index as usize).copied(),
            SourceRecord::Allocated(_) => None,
        }
    }
}

/// Equal when they read the same, whichever record holds them.
impl PartialEq for SourcePlace {
    fn eq(&self, other: &Self) -> bool {
        let read = |p: &SourcePlace| {
            (
                p.record.allocation(p.index).copied(),
                p.record.given_offset(p.index),
            )
        };
        read(self) == read(other)
    }
}

impl Eq for SourcePlace {}

impl std::fmt::Debug for SourcePlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (record, index) = (&self.record, self.index);
        (record.allocation(index), record.given_offset(index)).fmt(f)
    }
}

impl TensorLabel {
    /// It, borrowed.
    pub fn borrowed(&self) -> TensorRef<'_> {
        TensorRef {
            identity: TensorIdentity(self as *const TensorLabel as usize, 0),
            id: &self.id,
            name: self.name.as_ref(),
            kind: self.kind,
            producers: &self.producers,
            consumers: &self.consumers,
            views: &self.views,
            stack: self.stack,
            source: (self.source.as_ref()).map(|p| (&p.record, p.index)),
        }
    }

    /// How the source's allocator made it (a PyTorch snapshot or trace).
    pub fn allocation(&self) -> Option<&Allocation> {
        let place = self.source.as_ref()?;
        place.record.allocation(place.index)
    }

    /// Its offset in the plan the dump came with (XLA's, a minimalloc `offset` column).
    pub fn given_offset(&self) -> Option<u64> {
        let place = self.source.as_ref()?;
        place.record.given_offset(place.index)
    }

    /// Its name, else its id.
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// Whose layout the arena map can show besides memplan's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutSource {
    /// The source's allocator (a PyTorch snapshot or trace): real addresses.
    Allocator,
    /// The plan the dump came with, by its planner (`XLA`).
    Given(Arc<str>),
}

impl LayoutSource {
    /// As the layout selector names it.
    pub fn name(&self) -> String {
        match self {
            LayoutSource::Allocator => "the allocator's".into(),
            LayoutSource::Given(planner) => format!("{planner}'s plan"),
        }
    }

    /// As the canvas's `data-layout` and the selector's value say it.
    pub fn key(&self) -> &'static str {
        match self {
            LayoutSource::Allocator => "allocator",
            LayoutSource::Given(_) => "given",
        }
    }
}

impl BufferView {
    /// Where the source put it: the allocator's address, or the given plan's offset.
    pub fn source_address(&self) -> Option<u64> {
        (self.tensor.allocation().map(|a| a.address)).or(self.tensor.given_offset())
    }
}

/// A stack that allocated tensors, with its allocation site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackView {
    /// Innermost first.
    pub frames: Arc<[Frame]>,
    /// The first frame in the user's code, as shown ([`memplan_core::graph::site`]).
    pub site: Arc<str>,
}

/// What the source's allocator did on one device, per position of the schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatorDeviceView {
    /// The reserved bytes at each position (the most in the position's window of events);
    /// empty where the record has none for the device (unknown, not zero).
    #[serde(with = "crate::model::packed::ints")]
    pub reserved: Vec<u64>,
    /// Whether `reserved` follows the trace; `false`: the one figure known, when the dump was
    /// written, at every position.
    pub reserved_traced: bool,
    /// The allocator's own allocated total at each position, when the trace gives it (empty
    /// otherwise): it counts memory allocated before the trace began.
    #[serde(with = "crate::model::packed::ints")]
    pub allocated: Vec<u64>,
    /// The segments at the dump, by address.
    pub segments: Vec<Segment>,
    /// Out-of-memory events, at their positions.
    pub ooms: Vec<(u32, Oom)>,
    /// How many events the device's trace has.
    pub events: u64,
}

impl AllocatorDeviceView {
    /// The most bytes reserved at once.
    pub fn reserved_peak(&self) -> u64 {
        self.reserved.iter().copied().max().unwrap_or(0)
    }
}

/// A view into a buffer's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewInto {
    pub tensor: String,
    pub name: String,
    /// Where it starts in the buffer.
    pub offset: u64,
    pub size: u64,
}

/// A loop of the schedule: one position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopView {
    pub id: String,
    pub position: u32,
    pub trip_count: Option<u64>,
    /// How many steps it runs.
    pub steps: u32,
}

/// Why a tensor of the dump owns no bytes in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unplanned {
    /// Fused away (or a view of a tensor that is).
    Elided,
    /// The source could not size it: the plan is incomplete.
    SizeUnknown,
    /// Never read or written, and not always-live.
    Unused,
    /// Recomputed at each use (a flip): no storage.
    Flipped,
}

impl Unplanned {
    pub fn name(self) -> &'static str {
        match self {
            Unplanned::Elided => "elided (fused away)",
            Unplanned::SizeUnknown => {
                "could not be sized: the plan leaves it out and is incomplete"
            }
            Unplanned::Unused => "never used",
            Unplanned::Flipped => "recomputed at its uses (a flip)",
        }
    }
}

/// A tensor that owns no bytes in the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnplannedTensor {
    pub tensor: Arc<str>,
    pub name: Arc<str>,
    pub reason: Unplanned,
}

impl DeviceView {
    /// The bytes under the usage curve that the view leaves out: the always-live ones when it
    /// shows the arena alone.
    pub fn floor(&self, arena_only: bool) -> u64 {
        if arena_only {
            self.always_live_bytes
        } else {
            0
        }
    }

    /// The footprint line of the view: the arena's pools alone, or every pool.
    pub fn shown_footprint(&self, arena_only: bool) -> u64 {
        if arena_only {
            self.arena_bytes
        } else {
            self.footprint_bytes
        }
    }
}

impl BufferView {
    pub fn lifetime(&self) -> u32 {
        self.last - self.first + 1
    }
}

/// How the source's allocator made an allocation, in words: its event, address and stream
/// (when not the default).
pub fn allocated_text(a: &Allocation) -> String {
    let stream = match a.stream {
        0 => String::new(),
        s => format!(" on stream {s}"),
    };
    format!(
        "allocated at event {} at 0x{:x}{stream}",
        a.allocated_at, a.address
    )
}

/// How an allocation's lifetime ended in the trace.
pub fn freed_text(a: &Allocation) -> String {
    match a.freed_at() {
        Some(event) => format!("freed at event {event}"),
        None => "still allocated at the end of the trace".to_string(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolView {
    pub role: PoolRole,
    pub bytes: u64,
    /// Where it starts in the device's memory.
    pub base: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceView {
    pub id: String,
    pub strategy: String,
    pub pools: Vec<PoolView>,
    /// The footprint: all pools.
    pub footprint_bytes: u64,
    /// The pools of buffers with live intervals, and the static pools of always-live ones.
    pub arena_bytes: u64,
    pub static_bytes: u64,
    /// The occupied bytes of the always-live buffers (the curve's floor).
    pub always_live_bytes: u64,
    pub lower_bound: u64,
    #[serde(with = "crate::model::packed::ints")]
    pub curve: Vec<u64>,
    pub peak_position: Option<u32>,
    /// Buffer indices live at the peak position.
    pub live_at_peak: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewModel {
    pub title: String,
    pub positions: u32,
    /// In position order (what runs at a position is named by
    /// [`ViewModel::position_label`], derived from them, never sent beside them).
    #[serde(with = "crate::model::columns::steps")]
    pub steps: Steps,
    pub loops: Arc<[LoopView]>,
    pub devices: Vec<DeviceView>,
    /// One per buffer of the plan, in canonical order.
    #[serde(with = "crate::model::columns")]
    pub buffers: Arc<[BufferView]>,
    /// The tensors that own no bytes and are not views of a buffer (those are listed under it).
    pub unplanned: Vec<UnplannedTensor>,
    /// The stacks buffers were allocated from (empty when the dump records none).
    pub stacks: Arc<[StackView]>,
    /// The source allocator's record per device (empty when the dump has none; `None` for a
    /// device its trace does not cover).
    pub allocator: Arc<[Option<AllocatorDeviceView>]>,
    /// Who made the plan the dump came with (`XLA`), when it came with one.
    pub given_planner: Option<Arc<str>>,
}

/// What the views show of a dump that no plan of it changes: per tensor its id, name and kind,
/// the steps that write and read it, and the views into it; the schedule's steps and loops.
/// Flips and strategies change where and when a buffer lives, never these, so one `Labels`
/// serves every plan of the same graph under the same params.
///
/// Held as columns, a tensor's label lent as a [`TensorRef`]: its id, name and kind read from
/// the graph, which the labels share, and its stack's index found by the stack's address; its
/// steps, 16 bytes in wasm, where a label made per tensor took 76 (341 MiB of a 965 MiB
/// snapshot's 4.7 million); its views and its source's entry only where it has them.
#[derive(Debug, Clone, PartialEq)]
pub struct Labels {
    graph: Arc<Graph>,
    /// Per tensor, the steps writing it or a view of it, and reading it.
    producers: Vec<StepIndices>,
    consumers: Vec<StepIndices>,
    /// The index into `stacks` of each stack the graph's tensors share, by its address (the
    /// graph, shared, keeps them where they are): a few hundred entries, where an index per
    /// tensor took 18 MiB of a snapshot's 4.7 million.
    stack_at: FxHashMap<usize, u32>,
    /// The views into each tensor some view takes, by tensor.
    views: Vec<(u32, Arc<[ViewInto]>)>,
    /// What the tensors no view takes lend (an `Arc` allocates even when empty).
    no_views: Arc<[ViewInto]>,
    source: Option<TensorSources>,
    /// The tensors fused away, in tensor order.
    elided: Vec<usize>,
    /// The tensors the source could not size.
    size_unknown: Vec<usize>,
    steps: Steps,
    loops: Arc<[LoopView]>,
    stacks: Arc<[StackView]>,
    allocator: Arc<[Option<AllocatorDeviceView>]>,
    /// Who made the plan the dump came with (its offsets are in `source`).
    given_planner: Option<Arc<str>>,
}

/// Where the dump's source put the tensors: its record, and each tensor's entry in it.
#[derive(Debug, Clone, PartialEq)]
struct TensorSources {
    record: Arc<SourceRecord>,
    /// Per tensor, its entry; `None`: tensor `t`'s is entry `t` (an allocator's record).
    entries: Option<Vec<OptionalIndex>>,
}

impl Labels {
    /// The labels of `graph` resolved as `resolved`. Each tensor's producers and consumers are
    /// taken from the steps here, not from the liveness's [`Uses`](memplan_core::liveness::Uses):
    /// a dump that lists its own remat candidates (a snapshot, a CSV) never makes those lists.
    pub fn new(graph: Arc<Graph>, resolved: &ResolvedGraph) -> Labels {
        let uses = |writes: bool| {
            let mut steps = vec![StepIndices::None; resolved.tensors.len()];
            for_each_use(resolved, writes, &mut |root, step| steps[root].push(step));
            steps.into_iter().map(StepIndices::fitted).collect()
        };
        let mut views: Vec<(u32, ViewInto)> = Vec::new();
        let mut elided = Vec::new();
        let mut size_unknown = Vec::new();
        for (t, rt) in resolved.tensors.iter().enumerate() {
            let tensor = &graph.tensors[t];
            match rt.storage {
                Storage::View { root } => views.push((
                    root,
                    ViewInto {
                        tensor: tensor.id.to_string(),
                        name: tensor.display_name().to_string(),
                        offset: resolved.view_offset(t).unwrap_or(0),
                        size: rt.bytes,
                    },
                )),
                Storage::Elided if tensor.size_unknown => size_unknown.push(t),
                Storage::Elided => elided.push(t),
                Storage::Owned => {}
            }
        }
        // In tensor order within each root: the sort is stable.
        views.sort_by_key(|&(root, _)| root);
        let views = (views.chunk_by(|a, b| a.0 == b.0))
            .map(|run| (run[0].0, run.iter().map(|(_, v)| v.clone()).collect()))
            .collect();
        let mut stacks: Vec<StackView> = Vec::new();
        // Each distinct stack once. An importer shares one allocation among the tensors of a
        // stack, so most are found by address; a stack met at a new address is looked up by
        // its frames (hashing a snapshot's 40-frame stacks per tensor took a tenth of a load).
        let mut stack_index: HashMap<&[Frame], u32> = HashMap::new();
        let mut stack_at: FxHashMap<usize, u32> = FxHashMap::default();
        for tensor in graph.tensors.iter().filter(|t| !t.stack.is_empty()) {
            stack_at
                .entry(tensor.stack.as_ptr() as usize)
                .or_insert_with(|| {
                    *stack_index.entry(&tensor.stack).or_insert_with(|| {
                        stacks.push(StackView {
                            frames: tensor.stack.clone(),
                            site: site(&tensor.stack)
                                .map_or_else(String::new, |f| f.to_string())
                                .into(),
                        });
                        stacks.len() as u32 - 1
                    })
                });
        }
        let mut loops = Vec::new();
        for (p, position) in resolved.positions.iter().enumerate() {
            if let Some(l) = position.loop_index() {
                loops.push(LoopView {
                    id: graph.loops[l].id.clone(),
                    position: p as u32,
                    trip_count: graph.loops[l].trip_count,
                    steps: position.steps().count() as u32,
                });
            }
        }
        let steps = Steps::of(&graph, resolved);
        Labels {
            producers: uses(true),
            consumers: uses(false),
            stack_at,
            views,
            no_views: Arc::new([]),
            source: None,
            elided,
            size_unknown,
            steps,
            loops: loops.into(),
            stacks: stacks.into(),
            allocator: Arc::new([]),
            given_planner: None,
            graph,
        }
    }

    /// Tensor `t`'s label, borrowed.
    pub fn tensor(&self, t: usize) -> TensorRef<'_> {
        let tensor = &self.graph.tensors[t];
        let views = (self
            .views
            .binary_search_by_key(&(t as u32), |&(root, _)| root))
        .map_or(&self.no_views, |k| &self.views[k].1);
        let source = self.source.as_ref().and_then(|s| {
            let index = match &s.entries {
                None => u32::try_from(t).ok(),
                Some(entries) => entries.get(t)?.get(),
            };
            Some((&s.record, index?))
        });
        TensorRef {
            identity: TensorIdentity(self as *const Labels as usize, t),
            id: &tensor.id,
            // A name that is the id says nothing more (and reads back as none).
            name: tensor.name.as_ref().filter(|name| ***name != *tensor.id),
            kind: tensor.kind,
            producers: &self.producers[t],
            consumers: &self.consumers[t],
            views,
            stack: OptionalIndex::new(match tensor.stack.is_empty() {
                true => None,
                false => self
                    .stack_at
                    .get(&(tensor.stack.as_ptr() as usize))
                    .copied(),
            }),
            source,
        }
    }

    /// Every tensor's label, borrowed, in tensor order.
    pub fn tensors(&self) -> impl Iterator<Item = TensorRef<'_>> {
        (0..self.graph.tensors.len()).map(|t| self.tensor(t))
    }

    /// These labels with the plan the dump came with: `offsets`, one per tensor (`None`: left
    /// to the runtime), by `planner`.
    pub fn with_given_plan(mut self, planner: &str, offsets: &[Option<u64>]) -> Labels {
        self.given_planner = Some(planner.into());
        let mut given = 0;
        let entries = (offsets.iter())
            .map(|offset| {
                OptionalIndex::new(offset.map(|_| {
                    given += 1;
                    given - 1
                }))
            })
            .collect();
        self.source = Some(TensorSources {
            record: Arc::new(SourceRecord::Given(
                offsets.iter().flatten().copied().collect(),
            )),
            entries: Some(entries),
        });
        self
    }

    /// These labels with what the source's allocator did (`recorded`, of the same graph), its
    /// series taken to the schedule's positions.
    pub fn with_recorded(mut self, resolved: &ResolvedGraph, recorded: &Recorded) -> Labels {
        let graph = self.graph.clone();
        let device_count = resolved.device_ids.len();
        let positions = resolved.positions.len();
        let mut allocator: Vec<Option<AllocatorDeviceView>> = vec![None; device_count];
        for r in &recorded.devices {
            let Some(d) = resolved.device_ids.iter().position(|id| *id == r.device) else {
                continue;
            };
            // The device's positions and the events they start at, side by side (a snapshot has
            // a position per allocation; as pairs they took a third more).
            let (own, times): (Vec<u32>, Vec<u64>) = (resolved.positions.iter().enumerate())
                .filter_map(|(p, position)| {
                    let step = position.first_step();
                    let time = graph.step_time(step)?;
                    (resolved.steps[step].device() == d).then_some((p as u32, time))
                })
                .unzip();
            // Per position of the whole schedule: the device's own positions from the series,
            // the others carrying the nearest value (before its first, after its last).
            let spread = |series: &[(u64, u64)]| -> Vec<u64> {
                if series.is_empty() {
                    return Vec::new();
                }
                let values = at_positions(series, &times);
                let mut out = Vec::with_capacity(positions);
                let mut k = 0;
                let mut last = values.first().copied().unwrap_or(series[0].1);
                for p in 0..positions {
                    if own.get(k).is_some_and(|&q| q as usize == p) {
                        last = values[k];
                        k += 1;
                    }
                    out.push(last);
                }
                out
            };
            let position_of = |event: u64| {
                let k = times.partition_point(|&t| t <= event);
                own.get(k.saturating_sub(1)).copied().unwrap_or(0)
            };
            allocator[d] = Some(AllocatorDeviceView {
                reserved: spread(&r.reserved),
                reserved_traced: r.reserved_traced,
                allocated: spread(&r.allocated),
                segments: r.segments.clone(),
                ooms: r.ooms.iter().map(|o| (position_of(o.at), *o)).collect(),
                events: r.events,
            });
        }
        self.allocator = allocator.into();
        if recorded.allocations.len() == graph.tensors.len() {
            self.source = Some(TensorSources {
                record: Arc::new(SourceRecord::Allocated(recorded.allocations.clone())),
                entries: None,
            });
        }
        self
    }

    fn unplanned(
        &self,
        tensors: &[usize],
        reason: Unplanned,
    ) -> impl Iterator<Item = UnplannedTensor> {
        tensors.iter().map(move |&t| UnplannedTensor {
            tensor: self.graph.tensors[t].id.as_str().into(),
            name: self.tensor(t).display_name().into(),
            reason,
        })
    }
}

impl ViewModel {
    pub fn new(
        graph: Arc<Graph>,
        resolved: &ResolvedGraph,
        liveness: Arc<Liveness>,
        plan: Arc<Plan>,
    ) -> Self {
        let labels = Arc::new(Labels::new(graph, resolved));
        Self::labelled(&PlannedBuffers::new(labels, liveness, plan))
    }

    /// The view model of `planned`'s plan, its buffers made.
    pub fn labelled(planned: &PlannedBuffers) -> Self {
        ViewModel {
            buffers: planned.made(),
            ..Self::labelled_apart(planned)
        }
    }

    /// [`ViewModel::labelled`] but for the buffers, left empty: the worker writes them from
    /// `planned` ([`columns::write`]) rather than make them.
    pub fn labelled_apart(planned: &PlannedBuffers) -> Self {
        let PlannedBuffers {
            labels,
            liveness,
            plan,
        } = planned;
        let problem = &liveness.problem;
        let bases = plan.pool_bases(problem);
        let unplanned = (labels.unplanned(&labels.size_unknown, Unplanned::SizeUnknown))
            .chain(labels.unplanned(&labels.elided, Unplanned::Elided))
            .chain(labels.unplanned(&liveness.flipped, Unplanned::Flipped))
            .chain(labels.unplanned(&liveness.unused, Unplanned::Unused))
            .collect();
        let devices = (plan.devices.iter().zip(&bases))
            .map(|(d, bases)| DeviceView {
                id: problem.device_ids[d.device].clone(),
                strategy: d.strategy.name().to_string(),
                pools: (d.pools.iter().zip(bases))
                    .map(|(p, &base)| PoolView {
                        role: p.role,
                        bytes: p.bytes,
                        base,
                    })
                    .collect(),
                footprint_bytes: d.footprint_bytes,
                arena_bytes: d.arena_bytes,
                static_bytes: d.static_bytes,
                always_live_bytes: d.usage.always_live_bytes,
                lower_bound: d.usage.lower_bound,
                curve: d.usage.curve.clone(),
                peak_position: d.usage.peak_position,
                live_at_peak: d.usage.live_at_peak.clone(),
            })
            .collect();
        ViewModel {
            title: labels.graph.name.clone(),
            positions: problem.positions,
            steps: labels.steps.clone(),
            loops: labels.loops.clone(),
            unplanned,
            devices,
            buffers: Arc::new([]),
            stacks: labels.stacks.clone(),
            allocator: labels.allocator.clone(),
            given_planner: labels.given_planner.clone(),
        }
    }

    /// The pool buffer `b` is in.
    pub fn pool_of(&self, b: &BufferView) -> Option<&PoolView> {
        self.devices.get(b.device).and_then(|d| d.pools.get(b.pool))
    }

    /// Where buffer `b` starts in its device's memory: its offset past its pool's base, the
    /// device's pools laid end to end.
    pub fn address(&self, b: &BufferView) -> u64 {
        (self.pool_of(b)).map_or(b.offset, |p| p.base.saturating_add(b.offset))
    }

    /// What the arena map can show besides memplan's plan; `None`: nothing.
    pub fn layout_source(&self) -> Option<LayoutSource> {
        if self.buffers.iter().any(|b| b.tensor.allocation().is_some()) {
            Some(LayoutSource::Allocator)
        } else {
            (self.given_planner.clone()).map(LayoutSource::Given)
        }
    }

    /// Indices of the buffers that match `query` (case-insensitive): their tensor id or name,
    /// the id or name of a view into them, the id, name or op of a step that writes or reads
    /// them, or a frame of the stack that allocated them (function, file, `file:line`). Every buffer for an empty query.
    pub fn search(&self, query: &str) -> Vec<usize> {
        let q = query.trim().to_lowercase();
        if q.is_empty() {
            return (0..self.buffers.len()).collect();
        }
        let hit = |s: &str| s.to_lowercase().contains(&q);
        let step_hits: Vec<bool> = (self.steps.iter())
            .map(|s| hit(&s.id) || (s.name != s.id && hit(&s.name)) || hit(s.op))
            .collect();
        let step_hit = |s: &u32| step_hits.get(*s as usize).copied().unwrap_or(false);
        // A frame matches by its function, its file's whole path, or `file:line`.
        let stack_hits: Vec<bool> = (self.stacks.iter())
            .map(|st| {
                st.frames.iter().any(|f| {
                    hit(&f.function)
                        || hit(&f.file)
                        || hit(&format!("{}:{}", f.file_name(), f.line))
                })
            })
            .collect();
        (0..self.buffers.len())
            .filter(|&b| {
                let x = &self.buffers[b];
                hit(&x.tensor.id)
                    || hit(x.tensor.display_name())
                    || x.tensor
                        .views
                        .iter()
                        .any(|v| hit(&v.tensor) || hit(&v.name))
                    || x.tensor.producers.iter().any(step_hit)
                    || x.tensor.consumers.iter().any(step_hit)
                    || x.tensor.stack.get().is_some_and(|k| stack_hits[k as usize])
            })
            .collect()
    }

    /// The step ids of `steps` (indices), for lists.
    pub fn step_ids(&self, steps: &[u32]) -> Vec<Cow<'_, str>> {
        (steps.iter())
            .filter_map(|&s| self.steps.get(s as usize).map(|s| s.id))
            .collect()
    }

    /// The loop running at `position`, if one does.
    pub fn loop_at(&self, position: u32) -> Option<&LoopView> {
        self.loops.iter().find(|l| l.position == position)
    }

    /// The steps running at `position`, in schedule order.
    pub fn steps_at(&self, position: u32) -> impl Iterator<Item = (u32, StepView<'_>)> {
        (self.steps.at_position(position)).filter_map(|s| Some((s as u32, self.steps.get(s)?)))
    }

    /// The tensors live at the peak of `device`, largest first (ties in canonical order), each
    /// with why it is still alive there.
    pub fn peak_rows(&self, device: usize) -> Vec<PeakRow> {
        let Some(d) = self.devices.get(device) else {
            return Vec::new();
        };
        let Some(peak) = d.peak_position else {
            return Vec::new();
        };
        let mut rows: Vec<PeakRow> = d
            .live_at_peak
            .iter()
            .map(|&b| {
                let x = &self.buffers[b];
                let alive = if x.always_live {
                    Alive::AlwaysLive
                } else if let Some(a) = x.tensor.allocation() {
                    Alive::UntilFreed {
                        event: a.freed_at().map(u64::from),
                        wait: x.last - peak,
                    }
                } else {
                    // The last use is at its last position: the last reader there, else the
                    // last writer.
                    let at_last = |steps: &[u32]| {
                        steps
                            .iter()
                            .rev()
                            .find(|&&s| self.steps.position(s as usize) == Some(x.last))
                            .copied()
                    };
                    match (at_last(&x.tensor.consumers), at_last(&x.tensor.producers)) {
                        (Some(step), _) => Alive::UntilRead {
                            step,
                            wait: x.last - peak,
                        },
                        (None, Some(step)) => Alive::UntilWritten {
                            step,
                            wait: x.last - peak,
                        },
                        (None, None) => Alive::UntilPosition {
                            position: x.last,
                            wait: x.last - peak,
                        },
                    }
                };
                PeakRow {
                    buffer: b,
                    bytes: x.occupied(),
                    producer: x.tensor.producers.first().copied(),
                    alive,
                }
            })
            .collect();
        rows.sort_by_key(|r| (std::cmp::Reverse(r.bytes), r.buffer));
        rows
    }

    /// The tensors live at the peak of `device` grouped by allocation site, most bytes first:
    /// empty when the dump records no stacks.
    pub fn peak_sites(&self, device: usize) -> Vec<SiteGroup> {
        if self.stacks.is_empty() {
            return Vec::new();
        }
        let Some(d) = self.devices.get(device) else {
            return Vec::new();
        };
        let no_stack: &[Frame] = &[];
        group_by_site(d.live_at_peak.iter().map(|&b| {
            let x = &self.buffers[b];
            let stack = x
                .tensor
                .stack
                .get()
                .map_or(no_stack, |k| &self.stacks[k as usize].frames[..]);
            (stack, x.occupied(), b)
        }))
    }

    /// Whether the always-live bytes of `device` dwarf its arena (twice it or more): then the
    /// views show the arena alone by default, where the plan makes its choices. An empty arena
    /// is not dwarfed: the views would show nothing.
    pub fn always_live_dwarfs_arena(&self, device: usize) -> bool {
        self.devices
            .get(device)
            .is_some_and(|d| d.arena_bytes > 0 && d.static_bytes >= d.arena_bytes.saturating_mul(2))
    }

    /// The timeline's rows: the buffers of `device` matching `query`, in `order`; without the
    /// always-live ones when `arena_only`.
    pub fn rows(
        &self,
        device: usize,
        query: &str,
        order: RowOrder,
        arena_only: bool,
    ) -> Vec<usize> {
        let mut rows: Vec<usize> = self
            .search(query)
            .into_iter()
            .filter(|&b| self.buffers[b].device == device)
            .filter(|&b| !(arena_only && self.buffers[b].always_live))
            .collect();
        order.sort(self, &mut rows);
        rows
    }

    /// What runs at `position`: its loop (`loop <id>`), else its first step's id. Derived from
    /// the steps, which are in position order, so the answer never carries a label per
    /// position beside them (a snapshot has a position per allocation).
    pub fn position_label(&self, position: u32) -> Option<Cow<'_, str>> {
        if let Some(l) = self.loops.iter().find(|l| l.position == position) {
            return Some(Cow::Owned(format!("loop {}", l.id)));
        }
        let first = self.steps.at_position(position).next()?;
        self.steps.get(first).map(|s| s.id)
    }

    /// The device a view opens on when none is asked for: the one with the largest footprint
    /// (the first of equals), where the memory a reader came for is. A profiler trace's CPU
    /// device often holds a few bytes beside a GPU's gigabytes, and is listed first.
    pub fn main_device(&self) -> usize {
        (self.devices.iter().enumerate())
            .rev()
            .max_by_key(|(_, d)| d.footprint_bytes)
            .map_or(0, |(i, _)| i)
    }

    /// The device a link names by `id`, else [`ViewModel::main_device`].
    pub fn device_or_main(&self, id: Option<&str>) -> usize {
        (id.and_then(|id| self.devices.iter().position(|d| d.id == id)))
            .unwrap_or_else(|| self.main_device())
    }

    /// `device`, or the last device when it is out of range (a link may name any number).
    pub fn clamp_device(&self, device: usize) -> usize {
        device.min(self.devices.len().saturating_sub(1))
    }

    /// The index of the buffer of tensor `id`.
    pub fn buffer_of(&self, id: &str) -> Option<usize> {
        self.buffers.iter().position(|b| *b.tensor.id == *id)
    }
}

/// A tensor live at the peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeakRow {
    pub buffer: usize,
    /// Its occupied bytes: its share of the lower bound.
    pub bytes: u64,
    /// The first step that writes it.
    pub producer: Option<u32>,
    pub alive: Alive,
}

/// One part of a device's footprint, by what fills it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FootprintPart {
    pub name: String,
    pub bytes: u64,
    /// Bytes no tensor uses: fragmentation or padding.
    pub unused: bool,
}

impl ViewModel {
    /// The footprint of `device`, whole and by what fills it: the always-live pools by kind
    /// (params, optimizer state, inputs, outputs, constants, held intermediates such as a KV cache) and their
    /// padding, then the most bytes the arena holds live at once and its fragmentation. The parts add up
    /// to the footprint, whatever the views show.
    pub fn footprint_parts(&self, device: usize) -> Vec<FootprintPart> {
        let Some(d) = self.devices.get(device) else {
            return Vec::new();
        };
        let mut by_kind: Vec<(TensorKind, u64)> = Vec::new();
        for b in self
            .buffers
            .iter()
            .filter(|b| b.device == device && b.always_live)
        {
            match by_kind.iter_mut().find(|(k, _)| *k == b.tensor.kind) {
                Some((_, bytes)) => *bytes = bytes.saturating_add(b.occupied()),
                None => by_kind.push((b.tensor.kind, b.occupied())),
            }
        }
        by_kind.sort_by_key(|&(kind, bytes)| (std::cmp::Reverse(bytes), kind));
        let part = |name: String, bytes: u64, unused: bool| FootprintPart {
            name,
            bytes,
            unused,
        };
        let mut parts: Vec<FootprintPart> = by_kind
            .into_iter()
            .map(|(kind, bytes)| {
                let what = match kind {
                    TensorKind::Intermediate | TensorKind::Scratch => {
                        "held tensors (caches, state)"
                    }
                    TensorKind::Param => "params",
                    TensorKind::OptimizerState => "optimizer state",
                    TensorKind::Input => "inputs",
                    TensorKind::Output => "outputs",
                    TensorKind::Constant => "constants",
                };
                part(format!("always-live {what}"), bytes, false)
            })
            .collect();
        let padding = d.static_bytes.saturating_sub(d.always_live_bytes);
        if padding > 0 {
            parts.push(part("always-live pools' padding".into(), padding, true));
        }
        let arena_live = d.lower_bound.saturating_sub(d.always_live_bytes);
        parts.push(part("arena: most live at once".into(), arena_live, false));
        let fragmentation = d.arena_bytes.saturating_sub(arena_live);
        if fragmentation > 0 {
            parts.push(part("arena: fragmentation".into(), fragmentation, true));
        }
        parts.retain(|p| p.bytes > 0);
        parts
    }
}

/// The live bytes of a device over the schedule by allocation site: what [`ViewModel::site_series`]
/// gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteSeries {
    /// The sites, most bytes at the peak first; the last is the rest summed when there are more.
    pub sites: Vec<String>,
    /// Each site's bytes at the peak.
    pub at_peak: Vec<u64>,
    /// The positions shown: every position, or in a long schedule one per column, the one
    /// where the live bytes are most (so no peak is lost).
    pub positions: Vec<u32>,
    /// Per site, its live bytes at each of `positions`.
    pub values: Vec<Vec<u64>>,
}

/// What the rest of the sites are called in a [`SiteSeries`].
pub const OTHER_SITES: &str = "other sites";

impl ViewModel {
    /// The live bytes of `device` at each position by allocation site: the `most` sites with
    /// the most bytes at the peak, then the rest summed, at most `columns` positions (the
    /// busiest of each run of positions). `None` when the dump records no stacks.
    pub fn site_series(&self, device: usize, most: usize, columns: usize) -> Option<SiteSeries> {
        let groups = self.peak_sites(device);
        if groups.is_empty() {
            return None;
        }
        let shown = groups.len().min(most.max(1));
        let mut sites: Vec<String> = groups[..shown].iter().map(|g| g.site.clone()).collect();
        let mut at_peak: Vec<u64> = groups[..shown].iter().map(|g| g.bytes).collect();
        if groups.len() > shown {
            sites.push(OTHER_SITES.to_string());
            at_peak.push(groups[shown..].iter().map(|g| g.bytes).sum());
        }
        let index: HashMap<&str, usize> = sites[..shown]
            .iter()
            .enumerate()
            .map(|(k, s)| (s.as_str(), k))
            .collect();
        let rest = sites.len() - 1;
        let n = self.positions as usize;
        // Per site, a difference array over positions.
        let mut deltas = vec![vec![0i128; n + 1]; sites.len()];
        for b in self
            .buffers
            .iter()
            .filter(|b| b.device == device && b.occupied() > 0)
        {
            let site = b
                .tensor
                .stack
                .get()
                .map_or(NO_STACK, |k| &self.stacks[k as usize].site);
            let k = index.get(site).copied().unwrap_or(rest);
            let (first, last) = if b.always_live {
                (0, n.saturating_sub(1))
            } else {
                (b.first as usize, b.last as usize)
            };
            deltas[k][first.min(n)] += i128::from(b.occupied());
            deltas[k][(last + 1).min(n)] -= i128::from(b.occupied());
        }
        let full: Vec<Vec<u64>> = deltas
            .into_iter()
            .map(|d| {
                let mut live = 0i128;
                d[..n]
                    .iter()
                    .map(|x| {
                        live += x;
                        live.max(0) as u64
                    })
                    .collect()
            })
            .collect();
        let total = |p: usize| full.iter().map(|s| s[p]).fold(0u64, u64::saturating_add);
        let width = n.div_ceil(columns.max(1)).max(1);
        let positions: Vec<u32> = (0..n)
            .step_by(width)
            .map(|start| {
                let end = (start + width).min(n);
                (start..end)
                    .max_by_key(|&p| (total(p), std::cmp::Reverse(p)))
                    .unwrap_or(start) as u32
            })
            .collect();
        let values = full
            .iter()
            .map(|s| positions.iter().map(|&p| s[p as usize]).collect())
            .collect();
        Some(SiteSeries {
            sites,
            at_peak,
            positions,
            values,
        })
    }
}

/// Why a tensor is still alive at the peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alive {
    /// It outlives the schedule (an input, a weight, an output, held).
    AlwaysLive,
    /// Step `step` reads it last, `wait` positions after the peak.
    UntilRead { step: u32, wait: u32 },
    /// Nothing reads it after the peak; step `step` writes it last, `wait` positions after.
    UntilWritten { step: u32, wait: u32 },
    /// Its interval ends at `position` (a minimalloc buffer: no steps), `wait` after the peak.
    UntilPosition { position: u32, wait: u32 },
    /// The source's allocator freed it at trace event `event`, `wait` positions after the peak;
    /// `None`: it was still allocated when the trace ended.
    UntilFreed { event: Option<u64>, wait: u32 },
}

/// How the timeline orders its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowOrder {
    #[default]
    Start,
    Size,
    Lifetime,
}

impl RowOrder {
    pub const ALL: [RowOrder; 3] = [RowOrder::Start, RowOrder::Size, RowOrder::Lifetime];

    pub fn name(self) -> &'static str {
        match self {
            RowOrder::Start => "start",
            RowOrder::Size => "size",
            RowOrder::Lifetime => "lifetime",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.name() == s)
    }

    /// Sorts buffer indices: by start, by decreasing size, or by decreasing lifetime; ties by
    /// canonical order.
    pub fn sort(self, model: &ViewModel, rows: &mut [usize]) {
        let b = &model.buffers;
        match self {
            RowOrder::Start => rows.sort_by_key(|&i| (b[i].first, b[i].last, i)),
            RowOrder::Size => rows.sort_by_key(|&i| (std::cmp::Reverse(b[i].size), i)),
            RowOrder::Lifetime => {
                rows.sort_by_key(|&i| (std::cmp::Reverse(b[i].lifetime()), b[i].first, i))
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The view model of a dump planned with the default options.
    pub(crate) fn model_of(dump: &str) -> ViewModel {
        let graph = memplan_formats::json::parse(dump).unwrap();
        let resolved = graph.resolve().unwrap();
        let liveness = memplan_core::analyze(&graph, &resolved);
        let plan =
            memplan_core::plan(&liveness.problem, &memplan_core::PlanOptions::default()).unwrap();
        ViewModel::new(
            Arc::new(graph),
            &resolved,
            Arc::new(liveness),
            Arc::new(plan),
        )
    }

    fn example() -> ViewModel {
        model_of(include_str!(
            "../../../static/examples/transformer-decode.json"
        ))
    }

    /// A snapshot's steps are kept as its events are, and each is named and placed as the graph
    /// names and places it, through the wire too (where they read back listed).
    #[test]
    fn a_snapshots_steps_are_its_events_named_as_the_graph_names_them() {
        let bytes = include_bytes!("../../../tests/data/torch/magma27_memory_snapshot.pickle");
        let graph = memplan_formats::torch::parse(bytes).unwrap().graph;
        let resolved = graph.resolve().unwrap();
        let liveness = memplan_core::analyze(&graph, &resolved);
        let plan =
            memplan_core::plan(&liveness.problem, &memplan_core::PlanOptions::default()).unwrap();
        let m = ViewModel::new(
            Arc::new(graph.clone()),
            &resolved,
            Arc::new(liveness),
            Arc::new(plan),
        );
        // The graph's times themselves, shared, not a copy (a snapshot has millions).
        let steps::StepParts::Events(_, times) = m.steps.parts() else {
            panic!("a snapshot's steps are its events");
        };
        assert!(std::ptr::eq(times, &*graph.events.as_ref().unwrap().times));
        let back: ViewModel = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert!(back.steps.iter().eq(m.steps.iter()));
        assert_eq!(m.steps.len(), graph.step_count());
        for (p, position) in resolved.positions.iter().enumerate() {
            for s in position.steps() {
                let step = m.steps.get(s).unwrap();
                assert_eq!(&*step.id, graph.step(s).id.as_str());
                assert_eq!((&*step.name, step.op), (&*step.id, ""));
                assert_eq!(step.position, p as u32);
            }
        }
    }

    /// A recorded dump (`bytes`, named `name`), its liveness, and its labels with its record.
    fn recorded_labels(bytes: &[u8], name: &str) -> (memplan_formats::Loaded, Liveness, Labels) {
        let loaded = memplan_formats::load(bytes, name).unwrap();
        let (graph, resolved) = (&loaded.graph, &loaded.resolved);
        let liveness = memplan_core::analyze(graph, resolved);
        let recorded = loaded.recorded.as_ref().unwrap();
        let labels =
            Labels::new(Arc::new(graph.clone()), resolved).with_recorded(resolved, recorded);
        (loaded, liveness, labels)
    }

    /// A plan's buffers written from the plan (the worker's answer) are, byte for byte, the
    /// buffers made and then written: a snapshot's, with its record of allocations, and a
    /// training step's, with views and steps of several uses.
    #[test]
    fn buffers_written_from_the_plan_are_written_as_the_buffers_made() {
        let snapshot = include_bytes!("../../../tests/data/torch/magma27_memory_snapshot.pickle");
        let (_, liveness, labels) = recorded_labels(snapshot, "snapshot.pickle");
        let training = include_str!("../../../static/examples/transformer-training.json");
        let graph = memplan_formats::json::parse(training).unwrap();
        let resolved = graph.resolve().unwrap();
        let dumps = [
            (labels, liveness),
            (
                Labels::new(Arc::new(graph.clone()), &resolved),
                memplan_core::analyze(&graph, &resolved),
            ),
        ];
        for (labels, liveness) in dumps {
            let plan = memplan_core::plan(&liveness.problem, &Default::default()).unwrap();
            let problem = &liveness.problem;
            // What each buffer made reads, from the liveness and the plan themselves.
            let expected: Vec<_> = (problem.buffers.iter().enumerate())
                .map(|(k, b)| {
                    let span = b.span(problem.positions);
                    let t = liveness.buffer_tensor[k] as usize;
                    let placed = (plan.placements[k].pool, plan.placements[k].offset);
                    (
                        labels.tensor(t).id.clone(),
                        b.size,
                        placed,
                        span.first,
                        span.last,
                    )
                })
                .collect();
            let planned = PlannedBuffers::new(Arc::new(labels), Arc::new(liveness), Arc::new(plan));
            let made = planned.made();
            assert!(made.len() > 100);
            let read: Vec<_> = (made.iter())
                .map(|b| {
                    (
                        b.tensor.id.clone(),
                        b.size,
                        (b.pool, b.offset),
                        b.first,
                        b.last,
                    )
                })
                .collect();
            assert_eq!(read, expected);
            let write = |rows: &dyn BufferRows| {
                let mut out = Vec::new();
                columns::write(rows, &mut serde_json::Serializer::new(&mut out)).unwrap();
                out
            };
            assert_eq!(write(&planned), write(&made));
            let back = columns::deserialize::<_, Arc<[BufferView]>>(
                &mut serde_json::Deserializer::from_slice(&write(&planned)),
            )
            .unwrap();
            assert_eq!(back, made);
        }
    }

    /// A snapshot's labels point into the session's record of its allocations, each at its
    /// own tensor's, where they held a copy; and the page reads them back as they were.
    #[test]
    fn a_snapshots_labels_point_into_its_record_of_allocations() {
        let bytes = include_bytes!("../../../tests/data/torch/magma27_memory_snapshot.pickle");
        let (loaded, liveness, labels) = recorded_labels(bytes, "snapshot.pickle");
        let recorded = loaded.recorded.as_ref().unwrap();
        assert_eq!(labels.tensors().count(), recorded.allocations.len());
        for (label, allocation) in labels.tensors().zip(recorded.allocations.iter()) {
            assert!(std::ptr::eq(label.allocation().unwrap(), allocation));
            assert_eq!(label.given_offset(), None);
        }
        let plan =
            memplan_core::plan(&liveness.problem, &memplan_core::PlanOptions::default()).unwrap();
        let planned = PlannedBuffers::new(Arc::new(labels), Arc::new(liveness), Arc::new(plan));
        let m = ViewModel::labelled(&planned);
        let back: ViewModel = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back.buffers, m.buffers);
        let addresses = |m: &ViewModel| -> Vec<Option<u64>> {
            m.buffers.iter().map(BufferView::source_address).collect()
        };
        assert!(addresses(&back).iter().all(Option::is_some));
        assert_eq!(addresses(&back), addresses(&m));
    }

    /// A profiler trace's allocator record, per device, at each position of the whole
    /// schedule: at the device's own positions the most its series holds over the position's
    /// window of events, elsewhere the value of its last own position before (its first, before
    /// any), as a slow walk over the series finds them.
    #[test]
    fn each_devices_allocator_record_is_spread_over_the_schedules_positions() {
        let bytes = include_bytes!("../../../tests/data/torch-trace/df_index_resolver.json.gz");
        let (loaded, _, labels) = recorded_labels(bytes, "trace.json.gz");
        let (graph, resolved) = (&loaded.graph, &loaded.resolved);
        let recorded = loaded.recorded.as_ref().unwrap();
        let positions = resolved.positions.len();
        let mut checked = 0;
        for r in &recorded.devices {
            let d = resolved
                .device_ids
                .iter()
                .position(|id| *id == r.device)
                .unwrap();
            let view = labels.allocator[d].as_ref().unwrap();
            let own: Vec<(usize, u64)> = (0..positions)
                .filter_map(|p| {
                    let step = resolved.positions.at(p).first_step();
                    let time = graph.step_time(step)?;
                    (resolved.steps[step].device() == d).then_some((p, time))
                })
                .collect();
            for (series, spread) in [
                (&r.reserved, &view.reserved),
                (&r.allocated, &view.allocated),
            ] {
                if series.is_empty() {
                    assert!(spread.is_empty());
                    continue;
                }
                assert_eq!(spread.len(), positions);
                let expected = |k: usize| {
                    let from = if k == 0 { 0 } else { own[k].1 };
                    let until = own.get(k + 1).map_or(u64::MAX, |o| o.1);
                    let before = (series.iter().rev())
                        .find(|s| s.0 <= from)
                        .map_or(0, |s| s.1);
                    (series.iter())
                        .filter(|s| from <= s.0 && s.0 < until)
                        .fold(before, |most, s| most.max(s.1))
                };
                // A few hundred positions, the last among them: the walk is slow.
                let sampled = (0..positions)
                    .step_by(positions / 300 + 1)
                    .chain([positions - 1]);
                for p in sampled {
                    let k = own.iter().rposition(|o| o.0 <= p).unwrap_or(0);
                    assert_eq!(spread[p], expected(k), "{} position {p}", r.device);
                    checked += 1;
                }
            }
        }
        assert!(checked > 0);
    }

    #[test]
    fn labels_list_each_tensors_steps_as_the_uses_do() {
        // Views (a step writing a root twice through them), a step reading what it writes,
        // and the bundled examples.
        let views = r#"{"memplan": 1, "tensors": [
            {"id": "a", "bytes": 64}, {"id": "v", "bytes": 32, "view_of": "a"},
            {"id": "w", "bytes": 32, "view_of": "a", "view_offset": 32}, {"id": "b", "bytes": 8},
            {"id": "c", "bytes": 8}],
          "steps": [{"id": "s", "writes": ["a", "v", "w"]}, {"id": "t", "reads": ["v", "b"], "writes": ["b"]},
                    {"id": "u", "reads": ["w", "a", "b"], "writes": ["c"]}]}"#;
        for dump in [
            views,
            include_str!("../../../static/examples/transformer-training.json"),
            include_str!("../../../static/examples/transformer-decode.json"),
            include_str!("../../../static/examples/convnet-training.json"),
            include_str!("../../../static/examples/mlp-training.json"),
        ] {
            let graph = memplan_formats::json::parse(dump).unwrap();
            let resolved = graph.resolve().unwrap();
            let uses = memplan_core::liveness::Uses::of(&resolved);
            let labels = Labels::new(Arc::new(graph.clone()), &resolved);
            for (t, label) in labels.tensors().enumerate() {
                assert_eq!(&**label.producers, &uses.producers[t], "{}", label.id);
                assert_eq!(&**label.consumers, &uses.consumers[t], "{}", label.id);
            }
            assert!(labels.tensors().any(|l| l.consumers.len() > 1));
        }
    }

    #[test]
    fn a_label_holds_the_graphs_name_and_no_name_that_is_its_id() {
        let dump = r#"{"memplan": 1, "tensors": [
            {"id": "a", "bytes": 64, "name": "attention scores"},
            {"id": "b", "bytes": 64, "name": "b"},
            {"id": "c", "bytes": 64},
            {"id": "d", "bytes": 64}],
          "steps": [{"id": "s", "writes": ["a", "b", "c"]},
                    {"id": "t", "reads": ["a", "b", "c"], "writes": ["d"]}]}"#;
        let graph = memplan_formats::json::parse(dump).unwrap();
        let resolved = graph.resolve().unwrap();
        let labels = Labels::new(Arc::new(graph.clone()), &resolved);
        let names: Vec<&str> = labels.tensors().map(|t| t.display_name()).collect();
        assert_eq!(names, ["attention scores", "b", "c", "d"]);
        // The graph's own allocation, not a copy; none where the name is the id.
        let given = labels.tensor(0).name.unwrap();
        assert!(Arc::ptr_eq(given, graph.tensors[0].name.as_ref().unwrap()));
        assert_eq!(labels.tensor(1).name, None);
        assert_eq!(labels.tensor(2).name, None);
    }

    #[test]
    fn addresses_and_bytes_held_follow_from_the_pools_and_alignments() {
        let dump = include_str!("../../../static/examples/transformer-training.json");
        let graph = memplan_formats::json::parse(dump).unwrap();
        let resolved = graph.resolve().unwrap();
        let liveness = memplan_core::analyze(&graph, &resolved);
        let plan = memplan_core::plan(&liveness.problem, &Default::default()).unwrap();
        let (liveness, plan) = (Arc::new(liveness), Arc::new(plan));
        let model = ViewModel::new(Arc::new(graph), &resolved, liveness.clone(), plan.clone());
        let problem = &liveness.problem;
        let addresses = plan.device_offsets(problem);
        for (b, view) in model.buffers.iter().enumerate() {
            assert_eq!(model.address(view), addresses[b], "{}", view.tensor.id);
            assert_eq!(view.occupied(), problem.buffers[b].occupied_size());
        }
        // Pools past the first start past 0, and some sizes round up: neither is the identity.
        assert!(model.buffers.iter().any(|b| model.address(b) != b.offset));
        assert!(model.buffers.iter().any(|b| b.occupied() != b.size));
    }

    /// Plans under one labels lend each buffer's tensor with one identity (what an answer
    /// sent against the last one finds its earlier buffers by), and labels of their own lend
    /// others; the labels made read the same either way.
    #[test]
    fn plans_under_one_labels_lend_each_tensor_with_one_identity() {
        let dump = include_str!("../../../static/examples/transformer-training.json");
        let graph = Arc::new(memplan_formats::json::parse(dump).unwrap());
        let resolved = graph.resolve().unwrap();
        let liveness = Arc::new(memplan_core::analyze(&graph, &resolved));
        let labels = Arc::new(Labels::new(graph.clone(), &resolved));
        let planned = |labels: &Arc<Labels>, strategy| {
            let options = memplan_core::PlanOptions {
                strategy: memplan_core::StrategyChoice::One(strategy),
                ..Default::default()
            };
            let plan = memplan_core::plan(&liveness.problem, &options).unwrap();
            PlannedBuffers::new(labels.clone(), liveness.clone(), Arc::new(plan))
        };
        let first_fit = planned(&labels, memplan_core::Strategy::FirstFit);
        let bump = planned(&labels, memplan_core::Strategy::Bump);
        let apart = planned(
            &Arc::new(Labels::new(graph.clone(), &resolved)),
            memplan_core::Strategy::Bump,
        );
        assert_ne!(first_fit.made(), bump.made());
        assert_eq!(apart.made(), bump.made());
        assert!(first_fit.count() > 100);
        for k in 0..first_fit.count() {
            let (a, b, c) = (first_fit.tensor(k), bump.tensor(k), apart.tensor(k));
            assert_eq!(a.identity(), b.identity(), "{}", a.id);
            assert_ne!(a.identity(), c.identity(), "{}", a.id);
            assert_eq!(a.label(), c.label());
            // A made label lends itself with an identity of its own.
            let made = a.label();
            assert_ne!(made.borrowed().identity(), a.identity());
            assert_eq!(made.borrowed().identity(), made.borrowed().identity());
        }
        // A buffer is where and when it lives, and a pointer to its tensor: a copy of the
        // tensor's labels in each (its id, name, steps, views, allocation) was 168 bytes in
        // wasm, and a plan's buffers are one block, the largest a large snapshot's views ask for.
        assert!(std::mem::size_of::<BufferView>() <= 56);
        // Where the source put a tensor is a pointer to the record its labels share and an
        // index there, not a copy of its entry (an allocation is five words).
        assert_eq!(
            std::mem::size_of::<Option<SourcePlace>>(),
            2 * std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn arena_only_by_default_where_always_live_bytes_dwarf_an_arena_that_holds_something() {
        // transformer-decode: weights and the KV cache, always live, dwarf a small arena.
        assert!(example().always_live_dwarfs_arena(0));
        // Every tensor always live: the arena is empty, and showing it alone would show nothing.
        let all_always_live = r#"{"memplan": 1, "tensors": [
            {"id": "w", "bytes": 4096, "kind": "param"}, {"id": "x", "bytes": 64, "kind": "input"},
            {"id": "y", "bytes": 64, "kind": "output"}],
            "steps": [{"id": "s", "reads": ["w", "x"], "writes": ["y"]}]}"#;
        let m = model_of(all_always_live);
        assert_eq!(m.devices[0].arena_bytes, 0);
        assert!(m.devices[0].static_bytes > 0);
        assert!(!m.always_live_dwarfs_arena(0));
    }

    #[test]
    fn step_indices_hold_one_step_inline_and_read_as_the_list_they_were_made_from() {
        for steps in [vec![], vec![7], vec![3, 1, 4]] {
            let held: StepIndices = steps.iter().copied().collect();
            assert_eq!(&*held, &steps[..]);
            let json = serde_json::to_string(&held).unwrap();
            assert_eq!(json, serde_json::to_string(&steps).unwrap());
            let back = serde_json::from_str::<StepIndices>(&json).unwrap();
            assert_eq!(back, held);
            // Read back held as made: inline for none or one.
            assert_eq!(std::mem::discriminant(&back), std::mem::discriminant(&held));
        }
        assert!(matches!([7].into_iter().collect(), StepIndices::One(7)));
        assert!(matches!([].into_iter().collect(), StepIndices::None));
        assert!(serde_json::from_str::<StepIndices>("[1, -2]").is_err());
        // Equal by the steps they list, however held.
        assert_eq!(StepIndices::Many(Arc::new(vec![7])), StepIndices::One(7));
        assert_ne!(StepIndices::One(7), StepIndices::None);
        // A tag and a word: a label holds two of them.
        assert_eq!(
            std::mem::size_of::<StepIndices>(),
            2 * std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn each_position_is_named_by_its_loop_or_its_first_step_and_no_label_is_sent() {
        let dump = include_str!("../../../static/examples/transformer-training.json");
        let graph = memplan_formats::json::parse(dump).unwrap();
        let resolved = graph.resolve().unwrap();
        let m = model_of(dump);
        assert_eq!(resolved.positions.len(), m.positions as usize);
        for (p, position) in resolved.positions.iter().enumerate() {
            let expected = match position.loop_index() {
                Some(l) => format!("loop {}", graph.loops[l].id),
                None => graph.step(position.first_step()).id.to_string(),
            };
            assert_eq!(
                m.position_label(p as u32).as_deref(),
                Some(&*expected),
                "position {p}"
            );
        }
        assert_eq!(m.position_label(m.positions), None);
        let decode = example();
        assert_eq!(decode.position_label(1).as_deref(), Some("loop layers"));
        assert_eq!(
            decode.position_label(0).as_deref(),
            decode.steps.get(0).map(|s| s.id).as_deref()
        );
        // The answer carries the steps, not a label per position beside them.
        let json = serde_json::to_string(&m).unwrap();
        assert!(!json.contains("position_labels"));
        let back: ViewModel = serde_json::from_str(&json).unwrap();
        assert_eq!(back.position_label(3), m.position_label(3));
    }

    #[test]
    fn views_open_on_the_device_with_the_largest_footprint_the_first_of_equals() {
        let dump = |small: u64, large: u64| {
            format!(
                r#"{{"memplan": 1, "devices": [{{"id": "cpu"}}, {{"id": "gpu0"}}, {{"id": "gpu1"}}],
                "tensors": [{{"id": "a", "bytes": {small}, "device": "cpu"}},
                    {{"id": "b", "bytes": {large}, "device": "gpu0"}},
                    {{"id": "c", "bytes": {large}, "device": "gpu1"}}],
                "steps": [{{"id": "s", "writes": ["a"], "device": "cpu"}},
                    {{"id": "t", "writes": ["b"], "device": "gpu0"}},
                    {{"id": "u", "writes": ["c"], "device": "gpu1"}}]}}"#
            )
        };
        let m = model_of(&dump(8, 1 << 20));
        assert_eq!(m.devices[m.main_device()].id, "gpu0");
        let m = model_of(&dump(1 << 20, 1 << 20));
        assert_eq!(m.main_device(), 0);
        assert_eq!(example().main_device(), 0);
    }

    #[test]
    fn producers_and_consumers_go_through_views() {
        let m = example();
        let qkv = &m.buffers[m.buffer_of("qkv").unwrap()];
        assert_eq!(m.step_ids(&qkv.tensor.producers), vec!["qkv_proj"]);
        // q, k_new and v_new are views of qkv: their readers read qkv.
        assert_eq!(
            m.step_ids(&qkv.tensor.consumers),
            vec!["kv_append", "attention"]
        );
        assert_eq!(m.position_label(1).as_deref(), Some("loop layers"));
        // And they are listed under it, so no tensor disappears.
        let views: Vec<&str> = qkv.tensor.views.iter().map(|v| v.tensor.as_str()).collect();
        assert_eq!(views, vec!["q", "k_new", "v_new"]);
        let l = m.loop_at(1).unwrap();
        assert_eq!((l.id.as_str(), l.trip_count), ("layers", Some(24)));
        assert!(m.steps_at(1).all(|(_, s)| s.position == 1));
    }

    #[test]
    fn every_tensor_of_the_dump_is_a_buffer_a_view_or_unplanned_with_a_reason() {
        let text = include_str!("../../../static/examples/transformer-decode.json");
        let graph = memplan_formats::json::parse(text).unwrap();
        let m = example();
        let listed = m.buffers.len()
            + m.buffers
                .iter()
                .map(|b| b.tensor.views.len())
                .sum::<usize>()
            + m.unplanned.len();
        assert_eq!(listed, graph.tensors.len());
    }

    #[test]
    fn the_peak_rows_are_live_at_peak_largest_first_with_their_reason() {
        let m = example();
        let rows = m.peak_rows(0);
        let mut at_peak = m.devices[0].live_at_peak.clone();
        let mut listed: Vec<usize> = rows.iter().map(|r| r.buffer).collect();
        assert!(rows.windows(2).all(|w| w[0].bytes >= w[1].bytes));
        assert_eq!(
            rows.iter().map(|r| r.bytes).sum::<u64>(),
            m.devices[0].lower_bound
        );
        at_peak.sort_unstable();
        listed.sort_unstable();
        assert_eq!(listed, at_peak);
        let peak = m.devices[0].peak_position.unwrap();
        for r in &rows {
            let b = &m.buffers[r.buffer];
            match r.alive {
                Alive::AlwaysLive => assert!(b.always_live),
                Alive::UntilRead { step, wait } => {
                    assert_eq!(m.steps.position(step as usize), Some(b.last));
                    assert!(b.tensor.consumers.contains(&step));
                    assert_eq!(wait, b.last - peak);
                }
                Alive::UntilWritten { step, .. } => assert!(b.tensor.producers.contains(&step)),
                Alive::UntilPosition { .. } => panic!("a graph's buffers have steps"),
                Alive::UntilFreed { .. } => panic!("the graph has no allocator's record"),
            }
        }
    }

    #[test]
    fn search_matches_ops_and_step_names_too() {
        let m = example();
        let by_op = m.search("matmul");
        assert!(!by_op.is_empty());
        assert!(by_op.iter().all(|&b| {
            let x = &m.buffers[b];
            x.tensor
                .producers
                .iter()
                .chain(x.tensor.consumers.iter())
                .any(|&s| m.steps.get(s as usize).unwrap().op.contains("matmul"))
                || x.tensor.display_name().contains("matmul")
        }));
        assert!(m.search("no such thing anywhere").is_empty());
    }

    #[test]
    fn rows_sort_and_search() {
        let m = example();
        let mut rows = m.search("NORM");
        let named = (0..m.buffers.len()).filter(|&b| {
            m.buffers[b].tensor.id.contains("norm")
                || m.buffers[b].tensor.display_name().contains("norm")
        });
        assert!(named.clone().count() > 0);
        assert!(named.into_iter().all(|b| rows.contains(&b)));
        RowOrder::Size.sort(&m, &mut rows);
        assert!(
            rows.windows(2)
                .all(|w| m.buffers[w[0]].size >= m.buffers[w[1]].size)
        );
        assert_eq!(m.search("").len(), m.buffers.len());
    }
}
