//! memplan-engine: the whole pipeline behind one entry, for the CLI and the web worker alike.
//!
//! A [`Session`] is built once from bytes: the dump is read (any format of memplan-formats),
//! resolved once, and its liveness analysed (buffers, intervals, the producer and consumer
//! index). A [`Scenario`] is everything a user may change about a plan, as typed serde data; the
//! session plans it into an [`Outcome`]: the plan itself, compact. The report, the view model and
//! the minimalloc CSV are derived from an outcome on demand, so a caller pays only for what it
//! shows, and nothing outside this crate assembles the pipeline by hand.
//!
//! Why a crate and not a module of memplan-core: a session starts from bytes and ends in views,
//! so it needs memplan-formats and memplan-render; the core must not (it stays pure and knows no
//! format). This crate adds no planning logic and no numbers of its own: it wires the layers in
//! the one order, bytes -> importer -> graph -> liveness -> layout -> check -> views.

pub mod advise;
pub mod answers;
pub mod diff;
pub mod job;
pub mod program;
pub mod query;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use memplan_core::budget::{
    Budget, BudgetError, DriverTerms, largest_fitting, largest_fitting_from,
};
use memplan_core::check::check_order;
use memplan_core::graph::{GraphError, Id, ResolvedGraph, group_by_site};
use memplan_core::liveness::{analyze_flipped_with, problem_flipped};
use memplan_core::order::{self, Order};
use memplan_core::problem::ProblemError;
use memplan_core::recorded::Recorded;
use memplan_core::remat::{
    Candidate, Exhaustive, FitResult, Rematerializer, Scores, SweepPoint, SweepRun, Target,
    candidates,
};
use memplan_core::spaces::{Spaces, classify};
use memplan_core::{
    Control, Graph, Layout, Liveness, Placement, Plan, PlanError, PlanOptions, Pool, PoolRole,
    Problem, StrategyChoice, Violation, analyze, check, plan_unless_cancelled, plan_with,
};
use memplan_formats::report::{
    BudgetReport, GivenPlanReport, OrderReport, OrderTried, PlanReport, PlanSummary, SiteReport,
};
use memplan_formats::{Format, FormatError, GivenPlan, load_with, minimalloc, onnx};
use memplan_render::{Labels, PlannedBuffers, ViewModel};
use serde::{Deserialize, Serialize};

/// What went wrong, with the input (file, URL or example) it came from. Serde, so that the
/// worker sends it to the page as it is.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineError {
    #[error("{input}: {error}")]
    Format { input: String, error: FormatError },
    #[error("{input}: {error}")]
    Problem { input: String, error: ProblemError },
    #[error("{input}: {error}")]
    Plan { input: String, error: PlanError },
    #[error(
        "{input}: minimalloc CSV holds one address space, and this dump has {devices} devices; export memplan JSON, or one device at a time"
    )]
    MultiDevice { input: String, devices: usize },
    #[error("{input}: the program's used memory on device `{device}` passes 2^64 bytes")]
    ProgramOverflow { input: String, device: String },
    #[error("{input}: no routine of the program has {what}")]
    NotInProgram { input: String, what: String },
    #[error("{input}: this is one computation, not a program of several routines")]
    NoProgram { input: String },
    #[error("{input}: the file gives no offsets to check; pass a plan report")]
    NoGivenPlan { input: String },
    #[error("{input}: cannot write it back: {reason}")]
    NotWritable { input: String, reason: String },
    #[error("{input}: with {binding}: {error}")]
    Binding {
        input: String,
        binding: String,
        error: GraphError,
    },
    #[error("{input}: the dump has no param `{param}` (its params: {known})")]
    UnknownParam {
        input: String,
        param: String,
        known: String,
    },
    #[error("{input}: device class `{class}`: {error}")]
    Budget {
        input: String,
        class: String,
        error: BudgetError,
    },
    #[error("{input}: tensor `{tensor}` cannot be recomputed at its uses: {reason}")]
    NotACandidate {
        input: String,
        tensor: String,
        reason: NotACandidate,
    },
    #[error("{input}: \"the largest that fits\" needs a device class to fit into")]
    NoDevice { input: String },
    #[error("a sweep of {points} targets: at most {most} are fitted")]
    TooManyPoints { points: usize, most: usize },
    #[error(
        "{input}: the footprint is not monotone in `{param}`: {lower} fits and {higher} does not, but the bisection's answer {answer} does not check"
    )]
    NotMonotone {
        input: String,
        param: String,
        lower: u64,
        higher: u64,
        answer: u64,
    },
}

/// Why a tensor a scenario flips cannot be recomputed at its uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotACandidate {
    #[error("no tensor has this id")]
    NoSuchTensor,
    #[error("the dump's remat_candidates do not list it")]
    NotListed,
    #[error(
        "it is not the only output of its step, or owns no bytes, is always-live, has views, or is never read"
    )]
    NotEligible,
}

/// The tensor `id` names, if it is one of `candidates`; else why it cannot be flipped.
fn flip_index(
    graph: &Graph,
    resolved: &ResolvedGraph,
    candidates: &[Candidate],
    id: &str,
) -> Result<usize, NotACandidate> {
    let t = (resolved.tensor_of(graph, id)).ok_or(NotACandidate::NoSuchTensor)?;
    if candidates.iter().any(|c| c.tensor == t) {
        Ok(t)
    } else if graph.remat_candidates.is_some() {
        Err(NotACandidate::NotListed)
    } else {
        Err(NotACandidate::NotEligible)
    }
}

/// A value a scenario holds that the dump does not know, left out by [`Session::known_part`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unknown {
    #[error("flip `{tensor}`: {reason}")]
    Flip {
        tensor: String,
        reason: NotACandidate,
    },
    #[error("param `{name}` is not one of the dump's (its params: {known})")]
    Param { name: String, known: String },
}

/// Everything a user may change about a plan. Plain, typed data: the CLI builds it from flags,
/// the page from its controls and its link, and the worker receives it as JSON. Fields the open
/// issues add (flips, param bindings, a device class) join it here, each with a default that
/// plans the dump as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scenario {
    pub strategy: StrategyChoice,
    /// Only tensors of equal dtype share bytes.
    pub precision_classes: bool,
    /// The largest pool, bytes. `None`: the dump's own `pool_cap`, else no cap (64-bit offsets).
    pub pool_cap: Option<u64>,
    /// `search`'s work limit per region, in conflict visits; `None`: the default. Deterministic: the
    /// same limit gives the same plan.
    pub work_limit: Option<u64>,
    /// For `search`: the footprint each device must fit in; the search stops at the first layout
    /// within it or proves none exists. `None`: minimize.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u64>,
    /// Values of the dump's params (symbolic dims) that replace its own.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, u64>,
    /// The device class every device of the dump is, and the utilization it runs at: the plan
    /// then reports its headroom or overflow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_class: Option<DeviceClass>,
    /// Flips: the remat candidates (tensor ids) recomputed at their uses instead of stored.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flips: Vec<String>,
    /// The order the steps run in: the dump's own, one of Inductor's heuristics, or the
    /// smallest plan found (`memplan_core::order`). Chosen for the dump without flips, which
    /// then apply to the reordered schedule: a fit's figures hold when its flips are applied.
    #[serde(skip_serializing_if = "Order::is_given")]
    pub order: Order,
    /// The work `order: best` may do, in storage visits; `None`: the default. Deterministic:
    /// the same limit gives the same order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_work: Option<u64>,
}

/// A device class (its name and memory terms) and the utilization it runs at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceClass {
    pub class: String,
    pub terms: DriverTerms,
    pub util: f64,
}

