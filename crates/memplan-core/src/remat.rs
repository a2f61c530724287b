//! Rematerialization: which intermediates to recompute at their uses instead of storing, so the
//! footprint fits a budget, and what that costs in recompute.
//!
//! A *candidate* is a tensor that may be flipped ([`candidates`]): the dump's list, or, when it
//! gives none, each intermediate that is the only output of its step, owns its bytes, has no
//! views and is read later. Its recompute cost is the dump's figure, or its step's cost times
//! the number of steps that read it. Inlining is liveness's ([`crate::liveness::analyze_flipped`]):
//! the tensor gets no storage and its producer's inputs live until its uses.
//!
//! Relief is never assumed: every set of flips is scored by a real relayout with the same
//! options, strategies and checker as any plan ([`Rematerializer::score`]), so it can be
//! negative. [`Rematerializer::fit`] is the seed's two-round greedy, with two steps beyond it
//! when a byte budget is met (3 and 4):
//! 1. every candidate (cut to `max_candidates`, keeping the cheapest to recompute; the number
//!    cut is reported) is scored alone against the baseline, and ranked by relief per unit of
//!    recompute cost with [`compare_relief_ratio`] (exact: no floats, no cross-multiplication),
//!    ties by cost then tensor order;
//! 2. in that order, each is scored on top of the accepted set. One that pays is accepted; one
//!    that adds nothing is *held*. While flips are held, each later candidate is also scored with
//!    the held group: a group that beats the candidate alone is load-bearing and commits with it
//!    (the held flips carry 0, the closing flip the group's relief); one that loses is harmful
//!    and discarded for good; one that ties is neutral and stays held. Acceptance stops as soon
//!    as the budget is met (`Minimize` takes every flip that helps); held flips never joined by
//!    a paying one are discarded at the end, so recompute is never paid for zero bytes.
//! 3. the flip (or group) that would meet the budget gives way to the cheapest candidate not
//!    yet tried that meets it alone on top of the accepted set, when one costs less: the best
//!    ratio can free far more than the budget asks, at more cost;
//! 4. accepted flips the met budget no longer needs are pruned, the most expensive first,
//!    until none can be (relief is not additive: a later flip can free what earlier ones did);
//!    the reliefs left are the marginal ones in acceptance order.
//!
//! Without 3 and 4 the greedy paid up to 2x the exhaustive optimum's recompute cost on the
//! bundled examples; with them it stays within 10% (a test holds it there).
//!
//! The reliefs of the accepted flips sum to exactly `baseline - final`. Not meeting the budget
//! is an outcome (`within_target: false`), not an error.

use rustc_hash::FxHashMap as HashMap;
use std::cell::{OnceCell, RefCell, RefMut};
use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::graph::{Graph, ResolvedGraph, Storage, TensorKind};
use crate::layout::{Control, Decodes, PlanError, PlanOptions, lay_out, lay_out_within, plan_with};
use crate::liveness::{FlipSpans, Liveness, floor_of_spans, problem_of_spans, spans_flipped};
use crate::problem::{LiveInterval, Problem};
use crate::reused::Reused;

/// A tensor that may be recomputed at its uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub tensor: usize,
    /// The cost of recomputing it at all its uses, in the unit of step costs.
    pub recompute_cost: u64,
}

/// Sorts candidates by the cost of recomputing them, then by tensor: the order a fit tries them
/// in, wherever it picks the cheapest.
fn cheapest_first(candidates: &mut [Candidate]) {
    candidates.sort_by_key(|c| (c.recompute_cost, c.tensor));
}

/// The candidates of a graph, analyzed as `liveness`: the dump's list, or derived (see the
/// module docs). The uses are asked for only where a step passes the other tests: a dump that
/// lists its candidates (a snapshot, a CSV: none) never makes them.
pub fn candidates(graph: &Graph, resolved: &ResolvedGraph, liveness: &Liveness) -> Vec<Candidate> {
    if let Some(given) = &graph.remat_candidates {
        return given
            .iter()
            .filter_map(|c| {
                Some(Candidate {
                    tensor: resolved.tensor_of(graph, &c.tensor)?,
                    recompute_cost: c.recompute_cost,
                })
            })
            .collect();
    }
    let n = resolved.tensors.len();
    let mut has_views = vec![false; n];
    for rt in &resolved.tensors {
        if let Storage::View { root, .. } = rt.storage {
            has_views[root as usize] = true;
        }
    }
    let mut found = Vec::new();
    for s in 0..resolved.steps.len() {
        let [w] = resolved.writes(s)[..] else {
            continue;
        };
        let rt = &resolved.tensors[w as usize];
        let eligible = rt.storage == Storage::Owned
            && !rt.always_live
            && graph.tensors[w as usize].kind == TensorKind::Intermediate
            && !has_views[w as usize]
            && !resolved.reads(s).contains(&w);
        if !eligible {
            continue;
        }
        let uses = liveness.uses(resolved);
        let readers = (uses.consumers[w as usize].iter())
            .filter(|&&c| c as usize != s)
            .count() as u64;
        if uses.producers[w as usize] == [s as u32] && readers > 0 {
            found.push(Candidate {
                tensor: w as usize,
                recompute_cost: graph.step_cost(s).saturating_mul(readers),
            });
        }
    }
    found.sort_by_key(|c| c.tensor);
    found
}

