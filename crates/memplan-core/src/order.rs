//! Reordering the schedule: other valid orders of the same steps, and the one whose plan is
//! smallest.
//!
//! A reorder moves *units*: the positions of the given schedule (a top-level step, or a whole
//! loop, whose body keeps its order). [`dependencies`] says which unit must run before which,
//! by the accesses of each unit to each storage (a view's accesses are its root's; a tensor
//! without storage is its own):
//! - a unit that reads runs after the last earlier unit that writes (read after write);
//! - a unit that writes runs after every earlier unit that reads since that write, and after
//!   that write (write after read, write after write);
//! - a loop's back edge reads count as its reads; units with a `pinned` step keep their order.
//!
//! An order is a topological order of those dependencies. [`heuristic`] gives PyTorch Inductor's
//! three (`lpmf`, least peak memory first; `bfs`, by the order the predecessors ran; `dfs`,
//! predecessors first, by the bytes each unit takes), over the same model of memory liveness
//! uses: a storage is live from the first unit that takes it to the last. [`best`] searches for
//! the order whose *plan* is smallest: it improves each of the four starting orders (the given
//! one and the three heuristics) by moving units within their dependency window to lower the
//! live peak, lays each result out, and keeps the smallest footprint (summed over devices): it
//! never returns an order whose plan is larger than the given order's or any heuristic's. Its
//! work is counted, not timed, so a work limit gives the same order on every machine.
//!
//! The checker verifies a reordered plan with its own code ([`crate::check::check_order`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use crate::graph::{Graph, ResolvedGraph};
use crate::layout::{Control, Plan, PlanError, PlanOptions, Progress, plan_with};
use crate::liveness::{analyze, taken_per_position};

/// Which order of the schedule a plan uses.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// The dump's own.
    #[default]
    Given,
    /// Least peak memory first (Inductor's `topological_sort_lpmf`).
    Lpmf,
    /// Breadth first, by the order each unit's predecessors ran (Inductor's `topological_sort_bfs`).
    Bfs,
    /// Depth first, predecessors first, smaller units first (Inductor's `topological_sort_dfs`).
    Dfs,
    /// The smallest plan [`best`] finds.
    Best,
}

impl Order {
    pub const ALL: [Order; 5] = [
        Order::Given,
        Order::Lpmf,
        Order::Bfs,
        Order::Dfs,
        Order::Best,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Order::Given => "given",
            Order::Lpmf => "lpmf",
            Order::Bfs => "bfs",
            Order::Dfs => "dfs",
            Order::Best => "best",
        }
    }

    pub fn is_given(&self) -> bool {
        *self == Order::Given
    }
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not an order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown order `{0}`: one of given, lpmf, bfs, dfs, best")]
pub struct UnknownOrder(pub String);

impl std::str::FromStr for Order {
    type Err = UnknownOrder;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Order::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| UnknownOrder(s.to_string()))
    }
}

/// The dependencies between the units (positions) of a resolved graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependencies {
    /// For each unit, the units that must run before it: sorted, each once.
    pub preds: Vec<Vec<u32>>,
    /// For each unit, the units that must run after it: sorted, each once.
    pub succs: Vec<Vec<u32>>,
}

