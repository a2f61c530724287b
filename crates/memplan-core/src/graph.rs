//! The graph model: what a dump says about tensors, the schedule, loops and devices.
//!
//! These types are plain data, references by string id, exactly as a dump spells them: every
//! importer produces a [`Graph`] and every exporter reads one. They are not trusted:
//! [`Graph::resolve`] checks every invariant below and returns a [`ResolvedGraph`] with the ids
//! turned into indices and the sizes computed. Nothing downstream ever sees an unresolved graph.
//!
//! Invariants a resolved graph holds (each violation is a [`GraphError`] that names the element):
//! - ids are unique within tensors, steps, loops and devices, and non-empty;
//! - every reference (reads, writes, `view_of`, devices, loops, candidates) names an element;
//! - views form no cycle, stay inside their base and live on their base's device; a view is
//!   elided when any tensor on its chain to the root is; a view that must outlive the schedule
//!   (output, held, or flagged always-live) makes its root always-live;
//! - a size is `bytes`, or `shape` with `dtype`; every symbolic dim is a known param; sizes and
//!   sizes rounded up to their alignment fit in a `u64`; alignments are powers of two;
//! - the steps of a loop are contiguous in the schedule;
//! - every step writes at least one tensor.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use crate::dtype::DType;
use crate::lists::{Lists, OptionalIndex};

/// A tensor's or a step's id, and a step's reference to a tensor: held inline up to 24 bytes
/// (12 in wasm), so the ids of a million tensors, and the steps' references to them, each cost
/// no allocation (as `String`s they were a fifth of a million-row CSV's memory).
pub type Id = compact_str::CompactString;

/// A whole dump: the schedule of one computation, on one or more devices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Graph {
    /// A display name for the computation.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The alignment of tensors that give none (bytes, a power of two). Default 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub alignment: u64,
    /// The largest pool, bytes, when this computation's offsets are narrower than 64 bits
    /// (4294967296 for `u32` offsets). Absent: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_cap: Option<u64>,
    /// Values of the symbolic dims used by shapes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, u64>,
    /// The unit of the steps' `cost` (`FLOPs`), shown beside recompute costs. Absent: a unit
    /// of work the dump does not name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_unit: Option<String>,
    /// The devices. When empty, one device named [`DEFAULT_DEVICE`] is implied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
    pub tensors: Vec<Tensor>,
    /// The schedule, in execution order; empty where [`Graph::events`] holds it. Read it
    /// through [`Graph::step`] and [`Graph::schedule`], which see both.
    pub steps: Vec<Step>,
    /// The schedule where the dump records it as events (a memory snapshot, a profiler trace, a
    /// minimalloc CSV), as columns, and `steps` is empty. Only importers set it, with
    /// [`Graph::lifetimes`]; memplan JSON lists the steps ([`Graph::listed`]).
    #[serde(skip)]
    pub events: Option<Events>,
    /// Per tensor, in tensor order, where the dump records lifetimes rather than what each step
    /// reads and writes (a memory snapshot, a profiler trace, a minimalloc CSV): the step that
    /// writes it and the step that last reads it, `(first, last)`, step indices, with
    /// `first <= last`. Tensor `t` is then written by step `first` and read by step `last`
    /// when that is a later step, after what those steps list themselves, which is nothing for
    /// such a dump. Empty: the steps list everything. A step's list costs an allocation and
    /// its ids a lookup each when resolved, and such a dump has a million of them. Only
    /// importers set it; memplan JSON lists steps' tensors ([`Graph::listed`]).
    #[serde(
        default,
        skip_deserializing,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "listed_first"
    )]
    pub lifetimes: Vec<(u32, u32)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loops: Vec<Loop>,
    /// Tensors that may be recomputed at use instead of stored. `None`: derive them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remat_candidates: Option<Vec<RematCandidate>>,
}

impl Default for Graph {
    fn default() -> Self {
        Graph {
            name: String::new(),
            alignment: 1,
            pool_cap: None,
            params: BTreeMap::new(),
            cost_unit: None,
            devices: Vec::new(),
            tensors: Vec::new(),
            steps: Vec::new(),
            events: None,
            lifetimes: Vec::new(),
            loops: Vec::new(),
            remat_candidates: None,
        }
    }
}

/// A graph with recorded lifetimes is written with its steps' lists ([`Graph::listed`]): a
/// writer that forgets fails rather than write steps that list nothing.
fn listed_first<S: serde::Serializer>(_: &[(u32, u32)], _: S) -> Result<S::Ok, S::Error> {
    Err(serde::ser::Error::custom(
        "a graph of recorded lifetimes is written with its steps' lists (`Graph::listed`)",
    ))
}

/// The device implied when a graph declares none.
pub const DEFAULT_DEVICE: &str = "device0";

fn one() -> u64 {
    1
}
fn is_one(v: &u64) -> bool {
    *v == 1
}
fn is_zero(v: &u64) -> bool {
    *v == 0
}
fn is_empty(s: &impl AsRef<str>) -> bool {
    s.as_ref().is_empty()
}
fn is_false(v: &bool) -> bool {
    !*v
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    pub id: String,
    /// A hardware class name (a TOML file of memory terms), for budget queries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_class: Option<String>,
}

/// What a tensor is for. Inputs, params, optimizer state, constants and outputs are always-live
/// by default.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum TensorKind {
    Input,
    Param,
    /// What an optimizer keeps per param between steps (Adam's moments): always-live like the
    /// params, and shown apart from them.
    OptimizerState,
    Constant,
    #[default]
    Intermediate,
    Output,
    Scratch,
}

impl TensorKind {
    pub const ALL: [TensorKind; 7] = [
        TensorKind::Input,
        TensorKind::Param,
        TensorKind::OptimizerState,
        TensorKind::Constant,
        TensorKind::Intermediate,
        TensorKind::Output,
        TensorKind::Scratch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TensorKind::Input => "input",
            TensorKind::Param => "param",
            TensorKind::OptimizerState => "optimizer_state",
            TensorKind::Constant => "constant",
            TensorKind::Intermediate => "intermediate",
            TensorKind::Output => "output",
            TensorKind::Scratch => "scratch",
        }
    }

    /// Whether tensors of this kind outlive the schedule unless the dump says otherwise.
    pub fn always_live_by_default(self) -> bool {
        matches!(
            self,
            TensorKind::Input
                | TensorKind::Param
                | TensorKind::OptimizerState
                | TensorKind::Constant
                | TensorKind::Output
        )
    }
}

/// Where a tensor's bytes live, when the dump overrides the planner's choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySpace {
    Host,
    DeviceGlobal,
    DeviceConstant,
    DeviceShared,
    Unified,
}

impl MemorySpace {
    pub fn name(self) -> &'static str {
        match self {
            MemorySpace::Host => "host",
            MemorySpace::DeviceGlobal => "device_global",
            MemorySpace::DeviceConstant => "device_constant",
            MemorySpace::DeviceShared => "device_shared",
            MemorySpace::Unified => "unified",
        }
    }
}

/// One dimension of a shape: a number, or the name of a param.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Dim {
    Fixed(u64),
    Param(String),
}

impl<'de> Deserialize<'de> for Dim {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct DimVisitor;
        impl serde::de::Visitor<'_> for DimVisitor {
            type Value = Dim;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a shape dim: a non-negative integer or the name of a param")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Dim, E> {
                Ok(Dim::Fixed(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Dim, E> {
                u64::try_from(v).map(Dim::Fixed).map_err(|_| {
                    E::custom(format_args!(
                        "a shape dim is a non-negative integer or the name of a param, not {v}"
                    ))
                })
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Dim, E> {
                Err(E::custom(format_args!(
                    "a shape dim is a non-negative integer or the name of a param, not {v}"
                )))
            }
            fn visit_str<E>(self, v: &str) -> Result<Dim, E> {
                Ok(Dim::Param(v.to_string()))
            }
        }
        d.deserialize_any(DimVisitor)
    }
}

/// A tensor of the dump. Its fields beyond a size that a model declares and a recorded
/// allocation never has (shape, dtype, alignment, view, memory space) are [`Declared`], one
/// boxed [`Declaration`] or nothing: a snapshot of millions of allocations does not carry
/// them per allocation. The JSON form is flat ([`TensorFields`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "TensorFields", into = "TensorFields")]
pub struct Tensor {
    pub id: Id,
    /// A display name; the id when absent.
    pub name: Option<Arc<str>>,
    /// The size in bytes. Either this or `shape` (with `dtype`).
    pub bytes: Option<u64>,
    /// The device id; the first device when absent. Shared: a dump of millions of tensors
    /// names a few devices.
    pub device: Option<Arc<str>>,
    pub kind: TensorKind,
    /// Its contents outlive the schedule: always-live, never shares bytes.
    pub held: bool,
    /// Overrides whether the tensor is always-live (default: held, or its kind's default).
    pub always_live: Option<bool>,
    /// Fused away: it gets no storage and its uses take nothing.
    pub elided: bool,
    /// The source could not size it (an ONNX model whose shape inference stopped): it owns no
    /// bytes, as an elided tensor, and every plan of the dump is incomplete and says so.
    pub size_unknown: bool,
    /// Where the source program allocated it, innermost frame first (a PyTorch snapshot's
    /// stack, a profiler trace's enclosing operators). Shared: a training loop allocates from
    /// the same few stacks again and again.
    pub stack: Arc<[Frame]>,
    pub declared: Declared,
}

/// What a model declares of a tensor beyond its size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declaration {
    pub shape: Option<Vec<Dim>>,
    /// The element type: with `shape` it gives the size; it is also the precision class.
    pub dtype: Option<Box<str>>,
    /// Bytes, a power of two; the graph's `alignment` when absent.
    pub alignment: Option<u64>,
    /// This tensor is a view: it takes the storage of this tensor, at `view_offset`.
    pub view_of: Option<Box<str>>,
    pub view_offset: u64,
    pub memory_space: Option<MemorySpace>,
}

/// A tensor's [`Declaration`], boxed where it declares anything. It reads as one (through
/// `Deref`), empty when absent, and writing a field through `DerefMut` makes the box; two are
/// equal when they declare the same.
#[derive(Debug, Clone, Default)]
pub struct Declared(Option<Box<Declaration>>);

/// The declaration of a tensor that declares nothing.
static NOTHING_DECLARED: Declaration = Declaration {
    shape: None,
    dtype: None,
    alignment: None,
    view_of: None,
    view_offset: 0,
    memory_space: None,
};