/// Compares the rationals `ra/ca` and `rb/cb` exactly (`ca`, `cb` > 0; the reliefs may be
/// negative): signs first, then a continued-fraction descent over the magnitudes, so neither a
/// float nor a product of a byte count and a cost (which could overflow) is ever formed.
pub fn compare_relief_ratio(ra: i128, ca: u64, rb: i128, cb: u64) -> Ordering {
    debug_assert!(ca > 0 && cb > 0);
    let (ca, cb) = (u128::from(ca.max(1)), u128::from(cb.max(1)));
    match (ra < 0, rb < 0) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => compare_fractions(ra.unsigned_abs(), ca, rb.unsigned_abs(), cb),
        // Both negative: ra/ca < rb/cb exactly when |rb|/cb < |ra|/ca.
        (true, true) => compare_fractions(rb.unsigned_abs(), cb, ra.unsigned_abs(), ca),
    }
}

/// `a/b` against `c/d`, all non-negative, `b`, `d` > 0: compare the integer parts; when they tie,
/// the remainders' fractions compare as their reciprocals, reversed (Euclid's steps: it ends).
fn compare_fractions(mut a: u128, mut b: u128, mut c: u128, mut d: u128) -> Ordering {
    let mut reversed = false;
    loop {
        let (qa, ra) = (a / b, a % b);
        let (qc, rc) = (c / d, c % d);
        let order = match (qa.cmp(&qc), ra == 0, rc == 0) {
            (Ordering::Equal, true, true) => Ordering::Equal,
            (Ordering::Equal, true, false) => Ordering::Less,
            (Ordering::Equal, false, true) => Ordering::Greater,
            (Ordering::Equal, false, false) => {
                (a, b, c, d) = (b, ra, d, rc);
                reversed = !reversed;
                continue;
            }
            (order, _, _) => order,
        };
        return if reversed { order.reverse() } else { order };
    }
}

/// What `fit` aims for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Fit the footprint under this many bytes, and stop as soon as it does.
    Bytes(u64),
    /// Take every flip that relieves footprint, whatever its cost.
    Minimize,
}

/// An accepted flip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flip {
    pub tensor: usize,
    /// The bytes it relieved on top of the flips before it (a held flip that committed with a
    /// group carries 0; the closing flip carries the group's relief). After flips are pruned
    /// (step 4), the marginal relief in acceptance order, which may be negative for a flip that
    /// pays only with those after it.
    pub relief_bytes: i128,
    pub recompute_cost: u64,
}

/// What happened to a candidate in round two, in order: the plan log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// It paid on top of the accepted set.
    Accepted { tensor: usize, relief_bytes: i128 },
    /// It added nothing on top of the accepted set: held, in case it is half of a pair.
    Held { tensor: usize },
    /// The held group beat `closing` alone: they commit together.
    GroupCommitted {
        tensors: Vec<usize>,
        closing: usize,
        relief_bytes: i128,
    },
    /// The held group made `against` worse: discarded for good.
    GroupDiscarded { tensors: Vec<usize>, against: usize },
    /// The held group tied with `against` alone: kept held.
    GroupKept { tensors: Vec<usize>, against: usize },
    /// Held to the end, never joined by a paying flip: discarded, nothing paid.
    UnpaidDiscarded { tensors: Vec<usize> },
    /// `tensor`, cheaper than `instead` (the flip or group that would have met the budget),
    /// meets it alone on top of the accepted flips: it closes the budget instead.
    ClosedCheaper {
        tensor: usize,
        instead: Vec<usize>,
        relief_bytes: i128,
    },
    /// The budget is met without `tensor`: pruned, its recompute saved.
    Pruned { tensor: usize, footprint_bytes: u64 },
    /// The budget is met: acceptance stops.
    TargetMet { footprint_bytes: u64 },
}