/// The dependencies of the units of `resolved` (see the module docs).
pub fn dependencies(graph: &Graph, resolved: &ResolvedGraph) -> Dependencies {
    let n = resolved.positions.len();
    // Per storage: the last unit that wrote it, and the units that read it since.
    let mut last_write: Vec<Option<u32>> = vec![None; resolved.tensors.len()];
    let mut reads_since: Vec<Vec<u32>> = vec![Vec::new(); resolved.tensors.len()];
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut last_pinned: Option<u32> = None;
    for (u, p) in resolved.positions.iter().enumerate() {
        let u = u as u32;
        let steps = p.steps();
        let key = |t: usize| resolved.root(t).unwrap_or(t);
        let mut reads: Vec<usize> = steps
            .clone()
            .flat_map(|s| resolved.reads(s).iter().map(|&t| key(t as usize)))
            .chain(
                p.loop_index()
                    .into_iter()
                    .flat_map(|l| resolved.back_edge_reads[l].iter().map(|&t| key(t))),
            )
            .collect();
        let mut writes: Vec<usize> = steps
            .clone()
            .flat_map(|s| resolved.writes(s).iter().map(|&t| key(t as usize)))
            .collect();
        reads.sort_unstable();
        reads.dedup();
        writes.sort_unstable();
        writes.dedup();
        let before = &mut preds[u as usize];
        for &r in &reads {
            before.extend(last_write[r]);
        }
        for &w in &writes {
            before.extend(last_write[w]);
            before.extend(reads_since[w].iter().copied());
        }
        for &r in &reads {
            reads_since[r].push(u);
        }
        for &w in &writes {
            last_write[w] = Some(u);
            reads_since[w].clear();
        }
        if steps.clone().any(|s| graph.step_pinned(s)) {
            before.extend(last_pinned);
            last_pinned = Some(u);
        }
        before.retain(|&v| v != u);
        before.sort_unstable();
        before.dedup();
    }
    let mut succs: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (u, before) in preds.iter().enumerate() {
        for &v in before {
            succs[v as usize].push(u as u32);
        }
    }
    Dependencies { preds, succs }
}

/// What the orders weigh: for each unit, the storages it takes, and each storage's device and
/// bytes (always-live storages are left out: no order changes them; their bytes per device are
/// kept apart).
#[derive(Debug, Clone)]
pub struct Takes {
    pub per_unit: Vec<Vec<u32>>,
    pub bytes: Vec<u64>,
    pub device: Vec<u32>,
    pub devices: usize,
    pub always_live: Vec<u64>,
}

impl Takes {
    /// The storages each unit of `resolved` takes.
    pub fn of(resolved: &ResolvedGraph) -> Takes {
        let occupied = |t: &crate::graph::ResolvedTensor| t.occupied_size().unwrap_or(u64::MAX);
        let mut always_live = vec![0u64; resolved.device_ids.len()];
        for t in &resolved.tensors {
            if t.always_live && t.storage == crate::graph::Storage::Owned {
                let d = t.device as usize;
                always_live[d] = always_live[d].saturating_add(occupied(t));
            }
        }
        let mut index: Vec<Option<u32>> = vec![None; resolved.tensors.len()];
        let (mut bytes, mut device) = (Vec::new(), Vec::new());
        let per_unit = taken_per_position(resolved, &[])
            .into_iter()
            .map(|roots| {
                roots
                    .into_iter()
                    .filter(|&r| !resolved.tensors[r].always_live)
                    .map(|r| {
                        *index[r].get_or_insert_with(|| {
                            let t = &resolved.tensors[r];
                            bytes.push(occupied(t));
                            device.push(t.device);
                            (bytes.len() - 1) as u32
                        })
                    })
                    .collect()
            })
            .collect();
        Takes {
            per_unit,
            bytes,
            device,
            devices: resolved.device_ids.len(),
            always_live,
        }
    }

    /// The bytes live at each position of `order`, per device (`live[at * devices + d]`): a
    /// storage lives from the first unit that takes it to the last, both included.
    fn live(&self, order: &[u32]) -> Vec<u64> {
        let n = order.len();
        let mut first = vec![u32::MAX; self.bytes.len()];
        let mut last = vec![0u32; self.bytes.len()];
        for (at, &u) in order.iter().enumerate() {
            for &s in &self.per_unit[u as usize] {
                let s = s as usize;
                first[s] = first[s].min(at as u32);
                last[s] = at as u32;
            }
        }
        let mut delta = vec![0i128; (n + 1) * self.devices];
        for s in 0..self.bytes.len() {
            if first[s] == u32::MAX {
                continue;
            }
            let d = self.device[s] as usize;
            delta[first[s] as usize * self.devices + d] += i128::from(self.bytes[s]);
            delta[(last[s] as usize + 1) * self.devices + d] -= i128::from(self.bytes[s]);
        }
        let mut now = vec![0i128; self.devices];
        let mut live = vec![0u64; n * self.devices];
        for at in 0..n {
            for d in 0..self.devices {
                now[d] += delta[at * self.devices + d];
                live[at * self.devices + d] = now[d].max(0) as u64;
            }
        }
        live
    }

