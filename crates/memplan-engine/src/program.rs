//! Programs of several routines (`memplan_core::program`): each routine is a [`Session`] of its
//! own, planned under its own [`Scenario`]; the program plan runs the events over the routines'
//! figures. A routine's *own* plan is its plan with what its context's lineage holds and its
//! constants given no storage (elided), made by the same pipeline: the program adds no planning
//! logic.

use memplan_core::graph::Storage;
use memplan_core::order::Order;
use memplan_core::program::{
    self, DEFAULT_PAGE_BYTES, Program, ProgramPlan, ResolvedProgram, RoutineFigures, RoutinePool,
    Sharing,
};
use memplan_core::{Graph, ResolvedGraph};
use memplan_formats::json::{Parsed, ParsedProgram};
use memplan_formats::report::PlanSummary;
use memplan_formats::{Format, FormatError, hardware};
use serde::{Deserialize, Serialize};

use crate::{EngineError, Outcome, Scenario, Session};

/// A program read and checked, each routine a session ready to plan.
#[derive(Debug, Clone)]
pub struct ProgramSession {
    pub source: String,
    pub name: String,
    /// The program's devices (every routine runs on them) and their pages.
    pub devices: Vec<String>,
    pub page_bytes: Vec<u64>,
    /// Per device: its hardware class, when it names a bundled one.
    pub classes: Vec<Option<hardware::HardwareClass>>,
    pub program: Program,
    pub resolved: ResolvedProgram,
    /// One per routine, contexts in order: the routine's whole node set.
    pub routines: Vec<Session>,
    /// What the reader should know (a device class memplan does not ship).
    pub warnings: Vec<String>,
}

/// A program planned: the program plan and each routine's plan over its whole node set (its
/// model of the peak) and its own plan (the pools its context allocates for it).
#[derive(Debug, Clone)]
pub struct ProgramOutcome {
    pub plan: ProgramPlan,
    pub routines: Vec<Outcome>,
    pub own: Vec<OwnPlan>,
}

/// A routine's own plan: the session of its graph with the skipped tensors and constants
/// elided, and its plan.
#[derive(Debug, Clone)]
pub struct OwnPlan {
    pub session: Session,
    pub outcome: Outcome,
}

/// What [`ProgramSession::plan_with`] keeps of each routine's last plans.
#[derive(Debug, Clone, Default)]
pub struct ProgramCache {
    routines: Vec<Option<CachedRoutine>>,
    /// How many plans it made (a routine's plan, or its own plan): what a re-plan cost.
    pub plans: usize,
}

impl ProgramCache {
    /// Takes `outcome`, routine `r`'s plan under `scenario` made elsewhere (the page's worker
    /// plans the routine shown with progress and cancel): the next plan reuses it.
    pub fn offer(&mut self, r: usize, scenario: &Scenario, outcome: &Outcome) {
        if self.routines.len() <= r {
            self.routines.resize_with(r + 1, || None);
        }
        let own = self.routines[r]
            .take()
            .filter(|c| &c.scenario == scenario && c.outcome == *outcome);
        self.routines[r] = Some(match own {
            Some(cached) => cached,
            None => CachedRoutine {
                scenario: scenario.clone(),
                outcome: outcome.clone(),
                elided: Vec::new(),
                own: None,
            },
        });
    }
}

#[derive(Debug, Clone)]
struct CachedRoutine {
    /// The scenario it was planned under (the part its dump knows).
    scenario: Scenario,
    outcome: Outcome,
    /// The tensors its own plan gave no storage.
    elided: Vec<bool>,
    /// Its own plan, once made.
    own: Option<OwnPlan>,
}

