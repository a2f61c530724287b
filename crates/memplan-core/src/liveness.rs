//! Liveness: from a resolved graph to the planning [`Problem`].
//!
//! A position is a top-level step, or a whole loop (which takes the buffers of each of its steps
//! and of its back edge). A step takes the tensors it reads and writes; a view is a use of its
//! root's storage; an elided tensor takes nothing. A tensor that owns storage lives on the closed
//! interval from the first position that takes it to the last, unless it is always-live.
//!
//! Owning tensors become buffers in tensor order (the canonical order). Views and elided tensors
//! own nothing and become no buffer. A tensor that owns storage, is not always-live and is never
//! taken needs no bytes: it is listed in [`Liveness::unused`], not planned.
//!
//! Rematerialization ([`analyze_flipped`]): an *flipped* tensor gets no storage; each step that
//! reads it reads, instead, what its producing steps read (transitively through other flipped
//! tensors), since it recomputes it there; a step that writes only flipped tensors takes nothing
//! at its own position. So the producer's inputs live longer, which is why inlining can cost
//! bytes as well as free them.

use std::sync::{Arc, OnceLock};

mod flips;

pub(crate) use flips::FlipSpans;

use crate::graph::{Graph, Id, ResolvedGraph, Storage};
use crate::lists::Lists;
use crate::problem::{Buffer, Lifetime, LiveInterval, Problem, ProblemError};

/// The planning problem of a graph, with the map back to its tensors.
#[derive(Debug, Clone)]
pub struct Liveness {
    pub problem: Problem,
    /// Which steps write and read each tensor's storage ([`Liveness::uses`]), made the first
    /// time they are asked for: planning and the views never read them (16 MB on a million-row
    /// CSV), the remat candidates do, for a step that passes their other tests. Of the graph
    /// alone, so every flip set of one graph shares them ([`Liveness::shared_uses`]).
    uses: SharedUses,
    /// The tensor index of each buffer.
    pub buffer_tensor: Vec<u32>,
    /// Tensors that own storage but are never taken and not always-live.
    pub unused: Vec<usize>,
    /// Tensors flipped (recomputed at each use): no storage.
    pub flipped: Vec<usize>,
}

/// Equal where the problems and the maps back to the tensors are: the uses follow from the graph.
impl PartialEq for Liveness {
    fn eq(&self, other: &Self) -> bool {
        (self.problem == other.problem)
            && (self.buffer_tensor == other.buffer_tensor)
            && (self.unused == other.unused)
            && (self.flipped == other.flipped)
    }
}

impl Eq for Liveness {}

/// The uses of one graph, made once, shared by the liveness of each of its flip sets.
pub type SharedUses = Arc<OnceLock<Uses>>;

impl Liveness {
    /// The uses of `resolved`, the graph this was analyzed from, made the first time they are
    /// asked for.
    pub fn uses(&self, resolved: &ResolvedGraph) -> &Uses {
        self.uses.get_or_init(|| Uses::of(resolved))
    }

    /// The uses, made or not, for [`analyze_flipped_with`] to share with another flip set.
    pub fn shared_uses(&self) -> SharedUses {
        Arc::clone(&self.uses)
    }

    /// The id of the tensor of buffer `b`, in `graph`, the graph this was analyzed from.
    pub fn buffer_id<'g>(&self, graph: &'g Graph, b: usize) -> &'g Id {
        &graph.tensors[self.buffer_tensor[b] as usize].id
    }

    /// The problem with each buffer named by its tensor's id: what a message about a buffer
    /// (a validation's, the checker's) needs, and a layout never reads. The problem itself holds
    /// no names: at a million buffers they were a tenth of a load's memory.
    pub fn named(&self, graph: &Graph) -> Problem {
        Problem {
            names: (0..self.buffer_tensor.len())
                .map(|b| self.buffer_id(graph, b).clone())
                .collect(),
            ..self.problem.clone()
        }
    }

    /// [`Problem::validate`] of the problem, the buffer it faults named by its tensor's id.
    pub fn validate(&self, graph: &Graph) -> Result<(), ProblemError> {
        self.problem.validate().map_err(|unnamed| {
            // Validation reads no name, so the named problem fails the same way.
            self.named(graph).validate().err().unwrap_or(unnamed)
        })
    }

    /// Whether the uses have been made.
    #[cfg(test)]
    pub(crate) fn uses_made(&self) -> bool {
        self.uses.get().is_some()
    }
}

/// For each storage root, the steps that write it (or a view of it) and the steps that read it,
/// each in schedule order and once; empty for views and elided tensors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Uses {
    pub producers: Lists,
    pub consumers: Lists,
}

impl Uses {
    pub fn of(resolved: &ResolvedGraph) -> Uses {
        Uses {
            producers: Uses::side(resolved, true),
            consumers: Uses::side(resolved, false),
        }
    }