/// The answer of [`Rematerializer::fit`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FitResult {
    pub baseline_bytes: u64,
    pub final_bytes: u64,
    /// In acceptance order; their reliefs sum to `baseline_bytes - final_bytes`.
    pub flips: Vec<Flip>,
    /// Candidates scored on their own in round one.
    pub considered: usize,
    /// Candidates the `max_candidates` cut left unscored.
    pub dropped: usize,
    /// Round one: each candidate considered, scored alone against the baseline, in the order
    /// round two tries them (relief per unit of recompute cost, best first).
    pub solo: Vec<Flip>,
    pub within_target: bool,
    pub log: Vec<Event>,
}

impl FitResult {
    pub fn recompute_cost(&self) -> u64 {
        self.flips.iter().map(|f| f.recompute_cost).sum()
    }

    /// The flipped tensors, in acceptance order.
    pub fn tensors(&self) -> Vec<usize> {
        self.flips.iter().map(|f| f.tensor).collect()
    }
}

/// What a fit's flips say of their reliefs once a prune has dropped some: their marginal
/// reliefs in acceptance order, or (where no one reads them) the reliefs they were accepted
/// with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reliefs {
    Marginal,
    AsAccepted,
}

/// One budget of a sweep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub target_bytes: u64,
    pub footprint_bytes: u64,
    pub recompute_cost: u64,
    pub flips: Vec<usize>,
    /// The footprint is at most the target. A point that misses it is never Pareto-optimal.
    pub within_target: bool,
    /// Within its target, and no other point within its own has a footprint and a cost both at
    /// most this one's, one of them lower.
    pub pareto: bool,
    /// The least recompute cost of any subset of the candidates that fits the budget, when the
    /// exhaustive optimum was computed (`None` when no subset fits, or not computed).
    pub exhaustive_cost: Option<u64>,
}

/// Every subset of a few candidates, scored: the best possible trade-off, to judge the greedy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exhaustive {
    /// (footprint, recompute cost) of each subset, by bitmask over the candidates.
    pub subsets: Vec<(u64, u64)>,
}

impl Exhaustive {
    /// The least cost of a subset whose footprint is at most `budget`.
    pub fn best_cost(&self, budget: u64) -> Option<u64> {
        self.subsets
            .iter()
            .filter(|(f, _)| *f <= budget)
            .map(|(_, c)| *c)
            .min()
    }

    /// The least footprint any subset reaches.
    pub fn least_footprint(&self) -> u64 {
        self.subsets.iter().map(|(f, _)| *f).min().unwrap_or(0)
    }
}

/// The most candidates the exhaustive optimum enumerates (2^20 relayouts).
pub const EXHAUSTIVE_MAX_CANDIDATES: usize = 20;

/// Scores and chooses flips for one graph under one set of plan options. Scores are memoized by
/// the set of flipped tensors: the fits of a sweep share their solo scores and the prefixes of
/// their decisions, so each set is laid out once.
pub struct Rematerializer<'a> {
    pub graph: &'a Graph,
    pub resolved: &'a ResolvedGraph,
    pub options: &'a PlanOptions,
    pub candidates: Vec<Candidate>,
    scores: RefCell<Scores>,
    /// The live spans of the last set scored, moved from set to set ([`FlipSpans`]), made at
    /// the first score; `None` inside where the candidates' expansions could meet in a cycle,
    /// and each set is derived in full.
    spans: OnceCell<Option<Box<RefCell<FlipSpans>>>>,
}

/// The footprints of the sets of flipped tensors laid out so far, and the last relayout's
/// decodes (the next, a few flips away, resumes from them). A caller that runs a long job in
/// steps (a sweep in a worker) keeps them between steps with [`Rematerializer::with_scores`]
/// and [`Rematerializer::into_scores`], so no set is laid out twice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scores {
    footprints: HashMap<SetKey, u64>,
    /// Sets known to pass a footprint ([`Rematerializer::score_within`]): the highest passed.
    passes: HashMap<SetKey, u64>,
    earlier: Decodes,
    /// The spans the last rematerializer moved to its last set, handed on so the next (a
    /// sweep's next target) moves on from there.
    moving: Reused<Option<Box<RefCell<FlipSpans>>>>,
}

