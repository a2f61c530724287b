//! What the page draws, from the engine. Pure: no DOM, so it runs (and is tested) natively, in
//! the page and in the worker alike.
//!
//! A [`Local`] is the session the worker holds with its current outcome; it sends the page only
//! an [`Analysis`]: the summary figures and the view model, what the page draws. Exports that
//! need more (the whole report, the CSV) are derived on demand in the worker ([`export`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use memplan_core::spaces::SpaceCounts;
use memplan_core::{Strategy, StrategyChoice};
use memplan_engine::answers::{FitAnswer, SweepAnswer};
use memplan_engine::query::{Ask, FitQuery, SpacesQuery};
use memplan_engine::{CandidateRow, EngineError, Outcome, Scenario, Session};
use memplan_formats::report::PlanSummary;
use memplan_human::SpaceRow;
use memplan_render::model::TensorIdentity;
use memplan_render::{BufferPlace, BufferRows, BufferView, Labels, PlannedBuffers, ViewModel};
use serde::{Deserialize, Serialize};

use crate::error::{AnswerMismatch, WebError};

/// A session the worker holds, and its current outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Local {
    pub session: Session,
    pub outcome: Outcome,
}

/// What re-planning one session can reuse: the plan without flips, by the scenario it was made
/// under (toggling flips leaves it as it is, so each toggle plans once, not twice); by the
/// params, the memory spaces; and by the [`Schedule`], the view model's [`Labels`] (flips and
/// strategies change lifetimes and places, not where a slot lives nor what a tensor is
/// called). Keep one per session.
#[derive(Debug, Clone, Default)]
pub struct AnalysisCache {
    baseline: Keyed<Scenario, Option<Baseline>>,
    spaces: Keyed<BTreeMap<String, u64>, Option<Arc<SpacesView>>>,
    labels: Keyed<Schedule, Arc<Labels>>,
}

/// What the schedule's labels depend on: the params, and the order the steps run in (the given
/// step indices, reordered; `None`: the given order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub params: BTreeMap<String, u64>,
    pub steps: Option<Vec<usize>>,
}

impl Schedule {
    pub fn of(outcome: &Outcome) -> Schedule {
        Schedule {
            params: outcome.scenario.params.clone(),
            steps: (outcome.bound.as_ref())
                .and_then(|b| b.reordering.as_ref())
                .map(|r| r.steps.clone()),
        }
    }
}

/// A value kept with the key it was computed for.
type Keyed<K, V> = Option<(K, V)>;

/// The value `slot` keeps for `key`, computed by `make` when it keeps another key's.
fn keyed<K: PartialEq + Clone, V: Clone>(
    slot: &mut Keyed<K, V>,
    key: &K,
    make: impl FnOnce() -> V,
) -> V {
    match slot {
        Some((known, value)) if known == key => value.clone(),
        _ => {
            let value = make();
            *slot = Some((key.clone(), value.clone()));
            value
        }
    }
}

impl AnalysisCache {
    /// Keeps `outcome`, when it has no flips, as the baseline of its scenario: the first
    /// toggle after it then plans once too.
    fn remember(&mut self, outcome: &Outcome) {
        let scenario = &outcome.scenario;
        if scenario.flips.is_empty() && scenario.strategy != Strategy::Search.into() {
            self.baseline = Some((unflipped(scenario), Some(Baseline::of(outcome))));
        }
    }

    /// The plan of `outcome` as the views show it, with the labels of its params: the model
    /// but for its buffers, and the buffers, to be made or written where they are needed.
    fn view_model(&mut self, session: &Session, outcome: &Outcome) -> (ViewModel, PlannedBuffers) {
        let labels = keyed(&mut self.labels, &Schedule::of(outcome), || {
            Arc::new(session.labels(outcome))
        });
        let planned = session.planned_buffers(outcome, labels);
        (ViewModel::labelled_apart(&planned), planned)
    }

    fn baseline(&mut self, session: &Session, scenario: &Scenario) -> Option<Baseline> {
        if scenario.flips.is_empty() || scenario.strategy == Strategy::Search.into() {
            return None;
        }
        let key = unflipped(scenario);
        keyed(&mut self.baseline, &key, || baseline(session, &key))
    }

    fn spaces(&mut self, session: &Session, scenario: &Scenario) -> Option<Arc<SpacesView>> {
        keyed(&mut self.spaces, &scenario.params, || {
            let query = SpacesQuery {
                scenario: scenario.clone(),
                most: Some(MOST_SPACE_ROWS),
            };
            let s = (query.ask(session, &mut memplan_core::Control::default())).ok()?;
            Some(Arc::new(SpacesView {
                rows: memplan_human::space_rows(&s),
                unlisted: s.unlisted,
                counts: s.counts,
                diagnostics: s.diagnostics,
            }))
        })
    }
}

