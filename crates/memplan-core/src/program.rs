//! Programs: several routines compiled in a tree of contexts, and the events that create the
//! contexts, run the routines and release the contexts (seed pool-and-arena-layout).
//!
//! A routine is planned as any graph: its plan over its whole node set is its *model of the
//! peak*, a number that depends only on its code and placements. The memory a program really
//! uses differs from it in three ways this module models:
//!
//! - **Shared tensors are skipped.** A tensor an ancestor context holds (or an earlier routine
//!   of the same context holds) is not allocated again: the routine reads it where its holder
//!   placed it. A context *holds* its routines' always-live tensors that own bytes, except
//!   constants. The routine's *own pools* are its plan with those tensors given no storage.
//! - **Per-device constants are shared.** A constant tensor lives once per device, whatever
//!   context brought it: the first create that needs it allocates it in a device pool, and no
//!   release frees it.
//! - **Pools are allocated one by one, their bases page-rounded.** Each pool occupies its size
//!   rounded up to its device's page.
//!
//! The used memory is a step function over the events: a create allocates the context's own
//! pools (and the new constants), a release frees the context's own pools per pool, in order,
//! and idempotently: a released context frees nothing, and a release that fails after a strict
//! prefix of its pools (`fails_after`) leaves the context unreleased, so that a retry frees only
//! the rest. A run changes nothing: a routine's pools exist from its context's create.
//!
//! Invariant: [`simulate`] only adds and subtracts the figures it is given, with checked
//! arithmetic; what it reports for a run (the model, the used memory and the terms between
//! them) adds up exactly, which its tests hold it to.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::graph::{Graph, ResolvedGraph, Storage, TensorKind};
use crate::placement::PoolRole;

/// The page a pool's base is rounded up to when a device's class gives none: the smallest
/// mapping any driver makes (a CPU's 4 KiB page). GPU classes give their allocator's
/// granularity (CUDA: 2 MiB).
pub const DEFAULT_PAGE_BYTES: u64 = 4096;

/// A program: contexts (parents declared before their children) and the events run on them.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub contexts: Vec<Context>,
    pub events: Vec<Event>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    pub id: String,
    /// The context it derives from: it reads what its ancestors hold.
    pub parent: Option<String>,
    /// The routines compiled in it, in compile order.
    pub routines: Vec<Routine>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Routine {
    /// Unique in the program: a `run` event names it.
    pub id: String,
    pub graph: Graph,
}

/// One event of the program, in the order the program runs them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// Allocates the context's own pools (its routines are compiled in it).
    Create { context: String },
    /// Runs a routine in its (live) context.
    Run { routine: String },
    /// Frees the context's own pools. With `fails_after: k`, the cleanup fails after freeing
    /// `k` more pools and the context stays unreleased: a later release frees the rest.
    Release {
        context: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fails_after: Option<u32>,
    },
}

/// Why a program cannot be planned. Each names the context, routine or event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgramError {
    #[error("a program needs at least one context")]
    NoContexts,
    #[error("duplicate context id `{0}`")]
    DuplicateContext(String),
    #[error("duplicate routine id `{0}` (routine ids are unique in a program: a run names one)")]
    DuplicateRoutine(String),
    #[error("context `{context}`: its parent `{parent}` is not a context declared before it")]
    Parent { context: String, parent: String },
    #[error("event {event}: {detail}")]
    Event { event: usize, detail: String },
    #[error("context `{context}`, routine `{routine}`: {detail}")]
    Routine {
        context: String,
        routine: String,
        detail: String,
    },
}

/// The most contexts a program may have (its importer refuses more). A run's plan weighs every
/// live context against its routine's, so a program's plan costs its events times its
/// contexts: a few megabytes of nested contexts would plan for minutes. Real programs have a
/// handful.
pub const MAX_CONTEXTS: usize = 256;

/// A routine's place in the program: the context it is compiled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutineRef {
    pub context: usize,
    /// Its index among all routines, contexts in order.
    pub index: usize,
}

