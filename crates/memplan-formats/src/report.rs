//! The plan report: one JSON object with everything a plan says, for scripts, the web app and
//! `memplan check`.
//!
//! Field names are the product's names (`footprint_bytes`, `lower_bound_bytes`, `arena_bytes`,
//! `live_at_peak`, `live`), the same in the CLI, the JSON and the UI. The footprint is what a
//! plan takes; the lower bound is what any plan must take (the most bytes live at once, reached
//! at `peak_position`); their gap is fragmentation. Building a report from a plan computes
//! nothing new: every number comes from `memplan-core`, so the CLI and the web app agree to the
//! byte.

use rustc_hash::FxHashMap as HashMap;

use memplan_core::budget::Budget;
use memplan_core::{CapFallback, Placement, Plan, Pool, PoolRole, Problem};
use serde::{Deserialize, Serialize};

use crate::FormatError;

/// The whole report: the figures, then every placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    #[serde(flatten)]
    pub summary: PlanSummary,
    pub placements: Vec<PlacementReport>,
}

/// The report's figures without the placements: what a summary shows (the web worker sends the
/// page this, with the view model, not the whole report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSummary {
    pub strategy: String,
    pub precision_classes: bool,
    /// The largest pool, bytes; `null`: no cap (64-bit offsets).
    pub pool_cap: Option<u64>,
    /// The footprint summed over devices.
    pub footprint_bytes: u64,
    pub lower_bound_bytes: u64,
    /// The independent checker's verdict.
    pub valid: bool,
    /// Every tensor was sized. `false`: the source could not size `size_unknown_tensors` of them
    /// (an ONNX model whose shape inference stopped); they own no bytes here, so every figure
    /// covers the sized tensors only.
    #[serde(default = "yes")]
    pub complete: bool,
    #[serde(default, skip_serializing_if = "is_zero_count")]
    pub size_unknown_tensors: usize,
    pub violations: Vec<String>,
    pub positions: u32,
    pub devices: Vec<DeviceReport>,
    /// When `search` laid every device out: the devices' proven bounds summed, and whether every
    /// device is proven optimal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proven_lower_bound_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimal: Option<bool>,
    /// The most arena regions a device's proof stacks (with `search`): more than one, and the
    /// proofs hold among the layouts that keep the precision classes apart
    /// ([`memplan_core::ExactStats::arena_regions`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arena_regions: Option<u32>,
    /// Search nodes visited, summed over devices (with `search`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u64>,
    /// How long planning took, set by a caller with a clock (the CLI); the core has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
    /// How soon within `elapsed_ms` the search found the layout it returns (the caller's clock,
    /// from its progress: `memplan_core::FoundAt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_ms: Option<u64>,
    /// The device class every device is, when the plan was asked to fit one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReport>,
    /// What the source's own allocator reserved (a PyTorch snapshot's segments): beside the
    /// footprint a static plan needs and the live peak (the lower bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<u64>,
    /// The flips: tensors recomputed at their uses instead of stored, and what that costs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flips: Vec<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub recompute_cost: u64,
    /// When the steps ran in another order than the dump's: which, and the given order's
    /// footprint beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<OrderReport>,
    /// The plan the dump came with (XLA's buffer assignment, a minimalloc `offset` column),
    /// checked against the dump's own problem (the given order, no flips).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_plan: Option<GivenPlanReport>,
}