impl From<Declaration> for Declared {
    fn from(declaration: Declaration) -> Self {
        Declared((declaration != NOTHING_DECLARED).then(|| Box::new(declaration)))
    }
}

impl std::ops::Deref for Declared {
    type Target = Declaration;
    fn deref(&self) -> &Declaration {
        self.0.as_deref().unwrap_or(&NOTHING_DECLARED)
    }
}

impl std::ops::DerefMut for Declared {
    fn deref_mut(&mut self) -> &mut Declaration {
        self.0.get_or_insert_default()
    }
}

impl PartialEq for Declared {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Declared {}

/// A [`Tensor`] as memplan JSON writes it: every field flat.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TensorFields {
    id: Id,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shape: Option<Vec<Dim>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dtype: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alignment: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    device: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "is_intermediate")]
    kind: TensorKind,
    #[serde(default, skip_serializing_if = "is_false")]
    held: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    always_live: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    view_of: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "is_zero")]
    view_offset: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    elided: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    size_unknown: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory_space: Option<MemorySpace>,
    #[serde(default, skip_serializing_if = "no_frames")]
    stack: Arc<[Frame]>,
}

impl From<TensorFields> for Tensor {
    fn from(f: TensorFields) -> Self {
        let declaration = Declaration {
            shape: f.shape,
            dtype: f.dtype,
            alignment: f.alignment,
            view_of: f.view_of,
            view_offset: f.view_offset,
            memory_space: f.memory_space,
        };
        Tensor {
            id: f.id,
            name: f.name,
            bytes: f.bytes,
            device: f.device,
            kind: f.kind,
            held: f.held,
            always_live: f.always_live,
            elided: f.elided,
            size_unknown: f.size_unknown,
            stack: f.stack,
            declared: declaration.into(),
        }
    }
}

impl From<Tensor> for TensorFields {
    fn from(t: Tensor) -> Self {
        let declaration = t.declared.0.map(|d| *d).unwrap_or_default();
        TensorFields {
            id: t.id,
            name: t.name,
            bytes: t.bytes,
            shape: declaration.shape,
            dtype: declaration.dtype,
            alignment: declaration.alignment,
            device: t.device,
            kind: t.kind,
            held: t.held,
            always_live: t.always_live,
            view_of: declaration.view_of,
            view_offset: declaration.view_offset,
            elided: t.elided,
            size_unknown: t.size_unknown,
            memory_space: declaration.memory_space,
            stack: t.stack,
        }
    }
}

fn no_frames(stack: &Arc<[Frame]>) -> bool {
    stack.is_empty()
}

/// One frame of the stack that allocated a tensor: a Python or C++ function with its file and
/// line, or an operator (no file).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Frame {
    pub function: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub file: String,
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub line: u32,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

impl Frame {
    /// The file's last path component (`model.py` of `/home/me/model.py` or `C:\me\model.py`).
    pub fn file_name(&self) -> &str {
        self.file.rsplit(['/', '\\']).next().unwrap_or("")
    }

    /// Whether the frame is the framework's, not the user's: native code (a file that is not
    /// Python, or unknown: `??`), Python's own (`<frozen ...>`, the standard library), and
    /// installed packages (PyTorch under `torch/`, anything under `site-packages` or
    /// `dist-packages`). An operator frame (no file) is not internal: it is what the user called.
    pub fn is_internal(&self) -> bool {
        if self.file.is_empty() {
            return false;
        }
        if !self.file.ends_with(".py") || self.file.starts_with('<') {
            return true;
        }
        let parts: Vec<&str> = self.file.split(['/', '\\']).collect();
        let under = |dir: &str| parts[..parts.len() - 1].contains(&dir);
        under("torch")
            || under("site-packages")
            || under("dist-packages")
            || parts
                .windows(2)
                .any(|w| w[0].eq_ignore_ascii_case("lib") && w[1].starts_with("python"))
    }
}

impl fmt::Display for Frame {
    /// `forward (model.py:54)`; an operator frame is its function alone.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.file.is_empty(), self.line) {
            (true, _) => f.write_str(&self.function),
            (false, 0) => write!(f, "{} ({})", self.function, self.file_name()),
            (false, line) => write!(f, "{} ({}:{line})", self.function, self.file_name()),
        }
    }
}

/// The allocation site of a stack: its first frame in the user's code, skipping the
/// framework's ([`Frame::is_internal`]); the first frame when every frame is internal.
pub fn site(stack: &[Frame]) -> Option<&Frame> {
    stack
        .iter()
        .find(|f| !f.is_internal())
        .or_else(|| stack.first())
}

/// The tensors of one allocation site, and their bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteGroup {
    /// The site as shown (`forward (model.py:54)`); `(no stack)` for tensors without one.
    pub site: String,
    pub bytes: u64,
    /// The members' ids as the caller gave them, in the order given.
    pub tensors: Vec<usize>,
}

/// What tensors without a stack are grouped under.
pub const NO_STACK: &str = "(no stack)";

/// `entries` (a stack, bytes, an id) grouped by allocation site ([`site`]), most bytes first
/// (ties by site). Bytes add with saturation: they are a view's sums, never a plan's.
pub fn group_by_site<'a>(
    entries: impl IntoIterator<Item = (&'a [Frame], u64, usize)>,
) -> Vec<SiteGroup> {
    let mut groups: Vec<SiteGroup> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::default();
    for (stack, bytes, id) in entries {
        let name = site(stack).map_or_else(|| NO_STACK.to_string(), ToString::to_string);
        let k = *index.entry(name.clone()).or_insert_with(|| {
            groups.push(SiteGroup {
                site: name,
                bytes: 0,
                tensors: Vec::new(),
            });
            groups.len() - 1
        });
        groups[k].bytes = groups[k].bytes.saturating_add(bytes);
        groups[k].tensors.push(id);
    }
    groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.site.cmp(&b.site)));
    groups
}

fn is_intermediate(k: &TensorKind) -> bool {
    *k == TensorKind::Intermediate
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    #[default]
    Kernel,
    Copy,
}

fn is_kernel(k: &StepKind) -> bool {
    *k == StepKind::Kernel
}

/// One entry of the schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub id: Id,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Box<str>>,
    /// The operator, e.g. `matmul`.
    #[serde(default, skip_serializing_if = "is_empty")]
    pub op: Box<str>,
    /// The device id; the first device when absent. Shared, as a tensor's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "is_kernel")]
    pub kind: StepKind,
    #[serde(default, deserialize_with = "list_at_its_length")]
    pub reads: Vec<Id>,
    #[serde(deserialize_with = "list_at_its_length")]
    pub writes: Vec<Id>,
    /// Flops, or any unit that grows with the work.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cost: u64,
    /// When the step starts, in the source's own time units (a minimalloc CSV's times), where
    /// the schedule has a clock besides its order: `search` weighs lifetimes by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<u64>,
    /// The loop this step belongs to.
    #[serde(default, rename = "loop", skip_serializing_if = "Option::is_none")]
    pub loop_id: Option<Box<str>>,
    /// It has effects besides its writes (a collective, a host transfer): a reorder keeps the
    /// pinned steps in their order.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pinned: bool,
}

/// A schedule recorded as events: one step per event, in order, named `<prefix>t=<time>`
/// after its device's run, listing nothing (the tensors' [`Graph::lifetimes`] say what each
/// step writes and last reads) and pinned: the events of a run, not operators a reorder may
/// move. Held as columns, where a [`Step`] each took 168 bytes a million times over: a
/// snapshot has a step per allocation, a minimalloc CSV one per distinct start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Events {
    /// Each step's time, in the source's units (a CSV's times, a device's event numbers).
    /// Shared: the views name the steps by them, and a snapshot has millions.
    pub times: Arc<[u64]>,
    /// The runs of consecutive steps on one device, in schedule order; the last ends at the
    /// last step.
    pub runs: Vec<EventRun>,
}

/// The steps of [`Events`] from the previous run's `end` up to this one's, on one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRun {
    /// One past its last step.
    pub end: u32,
    /// The device id; the first device when absent.
    pub device: Option<Arc<str>>,
    /// What its steps' ids start with (`cuda:0 `), so the ids of two runs differ.
    pub prefix: Arc<str>,
}

impl Events {
    /// Step `s` as a [`Step`]: the run it belongs to names it (none only where the runs do not
    /// cover the steps, which resolving refuses).
    fn step(&self, s: usize) -> Step {
        let r = self.runs.partition_point(|run| run.end as usize <= s);
        let run = self.runs.get(r.min(self.runs.len().saturating_sub(1)));
        let time = self.times[s];
        Step {
            id: event_id(run.map_or("", |run| &run.prefix), time),
            time: Some(time),
            device: run.and_then(|run| run.device.clone()),
            pinned: true,
            ..Step::default()
        }
    }
}

/// The id of the event at `time` of a run whose ids start with `prefix`.
fn event_id(prefix: &str, time: u64) -> Id {
    format!("{prefix}t={time}").into()
}

/// A group of consecutive steps that runs repeatedly; one position for liveness.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Loop {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trip_count: Option<u64>,
    /// Tensors the back edge reads (its condition, carried values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub back_edge_reads: Vec<Id>,
}

/// A list of ids read at its length. Serde's `Vec` grows to four items at the first push, so
/// a list of one id took 96 bytes where it needs 24: a step reads and writes a few tensors,
/// and a million-step dump's lists held 126 MB where their ids take 48. A list of one is
/// made at its length; a longer one grows, then moves into a list of its length, and the one
/// it grew in is freed for the next list to grow in.
fn list_at_its_length<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Id>, D::Error> {
    struct AtItsLength;
    impl<'de> serde::de::Visitor<'de> for AtItsLength {
        type Value = Vec<Id>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a sequence")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Id>, A::Error> {
            let Some(first) = seq.next_element()? else {
                return Ok(Vec::new());
            };
            let mut grown = vec![first];
            while let Some(id) = seq.next_element()? {
                grown.push(id);
            }
            if grown.len() == grown.capacity() {
                return Ok(grown);
            }
            let mut list = Vec::with_capacity(grown.len());
            list.append(&mut grown);
            Ok(list)
        }
    }
    d.deserialize_seq(AtItsLength)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RematCandidate {
    pub tensor: String,
    /// The cost of recomputing it once, in the unit of step costs.
    pub recompute_cost: u64,
}