/// A program whose ids and events are checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedProgram {
    /// Per context: its parent's index.
    pub parents: Vec<Option<usize>>,
    /// Every routine, contexts in order.
    pub routines: Vec<RoutineRef>,
    pub events: Vec<ResolvedEvent>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolvedEvent {
    Create {
        context: usize,
    },
    Run {
        routine: usize,
    },
    Release {
        context: usize,
        fails_after: Option<u32>,
    },
}

impl Program {
    /// Every routine with its context, contexts in order.
    pub fn routines(&self) -> impl Iterator<Item = (&Context, &Routine)> {
        self.contexts
            .iter()
            .flat_map(|c| c.routines.iter().map(move |r| (c, r)))
    }

    /// Checks ids, parents and the event sequence: a context is created once, after its
    /// parent and while it is live; a routine runs while its context is created and not yet
    /// being released; a context is not released while a child is live.
    pub fn resolve(&self) -> Result<ResolvedProgram, ProgramError> {
        if self.contexts.is_empty() {
            return Err(ProgramError::NoContexts);
        }
        let mut context_index = BTreeMap::new();
        let mut parents = Vec::with_capacity(self.contexts.len());
        for (i, c) in self.contexts.iter().enumerate() {
            let parent =
                match &c.parent {
                    None => None,
                    Some(p) => Some(*context_index.get(p.as_str()).ok_or_else(|| {
                        ProgramError::Parent {
                            context: c.id.clone(),
                            parent: p.clone(),
                        }
                    })?),
                };
            if context_index.insert(c.id.as_str(), i).is_some() {
                return Err(ProgramError::DuplicateContext(c.id.clone()));
            }
            parents.push(parent);
        }
        let mut routine_index = BTreeMap::new();
        let mut routines = Vec::new();
        for (ci, c) in self.contexts.iter().enumerate() {
            for r in &c.routines {
                let index = routines.len();
                if routine_index.insert(r.id.as_str(), index).is_some() {
                    return Err(ProgramError::DuplicateRoutine(r.id.clone()));
                }
                routines.push(RoutineRef { context: ci, index });
            }
        }
        if self.events.is_empty() {
            return Err(ProgramError::Event {
                event: 0,
                detail: "a program needs events (create a context, run a routine, release it)"
                    .into(),
            });
        }
        #[derive(Clone, Copy, PartialEq)]
        enum State {
            Unborn,
            Live,
            Releasing,
            Released,
        }
        let mut state = vec![State::Unborn; self.contexts.len()];
        let mut events = Vec::with_capacity(self.events.len());
        for (e, event) in self.events.iter().enumerate() {
            let err = |detail: String| ProgramError::Event { event: e, detail };
            let context = |id: &str| {
                context_index
                    .get(id)
                    .copied()
                    .ok_or_else(|| err(format!("there is no context `{id}`")))
            };
            events.push(match event {
                Event::Create { context: id } => {
                    let c = context(id)?;
                    if state[c] != State::Unborn {
                        return Err(err(format!("context `{id}` is created twice")));
                    }
                    if let Some(p) = parents[c].filter(|&p| state[p] != State::Live) {
                        return Err(err(format!(
                            "context `{id}` is created while its parent `{}` is not live",
                            self.contexts[p].id
                        )));
                    }
                    state[c] = State::Live;
                    ResolvedEvent::Create { context: c }
                }
                Event::Run { routine } => {
                    let r = *routine_index
                        .get(routine.as_str())
                        .ok_or_else(|| err(format!("there is no routine `{routine}`")))?;
                    let c = routines[r].context;
                    if state[c] != State::Live {
                        return Err(err(format!(
                            "routine `{routine}` runs while its context `{}` is {}",
                            self.contexts[c].id,
                            match state[c] {
                                State::Unborn => "not yet created",
                                _ => "being released or released",
                            }
                        )));
                    }
                    ResolvedEvent::Run { routine: r }
                }
                Event::Release {
                    context: id,
                    fails_after,
                } => {
                    let c = context(id)?;
                    if state[c] == State::Unborn {
                        return Err(err(format!(
                            "context `{id}` is released before it is created"
                        )));
                    }
                    if let Some(child) = (0..self.contexts.len())
                        .find(|&k| parents[k] == Some(c) && state[k] == State::Live)
                    {
                        return Err(err(format!(
                            "context `{id}` is released while its child `{}` is live",
                            self.contexts[child].id
                        )));
                    }
                    if state[c] != State::Released {
                        state[c] = if fails_after.is_some() {
                            State::Releasing
                        } else {
                            State::Released
                        };
                    }
                    ResolvedEvent::Release {
                        context: c,
                        fails_after: *fails_after,
                    }
                }
            });
        }
        Ok(ResolvedProgram {
            parents,
            routines,
            events,
        })
    }
}

