//! What the page draws, from the engine. Pure: no DOM, so it runs (and is tested) natively, in
//! the page and in the worker alike.
//!
//! A [`Local`] is a session the page holds itself (the bundled examples) with its current
//! outcome; dumps the user brings live in the worker, which sends the page only an [`Analysis`]:
//! the summary figures and the view model, what the page draws. Exports that need more (the
//! whole report, the CSV) are derived on demand where the session lives ([`export`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use memplan_core::spaces::SpaceCounts;
use memplan_core::{Strategy, StrategyChoice};
use memplan_engine::{CandidateRow, EngineError, Outcome, Scenario, Session};
use memplan_formats::human::{SpaceRow, event_text, named_flips};
use memplan_formats::report::PlanSummary;
use memplan_render::{BufferView, ViewModel};
use serde::{Deserialize, Serialize};

/// A session planned on the page, and its current outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Local {
    pub session: Session,
    pub outcome: Outcome,
}

impl Local {
    /// Loads and plans `bytes` on the page (small inputs: the bundled examples).
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

/// What re-planning one session can reuse: the plan without flips, by the scenario it was made
/// under (toggling flips leaves it as it is, so each toggle plans once, not twice), and the
/// memory spaces, by the params (flips and strategies change lifetimes, not where a slot lives).
/// Keep one per session.
#[derive(Debug, Clone, Default)]
pub struct AnalysisCache {
    baseline: Option<(Scenario, Option<Baseline>)>,
    spaces: Option<(BTreeMap<String, u64>, Option<SpacesView>)>,
}

impl AnalysisCache {
    /// Keeps `outcome`, when it has no flips, as the baseline of its scenario: the first
    /// toggle after it then plans once too.
    fn remember(&mut self, outcome: &Outcome, model: &ViewModel) {
        let scenario = &outcome.scenario;
        if scenario.inline.is_empty() && scenario.strategy != Strategy::Search.into() {
            self.baseline = Some((unflipped(scenario), Some(Baseline::of(outcome, model))));
        }
    }

    fn baseline(&mut self, session: &Session, scenario: &Scenario) -> Option<Baseline> {
        if scenario.inline.is_empty() || scenario.strategy == Strategy::Search.into() {
            return None;
        }
        let key = unflipped(scenario);
        match &self.baseline {
            Some((known, baseline)) if *known == key => baseline.clone(),
            _ => {
                let baseline = baseline(session, &key);
                self.baseline = Some((key, baseline.clone()));
                baseline
            }
        }
    }

    fn spaces(&mut self, session: &Session, scenario: &Scenario) -> Option<SpacesView> {
        match &self.spaces {
            Some((params, spaces)) if *params == scenario.params => spaces.clone(),
            _ => {
                let spaces = session.spaces(scenario).ok().map(|s| SpacesView {
                    rows: memplan_formats::human::space_rows(&session.graph, &s),
                    counts: s.counts,
                    diagnostics: s.diagnostics.iter().map(ToString::to_string).collect(),
                });
                self.spaces = Some((scenario.params.clone(), spaces.clone()));
                spaces
            }
        }
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
    /// Where each slot lives (`memplan spaces`); `None` when the scenario's params do not bind.
    pub spaces: Option<SpacesView>,
    /// The dump's params with the values planned: its defaults, overridden by the scenario's.
    pub params: BTreeMap<String, u64>,
}

/// The memory spaces as the page shows them: the table of `memplan spaces`, its counts and
/// its diagnostics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpacesView {
    pub rows: Vec<SpaceRow>,
    pub counts: SpaceCounts,
    pub diagnostics: Vec<String>,
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
        Analysis::of_cached_with(session, outcome, cache, true)
    }