impl Scenario {
    /// `search`'s work limit per region under this scenario: its own, else the default (a
    /// capacity search's where it has a capacity).
    pub fn work_limit_or_default(&self) -> u64 {
        self.work_limit.unwrap_or(match self.capacity {
            Some(_) => memplan_core::layout::CAPACITY_SEARCH_WORK,
            None => memplan_core::layout::DEFAULT_SEARCH_WORK,
        })
    }
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            strategy: StrategyChoice::Best,
            precision_classes: true,
            pool_cap: None,
            work_limit: None,
            capacity: None,
            params: BTreeMap::new(),
            device_class: None,
            flips: Vec::new(),
            order: Order::Given,
            order_work: None,
        }
    }
}

/// A scenario planned: the plan and the options it was made with, the graph it was made of when
/// the scenario rebinds params, and the device budget when it names one. Compact: what every
/// view derives from, and nothing derived.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub scenario: Scenario,
    pub plan: Arc<Plan>,
    /// The dump under the scenario's params, when they differ from its own.
    pub bound: Option<Box<Bound>>,
    pub budget: Option<Budget>,
}

/// A dump under other param values, another order or flips: resolved (when params or the
/// order change) and analysed again.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    /// Shared with the session when only flips changed.
    pub graph: Arc<Graph>,
    pub resolved: Arc<ResolvedGraph>,
    pub liveness: Arc<Liveness>,
    /// How the steps were reordered, when the scenario's order is not the given one.
    pub reordering: Option<Arc<Reordering>>,
}

/// A schedule reordered: the order, what the checker found of it, and the given order's plan
/// beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reordering {
    pub order: Order,
    /// The given graph's step indices, in the order they now run.
    pub steps: Vec<usize>,
    /// Per step of the reordered graph: whether it moved (it is outside a longest run of steps
    /// that kept their given order).
    pub moved: Vec<bool>,
    /// The dependencies of the given schedule the order breaks (`check::check_order`): none
    /// for any order memplan makes.
    pub violations: Vec<Violation>,
    /// The footprint of the given order, per device, under the same options and flips.
    pub given_footprint_bytes: Vec<u64>,
    /// The given order's usage curve per device (live bytes at each position; the same flips),
    /// for the views to draw beside the reordered one.
    pub given_usage: Vec<Vec<u64>>,
    /// For `best`: each order it planned (its start, whether improved, its footprint).
    pub tried: Vec<(Order, bool, u64)>,
    /// For `best`: it ran out of work or was stopped before it tried every start.
    pub partial: bool,
}

/// The most buffer relayouts an exhaustive optimum may take (2^candidates x buffers).
pub const EXHAUSTIVE_WORK: u64 = 50_000_000;

/// The utilization a device class runs at unless the user says otherwise.
pub const DEFAULT_UTIL: f64 = 0.9;

/// How many targets a sweep fits unless the user says otherwise.
pub const DEFAULT_SWEEP_POINTS: usize = 32;

/// The most candidates a sweep scores every subset of (the exhaustive optimum) unless the user
/// says otherwise: 2^20 subsets, each a relayout, bounded again by [`EXHAUSTIVE_WORK`].
pub const DEFAULT_EXHAUSTIVE_MOST: usize = 20;

/// The most targets one sweep fits: each is a fit of its own, and more than this many points
/// on one curve are more than a chart or a table can show.
pub const MAX_SWEEP_POINTS: usize = 1024;

/// A budget sweep: the fit at each budget, and the exhaustive optimum when it was computed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sweep {
    pub candidates: usize,
    pub points: Vec<SweepPoint>,
    #[serde(skip)]
    pub exhaustive: Option<Exhaustive>,
    /// Under another order than the given one: the same sweep under the given order, to show
    /// how far reordering moves the front.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_order: Option<Vec<SweepPoint>>,
}

/// A sweep in steps ([`Session::sweep_step`]): what it has laid out and fitted so far.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepJob {
    scenario: Scenario,
    points: usize,
    exhaustive_most: usize,
    /// The dump in the scenario's order, once the first step has ordered it.
    base: Option<Option<Bound>>,
    scores: Scores,
    /// `None` until a step decides (and computes) the exhaustive optimum.
    exhaustive: Option<Option<Exhaustive>>,
    run: Option<SweepRun>,
    candidates: usize,
    /// Under another order than the given one: the same sweep under the given order, run once
    /// this one is `done`.
    given: Option<Box<SweepJob>>,
    done: Option<Sweep>,
}

impl SweepJob {
    pub fn new(scenario: Scenario, points: usize, exhaustive_most: usize) -> Self {
        let given = (!scenario.order.is_given()).then(|| {
            let given = Scenario {
                order: Order::Given,
                ..scenario.clone()
            };
            Box::new(SweepJob::new(given, points, exhaustive_most))
        });
        SweepJob {
            scenario,
            points,
            exhaustive_most,
            base: None,
            scores: Scores::default(),
            exhaustive: None,
            run: None,
            candidates: 0,
            given,
            done: None,
        }
    }

    /// The steps in all of a sweep of `points` targets under `scenario`, as its job's
    /// [`progress`](SweepJob::progress) counts them, without making one (the page shows the
    /// count before its worker has started).
    pub fn steps(scenario: &Scenario, points: usize) -> usize {
        let own = Self::own_steps(points);
        match scenario.order.is_given() {
            true => own,
            false => 2 * own,
        }
    }

    /// Three before the targets: the order, the exhaustive optimum and the minimize fit.
    fn own_steps(points: usize) -> usize {
        points.max(2) + 3
    }

    /// Steps done and steps in all (see [`SweepJob::own_steps`]; and the given order's sweep
    /// after, when there is one).
    pub fn progress(&self) -> (usize, usize) {
        let own_total = Self::own_steps(self.points);
        let (given_done, given_total) = self.given.as_ref().map_or((0, 0), |g| g.progress());
        let own_done = if self.done.is_some() {
            own_total
        } else {
            match &self.run {
                Some(run) => run.progress().0 + 3,
                None => usize::from(self.base.is_some()) + usize::from(self.exhaustive.is_some()),
            }
        };
        (own_done + given_done, own_total + given_total)
    }

    /// The sweep so far, for a job stopped early: the targets fitted, the frontier among them.
    pub fn partial(self) -> Sweep {
        if let Some(mut done) = self.done {
            done.given_order = self.given.map(|g| g.partial().points);
            return done;
        }
        Sweep {
            candidates: self.candidates,
            points: self.run.map(SweepRun::finish).unwrap_or_default(),
            exhaustive: self.exhaustive.flatten(),
            given_order: None,
        }
    }
}

/// Why a question that plans many times ([`Session::largest_fitting_unless`],
/// [`Session::advise_unless`]) ended without its answer.
pub(crate) enum Ended {
    Failed(EngineError),
    Stopped,
}

impl From<EngineError> for Ended {
    fn from(e: EngineError) -> Ended {
        Ended::Failed(e)
    }
}

impl Ended {
    /// The answer of a question that a stop may end: `None` where it did.
    pub(crate) fn unless_stopped<T>(asked: Result<T, Ended>) -> Result<Option<T>, EngineError> {
        match asked {
            Ok(answer) => Ok(Some(answer)),
            Err(Ended::Stopped) => Ok(None),
            Err(Ended::Failed(e)) => Err(e),
        }
    }
}

/// The answer of a "largest that fits" query, with both witnesses of the checked bisection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fits {
    pub param: String,
    /// The largest value in the range that fits; `None` when not even the low end does.
    pub largest: Option<u64>,
    pub budget: Budget,
    /// The footprint at `largest` (it fits: at most the usable bytes).
    pub footprint_at_largest: Option<u64>,
    /// The footprint at `largest + 1` (it does not fit), or at the low end when nothing fits;
    /// `None` when `largest` is the range's top.
    pub footprint_at_next: Option<u64>,
    /// How many values were planned to find it.
    pub probes: u32,
}