/// What the page shows of a planned session: serializable, so the worker can hand it over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub source: String,
    /// The format's name.
    pub format: String,
    pub tensor_count: usize,
    pub step_count: usize,
    pub scenario: Scenario,
    pub summary: PlanSummary,
    pub model: ViewModel,
    /// What the import could not carry over exactly.
    pub warnings: Vec<String>,
    /// The tensors that may be recomputed at their uses, and which are.
    pub candidates: Vec<CandidateRow>,
    /// The plan without the scenario's flips, when it has some (not for `search`, whose
    /// second run would double the wait).
    pub baseline: Option<Baseline>,
    /// When the steps run in another order than the dump's: the given order's usage and the
    /// positions whose step moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reordered: Option<Reordered>,
    /// Where each slot lives (`memplan spaces`); `None` when the scenario's params do not bind.
    pub spaces: Option<Arc<SpacesView>>,
    /// The dump's params with the values planned: its defaults, overridden by the scenario's.
    pub params: BTreeMap<String, u64>,
    /// The unit of recompute costs (the dump's `cost_unit`), if it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_unit: Option<String>,
    /// The dump's inputs with their dims as written (a number, or a symbolic dim's name): what
    /// an ONNX model's input-shape field lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<(String, Vec<String>)>,
}

/// The memory spaces as the page shows them: the table of `memplan spaces`, its counts and
/// its diagnostics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpacesView {
    /// The rows the table lists ([`memplan_engine::answers::listed`]), in the engine's order.
    pub rows: Vec<SpaceRow>,
    /// How many slots are not listed.
    pub unlisted: usize,
    pub counts: SpaceCounts,
    pub diagnostics: Vec<String>,
}

/// The most slots the spaces table lists besides those that hold an output.
pub const MOST_SPACE_ROWS: usize = 200;

/// What the views show of a reordered schedule besides its plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reordered {
    /// The given order's usage curve per device (without flips), to draw as a ghost.
    pub given_curves: Vec<Vec<u64>>,
    /// The positions of the reordered schedule that hold a step that moved.
    pub moved_positions: Vec<u32>,
}

impl Reordered {
    fn of(outcome: &Outcome) -> Option<Reordered> {
        let bound = outcome.bound.as_ref()?;
        let r = bound.reordering.as_ref()?;
        let moved_positions = (bound.resolved.positions.iter().enumerate())
            .filter(|(_, p)| r.moved[p.steps()].iter().any(|&m| m))
            .map(|(at, _)| at as u32)
            .collect();
        Some(Reordered {
            given_curves: r.given_usage.clone(),
            moved_positions,
        })
    }
}

/// The plan without flips, to measure flips against: its footprint and each device's usage
/// curve (the flips change lifetimes, not the schedule, so the positions are the same).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub footprint_bytes: u64,
    pub curves: Vec<Vec<u64>>,
}

impl Analysis {
    pub fn of(session: &Session, outcome: &Outcome) -> Analysis {
        Analysis::of_cached(session, outcome, &mut AnalysisCache::default())
    }

    /// [`Analysis::of`], with the plan without flips and the spaces from `cache` when it has
    /// them.
    pub fn of_cached(session: &Session, outcome: &Outcome, cache: &mut AnalysisCache) -> Analysis {
        let (mut analysis, planned) = Analysis::of_cached_with(session, outcome, cache, true);
        analysis.model.buffers = planned.made();
        analysis
    }

    /// [`Analysis::of_cached`], but for its buffers (the model's are empty: the worker writes
    /// them to its answer from the [`PlannedBuffers`], never made), and without what depends on
    /// the params alone when `params_parts` is false ([`Analysis::without_params_parts`]): the
    /// spaces and the candidates are then not even looked up.
    pub fn of_cached_with(
        session: &Session,
        outcome: &Outcome,
        cache: &mut AnalysisCache,
        params_parts: bool,
    ) -> (Analysis, PlannedBuffers) {
        // What is made and dropped on the way (the spaces' classification, a baseline's plan)
        // before the view model, the largest part, so the two are not held at once (natively,
        // a 294k-allocation snapshot's peak a sixteenth lower).
        let spaces = params_parts
            .then(|| cache.spaces(session, &outcome.scenario))
            .flatten();
        let baseline = cache.baseline(session, &outcome.scenario);
        let summary = session.summary(outcome);
        let (model, planned) = cache.view_model(session, outcome);
        cache.remember(outcome);
        let analysis = Analysis {
            source: session.source.clone(),
            format: session.format.name().to_string(),
            tensor_count: session.graph.tensors.len(),
            step_count: session.graph.step_count(),
            scenario: outcome.scenario.clone(),
            summary,
            model,
            warnings: session.warnings_for(&outcome.scenario),
            candidates: if params_parts {
                session.candidate_rows(outcome)
            } else {
                Vec::new()
            },
            baseline,
            reordered: Reordered::of(outcome),
            params: session
                .graph
                .params
                .iter()
                .chain(&outcome.scenario.params)
                .map(|(k, &v)| (k.clone(), v))
                .collect(),
            spaces,
            cost_unit: session.graph.cost_unit.clone(),
            inputs: (session.graph.tensors.iter())
                .filter(|t| t.kind == memplan_core::graph::TensorKind::Input)
                .filter_map(|t| {
                    let dims = t.declared.shape.as_ref()?.iter().map(|d| match d {
                        memplan_core::graph::Dim::Fixed(k) => k.to_string(),
                        memplan_core::graph::Dim::Param(p) => p.clone(),
                    });
                    Some((t.id.to_string(), dims.collect()))
                })
                .collect(),
        };
        let analysis = match params_parts {
            true => analysis,
            false => analysis.without_params_parts(),
        };
        (analysis, planned)
    }