    /// The most bytes live at once on each device when the units run in `order`, and the sum
    /// over positions of the bytes live there (which separates orders of equal peak).
    pub fn peaks(&self, order: &[u32]) -> (Vec<u64>, u128) {
        let mut peak = vec![0u64; self.devices];
        let mut area: u128 = 0;
        for (k, &l) in self.live(order).iter().enumerate() {
            let d = k % self.devices;
            peak[d] = peak[d].max(l);
            area += u128::from(l);
        }
        (peak, area)
    }

    /// The first position of `order` where the live bytes, summed over devices, are highest.
    fn peak_position(&self, order: &[u32]) -> usize {
        let live = self.live(order);
        let per_position = live
            .chunks(self.devices.max(1))
            .map(|c| c.iter().map(|&l| u128::from(l)).sum::<u128>());
        let (mut best, mut best_at) = (0u128, 0);
        for (at, l) in per_position.enumerate() {
            if l > best {
                (best, best_at) = (l, at);
            }
        }
        best_at
    }

    /// A bound no order goes below, on each device: the bytes some unit takes at once, and the
    /// always-live bytes beside them.
    pub fn floor(&self) -> Vec<u64> {
        let mut floor = vec![0u64; self.devices];
        let mut at_unit = vec![0u64; self.devices];
        for taken in &self.per_unit {
            at_unit.fill(0);
            for &s in taken {
                let d = self.device[s as usize] as usize;
                at_unit[d] = at_unit[d].saturating_add(self.bytes[s as usize]);
            }
            for d in 0..self.devices {
                floor[d] = floor[d].max(at_unit[d]);
            }
        }
        for (f, &a) in floor.iter_mut().zip(&self.always_live) {
            *f = f.saturating_add(a);
        }
        floor
    }

    /// For each storage, the units that take it.
    fn users(&self) -> Vec<Vec<u32>> {
        let mut users = vec![Vec::new(); self.bytes.len()];
        for (u, taken) in self.per_unit.iter().enumerate() {
            for &s in taken {
                users[s as usize].push(u as u32);
            }
        }
        users
    }
}

/// The units of the given order.
pub fn given(units: usize) -> Vec<u32> {
    (0..units as u32).collect()
}

/// Inductor's heuristic `order` (`Lpmf`, `Bfs` or `Dfs`; the given order for the others).
pub fn heuristic(order: Order, deps: &Dependencies, takes: &Takes) -> Vec<u32> {
    match order {
        Order::Lpmf => lpmf(deps, takes),
        Order::Bfs => bfs(deps),
        Order::Dfs => dfs(deps, takes),
        Order::Given | Order::Best => given(deps.preds.len()),
    }
}