/// A remat candidate as the page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateRow {
    pub tensor: String,
    pub bytes: u64,
    pub recompute_cost: u64,
    /// The outcome recomputes it at its uses.
    pub flipped: bool,
}

impl CandidateRow {
    /// Whether `scenario` recomputes `tensor` at its uses: a row's `inlined`.
    pub fn is_flipped(tensor: &str, scenario: &Scenario) -> bool {
        scenario.flips.iter().any(|t| t == tensor)
    }
}

/// A dump read, resolved and analysed once, ready to plan under any scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// The file, URL or example it came from; messages start with it.
    pub source: String,
    pub format: Format,
    /// Shared, not copied, by the scenarios that only flip tensors (a toggle re-plans often).
    pub graph: Arc<Graph>,
    pub resolved: Arc<ResolvedGraph>,
    pub liveness: Arc<Liveness>,
    /// The plan the file gives itself (a minimalloc `offset` column, XLA's buffer assignment):
    /// private, so that its report, cached per precision-class setting, always describes it.
    given_plan: Option<GivenPlan>,
    /// [`Session::given_plan_report`] without and with precision classes, made once: every
    /// plan's summary carries it, and it does not depend on the plan.
    given_reports: [std::sync::OnceLock<Option<GivenPlanReport>>; 2],
    /// What the source's own allocator did (a PyTorch snapshot or profiler trace): shared, the
    /// views of every plan show it.
    pub recorded: Option<Arc<Recorded>>,
    /// What the import could not carry over exactly.
    pub warnings: Vec<String>,
}

/// The counts `memplan validate` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub tensors: usize,
    pub steps: usize,
    pub loops: usize,
    pub devices: usize,
    pub buffers: usize,
    pub positions: u32,
}

impl Session {
    /// Reads `bytes` in any format memplan reads, checks the graph, and analyses its liveness.
    /// What loads here can be planned: a problem that no scenario could plan (sizes that add up
    /// past 2^64, a buffer over the dump's own pool cap) is refused now, not at the first plan.
    pub fn load(bytes: &[u8], source: &str) -> Result<Session, EngineError> {
        Self::load_with(bytes, source, &onnx::Options::default())
    }

    /// [`Session::load`] with import options (an ONNX model's fixed input shapes).
    pub fn load_with(
        bytes: &[u8],
        source: &str,
        options: &onnx::Options,
    ) -> Result<Session, EngineError> {
        Self::loaded(load_with(bytes, source, options), source)
    }

    /// [`Session::load_with`] from `input` of `len` bytes, a PyTorch snapshot read as a stream
    /// ([`memplan_formats::load_from`]); `progress(done, of)` hears how far, and `should_stop`
    /// is asked between the stages past the reading, the liveness analysis the last of them
    /// (a cancel ends the load with [`FormatError::Cancelled`]).
    pub fn load_from<R: std::io::Read + std::io::Seek>(
        input: R,
        len: u64,
        source: &str,
        options: &onnx::Options,
        progress: &mut dyn FnMut(u64, u64),
        should_stop: &dyn Fn() -> bool,
    ) -> Result<Session, EngineError> {
        let loaded = memplan_formats::load_from(input, len, source, options, progress, should_stop)
            .and_then(|loaded| memplan_formats::stop_if(should_stop).map(|()| loaded));
        Self::loaded(loaded, source)
    }

    fn loaded(
        loaded: Result<memplan_formats::Loaded, FormatError>,
        source: &str,
    ) -> Result<Session, EngineError> {
        let loaded = loaded.map_err(|error| EngineError::Format {
            input: source.to_string(),
            error,
        })?;
        let liveness = analyze(&loaded.graph, &loaded.resolved);
        let session = Session {
            source: source.to_string(),
            format: loaded.format,
            graph: Arc::new(loaded.graph),
            resolved: Arc::new(loaded.resolved),
            liveness: Arc::new(liveness),
            given_plan: loaded.given_plan,
            given_reports: Default::default(),
            recorded: loaded.recorded.map(Arc::new),
            warnings: loaded.warnings,
        };
        session
            .liveness
            .validate(&session.graph)
            .map_err(|error| EngineError::Problem {
                input: session.source.clone(),
                error,
            })?;
        if let Some(cap) = session.graph.pool_cap {
            session.check_cap(&session.graph, &session.liveness, cap)?;
        }
        Ok(session)
    }

    pub fn problem(&self) -> &Problem {
        &self.liveness.problem
    }

    pub fn counts(&self) -> Counts {
        Counts {
            tensors: self.graph.tensors.len(),
            steps: self.graph.step_count(),
            loops: self.graph.loops.len(),
            devices: self.problem().device_ids.len(),
            buffers: self.problem().buffers.len(),
            positions: self.problem().positions,
        }
    }

    /// Refuses a cap that some buffer of `liveness` (of `graph`) cannot fit under, naming it.
    fn check_cap(&self, graph: &Graph, liveness: &Liveness, cap: u64) -> Result<(), EngineError> {
        let problem = &liveness.problem;
        match (problem.buffers.iter()).position(|b| b.occupied_size() > cap) {
            Some(b) => Err(self.plan_error(PlanError::OverCap {
                buffer: liveness.buffer_id(graph, b).to_string(),
                occupied: problem.buffers[b].occupied_size(),
                cap,
            })),
            None => Ok(()),
        }
    }

    fn plan_error(&self, error: PlanError) -> EngineError {
        EngineError::Plan {
            input: self.source.clone(),
            error,
        }
    }

    /// The pool cap a scenario plans under: its own, else the dump's, else none.
    pub fn pool_cap(&self, scenario: &Scenario) -> Option<u64> {
        scenario.pool_cap.or(self.graph.pool_cap)
    }

    /// The core's options for `scenario` on this dump.
    pub fn options(&self, scenario: &Scenario) -> PlanOptions {
        let defaults = PlanOptions::default();
        PlanOptions {
            strategy: scenario.strategy,
            precision_classes: scenario.precision_classes,
            pool_cap: self.pool_cap(scenario),
            work_limit: scenario.work_limit_or_default(),
            search_capacity: scenario.capacity,
            ..defaults
        }
    }

    /// Plans `scenario`; the plan has passed the independent checker (its verdict is in it).
    pub fn plan(&self, scenario: &Scenario) -> Result<Outcome, EngineError> {
        self.plan_with(scenario, &mut Control::default())
    }

    /// [`Session::plan`] under the caller's stop condition and progress callback. A stop ends
    /// the plan with its best layout so far; it never abandons it.
    pub fn plan_with(
        &self,
        scenario: &Scenario,
        control: &mut Control<'_>,
    ) -> Result<Outcome, EngineError> {
        let planned =
            control.without_abandoning(|control| self.plan_unless_cancelled(scenario, control))?;
        Ok(planned.expect("a plan that is not abandoned is made"))
    }