    /// [`Analysis::of_cached`], without what depends on the params alone when `params_parts`
    /// is false ([`Analysis::without_params_parts`]): the spaces are then not even looked up.
    pub fn of_cached_with(
        session: &Session,
        outcome: &Outcome,
        cache: &mut AnalysisCache,
        params_parts: bool,
    ) -> Analysis {
        let model = session.view_model(outcome);
        cache.remember(outcome, &model);
        let analysis = Analysis {
            source: session.source.clone(),
            format: session.format.name().to_string(),
            tensor_count: session.graph.tensors.len(),
            step_count: session.graph.steps.len(),
            scenario: outcome.scenario.clone(),
            summary: session.report(outcome).summary,
            model,
            warnings: session.warnings.clone(),
            candidates: session.candidate_rows(outcome),
            baseline: cache.baseline(session, &outcome.scenario),
            params: session
                .graph
                .params
                .iter()
                .chain(&outcome.scenario.params)
                .map(|(k, &v)| (k.clone(), v))
                .collect(),
            spaces: params_parts
                .then(|| cache.spaces(session, &outcome.scenario))
                .flatten(),
        };
        if params_parts {
            analysis
        } else {
            analysis.without_params_parts()
        }
    }

    pub fn strategy(&self) -> StrategyChoice {
        self.scenario.strategy
    }

    /// Leaves out what depends on the params alone (the spaces; the schedule's labels, steps
    /// and loops): a re-plan under the params of the last analysis sent need not send them.
    fn without_params_parts(mut self) -> Analysis {
        self.spaces = None;
        let m = &mut self.model;
        (m.position_labels, m.steps, m.loops) = Default::default();
        self
    }

    /// The whole analysis a worker's answer stands for: `self` as sent, with what it left out
    /// taken from `earlier`, the analysis of the last answer (the page's).
    pub fn received(
        mut self,
        same_params: bool,
        buffers: Option<BuffersSent>,
        earlier: Option<&Analysis>,
    ) -> Result<Analysis, String> {
        if same_params {
            let earlier = earlier.ok_or("it leaves out what an earlier answer carried")?;
            self = self.with_params_parts_of(earlier);
        }
        if let Some(sent) = buffers {
            self.model.buffers = sent.apply(earlier.map_or(&[][..], |e| &e.model.buffers))?;
        }
        Ok(self)
    }

    /// Puts back the parts [`Analysis::without_params_parts`] left out, from `earlier`, an
    /// analysis under the same params.
    fn with_params_parts_of(mut self, earlier: &Analysis) -> Analysis {
        self.spaces = earlier.spaces.clone();
        let (m, e) = (&mut self.model, &earlier.model);
        m.position_labels = e.position_labels.clone();
        m.steps = e.steps.clone();
        m.loops = e.loops.clone();
        self
    }
}

/// Where and when a buffer lives (pool, offset, address, and its live interval's first and
/// last position): what a flip or another strategy changes of it. Not the core's
/// `Placement`, which is the pool and offset alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedSpan(usize, u64, u64, u32, u32);

impl PlacedSpan {
    fn of(b: &BufferView) -> PlacedSpan {
        PlacedSpan(b.pool, b.offset, b.address, b.first, b.last)
    }

    /// Whether `b` is `earlier` but for where and when it lives. The pattern names every field, so a
    /// field added to [`BufferView`] must be placed on one side or the other.
    fn only_change(earlier: &BufferView, b: &BufferView) -> bool {
        let BufferView {
            tensor,
            name,
            kind,
            dtype,
            size,
            occupied,
            device,
            pool: _,
            offset: _,
            address: _,
            first: _,
            last: _,
            always_live,
            producers,
            consumers,
            views,
        } = b;
        (tensor, name, kind, dtype, size, occupied)
            == (
                &earlier.tensor,
                &earlier.name,
                &earlier.kind,
                &earlier.dtype,
                &earlier.size,
                &earlier.occupied,
            )
            && (device, always_live, producers, consumers, views)
                == (
                    &earlier.device,
                    &earlier.always_live,
                    &earlier.producers,
                    &earlier.consumers,
                    &earlier.views,
                )
    }