/// Least peak memory first: of the ready units, the one that keeps the peak so far lowest,
/// then the one that adds least to what is live, then the earliest.
fn lpmf(deps: &Dependencies, takes: &Takes) -> Vec<u32> {
    let n = deps.preds.len();
    let users = takes.users();
    let mut left_users: Vec<usize> = users.iter().map(Vec::len).collect();
    let mut live_now = vec![false; takes.bytes.len()];
    // What running each unit now would allocate, and free after it.
    let mut alloc: Vec<u128> = (takes.per_unit.iter())
        .map(|t| t.iter().map(|&s| u128::from(takes.bytes[s as usize])).sum())
        .collect();
    let mut free = vec![0u128; n];
    for (s, us) in users.iter().enumerate() {
        if us.len() == 1 {
            free[us[0] as usize] += u128::from(takes.bytes[s]);
        }
    }
    let mut indegree: Vec<usize> = deps.preds.iter().map(Vec::len).collect();
    let mut ready: Vec<u32> = (0..n as u32)
        .filter(|&u| indegree[u as usize] == 0)
        .collect();
    let mut scheduled = vec![false; n];
    let (mut live, mut peak) = (0u128, 0u128);
    let mut order = Vec::with_capacity(n);
    // The ready units in no order: the key ends with the unit, so the choice is the same.
    while let Some(k) = (0..ready.len()).min_by_key(|&k| {
        let u = ready[k] as usize;
        (
            peak.max(live + alloc[u]),
            (live + alloc[u]).saturating_sub(free[u]),
            u,
        )
    }) {
        let u = ready.swap_remove(k);
        order.push(u);
        let ui = u as usize;
        scheduled[ui] = true;
        live += alloc[ui];
        peak = peak.max(live);
        live = live.saturating_sub(free[ui]);
        for &s in &takes.per_unit[ui] {
            let s = s as usize;
            let bytes = u128::from(takes.bytes[s]);
            if !live_now[s] {
                live_now[s] = true;
                for &v in &users[s] {
                    if v != u {
                        alloc[v as usize] -= bytes;
                    }
                }
            }
            left_users[s] -= 1;
            if left_users[s] == 1
                && let Some(&v) = users[s].iter().find(|&&v| !scheduled[v as usize])
            {
                free[v as usize] += bytes;
            }
        }
        for &v in &deps.succs[ui] {
            indegree[v as usize] -= 1;
            if indegree[v as usize] == 0 {
                ready.push(v);
            }
        }
    }
    order
}

/// Breadth first: the ready unit whose predecessors ran earliest (their run positions, sorted,
/// compared as lists), then the earliest.
fn bfs(deps: &Dependencies) -> Vec<u32> {
    let n = deps.preds.len();
    let mut ran_at = vec![0u32; n];
    let mut indegree: Vec<usize> = deps.preds.iter().map(Vec::len).collect();
    let priority = |u: u32, ran_at: &[u32]| {
        let mut p: Vec<u32> = deps.preds[u as usize]
            .iter()
            .map(|&v| ran_at[v as usize])
            .collect();
        p.sort_unstable();
        Reverse((p, u))
    };
    let mut ready: BinaryHeap<Reverse<(Vec<u32>, u32)>> = (0..n as u32)
        .filter(|&u| indegree[u as usize] == 0)
        .map(|u| priority(u, &ran_at))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse((_, u))) = ready.pop() {
        ran_at[u as usize] = order.len() as u32;
        order.push(u);
        for &v in &deps.succs[u as usize] {
            indegree[v as usize] -= 1;
            if indegree[v as usize] == 0 {
                ready.push(priority(v, &ran_at));
            }
        }
    }
    order
}

/// Depth first: units visited by the bytes they take (then the earliest), each after its
/// predecessors, visited the same way.
fn dfs(deps: &Dependencies, takes: &Takes) -> Vec<u32> {
    let n = deps.preds.len();
    let weight: Vec<u128> = (takes.per_unit.iter())
        .map(|t| t.iter().map(|&s| u128::from(takes.bytes[s as usize])).sum())
        .collect();
    let by_weight = |units: &mut Vec<u32>| units.sort_by_key(|&u| (weight[u as usize], u));
    let mut roots: Vec<u32> = (0..n as u32).collect();
    by_weight(&mut roots);
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    // An explicit stack of (unit, its predecessors left to visit): a chain of a million steps
    // must not recurse a million deep.
    let mut stack: Vec<(u32, Vec<u32>)> = Vec::new();
    for root in roots {
        if seen[root as usize] {
            continue;
        }
        seen[root as usize] = true;
        let mut preds = deps.preds[root as usize].clone();
        by_weight(&mut preds);
        preds.reverse();
        stack.push((root, preds));
        while let Some((u, preds)) = stack.last_mut() {
            match preds.pop() {
                Some(p) if !seen[p as usize] => {
                    seen[p as usize] = true;
                    let mut next = deps.preds[p as usize].clone();
                    by_weight(&mut next);
                    next.reverse();
                    stack.push((p, next));
                }
                Some(_) => {}
                None => {
                    order.push(*u);
                    stack.pop();
                }
            }
        }
    }
    order
}