/// What kind of element of a dump an error counts or an id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Element {
    Device,
    Tensor,
    Step,
    Loop,
    /// A tensor a step reads (as the steps list them, and as recorded lifetimes imply).
    Read,
    /// A tensor a step writes.
    Write,
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Element::Device => "device",
            Element::Tensor => "tensor",
            Element::Step => "step",
            Element::Loop => "loop",
            Element::Read => "read",
            Element::Write => "write",
        })
    }
}

/// Why a graph is not a valid dump. Each variant names the element and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphError {
    #[error("{what} #{index} has an empty id")]
    EmptyId { what: Element, index: usize },
    #[error("duplicate {what} id `{id}`")]
    DuplicateId { what: Element, id: String },
    #[error("{owner} refers to {what} `{id}`, which does not exist")]
    Dangling {
        owner: String,
        what: Element,
        id: String,
    },
    #[error("tensor `{tensor}`: the views form a cycle ({cycle})")]
    ViewCycle { tensor: String, cycle: String },
    /// A tensor that breaks a rule no other variant names (its view, its recorded lifetime).
    #[error("tensor `{tensor}`: {reason}")]
    BadTensor { tensor: String, reason: String },
    #[error("tensor `{tensor}` has no size: give `bytes`, or `shape` with `dtype`")]
    MissingSize { tensor: String },
    #[error("tensor `{tensor}` gives both `bytes` and `shape`: give one")]
    AmbiguousSize { tensor: String },
    #[error("tensor `{tensor}` has a shape but no `dtype`")]
    MissingDType { tensor: String },
    #[error("tensor `{tensor}` has unknown dtype `{dtype}`")]
    UnknownDType { tensor: String, dtype: String },
    #[error("tensor `{tensor}`: shape dim `{param}` is not a param of the graph")]
    UnknownParam { tensor: String, param: String },
    #[error("tensor `{tensor}`: its size overflows 64 bits ({detail})")]
    SizeOverflow { tensor: String, detail: String },
    #[error("{owner}: alignment {alignment} is not a power of two")]
    BadAlignment { owner: String, alignment: u64 },
    #[error(
        "loop `{loop_id}`: its steps are not contiguous (step `{step}` at position {index} is outside the run of the loop)"
    )]
    NonContiguousLoop {
        loop_id: String,
        step: String,
        index: usize,
    },
    #[error("step `{step}` writes nothing")]
    StepWritesNothing { step: String },
    /// A schedule recorded as [`Events`] that breaks their rules.
    #[error("the recorded events: {reason}")]
    BadEvents { reason: String },
    #[error("remat candidate `{tensor}`: {reason}")]
    BadCandidate { tensor: String, reason: String },
    #[error("the graph has {count} {what}s, more than the {limit} memplan supports")]
    TooLarge {
        what: Element,
        count: usize,
        limit: usize,
    },
}

/// The most tensors, steps or loops a graph may have: indices are `u32`.
pub const MAX_ELEMENTS: usize = u32::MAX as usize;

/// The most devices a graph may have. Each device's plan holds its usage at every position of
/// the schedule, so devices times positions is what a plan costs; a file can name a device in
/// a few bytes (a snapshot's trace per device: 100,000 devices of one allocation each, 0.9 MB,
/// took 78 s and 24 GB to plan).
pub const MAX_DEVICES: usize = 1024;

/// A tensor's storage, after views and elision are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// It owns its bytes.
    Owned,
    /// It takes the bytes of `root` (an owning tensor's index), from its offset there
    /// ([`ResolvedGraph::view_offset`]).
    View { root: u32 },
    /// It has no bytes.
    Elided,
}

/// A tensor with its references resolved to indices and its size computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTensor {
    pub bytes: u64,
    /// Its alignment's log2 ([`ResolvedTensor::alignment`]): a byte where the alignment took
    /// eight, and a resolved tensor 24 bytes (a snapshot has one per allocation, millions).
    alignment_log2: u8,
    /// The index of its device (of at most [`MAX_DEVICES`]).
    pub device: u32,
    pub dtype: Option<DType>,
    pub storage: Storage,
    pub always_live: bool,
}

impl ResolvedTensor {
    /// Its alignment in bytes: a power of two.
    pub fn alignment(&self) -> u64 {
        1 << self.alignment_log2
    }

    /// Its alignment's log2.
    pub fn alignment_log2(&self) -> u8 {
        self.alignment_log2
    }

    /// The bytes it holds in an arena: its size rounded up to its alignment (`None` past `u64`).
    pub fn occupied_size(&self) -> Option<u64> {
        align_up(self.bytes, self.alignment())
    }
}

/// A step's device and loop; the tensors it reads and writes are the graph's
/// ([`ResolvedGraph::reads`], [`ResolvedGraph::writes`]). Indices are `u32`, as every index of
/// a resolved graph: a snapshot has a step per event, millions of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedStep {
    device: u32,
    loop_index: OptionalIndex,
}

impl ResolvedStep {
    /// The index of its device.
    pub fn device(&self) -> usize {
        self.device as usize
    }

    /// The index of the loop it belongs to.
    pub fn loop_index(&self) -> Option<usize> {
        self.loop_index.get().map(|l| l as usize)
    }
}

/// A position of the schedule: a top-level step, or a whole loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    first_step: u32,
    last_step: u32,
    loop_index: OptionalIndex,
}

impl Position {
    /// The steps that run at this position, in order.
    pub fn steps(&self) -> std::ops::RangeInclusive<usize> {
        self.first_step as usize..=self.last_step as usize
    }

    /// The first step that runs at this position.
    pub fn first_step(&self) -> usize {
        self.first_step as usize
    }

    /// The loop run at this position, if it is one.
    pub fn loop_index(&self) -> Option<usize> {
        self.loop_index.get().map(|l| l as usize)
    }
}

/// The positions of a schedule, in order. A schedule with no loop (a snapshot's millions of
/// events) has a position per step, each its own: those are counted, not stored (twelve bytes
/// a step).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Positions {
    /// Step `p` at position `p`, this many.
    EachStep(u32),
    /// At least one loop: each top-level step, each loop as one.
    Listed(Vec<Position>),
}

impl Positions {
    /// The positions of `steps` (in schedule order, each loop's steps contiguous): each
    /// top-level step, each run of a loop's steps as one.
    fn of(steps: &[ResolvedStep]) -> Positions {
        if steps.iter().all(|s| s.loop_index.get().is_none()) {
            // Step indices fit `u32` (`index_ids`).
            return Positions::EachStep(steps.len() as u32);
        }
        let mut positions: Vec<Position> = Vec::new();
        for (i, s) in (0..).zip(steps) {
            match positions.last_mut() {
                Some(p) if s.loop_index.get().is_some() && p.loop_index == s.loop_index => {
                    p.last_step = i
                }
                _ => positions.push(Position {
                    first_step: i,
                    last_step: i,
                    loop_index: s.loop_index,
                }),
            }
        }
        Positions::Listed(positions)
    }

    pub fn len(&self) -> usize {
        match self {
            Positions::EachStep(n) => *n as usize,
            Positions::Listed(positions) => positions.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Position `p`, if there is one.
    pub fn get(&self, p: usize) -> Option<Position> {
        match self {
            Positions::EachStep(n) => (p < *n as usize).then(|| Position {
                first_step: p as u32,
                last_step: p as u32,
                loop_index: OptionalIndex::default(),
            }),
            Positions::Listed(positions) => positions.get(p).copied(),
        }
    }

    /// Position `p`, which the schedule has.
    pub fn at(&self, p: usize) -> Position {
        self.get(p).expect("a position of the schedule")
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = Position> + '_ {
        (0..self.len()).map(|p| self.at(p))
    }
}

/// A graph whose invariants hold (see the module docs), with indices in place of ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedGraph {
    pub device_ids: Vec<String>,
    pub tensors: Vec<ResolvedTensor>,
    pub steps: Vec<ResolvedStep>,
    /// The tensors each step reads and writes, in the dump's order, a list per step.
    reads: Lists,
    writes: Lists,
    pub positions: Positions,
    /// For each loop, the tensors its back edge reads.
    pub back_edge_reads: Vec<Vec<usize>>,
    /// Each view's offset in its root, by view index, ascending ([`ResolvedGraph::view_offset`]):
    /// views are few (a snapshot or a CSV has none), and an offset in every tensor's storage
    /// would make each resolved tensor a word longer.
    view_offsets: Vec<(u32, u64)>,
    /// The tensor index of each id, made at the first lookup ([`ResolvedGraph::tensor_of`]):
    /// most dumps are never asked (a million-row CSV's ids were a copy of every id), and
    /// reorders of one graph share it.
    tensor_index: TensorIndex,
}

/// [`ResolvedGraph`]'s index of tensor ids, made once when first asked. What the graph
/// determines, so two resolved graphs compare equal whether or not either has made it.
#[derive(Debug, Clone, Default)]
struct TensorIndex(Arc<std::sync::OnceLock<IdIndex>>);

impl PartialEq for TensorIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for TensorIndex {}

impl ResolvedGraph {
    /// The same graph with its steps run in the order `steps` (a permutation of the step
    /// indices that keeps each loop's steps contiguous): the positions follow.
    pub fn reordered(&self, steps: &[usize]) -> ResolvedGraph {
        let mut reads = Lists::default();
        let mut writes = Lists::default();
        reads.reserve_exact(steps.len(), self.reads.items_len());
        writes.reserve_exact(steps.len(), self.writes.items_len());
        // The same lists in another order: no more items than the lists already hold.
        for &s in steps {
            let (read, written) = (self.reads(s).iter(), self.writes(s).iter());
            reads
                .push(read.copied())
                .expect("a reorder holds what the graph held");
            writes
                .push(written.copied())
                .expect("a reorder holds what the graph held");
        }
        let steps: Vec<ResolvedStep> = steps.iter().map(|&s| self.steps[s]).collect();
        let positions = Positions::of(&steps);
        ResolvedGraph {
            device_ids: self.device_ids.clone(),
            tensors: self.tensors.clone(),
            steps,
            reads,
            writes,
            positions,
            back_edge_reads: self.back_edge_reads.clone(),
            view_offsets: self.view_offsets.clone(),
            tensor_index: self.tensor_index.clone(),
        }
    }

    /// The tensors step `s` reads, in the dump's order.
    pub fn reads(&self, s: usize) -> &[u32] {
        &self.reads[s]
    }