impl ResolvedProgram {
    /// `context` and its ancestors, nearest first.
    pub fn lineage(&self, context: usize) -> Vec<usize> {
        let mut lineage = vec![context];
        while let Some(p) = self.parents[*lineage.last().expect("not empty")] {
            lineage.push(p);
        }
        lineage
    }
}

/// What a routine's tensor is to the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Allocated in the routine's own pools.
    Own,
    /// Read where this routine (an ancestor context's, or an earlier one of its context) holds it.
    HeldBy(usize),
    /// A per-device constant.
    Constant,
}

/// Per routine, per tensor: where it lives in the program. Tensors that own no bytes (views,
/// elided) are `Own`: they follow their root.
pub fn sharing(
    program: &Program,
    resolved: &ResolvedProgram,
    graphs: &[&ResolvedGraph],
) -> Result<Vec<Vec<Sharing>>, ProgramError> {
    // Per context: tensor id -> (holding routine, bytes, device id) of what it holds.
    let mut held: Vec<BTreeMap<&str, (usize, u64, &str)>> =
        vec![BTreeMap::new(); program.contexts.len()];
    let mut constants: BTreeMap<(&str, &str), (usize, u64)> = BTreeMap::new();
    let mut out = Vec::with_capacity(resolved.routines.len());
    for (r, (context, routine)) in program.routines().enumerate() {
        let c = resolved.routines[r].context;
        let lineage = resolved.lineage(c);
        let g = graphs[r];
        let mut shares = Vec::with_capacity(g.tensors.len());
        for (t, tensor) in routine.graph.tensors.iter().enumerate() {
            let rt = &g.tensors[t];
            if rt.storage != Storage::Owned {
                shares.push(Sharing::Own);
                continue;
            }
            let device = g.device_ids[rt.device as usize].as_str();
            let occupied = occupied(rt);
            let mismatch = |holder: usize, bytes: u64, dev: &str| {
                let (hc, hr) = program
                    .routines()
                    .nth(holder)
                    .map(|(c, r)| (c.id.as_str(), r.id.as_str()))
                    .unwrap_or_default();
                ProgramError::Routine {
                    context: context.id.clone(),
                    routine: routine.id.clone(),
                    detail: format!(
                        "tensor `{}` is {occupied} bytes on `{device}`, but routine `{hr}` (context `{hc}`) holds it as {bytes} bytes on `{dev}`",
                        tensor.id
                    ),
                }
            };
            if tensor.kind == TensorKind::Constant {
                match constants.get(&(device, tensor.id.as_str())) {
                    Some(&(holder, bytes)) if bytes != occupied => {
                        return Err(mismatch(holder, bytes, device));
                    }
                    Some(_) => {}
                    None => {
                        constants.insert((device, tensor.id.as_str()), (r, occupied));
                    }
                }
                shares.push(Sharing::Constant);
                continue;
            }
            match lineage
                .iter()
                .find_map(|&k| held[k].get(tensor.id.as_str()))
            {
                Some(&(holder, bytes, dev)) => {
                    if bytes != occupied || dev != device {
                        return Err(mismatch(holder, bytes, dev));
                    }
                    shares.push(Sharing::HeldBy(holder));
                }
                None => shares.push(Sharing::Own),
            }
        }
        for (t, tensor) in routine.graph.tensors.iter().enumerate() {
            let rt = &g.tensors[t];
            if shares[t] == Sharing::Own && rt.storage == Storage::Owned && rt.always_live {
                let device = g.device_ids[rt.device as usize].as_str();
                let occupied = occupied(rt);
                held[c].insert(tensor.id.as_str(), (r, occupied, device));
            }
        }
        out.push(shares);
    }
    Ok(out)
}