/// The steps of `resolved` in the unit order `units`.
pub fn steps_in(resolved: &ResolvedGraph, units: &[u32]) -> Vec<usize> {
    units
        .iter()
        .flat_map(|&u| {
            let p = resolved.positions.at(u as usize);
            p.steps()
        })
        .collect()
}

/// Per position of the order `steps` (the given step indices, reordered): whether its step
/// moved, that is, lies outside one longest run (not necessarily contiguous) of steps that kept
/// their given relative order. The fewest steps whose moving explains the order.
pub fn moved(steps: &[usize]) -> Vec<bool> {
    // Longest increasing subsequence by patience sorting, with back links.
    let mut tails: Vec<usize> = Vec::new();
    let mut back = vec![usize::MAX; steps.len()];
    for (i, &s) in steps.iter().enumerate() {
        let k = tails.partition_point(|&t| steps[t] < s);
        if k > 0 {
            back[i] = tails[k - 1];
        }
        if k == tails.len() {
            tails.push(i);
        } else {
            tails[k] = i;
        }
    }
    let mut moved = vec![true; steps.len()];
    let mut at = tails.last().copied();
    while let Some(i) = at {
        moved[i] = false;
        at = (back[i] != usize::MAX).then_some(back[i]);
    }
    moved
}

/// The work [`best`] does unless told otherwise, in storage visits of its peak evaluations: a
/// few hundred thousand evaluations of a small graph, a few hundred of a large one.
pub const DEFAULT_ORDER_WORK: u64 = 200_000_000;

/// How many units either side of the peak the improvement tries to move at each round.
const MOVE_WINDOW: usize = 48;

/// Lowers the live peak of `order` by moving one unit at a time, within its dependency window,
/// across the peak; stops when no such move lowers (peak, area), after `work` storage visits,
/// or when `stop` (asked between rounds) says so. Returns the order and the work it took.
pub fn improve(
    order: &[u32],
    deps: &Dependencies,
    takes: &Takes,
    work: u64,
    stop: &mut dyn FnMut() -> bool,
) -> (Vec<u32>, u64) {
    let n = order.len();
    let mut order = order.to_vec();
    if n < 2 {
        return (order, 0);
    }
    let visits = takes.per_unit.iter().map(Vec::len).sum::<usize>() as u64 + n as u64;
    let mut spent = 0u64;
    let mut current = score(takes, &order);
    'rounds: loop {
        if stop() {
            break;
        }
        let at = position_of(&order);
        let peak_at = takes.peak_position(&order);
        let from = peak_at.saturating_sub(MOVE_WINDOW);
        let to = (peak_at + MOVE_WINDOW).min(n - 1);
        for i in from..=to {
            let u = order[i] as usize;
            // Its window: after its last predecessor, before its first successor.
            let earliest = (deps.preds[u].iter())
                .map(|&v| at[v as usize] + 1)
                .max()
                .unwrap_or(0);
            let latest = (deps.succs[u].iter())
                .map(|&v| at[v as usize] - 1)
                .min()
                .unwrap_or(n - 1);
            let mut targets = vec![earliest, latest];
            if i < peak_at {
                targets.push(peak_at.min(latest));
            } else if i > peak_at {
                targets.push(peak_at.max(earliest));
            }
            targets.sort_unstable();
            targets.dedup();
            for target in targets {
                if target == i || target < earliest || target > latest {
                    continue;
                }
                if spent.saturating_add(visits) > work {
                    break 'rounds;
                }
                spent += visits;
                let mut moved = order.clone();
                let unit = moved.remove(i);
                moved.insert(target, unit);
                let s = score(takes, &moved);
                if s < current {
                    current = s;
                    order = moved;
                    continue 'rounds;
                }
            }
        }
        break;
    }
    (order, spent)
}

/// What [`improve`] lowers: the peaks summed over devices, then the area.
fn score(takes: &Takes, order: &[u32]) -> (u128, u128) {
    let (peaks, area) = takes.peaks(order);
    (peaks.iter().map(|&p| u128::from(p)).sum(), area)
}