    pub fn strategy(&self) -> StrategyChoice {
        self.scenario.strategy
    }

    /// Leaves out what depends on the params alone (the spaces; the schedule's steps and loops,
    /// which name its positions; the stacks and the allocator's record; the candidates, but for
    /// which of them the scenario flips): a re-plan under the params of the last analysis sent
    /// need not send them.
    fn without_params_parts(mut self) -> Analysis {
        self.spaces = None;
        self.candidates = Vec::new();
        let m = &mut self.model;
        (m.steps, m.loops) = Default::default();
        (m.stacks, m.allocator) = Default::default();
        self
    }

    /// The whole analysis a worker's answer stands for: `self` as sent, with what it left out
    /// taken from `earlier`, the analysis of the last answer (the page's).
    pub fn received(
        mut self,
        left_out: LeftOut,
        buffers: BuffersSent,
        earlier: Option<&Analysis>,
    ) -> Result<Analysis, AnswerMismatch> {
        let held = || earlier.ok_or(AnswerMismatch::NoEarlier);
        if left_out.params_parts {
            self = self.with_params_parts_of(held()?);
        }
        if left_out.baseline {
            let baseline = held()?.baseline.clone();
            self.baseline = Some(baseline.ok_or(AnswerMismatch::NoBaseline)?);
        }
        self.model.buffers = buffers.apply(earlier.map_or(&[][..], |e| &e.model.buffers))?;
        Ok(self)
    }

    /// Puts back the parts [`Analysis::without_params_parts`] left out, from `earlier`, an
    /// analysis under the same params.
    fn with_params_parts_of(mut self, earlier: &Analysis) -> Analysis {
        self.spaces = earlier.spaces.clone();
        self.candidates = (earlier.candidates.iter())
            .map(|c| CandidateRow {
                flipped: CandidateRow::is_flipped(&c.tensor, &self.scenario),
                ..c.clone()
            })
            .collect();
        let (m, e) = (&mut self.model, &earlier.model);
        m.steps = e.steps.clone();
        m.loops = e.loops.clone();
        m.stacks = e.stacks.clone();
        m.allocator = e.allocator.clone();
        self
    }
}

/// What a worker's answer leaves out because the page holds it from the answer before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The params are those of the last plan sent: what depends on them alone (the spaces, the
    /// schedule's steps and loops, the stacks and the allocator's record, the
    /// candidates).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub params_parts: bool,
    /// The plan without flips is that of the last plan sent (a toggle's answer, but the first).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub baseline: bool,
}

impl LeftOut {
    pub fn is_nothing(&self) -> bool {
        *self == LeftOut::default()
    }
}

/// Where and when a buffer lives (pool, offset, and its live interval's first and last
/// position): what a flip or another strategy changes of it. Not the core's `Placement`, which
/// is the pool and offset alone. (Its address follows from its pool's base, which the answer
/// carries.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedSpan(usize, u64, u32, u32);

impl PlacedSpan {
    fn of(b: &BufferPlace) -> PlacedSpan {
        PlacedSpan(b.pool, b.offset, b.first, b.last)
    }

    /// Whether `b` is `earlier` but for where and when it lives (their tensors compared
    /// apart). The pattern names every field, so a field added to [`BufferPlace`] must be
    /// placed on one side or the other.
    fn only_change(earlier: &BufferPlace, b: &BufferPlace) -> bool {
        let BufferPlace {
            dtype,
            size,
            alignment_log2,
            device,
            pool: _,
            offset: _,
            first: _,
            last: _,
            always_live,
        } = b;
        (dtype, size, alignment_log2, device, always_live)
            == (
                &earlier.dtype,
                &earlier.size,
                &earlier.alignment_log2,
                &earlier.device,
                &earlier.always_live,
            )
    }

    fn put(self, b: &mut BufferView) {
        PlacedSpan(b.pool, b.offset, b.first, b.last) = self;
    }
}

/// A model's buffers sent against those of the last plan sent, which the page holds: a buffer
/// equal to one of those but for its [`PlacedSpan`] is taken from there, in runs of consecutive
/// indices, with its new placement when that changed; the others go whole. Flips and strategies
/// keep the canonical order, so a toggle's answer on a 2,000-tensor dump is a few runs and the
/// placements that moved (a quarter to two fifths of them): about 33 KB, where the buffers
/// whole are 520 KB.
///
/// The earlier buffer of a tensor is found by its tensor's identity
/// ([`memplan_render::TensorRef::identity`]): plans under the same params share their
/// [`Labels`], and no id is read, let alone hashed (the identity and device are looked up in a
/// sorted list). A buffer of other labels (new params) finds none and goes whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuffersSent {
    /// How many buffers the plan sent before had: the page checks it holds that plan.
    pub earlier_count: usize,
    /// The buffers, in order. None: the buffers are `whole`, all of them, whatever the page
    /// holds ([`BuffersSent::all`]).
    pub runs: Vec<Run>,
    /// The buffers taken from the earlier plan that moved: (index, where and when it lives now).
    pub moved: Vec<(u32, PlacedSpan)>,
    pub whole: Whole,
}