    /// One side of the uses: the steps that write each root (`writes`), or that read it.
    pub(crate) fn side(resolved: &ResolvedGraph, writes: bool) -> Lists {
        // A root's steps are among the lists' items, and step indices fit `u32`.
        Lists::collect(resolved.tensors.len(), |push| {
            for_each_use(resolved, writes, push)
        })
        .expect("no more uses than the resolved graph's lists hold")
    }
}

/// Calls `each(root, step)` for each step in schedule order and each storage root it writes
/// (`writes`) or reads: the uses [`Uses`] lists, with a root repeated where a step takes it
/// more than once (as the views' labels take them, without holding the lists).
pub fn for_each_use(resolved: &ResolvedGraph, writes: bool, each: &mut dyn FnMut(usize, u32)) {
    let of = match writes {
        true => ResolvedGraph::writes,
        false => ResolvedGraph::reads,
    };
    for s in 0..resolved.steps.len() {
        for r in of(resolved, s)
            .iter()
            .filter_map(|&t| resolved.root(t as usize))
        {
            each(r, s as u32);
        }
    }
}

/// For each position, the storage roots it takes (sorted, each once), with the tensors marked
/// in `flipped` (one flag per tensor, or empty for none) recomputed at their uses.
pub fn taken_per_position(resolved: &ResolvedGraph, flipped: &[bool]) -> Vec<Vec<usize>> {
    let mut taken: Vec<Vec<usize>> = vec![Vec::new(); resolved.positions.len()];
    for_each_taken(resolved, flipped, |position, root| {
        taken[position].push(root)
    });
    for roots in &mut taken {
        roots.sort_unstable();
        roots.dedup();
    }
    taken
}

/// Calls `take(position, root)` for each storage root each position takes, positions in
/// order (a root may come more than once at a position), with the tensors marked in `flipped`
/// recomputed at their uses: [`taken_per_position`] without a list per position, which a
/// rematerialization score, wanting only each root's first and last position, does not need.
fn for_each_taken(resolved: &ResolvedGraph, flipped: &[bool], mut take: impl FnMut(usize, usize)) {
    let is_flipped = |t: usize| flipped.get(t).copied().unwrap_or(false);
    // The steps that write each flipped root.
    let producers = match flipped.is_empty() {
        true => Lists::default(),
        false => Lists::collect(resolved.tensors.len(), |push| {
            for s in 0..resolved.steps.len() {
                for &w in resolved.writes(s) {
                    if let Some(r) = resolved.root(w as usize).filter(|&r| is_flipped(r)) {
                        push(r, s as u32);
                    }
                }
            }
        })
        .expect("no more writes than the resolved graph's lists hold"),
    };
    // What a use of flipped root `r` reads instead: its producers' reads, expanded (memoized; a
    // producer that reads what it writes is not expanded twice: a root met again while being
    // expanded adds nothing there).
    let mut expansion: Vec<Option<Vec<usize>>> = vec![None; producers.len()];
    fn expand(
        r: usize,
        resolved: &ResolvedGraph,
        producers: &Lists,
        is_flipped: &dyn Fn(usize) -> bool,
        expansion: &mut Vec<Option<Vec<usize>>>,
        visiting: &mut Vec<bool>,
    ) {
        if expansion[r].is_some() || visiting[r] {
            return;
        }
        visiting[r] = true;
        let mut roots = Vec::new();
        for &s in &producers[r] {
            for &t in resolved.reads(s as usize) {
                match resolved.root(t as usize) {
                    Some(q) if is_flipped(q) => {
                        expand(q, resolved, producers, is_flipped, expansion, visiting);
                        roots.extend_from_slice(expansion[q].as_deref().unwrap_or_default());
                    }
                    Some(q) => roots.push(q),
                    None => {}
                }
            }
        }
        roots.sort_unstable();
        roots.dedup();
        visiting[r] = false;
        expansion[r] = Some(roots);
    }
    let mut visiting = vec![false; producers.len()];
    let mut root_taken = |position: usize, r: usize, take: &mut dyn FnMut(usize, usize)| {
        if is_flipped(r) {
            expand(
                r,
                resolved,
                &producers,
                &is_flipped,
                &mut expansion,
                &mut visiting,
            );
            for &q in expansion[r].as_deref().unwrap_or_default() {
                take(position, q);
            }
        } else {
            take(position, r);
        }
    };
    for (position, p) in resolved.positions.iter().enumerate() {
        let back_edge = p
            .loop_index()
            .map(|l| resolved.back_edge_reads[l].as_slice())
            .unwrap_or_default();
        for s in p.steps() {
            let (reads, writes) = (resolved.reads(s), resolved.writes(s));
            let root = |&t: &u32| resolved.root(t as usize);
            let writes_kept = (writes.iter()).any(|w| root(w).is_some_and(|r| !is_flipped(r)));
            if !flipped.is_empty()
                && !writes_kept
                && !writes.is_empty()
                && writes.iter().any(|w| root(w).is_some())
            {
                // It only computes flipped values: it runs at their uses instead.
                continue;
            }
            for t in reads.iter().chain(writes) {
                if let Some(r) = root(t) {
                    root_taken(position, r, &mut take);
                }
            }
        }
        for &t in back_edge {
            if let Some(r) = resolved.root(t) {
                root_taken(position, r, &mut take);
            }
        }
    }
}