/// A tensor's bytes rounded up to its alignment (`Graph::resolve` checked that it fits).
fn occupied(t: &crate::graph::ResolvedTensor) -> u64 {
    t.occupied_size().unwrap_or(u64::MAX)
}

/// A pool of a routine's own plan, as [`simulate`] takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutinePool {
    /// The program's device index.
    pub device: usize,
    pub role: PoolRole,
    pub bytes: u64,
}

/// A routine planned, as [`simulate`] takes it. Devices are the program's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RoutineFigures {
    /// Per device: the footprint of its plan over its whole node set.
    pub model_bytes: Vec<u64>,
    /// Per device: the bytes of its tensors that another routine holds.
    pub skipped_bytes: Vec<u64>,
    /// Per device: the bytes of its constants.
    pub constant_bytes: Vec<u64>,
    /// Its constants: (device, tensor id, occupied bytes).
    pub constants: Vec<(usize, String, u64)>,
    /// The pools of its plan with skipped tensors and constants given no storage; empty pools
    /// are left out (nothing is allocated for them).
    pub pools: Vec<RoutinePool>,
}

/// What a pool of the program holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgramPoolRole {
    Arena,
    Static,
    /// A device's constants, shared by every context.
    Constants,
}

impl ProgramPoolRole {
    pub fn name(self) -> &'static str {
        match self {
            ProgramPoolRole::Arena => "arena",
            ProgramPoolRole::Static => "static",
            ProgramPoolRole::Constants => "constants",
        }
    }
}

/// A pool the program allocates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramPool {
    pub device: String,
    pub role: ProgramPoolRole,
    /// The routine whose plan it comes from; `None` for a device's constants.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routine: Option<String>,
    pub bytes: u64,
    /// Its bytes rounded up to the device's page: what it takes from the device.
    pub page_rounded_bytes: u64,
    /// The event that allocates it (its context's create); `None`: never created.
    pub allocated_at: Option<usize>,
    /// The event that frees it; `None`: still allocated after the last event.
    pub freed_at: Option<usize>,
}

/// A context's own pools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextPools {
    pub context: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    pub pools: Vec<ProgramPool>,
    pub page_rounded_bytes: u64,
}

/// What an event did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventOutcome {
    Create {
        context: String,
        /// Indices into the context's pools, and into the program's constants pools.
        allocated: Vec<usize>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        constants_allocated: Vec<usize>,
    },
    Run {
        routine: String,
        context: String,
    },
    Release {
        context: String,
        /// The pools freed now, by index into the context's pools.
        freed: Vec<usize>,
        /// `released`, `failed` (after `freed`; a retry frees the rest) or `already_released`.
        result: ReleaseResult,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseResult {
    Released,
    Failed,
    AlreadyReleased,
}

/// A run's model of the peak beside the memory the program uses then, on one device, with the
/// terms between them: `model - skipped - constants_in_model + layout_difference = own`, and
/// `own + lineage_other + constants + other_contexts + page_rounding = used`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunComparison {
    pub event: usize,
    pub routine: String,
    pub context: String,
    pub device: String,
    /// The routine's plan over its whole node set (the seed's score).
    pub model_bytes: u64,
    /// The program's used memory on the device during the run.
    pub used_bytes: u64,
    /// Tensors the routine reads where another routine holds them: in the model, and in the
    /// used memory through their holder.
    pub skipped_bytes: u64,
    /// The routine's constants: in the model, and in the used memory as the device's.
    pub constants_in_model_bytes: u64,
    /// The routine's own pools minus (model - skipped - constants): the static pools' alignment
    /// padding without the skipped tensors; usually zero.
    pub layout_difference_bytes: i128,
    /// The routine's own pools.
    pub own_bytes: u64,
    /// The pools of the other routines of its context and its ancestors.
    pub lineage_other_bytes: u64,
    /// The device's constants pools.
    pub constants_bytes: u64,
    /// The pools of live contexts outside its lineage (not yet released).
    pub other_contexts_bytes: u64,
    pub other_contexts: Vec<String>,
    /// What rounding every live pool's base to the page adds.
    pub page_rounding_bytes: u64,
}