    /// The tensors step `s` writes, in the dump's order.
    pub fn writes(&self, s: usize) -> &[u32] {
        &self.writes[s]
    }

    /// The index of the tensor `id` names in `graph`, the graph this was resolved from.
    pub fn tensor_of(&self, graph: &Graph, id: &str) -> Option<usize> {
        let index = self.tensor_index.0.get_or_init(|| {
            (graph.tensors.iter().enumerate())
                .map(|(t, tensor)| (tensor.id.clone(), t))
                .collect()
        });
        index.get(id).copied()
    }

    /// Where view `t` starts in its root's bytes; `None` for a tensor that is no view.
    pub fn view_offset(&self, t: usize) -> Option<u64> {
        let k = (self.view_offsets).binary_search_by_key(&t, |&(v, _)| v as usize);
        k.ok().map(|k| self.view_offsets[k].1)
    }

    /// The tensor whose storage `t` uses: itself, its view's root, or none when elided.
    pub fn root(&self, t: usize) -> Option<usize> {
        match self.tensors[t].storage {
            Storage::Owned => Some(t),
            Storage::View { root, .. } => Some(root as usize),
            Storage::Elided => None,
        }
    }
}

impl Graph {
    /// Checks every invariant of the module docs and resolves ids to indices.
    pub fn resolve(&self) -> Result<ResolvedGraph, GraphError> {
        resolve(self)
    }

    /// Whether a tensor of it may be recomputed at its uses: the dump lists candidates, or
    /// leaves them to be derived. A list given empty (a minimalloc CSV, a PyTorch snapshot: no
    /// operators) recomputes nothing.
    pub fn may_recompute(&self) -> bool {
        (self.remat_candidates.as_ref()).is_none_or(|c| !c.is_empty())
    }

    /// How many steps the schedule has.
    pub fn step_count(&self) -> usize {
        match &self.events {
            Some(events) => events.times.len(),
            None => self.steps.len(),
        }
    }

    /// Step `s` of the schedule, made from the [`events`](Graph::events) where the graph
    /// records them.
    pub fn step(&self, s: usize) -> Cow<'_, Step> {
        match &self.events {
            Some(events) => Cow::Owned(events.step(s)),
            None => Cow::Borrowed(&self.steps[s]),
        }
    }

    /// The steps of the schedule, in order ([`Graph::step`] each).
    pub fn schedule(&self) -> impl ExactSizeIterator<Item = Cow<'_, Step>> {
        (0..self.step_count()).map(|s| self.step(s))
    }

    /// When step `s` starts, where the dump says ([`Step::time`]).
    pub fn step_time(&self, s: usize) -> Option<u64> {
        match &self.events {
            Some(events) => Some(events.times[s]),
            None => self.steps[s].time,
        }
    }

    /// What step `s` costs ([`Step::cost`]; an event, nothing).
    pub fn step_cost(&self, s: usize) -> u64 {
        match &self.events {
            Some(_) => 0,
            None => self.steps[s].cost,
        }
    }

    /// Whether step `s` is pinned ([`Step::pinned`]; every event is).
    pub fn step_pinned(&self, s: usize) -> bool {
        match &self.events {
            Some(_) => true,
            None => self.steps[s].pinned,
        }
    }

    /// The devices, with the implied default when the graph declares none.
    pub fn device_ids(&self) -> Vec<String> {
        if self.devices.is_empty() {
            vec![DEFAULT_DEVICE.to_string()]
        } else {
            self.devices.iter().map(|d| d.id.clone()).collect()
        }
    }
}

impl Graph {
    /// The same dump with its steps in the order `steps` (step indices). The
    /// steps' `time`s are dropped: they clock the given order, not this one.
    pub fn reordered(&self, steps: &[usize]) -> Graph {
        // Recorded lifetimes name steps by index: each follows its step.
        let mut at = Vec::new();
        if !self.lifetimes.is_empty() {
            at = vec![0u32; self.step_count()];
            for (new, &old) in steps.iter().enumerate() {
                at[old] = new as u32;
            }
        }
        Graph {
            steps: (steps.iter())
                .map(|&s| Step {
                    time: None,
                    ..self.step(s).into_owned()
                })
                .collect(),
            events: None,
            lifetimes: (self.lifetimes.iter())
                .map(|&(first, last)| (at[first as usize], at[last as usize]))
                .collect(),
            ..self.clone()
        }
    }

    /// The same graph with every step listing what it reads and writes, its recorded
    /// [`lifetimes`](Graph::lifetimes) moved into the lists and its [`events`](Graph::events)
    /// made steps (as memplan JSON writes a graph). Borrowed as it is when it records neither.
    pub fn listed(&self) -> Cow<'_, Graph> {
        if self.lifetimes.is_empty() && self.events.is_none() {
            return Cow::Borrowed(self);
        }
        let mut graph = self.clone();
        if let Some(events) = graph.events.take() {
            graph.steps = (0..events.times.len()).map(|s| events.step(s)).collect();
        }
        graph.lifetimes = Vec::new();
        for (tensor, &(first, last)) in self.tensors.iter().zip(&self.lifetimes) {
            if let Some(step) = graph.steps.get_mut(first as usize) {
                step.writes.push(tensor.id.clone());
            }
            if let Some(step) = graph.steps.get_mut(last as usize)
                && last != first
            {
                step.reads.push(tensor.id.clone());
            }
        }
        Cow::Owned(graph)
    }
}

impl Tensor {
    /// Elided, or unsized: it gets no storage.
    pub fn owns_nothing(&self) -> bool {
        self.elided || self.size_unknown
    }

    /// The name to show: `name`, or the id.
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// Indices by id: hashed with FxHash, as a million-tensor dump resolves a million ids and
/// more lookups (ids are the dump's, so a hostile dump can at worst slow its own load).
pub type IdIndex = rustc_hash::FxHashMap<Id, usize>;

/// The index of each id, borrowed from the graph while it is resolved.
type Ids<'a> = rustc_hash::FxHashMap<&'a str, usize>;

fn index_ids<'a>(
    what: Element,
    ids: impl ExactSizeIterator<Item = &'a str>,
) -> Result<Ids<'a>, GraphError> {
    // Made at its size: growing a million-entry map rehashed it twenty times.
    let mut map = Ids::with_capacity_and_hasher(ids.len(), Default::default());
    for (index, id) in ids.enumerate() {
        if id.is_empty() {
            return Err(GraphError::EmptyId { what, index });
        }
        if map.insert(id, index).is_some() {
            return Err(GraphError::DuplicateId {
                what,
                id: id.to_string(),
            });
        }
    }
    // Indices are u32: on a 32-bit target (wasm) no map can pass this, on 64-bit one can.
    if u32::try_from(map.len()).is_err() {
        return Err(GraphError::TooLarge {
            what,
            count: map.len(),
            limit: MAX_ELEMENTS,
        });
    }
    Ok(map)
}

/// Finds a step's tensors by id, asking first whether the id is the tensor after the one it
/// found last, which one comparison answers: a dump made from events names its tensors in the
/// order it made them (each of a snapshot's allocations writes the next tensor, and most of its
/// frees read the one after the last freed), and a lookup in a map of millions of ids is a
/// cache miss or two. Ids are unique (checked before), so a match is the map's answer. Where the
/// guesses miss more than they hit (a minimalloc CSV's rows are in no order of time) it stops
/// guessing, so a graph in no order pays a few dozen comparisons.
struct Finder<'a> {
    tensors: &'a [Tensor],
    index: &'a Ids<'a>,
    next: usize,
    hits: usize,
    misses: usize,
}

impl<'a> Finder<'a> {
    /// Misses past the hits at which a finder stops guessing.
    const MOST_MISSES_AHEAD: usize = 64;

    fn new(tensors: &'a [Tensor], index: &'a Ids<'a>) -> Self {
        Finder {
            tensors,
            index,
            next: 0,
            hits: 0,
            misses: 0,
        }
    }

    fn find(&mut self, id: &str) -> Option<usize> {
        let guessing = self.misses <= self.hits + Self::MOST_MISSES_AHEAD;
        let guessed = guessing && self.tensors.get(self.next).is_some_and(|t| t.id == id);
        let found = match guessed {
            true => {
                self.hits += 1;
                self.next
            }
            false => {
                self.misses += usize::from(guessing);
                *self.index.get(id)?
            }
        };
        self.next = found + 1;
        Some(found)
    }

    /// Each of `ids`, or the error naming the first that names no tensor.
    fn find_all<'f>(
        &'f mut self,
        ids: &'f [Id],
        owner: &'f dyn Fn() -> String,
    ) -> impl Iterator<Item = Result<u32, GraphError>> + 'f {
        // A miss is the map's: `lookup` says why. Tensor indices fit `u32` (`index_ids`).
        (ids.iter()).map(move |id| match self.find(id) {
            Some(found) => Ok(found as u32),
            None => lookup(self.index, owner, Element::Tensor, id).map(|t| t as u32),
        })
    }
}

fn lookup(
    map: &Ids<'_>,
    owner: impl FnOnce() -> String,
    what: Element,
    id: &str,
) -> Result<usize, GraphError> {
    map.get(id).copied().ok_or_else(|| GraphError::Dangling {
        owner: owner(),
        what,
        id: id.to_string(),
    })
}

/// The index of the device `id` names (the first device when absent), for `owner`.
fn device_index(
    devices: &Ids<'_>,
    owner: &dyn Fn() -> String,
    id: &Option<Arc<str>>,
) -> Result<usize, GraphError> {
    match id {
        None => Ok(0),
        Some(id) => lookup(devices, owner, Element::Device, id),
    }
}

/// `value` rounded up to a multiple of `alignment` (a power of two); `None` on overflow.
pub fn align_up(value: u64, alignment: u64) -> Option<u64> {
    debug_assert!(alignment.is_power_of_two());
    Some(value.checked_add(alignment - 1)? & !(alignment - 1))
}

/// `tensors`, found already.
fn known(tensors: &[u32]) -> impl Iterator<Item = Result<u32, GraphError>> + '_ {
    tensors.iter().map(|&t| Ok(t))
}