/// The plan a dump came with, beside memplan's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GivenPlanReport {
    /// Who made it: `XLA`, `the CSV`.
    pub planner: String,
    /// Its bytes, summed over devices: per device, up to the highest end of any buffer.
    pub footprint_bytes: u64,
    /// Per device, up to the highest end of a buffer that is not always-live, summed.
    pub arena_bytes: u64,
    /// The lower bound of the problem it plans (the given order, without flips).
    pub lower_bound_bytes: u64,
    /// The independent checker's verdict on it, and how many violations it found.
    pub valid: bool,
    pub violations: usize,
    /// Pairs of buffers of different dtypes it puts in the same bytes (at different times),
    /// which precision classes keep apart: counted here, not in `violations`, since its
    /// planner had no such rule. Zero with precision classes off.
    #[serde(default, skip_serializing_if = "is_zero_count")]
    pub across_classes: usize,
    /// Buffers it leaves to the runtime (a TFLite offline plan's `-1`): checked set apart, after
    /// the highest end of the others.
    #[serde(default, skip_serializing_if = "is_zero_count")]
    pub unplaced_buffers: usize,
}

/// A plan of a reordered schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderReport {
    /// `lpmf`, `bfs`, `dfs` or `best`.
    pub order: String,
    /// The steps' ids, in the order they run.
    pub steps: Vec<String>,
    /// How many steps moved (outside a longest run that kept its given order).
    pub moved_steps: usize,
    /// The given order's footprint (summed over devices), under the same options.
    pub given_footprint_bytes: u64,
    /// For `best`: each order it planned, the given one first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tried: Vec<OrderTried>,
    /// For `best`: it stopped (out of work, or asked to) before it tried every start.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

/// One order `best` planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderTried {
    /// The order it started from.
    pub order: String,
    /// Whether moving steps lowered its live peak.
    pub improved: bool,
    pub footprint_bytes: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The tensors live at a device's peak that one allocation site allocated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteReport {
    /// `forward (model.py:54)`: the first frame of the stack in the user's code.
    pub site: String,
    pub bytes: u64,
    pub count: usize,
    /// `bytes` over the device's lower bound (the live peak).
    pub share: f64,
    pub tensors: Vec<String>,
}

/// A device class's bytes under one utilization (see `memplan_core::budget`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetReport {
    pub class: String,
    pub util: f64,
    pub device_bytes: u64,
    pub util_budget_bytes: u64,
    pub driver_bytes: u64,
    pub usable_bytes: u64,
}

