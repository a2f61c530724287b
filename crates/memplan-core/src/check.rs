//! The independent checker: does a plan keep every promise, whatever made it?
//!
//! It shares no code with the layout strategies: it reads the problem and the plan's placements
//! and pools, and re-derives every conflict itself. Promises checked:
//! - every buffer has a placement in an existing pool of its device;
//! - every offset is a multiple of the buffer's alignment;
//! - every buffer lies inside its pool, and no pool exceeds the cap (when there is one);
//! - two buffers of one pool whose lifetimes overlap (always-live buffers overlap everything)
//!   hold disjoint bytes, and with precision classes on, buffers of different dtypes never share
//!   a byte at any time;
//!
//! A reordered schedule is checked apart ([`check_order`]), against the given one: its steps are
//! the given steps, each once; each loop's steps stay together and in order; pinned steps keep
//! their order; and every access of each storage keeps its place relative to the writes of that
//! storage (a read stays between the same two writes, writes keep their order).
//!
//! Overlaps are found by a sweep over positions that keeps the live buffers of a pool ordered by
//! offset: a new buffer need only be compared with its two neighbours, so the check is
//! O(n log n). At most [`MAX_VIOLATIONS`] are reported.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;

use crate::dtype::DType;
use crate::graph::{Graph, ResolvedGraph};
use crate::placement::{Placement, Pool};
use crate::problem::Problem;

/// The most violations one check reports.
pub const MAX_VIOLATIONS: usize = 100;

/// A broken promise, naming the buffers involved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    PlacementCount {
        buffers: usize,
        placements: usize,
    },
    NoSuchPool {
        buffer: String,
        pool: usize,
        pools: usize,
    },
    Misaligned {
        buffer: String,
        offset: u64,
        alignment: u64,
    },
    OutsidePool {
        buffer: String,
        /// Where it ends; `None` past 2^64.
        end: Option<u64>,
        pool: usize,
        pool_bytes: u64,
    },
    OverCap {
        device: String,
        pool: usize,
        bytes: u64,
        cap: u64,
    },
    Overlap {
        first: String,
        second: String,
        pool: usize,
    },
    /// Two buffers of different dtypes share bytes (at different times), which precision
    /// classes keep apart: a broken promise of memplan's plans, but not a conflict, so a plan
    /// made without precision classes (one a dump comes with) is counted apart by it.
    AcrossClasses {
        first: String,
        second: String,
        pool: usize,
    },
    /// A reorder whose steps are not the given steps, each once.
    NotAReorder {
        steps: usize,
        given: usize,
    },
    /// A reorder that splits a loop or changes the order of its body.
    LoopSplit {
        loop_step: String,
    },
    /// A reorder that runs `after` before `before`, though `before` must come first: both
    /// access `storage`, and one of them writes it (or both are pinned).
    Dependency {
        storage: Option<String>,
        before: String,
        after: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::PlacementCount {
                buffers,
                placements,
            } => {
                write!(f, "{placements} placements for {buffers} buffers")
            }
            Violation::NoSuchPool {
                buffer,
                pool,
                pools,
            } => {
                write!(
                    f,
                    "`{buffer}` is in pool {pool}, but its device has {pools} pools"
                )
            }
            Violation::Misaligned {
                buffer,
                offset,
                alignment,
            } => {
                write!(
                    f,
                    "`{buffer}` at offset {offset} is not aligned to {alignment}"
                )
            }
            Violation::OutsidePool {
                buffer,
                end,
                pool,
                pool_bytes,
            } => match end {
                Some(end) => write!(
                    f,
                    "`{buffer}` ends at {end}, past the {pool_bytes} bytes of pool {pool}"
                ),
                None => write!(
                    f,
                    "`{buffer}` ends past 2^64, past the {pool_bytes} bytes of pool {pool}"
                ),
            },
            Violation::OverCap {
                device,
                pool,
                bytes,
                cap,
            } => {
                write!(
                    f,
                    "pool {pool} of `{device}` holds {bytes} bytes, over the cap of {cap}"
                )
            }
            Violation::Overlap {
                first,
                second,
                pool,
            } => write!(
                f,
                "`{first}` and `{second}` conflict but share bytes in pool {pool}"
            ),
            Violation::AcrossClasses {
                first,
                second,
                pool,
            } => write!(
                f,
                "`{first}` and `{second}` are of different precision classes but share bytes in pool {pool}"
            ),
            Violation::NotAReorder { steps, given } => write!(
                f,
                "the order lists {steps} steps, not each of the {given} steps once"
            ),
            Violation::LoopSplit { loop_step } => write!(
                f,
                "the order splits the loop of step `{loop_step}` or changes its body's order"
            ),
            Violation::Dependency {
                storage,
                before,
                after,
            } => match storage {
                Some(storage) => write!(
                    f,
                    "step `{after}` runs before step `{before}`, but both access `{storage}` and one writes it"
                ),
                None => write!(
                    f,
                    "pinned step `{after}` runs before pinned step `{before}`"
                ),
            },
        }
    }
}