/// The tensors each step reads and writes by the graph's recorded lifetimes, in tensor order
/// (see [`Graph::lifetimes`]); `None` when it records none.
fn recorded_lists(g: &Graph) -> Result<Option<(Lists, Lists)>, GraphError> {
    if g.lifetimes.is_empty() {
        return Ok(None);
    }
    let bad = |t: usize, reason: String| GraphError::BadTensor {
        tensor: (g.tensors.get(t)).map_or_else(|| format!("#{t}"), |t| t.id.to_string()),
        reason,
    };
    if g.lifetimes.len() != g.tensors.len() {
        return Err(bad(
            g.lifetimes.len().min(g.tensors.len()),
            format!(
                "the graph records lifetimes for {} of its {} tensors",
                g.lifetimes.len(),
                g.tensors.len()
            ),
        ));
    }
    // Step indices are `u32`: one an importer could not fit is past them all (`u32::MAX`).
    let n = g.step_count();
    if n > u32::MAX as usize {
        return Err(GraphError::TooLarge {
            what: Element::Step,
            count: n,
            limit: u32::MAX as usize,
        });
    }
    for (t, &(first, last)) in g.lifetimes.iter().enumerate() {
        if first > last || last as usize >= n {
            return Err(bad(
                t,
                format!("its recorded lifetime runs from step {first} to step {last} of {n}"),
            ));
        }
    }
    // At most one item per tensor each, and tensor indices fit `u32` (`index_ids`).
    let full = |_| unreachable!("a list per step of at most one item per tensor is never full");
    let reads = Lists::collect(n, |push| {
        for (t, &(first, last)) in g.lifetimes.iter().enumerate() {
            if last != first {
                push(last as usize, t as u32);
            }
        }
    })
    .map_err(full)?;
    let writes = Lists::collect(n, |push| {
        for (t, &(first, _)) in g.lifetimes.iter().enumerate() {
            push(first as usize, t as u32);
        }
    })
    .map_err(full)?;
    Ok(Some((reads, writes)))
}