    fn put(self, b: BufferView) -> BufferView {
        let PlacedSpan(pool, offset, address, first, last) = self;
        BufferView {
            pool,
            offset,
            address,
            first,
            last,
            ..b
        }
    }
}

/// A model's buffers sent against those of the last plan sent, which the page holds: a buffer
/// equal to one of those but for its [`PlacedSpan`] goes as that buffer's index and its
/// placement, the others whole. A toggle's answer on a 2,000-tensor dump shrinks from about
/// 520 KB of buffers to 70 KB, which the worker writes and the page reads faster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuffersSent {
    /// How many buffers the plan sent before had: the page checks it holds that plan.
    pub earlier_count: usize,
    /// Per buffer, in order: the earlier buffer it is placed anew, or `None` for the next of
    /// `whole`.
    pub like: Vec<Option<(u32, PlacedSpan)>>,
    pub whole: Vec<BufferView>,
}

impl BuffersSent {
    pub fn against(earlier: &[BufferView], buffers: &[BufferView]) -> BuffersSent {
        let index: HashMap<(&str, usize), usize> = earlier
            .iter()
            .enumerate()
            .map(|(k, b)| ((b.tensor.as_str(), b.device), k))
            .collect();
        let mut sent = BuffersSent {
            earlier_count: earlier.len(),
            like: Vec::with_capacity(buffers.len()),
            whole: Vec::new(),
        };
        for b in buffers {
            let placed = PlacedSpan::of(b);
            let like = index
                .get(&(b.tensor.as_str(), b.device))
                .filter(|&&k| PlacedSpan::only_change(&earlier[k], b))
                .and_then(|&k| u32::try_from(k).ok());
            match like {
                Some(k) => sent.like.push(Some((k, placed))),
                None => {
                    sent.like.push(None);
                    sent.whole.push(b.clone());
                }
            }
        }
        sent
    }