/// A set of flipped tensors as the scores know it: a bit per tensor, so a set is its key
/// whatever order its tensors come in and however often, without a sort (a fit asks for the
/// same sets again and again, as its accepted flips in acceptance order with one more).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SetKey(Vec<u64>);

impl SetKey {
    /// The set of `flipped`, tensors of a graph of `n`.
    fn of(flipped: &[usize], n: usize) -> SetKey {
        let mut words = vec![0u64; n.div_ceil(64)];
        for &t in flipped {
            words[t / 64] |= 1 << (t % 64);
        }
        SetKey(words)
    }

    /// Its tensors, in order.
    fn tensors(&self) -> Vec<usize> {
        let mut tensors = Vec::new();
        for (w, &word) in self.0.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                tensors.push(64 * w + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
        tensors
    }
}

/// A sweep in progress ([`Rematerializer::start_sweep`]): one budget per step, so a caller can
/// report progress and stop between targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepRun {
    lo: u64,
    hi: u64,
    points: usize,
    done: Vec<SweepPoint>,
}

impl SweepRun {
    /// The targets fitted so far, and how many there are in all.
    pub fn progress(&self) -> (usize, usize) {
        (self.done.len(), self.points)
    }

    /// The points with the Pareto frontier marked (over those fitted, if stopped early): only
    /// points within their targets count, so a missed target is never on the frontier.
    pub fn finish(self) -> Vec<SweepPoint> {
        let mut out = self.done;
        for k in 0..out.len() {
            let (f, c) = (out[k].footprint_bytes, out[k].recompute_cost);
            out[k].pareto = out[k].within_target
                && !out.iter().any(|o| {
                    o.within_target
                        && o.footprint_bytes <= f
                        && o.recompute_cost <= c
                        && (o.footprint_bytes < f || o.recompute_cost < c)
                });
        }
        out
    }
}

impl<'a> Rematerializer<'a> {
    pub fn new(
        graph: &'a Graph,
        resolved: &'a ResolvedGraph,
        options: &'a PlanOptions,
        candidates: Vec<Candidate>,
    ) -> Self {
        Self::with_scores(graph, resolved, options, candidates, Scores::default())
    }

    /// [`Rematerializer::new`], knowing the `scores` of an earlier one of the same graph,
    /// options and candidates.
    pub fn with_scores(
        graph: &'a Graph,
        resolved: &'a ResolvedGraph,
        options: &'a PlanOptions,
        candidates: Vec<Candidate>,
        mut scores: Scores,
    ) -> Self {
        let spans = OnceCell::new();
        if let Some(moving) = scores.moving.0.take() {
            let _ = spans.set(moving);
        }
        Rematerializer {
            graph,
            resolved,
            options,
            candidates,
            scores: RefCell::new(scores),
            spans,
        }
    }

    /// What it laid out, to hand to the next [`Rematerializer::with_scores`].
    pub fn into_scores(self) -> Scores {
        Scores {
            moving: Reused(self.spans.into_inner()),
            ..self.scores.into_inner()
        }
    }

    /// The footprint with the tensors of `flipped` recomputed at their uses: a real relayout.
    /// A score is compared, not shown, so release builds do not check it (the checker cost what
    /// the relayout did, hundreds of times a fit); debug builds, every test's, check each. The
    /// footprints a fit answers with, the baseline's and the last, are checked in every build
    /// ([`Self::checked_score`]).
    pub fn score(&self, flipped: &[usize]) -> Result<u64, PlanError> {
        self.relayout(flipped, cfg!(debug_assertions))
    }

    /// [`Self::score`], laid out again if need be and checked: a plan that fails the checker is
    /// a bug and an error here.
    pub fn checked_score(&self, flipped: &[usize]) -> Result<u64, PlanError> {
        self.relayout(flipped, true)
    }