    /// [`Session::plan_with`], but `None` where the control abandons on a stop
    /// (`Control::abandon_on_stop`: a user's cancel) and the stop comes before a layout is made.
    pub fn plan_unless_cancelled(
        &self,
        scenario: &Scenario,
        control: &mut Control<'_>,
    ) -> Result<Option<Outcome>, EngineError> {
        let budget = self.budget(scenario)?;
        let bound = self.derive_with(scenario, control)?;
        let (graph, liveness) = match &bound {
            Some(b) => (&*b.graph, &b.liveness),
            None => (&*self.graph, &self.liveness),
        };
        // The problem holds no names: a buffer over the cap is named again where its tensor's
        // id is known, and the checker's findings (there are none unless a planner is wrong)
        // are made again from the named problem. Only a failed or faulted plan pays for it.
        let planned = plan_unless_cancelled(&liveness.problem, &self.options(scenario), control);
        let planned = planned.map_err(|e| match e {
            PlanError::OverCap { cap, .. } => self
                .check_cap(graph, liveness, cap)
                .err()
                .unwrap_or_else(|| self.plan_error(e)),
            e => self.plan_error(e),
        });
        let Some(mut plan) = planned? else {
            return Ok(None);
        };
        if !plan.violations.is_empty() {
            plan.violations = plan.check(&liveness.named(graph));
        }
        if let Some(r) = bound.as_ref().and_then(|b| b.reordering.as_ref()) {
            plan.violations.extend(r.violations.iter().cloned());
            // `best` is chosen for the dump without flips; with them it can lose to the given
            // order, and then it is the given order (no step moved), never a larger plan.
            let given: u64 = r.given_footprint_bytes.iter().sum();
            if r.order == Order::Best && plan.footprint_bytes() > given {
                let kept = Scenario {
                    order: Order::Given,
                    ..scenario.clone()
                };
                let Some(mut outcome) = self.plan_unless_cancelled(&kept, control)? else {
                    return Ok(None);
                };
                let unmoved = Reordering {
                    steps: (0..self.graph.step_count()).collect(),
                    moved: vec![false; self.graph.step_count()],
                    violations: Vec::new(),
                    ..Reordering::clone(r)
                };
                if let Some(b) = outcome.bound.as_mut() {
                    b.reordering = Some(Arc::new(unmoved));
                }
                outcome.scenario = scenario.clone();
                return Ok(Some(outcome));
            }
        }
        Ok(Some(Outcome {
            scenario: scenario.clone(),
            plan: Arc::new(plan),
            bound: bound.map(Box::new),
            budget,
        }))
    }

    /// The budget of the scenario's device, if it names one.
    fn budget(&self, scenario: &Scenario) -> Result<Option<Budget>, EngineError> {
        scenario
            .device_class
            .as_ref()
            .map(|d| {
                d.terms.budget(d.util).map_err(|error| EngineError::Budget {
                    input: self.source.clone(),
                    class: d.class.clone(),
                    error,
                })
            })
            .transpose()
    }

    /// The error for a param the dump does not have, naming the ones it has.
    /// The part of `scenario` this dump knows, and what it leaves out: values of params the dump
    /// does not have, and flips of tensors that are not its remat candidates (under the params
    /// kept). A link or an embed written for another version of a dump then still shows a plan,
    /// and says what it could not apply.
    pub fn known_part(&self, scenario: &Scenario) -> (Scenario, Vec<Unknown>) {
        let mut known = scenario.clone();
        let mut unknown = Vec::new();
        known.params.retain(|name, _| {
            let has = self.graph.params.contains_key(name);
            if !has {
                unknown.push(Unknown::Param {
                    name: name.clone(),
                    known: self.param_names(),
                });
            }
            has
        });
        if known.flips.is_empty() {
            return (known, unknown);
        }
        // Under params that do not bind, the plan itself says why; the flips stay as asked.
        let Ok(bound) = self.bind(&known.params) else {
            return (known, unknown);
        };
        let (graph, resolved, liveness) = match &bound {
            Some(b) => (&b.graph, &b.resolved, &b.liveness),
            None => (&self.graph, &self.resolved, &self.liveness),
        };
        let candidates = candidates(graph, resolved, liveness);
        known
            .flips
            .retain(|id| match flip_index(graph, resolved, &candidates, id) {
                Ok(_) => true,
                Err(reason) => {
                    unknown.push(Unknown::Flip {
                        tensor: id.clone(),
                        reason,
                    });
                    false
                }
            });
        (known, unknown)
    }

    fn unknown_param(&self, param: &str) -> EngineError {
        EngineError::UnknownParam {
            input: self.source.clone(),
            param: param.to_string(),
            known: self.param_names(),
        }
    }