/// Builds the planning problem of `graph` (already resolved as `resolved`).
pub fn analyze(graph: &Graph, resolved: &ResolvedGraph) -> Liveness {
    analyze_flipped(graph, resolved, &[])
}

/// [`analyze`] with the tensors of `flipped` (one flag per tensor, or empty for none)
/// recomputed at their uses instead of stored (see the module docs).
pub fn analyze_flipped(graph: &Graph, resolved: &ResolvedGraph, flipped: &[bool]) -> Liveness {
    analyze_flipped_with(graph, resolved, flipped, SharedUses::default())
}

/// [`analyze_flipped`] sharing the uses of `resolved` with another flip set (flips do not change
/// them): a caller that re-derives flip sets of one graph makes them once.
pub fn analyze_flipped_with(
    graph: &Graph,
    resolved: &ResolvedGraph,
    flipped: &[bool],
    uses: SharedUses,
) -> Liveness {
    Liveness {
        uses,
        ..storage_flipped(graph, resolved, flipped, false)
    }
}

/// The problem alone of [`analyze_flipped`]: what a relayout needs (a rematerialization score
/// makes hundreds), without the uses, which flips do not change.
pub fn problem_flipped(graph: &Graph, resolved: &ResolvedGraph, flipped: &[bool]) -> Problem {
    storage_flipped(graph, resolved, flipped, true).problem
}

/// [`problem_flipped`] given the live `spans` of each root under `flipped`
/// ([`spans_flipped`], or [`FlipSpans`]), its buffers named when `named`: a layout never reads
/// a name (only a checker's or a validation's message does), and a score, a footprint compared
/// and never shown, makes hundreds of problems, whose names were a third of the allocations.
pub(crate) fn problem_of_spans(
    graph: &Graph,
    resolved: &ResolvedGraph,
    flipped: &[bool],
    spans: &[Option<LiveInterval>],
    named: bool,
) -> Problem {
    problem_visiting(graph, resolved, flipped, spans, named, |_, _| {})
}

/// What became of a storage root in a problem: flipped (recomputed at its uses), never taken,
/// or its buffer.
enum Root {
    Flipped,
    Unused,
    Buffer(usize),
}

/// [`problem_of_spans`], telling `visit` what became of each storage root, in tensor order.
fn problem_visiting(
    graph: &Graph,
    resolved: &ResolvedGraph,
    flipped: &[bool],
    span: &[Option<LiveInterval>],
    named: bool,
    mut visit: impl FnMut(usize, Root),
) -> Problem {
    let is_flipped = |t: usize| flipped.get(t).copied().unwrap_or(false);
    let mut problem = Problem {
        device_ids: resolved.device_ids.clone(),
        positions: resolved.positions.len() as u32,
        buffers: Vec::with_capacity(resolved.tensors.len()),
        names: Vec::new(),
        position_times: position_times(graph, resolved),
    };
    for (t, rt) in resolved.tensors.iter().enumerate() {
        if rt.storage != Storage::Owned {
            continue;
        }
        if is_flipped(t) {
            visit(t, Root::Flipped);
            continue;
        }
        let lifetime = match (rt.always_live, span[t]) {
            (true, _) => Lifetime::Always,
            (false, Some(interval)) => Lifetime::Live(interval),
            (false, None) => {
                visit(t, Root::Unused);
                continue;
            }
        };
        visit(t, Root::Buffer(problem.buffers.len()));
        if named {
            problem.names.push(graph.tensors[t].id.clone());
        }
        problem.buffers.push(Buffer::new(
            rt.device,
            rt.bytes,
            rt.alignment_log2(),
            rt.dtype,
            lifetime,
        ));
    }
    problem
}

/// When each position starts, where every step gives a time and they strictly increase; else
/// empty (see [`Problem::position_times`]). Allocated to its length: collected through an
/// `Option`, the list grew by doubling (at a million positions, 7 MB unused).
fn position_times(graph: &Graph, resolved: &ResolvedGraph) -> Vec<u64> {
    let mut times = Vec::with_capacity(resolved.positions.len());
    for p in resolved.positions.iter() {
        match graph.step_time(p.first_step()) {
            Some(t) if times.last().is_none_or(|&last| last < t) => times.push(t),
            _ => return Vec::new(),
        }
    }
    times
}

/// Each storage root's live interval (from the first position that takes it to the last), with
/// the tensors marked in `flipped` recomputed at their uses; `None` for a root never taken.
pub(crate) fn spans_flipped(
    resolved: &ResolvedGraph,
    flipped: &[bool],
) -> Vec<Option<LiveInterval>> {
    let mut span: Vec<Option<LiveInterval>> = vec![None; resolved.tensors.len()];
    for_each_taken(resolved, flipped, |position, t| {
        let position = position as u32;
        let s = span[t].get_or_insert(LiveInterval::new(position, position));
        s.last = position;
    });
    span
}