/// A layout to check: the pools of each device (indexed like `Problem::device_ids`) and one
/// placement per buffer.
#[derive(Debug, Clone, Copy)]
pub struct Layout<'a> {
    pub pools: &'a [&'a [Pool]],
    pub placements: &'a [Placement],
}

/// Every broken promise of `layout` for `problem` (empty when the layout is sound).
pub fn check(
    problem: &Problem,
    layout: Layout<'_>,
    precision_classes: bool,
    cap: Option<u64>,
) -> Vec<Violation> {
    let mut found = Vec::new();
    if layout.placements.len() != problem.buffers.len() {
        found.push(Violation::PlacementCount {
            buffers: problem.buffers.len(),
            placements: layout.placements.len(),
        });
        return found;
    }
    for (device, pools) in layout.pools.iter().enumerate() {
        for (pool, p) in pools.iter().enumerate() {
            if let Some(cap) = cap
                && p.bytes > cap
            {
                let device = problem.device_ids.get(device).cloned().unwrap_or_default();
                found.push(Violation::OverCap {
                    device,
                    pool,
                    bytes: p.bytes,
                    cap,
                });
            }
        }
    }

    // (device, pool) -> buffers in it with bytes (a problem's buffers are indexed in 32 bits:
    // `Problem::validate`).
    let mut by_pool: BTreeMap<(usize, usize), Vec<u32>> = BTreeMap::new();
    for (b, (buffer, placement)) in problem.buffers.iter().zip(layout.placements).enumerate() {
        let pools = layout
            .pools
            .get(buffer.device())
            .copied()
            .unwrap_or_default();
        let Some(pool) = pools.get(placement.pool) else {
            found.push(Violation::NoSuchPool {
                buffer: problem.buffer_name(b),
                pool: placement.pool,
                pools: pools.len(),
            });
            continue;
        };
        if placement.offset % buffer.alignment() != 0 {
            found.push(Violation::Misaligned {
                buffer: problem.buffer_name(b),
                offset: placement.offset,
                alignment: buffer.alignment(),
            });
        }
        let end = placement.offset.checked_add(buffer.occupied_size());
        if end.is_none_or(|end| end > pool.bytes) {
            found.push(Violation::OutsidePool {
                buffer: problem.buffer_name(b),
                end,
                pool: placement.pool,
                pool_bytes: pool.bytes,
            });
        }
        if buffer.occupied_size() > 0 {
            by_pool
                .entry((buffer.device(), placement.pool))
                .or_default()
                .push(b as u32);
        }
    }
    for members in by_pool.values_mut() {
        members.shrink_to_fit();
    }
    for (&(_, pool), members) in &by_pool {
        overlaps_in_time(problem, layout.placements, pool, members, &mut found);
        if precision_classes {
            overlaps_across_classes(problem, layout.placements, pool, members, &mut found);
        }
    }
    found.truncate(MAX_VIOLATIONS);
    found
}