    /// The buffers sent, from `earlier`, the buffers of the last plan the page was sent.
    pub fn apply(self, earlier: &[BufferView]) -> Result<Vec<BufferView>, String> {
        if earlier.len() != self.earlier_count {
            return Err(format!(
                "the plan's buffers were sent against a plan of {} buffers, and the page holds {}",
                self.earlier_count,
                earlier.len()
            ));
        }
        let mut whole = self.whole.into_iter();
        let buffers = self
            .like
            .into_iter()
            .map(|like| match like {
                Some((k, placed)) => earlier
                    .get(k as usize)
                    .map(|b| placed.put(b.clone()))
                    .ok_or_else(|| format!("buffer {k} of the earlier plan does not exist")),
                None => whole
                    .next()
                    .ok_or_else(|| "fewer whole buffers were sent than announced".to_string()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        match whole.next() {
            Some(_) => Err("more whole buffers were sent than announced".into()),
            None => Ok(buffers),
        }
    }
}

/// The plan of `unflipped`, a scenario without flips, as a baseline.
fn baseline(session: &Session, unflipped: &Scenario) -> Option<Baseline> {
    let outcome = session.plan(unflipped).ok()?;
    Some(Baseline::of(&outcome, &session.view_model(&outcome)))
}

impl Baseline {
    fn of(outcome: &Outcome, model: &ViewModel) -> Baseline {
        Baseline {
            footprint_bytes: outcome.plan.footprint_bytes(),
            curves: model.devices.iter().map(|d| d.curve.clone()).collect(),
        }
    }
}

/// A fit's answer as the page shows it: the footprints, the flips in acceptance order and
/// the plan log in words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitLog {
    /// The budget asked for, as the user wrote it.
    pub budget: String,
    pub baseline_bytes: u64,
    pub final_bytes: u64,
    pub within_budget: bool,
    /// (tensor, relief in bytes, recompute cost), in acceptance order.
    pub flips: Vec<(String, i128, u64)>,
    pub considered: usize,
    pub dropped: usize,
    pub log: Vec<String>,
    /// Round one: (tensor, relief alone, recompute cost) of each candidate scored.
    pub solo: Vec<(String, i128, u64)>,
}

impl FitLog {
    /// The tensors the fit recomputes: the scenario's flips.
    pub fn inline(&self) -> Vec<String> {
        self.flips.iter().map(|f| f.0.clone()).collect()
    }
}

/// Fits the session to `budget` from no flips (the seed's two rounds, default candidate cap).
pub fn fit(session: &Session, scenario: &Scenario, budget: &str) -> Result<FitLog, FitError> {
    let target = memplan_formats::human::parse_target(budget)
        .ok_or_else(|| FitError::Budget(budget.to_string()))?;
    let fit = session.fit(&unflipped(scenario), target, None)?;
    let id = |t: usize| session.graph.tensors[t].id.clone();
    Ok(FitLog {
        budget: budget.trim().to_string(),
        baseline_bytes: fit.baseline_bytes,
        final_bytes: fit.final_bytes,
        within_budget: fit.within_budget,
        flips: named_flips(&fit.flips, &id),
        considered: fit.considered,
        dropped: fit.dropped,
        solo: named_flips(&fit.solo, &id),
        log: fit.log.iter().map(|e| event_text(e, &id)).collect(),
    })
}

/// A budget sweep as the page shows it: the points with their flips by id, and the chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepView {
    pub candidates: usize,
    pub points: Vec<SweepRow>,
    /// The exhaustive optimum was computed (the candidates are few).
    pub exhaustive: bool,
    /// A cancel ended it: the budgets fitted before it.
    pub cancelled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepRow {
    pub budget_bytes: u64,
    pub footprint_bytes: u64,
    pub recompute_cost: u64,
    pub flips: Vec<String>,
    pub pareto: bool,
    pub exhaustive_cost: Option<u64>,
}

/// The width and height of the sweep chart, CSS pixels (it scales to its box).
pub const SWEEP_CHART: (u32, u32) = (860, 300);

impl SweepView {
    pub fn of(session: &Session, sweep: &memplan_engine::Sweep, cancelled: bool) -> SweepView {
        let id = |t: usize| session.graph.tensors[t].id.clone();
        SweepView {
            candidates: sweep.candidates,
            points: sweep
                .points
                .iter()
                .map(|p| SweepRow {
                    budget_bytes: p.budget_bytes,
                    footprint_bytes: p.footprint_bytes,
                    recompute_cost: p.recompute_cost,
                    flips: p.flips.iter().map(|&t| id(t)).collect(),
                    pareto: p.pareto,
                    exhaustive_cost: p.exhaustive_cost,
                })
                .collect(),
            exhaustive: sweep.exhaustive.is_some(),
            cancelled,
        }
    }

    /// The chart (plotters SVG). Drawn on the page only: plotters measures text with the
    /// page's canvas, which a worker does not have.
    pub fn svg(&self) -> Result<String, memplan_render::svg::RenderError> {
        memplan_render::svg::sweep_svg(&self.chart_points(), SWEEP_CHART.0, SWEEP_CHART.1)
    }

    /// The point a click `x` pixels from the chart's left edge (in the chart's own pixels)
    /// picks: the nearest by budget.
    pub fn point_at(&self, x: f64) -> Option<usize> {
        memplan_render::svg::sweep_point_at(&self.chart_points(), SWEEP_CHART.0, x)
    }

    fn chart_points(&self) -> Vec<memplan_core::remat::SweepPoint> {
        self.points
            .iter()
            .map(|p| memplan_core::remat::SweepPoint {
                budget_bytes: p.budget_bytes,
                footprint_bytes: p.footprint_bytes,
                recompute_cost: p.recompute_cost,
                flips: Vec::new(),
                pareto: p.pareto,
                exhaustive_cost: p.exhaustive_cost,
            })
            .collect()
    }
}

/// Two plans compared tensor by tensor, as `memplan diff` compares them, with what each side is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareView {
    pub before: String,
    pub after: String,
    pub diff: memplan_formats::diff::PlanDiff,
    /// The other plan, as the views draw it.
    pub after_plan: Arc<Analysis>,
}

/// What a plan is, in a few words: its dump and its scenario's strategy and flips.
fn label(session: &Session, scenario: &Scenario) -> String {
    let flips = match scenario.inline.len() {
        0 => String::new(),
        1 => ", 1 flip".into(),
        n => format!(", {n} flips"),
    };
    format!("{} · {}{flips}", session.source, scenario.strategy)
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
        diff: memplan_formats::diff::diff(&before.0.report(before.1), &session.report(&outcome)),
        after_plan: Arc::new(Analysis::of(session, &outcome)),
    })
}