/// The buffers a [`BuffersSent`] sends whole: made, as the page reads them, or a plan's, written
/// to the answer from where they are, never made (a plan sent with no earlier one to send it
/// against: a snapshot's first plan, whose buffers made would be 40 bytes each in the
/// worker's memory, at millions of buffers its largest part but the dump itself).
#[derive(Clone)]
pub enum Whole {
    Made(Arc<[BufferView]>),
    Planned(Arc<dyn BufferRows>),
}

impl Whole {
    /// How many buffers it holds.
    pub fn count(&self) -> usize {
        self.rows().count()
    }

    fn rows(&self) -> &dyn BufferRows {
        match self {
            Whole::Made(buffers) => buffers,
            Whole::Planned(rows) => &**rows,
        }
    }

    /// The buffers, made.
    fn made(self) -> Arc<[BufferView]> {
        match self {
            Whole::Made(buffers) => buffers,
            Whole::Planned(rows) => rows.made(),
        }
    }
}

impl Serialize for Whole {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        memplan_render::model::columns::write(self.rows(), serializer)
    }
}

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        memplan_render::model::columns::deserialize(deserializer).map(Whole::Made)
    }
}

/// Equal when they hold the same buffers, made or not.
impl PartialEq for Whole {
    fn eq(&self, other: &Whole) -> bool {
        let (a, b) = (self.rows(), other.rows());
        a.count() == b.count() && (0..a.count()).all(|k| a.buffer(k) == b.buffer(k))
    }
}

impl std::fmt::Debug for Whole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} buffers", self.count())
    }
}

/// Consecutive buffers of a [`BuffersSent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Run {
    /// The earlier plan's buffers `from..from + count`.
    Earlier { from: u32, count: u32 },
    /// The next `count` buffers of `whole`.
    Whole { count: u32 },
}

impl BuffersSent {
    pub fn against(earlier: &dyn BufferRows, buffers: &dyn BufferRows) -> BuffersSent {
        let id = |rows: &dyn BufferRows, k| (rows.tensor(k).identity(), rows.place(k).device);
        let mut index: Vec<((TensorIdentity, usize), u32)> = (0..earlier.count())
            .filter_map(|k| Some((id(earlier, k), u32::try_from(k).ok()?)))
            .collect();
        index.sort_unstable();
        let find = |i| {
            let k = index
                .binary_search_by_key(&id(buffers, i), |&(id, _)| id)
                .ok()?;
            Some(index[k].1)
        };
        let mut whole = Vec::new();
        let mut sent = BuffersSent {
            earlier_count: earlier.count(),
            runs: Vec::new(),
            moved: Vec::new(),
            whole: Whole::Made(Arc::new([])),
        };
        for i in 0..buffers.count() {
            let b = buffers.place(i);
            let like = find(i)
                .map(|k| (k, earlier.place(k as usize)))
                .filter(|(_, e)| PlacedSpan::only_change(e, &b))
                .zip(u32::try_from(i).ok());
            let run = match like {
                Some(((k, e), i)) => {
                    let placed = PlacedSpan::of(&b);
                    if placed != PlacedSpan::of(&e) {
                        sent.moved.push((i, placed));
                    }
                    Run::Earlier { from: k, count: 1 }
                }
                None => {
                    whole.push(buffers.buffer(i));
                    Run::Whole { count: 1 }
                }
            };
            match (sent.runs.last_mut(), run) {
                (Some(Run::Earlier { from, count }), Run::Earlier { from: k, .. })
                    if from.checked_add(*count) == Some(k) =>
                {
                    *count += 1
                }
                (Some(Run::Whole { count }), Run::Whole { .. }) => *count += 1,
                _ => sent.runs.push(run),
            }
        }
        sent.whole = Whole::Made(whole.into());
        sent
    }

    /// Every buffer of `rows`, sent whole, against nothing the page holds.
    pub fn all(rows: Arc<dyn BufferRows>) -> BuffersSent {
        BuffersSent {
            earlier_count: 0,
            runs: Vec::new(),
            moved: Vec::new(),
            whole: Whole::Planned(rows),
        }
    }

    /// The buffers sent, from `earlier`, the buffers of the last plan the page was sent.
    pub fn apply(self, earlier: &[BufferView]) -> Result<Arc<[BufferView]>, AnswerMismatch> {
        if self.runs.is_empty() && self.moved.is_empty() {
            return Ok(self.whole.made());
        }
        if earlier.len() != self.earlier_count {
            return Err(AnswerMismatch::BufferCount {
                sent: self.earlier_count,
                held: earlier.len(),
            });
        }
        let mut buffers = Vec::with_capacity(earlier.len());
        let whole = self.whole.made();
        let mut whole = whole.iter().cloned();
        for run in self.runs {
            match run {
                Run::Earlier { from, count } => {
                    let (from, count) = (from as usize, count as usize);
                    let taken = (from.checked_add(count))
                        .and_then(|end| earlier.get(from..end))
                        .ok_or(AnswerMismatch::NoSuchRun { from, count })?;
                    buffers.extend_from_slice(taken);
                }
                Run::Whole { count } => {
                    for _ in 0..count {
                        buffers.push(whole.next().ok_or(AnswerMismatch::TooFewWhole)?);
                    }
                }
            }
        }
        if whole.next().is_some() {
            return Err(AnswerMismatch::TooManyWhole);
        }
        for (i, placed) in self.moved {
            let b = (buffers.get_mut(i as usize)).ok_or(AnswerMismatch::NoSuchBuffer(i))?;
            placed.put(b);
        }
        Ok(buffers.into())
    }
}