/// Sweeps positions, keeping the live members ordered by offset, and by when each stops being
/// live (a heap of the live ones only: with `members`, the check holds 20 bytes a member, where
/// two sorted copies of each member's figures took 88, the peak of a plan of millions).
fn overlaps_in_time(
    problem: &Problem,
    placements: &[Placement],
    pool: usize,
    members: &[u32],
    found: &mut Vec<Violation>,
) {
    // Per member: its interval's first position, and itself; by first position, then buffer
    // (the members come in buffer order and the sort is stable).
    let mut by_start: Vec<(u32, u32)> = (members.iter())
        .map(|&b| (problem.buffers[b as usize].span(problem.positions).first, b))
        .collect();
    radsort::sort_by_key(&mut by_start, |&(first, _)| first);
    let mut live: BTreeMap<(u64, usize), u64> = BTreeMap::new();
    // The live members' last positions with their keys in `live`, the earliest on top: all that
    // end before the next start retire before it is compared.
    let mut retiring: BinaryHeap<Reverse<(u32, u64, usize)>> = BinaryHeap::new();
    // The members' figures, read a block at a time in the sweep's order: reads that do not wait
    // on each other, where the sweep's own would each wait for the last (a million members of
    // a CSV, in no order of time: the check took four times as long).
    let mut figures = Vec::with_capacity(FIGURES_BLOCK);
    for block in by_start.chunks(FIGURES_BLOCK) {
        figures.clear();
        figures.extend(block.iter().map(|&(first, b)| {
            let (b, buffer) = (b as usize, &problem.buffers[b as usize]);
            let offset = placements[b].offset;
            let end = offset.saturating_add(buffer.occupied_size());
            (first, buffer.span(problem.positions).last, offset, end, b)
        }));
        for &(first, last, offset, end, b) in &figures {
            while let Some(&Reverse((other_last, other_offset, other))) = retiring.peek()
                && other_last < first
            {
                live.remove(&(other_offset, other));
                retiring.pop();
            }
            let below = live.range(..(offset, b)).next_back();
            let above = live.range((offset, b)..).next();
            for (&(other_offset, other), &other_end) in below.into_iter().chain(above) {
                if other_offset < end && offset < other_end && found.len() < MAX_VIOLATIONS {
                    found.push(Violation::Overlap {
                        first: problem.buffer_name(other.min(b)),
                        second: problem.buffer_name(other.max(b)),
                        pool,
                    });
                }
            }
            live.insert((offset, b), end);
            retiring.push(Reverse((last, offset, b)));
        }
    }
}

/// The members [`overlaps_in_time`] reads the figures of at a time.
const FIGURES_BLOCK: usize = 4096;

/// With precision classes, the byte ranges ever used by two dtypes must be disjoint.
fn overlaps_across_classes(
    problem: &Problem,
    placements: &[Placement],
    pool: usize,
    members: &[u32],
    found: &mut Vec<Violation>,
) {
    let class = |b: u32| problem.buffers[b as usize].dtype;
    if members.iter().all(|&b| class(b) == class(members[0])) {
        return;
    }
    // Per class, the union of its members' ranges, as merged disjoint runs.
    let mut ranges: Vec<(u64, u64, Option<DType>, usize)> = members
        .iter()
        .map(|&b| {
            let b = b as usize;
            let offset = placements[b].offset;
            let end = offset.saturating_add(problem.buffers[b].occupied_size());
            (offset, end, problem.buffers[b].dtype, b)
        })
        .collect();
    ranges.sort_unstable_by_key(|&(offset, _, class, b)| (class, offset, b));
    let mut runs: Vec<(u64, u64, Option<DType>, usize)> = Vec::new();
    for r in ranges {
        match runs.last_mut() {
            Some(last) if last.2 == r.2 && r.0 < last.1 => last.1 = last.1.max(r.1),
            _ => runs.push(r),
        }
    }
    runs.sort_unstable_by_key(|&(offset, _, class, b)| (offset, class, b));
    // Runs of one class are disjoint, so any overlap in offset order crosses classes.
    let mut reach: Option<(u64, usize)> = None;
    for (offset, end, _, b) in runs {
        if let Some((reach_end, owner)) = reach
            && offset < reach_end
            && found.len() < MAX_VIOLATIONS
        {
            found.push(Violation::AcrossClasses {
                first: problem.buffer_name(owner.min(b)),
                second: problem.buffer_name(owner.max(b)),
                pool,
            });
        }
        if reach.is_none_or(|(reach_end, _)| end > reach_end) {
            reach = Some((end, b));
        }
    }
}