/// What `memplan plan --json` prints for a program, and what the page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramReport {
    pub name: String,
    /// Every plan of every routine passed the checker.
    pub valid: bool,
    /// Every tensor of every routine was sized.
    pub complete: bool,
    pub routines: Vec<RoutineReport>,
    /// Per device that names a bundled hardware class: what it leaves a program at
    /// [`crate::DEFAULT_UTIL`], the line the used memory must stay under.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_classes: Vec<ProgramDeviceClass>,
    /// The program plan: used memory per event, pools, what each event did, each run.
    pub plan: ProgramPlan,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramDeviceClass {
    pub device: String,
    pub class: String,
    pub util: f64,
    pub usable_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutineReport {
    pub routine: String,
    pub context: String,
    /// Tensors read where another routine holds them (ids).
    pub skipped_tensors: Vec<String>,
    pub constant_tensors: Vec<String>,
    /// The plan over its whole node set: the model of the peak.
    pub model: PlanSummary,
    /// The plan of what its context allocates for it.
    pub own: PlanSummary,
}

impl ProgramSession {
    /// Reads a memplan JSON program. A dump of one computation is refused (`Session::load`
    /// plans it).
    pub fn load(bytes: &[u8], source: &str) -> Result<ProgramSession, EngineError> {
        let format_error = |error: FormatError| EngineError::Format {
            input: source.to_string(),
            error,
        };
        let text = std::str::from_utf8(bytes)
            .map_err(|_| format_error(FormatError::NotText(source.to_string())))?;
        let parsed = match memplan_formats::json::parse_dump(text).map_err(format_error)? {
            Parsed::Program(p) => p,
            Parsed::Graph(..) => {
                return Err(format_error(FormatError::NotADump(
                    "it has no `program` field: it is one computation, planned as one".into(),
                )));
            }
        };
        Self::from_parsed(parsed, source)
    }

    fn from_parsed(parsed: ParsedProgram, source: &str) -> Result<ProgramSession, EngineError> {
        let ParsedProgram {
            name,
            devices,
            program,
            resolved,
            graphs,
        } = parsed;
        let mut routines = Vec::with_capacity(graphs.len());
        for ((context, routine), resolved) in program.routines().zip(graphs) {
            let source = format!(
                "{source} (context `{}`, routine `{}`)",
                context.id, routine.id
            );
            routines.push(Session::from_graph(
                routine.graph.clone(),
                resolved,
                Format::MemplanJson,
                &source,
            )?);
        }
        let device_ids = routines
            .first()
            .map(|s| s.resolved.device_ids.clone())
            .unwrap_or_else(|| vec![memplan_core::graph::DEFAULT_DEVICE.to_string()]);
        let mut warnings = Vec::new();
        let classes: Vec<Option<hardware::HardwareClass>> = device_ids
            .iter()
            .map(|id| {
                let class = devices
                    .iter()
                    .find(|d| &d.id == id)
                    .and_then(|d| d.hardware_class.as_deref())?;
                let found = hardware::bundled(class);
                if found.is_none() {
                    warnings.push(format!(
                        "device `{id}`: memplan ships no hardware class `{class}`; its pools are rounded to the default page of {DEFAULT_PAGE_BYTES} bytes"
                    ));
                }
                found
            })
            .collect();
        let page_bytes = classes
            .iter()
            .map(|c| c.as_ref().map_or(DEFAULT_PAGE_BYTES, |c| c.page_bytes))
            .collect();
        Ok(ProgramSession {
            source: source.to_string(),
            name,
            devices: device_ids,
            page_bytes,
            classes,
            program,
            resolved,
            routines,
            warnings,
        })
    }

    /// The routine ids, contexts in order, with their context's.
    pub fn routine_ids(&self) -> Vec<(String, String)> {
        self.program
            .routines()
            .map(|(c, r)| (c.id.clone(), r.id.clone()))
            .collect()
    }

    /// Refuses a scenario that names a param or a flip no routine has: each routine plans the
    /// part of a scenario it knows, so a typo would otherwise be dropped silently.
    pub fn check_scenario(&self, scenario: &Scenario) -> Result<(), EngineError> {
        let unknown = |what: String| EngineError::NotInProgram {
            input: self.source.clone(),
            what,
        };
        for name in scenario.params.keys() {
            if !self
                .routines
                .iter()
                .any(|s| s.graph.params.contains_key(name))
            {
                return Err(unknown(format!("param `{name}`")));
            }
        }
        for flip in &scenario.flips {
            let alone = Scenario {
                flips: vec![flip.clone()],
                params: scenario.params.clone(),
                ..Scenario::default()
            };
            if self
                .routines
                .iter()
                .all(|s| !s.known_part(&alone).1.is_empty())
            {
                return Err(unknown(format!("remat candidate `{flip}`")));
            }
        }
        Ok(())
    }

    /// Plans every routine under `scenario_of(routine index)` and runs the program's events.
    pub fn plan(
        &self,
        scenario_of: &dyn Fn(usize) -> Scenario,
    ) -> Result<ProgramOutcome, EngineError> {
        self.plan_with(scenario_of, &mut ProgramCache::default())
    }

    /// [`ProgramSession::plan`] reusing, from `cache`, each routine's plans under a scenario
    /// it was planned under before (and its own plan, when what its lineage holds is the same):
    /// a change to one routine's scenario plans that routine again, and the rest only where
    /// what they share changed. The same outcome as without the cache.
    pub fn plan_with(
        &self,
        scenario_of: &dyn Fn(usize) -> Scenario,
        cache: &mut ProgramCache,
    ) -> Result<ProgramOutcome, EngineError> {
        cache.routines.resize_with(self.routines.len(), || None);
        let mut outcomes = Vec::with_capacity(self.routines.len());
        let mut known_scenarios = Vec::with_capacity(self.routines.len());
        for (r, session) in self.routines.iter().enumerate() {
            let (known, _) = session.known_part(&scenario_of(r));
            let outcome = match &cache.routines[r] {
                Some(c) if c.scenario == known => c.outcome.clone(),
                _ => {
                    cache.plans += 1;
                    cache.routines[r] = None;
                    session.plan(&known)?
                }
            };
            outcomes.push(outcome);
            known_scenarios.push(known);
        }
        let graphs: Vec<(&Graph, &ResolvedGraph)> = self
            .routines
            .iter()
            .zip(&outcomes)
            .map(|(s, o)| {
                let (graph, resolved, _) = s.parts(o);
                (&**graph, resolved)
            })
            .collect();
        let resolved: Vec<&ResolvedGraph> = graphs.iter().map(|(_, r)| *r).collect();
        let sharing = program::sharing(&self.program, &self.resolved, &resolved).map_err(|e| {
            EngineError::Format {
                input: self.source.clone(),
                error: FormatError::from(e),
            }
        })?;
        let mut own = Vec::with_capacity(self.routines.len());
        let mut figures = Vec::with_capacity(self.routines.len());
        for (r, session) in self.routines.iter().enumerate() {
            let (graph, resolved) = graphs[r];
            let mut elided = graph.clone();
            let mut flags = vec![false; graph.tensors.len()];
            let n = self.devices.len();
            let mut f = RoutineFigures {
                model_bytes: vec![0; n],
                skipped_bytes: vec![0; n],
                constant_bytes: vec![0; n],
                ..RoutineFigures::default()
            };
            for (t, share) in sharing[r].iter().enumerate() {
                let rt = &resolved.tensors[t];
                if rt.storage != Storage::Owned || *share == Sharing::Own {
                    continue;
                }
                elided.tensors[t].elided = true;
                flags[t] = true;
                // `Graph::resolve` checked that every occupied size fits.
                let occupied = rt.occupied_size().unwrap_or(u64::MAX);
                // Sums of a routine's buffers: `Session::load` checked they fit 64 bits.
                let d = rt.device as usize;
                match share {
                    Sharing::HeldBy(_) => {
                        f.skipped_bytes[d] = f.skipped_bytes[d].saturating_add(occupied)
                    }
                    _ => {
                        f.constant_bytes[d] = f.constant_bytes[d].saturating_add(occupied);
                        f.constants
                            .push((d, elided.tensors[t].id.to_string(), occupied));
                    }
                }
            }
            for d in &outcomes[r].plan.devices {
                f.model_bytes[d.device] = d.footprint_bytes;
            }
            let reused = cache.routines[r]
                .as_ref()
                .filter(|c| c.elided == flags)
                .and_then(|c| c.own.clone());
            let own_plan = match reused {
                Some(own_plan) => own_plan,
                None => {
                    cache.plans += 1;
                    let resolved_own = elided.resolve().map_err(|error| EngineError::Format {
                        input: session.source.clone(),
                        error: FormatError::Graph(error),
                    })?;
                    let own_session = Session::from_graph(
                        elided,
                        resolved_own,
                        Format::MemplanJson,
                        &session.source,
                    )?;
                    // `elided` is already under the scenario's params and order; flips of
                    // skipped tensors do not apply.
                    let scenario = Scenario {
                        params: Default::default(),
                        order: Order::Given,
                        order_work: None,
                        ..outcomes[r].scenario.clone()
                    };
                    let (known, _) = own_session.known_part(&scenario);
                    let outcome = own_session.plan(&known)?;
                    OwnPlan {
                        session: own_session,
                        outcome,
                    }
                }
            };
            let own_outcome = &own_plan.outcome;
            for d in &own_outcome.plan.devices {
                for pool in d.pools.iter().filter(|p| p.bytes > 0) {
                    f.pools.push(RoutinePool {
                        device: d.device,
                        role: pool.role,
                        bytes: pool.bytes,
                    });
                }
            }
            cache.routines[r] = Some(CachedRoutine {
                scenario: known_scenarios[r].clone(),
                outcome: outcomes[r].clone(),
                elided: flags,
                own: Some(own_plan.clone()),
            });
            own.push(own_plan);
            figures.push(f);
        }
        let plan = program::simulate(
            &self.program,
            &self.resolved,
            &self.devices,
            &self.page_bytes,
            &figures,
        )
        .map_err(|e| EngineError::ProgramOverflow {
            input: self.source.clone(),
            device: e.device,
        })?;
        Ok(ProgramOutcome {
            plan,
            routines: outcomes,
            own,
        })
    }

    /// The report of a planned program.
    pub fn report(&self, outcome: &ProgramOutcome) -> ProgramReport {
        let mut routines = Vec::with_capacity(self.routines.len());
        for (r, ((context, routine), session)) in
            self.program.routines().zip(&self.routines).enumerate()
        {
            let model = session.summary(&outcome.routines[r]);
            let own_plan = &outcome.own[r];
            let own = own_plan.session.summary(&own_plan.outcome);
            let (graph, resolved, _) = session.parts(&outcome.routines[r]);
            let mut skipped_tensors = Vec::new();
            let mut constant_tensors = Vec::new();
            for (t, tensor) in graph.tensors.iter().enumerate() {
                if resolved.tensors[t].storage != Storage::Owned {
                    continue;
                }
                if own_plan.session.graph.tensors[t].elided && !tensor.elided {
                    if tensor.kind == memplan_core::graph::TensorKind::Constant {
                        constant_tensors.push(tensor.id.to_string());
                    } else {
                        skipped_tensors.push(tensor.id.to_string());
                    }
                }
            }
            routines.push(RoutineReport {
                routine: routine.id.clone(),
                context: context.id.clone(),
                skipped_tensors,
                constant_tensors,
                model,
                own,
            });
        }
        let device_classes = self
            .devices
            .iter()
            .zip(&self.classes)
            .filter_map(|(device, class)| {
                let class = class.as_ref()?;
                let budget = class.memory.budget(crate::DEFAULT_UTIL).ok()?;
                Some(ProgramDeviceClass {
                    device: device.clone(),
                    class: class.class.clone(),
                    util: crate::DEFAULT_UTIL,
                    usable_bytes: budget.usable_bytes,
                })
            })
            .collect();
        ProgramReport {
            name: self.name.clone(),
            device_classes,
            valid: routines.iter().all(|r| r.model.valid && r.own.valid),
            complete: routines.iter().all(|r| r.model.complete && r.own.complete),
            routines,
            plan: outcome.plan.clone(),
        }
    }
}

impl Session {
    /// A session of a graph already read and resolved (a program's routine).
    pub fn from_graph(
        graph: Graph,
        resolved: ResolvedGraph,
        format: Format,
        source: &str,
    ) -> Result<Session, EngineError> {
        Session::loaded(
            Ok(memplan_formats::Loaded::plain(format, graph, resolved)),
            source,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_core::program::{EventOutcome, ReleaseResult, RunComparison};

    const SERVING: &str = include_str!("../../../static/examples/serving-program.json");
    const SEARCH: &str = include_str!("../../../static/examples/schedule-search-program.json");

    /// A parent holding `w` (and a constant `c`), a child reading both, with an arena of two
    /// intermediates and an output, and `events` run on them.
    fn tiny(class: &str, child_w_bytes: u64, events: &str) -> String {
        format!(
            r#"{{"memplan": 1, "name": "tiny", "devices": [{{"id": "d0"{class}}}],
            "program": {{
              "contexts": [
                {{"id": "base", "routines": [{{"id": "load",
                  "tensors": [{{"id": "w", "bytes": 1000, "kind": "param"}},
                              {{"id": "c", "bytes": 300, "kind": "constant"}}],
                  "steps": [{{"id": "init", "writes": ["w", "c"]}}]}}]}},
                {{"id": "child", "parent": "base", "routines": [{{"id": "step",
                  "tensors": [{{"id": "w", "bytes": {child_w_bytes}, "kind": "param"}},
                              {{"id": "c", "bytes": 300, "kind": "constant"}},
                              {{"id": "x", "bytes": 64, "kind": "input"}},
                              {{"id": "a", "bytes": 5000}}, {{"id": "b", "bytes": 7000}},
                              {{"id": "y", "bytes": 16, "kind": "output"}}],
                  "steps": [{{"id": "s0", "reads": ["x", "w"], "writes": ["a"]}},
                            {{"id": "s1", "reads": ["a", "c"], "writes": ["b"]}},
                            {{"id": "s2", "reads": ["b"], "writes": ["y"]}}]}}]}}
              ],
              "events": [{events}]
            }}}}"#
        )
    }

    const LIFE: &str = r#"{"event": "create", "context": "base"}, {"event": "run", "routine": "load"},
        {"event": "create", "context": "child"}, {"event": "run", "routine": "step"},
        {"event": "release", "context": "child", "fails_after": 1},
        {"event": "release", "context": "child"}, {"event": "release", "context": "child"},
        {"event": "release", "context": "base"}"#;

    fn planned(text: &str) -> (ProgramSession, ProgramReport) {
        let session = ProgramSession::load(text.as_bytes(), "test").unwrap();
        let outcome = session.plan(&|_| Scenario::default()).unwrap();
        let report = session.report(&outcome);
        (session, report)
    }

    fn error(text: &str) -> String {
        ProgramSession::load(text.as_bytes(), "test")
            .unwrap_err()
            .to_string()
    }

    /// `model - skipped - constants in the model + layout difference = own`, and the used
    /// memory is own plus the rest: the terms a run's explanation lists add up.
    fn assert_terms_add_up(run: &RunComparison) {
        let own = i128::from(run.model_bytes)
            - i128::from(run.skipped_bytes)
            - i128::from(run.constants_in_model_bytes)
            + run.layout_difference_bytes;
        assert_eq!(own, i128::from(run.own_bytes), "{run:?}");
        assert_eq!(
            run.own_bytes
                + run.lineage_other_bytes
                + run.constants_bytes
                + run.other_contexts_bytes
                + run.page_rounding_bytes,
            run.used_bytes,
            "{run:?}"
        );
    }

    /// After each event, the used memory is the pools allocated then, page-rounded: each
    /// pool's own record of when it was allocated and freed agrees with the running sum.
    fn assert_used_is_the_pools_allocated(plan: &ProgramPlan) {
        for (e, used) in plan.used_bytes.iter().enumerate() {
            for (d, device) in plan.devices.iter().enumerate() {
                let pools = plan.contexts.iter().flat_map(|c| &c.pools);
                let sum: u64 = pools
                    .chain(&plan.constants)
                    .filter(|p| p.device == device.device && p.allocated_after(e))
                    .map(|p| p.page_rounded_bytes)
                    .sum();
                assert_eq!(sum, used[d], "after event {e}");
            }
        }
    }

    #[test]
    fn a_parents_tensor_is_not_allocated_in_the_child() {
        let (_, report) = planned(&tiny("", 1000, LIFE));
        let step = &report.routines[1];
        assert_eq!(step.skipped_tensors, ["w"]);
        assert_eq!(step.constant_tensors, ["c"]);
        // The model counts w and c; the child's own pools do not.
        assert_eq!(
            step.model.footprint_bytes - step.own.footprint_bytes,
            1000 + 300
        );
        let child = &report.plan.contexts[1];
        let own_static: u64 = child
            .pools
            .iter()
            .filter(|p| p.role == program::ProgramPoolRole::Static)
            .map(|p| p.bytes)
            .sum();
        assert_eq!(own_static, 64 + 16, "x and y only: {child:?}");
        // The parent's routine allocates w; its constant goes to the device's pool.
        assert_eq!(report.routines[0].skipped_tensors, Vec::<String>::new());
        assert_eq!(report.plan.contexts[0].pools[0].bytes, 1000);
        assert_eq!(report.plan.constants.len(), 1);
        assert_eq!(report.plan.constants[0].bytes, 300);
    }

    #[test]
    fn release_frees_the_contexts_own_pools_idempotently_and_a_retry_frees_only_the_rest() {
        let (_, report) = planned(&tiny("", 1000, LIFE));
        let plan = &report.plan;
        assert_used_is_the_pools_allocated(plan);
        let page = |b: u64| b.div_ceil(DEFAULT_PAGE_BYTES) * DEFAULT_PAGE_BYTES;
        let child = &plan.contexts[1];
        assert_eq!(
            child.pools.len(),
            2,
            "an arena and a static pool: {child:?}"
        );
        let used: Vec<u64> = plan.used_bytes.iter().map(|u| u[0]).collect();
        let base = page(1000);
        let constants = page(300);
        assert_eq!(used[0], base + constants);
        assert_eq!(used[2], base + constants + child.page_rounded_bytes);
        // Fails after the first pool: only it is freed, and the context is not released.
        assert_eq!(
            plan.events[4],
            EventOutcome::Release {
                context: "child".into(),
                freed: vec![0],
                result: ReleaseResult::Failed
            }
        );
        assert_eq!(used[4], used[3] - child.pools[0].page_rounded_bytes);
        // The retry frees the rest, and only it.
        assert_eq!(
            plan.events[5],
            EventOutcome::Release {
                context: "child".into(),
                freed: vec![1],
                result: ReleaseResult::Released
            }
        );
        assert_eq!(
            used[5],
            base + constants,
            "the parent's pools and the constants stay"
        );
        // Idempotent: a second release frees nothing.
        assert_eq!(
            plan.events[6],
            EventOutcome::Release {
                context: "child".into(),
                freed: vec![],
                result: ReleaseResult::AlreadyReleased
            }
        );
        assert_eq!(used[6], used[5]);
        // Releasing the parent frees its pool and never the device's constants.
        assert_eq!(used[7], constants);
        assert_eq!(plan.devices[0].used_at_end_bytes, constants);
        assert!(plan.unreleased.is_empty());
    }

    #[test]
    fn pool_bases_are_rounded_to_the_devices_page() {
        let (session, report) = planned(&tiny(r#", "hardware_class": "l4-24gb""#, 1000, LIFE));
        let page = 2 << 20;
        assert_eq!(session.page_bytes, [page]);
        let pools = report.plan.contexts.iter().flat_map(|c| &c.pools);
        for p in pools.chain(&report.plan.constants) {
            assert_eq!(p.page_rounded_bytes, p.bytes.div_ceil(page) * page, "{p:?}");
        }
        // Three pools and the constants' after the child's create, each a page.
        assert_eq!(report.plan.used_bytes[2][0], 4 * page);
        let run = &report.plan.runs[1];
        assert_eq!(run.used_bytes, 4 * page);
        assert_eq!(
            run.page_rounding_bytes,
            4 * page
                - (1000
                    + 300
                    + report.plan.contexts[1]
                        .pools
                        .iter()
                        .map(|p| p.bytes)
                        .sum::<u64>())
        );
        assert_terms_add_up(run);
        // A class memplan does not ship: the default page, and a warning that says so.
        let unknown = ProgramSession::load(
            tiny(r#", "hardware_class": "tpu-v9""#, 1000, LIFE).as_bytes(),
            "test",
        )
        .unwrap();
        assert_eq!(unknown.page_bytes, [DEFAULT_PAGE_BYTES]);
        assert!(
            unknown.warnings[0].contains("tpu-v9"),
            "{:?}",
            unknown.warnings
        );
    }

    #[test]
    fn a_release_left_out_keeps_the_context_to_the_end() {
        let events = r#"{"event": "create", "context": "base"}, {"event": "create", "context": "child"},
            {"event": "run", "routine": "step"}"#;
        let (_, report) = planned(&tiny("", 1000, events));
        let held: Vec<&str> = report
            .plan
            .unreleased
            .iter()
            .map(|u| u.context.as_str())
            .collect();
        assert_eq!(held, ["base", "child"]);
        let end: u64 = report
            .plan
            .unreleased
            .iter()
            .map(|u| u.page_rounded_bytes)
            .sum();
        let constants = report.plan.constants[0].page_rounded_bytes;
        assert_eq!(report.plan.devices[0].used_at_end_bytes, end + constants);
    }

    #[test]
    fn the_bundled_programs_terms_add_up_and_their_shared_tensors_are_skipped() {
        for text in [SERVING, SEARCH] {
            let (session, report) = planned(text);
            assert!(report.valid && report.complete);
            assert!(!report.plan.runs.is_empty());
            for run in &report.plan.runs {
                assert_terms_add_up(run);
            }
            assert_used_is_the_pools_allocated(&report.plan);
            // Every child routine reads its parent's weights without allocating them.
            for (r, routine) in report.routines.iter().enumerate() {
                let context = session.resolved.routines[r].context;
                if session.resolved.parents[context].is_some() {
                    assert!(!routine.skipped_tensors.is_empty(), "{}", routine.routine);
                }
            }
        }
    }

    #[test]
    fn the_schedule_search_shows_what_a_missing_release_costs() {
        let (_, report) = planned(SEARCH);
        let plan = &report.plan;
        let late = plan
            .contexts
            .iter()
            .find(|c| c.context == "candidate2")
            .unwrap();
        // While candidate2 is unreleased, every later candidate's run has it beside.
        let later: Vec<&RunComparison> = plan
            .runs
            .iter()
            .filter(|r| r.other_contexts.contains(&"candidate2".to_string()))
            .collect();
        assert_eq!(later.len(), 3, "candidates 3, 4 and 5");
        for run in later {
            assert_eq!(
                run.other_contexts_bytes,
                late.pools.iter().map(|p| p.bytes).sum::<u64>()
            );
        }
        assert!(plan.devices[0].used_peak_bytes > plan.devices[0].model_peak_bytes);
        assert_eq!(plan.devices[0].used_at_end_bytes, 0);
    }

    /// A chain of `n` contexts, each with a routine of one tensor, each created, run 3 times
    /// and released.
    fn nested(n: usize) -> String {
        let contexts: Vec<String> = (0..n)
            .map(|i| {
                let parent = match i {
                    0 => String::new(),
                    _ => format!(r#", "parent": "c{}""#, i - 1),
                };
                format!(
                    r#"{{"id": "c{i}"{parent}, "routines": [{{"id": "r{i}",
                      "tensors": [{{"id": "t", "bytes": 64}}],
                      "steps": [{{"id": "s", "writes": ["t"]}}]}}]}}"#
                )
            })
            .collect();
        let mut events: Vec<String> = (0..n)
            .map(|i| format!(r#"{{"event": "create", "context": "c{i}"}}"#))
            .collect();
        for _ in 0..3 {
            events.extend((0..n).map(|i| format!(r#"{{"event": "run", "routine": "r{i}"}}"#)));
        }
        events.extend(
            (0..n)
                .rev()
                .map(|i| format!(r#"{{"event": "release", "context": "c{i}"}}"#)),
        );
        format!(
            r#"{{"memplan": 1, "program": {{"contexts": [{}], "events": [{}]}}}}"#,
            contexts.join(", "),
            events.join(", ")
        )
    }

    /// A program of more contexts than [`MAX_CONTEXTS`] is refused in one line (20,000 nested
    /// contexts, a 5 MB file, planned for more than five minutes); one of as many plans, each
    /// run weighing the contexts below it as its lineage's and those above as others'.
    #[test]
    fn a_program_of_more_contexts_than_the_limit_is_refused() {
        use memplan_core::program::MAX_CONTEXTS;
        let e = error(&nested(MAX_CONTEXTS + 1));
        assert_eq!(
            e,
            format!(
                "test: at `program.contexts`: {} contexts: a program may have at most {MAX_CONTEXTS} (each run's plan weighs every live context)",
                MAX_CONTEXTS + 1
            )
        );
        let (_, report) = planned(&nested(MAX_CONTEXTS));
        let runs = &report.plan.runs;
        assert_eq!(runs.len(), 3 * MAX_CONTEXTS);
        let last = MAX_CONTEXTS - 1;
        for (k, run) in runs.iter().take(MAX_CONTEXTS).enumerate() {
            assert_eq!(run.lineage_other_bytes, 64 * k as u64, "{run:?}");
            assert_eq!(run.other_contexts.len(), last - k, "{run:?}");
        }
    }

    #[test]
    fn programs_are_validated_with_errors_that_name_the_context_and_routine() {
        let e = error(&tiny("", 999, LIFE));
        assert_eq!(
            e,
            "test: context `child`, routine `step`: tensor `w` is 999 bytes on `d0`, but routine `load` (context `base`) holds it as 1000 bytes on `d0`"
        );
        let e = error(&tiny("", 1000, r#"{"event": "run", "routine": "load"}"#));
        assert_eq!(
            e,
            "test: event 0: routine `load` runs while its context `base` is not yet created"
        );
        let e = error(&tiny(
            "",
            1000,
            r#"{"event": "create", "context": "base"}, {"event": "create", "context": "child"}, {"event": "release", "context": "base"}"#,
        ));
        assert_eq!(
            e,
            "test: event 2: context `base` is released while its child `child` is live"
        );
        let e = error(&tiny(
            "",
            1000,
            r#"{"event": "create", "context": "child"}"#,
        ));
        assert!(e.contains("while its parent `base` is not live"), "{e}");
        let e = error(&tiny(
            "",
            1000,
            r#"{"event": "create", "context": "base"}, {"event": "create", "context": "base"}"#,
        ));
        assert!(e.ends_with("context `base` is created twice"), "{e}");
        let e = error(&tiny("", 1000, r#"{"event": "run", "routine": "nope"}"#));
        assert!(e.ends_with("there is no routine `nope`"), "{e}");
        let e = error(&tiny("", 1000, r#"{"event": "jump", "routine": "step"}"#));
        assert_eq!(
            e,
            "test: at `program.events[0].event`: unknown variant `jump`, expected one of `create`, `run`, `release`"
        );
        // A routine's graph error names the context and the routine.
        let e = error(&tiny("", 1000, LIFE).replace(r#""reads": ["b"]"#, r#""reads": ["q"]"#));
        assert_eq!(
            e,
            "test: context `child`, routine `step`: step `s2` refers to tensor `q`, which does not exist"
        );
        // Structure errors give the path into the program.
        let e = error(&tiny("", 1000, LIFE).replace(r#""bytes": 5000"#, r#""bytes": -1"#));
        assert!(
            e.starts_with("test: at `program.contexts[1].routines[0].tensors[3].bytes`"),
            "{e}"
        );
        let e = error(&tiny("", 1000, LIFE).replace(r#""name": "tiny","#, r#""tensors": [],"#));
        assert!(e.contains("`tensors` belongs in a routine"), "{e}");
        let e = error(&tiny("", 1000, LIFE).replace(r#""parent": "base""#, r#""parent": "nope""#));
        assert!(
            e.ends_with("context `child`: its parent `nope` is not a context declared before it"),
            "{e}"
        );
    }

    #[test]
    fn a_param_or_flip_no_routine_has_is_refused() {
        let session = ProgramSession::load(SEARCH.as_bytes(), "test").unwrap();
        let with = |params: &[(&str, u64)], flips: &[&str]| Scenario {
            params: params.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
            flips: flips.iter().map(|f| f.to_string()).collect(),
            ..Scenario::default()
        };
        assert_eq!(
            session
                .check_scenario(&with(&[("Q", 3)], &[]))
                .unwrap_err()
                .to_string(),
            "test: no routine of the program has param `Q`"
        );
        assert_eq!(
            session
                .check_scenario(&with(&[], &["nope"]))
                .unwrap_err()
                .to_string(),
            "test: no routine of the program has remat candidate `nope`"
        );
        // `h` is a candidate of the candidates' steps (not of `init`): known somewhere, taken.
        assert!(session.check_scenario(&with(&[], &["h"])).is_ok());
        assert!(session.check_scenario(&Scenario::default()).is_ok());
    }

    #[test]
    fn a_dump_of_one_computation_is_not_a_program_and_a_program_is_not_one_computation() {
        let one = include_str!("../../../static/examples/mlp-training.json");
        assert!(error(one).contains("it has no `program` field"));
        let e = Session::load(SERVING.as_bytes(), "test").unwrap_err();
        assert!(
            matches!(
                e,
                EngineError::Format {
                    error: FormatError::IsProgram,
                    ..
                }
            ),
            "{e}"
        );
    }

    /// The serving program, its `decode_step`'s index, and scenarios with it alone under `bump`.
    fn serving_with_decode_bumped() -> (ProgramSession, usize, impl Fn(usize) -> Scenario) {
        let session = ProgramSession::load(SERVING.as_bytes(), "test").unwrap();
        let decode = session
            .routine_ids()
            .iter()
            .position(|(_, r)| r == "decode_step")
            .unwrap();
        let bump = move |r: usize| Scenario {
            strategy: if r == decode {
                memplan_core::StrategyChoice::One(memplan_core::Strategy::Bump)
            } else {
                memplan_core::StrategyChoice::Best
            },
            ..Scenario::default()
        };
        (session, decode, bump)
    }

    #[test]
    fn a_cached_replan_plans_only_the_routine_that_changed_and_plans_the_same() {
        let (session, _, bump) = serving_with_decode_bumped();
        let n = session.routines.len();
        let mut cache = ProgramCache::default();
        let first = session
            .plan_with(&|_| Scenario::default(), &mut cache)
            .unwrap();
        assert_eq!(cache.plans, 2 * n, "each routine and its own plan");
        assert_eq!(
            session.report(&first),
            session.report(&session.plan(&|_| Scenario::default()).unwrap())
        );
        let bumped = session.plan_with(&bump, &mut cache).unwrap();
        assert_eq!(
            cache.plans,
            2 * n + 2,
            "decode_step and its own plan, nothing else"
        );
        assert_eq!(
            session.report(&bumped),
            session.report(&session.plan(&bump).unwrap())
        );
        let again = session
            .plan_with(&|_| Scenario::default(), &mut cache)
            .unwrap();
        assert_eq!(cache.plans, 2 * n + 4);
        assert_eq!(session.report(&again), session.report(&first));
    }

    #[test]
    fn scenarios_apply_per_routine() {
        let (session, decode, bump) = serving_with_decode_bumped();
        let default = session.plan(&|_| Scenario::default()).unwrap();
        let bumped = session.plan(&bump).unwrap();
        for r in 0..session.routines.len() {
            let same = default.routines[r].plan.devices == bumped.routines[r].plan.devices;
            assert_eq!(same, r != decode, "routine {r}");
        }
        assert!(
            bumped.own[decode].outcome.plan.footprint_bytes()
                > default.own[decode].outcome.plan.footprint_bytes()
        );
    }

    /// A random program as JSON: contexts in a random tree, routines over a few shared ids
    /// (params `w*`, constants `c*`, sized by their id so that sharing is consistent, unless
    /// `odd` resizes one), and events picked from the ones valid at each point (`choices` drive
    /// every pick).
    fn random_program(contexts: usize, choices: &[u32], odd: bool) -> String {
        let mut pick = choices.iter().copied().cycle();
        let mut next = |n: usize| pick.next().unwrap_or(0) as usize % n.max(1);
        let mut parents = Vec::new();
        let mut routines: Vec<(usize, String)> = Vec::new();
        let mut context_json = Vec::new();
        for c in 0..contexts {
            let parent = (c > 0 && next(3) > 0).then(|| next(c));
            parents.push(parent);
            let mut rs = Vec::new();
            for r in 0..next(3) {
                let id = format!("r{c}_{r}");
                let mut tensors = vec![r#"{"id": "x", "bytes": 64, "kind": "input"}"#.to_string()];
                let mut reads = vec!["\"x\"".to_string()];
                for w in 0..next(4) {
                    let bytes = if odd && c == contexts - 1 && w == 0 {
                        1
                    } else {
                        1000 * (w + 1)
                    };
                    tensors.push(format!(
                        r#"{{"id": "w{w}", "bytes": {bytes}, "kind": "param"}}"#
                    ));
                    reads.push(format!("\"w{w}\""));
                }
                for k in 0..next(2) {
                    tensors.push(format!(
                        r#"{{"id": "c{k}", "bytes": {}, "kind": "constant"}}"#,
                        300 + 7 * k
                    ));
                    reads.push(format!("\"c{k}\""));
                }
                let mut steps = Vec::new();
                let mut last = "x".to_string();
                for a in 0..1 + next(4) {
                    let bytes = 256 * (1 + next(64));
                    tensors.push(format!(r#"{{"id": "a{a}", "bytes": {bytes}}}"#));
                    let extra = reads[next(reads.len())].clone();
                    steps.push(format!(
                        r#"{{"id": "s{a}", "reads": ["{last}", {extra}], "writes": ["a{a}"]}}"#
                    ));
                    last = format!("a{a}");
                }
                tensors.push(r#"{"id": "y", "bytes": 16, "kind": "output"}"#.to_string());
                steps.push(format!(
                    r#"{{"id": "out", "reads": ["{last}"], "writes": ["y"]}}"#
                ));
                rs.push(format!(
                    r#"{{"id": "{id}", "tensors": [{}], "steps": [{}]}}"#,
                    tensors.join(", "),
                    steps.join(", ")
                ));
                routines.push((c, id));
            }
            context_json.push(format!(
                r#"{{"id": "k{c}"{}, "routines": [{}]}}"#,
                parent
                    .map(|p| format!(r#", "parent": "k{p}""#))
                    .unwrap_or_default(),
                rs.join(", ")
            ));
        }
        // 0 unborn, 1 live, 2 releasing, 3 released.
        let mut state = vec![0u8; contexts];
        let mut events = Vec::new();
        for _ in 0..4 + next(12) {
            let mut valid = Vec::new();
            for c in 0..contexts {
                let parent_live = parents[c].is_none_or(|p| state[p] == 1);
                let child_live = (0..contexts).any(|k| parents[k] == Some(c) && state[k] == 1);
                if state[c] == 0 && parent_live {
                    valid.push(format!(r#"{{"event": "create", "context": "k{c}"}}"#));
                }
                if state[c] != 0 && !child_live {
                    valid.push(format!(r#"{{"event": "release", "context": "k{c}"}}"#));
                    valid.push(format!(
                        r#"{{"event": "release", "context": "k{c}", "fails_after": {}}}"#,
                        next(3)
                    ));
                }
            }
            for (c, id) in &routines {
                if state[*c] == 1 {
                    valid.push(format!(r#"{{"event": "run", "routine": "{id}"}}"#));
                }
            }
            let Some(event) = valid.get(next(valid.len())).cloned() else {
                break;
            };
            if let Some(c) = event
                .split("\"k")
                .nth(1)
                .and_then(|t| t.split('"').next())
                .and_then(|n| n.parse::<usize>().ok())
            {
                if event.contains("create") {
                    state[c] = 1;
                } else if event.contains("fails_after") {
                    if state[c] != 3 {
                        state[c] = 2;
                    }
                } else {
                    state[c] = 3;
                }
            }
            events.push(event);
        }
        format!(
            r#"{{"memplan": 1, "devices": [{{"id": "d0"{}}}], "program": {{"contexts": [{}], "events": [{}]}}}}"#,
            if next(2) == 0 {
                r#", "hardware_class": "a100-40gb""#
            } else {
                ""
            },
            context_json.join(", "),
            events.join(", ")
        )
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// On random programs: the load refuses (a resized shared tensor) or plans, and a plan's
        /// used memory is its pools allocated, each run's terms add up, the used memory moves
        /// only as its event says, and what is left at the end is the unreleased contexts and
        /// the constants.
        #[test]
        fn random_programs_keep_the_seeds_rules(
            contexts in 1usize..5,
            choices in proptest::collection::vec(proptest::prelude::any::<u32>(), 64),
            odd in proptest::prelude::any::<bool>(),
        ) {
            let text = random_program(contexts, &choices, odd);
            let Ok(session) = ProgramSession::load(text.as_bytes(), "prop") else {
                return Ok(());
            };
            let outcome = session.plan(&|_| Scenario::default()).unwrap();
            let plan = &session.report(&outcome).plan;
            assert_used_is_the_pools_allocated(plan);
            for run in &plan.runs {
                assert_terms_add_up(run);
            }
            for (e, event) in plan.events.iter().enumerate() {
                let before = if e == 0 { 0 } else { plan.used_bytes[e - 1][0] };
                let after = plan.used_bytes[e][0];
                match event {
                    EventOutcome::Create { .. } => assert!(after >= before),
                    EventOutcome::Run { .. } => assert_eq!(after, before),
                    EventOutcome::Release { freed, result, .. } => {
                        assert!(after <= before);
                        if *result == ReleaseResult::AlreadyReleased {
                            assert!(freed.is_empty());
                            assert_eq!(after, before);
                        }
                    }
                }
            }
            let constants: u64 = plan.constants.iter().map(|p| p.page_rounded_bytes).sum();
            let held: u64 = plan.unreleased.iter().map(|u| u.page_rounded_bytes).sum();
            assert_eq!(plan.devices[0].used_at_end_bytes, held + constants);
        }

        /// Whatever a program's text is edited into, loading and planning it never panics.
        #[test]
        fn mutated_programs_never_panic(
            edits in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), 0usize..3, proptest::prelude::any::<char>()), 1..8),
        ) {
            let mut text: Vec<char> = tiny("", 1000, LIFE).chars().collect();
            for (at, kind, c) in edits {
                let i = at.index(text.len().max(1)).min(text.len());
                match kind {
                    0 => { if i < text.len() { text.remove(i); } }
                    1 => text.insert(i, c),
                    _ => { if i < text.len() { text[i] = c; } }
                }
            }
            let text: String = text.into_iter().collect();
            if let Ok(session) = ProgramSession::load(text.as_bytes(), "fuzz") {
                let _ = session.plan(&|_| Scenario::default());
            }
        }
    }
}