/// The candidates a sweep may enumerate exhaustively (as `memplan sweep`'s default).
pub const SWEEP_EXHAUSTIVE_MOST: usize = 20;

/// A sweep starts from no flips: the scenario without its own.
pub fn unflipped(scenario: &Scenario) -> Scenario {
    Scenario {
        inline: Vec::new(),
        ..scenario.clone()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("the budget {0:?} is not a size (512MiB, 1.5GB, 4096) or `minimize`")]
    Budget(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// What the page can download besides the drawings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportKind {
    /// The plan report, as `memplan plan --json` prints it.
    PlanJson,
    /// The plan as minimalloc CSV, as `memplan convert --to minimalloc --with-plan` writes it.
    MinimallocCsv,
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
    let name = |suffix: &str| crate::export::file_name(&session.source, suffix);
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
    })
}

/// The plan report as pretty JSON, exactly as `memplan plan --json` prints it.
fn report_json(session: &Session, outcome: &Outcome) -> String {
    let mut text =
        serde_json::to_string_pretty(&session.report(outcome)).expect("reports serialize");
    text.push('\n');
    text
}

/// The plan report of a bundled example with the default scenario: the bytes native and wasm
/// builds must both produce.
pub fn example_report_json(example: &crate::examples::Example) -> String {
    let local = Local::load(example.text.as_bytes(), example.name, &Scenario::default())
        .expect("bundled examples load");
    report_json(&local.session, &local.outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::examples::EXAMPLES;

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
                example_report_json(e),
                golden,
                "{}: regenerate with `memplan plan --json`",
                e.name
            );
        }
    }

    #[test]
    fn a_fit_names_its_flips_and_a_plan_with_them_shows_the_baseline() {
        let e = EXAMPLES
            .iter()
            .find(|e| e.name == "convnet-training")
            .unwrap();
        let local = Local::load(e.text.as_bytes(), e.name, &Scenario::default()).unwrap();
        let a = local.analysis();
        assert!(a.candidates.len() >= 2 && a.candidates.iter().all(|c| !c.inlined));
        assert_eq!(a.baseline, None);
        let budget = a.summary.footprint_bytes * 9 / 10;
        let log = fit(&local.session, &local.outcome.scenario, &budget.to_string()).unwrap();
        assert!(!log.flips.is_empty() && !log.log.is_empty(), "{log:?}");
        assert_eq!(log.solo.len(), log.considered);
        let flipped = local
            .replan(&Scenario {
                inline: log.inline(),
                ..Scenario::default()
            })
            .unwrap()
            .analysis();
        assert_eq!(flipped.summary.footprint_bytes, log.final_bytes);
        let baseline = flipped.baseline.as_ref().unwrap();
        assert_eq!(baseline.footprint_bytes, a.summary.footprint_bytes);
        assert_eq!(baseline.curves[0], a.model.devices[0].curve);
        assert_ne!(flipped.model.devices[0].curve, a.model.devices[0].curve);
        let inlined: Vec<&str> = flipped
            .candidates
            .iter()
            .filter(|c| c.inlined)
            .map(|c| c.tensor.as_str())
            .collect();
        assert_eq!(inlined.len(), log.flips.len());
        assert!(matches!(
            fit(&local.session, &local.outcome.scenario, "lots"),
            Err(FitError::Budget(_))
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
            inline: ids.iter().map(|s| s.to_string()).collect(),
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