/// The program's peak of used memory on a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsedPeak {
    pub device: String,
    pub page_bytes: u64,
    pub used_peak_bytes: u64,
    /// The first event after which the used memory is at its peak.
    pub used_peak_event: usize,
    /// The largest model of the peak of a routine run on the device.
    pub model_peak_bytes: u64,
    /// What is still allocated after the last event.
    pub used_at_end_bytes: u64,
}

/// A program planned: its pools, what each event did, the used memory after each event per
/// device, and each run's model beside the used memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramPlan {
    pub devices: Vec<UsedPeak>,
    pub contexts: Vec<ContextPools>,
    pub constants: Vec<ProgramPool>,
    pub events: Vec<EventOutcome>,
    /// Per event, per device: the bytes allocated after it.
    pub used_bytes: Vec<Vec<u64>>,
    pub runs: Vec<RunComparison>,
    /// Contexts still live (or part released) after the last event.
    pub unreleased: Vec<Unreleased>,
}

/// A context that still holds pools after the last event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreleased {
    pub context: String,
    /// Its pools not yet freed, page-rounded.
    pub page_rounded_bytes: u64,
}

/// Why a program's figures do not fit 64 bits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("the program's used memory on `{device}` passes 2^64 bytes")]
pub struct Overflow {
    pub device: String,
}

/// `bytes` rounded up to `page` (a power of two), checked.
pub fn page_rounded(bytes: u64, page: u64) -> Option<u64> {
    crate::graph::align_up(bytes, page)
}