fn resolve(g: &Graph) -> Result<ResolvedGraph, GraphError> {
    let device_ids = g.device_ids();
    if device_ids.len() > MAX_DEVICES {
        return Err(GraphError::TooLarge {
            what: Element::Device,
            count: device_ids.len(),
            limit: MAX_DEVICES,
        });
    }
    let devices = index_ids(Element::Device, device_ids.iter().map(String::as_str))?;
    let tensor_index = index_ids(Element::Tensor, g.tensors.iter().map(|t| t.id.as_str()))?;
    match &g.events {
        // Their ids differ by construction ([`check_events`]): no index of a million of them.
        Some(events) => check_events(g, events)?,
        None => drop(index_ids(
            Element::Step,
            g.steps.iter().map(|s| s.id.as_str()),
        )?),
    }
    let loop_index = index_ids(Element::Loop, g.loops.iter().map(|l| l.id.as_str()))?;
    if !g.alignment.is_power_of_two() {
        return Err(GraphError::BadAlignment {
            owner: "the graph".into(),
            alignment: g.alignment,
        });
    }

    let device_of =
        |owner: &dyn Fn() -> String, id: &Option<Arc<str>>| device_index(&devices, owner, id);

    let mut tensors = Vec::with_capacity(g.tensors.len());
    for t in &g.tensors {
        let owner = || format!("tensor `{}`", t.id);
        let dtype = match &t.declared.dtype {
            None => None,
            Some(name) => Some(
                name.parse::<DType>()
                    .map_err(|_| GraphError::UnknownDType {
                        tensor: t.id.to_string(),
                        dtype: name.to_string(),
                    })?,
            ),
        };
        let bytes = tensor_bytes(g, t, dtype)?;
        let alignment = t.declared.alignment.unwrap_or(g.alignment);
        if !alignment.is_power_of_two() {
            return Err(GraphError::BadAlignment {
                owner: owner(),
                alignment,
            });
        }
        if align_up(bytes, alignment).is_none() {
            return Err(GraphError::SizeOverflow {
                tensor: t.id.to_string(),
                detail: format!("{bytes} bytes rounded up to alignment {alignment}"),
            });
        }
        let always_live = t
            .always_live
            .unwrap_or(t.held || t.kind.always_live_by_default());
        tensors.push(ResolvedTensor {
            bytes,
            // A power of two, checked above.
            alignment_log2: alignment.trailing_zeros() as u8,
            // At most `MAX_DEVICES`, checked above.
            device: device_of(&owner, &t.device)? as u32,
            dtype,
            storage: if t.owns_nothing() {
                Storage::Elided
            } else {
                Storage::Owned
            },
            always_live,
        });
    }
    let view_offsets = resolve_views(g, &tensor_index, &mut tensors)?;

    let recorded = recorded_lists(g)?;
    let (steps, reads, writes) = match &g.events {
        Some(events) => {
            let (reads, writes) = recorded.unwrap_or_default();
            let steps = event_steps(g, events, &devices, &writes)?;
            (steps, reads, writes)
        }
        None => listed_steps(g, (&devices, &tensor_index, &loop_index), recorded)?,
    };

    let positions = positions(g, &steps)?;
    let back_edge_reads = g
        .loops
        .iter()
        .map(|l| {
            l.back_edge_reads
                .iter()
                .map(|id| {
                    lookup(
                        &tensor_index,
                        || format!("loop `{}`", l.id),
                        Element::Tensor,
                        id,
                    )
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;

    if let Some(candidates) = &g.remat_candidates {
        // One pass over the steps, not one per candidate: every intermediate of an ONNX model
        // is listed, and a million-node chain must not cost a million scans.
        let mut written = vec![false; tensors.len()];
        for s in 0..writes.len() {
            for &w in &writes[s] {
                written[w as usize] = true;
            }
        }
        for c in candidates {
            let index = lookup(
                &tensor_index,
                || format!("remat candidate `{}`", c.tensor),
                Element::Tensor,
                &c.tensor,
            )?;
            let t = &tensors[index];
            let reason = if t.always_live {
                Some("it is always-live, so recomputing it saves nothing")
            } else if t.storage != Storage::Owned {
                Some("it owns no storage (a view or elided)")
            } else if !written[index] {
                Some("no step writes it, so nothing can recompute it")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(GraphError::BadCandidate {
                    tensor: c.tensor.clone(),
                    reason: reason.into(),
                });
            }
        }
    }

    Ok(ResolvedGraph {
        device_ids,
        tensors,
        steps,
        reads,
        writes,
        positions,
        back_edge_reads,
        view_offsets,
        tensor_index: TensorIndex::default(),
    })
}

fn tensor_bytes(g: &Graph, t: &Tensor, dtype: Option<DType>) -> Result<u64, GraphError> {
    let overflow = |detail: String| GraphError::SizeOverflow {
        tensor: t.id.to_string(),
        detail,
    };
    match (&t.bytes, &t.declared.shape) {
        (Some(_), Some(_)) => Err(GraphError::AmbiguousSize {
            tensor: t.id.to_string(),
        }),
        (Some(bytes), None) => Ok(*bytes),
        (None, None) => Err(GraphError::MissingSize {
            tensor: t.id.to_string(),
        }),
        (None, Some(shape)) => {
            let dtype = dtype.ok_or_else(|| GraphError::MissingDType {
                tensor: t.id.to_string(),
            })?;
            let mut elements: u64 = 1;
            for dim in shape {
                let n = match dim {
                    Dim::Fixed(n) => *n,
                    Dim::Param(p) => *g.params.get(p).ok_or_else(|| GraphError::UnknownParam {
                        tensor: t.id.to_string(),
                        param: p.clone(),
                    })?,
                };
                elements = elements
                    .checked_mul(n)
                    .ok_or_else(|| overflow("the product of the shape".into()))?;
            }
            dtype
                .bytes_for(elements)
                .ok_or_else(|| overflow(format!("{elements} elements of {dtype}")))
        }
    }
}

/// Points every view at its owning root, checking cycles, bounds and devices.
fn resolve_views(
    g: &Graph,
    tensor_index: &Ids<'_>,
    tensors: &mut [ResolvedTensor],
) -> Result<Vec<(u32, u64)>, GraphError> {
    let base: Vec<Option<usize>> = g
        .tensors
        .iter()
        .map(|t| match &t.declared.view_of {
            None => Ok(None),
            Some(id) => lookup(
                tensor_index,
                || format!("tensor `{}`", t.id),
                Element::Tensor,
                id,
            )
            .map(Some),
        })
        .collect::<Result<_, _>>()?;
    // Each view's (root, offset in the root, whether a tensor on its chain is elided), memoized
    // so that chains are walked once: O(n).
    let mut root_of: Vec<Option<(usize, u64, bool)>> = vec![None; tensors.len()];
    let mut on_path = vec![false; tensors.len()];
    for start in 0..tensors.len() {
        if base[start].is_none() || root_of[start].is_some() {
            continue;
        }
        let mut path = vec![start];
        on_path[start] = true;
        let mut at = start;
        // Walk until an owning tensor or an already resolved view.
        let (root, mut offset, mut elided) = loop {
            let next = base[at].expect("only views are on the path");
            if on_path[next] {
                let from = path.iter().position(|&p| p == next).unwrap_or(0);
                let cycle = path[from..]
                    .iter()
                    .chain(std::iter::once(&next))
                    .map(|&i| g.tensors[i].id.as_str())
                    .collect::<Vec<_>>()
                    .join(" -> ");
                return Err(GraphError::ViewCycle {
                    tensor: g.tensors[start].id.to_string(),
                    cycle,
                });
            }
            match (base[next], root_of[next]) {
                (None, _) => break (next, 0, g.tensors[next].owns_nothing()),
                (Some(_), Some(resolved)) => break resolved,
                (Some(_), None) => {
                    path.push(next);
                    on_path[next] = true;
                    at = next;
                }
            }
        };
        for &v in path.iter().rev() {
            offset = offset
                .checked_add(g.tensors[v].declared.view_offset)
                .ok_or_else(|| GraphError::SizeOverflow {
                    tensor: g.tensors[v].id.to_string(),
                    detail: "the sum of its view offsets".into(),
                })?;
            elided |= g.tensors[v].owns_nothing();
            root_of[v] = Some((root, offset, elided));
            on_path[v] = false;
        }
    }
    let mut view_offsets = Vec::new();
    for start in 0..tensors.len() {
        let Some((root, offset, elided)) = root_of[start] else {
            continue;
        };
        let bad = |reason: String| GraphError::BadTensor {
            tensor: g.tensors[start].id.to_string(),
            reason,
        };
        let (view, root_t) = (&tensors[start], &tensors[root]);
        // Each view lies inside its own base (so, by the chain, inside its root too): a view
        // that leaves its base but stays inside the root is still outside what it views.
        let near = base[start].expect("a resolved view has a base");
        let near_offset = g.tensors[start].declared.view_offset;
        let end = near_offset
            .checked_add(view.bytes)
            .ok_or_else(|| bad("its offset plus its size overflows".into()))?;
        if end > tensors[near].bytes {
            return Err(bad(format!(
                "bytes {near_offset}..{end} lie outside its base `{}` of {} bytes",
                g.tensors[near].id, tensors[near].bytes
            )));
        }
        if g.tensors[start].device.is_some() && view.device != root_t.device {
            return Err(bad(format!(
                "it is on another device than its base `{}`",
                g.tensors[root].id
            )));
        }
        let (device, storage) = (
            root_t.device,
            if elided {
                Storage::Elided
            } else {
                // Tensor indices fit `u32` (`index_ids`).
                view_offsets.push((start as u32, offset));
                Storage::View { root: root as u32 }
            },
        );
        tensors[start].device = device;
        tensors[start].storage = storage;
        // A view that must outlive the schedule (an output, held, or always-live by its own
        // flag) keeps its bytes alive, and its bytes are its root's.
        if tensors[start].always_live && matches!(storage, Storage::View { .. }) {
            tensors[root].always_live = true;
        }
    }
    Ok(view_offsets)
}

/// The steps a graph lists, resolved: each one's device and loop, and the tensors it reads and
/// writes (what it lists, then what the `recorded` lifetimes add).
fn listed_steps(
    g: &Graph,
    (devices, tensor_index, loop_index): (&Ids<'_>, &Ids<'_>, &Ids<'_>),
    recorded: Option<(Lists, Lists)>,
) -> Result<(Vec<ResolvedStep>, Lists, Lists), GraphError> {
    let device_of =
        |owner: &dyn Fn() -> String, id: &Option<Arc<str>>| device_index(devices, owner, id);
    let mut steps = Vec::with_capacity(g.steps.len());
    // The lists hold at most `u32::MAX` tensors in all, and are made at their size.
    let lists = |what: Element, listed: fn(&Step) -> usize, implied: Option<&Lists>| {
        let count = g.steps.iter().map(listed).sum::<usize>() + implied.map_or(0, Lists::items_len);
        let too_many = move || GraphError::TooLarge {
            what,
            count,
            limit: MAX_ELEMENTS,
        };
        if u32::try_from(count).is_err() {
            return Err(too_many());
        }
        let mut lists = Lists::default();
        lists.reserve_exact(g.steps.len(), count);
        Ok((lists, too_many))
    };
    let (mut reads, too_many_reads) = lists(
        Element::Read,
        |s| s.reads.len(),
        recorded.as_ref().map(|r| &r.0),
    )?;
    let (mut writes, too_many_writes) = lists(
        Element::Write,
        |s| s.writes.len(),
        recorded.as_ref().map(|r| &r.1),
    )?;
    // Reads and writes each follow an order of their own.
    let (mut read, mut written) = (
        Finder::new(&g.tensors, tensor_index),
        Finder::new(&g.tensors, tensor_index),
    );
    for (k, s) in g.steps.iter().enumerate() {
        let owner = || format!("step `{}`", s.id);
        let (read_then, written_then) = match &recorded {
            Some((r, w)) => (&r[k], &w[k]),
            None => (&[][..], &[][..]),
        };
        if s.writes.is_empty() && written_then.is_empty() {
            return Err(GraphError::StepWritesNothing {
                step: s.id.to_string(),
            });
        }
        let read_now = read.find_all(&s.reads, &owner).chain(known(read_then));
        reads.try_push(read_now, too_many_reads)?;
        let written_now = written
            .find_all(&s.writes, &owner)
            .chain(known(written_then));
        writes.try_push(written_now, too_many_writes)?;
        // Device and loop indices fit `u32` (`index_ids`).
        steps.push(ResolvedStep {
            device: device_of(&owner, &s.device)? as u32,
            loop_index: OptionalIndex::new(match &s.loop_id {
                None => None,
                Some(id) => Some(lookup(loop_index, owner, Element::Loop, id)? as u32),
            }),
        });
    }

    Ok((steps, reads, writes))
}

/// The steps of a schedule recorded as `events`, resolved: each one's device (its run's), and
/// no loop; `writes` are what the recorded lifetimes say each writes, and each writes something.
fn event_steps(
    g: &Graph,
    events: &Events,
    devices: &Ids<'_>,
    writes: &Lists,
) -> Result<Vec<ResolvedStep>, GraphError> {
    // With no lifetimes recorded there are no lists, and no step writes anything.
    let n = events.times.len();
    if let Some(s) = (0..n).find(|&s| s >= writes.len() || writes[s].is_empty()) {
        return Err(GraphError::StepWritesNothing {
            step: g.step(s).id.to_string(),
        });
    }
    let mut steps = Vec::with_capacity(n);
    let mut start = 0;
    for run in &events.runs {
        let owner = || format!("the events of `{}`", run.prefix);
        let device = device_index(devices, &owner, &run.device)?;
        // At most `MAX_DEVICES`.
        let step = ResolvedStep {
            device: device as u32,
            loop_index: OptionalIndex::default(),
        };
        steps.extend(std::iter::repeat_n(step, run.end as usize - start));
        start = run.end as usize;
    }
    Ok(steps)
}

/// Checks a schedule recorded as `events` (a graph's, which gives no `steps` beside them): its
/// runs end in order at its last step, and their prefixes differ, and the times of each run
/// strictly increase. So every step's id (`<prefix>t=<time>`) is its own: two ids with
/// different prefixes could be equal only if one prefix were the other followed by `t=` and
/// digits and more, and then the shorter's digits would be followed by `t=`.
fn check_events(g: &Graph, events: &Events) -> Result<(), GraphError> {
    let bad = |reason: String| Err(GraphError::BadEvents { reason });
    if !g.steps.is_empty() {
        return bad(format!(
            "the graph lists {} steps beside them; it gives one or the other",
            g.steps.len()
        ));
    }
    let n = events.times.len();
    if n > u32::MAX as usize {
        return Err(GraphError::TooLarge {
            what: Element::Step,
            count: n,
            limit: MAX_ELEMENTS,
        });
    }
    let mut start = 0;
    for (r, run) in events.runs.iter().enumerate() {
        let end = run.end as usize;
        if end <= start || end > n {
            return bad(format!(
                "run {r} ends at step {end}, not after step {start} and within the {n} steps"
            ));
        }
        if let Some(w) = events.times[start..end]
            .windows(2)
            .position(|w| w[0] >= w[1])
        {
            return bad(format!(
                "the times of run {r} do not increase at step {}",
                start + w + 1
            ));
        }
        if events.runs[..r]
            .iter()
            .any(|other| other.prefix == run.prefix)
        {
            return bad(format!("runs share the prefix `{}`", run.prefix));
        }
        start = end;
    }
    if start != n {
        return bad(format!(
            "its runs end at step {start}, not at its last, {n}"
        ));
    }
    Ok(())
}

/// Groups the schedule into positions ([`Positions::of`]), once each loop's steps are found
/// contiguous.
fn positions(g: &Graph, steps: &[ResolvedStep]) -> Result<Positions, GraphError> {
    let mut closed = vec![false; g.loops.len()];
    let mut running = None;
    for (i, s) in steps.iter().enumerate() {
        let l = s.loop_index.get().map(|l| l as usize);
        if l == running {
            continue;
        }
        if let Some(prev) = running {
            closed[prev] = true;
        }
        if let Some(l) = l
            && closed[l]
        {
            return Err(GraphError::NonContiguousLoop {
                loop_id: g.loops[l].id.clone(),
                step: g.step(i).id.to_string(),
                index: i,
            });
        }
        running = l;
    }
    Ok(Positions::of(steps))
}

/// Builders of small graphs for the core's tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Step, Tensor};

    /// A tensor of `bytes` bytes.
    pub(crate) fn tensor(id: &str, bytes: u64) -> Tensor {
        Tensor {
            id: id.into(),
            bytes: Some(bytes),
            ..Tensor::default()
        }
    }

    /// A step that reads and writes the tensors named.
    pub(crate) fn step(id: &str, reads: &[&str], writes: &[&str]) -> Step {
        Step {
            id: id.into(),
            reads: reads.iter().map(|&s| s.into()).collect(),
            writes: writes.iter().map(|&s| s.into()).collect(),
            ..Step::default()
        }
    }
}

/// What a graph holds per tensor and per step bounds the dumps the page can load (a snapshot
/// makes one of each per allocation): these hold the sizes they were brought down to.
#[cfg(all(test, target_pointer_width = "64"))]
mod size_tests {
    use super::*;

    #[test]
    fn a_tensor_and_a_step_stay_small() {
        assert_eq!(std::mem::size_of::<Tensor>(), 104);
        assert_eq!(std::mem::size_of::<Step>(), 168);
        assert_eq!(std::mem::size_of::<ResolvedStep>(), 8);
        assert_eq!(std::mem::size_of::<Position>(), 12);
        assert_eq!(std::mem::size_of::<ResolvedTensor>(), 24);
        assert_eq!(std::mem::size_of::<crate::problem::Buffer>(), 24);
        // An id of up to 24 bytes is held inline.
        let id = Id::from("a 24-byte id: no heap!!!");
        assert_eq!((id.len(), id.is_heap_allocated()), (24, false));
    }

    /// A tensor that declares nothing beyond its size holds no declaration; one that does
    /// holds it whole; both read and write flat JSON, in the fields' order.
    #[test]
    fn a_declaration_is_boxed_only_where_there_is_one() {
        let sized: Tensor = serde_json::from_str(r#"{"id": "a", "bytes": 8}"#).unwrap();
        assert!(sized.declared.0.is_none());
        assert_eq!(sized.declared.view_offset, 0);
        let json = r#"{"id":"v","shape":[2,"B"],"dtype":"f16","alignment":64,"kind":"output","view_of":"a","view_offset":4,"memory_space":"host"}"#;
        let view: Tensor = serde_json::from_str(json).unwrap();
        let declaration = view.declared.0.as_deref().expect("a declaration");
        assert_eq!(
            declaration,
            &Declaration {
                shape: Some(vec![Dim::Fixed(2), Dim::Param("B".into())]),
                dtype: Some("f16".into()),
                alignment: Some(64),
                view_of: Some("a".into()),
                view_offset: 4,
                memory_space: Some(MemorySpace::Host),
            }
        );
        assert_eq!(view.kind, TensorKind::Output);
        assert_eq!(serde_json::to_string(&view).unwrap(), json);
        assert_eq!(
            serde_json::to_string(&sized).unwrap(),
            r#"{"id":"a","bytes":8}"#
        );
        // Writing a field makes the box; a box that declares nothing equals none.
        let mut written = sized.clone();
        written.declared.view_offset = 0;
        assert!(written.declared.0.is_some());
        assert_eq!(written, sized);
        written.declared.dtype = Some("f32".into());
        assert_ne!(written, sized);
        // Unknown fields are refused as they were.
        let e = serde_json::from_str::<Tensor>(r#"{"id": "a", "bites": 8}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown field `bites`, expected one of `id`, `name`"),
            "{e}"
        );
    }

    /// A step's lists are read at their lengths, with the same ids, and refused as serde's
    /// lists are.
    #[test]
    fn a_steps_lists_are_read_at_their_lengths() {
        let lists = |json: &str| {
            let s: Step = serde_json::from_str(json).unwrap();
            let sizes = |l: &Vec<Id>| (l.len(), l.capacity());
            (sizes(&s.reads), sizes(&s.writes), s)
        };
        let (reads, writes, s) = lists(r#"{"id": "s", "writes": ["a"]}"#);
        assert_eq!((reads, writes), ((0, 0), (1, 1)));
        assert_eq!(s.writes, ["a"]);
        for n in [2, 3, 5, 17] {
            let ids: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
            let json = format!(r#"{{"id": "s", "reads": {ids:?}, "writes": []}}"#);
            let (reads, writes, s) = lists(&json);
            assert_eq!((reads, writes), ((n, n), (0, 0)));
            assert_eq!(s.reads, ids);
        }
        let e = serde_json::from_str::<Step>(r#"{"id": "s", "writes": "a"}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid type: string \"a\", expected a sequence")
        );
    }
}

#[cfg(test)]
mod site_tests {
    use super::*;

    fn frame(function: &str, file: &str, line: u32) -> Frame {
        Frame {
            function: function.into(),
            file: file.into(),
            line,
        }
    }

    #[test]
    fn the_site_is_the_first_frame_in_user_code() {
        let stack = [
            frame("torch::unwind::unwind()", "??", 0),
            frame(
                "c10::cuda::CUDACachingAllocator::malloc",
                "CUDACachingAllocator.cpp",
                12,
            ),
            frame(
                "einsum",
                "/venv/lib/python3.12/site-packages/torch/functional.py",
                373,
            ),
            frame(
                "einsum",
                "D:\\venv\\Lib\\site-packages\\einops\\einops.py",
                939,
            ),
            frame("<module>", "<frozen runpy>", 88),
            frame("forward", "/home/me/cs336_basics/model.py", 39),
            frame("main", "/home/me/train.py", 10),
        ];
        let s = site(&stack).unwrap();
        assert_eq!(s.to_string(), "forward (model.py:39)");
        assert!(stack[..5].iter().all(Frame::is_internal));
        assert!(!stack[6].is_internal());
    }

    #[test]
    fn a_stack_of_internal_frames_is_named_by_its_first() {
        let stack = [frame("malloc", "??", 0), frame("f", "x.cpp", 1)];
        assert_eq!(site(&stack).unwrap().to_string(), "malloc (??)");
        assert_eq!(site(&[]), None);
    }

    #[test]
    fn groups_by_site_add_up_and_sort_by_bytes() {
        let a = [frame("forward", "/m/model.py", 3)];
        let b = [
            frame("attn", "/m/model.py", 9),
            frame("forward", "/m/model.py", 3),
        ];
        let groups = group_by_site([
            (&a[..], 5, 0),
            (&b[..], 7, 1),
            (&a[..], 4, 2),
            (&[][..], 1, 3),
        ]);
        let got: Vec<(&str, u64, &[usize])> = groups
            .iter()
            .map(|g| (g.site.as_str(), g.bytes, &g.tensors[..]))
            .collect();
        assert_eq!(
            got,
            [
                ("forward (model.py:3)", 9, &[0, 2][..]),
                ("attn (model.py:9)", 7, &[1][..]),
                (NO_STACK, 1, &[3][..]),
            ]
        );
    }

    #[test]
    fn an_operator_frame_is_the_users() {
        let stack = [
            frame("aten::mm", "", 0),
            frame("forward", "/usr/lib/python3.11/x.py", 3),
        ];
        assert!(!stack[0].is_internal());
        assert!(
            stack[1].is_internal(),
            "the standard library is not the user's"
        );
        assert_eq!(site(&stack).unwrap().to_string(), "aten::mm");
    }
}

#[cfg(test)]
mod index_tests {
    use super::testing::{step, tensor};
    use super::*;

    /// A graph of more devices than [`MAX_DEVICES`] is refused, saying how many; one of as
    /// many resolves.
    #[test]
    fn a_graph_of_too_many_devices_is_refused() {
        let with_devices = |n: usize| Graph {
            devices: (0..n)
                .map(|d| Device {
                    id: format!("cuda:{d}"),
                    hardware_class: None,
                })
                .collect(),
            tensors: vec![tensor("t", 8)],
            steps: vec![step("s", &[], &["t"])],
            ..Graph::default()
        };
        assert!(with_devices(MAX_DEVICES).resolve().is_ok());
        let e = with_devices(MAX_DEVICES + 1).resolve().unwrap_err();
        assert_eq!(
            e.to_string(),
            "the graph has 1025 devices, more than the 1024 memplan supports"
        );
    }

    proptest::proptest! {
        /// Guessing or not, a finder answers as the map does: for ids in order, in runs, at
        /// random, and ids of no tensor.
        #[test]
        fn a_finder_answers_as_the_map_does(
            n in 1usize..40,
            asked in proptest::collection::vec((0usize..50, 1usize..6), 0..200),
        ) {
            let tensors: Vec<Tensor> = (0..n).map(|i| tensor(&format!("t{i}"), 8)).collect();
            let index = index_ids(Element::Tensor, tensors.iter().map(|t| t.id.as_str())).unwrap();
            let mut finder = Finder::new(&tensors, &index);
            // A run of `len` ids from `start` on, which may pass the last tensor.
            for (start, len) in asked {
                for i in start..start + len {
                    let id = format!("t{i}");
                    proptest::prop_assert_eq!(finder.find(&id), index.get(id.as_str()).copied());
                }
            }
        }
    }

    /// Guesses stop once they miss more than they hit, and are made while they hit.
    #[test]
    fn a_finder_guesses_while_its_guesses_pay() {
        let tensors: Vec<Tensor> = (0..1000).map(|i| tensor(&format!("t{i}"), 8)).collect();
        let index = index_ids(Element::Tensor, tensors.iter().map(|t| t.id.as_str())).unwrap();
        let mut finder = Finder::new(&tensors, &index);
        for i in 0..500 {
            finder.find(&format!("t{i}"));
        }
        assert_eq!((finder.hits, finder.misses), (500, 0));
        // Backwards, every guess misses: it stops after 64 misses past its hits.
        let mut finder = Finder::new(&tensors, &index);
        for i in (0..1000).rev() {
            finder.find(&format!("t{i}"));
        }
        assert_eq!(
            (finder.hits, finder.misses),
            (0, Finder::MOST_MISSES_AHEAD + 1)
        );
    }

    /// A tensor is found by its id once resolved, from a reorder too; the index, made at the
    /// first lookup, leaves the resolved graph equal to one that has not made it.
    #[test]
    fn tensors_are_found_by_id_and_the_index_is_not_part_of_equality() {
        let g = Graph {
            tensors: vec![tensor("a", 8), tensor("b", 8)],
            steps: vec![step("s0", &[], &["a"]), step("s1", &["a"], &["b"])],
            ..Graph::default()
        };
        let (asked, fresh) = (g.resolve().unwrap(), g.resolve().unwrap());
        assert_eq!(asked.tensor_of(&g, "b"), Some(1));
        assert_eq!(asked.tensor_of(&g, "a"), Some(0));
        assert_eq!(asked.tensor_of(&g, "c"), None);
        assert_eq!(asked, fresh);
        assert_eq!(fresh.reordered(&[0, 1]).tensor_of(&g, "b"), Some(1));
    }
}

#[cfg(test)]
mod lifetime_tests {
    use super::testing::{step, tensor};
    use super::*;

    /// `lifetimes.len()` tensors over `steps` pinned steps, each tensor living as given, the
    /// steps listing nothing.
    fn recorded(steps: usize, lifetimes: &[(u32, u32)]) -> Graph {
        Graph {
            tensors: (0..lifetimes.len())
                .map(|t| tensor(&format!("t{t}"), 8 * (t as u64 + 1)))
                .collect(),
            steps: (0..steps)
                .map(|s| Step {
                    pinned: true,
                    ..step(&format!("s{s}"), &[], &[])
                })
                .collect(),
            lifetimes: lifetimes.to_vec(),
            ..Graph::default()
        }
    }

    proptest::proptest! {
        /// A graph that records lifetimes resolves as the same graph with its steps listing
        /// them, reorders as it, and is written as it.
        #[test]
        fn recorded_lifetimes_resolve_as_the_lists_they_stand_for(
            steps in 1usize..8,
            ends in proptest::collection::vec((0u32..8, 0u32..8), 1..20),
        ) {
            // Every step writes a tensor: one living at it alone, among the others.
            let lifetimes: Vec<(u32, u32)> = (ends.iter())
                .map(|&(a, b)| (a % steps as u32, b % steps as u32))
                .map(|(a, b)| (a.min(b), a.max(b)))
                .chain((0..steps as u32).map(|s| (s, s)))
                .collect();
            let g = recorded(steps, &lifetimes);
            let listed = g.listed().into_owned();
            proptest::prop_assert!(listed.lifetimes.is_empty());
            // Each tensor written at its first step and read at its last, in tensor order.
            for (t, &(first, last)) in lifetimes.iter().enumerate() {
                let id = Id::from(format!("t{t}"));
                proptest::prop_assert!(listed.steps[first as usize].writes.contains(&id));
                proptest::prop_assert_eq!(
                    listed.steps[last as usize].reads.contains(&id),
                    last != first
                );
            }
            proptest::prop_assert_eq!(g.resolve().unwrap(), listed.resolve().unwrap());
            let order: Vec<usize> = (0..steps).rev().collect();
            let reversed = g.reordered(&order);
            proptest::prop_assert_eq!(
                reversed.listed().into_owned(),
                listed.reordered(&order)
            );
        }
    }

    /// `lifetimes.len()` tensors over a schedule recorded as events: runs of `runs[r]` steps
    /// each, run `r` on device `d{r}` (the first device unnamed, as importers leave it) with
    /// ids `d{r} t=<time>`, its times `gaps` apart; and the same graph with those steps listed.
    fn evented(runs: &[usize], gaps: &[u64], lifetimes: &[(u32, u32)]) -> (Graph, Graph) {
        let mut events = Events::default();
        let mut times = Vec::new();
        let mut steps = Vec::new();
        for (r, &len) in runs.iter().enumerate() {
            let device = (r > 0).then(|| Arc::from(format!("d{r}")));
            let mut time = r as u64;
            for k in 0..len {
                time += gaps[(times.len() + k) % gaps.len()];
                times.push(time);
                steps.push(Step {
                    id: format!("d{r} t={time}").into(),
                    time: Some(time),
                    device: device.clone(),
                    pinned: true,
                    ..Step::default()
                });
            }
            events.runs.push(EventRun {
                end: times.len() as u32,
                device,
                prefix: format!("d{r} ").into(),
            });
        }
        let listed = Graph {
            devices: (0..runs.len())
                .map(|r| Device {
                    id: format!("d{r}"),
                    hardware_class: None,
                })
                .collect(),
            steps,
            ..recorded(0, lifetimes)
        };
        events.times = times.into();
        let evented = Graph {
            steps: Vec::new(),
            events: Some(events),
            ..listed.clone()
        };
        (evented, listed)
    }

    proptest::proptest! {
        /// A schedule recorded as events reads, resolves, lists and reorders as the same
        /// steps given one by one.
        #[test]
        fn events_are_the_steps_they_stand_for(
            runs in proptest::collection::vec(1usize..6, 1..4),
            gaps in proptest::collection::vec(1u64..5, 1..4),
            ends in proptest::collection::vec((0u32..20, 0u32..20), 0..20),
        ) {
            let steps = runs.iter().sum::<usize>() as u32;
            // Every step writes a tensor: one living at it alone, among the others.
            let lifetimes: Vec<(u32, u32)> = (ends.iter())
                .map(|&(a, b)| (a % steps, b % steps))
                .map(|(a, b)| (a.min(b), a.max(b)))
                .chain((0..steps).map(|s| (s, s)))
                .collect();
            let (g, listed) = evented(&runs, &gaps, &lifetimes);
            proptest::prop_assert_eq!(g.step_count(), listed.steps.len());
            let schedule: Vec<Step> = g.schedule().map(Cow::into_owned).collect();
            proptest::prop_assert_eq!(&schedule, &listed.steps);
            for (s, step) in listed.steps.iter().enumerate() {
                proptest::prop_assert_eq!(g.step_time(s), step.time);
                proptest::prop_assert!(g.step_pinned(s));
                proptest::prop_assert_eq!(g.step_cost(s), step.cost);
            }
            proptest::prop_assert_eq!(g.resolve().unwrap(), listed.resolve().unwrap());
            proptest::prop_assert_eq!(g.listed().into_owned(), listed.listed().into_owned());
            let order: Vec<usize> = (0..steps as usize).rev().collect();
            proptest::prop_assert_eq!(g.reordered(&order), listed.reordered(&order));
        }
    }

    /// Events whose ids could repeat, or that do not cover the schedule, or beside listed
    /// steps, are refused, as a step of them that writes nothing.
    #[test]
    fn bad_events_are_refused() {
        let (g, listed) = evented(&[2, 2], &[1], &[(0, 1), (1, 1), (2, 3), (3, 3)]);
        assert!(g.resolve().is_ok());
        let message = |change: &dyn Fn(&mut Events)| {
            let mut g = g.clone();
            change(g.events.as_mut().unwrap());
            g.resolve().unwrap_err().to_string()
        };
        assert_eq!(
            message(&|e| e.runs[1].prefix = e.runs[0].prefix.clone()),
            "the recorded events: runs share the prefix `d0 `"
        );
        assert_eq!(
            message(&|e| e.times = [e.times[0], e.times[0]]
                .into_iter()
                .chain(e.times[2..].iter().copied())
                .collect()),
            "the recorded events: the times of run 0 do not increase at step 1"
        );
        assert_eq!(
            message(&|e| e.runs[1].end = 3),
            "the recorded events: its runs end at step 3, not at its last, 4"
        );
        assert_eq!(
            message(&|e| e.runs[0].end = 5),
            "the recorded events: run 0 ends at step 5, not after step 0 and within the 4 steps"
        );
        let beside = Graph {
            steps: listed.steps.clone(),
            ..g.clone()
        };
        assert_eq!(
            beside.resolve().unwrap_err().to_string(),
            "the recorded events: the graph lists 4 steps beside them; it gives one or the other"
        );
        // Step 1 is written by no tensor once the second lives from step 0.
        let idle = Graph {
            lifetimes: vec![(0, 1), (0, 1), (2, 3), (3, 3)],
            ..g.clone()
        };
        assert_eq!(
            idle.resolve().unwrap_err().to_string(),
            "step `d0 t=2` writes nothing"
        );
        // Events no run covers are refused, and their steps are still made, unnamed by a run.
        let mut runless = g.clone();
        runless.events.as_mut().unwrap().runs.clear();
        assert_eq!(runless.step(1).id, "t=2");
        assert_eq!(runless.step(1).device, None);
        assert_eq!(
            runless.resolve().unwrap_err().to_string(),
            "the recorded events: its runs end at step 0, not at its last, 4"
        );
    }

    /// A recorded lifetime past the steps, running backwards, or one too few is refused,
    /// naming the tensor; a dump cannot give lifetimes; and a graph of recorded lifetimes is
    /// never written without its lists.
    #[test]
    fn bad_recorded_lifetimes_are_refused_and_never_written_unlisted() {
        let g = recorded(2, &[(0, 1), (1, 1)]);
        assert!(g.resolve().is_ok());
        let with = |lifetimes: Vec<(u32, u32)>| Graph {
            lifetimes,
            ..g.clone()
        };
        let message = |g: Graph| g.resolve().unwrap_err().to_string();
        assert_eq!(
            message(with(vec![(0, 2), (1, 1)])),
            "tensor `t0`: its recorded lifetime runs from step 0 to step 2 of 2"
        );
        assert_eq!(
            message(with(vec![(0, 1), (1, 0)])),
            "tensor `t1`: its recorded lifetime runs from step 1 to step 0 of 2"
        );
        assert_eq!(
            message(with(vec![(0, 1)])),
            "tensor `t1`: the graph records lifetimes for 1 of its 2 tensors"
        );
        // A dump cannot give them: they are the importers' own.
        let given = r#"{"tensors": [], "steps": [], "lifetimes": [[0, 0]]}"#;
        let e = serde_json::from_str::<Graph>(given)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `lifetimes`"), "{e}");
        let e = serde_json::to_string(&g).unwrap_err().to_string();
        assert!(e.contains("`Graph::listed`"), "{e}");
        assert!(serde_json::to_string(&*g.listed()).is_ok());
    }
}

#[cfg(test)]
mod position_tests {
    use super::testing::{step, tensor};
    use super::*;

    /// Five steps in a chain, `l1` to `l3` in loop `L` where `looped` says.
    fn chain(looped: [bool; 5]) -> Graph {
        let mut g = Graph {
            tensors: (0..6).map(|t| tensor(&format!("t{t}"), 8)).collect(),
            steps: (0..5)
                .map(|s| {
                    step(
                        &format!("l{s}"),
                        &[&format!("t{s}")],
                        &[&format!("t{}", s + 1)],
                    )
                })
                .collect(),
            loops: vec![Loop {
                id: "L".into(),
                trip_count: Some(3),
                back_edge_reads: Vec::new(),
            }],
            ..Graph::default()
        };
        for (s, looped) in g.steps.iter_mut().zip(looped) {
            s.loop_id = looped.then(|| "L".into());
        }
        g
    }

    /// `(steps, loop)` of each position, as read through `Positions`.
    fn read(positions: &Positions) -> Vec<(std::ops::RangeInclusive<usize>, Option<usize>)> {
        let read: Vec<_> = positions
            .iter()
            .map(|p| (p.steps(), p.loop_index()))
            .collect();
        assert_eq!(read.len(), positions.len());
        for (p, expected) in read.iter().enumerate() {
            let at = positions.get(p).unwrap();
            assert_eq!((at.steps(), at.loop_index()), expected.clone());
        }
        assert_eq!(positions.get(positions.len()), None);
        read
    }

    /// A schedule with no loop has a position per step, counted, not stored; one with a loop
    /// lists them, the loop's steps as one; a reorder keeps each form.
    #[test]
    fn positions_are_counted_without_loops_and_listed_with_them() {
        let g = chain([false; 5]);
        let resolved = g.resolve().unwrap();
        assert_eq!(resolved.positions, Positions::EachStep(5));
        let each: Vec<_> = (0..5).map(|s| (s..=s, None)).collect();
        assert_eq!(read(&resolved.positions), each);
        let reordered = resolved.reordered(&[0, 1, 2, 3, 4]);
        assert_eq!(reordered.positions, Positions::EachStep(5));

        let g = chain([false, true, true, true, false]);
        let resolved = g.resolve().unwrap();
        assert!(matches!(resolved.positions, Positions::Listed(_)));
        let listed = vec![(0..=0, None), (1..=3, Some(0)), (4..=4, None)];
        assert_eq!(read(&resolved.positions), listed);
        assert_eq!(
            read(&resolved.reordered(&[0, 1, 2, 3, 4]).positions),
            listed
        );
    }

    /// A loop whose steps another step splits is refused, naming the step that reopens it.
    #[test]
    fn a_loop_split_by_another_step_is_refused() {
        let g = chain([false, true, false, true, false]);
        match g.resolve() {
            Err(GraphError::NonContiguousLoop {
                loop_id,
                step,
                index,
            }) => assert_eq!((loop_id.as_str(), step.as_str(), index), ("L", "l3", 3)),
            other => panic!("{other:?}"),
        }
        assert!(chain([true, true, false, false, false]).resolve().is_ok());
    }
}