impl BudgetReport {
    pub fn new(class: &str, b: Budget) -> Self {
        BudgetReport {
            class: class.to_string(),
            util: b.util,
            device_bytes: b.device_bytes,
            util_budget_bytes: b.util_budget_bytes,
            driver_bytes: b.driver_bytes,
            usable_bytes: b.usable_bytes,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceReport {
    pub device: String,
    /// The strategy that laid this device's arena out (for `best`, the one it picked).
    pub strategy: String,
    pub footprint_bytes: u64,
    pub lower_bound_bytes: u64,
    pub arena_bytes: u64,
    /// The occupied bytes of the always-live buffers (live at every position).
    pub always_live_bytes: u64,
    /// The bytes of the static pools that hold them: `always_live_bytes` plus alignment padding.
    /// The footprint is `arena_bytes + static_bytes`.
    pub static_bytes: u64,
    /// The first position where the live bytes reach the lower bound.
    pub peak_position: Option<u32>,
    /// The tensors live there.
    pub live_at_peak: Vec<String>,
    /// The same tensors grouped by allocation site (for dumps whose tensors carry stacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_at_peak_by_site: Option<Vec<SiteReport>>,
    pub pools: Vec<PoolReport>,
    /// Set when the pool cap forced this arena into bump-packed pools: what it cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_fallback: Option<CapFallbackReport>,
    /// Whether a stop condition ended the search early (the plan is its best so far).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
    /// When `search` laid the arena out: no layout of this device goes below this (of those
    /// that keep its `arena_regions` precision classes apart, where there are more than one),
    /// whether the footprint reaches it (proven optimal), and the search nodes visited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proven_lower_bound_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimal: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arena_regions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u64>,
    /// With a device budget: how far the footprint is under the usable bytes, or over them
    /// (exactly one is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overflow_bytes: Option<u64>,
}

/// The arena a strategy laid out over the cap, and what the bump-packed pools take instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapFallbackReport {
    pub cap: u64,
    pub layout_bytes: u64,
    pub fallback_bytes: u64,
}

impl From<CapFallback> for CapFallbackReport {
    fn from(f: CapFallback) -> Self {
        CapFallbackReport {
            cap: f.cap,
            layout_bytes: f.layout_bytes,
            fallback_bytes: f.fallback_bytes,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolReport {
    pub role: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementReport {
    pub tensor: String,
    pub device: String,
    pub pool: usize,
    pub offset: u64,
    pub size: u64,
    /// `[first, last]` positions; always-live tensors span them all.
    pub live: [u32; 2],
    pub always_live: bool,
}

impl PlanReport {
    /// The report of `plan` of `problem`, its buffers named by `name` (the problem's own names,
    /// [`Problem::buffer_name`], or a graph's tensor ids, `Liveness::buffer_id`).
    pub fn new(problem: &Problem, name: &dyn Fn(usize) -> String, plan: &Plan) -> Self {
        PlanReport::with_summary(PlanSummary::new(problem, name, plan), problem, name, plan)
    }

    /// The report of `plan` with `summary`, its summary (with what the caller adds to it).
    pub fn with_summary(
        summary: PlanSummary,
        problem: &Problem,
        name: &dyn Fn(usize) -> String,
        plan: &Plan,
    ) -> Self {
        PlanReport {
            summary,
            placements: problem
                .buffers
                .iter()
                .zip(&plan.placements)
                .enumerate()
                .map(|(k, (b, p))| {
                    let span = b.span(problem.positions);
                    PlacementReport {
                        tensor: name(k),
                        device: problem.device_ids[b.device()].clone(),
                        pool: p.pool,
                        offset: p.offset,
                        size: b.size,
                        live: [span.first, span.last],
                        always_live: b.is_always_live(),
                    }
                })
                .collect(),
        }
    }
}

fn yes() -> bool {
    true
}

fn is_zero_count(n: &usize) -> bool {
    *n == 0
}

impl PlanSummary {
    /// The summary of `plan` of `problem`, its buffers named by `name` (see [`PlanReport::new`]).
    pub fn new(problem: &Problem, name: &dyn Fn(usize) -> String, plan: &Plan) -> Self {
        let device = |d: usize| problem.device_ids[d].clone();
        PlanSummary {
            strategy: plan.options.strategy.name().to_string(),
            precision_classes: plan.options.precision_classes,
            pool_cap: plan.options.pool_cap,
            footprint_bytes: plan.footprint_bytes(),
            lower_bound_bytes: plan.lower_bound_bytes(),
            valid: plan.is_valid(),
            complete: true,
            size_unknown_tensors: 0,
            violations: plan.violations.iter().map(ToString::to_string).collect(),
            positions: problem.positions,
            devices: plan
                .devices
                .iter()
                .map(|d| DeviceReport {
                    device: device(d.device),
                    strategy: d.strategy.name().to_string(),
                    footprint_bytes: d.footprint_bytes,
                    lower_bound_bytes: d.usage.lower_bound,
                    arena_bytes: d.arena_bytes,
                    always_live_bytes: d.usage.always_live_bytes,
                    static_bytes: d.static_bytes,
                    peak_position: d.usage.peak_position,
                    live_at_peak: d.usage.live_at_peak.iter().map(|&b| name(b)).collect(),
                    live_at_peak_by_site: None,
                    pools: d
                        .pools
                        .iter()
                        .map(|p| PoolReport {
                            role: p.role.name().to_string(),
                            bytes: p.bytes,
                        })
                        .collect(),
                    cap_fallback: d.cap_fallback.map(Into::into),
                    stopped: d.stopped,
                    proven_lower_bound_bytes: d.exact.map(|e| e.proven_lower_bound_bytes),
                    optimal: d.exact.map(|e| e.optimal),
                    arena_regions: d.exact.map(|e| e.arena_regions),
                    nodes: d.exact.map(|e| e.nodes),
                    headroom_bytes: None,
                    overflow_bytes: None,
                })
                .collect(),
            proven_lower_bound_bytes: plan
                .devices
                .iter()
                .map(|d| d.exact.map(|e| e.proven_lower_bound_bytes))
                .sum(),
            optimal: plan
                .devices
                .iter()
                .map(|d| d.exact.map(|e| e.optimal))
                .collect::<Option<Vec<bool>>>()
                .map(|all| all.iter().all(|&o| o)),
            arena_regions: plan.arena_regions(),
            nodes: plan.devices.iter().map(|d| d.exact.map(|e| e.nodes)).sum(),
            elapsed_ms: None,
            found_ms: None,
            budget: None,
            reserved_bytes: None,
            given_plan: None,
            flips: Vec::new(),
            recompute_cost: 0,
            order: None,
        }
    }

    /// Adds a device budget: each device's headroom under its usable bytes, or overflow.
    pub fn set_budget(&mut self, budget: BudgetReport) {
        for d in &mut self.devices {
            match budget.usable_bytes.checked_sub(d.footprint_bytes) {
                Some(headroom) => d.headroom_bytes = Some(headroom),
                None => d.overflow_bytes = Some(d.footprint_bytes - budget.usable_bytes),
            }
        }
        self.budget = Some(budget);
    }
}

impl PlanReport {
    /// Parses a report (the output of `memplan plan --json`).
    pub fn parse(text: &str) -> Result<Self, FormatError> {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let inner = e.inner();
            if inner.is_syntax() || inner.is_eof() {
                FormatError::JsonSyntax {
                    line: inner.line(),
                    column: inner.column(),
                    message: inner.to_string(),
                }
            } else {
                FormatError::structure(&e.path().to_string(), &inner.to_string())
            }
        })
    }

    /// The pools (per device of `problem`) and placements (per buffer, named as
    /// [`Problem::buffer_name`] names it) this report gives, for the checker. The report must
    /// describe this problem: each tensor placed once, none unknown,
    /// each on its own device with its own size and live interval; anything else is an error
    /// naming the placement, so a tampered report cannot pass by leaving a buffer out or by
    /// moving it where the checker would not look.
    pub fn layout_for(
        &self,
        problem: &Problem,
    ) -> Result<(Vec<Vec<Pool>>, Vec<Placement>), FormatError> {
        let structure = |path: String, message: String| FormatError::structure(&path, &message);
        let mut pools = vec![Vec::new(); problem.device_ids.len()];
        let mut seen_device = vec![false; problem.device_ids.len()];
        for (k, d) in self.summary.devices.iter().enumerate() {
            let Some(index) = problem.device_ids.iter().position(|id| *id == d.device) else {
                return Err(structure(
                    format!("devices[{k}].device"),
                    format!("no device `{}` in the dump", d.device),
                ));
            };
            if std::mem::replace(&mut seen_device[index], true) {
                return Err(structure(
                    format!("devices[{k}].device"),
                    format!("device `{}` is given twice", d.device),
                ));
            }
            pools[index] = d
                .pools
                .iter()
                .enumerate()
                .map(|(j, p)| {
                    let role = match p.role.as_str() {
                        "arena" => PoolRole::Arena,
                        "static" => PoolRole::Static,
                        other => {
                            return Err(structure(
                                format!("devices[{k}].pools[{j}].role"),
                                format!("unknown role `{other}`"),
                            ));
                        }
                    };
                    Ok(Pool {
                        role,
                        bytes: p.bytes,
                    })
                })
                .collect::<Result<_, _>>()?;
            let pools_sum = (pools[index].iter()).try_fold(0u64, |sum, p| sum.checked_add(p.bytes));
            if pools_sum != Some(d.footprint_bytes) {
                return Err(structure(
                    format!("devices[{k}].footprint_bytes"),
                    format!(
                        "device `{}` claims {} bytes, but its pools add up to {}",
                        d.device,
                        d.footprint_bytes,
                        pools_sum.map_or("more than 2^64".into(), |b| b.to_string())
                    ),
                ));
            }
        }
        let devices_sum = (self.summary.devices.iter())
            .try_fold(0u64, |sum, d| sum.checked_add(d.footprint_bytes));
        if devices_sum != Some(self.summary.footprint_bytes) {
            return Err(structure(
                "footprint_bytes".into(),
                format!(
                    "the report claims {} bytes, but its devices add up to {}",
                    self.summary.footprint_bytes,
                    devices_sum.map_or("more than 2^64".into(), |b| b.to_string())
                ),
            ));
        }
        let buffer_of: HashMap<String, usize> = (0..problem.buffers.len())
            .map(|b| (problem.buffer_name(b), b))
            .collect();
        let mut placements: Vec<Option<Placement>> = vec![None; problem.buffers.len()];
        for (k, p) in self.placements.iter().enumerate() {
            let at = |field: &str| format!("placements[{k}]{field}");
            let Some(&b) = buffer_of.get(p.tensor.as_str()) else {
                return Err(structure(
                    at(".tensor"),
                    format!("tensor `{}` has no buffer in the dump", p.tensor),
                ));
            };
            let buffer = &problem.buffers[b];
            let device = &problem.device_ids[buffer.device()];
            if p.device != *device {
                return Err(structure(
                    at(".device"),
                    format!(
                        "tensor `{}` is on device `{device}`, not `{}`",
                        p.tensor, p.device
                    ),
                ));
            }
            if p.size != buffer.size {
                return Err(structure(
                    at(".size"),
                    format!(
                        "tensor `{}` has {} bytes, not {}",
                        p.tensor, buffer.size, p.size
                    ),
                ));
            }
            let span = buffer.span(problem.positions);
            let always_live = buffer.is_always_live();
            if p.live != [span.first, span.last] || p.always_live != always_live {
                return Err(structure(
                    at(".live"),
                    format!(
                        "tensor `{}` lives on [{}, {}]{}, not as the report says",
                        p.tensor,
                        span.first,
                        span.last,
                        if always_live { " (always-live)" } else { "" }
                    ),
                ));
            }
            if placements[b].is_some() {
                return Err(structure(
                    at(".tensor"),
                    format!("tensor `{}` is placed twice", p.tensor),
                ));
            }
            placements[b] = Some(Placement {
                pool: p.pool,
                offset: p.offset,
            });
        }
        let placements = placements
            .into_iter()
            .enumerate()
            .map(|(b, p)| {
                p.ok_or_else(|| {
                    structure(
                        "placements".into(),
                        format!("tensor `{}` has no placement", problem.buffer_name(b)),
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        Ok((pools, placements))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_core::{Buffer, Lifetime, LiveInterval, PlanOptions};

    /// A report reads back onto the problem it was written from, whether the problem lists its
    /// buffers' names or leaves them to be named by index.
    #[test]
    fn a_report_reads_back_onto_its_problem_named_or_not() {
        let buffer = |first, last| {
            Buffer::new(
                0,
                64,
                3,
                None,
                Lifetime::Live(LiveInterval::new(first, last)),
            )
        };
        let unnamed = Problem {
            device_ids: vec!["d".into()],
            positions: 3,
            buffers: vec![buffer(0, 1), buffer(1, 2), buffer(2, 2)],
            names: Vec::new(),
            position_times: Vec::new(),
        };
        let named = Problem {
            names: vec!["a".into(), "b".into(), "c".into()],
            ..unnamed.clone()
        };
        for problem in [unnamed, named] {
            let plan = memplan_core::plan(&problem, &PlanOptions::default()).unwrap();
            let report = PlanReport::new(&problem, &|b| problem.buffer_name(b), &plan);
            let (pools, placements) = report.layout_for(&problem).unwrap();
            assert_eq!(placements, plan.placements);
            assert_eq!(pools.len(), 1);
        }
    }
}