fn position_of(order: &[u32]) -> Vec<usize> {
    let mut at = vec![0; order.len()];
    for (i, &u) in order.iter().enumerate() {
        at[u as usize] = i;
    }
    at
}

/// One order of the schedule, planned.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub order: Order,
    /// Whether [`improve`] moved units of it.
    pub improved: bool,
    pub units: Vec<u32>,
    pub plan: Plan,
}

/// What [`best`] found: the order it keeps, and every order it planned (the given one first).
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    pub best: usize,
    pub tried: Vec<Planned>,
    /// Whether it ran out of work or was stopped before it tried every start.
    pub partial: bool,
}

impl Search {
    pub fn chosen(&self) -> &Planned {
        &self.tried[self.best]
    }
}

/// A resolved graph with its steps in the unit order `units`; the graph itself, reordered, for
/// names and times.
pub fn reordered(graph: &Graph, resolved: &ResolvedGraph, units: &[u32]) -> (Graph, ResolvedGraph) {
    let steps = steps_in(resolved, units);
    (graph.reordered(&steps), resolved.reordered(&steps))
}

/// Searches for the order of `resolved`'s units whose plan under `options` has the smallest
/// footprint (see the module docs). `work` bounds the
/// improvement, shared by its starts; `control` may stop it (between plans and between the
/// improvement's rounds: what it has is then planned, and the search is `partial`), and hears
/// each order planned (`evaluations`: orders planned; `best_bytes`: the smallest footprint so far;
/// `bound_bytes`: [`Takes::floor`] summed, which no order goes below).
pub fn best(
    graph: &Graph,
    resolved: &ResolvedGraph,
    options: &PlanOptions,
    work: u64,
    control: &mut Control<'_>,
) -> Result<Search, PlanError> {
    let deps = dependencies(graph, resolved);
    let takes = Takes::of(resolved);
    let floor: u64 = takes.floor().iter().sum();
    let n = deps.preds.len();
    let mut starts: Vec<(Order, Vec<u32>)> = Vec::new();
    for order in [Order::Given, Order::Lpmf, Order::Bfs, Order::Dfs] {
        let units = heuristic(order, &deps, &takes);
        if !starts.iter().any(|(_, u)| *u == units) {
            starts.push((order, units));
        }
    }
    let mut tried: Vec<Planned> = Vec::new();
    let mut partial = false;
    let share = work / starts.len() as u64;
    let plan_of = |units: &[u32], control: &mut Control<'_>| {
        let (g, r) = reordered(graph, resolved, units);
        let problem = analyze(&g, &r).problem;
        plan_with(&problem, options, control)
    };
    for (order, units) in starts {
        if !tried.is_empty() && control.stop() {
            partial = true;
            break;
        }
        let mut stopped = false;
        let (improved, _) = improve(&units, &deps, &takes, share, &mut || {
            stopped |= control.stop();
            stopped
        });
        partial |= stopped;
        let mut candidates = vec![(false, units)];
        if improved != candidates[0].1 {
            candidates.push((true, improved));
        }
        for (improved, units) in candidates {
            if tried.iter().any(|p| p.units == units) {
                continue;
            }
            let plan = plan_of(&units, &mut Control::default())?;
            tried.push(Planned {
                order,
                improved,
                units,
                plan,
            });
            let best_bytes = (tried.iter())
                .map(|p| p.plan.footprint_bytes())
                .min()
                .unwrap_or(0);
            control.report(Progress {
                device: 0,
                evaluations: tried.len() as u64,
                exact: false,
                best_bytes,
                bound_bytes: floor,
            });
        }
    }
    debug_assert!(n == 0 || tried[0].order == Order::Given);
    // The smallest footprint (summed over devices) of a valid plan; ties to the earlier, so to
    // the given order first.
    let best = (0..tried.len())
        .filter(|&i| tried[i].plan.is_valid())
        .min_by_key(|&i| (tried[i].plan.footprint_bytes(), i))
        .unwrap_or(0);
    Ok(Search {
        best,
        tried,
        partial,
    })
}

#[cfg(test)]
mod tests;