    /// The dump's params, for a message that names them.
    fn param_names(&self) -> String {
        (self.graph.params.keys().cloned())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The dump under `params` (each must be a param of the dump), when they change any value:
    /// resolved and analysed again, since sizes change.
    pub fn bind(&self, params: &BTreeMap<String, u64>) -> Result<Option<Bound>, EngineError> {
        let mut changed = false;
        for (name, &value) in params {
            let Some(&current) = self.graph.params.get(name) else {
                return Err(self.unknown_param(name));
            };
            changed |= current != value;
        }
        // Most plans keep the dump's values: no copy of the graph for them.
        if !changed {
            return Ok(None);
        }
        let mut graph = Graph::clone(&self.graph);
        graph
            .params
            .extend(params.iter().map(|(k, &v)| (k.clone(), v)));
        let binding = params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let resolved = graph.resolve().map_err(|error| EngineError::Binding {
            input: self.source.clone(),
            binding,
            error,
        })?;
        let liveness = analyze(&graph, &resolved);
        liveness
            .validate(&graph)
            .map_err(|error| EngineError::Problem {
                input: self.source.clone(),
                error,
            })?;
        Ok(Some(Bound {
            graph: Arc::new(graph),
            resolved: Arc::new(resolved),
            liveness: Arc::new(liveness),
            reordering: None,
        }))
    }

    /// The dump under `scenario`'s params, its steps in the scenario's order (`None` when
    /// neither changes anything). `control` may stop `order: best` early and hears its progress.
    pub fn ordered(
        &self,
        scenario: &Scenario,
        control: &mut Control<'_>,
    ) -> Result<Option<Bound>, EngineError> {
        let bound = self.bind(&scenario.params)?;
        if scenario.order.is_given() {
            return Ok(bound);
        }
        let (graph, resolved, liveness) = match &bound {
            Some(b) => (&b.graph, &b.resolved, &b.liveness),
            None => (&self.graph, &self.resolved, &self.liveness),
        };
        // Orders are ranked by the plans of the scenario's strategy; under `search`, by `best`'s
        // (an exact search per order would multiply the wait): the chosen order, and the given
        // one it is measured against, are then searched.
        let own = self.options(scenario);
        let mut options = own.clone();
        if options.strategy == StrategyChoice::One(memplan_core::Strategy::Search) {
            options.strategy = StrategyChoice::Best;
            options.search_capacity = None;
        }
        let plan_error = |e| self.plan_error(e);
        let (units, given_plan, tried, partial) = match scenario.order {
            Order::Best => {
                let work = scenario.order_work.unwrap_or(order::DEFAULT_ORDER_WORK);
                let mut search =
                    order::best(graph, resolved, &options, work, control).map_err(plan_error)?;
                let tried = (search.tried.iter())
                    .map(|p| (p.order, p.improved, p.plan.footprint_bytes()))
                    .collect();
                let units = std::mem::take(&mut search.tried[search.best].units);
                let given = search.tried.swap_remove(0).plan;
                (units, given, tried, search.partial)
            }
            heuristic => {
                let deps = order::dependencies(graph, resolved);
                let takes = order::Takes::of(resolved);
                let units = order::heuristic(heuristic, &deps, &takes);
                let given = plan_with(&liveness.problem, &options, &mut Control::default())
                    .map_err(plan_error)?;
                (units, given, Vec::new(), false)
            }
        };
        let given_plan = if options == own {
            given_plan
        } else {
            plan_with(&liveness.problem, &own, &mut Control::default()).map_err(plan_error)?
        };
        let steps = order::steps_in(resolved, &units);
        let violations = check_order(graph, resolved, &steps);
        let (graph, resolved) = (graph.reordered(&steps), resolved.reordered(&steps));
        let liveness = analyze(&graph, &resolved);
        let moved = order::moved(&steps);
        Ok(Some(Bound {
            graph: Arc::new(graph),
            resolved: Arc::new(resolved),
            liveness: Arc::new(liveness),
            reordering: Some(Arc::new(Reordering {
                order: scenario.order,
                steps,
                moved,
                violations,
                given_footprint_bytes: given_plan
                    .devices
                    .iter()
                    .map(|d| d.footprint_bytes)
                    .collect(),
                given_usage: given_plan
                    .devices
                    .into_iter()
                    .map(|d| d.usage.curve)
                    .collect(),
                tried,
                partial,
            })),
        }))
    }

    /// The dump as `scenario` plans it: its params bound, its steps in the scenario's order and
    /// its flips inlined (`None` when none changes anything).
    pub fn derive(&self, scenario: &Scenario) -> Result<Option<Bound>, EngineError> {
        self.derive_with(scenario, &mut Control::default())
    }

    /// [`Session::derive`] under `control` (see [`Session::ordered`]).
    pub fn derive_with(
        &self,
        scenario: &Scenario,
        control: &mut Control<'_>,
    ) -> Result<Option<Bound>, EngineError> {
        let bound = self.ordered(scenario, control)?;
        if scenario.flips.is_empty() {
            return Ok(bound);
        }
        let (graph, resolved) = match &bound {
            Some(b) => (&b.graph, &b.resolved),
            None => (&self.graph, &self.resolved),
        };
        let liveness = match &bound {
            Some(b) => &b.liveness,
            None => &self.liveness,
        };
        let candidates = candidates(graph, resolved, liveness);
        let mut flags = vec![false; resolved.tensors.len()];
        for id in &scenario.flips {
            let t = flip_index(graph, resolved, &candidates, id).map_err(|reason| {
                EngineError::NotACandidate {
                    input: self.source.clone(),
                    tensor: id.clone(),
                    reason,
                }
            })?;
            flags[t] = true;
        }
        let liveness = analyze_flipped_with(graph, resolved, &flags, liveness.shared_uses());
        let (graph, resolved) = (Arc::clone(graph), Arc::clone(resolved));
        // Reordered, the given order is measured with the same flips: the figure beside the
        // plan is what the order alone changes.
        let reordering = match bound.as_ref().and_then(|b| b.reordering.as_ref()) {
            None => None,
            Some(r) => {
                let base = self.bind(&scenario.params)?;
                let (g, rg) = match &base {
                    Some(b) => (&*b.graph, &*b.resolved),
                    None => (&*self.graph, &*self.resolved),
                };
                let problem = problem_flipped(g, rg, &flags);
                let given = plan_with(&problem, &self.options(scenario), &mut Control::default())
                    .map_err(|e| self.plan_error(e))?;
                Some(Arc::new(Reordering {
                    given_footprint_bytes: (given.devices.iter())
                        .map(|d| d.footprint_bytes)
                        .collect(),
                    given_usage: given.devices.into_iter().map(|d| d.usage.curve).collect(),
                    ..Reordering::clone(r)
                }))
            }
        };
        Ok(Some(Bound {
            graph,
            resolved,
            liveness: Arc::new(liveness),
            reordering,
        }))
    }

    /// What the reader should know about the dump planned under `scenario`: what the import
    /// could not carry over exactly, and for an ONNX model each symbolic dim the scenario leaves
    /// at the importer's guess of 1 (binding it answers the warning, so it goes).
    pub fn warnings_for(&self, scenario: &Scenario) -> Vec<String> {
        let guessed = (self.format == Format::Onnx)
            .then(|| self.graph.params.keys())
            .into_iter()
            .flatten()
            .filter(|p| !scenario.params.contains_key(*p))
            .map(|p| {
                format!("the symbolic dim `{p}` is 1 unless bound (`--set {p}=N`, or a fixed input shape)")
            });
        self.warnings.iter().cloned().chain(guessed).collect()
    }

    /// The remat candidates of the dump (under the scenario's params), with their costs.
    pub fn candidates(&self, scenario: &Scenario) -> Result<Vec<Candidate>, EngineError> {
        // The params alone: an order moves steps, not what each tensor costs to recompute.
        Ok(match self.bind(&scenario.params)? {
            Some(b) => candidates(&b.graph, &b.resolved, &b.liveness),
            None => candidates(&self.graph, &self.resolved, &self.liveness),
        })
    }

    /// The remat candidates of an outcome's graph, as the page lists them: each with its
    /// tensor's id and bytes, and whether the outcome recomputes it.
    pub fn candidate_rows(&self, outcome: &Outcome) -> Vec<CandidateRow> {
        let (graph, resolved, liveness) = self.parts(outcome);
        candidates(graph, resolved, liveness)
            .into_iter()
            .map(|c| {
                let tensor = graph.tensors[c.tensor].id.to_string();
                CandidateRow {
                    flipped: CandidateRow::is_flipped(&tensor, &outcome.scenario),
                    tensor,
                    bytes: resolved.tensors[c.tensor].bytes,
                    recompute_cost: c.recompute_cost,
                }
            })
            .collect()
    }

    /// Runs `f` with a rematerializer for the scenario (its params and plan options; its own
    /// flips are where the search starts from: none).
    fn with_remat<T>(
        &self,
        scenario: &Scenario,
        f: impl FnOnce(&Rematerializer<'_>) -> Result<T, memplan_core::PlanError>,
    ) -> Result<T, EngineError> {
        let mut scores = Scores::default();
        self.with_remat_scores(scenario, &mut scores, f)
    }

    /// [`Session::with_remat`], starting from `scores` and leaving there what it laid out.
    fn with_remat_scores<T>(
        &self,
        scenario: &Scenario,
        scores: &mut Scores,
        f: impl FnOnce(&Rematerializer<'_>) -> Result<T, memplan_core::PlanError>,
    ) -> Result<T, EngineError> {
        let base = self.ordered(scenario, &mut Control::default())?;
        self.with_remat_on(scenario, base.as_ref(), scores, f)
    }

    /// [`Session::with_remat_scores`] on `base`, the dump as [`Session::ordered`] gave it for
    /// the scenario (`None`: the session's own), so a caller that fits many times orders once.
    fn with_remat_on<T>(
        &self,
        scenario: &Scenario,
        base: Option<&Bound>,
        scores: &mut Scores,
        f: impl FnOnce(&Rematerializer<'_>) -> Result<T, memplan_core::PlanError>,
    ) -> Result<T, EngineError> {
        let (graph, resolved, liveness) = match base {
            Some(b) => (&b.graph, &b.resolved, &b.liveness),
            None => (&self.graph, &self.resolved, &self.liveness),
        };
        let options = self.options(scenario);
        let remat = Rematerializer::with_scores(
            graph,
            resolved,
            &options,
            candidates(graph, resolved, liveness),
            std::mem::take(scores),
        );
        let result = f(&remat);
        *scores = remat.into_scores();
        result.map_err(|e| self.plan_error(e))
    }

    /// The seed's two-round fit of the dump to `target` (see `memplan_core::remat`).
    pub fn fit(
        &self,
        scenario: &Scenario,
        target: Target,
        max_candidates: Option<usize>,
    ) -> Result<FitResult, EngineError> {
        self.with_remat(scenario, |r| r.fit(target, max_candidates))
    }

    /// `fit` at `points` targets from the minimized footprint up to the baseline, with the
    /// exhaustive optimum at each when the candidates are few enough (at most
    /// `exhaustive_most`, and at most [`EXHAUSTIVE_WORK`] buffer relayouts in all).
    pub fn sweep(
        &self,
        scenario: &Scenario,
        points: usize,
        exhaustive_most: usize,
    ) -> Result<Sweep, EngineError> {
        let mut job = SweepJob::new(scenario.clone(), points, exhaustive_most);
        loop {
            if let Some(sweep) = self.sweep_step(&mut job)? {
                return Ok(sweep);
            }
        }
    }

    /// One step of a sweep job: the scenario's order (when it is not the given one), the
    /// exhaustive optimum (when affordable), then the minimize fit, then one budget per step;
    /// under another order than the given one, then the same sweep under the given order.
    /// `Some` with the sweep once the last budget is fitted.
    pub fn sweep_step(&self, job: &mut SweepJob) -> Result<Option<Sweep>, EngineError> {
        if job.points > MAX_SWEEP_POINTS {
            return Err(EngineError::TooManyPoints {
                points: job.points,
                most: MAX_SWEEP_POINTS,
            });
        }
        if let Some(done) = &mut job.done {
            let Some(given) = job.given.as_mut() else {
                return Ok(job.done.take());
            };
            if let Some(g) = self.sweep_step(given)? {
                done.given_order = Some(g.points);
                return Ok(job.done.take());
            }
            return Ok(None);
        }
        let Some(base) = &job.base else {
            job.base = Some(self.ordered(&job.scenario, &mut Control::default())?);
            return Ok(None);
        };
        let buffers = self.problem().buffers.len().max(1) as u64;
        let SweepJob {
            scenario,
            points,
            exhaustive_most,
            scores,
            exhaustive,
            run,
            candidates,
            ..
        } = job;
        let finished = self.with_remat_on(scenario, base.as_ref(), scores, |r| {
            *candidates = r.candidates.len();
            let Some(known) = exhaustive else {
                let n = r.candidates.len();
                let affordable = n <= 40 && (1u64 << n).saturating_mul(buffers) <= EXHAUSTIVE_WORK;
                *exhaustive = Some(if affordable {
                    r.exhaustive(*exhaustive_most)?
                } else {
                    None
                });
                return Ok(None);
            };
            let Some(sweep) = run else {
                *run = Some(r.start_sweep(*points)?);
                return Ok(None);
            };
            if r.sweep_step(sweep, known.as_ref())? {
                return Ok(None);
            }
            Ok(Some(Sweep {
                candidates: r.candidates.len(),
                points: run.take().map(SweepRun::finish).unwrap_or_default(),
                exhaustive: exhaustive.take().flatten(),
                given_order: None,
            }))
        })?;
        match finished {
            Some(sweep) if job.given.is_some() => {
                job.done = Some(sweep);
                Ok(None)
            }
            finished => Ok(finished),
        }
    }

    /// The graph, resolved graph and liveness an outcome was planned from.
    fn parts<'a>(
        &'a self,
        outcome: &'a Outcome,
    ) -> (&'a Arc<Graph>, &'a ResolvedGraph, &'a Arc<Liveness>) {
        match &outcome.bound {
            Some(b) => (&b.graph, &b.resolved, &b.liveness),
            None => (&self.graph, &self.resolved, &self.liveness),
        }
    }

    /// The plan report: what `memplan plan --json` prints and the page exports.
    pub fn report(&self, outcome: &Outcome) -> PlanReport {
        let (graph, _, liveness) = self.parts(outcome);
        let name = buffer_names(graph, liveness);
        PlanReport::with_summary(
            self.summary(outcome),
            &liveness.problem,
            &name,
            &outcome.plan,
        )
    }

    /// The report's summary alone (what the page shows, without a placement per buffer).
    pub fn summary(&self, outcome: &Outcome) -> PlanSummary {
        let (graph, resolved, liveness) = self.parts(outcome);
        let name = buffer_names(graph, liveness);
        let mut summary = PlanSummary::new(&liveness.problem, &name, &outcome.plan);
        summary.size_unknown_tensors = graph.tensors.iter().filter(|t| t.size_unknown).count();
        summary.complete = summary.size_unknown_tensors == 0;
        summary.given_plan = self.given_plan_report(outcome.scenario.precision_classes);
        // The devices whose reservations the trace counts (an empty series is unknown, not
        // zero: a profiler trace's CPU); none, and the reserved total is unknown.
        summary.reserved_bytes = (self.recorded.as_ref())
            .filter(|r| r.devices.iter().any(|d| !d.reserved.is_empty()))
            .map(|r| r.devices.iter().map(|d| d.reserved_peak()).sum());
        if let (Some(budget), Some(device)) = (outcome.budget, &outcome.scenario.device_class) {
            summary.set_budget(BudgetReport::new(&device.class, budget));
        }
        if graph.tensors.iter().any(|t| !t.stack.is_empty()) {
            let problem = &liveness.problem;
            for (report, d) in summary.devices.iter_mut().zip(&outcome.plan.devices) {
                let live = &d.usage.live_at_peak;
                let entries = live.iter().map(|&b| {
                    let stack = &graph.tensors[liveness.buffer_tensor[b] as usize].stack;
                    (&stack[..], problem.buffers[b].occupied_size(), b)
                });
                let peak = d.usage.lower_bound.max(1) as f64;
                let sites = group_by_site(entries)
                    .into_iter()
                    .map(|g| SiteReport {
                        site: g.site,
                        bytes: g.bytes,
                        count: g.tensors.len(),
                        share: g.bytes as f64 / peak,
                        tensors: (g.tensors.iter()).map(|&b| name(b)).collect(),
                    })
                    .collect();
                report.live_at_peak_by_site = Some(sites);
            }
        }
        if !outcome.scenario.flips.is_empty() {
            let costs = candidates(graph, resolved, liveness);
            summary.flips = outcome.scenario.flips.clone();
            summary.recompute_cost = liveness
                .flipped
                .iter()
                .filter_map(|t| costs.iter().find(|c| c.tensor == *t))
                .map(|c| c.recompute_cost)
                .sum();
        }
        if let Some(r) = outcome.bound.as_ref().and_then(|b| b.reordering.as_ref()) {
            summary.order = Some(OrderReport {
                order: r.order.name().to_string(),
                steps: graph.schedule().map(|s| s.id.to_string()).collect(),
                moved_steps: r.moved.iter().filter(|&&m| m).count(),
                given_footprint_bytes: r.given_footprint_bytes.iter().sum(),
                tried: (r.tried.iter())
                    .map(|&(order, improved, footprint_bytes)| OrderTried {
                        order: order.name().to_string(),
                        improved,
                        footprint_bytes,
                    })
                    .collect(),
                partial: r.partial,
            });
        }
        summary
    }

    /// The plan as the views show it.
    pub fn view_model(&self, outcome: &Outcome) -> ViewModel {
        ViewModel::labelled(&self.planned_buffers(outcome, Arc::new(self.labels(outcome))))
    }

    /// What the views show of the dump under `outcome`'s params that no plan changes: the
    /// same for every outcome under those params, whatever its flips and strategy.
    pub fn labels(&self, outcome: &Outcome) -> Labels {
        let (graph, resolved, _) = self.parts(outcome);
        let mut labels = Labels::new(graph.clone(), resolved);
        if let Some(recorded) = &self.recorded {
            labels = labels.with_recorded(resolved, recorded);
        }
        // The dumps that come with a plan have pinned steps and nothing to flip: the plan holds
        // for every outcome.
        if let Some(given) = &self.given_plan {
            labels = labels.with_given_plan(&given.planner, &given.offsets);
        }
        labels
    }

    /// The buffers of `outcome`'s plan as the views show them, with `labels`:
    /// [`Session::labels`] of an outcome under the same params.
    pub fn planned_buffers(&self, outcome: &Outcome, labels: Arc<Labels>) -> PlannedBuffers {
        let liveness = self.parts(outcome).2.clone();
        PlannedBuffers::new(labels, liveness, outcome.plan.clone())
    }

    /// The memory spaces of the dump (under the scenario's params).
    pub fn spaces(&self, scenario: &Scenario) -> Result<Spaces, EngineError> {
        // The params alone: flips change liveness, not where a slot lives.
        Ok(match self.bind(&scenario.params)? {
            Some(b) => classify(&b.graph, &b.resolved),
            None => classify(&self.graph, &self.resolved),
        })
    }

    /// The largest value of `param` in `lo..=hi` (`hi` `None`: no top) whose plan fits the
    /// scenario's device on every device of the dump, by bisection over the planner's footprint
    /// (with no top, after doubling from `lo` until a value does not fit); checked: it fits, and
    /// the next value does not (or it is `hi`). A value whose sizes overflow does not fit.
    pub fn largest_fitting(
        &self,
        scenario: &Scenario,
        param: &str,
        lo: u64,
        hi: Option<u64>,
    ) -> Result<Fits, EngineError> {
        let fits = self.largest_fitting_unless(scenario, param, lo, hi, &|| false)?;
        Ok(fits.expect("only a stop leaves a bisection without its answer"))
    }

    /// The plan of `scenario`, asking `stopped` while it plans and after: `Ended::Stopped` once
    /// it says so, as a plan cut short is not the scenario's.
    pub(crate) fn plan_unless(
        &self,
        scenario: &Scenario,
        stopped: &dyn Fn() -> bool,
    ) -> Result<Outcome, Ended> {
        let mut stop = || stopped();
        let mut control = Control {
            should_stop: Some(&mut stop),
            ..Control::default()
        };
        let planned = self.plan_with(scenario, &mut control);
        if stopped() {
            return Err(Ended::Stopped);
        }
        Ok(planned?)
    }

    /// [`Session::largest_fitting`], asking `stopped` during and after each plan it makes: `None` once it
    /// says so (a caller's cancel), with no answer, as one plan short of the bisection's end
    /// says nothing of the largest.
    pub fn largest_fitting_unless(
        &self,
        scenario: &Scenario,
        param: &str,
        lo: u64,
        hi: Option<u64>,
        stopped: &dyn Fn() -> bool,
    ) -> Result<Option<Fits>, EngineError> {
        Ended::unless_stopped(self.bisect(scenario, (param, lo, hi), stopped))
    }

    /// The bisection of [`Session::largest_fitting_unless`] over `param` in `lo..=hi`, each
    /// plan made under `stopped`.
    fn bisect(
        &self,
        scenario: &Scenario,
        (param, lo, hi): (&str, u64, Option<u64>),
        stopped: &dyn Fn() -> bool,
    ) -> Result<Fits, Ended> {
        let budget = self
            .budget(scenario)?
            .ok_or_else(|| EngineError::NoDevice {
                input: self.source.clone(),
            })?;
        if !self.graph.params.contains_key(param) {
            return Err(self.unknown_param(param).into());
        }
        // The footprint at `value` (the largest device's), or `None` when sizes overflow.
        let footprint = |value: u64| -> Result<Option<u64>, Ended> {
            let mut s = scenario.clone();
            s.params.insert(param.to_string(), value);
            s.device_class = None;
            match self.plan_unless(&s, stopped) {
                Ok(o) => Ok(Some(
                    o.plan
                        .devices
                        .iter()
                        .map(|d| d.footprint_bytes)
                        .max()
                        .unwrap_or(0),
                )),
                Err(Ended::Failed(
                    EngineError::Binding {
                        error: GraphError::SizeOverflow { .. },
                        ..
                    }
                    | EngineError::Problem {
                        error:
                            ProblemError::TotalOverflow { .. }
                            | ProblemError::BufferTooLarge { .. }
                            | ProblemError::SizeOverflow { .. },
                        ..
                    },
                )) => Ok(None),
                Err(ended) => Err(ended),
            }
        };
        let fits = |f: Option<u64>| f.is_some_and(|f| f <= budget.usable_bytes);
        let answer = match hi {
            Some(hi) => largest_fitting(lo, hi, &mut |v| footprint(v).map(fits))?,
            None => largest_fitting_from(lo, &mut |v| footprint(v).map(fits))?,
        };
        let hi = hi.unwrap_or(u64::MAX);
        let (footprint_at_largest, footprint_at_next) = match answer.largest {
            None => (None, if lo <= hi { footprint(lo)? } else { None }),
            Some(x) => {
                let at = footprint(x)?;
                let next = if x < hi { footprint(x + 1)? } else { None };
                if !fits(at) || (x < hi && fits(next)) {
                    return Err(Ended::Failed(EngineError::NotMonotone {
                        input: self.source.clone(),
                        param: param.to_string(),
                        lower: lo,
                        higher: hi,
                        answer: x,
                    }));
                }
                (at, next)
            }
        };
        Ok(Fits {
            param: param.to_string(),
            largest: answer.largest,
            budget,
            footprint_at_largest,
            footprint_at_next,
            probes: answer.probes + 2,
        })
    }

    /// The buffers as minimalloc CSV, with the plan's offsets when given (each device's pools
    /// laid end to end). minimalloc has one address space, so a dump of several devices is
    /// refused (the same refusal in the CLI and the page).
    pub fn minimalloc_csv(&self, outcome: Option<&Outcome>) -> Result<String, EngineError> {
        let (graph, liveness) = match outcome {
            Some(o) => (self.parts(o).0, self.parts(o).2),
            None => (&self.graph, &self.liveness),
        };
        let problem = &liveness.problem;
        let devices = problem.device_ids.len();
        if devices > 1 {
            return Err(EngineError::MultiDevice {
                input: self.source.clone(),
                devices,
            });
        }
        let offsets = outcome.map(|o| o.plan.device_offsets(problem));
        let name = buffer_names(graph, liveness);
        Ok(minimalloc::write(problem, &name, offsets.as_deref()))
    }

    /// The TFLite model `bytes` (the file this session read) with `outcome`'s plan as its offline
    /// plan: each tensor of the arena at its offset (a view at its root's plus its own), the
    /// always-live ones (constants, held state) left to the runtime. The plan must be of the
    /// model's own schedule (the given order; a TFLite model has nothing to flip) and keep its
    /// arena in one pool.
    pub fn tflite_with_plan(
        &self,
        bytes: &[u8],
        outcome: &Outcome,
    ) -> Result<Vec<u8>, EngineError> {
        let refuse = |reason: &str| EngineError::NotWritable {
            input: self.source.clone(),
            reason: reason.to_string(),
        };
        if self.format != Format::Tflite {
            return Err(refuse("only a TFLite model can be written back as one"));
        }
        if outcome.bound.is_some() {
            return Err(refuse(
                "an offline plan holds for the model's own operator order: plan it in the given order",
            ));
        }
        let problem = self.problem();
        if outcome
            .plan
            .devices
            .iter()
            .any(|d| d.pools.iter().filter(|p| p.role == PoolRole::Arena).count() > 1)
        {
            return Err(refuse(
                "the arena spilled into several pools under the pool cap",
            ));
        }
        let addresses = outcome.plan.device_offsets(problem);
        let mut offsets: Vec<Option<u64>> = vec![None; self.graph.tensors.len()];
        for (b, buffer) in problem.buffers.iter().enumerate() {
            if !buffer.is_always_live() {
                offsets[self.liveness.buffer_tensor[b] as usize] = Some(addresses[b]);
            }
        }
        for (t, r) in self.resolved.tensors.iter().enumerate() {
            if let memplan_core::graph::Storage::View { root } = r.storage {
                let offset = self.resolved.view_offset(t).unwrap_or(0);
                offsets[t] = offsets[root as usize].map(|o| o + offset);
            }
        }
        memplan_formats::tflite::with_offline_plan(bytes, &offsets).map_err(|error| {
            EngineError::Format {
                input: self.source.clone(),
                error,
            }
        })
    }

    /// Checks a plan report against this dump: it must place exactly this dump's buffers (see
    /// [`PlanReport::layout_for`]), and the independent checker must find nothing wrong under
    /// `scenario`'s precision classes and pool cap.
    pub fn check_report(
        &self,
        report: &PlanReport,
        scenario: &Scenario,
    ) -> Result<Checked, FormatError> {
        let Some(order) = &report.summary.order else {
            let named = self.liveness.named(&self.graph);
            let (pools, placements) = report.layout_for(&named)?;
            return Ok(self.check_layout(&named, &pools, &placements, scenario));
        };
        // A reordered plan: its order must keep every dependency of the dump's, and its
        // placements must hold for the liveness of that order.
        let ids: Vec<Id> = self.graph.schedule().map(|s| s.into_owned().id).collect();
        let index: HashMap<&str, usize> = (ids.iter().enumerate())
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        let steps: Vec<usize> = order
            .steps
            .iter()
            .map(|id| index.get(id.as_str()).copied().unwrap_or(usize::MAX))
            .collect();
        let violations = check_order(&self.graph, &self.resolved, &steps);
        if !violations.is_empty() {
            return Ok(Checked {
                buffers: report.placements.len(),
                footprint_bytes: report.summary.footprint_bytes,
                violations,
            });
        }
        let graph = self.graph.reordered(&steps);
        let problem = analyze(&graph, &self.resolved.reordered(&steps)).named(&graph);
        let (pools, placements) = report.layout_for(&problem)?;
        Ok(self.check_layout(&problem, &pools, &placements, scenario))
    }

    /// The plan the file gives itself, if it gives one.
    pub fn given_plan(&self) -> Option<&GivenPlan> {
        self.given_plan.as_ref()
    }

    /// This session with `plan` as the plan the file gives (what a test moves a buffer in).
    pub fn with_given_plan(mut self, plan: Option<GivenPlan>) -> Session {
        self.given_plan = plan;
        self.given_reports = Default::default();
        self
    }

    /// The plan the file gives itself beside memplan's: its bytes, its arena's, and the checker's
    /// verdict, on the dump's own problem.
    pub fn given_plan_report(&self, precision_classes: bool) -> Option<GivenPlanReport> {
        self.given_reports[usize::from(precision_classes)]
            .get_or_init(|| self.make_given_plan_report(precision_classes))
            .clone()
    }

    fn make_given_plan_report(&self, precision_classes: bool) -> Option<GivenPlanReport> {
        let given = self.given_plan.as_ref()?;
        let scenario = Scenario {
            precision_classes,
            ..Scenario::default()
        };
        let checked = self.check_given(&scenario).ok()?;
        let across_classes = (checked.violations.iter())
            .filter(|v| matches!(v, Violation::AcrossClasses { .. }))
            .count();
        let problem = self.problem();
        let mut arena = vec![0u64; problem.device_ids.len()];
        let mut unplaced = 0;
        for (b, &t) in problem.buffers.iter().zip(&self.liveness.buffer_tensor) {
            match given.offsets[t as usize] {
                Some(offset) if !b.is_always_live() => {
                    let end = offset.saturating_add(b.occupied_size());
                    arena[b.device()] = arena[b.device()].max(end);
                }
                Some(_) => {}
                None => unplaced += 1,
            }
        }
        let lower_bound_bytes = memplan_core::lower_bound::device_usage(problem)
            .iter()
            .fold(0u64, |sum, d| sum.saturating_add(d.lower_bound));
        Some(GivenPlanReport {
            planner: given.planner.clone(),
            footprint_bytes: checked.footprint_bytes,
            arena_bytes: arena.iter().fold(0u64, |sum, &a| sum.saturating_add(a)),
            lower_bound_bytes,
            valid: checked.violations.len() == across_classes,
            violations: checked.violations.len() - across_classes,
            across_classes,
            unplaced_buffers: unplaced,
        })
    }

    /// Checks the plan the file gives itself (a minimalloc `offset` column, XLA's offsets, a
    /// TFLite model's offline plan): one arena pool per device, as tall as the highest buffer
    /// end. The buffers it leaves to the runtime (no offset) are set apart after the highest end
    /// of the others, one after another.
    pub fn check_given(&self, scenario: &Scenario) -> Result<Checked, EngineError> {
        let offsets = &self
            .given_plan
            .as_ref()
            .ok_or_else(|| EngineError::NoGivenPlan {
                input: self.source.clone(),
            })?
            .offsets;
        let problem = self.problem();
        let mut pools = vec![
            vec![Pool {
                role: PoolRole::Arena,
                bytes: 0
            }];
            problem.device_ids.len()
        ];
        let given = |b: usize| offsets[self.liveness.buffer_tensor[b] as usize];
        for (b, buffer) in problem.buffers.iter().enumerate() {
            if let Some(offset) = given(b) {
                let pool = &mut pools[buffer.device()][0];
                pool.bytes = pool
                    .bytes
                    .max(offset.saturating_add(buffer.occupied_size()));
            }
        }
        let placements: Vec<Placement> = (problem.buffers.iter().enumerate())
            .map(|(b, buffer)| {
                let offset = given(b).unwrap_or_else(|| {
                    let pool = &mut pools[buffer.device()][0];
                    let at = memplan_core::graph::align_up(pool.bytes, buffer.alignment())
                        .unwrap_or(u64::MAX);
                    pool.bytes = at.saturating_add(buffer.occupied_size());
                    at
                });
                Placement { pool: 0, offset }
            })
            .collect();
        let checked = self.check_layout(self.problem(), &pools, &placements, scenario);
        // The problem holds no names: a plan the checker faults is checked again with them.
        if checked.violations.is_empty() {
            return Ok(checked);
        }
        let named = self.liveness.named(&self.graph);
        Ok(self.check_layout(&named, &pools, &placements, scenario))
    }

    fn check_layout(
        &self,
        problem: &Problem,
        pools: &[Vec<Pool>],
        placements: &[Placement],
        scenario: &Scenario,
    ) -> Checked {
        let pool_refs: Vec<&[Pool]> = pools.iter().map(Vec::as_slice).collect();
        let violations = check(
            problem,
            Layout {
                pools: &pool_refs,
                placements,
            },
            scenario.precision_classes,
            self.pool_cap(scenario),
        );
        let footprint_bytes = pools
            .iter()
            .flatten()
            .fold(0u64, |sum, p| sum.saturating_add(p.bytes));
        Checked {
            buffers: placements.len(),
            footprint_bytes,
            violations,
        }
    }
}

/// What the user calls each buffer of `liveness`, a liveness of `graph`: its tensor's id (the
/// problem holds no names).
fn buffer_names<'a>(graph: &'a Graph, liveness: &'a Liveness) -> impl Fn(usize) -> String + 'a {
    move |b| liveness.buffer_id(graph, b).to_string()
}

/// A checked plan from outside: its size and what the checker found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub buffers: usize,
    /// Every pool of every device (saturating: a tampered report may claim anything).
    pub footprint_bytes: u64,
    pub violations: Vec<Violation>,
}

#[cfg(test)]
mod tests;