/// Runs the program's events over its routines' figures: `devices` and `page_bytes` are the
/// program's devices and their pages, `figures` one per routine (contexts in order).
pub fn simulate(
    program: &Program,
    resolved: &ResolvedProgram,
    devices: &[String],
    page_bytes: &[u64],
    figures: &[RoutineFigures],
) -> Result<ProgramPlan, Overflow> {
    let overflow = |d: usize| Overflow {
        device: devices[d].clone(),
    };
    let round =
        |d: usize, bytes: u64| page_rounded(bytes, page_bytes[d]).ok_or_else(|| overflow(d));
    // Each routine's id, and each context's routines: looked up by index, each event (a
    // search through every routine at each event was the square of a long program).
    let routine_ids: Vec<&str> = program.routines().map(|(_, r)| r.id.as_str()).collect();
    let mut routines_of: Vec<Vec<usize>> = vec![Vec::new(); program.contexts.len()];
    for (r, rr) in resolved.routines.iter().enumerate() {
        routines_of[rr.context].push(r);
    }
    // Each context's own pools, with the routine each comes from.
    let mut contexts = Vec::with_capacity(program.contexts.len());
    let mut pool_routine: Vec<Vec<usize>> = Vec::with_capacity(program.contexts.len());
    for (c, context) in program.contexts.iter().enumerate() {
        let mut pools = Vec::new();
        let mut from = Vec::new();
        let mut total = 0u64;
        for &r in &routines_of[c] {
            for p in &figures[r].pools {
                let rounded = round(p.device, p.bytes)?;
                total = total
                    .checked_add(rounded)
                    .ok_or_else(|| overflow(p.device))?;
                pools.push(ProgramPool {
                    device: devices[p.device].clone(),
                    role: match p.role {
                        PoolRole::Arena => ProgramPoolRole::Arena,
                        PoolRole::Static => ProgramPoolRole::Static,
                    },
                    routine: Some(routine_ids[r].to_string()),
                    bytes: p.bytes,
                    page_rounded_bytes: rounded,
                    allocated_at: None,
                    freed_at: None,
                });
                from.push(r);
            }
        }
        contexts.push(ContextPools {
            context: context.id.clone(),
            parent: context.parent.clone(),
            pools,
            page_rounded_bytes: total,
        });
        pool_routine.push(from);
    }
    let device_of = |name: &str| {
        devices
            .iter()
            .position(|d| d == name)
            .expect("a program device")
    };

    let n = devices.len();
    let mut constants: Vec<ProgramPool> = Vec::new();
    let mut constant_ids: BTreeSet<(usize, &str)> = BTreeSet::new();
    // Per context: pools freed so far (a prefix), whether created, whether released.
    let mut freed = vec![0usize; contexts.len()];
    let mut created = vec![false; contexts.len()];
    let mut released = vec![false; contexts.len()];
    let mut used = vec![0u64; n];
    let mut used_bytes = Vec::with_capacity(resolved.events.len());
    // At a run, whether each context is its routine's or an ancestor of it.
    let mut in_lineage = vec![false; contexts.len()];
    let mut events = Vec::with_capacity(resolved.events.len());
    let mut runs = Vec::new();
    for (e, event) in resolved.events.iter().enumerate() {
        match *event {
            ResolvedEvent::Create { context: c } => {
                created[c] = true;
                for p in &mut contexts[c].pools {
                    p.allocated_at = Some(e);
                }
                for p in &contexts[c].pools {
                    let d = device_of(&p.device);
                    used[d] = used[d]
                        .checked_add(p.page_rounded_bytes)
                        .ok_or_else(|| overflow(d))?;
                }
                // The constants its routines need that no create has allocated yet: one pool
                // per device.
                let mut new = vec![0u64; n];
                for &r in &routines_of[c] {
                    for (d, id, bytes) in &figures[r].constants {
                        if constant_ids.insert((*d, id.as_str())) {
                            new[*d] = new[*d].checked_add(*bytes).ok_or_else(|| overflow(*d))?;
                        }
                    }
                }
                let mut constants_allocated = Vec::new();
                for (d, &bytes) in new.iter().enumerate() {
                    if bytes > 0 {
                        let rounded = round(d, bytes)?;
                        used[d] = used[d].checked_add(rounded).ok_or_else(|| overflow(d))?;
                        constants_allocated.push(constants.len());
                        constants.push(ProgramPool {
                            device: devices[d].clone(),
                            role: ProgramPoolRole::Constants,
                            routine: None,
                            bytes,
                            page_rounded_bytes: rounded,
                            allocated_at: Some(e),
                            freed_at: None,
                        });
                    }
                }
                events.push(EventOutcome::Create {
                    context: contexts[c].context.clone(),
                    allocated: (0..contexts[c].pools.len()).collect(),
                    constants_allocated,
                });
            }
            ResolvedEvent::Run { routine: r } => {
                let c = resolved.routines[r].context;
                in_lineage.fill(false);
                for k in resolved.lineage(c) {
                    in_lineage[k] = true;
                }
                let f = &figures[r];
                let live = |k: usize| created[k] && !released[k];
                for d in 0..n {
                    let mut own = 0u64;
                    let mut lineage_other = 0u64;
                    let mut other = 0u64;
                    let mut rounding = 0u64;
                    let mut other_contexts = Vec::new();
                    for (k, ctx) in contexts.iter().enumerate() {
                        if !live(k) {
                            continue;
                        }
                        let mut here = 0u64;
                        for (i, p) in ctx.pools.iter().enumerate().skip(freed[k]) {
                            if p.device != devices[d] {
                                continue;
                            }
                            // Sums bounded by `used`, which did not overflow.
                            rounding += p.page_rounded_bytes - p.bytes;
                            if pool_routine[k][i] == r {
                                own += p.bytes;
                            } else if in_lineage[k] {
                                lineage_other += p.bytes;
                            } else {
                                here += p.bytes;
                            }
                        }
                        if here > 0 {
                            other += here;
                            other_contexts.push(ctx.context.clone());
                        }
                    }
                    let mut constants_bytes = 0u64;
                    for p in constants.iter().filter(|p| p.device == devices[d]) {
                        constants_bytes += p.bytes;
                        rounding += p.page_rounded_bytes - p.bytes;
                    }
                    let model = f.model_bytes.get(d).copied().unwrap_or(0);
                    if model == 0 && own == 0 {
                        continue;
                    }
                    let skipped = f.skipped_bytes.get(d).copied().unwrap_or(0);
                    let constants_in_model = f.constant_bytes.get(d).copied().unwrap_or(0);
                    runs.push(RunComparison {
                        event: e,
                        routine: routine_ids[r].to_string(),
                        context: contexts[c].context.clone(),
                        device: devices[d].clone(),
                        model_bytes: model,
                        used_bytes: used[d],
                        skipped_bytes: skipped,
                        constants_in_model_bytes: constants_in_model,
                        layout_difference_bytes: i128::from(own) - i128::from(model)
                            + i128::from(skipped)
                            + i128::from(constants_in_model),
                        own_bytes: own,
                        lineage_other_bytes: lineage_other,
                        constants_bytes,
                        other_contexts_bytes: other,
                        other_contexts,
                        page_rounding_bytes: rounding,
                    });
                }
                events.push(EventOutcome::Run {
                    routine: routine_ids[r].to_string(),
                    context: contexts[c].context.clone(),
                });
            }
            ResolvedEvent::Release {
                context: c,
                fails_after,
            } => {
                let result = if released[c] {
                    ReleaseResult::AlreadyReleased
                } else {
                    let remaining = contexts[c].pools.len() - freed[c];
                    match fails_after {
                        Some(k) => {
                            let k = (k as usize).min(remaining);
                            let start = freed[c];
                            free(
                                &mut contexts[c].pools[start..start + k],
                                e,
                                &mut used,
                                &device_of,
                            );
                            freed[c] += k;
                            events.push(EventOutcome::Release {
                                context: contexts[c].context.clone(),
                                freed: (start..start + k).collect(),
                                result: ReleaseResult::Failed,
                            });
                            used_bytes.push(used.clone());
                            continue;
                        }
                        None => ReleaseResult::Released,
                    }
                };
                let start = freed[c];
                let end = if result == ReleaseResult::AlreadyReleased {
                    start
                } else {
                    contexts[c].pools.len()
                };
                free(&mut contexts[c].pools[start..end], e, &mut used, &device_of);
                freed[c] = end;
                released[c] = true;
                events.push(EventOutcome::Release {
                    context: contexts[c].context.clone(),
                    freed: (start..end).collect(),
                    result,
                });
            }
        }
        used_bytes.push(used.clone());
    }
    let mut peaks = Vec::with_capacity(n);
    for d in 0..n {
        let (used_peak_event, used_peak_bytes) =
            used_bytes
                .iter()
                .map(|u| u[d])
                .enumerate()
                .fold(
                    (0, 0),
                    |best, (e, u)| if u > best.1 { (e, u) } else { best },
                );
        peaks.push(UsedPeak {
            device: devices[d].clone(),
            page_bytes: page_bytes[d],
            used_peak_bytes,
            used_peak_event,
            model_peak_bytes: runs
                .iter()
                .filter(|r| r.device == devices[d])
                .map(|r| r.model_bytes)
                .max()
                .unwrap_or(0),
            used_at_end_bytes: used[d],
        });
    }
    let unreleased = contexts
        .iter()
        .enumerate()
        .filter(|&(k, _)| created[k] && !released[k])
        .map(|(k, ctx)| Unreleased {
            context: ctx.context.clone(),
            page_rounded_bytes: ctx.pools[freed[k]..]
                .iter()
                .map(|p| p.page_rounded_bytes)
                .sum(),
        })
        .collect();
    Ok(ProgramPlan {
        devices: peaks,
        contexts,
        constants,
        events,
        used_bytes,
        runs,
        unreleased,
    })
}

/// Frees `pools` at event `event`: the used memory loses what their create added.
fn free(
    pools: &mut [ProgramPool],
    event: usize,
    used: &mut [u64],
    device_of: &dyn Fn(&str) -> usize,
) {
    for p in pools {
        let d = device_of(&p.device);
        used[d] -= p.page_rounded_bytes;
        p.freed_at = Some(event);
    }
}

impl ProgramPool {
    /// Whether it is allocated after event `event`.
    pub fn allocated_after(&self, event: usize) -> bool {
        self.allocated_at.is_some_and(|a| a <= event) && self.freed_at.is_none_or(|f| event < f)
    }
}