/// The plan of `unflipped`, a scenario without flips, as a baseline.
fn baseline(session: &Session, unflipped: &Scenario) -> Option<Baseline> {
    Some(Baseline::of(&session.plan(unflipped).ok()?))
}

impl Baseline {
    fn of(outcome: &Outcome) -> Baseline {
        Baseline {
            footprint_bytes: outcome.plan.footprint_bytes(),
            curves: (outcome.plan.devices.iter())
                .map(|d| d.usage.curve.clone())
                .collect(),
        }
    }
}

/// Fits the session to `asked`, a target as the user wrote it, from no flips (the seed's two
/// rounds, default candidate cap): the engine's answer, which the page shows as the plan log.
pub fn fit(session: &Session, scenario: &Scenario, asked: &str) -> Result<FitAnswer, WebError> {
    let target =
        memplan_human::parse_target(asked).ok_or_else(|| WebError::Target(asked.to_string()))?;
    let query = FitQuery {
        scenario: unflipped(scenario),
        target,
        max_candidates: None,
    };
    Ok(query.ask(session, &mut memplan_core::Control::default())?)
}

/// A sweep as the page shows it: the engine's answer, and whether a cancel ended it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepView {
    #[serde(flatten)]
    pub answer: SweepAnswer,
    /// A cancel ended it: the targets fitted before it.
    pub cancelled: bool,
}

/// The width and height of the sweep chart, CSS pixels (it scales to its box).
pub const SWEEP_CHART: (u32, u32) = (560, 260);

impl SweepView {
    pub fn of(session: &Session, sweep: &memplan_engine::Sweep, cancelled: bool) -> SweepView {
        SweepView {
            answer: SweepAnswer::of(session, sweep),
            cancelled,
        }
    }

    /// The chart (plotters SVG). Drawn on the page only: plotters measures text with the
    /// page's canvas, which a worker does not have.
    pub fn svg(&self) -> Result<String, memplan_render::svg::RenderError> {
        memplan_render::svg::sweep_svg(
            &self.chart_points(),
            &self.given_points(),
            self.answer.cost_unit.as_deref(),
            SWEEP_CHART.0,
            SWEEP_CHART.1,
        )
    }

    /// The point a click `x` pixels from the chart's left edge (in the chart's own pixels)
    /// picks: the nearest by target.
    pub fn point_at(&self, x: f64) -> Option<usize> {
        memplan_render::svg::sweep_point_at(
            &self.chart_points(),
            &self.given_points(),
            SWEEP_CHART.0,
            x,
        )
    }

    fn chart_points(&self) -> Vec<memplan_core::remat::SweepPoint> {
        core_points(&self.answer.points)
    }

    /// The given order's front, under a reordered schedule (else none).
    fn given_points(&self) -> Vec<memplan_core::remat::SweepPoint> {
        core_points(self.answer.given_order.as_deref().unwrap_or_default())
    }
}

/// Sweep points as the chart draws them.
fn core_points(
    points: &[memplan_engine::answers::SweepPointAnswer],
) -> Vec<memplan_core::remat::SweepPoint> {
    points
        .iter()
        .map(|p| memplan_core::remat::SweepPoint {
            target_bytes: p.target_bytes,
            footprint_bytes: p.footprint_bytes,
            recompute_cost: p.recompute_cost,
            flips: Vec::new(),
            within_target: p.within_target,
            pareto: p.pareto,
            exhaustive_cost: p.exhaustive_cost,
        })
        .collect()
}

/// Two plans compared tensor by tensor, as `memplan diff` compares them, with what each side is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareView {
    pub before: String,
    pub after: String,
    pub diff: memplan_engine::diff::PlanDiff,
    /// The other plan, as the views draw it.
    pub after_plan: Arc<Analysis>,
}

/// What a plan is, in a few words: its dump and its scenario's strategy, order and flips.
fn label(session: &Session, scenario: &Scenario) -> String {
    let flips = match scenario.flips.len() {
        0 => String::new(),
        1 => ", 1 flip".into(),
        n => format!(", {n} flips"),
    };
    let order = if scenario.order.is_given() {
        String::new()
    } else {
        format!(", order {}", scenario.order)
    };
    format!("{} · {}{order}{flips}", session.source, scenario.strategy)
}