    /// [`Self::score`] when it is at most `most`, else `None`: what a fit asks when only
    /// whether a set meets its target matters (pruning, a cheaper flip to close with). A set
    /// that passes `most` is found sooner, its layout given up as soon as it passes (see
    /// `layout::lay_out_within`); one within it is scored exactly, as `score` would.
    /// Debug builds, every test's, check it against [`Self::checked_score`].
    pub fn score_within(&self, flipped: &[usize], most: u64) -> Result<Option<u64>, PlanError> {
        let key = SetKey::of(flipped, self.resolved.tensors.len());
        let known = self.scores.borrow().footprints.get(&key).copied();
        let within = match known {
            Some(footprint) => Some(footprint).filter(|&f| f <= most),
            None if (self.scores.borrow().passes.get(&key)).is_some_and(|&p| p >= most) => None,
            None => {
                let tensors = key.tensors();
                // Past the floor, no layout is within `most`: none is made.
                let plan = match self.floor_passes(&tensors, most) {
                    true => None,
                    false => self.lay_out_set(&tensors, false, |p, c| {
                        lay_out_within(p, self.options, c, most)
                    })?,
                };
                let mut scores = self.scores.borrow_mut();
                match plan {
                    Some(plan) => {
                        let footprint = plan.footprint_bytes();
                        scores.footprints.insert(key, footprint);
                        Some(footprint)
                    }
                    None => {
                        let passed = scores.passes.entry(key).or_insert(most);
                        *passed = (*passed).max(most);
                        None
                    }
                }
            }
        };
        if cfg!(debug_assertions) {
            let exact = self.checked_score(flipped)?;
            debug_assert_eq!(within, Some(exact).filter(|&f| f <= most), "{flipped:?}");
        }
        Ok(within)
    }

    /// Whether every layout of the tensors of `key` flipped passes `most`: the always-live bytes
    /// and some device's arena floor already do (kept by [`FlipSpans`], or [`floor_of_spans`]).
    /// Most sets a prune tests fail so, and this answers without building their problems.
    fn floor_passes(&self, key: &[usize], most: u64) -> bool {
        let by_dtype = self.options.precision_classes;
        let (floors, always_live) = match self.moved_to(key) {
            Some(moving) => {
                debug_assert_eq!(
                    moving.floors(),
                    floor_of_spans(self.resolved, moving.flags(), moving.spans(), by_dtype)
                );
                moving.floors()
            }
            None => {
                let (flags, spans) = self.derived(key);
                floor_of_spans(self.resolved, &flags, &spans, by_dtype)
            }
        };
        match most.checked_sub(always_live) {
            None => true,
            Some(arena_most) => floors.iter().any(|&f| f > arena_most),
        }
    }