/// What no layout of [`problem_flipped`] goes below, without building it, given the live `span`
/// of each root under `flipped`: per device, the sum over its arena's regions (one per dtype
/// when `by_dtype`, else one) of the most occupied bytes live there at once, which is the floor
/// a layout checks first; and the always-live bytes of every device.
pub(crate) fn floor_of_spans(
    resolved: &ResolvedGraph,
    flipped: &[bool],
    span: &[Option<LiveInterval>],
    by_dtype: bool,
) -> (Vec<u64>, u64) {
    flips::Floors::of_spans(resolved, flipped, span, by_dtype).floors()
}

/// [`analyze_flipped`] but for its (empty) uses; the buffers named by their tensors' ids when
/// `named`, else unnamed.
fn storage_flipped(
    graph: &Graph,
    resolved: &ResolvedGraph,
    flipped: &[bool],
    named: bool,
) -> Liveness {
    storage_of_spans(
        graph,
        resolved,
        flipped,
        &spans_flipped(resolved, flipped),
        named,
    )
}

/// [`storage_flipped`] given the live `span` of each root under `flipped`.
fn storage_of_spans(
    graph: &Graph,
    resolved: &ResolvedGraph,
    flipped: &[bool],
    span: &[Option<LiveInterval>],
    named: bool,
) -> Liveness {
    // As many as the problem's buffers, allocated as they are.
    let mut buffer_tensor = Vec::with_capacity(resolved.tensors.len());
    let mut unused = Vec::new();
    let mut flipped_list = Vec::new();
    let problem = problem_visiting(
        graph,
        resolved,
        flipped,
        span,
        named,
        |t, root| match root {
            Root::Flipped => flipped_list.push(t),
            Root::Unused => unused.push(t),
            Root::Buffer(b) => {
                // Tensor indices fit `u32` (`Graph::resolve`).
                debug_assert_eq!(b, buffer_tensor.len());
                buffer_tensor.push(t as u32);
            }
        },
    );
    Liveness {
        problem,
        uses: SharedUses::default(),
        buffer_tensor,
        unused,
        flipped: flipped_list,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::graph::testing::{step, tensor};
    use crate::graph::{Declaration, Loop, Step, Tensor, TensorKind};

    fn lifetimes(g: &Graph) -> Vec<(Id, Lifetime)> {
        let l = crate::liveness_of(g).unwrap();
        let named = l.named(g);
        (named.names.into_iter())
            .zip(named.buffers.iter().map(Buffer::lifetime))
            .collect()
    }

    fn at(first: u32, last: u32) -> Lifetime {
        Lifetime::Live(LiveInterval::new(first, last))
    }

    /// Step times become position times only when every step has one and they strictly
    /// increase: anything else would give lifetimes of no length, or negative.
    #[test]
    fn position_times_are_kept_only_when_every_step_gives_an_increasing_one() {
        let times = |ts: [Option<u64>; 3]| {
            let mut g = Graph {
                tensors: vec![tensor("a", 8), tensor("b", 8), tensor("c", 8)],
                steps: vec![
                    step("s0", &[], &["a"]),
                    step("s1", &["a"], &["b"]),
                    step("s2", &["b"], &["c"]),
                ],
                ..Graph::default()
            };
            for (s, t) in g.steps.iter_mut().zip(ts) {
                s.time = t;
            }
            crate::liveness_of(&g).unwrap().problem.position_times
        };
        assert_eq!(times([Some(0), Some(5), Some(9)]), [0, 5, 9]);
        assert!(times([Some(0), None, Some(9)]).is_empty());
        assert!(times([Some(0), Some(5), Some(5)]).is_empty());
        assert!(times([Some(9), Some(5), Some(0)]).is_empty());
    }

    /// The uses are made when first asked for, as `Uses::of` makes them, and once for every
    /// flip set that shares them.
    #[test]
    fn uses_are_made_when_asked_for_and_shared_by_flip_sets() {
        let g = Graph {
            tensors: vec![tensor("a", 8), tensor("b", 8), tensor("c", 8)],
            steps: vec![
                step("s0", &[], &["a"]),
                step("s1", &["a"], &["b"]),
                step("s2", &["a", "b"], &["c"]),
            ],
            ..Graph::default()
        };
        let resolved = g.resolve().unwrap();
        let liveness = analyze(&g, &resolved);
        assert!(liveness.uses.get().is_none(), "planning needs no uses");
        let flipped = analyze_flipped_with(&g, &resolved, &[false, true], liveness.shared_uses());
        assert_eq!(liveness.uses(&resolved), &Uses::of(&resolved));
        assert_eq!(liveness.uses(&resolved).consumers[0], [1, 2]);
        assert!(std::ptr::eq(
            flipped.uses(&resolved),
            liveness.uses(&resolved)
        ));
        assert_ne!(flipped.problem, liveness.problem);
    }

    #[test]
    fn a_loop_is_one_position_taking_its_steps_and_back_edge() {
        let mut g = Graph {
            tensors: vec![
                tensor("a", 8),
                tensor("b", 8),
                tensor("c", 8),
                tensor("flag", 1),
                tensor("d", 8),
            ],
            steps: vec![
                step("s0", &[], &["a"]),
                step("l0", &["a"], &["b"]),
                step("l1", &["b"], &["c"]),
                step("s3", &["c"], &["d"]),
            ],
            loops: vec![Loop {
                id: "L".into(),
                trip_count: Some(4),
                back_edge_reads: vec!["flag".into()],
            }],
            ..Graph::default()
        };
        g.steps[1].loop_id = Some("L".into());
        g.steps[2].loop_id = Some("L".into());
        assert_eq!(
            lifetimes(&g),
            vec![
                ("a".into(), at(0, 1)),
                ("b".into(), at(1, 1)),
                ("c".into(), at(1, 2)),
                ("flag".into(), at(1, 1)),
                ("d".into(), at(2, 2))
            ]
        );
    }

    #[test]
    fn views_are_uses_of_their_root_and_own_nothing() {
        let g = Graph {
            tensors: vec![
                tensor("base", 64),
                Tensor {
                    declared: Declaration {
                        view_of: Some("base".into()),
                        view_offset: 32,
                        ..Declaration::default()
                    }
                    .into(),
                    ..tensor("half", 32)
                },
                Tensor {
                    declared: Declaration {
                        view_of: Some("half".into()),
                        ..Declaration::default()
                    }
                    .into(),
                    ..tensor("quarter", 16)
                },
                tensor("out", 8),
            ],
            steps: vec![
                step("s0", &[], &["base"]),
                step("s1", &[], &["out"]),
                step("s2", &["quarter"], &["out"]),
            ],
            ..Graph::default()
        };
        let resolved = g.resolve().unwrap();
        assert_eq!(
            resolved.tensors[2].storage,
            crate::graph::Storage::View { root: 0 }
        );
        assert_eq!(
            (0..4).map(|t| resolved.view_offset(t)).collect::<Vec<_>>(),
            [None, Some(32), Some(32), None]
        );
        assert_eq!(
            lifetimes(&g),
            vec![("base".into(), at(0, 2)), ("out".into(), at(1, 2))]
        );
    }

    #[test]
    fn a_long_chain_of_views_resolves_to_its_root() {
        // Each view resolves once: a chain of 100k views is linear work, not quadratic.
        let n = 100_000;
        let mut tensors = vec![tensor("v0", 1 << 20)];
        for i in 1..n {
            tensors.push(Tensor {
                declared: Declaration {
                    view_of: Some(format!("v{}", i - 1).into()),
                    view_offset: 1,
                    ..Declaration::default()
                }
                .into(),
                // One byte shorter than its base: each view lies inside the one it views.
                ..tensor(&format!("v{i}"), (n - i) as u64 + 8)
            });
        }
        let g = Graph {
            tensors,
            steps: vec![step("s", &[], &[&format!("v{}", n - 1)])],
            ..Graph::default()
        };
        let resolved = g.resolve().unwrap();
        assert_eq!(
            resolved.tensors[n - 1].storage,
            crate::graph::Storage::View { root: 0 }
        );
        assert_eq!(resolved.view_offset(n - 1), Some(n as u64 - 1));
        assert_eq!(resolved.view_offset(0), None);
        assert_eq!(lifetimes(&g), vec![("v0".into(), at(0, 0))]);
    }

    #[test]
    fn elided_always_live_and_unused_tensors() {
        let g = Graph {
            tensors: vec![
                Tensor {
                    kind: TensorKind::Input,
                    ..tensor("in", 8)
                },
                Tensor {
                    elided: true,
                    ..tensor("fused", 8)
                },
                Tensor {
                    kind: TensorKind::Output,
                    always_live: Some(false),
                    ..tensor("out", 8)
                },
                tensor("never", 8),
                Tensor {
                    held: true,
                    ..tensor("cache", 8)
                },
            ],
            steps: vec![
                step("s0", &["in"], &["fused"]),
                step("s1", &["fused"], &["out"]),
            ],
            ..Graph::default()
        };
        let l = crate::liveness_of(&g).unwrap();
        assert_eq!(l.unused, vec![3]);
        assert_eq!(
            lifetimes(&g),
            vec![
                ("in".into(), Lifetime::Always),
                ("out".into(), at(1, 1)),
                ("cache".into(), Lifetime::Always)
            ]
        );
    }

    /// The liveness rules of docs/format.md, written the slow, obvious way: follow each use to
    /// its root by id, one position per top-level step or loop, a closed interval per root.
    fn reference(g: &Graph) -> (Vec<(Id, Lifetime)>, Vec<Id>) {
        let by_id = |id: &str| g.tensors.iter().find(|t| t.id == id).unwrap();
        // The root of a tensor, or None when it or a tensor on its chain is elided.
        let root = |t: &Tensor| -> Option<Id> {
            let mut at = t;
            loop {
                if at.owns_nothing() {
                    return None;
                }
                match &at.declared.view_of {
                    None => return Some(at.id.clone()),
                    Some(base) => at = by_id(base),
                }
            }
        };
        let flag = |t: &Tensor| {
            t.always_live
                .unwrap_or(t.held || t.kind.always_live_by_default())
        };
        // Positions: consecutive steps of one loop are one position.
        let mut positions: Vec<Vec<Id>> = Vec::new();
        let mut last_loop: Option<&str> = None;
        for s in &g.steps {
            let same = s.loop_id.is_some() && s.loop_id.as_deref() == last_loop;
            let uses = s.reads.iter().chain(&s.writes).cloned();
            if same {
                positions.last_mut().unwrap().extend(uses);
            } else {
                positions.push(uses.collect());
                if let Some(l) = &s.loop_id {
                    let lp = g.loops.iter().find(|x| x.id == **l).unwrap();
                    positions
                        .last_mut()
                        .unwrap()
                        .extend(lp.back_edge_reads.iter().cloned());
                }
            }
            last_loop = s.loop_id.as_deref();
        }
        let mut buffers = Vec::new();
        let mut unused = Vec::new();
        for t in g
            .tensors
            .iter()
            .filter(|t| t.declared.view_of.is_none() && !t.owns_nothing())
        {
            let always = flag(t)
                || g.tensors.iter().any(|v| {
                    v.declared.view_of.is_some() && flag(v) && root(v).as_deref() == Some(&t.id)
                });
            let taken: Vec<u32> = positions
                .iter()
                .enumerate()
                .filter(|(_, uses)| {
                    uses.iter()
                        .any(|u| root(by_id(u)).as_deref() == Some(&t.id))
                })
                .map(|(p, _)| p as u32)
                .collect();
            let lifetime = match (always, taken.first(), taken.last()) {
                (true, _, _) => Lifetime::Always,
                (false, Some(&a), Some(&b)) => at(a, b),
                _ => {
                    unused.push(t.id.clone());
                    continue;
                }
            };
            buffers.push((t.id.clone(), lifetime));
        }
        (buffers, unused)
    }

    fn arb_graph() -> impl proptest::strategy::Strategy<Value = Graph> {
        use proptest::prelude::*;
        let arb_tensor = (
            any::<prop::sample::Index>(),
            prop::bool::weighted(0.4),
            prop::bool::weighted(0.15),
            prop::sample::select(TensorKind::ALL.to_vec()),
            prop::bool::weighted(0.1),
            prop::option::weighted(0.2, any::<bool>()),
        );
        (
            prop::collection::vec(arb_tensor, 1..9),
            prop::collection::vec(
                (
                    prop::collection::vec(any::<prop::sample::Index>(), 0..3),
                    prop::collection::vec(any::<prop::sample::Index>(), 1..3),
                    0usize..3,
                ),
                1..9,
            ),
            prop::collection::vec(any::<prop::sample::Index>(), 0..2),
        )
            .prop_map(|(tensors, steps, back_edge)| {
                let n = tensors.len();
                let tensors: Vec<Tensor> = tensors
                    .into_iter()
                    .enumerate()
                    .map(
                        |(i, (base, is_view, elided, kind, held, always_live))| Tensor {
                            // Views point to an earlier tensor, so chains never cycle.
                            declared: Declaration {
                                view_of: (is_view && i > 0)
                                    .then(|| format!("t{}", base.index(i)).into()),
                                ..Declaration::default()
                            }
                            .into(),
                            elided,
                            kind,
                            held,
                            always_live,
                            ..tensor(&format!("t{i}"), 8)
                        },
                    )
                    .collect();
                // Loop ids label runs: a step joins the previous step's loop, opens a new
                // loop, or stays top-level, so every loop is contiguous.
                let mut loops: Vec<Loop> = Vec::new();
                let mut current: Option<String> = None;
                let steps = steps
                    .into_iter()
                    .enumerate()
                    .map(|(i, (reads, writes, looping))| {
                        current = match (looping, &current) {
                            (0, _) => None,
                            (1, Some(l)) => Some(l.clone()),
                            _ => {
                                let id = format!("L{}", loops.len());
                                loops.push(Loop {
                                    id: id.clone(),
                                    back_edge_reads: back_edge
                                        .iter()
                                        .map(|b| format!("t{}", b.index(n)))
                                        .map(Into::into)
                                        .collect(),
                                    ..Loop::default()
                                });
                                Some(id)
                            }
                        };
                        let ids = |v: Vec<prop::sample::Index>| {
                            v.iter()
                                .map(|x| format!("t{}", x.index(n)))
                                .map(Into::into)
                                .collect()
                        };
                        Step {
                            id: format!("s{i}").into(),
                            reads: ids(reads),
                            writes: ids(writes),
                            loop_id: current.clone().map(Into::into),
                            ..Step::default()
                        }
                    })
                    .collect();
                Graph {
                    tensors,
                    steps,
                    loops,
                    ..Graph::default()
                }
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        #[test]
        fn liveness_agrees_with_the_reference_rules(g in arb_graph()) {
            let l = crate::liveness_of(&g).unwrap();
            let (buffers, unused) = reference(&g);
            proptest::prop_assert_eq!(lifetimes(&g), buffers);
            let names: Vec<Id> = l.unused.iter().map(|&t| g.tensors[t].id.clone()).collect();
            proptest::prop_assert_eq!(names, unused);
        }

        /// A score's unnamed problem is the named one but for the names, whatever is flipped.
        #[test]
        fn an_unnamed_problem_differs_only_in_its_names(
            g in arb_graph(),
            flips in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..24),
        ) {
            let resolved = g.resolve().unwrap();
            let named = problem_flipped(&g, &resolved, &flips);
            let spans = spans_flipped(&resolved, &flips);
            let mut unnamed = problem_of_spans(&g, &resolved, &flips, &spans, false);
            proptest::prop_assert!(unnamed.names.is_empty());
            proptest::prop_assert_eq!(named.names.len(), named.buffers.len());
            unnamed.names = named.names.clone();
            proptest::prop_assert_eq!(unnamed, named);
        }
    }

    /// [`floor_of_spans`] by its definition, from the problem itself: per device, each region's
    /// most occupied bytes live at once, summed; and every always-live byte.
    fn floor_of_problem(problem: &Problem, by_dtype: bool) -> (Vec<u64>, u64) {
        let mut floors = vec![0; problem.device_ids.len()];
        let mut regions: Vec<(usize, Option<DType>)> = (problem.buffers.iter())
            .map(|b| (b.device(), b.dtype.filter(|_| by_dtype)))
            .collect();
        regions.sort();
        regions.dedup();
        for (device, class) in regions {
            let peak = (0..problem.positions)
                .map(|p| {
                    (problem.buffers.iter())
                        .filter(|b| b.device() == device && b.dtype.filter(|_| by_dtype) == class)
                        .filter(|b| matches!(b.lifetime(), Lifetime::Live(i) if i.first <= p && p <= i.last))
                        .map(|b| b.occupied_size())
                        .sum::<u64>()
                })
                .max()
                .unwrap_or(0);
            floors[device] += peak;
        }
        let always = (problem.buffers.iter())
            .filter(|b| b.is_always_live())
            .map(|b| b.size)
            .sum();
        (floors, always)
    }

    proptest::proptest! {
        /// The floor of a flip set without its problem is the floor of its problem, with
        /// precision classes or without.
        #[test]
        fn the_floor_of_a_flip_set_is_its_problems(
            g in arb_graph(),
            flips in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..24),
            by_dtype in proptest::prelude::any::<bool>(),
            two_devices in proptest::prelude::any::<bool>(),
        ) {
            let mut g = g;
            if two_devices {
                g.devices = vec![crate::graph::Device { id: "d0".into(), hardware_class: None },
                                 crate::graph::Device { id: "d1".into(), hardware_class: None }];
            }
            // Sizes, alignments, dtypes and devices that differ, so regions and rounding matter.
            for (i, t) in g.tensors.iter_mut().enumerate() {
                t.bytes = Some(8 * (i as u64 % 5) + 3);
                t.declared.alignment = Some(1 << (i % 4));
                t.declared.dtype = [None, Some("f32".into()), Some("f16".into())][i % 3].clone();
                if two_devices && t.declared.view_of.is_none() {
                    t.device = Some(["d0", "d1"][i % 2].into());
                }
            }
            let Ok(resolved) = g.resolve() else { return Ok(()) };
            let problem = problem_flipped(&g, &resolved, &flips);
            let spans = spans_flipped(&resolved, &flips);
            proptest::prop_assert_eq!(
                floor_of_spans(&resolved, &flips, &spans, by_dtype),
                floor_of_problem(&problem, by_dtype)
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Spans moved from set to set, a few toggles at a time or derived afresh, are the
        /// spans each set's full derivation gives; a candidate set whose expansions could
        /// meet in a cycle is refused.
        #[test]
        fn spans_moved_set_to_set_are_each_sets_own(
            g in arb_graph(),
            candidates in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..9),
            sets in proptest::collection::vec(
                proptest::collection::vec(proptest::prelude::any::<bool>(), 0..9), 1..8),
            most in proptest::prelude::prop_oneof![proptest::prelude::Just(0usize), proptest::prelude::Just(usize::MAX), 1usize..4],
            by_dtype in proptest::prelude::any::<bool>(),
        ) {
            let mut g = g;
            // Sizes, alignments and dtypes that differ, so the floors' regions and rounding
            // matter.
            for (i, t) in g.tensors.iter_mut().enumerate() {
                t.bytes = Some(8 * (i as u64 % 5) + 3);
                t.declared.alignment = Some(1 << (i % 4));
                t.declared.dtype = [None, Some("f32".into()), Some("f16".into())][i % 3].clone();
            }
            let Ok(resolved) = g.resolve() else { return Ok(()) };
            let n = g.tensors.len();
            let candidates: Vec<usize> = (0..n).filter(|&t| candidates.get(t) == Some(&true)).collect();
            let Some(mut moving) = FlipSpans::new(&resolved, &candidates, by_dtype) else {
                return Ok(());
            };
            proptest::prop_assert_eq!(moving.spans(), &spans_flipped(&resolved, &[])[..]);
            for set in sets {
                let flipped: Vec<usize> = candidates.iter().copied()
                    .filter(|&t| set.get(t) == Some(&true)).collect();
                proptest::prop_assert!(flips::tests::set_toggling(&mut moving, &flipped, most));
                let mut flags = vec![false; n];
                for &t in &flipped {
                    flags[t] = true;
                }
                proptest::prop_assert_eq!(moving.flags(), &flags[..]);
                let spans = spans_flipped(&resolved, &flags);
                proptest::prop_assert_eq!(moving.spans(), &spans[..]);
                proptest::prop_assert_eq!(
                    moving.floors(),
                    floor_of_spans(&resolved, &flags, &spans, by_dtype)
                );
            }
            // A tensor that is not a candidate is not moved to.
            if let Some(other) = (0..n).find(|t| !candidates.contains(t)) {
                proptest::prop_assert!(!moving.set(&[other]));
            }
        }
    }

    /// Candidates whose producers read each other in a cycle are refused (their expansions
    /// would depend on the order they are met in); a chain of them moves, and a toggle at its
    /// start moves the spans of everything recomputed through it.
    #[test]
    fn a_cycle_of_candidates_is_refused_and_a_chain_moves() {
        let g = Graph {
            tensors: vec![
                tensor("x", 8),
                tensor("a", 8),
                tensor("b", 8),
                tensor("c", 8),
            ],
            steps: vec![
                step("s0", &[], &["x"]),
                step("s1", &["x"], &["a"]),
                step("s2", &["a"], &["b"]),
                step("s3", &["b"], &["c"]),
                step("s4", &["a", "b", "c"], &["x"]),
            ],
            ..Graph::default()
        };
        let resolved = g.resolve().unwrap();
        let mut chain = FlipSpans::new(&resolved, &[1, 2], false).expect("a chain moves");
        for set in [&[2][..], &[1, 2], &[1], &[]] {
            assert!(chain.set(set));
            let mut flags = vec![false; 4];
            set.iter().for_each(|&t| flags[t] = true);
            assert_eq!(chain.spans(), &spans_flipped(&resolved, &flags)[..]);
        }
        // a's producer reads b and b's reads a: a cycle; either alone is not one.
        let looped = Graph {
            steps: vec![
                step("s0", &["b"], &["a"]),
                step("s1", &["a"], &["b"]),
                step("s2", &["a", "b"], &["c"]),
            ],
            tensors: vec![tensor("a", 8), tensor("b", 8), tensor("c", 8)],
            ..Graph::default()
        };
        let resolved = looped.resolve().unwrap();
        assert!(FlipSpans::new(&resolved, &[0, 1], false).is_none());
        assert!(FlipSpans::new(&resolved, &[0], false).is_some());
    }

    #[test]
    fn an_output_view_keeps_its_intermediate_base_alive() {
        // a, b, c written in turn; `out` is a view of `a` of kind output. Its bytes are a's, so a
        // must outlive the schedule: c must not be placed on top of it.
        let g = Graph {
            tensors: vec![
                tensor("a", 64),
                tensor("b", 64),
                tensor("c", 64),
                Tensor {
                    declared: Declaration {
                        view_of: Some("a".into()),
                        ..Declaration::default()
                    }
                    .into(),
                    kind: TensorKind::Output,
                    ..tensor("out", 64)
                },
            ],
            steps: vec![
                step("s0", &[], &["a"]),
                step("s1", &["a"], &["b"]),
                step("s2", &["b"], &["c"]),
            ],
            ..Graph::default()
        };
        assert_eq!(
            lifetimes(&g),
            vec![
                ("a".into(), Lifetime::Always),
                ("b".into(), at(1, 2)),
                ("c".into(), at(2, 2))
            ]
        );
        let l = crate::liveness_of(&g).unwrap();
        let plan = crate::plan(&l.problem, &crate::PlanOptions::default()).unwrap();
        assert!(plan.is_valid());
        let (a, c) = (plan.placements[0], plan.placements[2]);
        assert!(a.pool != c.pool || a.offset.abs_diff(c.offset) >= 64);
    }
}