/// The plan shown (`before`) against `after`: the same session under another scenario, or
/// another dump.
pub fn compare(
    before: (&Session, &Outcome),
    after: (&Session, &Scenario),
) -> Result<CompareView, EngineError> {
    let (session, scenario) = after;
    let outcome = session.plan(scenario)?;
    Ok(CompareView {
        before: label(before.0, &before.1.scenario),
        after: label(session, scenario),
        diff: memplan_engine::diff::diff(&before.0.report(before.1), &session.report(&outcome)),
        after_plan: Arc::new(Analysis::of(session, &outcome)),
    })
}

/// A sweep starts from no flips: the scenario without its own.
pub fn unflipped(scenario: &Scenario) -> Scenario {
    Scenario {
        flips: Vec::new(),
        ..scenario.clone()
    }
}

/// What the page can download besides the drawings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportKind {
    /// The plan report, as `memplan plan --json` prints it.
    PlanJson,
    /// The plan as minimalloc CSV, as `memplan convert --to minimalloc --with-plan` writes it.
    MinimallocCsv,
    /// The loaded program's report, as `memplan plan --json` prints it for a program.
    ProgramJson,
}

/// A file to download.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Export {
    pub file_name: String,
    pub mime: String,
    pub text: String,
}

/// Makes an export of a planned session: the same bytes the CLI writes, or its refusal.
pub fn export(
    session: &Session,
    outcome: &Outcome,
    kind: ExportKind,
) -> Result<Export, EngineError> {
    let name = |suffix: &str| file_name(&session.source, suffix);
    Ok(match kind {
        ExportKind::PlanJson => Export {
            file_name: name("plan.json"),
            mime: "application/json".into(),
            text: report_json(session, outcome),
        },
        ExportKind::MinimallocCsv => Export {
            file_name: name("plan.csv"),
            mime: "text/csv".into(),
            text: session.minimalloc_csv(Some(outcome))?,
        },
        ExportKind::ProgramJson => {
            return Err(EngineError::NoProgram {
                input: session.source.clone(),
            });
        }
    })
}

/// A report as pretty JSON with a final newline, exactly as `memplan plan --json` prints it.
fn pretty_json(report: &impl serde::Serialize) -> String {
    // Not `expect`: its message would format the error, and with it every `io::Error` kind.
    let Ok(mut text) = serde_json::to_string_pretty(report) else {
        unreachable!("reports serialize")
    };
    text.push('\n');
    text
}

/// A program's report as `memplan plan --json` prints it.
pub fn program_report_json(report: &memplan_engine::program::ProgramReport) -> String {
    pretty_json(report)
}

/// The report of a bundled program with every routine under `scenario`: the bytes native and
/// wasm builds must both produce.
pub fn program_example_report_json(
    example: &crate::page::examples::Example,
    scenario: &Scenario,
) -> String {
    let session =
        memplan_engine::program::ProgramSession::load(example.text.as_bytes(), example.name)
            .expect("bundled programs load");
    let outcome = session
        .plan(&|_| scenario.clone())
        .expect("bundled programs plan");
    program_report_json(&session.report(&outcome))
}

/// The plan report as `memplan plan --json` prints it.
fn report_json(session: &Session, outcome: &Outcome) -> String {
    pretty_json(&session.report(outcome))
}

/// The plan report of a bundled example under `scenario`: the bytes native and wasm builds
/// must both produce.
pub fn example_report_json(
    example: &crate::page::examples::Example,
    scenario: &Scenario,
) -> String {
    let session =
        Session::load(example.text.as_bytes(), example.name).expect("bundled examples load");
    let outcome = session.plan(scenario).expect("bundled examples plan");
    report_json(&session, &outcome)
}

/// The scenario of the golden report `tests/golden/mlp-training.order-best.plan.json`: an
/// order search is planning too, and must give the same bytes natively and in wasm.
pub fn best_order() -> Scenario {
    Scenario {
        order: memplan_core::order::Order::Best,
        ..Scenario::default()
    }
}

/// A file name from the source: `model.json` -> `model.<suffix>`.
pub fn file_name(source: &str, suffix: &str) -> String {
    let base = source.rsplit(['/', '\\']).next().unwrap_or(source);
    let stem = base.split('?').next().unwrap_or(base);
    let stem = stem.rsplit_once('.').map_or(stem, |(s, _)| s);
    let stem: String = stem
        .chars()
        .filter(|c| c.is_alphanumeric() || "-_.".contains(*c))
        .collect();
    format!(
        "{}.{suffix}",
        if stem.is_empty() { "memplan" } else { &stem }
    )
}

/// What the tests plan with: a session and its outcome, as the worker holds them.
#[cfg(test)]
impl Local {
    /// Loads and plans `bytes`, as the worker does.
    pub fn load(bytes: &[u8], source: &str, scenario: &Scenario) -> Result<Local, EngineError> {
        let session = Session::load(bytes, source)?;
        let outcome = session.plan(scenario)?;
        Ok(Local { session, outcome })
    }

    /// The same session under another scenario.
    pub fn replan(&self, scenario: &Scenario) -> Result<Local, EngineError> {
        Ok(Local {
            session: self.session.clone(),
            outcome: self.session.plan(scenario)?,
        })
    }

    pub fn analysis(&self) -> Analysis {
        Analysis::of(&self.session, &self.outcome)
    }