    /// The spans moved to the set of the sorted tensors of `key`, where they can be.
    fn moved_to(&self, key: &[usize]) -> Option<RefMut<'_, FlipSpans>> {
        let moving = self.spans.get_or_init(|| {
            let candidates: Vec<usize> = self.candidates.iter().map(|c| c.tensor).collect();
            FlipSpans::new(self.resolved, &candidates, self.options.precision_classes)
                .map(|spans| Box::new(RefCell::new(spans)))
        });
        let mut moving = moving.as_ref()?.borrow_mut();
        if !moving.set(key) {
            return None;
        }
        // Debug builds, every test's, hold the moved spans to the set's own derivation.
        debug_assert_eq!(
            moving.spans(),
            &spans_flipped(self.resolved, moving.flags())[..]
        );
        Some(moving)
    }

    /// The flags of the sorted tensors of `key`, derived in full, and their spans.
    fn derived(&self, key: &[usize]) -> (Vec<bool>, Vec<Option<LiveInterval>>) {
        let mut flags = vec![false; self.resolved.tensors.len()];
        for &t in key {
            flags[t] = true;
        }
        let spans = spans_flipped(self.resolved, &flags);
        (flags, spans)
    }

    /// `lay` on the problem with the tensors of `key` flipped, lent the last relayout's
    /// decodes. Its buffers are named only when it is to be `checked` (the checker's findings
    /// name them; a layout never reads a name).
    fn lay_out_set<T>(
        &self,
        key: &[usize],
        checked: bool,
        lay: impl FnOnce(&crate::problem::Problem, &mut Control<'_>) -> Result<T, PlanError>,
    ) -> Result<T, PlanError> {
        let problem: Problem = match self.moved_to(key) {
            Some(moving) => problem_of_spans(
                self.graph,
                self.resolved,
                moving.flags(),
                moving.spans(),
                checked,
            ),
            None => {
                let (flags, spans) = self.derived(key);
                problem_of_spans(self.graph, self.resolved, &flags, &spans, checked)
            }
        };
        let mut scores = self.scores.borrow_mut();
        let mut control = Control {
            earlier: Some(&mut scores.earlier),
            ..Control::default()
        };
        lay(&problem, &mut control)
    }

    fn relayout(&self, flipped: &[usize], checked: bool) -> Result<u64, PlanError> {
        let key = SetKey::of(flipped, self.resolved.tensors.len());
        if let Some(&known) = self.scores.borrow().footprints.get(&key)
            && !checked
        {
            return Ok(known);
        }
        let footprint = self.lay_out_set(&key.tensors(), checked, |p, c| {
            if !checked {
                return Ok(lay_out(p, self.options, c)?.footprint_bytes());
            }
            let plan = plan_with(p, self.options, c)?;
            match plan.is_valid() {
                true => Ok(plan.footprint_bytes()),
                false => Err(PlanError::Unchecked(
                    (plan.violations.iter())
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; "),
                )),
            }
        })?;
        self.scores.borrow_mut().footprints.insert(key, footprint);
        Ok(footprint)
    }

    fn cost_of(&self, tensor: usize) -> u64 {
        self.candidates
            .iter()
            .find(|c| c.tensor == tensor)
            .map_or(0, |c| c.recompute_cost)
    }

    /// The cheapest candidate of `rest` (the ones round two has not reached) that costs less
    /// than `cost` and alone on top of `accepted` meets the `target`, with the footprint then.
    fn cheaper_closer(
        &self,
        rest: &[(Candidate, i128)],
        cost: u64,
        accepted: &[usize],
        target: u64,
    ) -> Result<Option<(Candidate, u64)>, PlanError> {
        let mut cheaper: Vec<Candidate> = rest
            .iter()
            .map(|&(c, _)| c)
            .filter(|c| c.recompute_cost < cost)
            .collect();
        cheapest_first(&mut cheaper);
        for c in cheaper {
            let set: Vec<usize> = accepted.iter().copied().chain([c.tensor]).collect();
            if let Some(footprint) = self.score_within(&set, target)? {
                return Ok(Some((c, footprint)));
            }
        }
        Ok(None)
    }

    /// Prunes the accepted flips the met budget no longer needs, the most expensive first (the
    /// later accepted first among equals): each is pruned when the others alone still meet
    /// it, until none can be. The reliefs of the flips left are then their marginal reliefs in
    /// acceptance order (a relayout each), or left as accepted (`Reliefs::AsAccepted`).
    /// Returns the footprint after.
    fn prune(
        &self,
        result: &mut FitResult,
        (baseline, mut current): (u64, u64),
        target: u64,
        reliefs: Reliefs,
    ) -> Result<u64, PlanError> {
        let mut order: Vec<usize> = (0..result.flips.len()).collect();
        order.sort_by_key(|&k| {
            (
                std::cmp::Reverse(result.flips[k].recompute_cost),
                std::cmp::Reverse(k),
            )
        });
        let mut kept = vec![true; result.flips.len()];
        // Until no flip can go: relief is not monotone, so pruning one can free another.
        let mut pruned = true;
        while pruned {
            pruned = false;
            for &k in &order {
                if !kept[k] {
                    continue;
                }
                kept[k] = false;
                let rest: Vec<usize> = (0..kept.len())
                    .filter(|&j| kept[j])
                    .map(|j| result.flips[j].tensor)
                    .collect();
                if let Some(footprint) = self.score_within(&rest, target)? {
                    result.log.push(Event::Pruned {
                        tensor: result.flips[k].tensor,
                        footprint_bytes: footprint,
                    });
                    current = footprint;
                    pruned = true;
                } else {
                    kept[k] = true;
                }
            }
        }
        if kept.iter().all(|&k| k) {
            return Ok(current);
        }
        let mut kept = kept.into_iter();
        result.flips.retain(|_| kept.next() == Some(true));
        if reliefs == Reliefs::AsAccepted {
            return Ok(current);
        }
        let mut before = baseline;
        for k in 0..result.flips.len() {
            let tensors: Vec<usize> = result.flips[..=k].iter().map(|f| f.tensor).collect();
            let after = self.score(&tensors)?;
            result.flips[k].relief_bytes = i128::from(before) - i128::from(after);
            before = after;
        }
        Ok(current)
    }

    /// The two-round greedy of the module docs. `max_candidates`: `None` considers every
    /// candidate.
    pub fn fit(
        &self,
        target: Target,
        max_candidates: Option<usize>,
    ) -> Result<FitResult, PlanError> {
        self.fit_with(target, max_candidates, Reliefs::Marginal)
    }

    /// [`Self::fit`], its flips' reliefs after a prune as `reliefs` says.
    fn fit_with(
        &self,
        target: Target,
        max_candidates: Option<usize>,
        reliefs: Reliefs,
    ) -> Result<FitResult, PlanError> {
        let baseline = self.checked_score(&[])?;
        // The footprint to meet; minimizing meets none.
        let bound = match target {
            Target::Bytes(b) => Some(b),
            Target::Minimize => None,
        };
        let met = |footprint: u64| bound.is_some_and(|b| footprint <= b);
        let mut result = FitResult {
            baseline_bytes: baseline,
            final_bytes: baseline,
            flips: Vec::new(),
            considered: 0,
            dropped: 0,
            solo: Vec::new(),
            within_target: true,
            log: Vec::new(),
        };
        if met(baseline) {
            result.log.push(Event::TargetMet {
                footprint_bytes: baseline,
            });
            return Ok(result);
        }
        // The cut, when asked for: the cheapest to recompute. By default every candidate, so
        // "no more flips help" is never said of candidates left untried.
        let limit = max_candidates.unwrap_or(usize::MAX);
        let mut pool = self.candidates.clone();
        cheapest_first(&mut pool);
        result.dropped = pool.len().saturating_sub(limit);
        pool.truncate(limit);
        result.considered = pool.len();

        // Round one: solo relief, ranked by relief per unit of cost.
        let mut ranked: Vec<(Candidate, i128)> = pool
            .iter()
            .map(|&c| {
                Ok((
                    c,
                    i128::from(baseline) - i128::from(self.score(&[c.tensor])?),
                ))
            })
            .collect::<Result<_, PlanError>>()?;
        ranked.sort_by(|(a, ra), (b, rb)| {
            compare_relief_ratio(*rb, b.recompute_cost.max(1), *ra, a.recompute_cost.max(1))
                .then(a.recompute_cost.cmp(&b.recompute_cost))
                .then(a.tensor.cmp(&b.tensor))
        });
        result.solo = ranked
            .iter()
            .map(|&(c, relief)| Flip {
                tensor: c.tensor,
                relief_bytes: relief,
                recompute_cost: c.recompute_cost,
            })
            .collect();

        // Round two: acceptance with speculative held groups.
        let mut accepted: Vec<usize> = Vec::new();
        let mut held: Vec<usize> = Vec::new();
        let mut current = baseline;
        for (i, (c, _)) in ranked.iter().enumerate() {
            if met(current) {
                result.log.push(Event::TargetMet {
                    footprint_bytes: current,
                });
                break;
            }
            let on_accepted =
                |extra: &[usize]| -> Vec<usize> { accepted.iter().chain(extra).copied().collect() };
            let alone = self.score(&on_accepted(&[c.tensor]))?;
            let alone_relief = i128::from(current) - i128::from(alone);
            // What this step would commit: the flips, the footprint after them, their relief.
            let mut step = (alone_relief > 0).then(|| (vec![c.tensor], alone, alone_relief));
            if !held.is_empty() {
                let group = [&held[..], &[c.tensor]].concat();
                let grouped = self.score(&on_accepted(&group))?;
                let group_relief = i128::from(current) - i128::from(grouped);
                match group_relief.cmp(&alone_relief) {
                    // Load-bearing: the held flips commit with this one.
                    Ordering::Greater if group_relief > 0 => {
                        held.clear();
                        step = Some((group, grouped, group_relief));
                    }
                    // Harmful: discarded for good; the candidate stands alone.
                    Ordering::Less => result.log.push(Event::GroupDiscarded {
                        tensors: std::mem::take(&mut held),
                        against: c.tensor,
                    }),
                    // Neutral (or neither pays): the group stays held.
                    _ => result.log.push(Event::GroupKept {
                        tensors: held.clone(),
                        against: c.tensor,
                    }),
                }
            }
            let Some((commit, footprint, relief)) = step else {
                held.push(c.tensor);
                result.log.push(Event::Held { tensor: c.tensor });
                continue;
            };
            let cost = |ts: &[usize]| {
                ts.iter()
                    .map(|&t| self.cost_of(t))
                    .fold(0, u64::saturating_add)
            };
            if let Some(bound) = bound
                && footprint <= bound
            {
                let closer =
                    self.cheaper_closer(&ranked[i + 1..], cost(&commit), &accepted, bound)?;
                if let Some((alt, closed)) = closer {
                    let relief_bytes = i128::from(current) - i128::from(closed);
                    accepted.push(alt.tensor);
                    result.flips.push(Flip {
                        tensor: alt.tensor,
                        relief_bytes,
                        recompute_cost: alt.recompute_cost,
                    });
                    result.log.push(Event::ClosedCheaper {
                        tensor: alt.tensor,
                        instead: commit,
                        relief_bytes,
                    });
                    current = closed;
                    break;
                }
            }
            let (&closing, group) = commit.split_last().expect("a step commits a flip");
            for &h in group {
                result.flips.push(Flip {
                    tensor: h,
                    relief_bytes: 0,
                    recompute_cost: self.cost_of(h),
                });
            }
            result.flips.push(Flip {
                tensor: closing,
                relief_bytes: relief,
                recompute_cost: c.recompute_cost,
            });
            result.log.push(if group.is_empty() {
                Event::Accepted {
                    tensor: closing,
                    relief_bytes: relief,
                }
            } else {
                Event::GroupCommitted {
                    tensors: group.to_vec(),
                    closing,
                    relief_bytes: relief,
                }
            });
            accepted.extend(&commit);
            current = footprint;
        }
        if met(current) && !matches!(result.log.last(), Some(Event::TargetMet { .. })) {
            result.log.push(Event::TargetMet {
                footprint_bytes: current,
            });
        }
        if !held.is_empty() {
            result.log.push(Event::UnpaidDiscarded { tensors: held });
        }
        if let Some(bound) = bound
            && current <= bound
            && result.flips.len() > 1
        {
            current = self.prune(&mut result, (baseline, current), bound, reliefs)?;
        }
        // The layout answered with, checked: the same as scored (a plan is deterministic).
        let checked = self.checked_score(&result.tensors())?;
        debug_assert_eq!(checked, current);
        result.final_bytes = checked;
        result.within_target = bound.is_none_or(|b| current <= b);
        Ok(result)
    }

    /// Every subset of the candidates scored, when there are at most `most` of them.
    pub fn exhaustive(&self, most: usize) -> Result<Option<Exhaustive>, PlanError> {
        let n = self.candidates.len();
        if n > most.min(EXHAUSTIVE_MAX_CANDIDATES) {
            return Ok(None);
        }
        let mut subsets = Vec::with_capacity(1 << n);
        for mask in 0u32..(1 << n) {
            let chosen: Vec<&Candidate> = self
                .candidates
                .iter()
                .enumerate()
                .filter(|(k, _)| mask & (1 << k) != 0)
                .map(|(_, c)| c)
                .collect();
            let tensors: Vec<usize> = chosen.iter().map(|c| c.tensor).collect();
            let cost = chosen.iter().map(|c| c.recompute_cost).sum();
            subsets.push((self.score(&tensors)?, cost));
        }
        Ok(Some(Exhaustive { subsets }))
    }

    /// `fit` at `points` targets from the minimize result up to the baseline (evenly spaced),
    /// with the Pareto frontier marked and, when given, the exhaustive optimum at each budget.
    pub fn sweep(
        &self,
        points: usize,
        exhaustive: Option<&Exhaustive>,
    ) -> Result<Vec<SweepPoint>, PlanError> {
        let mut run = self.start_sweep(points)?;
        while self.sweep_step(&mut run, exhaustive)? {}
        Ok(run.finish())
    }

    /// The first step of [`Rematerializer::sweep`]: the minimize fit that sets the targets.
    pub fn start_sweep(&self, points: usize) -> Result<SweepRun, PlanError> {
        let least = self.fit(Target::Minimize, None)?;
        Ok(SweepRun {
            lo: least.final_bytes,
            hi: least.baseline_bytes,
            points: points.max(2),
            done: Vec::new(),
        })
    }

    /// Fits the next budget of `run`; `false` once all are done.
    pub fn sweep_step(
        &self,
        run: &mut SweepRun,
        exhaustive: Option<&Exhaustive>,
    ) -> Result<bool, PlanError> {
        let k = run.done.len();
        if k == run.points {
            return Ok(false);
        }
        let span = u128::from(run.hi - run.lo);
        let budget = run.lo + (span * k as u128 / (run.points as u128 - 1)) as u64;
        // Every candidate: the minimize fit that set the targets scored each alone already, so
        // a point's fit pays only for its own acceptance, and never misses a target for want of
        // a candidate it was not shown. A point shows its flips, not their reliefs: none is
        // made marginal again after a prune.
        let r = self.fit_with(Target::Bytes(budget), None, Reliefs::AsAccepted)?;
        run.done.push(SweepPoint {
            target_bytes: budget,
            footprint_bytes: r.final_bytes,
            recompute_cost: r.recompute_cost(),
            flips: r.tensors(),
            within_target: r.within_target,
            pareto: false,
            exhaustive_cost: exhaustive.and_then(|e| e.best_cost(budget)),
        });
        Ok(run.done.len() < run.points)
    }
}

#[cfg(test)]
mod tests;