/// Every dependency of the given schedule that running its steps in the order `steps` breaks
/// (see the module docs); empty when the order is a valid reorder.
pub fn check_order(graph: &Graph, resolved: &ResolvedGraph, steps: &[usize]) -> Vec<Violation> {
    let n = resolved.steps.len();
    let mut at = vec![usize::MAX; n];
    for (i, &s) in steps.iter().enumerate() {
        if s >= n || at[s] != usize::MAX {
            return vec![Violation::NotAReorder {
                steps: steps.len(),
                given: n,
            }];
        }
        at[s] = i;
    }
    if steps.len() != n {
        return vec![Violation::NotAReorder {
            steps: steps.len(),
            given: n,
        }];
    }
    let step_id = |s: usize| graph.step(s).id.clone();
    let mut violations = Vec::new();
    // Loops: consecutive steps of a loop stay consecutive.
    for s in 1..n {
        let (a, b) = (&resolved.steps[s - 1], &resolved.steps[s]);
        if a.loop_index().is_some() && a.loop_index() == b.loop_index() && at[s] != at[s - 1] + 1 {
            violations.push(Violation::LoopSplit {
                loop_step: step_id(s).to_string(),
            });
        }
    }
    // Each storage's accesses, in given order: (step, 2 x writes seen before, +1 for a write).
    // In the new order the ranks may not decrease.
    let mut accesses: Vec<Vec<(usize, usize)>> = vec![Vec::new(); resolved.tensors.len()];
    let mut writes_seen = vec![0usize; resolved.tensors.len()];
    let storage = |t: usize| resolved.root(t).unwrap_or(t);
    let mut last_of_loop = vec![None; resolved.back_edge_reads.len()];
    for (s, step) in resolved.steps.iter().enumerate() {
        if let Some(l) = step.loop_index() {
            last_of_loop[l] = Some(s);
        }
    }
    for s in 0..n {
        let step = &resolved.steps[s];
        let back_edge: &[usize] = match step.loop_index() {
            Some(l) if last_of_loop[l] == Some(s) => &resolved.back_edge_reads[l],
            _ => &[],
        };
        let mut reads: Vec<usize> = (resolved.reads(s).iter())
            .map(|&t| t as usize)
            .chain(back_edge.iter().copied())
            .map(storage)
            .collect();
        let mut writes: Vec<usize> = (resolved.writes(s).iter())
            .map(|&t| storage(t as usize))
            .collect();
        reads.sort_unstable();
        reads.dedup();
        writes.sort_unstable();
        writes.dedup();
        for r in reads {
            accesses[r].push((s, 2 * writes_seen[r]));
        }
        for w in writes {
            accesses[w].push((s, 2 * writes_seen[w] + 1));
            writes_seen[w] += 1;
        }
    }
    for (key, mut list) in accesses.into_iter().enumerate() {
        list.sort_by_key(|&(s, rank)| (at[s], rank));
        if let Some(w) = list.windows(2).find(|w| w[1].1 < w[0].1) {
            violations.push(Violation::Dependency {
                storage: Some(graph.tensors[key].id.to_string()),
                before: step_id(w[1].0).to_string(),
                after: step_id(w[0].0).to_string(),
            });
        }
    }
    let pinned: Vec<usize> = (0..n).filter(|&s| graph.step_pinned(s)).collect();
    if let Some(w) = pinned.windows(2).find(|w| at[w[1]] < at[w[0]]) {
        violations.push(Violation::Dependency {
            storage: None,
            before: step_id(w[0]).to_string(),
            after: step_id(w[1]).to_string(),
        });
    }
    violations.truncate(MAX_VIOLATIONS);
    violations
}