    /// [`Local::analysis`], reusing the plan without flips of an earlier analysis of the same
    /// session (`cache`) when the scenario differs from it only in its flips.
    pub fn analysis_cached(&self, cache: &mut AnalysisCache) -> Analysis {
        Analysis::of_cached(&self.session, &self.outcome, cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_keep_the_stem_and_drop_anything_unsafe() {
        assert_eq!(
            file_name("models/resnet.onnx.json", "svg"),
            "resnet.onnx.svg"
        );
        assert_eq!(
            file_name("https://x.org/a/b.csv?token=1", "plan.json"),
            "b.plan.json"
        );
        assert_eq!(file_name("<script>", "png"), "script.png");
        assert_eq!(file_name("", "csv"), "memplan.csv");
    }
    use crate::page::examples::EXAMPLES;

    #[test]
    fn every_example_loads_and_plans_validly() {
        for e in EXAMPLES {
            let a = Local::load(e.text.as_bytes(), e.name, &Scenario::default())
                .unwrap()
                .analysis();
            assert!(a.summary.valid, "{}: {:?}", e.name, a.summary.violations);
            assert!(a.summary.footprint_bytes >= a.summary.lower_bound_bytes);
        }
    }

    #[test]
    fn an_analysis_survives_the_trip_from_the_worker() {
        let scenario = Scenario {
            strategy: Strategy::Tlsf.into(),
            ..Scenario::default()
        };
        let a = Local::load(EXAMPLES[1].text.as_bytes(), "decode", &scenario)
            .unwrap()
            .analysis();
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Analysis>(&text).unwrap(), a);
    }

    #[test]
    fn examples_plan_to_the_golden_reports() {
        for e in EXAMPLES {
            let path = format!(
                "{}/../tests/golden/{}.plan.json",
                env!("CARGO_MANIFEST_DIR"),
                e.name
            );
            let golden = std::fs::read_to_string(path).unwrap();
            assert_eq!(
                example_report_json(e, &Scenario::default()),
                golden,
                "{}: regenerate with `memplan plan --json`",
                e.name
            );
        }
        for p in crate::page::examples::PROGRAMS {
            let path = format!(
                "{}/../tests/golden/{}.plan.json",
                env!("CARGO_MANIFEST_DIR"),
                p.name
            );
            assert_eq!(
                program_example_report_json(p, &Scenario::default()),
                std::fs::read_to_string(path).unwrap(),
                "{}: regenerate with `memplan plan --json`",
                p.name
            );
        }
        let mlp = EXAMPLES.iter().find(|e| e.name == "mlp-training").unwrap();
        assert_eq!(
            example_report_json(mlp, &best_order()),
            include_str!("../../tests/golden/mlp-training.order-best.plan.json"),
            "regenerate with `memplan plan --order best --json`"
        );
    }

    #[test]
    fn a_fit_names_its_flips_and_a_plan_with_them_shows_the_baseline() {
        let e = EXAMPLES
            .iter()
            .find(|e| e.name == "convnet-training")
            .unwrap();
        let local = Local::load(e.text.as_bytes(), e.name, &Scenario::default()).unwrap();
        let a = local.analysis();
        assert!(a.candidates.len() >= 2 && a.candidates.iter().all(|c| !c.flipped));
        assert_eq!(a.baseline, None);
        let budget = a.summary.footprint_bytes * 9 / 10;
        let log = fit(&local.session, &local.outcome.scenario, &budget.to_string()).unwrap();
        assert!(!log.flips.is_empty() && !log.log.is_empty(), "{log:?}");
        assert_eq!(log.solo.len(), log.considered);
        let flipped = local
            .replan(&Scenario {
                flips: log.flip_ids(),
                ..Scenario::default()
            })
            .unwrap()
            .analysis();
        assert_eq!(flipped.summary.footprint_bytes, log.final_bytes);
        let baseline = flipped.baseline.as_ref().unwrap();
        assert_eq!(baseline.footprint_bytes, a.summary.footprint_bytes);
        assert_eq!(baseline.curves[0], a.model.devices[0].curve);
        assert_ne!(flipped.model.devices[0].curve, a.model.devices[0].curve);
        let recomputed: Vec<&str> = flipped
            .candidates
            .iter()
            .filter(|c| c.flipped)
            .map(|c| c.tensor.as_str())
            .collect();
        assert_eq!(recomputed.len(), log.flips.len());
        assert!(matches!(
            fit(&local.session, &local.outcome.scenario, "lots"),
            Err(WebError::Target(_))
        ));
    }

    #[test]
    fn the_cache_never_serves_another_scenarios_plan() {
        let e = EXAMPLES
            .iter()
            .find(|e| e.name == "convnet-training")
            .unwrap();
        let local = Local::load(e.text.as_bytes(), e.name, &Scenario::default()).unwrap();
        let mut cache = AnalysisCache::default();
        let flips = |ids: &[&str], strategy: Strategy| Scenario {
            flips: ids.iter().map(|s| s.to_string()).collect(),
            strategy: strategy.into(),
            ..Scenario::default()
        };
        for scenario in [
            flips(&["relu0"], Strategy::BestFit),
            flips(&["relu0", "relu1"], Strategy::BestFit),
            flips(&["relu1"], Strategy::Bump),
            flips(&[], Strategy::Bump),
            flips(&["relu1"], Strategy::Bump),
        ] {
            let planned = local.replan(&scenario).unwrap();
            assert_eq!(
                planned.analysis_cached(&mut cache),
                planned.analysis(),
                "{scenario:?}"
            );
        }
    }

    /// Buffers of tensors `0..n` (shared, as under one [`Labels`]), each `(tensor, size,
    /// offset, first)`.
    #[cfg(not(target_arch = "wasm32"))]
    fn buffers_of(
        tensors: &[Arc<memplan_render::TensorLabel>],
        buffers: &[(usize, u64, u64, u32)],
    ) -> Vec<BufferView> {
        let b = |&(t, size, offset, first): &(usize, u64, u64, u32)| BufferView {
            tensor: tensors[t].clone(),
            dtype: None,
            size,
            alignment_log2: 0,
            device: 0,
            pool: 0,
            offset,
            first,
            last: first + 1,
            always_live: false,
        };
        buffers.iter().map(b).collect()
    }

    /// The labels of tensors `t0` to `t{n-1}`.
    #[cfg(not(target_arch = "wasm32"))]
    fn tensors(n: usize) -> Vec<Arc<memplan_render::TensorLabel>> {
        (0..n)
            .map(|t| {
                Arc::new(memplan_render::TensorLabel {
                    id: format!("t{t}").into(),
                    ..Default::default()
                })
            })
            .collect()
    }

    #[cfg(not(target_arch = "wasm32"))]
    proptest::proptest! {
        /// Whatever changes between two plans (buffers gone, new, resized, moved), the page
        /// rebuilds the new plan's buffers exactly from the earlier ones and what was sent.
        #[test]
        fn buffers_sent_against_earlier_ones_rebuild_the_plan_exactly(
            earlier in proptest::collection::vec((0..40usize, 1..4u64, 0..6u64, 0..3u32), 0..30),
            later in proptest::collection::vec((0..40usize, 1..4u64, 0..6u64, 0..3u32), 0..30),
        ) {
            let ids = tensors(40);
            let dedup = |mut v: Vec<(usize, u64, u64, u32)>| {
                v.sort_by_key(|b| b.0);
                v.dedup_by_key(|b| b.0);
                v
            };
            let (earlier, later): (Arc<[BufferView]>, Arc<[BufferView]>) =
                (buffers_of(&ids, &dedup(earlier)).into(), buffers_of(&ids, &dedup(later)).into());
            let sent = BuffersSent::against(&earlier, &later);
            let text = serde_json::to_string(&sent).unwrap();
            let received: BuffersSent = serde_json::from_str(&text).unwrap();
            proptest::prop_assert_eq!(received.apply(&earlier).unwrap(), later);
        }

        /// What arrives is checked, never trusted: runs, moves and whole buffers that do not
        /// fit the page's plan are an error, not a panic, and what is accepted has the buffers
        /// the runs announce.
        #[test]
        fn buffers_sent_that_do_not_fit_are_an_error_not_a_panic(
            runs in proptest::collection::vec((proptest::bool::ANY, 0..8u32, 0..8u32), 0..5),
            moved in proptest::collection::vec(0..12u32, 0..4),
            whole in 0..3usize,
            earlier_count in 0..8usize,
        ) {
            let ids = tensors(8);
            let earlier = buffers_of(&ids, &(0..earlier_count).map(|t| (t, 1, 0, 0)).collect::<Vec<_>>());
            let runs: Vec<Run> = (runs.into_iter())
                .map(|(e, from, count)| if e { Run::Earlier { from, count } } else { Run::Whole { count } })
                .collect();
            let announced: u32 = runs
                .iter()
                .map(|r| match r {
                    Run::Earlier { count, .. } | Run::Whole { count } => *count,
                })
                .sum();
            let sent = BuffersSent {
                earlier_count: 4,
                runs,
                moved: moved.into_iter().map(|i| (i, PlacedSpan(0, 1, 0, 0))).collect(),
                whole: Whole::Made(buffers_of(&ids, &vec![(0, 1, 0, 0); whole]).into()),
            };
            // No runs and no moves: the buffers are the whole ones, whatever the page holds.
            let all_whole = sent.runs.is_empty() && sent.moved.is_empty();
            match sent.apply(&earlier) {
                Ok(buffers) if all_whole => proptest::prop_assert_eq!(buffers.len(), whole),
                Ok(buffers) => {
                    proptest::prop_assert_eq!(earlier_count, 4);
                    proptest::prop_assert_eq!(buffers.len(), announced as usize);
                }
                Err(e) => proptest::prop_assert!(!e.to_string().is_empty()),
            }
        }
    }

    #[test]
    fn errors_name_the_source() {
        let bad = br#"{"memplan": 1, "tensors": [], "steps": [{"id": "s", "writes": []}]}"#;
        assert_eq!(
            Local::load(bad, "bad.json", &Scenario::default())
                .unwrap_err()
                .to_string(),
            "bad.json: step `s` writes nothing"
        );
    }
}
